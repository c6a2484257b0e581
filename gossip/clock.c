/*
 * clock.c - how this node's wall clock compares with its peers': the
 * stamps SYN, ACK and ACK2 carry, and the estimate built from them.
 *
 * A replica refuses a timestamp too far ahead of its clock (node/clock.c),
 * but a node whose own clock is wrong cannot tell by itself: it needs its
 * peers' clocks. Gossip already sends each peer a packet or two a second,
 * so each carries the sender's wall clock, and the receiver keeps, per
 * peer, its last few "stamp minus my clock on receipt". A datagram is
 * one-way: the delay makes the peer look behind by it, so the largest of
 * the samples kept (the least delayed) is the estimate. That is good to a
 * few milliseconds on a LAN, against a max_clock_drift_ms of hundreds.
 *
 * Stamps are only compared, never followed: no peer's clock moves this
 * node's (the HLC does not travel in gossip). A node is skewed when most
 * of its live peers with a fresh estimate (and at least one) are more
 * than max_drift_ms away: one wrong clock among many finds itself alone,
 * and the others each see one far peer out of several, which is not a
 * majority. The estimates must cover most live peers too: a node just
 * restarted, which has heard one peer's stamps but not yet the others',
 * does not judge by that one alone.
 *
 * Stamps go only to peers that announce CLOCK (their packets with a sixth
 * element would be malformed to nodes that predate it, as probe packets
 * go only to peers that announce INCARNATION).
 */
#include <string.h>

#include "gossip/gossip.h"
#include "gossip/gossip_internal.h"

#define VIEW_MAX 64 /* peers whose offsets make the median */

void gossip_wall_set(gossip *g, uint64_t wall_ms)
{
    g->wall_ms = wall_ms;
    /* announced once: the state spreads with the next rounds */
    if (wall_ms != 0 && !g->clock_announced &&
        gossip__own_u64_set(g, GOSSIP_KEY_CLOCK, 1) == 0)
        g->clock_announced = true;
}

void gossip_arrival_set(gossip *g, uint64_t wall_ms)
{
    g->arrival_ms = wall_ms;
}

uint64_t gossip__clock_stamp(const gossip *g, const char *to)
{
    if (g->wall_ms == 0)
        return 0;
    const struct gossip__ep *e = gossip__ep_at(g, to);
    return e && e->st[GOSSIP_KEY_CLOCK].len ? g->wall_ms : 0;
}

/* The difference a - b of two wall clocks, clamped to int64_t. */
static int64_t diff_ms(uint64_t a, uint64_t b)
{
    if (a >= b)
        return a - b > (uint64_t)INT64_MAX ? INT64_MAX : (int64_t)(a - b);
    return b - a > (uint64_t)INT64_MAX ? -INT64_MAX : -(int64_t)(b - a);
}

void gossip__clock_sample(gossip *g,
                          size_t idx,
                          uint64_t now_ms,
                          uint64_t remote_wall)
{
    if (g->wall_ms == 0 || remote_wall == 0 || idx == 0 || idx >= g->n_eps)
        return;
    struct gossip__ep *e = &g->eps[idx];
    uint32_t i = e->clock_pos++ % GOSSIP__CLOCK_SAMPLES;
    /* compared with the packet's arrival, not its reading: a packet read
     * late (this node stopped) is as fresh as when it came */
    uint64_t at = g->wall_ms;
    if (g->arrival_ms != 0 && g->arrival_ms < at)
        at = g->arrival_ms;
    e->clock_off[i] = diff_ms(remote_wall, at);
    /* 0 marks an empty slot: a now_ms of 0 counts as 1 */
    e->clock_at[i] = now_ms ? now_ms : 1;
}

bool gossip__clock_offset(int64_t *out,
                          const gossip *g,
                          const struct gossip__ep *e,
                          uint64_t now_ms)
{
    uint64_t fresh = (uint64_t)GOSSIP_CLOCK_FRESH_INTERVALS * g->interval_ms;
    uint64_t newest = 0;
    bool any = false;
    int64_t best = 0;
    for (int i = 0; i < GOSSIP__CLOCK_SAMPLES; i++) {
        if (e->clock_at[i] == 0)
            continue;
        if (e->clock_at[i] > newest)
            newest = e->clock_at[i];
        if (!any || e->clock_off[i] > best)
            best = e->clock_off[i];
        any = true;
    }
    if (!any || (now_ms > newest && now_ms - newest > fresh))
        return false;
    *out = best;
    return true;
}

static uint64_t mag(int64_t v)
{
    return v < 0 ? (uint64_t)0 - (uint64_t)v : (uint64_t)v;
}

/* The median of v[0..n) (n >= 1), sorting v; of two middle values, the
 * nearer to 0 (with two peers, one far off, a node is not half off). */
static int64_t median(int64_t *v, size_t n)
{
    for (size_t i = 1; i < n; i++) {
        int64_t x = v[i];
        size_t j = i;
        for (; j > 0 && v[j - 1] > x; j--)
            v[j] = v[j - 1];
        v[j] = x;
    }
    if (n % 2)
        return v[n / 2];
    return mag(v[n / 2 - 1]) < mag(v[n / 2]) ? v[n / 2 - 1] : v[n / 2];
}

void gossip_clock_view(struct gossip_clock_view *out,
                       const gossip *g,
                       uint64_t now_ms,
                       uint64_t max_drift_ms)
{
    memset(out, 0, sizeof(*out));
    int64_t mine[VIEW_MAX];
    size_t n = 0;
    for (size_t i = 1; i < g->n_eps; i++) {
        const struct gossip__ep *e = &g->eps[i];
        int64_t off;
        if (!e->up || e->quarantined)
            continue;
        out->live++;
        if (!gossip__clock_offset(&off, g, e, now_ms))
            continue;
        out->fresh++;
        out->far += max_drift_ms != 0 && mag(off) > max_drift_ms;
        if (n < VIEW_MAX) /* ours minus theirs */
            mine[n++] = off == INT64_MIN ? INT64_MAX : -off;
    }
    out->skewed = out->far >= 1 && out->far * 2 > out->fresh &&
                  out->fresh * 2 > out->live;
    out->offset_ms = n ? median(mine, n) : 0;
}
