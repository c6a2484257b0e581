/*
 * streaming.h - moving ranges between nodes when the ring changes: a
 * join's pull (bootstrap), a leave's push (decommission, removenode), the
 * cleanup of what a node no longer replicates, the positions that make a
 * movement resumable, the throughput budget, the stall tracker and the
 * progress text (docs/streaming.md, shared/DESIGN.md "Streaming").
 *
 * The part holds no `node *`: what it needs of the daemon (the clock a
 * copied record's timestamp advances, peers, RPCs, the rings, gossip
 * announcements, the saved node state, the clock, the log, the store, the
 * thread pool) comes through struct stream_host, a table of callbacks
 * with one `arg`, which node/ fills in (node/stream_host.c) and the unit
 * tests fill with a fake clock and fake peers (tests/unit/stream_world.h).
 * Everything runs on the host's loop thread except the bodies of the
 * works given to host->queue_work, which touch only the store and their
 * own job.
 */
#ifndef STREAMING_STREAMING_H
#define STREAMING_STREAMING_H

#include <stdarg.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>

#include "common/rk.h"
#include "ring/ring.h"
#include "storage/store.h"
#include "wire/rpc_msg.h"

typedef struct stream stream;

/* Node names (the gossip's wire limit) and internode "host:port". */
#define STREAM_NAME_MAX 64
#define STREAM_ADDR_MAX 160

/* Streams move chunks of about this many bytes of keys and values. */
#define STREAM_CHUNK (1u << 20)

/* ---- the host interface ------------------------------------------------- */

enum stream_log_level {
    STREAM_LOG_DEBUG = 0,
    STREAM_LOG_INFO,
    STREAM_LOG_WARN,
    STREAM_LOG_ERROR
};

/* What the host knows of a ring member. */
struct stream_peer {
    char name[STREAM_NAME_MAX + 1];
    char iaddr[STREAM_ADDR_MAX]; /* internode "host:port", "" if unknown */
    bool up;
    bool self;
};

/* What streaming announces through gossip, for this node or a peer. */
enum stream_announce {
    STREAM_ANNOUNCE_NORMAL = 0,
    STREAM_ANNOUNCE_LEAVING,
    STREAM_ANNOUNCE_LEFT,
    STREAM_ANNOUNCE_REMOVED /* a peer only: gone from the ring */
};

/* The part of the node's saved state (node.state) streaming reads and
 * sets; first_token is read only (it names a movement's positions). */
struct stream_state {
    uint64_t ring_epoch;
    uint64_t first_token; /* this node's first token, 0 if none */
    int ntokens;          /* how many it has */
    bool leaving, left;
    char removing[STREAM_NAME_MAX + 1]; /* the removal it drives, or "" */
    /* joining in the place of this dead node (replace), or "": the join
     * never asks it, and announces it REMOVED before NORMAL */
    char replacing[STREAM_NAME_MAX + 1];
    /* `ringkv rebuild --from DC` under way: DC, or "" (kept across
     * restarts: a restart takes the rebuild up again) */
    char rebuild_from[STREAM_NAME_MAX + 1];
};

/* A piece of work for the host's thread pool: work() off the loop, then
 * done() on the loop (status: the pool's, 0 or cancelled). The host does
 * its own accounting around it (the node's stop waits for it); done() may
 * free w. */
struct stream_work {
    void (*work)(struct stream_work *w);
    void (*done)(struct stream_work *w, int status);
};

/* An RPC's answer: status < 0 (not sent, not answered) or the answer's
 * frame, borrowed until the callback returns. */
typedef void (*stream_rpc_cb)(void *arg, int status, struct rk_slice resp);

struct stream_host {
    void *arg; /* passed to every callback */
    /* the loop's monotonic clock, and the wall clock, in ms */
    uint64_t (*now_ms)(void *arg);
    uint64_t (*wall_ms)(void *arg);
    /* the node's hybrid logical clock, as last advanced (for answers) */
    uint64_t (*hlc)(void *arg);
    /* one log line: `event`, then fmt's key=value fields */
    void (*log)(void *arg,
                enum stream_log_level level,
                const char *event,
                const char *fmt,
                va_list ap);
    /* the store (NULL before it opens and after it closes) */
    store *(*store)(void *arg);
    /* the node is stopping: no new work */
    bool (*stopping)(void *arg);
    /* queue w on the pool: 0 (w->done will run), or an error (it won't) */
    int (*queue_work)(void *arg, struct stream_work *w);
    /* The timestamp of a record copied from a peer, seen by the node's
     * hybrid logical clock (as a replica write's is) before the record is
     * stored: 0, or an error (the chunk is not stored). streaming/ writes
     * a chunk's records itself, straight into the store
     * (stream_items_commit). */
    int (*clock_seen)(void *arg, uint64_t ts);
    /* the peer named `name`, or ring member idx: 0, or RK_ENOTFOUND */
    int (*peer_by_name)(void *arg, const char *name, struct stream_peer *out);
    int (*peer_at)(void *arg, uint32_t idx, struct stream_peer *out);
    /* Send msg (copied) to the internode "host:port": 0 and cb later, or
     * an error and no cb. */
    int (*rpc)(void *arg,
               const char *iaddr,
               struct rk_slice msg,
               uint32_t timeout_ms,
               stream_rpc_cb cb,
               void *cbarg);
    /* Answer request id on connection conn (a served request's). */
    void (*reply)(void *arg, void *conn, uint64_t id, struct rk_slice frame);
    void (*conn_ref)(void *arg, void *conn);
    void (*conn_unref)(void *arg, void *conn);
    /* A malformed internode frame (counted by the node's metrics). */
    void (*bad_frame)(void *arg);
    /* the ring and the pending ring (NULL: none), borrowed until the next
     * rebuild */
    const ring *(*ring)(void *arg);
    const ring *(*ring_pending)(void *arg);
    /* the node's ring is behind the cluster's (a newer epoch heard, or
     * restarted and settling) */
    bool (*ring_stale)(void *arg);
    /* the node is NORMAL in the ring (not joining, not parked) */
    bool (*ring_member)(void *arg);
    /* rebuild the rings after an announcement; create the ranges of the
     * arcs the node replicates */
    void (*ring_rebuild)(void *arg);
    void (*ranges_ensure)(void *arg);
    /* peers gossiping a replication other than this node's */
    size_t (*repl_mismatches)(void *arg);
    /* the replication factor of data centre dc (0: none) */
    int (*dc_rf)(void *arg, const char *dc);
    /* Announce a status for this node (peer NULL) or on a peer's behalf:
     * 0 and the new ring epoch, or an error. */
    int (*announce)(void *arg,
                    const char *peer,
                    enum stream_announce st,
                    uint64_t *epoch);
    /* the saved state: read, and set and saved (0 or the save's error) */
    void (*state_get)(void *arg, struct stream_state *out);
    int (*state_save)(void *arg, const struct stream_state *st);
    /* The join is over: NORMAL announced under epoch; the node saves
     * joining=0 and the epoch and serves as NORMAL. */
    void (*join_done)(void *arg, uint64_t epoch);
    /* A join aborted: the node withdraws its tokens (*epoch: the new
     * epoch); 0 or an error. */
    int (*join_withdraw)(void *arg, uint64_t *epoch);
    /* Whether the join must wait before it streams, asked every tick until
     * it plans (NULL: never): another movement changes the replicas of
     * ranges it changes too and goes first. If so, that node's name into
     * ahead[0..cap) and why, in words, into why[0..why_cap); the node says
     * so in gossip, `ringkv status` and its log. */
    bool (*join_queued)(
        void *arg, char *ahead, size_t cap, char *why, size_t why_cap);
    /* Hints this node keeps for another member, which would be lost with
     * it: how many for the first member that has some (its name into
     * for_name; its replay kicked), 0 when none. */
    uint64_t (*hints_pending)(void *arg, char *for_name, size_t cap);
    /* the node has left the ring: stop it */
    void (*self_stop)(void *arg);
};

/* A join pulls this many ranges at once in all, at most this many from
 * one donor; a donor scans at most STREAM_DONOR_SCANS chunks at once (more
 * requests are answered OVERLOADED), so a donor's limit stays within it. */
#define STREAM_MAX_RANGES_DEFAULT       12
#define STREAM_DONOR_MAX_RANGES_DEFAULT 2
#define STREAM_DONOR_SCANS              4

struct stream_config {
    char node_name[STREAM_NAME_MAX + 1];
    int stream_throughput_mb; /* 0: no cap */
    /* a join's ranges pulled at once, in all and from one donor */
    int stream_max_ranges;
    int stream_donor_max_ranges;
    int stall_warning_s;
    int auto_cleanup_s; /* 0: off */
    int gossip_interval_ms;
    bool hinted_handoff;
    uint64_t max_hint_window_ms;
};

#define STREAM_CONFIG_INIT                                          \
    {                                                               \
        .node_name = "", .stream_throughput_mb = 0,                 \
        .stream_max_ranges = STREAM_MAX_RANGES_DEFAULT,             \
        .stream_donor_max_ranges = STREAM_DONOR_MAX_RANGES_DEFAULT, \
        .stall_warning_s = 30, .auto_cleanup_s = 3600,              \
        .gossip_interval_ms = 1000, .hinted_handoff = true,         \
        .max_hint_window_ms = 3 * 3600 * 1000ull                    \
    }

/* What moved, for the node's metrics. */
struct stream_stats {
    uint64_t in_keys, in_bytes;   /* committed here (join, push received) */
    uint64_t out_keys, out_bytes; /* sent (donor, leave) */
};

/* A new streaming part: 0 and *out, or -ENOMEM. cfg is copied; host is
 * copied and must answer until stream_free. */
int stream_new(stream **out,
               const struct stream_config *cfg,
               const struct stream_host *host);
/* Frees everything; nothing may be in flight (the host's stop waited for
 * its works and RPCs). NULL: nothing. */
void stream_free(stream *s);

/* Every gossip tick: the join, the leave and the automatic cleanup. */
void stream_tick(stream *s);
/* Between ticks, when the ring changed: a join that waits (the ring
 * delay, a stale ring, another join queued ahead: host->join_queued)
 * looks again at once, so that a queued join starts as soon as the one
 * ahead has announced NORMAL, not at the next tick. */
void stream_join_poke(stream *s);
void stream_stats_get(const stream *s, struct stream_stats *out);

/* ---- a join (join.c) ----------------------------------------------------- */

/* Announced BOOT with tokens (or restarted while joining): stream the
 * ranges in, then announce NORMAL (host->join_done). -EBUSY while an
 * aborted join still winds down, -ENOMEM. */
int stream_join_begin(stream *s);
/* Joining (begun, neither done nor aborted). */
bool stream_joining(const stream *s);
/* `ringkv abort` of the join: withdrawn (host->join_withdraw), no further
 * chunk asked or committed, its positions deleted, and once nothing is in
 * flight every range of the store dropped. 0 with msg saying so;
 * RK_EBADREQ when not joining; the withdrawal's error. */
int stream_join_abort(stream *s, char *msg, size_t cap);
/* An aborted join still winding down: no new join yet. */
bool stream_join_busy(const stream *s);
/* At start, not joining: a finished join's saved time still there is
 * logged (stream.leftover_progress) and deleted. */
void stream_join_leftover(stream *s);

/* ---- a rebuild (join.c) -------------------------------------------------- */

/* `ringkv rebuild --from DC`: stream every range this node replicates in
 * its ring from the replicas in data centre DC (a data centre that had no
 * replicas before a replication change gets its data so), with the join's
 * sessions: chunks committed last-write-wins (stream_items_commit),
 * positions saved each tick (a restart resumes, state.rebuild_from), the
 * throughput budget, progress in netstats. The node serves meanwhile.
 * Returns at once with the operator's answer (*text, malloc'd): 0, or
 * RK_EBADREQ (joining, leaving, a rebuild running, DC holds no replica of
 * some range, nothing to rebuild) / RK_ESTALE, or -ENOMEM. */
int stream_rebuild_begin(stream *s, const char *dc, char **text, size_t *len);
/* At start with state.rebuild_from set: the rebuild goes on (planned once
 * the ring has settled). 0 or -ENOMEM. */
int stream_rebuild_resume(stream *s, const char *dc);
/* A rebuild under way (begun, not done). */
bool stream_rebuilding(const stream *s);
/* `ringkv status`: the rebuild's line (under way, or the last one's end),
 * if there was one. */
void stream_rebuild_text(stream *s, FILE *f);

/* ---- a join's plan and donors (join_plan.c, pure) ----------------------- */

/* A piece of what a join pulls: a range inside one arc of the ring, and
 * the members of the ring (indices) that may send it, each holding all of
 * it: the arc's replicas, in the order of the replica walk, those of the
 * joiner's data centre first (npref of them; all if none is). */
struct stream_plan_range {
    struct ring_range range;
    uint64_t weight; /* the token space it covers, in 2^16 tokens, + 1 */
    uint32_t cand[RING_MAX_REPLICAS];
    uint32_t ncand, npref;
    uint32_t donor; /* stream_plan_donors' choice: an index into cand */
};

/* The pieces node `self` gains from ring `from` to ring `to` (its pending
 * ring), in ring order: every range gained cut at from's tokens, and a
 * piece that two candidates or more may send cut again while it is over a
 * quarter of a donor's fair share of the total. `excl` (NULL or ""): a
 * member never asked (the dead node a replace stands in for). *out is
 * malloc'd (free()), NULL when none. 0, RK_ENOTFOUND (self not in `to`),
 * -ENOMEM. Pure. */
int stream_plan_join(struct stream_plan_range **out,
                     size_t *nout,
                     const ring *from,
                     const ring *to,
                     const char *self,
                     const char *excl);
/* The pieces a rebuild from data centre from_dc pulls to node `self`:
 * every range self replicates in ring r, cut at r's tokens (and cut again
 * as stream_plan_join does), each piece's candidates its replicas in
 * from_dc (ncand 0 when none is there). *out malloc'd (free()), NULL when
 * none. 0, RK_ENOTFOUND (self not in r), -ENOMEM. Pure. */
int stream_plan_rebuild(struct stream_plan_range **out,
                        size_t *nout,
                        const ring *r,
                        const char *self,
                        const char *from_dc);
/* Choose each piece's donor among its first npref candidates that are
 * live (live[member]; NULL: all are) so that the weight spreads: the
 * biggest pieces first, each to the candidate with the least weight so
 * far (ties: the first in ring order), then pieces moved off the most
 * loaded donor while that lowers it. With no live preferred candidate, a
 * live other one, else the first. load[nmembers] (out): the weight each
 * member sends. 0 or -ENOMEM. Pure and deterministic. */
int stream_plan_donors(struct stream_plan_range *r,
                       size_t n,
                       const bool *live,
                       uint64_t *load,
                       size_t nmembers);

/* ---- the donor side (donor.c) ------------------------------------------- */

/* Answer an RPC_MSG_STREAM request on conn (host->reply). */
void stream_serve(stream *s, void *conn, uint64_t id, struct rk_slice f);
/* A record's identity (its key's token and its version) in 8 bytes, for
 * leaving out of a scan what the other side just sent (repair). */
uint64_t stream_record_fingerprint(struct rk_slice key,
                                   const struct rpc_record *rec);
/* Scan the arc of `at` from `at` on the pool (as a donor does) and call cb
 * on the loop with the chunk read (ch: its records, and where the scan
 * stands after them; borrowed, copy what you keep), their keys' and
 * values' bytes, and the chunk encoded as an RPC_MSG_STREAM_PUSH frame.
 * Records whose fingerprint is in skip[] (nskip, sorted; borrowed until
 * cb) are left out. status < 0: ch NULL, frame empty. Returns 0, or
 * RK_EOVERLOADED (too many scans running: ask again later), RK_ECLOSED,
 * RK_EBADREQ, -ENOMEM without calling cb. */
typedef void (*stream_scan_cb)(void *arg,
                               int status,
                               const struct rpc_stream_chunk *ch,
                               uint64_t kv_bytes,
                               struct rk_slice frame);
int stream_scan(stream *s,
                const struct rpc_stream_pos *at,
                uint32_t max_bytes,
                const uint64_t *skip,
                size_t nskip,
                stream_scan_cb cb,
                void *arg);
/* Commit the records of a chunk of arc rg (rpc_stream_item encoded):
 * every key must lie in rg. Each timestamp goes to host->clock_seen, then
 * a job on the host's pool writes the records into the store in one
 * synced transaction per range env (store_batch_commit_direct,
 * last-write-wins against the env and the memtable). cb(arg, status,
 * keys, bytes) on the loop once the chunk is durable (status: the first
 * failure). Without calling cb: RK_EPROTO (a key outside rg, nothing
 * committed), RK_ECLOSED, -ENOMEM, host->clock_seen's or
 * host->queue_work's error. */
typedef void (*stream_items_cb)(void *arg,
                                int status,
                                uint32_t keys,
                                uint64_t bytes);
int stream_items_commit(stream *s,
                        struct ring_range rg,
                        struct rk_slice items,
                        stream_items_cb cb,
                        void *arg);
/* Copy a stream cursor, its last key into to_last (RPC_STREAM_LAST_MAX). */
void stream_pos_copy(struct rpc_stream_pos *to,
                     uint8_t *to_last,
                     const struct rpc_stream_pos *from);

/* ---- decommission, removenode, abort (leave.c) -------------------------- */

/* decommission: announce LEAVING and push every range out (text: what the
 * operator is told, malloc'd). Errors: RK_EBADREQ with *text saying why,
 * RK_ESTALE, -ENOMEM. */
int stream_leave_begin(stream *s, char **text, size_t *len);
/* removenode: announce the dead node `name` LEAVING on its behalf, copy
 * each of its ranges from the other replicas to the node that gains it,
 * then announce it REMOVED. Errors as stream_leave_begin. */
int stream_remove_begin(stream *s, const char *name, char **text, size_t *len);
/* A restart with leaving=1: LEAVING was announced again; push again. */
int stream_leave_resume(stream *s);
/* A decommission or removal this node drives, not ended. */
bool stream_leave_running(const stream *s);
/* `ringkv abort` of a decommission or a removal (msg: what the operator is
 * told): 0, or RK_EBADREQ with msg saying why (nothing to abort, LEFT
 * already), RK_ESTALE, the announcement's error. */
int stream_move_abort(stream *s, char *msg, size_t cap);
/* Answer an RPC_MSG_STREAM_PUSH on conn (the gaining side). */
void stream_push_serve(stream *s, void *conn, uint64_t id, struct rk_slice f);
/* A decommission or a cleanup needs this node NORMAL in the ring and its
 * ring the cluster's: 0, or RK_EBADREQ / RK_ESTALE with why. */
int stream_ring_ready(stream *s, char *why, size_t cap);
/* Cleanup and repair need more: no node joining or leaving, none of it
 * driven here. 0 (*self: this node's index in the ring), or RK_EBADREQ /
 * RK_ESTALE / RK_ECLOSED with why, naming `what` ("clean up"). */
int stream_ring_settled(
    stream *s, const char *what, uint32_t *self, char *why, size_t cap);

/* ---- cleanup (cleanup.c) ------------------------------------------------- */

/* `ringkv cleanup`: drop the local ranges this node no longer replicates,
 * on the pool (text malloc'd). Errors: RK_EBADREQ / RK_ESTALE /
 * RK_ECLOSED with *text saying why, -ENOMEM. */
int stream_cleanup_begin(stream *s, char **text, size_t *len);

/* ---- the throughput budget (streaming.c) -------------------------------- */

/* stream_throughput_mb: a session takes a chunk's worth before it asks
 * for or reads a chunk (false: not now; the next tick tries again), and
 * settles it with the bytes the chunk really moved, or 0 if it failed. */
bool stream_budget_take(stream *s);
void stream_budget_settle(stream *s, uint64_t moved);

/* ---- progress text (netstats) ------------------------------------------- */

/* The movement under way (a join, a decommission, a removal) or, with
 * none, "Mode: <idle_mode>" and what the last join did; then the cleanup's
 * line. */
void stream_text(stream *s, FILE *f, const char *idle_mode);
/* The line of what this node sent to others. */
void stream_text_sent(const stream *s, FILE *f);
/* "12.3 MiB" */
void stream_human_bytes(char *out, size_t cap, uint64_t b);

/* ---- stalls (stall.c) ---------------------------------------------------- */

/* A long operation's last progress and the last step that failed since:
 * stalled once stall_warning_s passes without progress while work
 * remains (logged once, one netstats line). */
#define STREAM_STALL_PREFIX "Stalled:" /* netstats' line; the CLI looks */
struct stream_stall {
    const char *what;     /* the operation, for people: "decommission" */
    const char *ev;       /* its log events' prefix: "leave" */
    uint64_t progress_ms; /* loop ms of the last progress, or the start */
    uint64_t failures;    /* steps failed since */
    int err;              /* the last one's error; 0: none failed */
    char step[32];        /* which step it was ("push", "request") */
    char peer[STREAM_NAME_MAX + 8]; /* "to n4", "from n2", or "" */
    struct ring_range range;        /* its range, if has_range */
    bool has_range;
    bool stalled; /* logged <ev>.stalled, no progress since */
    /* what the operation waits for outside itself, set by its owner while
     * it waits ("the 3 hints it keeps for n4 to be replayed"), "" else;
     * the reason given when no step failed */
    char wait[STREAM_NAME_MAX + 96];
};
/* Start: no failure, progress now (what and ev: static strings). */
void stream_stall_start(stream *s,
                        struct stream_stall *st,
                        const char *what,
                        const char *ev);
/* Progress made (a chunk in place, a range done): not stalled. */
void stream_stall_progress(stream *s, struct stream_stall *st);
/* A step failed (peer: "to n4", "from n2", or NULL; range may be NULL). */
void stream_stall_fail(struct stream_stall *st,
                       const char *step,
                       const char *peer,
                       const struct ring_range *range,
                       int err);
/* Every tick while the operation runs: stalled once no progress came for
 * stall_warning_s while work_left (logged once). */
void stream_stall_check(stream *s, struct stream_stall *st, bool work_left);
/* netstats: the STREAM_STALL_PREFIX line, if stalled. */
void stream_stall_text(stream *s, const struct stream_stall *st, FILE *f);

#endif
