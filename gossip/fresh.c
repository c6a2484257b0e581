/*
 * fresh.c - gossip that cannot be replayed or reflected: the numbers every
 * packet carries, the window that drops a packet seen already, and the
 * bound on what a sender that is not a known member gets back.
 *
 * The MAC says a packet was made by a node of the cluster, not when: a
 * datagram captured on the wire and sent again a minute later used to be
 * answered as if new, and at the address the attacker wrote as its source
 * (a SYN got an ACK with every state newer than its digests, and a SYN when
 * it left endpoints out, telling the tokens and load of every node to
 * whoever asked; docs/gossip.md has what came back).
 *
 * - Numbers. Every packet, of both families, carries inside its MAC the
 *   sender's boot (its generation: persisted, larger at every restart) and
 *   a seq it raises for every packet it sends. Per sender a receiver keeps
 *   the highest boot heard, the highest seq of that boot, and which of the
 *   GOSSIP__FRESH_WINDOW seqs below it came: a packet of an older boot, at
 *   or more than a window behind the highest seq, or seen already is a
 *   replay and is dropped (counted, GOSSIP_EV_REPLAYED). One seq counts
 *   the packets to every peer, so the window tolerates as much
 *   reordering as 1,024 of the sender's packets (seconds at 1,000 nodes),
 *   far more than a network's. A restarted sender has a higher boot and is
 *   heard at once.
 * - No wall clock decides. A stamp window in time would drop a node whose
 *   clock is wrong, and gossip is what tells such a node (clock.c) that it
 *   is: the numbers need no clock, and the wall_ms stamp stays an estimate.
 * - Mixed versions. A node announces FRESH (key 10) and numbered packets
 *   go to every address but those of known endpoints that neither announce
 *   it nor have sent a numbered packet (older nodes refuse a longer packet
 *   as malformed; an older node relaying a newer one's state drops the key,
 *   hence the second sign); a reply to an unnumbered packet of an unknown
 *   sender goes unnumbered. An unnumbered packet is taken from a sender
 *   without either sign (or that is unknown) and dropped as a replay from
 *   one with.
 * - Replies (round.c, probe.c). A known member (an endpoint with an
 *   ADDRESS) is answered at that address, never at the datagram's source,
 *   which anybody can write. A sender that is not one is answered at the
 *   source, but only with as many bytes as its packet took (a SYN gets its
 *   requests, no deltas; a probe reply no rumors), and whatever would take
 *   more is dropped (gossip__reply_bound, counted). A joining node is
 *   heard all the same: its SYNs to seeds carry its own state, so the seed
 *   knows it from the first one and answers the next in full at its
 *   ADDRESS, or answers the first in full when the ADDRESS the packet
 *   gives is the source it came from.
 *
 * What stays open: a receiver that restarted has forgotten the numbers,
 * so packets captured from a sender's current boot are taken once each
 * by it; they are answered at the sender's gossiped address (or with no
 * more bytes than they took) and the version rules (gossip.c) make their
 * content harmless. Packets of nodes that predate numbers are not
 * protected. Nothing here is secret: gossip is authenticated, not
 * encrypted.
 */
#include <stdlib.h>
#include <string.h>

#include "gossip/gossip.h"
#include "gossip/gossip_internal.h"
#include "wire/gossip_probe.h"

_Static_assert(GOSSIP__FRESH_WINDOW % 64 == 0, "whole words");

int gossip__fresh_init(gossip *g, const struct gossip_config *cfg)
{
    g->numbered = cfg->numbered;
    return g->numbered ? gossip__own_u64_set(g, GOSSIP_KEY_FRESH, 1) : 0;
}

/* e announces FRESH, or has sent a numbered packet itself. */
static bool reads_numbers(const struct gossip__ep *e)
{
    return e->st[GOSSIP_KEY_FRESH].len > 0 || e->numbers;
}

bool gossip__fresh_stamp(gossip *g,
                         const char *to,
                         uint64_t *boot,
                         uint64_t *seq)
{
    if (!g->numbered)
        return false;
    const struct gossip__ep *e = gossip__ep_at(g, to);
    if (e != NULL ? !reads_numbers(e)
                  : g->plain_to != NULL && strcmp(g->plain_to, to) == 0)
        return false;
    *boot = g->eps[0].generation;
    *seq = ++g->fresh_seq;
    return true;
}

static bool seen_bit(const struct gossip__ep *e, uint64_t seq)
{
    uint64_t i = seq % GOSSIP__FRESH_WINDOW;
    return (e->fresh_seen[i / 64] >> (i % 64)) & 1u;
}

static void seen_set(struct gossip__ep *e, uint64_t seq)
{
    uint64_t i = seq % GOSSIP__FRESH_WINDOW;
    e->fresh_seen[i / 64] |= UINT64_C(1) << (i % 64);
}

bool gossip__fresh_replayed(const gossip *g,
                            struct rk_slice sender,
                            uint64_t boot,
                            uint64_t seq)
{
    long idx = gossip__ep_find(g, sender.p, sender.len);
    if (!g->numbered || idx <= 0)
        return false; /* as before numbers; unknown: nothing to compare */
    const struct gossip__ep *e = &g->eps[idx];
    if (boot == 0)
        return reads_numbers(e);
    if (e->fresh_boot == 0 || boot > e->fresh_boot)
        return false; /* first heard, or restarted */
    if (boot < e->fresh_boot)
        return true; /* a packet of a life before */
    if (seq > e->fresh_top)
        return false;
    return e->fresh_top - seq >= GOSSIP__FRESH_WINDOW || seen_bit(e, seq);
}

void gossip__fresh_seen(gossip *g,
                        struct rk_slice sender,
                        uint64_t boot,
                        uint64_t seq)
{
    long idx = gossip__ep_find(g, sender.p, sender.len);
    if (idx <= 0 || boot == 0)
        return;
    struct gossip__ep *e = &g->eps[idx];
    e->numbers = true;
    if (boot != e->fresh_boot) {
        /* first heard, or restarted (gossip__fresh_replayed let it in) */
        e->fresh_boot = boot;
        e->fresh_top = seq;
        memset(e->fresh_seen, 0, sizeof(e->fresh_seen));
    } else if (seq > e->fresh_top) {
        /* forget the seqs the window moves past */
        uint64_t d = seq - e->fresh_top;
        if (d >= GOSSIP__FRESH_WINDOW) {
            memset(e->fresh_seen, 0, sizeof(e->fresh_seen));
        } else {
            for (uint64_t s = e->fresh_top + 1; s <= seq; s++) {
                uint64_t i = s % GOSSIP__FRESH_WINDOW;
                e->fresh_seen[i / 64] &= ~(UINT64_C(1) << (i % 64));
            }
        }
        e->fresh_top = seq;
    }
    seen_set(e, seq);
}

void gossip__reply_bound(gossip *g,
                         struct gossip_out *out,
                         const char *from,
                         size_t limit)
{
    size_t bytes = 0;
    for (size_t i = 0; i < out->n_pkts; i++)
        if (strcmp(out->pkts[i].to, from) == 0)
            bytes += out->pkts[i].len;
    if (bytes <= limit)
        return;
    size_t kept = 0;
    for (size_t i = 0; i < out->n_pkts; i++) {
        struct gossip_packet *p = &out->pkts[i];
        if (strcmp(p->to, from) == 0) {
            g->stats.replies_withheld++;
            g->stats.tx_packets--;
            g->stats.tx_bytes -= p->len;
            if (wire_probe_is(p->buf, p->len))
                g->stats.tx_probe--;
            free(p->buf);
        } else {
            out->pkts[kept++] = *p;
        }
    }
    out->n_pkts = kept;
}
