/*
 * check_node_ring_view.c - the ring view's pure helpers (node/ring_view.h):
 * the SCHEMA value a node gossips (written, and read back by its peers:
 * replication, ports, the join=wait flag), the ring state of a gossiped
 * STATUS, the config's replication as the ring's, the token collision
 * check that makes one of two nodes with a shared token choose again, and
 * the placement of a node replacing a dead one (replace: X).
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <check.h>

#include "common/rk.h"
#include "gossip/gossip.h"
#include "node/config.h"
#include "node/ring_view.h"
#include "ring/ring.h"

static struct rk_slice str(const char *s)
{
    return RK_SLICE(s, strlen(s));
}

/* slice s equals the C string want */
static void ck_slice(struct rk_slice s, const char *want)
{
    ck_assert_uint_eq(s.len, strlen(want));
    if (s.len)
        ck_assert(memcmp(s.p, want, s.len) == 0);
}

/* c replicates to ndcs DCs: names[i] with rfs[i] replicas */
static void repl_set(struct node_config *c,
                     int ndcs,
                     const char *const *names,
                     const int *rfs)
{
    c->ndcs = ndcs;
    for (int i = 0; i < ndcs; i++) {
        snprintf(c->replication[i].name, sizeof(c->replication[i].name), "%s",
                 names[i]);
        c->replication[i].rf = rfs[i];
    }
}

/* ---- SCHEMA written ---- */

START_TEST(format_simple_strategy)
{
    struct node_config c = NODE_CONFIG_INIT;
    repl_set(&c, 1, (const char *[]){"*"}, (int[]){2});
    c.internode_port = 7101;
    c.client_port = 7480;
    char v[GOSSIP_VALUE_MAX];
    int l = node__schema_format(v, sizeof(v), &c, 0, false, NULL);
    ck_assert_str_eq(v, "repl=*:2 internode=7101 client=7480");
    ck_assert_int_eq(l, (int)strlen(v));
}
END_TEST

START_TEST(format_orders_dcs_by_name)
{
    /* the order a config lists its DCs in places nothing, and peers
     * compare this text (regression: repl_order_mismatch) */
    struct node_config a = NODE_CONFIG_INIT, b = NODE_CONFIG_INIT;
    repl_set(&a, 3, (const char *[]){"west", "east", "north"},
             (int[]){2, 3, 1});
    repl_set(&b, 3, (const char *[]){"north", "east", "west"},
             (int[]){1, 3, 2});
    char va[GOSSIP_VALUE_MAX], vb[GOSSIP_VALUE_MAX];
    node__schema_format(va, sizeof(va), &a, 0, false, NULL);
    node__schema_format(vb, sizeof(vb), &b, 0, false, NULL);
    ck_assert_str_eq(va, "repl=east:3,north:1,west:2 internode=7001 "
                         "client=7380");
    ck_assert_str_eq(va, vb);
}
END_TEST

START_TEST(format_parked_reads_back)
{
    struct node_config c = NODE_CONFIG_INIT;
    c.internode_port = 7201;
    c.client_port = 7580;
    char v[GOSSIP_VALUE_MAX];
    int l = node__schema_format(v, sizeof(v), &c, 0, true, NULL);
    ck_assert_str_eq(v, "repl=dc1:3 internode=7201 client=7580 join=wait");
    struct rk_slice s = RK_SLICE(v, (size_t)l);
    ck_slice(node__schema_repl(s), "dc1:3");
    ck_assert_uint_eq(node__schema_port(s, "internode", 1), 7201);
    ck_assert_uint_eq(node__schema_port(s, "client", 1), 7580);
    ck_assert(node__schema_flag(s, "join=wait"));

    l = node__schema_format(v, sizeof(v), &c, 0, false, NULL);
    s = RK_SLICE(v, (size_t)l);
    ck_assert(!node__schema_flag(s, "join=wait"));
    ck_assert_uint_eq(node__schema_port(s, "client", 1), 7580);
}
END_TEST

/* ---- SCHEMA read ---- */

START_TEST(repl_part)
{
    ck_slice(node__schema_repl(str("repl=dc1:3,dc2:2 internode=7001")),
             "dc1:3,dc2:2");
    ck_slice(node__schema_repl(str("repl=dc1:3")), "dc1:3");
    ck_slice(node__schema_repl(str("repl=")), "");
    /* absent: not first, or no SCHEMA at all */
    ck_slice(node__schema_repl(str("internode=7001 repl=dc1:3")), "");
    ck_slice(node__schema_repl(str("rep")), "");
    ck_slice(node__schema_repl(RK_SLICE(NULL, 0)), "");
    /* borrowed: it points into the value */
    const char *v = "repl=x:1 client=1";
    ck_assert_ptr_eq(node__schema_repl(str(v)).p, (const uint8_t *)v + 5);
}
END_TEST

START_TEST(flag_is_a_whole_word)
{
    ck_assert(node__schema_flag(str("repl=a:1 join=wait"), "join=wait"));
    ck_assert(
        node__schema_flag(str("repl=a:1 join=wait client=1"), "join=wait"));
    ck_assert(!node__schema_flag(str("repl=a:1 join=waiting"), "join=wait"));
    ck_assert(!node__schema_flag(str("repl=a:1 xjoin=wait"), "join=wait"));
    /* the first word is the replication, never a flag */
    ck_assert(!node__schema_flag(str("join=wait"), "join=wait"));
    ck_assert(!node__schema_flag(RK_SLICE(NULL, 0), "join=wait"));
}
END_TEST

START_TEST(port_or_default)
{
    struct rk_slice s = str("repl=a:1 internode=7001 client=7380");
    ck_assert_uint_eq(node__schema_port(s, "internode", 9), 7001);
    ck_assert_uint_eq(node__schema_port(s, "client", 9), 7380);
    ck_assert_uint_eq(node__schema_port(s, "resp", 9), 9);
    /* a key's name must be whole: "client" is not in "xclient=" */
    ck_assert_uint_eq(node__schema_port(str("repl=a:1 xclient=5"), "client", 9),
                      9);
    /* outside 1..65535, or no number */
    ck_assert_uint_eq(node__schema_port(str("repl= client=0"), "client", 9), 9);
    ck_assert_uint_eq(node__schema_port(str("repl= client=65536"), "client", 9),
                      9);
    ck_assert_uint_eq(node__schema_port(str("repl= client=65535"), "client", 9),
                      65535);
    ck_assert_uint_eq(node__schema_port(str("repl= client=-3"), "client", 9),
                      9);
    ck_assert_uint_eq(node__schema_port(str("repl= client=x"), "client", 9), 9);
    ck_assert_uint_eq(node__schema_port(RK_SLICE(NULL, 0), "client", 9), 9);
}
END_TEST

START_TEST(long_schema_is_cut_not_overrun)
{
    /* a value longer than gossip carries is read up to GOSSIP_VALUE_MAX */
    size_t len = GOSSIP_VALUE_MAX + 100;
    char *v = malloc(len);
    ck_assert_ptr_nonnull(v);
    memset(v, 'x', len);
    memcpy(v, "repl=a:1 client=7", 17);
    memcpy(v + GOSSIP_VALUE_MAX - 16, " internode=4321 ", 16);
    memcpy(v + GOSSIP_VALUE_MAX + 10, " join=wait ", 11);
    struct rk_slice s = RK_SLICE(v, len);
    ck_assert_uint_eq(node__schema_port(s, "internode", 9), 4321);
    ck_assert(!node__schema_flag(s, "join=wait"));
    free(v);
}
END_TEST

/* ---- ring ---- */

START_TEST(state_of_status)
{
    ck_assert_int_eq(node__ring_state_of(GOSSIP_STATUS_NORMAL), RING_NORMAL);
    ck_assert_int_eq(node__ring_state_of(GOSSIP_STATUS_LEAVING), RING_LEAVING);
    ck_assert_int_eq(node__ring_state_of(GOSSIP_STATUS_LEFT), RING_LEFT);
    ck_assert_int_eq(node__ring_state_of(GOSSIP_STATUS_REMOVED), RING_REMOVED);
    ck_assert_int_eq(node__ring_state_of(GOSSIP_STATUS_BOOT), RING_BOOT);
    ck_assert_int_eq(node__ring_state_of(GOSSIP_STATUS_UNKNOWN), RING_BOOT);
}
END_TEST

START_TEST(repl_fill_simple)
{
    struct node_config c = NODE_CONFIG_INIT;
    repl_set(&c, 1, (const char *[]){"*"}, (int[]){5});
    struct ring_config rc = {0};
    struct ring_dc_rf rdc[NODE_CONFIG_MAX_DCS];
    node__ring_repl_fill(&rc, rdc, &c);
    ck_assert_int_eq(rc.repl.strategy, RING_SIMPLE);
    ck_assert_uint_eq(rc.repl.rf, 5);
    ck_assert_uint_eq(rc.repl.ndcs, 0);
}
END_TEST

START_TEST(repl_fill_per_dc)
{
    struct node_config c = NODE_CONFIG_INIT;
    repl_set(&c, 2, (const char *[]){"east", "west"}, (int[]){3, 2});
    struct ring_config rc = {0};
    struct ring_dc_rf rdc[NODE_CONFIG_MAX_DCS];
    node__ring_repl_fill(&rc, rdc, &c);
    ck_assert_int_eq(rc.repl.strategy, RING_NTS);
    ck_assert_uint_eq(rc.repl.ndcs, 2);
    ck_assert_ptr_eq(rc.repl.dcs, rdc);
    ck_assert_str_eq(rdc[0].dc, "east");
    ck_assert_uint_eq(rdc[0].rf, 3);
    ck_assert_str_eq(rdc[1].dc, "west");
    ck_assert_uint_eq(rdc[1].rf, 2);
    /* one DC that is not "*" is per DC too */
    c.ndcs = 1;
    node__ring_repl_fill(&rc, rdc, &c);
    ck_assert_int_eq(rc.repl.strategy, RING_NTS);
    ck_assert_uint_eq(rc.repl.ndcs, 1);
}
END_TEST

START_TEST(collide_with_smaller_placed_name)
{
    const uint64_t mine[] = {900, 40, 7}; /* unsorted: as allocated */
    uint64_t ta[] = {1, 2, 40}, tb[] = {7, 8};
    struct ring_member m[] = {
        {.name = "a", .tokens = ta, .ntokens = 3, .state = RING_NORMAL},
        {.name = "z", .tokens = tb, .ntokens = 2, .state = RING_NORMAL},
    };
    /* "m" shares 40 with "a" (smaller name): it chooses again */
    ck_assert(node__tokens_collide(mine, 3, "m", m, 2));
    /* "0" sorts first: the other ones choose again, not it */
    ck_assert(!node__tokens_collide(mine, 3, "0", m, 2));
    /* against "z" only: "m" is the smaller name */
    ck_assert(!node__tokens_collide(mine, 3, "m", m + 1, 1));
    ck_assert(node__tokens_collide(mine, 3, "zz", m + 1, 1));
    /* its own entry (the same name) never collides */
    ck_assert(!node__tokens_collide(mine, 3, "a", m, 1));
}
END_TEST

START_TEST(collide_only_with_placed_members)
{
    const uint64_t mine[] = {5};
    uint64_t t[] = {5};
    struct ring_member m = {.name = "a", .tokens = t, .ntokens = 1};
    const enum ring_node_state unplaced[] = {RING_BOOT, RING_LEFT,
                                             RING_REMOVED};
    for (size_t i = 0; i < 3; i++) {
        m.state = unplaced[i];
        ck_assert(!node__tokens_collide(mine, 1, "b", &m, 1));
    }
    m.state = RING_LEAVING; /* placed until its ranges have moved */
    ck_assert(node__tokens_collide(mine, 1, "b", &m, 1));
    m.state = RING_NORMAL;
    ck_assert(node__tokens_collide(mine, 1, "b", &m, 1));
    /* no tokens of its own, or no members: nothing to collide */
    ck_assert(!node__tokens_collide(NULL, 0, "b", &m, 1));
    ck_assert(!node__tokens_collide(mine, 1, "b", NULL, 0));
}
END_TEST

/* ---- replacing a dead node ---- */

START_TEST(format_replacing_reads_back)
{
    struct node_config c = NODE_CONFIG_INIT;
    char v[GOSSIP_VALUE_MAX], name[GOSSIP_NAME_MAX + 1];
    int l = node__schema_format(v, sizeof(v), &c, 0, true, "n4");
    ck_assert_str_eq(v, "repl=dc1:3 internode=7001 client=7380 join=wait "
                        "replacing=n4");
    ck_assert_int_eq(l, (int)strlen(v));
    node__schema_replacing(name, sizeof(name), str(v));
    ck_assert_str_eq(name, "n4");
    ck_assert(node__schema_flag(str(v), "join=wait"));
    ck_assert_uint_eq(node__schema_port(str(v), "client", 1), 7380);
    /* none, or an empty name: "" */
    node__schema_format(v, sizeof(v), &c, 0, false, "");
    node__schema_replacing(name, sizeof(name), str(v));
    ck_assert_str_eq(name, "");
    node__schema_replacing(name, sizeof(name), str("repl=dc1:3 replacing="));
    ck_assert_str_eq(name, "");
    /* a name longer than out holds: none, not a cut one */
    node__schema_replacing(name, 3, str("repl=dc1:3 replacing=n44 client=1"));
    ck_assert_str_eq(name, "");
    node__schema_replacing(name, sizeof(name),
                           str("repl=dc1:3 replacing=n44 client=1"));
    ck_assert_str_eq(name, "n44");
}
END_TEST

#define RT 8 /* tokens per member */

struct replace_case {
    struct ring_member m[5];
    uint64_t toks[5][RT];
    const char *replacing[5];
};

/* Four NORMAL members n1..n4 of RT tokens each and n5, BOOT, announcing
 * n4's tokens and replacing n4; toks holds their tokens. */
static void replace_members(struct replace_case *rc)
{
    struct ring_member *m = rc->m;
    uint64_t(*toks)[RT] = rc->toks;
    const char **replacing = rc->replacing;
    static const char *const names[] = {"n1", "n2", "n3", "n4", "n5"};
    uint64_t x = 0x9e3779b97f4a7c15u;
    for (int i = 0; i < 4; i++)
        for (int k = 0; k < RT; k++) {
            x ^= x << 13, x ^= x >> 7, x ^= x << 17;
            toks[i][k] = x;
        }
    memcpy(toks[4], toks[3], sizeof(toks[3]));
    for (int i = 0; i < 5; i++) {
        m[i] = (struct ring_member){.name = names[i],
                                    .tokens = toks[i],
                                    .ntokens = RT,
                                    .state = RING_NORMAL};
        replacing[i] = "";
    }
    m[4].state = RING_BOOT; /* in the ring: not placed */
    m[4].ntokens = 0;
    replacing[4] = "n4";
}

static ring *ring_of(const struct ring_member *m, size_t nm)
{
    struct ring_config rc = {.members = m, .nmembers = nm};
    rc.repl.strategy = RING_SIMPLE;
    rc.repl.rf = 3;
    ring *r = NULL;
    ck_assert_int_eq(ring_new(&r, &rc), 0);
    return r;
}

static const char *name_at(const ring *r, uint32_t idx)
{
    struct ring_node_info ni;
    ck_assert_int_eq(ring_node_get(r, &ni, idx), 0);
    return ni.name;
}

START_TEST(pending_puts_replacement_in_dead_nodes_place)
{
    struct replace_case rc;
    replace_members(&rc);
    ring *from = ring_of(rc.m, 5);
    size_t pend[5] = {0, 0, 0, 0, RT};
    ck_assert_uint_eq(node__ring_pending_members(rc.m, 5, pend, rc.replacing),
                      1);
    ck_assert_int_eq(rc.m[3].state, RING_LEFT);
    ck_assert_int_eq(rc.m[4].state, RING_NORMAL);
    ck_assert_uint_eq(rc.m[4].ntokens, RT);
    ring *to = ring_of(rc.m, 5);
    /* every arc: the same replicas, n5 where n4 was */
    for (int i = 0; i < 4; i++)
        for (int k = 0; k < RT; k++) {
            uint32_t a[3], b[3];
            ck_assert_uint_eq(ring_replicas(from, rc.toks[i][k], a, 3), 3);
            ck_assert_uint_eq(ring_replicas(to, rc.toks[i][k], b, 3), 3);
            for (int j = 0; j < 3; j++) {
                const char *was = name_at(from, a[j]);
                ck_assert_str_eq(name_at(to, b[j]),
                                 strcmp(was, "n4") == 0 ? "n5" : was);
            }
        }
    /* the movement: n5 gains exactly n4's ranges, which n4 alone loses */
    struct ring_move *mv = NULL;
    size_t nmv = 0;
    ck_assert_int_eq(ring_plan_new(&mv, &nmv, from, to), 0);
    ck_assert_uint_gt(nmv, 0);
    size_t n4_ranges =
        ring_node_ranges(from, ring_node_find(from, "n4"), NULL, 0);
    uint64_t covered = 0;
    for (size_t i = 0; i < nmv; i++) {
        ck_assert_str_eq(name_at(to, mv[i].gain), "n5");
        ck_assert_uint_eq(mv[i].nlose, 1);
        ck_assert_str_eq(name_at(from, mv[i].lose[0]), "n4");
        covered += mv[i].range.end - mv[i].range.start;
    }
    struct ring_range rr[4 * RT];
    ck_assert_uint_le(n4_ranges, 4 * RT);
    ring_node_ranges(from, ring_node_find(from, "n4"), rr, n4_ranges);
    uint64_t held = 0;
    for (size_t i = 0; i < n4_ranges; i++)
        held += rr[i].end - rr[i].start;
    ck_assert_uint_eq(covered, held);
    ring_plan_free(mv);
    ring_free(from);
    ring_free(to);
}
END_TEST

START_TEST(pending_without_replace_is_a_join)
{
    struct replace_case rc;
    replace_members(&rc);
    /* a name that is not a member, and tokens that are not n4's: n4 stays
     * (then ring_new refuses the shared tokens, as for any collision) */
    size_t pend[5] = {0, 0, 0, 0, RT};
    rc.replacing[4] = "n9";
    ck_assert_uint_eq(node__ring_pending_members(rc.m, 5, pend, rc.replacing),
                      0);
    ck_assert_int_eq(rc.m[3].state, RING_NORMAL);
    replace_members(&rc);
    rc.toks[4][0]++;
    ck_assert_uint_eq(node__ring_pending_members(rc.m, 5, pend, rc.replacing),
                      0);
    ck_assert_int_eq(rc.m[3].state, RING_NORMAL);
    /* a LEAVING member is out of the pending ring as before */
    replace_members(&rc);
    size_t leave[5] = {(size_t)-1, 0, 0, 0, 0};
    ck_assert_uint_eq(node__ring_pending_members(rc.m, 5, leave, rc.replacing),
                      0);
    ck_assert_int_eq(rc.m[0].state, RING_LEFT);
    ck_assert_int_eq(rc.m[3].state, RING_NORMAL);
}
END_TEST

START_TEST(finished_replace_takes_dead_node_out)
{
    struct replace_case rc;
    replace_members(&rc);
    /* n5 NORMAL with n4's tokens, n4's REMOVED not heard yet */
    rc.m[4].state = RING_NORMAL;
    rc.m[4].ntokens = RT;
    node__ring_replaced(rc.m, 5, rc.replacing);
    ck_assert_int_eq(rc.m[3].state, RING_REMOVED);
    ring *r = ring_of(rc.m, 5);
    ck_assert_uint_eq(ring_token_count(r), 4 * RT);
    for (int k = 0; k < RT; k++) {
        uint32_t a[3];
        ring_replicas(r, rc.toks[3][k], a, 3);
        ck_assert_str_eq(name_at(r, a[0]), "n5");
    }
    ring_free(r);
    /* still BOOT (replacing): n4 stays in the ring */
    replace_members(&rc);
    node__ring_replaced(rc.m, 5, rc.replacing);
    ck_assert_int_eq(rc.m[3].state, RING_NORMAL);
    /* a node named n4 with other tokens (the name used again) stays */
    replace_members(&rc);
    rc.m[4].state = RING_NORMAL;
    rc.m[4].ntokens = RT;
    rc.toks[3][2]++;
    node__ring_replaced(rc.m, 5, rc.replacing);
    ck_assert_int_eq(rc.m[3].state, RING_NORMAL);
}
END_TEST

static Suite *ring_view_suite(void)
{
    Suite *s = suite_create("node_ring_view");
    TCase *tc = tcase_create("schema_format");
    tcase_add_test(tc, format_simple_strategy);
    tcase_add_test(tc, format_orders_dcs_by_name);
    tcase_add_test(tc, format_parked_reads_back);
    suite_add_tcase(s, tc);
    tc = tcase_create("schema_read");
    tcase_add_test(tc, repl_part);
    tcase_add_test(tc, flag_is_a_whole_word);
    tcase_add_test(tc, port_or_default);
    tcase_add_test(tc, long_schema_is_cut_not_overrun);
    suite_add_tcase(s, tc);
    tc = tcase_create("ring");
    tcase_add_test(tc, state_of_status);
    tcase_add_test(tc, repl_fill_simple);
    tcase_add_test(tc, repl_fill_per_dc);
    suite_add_tcase(s, tc);
    tc = tcase_create("tokens_collide");
    tcase_add_test(tc, collide_with_smaller_placed_name);
    tcase_add_test(tc, collide_only_with_placed_members);
    suite_add_tcase(s, tc);
    tc = tcase_create("replace");
    tcase_add_test(tc, format_replacing_reads_back);
    tcase_add_test(tc, pending_puts_replacement_in_dead_nodes_place);
    tcase_add_test(tc, pending_without_replace_is_a_join);
    tcase_add_test(tc, finished_replace_takes_dead_node_out);
    suite_add_tcase(s, tc);
    return s;
}

int main(void)
{
    SRunner *sr = srunner_create(ring_view_suite());
    srunner_run_all(sr, CK_NORMAL);
    int failed = srunner_ntests_failed(sr);
    srunner_free(sr);
    return failed ? EXIT_FAILURE : EXIT_SUCCESS;
}
