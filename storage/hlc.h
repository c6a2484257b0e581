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
 * The module is pure: the wall clock is an argument, there is no global
 * state, and a struct hlc is plain data owned by the caller (one per node).
 * Not thread-safe: the owner serialises calls (node/ calls it on its loop).
 */
#ifndef RK_STORAGE_HLC_H
#define RK_STORAGE_HLC_H

#include <stdint.h>

#define HLC_LOGICAL_BITS 16
#define HLC_LOGICAL_MASK ((UINT64_C(1) << HLC_LOGICAL_BITS) - 1)

struct hlc {
    uint64_t last;         /* the highest timestamp issued or seen */
    uint64_t max_drift_ms; /* 0: accept any remote timestamp */
};

#define HLC_INIT \
    {            \
        0, 0     \
    }

/* Set the clock to `floor` (e.g. a high-water mark persisted before a
 * restart); never moves it backwards. */
void hlc_restore(struct hlc *h, uint64_t floor);

/* A timestamp for a local event (a write this node coordinates) at wall
 * time `wall_ms`: strictly greater than every timestamp returned or received
 * before, and at least `wall_ms << 16`. */
uint64_t hlc_now(struct hlc *h, uint64_t wall_ms);

/* Account for a timestamp `remote` received from a peer at wall time
 * `wall_ms`: afterwards every hlc_now() result is greater than `remote`.
 * Writes the new clock value (also > remote) to *out.
 * Returns 0, or RK_EBADREQ (clock unchanged) when max_drift_ms is set and
 * `remote` is more than that far ahead of the wall clock. */
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
