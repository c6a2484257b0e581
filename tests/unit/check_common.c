/*
 * check_common.c - the partitioner's golden vectors and error naming.
 *
 * The token of a key is part of the on-disk and on-wire contract: if these
 * vectors change, servers and clients built from different trees would place
 * the same key on different nodes.
 */
#include <errno.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include <check.h>

#include "common/pool.h"
#include "common/rk.h"

static const struct {
    const char *key;
    size_t len;
    uint64_t token;
} vectors[] = {
    {"", 0, UINT64_C(0x2d06800538d394c2)},
    {"a", 1, UINT64_C(0xe6c632b61e964e1f)},
    {"abc", 3, UINT64_C(0x78af5f94892f3950)},
    {"key:0", 5, UINT64_C(0xb464ee7b63344e80)},
    {"key:1", 5, UINT64_C(0xbf2d6d6b8270d37a)},
    {"user:1000", 9, UINT64_C(0xfb6841b2068c0c9f)},
    {"ringkv", 6, UINT64_C(0x115c485cf2d256c6)},
    {"hello world", 11, UINT64_C(0xd447b1ea40e6988b)},
    {"The quick brown fox jumps over the lazy dog", 43,
     UINT64_C(0xce7d19a5418fb365)},
    {"0123456789abcdef0123456789abcdef", 32, UINT64_C(0x01121d5b6c0ac055)},
    {"\xff\x00\x01", 3, UINT64_C(0x5798cfa26addd6ed)},
    {"k", 1, UINT64_C(0xa921e3704fda881d)},
};

START_TEST(token_golden_vectors)
{
    ck_assert_uint_eq(rk_token(vectors[_i].key, vectors[_i].len),
                      vectors[_i].token);
}
END_TEST

START_TEST(errors_named_both_ways)
{
    for (int e = RK_ERR_BASE; e >= RK_ERR_LAST; e--) {
        const char *name = rk_errname(e);
        ck_assert_str_ne(name, "ERR");
        ck_assert_int_eq(rk_errcode(name), e);
        ck_assert_ptr_nonnull(rk_strerror(e));
    }
    ck_assert_str_eq(rk_errname(RK_EUNAVAILABLE), "UNAVAILABLE");
    ck_assert_str_eq(rk_errname(RK_ESTALE), "RING_STALE");
    ck_assert_str_eq(rk_errname(-5), "ERR");
    ck_assert_int_eq(rk_errcode("NOPE"), 0);
    ck_assert_str_eq(rk_strerror(0), "success");
    ck_assert_str_eq(rk_strerror(-2), strerror(2));
}
END_TEST

/* Regression: NOT_IMPLEMENTED had no code of its own; it travelled as
 * -ENOSYS, which rk_errname called "ERR", rk_strerror "Function not
 * implemented" and rk_errcode did not know, so every user special-cased it
 * and a local ENOSYS looked like the server's answer. */
START_TEST(not_implemented_has_a_code)
{
    ck_assert_str_eq(rk_errname(RK_ENOTSUP), "NOT_IMPLEMENTED");
    ck_assert_int_eq(rk_errcode("NOT_IMPLEMENTED"), RK_ENOTSUP);
    ck_assert_str_eq(rk_strerror(RK_ENOTSUP),
                     "not implemented in this version");
    ck_assert(RK_ENOTSUP <= RK_ERR_BASE && RK_ENOTSUP >= RK_ERR_LAST);
    ck_assert_str_eq(rk_errname(-ENOSYS), "ERR");
}
END_TEST

/* common/pool.h: LIFO reuse through the object's own link field (not at
 * offset 0), at most RK_POOL_KEEP kept; a sanitizer build keeps none. */
struct pooled {
    uint64_t payload;
    struct pooled *link;
};

START_TEST(pool_reuses_last_released_and_bounds)
{
    struct rk_pool p = {0};
    const size_t off = offsetof(struct pooled, link);
    ck_assert_ptr_null(rk_pool_get(&p, off));
    enum { N = RK_POOL_KEEP + 3 };
    struct pooled *o = calloc(N, sizeof(*o));
    ck_assert_ptr_nonnull(o);
    size_t kept = 0;
    for (size_t i = 0; i < N; i++) {
        o[i].payload = i;
        kept += rk_pool_put(&p, &o[i], off);
    }
#ifdef RK_NO_POOLS
    ck_assert_uint_eq(kept, 0);
    ck_assert_ptr_null(rk_pool_get(&p, off));
#else
    ck_assert_uint_eq(kept, RK_POOL_KEEP);
    ck_assert_uint_eq(p.len, RK_POOL_KEEP);
    for (size_t i = RK_POOL_KEEP; i-- > 0;) { /* last kept comes first */
        struct pooled *g = rk_pool_get(&p, off);
        ck_assert_ptr_eq(g, &o[i]);
        ck_assert_uint_eq(g->payload, i); /* only the link is the pool's */
    }
    ck_assert_uint_eq(p.len, 0);
    ck_assert_ptr_null(rk_pool_get(&p, off));
    ck_assert(rk_pool_put(&p, &o[5], off)); /* room again */
    ck_assert_ptr_eq(rk_pool_get(&p, off), &o[5]);
#endif
    free(o);
}
END_TEST

/* rk_read_file: the whole file, NUL-terminated; exactly `max` bytes are
 * read, one more is -EFBIG; a missing file is -ENOENT. */
/* an admin command's answer: its text and length, and the code given */
START_TEST(answer_text_and_code)
{
    char *t = NULL;
    size_t n = 0;
    ck_assert_int_eq(rk_answer(&t, &n, RK_EBADREQ, "range %d of %s", 3, "n1"),
                     RK_EBADREQ);
    ck_assert_str_eq(t, "range 3 of n1");
    ck_assert_uint_eq(n, strlen("range 3 of n1"));
    free(t);
    ck_assert_int_eq(rk_answer(&t, &n, 0, "%s", ""), 0);
    ck_assert_uint_eq(n, 0);
    free(t);
}
END_TEST

START_TEST(read_file_whole_and_bounded)
{
    char path[] = "/tmp/check_common.XXXXXX";
    int fd = mkstemp(path);
    ck_assert_int_ge(fd, 0);
    size_t max = 10000; /* past the first buffer, not a power of two */
    char *data = malloc(max + 1);
    ck_assert_ptr_nonnull(data);
    for (size_t i = 0; i <= max; i++)
        data[i] = (char)('a' + i % 26);
    ck_assert_int_eq(write(fd, data, max), (ssize_t)max);
    char *got;
    size_t len;
    ck_assert_int_eq(rk_read_file(path, max, &got, &len), 0);
    ck_assert_uint_eq(len, max);
    ck_assert(memcmp(got, data, max) == 0 && got[max] == '\0');
    free(got);
    ck_assert_int_eq(write(fd, data, 1), 1); /* max + 1 bytes */
    ck_assert_int_eq(rk_read_file(path, max, &got, &len), -EFBIG);
    ck_assert_ptr_null(got);
    ck_assert_int_eq(rk_read_file(path, max + 1, &got, &len), 0);
    ck_assert_uint_eq(len, max + 1);
    free(got);
    close(fd);
    unlink(path);
    ck_assert_int_eq(rk_read_file(path, max, &got, &len), -ENOENT);
    free(data);
}
END_TEST

/* rk_write_file_atomic: the file holds the text, a second write replaces
 * it whole, no .tmp stays; a missing folder is -ENOENT. */
START_TEST(write_file_atomic_replaces)
{
    char dir[] = "/tmp/check_common.XXXXXX", path[64], tmp[64];
    ck_assert_ptr_nonnull(mkdtemp(dir));
    snprintf(path, sizeof(path), "%s/f", dir);
    snprintf(tmp, sizeof(tmp), "%s/f.tmp", dir);
    char *got;
    size_t len;
    ck_assert_int_eq(rk_write_file_atomic(dir, "f", "first\nlonger line\n"), 0);
    ck_assert_int_eq(rk_write_file_atomic(dir, "f", "second\n"), 0);
    ck_assert_int_eq(rk_read_file(path, 100, &got, &len), 0);
    ck_assert_str_eq(got, "second\n");
    free(got);
    ck_assert_int_eq(access(tmp, F_OK), -1);
    ck_assert_int_eq(rk_fsync_dir(dir), 0);
    unlink(path);
    rmdir(dir);
    ck_assert_int_eq(rk_write_file_atomic(dir, "f", "x"), -ENOENT);
    ck_assert_int_eq(rk_fsync_dir(dir), -ENOENT);
}
END_TEST

static void sleep_2ms(void)
{
    struct timespec d = {0, 2000000};
    while (nanosleep(&d, &d) != 0)
        ;
}

/* Held clocks: inside a hold both clocks answer their first reading
 * however long the work takes; a hold inside a hold changes nothing and
 * the release ends it; outside, every ask reads the clock again; the
 * fresh monotonic reading is never the held one. */
START_TEST(clock_held_for_one_input)
{
    rk_clock_hold();
    uint64_t ns = rk_clock_mono_ns(), ms = rk_clock_wall_ms();
    sleep_2ms();
    rk_clock_hold();
    ck_assert_uint_eq(rk_clock_mono_ns(), ns);
    ck_assert_uint_eq(rk_clock_wall_ms(), ms);
    ck_assert_uint_ge(rk_clock_mono_fresh_ns(), ns + 2000000u);
    rk_clock_release();
    uint64_t ns2 = rk_clock_mono_ns(), ms2 = rk_clock_wall_ms();
    ck_assert_uint_ge(ns2, ns + 2000000u);
    ck_assert_uint_gt(ms2, ms);
    sleep_2ms();
    ck_assert_uint_ge(rk_clock_mono_ns(), ns2 + 2000000u);
    ck_assert_uint_gt(rk_clock_wall_ms(), ms2);
    rk_clock_hold(); /* a new hold reads anew */
    ck_assert_uint_ge(rk_clock_mono_ns(), ns2 + 2000000u);
    rk_clock_release();
}
END_TEST

static Suite *common_suite(void)
{
    Suite *s = suite_create("common");
    TCase *tc = tcase_create("partitioner");
    tcase_add_loop_test(tc, token_golden_vectors, 0,
                        sizeof(vectors) / sizeof(vectors[0]));
    suite_add_tcase(s, tc);
    tc = tcase_create("errors");
    tcase_add_test(tc, errors_named_both_ways);
    tcase_add_test(tc, not_implemented_has_a_code);
    tcase_add_test(tc, answer_text_and_code);
    suite_add_tcase(s, tc);
    tc = tcase_create("files");
    tcase_add_test(tc, read_file_whole_and_bounded);
    tcase_add_test(tc, write_file_atomic_replaces);
    suite_add_tcase(s, tc);
    tc = tcase_create("pool");
    tcase_add_test(tc, pool_reuses_last_released_and_bounds);
    suite_add_tcase(s, tc);
    tc = tcase_create("clock");
    tcase_add_test(tc, clock_held_for_one_input);
    suite_add_tcase(s, tc);
    return s;
}

int main(void)
{
    SRunner *sr = srunner_create(common_suite());
    srunner_run_all(sr, CK_NORMAL);
    int failed = srunner_ntests_failed(sr);
    srunner_free(sr);
    return failed == 0 ? EXIT_SUCCESS : EXIT_FAILURE;
}
