/*
 * stream_world.h - the fake host streaming/'s in-process runners share
 * (check_stream.c, check_stream_join.c): a few nodes (struct fake), each a
 * streaming part (streaming/streaming.h) with a real store in its own
 * temporary directory behind its own struct stream_host. Nothing runs on
 * its own: works queued on the "pool" (a chunk's commit among them) and
 * internode requests and their answers wait in one FIFO that pump() runs
 * on this thread, and the clock moves only when a test moves it. No
 * sockets, no threads of the host's, no sleeping. Besides the host, the
 * rings the tests move ranges between (n0 and n1, n2 joining or leaving)
 * and NKEYS keys put into a node's store and read back. Header-only, as
 * store_fixture.h: each test has its own struct fake.
 */
#ifndef TESTS_UNIT_STREAM_WORLD_H
#define TESTS_UNIT_STREAM_WORLD_H

#include <errno.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <check.h>

#include "common/rk.h"
#include "ring/ring.h"
#include "storage/store.h"
#include "streaming/streaming.h"
#include "wire/rpc_msg.h"

/* ---- the fake host ------------------------------------------------------- */

#define MAXN 5

struct fake;

struct fnode {
    struct fake *f;
    char name[16];
    char dir[256];
    stream *s;
    store *st;
    struct stream_state state;
    bool member;   /* NORMAL in the ring */
    bool stopping; /* host->stopping */
    bool refuse;   /* requests to it fail (a donor that keeps failing) */
    bool down;     /* peers see it DOWN */
    int announced; /* announcements made, the last one's status below */
    enum stream_announce last_announce;
    char removed[16]; /* the peer announced REMOVED on its behalf */
    bool joined;      /* host->join_done called */
    bool self_stopped;
    char *log; /* every log line, appended */
    size_t log_len;
    uint64_t seen, seen_max; /* host->clock_seen: calls, largest ts */
    uint64_t hints;          /* hints it keeps for hints_for */
    char hints_for[16];
};

struct fconn {
    struct fnode *from;
    stream_rpc_cb cb;
    void *cbarg;
    int refs;
    struct fnode *asked; /* the node a STREAM request went to, or NULL */
};

enum ev_kind { EV_WORK, EV_DELIVER, EV_ANSWER };

struct ev {
    enum ev_kind kind;
    struct stream_work *w; /* EV_WORK */
    int status;            /* EV_ANSWER */
    struct fnode *to;      /* EV_DELIVER; EV_ANSWER: a STREAM request's node */
    struct fconn *conn;    /* EV_DELIVER */
    stream_rpc_cb cb;      /* EV_ANSWER */
    void *cbarg;
    uint8_t *frame; /* EV_DELIVER, EV_ANSWER: a copy */
    size_t len;
    struct ev *next;
};

struct fake {
    uint64_t now, wall, epoch;
    struct fnode n[MAXN];
    int nn;
    ring *ring, *pending;
    struct ev *head, *tail;
    int rpcs; /* requests sent */
    /* STREAM requests unanswered, per node asked and in all, and the most
     * seen at once */
    int asked[MAXN], asked_max[MAXN], asked_all, asked_all_max;
};

static inline void ev_push(struct fake *f, struct ev *e)
{
    e->next = NULL;
    if (f->tail)
        f->tail->next = e;
    else
        f->head = e;
    f->tail = e;
}

static inline struct ev *ev_new(enum ev_kind k)
{
    struct ev *e = calloc(1, sizeof(*e));
    ck_assert_ptr_nonnull(e);
    e->kind = k;
    return e;
}

static inline uint8_t *dup_bytes(struct rk_slice b)
{
    uint8_t *p = malloc(b.len ? b.len : 1);
    ck_assert_ptr_nonnull(p);
    if (b.len)
        memcpy(p, b.p, b.len);
    return p;
}

static inline struct fnode *by_name(struct fake *f, const char *name)
{
    for (int i = 0; i < f->nn; i++)
        if (strcmp(f->n[i].name, name) == 0)
            return &f->n[i];
    return NULL;
}

static inline void conn_unref(struct fconn *c)
{
    if (--c->refs == 0)
        free(c);
}

/* Run one queued thing; false when nothing is queued. */
static inline bool pump_one(struct fake *f)
{
    struct ev *e = f->head;
    if (!e)
        return false;
    f->head = e->next;
    if (!f->head)
        f->tail = NULL;
    switch (e->kind) {
    case EV_WORK:
        e->w->work(e->w);
        e->w->done(e->w, 0);
        break;
    case EV_DELIVER: {
        enum rpc_msg_type t;
        struct rk_slice fr = RK_SLICE(e->frame, e->len);
        ck_assert_int_eq(rpc_msg_type_peek(&t, fr), 0);
        if (t == RPC_MSG_STREAM)
            stream_serve(e->to->s, e->conn, 1, fr);
        else if (t == RPC_MSG_STREAM_PUSH)
            stream_push_serve(e->to->s, e->conn, 1, fr);
        else
            ck_abort_msg("unexpected request type %d", (int)t);
        conn_unref(e->conn); /* the request's own reference */
        break;
    }
    case EV_ANSWER:
        if (e->to) { /* a STREAM request's answer */
            f->asked[e->to - f->n]--;
            f->asked_all--;
        }
        e->cb(e->cbarg, e->status, RK_SLICE(e->frame, e->len));
        break;
    }
    free(e->frame);
    free(e);
    return true;
}

static inline void pump(struct fake *f)
{
    for (int i = 0; i < 1000000 && pump_one(f); i++)
        ;
    ck_assert_ptr_null(f->head);
}

static inline uint64_t h_now(void *arg)
{
    return ((struct fnode *)arg)->f->now;
}

static inline uint64_t h_wall(void *arg)
{
    return ((struct fnode *)arg)->f->wall;
}

static inline uint64_t h_hlc(void *arg)
{
    (void)arg;
    return 42;
}

static inline void h_log(void *arg,
                         enum stream_log_level level,
                         const char *event,
                         const char *fmt,
                         va_list ap)
{
    struct fnode *n = arg;
    char line[2048];
    int k =
        snprintf(line, sizeof(line), "level=%d event=%s ", (int)level, event);
    vsnprintf(line + k, sizeof(line) - (size_t)k, fmt, ap);
    size_t l = strlen(line);
    n->log = realloc(n->log, n->log_len + l + 2);
    ck_assert_ptr_nonnull(n->log);
    memcpy(n->log + n->log_len, line, l);
    n->log_len += l;
    n->log[n->log_len++] = '\n';
    n->log[n->log_len] = '\0';
}

static inline store *h_store(void *arg)
{
    return ((struct fnode *)arg)->st;
}

static inline bool h_stopping(void *arg)
{
    return ((struct fnode *)arg)->stopping;
}

static inline int h_queue_work(void *arg, struct stream_work *w)
{
    struct ev *e = ev_new(EV_WORK);
    e->w = w;
    ev_push(((struct fnode *)arg)->f, e);
    return 0;
}

static inline int h_clock_seen(void *arg, uint64_t ts)
{
    struct fnode *n = arg;
    n->seen++;
    if (ts > n->seen_max)
        n->seen_max = ts;
    return 0;
}

static inline void peer_fill(struct stream_peer *out,
                             const struct fnode *me,
                             const struct fnode *p)
{
    memset(out, 0, sizeof(*out));
    snprintf(out->name, sizeof(out->name), "%s", p->name);
    snprintf(out->iaddr, sizeof(out->iaddr), "%s", p->name);
    out->up = !p->down;
    out->self = p == me;
}

static inline int
h_peer_by_name(void *arg, const char *name, struct stream_peer *out)
{
    struct fnode *me = arg, *p = by_name(me->f, name);
    if (!p)
        return RK_ENOTFOUND;
    peer_fill(out, me, p);
    return 0;
}

static inline int h_peer_at(void *arg, uint32_t idx, struct stream_peer *out)
{
    struct fnode *me = arg;
    struct ring_node_info ni;
    if (!me->f->ring || ring_node_get(me->f->ring, &ni, idx) < 0)
        return RK_ENOTFOUND;
    return h_peer_by_name(arg, ni.name, out);
}

static inline int h_rpc(void *arg,
                        const char *iaddr,
                        struct rk_slice msg,
                        uint32_t timeout_ms,
                        stream_rpc_cb cb,
                        void *cbarg)
{
    struct fnode *me = arg, *to = by_name(me->f, iaddr);
    (void)timeout_ms;
    if (!to)
        return RK_EUNAVAILABLE;
    me->f->rpcs++;
    enum rpc_msg_type t;
    ck_assert_int_eq(rpc_msg_type_peek(&t, msg), 0);
    struct fnode *counted = NULL;
    if (t == RPC_MSG_STREAM) {
        struct fake *f = me->f;
        int k = (int)(to - f->n);
        counted = to;
        if (++f->asked[k] > f->asked_max[k])
            f->asked_max[k] = f->asked[k];
        if (++f->asked_all > f->asked_all_max)
            f->asked_all_max = f->asked_all;
    }
    if (to->refuse) { /* the connection is refused: answered at once */
        struct ev *e = ev_new(EV_ANSWER);
        e->cb = cb;
        e->cbarg = cbarg;
        e->status = -ECONNREFUSED;
        e->to = counted;
        ev_push(me->f, e);
        return 0;
    }
    struct fconn *c = calloc(1, sizeof(*c));
    ck_assert_ptr_nonnull(c);
    *c = (struct fconn){
        .from = me, .cb = cb, .cbarg = cbarg, .refs = 1, .asked = counted};
    struct ev *e = ev_new(EV_DELIVER);
    e->to = to;
    e->conn = c;
    e->frame = dup_bytes(msg);
    e->len = msg.len;
    ev_push(me->f, e);
    return 0;
}

static inline void
h_reply(void *arg, void *conn, uint64_t id, struct rk_slice frame)
{
    struct fconn *c = conn;
    (void)arg;
    ck_assert_uint_eq(id, 1);
    struct ev *e = ev_new(EV_ANSWER);
    e->cb = c->cb;
    e->cbarg = c->cbarg;
    e->to = c->asked;
    e->frame = dup_bytes(frame);
    e->len = frame.len;
    ev_push(c->from->f, e);
}

static inline void h_conn_ref(void *arg, void *conn)
{
    (void)arg;
    ((struct fconn *)conn)->refs++;
}

static inline void h_conn_unref(void *arg, void *conn)
{
    (void)arg;
    conn_unref(conn);
}

static inline void h_bad_frame(void *arg)
{
    (void)arg;
    ck_abort_msg("a malformed frame between two fake nodes");
}

static inline const ring *h_ring(void *arg)
{
    return ((struct fnode *)arg)->f->ring;
}

static inline const ring *h_ring_pending(void *arg)
{
    return ((struct fnode *)arg)->f->pending;
}

static inline bool h_ring_stale(void *arg)
{
    (void)arg;
    return false;
}

static inline bool h_ring_member(void *arg)
{
    return ((struct fnode *)arg)->member;
}

static inline void h_nothing(void *arg)
{
    (void)arg;
}

static inline size_t h_repl_mismatches(void *arg)
{
    (void)arg;
    return 0;
}

static inline int h_dc_rf(void *arg, const char *dc)
{
    (void)arg;
    (void)dc;
    return 1;
}

static inline int h_announce(void *arg,
                             const char *peer,
                             enum stream_announce st,
                             uint64_t *epoch)
{
    struct fnode *n = arg;
    /* on another's behalf: only a replace's REMOVED of the dead node */
    ck_assert(!peer || st == STREAM_ANNOUNCE_REMOVED);
    if (peer)
        snprintf(n->removed, sizeof(n->removed), "%s", peer);
    n->announced++;
    n->last_announce = st;
    *epoch = ++n->f->epoch;
    return 0;
}

static inline void h_state_get(void *arg, struct stream_state *out)
{
    *out = ((struct fnode *)arg)->state;
}

static inline int h_state_save(void *arg, const struct stream_state *st)
{
    struct fnode *n = arg;
    uint64_t ft = n->state.first_token;
    int nt = n->state.ntokens;
    n->state = *st;
    n->state.first_token = ft; /* read only */
    n->state.ntokens = nt;
    return 0;
}

static inline void h_join_done(void *arg, uint64_t epoch)
{
    struct fnode *n = arg;
    n->joined = true;
    n->member = true;
    n->state.ring_epoch = epoch;
}

/* As the daemon does: the tokens go (the node holds none), a new epoch. */
static inline int h_join_withdraw(void *arg, uint64_t *epoch)
{
    struct fnode *n = arg;
    n->state.first_token = 0;
    n->state.ntokens = 0;
    *epoch = ++n->f->epoch;
    return 0;
}

static inline uint64_t h_hints_pending(void *arg, char *for_name, size_t cap)
{
    struct fnode *n = arg;
    if (n->hints)
        snprintf(for_name, cap, "%s", n->hints_for);
    return n->hints;
}

static inline void h_self_stop(void *arg)
{
    ((struct fnode *)arg)->self_stopped = true;
}

static const struct stream_host host_init = {
    .now_ms = h_now,
    .wall_ms = h_wall,
    .hlc = h_hlc,
    .log = h_log,
    .store = h_store,
    .stopping = h_stopping,
    .queue_work = h_queue_work,
    .clock_seen = h_clock_seen,
    .peer_by_name = h_peer_by_name,
    .peer_at = h_peer_at,
    .rpc = h_rpc,
    .reply = h_reply,
    .conn_ref = h_conn_ref,
    .conn_unref = h_conn_unref,
    .bad_frame = h_bad_frame,
    .ring = h_ring,
    .ring_pending = h_ring_pending,
    .ring_stale = h_ring_stale,
    .ring_member = h_ring_member,
    .ring_rebuild = h_nothing,
    .ranges_ensure = h_nothing,
    .repl_mismatches = h_repl_mismatches,
    .dc_rf = h_dc_rf,
    .announce = h_announce,
    .state_get = h_state_get,
    .state_save = h_state_save,
    .join_done = h_join_done,
    .join_withdraw = h_join_withdraw,
    .hints_pending = h_hints_pending,
    .self_stop = h_self_stop,
};

static inline struct stream_config cfg_for(const char *name)
{
    struct stream_config c = STREAM_CONFIG_INIT;
    snprintf(c.node_name, sizeof(c.node_name), "%s", name);
    c.gossip_interval_ms = 100;
    return c;
}

static inline void node_stream(struct fnode *n, const struct stream_config *c)
{
    struct stream_host h = host_init;
    h.arg = n;
    ck_assert_int_eq(stream_new(&n->s, c, &h), 0);
}

static inline void open_store(struct fnode *n)
{
    struct store_opts o = STORE_OPTS_INIT;
    o.data_dir = n->dir;
    o.durability = STORE_PERIODIC; /* no fsync per test write */
    o.map_size = (size_t)8 << 20;
    int rc = store_open(&n->st, &o);
    ck_assert_msg(rc == 0, "store_open: %s", rk_strerror(rc));
}

/* Nodes named n0, n1... each with a store in a fresh directory. */
static inline void fake_init(struct fake *f, int nn)
{
    memset(f, 0, sizeof(*f));
    f->now = 1000;
    f->wall = 1800000000000ull;
    f->epoch = 10;
    f->nn = nn;
    const char *t = getenv("TMPDIR");
    for (int i = 0; i < nn; i++) {
        struct fnode *n = &f->n[i];
        n->f = f;
        snprintf(n->name, sizeof(n->name), "n%d", i);
        snprintf(n->dir, sizeof(n->dir), "%s/rk_stream_XXXXXX", t ? t : "/tmp");
        ck_assert_ptr_nonnull(mkdtemp(n->dir));
        open_store(n);
        n->member = true;
        struct stream_config c = cfg_for(n->name);
        node_stream(n, &c);
    }
}

static inline void fake_free(struct fake *f)
{
    pump(f);
    for (int i = 0; i < f->nn; i++) {
        struct fnode *n = &f->n[i];
        stream_free(n->s);
        store_free(n->st);
        char cmd[300];
        snprintf(cmd, sizeof(cmd), "rm -rf '%s'", n->dir);
        ck_assert_int_eq(system(cmd), 0);
        free(n->log);
    }
    ring_free(f->ring);
    ring_free(f->pending);
}

/* ---- rings and data ------------------------------------------------------ */

#define Q (UINT64_C(1) << 60) /* a sixteenth of the ring */

/* A ring of RF rf whose members are names[i] with tokens
 * tok[i][0..nt[i]). */
static inline ring *ring_of_rf(int nm,
                               const char *const *names,
                               const uint64_t *const *tok,
                               const size_t *nt,
                               unsigned rf)
{
    struct ring_member m[MAXN];
    for (int i = 0; i < nm; i++)
        m[i] = (struct ring_member){.name = names[i],
                                    .tokens = tok[i],
                                    .ntokens = nt[i],
                                    .state = RING_NORMAL};
    struct ring_config c = {.members = m,
                            .nmembers = (size_t)nm,
                            .repl = {.strategy = RING_SIMPLE, .rf = rf}};
    ring *r = NULL;
    ck_assert_int_eq(ring_new(&r, &c), 0);
    return r;
}

static inline ring *ring_of(int nm,
                            const char *const *names,
                            const uint64_t *const *tok,
                            const size_t *nt)
{
    return ring_of_rf(nm, names, tok, nt, 1);
}

/* n0: 4Q, 12Q; n1: 8Q, 16Q - 1; n2 (joining or leaving): 3Q, 7Q, 11Q. */
static const uint64_t tok0[] = {4 * Q, 12 * Q};
static const uint64_t tok1[] = {8 * Q, UINT64_MAX};
static const uint64_t tok2[] = {3 * Q, 7 * Q, 11 * Q};

static inline ring *ring_two(void)
{
    const char *names[] = {"n0", "n1"};
    const uint64_t *tok[] = {tok0, tok1};
    size_t nt[] = {2, 2};
    return ring_of(2, names, tok, nt);
}

static inline ring *ring_three(void)
{
    const char *names[] = {"n0", "n1", "n2"};
    const uint64_t *tok[] = {tok0, tok1, tok2};
    size_t nt[] = {2, 2, 3};
    return ring_of(3, names, tok, nt);
}

#define NKEYS 400
#define VLEN  (16 << 10)

static inline void key_of(char *out, size_t cap, int i)
{
    snprintf(out, cap, "key%05d", i);
}

static inline uint64_t token_of(int i)
{
    char k[16];
    key_of(k, sizeof(k), i);
    return rk_token(k, strlen(k));
}

/* The name of key i's replica in r. */
static inline const char *owner(const ring *r, int i)
{
    uint32_t rep[1];
    ck_assert_uint_eq(ring_replicas(r, token_of(i), rep, 1), 1);
    struct ring_node_info ni;
    ck_assert_int_eq(ring_node_get(r, &ni, rep[0]), 0);
    return ni.name;
}

/* Put key i = val at ts in s (through its commit log and memtable). */
static inline void put_rec(store *s, int i, uint64_t ts, struct rk_slice val)
{
    char k[16];
    key_of(k, sizeof(k), i);
    struct store_record r = {.ts = ts, .value = val};
    static uint8_t buf[VLEN + 64];
    size_t len = 0;
    ck_assert_int_eq(store_record_encode(buf, sizeof(buf), &len, &r), 0);
    ck_assert_int_eq(store_put(s, RK_SLICE(k, strlen(k)), RK_SLICE(buf, len)),
                     0);
}

static inline void put_key(store *s, int i)
{
    static uint8_t val[VLEN];
    memset(val, 'a' + i % 26, sizeof(val));
    put_rec(s, i, 1000 + (uint64_t)i, RK_SLICE(val, sizeof(val)));
}

/* Key i's record in s into *r (its value in *p, to free): false if none. */
static inline bool rec_of(store *s, int i, struct store_record *r, uint8_t **p)
{
    char k[16];
    key_of(k, sizeof(k), i);
    size_t len = 0;
    if (store_get_raw(p, &len, s, RK_SLICE(k, strlen(k))) < 0)
        return false;
    ck_assert_int_eq(store_record_decode(r, *p, len), 0);
    return true;
}

/* Whether s holds key i, with the value put_key wrote. */
static inline bool has_key(store *s, int i)
{
    uint8_t *p = NULL;
    struct store_record r;
    if (!rec_of(s, i, &r, &p))
        return false;
    bool ok = r.ts == 1000 + (uint64_t)i && r.value.len == VLEN &&
              r.value.p[0] == 'a' + i % 26;
    free(p);
    return ok;
}

/* One range over the whole ring, so that any key can be written. */
static inline void whole_range(store *s)
{
    ck_assert_int_eq(store_range_create(s, (struct store_range){0, 0}), 0);
}

static inline bool logged(const struct fnode *n, const char *what)
{
    return n->log && strstr(n->log, what);
}

/* Not inline, and never inlined: inlined into a test, gcc 12 takes a
 * pointer into the text (strstr of it) for one to this frame's t, whose
 * address open_memstream keeps, and -Wdangling-pointer fails the build.
 * `unused`: as static inline, no warning in a runner that never calls it. */
static __attribute__((noinline, unused)) char *text_of(stream *s)
{
    char *t = NULL;
    size_t len = 0;
    FILE *f = open_memstream(&t, &len);
    ck_assert_ptr_nonnull(f);
    stream_text(s, f, "NORMAL");
    ck_assert_int_eq(fclose(f), 0);
    return t;
}

#endif /* TESTS_UNIT_STREAM_WORLD_H */
