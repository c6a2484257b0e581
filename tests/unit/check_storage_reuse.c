/*
 * check_storage_reuse.c - the store's buffers that outlive one call: reads
 * into a buffer the caller keeps (store_get_raw_into) and batches reused
 * through store_batch_reset, whose copies of the writes live in chunks
 * the batch keeps (storage/writes.c), and records encoded into a buffer
 * grown as needed (store_record_encode_grow). Apart from check_storage.c, which
 * is past its size already.
 *
 * Every test works in its own fresh directory under $TMPDIR (or /tmp).
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <check.h>

#include "common/rk.h"
#include "storage/store.h"
#include "tests/unit/store_fixture.h"

/* ---- tests -------------------------------------------------------------- */

/* store_get_raw_into: one buffer serves many reads, grown only when a
 * record is larger than it, and the memtable's and the env's records (the
 * LWW winner of the two) come out as store_get_raw's do. */
START_TEST(get_raw_into_reuses_buffer)
{
    mk_tmp();
    store *s = open_store(NULL);
    ck_assert_int_eq(store_range_create(s, WHOLE), 0);
    ck_assert_int_eq(put(s, "a", 5, "env"), 0);
    ck_assert_int_eq(put(s, "big", 5, "a value longer than the first"), 0);
    ck_assert_int_eq(store_checkpoint(s), 0);     /* both in the env now */
    ck_assert_int_eq(put(s, "a", 4, "older"), 0); /* in the memtable */
    ck_assert_int_eq(put(s, "m", 7, "mem"), 0);
    uint8_t *buf = NULL;
    size_t cap = 0, n = 0;
    struct store_record r;
    ck_assert_int_eq(store_get_raw_into(&buf, &cap, &n, s, RK_SLICE("a", 1)),
                     0);
    ck_assert_int_eq(store_record_decode(&r, buf, n), 0);
    ck_assert_uint_eq(r.ts, 5); /* the env's record wins */
    ck_assert_mem_eq(r.value.p, "env", 3);
    ck_assert_uint_ge(cap, n);
    uint8_t *first = buf;
    size_t cap1 = cap;
    ck_assert_int_eq(store_get_raw_into(&buf, &cap, &n, s, RK_SLICE("m", 1)),
                     0);
    ck_assert_int_eq(store_record_decode(&r, buf, n), 0);
    ck_assert_uint_eq(r.ts, 7);
    ck_assert_mem_eq(r.value.p, "mem", 3);
    ck_assert_ptr_eq(buf, first); /* not larger: the same buffer */
    ck_assert_uint_eq(cap, cap1);
    ck_assert_int_eq(store_get_raw_into(&buf, &cap, &n, s, RK_SLICE("nope", 4)),
                     RK_ENOTFOUND);
    ck_assert_int_eq(store_get_raw_into(&buf, &cap, &n, s, RK_SLICE("big", 3)),
                     0);
    ck_assert_uint_ge(cap, n);
    ck_assert_int_eq(store_record_decode(&r, buf, n), 0);
    ck_assert_uint_eq(r.value.len, strlen("a value longer than the first"));
    ck_assert_mem_eq(r.value.p, "a value longer than the first", r.value.len);
    uint8_t *p;
    size_t pn;
    ck_assert_int_eq(store_get_raw(&p, &pn, s, RK_SLICE("big", 3)), 0);
    ck_assert_uint_eq(pn, n);
    ck_assert_mem_eq(p, buf, n);
    free(p);
    free(buf);
    store_free(s);
    rm_tmp();
}
END_TEST

/* One batch reused (store_batch_reset) for several commits: its copies of
 * the writes live in chunks it keeps, so a round of writes filling more
 * than one chunk, with a value too large for a chunk among them, must
 * come out whole each time, and the writes of the round before must not
 * show through. */
START_TEST(batch_reuse_keeps_copies_apart)
{
    mk_tmp();
    store *s = open_store(NULL);
    ck_assert_int_eq(store_range_create(s, WHOLE), 0);
    store_batch *b;
    ck_assert_int_eq(store_batch_new(&b), 0);
    char key[32], val[64];
    char *big = malloc(40000);
    ck_assert_ptr_nonnull(big);
    for (int round = 0; round < 3; round++) {
        for (int i = 0; i < 1500; i++) { /* ~75 KiB of copies */
            snprintf(key, sizeof(key), "k%04d", i);
            snprintf(val, sizeof(val), "round %d value %04d", round, i);
            size_t n;
            uint8_t *r = rec(&n, (uint64_t)round + 1, 0, 0, val, strlen(val));
            ck_assert_int_eq(
                store_batch_add(b, RK_SLICE(key, strlen(key)), RK_SLICE(r, n)),
                0);
            free(r);
        }
        memset(big, 'a' + round, 40000);
        size_t n;
        uint8_t *r = rec(&n, (uint64_t)round + 1, 0, 0, big, 40000);
        ck_assert_int_eq(store_batch_add(b, RK_SLICE("big", 3), RK_SLICE(r, n)),
                         0);
        free(r);
        ck_assert_int_eq(store_batch_commit(s, b), 0);
        for (size_t i = 0; i < store_batch_count(b); i++)
            ck_assert_int_eq(store_batch_result(b, i), 0);
        store_batch_reset(b);
        for (int i = 0; i < 1500; i += 149) {
            snprintf(key, sizeof(key), "k%04d", i);
            snprintf(val, sizeof(val), "round %d value %04d", round, i);
            expect(s, key, val);
        }
        char *v = get(s, "big", 1);
        ck_assert_ptr_nonnull(v);
        ck_assert_uint_eq(strlen(v), 40000);
        ck_assert_int_eq(v[0], 'a' + round);
        ck_assert_int_eq(v[39999], 'a' + round);
        free(v);
    }
    free(big);
    store_batch_free(b);
    store_free(s);
    rm_tmp();
}
END_TEST

/* store_record_encode_grow: one buffer serves records of every size, grown
 * only when one needs more, each decoding back as it went in. */
START_TEST(record_encode_grow_reuses_buffer)
{
    uint8_t *buf = NULL;
    size_t cap = 0, n = 0;
    char big[300];
    memset(big, 'b', sizeof(big));
    struct store_record in[3] = {
        {5, 0, 0, RK_SLICE("small", 5)},
        {6, STORE_REC_EXPIRES, 99, RK_SLICE(big, sizeof(big))},
        {7, STORE_REC_TOMBSTONE, 0, RK_SLICE(NULL, 0)}};
    size_t caps[3];
    for (int i = 0; i < 3; i++) {
        ck_assert_int_eq(store_record_encode_grow(&buf, &cap, &n, &in[i]), 0);
        caps[i] = cap;
        ck_assert_uint_eq(n, store_record_size(&in[i]));
        struct store_record out;
        ck_assert_int_eq(store_record_decode(&out, buf, n), 0);
        ck_assert_int_eq(store_record_cmp(&out, &in[i]), 0);
    }
    ck_assert_uint_eq(caps[0], store_record_size(&in[0]));
    ck_assert_uint_eq(caps[1], store_record_size(&in[1])); /* grown */
    ck_assert_uint_eq(caps[2], caps[1]); /* smaller: the same buffer */
    free(buf);
}
END_TEST

static Suite *reuse_suite(void)
{
    Suite *s = suite_create("storage_reuse");
    TCase *tc = tcase_create("reuse");
    tcase_add_test(tc, get_raw_into_reuses_buffer);
    tcase_add_test(tc, batch_reuse_keeps_copies_apart);
    tcase_add_test(tc, record_encode_grow_reuses_buffer);
    suite_add_tcase(s, tc);
    return s;
}

int main(void)
{
    SRunner *sr = srunner_create(reuse_suite());
    srunner_run_all(sr, CK_NORMAL);
    int failed = srunner_ntests_failed(sr);
    srunner_free(sr);
    return failed == 0 ? EXIT_SUCCESS : EXIT_FAILURE;
}
