/*
 * ring_plan.c - movement plans: which ranges change hands between two rings.
 *
 * The union of both rings' tokens cuts the circle into elementary ranges;
 * each lies inside one arc of either ring, so its replica set in each ring is
 * one lookup. Nodes are matched by name. A range whose sets differ yields
 * one move per node that gains it, each listing every node that loses it
 * (or one move with gain RING_NONE when it only loses replicas). Moves that
 * continue the previous elementary range with the same gainer and losers
 * are merged into one. O((Ta + Tb) * RF) time.
 */
#include <errno.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>

#include "common/rk.h"
#include "ring/ring.h"
#include "ring/ring_internal.h"

void ring_plan_free(struct ring_move *plan)
{
    free(plan);
}

/* Node index map from ring x to ring y by name (both sorted by name). */
static void plan__map(uint32_t *out, const ring *x, const ring *y)
{
    size_t i = 0, k = 0;
    while (i < x->nnodes) {
        int c = k < y->nnodes ? strcmp(x->nodes[i].name, y->nodes[k].name) : -1;
        if (c == 0) {
            out[i++] = (uint32_t)k++;
        } else if (c < 0) {
            out[i++] = RING_NONE;
        } else {
            k++;
        }
    }
}

static int plan__has(const uint32_t *set, size_t n, uint32_t v)
{
    for (size_t i = 0; i < n; i++)
        if (set[i] == v)
            return 1;
    return 0;
}

static int plan__cmp_u32(const void *a, const void *b)
{
    uint32_t x = *(const uint32_t *)a, y = *(const uint32_t *)b;
    return (x > y) - (x < y);
}

struct plan__buf {
    struct ring_move *v;
    size_t n, cap;
};

static int plan__push(struct plan__buf *b, const struct ring_move *m)
{
    if (b->n == b->cap) {
        size_t cap = b->cap ? 2 * b->cap : 64;
        struct ring_move *v = realloc(b->v, cap * sizeof(*v));
        if (v == NULL)
            return -ENOMEM;
        b->v = v;
        b->cap = cap;
    }
    b->v[b->n++] = *m;
    return 0;
}

int ring_plan_new(struct ring_move **out,
                  size_t *nout,
                  const ring *from,
                  const ring *to)
{
    struct plan__buf buf = {0};
    uint32_t *a2b = NULL, *b2a = NULL;
    uint64_t *pos = NULL;
    size_t np = 0;
    /* indices into buf of the moves that end where the current range
     * starts (candidates for merging), and of those ending at this one */
    size_t prev[RING_MAX_REPLICAS + 1], cur[RING_MAX_REPLICAS + 1];
    size_t nprev = 0, ncur;
    int err = -ENOMEM;

    *out = NULL;
    *nout = 0;
    a2b = malloc((from->nnodes + 1) * sizeof(uint32_t));
    b2a = malloc((to->nnodes + 1) * sizeof(uint32_t));
    pos = malloc((from->ntok + to->ntok + 1) * sizeof(uint64_t));
    if (!a2b || !b2a || !pos)
        goto out_free;
    plan__map(a2b, from, to);
    plan__map(b2a, to, from);

    /* merge both token lists */
    for (size_t i = 0, k = 0; i < from->ntok || k < to->ntok;) {
        uint64_t t;
        if (k >= to->ntok || (i < from->ntok && from->tok[i] < to->tok[k]))
            t = from->tok[i++];
        else if (i >= from->ntok || to->tok[k] < from->tok[i])
            t = to->tok[k++];
        else
            t = (i++, to->tok[k++]);
        pos[np++] = t;
    }

    for (size_t p = 0; p < np; p++) {
        struct ring_range rg = {pos[p ? p - 1 : np - 1], pos[p]};
        const uint32_t *ra = NULL, *rb = NULL;
        size_t na = 0, nb = 0;
        struct ring_move mv = {.range = rg};
        uint32_t gained[RING_MAX_REPLICAS];
        size_t ng = 0;

        if (from->ntok) {
            ra = ring_arc_replicas(from, ring_arc_find(from, rg.end));
            na = from->nrep;
        }
        if (to->ntok) {
            rb = ring_arc_replicas(to, ring_arc_find(to, rg.end));
            nb = to->nrep;
        }
        for (size_t i = 0; i < na; i++)
            if (a2b[ra[i]] == RING_NONE || !plan__has(rb, nb, a2b[ra[i]]))
                mv.lose[mv.nlose++] = ra[i];
        for (size_t i = 0; i < nb; i++)
            if (b2a[rb[i]] == RING_NONE || !plan__has(ra, na, b2a[rb[i]]))
                gained[ng++] = rb[i];
        ncur = 0;
        if (ng == 0 && mv.nlose == 0) {
            nprev = 0;
            continue;
        }
        qsort(mv.lose, mv.nlose, sizeof(uint32_t), plan__cmp_u32);
        if (ng == 0)
            gained[ng++] = RING_NONE;
        for (size_t g = 0; g < ng; g++) {
            size_t q;
            mv.gain = gained[g];
            for (q = 0; q < nprev; q++) {
                struct ring_move *e = &buf.v[prev[q]];
                if (e->gain == mv.gain && e->nlose == mv.nlose &&
                    e->range.end == rg.start && p > 0 &&
                    memcmp(e->lose, mv.lose, mv.nlose * sizeof(uint32_t)) == 0)
                    break;
            }
            if (q < nprev) {
                buf.v[prev[q]].range.end = rg.end;
                cur[ncur++] = prev[q];
            } else {
                if ((err = plan__push(&buf, &mv)) != 0)
                    goto out_free;
                cur[ncur++] = buf.n - 1;
            }
        }
        memcpy(prev, cur, ncur * sizeof(size_t));
        nprev = ncur;
    }
    *out = buf.v;
    *nout = buf.n;
    buf.v = NULL;
    err = 0;
out_free:
    free(buf.v);
    free(a2b);
    free(b2a);
    free(pos);
    return err;
}

/* ---- uncovered parts ----------------------------------------------------- */

/* A piece of the line [0, 2^64): tokens t with lo < t <= hi, lo = -1
 * standing for "from 0". A range (s, e] is one piece, or two when it wraps
 * (s >= e): (s, MAX] and (-1, e]. */
struct piece {
    __int128 lo, hi;
};

static int piece_split(struct piece *out, struct ring_range r)
{
    if (r.start < r.end) {
        out[0] = (struct piece){r.start, r.end};
        return 1;
    }
    out[0] = (struct piece){r.start, (__int128)UINT64_MAX};
    out[1] = (struct piece){-1, r.end};
    return 2;
}

static int piece_cmp(const void *a, const void *b)
{
    const struct piece *x = a, *y = b;
    return x->lo < y->lo ? -1 : x->lo > y->lo;
}

struct pieces {
    struct piece *p;
    size_t n, cap;
};

static int pieces_add(struct pieces *v, __int128 lo, __int128 hi)
{
    if (v->n == v->cap) {
        size_t cap = v->cap ? 2 * v->cap : 16;
        struct piece *p = realloc(v->p, cap * sizeof(*p));
        if (!p)
            return -ENOMEM;
        v->p = p;
        v->cap = cap;
    }
    v->p[v->n++] = (struct piece){lo, hi};
    return 0;
}

int ring_ranges_uncovered(struct ring_range **out,
                          size_t *nout,
                          const struct ring_range *want,
                          size_t nwant,
                          const struct ring_range *have,
                          size_t nhave)
{
    *out = NULL;
    *nout = 0;
    struct pieces h = {0}, gaps = {0};
    struct ring_range *res = NULL;
    int rc = 0;
    /* what is held, as sorted pieces merged where they touch or overlap */
    for (size_t i = 0; i < nhave && rc == 0; i++) {
        struct piece two[2];
        int np = piece_split(two, have[i]);
        for (int k = 0; k < np && rc == 0; k++)
            rc = pieces_add(&h, two[k].lo, two[k].hi);
    }
    if (rc < 0)
        goto free_pieces;
    if (h.n)
        qsort(h.p, h.n, sizeof(*h.p), piece_cmp);
    size_t nh = 0;
    for (size_t i = 0; i < h.n; i++) {
        if (nh && h.p[i].lo <= h.p[nh - 1].hi) {
            if (h.p[i].hi > h.p[nh - 1].hi)
                h.p[nh - 1].hi = h.p[i].hi;
        } else {
            h.p[nh++] = h.p[i];
        }
    }
    /* sweep each wanted piece along the held ones */
    for (size_t i = 0; i < nwant && rc == 0; i++) {
        struct piece two[2];
        int np = piece_split(two, want[i]);
        for (int k = 0; k < np && rc == 0; k++) {
            __int128 cur = two[k].lo, end = two[k].hi;
            for (size_t j = 0; j < nh && cur < end && rc == 0; j++) {
                if (h.p[j].hi <= cur)
                    continue;
                if (h.p[j].lo >= end)
                    break;
                if (h.p[j].lo > cur)
                    rc = pieces_add(&gaps, cur, h.p[j].lo);
                cur = h.p[j].hi;
            }
            if (rc == 0 && cur < end)
                rc = pieces_add(&gaps, cur, end);
        }
    }
    if (rc < 0)
        goto free_pieces;
    if (gaps.n == 0)
        goto free_pieces;
    qsort(gaps.p, gaps.n, sizeof(*gaps.p), piece_cmp);
    /* a gap from 0 and one to MAX are one range through zero */
    bool join = gaps.n > 1 && gaps.p[0].lo == -1 &&
                gaps.p[gaps.n - 1].hi == (__int128)UINT64_MAX;
    size_t first = join ? 1 : 0;
    res = malloc((gaps.n - first) * sizeof(*res));
    if (!res) {
        rc = -ENOMEM;
        goto free_pieces;
    }
    size_t nr = 0;
    for (size_t i = first; i < gaps.n; i++) {
        struct piece g = gaps.p[i];
        res[nr].start = g.lo < 0 ? UINT64_MAX : (uint64_t)g.lo;
        res[nr].end = (uint64_t)g.hi;
        if (join && i == gaps.n - 1)
            res[nr].end = (uint64_t)gaps.p[0].hi;
        nr++;
    }
    *out = res;
    *nout = nr;
free_pieces:
    free(gaps.p);
    free(h.p);
    return rc;
}

/* ---- whether two movements touch the same ranges ------------------------ */

/* Whether the ranges a and b share a token: (s1, e1] and (s2, e2] meet
 * exactly when one holds the other's end (the end of their common part
 * is one of the two ends); start == end is the whole ring. */
static bool ranges_meet(struct ring_range a, struct ring_range b)
{
    return ring_range_contains(a, b.end) || ring_range_contains(b, a.end);
}

int ring_moves_overlap(size_t *out,
                       const ring *base,
                       const ring *a,
                       const ring *b)
{
    struct ring_move *ma = NULL, *mb = NULL;
    size_t na = 0, nb = 0;
    *out = 0;
    int rc = ring_plan_new(&ma, &na, base, a);
    if (rc == 0)
        rc = ring_plan_new(&mb, &nb, base, b);
    for (size_t i = 0; rc == 0 && i < na; i++) {
        bool meet = false;
        for (size_t k = 0; k < nb && !meet; k++)
            meet = ranges_meet(ma[i].range, mb[k].range);
        *out += meet;
    }
    ring_plan_free(ma);
    ring_plan_free(mb);
    if (rc < 0)
        *out = 0;
    return rc;
}
