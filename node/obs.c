/*
 * obs.c - the daemon's metrics registry, its sources and its publication
 * (see obs.h).
 *
 * Two kinds of source. The hot path (coordinator completions, admission
 * control) updates the registry directly: an array increment, no lock, no
 * allocation. Everything else is already counted elsewhere (node_stats,
 * coord_stats,
 * gossip_stats, the peer table, the ring, the store) and is copied into
 * the registry by obs_sync() just before each render: cumulative counters
 * by their delta since the last sync, gauges by value. Rendering and the
 * HTTP server both run on the loop thread; the server sends the string
 * published last.
 *
 * Streaming (joins, leaves) and repair are exported as records and bytes
 * in and out.
 */
#include "node/obs.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/metrics.h"
#include "gossip/gossip.h"
#include "net/http.h"
#include "net/net.h"
#include "node/auth_delay.h"
#include "node/clients.h"
#include "node/coord_node.h"
#include "node/daemon.h"
#include "node/log.h"
#include "node/purge.h"
#include "node/repair_host.h"
#include "node/replica.h"
#include "node/ring_view.h"
#include "node/rsrv.h"
#include "repair/repair.h"
#include "ring/ring.h"
#include "storage/store.h"
#include "streaming/streaming.h"

#define OBS_PUBLISH_MS 1000
#define NODE_STR_(x)   #x
#define NODE_STR(x)    NODE_STR_(x)
#define OBS_NLEVELS    7 /* COORD_CL_ONE .. COORD_CL_EACH_QUORUM */

enum { E_UNAVAILABLE = 0, E_TIMEOUT, E_OVERLOADED, E_N };

struct obs {
    node *n;
    metrics *m;
    http_server *http;
    uv_timer_t timer;
    int handles; /* open libuv handles and the http server; freed at 0 */
    bool stopped;

    metrics_family *req, *lat, *err;
    metrics_family *overloaded, *stale, *stale_waits, *replans, *repairs,
        *hedges, *digest_mismatches, *passed_over, *unsent, *placement;
    metrics_family *hints_stored, *hints_replayed, *hints_dropped;
    metrics_family *writes_refused, *clock_skew;
    metrics_family *clock_skewed, *clock_offset, *clock_skew_writes;
    metrics_family *gossip_in, *gossip_out, *gossip_bad, *gossip_auth;
    metrics_family *gossip_wrong, *gossip_malformed, *gossip_msgs;
    metrics_family *gossip_replayed, *gossip_withheld;
    metrics_family *peers, *epoch, *fp, *ring_stale, *ring_nodes, *repl_diff,
        *repl_version;
    metrics_family *owned, *ranges, *keys, *bytes, *mem_writes, *mem_bytes;
    metrics_family *store_failed, *log_direct, *space_skips, *mem_reads;
    uint64_t mem_reads_last;
    metrics_family *cache_bytes, *cache_entries, *cache_hits, *cache_misses;
    uint64_t cache_hits_last, cache_misses_last;
    bool store_failed_logged;
    uint64_t space_skips_last;
    metrics_family *disk_full, *disk_free, *disk_reserve, *disk_refused;
    metrics_family *disk_late;
    uint64_t disk_refused_last;
    /* disk_watch: short of disk space since (loop ms), last logged, and
     * writes refused (store and coordinator) at the last line */
    bool disk_short;
    uint64_t disk_since_ms, disk_logged_ms, disk_refused_logged;
    uint64_t disk_refused_start;
    uint64_t disk_episodes;
    metrics_family *inflight, *coord_inflight, *coord_background;
    metrics_family *conns_total, *conns_open, *bad_frames, *resp_perr;
    metrics_family *http_closed, *http_unauth;
    uint64_t http_evicted_last, http_timeouts_last, http_unauth_last;
    metrics_family *clients_refused;
    metrics_family *tls_refused, *tls_reloads, *inode_tls_refused;
    uint64_t tls_refused_last[2], tls_reloads_last[2];
    uint64_t inode_tls_refused_last[NET_TLS_FAIL_COUNT];
    metrics_family *input_refused, *input_bytes, *input_waits;
    uint64_t input_waits_last;
    metrics_family *auth_fail, *auth_delayed, *auth_evicted, *noperm;
    uint64_t auth_evicted_last;
    metrics_family *commits, *commit_writes, *commit_lat;
    metrics_family *rep_writes, *rep_reads, *rep_scans, *rep_old_ring;
    metrics_family *inode_auth, *inode_bad;
    metrics_family *stream_keys, *stream_bytes, *repair_keys, *repair_bytes;
    metrics_family *purged, *purge_cycles, *purge_compactions;
    metrics_family *repair_arcs, *repair_oldest, *repair_sched_runs;
    struct node_purge_stats plast;
    uint64_t sched_runs_last, sched_failed_last;

    /* what was copied at the last sync */
    struct node_stats last;
    struct coord_stats clast;
    struct gossip_stats glast;
    struct repair_stats rlast;
    struct stream_stats slast;
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
        levels[c] = node_cl_name((enum coord_cl)(c + COORD_CL_ONE));
    struct metrics_dim op_level[3] = {
        {"op", COORD_OP_N, op_names},
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
    static const char *const why[] = {"preauth_too_large", "frame_timeout"};
    struct metrics_dim d_why = {"why", 2, why};
    static const char *const tlsport[] = {"client", "metrics"};
    struct metrics_dim d_tlsport = {"port", 2, tlsport};
    const char *tlsfail[NET_TLS_FAIL_COUNT];
    for (int i = 0; i < NET_TLS_FAIL_COUNT; i++)
        tlsfail[i] = net_tls_fail_name((enum net_tls_fail)i);
    struct metrics_dim d_tlsfail = {"reason", NET_TLS_FAIL_COUNT, tlsfail};
    static const char *const okfail[] = {"ok", "failed"};
    struct metrics_dim d_result = {"result", 2, okfail};
    static const char *const inout[] = {"in", "out"};
    static const char *const hwhy[] = {"evicted", "request_timeout"};
    struct metrics_dim d_hwhy = {"why", 2, hwhy};
    struct metrics_dim d_dir = {"direction", 2, inout};
    static const char *const by[] = {"store", "coordinator"};
    struct metrics_dim d_by = {"by", 2, by};
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
      "Coordinator request latency (from the read that brought the request to "
      "its reply, any outcome).",
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
    F(replans, "ringkv_ring_stale_replans_total",
      "Requests a replica refused as planned on an older ring than its own "
      "(OLD_RING): they waited for the newer ring and were planned again.",
      METRICS_COUNTER, 0, NULL);
    static const char *const placed[] = {"other", "replica"};
    struct metrics_dim d_placed = {"coordinator", 2, placed};
    F(placement, "ringkv_coordinated_requests_total",
      "Data requests (GET, PUT, DEL, each key of an MGET) this node "
      "coordinated, by whether it is a replica of the key (a token-aware "
      "client sends each key to one) or another node.",
      METRICS_COUNTER, 1, &d_placed);
    F(repairs, "ringkv_read_repairs_total",
      "Replica writes made by read repair.", METRICS_COUNTER, 0, NULL);
    F(digest_mismatches, "ringkv_read_digest_mismatches_total",
      "Reads asked again for the replicas' records because a digest "
      "answer could not be ordered without its value (a replica newer than "
      "the record read, or as new with another value).",
      METRICS_COUNTER, 0, NULL);
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
    F(clock_skewed, "ringkv_clock_skewed",
      "1 while most live peers see this node's clock further off than "
      "max_clock_drift_ms: it coordinates no writes (CLOCK_SKEW).",
      METRICS_GAUGE, 0, NULL);
    F(clock_offset, "ringkv_clock_offset_ms",
      "This node's wall clock minus its live peers' (the median of their "
      "estimates from gossip; 0 with none).",
      METRICS_GAUGE, 0, NULL);
    F(clock_skew_writes, "ringkv_clock_skew_writes_refused_total",
      "Writes this node refused to coordinate (CLOCK_SKEW) because its "
      "clock was skewed or its timestamps ahead of its wall clock.",
      METRICS_COUNTER, 0, NULL);
    F(gossip_in, "ringkv_gossip_packets_in_total", "Gossip packets received.",
      METRICS_COUNTER, 0, NULL);
    F(gossip_out, "ringkv_gossip_packets_out_total", "Gossip packets sent.",
      METRICS_COUNTER, 0, NULL);
    F(gossip_bad, "ringkv_gossip_packets_rejected_total",
      "Gossip packets dropped (bad MAC, other cluster, malformed, "
      "replayed).",
      METRICS_COUNTER, 0, NULL);
    F(gossip_auth, "ringkv_gossip_auth_failures_total",
      "Gossip packets with a bad MAC.", METRICS_COUNTER, 0, NULL);
    F(gossip_wrong, "ringkv_gossip_wrong_cluster_total",
      "Gossip packets of another cluster.", METRICS_COUNTER, 0, NULL);
    F(gossip_malformed, "ringkv_gossip_malformed_total",
      "Gossip packets that did not decode.", METRICS_COUNTER, 0, NULL);
    F(gossip_replayed, "ringkv_gossip_replayed_total",
      "Gossip packets dropped as replays: seen already, of an older boot of "
      "their sender, too far behind its newest, or unnumbered from a node "
      "that numbers its packets.",
      METRICS_COUNTER, 0, NULL);
    F(gossip_withheld, "ringkv_gossip_replies_withheld_total",
      "Gossip replies not sent to a sender that is not a known member: "
      "more bytes than its packet.",
      METRICS_COUNTER, 0, NULL);
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
    F(repl_version, "ringkv_replication_version",
      "Version of the replication setting this node uses (`ringkv "
      "replication set`: Unix ms; 0: the config file's). Equal on every "
      "node once a change has spread.",
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
    F(mem_reads, "ringkv_memtable_reads_total",
      "Reads answered by the memtable alone: its record was known to be at "
      "least as new as the range environment's, which was not read "
      "(docs/storage.md).",
      METRICS_COUNTER, 0, NULL);
    F(cache_bytes, "ringkv_read_cache_bytes",
      "Memory held by the read cache of stored records (bound: "
      "read_cache_mb).",
      METRICS_GAUGE, 0, NULL);
    F(cache_entries, "ringkv_read_cache_entries",
      "Keys whose stored record (or its absence) the read cache holds.",
      METRICS_GAUGE, 0, NULL);
    F(cache_hits, "ringkv_read_cache_hits_total",
      "Reads that took the stored record from the read cache instead of "
      "the range environment (docs/storage.md).",
      METRICS_COUNTER, 0, NULL);
    F(cache_misses, "ringkv_read_cache_misses_total",
      "Reads that looked in the read cache and read the range environment.",
      METRICS_COUNTER, 0, NULL);
    F(store_failed, "ringkv_storage_failed",
      "1 after a commit log or range env sync failed: commits or "
      "checkpoints fail until the node is restarted (docs/storage.md).",
      METRICS_GAUGE, 0, NULL);
    F(space_skips, "ringkv_storage_jobs_skipped_total",
      "Range jobs (compaction, cleanup's keep, split) skipped for lack of "
      "disk space; a skipped compaction is tried again every few seconds "
      "(docs/storage.md).",
      METRICS_COUNTER, 0, NULL);
    F(disk_full, "ringkv_disk_full",
      "1 while this node is short of disk space: it refuses writes "
      "(FULL) that need a copy on its disk, as replica and as coordinator "
      "(disk_reserve_mb; docs/storage.md).",
      METRICS_GAUGE, 0, NULL);
    F(disk_free, "ringkv_disk_free_bytes",
      "Bytes free for the store: the least of data_dir's file system and "
      "the commit log's, as last looked at (once a second).",
      METRICS_GAUGE, 0, NULL);
    F(disk_reserve, "ringkv_disk_reserve_bytes",
      "disk_reserve_mb in bytes: writes that would leave less free are "
      "refused.",
      METRICS_GAUGE, 0, NULL);
    F(disk_refused, "ringkv_disk_full_writes_refused_total",
      "Writes refused for lack of disk space (disk_reserve_mb): by the "
      "store (replica writes, hints replayed to it, streaming, repair) and "
      "by the coordinator (client writes of keys this node replicates).",
      METRICS_COUNTER, 1, &d_by);
    F(disk_late, "ringkv_disk_full_acked_without_local_total",
      "Writes acknowledged at their level by other replicas before this "
      "node's own copy was refused for lack of disk space (its margin "
      "used up by writes in flight): repair brings them here.",
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
    F(tls_refused, "ringkv_tls_refused_total",
      "TLS handshakes refused (plaintext, an untrusted or invalid "
      "certificate, a peer that closed in the handshake), by port.",
      METRICS_COUNTER, 1, &d_tlsport);
    F(tls_reloads, "ringkv_tls_reloads_total",
      "Reloads of the TLS certificates (SIGHUP, ringkv reloadtls), by "
      "result: failed keeps the certificates loaded before.",
      METRICS_COUNTER, 1, &d_result);
    F(inode_tls_refused, "ringkv_internode_tls_refused_total",
      "Internode connections refused in TLS (internode_tls: required), "
      "either side, by reason: plaintext, wrong_ca, expired, "
      "not_yet_valid, no_cert, name_mismatch (the certificate is not the "
      "node's the peer proved to be), peer_refused (it refused ours), "
      "closed, timeout, other.",
      METRICS_COUNTER, 1, &d_tlsfail);
    F(input_refused, "ringkv_client_input_refused_total",
      "Client connections closed for their input: a frame or request over "
      "what may come before authentication, or part of one idle past "
      "client_frame_timeout_s.",
      METRICS_COUNTER, 1, &d_why);
    F(input_bytes, "ringkv_client_input_buffer_bytes",
      "Client input buffer bytes charged to max_input_buffer_mb.",
      METRICS_GAUGE, 0, NULL);
    F(input_waits, "ringkv_client_input_budget_waits_total",
      "Times a client connection stopped reading until other input buffers "
      "drained (max_input_buffer_mb).",
      METRICS_COUNTER, 0, NULL);
    F(http_closed, "ringkv_metrics_connections_closed_total",
      "Connections to metrics_port closed before their request arrived "
      "whole: evicted to admit a new one past 32, or not whole within 5 s "
      "of its first byte.",
      METRICS_COUNTER, 1, &d_hwhy);
    F(http_unauth, "ringkv_metrics_unauthorized_total",
      "Scrapes of /metrics refused (401) for missing or wrong credentials "
      "(metrics_password).",
      METRICS_COUNTER, 0, NULL);
    F(bad_frames, "ringkv_client_bad_frames_total",
      "Malformed native protocol frames.", METRICS_COUNTER, 0, NULL);
    F(resp_perr, "ringkv_resp_protocol_errors_total",
      "RESP connections closed for a protocol error.", METRICS_COUNTER, 0,
      NULL);
    F(auth_fail, "ringkv_client_auth_failures_total", "Wrong client passwords.",
      METRICS_COUNTER, 0, NULL);
    F(noperm, "ringkv_client_noperm_total",
      "Admin commands refused to a client without the admin role (NOPERM).",
      METRICS_COUNTER, 0, NULL);
    F(auth_delayed, "ringkv_client_auth_delayed",
      "Answers to authentications waiting now (a failed one's, or one "
      "behind failures from the same address).",
      METRICS_GAUGE, 0, NULL);
    F(auth_evicted, "ringkv_client_auth_sources_evicted_total",
      "Client addresses forgotten by the failed authentications' table to "
      "make room for others.",
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
    F(rep_scans, "ringkv_replica_scans_total",
      "Replica SCAN answers (keys of an arc) computed for coordinators, "
      "this node's own included.",
      METRICS_COUNTER, 0, NULL);
    F(rep_old_ring, "ringkv_replica_old_ring_total",
      "Replica reads, writes and scans refused (OLD_RING): the coordinator "
      "planned them on an older ring epoch than this node's, and plans them "
      "again once it has the newer ring.",
      METRICS_COUNTER, 0, NULL);
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
    static const char *const pkind[] = {"tombstone", "expired"};
    struct metrics_dim d_pkind = {"kind", 2, pkind};
    F(purged, "ringkv_storage_purged_total",
      "Records purged: tombstones and expired values dead for "
      "gc_grace_seconds in arcs repaired with every replica since they "
      "were written.",
      METRICS_COUNTER, 1, &d_pkind);
    F(purge_cycles, "ringkv_purge_cycles_total",
      "Purge cycles finished (every purge_interval_s).", METRICS_COUNTER, 0,
      NULL);
    F(purge_compactions, "ringkv_purge_compactions_total",
      "Range environments compacted after a purge took an eighth of their "
      "entries or more.",
      METRICS_COUNTER, 0, NULL);
    static const char *const astate[] = {"replicated", "never_repaired",
                                         "overdue", "unpurgeable"};
    struct metrics_dim d_astate = {"state", 4, astate};
    F(repair_arcs, "ringkv_repair_arcs",
      "Arcs this node replicates; of them never repaired with every "
      "replica, overdue (not repaired within repair_interval_s), and skipped "
      "by the last purge (not repaired completely yet).",
      METRICS_GAUGE, 1, &d_astate);
    F(repair_oldest, "ringkv_repair_oldest_arc_age_seconds",
      "The longest any arc of this node has gone since its last complete "
      "repair (or since the node first replicated it).",
      METRICS_GAUGE, 0, NULL);
    static const char *const sres[] = {"started", "failed"};
    struct metrics_dim d_sres = {"result", 2, sres};
    F(repair_sched_runs, "ringkv_repair_scheduled_total",
      "Scheduled repair sessions (repair_interval_s) started, and those that "
      "ended with a failure.",
      METRICS_COUNTER, 1, &d_sres);
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
    const struct coord_stats *cs = node__coord_stats(n);
    struct coord_stats *cprev = &o->clast;
    for (int op = 0; op < COORD_OP_N; op++) {
        for (int c = 0; c < OBS_NLEVELS; c++) {
            int cl = c + COORD_CL_ONE;
            ctr(o->req, metrics_series(o->req, (size_t)op, (size_t)c, 0),
                cs->req[op][cl], &cprev->req[op][cl]);
            ctr(o->err,
                metrics_series(o->err, (size_t)op, (size_t)c, E_UNAVAILABLE),
                cs->unavailable[op][cl], &cprev->unavailable[op][cl]);
            ctr(o->err,
                metrics_series(o->err, (size_t)op, (size_t)c, E_TIMEOUT),
                cs->timeout[op][cl], &cprev->timeout[op][cl]);
        }
    }
    ctr(o->overloaded, 0, s->overloaded, &l->overloaded); /* clients' */
    ctr(o->overloaded, 0, cs->overloaded, &cprev->overloaded);
    ctr(o->stale, 0, cs->stale, &cprev->stale);
    ctr(o->stale_waits, 0, cs->stale_waits, &cprev->stale_waits);
    ctr(o->replans, 0, cs->replans, &cprev->replans);
    for (int k = 0; k < 2; k++)
        ctr(o->placement, (size_t)k, cs->placement[k], &cprev->placement[k]);
    ctr(o->repairs, 0, cs->read_repairs, &cprev->read_repairs);
    ctr(o->hedges, 0, cs->read_hedges, &cprev->read_hedges);
    ctr(o->digest_mismatches, 0, cs->read_digest_mismatches,
        &cprev->read_digest_mismatches);
    ctr(o->passed_over, 0, cs->read_passed_over, &cprev->read_passed_over);
    ctr(o->unsent, 0, cs->writes_unsent, &cprev->writes_unsent);
    ctr(o->hints_stored, 0, s->hints_stored, &l->hints_stored);
    ctr(o->hints_replayed, 0, s->hints_replayed, &l->hints_replayed);
    ctr(o->hints_dropped, 0, s->hints_dropped, &l->hints_dropped);
    ctr(o->writes_refused, 0, cs->writes_refused, &cprev->writes_refused);
    ctr(o->clock_skew, 0, s->clock_skew_refused, &l->clock_skew_refused);
    ctr(o->clock_skew_writes, 0, s->clock_skew_writes, &l->clock_skew_writes);
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
        ctr(o->gossip_replayed, 0, gs.rx_replayed, &o->glast.rx_replayed);
        ctr(o->gossip_withheld, 0, gs.replies_withheld,
            &o->glast.replies_withheld);
        ctr(o->gossip_msgs, 0, gs.rx_syn, &o->glast.rx_syn);
        ctr(o->gossip_msgs, 1, gs.rx_ack, &o->glast.rx_ack);
        ctr(o->gossip_msgs, 2, gs.rx_ack2, &o->glast.rx_ack2);
    }
    ctr(o->conns_total, 0, s->client_conns, &l->client_conns);
    ctr(o->bad_frames, 0, s->client_bad_frames, &l->client_bad_frames);
    ctr(o->clients_refused, 0, s->clients_refused, &l->clients_refused);
    ctr(o->tls_refused, 0, n->tls.refused_clients, &o->tls_refused_last[0]);
    ctr(o->tls_refused, 1, n->tls.refused_metrics, &o->tls_refused_last[1]);
    ctr(o->tls_reloads, 0, n->tls.reloads, &o->tls_reloads_last[0]);
    ctr(o->tls_reloads, 1, n->tls.reload_failed, &o->tls_reloads_last[1]);
    for (size_t i = 0; i < NET_TLS_FAIL_COUNT; i++)
        ctr(o->inode_tls_refused, i, n->tls.inode_refused[i],
            &o->inode_tls_refused_last[i]);
    ctr(o->input_refused, 0, s->client_preauth_refused,
        &l->client_preauth_refused);
    ctr(o->input_refused, 1, s->client_frame_timeouts,
        &l->client_frame_timeouts);
    if (n->clients.budget) {
        metrics_gauge_set(o->input_bytes, 0,
                          (int64_t)net_budget_used(n->clients.budget));
        ctr(o->input_waits, 0, net_budget_waits(n->clients.budget),
            &o->input_waits_last);
    }
    ctr(o->auth_fail, 0, s->client_auth_fail, &l->client_auth_fail);
    ctr(o->noperm, 0, s->client_noperm, &l->client_noperm);
    metrics_gauge_set(o->auth_delayed, 0, (int64_t)n->auth.nwaits);
    ctr(o->auth_evicted, 0, node__auth_evictions(n), &o->auth_evicted_last);
    ctr(o->commits, 0, s->commits, &l->commits);
    ctr(o->commit_writes, 0, s->commit_writes, &l->commit_writes);
    ctr(o->rep_writes, 0, s->replica_writes, &l->replica_writes);
    ctr(o->rep_reads, 0, s->replica_reads, &l->replica_reads);
    ctr(o->rep_scans, 0, s->replica_scans, &l->replica_scans);
    ctr(o->rep_old_ring, 0, s->replica_old_ring, &l->replica_old_ring);
    ctr(o->inode_auth, 0, s->internode_auth_fail, &l->internode_auth_fail);
    ctr(o->inode_bad, 0, s->internode_bad, &l->internode_bad);
    struct repair_stats rs;
    node__repair_stats(n, &rs);
    ctr(o->repair_keys, 0, rs.keys_in, &o->rlast.keys_in);
    ctr(o->repair_keys, 1, rs.keys_out, &o->rlast.keys_out);
    ctr(o->repair_bytes, 0, rs.bytes_in, &o->rlast.bytes_in);
    ctr(o->repair_bytes, 1, rs.bytes_out, &o->rlast.bytes_out);
    struct node_purge_stats ps;
    node__purge_stats(n, &ps);
    ctr(o->purged, 0, ps.tombstones, &o->plast.tombstones);
    ctr(o->purged, 1, ps.expired, &o->plast.expired);
    ctr(o->purge_cycles, 0, ps.cycles, &o->plast.cycles);
    ctr(o->purge_compactions, 0, ps.compactions, &o->plast.compactions);
    struct repair_sched_stats rss;
    node__repair_sched_stats(n, &rss);
    metrics_gauge_set(o->repair_arcs, 0, (int64_t)rss.arcs);
    metrics_gauge_set(o->repair_arcs, 1, (int64_t)rss.never);
    metrics_gauge_set(o->repair_arcs, 2, (int64_t)rss.overdue);
    metrics_gauge_set(o->repair_arcs, 3, (int64_t)ps.arcs_unrepaired);
    metrics_gauge_set(o->repair_oldest, 0, (int64_t)(rss.oldest_age_ms / 1000));
    ctr(o->repair_sched_runs, 0, rss.runs, &o->sched_runs_last);
    ctr(o->repair_sched_runs, 1, rss.runs_failed, &o->sched_failed_last);
    struct stream_stats ss;
    stream_stats_get(n->streaming, &ss);
    ctr(o->stream_keys, 0, ss.in_keys, &o->slast.in_keys);
    ctr(o->stream_keys, 1, ss.out_keys, &o->slast.out_keys);
    ctr(o->stream_bytes, 0, ss.in_bytes, &o->slast.in_bytes);
    ctr(o->stream_bytes, 1, ss.out_bytes, &o->slast.out_bytes);
    uint64_t acc, perr;
    node__rsrv_counts(n, &acc, &perr);
    ctr(o->conns_total, 1, acc, &o->resp_acc_last);
    ctr(o->resp_perr, 0, perr, &o->resp_perr_last);
    if (o->http) {
        ctr(o->http_closed, 0, http_server_evicted(o->http),
            &o->http_evicted_last);
        ctr(o->http_closed, 1, http_server_timeouts(o->http),
            &o->http_timeouts_last);
        ctr(o->http_unauth, 0, http_server_unauthorized(o->http),
            &o->http_unauth_last);
    }
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
    metrics_gauge_set(o->clock_skewed, 0, n->clock.skewed ? 1 : 0);
    metrics_gauge_set(o->clock_offset, 0, n->clock.offset_ms);
    metrics_gauge_set(o->ring_nodes, 0,
                      n->ring ? (int64_t)ring_node_count(n->ring) : 0);
    metrics_gauge_set(o->repl_diff, 0, (int64_t)node__repl_mismatches(n));
    metrics_gauge_set(o->repl_version, 0, (int64_t)n->st.repl_version);
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
        ctr(o->mem_reads, 0, mi.known_reads, &o->mem_reads_last);
        metrics_gauge_set(o->cache_bytes, 0, (int64_t)mi.cache_bytes);
        metrics_gauge_set(o->cache_entries, 0, (int64_t)mi.cache_entries);
        ctr(o->cache_hits, 0, mi.cache_hits, &o->cache_hits_last);
        ctr(o->cache_misses, 0, mi.cache_misses, &o->cache_misses_last);
        metrics_gauge_set(o->store_failed, 0, node__obs_store_watch(n) != 0);
        metrics_gauge_set(o->log_direct, 0, store_log_direct(n->store));
        ctr(o->space_skips, 0, store_space_skips(n->store),
            &o->space_skips_last);
        struct store_space_info si;
        store_space_info(&si, n->store);
        metrics_gauge_set(o->disk_full, 0, node__disk_full(n));
        metrics_gauge_set(o->disk_free, 0, (int64_t)si.avail);
        metrics_gauge_set(o->disk_reserve, 0, (int64_t)si.reserve);
        ctr(o->disk_refused, 0, si.refused, &o->disk_refused_last);
    }
    ctr(o->disk_refused, 1, cs->writes_full, &cprev->writes_full);
    ctr(o->disk_late, 0, cs->local_full_late, &cprev->local_full_late);
    metrics_gauge_set(o->inflight, 0, n->clients.inflight);
    metrics_gauge_set(o->coord_inflight, 0, cs->inflight);
    metrics_gauge_set(o->coord_background, 0, cs->background);
}

#define DISK_LOG_MS 60000 /* a line a minute while short of space */

/* Short of disk space (node__disk_full): logged when it starts, once a
 * minute while it lasts (with the writes refused since the last line),
 * and when it ends (with those of the whole time). An episode of the
 * store that began and ended between two calls counts as one. */
static void disk_watch(node *n, struct obs *o)
{
    struct store_space_info si;
    store_space_info(&si, n->store);
    const struct coord_stats *cs = node__coord_stats(n);
    bool short_now = node__disk_full(n) || si.episodes != o->disk_episodes;
    o->disk_episodes = si.episodes;
    uint64_t now = node__mono_ms(n), refused = si.refused + cs->writes_full;
    unsigned long long free_mb = si.avail >> 20, reserve_mb = si.reserve >> 20;
    if (short_now && !o->disk_short) {
        o->disk_short = true;
        o->disk_since_ms = o->disk_logged_ms = now;
        o->disk_refused_logged = o->disk_refused_start = refused;
        LOG(ERROR, "store.disk_full",
            "free_mb=%llu reserve_mb=%llu data_dir=%s note=\"disk full: "
            "writes of keys this node replicates are refused (FULL) until "
            "free space is back over disk_reserve_mb; coordinators keep "
            "hints for it; reads go on\"",
            free_mb, reserve_mb, n->cfg.data_dir);
    } else if (short_now && now - o->disk_logged_ms >= DISK_LOG_MS) {
        LOG(WARN, "store.disk_full",
            "free_mb=%llu reserve_mb=%llu refused=%llu for_s=%llu", free_mb,
            reserve_mb, (unsigned long long)(refused - o->disk_refused_logged),
            (unsigned long long)((now - o->disk_since_ms) / 1000));
        o->disk_logged_ms = now;
        o->disk_refused_logged = refused;
    } else if (!short_now && o->disk_short) {
        o->disk_short = false;
        LOG(WARN, "store.disk_ok",
            "free_mb=%llu reserve_mb=%llu refused=%llu for_s=%llu "
            "note=\"writes are taken again\"",
            free_mb, reserve_mb,
            (unsigned long long)(refused - o->disk_refused_start),
            (unsigned long long)((now - o->disk_since_ms) / 1000));
    }
}

int node__obs_store_watch(node *n)
{
    struct obs *o = n->obs;
    int failed = n->store ? store_failed(n->store) : 0;
    if (n->store && o)
        disk_watch(n, o);
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

static bool op_cl_ok(int op, enum coord_cl cl)
{
    return op >= 0 && op < COORD_OP_N && (int)cl >= COORD_CL_ONE &&
           (int)cl < COORD_CL_ONE + OBS_NLEVELS;
}

void node__obs_request(
    node *n, int op, enum coord_cl cl, int err, uint64_t t0_ns)
{
    struct obs *o = n->obs;
    if (!o || !op_cl_ok(op, cl))
        return;
    (void)err; /* error counts come from node_stats */
    uint64_t now = rk_clock_mono_fresh_ns(); /* t0's clock (coord_node.c) */
    uint64_t us = now > t0_ns ? (now - t0_ns) / 1000u : 0;
    metrics_observe_us(
        o->lat,
        metrics_series(o->lat, (size_t)op, (size_t)(cl - COORD_CL_ONE), 0), us);
}

void node__obs_commit(node *n, uint64_t us)
{
    if (n->obs)
        metrics_observe_us(n->obs->commit_lat, 0, us);
}

void node__obs_overloaded(node *n, int op, enum coord_cl cl)
{
    struct obs *o = n->obs;
    if (!o || !op_cl_ok(op, cl))
        return;
    metrics_counter_add(o->err,
                        metrics_series(o->err, (size_t)op,
                                       (size_t)(cl - COORD_CL_ONE),
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

/* A scrape was answered (on the loop): the next one sees fresh values. */
static void on_scrape(void *arg)
{
    obs_publish(arg);
}

/* /health/ready: ready when this node serves what a client asks of it,
 * i.e. it is a NORMAL member of the ring it applied, has caught up with the
 * newest ring it heard of, has had its clock judged and not found skewed,
 * and its store syncs. Anything else is 503 with the first reason. */
static bool on_health(void *arg, char *text, size_t cap)
{
    struct obs *o = arg;
    node *n = o->n;
    uint32_t self =
        n->ring ? ring_node_find(n->ring, n->cfg.node_name) : RING_NONE;
    struct ring_node_info ni = {.state = RING_BOOT};
    if (self != RING_NONE)
        ring_node_get(n->ring, &ni, self);
    const char *why = NULL;
    if (n->stopping)
        why = "stopping";
    else if (self == RING_NONE)
        why = "not in the ring yet";
    else if (ni.state == RING_BOOT)
        why = "joining";
    else if (ni.state == RING_LEAVING)
        why = "leaving";
    else if (n->ring_stale)
        why = n->settling ? "settling after a restart (no peer heard yet)"
                          : "catching up with a newer ring";
    else if (!n->clock.judged)
        why = "clock not yet compared with the peers'";
    else if (n->clock.skewed)
        why = "clock skewed (writes refused)";
    else if (n->store && store_failed(n->store))
        why = "storage failed (restart the node)";
    if (why) {
        snprintf(text, cap, "not ready: %s", why);
        return false;
    }
    snprintf(text, cap, "ready: NORMAL, serving");
    return true;
}

/* HTTP basic credentials of a scrape (metrics_password set). */
static bool metrics_authorize(void *arg,
                              const uint8_t *user,
                              size_t ulen,
                              const uint8_t *pass,
                              size_t plen)
{
    struct obs *o = arg;
    return node_users_metrics_ok(&o->n->users, RK_SLICE(user, ulen),
                                 RK_SLICE(pass, plen));
}

/* A refused HTTPS handshake on metrics_port (metrics_tls: required). */
static void metrics_tls_refused(void *arg,
                                const char *peer,
                                enum net_tls_fail reason,
                                const char *why)
{
    struct obs *o = arg;
    node *n = o->n;
    n->tls.refused_metrics++;
    LOG_LIMITED(&n->loglim.tls_refused, node__mono_ms(n), WARN,
                "metrics.tls_refused", "peer=%s reason=%s why=\"%s\"", peer,
                net_tls_fail_name(reason), why);
}

/* ---- life ------------------------------------------------------------- */

static void obs_free(struct obs *o)
{
    metrics_free(o->m);
    free(o);
}

static void obs_part_closed(struct obs *o)
{
    node *n = o->n;
    if (--o->handles > 0)
        return;
    obs_free(o);
    n->pending_closes--;
    node__stop_progress(n);
}

static void on_obs_closed(uv_handle_t *h)
{
    obs_part_closed(h->data);
}

static void on_http_closed(void *arg)
{
    obs_part_closed(arg);
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
        uv_timer_init(n->loop, &o->timer);
        o->timer.data = o;
        o->handles = 1;
        struct http_server_opts ho = HTTP_SERVER_OPTS_INIT;
        ho.address = n->listen_ip;
        ho.port = (uint16_t)n->cfg.metrics_port;
        ho.on_scrape = on_scrape;
        ho.health = on_health;
        ho.arg = o;
        if (n->cfg.metrics_address[0])
            ho.address = n->cfg.metrics_address;
        if (n->users.metrics.set)
            ho.authorize = metrics_authorize;
        if (n->cfg.metrics_tls == NODE_CLIENT_TLS_REQUIRED) {
            ho.tls = n->tls.ctx.ports; /* node__tls_load ran before */
            ho.on_tls_fail = metrics_tls_refused;
        }
        rc = http_server_start(&o->http, n->loop, &ho);
        if (rc < 0) {
            snprintf(err, errlen, "metrics_port: cannot listen on %s:%d: %s",
                     ho.address, n->cfg.metrics_port, rk_strerror(rc));
            o->http = NULL;
            n->pending_closes++;
            uv_close((uv_handle_t *)&o->timer, on_obs_closed);
            return rc;
        }
        o->handles++; /* the http server, until its close is done */
        uv_timer_start(&o->timer, on_timer, 0, OBS_PUBLISH_MS);
        n->pending_closes++; /* released when o is freed */
        LOG(INFO, "metrics.listening", "addr=%s:%u tls=%s", ho.address,
            (unsigned)http_server_port(o->http), ho.tls ? "on" : "off");
    }
    n->obs = o;
    return 0;
}

int node__obs_tls_set(node *n, net_tls *tls)
{
    if (!n->obs || !n->obs->http ||
        n->cfg.metrics_tls != NODE_CLIENT_TLS_REQUIRED)
        return 0;
    return http_server_tls_set(n->obs->http, tls);
}

void node__obs_stop(node *n)
{
    struct obs *o = n->obs;
    if (!o)
        return;
    n->obs = NULL;
    o->stopped = true;
    if (o->handles == 0) {
        obs_free(o);
        return;
    }
    http_server_free(o->http, on_http_closed, o); /* o->handles-- when done */
    o->http = NULL;
    uv_close((uv_handle_t *)&o->timer, on_obs_closed);
}
