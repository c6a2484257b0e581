/*
 * repair.h - repair/'s one public face: `ringkv repair`, the repair a node
 * runs after joining by streaming, and the answer to another node's
 * repair (RPC_MSG_MERKLE), on a small host interface (docs/repair.md).
 *
 * A session compares this node's replicas of every arc it replicates (or
 * of the pieces inside a range) with each other replica's, by Merkle
 * leaves (merkle.h, repair/'s pure core), and exchanges the sub-arcs that
 * differ both ways: pulled with RPC_MSG_STREAM and committed here, then
 * pushed with RPC_MSG_STREAM_PUSH. One comparison at a time; a step the
 * replica refuses OVERLOADED or RING_STALE is asked again shortly, any
 * other failure ends that comparison and the session ends "done with
 * failures".
 *
 * repair/ knows nothing of the daemon: what it needs of it (the clock, the
 * log, the ring, the peers, RPCs, the thread pool, the local data, the
 * transfer of records, the stall tracker, node.state's repair_due) comes
 * through struct repair_host, a table of callbacks and one `arg` that
 * node/ fills in (node/repair_host.c) and a test fakes
 * (tests/unit/repair_world.h). Everything runs on the host's loop thread,
 * except host.scan, which a pool job calls.
 */
#ifndef RK_REPAIR_REPAIR_H
#define RK_REPAIR_REPAIR_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#include "common/rk.h"
#include "ring/ring.h"
#include "wire/rpc_msg.h"

typedef struct repair repair;

/* Node names, bytes at most (gossip's and the ring's limit). */
#define REPAIR_NAME_MAX 64

/* ---- the host interface ------------------------------------------------- */

enum repair_log_level {
    REPAIR_LOG_DEBUG = 0,
    REPAIR_LOG_INFO,
    REPAIR_LOG_WARN,
    REPAIR_LOG_ERROR
};

/* An RPC's outcome: status (the request failed: timeout, closed, ...) or
 * 0 and the answer, borrowed for the call. */
typedef void (*repair_rpc_cb)(void *arg, int status, struct rk_slice resp);
/* A record of a local scan, in scan order (token, then key); nonzero stops
 * the scan and is its result. key and rec are borrowed for the call. */
typedef int (*repair_item_cb)(void *arg,
                              uint64_t token,
                              struct rk_slice key,
                              struct rk_slice rec);
/* A chunk read for a push: its records and where the scan stands after
 * them (ch, borrowed for the call), their keys' and values' bytes, and the
 * chunk encoded as an RPC_MSG_STREAM_PUSH frame (borrowed for the call).
 * status < 0: ch NULL and frame empty. */
typedef void (*repair_scan_cb)(void *arg,
                               int status,
                               const struct rpc_stream_chunk *ch,
                               uint64_t kv_bytes,
                               struct rk_slice frame);
/* A chunk's records committed: the first failure, and the records' count
 * and their keys' and values' bytes. */
typedef void (*repair_items_cb)(void *arg,
                                int status,
                                uint32_t keys,
                                uint64_t bytes);
/* The answer to the MERKLE request `id` (borrowed for the call); empty
 * when none could be encoded (out of memory): nothing to send. */
typedef void (*repair_reply_cb)(void *arg, uint64_t id, struct rk_slice msg);

/* Every call takes the host's `arg` first. Unless said otherwise a call
 * that returns an error has not called its callback, and one that returns
 * 0 calls it later, never before it returns. */
struct repair_host {
    void *arg;

    /* ---- the daemon ---- */
    uint64_t (*now_ms)(void *arg); /* monotonic ms */
    /* One log line: event and key=value fields (already formatted). */
    void (*log)(void *arg,
                enum repair_log_level level,
                const char *event,
                const char *fields);
    /* The node is stopping (or its store is closed): nothing new. */
    bool (*stopping)(void *arg);
    /* A session holds the node's stop from its start to its end: the stop
     * waits for job_end. */
    void (*job_begin)(void *arg);
    void (*job_end)(void *arg);
    /* work(job) on a pool thread, then after(job) on the loop; the node's
     * stop waits for it. */
    int (*queue_work)(void *arg,
                      void (*work)(void *job),
                      void (*after)(void *job),
                      void *job);
    /* cb(cb_arg) once, ms from now; the node's stop waits for it. */
    int (*timer_start)(void *arg,
                       uint32_t ms,
                       void (*cb)(void *cb_arg),
                       void *cb_arg);
    uint64_t (*hlc)(void *arg);   /* the node's HLC, for answers */
    void (*bad_frame)(void *arg); /* an internode answer did not decode */

    /* ---- the ring and the peers ---- */
    /* The ring the node serves with, or NULL when it has none or knows it
     * is behind (heard of a newer epoch, settling after a restart).
     * @note borrowed until the next return to the loop. */
    const ring *(*ring)(void *arg);
    /* Whether a repair may start: this node NORMAL in a ring that is the
     * cluster's, no node joining or leaving. 0 and *self (its index in
     * host.ring), or RK_EBADREQ / RK_ESTALE / RK_ECLOSED with why. */
    int (*ring_settled)(void *arg, uint32_t *self, char *why, size_t cap);
    /* Whether the ring member `peer` is another node, UP, with an
     * internode address. */
    bool (*peer_up)(void *arg, const char *peer);
    /* An internode request to `peer` (msg: an encoded RPC message, copied
     * or sent before this returns); RK_EUNAVAILABLE if it is not UP. */
    int (*rpc)(void *arg,
               const char *peer,
               struct rk_slice msg,
               uint32_t timeout_ms,
               repair_rpc_cb cb,
               void *cb_arg);

    /* ---- the local data ---- */
    /* The local range holding token and its key count: 0, or an error
     * (none: the depth is chosen as for no keys). */
    int (*range_keys)(void *arg,
                      uint64_t token,
                      struct ring_range *range,
                      uint64_t *keys);
    /* Every local record of arc, in scan order, to cb: 0, cb's nonzero,
     * RK_ENOTFOUND if part of the arc is not local, or the store's error.
     * Called on a pool thread: it may touch only the store. */
    int (*scan)(void *arg,
                struct ring_range arc,
                repair_item_cb cb,
                void *cb_arg);

    /* ---- the transfer of records (a join's streaming) ---- */
    /* stream_throughput_mb: a chunk's budget taken before a chunk is asked
     * for or read (false: not now), settled with the bytes it moved once
     * in place (0 if it failed). */
    bool (*budget_take)(void *arg);
    void (*budget_settle)(void *arg, uint64_t moved);
    /* Read the chunk of at's arc after `at` (about max_bytes of keys and
     * values) on the pool, leaving out the records whose
     * record_fingerprint is in skip[] (nskip, sorted, borrowed until cb).
     * RK_EOVERLOADED: ask again later. */
    int (*push_scan)(void *arg,
                     const struct rpc_stream_pos *at,
                     uint32_t max_bytes,
                     const uint64_t *skip,
                     size_t nskip,
                     repair_scan_cb cb,
                     void *cb_arg);
    /* Commit a pulled chunk's records (rpc_stream_item encoded, every key
     * in rg) through the group commit, last-write-wins. cb may run before
     * this returns (an empty chunk). RK_EPROTO: a key outside rg. */
    int (*commit_items)(void *arg,
                        struct ring_range rg,
                        struct rk_slice items,
                        repair_items_cb cb,
                        void *cb_arg);
    /* A record's identity (its key's token and its version) in 8 bytes,
     * as push_scan compares it with skip[]. */
    uint64_t (*record_fingerprint)(void *arg,
                                   struct rk_slice key,
                                   const struct rpc_record *rec);
    /* A byte count for people ("1.5 MiB"), as netstats shows the others. */
    void (*human_bytes)(void *arg, char *out, size_t cap, uint64_t bytes);

    /* ---- the stall tracker (one, the session's) ---- */
    void (*stall_start)(void *arg);
    void (*stall_progress)(void *arg); /* a comparison begun, a chunk in */
    /* A step failed (peer: "with n2"; range may be NULL). */
    void (*stall_fail)(void *arg,
                       const char *step,
                       const char *peer,
                       const struct ring_range *range,
                       int err);
    /* Every tick: stalled once nothing moved for a while with work left. */
    void (*stall_check)(void *arg, bool work_left);
    void (*stall_text)(void *arg, FILE *f); /* netstats' line, if stalled */

    /* ---- the repair after a join (node.state's repair_due) ---- */
    /* Whether one is due; if so *joined_ms is the monotonic ms the node
     * became NORMAL, or 0 if it restarted since. */
    bool (*after_join_due)(void *arg, uint64_t *joined_ms);
    void (*after_join_done)(void *arg); /* no longer due (saved) */

    /* ---- the repair schedule (schedule.c) ---- */
    uint64_t (*wall_ms)(void *arg); /* Unix ms (kept across restarts) */
    /* Keep the schedule's records (repair_sched_encode'd, borrowed for
     * the call) for repair_sched_load after a restart. */
    void (*sched_save)(void *arg, struct rk_slice blob);
};

struct repair_options {
    const char *node_name; /* copied */
    bool after_join;       /* repair_after_join */
    /* the repair after a join waits 5 of these (at least 3 s) after the
     * node became NORMAL, for every node to hear of it */
    uint32_t gossip_interval_ms;
    uint32_t chunk_bytes; /* about this many bytes of keys and values a
                             chunk pulled or pushed */
    /* repair_interval_s: every arc the node replicates is repaired by a
     * session of its own at least this often (0: only when asked) */
    uint64_t interval_ms;
};

#define REPAIR_OPTIONS_INIT                                              \
    {                                                                    \
        .node_name = "", .after_join = true, .gossip_interval_ms = 1000, \
        .chunk_bytes = 1u << 20, .interval_ms = 0                        \
    }

/* ---- the part ----------------------------------------------------------- */

/* A repair part for one node; no session yet. -ENOMEM.
 * @note host is copied; host->arg must outlive the part. */
int repair_new(repair **out,
               const struct repair_host *host,
               const struct repair_options *opt);
/* After the node's stop (no session, no job out). NULL: nothing. */
void repair_free(repair *r);

/* `ringkv repair`: a session over every arc this node replicates, or only
 * their pieces inside `only` (start == end: the whole ring) unless NULL.
 * Returns at once: 0 (started, or over already: nothing to compare) or
 * RK_EBADREQ / RK_ESTALE / RK_ECLOSED (not now), -ENOMEM; with *text the
 * operator's answer either way (malloc'd, the caller's; NULL on -ENOMEM). */
int repair_begin(repair *r,
                 const struct ring_range *only,
                 char **text,
                 size_t *len);

/* Every gossip tick: a running session watched for a stall; the repair
 * after a join started once due and the ring has settled (turned off in
 * the options: no longer due). */
void repair_tick(repair *r);

/* A session is running. */
bool repair_running(const repair *r);

/* An RPC_MSG_MERKLE request from another node's repair (req: the frame,
 * borrowed for the call): reply(reply_arg, id, answer) exactly once, maybe
 * before this returns (a refusal); the caller keeps what reply_arg names
 * until then. At most two are computed at a time (OVERLOADED past). */
void repair_serve(repair *r,
                  struct rk_slice req,
                  uint64_t id,
                  repair_reply_cb reply,
                  void *reply_arg);

/* NETSTATS: the last session's lines (running or done), if there was one. */
void repair_text(const repair *r, FILE *f);

/* ---- the repair schedule (schedule.c) ---------------------------------- */

/* Scheduled repair (options.interval_ms): every tick, if no session runs,
 * the arc of this node's that waited longest since its last complete
 * repair (or since the node first replicated it) is repaired by a session
 * of its own (as repair_begin over that arc, plus a closing pass: with k
 * > 1 other replicas, the first k - 1 compared again, so that what was
 * pulled from the last reaches them) once that wait reaches half the
 * interval, one session at a time, at least interval / (4 x arcs) apart,
 * within stream_throughput_mb as every session. A session that ends with
 * every comparison of an arc done (with every other replica of it, all UP)
 * records for that arc when the session began and ended, if every replica
 * then holds what any held at its start (a closing pass, or at most one
 * other replica: a manual `ringkv repair` of whole arcs of RF 2 records
 * too); a failed arc is tried again after an eighth of the interval. An arc not
 * repaired for longer than the interval is overdue: logged (repair.overdue)
 * once and counted. */

/* One arc's record (Unix ms): when the node first replicated it, and when
 * the last repair of it that completed with every replica began and
 * ended (0: none yet). */
struct repair_arc_state {
    struct ring_range arc;
    uint64_t seen_ms, repaired_ms, done_ms;
};

/* The records as kept (host.sched_save), all integers big-endian:
 *   u8 version (REPAIR_SCHED_VERSION) | u32 count
 *   | count x (u64 start, u64 end, u64 seen_ms, u64 repaired_ms,
 *              u64 done_ms)
 * at most REPAIR_SCHED_MAX records. */
#define REPAIR_SCHED_VERSION 1
#define REPAIR_SCHED_MAX     20000 /* 800 KB: a system value holds 1 MiB */
#define REPAIR_SCHED_REC     40

/* 0 and a malloc'd encoding (caller frees), -ENOMEM, or RK_ETOOLARGE past
 * REPAIR_SCHED_MAX records. */
int repair_sched_encode(uint8_t **out,
                        size_t *out_len,
                        const struct repair_arc_state *a,
                        size_t n);
/* 0 and a malloc'd array (caller frees; NULL when *out_n is 0),
 * RK_EVERSION for another version, RK_ECORRUPT for anything malformed
 * (short, trailing bytes, too many), -ENOMEM. */
int repair_sched_decode(struct repair_arc_state **out,
                        size_t *out_n,
                        const uint8_t *p,
                        size_t len);
/* At start, before the first tick: the records kept before the restart
 * (for the arcs the node still replicates once it has its ring). The
 * decoder's error if blob does not decode (nothing loaded). */
int repair_sched_load(repair *r, struct rk_slice blob);
/* The records of the arcs this node replicates in its ring as of the last
 * tick: 0 and a malloc'd array (caller frees; NULL when *out_n is 0),
 * -ENOMEM. */
int repair_sched_list(struct repair_arc_state **out,
                      size_t *out_n,
                      const repair *r);

struct repair_sched_stats {
    uint64_t arcs;              /* this node replicates */
    uint64_t never;             /* of them never repaired completely */
    uint64_t overdue;           /* of them not repaired within the interval */
    uint64_t oldest_age_ms;     /* the longest since a complete repair (or
                                   since first replicated) */
    uint64_t runs, runs_failed; /* scheduled sessions since start */
};
void repair_sched_stats_get(struct repair_sched_stats *out, const repair *r);
/* NETSTATS: the schedule and the arcs, oldest first (at most a few). */
void repair_sched_text(const repair *r, FILE *f);

/* What this node's sessions exchanged since it started: pulled (in) and
 * pushed (out), records and key + value bytes (ringkv_repair_*). */
struct repair_stats {
    uint64_t keys_in, bytes_in, keys_out, bytes_out;
};
void repair_stats_get(struct repair_stats *out, const repair *r);

#endif
