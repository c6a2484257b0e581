/*
 * gossip-sim - measures how fast a state change spreads through N simulated
 * gossip nodes and what gossip costs in bytes, over several seeds.
 *
 * For each seed: start N nodes (3 seeds), run until every node knows every
 * other one as UP, measure gossip bytes per node per second over a steady
 * window, then change node 0's TOKENS and count the rounds (tick intervals,
 * measured at 100 ms resolution) until every node holds the new value.
 * Then cut one node off (or kill it, --kill 1) and measure, at 100 ms
 * resolution, how long until the first healthy node and every healthy node
 * see it DOWN (the failure detectors' detection time), and until the whole
 * partition is seen (the cut-off node sees every other DOWN too, by
 * phi-accrual); heal it and measure until all are UP again.
 * DOWN events of a healthy node seen by a healthy node are counted as false
 * convictions over the whole run. Prints one line per seed and the medians.
 *
 * With --blip MS the cut lasts MS milliseconds instead, then heals, and the
 * DOWN events of the cut-off node are counted before and after the heal:
 * one after it is a conviction of a node that is reachable again (a
 * suspicion from the cut that outlived it). The 30 s after the heal are
 * watched at 100 ms steps for how long some node still held it DOWN.
 */
#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "gossip/gossip_sim.h"

static void usage(void)
{
    fprintf(stderr,
            "usage: gossip-sim [--nodes N] [--loss P] [--dup P] [--runs R]\n"
            "                  [--first-seed S] [--max-packet B] "
            "[--tokens T]\n"
            "                  [--delay-max MS] [--steady S] "
            "[--partition 0|1]\n"
            "                  [--probe 0|1] [--kill 0|1] [--blip MS]\n");
}

struct watch {
    size_t victim; /* SIZE_MAX before the partition */
    bool converged;
    uint64_t false_downs;        /* after first convergence */
    uint64_t false_downs_warmup; /* while the cluster was forming */
    gossip_sim *s;               /* for the time of an event (--blip) */
    uint64_t healed_at;          /* --blip: when the cut ended, 0 before */
    uint64_t victim_downs;       /* DOWN events of the victim, in the cut */
    uint64_t victim_downs_after; /* ... and after the heal */
};

static void on_event(void *arg, size_t node, const struct gossip_event *ev)
{
    struct watch *w = arg;
    char vname[32];
    if (ev->type != GOSSIP_EV_DOWN)
        return;
    snprintf(vname, sizeof(vname), "n%zu", w->victim);
    if (w->victim != SIZE_MAX && node != w->victim &&
        strcmp(ev->name, vname) == 0) {
        if (w->healed_at != 0 && gossip_sim_now(w->s) >= w->healed_at)
            w->victim_downs_after++;
        else
            w->victim_downs++;
    }
    if (w->victim == SIZE_MAX ||
        (node != w->victim && strcmp(ev->name, vname) != 0)) {
        if (w->converged)
            w->false_downs++;
        else
            w->false_downs_warmup++;
    }
}

/* Healthy nodes see the victim DOWN and each other UP; the victim sees all
 * DOWN. */
static bool partition_seen(gossip_sim *s, size_t n, size_t victim)
{
    char vname[32];
    snprintf(vname, sizeof(vname), "n%zu", victim);
    for (size_t i = 0; i < n; i++) {
        gossip *g = gossip_sim_node(s, i);
        for (size_t k = 1; k < gossip_peer_count(g); k++) {
            struct gossip_peer_info pi;
            gossip_peer_get(&pi, g, k, gossip_sim_now(s));
            bool cut = i == victim || strcmp(pi.name, vname) == 0;
            if (pi.up == cut)
                return false;
        }
    }
    return true;
}

static int cmp_double(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

static double median(double *v, size_t n)
{
    qsort(v, n, sizeof(*v), cmp_double);
    return n % 2 ? v[n / 2] : (v[n / 2 - 1] + v[n / 2]) / 2;
}

static bool all_know_all_up(gossip_sim *s, size_t n)
{
    for (size_t i = 0; i < n; i++) {
        gossip *g = gossip_sim_node(s, i);
        if (gossip_peer_count(g) != n)
            return false;
        for (size_t k = 1; k < n; k++) {
            struct gossip_peer_info pi;
            if (gossip_peer_get(&pi, g, k, gossip_sim_now(s)) != 0 || !pi.up)
                return false;
        }
    }
    return true;
}

static size_t count_have(gossip_sim *s, size_t n, uint64_t version)
{
    size_t have = 0;
    for (size_t i = 0; i < n; i++) {
        struct gossip_peer_info pi;
        if (gossip_peer_find(&pi, gossip_sim_node(s, i), "n0",
                             gossip_sim_now(s)) == 0 &&
            pi.state_version[GOSSIP_KEY_TOKENS] >= version)
            have++;
    }
    return have;
}

int main(int argc, char **argv)
{
    struct gossip_sim_config cfg = GOSSIP_SIM_CONFIG_INIT;
    size_t runs = 20, steady_s = 30, partition = 1, kill = 0, blip_ms = 0;
    uint64_t first_seed = 1;
    for (int i = 1; i < argc; i += 2) { /* --option value */
        const char *a = argv[i];
        const char *v = i + 1 < argc ? argv[i + 1] : NULL;
        if (v == NULL) {
            usage();
            return 2;
        }
        if (strcmp(a, "--nodes") == 0)
            cfg.n_nodes = strtoul(v, NULL, 10);
        else if (strcmp(a, "--loss") == 0)
            cfg.loss = strtod(v, NULL);
        else if (strcmp(a, "--dup") == 0)
            cfg.dup = strtod(v, NULL);
        else if (strcmp(a, "--runs") == 0)
            runs = strtoul(v, NULL, 10);
        else if (strcmp(a, "--first-seed") == 0)
            first_seed = strtoull(v, NULL, 10);
        else if (strcmp(a, "--max-packet") == 0)
            cfg.max_packet = strtoul(v, NULL, 10);
        else if (strcmp(a, "--tokens") == 0)
            cfg.n_tokens = strtoul(v, NULL, 10);
        else if (strcmp(a, "--delay-max") == 0)
            cfg.delay_max_ms = (uint32_t)strtoul(v, NULL, 10);
        else if (strcmp(a, "--steady") == 0)
            steady_s = strtoul(v, NULL, 10);
        else if (strcmp(a, "--partition") == 0)
            partition = strtoul(v, NULL, 10);
        else if (strcmp(a, "--probe") == 0)
            cfg.no_probe = strtoul(v, NULL, 10) == 0;
        else if (strcmp(a, "--kill") == 0)
            kill = strtoul(v, NULL, 10);
        else if (strcmp(a, "--blip") == 0)
            blip_ms = strtoul(v, NULL, 10);
        else {
            usage();
            return 2;
        }
    }
    if (runs == 0 || cfg.n_nodes < 2 || (blip_ms && (kill || !partition))) {
        usage();
        return 2;
    }
    double *rounds = calloc(runs, sizeof(*rounds));
    double *bps = calloc(runs, sizeof(*bps));
    double *pps = calloc(runs, sizeof(*pps));
    double *detect = calloc(runs, sizeof(*detect));
    double *heal = calloc(runs, sizeof(*heal));
    double *first = calloc(runs, sizeof(*first));
    double *all = calloc(runs, sizeof(*all));
    if (rounds == NULL || bps == NULL || pps == NULL || detect == NULL ||
        heal == NULL || first == NULL || all == NULL)
        return 1;
    double all_max = 0, heal_max = 0;
    uint64_t false_downs = 0, false_downs_warmup = 0;
    uint64_t blip_downs = 0, blip_downs_after = 0, blip_runs_after = 0;
    size_t n = cfg.n_nodes;
    printf("nodes=%zu loss=%.2f dup=%.2f delay=%u..%ums tokens=%zu "
           "max_packet=%zu runs=%zu probe=%d %s\n",
           n, cfg.loss, cfg.dup, cfg.delay_min_ms, cfg.delay_max_ms,
           cfg.n_tokens, cfg.max_packet, runs, !cfg.no_probe,
           kill      ? "kill"
           : blip_ms ? "blip"
                     : "partition");
    for (size_t r = 0; r < runs; r++) {
        cfg.seed = first_seed + r;
        struct watch w = {.victim = SIZE_MAX};
        heal[r] = -1;
        cfg.on_event = on_event;
        cfg.arg = &w;
        gossip_sim *s;
        int rc = gossip_sim_new(&s, &cfg);
        if (rc != 0) {
            fprintf(stderr, "sim: %s\n", rk_strerror(rc));
            return 1;
        }
        w.s = s;
        uint64_t t = 0;
        while (!all_know_all_up(s, n)) {
            t += 1000;
            if (t > 3600 * 1000 || (rc = gossip_sim_run(s, t)) != 0) {
                fprintf(stderr, "seed %llu: no convergence (%s)\n",
                        (unsigned long long)cfg.seed, rk_strerror(rc));
                return 1;
            }
        }
        uint64_t warm = t;
        w.converged = true;
        struct gossip_sim_counters c0, c1;
        gossip_sim_counters_get(&c0, s);
        t += steady_s * 1000;
        if ((rc = gossip_sim_run(s, t)) != 0)
            return 1;
        gossip_sim_counters_get(&c1, s);
        bps[r] = (double)(c1.bytes_sent - c0.bytes_sent) / (double)n /
                 (double)steady_s;
        pps[r] = (double)(c1.pkts_sent - c0.pkts_sent) / (double)n /
                 (double)steady_s;

        uint64_t tokens[16];
        for (size_t k = 0; k < 16; k++)
            tokens[k] = (cfg.seed << 32) + k * 977 + 1;
        gossip *g0 = gossip_sim_node(s, 0);
        size_t nt = cfg.n_tokens < 16 ? cfg.n_tokens : 16;
        if (gossip_tokens_set(g0, tokens, nt) != 0)
            return 1;
        struct gossip_peer_info self;
        gossip_peer_get(&self, g0, 0, t);
        uint64_t version = self.state_version[GOSSIP_KEY_TOKENS];
        uint64_t start = t;
        while (count_have(s, n, version) < n) {
            t += 100;
            if (t - start > 600 * 1000 || gossip_sim_run(s, t) != 0) {
                fprintf(stderr, "seed %llu: change did not spread\n",
                        (unsigned long long)cfg.seed);
                return 1;
            }
        }
        rounds[r] = (double)(t - start) / cfg.interval_ms;

        if (!partition)
            goto report;
        w.victim = n / 2;
        if (blip_ms) {
            /* a short cut: who convicts the victim after it is back */
            first[r] = all[r] = detect[r] = -1;
            gossip_sim_isolate(s, w.victim, true);
            t += blip_ms;
            if (gossip_sim_run(s, t) != 0)
                return 1;
            gossip_sim_isolate(s, w.victim, false);
            w.healed_at = t;
            start = t;
            /* 30 s at 100 ms steps: until when some node held the victim
             * DOWN (a conviction after the heal shows up here) */
            uint64_t last_down = start;
            for (; t - start < 30 * 1000;) {
                t += 100;
                if (gossip_sim_run(s, t) != 0)
                    return 1;
                if (gossip_sim_down_count(s, w.victim) > 0)
                    last_down = t;
            }
            if (!all_know_all_up(s, n)) {
                fprintf(stderr, "seed %llu: not all UP 30 s after the heal\n",
                        (unsigned long long)cfg.seed);
                return 1;
            }
            heal[r] = (double)(last_down - start) / 1000;
            if (heal[r] > heal_max)
                heal_max = heal[r];
            blip_downs += w.victim_downs;
            blip_downs_after += w.victim_downs_after;
            blip_runs_after += w.victim_downs_after > 0;
            printf("seed=%llu blip_ms=%zu victim_downs_in_cut=%llu "
                   "victim_downs_after_heal=%llu down_until_s=%.1f\n",
                   (unsigned long long)cfg.seed, blip_ms,
                   (unsigned long long)w.victim_downs,
                   (unsigned long long)w.victim_downs_after, heal[r]);
            goto report;
        }
        if (kill)
            gossip_sim_kill(s, w.victim);
        else
            gossip_sim_isolate(s, w.victim, true);
        start = t;
        first[r] = all[r] = -1;
        while (all[r] < 0) {
            t += 100;
            if (t - start > 600 * 1000 || gossip_sim_run(s, t) != 0) {
                fprintf(stderr, "seed %llu: victim not detected\n",
                        (unsigned long long)cfg.seed);
                return 1;
            }
            size_t down = gossip_sim_down_count(s, w.victim);
            if (down > 0 && first[r] < 0)
                first[r] = (double)(t - start) / 1000;
            if (down == n - 1)
                all[r] = (double)(t - start) / 1000;
        }
        if (all[r] > all_max)
            all_max = all[r];
        if (kill) {
            /* a dead node never comes back: watch for false DOWNs a while */
            t += 60 * 1000;
            if (gossip_sim_run(s, t) != 0)
                return 1;
            goto report;
        }
        while (!partition_seen(s, n, w.victim)) {
            t += 1000;
            if (t - start > 600 * 1000 || gossip_sim_run(s, t) != 0) {
                fprintf(stderr, "seed %llu: partition not detected\n",
                        (unsigned long long)cfg.seed);
                return 1;
            }
        }
        detect[r] = (double)(t - start) / 1000;
        gossip_sim_isolate(s, w.victim, false);
        start = t;
        while (!all_know_all_up(s, n)) {
            t += 1000;
            if (t - start > 600 * 1000 || gossip_sim_run(s, t) != 0) {
                fprintf(stderr, "seed %llu: no recovery\n",
                        (unsigned long long)cfg.seed);
                return 1;
            }
        }
        heal[r] = (double)(t - start) / 1000;
    report:
        false_downs += w.false_downs;
        false_downs_warmup += w.false_downs_warmup;
        printf("seed=%llu warmup_s=%llu rounds_to_all=%.1f "
               "bytes_per_node_s=%.0f pkts_per_node_s=%.2f first_down_s=%.1f "
               "all_down_s=%.1f detect_s=%.0f heal_s=%.0f false_downs=%llu "
               "warmup_false_downs=%llu\n",
               (unsigned long long)cfg.seed, (unsigned long long)(warm / 1000),
               rounds[r], bps[r], pps[r], first[r], all[r], detect[r], heal[r],
               (unsigned long long)w.false_downs,
               (unsigned long long)w.false_downs_warmup);
        fflush(stdout);
        gossip_sim_free(s);
    }
    double med = median(rounds, runs);
    printf("median rounds_to_all=%.1f (ceil %.0f) bound log2(N)+4=%.2f "
           "log2(N)+6=%.2f\n",
           med, ceil(med), log2((double)n) + 4, log2((double)n) + 6);
    printf("median bytes_per_node_s=%.0f pkts_per_node_s=%.2f\n",
           median(bps, runs), median(pps, runs));
    if (blip_ms)
        printf("blip of %zu ms: DOWN events of the cut-off node %llu in the "
               "cut, %llu after the heal (in %llu of %zu runs); held DOWN "
               "by some node until a median %.1f s after the heal (max "
               "%.1f); false_downs_total=%llu\n",
               blip_ms, (unsigned long long)blip_downs,
               (unsigned long long)blip_downs_after,
               (unsigned long long)blip_runs_after, runs, median(heal, runs),
               heal_max, (unsigned long long)false_downs);
    else if (partition)
        printf("median first_down_s=%.1f all_down_s=%.1f (max %.1f) "
               "partition_detect_s=%.0f heal_s=%.0f false_downs_total="
               "%llu (during warm-up: %llu)\n",
               median(first, runs), median(all, runs), all_max,
               median(detect, runs), median(heal, runs),
               (unsigned long long)false_downs,
               (unsigned long long)false_downs_warmup);
    else
        printf("false_downs_total=%llu (during warm-up: %llu)\n",
               (unsigned long long)false_downs,
               (unsigned long long)false_downs_warmup);
    free(detect);
    free(heal);
    free(first);
    free(all);
    free(rounds);
    free(bps);
    free(pps);
    return 0;
}
