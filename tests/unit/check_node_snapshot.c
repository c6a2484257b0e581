/*
 * check_node_snapshot.c - snapshots (node/snapshot_manifest.h,
 * node/snapshot.h): the tag rules, the manifest's text both ways and what
 * its reader refuses, the data_dir lock, and the offline restore with the
 * errors it gives for a snapshot it must not use.
 */
#include <fcntl.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include <check.h>

#include "common/rk.h"
#include "node/config.h"
#include "node/snapshot.h"
#include "storage/node_state.h"
#include "storage/snapshot_manifest.h"
#include "storage/store.h"

static char tmp[200];

static void tmp_setup(void)
{
    const char *t = getenv("TMPDIR");
    snprintf(tmp, sizeof(tmp), "%s/rk_snap_XXXXXX", t ? t : "/tmp");
    ck_assert_ptr_nonnull(mkdtemp(tmp));
}

static void tmp_teardown(void)
{
    char cmd[300];
    snprintf(cmd, sizeof(cmd), "rm -rf '%s'", tmp);
    ck_assert_int_eq(system(cmd), 0);
}

/* ---- tags and the manifest ---------------------------------------------- */

START_TEST(tag_rules)
{
    static const char *ok[] = {"a",          "before-upgrade",
                               "2026.12.06", "x_y:z",
                               "A1",         "20261206T115500.123Z"};
    static const char *bad[] = {"",     ".",    "..",   "../x",  "a/b",
                                "/abs", ".hid", "-x",   "--all", "a b",
                                "a\n",  "é",    "a\\b", "a*"};
    for (size_t i = 0; i < sizeof(ok) / sizeof(ok[0]); i++)
        ck_assert_msg(snapshot_tag_valid(ok[i], strlen(ok[i])), "%s", ok[i]);
    for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++)
        ck_assert_msg(!snapshot_tag_valid(bad[i], strlen(bad[i])), "%s",
                      bad[i]);
    char long_tag[SNAPSHOT_TAG_MAX + 2];
    memset(long_tag, 'a', sizeof(long_tag));
    ck_assert(snapshot_tag_valid(long_tag, SNAPSHOT_TAG_MAX));
    ck_assert(!snapshot_tag_valid(long_tag, SNAPSHOT_TAG_MAX + 1));
    char def[64];
    snapshot_tag_default(def, sizeof(def), UINT64_C(1796558100123));
    ck_assert_str_eq(def, "20261206T115500.123Z");
    ck_assert(snapshot_tag_valid(def, strlen(def)));
}
END_TEST

START_TEST(manifest_roundtrip)
{
    struct snapshot_range r[2] = {
        {UINT64_C(0x10), UINT64_C(0xffffffffffffffff), 8192, "a.mdb"},
        {UINT64_C(0xffffffffffffffff), UINT64_C(0x10), 0, "b.mdb"}};
    struct snapshot_manifest m = {.tag = "t1",
                                  .node_name = "n1",
                                  .cluster_name = "demo",
                                  .created_ms = 1796558100123,
                                  .duration_ms = 2310,
                                  .ranges = r,
                                  .nranges = 2};
    char *t = snapshot_manifest_format(&m);
    ck_assert_ptr_nonnull(t);
    ck_assert_ptr_nonnull(
        strstr(t, "range=0000000000000010 ffffffffffffffff 8192 a.mdb\n"));
    struct snapshot_manifest got;
    ck_assert_int_eq(snapshot_manifest_parse(&got, t, strlen(t)), 0);
    ck_assert_str_eq(got.tag, "t1");
    ck_assert_str_eq(got.node_name, "n1");
    ck_assert_str_eq(got.cluster_name, "demo");
    ck_assert_uint_eq(got.created_ms, 1796558100123);
    ck_assert_uint_eq(got.duration_ms, 2310);
    ck_assert_uint_eq(got.nranges, 2);
    ck_assert_uint_eq(got.ranges[1].start, UINT64_MAX);
    ck_assert_uint_eq(got.ranges[1].end, 0x10);
    ck_assert_str_eq(got.ranges[0].file, "a.mdb");
    ck_assert_uint_eq(snapshot_manifest_bytes(&got), 8192);
    snapshot_manifest_clear(&got);
    ck_assert_ptr_null(got.ranges);
    free(t);
}
END_TEST

START_TEST(manifest_refused)
{
    static const char head[] = "format=1\ntag=t\nnode_name=n1\ncreated_ms=5\n";
    static const struct {
        const char *text;
        int rc;
    } cases[] = {
        {"tag=t\nnode_name=n1\ncreated_ms=5\n", RK_ECORRUPT}, /* no format */
        {"format=2\ntag=t\nnode_name=n1\ncreated_ms=5\n", RK_EVERSION},
        {"format=1\nnode_name=n1\ncreated_ms=5\n", RK_ECORRUPT}, /* no tag */
        {"format=1\ntag=../x\nnode_name=n1\ncreated_ms=5\n", RK_ECORRUPT},
        {"format=1\ntag=t\nnode_name=n1\ncreated_ms=-5\n", RK_ECORRUPT},
        {"format=1\ntag=t\nnode_name=n1\ncreated_ms=5x\n", RK_ECORRUPT},
        {"format=1\ntag=t\nnode_name=n1\ncreated_ms=5\njunk\n", RK_ECORRUPT},
    };
    static const char *ranges[] = {
        "range=1 2 3\n",                   /* no file */
        "range=1 2 3 a b\n",               /* one field too many */
        "range=1 2 3 ../a.mdb\n",          /* a path */
        "range=1 2 3 .a\n",                /* hidden */
        "range=g 2 3 a\n",                 /* not hex */
        "range=1 2 -3 a\n",                /* negative size */
        "range=1 10000000000000000 3 a\n", /* past 64 bits */
    };
    struct snapshot_manifest m;
    for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++)
        ck_assert_msg(
            snapshot_manifest_parse(&m, cases[i].text, strlen(cases[i].text)) ==
                cases[i].rc,
            "%s", cases[i].text);
    for (size_t i = 0; i < sizeof(ranges) / sizeof(ranges[0]); i++) {
        char t[256];
        snprintf(t, sizeof(t), "%s%s", head, ranges[i]);
        ck_assert_msg(snapshot_manifest_parse(&m, t, strlen(t)) == RK_ECORRUPT,
                      "%s", ranges[i]);
        ck_assert_ptr_null(m.ranges);
    }
    static const char nul[] = "format=1\ntag=t\0\nnode_name=n1\ncreated_ms=5\n";
    ck_assert_int_eq(snapshot_manifest_parse(&m, nul, sizeof(nul) - 1),
                     RK_ECORRUPT);
    /* a later format may add keys: unknown ones are read past */
    static const char more[] = "format=1\ntag=t\nnode_name=n1\ncreated_ms=5\n"
                               "checksum=abc\nrange=1 2 3 a\n";
    ck_assert_int_eq(snapshot_manifest_parse(&m, more, strlen(more)), 0);
    ck_assert_uint_eq(m.nranges, 1);
    snapshot_manifest_clear(&m);
}
END_TEST

/* ---- the data_dir lock -------------------------------------------------- */

START_TEST(lock_held_once)
{
    int a = -1, b = -1;
    ck_assert_int_eq(node_state_lock(&a, tmp), 0);
    ck_assert_int_eq(node_state_lock(&b, tmp), RK_EEXIST);
    close(a);
    ck_assert_int_eq(node_state_lock(&b, tmp), 0); /* released with a */
    close(b);
}
END_TEST

/* ---- restore ------------------------------------------------------------ */

#define WHOLE ((struct store_range){7, 7}) /* start == end: the whole ring */

static void put(store *s, const char *key, const char *value)
{
    uint8_t rec[64];
    size_t len;
    struct store_record r = {.ts = 100,
                             .value = RK_SLICE(value, strlen(value))};
    ck_assert_int_eq(store_record_encode(rec, sizeof(rec), &len, &r), 0);
    ck_assert_int_eq(
        store_put(s, RK_SLICE(key, strlen(key)), RK_SLICE(rec, len)), 0);
}

static struct rk_slice hint_rec(void)
{
    static uint8_t rec[32];
    size_t len;
    struct store_record r = {.ts = 100, .value = RK_SLICE("v", 1)};
    ck_assert_int_eq(store_record_encode(rec, sizeof(rec), &len, &r), 0);
    return RK_SLICE(rec, len);
}

static bool has(store *s, const char *key)
{
    uint8_t *rec;
    size_t len;
    int rc = store_get(&rec, &len, s, RK_SLICE(key, strlen(key)), 0);
    if (rc == 0)
        free(rec);
    return rc == 0;
}

static void write_text(const char *dir, const char *name, const char *t)
{
    char p[512];
    snprintf(p, sizeof(p), "%s/%s", dir, name);
    FILE *f = fopen(p, "w");
    ck_assert_ptr_nonnull(f);
    fputs(t, f);
    ck_assert_int_eq(fclose(f), 0);
}

/* data_dir tmp/d of node n1 (cluster c) holding "old"; a snapshot of it
 * by hand in tmp/s (what node/snapshot.c writes); then "new" written. */
static void
make_node_and_snapshot(struct node_config *cfg, char *snap, size_t cap)
{
    snprintf(cfg->data_dir, sizeof(cfg->data_dir), "%s/d", tmp);
    snprintf(cfg->node_name, sizeof(cfg->node_name), "n1");
    snprintf(cfg->cluster_name, sizeof(cfg->cluster_name), "c");
    snprintf(snap, cap, "%s/s", tmp);
    ck_assert_int_eq(mkdir(snap, 0755), 0);
    struct node_state st = {.node_name = "n1",
                            .cluster_name = "c",
                            .generation = 5,
                            .ntokens = 1,
                            .tokens = {7}};
    ck_assert_int_eq(node_state_mkdirs(cfg->data_dir), 0);
    ck_assert_int_eq(node_state_save(&st, cfg->data_dir), 0);
    ck_assert_int_eq(node_state_save(&st, snap), 0);
    struct store_opts o = STORE_OPTS_INIT;
    o.data_dir = cfg->data_dir;
    o.map_size = 1 << 20;
    store *s;
    ck_assert_int_eq(store_open(&s, &o), 0);
    ck_assert_int_eq(store_range_create(s, WHOLE), 0);
    put(s, "old", "1");
    char p[512];
    snprintf(p, sizeof(p), "%s/r.mdb", snap);
    int fd = open(p, O_WRONLY | O_CREAT | O_EXCL, 0644);
    ck_assert_int_ge(fd, 0);
    ck_assert_int_eq(store_range_copy_fd(s, WHOLE, fd), 0);
    struct stat sb;
    ck_assert_int_eq(fstat(fd, &sb), 0);
    close(fd);
    put(s, "new", "2");
    store_free(s);
    char man[512];
    snprintf(man, sizeof(man),
             "format=1\ntag=t\nnode_name=n1\ncluster_name=c\ncreated_ms=1\n"
             "range=0000000000000007 0000000000000007 %lld r.mdb\n",
             (long long)sb.st_size);
    write_text(snap, "manifest", man);
}

static int restore_hints(const struct node_config *cfg,
                         const char *what,
                         bool drop_hints,
                         char *err)
{
    err[0] = '\0';
    FILE *out = fopen("/dev/null", "w");
    int rc = node_snapshot_restore(cfg, what, drop_hints, out, err, 512);
    fclose(out);
    return rc;
}

static int restore(const struct node_config *cfg, const char *what, char *err)
{
    return restore_hints(cfg, what, false, err);
}

START_TEST(restore_puts_snapshot_back)
{
    struct node_config cfg = NODE_CONFIG_INIT;
    char snap[512], err[512];
    make_node_and_snapshot(&cfg, snap, sizeof(snap));
    ck_assert_int_eq(restore(&cfg, snap, err), 0);
    struct store_opts o = STORE_OPTS_INIT;
    o.data_dir = cfg.data_dir;
    store *s;
    ck_assert_int_eq(store_open(&s, &o), 0);
    ck_assert(has(s, "old"));
    ck_assert(!has(s, "new")); /* written after the snapshot */
    uint64_t hints;
    ck_assert_int_eq(store_hint_add(s, "n2", RK_SLICE("h", 1), hint_rec()), 0);
    store_free(s);
    /* the hints stay, unless the whole cluster is restored */
    ck_assert_int_eq(restore(&cfg, snap, err), 0);
    ck_assert_int_eq(store_open(&s, &o), 0);
    ck_assert_int_eq(store_hint_count(&hints, s, "n2"), 0);
    ck_assert_uint_eq(hints, 1);
    store_free(s);
    ck_assert_int_eq(restore_hints(&cfg, snap, true, err), 0);
    ck_assert_int_eq(store_open(&s, &o), 0);
    ck_assert_int_eq(store_hint_count(&hints, s, "n2"), 0);
    ck_assert_uint_eq(hints, 0);
    store_free(s);
    /* the snapshot stays, and restores again (an interrupted restore is
     * run again) */
    ck_assert_int_eq(restore(&cfg, snap, err), 0);
    /* a data_dir lost whole takes the snapshot's node.state */
    char cmd[600];
    snprintf(cmd, sizeof(cmd), "rm -rf '%s'", cfg.data_dir);
    ck_assert_int_eq(system(cmd), 0);
    ck_assert_int_eq(restore(&cfg, snap, err), 0);
    struct node_state st;
    ck_assert_int_eq(node_state_load(&st, cfg.data_dir), 0);
    ck_assert_str_eq(st.node_name, "n1");
    ck_assert_int_eq(st.ntokens, 1);
    ck_assert_int_eq(store_open(&s, &o), 0);
    ck_assert(has(s, "old"));
    store_free(s);
}
END_TEST

START_TEST(restore_refuses)
{
    struct node_config cfg = NODE_CONFIG_INIT;
    char snap[512], err[512], p[600];
    make_node_and_snapshot(&cfg, snap, sizeof(snap));
    /* a bad TAG, a folder without a manifest (a copy that did not
     * finish), a path to nothing */
    snprintf(p, sizeof(p), "%s/unfinished", tmp);
    ck_assert_int_eq(mkdir(p, 0755), 0);
    ck_assert_int_eq(restore(&cfg, p, err), RK_ENOTFOUND);
    ck_assert_ptr_nonnull(strstr(err, "missing"));
    ck_assert_int_eq(restore(&cfg, "../s", err), RK_ENOTFOUND);
    ck_assert_ptr_nonnull(strstr(err, "missing"));
    ck_assert_int_eq(restore(&cfg, ".x", err), RK_EBADREQ);
    ck_assert_ptr_nonnull(strstr(err, "bad snapshot tag"));
    ck_assert_int_eq(restore(&cfg, "nosuchtag", err), RK_ENOTFOUND);
    /* another node's or cluster's */
    snprintf(cfg.cluster_name, sizeof(cfg.cluster_name), "other");
    ck_assert_int_eq(restore(&cfg, snap, err), RK_EBADREQ);
    ck_assert_ptr_nonnull(strstr(err, "cluster"));
    snprintf(cfg.cluster_name, sizeof(cfg.cluster_name), "c");
    snprintf(cfg.node_name, sizeof(cfg.node_name), "n2");
    ck_assert_int_eq(restore(&cfg, snap, err), RK_EBADREQ);
    snprintf(cfg.node_name, sizeof(cfg.node_name), "n1");
    /* a data_dir in use */
    int fd;
    ck_assert_int_eq(node_state_lock(&fd, cfg.data_dir), 0);
    ck_assert_int_eq(restore(&cfg, snap, err), RK_EEXIST);
    ck_assert_ptr_nonnull(strstr(err, "stop it first"));
    close(fd);
    /* a range file cut short (a backup copied in part) */
    snprintf(p, sizeof(p), "%s/r.mdb", snap);
    ck_assert_int_eq(truncate(p, 100), 0);
    ck_assert_int_eq(restore(&cfg, snap, err), RK_ECORRUPT);
    ck_assert_ptr_nonnull(strstr(err, "the manifest says"));
    /* none of it touched the data */
    struct store_opts o = STORE_OPTS_INIT;
    o.data_dir = cfg.data_dir;
    store *s;
    ck_assert_int_eq(store_open(&s, &o), 0);
    ck_assert(has(s, "old") && has(s, "new"));
    store_free(s);
}
END_TEST

static Suite *node_snapshot_suite(void)
{
    Suite *s = suite_create("node_snapshot");
    TCase *tc = tcase_create("manifest");
    tcase_add_test(tc, tag_rules);
    tcase_add_test(tc, manifest_roundtrip);
    tcase_add_test(tc, manifest_refused);
    suite_add_tcase(s, tc);
    tc = tcase_create("lock");
    tcase_add_checked_fixture(tc, tmp_setup, tmp_teardown);
    tcase_add_test(tc, lock_held_once);
    suite_add_tcase(s, tc);
    tc = tcase_create("restore");
    tcase_add_checked_fixture(tc, tmp_setup, tmp_teardown);
    tcase_add_test(tc, restore_puts_snapshot_back);
    tcase_add_test(tc, restore_refuses);
    suite_add_tcase(s, tc);
    return s;
}

int main(void)
{
    SRunner *sr = srunner_create(node_snapshot_suite());
    srunner_run_all(sr, CK_NORMAL);
    int failed = srunner_ntests_failed(sr);
    srunner_free(sr);
    return failed == 0 ? EXIT_SUCCESS : EXIT_FAILURE;
}
