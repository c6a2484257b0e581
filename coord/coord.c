/*
 * coord.c - the coordinator's core (see coord.h for the contract): its
 * state (struct coord), the request's life, the wake list of deadlines,
 * waiting for the ring, and the writes. The reads (asking, hedging, read
 * repair: read_fill, read_hedge, read_expire) are in coord_read.c;
 * coord_internal.h is what both share. The core reaches the daemon --
 * ring, replicas, RPC, hints, clocks, the wake timer -- only through its
 * host (coord_host.h), which node/coord_node.c fills in over struct node and
 * tests/unit/check_coord.c with fakes.
 *
 * Levels are planned by coord_plan.c, pure and unit-tested: a level is a
 * list of constraints "at least k answers from replicas of DC d (or of any
 * DC)", quorums counted over the replicas the ring actually places
 * (min(RF, nodes) per DC). coord__plan takes the replicas from the
 * ring and hands them over; before anything is sent the live replicas are
 * checked against every constraint: too few is UNAVAILABLE, at once.
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
 * of the replica), which a hint replay would only drop. A replica short
 * of disk space answers FULL and is hinted like any other; but this node,
 * short of disk space itself, refuses the writes of keys it replicates
 * before sending anything (write_local_full), since no hint is kept for
 * itself: until 2026-12-06 such QUORUM writes were acknowledged by the
 * two others, and 195 of 200 were then missing here.
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
 * QUORUM read never goes back: if they fail, or the read's deadline comes
 * first, and fewer replicas than the level needs hold the newest (those
 * that answered it, those repaired, and the live ones not asked before,
 * asked as soon as a repair is needed), the read is answered TIMEOUT, not
 * with a value a later read might not see (coord_read.c, read_answer).
 *
 * A stale ring. A node that has heard of a newer ring epoch than the one
 * it has applied (gossip told it a membership changed before it had the
 * change itself, usually for less than a gossip round) does not answer
 * RING_STALE at once: the request waits, counted in flight like any
 * other, until the ring catches up (coord_unpark, from node/membership.c)
 * and then starts as if it had just arrived; it is answered RING_STALE
 * only if its deadline (write_timeout_ms from its arrival, or the read's
 * deadline) passes first; one that starts has what is left of it. Until
 * 2026-12-04 every request in that window was refused, and Redis clients, which
 * do not retry, saw errors during every join and decommission. A node settling
 * after a restart (no peer heard yet) still refuses at once: that can last
 * seconds, and a client with several hosts does better elsewhere.
 *
 * A replica's newer ring. A replica refuses a read or write planned on a
 * ring older than its own (OLD_RING, node/replica.c): the key's replica
 * set may differ between the two, and for about a gossip round after a
 * join or leave the old set could miss a write the new set acknowledged
 * (a lost write until 2026-12-06). The coordinator then counts the next
 * epoch as heard (host ring_behind: its ring is stale from then on),
 * hands the caller to a new request that waits for the ring as above and
 * is planned and sent again on the newer one, by the same deadline
 * (coord__replan); the refused request goes on in the background,
 * answering no one. A request already answered is not planned again (a
 * write's refusing replica gets a hint), but the ring counts as behind
 * all the same.
 *
 * Admission. max_inflight bounds the requests not yet answered
 * (stats.inflight). A request answered at its level may still wait for
 * slower replicas (the third write of a QUORUM write): it
 * then counts in stats.background until the last answer or deadline,
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
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "coord/coord_host.h"
#include "coord/coord_internal.h"
#include "coord/coord_plan.h"
#include "storage/hlc.h"
#include "storage/store.h"

#define CREQ_LINK      offsetof(struct creq, next_free)
#define COORD_BUF_KEEP 4096 /* encode buffers kept across reuse */
#define CREQ_ZEROED    offsetof(struct creq, plan)

static void wake_unlink(struct creq *q);

/* ---- levels ----------------------------------------------------------- */

int coord__plan(struct creq *q)
{
    struct coord *c = q->c;
    struct coord_replicas rs;
    int rc = c->h.replicas(c->h.arg, &rs, q->token, q->op != C_GET);
    if (rc < 0)
        return rc;
    q->hold = rs.hold;
    if (rs.nrep > RING_MAX_REPLICAS)
        rs.nrep = RING_MAX_REPLICAS;
    if (rs.nnat > rs.nrep)
        rs.nnat = rs.nrep;
    if (!q->replanned) {
        bool replica = false;
        for (uint32_t i = 0; i < rs.nnat; i++)
            replica |= rs.rep[i].self;
        c->stats.placement[replica]++;
    }
    memset(q->r, 0, rs.nrep * sizeof(q->r[0]));
    for (uint32_t i = 0; i < rs.nrep; i++) {
        q->rp[i].name = rs.name[i] ? rs.name[i] : "";
        q->rp[i].iaddr = rs.iaddr[i] ? rs.iaddr[i] : "";
        /* a peer that refused us or closed on us is DOWN for this
         * request: it died, and gossip has not said so yet */
        if (rs.rep[i].up && !rs.rep[i].self &&
            !c->h.reachable(c->h.arg, q->rp[i].iaddr))
            rs.rep[i].up = false;
    }
    return coord_plan_make(&q->plan, q->cl, c->o.datacenter, rs.rep, rs.nrep,
                           rs.nnat);
}

/* ---- completion ------------------------------------------------------- */

/* A received record is held by q: its caller's meter counts its value. */
void coord__meter_add(struct creq *q, const struct rpc_record *rec)
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
    for (uint32_t i = 0; i < RING_MAX_REPLICAS; i++)
        free(q->rbuf[i].p);
    rpc_buf_free(&q->wmsg);
    free(q->srec);
    free(q);
}

/* Releases q's per-request memory and puts it in the pool (or frees it
 * when the pool is full). */
static void creq_release(struct creq *q)
{
    struct coord *c = q->c;
    meter_detach(q);
    for (uint32_t i = 0; i < q->plan.nrep; i++)
        if (q->rbuf[i].cap > COORD_BUF_KEEP) {
            free(q->rbuf[i].p);
            q->rbuf[i] = (struct cbuf){NULL, 0};
        }
    c->h.release(c->h.arg, q->hold);
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
    if (!rk_pool_put(&c->pool, q, CREQ_LINK))
        creq_free(q);
}

int coord_new(struct coord **out,
              const struct coord_host *h,
              const struct coord_opts *o)
{
    struct coord *c = calloc(1, sizeof(*c));
    if (!c)
        return -ENOMEM;
    c->h = *h;
    c->o = *o;
    *out = c;
    return 0;
}

void coord_free(struct coord *c)
{
    if (!c)
        return;
    for (struct creq *q; (q = rk_pool_get(&c->pool, CREQ_LINK));)
        creq_free(q);
    free(c);
}

const struct coord_stats *coord_stats(const struct coord *c)
{
    return &c->stats;
}

void coord__log(struct coord *c,
                enum coord_log_level level,
                const char *event,
                const char *fmt,
                ...)
{
    va_list ap;
    va_start(ap, fmt);
    c->h.log(c->h.arg, level, event, fmt, ap);
    va_end(ap);
}

void coord__unref(struct creq *q)
{
    if (--q->refs == 0) {
        if (q->background)
            q->c->stats.background--;
        else
            q->c->stats.inflight--;
        creq_release(q);
    }
}

/* q answers no one from now on (answered, or handed to a successor:
 * coord__replan): what still runs for it (slow replicas, repairs,
 * hints) is background work. */
static void to_background(struct creq *q)
{
    q->done = true;
    meter_detach(q); /* before finish's callback, which may free the meter */
    q->c->stats.inflight--;
    q->c->stats.background++;
    q->background = true;
}

void coord__finish(struct creq *q, int err, struct rk_slice value)
{
    if (q->done)
        return;
    to_background(q);
    struct coord *c = q->c;
    struct coord_stats *st = &c->stats;
    int op = q->op == C_GET ? COORD_OP_GET
                            : (q->op == C_PUT ? COORD_OP_PUT : COORD_OP_DEL);
    if (err == RK_ETIMEOUT)
        st->timeout[op][q->cl]++;
    c->h.observe(c->h.arg, op, q->cl, err, q->start_ns);
    struct coord_result res = {.err = err,
                               .acks = q->plan.acks,
                               .need = q->plan.need,
                               .value = value,
                               .expiry_ms = err == 0 ? q->expiry : 0,
                               .cause = err == RK_ETIMEOUT ? q->cause : 0};
    q->cb(&res, q->arg);
    if (q->waking) { /* the caller holds another reference */
        wake_unlink(q);
        coord__unref(q);
    }
}

/* ---- deadlines ------------------------------------------------------- */

/* A read waiting for replicas is on the node's wake list, ordered by its
 * next wake time, with one timer armed at the head (as net/peers.c keeps
 * RPC deadlines): at its hedge point it asks past the replicas that have
 * not answered (read_hedge), at its deadline it is answered whatever is
 * still out (read_expire). A write that asked the local replica is on it
 * until its deadline (write_expire). Most requests are answered before
 * and leave the list from coord__finish(). */

static void write_expire(struct creq *q);
static void park_expire(struct creq *q);

static void wake_arm(struct coord *c);

void coord_wake(struct coord *c)
{
    uint64_t now = c->h.now_ms(c->h.arg);
    c->wake_at = 0;
    while (c->wake_head && c->wake_head->wake <= now) {
        struct creq *q = c->wake_head;
        wake_unlink(q);
        if (q->parked)
            park_expire(q); /* RING_STALE */
        else if (q->op == C_GET)
            coord__read_wake(q, now); /* may put q back, later */
        else
            write_expire(q);
        coord__unref(q); /* the list's reference */
    }
    wake_arm(c);
}

/* Arm the host's timer for the head, unless it is armed for earlier
 * already (it then fires for nothing and re-arms). */
static void wake_arm(struct coord *c)
{
    if (!c->wake_open)
        return;
    if (!c->wake_head) {
        if (c->wake_at) {
            c->h.wake_arm(c->h.arg, 0);
            c->wake_at = 0;
        }
        return;
    }
    uint64_t at = c->wake_head->wake;
    if (c->wake_at && c->wake_at <= at)
        return;
    c->h.wake_arm(c->h.arg, at);
    c->wake_at = at;
}

/* Put q on the wake list for `at`, from the end nearer in time. */
void coord__wake_link(struct creq *q, uint64_t at)
{
    struct coord *c = q->c;
    if (!c->wake_open)
        return;
    q->wake = at;
    struct creq *t = c->wake_tail; /* the last one due no later, or NULL */
    if (t == NULL || t->wake <= at) {
        /* after the tail */
    } else if (at < c->wake_head->wake) {
        t = NULL;
    } else if (at - c->wake_head->wake < t->wake - at) {
        t = c->wake_head;
        while (t->wnext->wake <= at)
            t = t->wnext;
    } else {
        while (t->wake > at)
            t = t->wprev;
    }
    q->wprev = t;
    q->wnext = t ? t->wnext : c->wake_head;
    if (q->wnext)
        q->wnext->wprev = q;
    else
        c->wake_tail = q;
    if (t)
        t->wnext = q;
    else
        c->wake_head = q;
    q->waking = true;
    q->refs++;
    wake_arm(c);
}

/* Take q off the wake list; the caller takes over its reference. */
static void wake_unlink(struct creq *q)
{
    struct coord *c = q->c;
    if (q->wprev)
        q->wprev->wnext = q->wnext;
    else
        c->wake_head = q->wnext;
    if (q->wnext)
        q->wnext->wprev = q->wprev;
    else
        c->wake_tail = q->wprev;
    q->wprev = q->wnext = NULL;
    q->waking = false;
}

void coord_open(struct coord *c)
{
    c->wake_open = true;
}

/* The requests still on the list are answered by their replicas'
 * failures as the node closes its connections (or their commits). */
void coord_close(struct coord *c)
{
    if (!c->wake_open)
        return;
    while (c->wake_head) {
        struct creq *q = c->wake_head;
        wake_unlink(q);
        coord__unref(q);
    }
    c->wake_open = false;
    if (c->wake_at)
        c->h.wake_arm(c->h.arg, 0);
    c->wake_at = 0;
}

/* Defer a decision made inside coord_*() to the end of the loop turn, so
 * the callback never runs from inside the call. */
void coord__defer(struct creq *q)
{
    if (q->deferred)
        return;
    q->deferred = true;
    q->refs++;
    q->next_deferred = q->c->deferred;
    q->c->deferred = q;
}

/* Answer a write at its level, or once every answer is in without it. */
static void write_settle(struct creq *q)
{
    if (q->done)
        return;
    switch (coord_plan_outcome(&q->plan)) {
    case COORD_PLAN_SATISFIED:
        coord__finish(q, 0, RK_SLICE(NULL, 0));
        break;
    case COORD_PLAN_FAILED:
        coord__finish(q,
                      q->timed_out || !q->fail_err ? RK_ETIMEOUT : q->fail_err,
                      RK_SLICE(NULL, 0));
        break;
    case COORD_PLAN_WAITING:
        break;
    }
}

void coord_run_deferred(struct coord *c)
{
    while (c->deferred) {
        struct creq *q = c->deferred;
        c->deferred = q->next_deferred;
        q->deferred = false;
        if (q->op == C_GET)
            coord__read_decide(q);
        else
            write_settle(q);
        coord__unref(q);
    }
}

void coord__note_failure(struct creq *q, int st)
{
    if (st == RK_ETIMEOUT || st == RK_ECLOSED || st == RK_EUNAVAILABLE ||
        rk_is_errno(st))
        q->timed_out = true;
    if (!q->fail_err)
        q->fail_err = st;
}

/* A failure a replica reported itself (its disk: -EIO, -ENOSPC...), not
 * one of the network between: the first is named in a TIMEOUT reply.
 * OLD_RING (a request not planned again: coord__replan) is noted as
 * RING_STALE, retryable: no client knows OLD_RING. */
void coord__note_replica_failure(struct creq *q, int st)
{
    if (st == RK_EOLDRING)
        st = RK_ESTALE;
    coord__note_failure(q, st);
    if (rk_is_errno(st) && !q->cause)
        q->cause = st;
}

/* ---- writes ----------------------------------------------------------- */

/* The write's deadline passed before its level was met: the local
 * replica's commit (the remote ones have RPC deadlines of their own) has
 * not answered. It still may, in the background. */
static void write_expire(struct creq *q)
{
    q->timed_out = true;
    coord__finish(q, RK_ETIMEOUT, RK_SLICE(NULL, 0));
}

static void on_local_write(int status, void *arg)
{
    struct creq *q = cctx_q(arg);
    uint32_t i = cctx_i(arg);
    coord_plan_answered(&q->plan, i, status == 0);
    if (status < 0)
        coord__note_replica_failure(q, status);
    if (status == RK_EFULL) {
        /* This node's disk filled after write_start looked (the margin
         * of local_full was used up by writes in flight): no hint can be
         * kept for this node, so the write is not acknowledged without
         * its copy -- unless the others already were, which is counted. */
        if (q->done && coord_plan_outcome(&q->plan) == COORD_PLAN_SATISFIED)
            q->c->stats.local_full_late++;
        else if (!q->done)
            coord__finish(q, RK_EFULL, RK_SLICE(NULL, 0));
    }
    if (q->phase == 0) {
        write_settle(q);
    }
    coord__unref(q);
}

/* A replica refused a write for good: no hint (its replay would be
 * refused too), but counted, and logged at most every 10 s, since the
 * write may have succeeded at its level with that replica lacking it. */
static void note_refused(struct coord *c, const char *peer, int st)
{
    c->stats.writes_refused++;
    c->refused_unlogged++;
    uint64_t now = c->h.now_ms(c->h.arg);
    if (c->refused_logged_ms && now - c->refused_logged_ms < 10000)
        return;
    CLOG(c, WARN, "coord.write_refused",
         "peer=%s error=%s refused=%llu hint=none hint_why=\"%s\"", peer,
         rk_errname(st), (unsigned long long)c->refused_unlogged,
         "a replay would be refused too, the replica lacks the write: "
         "check replication and ring in ringkv status");
    c->refused_logged_ms = now;
    c->refused_unlogged = 0;
}

static void on_remote_write(void *arg, int status, struct rk_slice resp)
{
    struct creq *q = cctx_q(arg);
    uint32_t i = cctx_i(arg);
    struct coord *c = q->c;
    int st = status;
    bool told = false; /* st is the replica's own answer */
    if (st == 0) {
        struct rpc_write_ack a;
        st = rpc_write_ack_decode(&a, resp);
        if (st == 0) {
            /* a clock too far ahead is counted and logged, not followed;
             * a ceiling not saved fails the next write this node stamps */
            (void)c->h.clock_recv(c->h.arg, a.hlc, q->rp[i].name);
            st = a.status;
            told = true;
        }
    }
    coord_plan_answered(&q->plan, i, st == 0);
    if (st == 0) {
        /* counted */
    } else if (told && st == RK_EOLDRING &&
               coord__replan(q, q->sent_epoch[i])) {
        /* written again on the newer ring, by q's successor */
    } else if (told && st == RK_ESTALE && i >= q->plan.nnat) {
        /* A pending replica that has not heard of the leave yet (gossip
         * reaches nodes one after another; it has no range for the key):
         * not waited for, as if it were DOWN, and hinted, the hint
         * delivered once it has heard. The leaving node's push to it is
         * refused the same way until then (streaming/) and read again
         * afterwards, so it carries the writes of that window too. Until
         * 2026-12-04 this failed the write with RING_STALE. */
        coord_plan_drop_pending(&q->plan, i);
        c->h.hint(c->h.arg, q->rp[i].name, RK_SLICE(q->key, q->klen),
                  RK_SLICE(q->srec, q->srec_len));
    } else {
        if (told)
            coord__note_replica_failure(q, st);
        else
            coord__note_failure(q, st);
        /* the replica may not have it: keep a hint, unless the replica
         * refused the write for good (a replay would be refused too) */
        if (told && c->h.refused_for_good(c->h.arg, st))
            note_refused(c, q->rp[i].name, st);
        else if (q->srec && q->rp[i].name[0])
            c->h.hint(c->h.arg, q->rp[i].name, RK_SLICE(q->key, q->klen),
                      RK_SLICE(q->srec, q->srec_len));
    }
    write_settle(q);
    coord__unref(q);
}

/* The write could not be sent to peer i: its connection is backing off
 * after a failed connect, or it has left requests unanswered for
 * write_timeout_ms (net_peers_quiet_ms), so that every write sent to it
 * would time out too. It gets a hint, as a DOWN replica does. Until
 * 2026-12-03 writes went on being sent to a replica frozen but not yet
 * DOWN: each waited for its write timeout in the background, and past
 * 4 x max_inflight / write_timeout_ms writes a second the node answered
 * OVERLOADED to everything until gossip convicted the replica. */
static void write_unsent(struct creq *q, uint32_t i)
{
    struct coord *c = q->c;
    c->stats.writes_unsent++;
    c->h.hint(c->h.arg, q->rp[i].name, RK_SLICE(q->key, q->klen),
              RK_SLICE(q->srec, q->srec_len));
}

/* What is left of a write's deadline (at least 1 ms): a write that waited
 * for the ring has only the rest of its write_timeout_ms. */
static uint32_t write_left(const struct creq *q)
{
    uint64_t now = q->c->h.now_ms(q->c->h.arg);
    uint64_t left = q->deadline > now ? q->deadline - now : 1;
    return left < UINT32_MAX ? (uint32_t)left : UINT32_MAX;
}

/* Send the write in q->wmsg to replica i (local or remote). 0 if an answer
 * will come; else the replica counts as answered (failed). */
static int send_write(struct creq *q, uint32_t i, const struct rpc_record *rec)
{
    struct coord *c = q->c;
    void *x = cctx_arg(q, i);
    coord_plan_asked(&q->plan, i);
    int rc;
    if (q->plan.rep[i].self)
        rc = c->h.local_write(c->h.arg, RK_SLICE(q->key, q->klen), rec,
                              on_local_write, x);
    else /* not to a peer silent for a write timeout: write_unsent */
        rc = coord__send(q, i, write_left(q), c->o.write_timeout_ms,
                         on_remote_write, x);
    if (rc < 0) {
        coord_plan_answered(&q->plan, i, false);
        return rc;
    }
    q->refs++;
    return 0;
}

int coord__send(struct creq *q,
                uint32_t i,
                uint32_t timeout_ms,
                uint32_t max_quiet_ms,
                coord_rpc_cb cb,
                void *arg)
{
    struct coord *c = q->c;
    q->sent_epoch[i] = q->epoch;
    return c->h.rpc(c->h.arg, q->rp[i].iaddr, &q->wmsg, timeout_ms,
                    max_quiet_ms, cb, arg);
}

int coord__encode_records(struct creq *q, const struct rpc_record *rec)
{
    struct rpc_write w = {.token = q->token,
                          .epoch = q->c->h.epoch(q->c->h.arg),
                          .key = RK_SLICE(q->key, q->klen),
                          .rec = *rec};
    rpc_buf_reset(&q->wmsg);
    int rc = rpc_write_encode(&q->wmsg, &w);
    if (rc < 0)
        return rc;
    q->epoch = w.epoch;
    struct store_record sr = {.ts = rec->ts};
    sr.flags = (rec->flags & RPC_REC_TOMBSTONE) ? STORE_REC_TOMBSTONE : 0;
    if (rec->expiry) {
        sr.flags |= STORE_REC_EXPIRES;
        sr.expiry_ms = rec->expiry;
    }
    sr.value =
        (rec->flags & RPC_REC_TOMBSTONE) ? RK_SLICE(NULL, 0) : rec->value;
    return store_record_encode_grow(&q->srec, &q->srec_cap, &q->srec_len, &sr);
}

int coord__check(struct coord *c, struct rk_slice key)
{
    int ready = c->h.ready(c->h.arg);
    if (ready == RK_ECLOSED)
        return RK_ECLOSED;
    if (key.len == 0)
        return RK_EBADREQ;
    if (key.len > RK_MAX_KEY)
        return RK_ETOOLARGE;
    if (c->stats.inflight >= c->o.max_inflight ||
        c->stats.background >= c->o.max_inflight * COORD_BACKGROUND_FACTOR) {
        c->stats.overloaded++;
        return RK_EOVERLOADED;
    }
    if (ready != 0) { /* a stale ring */
        if (ready == COORD_HOST_STALE_WAIT && c->wake_open)
            return COORD_PARK;
        c->stats.stale++;
        return RK_ESTALE;
    }
    return 0;
}

struct creq *coord__req_new(struct coord *c,
                            int op,
                            struct rk_slice key,
                            enum coord_cl cl,
                            coord_cb cb,
                            void *arg)
{
    struct creq *q = rk_pool_get(&c->pool, CREQ_LINK);
    if (!q) {
        /* aligned: a replica's callback argument keeps its index in the
         * address's low bits (cctx_arg); aligned_alloc wants a multiple */
        q = aligned_alloc(CREQ_ALIGN, (sizeof(*q) + CREQ_ALIGN - 1) /
                                          CREQ_ALIGN * CREQ_ALIGN);
        if (!q)
            return NULL;
        q->wmsg = (struct rpc_buf)RPC_BUF_INIT;
        q->srec = NULL;
        q->srec_cap = 0;
        for (uint32_t i = 0; i < RING_MAX_REPLICAS; i++)
            q->rbuf[i] = (struct cbuf){NULL, 0};
    }
    memset(q, 0, CREQ_ZEROED);
    coord_plan_clear(&q->plan);
    rpc_buf_reset(&q->wmsg);
    q->c = c;
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
    q->start_ns = c->h.now_ns(c->h.arg);
    c->stats.inflight++;
    return q;
}

/* RK_EFULL if this node is a live replica of q's write and short of disk
 * space. Such a write is refused whole: sent to the other replicas only,
 * it could be acknowledged without this node's copy, and no hint would
 * bring it here (hints are kept for peers, and on this very disk). A
 * node that is not a replica of the key coordinates as usual. */
static int write_local_full(struct creq *q)
{
    struct coord *c = q->c;
    for (uint32_t i = 0; i < q->plan.nrep; i++)
        if (q->plan.rep[i].self && q->plan.rep[i].up)
            return c->h.local_full(c->h.arg);
    return 0;
}

/* Plans and sends q's write, answered by q->deadline (its callback then
 * runs from the loop); returns an error, having sent nothing, when it
 * cannot start. */
static int write_start(struct creq *q, struct rk_slice value, uint64_t ttl_ms)
{
    struct coord *c = q->c;
    int sop = q->op == C_PUT ? COORD_OP_PUT : COORD_OP_DEL;
    if (!q->replanned)
        c->stats.req[sop][q->cl]++;
    /* stamped before it is planned: a write this node refuses for its
     * clock needs no replica (coord_errmsg's need 0 says so) */
    struct rpc_record rec = {0};
    int rc = c->h.clock_now(c->h.arg, &rec.ts);
    if (rc < 0)
        return rc;
    rc = coord__plan(q);
    if (rc < 0) {
        if (rc == RK_EUNAVAILABLE)
            c->stats.unavailable[sop][q->cl]++;
        return rc;
    }
    if ((rc = write_local_full(q)) < 0) {
        c->stats.writes_full++;
        return rc;
    }
    if (q->op == C_DEL) {
        rec.flags = RPC_REC_TOMBSTONE;
    } else {
        if (value.p)
            rec.value = value;
        /* From the write's timestamp, not the wall clock: replicas refuse
         * a timestamp further ahead of theirs than max_clock_drift_ms, and
         * a node whose clock is behind issues none (clock.c), so no one
         * node's clock stretches or cuts a TTL by more than that. Until
         * 2026-12-06 it was this node's wall clock plus the TTL
         * (test_regression_clock_skew_pulls_cluster; docs/storage.md). */
        if (ttl_ms)
            rec.expiry = hlc_ts_ms(rec.ts) + ttl_ms;
    }
    rc = coord__encode_records(q, &rec);
    if (rc < 0)
        return rc;
    bool local = false;
    for (uint32_t i = 0; i < q->plan.nrep; i++) {
        const struct coord_plan_rep *p = &q->plan.rep[i];
        if (!p->up) {
            c->h.hint(c->h.arg, q->rp[i].name, RK_SLICE(q->key, q->klen),
                      RK_SLICE(q->srec, q->srec_len));
            continue;
        }
        int e = send_write(q, i, &rec);
        if (e < 0) {
            coord__note_failure(q, e);
            if (!p->self)
                write_unsent(q, i);
        } else if (p->self) {
            local = true;
        }
    }
    if (local) /* the commit has no deadline of its own: the write's */
        coord__wake_link(q, q->deadline);
    coord__defer(q); /* settles at the end of the turn if already decided */
    return 0;
}

/* A write's time: write_timeout_ms, and COORD_WRITE_MS_PER_MIB more for
 * each MiB of its value, which crosses the network and is synced on every
 * replica. With one deadline for all sizes, a 15 MiB SET on a loaded
 * 2-core machine was answered TIMEOUT though it was applied (test_resp),
 * and an MSET of 3 x 16 MiB always. */
uint64_t coord_write_time_ms(uint32_t write_timeout_ms, size_t value_bytes)
{
    return write_timeout_ms +
           (uint64_t)COORD_WRITE_MS_PER_MIB * value_bytes / (1024 * 1024);
}

/* A copy of a write's value in q, for when it starts after waiting for
 * the ring (coord_unpark): 0 or -ENOMEM. */
static int keep_value(struct creq *q, struct rk_slice value)
{
    q->pval = malloc(value.len ? value.len : 1);
    if (!q->pval)
        return -ENOMEM;
    memcpy(q->pval, value.p, value.len);
    q->pval_len = value.len;
    q->pval_set = true;
    return 0;
}

static int coord_write(struct coord *c, int op, const struct coord_request *r)
{
    struct rk_slice value = op == C_PUT ? r->value : RK_SLICE(NULL, 0);
    uint64_t ttl_ms = op == C_PUT ? r->ttl_ms : 0;
    int rc = coord__check(c, r->key);
    if (rc < 0)
        return rc;
    if (value.len > RK_MAX_VALUE)
        return RK_ETOOLARGE;
    struct creq *q = coord__req_new(c, op, r->key, r->cl, r->cb, r->arg);
    if (!q)
        return -ENOMEM;
    q->deadline = c->h.now_ms(c->h.arg) +
                  coord_write_time_ms(c->o.write_timeout_ms, value.len);
    if (rc == COORD_PARK) {
        if (value.p && (rc = keep_value(q, value)) < 0)
            goto fail;
        q->pttl = ttl_ms;
        coord__park(q, q->deadline);
    } else {
        rc = write_start(q, value, ttl_ms);
        if (rc < 0)
            goto fail;
    }
    coord__unref(q);
    return 0;
fail:
    q->done = true;
    coord__unref(q);
    return rc;
}

int coord_request(struct coord *c, const struct coord_request *r)
{
    switch (r->op) {
    case COORD_OP_GET:
        return coord__read_request(c, r);
    case COORD_OP_PUT:
        return coord_write(c, C_PUT, r);
    case COORD_OP_DEL:
        return coord_write(c, C_DEL, r);
    default:
        return RK_EBADREQ;
    }
}

/* ---- waiting for the ring --------------------------------------------- */

/* q waits for the ring on the wake list, until `until` (the loop's
 * clock), when it is answered RING_STALE; coord_unpark finds it
 * there if the ring catches up first. */
void coord__park(struct creq *q, uint64_t until)
{
    q->c->stats.stale_waits++;
    q->c->stats.parked++;
    q->parked = true;
    coord__wake_link(q, until);
}

/* A new request for q's caller, by q's deadline, with q's value (a
 * write's); q answers no one from now on and goes on in the background
 * (its other replicas' answers, hints for those that fail). NULL (no
 * memory, or a write's message that does not decode): q untouched. */
static struct creq *successor(struct creq *q)
{
    struct coord *c = q->c;
    struct creq *s = coord__req_new(c, q->op, RK_SLICE(q->key, q->klen), q->cl,
                                    q->cb, q->arg);
    if (!s)
        return NULL;
    if (q->op == C_PUT) { /* the value and expiry q->wmsg carries */
        struct rpc_write w;
        int rc = rpc_write_decode(&w, RK_SLICE(q->wmsg.data, q->wmsg.len));
        if (rc == 0)
            rc = keep_value(s, w.rec.value);
        if (rc < 0) {
            s->done = true;
            coord__unref(s);
            return NULL;
        }
        if (w.rec.expiry) { /* what is left of its TTL, from the restart */
            uint64_t now = c->h.wall_ms(c->h.arg);
            s->pttl = w.rec.expiry > now ? w.rec.expiry - now : 1;
        }
    }
    s->deadline = q->deadline;
    s->start_ns = q->start_ns;
    s->meter = q->meter;
    s->replanned = true;
    to_background(q);
    if (q->waking) {
        wake_unlink(q);
        coord__unref(q);
    }
    return s;
}

bool coord__replan(struct creq *q, uint64_t refused_epoch)
{
    struct coord *c = q->c;
    /* the replica has applied (or heard of) a ring newer than the one
     * the refused message was planned on: so has some member, and this
     * node's ring is behind until it has it. The refused message's epoch,
     * not q->epoch: a read repair's write encoded since may carry a newer
     * one, and epoch + 1 of that is an epoch nobody announced, which every
     * node learned through gossip's RING_EPOCH and none could ever build:
     * the whole cluster stale for good (regression:
     * regression_old_ring_after_repair_phantom_epoch; seen as a
     * decommission that never started in test_history, 2026-12-07). */
    c->h.ring_behind(c->h.arg, refused_epoch + 1);
    if (q->done || q->phase != 0 || !c->wake_open)
        return false;
    struct creq *s = successor(q);
    if (!s)
        return false;
    c->stats.replans++;
    coord__park(s, s->deadline);
    coord__unref(s); /* the wake list holds it */
    coord_unpark(c); /* the newer ring may be here already */
    return true;
}

bool coord__read_again(struct creq *q)
{
    struct coord *c = q->c;
    if (q->done || q->op != C_GET || !c->wake_open)
        return false;
    struct creq *s = successor(q);
    if (!s)
        return false;
    s->data_only = true;
    c->stats.read_digest_mismatches++;
    int rc = coord__read_start(s);
    if (rc < 0)
        coord__finish(s, rc, RK_SLICE(NULL, 0));
    coord__unref(s);
    return true;
}

/* Its time is up and the ring is still stale (on_wake). */
static void park_expire(struct creq *q)
{
    q->parked = false;
    q->c->stats.parked--;
    q->c->stats.stale++;
    coord__finish(q, RK_ESTALE, RK_SLICE(NULL, 0));
}

void coord_unpark(struct coord *c)
{
    int ready = c->h.ready(c->h.arg);
    if (!c->stats.parked || (ready != 0 && ready != RK_ECLOSED))
        return;
    /* Take every waiting request off the wake list (a walk, but only when
     * the ring catches up), with the list's reference, in wake order. */
    struct creq *first = NULL, **tail = &first;
    for (struct creq *q = c->wake_head, *next; q; q = next) {
        next = q->wnext;
        if (!q->parked)
            continue;
        wake_unlink(q);
        q->parked = false;
        c->stats.parked--;
        q->pnext = NULL;
        *tail = q;
        tail = &q->pnext;
    }
    /* Start each; one that cannot start is answered at once (from the
     * loop, not from inside a coord call). */
    for (struct creq *q = first, *next; q; q = next) {
        next = q->pnext;
        int rc;
        if (ready == RK_ECLOSED)
            rc = RK_ECLOSED;
        else if (q->op == C_GET)
            rc = coord__read_start(q);
        else
            rc = write_start(q,
                             q->pval_set ? RK_SLICE(q->pval, q->pval_len)
                                         : RK_SLICE(NULL, 0),
                             q->pttl);
        free(q->pval);
        q->pval = NULL;
        if (rc < 0)
            coord__finish(q, rc, RK_SLICE(NULL, 0));
        coord__unref(q);
    }
}
