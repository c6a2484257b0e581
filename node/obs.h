/*
 * obs.h - the daemon's metrics: one common/metrics.h registry fed from the
 * coordinator's hot path (latency histograms, per-level error counts) and
 * from the node's counters (node_stats, gossip, peers, ring, store), served
 * as Prometheus text on metrics_port by net/http.h and returned by the
 * native METRICS admin op (`ringkv metrics`).
 *
 * Publishing: the loop renders the registry and publishes the text every
 * second, and again right after a scrape (the server's on_scrape, on the
 * loop), so a scrape sees values at most one second old and two scrapes in
 * a row see the second one fresh.
 *
 * Not a public header: only node/'s files include it. Everything runs on
 * the loop thread, the http server included.
 */
#ifndef NODE_OBS_H
#define NODE_OBS_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "net/tls.h"
#include "node/config.h"
#include "node/node.h"

/* Create the registry and, when metrics_port is not 0, start the HTTP
 * server on listen_address:metrics_port and the publish timer. 0, or an
 * error with a message in err (nothing left open). */
int node__obs_start(node *n, char *err, size_t errlen);

/* HTTPS on metrics_port from now on with tls (a certificate's reload):
 * 0 when metrics_tls is off or the port closed. */
int node__obs_tls_set(node *n, net_tls *tls);

/* Stop the HTTP server and the timer; the registry is freed once the
 * server and the handles are closed (node_stop waits: pending_closes). Hooks
 * called after this do nothing. Safe when not started, and twice. */
void node__obs_stop(node *n);

/* Hot path: a coordinator request (op: COORD_OP_*) at level cl finished
 * with err (0, RK_ENOTFOUND, RK_ETIMEOUT, ...) after starting at t0_ns. */
void node__obs_request(
    node *n, int op, enum coord_cl cl, int err, uint64_t t0_ns);

/* A group commit (log write, sync, memtable) took `us` on the committer. */
void node__obs_commit(node *n, uint64_t us);

/* Admission control shed a request of op at level cl (either server). */
void node__obs_overloaded(node *n, int op, enum coord_cl cl);

/* The store's sticky failure (a failed log or env sync: store_failed), 0
 * if none; logs `store.sync_failed` the first time it sees one, and
 * `store.job_skipped` for each range job the store reports skipped for
 * lack of disk space (store_space_skips_take: once a minute per range at
 * most). Called every gossip tick, so the log lines do not wait for a
 * metrics scrape. */
int node__obs_store_watch(node *n);

/* The current Prometheus text (fresh values). NULL on -ENOMEM or when not
 * started.
 * @note malloc'd, owned by the caller. */
char *node__obs_text(node *n, size_t *out_len);

/* Totals of the local store: ranges held, keys (the memtable's included,
 * read live), bytes on disk. Walking every range costs a read of each one's
 * stats, so the envs' part is cached (gossip's LOAD, /metrics, METRICS and
 * INFO share it) until the memtable is next applied to them or
 * NODE_TOTALS_MAX_AGE_MS pass. */
#define NODE_TOTALS_MAX_AGE_MS 1000
/* node__obs_store_totals' cache (n->totals). */
struct node_obs_totals {
    uint64_t ranges, keys, bytes; /* of the envs, memtable not counted */
    uint64_t at_ms;               /* loop clock when computed */
    uint64_t applies;             /* store_mem_info's applies then */
    bool valid;
};
void node__obs_store_totals(node *n,
                            uint64_t *ranges,
                            uint64_t *keys,
                            uint64_t *bytes);

#endif
