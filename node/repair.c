/*
 * repair.c - `ringkv repair`: make this node's replicas agree with the
 * other replicas of every arc it replicates, moving only what differs
 * (shared/DESIGN.md, "Repair").
 *
 * A node that joined by streaming runs one by itself once the ring has
 * settled (node__repair_after_join, repair_after_join): it streamed each
 * range from one replica, and a write that replica missed while the
 * coordinators did not know of the join yet is on the others only.
 * node.state's repair_due keeps it due across restarts until one ends
 * (a stop or a ring change keeps it due).
 *
 * Read repair and hints cover most divergence; a replica that was down
 * longer than the hint window, or lost writes some other way, is brought
 * back by repair, which must also run within gc_grace_seconds so that a
 * delete is not resurrected by a replica that missed it.
 *
 * The node asked (node__repair_begin) takes, on the loop, every arc of its
 * ring it replicates, and for each, each other replica of it in turn: one
 * comparison. A comparison splits the arc into 2^depth leaves
 * (repair/merkle.h: equal widths, the same split on every node), depth
 * chosen from the keys of the local range holding the arc (about
 * MERKLE_LEAF_KEYS keys a leaf, at most MERKLE_MAX_DEPTH), computes its own
 * leaf hashes on the libuv pool while the replica computes its own
 * (RPC_MSG_MERKLE, answered by node__repair_serve below), and compares
 * them. Each run of differing leaves is one sub-arc, exchanged both ways:
 * pulled from the replica with RPC_MSG_STREAM (the join's donor scan) and
 * committed here through the group commit, then read here (the same scan)
 * and pushed to the replica with RPC_MSG_STREAM_PUSH, which commits it
 * (leave.c's ingest) -- except the records the pull just brought (a
 * fingerprint of key and version each, 8 bytes, kept for the sub-arc), so
 * that a stale replica's repair does not send back what it fetched. Records
 * merge last-write-wins on both sides, tombstones included, so afterwards both
 * hold the newest version of every key of the sub-arc. Bytes moved are
 * proportional to the differing leaves, not to the range.
 *
 * The leaves are compared as one flat list (8 bytes a leaf, at most 128
 * KiB a comparison) rather than a tree walked level by level: the list
 * costs one round trip, and the scan that computes it costs the same at
 * any depth. The leaf plan, the depth, the leaf hashes and the runs of
 * differing leaves are pure computation, in repair/merkle.c; this file is
 * the session around them: the store scan, the RPCs, the transfers.
 *
 * One comparison at a time; a step refused OVERLOADED (the replica's scans
 * busy) or RING_STALE (its ring not yet the same as this node's) is tried
 * again after REPAIR_RETRY_MS, any other failure ends that
 * comparison (counted, and the run ends "done with failures"). Repair
 * refuses to start while a node joins or leaves, and stops if the ring
 * changes under it (run it again). A replica that is DOWN fails its
 * comparisons: repair needs every replica of an arc to be UP to vouch for
 * it. Progress is in `ringkv netstats`; counters ringkv_repair_*.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "node/log.h"
#include "node/node_internal.h"
#include "repair/merkle.h"

_Static_assert(MERKLE_MAX_DEPTH == RPC_MERKLE_MAX_DEPTH,
               "the leaves a replica is asked for are the leaves planned");

#define REPAIR_TIMEOUT_MS 30000 /* per request */
#define REPAIR_RETRY_MS   200   /* after OVERLOADED or RING_STALE */
#define REPAIR_RETRIES    50    /* per comparison: 10 s of them */
#define REPAIR_SERVE_JOBS 2     /* leaf computations a node runs for others */
#define REPAIR_BUDGET_MS  100   /* waiting for stream_throughput_mb */

struct repair_cmp {
    struct ring_range arc;
    char peer[GOSSIP_NAME_MAX + 1];
};

enum rphase { P_MERKLE = 0, P_PULL, P_PUSH };

struct node_repair {
    node *n;
    struct repair_cmp *c;
    size_t nc, cur;
    bool running;
    bool after_join; /* started by node__repair_after_join */
    uint64_t epoch;  /* the ring's at the start */
    uint64_t start_ms, end_ms;
    int first_err;
    char first_err_at[96];
    size_t failed, differing_cmps;
    /* the current comparison */
    enum rphase phase;
    unsigned depth;
    uint64_t *mine, *theirs; /* 2^depth leaf hashes each */
    bool have_mine, have_theirs;
    bool work_busy, rpc_busy; /* the two halves of the leaf comparison */
    int merkle_err;           /* the local computation's (the pool thread's) */
    int peer_err;             /* the replica's answer's */
    uv_work_t w;
    struct ring_range *diff; /* runs of differing leaves */
    size_t ndiff, dcur;
    /* where the next chunk of the current run starts; where the chunk
     * being pushed ends */
    struct rpc_stream_pos at, next;
    uint8_t at_last[RPC_STREAM_LAST_MAX], next_last[RPC_STREAM_LAST_MAX];
    struct rpc_buf msg;
    bool budget; /* a chunk's stream budget taken, not yet settled */
    /* what the current sub-arc's pull brought (key and version
     * fingerprints, sorted for the push): not pushed back */
    uint64_t *got;
    size_t ngot, capgot;
    uint64_t chunk_keys, chunk_bytes;
    uv_timer_t retry;
    bool retry_open;
    bool retry_closing; /* closed at the end; not reusable until then */
    int retries;        /* the current comparison's */
    int retry_err;      /* what its last retried step was answered (0: the
                           retry timer waits for the stream budget) */
    /* totals */
    uint64_t retried; /* steps asked again (OVERLOADED, RING_STALE) */
    uint64_t leaves, leaves_diff;
    uint64_t keys_in, bytes_in, keys_out, bytes_out;
    struct node_stall stall; /* a comparison begun, a chunk moved */
};

struct merkle_job {
    uv_work_t w;
    node *n;
    net_conn *c;
    uint64_t id;
    struct ring_range arc;
    unsigned depth;
    uint64_t *leaves;
    uint64_t keys;
    int status;
};

static void cmp_step(struct node_repair *rp);
static void cmp_start(struct node_repair *rp);
static void budget_settle(struct node_repair *rp, uint64_t moved);

/* The current comparison is over: the next one. */
static void cmp_next(struct node_repair *rp)
{
    rp->cur++;
    cmp_start(rp);
}

static int leaves_add(const struct store_item *it, void *arg)
{
    return merkle_build_add(arg, it->token, it->key, it->rec);
}

/* The 2^depth leaf hashes of arc (all of it local) into leaves[], and the
 * entries hashed into *keys (may be NULL): one scan of the arc on the pool
 * thread. RK_EBADREQ for a depth merkle_depth_fit does not accept,
 * RK_ENOTFOUND if part of the arc is not local. */
static int local_leaves(uint64_t *leaves,
                        uint64_t *keys,
                        store *s,
                        struct ring_range arc,
                        unsigned depth)
{
    merkle_build *b = NULL;
    int rc = merkle_build_new(&b, leaves, arc, depth);
    if (rc < 0)
        return rc;
    struct store_scan sc;
    store_scan_init(&sc, (struct store_range){arc.start, arc.end});
    while (rc == 0 && !sc.done)
        rc = store_scan_next(s, &sc, 4096, (size_t)16 << 20, leaves_add, b);
    uint64_t n = merkle_build_finish(b);
    if (rc == 0 && keys)
        *keys = n;
    merkle_build_free(b);
    return rc;
}

/* ---- the replica's side: leaf hashes for another node ----------------- */

static void serve_work(uv_work_t *w)
{
    struct merkle_job *j = w->data;
    j->status =
        local_leaves(j->leaves, &j->keys, j->n->store, j->arc, j->depth);
}

static void serve_reply(node *n,
                        net_conn *c,
                        uint64_t id,
                        int status,
                        unsigned depth,
                        uint64_t keys,
                        const uint64_t *leaves)
{
    size_t len = status == 0 ? (size_t)8 << depth : 0;
    uint8_t *bytes = len ? malloc(len) : NULL;
    if (len && !bytes) {
        status = -ENOMEM;
        len = 0;
    }
    if (len)
        merkle_leaves_put(bytes, leaves, len / 8);
    struct rpc_merkle_resp r = {.status = status,
                                .hlc = n->hlc.last,
                                .depth = depth,
                                .keys = status == 0 ? keys : 0,
                                .leaves = RK_SLICE(bytes, len)};
    struct rpc_buf b = RPC_BUF_INIT;
    if (rpc_merkle_resp_encode(&b, &r) == 0)
        net_conn_reply(c, id, RK_SLICE(b.data, b.len));
    rpc_buf_free(&b);
    free(bytes);
}

static void serve_after(uv_work_t *w, int status)
{
    struct merkle_job *j = w->data;
    node *n = j->n;
    (void)status;
    n->repair_jobs--;
    serve_reply(n, j->c, j->id, j->status, j->depth, j->keys, j->leaves);
    net_conn_unref(j->c);
    free(j->leaves);
    free(j);
    n->pending_closes--;
    node__stop_progress(n);
}

void node__repair_serve(node *n, net_conn *c, uint64_t id, struct rk_slice f)
{
    struct rpc_merkle_req rq = {0};
    int rc = rpc_merkle_req_decode(&rq, f);
    struct ring_range arc = {rq.start, rq.end};
    if (rc == 0 && merkle_depth_fit(arc, rq.depth) != rq.depth)
        rc = RK_EBADREQ;
    if (rc < 0) {
        n->stats.internode_bad++;
        serve_reply(n, c, id, rc, 0, 0, NULL);
        return;
    }
    if (!n->store || n->stopping)
        rc = RK_ECLOSED;
    else if (!n->ring || n->ring_stale || rq.epoch != ring_epoch(n->ring))
        rc = RK_ESTALE; /* the two rings differ: so may the replicas */
    else if (n->repair_jobs >= REPAIR_SERVE_JOBS)
        rc = RK_EOVERLOADED;
    struct merkle_job *j = NULL;
    if (rc == 0) {
        j = calloc(1, sizeof(*j));
        if (j)
            j->leaves = malloc(sizeof(uint64_t) << rq.depth);
        if (!j || !j->leaves)
            rc = -ENOMEM;
    }
    if (rc == 0) {
        j->w.data = j;
        j->n = n;
        j->c = c;
        j->id = id;
        j->arc = arc;
        j->depth = rq.depth;
        rc = uv_queue_work(n->loop, &j->w, serve_work, serve_after);
    }
    if (rc < 0) {
        if (j)
            free(j->leaves);
        free(j);
        serve_reply(n, c, id, rc, 0, 0, NULL);
        return;
    }
    net_conn_ref(c);
    n->repair_jobs++;
    n->pending_closes++;
}

/* ---- the repairing side ------------------------------------------------ */

static const char *phase_name(enum rphase p)
{
    return p == P_MERKLE ? "comparing" : p == P_PULL ? "pulling" : "pushing";
}

/* The current comparison failed: note it and go on with the next. */
static void cmp_fail(struct node_repair *rp, const char *why, int err)
{
    const struct repair_cmp *c = &rp->c[rp->cur];
    budget_settle(rp, 0);
    rp->failed++;
    if (!rp->first_err) {
        rp->first_err = err ? err : RK_EUNAVAILABLE;
        snprintf(rp->first_err_at, sizeof(rp->first_err_at), "%s with %s", why,
                 c->peer);
    }
    LOG(WARN, "repair.compare_fail",
        "range=(%llu,%llu] peer=%s phase=%s why=\"%s\" error=\"%s\"",
        (unsigned long long)c->arc.start, (unsigned long long)c->arc.end,
        c->peer, phase_name(rp->phase), why, rk_strerror(err));
    cmp_next(rp);
}

/* A step refused OVERLOADED (the replica's scans busy) or RING_STALE (its
 * ring a gossip round behind or ahead: if ahead, this node's ring changes
 * too and the run ends): the same step again shortly, a few times. */
static void on_retry(uv_timer_t *t)
{
    node *n = t->data;
    cmp_step(n->repair);
}

static bool retry_later(struct node_repair *rp, int err)
{
    if ((err != RK_EOVERLOADED && err != RK_ESTALE) ||
        rp->retries >= REPAIR_RETRIES || rp->n->stopping || !rp->retry_open)
        return false;
    if (rp->retries++ == 0) { /* once a comparison: then netstats says */
        const struct repair_cmp *c = &rp->c[rp->cur];
        LOG(INFO, "repair.retry",
            "range=(%llu,%llu] peer=%s phase=%s error=%s every_ms=%d "
            "at_most=%d",
            (unsigned long long)c->arc.start, (unsigned long long)c->arc.end,
            c->peer, phase_name(rp->phase), rk_errname(err), REPAIR_RETRY_MS,
            REPAIR_RETRIES);
    }
    rp->retried++;
    rp->retry_err = err;
    char peer[GOSSIP_NAME_MAX + 8];
    snprintf(peer, sizeof(peer), "with %s", rp->c[rp->cur].peer);
    node__stall_fail(&rp->stall, phase_name(rp->phase), peer,
                     &rp->c[rp->cur].arc, err);
    budget_settle(rp, 0);
    uv_timer_start(&rp->retry, on_retry, REPAIR_RETRY_MS, 0);
    return true;
}

static const struct node_peer *cmp_peer(struct node_repair *rp)
{
    const struct node_peer *p =
        node__peer_by_name(rp->n, rp->c[rp->cur].peer, NULL);
    return p && p->up && !p->self && p->iaddr[0] ? p : NULL;
}

/* The chunk's budget back, less what it moved (stream_throughput_mb). */
static void budget_settle(struct node_repair *rp, uint64_t moved)
{
    if (rp->budget)
        node__stream_budget_settle(rp->n, moved);
    rp->budget = false;
    if (moved)
        node__stall_progress(rp->n, &rp->stall);
}

static void set_at(struct node_repair *rp, struct ring_range r)
{
    rp->at = (struct rpc_stream_pos){.start = r.start, .end = r.end};
}

/* Both leaf lists are in: the runs of leaves that differ. */
static void compare(struct node_repair *rp)
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
    LOG(INFO, "repair.differ",
        "range=(%llu,%llu] peer=%s leaves=%zu differing=%zu runs=%zu",
        (unsigned long long)c->arc.start, (unsigned long long)c->arc.end,
        c->peer, nl, nd, rp->ndiff);
    rp->phase = P_PULL;
    set_at(rp, rp->diff[0]);
    cmp_step(rp);
}

static void merkle_work(uv_work_t *w)
{
    struct node_repair *rp = w->data;
    const struct repair_cmp *c = &rp->c[rp->cur];
    rp->merkle_err =
        local_leaves(rp->mine, NULL, rp->n->store, c->arc, rp->depth);
}

/* Both halves of the leaf comparison are back (or one failed): compare,
 * ask the replica again (OVERLOADED), or fail. Nothing moves on while
 * either is out, so no late answer lands in the next comparison. */
static void merkle_join(struct node_repair *rp)
{
    if (rp->work_busy || rp->rpc_busy)
        return;
    if (rp->n->stopping)
        cmp_fail(rp, "stopping", RK_ECLOSED);
    else if (rp->merkle_err < 0)
        cmp_fail(rp, "local leaves", rp->merkle_err);
    else if (rp->peer_err < 0) {
        if (!retry_later(rp, rp->peer_err))
            cmp_fail(rp, "the replica's leaves", rp->peer_err);
    } else if (rp->have_mine && rp->have_theirs)
        compare(rp);
}

static void merkle_after(uv_work_t *w, int status)
{
    struct node_repair *rp = w->data;
    node *n = rp->n;
    (void)status;
    rp->work_busy = false;
    rp->have_mine = rp->merkle_err == 0;
    n->pending_closes--;
    merkle_join(rp);
    node__stop_progress(n);
}

static void on_merkle(void *arg, int status, struct rk_slice resp)
{
    struct node_repair *rp = arg;
    struct rpc_merkle_resp r;
    rp->rpc_busy = false;
    if (status == 0) {
        status = rpc_merkle_resp_decode(&r, resp);
        if (status < 0)
            rp->n->stats.internode_bad++;
        else if (r.status < 0)
            status = r.status;
        else if (r.depth != rp->depth)
            status = RK_EPROTO;
    }
    if (status == 0) /* the decode checked the length: it cannot fail */
        status =
            merkle_leaves_get(rp->theirs, (size_t)1 << rp->depth, r.leaves);
    rp->peer_err = status;
    if (status == 0)
        rp->have_theirs = true;
    merkle_join(rp);
}

/* The leaves of the current comparison: here on the pool (unless done
 * already: an OVERLOADED replica asked again), there by RPC. */
static void merkle_start(struct node_repair *rp)
{
    node *n = rp->n;
    const struct repair_cmp *c = &rp->c[rp->cur];
    struct ring_range arc = c->arc;
    const struct node_peer *p = cmp_peer(rp);
    if (!p) {
        cmp_fail(rp, "the replica is not UP", RK_EUNAVAILABLE);
        return;
    }
    if (!rp->have_mine) {
        rp->merkle_err = 0;
        rp->w.data = rp;
        int rc = uv_queue_work(n->loop, &rp->w, merkle_work, merkle_after);
        if (rc < 0) {
            cmp_fail(rp, "local leaves", rc);
            return;
        }
        rp->work_busy = true;
        n->pending_closes++;
    }
    struct rpc_merkle_req rq = {.epoch = rp->epoch,
                                .start = arc.start,
                                .end = arc.end,
                                .depth = rp->depth};
    rp->peer_err = 0;
    rp->rpc_busy = true;
    rpc_buf_reset(&rp->msg);
    int rc = rpc_merkle_req_encode(&rp->msg, &rq);
    if (rc == 0)
        rc = node__rpc_addr(n, p->iaddr, &rp->msg, REPAIR_TIMEOUT_MS, 0,
                            on_merkle, rp);
    if (rc < 0)
        on_merkle(rp, rc, RK_SLICE(NULL, 0));
}

/* The current sub-arc is through one phase: the next phase or sub-arc. */
static void run_done(struct node_repair *rp)
{
    if (rp->phase == P_PULL) {
        rp->phase = P_PUSH;
        /* a first pull that brought nothing leaves got NULL, and qsort's
         * base must not be NULL even for no elements (UBSan aborted the
         * node: regression repair_first_pull_empty) */
        if (rp->ngot > 1)
            qsort(rp->got, rp->ngot, sizeof(*rp->got), rk_u64_cmp);
    } else {
        rp->phase = P_PULL;
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
    struct node_repair *rp = arg;
    if (status < 0) {
        cmp_fail(rp, "commit", status);
        return;
    }
    budget_settle(rp, bytes);
    rp->keys_in += keys;
    rp->bytes_in += bytes;
    rp->n->stats.repair_in_keys += keys;
    rp->n->stats.repair_in_bytes += bytes;
    if (rp->at.done)
        run_done(rp);
    else
        cmp_step(rp);
}

/* Note what a pulled chunk brings (not to be pushed back): false if out
 * of memory. */
static bool note_got(struct node_repair *rp, struct rk_slice items)
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
        rp->got[rp->ngot++] = node__record_fingerprint(key, &rec);
    }
    return true;
}

static void on_pull_chunk(void *arg, int status, struct rk_slice resp)
{
    struct node_repair *rp = arg;
    node *n = rp->n;
    struct rpc_stream_chunk ch;
    if (status == 0) {
        status = rpc_stream_chunk_decode(&ch, resp);
        if (status < 0)
            n->stats.internode_bad++;
        else if (ch.status < 0)
            status = ch.status;
        else if (ch.next.start != rp->at.start || ch.next.end != rp->at.end)
            status = RK_EPROTO;
    }
    if (status == 0 && !note_got(rp, ch.items))
        status = -ENOMEM;
    if (status == 0) {
        struct ring_range arc = {rp->at.start, rp->at.end};
        node__stream_pos_copy(&rp->at, rp->at_last, &ch.next);
        status = node__commit_items(n, arc, ch.items, on_pulled, rp);
    }
    if (status < 0 && !retry_later(rp, status))
        cmp_fail(rp, "pull", status);
}

/* The chunk scanned last is in place on the replica (or was empty). */
static void push_done(struct node_repair *rp)
{
    node__stream_pos_copy(&rp->at, rp->at_last, &rp->next);
    budget_settle(rp, rp->chunk_bytes);
    rp->keys_out += rp->chunk_keys;
    rp->bytes_out += rp->chunk_bytes;
    rp->n->stats.repair_out_keys += rp->chunk_keys;
    rp->n->stats.repair_out_bytes += rp->chunk_bytes;
    if (rp->at.done)
        run_done(rp);
    else
        cmp_step(rp);
}

static void on_pushed(void *arg, int status, struct rk_slice resp)
{
    struct node_repair *rp = arg;
    status = node__write_ack_status(rp->n, status, resp);
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
    struct node_repair *rp = arg;
    node *n = rp->n;
    if (status == 0 && n->stopping)
        status = RK_ECLOSED;
    if (status < 0) {
        if (!retry_later(rp, status))
            cmp_fail(rp, "scan", status);
        return;
    }
    node__stream_pos_copy(&rp->next, rp->next_last, &ch->next);
    rp->chunk_keys = ch->count;
    rp->chunk_bytes = kv_bytes;
    if (ch->count == 0) { /* nothing (more) to send */
        push_done(rp);
        return;
    }
    struct rpc_buf view = {.data = (uint8_t *)frame.p, .len = frame.len};
    const struct node_peer *p = cmp_peer(rp);
    int rc = p ? node__rpc_addr(n, p->iaddr, &view, REPAIR_TIMEOUT_MS, 0,
                                on_pushed, rp)
               : RK_EUNAVAILABLE;
    if (rc < 0)
        cmp_fail(rp, "push", rc);
}

/* The current step of the current comparison, from rp->at. */
static void cmp_step(struct node_repair *rp)
{
    node *n = rp->n;
    if (n->stopping) {
        cmp_fail(rp, "stopping", RK_ECLOSED);
        return;
    }
    if (rp->phase == P_MERKLE) {
        merkle_start(rp);
        return;
    }
    const struct node_peer *p = cmp_peer(rp);
    if (!p) {
        cmp_fail(rp, "the replica is not UP", RK_EUNAVAILABLE);
        return;
    }
    /* a chunk at a time within stream_throughput_mb, as joins and leaves */
    if (!rp->budget) {
        if (!node__stream_budget_take(n)) {
            rp->retry_err = 0; /* netstats: waiting for the budget */
            uv_timer_start(&rp->retry, on_retry, REPAIR_BUDGET_MS, 0);
            return;
        }
        rp->budget = true;
    }
    int rc;
    if (rp->phase == P_PULL) {
        struct rpc_stream_req rq = {
            .epoch = rp->epoch, .at = rp->at, .max_bytes = NODE_STREAM_CHUNK};
        rpc_buf_reset(&rp->msg);
        rc = rpc_stream_req_encode(&rp->msg, &rq);
        if (rc == 0)
            rc = node__rpc_addr(n, p->iaddr, &rp->msg, REPAIR_TIMEOUT_MS, 0,
                                on_pull_chunk, rp);
    } else {
        rc = node__stream_scan(n, &rp->at, NODE_STREAM_CHUNK, rp->got, rp->ngot,
                               on_push_scanned, rp);
    }
    if (rc < 0 && !retry_later(rp, rc))
        cmp_fail(rp, rp->phase == P_PULL ? "pull" : "scan", rc);
}

/* Depth for an arc (merkle_depth_choose), from the keys of the local range
 * holding it. */
static unsigned pick_depth(node *n, struct ring_range arc)
{
    struct store_range r;
    struct store_range_info info = {0};
    if (store_range_find(&r, n->store, arc.end) != 0 ||
        store_range_info(&info, n->store, r) != 0)
        return merkle_depth_choose(arc, arc, 0);
    return merkle_depth_choose(arc, (struct ring_range){r.start, r.end},
                               info.keys);
}

static void retry_closed(uv_handle_t *h)
{
    node *n = h->data;
    n->repair->retry_closing = false;
    n->pending_closes--;
    node__stop_progress(n);
}

/* The repair after a join has run (or is off): no longer due. */
static void repair_due_clear(node *n)
{
    n->st.repair_due = 0;
    node__state_save(n);
}

static void repair_end(struct node_repair *rp, const char *why)
{
    node *n = rp->n;
    rp->running = false;
    rp->end_ms = node__mono_ms(n);
    free(rp->mine);
    free(rp->theirs);
    free(rp->diff);
    rp->mine = NULL;
    rp->theirs = NULL;
    rp->diff = NULL;
    if (rp->retry_open) {
        rp->retry_open = false;
        rp->retry_closing = true;
        uv_close((uv_handle_t *)&rp->retry, retry_closed);
    }
#define REPAIR_DONE_FMT                                               \
    "comparisons=%zu failed=%zu differing=%zu leaves=%llu "           \
    "leaves_differing=%llu keys_in=%llu keys_out=%llu bytes_in=%llu " \
    "bytes_out=%llu retried=%llu ms=%llu why=%s"
#define REPAIR_DONE_ARGS                                                      \
    rp->nc, rp->failed, rp->differing_cmps, (unsigned long long)rp->leaves,   \
        (unsigned long long)rp->leaves_diff, (unsigned long long)rp->keys_in, \
        (unsigned long long)rp->keys_out, (unsigned long long)rp->bytes_in,   \
        (unsigned long long)rp->bytes_out, (unsigned long long)rp->retried,   \
        (unsigned long long)(rp->end_ms - rp->start_ms), why ? why : "-"
    if (rp->failed)
        LOG(WARN, "repair.done", REPAIR_DONE_FMT, REPAIR_DONE_ARGS);
    else
        LOG(INFO, "repair.done", REPAIR_DONE_FMT, REPAIR_DONE_ARGS);
#undef REPAIR_DONE_FMT
#undef REPAIR_DONE_ARGS
    /* a repair after a join cut short by a stop or a ring change stays
     * due (after the restart, or once the ring settles) */
    bool cut_short = n->stopping || !n->ring || n->ring_stale ||
                     ring_epoch(n->ring) != rp->epoch;
    if (rp->after_join && !cut_short) {
        if (rp->failed)
            LOG(WARN, "repair.after_join_incomplete",
                "failed=%zu note=\"some of the ranges it streamed in were "
                "not compared with every other replica; run `ringkv repair` "
                "on it once they are all UP\"",
                rp->failed);
        repair_due_clear(n);
    }
    node__stop_progress(n);
}

/* Comparison rp->cur (or the end, past the last). */
static void cmp_start(struct node_repair *rp);

void node__repair_after_join(node *n)
{
    if (n->repair)
        node__stall_check(n, &n->repair->stall, n->repair->running);
    if (!n->st.repair_due || n->stopping)
        return;
    uint64_t now = node__mono_ms(n);
    if (!n->cfg.repair_after_join) { /* turned off since the join */
        repair_due_clear(n);
        return;
    }
    if (n->raj_since_ms == 0) /* restarted since the join */
        n->raj_since_ms = now ? now : 1;
    /* every node has heard of the ring with this node NORMAL */
    uint64_t wait = 5 * (uint64_t)n->cfg.gossip_interval_ms;
    if (now - n->raj_since_ms < (wait > 3000 ? wait : 3000))
        return;
    char *t = NULL;
    size_t len = 0;
    int rc = node__repair_begin(n, NULL, &t, &len);
    if (rc == 0) {
        LOG(INFO, "repair.after_join",
            "comparisons=%zu note=\"each range streamed in from one replica "
            "is compared with the others, which may hold writes that one "
            "missed\"",
            n->repair->nc);
        if (n->repair->running)
            n->repair->after_join = true; /* repair_end clears the due */
        else /* over already: no other replica to compare with (RF 1) */
            repair_due_clear(n);
    } else { /* not now (a node moving, a repair running): next tick */
        LOG(DEBUG, "repair.after_join_waiting", "why=\"%s\"", t ? t : "");
    }
    free(t);
}

static void cmp_start(struct node_repair *rp)
{
    node *n = rp->n;
    while (rp->cur < rp->nc) {
        if (n->stopping || !n->ring || n->ring_stale ||
            ring_epoch(n->ring) != rp->epoch) {
            rp->failed += rp->nc - rp->cur;
            if (!rp->first_err) {
                rp->first_err = n->stopping ? RK_ECLOSED : RK_ESTALE;
                snprintf(rp->first_err_at, sizeof(rp->first_err_at), "%s",
                         n->stopping ? "the node stopped"
                                     : "the ring changed; run repair again");
            }
            rp->cur = rp->nc;
            repair_end(rp, n->stopping ? "stopping" : "ring_changed");
            return;
        }
        const struct repair_cmp *c = &rp->c[rp->cur];
        node__stall_progress(n, &rp->stall);
        rp->phase = P_MERKLE;
        rp->ngot = 0;
        rp->have_mine = rp->have_theirs = false;
        rp->merkle_err = rp->peer_err = 0;
        rp->retries = 0;
        rp->depth = pick_depth(n, c->arc);
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

static int repair_check(node *n, uint32_t *self, char *why, size_t cap)
{
    if (n->repair && (n->repair->running || n->repair->retry_closing)) {
        snprintf(why, cap, "a repair is already running on %.64s",
                 n->cfg.node_name);
        return RK_EBADREQ;
    }
    return node__ring_settled(n, "repair", self, why, cap);
}

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

/* The comparisons: every arc of the ring this node replicates (or its
 * piece inside `only`), once per other replica of it. */
static int plan(node *n,
                uint32_t self,
                const struct ring_range *only,
                struct repair_cmp **out,
                size_t *nout)
{
    const ring *r = n->ring;
    size_t na = ring_token_count(r) + 1, nc = 0;
    struct ring_range *pc = calloc(na, sizeof(*pc));
    struct repair_cmp *c = calloc(na * RING_MAX_REPLICAS + 1, sizeof(*c));
    if (!c || !pc) {
        free(pc);
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
        for (size_t k = 0; mine && k < nr && k < RING_MAX_REPLICAS; k++) {
            struct ring_node_info ni;
            if (rep[k] == self || ring_node_get(r, &ni, rep[k]) < 0)
                continue;
            c[nc].arc = arc;
            snprintf(c[nc].peer, sizeof(c[nc].peer), "%s", ni.name);
            nc++;
        }
    }
    free(pc);
    *out = c;
    *nout = nc;
    return 0;
}

int node__repair_begin(node *n,
                       const struct ring_range *only,
                       char **text,
                       size_t *len)
{
    char msg[512];
    uint32_t self = RING_NONE;
    int rc = repair_check(n, &self, msg, sizeof(msg));
    struct node_repair *rp = n->repair;
    if (rc == 0 && !rp) {
        rp = n->repair = calloc(1, sizeof(*rp));
        if (!rp)
            rc = -ENOMEM;
    }
    struct repair_cmp *c = NULL;
    size_t nc = 0;
    if (rc == 0)
        rc = plan(n, self, only, &c, &nc);
    if (rc == 0) {
        free(rp->c);
        free(rp->got);
        rpc_buf_free(&rp->msg);
        *rp = (struct node_repair){.n = n,
                                   .c = c,
                                   .nc = nc,
                                   .running = true,
                                   .epoch = ring_epoch(n->ring),
                                   .start_ms = node__mono_ms(n),
                                   .msg = RPC_BUF_INIT};
        node__stall_start(n, &rp->stall, "repair", "repair");
        uv_timer_init(n->loop, &rp->retry);
        rp->retry.data = n;
        rp->retry_open = true;
        n->pending_closes++;
        LOG(INFO, "repair.start", "comparisons=%zu epoch=%llu", nc,
            (unsigned long long)rp->epoch);
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
            nc, n->cfg.node_name, what, (unsigned long long)rp->epoch);
        cmp_start(rp); /* the first comparison, or the end */
    } else if (rc == -ENOMEM) {
        snprintf(msg, sizeof(msg), "cannot start: %s", rk_strerror(rc));
    }
    *text = strdup(msg);
    if (!*text)
        return -ENOMEM;
    *len = strlen(*text);
    return rc;
}

void node__repair_text(node *n, FILE *f)
{
    const struct node_repair *rp = n->repair;
    if (!rp)
        return;
    if (rp->after_join)
        fprintf(f, "The repair a node runs after joining by streaming "
                   "(repair_after_join):\n");
    char in[32], out[32];
    node__human_bytes(in, sizeof(in), rp->bytes_in);
    node__human_bytes(out, sizeof(out), rp->bytes_out);
    if (rp->running) {
        const struct repair_cmp *c = &rp->c[rp->cur < rp->nc ? rp->cur : 0];
        fprintf(f,
                "Repair: running for %.1f s: comparison %zu of %zu (range "
                "(%llu,%llu] with %s, %s); %llu of %llu leaves differed; "
                "%llu keys (%s) pulled, %llu keys (%s) pushed",
                (double)(node__mono_ms(n) - rp->start_ms) / 1000, rp->cur + 1,
                rp->nc, (unsigned long long)c->arc.start,
                (unsigned long long)c->arc.end, c->peer, phase_name(rp->phase),
                (unsigned long long)rp->leaves_diff,
                (unsigned long long)rp->leaves, (unsigned long long)rp->keys_in,
                in, (unsigned long long)rp->keys_out, out);
        bool waiting = uv_is_active((const uv_handle_t *)&rp->retry);
        if (waiting && !rp->retry_err)
            fprintf(f, "; waiting for its share of stream_throughput_mb");
        else if (waiting)
            fprintf(f,
                    "; waiting: %s answered %s, asked again every %d ms (%d "
                    "of %d)",
                    c->peer, rk_errname(rp->retry_err), REPAIR_RETRY_MS,
                    rp->retries, REPAIR_RETRIES);
        fprintf(f, ".\n");
        node__stall_text(n, &rp->stall, f);
        return;
    }
    fprintf(f,
            "Repair: %s in %.1f s: %zu comparisons, %zu differed (%llu of "
            "%llu leaves); %llu keys (%s) pulled, %llu keys (%s) pushed",
            rp->failed ? "done with failures" : "done",
            (double)(rp->end_ms - rp->start_ms) / 1000, rp->nc,
            rp->differing_cmps, (unsigned long long)rp->leaves_diff,
            (unsigned long long)rp->leaves, (unsigned long long)rp->keys_in, in,
            (unsigned long long)rp->keys_out, out);
    if (rp->retried)
        fprintf(f,
                "; %llu step%s asked again (a replica busy or its ring behind)",
                (unsigned long long)rp->retried, rp->retried == 1 ? "" : "s");
    if (rp->failed)
        fprintf(f, "; %zu failed, the first: %s: %s", rp->failed,
                rp->first_err_at, rk_strerror(rp->first_err));
    fprintf(f, ".\n");
}

void node__repair_free(node *n)
{
    struct node_repair *rp = n->repair;
    if (!rp)
        return;
    free(rp->c);
    free(rp->mine);
    free(rp->theirs);
    free(rp->diff);
    free(rp->got);
    rpc_buf_free(&rp->msg);
    free(rp);
    n->repair = NULL;
}
