/*
 * ringkv-sim - placement studies over ring/, from first principles.
 *
 *   balance       largest / mean node share, raw and replicated
 *   coown         fraction of node pairs that share a replica set
 *   join          what moves when N grows to N + 1 (and with hash mod N)
 *   bench-lookup  preference-list lookup next to jump consistent hash
 *
 * Every subcommand prints a table, or JSON with --json, and draws an SVG
 * chart with --svg FILE. Rings are grown the way a cluster grows: nodes
 * join one at a time, racks in turn, each choosing its tokens with the
 * allocator the node daemon uses (ring_tokens_alloc). Node names carry the
 * seed and trial, so `random` rings differ between trials and every run is
 * reproducible from its seed.
 */
#include <errno.h>
#include <inttypes.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "common/rk.h"
#include "ring/ring.h"
#include "tools/sim/svg.h"

#define MAX_LIST 32

struct opts {
    unsigned nodes;
    unsigned tokens[MAX_LIST];
    size_t ntokens;
    enum ring_alloc allocs[2];
    size_t nallocs;
    unsigned rf, racks, trials, rings;
    uint64_t seed;
    unsigned long keys;
    int json;
    const char *svg;
};

static void usage(void)
{
    fputs(
        "usage: ringkv-sim COMMAND [options]\n"
        "  balance      --nodes N --tokens V[,V...] --trials T\n"
        "               [--alloc random|balanced[,...]] [--rf R] [--racks K]"
        " [--seed S]\n"
        "  coown        --nodes N --tokens V[,V...] --rf R [--rings K]\n"
        "               [--alloc random|balanced] [--racks K] [--seed S]\n"
        "  join         --nodes N --tokens V --alloc random|balanced [--rf R]"
        "\n               [--racks K] [--seed S]\n"
        "  bench-lookup --nodes N --tokens V --rf R [--keys K]\n"
        "               [--alloc random|balanced] [--seed S]\n"
        "common: --json (JSON instead of a table), --svg FILE (draw a chart)\n"
        "racks: 1 = SimpleStrategy; K > 1 = NetworkTopologyStrategy, one DC,\n"
        "nodes assigned to K racks in turn\n",
        stderr);
}

static int parse_uint(const char *s, unsigned long *out)
{
    char *end;
    errno = 0;
    unsigned long v = strtoul(s, &end, 10);
    if (errno || end == s || *end)
        return -1;
    *out = v;
    return 0;
}

static int parse_alloc(const char *s, enum ring_alloc *out)
{
    if (strcmp(s, "random") == 0)
        *out = RING_ALLOC_RANDOM;
    else if (strcmp(s, "balanced") == 0)
        *out = RING_ALLOC_BALANCED;
    else
        return -1;
    return 0;
}

static int parse_opts(struct opts *o, int argc, char **argv)
{
    for (int i = 2; i < argc; i++) {
        const char *a = argv[i];
        const char *v = i + 1 < argc ? argv[i + 1] : NULL;
        unsigned long n;
        if (strcmp(a, "--json") == 0) {
            o->json = 1;
            continue;
        }
        if (v == NULL)
            goto bad;
        i++;
        if (strcmp(a, "--svg") == 0) {
            o->svg = v;
        } else if (strcmp(a, "--tokens") == 0) {
            char buf[256], *save = NULL;
            snprintf(buf, sizeof(buf), "%s", v);
            o->ntokens = 0;
            for (char *t = strtok_r(buf, ",", &save); t;
                 t = strtok_r(NULL, ",", &save)) {
                if (o->ntokens == MAX_LIST || parse_uint(t, &n) || n == 0 ||
                    n > RING_MAX_TOKENS_PER_NODE)
                    goto bad;
                o->tokens[o->ntokens++] = (unsigned)n;
            }
        } else if (strcmp(a, "--alloc") == 0) {
            char buf[64], *save = NULL;
            snprintf(buf, sizeof(buf), "%s", v);
            o->nallocs = 0;
            for (char *t = strtok_r(buf, ",", &save); t;
                 t = strtok_r(NULL, ",", &save))
                if (o->nallocs == 2 || parse_alloc(t, &o->allocs[o->nallocs++]))
                    goto bad;
        } else if (strcmp(a, "--seed") == 0) {
            char *end;
            o->seed = strtoull(v, &end, 0);
            if (*end)
                goto bad;
        } else {
            if (parse_uint(v, &n))
                goto bad;
            if (strcmp(a, "--nodes") == 0 && n >= 1 && n <= 20000)
                o->nodes = (unsigned)n;
            else if (strcmp(a, "--rf") == 0 && n >= 1 && n <= RING_MAX_REPLICAS)
                o->rf = (unsigned)n;
            else if (strcmp(a, "--racks") == 0 && n >= 1 && n <= 1000)
                o->racks = (unsigned)n;
            else if (strcmp(a, "--trials") == 0 && n >= 1)
                o->trials = (unsigned)n;
            else if (strcmp(a, "--rings") == 0 && n >= 1)
                o->rings = (unsigned)n;
            else if (strcmp(a, "--keys") == 0 && n >= 1000)
                o->keys = n;
            else
                goto bad;
        }
        continue;
    bad:
        fprintf(stderr, "ringkv-sim: bad option %s%s%s\n", a, v ? " " : "",
                v ? v : "");
        return -1;
    }
    return 0;
}

static const char *alloc_name(enum ring_alloc a)
{
    return a == RING_ALLOC_RANDOM ? "random" : "balanced";
}

static double now_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

/* CPU time of this thread: what a token choice costs, whatever else the
 * machine is doing. */
static double cpu_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

/* ---- growing a ring --------------------------------------------------------
 * Nodes "s<seed>t<trial>n<i>" join one at a time, node i in rack i % racks;
 * each picks its tokens against the ring as it stands. */

struct grow {
    unsigned nodes, tokens, rf, racks;
    enum ring_alloc alloc;
    uint64_t seed;
    unsigned trial;
    double max_pick_s; /* slowest single token choice */
};

static void node_name(char *buf, size_t len, const struct grow *g, unsigned i)
{
    snprintf(buf, len, "s%" PRIu64 "t%un%u", g->seed, g->trial, i);
}

static void rack_name(char *buf, size_t len, unsigned i, unsigned racks)
{
    snprintf(buf, len, "r%u", i % racks);
}

static struct ring_replication grow_repl(const struct grow *g,
                                         struct ring_dc_rf *dc)
{
    dc->dc = "dc1";
    dc->rf = g->rf;
    if (g->racks <= 1)
        return (struct ring_replication){RING_SIMPLE, g->rf, NULL, 0};
    return (struct ring_replication){RING_NTS, 0, dc, 1};
}

/* Add node i to *r (replacing it); r may hold NULL for an empty ring. */
static int grow_add(ring **r, struct grow *g, unsigned i, uint64_t epoch)
{
    char name[64], rack[32];
    uint64_t tok[RING_MAX_TOKENS_PER_NODE];
    struct ring_dc_rf dc;
    int err;

    node_name(name, sizeof(name), g, i);
    rack_name(rack, sizeof(rack), i, g->racks);
    struct ring_joiner j = {name, "dc1", rack, 0};
    double t0 = cpu_s();
    err = ring_tokens_alloc(tok, g->tokens, *r, &j, g->alloc);
    double dt = cpu_s() - t0;
    if (dt > g->max_pick_s)
        g->max_pick_s = dt;
    if (err)
        return err;
    struct ring_member m = {name, "dc1", rack, tok, g->tokens, 0, RING_NORMAL};
    ring *next;
    if (*r == NULL) {
        struct ring_config cfg = {&m, 1, grow_repl(g, &dc), epoch};
        err = ring_new(&next, &cfg);
    } else {
        err = ring_change(&next, *r, &m, NULL, epoch);
    }
    if (err)
        return err;
    ring_free(*r);
    *r = next;
    return 0;
}

static int grow_ring(ring **out, struct grow *g)
{
    ring *r = NULL;
    int err = 0;
    *out = NULL;
    if (g->alloc == RING_ALLOC_RANDOM) {
        /* random tokens do not depend on the ring: build it once */
        struct ring_member *ms = calloc(g->nodes, sizeof(*ms));
        uint64_t *tok = malloc((size_t)g->nodes * g->tokens * sizeof(*tok));
        char(*names)[64] = malloc((size_t)g->nodes * 64);
        char(*racks)[32] = malloc((size_t)g->nodes * 32);
        struct ring_dc_rf dc;
        err = -ENOMEM;
        if (ms && tok && names && racks) {
            err = 0;
            for (unsigned i = 0; i < g->nodes && !err; i++) {
                node_name(names[i], 64, g, i);
                rack_name(racks[i], 32, i, g->racks);
                struct ring_joiner j = {names[i], "dc1", racks[i], 0};
                err = ring_tokens_alloc(&tok[(size_t)i * g->tokens], g->tokens,
                                        NULL, &j, g->alloc);
                ms[i] = (struct ring_member){
                    names[i],  "dc1", racks[i],   &tok[(size_t)i * g->tokens],
                    g->tokens, 0,     RING_NORMAL};
            }
            struct ring_config cfg = {ms, g->nodes, grow_repl(g, &dc), 1};
            if (!err)
                err = ring_new(&r, &cfg);
        }
        free(ms);
        free(tok);
        free(names);
        free(racks);
        *out = r;
        return err;
    }
    for (unsigned i = 0; i < g->nodes; i++) {
        if ((err = grow_add(&r, g, i, i + 1)) != 0) {
            ring_free(r);
            return err;
        }
    }
    *out = r;
    return 0;
}

/* largest / mean share over placed nodes, raw and effective */
static void spread(const ring *r, double *raw, double *eff)
{
    double sr = 0, se = 0, mr = 0, me = 0;
    size_t n = 0;
    for (uint32_t i = 0; i < ring_node_count(r); i++) {
        struct ring_node_info in;
        ring_node_get(r, &in, i);
        if (in.state != RING_NORMAL)
            continue;
        n++;
        sr += in.raw;
        se += in.effective;
        mr = in.raw > mr ? in.raw : mr;
        me = in.effective > me ? in.effective : me;
    }
    *raw = n ? mr / (sr / (double)n) : 0;
    *eff = n ? me / (se / (double)n) : 0;
}

static int cmp_double(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

static double p95(double *v, size_t n)
{
    qsort(v, n, sizeof(double), cmp_double);
    size_t k = (size_t)ceil(0.95 * (double)n);
    return v[k ? k - 1 : 0];
}

static double mean(const double *v, size_t n)
{
    double s = 0;
    for (size_t i = 0; i < n; i++)
        s += v[i];
    return s / (double)n;
}

/* ---- balance ---------------------------------------------------------- */

static int cmd_balance(const struct opts *o)
{
    size_t nrows = o->nallocs * o->ntokens;
    double *res = calloc(nrows * 4, sizeof(double));
    double *vr = calloc(o->trials, sizeof(double));
    double *ve = calloc(o->trials, sizeof(double));
    double *pick = calloc(nrows, sizeof(double));
    int err = -ENOMEM;
    if (!res || !vr || !ve || !pick)
        goto out;

    for (size_t a = 0; a < o->nallocs; a++) {
        for (size_t t = 0; t < o->ntokens; t++) {
            size_t row = a * o->ntokens + t;
            for (unsigned tr = 0; tr < o->trials; tr++) {
                struct grow g = {o->nodes,     o->tokens[t], o->rf, o->racks,
                                 o->allocs[a], o->seed,      tr,    0};
                ring *r;
                if ((err = grow_ring(&r, &g)) != 0)
                    goto out;
                spread(r, &vr[tr], &ve[tr]);
                if (g.max_pick_s > pick[row])
                    pick[row] = g.max_pick_s;
                ring_free(r);
            }
            res[row * 4 + 0] = mean(vr, o->trials);
            res[row * 4 + 1] = p95(vr, o->trials);
            res[row * 4 + 2] = mean(ve, o->trials);
            res[row * 4 + 3] = p95(ve, o->trials);
        }
    }

    if (o->json) {
        printf("[");
        for (size_t row = 0; row < nrows; row++) {
            for (int kind = 0; kind < 2; kind++) {
                printf("%s\n {\"nodes\": %u, \"tokens\": %u, \"alloc\": "
                       "\"%s\", \"rf\": %u, \"racks\": %u, \"trials\": %u, "
                       "\"ownership\": \"%s\", \"max_over_mean\": %.4f, "
                       "\"p95_max_over_mean\": %.4f, "
                       "\"slowest_join_s\": %.4f}",
                       row || kind ? "," : "", o->nodes,
                       o->tokens[row % o->ntokens],
                       alloc_name(o->allocs[row / o->ntokens]), o->rf, o->racks,
                       o->trials, kind ? "replicated" : "raw",
                       res[row * 4 + 2 * kind], res[row * 4 + 2 * kind + 1],
                       pick[row]);
            }
        }
        printf("\n]\n");
    } else {
        printf("largest node share / mean share, over %u trials "
               "(rf %u, racks %u)\n",
               o->trials, o->rf, o->racks);
        printf("%-9s %6s %6s  %9s %9s  %9s %9s  %9s\n", "alloc", "nodes",
               "tokens", "raw", "raw p95", "repl", "repl p95", "join s");
        for (size_t row = 0; row < nrows; row++)
            printf("%-9s %6u %6u  %9.3f %9.3f  %9.3f %9.3f  %9.4f\n",
                   alloc_name(o->allocs[row / o->ntokens]), o->nodes,
                   o->tokens[row % o->ntokens], res[row * 4], res[row * 4 + 1],
                   res[row * 4 + 2], res[row * 4 + 3], pick[row]);
        printf("(join s: CPU seconds of the slowest single node's token "
               "choice)\n");
    }

    if (o->svg) {
        struct svg_series se[4];
        double xs[MAX_LIST], ys[4][MAX_LIST];
        char names[4][64];
        size_t ns = 0;
        for (size_t t = 0; t < o->ntokens; t++)
            xs[t] = o->tokens[t];
        for (size_t a = 0; a < o->nallocs; a++) {
            for (int kind = 0; kind < 2; kind++, ns++) {
                for (size_t t = 0; t < o->ntokens; t++)
                    ys[ns][t] = res[(a * o->ntokens + t) * 4 + 2 * kind];
                snprintf(names[ns], sizeof(names[ns]), "%s, %s",
                         alloc_name(o->allocs[a]), kind ? "replicated" : "raw");
                se[ns] = (struct svg_series){names[ns], xs, ys[ns], o->ntokens};
            }
        }
        char title[128];
        snprintf(title, sizeof(title),
                 "Largest / mean share, %u nodes, RF %u, %u rack%s", o->nodes,
                 o->rf, o->racks, o->racks > 1 ? "s" : "");
        struct svg_chart c = {
            .title = title,
            .xlabel = "tokens per node",
            .ylabel = "largest share / mean share",
            .series = se,
            .nseries = ns,
            .logx = 1,
            .ymin_set = 1,
            .ymin = 1.0,
        };
        if (svg_write(o->svg, &c)) {
            err = -errno;
            goto out;
        }
    }
    err = 0;
out:
    free(res);
    free(vr);
    free(ve);
    free(pick);
    return err;
}

/* ---- coown ------------------------------------------------------------ */

static int cmd_coown(const struct opts *o)
{
    size_t n = o->nodes;
    uint8_t *pair = malloc(n * n);
    double frac[MAX_LIST];
    int err = -ENOMEM;
    if (pair == NULL)
        return err;
    for (size_t t = 0; t < o->ntokens; t++) {
        double sum = 0;
        for (unsigned k = 0; k < o->rings; k++) {
            struct grow g = {o->nodes,     o->tokens[t], o->rf, o->racks,
                             o->allocs[0], o->seed,      k,     0};
            ring *r;
            if ((err = grow_ring(&r, &g)) != 0)
                goto out;
            memset(pair, 0, n * n);
            size_t nrep = ring_replica_count(r), marked = 0;
            for (size_t a = 0; a < ring_token_count(r); a++) {
                const uint32_t *rep = ring_arc_replicas(r, a);
                for (size_t i = 0; i < nrep; i++)
                    for (size_t q = i + 1; q < nrep; q++) {
                        size_t x = rep[i] < rep[q] ? rep[i] : rep[q];
                        size_t y = rep[i] ^ rep[q] ^ x;
                        if (!pair[x * n + y]) {
                            pair[x * n + y] = 1;
                            marked++;
                        }
                    }
            }
            sum += n > 1 ? (double)marked / ((double)n * (n - 1) / 2) : 0;
            ring_free(r);
        }
        frac[t] = sum / o->rings;
    }
    if (o->json) {
        printf("[");
        for (size_t t = 0; t < o->ntokens; t++)
            printf("%s\n {\"nodes\": %u, \"tokens\": %u, \"alloc\": \"%s\", "
                   "\"rf\": %u, \"racks\": %u, \"rings\": %u, "
                   "\"pair_fraction\": %.4f}",
                   t ? "," : "", o->nodes, o->tokens[t],
                   alloc_name(o->allocs[0]), o->rf, o->racks, o->rings,
                   frac[t]);
        printf("\n]\n");
    } else {
        printf("fraction of node pairs sharing a replica set "
               "(%u nodes, rf %u, %s, mean of %u rings)\n",
               o->nodes, o->rf, alloc_name(o->allocs[0]), o->rings);
        printf("%6s  %13s\n", "tokens", "pair_fraction");
        for (size_t t = 0; t < o->ntokens; t++)
            printf("%6u  %13.4f\n", o->tokens[t], frac[t]);
    }
    if (o->svg) {
        double xs[MAX_LIST];
        for (size_t t = 0; t < o->ntokens; t++)
            xs[t] = o->tokens[t];
        struct svg_series se = {"pairs sharing a replica set", xs, frac,
                                o->ntokens};
        char title[128];
        snprintf(title, sizeof(title),
                 "Node pairs sharing a replica set, %u nodes, RF %u", o->nodes,
                 o->rf);
        struct svg_chart c = {.title = title,
                              .xlabel = "tokens per node",
                              .ylabel = "fraction of node pairs",
                              .series = &se,
                              .nseries = 1,
                              .logx = 1,
                              .ymin_set = 1,
                              .ymin = 0};
        if (svg_write(o->svg, &c)) {
            err = -errno;
            goto out;
        }
    }
    err = 0;
out:
    free(pair);
    return err;
}

/* ---- join ------------------------------------------------------------- */

static int cmd_join(const struct opts *o)
{
    struct grow g = {o->nodes,     o->tokens[0], o->rf, o->racks,
                     o->allocs[0], o->seed,      0,     0};
    ring *a = NULL, *b = NULL;
    struct ring_move *plan = NULL;
    size_t nplan = 0, n = o->nodes;
    double *lost = calloc(n + 1, sizeof(double));
    double *mlost = calloc(n + 1, sizeof(double));
    int err = -ENOMEM;
    if (!lost || !mlost)
        goto out;
    if ((err = grow_ring(&a, &g)) != 0)
        goto out;
    b = ring_ref(a);
    if ((err = grow_add(&b, &g, o->nodes, o->nodes + 1)) != 0)
        goto out;
    if ((err = ring_plan_new(&plan, &nplan, a, b)) != 0)
        goto out;

    /* moved data, as a fraction of all stored data (replicas included) */
    double moved = 0;
    for (size_t i = 0; i < nplan; i++) {
        double f = ring_range_fraction(plan[i].range);
        if (plan[i].gain == RING_NONE)
            continue;
        moved += f;
        for (uint32_t k = 0; k < plan[i].nlose; k++)
            lost[plan[i].lose[k]] += f / plan[i].nlose;
    }
    double total = (double)ring_replica_count(a);
    size_t donors = 0;
    double largest = 0;
    for (size_t i = 0; i < ring_node_count(a); i++) {
        donors += lost[i] > 0;
        largest = lost[i] > largest ? lost[i] : largest;
    }

    /* hash mod N -> mod N+1 on sampled keys */
    unsigned long mmoved = 0;
    for (unsigned long k = 0; k < o->keys; k++) {
        char key[32];
        int len = snprintf(key, sizeof(key), "key:%lu", k);
        uint64_t h = rk_token(key, (size_t)len);
        if (h % n != h % (n + 1)) {
            mmoved++;
            mlost[h % n] += 1;
        }
    }
    size_t mdonors = 0;
    double mlargest = 0;
    for (size_t i = 0; i < n; i++) {
        mdonors += mlost[i] > 0;
        mlargest = mlost[i] > mlargest ? mlost[i] : mlargest;
    }
    double mf = (double)mmoved / (double)o->keys;
    double mshare = mmoved ? mlargest / (double)mmoved : 0;
    double mf_ring = moved / total, share = moved > 0 ? largest / moved : 0;

    if (o->json) {
        printf("{\"nodes\": %u, \"tokens\": %u, \"alloc\": \"%s\", \"rf\": "
               "%u, \"racks\": %u, \"ideal_fraction\": %.4f, "
               "\"moved_fraction\": %.4f, \"donors\": %zu, "
               "\"largest_donor_share\": %.4f, \"modulo_moved_fraction\": "
               "%.4f, \"modulo_donors\": %zu, "
               "\"modulo_largest_donor_share\": %.4f, \"plan_moves\": %zu}\n",
               o->nodes, o->tokens[0], alloc_name(o->allocs[0]), o->rf,
               o->racks, 1.0 / (n + 1), mf_ring, donors, share, mf, mdonors,
               mshare, nplan);
    } else {
        printf("growing %u -> %u nodes (%u tokens, %s, rf %u, racks %u)\n",
               o->nodes, o->nodes + 1, o->tokens[0], alloc_name(o->allocs[0]),
               o->rf, o->racks);
        printf("%-12s %15s %7s %20s\n", "placement", "moved_fraction", "donors",
               "largest_donor_share");
        printf("%-12s %15.4f %7zu %20.4f\n", "ring", mf_ring, donors, share);
        printf("%-12s %15.4f %7zu %20.4f\n", "hash mod N", mf, mdonors, mshare);
        printf("ideal moved fraction 1/%u = %.4f; plan has %zu moves\n",
               o->nodes + 1, 1.0 / (n + 1), nplan);
    }
    if (o->svg) {
        double *ys = calloc(n, sizeof(double));
        double *ms = calloc(n, sizeof(double));
        char(*cats)[16] = calloc(n, 16);
        const char **cp = calloc(n, sizeof(char *));
        err = -ENOMEM;
        if (ys && ms && cats && cp) {
            for (size_t i = 0; i < n; i++) {
                struct ring_node_info in;
                ring_node_get(a, &in, (uint32_t)i);
                /* node order: by join order, recovered from the name */
                const char *p = strrchr(in.name, 'n');
                unsigned long id = p ? strtoul(p + 1, NULL, 10) : i;
                if (id >= n)
                    id = i;
                ys[id] = moved > 0 ? lost[i] / moved : 0;
                ms[i] = mmoved ? mlost[i] / (double)mmoved : 0;
                snprintf(cats[i], 16, "%zu", i);
                cp[i] = cats[i];
            }
            struct svg_series se[2] = {{"ring", NULL, ys, n},
                                       {"hash mod N", NULL, ms, n}};
            char title[128];
            snprintf(title, sizeof(title),
                     "Share of moved data per donor, %u -> %u nodes", o->nodes,
                     o->nodes + 1);
            struct svg_chart c = {.title = title,
                                  .xlabel = "donor node (join order)",
                                  .ylabel = "share of what moves",
                                  .series = se,
                                  .nseries = 2,
                                  .bars = 1,
                                  .cats = cp,
                                  .ncats = n,
                                  .ymin_set = 1,
                                  .ymin = 0,
                                  .hline_set = 1,
                                  .hline = 1.0 / n};
            err = svg_write(o->svg, &c) ? -errno : 0;
        }
        free(ys);
        free(ms);
        free(cats);
        free(cp);
        if (err)
            goto out;
    }
    err = 0;
out:
    ring_plan_free(plan);
    ring_free(a);
    ring_free(b);
    free(lost);
    free(mlost);
    return err;
}

/* ---- bench-lookup ----------------------------------------------------- */

/* Jump consistent hash, Lamping & Veach 2014, as published. */
static int32_t jump_hash(uint64_t key, int32_t buckets)
{
    int64_t b = -1, j = 0;
    while (j < buckets) {
        b = j;
        key = key * 2862933555777941757ULL + 1;
        j = (int64_t)((double)(b + 1) *
                      ((double)(1LL << 31) / (double)((key >> 33) + 1)));
    }
    return (int32_t)b;
}

static int cmd_bench(const struct opts *o)
{
    struct grow g = {o->nodes,     o->tokens[0], o->rf, 1,
                     o->allocs[0], o->seed,      0,     0};
    ring *r = NULL;
    size_t nk = o->keys;
    uint64_t *keys = malloc(nk * sizeof(uint64_t));
    int err = -ENOMEM;
    if (keys == NULL)
        return err;
    if ((err = grow_ring(&r, &g)) != 0)
        goto out;
    for (size_t i = 0; i < nk; i++) {
        char key[32];
        int len = snprintf(key, sizeof(key), "key:%zu", i);
        keys[i] = rk_token(key, (size_t)len);
    }
    double best_ring = INFINITY, best_jump = INFINITY;
    volatile uint64_t sink = 0;
    for (int round = 0; round < 7; round++) {
        uint64_t acc = 0;
        uint32_t rep[RING_MAX_REPLICAS];
        double t0 = now_s();
        for (size_t i = 0; i < nk; i++) {
            size_t n = ring_replicas(r, keys[i], rep, RING_MAX_REPLICAS);
            for (size_t k = 0; k < n; k++)
                acc += rep[k];
        }
        double t1 = now_s();
        for (size_t i = 0; i < nk; i++)
            acc += (uint64_t)jump_hash(keys[i], (int32_t)o->nodes);
        double t2 = now_s();
        sink += acc;
        if (t1 - t0 < best_ring)
            best_ring = t1 - t0;
        if (t2 - t1 < best_jump)
            best_jump = t2 - t1;
    }
    (void)sink;
    double rns = best_ring * 1e9 / (double)nk;
    double jns = best_jump * 1e9 / (double)nk;
    if (o->json) {
        printf("{\"nodes\": %u, \"tokens\": %u, \"rf\": %u, \"alloc\": "
               "\"%s\", \"ring_tokens\": %zu, \"keys\": %zu, \"ring_ns\": "
               "%.2f, \"jump_ns\": %.2f, \"ratio\": %.3f}\n",
               o->nodes, o->tokens[0], o->rf, alloc_name(o->allocs[0]),
               ring_token_count(r), nk, rns, jns, rns / jns);
    } else {
        printf("lookup of %zu keys, best of 7 rounds (%u nodes x %u tokens "
               "= %zu tokens, rf %u)\n",
               nk, o->nodes, o->tokens[0], ring_token_count(r), o->rf);
        printf("%-34s %8s\n", "method", "ns/key");
        printf("%-34s %8.2f\n", "ring preference list (RF replicas)", rns);
        printf("%-34s %8.2f\n", "jump consistent hash (1 bucket)", jns);
        printf("ratio ring/jump: %.3f\n", rns / jns);
    }
    if (o->svg) {
        double ys[2] = {rns, jns};
        const char *cats[2] = {"ring (RF replicas)", "jump hash (1 bucket)"};
        struct svg_series se = {"ns per lookup", NULL, ys, 2};
        char title[128];
        snprintf(title, sizeof(title), "Lookup cost, %zu tokens, RF %u",
                 ring_token_count(r), o->rf);
        struct svg_chart c = {.title = title,
                              .xlabel = "",
                              .ylabel = "ns per key",
                              .series = &se,
                              .nseries = 1,
                              .bars = 1,
                              .cats = cats,
                              .ncats = 2,
                              .ymin_set = 1,
                              .ymin = 0};
        if (svg_write(o->svg, &c)) {
            err = -errno;
            goto out;
        }
    }
    err = 0;
out:
    ring_free(r);
    free(keys);
    return err;
}

int main(int argc, char **argv)
{
    struct opts o = {
        .nodes = 100,
        .tokens = {16},
        .ntokens = 1,
        .allocs = {RING_ALLOC_BALANCED},
        .nallocs = 1,
        .rf = 3,
        .racks = 1,
        .trials = 5,
        .rings = 3,
        .seed = 1,
        .keys = 1000000,
    };
    int err;

    if (argc < 2 || strcmp(argv[1], "-h") == 0 ||
        strcmp(argv[1], "--help") == 0) {
        usage();
        return argc < 2 ? 2 : 0;
    }
    const char *cmd = argv[1];
    if (strcmp(cmd, "join") == 0)
        o.nodes = 12;
    if (strcmp(cmd, "bench-lookup") == 0) {
        o.tokens[0] = 256;
        o.allocs[0] = RING_ALLOC_RANDOM;
    }
    if (parse_opts(&o, argc, argv)) {
        usage();
        return 2;
    }
    if (strcmp(cmd, "balance") == 0)
        err = cmd_balance(&o);
    else if (strcmp(cmd, "coown") == 0)
        err = cmd_coown(&o);
    else if (strcmp(cmd, "join") == 0)
        err = cmd_join(&o);
    else if (strcmp(cmd, "bench-lookup") == 0)
        err = cmd_bench(&o);
    else {
        usage();
        return 2;
    }
    if (err) {
        fprintf(stderr, "ringkv-sim %s: %s\n", cmd, rk_strerror(err));
        return 1;
    }
    return 0;
}
