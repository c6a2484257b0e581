/*
 * check_merkle.c - repair's Merkle leaves (repair/merkle.h) against brute
 * force and their properties.
 *
 * Random cases come from a seeded PRNG and every failing assertion prints
 * the seed. The references are written independently of repair/: a leaf's
 * contents are found by testing every record against every leaf's
 * boundaries, a leaf's hash by serialising its records into one buffer,
 * and the differing leaves by comparing the two sides' contents record by
 * record. The loops stay small: the runner also runs under ASan with a
 * fork per test. The "store" case checks a leaf's hash against storage's
 * store_digest of the leaf, the bytes repair hashed before the leaf code
 * moved out of storage.
 */
#include <errno.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <check.h>

#include "common/rk.h"
#include "repair/merkle.h"
#include "ring/ring.h"
#include "storage/store.h"
#include "tests/unit/oom_hook.h"
#include "tests/unit/rng.h"

/* ---- helpers ------------------------------------------------------------ */

#define WHOLE ((struct ring_range){0, 0})

/* Tokens in the arc (the whole ring: 2^64, returned as 0). */
static uint64_t span_of(struct ring_range a)
{
    return a.end - a.start;
}

/* t in (start, end], start == end the whole ring. */
static bool in_arc(struct ring_range a, uint64_t t)
{
    return a.start == a.end || t - a.start - 1 < span_of(a);
}

/* A random arc: a quarter whole, a quarter narrow (up to 40 tokens), the
 * rest anywhere; a start near UINT64_MAX makes many wrap through zero. */
static struct ring_range rand_arc(uint64_t *seed)
{
    uint64_t start = rng_next(seed);
    switch (rng_next(seed) % 4) {
    case 0:
        return (struct ring_range){start, start};
    case 1:
        return (struct ring_range){start, start + 1 + rng_next(seed) % 40};
    case 2:
        start = UINT64_MAX - rng_next(seed) % 1000;
        return (struct ring_range){start, rng_next(seed) >> 1};
    default:
        return (struct ring_range){start, start + 1 + (rng_next(seed) >> 1)};
    }
}

/* A random token of the arc (tokens near both ends often). */
static uint64_t rand_token(uint64_t *seed, struct ring_range a)
{
    uint64_t span = span_of(a), off;
    switch (rng_next(seed) % 4) {
    case 0:
        off = 0;
        break;
    case 1:
        off = span - 1; /* the whole ring: 2^64 - 1 */
        break;
    default:
        off = span ? rng_next(seed) % span : rng_next(seed);
    }
    return a.start + 1 + off;
}

struct item {
    uint64_t token;
    char key[16];
    uint8_t rec[24];
    size_t klen, rlen;
    uint64_t leaf; /* brute_assign's */
};

/* Scan order: offset along the arc, then key bytes (as LMDB: memcmp, then
 * length). */
static int item_cmp(const void *pa, const void *pb, void *arg)
{
    const struct item *a = pa, *b = pb;
    const struct ring_range *arc = arg;
    uint64_t oa = a->token - arc->start - 1, ob = b->token - arc->start - 1;
    if (oa != ob)
        return oa < ob ? -1 : 1;
    size_t n = a->klen < b->klen ? a->klen : b->klen;
    int c = memcmp(a->key, b->key, n);
    if (c)
        return c;
    return a->klen < b->klen ? -1 : a->klen > b->klen;
}

static void sort_items(struct item *it, size_t n, struct ring_range arc)
{
    if (n > 1)
        qsort_r(it, n, sizeof(*it), item_cmp, &arc);
}

static bool item_eq(const struct item *a, const struct item *b)
{
    return a->token == b->token && a->klen == b->klen && a->rlen == b->rlen &&
           memcmp(a->key, b->key, a->klen) == 0 &&
           memcmp(a->rec, b->rec, a->rlen) == 0;
}

static void rand_rec(uint64_t *seed, struct item *it)
{
    it->rlen = 1 + rng_next(seed) % sizeof(it->rec);
    for (size_t i = 0; i < it->rlen; i++)
        it->rec[i] = (uint8_t)rng_next(seed);
}

/* Leaf hashes through merkle_build; the records sorted already. */
static void build(uint64_t *leaves,
                  struct ring_range arc,
                  unsigned depth,
                  const struct item *it,
                  size_t n)
{
    merkle_build *b = NULL;
    ck_assert_int_eq(merkle_build_new(&b, leaves, arc, depth), 0);
    for (size_t i = 0; i < n; i++)
        ck_assert_int_eq(merkle_build_add(b, it[i].token,
                                          RK_SLICE(it[i].key, it[i].klen),
                                          RK_SLICE(it[i].rec, it[i].rlen)),
                         0);
    ck_assert_uint_eq(merkle_build_finish(b), n);
    merkle_build_free(b);
}

/* The leaf holding t, by testing every leaf's boundaries. */
static uint64_t brute_leaf(struct ring_range arc, unsigned depth, uint64_t t)
{
    uint64_t n = (uint64_t)1 << depth;
    for (uint64_t i = 0; i < n; i++) {
        struct ring_range l = merkle_leaf(arc, depth, i);
        if (n == 1 || in_arc(l, t))
            return i;
    }
    ck_abort_msg("token %llu in no leaf", (unsigned long long)t);
    return 0;
}

/* Every record's leaf, by brute_leaf. */
static void
brute_assign(struct ring_range arc, unsigned depth, struct item *it, size_t n)
{
    for (size_t i = 0; i < n; i++)
        it[i].leaf = brute_leaf(arc, depth, it[i].token);
}

/* A leaf's hash by brute force: its records (brute_assign'ed) serialised
 * into one buffer, hashed at once. */
static uint64_t brute_hash(uint64_t leaf, const struct item *it, size_t n)
{
    uint8_t *buf = malloc(n * (16 + sizeof(it->key) + sizeof(it->rec)) + 1);
    ck_assert_ptr_nonnull(buf);
    size_t len = 0;
    for (size_t i = 0; i < n; i++) {
        if (it[i].leaf != leaf)
            continue;
        for (int k = 0; k < 8; k++)
            buf[len++] = (uint8_t)(it[i].token >> (56 - 8 * k));
        uint32_t kl = (uint32_t)it[i].klen, rl = (uint32_t)it[i].rlen;
        for (int k = 0; k < 4; k++)
            buf[len++] = (uint8_t)(kl >> (24 - 8 * k));
        for (int k = 0; k < 4; k++)
            buf[len++] = (uint8_t)(rl >> (24 - 8 * k));
        memcpy(buf + len, it[i].key, it[i].klen);
        len += it[i].klen;
        memcpy(buf + len, it[i].rec, it[i].rlen);
        len += it[i].rlen;
    }
    uint64_t h = XXH3_64bits(buf, len);
    free(buf);
    return h;
}

/* Whether leaf's records differ between the two sides (brute_assign'ed),
 * record by record. */
static bool brute_differs(uint64_t leaf,
                          const struct item *a,
                          size_t na,
                          const struct item *b,
                          size_t nb)
{
    size_t i = 0, j = 0;
    for (;;) {
        while (i < na && a[i].leaf != leaf)
            i++;
        while (j < nb && b[j].leaf != leaf)
            j++;
        if (i == na || j == nb)
            return i != na || j != nb;
        if (!item_eq(&a[i], &b[j]))
            return true;
        i++;
        j++;
    }
}

static bool ranges_overlap(struct ring_range a, struct ring_range b)
{
    /* a and b are sub-arcs of one arc, neither whole: they overlap when one
     * holds the other's first token */
    return in_arc(a, b.start + 1) || in_arc(b, a.start + 1);
}

/* Runs against the differing leaves: every differing leaf inside a run,
 * no other leaf touching one, runs in leaf order and never adjacent. */
static void check_runs(const struct ring_range *runs,
                       size_t nruns,
                       struct ring_range arc,
                       unsigned depth,
                       const bool *differs,
                       uint64_t seed)
{
    uint64_t n = (uint64_t)1 << depth;
    size_t nd = 0;
    for (uint64_t i = 0; i < n; i++)
        nd += differs[i];
    if (nd == 0) {
        ck_assert_msg(nruns == 0 && runs == NULL, "seed %llu",
                      (unsigned long long)seed);
        return;
    }
    if (nd == n) { /* one run: the arc */
        ck_assert_uint_eq(nruns, 1);
        ck_assert_msg(runs[0].start == arc.start && runs[0].end == arc.end,
                      "seed %llu", (unsigned long long)seed);
        return;
    }
    for (uint64_t i = 0; i < n; i++) {
        struct ring_range l = merkle_leaf(arc, depth, i);
        size_t hits = 0;
        for (size_t r = 0; r < nruns; r++) {
            bool inside =
                in_arc(runs[r], l.start + 1) && in_arc(runs[r], l.end);
            if (inside)
                hits++;
            else
                ck_assert_msg(!ranges_overlap(runs[r], l),
                              "seed %llu: leaf %llu cut by run %zu",
                              (unsigned long long)seed, (unsigned long long)i,
                              r);
        }
        ck_assert_msg(hits == (differs[i] ? 1u : 0u),
                      "seed %llu: leaf %llu differs %d, in %zu runs",
                      (unsigned long long)seed, (unsigned long long)i,
                      differs[i], hits);
    }
    /* in order along the arc, a gap between each two: adjacent differing
     * leaves are never split into two runs */
    for (size_t r = 1; r < nruns; r++)
        ck_assert_msg(runs[r].start - arc.start > runs[r - 1].end - arc.start,
                      "seed %llu: runs %zu and %zu touch",
                      (unsigned long long)seed, r - 1, r);
}

/* ---- the leaf plan ------------------------------------------------------ */

START_TEST(depth_fit_bounds)
{
    ck_assert_uint_eq(merkle_depth_fit(WHOLE, 99), MERKLE_MAX_DEPTH);
    ck_assert_uint_eq(merkle_depth_fit(WHOLE, 3), 3);
    ck_assert_uint_eq(merkle_depth_fit((struct ring_range){7, 7}, 20),
                      MERKLE_MAX_DEPTH);
    ck_assert_uint_eq(merkle_depth_fit((struct ring_range){10, 14}, 5), 2);
    ck_assert_uint_eq(merkle_depth_fit((struct ring_range){10, 11}, 5), 0);
    ck_assert_uint_eq(merkle_depth_fit((struct ring_range){10, 11}, 0), 0);
    /* through zero: (2^64 - 3, 1] holds 4 tokens */
    ck_assert_uint_eq(
        merkle_depth_fit((struct ring_range){UINT64_MAX - 2, 1}, 5), 2);
    uint64_t seed = 1;
    for (int k = 0; k < 2000; k++) {
        struct ring_range a = rand_arc(&seed);
        unsigned want = (unsigned)(rng_next(&seed) % 20);
        unsigned d = merkle_depth_fit(a, want);
        ck_assert_uint_le(d, want);
        ck_assert_uint_le(d, MERKLE_MAX_DEPTH);
        if (a.start != a.end) /* 2^d leaves of at least one token */
            ck_assert_uint_ge(span_of(a) >> d, 1);
        if (d < want && d < MERKLE_MAX_DEPTH) /* one more would not fit */
            ck_assert_uint_eq(span_of(a) >> (d + 1), 0);
        ck_assert_uint_eq(merkle_depth_fit(a, d), d);
    }
}
END_TEST

START_TEST(leaves_tile_the_arc)
{
    uint64_t seed = 2;
    for (int k = 0; k < 400; k++) {
        struct ring_range a = rand_arc(&seed);
        unsigned d = merkle_depth_fit(a, (unsigned)(rng_next(&seed) % 9));
        uint64_t n = (uint64_t)1 << d, at = a.start, width = 0;
        for (uint64_t i = 0; i < n; i++) {
            struct ring_range l = merkle_leaf(a, d, i);
            ck_assert_msg(l.start == at, "seed 2 case %d leaf %llu", k,
                          (unsigned long long)i);
            at = l.end;
            if (n == 1)
                break;
            uint64_t w = span_of(l);
            ck_assert_uint_gt(w, 0); /* no leaf is empty */
            if (i == 0)
                width = w;
            else if (i + 1 < n)
                ck_assert_uint_eq(w, width); /* equal widths... */
            else
                ck_assert_uint_ge(w, width); /* ...the last one the rest */
            if (i + 1 == n && a.start != a.end)
                ck_assert_uint_lt(w - width, n);
        }
        ck_assert_uint_eq(at, a.end);
    }
    /* the whole ring in four: quarters */
    struct ring_range q = merkle_leaf(WHOLE, 2, 1);
    ck_assert_uint_eq(q.start, UINT64_C(1) << 62);
    ck_assert_uint_eq(q.end, UINT64_C(1) << 63);
    q = merkle_leaf(WHOLE, 2, 3);
    ck_assert_uint_eq(q.start, UINT64_C(3) << 62);
    ck_assert_uint_eq(q.end, 0);
    /* (10, 21]: 11 tokens in four, widths 2, 2, 2, 5 */
    struct ring_range a = {10, 21};
    ck_assert_uint_eq(merkle_leaf(a, 2, 0).end, 12);
    ck_assert_uint_eq(merkle_leaf(a, 2, 3).start, 16);
    ck_assert_uint_eq(merkle_leaf(a, 2, 3).end, 21);
    /* depth 0: the arc itself, whole ring included */
    ck_assert_uint_eq(merkle_leaf(WHOLE, 0, 0).end, 0);
    ck_assert_uint_eq(merkle_leaf(a, 0, 0).end, 21);
}
END_TEST

START_TEST(leaf_of_matches_brute_force)
{
    uint64_t seed = 3, out = 99;
    for (int k = 0; k < 300; k++) {
        struct ring_range a = rand_arc(&seed);
        unsigned d = merkle_depth_fit(a, (unsigned)(rng_next(&seed) % 7));
        for (int t = 0; t < 8; t++) {
            uint64_t tok = rand_token(&seed, a);
            ck_assert_int_eq(merkle_leaf_of(&out, a, d, tok), 0);
            ck_assert_msg(out == brute_leaf(a, d, tok), "seed 3 case %d", k);
        }
        /* every leaf boundary: its end in it, the next token in the next */
        uint64_t n = (uint64_t)1 << d;
        for (uint64_t i = 0; i + 1 < n; i++) {
            struct ring_range l = merkle_leaf(a, d, i);
            ck_assert_int_eq(merkle_leaf_of(&out, a, d, l.end), 0);
            ck_assert_uint_eq(out, i);
            ck_assert_int_eq(merkle_leaf_of(&out, a, d, l.end + 1), 0);
            ck_assert_uint_eq(out, i + 1);
        }
        if (a.start != a.end) { /* outside: the start, the token past end */
            ck_assert_int_eq(merkle_leaf_of(&out, a, d, a.start), RK_EBADREQ);
            if (a.end + 1 != a.start)
                ck_assert_int_eq(merkle_leaf_of(&out, a, d, a.end + 1),
                                 RK_EBADREQ);
        }
    }
    ck_assert_int_eq(merkle_leaf_of(&out, (struct ring_range){10, 14}, 3, 12),
                     RK_EBADREQ); /* 4 tokens cannot make 8 leaves */
    ck_assert_int_eq(merkle_leaf_of(&out, WHOLE, MERKLE_MAX_DEPTH + 1, 5),
                     RK_EBADREQ);
    ck_assert_int_eq(merkle_leaf_of(&out, WHOLE, 1, 0), 0); /* the last */
    ck_assert_uint_eq(out, 1);
}
END_TEST

START_TEST(depth_choose_bounds_and_monotone)
{
    struct ring_range half = {0, UINT64_C(1) << 63};
    ck_assert_uint_eq(merkle_depth_choose(WHOLE, WHOLE, 0), 0);
    ck_assert_uint_eq(merkle_depth_choose(WHOLE, WHOLE, MERKLE_LEAF_KEYS), 0);
    ck_assert_uint_eq(merkle_depth_choose(WHOLE, WHOLE, MERKLE_LEAF_KEYS + 1),
                      1);
    ck_assert_uint_eq(merkle_depth_choose(WHOLE, WHOLE, 8 * 1024), 10);
    ck_assert_uint_eq(merkle_depth_choose(WHOLE, WHOLE, 8 * 1024 + 1), 11);
    ck_assert_uint_eq(merkle_depth_choose(WHOLE, WHOLE, UINT64_MAX),
                      MERKLE_MAX_DEPTH);
    /* half of the range: half of its keys */
    ck_assert_uint_eq(merkle_depth_choose(half, WHOLE, 32), 1);
    /* an arc wider than the range: all of the range's keys */
    ck_assert_uint_eq(merkle_depth_choose(WHOLE, half, 32), 2);
    /* a narrow arc: no deeper than its tokens allow */
    ck_assert_uint_eq(merkle_depth_choose((struct ring_range){10, 14},
                                          (struct ring_range){10, 14}, 1000),
                      2);
    uint64_t seed = 4;
    for (int k = 0; k < 400; k++) {
        struct ring_range range = rand_arc(&seed), arc = range;
        if (rng_next(&seed) % 2 && range.start != range.end) /* a piece */
            arc.end = arc.start + 1 + rng_next(&seed) % span_of(range);
        unsigned prev = 0;
        uint64_t keys = 0;
        for (int s = 0; s < 24; s++) {
            unsigned d = merkle_depth_choose(arc, range, keys);
            ck_assert_uint_le(d, MERKLE_MAX_DEPTH);
            ck_assert_uint_le(d, merkle_depth_fit(arc, MERKLE_MAX_DEPTH));
            ck_assert_msg(d >= prev, "seed 4 case %d: keys %llu depth %u < %u",
                          k, (unsigned long long)keys, d, prev);
            prev = d;
            keys = keys * 3 + rng_next(&seed) % 7;
        }
    }
    /* monotone in the arc's width inside one range, the keys fixed */
    for (int k = 0; k < 100; k++) {
        struct ring_range range = {rng_next(&seed), 0};
        range.end = range.start + 1 + (rng_next(&seed) >> 1);
        uint64_t keys = rng_next(&seed) % 200000;
        unsigned prev = 0;
        for (uint64_t w = 1;; w *= 5) {
            struct ring_range arc = {range.start, range.start + w};
            unsigned d = merkle_depth_choose(arc, range, keys);
            ck_assert_uint_ge(d, prev);
            prev = d;
            if (w > span_of(range) / 5) /* else w * 5 <= span */
                break;
        }
    }
}
END_TEST

/* ---- leaf hashes -------------------------------------------------------- */

START_TEST(build_empty_and_one_key)
{
    uint64_t leaves[16];
    /* the empty leaf: XXH3-64 of nothing (golden) */
    const uint64_t empty = UINT64_C(0x2D06800538D394C2);
    ck_assert_uint_eq(XXH3_64bits(NULL, 0), empty);
    struct ring_range arcs[3] = {WHOLE, {UINT64_MAX - 100, 5000}, {1000, 1000}};
    for (int a = 0; a < 3; a++) {
        merkle_build *b = NULL;
        ck_assert_int_eq(merkle_build_new(&b, leaves, arcs[a], 4), 0);
        ck_assert_uint_eq(merkle_build_finish(b), 0);
        merkle_build_free(b);
        for (int i = 0; i < 16; i++)
            ck_assert_uint_eq(leaves[i], empty);
    }
    /* one key: its leaf alone differs from empty, and is its record's
     * bytes hashed (golden: the layout of store_digest) */
    struct item it = {.token = UINT64_C(0x9000000000000001),
                      .key = "k",
                      .klen = 1,
                      .rec = {1, 2, 3},
                      .rlen = 3};
    build(leaves, WHOLE, 4, &it, 1);
    const uint8_t bytes[] = {0x90, 0, 0, 0, 0, 0, 0,   1, 0, 0,
                             0,    1, 0, 0, 0, 3, 'k', 1, 2, 3};
    for (uint64_t i = 0; i < 16; i++)
        ck_assert_uint_eq(leaves[i],
                          i == 9 ? XXH3_64bits(bytes, sizeof(bytes)) : empty);
    /* through zero: (2^64 - 101, 5000] at depth 1: leaf 1 from 2449 */
    struct ring_range wrap = {UINT64_MAX - 100, 5000};
    it.token = 2500;
    build(leaves, wrap, 1, &it, 1);
    ck_assert_uint_eq(leaves[0], empty);
    ck_assert_uint_ne(leaves[1], empty);
    it.token = 3;
    build(leaves, wrap, 1, &it, 1);
    ck_assert_uint_ne(leaves[0], empty);
    ck_assert_uint_eq(leaves[1], empty);
}
END_TEST

START_TEST(build_matches_brute_force)
{
    enum { MAXN = 120 };
    struct item *it = calloc(MAXN, sizeof(*it));
    uint64_t *leaves = calloc(64, sizeof(uint64_t));
    ck_assert_ptr_nonnull(it);
    ck_assert_ptr_nonnull(leaves);
    uint64_t seed = 5;
    for (int k = 0; k < 60; k++) {
        struct ring_range a = rand_arc(&seed);
        unsigned d = merkle_depth_fit(a, (unsigned)(rng_next(&seed) % 7));
        size_t n = rng_next(&seed) % MAXN;
        for (size_t i = 0; i < n; i++) {
            /* a few tokens shared by several keys */
            it[i].token = i && rng_next(&seed) % 8 == 0 ? it[i - 1].token
                                                        : rand_token(&seed, a);
            it[i].klen =
                (size_t)snprintf(it[i].key, sizeof(it[i].key), "k%zu", i);
            rand_rec(&seed, &it[i]);
        }
        sort_items(it, n, a);
        build(leaves, a, d, it, n);
        brute_assign(a, d, it, n);
        for (uint64_t l = 0; l < (uint64_t)1 << d; l++)
            ck_assert_msg(leaves[l] == brute_hash(l, it, n),
                          "seed 5 case %d leaf %llu", k, (unsigned long long)l);
    }
    free(it);
    free(leaves);
}
END_TEST

START_TEST(build_refuses_bad_input)
{
    uint64_t leaves[8];
    merkle_build *b = (merkle_build *)leaves;
    ck_assert_int_eq(merkle_build_new(&b, leaves, WHOLE, MERKLE_MAX_DEPTH + 1),
                     RK_EBADREQ);
    ck_assert_ptr_null(b);
    ck_assert_int_eq(
        merkle_build_new(&b, leaves, (struct ring_range){10, 14}, 3),
        RK_EBADREQ);
    struct ring_range a = {100, 200};
    ck_assert_int_eq(merkle_build_new(&b, leaves, a, 3), 0);
    struct rk_slice k = RK_SLICE("k", 1), r = RK_SLICE("r", 1);
    ck_assert_int_eq(merkle_build_add(b, 100, k, r), RK_EBADREQ); /* out */
    ck_assert_int_eq(merkle_build_add(b, 201, k, r), RK_EBADREQ);
    ck_assert_int_eq(merkle_build_add(b, 180, k, r), 0);
    ck_assert_int_eq(merkle_build_add(b, 120, k, r), RK_EBADREQ); /* back */
    ck_assert_int_eq(merkle_build_add(b, 180, k, r), 0); /* same leaf */
    ck_assert_int_eq(merkle_build_add(b, 200, k, r), 0);
    ck_assert_uint_eq(merkle_build_finish(b), 3);
    ck_assert_int_eq(merkle_build_add(b, 200, k, r), RK_EBADREQ); /* after */
    merkle_build_free(b);
    merkle_build_free(NULL);
}
END_TEST

START_TEST(build_new_out_of_memory)
{
#ifdef RK_TEST_OOM
    uint64_t leaves[4];
    long limit;
    for (limit = 0; limit < 100; limit++) {
        merkle_build *b = NULL;
        long live = oom_live;
        oom_countdown = limit;
        int err = merkle_build_new(&b, leaves, WHOLE, 2);
        oom_countdown = -1;
        if (err == 0) {
            merkle_build_free(b);
            ck_assert_int_eq(oom_live, live);
            break;
        }
        ck_assert_int_eq(err, -ENOMEM);
        ck_assert_ptr_null(b);
        ck_assert_msg(oom_live == live, "limit %ld: %ld leaked", limit,
                      oom_live - live);
    }
    ck_assert_int_gt(limit, 0);
    ck_assert_int_lt(limit, 100);
    /* merkle_diff: -ENOMEM and nothing kept */
    uint64_t mine[4] = {1, 2, 3, 4}, theirs[4] = {1, 0, 3, 0};
    struct ring_range *runs = NULL;
    size_t nruns = 0;
    oom_countdown = 0;
    int err = merkle_diff(&runs, &nruns, NULL, WHOLE, 2, mine, theirs);
    oom_countdown = -1;
    ck_assert_int_eq(err, -ENOMEM);
#endif
}
END_TEST

/* ---- comparing two lists of leaves -------------------------------------- */

START_TEST(diff_runs_examples)
{
    uint64_t mine[8] = {1, 2, 3, 4, 5, 6, 7, 8};
    uint64_t theirs[8];
    struct ring_range a = {UINT64_MAX - 3, 4}; /* 8 tokens through zero */
    struct ring_range *runs = NULL;
    size_t nruns = 99, nd = 99;
    memcpy(theirs, mine, sizeof(mine));
    ck_assert_int_eq(merkle_diff(&runs, &nruns, &nd, a, 3, mine, theirs), 0);
    ck_assert_ptr_null(runs);
    ck_assert_uint_eq(nruns, 0);
    ck_assert_uint_eq(nd, 0);
    /* leaves 1, 3 and 4 (one run, through zero), 7 (the last) */
    theirs[1] = theirs[3] = theirs[4] = theirs[7] = 0;
    ck_assert_int_eq(merkle_diff(&runs, &nruns, &nd, a, 3, mine, theirs), 0);
    ck_assert_uint_eq(nd, 4);
    ck_assert_uint_eq(nruns, 3);
    ck_assert_uint_eq(runs[0].start, UINT64_MAX - 2);
    ck_assert_uint_eq(runs[0].end, UINT64_MAX - 1);
    ck_assert_uint_eq(runs[1].start, UINT64_MAX);
    ck_assert_uint_eq(runs[1].end, 1);
    ck_assert_uint_eq(runs[2].start, 3);
    ck_assert_uint_eq(runs[2].end, 4);
    free(runs);
    /* every leaf: one run, the whole arc */
    for (int i = 0; i < 8; i++)
        theirs[i] = 0;
    ck_assert_int_eq(merkle_diff(&runs, &nruns, NULL, a, 3, mine, theirs), 0);
    ck_assert_uint_eq(nruns, 1);
    ck_assert_uint_eq(runs[0].start, a.start);
    ck_assert_uint_eq(runs[0].end, a.end);
    free(runs);
    /* the whole ring at depth 0 */
    ck_assert_int_eq(merkle_diff(&runs, &nruns, &nd, WHOLE, 0, mine, theirs),
                     0);
    ck_assert_uint_eq(nruns, 1);
    ck_assert_uint_eq(nd, 1);
    ck_assert_uint_eq(runs[0].start, 0);
    ck_assert_uint_eq(runs[0].end, 0);
    free(runs);
}
END_TEST

START_TEST(diff_runs_match_differing_leaves)
{
    uint64_t seed = 6;
    uint64_t *mine = calloc(256, sizeof(uint64_t));
    uint64_t *theirs = calloc(256, sizeof(uint64_t));
    bool *differs = calloc(256, sizeof(bool));
    ck_assert_ptr_nonnull(mine);
    ck_assert_ptr_nonnull(theirs);
    ck_assert_ptr_nonnull(differs);
    for (int k = 0; k < 150; k++) {
        struct ring_range a = rand_arc(&seed);
        unsigned d = merkle_depth_fit(a, (unsigned)(rng_next(&seed) % 9));
        uint64_t n = (uint64_t)1 << d, p = rng_next(&seed) % 5;
        size_t nd = 0;
        for (uint64_t i = 0; i < n; i++) {
            mine[i] = theirs[i] = rng_next(&seed);
            /* none, a few, about half, most, or all differ */
            differs[i] = p == 0   ? false
                         : p == 4 ? true
                                  : rng_next(&seed) % 8 < (p == 1   ? 1u
                                                           : p == 2 ? 4u
                                                                    : 7u);
            if (differs[i])
                theirs[i] ^= 1 + rng_next(&seed) % 1000;
            nd += differs[i];
        }
        struct ring_range *runs = NULL;
        size_t nruns = 0, got = 0;
        ck_assert_int_eq(merkle_diff(&runs, &nruns, &got, a, d, mine, theirs),
                         0);
        ck_assert_uint_eq(got, nd);
        check_runs(runs, nruns, a, d, differs, 6000 + (uint64_t)k);
        free(runs);
    }
    free(mine);
    free(theirs);
    free(differs);
}
END_TEST

/* Two sides' records differing in random places (a record changed, missing
 * on one side, or added), hashed into leaves and compared: the runs cover
 * exactly the leaves whose records differ by brute force. */
START_TEST(two_sides_match_brute_force)
{
    enum { MAXN = 150 };
    struct item *a = calloc(MAXN * 2, sizeof(*a));
    struct item *b = calloc(MAXN * 2, sizeof(*b));
    uint64_t *la = calloc(1u << 7, sizeof(uint64_t));
    uint64_t *lb = calloc(1u << 7, sizeof(uint64_t));
    bool *differs = calloc(1u << 7, sizeof(bool));
    ck_assert(a && b && la && lb && differs);
    uint64_t seed = 7;
    for (int k = 0; k < 60; k++) {
        struct ring_range arc = rand_arc(&seed);
        size_t n = rng_next(&seed) % MAXN, na = 0, nb = 0;
        unsigned changes = (unsigned)(rng_next(&seed) % 6);
        for (size_t i = 0; i < n; i++) {
            struct item it = {.token = rand_token(&seed, arc)};
            it.klen = (size_t)snprintf(it.key, sizeof(it.key), "k%zu", i);
            rand_rec(&seed, &it);
            a[na++] = it;
            b[nb++] = it;
        }
        for (unsigned c = 0; c < changes && n; c++) {
            size_t i = rng_next(&seed) % nb;
            switch (rng_next(&seed) % 3) {
            case 0: /* a newer record on one side */
                b[i].rec[0] ^= 0x80;
                break;
            case 1: /* missing on one side */
                b[i] = b[--nb];
                break;
            default: { /* a key only one side has */
                struct item it = {.token = rand_token(&seed, arc)};
                it.klen = (size_t)snprintf(it.key, sizeof(it.key), "new%u", c);
                rand_rec(&seed, &it);
                a[na++] = it;
            }
            }
            if (nb == 0)
                break;
        }
        sort_items(a, na, arc);
        sort_items(b, nb, arc);
        unsigned d =
            rng_next(&seed) % 2
                ? merkle_depth_choose(arc, arc, na)
                : merkle_depth_fit(arc, (unsigned)(rng_next(&seed) % 8));
        if (d > 7)
            d = merkle_depth_fit(arc, 7);
        build(la, arc, d, a, na);
        build(lb, arc, d, b, nb);
        brute_assign(arc, d, a, na);
        brute_assign(arc, d, b, nb);
        uint64_t nl = (uint64_t)1 << d;
        for (uint64_t l = 0; l < nl; l++)
            differs[l] = brute_differs(l, a, na, b, nb);
        struct ring_range *runs = NULL;
        size_t nruns = 0;
        ck_assert_int_eq(merkle_diff(&runs, &nruns, NULL, arc, d, la, lb), 0);
        check_runs(runs, nruns, arc, d, differs, 7000 + (uint64_t)k);
        free(runs);
        /* the same records on both sides: no runs */
        build(lb, arc, d, a, na);
        ck_assert_int_eq(merkle_diff(&runs, &nruns, NULL, arc, d, la, lb), 0);
        ck_assert_uint_eq(nruns, 0);
        ck_assert_ptr_null(runs);
    }
    free(a);
    free(b);
    free(la);
    free(lb);
    free(differs);
}
END_TEST

/* ---- the leaves on the wire --------------------------------------------- */

START_TEST(leaves_wire_golden)
{
    const uint64_t leaves[2] = {UINT64_C(0x0102030405060708),
                                UINT64_C(0xF0E0D0C0B0A09080)};
    const uint8_t golden[16] = {1,    2,    3,    4,    5,    6,    7,    8,
                                0xF0, 0xE0, 0xD0, 0xC0, 0xB0, 0xA0, 0x90, 0x80};
    uint8_t bytes[16];
    merkle_leaves_put(bytes, leaves, 2);
    ck_assert_mem_eq(bytes, golden, 16);
    uint64_t back[2] = {0, 0};
    ck_assert_int_eq(merkle_leaves_get(back, 2, RK_SLICE(golden, 16)), 0);
    ck_assert_uint_eq(back[0], leaves[0]);
    ck_assert_uint_eq(back[1], leaves[1]);
    ck_assert_int_eq(merkle_leaves_get(back, 2, RK_SLICE(golden, 15)),
                     RK_EPROTO);
    ck_assert_int_eq(merkle_leaves_get(back, 1, RK_SLICE(golden, 16)),
                     RK_EPROTO);
    ck_assert_int_eq(merkle_leaves_get(back, 0, RK_SLICE(NULL, 0)), 0);
}
END_TEST

/* ---- against storage ---------------------------------------------------- */

static char tmpdir[256];

struct collected {
    struct item *it;
    size_t n, cap;
};

/* A store scan's items copied, in its order. */
static int collect_cb(const struct store_item *si, void *arg)
{
    struct collected *c = arg;
    ck_assert_uint_lt(c->n, c->cap);
    struct item *it = &c->it[c->n++];
    ck_assert_uint_le(si->key.len, sizeof(it->key));
    ck_assert_uint_le(si->rec.len, sizeof(it->rec));
    it->token = si->token;
    it->klen = si->key.len;
    it->rlen = si->rec.len;
    memcpy(it->key, si->key.p, si->key.len);
    memcpy(it->rec, si->rec.p, si->rec.len);
    return 0;
}

/* The leaves of the store's records in arc, hashed by merkle_build in the
 * order of a scan of the arc (as repair/session.c feeds them). */
static uint64_t
store_leaves(uint64_t *leaves, store *s, struct ring_range arc, unsigned d)
{
    struct collected c = {calloc(512, sizeof(struct item)), 0, 512};
    ck_assert_ptr_nonnull(c.it);
    struct store_scan sc;
    store_scan_init(&sc, (struct store_range){arc.start, arc.end});
    while (!sc.done) /* small chunks: a chunk's end is no leaf's */
        ck_assert_int_eq(store_scan_next(s, &sc, 37, SIZE_MAX, collect_cb, &c),
                         0);
    build(leaves, arc, d, c.it, c.n);
    free(c.it);
    return c.n;
}

static void put_rec(store *s, const char *key, uint64_t ts, const char *val)
{
    struct store_record r = {ts, 0, 0, RK_SLICE(val, strlen(val))};
    uint8_t buf[128];
    size_t n;
    ck_assert_int_eq(store_record_encode(buf, sizeof(buf), &n, &r), 0);
    ck_assert_int_eq(store_put(s, RK_SLICE(key, strlen(key)), RK_SLICE(buf, n)),
                     0);
}

/* Each leaf's hash is the store_digest of its sub-arc, and one newer
 * record changes its own leaf alone. */
START_TEST(leaves_are_store_digests)
{
    enum { NK = 300 };
    const char *t = getenv("TMPDIR");
    snprintf(tmpdir, sizeof(tmpdir), "%s/rk_merkle_XXXXXX", t ? t : "/tmp");
    ck_assert_ptr_nonnull(mkdtemp(tmpdir));
    struct store_opts o = STORE_OPTS_INIT;
    o.data_dir = tmpdir;
    store *s = NULL;
    ck_assert_int_eq(store_open(&s, &o), 0);
    ck_assert_int_eq(store_range_create(s, (struct store_range){0, 0}), 0);
    store_batch *bt;
    ck_assert_int_eq(store_batch_new(&bt), 0);
    for (int i = 0; i < NK; i++) {
        char k[32], v[32];
        snprintf(k, sizeof(k), "key:%d", i);
        snprintf(v, sizeof(v), "val:%d", i);
        struct store_record r = {1, 0, 0, RK_SLICE(v, strlen(v))};
        uint8_t buf[64];
        size_t n;
        ck_assert_int_eq(store_record_encode(buf, sizeof(buf), &n, &r), 0);
        ck_assert_int_eq(
            store_batch_add(bt, RK_SLICE(k, strlen(k)), RK_SLICE(buf, n)), 0);
    }
    ck_assert_int_eq(store_batch_commit(s, bt), 0);
    store_batch_free(bt);
    struct ring_range arcs[3] = {WHOLE,
                                 {UINT64_MAX / 3, UINT64_MAX / 3 * 2},
                                 {UINT64_MAX / 4 * 3, 1u << 20}};
    uint64_t leaves[32];
    for (int a = 0; a < 3; a++) {
        uint64_t sum = 0, keys = store_leaves(leaves, s, arcs[a], 5);
        for (uint64_t i = 0; i < 32; i++) {
            struct ring_range l = merkle_leaf(arcs[a], 5, i);
            struct store_digest d;
            ck_assert_int_eq(
                store_digest(&d, s, (struct store_range){l.start, l.end}), 0);
            ck_assert_uint_eq(d.hash, leaves[i]);
            sum += d.keys;
        }
        ck_assert_uint_eq(sum, keys);
        if (a == 0)
            ck_assert_uint_eq(keys, NK);
    }
    uint64_t before[16], after[16];
    ck_assert_uint_eq(store_leaves(before, s, WHOLE, 4), NK);
    put_rec(s, "key:7", 9, "new");
    ck_assert_uint_eq(store_leaves(after, s, WHOLE, 4), NK);
    uint64_t tok = rk_token("key:7", 5), leaf;
    ck_assert_int_eq(merkle_leaf_of(&leaf, WHOLE, 4, tok), 0);
    for (uint64_t i = 0; i < 16; i++)
        ck_assert_msg((before[i] != after[i]) == (i == leaf), "leaf %llu",
                      (unsigned long long)i);
    store_free(s);
    char cmd[300];
    snprintf(cmd, sizeof(cmd), "rm -rf '%s'", tmpdir);
    ck_assert_int_eq(system(cmd), 0);
}
END_TEST

static Suite *merkle_suite(void)
{
    Suite *s = suite_create("merkle");
    TCase *tc = tcase_create("plan");
    tcase_add_test(tc, depth_fit_bounds);
    tcase_add_test(tc, leaves_tile_the_arc);
    tcase_add_test(tc, leaf_of_matches_brute_force);
    tcase_add_test(tc, depth_choose_bounds_and_monotone);
    suite_add_tcase(s, tc);

    tc = tcase_create("hashes");
    tcase_add_test(tc, build_empty_and_one_key);
    tcase_add_test(tc, build_matches_brute_force);
    tcase_add_test(tc, build_refuses_bad_input);
    tcase_add_test(tc, build_new_out_of_memory);
    suite_add_tcase(s, tc);

    tc = tcase_create("diff");
    tcase_add_test(tc, diff_runs_examples);
    tcase_add_test(tc, diff_runs_match_differing_leaves);
    tcase_add_test(tc, two_sides_match_brute_force);
    suite_add_tcase(s, tc);

    tc = tcase_create("wire");
    tcase_add_test(tc, leaves_wire_golden);
    suite_add_tcase(s, tc);

    tc = tcase_create("store");
    tcase_add_test(tc, leaves_are_store_digests);
    suite_add_tcase(s, tc);
    return s;
}

int main(void)
{
    SRunner *sr = srunner_create(merkle_suite());
    srunner_run_all(sr, CK_NORMAL);
    int failed = srunner_ntests_failed(sr);
    srunner_free(sr);
    return failed == 0 ? EXIT_SUCCESS : EXIT_FAILURE;
}
