/*
 * join_plan.c - which ranges a join pulls, and from which donor each
 * (pure: rings in, plans out; no host, no clock, no I/O).
 *
 * stream_plan_join cuts every range the joining node gains (ring_plan_new
 * from the ring to the pending ring) at the ring's tokens, so that each
 * piece lies inside one arc and every replica of that arc holds all of it:
 * those replicas are the piece's candidates, the joiner's data centre
 * first. A piece whose candidates can share it and that is larger than a
 * quarter of a donor's fair share is cut again into equal pieces, so that
 * a few big arcs cannot pin most of the bytes on one donor.
 *
 * stream_plan_donors then chooses a donor per piece among its live
 * candidates so that the bytes spread: pieces are weighed by the token
 * space they cover (keys hash uniformly), the biggest first, each to the
 * candidate with the least weight so far (ties: the first in ring order,
 * the order of the replica walk), and then pieces are moved off the most
 * loaded donor while that lowers the largest load (the greedy choice alone
 * can leave a donor that was the only candidate of some pieces above the
 * others). Everything is deterministic: the same rings and liveness give
 * the same plan, which a resumed join relies on for its saved positions.
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "streaming/streaming_internal.h"

#define PIECES_PER_DONOR 4 /* a piece is at most this fraction of a share */

static uint64_t width(struct ring_range r)
{
    return r.start == r.end ? UINT64_MAX : r.end - r.start;
}

/* A piece's weight: its token space in units of 2^16 tokens (a sum over
 * RF rings fits in 64 bits), never 0. */
static uint64_t weight(struct ring_range r)
{
    return (width(r) >> 16) + 1;
}

struct plan_buf {
    struct stream_plan_range *v;
    size_t n, cap;
};

static int buf_push(struct plan_buf *b, const struct stream_plan_range *p)
{
    if (b->n == b->cap) {
        size_t cap = b->cap ? 2 * b->cap : 64;
        struct stream_plan_range *v = realloc(b->v, cap * sizeof(*v));
        if (!v)
            return -ENOMEM;
        b->v = v;
        b->cap = cap;
    }
    b->v[b->n++] = *p;
    return 0;
}

/* Where the piece starting at `start` inside rg ends: at the next token of
 * `from` inside rg, or at rg.end. */
static uint64_t cut_end(const ring *from, uint64_t start, struct ring_range rg)
{
    uint64_t t = ring_arc_range(from, ring_arc_find(from, start + 1)).end;
    return t != rg.end &&
                   ring_range_contains((struct ring_range){start, rg.end}, t)
               ? t
               : rg.end;
}

/* Piece p's candidates: the replicas in `from` of the arc holding it, but
 * `self` and `excl`, those of data centre `dc` first. */
static void candidates(struct stream_plan_range *p,
                       const ring *from,
                       uint32_t self,
                       uint32_t excl,
                       const char *dc)
{
    uint32_t rep[RING_MAX_REPLICAS];
    size_t nr = ring_replicas(from, p->range.end, rep, RING_MAX_REPLICAS);
    if (nr > RING_MAX_REPLICAS)
        nr = RING_MAX_REPLICAS;
    p->ncand = p->npref = 0;
    for (int pass = 0; pass < 2; pass++)
        for (size_t k = 0; k < nr; k++) {
            struct ring_node_info ni;
            if (rep[k] == self || rep[k] == excl ||
                ring_node_get(from, &ni, rep[k]) < 0)
                continue;
            bool local = !dc || strcmp(ni.dc, dc) == 0;
            if (local != (pass == 0))
                continue;
            p->cand[p->ncand++] = rep[k];
            p->npref += pass == 0;
        }
    if (p->npref == 0) /* none in the joiner's data centre: any will do */
        p->npref = p->ncand;
}

/* Whether member m of r is in data centre dc. */
static bool in_dc(const ring *r, uint32_t m, const char *dc)
{
    struct ring_node_info ni;
    return ring_node_get(r, &ni, m) == 0 && strcmp(ni.dc, dc) == 0;
}

/* The pieces of cut (ranges inside one arc of `from` each, candidates
 * set) into *out, a piece that two candidates or more may send cut again
 * into equal pieces while it is over a quarter of a donor's fair share
 * of the total. 0 (*out malloc'd, NULL when none) or -ENOMEM. */
static int pieces_split(struct stream_plan_range **out,
                        size_t *nout,
                        const struct plan_buf *cut,
                        const ring *from)
{
    /* a donor's fair share: the token space over the donors that may
     * send, each counted once */
    uint64_t total = 0; /* weights */
    size_t ndonors = 0;
    size_t nn = ring_node_count(from);
    bool *seen = calloc(nn ? nn : 1, sizeof(*seen));
    if (!seen)
        return -ENOMEM;
    for (size_t i = 0; i < cut->n; i++) {
        total += weight(cut->v[i].range);
        for (uint32_t k = 0; k < cut->v[i].npref; k++)
            if (!seen[cut->v[i].cand[k]]) {
                seen[cut->v[i].cand[k]] = true;
                ndonors++;
            }
    }
    free(seen);
    uint64_t piece_max =
        ndonors > 1 ? total / (ndonors * PIECES_PER_DONOR) + 1 : UINT64_MAX;
    struct plan_buf b = {0};
    int rc = 0;
    for (size_t i = 0; rc == 0 && i < cut->n; i++) {
        struct stream_plan_range p = cut->v[i];
        uint64_t w = weight(p.range);
        uint64_t k =
            p.npref > 1 && w > piece_max ? (w + piece_max - 1) / piece_max : 1;
        uint64_t step = width(p.range) / k, a = p.range.start,
                 end = p.range.end;
        for (uint64_t j = 0; rc == 0 && j < k; j++) {
            uint64_t e = j + 1 == k ? end : a + step;
            p.range = (struct ring_range){a, e};
            p.weight = weight(p.range);
            p.donor = 0;
            rc = buf_push(&b, &p);
            a = e;
        }
    }
    if (rc < 0) {
        free(b.v);
        return rc;
    }
    *out = b.v;
    *nout = b.n;
    return 0;
}

int stream_plan_join(struct stream_plan_range **out,
                     size_t *nout,
                     const ring *from,
                     const ring *to,
                     const char *self,
                     const char *excl)
{
    *out = NULL;
    *nout = 0;
    uint32_t self_to = ring_node_find(to, self);
    if (self_to == RING_NONE)
        return RK_ENOTFOUND;
    struct ring_node_info me;
    if (ring_node_get(to, &me, self_to) < 0)
        return RK_ENOTFOUND;
    struct ring_move *mv = NULL;
    size_t nmv = 0;
    int rc = ring_plan_new(&mv, &nmv, from, to);
    if (rc < 0)
        return rc;
    bool placed = ring_token_count(from) > 0;
    uint32_t self_from = ring_node_find(from, self);
    uint32_t excl_from =
        excl && excl[0] ? ring_node_find(from, excl) : RING_NONE;
    struct plan_buf cut = {0};
    /* each move this node gains, cut at the ring's tokens */
    for (size_t i = 0; rc == 0 && i < nmv; i++) {
        if (mv[i].gain != self_to)
            continue;
        for (uint64_t a = mv[i].range.start, e; rc == 0; a = e) {
            e = placed ? cut_end(from, a, mv[i].range) : mv[i].range.end;
            struct stream_plan_range p = {.range = {a, e}};
            if (placed)
                candidates(&p, from, self_from, excl_from, me.dc);
            rc = buf_push(&cut, &p);
            if (e == mv[i].range.end)
                break;
        }
    }
    ring_plan_free(mv);
    if (rc == 0)
        rc = pieces_split(out, nout, &cut, from);
    free(cut.v);
    return rc;
}

int stream_plan_rebuild(struct stream_plan_range **out,
                        size_t *nout,
                        const ring *r,
                        const char *self,
                        const char *from_dc)
{
    *out = NULL;
    *nout = 0;
    uint32_t me = ring_node_find(r, self);
    if (me == RING_NONE)
        return RK_ENOTFOUND;
    size_t nr = ring_node_ranges(r, me, NULL, 0);
    if (nr == 0)
        return 0;
    struct ring_range *rr = calloc(nr, sizeof(*rr));
    if (!rr)
        return -ENOMEM;
    ring_node_ranges(r, me, rr, nr);
    struct plan_buf cut = {0};
    int rc = 0;
    /* each range it replicates, cut at the ring's tokens: every piece in
     * one arc, whose replicas in from_dc are its candidates */
    for (size_t i = 0; rc == 0 && i < nr; i++)
        for (uint64_t a = rr[i].start, e; rc == 0; a = e) {
            e = cut_end(r, a, rr[i]);
            struct stream_plan_range p = {.range = {a, e}};
            candidates(&p, r, me, RING_NONE, from_dc);
            p.ncand = p.npref < p.ncand ? p.npref : p.ncand;
            if (p.ncand && !in_dc(r, p.cand[0], from_dc))
                p.ncand = 0; /* none in from_dc: candidates() took any */
            p.npref = p.ncand;
            rc = buf_push(&cut, &p);
            if (e == rr[i].end)
                break;
        }
    free(rr);
    if (rc == 0)
        rc = pieces_split(out, nout, &cut, r);
    free(cut.v);
    return rc;
}

/* The biggest first; equal ones in ring order (their index). */
struct by_weight {
    uint64_t w;
    size_t i;
};

static int by_weight_cmp(const void *a, const void *b)
{
    const struct by_weight *x = a, *y = b;
    if (x->w != y->w)
        return x->w < y->w ? 1 : -1;
    return (x->i > y->i) - (x->i < y->i);
}

static bool is_live(const bool *live, size_t nmembers, uint32_t m)
{
    return m < nmembers && (!live || live[m]);
}

int stream_plan_donors(struct stream_plan_range *r,
                       size_t n,
                       const bool *live,
                       uint64_t *load,
                       size_t nmembers)
{
    memset(load, 0, nmembers * sizeof(*load));
    struct by_weight *ord = calloc(n ? n : 1, sizeof(*ord));
    if (!ord)
        return -ENOMEM;
    for (size_t i = 0; i < n; i++)
        ord[i] = (struct by_weight){r[i].weight, i};
    qsort(ord, n, sizeof(*ord), by_weight_cmp);
    for (size_t o = 0; o < n; o++) {
        struct stream_plan_range *p = &r[ord[o].i];
        int best = -1;
        for (uint32_t k = 0; k < p->npref; k++)
            if (is_live(live, nmembers, p->cand[k]) &&
                (best < 0 || load[p->cand[k]] < load[p->cand[best]]))
                best = (int)k;
        /* none live: a live one of another data centre, else the first
         * (the join asks the others when it runs) */
        for (uint32_t k = p->npref; best < 0 && k < p->ncand; k++)
            if (is_live(live, nmembers, p->cand[k]))
                best = (int)k;
        p->donor = best < 0 ? 0 : (uint32_t)best;
        if (p->ncand && p->cand[p->donor] < nmembers)
            load[p->cand[p->donor]] += p->weight;
    }
    free(ord);
    /* Move pieces off the most loaded donor while one can go to a live
     * candidate that stays below the load it leaves (so the largest load
     * falls, or as many donors share it, less one). Each move lowers the
     * sum of squared loads, so this ends; bounded anyway. */
    for (size_t round = 0; round < 4 * n + 16; round++) {
        uint32_t top = 0;
        for (uint32_t m = 1; m < nmembers; m++)
            if (load[m] > load[top])
                top = m;
        size_t bi = n;
        uint32_t bk = 0;
        uint64_t best_after = load[top];
        for (size_t i = 0; i < n; i++) {
            struct stream_plan_range *p = &r[i];
            if (!p->ncand || p->cand[p->donor] != top)
                continue;
            for (uint32_t k = 0; k < p->npref; k++) {
                uint32_t c = p->cand[k];
                if (c == top || !is_live(live, nmembers, c))
                    continue;
                uint64_t to = load[c] + p->weight, from = load[top] - p->weight;
                uint64_t worst = to > from ? to : from;
                if (to < load[top] && worst < best_after) {
                    best_after = worst;
                    bi = i;
                    bk = k;
                }
            }
        }
        if (bi == n)
            break;
        load[top] -= r[bi].weight;
        load[r[bi].cand[bk]] += r[bi].weight;
        r[bi].donor = bk;
    }
    return 0;
}
