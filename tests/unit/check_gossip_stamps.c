/*
 * check_gossip_stamps.c - what marks every gossip packet besides the state
 * it carries, and what the receiver makes of it, one rule at a time: the
 * cluster name and MAC (a packet that fails is dropped and counted), the
 * wall-clock stamp by which a node estimates its peers' clocks and its own
 * skew (clock.c), and the packet numbers that drop replays, with replies
 * that go to a sender's gossiped address, not to a forged source (fresh.c).
 *
 * Packets are crafted with the wire codecs and fed to gossip_recv(), or
 * passed between a few instances by the lossless in-test "network" of
 * tests/unit/gossip_fixture.h (pump), on clocks the test sets.
 */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <check.h>

#include "gossip/gossip.h"
#include "tests/unit/gossip_fixture.h"
#include "wire/gossip_msg.h"
#include "wire/gossip_probe.h"

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

static Suite *gossip_stamps_suite(void)
{
    Suite *s = suite_create("gossip_stamps");
    TCase *tc = tcase_create("clocks");
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
    return s;
}

int main(void)
{
    SRunner *sr = srunner_create(gossip_stamps_suite());
    srunner_run_all(sr, CK_NORMAL);
    int failed = srunner_ntests_failed(sr);
    srunner_free(sr);
    return failed == 0 ? EXIT_SUCCESS : EXIT_FAILURE;
}
