/*
 * store_fill.h - the store filled and checked back, shared by the store's
 * runners (check_storage.c, check_storage_mem.c, check_storage_system.c):
 * NK keys of known values written and read back, every entry checked to be
 * in the one env of its range, mixed records (long keys, tombstones,
 * expiring values) to fill an env unevenly, and no temporary directory
 * left under ranges/. Header-only, on top of store_fixture.h.
 */
#ifndef TESTS_UNIT_STORE_FILL_H
#define TESTS_UNIT_STORE_FILL_H

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <check.h>

#include "common/rk.h"
#include "storage/store.h"
#include "tests/unit/store_fixture.h"

/* The keys most tests fill() the store with. */
#define NK 600

/* nk keys "key:<i>" = "val:<i>:<ts>", written at ts in one batch; each
 * one taken. */
static inline void fill(store *s, int nk, uint64_t ts)
{
    store_batch *b;
    ck_assert_int_eq(store_batch_new(&b), 0);
    for (int i = 0; i < nk; i++) {
        char k[32], v[32];
        snprintf(k, sizeof(k), "key:%d", i);
        snprintf(v, sizeof(v), "val:%d:%llu", i, (unsigned long long)ts);
        size_t n;
        uint8_t *r = rec(&n, ts, 0, 0, v, strlen(v));
        ck_assert_int_eq(
            store_batch_add(b, RK_SLICE(k, strlen(k)), RK_SLICE(r, n)), 0);
        free(r);
    }
    ck_assert_int_eq(store_batch_commit(s, b), 0);
    for (int i = 0; i < nk; i++)
        ck_assert_int_eq(store_batch_result(b, (size_t)i), 0);
    store_batch_free(b);
}

/* fill(nk, ts)'s keys all have its values. */
static inline void check_all(store *s, int nk, uint64_t ts)
{
    for (int i = 0; i < nk; i++) {
        char k[32], v[32];
        snprintf(k, sizeof(k), "key:%d", i);
        snprintf(v, sizeof(v), "val:%d:%llu", i, (unsigned long long)ts);
        expect(s, k, v);
    }
}

/* Every stored entry is in exactly one env and inside its range. */
static inline uint64_t check_placement(store *s)
{
    struct store_range *rs;
    size_t n;
    uint64_t total = 0;
    ck_assert_int_eq(store_flush(s), 0); /* info counts applied writes */
    ck_assert_int_eq(store_range_list(&rs, &n, s), 0);
    for (size_t i = 0; i < n; i++) {
        struct store_range_info info;
        struct store_digest d;
        ck_assert_int_eq(store_range_info(&info, s, rs[i]), 0);
        ck_assert_int_eq(store_digest(&d, s, rs[i]), 0);
        ck_assert_uint_eq(info.keys, d.keys); /* nothing outside */
        total += d.keys;
    }
    free(rs);
    return total;
}

/* Random keys (some over 400 bytes), tombstones and expiring records,
 * written in several batches so the env's pages are split unevenly. */
static inline void fill_mixed(store *s, int nk, unsigned seed)
{
    store_batch *b;
    ck_assert_int_eq(store_batch_new(&b), 0);
    char *big = malloc(600);
    for (int i = 0; i < nk; i++) {
        char k[32], v[64];
        snprintf(k, sizeof(k), "mix:%d", i);
        snprintf(v, sizeof(v), "v%u", rand_r(&seed));
        int kind = rand_r(&seed) % 10;
        struct rk_slice key = RK_SLICE(k, strlen(k));
        if (kind == 0) {
            memset(big, 'L', 600);
            snprintf(big, 600, "long:%d:", i);
            key = RK_SLICE(big, 420 + (size_t)(i % 100));
        }
        size_t n;
        uint8_t *r = kind == 1 ? rec(&n, 5, STORE_REC_TOMBSTONE, 0, NULL, 0)
                     : kind == 2
                         ? rec(&n, 5, STORE_REC_EXPIRES, 99, v, strlen(v))
                         : rec(&n, 5, 0, 0, v, strlen(v));
        ck_assert_int_eq(store_batch_add(b, key, RK_SLICE(r, n)), 0);
        free(r);
        if (store_batch_count(b) == 97 || i + 1 == nk) {
            ck_assert_int_eq(store_batch_commit(s, b), 0);
            store_batch_reset(b);
        }
    }
    free(big);
    store_batch_free(b);
}

/* No directory under ranges/ carries a "~N" suffix (a temporary name). */
static inline void check_dirs_canonical(void)
{
    char cmd[400];
    snprintf(cmd, sizeof(cmd), "ls '%s/ranges' | grep -q '~'", tmpdir);
    ck_assert_int_ne(system(cmd), 0);
}

#endif
