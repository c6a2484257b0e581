/*
 * check_coord_plan.c - the coordinator's level planning
 * (coord/coord_plan.h) in-process: each level by example and then
 * properties on random replica sets against a brute-force definition.
 * The request state machine that follows a plan is check_coord.c's.
 *
 * The reference is written apart from coord_plan.c: a level is a list of
 * scopes (every replica, the replicas of one DC by name), each needing a
 * count computed from the ring's replicas in it plus one per live pending
 * replica in it that has not dropped out; a set of answers meets the level
 * when it holds that many in every scope; the level is available when the
 * set of live replicas would meet it. Random cases come from a seeded PRNG
 * (splitmix64); a failing assertion prints the seed and the case's index.
 */
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <check.h>

#include "common/rk.h"
#include "coord/coord_plan.h"
#include "ring/ring.h"
#include "tests/unit/coord_spec.h"
#include "tests/unit/rng.h"

/* ---- helpers ------------------------------------------------------------ */

static uint32_t rng_below(uint64_t *s, uint32_t n)
{
    return n ? (uint32_t)(rng_next(s) % n) : 0;
}

static const enum coord_cl levels[] = {
    COORD_CL_ONE,        COORD_CL_TWO,       COORD_CL_QUORUM,
    COORD_CL_ALL,        COORD_CL_LOCAL_ONE, COORD_CL_LOCAL_QUORUM,
    COORD_CL_EACH_QUORUM};
#define NLEVELS (sizeof(levels) / sizeof(levels[0]))

static int plan(struct coord_plan *p, const struct tcase *t, enum coord_cl cl)
{
    return coord_plan_make(p, cl, t->local, t->rep, t->nrep, t->nnat);
}

/* Plans t at level cl into *p: the call returns rc and needs `need`
 * answers in all. */
static void plan_is(struct coord_plan *p,
                    const struct tcase *t,
                    enum coord_cl cl,
                    int rc,
                    uint32_t need)
{
    ck_assert_int_eq(plan(p, t, cl), rc);
    ck_assert_uint_eq(p->need, need);
}

/* ---- the brute-force definition ----------------------------------------- */

/* A scope: the replicas of DC dc (NULL: every replica), and how many of
 * them must answer. */
struct scope {
    const char *dc;
    uint32_t need;
};

static bool in(const struct scope *s, const char *dc)
{
    return !s->dc || strcmp(s->dc, dc) == 0;
}

/* The ring's replicas in DC dc (NULL: all). */
static uint32_t natural(const struct tcase *t, const char *dc)
{
    uint32_t k = 0;
    for (uint32_t i = 0; i < t->nnat; i++)
        k += !dc || strcmp(t->rep[i].dc, dc) == 0;
    return k;
}

/* The scopes of level cl; dropped: pending replicas that no longer count.
 * Returns how many. */
static int scopes(struct scope *out,
                  const struct tcase *t,
                  enum coord_cl cl,
                  uint32_t dropped)
{
    int n = 0;
    switch (cl) {
    case COORD_CL_ONE:
        out[n++] = (struct scope){NULL, 1};
        break;
    case COORD_CL_TWO:
        out[n++] = (struct scope){NULL, 2};
        break;
    case COORD_CL_QUORUM:
        out[n++] = (struct scope){NULL, natural(t, NULL) / 2 + 1};
        break;
    case COORD_CL_ALL:
        out[n++] =
            (struct scope){NULL, natural(t, NULL) ? natural(t, NULL) : 1};
        break;
    case COORD_CL_LOCAL_ONE:
        out[n++] = (struct scope){t->local, 1};
        break;
    case COORD_CL_LOCAL_QUORUM:
        out[n++] = (struct scope){t->local, natural(t, t->local) / 2 + 1};
        break;
    case COORD_CL_EACH_QUORUM:
        for (uint32_t i = 0; i < t->nnat; i++) {
            bool seen = false;
            for (int k = 0; k < n; k++)
                seen |= strcmp(out[k].dc, t->rep[i].dc) == 0;
            if (!seen)
                out[n++] = (struct scope){t->rep[i].dc,
                                          natural(t, t->rep[i].dc) / 2 + 1};
        }
        if (n == 0)
            out[n++] = (struct scope){t->local, 1};
        break;
    default:
        return 0;
    }
    for (uint32_t i = t->nnat; i < t->nrep; i++)
        for (int k = 0; k < n; k++)
            if (t->rep[i].up && !((dropped >> i) & 1) &&
                in(&out[k], t->rep[i].dc))
                out[k].need++;
    return n;
}

/* Does the set of replicas `set` (a bit per replica) meet level cl? */
static bool
meets(const struct tcase *t, enum coord_cl cl, uint32_t set, uint32_t dropped)
{
    struct scope sc[RING_MAX_REPLICAS + 1];
    int n = scopes(sc, t, cl, dropped);
    for (int k = 0; k < n; k++) {
        uint32_t have = 0;
        for (uint32_t i = 0; i < t->nrep; i++)
            have += ((set >> i) & 1) && in(&sc[k], t->rep[i].dc);
        if (have < sc[k].need)
            return false;
    }
    return true;
}

static uint32_t up_set(const struct tcase *t)
{
    uint32_t s = 0;
    for (uint32_t i = 0; i < t->nrep; i++)
        if (t->rep[i].up)
            s |= 1u << i;
    return s;
}

static uint32_t popcount(uint32_t x)
{
    uint32_t k = 0;
    for (; x; x &= x - 1)
        k++;
    return k;
}

static const char *dcnames[] = {"dc1", "dc2", "dc3", "dc4"};

/* A random case: 1-4 DCs, RF 0-4 in each (at most 12 in all), up to 3
 * pending replicas (when pending), each up or down, the order shuffled,
 * at most one of them this node (in the local DC), the local DC one of
 * them or, now and then, one that holds no replica. */
static void random_case(struct tcase *t, uint64_t *s, bool pending)
{
    memset(t, 0, sizeof(*t));
    uint32_t ndc = 1 + rng_below(s, 4);
    t->local = rng_below(s, 6) == 0 ? "dc9" : dcnames[rng_below(s, ndc)];
    for (uint32_t d = 0; d < ndc; d++) {
        uint32_t rf = rng_below(s, 5);
        for (uint32_t k = 0; k < rf && t->nrep < 12; k++)
            add(t, dcnames[d], rng_below(s, 4) != 0, false);
    }
    /* the ring's in a random order (as a ring walk mixes the DCs) */
    for (uint32_t i = t->nrep; i > 1; i--) {
        uint32_t j = rng_below(s, i);
        struct coord_plan_replica x = t->rep[i - 1];
        t->rep[i - 1] = t->rep[j];
        t->rep[j] = x;
    }
    t->nnat = t->nrep;
    uint32_t np = pending ? rng_below(s, 4) : 0;
    for (uint32_t k = 0; k < np; k++)
        add(t, dcnames[rng_below(s, ndc)], rng_below(s, 3) != 0, false);
    uint32_t cand[RING_MAX_REPLICAS], nc = 0;
    for (uint32_t i = 0; i < t->nrep; i++)
        if (strcmp(t->rep[i].dc, t->local) == 0)
            cand[nc++] = i;
    if (nc && rng_below(s, 2))
        t->rep[cand[rng_below(s, nc)]].self = true;
}

/* ---- levels by example -------------------------------------------------- */

START_TEST(single_dc_levels)
{
    struct tcase t;
    mk(&t, "dc1", "dc1* dc1 dc1");
    static const struct {
        enum coord_cl cl;
        uint32_t need;
        int dc;
    } want[] = {{COORD_CL_ONE, 1, -1},       {COORD_CL_TWO, 2, -1},
                {COORD_CL_QUORUM, 2, -1},    {COORD_CL_ALL, 3, -1},
                {COORD_CL_LOCAL_ONE, 1, 0},  {COORD_CL_LOCAL_QUORUM, 2, 0},
                {COORD_CL_EACH_QUORUM, 2, 0}};
    for (size_t k = 0; k < sizeof(want) / sizeof(want[0]); k++) {
        struct coord_plan p;
        ck_assert_int_eq(plan(&p, &t, want[k].cl), 0);
        ck_assert_int_eq(p.ncons, 1);
        ck_assert_uint_eq(p.need, want[k].need);
        ck_assert_uint_eq(p.cons[0].need, want[k].need);
        ck_assert_int_eq(p.cons[0].dc, want[k].dc);
        ck_assert_uint_eq(p.acks, 0);
    }
}
END_TEST

START_TEST(quorum_of_even_and_small_rf)
{
    static const uint32_t rf[] = {1, 2, 3, 4, 5, 6};
    static const uint32_t q[] = {1, 2, 2, 3, 3, 4};
    for (size_t k = 0; k < 6; k++) {
        struct tcase t = {.local = "dc1"};
        for (uint32_t i = 0; i < rf[k]; i++)
            add(&t, "dc1", true, false);
        t.nnat = t.nrep;
        struct coord_plan p;
        ck_assert_int_eq(plan(&p, &t, COORD_CL_QUORUM), 0);
        ck_assert_uint_eq(p.need, q[k]);
        ck_assert_int_eq(plan(&p, &t, COORD_CL_ALL), 0);
        ck_assert_uint_eq(p.need, rf[k]);
    }
    /* no replica at all: ALL needs one, and cannot have it */
    struct tcase t = {.local = "dc1"};
    struct coord_plan p;
    plan_is(&p, &t, COORD_CL_ALL, RK_EUNAVAILABLE, 1);
}
END_TEST

START_TEST(two_dcs_local_and_each)
{
    /* dc1:3 and dc2:2, interleaved as a ring walk gives them; this node
     * in dc2: its DC is DC 0, dc1 is DC 1 */
    struct tcase t;
    mk(&t, "dc2", "dc1 dc2* dc1 dc2 dc1");
    struct coord_plan p;
    ck_assert_int_eq(plan(&p, &t, COORD_CL_LOCAL_QUORUM), 0);
    ck_assert_int_eq(p.ncons, 1);
    ck_assert_int_eq(p.cons[0].dc, 0);
    ck_assert_uint_eq(p.need, 2);
    ck_assert_int_eq(p.rep[0].dc, 1);
    ck_assert_int_eq(p.rep[1].dc, 0);
    plan_is(&p, &t, COORD_CL_QUORUM, 0, 3);
    ck_assert_int_eq(plan(&p, &t, COORD_CL_EACH_QUORUM), 0);
    ck_assert_int_eq(p.ncons, 2);
    ck_assert_uint_eq(p.need, 4); /* 2 of dc2's 2, 2 of dc1's 3 */
    /* answers from dc1 alone do not meet EACH_QUORUM, nor LOCAL_ONE */
    coord_plan_answered(&p, 0, true);
    coord_plan_answered(&p, 2, true);
    coord_plan_answered(&p, 4, true);
    ck_assert(!coord_plan_satisfied(&p));
    coord_plan_answered(&p, 1, true);
    ck_assert(!coord_plan_satisfied(&p));
    coord_plan_answered(&p, 3, true);
    ck_assert(coord_plan_satisfied(&p));
    ck_assert_uint_eq(p.acks, 5);
    ck_assert_int_eq(plan(&p, &t, COORD_CL_LOCAL_ONE), 0);
    coord_plan_answered(&p, 0, true);
    ck_assert(!coord_plan_satisfied(&p));
    coord_plan_answered(&p, 3, true);
    ck_assert(coord_plan_satisfied(&p));
}
END_TEST

START_TEST(local_dc_without_replicas)
{
    struct tcase t;
    mk(&t, "dc3", "dc1 dc2");
    struct coord_plan p;
    ck_assert_int_eq(plan(&p, &t, COORD_CL_LOCAL_ONE), RK_EUNAVAILABLE);
    ck_assert_uint_eq(p.acks, 2); /* the live replicas, for the message */
    ck_assert_int_eq(plan(&p, &t, COORD_CL_LOCAL_QUORUM), RK_EUNAVAILABLE);
    ck_assert_int_eq(plan(&p, &t, COORD_CL_EACH_QUORUM), 0);
    ck_assert_int_eq(p.ncons, 2);
    ck_assert_uint_eq(p.need, 2);
    ck_assert_int_eq(plan(&p, &t, COORD_CL_ONE), 0);
}
END_TEST

START_TEST(unavailable_up_front)
{
    struct tcase t;
    mk(&t, "dc1", "dc1* dc1- dc1-");
    struct coord_plan p;
    ck_assert_int_eq(plan(&p, &t, COORD_CL_ONE), 0);
    ck_assert_int_eq(plan(&p, &t, COORD_CL_TWO), RK_EUNAVAILABLE);
    ck_assert_uint_eq(p.acks, 1);
    ck_assert_int_eq(plan(&p, &t, COORD_CL_QUORUM), RK_EUNAVAILABLE);
    ck_assert_int_eq(plan(&p, &t, COORD_CL_ALL), RK_EUNAVAILABLE);
    t.rep[1].up = true;
    ck_assert_int_eq(plan(&p, &t, COORD_CL_QUORUM), 0);
    ck_assert_int_eq(plan(&p, &t, COORD_CL_ALL), RK_EUNAVAILABLE);
}
END_TEST

START_TEST(bad_input)
{
    struct tcase t;
    mk(&t, "dc1", "dc1");
    struct coord_plan p;
    ck_assert_int_eq(plan(&p, &t, (enum coord_cl)0), RK_EBADREQ);
    ck_assert_int_eq(plan(&p, &t, (enum coord_cl)99), RK_EBADREQ);
    ck_assert_int_eq(coord_plan_make(&p, COORD_CL_ONE, "dc1", t.rep, 1, 2),
                     RK_EBADREQ);
    ck_assert_int_eq(coord_plan_make(&p, COORD_CL_ONE, "dc1", t.rep,
                                     RING_MAX_REPLICAS + 1, 1),
                     RK_EBADREQ);
    ck_assert_uint_eq(p.need, 0);
    ck_assert_uint_eq(p.nrep, 0);
}
END_TEST

START_TEST(pending_replicas)
{
    /* RF 3 in dc1, a joiner in dc1 and one in dc2 */
    struct tcase t;
    mk(&t, "dc1", "dc1* dc1 dc1 | dc1 dc2");
    struct coord_plan p;
    plan_is(&p, &t, COORD_CL_QUORUM, 0, 4);       /* 2 + both joiners: any DC */
    plan_is(&p, &t, COORD_CL_LOCAL_QUORUM, 0, 3); /* 2 + dc1's joiner */
    ck_assert_int_eq(plan(&p, &t, COORD_CL_EACH_QUORUM), 0);
    ck_assert_int_eq(p.ncons, 1); /* dc2 holds no ring replica */
    ck_assert_uint_eq(p.need, 3);
    /* a joiner that is down is not waited for */
    t.rep[3].up = false;
    plan_is(&p, &t, COORD_CL_QUORUM, 0, 3);
    /* nor one that turns out not ready: it drops out */
    coord_plan_answered(&p, 0, true);
    coord_plan_answered(&p, 1, true);
    ck_assert(!coord_plan_satisfied(&p));
    coord_plan_answered(&p, 4, false);
    coord_plan_drop_pending(&p, 4);
    ck_assert_uint_eq(p.need, 2);
    ck_assert(coord_plan_satisfied(&p));
    /* ALL with an up joiner: every ring replica and the joiner */
    t.rep[3].up = true;
    plan_is(&p, &t, COORD_CL_ALL, 0, 5);
    t.rep[1].up = false;
    ck_assert_int_eq(plan(&p, &t, COORD_CL_ALL), RK_EUNAVAILABLE);
}
END_TEST

START_TEST(outcome_waits_then_fails)
{
    struct tcase t;
    mk(&t, "dc1", "dc1 dc1 dc1");
    struct coord_plan p;
    ck_assert_int_eq(plan(&p, &t, COORD_CL_QUORUM), 0);
    ck_assert_int_eq(coord_plan_outcome(&p), COORD_PLAN_FAILED); /* none */
    for (uint32_t i = 0; i < 3; i++)
        coord_plan_asked(&p, i);
    ck_assert_int_eq(coord_plan_outcome(&p), COORD_PLAN_WAITING);
    coord_plan_answered(&p, 0, true);
    coord_plan_answered(&p, 1, false);
    ck_assert_int_eq(coord_plan_outcome(&p), COORD_PLAN_WAITING);
    ck_assert_uint_eq(p.acks, 1);
    coord_plan_answered(&p, 2, false);
    ck_assert_int_eq(coord_plan_outcome(&p), COORD_PLAN_FAILED);
    ck_assert_int_eq(plan(&p, &t, COORD_CL_QUORUM), 0);
    for (uint32_t i = 0; i < 3; i++)
        coord_plan_asked(&p, i);
    coord_plan_answered(&p, 2, true);
    coord_plan_answered(&p, 0, true);
    ck_assert_int_eq(coord_plan_outcome(&p), COORD_PLAN_SATISFIED);
}
END_TEST

/* ---- the order of a read ------------------------------------------------ */

/* Ask (as read_fill does) until the plan names no more; each replica
 * asked stays outstanding. Returns how many were asked; order[] gets
 * them. */
static uint32_t
fill(struct coord_plan *p, const bool *quiet, uint32_t *order, uint32_t *passed)
{
    struct coord_plan_cursor c = COORD_PLAN_CURSOR_INIT;
    uint32_t n = 0;
    for (int i; (i = coord_plan_read_next(p, &c, quiet, passed)) >= 0;) {
        coord_plan_asked(p, (uint32_t)i);
        order[n++] = (uint32_t)i;
    }
    return n;
}

START_TEST(read_asks_self_first_then_in_order)
{
    struct tcase t;
    mk(&t, "dc1", "dc1 dc1- dc1 dc1*");
    struct coord_plan p;
    uint32_t order[RING_MAX_REPLICAS], passed = 0;
    ck_assert_int_eq(plan(&p, &t, COORD_CL_ONE), 0);
    ck_assert_uint_eq(fill(&p, NULL, order, &passed), 1);
    ck_assert_uint_eq(order[0], 3);
    ck_assert_int_eq(plan(&p, &t, COORD_CL_QUORUM), 0);
    ck_assert_uint_eq(fill(&p, NULL, order, &passed), 3);
    ck_assert_uint_eq(order[0], 3);
    ck_assert_uint_eq(order[1], 0);
    ck_assert_uint_eq(order[2], 2);
    /* replica 0 is silent: asked after 2 */
    bool quiet[RING_MAX_REPLICAS] = {true};
    ck_assert_int_eq(plan(&p, &t, COORD_CL_TWO), 0);
    ck_assert_uint_eq(fill(&p, quiet, order, &passed), 2);
    ck_assert_uint_eq(order[0], 3);
    ck_assert_uint_eq(order[1], 2);
    ck_assert(p.rep[0].passed_over);
    ck_assert_uint_eq(passed, 1);
    /* ... and asked when the others do not suffice */
    ck_assert_int_eq(plan(&p, &t, COORD_CL_ALL), RK_EUNAVAILABLE);
    t.rep[1].up = true;
    passed = 0;
    ck_assert_int_eq(plan(&p, &t, COORD_CL_QUORUM), 0);
    ck_assert_uint_eq(fill(&p, quiet, order, &passed), 3);
    ck_assert_uint_eq(order[0], 3);
    ck_assert_uint_eq(order[1], 1);
    ck_assert_uint_eq(order[2], 2);
    ck_assert_uint_eq(passed, 1);
}
END_TEST

START_TEST(read_asks_next_after_failure_and_hedge)
{
    struct tcase t;
    mk(&t, "dc1", "dc1 dc1 dc1 dc1");
    struct coord_plan p;
    uint32_t order[RING_MAX_REPLICAS];
    ck_assert_int_eq(plan(&p, &t, COORD_CL_QUORUM), 0); /* 3 of 4 */
    ck_assert_uint_eq(fill(&p, NULL, order, NULL), 3);
    ck_assert(!p.rep[3].asked);
    /* one fails: the fourth is asked */
    coord_plan_answered(&p, 1, false);
    ck_assert(coord_plan_read_helps(&p, 3));
    ck_assert_uint_eq(fill(&p, NULL, order, NULL), 1);
    ck_assert_uint_eq(order[0], 3);
    ck_assert_int_eq(coord_plan_outcome(&p), COORD_PLAN_WAITING);
    /* nothing left to ask: a further failure fails the read */
    coord_plan_answered(&p, 0, false);
    ck_assert_uint_eq(fill(&p, NULL, order, NULL), 0);
    coord_plan_answered(&p, 2, true);
    coord_plan_answered(&p, 3, true);
    ck_assert_int_eq(coord_plan_outcome(&p), COORD_PLAN_FAILED);
    /* hedge: the silent ones are no longer counted on */
    ck_assert_int_eq(plan(&p, &t, COORD_CL_ONE), 0);
    ck_assert_uint_eq(fill(&p, NULL, order, NULL), 1);
    ck_assert_uint_eq(coord_plan_hedge(&p), 1);
    ck_assert(p.rep[0].slow);
    ck_assert_uint_eq(fill(&p, NULL, order, NULL), 1);
    ck_assert_uint_eq(order[0], 1);
    ck_assert_uint_eq(coord_plan_asked_count(&p), 2);
    /* a slow replica still counts if it answers */
    coord_plan_answered(&p, 0, true);
    ck_assert_int_eq(coord_plan_outcome(&p), COORD_PLAN_SATISFIED);
}
END_TEST

/* ---- properties against the brute-force definition ---------------------- */

#define CASES 3000

START_TEST(plan_matches_brute_force)
{
    uint64_t seed = 0x5eedc00d + (uint64_t)_i;
    uint64_t s = seed;
    for (int k = 0; k < CASES; k++) {
        struct tcase t;
        random_case(&t, &s, true);
        enum coord_cl cl = levels[rng_below(&s, NLEVELS)];
        struct coord_plan p;
        int rc = plan(&p, &t, cl);
        bool avail = meets(&t, cl, up_set(&t), 0);
        ck_assert_msg(rc == (avail ? 0 : RK_EUNAVAILABLE),
                      "seed %llx case %d: rc %d, available %d",
                      (unsigned long long)seed, k, rc, avail);
        struct scope sc[RING_MAX_REPLICAS + 1];
        int nsc = scopes(sc, &t, cl, 0);
        uint32_t need = 0;
        for (int c = 0; c < nsc; c++)
            need += sc[c].need;
        ck_assert_msg(p.need == need, "seed %llx case %d: need %u, want %u",
                      (unsigned long long)seed, k, p.need, need);
        if (rc < 0) {
            ck_assert_uint_eq(p.acks, popcount(up_set(&t)));
            continue;
        }
        /* a write: every live replica asked, answers in a random order,
         * some failing, pending ones now and then dropping out */
        uint32_t perm[RING_MAX_REPLICAS], n = 0;
        for (uint32_t i = 0; i < t.nrep; i++)
            if (t.rep[i].up) {
                perm[n++] = i;
                coord_plan_asked(&p, i);
            }
        for (uint32_t i = n; i > 1; i--) {
            uint32_t j = rng_below(&s, i);
            uint32_t x = perm[i - 1];
            perm[i - 1] = perm[j];
            perm[j] = x;
        }
        uint32_t acked = 0, dropped = 0;
        for (uint32_t a = 0; a < n; a++) {
            uint32_t i = perm[a];
            bool ok = rng_below(&s, 5) != 0;
            coord_plan_answered(&p, i, ok);
            if (ok)
                acked |= 1u << i;
            else if (i >= t.nnat && rng_below(&s, 2)) {
                coord_plan_drop_pending(&p, i);
                dropped |= 1u << i;
            }
            bool want = meets(&t, cl, acked, dropped);
            ck_assert_msg(coord_plan_satisfied(&p) == want,
                          "seed %llx case %d answer %u: satisfied %d, "
                          "want %d",
                          (unsigned long long)seed, k, a,
                          coord_plan_satisfied(&p), want);
            enum coord_plan_outcome o = coord_plan_outcome(&p);
            enum coord_plan_outcome wo = want        ? COORD_PLAN_SATISFIED
                                         : a + 1 < n ? COORD_PLAN_WAITING
                                                     : COORD_PLAN_FAILED;
            ck_assert_msg(o == wo, "seed %llx case %d answer %u: %d, want %d",
                          (unsigned long long)seed, k, a, o, wo);
            ck_assert_uint_eq(p.acks, popcount(acked));
        }
    }
}
END_TEST

/* Counted on in scope sc: answered and counting, or asked, outstanding
 * and not slow. And how many live replicas in it have not been asked. */
static void tally(const struct coord_plan *p,
                  const struct tcase *t,
                  const struct scope *sc,
                  uint32_t *counted,
                  uint32_t *unasked)
{
    *counted = *unasked = 0;
    for (uint32_t i = 0; i < t->nrep; i++) {
        if (!in(sc, t->rep[i].dc))
            continue;
        const struct coord_plan_rep *r = &p->rep[i];
        if (r->answered ? r->ok : r->asked && !r->slow)
            (*counted)++;
        if (t->rep[i].up && !r->asked)
            (*unasked)++;
    }
}

START_TEST(read_order_matches_brute_force)
{
    uint64_t seed = 0x0dde4 + (uint64_t)_i;
    uint64_t s = seed;
    for (int k = 0; k < CASES; k++) {
        struct tcase t;
        random_case(&t, &s, false);
        enum coord_cl cl = levels[rng_below(&s, NLEVELS)];
        struct coord_plan p;
        if (plan(&p, &t, cl) < 0)
            continue;
        bool quiet[RING_MAX_REPLICAS];
        for (uint32_t i = 0; i < t.nrep; i++)
            quiet[i] = !t.rep[i].self && rng_below(&s, 4) == 0;
        struct scope sc[RING_MAX_REPLICAS + 1];
        int nsc = scopes(sc, &t, cl, 0);
        /* the first asking, nothing answered yet: exactly enough in every
         * scope, and in the order: this node, peers not silent in ring
         * order, then the silent ones in ring order */
        uint32_t order[RING_MAX_REPLICAS], passed = 0;
        uint32_t n = fill(&p, quiet, order, &passed);
        uint32_t want = 0;
        for (int c = 0; c < nsc; c++) {
            uint32_t live = 0;
            for (uint32_t i = 0; i < t.nrep; i++)
                live += t.rep[i].up && in(&sc[c], t.rep[i].dc);
            want += sc[c].need < live ? sc[c].need : live;
        }
        ck_assert_msg(n == want, "seed %llx case %d: asked %u, want %u",
                      (unsigned long long)seed, k, n, want);
        for (uint32_t a = 0; a < n; a++) {
            uint32_t i = order[a];
            ck_assert_msg(t.rep[i].up, "seed %llx case %d: asked a down one",
                          (unsigned long long)seed, k);
            if (a == 0)
                continue;
            uint32_t h = order[a - 1];
            int rank_h = t.rep[h].self ? 0 : quiet[h] ? 2 : 1;
            int rank_i = t.rep[i].self ? 0 : quiet[i] ? 2 : 1;
            ck_assert_msg(rank_h < rank_i || (rank_h == rank_i && h < i),
                          "seed %llx case %d: %u asked after %u",
                          (unsigned long long)seed, k, i, h);
        }
        /* then answers, failures and hedges at random: after each asking
         * every scope is either counted on in full or has no live
         * replica left to ask, and no down replica is ever asked */
        for (int round = 0; round < 6; round++) {
            uint32_t ev = rng_below(&s, 3);
            if (ev == 2) {
                coord_plan_hedge(&p);
            } else {
                for (uint32_t i = 0; i < t.nrep; i++)
                    if (p.rep[i].asked && !p.rep[i].answered &&
                        rng_below(&s, 2))
                        coord_plan_answered(&p, i, ev == 0);
            }
            fill(&p, quiet, order, &passed);
            for (int c = 0; c < nsc; c++) {
                uint32_t counted, unasked;
                tally(&p, &t, &sc[c], &counted, &unasked);
                ck_assert_msg(counted >= sc[c].need || unasked == 0,
                              "seed %llx case %d round %d: scope %d "
                              "counted %u of %u with %u to ask",
                              (unsigned long long)seed, k, round, c, counted,
                              sc[c].need, unasked);
            }
            for (uint32_t i = 0; i < t.nrep; i++)
                ck_assert(t.rep[i].up || !p.rep[i].asked);
        }
    }
}
END_TEST

static Suite *coord_plan_suite(void)
{
    Suite *s = suite_create("coord_plan");
    TCase *tc = tcase_create("levels");
    tcase_add_test(tc, single_dc_levels);
    tcase_add_test(tc, quorum_of_even_and_small_rf);
    tcase_add_test(tc, two_dcs_local_and_each);
    tcase_add_test(tc, local_dc_without_replicas);
    tcase_add_test(tc, unavailable_up_front);
    tcase_add_test(tc, bad_input);
    tcase_add_test(tc, pending_replicas);
    tcase_add_test(tc, outcome_waits_then_fails);
    suite_add_tcase(s, tc);
    tc = tcase_create("read_order");
    tcase_add_test(tc, read_asks_self_first_then_in_order);
    tcase_add_test(tc, read_asks_next_after_failure_and_hedge);
    suite_add_tcase(s, tc);
    tc = tcase_create("properties");
    tcase_add_loop_test(tc, plan_matches_brute_force, 0, 4);
    tcase_add_loop_test(tc, read_order_matches_brute_force, 0, 4);
    suite_add_tcase(s, tc);
    return s;
}

int main(void)
{
    SRunner *sr = srunner_create(coord_plan_suite());
    srunner_run_all(sr, CK_NORMAL);
    int failed = srunner_ntests_failed(sr);
    srunner_free(sr);
    return failed ? 1 : 0;
}
