/*
 * serve.c - the replica's side of a repair: the leaf hashes of an arc for
 * another node's comparison (RPC_MSG_MERKLE), computed on the host's
 * thread pool, and the part's life cycle.
 *
 * A replica answers only for the ring the asker compares by: a request of
 * another epoch, or while this node knows its ring is behind, is answered
 * RING_STALE (the two rings differ, so may the replicas), and the asker
 * tries again shortly. At most REPAIR_SERVE_JOBS computations run for
 * others at a time; past that the answer is OVERLOADED, also retried: a
 * node that many others repair against at once keeps its pool for its
 * clients. The leaves are computed by one scan of the arc (host.scan)
 * feeding merkle_build, the same on both sides of a comparison.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "repair/merkle.h"
#include "repair/repair_internal.h"

_Static_assert(MERKLE_MAX_DEPTH == RPC_MERKLE_MAX_DEPTH,
               "the leaves a replica is asked for are the leaves planned");

/* ---- the part ----------------------------------------------------------- */

int repair_new(repair **out,
               const struct repair_host *host,
               const struct repair_options *opt)
{
    repair *r = calloc(1, sizeof(*r));
    if (!r)
        return -ENOMEM;
    r->h = *host;
    snprintf(r->node_name, sizeof(r->node_name), "%s",
             opt->node_name ? opt->node_name : "");
    r->after_join_on = opt->after_join;
    uint64_t wait = 5 * (uint64_t)opt->gossip_interval_ms;
    r->aj_wait_ms = wait > 3000 ? wait : 3000;
    r->chunk_bytes = opt->chunk_bytes;
    r->interval_ms = opt->interval_ms;
    r->msg = (struct rpc_buf)RPC_BUF_INIT;
    *out = r;
    return 0;
}

void repair_free(repair *r)
{
    if (!r)
        return;
    free(r->c);
    free(r->arcs);
    free(r->sa);
    free(r->loaded);
    free(r->mine);
    free(r->theirs);
    free(r->diff);
    free(r->got);
    rpc_buf_free(&r->msg);
    free(r);
}

void repair_stats_get(struct repair_stats *out, const repair *r)
{
    *out = r->total;
}

/* ---- leaf hashes of a local arc ------------------------------------------ */

static int
leaves_add(void *arg, uint64_t token, struct rk_slice key, struct rk_slice rec)
{
    return merkle_build_add(arg, token, key, rec);
}

int repair__leaves(uint64_t *leaves,
                   uint64_t *keys,
                   const struct repair_host *h,
                   struct ring_range arc,
                   unsigned depth)
{
    merkle_build *b = NULL;
    int rc = merkle_build_new(&b, leaves, arc, depth);
    if (rc < 0)
        return rc;
    rc = h->scan(h->arg, arc, leaves_add, b);
    uint64_t n = merkle_build_finish(b);
    if (rc == 0 && keys)
        *keys = n;
    merkle_build_free(b);
    return rc;
}

/* ---- the answer ---------------------------------------------------------- */

struct merkle_job {
    repair *r;
    repair_reply_cb reply;
    void *reply_arg;
    uint64_t id;
    struct ring_range arc;
    unsigned depth;
    uint64_t *leaves;
    uint64_t keys;
    int status;
};

static void serve_reply(repair *r,
                        repair_reply_cb reply,
                        void *reply_arg,
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
    struct rpc_merkle_resp m = {.status = status,
                                .hlc = r->h.hlc(r->h.arg),
                                .depth = depth,
                                .keys = status == 0 ? keys : 0,
                                .leaves = RK_SLICE(bytes, len)};
    struct rpc_buf b = RPC_BUF_INIT;
    if (rpc_merkle_resp_encode(&b, &m) < 0)
        rpc_buf_free(&b); /* nothing to send: the asker times out */
    reply(reply_arg, id, RK_SLICE(b.data, b.len));
    rpc_buf_free(&b);
    free(bytes);
}

static void serve_work(void *arg)
{
    struct merkle_job *j = arg;
    j->status = repair__leaves(j->leaves, &j->keys, &j->r->h, j->arc, j->depth);
}

static void serve_after(void *arg)
{
    struct merkle_job *j = arg;
    repair *r = j->r;
    r->serve_jobs--;
    serve_reply(r, j->reply, j->reply_arg, j->id, j->status, j->depth, j->keys,
                j->leaves);
    free(j->leaves);
    free(j);
}

void repair_serve(repair *r,
                  struct rk_slice req,
                  uint64_t id,
                  repair_reply_cb reply,
                  void *reply_arg)
{
    struct rpc_merkle_req rq = {0};
    int rc = rpc_merkle_req_decode(&rq, req);
    struct ring_range arc = {rq.start, rq.end};
    if (rc == 0 && merkle_depth_fit(arc, rq.depth) != rq.depth)
        rc = RK_EBADREQ;
    if (rc < 0) {
        r->h.bad_frame(r->h.arg);
        serve_reply(r, reply, reply_arg, id, rc, 0, 0, NULL);
        return;
    }
    const ring *cur = r->h.ring(r->h.arg);
    if (r->h.stopping(r->h.arg))
        rc = RK_ECLOSED;
    else if (!cur || rq.epoch != ring_epoch(cur))
        rc = RK_ESTALE; /* the two rings differ: so may the replicas */
    else if (r->serve_jobs >= REPAIR_SERVE_JOBS)
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
        *j = (struct merkle_job){.r = r,
                                 .reply = reply,
                                 .reply_arg = reply_arg,
                                 .id = id,
                                 .arc = arc,
                                 .depth = rq.depth,
                                 .leaves = j->leaves};
        rc = r->h.queue_work(r->h.arg, serve_work, serve_after, j);
    }
    if (rc < 0) {
        if (j)
            free(j->leaves);
        free(j);
        serve_reply(r, reply, reply_arg, id, rc, 0, 0, NULL);
        return;
    }
    r->serve_jobs++;
}
