/*
 * session.c - `ringkv repair`: make this node's replicas agree with the
 * other replicas of every arc it replicates, moving only what differs
 * (shared/DESIGN.md, "Repair"; docs/repair.md).
 *
 * A node that joined by streaming runs one by itself once the ring has
 * settled (repair_tick, repair_after_join): it streamed each range from
 * one replica, and a write that replica missed while the coordinators did
 * not know of the join yet is on the others only. node.state's repair_due
 * (host.after_join_due) keeps it due across restarts until one ends (a
 * stop or a ring change keeps it due); one that ends with failed
 * comparisons (a replica DOWN or restarting) runs again after a wait, a
 * few times (after_join_end).
 *
 * Read repair and hints cover most divergence; a replica that was down
 * longer than the hint window, or lost writes some other way, is brought
 * back by repair, which must also run within gc_grace_seconds so that a
 * delete is not resurrected by a replica that missed it.
 *
 * The node asked (repair_begin) takes, on the loop, every arc of its ring
 * it replicates, and for each, each other replica of it in turn: one
 * comparison. A comparison splits the arc into 2^depth leaves (merkle.h:
 * equal widths, the same split on every node), depth chosen from the keys
 * of the local range holding the arc (about MERKLE_LEAF_KEYS keys a leaf,
 * at most MERKLE_MAX_DEPTH), computes its own leaf hashes on the pool
 * while the replica computes its own (RPC_MSG_MERKLE, answered by
 * repair_serve in serve.c), and compares them. Each run of differing
 * leaves is one sub-arc, exchanged both ways: pulled from the replica with
 * RPC_MSG_STREAM (the join's donor scan) and committed here through the
 * group commit (host.commit_items), then read here (host.push_scan, the
 * same scan) and pushed to the replica with RPC_MSG_STREAM_PUSH, which
 * commits it -- except the records the pull just brought (a fingerprint of
 * key and version each, 8 bytes, kept for the sub-arc), so that a stale
 * replica's repair does not send back what it fetched. Records merge
 * last-write-wins on both sides, tombstones included, so afterwards both
 * hold the newest version of every key of the sub-arc. Bytes moved are
 * proportional to the differing leaves, not to the range.
 *
 * The leaves are compared as one flat list (8 bytes a leaf, at most 128
 * KiB a comparison) rather than a tree walked level by level: the list
 * costs one round trip, and the scan that computes it costs the same at
 * any depth. The leaf plan, the depth, the leaf hashes and the runs of
 * differing leaves are pure computation, in merkle.c; this file is the
 * session around them: the RPCs, the transfers, the progress.
 *
 * One comparison at a time; a step refused OVERLOADED (the replica's scans
 * busy) or RING_STALE (its ring not yet the same as this node's) is tried
 * again after REPAIR_RETRY_MS, up to REPAIR_RETRIES times; one that could
 * not reach a replica gossip has UP (refused, reset, timed out: a node
 * restarting) is tried REPAIR_REACH_TRIES times in all over some seconds
 * (retry_later); any other failure, or the last try, ends that comparison
 * (counted, and the run ends "done with failures"). Repair refuses to
 * start while a node joins or leaves, and stops if the ring changes under
 * it (run it again). A replica that is DOWN fails its comparisons: repair
 * needs every replica of an arc to be UP to vouch for it. Progress is in
 * `ringkv netstats` (repair_text); counters in repair_stats_get.
 */
#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "repair/merkle.h"
#include "repair/repair_internal.h"

/* A log line through the host. */
static void rlog(const repair *r,
                 enum repair_log_level level,
                 const char *event,
                 const char *fmt,
                 ...) __attribute__((format(printf, 4, 5)));

static void rlog(const repair *r,
                 enum repair_log_level level,
                 const char *event,
                 const char *fmt,
                 ...)
{
    char fields[768];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(fields, sizeof(fields), fmt, ap);
    va_end(ap);
    r->h.log(r->h.arg, level, event, fields);
}

static void cmp_step(repair *rp);
static void cmp_start(repair *rp);
static void budget_settle(repair *rp, uint64_t moved);

/* The current comparison is over: the next one. */
static void cmp_next(repair *rp)
{
    rp->cur++;
    cmp_start(rp);
}

static bool stopping(const repair *rp)
{
    return rp->h.stopping(rp->h.arg);
}

/* The ring changed under the session (or the node knows it is behind). */
static bool ring_moved(const repair *rp)
{
    const ring *cur = rp->h.ring(rp->h.arg);
    return !cur || ring_epoch(cur) != rp->epoch;
}

/* A stream cursor copied, its last key into to_last. */
static void pos_set(struct rpc_stream_pos *to,
                    uint8_t *to_last,
                    const struct rpc_stream_pos *from)
{
    size_t l = from->last.len <= RPC_STREAM_LAST_MAX ? from->last.len : 0;
    *to = *from;
    to->last = RK_SLICE(l ? memcpy(to_last, from->last.p, l) : to_last, l);
}

static const char *phase_name(enum repair_phase p)
{
    return p == REPAIR_MERKLE ? "comparing"
           : p == REPAIR_PULL ? "pulling"
                              : "pushing";
}

/* The current comparison failed: note it and go on with the next. */
static void cmp_fail(repair *rp, const char *why, int err)
{
    const struct repair_cmp *c = &rp->c[rp->cur];
    budget_settle(rp, 0);
    rp->failed++;
    rp->arcs[c->ai].failed = true;
    if (!rp->first_err) {
        rp->first_err = err ? err : RK_EUNAVAILABLE;
        snprintf(rp->first_err_at, sizeof(rp->first_err_at), "%s with %s", why,
                 c->peer);
    }
    rlog(rp, REPAIR_LOG_WARN, "repair.compare_fail",
         "range=(%llu,%llu] peer=%s phase=%s why=\"%s\" error=\"%s\"",
         (unsigned long long)c->arc.start, (unsigned long long)c->arc.end,
         c->peer, phase_name(rp->phase), why, rk_strerror(err));
    cmp_next(rp);
}

/* The retry timer: the current step again. */
static void on_retry(void *arg)
{
    repair *rp = arg;
    rp->waiting = false;
    cmp_step(rp);
}

static int wait_then_step(repair *rp, uint32_t ms)
{
    int rc = rp->h.timer_start(rp->h.arg, ms, on_retry, rp);
    if (rc == 0)
        rp->waiting = true;
    return rc;
}

/* A replica that could not be reached for a moment: its connection
 * refused, reset or closed, no answer in time, or net/ backing off from
 * it (RK_EUNAVAILABLE). A node restarting is all of these for a few
 * seconds, and a comparison that failed on the first of them made one
 * `ringkv repair --wait` in three right after a restart end "done with
 * failures" until 2026-12-06 (regression
 * peer_refusing_once_is_asked_again). */
static bool unreachable(int err)
{
    return rk_err_connection(err) || err == RK_ETIMEOUT ||
           err == RK_EUNAVAILABLE;
}

static bool cmp_peer_up(const repair *rp);

/* How long before the step is asked again, or 0: not again. OVERLOADED
 * (the replica's scans busy) and RING_STALE (its ring a gossip round
 * behind or ahead: if ahead, this node's ring changes too and the run
 * ends): shortly, many times. An unreachable replica that gossip still
 * has UP: REPAIR_REACH_TRIES tries in all, the wait doubling; one gossip
 * has DOWN is not waited for (it fails its comparisons at once). */
static uint32_t retry_wait(repair *rp, int err)
{
    if (err == RK_EOVERLOADED || err == RK_ESTALE) {
        if (rp->retries >= REPAIR_RETRIES)
            return 0;
        rp->retries++;
        return REPAIR_RETRY_MS;
    }
    if (!unreachable(err) || rp->reach_retries >= REPAIR_REACH_TRIES - 1 ||
        !cmp_peer_up(rp))
        return 0;
    return (uint32_t)REPAIR_REACH_MS << rp->reach_retries++;
}

/* The step failed with err: asked again later (true) if it may pass by
 * itself (retry_wait), each told to the stall tracker; logged the first
 * time in a comparison for OVERLOADED and RING_STALE (then netstats
 * says), every time for an unreachable replica (a few at most). */
static bool retry_later(repair *rp, int err)
{
    if (stopping(rp) || !rp->running)
        return false;
    bool busy = err == RK_EOVERLOADED || err == RK_ESTALE;
    int before = busy ? rp->retries : rp->reach_retries;
    uint32_t ms = retry_wait(rp, err);
    if (ms == 0)
        return false;
    const struct repair_cmp *c = &rp->c[rp->cur];
    if (!busy || before == 0)
        rlog(rp, REPAIR_LOG_INFO, "repair.retry",
             "range=(%llu,%llu] peer=%s phase=%s error=%s why=\"%s\" "
             "in_ms=%u try=%d at_most=%d",
             (unsigned long long)c->arc.start, (unsigned long long)c->arc.end,
             c->peer, phase_name(rp->phase), rk_errname(err), rk_strerror(err),
             ms, before + 2, busy ? REPAIR_RETRIES + 1 : REPAIR_REACH_TRIES);
    rp->retried++;
    rp->retry_err = err;
    char peer[REPAIR_NAME_MAX + 8];
    snprintf(peer, sizeof(peer), "with %s", c->peer);
    rp->h.stall_fail(rp->h.arg, phase_name(rp->phase), peer, &c->arc, err);
    budget_settle(rp, 0);
    return wait_then_step(rp, ms) == 0;
}

static bool cmp_peer_up(const repair *rp)
{
    return rp->h.peer_up(rp->h.arg, rp->c[rp->cur].peer);
}

/* The chunk's budget back, less what it moved (stream_throughput_mb). */
static void budget_settle(repair *rp, uint64_t moved)
{
    if (rp->budget)
        rp->h.budget_settle(rp->h.arg, moved);
    rp->budget = false;
    if (moved)
        rp->h.stall_progress(rp->h.arg);
}

/* A replica's answer decoded (decoded: the decoder's result): the
 * decoder's failure (a bad frame, counted), or the status it answered. */
static int answered(repair *rp, int decoded, const int32_t *status)
{
    if (decoded < 0) {
        rp->h.bad_frame(rp->h.arg);
        return decoded;
    }
    return *status < 0 ? *status : 0;
}

static void set_at(repair *rp, struct ring_range r)
{
    rp->at = (struct rpc_stream_pos){.start = r.start, .end = r.end};
}

/* Both leaf lists are in: the runs of leaves that differ. */
static void compare(repair *rp)
{
    size_t nl = (size_t)1 << rp->depth;
    const struct repair_cmp *c = &rp->c[rp->cur];
    rp->ndiff = rp->dcur = 0;
    free(rp->diff);
    rp->diff = NULL;
    size_t nd = 0;
    int rc = merkle_diff(&rp->diff, &rp->ndiff, &nd, c->arc, rp->depth,
                         rp->mine, rp->theirs);
    if (rc < 0) {
        cmp_fail(rp, "compare", rc);
        return;
    }
    rp->leaves += nl;
    rp->leaves_diff += nd;
    if (nd == 0) {
        cmp_next(rp);
        return;
    }
    rp->differing_cmps++;
    rlog(rp, REPAIR_LOG_INFO, "repair.differ",
         "range=(%llu,%llu] peer=%s leaves=%zu differing=%zu runs=%zu",
         (unsigned long long)c->arc.start, (unsigned long long)c->arc.end,
         c->peer, nl, nd, rp->ndiff);
    rp->phase = REPAIR_PULL;
    set_at(rp, rp->diff[0]);
    cmp_step(rp);
}

static void merkle_work(void *arg)
{
    repair *rp = arg;
    const struct repair_cmp *c = &rp->c[rp->cur];
    rp->merkle_err = repair__leaves(rp->mine, NULL, &rp->h, c->arc, rp->depth);
}

/* Both halves of the leaf comparison are back (or one failed): compare,
 * ask the replica again (OVERLOADED), or fail. Nothing moves on while
 * either is out, so no late answer lands in the next comparison. */
static void merkle_join(repair *rp)
{
    if (rp->work_busy || rp->rpc_busy)
        return;
    if (stopping(rp))
        cmp_fail(rp, "stopping", RK_ECLOSED);
    else if (rp->merkle_err < 0)
        cmp_fail(rp, "local leaves", rp->merkle_err);
    else if (rp->peer_err < 0) {
        if (!retry_later(rp, rp->peer_err))
            cmp_fail(rp, "the replica's leaves", rp->peer_err);
    } else if (rp->have_mine && rp->have_theirs)
        compare(rp);
}

static void merkle_after(void *arg)
{
    repair *rp = arg;
    rp->work_busy = false;
    rp->have_mine = rp->merkle_err == 0;
    merkle_join(rp);
}

static void on_merkle(void *arg, int status, struct rk_slice resp)
{
    repair *rp = arg;
    struct rpc_merkle_resp m;
    rp->rpc_busy = false;
    if (status == 0)
        status = answered(rp, rpc_merkle_resp_decode(&m, resp), &m.status);
    if (status == 0 && m.depth != rp->depth)
        status = RK_EPROTO;
    if (status == 0) /* the decode checked the length: it cannot fail */
        status =
            merkle_leaves_get(rp->theirs, (size_t)1 << rp->depth, m.leaves);
    rp->peer_err = status;
    if (status == 0)
        rp->have_theirs = true;
    merkle_join(rp);
}

/* The leaves of the current comparison: here on the pool (unless done
 * already: an OVERLOADED replica asked again), there by RPC. */
static void merkle_start(repair *rp)
{
    const struct repair_cmp *c = &rp->c[rp->cur];
    if (!cmp_peer_up(rp)) {
        cmp_fail(rp, "the replica is not UP", RK_EUNAVAILABLE);
        return;
    }
    if (!rp->have_mine) {
        rp->merkle_err = 0;
        int rc = rp->h.queue_work(rp->h.arg, merkle_work, merkle_after, rp);
        if (rc < 0) {
            cmp_fail(rp, "local leaves", rc);
            return;
        }
        rp->work_busy = true;
    }
    struct rpc_merkle_req rq = {.epoch = rp->epoch,
                                .start = c->arc.start,
                                .end = c->arc.end,
                                .depth = rp->depth};
    rp->peer_err = 0;
    rp->rpc_busy = true;
    rpc_buf_reset(&rp->msg);
    int rc = rpc_merkle_req_encode(&rp->msg, &rq);
    if (rc == 0)
        rc = rp->h.rpc(rp->h.arg, c->peer, RK_SLICE(rp->msg.data, rp->msg.len),
                       REPAIR_TIMEOUT_MS, on_merkle, rp);
    if (rc < 0)
        on_merkle(rp, rc, RK_SLICE(NULL, 0));
}

/* The current sub-arc is through one phase: the next phase or sub-arc. */
static void run_done(repair *rp)
{
    if (rp->phase == REPAIR_PULL) {
        rp->phase = REPAIR_PUSH;
        /* a first pull that brought nothing leaves got NULL, and qsort's
         * base must not be NULL even for no elements (UBSan aborted the
         * node: regression repair_first_pull_empty) */
        if (rp->ngot > 1)
            qsort(rp->got, rp->ngot, sizeof(*rp->got), rk_u64_cmp);
    } else {
        rp->phase = REPAIR_PULL;
        rp->ngot = 0;
        if (++rp->dcur == rp->ndiff) {
            cmp_next(rp);
            return;
        }
    }
    set_at(rp, rp->diff[rp->dcur]);
    cmp_step(rp);
}

static void on_pulled(void *arg, int status, uint32_t keys, uint64_t bytes)
{
    repair *rp = arg;
    if (status < 0) {
        cmp_fail(rp, "commit", status);
        return;
    }
    budget_settle(rp, bytes);
    rp->keys_in += keys;
    rp->bytes_in += bytes;
    rp->total.keys_in += keys;
    rp->total.bytes_in += bytes;
    if (rp->at.done)
        run_done(rp);
    else
        cmp_step(rp);
}

/* Note what a pulled chunk brings (not to be pushed back): false if out
 * of memory. */
static bool note_got(repair *rp, struct rk_slice items)
{
    struct rk_slice it = items, key;
    struct rpc_record rec;
    while (rpc_stream_item_next(&it, &key, &rec) == 1) {
        if (rp->ngot == rp->capgot) {
            size_t cap = rp->capgot ? rp->capgot * 2 : 1024;
            uint64_t *g = realloc(rp->got, cap * sizeof(*g));
            if (!g)
                return false;
            rp->got = g;
            rp->capgot = cap;
        }
        rp->got[rp->ngot++] = rp->h.record_fingerprint(rp->h.arg, key, &rec);
    }
    return true;
}

static void on_pull_chunk(void *arg, int status, struct rk_slice resp)
{
    repair *rp = arg;
    struct rpc_stream_chunk ch;
    if (status == 0)
        status = answered(rp, rpc_stream_chunk_decode(&ch, resp), &ch.status);
    if (status == 0 &&
        (ch.next.start != rp->at.start || ch.next.end != rp->at.end))
        status = RK_EPROTO;
    if (status == 0 && !note_got(rp, ch.items))
        status = -ENOMEM;
    if (status == 0) {
        struct ring_range arc = {rp->at.start, rp->at.end};
        pos_set(&rp->at, rp->at_last, &ch.next);
        status = rp->h.commit_items(rp->h.arg, arc, ch.items, on_pulled, rp);
    }
    if (status < 0 && !retry_later(rp, status))
        cmp_fail(rp, "pull", status);
}

/* The chunk scanned last is in place on the replica (or was empty). */
static void push_done(repair *rp)
{
    pos_set(&rp->at, rp->at_last, &rp->next);
    budget_settle(rp, rp->chunk_bytes_moved);
    rp->keys_out += rp->chunk_keys;
    rp->bytes_out += rp->chunk_bytes_moved;
    rp->total.keys_out += rp->chunk_keys;
    rp->total.bytes_out += rp->chunk_bytes_moved;
    if (rp->at.done)
        run_done(rp);
    else
        cmp_step(rp);
}

/* The replica's WRITE_ACK to a push: its status, or the request's. */
static void on_pushed(void *arg, int status, struct rk_slice resp)
{
    repair *rp = arg;
    struct rpc_write_ack ack;
    if (status == 0)
        status = answered(rp, rpc_write_ack_decode(&ack, resp), &ack.status);
    if (status < 0) {
        if (!retry_later(rp, status))
            cmp_fail(rp, "push", status);
        return;
    }
    push_done(rp);
}

/* A chunk of the sub-arc read here (less what the pull of the sub-arc
 * brought: the scan leaves those out on the pool) to the replica; the
 * next position is taken only once it has it: a failed push is scanned
 * and sent again. */
static void on_push_scanned(void *arg,
                            int status,
                            const struct rpc_stream_chunk *ch,
                            uint64_t kv_bytes,
                            struct rk_slice frame)
{
    repair *rp = arg;
    if (status == 0 && stopping(rp))
        status = RK_ECLOSED;
    if (status < 0) {
        if (!retry_later(rp, status))
            cmp_fail(rp, "scan", status);
        return;
    }
    pos_set(&rp->next, rp->next_last, &ch->next);
    rp->chunk_keys = ch->count;
    rp->chunk_bytes_moved = kv_bytes;
    if (ch->count == 0) { /* nothing (more) to send */
        push_done(rp);
        return;
    }
    int rc = rp->h.rpc(rp->h.arg, rp->c[rp->cur].peer, frame, REPAIR_TIMEOUT_MS,
                       on_pushed, rp);
    if (rc < 0 && !retry_later(rp, rc))
        cmp_fail(rp, "push", rc);
}

/* The current step of the current comparison, from rp->at. */
static void cmp_step(repair *rp)
{
    if (stopping(rp)) {
        cmp_fail(rp, "stopping", RK_ECLOSED);
        return;
    }
    if (rp->phase == REPAIR_MERKLE) {
        merkle_start(rp);
        return;
    }
    if (!cmp_peer_up(rp)) {
        cmp_fail(rp, "the replica is not UP", RK_EUNAVAILABLE);
        return;
    }
    int rc;
    /* a chunk at a time within stream_throughput_mb, as joins and leaves */
    if (!rp->budget) {
        if (!rp->h.budget_take(rp->h.arg)) {
            rp->retry_err = 0; /* netstats: waiting for the budget */
            rc = wait_then_step(rp, REPAIR_BUDGET_MS);
            if (rc < 0)
                cmp_fail(rp, "wait", rc);
            return;
        }
        rp->budget = true;
    }
    if (rp->phase == REPAIR_PULL) {
        struct rpc_stream_req rq = {
            .epoch = rp->epoch, .at = rp->at, .max_bytes = rp->chunk_bytes};
        rpc_buf_reset(&rp->msg);
        rc = rpc_stream_req_encode(&rp->msg, &rq);
        if (rc == 0)
            rc = rp->h.rpc(rp->h.arg, rp->c[rp->cur].peer,
                           RK_SLICE(rp->msg.data, rp->msg.len),
                           REPAIR_TIMEOUT_MS, on_pull_chunk, rp);
    } else {
        rc = rp->h.push_scan(rp->h.arg, &rp->at, rp->chunk_bytes, rp->got,
                             rp->ngot, on_push_scanned, rp);
    }
    if (rc < 0 && !retry_later(rp, rc))
        cmp_fail(rp, rp->phase == REPAIR_PULL ? "pull" : "scan", rc);
}

/* Depth for an arc (merkle_depth_choose), from the keys of the local range
 * holding it. */
static unsigned pick_depth(const repair *rp, struct ring_range arc)
{
    struct ring_range range;
    uint64_t keys = 0;
    if (rp->h.range_keys(rp->h.arg, arc.end, &range, &keys) != 0)
        return merkle_depth_choose(arc, arc, 0);
    return merkle_depth_choose(arc, range, keys);
}

/* A repair after a join has ended (not cut short): no longer due, or,
 * with failed comparisons and runs left, due again after a wait. */
static void after_join_end(repair *rp)
{
    if (rp->failed && ++rp->aj_runs < REPAIR_AJ_TRIES) {
        uint64_t wait = (uint64_t)REPAIR_AJ_AGAIN_MS << (rp->aj_runs - 1);
        rp->aj_next_ms = rp->end_ms + wait;
        rlog(rp, REPAIR_LOG_WARN, "repair.after_join_incomplete",
             "failed=%zu run=%d at_most=%d again_in_ms=%llu note=\"some of "
             "the ranges it streamed in were not compared with every other "
             "replica (one DOWN or restarting); the repair runs again\"",
             rp->failed, rp->aj_runs, REPAIR_AJ_TRIES,
             (unsigned long long)wait);
        return; /* still due */
    }
    if (rp->failed)
        rlog(rp, REPAIR_LOG_WARN, "repair.after_join_incomplete",
             "failed=%zu run=%d at_most=%d note=\"some of the ranges it "
             "streamed in were not compared with every other replica; run "
             "`ringkv repair` on it once they are all UP\"",
             rp->failed, rp->aj_runs, REPAIR_AJ_TRIES);
    rp->aj_runs = 0;
    rp->aj_next_ms = 0;
    rp->h.after_join_done(rp->h.arg);
}

static void repair_end(repair *rp, const char *why)
{
    rp->running = false;
    rp->end_ms = rp->h.now_ms(rp->h.arg);
    free(rp->mine);
    free(rp->theirs);
    free(rp->diff);
    rp->mine = NULL;
    rp->theirs = NULL;
    rp->diff = NULL;
#define REPAIR_DONE_FMT                                               \
    "comparisons=%zu failed=%zu differing=%zu leaves=%llu "           \
    "leaves_differing=%llu keys_in=%llu keys_out=%llu bytes_in=%llu " \
    "bytes_out=%llu retried=%llu ms=%llu why=%s"
    rlog(rp, rp->failed ? REPAIR_LOG_WARN : REPAIR_LOG_INFO, "repair.done",
         REPAIR_DONE_FMT, rp->nc, rp->failed, rp->differing_cmps,
         (unsigned long long)rp->leaves, (unsigned long long)rp->leaves_diff,
         (unsigned long long)rp->keys_in, (unsigned long long)rp->keys_out,
         (unsigned long long)rp->bytes_in, (unsigned long long)rp->bytes_out,
         (unsigned long long)rp->retried,
         (unsigned long long)(rp->end_ms - rp->start_ms), why ? why : "-");
#undef REPAIR_DONE_FMT
    /* a repair after a join cut short by a stop or a ring change stays
     * due (after the restart, or once the ring settles) */
    bool cut_short = stopping(rp) || ring_moved(rp);
    if (!cut_short)
        repair__sched_record(rp);
    if (rp->scheduled && (cut_short || rp->failed))
        rp->runs_failed++;
    rp->scheduled = false;
    if (rp->after_join && !cut_short)
        after_join_end(rp);
    rp->h.job_end(rp->h.arg);
}

/* Comparison rp->cur, or the end past the last. */
static void cmp_start(repair *rp)
{
    while (rp->cur < rp->nc) {
        if (stopping(rp) || ring_moved(rp)) {
            bool stop = stopping(rp);
            rp->failed += rp->nc - rp->cur;
            if (!rp->first_err) {
                rp->first_err = stop ? RK_ECLOSED : RK_ESTALE;
                snprintf(rp->first_err_at, sizeof(rp->first_err_at), "%s",
                         stop ? "the node stopped"
                              : "the ring changed; run repair again");
            }
            rp->cur = rp->nc;
            repair_end(rp, stop ? "stopping" : "ring_changed");
            return;
        }
        const struct repair_cmp *c = &rp->c[rp->cur];
        rp->h.stall_progress(rp->h.arg);
        rp->phase = REPAIR_MERKLE;
        rp->ngot = 0;
        rp->have_mine = rp->have_theirs = false;
        rp->merkle_err = rp->peer_err = 0;
        rp->retries = rp->reach_retries = 0;
        rp->depth = pick_depth(rp, c->arc);
        free(rp->mine);
        free(rp->theirs);
        rp->mine = malloc(sizeof(uint64_t) << rp->depth);
        rp->theirs = malloc(sizeof(uint64_t) << rp->depth);
        if (!rp->mine || !rp->theirs) {
            cmp_fail(rp, "memory", -ENOMEM); /* and the next */
            return;
        }
        cmp_step(rp);
        return;
    }
    repair_end(rp, NULL);
}

/* ---- the repair after a join ------------------------------------------- */

void repair_tick(repair *r)
{
    if (r->begun)
        r->h.stall_check(r->h.arg, r->running);
    repair__sched_tick(r);
    uint64_t joined = 0;
    if (!r->h.after_join_due(r->h.arg, &joined) || stopping(r))
        return;
    uint64_t now = r->h.now_ms(r->h.arg);
    if (!r->after_join_on) { /* turned off since the join */
        r->h.after_join_done(r->h.arg);
        return;
    }
    if (joined == 0) { /* restarted since the join: from the first tick */
        if (r->aj_since_ms == 0)
            r->aj_since_ms = now ? now : 1;
        joined = r->aj_since_ms;
    }
    /* every node has heard of the ring with this node NORMAL; after a run
     * with failures, the wait after_join_end set */
    if (now - joined < r->aj_wait_ms || now < r->aj_next_ms)
        return;
    char *t = NULL;
    size_t len = 0;
    /* repair_end (after_join_end) clears the due, or sets the next run's
     * time */
    int rc = repair__begin(r, NULL, REPAIR_AFTER_JOIN, &t, &len);
    if (rc != 0) { /* not now (a node moving, a repair running): next tick */
        rlog(r, REPAIR_LOG_DEBUG, "repair.after_join_waiting", "why=\"%s\"",
             t ? t : "");
    }
    free(t);
}

/* ---- the plan ----------------------------------------------------------- */

/* The pieces of the arcs of ring r inside `only` (start == end: the
 * whole ring), one per arc it touches, in ring order from only.start;
 * without `only`, every arc. Returns how many (at most cap). */
static size_t pieces(const ring *r,
                     const struct ring_range *only,
                     struct ring_range *out,
                     size_t cap)
{
    size_t na = ring_token_count(r), np = 0;
    if (!only) {
        for (size_t i = 0; i < na && np < cap; i++)
            out[np++] = ring_arc_range(r, i);
        return np;
    }
    size_t i = ring_arc_find(r, only->start + 1);
    uint64_t from = only->start;
    for (size_t k = 0; k <= na && np < cap; k++, i = (i + 1) % na) {
        struct ring_range arc = ring_arc_range(r, i);
        bool last =
            ring_range_contains((struct ring_range){from, arc.end}, only->end);
        out[np++] = (struct ring_range){from, last ? only->end : arc.end};
        if (last)
            break;
        from = arc.end;
    }
    return np;
}

int repair__plan(const ring *r,
                 uint32_t self,
                 const struct ring_range *only,
                 bool closing,
                 struct repair_cmp **out,
                 size_t *nout,
                 struct repair_arc_run **out_arcs,
                 size_t *out_narcs)
{
    size_t na = ring_token_count(r) + 1, nc = 0, nm = 0;
    struct ring_range *pc = calloc(na, sizeof(*pc));
    struct repair_arc_run *a = calloc(na, sizeof(*a));
    struct repair_cmp *c = calloc(na * 2 * RING_MAX_REPLICAS + 1, sizeof(*c));
    if (!c || !pc || !a) {
        free(pc);
        free(a);
        free(c);
        return -ENOMEM;
    }
    size_t np = pieces(r, only, pc, na);
    for (size_t i = 0; i < np; i++) {
        struct ring_range arc = pc[i];
        uint32_t rep[RING_MAX_REPLICAS];
        size_t nr = ring_replicas(r, arc.end, rep, RING_MAX_REPLICAS);
        bool mine = false;
        for (size_t k = 0; k < nr && k < RING_MAX_REPLICAS; k++)
            mine |= rep[k] == self;
        if (!mine)
            continue;
        struct ring_range whole = ring_arc_range(r, ring_arc_find(r, arc.end));
        a[nm] = (struct repair_arc_run){.arc = arc,
                                        .whole = whole.start == arc.start &&
                                                 whole.end == arc.end};
        size_t first = nc;
        for (size_t k = 0; k < nr && k < RING_MAX_REPLICAS; k++) {
            struct ring_node_info ni;
            if (rep[k] == self || ring_node_get(r, &ni, rep[k]) < 0)
                continue;
            c[nc].arc = arc;
            c[nc].ai = nm;
            snprintf(c[nc].peer, sizeof(c[nc].peer), "%s", ni.name);
            nc++;
        }
        size_t others = nc - first;
        if (closing && others > 1) /* the closing pass */
            for (size_t k = 0; k + 1 < others; k++)
                c[nc++] = c[first + k];
        a[nm].closed = others <= 1 || closing;
        nm++;
    }
    free(pc);
    *out = c;
    *nout = nc;
    *out_arcs = a;
    *out_narcs = nm;
    return 0;
}

/* ---- the session -------------------------------------------------------- */

bool repair_running(const repair *r)
{
    return r->running;
}

int repair_begin(repair *r,
                 const struct ring_range *only,
                 char **text,
                 size_t *len)
{
    return repair__begin(r, only, REPAIR_MANUAL, text, len);
}

int repair__begin(repair *r,
                  const struct ring_range *only,
                  enum repair_kind kind,
                  char **text,
                  size_t *len)
{
    char msg[512];
    uint32_t self = RING_NONE;
    int rc = 0;
    if (r->running && r->scheduled) {
        snprintf(msg, sizeof(msg),
                 "a repair is already running on %.64s: the scheduled one "
                 "(repair_interval_s) of range (%llu,%llu], a session of "
                 "one range; ask again once it is done (`ringkv netstats`)",
                 r->node_name, (unsigned long long)r->c[0].arc.start,
                 (unsigned long long)r->c[0].arc.end);
        rc = RK_EBADREQ;
    } else if (r->running) {
        snprintf(msg, sizeof(msg), "a repair is already running on %.64s",
                 r->node_name);
        rc = RK_EBADREQ;
    } else {
        rc = r->h.ring_settled(r->h.arg, &self, msg, sizeof(msg));
    }
    const ring *cur = rc == 0 ? r->h.ring(r->h.arg) : NULL;
    if (rc == 0 && !cur) {
        snprintf(msg, sizeof(msg), "the ring is not settled yet");
        rc = RK_ESTALE;
    }
    struct repair_cmp *c = NULL;
    struct repair_arc_run *arcs = NULL;
    size_t nc = 0, narcs = 0;
    if (rc == 0)
        rc = repair__plan(cur, self, only, kind == REPAIR_SCHEDULED, &c, &nc,
                          &arcs, &narcs);
    if (rc == 0) {
        free(r->c);
        free(r->arcs);
        r->c = c;
        r->nc = nc;
        r->arcs = arcs;
        r->narcs = narcs;
        r->start_wall_ms = r->h.wall_ms(r->h.arg);
        r->cur = 0;
        r->begun = r->running = true;
        r->after_join = kind == REPAIR_AFTER_JOIN;
        r->scheduled = kind == REPAIR_SCHEDULED;
        r->runs += r->scheduled;
        r->epoch = ring_epoch(cur);
        r->start_ms = r->h.now_ms(r->h.arg);
        r->end_ms = 0;
        r->first_err = 0;
        r->first_err_at[0] = '\0';
        r->failed = r->differing_cmps = 0;
        r->ndiff = r->dcur = r->ngot = 0;
        r->budget = r->waiting = false;
        r->work_busy = r->rpc_busy = false;
        r->retries = r->reach_retries = r->retry_err = 0;
        r->retried = r->leaves = r->leaves_diff = 0;
        r->keys_in = r->bytes_in = r->keys_out = r->bytes_out = 0;
        r->h.job_begin(r->h.arg);
        r->h.stall_start(r->h.arg);
        rlog(r, REPAIR_LOG_INFO, "repair.start", "comparisons=%zu epoch=%llu",
             nc, (unsigned long long)r->epoch);
        if (r->after_join)
            rlog(r, REPAIR_LOG_INFO, "repair.after_join",
                 "comparisons=%zu run=%d note=\"each range streamed in from "
                 "one replica at a join, or gained with a replication change, "
                 "is compared with the other replicas, which may hold writes "
                 "it lacks\"",
                 nc, r->aj_runs + 1);
        char what[96] = "";
        if (only)
            snprintf(what, sizeof(what), " inside (%llu,%llu]",
                     (unsigned long long)only->start,
                     (unsigned long long)only->end);
        snprintf(
            msg, sizeof(msg),
            "repair started: %zu comparisons (each arc %.64s replicates%s, "
            "with each of its other replicas) of ring epoch %llu; "
            "`ringkv netstats` shows progress",
            nc, r->node_name, what, (unsigned long long)r->epoch);
        cmp_start(r); /* the first comparison, or the end */
    } else if (rc == -ENOMEM) {
        snprintf(msg, sizeof(msg), "cannot start: %s", rk_strerror(rc));
    }
    *text = strdup(msg);
    if (!*text)
        return -ENOMEM;
    *len = strlen(*text);
    return rc;
}

/* ---- progress ----------------------------------------------------------- */

void repair_text(const repair *r, FILE *f)
{
    if (!r->begun)
        return;
    if (r->after_join)
        fprintf(f, "The repair a node runs after joining by streaming, or "
                   "after gaining replicas with a replication change "
                   "(repair_after_join):\n");
    char in[32], out[32];
    r->h.human_bytes(r->h.arg, in, sizeof(in), r->bytes_in);
    r->h.human_bytes(r->h.arg, out, sizeof(out), r->bytes_out);
    if (r->running) {
        const struct repair_cmp *c = &r->c[r->cur < r->nc ? r->cur : 0];
        fprintf(f,
                "Repair: running for %.1f s: comparison %zu of %zu (range "
                "(%llu,%llu] with %s, %s); %llu of %llu leaves differed; "
                "%llu keys (%s) pulled, %llu keys (%s) pushed",
                (double)(r->h.now_ms(r->h.arg) - r->start_ms) / 1000,
                r->cur + 1, r->nc, (unsigned long long)c->arc.start,
                (unsigned long long)c->arc.end, c->peer, phase_name(r->phase),
                (unsigned long long)r->leaves_diff,
                (unsigned long long)r->leaves, (unsigned long long)r->keys_in,
                in, (unsigned long long)r->keys_out, out);
        if (r->waiting && !r->retry_err)
            fprintf(f, "; waiting for its share of stream_throughput_mb");
        else if (r->waiting && unreachable(r->retry_err))
            fprintf(f, "; waiting: %s could not be reached (%s), try %d of %d",
                    c->peer, rk_strerror(r->retry_err), r->reach_retries + 1,
                    REPAIR_REACH_TRIES);
        else if (r->waiting)
            fprintf(f,
                    "; waiting: %s answered %s, asked again every %d ms (%d "
                    "of %d)",
                    c->peer, rk_errname(r->retry_err), REPAIR_RETRY_MS,
                    r->retries, REPAIR_RETRIES);
        fprintf(f, ".\n");
        r->h.stall_text(r->h.arg, f);
        return;
    }
    fprintf(f,
            "Repair: %s in %.1f s: %zu comparisons, %zu differed (%llu of "
            "%llu leaves); %llu keys (%s) pulled, %llu keys (%s) pushed",
            r->failed ? "done with failures" : "done",
            (double)(r->end_ms - r->start_ms) / 1000, r->nc, r->differing_cmps,
            (unsigned long long)r->leaves_diff, (unsigned long long)r->leaves,
            (unsigned long long)r->keys_in, in, (unsigned long long)r->keys_out,
            out);
    if (r->retried)
        fprintf(f,
                "; %llu step%s asked again (a replica busy, its ring behind "
                "or not reachable for a moment)",
                (unsigned long long)r->retried, r->retried == 1 ? "" : "s");
    if (r->failed)
        fprintf(f, "; %zu failed, the first: %s: %s", r->failed,
                r->first_err_at, rk_strerror(r->first_err));
    fprintf(f, ".\n");
    if (r->after_join && r->aj_next_ms) { /* after_join_end: runs again */
        uint64_t now = r->h.now_ms(r->h.arg);
        fprintf(f, "It runs again in %.0f s (run %d of at most %d).\n",
                r->aj_next_ms > now ? (double)(r->aj_next_ms - now) / 1000 : 0,
                r->aj_runs + 1, REPAIR_AJ_TRIES);
    }
}
