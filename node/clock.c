/*
 * clock.c - the node's hybrid logical clock (storage/hlc.h): kept across
 * restarts through a ceiling in the system store, and refusing timestamps
 * too far ahead of the wall clock (max_clock_drift_ms).
 *
 * The ceiling (system value "hlc_ceiling") bounds every timestamp the clock
 * has issued or taken in. It is set HLC_CEILING_WINDOW_MS ahead and saved,
 * synced, on the thread pool once the clock comes within half a window of
 * it: about twice a window, checked at every timestamp issued or taken
 * in and every gossip tick (one small LMDB transaction each; the window
 * is at least three gossip intervals). The clock issues nothing above the
 * ceiling saved last: should the save be late (a disk hanging for more than
 * half a window), writes this node coordinates are answered OVERLOADED (the
 * error of the save, if it failed) until it lands. A first version saved
 * on the loop, and a hanging disk stopped every request of the node with
 * it (test_regression_write_outlives_timeout, read_outlives_timeout). A
 * clean stop writes the clock itself. At start the clock is restored to
 * it, so the first timestamp issued is greater than every one issued or
 * seen before the restart: until 2026-12-06 the clock started from the
 * wall clock, and after a peer had pushed it ahead (its clock ahead, even
 * briefly) a restarted node's writes lost last-write-wins to older ones
 * (test_regression_restart_loses_writes_hlc).
 *
 * After a crash the ceiling is up to a window (and max_clock_drift_ms, a
 * peer's push) ahead of the wall clock; the node then waits until the
 * wall clock has passed it before it starts (at most the window and
 * max_clock_drift_ms, as CockroachDB sleeps past its persisted upper
 * bound), so that its first timestamps are not in the future: neither
 * refused by replicas for being ahead, nor winning last-write-wins over
 * later writes through other nodes. A ceiling further ahead than that was
 * pushed there by a peer (with max_clock_drift_ms off): the clock goes on from
 * it (log hlc.restored).
 *
 * Refusals: a replica write stamped more than max_clock_drift_ms ahead of
 * the node's wall clock is answered CLOCK_SKEW (node__clock_recv), and a
 * peer's clock carried in an answer that far ahead does not move ours;
 * each is counted (ringkv_clock_skew_refused_total) and logged as
 * hlc.refused, at most every 10 s. Records copied from peers (streaming,
 * read repair) are stored whatever their timestamp (node__clock_seen): they
 * exist already; only the clock does not follow them that far.
 *
 * The node's own clock. A replica's refusal protects its peers from a
 * coordinator whose clock is ahead, but not the coordinator's own copy:
 * until 2026-12-06 a node 10 minutes ahead stored each write it
 * coordinated locally, stamped 10 minutes ahead, before its peers refused
 * it; the write failed, yet its copy won every read that asked that node,
 * over later writes acknowledged through others, and outlived its TTL
 * (test_regression_clock_skew_pulls_cluster). A clock behind was not
 * seen at all. Now gossip carries each node's wall clock (gossip/clock.c)
 * and, every tick, the node reads its peers' view of it: when most of its
 * live peers see it more than max_clock_drift_ms off (ahead or behind), it
 * is skewed: logged (clock.skewed, clock.back, at most every 10 s),
 * exported (ringkv_clock_skewed, ringkv_clock_offset_ms), shown by
 * `ringkv status` and INFO, and node__clock_now issues no timestamp, so
 * it coordinates no write (CLOCK_SKEW, "this node's clock is N ms ahead
 * of its peers'"); reads are served, expiries judged by its peers' time
 * (node__clock_cluster_ms), and timestamps received, as a replica,
 * bounded by its peers' time too (a node behind refused every write its
 * peers sent it). Nor does it issue one while its HLC is more
 * than max_clock_drift_ms ahead of its wall clock (after its clock was put
 * right, until the wall clock catches up): replicas would refuse those.
 */
#include "node/clock.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>

#include "common/rk.h"
#include "node/daemon.h"
#include "node/log.h"
#include "storage/hlc.h"

#define CEILING_NAME "hlc_ceiling"

/* The ceiling's save failed, or succeeded after failures: logged once. */
static void saved(node *n, uint64_t c, int rc)
{
    if (rc < 0) {
        if (!n->clock.failing)
            LOG(ERROR, "hlc.ceiling_failed",
                "error=%s why=\"the clock's ceiling cannot be saved: writes "
                "are refused once the clock reaches the last one saved\"",
                rk_strerror(rc));
        n->clock.failing = true;
        n->clock.err = rc;
        return;
    }
    if (n->clock.failing)
        LOG(INFO, "hlc.ceiling_saved", "%s", "");
    n->clock.failing = false;
    hlc_ceiling_set(&n->clock.hlc, c);
}

/* The save runs on the pool: a synced write on the loop blocked every
 * request for as long as the disk hung (regressions
 * test_regression_write_outlives_timeout, read_outlives_timeout, which
 * hang a node's disk syncs). The clock goes on meanwhile up to the
 * ceiling saved before, at least half a window ahead. */
struct ceiling_job {
    uv_work_t w;
    node *n;
    uint64_t c;
    int rc;
};

static void ceiling_work(uv_work_t *w)
{
    struct ceiling_job *j = w->data;
    j->rc = store_sys_set_u64(j->n->store, CEILING_NAME, j->c);
}

static void ceiling_after(uv_work_t *w, int status)
{
    struct ceiling_job *j = w->data;
    node *n = j->n;
    saved(n, j->c, status < 0 ? status : j->rc);
    n->clock.saving = false;
    free(j);
    n->pending_closes--;
    node__stop_progress(n);
}

/* Start saving the ceiling the clock needs at wall time wall_ms, if any
 * and none is being saved. */
static void keep(node *n, uint64_t wall_ms)
{
    if (n->clock.saving || !n->store || !n->loop)
        return;
    uint64_t c = hlc_ceiling_due(&n->clock.hlc, wall_ms);
    if (c == 0)
        return;
    struct ceiling_job *j = calloc(1, sizeof(*j));
    if (!j)
        return;
    j->n = n;
    j->c = c;
    j->w.data = j;
    if (uv_queue_work(n->loop, &j->w, ceiling_work, ceiling_after) < 0) {
        free(j);
        return;
    }
    n->pending_closes++;
    n->clock.saving = true;
}

static void sleep_ms(uint64_t ms)
{
    struct timespec ts = {(time_t)(ms / 1000), (long)(ms % 1000) * 1000000L};
    while (nanosleep(&ts, &ts) < 0 && errno == EINTR)
        ;
}

int node__clock_open(node *n, char *err, size_t errlen)
{
    n->clock.hlc.max_drift_ms = (uint64_t)n->cfg.max_clock_drift_ms;
    /* kept ahead each gossip tick (node__clock_tick): a window of at least
     * three ticks, so that it never runs out between two */
    uint64_t w = 3 * (uint64_t)n->cfg.gossip_interval_ms;
    n->clock.hlc.window_ms =
        w > HLC_CEILING_WINDOW_MS ? w : HLC_CEILING_WINDOW_MS;
    uint64_t prev = 0;
    int rc = store_sys_get_u64(&prev, n->store, CEILING_NAME);
    if (rc < 0 && rc != RK_ENOTFOUND) {
        snprintf(err, errlen, "cannot read the clock's ceiling: %s",
                 rk_strerror(rc));
        return rc;
    }
    uint64_t wall = node__now_ms(), saved_ms = hlc_ts_ms(prev);
    uint64_t ahead = saved_ms > wall ? saved_ms - wall : 0;
    uint64_t drift = (uint64_t)n->cfg.max_clock_drift_ms;
    if (ahead > n->clock.hlc.window_ms + drift) {
        LOG(WARN, "hlc.restored",
            "ahead_ms=%llu why=\"the clock was ahead of the wall clock "
            "before the restart (a peer's clock ahead, or this one set "
            "back): timestamps go on from there\"",
            (unsigned long long)ahead);
    } else if (ahead > 0) {
        /* until the wall clock has passed every timestamp it may have
         * issued: waited out only to within max_clock_drift_ms, a node
         * restarted after kill -9 stamped its writes up to that far in the
         * future, and for that long a write through another node, started
         * after one through it was acknowledged, lost last-write-wins to
         * it (regression restart_stamps_future, found by test_history) */
        LOG(INFO, "hlc.wait",
            "ms=%llu why=\"the clock's ceiling saved before a crash is "
            "ahead of the wall clock\"",
            (unsigned long long)ahead);
        sleep_ms(ahead + 1);
        wall = node__now_ms();
    }
    hlc_restore(&n->clock.hlc, prev);
    /* saved before anything is served (the loop does not run yet) */
    uint64_t c = hlc_ceiling_due(&n->clock.hlc, wall);
    if (c != 0) {
        rc = store_sys_set_u64(n->store, CEILING_NAME, c);
        if (rc < 0) {
            snprintf(err, errlen, "cannot save the clock's ceiling: %s",
                     rk_strerror(rc));
            return rc;
        }
        hlc_ceiling_set(&n->clock.hlc, c);
    }
    return 0;
}

void node__clock_close(node *n)
{
    if (!n->store || n->clock.hlc.last == 0)
        return;
    /* nothing is issued after this: the clock itself is the bound */
    int rc = store_sys_set_u64(n->store, CEILING_NAME, n->clock.hlc.last);
    if (rc < 0)
        LOG(WARN, "hlc.save_failed",
            "error=%s why=\"the ceiling saved last "
            "stands: a restart may wait up to a few seconds\"",
            rk_strerror(rc));
}

/* Says when the node turns skewed and back, at most every 10 s: the
 * state logged last is the one that held then, so a node that flaps says
 * so by its count of turns, and the state it settles in is always logged
 * (a later tick logs it once the 10 s have passed). */
static void skew_log(node *n, uint64_t now)
{
    struct node_clock *k = &n->clock;
    if (k->skewed == k->flip_logged_state ||
        (k->flip_logged_ms && now - k->flip_logged_ms < 10000))
        return;
    if (k->skewed)
        LOG(WARN, "clock.skewed",
            "offset_ms=%lld peers_far=%zu peers=%zu max_clock_drift_ms=%d "
            "turns=%llu why=\"most live peers see this node's clock further "
            "off than max_clock_drift_ms: it coordinates no writes until "
            "its clock is back (check NTP)\"",
            (long long)k->offset_ms, k->peers_far, k->peers_fresh,
            n->cfg.max_clock_drift_ms, (unsigned long long)k->flips_unlogged);
    else
        LOG(INFO, "clock.back",
            "offset_ms=%lld peers_far=%zu peers=%zu turns=%llu",
            (long long)k->offset_ms, k->peers_far, k->peers_fresh,
            (unsigned long long)k->flips_unlogged);
    k->flip_logged_state = k->skewed;
    k->flip_logged_ms = now;
    k->flips_unlogged = 0;
}

/* Whether the clock has been judged since the start: before that, a node
 * whose clock was wrong coordinated writes for a gossip round or two as
 * if it were right, its peers refusing those too far ahead but its own
 * replica keeping them (to be spread over later writes by read repair),
 * and writes too far behind lost to older ones. Judged once most live
 * peers have an estimate; at once with no
 * other member once it has settled (a lone node) or with max_clock_drift_ms 0
 * (no check); after JUDGE_ROUNDS gossip intervals anyway (peers silent, or too
 * old to stamp their packets). */
#define JUDGE_ROUNDS 10
static void judge(node *n, const struct gossip_clock_view *v, uint64_t now)
{
    struct node_clock *k = &n->clock;
    if (k->judged)
        return;
    if (k->judge_by == 0)
        k->judge_by = now + JUDGE_ROUNDS * (uint64_t)n->cfg.gossip_interval_ms;
    /* settling: restarted, no peer heard yet (its ring holds itself
     * alone then, whatever the cluster); alone: its own only seed, no
     * other member and no live peer (a new cluster's first node), none to
     * compare with; a new node that is not has its seeds' to come */
    bool alone = v->live == 0 && n->is_seed && n->nseeds <= 1 &&
                 (!n->ring || ring_node_count(n->ring) <= 1);
    k->judged = n->cfg.max_clock_drift_ms == 0 ||
                (!n->settling && (alone || v->fresh * 2 > v->live)) ||
                now >= k->judge_by;
    if (k->judged)
        LOG(INFO, "clock.judged",
            "offset_ms=%lld peers=%zu peers_live=%zu skewed=%d",
            (long long)v->offset_ms, v->fresh, v->live, v->skewed ? 1 : 0);
}

/* The peers' view of this clock, from gossip's estimates. */
static void peers_view(node *n)
{
    if (!n->g)
        return;
    struct gossip_clock_view v;
    uint64_t now = node__mono_ms(n);
    gossip_clock_view(&v, n->g, now, (uint64_t)n->cfg.max_clock_drift_ms);
    judge(n, &v, now);
    struct node_clock *k = &n->clock;
    /* back only when most live peers' estimates say so: with too few
     * fresh ones (a node too busy to gossip in time) it went on as if
     * its clock were right, its replica keeping what its peers refused
     * (test_regression_clock_unjudged_coordinates, mid-run) */
    bool skewed = v.skewed || (k->skewed && v.fresh * 2 <= v.live);
    if (skewed != k->skewed)
        k->flips_unlogged++;
    k->skewed = skewed;
    k->offset_ms = v.offset_ms;
    k->peers_fresh = v.fresh;
    k->peers_far = v.far;
    skew_log(n, now);
}

void node__clock_tick(node *n)
{
    if (n->stopping)
        return;
    keep(n, node__now_ms());
    peers_view(n);
}

/* How far the clock (the last timestamp issued or taken in) is ahead of
 * the wall clock, in ms; 0 if not ahead. */
static uint64_t hlc_ahead_ms(const node *n, uint64_t wall)
{
    uint64_t ms = hlc_ts_ms(n->clock.hlc.last);
    return ms > wall ? ms - wall : 0;
}

/* Whether this node refuses to issue timestamps: its peers see its clock
 * too far off, or its own clock is further ahead of its wall clock than
 * replicas accept (its wall clock was ahead before and has been put
 * right, a restart went on from a ceiling saved then). */
static bool refuses(const node *n, uint64_t wall)
{
    uint64_t drift = (uint64_t)n->cfg.max_clock_drift_ms;
    return n->clock.skewed || (drift && hlc_ahead_ms(n, wall) > drift);
}

bool node__clock_errmsg(node *n, char *buf, size_t len, int err, int need)
{
    uint64_t wall = node__now_ms();
    if (err != RK_ECLOCKSKEW || need != 0 || !refuses(n, wall))
        return false;
    int64_t off = n->clock.offset_ms;
    if (n->clock.skewed)
        snprintf(buf, len,
                 "this node's clock is %lld ms %s its peers' (more than "
                 "max_clock_drift_ms %d): it coordinates no writes until its "
                 "clock is back (check NTP); write through another node",
                 (long long)(off < 0 ? -off : off),
                 off < 0 ? "behind" : "ahead of", n->cfg.max_clock_drift_ms);
    else
        snprintf(buf, len,
                 "this node's timestamps are %llu ms ahead of its clock "
                 "(its clock was ahead before): it coordinates no writes "
                 "until its clock catches up; write through another node",
                 (unsigned long long)hlc_ahead_ms(n, wall));
    return true;
}

uint64_t node__clock_cluster_ms(const node *n)
{
    uint64_t wall = node__now_ms();
    int64_t off = n->clock.offset_ms;
    if (!n->clock.skewed || off == 0)
        return wall;
    if (off > 0)
        return wall > (uint64_t)off ? wall - (uint64_t)off : 0;
    return wall + ((uint64_t)0 - (uint64_t)off);
}

int node__clock_now(uint64_t *out, node *n)
{
    uint64_t wall = node__now_ms();
    keep(n, wall);
    if (!n->clock.judged) /* at once when the estimates are in, not a tick */
        peers_view(n);    /* later: clock.c's judge */
    if (!n->clock.judged) /* retried through another node, as a ring stale */
        return RK_ESTALE;
    if (refuses(n, wall)) {
        n->stats.clock_skew_writes++;
        return RK_ECLOCKSKEW;
    }
    int rc = hlc_now(out, &n->clock.hlc, wall);
    if (rc == -EAGAIN) /* the ceiling's save is late: the disk is slow */
        return n->clock.failing ? n->clock.err : RK_EOVERLOADED;
    return rc;
}

static void note_skew(node *n, const char *from, uint64_t remote, uint64_t wall)
{
    n->stats.clock_skew_refused++;
    n->clock.skew_unlogged++;
    uint64_t now = node__mono_ms(n);
    if (n->clock.skew_logged_ms && now - n->clock.skew_logged_ms < 10000)
        return;
    LOG(WARN, "hlc.refused",
        "from=%s ahead_ms=%llu max_clock_drift_ms=%d refused=%llu "
        "why=\"a timestamp that far ahead of this node's clock: check the "
        "clocks (NTP) of both\"",
        from && from[0] ? from : "?",
        (unsigned long long)(hlc_ts_ms(remote) - wall),
        n->cfg.max_clock_drift_ms, (unsigned long long)n->clock.skew_unlogged);
    n->clock.skew_logged_ms = now;
    n->clock.skew_unlogged = 0;
}

/* Timestamps received are bounded by the peers' time while this node is
 * skewed: one whose clock is behind would refuse every write its peers
 * coordinate, as a replica, and miss them all. */
int node__clock_recv(node *n, uint64_t remote, const char *from)
{
    uint64_t wall = node__clock_cluster_ms(n), after;
    int rc = hlc_recv(&after, &n->clock.hlc, wall, remote);
    if (rc == RK_ECLOCKSKEW) {
        note_skew(n, from, remote, wall);
        return rc;
    }
    keep(n, wall);
    return 0;
}

int node__clock_seen(node *n, uint64_t ts)
{
    uint64_t wall = node__clock_cluster_ms(n), after;
    /* too far ahead: stored all the same, the clock stays */
    (void)hlc_recv(&after, &n->clock.hlc, wall, ts);
    keep(n, wall);
    return 0;
}
