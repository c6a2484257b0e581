/*
 * check_storage_cache.c - the read cache (storage/cache.c, docs/storage.md
 * "The read cache"): the table alone (hits, absences, eviction within its
 * budget, dead range ids, the merge an apply makes), and the store with it:
 * a read served from it is what the env holds after every kind of change
 * -- a memtable apply, a chunk committed directly, a purge, a drop and a
 * range created again, a split, a write whose inner key collides -- and readers
 * racing a writer and its applies never see a value go back.
 *
 * Every store test works in its own fresh directory under $TMPDIR (or
 * /tmp).
 */
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <check.h>

#include "common/rk.h"
#include "storage/hlc.h"
#include "storage/store.h"
#include "storage/store_internal.h"
#include "tests/unit/store_fixture.h"

static struct rk_slice S(const char *s) {
    return RK_SLICE(s, strlen(s));
}

static uint64_t
cache_hits(store *s)
{
    struct store_mem_info mi;
    store_mem_info(&mi, s);
    return mi.cache_hits;
}

/* get(s, key) twice: the second read must come from the cache (one hit
 * more) and say the same. */
static void expect_cached(store *s, const char *key, const char *val)
{
    expect(s, key, val);
    uint64_t h = cache_hits(s);
    expect(s, key, val);
    ck_assert_uint_eq(cache_hits(s), h + 1);
}

/* get(s, key) once, served by the cache (one hit more). */
static void expect_hit(store *s, const char *key, const char *val)
{
    uint64_t h = cache_hits(s);
    expect(s, key, val);
    ck_assert_uint_eq(cache_hits(s), h + 1);
}

/* ---- the table ---------------------------------------------------------- */

START_TEST(cache_keeps_records_and_absences)
{
    store__cache *c;
    ck_assert_int_eq(store__cache_new(&c, (size_t)1 << 20), 0);
    struct rk_slice r = S("record-a"), got;
    bool absent = true;
    ck_assert_int_eq(store__cache_get(&got, &absent, c, 7, 1, S("a")),
                     RK_ENOTFOUND);
    store__cache_put(c, 7, 1, S("a"), &r);
    store__cache_put(c, 7, 1, S("b"), NULL); /* same token, other key */
    ck_assert_int_eq(store__cache_get(&got, &absent, c, 7, 1, S("a")), 0);
    ck_assert(!absent);
    ck_assert_uint_eq(got.len, r.len);
    ck_assert(memcmp(got.p, r.p, r.len) == 0);
    ck_assert_int_eq(store__cache_get(&got, &absent, c, 7, 1, S("b")), 0);
    ck_assert(absent);
    /* read from a range that has another id now: dead, and dropped */
    ck_assert_int_eq(store__cache_get(&got, &absent, c, 7, 2, S("a")),
                     RK_ENOTFOUND);
    ck_assert_int_eq(store__cache_get(&got, &absent, c, 7, 1, S("a")),
                     RK_ENOTFOUND);
    store__cache_del(c, 7, S("b"));
    ck_assert_int_eq(store__cache_get(&got, &absent, c, 7, 1, S("b")),
                     RK_ENOTFOUND);
    struct store_mem_info mi = {0};
    store__cache_stats(&mi, c);
    ck_assert_uint_eq(mi.cache_entries, 0);
    ck_assert_uint_eq(mi.cache_hits, 2);
    ck_assert_uint_eq(mi.cache_misses, 4);
    /* a record over STORE__CACHE_REC_MAX is not kept */
    static uint8_t big[STORE__CACHE_REC_MAX + 1];
    struct rk_slice bs = RK_SLICE(big, sizeof(big));
    store__cache_put(c, 9, 1, S("big"), &bs);
    ck_assert_int_eq(store__cache_get(&got, &absent, c, 9, 1, S("big")),
                     RK_ENOTFOUND);
    store__cache_free(c);
}
END_TEST

/* 20,000 entries of ~300 bytes into a 1 MiB cache: it never holds more
 * than its budget, keeps as many as fit, and what it keeps is right. */
START_TEST(cache_stays_within_its_budget)
{
    const size_t budget = (size_t)1 << 20;
    store__cache *c;
    ck_assert_int_eq(store__cache_new(&c, budget), 0);
    uint8_t val[256];
    struct store_mem_info mi = {0};
    for (uint32_t i = 0; i < 20000; i++) {
        char k[32];
        int kl = snprintf(k, sizeof(k), "key:%u", i);
        memset(val, (int)(i & 0xff), sizeof(val));
        struct rk_slice r = RK_SLICE(val, sizeof(val));
        uint64_t t = rk_token(k, (size_t)kl);
        store__cache_put(c, t, 1, RK_SLICE(k, (size_t)kl), &r);
        store__cache_stats(&mi, c);
        ck_assert_uint_le(mi.cache_bytes, budget);
        if (i % 3 == 0) { /* some are read again: the clock spares them */
            struct rk_slice got;
            bool absent;
            ck_assert_int_eq(
                store__cache_get(&got, &absent, c, t, 1, RK_SLICE(k, kl)), 0);
        }
    }
    /* at least half the budget is entries, and each is the right one */
    ck_assert_uint_ge(mi.cache_entries, budget / 2 / 400);
    size_t found = 0;
    for (uint32_t i = 0; i < 20000; i++) {
        char k[32];
        int kl = snprintf(k, sizeof(k), "key:%u", i);
        struct rk_slice got;
        bool absent;
        if (store__cache_get(&got, &absent, c, rk_token(k, (size_t)kl), 1,
                             RK_SLICE(k, (size_t)kl)) != 0)
            continue;
        found++;
        ck_assert_uint_eq(got.len, sizeof(val));
        ck_assert_uint_eq(got.p[0], i & 0xff);
        ck_assert_uint_eq(got.p[sizeof(val) - 1], i & 0xff);
    }
    ck_assert_uint_eq(found, mi.cache_entries);
    store__cache_free(c);
}
END_TEST

/* What an apply does to an entry: the record it merges in wins only if
 * newer, as in the env (an absence takes it). */
START_TEST(cache_merge_keeps_the_lww_winner)
{
    store__cache *c;
    ck_assert_int_eq(store__cache_new(&c, (size_t)1 << 20), 0);
    size_t n1, n2, n3;
    uint8_t *r1 = rec(&n1, 100, 0, 0, "old", 3);
    uint8_t *r2 = rec(&n2, 200, 0, 0, "newer", 5);
    uint8_t *r3 = rec(&n3, 50, 0, 0, "stale", 5);
    struct rk_slice a = RK_SLICE(r1, n1), got;
    bool absent;
    store__cache_put(c, 1, 1, S("k"), &a);
    store__cache_merge(c, 1, S("k"), RK_SLICE(r3, n3)); /* older: stays */
    ck_assert_int_eq(store__cache_get(&got, &absent, c, 1, 1, S("k")), 0);
    ck_assert(got.len == n1 && memcmp(got.p, r1, n1) == 0);
    store__cache_merge(c, 1, S("k"), RK_SLICE(r2, n2)); /* newer: taken */
    ck_assert_int_eq(store__cache_get(&got, &absent, c, 1, 1, S("k")), 0);
    ck_assert(got.len == n2 && memcmp(got.p, r2, n2) == 0);
    store__cache_put(c, 2, 1, S("gone"), NULL);
    store__cache_merge(c, 2, S("gone"), RK_SLICE(r3, n3));
    ck_assert_int_eq(store__cache_get(&got, &absent, c, 2, 1, S("gone")), 0);
    ck_assert(!absent && got.len == n3 && memcmp(got.p, r3, n3) == 0);
    store__cache_merge(c, 3, S("none"), RK_SLICE(r3, n3)); /* no entry */
    ck_assert_int_eq(store__cache_get(&got, &absent, c, 3, 1, S("none")),
                     RK_ENOTFOUND);
    free(r1);
    free(r2);
    free(r3);
    store__cache_free(c);
}
END_TEST

/* ---- the store with it -------------------------------------------------- */

/* A read of an applied key is served by the cache, and the cache follows
 * the next apply: the new value, not the one it had (without the apply's
 * merge the second read returned "v1"), and at once (merged, not
 * dropped: the first read after the apply is a hit). */
START_TEST(cache_follows_memtable_apply)
{
    mk_tmp();
    store *s = open_store(NULL);
    ck_assert_int_eq(store_range_create(s, WHOLE), 0);
    ck_assert_int_eq(put(s, "k", 10, "v1"), 0);
    ck_assert_int_eq(put(s, "k2", 10, "w1"), 0);
    ck_assert_int_eq(store_flush(s), 0);
    expect_cached(s, "k", "v1");
    expect_cached(s, "k2", "w1");
    expect_cached(s, "absent", NULL);
    ck_assert_int_eq(put(s, "k", 20, "v2-longer"), 0);
    ck_assert_int_eq(put(s, "k2", 5, "older"), 0); /* loses to w1 */
    ck_assert_int_eq(put(s, "absent", 30, "here"), 0);
    ck_assert_int_eq(store_flush(s), 0);
    expect_hit(s, "k", "v2-longer");
    expect_hit(s, "k2", "w1");
    expect_hit(s, "absent", "here");
    ck_assert_int_eq(put(s, "k", 40, NULL), 0); /* a delete */
    ck_assert_int_eq(store_flush(s), 0);
    expect_cached(s, "k", NULL);
    store_free(s);
    rm_tmp();
}
END_TEST

/* A chunk committed straight into the env (streaming, repair) replaces the
 * cached record (without store__cache_begin's delete the read after it
 * returned "v1"). */
START_TEST(cache_follows_direct_commit)
{
    mk_tmp();
    store *s = open_store(NULL);
    ck_assert_int_eq(store_range_create(s, WHOLE), 0);
    ck_assert_int_eq(put(s, "k", 10, "v1"), 0);
    ck_assert_int_eq(store_flush(s), 0);
    expect_cached(s, "k", "v1");
    expect_cached(s, "fresh", NULL);
    store_batch *b;
    ck_assert_int_eq(store_batch_new(&b), 0);
    size_t n;
    uint8_t *r = rec(&n, 20, 0, 0, "v2", 2);
    ck_assert_int_eq(store_batch_add(b, S("k"), RK_SLICE(r, n)), 0);
    ck_assert_int_eq(store_batch_add(b, S("fresh"), RK_SLICE(r, n)), 0);
    free(r);
    ck_assert_int_eq(store_batch_commit_direct(s, b, true), 0);
    store_batch_free(b);
    expect_cached(s, "k", "v2");
    expect_cached(s, "fresh", "v2");
    store_free(s);
    rm_tmp();
}
END_TEST

/* An XXH3-128 collision (store__ikey): a key of over STORE__SHORT bytes
 * whose inner key holds another key's record, made here by storing key B's
 * record under key A's inner key. A's write fails alone at the apply
 * (store__apply: RK_EINTERNAL), the env keeps B's record, and the read
 * cache drops A's entry instead of merging in the write that never landed
 * (store__cache_batch): merged, the cached absence became "a-new". */
START_TEST(colliding_key_neither_lands_nor_is_cached)
{
    mk_tmp();
    store *s = open_store(NULL);
    ck_assert_int_eq(store_range_create(s, WHOLE), 0);
    char ka[STORE__SHORT + 21], kb[STORE__SHORT + 21];
    memset(ka, 'k', sizeof(ka) - 1);
    ka[sizeof(ka) - 1] = 0;
    memcpy(kb, ka, sizeof(kb));
    kb[sizeof(kb) - 2] = 'z'; /* the same first STORE__SHORT bytes */
    struct store__range *rr = s->ranges[0];
    MDB_txn *t;
    ck_assert_int_eq(mdb_txn_begin(rr->env, NULL, 0, &t), 0);
    uint8_t ik[STORE__IKEY_MAX];
    MDB_val k = {store__ikey(ik, rk_token(ka, strlen(ka)), S(ka)), ik};
    ck_assert_uint_eq(k.mv_size, STORE__LONG_IKEY);
    size_t n, kl = strlen(kb);
    uint8_t *r = rec(&n, 10, 0, 0, "b-old", 5);
    uint8_t *v = malloc(4 + kl + n);
    v[0] = (uint8_t)(kl >> 24), v[1] = (uint8_t)(kl >> 16);
    v[2] = (uint8_t)(kl >> 8), v[3] = (uint8_t)kl;
    memcpy(v + 4, kb, kl);
    memcpy(v + 4 + kl, r, n);
    MDB_val val = {4 + kl + n, v};
    ck_assert_int_eq(mdb_put(t, rr->dbi, &k, &val, 0), 0);
    ck_assert_int_eq(mdb_txn_commit(t), 0);
    free(r);
    expect_cached(s, ka, NULL); /* B's record is not A's */
    ck_assert_int_eq(put(s, ka, 20, "a-new"), 0);
    expect(s, ka, "a-new"); /* from the memtable */
    (void)store_flush(s);
    expect(s, ka, NULL); /* the apply refused it: neither env nor cache */
    expect(s, ka, NULL);
    ck_assert_int_eq(mdb_txn_begin(rr->env, NULL, MDB_RDONLY, &t), 0);
    ck_assert_int_eq(mdb_get(t, rr->dbi, &k, &val), 0);
    ck_assert_uint_eq(val.mv_size, 4 + kl + n); /* B's, as it was */
    ck_assert(memcmp(val.mv_data, v, val.mv_size) == 0);
    mdb_txn_abort(t);
    free(v);
    store_free(s);
    rm_tmp();
}
END_TEST

/* While an env change is under way (store__cache_begin to _end) a read
 * keeps nothing: it may have read the env before the change. */
START_TEST(cache_keeps_nothing_during_env_change)
{
    mk_tmp();
    store *s = open_store(NULL);
    ck_assert_int_eq(store_range_create(s, WHOLE), 0);
    ck_assert_int_eq(put(s, "k", 10, "v1"), 0);
    ck_assert_int_eq(store_flush(s), 0);
    store__cache_begin(s, NULL);
    expect(s, "k", "v1");
    expect(s, "k", "v1");
    struct store_mem_info mi;
    store_mem_info(&mi, s);
    ck_assert_uint_eq(mi.cache_entries, 0);
    ck_assert_uint_eq(mi.cache_hits, 0);
    store__cache_end(s, false);
    expect_cached(s, "k", "v1");
    store_free(s);
    rm_tmp();
}
END_TEST

/* A range dropped and created again is empty: the records cached from
 * the old one are not served (its env had another cache_id). */
START_TEST(cache_forgets_dropped_range)
{
    mk_tmp();
    store *s = open_store(NULL);
    ck_assert_int_eq(store_range_create(s, WHOLE), 0);
    ck_assert_int_eq(put(s, "k", 10, "v1"), 0);
    ck_assert_int_eq(store_flush(s), 0);
    expect_cached(s, "k", "v1");
    ck_assert_int_eq(store_range_drop(s, WHOLE), 0);
    ck_assert_int_eq(store_range_create(s, WHOLE), 0);
    expect(s, "k", NULL);
    store_free(s);
    rm_tmp();
}
END_TEST

/* Read key raw twice: the second comes from the cache. */
static void read_twice(store *s, const char *key)
{
    uint8_t *p;
    size_t n;
    for (int i = 0; i < 2; i++) {
        ck_assert_int_eq(store_get_raw(&p, &n, s, S(key)), 0);
        free(p);
    }
}

/* Purge r's tombstones past a 1 s grace at 5 s, as repair's purge runs
 * it; how many it purged. */
static uint64_t purge_range(store *s, struct store_range r)
{
    struct store_purge pg;
    store_purge_init(&pg, r, 5000, 1000, UINT64_MAX);
    while (!pg.done)
        ck_assert_int_ge(store_purge_next(s, &pg, 100), 0);
    return pg.tombstones;
}

/* A tombstone purged from its env in place (a purge step, as repair's
 * purge runs it) is not served from the cache afterwards. */
START_TEST(cache_forgets_purged_tombstone)
{
    mk_tmp();
    struct store_opts o = STORE_OPTS_INIT;
    o.gc_grace_ms = 1000;
    store *s = open_store(&o);
    ck_assert_int_eq(store_range_create(s, WHOLE), 0);
    ck_assert_int_eq(put(s, "dead", hlc_ts_make(900, 0), NULL), 0);
    ck_assert_int_eq(store_flush(s), 0);
    read_twice(s, "dead");
    ck_assert_uint_ge(cache_hits(s), 1);
    ck_assert_uint_eq(purge_range(s, WHOLE), 1);
    uint8_t *p;
    size_t n;
    ck_assert_int_eq(store_get_raw(&p, &n, s, S("dead")), RK_ENOTFOUND);
    store_free(s);
    rm_tmp();
}
END_TEST

/* A key cached before a split, purged in its new half, is not served
 * again once the halves merge back: the merged range must not take the
 * entries of the range it was before the split (split and merge give it
 * a new cache_id; without both, the purged tombstone came back). */
START_TEST(cache_forgets_purged_across_split_and_merge)
{
    mk_tmp();
    struct store_opts o = STORE_OPTS_INIT;
    o.gc_grace_ms = 1000;
    store *s = open_store(&o);
    ck_assert_int_eq(store_range_create(s, WHOLE), 0);
    const uint64_t at = UINT64_C(1) << 63;
    char k[16];
    for (int i = 0;; i++) { /* a key in the upper half */
        snprintf(k, sizeof(k), "t%d", i);
        if (rk_token(k, strlen(k)) >= at)
            break;
    }
    ck_assert_int_eq(put(s, k, hlc_ts_make(900, 0), NULL), 0);
    ck_assert_int_eq(store_flush(s), 0);
    read_twice(s, k);
    struct store_range lo = {0, at}, hi = {at, 0};
    ck_assert_int_eq(store_range_split(s, WHOLE, at), 0);
    ck_assert_uint_eq(purge_range(s, hi), 1);
    ck_assert_int_eq(store_range_merge(s, lo, hi), 0);
    uint8_t *p;
    size_t n;
    ck_assert_int_eq(store_get_raw(&p, &n, s, S(k)), RK_ENOTFOUND);
    store_free(s);
    rm_tmp();
}
END_TEST

/* After a split each half serves its keys right, from the cache again
 * once read. */
START_TEST(cache_right_after_split)
{
    mk_tmp();
    store *s = open_store(NULL);
    ck_assert_int_eq(store_range_create(s, WHOLE), 0);
    char k[32], v[32];
    for (int i = 0; i < 200; i++) {
        snprintf(k, sizeof(k), "k%d", i);
        snprintf(v, sizeof(v), "v%d", i);
        ck_assert_int_eq(put(s, k, 10, v), 0);
    }
    ck_assert_int_eq(store_flush(s), 0);
    for (int i = 0; i < 200; i++) {
        snprintf(k, sizeof(k), "k%d", i);
        snprintf(v, sizeof(v), "v%d", i);
        expect_cached(s, k, v);
    }
    ck_assert_int_eq(store_range_split(s, WHOLE, UINT64_C(1) << 63), 0);
    for (int i = 0; i < 200; i++) {
        snprintf(k, sizeof(k), "k%d", i);
        snprintf(v, sizeof(v), "v%d", i);
        expect_cached(s, k, v);
    }
    store_free(s);
    rm_tmp();
}
END_TEST

/* store_prefetch's address for the cache's buckets follows them as reads
 * grow the table (3,000 keys: past its first 1,024 buckets twice). */
START_TEST(prefetch_follows_cache_growth)
{
    mk_tmp();
    store *s = open_store(NULL);
    ck_assert_int_eq(store_range_create(s, WHOLE), 0);
    char k[32];
    for (int i = 0; i < 3000; i++) {
        snprintf(k, sizeof(k), "p%d", i);
        ck_assert_int_eq(put(s, k, 10, "v"), 0);
    }
    ck_assert_int_eq(store_flush(s), 0);
    size_t grew = 0, last = 0;
    for (int i = 0; i < 3000; i++) {
        snprintf(k, sizeof(k), "p%d", i);
        expect(s, k, "v");
        pthread_mutex_lock(&s->memmu);
        size_t mask;
        uintptr_t tab = store__cache_buckets(s->cache, &mask);
        ck_assert_uint_eq(atomic_load(&s->pf_tab[2]), tab);
        ck_assert_uint_eq(atomic_load(&s->pf_mask[2]), mask);
        pthread_mutex_unlock(&s->memmu);
        grew += mask != last;
        last = mask;
        store_prefetch(s, rk_token(k, strlen(k)));
    }
    ck_assert_uint_ge(grew, 3); /* 1,024, 2,048, 4,096 buckets */
    store_free(s);
    rm_tmp();
}
END_TEST

/* store_prefetch_many (a pipeline's GETs) is a hint: over keys in the
 * memtable, in the cache, absent, and with no cache at all, every read
 * after it says what it said before, and the cache's counts move only by
 * the reads. */
START_TEST(prefetch_many_changes_nothing)
{
    for (int cached = 0; cached < 2; cached++) {
        mk_tmp();
        struct store_opts o = STORE_OPTS_INIT;
        if (!cached)
            o.read_cache_bytes = 0;
        store *s = open_store(&o);
        ck_assert_int_eq(store_range_create(s, WHOLE), 0);
        char k[32];
        uint64_t t[64];
        for (int i = 0; i < 40; i++) {
            snprintf(k, sizeof(k), "m%d", i);
            ck_assert_int_eq(put(s, k, 10, "env"), 0);
        }
        ck_assert_int_eq(store_flush(s), 0);
        for (int i = 0; i < 20; i++) { /* half of them newer in mem */
            snprintf(k, sizeof(k), "m%d", i);
            ck_assert_int_eq(put(s, k, 20, "mem"), 0);
        }
        for (int i = 0; i < 64; i++) { /* 24 of them absent */
            snprintf(k, sizeof(k), "m%d", i);
            t[i] = rk_token(k, strlen(k));
        }
        for (int round = 0; round < 3; round++) {
            uint64_t h = cache_hits(s);
            store_prefetch_many(s, t, 64);
            store_prefetch_many(s, t, 0);
            ck_assert_uint_eq(cache_hits(s), h);
            for (int i = 0; i < 64; i++) {
                snprintf(k, sizeof(k), "m%d", i);
                if (i < 20)
                    expect(s, k, "mem");
                else if (i < 40)
                    expect(s, k, "env");
                else
                    expect(s, k, NULL);
            }
        }
        if (cached)
            ck_assert_uint_ge(cache_hits(s), 40); /* rounds 2 and 3 */
        store_free(s);
        rm_tmp();
    }
}
END_TEST

/* ---- readers racing a writer -------------------------------------------- */

#define RC_KEYS   64
#define RC_ROUNDS 200

struct rc_reader {
    store *s;
    atomic_bool *stop;
    long reads;
    int back; /* reads that saw a key's value go back */
    int failed;
};

static long value_of(store *s, int key)
{
    char k[16];
    snprintf(k, sizeof(k), "r%d", key);
    char *v = get(s, k, 1);
    long x = v ? strtol(v, NULL, 10) : 0;
    free(v);
    return x;
}

/* Each key's value only grows (the writer writes 1, 2, 3, ...): a read
 * below one this reader saw before went back in time. */
static void *rc_reader_main(void *arg)
{
    struct rc_reader *r = arg;
    long seen[RC_KEYS] = {0};
    for (int i = 0; !atomic_load(r->stop); i = (i + 7) % RC_KEYS) {
        long x = value_of(r->s, i);
        if (x < seen[i])
            r->back++;
        else
            seen[i] = x;
        r->reads++;
    }
    return NULL;
}

/* A writer's rounds, each a write of every key, with applies (flushes)
 * and direct commits of older records between them, and two readers: no
 * read goes back, and at the end every key reads its last value. */
START_TEST(cache_readers_never_go_back)
{
    mk_tmp();
    struct store_opts o = STORE_OPTS_INIT;
    o.durability = STORE_PERIODIC;
    o.read_cache_bytes = (size_t)64 << 10; /* small: evictions too */
    store *s = open_store(&o);
    ck_assert_int_eq(store_range_create(s, WHOLE), 0);
    atomic_bool stop = false;
    struct rc_reader rd[2];
    pthread_t t[2];
    for (int i = 0; i < 2; i++) {
        rd[i] = (struct rc_reader){.s = s, .stop = &stop};
        ck_assert_int_eq(pthread_create(&t[i], NULL, rc_reader_main, &rd[i]),
                         0);
    }
    store_batch *b;
    ck_assert_int_eq(store_batch_new(&b), 0);
    for (int round = 1; round <= RC_ROUNDS; round++) {
        for (int i = 0; i < RC_KEYS; i++) { /* one commit */
            char k[16], v[16];
            snprintf(k, sizeof(k), "r%d", i);
            int vl = snprintf(v, sizeof(v), "%d", round);
            size_t n;
            uint8_t *r = rec(&n, (uint64_t)round * 10, 0, 0, v, (size_t)vl);
            ck_assert_int_eq(store_batch_add(b, S(k), RK_SLICE(r, n)), 0);
            free(r);
        }
        ck_assert_int_eq(store_batch_commit(s, b), 0);
        store_batch_reset(b);
        if (round % 3 == 0)
            ck_assert_int_eq(store_flush(s), 0);
        if (round % 5 == 0) { /* a late chunk of older records */
            for (int i = 0; i < RC_KEYS; i += 2) {
                char k[16];
                snprintf(k, sizeof(k), "r%d", i);
                size_t n;
                uint8_t *r = rec(&n, (uint64_t)round * 10 - 15, 0, 0, "0", 1);
                ck_assert_int_eq(store_batch_add(b, S(k), RK_SLICE(r, n)), 0);
                free(r);
            }
            ck_assert_int_eq(store_batch_commit_direct(s, b, false), 0);
            store_batch_reset(b);
        }
    }
    store_batch_free(b);
    atomic_store(&stop, true);
    for (int i = 0; i < 2; i++) {
        ck_assert_int_eq(pthread_join(t[i], NULL), 0);
        ck_assert_msg(rd[i].back == 0, "reader %d: %d of %ld reads went back",
                      i, rd[i].back, rd[i].reads);
    }
    ck_assert_int_eq(store_flush(s), 0);
    for (int i = 0; i < RC_KEYS; i++) {
        ck_assert_int_eq(value_of(s, i), RC_ROUNDS);
        ck_assert_int_eq(value_of(s, i), RC_ROUNDS); /* cached */
    }
    struct store_mem_info mi;
    store_mem_info(&mi, s);
    ck_assert_uint_gt(mi.cache_hits, 0);
    ck_assert_uint_le(mi.cache_bytes, o.read_cache_bytes);
    store_free(s);
    rm_tmp();
}
END_TEST

static Suite *cache_suite(void)
{
    Suite *s = suite_create("storage_cache");
    TCase *tc = tcase_create("table");
    tcase_add_test(tc, cache_keeps_records_and_absences);
    tcase_add_test(tc, cache_stays_within_its_budget);
    tcase_add_test(tc, cache_merge_keeps_the_lww_winner);
    suite_add_tcase(s, tc);
    tc = tcase_create("store");
    tcase_add_test(tc, cache_follows_memtable_apply);
    tcase_add_test(tc, cache_follows_direct_commit);
    tcase_add_test(tc, colliding_key_neither_lands_nor_is_cached);
    tcase_add_test(tc, cache_keeps_nothing_during_env_change);
    tcase_add_test(tc, cache_forgets_dropped_range);
    tcase_add_test(tc, cache_forgets_purged_tombstone);
    tcase_add_test(tc, cache_right_after_split);
    tcase_add_test(tc, cache_forgets_purged_across_split_and_merge);
    tcase_add_test(tc, prefetch_follows_cache_growth);
    tcase_add_test(tc, prefetch_many_changes_nothing);
    tcase_add_test(tc, cache_readers_never_go_back);
    suite_add_tcase(s, tc);
    return s;
}

int main(void)
{
    SRunner *sr = srunner_create(cache_suite());
    srunner_run_all(sr, CK_NORMAL);
    int failed = srunner_ntests_failed(sr);
    srunner_free(sr);
    return failed == 0 ? EXIT_SUCCESS : EXIT_FAILURE;
}
