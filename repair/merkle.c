/*
 * merkle.c - Merkle leaves for repair: the leaf plan, the depth choice, the
 * leaf hashes and the runs of differing leaves (repair/merkle.h).
 *
 * Pure: inputs in, outputs out. The leaves are a flat list rather than a
 * tree walked level by level: one round trip carries them all, and the
 * scan that hashes them costs the same at any depth (repair/session.c).
 * Widths are computed in 64-bit token arithmetic, wrapping through zero:
 * a token's offset along the arc is token - start - 1, in [0, span).
 */
#include "repair/merkle.h"

#include <errno.h>
#include <stdbool.h>
#include <stdlib.h>

#include <xxhash.h>

/* ---- the leaf plan ------------------------------------------------------ */

/* Tokens in the arc, minus one (the whole ring: UINT64_MAX). */
static uint64_t arc_span_m1(struct ring_range arc)
{
    return arc.end - arc.start - 1;
}

unsigned merkle_depth_fit(struct ring_range arc, unsigned want)
{
    if (want > MERKLE_MAX_DEPTH)
        want = MERKLE_MAX_DEPTH;
    if (arc.start == arc.end)
        return want;                        /* the whole ring */
    uint64_t span = arc_span_m1(arc) + 1;   /* no overflow: not whole */
    while (want > 0 && (span >> want) == 0) /* fewer than 2^want tokens */
        want--;
    return want;
}

unsigned merkle_depth_choose(struct ring_range arc,
                             struct ring_range range,
                             uint64_t range_keys)
{
    /* spans as fractions of the ring (start == end: all of it) */
    double ra = range.start == range.end
                    ? 1.0
                    : (double)(range.end - range.start) / 0x1p64;
    double aa =
        arc.start == arc.end ? 1.0 : (double)(arc.end - arc.start) / 0x1p64;
    double keys = (double)range_keys * (ra > 0 && aa < ra ? aa / ra : 1.0);
    unsigned d = 0;
    while (d < MERKLE_MAX_DEPTH &&
           (double)((uint64_t)MERKLE_LEAF_KEYS << d) < keys)
        d++;
    return merkle_depth_fit(arc, d);
}

/* Width of every leaf but the last: floor(span / 2^depth). */
static uint64_t leaf_step(struct ring_range arc, unsigned depth)
{
    if (depth == 0)
        return 0; /* one leaf: the arc */
    if (arc.start == arc.end)
        return (uint64_t)1 << (64 - depth); /* 2^64 / 2^depth */
    return (arc_span_m1(arc) + 1) >> depth;
}

struct ring_range merkle_leaf(struct ring_range arc, unsigned depth, uint64_t i)
{
    uint64_t n = (uint64_t)1 << depth;
    if (n == 1)
        return arc;
    uint64_t step = leaf_step(arc, depth);
    struct ring_range r = {arc.start + i * step, arc.start + (i + 1) * step};
    if (i + 1 == n)
        r.end = arc.end;
    return r;
}

/* The leaf of an offset along the arc, for n leaves of width step. */
static uint64_t leaf_at(uint64_t off, uint64_t n, uint64_t step)
{
    if (step == 0)
        return 0;
    uint64_t leaf = off / step;
    return leaf < n ? leaf : n - 1; /* the last leaf's remainder */
}

int merkle_leaf_of(uint64_t *out,
                   struct ring_range arc,
                   unsigned depth,
                   uint64_t token)
{
    if (merkle_depth_fit(arc, depth) != depth)
        return RK_EBADREQ;
    uint64_t off = token - arc.start - 1;
    if (off > arc_span_m1(arc))
        return RK_EBADREQ; /* outside the arc */
    *out = leaf_at(off, (uint64_t)1 << depth, leaf_step(arc, depth));
    return 0;
}

/* ---- leaf hashes -------------------------------------------------------- */

struct merkle_build {
    XXH3_state_t *x;
    uint64_t *leaves;
    struct ring_range arc;
    uint64_t n, step;
    uint64_t cur;  /* the leaf being hashed */
    bool open;     /* cur has records hashed */
    bool finished; /* merkle_build_finish called */
    uint64_t keys;
};

int merkle_build_new(merkle_build **out,
                     uint64_t *leaves,
                     struct ring_range arc,
                     unsigned depth)
{
    *out = NULL;
    if (merkle_depth_fit(arc, depth) != depth)
        return RK_EBADREQ;
    merkle_build *b = calloc(1, sizeof(*b));
    if (!b)
        return -ENOMEM;
    b->x = XXH3_createState();
    if (!b->x)
        goto free_build;
    /* an empty leaf hashes as XXH3 of nothing (store_digest of nothing) */
    XXH3_64bits_reset(b->x);
    uint64_t empty = XXH3_64bits_digest(b->x);
    b->n = (uint64_t)1 << depth;
    for (uint64_t i = 0; i < b->n; i++)
        leaves[i] = empty;
    b->leaves = leaves;
    b->arc = arc;
    b->step = leaf_step(arc, depth);
    *out = b;
    return 0;

free_build:
    free(b);
    return -ENOMEM;
}

static void leaf_close(merkle_build *b)
{
    if (b->open)
        b->leaves[b->cur] = XXH3_64bits_digest(b->x);
    b->open = false;
}

int merkle_build_add(merkle_build *b,
                     uint64_t token,
                     struct rk_slice key,
                     struct rk_slice rec)
{
    uint64_t off = token - b->arc.start - 1;
    if (b->finished || off > arc_span_m1(b->arc) || key.len > UINT32_MAX ||
        rec.len > UINT32_MAX)
        return RK_EBADREQ;
    uint64_t leaf = leaf_at(off, b->n, b->step);
    if (b->open && leaf < b->cur)
        return RK_EBADREQ; /* out of scan order */
    if (!b->open || leaf != b->cur) {
        leaf_close(b);
        b->cur = leaf;
        b->open = true;
        XXH3_64bits_reset(b->x);
    }
    uint8_t h[16];
    for (int i = 0; i < 8; i++)
        h[i] = (uint8_t)(token >> (56 - 8 * i));
    for (int i = 0; i < 4; i++) {
        h[8 + i] = (uint8_t)(key.len >> (24 - 8 * i));
        h[12 + i] = (uint8_t)(rec.len >> (24 - 8 * i));
    }
    XXH3_64bits_update(b->x, h, sizeof(h));
    XXH3_64bits_update(b->x, key.p, key.len);
    XXH3_64bits_update(b->x, rec.p, rec.len);
    b->keys++;
    return 0;
}

uint64_t merkle_build_finish(merkle_build *b)
{
    leaf_close(b);
    b->finished = true;
    return b->keys;
}

void merkle_build_free(merkle_build *b)
{
    if (!b)
        return;
    XXH3_freeState(b->x);
    free(b);
}

/* ---- comparing two lists of leaves -------------------------------------- */

int merkle_diff(struct ring_range **out,
                size_t *nout,
                size_t *ndiff,
                struct ring_range arc,
                unsigned depth,
                const uint64_t *mine,
                const uint64_t *theirs)
{
    size_t nl = (size_t)1 << depth, nd = 0, nr = 0;
    for (size_t i = 0; i < nl; i++)
        nd += mine[i] != theirs[i];
    struct ring_range *runs = NULL;
    if (nd) {
        runs = calloc(nd, sizeof(*runs));
        if (!runs)
            return -ENOMEM;
    }
    for (size_t i = 0; i < nl && nd; i++) {
        if (mine[i] == theirs[i])
            continue;
        struct ring_range l = merkle_leaf(arc, depth, i);
        if (nr && runs[nr - 1].end == l.start)
            runs[nr - 1].end = l.end; /* the run goes on */
        else
            runs[nr++] = l;
    }
    *out = runs;
    *nout = nr;
    if (ndiff)
        *ndiff = nd;
    return 0;
}

/* ---- the leaves on the wire --------------------------------------------- */

void merkle_leaves_put(uint8_t *out, const uint64_t *leaves, size_t n)
{
    for (size_t i = 0; i < n; i++) {
        uint64_t v = leaves[i];
        for (int k = 7; k >= 0; k--, v >>= 8)
            out[8 * i + (size_t)k] = (uint8_t)v;
    }
}

int merkle_leaves_get(uint64_t *out, size_t n, struct rk_slice bytes)
{
    if (n > SIZE_MAX / 8 || bytes.len != 8 * n)
        return RK_EPROTO;
    for (size_t i = 0; i < n; i++) {
        uint64_t v = 0;
        for (int k = 0; k < 8; k++)
            v = v << 8 | bytes.p[8 * i + (size_t)k];
        out[i] = v;
    }
    return 0;
}
