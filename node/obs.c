/*
 * obs.c - the daemon's metrics registry, its sources and its publication
 * (see obs.h).
 *
 * Two kinds of source. The hot path (coordinator completions, admission
 * control) updates the registry directly: an array increment, no lock, no
 * allocation. Everything else is already counted elsewhere (node_stats,
 * gossip_stats, the peer table, the ring, the store) and is copied into
 * the registry by obs_sync() just before each render: cumulative counters
 * by their delta since the last sync, gauges by value. Rendering happens
 * on the loop thread only; the HTTP thread sees published strings.
 *
 * Streaming (joins, leaves) and repair are exported as records and bytes
 * in and out.
 */
#include "node/obs.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "node/http.h"
#include "node/log.h"
#include "node/metrics.h"
#include "node/node_internal.h"
#include "node/rsrv.h"

#define OBS_PUBLISH_MS 1000
#define OBS_NLEVELS    7 /* NODE_CL_ONE .. NODE_CL_EACH_QUORUM */

enum { E_UNAVAILABLE = 0, E_TIMEOUT, E_OVERLOADED, E_N };

struct obs {
    node *n;
    metrics *m;
    http_server *http;
    uv_timer_t timer;
    uv_async_t async;
    int handles; /* open libuv handles; freed at 0 after stop */
    bool stopped;

    metrics_family *req, *lat, *err;
    metrics_family *overloaded, *stale, *stale_waits, *repairs, *hedges,
        *passed_over, *unsent;
    metrics_family *hints_stored, *hints_replayed, *hints_dropped;
    metrics_family *writes_refused, *clock_skew;
    metrics_family *gossip_in, *gossip_out, *gossip_bad, *gossip_auth;
    metrics_family *gossip_wrong, *gossip_malformed, *gossip_msgs;
    metrics_family *peers, *epoch, *fp, *ring_stale, *ring_nodes, *repl_diff;
    metrics_family *owned, *ranges, *keys, *bytes, *mem_writes, *mem_bytes;
    metrics_family *store_failed, *log_direct, *space_skips;
    bool store_failed_logged;
    uint64_t space_skips_last;
    metrics_family *inflight, *coord_inflight, *coord_background;
    metrics_family *conns_total, *conns_open, *bad_frames, *resp_perr;
    metrics_family *clients_refused;
    metrics_family *auth_fail;
    metrics_family *commits, *commit_writes, *commit_lat;
    metrics_family *rep_writes, *rep_reads;
    metrics_family *inode_auth, *inode_bad;
    metrics_family *stream_keys, *stream_bytes, *repair_keys, *repair_bytes;

    /* what was copied at the last sync */
    struct node_stats last;
    struct gossip_stats glast;
    uint64_t resp_acc_last, resp_perr_last;
};

static const char *const op_names[] = {"get", "put", "del"};
static const char *const err_names[] = {"unavailable", "timeout", "overloaded"};

/* ---- registration ----------------------------------------------------- */

static int fam(metrics_family **out,
               struct obs *o,
               const char *name,
               const char *help,
               enum metrics_type type,
               size_t ndims,
               const struct metrics_dim *dims)
{
    struct metrics_family_cfg cfg = {.name = name, .help = help, .type = type};
    cfg.ndims = ndims;
    for (size_t i = 0; i < ndims; i++)
        cfg.dims[i] = dims[i];
    return metrics_family_add(out, o->m, &cfg);
}

static int obs_register(struct obs *o)
{
    const char *levels[OBS_NLEVELS];
    for (int c = 0; c < OBS_NLEVELS; c++)
        levels[c] = node_cl_name((enum node_cl)(c + NODE_CL_ONE));
    struct metrics_dim op_level[3] = {
        {"op", NODE_OP_N, op_names},
        {"level", OBS_NLEVELS, levels},
        {"error", E_N, err_names},
    };
    static const char *const gmsg[] = {"syn", "ack", "ack2"};
    static const char *const updown[] = {"up", "down"};
    static const char *const proto[] = {"native", "resp"};
    struct metrics_dim d_gmsg = {"type", 3, gmsg};
    struct metrics_dim d_state = {"state", 2, updown};
    struct metrics_dim d_fp = {"fingerprint", 1, NULL};
    struct metrics_dim d_proto = {"protocol", 2, proto};
    struct metrics_dim d_resp = {"protocol", 1, proto + 1};
    static const char *const inout[] = {"in", "out"};
    struct metrics_dim d_dir = {"direction", 2, inout};
    int rc = 0;
#define F(out, name, help, type, nd, dims)                    \
    do {                                                      \
        if (rc == 0)                                          \
            rc = fam(&o->out, o, name, help, type, nd, dims); \
    } while (0)
    F(req, "ringkv_requests_total",
      "Coordinator requests by operation and consistency level.",
      METRICS_COUNTER, 2, op_level);
    F(lat, "ringkv_request_duration_seconds",
      "Coordinator request latency (start to reply, any outcome).",
      METRICS_HISTOGRAM, 2, op_level);
    F(err, "ringkv_request_errors_total",
      "Requests that failed UNAVAILABLE, TIMEOUT or OVERLOADED, by level.",
      METRICS_COUNTER, 3, op_level);
    F(overloaded, "ringkv_overloaded_total",
      "Requests shed by admission control (all levels, both protocols).",
      METRICS_COUNTER, 0, NULL);
    F(stale, "ringkv_ring_stale_refusals_total",
      "Requests refused with RING_STALE.", METRICS_COUNTER, 0, NULL);
    F(stale_waits, "ringkv_ring_stale_waits_total",
      "Requests that arrived while this node's ring was older than an "
      "epoch it had heard of and waited for it to catch up (those still "
      "waiting at their timeout are refused with RING_STALE).",
      METRICS_COUNTER, 0, NULL);
    F(repairs, "ringkv_read_repairs_total",
      "Replica writes made by read repair.", METRICS_COUNTER, 0, NULL);
    F(hedges, "ringkv_read_hedges_total",
      "Reads that asked more replicas because those asked had not answered "
      "in half of the time the read had (read_timeout_ms).",
      METRICS_COUNTER, 0, NULL);
    F(passed_over, "ringkv_read_replicas_passed_over_total",
      "Replicas a read asked only after the others (or not at all) because "
      "they had left a request unanswered for a while (docs/operations.md).",
      METRICS_COUNTER, 0, NULL);
    F(unsent, "ringkv_replica_writes_unsent_total",
      "Replica writes that could not be sent, hinted instead: the peer "
      "had left requests unanswered for write_timeout_ms, its connection "
      "was backing off after a failed connect, or the send failed.",
      METRICS_COUNTER, 0, NULL);
    F(hints_stored, "ringkv_hints_stored_total",
      "Hinted writes stored for DOWN or failed replicas.", METRICS_COUNTER, 0,
      NULL);
    F(hints_replayed, "ringkv_hints_replayed_total",
      "Hints delivered to their replica.", METRICS_COUNTER, 0, NULL);
    F(hints_dropped, "ringkv_hints_dropped_total",
      "Hints dropped: not stored (past max_hint_window, store failed), or "
      "at replay undecodable or rejected for good by their replica.",
      METRICS_COUNTER, 0, NULL);
    F(writes_refused, "ringkv_writes_refused_total",
      "Replica writes a replica refused for good (malformed, or a key in "
      "no range it holds, as when its replication or ring differs): no "
      "hint is kept for them.",
      METRICS_COUNTER, 0, NULL);
    F(clock_skew, "ringkv_clock_skew_refused_total",
      "Timestamps refused for being more than max_clock_drift_ms ahead of "
      "this node's clock: replica writes answered CLOCK_SKEW, and peers' "
      "clocks in answers the node's clock did not follow.",
      METRICS_COUNTER, 0, NULL);
    F(gossip_in, "ringkv_gossip_packets_in_total", "Gossip packets received.",
      METRICS_COUNTER, 0, NULL);
    F(gossip_out, "ringkv_gossip_packets_out_total", "Gossip packets sent.",
      METRICS_COUNTER, 0, NULL);
    F(gossip_bad, "ringkv_gossip_packets_rejected_total",
      "Gossip packets dropped (bad MAC, other cluster, malformed).",
      METRICS_COUNTER, 0, NULL);
    F(gossip_auth, "ringkv_gossip_auth_failures_total",
      "Gossip packets with a bad MAC.", METRICS_COUNTER, 0, NULL);
    F(gossip_wrong, "ringkv_gossip_wrong_cluster_total",
      "Gossip packets of another cluster.", METRICS_COUNTER, 0, NULL);
    F(gossip_malformed, "ringkv_gossip_malformed_total",
      "Gossip packets that did not decode.", METRICS_COUNTER, 0, NULL);
    F(gossip_msgs, "ringkv_gossip_messages_received_total",
      "Gossip messages received, by type.", METRICS_COUNTER, 1, &d_gmsg);
    F(peers, "ringkv_peers", "Other ring members by failure detector state.",
      METRICS_GAUGE, 1, &d_state);
    F(epoch, "ringkv_ring_epoch", "Epoch of the applied ring.", METRICS_GAUGE,
      0, NULL);
    F(fp, "ringkv_ring_fingerprint_info",
      "Fingerprint of the applied ring (label; value always 1).", METRICS_GAUGE,
      1, &d_fp);
    F(ring_stale, "ringkv_ring_stale",
      "1 while this node has heard of a newer ring epoch.", METRICS_GAUGE, 0,
      NULL);
    F(ring_nodes, "ringkv_ring_nodes", "Members of the applied ring.",
      METRICS_GAUGE, 0, NULL);
    F(repl_diff, "ringkv_replication_mismatch",
      "Ring members gossiping a replication setting other than this "
      "node's (should be 0: they place replicas differently).",
      METRICS_GAUGE, 0, NULL);
    F(owned, "ringkv_owned_ranges",
      "Token ranges this node replicates in the applied ring.", METRICS_GAUGE,
      0, NULL);
    F(ranges, "ringkv_stored_ranges",
      "Range environments held in the local store.", METRICS_GAUGE, 0, NULL);
    F(keys, "ringkv_keys", "Entries in the local store (with tombstones).",
      METRICS_GAUGE, 0, NULL);
    F(bytes, "ringkv_disk_bytes", "Bytes in use by the local store.",
      METRICS_GAUGE, 0, NULL);
    F(mem_writes, "ringkv_memtable_writes",
      "Keys with a committed write not yet applied to the range "
      "environments (applied when memtable_mb fills or within 10 s).",
      METRICS_GAUGE, 0, NULL);
    F(mem_bytes, "ringkv_memtable_bytes",
      "Memory held by the memtable (bound: 2 x memtable_mb).", METRICS_GAUGE, 0,
      NULL);
    F(store_failed, "ringkv_storage_failed",
      "1 after a commit log or range env sync failed: commits or "
      "checkpoints fail until the node is restarted (docs/storage.md).",
      METRICS_GAUGE, 0, NULL);
    F(space_skips, "ringkv_storage_jobs_skipped_total",
      "Range jobs (compaction, cleanup's keep, split) skipped for lack of "
      "disk space; a skipped compaction is tried again every few seconds "
      "(docs/storage.md).",
      METRICS_COUNTER, 0, NULL);
    F(log_direct, "ringkv_commit_log_direct",
      "1 while the commit log is written with O_DIRECT (log_direct_io and a "
      "file system that takes it), 0 through the page cache.",
      METRICS_GAUGE, 0, NULL);
    F(inflight, "ringkv_client_inflight_requests",
      "Client requests in flight (admission control bound: max_inflight).",
      METRICS_GAUGE, 0, NULL);
    F(coord_inflight, "ringkv_coordinator_inflight_requests",
      "Coordinator requests not yet answered (bound: max_inflight).",
      METRICS_GAUGE, 0, NULL);
    F(coord_background, "ringkv_coordinator_background_requests",
      "Answered coordinator requests still waiting for slower replicas "
      "(bound: " NODE_STR(COORD_BACKGROUND_FACTOR) " x max_inflight).",
      METRICS_GAUGE, 0, NULL);
    F(conns_total, "ringkv_client_connections_total",
      "Client connections accepted, by protocol.", METRICS_COUNTER, 1,
      &d_proto);
    F(conns_open, "ringkv_client_connections",
      "Open client connections (RESP).", METRICS_GAUGE, 1, &d_resp);
    F(clients_refused, "ringkv_clients_refused_total",
      "Client connections refused past max_clients.", METRICS_COUNTER, 0, NULL);
    F(bad_frames, "ringkv_client_bad_frames_total",
      "Malformed native protocol frames.", METRICS_COUNTER, 0, NULL);
    F(resp_perr, "ringkv_resp_protocol_errors_total",
      "RESP connections closed for a protocol error.", METRICS_COUNTER, 0,
      NULL);
    F(auth_fail, "ringkv_client_auth_failures_total", "Wrong client passwords.",
      METRICS_COUNTER, 0, NULL);
    F(commits, "ringkv_commits_total", "Group commits (one fsync each).",
      METRICS_COUNTER, 0, NULL);
    F(commit_writes, "ringkv_commit_writes_total", "Writes in group commits.",
      METRICS_COUNTER, 0, NULL);
    F(commit_lat, "ringkv_commit_duration_seconds",
      "Group commit time on the committer thread: log write, fsync, "
      "memtable (one per ringkv_commits_total).",
      METRICS_HISTOGRAM, 0, NULL);
    F(rep_writes, "ringkv_replica_writes_total",
      "Replica writes served for coordinators.", METRICS_COUNTER, 0, NULL);
    F(rep_reads, "ringkv_replica_reads_total",
      "Replica reads served for coordinators.", METRICS_COUNTER, 0, NULL);
    F(inode_auth, "ringkv_internode_auth_failures_total",
      "Internode handshakes that failed authentication.", METRICS_COUNTER, 0,
      NULL);
    F(inode_bad, "ringkv_internode_bad_requests_total",
      "Malformed internode requests.", METRICS_COUNTER, 0, NULL);
    F(stream_keys, "ringkv_stream_keys_total",
      "Records streamed for a join: in (committed here while joining) and "
      "out (sent to joining nodes).",
      METRICS_COUNTER, 1, &d_dir);
    F(stream_bytes, "ringkv_stream_bytes_total",
      "Key and value bytes streamed for a join, in and out.", METRICS_COUNTER,
      1, &d_dir);
    F(repair_keys, "ringkv_repair_keys_total",
      "Records this node's repairs exchanged: in (pulled from another "
      "replica and committed here) and out (pushed to it).",
      METRICS_COUNTER, 1, &d_dir);
    F(repair_bytes, "ringkv_repair_bytes_total",
      "Key and value bytes this node's repairs exchanged, in and out.",
      METRICS_COUNTER, 1, &d_dir);
#undef F
    return rc;
}

/* ---- sync ------------------------------------------------------------- */

static void ctr(metrics_family *f, size_t series, uint64_t cur, uint64_t *last)
{
    if (cur > *last)
        metrics_counter_add(f, series, cur - *last);
    *last = cur;
}

void node__obs_store_totals(node *n,
                            uint64_t *ranges,
                            uint64_t *keys,
                            uint64_t *bytes)
{
    *ranges = *keys = *bytes = 0;
    if (!n->store)
        return;
    /* Writes not yet applied to the envs count too (within 10 s they
     * are; a key already in an env and written again meanwhile counts
     * twice until then, and disk bytes lag as long). */
    struct store_mem_info mi;
    store_mem_info(&mi, n->store);
    uint64_t now = uv_now(n->loop);
    if (!n->totals.valid || n->totals.applies != mi.applies ||
        now - n->totals.at_ms >= NODE_TOTALS_MAX_AGE_MS) {
        struct store_range *rs = NULL;
        size_t nr = 0;
        if (store_range_list(&rs, &nr, n->store) < 0)
            return;
        n->totals.keys = n->totals.bytes = 0;
        for (size_t i = 0; i < nr; i++) {
            struct store_range_info ri;
            if (store_range_info(&ri, n->store, rs[i]) == 0) {
                n->totals.keys += ri.keys;
                n->totals.bytes += ri.disk_bytes;
            }
        }
        free(rs);
        n->totals.ranges = nr;
        n->totals.at_ms = now;
        n->totals.applies = mi.applies;
        n->totals.valid = true;
    }
    *ranges = n->totals.ranges;
    *keys = n->totals.keys + mi.writes;
    *bytes = n->totals.bytes;
}

static void obs_sync(struct obs *o)
{
    node *n = o->n;
    const struct node_stats *s = &n->stats;
    struct node_stats *l = &o->last;
    for (int op = 0; op < NODE_OP_N; op++) {
        for (int c = 0; c < OBS_NLEVELS; c++) {
            int cl = c + NODE_CL_ONE;
            ctr(o->req, metrics_series(o->req, (size_t)op, (size_t)c, 0),
                s->req[op][cl], &l->req[op][cl]);
            ctr(o->err,
                metrics_series(o->err, (size_t)op, (size_t)c, E_UNAVAILABLE),
                s->unavailable[op][cl], &l->unavailable[op][cl]);
            ctr(o->err,
                metrics_series(o->err, (size_t)op, (size_t)c, E_TIMEOUT),
                s->timeout[op][cl], &l->timeout[op][cl]);
        }
    }
    ctr(o->overloaded, 0, s->overloaded, &l->overloaded);
    ctr(o->stale, 0, s->stale, &l->stale);
    ctr(o->stale_waits, 0, s->stale_waits, &l->stale_waits);
    ctr(o->repairs, 0, s->read_repairs, &l->read_repairs);
    ctr(o->hedges, 0, s->read_hedges, &l->read_hedges);
    ctr(o->passed_over, 0, s->read_passed_over, &l->read_passed_over);
    ctr(o->unsent, 0, s->writes_unsent, &l->writes_unsent);
    ctr(o->hints_stored, 0, s->hints_stored, &l->hints_stored);
    ctr(o->hints_replayed, 0, s->hints_replayed, &l->hints_replayed);
    ctr(o->hints_dropped, 0, s->hints_dropped, &l->hints_dropped);
    ctr(o->writes_refused, 0, s->writes_refused, &l->writes_refused);
    ctr(o->clock_skew, 0, s->clock_skew_refused, &l->clock_skew_refused);
    ctr(o->gossip_in, 0, s->gossip_in, &l->gossip_in);
    ctr(o->gossip_out, 0, s->gossip_out, &l->gossip_out);
    ctr(o->gossip_bad, 0, s->gossip_bad, &l->gossip_bad);
    if (n->g) {
        struct gossip_stats gs;
        gossip_stats_get(&gs, n->g);
        ctr(o->gossip_auth, 0, gs.rx_auth_fail, &o->glast.rx_auth_fail);
        ctr(o->gossip_wrong, 0, gs.rx_wrong_cluster,
            &o->glast.rx_wrong_cluster);
        ctr(o->gossip_malformed, 0, gs.rx_malformed, &o->glast.rx_malformed);
        ctr(o->gossip_msgs, 0, gs.rx_syn, &o->glast.rx_syn);
        ctr(o->gossip_msgs, 1, gs.rx_ack, &o->glast.rx_ack);
        ctr(o->gossip_msgs, 2, gs.rx_ack2, &o->glast.rx_ack2);
    }
    ctr(o->conns_total, 0, s->client_conns, &l->client_conns);
    ctr(o->bad_frames, 0, s->client_bad_frames, &l->client_bad_frames);
    ctr(o->clients_refused, 0, s->clients_refused, &l->clients_refused);
    ctr(o->auth_fail, 0, s->client_auth_fail, &l->client_auth_fail);
    ctr(o->commits, 0, s->commits, &l->commits);
    ctr(o->commit_writes, 0, s->commit_writes, &l->commit_writes);
    ctr(o->rep_writes, 0, s->replica_writes, &l->replica_writes);
    ctr(o->rep_reads, 0, s->replica_reads, &l->replica_reads);
    ctr(o->inode_auth, 0, s->internode_auth_fail, &l->internode_auth_fail);
    ctr(o->inode_bad, 0, s->internode_bad, &l->internode_bad);
    ctr(o->stream_keys, 0, s->stream_in_keys, &l->stream_in_keys);
    ctr(o->stream_keys, 1, s->stream_out_keys, &l->stream_out_keys);
    ctr(o->stream_bytes, 0, s->stream_in_bytes, &l->stream_in_bytes);
    ctr(o->stream_bytes, 1, s->stream_out_bytes, &l->stream_out_bytes);
    ctr(o->repair_keys, 0, s->repair_in_keys, &l->repair_in_keys);
    ctr(o->repair_keys, 1, s->repair_out_keys, &l->repair_out_keys);
    ctr(o->repair_bytes, 0, s->repair_in_bytes, &l->repair_in_bytes);
    ctr(o->repair_bytes, 1, s->repair_out_bytes, &l->repair_out_bytes);
    uint64_t acc, perr;
    node__rsrv_counts(n, &acc, &perr);
    ctr(o->conns_total, 1, acc, &o->resp_acc_last);
    ctr(o->resp_perr, 0, perr, &o->resp_perr_last);
    metrics_gauge_set(o->conns_open, 0, (int64_t)node__rsrv_conns(n));

    int64_t up = 0, down = 0;
    for (size_t i = 0; i < n->npeers; i++) {
        if (n->peer[i].self)
            continue;
        if (n->peer[i].up)
            up++;
        else
            down++;
    }
    metrics_gauge_set(o->peers, 0, up);
    metrics_gauge_set(o->peers, 1, down);
    uint64_t epoch = n->ring ? ring_epoch(n->ring) : 0;
    metrics_gauge_set(o->epoch, 0, (int64_t)epoch);
    char hex[24];
    snprintf(hex, sizeof(hex), "%016llx",
             (unsigned long long)(n->ring ? ring_fingerprint(n->ring) : 0));
    metrics_label_set(o->fp, 0, 0, hex);
    metrics_gauge_set(o->fp, 0, 1);
    metrics_gauge_set(o->ring_stale, 0, n->ring_stale ? 1 : 0);
    metrics_gauge_set(o->ring_nodes, 0,
                      n->ring ? (int64_t)ring_node_count(n->ring) : 0);
    metrics_gauge_set(o->repl_diff, 0, (int64_t)node__repl_mismatches(n));
    size_t owned = 0;
    if (n->ring && n->self_idx != RING_NONE)
        owned = ring_node_ranges(n->ring, n->self_idx, NULL, 0);
    metrics_gauge_set(o->owned, 0, (int64_t)owned);
    uint64_t ranges, keys, bytes;
    node__obs_store_totals(n, &ranges, &keys, &bytes);
    metrics_gauge_set(o->ranges, 0, (int64_t)ranges);
    metrics_gauge_set(o->keys, 0, (int64_t)keys);
    metrics_gauge_set(o->bytes, 0, (int64_t)bytes);
    if (n->store) {
        struct store_mem_info mi;
        store_mem_info(&mi, n->store);
        metrics_gauge_set(o->mem_writes, 0, (int64_t)mi.writes);
        metrics_gauge_set(o->mem_bytes, 0, (int64_t)mi.bytes);
        metrics_gauge_set(o->store_failed, 0, node__obs_store_watch(n) != 0);
        metrics_gauge_set(o->log_direct, 0, store_log_direct(n->store));
        ctr(o->space_skips, 0, store_space_skips(n->store),
            &o->space_skips_last);
    }
    metrics_gauge_set(o->inflight, 0, n->inflight);
    metrics_gauge_set(o->coord_inflight, 0, n->coord_inflight);
    metrics_gauge_set(o->coord_background, 0, n->coord_background);
}

int node__obs_store_watch(node *n)
{
    struct obs *o = n->obs;
    int failed = n->store ? store_failed(n->store) : 0;
    if (failed && o && !o->store_failed_logged) {
        o->store_failed_logged = true;
        LOG(ERROR, "store.sync_failed",
            "error=\"%s\" note=\"commits or checkpoints fail until "
            "restart; the commit log is kept\"",
            rk_strerror(failed));
    }
    struct store_space_skip sk[STORE_SKIPS_QUEUED];
    size_t nsk =
        n->store ? store_space_skips_take(sk, STORE_SKIPS_QUEUED, n->store) : 0;
    for (size_t i = 0; i < nsk; i++)
        LOG(WARN, "store.job_skipped",
            "job=%s range=%016llx_%016llx need_mb=%llu free_mb=%llu "
            "skips=%llu note=\"not enough disk space; tried again "
            "when there is\"",
            sk[i].job, (unsigned long long)sk[i].r.start,
            (unsigned long long)sk[i].r.end,
            (unsigned long long)(sk[i].need >> 20),
            (unsigned long long)(sk[i].avail >> 20),
            (unsigned long long)sk[i].skips);
    return failed;
}

/* ---- hot path --------------------------------------------------------- */

uint64_t node__obs_now_ns(void)
{
    return uv_hrtime();
}

static bool op_cl_ok(int op, enum node_cl cl)
{
    return op >= 0 && op < NODE_OP_N && (int)cl >= NODE_CL_ONE &&
           (int)cl < NODE_CL_ONE + OBS_NLEVELS;
}

void node__obs_request(
    node *n, int op, enum node_cl cl, int err, uint64_t t0_ns)
{
    struct obs *o = n->obs;
    if (!o || !op_cl_ok(op, cl))
        return;
    (void)err; /* error counts come from node_stats */
    uint64_t now = uv_hrtime();
    uint64_t us = now > t0_ns ? (now - t0_ns) / 1000u : 0;
    metrics_observe_us(
        o->lat,
        metrics_series(o->lat, (size_t)op, (size_t)(cl - NODE_CL_ONE), 0), us);
}

void node__obs_commit(node *n, uint64_t us)
{
    if (n->obs)
        metrics_observe_us(n->obs->commit_lat, 0, us);
}

void node__obs_overloaded(node *n, int op, enum node_cl cl)
{
    struct obs *o = n->obs;
    if (!o || !op_cl_ok(op, cl))
        return;
    metrics_counter_add(o->err,
                        metrics_series(o->err, (size_t)op,
                                       (size_t)(cl - NODE_CL_ONE),
                                       E_OVERLOADED),
                        1);
}

/* ---- publication ------------------------------------------------------ */

char *node__obs_text(node *n, size_t *out_len)
{
    struct obs *o = n->obs;
    if (!o)
        return NULL;
    obs_sync(o);
    char *t = NULL;
    size_t len = 0;
    if (metrics_render(&t, &len, o->m) < 0)
        return NULL;
    *out_len = len;
    return t;
}

static void obs_publish(struct obs *o)
{
    if (!o->http || o->stopped)
        return;
    size_t len;
    char *t = node__obs_text(o->n, &len);
    if (!t)
        return;
    int rc = http_server_publish(o->http, t, len);
    if (rc < 0)
        LOG(WARN, "metrics.publish_fail", "error=\"%s\"", rk_strerror(rc));
}

static void on_timer(uv_timer_t *t)
{
    obs_publish(t->data);
}

static void on_async(uv_async_t *a)
{
    obs_publish(a->data);
}

/* HTTP thread: wake the loop so the next scrape is fresh. */
static void on_scrape(void *arg)
{
    struct obs *o = arg;
    uv_async_send(&o->async);
}

/* ---- life ------------------------------------------------------------- */

static void obs_free(struct obs *o)
{
    metrics_free(o->m);
    free(o);
}

static void on_obs_closed(uv_handle_t *h)
{
    struct obs *o = h->data;
    node *n = o->n;
    if (--o->handles > 0)
        return;
    obs_free(o);
    n->pending_closes--;
    node__stop_progress(n);
}

int node__obs_start(node *n, char *err, size_t errlen)
{
    if (n->obs)
        return 0;
    struct obs *o = calloc(1, sizeof(*o));
    if (!o) {
        snprintf(err, errlen, "metrics: out of memory");
        return -ENOMEM;
    }
    o->n = n;
    int rc = metrics_new(&o->m);
    if (rc == 0)
        rc = obs_register(o);
    if (rc < 0) {
        snprintf(err, errlen, "metrics: cannot create the registry: %s",
                 rk_strerror(rc));
        obs_free(o);
        return rc;
    }
    if (n->cfg.metrics_port != 0) {
        uv_async_init(n->loop, &o->async, on_async);
        o->async.data = o;
        uv_timer_init(n->loop, &o->timer);
        o->timer.data = o;
        o->handles = 2;
        struct http_server_opts ho = HTTP_SERVER_OPTS_INIT;
        ho.address = n->listen_ip;
        ho.port = (uint16_t)n->cfg.metrics_port;
        ho.on_scrape = on_scrape;
        ho.arg = o;
        rc = http_server_start(&o->http, &ho);
        if (rc < 0) {
            snprintf(err, errlen, "metrics_port: cannot listen on %s:%d: %s",
                     n->listen_ip, n->cfg.metrics_port, rk_strerror(rc));
            o->http = NULL;
            n->pending_closes++;
            uv_close((uv_handle_t *)&o->async, on_obs_closed);
            uv_close((uv_handle_t *)&o->timer, on_obs_closed);
            return rc;
        }
        uv_timer_start(&o->timer, on_timer, 0, OBS_PUBLISH_MS);
        n->pending_closes++; /* released when o is freed */
        LOG(INFO, "metrics.listening", "addr=%s:%u", n->listen_ip,
            (unsigned)http_server_port(o->http));
    }
    n->obs = o;
    return 0;
}

void node__obs_stop(node *n)
{
    struct obs *o = n->obs;
    if (!o)
        return;
    n->obs = NULL;
    o->stopped = true;
    http_server_free(o->http); /* joins the HTTP thread: no more sends */
    o->http = NULL;
    if (o->handles == 0) {
        obs_free(o);
        return;
    }
    uv_close((uv_handle_t *)&o->async, on_obs_closed);
    uv_close((uv_handle_t *)&o->timer, on_obs_closed);
}
