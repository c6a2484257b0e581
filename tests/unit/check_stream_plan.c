/*
 * check_stream_plan.c - which ranges a rebuild pulls, and from whom
 * (streaming/join_plan.c's stream_plan_rebuild, pure): rings in, pieces
 * and their candidate donors out. The join's plan and donors are tested
 * with the rest of a join in check_stream_join.c.
 */
#include <stdbool.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include <check.h>

#include "common/rk.h"
#include "ring/ring.h"
#include "streaming/streaming.h"

#define Q (UINT64_C(1) << 60) /* a sixteenth of the ring */

static uint64_t width_of(struct ring_range r)
{
    return r.start == r.end ? UINT64_MAX : r.end - r.start;
}

/* A rebuild from data centre dc1 on b1 of a ring with dc1 (a1-a3) and
 * dc2 (b1-b3), RF 2 in each: its pieces cover exactly the ranges b1
 * replicates, each inside one arc, with that arc's dc1 replicas (and no
 * other) as candidates; the same plan again; from a data centre with no
 * replicas, pieces with no candidate; a node not in the ring,
 * RK_ENOTFOUND; a data centre with no RF, nothing to pull. */
START_TEST(plan_rebuild_pulls_from_dc)
{
    static const uint64_t ta[3][2] = {
        {1 * Q, 9 * Q}, {4 * Q, 12 * Q}, {7 * Q, 14 * Q}};
    static const uint64_t tb[3][2] = {
        {2 * Q, 10 * Q}, {5 * Q, 13 * Q}, {8 * Q, 15 * Q}};
    const char *names[] = {"a1", "a2", "a3", "b1", "b2", "b3"};
    struct ring_member m[6];
    for (int i = 0; i < 6; i++)
        m[i] = (struct ring_member){.name = names[i],
                                    .dc = i < 3 ? "dc1" : "dc2",
                                    .rack = "r",
                                    .tokens = i < 3 ? ta[i] : tb[i - 3],
                                    .ntokens = 2,
                                    .state = RING_NORMAL};
    for (int with_dc2 = 1; with_dc2 >= 0; with_dc2--) {
        struct ring_dc_rf dcs[2] = {{"dc1", 2}, {"dc2", 2}};
        struct ring_config c = {.members = m,
                                .nmembers = 6,
                                .repl = {.strategy = RING_NTS,
                                         .dcs = dcs,
                                         .ndcs = with_dc2 ? 2 : 1}};
        ring *r = NULL;
        ck_assert_int_eq(ring_new(&r, &c), 0);
        uint32_t b1 = ring_node_find(r, "b1");
        struct ring_range have[64];
        size_t nh = ring_node_ranges(r, b1, have, 64);
        uint64_t want = 0;
        for (size_t i = 0; i < nh; i++)
            want += width_of(have[i]);
        struct stream_plan_range *pr = NULL, *pr2 = NULL;
        size_t np = 0, np2 = 0;
        ck_assert_int_eq(stream_plan_rebuild(&pr, &np, r, "b1", "dc1"), 0);
        if (!with_dc2) { /* b1 replicates nothing */
            ck_assert_uint_eq(nh, 0);
            ck_assert_uint_eq(np, 0);
            ck_assert_ptr_null(pr);
            ring_free(r);
            continue;
        }
        ck_assert_uint_gt(np, 0);
        uint64_t got = 0;
        for (size_t i = 0; i < np; i++) {
            struct ring_range g = pr[i].range;
            got += width_of(g);
            size_t arc = ring_arc_find(r, g.end);
            ck_assert_uint_eq(ring_arc_find(r, g.start + 1), arc);
            bool inside = false;
            for (size_t k = 0; k < nh && !inside; k++)
                inside = ring_range_contains(have[k], g.end) &&
                         ring_range_contains(have[k], g.start + 1);
            ck_assert(inside);
            /* the candidates: the arc's replicas in dc1, all of them */
            uint32_t rep[RING_MAX_REPLICAS];
            size_t nr = ring_replicas(r, g.end, rep, RING_MAX_REPLICAS);
            size_t in_dc1 = 0;
            for (size_t k = 0; k < nr; k++) {
                struct ring_node_info ni;
                ring_node_get(r, &ni, rep[k]);
                in_dc1 += strcmp(ni.dc, "dc1") == 0;
            }
            ck_assert_uint_eq(pr[i].ncand, in_dc1);
            ck_assert_uint_eq(pr[i].npref, pr[i].ncand);
            for (uint32_t k = 0; k < pr[i].ncand; k++) {
                struct ring_node_info ni;
                ring_node_get(r, &ni, pr[i].cand[k]);
                ck_assert_str_eq(ni.dc, "dc1");
                ck_assert_uint_ne(pr[i].cand[k], b1);
            }
        }
        ck_assert_uint_eq(got, want);
        /* deterministic: a resumed rebuild finds its saved ranges */
        ck_assert_int_eq(stream_plan_rebuild(&pr2, &np2, r, "b1", "dc1"), 0);
        ck_assert_uint_eq(np2, np);
        ck_assert(memcmp(pr, pr2, np * sizeof(*pr)) == 0);
        free(pr2);
        free(pr);
        /* a data centre with no replicas: no piece has a candidate */
        ck_assert_int_eq(stream_plan_rebuild(&pr, &np, r, "b1", "dc3"), 0);
        for (size_t i = 0; i < np; i++)
            ck_assert_uint_eq(pr[i].ncand, 0);
        free(pr);
        ck_assert_int_eq(stream_plan_rebuild(&pr, &np, r, "zz", "dc1"),
                         RK_ENOTFOUND);
        ring_free(r);
    }
}
END_TEST

static Suite *plan_suite(void)
{
    Suite *s = suite_create("stream_plan");
    TCase *tc = tcase_create("rebuild");
    tcase_add_test(tc, plan_rebuild_pulls_from_dc);
    suite_add_tcase(s, tc);
    return s;
}

int main(void)
{
    SRunner *sr = srunner_create(plan_suite());
    srunner_run_all(sr, CK_NORMAL);
    int failed = srunner_ntests_failed(sr);
    srunner_free(sr);
    return failed ? EXIT_FAILURE : EXIT_SUCCESS;
}
