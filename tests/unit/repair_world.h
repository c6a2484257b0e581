/*
 * repair_world.h - the fake world repair's unit runners share
 * (check_repair.c, check_repair_sched.c): two or three replicas whose data
 * differ, each an in-memory record list behind its own struct repair_host
 * (repair/repair.h), talking through a fake network of queued answers, on
 * a fake clock. No sockets, no threads, no sleeping: pool jobs, answers
 * and timers are events run in order of their due time, and the clock
 * jumps to the next one.
 *
 * A replica's host answers RPC_MSG_MERKLE with its own repair_serve,
 * RPC_MSG_STREAM with a donor scan of its records and RPC_MSG_STREAM_PUSH
 * with a last-write-wins merge, as the daemon does. Records are encoded as
 * storage encodes them (store_record_encode), so the leaves hash the bytes
 * a node's do. Which version of a key wins is computed independently of
 * repair/, by store_record_cmp (winners). Header-only, as store_fixture.h:
 * each runner has its own world, W.
 */
#ifndef TESTS_UNIT_REPAIR_WORLD_H
#define TESTS_UNIT_REPAIR_WORLD_H

#include <errno.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <check.h>

#include "common/rk.h"
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

static inline void ev_add(uint64_t delay, void (*fn)(void *p), void *p)
{
    ck_assert_uint_lt(W.nev, EVS_MAX);
    W.evs[W.nev++] = (struct ev){W.now + delay, W.seq++, fn, p};
}

/* repair_text of r into text (cap bytes, NUL-terminated). */
static inline void text_of(repair *r, char *text, size_t cap)
{
    memset(text, 0, cap);
    FILE *m = fmemopen(text, cap - 1, "w");
    ck_assert_ptr_nonnull(m);
    repair_text(r, m);
    fclose(m);
}

static inline void tick_all(void)
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
static inline void run_until(uint64_t until)
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

static inline void run(void)
{
    run_until(UINT64_MAX);
}

static inline struct fake *fake_by_name(const char *name)
{
    for (size_t i = 0; i < W.nrep; i++)
        if (strcmp(W.rep[i].name, name) == 0)
            return &W.rep[i];
    return NULL;
}

/* ---- records ------------------------------------------------------------- */

static inline void rec_encode(
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

static inline struct rec *rec_find(struct fake *f, struct rk_slice key)
{
    for (size_t i = 0; i < f->nrec; i++)
        if (f->recs[i].klen == key.len &&
            memcmp(f->recs[i].key, key.p, key.len) == 0)
            return &f->recs[i];
    return NULL;
}

static inline void
put(struct fake *f, const char *key, uint64_t ts, const char *v)
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
static inline void
put_keys(struct fake *f, int from, int to, int step, uint64_t ts, const char *v)
{
    char k[16];
    for (int i = from; i < to; i += step) {
        snprintf(k, sizeof(k), "k%04d", i);
        put(f, k, ts, v);
    }
}

static inline int rec_cmp(const struct rec *a, const struct rec *b)
{
    struct store_record x, y;
    ck_assert_int_eq(store_record_decode(&x, a->bytes, a->blen), 0);
    ck_assert_int_eq(store_record_decode(&y, b->bytes, b->blen), 0);
    return store_record_cmp(&x, &y);
}

/* A record another node sent, merged last-write-wins. */
static inline void
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

static inline struct rpc_record to_rpc(const struct rec *r)
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
static inline int along(const void *a, const void *b)
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
static inline size_t
in_arc(struct fake *f, struct ring_range arc, struct rec **out)
{
    size_t n = 0;
    for (size_t i = 0; i < f->nrec; i++)
        if (ring_range_contains(arc, f->recs[i].token))
            out[n++] = &f->recs[i];
    g_from = arc.start;
    qsort(out, n, sizeof(*out), along);
    return n;
}

static inline uint64_t fingerprint(struct rk_slice key,
                                   const struct rpc_record *rec)
{
    return rk_token(key.p, key.len) ^ (rec->ts * 0x9E3779B97F4A7C15ull) ^
           ((uint64_t)rec->flags << 56);
}

/* A donor's chunk of at's arc after `at`: about max bytes of keys and
 * values, leaving out skip[]. */
static inline void chunk(struct fake *f,
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

static inline bool same_data(struct fake *a, struct fake *b)
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

static inline void deliver(void *p)
{
    struct delivery *d = p;
    d->cb(d->cb_arg, d->status, RK_SLICE(d->bytes, d->len));
    free(d);
}

static inline void answer(uint64_t delay,
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

static inline void served(void *arg, uint64_t id, struct rk_slice msg)
{
    struct delivery *d = arg;
    (void)id;
    answer(1, d->cb, d->cb_arg, 0, msg);
    free(d);
}

static inline void serve_stream(struct fake *t,
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

static inline void
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

static inline uint64_t h_now_ms(void *arg)
{
    (void)arg;
    return W.now;
}

static inline void h_log(void *arg,
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

static inline bool h_stopping(void *arg)
{
    return ((struct fake *)arg)->stopping;
}

static inline void h_job_begin(void *arg)
{
    struct fake *f = arg;
    f->jobs++;
    f->begun_ms = W.now;
}

static inline void h_job_end(void *arg)
{
    ((struct fake *)arg)->jobs--;
}

struct work {
    void (*work)(void *job);
    void (*after)(void *job);
    void *job;
};

static inline void work_run(void *p)
{
    struct work *w = p;
    w->work(w->job);
    w->after(w->job);
    free(w);
}

static inline int h_queue_work(void *arg,
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

static inline int
h_timer_start(void *arg, uint32_t ms, void (*cb)(void *cb_arg), void *cb_arg)
{
    (void)arg;
    ev_add(ms, cb, cb_arg);
    return 0;
}

static inline uint64_t h_hlc(void *arg)
{
    (void)arg;
    return 1;
}

static inline void h_bad_frame(void *arg)
{
    ((struct fake *)arg)->bad_frames++;
}

static inline const ring *h_ring(void *arg)
{
    (void)arg;
    return W.ring;
}

static inline int
h_ring_settled(void *arg, uint32_t *self, char *why, size_t cap)
{
    struct fake *f = arg;
    *self = ring_node_find(W.ring, f->name);
    if (*self == RING_NONE) {
        snprintf(why, cap, "not in the ring");
        return RK_EBADREQ;
    }
    return 0;
}

static inline bool h_peer_up(void *arg, const char *peer)
{
    struct fake *t = fake_by_name(peer);
    return t && t != arg && !t->down;
}

static inline int h_rpc(void *arg,
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

static inline int h_range_keys(void *arg,
                               uint64_t token,
                               struct ring_range *range,
                               uint64_t *keys)
{
    (void)token;
    *range = (struct ring_range){0, 0}; /* one range: the whole ring */
    *keys = ((struct fake *)arg)->range_keys;
    return 0;
}

static inline int
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

static inline bool h_budget_take(void *arg)
{
    ((struct fake *)arg)->budget_out++;
    return true;
}

static inline void h_budget_settle(void *arg, uint64_t moved)
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

static inline void push_scan_run(void *p)
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

static inline int h_push_scan(void *arg,
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

static inline void committed_run(void *p)
{
    struct committed *c = p;
    c->cb(c->cb_arg, 0, c->keys, c->bytes);
    free(c);
}

static inline int h_commit_items(void *arg,
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

static inline uint64_t h_record_fingerprint(void *arg,
                                            struct rk_slice key,
                                            const struct rpc_record *rec)
{
    (void)arg;
    return fingerprint(key, rec);
}

static inline void
h_human_bytes(void *arg, char *out, size_t cap, uint64_t bytes)
{
    (void)arg;
    snprintf(out, cap, "%llu B", (unsigned long long)bytes);
}

static inline void h_stall_start(void *arg)
{
    struct fake *f = arg;
    f->progress_ms = W.now;
    f->stalled = false;
    f->stall_err = 0;
}

static inline void h_stall_progress(void *arg)
{
    struct fake *f = arg;
    f->progress_ms = W.now;
    f->stalled = false;
    f->stall_err = 0;
}

static inline void h_stall_fail(void *arg,
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

static inline void h_stall_check(void *arg, bool work_left)
{
    struct fake *f = arg;
    if (!work_left)
        f->progress_ms = W.now;
    f->stalled = work_left && W.now - f->progress_ms >= STALL_MS;
}

static inline void h_stall_text(void *arg, FILE *out)
{
    struct fake *f = arg;
    if (f->stalled)
        fprintf(out, "Stalled: %s %s: %s\n", f->stall_step, f->stall_peer,
                rk_strerror(f->stall_err));
}

static inline bool h_after_join_due(void *arg, uint64_t *joined_ms)
{
    struct fake *f = arg;
    *joined_ms = f->joined_ms;
    return f->due;
}

static inline void h_after_join_done(void *arg)
{
    struct fake *f = arg;
    f->due = false;
    f->due_done++;
}

/* The wall clock: the fake one, far from 0 as Unix time is. */
#define WALL0 UINT64_C(1700000000000)

static inline uint64_t h_wall_ms(void *arg)
{
    (void)arg;
    return WALL0 + W.now;
}

static inline void h_sched_save(void *arg, struct rk_slice blob)
{
    struct fake *f = arg;
    ck_assert_uint_le(blob.len, sizeof(f->saved));
    memcpy(f->saved, blob.p, blob.len);
    f->nsaved = blob.len;
    f->saves++;
}

/* ---- set-up ------------------------------------------------------------- */

/* f's repair part on the fake host (at start, and at a restart). */
static inline void fake_start(struct fake *f)
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

static inline void
world_new_sched(size_t n, uint64_t seed, uint64_t interval_ms);

/* n replicas n1..nn of RF n, each with 4 tokens (seeded), no records. */
static inline void world_new(size_t n, uint64_t seed)
{
    world_new_sched(n, seed, 0);
}

/* As world_new, with the repair schedule every interval_ms (0: off). */
static inline void
world_new_sched(size_t n, uint64_t seed, uint64_t interval_ms)
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

static inline void world_free(void)
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
static inline void common_data(void)
{
    char k[16], v[16];
    for (int i = 0; i < 200; i++) {
        snprintf(k, sizeof(k), "k%04d", i);
        snprintf(v, sizeof(v), "v%d", i);
        for (size_t r = 0; r < W.nrep; r++)
            put(&W.rep[r], k, 100, v);
    }
}

static inline void key_of(char *k, int i)
{
    snprintf(k, 16, "k%04d", i);
}

/* repair_begin on f with only (may be NULL), run to the end; the text. */
static inline void repair_run(struct fake *f,
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

/* ---- two replicas diverged ---------------------------------------------- */

/* a and b, once merged last-write-wins, into out. */
static inline void winners(struct fake *out, struct fake *a, struct fake *b)
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
static inline void diverge_two(void)
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
static inline void two_diverged(uint64_t seed, struct fake *want)
{
    world_new(2, seed);
    common_data();
    diverge_two();
    winners(want, &W.rep[0], &W.rep[1]);
}

/* ---- reading a replica and a log ---------------------------------------- */

/* The value of key k%04d (i) on f, into v (cap bytes); "" if none. */
static inline void value_of(struct fake *f, int i, char *v, size_t cap)
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
static inline int count_of(const char *s, const char *what)
{
    int n = 0;
    for (const char *p = s; (p = strstr(p, what)); p += strlen(what))
        n++;
    return n;
}

#endif
