/*
 * check_hlc.c - the hybrid logical clock: monotonic whatever the wall clock
 * does, and always past every timestamp it has received.
 */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>

#include <check.h>

#include "common/rk.h"
#include "storage/hlc.h"

START_TEST(follows_wall_clock)
{
    struct hlc h = HLC_INIT;
    uint64_t a = hlc_now(&h, 1000);
    ck_assert_uint_eq(a, hlc_ts_make(1000, 0));
    uint64_t b = hlc_now(&h, 1000);
    ck_assert_uint_eq(b, hlc_ts_make(1000, 1));
    uint64_t c = hlc_now(&h, 2000);
    ck_assert_uint_eq(c, hlc_ts_make(2000, 0));
    ck_assert_uint_eq(hlc_ts_ms(c), 2000);
    ck_assert_uint_eq(hlc_ts_logical(b), 1);
}
END_TEST

START_TEST(never_backwards_when_clock_steps_back)
{
    unsigned seed = (unsigned)_i * 7919u + 1;
    struct hlc h = HLC_INIT;
    uint64_t wall = 1700000000000ull, prev = 0;
    for (int i = 0; i < 100000; i++) {
        /* The wall clock jumps back by up to 10 s now and then. */
        int r = rand_r(&seed) % 100;
        if (r < 5)
            wall -= (uint64_t)(rand_r(&seed) % 10000);
        else if (r < 60)
            wall += (uint64_t)(rand_r(&seed) % 3);
        uint64_t t = hlc_now(&h, wall);
        if (t <= prev)
            ck_abort_msg("seed %u step %d: %llu after %llu", seed, i,
                         (unsigned long long)t, (unsigned long long)prev);
        prev = t;
    }
}
END_TEST

START_TEST(recv_moves_past_remote)
{
    struct hlc h = HLC_INIT;
    uint64_t t0 = hlc_now(&h, 1000);
    uint64_t remote = hlc_ts_make(5000, 42), got;
    ck_assert_int_eq(hlc_recv(&got, &h, 1000, remote), 0);
    ck_assert_uint_gt(got, remote);
    ck_assert_uint_gt(got, t0);
    ck_assert_uint_gt(hlc_now(&h, 1000), got);
    /* An old remote timestamp changes nothing but still ticks. */
    uint64_t before = h.last;
    ck_assert_int_eq(hlc_recv(&got, &h, 1000, 5), 0);
    ck_assert_uint_gt(got, before);
}
END_TEST

START_TEST(drift_limit_refuses_far_future)
{
    struct hlc h = HLC_INIT;
    h.max_drift_ms = 500;
    uint64_t got = 0, before = hlc_now(&h, 1000);
    ck_assert_int_eq(hlc_recv(&got, &h, 1000, hlc_ts_make(1501, 0)),
                     RK_EBADREQ);
    ck_assert_uint_eq(h.last, before);
    ck_assert_int_eq(hlc_recv(&got, &h, 1000, hlc_ts_make(1500, 0)), 0);
    ck_assert_uint_gt(got, hlc_ts_make(1500, 0));
}
END_TEST

START_TEST(logical_overflow_carries)
{
    struct hlc h = HLC_INIT;
    hlc_restore(&h, hlc_ts_make(7, HLC_LOGICAL_MASK));
    uint64_t t = hlc_now(&h, 7);
    ck_assert_uint_eq(t, hlc_ts_make(8, 0));
    hlc_restore(&h, 3); /* never moves back */
    ck_assert_uint_eq(h.last, t);
    h.last = UINT64_MAX;
    ck_assert_uint_eq(hlc_now(&h, 0), UINT64_MAX);
}
END_TEST

static Suite *hlc_suite(void)
{
    Suite *s = suite_create("hlc");
    TCase *tc = tcase_create("clock");
    tcase_add_test(tc, follows_wall_clock);
    tcase_add_loop_test(tc, never_backwards_when_clock_steps_back, 0, 5);
    tcase_add_test(tc, recv_moves_past_remote);
    tcase_add_test(tc, drift_limit_refuses_far_future);
    tcase_add_test(tc, logical_overflow_carries);
    suite_add_tcase(s, tc);
    return s;
}

int main(void)
{
    SRunner *sr = srunner_create(hlc_suite());
    srunner_run_all(sr, CK_NORMAL);
    int failed = srunner_ntests_failed(sr);
    srunner_free(sr);
    return failed == 0 ? EXIT_SUCCESS : EXIT_FAILURE;
}
