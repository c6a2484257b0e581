/*
 * check_gossip_sim.c - 100 gossip state machines on a fake clock and a lossy
 * fake network (10% loss, 2% duplicates, 1..200 ms delays, so reordering).
 *
 * Each test prints its seed; set GOSSIP_SIM_SEED to replay a failure
 * exactly. Bounds below are in simulated time on the fake clock (the run is
 * a function of its seed), not wall-clock timing thresholds: the failure
 * detector's goal is that every healthy node sees a killed or cut-off node
 * DOWN within 5 s at a 1 s gossip interval, and that no healthy node ever
 * sees another healthy one DOWN, at 10% loss and 1..200 ms delays.
 */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <check.h>

#include "gossip/gossip_sim.h"

#define N 100

/* The ASan+UBSan tree (gcc defines __SANITIZE_ADDRESS__) is there for
 * memory errors, and a simulated node costs 2-3x its CPU under it: there
 * the loop tests run their first seeds only (one of each kind: a killed
 * node and a cut-off one), which take every path the other seeds take,
 * and the healthy cluster runs 3 simulated minutes, not 10 (about 70
 * suspicions refuted, each path of the detector taken many times). The
 * plain tree runs every seed and the ten minutes. */
#if defined(__SANITIZE_ADDRESS__)
#define BY_TREE(plain, asan) (asan)
#else
#define BY_TREE(plain, asan) (plain)
#endif

static uint64_t seed_for(uint64_t dflt)
{
    const char *e = getenv("GOSSIP_SIM_SEED");
    uint64_t seed = e != NULL ? strtoull(e, NULL, 10) : dflt;
    printf("gossip sim seed=%llu (GOSSIP_SIM_SEED to replay)\n",
           (unsigned long long)seed);
    fflush(stdout);
    return seed;
}

static bool all_know_all_up(gossip_sim *s)
{
    for (size_t i = 0; i < N; i++) {
        gossip *g = gossip_sim_node(s, i);
        if (gossip_peer_count(g) != N)
            return false;
        for (size_t k = 1; k < N; k++) {
            struct gossip_peer_info pi;
            if (gossip_peer_get(&pi, g, k, gossip_sim_now(s)) != 0 || !pi.up)
                return false;
        }
    }
    return true;
}

static void converge(gossip_sim *s, uint64_t seed)
{
    uint64_t t = gossip_sim_now(s);
    while (!all_know_all_up(s)) {
        ck_assert_msg(t < 300 * 1000, "seed %llu: no convergence in 300 s",
                      (unsigned long long)seed);
        t += 1000;
        ck_assert_int_eq(gossip_sim_run(s, t), 0);
    }
}

/* An order-independent digest of the ring inputs a node holds: for every
 * endpoint, its name, STATUS (with epoch), TOKENS, DC and RACK. */
static uint64_t ring_view(gossip *g)
{
    uint64_t sum = 0;
    for (size_t i = 0; i < gossip_peer_count(g); i++) {
        struct gossip_peer_info pi;
        ck_assert_int_eq(gossip_peer_get(&pi, g, i, 0), 0);
        uint64_t h = XXH3_64bits(pi.name, strlen(pi.name));
        static const enum gossip_key keys[] = {GOSSIP_KEY_STATUS,
                                               GOSSIP_KEY_TOKENS, GOSSIP_KEY_DC,
                                               GOSSIP_KEY_RACK};
        for (size_t k = 0; k < 4; k++) {
            struct rk_slice v = pi.state[keys[k]];
            h = XXH3_64bits_withSeed(v.p, v.len, h * 31 + keys[k]);
        }
        sum += h;
    }
    return sum;
}

START_TEST(token_change_reaches_all)
{
    struct gossip_sim_config cfg = GOSSIP_SIM_CONFIG_INIT;
    cfg.seed = seed_for(1000 + (uint64_t)_i);
    gossip_sim *s;
    ck_assert_int_eq(gossip_sim_new(&s, &cfg), 0);
    converge(s, cfg.seed);

    gossip *g0 = gossip_sim_node(s, 0);
    uint64_t tokens[4] = {11, 22, 33, UINT64_C(0xfeedfacecafebeef)};
    ck_assert_int_eq(gossip_tokens_set(g0, tokens, 4), 0);
    struct gossip_peer_info me;
    ck_assert_int_eq(gossip_peer_get(&me, g0, 0, 0), 0);
    uint64_t version = me.state_version[GOSSIP_KEY_TOKENS];
    uint64_t start = gossip_sim_now(s), t = start;
    size_t have = 0;
    while (have < N) {
        ck_assert_msg(t - start < 120 * 1000,
                      "seed %llu: change reached %zu of %d nodes in 120 s",
                      (unsigned long long)cfg.seed, have, N);
        t += 100;
        ck_assert_int_eq(gossip_sim_run(s, t), 0);
        have = 0;
        for (size_t i = 0; i < N; i++) {
            struct gossip_peer_info pi;
            ck_assert_int_eq(
                gossip_peer_find(&pi, gossip_sim_node(s, i), "n0", t), 0);
            if (pi.state_version[GOSSIP_KEY_TOKENS] < version)
                continue;
            have++;
            uint64_t got[4];
            size_t n;
            ck_assert_int_eq(
                gossip_tokens_decode(got, 4, &n, pi.state[GOSSIP_KEY_TOKENS]),
                0);
            ck_assert_uint_eq(n, 4);
            ck_assert_mem_eq(got, tokens, sizeof(tokens));
        }
    }
    printf("seed=%llu: token change reached all %d nodes in %.1f rounds\n",
           (unsigned long long)cfg.seed, N,
           (double)(t - start) / cfg.interval_ms);
    struct gossip_sim_counters c;
    gossip_sim_counters_get(&c, s);
    ck_assert_uint_gt(c.pkts_lost, 0); /* the network really was lossy */
    ck_assert_uint_gt(c.pkts_duplicated, 0);
    ck_assert_uint_eq(c.ev_auth_fail, 0);
    gossip_sim_free(s);
}
END_TEST

struct down_log {
    size_t victim;
    size_t false_downs; /* DOWN of a healthy node seen by a healthy node */
};

static void on_event(void *arg, size_t node, const struct gossip_event *ev)
{
    struct down_log *log = arg;
    char victim[16];
    snprintf(victim, sizeof(victim), "n%zu", log->victim);
    if (ev->type == GOSSIP_EV_DOWN && node != log->victim &&
        strcmp(ev->name, victim) != 0)
        log->false_downs++;
}

/* Every healthy node sees the victim DOWN and every other node UP; the
 * victim sees everyone DOWN. */
static bool partition_seen(gossip_sim *s, size_t victim)
{
    char vname[16];
    snprintf(vname, sizeof(vname), "n%zu", victim);
    for (size_t i = 0; i < N; i++) {
        gossip *g = gossip_sim_node(s, i);
        for (size_t k = 1; k < gossip_peer_count(g); k++) {
            struct gossip_peer_info pi;
            ck_assert_int_eq(gossip_peer_get(&pi, g, k, gossip_sim_now(s)), 0);
            bool cut = i == victim || strcmp(pi.name, vname) == 0;
            if (pi.up == cut)
                return false;
        }
    }
    return true;
}

/* 100 nodes with the default network, converged, DOWN events to log. */
static gossip_sim *
start_logged(struct gossip_sim_config *cfg, struct down_log *log, uint64_t seed)
{
    cfg->seed = seed_for(seed);
    cfg->on_event = on_event;
    cfg->arg = log;
    gossip_sim *s;
    ck_assert_int_eq(gossip_sim_new(&s, cfg), 0);
    converge(s, cfg->seed);
    return s;
}

START_TEST(partition_down_then_up_ring_unchanged)
{
    struct down_log log = {.victim = 7};
    struct gossip_sim_config cfg = GOSSIP_SIM_CONFIG_INIT;
    gossip_sim *s = start_logged(&cfg, &log, 2000 + (uint64_t)_i);
    uint64_t view = ring_view(gossip_sim_node(s, 0));
    for (size_t i = 0; i < N; i++)
        ck_assert_uint_eq(ring_view(gossip_sim_node(s, i)), view);
    struct gossip_sim_counters c0, c1;
    gossip_sim_counters_get(&c0, s);

    /* Cut n7 off: everyone convicts it, it convicts everyone. */
    gossip_sim_isolate(s, log.victim, true);
    uint64_t cut_at = gossip_sim_now(s), t = cut_at;
    while (!partition_seen(s, log.victim)) {
        ck_assert_msg(t - cut_at < 180 * 1000,
                      "seed %llu: partition not seen by all in 180 s",
                      (unsigned long long)cfg.seed);
        t += 1000;
        ck_assert_int_eq(gossip_sim_run(s, t), 0);
        /* DOWN is routing only: the ring inputs never move */
        for (size_t i = 0; i < N && (t - cut_at) % 5000 == 0; i++) {
            ck_assert_uint_eq(ring_view(gossip_sim_node(s, i)), view);
            ck_assert(!gossip_ring_stale(gossip_sim_node(s, i)));
        }
    }
    printf("seed=%llu: partition seen everywhere %.0f s after the cut\n",
           (unsigned long long)cfg.seed, (double)(t - cut_at) / 1000);
    /* and it stays that way while the partition lasts */
    t += 10 * 1000;
    ck_assert_int_eq(gossip_sim_run(s, t), 0);
    ck_assert(partition_seen(s, log.victim));

    /* Heal: everyone sees everyone UP again, ring still the same. */
    gossip_sim_isolate(s, log.victim, false);
    uint64_t heal = t;
    while (!all_know_all_up(s)) {
        ck_assert_msg(t - heal < 60 * 1000,
                      "seed %llu: not all UP 60 s after heal",
                      (unsigned long long)cfg.seed);
        t += 1000;
        ck_assert_int_eq(gossip_sim_run(s, t), 0);
    }
    printf("seed=%llu: all UP %.0f s after the heal\n",
           (unsigned long long)cfg.seed, (double)(t - heal) / 1000);
    for (size_t i = 0; i < N; i++)
        ck_assert_uint_eq(ring_view(gossip_sim_node(s, i)), view);
    gossip_sim_counters_get(&c1, s);
    ck_assert_uint_eq(c1.ev_membership, c0.ev_membership);
    ck_assert_uint_ge(c1.ev_down - c0.ev_down, 2 * (N - 1));
    ck_assert_msg(log.false_downs == 0, "seed %llu: %zu false DOWN events",
                  (unsigned long long)cfg.seed, log.false_downs);
    gossip_sim_free(s);
}
END_TEST

#define DETECT_MS 5000 /* the goal, in simulated time */

/* Kill (_i even) or cut off (_i odd) one node of 100: every other node
 * sees it DOWN within 5 s of simulated time, nobody sees a healthy node
 * DOWN meanwhile, and it stays DOWN (relayed heartbeats do not revive
 * it). */
START_TEST(dead_or_cut_off_node_down_within_5s)
{
    struct down_log log = {.victim = 11 + (size_t)_i};
    struct gossip_sim_config cfg = GOSSIP_SIM_CONFIG_INIT;
    gossip_sim *s = start_logged(&cfg, &log, 3000 + (uint64_t)_i);
    /* a while in steady state first, so the cut lands mid-round */
    ck_assert_int_eq(gossip_sim_run(s, gossip_sim_now(s) + 20000 + 137 * _i),
                     0);
    if (_i % 2 == 0)
        gossip_sim_kill(s, log.victim);
    else
        gossip_sim_isolate(s, log.victim, true);
    uint64_t cut = gossip_sim_now(s), t = cut, first = 0;
    while (gossip_sim_down_count(s, log.victim) < N - 1) {
        t += 50; /* past the goal only if not all were DOWN by it */
        ck_assert_msg(t - cut <= DETECT_MS,
                      "seed %llu: %zu of %d nodes saw n%zu DOWN in %d ms",
                      (unsigned long long)cfg.seed,
                      gossip_sim_down_count(s, log.victim), N - 1, log.victim,
                      DETECT_MS);
        ck_assert_int_eq(gossip_sim_run(s, t), 0);
        if (first == 0 && gossip_sim_down_count(s, log.victim) > 0)
            first = t;
    }
    printf("seed=%llu %s: first DOWN after %.2f s, all %d after %.2f s\n",
           (unsigned long long)cfg.seed, _i % 2 == 0 ? "killed" : "cut off",
           (double)(first - cut) / 1000, N - 1, (double)(t - cut) / 1000);
    ck_assert_int_eq(gossip_sim_run(s, t + 30000), 0);
    ck_assert_uint_eq(gossip_sim_down_count(s, log.victim), N - 1);
    ck_assert_msg(log.false_downs == 0, "seed %llu: %zu false DOWN events",
                  (unsigned long long)cfg.seed, log.false_downs);
    gossip_sim_free(s);
}
END_TEST

static void count_downs(void *arg, size_t node, const struct gossip_event *ev)
{
    (void)node;
    size_t *downs = arg;
    if (ev->type == GOSSIP_EV_DOWN)
        (*downs)++;
}

/* Ten minutes of 100 healthy nodes at 10% loss and 1..200 ms delays: the
 * probe detector suspects now and then (a probe and all its relays lost)
 * but every suspicion is refuted: no DOWN at all. (Three minutes in the
 * ASan tree, see BY_TREE.) */
START_TEST(no_false_down_in_ten_minutes)
{
    size_t downs = 0;
    struct gossip_sim_config cfg = GOSSIP_SIM_CONFIG_INIT;
    cfg.seed = seed_for(4000);
    cfg.on_event = count_downs;
    cfg.arg = &downs;
    gossip_sim *s;
    ck_assert_int_eq(gossip_sim_new(&s, &cfg), 0);
    converge(s, cfg.seed);
    downs = 0;
    const uint64_t secs = BY_TREE(600, 180);
    uint64_t start = gossip_sim_now(s);
    ck_assert_int_eq(gossip_sim_run(s, start + secs * 1000), 0);
    uint64_t suspicions = 0, refutations = 0, probes = 0;
    for (size_t i = 0; i < N; i++) {
        struct gossip_stats st;
        gossip_stats_get(&st, gossip_sim_node(s, i));
        suspicions += st.suspicions;
        refutations += st.refutations;
        probes += st.probes;
    }
    printf("seed=%llu: %llu s, %llu probes, %llu suspicions heard, %llu "
           "refutations, %zu DOWN\n",
           (unsigned long long)cfg.seed, (unsigned long long)secs,
           (unsigned long long)probes, (unsigned long long)suspicions,
           (unsigned long long)refutations, downs);
    ck_assert_uint_gt(probes, N * secs); /* the detector did run */
    ck_assert_uint_gt(refutations, 0);   /* and the network did mislead it */
    ck_assert_msg(downs == 0, "seed %llu: %zu false DOWN events",
                  (unsigned long long)cfg.seed, downs);
    ck_assert(all_know_all_up(s));
    gossip_sim_free(s);
}
END_TEST

/* ---- epochs that no STATUS announces ------------------------------------ */

struct adopt_log {
    gossip_sim *s;
    size_t n[N];       /* GOSSIP_EV_EPOCH_ADOPTED per node */
    uint64_t first_ms; /* when the first came (0: none) */
};

static void on_adopt(void *arg, size_t node, const struct gossip_event *ev)
{
    struct adopt_log *log = arg;
    if (ev->type != GOSSIP_EV_EPOCH_ADOPTED)
        return;
    log->n[node]++;
    if (log->first_ms == 0)
        log->first_ms = gossip_sim_now(log->s);
    /* the daemon rebuilds its ring under it (node/ring_view.c) */
    gossip_ring_applied(gossip_sim_node(log->s, node), ev->epoch);
}

static size_t adopted_total(const struct adopt_log *log)
{
    size_t n = 0;
    for (size_t i = 0; i < N; i++)
        n += log->n[i];
    return n;
}

/* A status change spreads with its epoch and nobody adopts anything (at
 * 10% loss and 1..200 ms delays the RING_EPOCH of a relay may come before
 * the STATUS, never GOSSIP_HEARSAY_ROUNDS before). Then one node hears of
 * an epoch no STATUS carries (the phantom of test_history, 2026-12-07:
 * before, all 100 stayed stale for good): every node adopts it once, not
 * before GOSSIP_HEARSAY_ROUNDS intervals, and none is stale after. */
START_TEST(phantom_epoch_adopted_by_all)
{
    struct adopt_log log = {0};
    struct gossip_sim_config cfg = GOSSIP_SIM_CONFIG_INIT;
    cfg.seed = seed_for(5000 + (uint64_t)_i);
    cfg.on_event = on_adopt;
    cfg.arg = &log;
    ck_assert_int_eq(gossip_sim_new(&log.s, &cfg), 0);
    gossip_sim *s = log.s;
    converge(s, cfg.seed);

    uint64_t e;
    ck_assert_int_eq(
        gossip_status_set(gossip_sim_node(s, 3), GOSSIP_STATUS_LEAVING, 0, &e),
        0);
    uint64_t t = gossip_sim_now(s) + 60 * 1000;
    ck_assert_int_eq(gossip_sim_run(s, t), 0);
    for (size_t i = 0; i < N; i++) {
        gossip *g = gossip_sim_node(s, i);
        ck_assert_uint_eq(gossip_epoch_max(g), e);
        ck_assert_uint_eq(gossip_epoch_ring(g), e);
        gossip_ring_applied(g, e);
    }
    ck_assert_uint_eq(adopted_total(&log), 0);

    uint64_t phantom = e + 5, heard = gossip_sim_now(s);
    gossip_epoch_heard(gossip_sim_node(s, 7), phantom);
    size_t done = 0;
    while (done < N) {
        ck_assert_msg(t - heard < 120 * 1000,
                      "seed %llu: %zu of %d nodes built the ring under the "
                      "heard epoch in 120 s",
                      (unsigned long long)cfg.seed, done, N);
        t += 1000;
        ck_assert_int_eq(gossip_sim_run(s, t), 0);
        done = 0;
        for (size_t i = 0; i < N; i++) {
            gossip *g = gossip_sim_node(s, i);
            done += gossip_epoch_ring(g) == phantom && !gossip_ring_stale(g);
        }
    }
    ck_assert_uint_ge(log.first_ms - heard,
                      (uint64_t)GOSSIP_HEARSAY_ROUNDS * cfg.interval_ms);
    for (size_t i = 0; i < N; i++)
        ck_assert_uint_eq(log.n[i], 1);
    /* the next transition is stamped above it, as any */
    ck_assert_int_eq(
        gossip_status_set(gossip_sim_node(s, 5), GOSSIP_STATUS_LEAVING, 0, &e),
        0);
    ck_assert_uint_eq(e, phantom + 1);
    gossip_sim_free(s);
}
END_TEST

static Suite *gossip_sim_suite(void)
{
    Suite *s = suite_create("gossip_sim");
    TCase *tc = tcase_create("spread");
    tcase_set_timeout(tc, 300);
    tcase_add_loop_test(tc, token_change_reaches_all, 0, BY_TREE(2, 1));
    suite_add_tcase(s, tc);
    tc = tcase_create("partition");
    tcase_set_timeout(tc, 300);
    tcase_add_loop_test(tc, partition_down_then_up_ring_unchanged, 0, 1);
    suite_add_tcase(s, tc);
    tc = tcase_create("failure_detection");
    tcase_set_timeout(tc, 300);
    tcase_add_loop_test(tc, dead_or_cut_off_node_down_within_5s, 0,
                        BY_TREE(6, 2));
    tcase_add_test(tc, no_false_down_in_ten_minutes);
    suite_add_tcase(s, tc);
    tc = tcase_create("epochs");
    tcase_set_timeout(tc, 300);
    tcase_add_loop_test(tc, phantom_epoch_adopted_by_all, 0, 1);
    suite_add_tcase(s, tc);
    return s;
}

int main(void)
{
    SRunner *sr = srunner_create(gossip_sim_suite());
    srunner_run_all(sr, CK_NORMAL);
    int failed = srunner_ntests_failed(sr);
    srunner_free(sr);
    return failed == 0 ? EXIT_SUCCESS : EXIT_FAILURE;
}
