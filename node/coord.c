/*
 * coord.c - the coordinator (see coord.h for the contract): levels, the
 * request's life, the wake list of deadlines, waiting for the ring, and the
 * writes. The reads (asking, hedging, read repair: read_fill, read_hedge,
 * read_expire) are in coord_read.c; coord_internal.h is what both share.
 *
 * A level is a list of constraints "at least k answers from replicas of DC
 * d (or of any DC)": ONE/TWO/QUORUM/ALL have one constraint over every
 * replica, LOCAL_* one over this node's DC, EACH_QUORUM one per DC. Quorums
 * are counted over the replicas the ring actually places (min(RF, nodes)
 * per DC). Before anything is sent the live replicas are checked against
 * every constraint: too few is UNAVAILABLE, at once.
 *
 * Timeouts. A write gives each replica write_timeout_ms (net/'s RPC
 * deadline): a replica that does not answer in time fails its request, and
 * a request whose answers are all in without meeting the level is TIMEOUT,
 * reporting how many answered. The coordinator's own replica has the same
 * deadline (the wake list below): a write not at its level by then is
 * TIMEOUT whatever the local commit still does. Until 2026-12-03 it had
 * none, and a write that needed the local commit (ALL, say) was not
 * answered while the local disk hung. A write whose replica failed or was DOWN
 * leaves a hint for it, unless the replica refused it for good
 * (node__hint_rejected_for_good: a malformed write, or a key in no range
 * of the replica), which a hint replay would only drop.
 *
 * A read has one deadline, read_timeout_ms from the client request's start
 * (an MGET's keys share their MGET's: coord_get_metered), and every
 * replica read it sends, the first or one asked later, gets only what is
 * left of it; at the deadline the read is answered, TIMEOUT if the level
 * is not met (the node's wake list: one timer per node, not per request).
 * Until 2026-12-03 each replica read had a read_timeout_ms of its own: a
 * read whose replicas stalled one after another took one read timeout per
 * replica (a ONE read at a non-replica with its three replicas frozen
 * answered after 3x read_timeout_ms), an MGET one per window of reads, and
 * a read repair waited a further write_timeout_ms (or, repairing the local
 * replica, for its commit, however long).
 *
 * Reads ask only as many live replicas as the level needs (this node first
 * when it is one, then in preference order, except that a peer silent with
 * requests to answer comes last: read_fill), asking the next live replica
 * when one fails, and at the read's hedge point, half of its time, past
 * the ones that have not answered (they still count if they answer in
 * time): a replica that stalls without being DOWN yet costs the reads
 * that asked it half a read timeout, not a TIMEOUT. With enough answers
 * the newest version (LWW order of storage/) wins; replicas that answered
 * older or nothing get the newest written to them, and the reply waits
 * for those writes (blocking read repair), so a QUORUM read followed by a
 * QUORUM read never goes back -- until the read's deadline, when it is
 * answered without them, as when a repair fails.
 *
 * A stale ring. A node that has heard of a newer ring epoch than the one
 * it has applied (gossip told it a membership changed before it had the
 * change itself, usually for less than a gossip round) does not answer
 * RING_STALE at once: the request waits, counted in flight like any
 * other, until the ring catches up (node__coord_unpark, from gshell.c)
 * and then starts as if it had just arrived; it is answered RING_STALE
 * only if its deadline (write_timeout_ms from its arrival, or the read's
 * deadline) passes first; one that starts has what is left of it. Until
 * 2026-12-04 every request in that window was refused, and Redis clients, which
 * do not retry, saw errors during every join and decommission. A node settling
 * after a restart (no peer heard yet) still refuses at once: that can last
 * seconds, and a client with several hosts does better elsewhere.
 *
 * Admission. max_inflight bounds the requests not yet answered
 * (n->coord_inflight). A request answered at its level may still wait for
 * slower replicas (the third write of a QUORUM write): it
 * then counts in n->coord_background until the last answer or deadline,
 * bounded separately at COORD_BACKGROUND_FACTOR * max_inflight, so one slow
 * replica does not make the node shed requests it could answer.
 *
 * Allocation. Request state lives in one struct (replica table, callback
 * contexts, a short key inline; replica names point into the peer table
 * the request holds a reference to) and
 * finished requests go to a pool (common/pool.h), keeping
 * their encode buffers: a request in the steady state costs no malloc.
 */
#include <errno.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "node/coord_internal.h"
#include "node/log.h"
#include "node/node_internal.h"
#include "node/obs.h"

#define CREQ_LINK      offsetof(struct creq, next_free)
#define COORD_BUF_KEEP 4096 /* encode buffers kept across reuse */
#define CREQ_ZEROED    offsetof(struct creq, rep)

static void wake_unlink(struct creq *q);

/* ---- levels ----------------------------------------------------------- */

enum node_cl coord_default_cl(const node *n)
{
    return n->cfg.default_consistency;
}

static void cons_add(struct creq *q, int dc, uint32_t need)
{
    q->cons[q->ncons].dc = dc;
    q->cons[q->ncons].need = need;
    q->cons[q->ncons].got = 0;
    q->ncons++;
    q->need += need;
}

/* Points q's replicas at the names and addresses of the current peer
 * table, which q holds until it is released. */
static void plan_peers(node *n, struct creq *q)
{
    q->tab = n->peer_tab;
    if (q->tab)
        q->tab->refs++;
    for (uint32_t i = 0; i < q->nrep; i++) {
        struct crep *c = &q->rp[i];
        if (q->rep[i] >= n->npeers) { /* unknown: neither up nor self */
            c->name = c->iaddr = "";
            c->self = c->up = false;
            continue;
        }
        const struct node_peer *p = &n->peer[q->rep[i]];
        c->name = p->name;
        c->iaddr = p->iaddr;
        c->self = p->self;
        c->up = p->up;
    }
}

/* Fill q->rep / rep_dc from the ring and the constraints from the level.
 * dc ids: 0 is this node's DC; others numbered as met. */
int node__coord_plan(node *n, struct creq *q)
{
    ring *r = n->ring;
    if (!r || ring_token_count(r) == 0)
        return RK_EUNAVAILABLE;
    size_t nr = ring_replicas(r, q->token, q->rep, RING_MAX_REPLICAS);
    if (nr > RING_MAX_REPLICAS)
        nr = RING_MAX_REPLICAS;
    /* A node joining (n->ring_pending) is a pending replica of the keys it
     * is about to own: a write goes to it too, and needs its answer on top
     * of the level's (Cassandra's rule), so that a write acknowledged
     * during the join is on the new replica set as well as on the old
     * one, whichever of the two the next read is counted against. Unlike
     * Cassandra, a pending replica that is DOWN is not waited for (it gets
     * a hint, as any DOWN replica): a joiner that died would otherwise
     * make every write of its ranges need all the old replicas until it
     * came back. When it does, it resumes each range where it was, the
     * hints bringing what it missed meanwhile, or, down past the hint
     * window, streams every range again from the start (stream.c). Both
     * rings hold the same members, so their node indices agree. */
    uint32_t nat = (uint32_t)nr;
    if (q->op != C_GET && n->ring_pending) {
        uint32_t pr[RING_MAX_REPLICAS];
        size_t np =
            ring_replicas(n->ring_pending, q->token, pr, RING_MAX_REPLICAS);
        for (size_t k = 0; k < np && k < RING_MAX_REPLICAS; k++) {
            bool known = false;
            for (uint32_t i = 0; i < nat; i++)
                known |= q->rep[i] == pr[k];
            if (!known && nr < RING_MAX_REPLICAS)
                q->rep[nr++] = pr[k];
        }
    }
    q->nrep = (uint32_t)nr;
    q->nnat = nat;
    memset(q->r, 0, nr * sizeof(q->r[0]));
    plan_peers(n, q);
    /* The local DC first, then each replica's: up to nrep + 1 names (the
     * local DC need not hold a replica: 16 replicas in 16 other DCs). */
    const char *dcname[RING_MAX_REPLICAS + 1];
    int ndc = 1;
    dcname[0] = n->cfg.datacenter;
    uint32_t per_dc[RING_MAX_REPLICAS + 1] = {0};
    for (uint32_t i = 0; i < q->nrep; i++) {
        struct ring_node_info ni;
        ring_node_get(r, &ni, q->rep[i]);
        int d = -1;
        for (int k = 0; k < ndc; k++)
            if (strcmp(dcname[k], ni.dc) == 0)
                d = k;
        if (d < 0) {
            d = ndc;
            dcname[ndc++] = ni.dc;
        }
        q->rep_dc[i] = d;
        if (i < nat)
            per_dc[d]++;
    }
    uint32_t total = nat;
    switch (q->cl) {
    case NODE_CL_ONE:
        cons_add(q, -1, 1);
        break;
    case NODE_CL_TWO:
        cons_add(q, -1, 2);
        break;
    case NODE_CL_QUORUM:
        cons_add(q, -1, total / 2 + 1);
        break;
    case NODE_CL_ALL:
        cons_add(q, -1, total ? total : 1);
        break;
    case NODE_CL_LOCAL_ONE:
        cons_add(q, 0, 1);
        break;
    case NODE_CL_LOCAL_QUORUM:
        cons_add(q, 0, per_dc[0] / 2 + 1);
        break;
    case NODE_CL_EACH_QUORUM:
        for (int d = 0; d < ndc; d++)
            if (per_dc[d])
                cons_add(q, d, per_dc[d] / 2 + 1);
        if (q->ncons == 0)
            cons_add(q, 0, 1);
        break;
    default:
        return RK_EBADREQ;
    }
    for (uint32_t i = nat; i < q->nrep; i++) /* live pending replicas */
        for (int c = 0; c < q->ncons && q->rp[i].up; c++)
            if (q->cons[c].dc < 0 || q->cons[c].dc == q->rep_dc[i]) {
                q->cons[c].need++;
                q->need++;
            }
    /* enough live replicas for every constraint? */
    for (int c = 0; c < q->ncons; c++) {
        uint32_t live = 0;
        for (uint32_t i = 0; i < q->nrep; i++) {
            if (q->cons[c].dc >= 0 && q->rep_dc[i] != q->cons[c].dc)
                continue;
            if (q->rp[i].up)
                live++;
        }
        if (live < q->cons[c].need) {
            q->acks = 0;
            for (uint32_t i = 0; i < q->nrep; i++)
                if (q->rp[i].up)
                    q->acks++;
            return RK_EUNAVAILABLE;
        }
    }
    return 0;
}

bool node__coord_satisfied(const struct creq *q)
{
    for (int c = 0; c < q->ncons; c++)
        if (q->cons[c].got < q->cons[c].need)
            return false;
    return true;
}

/* Pending replica i will not count: it no longer adds to the need. */
static void pending_not_ready(struct creq *q, uint32_t i)
{
    for (int c = 0; c < q->ncons; c++)
        if (q->cons[c].dc < 0 || q->cons[c].dc == q->rep_dc[i]) {
            q->cons[c].need--;
            q->need--;
        }
}

void node__coord_count_answer(struct creq *q, uint32_t i)
{
    q->acks++;
    for (int c = 0; c < q->ncons; c++)
        if (q->cons[c].dc < 0 || q->cons[c].dc == q->rep_dc[i])
            q->cons[c].got++;
}

/* ---- completion ------------------------------------------------------- */

/* A received record is held by q: its caller's meter counts its value. */
void node__coord_meter_add(struct creq *q, const struct rpc_record *rec)
{
    if (!q->meter)
        return;
    q->meter->bytes += rec->value.len;
    q->metered += rec->value.len;
}

/* Take back what q added to its meter, and stop counting. */
static void meter_detach(struct creq *q)
{
    if (!q->meter)
        return;
    q->meter->bytes -= q->metered;
    q->meter = NULL;
    q->metered = 0;
}

/* Frees a released request and the encode buffers it kept. */
static void creq_free(struct creq *q)
{
    rpc_buf_free(&q->wmsg);
    free(q->srec);
    free(q);
}

/* Releases q's per-request memory and puts it in the pool (or frees it
 * when the pool is full). */
static void creq_release(struct creq *q)
{
    node *n = q->n;
    meter_detach(q);
    for (uint32_t i = 0; i < q->nrep; i++)
        free(q->r[i].buf);
    node__peer_tab_unref(q->tab);
    if (q->key != q->kbuf)
        free(q->key);
    free(q->pval);
    if (q->wmsg.cap > COORD_BUF_KEEP)
        rpc_buf_free(&q->wmsg);
    if (q->srec_cap > COORD_BUF_KEEP) {
        free(q->srec);
        q->srec = NULL;
        q->srec_cap = 0;
    }
    if (!rk_pool_put(&n->coord_pool, q, CREQ_LINK))
        creq_free(q);
}

void node__coord_free(node *n)
{
    for (struct creq *q; (q = rk_pool_get(&n->coord_pool, CREQ_LINK));)
        creq_free(q);
}

void node__coord_unref(struct creq *q)
{
    if (--q->refs == 0) {
        if (q->background)
            q->n->coord_background--;
        else
            q->n->coord_inflight--;
        creq_release(q);
    }
}

void node__coord_finish(struct creq *q, int err, struct rk_slice value)
{
    if (q->done)
        return;
    q->done = true;
    meter_detach(q); /* before the callback, which may free the meter */
    node *n = q->n;
    /* answered: what still runs (slow replicas, repairs) is background */
    n->coord_inflight--;
    n->coord_background++;
    q->background = true;
    int op = q->op == C_GET ? NODE_OP_GET
                            : (q->op == C_PUT ? NODE_OP_PUT : NODE_OP_DEL);
    if (err == RK_ETIMEOUT)
        n->stats.timeout[op][q->cl]++;
    node__obs_request(n, op, q->cl, err, q->start_ns);
    struct coord_result res = {.err = err,
                               .acks = q->acks,
                               .need = q->need,
                               .value = value,
                               .expiry_ms = err == 0 ? q->expiry : 0,
                               .cause = err == RK_ETIMEOUT ? q->cause : 0};
    q->cb(&res, q->arg);
    if (q->waking) { /* the caller holds another reference */
        wake_unlink(q);
        node__coord_unref(q);
    }
}

/* ---- deadlines ------------------------------------------------------- */

/* A read waiting for replicas is on the node's wake list, ordered by its
 * next wake time, with one timer armed at the head (as net/peers.c keeps
 * RPC deadlines): at its hedge point it asks past the replicas that have
 * not answered (read_hedge), at its deadline it is answered whatever is
 * still out (read_expire). A write that asked the local replica is on it
 * until its deadline (write_expire). Most requests are answered before
 * and leave the list from node__coord_finish(). */

static void write_expire(struct creq *q);
static void park_expire(struct creq *q);

static void wake_arm(node *n);

static void on_wake(uv_timer_t *t)
{
    node *n = t->data;
    uint64_t now = uv_now(n->loop);
    n->wake_at = 0;
    while (n->wake_head && n->wake_head->wake <= now) {
        struct creq *q = n->wake_head;
        wake_unlink(q);
        if (q->parked)
            park_expire(q); /* RING_STALE */
        else if (q->op == C_GET)
            node__coord_read_wake(q, now); /* may put q back, later */
        else
            write_expire(q);
        node__coord_unref(q); /* the list's reference */
    }
    wake_arm(n);
}

/* Arm the timer for the head, unless it is armed for earlier already (it
 * then fires for nothing and re-arms). */
static void wake_arm(node *n)
{
    if (!n->wake_open)
        return;
    if (!n->wake_head) {
        if (n->wake_at) {
            uv_timer_stop(&n->wake);
            n->wake_at = 0;
        }
        return;
    }
    uint64_t at = n->wake_head->wake;
    if (n->wake_at && n->wake_at <= at)
        return;
    uint64_t now = uv_now(n->loop);
    uv_timer_start(&n->wake, on_wake, at > now ? at - now : 0, 0);
    n->wake_at = at;
}

/* Put q on the wake list for `at`, from the end nearer in time. */
void node__coord_wake_link(struct creq *q, uint64_t at)
{
    node *n = q->n;
    if (!n->wake_open)
        return;
    q->wake = at;
    struct creq *t = n->wake_tail; /* the last one due no later, or NULL */
    if (t == NULL || t->wake <= at) {
        /* after the tail */
    } else if (at < n->wake_head->wake) {
        t = NULL;
    } else if (at - n->wake_head->wake < t->wake - at) {
        t = n->wake_head;
        while (t->wnext->wake <= at)
            t = t->wnext;
    } else {
        while (t->wake > at)
            t = t->wprev;
    }
    q->wprev = t;
    q->wnext = t ? t->wnext : n->wake_head;
    if (q->wnext)
        q->wnext->wprev = q;
    else
        n->wake_tail = q;
    if (t)
        t->wnext = q;
    else
        n->wake_head = q;
    q->waking = true;
    q->refs++;
    wake_arm(n);
}

/* Take q off the wake list; the caller takes over its reference. */
static void wake_unlink(struct creq *q)
{
    node *n = q->n;
    if (q->wprev)
        q->wprev->wnext = q->wnext;
    else
        n->wake_head = q->wnext;
    if (q->wnext)
        q->wnext->wprev = q->wprev;
    else
        n->wake_tail = q->wprev;
    q->wprev = q->wnext = NULL;
    q->waking = false;
}

uint64_t coord_read_deadline(node *n)
{
    return uv_now(n->loop) + (uint64_t)n->cfg.read_timeout_ms;
}

void node__coord_start(node *n)
{
    uv_timer_init(n->loop, &n->wake);
    n->wake.data = n;
    n->wake_open = true;
}

/* The requests still on the list are answered by their replicas'
 * failures as the node closes its connections (or their commits). */
void node__coord_stop(node *n)
{
    if (!n->wake_open)
        return;
    while (n->wake_head) {
        struct creq *q = n->wake_head;
        wake_unlink(q);
        node__coord_unref(q);
    }
    n->wake_open = false;
    n->wake_at = 0;
    n->pending_closes++;
    uv_close((uv_handle_t *)&n->wake, node__handle_closed);
}

/* Defer a decision made inside coord_*() to the end of the loop turn, so
 * the callback never runs from inside the call. */
void node__coord_defer(struct creq *q)
{
    if (q->deferred)
        return;
    q->deferred = true;
    q->refs++;
    q->next_deferred = q->n->deferred;
    q->n->deferred = q;
}

static void write_settle(struct creq *q)
{
    if (q->done)
        return;
    if (node__coord_satisfied(q)) {
        node__coord_finish(q, 0, RK_SLICE(NULL, 0));
        return;
    }
    if (q->refs == 1 + q->waking) /* every answer is in */
        node__coord_finish(
            q, q->timed_out || !q->fail_err ? RK_ETIMEOUT : q->fail_err,
            RK_SLICE(NULL, 0));
}

void node__coord_run_deferred(node *n)
{
    while (n->deferred) {
        struct creq *q = n->deferred;
        n->deferred = q->next_deferred;
        q->deferred = false;
        if (q->op == C_GET)
            node__coord_read_decide(q);
        else
            write_settle(q);
        node__coord_unref(q);
    }
}

void node__coord_note_failure(struct creq *q, int st)
{
    if (st == RK_ETIMEOUT || st == RK_ECLOSED || st == RK_EUNAVAILABLE ||
        (st < 0 && st > -4096))
        q->timed_out = true;
    if (!q->fail_err)
        q->fail_err = st;
}

/* A failure a replica reported itself (its disk: -EIO, -ENOSPC...), not
 * one of the network between: the first is named in a TIMEOUT reply. */
void node__coord_note_replica_failure(struct creq *q, int st)
{
    node__coord_note_failure(q, st);
    if (st < 0 && st > -4096 && !q->cause)
        q->cause = st;
}

/* ---- writes ----------------------------------------------------------- */

/* The write's deadline passed before its level was met: the local
 * replica's commit (the remote ones have RPC deadlines of their own) has
 * not answered. It still may, in the background. */
static void write_expire(struct creq *q)
{
    q->timed_out = true;
    node__coord_finish(q, RK_ETIMEOUT, RK_SLICE(NULL, 0));
}

static void on_local_write(int status, void *arg)
{
    struct cctx *c = arg;
    struct creq *q = c->q;
    uint32_t i = c->i;
    q->r[i].answered = true;
    if (status == 0) {
        q->r[i].ok = true;
        node__coord_count_answer(q, i);
    } else {
        node__coord_note_replica_failure(q, status);
    }
    if (q->phase == 0) {
        write_settle(q);
    }
    node__coord_unref(q);
}

/* A replica refused a write for good: no hint (its replay would be
 * refused too), but counted, and logged at most every 10 s, since the
 * write may have succeeded at its level with that replica lacking it. */
static void note_refused(node *n, const char *peer, int st)
{
    n->stats.writes_refused++;
    n->refused_unlogged++;
    uint64_t now = node__mono_ms(n);
    if (n->refused_logged_ms && now - n->refused_logged_ms < 10000)
        return;
    LOG(WARN, "coord.write_refused",
        "peer=%s error=%s refused=%llu hint=none hint_why=\"%s\"", peer,
        rk_errname(st), (unsigned long long)n->refused_unlogged,
        "a replay would be refused too, the replica lacks the write: "
        "check replication and ring in ringkv status");
    n->refused_logged_ms = now;
    n->refused_unlogged = 0;
}

static void on_remote_write(void *arg, int status, struct rk_slice resp)
{
    struct cctx *c = arg;
    struct creq *q = c->q;
    uint32_t i = c->i;
    node *n = q->n;
    int st = status;
    bool told = false; /* st is the replica's own answer */
    if (st == 0) {
        struct rpc_write_ack a;
        st = rpc_write_ack_decode(&a, resp);
        if (st == 0) {
            /* a clock too far ahead is counted and logged, not followed;
             * a ceiling not saved fails the next write this node stamps */
            (void)node__clock_recv(n, a.hlc, q->rp[i].name);
            st = a.status;
            told = true;
        }
    }
    q->r[i].answered = true;
    if (st == 0) {
        q->r[i].ok = true;
        node__coord_count_answer(q, i);
    } else if (told && st == RK_ESTALE && i >= q->nnat) {
        /* A pending replica that has not heard of the leave yet (gossip
         * reaches nodes one after another; it has no range for the key):
         * not waited for, as if it were DOWN, and hinted, the hint
         * delivered once it has heard. The leaving node's push to it is
         * refused the same way until then (leave.c) and read again
         * afterwards, so it carries the writes of that window too. Until
         * 2026-12-04 this failed the write with RING_STALE. */
        pending_not_ready(q, i);
        node__hint_store(n, q->rp[i].name, RK_SLICE(q->key, q->klen),
                         RK_SLICE(q->srec, q->srec_len));
    } else {
        if (told)
            node__coord_note_replica_failure(q, st);
        else
            node__coord_note_failure(q, st);
        /* the replica may not have it: keep a hint, unless the replica
         * refused the write for good (a replay would be refused too) */
        if (told && node__hint_rejected_for_good(st))
            note_refused(n, q->rp[i].name, st);
        else if (q->srec && q->rp[i].name[0])
            node__hint_store(n, q->rp[i].name, RK_SLICE(q->key, q->klen),
                             RK_SLICE(q->srec, q->srec_len));
    }
    write_settle(q);
    node__coord_unref(q);
}

/* The write could not be sent to peer i: its connection is backing off
 * after a failed connect, or it has left requests unanswered for
 * write_timeout_ms (net_peers_quiet_ms), so that every write sent to it
 * would time out too. It gets a hint, as a DOWN replica does. Until
 * 2026-12-03 writes went on being sent to a replica frozen but not yet
 * DOWN: each waited for its write timeout in n->coord_background, and past
 * 4 x max_inflight / write_timeout_ms writes a second the node answered
 * OVERLOADED to everything until gossip convicted the replica. */
static void write_unsent(struct creq *q, uint32_t i)
{
    q->n->stats.writes_unsent++;
    node__hint_store(q->n, q->rp[i].name, RK_SLICE(q->key, q->klen),
                     RK_SLICE(q->srec, q->srec_len));
}

/* Send the write in q->wmsg to replica i (local or remote). 0 if an answer
 * will come. */
/* What is left of a write's deadline (at least 1 ms): a write that waited
 * for the ring has only the rest of its write_timeout_ms. */
static uint32_t write_left(const struct creq *q)
{
    uint64_t now = uv_now(q->n->loop);
    uint64_t left = q->deadline > now ? q->deadline - now : 1;
    return left < UINT32_MAX ? (uint32_t)left : UINT32_MAX;
}

static int send_write(struct creq *q, uint32_t i, const struct rpc_record *rec)
{
    node *n = q->n;
    struct cctx *c = &q->ctx[i];
    q->r[i].asked = true;
    int rc;
    if (q->rp[i].self)
        rc = node__local_write(n, RK_SLICE(q->key, q->klen), rec,
                               on_local_write, c);
    else /* not to a peer silent for a write timeout: write_unsent */
        rc = node__rpc_addr(n, q->rp[i].iaddr, &q->wmsg, write_left(q),
                            (uint32_t)n->cfg.write_timeout_ms, on_remote_write,
                            c);
    if (rc < 0)
        return rc;
    q->refs++;
    return 0;
}

int node__coord_encode_records(struct creq *q, const struct rpc_record *rec)
{
    struct rpc_write w = {.token = q->token,
                          .epoch = ring_epoch(q->n->ring),
                          .key = RK_SLICE(q->key, q->klen),
                          .rec = *rec};
    rpc_buf_reset(&q->wmsg);
    int rc = rpc_write_encode(&q->wmsg, &w);
    if (rc < 0)
        return rc;
    struct store_record sr = {.ts = rec->ts};
    sr.flags = (rec->flags & RPC_REC_TOMBSTONE) ? STORE_REC_TOMBSTONE : 0;
    if (rec->expiry) {
        sr.flags |= STORE_REC_EXPIRES;
        sr.expiry_ms = rec->expiry;
    }
    sr.value =
        (rec->flags & RPC_REC_TOMBSTONE) ? RK_SLICE(NULL, 0) : rec->value;
    size_t need = store_record_size(&sr);
    if (need > q->srec_cap) {
        uint8_t *p = malloc(need);
        if (!p)
            return -ENOMEM;
        free(q->srec);
        q->srec = p;
        q->srec_cap = need;
    }
    return store_record_encode(q->srec, need, &q->srec_len, &sr);
}

int node__coord_check(node *n, struct rk_slice key)
{
    if (n->stopping)
        return RK_ECLOSED;
    if (key.len == 0)
        return RK_EBADREQ;
    if (key.len > RK_MAX_KEY)
        return RK_ETOOLARGE;
    if (n->coord_inflight >= n->cfg.max_inflight ||
        n->coord_background >=
            (int64_t)n->cfg.max_inflight * COORD_BACKGROUND_FACTOR) {
        n->stats.overloaded++;
        return RK_EOVERLOADED;
    }
    if (n->ring_stale) {
        if (!n->settling && n->wake_open)
            return COORD_PARK;
        n->stats.stale++;
        return RK_ESTALE;
    }
    return 0;
}

struct creq *node__coord_new(node *n,
                             int op,
                             struct rk_slice key,
                             enum node_cl cl,
                             coord_cb cb,
                             void *arg)
{
    struct creq *q = rk_pool_get(&n->coord_pool, CREQ_LINK);
    if (!q) {
        q = malloc(sizeof(*q));
        if (!q)
            return NULL;
        q->wmsg = (struct rpc_buf)RPC_BUF_INIT;
        q->srec = NULL;
        q->srec_cap = 0;
        for (uint32_t i = 0; i < RING_MAX_REPLICAS; i++)
            q->ctx[i] = (struct cctx){.q = q, .i = i};
    }
    memset(q, 0, CREQ_ZEROED);
    rpc_buf_reset(&q->wmsg);
    q->n = n;
    if (key.len <= sizeof(q->kbuf)) {
        q->key = q->kbuf;
    } else {
        q->key = malloc(key.len);
        if (!q->key) {
            q->key = q->kbuf;
            creq_release(q);
            return NULL;
        }
    }
    memcpy(q->key, key.p, key.len);
    q->klen = key.len;
    q->op = op;
    q->cl = cl;
    q->cb = cb;
    q->arg = arg;
    q->refs = 1;
    q->newest = -1;
    q->token = rk_token(key.p, key.len);
    q->start_ns = uv_hrtime();
    n->coord_inflight++;
    return q;
}

/* Plans and sends q's write, answered by q->deadline (its callback then
 * runs from the loop); returns an error, having sent nothing, when it
 * cannot start. */
static int write_start(struct creq *q, struct rk_slice value, uint64_t ttl_ms)
{
    node *n = q->n;
    int sop = q->op == C_PUT ? NODE_OP_PUT : NODE_OP_DEL;
    n->stats.req[sop][q->cl]++;
    int rc = node__coord_plan(n, q);
    if (rc < 0) {
        if (rc == RK_EUNAVAILABLE)
            n->stats.unavailable[sop][q->cl]++;
        return rc;
    }
    struct rpc_record rec = {0};
    rc = node__clock_now(&rec.ts, n);
    if (rc < 0)
        return rc;
    uint64_t now = node__now_ms();
    if (q->op == C_DEL) {
        rec.flags = RPC_REC_TOMBSTONE;
    } else {
        if (value.p)
            rec.value = value;
        if (ttl_ms)
            rec.expiry = now + ttl_ms;
    }
    rc = node__coord_encode_records(q, &rec);
    if (rc < 0)
        return rc;
    bool local = false;
    for (uint32_t i = 0; i < q->nrep; i++) {
        const struct crep *p = &q->rp[i];
        if (!p->up) {
            node__hint_store(n, p->name, RK_SLICE(q->key, q->klen),
                             RK_SLICE(q->srec, q->srec_len));
            continue;
        }
        int e = send_write(q, i, &rec);
        if (e < 0) {
            node__coord_note_failure(q, e);
            if (!p->self)
                write_unsent(q, i);
        } else if (p->self) {
            local = true;
        }
    }
    if (local) /* the commit has no deadline of its own: the write's */
        node__coord_wake_link(q, q->deadline);
    node__coord_defer(
        q); /* settles at the end of the turn if already decided */
    return 0;
}

static int coord_write(node *n,
                       int op,
                       struct rk_slice key,
                       struct rk_slice value,
                       uint64_t ttl_ms,
                       enum node_cl cl,
                       coord_cb cb,
                       void *arg)
{
    int rc = node__coord_check(n, key);
    if (rc < 0)
        return rc;
    if (value.len > RK_MAX_VALUE)
        return RK_ETOOLARGE;
    struct creq *q = node__coord_new(n, op, key, cl, cb, arg);
    if (!q)
        return -ENOMEM;
    q->deadline = uv_now(n->loop) + (uint64_t)n->cfg.write_timeout_ms;
    if (rc == COORD_PARK) {
        if (value.p) {
            q->pval = malloc(value.len ? value.len : 1);
            if (!q->pval) {
                rc = -ENOMEM;
                goto fail;
            }
            memcpy(q->pval, value.p, value.len);
            q->pval_len = value.len;
            q->pval_set = true;
        }
        q->pttl = ttl_ms;
        node__coord_park(q, q->deadline);
    } else {
        rc = write_start(q, value, ttl_ms);
        if (rc < 0)
            goto fail;
    }
    node__coord_unref(q);
    return 0;
fail:
    q->done = true;
    node__coord_unref(q);
    return rc;
}

int coord_put(node *n,
              struct rk_slice key,
              struct rk_slice value,
              uint64_t ttl_ms,
              enum node_cl cl,
              coord_cb cb,
              void *arg)
{
    return coord_write(n, C_PUT, key, value, ttl_ms, cl, cb, arg);
}

int coord_del(
    node *n, struct rk_slice key, enum node_cl cl, coord_cb cb, void *arg)
{
    return coord_write(n, C_DEL, key, RK_SLICE(NULL, 0), 0, cl, cb, arg);
}

/* ---- waiting for the ring --------------------------------------------- */

/* q waits for the ring on the wake list, until `until` (the loop's
 * clock), when it is answered RING_STALE; node__coord_unpark finds it
 * there if the ring catches up first. */
void node__coord_park(struct creq *q, uint64_t until)
{
    node *n = q->n;
    n->stats.stale_waits++;
    n->coord_parked++;
    q->parked = true;
    node__coord_wake_link(q, until);
}

/* Its time is up and the ring is still stale (on_wake). */
static void park_expire(struct creq *q)
{
    q->parked = false;
    q->n->coord_parked--;
    q->n->stats.stale++;
    node__coord_finish(q, RK_ESTALE, RK_SLICE(NULL, 0));
}

void node__coord_unpark(node *n)
{
    if (!n->coord_parked || (n->ring_stale && !n->stopping))
        return;
    /* Take every waiting request off the wake list (a walk, but only when
     * the ring catches up), with the list's reference, in wake order. */
    struct creq *first = NULL, **tail = &first;
    for (struct creq *q = n->wake_head, *next; q; q = next) {
        next = q->wnext;
        if (!q->parked)
            continue;
        wake_unlink(q);
        q->parked = false;
        n->coord_parked--;
        q->pnext = NULL;
        *tail = q;
        tail = &q->pnext;
    }
    /* Start each; one that cannot start is answered at once (from the
     * loop, not from inside a coord call). */
    for (struct creq *q = first, *next; q; q = next) {
        next = q->pnext;
        int rc;
        if (n->stopping)
            rc = RK_ECLOSED;
        else if (q->op == C_GET)
            rc = node__coord_read_start(q);
        else
            rc = write_start(q,
                             q->pval_set ? RK_SLICE(q->pval, q->pval_len)
                                         : RK_SLICE(NULL, 0),
                             q->pttl);
        free(q->pval);
        q->pval = NULL;
        if (rc < 0)
            node__coord_finish(q, rc, RK_SLICE(NULL, 0));
        node__coord_unref(q);
    }
}
