/*
 * hlc.c - the hybrid logical clock (see hlc.h). Pure: no clock reads.
 *
 * The classic HLC keeps (l, c) apart; packing both into one integer whose
 * low bits are the counter makes "max, then +1" the whole algorithm, and an
 * overflowing counter simply carries into the millisecond part.
 */
#include "storage/hlc.h"

#include <errno.h>

#include "common/rk.h"

#define HLC_MAX_MS (UINT64_MAX >> HLC_LOGICAL_BITS)

/* Milliseconds past 2^48 (year 10889) clamp. */
static uint64_t clamp_ms(uint64_t ms)
{
    return ms > HLC_MAX_MS ? HLC_MAX_MS : ms;
}

/* a + b in milliseconds, clamped. */
static uint64_t add_ms(uint64_t a, uint64_t b)
{
    return b > HLC_MAX_MS - clamp_ms(a) ? HLC_MAX_MS : clamp_ms(a) + b;
}

/* The timestamp that follows h->last at wall time wall_ms. */
static uint64_t next_ts(const struct hlc *h, uint64_t wall_ms)
{
    uint64_t w = hlc_ts_make(clamp_ms(wall_ms), 0);
    /* UINT64_MAX is the one value with no successor; stay on it. */
    uint64_t next = h->last == UINT64_MAX ? UINT64_MAX : h->last + 1;
    return w > next ? w : next;
}

void hlc_restore(struct hlc *h, uint64_t floor)
{
    if (floor > h->last)
        h->last = floor;
    if (floor > h->ceiling)
        h->ceiling = floor;
}

uint64_t hlc_ceiling_due(const struct hlc *h, uint64_t wall_ms)
{
    if (h->window_ms == 0)
        return 0;
    uint64_t base = clamp_ms(wall_ms);
    if (hlc_ts_ms(h->last) > base)
        base = hlc_ts_ms(h->last);
    /* at least a millisecond ahead of both (the next timestamp fits), or
     * the end of time */
    uint64_t margin = (h->window_ms + 1) / 2;
    if (h->ceiling >= hlc_ts_make(add_ms(base, margin), HLC_LOGICAL_MASK))
        return 0;
    return hlc_ts_make(add_ms(base, h->window_ms), HLC_LOGICAL_MASK);
}

void hlc_ceiling_set(struct hlc *h, uint64_t c)
{
    if (c > h->ceiling)
        h->ceiling = c;
}

int hlc_now(uint64_t *out, struct hlc *h, uint64_t wall_ms)
{
    uint64_t next = next_ts(h, wall_ms);
    if (h->window_ms != 0 && next > h->ceiling)
        return -EAGAIN;
    h->last = next;
    *out = next;
    return 0;
}

int hlc_recv(uint64_t *out, struct hlc *h, uint64_t wall_ms, uint64_t remote)
{
    if (h->max_drift_ms != 0 &&
        hlc_ts_ms(remote) > add_ms(wall_ms, h->max_drift_ms))
        return RK_ECLOCKSKEW;
    if (remote > h->last)
        h->last = remote;
    h->last = next_ts(h, wall_ms);
    *out = h->last;
    return 0;
}
