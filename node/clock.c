/*
 * clock.c - the node's hybrid logical clock (storage/hlc.h): kept across
 * restarts through a ceiling in the system store, and refusing timestamps
 * too far ahead of the wall clock (max_clock_drift_ms).
 *
 * The ceiling (system value "hlc_ceiling") bounds every timestamp the clock
 * has issued or taken in. It is written, synced, on the loop before the
 * clock needs it: about twice a HLC_CEILING_WINDOW_MS while the node issues
 * or receives timestamps (one small LMDB transaction each), before the
 * coordinator stamps a write above it and before a replica stores a record
 * above it. A clean stop writes the clock itself. At start the clock is
 * restored to it, so the first timestamp issued is greater than every one
 * issued or seen before the restart: until 2026-12-06 the clock started
 * from the wall clock, and after a peer had pushed it ahead (its clock
 * ahead, even briefly) a restarted node's writes lost last-write-wins to
 * older ones (test_regression_restart_loses_writes_hlc).
 *
 * After a crash the ceiling is up to a window ahead of the wall clock; the
 * node then waits until the wall clock passes it before it starts (at most
 * HLC_CEILING_WINDOW_MS, as CockroachDB sleeps past its persisted upper
 * bound), so that its first writes are not refused by replicas for being
 * ahead. A ceiling further ahead than a window was pushed there by a peer:
 * the clock goes on from it (log hlc.restored).
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
#include <time.h>

#include "common/rk.h"
#include "node/log.h"
#include "node/node_internal.h"

#define CEILING_NAME "hlc_ceiling"

/* Persist the ceiling the clock needs at wall time wall_ms, if any. */
static int keep(node *n, uint64_t wall_ms)
{
    uint64_t c = hlc_ceiling_due(&n->hlc, wall_ms);
    if (c == 0)
        return 0;
    int rc =
        n->store ? store_sys_set_u64(n->store, CEILING_NAME, c) : RK_ECLOSED;
    if (rc < 0) {
        if (!n->clock_failing)
            LOG(ERROR, "hlc.ceiling_failed",
                "error=%s why=\"the clock's ceiling cannot be saved: writes "
                "are refused once the clock reaches the last one saved\"",
                rk_strerror(rc));
        n->clock_failing = true;
        return rc;
    }
    if (n->clock_failing)
        LOG(INFO, "hlc.ceiling_saved", "%s", "");
    n->clock_failing = false;
    hlc_ceiling_set(&n->hlc, c);
    return 0;
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
    n->hlc.window_ms = HLC_CEILING_WINDOW_MS;
    uint64_t saved = 0;
    int rc = store_sys_get_u64(&saved, n->store, CEILING_NAME);
    if (rc < 0 && rc != RK_ENOTFOUND) {
        snprintf(err, errlen, "cannot read the clock's ceiling: %s",
                 rk_strerror(rc));
        return rc;
    }
    uint64_t wall = node__now_ms(), saved_ms = hlc_ts_ms(saved);
    uint64_t ahead = saved_ms > wall ? saved_ms - wall : 0;
    if (ahead > HLC_CEILING_WINDOW_MS) {
        LOG(WARN, "hlc.restored",
            "ahead_ms=%llu why=\"the clock was ahead of the wall clock "
            "before the restart (a peer's clock ahead, or this one set "
            "back): timestamps go on from there\"",
            (unsigned long long)ahead);
    } else if (ahead > 0) {
        LOG(INFO, "hlc.wait",
            "ms=%llu why=\"the clock's ceiling saved before a crash is "
            "ahead of the wall clock\"",
            (unsigned long long)ahead);
        sleep_ms(ahead + 1);
        wall = node__now_ms();
    }
    hlc_restore(&n->hlc, saved);
    rc = keep(n, wall);
    if (rc < 0) {
        snprintf(err, errlen, "cannot save the clock's ceiling: %s",
                 rk_strerror(rc));
        return rc;
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
            "stands: a restart may wait up to a second\"",
            rk_strerror(rc));
}

int node__clock_now(uint64_t *out, node *n)
{
    uint64_t wall = node__now_ms();
    int kept = keep(n, wall);
    int rc = hlc_now(out, &n->hlc, wall);
    /* a failed save leaves the last ceiling: timestamps up to it go on */
    if (rc < 0)
        return kept < 0 ? kept : rc;
    return 0;
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
    return keep(n, wall);
}

int node__clock_seen(node *n, uint64_t ts)
{
    uint64_t wall = node__now_ms(), after;
    /* too far ahead: stored all the same, the clock stays */
    (void)hlc_recv(&after, &n->hlc, wall, ts);
    return keep(n, wall);
}
