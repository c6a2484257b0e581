/*
 * check_repair.c - repair sessions (repair/repair.h) run in one process
 * on a fake host: two or three replicas whose data differ, each an
 * in-memory record list behind its own struct repair_host, talking through
 * a fake network of queued answers, on a fake clock. No sockets, no
 * threads, no sleeping: pool jobs, answers and timers are events run in
 * order of their due time, and the clock jumps to the next one.
 *
 * A replica's host answers RPC_MSG_MERKLE with its own repair_serve,
 * RPC_MSG_STREAM with a donor scan of its records and RPC_MSG_STREAM_PUSH
 * with a last-write-wins merge, as the daemon does. Records are encoded as
 * storage encodes them (store_record_encode), so the leaves hash the bytes
 * a node's do. The expectations are computed independently of repair/:
 * which leaves differ by testing each differing key's token against the
 * leaf plan, what a leaf hashes by serialising its records, which version
 * of a key wins by store_record_cmp.
 */
#include <errno.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <check.h>

#include "common/rk.h"
#include "repair/merkle.h"
#include "repair/repair.h"
#include "ring/ring.h"
#include "storage/store.h"
#include "wire/rpc_msg.h"

/* ---- the fake world ------------------------------------------------------ */

#define NREP      3
#define RECS_MAX  1024
#define EVS_MAX   8192
#define REC_BYTES 64
#define STALL_MS  5000 /* the fake stall tracker's stall_warning_s */

struct rec {
    uint64_t token;
    char key[16];
    size_t klen;
    uint8_t bytes[REC_BYTES]; /* store_record_encode'd */
    size_t blen;
};

struct fake {
    char name[24];
    struct rec recs[RECS_MAX];
    size_t nrec;
    repair *r;
    uint64_t range_keys;  /* what host.range_keys reports (the depth) */
    bool down;            /* gossip says DOWN */
    bool dead;            /* its answers never come: requests time out */
    int overloaded_pulls; /* STREAM answered OVERLOADED this many times... */
    bool then_dies;       /* ...and then it is dead */
    int refusals; /* requests to it refused (a node restarting): this many,
                     -1 every one */
    int refused;  /* requests to it refused so far */
    bool stopping;
    int jobs;          /* job_begin less job_end */
    uint64_t begun_ms; /* now at the last job_begin */
    int budget_out;    /* budget taken, not settled */
    int bad_frames;
    bool due;
    uint64_t joined_ms;
    int due_done;
    /* the stall tracker */
    uint64_t progress_ms;
    int stall_fails;
    char stall_step[32], stall_peer[32];
    int stall_err;
    bool stalled, was_stalled;
    char text_stalled[2048]; /* repair_text the first tick it stalled */
    char log[32768];
    size_t loglen;
    uint8_t saved[4096]; /* host.sched_save's last blob */
    size_t nsaved;
    int saves;
};

struct ev {
    uint64_t due, seq;
    void (*fn)(void *p);
    void *p;
};

static struct world {
    uint64_t now, seq;
    struct ev evs[EVS_MAX];
    size_t nev;
    struct fake rep[NREP];
    size_t nrep;
    ring *ring;
    struct ring_member members[NREP]; /* the ring's, for a new epoch */
    uint64_t tick_ms, next_tick; /* repair_tick on every replica (0: off) */
    uint64_t interval_ms;        /* the schedule's (0: off) */
} W;

static void ev_add(uint64_t delay, void (*fn)(void *p), void *p)
{
    ck_assert_uint_lt(W.nev, EVS_MAX);
    W.evs[W.nev++] = (struct ev){W.now + delay, W.seq++, fn, p};
}

/* repair_text of r into text (cap bytes, NUL-terminated). */
static void text_of(repair *r, char *text, size_t cap)
{
    memset(text, 0, cap);
    FILE *m = fmemopen(text, cap - 1, "w");
    ck_assert_ptr_nonnull(m);
    repair_text(r, m);
    fclose(m);
}

static void tick_all(void)
{
    for (size_t i = 0; i < W.nrep; i++) {
        struct fake *f = &W.rep[i];
        repair_tick(f->r);
        if (f->stalled && !f->was_stalled) {
            f->was_stalled = true;
            text_of(f->r, f->text_stalled, sizeof(f->text_stalled));
        }
    }
}

/* Runs the events (and the ticks, when on) in time order until none is
 * left due by `until`; the clock ends at the last one run (or at until,
 * if finite). */
static void run_until(uint64_t until)
{
    for (;;) {
        size_t best = W.nev;
        for (size_t i = 0; i < W.nev; i++)
            if (best == W.nev || W.evs[i].due < W.evs[best].due ||
                (W.evs[i].due == W.evs[best].due &&
                 W.evs[i].seq < W.evs[best].seq))
                best = i;
        uint64_t due = best < W.nev ? W.evs[best].due : UINT64_MAX;
        bool idle = best == W.nev && until == UINT64_MAX;
        if (W.tick_ms && !idle && W.next_tick <= due && W.next_tick <= until) {
            W.now = W.next_tick;
            W.next_tick += W.tick_ms;
            tick_all();
            continue;
        }
        if (best == W.nev || due > until)
            break;
        struct ev e = W.evs[best];
        W.evs[best] = W.evs[--W.nev];
        if (e.due > W.now)
            W.now = e.due;
        e.fn(e.p);
    }
    if (until != UINT64_MAX && W.now < until)
        W.now = until;
}

static void run(void)
{
    run_until(UINT64_MAX);
}

static struct fake *fake_by_name(const char *name)
{
    for (size_t i = 0; i < W.nrep; i++)
        if (strcmp(W.rep[i].name, name) == 0)
            return &W.rep[i];
    return NULL;
}

/* ---- records ------------------------------------------------------------- */

static void rec_encode(
    struct rec *out, const char *key, uint64_t ts, bool tomb, const char *value)
{
    memset(out, 0, sizeof(*out));
    snprintf(out->key, sizeof(out->key), "%s", key);
    out->klen = strlen(out->key);
    out->token = rk_token(out->key, out->klen);
    struct store_record sr = {.ts = ts,
                              .flags = tomb ? STORE_REC_TOMBSTONE : 0,
                              .value = tomb ? RK_SLICE(NULL, 0)
                                            : RK_SLICE(value, strlen(value))};
    ck_assert_int_eq(
        store_record_encode(out->bytes, sizeof(out->bytes), &out->blen, &sr),
        0);
}

static struct rec *rec_find(struct fake *f, struct rk_slice key)
{
    for (size_t i = 0; i < f->nrec; i++)
        if (f->recs[i].klen == key.len &&
            memcmp(f->recs[i].key, key.p, key.len) == 0)
            return &f->recs[i];
    return NULL;
}

static void put(struct fake *f, const char *key, uint64_t ts, const char *v)
{
    struct rec r;
    rec_encode(&r, key, ts, v == NULL, v ? v : "");
    struct rec *old = rec_find(f, RK_SLICE(r.key, r.klen));
    if (!old) {
        ck_assert_uint_lt(f->nrec, RECS_MAX);
        old = &f->recs[f->nrec++];
    }
    *old = r;
}

/* Keys from..to (not included), step apart, set to v at ts on f. */
static void
put_keys(struct fake *f, int from, int to, int step, uint64_t ts, const char *v)
{
    char k[16];
    for (int i = from; i < to; i += step) {
        snprintf(k, sizeof(k), "k%04d", i);
        put(f, k, ts, v);
    }
}

static int rec_cmp(const struct rec *a, const struct rec *b)
{
    struct store_record x, y;
    ck_assert_int_eq(store_record_decode(&x, a->bytes, a->blen), 0);
    ck_assert_int_eq(store_record_decode(&y, b->bytes, b->blen), 0);
    return store_record_cmp(&x, &y);
}

/* A record another node sent, merged last-write-wins. */
static void
merge(struct fake *f, struct rk_slice key, const struct rpc_record *rr)
{
    struct rec r = {0};
    ck_assert_uint_lt(key.len, sizeof(r.key));
    memcpy(r.key, key.p, key.len);
    r.klen = key.len;
    r.token = rk_token(r.key, r.klen);
    struct store_record sr = {
        .ts = rr->ts,
        .flags = (rr->flags & RPC_REC_TOMBSTONE) ? STORE_REC_TOMBSTONE : 0,
        .value = rr->value};
    ck_assert_int_eq(
        store_record_encode(r.bytes, sizeof(r.bytes), &r.blen, &sr), 0);
    struct rec *old = rec_find(f, key);
    if (!old) {
        ck_assert_uint_lt(f->nrec, RECS_MAX);
        f->recs[f->nrec++] = r;
    } else if (rec_cmp(&r, old) > 0) {
        *old = r;
    }
}

static struct rpc_record to_rpc(const struct rec *r)
{
    struct store_record sr;
    ck_assert_int_eq(store_record_decode(&sr, r->bytes, r->blen), 0);
    return (struct rpc_record){
        .ts = sr.ts,
        .flags = (sr.flags & STORE_REC_TOMBSTONE) ? RPC_REC_TOMBSTONE : 0,
        .value = sr.value};
}

/* Scan order along an arc: tokens from arc.start on, then keys. */
static uint64_t g_from;
static int along(const void *a, const void *b)
{
    const struct rec *x = *(const struct rec *const *)a;
    const struct rec *y = *(const struct rec *const *)b;
    uint64_t dx = x->token - g_from - 1, dy = y->token - g_from - 1;
    if (dx != dy)
        return dx < dy ? -1 : 1;
    size_t l = x->klen < y->klen ? x->klen : y->klen;
    int c = memcmp(x->key, y->key, l);
    return c ? c : (x->klen > y->klen) - (x->klen < y->klen);
}

/* f's records in arc, in scan order, into out[] (RECS_MAX). */
static size_t in_arc(struct fake *f, struct ring_range arc, struct rec **out)
{
    size_t n = 0;
    for (size_t i = 0; i < f->nrec; i++)
        if (ring_range_contains(arc, f->recs[i].token))
            out[n++] = &f->recs[i];
    g_from = arc.start;
    qsort(out, n, sizeof(*out), along);
    return n;
}

static uint64_t fingerprint(struct rk_slice key, const struct rpc_record *rec)
{
    return rk_token(key.p, key.len) ^ (rec->ts * 0x9E3779B97F4A7C15ull) ^
           ((uint64_t)rec->flags << 56);
}

/* A donor's chunk of at's arc after `at`: about max bytes of keys and
 * values, leaving out skip[]. */
static void chunk(struct fake *f,
                  const struct rpc_stream_pos *at,
                  uint32_t max,
                  const uint64_t *skip,
                  size_t nskip,
                  struct rpc_buf *items,
                  struct rpc_stream_chunk *ch,
                  uint8_t *last)
{
    static struct rec *v[RECS_MAX];
    struct ring_range arc = {at->start, at->end};
    size_t n = in_arc(f, arc, v), i = 0;
    struct rec cur = {.token = at->pos};
    ck_assert_uint_lt(at->last.len, sizeof(cur.key));
    if (at->last.len)
        memcpy(cur.key, at->last.p, at->last.len);
    cur.klen = at->last.len;
    const struct rec *curp = &cur;
    while (at->started && i < n && along(&v[i], &curp) <= 0)
        i++;
    *ch = (struct rpc_stream_chunk){.next = *at};
    uint64_t kv = 0;
    for (; i < n && kv < max; i++) {
        struct rpc_record rr = to_rpc(v[i]);
        struct rk_slice key = RK_SLICE(v[i]->key, v[i]->klen);
        uint64_t fp = fingerprint(key, &rr);
        bool skipped = false;
        for (size_t k = 0; k < nskip; k++)
            skipped |= skip[k] == fp;
        if (!skipped) {
            ck_assert_int_eq(rpc_stream_item_add(items, key, &rr), 0);
            ch->count++;
            kv += key.len + rr.value.len;
        }
        ch->next.started = true;
        ch->next.pos = v[i]->token;
        memcpy(last, v[i]->key, v[i]->klen);
        ch->next.last = RK_SLICE(last, v[i]->klen);
    }
    ch->next.done = i == n;
    ch->items = RK_SLICE(items->data, items->len);
}

static bool same_data(struct fake *a, struct fake *b)
{
    if (a->nrec != b->nrec)
        return false;
    for (size_t i = 0; i < a->nrec; i++) {
        struct rec *o = rec_find(b, RK_SLICE(a->recs[i].key, a->recs[i].klen));
        if (!o || o->blen != a->recs[i].blen ||
            memcmp(o->bytes, a->recs[i].bytes, o->blen) != 0)
            return false;
    }
    return true;
}

/* ---- the fake network ---------------------------------------------------- */

struct delivery {
    repair_rpc_cb cb;
    void *cb_arg;
    int status;
    size_t len;
    uint8_t bytes[];
};

static void deliver(void *p)
{
    struct delivery *d = p;
    d->cb(d->cb_arg, d->status, RK_SLICE(d->bytes, d->len));
    free(d);
}

static void answer(uint64_t delay,
                   repair_rpc_cb cb,
                   void *cb_arg,
                   int status,
                   struct rk_slice msg)
{
    struct delivery *d = malloc(sizeof(*d) + msg.len + 1);
    ck_assert_ptr_nonnull(d);
    *d = (struct delivery){cb, cb_arg, status, msg.len};
    if (msg.len)
        memcpy(d->bytes, msg.p, msg.len);
    ev_add(delay, deliver, d);
}

static void served(void *arg, uint64_t id, struct rk_slice msg)
{
    struct delivery *d = arg;
    (void)id;
    answer(1, d->cb, d->cb_arg, 0, msg);
    free(d);
}

static void serve_stream(struct fake *t,
                         struct rk_slice msg,
                         repair_rpc_cb cb,
                         void *cb_arg)
{
    struct rpc_stream_req rq;
    ck_assert_int_eq(rpc_stream_req_decode(&rq, msg), 0);
    struct rpc_buf items = RPC_BUF_INIT, out = RPC_BUF_INIT;
    struct rpc_stream_chunk ch = {.next = rq.at};
    uint8_t last[RPC_STREAM_LAST_MAX];
    if (t->overloaded_pulls > 0) {
        ch.status = RK_EOVERLOADED;
        if (--t->overloaded_pulls == 0 && t->then_dies)
            t->dead = true;
    } else {
        chunk(t, &rq.at, rq.max_bytes, NULL, 0, &items, &ch, last);
    }
    ck_assert_int_eq(rpc_stream_chunk_encode(&out, &ch), 0);
    answer(1, cb, cb_arg, 0, RK_SLICE(out.data, out.len));
    rpc_buf_free(&items);
    rpc_buf_free(&out);
}

static void
serve_push(struct fake *t, struct rk_slice msg, repair_rpc_cb cb, void *cb_arg)
{
    struct rpc_stream_chunk ch;
    ck_assert_int_eq(rpc_stream_push_decode(&ch, msg), 0);
    struct rk_slice it = ch.items, key;
    struct rpc_record rr;
    while (rpc_stream_item_next(&it, &key, &rr) == 1)
        merge(t, key, &rr);
    struct rpc_buf out = RPC_BUF_INIT;
    struct rpc_write_ack ack = {.status = 0, .hlc = 1};
    ck_assert_int_eq(rpc_write_ack_encode(&out, &ack), 0);
    answer(1, cb, cb_arg, 0, RK_SLICE(out.data, out.len));
    rpc_buf_free(&out);
}

/* ---- the fake host ---------------------------------------------------------
 */

static uint64_t h_now_ms(void *arg)
{
    (void)arg;
    return W.now;
}

static void h_log(void *arg,
                  enum repair_log_level level,
                  const char *event,
                  const char *fields)
{
    struct fake *f = arg;
    size_t room = sizeof(f->log) - f->loglen;
    int l = snprintf(f->log + f->loglen, room, "%d %s %s\n", (int)level, event,
                     fields);
    if (l > 0 && (size_t)l < room)
        f->loglen += (size_t)l;
}

static bool h_stopping(void *arg)
{
    return ((struct fake *)arg)->stopping;
}

static void h_job_begin(void *arg)
{
    struct fake *f = arg;
    f->jobs++;
    f->begun_ms = W.now;
}

static void h_job_end(void *arg)
{
    ((struct fake *)arg)->jobs--;
}

struct work {
    void (*work)(void *job);
    void (*after)(void *job);
    void *job;
};

static void work_run(void *p)
{
    struct work *w = p;
    w->work(w->job);
    w->after(w->job);
    free(w);
}

static int h_queue_work(void *arg,
                        void (*work)(void *job),
                        void (*after)(void *job),
                        void *job)
{
    (void)arg;
    struct work *w = malloc(sizeof(*w));
    ck_assert_ptr_nonnull(w);
    *w = (struct work){work, after, job};
    ev_add(1, work_run, w);
    return 0;
}

static int
h_timer_start(void *arg, uint32_t ms, void (*cb)(void *cb_arg), void *cb_arg)
{
    (void)arg;
    ev_add(ms, cb, cb_arg);
    return 0;
}

static uint64_t h_hlc(void *arg)
{
    (void)arg;
    return 1;
}

static void h_bad_frame(void *arg)
{
    ((struct fake *)arg)->bad_frames++;
}

static const ring *h_ring(void *arg)
{
    (void)arg;
    return W.ring;
}

static int h_ring_settled(void *arg, uint32_t *self, char *why, size_t cap)
{
    struct fake *f = arg;
    *self = ring_node_find(W.ring, f->name);
    if (*self == RING_NONE) {
        snprintf(why, cap, "not in the ring");
        return RK_EBADREQ;
    }
    return 0;
}

static bool h_peer_up(void *arg, const char *peer)
{
    struct fake *t = fake_by_name(peer);
    return t && t != arg && !t->down;
}

static int h_rpc(void *arg,
                 const char *peer,
                 struct rk_slice msg,
                 uint32_t timeout_ms,
                 repair_rpc_cb cb,
                 void *cb_arg)
{
    struct fake *t = fake_by_name(peer);
    if (!h_peer_up(arg, peer))
        return RK_EUNAVAILABLE;
    if (t->dead) {
        answer(timeout_ms, cb, cb_arg, RK_ETIMEOUT, RK_SLICE(NULL, 0));
        return 0;
    }
    if (t->refusals != 0) {
        t->refusals -= t->refusals > 0;
        t->refused++;
        answer(1, cb, cb_arg, -ECONNREFUSED, RK_SLICE(NULL, 0));
        return 0;
    }
    enum rpc_msg_type type;
    ck_assert_int_eq(rpc_msg_type_peek(&type, msg), 0);
    if (type == RPC_MSG_MERKLE) {
        struct delivery *d = malloc(sizeof(*d));
        ck_assert_ptr_nonnull(d);
        *d = (struct delivery){.cb = cb, .cb_arg = cb_arg};
        repair_serve(t->r, msg, 7, served, d);
    } else if (type == RPC_MSG_STREAM) {
        serve_stream(t, msg, cb, cb_arg);
    } else {
        ck_assert_int_eq(type, RPC_MSG_STREAM_PUSH);
        serve_push(t, msg, cb, cb_arg);
    }
    return 0;
}

static int h_range_keys(void *arg,
                        uint64_t token,
                        struct ring_range *range,
                        uint64_t *keys)
{
    (void)token;
    *range = (struct ring_range){0, 0}; /* one range: the whole ring */
    *keys = ((struct fake *)arg)->range_keys;
    return 0;
}

static int
h_scan(void *arg, struct ring_range arc, repair_item_cb cb, void *cb_arg)
{
    static struct rec *v[RECS_MAX];
    size_t n = in_arc(arg, arc, v);
    int rc = 0;
    for (size_t i = 0; i < n && rc == 0; i++)
        rc = cb(cb_arg, v[i]->token, RK_SLICE(v[i]->key, v[i]->klen),
                RK_SLICE(v[i]->bytes, v[i]->blen));
    return rc;
}

static bool h_budget_take(void *arg)
{
    ((struct fake *)arg)->budget_out++;
    return true;
}

static void h_budget_settle(void *arg, uint64_t moved)
{
    (void)moved;
    ((struct fake *)arg)->budget_out--;
}

struct push_scan {
    struct fake *f;
    struct rpc_stream_pos at;
    uint8_t at_last[RPC_STREAM_LAST_MAX];
    uint32_t max;
    const uint64_t *skip;
    size_t nskip;
    repair_scan_cb cb;
    void *cb_arg;
};

static void push_scan_run(void *p)
{
    struct push_scan *ps = p;
    struct rpc_buf items = RPC_BUF_INIT, frame = RPC_BUF_INIT;
    struct rpc_stream_chunk ch;
    uint8_t last[RPC_STREAM_LAST_MAX];
    chunk(ps->f, &ps->at, ps->max, ps->skip, ps->nskip, &items, &ch, last);
    ck_assert_int_eq(rpc_stream_push_encode(&frame, &ch), 0);
    uint64_t kv = 0;
    struct rk_slice it = ch.items, key;
    struct rpc_record rr;
    while (rpc_stream_item_next(&it, &key, &rr) == 1)
        kv += key.len + rr.value.len;
    ps->cb(ps->cb_arg, 0, &ch, kv, RK_SLICE(frame.data, frame.len));
    rpc_buf_free(&items);
    rpc_buf_free(&frame);
    free(ps);
}

static int h_push_scan(void *arg,
                       const struct rpc_stream_pos *at,
                       uint32_t max_bytes,
                       const uint64_t *skip,
                       size_t nskip,
                       repair_scan_cb cb,
                       void *cb_arg)
{
    struct push_scan *ps = malloc(sizeof(*ps));
    ck_assert_ptr_nonnull(ps);
    *ps = (struct push_scan){.f = arg,
                             .at = *at,
                             .max = max_bytes,
                             .skip = skip,
                             .nskip = nskip,
                             .cb = cb,
                             .cb_arg = cb_arg};
    if (at->last.len)
        memcpy(ps->at_last, at->last.p, at->last.len);
    ps->at.last = RK_SLICE(ps->at_last, at->last.len);
    ev_add(1, push_scan_run, ps);
    return 0;
}

struct committed {
    repair_items_cb cb;
    void *cb_arg;
    uint32_t keys;
    uint64_t bytes;
};

static void committed_run(void *p)
{
    struct committed *c = p;
    c->cb(c->cb_arg, 0, c->keys, c->bytes);
    free(c);
}

static int h_commit_items(void *arg,
                          struct ring_range rg,
                          struct rk_slice items,
                          repair_items_cb cb,
                          void *cb_arg)
{
    struct rk_slice it = items, key;
    struct rpc_record rr;
    while (rpc_stream_item_next(&it, &key, &rr) == 1)
        if (!ring_range_contains(rg, rk_token(key.p, key.len)))
            return RK_EPROTO;
    struct committed *c = calloc(1, sizeof(*c));
    ck_assert_ptr_nonnull(c);
    *c = (struct committed){.cb = cb, .cb_arg = cb_arg};
    it = items;
    while (rpc_stream_item_next(&it, &key, &rr) == 1) {
        merge(arg, key, &rr);
        c->keys++;
        c->bytes += key.len + rr.value.len;
    }
    ev_add(1, committed_run, c);
    return 0;
}

static uint64_t h_record_fingerprint(void *arg,
                                     struct rk_slice key,
                                     const struct rpc_record *rec)
{
    (void)arg;
    return fingerprint(key, rec);
}

static void h_human_bytes(void *arg, char *out, size_t cap, uint64_t bytes)
{
    (void)arg;
    snprintf(out, cap, "%llu B", (unsigned long long)bytes);
}

static void h_stall_start(void *arg)
{
    struct fake *f = arg;
    f->progress_ms = W.now;
    f->stalled = false;
    f->stall_err = 0;
}

static void h_stall_progress(void *arg)
{
    struct fake *f = arg;
    f->progress_ms = W.now;
    f->stalled = false;
    f->stall_err = 0;
}

static void h_stall_fail(void *arg,
                         const char *step,
                         const char *peer,
                         const struct ring_range *range,
                         int err)
{
    struct fake *f = arg;
    (void)range;
    f->stall_fails++;
    f->stall_err = err;
    snprintf(f->stall_step, sizeof(f->stall_step), "%s", step);
    snprintf(f->stall_peer, sizeof(f->stall_peer), "%s", peer ? peer : "");
}

static void h_stall_check(void *arg, bool work_left)
{
    struct fake *f = arg;
    if (!work_left)
        f->progress_ms = W.now;
    f->stalled = work_left && W.now - f->progress_ms >= STALL_MS;
}

static void h_stall_text(void *arg, FILE *out)
{
    struct fake *f = arg;
    if (f->stalled)
        fprintf(out, "Stalled: %s %s: %s\n", f->stall_step, f->stall_peer,
                rk_strerror(f->stall_err));
}

static bool h_after_join_due(void *arg, uint64_t *joined_ms)
{
    struct fake *f = arg;
    *joined_ms = f->joined_ms;
    return f->due;
}

static void h_after_join_done(void *arg)
{
    struct fake *f = arg;
    f->due = false;
    f->due_done++;
}

/* The wall clock: the fake one, far from 0 as Unix time is. */
#define WALL0 UINT64_C(1700000000000)

static uint64_t h_wall_ms(void *arg)
{
    (void)arg;
    return WALL0 + W.now;
}

static void h_sched_save(void *arg, struct rk_slice blob)
{
    struct fake *f = arg;
    ck_assert_uint_le(blob.len, sizeof(f->saved));
    memcpy(f->saved, blob.p, blob.len);
    f->nsaved = blob.len;
    f->saves++;
}

/* ---- set-up ------------------------------------------------------------- */

/* n replicas n1..nn of RF n, each with 4 tokens (seeded), no records. */
/* f's repair part on the fake host (at start, and at a restart). */
static void fake_start(struct fake *f)
{
    struct repair_host h = {
        .arg = f,
        .now_ms = h_now_ms,
        .log = h_log,
        .stopping = h_stopping,
        .job_begin = h_job_begin,
        .job_end = h_job_end,
        .queue_work = h_queue_work,
        .timer_start = h_timer_start,
        .hlc = h_hlc,
        .bad_frame = h_bad_frame,
        .ring = h_ring,
        .ring_settled = h_ring_settled,
        .peer_up = h_peer_up,
        .rpc = h_rpc,
        .range_keys = h_range_keys,
        .scan = h_scan,
        .budget_take = h_budget_take,
        .budget_settle = h_budget_settle,
        .push_scan = h_push_scan,
        .commit_items = h_commit_items,
        .record_fingerprint = h_record_fingerprint,
        .human_bytes = h_human_bytes,
        .stall_start = h_stall_start,
        .stall_progress = h_stall_progress,
        .stall_fail = h_stall_fail,
        .stall_check = h_stall_check,
        .stall_text = h_stall_text,
        .after_join_due = h_after_join_due,
        .after_join_done = h_after_join_done,
        .wall_ms = h_wall_ms,
        .sched_save = h_sched_save,
    };
    struct repair_options opt = REPAIR_OPTIONS_INIT;
    opt.node_name = f->name;
    opt.interval_ms = W.interval_ms;
    opt.chunk_bytes = 64; /* a few records a chunk: many chunks */
    ck_assert_int_eq(repair_new(&f->r, &h, &opt), 0);
}

static void world_new_sched(size_t n, uint64_t seed, uint64_t interval_ms);

static void world_new(size_t n, uint64_t seed)
{
    world_new_sched(n, seed, 0);
}

/* As world_new, with the repair schedule every interval_ms (0: off). */
static void world_new_sched(size_t n, uint64_t seed, uint64_t interval_ms)
{
    memset(&W, 0, sizeof(W));
    W.interval_ms = interval_ms;
    W.now = 1000;
    W.nrep = n;
    static uint64_t tokens[NREP][4];
    struct ring_member *m = W.members;
    for (size_t i = 0; i < n; i++) {
        struct fake *f = &W.rep[i];
        snprintf(f->name, sizeof(f->name), "n%zu", i + 1);
        f->range_keys = 2048;
        for (size_t t = 0; t < 4; t++) {
            uint64_t z = (seed += 0x9e3779b97f4a7c15ULL);
            z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
            tokens[i][t] = z ^ (z >> 27);
        }
        m[i] = (struct ring_member){f->name, NULL, NULL,       tokens[i],
                                    4,       0,    RING_NORMAL};
    }
    struct ring_config cfg = {m, n, {RING_SIMPLE, (unsigned)n, NULL, 0}, 7};
    ck_assert_int_eq(ring_new(&W.ring, &cfg), 0);
    for (size_t i = 0; i < n; i++)
        fake_start(&W.rep[i]);
}

static void world_free(void)
{
    for (size_t i = 0; i < W.nrep; i++) {
        ck_assert_int_eq(W.rep[i].jobs, 0);
        ck_assert_int_eq(W.rep[i].budget_out, 0);
        repair_free(W.rep[i].r);
    }
    ring_free(W.ring);
    ck_assert_uint_eq(W.nev, 0);
}

/* The same 200 keys on every replica. */
static void common_data(void)
{
    char k[16], v[16];
    for (int i = 0; i < 200; i++) {
        snprintf(k, sizeof(k), "k%04d", i);
        snprintf(v, sizeof(v), "v%d", i);
        for (size_t r = 0; r < W.nrep; r++)
            put(&W.rep[r], k, 100, v);
    }
}

static void key_of(char *k, int i)
{
    snprintf(k, 16, "k%04d", i);
}

/* repair_begin on f with only (may be NULL), run to the end; the text. */
static void repair_run(struct fake *f,
                       const struct ring_range *only,
                       char *text,
                       size_t cap)
{
    char *t = NULL;
    size_t len = 0;
    int rc = repair_begin(f->r, only, &t, &len);
    ck_assert_msg(rc == 0, "repair_begin: %s: %s", rk_strerror(rc), t ? t : "");
    ck_assert_ptr_nonnull(strstr(t, "repair started"));
    free(t);
    run();
    ck_assert(!repair_running(f->r));
    text_of(f->r, text, cap);
}

/* ---- expectations, brute force --------------------------------------------
 */

struct expect {
    size_t cmps, differed;
    uint64_t leaves, leaves_diff, keys_in, bytes_in, keys_out, bytes_out;
    char lines[4096]; /* the repair.differ lines a's log must hold */
    size_t len;
};

static size_t kv_len(const struct rec *r)
{
    struct store_record sr;
    ck_assert_int_eq(store_record_decode(&sr, r->bytes, r->blen), 0);
    return r->klen + sr.value.len;
}

/* What a repair of a by b over every arc must do: per arc (the ring's, in
 * order) the leaves that hold a key whose records differ, the runs they
 * make (checked in a's log), what it pulls (b's records in those leaves)
 * and pushes (a's keys that win over b's or that b lacks). */
static void expect_two(struct expect *e, struct fake *a, struct fake *b)
{
    memset(e, 0, sizeof(*e));
    size_t na = ring_token_count(W.ring);
    for (size_t i = 0; i < na; i++) {
        struct ring_range arc = ring_arc_range(W.ring, i);
        unsigned depth =
            merkle_depth_choose(arc, (struct ring_range){0, 0}, a->range_keys);
        size_t nl = (size_t)1 << depth;
        bool *diff = calloc(nl, sizeof(*diff));
        ck_assert_ptr_nonnull(diff);
        struct fake *sides[2] = {a, b};
        for (int s = 0; s < 2; s++) {
            struct fake *x = sides[s], *y = sides[1 - s];
            for (size_t k = 0; k < x->nrec; k++) {
                struct rec *r = &x->recs[k];
                if (!ring_range_contains(arc, r->token))
                    continue;
                struct rec *o = rec_find(y, RK_SLICE(r->key, r->klen));
                if (o && o->blen == r->blen &&
                    memcmp(o->bytes, r->bytes, r->blen) == 0)
                    continue;
                uint64_t leaf;
                ck_assert_int_eq(merkle_leaf_of(&leaf, arc, depth, r->token),
                                 0);
                diff[leaf] = true;
            }
        }
        size_t nd = 0, runs = 0;
        for (size_t l = 0; l < nl; l++) {
            nd += diff[l];
            runs += diff[l] && (l == 0 || !diff[l - 1]);
        }
        e->cmps++;
        e->leaves += nl;
        e->leaves_diff += nd;
        if (nd) {
            e->differed++;
            int l =
                snprintf(e->lines + e->len, sizeof(e->lines) - e->len,
                         "repair.differ range=(%llu,%llu] peer=%s "
                         "leaves=%zu differing=%zu runs=%zu\n",
                         (unsigned long long)arc.start,
                         (unsigned long long)arc.end, b->name, nl, nd, runs);
            ck_assert(l > 0 && (size_t)l < sizeof(e->lines) - e->len);
            e->len += (size_t)l;
        }
        for (size_t k = 0; k < b->nrec; k++) {
            struct rec *r = &b->recs[k];
            uint64_t leaf;
            if (ring_range_contains(arc, r->token) &&
                merkle_leaf_of(&leaf, arc, depth, r->token) == 0 &&
                diff[leaf]) {
                e->keys_in++;
                e->bytes_in += kv_len(r);
            }
        }
        for (size_t k = 0; k < a->nrec; k++) {
            struct rec *r = &a->recs[k];
            if (!ring_range_contains(arc, r->token))
                continue;
            struct rec *o = rec_find(b, RK_SLICE(r->key, r->klen));
            if (!o || rec_cmp(r, o) > 0) {
                e->keys_out++;
                e->bytes_out += kv_len(r);
            }
        }
        free(diff);
    }
}

/* Each of e's repair.differ lines is in f's log, and no other. */
static void check_differ_lines(const struct expect *e, const struct fake *f)
{
    size_t n = 0;
    for (const char *p = f->log; (p = strstr(p, "repair.differ ")); p++)
        n++;
    ck_assert_uint_eq(n, e->differed);
    char lines[sizeof(e->lines)];
    memcpy(lines, e->lines, sizeof(lines));
    for (char *l = strtok(lines, "\n"); l; l = strtok(NULL, "\n"))
        ck_assert_msg(strstr(f->log, l), "not in the log: %s\nlog:\n%s", l,
                      f->log);
}

/* a and b, once merged last-write-wins, into out. */
static void winners(struct fake *out, struct fake *a, struct fake *b)
{
    memcpy(out->recs, a->recs, sizeof(a->recs[0]) * a->nrec);
    out->nrec = a->nrec;
    for (size_t k = 0; k < b->nrec; k++) {
        struct rec *o =
            rec_find(out, RK_SLICE(b->recs[k].key, b->recs[k].klen));
        if (!o)
            out->recs[out->nrec++] = b->recs[k];
        else if (rec_cmp(&b->recs[k], o) > 0)
            *o = b->recs[k];
    }
}

/* Differences of every kind between n1 and n2: keys only one holds, a
 * newer value on either side, a newer delete on either side. */
static void diverge_two(void)
{
    struct fake *a = &W.rep[0], *b = &W.rep[1];
    char k[16];
    put_keys(a, 200, 206, 1, 120, "a-only"); /* only on n1 */
    put_keys(b, 206, 210, 1, 120, "b-only"); /* only on n2 */
    put_keys(a, 10, 14, 1, 150, "newer-a");  /* newer on n1 */
    put_keys(b, 40, 43, 1, 150, "newer-b");  /* newer on n2 */
    key_of(k, 77);
    put(a, k, 160, NULL); /* deleted on n1 */
    key_of(k, 88);
    put(b, k, 160, NULL); /* deleted on n2 */
}

/* n1 and n2 holding the common keys and diverge_two's differences; the
 * newest version of each key of either into want. */
static void two_diverged(uint64_t seed, struct fake *want)
{
    world_new(2, seed);
    common_data();
    diverge_two();
    winners(want, &W.rep[0], &W.rep[1]);
}

/* The same members under a new epoch: the ring changes under a session. */
static void ring_bump(void)
{
    ring *r = NULL;
    struct ring_config cfg = {W.members,
                              W.nrep,
                              {RING_SIMPLE, (unsigned)W.nrep, NULL, 0},
                              ring_epoch(W.ring) + 1};
    ck_assert_int_eq(ring_new(&r, &cfg), 0);
    ring_free(W.ring);
    W.ring = r;
}

/* ---- tests -------------------------------------------------------------- */

START_TEST(two_replicas_exchange_exactly_the_differences)
{
    static struct fake want;
    two_diverged(42, &want);
    struct fake *a = &W.rep[0], *b = &W.rep[1];
    ck_assert(!same_data(a, b));

    static struct expect e;
    expect_two(&e, a, b);
    ck_assert_uint_eq(e.cmps, 8); /* 2 x 4 tokens, one other replica */
    ck_assert_uint_ge(e.differed, 2);

    char text[2048], want_text[512];
    repair_run(a, NULL, text, sizeof(text));
    check_differ_lines(&e, a);
    snprintf(want_text, sizeof(want_text),
             "Repair: done in %.1f s: %zu comparisons, %zu differed (%llu of "
             "%llu leaves); %llu keys (%llu B) pulled, %llu keys (%llu B) "
             "pushed.\n",
             (double)(W.now - a->begun_ms) / 1000, e.cmps, e.differed,
             (unsigned long long)e.leaves_diff, (unsigned long long)e.leaves,
             (unsigned long long)e.keys_in, (unsigned long long)e.bytes_in,
             (unsigned long long)e.keys_out, (unsigned long long)e.bytes_out);
    ck_assert_str_eq(text, want_text);
    struct repair_stats st;
    repair_stats_get(&st, a->r);
    ck_assert_uint_eq(st.keys_in, e.keys_in);
    ck_assert_uint_eq(st.bytes_in, e.bytes_in);
    ck_assert_uint_eq(st.keys_out, e.keys_out);
    ck_assert_uint_eq(st.bytes_out, e.bytes_out);
    /* both hold the newest version of every key, deletes included */
    ck_assert(same_data(a, &want));
    ck_assert(same_data(b, &want));
    ck_assert_int_eq(a->bad_frames + b->bad_frames, 0);
    world_free();
}
END_TEST

/* A third replica: a repair of n1 against n2 and n3 brings n1 everything;
 * a second makes every replica the same (the first compared n2 before n1
 * had n3's); a third finds nothing left to do. */
START_TEST(three_replicas_converge)
{
    world_new(3, 7);
    common_data();
    diverge_two();
    struct fake *a = &W.rep[0], *b = &W.rep[1], *c = &W.rep[2];
    char k[16];
    put_keys(c, 120, 125, 1, 170, "newer-c"); /* newer on n3 */
    put_keys(c, 300, 304, 1, 90, "c-only");   /* only on n3 */
    key_of(k, 11); /* n3 deleted what n1 rewrote, later */
    put(c, k, 155, NULL);
    static struct fake ab, want;
    winners(&ab, a, b);
    winners(&want, &ab, c);

    char text[2048];
    repair_run(a, NULL, text, sizeof(text));
    ck_assert_msg(strstr(text, "Repair: done in"), "%s", text);
    ck_assert_ptr_null(strstr(text, "failed"));
    /* n1 has everything; n2 and n3 what n1 had when it compared with
     * each (the replicas of an arc are compared in ring order) */
    ck_assert(same_data(a, &want));
    ck_assert(!same_data(b, &want) || !same_data(c, &want));

    repair_run(a, NULL, text, sizeof(text));
    ck_assert(same_data(a, &want));
    ck_assert(same_data(b, &want));
    ck_assert(same_data(c, &want));

    repair_run(a, NULL, text, sizeof(text));
    ck_assert_msg(strstr(text, ": 24 comparisons, 0 differed (0 of "), "%s",
                  text);
    ck_assert_msg(strstr(text, "; 0 keys (0 B) pulled, 0 keys (0 B) pushed."),
                  "%s", text);
    world_free();
}
END_TEST

/* `ringkv repair START,END`: only the pieces of the arcs inside the range
 * are compared; differences outside it stay. */
START_TEST(only_repairs_inside_the_range)
{
    static struct fake a0, b0, want;
    two_diverged(99, &want);
    struct fake *a = &W.rep[0], *b = &W.rep[1];
    /* a range from inside one arc to inside another, wrapping or not */
    struct ring_range arc1 = ring_arc_range(W.ring, 1);
    struct ring_range arc5 = ring_arc_range(W.ring, 5);
    struct ring_range only = {arc1.start + (arc1.end - arc1.start) / 2,
                              arc5.start + (arc5.end - arc5.start) / 3};
    size_t pieces = 1;
    for (size_t i = 0; i < ring_token_count(W.ring); i++) {
        struct ring_range ai = ring_arc_range(W.ring, i);
        pieces += ring_range_contains(only, ai.end) && ai.end != only.end;
    }
    a0 = *a;
    b0 = *b;
    size_t inside = 0, outside = 0;
    for (size_t k = 0; k < want.nrec; k++) {
        struct rk_slice key = RK_SLICE(want.recs[k].key, want.recs[k].klen);
        struct rec *x = rec_find(a, key), *y = rec_find(b, key);
        bool differs = !x || !y || rec_cmp(x, y) != 0;
        if (differs && ring_range_contains(only, want.recs[k].token))
            inside++;
        else if (differs)
            outside++;
    }
    ck_assert_uint_gt(inside, 0);
    ck_assert_uint_gt(outside, 0);

    char text[2048], cmps[64];
    repair_run(a, &only, text, sizeof(text));
    snprintf(cmps, sizeof(cmps), ": %zu comparisons, ", pieces);
    ck_assert_msg(strstr(text, cmps), "want %s in %s", cmps, text);
    for (size_t k = 0; k < want.nrec; k++) {
        const struct rec *w = &want.recs[k];
        struct rk_slice key = RK_SLICE(w->key, w->klen);
        struct rec *x = rec_find(a, key), *y = rec_find(b, key);
        if (ring_range_contains(only, w->token)) { /* the newest on both */
            ck_assert(x && rec_cmp(x, w) == 0);
            ck_assert(y && rec_cmp(y, w) == 0);
            continue;
        }
        struct rec *x0 = rec_find(&a0, key), *y0 = rec_find(&b0, key);
        ck_assert((x == NULL) == (x0 == NULL)); /* as they were */
        ck_assert((y == NULL) == (y0 == NULL));
        ck_assert(!x || rec_cmp(x, x0) == 0);
        ck_assert(!y || rec_cmp(y, y0) == 0);
    }
    ck_assert_uint_eq(a->nrec + b->nrec,
                      a0.nrec + b0.nrec + inside -
                          (inside - (a->nrec - a0.nrec) - (b->nrec - b0.nrec)));
    world_free();
}
END_TEST

/* n3 answers its leaves, then its scans stay busy (STREAM answered
 * OVERLOADED: asked again every 200 ms, each reported to the stall
 * tracker, stalled after STALL_MS) and then it stops answering while
 * gossip still has it UP (timeouts: each step tried 4 times, 3 asked
 * again): the session goes on with the other comparisons and ends "done
 * with failures", naming the first. */
START_TEST(peer_failing_midway_ends_with_failures)
{
    world_new(3, 5);
    common_data();
    struct fake *a = &W.rep[0], *b = &W.rep[1], *c = &W.rep[2];
    char k[16];
    put_keys(c, 0, 200, 9, 200, "c"); /* n3 newer all around the ring */
    put_keys(b, 50, 54, 1, 200, "b"); /* n2 newer */
    c->overloaded_pulls = 30;
    c->then_dies = true;
    W.tick_ms = 1000;
    W.next_tick = W.now + 1000;

    char text[2048];
    repair_run(a, NULL, text, sizeof(text));
    ck_assert_msg(strstr(text, "Repair: done with failures in "), "%s", text);
    char first[128];
    snprintf(first, sizeof(first), "failed, the first: pull with n3: %s.\n",
             rk_strerror(RK_ETIMEOUT));
    ck_assert_msg(strstr(text, first), "want %s in %s", first, text);
    /* 30 OVERLOADED, then 3 timeouts asked again for each of the 12
     * comparisons with n3 that failed */
    ck_assert_msg(strstr(text, "; 12 failed, the first"), "%s", text);
    ck_assert_msg(strstr(text, "; 66 steps asked again (a replica busy"), "%s",
                  text);
    ck_assert_msg(strstr(a->log, "repair.compare_fail range="), "%s", a->log);
    ck_assert_msg(strstr(a->log, "peer=n3 phase=pulling why=\"pull\""), "%s",
                  a->log);
    ck_assert_ptr_null(strstr(a->log, "peer=n2 phase"));
    /* the tracker heard of each refusal and found the session stalled */
    ck_assert_int_eq(a->stall_fails, 66);
    ck_assert_str_eq(a->stall_peer, "with n3");
    ck_assert(a->was_stalled);
    ck_assert_msg(strstr(a->text_stalled, "Repair: running for "), "%s",
                  a->text_stalled);
    ck_assert_msg(strstr(a->text_stalled,
                         "; waiting: n3 answered OVERLOADED, asked again "
                         "every 200 ms ("),
                  "%s", a->text_stalled);
    char stalled[128];
    snprintf(stalled, sizeof(stalled), "Stalled: pulling with n3: %s\n",
             rk_strerror(RK_EOVERLOADED));
    ck_assert_msg(strstr(a->text_stalled, stalled), "%s", a->text_stalled);
    /* n1 and n2 agree: their comparisons did not depend on n3 */
    ck_assert(same_data(a, b));
    char v[32];
    key_of(k, 51);
    struct rec *r = rec_find(a, RK_SLICE(k, strlen(k)));
    ck_assert_ptr_nonnull(r);
    struct rpc_record rr = to_rpc(r);
    snprintf(v, sizeof(v), "%.*s", (int)rr.value.len, (const char *)rr.value.p);
    ck_assert_str_eq(v, "b");
    world_free();
}
END_TEST

/* The value of key k%04d (i) on f, into v (cap bytes); "" if none. */
static void value_of(struct fake *f, int i, char *v, size_t cap)
{
    char k[16];
    key_of(k, i);
    struct rec *r = rec_find(f, RK_SLICE(k, strlen(k)));
    v[0] = '\0';
    if (r) {
        struct rpc_record rr = to_rpc(r);
        snprintf(v, cap, "%.*s", (int)rr.value.len, (const char *)rr.value.p);
    }
}

/* How many times `what` occurs in s. */
static int count_of(const char *s, const char *what)
{
    int n = 0;
    for (const char *p = s; (p = strstr(p, what)); p += strlen(what))
        n++;
    return n;
}

/* Regression peer_refusing_once_is_asked_again: right after a restart a
 * replica refuses the connection (or resets it, or net/ backs off from
 * it) for a moment. Its request refused once is asked again 1 s later
 * (logged, told to the stall tracker), and the session ends "done" with
 * n3's newer values. Until 2026-12-06 that comparison failed at once and
 * one `ringkv repair --wait` in three right after a restart ended "done
 * with failures". */
START_TEST(peer_refusing_once_is_asked_again)
{
    world_new(3, 11);
    common_data();
    struct fake *a = &W.rep[0], *c = &W.rep[2];
    put_keys(c, 0, 200, 1, 200, "c"); /* n3 newer all around the ring */
    c->refusals = 1;

    char text[2048], v[32];
    uint64_t t0 = W.now;
    repair_run(a, NULL, text, sizeof(text));
    ck_assert_msg(strstr(text, "Repair: done in"), "%s", text);
    ck_assert_msg(!strstr(text, "failed"), "%s", text);
    ck_assert_msg(strstr(text, "; 1 step asked again (a replica busy, its "
                               "ring behind or not reachable for a moment)"),
                  "%s", text);
    ck_assert_int_eq(c->refused, 1);
    ck_assert_int_eq(count_of(a->log, "repair.retry "), 1);
    char want[160];
    snprintf(want, sizeof(want),
             "peer=n3 phase=comparing error=%s why=\"%s\" in_ms=1000 try=2 "
             "at_most=4",
             rk_errname(-ECONNREFUSED), rk_strerror(-ECONNREFUSED));
    ck_assert_msg(strstr(a->log, want), "want %s in %s", want, a->log);
    ck_assert_int_eq(a->stall_fails, 1);
    ck_assert_uint_ge(W.now - t0, 1000); /* it waited before asking again */
    for (int i = 0; i < 200; i++) {
        value_of(a, i, v, sizeof(v));
        ck_assert_str_eq(v, "c");
    }
    world_free();
}
END_TEST

/* A replica that refuses every time is tried 4 times a comparison (1, 2
 * and 4 s apart: netstats says so meanwhile) and each of its comparisons
 * fails: "done with failures", naming the refusal; the others go on. One
 * that gossip has DOWN is not asked at all. */
START_TEST(peer_refusing_always_fails_after_bounded_tries)
{
    world_new(3, 11);
    common_data();
    struct fake *a = &W.rep[0], *b = &W.rep[1], *c = &W.rep[2];
    put_keys(b, 0, 200, 1, 200, "b");
    c->refusals = -1;
    W.tick_ms = 500;
    W.next_tick = W.now + 500;

    char text[2048], v[32];
    repair_run(a, NULL, text, sizeof(text));
    ck_assert_msg(strstr(text, "Repair: done with failures in "), "%s", text);
    char first[128];
    snprintf(first, sizeof(first),
             "failed, the first: the replica's leaves "
             "with n3: %s.\n",
             rk_strerror(-ECONNREFUSED));
    ck_assert_msg(strstr(text, first), "want %s in %s", first, text);
    int fails = count_of(a->log, "repair.compare_fail ");
    ck_assert_int_gt(fails, 0);
    ck_assert_int_eq(count_of(a->log, "peer=n3 phase=comparing why="), fails);
    ck_assert_int_eq(c->refused, 4 * fails);
    ck_assert_int_eq(count_of(a->log, "repair.retry "), 3 * fails);
    ck_assert_int_eq(count_of(a->log, "in_ms=4000 try=4 at_most=4"), fails);
    ck_assert_ptr_null(strstr(a->log, "try=5"));
    ck_assert_msg(strstr(a->text_stalled, "; waiting: n3 could not be reached "
                                          "("),
                  "%s", a->text_stalled);
    for (int i = 0; i < 200; i++) { /* n2's comparisons were made */
        value_of(a, i, v, sizeof(v));
        ck_assert_str_eq(v, "b");
    }

    /* DOWN: its comparisons fail at once, nothing is asked again */
    c->down = true;
    c->refused = 0;
    repair_run(a, NULL, text, sizeof(text));
    ck_assert_msg(strstr(text, "Repair: done with failures in "), "%s", text);
    ck_assert_msg(!strstr(text, "asked again"), "%s", text);
    ck_assert_int_eq(c->refused, 0);
    world_free();
}
END_TEST

/* The leaves a replica answers: its records' hashes leaf by leaf, as
 * serialised here; refusals for another ring epoch, a depth the arc cannot
 * be cut to, and past two computations at a time. */
struct reply_seen {
    int calls;
    uint64_t id;
    uint8_t bytes[1 << 12];
    size_t len;
};

static void reply_keep(void *arg, uint64_t id, struct rk_slice msg)
{
    struct reply_seen *r = arg;
    r->calls++;
    r->id = id;
    ck_assert_uint_le(msg.len, sizeof(r->bytes));
    memcpy(r->bytes, msg.p, msg.len);
    r->len = msg.len;
}

static void ask(struct fake *f,
                uint64_t epoch,
                struct ring_range arc,
                unsigned depth,
                uint64_t id,
                struct reply_seen *seen)
{
    struct rpc_buf b = RPC_BUF_INIT;
    struct rpc_merkle_req rq = {epoch, arc.start, arc.end, depth};
    ck_assert_int_eq(rpc_merkle_req_encode(&b, &rq), 0);
    repair_serve(f->r, RK_SLICE(b.data, b.len), id, reply_keep, seen);
    rpc_buf_free(&b);
}

static void put_be(uint8_t *p, uint64_t v, int n)
{
    for (int i = 0; i < n; i++)
        p[i] = (uint8_t)(v >> (8 * (n - 1 - i)));
}

/* ---- the schedule ------------------------------------------------------- */

/* The records n kept last (host.sched_save), decoded. */
static size_t saved_of(struct fake *f, struct repair_arc_state **out)
{
    size_t n = 0;
    ck_assert_int_eq(repair_sched_decode(out, &n, f->saved, f->nsaved), 0);
    return n;
}

/* A world of 3 replicas with the schedule every iv ms, the same 200 keys
 * on each, ticking every second from now; the start time. */
static uint64_t sched_world(uint64_t iv, uint64_t seed)
{
    world_new_sched(3, seed, iv);
    common_data();
    W.tick_ms = 1000;
    W.next_tick = W.now + 1000;
    return W.now;
}

/* Every arc repaired within the interval by sessions the schedule starts
 * (none before half of it: a node just started does not scan everything),
 * one at a time; each record says when its repair began, the replicas
 * agree, and nothing is overdue. */
START_TEST(schedule_repairs_every_arc_within_the_interval)
{
    const uint64_t iv = 600000; /* 10 min */
    uint64_t t0 = sched_world(iv, 21);
    struct fake *a = &W.rep[0], *b = &W.rep[1], *c = &W.rep[2];
    put_keys(c, 0, 200, 3, 300, "c"); /* n3 newer on a third of the keys */
    run_until(t0 + iv / 2 - 2000);
    struct repair_sched_stats st;
    repair_sched_stats_get(&st, a->r);
    ck_assert_uint_eq(st.arcs, 12); /* 3 x 4 tokens, RF 3: all of them */
    ck_assert_uint_eq(st.never, 12);
    ck_assert_uint_eq(st.runs, 0);
    /* the first scheduled session: a manual repair meanwhile is refused,
     * saying which */
    while (!repair_running(a->r) && W.now < t0 + iv)
        run_until(W.now + 100);
    ck_assert(repair_running(a->r));
    char *t = NULL;
    size_t tl = 0;
    ck_assert_int_eq(repair_begin(a->r, NULL, &t, &tl), RK_EBADREQ);
    ck_assert_msg(strstr(t, "the scheduled one (repair_interval_s) of range"),
                  "%s", t);
    free(t);
    run_until(t0 + iv);
    for (size_t i = 0; i < W.nrep; i++) {
        struct fake *f = &W.rep[i];
        repair_sched_stats_get(&st, f->r);
        ck_assert_uint_eq(st.never, 0);
        ck_assert_uint_eq(st.overdue, 0);
        ck_assert_uint_ge(st.runs, 1);
        ck_assert_uint_eq(st.runs_failed, 0);
        ck_assert_uint_lt(st.oldest_age_ms, iv);
        struct repair_arc_state *rs;
        size_t n = saved_of(f, &rs);
        ck_assert_uint_eq(n, 12);
        for (size_t k = 0; k < n; k++) {
            ck_assert_uint_ge(rs[k].repaired_ms, WALL0 + t0 + iv / 2);
            ck_assert_uint_ge(rs[k].done_ms, rs[k].repaired_ms);
        }
        free(rs);
        ck_assert_ptr_null(strstr(f->log, "repair.overdue"));
    }
    char v[32], want[32];
    for (int i = 0; i < 200; i++) {
        value_of(a, i, v, sizeof(v));
        snprintf(want, sizeof(want), "v%d", i);
        ck_assert_str_eq(v, i % 3 == 0 ? "c" : want);
    }
    ck_assert(same_data(a, b));
    /* and again in the next interval: no record older than it */
    run_until(t0 + 2 * iv);
    repair_sched_stats_get(&st, a->r);
    ck_assert_uint_eq(st.overdue, 0);
    ck_assert_uint_lt(st.oldest_age_ms, iv);
    char text[4096];
    memset(text, 0, sizeof(text));
    FILE *m = fmemopen(text, sizeof(text) - 1, "w");
    repair_sched_text(a->r, m);
    fclose(m);
    ck_assert_msg(strstr(text, "Repair schedule: every arc within 600 s; 12 "
                               "arcs replicated here, 0 never repaired with "
                               "every replica, 0 overdue"),
                  "%s", text);
    W.tick_ms = 0;
    run();
    world_free();
}
END_TEST

/* A replica DOWN: the arcs it replicates are never recorded repaired
 * (the purge must not trust them), each is tried again after an eighth of
 * the interval (not in a loop), and once past the interval each is
 * reported overdue once (log and stats). When it is back, they are
 * repaired and no longer overdue. */
START_TEST(schedule_reports_arcs_not_repaired_in_time)
{
    const uint64_t iv = 80000;
    uint64_t t0 = sched_world(iv, 23);
    struct fake *a = &W.rep[0], *c = &W.rep[2];
    c->down = true;
    run_until(t0 + iv + 2000);
    struct repair_sched_stats st;
    repair_sched_stats_get(&st, a->r);
    ck_assert_uint_eq(st.never, 12);
    ck_assert_uint_eq(st.overdue, 12);
    ck_assert_uint_ge(st.runs_failed, 1);
    /* tried again an eighth of the interval apart: at most a few times
     * each in the half interval it was due */
    ck_assert_uint_le(st.runs, 12 * 5);
    ck_assert_int_eq(count_of(a->log, "repair.overdue "), 12);
    ck_assert_ptr_nonnull(strstr(a->log, "repaired=never"));
    run_until(t0 + iv + 20000);
    ck_assert_int_eq(count_of(a->log, "repair.overdue "), 12); /* once */
    c->down = false;
    run_until(t0 + 2 * iv);
    repair_sched_stats_get(&st, a->r);
    ck_assert_uint_eq(st.never, 0);
    ck_assert_uint_eq(st.overdue, 0);
    W.tick_ms = 0;
    run();
    world_free();
}
END_TEST

/* The records survive a restart: a new part loaded with what the old one
 * saved keeps each arc's repair time once it has its ring (and forgets
 * arcs no longer its own); a damaged copy is refused, nothing loaded. */
START_TEST(schedule_records_survive_a_restart)
{
    const uint64_t iv = 600000;
    uint64_t t0 = sched_world(iv, 25);
    struct fake *a = &W.rep[0];
    run_until(t0 + iv);
    W.tick_ms = 0;
    run();
    struct repair_arc_state *before;
    size_t nb = saved_of(a, &before);
    ck_assert_uint_eq(nb, 12);
    uint8_t blob[4096];
    size_t len = a->nsaved;
    memcpy(blob, a->saved, len);
    /* the restart: a new part on the same host */
    repair_free(a->r);
    fake_start(a);
    ck_assert_int_eq(repair_sched_load(a->r, RK_SLICE(blob, len - 1)),
                     RK_ECORRUPT);
    ck_assert_int_eq(repair_sched_load(a->r, RK_SLICE(blob, len)), 0);
    W.now += 5000;
    repair_tick(a->r);
    struct repair_arc_state *after;
    size_t na = 0;
    ck_assert_int_eq(repair_sched_list(&after, &na, a->r), 0);
    ck_assert_uint_eq(na, 12);
    for (size_t i = 0; i < na; i++) {
        bool found = false;
        for (size_t k = 0; k < nb; k++)
            if (before[k].arc.start == after[i].arc.start &&
                before[k].arc.end == after[i].arc.end) {
                ck_assert_uint_eq(after[i].repaired_ms, before[k].repaired_ms);
                found = true;
            }
        ck_assert(found);
    }
    free(before);
    free(after);
    W.tick_ms = 0;
    run();
    world_free();
}
END_TEST

/* With the schedule off (repair_interval_s 0) the arcs are still tracked
 * and a manual repair of every arc records them repaired when it left
 * every replica with everything: with one other replica (RF 2) a
 * comparison does (it exchanges both ways), so the purge goes on after
 * it; with two, a manual repair makes no closing pass (what it pulled
 * from the second never reached the first) and records nothing, nor does
 * one with a replica DOWN. */
START_TEST(manual_repair_records_only_closed_arcs)
{
    char text[2048];
    struct repair_sched_stats st;
    world_new(3, 27);
    common_data();
    struct fake *a = &W.rep[0];
    repair_tick(a->r); /* the arcs of its ring */
    repair_run(a, NULL, text, sizeof(text));
    ck_assert_msg(strstr(text, "Repair: done in"), "%s", text);
    repair_sched_stats_get(&st, a->r);
    ck_assert_uint_eq(st.arcs, 12);
    ck_assert_uint_eq(st.never, 12);
    world_free();

    world_new(2, 27);
    common_data();
    a = &W.rep[0];
    struct fake *b = &W.rep[1];
    repair_tick(a->r);
    b->down = true;
    repair_run(a, NULL, text, sizeof(text));
    repair_sched_stats_get(&st, a->r);
    ck_assert_uint_eq(st.arcs, 8);
    ck_assert_uint_eq(st.never, 8);
    b->down = false;
    W.now += 1000;
    uint64_t began = WALL0 + W.now;
    repair_run(a, NULL, text, sizeof(text));
    ck_assert_msg(strstr(text, "Repair: done in"), "%s", text);
    repair_sched_stats_get(&st, a->r);
    ck_assert_uint_eq(st.never, 0);
    ck_assert_uint_eq(st.overdue, 0); /* no interval: never overdue */
    struct repair_arc_state *rs;
    size_t n = saved_of(a, &rs);
    ck_assert_uint_eq(n, 8);
    for (size_t k = 0; k < n; k++)
        ck_assert_uint_eq(rs[k].repaired_ms, began);
    free(rs);
    world_free();
}
END_TEST

/* A scheduled session of an arc with two other replicas ends with a
 * closing pass: what it pulled from the second reaches the first too.
 * Without it, n1's record would say the arc was repaired while n2 still
 * held the old values n3 had replaced (a purge on n1 could then let one
 * come back). n2 and n3 run no schedule of their own here. */
START_TEST(scheduled_session_closes_the_loop)
{
    const uint64_t iv = 600000;
    uint64_t t0 = sched_world(iv, 29);
    struct fake *a = &W.rep[0], *b = &W.rep[1], *c = &W.rep[2];
    put_keys(c, 0, 200, 1, 300, "c"); /* only n3 has the newest */
    W.interval_ms = 0;
    repair_free(b->r);
    fake_start(b);
    repair_free(c->r);
    fake_start(c);
    run_until(t0 + iv);
    struct repair_sched_stats st;
    repair_sched_stats_get(&st, a->r);
    ck_assert_uint_eq(st.never, 0);
    char v[32];
    for (int i = 0; i < 200; i++) {
        value_of(b, i, v, sizeof(v));
        ck_assert_msg(strcmp(v, "c") == 0, "n2 key %d: %s", i, v);
    }
    ck_assert(same_data(a, b));
    ck_assert(same_data(b, c));
    W.tick_ms = 0;
    run();
    world_free();
}
END_TEST

START_TEST(serve_answers_the_leaves)
{
    world_new(2, 11);
    common_data();
    struct fake *f = &W.rep[1];
    static struct rec *v[RECS_MAX];
    struct ring_range arc = ring_arc_range(W.ring, 0);
    for (size_t i = 1; i < ring_token_count(W.ring); i++) /* the widest */
        if (ring_arc_range(W.ring, i).end - ring_arc_range(W.ring, i).start >
            arc.end - arc.start)
            arc = ring_arc_range(W.ring, i);
    unsigned depth = 3;
    struct reply_seen ok = {0};
    ask(f, ring_epoch(W.ring), arc, depth, 41, &ok);
    ck_assert_int_eq(ok.calls, 0); /* computed on the pool first */
    run();
    ck_assert_int_eq(ok.calls, 1);
    ck_assert_uint_eq(ok.id, 41);
    struct rpc_merkle_resp m;
    ck_assert_int_eq(rpc_merkle_resp_decode(&m, RK_SLICE(ok.bytes, ok.len)), 0);
    ck_assert_int_eq(m.status, 0);
    ck_assert_uint_eq(m.depth, depth);
    ck_assert_uint_eq(m.leaves.len, 8u << depth);
    size_t n = in_arc(f, arc, v);
    ck_assert_uint_gt(n, 8);
    ck_assert_uint_eq(m.keys, n);
    for (uint64_t leaf = 0; leaf < (1u << depth); leaf++) {
        struct ring_range lr = merkle_leaf(arc, depth, leaf);
        static uint8_t buf[RECS_MAX * (16 + 16 + REC_BYTES)];
        size_t len = 0;
        for (size_t i = 0; i < n; i++) {
            if (!ring_range_contains(lr, v[i]->token))
                continue;
            put_be(buf + len, v[i]->token, 8);
            put_be(buf + len + 8, v[i]->klen, 4);
            put_be(buf + len + 12, v[i]->blen, 4);
            memcpy(buf + len + 16, v[i]->key, v[i]->klen);
            memcpy(buf + len + 16 + v[i]->klen, v[i]->bytes, v[i]->blen);
            len += 16 + v[i]->klen + v[i]->blen;
        }
        uint8_t want[8];
        put_be(want, XXH3_64bits(buf, len), 8);
        ck_assert_msg(memcmp(m.leaves.p + 8 * leaf, want, 8) == 0, "leaf %llu",
                      (unsigned long long)leaf);
    }

    /* another epoch: RING_STALE at once, nothing computed */
    struct reply_seen stale = {0};
    ask(f, ring_epoch(W.ring) + 1, arc, depth, 42, &stale);
    ck_assert_int_eq(stale.calls, 1);
    ck_assert_uint_eq(W.nev, 0);
    ck_assert_int_eq(
        rpc_merkle_resp_decode(&m, RK_SLICE(stale.bytes, stale.len)), 0);
    ck_assert_int_eq(m.status, RK_ESTALE);

    /* an arc of 3 tokens cannot be cut into 8 leaves: a bad request */
    struct reply_seen bad = {0};
    ask(f, ring_epoch(W.ring), (struct ring_range){10, 13}, 3, 43, &bad);
    ck_assert_int_eq(bad.calls, 1);
    ck_assert_int_eq(rpc_merkle_resp_decode(&m, RK_SLICE(bad.bytes, bad.len)),
                     0);
    ck_assert_int_eq(m.status, RK_EBADREQ);
    ck_assert_int_eq(f->bad_frames, 1);

    /* two at a time: the third is OVERLOADED */
    struct reply_seen q[3] = {{0}};
    for (int i = 0; i < 3; i++)
        ask(f, ring_epoch(W.ring), arc, depth, 50 + (uint64_t)i, &q[i]);
    ck_assert_int_eq(q[0].calls + q[1].calls, 0);
    ck_assert_int_eq(q[2].calls, 1);
    ck_assert_int_eq(rpc_merkle_resp_decode(&m, RK_SLICE(q[2].bytes, q[2].len)),
                     0);
    ck_assert_int_eq(m.status, RK_EOVERLOADED);
    run();
    for (int i = 0; i < 2; i++) {
        ck_assert_int_eq(q[i].calls, 1);
        ck_assert_uint_eq(q[i].len, ok.len);
        ck_assert(memcmp(q[i].bytes, ok.bytes, ok.len) == 0);
    }

    /* a stopping node answers CLOSED */
    f->stopping = true;
    struct reply_seen closed = {0};
    ask(f, ring_epoch(W.ring), arc, depth, 60, &closed);
    ck_assert_int_eq(
        rpc_merkle_resp_decode(&m, RK_SLICE(closed.bytes, closed.len)), 0);
    ck_assert_int_eq(m.status, RK_ECLOSED);
    world_free();
}
END_TEST

/* Two replicas diverged (seed; want: what both hold once repaired), n1
 * just joined and due to repair, the fake clock ticking each second;
 * returns the time n1 joined. */
static uint64_t joined_diverged(uint64_t seed, struct fake *want)
{
    two_diverged(seed, want);
    W.rep[0].due = true;
    W.rep[0].joined_ms = W.now;
    W.tick_ms = 1000;
    W.next_tick = W.now + 1000;
    return W.now;
}

/* n1's repair after its join is over: due no longer (once), and both
 * replicas hold want. */
static void after_join_over(struct fake *want)
{
    ck_assert(!W.rep[0].due);
    ck_assert_int_eq(W.rep[0].due_done, 1);
    ck_assert(same_data(&W.rep[0], want));
    ck_assert(same_data(&W.rep[1], want));
}

/* A node that joined by streaming repairs by itself five gossip intervals
 * after it became NORMAL, and is no longer due once that repair ended. */
START_TEST(after_join_repair_starts_once_settled)
{
    static struct fake want;
    uint64_t joined = joined_diverged(3, &want);
    struct fake *a = &W.rep[0];
    run_until(joined + 4500);
    ck_assert_int_eq(a->jobs, 0); /* not yet: 5 s of gossip first */
    ck_assert_ptr_null(strstr(a->log, "repair.start"));
    run_until(joined + 60000);
    ck_assert_uint_eq(a->begun_ms, joined + 5000);
    ck_assert_msg(strstr(a->log, "repair.after_join comparisons=8 "), "%s",
                  a->log);
    after_join_over(&want);
    char text[2048];
    text_of(a->r, text, sizeof(text));
    ck_assert_msg(strstr(text, "The repair a node runs after joining by "
                               "streaming, or after gaining replicas with a "
                               "replication change (repair_after_join):\n"
                               "Repair: done"),
                  "%s", text);
    W.tick_ms = 0;
    world_free();
}
END_TEST

/* Regression after_join_repair_gave_up_on_a_flapping_replica: a repair
 * after a join that ran while a replica was DOWN (killed and restarting,
 * CI 2026-12-07 in test_flapping_moves) failed its comparisons with it and
 * was no longer due: the writes the join's source had missed stayed
 * missing until someone ran `ringkv repair`. It runs again 10 s later, and
 * ends due no longer once a run compared everything. */
START_TEST(after_join_repair_runs_again_after_a_replica_was_down)
{
    static struct fake want;
    uint64_t joined = joined_diverged(3, &want);
    struct fake *a = &W.rep[0], *b = &W.rep[1];
    b->down = true;
    run_until(joined + 6000);
    ck_assert_int_eq(count_of(a->log, "repair.after_join comparisons="), 1);
    ck_assert_msg(strstr(a->log, "repair.after_join_incomplete failed=8 run=1 "
                                 "at_most=5 again_in_ms=10000 "),
                  "%s", a->log);
    ck_assert(a->due); /* still: it runs again */
    ck_assert_int_eq(a->due_done, 0);
    ck_assert(!same_data(a, &want));
    run_until(joined + 14500); /* not before its 10 s */
    ck_assert_int_eq(count_of(a->log, "repair.after_join comparisons="), 1);
    b->down = false; /* back */
    run_until(joined + 60000);
    ck_assert_int_eq(count_of(a->log, "repair.after_join comparisons="), 2);
    ck_assert_int_eq(count_of(a->log, "repair.after_join_incomplete"), 1);
    after_join_over(&want);
    W.tick_ms = 0;
    world_free();
}
END_TEST

/* A replica that stays DOWN: the repair after a join runs five times in
 * all (10, 20, 40 and 80 s apart), then says what is left for `ringkv
 * repair` and is due no longer. */
START_TEST(after_join_repair_gives_up_after_five_runs)
{
    static struct fake want;
    uint64_t joined = joined_diverged(5, &want);
    struct fake *a = &W.rep[0], *b = &W.rep[1];
    b->down = true;
    run_until(joined + 5000 + 10000 + 20000 + 40000 + 79000);
    ck_assert_int_eq(count_of(a->log, "repair.after_join comparisons="), 4);
    ck_assert(a->due);
    run_until(joined + 400000);
    ck_assert_int_eq(count_of(a->log, "repair.after_join comparisons="), 5);
    ck_assert_msg(strstr(a->log, "run=4 at_most=5 again_in_ms=80000 "), "%s",
                  a->log);
    ck_assert_msg(strstr(a->log, "repair.after_join_incomplete failed=8 run=5 "
                                 "at_most=5 note=\"some of the ranges it "
                                 "streamed in were not compared with every "
                                 "other replica; run `ringkv repair` on it"),
                  "%s", a->log);
    ck_assert(!a->due);
    ck_assert_int_eq(a->due_done, 1);
    W.tick_ms = 0;
    world_free();
}
END_TEST

/* A ring change or a stop under a running session ends it, the
 * comparisons left counted as failed, and releases the node's stop. */
START_TEST(ring_change_or_stop_ends_the_session)
{
    world_new(3, 13);
    common_data();
    diverge_two();
    struct fake *a = &W.rep[0];
    char *t = NULL, text[2048];
    size_t len;
    ck_assert_int_eq(repair_begin(a->r, NULL, &t, &len), 0);
    free(t);
    ck_assert_int_eq(a->jobs, 1);
    run_until(W.now + 20); /* a few comparisons in */
    ck_assert(repair_running(a->r));
    ring_bump();
    run();
    ck_assert(!repair_running(a->r));
    ck_assert_int_eq(a->jobs, 0);
    text_of(a->r, text, sizeof(text));
    char why[128];
    snprintf(why, sizeof(why),
             "the first: the ring changed; run repair "
             "again: %s.\n",
             rk_strerror(RK_ESTALE));
    ck_assert_msg(strstr(text, "Repair: done with failures in"), "%s", text);
    ck_assert_msg(strstr(text, why), "want %s in %s", why, text);
    ck_assert_msg(strstr(a->log, " why=ring_changed\n"), "%s", a->log);

    ck_assert_int_eq(repair_begin(a->r, NULL, &t, &len), 0);
    free(t);
    /* a second one is refused while it runs */
    ck_assert_int_eq(repair_begin(a->r, NULL, &t, &len), RK_EBADREQ);
    ck_assert_str_eq(t, "a repair is already running on n1");
    free(t);
    run_until(W.now + 20);
    ck_assert(repair_running(a->r));
    a->stopping = true;
    run();
    ck_assert(!repair_running(a->r));
    ck_assert_int_eq(a->jobs, 0);
    text_of(a->r, text, sizeof(text));
    /* the step under way fails first ("stopping with n2"), the rest are
     * not begun */
    snprintf(why, sizeof(why), ": %s.\n", rk_strerror(RK_ECLOSED));
    ck_assert_msg(strstr(text, "failed, the first: stopping with n"), "%s",
                  text);
    ck_assert_msg(strstr(text, why), "want %s in %s", why, text);
    ck_assert_msg(strstr(a->log, " why=stopping\n"), "%s", a->log);
    world_free();
}
END_TEST

static Suite *repair_suite(void)
{
    Suite *s = suite_create("repair");
    TCase *tc = tcase_create("session");
    tcase_add_test(tc, two_replicas_exchange_exactly_the_differences);
    tcase_add_test(tc, three_replicas_converge);
    tcase_add_test(tc, only_repairs_inside_the_range);
    tcase_add_test(tc, peer_failing_midway_ends_with_failures);
    tcase_add_test(tc, peer_refusing_once_is_asked_again);
    tcase_add_test(tc, peer_refusing_always_fails_after_bounded_tries);
    tcase_add_test(tc, after_join_repair_starts_once_settled);
    tcase_add_test(tc, after_join_repair_runs_again_after_a_replica_was_down);
    tcase_add_test(tc, after_join_repair_gives_up_after_five_runs);
    tcase_add_test(tc, ring_change_or_stop_ends_the_session);
    suite_add_tcase(s, tc);
    tc = tcase_create("schedule");
    tcase_add_test(tc, schedule_repairs_every_arc_within_the_interval);
    tcase_add_test(tc, schedule_reports_arcs_not_repaired_in_time);
    tcase_add_test(tc, schedule_records_survive_a_restart);
    tcase_add_test(tc, manual_repair_records_only_closed_arcs);
    tcase_add_test(tc, scheduled_session_closes_the_loop);
    suite_add_tcase(s, tc);
    tc = tcase_create("serve");
    tcase_add_test(tc, serve_answers_the_leaves);
    suite_add_tcase(s, tc);
    return s;
}

int main(void)
{
    SRunner *sr = srunner_create(repair_suite());
    srunner_run_all(sr, CK_NORMAL);
    int failed = srunner_ntests_failed(sr);
    srunner_free(sr);
    return failed ? EXIT_FAILURE : EXIT_SUCCESS;
}
