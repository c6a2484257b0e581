/*
 * check_hlc.c - the hybrid logical clock: monotonic whatever the wall clock
 * does, always past every timestamp it has received, and, through its
 * persisted ceiling, past every timestamp it issued before a restart.
 */
#include <errno.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>

#include <check.h>

#include "common/rk.h"
#include "storage/hlc.h"
#include "tests/unit/loop_check.h"

/* hlc_now, which must issue a timestamp. */
static uint64_t now(struct hlc *h, uint64_t wall_ms)
{
    uint64_t t = 0;
    int rc = hlc_now(&t, h, wall_ms);
    LOOP_CHECK(rc == 0, "hlc_now(wall %llu): %d", (unsigned long long)wall_ms,
               rc);
    return t;
}

START_TEST(follows_wall_clock)
{
    struct hlc h = HLC_INIT;
    uint64_t a = now(&h, 1000);
    ck_assert_uint_eq(a, hlc_ts_make(1000, 0));
    uint64_t b = now(&h, 1000);
    ck_assert_uint_eq(b, hlc_ts_make(1000, 1));
    uint64_t c = now(&h, 2000);
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
        uint64_t t = now(&h, wall);
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
    uint64_t t0 = now(&h, 1000);
    uint64_t remote = hlc_ts_make(5000, 42), got;
    ck_assert_int_eq(hlc_recv(&got, &h, 1000, remote), 0);
    ck_assert_uint_gt(got, remote);
    ck_assert_uint_gt(got, t0);
    ck_assert_uint_gt(now(&h, 1000), got);
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
    uint64_t got = 0, before = now(&h, 1000);
    ck_assert_int_eq(hlc_recv(&got, &h, 1000, hlc_ts_make(1501, 0)),
                     RK_ECLOCKSKEW);
    ck_assert_uint_eq(h.last, before);
    ck_assert_int_eq(hlc_recv(&got, &h, 1000, hlc_ts_make(1500, 0)), 0);
    ck_assert_uint_gt(got, hlc_ts_make(1500, 0));
}
END_TEST

START_TEST(logical_overflow_carries)
{
    struct hlc h = HLC_INIT;
    hlc_restore(&h, hlc_ts_make(7, HLC_LOGICAL_MASK));
    uint64_t t = now(&h, 7);
    ck_assert_uint_eq(t, hlc_ts_make(8, 0));
    hlc_restore(&h, 3); /* never moves back */
    ck_assert_uint_eq(h.last, t);
    h.last = UINT64_MAX;
    ck_assert_uint_eq(now(&h, 0), UINT64_MAX);
}
END_TEST

/* A node that keeps a ceiling (node/clock.c): before each timestamp it
 * persists hlc_ceiling_due, if any; here "persisted" is the variable. */
static uint64_t kept_now(struct hlc *h, uint64_t *persisted, uint64_t wall)
{
    uint64_t c = hlc_ceiling_due(h, wall);
    if (c) {
        LOOP_CHECK(c > *persisted,
                   "new ceiling %llu not above the one persisted %llu: "
                   "the clock went back",
                   (unsigned long long)c, (unsigned long long)*persisted);
        *persisted = c;
        hlc_ceiling_set(h, c);
    }
    uint64_t t = now(h, wall);
    LOOP_CHECK(t <= *persisted, "timestamp %llu past the ceiling %llu",
               (unsigned long long)t, (unsigned long long)*persisted);
    return t;
}

/* Regression: the clock restarted from the wall clock. A node whose clock
 * had been pushed ahead (by a peer ten minutes ahead) issued, after its
 * restart, timestamps below those it had issued and seen before: its writes
 * lost last-write-wins to older ones. Restored from the ceiling it
 * persisted, its first timestamp is past every one before the restart,
 * whatever the wall clock says then. */
START_TEST(hlc_restart_goes_back_in_time)
{
    struct hlc h = HLC_INIT;
    h.window_ms = 1000;
    uint64_t persisted = 0, wall = 1700000000000ull, got, highest = 0;
    for (int i = 0; i < 1000; i++)
        highest = kept_now(&h, &persisted, wall + (uint64_t)i / 10);
    /* a peer ten minutes ahead */
    uint64_t remote = hlc_ts_make(wall + 600000, 7);
    ck_assert_int_eq(hlc_recv(&got, &h, wall + 100, remote), 0);
    highest = kept_now(&h, &persisted, wall + 100);
    ck_assert_uint_gt(highest, remote);
    for (int i = 0; i < 1000; i++)
        highest = kept_now(&h, &persisted, wall + 100);
    /* restart: a new clock, the wall clock where it was, or behind */
    for (uint64_t back = 0; back <= 2000; back += 1000) {
        struct hlc r = HLC_INIT;
        r.window_ms = 1000;
        uint64_t p2 = persisted;
        hlc_restore(&r, p2);
        uint64_t first = kept_now(&r, &p2, wall + 200 - back);
        ck_assert_uint_gt(first, highest);
        ck_assert_uint_gt(first, remote);
    }
}
END_TEST

/* No timestamp passes the ceiling persisted: while the wall clock runs,
 * steps back, and peers push the clock ahead, a new ceiling is due before
 * the clock gets within half a window of the last one, and hlc_now refuses
 * (-EAGAIN, clock unchanged) rather than pass a ceiling not persisted. */
START_TEST(ceiling_raised_before_passed)
{
    unsigned seed = (unsigned)_i * 104729u + 3;
    struct hlc h = HLC_INIT;
    h.window_ms = 1000;
    uint64_t persisted = 0, wall = 1700000000000ull, prev = 0, got;
    int saves = 0;
    for (int i = 0; i < 50000; i++) {
        int r = rand_r(&seed) % 1000;
        if (r < 5)
            wall -= (uint64_t)(rand_r(&seed) % 5000);
        else if (r < 600)
            wall += (uint64_t)(rand_r(&seed) % 3);
        if (r >= 990) { /* a peer up to a minute ahead */
            uint64_t remote =
                hlc_ts_make(wall + (uint64_t)(rand_r(&seed) % 60000), 0);
            int rc = hlc_recv(&got, &h, wall, remote);
            LOOP_CHECK(rc == 0, "seed %u step %d: hlc_recv: %d", seed, i, rc);
        }
        uint64_t before = persisted;
        uint64_t t = kept_now(&h, &persisted, wall);
        saves += persisted != before;
        LOOP_CHECK(t > prev, "seed %u step %d: %llu after %llu", seed, i,
                   (unsigned long long)t, (unsigned long long)prev);
        /* the ceiling is at least half a window ahead of the clock */
        LOOP_CHECK(hlc_ts_ms(persisted) >= hlc_ts_ms(t) + 499,
                   "seed %u step %d: ceiling %llu ms, clock %llu ms", seed, i,
                   (unsigned long long)hlc_ts_ms(persisted),
                   (unsigned long long)hlc_ts_ms(t));
        prev = t;
    }
    /* about twice a window, not per timestamp */
    ck_assert_int_lt(saves, 5000);

    /* without a save, the clock stops at the ceiling */
    struct hlc s = HLC_INIT;
    s.window_ms = 1000;
    hlc_ceiling_set(&s, hlc_ts_make(5000, 1));
    ck_assert_uint_eq(hlc_ceiling_due(&s, 4000), 0);
    ck_assert_uint_eq(now(&s, 5000), hlc_ts_make(5000, 0));
    ck_assert_uint_eq(now(&s, 4000), hlc_ts_make(5000, 1));
    uint64_t t = 0;
    ck_assert_int_eq(hlc_now(&t, &s, 4000), -EAGAIN);
    ck_assert_int_eq(hlc_now(&t, &s, 6000), -EAGAIN);
    ck_assert_uint_eq(s.last, hlc_ts_make(5000, 1));
    uint64_t c = hlc_ceiling_due(&s, 6000);
    ck_assert_uint_eq(c, hlc_ts_make(7000, HLC_LOGICAL_MASK));
    hlc_ceiling_set(&s, c);
    ck_assert_uint_eq(hlc_ceiling_due(&s, 6000), 0);
    ck_assert_uint_eq(now(&s, 6000), hlc_ts_make(6000, 0));
    hlc_ceiling_set(&s, 5); /* never lowered */
    ck_assert_uint_eq(s.ceiling, c);
    /* a peer far ahead: a ceiling past it is due before the next one */
    ck_assert_int_eq(hlc_recv(&got, &s, 6000, hlc_ts_make(90000, 0)), 0);
    c = hlc_ceiling_due(&s, 6000);
    ck_assert_uint_gt(c, got);
    ck_assert_int_eq(hlc_now(&t, &s, 6000), -EAGAIN);
    hlc_ceiling_set(&s, c);
    ck_assert_uint_gt(now(&s, 6000), got);
    /* no ceiling kept (window 0): never due, never refused */
    struct hlc u = HLC_INIT;
    ck_assert_uint_eq(hlc_ceiling_due(&u, 6000), 0);
    ck_assert_uint_eq(now(&u, 6000), hlc_ts_make(6000, 0));
    /* the end of time: the ceiling clamps, the clock stays on its last */
    struct hlc e = HLC_INIT;
    e.window_ms = 1000;
    hlc_restore(&e, UINT64_MAX - 1);
    c = hlc_ceiling_due(&e, UINT64_MAX);
    ck_assert_uint_eq(c, UINT64_MAX);
    hlc_ceiling_set(&e, c);
    ck_assert_uint_eq(now(&e, UINT64_MAX), UINT64_MAX);
    ck_assert_uint_eq(now(&e, UINT64_MAX), UINT64_MAX);
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
    tc = tcase_create("ceiling");
    tcase_add_test(tc, hlc_restart_goes_back_in_time);
    tcase_add_loop_test(tc, ceiling_raised_before_passed, 0, 3);
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
