/*
 * gossip_fixture.h - what the gossip state machine's unit runners share
 * (check_gossip.c, check_gossip_detector.c, check_gossip_stamps.c): nodes
 * of the test cluster (its name and secret, a node's address its name),
 * packets crafted with the wire codec and fed to gossip_recv(), what a node
 * holds of a peer and what it sent (events, packets to an address, probe
 * packets decoded), and a lossless in-test "network" between a few
 * instances (pump) on a clock the test sets, with A, B and C formed on it.
 * Header-only, as store_fixture.h: every helper is static inline, so a
 * runner that does not use one is not warned of it.
 */
#ifndef TESTS_UNIT_GOSSIP_FIXTURE_H
#define TESTS_UNIT_GOSSIP_FIXTURE_H

#include <stdbool.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include <check.h>

#include "gossip/gossip.h"
#include "wire/gossip_msg.h"
#include "wire/gossip_probe.h"

#define SECRET  "s3cret"
#define CLUSTER "test"

/* A node; `numbered` false: one that predates packet numbers, in whose
 * name the tests can then craft packets (a numbered node's unnumbered
 * packets are replays). */
static inline gossip *mk_any(const char *name,
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

static inline gossip *mk_full(const char *name,
                              uint64_t gen,
                              const char *const *seeds,
                              size_t n_seeds,
                              size_t max_packet)
{
    return mk_any(name, gen, seeds, n_seeds, max_packet, true);
}

static inline gossip *mk(const char *name)
{
    return mk_full(name, 1, NULL, 0, 8192);
}

static inline struct wire_gossip_state
S(unsigned key, uint64_t version, const char *value) {
    struct wire_gossip_state s = {key, version, RK_SLICE(value, strlen(value))};
    return s;
}

static inline int
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
static inline int inject(gossip *g,
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

static inline size_t count_events(const struct gossip_out *out,
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

static inline struct gossip_peer_info
peer(gossip *g, const char *name, uint64_t now)
{
    struct gossip_peer_info pi;
    ck_assert_int_eq(gossip_peer_find(&pi, g, name, now), 0);
    return pi;
}

static inline bool
state_is(gossip *g, const char *name, unsigned key, const char *want)
{
    struct gossip_peer_info pi = peer(g, name, 0);
    return pi.state[key].len == strlen(want) &&
           memcmp(pi.state[key].p, want, pi.state[key].len) == 0;
}

static inline size_t pkts_to(const struct gossip_out *out, const char *to)
{
    size_t n = 0;
    for (size_t i = 0; i < out->n_pkts; i++)
        n += strcmp(out->pkts[i].to, to) == 0;
    return n;
}

/* Decode the probe packets in out sent to `to` (NULL: any); returns how
 * many are of `type` (0: any), the last one in *last (release it). */
static inline size_t probe_pkts(const struct gossip_out *out,
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

static inline size_t net_find(const struct net *net, const char *addr)
{
    for (size_t i = 0; i < net->n; i++)
        if (strcmp(net->name[i], addr) == 0)
            return i;
    return SIZE_MAX;
}

static inline void net_wall(struct net *net, size_t i, uint64_t now)
{
    if (net->wall_base != 0 && !net->no_wall[i])
        gossip_wall_set(net->g[i],
                        net->wall_base + now + (uint64_t)net->wall_off[i]);
}

/* Delivers out's packets (emitted by node src) and every reply, FIFO. */
static inline void
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

static inline void
net_round(struct net *net, uint64_t now, struct gossip_out *out)
{
    for (size_t i = 0; i < net->n; i++) {
        net_wall(net, i, now);
        ck_assert_int_eq(gossip_tick(net->g[i], now, out), 0);
        pump(net, now, i, out);
    }
}

/* n rounds 1 s apart from now; returns the time after them. */
static inline uint64_t
net_rounds(struct net *net, uint64_t now, int n, struct gossip_out *out)
{
    for (int r = 0; r < n; r++, now += 1000)
        net_round(net, now, out);
    return now;
}

#define NO_WALL INT64_MIN

/* A, B and C, NORMAL (epoch 1), A their seed, after ten rounds: returns
 * the time then. */
static inline uint64_t abc_formed_any(struct net *net,
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

static inline uint64_t
abc_formed_clocks(struct net *net, struct gossip_out *out, const int64_t *offs)
{
    return abc_formed_any(net, out, offs, true);
}

static inline uint64_t abc_formed(struct net *net, struct gossip_out *out)
{
    return abc_formed_clocks(net, out, NULL);
}

#endif
