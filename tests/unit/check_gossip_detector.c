/*
 * check_gossip_detector.c - the two failure detectors that mark peers UP
 * and DOWN, one rule at a time: phi accrual over heartbeats, and the probe
 * detector (probe.c: SWIM's probes, suspicion and refutation with
 * Lifeguard's refinements).
 *
 * Packets are crafted with the wire codecs and fed to gossip_recv(), or
 * passed between a few instances by the lossless in-test "network" of
 * tests/unit/gossip_fixture.h (pump), on a clock the test sets. The
 * 100-node lossy simulation is check_gossip_sim.c.
 */
#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include <check.h>

#include "gossip/gossip.h"
#include "tests/unit/gossip_fixture.h"
#include "wire/gossip_msg.h"
#include "wire/gossip_probe.h"

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

static Suite *gossip_detector_suite(void)
{
    Suite *s = suite_create("gossip_detector");
    TCase *tc = tcase_create("failure_detector");
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
    return s;
}

int main(void)
{
    SRunner *sr = srunner_create(gossip_detector_suite());
    srunner_run_all(sr, CK_NORMAL);
    int failed = srunner_ntests_failed(sr);
    srunner_free(sr);
    return failed == 0 ? EXIT_SUCCESS : EXIT_FAILURE;
}
