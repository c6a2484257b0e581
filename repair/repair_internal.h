/*
 * repair_internal.h - what repair/'s files share: the part's struct (the
 * host, the last session, the leaf computations served) and the leaf
 * computation both sides run. Not a public header: repair.h is.
 */
#ifndef RK_REPAIR_REPAIR_INTERNAL_H
#define RK_REPAIR_REPAIR_INTERNAL_H

#include <stdbool.h>
#include <stdint.h>

#include "repair/repair.h"
#include "ring/ring.h"
#include "wire/rpc_msg.h"

#define REPAIR_TIMEOUT_MS 30000 /* per request */
#define REPAIR_RETRY_MS   200   /* after OVERLOADED or RING_STALE */
#define REPAIR_RETRIES    50    /* per comparison: 10 s of them */
#define REPAIR_SERVE_JOBS 2     /* leaf computations a node runs for others */
#define REPAIR_BUDGET_MS  100   /* waiting for stream_throughput_mb */
/* A replica that could not be reached (connection refused or reset, no
 * answer in time, its connection backing off): tried this many times in
 * all per comparison, waiting REPAIR_REACH_MS, then twice that, ... in
 * between (1 + 2 + 4 s: several times the 2 s cap on an internode
 * connection's backoff, node/replica.c, and a restart's few seconds). */
#define REPAIR_REACH_TRIES 4
#define REPAIR_REACH_MS    1000
/* A repair after a join that ended with failed comparisons (a replica
 * DOWN or restarting: a node flapping) runs again, this many runs in all,
 * REPAIR_AJ_AGAIN_MS after the first, then twice that, ... (10 + 20 + 40
 * + 80 s: a flapping node's few minutes); then it logs what is left for
 * `ringkv repair`. */
#define REPAIR_AJ_TRIES    5
#define REPAIR_AJ_AGAIN_MS 10000

/* One comparison: an arc (or its piece inside `only`) with one other
 * replica of it. */
struct repair_cmp {
    struct ring_range arc;
    char peer[REPAIR_NAME_MAX + 1];
    size_t ai; /* its arc in repair.arcs */
};

/* An arc (or its piece inside `only`) of a session; whole: the ring's arc
 * itself; failed: one of its comparisons failed; closed: after its
 * comparisons every replica holds what any of them held at the start (at
 * most one other replica, or a closing pass planned). */
struct repair_arc_run {
    struct ring_range arc;
    bool whole, failed, closed;
};

/* The schedule's record of an arc (schedule.c). */
struct repair_sched_arc {
    struct repair_arc_state s;
    uint64_t tried_ms; /* a scheduled session of it last began */
    bool overdue_logged;
};

enum repair_phase { REPAIR_MERKLE = 0, REPAIR_PULL, REPAIR_PUSH };

struct repair {
    struct repair_host h;
    char node_name[REPAIR_NAME_MAX + 1];
    bool after_join_on;   /* options.after_join */
    uint64_t aj_wait_ms;  /* after becoming NORMAL, before it starts */
    uint64_t aj_since_ms; /* restarted since the join: since the first tick */
    int aj_runs;          /* after-join runs ended with failures */
    uint64_t aj_next_ms;  /* the next one not before (0: at once) */
    uint32_t chunk_bytes;
    int serve_jobs;            /* leaf computations for other nodes */
    struct repair_stats total; /* every session's */

    /* the schedule (schedule.c) */
    uint64_t interval_ms;        /* 0: none */
    struct repair_sched_arc *sa; /* the arcs this node replicates */
    size_t nsa;
    bool sa_synced; /* sa is of ring epoch sa_epoch */
    uint64_t sa_epoch;
    struct repair_arc_state *loaded; /* repair_sched_load's, until synced */
    size_t nloaded;
    uint64_t next_ms; /* no scheduled session before (wall ms) */
    bool scheduled;   /* the running session is a scheduled one */
    uint64_t runs, runs_failed;
    bool sched_too_many; /* more arcs than REPAIR_SCHED_MAX: logged */

    /* the last session (begun: there was one) */
    struct repair_cmp *c;
    size_t nc, cur;
    struct repair_arc_run *arcs;
    size_t narcs;
    uint64_t start_wall_ms;
    bool begun, running;
    bool after_join; /* started by repair_tick for a join */
    uint64_t epoch;  /* the ring's at the start */
    uint64_t start_ms, end_ms;
    int first_err;
    char first_err_at[96];
    size_t failed, differing_cmps;
    /* the current comparison */
    enum repair_phase phase;
    unsigned depth;
    uint64_t *mine, *theirs; /* 2^depth leaf hashes each */
    bool have_mine, have_theirs;
    bool work_busy, rpc_busy; /* the two halves of the leaf comparison */
    int merkle_err;           /* the local computation's (the pool job's) */
    int peer_err;             /* the replica's answer's */
    struct ring_range *diff;  /* runs of differing leaves */
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
    uint64_t chunk_keys, chunk_bytes_moved;
    bool waiting;      /* the retry timer armed */
    int retries;       /* the current comparison's (OVERLOADED, RING_STALE) */
    int reach_retries; /* the current comparison's (replica unreachable) */
    int retry_err;     /* what its last retried step was answered (0: the
                          timer waits for the stream budget) */
    /* the session's totals */
    uint64_t retried; /* steps asked again (any transient failure) */
    uint64_t leaves, leaves_diff;
    uint64_t keys_in, bytes_in, keys_out, bytes_out;
};

/* The session's arcs and comparisons: every arc of ring r node `self`
 * replicates (or its piece inside `only`), and each once per other
 * replica of it (session.c); with `closing`, an arc of k > 1 other
 * replicas is then compared again with the first k - 1 of them: a
 * comparison exchanges what the two hold, so a record this node pulled
 * from a later replica reaches the earlier ones only then. */
int repair__plan(const ring *r,
                 uint32_t self,
                 const struct ring_range *only,
                 bool closing,
                 struct repair_cmp **out,
                 size_t *nout,
                 struct repair_arc_run **out_arcs,
                 size_t *out_narcs);
/* Who started a session: what its end does besides (repair_end). */
enum repair_kind {
    REPAIR_MANUAL = 0, /* `ringkv repair` (repair_begin) */
    REPAIR_SCHEDULED,  /* schedule.c: counted in runs (and runs_failed),
                          with the closing pass (repair__plan) */
    REPAIR_AFTER_JOIN  /* repair_tick: clears the due, or runs again */
};
/* repair_begin for a session of `kind`, marked as such before it can end
 * (with no other replica to compare with, or every one DOWN, it ends
 * before this returns). */
int repair__begin(repair *r,
                  const struct ring_range *only,
                  enum repair_kind kind,
                  char **text,
                  size_t *len);
/* Every tick (schedule.c): the records synced with the ring, overdue
 * arcs reported, and a scheduled session started if one is due. */
void repair__sched_tick(repair *r);
/* A session ended (not cut short): its whole arcs without a failure are
 * recorded repaired as of its start (schedule.c). */
void repair__sched_record(repair *r);

/* The 2^depth leaf hashes of arc (all of it local) into leaves[], and the
 * entries hashed into *keys (may be NULL): one host.scan of the arc, on a
 * pool thread. RK_EBADREQ for a depth merkle_depth_fit does not accept,
 * RK_ENOTFOUND if part of the arc is not local. */
int repair__leaves(uint64_t *leaves,
                   uint64_t *keys,
                   const struct repair_host *h,
                   struct ring_range arc,
                   unsigned depth);

#endif
