/*
 * ring_alloc.c - choosing tokens for a joining node.
 *
 * random:   token c = XXH3_64bits(name || c) for c = 0, 1, ...,
 *           skipping tokens already taken. Depends on the name only, so a
 *           node that comes back with a new address keeps its ranges.
 *
 * balanced: in the spirit of Cassandra's ReplicationAwareTokenAllocator
 *           (CASSANDRA-7032). Work on the joiner's replication group (its
 *           DC's tokens under NTS, all tokens under SimpleStrategy), with the
 *           group's RF and racks, and place the joiner's tokens one at a
 *           time. For each existing arc, a candidate token splits it; the
 *           candidate's effect on the replicated ownership of every node and
 *           every token is computed exactly and locally (only arcs whose
 *           placement walk reaches the split can change, and they form a
 *           short run behind it), and the candidate with the lowest
 *             sum_n (o_n - T_n)^2 / w_n + 0.1 * sum_t (o_t - T_tok)^2
 *           wins: T_n is the node's fair share by weight (of its rack's
 *           weight when there are exactly RF racks, since each rack then
 *           holds one copy), T_tok = RF / tokens. The joiner's own target
 *           grows pro rata to the tokens it has placed, and its deviation
 *           weighs ALLOC_JOINER_WEIGHT times the others'. Within an arc the
 *           effect is linear in the split point x, so the score is a
 *           quadratic in x and the best x is found in closed form (kept
 *           ALLOC_EDGE away from the arc's ends). Ties (everyone replicates
 *           everything) fall back to raw ownership. docs/ring.md shows the
 *           measured effect of each choice.
 *
 *           With exactly RF racks the score is not used: each rack is then
 *           a ring of its own with one copy, and the joiner fills its rack
 *           from its most loaded rack-mates (alloc__rack_fill below).
 *
 *           Degenerate groups are balanced on raw ownership instead: when
 *           the group has no more nodes than RF (every node holds every key
 *           whatever the tokens), or when the joiner opens a new rack while
 *           racks <= RF (that rack's only node then holds a replica of every
 *           range, as in Cassandra; Cassandra refuses to allocate there).
 *
 * Cost: O(n_tokens * T * w) for T group tokens and a walk of w positions:
 * 0.05-0.16 s of CPU for 16 tokens into a 1,000-node ring of 16 tokens;
 * the rack fill is O(T log T + n_tokens * T).
 */
#define XXH_STATIC_LINKING_ONLY /* XXH3_state_t on the stack */
#include <errno.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include <xxhash.h>

#include "common/rk.h"
#include "ring/ring.h"
#include "ring/ring_internal.h"

/* Fraction of an arc kept clear at each end when splitting it. */
#define ALLOC_EDGE (1.0 / 16.0)
/* Weight of the token-level term against the node-level one. */
#define ALLOC_TOKEN_WEIGHT 0.1
/* Weight of the joiner's own deviation against the other nodes'. */
#define ALLOC_JOINER_WEIGHT 4.0

size_t ring_tokens_for_weight(unsigned num_tokens, uint32_t weight)
{
    if (weight == 0)
        weight = RING_WEIGHT_UNIT;
    uint64_t n = ((uint64_t)num_tokens * weight + RING_WEIGHT_UNIT / 2) /
                 RING_WEIGHT_UNIT;
    if (n < 1)
        n = 1;
    if (n > RING_MAX_TOKENS_PER_NODE)
        n = RING_MAX_TOKENS_PER_NODE;
    return (size_t)n;
}

static int alloc__taken(const ring *r, uint64_t t)
{
    if (r == NULL)
        return 0;
    size_t lo = 0, hi = r->ntok;
    while (lo < hi) {
        size_t mid = lo + (hi - lo) / 2;
        if (r->tok[mid] == t)
            return 1;
        if (r->tok[mid] < t)
            lo = mid + 1;
        else
            hi = mid;
    }
    return 0;
}

static int alloc__chosen(const uint64_t *out, size_t k, uint64_t t)
{
    for (size_t i = 0; i < k; i++)
        if (out[i] == t)
            return 1;
    return 0;
}

/* Token c of a node: XXH3_64bits(name || c as 8 bytes little-endian). The
 * counter is part of the message, not the seed: XXH3 mixes a seed almost
 * linearly into short inputs, so distinct (name, seed) pairs can collide. */
static uint64_t alloc__name_token(const char *name, size_t len, uint64_t c)
{
    XXH3_state_t st;
    uint8_t le[8];
    for (int b = 0; b < 8; b++)
        le[b] = (uint8_t)(c >> (8 * b));
    XXH3_64bits_reset(&st);
    XXH3_64bits_update(&st, name, len);
    XXH3_64bits_update(&st, le, sizeof(le));
    return XXH3_64bits_digest(&st);
}

static void
alloc__random(uint64_t *out, size_t n, const ring *r, const char *name)
{
    size_t len = strlen(name);
    uint64_t c = 0;
    for (size_t k = 0; k < n; c++) {
        uint64_t t = alloc__name_token(name, len, c);
        if (alloc__taken(r, t) || alloc__chosen(out, k, t))
            continue;
        out[k++] = t;
    }
}

/* ---- balanced ---------------------------------------------------------- */

/* A change to one node's or one token's replicated ownership caused by a
 * candidate split at x (the new arc's length): b + c * x. */
struct alloc__delta {
    uint32_t id;
    double b, c;
};

struct alloc {
    size_t n;       /* group tokens (capacity n + k) */
    uint64_t *tok;  /* ascending */
    uint32_t *node; /* local node id per token; the joiner is `m` */
    uint32_t *rep;  /* per arc: `target` replicas in walk order */
    uint32_t *rpos; /* per arc: the position each replica was taken at */
    uint32_t *wlen; /* per arc: positions its walk visited */
    double *town;   /* per token: replicated ownership it brings */
    size_t m;       /* existing group nodes */
    uint32_t *rack; /* per local node */
    double *own, *tgt, *winv, *raw; /* per local node */
    double ttgt;                  /* target replicated ownership of one token */
    struct alloc__delta *dn, *dt; /* node and token deltas of a candidate */
    int32_t *nslot, *tslot;       /* id -> index in dn / dt, or -1 */
    size_t ndn, ndt;
    struct ring__walk w;
};

static void alloc__free(struct alloc *a)
{
    free(a->tok);
    free(a->node);
    free(a->rep);
    free(a->rpos);
    free(a->wlen);
    free(a->town);
    free(a->rack);
    free(a->own);
    free(a->tgt);
    free(a->winv);
    free(a->raw);
    free(a->dn);
    free(a->dt);
    free(a->nslot);
    free(a->tslot);
}

static void alloc__add(struct alloc__delta *d,
                       int32_t *slot,
                       size_t *nd,
                       uint32_t id,
                       double b,
                       double c)
{
    int32_t s = slot[id];
    if (s < 0) {
        s = (int32_t)(*nd)++;
        slot[id] = s;
        d[s] = (struct alloc__delta){id, 0, 0};
    }
    d[s].b += b;
    d[s].c += c;
}

static double alloc__arclen(const struct alloc *a, size_t j)
{
    return ring__span(a->tok[j ? j - 1 : a->n - 1], a->tok[j]);
}

/* Walk arc j of the real group ring; store its replicas and their tokens. */
static void alloc__walk_store(struct alloc *a, size_t j)
{
    unsigned cnt, tg = a->w.target;
    size_t pos[RING_MAX_REPLICAS];
    a->w.n = a->n;
    a->w.ins = SIZE_MAX;
    a->wlen[j] = (uint32_t)ring__walk_run(&a->w, j, &a->rep[j * tg], pos, &cnt);
    for (unsigned i = 0; i < tg; i++)
        a->rpos[j * tg + i] = (uint32_t)pos[i];
}

struct alloc__cand {
    double score, rawscore, xf;
    size_t k;
    int valid;
};

/* Token id of virtual position v when the candidate sits at k; the new
 * token's id is `nid`. */
static uint32_t alloc__tid(size_t v, size_t k, uint32_t nid)
{
    return v == k ? nid : (uint32_t)(v < k ? v : v - 1);
}

/* Effect of the replicas of one arc changing from (old, opos) to (nw, npos):
 * with weight b0 + c0 * x for the new set and -len for the old one. */
static void alloc__arc_delta(struct alloc *a,
                             const uint32_t *old,
                             const uint32_t *opos,
                             double oldlen,
                             const uint32_t *nw,
                             const size_t *npos,
                             double b0,
                             double c0,
                             size_t k)
{
    unsigned tg = a->w.target, same = 0;
    uint32_t nid = (uint32_t)a->n;
    if (oldlen == b0 && c0 == 0) {
        /* an arc behind the split: often nothing changes */
        while (same < tg && old[same] == nw[same] &&
               opos[same] == alloc__tid(npos[same], k, nid))
            same++;
        if (same == tg)
            return;
    }
    for (unsigned i = 0; i < tg; i++) {
        alloc__add(a->dn, a->nslot, &a->ndn, old[i], -oldlen, 0);
        alloc__add(a->dt, a->tslot, &a->ndt, opos[i], -oldlen, 0);
        alloc__add(a->dn, a->nslot, &a->ndn, nw[i], b0, c0);
        alloc__add(a->dt, a->tslot, &a->ndt, alloc__tid(npos[i], k, nid), b0,
                   c0);
    }
}

/* Score the split of the arc ending at token k (the gap from k-1 to k). */
static struct alloc__cand alloc__eval(struct alloc *a, size_t k)
{
    struct alloc__cand cand = {0};
    size_t n = a->n, prevk = k ? k - 1 : n - 1;
    unsigned tg = a->w.target, cnt;
    uint32_t joiner = (uint32_t)a->m, nid = (uint32_t)n;
    uint32_t tmp[RING_MAX_REPLICAS];
    size_t pos[RING_MAX_REPLICAS];
    uint64_t gap = a->tok[k] - a->tok[prevk];
    double L = gap ? (double)gap * 0x1p-64 : 1.0;

    if (gap != 0 && gap < 4)
        return cand;
    a->w.n = n;
    a->w.ins = k;
    a->w.ins_node = joiner;
    a->ndn = a->ndt = 0;
    /* arcs behind the split whose walk reaches it */
    for (size_t d = 1; d < n; d++) {
        size_t j = (k + n - d) % n;
        if (a->wlen[j] <= d)
            break;
        ring__walk_run(&a->w, j < k ? j : j + 1, tmp, pos, &cnt);
        double len = alloc__arclen(a, j);
        alloc__arc_delta(a, &a->rep[j * tg], &a->rpos[j * tg], len, tmp, pos,
                         len, 0, k);
    }
    /* the split arc keeps (x, t_k]; its walk changes only if it wrapped */
    if (a->wlen[k] >= n) {
        ring__walk_run(&a->w, k + 1, tmp, pos, &cnt);
    } else {
        for (unsigned i = 0; i < tg; i++) {
            tmp[i] = a->rep[k * tg + i];
            pos[i] = a->rpos[k * tg + i] + (a->rpos[k * tg + i] >= k);
        }
    }
    alloc__arc_delta(a, &a->rep[k * tg], &a->rpos[k * tg], L, tmp, pos, L, -1,
                     k);
    /* the new arc (t_{k-1}, x] */
    ring__walk_run(&a->w, k, tmp, pos, &cnt);
    for (unsigned i = 0; i < tg; i++) {
        alloc__add(a->dn, a->nslot, &a->ndn, tmp[i], 0, 1);
        alloc__add(a->dt, a->tslot, &a->ndt, alloc__tid(pos[i], k, nid), 0, 1);
    }

    /* score(x) = sum over nodes (o - T + b + c x)^2 / w
     *          + sum over tokens (o - T + b + c x)^2, minus the same at x=0
     * is quadratic in x: take its minimum, kept off the arc's ends */
    double num = 0, den = 0;
    for (size_t i = 0; i < a->ndn; i++) {
        const struct alloc__delta *e = &a->dn[i];
        double o = a->own[e->id] - a->tgt[e->id];
        num += (o + e->b) * e->c * a->winv[e->id];
        den += e->c * e->c * a->winv[e->id];
    }
    for (size_t i = 0; i < a->ndt; i++) {
        const struct alloc__delta *e = &a->dt[i];
        double o = (e->id == nid ? 0 : a->town[e->id]) - a->ttgt;
        num += (o + e->b) * e->c * ALLOC_TOKEN_WEIGHT;
        den += e->c * e->c * ALLOC_TOKEN_WEIGHT;
    }
    double x = den > 0 ? -num / den : L / 2;
    if (x < L * ALLOC_EDGE)
        x = L * ALLOC_EDGE;
    if (x > L * (1 - ALLOC_EDGE))
        x = L * (1 - ALLOC_EDGE);
    double s = 0;
    for (size_t i = 0; i < a->ndn; i++) {
        const struct alloc__delta *e = &a->dn[i];
        double o = a->own[e->id] - a->tgt[e->id];
        double v = o + e->b + e->c * x;
        s += (v * v - o * o) * a->winv[e->id];
        a->nslot[e->id] = -1;
    }
    for (size_t i = 0; i < a->ndt; i++) {
        const struct alloc__delta *e = &a->dt[i];
        double o = (e->id == nid ? 0 : a->town[e->id]) - a->ttgt;
        double v = o + e->b + e->c * x;
        s += (v * v - o * o) * ALLOC_TOKEN_WEIGHT;
        a->tslot[e->id] = -1;
    }
    /* raw ownership breaks ties (groups where everyone holds everything) */
    uint32_t ow = a->node[k];
    double rj = a->raw[joiner], ro = a->raw[ow];
    double rs = ((rj + x) * (rj + x) - rj * rj) * a->winv[joiner];
    if (ow != joiner)
        rs += ((ro - x) * (ro - x) - ro * ro) * a->winv[ow];
    cand = (struct alloc__cand){s, rs, x / L, k, 1};
    return cand;
}

static int alloc__better(const struct alloc__cand *c,
                         const struct alloc__cand *best)
{
    const double tol = 1e-18;
    if (!best->valid)
        return 1;
    if (c->score < best->score - tol)
        return 1;
    if (c->score > best->score + tol)
        return 0;
    return c->rawscore < best->rawscore;
}

/* Subtract (sign -1) or add (+1) arc j's contribution to node and token
 * ownership. */
static void alloc__contrib(struct alloc *a, size_t j, double sign)
{
    unsigned tg = a->w.target;
    double len = sign * alloc__arclen(a, j);
    for (unsigned i = 0; i < tg; i++) {
        a->own[a->rep[j * tg + i]] += len;
        a->town[a->rpos[j * tg + i]] += len;
    }
}

/* Place the joiner's token `off` past the token before k (0 < off < the
 * gap before k) and update every cached walk and ownership. */
static uint64_t alloc__apply_off(struct alloc *a, size_t k, uint64_t off)
{
    size_t n = a->n, prevk = k ? k - 1 : n - 1, lim = 0;
    unsigned tg = a->w.target;
    uint32_t joiner = (uint32_t)a->m;
    uint64_t t = a->tok[prevk] + off;

    /* arcs that may change: d = 1 .. lim behind the split, and d = 0 */
    for (size_t d = 1; d < n; d++) {
        if (a->wlen[(k + n - d) % n] <= d)
            break;
        lim = d;
    }
    for (size_t d = 0; d <= lim; d++)
        alloc__contrib(a, (k + n - d) % n, -1);
    a->raw[a->node[k]] -= (double)off * 0x1p-64;
    a->raw[joiner] += (double)off * 0x1p-64;

    /* insert at k, or at the end when t lies past the last token */
    size_t p = (k == 0 && t > a->tok[n - 1]) ? n : k;
    memmove(&a->tok[p + 1], &a->tok[p], (n - p) * sizeof(uint64_t));
    memmove(&a->node[p + 1], &a->node[p], (n - p) * sizeof(uint32_t));
    memmove(&a->wlen[p + 1], &a->wlen[p], (n - p) * sizeof(uint32_t));
    memmove(&a->town[p + 1], &a->town[p], (n - p) * sizeof(double));
    memmove(&a->rep[(p + 1) * tg], &a->rep[p * tg],
            (n - p) * tg * sizeof(uint32_t));
    memmove(&a->rpos[(p + 1) * tg], &a->rpos[p * tg],
            (n - p) * tg * sizeof(uint32_t));
    a->tok[p] = t;
    a->node[p] = joiner;
    a->town[p] = 0;
    a->n = n + 1;
    for (size_t i = 0; i < a->n * tg; i++)
        a->rpos[i] += a->rpos[i] >= p;

    for (size_t d = 0; d <= lim; d++) {
        size_t j = (k + n - d) % n;
        j = j < p ? j : j + 1;
        alloc__walk_store(a, j);
        alloc__contrib(a, j, 1);
    }
    alloc__walk_store(a, p);
    alloc__contrib(a, p, 1);
    return t;
}

/* Place the joiner's token in the gap before k at fraction xf of it. */
static uint64_t alloc__apply(struct alloc *a, size_t k, double xf)
{
    size_t prevk = k ? k - 1 : a->n - 1;
    uint64_t gap = a->tok[k] - a->tok[prevk];
    double gapd = gap ? (double)gap : 0x1p64;
    uint64_t off = (uint64_t)(xf * gapd);
    if (off < 1)
        off = 1;
    if (gap != 0 && off > gap - 1)
        off = gap - 1;
    return alloc__apply_off(a, k, off);
}

/* ---- exactly RF racks: fill the joiner's rack ---------------------------
 * With as many racks as replicas (rack-aware), every rack holds one replica
 * of every range, so a node's replicated ownership is its raw share of its
 * own rack's sub-ring: the circle cut at that rack's tokens only. A joiner's
 * token at t inside the rack arc (A, B] takes (A, t] from the owner of B and
 * from nobody else, so k tokens reach at most k donors, and a global score
 * that spreads the take evenly leaves the untouched rack-mates to drift up
 * as the rack grows (measured 1.075 at 8 tokens, 100 nodes).
 *
 * Instead the joiner chooses its donors: the rack-mates most over their fair
 * share (ownership / target, largest first), at most k of them, each cut
 * down to one common level lambda of its target (a water level, as in
 * Cassandra's NoReplicationTokenAllocator), with c the smallest count such
 * that the next rack-mate is already below lambda. The joiner ends at rho
 * of its own target J; the split between donors and joiner minimises the
 * same weighted variance as the general score, the joiner weighing
 * W = ALLOC_JOINER_WEIGHT: rho - 1 = (lambda - 1) / W, and the cuts add up
 * to what the joiner gets:
 *   sum_{i < c} (o_i - lambda T_i) = rho J
 *   lambda = (sum o_i - J (1 - 1/W)) / (sum T_i + J / W).
 * (W -> infinity: the joiner takes exactly J, which is worse with 1-4
 * tokens; W = 1: Cassandra's "everyone ends equal", which is worse at
 * 8 tokens, 100 nodes; docs/ring.md has the figures.) Tokens left over (fewer
 * than k donors) go one by one to the donor with the largest cut per token, and
 * a donor cuts its share out of its largest rack arcs in proportion to their
 * lengths, so its arcs stay large enough to feed later joiners. The tokens
 * placed are applied to the model, written to out and counted in *nout (the
 * score places the rest); returns 0 or -ENOMEM. */

struct alloc__mate {
    double ratio, own, tgt, cut;
    uint32_t id;
    unsigned ntk;
};

struct alloc__rarc {
    uint64_t start, len; /* (start, start + len]; len 0: the whole circle */
    double lenf;
    uint32_t node;
};

static int alloc__cmp_mate(const void *x, const void *y)
{
    const struct alloc__mate *p = x, *q = y;
    if (p->ratio != q->ratio)
        return p->ratio < q->ratio ? 1 : -1;
    return (p->id > q->id) - (p->id < q->id);
}

static int alloc__cmp_rarc(const void *x, const void *y)
{
    const struct alloc__rarc *p = x, *q = y;
    if (p->node != q->node)
        return (p->node > q->node) - (p->node < q->node);
    if (p->lenf != q->lenf)
        return p->lenf < q->lenf ? 1 : -1;
    return (p->start > q->start) - (p->start < q->start);
}

static int alloc__cmp_rarc_start(const void *x, const void *y)
{
    const struct alloc__rarc *p = x, *q = y;
    return (p->start > q->start) - (p->start < q->start);
}

/* First group position whose token is >= t (0 when t is past them all). */
static size_t alloc__lower(const struct alloc *a, uint64_t t)
{
    size_t lo = 0, hi = a->n;
    while (lo < hi) {
        size_t mid = lo + (hi - lo) / 2;
        if (a->tok[mid] < t)
            lo = mid + 1;
        else
            hi = mid;
    }
    return lo == a->n ? 0 : lo;
}

static int alloc__rack_fill(uint64_t *out,
                            size_t *nout,
                            struct alloc *a,
                            size_t k,
                            const ring *r,
                            double jshare)
{
    uint32_t jrack = a->rack[a->m];
    size_t nm = 0, nr = 0, nplan = 0, placed = 0;
    struct alloc__mate *mate = malloc(a->m * sizeof(*mate));
    struct alloc__rarc *arc = malloc(a->n * sizeof(*arc));
    struct alloc__rarc *plan = malloc(k * sizeof(*plan));
    size_t *first = malloc(k * sizeof(size_t));
    size_t *narcs = malloc(k * sizeof(size_t));
    int err = -ENOMEM;
    *nout = 0;
    if (mate == NULL || arc == NULL || plan == NULL || first == NULL ||
        narcs == NULL)
        goto out_free;

    /* the rack's sub-ring: its arcs and its nodes' shares of it */
    size_t last = SIZE_MAX;
    for (size_t j = 0; j < a->n; j++)
        if (a->rack[a->node[j]] == jrack)
            last = j;
    for (size_t j = 0; j < a->n; j++) {
        if (a->rack[a->node[j]] != jrack)
            continue;
        uint64_t prev = a->tok[last];
        arc[nr] = (struct alloc__rarc){prev, a->tok[j] - prev,
                                       ring__span(prev, a->tok[j]), a->node[j]};
        nr++;
        last = j;
    }
    for (size_t q = 0; q < a->m; q++) {
        if (a->rack[q] != jrack)
            continue;
        mate[nm++] = (struct alloc__mate){0, 0, a->tgt[q], 0, (uint32_t)q, 0};
    }
    if (nm == 0 || nr == 0) {
        err = 0;
        goto out_free;
    }
    /* shares from the rack arcs; mate ids are ascending, so look them up */
    for (size_t i = 0; i < nr; i++) {
        size_t lo = 0, hi = nm;
        while (hi - lo > 1) {
            size_t mid = lo + (hi - lo) / 2;
            if (mate[mid].id <= arc[i].node)
                lo = mid;
            else
                hi = mid;
        }
        mate[lo].own += arc[i].lenf;
    }
    for (size_t i = 0; i < nm; i++)
        mate[i].ratio = mate[i].tgt > 0 ? mate[i].own / mate[i].tgt : 0;
    qsort(mate, nm, sizeof(*mate), alloc__cmp_mate);

    /* water level: the c most loaded mates are cut to lambda x target */
    size_t cmax = nm < k ? nm : k, c;
    double so = 0, st = 0, lambda = 0;
    for (c = 1; c <= cmax; c++) {
        so += mate[c - 1].own;
        st += mate[c - 1].tgt;
        lambda = (so - jshare * (1 - 1 / ALLOC_JOINER_WEIGHT)) /
                 (st + jshare / ALLOC_JOINER_WEIGHT);
        if (c == cmax || lambda >= mate[c].ratio)
            break;
    }
    if (c > cmax)
        c = cmax;
    size_t ndon = 0;
    for (size_t i = 0; i < c; i++) {
        double cut = mate[i].own - lambda * mate[i].tgt;
        if (cut <= 0)
            break;
        mate[i].cut = cut;
        mate[i].ntk = 1;
        ndon++;
    }

    /* per donor, its arcs grouped and largest first */
    qsort(arc, nr, sizeof(*arc), alloc__cmp_rarc);
    for (size_t i = 0; i < ndon; i++) {
        size_t lo = 0, hi = nr;
        while (lo < hi) {
            size_t mid = lo + (hi - lo) / 2;
            if (arc[mid].node < mate[i].id)
                lo = mid + 1;
            else
                hi = mid;
        }
        first[i] = lo;
        while (hi < nr && arc[hi].node == mate[i].id)
            hi++;
        narcs[i] = hi - lo;
    }
    /* tokens left over split the largest cuts over more arcs */
    for (size_t left = k - ndon; left > 0; left--) {
        size_t best = SIZE_MAX;
        for (size_t i = 0; i < ndon; i++) {
            if (mate[i].ntk >= narcs[i])
                continue;
            if (best == SIZE_MAX ||
                mate[i].cut / mate[i].ntk > mate[best].cut / mate[best].ntk)
                best = i;
        }
        if (best == SIZE_MAX)
            break;
        mate[best].ntk++;
    }
    for (size_t i = 0; i < ndon; i++) {
        double sum = 0;
        for (size_t q = 0; q < mate[i].ntk; q++)
            sum += arc[first[i] + q].lenf;
        for (size_t q = 0; q < mate[i].ntk; q++) {
            const struct alloc__rarc *e = &arc[first[i] + q];
            double f = mate[i].cut / sum;
            if (f < ALLOC_EDGE)
                f = ALLOC_EDGE;
            if (f > 1 - ALLOC_EDGE)
                f = 1 - ALLOC_EDGE;
            double lend = e->len ? (double)e->len : 0x1p64;
            uint64_t off = (uint64_t)(f * lend);
            if (e->len != 0 && e->len < 2)
                continue;
            if (off < 1)
                off = 1;
            if (e->len != 0 && off > e->len - 1)
                off = e->len - 1;
            plan[nplan++] = (struct alloc__rarc){e->start + off, 0, 0, 0};
        }
    }

    /* apply in token order (deterministic whatever the mates' order) */
    qsort(plan, nplan, sizeof(*plan), alloc__cmp_rarc_start);
    for (size_t i = 0; i < nplan; i++) {
        uint64_t t = plan[i].start;
        size_t p = alloc__lower(a, t);
        if (a->tok[p] == t)
            continue; /* another rack's token sits there: leave it */
        size_t prevp = p ? p - 1 : a->n - 1;
        uint64_t tk = alloc__apply_off(a, p, t - a->tok[prevp]);
        while (alloc__taken(r, tk) || alloc__chosen(out, placed, tk))
            tk++;
        out[placed++] = tk;
    }
    *nout = placed;
    err = 0;
out_free:
    free(mate);
    free(arc);
    free(plan);
    free(first);
    free(narcs);
    return err;
}

static int alloc__balanced(uint64_t *out,
                           size_t k,
                           const ring *r,
                           const struct ring_joiner *j)
{
    const char *jdc = j->dc && *j->dc ? j->dc : "dc1";
    const char *jrack = j->rack && *j->rack ? j->rack : "rack1";
    struct alloc a = {0};
    uint32_t *local = NULL;
    int err = -ENOMEM;
    size_t nn = r ? r->nnodes : 0, ntok = r ? r->ntok : 0, cap = ntok + k;
    int simple = r == NULL || r->strategy == RING_SIMPLE;
    unsigned rf = r ? ring__dc_rf(r, jdc) : 1;

    local = malloc((nn ? nn : 1) * sizeof(uint32_t));
    a.tok = malloc(cap * sizeof(uint64_t));
    a.node = malloc(cap * sizeof(uint32_t));
    a.wlen = malloc(cap * sizeof(uint32_t));
    a.town = calloc(cap, sizeof(double));
    a.rack = malloc((nn + 1) * sizeof(uint32_t));
    a.own = calloc(nn + 1, sizeof(double));
    a.tgt = calloc(nn + 1, sizeof(double));
    a.raw = calloc(nn + 1, sizeof(double));
    a.winv = malloc((nn + 1) * sizeof(double));
    a.dn = malloc((nn + 1) * sizeof(*a.dn));
    a.nslot = malloc((nn + 1) * sizeof(int32_t));
    a.dt = malloc((cap + 1) * sizeof(*a.dt));
    a.tslot = malloc((cap + 1) * sizeof(int32_t));
    if (!local || !a.tok || !a.node || !a.wlen || !a.town || !a.rack ||
        !a.own || !a.tgt || !a.raw || !a.winv || !a.dn || !a.nslot || !a.dt ||
        !a.tslot)
        goto out_free;

    /* the joiner's group: local ids for its placed nodes; rack ids are the
     * local id of the first node met in that rack */
    int new_rack = 1;
    uint32_t jrack_id = 0;
    unsigned nracks = 0;
    for (size_t i = 0; i < nn; i++) {
        const struct ring__node *nd = &r->nodes[i];
        local[i] = RING_NONE;
        if (!ring__placed(nd->state) || nd->ntokens == 0 ||
            (!simple && strcmp(nd->dc, jdc) != 0))
            continue;
        local[i] = (uint32_t)a.m;
        a.winv[a.m] = (double)RING_WEIGHT_UNIT / nd->weight;
        a.rack[a.m] = (uint32_t)a.m;
        for (size_t q = 0; q < i; q++) {
            if (local[q] != RING_NONE &&
                strcmp(r->nodes[q].rack, nd->rack) == 0) {
                a.rack[a.m] = a.rack[local[q]];
                break;
            }
        }
        if (a.rack[a.m] == a.m)
            nracks++;
        if (strcmp(nd->rack, jrack) == 0) {
            new_rack = 0;
            jrack_id = a.rack[a.m];
        }
        a.m++;
    }
    double wj =
        (double)(j->weight ? j->weight : RING_WEIGHT_UNIT) / RING_WEIGHT_UNIT;
    a.winv[a.m] = 1.0 / wj;
    a.rack[a.m] = new_rack ? (uint32_t)a.m : jrack_id;
    for (size_t i = 0; i < ntok; i++) {
        uint32_t l = local[r->tok_node[i]];
        if (l == RING_NONE)
            continue;
        a.tok[a.n] = r->tok[i];
        a.node[a.n++] = l;
    }

    if (a.n == 0) {
        /* first node of its group: evenly spaced from a name-derived base */
        uint64_t base = XXH3_64bits(j->name, strlen(j->name));
        uint64_t step = UINT64_MAX / k;
        for (size_t i = 0; i < k; i++)
            out[i] = base + i * step;
        err = 0;
        goto out_free;
    }

    /* replication model for the group (see the opening comment) */
    int rack_aware = !simple;
    if (rf == 0 || a.m + 1 <= rf ||
        (rack_aware && new_rack && nracks + 1 <= rf)) {
        rf = 1;
        rack_aware = 0;
    }
    a.w = (struct ring__walk){
        .node = a.node,
        .rack = rack_aware ? a.rack : NULL,
        .rf = rf,
        .nracks = nracks + (unsigned)new_rack,
        .target = rf,
        .ins = SIZE_MAX,
    };
    a.rep = malloc(cap * rf * sizeof(uint32_t));
    a.rpos = malloc(cap * rf * sizeof(uint32_t));
    if (a.rep == NULL || a.rpos == NULL)
        goto out_free;
    for (size_t i = 0; i <= a.m; i++)
        a.nslot[i] = -1;
    for (size_t i = 0; i <= cap; i++)
        a.tslot[i] = -1;
    for (size_t i = 0; i < a.n; i++) {
        alloc__walk_store(&a, i);
        alloc__contrib(&a, i, 1);
        a.raw[a.node[i]] += alloc__arclen(&a, i);
    }

    /* targets: replicated ownership shared by weight. With exactly RF racks
     * every rack holds one replica of everything, so a node's fair share is
     * its part of its rack's weight; otherwise of the group's weight. */
    double *share = a.tgt;
    double wsum = 0;
    for (size_t q = 0; q <= a.m; q++)
        wsum += 1.0 / a.winv[q];
    int per_rack = rack_aware && a.w.nracks == rf;
    for (size_t q = 0; q <= a.m; q++) {
        double ws = 0;
        for (size_t o = 0; per_rack && o <= a.m; o++)
            if (a.rack[o] == a.rack[q])
                ws += 1.0 / a.winv[o];
        share[q] =
            per_rack ? 1.0 / a.winv[q] / ws : (double)rf / wsum / a.winv[q];
    }
    double jshare = share[a.m];
    a.ttgt = (double)rf / (double)(a.n + k);
    size_t t0 = 0;
    if (per_rack) {
        err = alloc__rack_fill(out, &t0, &a, k, r, jshare);
        if (err)
            goto out_free;
    }
    for (size_t t = t0; t < k; t++) {
        struct alloc__cand best = {0};
        /* the joiner aims at its share pro rata to the tokens placed */
        a.tgt[a.m] = jshare * (double)(t + 1) / (double)k;
        a.winv[a.m] = ALLOC_JOINER_WEIGHT / wj;
        for (size_t g = 0; g < a.n; g++) {
            struct alloc__cand c = alloc__eval(&a, g);
            if (c.valid && alloc__better(&c, &best))
                best = c;
        }
        if (!best.valid) {
            err = RK_EFULL;
            goto out_free;
        }
        uint64_t tk = alloc__apply(&a, best.k, best.xf);
        /* another DC may hold this token: step past it */
        while (alloc__taken(r, tk) || alloc__chosen(out, t, tk))
            tk++;
        out[t] = tk;
    }
    err = 0;
out_free:
    free(local);
    alloc__free(&a);
    return err;
}

int ring_tokens_alloc(uint64_t *out,
                      size_t n,
                      const ring *r,
                      const struct ring_joiner *j,
                      enum ring_alloc method)
{
    if (j == NULL || j->name == NULL || j->name[0] == '\0' || n == 0 ||
        n > RING_MAX_TOKENS_PER_NODE)
        return RK_ECONFIG;
    if (r && ring_node_find(r, j->name) != RING_NONE) {
        struct ring_node_info info;
        ring_node_get(r, &info, ring_node_find(r, j->name));
        if (ring__placed(info.state) && info.ntokens > 0)
            return RK_EEXIST;
    }
    if (method == RING_ALLOC_RANDOM) {
        alloc__random(out, n, r, j->name);
    } else if (method == RING_ALLOC_BALANCED) {
        int err = alloc__balanced(out, n, r, j);
        if (err)
            return err;
    } else {
        return RK_ECONFIG;
    }
    qsort(out, n, sizeof(uint64_t), rk_u64_cmp);
    return 0;
}
