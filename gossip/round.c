/*
 * round.c - the gossip round (gossip.h: gossip_recv, gossip_tick): packets
 * built from digests and deltas within max_packet, deltas applied under the
 * version rules, the SYN / ACK / ACK2 exchange, and the tick that starts a
 * round, marks endpoints down and evicts expired ones. gossip.c has the
 * endpoint table, the failure detector, epochs, this node's own states and
 * the queries.
 *
 * Apart from gossip.c because this is the protocol between nodes, while
 * gossip.c is the state it exchanges; gossip_internal.h is what both
 * share. The design notes (one version counter per endpoint, deltas in
 * chunks, first-hand state as proof of life) are gossip.c's opening
 * comment.
 */
#include <assert.h>
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "gossip/gossip.h"
#include "gossip/gossip_internal.h"
#include "wire/gossip_msg.h"
#include "wire/gossip_probe.h"
#include "wire/wire.h"

#define LOCAL_PAUSE_TICKS 5 /* a tick this late means we were paused */

/* ---- building packets ---------------------------------------------------- */

/* Accumulates digests and deltas of one message type for one destination and
 * cuts a packet whenever the next item would not fit in max_packet. */
struct builder {
    gossip *g;
    enum wire_gossip_type type;
    const char *to;
    uint64_t wall; /* the stamp of every packet (0: none) */
    struct gossip_out *out;
    size_t used; /* bytes the current packet will take (upper bound) */
    struct wire_gossip_digest *dg;
    size_t n_dg, cap_dg;
    struct wire_gossip_delta *dl;
    size_t *dl_first; /* index of each delta's first state in st */
    size_t n_dl, cap_dl;
    struct wire_gossip_state *st;
    size_t n_st, cap_st;
};

size_t gossip__builder_base(const gossip *g)
{
    /* with room for a stamp and numbers, whoever the packet is for */
    return wire_gossip_size_base(g->cluster_len, g->eps[0].name_len,
                                 WIRE_GOSSIP_MAX_DIGESTS,
                                 WIRE_GOSSIP_MAX_DELTAS) +
           wire_gossip_size_clock(UINT64_MAX) +
           wire_gossip_size_fresh(UINT64_MAX, UINT64_MAX);
}

static void builder_init(struct builder *b,
                         gossip *g,
                         enum wire_gossip_type type,
                         const char *to,
                         struct gossip_out *out)
{
    memset(b, 0, sizeof(*b));
    b->g = g;
    b->type = type;
    b->to = to;
    b->wall = gossip__clock_stamp(g, to);
    b->out = out;
    b->used = gossip__builder_base(g);
}

static void builder_free(struct builder *b)
{
    free(b->dg);
    free(b->dl);
    free(b->dl_first);
    free(b->st);
}

static bool builder_empty(const struct builder *b)
{
    return b->n_dg == 0 && b->n_dl == 0;
}

static int builder_flush(struct builder *b)
{
    gossip *g = b->g;
    if (builder_empty(b))
        return 0;
    for (size_t i = 0; i < b->n_dl; i++)
        b->dl[i].states = b->dl[i].n_states ? &b->st[b->dl_first[i]] : NULL;
    struct wire_gossip_msg m = {
        .type = b->type,
        .cluster = RK_SLICE(g->cluster, g->cluster_len),
        .from = RK_SLICE(g->eps[0].name, g->eps[0].name_len),
        .digests = b->dg,
        .n_digests = b->n_dg,
        .deltas = b->dl,
        .n_deltas = b->n_dl,
        .wall_ms = b->wall,
    };
    gossip__fresh_stamp(g, b->to, &m.boot, &m.seq);
    uint8_t *buf;
    size_t len;
    int rc = wire_gossip_msg_encode(&buf, &len, &m, &g->key);
    b->n_dg = b->n_dl = b->n_st = 0;
    b->used = gossip__builder_base(g);
    if (rc != 0)
        return rc;
    /* The size accounting is an upper bound of the encoder's output. */
    assert(len <= g->max_packet);
    g->stats.tx_packets++;
    g->stats.tx_bytes += len;
    return gossip__pkt_push(b->out, b->to, buf, len);
}

static int builder_digest(struct builder *b,
                          struct rk_slice node,
                          uint64_t generation,
                          uint64_t version)
{
    struct wire_gossip_digest d = {node, generation, version};
    size_t sz = wire_gossip_size_digest(&d);
    if ((b->used + sz > b->g->max_packet ||
         b->n_dg == WIRE_GOSSIP_MAX_DIGESTS) &&
        !builder_empty(b)) {
        int rc = builder_flush(b);
        if (rc != 0)
            return rc;
    }
    if (b->n_dg == b->cap_dg) {
        size_t cap = b->cap_dg ? b->cap_dg * 2 : 64;
        struct wire_gossip_digest *p = realloc(b->dg, cap * sizeof(*p));
        if (p == NULL)
            return -ENOMEM;
        b->dg = p;
        b->cap_dg = cap;
    }
    b->dg[b->n_dg++] = d;
    b->used += sz;
    return 0;
}

static int builder_reserve_delta(struct builder *b, size_t n_states)
{
    if (b->n_dl == b->cap_dl) {
        size_t cap = b->cap_dl ? b->cap_dl * 2 : 16;
        struct wire_gossip_delta *p = realloc(b->dl, cap * sizeof(*p));
        if (p == NULL)
            return -ENOMEM;
        b->dl = p;
        size_t *f = realloc(b->dl_first, cap * sizeof(*f));
        if (f == NULL)
            return -ENOMEM;
        b->dl_first = f;
        b->cap_dl = cap;
    }
    if (b->n_st + n_states > b->cap_st) {
        size_t cap = b->cap_st ? b->cap_st : 64;
        while (cap < b->n_st + n_states)
            cap *= 2;
        struct wire_gossip_state *p = realloc(b->st, cap * sizeof(*p));
        if (p == NULL)
            return -ENOMEM;
        b->st = p;
        b->cap_st = cap;
    }
    return 0;
}

/* Adds endpoint e's states with version > base, split in version order over
 * as many packets as needed. An endpoint with one state larger than a packet
 * (only possible if a peer uses a larger max_packet) is skipped. */
static int
builder_delta(struct builder *b, const struct gossip__ep *e, uint64_t base)
{
    struct wire_gossip_state sorted[GOSSIP_KEY_COUNT];
    size_t n = 0;
    for (unsigned k = 0; k < GOSSIP_KEY_COUNT; k++) {
        if (e->st[k].version <= base || e->st[k].version == 0)
            continue;
        struct wire_gossip_state s = {k, e->st[k].version,
                                      RK_SLICE(e->st[k].val, e->st[k].len)};
        size_t j = n++;
        while (j > 0 && sorted[j - 1].version > s.version) {
            sorted[j] = sorted[j - 1];
            j--;
        }
        sorted[j] = s;
    }
    int rc = builder_reserve_delta(b, n);
    if (rc != 0)
        return rc;
    struct wire_gossip_delta head = {
        .node = RK_SLICE(e->name, e->name_len),
        .generation = e->generation,
        .base = base,
        .top = e->version,
    };
    size_t head_sz = wire_gossip_size_delta_head(&head, WIRE_GOSSIP_MAX_STATES);
    size_t i = 0;
    for (;;) {
        if ((b->used + head_sz > b->g->max_packet ||
             b->n_dl == WIRE_GOSSIP_MAX_DELTAS) &&
            !builder_empty(b)) {
            rc = builder_flush(b);
            if (rc != 0)
                return rc;
        }
        size_t used = b->used + head_sz, first = i;
        while (i < n &&
               used + wire_gossip_size_state(&sorted[i]) <= b->g->max_packet) {
            used += wire_gossip_size_state(&sorted[i]);
            i++;
        }
        if (i == first && i < n) {
            if (builder_empty(b))
                return 0; /* a single state that can never fit: skip */
            rc = builder_flush(b);
            if (rc != 0)
                return rc;
            continue;
        }
        struct wire_gossip_delta *d = &b->dl[b->n_dl];
        *d = head;
        d->top = i == n ? e->version : sorted[i - 1].version;
        d->n_states = i - first;
        b->dl_first[b->n_dl] = b->n_st;
        if (i > first)
            memcpy(&b->st[b->n_st], &sorted[first],
                   (i - first) * sizeof(sorted[0]));
        b->n_st += i - first;
        b->n_dl++;
        b->used = used;
        if (i == n)
            return 0;
        head.base = d->top;
        rc = builder_flush(b);
        if (rc != 0)
            return rc;
    }
}

/* Does the holder of (gen, version) lack something of e? *base gets where
 * the delta starts. */
static bool delta_wanted(const struct gossip__ep *e,
                         uint64_t gen,
                         uint64_t version,
                         uint64_t *base)
{
    if (e->generation > gen) {
        *base = 0;
        return true;
    }
    if (e->generation == gen && e->version > version) {
        *base = version;
        return true;
    }
    return false;
}

/* ---- applying deltas ----------------------------------------------------- */

struct recv_ctx {
    gossip *g;
    uint64_t now;
    struct rk_slice sender;
    struct gossip_out *out;
    bool membership;
    const char *src; /* the datagram's source address */
    bool known;      /* the sender is a known member: replies go to... */
    char reply[GOSSIP_ADDR_MAX + 1]; /* ...its gossiped address */
};

static int apply_delta(struct recv_ctx *c, const struct wire_gossip_delta *d)
{
    gossip *g = c->g;
    struct gossip_out *out = c->out;
    if (d->generation == 0 ||
        gossip__slice_eq_str(d->node, g->eps[0].name, g->eps[0].name_len))
        goto ignored; /* we are the only authority on ourselves */
    const struct gossip__tomb *tomb =
        gossip__tomb_find(g, d->node.p, d->node.len);
    if (tomb != NULL && d->generation <= tomb->generation)
        goto ignored;
    bool created = false, restarted = false;
    long idx = gossip__ep_find(g, d->node.p, d->node.len);
    if (idx < 0) {
        if (d->base != 0)
            goto ignored; /* need the whole state first */
        size_t ni;
        if (gossip__ep_add(g, d->node.p, d->node.len, &ni) != 0)
            return -ENOMEM;
        idx = (long)ni;
        g->eps[idx].generation = d->generation;
        created = true;
    } else {
        struct gossip__ep *e = &g->eps[idx];
        if (d->generation < e->generation ||
            (e->quarantined && d->generation != e->generation))
            goto ignored;
        if (d->generation > e->generation) {
            if (d->base != 0)
                goto ignored;
            gossip__ep_clear_states(e);
            e->generation = d->generation;
            e->version = 0;
            e->status = GOSSIP_STATUS_UNKNOWN;
            e->status_epoch = 0;
            gossip__fd_reset(e);
            gossip__probe_reset(g, e, c->now);
            e->numbers = false; /* a new life: maybe another version */
            restarted = true;
        } else if (d->base > e->version || d->top <= e->version) {
            goto ignored; /* a gap, or nothing new (replay, duplicate) */
        }
    }
    struct gossip__ep *e = &g->eps[idx];
    bool changed[GOSSIP_KEY_COUNT] = {false};
    for (size_t i = 0; i < d->n_states; i++) {
        const struct wire_gossip_state *s = &d->states[i];
        if (s->key >= GOSSIP_KEY_COUNT || s->version <= e->st[s->key].version)
            continue;
        if (gossip__ep_store(e, s->key, s->version, s->value.p, s->value.len) !=
            0)
            return -ENOMEM;
        changed[s->key] = true;
    }
    e->version = d->top;
    g->stats.deltas_applied++;

    if ((created && gossip__ev_push(out, GOSSIP_EV_JOINED, e->name) == NULL) ||
        (restarted &&
         gossip__ev_push(out, GOSSIP_EV_RESTARTED, e->name) == NULL))
        return -ENOMEM;
    if (created || restarted)
        c->membership = true;
    for (unsigned k = 0; k < GOSSIP_KEY_COUNT; k++) {
        if (!changed[k])
            continue;
        struct gossip_event *ev =
            gossip__ev_push(out, GOSSIP_EV_STATE, e->name);
        if (ev == NULL)
            return -ENOMEM;
        ev->key = (enum gossip_key)k;
        if (gossip__is_membership_key(k))
            c->membership = true;
        if (k == GOSSIP_KEY_STATUS) {
            int rc = gossip__status_applied(g, e, false, c->now, out);
            if (rc != 0)
                return rc;
        } else if (k == GOSSIP_KEY_RING_EPOCH) {
            uint64_t ep;
            if (gossip__parse_u64(&ep, e->st[k].val, e->st[k].len) == 0)
                gossip__epoch_seen(g, ep);
        } else if (k == GOSSIP_KEY_INCARNATION) {
            int rc = gossip__probe_inc_learned(g, e, c->now, out);
            if (rc != 0)
                return rc;
        }
    }
    if (e->quarantined)
        return 0;
    bool first_hand = gossip__slice_eq_str(c->sender, e->name, e->name_len);
    if (created && !first_hand)
        return 0; /* hearsay: wait for a fresher heartbeat */
    if (restarted && !first_hand) {
        /* Hearsay too, and maybe not the node's own: removenode re-issues
         * a dead node's state under generation + 1 (gossip_peer_status_set).
         * The detector starts over from now, but only the node's next
         * heartbeat marks it UP. Until 2026-12-04 the re-issue marked a
         * dead node UP on every node but the one that made it. */
        gossip__fd_sample(e, 2u * g->interval_ms);
        e->has_arrival = true;
        e->last_arrival = c->now;
        return 0;
    }
    return gossip__fd_arrival(g, e, c->now, out);

ignored:
    g->stats.deltas_ignored++;
    return 0;
}

/* ---- where replies go (fresh.c) ----------------------------------------- */

/* Whether the endpoint `name` is a known member: one with a gossip
 * address, copied into addr. */
static bool member_addr(const gossip *g, struct rk_slice name, char *addr)
{
    long idx = gossip__ep_find(g, name.p, name.len);
    const char *a = idx > 0 ? gossip__ep_addr(&g->eps[idx]) : NULL;
    if (a == NULL)
        return false;
    memcpy(addr, a, strlen(a) + 1);
    return true;
}

/* Where the replies to c's packet go: the sender's gossiped address (as
 * the table holds it now: the packet may have moved it) if it was a known
 * member, or became one through this packet and gave as its ADDRESS the
 * source the packet came from; else the source, with the replies bounded
 * by gossip_recv. */
static const char *reply_to(struct recv_ctx *c)
{
    char addr[GOSSIP_ADDR_MAX + 1];
    if (!member_addr(c->g, c->sender, addr))
        return c->known ? c->reply : c->src;
    if (!c->known && strcmp(addr, c->src) == 0) {
        c->known = true;
        c->g->bare_to = c->g->plain_to = NULL;
    }
    if (c->known)
        memcpy(c->reply, addr, strlen(addr) + 1);
    return c->known ? c->reply : c->src;
}

/* ---- the round ----------------------------------------------------------- */

/* A SYN to `to`: every endpoint's digest (maybe several packets), and, with
 * `push`, this node's whole state: a seed that has not heard of this node
 * learns it from the SYN itself (fresh.c). */
static int
syn_build(gossip *g, const char *to, bool push, struct gossip_out *out)
{
    struct builder b;
    int rc = 0;
    builder_init(&b, g, WIRE_GOSSIP_SYN, to, out);
    for (size_t i = 0; i < g->n_eps && rc == 0; i++) {
        const struct gossip__ep *e = &g->eps[i];
        rc = builder_digest(&b, RK_SLICE(e->name, e->name_len), e->generation,
                            e->version);
    }
    if (rc == 0 && push)
        rc = builder_delta(&b, &g->eps[0], 0);
    if (rc == 0)
        rc = builder_flush(&b);
    builder_free(&b);
    return rc;
}

/* Whether a SYN leaves out an endpoint this node knows (itself included)
 * and does not quarantine: its sender has not heard of that one. */
static bool syn_lacks(const gossip *g, const struct wire_gossip_msg *m)
{
    size_t known = 0, listed = 0;
    for (size_t i = 0; i < g->n_eps; i++)
        known += !g->eps[i].quarantined;
    for (size_t i = 0; i < m->n_digests; i++) {
        const struct wire_gossip_digest *d = &m->digests[i];
        long idx = gossip__ep_find(g, d->node.p, d->node.len);
        listed += d->generation != 0 && idx >= 0 && !g->eps[idx].quarantined;
    }
    return listed < known;
}

/* An ACK answers only for the endpoints a SYN lists, so a node learns of
 * a new one only from a SYN that lists it: one of the nodes that know it
 * must pick it as a target, which can take several rounds (in a cluster of
 * four, with each of the others picking one of its three peers, no SYN
 * reaches a given node in a round with probability (2/3)^3, about 3 in 10).
 * Meanwhile it has heard of the new node's epoch through the others' RING_EPOCH
 * and its ring is stale: its requests wait (coord/coord.c). So a node whose SYN
 * misses endpoints gets a SYN back at once, and asks for them in its ACK. At
 * most one per sender per half interval: a sender that cannot take an endpoint
 * (a tombstone) would otherwise be sent one per SYN, and two such nodes would
 * SYN each other back and forth. */
static int syn_back(struct recv_ctx *c,
                    const struct wire_gossip_msg *m,
                    const char *reply_to)
{
    gossip *g = c->g;
    if (!syn_lacks(g, m))
        return 0;
    long idx = gossip__ep_find(g, c->sender.p, c->sender.len);
    if (idx > 0) {
        struct gossip__ep *e = &g->eps[idx];
        if (e->syn_back_sent && c->now - e->syn_back_ms < g->interval_ms / 2)
            return 0;
        e->syn_back_sent = true;
        e->syn_back_ms = c->now;
    }
    g->stats.syn_back++;
    return syn_build(g, reply_to, false, c->out);
}

static int handle_syn(struct recv_ctx *c, const struct wire_gossip_msg *m)
{
    gossip *g = c->g;
    struct builder b;
    int rc = 0;
    /* the sender's own state, which a SYN to a seed carries */
    for (size_t i = 0; i < m->n_deltas && rc == 0; i++)
        if (gossip__slice_eq_str(m->deltas[i].node, (const char *)c->sender.p,
                                 c->sender.len))
            rc = apply_delta(c, &m->deltas[i]);
    if (rc != 0)
        return rc;
    const char *to = reply_to(c);
    builder_init(&b, g, WIRE_GOSSIP_ACK, to, c->out);
    /* Requests first, so they go out even if deltas need many packets. */
    for (size_t i = 0; i < m->n_digests && rc == 0; i++) {
        const struct wire_gossip_digest *d = &m->digests[i];
        if (d->generation == 0 ||
            gossip__slice_eq_str(d->node, g->eps[0].name, g->eps[0].name_len))
            continue;
        const struct gossip__tomb *t =
            gossip__tomb_find(g, d->node.p, d->node.len);
        if (t != NULL && d->generation <= t->generation)
            continue;
        long idx = gossip__ep_find(g, d->node.p, d->node.len);
        if (idx < 0) {
            rc = builder_digest(&b, d->node, 0, 0);
            continue;
        }
        const struct gossip__ep *e = &g->eps[idx];
        if (e->quarantined && d->generation > e->generation)
            continue;
        if (d->generation > e->generation ||
            (d->generation == e->generation && d->version > e->version))
            rc = builder_digest(&b, d->node, e->generation, e->version);
    }
    /* To a sender that is not a known member, the requests alone: they
     * take fewer bytes than its digests did (gossip_recv's bound). */
    for (size_t i = 0; i < m->n_digests && rc == 0 && c->known; i++) {
        const struct wire_gossip_digest *d = &m->digests[i];
        long idx = gossip__ep_find(g, d->node.p, d->node.len);
        uint64_t base;
        if (d->generation == 0 || idx < 0)
            continue;
        if (delta_wanted(&g->eps[idx], d->generation, d->version, &base))
            rc = builder_delta(&b, &g->eps[idx], base);
    }
    if (rc == 0)
        rc = builder_flush(&b);
    builder_free(&b);
    if (rc == 0 && c->known)
        rc = syn_back(c, m, to);
    return rc;
}

static int handle_ack(struct recv_ctx *c, const struct wire_gossip_msg *m)
{
    gossip *g = c->g;
    int rc = 0;
    for (size_t i = 0; i < m->n_deltas && rc == 0; i++)
        rc = apply_delta(c, &m->deltas[i]);
    if (rc != 0)
        return rc;
    struct builder b;
    builder_init(&b, g, WIRE_GOSSIP_ACK2, reply_to(c), c->out);
    for (size_t i = 0; i < m->n_digests && rc == 0; i++) {
        const struct wire_gossip_digest *d = &m->digests[i];
        long idx = gossip__ep_find(g, d->node.p, d->node.len);
        uint64_t base;
        if (idx >= 0 &&
            delta_wanted(&g->eps[idx], d->generation, d->version, &base))
            rc = builder_delta(&b, &g->eps[idx], base);
    }
    if (rc == 0)
        rc = builder_flush(&b);
    builder_free(&b);
    return rc;
}

static int packet_event(struct gossip_out *out,
                        enum gossip_event_type type,
                        const char *from,
                        int err)
{
    struct gossip_event *ev = gossip__ev_push(out, type, NULL);
    if (ev == NULL)
        return -ENOMEM;
    gossip__copy_name(ev->addr, sizeof(ev->addr), from, strlen(from));
    ev->err = err;
    return 0;
}

/* Decode a packet of either family, count and report what fails, and drop
 * packets of another cluster and our own. *kept says whether one of the
 * two messages now holds a packet to handle (release it). */
static int recv_decode(gossip *g,
                       const char *from,
                       const uint8_t *pkt,
                       size_t len,
                       struct wire_gossip_msg *m,
                       struct wire_probe_msg *pm,
                       bool *kept,
                       struct gossip_out *out)
{
    bool probe = wire_probe_is(pkt, len);
    *kept = false;
    int rc = probe ? wire_probe_msg_decode(pm, &g->key, pkt, len)
                   : wire_gossip_msg_decode(m, &g->key, pkt, len);
    if (rc == -ENOMEM)
        return rc;
    if (rc == 0) {
        struct rk_slice cluster = probe ? pm->cluster : m->cluster;
        struct rk_slice sender = probe ? pm->from : m->from;
        if (!gossip__slice_eq_str(cluster, g->cluster, g->cluster_len)) {
            g->stats.rx_wrong_cluster++;
            rc = RK_EAUTH;
        } else if (gossip__slice_eq_str(sender, g->eps[0].name,
                                        g->eps[0].name_len)) {
            rc = 1; /* our own packet (a seed is us) */
        } else {
            *kept = true;
            return 0;
        }
        wire_probe_msg_release(pm);
        wire_gossip_msg_release(m);
        if (rc == 1)
            return 0;
    } else if (rc == RK_EAUTH) {
        g->stats.rx_auth_fail++;
    } else {
        g->stats.rx_malformed++;
    }
    int erc = packet_event(
        out, rc == RK_EAUTH ? GOSSIP_EV_AUTH_FAIL : GOSSIP_EV_BAD_PACKET, from,
        rc);
    return erc != 0 ? erc : rc;
}

/* A packet of `sender` dropped as a replay: counted and reported. */
static int replayed(gossip *g,
                    const char *from,
                    struct rk_slice sender,
                    struct gossip_out *out)
{
    g->stats.rx_replayed++;
    struct gossip_event *ev = gossip__ev_push(out, GOSSIP_EV_REPLAYED, NULL);
    if (ev == NULL)
        return -ENOMEM;
    gossip__copy_name(ev->name, sizeof(ev->name), sender.p, sender.len);
    gossip__copy_name(ev->addr, sizeof(ev->addr), from, strlen(from));
    return 0;
}

/* A SYN, ACK or ACK2 taken (not a replay). */
static int recv_gossip(struct recv_ctx *c, const struct wire_gossip_msg *m)
{
    gossip *g = c->g;
    int rc = 0;
    switch (m->type) {
    case WIRE_GOSSIP_SYN:
        g->stats.rx_syn++;
        rc = handle_syn(c, m);
        break;
    case WIRE_GOSSIP_ACK:
        g->stats.rx_ack++;
        rc = handle_ack(c, m);
        break;
    case WIRE_GOSSIP_ACK2:
        g->stats.rx_ack2++;
        for (size_t i = 0; i < m->n_deltas && rc == 0; i++)
            rc = apply_delta(c, &m->deltas[i]);
        break;
    }
    /* the sender, as the table holds it now (the deltas may have added it) */
    long idx = gossip__ep_find(g, m->from.p, m->from.len);
    if (rc == 0 && idx > 0)
        rc = gossip__probe_first_hand(g, &g->eps[idx], c->now, reply_to(c),
                                      c->out);
    if (rc == 0 && idx > 0)
        gossip__clock_sample(g, (size_t)idx, c->now, m->wall_ms);
    if (rc == 0 && c->membership &&
        gossip__ev_push(c->out, GOSSIP_EV_MEMBERSHIP, NULL) == NULL)
        rc = -ENOMEM;
    if (rc == 0)
        rc = gossip__own_ring_epoch_sync(g);
    if (rc == 0)
        rc = gossip__stale_check(g, c->out);
    return rc;
}

static int recv_packet(gossip *g,
                       uint64_t now_ms,
                       const char *from,
                       const uint8_t *pkt,
                       size_t len,
                       struct gossip_out *out)
{
    gossip_out_clear(out);
    g->stats.rx_packets++;
    g->stats.rx_bytes += len;
    if (from == NULL || from[0] == '\0' || strlen(from) > GOSSIP_ADDR_MAX) {
        g->stats.rx_malformed++;
        return RK_EPROTO;
    }
    struct wire_gossip_msg m;
    struct wire_probe_msg pm;
    memset(&m, 0, sizeof(m));
    memset(&pm, 0, sizeof(pm));
    bool kept;
    int rc = recv_decode(g, from, pkt, len, &m, &pm, &kept, out);
    if (rc != 0 || !kept)
        return rc;
    bool probe = pm.owned_ != 0;
    struct rk_slice sender = probe ? pm.from : m.from;
    uint64_t boot = probe ? pm.boot : m.boot;
    uint64_t seq = probe ? pm.pkt_seq : m.seq;
    struct recv_ctx c = {
        .g = g, .now = now_ms, .sender = sender, .out = out, .src = from};
    if (gossip__fresh_replayed(g, sender, boot, seq)) {
        rc = replayed(g, from, sender, out);
        goto release;
    }
    c.known = member_addr(g, sender, c.reply);
    if (!c.known) {
        /* replies to the source: bounded, and unnumbered if it was */
        g->bare_to = from;
        g->plain_to = boot == 0 ? from : NULL;
    }
    rc = probe ? gossip__probe_recv(g, now_ms, reply_to(&c), &pm, out)
               : recv_gossip(&c, &m);
    gossip__fresh_seen(g, sender, boot, seq);
    if (!c.known)
        gossip__reply_bound(g, out, from, len);
    g->bare_to = g->plain_to = NULL;
release:
    wire_probe_msg_release(&pm);
    wire_gossip_msg_release(&m);
    return rc;
}

int gossip_recv(gossip *g,
                uint64_t now_ms,
                const char *from,
                const uint8_t *pkt,
                size_t len,
                struct gossip_out *out)
{
    int rc = recv_packet(g, now_ms, from, pkt, len, out);
    g->arrival_ms = 0; /* gossip_arrival_set's holds for one packet */
    return rc;
}

static bool is_seed(const gossip *g, const char *addr)
{
    for (size_t i = 0; i < g->n_seeds; i++)
        if (strcmp(g->seeds[i], addr) == 0)
            return true;
    return false;
}

static int evict_expired(gossip *g, uint64_t now, struct gossip_out *out)
{
    bool evicted = false;
    for (size_t i = g->n_eps; i-- > 1;) {
        struct gossip__ep *e = &g->eps[i];
        if (!e->quarantined || now < e->quarantine_until)
            continue;
        struct gossip__tomb *t = gossip__tomb_find(g, e->name, e->name_len);
        if (t == NULL) {
            if (g->n_tombs == g->cap_tombs) {
                size_t cap = g->cap_tombs ? g->cap_tombs * 2 : 8;
                struct gossip__tomb *p = realloc(g->tombs, cap * sizeof(*p));
                if (p == NULL)
                    return -ENOMEM;
                g->tombs = p;
                g->cap_tombs = cap;
            }
            t = &g->tombs[g->n_tombs++];
            memcpy(t->name, e->name, e->name_len + 1);
            t->generation = 0;
        }
        if (e->generation > t->generation)
            t->generation = e->generation;
        if (gossip__ev_push(out, GOSSIP_EV_EVICTED, e->name) == NULL)
            return -ENOMEM;
        gossip__probe_reset(g, e, now);
        gossip__ep_clear_states(e);
        g->eps[i] = g->eps[g->n_eps - 1];
        g->n_eps--;
        evicted = true;
    }
    return evicted ? gossip__index_rebuild(g, g->n_eps) : 0;
}

int gossip_tick(gossip *g, uint64_t now_ms, struct gossip_out *out)
{
    gossip_out_clear(out);
    bool paused =
        g->ticked && now_ms > g->last_tick &&
        now_ms - g->last_tick > (uint64_t)LOCAL_PAUSE_TICKS * g->interval_ms;
    g->ticked = true;
    g->last_tick = now_ms;
    g->stats.rounds++;
    g->eps[0].version++; /* heartbeat */

    /* Failure detection. After a local pause (our own stall, not theirs)
     * nobody is convicted and the clocks restart. */
    for (size_t i = 1; i < g->n_eps; i++) {
        struct gossip__ep *e = &g->eps[i];
        if (paused && e->has_arrival) {
            e->last_arrival = now_ms;
            continue;
        }
        if (e->up && gossip__fd_phi(e, now_ms) > g->phi_threshold) {
            e->up = false;
            if (gossip__ev_push(out, GOSSIP_EV_DOWN, e->name) == NULL)
                return -ENOMEM;
        }
    }
    int rc = evict_expired(g, now_ms, out);
    if (rc != 0)
        return rc;
    rc = gossip__hearsay_check(g, now_ms, out);
    if (rc != 0)
        return rc;
    rc = gossip__stale_check(g, out);
    if (rc != 0)
        return rc;

    /* Choose targets: a live peer; a down one with probability
     * down / (live + 1); a seed as Cassandra does. */
    size_t n_live = 0, n_down = 0;
    size_t *live = malloc(g->n_eps * sizeof(*live));
    size_t *down = malloc(g->n_eps * sizeof(*down));
    if (live == NULL || down == NULL) {
        rc = -ENOMEM;
        goto free_lists;
    }
    for (size_t i = 1; i < g->n_eps; i++) {
        const struct gossip__ep *e = &g->eps[i];
        if (e->quarantined || gossip__ep_addr(e) == NULL)
            continue;
        if (e->up)
            live[n_live++] = i;
        else
            down[n_down++] = i;
    }
    const char *self_addr = gossip__ep_addr(&g->eps[0]);
    const char *seeds[GOSSIP_SEEDS_MAX];
    size_t n_seeds = 0;
    for (size_t i = 0; i < g->n_seeds; i++)
        if (self_addr == NULL || strcmp(g->seeds[i], self_addr) != 0)
            seeds[n_seeds++] = g->seeds[i];

    const char *targets[3];
    size_t n_targets = 0;
    bool to_seed = false;
    if (n_live > 0) {
        targets[n_targets] =
            gossip__ep_addr(&g->eps[live[gossip__rng_below(g, n_live)]]);
        to_seed = is_seed(g, targets[n_targets]);
        n_targets++;
    }
    if (n_down > 0 &&
        gossip__rng_unit(g) < (double)n_down / (double)(n_live + 1))
        targets[n_targets++] =
            gossip__ep_addr(&g->eps[down[gossip__rng_below(g, n_down)]]);
    if (n_seeds > 0 && (!to_seed || n_live < n_seeds)) {
        if (n_live == 0 ||
            gossip__rng_unit(g) < (double)n_seeds / (double)(n_live + n_down)) {
            const char *s = seeds[gossip__rng_below(g, n_seeds)];
            bool dup = false;
            for (size_t i = 0; i < n_targets; i++)
                dup = dup || strcmp(targets[i], s) == 0;
            if (!dup)
                targets[n_targets++] = s;
        }
    }
    if (n_targets == 0)
        goto free_lists;

    /* A SYN of every digest to each target, built for each: stamps and
     * numbers depend on what the target reads, and a seed also gets this
     * node's own state, so that it knows this node from the first SYN
     * (fresh.c: a sender that is not a known member gets little back). */
    for (size_t t = 0; t < n_targets && rc == 0; t++)
        rc = syn_build(g, targets[t], is_seed(g, targets[t]), out);

free_lists:
    free(live);
    free(down);
    return rc;
}
