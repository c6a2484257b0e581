/*
 * streaming.c - the part's shared pieces: its lifecycle, the host's log
 * and saved state, the positions that make a movement resumable, the
 * throughput budget, the checks a movement makes of the ring, and the
 * netstats text around the join's and the leave's own.
 *
 * Positions: each session of a join or a leave keeps its cursor after its
 * last chunk in place in a system value of its own (a STREAM_CHUNK message
 * with no items: its decoder is the wire's, fuzzed), saved by a job on the
 * pool that writes all the values that moved in one synced transaction
 * (store_sys_write). join.c and leave.c say how they name and use them.
 *
 * Budget: stream_throughput_mb caps the node's streaming, in and out, with
 * one budget: a session takes a chunk's worth before it asks or reads,
 * and settles it with the bytes the chunk held. The budget refills at the
 * cap and holds at most a second of it (or one chunk, if more), so over
 * any T seconds at most about (T + 1) seconds' worth plus one chunk per
 * session moves.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "streaming/streaming_internal.h"

/* ---- lifecycle ------------------------------------------------------------
 */

int stream_new(stream **out,
               const struct stream_config *cfg,
               const struct stream_host *host)
{
    stream *s = calloc(1, sizeof(*s));
    if (!s)
        return -ENOMEM;
    s->cfg = *cfg;
    s->h = *host;
    *out = s;
    return 0;
}

void stream_free(stream *s)
{
    if (!s)
        return;
    stream__join_free(s);
    stream__leave_free(s);
    stream__cleanup_free(s);
    rpc_buf_free(&s->reply_buf);
    free(s);
}

void stream_tick(stream *s)
{
    stream__join_tick(s);
    stream__leave_tick(s);
    stream__cleanup_auto(s);
}

void stream_stats_get(const stream *s, struct stream_stats *out)
{
    *out = s->stats;
}

void stream__log(stream *s,
                 enum stream_log_level level,
                 const char *event,
                 const char *fmt,
                 ...)
{
    va_list ap;
    va_start(ap, fmt);
    s->h.log(s->h.arg, level, event, fmt, ap);
    va_end(ap);
}

void stream__state(stream *s, struct stream_state *out)
{
    memset(out, 0, sizeof(*out));
    s->h.state_get(s->h.arg, out);
}

int stream__state_save(stream *s, const struct stream_state *st)
{
    return s->h.state_save(s->h.arg, st);
}

uint64_t stream__at_least(const stream *s, uint64_t ms)
{
    uint64_t g = 5 * (uint64_t)s->cfg.gossip_interval_ms;
    return g > ms ? g : ms;
}

void stream__reply_ack(stream *s, void *conn, uint64_t id, int status)
{
    struct rpc_write_ack a = {.status = status, .hlc = s->h.hlc(s->h.arg)};
    struct rpc_buf *b = &s->reply_buf;
    rpc_buf_reset(b);
    if (rpc_write_ack_encode(b, &a) == 0)
        s->h.reply(s->h.arg, conn, id, RK_SLICE(b->data, b->len));
}

/* ---- the ring a movement needs ------------------------------------------ */

int stream_ring_ready(stream *s, char *why, size_t cap)
{
    if (!s->h.ring_member(s->h.arg)) {
        snprintf(why, cap,
                 "%.64s is still joining: ask again once it is NORMAL",
                 s->cfg.node_name);
        return RK_EBADREQ;
    }
    if (s->h.ring_stale(s->h.arg)) {
        snprintf(why, cap,
                 "%.64s's ring is behind the cluster's (it has just started "
                 "or heard of a newer epoch): try again in a few seconds",
                 s->cfg.node_name);
        return RK_ESTALE;
    }
    return 0;
}

/* Whether a member is joining (even before it has chosen its tokens) or
 * leaving (so also whenever there is a pending ring). */
static bool moving(const ring *r)
{
    for (size_t i = 0; i < ring_node_count(r); i++) {
        struct ring_node_info ni;
        if (ring_node_get(r, &ni, (uint32_t)i) == 0 &&
            (ni.state == RING_BOOT || ni.state == RING_LEAVING))
            return true;
    }
    return false;
}

int stream_ring_settled(
    stream *s, const char *what, uint32_t *self, char *why, size_t cap)
{
    int rc = stream_ring_ready(s, why, cap);
    if (rc < 0)
        return rc;
    const ring *r = stream__ring(s);
    struct ring_node_info me;
    *self = r ? ring_node_find(r, s->cfg.node_name) : RING_NONE;
    if (stream_leave_running(s) || *self == RING_NONE ||
        ring_node_get(r, &me, *self) < 0 || me.state != RING_NORMAL) {
        snprintf(why, cap, "%.64s is leaving or holds no tokens: nothing to %s",
                 s->cfg.node_name, what);
        return RK_EBADREQ;
    }
    if (moving(r)) {
        snprintf(why, cap,
                 "a node is joining or leaving: its ranges are moving; %s "
                 "once `ringkv status` shows every node UN",
                 what);
        return RK_EBADREQ;
    }
    if (!stream__store(s) || stream__stopping(s)) {
        snprintf(why, cap, "the node is stopping");
        return RK_ECLOSED;
    }
    return 0;
}

/* ---- positions kept across restarts -------------------------------------- */

struct stream_pos_job {
    struct stream_work w;
    stream *s;
    store *st; /* read on the loop when queued */
    size_t k, cap;
    char **names;
    struct rk_slice *vals; /* malloc'd; p NULL: delete */
    const char *what;      /* the log event's prefix */
    void (*after)(stream *s, int status);
    bool sync_first; /* store_sync_envs before the values */
    int status;
};

void stream__pos_job_free(struct stream_pos_job *j)
{
    if (!j)
        return;
    for (size_t i = 0; i < j->k; i++) {
        free(j->names[i]);
        free((void *)j->vals[i].p);
    }
    free(j->names);
    free(j->vals);
    free(j);
}

struct stream_pos_job *stream__pos_job_new(stream *s,
                                           size_t cap,
                                           const char *what,
                                           void (*after)(stream *, int))
{
    struct stream_pos_job *j = calloc(1, sizeof(*j));
    if (!j || !(j->names = calloc(cap ? cap : 1, sizeof(*j->names))) ||
        !(j->vals = calloc(cap ? cap : 1, sizeof(*j->vals)))) {
        stream__pos_job_free(j);
        return NULL;
    }
    j->s = s;
    j->cap = cap;
    j->what = what;
    j->after = after;
    return j;
}

/* Adds name = v[0..len) (copied; v NULL: a deletion). */
static int pos_job_put(struct stream_pos_job *j,
                       const char *name,
                       const uint8_t *v,
                       size_t len)
{
    if (j->k == j->cap)
        return -ENOBUFS;
    char *nm = strdup(name);
    uint8_t *p = v ? malloc(len ? len : 1) : NULL;
    if (!nm || (v && !p)) {
        free(nm);
        free(p);
        return -ENOMEM;
    }
    if (v)
        memcpy(p, v, len);
    j->names[j->k] = nm;
    j->vals[j->k++] = RK_SLICE(p, v ? len : 0);
    return 0;
}

int stream__pos_job_add(struct stream_pos_job *j,
                        const char *name,
                        const struct rpc_stream_pos *at)
{
    if (!at)
        return pos_job_put(j, name, NULL, 0);
    struct rpc_stream_chunk ch = {.next = *at};
    struct rpc_buf b = {0};
    int rc = rpc_stream_chunk_encode(&b, &ch);
    if (rc == 0)
        rc = pos_job_put(j, name, b.data, b.len);
    rpc_buf_free(&b);
    return rc;
}

int stream__pos_job_u64(struct stream_pos_job *j,
                        const char *name,
                        uint64_t v,
                        bool del)
{
    uint8_t b[8];
    store_sys_u64_value(b, v);
    return pos_job_put(j, name, del ? NULL : b, 8);
}

void stream__pos_job_sync_first(struct stream_pos_job *j)
{
    j->sync_first = true;
}

static void pos_job_work(struct stream_work *w)
{
    struct stream_pos_job *j = (struct stream_pos_job *)w;
    j->status = j->sync_first ? store_sync_envs(j->st) : 0;
    if (j->status == 0 && j->k > 0)
        j->status =
            store_sys_write(j->st, (const char **)j->names, j->vals, j->k);
}

static void pos_job_done(struct stream_work *w, int status)
{
    struct stream_pos_job *j = (struct stream_pos_job *)w;
    stream *s = j->s;
    (void)status;
    if (j->status < 0)
        SLOG(s, WARN, "progress.save_fail", "of=%s error=\"%s\"", j->what,
             rk_strerror(j->status));
    j->after(s, j->status);
    stream__pos_job_free(j);
}

int stream__pos_job_run(struct stream_pos_job *j)
{
    stream *s = j->s;
    j->st = stream__store(s);
    j->w.work = pos_job_work;
    j->w.done = pos_job_done;
    int rc = j->st ? s->h.queue_work(s->h.arg, &j->w) : RK_ECLOSED;
    if (rc < 0) {
        stream__pos_job_free(j);
        return rc;
    }
    return 0;
}

int stream__pos_load(stream *s,
                     const char *name,
                     struct ring_range r,
                     struct rpc_stream_pos *at,
                     uint8_t *at_last)
{
    uint8_t *p = NULL;
    size_t len = 0;
    struct rpc_stream_chunk ch;
    int rc = store_sys_get(&p, &len, stream__store(s), name);
    if (rc < 0)
        return rc;
    rc = rpc_stream_chunk_decode(&ch, RK_SLICE(p, len));
    if (rc == 0 && (ch.next.start != r.start || ch.next.end != r.end ||
                    ch.next.last.len > RPC_STREAM_LAST_MAX))
        rc = RK_EPROTO;
    if (rc == 0)
        stream_pos_copy(at, at_last, &ch.next);
    free(p);
    return rc;
}

void stream_pos_copy(struct rpc_stream_pos *to,
                     uint8_t *to_last,
                     const struct rpc_stream_pos *from)
{
    *to = *from;
    size_t l = from->last.len <= RPC_STREAM_LAST_MAX ? from->last.len : 0;
    if (l)
        memcpy(to_last, from->last.p, l);
    to->last = RK_SLICE(to_last, l);
}

/* ---- the throughput budget ----------------------------------------------- */

static void budget_refill(stream *s)
{
    int64_t rate = (int64_t)s->cfg.stream_throughput_mb << 20; /* bytes/s */
    int64_t burst = rate > STREAM_CHUNK ? rate : STREAM_CHUNK;
    uint64_t now = stream__now(s);
    if (s->budget_ms == 0) {
        s->budget = burst;
    } else if (now > s->budget_ms) {
        s->budget += rate * (int64_t)(now - s->budget_ms) / 1000;
        if (s->budget > burst)
            s->budget = burst;
    }
    s->budget_ms = now;
}

bool stream_budget_take(stream *s)
{
    if (s->cfg.stream_throughput_mb <= 0)
        return true;
    budget_refill(s);
    if (s->budget < 0)
        return false;
    s->budget -= STREAM_CHUNK;
    return true;
}

void stream_budget_settle(stream *s, uint64_t moved)
{
    if (s->cfg.stream_throughput_mb <= 0)
        return;
    budget_refill(s);
    s->budget += (int64_t)STREAM_CHUNK - (int64_t)moved;
}

/* ---- netstats -------------------------------------------------------------
 */

double stream__fraction(struct ring_range range,
                        const struct rpc_stream_pos *at)
{
    if (at->done)
        return 1.0;
    if (!at->started)
        return 0.0;
    double len = range.start == range.end ? 18446744073709551616.0
                                          : (double)(range.end - range.start);
    double f = (double)(at->pos - range.start) / len;
    return f < 0 ? 0 : f > 1 ? 1 : f;
}

void stream__bar(char bar[21], double fraction)
{
    int fill = (int)(fraction * 20 + 0.5);
    for (int k = 0; k < 20; k++)
        bar[k] = k < fill ? '#' : '.';
    bar[20] = '\0';
}

void stream_human_bytes(char *out, size_t cap, uint64_t b)
{
    static const char *const unit[] = {"B", "KiB", "MiB", "GiB", "TiB"};
    double v = (double)b;
    int u = 0;
    while (v >= 1024 && u < 4) {
        v /= 1024;
        u++;
    }
    snprintf(out, cap, u ? "%.1f %s" : "%.0f %s", v, unit[u]);
}

void stream_text(stream *s, FILE *f, const char *idle_mode)
{
    if (stream_joining(s)) {
        stream__join_text(s, f);
    } else if (s->leave) {
        stream__leave_text(s, f);
    } else if (stream_rebuilding(s)) {
        fprintf(f, "Mode: %s\n", idle_mode);
        stream__join_text(s, f);
    } else {
        fprintf(f, "Mode: %s\n", idle_mode);
        stream__join_idle_text(s, f);
    }
    stream__cleanup_text(s, f);
}

void stream_text_sent(const stream *s, FILE *f)
{
    char b[32];
    stream_human_bytes(b, sizeof(b), s->stats.out_bytes);
    fprintf(f,
            "Sent to joining nodes (or pushed while leaving): %llu keys, %s; "
            "%d scan%s running.\n",
            (unsigned long long)s->stats.out_keys, b, s->scans,
            s->scans == 1 ? "" : "s");
}
