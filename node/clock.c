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
 * peer's push) ahead of the wall clock; the node then waits until it is no
 * more than max_clock_drift_ms ahead before it starts (at most
 * HLC_CEILING_WINDOW_MS, as CockroachDB sleeps past its persisted upper
 * bound), so that its first writes are not refused by replicas for being
 * ahead. A ceiling further ahead than that was pushed there by a peer
 * (with max_clock_drift_ms off): the clock goes on from it (log
 * hlc.restored).
 *
 * Refusals: a replica write stamped more than max_clock_drift_ms ahead of
 * the node's wall clock is answered CLOCK_SKEW (node__clock_recv), and a
 * peer's clock carried in an answer that far ahead does not move ours;
 * each is counted (ringkv_clock_skew_refused_total) and logged as
 * hlc.refused, at most every 10 s. Records copied from peers (streaming,
 * read repair) are stored whatever their timestamp (node__clock_seen): they
 * exist already; only the clock does not follow them that far.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>

#include "common/rk.h"
#include "node/log.h"
#include "node/node_internal.h"

#define CEILING_NAME "hlc_ceiling"

/* The ceiling's save failed, or succeeded after failures: logged once. */
static void saved(node *n, uint64_t c, int rc)
{
    if (rc < 0) {
        if (!n->clock_failing)
            LOG(ERROR, "hlc.ceiling_failed",
                "error=%s why=\"the clock's ceiling cannot be saved: writes "
                "are refused once the clock reaches the last one saved\"",
                rk_strerror(rc));
        n->clock_failing = true;
        n->clock_err = rc;
        return;
    }
    if (n->clock_failing)
        LOG(INFO, "hlc.ceiling_saved", "%s", "");
    n->clock_failing = false;
    hlc_ceiling_set(&n->hlc, c);
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
    n->clock_saving = false;
    free(j);
    n->pending_closes--;
    node__stop_progress(n);
}

/* Start saving the ceiling the clock needs at wall time wall_ms, if any
 * and none is being saved. */
static void keep(node *n, uint64_t wall_ms)
{
    if (n->clock_saving || !n->store || !n->loop)
        return;
    uint64_t c = hlc_ceiling_due(&n->hlc, wall_ms);
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
    n->clock_saving = true;
}

static void sleep_ms(uint64_t ms)
{
    struct timespec ts = {(time_t)(ms / 1000), (long)(ms % 1000) * 1000000L};
    while (nanosleep(&ts, &ts) < 0 && errno == EINTR)
        ;
}

int node__clock_open(node *n, char *err, size_t errlen)
{
    n->hlc.max_drift_ms = (uint64_t)n->cfg.max_clock_drift_ms;
    /* kept ahead each gossip tick (node__clock_tick): a window of at least
     * three ticks, so that it never runs out between two */
    uint64_t w = 3 * (uint64_t)n->cfg.gossip_interval_ms;
    n->hlc.window_ms = w > HLC_CEILING_WINDOW_MS ? w : HLC_CEILING_WINDOW_MS;
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
    if (ahead > n->hlc.window_ms + drift) {
        LOG(WARN, "hlc.restored",
            "ahead_ms=%llu why=\"the clock was ahead of the wall clock "
            "before the restart (a peer's clock ahead, or this one set "
            "back): timestamps go on from there\"",
            (unsigned long long)ahead);
    } else if (drift && ahead > drift) {
        /* until its timestamps are within max_clock_drift_ms of the wall
         * clock, which its peers check */
        LOG(INFO, "hlc.wait",
            "ms=%llu why=\"the clock's ceiling saved before a crash is "
            "ahead of the wall clock\"",
            (unsigned long long)(ahead - drift));
        sleep_ms(ahead - drift + 1);
        wall = node__now_ms();
    }
    hlc_restore(&n->hlc, prev);
    /* saved before anything is served (the loop does not run yet) */
    uint64_t c = hlc_ceiling_due(&n->hlc, wall);
    if (c != 0) {
        rc = store_sys_set_u64(n->store, CEILING_NAME, c);
        if (rc < 0) {
            snprintf(err, errlen, "cannot save the clock's ceiling: %s",
                     rk_strerror(rc));
            return rc;
        }
        hlc_ceiling_set(&n->hlc, c);
    }
    return 0;
}

void node__clock_close(node *n)
{
    if (!n->store || n->hlc.last == 0)
        return;
    /* nothing is issued after this: the clock itself is the bound */
    int rc = store_sys_set_u64(n->store, CEILING_NAME, n->hlc.last);
    if (rc < 0)
        LOG(WARN, "hlc.save_failed",
            "error=%s why=\"the ceiling saved last "
            "stands: a restart may wait up to a few seconds\"",
            rk_strerror(rc));
}

void node__clock_tick(node *n)
{
    if (!n->stopping)
        keep(n, node__now_ms());
}

int node__clock_now(uint64_t *out, node *n)
{
    uint64_t wall = node__now_ms();
    keep(n, wall);
    int rc = hlc_now(out, &n->hlc, wall);
    if (rc == -EAGAIN) /* the ceiling's save is late: the disk is slow */
        return n->clock_failing ? n->clock_err : RK_EOVERLOADED;
    return rc;
}

static void note_skew(node *n, const char *from, uint64_t remote, uint64_t wall)
{
    n->stats.clock_skew_refused++;
    n->skew_unlogged++;
    uint64_t now = node__mono_ms(n);
    if (n->skew_logged_ms && now - n->skew_logged_ms < 10000)
        return;
    LOG(WARN, "hlc.refused",
        "from=%s ahead_ms=%llu max_clock_drift_ms=%d refused=%llu "
        "why=\"a timestamp that far ahead of this node's clock: check the "
        "clocks (NTP) of both\"",
        from && from[0] ? from : "?",
        (unsigned long long)(hlc_ts_ms(remote) - wall),
        n->cfg.max_clock_drift_ms, (unsigned long long)n->skew_unlogged);
    n->skew_logged_ms = now;
    n->skew_unlogged = 0;
}

int node__clock_recv(node *n, uint64_t remote, const char *from)
{
    uint64_t wall = node__now_ms(), after;
    int rc = hlc_recv(&after, &n->hlc, wall, remote);
    if (rc == RK_ECLOCKSKEW) {
        note_skew(n, from, remote, wall);
        return rc;
    }
    keep(n, wall);
    return 0;
}

int node__clock_seen(node *n, uint64_t ts)
{
    uint64_t wall = node__now_ms(), after;
    /* too far ahead: stored all the same, the clock stays */
    (void)hlc_recv(&after, &n->hlc, wall, ts);
    keep(n, wall);
    return 0;
}
