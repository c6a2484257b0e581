/*
 * check_coord.c - the coordinator's request state machine (coord.c,
 * coord_read.c) in-process on a fake host (coord/coord_host.h): replicas
 * that answer, fail or stay silent, a local commit that hangs, a stale
 * ring, on a fake clock that fires RPC deadlines and the wake timer. The
 * level planning it follows is check_coord_plan.c's.
 */
#include <errno.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <check.h>

#include "common/rk.h"
#include "coord/coord.h"
#include "coord/coord_host.h"
#include "coord/coord_plan.h"
#include "node/log.h"
#include "node/replica.h"
#include "ring/ring.h"
#include "tests/unit/coord_spec.h"
#include "wire/rpc_msg.h"

/* ---- the request state machine on a fake host --------------------------- */

/* Replicas named n0.. at "10.0.0.<i>:7001", one request each at a time
 * kept until the test answers it or the fake clock passes its deadline;
 * the local replica's commits kept until the test answers them; a wake
 * timer on the fake clock. Callbacks are counted, and one that runs from
 * inside coord_request fails the test (coord.h's contract). */
#define FAKE_MAX 8

struct fake_rpc {
    bool live;
    uint32_t peer;
    int type;          /* RPC_MSG_WRITE, RPC_MSG_READ */
    uint64_t deadline; /* fake clock */
    uint64_t ts;       /* a write's record */
    uint64_t epoch;    /* the ring epoch it was planned on */
    bool digest;       /* a read asking for a digest */
    coord_rpc_cb cb;
    void *arg;
};

struct fake {
    struct coord *c;
    uint64_t now, wake_at;
    int ready;
    uint64_t epoch; /* the applied ring's (7) */
    uint64_t heard; /* the last epoch ring_behind gave */
    uint32_t nrep, nnat;
    char name[FAKE_MAX][16], iaddr[FAKE_MAX][24];
    const char *dc[FAKE_MAX];
    bool up[FAKE_MAX], self[FAKE_MAX];
    uint64_t quiet[FAKE_MAX];
    bool refused[FAKE_MAX]; /* connect refused or connection reset */
    int holds;              /* replica lists handed out and not released */
    struct fake_rpc rpc[64];
    size_t nrpc;
    coord_local_cb commit_cb[16];
    void *commit_arg[16];
    size_t ncommit;
    bool local_found; /* the local replica's record */
    uint64_t local_ts;
    int local_full; /* local_full's answer */
    uint32_t hints[FAKE_MAX];
    bool in_call;
    int results;
    struct coord_result last;
    char value[64];
};

static uint64_t f_now_ms(void *arg)
{
    return ((struct fake *)arg)->now;
}

static uint64_t f_now_ns(void *arg)
{
    return ((struct fake *)arg)->now * 1000000u;
}

static uint64_t f_wall_ms(void *arg)
{
    return 1800000000000ull + ((struct fake *)arg)->now;
}

static void f_wake_arm(void *arg, uint64_t at)
{
    ((struct fake *)arg)->wake_at = at;
}

static int f_ready(void *arg)
{
    return ((struct fake *)arg)->ready;
}

static int
f_replicas(void *arg, struct coord_replicas *out, uint64_t token, bool write)
{
    struct fake *f = arg;
    (void)token;
    out->nnat = f->nnat;
    out->nrep = write ? f->nrep : f->nnat;
    for (uint32_t i = 0; i < out->nrep; i++) {
        out->rep[i] =
            (struct coord_plan_replica){f->dc[i], f->up[i], f->self[i]};
        out->name[i] = f->name[i];
        out->iaddr[i] = f->iaddr[i];
    }
    out->hold = f;
    f->holds++;
    return 0;
}

static void f_release(void *arg, void *hold)
{
    struct fake *f = arg;
    if (hold)
        f->holds--;
}

static uint64_t f_epoch(void *arg)
{
    return ((struct fake *)arg)->epoch;
}

/* As the daemon does: a newer epoch heard makes the ring stale. */
static void f_ring_behind(void *arg, uint64_t epoch)
{
    struct fake *f = arg;
    f->heard = epoch;
    if (epoch > f->epoch)
        f->ready = COORD_HOST_STALE_WAIT;
}

static int f_local_write(void *arg,
                         struct rk_slice key,
                         const struct rpc_record *rec,
                         coord_local_cb cb,
                         void *cb_arg)
{
    struct fake *f = arg;
    (void)key;
    (void)rec;
    ck_assert_uint_lt(f->ncommit, 16);
    f->commit_cb[f->ncommit] = cb;
    f->commit_arg[f->ncommit++] = cb_arg;
    return 0;
}

static int f_local_read(void *arg,
                        struct rk_slice key,
                        bool *found,
                        struct rpc_record *rec,
                        uint8_t **buf,
                        size_t *cap)
{
    struct fake *f = arg;
    (void)key;
    *found = f->local_found;
    *rec = (struct rpc_record){.ts = f->local_ts};
    if (f->local_found) {
        if (*cap < 5) {
            uint8_t *p = realloc(*buf, 5);
            if (!p)
                return -ENOMEM;
            *buf = p;
            *cap = 5;
        }
        memcpy(*buf, "local", 5);
        rec->value = RK_SLICE(*buf, 5);
    }
    return 0;
}

static int f_local_full(void *arg)
{
    return ((struct fake *)arg)->local_full;
}

static int f_rpc(void *arg,
                 const char *iaddr,
                 const struct rpc_buf *msg,
                 uint32_t timeout_ms,
                 uint32_t max_quiet_ms,
                 coord_rpc_cb cb,
                 void *cb_arg)
{
    struct fake *f = arg;
    uint32_t peer = FAKE_MAX;
    for (uint32_t i = 0; i < f->nrep; i++)
        if (strcmp(f->iaddr[i], iaddr) == 0)
            peer = i;
    ck_assert_uint_lt(peer, f->nrep);
    ck_assert_msg(f->up[peer], "a request to DOWN replica %u", peer);
    ck_assert_msg(!f->refused[peer], "a request to unreachable replica %u",
                  peer);
    if (max_quiet_ms && f->quiet[peer] >= max_quiet_ms)
        return RK_EUNAVAILABLE;
    enum rpc_msg_type type;
    struct rk_slice m = RK_SLICE(msg->data, msg->len);
    ck_assert_int_eq(rpc_msg_type_peek(&type, m), 0);
    struct fake_rpc *r = &f->rpc[f->nrpc++];
    ck_assert_uint_le(f->nrpc, 64);
    *r = (struct fake_rpc){.live = true,
                           .peer = peer,
                           .type = (int)type,
                           .deadline = f->now + timeout_ms,
                           .cb = cb,
                           .arg = cb_arg};
    if (type == RPC_MSG_WRITE) {
        struct rpc_write w;
        ck_assert_int_eq(rpc_write_decode(&w, m), 0);
        ck_assert_uint_eq(w.epoch, f->epoch);
        r->ts = w.rec.ts;
        r->epoch = w.epoch;
    } else {
        struct rpc_read rd;
        ck_assert_int_eq(rpc_read_decode(&rd, m), 0);
        ck_assert_uint_eq(rd.epoch, f->epoch);
        r->epoch = rd.epoch;
        r->digest = rd.digest;
    }
    return 0;
}

static uint64_t f_quiet_ms(void *arg, const char *iaddr)
{
    struct fake *f = arg;
    for (uint32_t i = 0; i < f->nrep; i++)
        if (strcmp(f->iaddr[i], iaddr) == 0)
            return f->quiet[i];
    return 0;
}

static bool f_reachable(void *arg, const char *iaddr)
{
    struct fake *f = arg;
    for (uint32_t i = 0; i < f->nrep; i++)
        if (strcmp(f->iaddr[i], iaddr) == 0)
            return !f->refused[i];
    return true;
}

static void
f_hint(void *arg, const char *name, struct rk_slice key, struct rk_slice rec)
{
    struct fake *f = arg;
    (void)key;
    ck_assert_uint_gt(rec.len, 0);
    for (uint32_t i = 0; i < f->nrep; i++)
        if (strcmp(f->name[i], name) == 0)
            f->hints[i]++;
}

/* The daemon's own rule (node/replica.c), so the tests below check it. */
static bool f_refused_for_good(void *arg, int status)
{
    (void)arg;
    return node__hint_rejected_for_good(status);
}

static uint64_t fake_hlc = 1000;

static int f_clock_now(void *arg, uint64_t *out)
{
    (void)arg;
    *out = ++fake_hlc;
    return 0;
}

static int f_clock_recv(void *arg, uint64_t remote, const char *from)
{
    (void)arg;
    (void)remote;
    (void)from;
    return 0;
}

static int f_clock_seen(void *arg, uint64_t ts)
{
    (void)arg;
    (void)ts;
    return 0;
}

/* Every line to the daemon's logger, so the tests below read what it
 * writes. */
static void f_log(void *arg,
                  enum coord_log_level level,
                  const char *event,
                  const char *fmt,
                  va_list ap)
{
    (void)arg;
    node_log_vwrite((enum node_log_level)level, event, fmt, ap);
}

static void
f_observe(void *arg, int op, enum coord_cl cl, int err, uint64_t start_ns)
{
    (void)arg;
    (void)op;
    (void)cl;
    (void)err;
    (void)start_ns;
}

/* A fake of `spec` (mk's: "dc1* dc1 dc1- | dc1") and a coordinator on it
 * in DC dc1: read timeout 1000 ms, write timeout 2000 ms. */
static void fake_init(struct fake *f, const char *spec, int64_t max_inflight)
{
    memset(f, 0, sizeof(*f));
    f->epoch = 7;
    struct tcase t;
    mk(&t, "dc1", spec);
    f->nrep = t.nrep;
    f->nnat = t.nnat;
    for (uint32_t i = 0; i < t.nrep; i++) {
        snprintf(f->name[i], sizeof(f->name[i]), "n%u", i);
        snprintf(f->iaddr[i], sizeof(f->iaddr[i]), "10.0.0.%u:7001", i);
        f->dc[i] = strcmp(t.rep[i].dc, "dc1") == 0 ? "dc1" : "dc2";
        f->up[i] = t.rep[i].up;
        f->self[i] = t.rep[i].self;
    }
    const struct coord_host h = {.arg = f,
                                 .now_ms = f_now_ms,
                                 .now_ns = f_now_ns,
                                 .wall_ms = f_wall_ms,
                                 .wake_arm = f_wake_arm,
                                 .ready = f_ready,
                                 .replicas = f_replicas,
                                 .release = f_release,
                                 .epoch = f_epoch,
                                 .ring_behind = f_ring_behind,
                                 .local_write = f_local_write,
                                 .local_read = f_local_read,
                                 .local_full = f_local_full,
                                 .rpc = f_rpc,
                                 .quiet_ms = f_quiet_ms,
                                 .reachable = f_reachable,
                                 .hint = f_hint,
                                 .refused_for_good = f_refused_for_good,
                                 .clock_now = f_clock_now,
                                 .clock_recv = f_clock_recv,
                                 .clock_seen = f_clock_seen,
                                 .observe = f_observe,
                                 .log = f_log};
    const struct coord_opts o = {.datacenter = "dc1",
                                 .read_timeout_ms = 1000,
                                 .write_timeout_ms = 2000,
                                 .max_inflight = max_inflight};
    ck_assert_int_eq(coord_new(&f->c, &h, &o), 0);
    coord_open(f->c);
}

static void on_result(const struct coord_result *res, void *arg)
{
    struct fake *f = arg;
    ck_assert_msg(!f->in_call, "callback from inside coord_request");
    f->results++;
    f->last = *res;
    f->last.value = RK_SLICE(NULL, 0);
    f->value[0] = 0;
    if (res->value.p && res->value.len < sizeof(f->value)) {
        memcpy(f->value, res->value.p, res->value.len);
        f->value[res->value.len] = 0;
    }
}

static int fake_request(struct fake *f, int op, enum coord_cl cl)
{
    const struct coord_request r = {.op = op,
                                    .key = RK_SLICE("k", 1),
                                    .value = RK_SLICE("v", 1),
                                    .cl = cl,
                                    .cb = on_result,
                                    .arg = f};
    f->in_call = true;
    int rc = coord_request(f->c, &r);
    f->in_call = false;
    return rc;
}

/* n callbacks so far, the last one with err. */
static void result_is(const struct fake *f, int n, int err)
{
    ck_assert_int_eq(f->results, n);
    ck_assert_int_eq(f->last.err, err);
}

/* The end of a loop turn. */
static void turn(struct fake *f)
{
    coord_run_deferred(f->c);
}

/* The request outstanding at peer i (its index in rpc[]), or -1. */
static int outstanding(const struct fake *f, uint32_t peer)
{
    for (size_t k = 0; k < f->nrpc; k++)
        if (f->rpc[k].live && f->rpc[k].peer == peer)
            return (int)k;
    return -1;
}

static size_t live_rpcs(const struct fake *f)
{
    size_t n = 0;
    for (size_t k = 0; k < f->nrpc; k++)
        n += f->rpc[k].live;
    return n;
}

/* The one request outstanding (the test fails if there are more or none):
 * its index in rpc[]; rpc[].peer says which replica the plan chose. */
static int only_rpc(const struct fake *f)
{
    ck_assert_uint_eq(live_rpcs(f), 1);
    for (size_t k = 0; k < f->nrpc; k++)
        if (f->rpc[k].live)
            return (int)k;
    return -1;
}

/* Peer i answers its outstanding request: a write with status st, a read
 * with st, found and a record of timestamp ts and value `value` (or its
 * digest, as a replica does, if the read asked for one). */
static void answer_value(struct fake *f,
                         uint32_t peer,
                         int st,
                         bool found,
                         uint64_t ts,
                         const char *value)
{
    int k = outstanding(f, peer);
    ck_assert_msg(k >= 0, "peer %u has no request to answer", peer);
    struct fake_rpc r = f->rpc[k];
    f->rpc[k].live = false;
    struct rpc_buf b = RPC_BUF_INIT;
    if (r.type == RPC_MSG_WRITE) {
        struct rpc_write_ack a = {.status = st, .hlc = 5};
        ck_assert_int_eq(rpc_write_ack_encode(&b, &a), 0);
    } else {
        struct rpc_read_resp rr = {.status = st, .hlc = 5, .found = found};
        rr.rec = (struct rpc_record){.ts = ts,
                                     .value = RK_SLICE(value, strlen(value))};
        if (found && r.digest) {
            rr.is_digest = true;
            rpc_record_digest(&rr.dig, &rr.rec);
        }
        ck_assert_int_eq(rpc_read_resp_encode(&b, &rr), 0);
    }
    r.cb(r.arg, 0, RK_SLICE(b.data, b.len));
    rpc_buf_free(&b);
}

static void
answer(struct fake *f, uint32_t peer, int st, bool found, uint64_t ts)
{
    answer_value(f, peer, st, found, ts, "peer");
}

/* The local commit k is done with status st. */
static void commit(struct fake *f, size_t k, int st)
{
    ck_assert_uint_lt(k, f->ncommit);
    coord_local_cb cb = f->commit_cb[k];
    f->commit_cb[k] = NULL;
    ck_assert_ptr_nonnull(cb);
    cb(st, f->commit_arg[k]);
}

/* The fake clock moves to `to`: requests past their deadline fail with
 * TIMEOUT and the wake timer fires, in time order. */
static void advance(struct fake *f, uint64_t to)
{
    while (f->now < to) {
        uint64_t next = to;
        if (f->wake_at && f->wake_at < next)
            next = f->wake_at > f->now ? f->wake_at : f->now;
        for (size_t k = 0; k < f->nrpc; k++)
            if (f->rpc[k].live && f->rpc[k].deadline < next)
                next = f->rpc[k].deadline;
        f->now = next > f->now ? next : f->now + 1;
        for (size_t k = 0; k < f->nrpc; k++)
            if (f->rpc[k].live && f->rpc[k].deadline <= f->now) {
                f->rpc[k].live = false;
                f->rpc[k].cb(f->rpc[k].arg, RK_ETIMEOUT, RK_SLICE(NULL, 0));
            }
        if (f->wake_at && f->wake_at <= f->now) {
            f->wake_at = 0;
            coord_wake(f->c);
        }
        turn(f);
    }
}

/* Everything answered: nothing in flight, every replica list released. */
static void fake_done(struct fake *f)
{
    advance(f, f->now + 5000);
    const struct coord_stats *st = coord_stats(f->c);
    ck_assert_int_eq(st->inflight, 0);
    ck_assert_int_eq(st->background, 0);
    ck_assert_int_eq(st->parked, 0);
    ck_assert_uint_eq(live_rpcs(f), 0);
    for (size_t k = 0; k < f->ncommit; k++)
        ck_assert_ptr_null(f->commit_cb[k]);
    ck_assert_int_eq(f->holds, 0);
    coord_close(f->c);
    coord_free(f->c);
}

START_TEST(write_quorum_answers_at_its_level)
{
    struct fake f;
    fake_init(&f, "dc1* dc1 dc1", 100);
    ck_assert_int_eq(fake_request(&f, COORD_OP_PUT, COORD_CL_QUORUM), 0);
    ck_assert_uint_eq(f.ncommit, 1);
    ck_assert_uint_eq(live_rpcs(&f), 2);
    turn(&f);
    ck_assert_int_eq(f.results, 0);
    commit(&f, 0, 0);
    ck_assert_int_eq(f.results, 0);
    answer(&f, 1, 0, false, 0);
    result_is(&f, 1, 0);
    ck_assert_uint_eq(f.last.acks, 2);
    ck_assert_uint_eq(f.last.need, 2);
    /* the third is waited for in the background, then hinted */
    const struct coord_stats *st = coord_stats(f.c);
    ck_assert_int_eq(st->inflight, 0);
    ck_assert_int_eq(st->background, 1);
    advance(&f, 1999);
    ck_assert_uint_eq(f.hints[2], 0);
    advance(&f, 2000);
    ck_assert_uint_eq(f.hints[2], 1);
    ck_assert_int_eq(st->background, 0);
    ck_assert_int_eq(f.results, 1);
    ck_assert_uint_eq(st->req[COORD_OP_PUT][COORD_CL_QUORUM], 1);
    fake_done(&f);
}
END_TEST

START_TEST(write_failures_answer_timeout_with_cause)
{
    struct fake f;
    fake_init(&f, "dc1* dc1 dc1", 100);
    ck_assert_int_eq(fake_request(&f, COORD_OP_PUT, COORD_CL_QUORUM), 0);
    turn(&f);
    answer(&f, 1, -EIO, false, 0);
    commit(&f, 0, 0);
    ck_assert_int_eq(f.results, 0);
    answer(&f, 2, RK_EBADREQ, false, 0); /* refused for good: no hint */
    result_is(&f, 1, RK_ETIMEOUT);
    ck_assert_int_eq(f.last.cause, -EIO);
    ck_assert_uint_eq(f.last.acks, 1);
    ck_assert_uint_eq(f.last.need, 2);
    ck_assert_uint_eq(f.hints[1], 1);
    ck_assert_uint_eq(f.hints[2], 0);
    const struct coord_stats *st = coord_stats(f.c);
    ck_assert_uint_eq(st->timeout[COORD_OP_PUT][COORD_CL_QUORUM], 1);
    ck_assert_uint_eq(st->writes_refused, 1);
    fake_done(&f);
}
END_TEST

/* How many lines of the log file at path hold `what`. */
static int log_count(const char *path, const char *what)
{
    FILE *fp = fopen(path, "r");
    ck_assert_ptr_nonnull(fp);
    char line[1024];
    int n = 0;
    while (fgets(line, sizeof(line), fp))
        n += strstr(line, what) != NULL;
    fclose(fp);
    return n;
}

/* Regression hint_stored_for_rejected_write (a cluster test until the
 * coordinator ran in-process): a replica that refuses a write for good
 * (BAD_REQUEST, PROTOCOL, NOT_FOUND, NOT_SUPPORTED, CLOCK_SKEW: a replay
 * would be refused the same, e.g. a replica with another replication
 * setting that holds no range for the key) gets no hint, which only cost a
 * synced store, hint space and a replay; the refusals are counted and
 * logged at most once per 10 s with how many. A replica that failed
 * otherwise (EIO) or timed out gets a hint. */
START_TEST(write_refused_for_good_keeps_no_hint)
{
    static const int for_good[] = {RK_EBADREQ, RK_EPROTO, RK_ENOTFOUND,
                                   RK_ENOTSUP, RK_ECLOCKSKEW};
    const size_t ng = sizeof(for_good) / sizeof(for_good[0]);
    char path[] = "/tmp/check_coord_log_XXXXXX";
    int fd = mkstemp(path);
    ck_assert_int_ge(fd, 0);
    close(fd);
    ck_assert_int_eq(node_log_open(path, NODE_LOG_INFO, "t"), 0);
    struct fake f;
    fake_init(&f, "dc1* dc1 dc1", 100);
    f.now = 1000;
    for (size_t i = 0; i <= ng; i++) {
        ck_assert_int_eq(fake_request(&f, COORD_OP_PUT, COORD_CL_ALL), 0);
        turn(&f);
        commit(&f, i, 0);
        answer(&f, 1, 0, false, 0);
        answer(&f, 2, i < ng ? for_good[i] : -EIO, false, 0);
        ck_assert_int_eq(f.results, (int)i + 1);
        ck_assert_int_ne(f.last.err, 0);
        ck_assert_uint_eq(f.hints[1], 0);
        ck_assert_uint_eq(f.hints[2], (i < ng ? 0u : 1u));
    }
    ck_assert_uint_eq(coord_stats(f.c)->writes_refused, ng);
    ck_assert_int_eq(log_count(path, "event=coord.write_refused "), 1);
    /* 10 s later: logged again, with the count since (4 left out) */
    f.now += 10000;
    ck_assert_int_eq(fake_request(&f, COORD_OP_PUT, COORD_CL_ALL), 0);
    turn(&f);
    commit(&f, ng + 1, 0);
    answer(&f, 1, 0, false, 0);
    answer(&f, 2, RK_ENOTFOUND, false, 0);
    ck_assert_int_eq(log_count(path, "event=coord.write_refused "), 2);
    ck_assert_int_eq(log_count(path, "error=NOT_FOUND refused=5 hint=none"), 1);
    ck_assert_uint_eq(f.hints[2], 1);
    node_log_close();
    unlink(path);
    fake_done(&f);
}
END_TEST

START_TEST(write_down_and_silent_replicas_are_hinted)
{
    struct fake f;
    fake_init(&f, "dc1* dc1- dc1", 100);
    f.quiet[2] = 5000; /* silent for a write timeout: not sent to */
    ck_assert_int_eq(fake_request(&f, COORD_OP_DEL, COORD_CL_ONE), 0);
    ck_assert_uint_eq(live_rpcs(&f), 0);
    ck_assert_uint_eq(f.hints[1], 1);
    ck_assert_uint_eq(f.hints[2], 1);
    ck_assert_uint_eq(coord_stats(f.c)->writes_unsent, 1);
    commit(&f, 0, 0);
    result_is(&f, 1, 0);
    fake_done(&f);
}
END_TEST

START_TEST(write_decided_at_once_is_answered_from_the_loop)
{
    /* every replica silent for a write timeout: nothing can be sent, the
     * write is decided inside the call, and answered only at the end of
     * the loop turn (coord.h's contract) */
    struct fake f;
    fake_init(&f, "dc1 dc1 dc1", 100);
    for (uint32_t i = 0; i < 3; i++)
        f.quiet[i] = 5000;
    ck_assert_int_eq(fake_request(&f, COORD_OP_PUT, COORD_CL_ONE), 0);
    ck_assert_int_eq(f.results, 0);
    ck_assert_uint_eq(live_rpcs(&f), 0);
    turn(&f);
    result_is(&f, 1, RK_ETIMEOUT);
    ck_assert_uint_eq(f.last.acks, 0);
    ck_assert_uint_eq(f.last.need, 1);
    for (uint32_t i = 0; i < 3; i++)
        ck_assert_uint_eq(f.hints[i], 1);
    fake_done(&f);
}
END_TEST

/* Regression (issue 26, full disk invisible): a node short of disk space
 * coordinated QUORUM writes of keys it replicates, its own copy failed,
 * and they were acknowledged by the other two with no copy and no hint
 * for it. Such a write is refused (FULL) before anything is sent; a
 * coordinator that is not a replica of the key goes on; a local copy
 * refused later fails the write if it is not answered yet, and is counted
 * if it is. */
START_TEST(write_refused_when_local_disk_full)
{
    struct fake f;
    fake_init(&f, "dc1* dc1 dc1", 100);
    f.local_full = RK_EFULL;
    ck_assert_int_eq(fake_request(&f, COORD_OP_PUT, COORD_CL_QUORUM), RK_EFULL);
    ck_assert_int_eq(fake_request(&f, COORD_OP_DEL, COORD_CL_ONE), RK_EFULL);
    ck_assert_uint_eq(f.ncommit, 0);
    ck_assert_uint_eq(live_rpcs(&f), 0);
    for (uint32_t i = 0; i < 3; i++)
        ck_assert_uint_eq(f.hints[i], 0);
    const struct coord_stats *st = coord_stats(f.c);
    ck_assert_uint_eq(st->writes_full, 2);
    ck_assert_int_eq(st->inflight, 0);
    ck_assert_int_eq(fake_request(&f, COORD_OP_GET, COORD_CL_ONE), 0);
    ck_assert_uint_eq(live_rpcs(&f), 0); /* read locally: reads go on */
    turn(&f);
    result_is(&f, 1, RK_ENOTFOUND);

    /* the disk filled after the look: the write is not acknowledged */
    f.local_full = 0;
    ck_assert_int_eq(fake_request(&f, COORD_OP_PUT, COORD_CL_QUORUM), 0);
    turn(&f);
    commit(&f, 0, RK_EFULL);
    result_is(&f, 2, RK_EFULL);
    answer(&f, 1, 0, false, 0);
    answer(&f, 2, 0, false, 0);
    ck_assert_int_eq(f.results, 2);
    ck_assert_uint_eq(st->local_full_late, 0);

    /* ...or, answered already, it is counted */
    ck_assert_int_eq(fake_request(&f, COORD_OP_PUT, COORD_CL_QUORUM), 0);
    turn(&f);
    answer(&f, 1, 0, false, 0);
    answer(&f, 2, 0, false, 0);
    result_is(&f, 3, 0);
    commit(&f, 1, RK_EFULL);
    ck_assert_int_eq(f.results, 3);
    ck_assert_uint_eq(st->local_full_late, 1);
    fake_done(&f);

    fake_init(&f, "dc1 dc1 dc1", 100); /* not a replica of the key */
    f.local_full = RK_EFULL;
    ck_assert_int_eq(fake_request(&f, COORD_OP_PUT, COORD_CL_QUORUM), 0);
    ck_assert_uint_eq(live_rpcs(&f), 3);
    answer(&f, 0, 0, false, 0);
    answer(&f, 1, 0, false, 0);
    result_is(&f, 1, 0);
    answer(&f, 2, 0, false, 0);
    fake_done(&f);
}
END_TEST

START_TEST(write_local_commit_hangs_until_the_deadline)
{
    struct fake f;
    fake_init(&f, "dc1* dc1 dc1", 100);
    ck_assert_int_eq(fake_request(&f, COORD_OP_PUT, COORD_CL_ALL), 0);
    turn(&f);
    answer(&f, 1, 0, false, 0);
    answer(&f, 2, 0, false, 0);
    advance(&f, 1999);
    ck_assert_int_eq(f.results, 0);
    advance(&f, 2000);
    result_is(&f, 1, RK_ETIMEOUT);
    ck_assert_uint_eq(f.last.acks, 2);
    ck_assert_uint_eq(f.last.need, 3);
    commit(&f, 0, 0); /* late: in the background */
    ck_assert_int_eq(f.results, 1);
    fake_done(&f);
}
END_TEST

/* A large value has more time: COORD_WRITE_MS_PER_MIB for each MiB
 * (regression write_deadline_ignores_size: a 15 MiB SET on a loaded
 * machine was answered TIMEOUT after 2 s though it was applied). */
START_TEST(write_deadline_grows_with_the_value)
{
    struct fake f;
    fake_init(&f, "dc1* dc1 dc1", 100);
    size_t len = (size_t)16 << 20;
    char *big = malloc(len);
    ck_assert_ptr_nonnull(big);
    memset(big, 'b', len);
    const struct coord_request r = {.op = COORD_OP_PUT,
                                    .key = RK_SLICE("k", 1),
                                    .value = RK_SLICE(big, len),
                                    .cl = COORD_CL_ALL,
                                    .cb = on_result,
                                    .arg = &f};
    f.in_call = true;
    ck_assert_int_eq(coord_request(f.c, &r), 0);
    f.in_call = false;
    free(big);
    turn(&f);
    answer(&f, 1, 0, false, 0);
    answer(&f, 2, 0, false, 0);
    uint64_t until = 2000 + 16 * COORD_WRITE_MS_PER_MIB;
    advance(&f, until - 1);
    ck_assert_int_eq(f.results, 0);
    advance(&f, until);
    result_is(&f, 1, RK_ETIMEOUT);
    commit(&f, 0, 0);
    fake_done(&f);
}
END_TEST

START_TEST(write_pending_replica_not_ready_is_hinted)
{
    struct fake f;
    fake_init(&f, "dc1 dc1 dc1 | dc1", 100);
    ck_assert_int_eq(fake_request(&f, COORD_OP_PUT, COORD_CL_QUORUM), 0);
    ck_assert_uint_eq(live_rpcs(&f), 4);
    turn(&f);
    answer(&f, 0, 0, false, 0);
    answer(&f, 1, 0, false, 0);
    ck_assert_int_eq(f.results, 0); /* 2 + the joiner */
    answer(&f, 3, RK_ESTALE, false, 0);
    result_is(&f, 1, 0);
    ck_assert_uint_eq(f.last.need, 2);
    ck_assert_uint_eq(f.hints[3], 1);
    answer(&f, 2, 0, false, 0);
    fake_done(&f);
}
END_TEST

START_TEST(read_one_is_answered_locally)
{
    struct fake f;
    fake_init(&f, "dc1 dc1* dc1", 100);
    f.local_found = true;
    f.local_ts = 50;
    ck_assert_int_eq(fake_request(&f, COORD_OP_GET, COORD_CL_ONE), 0);
    ck_assert_uint_eq(live_rpcs(&f), 0);
    ck_assert_int_eq(f.results, 0);
    turn(&f);
    result_is(&f, 1, 0);
    ck_assert_str_eq(f.value, "local");
    fake_done(&f);
}
END_TEST

START_TEST(read_hedges_past_a_silent_replica)
{
    struct fake f;
    fake_init(&f, "dc1 dc1 dc1", 100);
    ck_assert_int_eq(fake_request(&f, COORD_OP_GET, COORD_CL_QUORUM), 0);
    ck_assert_int_ge(outstanding(&f, 0), 0);
    ck_assert_int_ge(outstanding(&f, 1), 0);
    ck_assert_int_lt(outstanding(&f, 2), 0);
    turn(&f);
    answer(&f, 0, 0, true, 10);
    advance(&f, 499);
    ck_assert_int_lt(outstanding(&f, 2), 0);
    advance(&f, 500); /* the hedge point: half the read timeout */
    ck_assert_int_ge(outstanding(&f, 2), 0);
    ck_assert_uint_eq(coord_stats(f.c)->read_hedges, 1);
    answer(&f, 2, 0, true, 10);
    result_is(&f, 1, 0);
    ck_assert_str_eq(f.value, "peer");
    fake_done(&f);
}
END_TEST

START_TEST(read_repairs_a_stale_replica_before_answering)
{
    struct fake f;
    fake_init(&f, "dc1 dc1 dc1", 100);
    ck_assert_int_eq(fake_request(&f, COORD_OP_GET, COORD_CL_QUORUM), 0);
    turn(&f);
    answer(&f, 0, 0, true, 20);
    answer(&f, 1, 0, true, 10);
    ck_assert_int_eq(f.results, 0); /* waits for the repair */
    int k = outstanding(&f, 1);
    ck_assert_int_ge(k, 0);
    ck_assert_int_eq(f.rpc[k].type, RPC_MSG_WRITE);
    ck_assert_uint_eq(f.rpc[k].ts, 20);
    ck_assert_uint_eq(coord_stats(f.c)->read_repairs, 1);
    answer(&f, 1, 0, false, 0);
    result_is(&f, 1, 0);
    fake_done(&f);
}
END_TEST

/* Regression read_repair_unfinished_goes_back (found by test_history): a
 * QUORUM read whose newest answer is on one replica only (a write that
 * failed) and whose read repair fails, or does not finish by the deadline,
 * is answered TIMEOUT, not with that value: a later QUORUM read through
 * the replicas without it would return the older one. Repaired in time,
 * the value is the answer (read_repairs_a_stale_replica_before_answering),
 * and so it is when the third replica, asked once the repair is needed,
 * holds it too. _i: 0 the repair fails and the third is stale, 1 the
 * repair is late and the third fails, 2 the third holds the newest. */
START_TEST(read_repair_unfinished_is_not_answered)
{
    struct fake f;
    fake_init(&f, "dc1 dc1 dc1", 100);
    ck_assert_int_eq(fake_request(&f, COORD_OP_GET, COORD_CL_QUORUM), 0);
    turn(&f);
    answer(&f, 0, 0, true, 20);
    answer(&f, 1, 0, true, 10);
    ck_assert_int_eq(f.results, 0); /* waits for the repair of 1 */
    /* and for 2, asked now: it may hold the newest too */
    ck_assert_int_ge(outstanding(&f, 2), 0);
    if (_i == 0) {
        answer(&f, 1, -EIO, false, 0);
        ck_assert_int_eq(f.results, 0);
        answer(&f, 2, 0, true, 10); /* stale too */
        result_is(&f, 1, RK_ETIMEOUT);
        ck_assert_uint_eq(f.last.acks, 1);
        ck_assert_uint_eq(f.last.need, 2);
    } else if (_i == 1) {
        answer(&f, 2, -EIO, false, 0);
        advance(&f, 999);
        ck_assert_int_eq(f.results, 0);
        advance(&f, 1000);
        result_is(&f, 1, RK_ETIMEOUT);
        answer(&f, 1, 0, false, 0); /* late: in the background */
        ck_assert_int_eq(f.results, 1);
    } else {
        /* 2 holds it: two do, the answer, the repair of 1 hanging
         * (regression read_repair_hang_times_out_reads, test_flapping) */
        answer(&f, 2, 0, true, 20);
        result_is(&f, 1, 0);
        ck_assert_str_eq(f.value, "peer");
        answer(&f, 1, 0, false, 0); /* the repair, in the background */
        ck_assert_int_eq(f.results, 1);
    }
    fake_done(&f);
}
END_TEST

/* Three replicas in one DC; a QUORUM GET started at 1000 ms, asking two
 * of them. */
static void quorum_get_asking_two(struct fake *f)
{
    fake_init(f, "dc1 dc1 dc1", 100);
    f->now = 1000;
    ck_assert_int_eq(fake_request(f, COORD_OP_GET, COORD_CL_QUORUM), 0);
    turn(f);
    ck_assert_uint_eq(live_rpcs(f), 2);
}

/* Digest reads (coord_read.c): a QUORUM read through a replica reads its
 * own record and asks the other replica for a digest only; a digest of
 * the same record is a holder, and nothing more is sent. */
START_TEST(read_quorum_moves_the_value_once)
{
    struct fake f;
    fake_init(&f, "dc1* dc1 dc1", 100);
    f.local_found = true;
    f.local_ts = 50;
    ck_assert_int_eq(fake_request(&f, COORD_OP_GET, COORD_CL_QUORUM), 0);
    int k = only_rpc(&f);
    ck_assert_int_eq(f.rpc[k].type, RPC_MSG_READ);
    ck_assert(f.rpc[k].digest);
    turn(&f);
    answer_value(&f, f.rpc[k].peer, 0, true, 50, "local");
    result_is(&f, 1, 0);
    ck_assert_str_eq(f.value, "local");
    ck_assert_uint_eq(live_rpcs(&f), 0); /* no repair, no second read */
    ck_assert_uint_eq(coord_stats(f.c)->read_digest_mismatches, 0);
    ck_assert_uint_eq(coord_stats(f.c)->read_repairs, 0);
    fake_done(&f);
}
END_TEST

/* A digest that cannot be ordered without its value: newer than the
 * record read (_i 0), as new with another value (_i 1), or found where
 * the record read was not (_i 2). The read asks again, for records only,
 * by the same deadline, and answers the newest once it is repaired here. */
START_TEST(read_digest_mismatch_reads_records_again)
{
    struct fake f;
    fake_init(&f, "dc1* dc1 dc1", 100);
    f.local_found = _i != 2;
    f.local_ts = 10;
    ck_assert_int_eq(fake_request(&f, COORD_OP_GET, COORD_CL_QUORUM), 0);
    int k = only_rpc(&f);
    ck_assert(f.rpc[k].digest);
    turn(&f);
    answer_value(&f, f.rpc[k].peer, 0, true, _i == 1 ? 10 : 20, "peer");
    ck_assert_int_eq(f.results, 0);
    ck_assert_uint_eq(coord_stats(f.c)->read_digest_mismatches, 1);
    /* asked again: one replica, for its record */
    k = only_rpc(&f);
    ck_assert_int_eq(f.rpc[k].type, RPC_MSG_READ);
    ck_assert(!f.rpc[k].digest);
    turn(&f);
    answer_value(&f, f.rpc[k].peer, 0, true, _i == 1 ? 10 : 20, "peer");
    /* the peer's record is the newest (_i 1: the same timestamp, and
     * "peer" > "local" byte-wise), and this node's copy is repaired
     * before the answer */
    ck_assert_int_eq(f.results, 0);
    ck_assert_uint_eq(f.ncommit, 1);
    commit(&f, 0, 0);
    turn(&f);
    result_is(&f, 1, 0);
    ck_assert_str_eq(f.value, "peer");
    ck_assert_uint_eq(coord_stats(f.c)->read_digest_mismatches, 1);
    fake_done(&f);
}
END_TEST

/* A digest older than the record read is repaired with that record: no
 * second read. */
START_TEST(read_digest_older_is_repaired_without_reading_again)
{
    struct fake f;
    fake_init(&f, "dc1* dc1 dc1", 100);
    f.local_found = true;
    f.local_ts = 20;
    ck_assert_int_eq(fake_request(&f, COORD_OP_GET, COORD_CL_QUORUM), 0);
    uint32_t p = f.rpc[only_rpc(&f)].peer;
    turn(&f);
    answer_value(&f, p, 0, true, 10, "peer");
    ck_assert_int_eq(f.results, 0); /* waits for the repair */
    int k = outstanding(&f, p);
    ck_assert_int_ge(k, 0);
    ck_assert_int_eq(f.rpc[k].type, RPC_MSG_WRITE);
    ck_assert_uint_eq(f.rpc[k].ts, 20);
    answer(&f, p, 0, false, 0);
    result_is(&f, 1, 0);
    ck_assert_str_eq(f.value, "local");
    ck_assert_uint_eq(coord_stats(f.c)->read_digest_mismatches, 0);
    ck_assert_uint_eq(coord_stats(f.c)->read_repairs, 1);
    fake_done(&f);
}
END_TEST

/* Through a node that is not a replica, the first replica is asked for
 * its record and the next for a digest; when the first fails, the one
 * asked in its place is asked for its record, not a digest, so the read
 * is decided in one round. */
START_TEST(read_after_a_failed_record_read_asks_for_a_record)
{
    struct fake f;
    quorum_get_asking_two(&f);
    ck_assert(!f.rpc[outstanding(&f, 0)].digest);
    ck_assert(f.rpc[outstanding(&f, 1)].digest);
    answer(&f, 0, -EIO, false, 0);
    int k = outstanding(&f, 2);
    ck_assert_int_ge(k, 0);
    ck_assert(!f.rpc[k].digest);
    answer_value(&f, 1, 0, true, 10, "peer");
    answer_value(&f, 2, 0, true, 10, "peer");
    result_is(&f, 1, 0);
    ck_assert_str_eq(f.value, "peer");
    ck_assert_uint_eq(coord_stats(f.c)->read_digest_mismatches, 0);
    fake_done(&f);
}
END_TEST

/* The replica asked for its record is silent at the hedge point: the one
 * asked in its place is asked for its record too (a digest would leave
 * the read with digests only, and a second round), and with the digest
 * that came it decides the read. */
START_TEST(read_hedged_past_a_silent_record_read_asks_for_a_record)
{
    struct fake f;
    quorum_get_asking_two(&f);
    ck_assert(!f.rpc[outstanding(&f, 0)].digest);
    ck_assert(f.rpc[outstanding(&f, 1)].digest);
    answer_value(&f, 1, 0, true, 10, "peer");
    advance(&f, 1500); /* the hedge point: 0 silent */
    int k = outstanding(&f, 2);
    ck_assert_int_ge(k, 0);
    ck_assert(!f.rpc[k].digest);
    answer_value(&f, 2, 0, true, 10, "peer");
    result_is(&f, 1, 0);
    ck_assert_str_eq(f.value, "peer");
    ck_assert_uint_eq(coord_stats(f.c)->read_digest_mismatches, 0);
    fake_done(&f);
}
END_TEST

START_TEST(read_times_out_at_its_deadline)
{
    struct fake f;
    fake_init(&f, "dc1 dc1 dc1", 100);
    ck_assert_int_eq(fake_request(&f, COORD_OP_GET, COORD_CL_QUORUM), 0);
    turn(&f);
    advance(&f, 999);
    ck_assert_int_eq(f.results, 0);
    ck_assert_uint_eq(live_rpcs(&f), 3); /* hedged to the third */
    advance(&f, 1000);
    result_is(&f, 1, RK_ETIMEOUT);
    ck_assert_uint_eq(f.last.acks, 0);
    ck_assert_uint_eq(f.last.need, 2);
    ck_assert_uint_eq(coord_stats(f.c)->timeout[COORD_OP_GET][COORD_CL_QUORUM],
                      1);
    fake_done(&f);
}
END_TEST

START_TEST(read_asks_a_silent_peer_last)
{
    struct fake f;
    fake_init(&f, "dc1 dc1 dc1", 100);
    f.quiet[0] = 5000;
    ck_assert_int_eq(fake_request(&f, COORD_OP_GET, COORD_CL_TWO), 0);
    ck_assert_int_lt(outstanding(&f, 0), 0);
    ck_assert_int_ge(outstanding(&f, 1), 0);
    ck_assert_int_ge(outstanding(&f, 2), 0);
    ck_assert_uint_eq(coord_stats(f.c)->read_passed_over, 1);
    turn(&f);
    answer(&f, 1, 0, false, 0);
    answer(&f, 2, RK_ETIMEOUT, false, 0); /* fails: now it is asked */
    ck_assert_int_ge(outstanding(&f, 0), 0);
    answer(&f, 0, 0, false, 0);
    result_is(&f, 1, RK_ENOTFOUND);
    fake_done(&f);
}
END_TEST

START_TEST(stale_ring_waits_then_starts_or_expires)
{
    struct fake f;
    fake_init(&f, "dc1 dc1 dc1", 100);
    f.ready = COORD_HOST_STALE_WAIT;
    ck_assert_int_eq(fake_request(&f, COORD_OP_PUT, COORD_CL_ONE), 0);
    ck_assert_int_eq(fake_request(&f, COORD_OP_GET, COORD_CL_ONE), 0);
    ck_assert_uint_eq(live_rpcs(&f), 0);
    ck_assert_int_eq(coord_stats(f.c)->parked, 2);
    coord_unpark(f.c); /* still stale: nothing */
    ck_assert_int_eq(coord_stats(f.c)->parked, 2);
    advance(&f, 300);
    f.ready = 0;
    coord_unpark(f.c);
    ck_assert_int_eq(coord_stats(f.c)->parked, 0);
    ck_assert_uint_eq(live_rpcs(&f), 4); /* the write to 3, the read to 1 */
    for (uint32_t i = 0; i < 3; i++)
        while (outstanding(&f, i) >= 0)
            answer(&f, i, 0, false, 0);
    turn(&f);
    ck_assert_int_eq(f.results, 2);
    /* one that waits past its deadline: RING_STALE */
    f.ready = COORD_HOST_STALE_WAIT;
    ck_assert_int_eq(fake_request(&f, COORD_OP_GET, COORD_CL_ONE), 0);
    advance(&f, f.now + 999);
    ck_assert_int_eq(f.results, 2);
    advance(&f, f.now + 1);
    result_is(&f, 3, RK_ESTALE);
    /* settling after a restart: refused at once */
    f.ready = RK_ESTALE;
    ck_assert_int_eq(fake_request(&f, COORD_OP_GET, COORD_CL_ONE), RK_ESTALE);
    f.ready = RK_ECLOSED;
    ck_assert_int_eq(fake_request(&f, COORD_OP_GET, COORD_CL_ONE), RK_ECLOSED);
    f.ready = 0;
    ck_assert_int_eq(f.results, 3);
    fake_done(&f);
}
END_TEST

/* Anomaly D of test_history (a lost write across a ring epoch change):
 * for about a gossip round after a join or a leave, a coordinator still on
 * the old ring asked the old replica set, and a replica that had moved on
 * served it. Replicas now refuse a request planned on an older ring
 * (OLD_RING, node/replica.c); the coordinator then counts the next epoch as
 * heard, waits for it like a request that arrives while the ring is stale,
 * and plans the request again on the new ring, by the request's deadline.
 * Until 2026-12-06 the refusal was a failed replica: this read was answered
 * NOT_FOUND from the old replicas, missing the write on the new ones. */
START_TEST(regression_epoch_change_loses_write)
{
    struct fake f;
    quorum_get_asking_two(&f);
    answer(&f, 0, RK_EOLDRING, false, 0); /* on epoch 8 already */
    answer(&f, 1, 0, false, 0);           /* the old set: not found */
    turn(&f);
    while (outstanding(&f, 2) >= 0)
        answer(&f, 2, 0, false, 0);
    turn(&f);
    ck_assert_int_eq(f.results, 0); /* waiting for the ring */
    ck_assert_uint_eq(f.heard, 8);
    ck_assert_int_eq(coord_stats(f.c)->parked, 1);
    ck_assert_uint_eq(coord_stats(f.c)->replans, 1);
    ck_assert_uint_eq(coord_stats(f.c)->req[COORD_OP_GET][COORD_CL_QUORUM], 1);
    ck_assert_int_eq(coord_stats(f.c)->inflight, 1);
    advance(&f, 1400);
    ck_assert_int_eq(f.results, 0);
    /* gossip brings epoch 8: the read is planned and asked again */
    f.epoch = 8;
    f.ready = 0;
    coord_unpark(f.c);
    turn(&f);
    ck_assert_int_eq(coord_stats(f.c)->parked, 0);
    ck_assert_uint_eq(live_rpcs(&f), 2);
    for (size_t k = 0; k < f.nrpc; k++)
        if (f.rpc[k].live)
            ck_assert_uint_eq(f.rpc[k].epoch, 8);
    answer(&f, 0, 0, true, 50); /* the new set has the write */
    answer(&f, 1, 0, true, 50);
    turn(&f);
    result_is(&f, 1, 0);
    ck_assert_str_eq(f.value, "peer");

    /* a write refused by one replica is written again on the new ring */
    ck_assert_int_eq(fake_request(&f, COORD_OP_PUT, COORD_CL_QUORUM), 0);
    turn(&f);
    answer(&f, 2, RK_EOLDRING, false, 0);
    answer(&f, 0, 0, false, 0);
    answer(&f, 1, 0, false, 0); /* a quorum, but of a plan refused */
    turn(&f);
    ck_assert_int_eq(f.results, 1);
    ck_assert_uint_eq(f.heard, 9);
    f.epoch = 9;
    f.ready = 0;
    coord_unpark(f.c);
    turn(&f);
    ck_assert_uint_eq(live_rpcs(&f), 3);
    for (uint32_t i = 0; i < 3; i++)
        answer(&f, i, 0, false, 0);
    turn(&f);
    result_is(&f, 2, 0);
    ck_assert_uint_eq(f.hints[2], 0); /* refused: written again, no hint */

    /* refused after the write was answered: not written again but hinted
     * (replayed once this node has the newer ring), and the ring counts
     * as behind for the requests that come next */
    ck_assert_int_eq(fake_request(&f, COORD_OP_PUT, COORD_CL_QUORUM), 0);
    turn(&f);
    answer(&f, 0, 0, false, 0);
    answer(&f, 1, 0, false, 0);
    turn(&f);
    result_is(&f, 3, 0);
    answer(&f, 2, RK_EOLDRING, false, 0);
    turn(&f);
    ck_assert_int_eq(f.results, 3);
    ck_assert_uint_eq(f.hints[2], 1);
    ck_assert_uint_eq(f.heard, 10);
    ck_assert_int_eq(f.ready, COORD_HOST_STALE_WAIT);
    ck_assert_uint_eq(coord_stats(f.c)->replans, 2);
    f.epoch = 10;
    f.ready = 0;

    /* the newer ring never comes: RING_STALE at the request's deadline */
    ck_assert_int_eq(fake_request(&f, COORD_OP_GET, COORD_CL_QUORUM), 0);
    turn(&f);
    uint64_t t0 = f.now;
    answer(&f, 0, RK_EOLDRING, false, 0);
    turn(&f);
    advance(&f, t0 + 999);
    ck_assert_int_eq(f.results, 3);
    advance(&f, t0 + 1000);
    result_is(&f, 4, RK_ESTALE);
    f.ready = 0;
    fake_done(&f);
}
END_TEST

/* A QUORUM read asks replicas 0 and 1 on epoch 7, and 2 at the hedge
 * point (1 is silent), still with the epoch-7 message. The node applies
 * epoch 8; 0 and 2 answer, 2 with an older record, so a read repair's
 * write is encoded, on epoch 8, into the request's message. Then 1
 * answers its epoch-7 read OLD_RING: the epoch heard is 8 (the refused
 * message's + 1), which exists. Until 2026-12-07 it was the request's
 * current epoch + 1, 9: an epoch nobody announced, which gossip's
 * RING_EPOCH spread to every node and none could build, so every ring
 * stayed stale for good (test_history: a decommission that never
 * started). */
START_TEST(regression_old_ring_after_repair_phantom_epoch)
{
    struct fake f;
    quorum_get_asking_two(&f);
    ck_assert_int_ge(outstanding(&f, 0), 0);
    ck_assert_int_ge(outstanding(&f, 1), 0);
    advance(&f, 1500); /* the hedge point: 2 asked too */
    turn(&f);
    int k2 = outstanding(&f, 2);
    ck_assert_int_ge(k2, 0);
    ck_assert_uint_eq(f.rpc[k2].epoch, 7);
    f.epoch = 8; /* applied meanwhile */
    answer(&f, 0, 0, true, 50);
    answer(&f, 2, 0, true, 10); /* older: repaired, on epoch 8 */
    turn(&f);
    int k1 = outstanding(&f, 1);
    ck_assert_int_ge(k1, 0);
    ck_assert_uint_eq(f.rpc[k1].epoch, 7);
    answer(&f, 1, RK_EOLDRING, false, 0);
    turn(&f);
    ck_assert_uint_eq(f.heard, 8);
    while (outstanding(&f, 2) >= 0)
        answer(&f, 2, 0, false, 0);
    turn(&f);
    advance(&f, 4000);
    turn(&f);
    f.ready = 0;
    fake_done(&f);
}
END_TEST

START_TEST(admission_and_unavailable_refuse_at_once)
{
    struct fake f;
    fake_init(&f, "dc1 dc1- dc1-", 1);
    ck_assert_int_eq(fake_request(&f, COORD_OP_PUT, COORD_CL_QUORUM),
                     RK_EUNAVAILABLE);
    ck_assert_uint_eq(live_rpcs(&f), 0);
    ck_assert_uint_eq(
        coord_stats(f.c)->unavailable[COORD_OP_PUT][COORD_CL_QUORUM], 1);
    ck_assert_int_eq(fake_request(&f, COORD_OP_GET, COORD_CL_ONE), 0);
    ck_assert_int_eq(fake_request(&f, COORD_OP_GET, COORD_CL_ONE),
                     RK_EOVERLOADED);
    ck_assert_uint_eq(coord_stats(f.c)->overloaded, 1);
    answer(&f, 0, 0, false, 0);
    turn(&f);
    result_is(&f, 1, RK_ENOTFOUND);
    fake_done(&f);
}
END_TEST

/* A replica whose connect was refused or whose connection was reset (a
 * killed process) while gossip still says UP is planned as DOWN: ALL is
 * refused at once, reads do not ask it, writes hint it; reachable again,
 * it is asked again. */
START_TEST(unreachable_replica_is_planned_down)
{
    struct fake f;
    fake_init(&f, "dc1* dc1 dc1", 100);
    f.refused[2] = true;
    ck_assert_int_eq(fake_request(&f, COORD_OP_GET, COORD_CL_ALL),
                     RK_EUNAVAILABLE);
    ck_assert_int_eq(fake_request(&f, COORD_OP_PUT, COORD_CL_ALL),
                     RK_EUNAVAILABLE);
    ck_assert_uint_eq(live_rpcs(&f), 0);
    ck_assert_uint_eq(coord_stats(f.c)->unavailable[COORD_OP_GET][COORD_CL_ALL],
                      1);
    /* QUORUM read: this node and n1, never n2, even past the hedge point */
    ck_assert_int_eq(fake_request(&f, COORD_OP_GET, COORD_CL_QUORUM), 0);
    ck_assert_int_ge(outstanding(&f, 1), 0);
    advance(&f, f.now + 600);
    ck_assert_int_lt(outstanding(&f, 2), 0);
    answer(&f, 1, 0, false, 0);
    result_is(&f, 1, RK_ENOTFOUND);
    /* QUORUM write: sent to n1, hinted for n2 at once */
    ck_assert_int_eq(fake_request(&f, COORD_OP_PUT, COORD_CL_QUORUM), 0);
    ck_assert_uint_eq(f.hints[2], 1);
    ck_assert_int_lt(outstanding(&f, 2), 0);
    ck_assert_int_ge(outstanding(&f, 1), 0);
    commit(&f, 0, 0);
    answer(&f, 1, 0, false, 0);
    result_is(&f, 2, 0);
    /* connected again: asked again */
    f.refused[2] = false;
    f.refused[1] = true;
    ck_assert_int_eq(fake_request(&f, COORD_OP_GET, COORD_CL_QUORUM), 0);
    ck_assert_int_lt(outstanding(&f, 1), 0);
    ck_assert_int_ge(outstanding(&f, 2), 0);
    answer(&f, 2, 0, false, 0);
    result_is(&f, 3, RK_ENOTFOUND);
    f.refused[1] = false;
    ck_assert_int_eq(fake_request(&f, COORD_OP_GET, COORD_CL_ALL), 0);
    ck_assert_int_ge(outstanding(&f, 1), 0);
    ck_assert_int_ge(outstanding(&f, 2), 0);
    answer(&f, 1, 0, false, 0);
    answer(&f, 2, 0, false, 0);
    result_is(&f, 4, RK_ENOTFOUND);
    fake_done(&f);
}
END_TEST

static Suite *coord_suite(void)
{
    Suite *s = suite_create("coord");
    TCase *tc = tcase_create("requests");
    tcase_add_test(tc, write_quorum_answers_at_its_level);
    tcase_add_test(tc, write_failures_answer_timeout_with_cause);
    tcase_add_test(tc, write_refused_for_good_keeps_no_hint);
    tcase_add_test(tc, write_down_and_silent_replicas_are_hinted);
    tcase_add_test(tc, write_decided_at_once_is_answered_from_the_loop);
    tcase_add_test(tc, write_local_commit_hangs_until_the_deadline);
    tcase_add_test(tc, write_deadline_grows_with_the_value);
    tcase_add_test(tc, write_refused_when_local_disk_full);
    tcase_add_test(tc, write_pending_replica_not_ready_is_hinted);
    tcase_add_test(tc, read_one_is_answered_locally);
    tcase_add_test(tc, read_hedges_past_a_silent_replica);
    tcase_add_test(tc, read_repairs_a_stale_replica_before_answering);
    tcase_add_loop_test(tc, read_repair_unfinished_is_not_answered, 0, 3);
    tcase_add_test(tc, read_quorum_moves_the_value_once);
    tcase_add_loop_test(tc, read_digest_mismatch_reads_records_again, 0, 3);
    tcase_add_test(tc, read_digest_older_is_repaired_without_reading_again);
    tcase_add_test(tc, read_after_a_failed_record_read_asks_for_a_record);
    tcase_add_test(tc, read_hedged_past_a_silent_record_read_asks_for_a_record);
    tcase_add_test(tc, read_times_out_at_its_deadline);
    tcase_add_test(tc, read_asks_a_silent_peer_last);
    tcase_add_test(tc, stale_ring_waits_then_starts_or_expires);
    tcase_add_test(tc, regression_epoch_change_loses_write);
    tcase_add_test(tc, regression_old_ring_after_repair_phantom_epoch);
    tcase_add_test(tc, admission_and_unavailable_refuse_at_once);
    tcase_add_test(tc, unreachable_replica_is_planned_down);
    suite_add_tcase(s, tc);
    return s;
}

int main(void)
{
    SRunner *sr = srunner_create(coord_suite());
    srunner_run_all(sr, CK_NORMAL);
    int failed = srunner_ntests_failed(sr);
    srunner_free(sr);
    return failed ? 1 : 0;
}
