/*
 * node_internal.h - `struct node` and the names node/'s files share. Not a
 * public header: only the files of node/ include it.
 *
 * Everything runs on the loop thread, except the bodies of uv_queue_work
 * jobs and the committer thread (commit.c), which touch only the store,
 * their own job structs and, for the committer, the commit queue under its
 * mutex.
 */
#ifndef NODE_NODE_INTERNAL_H
#define NODE_NODE_INTERNAL_H

#include <pthread.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>

#include <uv.h>

#include "common/pool.h"
#include "common/rk.h"
#include "gossip/gossip.h"
#include "net/net.h"
#include "node/config.h"
#include "node/coord.h"
#include "node/log.h"
#include "node/node.h"
#include "node/state.h"
#include "ring/ring.h"
#include "storage/hlc.h"
#include "storage/store.h"
#include "wire/rpc_msg.h"

struct csrv_conn;
struct iwrite; /* node/replica.c */
struct commit_waiter;
struct rsrv; /* node/rsrv.c */
struct obs;  /* node/obs.c */

/* Counters exported by METRICS (index by enum node_cl, by op). */
enum node_op { NODE_OP_GET = 0, NODE_OP_PUT, NODE_OP_DEL, NODE_OP_N };

struct node_stats {
    uint64_t req[NODE_OP_N][8];
    uint64_t unavailable[NODE_OP_N][8];
    uint64_t timeout[NODE_OP_N][8];
    uint64_t overloaded;
    uint64_t stale;
    uint64_t stale_waits; /* requests that waited for the ring (coord.c) */
    uint64_t read_repairs;
    uint64_t read_hedges;      /* reads that asked past silent replicas */
    uint64_t read_passed_over; /* replicas a read asked last: silent */
    uint64_t writes_unsent;    /* replica writes not sent (hinted instead) */
    uint64_t hints_stored;
    uint64_t hints_replayed;
    uint64_t hints_dropped;
    uint64_t writes_refused;     /* by a replica for good: no hint kept */
    uint64_t clock_skew_refused; /* timestamps past max_clock_drift_ms */
    uint64_t gossip_in, gossip_out, gossip_bad;
    uint64_t client_conns, client_bad_frames, client_auth_fail;
    uint64_t clients_refused; /* past max_clients (clients.c) */
    uint64_t commits, commit_writes;
    uint64_t replica_writes, replica_reads;
    uint64_t internode_auth_fail, internode_bad;
    /* bootstrap streaming (stream.c): records and key + value bytes */
    uint64_t stream_in_keys, stream_in_bytes;
    uint64_t stream_out_keys, stream_out_bytes;
    /* repair (repair.c, the repairing side): pulled and pushed */
    uint64_t repair_in_keys, repair_in_bytes;
    uint64_t repair_out_keys, repair_out_bytes;
};
struct creq;

/* Group commit: writes gathered during a loop turn, committed together by
 * the node's committer thread (commit.c), each acknowledged after the log
 * sync that covers it. */
typedef void (*node_commit_cb)(int status, void *arg);

struct commit_job {
    store_batch *batch;
    struct commit_waiter *waiters; /* one per write, in batch order */
    size_t nwaiters, cap;
    int status;
    bool lead;   /* the first of the batches one log sync committed */
    uint64_t us; /* lead: how long that commit took on the committer */
    struct commit_job *next; /* in the queue or the done list */
};

#define NODE_COMMITTERS 1 /* threads; commit.c says why one */

struct commit_queue {
    pthread_mutex_t mu;
    pthread_cond_t cv;
    struct commit_job *head, *tail;      /* waiting for a committer */
    struct commit_job *done, *done_tail; /* committed, for the loop */
    bool inited, stop;
    pthread_t th[NODE_COMMITTERS];
    int nth;
    uv_async_t async; /* wakes the loop for done */
    bool async_open;
};

/* A host name gossip sends to ("host:port": a seed that did not resolve
 * at start, a peer that advertises a name), resolved with
 * uv_getaddrinfo so that a slow resolver never stalls the loop. */
#define NODE_NAMES_MAX 256
struct node_name {
    uv_getaddrinfo_t req;
    node *n;
    char host_port[GOSSIP_ADDR_MAX + 1];
    char addr[96];    /* numeric "ip:port"; "" until first resolved */
    uint64_t next_ms; /* resolve again from then (loop clock) */
    bool busy;        /* req in flight */
};

/* What the node knows of ring member i (same index as the ring's). */
struct node_peer {
    char name[GOSSIP_NAME_MAX + 1];
    char iaddr[GOSSIP_ADDR_MAX + 16]; /* internode "host:port" */
    char caddr[GOSSIP_ADDR_MAX + 16]; /* client "host:port" */
    bool up;
    bool self;
    bool replaying;         /* hint replay running */
    bool repl_differs;      /* gossips a replication other than ours */
    uint64_t replay_after;  /* hint replay goes on after this seq (0: start) */
    uint64_t down_since_ms; /* loop clock when marked DOWN, 0 if UP */
    bool silent; /* logged as silent for a write timeout (gshell.c) */
};

/* The peer table, shared with coordinator requests in flight, which point
 * at its names and addresses: a table is freed once the node has replaced
 * it (ring rebuild) and no request holds it. */
struct node_peer_tab {
    int refs;
    size_t n;
    struct node_peer p[];
};

enum node_boot {
    NODE_BOOT_WAIT = 0, /* fresh: announced BOOT, learning the cluster */
    NODE_BOOT_DONE,     /* NORMAL with tokens */
    NODE_BOOT_STREAM    /* BOOT with tokens: streaming its ranges in */
};

struct node_stream; /* stream.c */

struct node {
    uv_loop_t *loop;
    struct node_config cfg;
    struct node_state st;
    int fresh;
    /* fresh with join_ring false: not in the ring, no STATUS announced,
     * "join=wait" in its SCHEMA, until `ringkv join` (node__join) */
    bool parked;
    int stopping;       /* 1 draining/closing, 2 stopped */
    int closing_parts;  /* node__stop_close ran */
    int pending_closes; /* handles and jobs still to finish */
    void (*stop_done)(void *arg);
    void *stop_arg;

    char listen_ip[96]; /* numeric listen address */
    char secret[1024];  /* cluster secret bytes */
    size_t secret_len;
    uint8_t rpc_key[RPC_KEY_BYTES];
    /* "ip:port", or "host:port" for a seed that did not resolve at start
     * (gossip resolves it off the loop: names below) */
    char seeds[NODE_CONFIG_MAX_SEEDS][GOSSIP_ADDR_MAX + 1];
    int nseeds;
    bool is_seed;
    /* host names gossip sends to, resolved off the loop (gshell.c) */
    struct node_name *names[NODE_NAMES_MAX];
    size_t nnames;

    /* gossip shell */
    gossip *g;
    net_udp *udp;
    uv_timer_t gtimer;
    int gtimer_open;
    struct gossip_out gout;
    enum node_boot boot;
    size_t boot_known;
    uint64_t boot_stable_ticks;
    bool retokening;
    uint64_t ticks;

    /* internode */
    net_server *isrv;
    net_peers *peers;

    /* ring members as the node sees them */
    struct node_peer *peer; /* peer_tab->p */
    size_t npeers;
    struct node_peer_tab *peer_tab;
    uint32_t self_idx; /* RING_NONE if not placed */

    uv_timer_t htimer; /* hint replay */
    int htimer_open;

    store *store;
    struct hlc hlc;
    ring *ring; /* current snapshot (one reference), NULL until formed */
    /* the ring with the nodes that are joining (BOOT with tokens) placed,
     * NULL when none is: writes go to its extra replicas too (coord.c) */
    ring *ring_pending;
    struct node_stream *stream;   /* this node's join (stream.c), or NULL */
    struct node_leave *leave;     /* its decommission (leave.c), or NULL */
    struct node_cleanup *cleanup; /* the last cleanup (cleanup.c), or NULL */
    /* automatic cleanup (auto_cleanup_s): the ring epoch watched, since
     * when it has been settled, and whether it was looked at already */
    uint64_t acu_epoch, acu_since_ms;
    uint64_t raj_since_ms; /* repair after join: mono ms joined or restarted */
    bool acu_checked;
    /* a removal this node drove, cut short by a restart (st.removing):
     * when it was last tried, and why it could not be taken up then */
    uint64_t remove_try_ms;
    char remove_why[256];
    struct node_repair *repair; /* the last repair (repair.c), or NULL */
    int repair_jobs; /* leaf computations for other nodes (repair.c) */
    void (*self_stop_cb)(void *arg); /* node_stop's done when it stops */
    void *self_stop_arg;             /* by itself (after leaving) */
    int stream_jobs;                 /* donor scans on the pool (stream.c) */
    /* stream_throughput_mb's budget (stream.c): bytes that may still be
     * streamed (negative: overspent), refilled from stream_budget_ms on */
    int64_t stream_budget;
    uint64_t stream_budget_ms;
    int ring_stale;        /* heard of a newer epoch than ring's, or settling */
    bool settling;         /* restarted, no peer heard yet: see gshell.c */
    uint64_t settle_until; /* mono ms: settling ends by then regardless */
    int self_idx_ok;       /* this node is placed in ring */

    /* group commit */
    struct commit_job *commit_open; /* collecting */
    int commit_running;             /* jobs queued or being committed */
    struct commit_queue cq;
    uv_check_t check;     /* end of loop turn: flush */
    uv_prepare_t prepare; /* before the poll: the same flush */
    uv_timer_t drain;     /* shutdown: bound on draining */
    int drain_open;

    /* native client server */
    uv_tcp_t csrv;
    int csrv_open;
    struct csrv_conn *conns;    /* all connections */
    struct csrv_conn *dirty;    /* connections with output to flush */
    int64_t inflight;           /* client requests in flight */
    int64_t coord_inflight;     /* coordinator requests not yet answered */
    int64_t coord_background;   /* answered, replica requests outstanding */
    uint64_t refused_logged_ms; /* coord.write_refused: last logged */
    uint64_t refused_unlogged;  /* refusals since */
    uint64_t skew_logged_ms;    /* hlc.refused: last logged (clock.c) */
    uint64_t skew_unlogged;     /* timestamps refused since */
    /* events outside input can repeat at will, written at most every
     * NODE_LOG_LIMIT_MS each (log.h) */
    struct {
        struct node_log_limit gossip_auth, gossip_bad, client_auth, resp_auth,
            inode_hs, clients_refused;
    } loglim;
    uint64_t clients_open, clients_max; /* client connections (clients.c) */
    bool clock_failing;                 /* the last ceiling save failed */
    bool clock_saving;     /* a ceiling save on the pool (clock.c) */
    int clock_err;         /* the failed save's error */
    struct creq *deferred; /* decisions due at the end of the turn */
    /* coord.c: reads waiting for replicas (by hedge point, deadline) and
     * writes waiting for the local commit (by deadline) */
    uv_timer_t wake;
    bool wake_open;
    uint64_t wake_at; /* loop ms the timer is armed for, 0: none */
    struct creq *wake_head, *wake_tail;
    int64_t coord_parked;       /* coord.c: of those, waiting for the ring */
    struct rk_pool coord_pool;  /* coord.c: finished request structs */
    struct rk_pool iwrite_pool; /* replica.c: finished replica writes */
    struct rpc_buf reply_buf;   /* replica.c: replies are encoded here */

    struct rsrv *rsrv; /* RESP server (node/rsrv.h), NULL when off */
    struct obs *obs;   /* metrics registry and /metrics (node/obs.h) */

    struct node_stats stats;
    struct hint_store_job *hint_open; /* hints of this loop turn */
    int hint_stores;                  /* hints not yet stored (open + queued) */
    size_t hint_store_bytes;          /* their keys and records */
    bool hint_stores_full; /* hints.queue_full logged, not drained since */

    /* node__obs_store_totals' cache */
    struct {
        uint64_t ranges, keys, bytes; /* of the envs, memtable not counted */
        uint64_t at_ms;               /* loop clock when computed */
        uint64_t applies;             /* store_mem_info's applies then */
        bool valid;
    } totals;
};

/* ---- node.c ---- */
uint64_t node__now_ms(void);     /* wall clock, ms */
uint64_t node__mono_ms(node *n); /* loop's monotonic clock */

/* The node's hybrid logical clock (clock.c), its ceiling kept in the
 * system store. open: at start, once the store is open: restores the clock
 * from the ceiling saved (waiting out a crash's window), 0 or an error
 * with why in err. close: at a clean stop, before the store closes, saves
 * the clock itself. now: a timestamp for a write this node coordinates, 0
 * or the error of a ceiling that could not be saved. recv: a timestamp a
 * peer sent (a replica write's record, the clock in a replica's answer):
 * 0, RK_ECLOCKSKEW (more than max_clock_drift_ms ahead: the clock stays;
 * counted and logged, from naming the peer) or a save's error. seen: a
 * record copied from a peer (stream, read repair), stored whatever its
 * timestamp: 0 or a save's error. */
int node__clock_open(node *n, char *err, size_t errlen);
void node__clock_close(node *n);
int node__clock_now(uint64_t *out, node *n);
int node__clock_recv(node *n, uint64_t remote, const char *from);
int node__clock_seen(node *n, uint64_t ts);
/* Every gossip tick: the ceiling kept ahead while the node is idle, so
 * that its first write after a pause finds one saved. */
void node__clock_tick(node *n);
void node__stop_progress(node *n);
int node__resolve(struct sockaddr_storage *out, const char *host, int port);
int node__resolve_str(char *out, size_t len, const char *host_port);
/* Splits "host:port" / "[v6]:port" into host (in buf, brackets dropped:
 * the return value points at it) and port; NULL if there is no port. */
const char *
node__split_host_port(char *buf, size_t cap, int *port, const char *host_port);
void node__handle_closed(uv_handle_t *h); /* close cb counting down */
/* A client listener (csrv, rsrv): initialises tcp (data = n; the caller
 * closes it, also on failure), binds it to listen_address:port and listens with
 * cb. On failure err says why, naming the config key of the port. */
int node__listen(node *n,
                 uv_tcp_t *tcp,
                 const char *key,
                 int port,
                 uv_connection_cb cb,
                 char *err,
                 size_t errlen);
/* "ip:port" of an accepted connection's peer, "?" if unknown. */
void node__peer_name(char *out, size_t cap, uv_tcp_t *tcp);

/* ---- gshell.c: gossip, ring, ranges ---- */
int node__gossip_start(node *n, char *err, size_t errlen);
void node__gossip_stop(node *n);
void node__ring_rebuild(node *n);
/* Create the missing local ranges of the arcs this node replicates (in the
 * ring and the pending ring). */
void node__ranges_ensure(node *n);
void node__peer_tab_unref(struct node_peer_tab *t); /* NULL: nothing */
/* The replication part ("dc1:3,dc2:2") of a gossiped SCHEMA value
 * ("repl=dc1:3 internode=7001 client=7380"), borrowed; empty if absent. */
struct rk_slice node__schema_repl(struct rk_slice schema);
/* Peers gossiping a replication other than this node's. */
size_t node__repl_mismatches(const node *n);

/* ---- replica.c: internode server, peers, hints ---- */
int node__internode_start(node *n, char *err, size_t errlen);
void node__internode_stop(node *n);
void node__hints_kick(node *n, uint32_t idx); /* replay hints to peer idx */
void node__replica_free(node *n);             /* free lists and buffers */
/* Store a hint for peer `name` (key, encoded record), off the loop; also
 * while the node is stopping, until its store is closed. */
void node__hint_store(node *n,
                      const char *name,
                      struct rk_slice key,
                      struct rk_slice rec);
/* End of a loop turn: store the hints it left, in one transaction. */
void node__hint_flush(node *n);
/* A replica's answer to a write that sending it again would get again:
 * no hint is kept for it (coord.c), nor replayed (replica.c). */
bool node__hint_rejected_for_good(int status);
/* The peer table's entry for `name` (and its index, if idx), or NULL. */
struct node_peer *node__peer_by_name(node *n, const char *name, uint32_t *idx);
/* The outcome of a request answered with an RPC_MSG_WRITE_ACK: status
 * (net/'s: the request failed) or else the acknowledgement's, or the
 * decoder's error for a malformed one (counted as a bad internode frame). */
int node__write_ack_status(node *n, int status, struct rk_slice resp);
/* Answer an internode request with only a status: a READ_RESP for
 * type RPC_MSG_READ, else a WRITE_ACK (with this node's HLC). */
void node__reply_status(
    node *n, net_conn *c, uint64_t id, int type, int status);
/* Send one replica write / read to ring member idx (remote). */
int node__rpc(node *n,
              uint32_t idx,
              const struct rpc_buf *msg,
              uint32_t timeout_ms,
              net_rpc_cb cb,
              void *arg);
/* The same to an internode "host:port"; unless the peer has been silent
 * with a request to answer for max_quiet_ms (0: no limit): then
 * RK_EUNAVAILABLE, nothing sent (net_peers_request_unless_quiet). */
int node__rpc_addr(node *n,
                   const char *iaddr,
                   const struct rpc_buf *msg,
                   uint32_t timeout_ms,
                   uint32_t max_quiet_ms,
                   net_rpc_cb cb,
                   void *arg);
/* Whether gossip endpoint pi is a node waiting for `ringkv join`
 * (join_ring: false, SCHEMA " join=wait"); if so its client "host:port"
 * goes to caddr[0..cap). */
bool node__peer_waiting(node *n,
                        const struct gossip_peer_info *pi,
                        char *caddr,
                        size_t cap);
/* How long the peer at iaddr has been silent with a request to answer
 * (net_peers_quiet_ms); 0 if it is not. */
uint64_t node__peer_quiet_ms(node *n, const char *iaddr);
/* Apply a replica write locally (advance HLC, group commit). */
int node__local_write(node *n,
                      struct rk_slice key,
                      const struct rpc_record *rec,
                      node_commit_cb cb,
                      void *arg);
/* Read the local raw record of key: 0 and *found, or an error. The record's
 * value is malloc'd into *buf (caller frees) and rec->value points into it. */
int node__local_read(node *n,
                     struct rk_slice key,
                     bool *found,
                     struct rpc_record *rec,
                     uint8_t **buf);

/* Answered coordinator requests still waiting for replicas are bounded at
 * this many times max_inflight (coord.c; the metric's help says it). */
#define COORD_BACKGROUND_FACTOR 4
#define NODE_STR_(x)            #x
#define NODE_STR(x)             NODE_STR_(x)

/* ---- commit.c ---- */
/* Queue a write of (key, encoded record) for the next group commit; cb
 * gets the write's result after its fsync. Errors returned at once (cb not
 * called): those of store_batch_add, -ENOMEM, RK_ECLOSED. */
int node__commit_add(node *n,
                     struct rk_slice key,
                     struct rk_slice rec,
                     node_commit_cb cb,
                     void *arg);
void node__commit_flush(node *n);
/* Start the committer threads and their loop handle (node_start). */
int node__commit_start(node *n);
/* Stop them; fails a batch still open (only once nothing is committing). */
void node__commit_free(node *n);

/* `ringkv join` on a node started with join_ring false (or whose join was
 * aborted): 0 and it joins as a fresh node does; RK_EBADREQ (why) if it is
 * not waiting for that. */
int node__join(node *n, char *why, size_t cap);
/* A join aborted: tokens withdrawn, BOOT without tokens under a new epoch
 * (*epoch), parked until `ringkv join` (wait_join=1 in node.state, saved
 * first). 0 or the error of the save or the announce. */
int node__join_withdraw(node *n, uint64_t *epoch);

/* ---- clients.c ---- */
/* At start: raise the descriptor limit, and set how many clients the node
 * admits (max_clients, or fewer when the limit leaves less room). */
void node__clients_limit(node *n);
/* A client connection just accepted on tcp: true if admitted (counted);
 * false if past the limit: the client was told why (its protocol), it was
 * counted and logged, and the caller closes it. */
bool node__client_admit(node *n, uv_tcp_t *tcp, bool resp, const char *peer);
/* An admitted client connection closed. */
void node__client_gone(node *n);

/* ---- stream.c ---- */
/* Announced BOOT with tokens: stream the ranges in, then NORMAL. */
int node__stream_begin(node *n);
void node__stream_tick(node *n); /* every gossip tick */
/* At start, not joining: a finished join's saved time still there is
 * logged (stream.leftover_progress) and deleted. */
void node__stream_leftover(node *n);
void node__stream_free(node *n);
/* `ringkv abort` on a joining node: the join withdrawn (node__join_withdraw),
 * no further chunk asked or committed, its saved positions deleted, and
 * once nothing is in flight every range of the store dropped. 0 with msg
 * saying so; RK_EBADREQ when not joining; the withdrawal's error. */
int node__stream_abort(node *n, char *msg, size_t cap);
/* An aborted join still winding down (requests in flight, positions being
 * deleted, its data being dropped): no new join yet. */
bool node__stream_busy(const node *n);
/* NETSTATS: the join's sessions and what was sent, as text (malloc'd). */
char *node__stream_text(node *n, size_t *len);
/* Answer an RPC_MSG_STREAM request (the donor side). */
void node__stream_serve(node *n, net_conn *c, uint64_t id, struct rk_slice f);
/* Streams move chunks of about this many bytes of keys and values. */
#define NODE_STREAM_CHUNK (1u << 20)
/* A record's identity (its key's token and its version) in 8 bytes, for
 * leaving out of a scan what the other side just sent (repair.c). */
uint64_t node__record_fingerprint(struct rk_slice key,
                                  const struct rpc_record *rec);
/* Scan the arc of `at` from `at` on the libuv pool (as a donor does) and
 * call cb on the loop with the chunk read (ch: its records, and where the
 * scan stands after them; borrowed from the job, copy what you keep), their
 * keys' and values' bytes, and the chunk encoded as an RPC_MSG_STREAM_PUSH
 * frame. Records whose node__record_fingerprint is in skip[] (nskip of
 * them, sorted; borrowed until cb) are left out. status < 0: ch and
 * frame are NULL / empty. Returns 0, or
 * RK_EOVERLOADED (STREAM_DONOR_JOBS scans running: ask again later),
 * RK_ECLOSED, RK_EBADREQ, -ENOMEM without calling cb. */
typedef void (*node_scan_cb)(void *arg,
                             int status,
                             const struct rpc_stream_chunk *ch,
                             uint64_t kv_bytes,
                             struct rk_slice frame);
int node__stream_scan(node *n,
                      const struct rpc_stream_pos *at,
                      uint32_t max_bytes,
                      const uint64_t *skip,
                      size_t nskip,
                      node_scan_cb cb,
                      void *arg);
/* Commit the records of a chunk of arc rg (rpc_stream_item encoded)
 * through the group commit, as a join's, a leave's and a repair's streams
 * do: every key must lie in rg. cb(arg, status, keys, bytes) once every
 * record is committed (status: the first failure; keys and bytes: the
 * records' and their keys' and values'), maybe before this returns (an
 * empty chunk). Without calling cb: RK_EPROTO (a key outside rg, nothing
 * committed), RK_ECLOSED, -ENOMEM. */
typedef void (*node_items_cb)(void *arg,
                              int status,
                              uint32_t keys,
                              uint64_t bytes);
int node__commit_items(node *n,
                       struct ring_range rg,
                       struct rk_slice items,
                       node_items_cb cb,
                       void *arg);
/* Copy a stream cursor, its last key into to_last (RPC_STREAM_LAST_MAX). */
void node__stream_pos_copy(struct rpc_stream_pos *to,
                           uint8_t *to_last,
                           const struct rpc_stream_pos *from);
/* Range positions kept across restarts (a join's, a leave's): a job on the
 * pool that sets or deletes system values in one synced transaction
 * (store_sys_write), a position stored as a STREAM_CHUNK message with no
 * items (its decoder is the wire's, fuzzed). new: a job for up to cap
 * values (NULL: -ENOMEM), what names it in a failure's log line, after(n)
 * runs on the loop once it has run. add: name set to *at, or deleted (at
 * NULL); u64: name set to v (as store_sys_set_u64 does), or deleted. run:
 * queues it (the node's stop waits for it) or frees it and returns the error.
 */
struct node_pos_job;
struct node_pos_job *
node__pos_job_new(node *n, size_t cap, const char *what, void (*after)(node *));
int node__pos_job_add(struct node_pos_job *j,
                      const char *name,
                      const struct rpc_stream_pos *at);
int node__pos_job_u64(struct node_pos_job *j,
                      const char *name,
                      uint64_t v,
                      bool del);
int node__pos_job_run(struct node_pos_job *j);
void node__pos_job_free(struct node_pos_job *j);
/* The position saved under name for range r, into at (its last key into
 * at_last): 0, RK_ENOTFOUND, or RK_EPROTO when it does not decode or is of
 * another range. */
int node__pos_load(node *n,
                   const char *name,
                   struct ring_range r,
                   struct rpc_stream_pos *at,
                   uint8_t *at_last);
/* netstats: how far along range a cursor is, [0, 1], by the token it
 * reached (keys hash uniformly); a 20-column bar of it; byte counts. */
double node__stream_fraction(struct ring_range range,
                             const struct rpc_stream_pos *at);
void node__stream_bar(char bar[21], double fraction);
void node__human_bytes(char *out, size_t cap, uint64_t b);

/* node_state_save of n->st into data_dir, a failure logged
 * (state.save_fail). 0 or the error. */
int node__state_save(node *n);
/* The throughput cap (stream_throughput_mb): a session takes a chunk's
 * worth of the budget before it asks for or reads a chunk (false: not
 * now, the next tick or finished chunk tries again), and settles it with
 * the bytes the chunk really moved once it is in place, or 0 if it failed. */
bool node__stream_budget_take(node *n);
void node__stream_budget_settle(node *n, uint64_t moved);

/* ---- stall.c ---- */
/* A long operation's last progress and the last step that failed since
 * (stall.c says what is reported, and when: stall_warning_s). */
#define NODE_STALL_PREFIX                              \
    "Stalled:" /* netstats' line; the CLI looks for it \
                */
struct node_stall {
    const char *what;     /* the operation, for people: "decommission" */
    const char *ev;       /* its log events' prefix: "leave" */
    uint64_t progress_ms; /* loop ms of the last progress, or the start */
    uint64_t failures;    /* steps failed since */
    int err;              /* the last one's error; 0: none failed */
    char step[32];        /* which step it was ("push", "request") */
    char peer[GOSSIP_NAME_MAX + 8]; /* "to n4", "from n2", or "" */
    struct ring_range range;        /* its range, if has_range */
    bool has_range;
    bool stalled; /* logged <ev>.stalled, no progress since */
};
/* Start: no failure, progress now (what and ev: static strings). */
void node__stall_start(node *n,
                       struct node_stall *s,
                       const char *what,
                       const char *ev);
/* Progress made (a chunk in place, a range done): not stalled. */
void node__stall_progress(node *n, struct node_stall *s);
/* A step failed (peer: "to n4", "from n2", or NULL; range may be NULL). */
void node__stall_fail(struct node_stall *s,
                      const char *step,
                      const char *peer,
                      const struct ring_range *range,
                      int err);
/* Every gossip tick while the operation runs: stalled once no progress
 * came for stall_warning_s while work_left (logged once). */
void node__stall_check(node *n, struct node_stall *s, bool work_left);
/* netstats: the NODE_STALL_PREFIX line, if stalled. */
void node__stall_text(node *n, const struct node_stall *s, FILE *f);

/* ---- repair.c ---- */
/* `ringkv repair`: compare this node's replicas of every arc it replicates
 * (only the parts inside `only`, unless NULL) with the other replicas'
 * (Merkle leaves) and exchange the sub-arcs that differ. Returns at once
 * with the text to answer. */
int node__repair_begin(node *n,
                       const struct ring_range *only,
                       char **text,
                       size_t *len);
void node__repair_text(node *n, FILE *f); /* NETSTATS line, if any */
void node__repair_free(node *n);
/* An RPC_MSG_MERKLE request from another node's repair. */
void node__repair_serve(node *n, net_conn *c, uint64_t id, struct rk_slice f);

/* ---- cleanup.c ---- */
/* `ringkv cleanup`: drop the local ranges this node no longer replicates,
 * on the pool (text: what the operator is told, malloc'd). Errors:
 * RK_EBADREQ / RK_ESTALE / RK_ECLOSED with *text saying why, -ENOMEM. */
int node__cleanup_begin(node *n, char **text, size_t *len);
void node__cleanup_text(node *n, FILE *f); /* NETSTATS line, if any */
/* Each gossip tick: start a cleanup auto_cleanup_s after the ring settled
 * if this node holds data it no longer replicates; watch a running one
 * for a stall (stall.c). */
void node__cleanup_auto(node *n);
/* Every gossip tick: a node that joined by streaming (node.state
 * repair_due) repairs its ranges once the ring has settled
 * (repair_after_join), again after a restart until one has run; and a
 * running repair is watched for a stall (stall.c). */
void node__repair_after_join(node *n);
void node__cleanup_free(node *n);
/* Cleanup and repair need the ring still: this node NORMAL in it, its ring
 * the cluster's (node__ring_ready), no node joining or leaving. 0 (*self:
 * this node's index in the ring), or RK_EBADREQ / RK_ESTALE / RK_ECLOSED
 * with the reason in why, naming `what` ("clean up", "repair"). */
int node__ring_settled(
    node *n, const char *what, uint32_t *self, char *why, size_t cap);

/* ---- leave.c ---- */
/* A decommission, removenode or cleanup needs this node joined and its ring
 * the cluster's: 0, or RK_EBADREQ / RK_ESTALE with the reason in why. */
int node__ring_ready(node *n, char *why, size_t cap);
/* decommission: announce LEAVING and stream every range out (text: what
 * the operator is told, malloc'd). Errors: RK_EBADREQ with *text saying
 * why it cannot leave now, RK_ESTALE, -ENOMEM. */
int node__leave_begin(node *n, char **text, size_t *len);
/* removenode: announce the dead node `name` LEAVING on its behalf, copy
 * each of its ranges from the other replicas to the node that gains it,
 * then announce it REMOVED. Errors as node__leave_begin. */
int node__remove_begin(node *n, const char *name, char **text, size_t *len);
/* `ringkv abort`: stop this node's decommission (NORMAL again) or the
 * removal it drives (its target NORMAL again on its behalf), with the
 * ring back as it was (text: what the operator is told, malloc'd).
 * Errors: RK_EBADREQ with *text saying why (nothing to abort, LEFT
 * already), RK_ENOTSUP (a join), RK_ESTALE, gossip's, -ENOMEM. */
int node__abort(node *n, char **text, size_t *len);
/* A decommission or removal this node drives, not ended (done or
 * aborted). */
bool node__leave_running(const node *n);
/* A restart with leaving=1: LEAVING was announced again; stream again. */
int node__leave_resume(node *n);
void node__leave_tick(node *n); /* every gossip tick */
void node__leave_free(node *n);
/* NETSTATS lines of the leave, or nothing when not leaving. */
void node__leave_text(node *n, FILE *f);
/* Answer an RPC_MSG_STREAM_PUSH (the gaining side). */
void node__leave_ingest(node *n, net_conn *c, uint64_t id, struct rk_slice f);

/* ---- coord.c ---- */
void node__coord_run_deferred(node *n);
void node__coord_free(node *n);  /* the request free list */
void node__coord_start(node *n); /* the reads' deadline timer */
void node__coord_stop(node *n);  /* close it (node__handle_closed) */
/* Start the requests waiting for the ring (coord.c: a node that has heard
 * of a newer epoch) once it has caught up, or answer them CLOSED once the
 * node stops; does nothing while the ring is stale. */
void node__coord_unpark(node *n);

/* ---- admin.c ---- */
struct node_admin_buf {
    void *allocs[8];
    int n;
    char text_small[64];
};
void node_admin_buf_init(struct node_admin_buf *b);
void node_admin_buf_free(struct node_admin_buf *b);
struct wire_cresp;
struct wire_creq;
int node__admin(node *n,
                struct wire_cresp *r,
                struct node_admin_buf *b,
                const struct wire_creq *q);

/* ---- rsrv.c ---- */
int node__rsrv_start(node *n, char *err, size_t errlen);
void node__rsrv_stop(node *n);
void node__rsrv_drain(node *n); /* stop reading; close once answered */
bool node__rsrv_flush(node *n); /* true: it started requests (run again) */

/* ---- csrv.c ---- */
int node__csrv_start(node *n, char *err, size_t errlen);
void node__csrv_stop(node *n);
void node__csrv_drain(node *n); /* stop reading; close once answered */
void node__csrv_flush(node *n);

#endif
