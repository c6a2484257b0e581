/*
 * hlc.c - the hybrid logical clock (see hlc.h). Pure: no clock reads.
 *
 * The classic HLC keeps (l, c) apart; packing both into one integer whose
 * low bits are the counter makes "max, then +1" the whole algorithm, and an
 * overflowing counter simply carries into the millisecond part.
 */
#include "storage/hlc.h"

#include "common/rk.h"

/* Wall time as a timestamp; milliseconds past 2^48 (year 10889) clamp. */
static uint64_t hlc__wall(uint64_t wall_ms)
{
    const uint64_t max_ms = UINT64_MAX >> HLC_LOGICAL_BITS;
    return hlc_ts_make(wall_ms > max_ms ? max_ms : wall_ms, 0);
}

void hlc_restore(struct hlc *h, uint64_t floor)
{
    if (floor > h->last)
        h->last = floor;
}

uint64_t hlc_now(struct hlc *h, uint64_t wall_ms)
{
    uint64_t w = hlc__wall(wall_ms);
    /* UINT64_MAX is the one value with no successor; stay on it. */
    uint64_t next = h->last == UINT64_MAX ? UINT64_MAX : h->last + 1;
    h->last = w > next ? w : next;
    return h->last;
}

int hlc_recv(uint64_t *out, struct hlc *h, uint64_t wall_ms, uint64_t remote)
{
    if (h->max_drift_ms != 0 && hlc_ts_ms(remote) > wall_ms + h->max_drift_ms)
        return RK_EBADREQ;
    if (remote > h->last)
        h->last = remote;
    *out = hlc_now(h, wall_ms);
    return 0;
}
