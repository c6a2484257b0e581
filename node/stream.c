/*
 * stream.c - bootstrap streaming: a joining node pulls the data of the
 * ranges it gains from the replicas that hold them, before it announces
 * NORMAL (shared/DESIGN.md, "Streaming").
 *
 * The joining side. Once its tokens are chosen (gshell.c), the node
 * persists them with joining=1 and announces TOKENS and STATUS BOOT under
 * a new epoch. Every node then builds, besides its ring, the ring with the
 * booting node placed (n->ring_pending), and coordinators send each write
 * to the pending replica too, requiring its answer on top of the level's
 * (coord.c): a write acknowledged during the join is on the joining node as
 * well as on a quorum of the old replicas. After STREAM_DELAY_MS, for
 * gossip to spread the announcement (or five gossip intervals, if longer:
 * Cassandra waits its RING_DELAY for the same reason), the node computes the
 * movement plan (ring_plan_new from the ring to the pending ring) and opens a
 * session per range it gains. A session asks one source at a time (the replicas
 * that lose the range first, then the range's other replicas) for chunks
 * of the range in token order (RPC_MSG_STREAM), commits each chunk's
 * records through the group commit (last-write-wins, so a record that a
 * dual write brought already is not overwritten by an older one), and only
 * then asks for the next, from where the chunk ended. A source that fails
 * or does not answer is replaced by the next one, from the same point.
 * STREAM_PARALLEL sessions run at once. When every session is done the node
 * announces NORMAL (a new epoch) and clears joining.
 *
 * A restart during the join (joining=1 in node.state) announces BOOT with
 * the same tokens again and resumes each range from the position saved
 * after its last committed chunk ("progress kept across restarts",
 * below), or from its start when the node was down past the hint window.
 *
 * The donor side (node__stream_serve): a STREAM request carries the scan
 * cursor (wire/rpc_msg.h), so a donor keeps no session. The scan runs on
 * the libuv pool (store_scan_next; it applies the memtable first, so a
 * chunk sees every committed write), at most STREAM_DONOR_JOBS at once; a
 * request past that is answered OVERLOADED and asked again.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "node/log.h"
#include "node/node_internal.h"

#define STREAM_DELAY_MS                                                  \
    2000                        /* after announcing BOOT with tokens (at \
                                   least 5 gossip intervals) */
#define STREAM_PARALLEL   4     /* sessions asking at once */
#define STREAM_TIMEOUT_MS 30000 /* per chunk request */
#define STREAM_RETRY_MS   1000  /* after every source failed once */
#define STREAM_DONOR_JOBS 4     /* scans a donor runs at once */
#define STREAM_DONOR_MAX  ((size_t)4 << 20) /* bytes a chunk may ask */
#define STREAM_MAX_SRCS   (RING_MAX_REPLICAS * 2)

enum sess_state { S_IDLE = 0, S_ASKING, S_COMMITTING, S_WAIT, S_DONE };

struct stream_sess {
    node *n;
    struct ring_range range;
    char src[STREAM_MAX_SRCS][GOSSIP_NAME_MAX + 1];
    int nsrc, cur, fails;
    enum sess_state state;
    uint64_t retry_at;
    /* where the next request starts, and where the chunk being committed
     * ends (its last bytes copied: the answer's buffer is borrowed) */
    struct rpc_stream_pos at, next;
    uint8_t at_last[RPC_STREAM_LAST_MAX], next_last[RPC_STREAM_LAST_MAX];
    int commit_err;
    uint64_t chunk_keys, chunk_bytes;
    uint64_t keys, bytes;
    struct rpc_buf msg;
    bool unsaved; /* `at` moved since its position was last persisted */
};

struct node_stream {
    struct stream_sess *s;
    size_t ns;
    size_t asking; /* sessions in S_ASKING or S_COMMITTING */
    bool planned;
    uint64_t ready_at; /* mono ms: plan from then */
    uint64_t start_ms;
    uint64_t last_log_ms;
    uint64_t keys, bytes;    /* committed so far, all sessions */
    bool saving;             /* a save job on the pool */
    bool purge_due;          /* joined: the saved positions are to go */
    bool purged;             /* and their deletion queued: nothing more saved */
    struct node_stall stall; /* a chunk committed (stall.c) */
    /* `ringkv abort`: the join withdrawn; once nothing is in flight what
     * it streamed in is dropped (drop_job) */
    bool aborted, dropping, dropped;
    uint64_t aborted_ms;
    int drop_err;
};

static void sess_ask(struct stream_sess *ss);
static void stream_kick(node *n);

/* ---- the joining side ------------------------------------------------- */

static void sess_add_src(struct stream_sess *ss, const char *name)
{
    for (int i = 0; i < ss->nsrc; i++)
        if (strcmp(ss->src[i], name) == 0)
            return;
    if (ss->nsrc < STREAM_MAX_SRCS)
        snprintf(ss->src[ss->nsrc++], sizeof(ss->src[0]), "%s", name);
}

void node__stream_pos_copy(struct rpc_stream_pos *to,
                           uint8_t *to_last,
                           const struct rpc_stream_pos *from)
{
    *to = *from;
    size_t l = from->last.len <= RPC_STREAM_LAST_MAX ? from->last.len : 0;
    if (l)
        memcpy(to_last, from->last.p, l);
    to->last = RK_SLICE(to_last, l);
}

/* A session's request failed: the next source, from the same point, at
 * once; a pause of STREAM_RETRY_MS once every source has failed since the
 * last chunk committed, or when none is live (`wait`). Logged at the first
 * failure and then once per round of the sources. */
static void
sess_fail(struct stream_sess *ss, const char *why, int err, bool wait)
{
    node *n = ss->n;
    struct node_stream *st = n->stream;
    if (ss->state == S_ASKING || ss->state == S_COMMITTING) {
        st->asking--;
        node__stream_budget_settle(n, 0);
    }
    ss->fails++;
    char from[GOSSIP_NAME_MAX + 8] = "";
    if (ss->nsrc)
        snprintf(from, sizeof(from), "from %s", ss->src[ss->cur]);
    node__stall_fail(&st->stall, why, from, &ss->range, err);
    int round = ss->nsrc > 0 ? ss->nsrc : 1;
    if (ss->fails == 1 || ss->fails % round == 0)
        LOG(WARN, "stream.retry",
            "range=(%llu,%llu] source=%s why=\"%s\" error=\"%s\" "
            "failures=%d",
            (unsigned long long)ss->range.start,
            (unsigned long long)ss->range.end,
            ss->nsrc ? ss->src[ss->cur] : "-", why, rk_strerror(err),
            ss->fails);
    if (ss->nsrc)
        ss->cur = (ss->cur + 1) % ss->nsrc;
    ss->state = S_WAIT;
    ss->retry_at = node__mono_ms(n) +
                   (wait || ss->fails % round == 0 ? STREAM_RETRY_MS : 0);
    stream_kick(n);
}

static void sess_chunk_committed(struct stream_sess *ss)
{
    node *n = ss->n;
    struct node_stream *st = n->stream;
    if (ss->commit_err) {
        sess_fail(ss, "commit", ss->commit_err, false);
        return;
    }
    ss->keys += ss->chunk_keys;
    ss->bytes += ss->chunk_bytes;
    st->keys += ss->chunk_keys;
    st->bytes += ss->chunk_bytes;
    node__stream_budget_settle(n, ss->chunk_bytes);
    n->stats.stream_in_keys += ss->chunk_keys;
    n->stats.stream_in_bytes += ss->chunk_bytes;
    ss->fails = 0;
    node__stall_progress(n, &st->stall);
    node__stream_pos_copy(&ss->at, ss->at_last, &ss->next);
    ss->unsaved = true;
    if (ss->at.done) {
        ss->state = S_DONE;
        st->asking--;
        LOG(INFO, "stream.range_done",
            "range=(%llu,%llu] source=%s keys=%llu bytes=%llu",
            (unsigned long long)ss->range.start,
            (unsigned long long)ss->range.end, ss->src[ss->cur],
            (unsigned long long)ss->keys, (unsigned long long)ss->bytes);
        stream_kick(n);
        return;
    }
    if (!st->aborted && node__stream_budget_take(n)) {
        ss->state = S_ASKING;
        sess_ask(ss);
        return;
    }
    ss->state = S_IDLE; /* the cap (stream_kick starts it in time), or
                           aborted */
    st->asking--;
    stream_kick(n);
}

static void
on_chunk_committed(void *arg, int status, uint32_t keys, uint64_t bytes)
{
    struct stream_sess *ss = arg;
    ss->commit_err = status;
    ss->chunk_keys = keys;
    ss->chunk_bytes = bytes;
    sess_chunk_committed(ss);
}

static void on_chunk(void *arg, int status, struct rk_slice resp)
{
    struct stream_sess *ss = arg;
    node *n = ss->n;
    if (status < 0) {
        sess_fail(ss, "request", status, false);
        return;
    }
    struct rpc_stream_chunk ch;
    int rc = rpc_stream_chunk_decode(&ch, resp);
    if (rc < 0) {
        n->stats.internode_bad++;
        sess_fail(ss, "malformed chunk", rc, false);
        return;
    }
    if (ch.status < 0) {
        sess_fail(ss, "source refused", ch.status, false);
        return;
    }
    if (ch.next.start != ss->range.start || ch.next.end != ss->range.end) {
        sess_fail(ss, "chunk of another range", RK_EPROTO, false);
        return;
    }
    if (n->stopping) {
        sess_fail(ss, "stopping", RK_ECLOSED, false);
        return;
    }
    if (n->stream->aborted) { /* not committed: it is all dropped */
        n->stream->asking--;
        node__stream_budget_settle(n, 0);
        ss->state = S_IDLE;
        return;
    }
    node__stream_pos_copy(&ss->next, ss->next_last, &ch.next);
    ss->state = S_COMMITTING;
    rc = node__commit_items(n, ss->range, ch.items, on_chunk_committed, ss);
    if (rc < 0)
        sess_fail(ss, rc == RK_EPROTO ? "key outside the range" : "commit", rc,
                  false);
}

static void sess_ask(struct stream_sess *ss)
{
    node *n = ss->n;
    if (ss->nsrc == 0) {
        sess_fail(ss, "no replica holds the range", RK_EUNAVAILABLE, true);
        return;
    }
    /* the first live source from the current one on */
    const struct node_peer *p = NULL;
    for (int k = 0; k < ss->nsrc; k++) {
        const struct node_peer *q =
            node__peer_by_name(n, ss->src[ss->cur], NULL);
        if (q && q->up && !q->self && q->iaddr[0]) {
            p = q;
            break;
        }
        ss->cur = (ss->cur + 1) % ss->nsrc;
    }
    if (!p) {
        sess_fail(ss, "no live source", RK_EUNAVAILABLE, true);
        return;
    }
    struct rpc_stream_req rq = {.epoch = n->ring ? ring_epoch(n->ring) : 0,
                                .at = ss->at,
                                .max_bytes = NODE_STREAM_CHUNK};
    rpc_buf_reset(&ss->msg);
    int rc = rpc_stream_req_encode(&ss->msg, &rq);
    if (rc == 0)
        rc = node__rpc_addr(n, p->iaddr, &ss->msg, STREAM_TIMEOUT_MS, 0,
                            on_chunk, ss);
    if (rc < 0)
        sess_fail(ss, "send", rc, false);
}

/* ---- progress kept across restarts ------------------------------------ */

/* Each session's position after its last committed chunk is kept in a
 * system value of its own (a STREAM_CHUNK message with no items: its
 * decoder is the wire's, fuzzed), named after the join (this node's first
 * token) and the range, saved on the pool at most once a gossip tick with
 * the wall time of the save, all in one synced transaction. A node restarted
 * while joining resumes each range from there (done ones are skipped), unless
 * it was down longer than max_hint_window_ms or hinted handoff is off: what it
 * missed meanwhile for the ranges it had streamed comes from hints, as for any
 * restarted replica, and past that window there are none, so it streams every
 * range again from its start. The values go once the join is done. */

static void save_name(const node *n, struct ring_range r, char *out, size_t cap)
{
    snprintf(out, cap, "stream.at.%016llx.%016llx_%016llx",
             (unsigned long long)(n->st.ntokens ? n->st.tokens[0] : 0),
             (unsigned long long)r.start, (unsigned long long)r.end);
}

static void save_time_name(const node *n, char *out, size_t cap)
{
    snprintf(out, cap, "stream.saved_ms.%016llx",
             (unsigned long long)(n->st.ntokens ? n->st.tokens[0] : 0));
}

/* ---- the position jobs (also leave.c's) ---- */

struct node_pos_job {
    uv_work_t w;
    node *n;
    size_t k, cap;
    char **names;
    struct rk_slice *vals; /* malloc'd; p NULL: delete */
    const char *what;      /* the log event's prefix */
    void (*after)(node *n);
};

void node__pos_job_free(struct node_pos_job *j)
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

struct node_pos_job *
node__pos_job_new(node *n, size_t cap, const char *what, void (*after)(node *))
{
    struct node_pos_job *j = calloc(1, sizeof(*j));
    if (!j || !(j->names = calloc(cap ? cap : 1, sizeof(*j->names))) ||
        !(j->vals = calloc(cap ? cap : 1, sizeof(*j->vals)))) {
        node__pos_job_free(j);
        return NULL;
    }
    j->n = n;
    j->cap = cap;
    j->what = what;
    j->after = after;
    return j;
}

/* Adds name = v[0..len) (copied; v NULL: a deletion). */
static int pos_job_put(struct node_pos_job *j,
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

int node__pos_job_add(struct node_pos_job *j,
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

int node__pos_job_u64(struct node_pos_job *j,
                      const char *name,
                      uint64_t v,
                      bool del)
{
    uint8_t b[8];
    store_sys_u64_value(b, v);
    return pos_job_put(j, name, del ? NULL : b, 8);
}

static void pos_job_work(uv_work_t *w)
{
    struct node_pos_job *j = w->data;
    int rc =
        store_sys_write(j->n->store, (const char **)j->names, j->vals, j->k);
    if (rc < 0)
        LOG(WARN, "progress.save_fail", "of=%s error=\"%s\"", j->what,
            rk_strerror(rc));
}

static void pos_job_after(uv_work_t *w, int status)
{
    struct node_pos_job *j = w->data;
    node *n = j->n;
    (void)status;
    j->after(n);
    node__pos_job_free(j);
    n->pending_closes--;
    node__stop_progress(n);
}

int node__pos_job_run(struct node_pos_job *j)
{
    j->w.data = j;
    int rc = uv_queue_work(j->n->loop, &j->w, pos_job_work, pos_job_after);
    if (rc < 0) {
        node__pos_job_free(j);
        return rc;
    }
    j->n->pending_closes++;
    return 0;
}

int node__pos_load(node *n,
                   const char *name,
                   struct ring_range r,
                   struct rpc_stream_pos *at,
                   uint8_t *at_last)
{
    uint8_t *p = NULL;
    size_t len = 0;
    struct rpc_stream_chunk ch;
    int rc = store_sys_get(&p, &len, n->store, name);
    if (rc < 0)
        return rc;
    rc = rpc_stream_chunk_decode(&ch, RK_SLICE(p, len));
    if (rc == 0 && (ch.next.start != r.start || ch.next.end != r.end ||
                    ch.next.last.len > RPC_STREAM_LAST_MAX))
        rc = RK_EPROTO;
    if (rc == 0)
        node__stream_pos_copy(at, at_last, &ch.next);
    free(p);
    return rc;
}

static void save_after(node *n)
{
    if (n->stream)
        n->stream->saving = false;
}

/* Start a job saving the moved positions (or, once joined, deleting them
 * all), if there is something to do and no job is running. */
static void stream_save(node *n)
{
    struct node_stream *st = n->stream;
    if (!st || !st->planned || st->saving || st->purged || !n->store)
        return;
    size_t k = 0;
    for (size_t i = 0; i < st->ns; i++)
        k += st->purge_due || st->s[i].unsaved;
    if (k == 0)
        return;
    struct node_pos_job *j = node__pos_job_new(n, k + 1, "join", save_after);
    if (!j)
        return;
    char name[80];
    for (size_t i = 0; i < st->ns; i++) {
        struct stream_sess *ss = &st->s[i];
        if (!st->purge_due && !ss->unsaved)
            continue;
        save_name(n, ss->range, name, sizeof(name));
        if (node__pos_job_add(j, name, st->purge_due ? NULL : &ss->at) < 0)
            continue; /* kept unsaved: tried again next time */
        ss->unsaved = false;
    }
    save_time_name(n, name, sizeof(name));
    if (node__pos_job_u64(j, name, node__now_ms(), st->purge_due) < 0) {
        node__pos_job_free(j);
        return;
    }
    /* Once the deletion is queued nothing is saved again: a session whose
     * position moved since its last save would otherwise write it back
     * after the deletion (regression: stream_progress_left_after_join) */
    st->purged = st->purge_due;
    st->purge_due = false;
    if (node__pos_job_run(j) == 0)
        st->saving = true;
}

void node__stream_leftover(node *n)
{
    char name[80];
    uint64_t saved = 0;
    save_time_name(n, name, sizeof(name));
    if (!n->store || store_sys_get_u64(&saved, n->store, name) < 0)
        return;
    /* the join finished (joining=0) but its positions were not deleted */
    LOG(WARN, "stream.leftover_progress",
        "saved_s_ago=%llu note=\"the positions of a finished join were "
        "still saved: the time of the last save is deleted now\"",
        (unsigned long long)((node__now_ms() - saved) / 1000));
    (void)store_sys_del(n->store, name);
}

/* Sessions resumed from the saved positions of this join, if recent
 * enough; logs what it found. */
static void stream_resume(node *n)
{
    struct node_stream *st = n->stream;
    char name[80];
    uint64_t saved = 0, now = node__now_ms();
    save_time_name(n, name, sizeof(name));
    if (!n->store || store_sys_get_u64(&saved, n->store, name) < 0)
        return; /* a join from its start */
    if (!n->cfg.hinted_handoff ||
        now - saved > (uint64_t)n->cfg.max_hint_window_ms) {
        LOG(WARN, "stream.resume_skipped",
            "saved_s_ago=%llu note=\"down longer than max_hint_window_ms "
            "(or hinted_handoff off): no hints for what it missed, every "
            "range is streamed again from its start\"",
            (unsigned long long)((now - saved) / 1000));
        return;
    }
    size_t whole = 0, part = 0;
    for (size_t i = 0; i < st->ns; i++) {
        struct stream_sess *ss = &st->s[i];
        save_name(n, ss->range, name, sizeof(name));
        if (node__pos_load(n, name, ss->range, &ss->at, ss->at_last) < 0)
            continue;
        if (ss->at.done) {
            ss->state = S_DONE;
            whole++;
        } else {
            part += ss->at.started;
        }
    }
    LOG(INFO, "stream.resumed",
        "ranges_done=%zu ranges_partly=%zu ranges=%zu saved_s_ago=%llu", whole,
        part, st->ns, (unsigned long long)((now - saved) / 1000));
}

/* The movement plan from the ring to the pending ring: a session for every
 * range this node gains. */
static int stream_plan(node *n)
{
    struct node_stream *st = n->stream;
    const ring *from = n->ring, *to = n->ring_pending;
    if (!to)
        return RK_EINTERNAL;
    uint32_t self_to = ring_node_find(to, n->cfg.node_name);
    struct ring_move *mv = NULL;
    size_t nmv = 0;
    int rc = ring_plan_new(&mv, &nmv, from, to);
    if (rc < 0)
        return rc;
    size_t mine = 0;
    for (size_t i = 0; i < nmv; i++)
        mine += mv[i].gain == self_to;
    st->s = calloc(mine ? mine : 1, sizeof(*st->s));
    if (!st->s) {
        ring_plan_free(mv);
        return -ENOMEM;
    }
    for (size_t i = 0; i < nmv; i++) {
        if (mv[i].gain != self_to)
            continue;
        struct stream_sess *ss = &st->s[st->ns++];
        ss->n = n;
        ss->range = mv[i].range;
        ss->at.start = ss->range.start;
        ss->at.end = ss->range.end;
        ss->at.last = RK_SLICE(ss->at_last, 0);
        struct ring_node_info ni;
        /* the replicas that lose the range hold all of it */
        for (uint32_t k = 0; k < mv[i].nlose; k++)
            if (ring_node_get(from, &ni, mv[i].lose[k]) == 0)
                sess_add_src(ss, ni.name);
        /* then the range's other replicas (a source that holds only part
         * of it answers NOT_FOUND, and the next is asked) */
        if (from && ring_token_count(from)) {
            uint32_t rep[RING_MAX_REPLICAS];
            size_t nr =
                ring_replicas(from, ss->range.end, rep, RING_MAX_REPLICAS);
            for (size_t k = 0; k < nr && k < RING_MAX_REPLICAS; k++)
                if (ring_node_get(from, &ni, rep[k]) == 0)
                    sess_add_src(ss, ni.name);
        }
    }
    ring_plan_free(mv);
    st->planned = true;
    node__stall_start(n, &st->stall, "join", "join");
    LOG(INFO, "stream.planned", "ranges=%zu epoch=%llu", st->ns,
        (unsigned long long)(from ? ring_epoch(from) : 0));
    stream_resume(n);
    return 0;
}

/* Every range is in: NORMAL, a new epoch, joining cleared. */
static void stream_finish(node *n)
{
    struct node_stream *st = n->stream;
    uint64_t epoch = 0;
    int rc = gossip_status_set(n->g, GOSSIP_STATUS_NORMAL, 0, &epoch);
    if (rc < 0) {
        LOG(ERROR, "boot.announce_fail", "error=\"%s\"", rk_strerror(rc));
        return;
    }
    n->st.ring_epoch = epoch;
    n->st.joining = 0;
    n->st.repair_due = n->cfg.repair_after_join; /* repair.c */
    n->raj_since_ms = node__mono_ms(n);
    node__state_save(n);
    n->boot = NODE_BOOT_DONE;
    st->purge_due = true; /* the positions saved: no longer needed */
    stream_save(n);
    uint64_t ms = node__mono_ms(n) - st->start_ms;
    LOG(INFO, "boot.joined",
        "tokens=%d epoch=%llu ranges=%zu keys=%llu bytes=%llu ms=%llu "
        "streamed=1",
        n->st.ntokens, (unsigned long long)epoch, st->ns,
        (unsigned long long)st->keys, (unsigned long long)st->bytes,
        (unsigned long long)ms);
    node__ring_rebuild(n);
}

static void stream_kick(node *n)
{
    struct node_stream *st = n->stream;
    if (!st || !st->planned || n->boot != NODE_BOOT_STREAM || n->stopping)
        return;
    uint64_t now = node__mono_ms(n);
    size_t done = 0;
    for (size_t i = 0; i < st->ns; i++) {
        struct stream_sess *ss = &st->s[i];
        if (ss->state == S_DONE) {
            done++;
            continue;
        }
        if (st->asking >= STREAM_PARALLEL)
            continue;
        if ((ss->state == S_IDLE ||
             (ss->state == S_WAIT && now >= ss->retry_at)) &&
            node__stream_budget_take(n)) {
            ss->state = S_ASKING;
            st->asking++;
            sess_ask(ss);
        }
    }
    if (done == st->ns && st->asking == 0)
        stream_finish(n);
}

/* ---- `ringkv abort` of a join ------------------------------------------ */

/* Once nothing of the aborted join is in flight, what it streamed in is
 * dropped on the pool: every range of the store (a joining node holds
 * nothing else: it started fresh), so that a later join starts from
 * nothing and nothing it pulled can come back after its tombstones were
 * purged elsewhere (gc_grace_seconds). */
struct drop_job {
    uv_work_t w;
    node *n;
    size_t dropped;
    int status;
};

static void drop_work(uv_work_t *w)
{
    struct drop_job *j = w->data;
    struct store_range *have = NULL;
    size_t nhave = 0;
    j->status = store_range_list(&have, &nhave, j->n->store);
    for (size_t i = 0; j->status == 0 && i < nhave; i++) {
        j->status = store_range_drop(j->n->store, have[i]);
        if (j->status == 0)
            j->dropped++;
    }
    free(have);
}

static void drop_after(uv_work_t *w, int status)
{
    struct drop_job *j = w->data;
    node *n = j->n;
    struct node_stream *st = n->stream;
    if (status < 0 && j->status == 0)
        j->status = status;
    if (st) {
        st->dropping = false;
        st->dropped = j->status == 0;
        st->drop_err = j->status;
    }
    if (j->status < 0)
        LOG(ERROR, "join.drop_fail",
            "ranges_dropped=%zu error=\"%s\" note=\"tried again next "
            "tick\"",
            j->dropped, rk_strerror(j->status));
    else
        LOG(INFO, "join.dropped",
            "ranges=%zu note=\"what the aborted join streamed in is gone\"",
            j->dropped);
    free(j);
    n->pending_closes--;
    node__stop_progress(n);
}

static void drop_start(node *n)
{
    struct node_stream *st = n->stream;
    if (st->dropping || st->dropped || st->asking || st->saving || !n->store)
        return;
    struct drop_job *j = calloc(1, sizeof(*j));
    if (!j)
        return;
    j->n = n;
    j->w.data = j;
    if (uv_queue_work(n->loop, &j->w, drop_work, drop_after) < 0) {
        free(j);
        return;
    }
    n->pending_closes++;
    st->dropping = true;
}

bool node__stream_busy(const node *n)
{
    const struct node_stream *st = n->stream;
    return st && st->aborted &&
           (st->asking || st->saving || st->dropping || !st->dropped);
}

int node__stream_abort(node *n, char *msg, size_t cap)
{
    struct node_stream *st = n->stream;
    if (n->boot != NODE_BOOT_STREAM || !st) {
        snprintf(msg, cap, "%s is not joining", n->cfg.node_name);
        return RK_EBADREQ;
    }
    uint64_t epoch = 0;
    int rc = node__join_withdraw(n, &epoch);
    if (rc < 0) {
        snprintf(msg, cap, "cannot withdraw the join of %s: %s",
                 n->cfg.node_name, rk_strerror(rc));
        return rc;
    }
    st->aborted = true;
    st->aborted_ms = node__mono_ms(n);
    st->purge_due = st->planned; /* its saved positions go */
    stream_save(n);
    size_t done = 0;
    for (size_t i = 0; i < st->ns; i++)
        done += st->s[i].state == S_DONE;
    LOG(WARN, "join.aborted",
        "epoch=%llu ranges_done=%zu ranges=%zu keys=%llu note=\"tokens "
        "withdrawn: waiting for `ringkv join`\"",
        (unsigned long long)epoch, done, st->ns, (unsigned long long)st->keys);
    snprintf(msg, cap,
             "%s aborted its join: its tokens are withdrawn (ring epoch "
             "%llu), so the ring is as it was before it joined. It drops "
             "the %llu keys it had streamed in (%zu of %zu ranges done) and "
             "waits, holding no tokens, for `ringkv join` (after a restart "
             "too)",
             n->cfg.node_name, (unsigned long long)epoch,
             (unsigned long long)st->keys, done, st->ns);
    return 0;
}

int node__stream_begin(node *n)
{
    if (n->stream && n->stream->aborted) {
        if (node__stream_busy(n))
            return -EBUSY;
        node__stream_free(n); /* a join aborted before: this one anew */
    }
    if (!n->stream) {
        n->stream = calloc(1, sizeof(*n->stream));
        if (!n->stream)
            return -ENOMEM;
    }
    n->boot = NODE_BOOT_STREAM;
    n->stream->start_ms = node__mono_ms(n);
    uint64_t delay = 5 * (uint64_t)n->cfg.gossip_interval_ms;
    n->stream->ready_at = n->stream->start_ms +
                          (delay > STREAM_DELAY_MS ? delay : STREAM_DELAY_MS);
    return 0;
}

void node__stream_tick(node *n)
{
    struct node_stream *st = n->stream;
    if (st && !n->stopping)
        stream_save(n); /* positions moved, or the purge after the join */
    if (st && st->aborted && !n->stopping) {
        drop_start(n);
        return;
    }
    if (n->boot != NODE_BOOT_STREAM || !st || n->stopping)
        return;
    uint64_t now = node__mono_ms(n);
    if (!st->planned) {
        /* the ring it streams against must be the cluster's */
        if (now < st->ready_at || n->ring_stale || n->settling ||
            !n->ring_pending)
            return;
        int rc = stream_plan(n);
        if (rc < 0) {
            LOG(ERROR, "stream.plan_fail", "error=\"%s\"", rk_strerror(rc));
            return;
        }
    }
    size_t done = 0;
    for (size_t i = 0; i < st->ns; i++)
        done += st->s[i].state == S_DONE;
    node__stall_check(n, &st->stall, done < st->ns);
    if (now - st->last_log_ms >= 10000 && st->ns) {
        st->last_log_ms = now;
        LOG(INFO, "stream.progress",
            "ranges_done=%zu ranges=%zu keys=%llu bytes=%llu", done, st->ns,
            (unsigned long long)st->keys, (unsigned long long)st->bytes);
    }
    stream_kick(n);
}

double node__stream_fraction(struct ring_range range,
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

void node__stream_bar(char bar[21], double fraction)
{
    int fill = (int)(fraction * 20 + 0.5);
    for (int k = 0; k < 20; k++)
        bar[k] = k < fill ? '#' : '.';
    bar[20] = '\0';
}

static double sess_fraction(const struct stream_sess *ss)
{
    return ss->state == S_DONE ? 1.0
                               : node__stream_fraction(ss->range, &ss->at);
}

/* The budget refills at the cap and holds at most a second of it (or one
 * chunk, if more), so over any T seconds at most about (T + 1) seconds'
 * worth plus one chunk per session is streamed. */
static void budget_refill(node *n)
{
    int64_t rate = (int64_t)n->cfg.stream_throughput_mb << 20; /* bytes/s */
    int64_t burst = rate > NODE_STREAM_CHUNK ? rate : NODE_STREAM_CHUNK;
    uint64_t now = node__mono_ms(n);
    if (n->stream_budget_ms == 0) {
        n->stream_budget = burst;
    } else if (now > n->stream_budget_ms) {
        n->stream_budget += rate * (int64_t)(now - n->stream_budget_ms) / 1000;
        if (n->stream_budget > burst)
            n->stream_budget = burst;
    }
    n->stream_budget_ms = now;
}

bool node__stream_budget_take(node *n)
{
    if (n->cfg.stream_throughput_mb <= 0)
        return true;
    budget_refill(n);
    if (n->stream_budget < 0)
        return false;
    n->stream_budget -= NODE_STREAM_CHUNK;
    return true;
}

void node__stream_budget_settle(node *n, uint64_t moved)
{
    if (n->cfg.stream_throughput_mb <= 0)
        return;
    budget_refill(n);
    n->stream_budget += (int64_t)NODE_STREAM_CHUNK - (int64_t)moved;
}

void node__human_bytes(char *out, size_t cap, uint64_t b)
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

char *node__stream_text(node *n, size_t *len)
{
    char *t = NULL;
    size_t tl = 0;
    FILE *f = open_memstream(&t, &tl);
    if (!f)
        return NULL;
    const struct node_stream *st = n->stream;
    char b1[32], b2[32];
    if (n->boot == NODE_BOOT_STREAM && st) {
        uint64_t ms = node__mono_ms(n) - st->start_ms;
        fprintf(f, "Mode: JOINING\n");
        if (!st->planned) {
            fprintf(f,
                    "Announced its tokens %.1f s ago; streaming starts once "
                    "the cluster has heard (ring delay).\n",
                    (double)ms / 1000);
        } else {
            size_t done = 0;
            double frac = 0;
            for (size_t i = 0; i < st->ns; i++) {
                done += st->s[i].state == S_DONE;
                frac += sess_fraction(&st->s[i]);
            }
            frac = st->ns ? frac / (double)st->ns : 1;
            node__human_bytes(b1, sizeof(b1), st->bytes);
            double secs = (double)ms / 1000;
            node__human_bytes(b2, sizeof(b2),
                              secs > 0 ? (uint64_t)((double)st->bytes / secs)
                                       : 0);
            fprintf(f,
                    "Receiving %zu ranges: %zu done, %.0f%% of the token "
                    "space; %llu keys, %s in %.1f s (%s/s)",
                    st->ns, done, frac * 100, (unsigned long long)st->keys, b1,
                    secs, b2);
            if (frac > 0.01 && frac < 1)
                fprintf(f, ", ETA %.0f s", secs * (1 - frac) / frac);
            if (n->cfg.stream_throughput_mb > 0)
                fprintf(f, " (capped at %d MiB/s)",
                        n->cfg.stream_throughput_mb);
            fprintf(f, "\n");
            node__stall_text(n, &st->stall, f);
            for (size_t i = 0; i < st->ns; i++) {
                const struct stream_sess *ss = &st->s[i];
                double fr = sess_fraction(ss);
                char bar[21];
                node__stream_bar(bar, fr);
                static const char *const sn[] = {
                    "queued", "receiving", "committing", "retrying", "done"};
                node__human_bytes(b1, sizeof(b1), ss->bytes);
                fprintf(f,
                        "  (%llu,%llu] from %s [%s] %3.0f%% %s: %llu keys, "
                        "%s\n",
                        (unsigned long long)ss->range.start,
                        (unsigned long long)ss->range.end,
                        ss->nsrc ? ss->src[ss->cur] : "-", bar, fr * 100,
                        sn[ss->state], (unsigned long long)ss->keys, b1);
            }
        }
    } else if (n->leave) {
        node__leave_text(n, f);
    } else {
        fprintf(f, "Mode: %s\n",
                n->parked && n->st.wait_join
                    ? "WAITING (its join was aborted: `ringkv join` makes it "
                      "join again)"
                : n->parked ? "WAITING (join_ring is false: `ringkv join` "
                              "makes it join)"
                : n->boot == NODE_BOOT_WAIT ? "STARTING (learning the cluster)"
                                            : "NORMAL");
        if (st && st->aborted)
            fprintf(f, "Join aborted %.1f s ago: tokens withdrawn; %s.\n",
                    (double)(node__mono_ms(n) - st->aborted_ms) / 1000,
                    st->dropped ? "what it had streamed in is dropped"
                    : st->drop_err
                        ? "dropping what it had streamed in failed; tried "
                          "again each gossip tick"
                        : "dropping what it had streamed in");
        else if (st && st->planned)
            fprintf(f, "Joined with %zu ranges streamed in: %llu keys.\n",
                    st->ns, (unsigned long long)st->keys);
        else
            fprintf(f, "Not receiving.\n");
    }
    node__cleanup_text(n, f);
    node__repair_text(n, f);
    node__human_bytes(b1, sizeof(b1), n->stats.stream_out_bytes);
    fprintf(f,
            "Sent to joining nodes (or pushed while leaving): %llu keys, %s; "
            "%d scan%s running.\n",
            (unsigned long long)n->stats.stream_out_keys, b1, n->stream_jobs,
            n->stream_jobs == 1 ? "" : "s");
    if (fclose(f) != 0) {
        free(t);
        return NULL;
    }
    *len = tl;
    return t;
}

void node__stream_free(node *n)
{
    struct node_stream *st = n->stream;
    if (!st)
        return;
    for (size_t i = 0; i < st->ns; i++)
        rpc_buf_free(&st->s[i].msg);
    free(st->s);
    free(st);
    n->stream = NULL;
}

/* ---- the donor side ---------------------------------------------------- */

struct donor_job {
    uv_work_t w;
    node *n;
    net_conn *c; /* a joining node's request, answered with the chunk... */
    uint64_t id;
    node_scan_cb cb; /* ...or, for a push (leave.c), this with the chunk */
    void *cb_arg;
    struct rpc_stream_chunk ch; /* what donor_work read */
    struct store_scan sc;
    size_t max_bytes, frame_left;
    struct rpc_buf items, out;
    uint32_t count;
    uint64_t kv_bytes;    /* the items' keys and values */
    uint64_t hlc;         /* the donor's HLC when asked (read on the loop) */
    const uint64_t *skip; /* fingerprints left out (sorted), borrowed */
    size_t nskip;
    int status;
};

#define DONOR_FULL 1 /* the chunk is full before this item */

uint64_t node__record_fingerprint(struct rk_slice key,
                                  const struct rpc_record *rec)
{
    return rk_token(key.p, key.len) ^ (rec->ts * 0x9E3779B97F4A7C15ull) ^
           ((uint64_t)rec->flags << 56) ^ rec->expiry;
}

static int donor_item(const struct store_item *it, void *arg)
{
    struct donor_job *j = arg;
    struct store_record sr;
    int rc = store_record_decode(&sr, it->rec.p, it->rec.len);
    if (rc < 0)
        return rc;
    struct rpc_record rec = {
        .ts = sr.ts,
        .flags = (sr.flags & STORE_REC_TOMBSTONE) ? RPC_REC_TOMBSTONE : 0,
        .expiry = (sr.flags & STORE_REC_EXPIRES) ? sr.expiry_ms : 0,
        .value =
            (sr.flags & STORE_REC_TOMBSTONE) ? RK_SLICE(NULL, 0) : sr.value};
    if (j->nskip) {
        uint64_t fp = node__record_fingerprint(it->key, &rec);
        if (bsearch(&fp, j->skip, j->nskip, sizeof(fp), rk_u64_cmp))
            return 0; /* the other side has just this */
    }
    size_t need = it->key.len + sr.value.len + 64;
    if (j->count > 0 && (j->count >= RPC_STREAM_ITEMS_MAX ||
                         j->items.len + need > j->frame_left))
        return DONOR_FULL; /* the cursor stays before this item */
    rc = rpc_stream_item_add(&j->items, it->key, &rec);
    if (rc < 0)
        return rc;
    j->count++;
    j->kv_bytes += it->key.len + rec.value.len;
    return 0;
}

static void donor_work(uv_work_t *w)
{
    struct donor_job *j = w->data;
    int rc = store_scan_next(j->n->store, &j->sc, RPC_STREAM_ITEMS_MAX,
                             j->max_bytes, donor_item, j);
    if (rc == DONOR_FULL)
        rc = 0;
    j->status = rc;
    struct rpc_stream_chunk *ch = &j->ch;
    *ch = (struct rpc_stream_chunk){.status = rc, .hlc = j->hlc};
    if (rc == 0) {
        ch->next.start = j->sc.arc.start;
        ch->next.end = j->sc.arc.end;
        ch->next.pos = j->sc.pos;
        ch->next.started = j->sc.started;
        ch->next.done = j->sc.done;
        ch->next.last = RK_SLICE(j->sc.last, j->sc.last_len);
        ch->count = j->count;
        ch->items = RK_SLICE(j->items.data, j->items.len);
    }
    if ((j->cb ? rpc_stream_push_encode(&j->out, ch)
               : rpc_stream_chunk_encode(&j->out, ch)) < 0)
        j->out.len = 0;
}

static void donor_after(uv_work_t *w, int status)
{
    struct donor_job *j = w->data;
    node *n = j->n;
    (void)status;
    n->stream_jobs--;
    if (j->cb) {
        int rc = j->status;
        if (rc == 0 && !j->out.len)
            rc = -ENOMEM;
        j->cb(j->cb_arg, rc, rc == 0 ? &j->ch : NULL, j->kv_bytes,
              RK_SLICE(j->out.data, rc == 0 ? j->out.len : 0));
    } else {
        if (j->out.len) {
            if (j->status == 0) {
                n->stats.stream_out_keys += j->count;
                n->stats.stream_out_bytes += j->kv_bytes;
            }
            net_conn_reply(j->c, j->id, RK_SLICE(j->out.data, j->out.len));
        }
        net_conn_unref(j->c);
    }
    rpc_buf_free(&j->items);
    rpc_buf_free(&j->out);
    free(j);
    n->pending_closes--;
    node__stop_progress(n);
}

static void donor_refuse(node *n, net_conn *c, uint64_t id, int status)
{
    struct rpc_stream_chunk ch = {.status = status, .hlc = n->hlc.last};
    struct rpc_buf *b = &n->reply_buf;
    rpc_buf_reset(b);
    if (rpc_stream_chunk_encode(b, &ch) == 0)
        net_conn_reply(c, id, RK_SLICE(b->data, b->len));
}

/* Queue the scan of job j (its answer set: c/id or cb) from at; frees j
 * on failure. */
static int donor_start(node *n,
                       struct donor_job *j,
                       const struct rpc_stream_pos *at,
                       uint32_t max_bytes)
{
    j->w.data = j;
    j->n = n;
    j->hlc = n->hlc.last;
    store_scan_init(&j->sc, (struct store_range){at->start, at->end});
    j->sc.pos = at->pos;
    j->sc.started = at->started;
    j->sc.last_len = at->last.len;
    if (at->last.len)
        memcpy(j->sc.last, at->last.p, at->last.len);
    j->max_bytes = max_bytes && max_bytes < STREAM_DONOR_MAX ? max_bytes
                                                             : STREAM_DONOR_MAX;
    /* room in a frame for the items, besides the chunk's other fields */
    j->frame_left = NET_MAX_FRAME_DEFAULT - 4096;
    int rc = uv_queue_work(n->loop, &j->w, donor_work, donor_after);
    if (rc < 0) {
        free(j);
        return rc;
    }
    n->stream_jobs++;
    n->pending_closes++;
    return 0;
}

void node__stream_serve(node *n, net_conn *c, uint64_t id, struct rk_slice f)
{
    struct rpc_stream_req rq;
    int rc = rpc_stream_req_decode(&rq, f);
    if (rc == 0 &&
        (rq.at.done || rq.at.last.len > sizeof(((struct store_scan *)0)->last)))
        rc = RK_EBADREQ;
    if (rc < 0) {
        n->stats.internode_bad++;
        donor_refuse(n, c, id, rc);
        return;
    }
    if (!n->store || n->stopping) {
        donor_refuse(n, c, id, RK_ECLOSED);
        return;
    }
    if (n->stream_jobs >= STREAM_DONOR_JOBS) {
        donor_refuse(n, c, id, RK_EOVERLOADED);
        return;
    }
    struct donor_job *j = calloc(1, sizeof(*j));
    if (!j) {
        donor_refuse(n, c, id, -ENOMEM);
        return;
    }
    j->c = c;
    j->id = id;
    net_conn_ref(c);
    rc = donor_start(n, j, &rq.at, rq.max_bytes);
    if (rc < 0) {
        net_conn_unref(c);
        donor_refuse(n, c, id, rc);
    }
}

int node__stream_scan(node *n,
                      const struct rpc_stream_pos *at,
                      uint32_t max_bytes,
                      const uint64_t *skip,
                      size_t nskip,
                      node_scan_cb cb,
                      void *arg)
{
    if (!n->store || n->stopping)
        return RK_ECLOSED;
    if (at->done || at->last.len > sizeof(((struct store_scan *)0)->last))
        return RK_EBADREQ;
    if (n->stream_jobs >= STREAM_DONOR_JOBS)
        return RK_EOVERLOADED;
    struct donor_job *j = calloc(1, sizeof(*j));
    if (!j)
        return -ENOMEM;
    j->cb = cb;
    j->cb_arg = arg;
    j->skip = skip;
    j->nskip = nskip;
    return donor_start(n, j, at, max_bytes);
}

/* ---- committing a chunk ------------------------------------------------ */

struct commit_items {
    node_items_cb cb;
    void *arg;
    uint32_t pending; /* records not yet committed, +1 while adding */
    int err;
    uint32_t keys;
    uint64_t bytes;
};

static void on_item_committed(int status, void *arg)
{
    struct commit_items *g = arg;
    if (status < 0 && !g->err)
        g->err = status;
    if (--g->pending)
        return;
    g->cb(g->arg, g->err, g->keys, g->bytes);
    free(g);
}

int node__commit_items(node *n,
                       struct ring_range rg,
                       struct rk_slice items,
                       node_items_cb cb,
                       void *arg)
{
    if (!n->store || n->stopping)
        return RK_ECLOSED;
    struct rk_slice it = items, key;
    struct rpc_record rec;
    while (rpc_stream_item_next(&it, &key, &rec) == 1)
        if (!ring_range_contains(rg, rk_token(key.p, key.len)))
            return RK_EPROTO;
    struct commit_items *g = calloc(1, sizeof(*g));
    if (!g)
        return -ENOMEM;
    g->cb = cb;
    g->arg = arg;
    g->pending = 1; /* held while adding */
    for (it = items; rpc_stream_item_next(&it, &key, &rec) == 1;) {
        g->pending++;
        int rc = node__clock_seen(n, rec.ts);
        if (rc == 0)
            rc = node__local_write(n, key, &rec, on_item_committed, g);
        if (rc < 0) {
            g->pending--;
            g->err = rc;
            break;
        }
        g->keys++;
        g->bytes += key.len + rec.value.len;
    }
    on_item_committed(0, g); /* the hold */
    return 0;
}
