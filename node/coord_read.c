/*
 * coord_read.c - the coordinator's reads (coord.h: coord_get,
 * coord_get_metered): which replicas a read asks and when it asks more
 * (read_fill, the hedge point), the newest answer by LWW, the blocking
 * read repair, and the answer by the read's deadline. coord.c has what
 * reads and writes share: levels, the request struct's life, the wake list
 * of deadlines, waiting for the ring; and the writes.
 *
 * Apart from coord.c because a read is a state machine of its own (ask,
 * hedge, decide, repair, reply) that writes do not go through; the two
 * share the request (coord_internal.h). The design notes on reads,
 * deadlines and hedging are coord.c's opening comment.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "node/coord_internal.h"
#include "node/log.h"
#include "node/node_internal.h"

/* ---- reads ------------------------------------------------------------ */

static int rec_cmp(const struct rpc_record *a, const struct rpc_record *b)
{
    struct store_record x = {.ts = a->ts}, y = {.ts = b->ts};
    x.flags = (a->flags & RPC_REC_TOMBSTONE) ? STORE_REC_TOMBSTONE : 0;
    y.flags = (b->flags & RPC_REC_TOMBSTONE) ? STORE_REC_TOMBSTONE : 0;
    if (a->expiry) {
        x.flags |= STORE_REC_EXPIRES;
        x.expiry_ms = a->expiry;
    }
    if (b->expiry) {
        y.flags |= STORE_REC_EXPIRES;
        y.expiry_ms = b->expiry;
    }
    x.value = a->value;
    y.value = b->value;
    return store_record_cmp(&x, &y);
}

static void on_remote_read(void *arg, int status, struct rk_slice resp);

static int send_read(struct creq *q, uint32_t i)
{
    node *n = q->n;
    q->r[i].asked = true;
    if (q->rp[i].self) {
        bool found;
        int rc = node__local_read(n, RK_SLICE(q->key, q->klen), &found,
                                  &q->r[i].rec, &q->r[i].buf);
        q->r[i].answered = true;
        if (rc < 0) {
            node__coord_note_replica_failure(q, rc);
            return rc;
        }
        q->r[i].ok = true;
        q->r[i].found = found;
        if (found)
            node__coord_meter_add(q, &q->r[i].rec);
        node__coord_count_answer(q, i);
        return 0;
    }
    /* what is left of the read's deadline, not a fresh read_timeout_ms:
     * a replica asked after another failed or stayed silent answers by
     * the same deadline */
    uint64_t now = uv_now(n->loop);
    int rc = now < q->deadline ? 0 : RK_ETIMEOUT;
    if (rc == 0 && q->wmsg.len == 0) { /* the same for every replica */
        struct rpc_read rd = {.token = q->token,
                              .epoch = ring_epoch(n->ring),
                              .key = RK_SLICE(q->key, q->klen),
                              .digest = false};
        rc = rpc_read_encode(&q->wmsg, &rd);
    }
    if (rc == 0) {
        uint64_t left = q->deadline - now;
        rc = node__rpc_addr(n, q->rp[i].iaddr, &q->wmsg,
                            left < UINT32_MAX ? (uint32_t)left : UINT32_MAX, 0,
                            on_remote_read, &q->ctx[i]);
        if (rc == 0)
            q->refs++;
    }
    if (rc < 0) {
        q->r[i].answered = true;
        node__coord_note_failure(q, rc);
    }
    return rc;
}

/* Would asking replica i help an unmet constraint, counting the answers
 * and the requests outstanding that are still counted on (not silent past
 * the hedge point)? */
static bool read_helps(const struct creq *q, uint32_t i)
{
    for (int c = 0; c < q->ncons; c++) {
        if (q->cons[c].dc >= 0 && q->cons[c].dc != q->rep_dc[i])
            continue;
        uint32_t have = 0;
        for (uint32_t k = 0; k < q->nrep; k++) {
            const struct creply *rk = &q->r[k];
            if ((rk->answered ? rk->ok : rk->asked && !rk->slow) &&
                (q->cons[c].dc < 0 || q->cons[c].dc == q->rep_dc[k]))
                have++;
        }
        if (have < q->cons[c].need)
            return true;
    }
    return false;
}

/* A peer silent this long with a request to answer (net_peers_quiet_ms)
 * is asked after the others: a quarter of the read timeout, at most
 * COORD_QUIET_MS. Healthy replicas answer in milliseconds; asking one
 * that is not last costs nothing but where the read goes. */
uint64_t coord_quiet_limit(const node *n)
{
    uint64_t t = (uint64_t)n->cfg.read_timeout_ms / 4;
    return t < COORD_QUIET_MS ? t : COORD_QUIET_MS;
}

/* Ask live, not yet asked replicas until every constraint can be met by
 * the answers and the requests outstanding that are still counted on.
 * This node first, then the peers in preference order, except that peers
 * silent with requests to answer (coord_quiet_limit) come last: without that,
 * every read that asked a replica frozen but not yet DOWN waited for its
 * hedge point, half the read timeout, until gossip convicted it (seconds),
 * and an MGET's windows of reads each waited for one, finishing near its
 * deadline. A silent peer is asked again as soon as it answers anything,
 * however late (a frozen one answers what it was sent when it resumes). */
static void read_fill(struct creq *q)
{
    uint64_t limit = coord_quiet_limit(q->n);
    /* pass 0: this node; 1: peers not silent; 2: the silent ones passed
     * over in pass 1 (a replica that did not help then does not now) */
    for (int pass = 0; pass < 3; pass++) {
        for (uint32_t i = 0; i < q->nrep; i++) {
            const struct crep *p = &q->rp[i];
            struct creply *r = &q->r[i];
            if (r->asked || !p->up || (pass == 0) != p->self ||
                (pass == 2 && !r->passed_over) || !read_helps(q, i))
                continue;
            if (pass == 1 && node__peer_quiet_ms(q->n, p->iaddr) >= limit) {
                if (!r->passed_over)
                    q->n->stats.read_passed_over++;
                r->passed_over = true;
                continue;
            }
            send_read(q, i);
        }
    }
}

static void on_repair_done(int status, void *arg);

static void on_repair_remote(void *arg, int status, struct rk_slice resp)
{
    int st = status;
    if (st == 0) {
        struct rpc_write_ack a;
        st = rpc_write_ack_decode(&a, resp);
        if (st == 0)
            st = a.status;
    }
    on_repair_done(st, arg);
}

static void read_reply(struct creq *q)
{
    if (q->newest < 0) {
        node__coord_finish(q, RK_ENOTFOUND, RK_SLICE(NULL, 0));
        return;
    }
    const struct rpc_record *rec = &q->r[q->newest].rec;
    if ((rec->flags & RPC_REC_TOMBSTONE) ||
        (rec->expiry && rec->expiry <= node__now_ms())) {
        node__coord_finish(q, RK_ENOTFOUND, RK_SLICE(NULL, 0));
        return;
    }
    q->expiry = rec->expiry;
    node__coord_finish(q, 0, rec->value);
}

static void on_repair_done(int status, void *arg)
{
    struct cctx *c = arg;
    struct creq *q = c->q;
    if (status < 0)
        LOG(DEBUG, "coord.repair_fail", "error=\"%s\"", rk_strerror(status));
    if (--q->repair_pending == 0)
        read_reply(q);
    node__coord_unref(q);
}

void node__coord_read_decide(struct creq *q)
{
    if (q->done || q->phase != 0)
        return;
    if (!node__coord_satisfied(q)) {
        read_fill(q);
        bool outstanding = false;
        for (uint32_t i = 0; i < q->nrep; i++)
            if (q->r[i].asked && !q->r[i].answered)
                outstanding = true;
        if (!outstanding && !node__coord_satisfied(q))
            node__coord_finish(
                q, q->timed_out || !q->fail_err ? RK_ETIMEOUT : q->fail_err,
                RK_SLICE(NULL, 0));
        return;
    }
    /* newest among the answers */
    node *n = q->n;
    int newest = -1;
    for (uint32_t i = 0; i < q->nrep; i++) {
        if (!q->r[i].answered || !q->r[i].ok || !q->r[i].found)
            continue;
        if (newest < 0 || rec_cmp(&q->r[i].rec, &q->r[newest].rec) > 0)
            newest = (int)i;
    }
    q->newest = newest;
    q->phase = 1;
    if (newest < 0) {
        read_reply(q);
        return;
    }
    /* repair the stale ones */
    const struct rpc_record *best = &q->r[newest].rec;
    q->repair_pending = 1;
    q->refs++;
    bool encoded = false;
    for (uint32_t i = 0; i < q->nrep; i++) {
        if (!q->r[i].answered || !q->r[i].ok || (int)i == newest)
            continue;
        if (q->r[i].found && rec_cmp(&q->r[i].rec, best) == 0)
            continue;
        if (!encoded) {
            if (node__coord_encode_records(q, best) < 0)
                break;
            encoded = true;
        }
        struct cctx *c = &q->ctx[i]; /* its read has answered */
        int rc;
        if (q->rp[i].self) {
            rc = node__clock_seen(n, best->ts);
            if (rc == 0)
                rc = node__local_write(n, RK_SLICE(q->key, q->klen), best,
                                       on_repair_done, c);
        } else {
            rc = node__rpc_addr(n, q->rp[i].iaddr, &q->wmsg,
                                (uint32_t)n->cfg.write_timeout_ms, 0,
                                on_repair_remote, c);
        }
        if (rc < 0)
            continue;
        n->stats.read_repairs++;
        q->repair_pending++;
        q->refs++;
    }
    if (--q->repair_pending == 0)
        read_reply(q);
    node__coord_unref(q);
}

/* Half of what the read had left when it started has passed without
 * enough answers: the replicas that have not answered are no longer
 * counted on (they still count if they answer in time), and the next live
 * ones are asked, by the same deadline. Without it a frozen replica (not
 * yet DOWN) made every read that asked it wait for the deadline and then
 * answer TIMEOUT, although the others could have answered. */
static void read_hedge(struct creq *q)
{
    uint32_t asked = 0, now_asked = 0;
    for (uint32_t i = 0; i < q->nrep; i++) {
        if (!q->r[i].asked)
            continue;
        asked++;
        if (!q->r[i].answered)
            q->r[i].slow = true;
    }
    read_fill(q);
    for (uint32_t i = 0; i < q->nrep; i++)
        now_asked += q->r[i].asked;
    if (now_asked > asked)
        q->n->stats.read_hedges++;
}

/* The deadline passed. Waiting for replicas: TIMEOUT. Waiting for read
 * repairs: the answer they would have given (as when a repair fails);
 * they finish in the background. */
static void read_expire(struct creq *q)
{
    if (q->phase == 0) {
        q->timed_out = true;
        node__coord_finish(q, RK_ETIMEOUT, RK_SLICE(NULL, 0));
        return;
    }
    LOG(DEBUG, "coord.repair_late", "pending=%u", q->repair_pending);
    read_reply(q);
}

void node__coord_read_wake(struct creq *q, uint64_t now)
{
    if (q->done)
        return;
    if (now >= q->deadline) {
        read_expire(q);
        return;
    }
    if (q->phase == 0) {
        read_hedge(q);
        node__coord_read_decide(q);
    }
    if (!q->done)
        node__coord_wake_link(q, q->deadline);
}

static void on_remote_read(void *arg, int status, struct rk_slice resp)
{
    struct cctx *c = arg;
    struct creq *q = c->q;
    uint32_t i = c->i;
    node *n = q->n;
    int st = status;
    bool told = false; /* st is the replica's own answer */
    struct rpc_read_resp rr;
    if (st == 0) {
        st = rpc_read_resp_decode(&rr, resp);
        if (st == 0) {
            (void)node__clock_recv(n, rr.hlc, q->rp[i].name);
            st = rr.status;
            told = true;
        }
        if (st == 0 && rr.found && rr.is_digest)
            st = RK_EPROTO; /* we never ask for digests */
    }
    q->r[i].answered = true;
    if (st == 0) {
        q->r[i].ok = true;
        q->r[i].found = rr.found;
        if (rr.found) {
            q->r[i].rec = rr.rec;
            q->r[i].buf = malloc(rr.rec.value.len ? rr.rec.value.len : 1);
            if (!q->r[i].buf) {
                q->r[i].ok = false;
                node__coord_note_failure(q, -ENOMEM);
            } else {
                memcpy(q->r[i].buf, rr.rec.value.p, rr.rec.value.len);
                q->r[i].rec.value = RK_SLICE(q->r[i].buf, rr.rec.value.len);
                node__coord_meter_add(q, &q->r[i].rec);
            }
        }
        if (q->r[i].ok)
            node__coord_count_answer(q, i);
    } else if (told) {
        node__coord_note_replica_failure(q, st);
    } else {
        node__coord_note_failure(q, st);
    }
    node__coord_read_decide(q);
    node__coord_unref(q);
}

void coord_errmsg(
    char *buf, size_t len, int err, uint32_t acks, uint32_t need, int cause)
{
    if (err == RK_ETIMEOUT && need > 0 && cause != 0)
        snprintf(buf, len,
                 "replicas failed or did not answer in time: %u of %u "
                 "replicas answered; a replica failed: %s",
                 acks, need, rk_strerror(cause));
    else if ((err == RK_ETIMEOUT || err == RK_EUNAVAILABLE) && need > 0)
        snprintf(buf, len, "%s: %u of %u replicas answered", rk_strerror(err),
                 acks, need);
    else if (err == RK_EOVERLOADED)
        snprintf(buf, len, "too many requests in flight, retry later");
    else if (err == RK_ECLOCKSKEW)
        snprintf(buf, len,
                 "replicas refused the write's timestamp, more than their "
                 "max_clock_drift_ms ahead of their clocks: this node's "
                 "clock is ahead (check NTP), write through another node; "
                 "%u of %u replicas answered",
                 acks, need);
    else
        snprintf(buf, len, "%s", rk_strerror(err));
}

int coord_get(
    node *n, struct rk_slice key, enum node_cl cl, coord_cb cb, void *arg)
{
    return coord_get_metered(n, key, cl, 0, NULL, cb, arg);
}

/* Plans q's read and asks its replicas, by q->deadline; returns an
 * error, having asked nothing, when it cannot start. */
int node__coord_read_start(struct creq *q)
{
    node *n = q->n;
    n->stats.req[NODE_OP_GET][q->cl]++;
    int rc = node__coord_plan(n, q);
    if (rc < 0) {
        if (rc == RK_EUNAVAILABLE)
            n->stats.unavailable[NODE_OP_GET][q->cl]++;
        return rc;
    }
    uint64_t now = uv_now(n->loop);
    read_fill(q);
    if (!node__coord_satisfied(
            q)) /* waits for replicas: hedge point, deadline */
        node__coord_wake_link(
            q, q->deadline > now ? now + (q->deadline - now) / 2 : q->deadline);
    node__coord_defer(q);
    return 0;
}

int coord_get_metered(node *n,
                      struct rk_slice key,
                      enum node_cl cl,
                      uint64_t deadline,
                      struct coord_meter *m,
                      coord_cb cb,
                      void *arg)
{
    int rc = node__coord_check(n, key);
    if (rc < 0)
        return rc;
    struct creq *q = node__coord_new(n, C_GET, key, cl, cb, arg);
    if (!q)
        return -ENOMEM;
    q->meter = m;
    q->deadline = deadline ? deadline
                           : uv_now(n->loop) + (uint64_t)n->cfg.read_timeout_ms;
    if (rc == COORD_PARK) {
        node__coord_park(q, q->deadline);
    } else if ((rc = node__coord_read_start(q)) < 0) {
        q->done = true;
        node__coord_unref(q);
        return rc;
    }
    node__coord_unref(q);
    return 0;
}
