/*
 * daemon.h - `struct node`, the daemon's wiring: what each part of node/ is
 * on this node (its struct embedded, or a pointer to it), the identity and
 * life-cycle state node.c keeps, and node.c's few helpers the parts share.
 * Each part's functions and types are in its own header (commit.h,
 * replica.h, clients.h, clock.h, ...); node.h is the face main.c sees.
 *
 * Not a public header: only node/'s files include it. Everything runs on
 * the loop thread, except the bodies of uv_queue_work jobs and the
 * committer thread (commit.h).
 */
#ifndef NODE_DAEMON_H
#define NODE_DAEMON_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include <uv.h>

#include "gossip/gossip.h"
#include "net/net.h"
#include "node/auth_delay.h"
#include "node/clients.h"
#include "node/clock.h"
#include "node/commit.h"
#include "node/config.h"
#include "node/log.h"
#include "node/membership.h"
#include "node/node.h"
#include "node/obs.h"
#include "node/replica.h"
#include "node/replication.h"
#include "node/tls.h"
#include "node/users.h"
#include "ring/ring.h"
#include "storage/node_state.h"
#include "storage/store.h"
#include "streaming/streaming.h"
#include "wire/rpc_msg.h"

struct coord_node;    /* node/coord_node.h */
struct node_peer;     /* node/ring_view.h */
struct node_peer_tab; /* node/ring_view.h */
struct node_repair;   /* repair_host.c */
struct node_purge;    /* purge.c */
struct obs;           /* obs.c */
struct rsrv;          /* rsrv.c */
struct node_snapshot; /* snapshot.c */

/* Counters exported by METRICS (the coordinator's: struct coord_stats). */
struct node_stats {
    uint64_t overloaded; /* requests refused: admission control */
    uint64_t hints_stored;
    uint64_t hints_replayed;
    uint64_t hints_dropped;
    uint64_t clock_skew_refused; /* timestamps past max_clock_drift_ms */
    uint64_t clock_skew_writes;  /* writes not coordinated: clock off */
    uint64_t gossip_in, gossip_out, gossip_bad;
    uint64_t client_conns, client_bad_frames, client_auth_fail;
    uint64_t client_noperm; /* admin commands refused to the data role */
    uint64_t client_preauth_refused; /* frames too large before auth */
    uint64_t client_frame_timeouts;  /* idle in mid-frame: closed */
    uint64_t clients_refused;        /* past max_clients (clients.c) */
    uint64_t commits, commit_writes;
    uint64_t replica_writes, replica_reads;
    uint64_t replica_scans;    /* SCAN answers computed for coordinators */
    uint64_t replica_old_ring; /* refused: planned on an older ring */
    uint64_t internode_auth_fail, internode_bad;
};

struct node {
    uv_loop_t *loop;
    struct node_config cfg;
    struct node_state st;
    int lock_fd; /* data_dir/node.lock, held for the node's life */
    int fresh;
    /* fresh with join_ring false: not in the ring, no STATUS announced,
     * "join=wait" in its SCHEMA, until `ringkv join` (node__join) */
    bool parked;
    int stopping;       /* 1 draining/closing, 2 stopped */
    int closing_parts;  /* node__stop_close ran */
    int pending_closes; /* handles and jobs still to finish */
    int scan_jobs;      /* SCAN answers computing (node/scan.c) */
    void (*stop_done)(void *arg);
    void *stop_arg;
    void (*self_stop_cb)(void *arg); /* node_stop's done when it stops */
    void *self_stop_arg;             /* by itself (after leaving) */
    int exit_code;    /* ringkvd's, once stopped: 1 after a replace refused */
    uv_check_t check; /* end of loop turn: flush */
    uv_prepare_t prepare; /* before the poll: the same flush */
    uv_timer_t drain;     /* shutdown: bound on draining */
    int drain_open;

    char listen_ip[96]; /* numeric listen address */
    char secret[1024];  /* cluster secret bytes */
    size_t secret_len;
    uint8_t rpc_key[RPC_KEY_BYTES];
    /* "ip:port", or "host:port" for a seed that did not resolve at start
     * (gossip resolves it off the loop: names below) */
    char seeds[NODE_CONFIG_MAX_SEEDS][GOSSIP_ADDR_MAX + 1];
    int nseeds;
    bool is_seed;

    /* membership (node/membership.h): the gossip shell's own state, the
     * gossip state machine, and where this node's boot stands */
    struct node_membership membership;
    gossip *g;
    enum node_boot boot;

    /* ring members as the node sees them (node/ring_view.h) */
    struct node_peer *peer; /* peer_tab->p */
    size_t npeers;
    struct node_peer_tab *peer_tab;
    uint32_t self_idx; /* RING_NONE if not placed */
    ring *ring;        /* current snapshot (one reference), NULL until formed */
    /* the ring with the nodes that are joining (BOOT with tokens) placed,
     * NULL when none is: writes go to its extra replicas too (coord.c) */
    ring *ring_pending;
    /* each joining node's own pending ring, the ring with that node alone
     * placed: writes go to their extra replicas too, and a joiner streams
     * against its own (ring_view.h) */
    struct node_join_ring *joins;
    size_t njoins;
    int ring_stale; /* heard of a newer epoch than ring's, or settling */
    bool settling;  /* restarted, no peer heard yet: see membership.c */

    /* the local data: the store, the clock (node/clock.h), the group
     * commit (node/commit.h) */
    store *store;
    struct node_clock clock;
    struct node_commit commit;

    /* replica side (node/replica.h): internode server, peers, hints */
    struct node_replica replica;
    struct node_hints hints;

    /* joins, leaves, cleanups and their counters (streaming/, wired by
     * node/stream_host.h) */
    stream *streaming;
    uint64_t raj_since_ms; /* mono ms it joined (streaming/), 0 if restarted
                              since: when the repair after it is due */
    struct node_repair *repair; /* repair/ (node/repair_host.h), from start */
    struct node_repl repl;    /* the replication setting (node/replication.h) */
    struct node_purge *purge; /* node/purge.h, from the first purge tick */
    struct node_snapshot *snap; /* node/snapshot.h, from the first snapshot */

    /* front ends: the coordinator (node/coord_node.h), the native client
     * server (node/csrv.h), the RESP server (node/rsrv.h, NULL when off), and
     * what both client servers share (node/clients.h, node/auth_delay.h) */
    struct coord_node *coord;
    net_server *csrv;
    struct rsrv *rsrv;
    struct node_clients clients;
    struct node_auth auth;   /* failed authentications answered late */
    struct node_users users; /* passwords and roles (node/users.h) */

    /* metrics registry and /metrics (node/obs.h), the counters it exports,
     * node__obs_store_totals' cache */
    struct obs *obs;
    struct node_stats stats;
    struct node_obs_totals totals;
    struct node_tls tls; /* certificates (node/tls.h) */

    /* events outside input can repeat at will, written at most every
     * NODE_LOG_LIMIT_MS each (log.h) */
    struct {
        struct node_log_limit gossip_auth, gossip_bad, gossip_replayed,
            client_auth, resp_auth, inode_hs, clients_refused, client_input,
            tls_refused;
        struct node_log_limit inode_tls[NET_TLS_FAIL_COUNT]; /* by reason */
    } loglim;
};

/* ---- node.c's helpers the parts share ---- */
uint64_t node__now_ms(void);     /* wall clock, ms */
uint64_t node__mono_ms(node *n); /* loop's monotonic clock */
/* While stopping, after a handle, job or commit finished: flushes what is
 * left open and, once nothing is pending, closes the store and calls the
 * stop's done. */
void node__stop_progress(node *n);
void node__handle_closed(uv_handle_t *h); /* close cb counting down */
/* A job on the libuv pool that the node's stop waits for: work(job) on a
 * pool thread, then done(job, status) on the loop (status UV_ECANCELED if
 * it never ran). 0, -ENOMEM or uv_queue_work's error (nothing queued). */
int node__queue_work(node *n,
                     void (*work)(void *job),
                     void (*done)(void *job, int status),
                     void *job);
/* The store's options as cfg sets them (the node's, and a restore's). */
void node__store_opts(struct store_opts *so, const struct node_config *cfg);
/* node_state_save of n->st into data_dir, a failure logged
 * (state.save_fail). 0 or the error. */
int node__state_save(node *n);
int node__resolve(struct sockaddr_storage *out, const char *host, int port);
int node__resolve_str(char *out, size_t len, const char *host_port);
/* Splits "host:port" / "[v6]:port" into host (in buf, brackets dropped:
 * the return value points at it) and port; NULL if there is no port. */
const char *
node__split_host_port(char *buf, size_t cap, int *port, const char *host_port);

#endif
