/*
 * join.c - bootstrap streaming: a joining node pulls the data of the
 * ranges it gains from the replicas that hold them, before it announces
 * NORMAL (shared/DESIGN.md, "Streaming"; docs/streaming.md).
 *
 * Once its tokens are chosen (node/), the node persists them with
 * joining=1 and announces TOKENS and STATUS BOOT under a new epoch. Every
 * node then builds, besides its ring, the ring with the booting node
 * placed (the pending ring), and coordinators send each write to the
 * pending replica too, requiring its answer on top of the level's: a
 * write acknowledged during the join is on the joining node as well as on
 * a quorum of the old replicas. After STREAM_DELAY_MS, for gossip to
 * spread the announcement (or five gossip intervals, if longer: Cassandra
 * waits its RING_DELAY for the same reason), the node computes the
 * movement plan and opens a session per piece it gains (join_plan.c: the
 * ranges gained, cut at the ring's tokens so that every replica of a piece
 * holds all of it, each given a donor among its live replicas so that the
 * bytes spread over them). A session asks one source at a time (its donor
 * first, then the piece's other replicas) for chunks of the range in token
 * order (RPC_MSG_STREAM, answered by donor.c), commits each chunk's
 * records straight into the range's env in one transaction
 * (stream__items_commit; last-write-wins, so a record that a dual write
 * brought already is not overwritten by an older one; synced with the
 * next save of the positions, below), and only then asks for the next,
 * from where the chunk ended. A source that fails
 * or does not answer is replaced by the next one, from the same point.
 * Sessions of different donors run at once: stream_max_ranges in all, at
 * most stream_donor_max_ranges per donor, within the node's throughput
 * budget. The bytes each donor sent are counted (netstats, boot.joined).
 * When every session is done the node announces NORMAL (a new epoch) and
 * host->join_done clears joining.
 *
 * Several nodes may join at once. The pending ring the node plans against
 * is its own (host->ring_pending: the ring with it alone placed), and
 * before it plans it asks host->join_queued, every tick from its
 * announcement on, whether another movement that changes some of the same
 * ranges goes first; it then waits (netstats: Queued:) and plans once
 * that one is done, with no ring delay of its own (the coordinators have
 * sent it the writes of its ranges since it announced).
 *
 * A node replacing a dead one (replace: X) joins the same way with X's
 * tokens: the pending ring has it in X's place, so the plan gives it
 * exactly X's ranges, and its sources are their other replicas (never X).
 * At the end it announces X REMOVED, then itself NORMAL.
 *
 * A restart during the join (joining=1 in node.state) announces BOOT with
 * the same tokens again and resumes each range from the position saved
 * after its last committed chunk ("progress kept across restarts",
 * below), or from its start when the node was down past the hint window.
 *
 * `ringkv rebuild --from DC` runs the same sessions with another plan
 * ("a rebuild", below): every range the node replicates in its ring, from
 * its replicas in DC, and nothing announced at the end.
 */
#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "streaming/streaming_internal.h"

#define STREAM_DELAY_MS                                                  \
    2000                        /* after announcing BOOT with tokens (at \
                                   least 5 gossip intervals) */
#define STREAM_TIMEOUT_MS 30000 /* per chunk request */
#define STREAM_RETRY_MS   1000  /* after every source failed once */
#define STREAM_BUSY_MS    100   /* a donor answered OVERLOADED */
#define STREAM_MAX_SRCS   RING_MAX_REPLICAS

enum sess_state { S_IDLE = 0, S_ASKING, S_COMMITTING, S_WAIT, S_DONE };

struct stream_sess {
    stream *s;
    struct ring_range range;
    char src[STREAM_MAX_SRCS][STREAM_NAME_MAX + 1];
    int dn[STREAM_MAX_SRCS]; /* each source's entry in join->donor */
    int nsrc, cur, fails;
    int asked; /* the donor entry whose slot it holds asking, or -1 */
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

/* A node the join may pull from: what it was given and what it sent. */
struct join_donor {
    char name[STREAM_NAME_MAX + 1];
    int inflight;         /* sessions asking it or committing its chunk */
    size_t planned;       /* sessions it was chosen for */
    uint64_t weight;      /* their token space (join_plan.c's weight) */
    uint64_t keys, bytes; /* committed from it */
};

struct stream_join {
    /* `ringkv rebuild --from DC` ("a rebuild", below) rather than a join:
     * the same sessions, planned against the ring (every range the node
     * replicates, from the replicas in that data centre), and no
     * announcement at the end. fresh: asked by the command, not resumed
     * after a restart (positions left by an earlier one are not taken) */
    bool rebuild, fresh;
    char from_dc[STREAM_NAME_MAX + 1];
    struct stream_sess *sess;
    size_t ns;
    size_t asking; /* sessions in S_ASKING or S_COMMITTING */
    struct join_donor *donor;
    size_t ndonor;
    bool kicking, rekick; /* stream_kick running; run it again */
    bool planned;
    /* waiting for another movement before it plans (host->join_queued):
     * who, why, and since when (mono ms, 0: not waiting) */
    char queued_for[STREAM_NAME_MAX + 1];
    char queued_why[256];
    uint64_t queued_ms;
    uint64_t first_token; /* this node's, when it planned: names its saves */
    bool finished;        /* every range in: NORMAL announced */
    bool target_up;       /* the node replaced is UP again: finish waits */
    uint64_t ready_at;    /* mono ms: plan from then */
    uint64_t start_ms, end_ms;
    uint64_t last_log_ms;
    uint64_t keys, bytes; /* committed so far, all sessions */
    bool saving;          /* a save job on the pool */
    /* every range in: its chunks made durable (synced) before the end is
     * announced, by a job under way (final_sync) */
    bool synced, final_sync;
    bool purge_due; /* joined: the saved positions are to go */
    bool purged;    /* and their deletion queued: nothing more saved */
    struct stream_stall stall; /* a chunk committed (stall.c) */
    /* `ringkv abort`: the join withdrawn; once nothing is in flight what
     * it streamed in is dropped (drop_job) */
    bool aborted, dropping, dropped;
    uint64_t aborted_ms;
    int drop_err;
};

static void sess_ask(struct stream_sess *ss);
static void stream_kick(stream *s);

/* A join or a rebuild pulling ranges (begun, neither done nor aborted). */
static bool pulling(const stream *s)
{
    return s->join && !s->join->finished && !s->join->aborted;
}

/* ---- the joining side ------------------------------------------------- */

/* The session's slot of its donor and of the join's limit, given back. */
static void sess_release(struct stream_sess *ss)
{
    struct stream_join *st = ss->s->join;
    st->asking--;
    if (ss->asked >= 0)
        st->donor[ss->asked].inflight--;
    ss->asked = -1;
}

/* A session's request failed: the next source, from the same point, at
 * once; a pause of STREAM_RETRY_MS once every source has failed since the
 * last chunk committed, or when none is live (`wait`). Logged at the first
 * failure and then once per round of the sources. */
static void
sess_fail(struct stream_sess *ss, const char *why, int err, bool wait)
{
    stream *s = ss->s;
    struct stream_join *st = s->join;
    if (ss->state == S_ASKING || ss->state == S_COMMITTING) {
        sess_release(ss);
        stream_budget_settle(s, 0);
    }
    ss->fails++;
    char from[STREAM_NAME_MAX + 8] = "";
    if (ss->nsrc)
        snprintf(from, sizeof(from), "from %s", ss->src[ss->cur]);
    stream_stall_fail(&st->stall, why, from, &ss->range, err);
    int round = ss->nsrc > 0 ? ss->nsrc : 1;
    if (ss->fails == 1 || ss->fails % round == 0)
        SLOG(s, WARN, "stream.retry",
             "range=(%llu,%llu] source=%s why=\"%s\" error=\"%s\" "
             "failures=%d",
             (unsigned long long)ss->range.start,
             (unsigned long long)ss->range.end,
             ss->nsrc ? ss->src[ss->cur] : "-", why, rk_strerror(err),
             ss->fails);
    if (ss->nsrc)
        ss->cur = (ss->cur + 1) % ss->nsrc;
    ss->state = S_WAIT;
    ss->retry_at =
        stream__now(s) + (wait || ss->fails % round == 0 ? STREAM_RETRY_MS : 0);
    stream_kick(s);
}

static void sess_chunk_committed(struct stream_sess *ss)
{
    stream *s = ss->s;
    struct stream_join *st = s->join;
    if (ss->commit_err) {
        sess_fail(ss, "commit", ss->commit_err, false);
        return;
    }
    ss->keys += ss->chunk_keys;
    ss->bytes += ss->chunk_bytes;
    if (ss->asked >= 0) {
        st->donor[ss->asked].keys += ss->chunk_keys;
        st->donor[ss->asked].bytes += ss->chunk_bytes;
    }
    st->keys += ss->chunk_keys;
    st->bytes += ss->chunk_bytes;
    stream_budget_settle(s, ss->chunk_bytes);
    s->stats.in_keys += ss->chunk_keys;
    s->stats.in_bytes += ss->chunk_bytes;
    ss->fails = 0;
    stream_stall_progress(s, &st->stall);
    stream_pos_copy(&ss->at, ss->at_last, &ss->next);
    ss->unsaved = true;
    if (ss->at.done) {
        ss->state = S_DONE;
        sess_release(ss);
        SLOG(s, INFO, "stream.range_done",
             "range=(%llu,%llu] source=%s keys=%llu bytes=%llu",
             (unsigned long long)ss->range.start,
             (unsigned long long)ss->range.end, ss->src[ss->cur],
             (unsigned long long)ss->keys, (unsigned long long)ss->bytes);
        stream_kick(s);
        return;
    }
    /* the next chunk from the same donor, its slot kept, while it is live */
    struct stream_peer p;
    if (!st->aborted && ss->asked >= 0 && ss->dn[ss->cur] == ss->asked &&
        s->h.peer_by_name(s->h.arg, ss->src[ss->cur], &p) == 0 && p.up &&
        stream_budget_take(s)) {
        ss->state = S_ASKING;
        sess_ask(ss);
        return;
    }
    ss->state = S_IDLE; /* the cap or a donor gone (stream_kick starts it
                           in time), or aborted */
    sess_release(ss);
    stream_kick(s);
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
    stream *s = ss->s;
    if (status < 0) {
        sess_fail(ss, "request", status, false);
        return;
    }
    struct rpc_stream_chunk ch;
    int rc = rpc_stream_chunk_decode(&ch, resp);
    if (rc < 0) {
        s->h.bad_frame(s->h.arg);
        sess_fail(ss, "malformed chunk", rc, false);
        return;
    }
    if (ch.status == RK_EOVERLOADED) {
        /* the donor is busy with scans (another stream, a repair): the
         * same donor a little later, its share kept */
        sess_release(ss);
        stream_budget_settle(s, 0);
        ss->state = S_WAIT;
        ss->retry_at = stream__now(s) + STREAM_BUSY_MS;
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
    if (stream__stopping(s)) {
        sess_fail(ss, "stopping", RK_ECLOSED, false);
        return;
    }
    if (s->join->aborted) { /* not committed: it is all dropped */
        sess_release(ss);
        stream_budget_settle(s, 0);
        ss->state = S_IDLE;
        return;
    }
    stream_pos_copy(&ss->next, ss->next_last, &ch.next);
    ss->state = S_COMMITTING;
    /* unsynced: the next save of the positions syncs first (stream_save) */
    rc = stream__items_commit(s, ss->range, ch.items, false, on_chunk_committed,
                              ss);
    if (rc < 0)
        sess_fail(ss, rc == RK_EPROTO ? "key outside the range" : "commit", rc,
                  false);
}

/* The first live source from the current one on (ss->cur moved to it), or
 * false when none is. */
static bool sess_source(struct stream_sess *ss, struct stream_peer *p)
{
    stream *s = ss->s;
    for (int k = 0; k < ss->nsrc; k++) {
        if (s->h.peer_by_name(s->h.arg, ss->src[ss->cur], p) == 0 && p->up &&
            !p->self && p->iaddr[0])
            return true;
        ss->cur = (ss->cur + 1) % ss->nsrc;
    }
    return false;
}

/* Ask the current source for the next chunk (the session holds a slot of
 * its donor). */
static void sess_ask(struct stream_sess *ss)
{
    stream *s = ss->s;
    struct stream_peer p;
    if (!sess_source(ss, &p)) {
        sess_fail(ss, "no live source", RK_EUNAVAILABLE, true);
        return;
    }
    struct stream_join *st = s->join;
    if (ss->asked != ss->dn[ss->cur]) { /* the slot moves with the source */
        if (ss->asked >= 0)
            st->donor[ss->asked].inflight--;
        ss->asked = ss->dn[ss->cur];
        st->donor[ss->asked].inflight++;
    }
    const ring *r = stream__ring(s);
    struct rpc_stream_req rq = {.epoch = r ? ring_epoch(r) : 0,
                                .at = ss->at,
                                .max_bytes = STREAM_CHUNK};
    rpc_buf_reset(&ss->msg);
    int rc = rpc_stream_req_encode(&ss->msg, &rq);
    if (rc == 0)
        rc = s->h.rpc(s->h.arg, p.iaddr, RK_SLICE(ss->msg.data, ss->msg.len),
                      STREAM_TIMEOUT_MS, on_chunk, ss);
    if (rc < 0)
        sess_fail(ss, "send", rc, false);
}

/* ---- progress kept across restarts ------------------------------------ */

/* Each session's position after its last committed chunk is kept in a
 * system value of its own (a STREAM_CHUNK message with no items: its
 * decoder is the wire's, fuzzed), named after the join (this node's first
 * token) and the range, saved on the pool at most once a gossip tick with
 * the wall time of the save, all in one synced transaction. A chunk is
 * committed into its env unsynced (stream__items_commit), and the save job
 * first syncs every env written (store_sync_envs), so a saved position
 * never lies past a chunk a machine crash could lose: one sync per save
 * for all the chunks of the tick, where a sync per chunk (1 MiB) kept the
 * pool's threads waiting on the disk. Once every range is in, one more
 * such sync runs before the end is announced (stream_sync_final). A node
 * restarted while joining resumes each range from there (done ones are
 * skipped), unless it was down longer than max_hint_window_ms or hinted handoff
 * is off: what it missed meanwhile for the ranges it had streamed comes from
 * hints, as for any restarted replica, and past that window there are none, so
 * it streams every range again from its start. The values go once the join is
 * done. */

/* The token the names are made from: the join's own first token, taken
 * when it planned, and the node's otherwise (a node that joined). The
 * node's is 0 once an aborted join has withdrawn its tokens; the purge of
 * the abort then deleted names that did not exist and kept the real ones,
 * and a later join with the same tokens resumed ranges whose data the
 * abort had dropped (regression: aborted_join_resumes_dropped_ranges). */
static uint64_t save_token(stream *s)
{
    if (s->join && s->join->planned)
        return s->join->first_token;
    struct stream_state st;
    stream__state(s, &st);
    return st.first_token;
}

static void save_name(stream *s, struct ring_range r, char *out, size_t cap)
{
    if (s->join && s->join->rebuild) {
        snprintf(out, cap, "rebuild.at.%016llx_%016llx",
                 (unsigned long long)r.start, (unsigned long long)r.end);
        return;
    }
    snprintf(out, cap, "stream.at.%016llx.%016llx_%016llx",
             (unsigned long long)save_token(s), (unsigned long long)r.start,
             (unsigned long long)r.end);
}

static void save_time_name(stream *s, char *out, size_t cap)
{
    if (s->join && s->join->rebuild) {
        snprintf(out, cap, "rebuild.saved_ms");
        return;
    }
    snprintf(out, cap, "stream.saved_ms.%016llx",
             (unsigned long long)save_token(s));
}

static void save_after(stream *s, int status)
{
    struct stream_join *st = s->join;
    if (!st)
        return;
    st->saving = false;
    if (st->final_sync) {
        st->final_sync = false;
        st->synced = status == 0;
        if (st->synced)     /* else the next tick's kick tries again */
            stream_kick(s); /* every session done: the end */
    }
}

/* Every range is in: a job makes every chunk durable (its sync only,
 * nothing saved), unless a save is running (the next kick asks again). */
static void stream_sync_final(stream *s)
{
    struct stream_join *st = s->join;
    if (st->saving || !stream__store(s))
        return;
    struct stream_pos_job *j = stream__pos_job_new(s, 0, "join", save_after);
    if (!j)
        return;
    stream__pos_job_sync_first(j);
    st->saving = st->final_sync = true;
    if (stream__pos_job_run(j) < 0)
        st->saving = st->final_sync = false;
}

/* Start a job saving the moved positions (or, once joined, deleting them
 * all), if there is something to do and no job is running. */
static void stream_save(stream *s)
{
    struct stream_join *st = s->join;
    if (!st || !st->planned || st->saving || st->purged || !stream__store(s))
        return;
    size_t k = 0;
    for (size_t i = 0; i < st->ns; i++)
        k += st->purge_due || st->sess[i].unsaved;
    if (k == 0)
        return;
    struct stream_pos_job *j =
        stream__pos_job_new(s, k + 1, "join", save_after);
    if (!j)
        return;
    if (!st->purge_due) /* the chunks before each position made durable */
        stream__pos_job_sync_first(j);
    char name[80];
    for (size_t i = 0; i < st->ns; i++) {
        struct stream_sess *ss = &st->sess[i];
        if (!st->purge_due && !ss->unsaved)
            continue;
        save_name(s, ss->range, name, sizeof(name));
        if (stream__pos_job_add(j, name, st->purge_due ? NULL : &ss->at) < 0)
            continue; /* kept unsaved: tried again next time */
        ss->unsaved = false;
    }
    save_time_name(s, name, sizeof(name));
    if (stream__pos_job_u64(j, name, s->h.wall_ms(s->h.arg), st->purge_due) <
        0) {
        stream__pos_job_free(j);
        return;
    }
    /* Once the deletion is queued nothing is saved again: a session whose
     * position moved since its last save would otherwise write it back
     * after the deletion (regression: stream_progress_left_after_join) */
    st->purged = st->purge_due;
    st->purge_due = false;
    if (stream__pos_job_run(j) == 0)
        st->saving = true;
}

void stream_join_leftover(stream *s)
{
    char name[80];
    uint64_t saved = 0;
    save_time_name(s, name, sizeof(name));
    if (!stream__store(s) ||
        store_sys_get_u64(&saved, stream__store(s), name) < 0)
        return;
    /* the join finished (joining=0) but its positions were not deleted */
    SLOG(s, WARN, "stream.leftover_progress",
         "saved_s_ago=%llu note=\"the positions of a finished join were "
         "still saved: the time of the last save is deleted now\"",
         (unsigned long long)((s->h.wall_ms(s->h.arg) - saved) / 1000));
    (void)store_sys_del(stream__store(s), name);
}

/* Sessions resumed from the saved positions of this join, if recent
 * enough; logs what it found. */
static void stream_resume(stream *s)
{
    struct stream_join *st = s->join;
    char name[80];
    uint64_t saved = 0, now = s->h.wall_ms(s->h.arg);
    save_time_name(s, name, sizeof(name));
    if (!stream__store(s) ||
        store_sys_get_u64(&saved, stream__store(s), name) < 0)
        return; /* a join from its start */
    if (!s->cfg.hinted_handoff ||
        now - saved > (uint64_t)s->cfg.max_hint_window_ms) {
        SLOG(s, WARN, "stream.resume_skipped",
             "saved_s_ago=%llu note=\"down longer than max_hint_window_ms "
             "(or hinted_handoff off): no hints for what it missed, every "
             "range is streamed again from its start\"",
             (unsigned long long)((now - saved) / 1000));
        return;
    }
    size_t whole = 0, part = 0;
    for (size_t i = 0; i < st->ns; i++) {
        struct stream_sess *ss = &st->sess[i];
        save_name(s, ss->range, name, sizeof(name));
        if (stream__pos_load(s, name, ss->range, &ss->at, ss->at_last) < 0)
            continue;
        if (ss->at.done) {
            ss->state = S_DONE;
            whole++;
        } else {
            part += ss->at.started;
        }
    }
    SLOG(s, INFO, "stream.resumed",
         "ranges_done=%zu ranges_partly=%zu ranges=%zu saved_s_ago=%llu", whole,
         part, st->ns, (unsigned long long)((now - saved) / 1000));
}

/* The donor entry named `name`, added if new: its index, or -1 (no room:
 * the table holds every member of the ring). */
static int donor_of(struct stream_join *st, const char *name, size_t cap)
{
    for (size_t i = 0; i < st->ndonor; i++)
        if (strcmp(st->donor[i].name, name) == 0)
            return (int)i;
    if (st->ndonor == cap)
        return -1;
    snprintf(st->donor[st->ndonor].name, sizeof(st->donor[0].name), "%s", name);
    return (int)st->ndonor++;
}

/* Session ss for piece p (donor chosen): its sources, the chosen donor
 * first, then the piece's other candidates in their order. */
static void sess_plan(struct stream_sess *ss,
                      stream *s,
                      const struct stream_plan_range *p,
                      const ring *from,
                      size_t dcap)
{
    struct stream_join *st = s->join;
    ss->s = s;
    ss->range = p->range;
    ss->asked = -1;
    ss->at.start = p->range.start;
    ss->at.end = p->range.end;
    ss->at.last = RK_SLICE(ss->at_last, 0);
    for (uint32_t k = 0; k < p->ncand && ss->nsrc < STREAM_MAX_SRCS; k++) {
        uint32_t c = p->cand[(p->donor + k) % p->ncand];
        struct ring_node_info ni;
        int d;
        if (ring_node_get(from, &ni, c) < 0 ||
            (d = donor_of(st, ni.name, dcap)) < 0)
            continue;
        if (k == 0) {
            st->donor[d].planned++;
            st->donor[d].weight += p->weight;
        }
        snprintf(ss->src[ss->nsrc], sizeof(ss->src[0]), "%s", ni.name);
        ss->dn[ss->nsrc++] = d;
    }
}

/* The donors' share as text: "n1:123,n2:456" of what each sent (or, with
 * planned, of the token space each was given), and how far the largest
 * is above the mean of those that have some. */
static void donors_text(const struct stream_join *st,
                        bool planned,
                        char *out,
                        size_t cap,
                        double *largest_to_mean)
{
    size_t k = 0, n = 0;
    double sum = 0, top = 0;
    out[0] = '\0';
    for (size_t i = 0; i < st->ndonor; i++) {
        const struct join_donor *d = &st->donor[i];
        uint64_t v = planned ? d->planned : d->bytes;
        double w = planned ? (double)d->weight : (double)d->bytes;
        if (v == 0)
            continue;
        n++;
        sum += w;
        top = w > top ? w : top;
        int m = snprintf(out + k, cap - k, "%s%s:%llu", k ? "," : "", d->name,
                         (unsigned long long)v);
        if (m < 0 || (size_t)m >= cap - k) {
            out[k] = '\0';
            break;
        }
        k += (size_t)m;
    }
    *largest_to_mean = n && sum > 0 ? top / (sum / (double)n) : 0;
}

/* The movement plan from the ring to the pending ring: a session for every
 * piece this node gains, each with its donor chosen among the live
 * replicas (join_plan.c). */
static int stream_plan(stream *s)
{
    struct stream_join *st = s->join;
    const ring *from = stream__ring(s), *to = stream__ring_pending(s);
    if (!from || (!to && !st->rebuild))
        return RK_EINTERNAL;
    struct stream_state ns;
    stream__state(s, &ns);
    struct stream_plan_range *pr = NULL;
    size_t npr = 0;
    int rc = st->rebuild ? stream_plan_rebuild(&pr, &npr, from,
                                               s->cfg.node_name, st->from_dc)
                         : stream_plan_join(&pr, &npr, from, to,
                                            s->cfg.node_name, ns.replacing);
    if (rc < 0)
        return rc;
    size_t nm = ring_node_count(from);
    bool *live = calloc(nm ? nm : 1, sizeof(*live));
    uint64_t *load = calloc(nm ? nm : 1, sizeof(*load));
    st->sess = calloc(npr ? npr : 1, sizeof(*st->sess));
    st->donor = calloc(nm ? nm : 1, sizeof(*st->donor));
    if (!live || !load || !st->sess || !st->donor) {
        rc = -ENOMEM;
        goto free_all;
    }
    for (uint32_t m = 0; m < nm; m++) {
        struct ring_node_info ni;
        struct stream_peer p;
        live[m] = ring_node_get(from, &ni, m) == 0 &&
                  s->h.peer_by_name(s->h.arg, ni.name, &p) == 0 && p.up &&
                  !p.self && p.iaddr[0];
    }
    rc = stream_plan_donors(pr, npr, live, load, nm);
    if (rc < 0)
        goto free_all;
    for (size_t i = 0; i < npr; i++)
        sess_plan(&st->sess[st->ns++], s, &pr[i], from, nm);
    st->first_token = ns.first_token;
    st->planned = true;
    stream_stall_start(s, &st->stall, st->rebuild ? "rebuild" : "join",
                       st->rebuild ? "rebuild" : "join");
    char plan[1024];
    double ratio = 0;
    donors_text(st, true, plan, sizeof(plan), &ratio);
    if (st->rebuild)
        SLOG(s, INFO, "rebuild.planned",
             "from=%s ranges=%zu epoch=%llu donors=%zu ranges_by_donor=%s "
             "largest_share_to_mean=%.2f",
             st->from_dc, st->ns, (unsigned long long)ring_epoch(from),
             st->ndonor, plan[0] ? plan : "-", ratio);
    else
        SLOG(s, INFO, "stream.planned",
             "ranges=%zu epoch=%llu replacing=%s donors=%zu "
             "ranges_by_donor=%s largest_share_to_mean=%.2f",
             st->ns, (unsigned long long)ring_epoch(from),
             ns.replacing[0] ? ns.replacing : "-", st->ndonor,
             plan[0] ? plan : "-", ratio);
    if (st->fresh) { /* every position saved anew: none left of before */
        for (size_t i = 0; i < st->ns; i++)
            st->sess[i].unsaved = true;
        stream_save(s);
    } else
        stream_resume(s);
free_all:
    free(pr);
    free(live);
    free(load);
    if (rc < 0) {
        free(st->sess);
        free(st->donor);
        st->sess = NULL;
        st->donor = NULL;
        st->ns = st->ndonor = 0;
    }
    return rc;
}

/* Every range is in: the node replaced (if any) REMOVED, then NORMAL, a
 * new epoch, joining cleared. */
static void stream_finish(stream *s)
{
    struct stream_join *st = s->join;
    if (!st->synced) { /* chunks are committed unsynced (on_chunk) */
        stream_sync_final(s);
        return;
    }
    if (st->rebuild) {
        st->finished = true;
        st->end_ms = stream__now(s);
        st->purge_due = true; /* the positions saved: no longer needed */
        stream_save(s);
        stream__rebuild_done(s);
        return;
    }
    struct stream_state rs;
    stream__state(s, &rs);
    uint64_t epoch = 0;
    int rc = 0;
    if (rs.replacing[0]) {
        /* the dead node came back: removing it would drop a live member */
        struct stream_peer p;
        bool up = s->h.peer_by_name(s->h.arg, rs.replacing, &p) == 0 && p.up;
        if (up && !st->target_up)
            SLOG(s, WARN, "replace.target_up",
                 "replace=%s note=\"every range is in, but the node "
                 "replaced is UP again: waiting for it to stop (or `ringkv "
                 "abort`)\"",
                 rs.replacing);
        else if (!up && st->target_up)
            SLOG(s, INFO, "replace.target_down",
                 "replace=%s note=\"the node replaced is down: finishing\"",
                 rs.replacing);
        st->target_up = up;
        if (up)
            return;
        rc = s->h.announce(s->h.arg, rs.replacing, STREAM_ANNOUNCE_REMOVED,
                           &epoch);
        /* removed already (a restart after it), or forgotten since */
        if (rc == RK_EBADREQ || rc == RK_ENOTFOUND)
            rc = 0;
        if (rc < 0) {
            SLOG(s, ERROR, "replace.announce_fail", "replace=%s error=\"%s\"",
                 rs.replacing, rk_strerror(rc));
            return;
        }
        SLOG(s, INFO, "replace.removed", "replace=%s epoch=%llu", rs.replacing,
             (unsigned long long)epoch);
    }
    rc = s->h.announce(s->h.arg, NULL, STREAM_ANNOUNCE_NORMAL, &epoch);
    if (rc < 0) {
        SLOG(s, ERROR, "boot.announce_fail", "error=\"%s\"", rk_strerror(rc));
        return;
    }
    st->finished = true;
    s->h.join_done(s->h.arg, epoch); /* joining=0 saved; NORMAL */
    st->purge_due = true;            /* the positions saved: no longer needed */
    stream_save(s);
    struct stream_state ns;
    stream__state(s, &ns);
    uint64_t ms = stream__now(s) - st->start_ms;
    char sent[1024];
    double ratio = 0;
    donors_text(st, false, sent, sizeof(sent), &ratio);
    SLOG(s, INFO, "boot.joined",
         "tokens=%d epoch=%llu ranges=%zu keys=%llu bytes=%llu ms=%llu "
         "streamed=1 replaced=%s bytes_by_donor=%s largest_donor_to_mean=%.2f",
         ns.ntokens, (unsigned long long)epoch, st->ns,
         (unsigned long long)st->keys, (unsigned long long)st->bytes,
         (unsigned long long)ms, rs.replacing[0] ? rs.replacing : "-",
         sent[0] ? sent : "-", ratio);
    s->h.ring_rebuild(s->h.arg);
}

/* Start the sessions that may ask now, in ring order: within
 * stream_max_ranges in all and stream_donor_max_ranges per donor (a
 * session waits for its own donor's slot rather than take another's
 * share), and the budget; then, with every range in, the end. Re-entered
 * (a failure inside it kicks again): run once more after. */
static void stream_kick(stream *s)
{
    struct stream_join *st = s->join;
    if (!st || !st->planned || !pulling(s) || stream__stopping(s))
        return;
    if (st->kicking) {
        st->rekick = true;
        return;
    }
    st->kicking = true;
    size_t done;
    do {
        st->rekick = false;
        uint64_t now = stream__now(s);
        size_t all =
            s->cfg.stream_max_ranges > 0 ? (size_t)s->cfg.stream_max_ranges : 1;
        int per = s->cfg.stream_donor_max_ranges > 0
                      ? s->cfg.stream_donor_max_ranges
                      : 1;
        done = 0;
        for (size_t i = 0; i < st->ns && pulling(s); i++) {
            struct stream_sess *ss = &st->sess[i];
            if (ss->state == S_DONE) {
                done++;
                continue;
            }
            if (st->asking >= all ||
                !(ss->state == S_IDLE ||
                  (ss->state == S_WAIT && now >= ss->retry_at)))
                continue;
            struct stream_peer p;
            if (ss->nsrc == 0) {
                sess_fail(ss, "no replica holds the range", RK_EUNAVAILABLE,
                          true);
                continue;
            }
            if (!sess_source(ss, &p)) {
                sess_fail(ss, "no live source", RK_EUNAVAILABLE, true);
                continue;
            }
            struct join_donor *d = &st->donor[ss->dn[ss->cur]];
            if (d->inflight >= per || !stream_budget_take(s))
                continue;
            ss->state = S_ASKING;
            st->asking++;
            ss->asked = ss->dn[ss->cur];
            d->inflight++;
            sess_ask(ss);
        }
    } while (st->rekick && pulling(s) && !stream__stopping(s));
    st->kicking = false;
    if (pulling(s) && done == st->ns && st->asking == 0)
        stream_finish(s);
}

/* ---- `ringkv abort` of a join ------------------------------------------ */

/* Once nothing of the aborted join is in flight, what it streamed in is
 * dropped on the pool: every range of the store (a joining node holds
 * nothing else: it started fresh), so that a later join starts from
 * nothing and nothing it pulled can come back after its tombstones were
 * purged elsewhere (gc_grace_seconds). */
struct drop_job {
    struct stream_work w;
    stream *s;
    store *st; /* read on the loop when queued */
    size_t dropped;
    int status;
};

static void drop_work(struct stream_work *w)
{
    struct drop_job *j = (struct drop_job *)w;
    struct store_range *have = NULL;
    size_t nhave = 0;
    j->status = store_range_list(&have, &nhave, j->st);
    for (size_t i = 0; j->status == 0 && i < nhave; i++) {
        j->status = store_range_drop(j->st, have[i]);
        if (j->status == 0)
            j->dropped++;
    }
    free(have);
}

static void drop_done(struct stream_work *w, int status)
{
    struct drop_job *j = (struct drop_job *)w;
    stream *s = j->s;
    struct stream_join *st = s->join;
    if (status < 0 && j->status == 0)
        j->status = status;
    if (st) {
        st->dropping = false;
        st->dropped = j->status == 0;
        st->drop_err = j->status;
    }
    if (j->status < 0)
        SLOG(s, ERROR, "join.drop_fail",
             "ranges_dropped=%zu error=\"%s\" note=\"tried again next "
             "tick\"",
             j->dropped, rk_strerror(j->status));
    else
        SLOG(s, INFO, "join.dropped",
             "ranges=%zu note=\"what the aborted join streamed in is gone\"",
             j->dropped);
    free(j);
}

static void drop_start(stream *s)
{
    struct stream_join *st = s->join;
    if (st->dropping || st->dropped || st->asking || st->saving ||
        !stream__store(s))
        return;
    struct drop_job *j = calloc(1, sizeof(*j));
    if (!j)
        return;
    j->s = s;
    j->st = stream__store(s);
    j->w.work = drop_work;
    j->w.done = drop_done;
    if (s->h.queue_work(s->h.arg, &j->w) < 0) {
        free(j);
        return;
    }
    st->dropping = true;
}

bool stream_join_busy(const stream *s)
{
    const struct stream_join *st = s->join;
    return st && st->aborted &&
           (st->asking || st->saving || st->dropping || !st->dropped);
}

bool stream_joining(const stream *s)
{
    return pulling(s) && !s->join->rebuild;
}

bool stream_rebuilding(const stream *s)
{
    return pulling(s) && s->join->rebuild;
}

int stream_join_abort(stream *s, char *msg, size_t cap)
{
    struct stream_join *st = s->join;
    if (!stream_joining(s)) {
        snprintf(msg, cap, "%s is not joining", s->cfg.node_name);
        return RK_EBADREQ;
    }
    uint64_t epoch = 0;
    int rc = s->h.join_withdraw(s->h.arg, &epoch);
    if (rc < 0) {
        snprintf(msg, cap, "cannot withdraw the join of %s: %s",
                 s->cfg.node_name, rk_strerror(rc));
        return rc;
    }
    st->aborted = true;
    st->aborted_ms = stream__now(s);
    st->purge_due = st->planned; /* its saved positions go */
    stream_save(s);
    size_t done = 0;
    for (size_t i = 0; i < st->ns; i++)
        done += st->sess[i].state == S_DONE;
    SLOG(s, WARN, "join.aborted",
         "epoch=%llu ranges_done=%zu ranges=%zu keys=%llu note=\"tokens "
         "withdrawn: waiting for `ringkv join`\"",
         (unsigned long long)epoch, done, st->ns, (unsigned long long)st->keys);
    snprintf(msg, cap,
             "%s aborted its join: its tokens are withdrawn (ring epoch "
             "%llu), so the ring is as it was before it joined. It drops "
             "the %llu keys it had streamed in (%zu of %zu ranges done) and "
             "waits, holding no tokens, for `ringkv join` (after a restart "
             "too)",
             s->cfg.node_name, (unsigned long long)epoch,
             (unsigned long long)st->keys, done, st->ns);
    return 0;
}

int stream_join_begin(stream *s)
{
    if (stream_rebuilding(s))
        return -EBUSY;
    if (s->join && (s->join->aborted || s->join->finished)) {
        if (stream_join_busy(s))
            return -EBUSY;
        stream__join_free(s); /* a join aborted before: this one anew */
    }
    if (!s->join) {
        s->join = calloc(1, sizeof(*s->join));
        if (!s->join)
            return -ENOMEM;
    }
    s->join->start_ms = stream__now(s);
    s->join->ready_at =
        s->join->start_ms + stream__at_least(s, STREAM_DELAY_MS);
    return 0;
}

void stream__join_tick(stream *s)
{
    struct stream_join *st = s->join;
    if (st && !stream__stopping(s))
        stream_save(s); /* positions moved, or the purge after the join */
    if (st && st->aborted && !stream__stopping(s)) {
        drop_start(s);
        return;
    }
    if (!pulling(s) || stream__stopping(s))
        return;
    uint64_t now = stream__now(s);
    if (!st->planned && st->rebuild) {
        /* a rebuild resumed after a restart: once the ring is the
         * cluster's and the node is in it */
        if (now < st->ready_at || s->h.ring_stale(s->h.arg) ||
            !s->h.ring_member(s->h.arg))
            return;
        int rc = stream_plan(s);
        if (rc < 0) {
            SLOG(s, ERROR, "rebuild.plan_fail", "from=%s error=\"%s\"",
                 st->from_dc, rk_strerror(rc));
            return;
        }
    }
    if (!st->planned) {
        /* another join that changes the same ranges goes first: asked from
         * the announcement on, so that the others hear early that this
         * one waits (the ring delay runs meanwhile) */
        if (s->h.join_queued &&
            s->h.join_queued(s->h.arg, st->queued_for, sizeof(st->queued_for),
                             st->queued_why, sizeof(st->queued_why))) {
            if (!st->queued_ms)
                st->queued_ms = now ? now : 1;
            return;
        }
        st->queued_ms = 0;
        /* the ring it streams against must be the cluster's */
        if (now < st->ready_at || s->h.ring_stale(s->h.arg) ||
            !stream__ring_pending(s))
            return;
        int rc = stream_plan(s);
        if (rc < 0) {
            SLOG(s, ERROR, "stream.plan_fail", "error=\"%s\"", rk_strerror(rc));
            return;
        }
    }
    size_t done = 0;
    for (size_t i = 0; i < st->ns; i++)
        done += st->sess[i].state == S_DONE;
    stream_stall_check(s, &st->stall, done < st->ns);
    if (now - st->last_log_ms >= 10000 && st->ns) {
        st->last_log_ms = now;
        SLOG(s, INFO, "stream.progress",
             "ranges_done=%zu ranges=%zu keys=%llu bytes=%llu", done, st->ns,
             (unsigned long long)st->keys, (unsigned long long)st->bytes);
    }
    stream_kick(s);
}

void stream_join_poke(stream *s)
{
    if (s->join && !s->join->planned)
        stream__join_tick(s);
}

/* ---- a rebuild ----------------------------------------------------------- */

/* A rebuild is this file's join with other ranges and sources: its plan
 * is every range the node replicates in its ring, each from the replicas
 * in one data centre (stream_plan_rebuild), its positions are saved under
 * names of their own ("rebuild.at.", so a join's are never taken), and its
 * end announces nothing: it clears state.rebuild_from. */

static int rebuild_new(stream *s, const char *dc)
{
    if (s->join) {
        if (stream_join_busy(s))
            return -EBUSY;
        stream__join_free(s); /* the last join's or rebuild's summary */
    }
    s->join = calloc(1, sizeof(*s->join));
    if (!s->join)
        return -ENOMEM;
    s->join->rebuild = true;
    snprintf(s->join->from_dc, sizeof(s->join->from_dc), "%s", dc);
    s->join->start_ms = stream__now(s);
    s->join->ready_at = s->join->start_ms;
    return 0;
}

int stream_rebuild_begin(stream *s, const char *dc, char **text, size_t *len)
{
    const char *me = s->cfg.node_name;
    if (stream_rebuilding(s))
        return rk_answer(text, len, RK_EBADREQ,
                         "%s is rebuilding from %s already: `ringkv "
                         "status` shows how far",
                         me, s->join->from_dc);
    if (stream_joining(s))
        return rk_answer(text, len, RK_EBADREQ,
                         "%s is joining: its join streams the ranges it "
                         "replicates",
                         me);
    if (stream_leave_running(s))
        return rk_answer(text, len, RK_EBADREQ,
                         "%s is leaving the ring (or drives a removal): "
                         "no rebuild meanwhile",
                         me);
    char why[256];
    int rc = stream_ring_ready(s, why, sizeof(why));
    if (rc < 0)
        return rk_answer(text, len, rc, "%s", why);
    const ring *r = stream__ring(s);
    struct stream_plan_range *pr = NULL;
    size_t npr = 0;
    rc = r ? stream_plan_rebuild(&pr, &npr, r, me, dc) : RK_ENOTFOUND;
    if (rc == RK_ENOTFOUND)
        return rk_answer(text, len, RK_EBADREQ,
                         "%s is not in its ring: nothing to rebuild", me);
    if (rc < 0)
        return rk_answer(text, len, rc, "cannot plan the rebuild: %s",
                         rk_strerror(rc));
    size_t lacking = 0;
    struct ring_range first = {0, 0};
    for (size_t i = 0; i < npr; i++)
        if (pr[i].ncand == 0 && lacking++ == 0)
            first = pr[i].range;
    free(pr);
    if (npr == 0)
        return rk_answer(text, len, RK_EBADREQ,
                         "%s replicates no range: the replication "
                         "setting gives its data centre no replicas "
                         "(`ringkv replication set` first)",
                         me);
    if (lacking)
        return rk_answer(
            text, len, RK_EBADREQ,
            "data centre '%s' holds no replica of %zu of the %zu pieces %s "
            "replicates, e.g. (%llu,%llu]: check the name against `ringkv "
            "status` and the setting against `ringkv replication`",
            dc, lacking, npr, me, (unsigned long long)first.start,
            (unsigned long long)first.end);
    struct stream_state st;
    stream__state(s, &st);
    snprintf(st.rebuild_from, sizeof(st.rebuild_from), "%s", dc);
    rc = stream__state_save(s, &st);
    if (rc < 0)
        return rk_answer(text, len, rc,
                         "cannot save the rebuild in node.state: %s",
                         rk_strerror(rc));
    rc = rebuild_new(s, dc);
    if (rc < 0)
        return rk_answer(text, len, rc, "cannot start the rebuild: %s",
                         rk_strerror(rc));
    s->join->fresh = true;
    SLOG(s, INFO, "rebuild.begin", "from=%s pieces=%zu", dc, npr);
    stream__join_tick(s); /* planned at once: the ring is ready */
    return rk_answer(
        text, len, 0,
        "%s rebuilds from data centre %s: %zu pieces of the ranges it "
        "replicates, streamed from their replicas there (within "
        "stream_throughput_mb); it serves meanwhile, and a restart resumes "
        "the rebuild. Progress: `ringkv status` or `ringkv netstats` on %s "
        "(`ringkv rebuild --from %s --wait` follows it).",
        me, dc, npr, me, dc);
}

int stream_rebuild_resume(stream *s, const char *dc)
{
    int rc = rebuild_new(s, dc);
    if (rc == 0)
        SLOG(s, INFO, "rebuild.resuming",
             "from=%s note=\"a rebuild was cut short: it goes on once the "
             "ring has settled (rebuild.planned, stream.resumed)\"",
             dc);
    return rc;
}

void stream__rebuild_done(stream *s)
{
    struct stream_join *st = s->join;
    struct stream_state ns;
    stream__state(s, &ns);
    ns.rebuild_from[0] = '\0';
    int rc = stream__state_save(s, &ns);
    char sent[1024];
    double ratio = 0;
    donors_text(st, false, sent, sizeof(sent), &ratio);
    SLOG(s, INFO, "rebuild.done",
         "from=%s ranges=%zu keys=%llu bytes=%llu ms=%llu bytes_by_donor=%s "
         "largest_donor_to_mean=%.2f saved=%d",
         st->from_dc, st->ns, (unsigned long long)st->keys,
         (unsigned long long)st->bytes,
         (unsigned long long)(st->end_ms - st->start_ms), sent[0] ? sent : "-",
         ratio, rc == 0);
}

void stream_rebuild_text(stream *s, FILE *f)
{
    const struct stream_join *st = s->join;
    if (!st || !st->rebuild)
        return;
    if (stream_rebuilding(s))
        stream__join_text(s, f);
    else
        stream__join_idle_text(s, f);
}

/* ---- netstats ------------------------------------------------------------ */

/* netstats: a line per donor, what it was given and what it sent, and how
 * far the largest is above the mean. */
static void donors_lines(const struct stream_join *st, FILE *f)
{
    char text[1024], b1[32];
    double ratio = 0;
    donors_text(st, false, text, sizeof(text), &ratio);
    size_t senders = 0;
    for (size_t i = 0; i < st->ndonor; i++)
        senders += st->donor[i].bytes > 0;
    fprintf(f, "Donors: %zu sent", senders);
    if (senders)
        fprintf(f, "; the largest %.2fx the mean", ratio);
    fprintf(f, "\n");
    for (size_t i = 0; i < st->ndonor; i++) {
        const struct join_donor *d = &st->donor[i];
        if (!d->planned && !d->bytes && !d->inflight)
            continue;
        stream_human_bytes(b1, sizeof(b1), d->bytes);
        fprintf(f,
                "  donor %s: %zu ranges, %d at once now; sent %llu keys, "
                "%s\n",
                d->name, d->planned, d->inflight, (unsigned long long)d->keys,
                b1);
    }
}

static double sess_fraction(const struct stream_sess *ss)
{
    return ss->state == S_DONE ? 1.0 : stream__fraction(ss->range, &ss->at);
}

void stream__join_text(stream *s, FILE *f)
{
    const struct stream_join *st = s->join;
    char b1[32], b2[32];
    uint64_t ms = stream__now(s) - st->start_ms;
    struct stream_state ns;
    stream__state(s, &ns);
    if (st->rebuild)
        fprintf(f, "Rebuilding from data centre %s:\n", st->from_dc);
    else if (ns.replacing[0])
        fprintf(f, "Mode: JOINING (replacing %s)\n", ns.replacing);
    else
        fprintf(f, "Mode: JOINING\n");
    if (st->rebuild && !st->planned) {
        fprintf(f,
                "Waiting for the ring to settle (restarted %.1f s ago); "
                "streaming goes on then.\n",
                (double)ms / 1000);
        return;
    }
    if (!st->planned && st->queued_ms) {
        fprintf(f,
                "Queued: waiting for %s for %.1f s: %s; streaming starts "
                "once it is done (tokens announced %.1f s ago).\n",
                st->queued_for, (double)(stream__now(s) - st->queued_ms) / 1000,
                st->queued_why, (double)ms / 1000);
        return;
    }
    if (!st->planned) {
        fprintf(f,
                "Announced its tokens %.1f s ago; streaming starts once "
                "the cluster has heard (ring delay).\n",
                (double)ms / 1000);
        return;
    }
    size_t done = 0;
    double frac = 0;
    for (size_t i = 0; i < st->ns; i++) {
        done += st->sess[i].state == S_DONE;
        frac += sess_fraction(&st->sess[i]);
    }
    frac = st->ns ? frac / (double)st->ns : 1;
    stream_human_bytes(b1, sizeof(b1), st->bytes);
    double secs = (double)ms / 1000;
    stream_human_bytes(b2, sizeof(b2),
                       secs > 0 ? (uint64_t)((double)st->bytes / secs) : 0);
    fprintf(f,
            "Receiving %zu ranges: %zu done, %.0f%% of the token "
            "space; %llu keys, %s in %.1f s (%s/s)",
            st->ns, done, frac * 100, (unsigned long long)st->keys, b1, secs,
            b2);
    if (frac > 0.01 && frac < 1)
        fprintf(f, ", ETA %.0f s", secs * (1 - frac) / frac);
    if (s->cfg.stream_throughput_mb > 0)
        fprintf(f, " (capped at %d MiB/s)", s->cfg.stream_throughput_mb);
    fprintf(f, "\n");
    stream_stall_text(s, &st->stall, f);
    donors_lines(st, f);
    for (size_t i = 0; i < st->ns; i++) {
        const struct stream_sess *ss = &st->sess[i];
        double fr = sess_fraction(ss);
        char bar[21];
        stream__bar(bar, fr);
        static const char *const sn[] = {"queued", "receiving", "committing",
                                         "retrying", "done"};
        stream_human_bytes(b1, sizeof(b1), ss->bytes);
        fprintf(f, "  (%llu,%llu] from %s [%s] %3.0f%% %s: %llu keys, %s\n",
                (unsigned long long)ss->range.start,
                (unsigned long long)ss->range.end,
                ss->nsrc ? ss->src[ss->cur] : "-", bar, fr * 100, sn[ss->state],
                (unsigned long long)ss->keys, b1);
    }
}

void stream__join_idle_text(stream *s, FILE *f)
{
    const struct stream_join *st = s->join;
    if (st && st->aborted)
        fprintf(f, "Join aborted %.1f s ago: tokens withdrawn; %s.\n",
                (double)(stream__now(s) - st->aborted_ms) / 1000,
                st->dropped ? "what it had streamed in is dropped"
                : st->drop_err
                    ? "dropping what it had streamed in failed; tried "
                      "again each gossip tick"
                    : "dropping what it had streamed in");
    else if (st && st->planned && st->rebuild) {
        char b[32];
        stream_human_bytes(b, sizeof(b), st->bytes);
        fprintf(f,
                "Rebuilt from %s: %zu ranges streamed in, %llu keys, %s in "
                "%.1f s.\n",
                st->from_dc, st->ns, (unsigned long long)st->keys, b,
                (double)(st->end_ms - st->start_ms) / 1000);
        donors_lines(st, f);
    } else if (st && st->planned) {
        fprintf(f, "Joined with %zu ranges streamed in: %llu keys.\n", st->ns,
                (unsigned long long)st->keys);
        donors_lines(st, f);
    } else
        fprintf(f, "Not receiving.\n");
}

void stream__join_free(stream *s)
{
    struct stream_join *st = s->join;
    if (!st)
        return;
    for (size_t i = 0; i < st->ns; i++)
        rpc_buf_free(&st->sess[i].msg);
    free(st->sess);
    free(st->donor);
    free(st);
    s->join = NULL;
}
