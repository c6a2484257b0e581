/*
 * probe.c - the probe failure detector: SWIM's probes, suspicion and
 * refutation with Lifeguard's refinements, as a pure state machine driven
 * by gossip_timer (its clock) and gossip_recv (its packets,
 * wire/gossip_probe.h).
 *
 * Design notes.
 * - Every probe period a node pings the next peer in its round-robin order.
 *   If no ACK comes within the probe timeout, it pings again and asks k
 *   other peers to ping on its behalf (PING_REQ); a relay forwards the ACK,
 *   or sends a NACK when it heard nothing. If nothing answers within twice
 *   the probe timeout, the node suspects the peer at the incarnation it
 *   knows, and says so in a rumor.
 * - Rumors ("origin holds node ALIVE / SUSPECT at incarnation") are pushed
 *   at once to 3 random peers by every node that learns something new from
 *   them, and ride on every probe packet afterwards until each has been
 *   sent 3 x log10(N + 1) times: a rumor crosses 1,000 nodes in a few
 *   network delays, where anti-entropy takes several rounds.
 * - A suspicion is convicted (DOWN) when it outlives a timeout that starts
 *   long (suspicion_max_ms) and shrinks towards suspicion_ms as distinct
 *   nodes confirm it, logarithmically, reaching it at 3 confirmations
 *   (Lifeguard's "local health aware suspicion"). A few of the nodes that
 *   hear a fresh suspicion probe the peer themselves (about 6 in the whole
 *   cluster, chosen at random), so a dead node collects its confirmations
 *   within one probe, while a live one, which answers them, stays at the
 *   long timeout that leaves room for its refutation.
 * - The suspected node refutes by raising its incarnation above the
 *   suspected one and spreading ALIVE (and its INCARNATION state, for
 *   anti-entropy to carry too). A node pinging a suspected or convicted
 *   peer always tells it so in the ping (Lifeguard's buddy system), and a
 *   node holding a peer convicted tells it whenever it hears from it
 *   first-hand or hears of a newer heartbeat: a node cut off and back
 *   learns what it must refute within a round trip.
 * - A conviction holds: relayed heartbeats (which go on arriving for
 *   seconds after a node dies) never bring a convicted peer back UP; only
 *   an incarnation above the convicted one or a new generation does.
 * - Lifeguard's local health multiplier: a probe that nobody answered while
 *   relays failed to NACK, or a suspicion of this node, raises it; a
 *   probe answered lowers it. Probe period and timeouts are multiplied by
 *   health + 1, so a node that is itself slow or cut off probes less and
 *   waits longer before it suspects anyone.
 * - A node that hears from a peer through anti-entropy only (an older
 *   version that does not know these packets) is never probed: phi-accrual
 *   (gossip.c) alone judges it, and no probe packet is ever sent to it.
 */
#include <errno.h>
#include <inttypes.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "gossip/gossip.h"
#include "gossip/gossip_internal.h"
#include "wire/gossip_probe.h"
#include "wire/wire.h"

#define HEALTH_MAX        8
#define RUMORS_PER_PACKET 6
#define PUSH_FANOUT       3
#define RETRANSMIT_MULT   3
#define VERIFIERS         6.0 /* nodes expected to check a fresh suspicion */
#define RUMORS_MAX        4096
#define PAUSE_PERIODS     5 /* a timer this late means we were paused */

/* ---- small helpers ------------------------------------------------------ */

static uint64_t name_hash64(const char *name, size_t len)
{
    return XXH3_64bits(name, len);
}

static struct gossip__ep *ep_by_name(gossip *g, const void *name, size_t len)
{
    long i = gossip__ep_find(g, name, len);
    return i > 0 ? &g->eps[i] : NULL;
}

/* A peer this node may send probe packets to. */
static bool probeable(const struct gossip__ep *e)
{
    return e->probes && !e->quarantined && gossip__ep_addr(e) != NULL;
}

#define SETTLE_INTERVALS 10

/* A peer this node judges by probes: UP for SETTLE_INTERVALS at least in
 * this generation. Until then the other nodes may not know it yet, so
 * indirect probes and confirmations mean little (in a cluster that forms,
 * a node's first peers were suspected and convicted falsely); phi-accrual
 * judges it meanwhile. */
static bool judged(const gossip *g, const struct gossip__ep *e, uint64_t now)
{
    return probeable(e) && e->up_first != 0 &&
           now >= e->up_first + (uint64_t)SETTLE_INTERVALS * g->interval_ms;
}

static uint64_t scaled(const gossip *g, uint64_t ms)
{
    return ms * (g->health + 1);
}

static void health_up(gossip *g)
{
    if (g->health < HEALTH_MAX)
        g->health++;
}

static void health_down(gossip *g)
{
    if (g->health > 0)
        g->health--;
}

/* A probe ended: did it need the indirect path (or fail)? The share of
 * such probes, averaged over the last 32 or so, is about 1 in 5 at 10%
 * loss and 1 in 2 at 30%. */
static void miss_sample(gossip *g, bool missed)
{
    g->direct_miss += ((missed ? 1.0 : 0.0) - g->direct_miss) / 32;
}

/* How much slower to probe and to convict on a lossy network: 1 while the
 * share of probes whose direct ping went unanswered stays at or below 1 in
 * 4, then the square of the excess, at most 8. At 30% loss a probe fails
 * outright about once in 9 times (both pings and all three relays lost):
 * at full speed the suspicions and refutations would flood the cluster and
 * some refutations would come too late. */
static double loss_factor(const gossip *g)
{
    double r = g->direct_miss / 0.25;
    return r <= 1 ? 1.0 : r * r > 8 ? 8.0 : r * r;
}

static size_t n_probeable(const gossip *g)
{
    size_t n = 0;
    for (size_t i = 1; i < g->n_eps; i++)
        n += probeable(&g->eps[i]);
    return n;
}

/* ---- rumors ------------------------------------------------------------- */

static uint32_t rumor_budget(const gossip *g)
{
    uint32_t b = RETRANSMIT_MULT * (uint32_t)ceil(log10((double)g->n_eps + 1));
    return b < 3 ? 3 : b;
}

static void rumor_drop(gossip *g, size_t i)
{
    g->rumors[i] = g->rumors[--g->n_rumors];
}

/* Queue a rumor; an older one it makes moot goes. Returns its index, or -1
 * when out of memory. */
static long rumor_add(gossip *g,
                      const char *name,
                      uint64_t generation,
                      uint64_t inc,
                      int kind,
                      const char *origin)
{
    for (size_t i = g->n_rumors; i-- > 0;) {
        struct gossip__rumor *r = &g->rumors[i];
        if (strcmp(r->name, name) != 0)
            continue;
        bool moot =
            r->generation < generation ||
            (r->generation == generation &&
             (kind == WIRE_PROBE_ALIVE
                  ? r->inc <= inc
                  : (r->kind == WIRE_PROBE_ALIVE
                         ? r->inc < inc
                         : strcmp(r->origin, origin) == 0 && r->inc <= inc)));
        if (moot)
            rumor_drop(g, i);
    }
    if (g->n_rumors == RUMORS_MAX) {
        size_t worst = 0;
        for (size_t i = 1; i < g->n_rumors; i++)
            if (g->rumors[i].left < g->rumors[worst].left)
                worst = i;
        rumor_drop(g, worst);
    }
    if (g->n_rumors == g->cap_rumors) {
        size_t cap = g->cap_rumors ? g->cap_rumors * 2 : 16;
        struct gossip__rumor *p = realloc(g->rumors, cap * sizeof(*p));
        if (p == NULL)
            return -1;
        g->rumors = p;
        g->cap_rumors = cap;
    }
    struct gossip__rumor *r = &g->rumors[g->n_rumors];
    memset(r, 0, sizeof(*r));
    gossip__copy_name(r->name, sizeof(r->name), name, strlen(name));
    gossip__copy_name(r->origin, sizeof(r->origin), origin, strlen(origin));
    r->generation = generation;
    r->inc = inc;
    r->kind = kind;
    r->left = rumor_budget(g);
    return (long)g->n_rumors++;
}

/* ---- sending ------------------------------------------------------------ */

static bool rumor_same(const struct gossip__rumor *a,
                       const struct gossip__rumor *b)
{
    return a->generation == b->generation && a->inc == b->inc &&
           a->kind == b->kind && strcmp(a->name, b->name) == 0 &&
           strcmp(a->origin, b->origin) == 0;
}

/* Forget the rumors sent as often as they should be. Indexes into
 * g->rumors stay valid until this or rumor_add runs. */
static void rumor_gc(gossip *g)
{
    for (size_t i = g->n_rumors; i-- > 0;)
        if (g->rumors[i].left == 0)
            rumor_drop(g, i);
}

static struct wire_probe_rumor wire_rumor(const struct gossip__rumor *r)
{
    return (struct wire_probe_rumor){RK_SLICE(r->name, strlen(r->name)),
                                     r->generation, r->inc,
                                     (enum wire_probe_rumor_kind)r->kind,
                                     RK_SLICE(r->origin, strlen(r->origin))};
}

/* Send one probe packet to `to` (the node `to_name`, may be NULL), carrying
 * `forced` first (a copy, may be NULL), then the queued rumors about
 * to_name, then those with most transmissions left, RUMORS_PER_PACKET in
 * all; none of the queued ones in a reply to a sender that is not a known
 * member (g->bare_to, fresh.c: its reply may take no more bytes than its
 * packet). Queued rumors sent count a transmission. */
static int send_probe_pkt(gossip *g,
                          const char *to,
                          const char *to_name,
                          enum wire_probe_type type,
                          uint64_t seq,
                          const char *target,
                          uint64_t inc,
                          const struct gossip__rumor *forced,
                          struct gossip_out *out)
{
    struct wire_probe_rumor wr[RUMORS_PER_PACKET];
    size_t pick[RUMORS_PER_PACKET];
    size_t n = 0, n_pick = 0;
    if (forced != NULL)
        wr[n++] = wire_rumor(forced);
    bool bare = g->bare_to != NULL && strcmp(g->bare_to, to) == 0;
    while (n < RUMORS_PER_PACKET && !bare) {
        long best = -1;
        uint64_t best_score = 0;
        for (size_t i = 0; i < g->n_rumors; i++) {
            const struct gossip__rumor *r = &g->rumors[i];
            bool taken =
                r->left == 0 || (forced != NULL && rumor_same(r, forced));
            for (size_t j = 0; j < n_pick && !taken; j++)
                taken = pick[j] == i;
            if (taken)
                continue;
            uint64_t score = r->left;
            if (to_name != NULL && strcmp(r->name, to_name) == 0)
                score += 1000;
            if (score > best_score) {
                best = (long)i;
                best_score = score;
            }
        }
        if (best < 0)
            break;
        pick[n_pick++] = (size_t)best;
        wr[n++] = wire_rumor(&g->rumors[best]);
    }
    struct wire_probe_msg m = {
        .type = type,
        .cluster = RK_SLICE(g->cluster, g->cluster_len),
        .from = RK_SLICE(g->eps[0].name, g->eps[0].name_len),
        .seq = seq,
        .target = RK_SLICE(target, target != NULL ? strlen(target) : 0),
        .incarnation = inc,
        .rumors = wr,
        .n_rumors = n,
    };
    gossip__fresh_stamp(g, to, &m.boot, &m.pkt_seq);
    uint8_t *buf;
    size_t len;
    /* Names and kinds come from validated state: only -ENOMEM can fail. */
    int rc = wire_probe_msg_encode(&buf, &len, &m, &g->key);
    if (rc != 0)
        return rc;
    for (size_t j = 0; j < n_pick; j++)
        g->rumors[pick[j]].left--;
    g->stats.tx_probe++;
    g->stats.tx_packets++;
    g->stats.tx_bytes += len;
    return gossip__pkt_push(out, to, buf, len);
}

/* A random live probeable peer other than `skip` (may be NULL), or NULL. */
static struct gossip__ep *random_peer(gossip *g, const struct gossip__ep *skip)
{
    if (g->n_eps < 2)
        return NULL;
    for (int tries = 0; tries < 16; tries++) {
        struct gossip__ep *e = &g->eps[1 + gossip__rng_below(g, g->n_eps - 1)];
        if (e != skip && probeable(e) && e->up)
            return e;
    }
    return NULL;
}

/* Up to `want` distinct random live probeable peers other than `skip`
 * into picked[], drawn at most `draws` times; returns how many. */
static size_t random_peers(gossip *g,
                           const struct gossip__ep *skip,
                           size_t want,
                           size_t draws,
                           struct gossip__ep **picked)
{
    size_t n = 0;
    for (size_t d = 0; d < draws && n < want; d++) {
        struct gossip__ep *e = random_peer(g, skip);
        bool dup = e == NULL;
        for (size_t j = 0; j < n && !dup; j++)
            dup = picked[j] == e;
        if (!dup)
            picked[n++] = e;
    }
    return n;
}

/* Queue a rumor and push it at once to PUSH_FANOUT random live peers. */
static int rumor_spread(gossip *g,
                        const char *name,
                        uint64_t generation,
                        uint64_t inc,
                        int kind,
                        const char *origin,
                        struct gossip_out *out)
{
    long i = rumor_add(g, name, generation, inc, kind, origin);
    if (i < 0)
        return -ENOMEM;
    struct gossip__rumor copy = g->rumors[i];
    struct gossip__ep *sent[PUSH_FANOUT];
    size_t n_sent = random_peers(g, NULL, PUSH_FANOUT, PUSH_FANOUT, sent);
    for (size_t k = 0; k < n_sent; k++) {
        int rc = send_probe_pkt(g, gossip__ep_addr(sent[k]), sent[k]->name,
                                WIRE_PROBE_NEWS, 0, NULL, 0, &copy, out);
        if (rc != 0)
            return rc;
    }
    /* sending neither adds nor drops rumors: i is still this one */
    uint32_t *left = &g->rumors[i].left;
    *left = *left > n_sent ? *left - (uint32_t)n_sent : 0;
    return 0;
}

/* ---- verdicts ----------------------------------------------------------- */

static void suspicion_clear(gossip *g, struct gossip__ep *e)
{
    if (e->suspect) {
        e->suspect = false;
        g->n_suspects--;
    }
}

/* Evidence that e lives at incarnation inc: a suspicion or conviction at a
 * lower one ends. */
static int alive_seen(gossip *g,
                      struct gossip__ep *e,
                      uint64_t inc,
                      uint64_t now,
                      struct gossip_out *out)
{
    if (inc > e->incarnation)
        e->incarnation = inc;
    if (e->suspect && inc > e->suspect_inc)
        suspicion_clear(g, e);
    if (e->convicted && inc > e->convicted_inc) {
        e->convicted = false;
        if (!e->up && !e->quarantined) {
            e->up = true;
            if (e->iv_n == 0)
                gossip__fd_sample(e, 2u * g->interval_ms);
            e->has_arrival = true;
            e->last_arrival = now; /* phi starts over */
            if (gossip__ev_push(out, GOSSIP_EV_UP, e->name) == NULL)
                return -ENOMEM;
        }
    }
    return 0;
}

/* Confirmations that shorten a suspicion most: fewer in a small cluster. */
static double confirm_k(const gossip *g)
{
    size_t others = g->n_eps > 2 ? g->n_eps - 2 : 0;
    return others < GOSSIP__CONFIRM_K ? (double)others : GOSSIP__CONFIRM_K;
}

static bool fully_confirmed(const gossip *g, const struct gossip__ep *e)
{
    double k = confirm_k(g);
    return k < 1 || (double)e->n_confirm - 1 >= k;
}

/* The Lifeguard timeout of e's suspicion, from its confirmations. */
static uint64_t suspicion_timeout(const gossip *g, const struct gossip__ep *e)
{
    double f = loss_factor(g);
    double lo = g->suspicion_ms * f, hi = g->suspicion_max_ms * f;
    double k = confirm_k(g);
    double c = e->n_confirm > 0 ? e->n_confirm - 1 : 0;
    if (fully_confirmed(g, e))
        return (uint64_t)lo;
    double t = hi - (hi - lo) * log(c + 1) / log(k + 1);
    return (uint64_t)(t < lo ? lo : t);
}

static bool confirmed_by(const struct gossip__ep *e, uint64_t h)
{
    for (uint32_t i = 0; i < e->n_confirm; i++)
        if (e->confirm[i] == h)
            return true;
    return false;
}

static int probe_start(gossip *g,
                       struct gossip__ep *e,
                       bool verify,
                       uint64_t now,
                       struct gossip_out *out);

/* `origin` suspects e at inc. Returns 0 or -ENOMEM; *news says whether it
 * told this node anything new (worth passing on). */
static int suspect_heard(gossip *g,
                         struct gossip__ep *e,
                         uint64_t inc,
                         const char *origin,
                         uint64_t now,
                         bool *news,
                         struct gossip_out *out)
{
    *news = false;
    if (inc < e->incarnation || (e->convicted && inc <= e->convicted_inc))
        return 0; /* refuted already, or convicted already */
    if (!judged(g, e, now))
        return 0; /* too new here to be judged by probes */
    e->incarnation = inc;
    uint64_t h = name_hash64(origin, strlen(origin));
    if (!e->suspect || inc > e->suspect_inc) {
        if (!e->suspect)
            g->n_suspects++;
        e->suspect = true;
        e->suspect_inc = inc;
        e->suspect_since = now;
        e->suspect_looked = false;
        e->self_confirmed = false;
        e->n_confirm = 1;
        e->confirm[0] = h;
        g->stats.suspicions++;
        *news = true;
        if (gossip__ev_push(out, GOSSIP_EV_SUSPECT, e->name) == NULL)
            return -ENOMEM;
        bool mine = strcmp(origin, g->eps[0].name) == 0;
        size_t n = n_probeable(g);
        if (!mine && n > 0 && gossip__rng_unit(g) < VERIFIERS / (double)n)
            return probe_start(g, e, true, now, out);
        return 0;
    }
    if (confirmed_by(e, h) || e->n_confirm > GOSSIP__CONFIRM_K)
        return 0;
    e->confirm[e->n_confirm++] = h;
    if (strcmp(origin, g->eps[0].name) == 0)
        e->self_confirmed = true; /* our own probe failed, after another's */
    *news = true;
    return 0;
}

/* ---- probes ------------------------------------------------------------- */

static struct gossip__probe *probe_find(gossip *g, const char *name)
{
    for (size_t i = 0; i < GOSSIP__PROBES; i++)
        if (g->probes[i].active && strcmp(g->probes[i].name, name) == 0)
            return &g->probes[i];
    return NULL;
}

/* The rumor a ping to a suspected or convicted e carries: you are
 * suspected, refute. */
static const struct gossip__rumor *
tell_rumor(gossip *g, const struct gossip__ep *e, struct gossip__rumor *r)
{
    if (!e->suspect && !e->convicted)
        return NULL;
    memset(r, 0, sizeof(*r));
    memcpy(r->name, e->name, e->name_len + 1);
    memcpy(r->origin, g->eps[0].name, g->eps[0].name_len + 1);
    r->generation = e->generation;
    r->inc = e->convicted ? e->convicted_inc : e->suspect_inc;
    r->kind = WIRE_PROBE_SUSPECT;
    return r;
}

static int
send_ping(gossip *g, struct gossip__ep *e, uint64_t seq, struct gossip_out *out)
{
    struct gossip__rumor tell;
    return send_probe_pkt(g, gossip__ep_addr(e), e->name, WIRE_PROBE_PING, seq,
                          e->name, 0, tell_rumor(g, e, &tell), out);
}

static int probe_indirect(gossip *g,
                          struct gossip__probe *p,
                          struct gossip__ep *e,
                          bool ping_again,
                          uint64_t now,
                          struct gossip_out *out);

static int probe_start(gossip *g,
                       struct gossip__ep *e,
                       bool verify,
                       uint64_t now,
                       struct gossip_out *out)
{
    if (!probeable(e) || probe_find(g, e->name) != NULL)
        return 0;
    struct gossip__probe *p = NULL;
    for (size_t i = 0; i < GOSSIP__PROBES && p == NULL; i++)
        if (!g->probes[i].active)
            p = &g->probes[i];
    if (p == NULL)
        return 0;
    memset(p, 0, sizeof(*p));
    p->active = true;
    p->verify = verify;
    memcpy(p->name, e->name, e->name_len + 1);
    p->seq = ++g->seq;
    p->inc = e->incarnation;
    p->deadline = now + scaled(g, g->probe_timeout_ms);
    g->stats.probes++;
    int rc = send_ping(g, e, p->seq, out);
    /* Checking a suspicion: no time to lose, ask the others at once, and
     * ping twice now rather than once more later, as a probe does. */
    return rc == 0 && verify ? probe_indirect(g, p, e, true, now, out) : rc;
}

/* The next peer in round-robin order over a shuffled list, shuffled anew
 * every cycle (and when the table changes), or NULL. Without the shuffle,
 * nodes that learned the table in the same order probe the same peer at
 * once and leave the others unprobed for long stretches. Returns NULL also
 * when out of memory (this period probes nobody). */
static struct gossip__ep *probe_pick(gossip *g, uint64_t now)
{
    size_t n = g->n_eps - 1;
    for (size_t k = 0; k < n + 1; k++) {
        if (g->n_order != n || g->order_pos >= g->n_order) {
            if (n > g->cap_order) {
                size_t *p = realloc(g->order, n * sizeof(*p));
                if (p == NULL)
                    return NULL;
                g->order = p;
                g->cap_order = n;
            }
            for (size_t i = 0; i < n; i++)
                g->order[i] = i + 1;
            for (size_t i = n; i > 1; i--) {
                size_t j = gossip__rng_below(g, i);
                size_t t = g->order[i - 1];
                g->order[i - 1] = g->order[j];
                g->order[j] = t;
            }
            g->n_order = n;
            g->order_pos = 0;
        }
        if (n == 0)
            return NULL;
        struct gossip__ep *e = &g->eps[g->order[g->order_pos++]];
        if (judged(g, e, now) && probe_find(g, e->name) == NULL)
            return e;
    }
    return NULL;
}

/* This node's own probe of e, started when e was at incarnation inc,
 * failed: suspect it at inc (or confirm). A refutation heard since (a node
 * thawed while the probe ran) makes it stale. */
static int probe_failed(gossip *g,
                        struct gossip__ep *e,
                        uint64_t inc,
                        uint64_t now,
                        struct gossip_out *out)
{
    g->stats.probes_failed++;
    if (e->convicted)
        return 0;
    bool news;
    int rc = suspect_heard(g, e, inc, g->eps[0].name, now, &news, out);
    if (rc != 0 || !news)
        return rc;
    /* tell the suspect itself (it may hear us even if we did not hear it) */
    struct gossip__rumor tell;
    rc = send_probe_pkt(g, gossip__ep_addr(e), e->name, WIRE_PROBE_NEWS, 0,
                        NULL, 0, tell_rumor(g, e, &tell), out);
    if (rc != 0)
        return rc;
    return rumor_spread(g, e->name, e->generation, e->incarnation,
                        WIRE_PROBE_SUSPECT, g->eps[0].name, out);
}

/* Ask k others to ping e on our behalf (and ping it again ourselves). */
static int probe_indirect(gossip *g,
                          struct gossip__probe *p,
                          struct gossip__ep *e,
                          bool ping_again,
                          uint64_t now,
                          struct gossip_out *out)
{
    p->indirect = true;
    p->deadline = now + 2 * scaled(g, g->probe_timeout_ms);
    g->stats.probes_indirect++;
    int rc = ping_again ? send_ping(g, e, p->seq, out) : 0;
    struct gossip__ep *asked[16];
    size_t k = g->indirect_probes < 16 ? g->indirect_probes : 16;
    size_t n_asked = rc == 0 ? random_peers(g, e, k, 4 * k, asked) : 0;
    size_t n_sent = 0;
    for (; rc == 0 && n_sent < n_asked; n_sent++)
        rc = send_probe_pkt(g, gossip__ep_addr(asked[n_sent]),
                            asked[n_sent]->name, WIRE_PROBE_PING_REQ, p->seq,
                            e->name, 0, NULL, out);
    p->nacks_wanted = (uint32_t)n_sent;
    return rc;
}

/* Probe p's deadline passed without an ACK. */
static int probe_late(gossip *g,
                      struct gossip__probe *p,
                      uint64_t now,
                      struct gossip_out *out)
{
    struct gossip__ep *e = ep_by_name(g, p->name, strlen(p->name));
    if (e == NULL || !probeable(e)) {
        p->active = false;
        return 0;
    }
    if (!p->indirect)
        return probe_indirect(g, p, e, true, now, out);
    /* Nobody answered. Relays that did not even NACK point at us. */
    p->active = false;
    if (p->nacks < p->nacks_wanted)
        health_up(g);
    if (p->nacks_wanted > 0 && p->untried == p->nacks_wanted)
        return 0; /* no relay knew it (a forming cluster): proves nothing */
    miss_sample(g, true);
    return probe_failed(g, e, p->inc, now, out);
}

static int
relay_late(gossip *g, struct gossip__relay *r, struct gossip_out *out)
{
    r->active = false;
    return send_probe_pkt(g, r->reply_to, NULL, WIRE_PROBE_NACK, r->their_seq,
                          r->target, 0, NULL, out);
}

/* ---- receiving ---------------------------------------------------------- */

/* Someone suspects this node: refute with a higher incarnation. */
static int
refute(gossip *g, uint64_t inc, const char *origin, struct gossip_out *out)
{
    g->incarnation = inc + 1;
    g->stats.refutations++;
    health_up(g);
    struct gossip__ep *self = &g->eps[0];
    int rc = gossip__own_u64_set(g, GOSSIP_KEY_INCARNATION, g->incarnation);
    if (rc != 0)
        return rc;
    rc = rumor_spread(g, self->name, self->generation, g->incarnation,
                      WIRE_PROBE_ALIVE, self->name, out);
    /* and straight to whoever suspects us, who has the earliest timer */
    struct gossip__ep *o = ep_by_name(g, origin, strlen(origin));
    if (rc == 0 && o != NULL && probeable(o))
        rc = send_probe_pkt(g, gossip__ep_addr(o), o->name, WIRE_PROBE_NEWS, 0,
                            NULL, 0, NULL, out);
    return rc;
}

static int rumor_heard(gossip *g,
                       const struct wire_probe_rumor *r,
                       uint64_t now,
                       struct gossip_out *out)
{
    char name[GOSSIP_NAME_MAX + 1], origin[GOSSIP_NAME_MAX + 1];
    gossip__copy_name(name, sizeof(name), r->node.p, r->node.len);
    gossip__copy_name(origin, sizeof(origin), r->origin.p, r->origin.len);
    struct gossip__ep *self = &g->eps[0];
    if (gossip__slice_eq_str(r->node, self->name, self->name_len)) {
        if (r->kind == WIRE_PROBE_SUSPECT &&
            r->generation == self->generation &&
            r->incarnation >= g->incarnation)
            return refute(g, r->incarnation, origin, out);
        return 0;
    }
    struct gossip__ep *e = ep_by_name(g, r->node.p, r->node.len);
    if (e == NULL || e->quarantined || r->generation != e->generation)
        return 0; /* unknown, or a life anti-entropy has not told us of */
    e->probes = true;
    if (r->kind == WIRE_PROBE_ALIVE) {
        bool news = r->incarnation > e->incarnation ||
                    (e->suspect && r->incarnation > e->suspect_inc) ||
                    (e->convicted && r->incarnation > e->convicted_inc);
        if (!news)
            return 0;
        int rc = alive_seen(g, e, r->incarnation, now, out);
        return rc != 0 ? rc
                       : rumor_spread(g, e->name, e->generation, r->incarnation,
                                      WIRE_PROBE_ALIVE, origin, out);
    }
    bool news;
    int rc = suspect_heard(g, e, r->incarnation, origin, now, &news, out);
    if (rc != 0 || !news)
        return rc;
    return rumor_spread(g, e->name, e->generation, r->incarnation,
                        WIRE_PROBE_SUSPECT, origin, out);
}

/* A convicted e was heard from first-hand, or of a newer heartbeat: tell it
 * so it refutes, at most once an interval. */
static int tell_convicted(gossip *g,
                          struct gossip__ep *e,
                          uint64_t now,
                          const char *to,
                          struct gossip_out *out)
{
    if (!e->convicted || !e->probes ||
        (e->told_ms != 0 && now - e->told_ms < g->interval_ms))
        return 0;
    e->told_ms = now;
    struct gossip__rumor tell;
    return send_probe_pkt(g, to, e->name, WIRE_PROBE_NEWS, 0, NULL, 0,
                          tell_rumor(g, e, &tell), out);
}

static int handle_probe(gossip *g,
                        const struct wire_probe_msg *m,
                        uint64_t now,
                        const char *from,
                        struct gossip_out *out)
{
    struct gossip__ep *self = &g->eps[0];
    char target[GOSSIP_NAME_MAX + 1];
    gossip__copy_name(target, sizeof(target), m->target.p, m->target.len);
    switch (m->type) {
    case WIRE_PROBE_PING:
        if (!gossip__slice_eq_str(m->target, self->name, self->name_len))
            return 0; /* meant for whoever had this address before */
        return send_probe_pkt(g, from, NULL, WIRE_PROBE_ACK, m->seq, self->name,
                              g->incarnation, NULL, out);
    case WIRE_PROBE_PING_REQ: {
        struct gossip__ep *e = ep_by_name(g, m->target.p, m->target.len);
        struct gossip__relay *r = NULL;
        for (size_t i = 0; i < GOSSIP__RELAYS && r == NULL; i++)
            if (!g->relays[i].active)
                r = &g->relays[i];
        /* cannot try; nor will it for a sender that is not a known member
         * (g->bare_to): the relayed answer would go to an address anybody
         * can write, after the bound on this packet's replies */
        if (e == NULL || !probeable(e) || r == NULL || g->bare_to != NULL)
            return send_probe_pkt(g, from, NULL, WIRE_PROBE_NACK, m->seq,
                                  target, WIRE_PROBE_NACK_UNTRIED, NULL, out);
        memset(r, 0, sizeof(*r));
        r->active = true;
        memcpy(r->target, e->name, e->name_len + 1);
        gossip__copy_name(r->reply_to, sizeof(r->reply_to), from, strlen(from));
        r->their_seq = m->seq;
        r->seq = ++g->seq;
        r->deadline = now + scaled(g, g->probe_timeout_ms);
        return send_ping(g, e, r->seq, out);
    }
    case WIRE_PROBE_ACK: {
        struct gossip__ep *e = ep_by_name(g, m->target.p, m->target.len);
        for (size_t i = 0; i < GOSSIP__RELAYS; i++) {
            struct gossip__relay *r = &g->relays[i];
            if (r->active && r->seq == m->seq &&
                strcmp(r->target, target) == 0) {
                r->active = false;
                return send_probe_pkt(g, r->reply_to, NULL, WIRE_PROBE_ACK,
                                      r->their_seq, r->target, m->incarnation,
                                      NULL, out);
            }
        }
        struct gossip__probe *p = probe_find(g, target);
        if (p == NULL || p->seq != m->seq)
            return 0; /* late, or not ours */
        p->active = false;
        health_down(g);
        miss_sample(g, p->indirect);
        return e != NULL ? alive_seen(g, e, m->incarnation, now, out) : 0;
    }
    case WIRE_PROBE_NACK: {
        struct gossip__probe *p = probe_find(g, target);
        if (p != NULL && p->seq == m->seq) {
            p->nacks++;
            p->untried += m->incarnation == WIRE_PROBE_NACK_UNTRIED;
        }
        return 0;
    }
    case WIRE_PROBE_NEWS:
        return 0;
    }
    return 0;
}

int gossip__probe_recv(gossip *g,
                       uint64_t now,
                       const char *from,
                       const struct wire_probe_msg *m,
                       struct gossip_out *out)
{
    if (!g->probe_on)
        return 0; /* we do not take part: no answer, no rumor */
    g->stats.rx_probe++;
    struct gossip__ep *sender = ep_by_name(g, m->from.p, m->from.len);
    if (sender != NULL)
        sender->probes = true; /* it speaks probes, whatever we heard */
    int rc = 0;
    for (size_t i = 0; i < m->n_rumors && rc == 0; i++)
        rc = rumor_heard(g, &m->rumors[i], now, out);
    if (rc == 0)
        rc = handle_probe(g, m, now, from, out);
    if (rc == 0 && sender != NULL && !sender->quarantined)
        rc = tell_convicted(g, sender, now, from, out);
    rumor_gc(g);
    return rc;
}

int gossip__probe_first_hand(gossip *g,
                             struct gossip__ep *e,
                             uint64_t now,
                             const char *from,
                             struct gossip_out *out)
{
    if (!g->probe_on || e->quarantined)
        return 0;
    return tell_convicted(g, e, now, from, out);
}

int gossip__probe_inc_learned(gossip *g,
                              struct gossip__ep *e,
                              uint64_t now,
                              struct gossip_out *out)
{
    const struct gossip__state *s = &e->st[GOSSIP_KEY_INCARNATION];
    uint64_t inc;
    if (gossip__parse_u64(&inc, s->val, s->len) != 0)
        return 0;
    e->probes = true;
    return alive_seen(g, e, inc, now, out);
}

int gossip__probe_heartbeat(gossip *g,
                            struct gossip__ep *e,
                            uint64_t now,
                            struct gossip_out *out)
{
    const char *to = gossip__ep_addr(e);
    if (!g->probe_on || to == NULL)
        return 0;
    return tell_convicted(g, e, now, to, out);
}

void gossip__probe_reset(gossip *g, struct gossip__ep *e, uint64_t now)
{
    suspicion_clear(g, e);
    e->convicted = false;
    e->incarnation = 0;
    e->told_ms = 0;
    e->up_first = e->up ? now : 0; /* a new life: settles anew */
}

/* ---- the clock ---------------------------------------------------------- */

uint64_t gossip_timer_due(const gossip *g)
{
    if (!g->probe_on)
        return UINT64_MAX;
    if (!g->probe_started)
        return 0;
    uint64_t due = g->next_probe;
    for (size_t i = 0; i < GOSSIP__PROBES; i++)
        if (g->probes[i].active && g->probes[i].deadline < due)
            due = g->probes[i].deadline;
    for (size_t i = 0; i < GOSSIP__RELAYS; i++)
        if (g->relays[i].active && g->relays[i].deadline < due)
            due = g->relays[i].deadline;
    for (size_t i = 1; g->n_suspects > 0 && i < g->n_eps; i++) {
        const struct gossip__ep *e = &g->eps[i];
        if (e->suspect) {
            uint64_t t = e->suspect_since + suspicion_timeout(g, e);
            if (t < due)
                due = t;
        }
    }
    return due;
}

int gossip_timer(gossip *g, uint64_t now_ms, struct gossip_out *out)
{
    gossip_out_clear(out);
    if (!g->probe_on)
        return 0;
    uint64_t period = scaled(g, g->probe_interval_ms);
    if (!g->probe_started) {
        g->probe_started = true;
        g->next_probe = now_ms + gossip__rng_below(g, g->probe_interval_ms);
    } else if (now_ms > g->next_probe &&
               now_ms - g->next_probe > PAUSE_PERIODS * period) {
        /* We were paused (our stall, not theirs): what timed out meanwhile
         * proves nothing. Drop the probes, restart the suspicion clocks. */
        memset(g->probes, 0, sizeof(g->probes));
        memset(g->relays, 0, sizeof(g->relays));
        for (size_t i = 1; i < g->n_eps; i++)
            if (g->eps[i].suspect)
                g->eps[i].suspect_since = now_ms;
        g->next_probe = now_ms;
    }
    int rc = 0;
    for (size_t i = 0; i < GOSSIP__PROBES && rc == 0; i++)
        if (g->probes[i].active && g->probes[i].deadline <= now_ms)
            rc = probe_late(g, &g->probes[i], now_ms, out);
    for (size_t i = 0; i < GOSSIP__RELAYS && rc == 0; i++)
        if (g->relays[i].active && g->relays[i].deadline <= now_ms)
            rc = relay_late(g, &g->relays[i], out);
    for (size_t i = 1; rc == 0 && g->n_suspects > 0 && i < g->n_eps; i++) {
        struct gossip__ep *e = &g->eps[i];
        if (!e->suspect)
            continue;
        uint64_t since = e->suspect_since;
        bool lifeguard = now_ms >= since + suspicion_timeout(g, e);
        uint64_t shortest = (uint64_t)(g->suspicion_ms * loss_factor(g));
        bool seen_too = e->self_confirmed && now_ms >= since + shortest;
        if (!lifeguard && !seen_too) {
            if (now_ms < since + shortest || e->suspect_looked ||
                fully_confirmed(g, e))
                continue;
            /* Not confirmed by the shortest timeout: look for ourselves
             * (the ping also tells the peer it is suspected). If nobody
             * answers us either, two nodes' probes failed: convict. If
             * this node only missed the refutation, the ACK brings it. */
            e->suspect_looked = true;
            rc = probe_start(g, e, true, now_ms, out);
            continue;
        }
        suspicion_clear(g, e);
        e->convicted = true;
        e->convicted_inc = e->suspect_inc;
        g->stats.convictions++;
        if (e->up && !e->quarantined) {
            e->up = false;
            if (gossip__ev_push(out, GOSSIP_EV_DOWN, e->name) == NULL)
                rc = -ENOMEM;
        }
    }
    if (rc == 0 && now_ms >= g->next_probe) {
        g->next_probe = now_ms + (uint64_t)(scaled(g, g->probe_interval_ms) *
                                            loss_factor(g));
        struct gossip__ep *e = probe_pick(g, now_ms);
        if (e != NULL)
            rc = probe_start(g, e, false, now_ms, out);
    }
    rumor_gc(g);
    return rc;
}

/* ---- lifecycle ---------------------------------------------------------- */

int gossip__probe_init(gossip *g, const struct gossip_config *cfg)
{
    g->probe_on = cfg->probe;
    uint32_t half = cfg->interval_ms / 2 ? cfg->interval_ms / 2 : 1;
    uint32_t third = cfg->interval_ms / 3 ? cfg->interval_ms / 3 : 1;
    g->probe_interval_ms =
        cfg->probe_interval_ms ? cfg->probe_interval_ms : third;
    g->probe_timeout_ms = cfg->probe_timeout_ms ? cfg->probe_timeout_ms : half;
    g->indirect_probes = cfg->indirect_probes;
    g->suspicion_ms = cfg->suspicion_ms ? cfg->suspicion_ms : cfg->interval_ms;
    g->suspicion_max_ms =
        cfg->suspicion_max_ms ? cfg->suspicion_max_ms : 5 * g->suspicion_ms;
    if (!g->probe_on)
        return 0;
    return gossip__own_u64_set(g, GOSSIP_KEY_INCARNATION, 0);
}

void gossip__probe_free(gossip *g)
{
    free(g->order);
    g->order = NULL;
    free(g->rumors);
    g->rumors = NULL;
    g->n_rumors = g->cap_rumors = 0;
}
