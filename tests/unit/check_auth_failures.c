/*
 * check_auth_failures.c - net/auth_failures.h, the per-source table of
 * failed authentications, on a fake clock: the delay's growth and cap,
 * answers from one source in turn, the reset by a success or by time,
 * its fixed bound and eviction under many addresses.
 */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <check.h>

#include "net/auth_failures.h"

static struct net_auth_failures *table_new(void)
{
    struct net_auth_failures *t = malloc(sizeof(*t));
    ck_assert_ptr_nonnull(t);
    net_auth_failures_init(t, NET_AUTH_DELAY_MAX_MS);
    return t;
}

/* Each failure in a row waits twice the one before, from 10 ms, up to
 * 5 s, and for ever at 5 s; answered as they come, each failure's wait is
 * its own delay. */
START_TEST(delay_doubles_up_to_the_cap)
{
    struct net_auth_failures *t = table_new();
    uint64_t now = 1000;
    uint32_t want = NET_AUTH_DELAY_MIN_MS;
    for (uint32_t k = 1; k <= 40; k++) {
        ck_assert_uint_eq(net_auth_failures_delay(t, k), want);
        uint32_t d = net_auth_failures_fail(t, "10.0.0.1", now);
        ck_assert_uint_eq(d, want);
        ck_assert_uint_eq(net_auth_failures_count(t, "10.0.0.1", now), k);
        now += d; /* the client sends the next one once answered */
        want =
            want * 2 < NET_AUTH_DELAY_MAX_MS ? want * 2 : NET_AUTH_DELAY_MAX_MS;
    }
    ck_assert_uint_eq(net_auth_failures_delay(t, 10), NET_AUTH_DELAY_MAX_MS);
    ck_assert_uint_eq(net_auth_failures_delay(t, 9), 2560);
    ck_assert_uint_eq(net_auth_failures_delay(t, UINT32_MAX),
                      NET_AUTH_DELAY_MAX_MS);
    free(t);
}
END_TEST

/* Failures sent at once (a pipeline, or many connections from one
 * address) are answered one after the other: the k-th answer waits the
 * sum of the first k delays. Another address is not held back. */
START_TEST(one_source_waits_in_turn)
{
    struct net_auth_failures *t = table_new();
    uint64_t sum = 0;
    for (uint32_t k = 1; k <= 12; k++) {
        sum += net_auth_failures_delay(t, k);
        ck_assert_uint_eq(net_auth_failures_fail(t, "10.0.0.2", 500), sum);
    }
    ck_assert_uint_eq(net_auth_failures_fail(t, "10.0.0.3", 500),
                      NET_AUTH_DELAY_MIN_MS);
    ck_assert_uint_eq(net_auth_failures_ok(t, "10.0.0.4", 500), 0);
    free(t);
}
END_TEST

/* A success from the address goes out after its failures already
 * waiting, and forgets it: the next failure waits the first delay again.
 * NET_AUTH_FORGET_MS without a failure forgets it too, not sooner. */
START_TEST(success_or_time_resets)
{
    struct net_auth_failures *t = table_new();
    uint64_t now = 0;
    for (int i = 0; i < 6; i++)
        now += net_auth_failures_fail(t, "10.0.0.5", now);
    ck_assert_uint_eq(net_auth_failures_count(t, "10.0.0.5", now), 6);
    uint32_t pending = net_auth_failures_fail(t, "10.0.0.5", now);
    ck_assert_uint_eq(pending, net_auth_failures_delay(t, 7));
    ck_assert_uint_eq(net_auth_failures_ok(t, "10.0.0.5", now + 1),
                      pending - 1);
    ck_assert_uint_eq(net_auth_failures_count(t, "10.0.0.5", now + 1), 0);
    ck_assert_uint_eq(net_auth_failures_fail(t, "10.0.0.5", now + 2),
                      NET_AUTH_DELAY_MIN_MS);

    for (int i = 0; i < 4; i++)
        now += net_auth_failures_fail(t, "10.0.0.6", now);
    uint64_t last = now - net_auth_failures_delay(t, 4);
    ck_assert_uint_eq(
        net_auth_failures_count(t, "10.0.0.6", last + NET_AUTH_FORGET_MS - 1),
        4);
    ck_assert_uint_eq(
        net_auth_failures_count(t, "10.0.0.6", last + NET_AUTH_FORGET_MS), 0);
    ck_assert_uint_eq(
        net_auth_failures_fail(t, "10.0.0.6", last + NET_AUTH_FORGET_MS),
        NET_AUTH_DELAY_MIN_MS);
    free(t);
}
END_TEST

/* 100,000 addresses failing once each: the table never remembers more
 * than its slots, the addresses past them evict others (counted), and an
 * address just evicted starts again from the first delay; the address
 * that failed most recently in its set is kept. */
START_TEST(bounded_with_eviction)
{
    struct net_auth_failures *t = table_new();
    char a[32];
    uint64_t now = 10;
    for (int i = 0; i < 100000; i++) {
        snprintf(a, sizeof(a), "10.%d.%d.%d", i >> 16, (i >> 8) & 255, i & 255);
        ck_assert_uint_eq(net_auth_failures_fail(t, a, now),
                          NET_AUTH_DELAY_MIN_MS);
        if (i % 1000 == 0) /* a walk of the table: not every time */
            ck_assert_uint_le(net_auth_failures_sources(t, now),
                              NET_AUTH_FAILURES_SLOTS);
        now++;
    }
    ck_assert_uint_eq(net_auth_failures_sources(t, now),
                      NET_AUTH_FAILURES_SLOTS);
    ck_assert_uint_eq(t->evictions, 100000 - NET_AUTH_FAILURES_SLOTS);
    /* the last one is remembered; the first long evicted */
    ck_assert_uint_eq(net_auth_failures_count(t, a, now), 1);
    ck_assert_uint_eq(net_auth_failures_count(t, "10.0.0.0", now), 0);
    ck_assert_uint_eq(net_auth_failures_fail(t, "10.0.0.0", now),
                      NET_AUTH_DELAY_MIN_MS);
    /* an address failing again and again stays while others come and go
     * (it is the most recent in its set) */
    for (int i = 0; i < 20000; i++) {
        now++;
        net_auth_failures_fail(t, "192.168.1.1", now);
        snprintf(a, sizeof(a), "172.16.%d.%d", (i >> 8) & 255, i & 255);
        net_auth_failures_fail(t, a, now);
    }
    ck_assert_uint_eq(net_auth_failures_count(t, "192.168.1.1", now), 20000);
    ck_assert_uint_le(net_auth_failures_sources(t, now),
                      NET_AUTH_FAILURES_SLOTS);
    /* text longer than a key is cut, not overflowed */
    char longer[128];
    memset(longer, 'x', sizeof(longer) - 1);
    longer[sizeof(longer) - 1] = '\0';
    ck_assert_uint_eq(net_auth_failures_fail(t, longer, now),
                      NET_AUTH_DELAY_MIN_MS);
    ck_assert_uint_eq(net_auth_failures_count(t, longer, now), 1);
    free(t);
}
END_TEST

/* The addresses of one IPv6 /64 are one source (a host commonly has a
 * whole /64), an IPv4 address mapped in IPv6 is that IPv4 address, and
 * another /64 is another source. */
START_TEST(ipv6_counts_by_64)
{
    struct net_auth_failures *t = table_new();
    ck_assert_uint_eq(net_auth_failures_fail(t, "2001:db8:1:2::1", 0), 10);
    ck_assert_uint_eq(net_auth_failures_fail(t, "2001:db8:1:2:ffff::9", 0), 30);
    ck_assert_uint_eq(net_auth_failures_count(t, "2001:db8:1:2::77", 0), 2);
    ck_assert_uint_eq(net_auth_failures_count(t, "2001:db8:1:3::1", 0), 0);
    ck_assert_uint_eq(net_auth_failures_fail(t, "192.0.2.7", 0), 10);
    ck_assert_uint_eq(net_auth_failures_count(t, "::ffff:192.0.2.7", 0), 1);
    free(t);
}
END_TEST

/* The cap is the table's (auth_fail_delay_max_ms): under the least
 * delay every failure waits the cap; 0 waits nothing. */
START_TEST(cap_is_configured)
{
    struct net_auth_failures *t = table_new();
    net_auth_failures_init(t, 100);
    uint32_t sum = 0;
    for (uint32_t k = 1; k <= 6; k++) {
        sum += k < 5 ? NET_AUTH_DELAY_MIN_MS << (k - 1) : 100;
        ck_assert_uint_eq(net_auth_failures_fail(t, "10.1.1.1", 0), sum);
    }
    net_auth_failures_init(t, 4);
    ck_assert_uint_eq(net_auth_failures_fail(t, "10.1.1.1", 0), 4);
    ck_assert_uint_eq(net_auth_failures_fail(t, "10.1.1.1", 0), 8);
    net_auth_failures_init(t, 0);
    ck_assert_uint_eq(net_auth_failures_fail(t, "10.1.1.1", 0), 0);
    ck_assert_uint_eq(net_auth_failures_fail(t, "10.1.1.1", 0), 0);
    ck_assert_uint_eq(net_auth_failures_count(t, "10.1.1.1", 0), 2);
    free(t);
}
END_TEST

static Suite *net_auth_failures_suite(void)
{
    Suite *s = suite_create("auth_failures");
    TCase *tc = tcase_create("table");
    tcase_add_test(tc, delay_doubles_up_to_the_cap);
    tcase_add_test(tc, one_source_waits_in_turn);
    tcase_add_test(tc, success_or_time_resets);
    tcase_add_test(tc, bounded_with_eviction);
    tcase_add_test(tc, ipv6_counts_by_64);
    tcase_add_test(tc, cap_is_configured);
    suite_add_tcase(s, tc);
    return s;
}

int main(void)
{
    SRunner *sr = srunner_create(net_auth_failures_suite());
    srunner_run_all(sr, CK_NORMAL);
    int failed = srunner_ntests_failed(sr);
    srunner_free(sr);
    return failed ? EXIT_FAILURE : EXIT_SUCCESS;
}
