/*
 * check_gossip.c - the gossip state machine, one rule at a time: digests
 * and the SYN/ACK/ACK2 exchange, the version and generation rules, epochs,
 * quarantine and removal, state split across packets, the API's helpers and
 * config, allocation failures.
 *
 * Packets are crafted with the wire codec and fed to gossip_recv(), or
 * passed between a few instances by a lossless in-test "network" (pump), on
 * a clock the test sets (tests/unit/gossip_fixture.h). The failure
 * detectors are check_gossip_detector.c; authentication, replays and
 * reflection, and the wall-clock stamps check_gossip_stamps.c. The
 * 100-node lossy simulation is check_gossip_sim.c.
 */
#include <errno.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <check.h>

#include "gossip/gossip.h"
#include "tests/unit/gossip_fixture.h"
#include "tests/unit/oom_hook.h"
#include "wire/gossip_msg.h"

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
