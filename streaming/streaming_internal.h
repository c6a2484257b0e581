/*
 * streaming_internal.h - struct stream and the names the files of
 * streaming/ share. Not a public header: only streaming/'s files include
 * it.
 *
 * struct stream holds the part's state: the join (join.c), the leave
 * (leave.c), the last cleanup (cleanup.c), the donor's scans (donor.c),
 * the throughput budget and the counters (streaming.c). Its parts reach
 * the daemon only through s->h (struct stream_host).
 */
#ifndef STREAMING_STREAMING_INTERNAL_H
#define STREAMING_STREAMING_INTERNAL_H

#include "streaming/streaming.h"

struct stream_join;    /* join.c */
struct stream_leave;   /* leave.c */
struct stream_cleanup; /* cleanup.c */

struct stream {
    struct stream_config cfg;
    struct stream_host h;
    struct stream_join *join;       /* this node's join, or NULL */
    struct stream_leave *leave;     /* its decommission / removal, or NULL */
    struct stream_cleanup *cleanup; /* the last cleanup, or NULL */
    /* automatic cleanup (auto_cleanup_s): the ring epoch watched, since
     * when it has been settled, and whether it was looked at already */
    uint64_t acu_epoch, acu_since_ms;
    bool acu_checked;
    /* a removal this node drove, cut short by a restart (removing=):
     * when it was last tried, and why it could not be taken up then */
    uint64_t remove_try_ms;
    char remove_why[256];
    int scans; /* donor scans on the pool (donor.c) */
    /* stream_throughput_mb's budget: bytes that may still be streamed
     * (negative: overspent), refilled from budget_ms on */
    int64_t budget;
    uint64_t budget_ms;
    struct stream_stats stats;
    struct rpc_buf reply_buf; /* refusals and acks are encoded here */
};

/* ---- streaming.c ---- */
/* The host's calls, spelt short. */
static inline uint64_t stream__now(const stream *s)
{
    return s->h.now_ms(s->h.arg);
}
static inline store *stream__store(const stream *s)
{
    return s->h.store(s->h.arg);
}
static inline bool stream__stopping(const stream *s)
{
    return s->h.stopping(s->h.arg);
}
static inline const ring *stream__ring(const stream *s)
{
    return s->h.ring(s->h.arg);
}
static inline const ring *stream__ring_pending(const stream *s)
{
    return s->h.ring_pending(s->h.arg);
}
/* A log line through the host. */
void stream__log(stream *s,
                 enum stream_log_level level,
                 const char *event,
                 const char *fmt,
                 ...) __attribute__((format(printf, 4, 5)));
#define SLOG(s, lvl, ...) stream__log((s), STREAM_LOG_##lvl, __VA_ARGS__)
/* The saved state's fields this part sets, saved through the host. */
void stream__state(stream *s, struct stream_state *out);
int stream__state_save(stream *s, const struct stream_state *st);
/* ms, or five gossip intervals if longer (the ring delay, lingering). */
uint64_t stream__at_least(const stream *s, uint64_t ms);

/* Range positions kept across restarts (a join's, a leave's): a job on the
 * pool that sets or deletes system values in one synced transaction
 * (store_sys_write), a position stored as a STREAM_CHUNK message with no
 * items (its decoder is the wire's, fuzzed). new: a job for up to cap
 * values (NULL: -ENOMEM), what names it in a failure's log line,
 * after(s, status) runs on the loop once it has run (status: 0 or the
 * failure, logged already). sync_first: the job first makes every write
 * to the range envs durable (store_sync_envs: the chunks a join committed
 * unsynced, stream__items_commit) and saves nothing if that fails. add:
 * name set to *at, or deleted (at NULL); u64: name set to v (as
 * store_sys_set_u64 does), or deleted. run: queues it (the host's stop
 * waits for it) or frees it and returns the error. */
struct stream_pos_job;
struct stream_pos_job *stream__pos_job_new(stream *s,
                                           size_t cap,
                                           const char *what,
                                           void (*after)(stream *, int));
void stream__pos_job_sync_first(struct stream_pos_job *j);
int stream__pos_job_add(struct stream_pos_job *j,
                        const char *name,
                        const struct rpc_stream_pos *at);
int stream__pos_job_u64(struct stream_pos_job *j,
                        const char *name,
                        uint64_t v,
                        bool del);
int stream__pos_job_run(struct stream_pos_job *j);
void stream__pos_job_free(struct stream_pos_job *j);
/* stream_items_commit, with the env synced per chunk only with `sync`;
 * without, the chunk is durable after the next store_sync_envs (a pos job
 * with sync_first), so a caller moves a saved position past it only
 * through such a job (a join: many chunks, one sync per save). */
int stream__items_commit(stream *s,
                         struct ring_range rg,
                         struct rk_slice items,
                         bool sync,
                         stream_items_cb cb,
                         void *arg);
/* The position saved under name for range r, into at (its last key into
 * at_last): 0, RK_ENOTFOUND, or RK_EPROTO when it does not decode or is of
 * another range. */
int stream__pos_load(stream *s,
                     const char *name,
                     struct ring_range r,
                     struct rpc_stream_pos *at,
                     uint8_t *at_last);
/* netstats: how far along range a cursor is, [0, 1], by the token it
 * reached (keys hash uniformly); a 20-column bar of it. */
double stream__fraction(struct ring_range range,
                        const struct rpc_stream_pos *at);
void stream__bar(char bar[21], double fraction);
/* Answer a pushed chunk or a refusal with a WRITE_ACK of status. */
void stream__reply_ack(stream *s, void *conn, uint64_t id, int status);

/* ---- join.c, leave.c, cleanup.c ---- */
void stream__join_tick(stream *s);
void stream__join_text(stream *s, FILE *f);
void stream__join_idle_text(stream *s, FILE *f);
void stream__join_free(stream *s);
/* A rebuild's sessions are all done: state.rebuild_from cleared, logged. */
void stream__rebuild_done(stream *s);
void stream__leave_tick(stream *s);
void stream__leave_text(stream *s, FILE *f);
void stream__leave_free(stream *s);
void stream__cleanup_auto(stream *s);
void stream__cleanup_text(stream *s, FILE *f);
void stream__cleanup_free(stream *s);

#endif
