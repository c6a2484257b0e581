/*
 * coord_read.c - the coordinator's reads (coord.h: coord_get,
 * coord_get_metered): asking the replicas (read_fill, in the order
 * coord_plan.c gives, and past the silent ones at the hedge point), the
 * newest answer by LWW, the blocking read repair, and the answer by the
 * read's deadline. coord.c has what reads and writes share: the request
 * struct's life, the wake list of deadlines, waiting for the ring; and the
 * writes.
 *
 * Apart from coord.c because a read is a state machine of its own (ask,
 * hedge, decide, repair, reply) that writes do not go through; the two
 * share the request (coord_internal.h). The design notes on reads,
 * deadlines and hedging are coord.c's opening comment.
 *
 * Digest reads. One replica is asked for its record (this node's own copy
 * when it is a replica: the plan asks it first) and the others for a
 * digest (rpc_record_digest: the version fields and an XXH3 of the
 * value), as Cassandra does: a QUORUM read moves the value once, not once
 * per replica. A digest of the newest record counts as holding it; an
 * older one is repaired with the newest, which the coordinator has. One
 * that is newer, or as new with another value, or found where no record
 * was read, cannot be ordered without its value: the read's caller is
 * handed to a read of records only (coord__read_again), by the same
 * deadline. A replica is asked for a digest only while another's record
 * is on its way (asked, not failed, not past the hedge point), so a read
 * whose data replica fails asks the next one for its record.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "coord/coord_host.h"
#include "coord/coord_internal.h"
#include "coord/coord_plan.h"
#include "storage/store.h"

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

/* How replica i's answer orders against the newest record, best: < 0
 * older, 0 the same, > 0 newer; ANSWER_UNKNOWN for a digest that cannot
 * be ordered without its value. */
#define ANSWER_UNKNOWN 2

static int answer_cmp(struct creq *q, uint32_t i, const struct rpc_record *best)
{
    const struct creply *a = &q->r[i];
    if (!a->dig)
        return rec_cmp(&a->rec, best);
    if (!q->best_hashed) {
        struct rpc_digest d;
        rpc_record_digest(&d, best);
        q->best_hash = d.value_hash;
        q->best_hashed = true;
    }
    /* its version fields with best's value: ordered by the timestamp or
     * the tombstone, or, for the same value, by the expiry */
    struct rpc_record m = a->rec;
    m.value = best->value;
    int c = rec_cmp(&m, best);
    bool same_version =
        m.ts == best->ts &&
        (m.flags & RPC_REC_TOMBSTONE) == (best->flags & RPC_REC_TOMBSTONE);
    if (c > 0 || (same_version && a->hash != q->best_hash))
        return ANSWER_UNKNOWN;
    return c;
}

/* A record other than replica i's is on its way: asked, not failed and
 * not past the hedge point (coord_plan_hedge). */
static bool data_coming(const struct creq *q, uint32_t i)
{
    for (uint32_t j = 0; j < q->plan.nrep; j++) {
        const struct coord_plan_rep *p = &q->plan.rep[j];
        if (j != i && p->asked && !q->r[j].asked_dig && !p->slow &&
            (!p->answered || p->ok))
            return true;
    }
    return false;
}

static void on_remote_read(void *arg, int status, struct rk_slice resp);

static int send_read(struct creq *q, uint32_t i)
{
    struct coord *c = q->c;
    bool dig = !q->plan.rep[i].self && !q->data_only && data_coming(q, i);
    coord_plan_asked(&q->plan, i);
    if (q->plan.rep[i].self) {
        bool found;
        int rc = c->h.local_read(c->h.arg, RK_SLICE(q->key, q->klen), &found,
                                 &q->r[i].rec, &q->rbuf[i].p, &q->rbuf[i].cap);
        if (rc < 0) {
            coord_plan_answered(&q->plan, i, false);
            coord__note_replica_failure(q, rc);
            return rc;
        }
        q->r[i].found = found;
        if (found)
            coord__meter_add(q, &q->r[i].rec);
        coord_plan_answered(&q->plan, i, true);
        return 0;
    }
    /* what is left of the read's deadline, not a fresh read_timeout_ms:
     * a replica asked after another failed or stayed silent answers by
     * the same deadline */
    uint64_t now = c->h.now_ms(c->h.arg);
    int rc = now < q->deadline ? 0 : RK_ETIMEOUT;
    if (rc == 0 && (q->wmsg.len == 0 || q->wmsg_dig != dig)) {
        /* the same for every replica asked alike */
        struct rpc_read rd = {.token = q->token,
                              .epoch = c->h.epoch(c->h.arg),
                              .key = RK_SLICE(q->key, q->klen),
                              .digest = dig};
        rpc_buf_reset(&q->wmsg);
        rc = rpc_read_encode(&q->wmsg, &rd);
        q->epoch = rd.epoch;
        q->wmsg_dig = dig;
    }
    q->r[i].asked_dig = dig;
    if (rc == 0) {
        uint64_t left = q->deadline - now;
        rc = coord__send(q, i, left < UINT32_MAX ? (uint32_t)left : UINT32_MAX,
                         0, on_remote_read, cctx_arg(q, i));
        if (rc == 0)
            q->refs++;
    }
    if (rc < 0) {
        coord_plan_answered(&q->plan, i, false);
        coord__note_failure(q, rc);
    }
    return rc;
}

/* A peer silent this long with a request to answer (net_peers_quiet_ms)
 * is asked after the others: a quarter of the read timeout, at most
 * COORD_QUIET_MS. Healthy replicas answer in milliseconds; asking one
 * that is not last costs nothing but where the read goes. */
uint64_t coord_quiet_limit_ms(uint32_t read_timeout_ms)
{
    uint64_t t = (uint64_t)read_timeout_ms / 4;
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
    struct coord *c = q->c;
    uint64_t limit = coord_quiet_limit_ms(c->o.read_timeout_ms);
    bool quiet[RING_MAX_REPLICAS];
    for (uint32_t i = 0; i < q->plan.nrep; i++) {
        const struct coord_plan_rep *p = &q->plan.rep[i];
        quiet[i] = p->up && !p->self && !p->asked &&
                   c->h.quiet_ms(c->h.arg, q->rp[i].iaddr) >= limit;
    }
    struct coord_plan_cursor cur = COORD_PLAN_CURSOR_INIT;
    uint32_t passed = 0;
    for (int i;
         (i = coord_plan_read_next(&q->plan, &cur, quiet, &passed)) >= 0;)
        send_read(q, (uint32_t)i);
    c->stats.read_passed_over += passed;
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
        coord__finish(q, RK_ENOTFOUND, RK_SLICE(NULL, 0));
        return;
    }
    const struct rpc_record *rec = &q->r[q->newest].rec;
    if ((rec->flags & RPC_REC_TOMBSTONE) ||
        (rec->expiry && rec->expiry <= q->c->h.wall_ms(q->c->h.arg))) {
        coord__finish(q, RK_ENOTFOUND, RK_SLICE(NULL, 0));
        return;
    }
    q->expiry = rec->expiry;
    coord__finish(q, 0, rec->value);
}

/* The newest answer once its read repair is over (or the deadline came):
 * it is the answer only if as many replicas as the level needs hold it,
 * else TIMEOUT (the acks the holders), as Cassandra's blocking read repair
 * does. Until 2026-12-06 it was answered from one replica whose repairs
 * had failed or not finished, the value of a write that had failed (on
 * one replica only), and a later QUORUM read through replicas without it
 * returned the older value: a read went back in time (regression
 * read_repair_unfinished_goes_back, found by test_history). */
static void read_answer(struct creq *q)
{
    if (q->newest >= 0 && q->holders < q->plan.need) {
        if (q->c->h.now_ms(q->c->h.arg) < q->deadline)
            for (uint32_t i = 0; i < q->plan.nrep; i++)
                if (q->plan.rep[i].asked && !q->plan.rep[i].answered)
                    return; /* a replica may still confirm it */
        q->plan.acks = q->holders;
        coord__finish(q, RK_ETIMEOUT, RK_SLICE(NULL, 0));
        return;
    }
    read_reply(q);
}

static void on_repair_done(int status, void *arg)
{
    struct creq *q = cctx_q(arg);
    if (status < 0)
        CLOG(q->c, DEBUG, "coord.repair_fail", "error=\"%s\"",
             rk_strerror(status));
    else
        q->holders++;
    if (--q->repair_pending == 0)
        read_answer(q);
    coord__unref(q);
}

void coord__read_decide(struct creq *q)
{
    if (q->done || q->phase != 0)
        return;
    if (!coord_plan_satisfied(&q->plan)) {
        read_fill(q);
        enum coord_plan_outcome o = coord_plan_outcome(&q->plan);
        if (o == COORD_PLAN_FAILED)
            coord__finish(
                q, q->timed_out || !q->fail_err ? RK_ETIMEOUT : q->fail_err,
                RK_SLICE(NULL, 0));
        if (o != COORD_PLAN_SATISFIED)
            return;
    }
    /* newest among the answers */
    struct coord *c = q->c;
    int newest = -1;
    for (uint32_t i = 0; i < q->plan.nrep; i++) {
        if (!q->plan.rep[i].ok || !q->r[i].found || q->r[i].dig)
            continue;
        if (newest < 0 || rec_cmp(&q->r[i].rec, &q->r[newest].rec) > 0)
            newest = (int)i;
    }
    for (uint32_t i = 0; i < q->plan.nrep; i++)
        if (q->plan.rep[i].ok && q->r[i].found && q->r[i].dig &&
            (newest < 0 ||
             answer_cmp(q, i, &q->r[newest].rec) == ANSWER_UNKNOWN)) {
            if (!coord__read_again(q))
                coord__finish(q, c->wake_open ? -ENOMEM : RK_ECLOSED,
                              RK_SLICE(NULL, 0));
            return;
        }
    q->newest = newest;
    q->phase = 1;
    if (newest < 0) {
        read_reply(q);
        return;
    }
    /* repair the stale ones */
    const struct rpc_record *best = &q->r[newest].rec;
    q->holders = 0;
    for (uint32_t i = 0; i < q->plan.nrep; i++)
        q->holders +=
            q->plan.rep[i].ok && q->r[i].found && answer_cmp(q, i, best) == 0;
    /* Too few hold it: the live replicas not asked yet are asked too
     * (read_confirm), before wmsg becomes the repair's write, so that the
     * answer need not wait for a repair that may never land (a replica
     * frozen but not yet DOWN): with only the repair to count on, QUORUM
     * reads through a node with a flapping peer answered TIMEOUT
     * (test_flapping). */
    if (q->holders < q->plan.need)
        for (uint32_t i = 0; i < q->plan.nnat; i++)
            if (q->plan.rep[i].up && !q->plan.rep[i].asked &&
                !q->plan.rep[i].self)
                (void)send_read(q, i);
    q->repair_pending = 1;
    q->refs++;
    bool encoded = false;
    for (uint32_t i = 0; i < q->plan.nrep; i++) {
        if (!q->plan.rep[i].ok || (int)i == newest)
            continue;
        if (q->r[i].found && answer_cmp(q, i, best) == 0)
            continue;
        if (!encoded) {
            if (coord__encode_records(q, best) < 0)
                break;
            encoded = true;
        }
        void *x = cctx_arg(q, i); /* its read has answered */
        int rc;
        if (q->plan.rep[i].self) {
            rc = c->h.clock_seen(c->h.arg, best->ts);
            if (rc == 0)
                rc = c->h.local_write(c->h.arg, RK_SLICE(q->key, q->klen), best,
                                      on_repair_done, x);
        } else {
            rc = coord__send(q, i, c->o.write_timeout_ms, 0, on_repair_remote,
                             x);
        }
        if (rc < 0)
            continue;
        c->stats.read_repairs++;
        q->repair_pending++;
        q->refs++;
    }
    if (--q->repair_pending == 0)
        read_answer(q);
    coord__unref(q);
}

/* Half of what the read had left when it started has passed without
 * enough answers: the replicas that have not answered are no longer
 * counted on (they still count if they answer in time), and the next live
 * ones are asked, by the same deadline. Without it a frozen replica (not
 * yet DOWN) made every read that asked it wait for the deadline and then
 * answer TIMEOUT, although the others could have answered. */
static void read_hedge(struct creq *q)
{
    uint32_t asked = coord_plan_hedge(&q->plan);
    read_fill(q);
    if (coord_plan_asked_count(&q->plan) > asked)
        q->c->stats.read_hedges++;
}

/* The deadline passed. Waiting for replicas: TIMEOUT. Waiting for read
 * repairs: the newest if enough replicas hold it already, else TIMEOUT
 * (read_answer); they finish in the background. */
static void read_expire(struct creq *q)
{
    if (q->phase == 0) {
        q->timed_out = true;
        coord__finish(q, RK_ETIMEOUT, RK_SLICE(NULL, 0));
        return;
    }
    CLOG(q->c, DEBUG, "coord.repair_late", "pending=%u", q->repair_pending);
    read_answer(q);
}

void coord__read_wake(struct creq *q, uint64_t now)
{
    if (q->done)
        return;
    if (now >= q->deadline) {
        read_expire(q);
        return;
    }
    if (q->phase == 0) {
        read_hedge(q);
        coord__read_decide(q);
    }
    if (!q->done)
        coord__wake_link(q, q->deadline);
}

/* A replica's answer after the newest was chosen (asked by the decision,
 * or late): one more holder if it has the newest; enough of them answer
 * the read, whatever the repairs still do. */
static void read_confirm(struct creq *q, uint32_t i, bool ok)
{
    if (q->done || q->newest < 0)
        return;
    if (ok && q->r[i].found && answer_cmp(q, i, &q->r[q->newest].rec) == 0 &&
        ++q->holders >= q->plan.need) {
        read_reply(q);
        return;
    }
    if (q->repair_pending == 0) /* the repairs are over already */
        read_answer(q);
}

static void on_remote_read(void *arg, int status, struct rk_slice resp)
{
    struct creq *q = cctx_q(arg);
    uint32_t i = cctx_i(arg);
    struct coord *c = q->c;
    int st = status;
    bool told = false; /* st is the replica's own answer */
    struct rpc_read_resp rr;
    if (st == 0) {
        st = rpc_read_resp_decode(&rr, resp);
        if (st == 0) {
            (void)c->h.clock_recv(c->h.arg, rr.hlc, q->rp[i].name);
            st = rr.status;
            told = true;
        }
        if (st == 0 && rr.found && rr.is_digest && !q->r[i].asked_dig)
            st = RK_EPROTO; /* a digest not asked for */
    }
    if (st == 0) {
        bool ok = true;
        q->r[i].found = rr.found;
        q->r[i].dig = rr.found && rr.is_digest;
        if (q->r[i].dig) { /* the version fields; no value */
            q->r[i].rec = (struct rpc_record){.ts = rr.dig.ts,
                                              .flags = rr.dig.flags,
                                              .expiry = rr.dig.expiry};
            q->r[i].hash = rr.dig.value_hash;
        } else if (rr.found) {
            q->r[i].rec = rr.rec;
            struct cbuf *b = &q->rbuf[i];
            size_t len = rr.rec.value.len;
            if (b->p == NULL || b->cap < len) {
                uint8_t *p = realloc(b->p, len ? len : 1);
                if (p) {
                    b->p = p;
                    b->cap = len ? len : 1;
                }
            }
            if (b->p == NULL || b->cap < len) {
                ok = false;
                coord__note_failure(q, -ENOMEM);
            } else {
                if (len)
                    memcpy(b->p, rr.rec.value.p, len);
                q->r[i].rec.value = RK_SLICE(b->p, len);
                coord__meter_add(q, &q->r[i].rec);
            }
        }
        coord_plan_answered(&q->plan, i, ok);
        st = ok ? 0 : -ENOMEM;
    } else if (told) {
        coord_plan_answered(&q->plan, i, false);
        /* OLD_RING: asked again on the newer ring, by q's successor, if
         * it can be */
        if (st != RK_EOLDRING || !coord__replan(q, q->sent_epoch[i]))
            coord__note_replica_failure(q, st);
    } else {
        coord_plan_answered(&q->plan, i, false);
        coord__note_failure(q, st);
    }
    if (q->phase == 1)
        read_confirm(q, i, st == 0);
    coord__read_decide(q);
    coord__unref(q);
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
    else if (err == RK_EFULL && need == 0)
        snprintf(buf, len,
                 "disk full: this node, a replica of the key, has less free "
                 "disk space than its disk_reserve_mb and refuses writes "
                 "until space is freed (reads go on); write through a node "
                 "that is not full");
    else if (err == RK_EFULL)
        snprintf(buf, len,
                 "disk full: a replica has less free disk space than its "
                 "disk_reserve_mb and refused the write; %u of %u replicas "
                 "answered",
                 acks, need);
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

/* Plans q's read and asks its replicas, by q->deadline; returns an
 * error, having asked nothing, when it cannot start. */
int coord__read_start(struct creq *q)
{
    struct coord *c = q->c;
    if (!q->replanned)
        c->stats.req[COORD_OP_GET][q->cl]++;
    int rc = coord__plan(q);
    if (rc < 0) {
        if (rc == RK_EUNAVAILABLE)
            c->stats.unavailable[COORD_OP_GET][q->cl]++;
        return rc;
    }
    uint64_t now = c->h.now_ms(c->h.arg);
    read_fill(q);
    if (!coord_plan_satisfied(&q->plan)) /* hedge point, deadline */
        coord__wake_link(q, q->deadline > now ? now + (q->deadline - now) / 2
                                              : q->deadline);
    coord__defer(q);
    return 0;
}

int coord__read_request(struct coord *c, const struct coord_request *r)
{
    int rc = coord__check(c, r->key);
    if (rc < 0)
        return rc;
    struct creq *q = coord__req_new(c, C_GET, r->key, r->cl, r->cb, r->arg);
    if (!q)
        return -ENOMEM;
    if (c->h.local_prefetch) /* its first cache miss under the plan's work */
        c->h.local_prefetch(c->h.arg, q->token);
    q->meter = r->meter;
    q->deadline = r->deadline ? r->deadline
                              : c->h.now_ms(c->h.arg) + c->o.read_timeout_ms;
    if (rc == COORD_PARK) {
        coord__park(q, q->deadline);
    } else if ((rc = coord__read_start(q)) < 0) {
        q->done = true;
        coord__unref(q);
        return rc;
    }
    coord__unref(q);
    return 0;
}
