/*
 * scan.c - SCAN over the cluster: the coordinator's walk and the
 * replica's answer (scan.h), and DBSIZE's estimate.
 *
 * A call walks rounds. A round takes the ring arc that holds the cursor
 * (cut at 2^64 - 1: scan_segment), plans its replicas at the call's level
 * as a read does (coord_plan.h: this node first, then peers in preference
 * order, asking more when one fails), and asks each for the keys of
 * (cursor - 1, arc end], at most the call's budget of them. The replica
 * answers from its store off the loop (store_scan over the arc) with each
 * key's version and no value, never splitting a token. Once the level is
 * met the answers are merged (scan_merge: the part every answer covers,
 * each key's newest version, live ones kept); the cursor moves to the end
 * of that part and, while budget, rounds and the deadline allow, the next
 * round asks on. Memory is bounded per call: one answer per replica of
 * one round (at most RPC_SCAN_LIMIT_MAX keys and about SCAN_REPLY_BYTES
 * each) and the keys collected (stopped past SCAN_KEYS_BYTES).
 *
 * The ring is the one applied when each round starts: a cursor is a token,
 * so a call after a ring change asks whichever replicas hold it then, and
 * a key present throughout a scan is returned by it (at least once).
 */
#include "node/scan.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include <uv.h>

#include "common/glob.h"
#include "coord/coord_plan.h"
#include "coord/scan_merge.h"
#include "gossip/gossip.h"
#include "node/clock.h"
#include "node/daemon.h"
#include "node/obs.h"
#include "node/replica.h"
#include "node/ring_view.h"
#include "ring/ring.h"
#include "storage/store.h"
#include "wire/rpc_msg.h"

/* Rounds one call takes at most (arcs it visits). */
#define SCAN_ROUNDS_MAX 32
/* An answer stops at the first token boundary past this many key bytes. */
#define SCAN_REPLY_BYTES ((size_t)1 << 20)
/* A call stops asking once its keys take this many bytes. */
#define SCAN_KEYS_BYTES ((size_t)1 << 20)
/* A round refused for a ring change is planned again this much later. */
#define SCAN_RETRY_MS 50
/* Scans a replica runs for coordinators at once; past it: OVERLOADED. */
#define SCAN_SERVE_JOBS 8

_Static_assert(SCAN_COUNT_MAX == RPC_SCAN_LIMIT_MAX,
               "a call's count is what one answer may hold");

/* ---- the replica's answer ----------------------------------------------- */

struct scan_op;

/* One answer computed from the local store: for a remote coordinator (c,
 * id) or for this node's own call (op, rep, round). */
struct scan_job {
    node *n;
    net_conn *c;
    uint64_t id;
    struct scan_op *op;
    uint32_t rep, round;
    struct rpc_scan rq;
    /* the answer */
    int status;
    bool done;
    uint64_t next;
    uint32_t count;
    struct rpc_buf items;
    uint64_t last_token; /* of the last item, once count > 0 */
};

#define SCAN_STOP 2 /* not store's STORE__CHUNK_FULL (1) */

static int job_item(const struct store_item *it, void *arg)
{
    struct scan_job *j = arg;
    bool full = j->count >= j->rq.limit || j->items.len >= SCAN_REPLY_BYTES;
    if (full && it->token != j->last_token)
        return SCAN_STOP; /* the scan's position stays before it */
    if (j->count >= RPC_STREAM_ITEMS_MAX)
        return RK_ETOOLARGE; /* that many keys of one token */
    struct store_record sr;
    if (store_record_decode(&sr, it->rec.p, it->rec.len) != 0)
        return 0; /* not ours to judge: repair overwrites it */
    struct rpc_record r = {
        .ts = sr.ts,
        .flags = (sr.flags & STORE_REC_TOMBSTONE) ? RPC_REC_TOMBSTONE : 0,
        .expiry = (sr.flags & STORE_REC_EXPIRES) ? sr.expiry_ms : 0,
        .value = RK_SLICE("", 0)};
    int rc = rpc_stream_item_add(&j->items, it->key, &r);
    if (rc < 0)
        return rc;
    j->count++;
    j->last_token = it->token;
    return 0;
}

static void job_work(void *arg)
{
    struct scan_job *j = arg;
    struct store_scan sc;
    store_scan_init(&sc, (struct store_range){j->rq.start, j->rq.end});
    int rc;
    do
        rc = store_scan_next(j->n->store, &sc, RPC_STREAM_ITEMS_MAX, SIZE_MAX,
                             job_item, j);
    while (rc == 0 && !sc.done);
    j->done = rc == 0;
    j->next = rc == SCAN_STOP ? j->last_token + 1 : 0;
    j->status = rc == SCAN_STOP ? 0 : rc;
    /* a part of the arc not held here: the asker's ring and this node's
     * differ (a join or leave in flight): RING_STALE, retryable */
    if (rc == RK_ENOTFOUND)
        j->status = RK_ESTALE;
}

static void op_answer(struct scan_op *op,
                      uint32_t round,
                      uint32_t i,
                      int status,
                      struct rk_slice resp);

static void job_done(void *arg, int status)
{
    struct scan_job *j = arg;
    node *n = j->n;
    n->scan_jobs--;
    struct rpc_scan_resp m = {.status = status ? status : j->status,
                              .hlc = n->clock.hlc.last};
    if (m.status == 0) {
        m.done = j->done;
        m.next = j->next;
        m.count = j->count;
        m.items = RK_SLICE(j->items.data, j->items.len);
    }
    struct rpc_buf b = RPC_BUF_INIT;
    int rc = rpc_scan_resp_encode(&b, &m);
    if (j->op) {
        op_answer(j->op, j->round, j->rep, rc,
                  RK_SLICE(b.data, rc == 0 ? b.len : 0));
    } else {
        if (rc == 0)
            net_conn_reply(j->c, j->id, RK_SLICE(b.data, b.len));
        net_conn_unref(j->c);
    }
    rpc_buf_free(&b);
    rpc_buf_free(&j->items);
    free(j);
}

/* Queue a scan of the local store; 0 or an error (nothing queued). */
static int job_queue(node *n, struct scan_job *j)
{
    if (n->stopping || !n->store)
        return RK_ECLOSED;
    if (n->scan_jobs >= SCAN_SERVE_JOBS)
        return RK_EOVERLOADED;
    j->n = n;
    int rc = node__queue_work(n, job_work, job_done, j);
    if (rc == 0) {
        n->scan_jobs++;
        n->stats.replica_scans++;
    }
    return rc;
}

static void serve_status(net_conn *c, uint64_t id, node *n, int status)
{
    struct rpc_scan_resp m = {.status = status, .hlc = n->clock.hlc.last};
    struct rpc_buf b = RPC_BUF_INIT;
    if (rpc_scan_resp_encode(&b, &m) == 0)
        net_conn_reply(c, id, RK_SLICE(b.data, b.len));
    rpc_buf_free(&b);
}

void node__scan_serve(node *n, net_conn *c, uint64_t id, struct rk_slice f)
{
    struct scan_job *j = calloc(1, sizeof(*j));
    int rc = j ? rpc_scan_decode(&j->rq, f) : -ENOMEM;
    if (rc == RK_EPROTO || rc == RK_ETOOLARGE)
        n->stats.internode_bad++;
    if (rc == 0 && node__sender_ring_old(n, j->rq.epoch))
        rc = RK_EOLDRING; /* the asker waits for its ring, then asks again */
    if (rc == 0) {
        j->c = c;
        j->id = id;
        net_conn_ref(c);
        rc = job_queue(n, j);
        if (rc < 0)
            net_conn_unref(c);
    }
    if (rc < 0) {
        free(j);
        serve_status(c, id, n, rc);
    }
}

/* ---- the coordinator ------------------------------------------------------
 */

struct scan_op {
    node *n;
    coord_scan_cb cb;
    void *arg;
    enum coord_cl cl;
    uint64_t cursor;
    uint32_t budget; /* keys' work left */
    uint32_t rounds;
    uint64_t deadline; /* loop ms */
    uint8_t *match;
    size_t match_len;
    bool in_call;  /* inside coord_scan: finish does not call back */
    bool finished; /* answered (or to be, by coord_scan's return) */
    int err;
    int refs;         /* the call, each request outstanding, the retry timer */
    uv_timer_t retry; /* a round asked again after a ring change */
    bool retry_open;  /* retry initialised: closed before the op is freed */
    /* the round: arc (start, end] */
    uint32_t round;
    uint64_t epoch; /* of the ring the round was planned on */
    uint64_t start, end;
    struct coord_plan plan;
    struct coord_plan_cursor pc;
    int rep_err; /* a replica's failure in this round */
    char iaddr[RING_MAX_REPLICAS][sizeof(((struct node_peer *)0)->iaddr)];
    uint8_t *resp[RING_MAX_REPLICAS]; /* answers, owned */
    struct rpc_scan_resp ans[RING_MAX_REPLICAS];
    /* the keys found: bytes back to back, and their lengths */
    struct rpc_buf kbuf;
    size_t *klen;
    size_t nkeys, kcap;
};

/* A request's callback argument. */
struct scan_ctx {
    struct scan_op *op;
    uint32_t round, i;
};

/* The round's answers, once merged or given up. */
static void answers_free(struct scan_op *op)
{
    for (int i = 0; i < RING_MAX_REPLICAS; i++) {
        free(op->resp[i]);
        op->resp[i] = NULL;
    }
}

static void op_free(struct scan_op *op)
{
    answers_free(op);
    rpc_buf_free(&op->kbuf);
    free(op->klen);
    free(op->match);
    free(op);
}

static void on_retry_closed(uv_handle_t *h)
{
    op_free(h->data);
}

static void op_unref(struct scan_op *op)
{
    if (--op->refs > 0)
        return;
    if (op->retry_open)
        uv_close((uv_handle_t *)&op->retry, on_retry_closed);
    else
        op_free(op);
}

static void op_finish(struct scan_op *op, int err)
{
    if (op->finished)
        return;
    op->finished = true;
    op->err = err;
    if (op->in_call)
        return; /* coord_scan returns it */
    struct rk_slice *keys = NULL;
    if (!err && op->nkeys) {
        keys = malloc(op->nkeys * sizeof(*keys));
        if (!keys)
            err = -ENOMEM;
    }
    size_t off = 0;
    for (size_t k = 0; keys && k < op->nkeys; k++) {
        keys[k] = RK_SLICE(op->kbuf.data + off, op->klen[k]);
        off += op->klen[k];
    }
    struct coord_scan_result res = {.err = err,
                                    .acks = op->plan.acks,
                                    .need = op->plan.need,
                                    .cursor = op->cursor,
                                    .nkeys = err ? 0 : op->nkeys,
                                    .keys = keys};
    op->cb(&res, op->arg);
    free(keys);
}

static int op_emit(struct rk_slice key, void *arg)
{
    struct scan_op *op = arg;
    if (op->match_len &&
        !rk_glob_match(RK_SLICE(op->match, op->match_len), key, false))
        return 0;
    if (op->nkeys == op->kcap) {
        size_t cap = op->kcap ? 2 * op->kcap : 16;
        size_t *k = realloc(op->klen, cap * sizeof(*k));
        if (!k)
            return -ENOMEM;
        op->klen = k;
        op->kcap = cap;
    }
    /* rpc_buf grows through the items encoder's writer: append by hand */
    if (op->kbuf.len + key.len > op->kbuf.cap) {
        size_t cap = op->kbuf.cap ? 2 * op->kbuf.cap : 1024;
        while (cap < op->kbuf.len + key.len)
            cap *= 2;
        uint8_t *d = realloc(op->kbuf.data, cap);
        if (!d)
            return -ENOMEM;
        op->kbuf.data = d;
        op->kbuf.cap = cap;
    }
    memcpy(op->kbuf.data + op->kbuf.len, key.p, key.len);
    op->kbuf.len += key.len;
    op->klen[op->nkeys++] = key.len;
    return 0;
}

static void round_start(struct scan_op *op);

/* The round's level is met: merge, move the cursor, go on or answer. */
static void round_merge(struct scan_op *op)
{
    node *n = op->n;
    struct scan_answer a[RING_MAX_REPLICAS];
    size_t na = 0;
    uint32_t most = 0;
    for (uint32_t i = 0; i < op->plan.nrep; i++) {
        if (!op->plan.rep[i].ok)
            continue;
        a[na++] = (struct scan_answer){.done = op->ans[i].done,
                                       .next = op->ans[i].next,
                                       .items = op->ans[i].items};
        if (op->ans[i].count > most)
            most = op->ans[i].count;
    }
    bool done;
    uint64_t next;
    int rc = scan_merge(&done, &next, op->start, op->end, a, na,
                        node__clock_cluster_ms(n), op_emit, op);
    answers_free(op);
    if (rc < 0) {
        op_finish(op, rc);
        return;
    }
    op->rounds++;
    op->budget = most >= op->budget ? 0 : op->budget - most;
    if (done && op->end == UINT64_MAX) {
        op->cursor = 0; /* the walk is over */
        op_finish(op, 0);
        return;
    }
    op->cursor = done ? op->end + 1 : next;
    if (op->budget == 0 || op->rounds >= SCAN_ROUNDS_MAX ||
        op->kbuf.len >= SCAN_KEYS_BYTES || uv_now(n->loop) >= op->deadline ||
        n->stopping) {
        op_finish(op, 0);
        return;
    }
    round_start(op);
}

/* A request that never reached replica i, or whose connection failed
 * (refused, reset, closed): the replica is not there for this round,
 * which the client hears as UNAVAILABLE (retryable), never as the
 * socket's errno. A scan changes nothing, so nothing is in doubt. */
static int unreached(int rc)
{
    if (rc == RK_ECLOSED || (rk_is_errno(rc) && rc != -ENOMEM))
        return RK_EUNAVAILABLE;
    return rc;
}

static void on_remote(void *arg, int status, struct rk_slice resp)
{
    struct scan_ctx *x = arg;
    struct scan_op *op = x->op;
    uint32_t round = x->round, i = x->i;
    free(x);
    op_answer(op, round, i, unreached(status), resp);
}

/* Ask replica i for the round's arc; false if the request could not go. */
static bool ask(struct scan_op *op, uint32_t i)
{
    node *n = op->n;
    struct rpc_scan rq = {.epoch = op->epoch,
                          .start = op->start,
                          .end = op->end,
                          .limit = op->budget < RPC_SCAN_LIMIT_MAX
                                       ? op->budget
                                       : RPC_SCAN_LIMIT_MAX};
    int rc;
    op->refs++;
    if (op->plan.rep[i].self) {
        struct scan_job *j = calloc(1, sizeof(*j));
        rc = -ENOMEM;
        if (j) {
            *j = (struct scan_job){
                .op = op, .rep = i, .round = op->round, .rq = rq};
            rc = job_queue(n, j);
            if (rc < 0)
                free(j);
        }
    } else {
        struct scan_ctx *x = malloc(sizeof(*x));
        struct rpc_buf b = RPC_BUF_INIT;
        uint64_t now = uv_now(n->loop);
        uint64_t left = op->deadline > now ? op->deadline - now : 1;
        rc = x ? rpc_scan_encode(&b, &rq) : -ENOMEM;
        if (rc == 0) {
            *x = (struct scan_ctx){op, op->round, i};
            rc = unreached(node__rpc_addr(n, op->iaddr[i], &b, (uint32_t)left,
                                          0, on_remote, x));
        }
        if (rc < 0)
            free(x);
        rpc_buf_free(&b);
    }
    if (rc < 0) {
        op->refs--;
        if (!op->rep_err)
            op->rep_err = rc;
        return false;
    }
    return true;
}

static void on_retry(uv_timer_t *t)
{
    struct scan_op *op = t->data;
    round_start(op);
    op_unref(op);
}

/* The round's replicas refused it for a ring change (a replica's ring is
 * newer than this node's: OLD_RING; or it no longer holds the arc:
 * RING_STALE). Plan it again on the ring this node has a moment later,
 * until the deadline; then answer RING_STALE (retryable, same cursor). */
static void round_later(struct scan_op *op)
{
    node *n = op->n;
    uint64_t now = uv_now(n->loop);
    answers_free(op); /* those that came: the round is asked again */
    if (n->stopping || now + SCAN_RETRY_MS >= op->deadline) {
        op_finish(op, RK_ESTALE);
        return;
    }
    if (!op->retry_open) {
        uv_timer_init(n->loop, &op->retry);
        op->retry.data = op;
        op->retry_open = true;
    }
    op->refs++;
    uv_timer_start(&op->retry, on_retry, SCAN_RETRY_MS, 0);
}

/* Ask what more the level needs, then judge the round. */
static void round_step(struct scan_op *op)
{
    bool quiet[RING_MAX_REPLICAS] = {false};
    uint32_t passed = 0;
    int i;
    while ((i = coord_plan_read_next(&op->plan, &op->pc, quiet, &passed)) >=
           0) {
        coord_plan_asked(&op->plan, (uint32_t)i);
        if (!ask(op, (uint32_t)i))
            coord_plan_answered(&op->plan, (uint32_t)i, false);
    }
    switch (coord_plan_outcome(&op->plan)) {
    case COORD_PLAN_SATISFIED:
        round_merge(op);
        break;
    case COORD_PLAN_FAILED:
        if (op->rep_err == RK_EOLDRING || op->rep_err == RK_ESTALE)
            round_later(op); /* the rings differ: ask again on the new one */
        else
            op_finish(op, op->rep_err ? op->rep_err : RK_EUNAVAILABLE);
        break;
    case COORD_PLAN_WAITING:
        break;
    }
}

static void op_answer(struct scan_op *op,
                      uint32_t round,
                      uint32_t i,
                      int status,
                      struct rk_slice resp)
{
    if (op->finished || round != op->round) {
        op_unref(op); /* late: the round or the call is over */
        return;
    }
    int rc = status;
    if (rc == 0) { /* decoded from a copy: resp lives for this call only */
        op->resp[i] = malloc(resp.len ? resp.len : 1);
        if (!op->resp[i])
            rc = -ENOMEM;
        else
            memcpy(op->resp[i], resp.p, resp.len);
    }
    if (rc == 0)
        rc = rpc_scan_resp_decode(&op->ans[i], RK_SLICE(op->resp[i], resp.len));
    if (rc == 0)
        rc = op->ans[i].status;
    if (rc == RK_EOLDRING) { /* as a read's (coord_node.c ring_behind) */
        gossip_epoch_heard(op->n->g, op->epoch + 1);
        op->n->ring_stale = node__ring_stale_now(op->n);
    }
    if (rc < 0 && (!op->rep_err || rc == RK_EOLDRING))
        op->rep_err = rc;
    coord_plan_answered(&op->plan, i, rc == 0);
    round_step(op);
    op_unref(op);
}

static void round_start(struct scan_op *op)
{
    node *n = op->n;
    ring *r = n->ring;
    if (n->stopping) {
        op_finish(op, RK_ECLOSED);
        return;
    }
    if (!r || ring_token_count(r) == 0) {
        op_finish(op, RK_EUNAVAILABLE);
        return;
    }
    if (n->ring_stale && !n->settling) {
        round_later(op); /* heard of a newer ring: wait for it */
        return;
    }
    op->round++;
    op->rep_err = 0;
    op->epoch = ring_epoch(r);
    size_t arc = ring_arc_find(r, op->cursor);
    scan_segment(&op->start, &op->end, op->cursor, ring_arc_range(r, arc).end);
    const uint32_t *idx = ring_arc_replicas(r, arc);
    size_t nrep = ring_replica_count(r);
    if (nrep > RING_MAX_REPLICAS)
        nrep = RING_MAX_REPLICAS;
    struct coord_plan_replica reps[RING_MAX_REPLICAS];
    for (size_t i = 0; i < nrep; i++) {
        struct ring_node_info ni;
        ring_node_get(r, &ni, idx[i]);
        reps[i] = (struct coord_plan_replica){.dc = ni.dc};
        op->iaddr[i][0] = '\0';
        if (idx[i] >= n->npeers)
            continue; /* unknown: neither up nor self */
        const struct node_peer *p = &n->peer[idx[i]];
        reps[i].self = p->self;
        reps[i].up = p->up || p->self;
        memcpy(op->iaddr[i], p->iaddr, sizeof(op->iaddr[i]));
    }
    int rc = coord_plan_make(&op->plan, op->cl, n->cfg.datacenter, reps,
                             (uint32_t)nrep, (uint32_t)nrep);
    if (rc < 0) {
        op_finish(op, rc);
        return;
    }
    op->pc = (struct coord_plan_cursor)COORD_PLAN_CURSOR_INIT;
    round_step(op);
}

int coord_scan(node *n,
               uint64_t cursor,
               uint32_t count,
               struct rk_slice match,
               enum coord_cl cl,
               coord_scan_cb cb,
               void *arg)
{
    if (count < 1 || count > SCAN_COUNT_MAX)
        return RK_EBADREQ;
    if (n->stopping)
        return RK_ECLOSED;
    struct scan_op *op = calloc(1, sizeof(*op));
    if (!op)
        return -ENOMEM;
    *op = (struct scan_op){.n = n,
                           .cb = cb,
                           .arg = arg,
                           .cl = cl,
                           .cursor = cursor,
                           .budget = count,
                           .deadline = uv_now(n->loop) +
                                       (uint64_t)n->cfg.read_timeout_ms,
                           .in_call = true,
                           .refs = 1,
                           .kbuf = RPC_BUF_INIT};
    if (match.len) {
        op->match = malloc(match.len);
        if (!op->match) {
            free(op);
            return -ENOMEM;
        }
        memcpy(op->match, match.p, match.len);
        op->match_len = match.len;
    }
    round_start(op);
    op->in_call = false;
    int rc = op->finished ? op->err : 0;
    if (op->finished && rc == 0)
        rc = RK_EINTERNAL; /* a round ends only on an answer: later */
    if (rc < 0)
        op->finished = true; /* late answers only drop their reference */
    op_unref(op);
    return rc;
}

/* ---- DBSIZE ----------------------------------------------------------------
 */

uint64_t node__dbsize(node *n)
{
    uint64_t ranges, keys, bytes;
    struct ring_node_info ni;
    if (!n->ring || n->self_idx == RING_NONE ||
        ring_node_get(n->ring, &ni, n->self_idx) != 0 || ni.effective <= 0)
        return 0;
    node__obs_store_totals(n, &ranges, &keys, &bytes);
    return (uint64_t)((double)keys / ni.effective + 0.5);
}
