/*
 * hlc.h - a hybrid logical clock: 64-bit timestamps that follow the wall
 * clock, never go backwards, and move past every timestamp received.
 *
 * A timestamp is `physical_ms << 16 | logical`: the top 48 bits are Unix
 * milliseconds, the low 16 bits a counter for events within one
 * millisecond (or while the wall clock lags behind what was seen). When the
 * counter overflows the physical part is carried forward by one, so the
 * clock stays strictly increasing whatever the inputs.
 *
 * Restarts. A clock that starts again from the wall clock goes back in time
 * whenever it had been ahead of it (pushed by a peer, or by a wall clock
 * that stepped back): its owner's writes would then lose last-write-wins to
 * older ones. So the owner keeps a ceiling (window_ms != 0): an upper bound
 * of the clock, persisted before the clock passes it, and restored at start
 * (hlc_restore), as CockroachDB persists its HLC upper bound. hlc_ceiling_due
 * says when to persist a new one (the clock within window_ms / 2 of the
 * last), hlc_ceiling_set that it is durable, and hlc_now issues nothing
 * above the ceiling. Until 2026-12-06 the clock was neither persisted nor
 * restored (regression test_regression_restart_loses_writes_hlc).
 *
 * The module is pure: the wall clock is an argument, there is no global
 * state, and a struct hlc is plain data owned by the caller (one per node).
 * Not thread-safe: the owner serialises calls (node/ calls it on its loop).
 */
#ifndef RK_STORAGE_HLC_H
#define RK_STORAGE_HLC_H

#include <stdint.h>

#define HLC_LOGICAL_BITS 16
#define HLC_LOGICAL_MASK ((UINT64_C(1) << HLC_LOGICAL_BITS) - 1)

/* How far ahead of the clock a node's persisted ceiling is set: a ceiling
 * is written about twice a window while timestamps are issued, and a node
 * restarted after a crash waits out at most this long (node/clock.c). */
#define HLC_CEILING_WINDOW_MS 3000

struct hlc {
    uint64_t last;         /* the highest timestamp issued or seen */
    uint64_t max_drift_ms; /* 0: accept any remote timestamp */
    uint64_t window_ms;    /* 0: no ceiling kept (hlc_now unbounded) */
    uint64_t ceiling;      /* persisted: nothing above it is issued */
};

#define HLC_INIT   \
    {              \
        0, 0, 0, 0 \
    }

/* Set the clock to `floor` (e.g. the ceiling persisted before a restart);
 * never moves it backwards. The ceiling kept is at least `floor` too: the
 * next hlc_ceiling_due asks for a new one above it. */
void hlc_restore(struct hlc *h, uint64_t floor);

/* The ceiling to persist before the clock goes on at wall time `wall_ms`,
 * or 0 when none is needed: no ceiling is kept (window_ms 0), or the one
 * kept is still more than window_ms / 2 ahead of both the wall clock and
 * the last timestamp. A new ceiling is window_ms past the later of the two
 * (the last timestamp of that millisecond). */
uint64_t hlc_ceiling_due(const struct hlc *h, uint64_t wall_ms);

/* The ceiling `c` is durable: timestamps up to it may be issued. Never
 * lowers the ceiling kept. */
void hlc_ceiling_set(struct hlc *h, uint64_t c);

/* A timestamp for a local event (a write this node coordinates) at wall
 * time `wall_ms`, into *out: strictly greater than every timestamp returned
 * or received before, and at least `wall_ms << 16`. Returns 0, or -EAGAIN
 * (nothing issued, clock unchanged) when a ceiling is kept and the
 * timestamp would pass it: persist hlc_ceiling_due first. */
int hlc_now(uint64_t *out, struct hlc *h, uint64_t wall_ms);

/* Account for a timestamp `remote` received from a peer at wall time
 * `wall_ms`: afterwards every timestamp hlc_now issues is greater than
 * `remote`. Writes the new clock value (also > remote) to *out. Not bounded
 * by the ceiling (what was received exists already): the owner persists
 * hlc_ceiling_due before it relies on the clock again.
 * Returns 0, or RK_ECLOCKSKEW (clock unchanged) when max_drift_ms is set
 * and `remote` is more than that far ahead of the wall clock. */
int hlc_recv(uint64_t *out, struct hlc *h, uint64_t wall_ms, uint64_t remote);

/* The parts of a timestamp. */
static inline uint64_t hlc_ts_ms(uint64_t ts)
{
    return ts >> HLC_LOGICAL_BITS;
}

static inline uint64_t hlc_ts_logical(uint64_t ts)
{
    return ts & HLC_LOGICAL_MASK;
}

static inline uint64_t hlc_ts_make(uint64_t ms, uint64_t logical)
{
    return (ms << HLC_LOGICAL_BITS) | (logical & HLC_LOGICAL_MASK);
}

#endif
