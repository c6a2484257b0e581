/*
 * check_node_config.c - ringkvd's configuration: defaults, YAML, the
 * environment and flags in their order of precedence, validation messages
 * that name the key, and the node identity file.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <check.h>

#include "common/rk.h"
#include "node/config.h"
#include "node/daemon.h"
#include "node/log.h"
#include "storage/node_state.h"

static char err[NODE_CONFIG_ERR];

static int parse(struct node_config *c, const char *yaml)
{
    err[0] = '\0';
    return node_config_parse_yaml(c, yaml, strlen(yaml), "t.yaml", err,
                                  sizeof(err));
}

START_TEST(defaults_are_valid)
{
    struct node_config c = NODE_CONFIG_INIT;
    ck_assert_int_eq(node_config_validate(&c, err, sizeof(err)), 0);
    ck_assert_str_eq(c.cluster_name, "ringkv");
    ck_assert_int_eq(c.gossip_port, 7000);
    ck_assert_int_eq(c.internode_port, 7001);
    ck_assert_int_eq(c.client_port, 7380);
    ck_assert_int_eq(c.resp_port, 6379);
    ck_assert_int_eq(c.metrics_port, 9180);
    ck_assert_int_eq(c.default_consistency, COORD_CL_QUORUM);
    ck_assert_int_eq(node_config_rf(&c, "dc1"), 3);
    ck_assert_int_eq(node_config_rf(&c, "dc2"), 0);
}
END_TEST

START_TEST(yaml_full_document)
{
    struct node_config c = NODE_CONFIG_INIT;
    const char *y = "# a comment\n"
                    "cluster_name: prod\n"
                    "node_name: n1\n"
                    "datacenter: east\n"
                    "rack: r2\n"
                    "listen_address: 127.0.0.21\n"
                    "seeds:\n  - 127.0.0.21\n  - \"127.0.0.22:7100\"\n"
                    "gossip_port: 7100\n"
                    "num_tokens: 8\n"
                    "token_allocation: random\n"
                    "weight: 1.5\n"
                    "replication:\n  east: 3\n  west: 2\n"
                    "default_consistency: local_quorum\n"
                    "auto_bootstrap: no\n"
                    "durability: periodic\n"
                    "cpu_scheduling: normal\n"
                    "write_timeout_ms: 500\n"
                    "max_clock_drift_ms: 250\n"
                    "requirepass: s3cret\n"
                    "log_level: debug\n";
    ck_assert_int_eq(parse(&c, y), 0);
    ck_assert_str_eq(c.cluster_name, "prod");
    ck_assert_str_eq(c.node_name, "n1");
    ck_assert_str_eq(c.rack, "r2");
    ck_assert_int_eq(c.nseeds, 2);
    ck_assert_str_eq(c.seeds[0], "127.0.0.21");
    ck_assert_str_eq(c.seeds[1], "127.0.0.22:7100");
    ck_assert_int_eq(c.gossip_port, 7100);
    ck_assert_int_eq(c.num_tokens, 8);
    ck_assert_int_eq(c.token_allocation, NODE_ALLOC_RANDOM);
    ck_assert(c.weight == 1.5);
    ck_assert_int_eq(c.ndcs, 2);
    ck_assert_int_eq(node_config_rf(&c, "east"), 3);
    ck_assert_int_eq(node_config_rf(&c, "west"), 2);
    ck_assert_int_eq(c.default_consistency, COORD_CL_LOCAL_QUORUM);
    ck_assert_int_eq(c.auto_bootstrap, 0);
    ck_assert_int_eq(c.durability, NODE_DURABILITY_PERIODIC);
    ck_assert_int_eq(c.cpu_scheduling, NODE_SCHED_NORMAL);
    ck_assert_int_eq(c.write_timeout_ms, 500);
    ck_assert_int_eq(c.max_clock_drift_ms, 250);
    ck_assert_str_eq(c.requirepass, "s3cret");
    ck_assert_int_eq(c.log_level, NODE_LOG_DEBUG);
    ck_assert_int_eq(node_config_validate(&c, err, sizeof(err)), 0);
}
END_TEST

START_TEST(yaml_errors_name_the_key)
{
    static const struct {
        const char *yaml;
        const char *needle;
    } cases[] = {
        {"num_tokens: abc\n", "num_tokens"},
        {"num_tokens: 0\n", "num_tokens"},
        /* more than gossip can announce (regression: 1024 never joined) */
        {"num_tokens: 513\n", "num_tokens"},
        {"gossip_port: 70000\n", "gossip_port"},
        {"bogus_key: 1\n", "bogus_key: unknown"},
        {"default_consistency: MOST\n", "default_consistency"},
        {"cpu_scheduling: fifo\n", "cpu_scheduling: expected batch or normal"},
        {"replication: {dc1: 0}\n", "replication"},
        {"replication: dc1\n", "replication"},
        /* '*' is the bare number's (SimpleStrategy): never beside names;
         * until 2026-12-07 a file could say so and only `replication set`
         * refused it */
        {"replication: {\"*\": 3, dc1: 2}\n", "cannot be mixed"},
        {"seeds: [\"bad host!\"]\n", "seeds"},
        {"auto_bootstrap: maybe\n", "auto_bootstrap"},
        {"token_allocation: magic\n", "token_allocation"},
        {"weight: -1\n", "weight"},
        {"max_clock_drift_ms: -1\n", "max_clock_drift_ms"},
        {"cluster_name: \"\"\n", "cluster_name"},
        {"a: [1, 2\n", "YAML error"},
        {"- just\n- a list\n", "mapping"},
        {"seeds: {a: [1]}\n", "seeds"},
    };
    for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
        struct node_config c = NODE_CONFIG_INIT;
        ck_assert_msg(parse(&c, cases[i].yaml) == RK_ECONFIG, "case %zu", i);
        ck_assert_msg(strstr(err, cases[i].needle) != NULL,
                      "case %zu: '%s' lacks '%s'", i, err, cases[i].needle);
        ck_assert_msg(strstr(err, "t.yaml") != NULL, "case %zu: %s", i, err);
    }
}
END_TEST

START_TEST(empty_yaml_is_defaults)
{
    struct node_config c = NODE_CONFIG_INIT;
    ck_assert_int_eq(parse(&c, ""), 0);
    ck_assert_int_eq(c.num_tokens, 16);
}
END_TEST

START_TEST(precedence_file_env_flags)
{
    struct node_config c = NODE_CONFIG_INIT;
    ck_assert_int_eq(parse(&c, "num_tokens: 8\nrack: ra\nweight: 2\n"), 0);
    char *env[] = {"PATH=/bin",         "RINGKV_NUM_TOKENS=12",
                   "RINGKV_RACK=rb",    "RINGKV_CONFIG=/x.yaml",
                   "RINGKV_BIN_DIR=/b", NULL};
    ck_assert_int_eq(node_config_apply_env(&c, env, err, sizeof(err)), 0);
    ck_assert_int_eq(c.num_tokens, 12);
    ck_assert_str_eq(c.rack, "rb");
    char *argv[] = {"ringkvd", "--config=/x.yaml", "--num-tokens=4",
                    "--seeds", "a,b:7005",         "--check-config",
                    "-c",      "/y.yaml",          NULL};
    ck_assert_int_eq(node_config_apply_args(&c, 8, argv, err, sizeof(err)), 0);
    ck_assert_int_eq(c.num_tokens, 4);
    ck_assert_str_eq(c.rack, "rb");
    ck_assert(c.weight == 2.0);
    ck_assert_int_eq(c.nseeds, 2);
    ck_assert_str_eq(c.seeds[1], "b:7005");
    ck_assert_str_eq(node_config_file_arg(8, argv, env), "/y.yaml");
    char *argv2[] = {"ringkvd", NULL};
    ck_assert_str_eq(node_config_file_arg(1, argv2, env), "/x.yaml");
}
END_TEST

START_TEST(env_and_flag_errors)
{
    struct node_config c = NODE_CONFIG_INIT;
    char *env[] = {"RINGKV_CLIENT_PORT=x", NULL};
    ck_assert_int_eq(node_config_apply_env(&c, env, err, sizeof(err)),
                     RK_ECONFIG);
    ck_assert_ptr_nonnull(strstr(err, "RINGKV_CLIENT_PORT"));
    char *env2[] = {"RINGKV_NOPE=1", "RINGKV_HOST=x", NULL};
    struct node_config d = NODE_CONFIG_INIT;
    ck_assert_int_eq(node_config_apply_env(&d, env2, err, sizeof(err)), 0);
    ck_assert_int_eq(d.client_port, 7380);
    char *argv[] = {"ringkvd", "--num_tokens", NULL};
    ck_assert_int_eq(node_config_apply_args(&c, 2, argv, err, sizeof(err)),
                     RK_ECONFIG);
    ck_assert_ptr_nonnull(strstr(err, "missing value"));
    char *argv2[] = {"ringkvd", "stray", NULL};
    ck_assert_int_eq(node_config_apply_args(&c, 2, argv2, err, sizeof(err)),
                     RK_ECONFIG);
    ck_assert_ptr_nonnull(strstr(err, "stray"));
    char *argv3[] = {"ringkvd", "--durability=fast", NULL};
    ck_assert_int_eq(node_config_apply_args(&c, 2, argv3, err, sizeof(err)),
                     RK_ECONFIG);
    ck_assert_ptr_nonnull(strstr(err, "durability"));
}
END_TEST

/* replace: a node name, not the node's own */
START_TEST(validate_replace)
{
    struct node_config c = NODE_CONFIG_INIT;
    ck_assert_int_eq(node_config_set(&c, "node_name", "n5", err, sizeof(err)),
                     0);
    ck_assert_int_eq(node_config_set(&c, "replace", "n4", err, sizeof(err)), 0);
    ck_assert_int_eq(node_config_validate(&c, err, sizeof(err)), 0);
    ck_assert_str_eq(c.replace, "n4");
    ck_assert_int_eq(node_config_set(&c, "replace", "n5", err, sizeof(err)), 0);
    ck_assert_int_eq(node_config_validate(&c, err, sizeof(err)), RK_ECONFIG);
    ck_assert_ptr_nonnull(strstr(err, "own name"));
    ck_assert_int_eq(node_config_set(&c, "replace", "n 4", err, sizeof(err)),
                     0);
    ck_assert_int_eq(node_config_validate(&c, err, sizeof(err)), RK_ECONFIG);
    ck_assert_ptr_nonnull(strstr(err, "replace"));
}
END_TEST

START_TEST(validate_whole_struct)
{
    struct node_config c = NODE_CONFIG_INIT;
    c.resp_port = c.client_port;
    ck_assert_int_eq(node_config_validate(&c, err, sizeof(err)), RK_ECONFIG);
    ck_assert_ptr_nonnull(strstr(err, "resp_port"));

    struct node_config d = NODE_CONFIG_INIT;
    ck_assert_int_eq(
        node_config_set(&d, "datacenter", "west", err, sizeof(err)), 0);
    /* a data centre with no RF (a new one): valid, it holds no replicas
     * until `ringkv replication set` names it */
    ck_assert_int_eq(node_config_validate(&d, err, sizeof(err)), 0);
    ck_assert_int_eq(node_config_rf(&d, "west"), 0);
    ck_assert_int_eq(node_config_set(&d, "replication", "2", err, sizeof(err)),
                     0);
    ck_assert_int_eq(node_config_validate(&d, err, sizeof(err)), 0);
    ck_assert_int_eq(node_config_rf(&d, "west"), 2);

    struct node_config e = NODE_CONFIG_INIT;
    ck_assert_int_eq(node_config_set(&e, "cluster_secret_file",
                                     "/nonexistent/secret", err, sizeof(err)),
                     0);
    ck_assert_int_eq(node_config_validate(&e, err, sizeof(err)), RK_ECONFIG);
    ck_assert_ptr_nonnull(strstr(err, "cluster_secret_file"));

    struct node_config f = NODE_CONFIG_INIT;
    ck_assert_int_eq(node_config_set(&f, "node_name", "a b", err, sizeof(err)),
                     0);
    ck_assert_int_eq(node_config_validate(&f, err, sizeof(err)), RK_ECONFIG);
    ck_assert_ptr_nonnull(strstr(err, "node_name"));
}
END_TEST

START_TEST(storage_knobs)
{
    struct node_config c = NODE_CONFIG_INIT;
    ck_assert_int_eq(c.memtable_mb, 16);
    ck_assert_int_eq(c.auto_compact_pct, 25);
    ck_assert_int_eq(node_config_set(&c, "memtable_mb", "0", err, sizeof(err)),
                     RK_ECONFIG);
    ck_assert_ptr_nonnull(strstr(err, "memtable_mb"));
    ck_assert_int_eq(
        node_config_set(&c, "auto_compact_pct", "-2", err, sizeof(err)),
        RK_ECONFIG);
    ck_assert_int_eq(
        node_config_set(&c, "auto-compact-pct", "-1", err, sizeof(err)), 0);
    ck_assert_int_eq(node_config_set(&c, "memtable_mb", "64", err, sizeof(err)),
                     0);
    ck_assert_int_eq(c.auto_compact_pct, -1);
    ck_assert_int_eq(c.memtable_mb, 64);
    /* the read cache: 64 MiB by default, 0 turns it off, never negative,
     * and the store is given it in bytes */
    ck_assert_int_eq(c.read_cache_mb, 64);
    ck_assert_int_eq(
        node_config_set(&c, "read_cache_mb", "-1", err, sizeof(err)),
        RK_ECONFIG);
    ck_assert_ptr_nonnull(strstr(err, "read_cache_mb"));
    ck_assert_int_eq(
        node_config_set(&c, "read-cache-mb", "0", err, sizeof(err)), 0);
    ck_assert_int_eq(c.read_cache_mb, 0);
    ck_assert_int_eq(
        node_config_set(&c, "read_cache_mb", "128", err, sizeof(err)), 0);
    struct store_opts so;
    node__store_opts(&so, &c);
    ck_assert_uint_eq(so.read_cache_bytes, (size_t)128 << 20);
    /* the streaming cap: 0 (none) by default, never negative */
    ck_assert_int_eq(c.stream_throughput_mb, 0);
    ck_assert_int_eq(
        node_config_set(&c, "stream_throughput_mb", "-1", err, sizeof(err)),
        RK_ECONFIG);
    ck_assert_ptr_nonnull(strstr(err, "stream_throughput_mb"));
    ck_assert_int_eq(
        node_config_set(&c, "stream-throughput-mb", "25", err, sizeof(err)), 0);
    ck_assert_int_eq(c.stream_throughput_mb, 25);
    /* a long operation is reported stalled after 30 s without progress;
     * at least a second */
    ck_assert_int_eq(c.stall_warning_s, 30);
    ck_assert_int_eq(
        node_config_set(&c, "stall_warning_s", "0", err, sizeof(err)),
        RK_ECONFIG);
    ck_assert_int_eq(
        node_config_set(&c, "stall-warning-s", "2", err, sizeof(err)), 0);
    ck_assert_int_eq(c.stall_warning_s, 2);
    /* the commit log: direct writes by default, `false` keeps it buffered */
    ck_assert_int_eq(c.log_direct_io, 1);
    ck_assert_int_eq(
        node_config_set(&c, "log_direct_io", "maybe", err, sizeof(err)),
        RK_ECONFIG);
    ck_assert_int_eq(
        node_config_set(&c, "log-direct-io", "false", err, sizeof(err)), 0);
    ck_assert_int_eq(c.log_direct_io, 0);
    /* a fresh node's listening before it chooses tokens: 2 s by default,
     * 0 leaves only the gossip rounds, never negative */
    ck_assert_int_eq(c.ring_delay_ms, 2000);
    ck_assert_int_eq(
        node_config_set(&c, "ring_delay_ms", "-1", err, sizeof(err)),
        RK_ECONFIG);
    ck_assert_int_eq(
        node_config_set(&c, "ring-delay-ms", "700", err, sizeof(err)), 0);
    ck_assert_int_eq(c.ring_delay_ms, 700);
    char dump[8192];
    node_config_dump(&c, dump, sizeof(dump));
    ck_assert_ptr_nonnull(strstr(dump, "stream_throughput_mb: 25\n"));
    ck_assert_ptr_nonnull(strstr(dump, "stall_warning_s: 2\n"));
    ck_assert_ptr_nonnull(strstr(dump, "log_direct_io: false\n"));
    ck_assert_ptr_nonnull(strstr(dump, "ring_delay_ms: 700\n"));
    /* the clock drift refused: 500 ms by default, 0 turns it off */
    ck_assert_int_eq(c.max_clock_drift_ms, 500);
    ck_assert_ptr_nonnull(strstr(dump, "max_clock_drift_ms: 500\n"));
    ck_assert_int_eq(
        node_config_set(&c, "max-clock-drift-ms", "0", err, sizeof(err)), 0);
    ck_assert_int_eq(c.max_clock_drift_ms, 0);
}
END_TEST

START_TEST(consistency_names)
{
    enum coord_cl cl;
    for (int i = COORD_CL_ONE; i <= COORD_CL_EACH_QUORUM; i++) {
        ck_assert_int_eq(node_cl_parse(&cl, node_cl_name((enum coord_cl)i)), 0);
        ck_assert_int_eq(cl, i);
    }
    ck_assert_int_eq(node_cl_parse(&cl, "each_quorum"), 0);
    ck_assert_int_eq(cl, COORD_CL_EACH_QUORUM);
    ck_assert_int_eq(node_cl_parse(&cl, "THREE"), RK_EBADREQ);
}
END_TEST

START_TEST(dump_hides_password)
{
    struct node_config c = NODE_CONFIG_INIT;
    ck_assert_int_eq(parse(&c, "requirepass: hunter2\nseeds: a,b\n"), 0);
    char buf[8192];
    int n = node_config_dump(&c, buf, sizeof(buf));
    ck_assert_int_gt(n, 0);
    ck_assert_int_lt(n, (int)sizeof(buf));
    ck_assert_ptr_null(strstr(buf, "hunter2"));
    ck_assert_ptr_nonnull(strstr(buf, "seeds: [\"a\", \"b\"]"));
    /* a dump parses back to the same settings */
    struct node_config d = NODE_CONFIG_INIT;
    ck_assert_int_eq(parse(&d, buf), 0);
    ck_assert_int_eq(d.nseeds, 2);
    char small[16];
    ck_assert_int_eq(node_config_dump(&c, small, sizeof(small)), n);
}
END_TEST

/* Regression: the dump wrote names unquoted or inside "%s" without
 * escaping, so a rack, data centre or path holding a quote, colon or
 * backslash did not parse back (found by fuzz_node_config's review). */
START_TEST(dump_quotes_strings)
{
    struct node_config c = NODE_CONFIG_INIT;
    ck_assert_int_eq(parse(&c, "cluster_name: 'a \"b\" c'\n"
                               "rack: 'r: 1 # x'\n"
                               "data_dir: '/tmp/back\\slash'\n"
                               "replication: {'dc \"1\" #': 3}\n"
                               "datacenter: 'dc \"1\" #'\n"),
                     0);
    char buf[8192];
    int n = node_config_dump(&c, buf, sizeof(buf));
    ck_assert_int_gt(n, 0);
    ck_assert_int_lt(n, (int)sizeof(buf));
    struct node_config d = NODE_CONFIG_INIT;
    ck_assert_int_eq(parse(&d, buf), 0);
    ck_assert_str_eq(d.cluster_name, "a \"b\" c");
    ck_assert_str_eq(d.rack, "r: 1 # x");
    ck_assert_str_eq(d.data_dir, "/tmp/back\\slash");
    ck_assert_str_eq(d.datacenter, "dc \"1\" #");
    ck_assert_int_eq(d.ndcs, 1);
    ck_assert_str_eq(d.replication[0].name, "dc \"1\" #");
}
END_TEST

/* Regression: replication in the YAML mapping form was flattened to
 * "dc:rf,dc:rf" and split at the first ':', so a data centre named
 * "us:east" (a legal datacenter value) was refused even when quoted, and a
 * dump holding it did not parse back. */
START_TEST(repl_dc_name_with_colon)
{
    struct node_config c = NODE_CONFIG_INIT;
    ck_assert_int_eq(parse(&c, "datacenter: \"us:east\"\n"
                               "replication:\n"
                               "  \"us:east\": 3\n"
                               "  'eu,west:1': 2\n"),
                     0);
    ck_assert_int_eq(c.ndcs, 2);
    ck_assert_int_eq(node_config_rf(&c, "us:east"), 3);
    ck_assert_int_eq(node_config_rf(&c, "eu,west:1"), 2);
    ck_assert_int_eq(node_config_validate(&c, err, sizeof(err)), 0);
    /* the flow form and the dump */
    struct node_config f = NODE_CONFIG_INIT;
    ck_assert_int_eq(parse(&f, "datacenter: 'us:east'\n"
                               "replication: {'us:east': 3}\n"),
                     0);
    ck_assert_int_eq(node_config_rf(&f, "us:east"), 3);
    char buf[8192];
    int n = node_config_dump(&c, buf, sizeof(buf));
    ck_assert_int_gt(n, 0);
    ck_assert_int_lt(n, (int)sizeof(buf));
    struct node_config d = NODE_CONFIG_INIT;
    ck_assert_msg(parse(&d, buf) == 0, "%s", err);
    ck_assert_int_eq(d.ndcs, 2);
    ck_assert_str_eq(d.replication[0].name, "us:east");
    ck_assert_str_eq(d.replication[1].name, "eu,west:1");
    ck_assert_int_eq(d.replication[1].rf, 2);
    /* the string form (environment, flags) splits at the last ':' */
    struct node_config e = NODE_CONFIG_INIT;
    ck_assert_int_eq(node_config_set(&e, "replication", "us:east:3, dc2:2", err,
                                     sizeof(err)),
                     0);
    ck_assert_int_eq(e.ndcs, 2);
    ck_assert_int_eq(node_config_rf(&e, "us:east"), 3);
    ck_assert_int_eq(node_config_rf(&e, "dc2"), 2);
    /* still refused: a non-scalar RF, an empty name, an RF out of range */
    static const char *bad[] = {
        "replication: {'us:east': [3]}\n",
        "replication: {'': 3}\n",
        "replication: {'us:east': 16}\n",
        "replication: {'a': 1, 'a': 2}\n",
        "replication: {}\n",
    };
    for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
        struct node_config b = NODE_CONFIG_INIT;
        ck_assert_msg(parse(&b, bad[i]) == RK_ECONFIG, "%s", bad[i]);
        ck_assert_msg(strstr(err, "t.yaml:1: replication") != NULL, "%s", err);
    }
}
END_TEST

/* num_tokens goes up to 1024 (more with weight): the tokens line is then
 * ~21 KB. Until 2026-12-03 node_state_load read lines of at most 1023
 * bytes, so a node with more than ~50 tokens could not load its own state:
 * it failed to restart with "corrupt" (the rest of the line had no '='). */
START_TEST(regression_state_many_tokens_unreadable)
{
    char dir[] = "/tmp/check_node_config.XXXXXX";
    ck_assert_ptr_nonnull(mkdtemp(dir));
    static struct node_state st, got;
    memset(&st, 0, sizeof(st));
    snprintf(st.node_name, sizeof(st.node_name), "n1");
    snprintf(st.cluster_name, sizeof(st.cluster_name), "c");
    st.generation = 5;
    st.ntokens = NODE_STATE_MAX_TOKENS;
    for (int i = 0; i < st.ntokens; i++)
        st.tokens[i] = UINT64_MAX - (uint64_t)i * 7919;
    ck_assert_int_eq(node_state_save(&st, dir), 0);
    ck_assert_int_eq(node_state_load(&got, dir), 0);
    ck_assert_int_eq(got.ntokens, NODE_STATE_MAX_TOKENS);
    for (int i = 0; i < st.ntokens; i++)
        ck_assert(got.tokens[i] == st.tokens[i]);
    ck_assert_int_eq(got.generation, 5);
    char path[512];
    snprintf(path, sizeof(path), "%s/node.state", dir);
    unlink(path);
    rmdir(dir);
}
END_TEST

/* What node_state_parse refuses, and a file of an older version (no
 * removing= line, no trailing newline) it reads. */
START_TEST(state_parse_bad_and_old)
{
    static struct node_state st;
    static const char *const bad[] = {
        "",                                /* no name, no generation */
        "node_name=n1\n",                  /* no generation */
        "node_name=n1\ngeneration=1\n\n",  /* an empty line */
        "node_name=n1\ngeneration=1\nx\n", /* a line without '=' */
        "node_name=n1\ngeneration=1\ntokens=1,,2\n", /* a bad token */
    };
    for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++)
        ck_assert_msg(node_state_parse(&st, bad[i], strlen(bad[i])) ==
                          RK_ECORRUPT,
                      "accepted %s", bad[i]);
    static const char nul[] = "node_name=n1\0\ngeneration=1\n";
    ck_assert_int_eq(node_state_parse(&st, nul, sizeof(nul) - 1), RK_ECORRUPT);
    const char *old = "node_name=n1\ncluster_name=c\ngeneration=9\n"
                      "ring_epoch=3\njoining=0\nleaving=1\nleft=0\n"
                      "repair_due=0\ntokens=5,6";
    ck_assert_int_eq(node_state_parse(&st, old, strlen(old)), 0);
    ck_assert_str_eq(st.node_name, "n1");
    ck_assert_int_eq(st.generation, 9);
    ck_assert_int_eq(st.leaving, 1);
    ck_assert_str_eq(st.removing, "");
    ck_assert_int_eq(st.ntokens, 2);
    ck_assert(st.tokens[1] == 6);
}
END_TEST

START_TEST(state_roundtrip)
{
    char dir[] = "/tmp/check_node_config.XXXXXX";
    ck_assert_ptr_nonnull(mkdtemp(dir));
    char sub[256];
    snprintf(sub, sizeof(sub), "%s/a/b", dir);
    ck_assert_int_eq(node_state_mkdirs(sub), 0);
    struct node_state st, got;
    ck_assert_int_eq(node_state_load(&got, sub), RK_ENOTFOUND);
    memset(&st, 0, sizeof(st));
    snprintf(st.node_name, sizeof(st.node_name), "n1");
    snprintf(st.cluster_name, sizeof(st.cluster_name), "c");
    st.generation = 1234;
    st.ring_epoch = 7;
    st.ntokens = 3;
    st.tokens[0] = 0;
    st.tokens[1] = UINT64_MAX;
    st.tokens[2] = 42;
    ck_assert_int_eq(node_state_save(&st, sub), 0);
    ck_assert_int_eq(node_state_load(&got, sub), 0);
    ck_assert_str_eq(got.node_name, "n1");
    ck_assert_int_eq(got.generation, 1234);
    ck_assert_int_eq(got.ring_epoch, 7);
    ck_assert_int_eq(got.ntokens, 3);
    ck_assert(got.tokens[1] == UINT64_MAX);
    ck_assert(got.tokens[2] == 42);
    ck_assert_int_eq(got.joining, 0);
    /* a join cut short is remembered (streaming/join.c resumes it) */
    st.joining = 1;
    ck_assert_int_eq(node_state_save(&st, sub), 0);
    ck_assert_int_eq(node_state_load(&got, sub), 0);
    ck_assert_int_eq(got.joining, 1);
    ck_assert_int_eq(got.ntokens, 3);
    /* ... and the dead node it replaces (membership.c) */
    snprintf(st.replace, sizeof(st.replace), "n4");
    ck_assert_int_eq(node_state_save(&st, sub), 0);
    ck_assert_int_eq(node_state_load(&got, sub), 0);
    ck_assert_str_eq(got.replace, "n4");
    st.replace[0] = '\0';
    st.joining = 0;
    ck_assert_int_eq(node_state_save(&st, sub), 0);
    ck_assert_int_eq(node_state_load(&got, sub), 0);
    ck_assert_int_eq(got.joining, 0);
    ck_assert_str_eq(got.replace, "");
    ck_assert_int_eq(got.leaving, 0);
    ck_assert_int_eq(got.left, 0);
    /* a decommission cut short, and one finished */
    st.leaving = 1;
    ck_assert_int_eq(node_state_save(&st, sub), 0);
    ck_assert_int_eq(node_state_load(&got, sub), 0);
    ck_assert_int_eq(got.leaving, 1);
    ck_assert_int_eq(got.left, 0);
    st.leaving = 0;
    st.left = 1;
    ck_assert_int_eq(node_state_save(&st, sub), 0);
    ck_assert_int_eq(node_state_load(&got, sub), 0);
    ck_assert_int_eq(got.leaving, 0);
    ck_assert_int_eq(got.left, 1);
    ck_assert_int_eq(got.repair_due, 0);
    st.left = 0;
    /* a streamed join whose repair has not run (repair/session.c) */
    st.repair_due = 1;
    ck_assert_int_eq(node_state_save(&st, sub), 0);
    ck_assert_int_eq(node_state_load(&got, sub), 0);
    ck_assert_int_eq(got.repair_due, 1);
    ck_assert_int_eq(got.joining, 0);
    st.repair_due = 0;
    /* a join aborted: it waits for `ringkv join` (streaming/join.c) */
    ck_assert_int_eq(got.wait_join, 0);
    st.wait_join = 1;
    ck_assert_int_eq(node_state_save(&st, sub), 0);
    ck_assert_int_eq(node_state_load(&got, sub), 0);
    ck_assert_int_eq(got.wait_join, 1);
    st.wait_join = 0;
    ck_assert_str_eq(got.removing, "");
    /* a removal this node drove, cut short (streaming/leave.c takes it up) */
    snprintf(st.removing, sizeof(st.removing), "n4");
    ck_assert_int_eq(node_state_save(&st, sub), 0);
    ck_assert_int_eq(node_state_load(&got, sub), 0);
    ck_assert_str_eq(got.removing, "n4");
    ck_assert_int_eq(got.ntokens, 3);
    st.removing[0] = '\0';
    ck_assert_int_eq(node_state_save(&st, sub), 0);
    ck_assert_int_eq(node_state_load(&got, sub), 0);
    ck_assert_str_eq(got.removing, "");
    char path[512];
    snprintf(path, sizeof(path), "%s/node.state", sub);
    FILE *f = fopen(path, "w");
    fputs("garbage\n", f);
    fclose(f);
    ck_assert_int_eq(node_state_load(&got, sub), RK_ECORRUPT);
    unlink(path);
    rmdir(sub);
    snprintf(sub, sizeof(sub), "%s/a", dir);
    rmdir(sub);
    rmdir(dir);
}
END_TEST

START_TEST(generation_increases)
{
    ck_assert_int_eq(node_state_next_generation(0, 1000), 1000);
    ck_assert_int_eq(node_state_next_generation(1000, 1000), 1001);
    ck_assert_int_eq(node_state_next_generation(5000, 1000), 5001);
}
END_TEST

START_TEST(log_quoting)
{
    char b[64];
    ck_assert_str_eq(node_log_quote(b, sizeof(b), "plain"), "plain");
    ck_assert_str_eq(node_log_quote(b, sizeof(b), "a b"), "\"a b\"");
    ck_assert_str_eq(node_log_quote(b, sizeof(b), "x\"y"), "\"x\\\"y\"");
    ck_assert_str_eq(node_log_quote(b, sizeof(b), ""), "\"\"");
}
END_TEST

static Suite *node_config_suite(void)
{
    Suite *s = suite_create("node_config");
    TCase *tc = tcase_create("yaml");
    tcase_add_test(tc, defaults_are_valid);
    tcase_add_test(tc, yaml_full_document);
    tcase_add_test(tc, yaml_errors_name_the_key);
    tcase_add_test(tc, empty_yaml_is_defaults);
    tcase_add_test(tc, dump_hides_password);
    tcase_add_test(tc, dump_quotes_strings);
    tcase_add_test(tc, repl_dc_name_with_colon);
    suite_add_tcase(s, tc);
    tc = tcase_create("overrides");
    tcase_add_test(tc, precedence_file_env_flags);
    tcase_add_test(tc, env_and_flag_errors);
    suite_add_tcase(s, tc);
    tc = tcase_create("validate");
    tcase_add_test(tc, validate_whole_struct);
    tcase_add_test(tc, validate_replace);
    tcase_add_test(tc, storage_knobs);
    tcase_add_test(tc, consistency_names);
    suite_add_tcase(s, tc);
    tc = tcase_create("state");
    tcase_add_test(tc, state_roundtrip);
    tcase_add_test(tc, state_parse_bad_and_old);
    tcase_add_test(tc, regression_state_many_tokens_unreadable);
    tcase_add_test(tc, generation_increases);
    tcase_add_test(tc, log_quoting);
    suite_add_tcase(s, tc);
    return s;
}

int main(void)
{
    SRunner *sr = srunner_create(node_config_suite());
    srunner_run_all(sr, CK_NORMAL);
    int failed = srunner_ntests_failed(sr);
    srunner_free(sr);
    return failed == 0 ? EXIT_SUCCESS : EXIT_FAILURE;
}
