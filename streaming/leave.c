/*
 * leave.c - decommission and removenode: every range a node replicates
 * is streamed to the node that gains it, then the node leaves the ring
 * (shared/DESIGN.md, "Streaming").
 *
 * `ringkv decommission` (stream_leave_begin) first checks that the node may
 * go: it is NORMAL and placed, its ring is current, no other node is
 * joining or leaving (one range movement at a time), every other node is UP
 * (any of them may gain a range), and its data centre keeps at least as many
 * nodes as its replication factor. It then persists leaving=1 and announces
 * STATUS LEAVING under a new epoch. Every node builds, besides its ring, the
 * ring without the leaving node (the pending ring, node/), and
 * coordinators send each write to the node that gains its key too (node/),
 * so a write acknowledged from then on is also on the replicas of the ring
 * after the leave. After the delay a join waits for the same reason (gossip
 * spreads the announcement), the node computes the movement plan
 * (ring_plan_new from its ring to the pending ring) and runs a session per
 * range it loses, LEAVE_PARALLEL at once.
 *
 * Unlike a join's, these sessions push: the leaving node holds every range
 * it loses, is the one that must know when all are in place, and is alive
 * throughout. A session scans a chunk of its range on the libuv pool (the
 * donor's scan, donor.c), sends it to the gaining node as an
 * RPC_MSG_STREAM_PUSH, and scans the next only once the gaining node has
 * answered that every record of the chunk is committed. A push that fails
 * or is refused is sent again from the same point after LEAVE_RETRY_MS;
 * records merge last-write-wins, so a record sent twice is harmless. When
 * every range is in place, and every hint this node keeps for another node
 * has been replayed (they would leave with it), the node announces LEFT (a
 * new epoch), persists left=1, goes on gossiping for LEAVE_LINGER_MS so that
 * every node hears it, and stops; ringkvd refuses to start on that data_dir
 * again (node/).
 *
 * A restart while leaving (leaving=1) announces LEAVING again under the same
 * epoch and resumes each range from the last chunk the gaining node had
 * committed (positions saved each gossip tick, below); until 2026-12-04 it
 * sent every range again from its start.
 *
 * removenode (stream_remove_begin) moves a dead node's ranges the same way,
 * driven by the node asked: it announces the dead node LEAVING on its behalf
 * (gossip_peer_status_set, a re-issue of its state under generation + 1;
 * skipped when it is LEAVING already, as after a decommission cut short by
 * its death), and its sessions relay: each reads chunks of a range from a
 * surviving replica (its own store when it is one, else RPC_MSG_STREAM to
 * the others in turn, as a joining node does) and pushes them to the node
 * that gains the range (or commits them itself when it is that node). When
 * every range is in place it announces the dead node REMOVED. If the dead
 * node comes back meanwhile (NORMAL again by its own word) the removal
 * stops and removes nothing. The node driving it persists removing=NAME
 * in node.state and saves each range's position as a decommission does
 * (named by the target, the ring epoch, the range and the gaining node); a
 * restart takes the removal up again by itself once the ring allows
 * (remove_take_up) and resumes each range from its position (log
 * removenode.resumed); the positions are deleted and removing= cleared
 * when the removal ends. Asked on another node meanwhile, the removal
 * starts over there (the positions are the first driver's). Until
 * 2026-12-05 a removal cut short waited to be asked again, and then
 * started over.
 *
 * `ringkv abort` (stream_move_abort) stops either before its end: a
 * decommission announces NORMAL again (a new epoch, leaving=0), a removal
 * announces its target NORMAL again on its behalf (removing= cleared); the
 * positions are deleted, every node drops its pending ring, and the ring
 * is as before. Sessions with a request or a scan in flight are not freed
 * under it: the ended movement stays (for netstats) until the next is
 * asked, and is freed only once nothing of it is in flight (drop_ended).
 * Each movement tracks its last progress and last failure (stall.c), so
 * one whose every retry fails says so in netstats and the log.
 *
 * The gaining side (stream_push_serve) takes a push only for a range it
 * replicates in its pending ring and only keys inside that range, commits
 * the records (stream_items_commit: into the range's env, synced), and
 * answers with a WRITE_ACK.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "streaming/streaming_internal.h"

#define LEAVE_DELAY_MS                                                  \
    2000                       /* after announcing LEAVING (or 5 gossip \
                                  intervals, if longer) */
#define LEAVE_PARALLEL   4     /* sessions pushing at once */
#define LEAVE_TIMEOUT_MS 30000 /* per push */
#define LEAVE_RETRY_MS   1000
#define LEAVE_LINGER_MS                          \
    3000 /* gossiping LEFT before stopping (or 5 \
            gossip intervals, if longer) */

enum lsess_state { L_IDLE = 0, L_SCANNING, L_SENDING, L_WAIT, L_DONE };

struct leave_sess {
    stream *s;
    struct ring_range range;
    char dest[STREAM_NAME_MAX + 1]; /* the node that gains the range */
    bool dest_self;                 /* removenode: this node gains it */
    /* where the range is read: this node (a decommission), or for a
     * removenode its other replicas, in turn (this node first, if one) */
    char src[RING_MAX_REPLICAS][STREAM_NAME_MAX + 1];
    int nsrc, cur;
    struct rpc_buf msg; /* a source's STREAM request, then the push */
    enum lsess_state state;
    uint64_t retry_at;
    int fails;
    /* where the next scan starts; where the chunk being pushed ends */
    struct rpc_stream_pos at, next;
    uint8_t at_last[RPC_STREAM_LAST_MAX], next_last[RPC_STREAM_LAST_MAX];
    uint32_t chunk_keys;
    uint64_t chunk_bytes, keys, bytes;
    bool unsaved; /* `at` moved since it was last saved */
};

struct stream_leave {
    struct leave_sess *sess;
    size_t ns;
    size_t busy; /* sessions scanning or sending */
    bool planned, left;
    uint64_t start_ms, ready_at, plan_ms, left_at, last_log_ms;
    uint64_t keys, bytes; /* in place on the gaining nodes */
    /* every range is out; hints this node keeps for a peer go first */
    char hints_for[STREAM_NAME_MAX + 1];
    uint64_t hints_left;
    /* the node whose ranges move: this one, or for a removenode (relay) a
     * dead peer, whose ranges are read from their other replicas */
    char target[STREAM_NAME_MAX + 1];
    bool relay;
    bool aborted;     /* the target came back (removenode), or `ringkv abort` */
    bool by_operator; /* aborted by `ringkv abort` */
    uint64_t aborted_epoch; /* the epoch of the NORMAL it announced then */
    bool saving;            /* a job saving positions on the pool */
    bool restarted; /* resumed after a restart: saved positions are read */
    bool purged;    /* removenode: its saved positions deleted at the end */
    uint64_t epoch; /* the ring's at the plan (names removenode's positions) */
    struct stream_stall stall; /* a chunk in place (stall.c) */
};

static void leave_kick(stream *s);
static void remove_take_up(stream *s);
static int ingest_items(stream *s,
                        struct ring_range rg,
                        struct rk_slice items,
                        stream_items_cb cb,
                        void *arg);

/* ---- the leaving side --------------------------------------------------- */

/* A session's step failed: again in LEAVE_RETRY_MS, from the same point
 * (reading from the next source, when it was the read that failed). */
static void sess_fail(struct leave_sess *ls, const char *why, int err)
{
    stream *s = ls->s;
    struct stream_leave *lv = s->leave;
    bool reading = ls->state == L_SCANNING;
    if (ls->state == L_SCANNING || ls->state == L_SENDING) {
        lv->busy--;
        stream_budget_settle(s, 0);
    }
    ls->state = L_WAIT;
    if (lv->aborted) /* what was in flight at the abort: nothing more */
        return;
    ls->fails++;
    char peer[STREAM_NAME_MAX + 8] = "";
    if (!reading)
        snprintf(peer, sizeof(peer), "to %s", ls->dest);
    else if (lv->relay && ls->nsrc)
        snprintf(peer, sizeof(peer), "from %s", ls->src[ls->cur]);
    stream_stall_fail(&lv->stall, why, peer, &ls->range, err);
    if (ls->fails == 1 || ls->fails % 10 == 0)
        SLOG(s, WARN, "leave.retry",
             "range=(%llu,%llu] from=%s to=%s why=\"%s\" error=\"%s\" "
             "failures=%d",
             (unsigned long long)ls->range.start,
             (unsigned long long)ls->range.end,
             ls->nsrc ? ls->src[ls->cur] : "-", ls->dest, why, rk_strerror(err),
             ls->fails);
    if (reading && ls->nsrc)
        ls->cur = (ls->cur + 1) % ls->nsrc;
    ls->retry_at = stream__now(s) + LEAVE_RETRY_MS;
}

/* The chunk is committed on the gaining node: the next, or done. */
static void sess_chunk_in_place(struct leave_sess *ls)
{
    stream *s = ls->s;
    struct stream_leave *lv = s->leave;
    ls->keys += ls->chunk_keys;
    ls->bytes += ls->chunk_bytes;
    lv->keys += ls->chunk_keys;
    lv->bytes += ls->chunk_bytes;
    stream_budget_settle(s, ls->chunk_bytes);
    s->stats.out_keys += ls->chunk_keys;
    s->stats.out_bytes += ls->chunk_bytes;
    ls->fails = 0;
    stream_stall_progress(s, &lv->stall);
    stream_pos_copy(&ls->at, ls->at_last, &ls->next);
    ls->unsaved = true;
    lv->busy--;
    if (ls->at.done) {
        ls->state = L_DONE;
        SLOG(s, INFO, "leave.range_done",
             "range=(%llu,%llu] to=%s keys=%llu bytes=%llu",
             (unsigned long long)ls->range.start,
             (unsigned long long)ls->range.end, ls->dest,
             (unsigned long long)ls->keys, (unsigned long long)ls->bytes);
    } else {
        ls->state = L_IDLE;
    }
    leave_kick(s);
}

static void on_pushed(void *arg, int status, struct rk_slice resp)
{
    struct leave_sess *ls = arg;
    stream *s = ls->s;
    if (status == 0) { /* a WRITE_ACK: its status */
        struct rpc_write_ack a;
        int rc = rpc_write_ack_decode(&a, resp);
        if (rc < 0)
            s->h.bad_frame(s->h.arg);
        status = rc < 0 ? rc : a.status;
    }
    if (status < 0) {
        sess_fail(ls, "push", status);
        return;
    }
    sess_chunk_in_place(ls);
}

/* A chunk committed here (pushed to this node, or copied by its own
 * removal): counted as received. */
static void count_in(stream *s, int status, uint32_t keys, uint64_t bytes)
{
    if (status == 0) {
        s->stats.in_keys += keys;
        s->stats.in_bytes += bytes;
    }
}

static void
on_self_ingested(void *arg, int status, uint32_t keys, uint64_t bytes)
{
    struct leave_sess *ls = arg;
    count_in(ls->s, status, keys, bytes);
    if (status < 0) {
        sess_fail(ls, "commit", status);
        return;
    }
    sess_chunk_in_place(ls);
}

/* A chunk of the range has been read (ch, its keys' and values' bytes;
 * push: the same chunk encoded as an RPC_MSG_STREAM_PUSH, or empty): into
 * the gaining node. */
static void deliver(struct leave_sess *ls,
                    const struct rpc_stream_chunk *ch,
                    uint64_t kv_bytes,
                    struct rk_slice push)
{
    stream *s = ls->s;
    if (stream__stopping(s) || s->leave->aborted) {
        sess_fail(ls, "stopping", RK_ECLOSED);
        return;
    }
    if (ch->next.start != ls->range.start || ch->next.end != ls->range.end) {
        sess_fail(ls, "chunk of another range", RK_EPROTO);
        return;
    }
    stream_pos_copy(&ls->next, ls->next_last, &ch->next);
    ls->chunk_keys = ch->count;
    ls->chunk_bytes = kv_bytes;
    if (ch->count == 0) { /* the rest of the range is empty */
        sess_chunk_in_place(ls);
        return;
    }
    ls->state = L_SENDING;
    int rc;
    if (ls->dest_self) {
        rc = ingest_items(s, ls->range, ch->items, on_self_ingested, ls);
        if (rc < 0)
            sess_fail(ls, "commit", rc);
        return;
    }
    struct stream_peer p;
    if (s->h.peer_by_name(s->h.arg, ls->dest, &p) < 0 || !p.up || !p.iaddr[0]) {
        sess_fail(ls, "the gaining node is not UP", RK_EUNAVAILABLE);
        return;
    }
    struct rk_slice view = push;
    if (!push.len) { /* read from another node: encode the push */
        struct rpc_stream_chunk pc = *ch;
        pc.status = 0;
        rpc_buf_reset(&ls->msg);
        rc = rpc_stream_push_encode(&ls->msg, &pc);
        if (rc < 0) {
            sess_fail(ls, "encode", rc);
            return;
        }
        view = RK_SLICE(ls->msg.data, ls->msg.len);
    }
    /* net/ copies the frame into the connection's output */
    rc = s->h.rpc(s->h.arg, p.iaddr, view, LEAVE_TIMEOUT_MS, on_pushed, ls);
    if (rc < 0)
        sess_fail(ls, "send", rc);
}

static void on_scanned(void *arg,
                       int status,
                       const struct rpc_stream_chunk *ch,
                       uint64_t kv_bytes,
                       struct rk_slice frame)
{
    struct leave_sess *ls = arg;
    if (status < 0)
        sess_fail(ls, "scan", status);
    else
        deliver(ls, ch, kv_bytes, frame);
}

static void on_source_chunk(void *arg, int status, struct rk_slice resp)
{
    struct leave_sess *ls = arg;
    struct rpc_stream_chunk ch;
    if (status == 0) {
        status = rpc_stream_chunk_decode(&ch, resp);
        if (status < 0)
            ls->s->h.bad_frame(ls->s->h.arg);
        else
            status = ch.status;
    }
    if (status < 0) {
        sess_fail(ls, "read", status);
        return;
    }
    uint64_t kv_bytes = 0;
    struct rk_slice it = ch.items, key;
    struct rpc_record rec;
    while (rpc_stream_item_next(&it, &key, &rec) == 1)
        kv_bytes += key.len + rec.value.len;
    deliver(ls, &ch, kv_bytes, RK_SLICE(NULL, 0));
}

/* Read the next chunk: from this node's store, or (removenode) ask the
 * first live source from the current one on. */
static void sess_scan(struct leave_sess *ls)
{
    stream *s = ls->s;
    ls->state = L_SCANNING;
    s->leave->busy++;
    struct stream_peer q;
    const struct stream_peer *p = NULL;
    for (int k = 0; k < ls->nsrc; k++) {
        if (s->h.peer_by_name(s->h.arg, ls->src[ls->cur], &q) == 0 &&
            (q.self || (q.up && q.iaddr[0]))) {
            p = &q;
            break;
        }
        ls->cur = (ls->cur + 1) % ls->nsrc;
    }
    int rc;
    if (!s->leave->relay || (p && p->self)) {
        rc = stream_scan(s, &ls->at, STREAM_CHUNK, NULL, 0, on_scanned, ls);
    } else if (!p) {
        rc = RK_EUNAVAILABLE;
    } else {
        const ring *r = stream__ring(s);
        struct rpc_stream_req rq = {.epoch = r ? ring_epoch(r) : 0,
                                    .at = ls->at,
                                    .max_bytes = STREAM_CHUNK};
        rpc_buf_reset(&ls->msg);
        rc = rpc_stream_req_encode(&ls->msg, &rq);
        if (rc == 0)
            rc = s->h.rpc(s->h.arg, p->iaddr,
                          RK_SLICE(ls->msg.data, ls->msg.len), LEAVE_TIMEOUT_MS,
                          on_source_chunk, ls);
    }
    if (rc < 0)
        sess_fail(ls, p || !s->leave->relay ? "read" : "no live source", rc);
}

/* ---- a decommission's progress, kept across restarts ------------------- */

/* Each session's position after its last chunk in place on the gaining
 * node is kept in a system value of its own, named after the leave (this
 * node's first token), the range and the node gaining it, saved on the pool
 * at most once a gossip tick, all in one synced transaction (streaming.c's
 * position jobs). A node restarted while leaving plans the same sessions
 * (the same rings) and resumes each from there, done ones skipped: what it
 * pushed is committed on the gaining nodes, and every write since it
 * announced LEAVING went to them as well (pending replicas), whether this
 * node was up or not. The values are not deleted: a node that has left
 * never starts on its data_dir again. A removenode's progress is kept the
 * same way by the node driving it, named after the removed node, the ring
 * epoch, the range and the gaining node (remove.at.*), and deleted when the
 * removal ends. */

static uint64_t first_token(stream *s)
{
    struct stream_state st;
    stream__state(s, &st);
    return st.first_token;
}

static void
leave_save_name(stream *s, const struct leave_sess *ls, char *out, size_t cap)
{
    const struct stream_leave *lv = s->leave;
    if (lv->relay) /* the epoch: a later LEAVING of the same node is another */
        snprintf(out, cap, "remove.at.%s.%016llx.%016llx_%016llx.%s",
                 lv->target, (unsigned long long)lv->epoch,
                 (unsigned long long)ls->range.start,
                 (unsigned long long)ls->range.end, ls->dest);
    else
        snprintf(out, cap, "leave.at.%016llx.%016llx_%016llx.%s",
                 (unsigned long long)first_token(s),
                 (unsigned long long)ls->range.start,
                 (unsigned long long)ls->range.end, ls->dest);
}

static void leave_save_after(stream *s, int status)
{
    (void)status; /* logged; the positions not saved go again */
    if (s->leave)
        s->leave->saving = false;
}

/* A job saving the positions that moved since the last one, if no job
 * runs; once a removal has ended (done or aborted) or a decommission was
 * aborted, one deleting them all: they are of no use to another, and a
 * later decommission restarted would resume from them although the writes
 * made between the abort and its LEAVING never went to the gaining nodes. */
static void leave_save(stream *s)
{
    struct stream_leave *lv = s->leave;
    if (!lv || !lv->planned || lv->saving || lv->purged || !stream__store(s))
        return;
    bool purge = lv->aborted || (lv->relay && lv->left);
    size_t k = 0;
    for (size_t i = 0; i < lv->ns; i++)
        k += purge || lv->sess[i].unsaved;
    if (k == 0)
        return;
    struct stream_pos_job *j = stream__pos_job_new(
        s, k, lv->relay ? "removenode" : "decommission", leave_save_after);
    if (!j)
        return;
    char name[2 * STREAM_NAME_MAX + 96];
    for (size_t i = 0; i < lv->ns; i++) {
        struct leave_sess *ls = &lv->sess[i];
        if (!purge && !ls->unsaved)
            continue;
        leave_save_name(s, ls, name, sizeof(name));
        if (stream__pos_job_add(j, name, purge ? NULL : &ls->at) < 0) {
            stream__pos_job_free(j);
            return; /* all again next time */
        }
    }
    if (stream__pos_job_run(j) < 0)
        return;
    lv->saving = true;
    lv->purged = purge;
    for (size_t i = 0; i < lv->ns; i++)
        lv->sess[i].unsaved = false;
}

/* The sessions of a restarted decommission, or of a removal asked again
 * after the node driving it restarted, start where they were. */
static void leave_resume(stream *s)
{
    struct stream_leave *lv = s->leave;
    char name[2 * STREAM_NAME_MAX + 96];
    size_t whole = 0, part = 0;
    for (size_t i = 0; stream__store(s) && i < lv->ns; i++) {
        struct leave_sess *ls = &lv->sess[i];
        leave_save_name(s, ls, name, sizeof(name));
        if (stream__pos_load(s, name, ls->range, &ls->at, ls->at_last) < 0)
            continue;
        if (ls->at.done) {
            ls->state = L_DONE;
            whole++;
        } else {
            part += ls->at.started;
        }
    }
    if (whole || part)
        SLOG(s, INFO, lv->relay ? "removenode.resumed" : "leave.resumed",
             "ranges_done=%zu ranges_partly=%zu ranges=%zu", whole, part,
             lv->ns);
}

/* The movement plan from the ring to the pending ring (the target gone): a
 * session for every range it loses, to the node that gains it. */
static int leave_plan(stream *s)
{
    struct stream_leave *lv = s->leave;
    const ring *from = stream__ring(s), *to = stream__ring_pending(s);
    if (!from || !to)
        return RK_EINTERNAL;
    uint32_t self = ring_node_find(from, lv->target);
    struct ring_move *mv = NULL;
    size_t nmv = 0;
    int rc = ring_plan_new(&mv, &nmv, from, to);
    if (rc < 0)
        return rc;
    bool *mine = calloc(nmv ? nmv : 1, sizeof(*mine));
    size_t cnt = 0;
    for (size_t i = 0; mine && i < nmv; i++) {
        for (uint32_t k = 0; k < mv[i].nlose; k++)
            mine[i] |= mv[i].lose[k] == self;
        cnt += mine[i];
    }
    lv->sess = mine ? calloc(cnt ? cnt : 1, sizeof(*lv->sess)) : NULL;
    if (!lv->sess) {
        free(mine);
        ring_plan_free(mv);
        return -ENOMEM;
    }
    for (size_t i = 0; i < nmv; i++) {
        struct ring_node_info ni;
        if (!mine[i] || ring_node_get(to, &ni, mv[i].gain) < 0)
            continue;
        struct leave_sess *ls = &lv->sess[lv->ns++];
        ls->s = s;
        ls->range = mv[i].range;
        snprintf(ls->dest, sizeof(ls->dest), "%s", ni.name);
        ls->dest_self = strcmp(ni.name, s->cfg.node_name) == 0;
        if (!lv->relay) {
            snprintf(ls->src[ls->nsrc++], sizeof(ls->src[0]), "%.*s",
                     STREAM_NAME_MAX, s->cfg.node_name);
        } else {
            /* the range's other replicas, this node first if it is one */
            uint32_t rep[RING_MAX_REPLICAS];
            size_t nr =
                ring_replicas(from, ls->range.end, rep, RING_MAX_REPLICAS);
            for (int pass = 0; pass < 2; pass++)
                for (size_t k = 0; k < nr && k < RING_MAX_REPLICAS; k++) {
                    struct ring_node_info ri;
                    if (rep[k] == self || ring_node_get(from, &ri, rep[k]) < 0)
                        continue;
                    bool me = strcmp(ri.name, s->cfg.node_name) == 0;
                    if (me == (pass == 0))
                        snprintf(ls->src[ls->nsrc++], sizeof(ls->src[0]), "%s",
                                 ri.name);
                }
        }
        ls->at.start = ls->range.start;
        ls->at.end = ls->range.end;
        ls->at.last = RK_SLICE(ls->at_last, 0);
    }
    free(mine);
    ring_plan_free(mv);
    lv->epoch = ring_epoch(from);
    if (lv->restarted)
        leave_resume(s);
    lv->planned = true;
    lv->plan_ms = stream__now(s);
    stream_stall_start(s, &lv->stall, lv->relay ? "removenode" : "decommission",
                       lv->relay ? "removenode" : "leave");
    SLOG(s, INFO, lv->relay ? "removenode.planned" : "leave.planned",
         "node=%s ranges=%zu epoch=%llu", lv->target, lv->ns,
         (unsigned long long)ring_epoch(from));
    return 0;
}

/* node.state's removing=: the removal this node drives ("" when none), so
 * that a restart takes it up again (remove_take_up). */
static void remove_state_save(stream *s, const char *name)
{
    struct stream_state st;
    stream__state(s, &st);
    if (strcmp(st.removing, name) == 0)
        return;
    snprintf(st.removing, sizeof(st.removing), "%s", name);
    stream__state_save(s, &st);
}

/* Every range is in place: the target REMOVED (removenode), a new epoch. */
static void remove_finish(stream *s)
{
    struct stream_leave *lv = s->leave;
    uint64_t epoch = 0;
    int rc =
        s->h.announce(s->h.arg, lv->target, STREAM_ANNOUNCE_REMOVED, &epoch);
    if (rc < 0) {
        SLOG(s, ERROR, "removenode.announce_fail", "node=%s error=\"%s\"",
             lv->target, rk_strerror(rc));
        return; /* again at the next tick */
    }
    lv->left = true;
    lv->left_at = stream__now(s);
    remove_state_save(s, "");
    SLOG(s, INFO, "removenode.done",
         "node=%s epoch=%llu ranges=%zu keys=%llu bytes=%llu ms=%llu "
         "streaming_ms=%llu",
         lv->target, (unsigned long long)epoch, lv->ns,
         (unsigned long long)lv->keys, (unsigned long long)lv->bytes,
         (unsigned long long)(lv->left_at - lv->start_ms),
         (unsigned long long)(lv->left_at - lv->plan_ms));
    s->h.ring_rebuild(s->h.arg);
}

/* Every range is in place: LEFT, a new epoch, left=1. */
static void leave_finish(stream *s)
{
    struct stream_leave *lv = s->leave;
    if (lv->relay) {
        remove_finish(s);
        return;
    }
    uint64_t epoch = 0;
    int rc = s->h.announce(s->h.arg, NULL, STREAM_ANNOUNCE_LEFT, &epoch);
    if (rc < 0) {
        SLOG(s, ERROR, "leave.announce_fail", "error=\"%s\"", rk_strerror(rc));
        return; /* again at the next tick */
    }
    struct stream_state st;
    stream__state(s, &st);
    st.ring_epoch = epoch;
    st.leaving = false;
    st.left = true;
    stream__state_save(s, &st);
    lv->left = true;
    lv->left_at = stream__now(s);
    SLOG(s, INFO, "leave.left",
         "epoch=%llu ranges=%zu keys=%llu bytes=%llu ms=%llu streaming_ms=%llu",
         (unsigned long long)epoch, lv->ns, (unsigned long long)lv->keys,
         (unsigned long long)lv->bytes,
         (unsigned long long)(lv->left_at - lv->start_ms),
         (unsigned long long)(lv->left_at - lv->plan_ms));
    s->h.ring_rebuild(s->h.arg);
}

/* Hints this node keeps for the other members would be lost with it: the
 * first member that has some (replay kicked), or false when none does.
 * Fewer left than last time is progress; what is left is what the leave
 * waits for, which a stall report gives as its reason (a leave that waited
 * for hints said so in netstats only, never stalled). */
static bool hints_pending(stream *s)
{
    struct stream_leave *lv = s->leave;
    uint64_t before = lv->hints_left;
    lv->hints_for[0] = '\0';
    lv->hints_left =
        s->h.hints_pending(s->h.arg, lv->hints_for, sizeof(lv->hints_for));
    if (!lv->hints_left)
        lv->hints_for[0] = '\0';
    if (lv->hints_left && lv->hints_left < before)
        stream_stall_progress(s, &lv->stall);
    if (lv->hints_left)
        snprintf(lv->stall.wait, sizeof(lv->stall.wait),
                 "the %llu hint%s it keeps for %s to be replayed",
                 (unsigned long long)lv->hints_left,
                 lv->hints_left == 1 ? "" : "s", lv->hints_for);
    else
        lv->stall.wait[0] = '\0';
    return lv->hints_left > 0;
}

/* Whether `name` is LEAVING in ring r. */
static bool is_leaving(const ring *r, const char *name)
{
    struct ring_node_info ti;
    uint32_t t = ring_node_find(r, name);
    return t != RING_NONE && ring_node_get(r, &ti, t) == 0 &&
           ti.state == RING_LEAVING;
}

static void leave_kick(stream *s)
{
    struct stream_leave *lv = s->leave;
    if (!lv || !lv->planned || lv->left || lv->aborted || stream__stopping(s))
        return;
    uint64_t now = stream__now(s);
    size_t done = 0;
    for (size_t i = 0; i < lv->ns; i++) {
        struct leave_sess *ls = &lv->sess[i];
        if (ls->state == L_DONE) {
            done++;
            continue;
        }
        if (lv->busy >= LEAVE_PARALLEL)
            continue;
        if ((ls->state == L_IDLE ||
             (ls->state == L_WAIT && now >= ls->retry_at)) &&
            stream_budget_take(s))
            sess_scan(ls);
    }
    if (done == lv->ns && lv->busy == 0 && (lv->relay || !hints_pending(s)))
        leave_finish(s);
}

/* What a node's leaving (node t of the ring, in data centre dc) needs of
 * the others: no other movement (unless t's own is under way: pending),
 * every other node UP, and dc keeping at least its replication factor.
 * 0, or RK_EBADREQ with the reason in why. */
static int move_check(stream *s,
                      uint32_t t,
                      const char *dc,
                      const char *name,
                      bool pending,
                      char *why,
                      size_t cap)
{
    const ring *r = stream__ring(s);
    if (stream__ring_pending(s) && !pending) {
        snprintf(why, cap,
                 "another node is joining or leaving: one range movement at "
                 "a time; try again once `ringkv status` shows every node "
                 "UN");
        return RK_EBADREQ;
    }
    size_t others = 0;
    for (size_t i = 0; i < ring_node_count(r); i++) {
        struct ring_node_info ni;
        if (i == t || ring_node_get(r, &ni, (uint32_t)i) < 0 ||
            ni.state != RING_NORMAL)
            continue;
        struct stream_peer p;
        if (s->h.peer_at(s->h.arg, (uint32_t)i, &p) == 0 && !p.up) {
            snprintf(why, cap,
                     "%s is DOWN: it may hold or gain some of %s's ranges; "
                     "bring it back first",
                     ni.name, name);
            return RK_EBADREQ;
        }
        others += strcmp(ni.dc, dc) == 0;
    }
    int rf = s->h.dc_rf(s->h.arg, dc);
    if (others == 0 || others < (size_t)rf) {
        snprintf(why, cap,
                 "data centre %s would keep %zu node%s for replication "
                 "factor %d: add a node first",
                 dc, others, others == 1 ? "" : "s", rf);
        return RK_EBADREQ;
    }
    return 0;
}

/* leaving=v persisted before this node announces st (so that a restart
 * does what was announced), then the announcement's epoch: 0 and *epoch,
 * or the error, leaving put back. */
static int
leaving_announce(stream *s, bool v, enum stream_announce st, uint64_t *epoch)
{
    struct stream_state ss;
    stream__state(s, &ss);
    ss.leaving = v;
    int rc = stream__state_save(s, &ss);
    if (rc == 0)
        rc = s->h.announce(s->h.arg, NULL, st, epoch);
    if (rc < 0) {
        ss.leaving = !v;
        stream__state_save(s, &ss);
        return rc;
    }
    ss.ring_epoch = *epoch;
    stream__state_save(s, &ss);
    return 0;
}

/* Why this node cannot leave now, in why; 0 if it can. */
static int leave_check(stream *s, char *why, size_t cap)
{
    int rc = stream_ring_ready(s, why, cap);
    if (rc < 0)
        return rc;
    const ring *r = stream__ring(s);
    uint32_t self = r ? ring_node_find(r, s->cfg.node_name) : RING_NONE;
    struct ring_node_info me;
    if (self == RING_NONE || ring_node_get(r, &me, self) < 0 ||
        me.state != RING_NORMAL) {
        snprintf(why, cap, "%s holds no tokens in the ring", s->cfg.node_name);
        return RK_EBADREQ;
    }
    return move_check(s, self, me.dc, s->cfg.node_name, false, why, cap);
}

static struct stream_leave *leave_new(stream *s)
{
    struct stream_leave *lv = calloc(1, sizeof(*lv));
    if (!lv)
        return NULL;
    lv->start_ms = stream__now(s);
    lv->ready_at = lv->start_ms + stream__at_least(s, LEAVE_DELAY_MS);
    snprintf(lv->target, sizeof(lv->target), "%.*s", STREAM_NAME_MAX,
             s->cfg.node_name);
    return lv;
}

/* Whether the movement has ended (a removal done, or either aborted). */
static bool ended(const struct stream_leave *lv)
{
    return lv->aborted || (lv->relay && lv->left);
}

/* A movement that has ended is kept only for netstats: freed once nothing
 * of it is in flight (its sessions' requests and scans, a position job)
 * and its positions' deletion is queued. */
static void drop_ended(stream *s)
{
    const struct stream_leave *lv = s->leave;
    if (lv && ended(lv) && lv->busy == 0 && !lv->saving &&
        (lv->purged || !lv->planned || !stream__store(s)))
        stream__leave_free(s);
}

/* Why a new movement cannot start while an aborted one winds down. */
static int winding_down(stream *s, char *why, size_t cap)
{
    const struct stream_leave *lv = s->leave;
    snprintf(why, cap,
             "%s's aborted %s of %s is still winding down (%zu request%s or "
             "scan%s in flight, each over within %d s): try again shortly",
             s->cfg.node_name, lv->relay ? "removal" : "decommission",
             lv->target, lv->busy, lv->busy == 1 ? "" : "s",
             lv->busy == 1 ? "" : "s", LEAVE_TIMEOUT_MS / 1000);
    return RK_EBADREQ;
}

bool stream_leave_running(const stream *s)
{
    return s->leave && !ended(s->leave);
}

int stream_leave_begin(stream *s, char **text, size_t *len)
{
    char msg[512];
    int rc = 0;
    drop_ended(s);
    if (s->leave && s->leave->aborted) {
        rc = winding_down(s, msg, sizeof(msg));
    } else if (s->leave && s->leave->relay) {
        snprintf(msg, sizeof(msg),
                 "%s is removing %s: one range movement at a time; try again "
                 "once it is done (`ringkv netstats`)",
                 s->cfg.node_name, s->leave->target);
        rc = RK_EBADREQ;
    } else if (s->leave) {
        snprintf(msg, sizeof(msg),
                 "%s is already %s; `ringkv netstats` shows the progress",
                 s->cfg.node_name,
                 s->leave->left ? "LEFT and stopping" : "leaving");
    } else if ((rc = leave_check(s, msg, sizeof(msg))) == 0) {
        s->leave = leave_new(s);
        if (!s->leave)
            return -ENOMEM;
        /* persisted before the announce: a restart resumes the leave */
        uint64_t epoch = 0;
        rc = leaving_announce(s, true, STREAM_ANNOUNCE_LEAVING, &epoch);
        if (rc < 0) {
            free(s->leave);
            s->leave = NULL;
            snprintf(msg, sizeof(msg), "cannot announce LEAVING: %s",
                     rk_strerror(rc));
        } else {
            SLOG(s, INFO, "leave.leaving", "epoch=%llu",
                 (unsigned long long)epoch);
            s->h.ring_rebuild(s->h.arg);
            snprintf(msg, sizeof(msg),
                     "%s is leaving: announced LEAVING (ring epoch %llu). In "
                     "about %.0f s it starts sending every range it holds to "
                     "the node that gains it (`ringkv netstats` shows the "
                     "progress); then it announces LEFT and stops.",
                     s->cfg.node_name, (unsigned long long)epoch,
                     (double)(s->leave->ready_at - s->leave->start_ms) / 1000);
        }
    }
    *text = strdup(msg);
    if (!*text)
        return -ENOMEM;
    *len = strlen(*text);
    return rc;
}

int stream_leave_resume(stream *s)
{
    s->leave = leave_new(s);
    if (!s->leave)
        return -ENOMEM;
    s->leave->restarted = true; /* its saved positions are read at plan */
    return 0;
}

/* The removal stops with nothing removed (the target came back, or
 * `ringkv abort`): removing= cleared; its positions are deleted at the
 * next tick (leave_save); the sessions in flight end by themselves. */
static void remove_stop(stream *s, const char *note)
{
    struct stream_leave *lv = s->leave;
    lv->aborted = true;
    remove_state_save(s, "");
    SLOG(s, WARN, "removenode.aborted", "node=%s note=\"%s\"", lv->target,
         note);
}

void stream__leave_tick(stream *s)
{
    struct stream_leave *lv = s->leave;
    if (stream__stopping(s))
        return;
    if (!lv) {
        remove_take_up(s);
        return;
    }
    uint64_t now = stream__now(s);
    const ring *r = stream__ring(s);
    if (lv->relay && !lv->left && !lv->aborted && r &&
        !s->h.ring_stale(s->h.arg)) {
        /* a dead node that comes back is NORMAL again by its own word */
        if (!is_leaving(r, lv->target))
            remove_stop(s, "it is no longer LEAVING (it came back?): nothing "
                           "removed");
    }
    leave_save(s);
    if (lv->aborted || (lv->relay && lv->left))
        return;
    if (lv->left) {
        if (now >= lv->left_at + stream__at_least(s, LEAVE_LINGER_MS)) {
            SLOG(s, INFO, "node.decommissioned",
                 "note=\"left the cluster; stopping\"");
            s->h.self_stop(s->h.arg);
        }
        return;
    }
    if (!lv->planned) {
        /* the ring it streams against must be the cluster's */
        if (now < lv->ready_at || s->h.ring_stale(s->h.arg) ||
            !stream__ring_pending(s))
            return;
        int rc = leave_plan(s);
        if (rc < 0) {
            SLOG(s, ERROR, "leave.plan_fail", "error=\"%s\"", rk_strerror(rc));
            return;
        }
    }
    size_t done = 0;
    for (size_t i = 0; i < lv->ns; i++)
        done += lv->sess[i].state == L_DONE;
    stream_stall_check(s, &lv->stall,
                       !lv->left && (done < lv->ns || lv->hints_left > 0));
    if (now - lv->last_log_ms >= 10000 && lv->ns) {
        lv->last_log_ms = now;
        SLOG(s, INFO, lv->relay ? "removenode.progress" : "leave.progress",
             "node=%s ranges_done=%zu ranges=%zu keys=%llu bytes=%llu",
             lv->target, done, lv->ns, (unsigned long long)lv->keys,
             (unsigned long long)lv->bytes);
    }
    leave_kick(s);
}

void stream__leave_text(stream *s, FILE *f)
{
    const struct stream_leave *lv = s->leave;
    struct stream_state st;
    stream__state(s, &st);
    if (!lv && st.removing[0]) {
        fprintf(f,
                "Removing %s was cut short by a restart of this node: it is "
                "taken up again once the ring allows%s%s.\n",
                st.removing, s->remove_why[0] ? "; now: " : "", s->remove_why);
        return;
    }
    if (!lv)
        return;
    uint64_t ms = stream__now(s) - lv->start_ms;
    char b1[32], b2[32];
    if (lv->relay) {
        fprintf(f, "Mode: NORMAL\n");
        if (lv->aborted && lv->by_operator)
            fprintf(f,
                    "Removal of %s aborted by `ringkv abort`: announced it "
                    "NORMAL again on its behalf (ring epoch %llu); nothing "
                    "was removed.\n",
                    lv->target, (unsigned long long)lv->aborted_epoch);
        else if (lv->aborted)
            fprintf(f,
                    "Removal of %s aborted: it is no longer LEAVING (it came "
                    "back?); nothing was removed.\n",
                    lv->target);
        else if (lv->left)
            fprintf(f,
                    "Removed %s: its ranges were copied from their other "
                    "replicas to the nodes that gained them.\n",
                    lv->target);
        else
            fprintf(f,
                    "Removing %s (removenode): announced LEAVING on its "
                    "behalf %.1f s ago.\n",
                    lv->target, (double)ms / 1000);
        if (!lv->planned) {
            fprintf(f, "The copy starts once the cluster has heard (ring "
                       "delay).\n");
            return;
        }
    } else if (lv->left) {
        fprintf(f, "Mode: LEFT (stopping)\n");
    } else if (lv->aborted) {
        fprintf(f,
                "Mode: NORMAL\nDecommission aborted by `ringkv abort`: "
                "announced NORMAL again (ring epoch %llu); the node keeps "
                "its ranges, the gaining nodes drop what they received at "
                "their next cleanup.\n",
                (unsigned long long)lv->aborted_epoch);
        if (!lv->planned)
            return;
    } else {
        fprintf(f, "Mode: LEAVING\n");
        if (!lv->planned) {
            fprintf(f,
                    "Announced LEAVING %.1f s ago; streaming starts once "
                    "the cluster has heard (ring delay).\n",
                    (double)ms / 1000);
            return;
        }
    }
    size_t done = 0;
    double frac = 0;
    for (size_t i = 0; i < lv->ns; i++) {
        done += lv->sess[i].state == L_DONE;
        frac += lv->sess[i].state == L_DONE
                    ? 1.0
                    : stream__fraction(lv->sess[i].range, &lv->sess[i].at);
    }
    frac = lv->ns ? frac / (double)lv->ns : 1;
    /* the rate and ETA count from the plan, and stop at LEFT */
    double secs =
        (double)((lv->left ? lv->left_at : stream__now(s)) - lv->plan_ms) /
        1000;
    stream_human_bytes(b1, sizeof(b1), lv->bytes);
    stream_human_bytes(b2, sizeof(b2),
                       secs > 0 ? (uint64_t)((double)lv->bytes / secs) : 0);
    fprintf(f,
            "%s %zu ranges: %zu done, %.0f%% of the token space; %llu "
            "keys, %s in %.1f s (%s/s)",
            lv->relay ? "Copying" : "Sending", lv->ns, done, frac * 100,
            (unsigned long long)lv->keys, b1, secs, b2);
    if (frac > 0.01 && frac < 1)
        fprintf(f, ", ETA %.0f s", secs * (1 - frac) / frac);
    if (s->cfg.stream_throughput_mb > 0)
        fprintf(f, " (capped at %d MiB/s)", s->cfg.stream_throughput_mb);
    fprintf(f, "\n");
    if (!lv->left && !lv->aborted)
        stream_stall_text(s, &lv->stall, f);
    if (!lv->left && !lv->aborted && lv->hints_for[0])
        fprintf(f,
                "Every range is out; waiting for the %llu hint%s it keeps "
                "for %s to be replayed before leaving.\n",
                (unsigned long long)lv->hints_left,
                lv->hints_left == 1 ? "" : "s", lv->hints_for);
    static const char *const sn[] = {"queued", "reading", "sending", "retrying",
                                     "done"};
    for (size_t i = 0; i < lv->ns; i++) {
        const struct leave_sess *ls = &lv->sess[i];
        double fr =
            ls->state == L_DONE ? 1.0 : stream__fraction(ls->range, &ls->at);
        char bar[21];
        stream__bar(bar, fr);
        stream_human_bytes(b1, sizeof(b1), ls->bytes);
        fprintf(f, "  (%llu,%llu]%s%s to %s [%s] %3.0f%% %s: %llu keys, %s\n",
                (unsigned long long)ls->range.start,
                (unsigned long long)ls->range.end, lv->relay ? " from " : "",
                lv->relay && ls->nsrc ? ls->src[ls->cur] : "", ls->dest, bar,
                fr * 100, sn[ls->state], (unsigned long long)ls->keys, b1);
    }
}

void stream__leave_free(stream *s)
{
    struct stream_leave *lv = s->leave;
    if (!lv)
        return;
    for (size_t i = 0; i < lv->ns; i++)
        rpc_buf_free(&lv->sess[i].msg);
    free(lv->sess);
    free(lv);
    s->leave = NULL;
}

/* ---- removenode ---------------------------------------------------------- */

/* Why `name` cannot be removed now, in why; 0 if it can (*leaving: it is
 * already LEAVING, a removal or a decommission cut short). */
static int
remove_check(stream *s, const char *name, bool *leaving, char *why, size_t cap)
{
    int rc = stream_ring_ready(s, why, cap);
    if (rc < 0)
        return rc;
    if (strcmp(name, s->cfg.node_name) == 0) {
        snprintf(why, cap,
                 "%s is this node: a live node leaves with `ringkv "
                 "decommission`",
                 name);
        return RK_EBADREQ;
    }
    const ring *r = stream__ring(s);
    uint32_t t = r ? ring_node_find(r, name) : RING_NONE;
    struct ring_node_info ti;
    if (t == RING_NONE || ring_node_get(r, &ti, t) < 0 ||
        (ti.state != RING_NORMAL && ti.state != RING_LEAVING)) {
        snprintf(why, cap, "no node %s holds tokens in the ring", name);
        return RK_EBADREQ;
    }
    *leaving = ti.state == RING_LEAVING;
    struct stream_peer tp;
    if (t != RING_NONE && s->h.peer_at(s->h.arg, t, &tp) == 0 && tp.up) {
        snprintf(why, cap,
                 "%s is UP: removenode is for a dead node; a live one leaves "
                 "with `ringkv -h %s decommission`",
                 name, name);
        return RK_EBADREQ;
    }
    return move_check(s, t, ti.dc, name, *leaving, why, cap);
}

int stream_remove_begin(stream *s, const char *name, char **text, size_t *len)
{
    char msg[1536];
    bool leaving = false;
    int rc = 0;
    drop_ended(s);
    if (s->leave && s->leave->aborted) {
        rc = winding_down(s, msg, sizeof(msg));
    } else if (s->leave) {
        snprintf(msg, sizeof(msg),
                 s->leave->relay
                     ? "%s is already removing %s; `ringkv netstats` shows the "
                       "progress"
                     : "%s is leaving itself (%s): one range movement at a "
                       "time",
                 s->cfg.node_name, s->leave->target);
        rc = s->leave->relay && strcmp(s->leave->target, name) == 0
                 ? 0
                 : RK_EBADREQ;
    } else if ((rc = remove_check(s, name, &leaving, msg, sizeof(msg))) == 0) {
        uint64_t epoch = 0;
        if (!leaving)
            rc = s->h.announce(s->h.arg, name, STREAM_ANNOUNCE_LEAVING, &epoch);
        struct stream_leave *lv = rc == 0 ? leave_new(s) : NULL;
        if (rc == 0 && !lv)
            rc = -ENOMEM;
        if (rc < 0) {
            snprintf(msg, sizeof(msg), "cannot announce %s LEAVING: %s", name,
                     rk_strerror(rc));
        } else {
            snprintf(lv->target, sizeof(lv->target), "%s", name);
            lv->relay = true;
            remove_state_save(s, name);
            /* LEAVING already: perhaps this node's own removal, cut short
             * by a restart; its saved positions are read at the plan */
            lv->restarted = leaving;
            s->leave = lv;
            SLOG(s, INFO, "removenode.leaving", "node=%s epoch=%llu resumed=%d",
                 name, (unsigned long long)epoch, leaving ? 1 : 0);
            s->h.ring_rebuild(s->h.arg);
            snprintf(msg, sizeof(msg),
                     "removing %s: %s. In about %.0f s %s starts copying "
                     "each of its ranges from the other replicas to the node "
                     "that gains it (`ringkv netstats` on %s shows the "
                     "progress); then it announces %s REMOVED.",
                     name,
                     leaving ? "it was LEAVING already"
                             : "announced LEAVING on its behalf",
                     (double)(lv->ready_at - lv->start_ms) / 1000,
                     s->cfg.node_name, s->cfg.node_name, name);
        }
    }
    *text = strdup(msg);
    if (!*text)
        return -ENOMEM;
    *len = strlen(*text);
    return rc;
}

/* A removal this node drove when it stopped (node.state removing=NAME):
 * once its ring is the cluster's, taken up again as if asked (its ranges
 * resume from their saved positions), tried each second while it cannot
 * be (another node DOWN: remove_why says why); forgotten when the node is
 * no longer LEAVING (removed by another node meanwhile, or it came back). */
static void remove_take_up(stream *s)
{
    struct stream_state st;
    stream__state(s, &st);
    const char *name = st.removing;
    uint64_t now = stream__now(s);
    const ring *r = stream__ring(s);
    if (!name[0] || !r || s->h.ring_stale(s->h.arg) || now < s->remove_try_ms)
        return;
    s->remove_try_ms = now + 1000;
    if (!is_leaving(r, name)) {
        SLOG(s, INFO, "removenode.forgotten",
             "node=%s note=\"no longer LEAVING: removed by another node, or "
             "it came back\"",
             name);
        s->remove_why[0] = '\0';
        remove_state_save(s, "");
        return;
    }
    char target[sizeof(st.removing)];
    snprintf(target, sizeof(target), "%s", name);
    char *text = NULL;
    size_t len = 0;
    int rc = stream_remove_begin(s, target, &text, &len);
    if (rc == 0) {
        SLOG(s, INFO, "removenode.taken_up",
             "node=%s note=\"this node was removing it when it stopped\"",
             target);
        s->remove_why[0] = '\0';
    } else if (text && strcmp(text, s->remove_why) != 0) {
        SLOG(s, WARN, "removenode.waiting", "node=%s why=\"%s\"", target, text);
        snprintf(s->remove_why, sizeof(s->remove_why), "%s", text);
    }
    free(text);
}

/* ---- `ringkv abort` ------------------------------------------------------ */

/* Stop this node's decommission: leaving=0 persisted before the announce
 * (as leaving=1 is before LEAVING), then NORMAL under a new epoch; every
 * node drops its pending ring (node/ring_view.c) and writes go to the old
 * replicas only. The sessions stop where they are; those with a request or a
 * scan in flight end when it comes back (sess_fail), and the structure is freed
 * only then (drop_ended), as a position job may also still run. */
static int leave_abort(stream *s, char *msg, size_t cap)
{
    struct stream_leave *lv = s->leave;
    uint64_t epoch = 0;
    int rc = leaving_announce(s, false, STREAM_ANNOUNCE_NORMAL, &epoch);
    if (rc < 0) {
        snprintf(msg, cap, "cannot announce NORMAL again: %s", rk_strerror(rc));
        return rc;
    }
    lv->aborted = true;
    lv->by_operator = true;
    lv->aborted_epoch = epoch;
    size_t done = 0;
    for (size_t i = 0; i < lv->ns; i++)
        done += lv->sess[i].state == L_DONE;
    SLOG(s, WARN, "leave.aborted",
         "epoch=%llu ranges_done=%zu ranges=%zu keys=%llu bytes=%llu "
         "in_flight=%zu note=\"`ringkv abort`: NORMAL again\"",
         (unsigned long long)epoch, done, lv->ns, (unsigned long long)lv->keys,
         (unsigned long long)lv->bytes, lv->busy);
    s->h.ring_rebuild(s->h.arg);
    leave_save(s); /* the positions go (or at the next tick) */
    snprintf(msg, cap,
             "%s's decommission aborted: announced NORMAL again (ring epoch "
             "%llu); it keeps serving its ranges. %zu of %zu ranges had been "
             "pushed: the nodes that received them drop that data at their "
             "next cleanup.",
             s->cfg.node_name, (unsigned long long)epoch, done, lv->ns);
    return 0;
}

/* Stop the removal this node drives: the target NORMAL again on its
 * behalf (a new epoch; it was NORMAL before, or LEAVING by its own word
 * when it died decommissioning, and then its restart announces LEAVING
 * again), then as when it comes back (remove_stop). */
static int remove_abort(stream *s, char *msg, size_t cap)
{
    struct stream_leave *lv = s->leave;
    uint64_t epoch = 0;
    int rc =
        s->h.announce(s->h.arg, lv->target, STREAM_ANNOUNCE_NORMAL, &epoch);
    if (rc < 0) {
        snprintf(msg, cap, "cannot announce %s NORMAL again: %s", lv->target,
                 rk_strerror(rc));
        return rc;
    }
    lv->by_operator = true;
    lv->aborted_epoch = epoch;
    remove_stop(s, "`ringkv abort`: announced NORMAL again on its behalf");
    s->h.ring_rebuild(s->h.arg);
    leave_save(s);
    snprintf(msg, cap,
             "removal of %s aborted: announced it NORMAL again on its behalf "
             "(ring epoch %llu); nothing was removed. The nodes that received "
             "copies of its ranges drop them at their next cleanup.",
             lv->target, (unsigned long long)epoch);
    return 0;
}

/* A removal this node drove, cut short by a restart and not taken up
 * again yet (removing= in node.state): forgotten, its target NORMAL again
 * if it is still LEAVING. Its positions stay: named by the epoch of its
 * plan, no later removal reads them. */
static int remove_forget(stream *s, char *msg, size_t cap)
{
    struct stream_state st;
    stream__state(s, &st);
    char name[sizeof(st.removing)];
    snprintf(name, sizeof(name), "%s", st.removing);
    int rc = stream_ring_ready(s, msg, cap);
    if (rc < 0)
        return rc;
    uint64_t epoch = 0;
    const ring *r = stream__ring(s);
    if (r && is_leaving(r, name)) {
        rc = s->h.announce(s->h.arg, name, STREAM_ANNOUNCE_NORMAL, &epoch);
        if (rc < 0) {
            snprintf(msg, cap, "cannot announce %s NORMAL again: %s", name,
                     rk_strerror(rc));
            return rc;
        }
    }
    remove_state_save(s, "");
    s->remove_why[0] = '\0';
    SLOG(s, WARN, "removenode.aborted",
         "node=%s epoch=%llu note=\"`ringkv abort` before it was taken up "
         "again after a restart\"",
         name, (unsigned long long)epoch);
    if (epoch)
        s->h.ring_rebuild(s->h.arg);
    snprintf(msg, cap,
             "removal of %s aborted (it was to be taken up again after a "
             "restart of %s)%s; nothing was removed.",
             name, s->cfg.node_name,
             epoch ? ": announced it NORMAL again on its behalf" : "");
    return 0;
}

int stream_move_abort(stream *s, char *msg, size_t cap)
{
    int rc = RK_EBADREQ;
    struct stream_leave *lv = s->leave;
    struct stream_state st;
    stream__state(s, &st);
    if (lv && lv->aborted) {
        snprintf(msg, cap,
                 "nothing to abort on %s: the %s of %s was aborted already",
                 s->cfg.node_name, lv->relay ? "removal" : "decommission",
                 lv->target);
    } else if (lv && !lv->relay && lv->left) {
        snprintf(msg, cap,
                 "%s has announced LEFT: its decommission is over and cannot "
                 "be undone; it stops in a few seconds",
                 s->cfg.node_name);
    } else if (lv && lv->left) {
        snprintf(msg, cap,
                 "nothing to abort on %s: the removal of %s is over (REMOVED)",
                 s->cfg.node_name, lv->target);
    } else if (lv) {
        rc = lv->relay ? remove_abort(s, msg, cap) : leave_abort(s, msg, cap);
    } else if (st.removing[0]) {
        rc = remove_forget(s, msg, cap);
    } else {
        snprintf(msg, cap,
                 "nothing to abort on %s: no decommission, removenode or "
                 "join is running there",
                 s->cfg.node_name);
    }
    return rc;
}

/* ---- the gaining side --------------------------------------------------- */

/* Whether `name` is a replica of token t in ring r (NULL: no). */
static bool replicates(const ring *r, const char *name, uint64_t t)
{
    uint32_t self = r ? ring_node_find(r, name) : RING_NONE;
    uint32_t rep[RING_MAX_REPLICAS];
    size_t nr =
        self == RING_NONE ? 0 : ring_replicas(r, t, rep, RING_MAX_REPLICAS);
    for (size_t k = 0; k < nr && k < RING_MAX_REPLICAS; k++)
        if (rep[k] == self)
            return true;
    return false;
}

/* Commit the items of arc rg, which this node must replicate in its
 * pending ring (a leave's push) or its ring (a repair's), each key inside
 * rg (stream_items_commit). Without calling cb: RK_ESTALE (no pending
 * ring: it has not heard of the leave yet), RK_EBADREQ (not its arc), and
 * stream_items_commit's errors. */
static int ingest_items(stream *s,
                        struct ring_range rg,
                        struct rk_slice items,
                        stream_items_cb cb,
                        void *arg)
{
    const ring *pending = stream__ring_pending(s);
    if (!replicates(pending, s->cfg.node_name, rg.end) &&
        !replicates(stream__ring(s), s->cfg.node_name, rg.end))
        return pending ? RK_EBADREQ : RK_ESTALE;
    return stream_items_commit(s, rg, items, cb, arg);
}

struct push_reply {
    stream *s;
    void *c;
    uint64_t id;
};

static void
on_push_committed(void *arg, int status, uint32_t keys, uint64_t bytes)
{
    struct push_reply *r = arg;
    stream *s = r->s;
    count_in(s, status, keys, bytes);
    stream__reply_ack(s, r->c, r->id, status);
    s->h.conn_unref(s->h.arg, r->c);
    free(r);
}

void stream_push_serve(stream *s, void *c, uint64_t id, struct rk_slice f)
{
    struct rpc_stream_chunk ch;
    int rc = rpc_stream_push_decode(&ch, f);
    if (rc == 0 && ch.status != 0)
        rc = RK_EBADREQ;
    if (rc < 0) {
        s->h.bad_frame(s->h.arg);
        stream__reply_ack(s, c, id, rc);
        return;
    }
    struct push_reply *r = malloc(sizeof(*r));
    if (!r) {
        stream__reply_ack(s, c, id, -ENOMEM);
        return;
    }
    *r = (struct push_reply){.s = s, .c = c, .id = id};
    s->h.conn_ref(s->h.arg, c);
    rc = ingest_items(s, (struct ring_range){ch.next.start, ch.next.end},
                      ch.items, on_push_committed, r);
    if (rc < 0) {
        if (rc == RK_EPROTO)
            s->h.bad_frame(s->h.arg);
        on_push_committed(r, rc, 0, 0);
    }
}
