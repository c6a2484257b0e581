/*
 * check_stream.c - streaming/ run in one process on the fake host of
 * stream_world.h, all but a join: a decommission pushing its ranges to the
 * gaining nodes (and waiting for the hints it keeps, reported as a stall
 * while they are not replayed), a cleanup keeping only what the node still
 * replicates, and the throughput budget's accounting. A join (and a
 * replace), its donors and its stall are in check_stream_join.c.
 */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <check.h>

#include "common/rk.h"
#include "ring/ring.h"
#include "storage/store.h"
#include "streaming/streaming.h"
#include "tests/unit/stream_world.h"

/* ---- a decommission ------------------------------------------------------ */

/* Three nodes holding their keys of ring_three; n2, which the leave
 * tests decommission, returned. */
static struct fnode *leave_fixture(struct fake *f)
{
    fake_init(f, 3);
    f->ring = ring_three();
    for (int i = 0; i < 3; i++)
        whole_range(f->n[i].st);
    for (int i = 0; i < NKEYS; i++)
        put_key(by_name(f, owner(f->ring, i))->st, i);
    struct fnode *l = &f->n[2];
    l->state.first_token = tok2[0];
    l->state.ntokens = 3;
    return l;
}

START_TEST(leave_pushes_ranges)
{
    struct fake f;
    struct fnode *l = leave_fixture(&f);
    char *text = NULL;
    size_t len = 0;
    int rc = stream_leave_begin(l->s, &text, &len);
    ck_assert_msg(rc == 0, "%s", text);
    free(text);
    ck_assert(l->state.leaving);
    ck_assert_int_eq(l->last_announce, STREAM_ANNOUNCE_LEAVING);
    ck_assert(stream_leave_running(l->s));
    f.pending = ring_two(); /* what gossip brings every node */
    f.now += 2000;
    stream_tick(l->s);
    ck_assert(logged(l, "event=leave.planned node=n2 ranges=3 "));
    pump(&f);
    int moved = 0;
    for (int i = 0; i < NKEYS; i++) {
        if (strcmp(owner(f.ring, i), "n2") != 0)
            continue;
        moved++;
        struct fnode *gain = by_name(&f, owner(f.pending, i));
        ck_assert_msg(has_key(gain->st, i), "key %d not on %s", i, gain->name);
    }
    ck_assert_int_gt(moved, 0);
    struct stream_stats st;
    stream_stats_get(l->s, &st);
    ck_assert_uint_eq(st.out_keys, (uint64_t)moved);
    ck_assert_int_eq(l->last_announce, STREAM_ANNOUNCE_LEFT);
    ck_assert(l->state.left);
    ck_assert(!l->state.leaving);
    ck_assert(logged(l, "event=leave.left"));
    /* it lingers, gossiping LEFT, then stops */
    stream_tick(l->s);
    ck_assert(!l->self_stopped);
    f.now += 3000;
    stream_tick(l->s);
    ck_assert(l->self_stopped);
    fake_free(&f);
}
END_TEST

/* Every range out, the leave waits for the hints the node keeps for a
 * peer (they would leave with it): netstats says so, and once no hint has
 * been replayed for stall_warning_s the leave is reported stalled with
 * that as its reason, as a push that keeps failing is. Fewer hints is
 * progress; none left, it leaves. Regression (leave_waits_for_hints_and_
 * says_so): a leave waiting for hints never stalled, so a decommission
 * that waited minutes (seen in test_history under make test's load) left
 * no word in the log. */
START_TEST(leave_waits_for_hints_and_says_so)
{
    struct fake f;
    struct fnode *l = leave_fixture(&f);
    l->hints = 5;
    snprintf(l->hints_for, sizeof(l->hints_for), "n0");
    char *text = NULL;
    size_t len = 0;
    int rc = stream_leave_begin(l->s, &text, &len);
    ck_assert_msg(rc == 0, "%s", text);
    free(text);
    f.pending = ring_two();
    f.now += 2000;
    stream_tick(l->s);
    pump(&f);
    ck_assert(!l->state.left); /* every range out, the hints are not */
    char *t = text_of(l->s);
    ck_assert_msg(strstr(t, "waiting for the 5 hints it keeps for n0"), "%s",
                  t);
    ck_assert_ptr_null(strstr(t, STREAM_STALL_PREFIX));
    free(t);
    for (int k = 0; k < 29; k++) {
        f.now += 1000;
        stream_tick(l->s);
        pump(&f);
    }
    ck_assert(!logged(l, "event=leave.stalled"));
    f.now += 1000;
    stream_tick(l->s);
    pump(&f);
    ck_assert(logged(l, "event=leave.stalled"));
    ck_assert(logged(l, "why=\"waiting for the 5 hints it keeps for n0 to "
                        "be replayed\""));
    t = text_of(l->s);
    const char *line = strstr(t, STREAM_STALL_PREFIX);
    ck_assert_msg(line && strstr(line, "waiting for the 5 hints"), "%s", t);
    free(t);
    l->hints = 2; /* some replayed: progress */
    f.now += 1000;
    stream_tick(l->s);
    pump(&f);
    ck_assert(logged(l, "event=leave.progressing"));
    ck_assert(!l->state.left);
    l->hints = 0;
    f.now += 1000;
    stream_tick(l->s);
    pump(&f);
    ck_assert(l->state.left);
    ck_assert(logged(l, "event=leave.left"));
    fake_free(&f);
}
END_TEST

/* ---- cleanup ------------------------------------------------------------- */

START_TEST(cleanup_drops_unowned)
{
    struct fake f;
    fake_init(&f, 3);
    f.ring = ring_three();
    struct fnode *c = &f.n[1];
    /* n1 holds the ranges of the ring before n2 joined (and more) */
    const struct store_range held[] = {{UINT64_MAX, 4 * Q},
                                       {4 * Q, 8 * Q},
                                       {8 * Q, 12 * Q},
                                       {12 * Q, UINT64_MAX}};
    for (size_t i = 0; i < 4; i++)
        ck_assert_int_eq(store_range_create(c->st, held[i]), 0);
    for (int i = 0; i < NKEYS / 4; i++)
        put_key(c->st, i);
    char *text = NULL;
    size_t len = 0;
    int rc = stream_cleanup_begin(c->s, &text, &len);
    ck_assert_msg(rc == 0, "%s", text);
    free(text);
    pump(&f);
    ck_assert(logged(c, "event=cleanup.done dropped=2 rewritten=1 "));
    /* n1 replicates (7Q, 8Q] and (12Q, max] by the ring of three */
    struct store_range *have = NULL;
    size_t nhave = 0;
    ck_assert_int_eq(store_range_list(&have, &nhave, c->st), 0);
    ck_assert_uint_eq(nhave, 2);
    for (size_t i = 0; i < nhave; i++)
        ck_assert((have[i].start == 7 * Q && have[i].end == 8 * Q) ||
                  (have[i].start == 12 * Q && have[i].end == UINT64_MAX));
    free(have);
    for (int i = 0; i < NKEYS / 4; i++)
        ck_assert_msg(has_key(c->st, i) ==
                          (strcmp(owner(f.ring, i), "n1") == 0),
                      "key %d", i);
    char *t = text_of(c->s);
    ck_assert_ptr_nonnull(strstr(t, "Cleanup: done"));
    free(t);
    /* refused while a node joins */
    ring_free(f.ring);
    const char *names[] = {"n0", "n1", "n2"};
    const uint64_t *tok[] = {tok0, tok1, tok2};
    size_t nt[] = {2, 2, 3};
    struct ring_member m[3];
    for (int i = 0; i < 3; i++)
        m[i] = (struct ring_member){.name = names[i],
                                    .tokens = tok[i],
                                    .ntokens = nt[i],
                                    .state = i == 2 ? RING_BOOT : RING_NORMAL};
    struct ring_config rc3 = {.members = m,
                              .nmembers = 3,
                              .repl = {.strategy = RING_SIMPLE, .rf = 1}};
    ck_assert_int_eq(ring_new(&f.ring, &rc3), 0);
    rc = stream_cleanup_begin(c->s, &text, &len);
    ck_assert_int_eq(rc, RK_EBADREQ);
    ck_assert_ptr_nonnull(strstr(text, "joining or leaving"));
    free(text);
    fake_free(&f);
}
END_TEST

/* ---- the throughput budget ----------------------------------------------- */

START_TEST(budget_accounting)
{
    struct fake f;
    fake_init(&f, 1);
    stream *s = f.n[0].s;
    /* no cap: never refused, nothing counted */
    for (int i = 0; i < 100; i++)
        ck_assert(stream_budget_take(s));
    stream_free(s);
    struct stream_config c = cfg_for("n0");
    c.stream_throughput_mb = 1; /* 1 MiB/s: a chunk a second */
    node_stream(&f.n[0], &c);
    s = f.n[0].s;
    ck_assert(stream_budget_take(s));  /* a full second's worth: 1 MiB */
    ck_assert(stream_budget_take(s));  /* 0 left: may overspend once */
    ck_assert(!stream_budget_take(s)); /* -1 MiB */
    stream_budget_settle(s, 0);        /* that chunk failed: all back */
    ck_assert(stream_budget_take(s));
    ck_assert(!stream_budget_take(s));
    stream_budget_settle(s, STREAM_CHUNK / 2); /* half a chunk moved */
    ck_assert(!stream_budget_take(s));         /* -0.5 MiB */
    f.now += 499; /* refills 0.499 MiB: still short */
    ck_assert(!stream_budget_take(s));
    f.now += 2;
    ck_assert(stream_budget_take(s));
    ck_assert(!stream_budget_take(s));
    /* idle for long: the budget holds one second's worth, no more */
    f.now += 60000;
    ck_assert(stream_budget_take(s));
    ck_assert(stream_budget_take(s));
    ck_assert(!stream_budget_take(s));
    fake_free(&f);
}
END_TEST

static Suite *suite(void)
{
    Suite *s = suite_create("stream");
    TCase *tc = tcase_create("leave");
    tcase_add_test(tc, leave_pushes_ranges);
    tcase_add_test(tc, leave_waits_for_hints_and_says_so);
    suite_add_tcase(s, tc);
    tc = tcase_create("cleanup");
    tcase_add_test(tc, cleanup_drops_unowned);
    suite_add_tcase(s, tc);
    tc = tcase_create("budget");
    tcase_add_test(tc, budget_accounting);
    suite_add_tcase(s, tc);
    return s;
}

int main(void)
{
    SRunner *sr = srunner_create(suite());
    srunner_run_all(sr, CK_NORMAL);
    int failed = srunner_ntests_failed(sr);
    srunner_free(sr);
    return failed ? EXIT_FAILURE : EXIT_SUCCESS;
}
