/*
 * check_node_repl.c - the replication setting's pure helpers
 * (node/replication.h): parsing the command's argument, its canonical
 * text, which of two versions wins, the version of a new setting, the
 * version a gossiped SCHEMA carries (and this node's SCHEMA writing it),
 * and node.state keeping the setting and a rebuild across a restart.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <check.h>

#include "common/rk.h"
#include "node/config.h"
#include "node/replication.h"
#include "node/ring_view.h"
#include "storage/node_state.h"

static struct rk_slice str(const char *s)
{
    return RK_SLICE(s, strlen(s));
}

static char err[NODE_CONFIG_ERR];

/* ---- parsing and the canonical text ---- */

START_TEST(parse_and_format)
{
    struct node_config_dc d[NODE_CONFIG_MAX_DCS];
    int n = 0;
    char t[256];
    ck_assert_int_eq(node_repl_parse(d, &n, "dc2:3, dc1:2", err, sizeof(err)),
                     0);
    ck_assert_int_eq(n, 2);
    ck_assert_str_eq(d[0].name, "dc2");
    ck_assert_int_eq(d[0].rf, 3);
    /* by name, whatever the order given */
    node_repl_format(t, sizeof(t), d, n);
    ck_assert_str_eq(t, "dc1:2,dc2:3");
    /* one RF everywhere: "*", and it reads back */
    ck_assert_int_eq(node_repl_parse(d, &n, "3", err, sizeof(err)), 0);
    ck_assert_int_eq(n, 1);
    node_repl_format(t, sizeof(t), d, n);
    ck_assert_str_eq(t, "*:3");
    ck_assert_int_eq(node_repl_parse(d, &n, t, err, sizeof(err)), 0);
    ck_assert_str_eq(d[0].name, "*");
    ck_assert_int_eq(d[0].rf, 3);
    /* a data centre named with ':' splits at the last one */
    ck_assert_int_eq(node_repl_parse(d, &n, "us:east:2", err, sizeof(err)), 0);
    ck_assert_str_eq(d[0].name, "us:east");
    /* a short buffer cuts, never overruns */
    ck_assert_int_eq(node_repl_parse(d, &n, "dc1:3,dc2:3", err, sizeof(err)),
                     0);
    ck_assert_int_eq(node_repl_format(t, 6, d, n), 5);
    ck_assert_str_eq(t, "dc1:3");
}
END_TEST

START_TEST(parse_refuses)
{
    static const char *const bad[] = {
        "",          "dc1",   "dc1:0",
        "dc1:16",    "dc1:x", "dc1:3,dc1:2",
        "*:3,dc1:2", "0",     "a:1,b:1,c:1,d:1,e:1,f:1,g:1,h:1,i:1",
    };
    for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
        struct node_config_dc d[NODE_CONFIG_MAX_DCS];
        int n = -1;
        err[0] = '\0';
        ck_assert_msg(node_repl_parse(d, &n, bad[i], err, sizeof(err)) ==
                          RK_ECONFIG,
                      "%s accepted", bad[i]);
        ck_assert_msg(strstr(err, "replication") != NULL, "%s: %s", bad[i],
                      err);
        ck_assert_int_eq(n, -1);
    }
}
END_TEST

START_TEST(dc_rf)
{
    struct node_config_dc d[NODE_CONFIG_MAX_DCS];
    int n = 0;
    ck_assert_int_eq(node_repl_parse(d, &n, "dc1:3,dc2:2", err, sizeof(err)),
                     0);
    ck_assert_int_eq(node_config_dcs_rf(d, n, "dc2"), 2);
    ck_assert_int_eq(node_config_dcs_rf(d, n, "dc3"), 0);
    ck_assert_int_eq(node_repl_parse(d, &n, "2", err, sizeof(err)), 0);
    ck_assert_int_eq(node_config_dcs_rf(d, n, "anything"), 2);
}
END_TEST

/* ---- versions ---- */

START_TEST(higher_version_wins)
{
    ck_assert(node_repl_supersedes(2, str("dc1:2"), 1, str("dc1:3")));
    ck_assert(!node_repl_supersedes(1, str("dc1:3"), 2, str("dc1:2")));
    /* a set over a config file's setting */
    ck_assert(node_repl_supersedes(1, str("dc1:2"), 0, str("dc1:3")));
    ck_assert(!node_repl_supersedes(0, str("dc1:3"), 1, str("dc1:2")));
    /* the same setting: nothing to adopt */
    ck_assert(!node_repl_supersedes(5, str("dc1:3"), 5, str("dc1:3")));
}
END_TEST

START_TEST(equal_versions_break_ties_by_text)
{
    /* two sets in one millisecond: every node takes the same one */
    ck_assert(node_repl_supersedes(7, str("dc1:3"), 7, str("dc1:2")));
    ck_assert(!node_repl_supersedes(7, str("dc1:2"), 7, str("dc1:3")));
    ck_assert(node_repl_supersedes(7, str("dc1:3,dc2:1"), 7, str("dc1:3")));
    ck_assert(!node_repl_supersedes(7, str("dc1:3"), 7, str("dc1:3,dc2:1")));
    /* version 0 is the config files': a disagreement is a mismatch, not
     * settled by the text */
    ck_assert(!node_repl_supersedes(0, str("dc1:3"), 0, str("dc1:2")));
    ck_assert(!node_repl_supersedes(0, str("dc1:2"), 0, str("dc1:3")));
}
END_TEST

START_TEST(next_version)
{
    /* the wall clock, when ahead of every version known */
    ck_assert_uint_eq(node_repl_next_version(0, 1000), 1000);
    ck_assert_uint_eq(node_repl_next_version(999, 1000), 1000);
    /* above them when the clock is behind (another node's set, a step) */
    ck_assert_uint_eq(node_repl_next_version(1000, 1000), 1001);
    ck_assert_uint_eq(node_repl_next_version(5000, 1000), 5001);
}
END_TEST

START_TEST(schema_carries_version)
{
    struct node_config c = NODE_CONFIG_INIT;
    ck_assert_int_eq(
        node_config_set(&c, "replication", "dc2:3,dc1:3", err, sizeof(err)), 0);
    char v[GOSSIP_VALUE_MAX];
    int l = node__schema_format(v, sizeof(v), &c, 1796595352558ull, true, "x");
    struct rk_slice s = RK_SLICE(v, (size_t)l);
    ck_assert_uint_eq(node_repl_schema_version(s), 1796595352558ull);
    struct rk_slice r = node__schema_repl(s);
    ck_assert_uint_eq(r.len, strlen("dc1:3,dc2:3"));
    ck_assert(memcmp(r.p, "dc1:3,dc2:3", r.len) == 0);
    ck_assert(node__schema_flag(s, "join=wait"));
    /* version 0 (the config file's) is not written, and reads as 0 */
    l = node__schema_format(v, sizeof(v), &c, 0, false, NULL);
    ck_assert_ptr_null(strstr(v, "replv"));
    ck_assert_uint_eq(node_repl_schema_version(RK_SLICE(v, (size_t)l)), 0);
    /* what is not a version reads as 0 */
    ck_assert_uint_eq(node_repl_schema_version(str("repl=3 replv=x")), 0);
    ck_assert_uint_eq(node_repl_schema_version(str("repl=3 replv=")), 0);
    ck_assert_uint_eq(
        node_repl_schema_version(str("repl=3 replv=99999999999999999999")), 0);
    ck_assert_uint_eq(node_repl_schema_version(str("repl=3 replv=12 a=1")), 12);
}
END_TEST

/* ---- node.state ---- */

START_TEST(state_keeps_setting_and_rebuild)
{
    static struct node_state st, got;
    memset(&st, 0, sizeof(st));
    snprintf(st.node_name, sizeof(st.node_name), "n4");
    snprintf(st.cluster_name, sizeof(st.cluster_name), "c");
    st.generation = 7;
    st.repl_version = 1796595352558ull;
    snprintf(st.repl, sizeof(st.repl), "dc1:3,dc2:3");
    snprintf(st.rebuild_from, sizeof(st.rebuild_from), "dc1");
    char *t = node_state_format(&st);
    ck_assert_ptr_nonnull(t);
    ck_assert_int_eq(node_state_parse(&got, t, strlen(t)), 0);
    free(t);
    ck_assert_uint_eq(got.repl_version, st.repl_version);
    ck_assert_str_eq(got.repl, "dc1:3,dc2:3");
    ck_assert_str_eq(got.rebuild_from, "dc1");
    /* a file from before: no setting (version 0), no rebuild */
    static const char old[] = "node_name=n1\ngeneration=3\n";
    ck_assert_int_eq(node_state_parse(&got, old, sizeof(old) - 1), 0);
    ck_assert_uint_eq(got.repl_version, 0);
    ck_assert_str_eq(got.repl, "");
    ck_assert_str_eq(got.rebuild_from, "");
}
END_TEST

static Suite *repl_suite(void)
{
    Suite *s = suite_create("node_repl");
    TCase *tc = tcase_create("parse");
    tcase_add_test(tc, parse_and_format);
    tcase_add_test(tc, parse_refuses);
    tcase_add_test(tc, dc_rf);
    suite_add_tcase(s, tc);
    tc = tcase_create("version");
    tcase_add_test(tc, higher_version_wins);
    tcase_add_test(tc, equal_versions_break_ties_by_text);
    tcase_add_test(tc, next_version);
    tcase_add_test(tc, schema_carries_version);
    suite_add_tcase(s, tc);
    tc = tcase_create("state");
    tcase_add_test(tc, state_keeps_setting_and_rebuild);
    suite_add_tcase(s, tc);
    return s;
}

int main(void)
{
    SRunner *sr = srunner_create(repl_suite());
    srunner_run_all(sr, CK_NORMAL);
    int failed = srunner_ntests_failed(sr);
    srunner_free(sr);
    return failed ? EXIT_FAILURE : EXIT_SUCCESS;
}
