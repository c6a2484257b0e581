/*
 * check_gossip.c - the gossip state machine, one rule at a time.
 *
 * Packets are crafted with the wire codec and fed to gossip_recv(), or
 * passed between a few instances by a lossless in-test "network" (pump), on
 * a clock the test sets. The 100-node lossy simulation is check_gossip_sim.c.
 */
#include <errno.h>
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <check.h>

#include "gossip/gossip.h"
#include "tests/unit/oom_hook.h"
#include "wire/gossip_msg.h"
#include "wire/gossip_probe.h"

#define SECRET  "s3cret"
#define CLUSTER "test"

/* A node; `numbered` false: one that predates packet numbers, in whose
 * name the tests can then craft packets (a numbered node's unnumbered
 * packets are replays). */
static gossip *mk_any(const char *name,
                      uint64_t gen,
                      const char *const *seeds,
                      size_t n_seeds,
                      size_t max_packet,
                      bool numbered)
{
    struct gossip_config cfg = GOSSIP_CONFIG_INIT;
    cfg.numbered = numbered;
    cfg.cluster_name = CLUSTER;
    cfg.node_name = name;
    cfg.secret = (const uint8_t *)SECRET;
    cfg.secret_len = strlen(SECRET);
    cfg.generation = gen;
    cfg.seed = 42;
    cfg.seeds = seeds;
    cfg.n_seeds = n_seeds;
    cfg.max_packet = max_packet;
    cfg.quarantine_ms = 60000;
    gossip *g = NULL;
    ck_assert_int_eq(gossip_new(&g, &cfg), 0);
    /* the address of a node is its name in these tests */
    ck_assert_int_eq(
        gossip_state_set(g, GOSSIP_KEY_ADDRESS, name, strlen(name)), 0);
    return g;
}

static gossip *mk_full(const char *name,
                       uint64_t gen,
                       const char *const *seeds,
                       size_t n_seeds,
                       size_t max_packet)
{
    return mk_any(name, gen, seeds, n_seeds, max_packet, true);
}

static gossip *mk(const char *name)
{
    return mk_full(name, 1, NULL, 0, 8192);
}

static struct wire_gossip_state
S(unsigned key, uint64_t version, const char *value) {
    struct wire_gossip_state s = {key, version, RK_SLICE(value, strlen(value))};
    return s;
}

static int
send_msg(gossip *g,
         uint64_t now,
         const char *from,
         const char *secret,
         const char *cluster,
         struct wire_gossip_msg *m,
         struct gossip_out *out)
{
    struct wire_key k;
    ck_assert_int_eq(
        wire_key_derive(&k, (const uint8_t *)secret, strlen(secret)), 0);
    m->cluster = RK_SLICE(cluster, strlen(cluster));
    m->from = RK_SLICE(from, strlen(from));
    uint8_t *buf;
    size_t len;
    ck_assert_int_eq(wire_gossip_msg_encode(&buf, &len, m, &k), 0);
    int rc = gossip_recv(g, now, from, buf, len, out);
    free(buf);
    return rc;
}

/* An ACK2 from `from` carrying one delta of `node`. */
static int inject(gossip *g,
                  uint64_t now,
                  const char *from,
                  const char *node,
                  uint64_t gen,
                  uint64_t base,
                  uint64_t top,
                  struct wire_gossip_state *st,
                  size_t n,
                  struct gossip_out *out)
{
    struct wire_gossip_delta d = {
        RK_SLICE(node, strlen(node)), gen, base, top, st, n};
    struct wire_gossip_msg m = {
        .type = WIRE_GOSSIP_ACK2, .deltas = &d, .n_deltas = 1};
    return send_msg(g, now, from, SECRET, CLUSTER, &m, out);
}

/* g learns `name` first-hand, with its name as its ADDRESS (version 1 of
 * generation 1) and no FRESH: a known member whose unnumbered packets the
 * tests may craft. */
static void know(gossip *g, const char *name)
{
    struct gossip_out out;
    gossip_out_init(&out);
    struct wire_gossip_state st[1] = {
        {GOSSIP_KEY_ADDRESS, 1, RK_SLICE(name, strlen(name))}};
    ck_assert_int_eq(inject(g, 0, name, name, 1, 0, 1, st, 1, &out), 0);
    gossip_out_free(&out);
}

static size_t count_events(const struct gossip_out *out,
                           enum gossip_event_type t,
                           const char *name)
{
    size_t n = 0;
    for (size_t i = 0; i < out->n_events; i++)
        if (out->events[i].type == t &&
            (name == NULL || strcmp(out->events[i].name, name) == 0))
            n++;
    return n;
}

static struct gossip_peer_info peer(gossip *g, const char *name, uint64_t now)
{
    struct gossip_peer_info pi;
    ck_assert_int_eq(gossip_peer_find(&pi, g, name, now), 0);
    return pi;
}

static bool
state_is(gossip *g, const char *name, unsigned key, const char *want)
{
    struct gossip_peer_info pi = peer(g, name, 0);
    return pi.state[key].len == strlen(want) &&
           memcmp(pi.state[key].p, want, pi.state[key].len) == 0;
}

/* ---- a lossless network between a few nodes ----------------------------- */

struct net {
    gossip *g[8];
    const char *name[8];
    size_t n;
    /* wall clocks (gossip_wall_set), when wall_base != 0: node i's is
     * wall_base + now + wall_off[i], none if no_wall[i] */
    uint64_t wall_base;
    int64_t wall_off[8];
    bool no_wall[8];
    bool dead[8];    /* drops what it gets, sends nothing */
    size_t max_seen; /* largest packet that crossed */
    size_t packets;
};

struct flight {
    size_t to, from;
    uint8_t *buf;
    size_t len;
};

static size_t net_find(const struct net *net, const char *addr)
{
    for (size_t i = 0; i < net->n; i++)
        if (strcmp(net->name[i], addr) == 0)
            return i;
    return SIZE_MAX;
}

static void net_wall(struct net *net, size_t i, uint64_t now)
{
    if (net->wall_base != 0 && !net->no_wall[i])
        gossip_wall_set(net->g[i],
                        net->wall_base + now + (uint64_t)net->wall_off[i]);
}

/* Delivers out's packets (emitted by node src) and every reply, FIFO. */
static void
pump(struct net *net, uint64_t now, size_t src, struct gossip_out *out)
{
    struct flight q[4096];
    size_t head = 0, tail = 0;
    for (;;) {
        for (size_t i = 0; i < out->n_pkts && !net->dead[src]; i++) {
            size_t to = net_find(net, out->pkts[i].to);
            if (to == SIZE_MAX || net->dead[to])
                continue;
            ck_assert_uint_lt(tail, 4096);
            q[tail].to = to;
            q[tail].from = src;
            q[tail].len = out->pkts[i].len;
            q[tail].buf = malloc(out->pkts[i].len);
            memcpy(q[tail].buf, out->pkts[i].buf, out->pkts[i].len);
            tail++;
        }
        if (head == tail)
            return;
        struct flight f = q[head++];
        if (f.len > net->max_seen)
            net->max_seen = f.len;
        net->packets++;
        net_wall(net, f.to, now);
        ck_assert_int_eq(gossip_recv(net->g[f.to], now, net->name[f.from],
                                     f.buf, f.len, out),
                         0);
        free(f.buf);
        src = f.to;
    }
}

static void net_round(struct net *net, uint64_t now, struct gossip_out *out)
{
    for (size_t i = 0; i < net->n; i++) {
        net_wall(net, i, now);
        ck_assert_int_eq(gossip_tick(net->g[i], now, out), 0);
        pump(net, now, i, out);
    }
}

/* n rounds 1 s apart from now; returns the time after them. */
static uint64_t
net_rounds(struct net *net, uint64_t now, int n, struct gossip_out *out)
{
    for (int r = 0; r < n; r++, now += 1000)
        net_round(net, now, out);
    return now;
}

/* ---- digests ------------------------------------------------------------ */

START_TEST(digest_comparison)
{
    gossip *a = mk("A");
    struct gossip_out out;
    gossip_out_init(&out);
    struct wire_gossip_state x[2] = {S(GOSSIP_KEY_STATUS, 3, "NORMAL 1"),
                                     S(GOSSIP_KEY_DC, 10, "dc9")};
    ck_assert_int_eq(inject(a, 0, "X", "X", 1, 0, 10, x, 2, &out), 0);
    struct wire_gossip_state y[1] = {S(GOSSIP_KEY_DC, 3, "dc1")};
    ck_assert_int_eq(inject(a, 0, "Y", "Y", 1, 0, 3, y, 1, &out), 0);
    struct wire_gossip_state w[1] = {S(GOSSIP_KEY_DC, 2, "dcw")};
    ck_assert_int_eq(inject(a, 0, "W", "W", 5, 0, 2, w, 1, &out), 0);
    know(a, "B");

    /* B says: X at v5 (A has more), Y at v7 (B has more), Z unknown to A,
     * W at an older generation 4 (A sends all), A itself at v0, and B as
     * A holds it. */
    struct wire_gossip_digest dg[6] = {
        {RK_SLICE("X", 1), 1, 5}, {RK_SLICE("Y", 1), 1, 7},
        {RK_SLICE("Z", 1), 3, 4}, {RK_SLICE("W", 1), 4, 9},
        {RK_SLICE("A", 1), 1, 0}, {RK_SLICE("B", 1), 1, 1}};
    struct wire_gossip_msg syn = {
        .type = WIRE_GOSSIP_SYN, .digests = dg, .n_digests = 6};
    ck_assert_int_eq(send_msg(a, 0, "B", SECRET, CLUSTER, &syn, &out), 0);
    ck_assert_uint_eq(out.n_pkts, 1);
    ck_assert_str_eq(out.pkts[0].to, "B");

    struct wire_key k;
    wire_key_derive(&k, (const uint8_t *)SECRET, strlen(SECRET));
    struct wire_gossip_msg ack;
    ck_assert_int_eq(
        wire_gossip_msg_decode(&ack, &k, out.pkts[0].buf, out.pkts[0].len), 0);
    ck_assert_int_eq(ack.type, WIRE_GOSSIP_ACK);
    ck_assert_uint_eq(ack.n_digests, 2); /* requests: Y from v3, Z all */
    ck_assert_mem_eq(ack.digests[0].node.p, "Y", 1);
    ck_assert_uint_eq(ack.digests[0].generation, 1);
    ck_assert_uint_eq(ack.digests[0].version, 3);
    ck_assert_mem_eq(ack.digests[1].node.p, "Z", 1);
    ck_assert_uint_eq(ack.digests[1].generation, 0);
    ck_assert_uint_eq(ack.digests[1].version, 0);
    ck_assert_uint_eq(ack.n_deltas, 3); /* X (5,10], W all, A all */
    ck_assert_mem_eq(ack.deltas[0].node.p, "X", 1);
    ck_assert_uint_eq(ack.deltas[0].base, 5);
    ck_assert_uint_eq(ack.deltas[0].top, 10);
    ck_assert_uint_eq(ack.deltas[0].n_states, 1); /* only DC is newer */
    ck_assert_uint_eq(ack.deltas[0].states[0].key, GOSSIP_KEY_DC);
    ck_assert_mem_eq(ack.deltas[1].node.p, "W", 1);
    ck_assert_uint_eq(ack.deltas[1].generation, 5);
    ck_assert_uint_eq(ack.deltas[1].base, 0);
    ck_assert_mem_eq(ack.deltas[2].node.p, "A", 1);
    ck_assert_uint_eq(ack.deltas[2].base, 0);
    /* its INCARNATION (0: it speaks probes), FRESH (it numbers its
     * packets), ADDRESS and RING_EPOCH (1, from X's STATUS) */
    ck_assert_uint_eq(ack.deltas[2].n_states, 4);
    wire_gossip_msg_release(&ack);

    /* An ACK answering A's requests gets an ACK2 with exactly them. */
    struct wire_gossip_digest rq[1] = {{RK_SLICE("X", 1), 1, 3}};
    struct wire_gossip_msg ack_in = {
        .type = WIRE_GOSSIP_ACK, .digests = rq, .n_digests = 1};
    ck_assert_int_eq(send_msg(a, 0, "B", SECRET, CLUSTER, &ack_in, &out), 0);
    ck_assert_uint_eq(out.n_pkts, 1);
    ck_assert_int_eq(
        wire_gossip_msg_decode(&ack, &k, out.pkts[0].buf, out.pkts[0].len), 0);
    ck_assert_int_eq(ack.type, WIRE_GOSSIP_ACK2);
    ck_assert_uint_eq(ack.n_deltas, 1);
    ck_assert_uint_eq(ack.deltas[0].base, 3);
    ck_assert_uint_eq(ack.deltas[0].n_states, 1);
    wire_gossip_msg_release(&ack);

    /* Nothing to say: no packet at all. (The SYN lists every endpoint A
     * knows: A would SYN back one its sender has not heard of.) */
    struct wire_gossip_digest same[5] = {{RK_SLICE("X", 1), 1, 10},
                                         {RK_SLICE("Y", 1), 1, 3},
                                         {RK_SLICE("W", 1), 5, 2},
                                         {RK_SLICE("A", 1), 1, 1000},
                                         {RK_SLICE("B", 1), 1, 1}};
    syn.digests = same;
    syn.n_digests = 5;
    ck_assert_int_eq(send_msg(a, 0, "B", SECRET, CLUSTER, &syn, &out), 0);
    ck_assert_uint_eq(out.n_pkts, 0);
    gossip_out_free(&out);
    gossip_free(a);
}
END_TEST

/* Regression: a delta that carries only a heartbeat (no state) used to
 * memcpy from a NULL state array (UBSan, found by check_gossip). */
START_TEST(regress_heartbeat_only_delta)
{
    gossip *a = mk("A");
    struct gossip_out out;
    gossip_out_init(&out);
    know(a, "B");
    uint64_t v0 = peer(a, "A", 0).version;
    ck_assert_int_eq(gossip_tick(a, 0, &out), 0);
    struct wire_gossip_digest dg[2] = {{RK_SLICE("A", 1), 1, v0},
                                       {RK_SLICE("B", 1), 1, 1}};
    struct wire_gossip_msg syn = {
        .type = WIRE_GOSSIP_SYN, .digests = dg, .n_digests = 2};
    ck_assert_int_eq(send_msg(a, 0, "B", SECRET, CLUSTER, &syn, &out), 0);
    ck_assert_uint_eq(out.n_pkts, 1);
    struct wire_key k;
    wire_key_derive(&k, (const uint8_t *)SECRET, strlen(SECRET));
    struct wire_gossip_msg ack;
    ck_assert_int_eq(
        wire_gossip_msg_decode(&ack, &k, out.pkts[0].buf, out.pkts[0].len), 0);
    ck_assert_uint_eq(ack.n_deltas, 1);
    ck_assert_uint_eq(ack.deltas[0].base, v0);
    ck_assert_uint_eq(ack.deltas[0].top, v0 + 1);
    ck_assert_uint_eq(ack.deltas[0].n_states, 0);
    wire_gossip_msg_release(&ack);
    gossip_out_free(&out);
    gossip_free(a);
}
END_TEST

/* ---- versions and generations -------------------------------------------- */

START_TEST(replay_never_rolls_back)
{
    gossip *a = mk("A");
    struct gossip_out out;
    gossip_out_init(&out);
    struct wire_gossip_state old[1] = {S(GOSSIP_KEY_STATUS, 2, "BOOT 1")};
    struct wire_gossip_state cur[1] = {S(GOSSIP_KEY_STATUS, 5, "NORMAL 2")};
    ck_assert_int_eq(inject(a, 0, "X", "X", 1, 0, 3, old, 1, &out), 0);
    ck_assert_int_eq(inject(a, 0, "X", "X", 1, 3, 5, cur, 1, &out), 0);
    ck_assert(state_is(a, "X", GOSSIP_KEY_STATUS, "NORMAL 2"));
    struct gossip_stats st0, st1;
    gossip_stats_get(&st0, a);
    /* the old packet again, and the current one again */
    ck_assert_int_eq(inject(a, 0, "X", "X", 1, 0, 3, old, 1, &out), 0);
    ck_assert_int_eq(inject(a, 0, "X", "X", 1, 3, 5, cur, 1, &out), 0);
    ck_assert_uint_eq(count_events(&out, GOSSIP_EV_STATE, NULL), 0);
    ck_assert(state_is(a, "X", GOSSIP_KEY_STATUS, "NORMAL 2"));
    ck_assert_int_eq(peer(a, "X", 0).status, GOSSIP_STATUS_NORMAL);
    /* a full-state delta of the same generation carrying an old value */
    ck_assert_int_eq(inject(a, 0, "X", "X", 1, 0, 9, old, 1, &out), 0);
    ck_assert(state_is(a, "X", GOSSIP_KEY_STATUS, "NORMAL 2"));
    ck_assert_uint_eq(peer(a, "X", 0).version, 9); /* heartbeat moved on */
    gossip_stats_get(&st1, a);
    ck_assert_uint_eq(st1.deltas_ignored, st0.deltas_ignored + 2);

    /* a gap: (12, 14] while holding 9 is ignored, (9, 14] is applied */
    struct wire_gossip_state t[1] = {S(GOSSIP_KEY_TOKENS, 14, "12345678")};
    ck_assert_int_eq(inject(a, 0, "X", "X", 1, 12, 14, t, 1, &out), 0);
    ck_assert_uint_eq(peer(a, "X", 0).version, 9);
    ck_assert_uint_eq(peer(a, "X", 0).state[GOSSIP_KEY_TOKENS].len, 0);
    ck_assert_int_eq(inject(a, 0, "X", "X", 1, 9, 14, t, 1, &out), 0);
    ck_assert_uint_eq(peer(a, "X", 0).version, 14);
    ck_assert_uint_eq(peer(a, "X", 0).state[GOSSIP_KEY_TOKENS].len, 8);
    ck_assert_uint_eq(count_events(&out, GOSSIP_EV_MEMBERSHIP, NULL), 1);

    /* unknown endpoint: a partial delta is not enough to create it */
    ck_assert_int_eq(inject(a, 0, "Q", "Q", 1, 4, 6, NULL, 0, &out), 0);
    ck_assert_int_eq(gossip_peer_find(&(struct gossip_peer_info){0}, a, "Q", 0),
                     RK_ENOTFOUND);
    /* nobody may speak for us */
    ck_assert_int_eq(inject(a, 0, "X", "A", 9, 0, 99, cur, 1, &out), 0);
    ck_assert_uint_eq(peer(a, "A", 0).generation, 1);
    ck_assert_uint_eq(peer(a, "A", 0).state[GOSSIP_KEY_STATUS].len, 0);
    gossip_out_free(&out);
    gossip_free(a);
}
END_TEST

START_TEST(generation_rules)
{
    gossip *a = mk("A");
    struct gossip_out out;
    gossip_out_init(&out);
    struct wire_gossip_state g1[2] = {S(GOSSIP_KEY_STATUS, 4, "NORMAL 1"),
                                      S(GOSSIP_KEY_LOAD, 50, "777")};
    ck_assert_int_eq(inject(a, 0, "X", "X", 10, 0, 50, g1, 2, &out), 0);
    /* restart: generation 11 replaces everything, even at lower versions */
    struct wire_gossip_state g2[1] = {S(GOSSIP_KEY_STATUS, 2, "BOOT 2")};
    ck_assert_int_eq(inject(a, 0, "X", "X", 11, 0, 2, g2, 1, &out), 0);
    ck_assert_uint_eq(count_events(&out, GOSSIP_EV_RESTARTED, "X"), 1);
    struct gossip_peer_info pi = peer(a, "X", 0);
    ck_assert_uint_eq(pi.generation, 11);
    ck_assert_uint_eq(pi.version, 2);
    ck_assert_int_eq(pi.status, GOSSIP_STATUS_BOOT);
    ck_assert_uint_eq(pi.state[GOSSIP_KEY_LOAD].len, 0);
    /* the old generation is ignored, however high its versions */
    ck_assert_int_eq(inject(a, 0, "X", "X", 10, 0, 900, g1, 2, &out), 0);
    ck_assert_uint_eq(out.n_events, 0);
    ck_assert_uint_eq(peer(a, "X", 0).generation, 11);
    ck_assert_int_eq(peer(a, "X", 0).status, GOSSIP_STATUS_BOOT);
    /* a newer generation must come whole (base 0) */
    ck_assert_int_eq(inject(a, 0, "X", "X", 12, 1, 3, NULL, 0, &out), 0);
    ck_assert_uint_eq(peer(a, "X", 0).generation, 11);
    /* generation 0 is never valid */
    ck_assert_int_eq(inject(a, 0, "X", "Y", 0, 0, 3, NULL, 0, &out), 0);
    ck_assert_int_eq(gossip_peer_find(&pi, a, "Y", 0), RK_ENOTFOUND);
    gossip_out_free(&out);
    gossip_free(a);
}
END_TEST

/* ---- failure detector --------------------------------------------------- */

START_TEST(phi_known_sequences)
{
    ck_assert_double_eq_tol(gossip_phi(1000, 1000), M_LOG10E, 1e-12);
    ck_assert_double_eq_tol(gossip_phi(18420.68, 1000), 8.0, 1e-4);
    ck_assert_double_eq_tol(gossip_phi(0, 1000), 0.0, 1e-12);

    gossip *a = mk("A");
    struct gossip_out out;
    gossip_out_init(&out);
    /* first-hand state: UP at once (bootstrap sample: two 1000 ms ticks) */
    ck_assert_int_eq(inject(a, 0, "X", "X", 1, 0, 1, NULL, 0, &out), 0);
    ck_assert_uint_eq(count_events(&out, GOSSIP_EV_UP, "X"), 1);
    /* heartbeats every 1000 ms: mean (2000 + 9 * 1000) / 10 = 1100 */
    for (uint64_t v = 2; v <= 10; v++)
        ck_assert_int_eq(
            inject(a, (v - 1) * 1000, "B", "X", 1, v - 1, v, NULL, 0, &out), 0);
    ck_assert_double_eq_tol(peer(a, "X", 9000).phi, 0.0, 1e-12);
    ck_assert_double_eq_tol(peer(a, "X", 11000).phi, 2000.0 / 1100 * M_LOG10E,
                            1e-9);
    ck_assert_double_eq_tol(peer(a, "X", 14000).phi, 5000.0 / 1100 * M_LOG10E,
                            1e-9);
    /* phi crosses 8 at 8 / log10(e) * 1100 = 20263 ms of silence */
    ck_assert_int_eq(gossip_tick(a, 9000 + 20000, &out), 0);
    ck_assert_uint_eq(count_events(&out, GOSSIP_EV_DOWN, "X"), 0);
    ck_assert(peer(a, "X", 29000).up);
    ck_assert_int_eq(gossip_tick(a, 9000 + 20500, &out), 0);
    ck_assert_uint_eq(count_events(&out, GOSSIP_EV_DOWN, "X"), 1);
    ck_assert(!peer(a, "X", 29500).up);
    /* the next heartbeat brings it back; the outage is not a sample */
    ck_assert_int_eq(inject(a, 40000, "B", "X", 1, 10, 11, NULL, 0, &out), 0);
    ck_assert_uint_eq(count_events(&out, GOSSIP_EV_UP, "X"), 1);
    ck_assert_double_eq_tol(peer(a, "X", 42000).phi, 2000.0 / 1100 * M_LOG10E,
                            1e-9);

    /* faster heartbeats: 2000 (bootstrap), 500, 500, 500 -> mean 875 */
    ck_assert_int_eq(inject(a, 0, "Y", "Y", 1, 0, 1, NULL, 0, &out), 0);
    for (uint64_t v = 2; v <= 4; v++)
        ck_assert_int_eq(
            inject(a, (v - 1) * 500, "B", "Y", 1, v - 1, v, NULL, 0, &out), 0);
    ck_assert_double_eq_tol(peer(a, "Y", 1500 + 1750).phi, 2 * M_LOG10E, 1e-9);

    /* hearsay of a new endpoint is not proof of life */
    ck_assert_int_eq(inject(a, 0, "B", "Z", 1, 0, 5, NULL, 0, &out), 0);
    ck_assert_uint_eq(count_events(&out, GOSSIP_EV_JOINED, "Z"), 1);
    ck_assert_uint_eq(count_events(&out, GOSSIP_EV_UP, "Z"), 0);
    ck_assert(!peer(a, "Z", 0).up);
    ck_assert_int_eq(inject(a, 1000, "B", "Z", 1, 5, 6, NULL, 0, &out), 0);
    ck_assert_uint_eq(count_events(&out, GOSSIP_EV_UP, "Z"), 1);

    /* a local pause (our own stall of 60 s) convicts nobody: X (mean 1100,
     * last heard at 40 s) would have phi 23 without the pause rule */
    ck_assert_int_eq(gossip_tick(a, 41000, &out), 0);
    ck_assert_int_eq(gossip_tick(a, 101000, &out), 0);
    ck_assert_uint_eq(count_events(&out, GOSSIP_EV_DOWN, "X"), 0);
    ck_assert_int_eq(gossip_tick(a, 102000, &out), 0);
    ck_assert_uint_eq(count_events(&out, GOSSIP_EV_DOWN, "X"), 0);
    ck_assert(peer(a, "X", 102000).up);
    gossip_out_free(&out);
    gossip_free(a);
}
END_TEST

/* ---- authentication ----------------------------------------------------- */

START_TEST(auth_rejects_are_counted)
{
    gossip *a = mk("A");
    struct gossip_out out;
    gossip_out_init(&out);
    struct wire_gossip_state st[1] = {S(GOSSIP_KEY_STATUS, 1, "NORMAL 1")};
    struct wire_gossip_delta d = {RK_SLICE("X", 1), 1, 0, 1, st, 1};
    struct wire_gossip_msg m = {
        .type = WIRE_GOSSIP_ACK2, .deltas = &d, .n_deltas = 1};
    ck_assert_int_eq(send_msg(a, 0, "X", "wrong", CLUSTER, &m, &out), RK_EAUTH);
    ck_assert_uint_eq(count_events(&out, GOSSIP_EV_AUTH_FAIL, NULL), 1);
    ck_assert_str_eq(out.events[0].addr, "X");
    ck_assert_int_eq(send_msg(a, 0, "X", SECRET, "other", &m, &out), RK_EAUTH);
    ck_assert_uint_eq(count_events(&out, GOSSIP_EV_AUTH_FAIL, NULL), 1);
    static const uint8_t junk[] = "RKG\x01 definitely not a gossip packet!!";
    ck_assert_int_eq(gossip_recv(a, 0, "X", junk, sizeof(junk), &out),
                     RK_EAUTH);
    ck_assert_int_eq(gossip_recv(a, 0, "X", junk + 3, 10, &out), RK_EPROTO);
    ck_assert_uint_eq(count_events(&out, GOSSIP_EV_BAD_PACKET, NULL), 1);
    struct gossip_stats s;
    gossip_stats_get(&s, a);
    ck_assert_uint_eq(s.rx_auth_fail, 2);
    ck_assert_uint_eq(s.rx_wrong_cluster, 1);
    ck_assert_uint_eq(s.rx_malformed, 1);
    ck_assert_uint_eq(s.deltas_applied, 0);
    ck_assert_uint_eq(gossip_peer_count(a), 1); /* nothing learned */
    ck_assert_int_eq(send_msg(a, 0, "X", SECRET, CLUSTER, &m, &out), 0);
    ck_assert_uint_eq(gossip_peer_count(a), 2);
    gossip_out_free(&out);
    gossip_free(a);
}
END_TEST

/* ---- epochs -------------------------------------------------------------- */

START_TEST(epochs_and_staleness)
{
    gossip *a = mk("A");
    struct gossip_out out;
    gossip_out_init(&out);
    uint64_t e;
    ck_assert_int_eq(gossip_status_set(a, GOSSIP_STATUS_NORMAL, 0, &e), 0);
    ck_assert_uint_eq(e, 1);
    ck_assert(gossip_ring_stale(a)); /* nothing applied yet */
    gossip_ring_applied(a, 1);
    ck_assert(!gossip_ring_stale(a));
    ck_assert(state_is(a, "A", GOSSIP_KEY_RING_EPOCH, "1"));

    /* a peer joined at epoch 5: membership event, stale until applied */
    struct wire_gossip_state x[1] = {S(GOSSIP_KEY_STATUS, 1, "NORMAL 5")};
    ck_assert_int_eq(inject(a, 0, "X", "X", 1, 0, 1, x, 1, &out), 0);
    ck_assert_uint_eq(count_events(&out, GOSSIP_EV_MEMBERSHIP, NULL), 1);
    ck_assert_uint_eq(count_events(&out, GOSSIP_EV_RING_STALE, NULL), 1);
    ck_assert(gossip_ring_stale(a));
    ck_assert_uint_eq(gossip_epoch_max(a), 5);
    ck_assert_uint_eq(gossip_epoch_membership(a), 5);
    ck_assert(state_is(a, "A", GOSSIP_KEY_RING_EPOCH, "5"));
    /* hearing of epoch 7 through RING_EPOCH alone: stale, but the
     * membership epoch (what our endpoints describe) stays 5 */
    struct wire_gossip_state y[1] = {S(GOSSIP_KEY_RING_EPOCH, 1, "7")};
    ck_assert_int_eq(inject(a, 0, "Y", "Y", 1, 0, 1, y, 1, &out), 0);
    ck_assert_uint_eq(count_events(&out, GOSSIP_EV_RING_STALE, NULL), 0);
    ck_assert_uint_eq(gossip_epoch_max(a), 7);
    ck_assert_uint_eq(gossip_epoch_membership(a), 5);
    gossip_ring_applied(a, 5);
    ck_assert(gossip_ring_stale(a));
    struct wire_gossip_state z[1] = {S(GOSSIP_KEY_STATUS, 1, "BOOT 7")};
    ck_assert_int_eq(inject(a, 0, "Z", "Z", 1, 0, 1, z, 1, &out), 0);
    ck_assert_uint_eq(gossip_epoch_membership(a), 7);
    gossip_ring_applied(a, gossip_epoch_membership(a));
    ck_assert(!gossip_ring_stale(a));
    ck_assert_int_eq(gossip_tick(a, 1000, &out), 0);
    ck_assert_uint_eq(count_events(&out, GOSSIP_EV_RING_CAUGHT_UP, NULL), 1);
    /* an epoch a replica's OLD_RING told of: known as if gossiped (stale,
     * RING_STALE on the next tick); an older one changes nothing */
    gossip_epoch_heard(a, 6);
    ck_assert(!gossip_ring_stale(a));
    gossip_epoch_heard(a, 8);
    ck_assert(gossip_ring_stale(a));
    ck_assert_uint_eq(gossip_epoch_max(a), 8);
    ck_assert_uint_eq(gossip_epoch_membership(a), 7);
    ck_assert_int_eq(gossip_tick(a, 1100, &out), 0);
    ck_assert_uint_eq(count_events(&out, GOSSIP_EV_RING_STALE, NULL), 1);
    gossip_ring_applied(a, 8);
    ck_assert(!gossip_ring_stale(a));
    ck_assert_int_eq(gossip_tick(a, 1200, &out), 0);
    ck_assert_uint_eq(count_events(&out, GOSSIP_EV_RING_CAUGHT_UP, NULL), 1);
    /* our next transition is stamped above everything seen */
    ck_assert_int_eq(gossip_status_set(a, GOSSIP_STATUS_LEAVING, 0, &e), 0);
    ck_assert_uint_eq(e, 9);
    ck_assert(state_is(a, "A", GOSSIP_KEY_STATUS, "LEAVING 9"));
    /* a restart restores its persisted epoch */
    ck_assert_int_eq(gossip_status_set(a, GOSSIP_STATUS_NORMAL, 3, &e), 0);
    ck_assert_uint_eq(e, 3);
    ck_assert_uint_eq(gossip_epoch_max(a), 9);
    ck_assert_int_eq(gossip_status_set(a, 99, 0, &e), RK_EBADREQ);
    ck_assert_int_eq(gossip_state_set(a, GOSSIP_KEY_STATUS, "x", 1),
                     RK_EBADREQ);
    ck_assert_int_eq(gossip_state_set(a, GOSSIP_KEY_RING_EPOCH, "9", 1),
                     RK_EBADREQ);
    gossip_out_free(&out);
    gossip_free(a);
}
END_TEST

/* ---- quarantine ---------------------------------------------------------- */

START_TEST(quarantine_and_tombstone)
{
    gossip *a = mk("A"); /* quarantine 60 s */
    struct gossip_out out;
    gossip_out_init(&out);
    struct wire_gossip_state n[1] = {S(GOSSIP_KEY_STATUS, 1, "NORMAL 1")};
    ck_assert_int_eq(inject(a, 0, "X", "X", 1, 0, 1, n, 1, &out), 0);
    ck_assert(peer(a, "X", 0).up);
    struct wire_gossip_state l[1] = {S(GOSSIP_KEY_STATUS, 2, "LEFT 2")};
    ck_assert_int_eq(inject(a, 1000, "X", "X", 1, 1, 2, l, 1, &out), 0);
    ck_assert_uint_eq(count_events(&out, GOSSIP_EV_DOWN, "X"), 1);
    struct gossip_peer_info pi = peer(a, "X", 1000);
    ck_assert(pi.quarantined);
    ck_assert(!pi.up);
    /* heartbeats of a LEFT node and a new generation: no resurrection */
    ck_assert_int_eq(inject(a, 2000, "X", "X", 1, 2, 3, NULL, 0, &out), 0);
    ck_assert_uint_eq(count_events(&out, GOSSIP_EV_UP, "X"), 0);
    ck_assert_int_eq(inject(a, 2000, "X", "X", 2, 0, 1, n, 1, &out), 0);
    ck_assert_uint_eq(peer(a, "X", 2000).generation, 1);
    ck_assert_int_eq(peer(a, "X", 2000).status, GOSSIP_STATUS_LEFT);
    /* still gossiped while quarantined: a SYN offers its digest */
    ck_assert_int_eq(gossip_tick(a, 30000, &out), 0);
    ck_assert_uint_eq(gossip_peer_count(a), 2);
    /* evicted after the period; a late packet cannot bring it back */
    ck_assert_int_eq(gossip_tick(a, 61000, &out), 0);
    ck_assert_uint_eq(count_events(&out, GOSSIP_EV_EVICTED, "X"), 1);
    ck_assert_uint_eq(gossip_peer_count(a), 1);
    ck_assert_int_eq(inject(a, 62000, "X", "X", 1, 0, 5, n, 1, &out), 0);
    ck_assert_uint_eq(gossip_peer_count(a), 1);
    struct wire_gossip_digest dg[2] = {{RK_SLICE("X", 1), 1, 9},
                                       {RK_SLICE("A", 1), 1, 1000}};
    struct wire_gossip_msg syn = {
        .type = WIRE_GOSSIP_SYN, .digests = dg, .n_digests = 2};
    ck_assert_int_eq(send_msg(a, 62000, "B", SECRET, CLUSTER, &syn, &out), 0);
    ck_assert_uint_eq(out.n_pkts, 0); /* no request for the ghost */
    /* a real rejoin, with a new generation after the quarantine, is fine */
    ck_assert_int_eq(inject(a, 63000, "X", "X", 3, 0, 1, n, 1, &out), 0);
    ck_assert_uint_eq(count_events(&out, GOSSIP_EV_JOINED, "X"), 1);
    ck_assert_int_eq(peer(a, "X", 63000).status, GOSSIP_STATUS_NORMAL);
    gossip_out_free(&out);
    gossip_free(a);
}
END_TEST

#define NO_WALL INT64_MIN

/* A, B and C, NORMAL (epoch 1), A their seed, after ten rounds: returns
 * the time then. */
static uint64_t abc_formed_any(struct net *net,
                               struct gossip_out *out,
                               const int64_t *offs,
                               bool numbered)
{
    *net = (struct net){.n = 3, .name = {"A", "B", "C"}};
    /* wall clocks offs[i] off (Unix ms, 2026; NO_WALL: none), or none
     * without offs */
    net->wall_base = offs ? UINT64_C(1796000000000) : 0;
    for (size_t i = 0; i < 3; i++) {
        net->no_wall[i] = offs && offs[i] == NO_WALL;
        net->wall_off[i] = offs && offs[i] != NO_WALL ? offs[i] : 0;
        net->g[i] = mk_any(net->name[i], 1, (const char *const[]){"A"}, 1, 8192,
                           numbered);
        ck_assert_int_eq(
            gossip_status_set(net->g[i], GOSSIP_STATUS_NORMAL, 1, NULL), 0);
    }
    gossip_out_init(out);
    return net_rounds(net, 0, 10, out);
}

static uint64_t
abc_formed_clocks(struct net *net, struct gossip_out *out, const int64_t *offs)
{
    return abc_formed_any(net, out, offs, true);
}

static uint64_t abc_formed(struct net *net, struct gossip_out *out)
{
    return abc_formed_clocks(net, out, NULL);
}

START_TEST(removenode_spreads)
{
    struct net net;
    struct gossip_out out;
    uint64_t now = abc_formed(&net, &out);
    for (size_t i = 0; i < 3; i++)
        ck_assert_uint_eq(gossip_peer_count(net.g[i]), 3);
    /* C dies; A removes it; B learns even though it holds C's versions */
    net.n = 2;
    uint64_t epoch;
    ck_assert_int_eq(gossip_peer_remove(net.g[0], "C", now, &epoch), 0);
    ck_assert_uint_eq(epoch, 2);
    ck_assert_int_eq(gossip_peer_remove(net.g[0], "C", now, &epoch),
                     RK_EBADREQ);
    ck_assert_int_eq(gossip_peer_remove(net.g[0], "A", now, &epoch),
                     RK_EBADREQ);
    ck_assert_int_eq(gossip_peer_remove(net.g[0], "nobody", now, &epoch),
                     RK_ENOTFOUND);
    for (int r = 0; r < 5; r++, now += 1000)
        net_round(&net, now, &out);
    struct gossip_peer_info pi = peer(net.g[1], "C", now);
    ck_assert_int_eq(pi.status, GOSSIP_STATUS_REMOVED);
    ck_assert_uint_eq(pi.status_epoch, 2);
    ck_assert(pi.quarantined);
    ck_assert_uint_eq(pi.state[GOSSIP_KEY_ADDRESS].len, 1); /* kept */
    ck_assert_uint_eq(gossip_epoch_membership(net.g[1]), 2);
    /* C comes back (same generation, higher version): ignored */
    ck_assert_int_eq(inject(net.g[1], now, "C", "C", 1, 0, 500, NULL, 0, &out),
                     0);
    ck_assert_int_eq(peer(net.g[1], "C", now).status, GOSSIP_STATUS_REMOVED);
    ck_assert(!peer(net.g[1], "C", now).up);
    for (size_t i = 0; i < 3; i++)
        gossip_free(net.g[i]);
    gossip_out_free(&out);
}
END_TEST

/* A SYN from A, listing what A knows now, as A's tick would send it. */
static void syn_from(gossip *a,
                     const char *name,
                     gossip *to,
                     uint64_t now,
                     struct gossip_out *out)
{
    struct wire_gossip_digest dg[8];
    size_t n = gossip_peer_count(a);
    ck_assert_uint_le(n, 8);
    for (size_t i = 0; i < n; i++) {
        struct gossip_peer_info pi;
        ck_assert_int_eq(gossip_peer_get(&pi, a, i, now), 0);
        dg[i] = (struct wire_gossip_digest){RK_SLICE(pi.name, strlen(pi.name)),
                                            pi.generation, pi.version};
    }
    struct wire_gossip_msg m = {
        .type = WIRE_GOSSIP_SYN, .digests = dg, .n_digests = n};
    ck_assert_int_eq(send_msg(to, now, name, SECRET, CLUSTER, &m, out), 0);
}

static size_t pkts_to(const struct gossip_out *out, const char *to)
{
    size_t n = 0;
    for (size_t i = 0; i < out->n_pkts; i++)
        n += strcmp(out->pkts[i].to, to) == 0;
    return n;
}

/* D joins through B. A, which has not heard of D, sends B a SYN: B's ACK
 * carries B's RING_EPOCH (D's epoch) but, answering only for what A
 * listed, nothing of D, so A's ring was stale until one of the others
 * happened to pick A for a SYN, often rounds later. B now sends a SYN
 * back, and A has D's state within the same exchange. */
START_TEST(syn_missing_endpoint_gets_syn_back)
{
    struct net net;
    struct gossip_out out;
    /* unnumbered: syn_from speaks for A and C */
    uint64_t now = abc_formed_any(&net, &out, NULL, false);
    gossip *a = net.g[0], *b = net.g[1];
    net.g[3] = mk_full("D", 1, (const char *const[]){"B"}, 1, 8192);
    net.name[3] = "D";
    net.n = 4;
    ck_assert_int_eq(gossip_status_set(net.g[3], GOSSIP_STATUS_NORMAL, 2, NULL),
                     0);
    ck_assert_int_eq(gossip_tick(net.g[3], now, &out), 0);
    ck_assert_uint_eq(pkts_to(&out, "B"), 1); /* its seed */
    pump(&net, now, 3, &out);
    ck_assert_int_eq(peer(b, "D", now).status_epoch, 2);
    ck_assert_uint_eq(gossip_epoch_max(b), 2);
    struct gossip_peer_info pi;
    ck_assert_int_eq(gossip_peer_find(&pi, a, "D", now), RK_ENOTFOUND);

    syn_from(a, "A", b, now, &out);
    ck_assert_uint_eq(pkts_to(&out, "A"), 2); /* the ACK and a SYN back */
    pump(&net, now, 1, &out);
    ck_assert_int_eq(peer(a, "D", now).status_epoch, 2);
    ck_assert_uint_eq(gossip_epoch_membership(a), 2);
    ck_assert_uint_eq(gossip_epoch_max(a), 2);

    /* at most one SYN back per sender per half interval (C has not
     * heard of D either) */
    net.n = 3;
    gossip_free(net.g[3]);
    ck_assert_int_eq(gossip_peer_find(&pi, net.g[2], "D", now), RK_ENOTFOUND);
    struct gossip_stats st0, st;
    gossip_stats_get(&st0, b);
    syn_from(net.g[2], "C", b, now, &out);
    ck_assert_uint_eq(pkts_to(&out, "C"), 2);
    syn_from(net.g[2], "C", b, now + 100, &out);
    ck_assert_uint_eq(pkts_to(&out, "C"), 1);
    syn_from(net.g[2], "C", b, now + 600, &out);
    ck_assert_uint_eq(pkts_to(&out, "C"), 2);
    gossip_stats_get(&st, b);
    ck_assert_uint_eq(st.syn_back - st0.syn_back, 2);
    /* a SYN that lists every endpoint gets none */
    syn_from(a, "A", b, now + 2000, &out);
    gossip_stats_get(&st0, b);
    ck_assert_uint_eq(st0.syn_back, st.syn_back);
    for (size_t i = 0; i < 3; i++)
        gossip_free(net.g[i]);
    gossip_out_free(&out);
}
END_TEST

/* ---- splitting ------------------------------------------------------------
 */

/* removenode's first step: LEAVING on a dead peer's behalf spreads (not
 * quarantined: the peer is still in the ring while its ranges move), then
 * REMOVED; LEAVING only for a NORMAL peer, NORMAL (an aborted removal)
 * only for a LEAVING one, no other status. */
START_TEST(removenode_leaving_on_behalf)
{
    struct net net;
    struct gossip_out out;
    uint64_t now = abc_formed(&net, &out);
    net.n = 2; /* C dies, and B convicts it */
    for (int r = 0; r < 60 && peer(net.g[1], "C", now).up; r++, now += 1000)
        net_round(&net, now, &out);
    ck_assert(!peer(net.g[1], "C", now).up);
    uint64_t epoch;
    ck_assert_int_eq(
        gossip_peer_status_set(net.g[0], "C", GOSSIP_STATUS_LEFT, now, &epoch),
        RK_EBADREQ);
    ck_assert_int_eq(gossip_peer_status_set(net.g[0], "C",
                                            GOSSIP_STATUS_LEAVING, now, &epoch),
                     0);
    ck_assert_uint_eq(epoch, 2);
    ck_assert_int_eq(
        gossip_peer_status_set(net.g[0], "C", GOSSIP_STATUS_LEAVING, now, NULL),
        RK_EBADREQ); /* not NORMAL any more */
    for (int r = 0; r < 5; r++, now += 1000)
        net_round(&net, now, &out);
    struct gossip_peer_info pi = peer(net.g[1], "C", now);
    ck_assert_int_eq(pi.status, GOSSIP_STATUS_LEAVING);
    ck_assert_uint_eq(pi.status_epoch, 2);
    ck_assert(!pi.quarantined);
    ck_assert(!pi.up); /* the re-issue is not a heartbeat of C's */
    /* `ringkv abort`: NORMAL again on its behalf (only from LEAVING),
     * then a later removal LEAVING again */
    ck_assert_int_eq(gossip_peer_status_set(net.g[0], "C", GOSSIP_STATUS_NORMAL,
                                            now, &epoch),
                     0);
    ck_assert_uint_eq(epoch, 3);
    ck_assert_int_eq(
        gossip_peer_status_set(net.g[0], "C", GOSSIP_STATUS_NORMAL, now, NULL),
        RK_EBADREQ); /* not LEAVING any more */
    for (int r = 0; r < 5; r++, now += 1000)
        net_round(&net, now, &out);
    pi = peer(net.g[1], "C", now);
    ck_assert_int_eq(pi.status, GOSSIP_STATUS_NORMAL);
    ck_assert_uint_eq(pi.status_epoch, 3);
    ck_assert(!pi.up);
    ck_assert_int_eq(gossip_peer_status_set(net.g[0], "C",
                                            GOSSIP_STATUS_LEAVING, now, &epoch),
                     0);
    ck_assert_uint_eq(epoch, 4);
    ck_assert_int_eq(gossip_peer_remove(net.g[0], "C", now, &epoch), 0);
    ck_assert_uint_eq(epoch, 5);
    for (int r = 0; r < 5; r++, now += 1000)
        net_round(&net, now, &out);
    pi = peer(net.g[1], "C", now);
    ck_assert_int_eq(pi.status, GOSSIP_STATUS_REMOVED);
    ck_assert(pi.quarantined);
    for (size_t i = 0; i < 3; i++)
        gossip_free(net.g[i]);
    gossip_out_free(&out);
}
END_TEST

START_TEST(large_state_is_split)
{
    /* A knows 40 peers with 100 tokens each (~34 KB); B starts from A as
     * its seed with 1 KiB packets, and must learn all of it exactly. */
    struct net net = {.n = 2, .name = {"A", "B"}};
    net.g[0] = mk_full("A", 1, NULL, 0, 1024);
    net.g[1] = mk_full("B", 1, (const char *const[]){"A"}, 1, 1024);
    struct gossip_out out;
    gossip_out_init(&out);
    uint8_t tok[800];
    for (int p = 0; p < 40; p++) {
        char name[16];
        snprintf(name, sizeof(name), "P%d", p);
        for (size_t i = 0; i < sizeof(tok); i++)
            tok[i] = (uint8_t)(i * 31 + (size_t)p);
        struct wire_gossip_state st[3] = {
            S(GOSSIP_KEY_STATUS, 1, "NORMAL 1"),
            {GOSSIP_KEY_TOKENS, 2, RK_SLICE(tok, sizeof(tok))},
            S(GOSSIP_KEY_RACK, 3, "r1")};
        /* injected with a large packet budget on the sending side */
        ck_assert_int_eq(inject(net.g[0], 0, name, name, 1, 0, 3, st, 3, &out),
                         0);
    }
    uint64_t tokens[200];
    ck_assert_int_eq(gossip_tokens_set(net.g[0], tokens, 200), RK_ETOOLARGE);
    uint64_t now = 1000;
    /* B's SYN introduces it to A; A's SYN then offers all 42 digests and
     * its ACK2 carries ~34 KB of deltas in 1 KiB packets. */
    for (int r = 0; r < 20 && gossip_peer_count(net.g[1]) < 42; r++) {
        net_round(&net, now, &out);
        now += 1000;
    }
    ck_assert_uint_eq(gossip_peer_count(net.g[1]), 42);
    ck_assert_uint_le(net.max_seen, 1024);
    ck_assert_uint_gt(net.packets, 40);
    for (int p = 0; p < 40; p++) {
        char name[16];
        snprintf(name, sizeof(name), "P%d", p);
        struct gossip_peer_info pa = peer(net.g[0], name, 0);
        struct gossip_peer_info pb = peer(net.g[1], name, 0);
        ck_assert_uint_eq(pb.version, pa.version);
        ck_assert_uint_eq(pb.state[GOSSIP_KEY_TOKENS].len, 800);
        ck_assert_mem_eq(pb.state[GOSSIP_KEY_TOKENS].p,
                         pa.state[GOSSIP_KEY_TOKENS].p, 800);
        ck_assert(state_is(net.g[1], name, GOSSIP_KEY_RACK, "r1"));
    }
    gossip_free(net.g[0]);
    gossip_free(net.g[1]);
    gossip_out_free(&out);
}
END_TEST

/* ---- targets, helpers, config ----------------------------------------------
 */

START_TEST(tick_targets)
{
    /* alone: a SYN to a seed, never to itself */
    const char *seeds[2] = {"A", "S1"};
    gossip *a = mk_full("A", 1, seeds, 2, 8192);
    struct gossip_out out;
    gossip_out_init(&out);
    for (int i = 0; i < 20; i++) {
        ck_assert_int_eq(gossip_tick(a, (uint64_t)i * 1000, &out), 0);
        ck_assert_uint_eq(out.n_pkts, 1);
        ck_assert_str_eq(out.pkts[0].to, "S1");
    }
    /* the heartbeat moves every tick */
    ck_assert_uint_ge(peer(a, "A", 0).version, 20);
    gossip_free(a);
    /* no seeds, no peers: nothing to send */
    a = mk("A");
    ck_assert_int_eq(gossip_tick(a, 0, &out), 0);
    ck_assert_uint_eq(out.n_pkts, 0);
    gossip_free(a);
    gossip_out_free(&out);
}
END_TEST

START_TEST(value_helpers)
{
    enum gossip_status st;
    uint64_t e;
    ck_assert_int_eq(gossip_status_parse(&st, &e, RK_SLICE("LEAVING 12", 10)),
                     0);
    ck_assert_int_eq(st, GOSSIP_STATUS_LEAVING);
    ck_assert_uint_eq(e, 12);
    ck_assert_int_eq(gossip_status_parse(&st, &e, RK_SLICE("NORMAL", 6)),
                     RK_EPROTO);
    ck_assert_int_eq(gossip_status_parse(&st, &e, RK_SLICE("NORMAL x", 8)),
                     RK_EPROTO);
    ck_assert_int_eq(gossip_status_parse(&st, &e, RK_SLICE("FOO 1", 5)),
                     RK_EPROTO);
    ck_assert_int_eq(
        gossip_status_parse(&st, &e, RK_SLICE("BOOT 99999999999999999999", 25)),
        RK_EPROTO);
    ck_assert_str_eq(gossip_status_name(GOSSIP_STATUS_REMOVED), "REMOVED");

    gossip *a = mk("A");
    uint64_t in[3] = {1, UINT64_MAX, UINT64_C(0x0102030405060708)}, back[3];
    size_t n;
    ck_assert_int_eq(gossip_tokens_set(a, in, 3), 0);
    struct gossip_peer_info pi = peer(a, "A", 0);
    ck_assert_uint_eq(pi.state[GOSSIP_KEY_TOKENS].len, 24);
    ck_assert_uint_eq(pi.state[GOSSIP_KEY_TOKENS].p[16], 0x01);
    ck_assert_int_eq(gossip_tokens_decode(back, 3, &n, pi.state[1]), 0);
    ck_assert_uint_eq(n, 3);
    ck_assert_mem_eq(back, in, sizeof(in));
    ck_assert_int_eq(gossip_tokens_decode(back, 2, &n, pi.state[1]),
                     RK_ETOOLARGE);
    ck_assert_int_eq(gossip_tokens_decode(back, 3, &n, RK_SLICE("abc", 3)),
                     RK_EPROTO);
    ck_assert_int_eq(gossip_state_set(a, GOSSIP_KEY_ADDRESS, "a\0b", 3),
                     RK_EBADREQ);
    ck_assert_int_eq(gossip_state_set(a, GOSSIP_KEY_COUNT, "x", 1), RK_EBADREQ);
    gossip_free(a);
    gossip_free(NULL);
    gossip_out_free(NULL);
}
END_TEST

START_TEST(config_validation)
{
    struct gossip_config cfg = GOSSIP_CONFIG_INIT;
    gossip *g = NULL;
    ck_assert_int_eq(gossip_new(&g, &cfg), RK_ECONFIG);
    cfg.cluster_name = "c";
    cfg.node_name = "n";
    ck_assert_int_eq(gossip_new(&g, &cfg), RK_ECONFIG); /* no secret */
    cfg.secret = (const uint8_t *)"k";
    cfg.secret_len = 1;
    cfg.generation = 0;
    ck_assert_int_eq(gossip_new(&g, &cfg), RK_ECONFIG);
    cfg.generation = 1;
    cfg.max_packet = 100;
    ck_assert_int_eq(gossip_new(&g, &cfg), RK_ECONFIG);
    cfg.max_packet = 8192;
    cfg.n_seeds = 1;
    ck_assert_int_eq(gossip_new(&g, &cfg), RK_ECONFIG); /* seeds NULL */
    cfg.n_seeds = 0;
    char longname[GOSSIP_NAME_MAX + 2];
    memset(longname, 'x', sizeof(longname) - 1);
    longname[sizeof(longname) - 1] = '\0';
    cfg.node_name = longname;
    ck_assert_int_eq(gossip_new(&g, &cfg), RK_ECONFIG);
    cfg.node_name = "n";
    ck_assert_int_eq(gossip_new(&g, &cfg), 0);
    ck_assert_uint_eq(gossip_peer_count(g), 1);
    ck_assert_int_eq(gossip_peer_get(&(struct gossip_peer_info){0}, g, 1, 0),
                     RK_ENOTFOUND);
    gossip_free(g);
}
END_TEST

/* ---- the probe detector ------------------------------------------------- */

/* A probe packet from `from` with at most one rumor. */
static int send_probe(gossip *g,
                      uint64_t now,
                      const char *from,
                      enum wire_probe_type type,
                      uint64_t seq,
                      const char *target,
                      uint64_t inc,
                      const struct wire_probe_rumor *rumor,
                      struct gossip_out *out)
{
    struct wire_key k;
    ck_assert_int_eq(
        wire_key_derive(&k, (const uint8_t *)SECRET, strlen(SECRET)), 0);
    struct wire_probe_msg m = {
        .type = type,
        .cluster = RK_SLICE(CLUSTER, strlen(CLUSTER)),
        .from = RK_SLICE(from, strlen(from)),
        .seq = seq,
        .target = RK_SLICE(target, target ? strlen(target) : 0),
        .incarnation = inc,
        .rumors = (struct wire_probe_rumor *)rumor,
        .n_rumors = rumor != NULL,
    };
    uint8_t *buf;
    size_t len;
    ck_assert_int_eq(wire_probe_msg_encode(&buf, &len, &m, &k), 0);
    int rc = gossip_recv(g, now, from, buf, len, out);
    free(buf);
    return rc;
}

static struct wire_probe_rumor rumor(const char *node,
                                     uint64_t gen,
                                     uint64_t inc,
                                     enum wire_probe_rumor_kind kind,
                                     const char *origin)
{
    struct wire_probe_rumor r = {RK_SLICE(node, strlen(node)), gen, inc, kind,
                                 RK_SLICE(origin, strlen(origin))};
    return r;
}

/* Decode the probe packets in out sent to `to` (NULL: any); returns how
 * many are of `type` (0: any), the last one in *last (release it). */
static size_t probe_pkts(const struct gossip_out *out,
                         const char *to,
                         enum wire_probe_type type,
                         struct wire_probe_msg *last)
{
    struct wire_key k;
    ck_assert_int_eq(
        wire_key_derive(&k, (const uint8_t *)SECRET, strlen(SECRET)), 0);
    size_t n = 0;
    memset(last, 0, sizeof(*last));
    for (size_t i = 0; i < out->n_pkts; i++) {
        struct wire_probe_msg m;
        if ((to != NULL && strcmp(out->pkts[i].to, to) != 0) ||
            wire_probe_msg_decode(&m, &k, out->pkts[i].buf, out->pkts[i].len) !=
                0)
            continue;
        if (type != 0 && m.type != type) {
            wire_probe_msg_release(&m);
            continue;
        }
        n++;
        wire_probe_msg_release(last);
        *last = m;
    }
    return n;
}

/* The probe tests' network (a struct net): n nodes named A, B, C, ... that
 * all know each other (with their INCARNATION, so they speak probes); `dead`
 * nodes drop what they get and send nothing. */

/* Run node i's failure-detector clock at now if it is due. */
static void
pnet_timer(struct net *p, size_t i, uint64_t now, struct gossip_out *out)
{
    if (gossip_timer_due(p->g[i]) > now)
        return;
    ck_assert_int_eq(gossip_timer(p->g[i], now, out), 0);
    pump(p, now, i, out);
}

/* Run the timers and ticks of every node from *now to until, 10 ms apart
 * (ticks every 1000 ms). */
static void
pnet_run(struct net *p, uint64_t *now, uint64_t until, struct gossip_out *out)
{
    for (; *now < until; *now += 10) {
        for (size_t i = 0; i < p->n; i++) {
            if (p->dead[i])
                continue;
            if (*now % 1000 == 0) {
                ck_assert_int_eq(gossip_tick(p->g[i], *now, out), 0);
                pump(p, *now, i, out);
            }
            pnet_timer(p, i, *now, out);
        }
    }
}

static const char *const pnames[] = {"A", "B", "C", "D", "E", "F"};

static void
pnet_init(struct net *p, size_t n, uint64_t *now, struct gossip_out *out)
{
    memset(p, 0, sizeof(*p));
    for (size_t i = 0; i < n; i++) {
        p->name[i] = pnames[i];
        /* unnumbered: the tests speak for them */
        p->g[i] = mk_any(pnames[i], 1, pnames, 1, 8192, false);
    }
    p->n = n;
    *now = 1000;
    pnet_run(p, now, 30000, out); /* anti-entropy makes them all known */
    for (size_t i = 0; i < n; i++) {
        ck_assert_uint_eq(gossip_peer_count(p->g[i]), n);
        for (size_t k = 1; k < n; k++) {
            struct gossip_peer_info pi;
            ck_assert_int_eq(gossip_peer_get(&pi, p->g[i], k, *now), 0);
            ck_assert(pi.up && pi.probes && !pi.suspect);
        }
    }
}

static void pnet_free(struct net *p)
{
    for (size_t i = 0; i < p->n; i++)
        gossip_free(p->g[i]);
}

START_TEST(probes_keep_live_peers_up)
{
    struct gossip_out out;
    gossip_out_init(&out);
    struct net p;
    uint64_t now;
    pnet_init(&p, 4, &now, &out);
    pnet_run(&p, &now, now + 60000, &out);
    for (size_t i = 0; i < 4; i++) {
        struct gossip_stats st;
        gossip_stats_get(&st, p.g[i]);
        /* one probe every probe period (a third of the interval) */
        ck_assert_uint_ge(st.probes, 170);
        ck_assert_uint_eq(st.probes_indirect, 0);
        ck_assert_uint_eq(st.suspicions, 0);
        ck_assert_uint_eq(st.convictions, 0);
        ck_assert_uint_eq(st.health, 0);
        ck_assert_uint_gt(st.rx_probe, 0);
    }
    pnet_free(&p);
    gossip_out_free(&out);
}
END_TEST

START_TEST(dead_peer_suspected_convicted_and_held_down)
{
    struct gossip_out out;
    gossip_out_init(&out);
    struct net p;
    uint64_t now;
    pnet_init(&p, 5, &now, &out);
    p.dead[4] = true; /* E */
    uint64_t killed = now;
    uint64_t down_at[4] = {0};
    while (now < killed + 30000) {
        pnet_run(&p, &now, now + 10, &out);
        for (size_t i = 0; i < 4; i++)
            if (down_at[i] == 0 && !peer(p.g[i], "E", now).up)
                down_at[i] = now;
    }
    /* Every node convicts E. The bound is in simulated time: one round of
     * the probe order (4 peers, 333 ms each), a direct and an indirect
     * probe (500 + 1000 ms), then the shortest suspicion (1000 ms) and
     * the look of a node that had no confirmation (1500 ms). */
    for (size_t i = 0; i < 4; i++) {
        ck_assert_uint_gt(down_at[i], 0);
        ck_assert_uint_le(down_at[i] - killed, 4 * 333 + 1500 + 1000 + 1500);
        struct gossip_stats st;
        gossip_stats_get(&st, p.g[i]);
        ck_assert_uint_eq(st.convictions, 1);
        ck_assert_uint_ge(st.suspicions, 1);
        struct gossip_peer_info pi = peer(p.g[i], "E", now);
        ck_assert(!pi.suspect);
    }
    /* A relayed heartbeat of E (its last versions go on travelling) does
     * not bring it back; the node tells E instead, in case it lives. */
    struct gossip_peer_info e = peer(p.g[0], "E", now);
    struct wire_gossip_state none[1];
    ck_assert_int_eq(inject(p.g[0], now, "B", "E", e.generation, e.version,
                            e.version + 5, none, 0, &out),
                     0);
    ck_assert(!peer(p.g[0], "E", now).up);
    struct wire_probe_msg m;
    ck_assert_uint_eq(probe_pkts(&out, "E", WIRE_PROBE_NEWS, &m), 1);
    ck_assert_uint_eq(m.n_rumors, 1);
    ck_assert_int_eq(m.rumors[0].kind, WIRE_PROBE_SUSPECT);
    ck_assert_uint_eq(m.rumors[0].incarnation, 0);
    wire_probe_msg_release(&m);
    /* E refuting (incarnation 1) brings it back at once. */
    struct wire_probe_rumor alive = rumor("E", 1, 1, WIRE_PROBE_ALIVE, "E");
    ck_assert_int_eq(
        send_probe(p.g[0], now, "E", WIRE_PROBE_NEWS, 0, NULL, 0, &alive, &out),
        0);
    ck_assert_uint_eq(count_events(&out, GOSSIP_EV_UP, "E"), 1);
    ck_assert(peer(p.g[0], "E", now).up);
    ck_assert_uint_eq(peer(p.g[0], "E", now).incarnation, 1);
    pnet_free(&p);
    gossip_out_free(&out);
}
END_TEST

START_TEST(suspected_node_refutes)
{
    struct gossip_out out;
    gossip_out_init(&out);
    struct net p;
    uint64_t now;
    pnet_init(&p, 3, &now, &out);
    gossip *a = p.g[0], *b = p.g[1];
    /* C tells B it suspects A: B starts a suspicion */
    struct wire_probe_rumor sus = rumor("A", 1, 0, WIRE_PROBE_SUSPECT, "C");
    ck_assert_int_eq(
        send_probe(b, now, "C", WIRE_PROBE_NEWS, 0, NULL, 0, &sus, &out), 0);
    ck_assert_uint_eq(count_events(&out, GOSSIP_EV_SUSPECT, "A"), 1);
    ck_assert(peer(b, "A", now).suspect);
    ck_assert(peer(b, "A", now).up); /* suspected is not DOWN */
    /* A hears it: it refutes with incarnation 1, in its INCARNATION state
     * and in ALIVE rumors, one of them straight to C */
    ck_assert_int_eq(
        send_probe(a, now, "B", WIRE_PROBE_NEWS, 0, NULL, 0, &sus, &out), 0);
    struct gossip_stats st;
    gossip_stats_get(&st, a);
    ck_assert_uint_eq(st.refutations, 1);
    ck_assert_uint_eq(st.health, 1); /* Lifeguard: suspected, so slower */
    ck_assert_uint_eq(peer(a, "A", now).incarnation, 1);
    ck_assert(state_is(a, "A", GOSSIP_KEY_INCARNATION, "1"));
    struct wire_probe_msg m;
    ck_assert_uint_ge(probe_pkts(&out, "C", WIRE_PROBE_NEWS, &m), 1);
    ck_assert_uint_ge(m.n_rumors, 1);
    ck_assert_int_eq(m.rumors[0].kind, WIRE_PROBE_ALIVE);
    ck_assert_uint_eq(m.rumors[0].incarnation, 1);
    wire_probe_msg_release(&m);
    /* a stale suspicion (incarnation 0) is not refuted again */
    ck_assert_int_eq(
        send_probe(a, now, "B", WIRE_PROBE_NEWS, 0, NULL, 0, &sus, &out), 0);
    gossip_stats_get(&st, a);
    ck_assert_uint_eq(st.refutations, 1);
    /* B takes the ALIVE: the suspicion at 0 ends, and B passes it on */
    struct wire_probe_rumor alive = rumor("A", 1, 1, WIRE_PROBE_ALIVE, "A");
    ck_assert_int_eq(
        send_probe(b, now, "A", WIRE_PROBE_NEWS, 0, NULL, 0, &alive, &out), 0);
    ck_assert(!peer(b, "A", now).suspect);
    ck_assert_uint_eq(peer(b, "A", now).incarnation, 1);
    ck_assert_uint_ge(probe_pkts(&out, NULL, WIRE_PROBE_NEWS, &m), 1);
    wire_probe_msg_release(&m);
    /* ... and no longer believes the old suspicion */
    ck_assert_int_eq(
        send_probe(b, now, "C", WIRE_PROBE_NEWS, 0, NULL, 0, &sus, &out), 0);
    ck_assert(!peer(b, "A", now).suspect);
    /* after that, nobody convicts A */
    pnet_run(&p, &now, now + 20000, &out);
    for (size_t i = 1; i < 3; i++)
        ck_assert(peer(p.g[i], "A", now).up);
    pnet_free(&p);
    gossip_out_free(&out);
}
END_TEST

/* A probe that was under way when its target refuted (a node thawing
 * after SIGSTOP answers its backlog late) is stale when it fails: no
 * suspicion at the new incarnation. Until 2026-12-06 such probes convicted
 * a just-thawed node a second time (test_quorum's logs). */
START_TEST(probe_older_than_refutation_is_stale)
{
    struct gossip_out out;
    gossip_out_init(&out);
    struct net p;
    uint64_t now;
    pnet_init(&p, 3, &now, &out);
    gossip *a = p.g[0];
    p.dead[1] = true; /* B stops answering */
    struct gossip_stats st;
    gossip_stats_get(&st, a);
    uint64_t indirect = st.probes_indirect;
    while (st.probes_indirect == indirect) { /* A's probe of B goes indirect */
        now += 10;
        pnet_timer(&p, 0, now, &out);
        gossip_stats_get(&st, a);
    }
    /* B refutes (it thawed and heard it was suspected) */
    struct wire_probe_rumor alive = rumor("B", 1, 1, WIRE_PROBE_ALIVE, "B");
    ck_assert_int_eq(
        send_probe(a, now, "C", WIRE_PROBE_NEWS, 0, NULL, 0, &alive, &out), 0);
    ck_assert_uint_eq(peer(a, "B", now).incarnation, 1);
    uint64_t failed = st.probes_failed;
    for (uint64_t end = now + 1500; now < end; now += 10)
        pnet_timer(&p, 0, now, &out);
    gossip_stats_get(&st, a);
    ck_assert_uint_eq(st.probes_failed, failed + 1); /* it did fail */
    ck_assert(!peer(a, "B", now).suspect);           /* but proves nothing */
    ck_assert_uint_eq(st.suspicions, 0);
    pnet_free(&p);
    gossip_out_free(&out);
}
END_TEST

/* Lifeguard: each distinct confirmation shortens the suspicion, down to
 * suspicion_ms at three; repeats from one origin count once. */
START_TEST(confirmations_shorten_suspicion)
{
    struct gossip_out out;
    gossip_out_init(&out);
    struct net p;
    uint64_t now;
    pnet_init(&p, 6, &now, &out);
    gossip *a = p.g[0];
    for (size_t i = 1; i < 6; i++)
        p.dead[i] = true; /* A alone: only what we inject reaches it */
    struct wire_probe_rumor sus = rumor("F", 1, 0, WIRE_PROBE_SUSPECT, "B");
    ck_assert_int_eq(
        send_probe(a, now, "B", WIRE_PROBE_NEWS, 0, NULL, 0, &sus, &out), 0);
    uint64_t since = now;
    ck_assert_uint_eq(gossip_timer_due(a) <= since + 5000, true);
    ck_assert_int_eq(
        send_probe(a, now, "B", WIRE_PROBE_NEWS, 0, NULL, 0, &sus, &out), 0);
    const char *others[] = {"C", "D", "E"};
    for (size_t i = 0; i < 3; i++) {
        sus.origin = RK_SLICE(others[i], 1);
        ck_assert_int_eq(send_probe(a, now, others[i], WIRE_PROBE_NEWS, 0, NULL,
                                    0, &sus, &out),
                         0);
    }
    /* fully confirmed: convicted at the shortest timeout, not before */
    struct gossip_out o2;
    gossip_out_init(&o2);
    ck_assert_int_eq(gossip_timer(a, since + 990, &o2), 0);
    ck_assert(peer(a, "F", since + 990).up);
    ck_assert_int_eq(gossip_timer(a, since + 1000, &o2), 0);
    ck_assert_uint_eq(count_events(&o2, GOSSIP_EV_DOWN, "F"), 1);
    gossip_out_free(&o2);
    pnet_free(&p);
    gossip_out_free(&out);
}
END_TEST

START_TEST(indirect_probe_relays_ack_and_nack)
{
    struct gossip_out out;
    gossip_out_init(&out);
    struct net p;
    uint64_t now;
    pnet_init(&p, 3, &now, &out);
    gossip *b = p.g[1];
    /* C asks B to probe A for its probe 77: B pings A */
    ck_assert_int_eq(
        send_probe(b, now, "C", WIRE_PROBE_PING_REQ, 77, "A", 0, NULL, &out),
        0);
    struct wire_probe_msg m;
    ck_assert_uint_eq(probe_pkts(&out, "A", WIRE_PROBE_PING, &m), 1);
    uint64_t seq = m.seq;
    ck_assert(m.target.len == 1 && m.target.p[0] == 'A');
    wire_probe_msg_release(&m);
    /* A answers (incarnation 3): B relays the ACK to C under C's seq */
    ck_assert_int_eq(
        send_probe(b, now, "A", WIRE_PROBE_ACK, seq, "A", 3, NULL, &out), 0);
    ck_assert_uint_eq(probe_pkts(&out, "C", WIRE_PROBE_ACK, &m), 1);
    ck_assert_uint_eq(m.seq, 77);
    ck_assert_uint_eq(m.incarnation, 3);
    wire_probe_msg_release(&m);
    /* A is silent this time: after the probe timeout, a NACK */
    ck_assert_int_eq(
        send_probe(b, now, "C", WIRE_PROBE_PING_REQ, 78, "A", 0, NULL, &out),
        0);
    ck_assert_uint_le(gossip_timer_due(b), now + 500);
    ck_assert_int_eq(gossip_timer(b, now + 500, &out), 0);
    ck_assert_uint_eq(probe_pkts(&out, "C", WIRE_PROBE_NACK, &m), 1);
    ck_assert_uint_eq(m.seq, 78);
    wire_probe_msg_release(&m);
    /* a target B does not know: it cannot try, and says so at once */
    ck_assert_int_eq(
        send_probe(b, now, "C", WIRE_PROBE_PING_REQ, 79, "Z", 0, NULL, &out),
        0);
    ck_assert_uint_eq(probe_pkts(&out, "C", WIRE_PROBE_NACK, &m), 1);
    ck_assert_uint_eq(m.seq, 79);
    ck_assert_uint_eq(m.incarnation, WIRE_PROBE_NACK_UNTRIED);
    wire_probe_msg_release(&m);
    /* a PING for a name that is not ours (an old address) gets nothing */
    ck_assert_int_eq(
        send_probe(b, now, "C", WIRE_PROBE_PING, 5, "Z", 0, NULL, &out), 0);
    ck_assert_uint_eq(probe_pkts(&out, NULL, 0, &m), 0);
    pnet_free(&p);
    gossip_out_free(&out);
}
END_TEST

/* A silent peer that none of the relays knows (a cluster still forming):
 * the relays say they could not try, and the probe proves nothing. */
START_TEST(unknown_to_relays_is_not_suspected)
{
    struct gossip_out out;
    gossip_out_init(&out);
    struct net p;
    memset(&p, 0, sizeof(p));
    for (size_t i = 0; i < 3; i++) {
        p.name[i] = pnames[i];
        p.g[i] = mk(pnames[i]);
    }
    p.n = 3;
    const char *peers[] = {"B", "C", "X"};
    for (size_t i = 0; i < 3; i++) {
        struct wire_gossip_state st[2] = {S(GOSSIP_KEY_ADDRESS, 1, peers[i]),
                                          S(GOSSIP_KEY_INCARNATION, 2, "0")};
        ck_assert_int_eq(
            inject(p.g[0], 1000, peers[i], peers[i], 1, 0, 2, st, 2, &out), 0);
    }
    /* only A's clock runs (no gossip round: B and C never learn X); A
     * judges X by probes once it has been UP 10 intervals */
    for (uint64_t t = 1000; t < 40000; t += 10)
        pnet_timer(&p, 0, t, &out);
    struct gossip_stats st;
    gossip_stats_get(&st, p.g[0]);
    ck_assert_uint_gt(st.probes_indirect, 5); /* X was probed, in vain */
    ck_assert_uint_eq(st.probes_failed, 0);
    ck_assert_uint_eq(st.suspicions, 0);
    ck_assert_uint_eq(st.health, 0);
    ck_assert(!peer(p.g[0], "X", 40000).suspect);
    pnet_free(&p);
    gossip_out_free(&out);
}
END_TEST

/* A peer is judged by probes only once it has been UP 10 intervals: in a
 * cluster that forms, the others may not know it yet. */
START_TEST(new_peer_settles_before_probes)
{
    gossip *a = mk("A");
    struct gossip_out out;
    gossip_out_init(&out);
    struct wire_gossip_state st[2] = {S(GOSSIP_KEY_ADDRESS, 1, "X"),
                                      S(GOSSIP_KEY_INCARNATION, 2, "0")};
    ck_assert_int_eq(inject(a, 1000, "X", "X", 1, 0, 2, st, 2, &out), 0);
    ck_assert(peer(a, "X", 1000).up && peer(a, "X", 1000).probes);
    uint64_t first_ping = 0;
    for (uint64_t t = 1000; t < 13000 && first_ping == 0; t += 10) {
        if (gossip_timer_due(a) > t)
            continue;
        ck_assert_int_eq(gossip_timer(a, t, &out), 0);
        struct wire_probe_msg m;
        if (probe_pkts(&out, "X", WIRE_PROBE_PING, &m) > 0)
            first_ping = t;
        wire_probe_msg_release(&m);
    }
    ck_assert_uint_ge(first_ping, 1000 + 10 * 1000);
    ck_assert_uint_lt(first_ping, 1000 + 10 * 1000 + 400);
    /* a suspicion of a peer that young is not taken up either */
    gossip *b = mk("B");
    ck_assert_int_eq(inject(b, 1000, "X", "X", 1, 0, 2, st, 2, &out), 0);
    struct wire_probe_rumor sus = rumor("X", 1, 0, WIRE_PROBE_SUSPECT, "C");
    ck_assert_int_eq(
        send_probe(b, 5000, "C", WIRE_PROBE_NEWS, 0, NULL, 0, &sus, &out), 0);
    ck_assert(!peer(b, "X", 5000).suspect);
    ck_assert_int_eq(
        send_probe(b, 11000, "C", WIRE_PROBE_NEWS, 0, NULL, 0, &sus, &out), 0);
    ck_assert(peer(b, "X", 11000).suspect);
    gossip_free(b);
    gossip_out_free(&out);
    gossip_free(a);
}
END_TEST

/* Mixed versions: a peer that announces no INCARNATION (it predates the
 * probes) is never sent a probe packet, and such a node's decoder refuses
 * probe packets as not gossip at all (dropped and counted, nothing else). */
START_TEST(old_peer_is_not_probed)
{
    gossip *a = mk("A");
    struct gossip_out out;
    gossip_out_init(&out);
    struct wire_gossip_state st[2] = {S(GOSSIP_KEY_STATUS, 1, "NORMAL 1"),
                                      S(GOSSIP_KEY_ADDRESS, 2, "OLD")};
    ck_assert_int_eq(inject(a, 1000, "OLD", "OLD", 1, 0, 2, st, 2, &out), 0);
    ck_assert(peer(a, "OLD", 1000).up);
    ck_assert(!peer(a, "OLD", 1000).probes);
    for (uint64_t t = 1000; t < 20000; t += 10) {
        if (gossip_timer_due(a) <= t) {
            ck_assert_int_eq(gossip_timer(a, t, &out), 0);
            struct wire_probe_msg m;
            ck_assert_uint_eq(probe_pkts(&out, NULL, 0, &m), 0);
        }
    }
    struct gossip_stats stats;
    gossip_stats_get(&stats, a);
    ck_assert_uint_eq(stats.probes, 0);
    ck_assert_uint_eq(stats.tx_probe, 0);

    struct wire_key k;
    ck_assert_int_eq(
        wire_key_derive(&k, (const uint8_t *)SECRET, strlen(SECRET)), 0);
    struct wire_probe_msg pm = {.type = WIRE_PROBE_PING,
                                .cluster = RK_SLICE(CLUSTER, 4),
                                .from = RK_SLICE("A", 1),
                                .seq = 1,
                                .target = RK_SLICE("OLD", 3)};
    uint8_t *buf;
    size_t len;
    ck_assert_int_eq(wire_probe_msg_encode(&buf, &len, &pm, &k), 0);
    struct wire_gossip_msg gm;
    ck_assert_int_eq(wire_gossip_msg_decode(&gm, &k, buf, len), RK_EPROTO);
    free(buf);
    /* With the detector off a node announces no INCARNATION and answers no
     * probe. */
    struct gossip_config cfg = GOSSIP_CONFIG_INIT;
    cfg.cluster_name = CLUSTER;
    cfg.node_name = "Q";
    cfg.secret = (const uint8_t *)SECRET;
    cfg.secret_len = strlen(SECRET);
    cfg.probe = false;
    gossip *q;
    ck_assert_int_eq(gossip_new(&q, &cfg), 0);
    ck_assert_uint_eq(peer(q, "Q", 0).state[GOSSIP_KEY_INCARNATION].len, 0);
    ck_assert_uint_eq(gossip_timer_due(q), UINT64_MAX);
    ck_assert_int_eq(
        send_probe(q, 1000, "A", WIRE_PROBE_PING, 1, "Q", 0, NULL, &out), 0);
    ck_assert_uint_eq(out.n_pkts, 0);
    gossip_free(q);
    gossip_out_free(&out);
    gossip_free(a);
}
END_TEST

#ifdef RK_TEST_OOM
/* Every allocation of gossip_new fails in turn: -ENOMEM, nothing leaked. */
START_TEST(new_out_of_memory_unwinds)
{
    struct wire_key k;
    ck_assert_int_eq(wire_key_derive(&k, (const uint8_t *)"x", 1), 0);
    const char *seeds[2] = {"S1", "S2"};
    struct gossip_config cfg = GOSSIP_CONFIG_INIT;
    cfg.cluster_name = CLUSTER;
    cfg.node_name = "A";
    cfg.secret = (const uint8_t *)SECRET;
    cfg.secret_len = strlen(SECRET);
    cfg.seeds = seeds;
    cfg.n_seeds = 2;
    long limit;
    for (limit = 0; limit < 1000; limit++) {
        gossip *g = NULL;
        long live = oom_live;
        oom_countdown = limit;
        int err = gossip_new(&g, &cfg);
        oom_countdown = -1;
        if (err == 0) {
            gossip_free(g);
            ck_assert_int_eq(oom_live, live);
            break;
        }
        ck_assert_msg(err == -ENOMEM, "limit %ld: %s", limit, rk_strerror(err));
        ck_assert_ptr_null(g);
        ck_assert_int_eq(oom_live, live);
    }
    ck_assert_int_gt(limit, 0);
    ck_assert_int_lt(limit, 1000);
}
END_TEST

/* A whole exchange (states, an ACK with deltas, a SYN, a tick, a
 * removenode) with every allocation failing in turn: each call returns 0 or
 * -ENOMEM (removenode may not find X if the ACK failed), and after
 * gossip_free nothing is left allocated. */
START_TEST(exchange_out_of_memory_leaks_nothing)
{
    struct wire_key k;
    ck_assert_int_eq(
        wire_key_derive(&k, (const uint8_t *)SECRET, strlen(SECRET)), 0);
    struct wire_gossip_state st[3] = {S(GOSSIP_KEY_STATUS, 1, "NORMAL 4"),
                                      S(GOSSIP_KEY_ADDRESS, 2, "X"),
                                      S(GOSSIP_KEY_LOAD, 3, "10")};
    struct wire_gossip_delta dl[2] = {{RK_SLICE("X", 1), 1, 0, 3, st, 3},
                                      {RK_SLICE("Y", 1), 2, 0, 2, st, 2}};
    struct wire_gossip_digest rq[2] = {{RK_SLICE("A", 1), 0, 0},
                                       {RK_SLICE("Z", 1), 1, 1}};
    struct wire_gossip_msg ack = {.type = WIRE_GOSSIP_ACK,
                                  .cluster = RK_SLICE(CLUSTER, 4),
                                  .from = RK_SLICE("X", 1),
                                  .digests = rq,
                                  .n_digests = 2,
                                  .deltas = dl,
                                  .n_deltas = 2};
    uint8_t *ack_buf, *syn_buf;
    size_t ack_len, syn_len;
    ck_assert_int_eq(wire_gossip_msg_encode(&ack_buf, &ack_len, &ack, &k), 0);
    struct wire_gossip_msg syn = {.type = WIRE_GOSSIP_SYN,
                                  .cluster = RK_SLICE(CLUSTER, 4),
                                  .from = RK_SLICE("Y", 1),
                                  .digests = rq,
                                  .n_digests = 2};
    ck_assert_int_eq(wire_gossip_msg_encode(&syn_buf, &syn_len, &syn, &k), 0);
    struct gossip_config cfg = GOSSIP_CONFIG_INIT;
    cfg.cluster_name = CLUSTER;
    cfg.node_name = "A";
    cfg.secret = (const uint8_t *)SECRET;
    cfg.secret_len = strlen(SECRET);
    long limit;
    for (limit = 0; limit < 5000; limit++) {
        long live = oom_live;
        gossip *g = NULL;
        struct gossip_out out;
        gossip_out_init(&out);
        int errs[7] = {0};
        oom_countdown = limit;
        errs[0] = gossip_new(&g, &cfg);
        if (errs[0] == 0) {
            errs[1] = gossip_state_set(g, GOSSIP_KEY_ADDRESS, "A", 1);
            errs[2] = gossip_status_set(g, GOSSIP_STATUS_NORMAL, 0, NULL);
            errs[3] = gossip_recv(g, 1000, "X", ack_buf, ack_len, &out);
            errs[4] = gossip_recv(g, 1500, "Y", syn_buf, syn_len, &out);
            errs[5] = gossip_tick(g, 2000, &out);
            errs[6] = gossip_peer_remove(g, "X", 3000, NULL);
        }
        bool failed = oom_countdown == 0;
        oom_countdown = -1;
        for (int i = 0; i < 7; i++)
            ck_assert_msg(errs[i] == 0 || errs[i] == -ENOMEM ||
                              (i == 6 && errs[i] == RK_ENOTFOUND),
                          "limit %ld call %d: %s", limit, i,
                          rk_strerror(errs[i]));
        gossip_out_free(&out);
        gossip_free(g);
        ck_assert_msg(oom_live == live, "limit %ld: %ld blocks leaked", limit,
                      oom_live - live);
        if (!failed)
            break; /* the whole sequence ran without hitting the limit */
    }
    ck_assert_int_gt(limit, 10);
    ck_assert_int_lt(limit, 5000);
    free(ack_buf);
    free(syn_buf);
}
END_TEST
#endif

/* ---- wall clocks ----------------------------------------------------------
 */

#define TEN_MIN INT64_C(600000)

static void net_free(struct net *net, struct gossip_out *out)
{
    for (size_t i = 0; i < net->n; i++)
        gossip_free(net->g[i]);
    gossip_out_free(out);
}

static struct gossip_clock_view view(gossip *g, uint64_t now)
{
    struct gossip_clock_view v;
    gossip_clock_view(&v, g, now, 500);
    return v;
}

/* One clock 10 minutes ahead of two: that node alone is skewed, and each
 * node's estimate of each peer is exact (no network delay here). */
START_TEST(one_clock_ahead_is_skewed_alone)
{
    struct net net;
    struct gossip_out out;
    uint64_t now =
        abc_formed_clocks(&net, &out, (const int64_t[]){0, 0, TEN_MIN});
    struct gossip_peer_info pi = peer(net.g[0], "C", now);
    ck_assert(pi.clock_known);
    ck_assert_int_eq(pi.clock_offset_ms, TEN_MIN);
    ck_assert(state_is(net.g[0], "C", GOSSIP_KEY_CLOCK, "1"));
    pi = peer(net.g[2], "B", now);
    ck_assert(pi.clock_known);
    ck_assert_int_eq(pi.clock_offset_ms, -TEN_MIN);
    struct gossip_clock_view v = view(net.g[2], now);
    ck_assert_uint_eq(v.live, 2);
    ck_assert_uint_eq(v.fresh, 2);
    ck_assert_uint_eq(v.far, 2);
    ck_assert(v.skewed);
    ck_assert_int_eq(v.offset_ms, TEN_MIN);
    for (size_t i = 0; i < 2; i++) {
        v = view(net.g[i], now);
        ck_assert_uint_eq(v.fresh, 2);
        ck_assert_uint_eq(v.far, 1);
        ck_assert(!v.skewed);
        ck_assert_int_eq(v.offset_ms, 0); /* the middle value nearer 0 */
    }
    /* off: nothing is far */
    gossip_clock_view(&v, net.g[2], now, 0);
    ck_assert_uint_eq(v.far, 0);
    ck_assert(!v.skewed);
    net_free(&net, &out);
}
END_TEST

/* Behind counts as much as ahead; within max_drift_ms is no skew. */
START_TEST(clock_behind_is_skewed_near_is_not)
{
    struct net net;
    struct gossip_out out;
    uint64_t now =
        abc_formed_clocks(&net, &out, (const int64_t[]){200, -250, -TEN_MIN});
    struct gossip_clock_view v = view(net.g[2], now);
    ck_assert(v.skewed);
    ck_assert_int_lt(v.offset_ms, -TEN_MIN + 1000);
    for (size_t i = 0; i < 2; i++) {
        v = view(net.g[i], now);
        ck_assert_uint_eq(v.far, 1); /* C; A and B are 450 ms apart */
        ck_assert(!v.skewed);
    }
    ck_assert_int_eq(peer(net.g[0], "B", now).clock_offset_ms, -450);
    net_free(&net, &out);
}
END_TEST

/* A clock put right is no longer skewed once its newer stamps have
 * replaced the ones kept; estimates go stale when no packet comes. */
START_TEST(clock_put_right_and_stale_estimates)
{
    struct net net;
    struct gossip_out out;
    uint64_t now =
        abc_formed_clocks(&net, &out, (const int64_t[]){0, 0, TEN_MIN});
    ck_assert(view(net.g[2], now).skewed);
    net.wall_off[2] = 0;
    now = net_rounds(&net, now, 10, &out);
    struct gossip_clock_view v = view(net.g[2], now);
    ck_assert(!v.skewed);
    ck_assert_uint_eq(v.far, 0);
    ck_assert_int_eq(v.offset_ms, 0);
    /* nothing heard for more than the freshness window (interval 1 s) */
    uint64_t later = now + GOSSIP_CLOCK_FRESH_INTERVALS * 1000 + 1000;
    v = view(net.g[0], later);
    ck_assert_uint_eq(v.fresh, 0);
    ck_assert(!peer(net.g[0], "C", later).clock_known);
    net_free(&net, &out);
}
END_TEST

/* C's packets from A and B, emitted over `rounds` ticks of 200 ms from
 * `now` and held back (C stopped); returns how many, at most `cap`. */
static size_t held_for_c(struct net *net,
                         uint64_t now,
                         int rounds,
                         struct flight *q,
                         size_t cap,
                         struct gossip_out *out)
{
    size_t n = 0;
    for (int r = 0; r < rounds; r++, now += 200)
        for (size_t i = 0; i < 2; i++) {
            net_wall(net, i, now);
            ck_assert_int_eq(gossip_tick(net->g[i], now, out), 0);
            for (size_t k = 0; k < out->n_pkts; k++) {
                if (strcmp(out->pkts[k].to, "C") != 0 || n == cap)
                    continue;
                q[n].from = i;
                q[n].to = now; /* when it was sent (and arrived) */
                q[n].len = out->pkts[k].len;
                q[n].buf = malloc(q[n].len);
                memcpy(q[n].buf, out->pkts[k].buf, q[n].len);
                n++;
            }
        }
    return n;
}

/* Regression (stopped_node_judges_skew): C stopped for 6 s reads, when it
 * goes on, the packets that waited for it (those of the first 4 s: more
 * than the samples kept of each peer). Compared with its clock at the
 * reading, their stamps made A and B look 2-6 s behind and C skewed,
 * ahead; compared with their arrival (gossip_arrival_set, the kernel's
 * stamp in ringkvd), they are as fresh as they were. */
START_TEST(clock_packets_read_late_judged_by_arrival)
{
    for (int by_arrival = 0; by_arrival < 2; by_arrival++) {
        struct net net;
        struct gossip_out out;
        uint64_t now =
            abc_formed_clocks(&net, &out, (const int64_t[]){0, 0, 0});
        ck_assert(!view(net.g[2], now).skewed);
        struct flight q[256];
        size_t n = held_for_c(&net, now, 20, q, 256, &out);
        uint64_t late = now + 6000; /* C goes on */
        int from[2] = {0, 0};
        for (size_t k = 0; k < n; k++) {
            net_wall(&net, 2, late);
            if (by_arrival)
                gossip_arrival_set(net.g[2], net.wall_base + q[k].to);
            ck_assert_int_eq(gossip_recv(net.g[2], late, net.name[q[k].from],
                                         q[k].buf, q[k].len, &out),
                             0);
            from[q[k].from]++;
            free(q[k].buf);
        }
        ck_assert_int_gt(from[0], 0);
        ck_assert_int_gt(from[1], 0);
        struct gossip_clock_view v = view(net.g[2], late);
        ck_assert_uint_eq(v.fresh, 2);
        if (by_arrival) {
            ck_assert(!v.skewed);
            ck_assert_uint_eq(v.far, 0);
            ck_assert_int_eq(v.offset_ms, 0);
            /* an arrival holds for one packet, even one refused: A's
             * next is compared with C's clock, not with that arrival */
            gossip_arrival_set(net.g[2], net.wall_base + now);
            ck_assert_int_ne(
                gossip_recv(net.g[2], late, "A", (const uint8_t *)"x", 1, &out),
                0);
            bool sent = false;
            for (uint64_t t = late; !sent; t += 200) {
                net_wall(&net, 0, t);
                ck_assert_int_eq(gossip_tick(net.g[0], t, &out), 0);
                for (size_t k = 0; k < out.n_pkts && !sent; k++) {
                    if (strcmp(out.pkts[k].to, "C") != 0)
                        continue;
                    size_t len = out.pkts[k].len;
                    uint8_t *pkt = malloc(len); /* out is cleared */
                    memcpy(pkt, out.pkts[k].buf, len);
                    net_wall(&net, 2, t);
                    ck_assert_int_eq(
                        gossip_recv(net.g[2], t, "A", pkt, len, &out), 0);
                    free(pkt);
                    sent = true;
                }
                ck_assert_uint_lt(t, late + 20000);
            }
            ck_assert_int_eq(peer(net.g[2], "A", late).clock_offset_ms, 0);
        } else {
            ck_assert(v.skewed); /* what the reading alone concluded */
            ck_assert_int_ge(v.offset_ms, 2000);
        }
        net_free(&net, &out);
    }
}
END_TEST

/* Two nodes whose clocks differ: no majority says which one is wrong,
 * and both are skewed. */
START_TEST(two_nodes_both_skewed)
{
    struct net net;
    struct gossip_out out;
    uint64_t now =
        abc_formed_clocks(&net, &out, (const int64_t[]){0, TEN_MIN, 0});
    /* C stops: once it is DOWN, A and B are two */
    gossip_free(net.g[2]);
    net.n = 2;
    now = net_rounds(&net, now, 30, &out);
    ck_assert(!peer(net.g[0], "C", now).up);
    ck_assert(view(net.g[0], now).skewed);
    ck_assert(view(net.g[1], now).skewed);
    net_free(&net, &out);
}
END_TEST

/* A node with estimates of no more than half its live peers does not
 * judge: C sends no stamps, B is 10 minutes ahead of A. */
START_TEST(too_few_estimates_no_verdict)
{
    struct net net;
    struct gossip_out out;
    uint64_t now =
        abc_formed_clocks(&net, &out, (const int64_t[]){0, TEN_MIN, NO_WALL});
    for (size_t i = 0; i < 2; i++) {
        struct gossip_clock_view v = view(net.g[i], now);
        ck_assert_uint_eq(v.live, 2);
        ck_assert_uint_eq(v.fresh, 1);
        ck_assert_uint_eq(v.far, 1);
        ck_assert(!v.skewed);
    }
    net_free(&net, &out);
}
END_TEST

/* Stamps go only to peers that announce CLOCK: a node without a wall
 * clock (as one that predates it) announces nothing, gets five-element
 * packets only, and is not estimated. */
START_TEST(unstamped_peer_gets_no_stamps)
{
    struct net net = {.n = 2, .name = {"A", "B"}};
    net.wall_base = UINT64_C(1796000000000);
    net.no_wall[1] = true;
    struct gossip_out out;
    gossip_out_init(&out);
    for (size_t i = 0; i < 2; i++)
        net.g[i] = mk_full(net.name[i], 1, (const char *const[]){"A"}, 1, 8192);
    uint64_t now = net_rounds(&net, 0, 5, &out);
    ck_assert(!state_is(net.g[0], "B", GOSSIP_KEY_CLOCK, "1"));
    ck_assert(!peer(net.g[0], "B", now).clock_known);
    ck_assert(!peer(net.g[1], "A", now).clock_known);
    /* what A sends B now carries no stamp */
    net_wall(&net, 0, now);
    ck_assert_int_eq(gossip_tick(net.g[0], now, &out), 0);
    struct wire_key k;
    wire_key_derive(&k, (const uint8_t *)SECRET, strlen(SECRET));
    size_t seen = 0;
    for (size_t i = 0; i < out.n_pkts; i++) {
        struct wire_gossip_msg m;
        if (strcmp(out.pkts[i].to, "B") != 0 ||
            wire_gossip_msg_decode(&m, &k, out.pkts[i].buf, out.pkts[i].len))
            continue;
        ck_assert_uint_eq(m.wall_ms, 0);
        wire_gossip_msg_release(&m);
        seen++;
    }
    ck_assert_uint_gt(seen, 0);
    net_free(&net, &out);
}
END_TEST

/* ---- replays and reflection (fresh.c) ----------------------------------- */

struct captured {
    uint8_t buf[8192];
    size_t len;
};

/* The first packet in out to `to` (of the probe family if probe), copied
 * into *c; false if none. */
static bool capture(struct captured *c,
                    const struct gossip_out *out,
                    const char *to,
                    bool probe)
{
    for (size_t i = 0; i < out->n_pkts; i++) {
        const struct gossip_packet *p = &out->pkts[i];
        if (strcmp(p->to, to) != 0 ||
            wire_probe_is(p->buf, p->len) != (int)probe)
            continue;
        ck_assert_uint_le(p->len, sizeof(c->buf));
        memcpy(c->buf, p->buf, p->len);
        c->len = p->len;
        return true;
    }
    return false;
}

/* A SYN g sends `to` by its next ticks from *now (not delivered). */
static void
capture_syn(struct captured *c, gossip *g, const char *to, uint64_t *now)
{
    struct gossip_out out;
    gossip_out_init(&out);
    bool got = false;
    for (int i = 0; i < 50 && !got; i++, *now += 1000) {
        ck_assert_int_eq(gossip_tick(g, *now, &out), 0);
        got = capture(c, &out, to, false);
    }
    ck_assert(got);
    gossip_out_free(&out);
}

static uint64_t replays(gossip *g)
{
    struct gossip_stats st;
    gossip_stats_get(&st, g);
    return st.rx_replayed;
}

/* Bytes out sends to `to`. */
static size_t bytes_to(const struct gossip_out *out, const char *to)
{
    size_t n = 0;
    for (size_t i = 0; i < out->n_pkts; i++)
        if (strcmp(out->pkts[i].to, to) == 0)
            n += out->pkts[i].len;
    return n;
}

/* The same datagram a second time, a minute later, is dropped and
 * counted; so is one delivered earlier after later ones; one never
 * delivered is taken out of order within the window, dropped once it falls
 * more than a window behind; a packet of the sender's previous boot is
 * dropped, its restart heard at once; an unnumbered packet in the name of
 * a node that numbers its packets is dropped. Until 2026-12-06 a SYN
 * replayed a minute later was answered like a new one. */
START_TEST(replayed_datagram_is_dropped)
{
    struct net net;
    struct gossip_out out;
    uint64_t now = abc_formed(&net, &out);
    gossip *a = net.g[0], *b = net.g[1];
    ck_assert_uint_eq(replays(a), 0); /* nothing is a replay in a healthy
                                         cluster */
    struct captured p1, p2, old;
    capture_syn(&p1, b, "A", &now);
    capture_syn(&p2, b, "A", &now);

    /* A has news for B (a heartbeat): the first gets an ACK */
    ck_assert_int_eq(gossip_tick(a, now, &out), 0);
    ck_assert_int_eq(gossip_recv(a, now, "B", p1.buf, p1.len, &out), 0);
    ck_assert_uint_gt(pkts_to(&out, "B"), 0);
    ck_assert_uint_eq(replays(a), 0);
    ck_assert_int_eq(gossip_tick(a, now, &out), 0);
    ck_assert_int_eq(gossip_recv(a, now + 60000, "B", p1.buf, p1.len, &out), 0);
    ck_assert_uint_eq(out.n_pkts, 0);
    ck_assert_uint_eq(replays(a), 1);
    ck_assert_uint_eq(count_events(&out, GOSSIP_EV_REPLAYED, "B"), 1);
    ck_assert_str_eq(out.events[0].addr, "B");

    /* reordered: p2 then p1 again; p2 is new, p1 was seen */
    ck_assert_int_eq(gossip_recv(a, now, "B", p2.buf, p2.len, &out), 0);
    ck_assert_uint_eq(replays(a), 1);
    ck_assert_int_eq(gossip_recv(a, now, "B", p1.buf, p1.len, &out), 0);
    ck_assert_uint_eq(replays(a), 2);
    ck_assert_int_eq(gossip_recv(a, now, "B", p2.buf, p2.len, &out), 0);
    ck_assert_uint_eq(replays(a), 3);

    /* a packet never delivered, taken out of order while within the
     * window, and not once it is more than a window behind */
    struct captured q1, q2;
    capture_syn(&q1, b, "A", &now);
    capture_syn(&q2, b, "A", &now);
    ck_assert_int_eq(gossip_recv(a, now, "B", q2.buf, q2.len, &out), 0);
    ck_assert_int_eq(gossip_recv(a, now, "B", q1.buf, q1.len, &out), 0);
    ck_assert_uint_eq(replays(a), 3);
    capture_syn(&old, b, "A", &now);
    for (int i = 0; i < 1100; i++, now += 1000)
        ck_assert_int_eq(gossip_tick(b, now, &out), 0);
    capture_syn(&p1, b, "A", &now);
    ck_assert_int_eq(gossip_recv(a, now, "B", p1.buf, p1.len, &out), 0);
    ck_assert_uint_eq(replays(a), 3);
    ck_assert_int_eq(gossip_recv(a, now, "B", old.buf, old.len, &out), 0);
    ck_assert_uint_eq(replays(a), 4);

    /* B restarts (generation 2, packets counted from 1 again): heard at
     * once; then a packet of its previous boot, never delivered, is not */
    capture_syn(&old, b, "A", &now);
    gossip_free(b);
    b = net.g[1] = mk_full("B", 2, (const char *const[]){"A"}, 1, 8192);
    capture_syn(&p1, b, "A", &now);
    ck_assert_int_eq(gossip_recv(a, now, "B", p1.buf, p1.len, &out), 0);
    ck_assert_uint_eq(replays(a), 4);
    ck_assert_uint_gt(pkts_to(&out, "B"), 0);
    ck_assert_int_eq(gossip_recv(a, now, "B", old.buf, old.len, &out), 0);
    ck_assert_uint_eq(replays(a), 5);
    ck_assert_uint_eq(out.n_pkts, 0);

    /* unnumbered, in the name of B, which numbers its packets */
    struct wire_gossip_digest dg[1] = {{RK_SLICE("B", 1), 2, 1000}};
    struct wire_gossip_msg syn = {
        .type = WIRE_GOSSIP_SYN, .digests = dg, .n_digests = 1};
    ck_assert_int_eq(send_msg(a, now, "B", SECRET, CLUSTER, &syn, &out), 0);
    ck_assert_uint_eq(replays(a), 6);
    ck_assert_uint_eq(out.n_pkts, 0);
    net_free(&net, &out);
}
END_TEST

/* A probe replayed: the first PING is answered, the same again is not. */
START_TEST(replayed_probe_is_dropped)
{
    struct net net;
    struct gossip_out out;
    uint64_t now = abc_formed(&net, &out);
    now = net_rounds(&net, now, 12, &out); /* settled: probed */
    gossip *a = net.g[0], *b = net.g[1];
    struct captured ping;
    bool got = false;
    for (int i = 0; i < 200 && !got; i++, now += 50) {
        if (gossip_timer_due(b) <= now) {
            ck_assert_int_eq(gossip_timer(b, now, &out), 0);
            got = capture(&ping, &out, "A", true);
        }
    }
    ck_assert(got);
    struct wire_key k;
    wire_key_derive(&k, (const uint8_t *)SECRET, strlen(SECRET));
    struct wire_probe_msg m;
    ck_assert_int_eq(wire_probe_msg_decode(&m, &k, ping.buf, ping.len), 0);
    ck_assert_uint_ne(m.boot, 0); /* numbered */
    wire_probe_msg_release(&m);
    ck_assert_int_eq(gossip_recv(a, now, "B", ping.buf, ping.len, &out), 0);
    ck_assert_uint_eq(probe_pkts(&out, "B", WIRE_PROBE_ACK, &m), 1);
    wire_probe_msg_release(&m);
    ck_assert_int_eq(gossip_recv(a, now + 5000, "B", ping.buf, ping.len, &out),
                     0);
    ck_assert_uint_eq(out.n_pkts, 0);
    ck_assert_uint_eq(replays(a), 1);
    net_free(&net, &out);
}
END_TEST

/* A SYN of B's, sent again with a forged source V: a node that knows B
 * answers B at B's gossiped address and sends V nothing; a node that knows
 * nobody (just restarted) sends V no more bytes than it got. Until
 * 2026-12-06 the answer went to V: ACK and SYN, 5.2 times the bytes. */
START_TEST(reflected_syn_gets_no_reply_at_source)
{
    struct net net;
    struct gossip_out out;
    uint64_t now = abc_formed(&net, &out);
    gossip *b = net.g[1], *c = net.g[2];
    struct captured syn;
    capture_syn(&syn, b, "A", &now);                /* never delivered to A */
    ck_assert_int_eq(gossip_tick(c, now, &out), 0); /* news for B */
    ck_assert_int_eq(gossip_recv(c, now, "V:7000", syn.buf, syn.len, &out), 0);
    size_t to_v = bytes_to(&out, "V:7000");
    ck_assert_uint_eq(to_v, 0);
    size_t to_b = bytes_to(&out, "B");
    ck_assert_uint_gt(to_b, 0);
    ck_assert_int_eq(gossip_tick(c, now, &out), 0);
    ck_assert_int_eq(gossip_recv(c, now, "V:7000", syn.buf, syn.len, &out), 0);
    ck_assert_uint_eq(out.n_pkts, 0);
    ck_assert_uint_eq(replays(c), 1);

    /* a node that knows nobody: B's state the SYN carries (A is B's seed)
     * teaches it B, whose ADDRESS is not V: V gets at most what it sent */
    gossip *x = mk("X");
    ck_assert_int_eq(gossip_recv(x, now, "V:7000", syn.buf, syn.len, &out), 0);
    ck_assert_uint_le(bytes_to(&out, "V:7000"), syn.len);
    ck_assert_uint_eq(pkts_to(&out, "B"), 0);
    ck_assert_int_eq(peer(x, "B", now).generation, 1);
    printf("reflected SYN of %zu bytes: %zu bytes to the forged source from "
           "a node that knows its sender (%zu to the sender), %zu from one "
           "that does not\n",
           syn.len, to_v, to_b, bytes_to(&out, "V:7000"));
    gossip_free(x);
    net_free(&net, &out);
}
END_TEST

/* D joins through seed A but its packets come from an address that is
 * not the one it gossips ("D" behind a name, say): A learns D from its
 * first SYN (which carries D's state) and answers little at the source;
 * from D's next SYN on, D is a known member and A answers in full, at
 * "D", so D learns the cluster. */
START_TEST(joiner_heard_through_seed_at_its_address)
{
    struct net net;
    struct gossip_out out;
    uint64_t now = abc_formed(&net, &out);
    gossip *a = net.g[0];
    gossip *d = mk_full("D", 1, (const char *const[]){"A"}, 1, 8192);
    net.g[3] = d;
    net.name[3] = "D";
    net.n = 4;
    struct captured syn;
    capture_syn(&syn, d, "A", &now);
    const char *src = "10.0.0.4:7000";
    ck_assert_int_eq(gossip_recv(a, now, src, syn.buf, syn.len, &out), 0);
    ck_assert_int_eq(peer(a, "D", now).generation, 1);
    ck_assert(peer(a, "D", now).up); /* first-hand */
    ck_assert_uint_le(bytes_to(&out, src), syn.len);
    ck_assert_uint_eq(pkts_to(&out, "D"), 0);

    capture_syn(&syn, d, "A", &now);
    ck_assert_int_eq(gossip_recv(a, now, src, syn.buf, syn.len, &out), 0);
    ck_assert_uint_eq(pkts_to(&out, src), 0);
    ck_assert_uint_gt(pkts_to(&out, "D"), 0); /* a SYN back: what D lacks */
    pump(&net, now, 0, &out);
    ck_assert_uint_eq(gossip_peer_count(d), 4);
    ck_assert_int_eq(peer(d, "B", now).status, GOSSIP_STATUS_NORMAL);
    net_free(&net, &out);
}
END_TEST

/* B restarts at another address: its first SYN to its seed A carries its
 * new state, and A answers at the new address, not the one it held. */
START_TEST(restarted_member_answered_at_its_new_address)
{
    struct net net;
    struct gossip_out out;
    uint64_t now = abc_formed(&net, &out);
    gossip *a = net.g[0];
    gossip_free(net.g[1]);
    gossip *b = net.g[1] = mk_full("B", 2, (const char *const[]){"A"}, 1, 8192);
    ck_assert_int_eq(gossip_state_set(b, GOSSIP_KEY_ADDRESS, "B2", 2), 0);
    struct captured syn;
    capture_syn(&syn, b, "A", &now);
    ck_assert_int_eq(gossip_recv(a, now, "B2", syn.buf, syn.len, &out), 0);
    ck_assert_uint_eq(peer(a, "B", now).generation, 2);
    ck_assert_uint_gt(pkts_to(&out, "B2"), 0);
    ck_assert_uint_eq(pkts_to(&out, "B"), 0);
    net_free(&net, &out);
}
END_TEST

/* The number of packet `c` carries (0: unnumbered). */
static uint64_t boot_of(const struct captured *c)
{
    struct wire_key k;
    wire_key_derive(&k, (const uint8_t *)SECRET, strlen(SECRET));
    struct wire_gossip_msg m;
    ck_assert_int_eq(wire_gossip_msg_decode(&m, &k, c->buf, c->len), 0);
    uint64_t boot = m.boot;
    wire_gossip_msg_release(&m);
    return boot;
}

/* A learnt B through an older node, which dropped B's FRESH: A sends B
 * unnumbered packets, which B (knowing A numbers its own) drops; once a
 * numbered packet of B's reaches A, A numbers what it sends B. */
START_TEST(peer_that_numbers_is_sent_numbers)
{
    gossip *a = mk("A"), *b = mk("B");
    struct gossip_out out;
    gossip_out_init(&out);
    struct wire_gossip_state sa[2] = {S(GOSSIP_KEY_ADDRESS, 1, "A"),
                                      S(GOSSIP_KEY_FRESH, 2, "1")};
    ck_assert_int_eq(inject(b, 0, "A", "A", 1, 0, 2, sa, 2, &out), 0);
    struct wire_gossip_state sb[1] = {S(GOSSIP_KEY_ADDRESS, 1, "B")};
    ck_assert_int_eq(inject(a, 0, "O", "B", 1, 0, 1, sb, 1, &out), 0);
    uint64_t now = 1000;
    struct captured syn;
    capture_syn(&syn, a, "B", &now);
    ck_assert_uint_eq(boot_of(&syn), 0);
    ck_assert_int_eq(gossip_recv(b, now, "A", syn.buf, syn.len, &out), 0);
    ck_assert_uint_eq(replays(b), 1);
    capture_syn(&syn, b, "A", &now);
    ck_assert_uint_eq(boot_of(&syn), 1);
    ck_assert_int_eq(gossip_recv(a, now, "B", syn.buf, syn.len, &out), 0);
    capture_syn(&syn, a, "B", &now);
    ck_assert_uint_eq(boot_of(&syn), 1);
    ck_assert_int_eq(gossip_recv(b, now, "A", syn.buf, syn.len, &out), 0);
    ck_assert_uint_eq(replays(b), 1);
    gossip_out_free(&out);
    gossip_free(a);
    gossip_free(b);
}
END_TEST

/* A node that numbers its packets and one that predates numbers: each
 * hears the other, the older one is sent unnumbered packets, and nothing
 * counts as a replay. */
START_TEST(unnumbered_peer_gets_unnumbered_packets)
{
    struct net net = {.n = 2, .name = {"A", "B"}};
    struct gossip_out out;
    gossip_out_init(&out);
    net.g[0] = mk_any("A", 1, (const char *const[]){"B"}, 1, 8192, true);
    net.g[1] = mk_any("B", 1, (const char *const[]){"A"}, 1, 8192, false);
    uint64_t now = net_rounds(&net, 0, 5, &out);
    ck_assert(peer(net.g[0], "B", now).up);
    ck_assert(peer(net.g[1], "A", now).up);
    ck_assert(state_is(net.g[1], "A", GOSSIP_KEY_FRESH, "1"));
    ck_assert(!state_is(net.g[0], "B", GOSSIP_KEY_FRESH, "1"));
    ck_assert_uint_eq(replays(net.g[0]) + replays(net.g[1]), 0);
    struct captured syn;
    capture_syn(&syn, net.g[0], "B", &now);
    struct wire_key k;
    wire_key_derive(&k, (const uint8_t *)SECRET, strlen(SECRET));
    struct wire_gossip_msg m;
    ck_assert_int_eq(wire_gossip_msg_decode(&m, &k, syn.buf, syn.len), 0);
    ck_assert_uint_eq(m.boot, 0);
    wire_gossip_msg_release(&m);
    /* to an address no endpoint has, numbered (a seed not heard yet) */
    gossip *c = mk_full("C", 1, (const char *const[]){"A"}, 1, 8192);
    capture_syn(&syn, c, "A", &now);
    ck_assert_int_eq(wire_gossip_msg_decode(&m, &k, syn.buf, syn.len), 0);
    ck_assert_uint_eq(m.boot, 1);
    ck_assert_uint_gt(m.seq, 0);
    ck_assert_uint_eq(m.n_deltas, 1); /* its own state, for the seed */
    wire_gossip_msg_release(&m);
    gossip_free(c);
    net_free(&net, &out);
}
END_TEST

static Suite *gossip_suite(void)
{
    Suite *s = suite_create("gossip");
    TCase *tc = tcase_create("digests");
    tcase_add_test(tc, digest_comparison);
    tcase_add_test(tc, regress_heartbeat_only_delta);
    suite_add_tcase(s, tc);
    tc = tcase_create("versions");
    tcase_add_test(tc, replay_never_rolls_back);
    tcase_add_test(tc, generation_rules);
    suite_add_tcase(s, tc);
    tc = tcase_create("failure_detector");
    tcase_add_test(tc, phi_known_sequences);
    suite_add_tcase(s, tc);
    tc = tcase_create("probes");
    tcase_add_test(tc, probes_keep_live_peers_up);
    tcase_add_test(tc, dead_peer_suspected_convicted_and_held_down);
    tcase_add_test(tc, suspected_node_refutes);
    tcase_add_test(tc, probe_older_than_refutation_is_stale);
    tcase_add_test(tc, confirmations_shorten_suspicion);
    tcase_add_test(tc, indirect_probe_relays_ack_and_nack);
    tcase_add_test(tc, unknown_to_relays_is_not_suspected);
    tcase_add_test(tc, new_peer_settles_before_probes);
    tcase_add_test(tc, old_peer_is_not_probed);
    suite_add_tcase(s, tc);
    tc = tcase_create("clocks");
    tcase_add_test(tc, one_clock_ahead_is_skewed_alone);
    tcase_add_test(tc, clock_behind_is_skewed_near_is_not);
    tcase_add_test(tc, clock_put_right_and_stale_estimates);
    tcase_add_test(tc, clock_packets_read_late_judged_by_arrival);
    tcase_add_test(tc, two_nodes_both_skewed);
    tcase_add_test(tc, too_few_estimates_no_verdict);
    tcase_add_test(tc, unstamped_peer_gets_no_stamps);
    suite_add_tcase(s, tc);
    tc = tcase_create("auth");
    tcase_add_test(tc, auth_rejects_are_counted);
    suite_add_tcase(s, tc);
    tc = tcase_create("replay");
    tcase_add_test(tc, replayed_datagram_is_dropped);
    tcase_add_test(tc, replayed_probe_is_dropped);
    tcase_add_test(tc, reflected_syn_gets_no_reply_at_source);
    tcase_add_test(tc, joiner_heard_through_seed_at_its_address);
    tcase_add_test(tc, restarted_member_answered_at_its_new_address);
    tcase_add_test(tc, peer_that_numbers_is_sent_numbers);
    tcase_add_test(tc, unnumbered_peer_gets_unnumbered_packets);
    suite_add_tcase(s, tc);
    tc = tcase_create("epochs");
    tcase_add_test(tc, epochs_and_staleness);
    tcase_add_test(tc, syn_missing_endpoint_gets_syn_back);
    suite_add_tcase(s, tc);
    tc = tcase_create("quarantine");
    tcase_add_test(tc, quarantine_and_tombstone);
    tcase_add_test(tc, removenode_spreads);
    tcase_add_test(tc, removenode_leaving_on_behalf);
    suite_add_tcase(s, tc);
    tc = tcase_create("split");
    tcase_add_test(tc, large_state_is_split);
    suite_add_tcase(s, tc);
    tc = tcase_create("api");
    tcase_add_test(tc, tick_targets);
    tcase_add_test(tc, value_helpers);
    tcase_add_test(tc, config_validation);
    suite_add_tcase(s, tc);
#ifdef RK_TEST_OOM
    tc = tcase_create("out_of_memory");
    tcase_add_test(tc, new_out_of_memory_unwinds);
    tcase_add_test(tc, exchange_out_of_memory_leaks_nothing);
    suite_add_tcase(s, tc);
#endif
    return s;
}

int main(void)
{
    SRunner *sr = srunner_create(gossip_suite());
    srunner_run_all(sr, CK_NORMAL);
    int failed = srunner_ntests_failed(sr);
    srunner_free(sr);
    return failed == 0 ? EXIT_SUCCESS : EXIT_FAILURE;
}
