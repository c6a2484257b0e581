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
