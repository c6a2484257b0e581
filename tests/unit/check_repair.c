/*
 * check_repair.c - repair sessions (repair/repair.h) run in one process on
 * the fake world of repair_world.h: replicas whose data differ exchange
 * exactly their differences, over every arc or only a range; a replica
 * busy, refusing, DOWN or dead midway; a ring change or a stop under a
 * session. The schedule, the serve side and the repair after a join are
 * in check_repair_sched.c.
 *
 * The expectations are computed independently of repair/: which leaves
 * differ by testing each differing key's token against the leaf plan,
 * which version of a key wins by store_record_cmp.
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
#include "repair/repair.h"
#include "ring/ring.h"
#include "storage/store.h"
#include "tests/unit/repair_world.h"
#include "wire/rpc_msg.h"

/* ---- expectations, brute force --------------------------------------------
 */

struct expect {
    size_t cmps, differed;
    uint64_t leaves, leaves_diff, keys_in, bytes_in, keys_out, bytes_out;
    char lines[4096]; /* the repair.differ lines a's log must hold */
    size_t len;
};

static size_t kv_len(const struct rec *r)
{
    struct store_record sr;
    ck_assert_int_eq(store_record_decode(&sr, r->bytes, r->blen), 0);
    return r->klen + sr.value.len;
}

/* What a repair of a by b over every arc must do: per arc (the ring's, in
 * order) the leaves that hold a key whose records differ, the runs they
 * make (checked in a's log), what it pulls (b's records in those leaves)
 * and pushes (a's keys that win over b's or that b lacks). */
static void expect_two(struct expect *e, struct fake *a, struct fake *b)
{
    memset(e, 0, sizeof(*e));
    size_t na = ring_token_count(W.ring);
    for (size_t i = 0; i < na; i++) {
        struct ring_range arc = ring_arc_range(W.ring, i);
        unsigned depth =
            merkle_depth_choose(arc, (struct ring_range){0, 0}, a->range_keys);
        size_t nl = (size_t)1 << depth;
        bool *diff = calloc(nl, sizeof(*diff));
        ck_assert_ptr_nonnull(diff);
        struct fake *sides[2] = {a, b};
        for (int s = 0; s < 2; s++) {
            struct fake *x = sides[s], *y = sides[1 - s];
            for (size_t k = 0; k < x->nrec; k++) {
                struct rec *r = &x->recs[k];
                if (!ring_range_contains(arc, r->token))
                    continue;
                struct rec *o = rec_find(y, RK_SLICE(r->key, r->klen));
                if (o && o->blen == r->blen &&
                    memcmp(o->bytes, r->bytes, r->blen) == 0)
                    continue;
                uint64_t leaf;
                ck_assert_int_eq(merkle_leaf_of(&leaf, arc, depth, r->token),
                                 0);
                diff[leaf] = true;
            }
        }
        size_t nd = 0, runs = 0;
        for (size_t l = 0; l < nl; l++) {
            nd += diff[l];
            runs += diff[l] && (l == 0 || !diff[l - 1]);
        }
        e->cmps++;
        e->leaves += nl;
        e->leaves_diff += nd;
        if (nd) {
            e->differed++;
            int l =
                snprintf(e->lines + e->len, sizeof(e->lines) - e->len,
                         "repair.differ range=(%llu,%llu] peer=%s "
                         "leaves=%zu differing=%zu runs=%zu\n",
                         (unsigned long long)arc.start,
                         (unsigned long long)arc.end, b->name, nl, nd, runs);
            ck_assert(l > 0 && (size_t)l < sizeof(e->lines) - e->len);
            e->len += (size_t)l;
        }
        for (size_t k = 0; k < b->nrec; k++) {
            struct rec *r = &b->recs[k];
            uint64_t leaf;
            if (ring_range_contains(arc, r->token) &&
                merkle_leaf_of(&leaf, arc, depth, r->token) == 0 &&
                diff[leaf]) {
                e->keys_in++;
                e->bytes_in += kv_len(r);
            }
        }
        for (size_t k = 0; k < a->nrec; k++) {
            struct rec *r = &a->recs[k];
            if (!ring_range_contains(arc, r->token))
                continue;
            struct rec *o = rec_find(b, RK_SLICE(r->key, r->klen));
            if (!o || rec_cmp(r, o) > 0) {
                e->keys_out++;
                e->bytes_out += kv_len(r);
            }
        }
        free(diff);
    }
}

/* Each of e's repair.differ lines is in f's log, and no other. */
static void check_differ_lines(const struct expect *e, const struct fake *f)
{
    size_t n = 0;
    for (const char *p = f->log; (p = strstr(p, "repair.differ ")); p++)
        n++;
    ck_assert_uint_eq(n, e->differed);
    char lines[sizeof(e->lines)];
    memcpy(lines, e->lines, sizeof(lines));
    for (char *l = strtok(lines, "\n"); l; l = strtok(NULL, "\n"))
        ck_assert_msg(strstr(f->log, l), "not in the log: %s\nlog:\n%s", l,
                      f->log);
}

/* The same members under a new epoch: the ring changes under a session. */
static void ring_bump(void)
{
    ring *r = NULL;
    struct ring_config cfg = {W.members,
                              W.nrep,
                              {RING_SIMPLE, (unsigned)W.nrep, NULL, 0},
                              ring_epoch(W.ring) + 1};
    ck_assert_int_eq(ring_new(&r, &cfg), 0);
    ring_free(W.ring);
    W.ring = r;
}

/* ---- tests -------------------------------------------------------------- */

START_TEST(two_replicas_exchange_exactly_the_differences)
{
    static struct fake want;
    two_diverged(42, &want);
    struct fake *a = &W.rep[0], *b = &W.rep[1];
    ck_assert(!same_data(a, b));

    static struct expect e;
    expect_two(&e, a, b);
    ck_assert_uint_eq(e.cmps, 8); /* 2 x 4 tokens, one other replica */
    ck_assert_uint_ge(e.differed, 2);

    char text[2048], want_text[512];
    repair_run(a, NULL, text, sizeof(text));
    check_differ_lines(&e, a);
    snprintf(want_text, sizeof(want_text),
             "Repair: done in %.1f s: %zu comparisons, %zu differed (%llu of "
             "%llu leaves); %llu keys (%llu B) pulled, %llu keys (%llu B) "
             "pushed.\n",
             (double)(W.now - a->begun_ms) / 1000, e.cmps, e.differed,
             (unsigned long long)e.leaves_diff, (unsigned long long)e.leaves,
             (unsigned long long)e.keys_in, (unsigned long long)e.bytes_in,
             (unsigned long long)e.keys_out, (unsigned long long)e.bytes_out);
    ck_assert_str_eq(text, want_text);
    struct repair_stats st;
    repair_stats_get(&st, a->r);
    ck_assert_uint_eq(st.keys_in, e.keys_in);
    ck_assert_uint_eq(st.bytes_in, e.bytes_in);
    ck_assert_uint_eq(st.keys_out, e.keys_out);
    ck_assert_uint_eq(st.bytes_out, e.bytes_out);
    /* both hold the newest version of every key, deletes included */
    ck_assert(same_data(a, &want));
    ck_assert(same_data(b, &want));
    ck_assert_int_eq(a->bad_frames + b->bad_frames, 0);
    world_free();
}
END_TEST

/* A third replica: a repair of n1 against n2 and n3 brings n1 everything;
 * a second makes every replica the same (the first compared n2 before n1
 * had n3's); a third finds nothing left to do. */
START_TEST(three_replicas_converge)
{
    world_new(3, 7);
    common_data();
    diverge_two();
    struct fake *a = &W.rep[0], *b = &W.rep[1], *c = &W.rep[2];
    char k[16];
    put_keys(c, 120, 125, 1, 170, "newer-c"); /* newer on n3 */
    put_keys(c, 300, 304, 1, 90, "c-only");   /* only on n3 */
    key_of(k, 11); /* n3 deleted what n1 rewrote, later */
    put(c, k, 155, NULL);
    static struct fake ab, want;
    winners(&ab, a, b);
    winners(&want, &ab, c);

    char text[2048];
    repair_run(a, NULL, text, sizeof(text));
    ck_assert_msg(strstr(text, "Repair: done in"), "%s", text);
    ck_assert_ptr_null(strstr(text, "failed"));
    /* n1 has everything; n2 and n3 what n1 had when it compared with
     * each (the replicas of an arc are compared in ring order) */
    ck_assert(same_data(a, &want));
    ck_assert(!same_data(b, &want) || !same_data(c, &want));

    repair_run(a, NULL, text, sizeof(text));
    ck_assert(same_data(a, &want));
    ck_assert(same_data(b, &want));
    ck_assert(same_data(c, &want));

    repair_run(a, NULL, text, sizeof(text));
    ck_assert_msg(strstr(text, ": 24 comparisons, 0 differed (0 of "), "%s",
                  text);
    ck_assert_msg(strstr(text, "; 0 keys (0 B) pulled, 0 keys (0 B) pushed."),
                  "%s", text);
    world_free();
}
END_TEST

/* `ringkv repair START,END`: only the pieces of the arcs inside the range
 * are compared; differences outside it stay. */
START_TEST(only_repairs_inside_the_range)
{
    static struct fake a0, b0, want;
    two_diverged(99, &want);
    struct fake *a = &W.rep[0], *b = &W.rep[1];
    /* a range from inside one arc to inside another, wrapping or not */
    struct ring_range arc1 = ring_arc_range(W.ring, 1);
    struct ring_range arc5 = ring_arc_range(W.ring, 5);
    struct ring_range only = {arc1.start + (arc1.end - arc1.start) / 2,
                              arc5.start + (arc5.end - arc5.start) / 3};
    size_t pieces = 1;
    for (size_t i = 0; i < ring_token_count(W.ring); i++) {
        struct ring_range ai = ring_arc_range(W.ring, i);
        pieces += ring_range_contains(only, ai.end) && ai.end != only.end;
    }
    a0 = *a;
    b0 = *b;
    size_t inside = 0, outside = 0;
    for (size_t k = 0; k < want.nrec; k++) {
        struct rk_slice key = RK_SLICE(want.recs[k].key, want.recs[k].klen);
        struct rec *x = rec_find(a, key), *y = rec_find(b, key);
        bool differs = !x || !y || rec_cmp(x, y) != 0;
        if (differs && ring_range_contains(only, want.recs[k].token))
            inside++;
        else if (differs)
            outside++;
    }
    ck_assert_uint_gt(inside, 0);
    ck_assert_uint_gt(outside, 0);

    char text[2048], cmps[64];
    repair_run(a, &only, text, sizeof(text));
    snprintf(cmps, sizeof(cmps), ": %zu comparisons, ", pieces);
    ck_assert_msg(strstr(text, cmps), "want %s in %s", cmps, text);
    for (size_t k = 0; k < want.nrec; k++) {
        const struct rec *w = &want.recs[k];
        struct rk_slice key = RK_SLICE(w->key, w->klen);
        struct rec *x = rec_find(a, key), *y = rec_find(b, key);
        if (ring_range_contains(only, w->token)) { /* the newest on both */
            ck_assert(x && rec_cmp(x, w) == 0);
            ck_assert(y && rec_cmp(y, w) == 0);
            continue;
        }
        struct rec *x0 = rec_find(&a0, key), *y0 = rec_find(&b0, key);
        ck_assert((x == NULL) == (x0 == NULL)); /* as they were */
        ck_assert((y == NULL) == (y0 == NULL));
        ck_assert(!x || rec_cmp(x, x0) == 0);
        ck_assert(!y || rec_cmp(y, y0) == 0);
    }
    ck_assert_uint_eq(a->nrec + b->nrec,
                      a0.nrec + b0.nrec + inside -
                          (inside - (a->nrec - a0.nrec) - (b->nrec - b0.nrec)));
    world_free();
}
END_TEST

/* n3 answers its leaves, then its scans stay busy (STREAM answered
 * OVERLOADED: asked again every 200 ms, each reported to the stall
 * tracker, stalled after STALL_MS) and then it stops answering while
 * gossip still has it UP (timeouts: each step tried 4 times, 3 asked
 * again): the session goes on with the other comparisons and ends "done
 * with failures", naming the first. */
START_TEST(peer_failing_midway_ends_with_failures)
{
    world_new(3, 5);
    common_data();
    struct fake *a = &W.rep[0], *b = &W.rep[1], *c = &W.rep[2];
    char k[16];
    put_keys(c, 0, 200, 9, 200, "c"); /* n3 newer all around the ring */
    put_keys(b, 50, 54, 1, 200, "b"); /* n2 newer */
    c->overloaded_pulls = 30;
    c->then_dies = true;
    W.tick_ms = 1000;
    W.next_tick = W.now + 1000;

    char text[2048];
    repair_run(a, NULL, text, sizeof(text));
    ck_assert_msg(strstr(text, "Repair: done with failures in "), "%s", text);
    char first[128];
    snprintf(first, sizeof(first), "failed, the first: pull with n3: %s.\n",
             rk_strerror(RK_ETIMEOUT));
    ck_assert_msg(strstr(text, first), "want %s in %s", first, text);
    /* 30 OVERLOADED, then 3 timeouts asked again for each of the 12
     * comparisons with n3 that failed */
    ck_assert_msg(strstr(text, "; 12 failed, the first"), "%s", text);
    ck_assert_msg(strstr(text, "; 66 steps asked again (a replica busy"), "%s",
                  text);
    ck_assert_msg(strstr(a->log, "repair.compare_fail range="), "%s", a->log);
    ck_assert_msg(strstr(a->log, "peer=n3 phase=pulling why=\"pull\""), "%s",
                  a->log);
    ck_assert_ptr_null(strstr(a->log, "peer=n2 phase"));
    /* the tracker heard of each refusal and found the session stalled */
    ck_assert_int_eq(a->stall_fails, 66);
    ck_assert_str_eq(a->stall_peer, "with n3");
    ck_assert(a->was_stalled);
    ck_assert_msg(strstr(a->text_stalled, "Repair: running for "), "%s",
                  a->text_stalled);
    ck_assert_msg(strstr(a->text_stalled,
                         "; waiting: n3 answered OVERLOADED, asked again "
                         "every 200 ms ("),
                  "%s", a->text_stalled);
    char stalled[128];
    snprintf(stalled, sizeof(stalled), "Stalled: pulling with n3: %s\n",
             rk_strerror(RK_EOVERLOADED));
    ck_assert_msg(strstr(a->text_stalled, stalled), "%s", a->text_stalled);
    /* n1 and n2 agree: their comparisons did not depend on n3 */
    ck_assert(same_data(a, b));
    char v[32];
    key_of(k, 51);
    struct rec *r = rec_find(a, RK_SLICE(k, strlen(k)));
    ck_assert_ptr_nonnull(r);
    struct rpc_record rr = to_rpc(r);
    snprintf(v, sizeof(v), "%.*s", (int)rr.value.len, (const char *)rr.value.p);
    ck_assert_str_eq(v, "b");
    world_free();
}
END_TEST

/* Regression peer_refusing_once_is_asked_again: right after a restart a
 * replica refuses the connection (or resets it, or net/ backs off from
 * it) for a moment. Its request refused once is asked again 1 s later
 * (logged, told to the stall tracker), and the session ends "done" with
 * n3's newer values. Until 2026-12-06 that comparison failed at once and
 * one `ringkv repair --wait` in three right after a restart ended "done
 * with failures". */
START_TEST(peer_refusing_once_is_asked_again)
{
    world_new(3, 11);
    common_data();
    struct fake *a = &W.rep[0], *c = &W.rep[2];
    put_keys(c, 0, 200, 1, 200, "c"); /* n3 newer all around the ring */
    c->refusals = 1;

    char text[2048], v[32];
    uint64_t t0 = W.now;
    repair_run(a, NULL, text, sizeof(text));
    ck_assert_msg(strstr(text, "Repair: done in"), "%s", text);
    ck_assert_msg(!strstr(text, "failed"), "%s", text);
    ck_assert_msg(strstr(text, "; 1 step asked again (a replica busy, its "
                               "ring behind or not reachable for a moment)"),
                  "%s", text);
    ck_assert_int_eq(c->refused, 1);
    ck_assert_int_eq(count_of(a->log, "repair.retry "), 1);
    char want[160];
    snprintf(want, sizeof(want),
             "peer=n3 phase=comparing error=%s why=\"%s\" in_ms=1000 try=2 "
             "at_most=4",
             rk_errname(-ECONNREFUSED), rk_strerror(-ECONNREFUSED));
    ck_assert_msg(strstr(a->log, want), "want %s in %s", want, a->log);
    ck_assert_int_eq(a->stall_fails, 1);
    ck_assert_uint_ge(W.now - t0, 1000); /* it waited before asking again */
    for (int i = 0; i < 200; i++) {
        value_of(a, i, v, sizeof(v));
        ck_assert_str_eq(v, "c");
    }
    world_free();
}
END_TEST

/* A replica that refuses every time is tried 4 times a comparison (1, 2
 * and 4 s apart: netstats says so meanwhile) and each of its comparisons
 * fails: "done with failures", naming the refusal; the others go on. One
 * that gossip has DOWN is not asked at all. */
START_TEST(peer_refusing_always_fails_after_bounded_tries)
{
    world_new(3, 11);
    common_data();
    struct fake *a = &W.rep[0], *b = &W.rep[1], *c = &W.rep[2];
    put_keys(b, 0, 200, 1, 200, "b");
    c->refusals = -1;
    W.tick_ms = 500;
    W.next_tick = W.now + 500;

    char text[2048], v[32];
    repair_run(a, NULL, text, sizeof(text));
    ck_assert_msg(strstr(text, "Repair: done with failures in "), "%s", text);
    char first[128];
    snprintf(first, sizeof(first),
             "failed, the first: the replica's leaves "
             "with n3: %s.\n",
             rk_strerror(-ECONNREFUSED));
    ck_assert_msg(strstr(text, first), "want %s in %s", first, text);
    int fails = count_of(a->log, "repair.compare_fail ");
    ck_assert_int_gt(fails, 0);
    ck_assert_int_eq(count_of(a->log, "peer=n3 phase=comparing why="), fails);
    ck_assert_int_eq(c->refused, 4 * fails);
    ck_assert_int_eq(count_of(a->log, "repair.retry "), 3 * fails);
    ck_assert_int_eq(count_of(a->log, "in_ms=4000 try=4 at_most=4"), fails);
    ck_assert_ptr_null(strstr(a->log, "try=5"));
    ck_assert_msg(strstr(a->text_stalled, "; waiting: n3 could not be reached "
                                          "("),
                  "%s", a->text_stalled);
    for (int i = 0; i < 200; i++) { /* n2's comparisons were made */
        value_of(a, i, v, sizeof(v));
        ck_assert_str_eq(v, "b");
    }

    /* DOWN: its comparisons fail at once, nothing is asked again */
    c->down = true;
    c->refused = 0;
    repair_run(a, NULL, text, sizeof(text));
    ck_assert_msg(strstr(text, "Repair: done with failures in "), "%s", text);
    ck_assert_msg(!strstr(text, "asked again"), "%s", text);
    ck_assert_int_eq(c->refused, 0);
    world_free();
}
END_TEST

/* A ring change or a stop under a running session ends it, the
 * comparisons left counted as failed, and releases the node's stop. */
START_TEST(ring_change_or_stop_ends_the_session)
{
    world_new(3, 13);
    common_data();
    diverge_two();
    struct fake *a = &W.rep[0];
    char *t = NULL, text[2048];
    size_t len;
    ck_assert_int_eq(repair_begin(a->r, NULL, &t, &len), 0);
    free(t);
    ck_assert_int_eq(a->jobs, 1);
    run_until(W.now + 20); /* a few comparisons in */
    ck_assert(repair_running(a->r));
    ring_bump();
    run();
    ck_assert(!repair_running(a->r));
    ck_assert_int_eq(a->jobs, 0);
    text_of(a->r, text, sizeof(text));
    char why[128];
    snprintf(why, sizeof(why),
             "the first: the ring changed; run repair "
             "again: %s.\n",
             rk_strerror(RK_ESTALE));
    ck_assert_msg(strstr(text, "Repair: done with failures in"), "%s", text);
    ck_assert_msg(strstr(text, why), "want %s in %s", why, text);
    ck_assert_msg(strstr(a->log, " why=ring_changed\n"), "%s", a->log);

    ck_assert_int_eq(repair_begin(a->r, NULL, &t, &len), 0);
    free(t);
    /* a second one is refused while it runs */
    ck_assert_int_eq(repair_begin(a->r, NULL, &t, &len), RK_EBADREQ);
    ck_assert_str_eq(t, "a repair is already running on n1");
    free(t);
    run_until(W.now + 20);
    ck_assert(repair_running(a->r));
    a->stopping = true;
    run();
    ck_assert(!repair_running(a->r));
    ck_assert_int_eq(a->jobs, 0);
    text_of(a->r, text, sizeof(text));
    /* the step under way fails first ("stopping with n2"), the rest are
     * not begun */
    snprintf(why, sizeof(why), ": %s.\n", rk_strerror(RK_ECLOSED));
    ck_assert_msg(strstr(text, "failed, the first: stopping with n"), "%s",
                  text);
    ck_assert_msg(strstr(text, why), "want %s in %s", why, text);
    ck_assert_msg(strstr(a->log, " why=stopping\n"), "%s", a->log);
    world_free();
}
END_TEST

static Suite *repair_suite(void)
{
    Suite *s = suite_create("repair");
    TCase *tc = tcase_create("session");
    tcase_add_test(tc, two_replicas_exchange_exactly_the_differences);
    tcase_add_test(tc, three_replicas_converge);
    tcase_add_test(tc, only_repairs_inside_the_range);
    tcase_add_test(tc, peer_failing_midway_ends_with_failures);
    tcase_add_test(tc, peer_refusing_once_is_asked_again);
    tcase_add_test(tc, peer_refusing_always_fails_after_bounded_tries);
    tcase_add_test(tc, ring_change_or_stop_ends_the_session);
    suite_add_tcase(s, tc);
    return s;
}

int main(void)
{
    SRunner *sr = srunner_create(repair_suite());
    srunner_run_all(sr, CK_NORMAL);
    int failed = srunner_ntests_failed(sr);
    srunner_free(sr);
    return failed ? EXIT_FAILURE : EXIT_SUCCESS;
}
