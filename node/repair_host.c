/*
 * repair_host.c - repair/ wired into the daemon: the host interface
 * (repair/repair.h) filled in with the node's clock, log, ring, peers,
 * internode RPCs, thread pool, store, the join's streaming (scan, commit,
 * throughput budget), the stall tracker and node.state's repair_due; and
 * the node__repair_* entry points the rest of node/ calls.
 *
 * repair/ holds no libuv handle: a pool job or a retry timer it asks for
 * is made here, one at a time, counted in pending_closes so that the
 * node's stop waits for it, and freed once libuv is done with it. A
 * running session holds the stop too (job_begin / job_end), as its retry
 * timer did when it lived in node/.
 */
#include "node/repair_host.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "gossip/gossip.h"
#include "net/net.h"
#include "node/daemon.h"
#include "node/log.h"
#include "node/replica.h"
#include "node/ring_view.h"
#include "repair/repair.h"
#include "ring/ring.h"
#include "storage/store.h"
#include "streaming/streaming.h"
#include "wire/rpc_msg.h"

_Static_assert(REPAIR_NAME_MAX == GOSSIP_NAME_MAX,
               "a comparison names its peer as gossip does");
_Static_assert(REPAIR_LOG_DEBUG == (int)NODE_LOG_DEBUG &&
                   REPAIR_LOG_INFO == (int)NODE_LOG_INFO &&
                   REPAIR_LOG_WARN == (int)NODE_LOG_WARN &&
                   REPAIR_LOG_ERROR == (int)NODE_LOG_ERROR,
               "repair's log levels are the node's");

/* What the node keeps of repair: the part, and the stall tracker of its
 * session. */
struct node_repair {
    node *n;
    repair *part;
    struct stream_stall stall;
    /* the schedule's records, kept in the store's system env by one pool
     * job at a time (sys_set syncs): the job's copy, and the newest one
     * waiting for it to end */
    bool saving;
    uint8_t *save_blob, *save_next;
    size_t save_len, save_next_len;
    int save_rc;
};

/* The system env's name of the schedule's records (repair.h). */
#define NODE_REPAIR_SCHED_KEY "repair_schedule"

/* ---- the daemon --------------------------------------------------------- */

static uint64_t h_now_ms(void *arg)
{
    return node__mono_ms(((struct node_repair *)arg)->n);
}

static void h_log(void *arg,
                  enum repair_log_level level,
                  const char *event,
                  const char *fields)
{
    (void)arg;
    if ((enum node_log_level)level >= node_log_min)
        node_log_write((enum node_log_level)level, event, "%s", fields);
}

static bool h_stopping(void *arg)
{
    node *n = ((struct node_repair *)arg)->n;
    return n->stopping || !n->store;
}

static void h_job_begin(void *arg)
{
    ((struct node_repair *)arg)->n->pending_closes++;
}

static void h_job_end(void *arg)
{
    node *n = ((struct node_repair *)arg)->n;
    n->pending_closes--;
    node__stop_progress(n);
}

/* repair/'s jobs take no status: after(job) runs on the loop once work(job)
 * has run (node__queue_work counts it for the node's stop) */
struct repair_work {
    void (*work)(void *job);
    void (*after)(void *job);
    void *job;
};

static void work_run(void *arg)
{
    struct repair_work *rw = arg;
    rw->work(rw->job);
}

static void work_after(void *arg, int status)
{
    struct repair_work *rw = arg;
    (void)status;
    rw->after(rw->job);
    free(rw);
}

static int h_queue_work(void *arg,
                        void (*work)(void *job),
                        void (*after)(void *job),
                        void *job)
{
    node *n = ((struct node_repair *)arg)->n;
    struct repair_work *rw = malloc(sizeof(*rw));
    if (!rw)
        return -ENOMEM;
    *rw = (struct repair_work){.work = work, .after = after, .job = job};
    int rc = node__queue_work(n, work_run, work_after, rw);
    if (rc < 0)
        free(rw);
    return rc;
}

struct repair_timer {
    uv_timer_t t;
    node *n;
    void (*cb)(void *cb_arg);
    void *cb_arg;
};

static void timer_closed(uv_handle_t *h)
{
    struct repair_timer *rt = h->data;
    node *n = rt->n;
    free(rt);
    n->pending_closes--;
    node__stop_progress(n);
}

static void timer_fired(uv_timer_t *t)
{
    struct repair_timer *rt = t->data;
    void (*cb)(void *) = rt->cb;
    void *cb_arg = rt->cb_arg;
    uv_close((uv_handle_t *)&rt->t, timer_closed);
    cb(cb_arg);
}

static int
h_timer_start(void *arg, uint32_t ms, void (*cb)(void *cb_arg), void *cb_arg)
{
    node *n = ((struct node_repair *)arg)->n;
    struct repair_timer *rt = malloc(sizeof(*rt));
    if (!rt)
        return -ENOMEM;
    *rt = (struct repair_timer){.n = n, .cb = cb, .cb_arg = cb_arg};
    int rc = uv_timer_init(n->loop, &rt->t);
    if (rc < 0) {
        free(rt);
        return rc;
    }
    rt->t.data = rt;
    n->pending_closes++;
    rc = uv_timer_start(&rt->t, timer_fired, ms, 0);
    if (rc < 0) {
        uv_close((uv_handle_t *)&rt->t, timer_closed);
        return rc;
    }
    return 0;
}

static uint64_t h_hlc(void *arg)
{
    return ((struct node_repair *)arg)->n->clock.hlc.last;
}

static void h_bad_frame(void *arg)
{
    ((struct node_repair *)arg)->n->stats.internode_bad++;
}

/* ---- the ring and the peers ---------------------------------------------- */

static const ring *h_ring(void *arg)
{
    node *n = ((struct node_repair *)arg)->n;
    return n->ring_stale ? NULL : n->ring;
}

static int h_ring_settled(void *arg, uint32_t *self, char *why, size_t cap)
{
    return stream_ring_settled(((struct node_repair *)arg)->n->streaming,
                               "repair", self, why, cap);
}

static const struct node_peer *peer_up(node *n, const char *name)
{
    const struct node_peer *p = node__peer_by_name(n, name, NULL);
    return p && p->up && !p->self && p->iaddr[0] ? p : NULL;
}

static bool h_peer_up(void *arg, const char *peer)
{
    return peer_up(((struct node_repair *)arg)->n, peer) != NULL;
}

static int h_rpc(void *arg,
                 const char *peer,
                 struct rk_slice msg,
                 uint32_t timeout_ms,
                 repair_rpc_cb cb,
                 void *cb_arg)
{
    node *n = ((struct node_repair *)arg)->n;
    const struct node_peer *p = peer_up(n, peer);
    if (!p)
        return RK_EUNAVAILABLE;
    struct rpc_buf view = {.data = (uint8_t *)msg.p, .len = msg.len};
    return node__rpc_addr(n, p->iaddr, &view, timeout_ms, 0, cb, cb_arg);
}

/* ---- the local data ------------------------------------------------------ */

static int h_range_keys(void *arg,
                        uint64_t token,
                        struct ring_range *range,
                        uint64_t *keys)
{
    node *n = ((struct node_repair *)arg)->n;
    struct store_range r;
    struct store_range_info info = {0};
    int rc = store_range_find(&r, n->store, token);
    if (rc == 0)
        rc = store_range_info(&info, n->store, r);
    if (rc != 0)
        return rc < 0 ? rc : RK_ENOTFOUND;
    *range = (struct ring_range){r.start, r.end};
    *keys = info.keys;
    return 0;
}

struct scan_to {
    repair_item_cb cb;
    void *cb_arg;
};

static int scan_item(const struct store_item *it, void *arg)
{
    struct scan_to *to = arg;
    return to->cb(to->cb_arg, it->token, it->key, it->rec);
}

/* On a pool thread: only the store is touched. */
static int
h_scan(void *arg, struct ring_range arc, repair_item_cb cb, void *cb_arg)
{
    store *s = ((struct node_repair *)arg)->n->store;
    struct scan_to to = {cb, cb_arg};
    struct store_scan sc;
    int rc = 0;
    store_scan_init(&sc, (struct store_range){arc.start, arc.end});
    while (rc == 0 && !sc.done)
        rc = store_scan_next(s, &sc, 4096, (size_t)16 << 20, scan_item, &to);
    return rc;
}

/* ---- the transfer of records --------------------------------------------- */

static bool h_budget_take(void *arg)
{
    return stream_budget_take(((struct node_repair *)arg)->n->streaming);
}

static void h_budget_settle(void *arg, uint64_t moved)
{
    stream_budget_settle(((struct node_repair *)arg)->n->streaming, moved);
}

static int h_push_scan(void *arg,
                       const struct rpc_stream_pos *at,
                       uint32_t max_bytes,
                       const uint64_t *skip,
                       size_t nskip,
                       repair_scan_cb cb,
                       void *cb_arg)
{
    return stream_scan(((struct node_repair *)arg)->n->streaming, at, max_bytes,
                       skip, nskip, cb, cb_arg);
}

static int h_commit_items(void *arg,
                          struct ring_range rg,
                          struct rk_slice items,
                          repair_items_cb cb,
                          void *cb_arg)
{
    return stream_items_commit(((struct node_repair *)arg)->n->streaming, rg,
                               items, cb, cb_arg);
}

static uint64_t h_record_fingerprint(void *arg,
                                     struct rk_slice key,
                                     const struct rpc_record *rec)
{
    (void)arg;
    return stream_record_fingerprint(key, rec);
}

static void h_human_bytes(void *arg, char *out, size_t cap, uint64_t bytes)
{
    (void)arg;
    stream_human_bytes(out, cap, bytes);
}

/* ---- the stall tracker ------------------------------------------------- */

static void h_stall_start(void *arg)
{
    struct node_repair *nr = arg;
    stream_stall_start(nr->n->streaming, &nr->stall, "repair", "repair");
}

static void h_stall_progress(void *arg)
{
    struct node_repair *nr = arg;
    stream_stall_progress(nr->n->streaming, &nr->stall);
}

static void h_stall_fail(void *arg,
                         const char *step,
                         const char *peer,
                         const struct ring_range *range,
                         int err)
{
    stream_stall_fail(&((struct node_repair *)arg)->stall, step, peer, range,
                      err);
}

static void h_stall_check(void *arg, bool work_left)
{
    struct node_repair *nr = arg;
    stream_stall_check(nr->n->streaming, &nr->stall, work_left);
}

static void h_stall_text(void *arg, FILE *f)
{
    struct node_repair *nr = arg;
    stream_stall_text(nr->n->streaming, &nr->stall, f);
}

/* ---- the repair after a join ------------------------------------------- */

static bool h_after_join_due(void *arg, uint64_t *joined_ms)
{
    node *n = ((struct node_repair *)arg)->n;
    *joined_ms = n->raj_since_ms; /* 0: restarted since the join */
    return n->st.repair_due;
}

static void h_after_join_done(void *arg)
{
    node *n = ((struct node_repair *)arg)->n;
    n->st.repair_due = 0;
    node__state_save(n);
}

/* ---- the repair schedule ------------------------------------------------ */

static uint64_t h_wall_ms(void *arg)
{
    (void)arg;
    return node__now_ms();
}

static void save_work(void *job)
{
    struct node_repair *nr = job;
    nr->save_rc = store_sys_set(nr->n->store, NODE_REPAIR_SCHED_KEY,
                                RK_SLICE(nr->save_blob, nr->save_len));
}

static void save_start(struct node_repair *nr);

static void save_done(void *job, int status)
{
    struct node_repair *nr = job;
    nr->saving = false;
    if (status == 0 && nr->save_rc < 0)
        LOG(WARN, "repair.schedule_save_fail", "error=\"%s\"",
            rk_strerror(nr->save_rc));
    free(nr->save_blob);
    nr->save_blob = NULL;
    if (nr->save_next && !nr->n->stopping && nr->n->store)
        save_start(nr);
}

static void save_start(struct node_repair *nr)
{
    nr->save_blob = nr->save_next;
    nr->save_len = nr->save_next_len;
    nr->save_next = NULL;
    nr->saving = true;
    if (node__queue_work(nr->n, save_work, save_done, nr) < 0) {
        nr->saving = false;
        free(nr->save_blob);
        nr->save_blob = NULL;
        LOG(WARN, "repair.schedule_save_fail", "error=\"%s\"",
            rk_strerror(-ENOMEM));
    }
}

static void h_sched_save(void *arg, struct rk_slice blob)
{
    struct node_repair *nr = arg;
    uint8_t *copy = malloc(blob.len ? blob.len : 1);
    if (!copy)
        return; /* kept at the next change */
    memcpy(copy, blob.p, blob.len);
    free(nr->save_next);
    nr->save_next = copy;
    nr->save_next_len = blob.len;
    if (!nr->saving && !nr->n->stopping && nr->n->store)
        save_start(nr);
}

/* At start: the records kept before the restart; a damaged copy is
 * logged and dropped (the arcs wait for their next complete repair before
 * anything of them is purged). */
static void sched_load(struct node_repair *nr)
{
    uint8_t *b = NULL;
    size_t len = 0;
    int rc = store_sys_get(&b, &len, nr->n->store, NODE_REPAIR_SCHED_KEY);
    if (rc == 0)
        rc = repair_sched_load(nr->part, RK_SLICE(b, len));
    if (rc < 0 && rc != RK_ENOTFOUND)
        LOG(WARN, "repair.schedule_unreadable",
            "error=\"%s\" note=\"the record of when each range was last "
            "repaired is lost: nothing is purged until each is repaired "
            "again\"",
            rk_strerror(rc));
    free(b);
}

void node__repair_sched_stats(node *n, struct repair_sched_stats *out)
{
    if (n->repair)
        repair_sched_stats_get(out, n->repair->part);
    else
        *out = (struct repair_sched_stats){0};
}

int node__repair_sched_list(node *n,
                            struct repair_arc_state **out,
                            size_t *out_n)
{
    *out = NULL;
    *out_n = 0;
    return n->repair ? repair_sched_list(out, out_n, n->repair->part) : 0;
}

/* ---- node/'s entry points ----------------------------------------------- */

int node__repair_start(node *n, char *err, size_t errlen)
{
    struct node_repair *nr = calloc(1, sizeof(*nr));
    if (!nr) {
        snprintf(err, errlen, "cannot start repair: %s", rk_strerror(-ENOMEM));
        return -ENOMEM;
    }
    nr->n = n;
    const struct repair_host host = {
        .arg = nr,
        .now_ms = h_now_ms,
        .log = h_log,
        .stopping = h_stopping,
        .job_begin = h_job_begin,
        .job_end = h_job_end,
        .queue_work = h_queue_work,
        .timer_start = h_timer_start,
        .hlc = h_hlc,
        .bad_frame = h_bad_frame,
        .ring = h_ring,
        .ring_settled = h_ring_settled,
        .peer_up = h_peer_up,
        .rpc = h_rpc,
        .range_keys = h_range_keys,
        .scan = h_scan,
        .budget_take = h_budget_take,
        .budget_settle = h_budget_settle,
        .push_scan = h_push_scan,
        .commit_items = h_commit_items,
        .record_fingerprint = h_record_fingerprint,
        .human_bytes = h_human_bytes,
        .stall_start = h_stall_start,
        .stall_progress = h_stall_progress,
        .stall_fail = h_stall_fail,
        .stall_check = h_stall_check,
        .stall_text = h_stall_text,
        .after_join_due = h_after_join_due,
        .after_join_done = h_after_join_done,
        .wall_ms = h_wall_ms,
        .sched_save = h_sched_save,
    };
    struct repair_options opt = REPAIR_OPTIONS_INIT;
    opt.node_name = n->cfg.node_name;
    opt.after_join = n->cfg.repair_after_join;
    opt.gossip_interval_ms = (uint32_t)n->cfg.gossip_interval_ms;
    opt.chunk_bytes = STREAM_CHUNK;
    opt.interval_ms = (uint64_t)n->cfg.repair_interval_s * 1000;
    int rc = repair_new(&nr->part, &host, &opt);
    if (rc < 0) {
        free(nr);
        snprintf(err, errlen, "cannot start repair: %s", rk_strerror(rc));
        return rc;
    }
    n->repair = nr;
    sched_load(nr);
    return 0;
}

void node__repair_free(node *n)
{
    if (!n->repair)
        return;
    repair_free(n->repair->part);
    free(n->repair->save_blob);
    free(n->repair->save_next);
    free(n->repair);
    n->repair = NULL;
}

int node__repair_begin(node *n,
                       const struct ring_range *only,
                       char **text,
                       size_t *len)
{
    if (!n->repair) { /* not started: the node failed to start */
        *text = strdup("the node is stopping");
        *len = *text ? strlen(*text) : 0;
        return *text ? RK_ECLOSED : -ENOMEM;
    }
    return repair_begin(n->repair->part, only, text, len);
}

void node__repair_after_join(node *n)
{
    if (n->repair)
        repair_tick(n->repair->part);
}

void node__repair_text(node *n, FILE *f)
{
    if (n->repair) {
        repair_text(n->repair->part, f);
        repair_sched_text(n->repair->part, f);
    }
}

void node__repair_session_text(node *n, FILE *f)
{
    if (n->repair)
        repair_text(n->repair->part, f);
}

void node__repair_stats(node *n, struct repair_stats *out)
{
    if (n->repair)
        repair_stats_get(out, n->repair->part);
    else
        *out = (struct repair_stats){0};
}

/* The MERKLE answer, on the connection the request came on. */
static void serve_reply(void *arg, uint64_t id, struct rk_slice msg)
{
    net_conn *c = arg;
    if (msg.len)
        net_conn_reply(c, id, msg);
    net_conn_unref(c);
}

void node__repair_serve(node *n, net_conn *c, uint64_t id, struct rk_slice f)
{
    if (!n->repair) {
        node__reply_status(n, c, id, RPC_MSG_MERKLE, RK_ECLOSED);
        return;
    }
    net_conn_ref(c);
    repair_serve(n->repair->part, f, id, serve_reply, c);
}
