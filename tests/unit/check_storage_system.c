/*
 * check_storage_system.c - the store's system state (store_sys_*: values,
 * u64s and token lists, several in one transaction) and hints
 * (store_hint_*: count and byte bounds, seqs, deletes by seq, a damaged
 * one), and the store on a full disk (a small tmpfs): an env opened and a
 * compaction started with no room fail with -ENOSPC instead of SIGBUS, and
 * writes are refused at disk_reserve_bytes until space is freed. The
 * full_disk tests need root to mount their tmpfs, and say they were
 * skipped without it.
 *
 * Every test works in its own fresh directory under $TMPDIR (or /tmp), the
 * full_disk tests in one on their tmpfs.
 */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mount.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include <check.h>
#include <lmdb.h>

#include "common/rk.h"
#include "storage/store.h"
#include "tests/unit/store_fill.h"
#include "tests/unit/store_fixture.h"

/* ---- system state and hints --------------------------------------------- */

/* store_sys_write: sets and deletes in one transaction, all or none. */
START_TEST(system_write_many)
{
    mk_tmp();
    store *s = open_store(NULL);
    ck_assert_int_eq(store_sys_set(s, "gone", RK_SLICE("x", 1)), 0);
    const char *names[] = {"a", "b", "gone", "never"};
    struct rk_slice vals[] = {RK_SLICE("1", 1), RK_SLICE("22", 2),
                              RK_SLICE(NULL, 0), RK_SLICE(NULL, 0)};
    ck_assert_int_eq(store_sys_write(s, names, vals, 4), 0);
    uint8_t *p;
    size_t n;
    ck_assert_int_eq(store_sys_get(&p, &n, s, "b"), 0);
    ck_assert(n == 2 && memcmp(p, "22", 2) == 0);
    free(p);
    ck_assert_int_eq(store_sys_get(&p, &n, s, "gone"), RK_ENOTFOUND);
    /* a bad name anywhere: nothing is written */
    const char *bad[] = {"a", ""};
    struct rk_slice bv[] = {RK_SLICE("9", 1), RK_SLICE("9", 1)};
    ck_assert_int_eq(store_sys_write(s, bad, bv, 2), RK_EBADREQ);
    store_free(s);
    s = open_store(NULL);
    ck_assert_int_eq(store_sys_get(&p, &n, s, "a"), 0);
    ck_assert(n == 1 && p[0] == '1');
    free(p);
    ck_assert_int_eq(store_sys_get(&p, &n, s, "gone"), RK_ENOTFOUND);
    store_free(s);
    rm_tmp();
}
END_TEST

START_TEST(system_state)
{
    mk_tmp();
    store *s = open_store(NULL);
    ck_assert_int_eq(store_sys_set(s, "node_name", RK_SLICE("n1", 2)), 0);
    ck_assert_int_eq(store_sys_set_u64(s, "generation", 1234), 0);
    ck_assert_int_eq(store_sys_set_u64(s, "ring_epoch", 7), 0);
    uint64_t toks[3] = {1, UINT64_MAX, 42};
    ck_assert_int_eq(store_sys_set_tokens(s, "tokens", toks, 3), 0);
    ck_assert_int_eq(store_sys_set_u64(s, "stream/x", 99), 0);
    ck_assert_int_eq(store_sys_set(s, "", RK_SLICE("x", 1)), RK_EBADREQ);
    store_free(s);
    s = open_store(NULL);
    uint8_t *p;
    size_t n;
    ck_assert_int_eq(store_sys_get(&p, &n, s, "node_name"), 0);
    ck_assert_uint_eq(n, 2);
    ck_assert_mem_eq(p, "n1", 2);
    free(p);
    uint64_t v;
    ck_assert_int_eq(store_sys_get_u64(&v, s, "generation"), 0);
    ck_assert_uint_eq(v, 1234);
    ck_assert_int_eq(store_sys_get_u64(&v, s, "node_name"), RK_ECORRUPT);
    uint64_t *t;
    ck_assert_int_eq(store_sys_get_tokens(&t, &n, s, "tokens"), 0);
    ck_assert_uint_eq(n, 3);
    ck_assert_mem_eq(t, toks, sizeof(toks));
    free(t);
    ck_assert_int_eq(store_sys_del(s, "stream/x"), 0);
    ck_assert_int_eq(store_sys_get_u64(&v, s, "stream/x"), RK_ENOTFOUND);
    ck_assert_int_eq(store_sys_del(s, "stream/x"), RK_ENOTFOUND);
    store_free(s);
    rm_tmp();
}
END_TEST

struct hints_seen {
    uint64_t seqs[16];
    int n;
};

static int
hint_cb(uint64_t seq, struct rk_slice key, struct rk_slice r, void *arg)
{
    struct hints_seen *h = arg;
    struct store_record rr;
    ck_assert_int_eq(store_record_decode(&rr, r.p, r.len), 0);
    ck_assert_uint_eq(key.len, 2);
    h->seqs[h->n++] = seq;
    return 0;
}

/* Many hints in one transaction: each its own result and seq, in order
 * per node; a bad one or one past a bound does not stop the others. */
START_TEST(hints_add_many)
{
    mk_tmp();
    struct store_opts o = STORE_OPTS_INIT;
    o.max_hints = 3;
    store *s = open_store(&o);
    size_t n;
    uint8_t *r = rec(&n, 1, 0, 0, "v", 1);
    struct store_hint h[6];
    const char *who[6] = {"nodeA", "nodeB", "nodeA", "nodeA", "nodeA", "nodeB"};
    const char *keys[6] = {"a1", "b1", "", "a2", "a3", "b2"};
    for (int i = 0; i < 6; i++)
        h[i] = (struct store_hint){who[i], RK_SLICE(keys[i], strlen(keys[i])),
                                   RK_SLICE(r, n), 99};
    ck_assert_int_eq(store_hint_add_many(s, h, 6), 0);
    int want[6] = {0, 0, RK_EBADREQ, 0, 0, 0};
    for (int i = 0; i < 6; i++)
        ck_assert_int_eq(h[i].result, want[i]);
    /* nodeA holds 3 now: the fourth is refused, nodeB's still fits */
    struct store_hint more[2] = {
        {"nodeA", RK_SLICE("a4", 2), RK_SLICE(r, n), 99},
        {"nodeB", RK_SLICE("b3", 2), RK_SLICE(r, n), 99}};
    ck_assert_int_eq(store_hint_add_many(s, more, 2), 0);
    ck_assert_int_eq(more[0].result, RK_EFULL);
    ck_assert_int_eq(more[1].result, 0);
    uint64_t cnt;
    ck_assert_int_eq(store_hint_count(&cnt, s, "nodeA"), 0);
    ck_assert_uint_eq(cnt, 3);
    ck_assert_int_eq(store_hint_count(&cnt, s, "nodeB"), 0);
    ck_assert_uint_eq(cnt, 3);
    struct hints_seen seen = {0};
    ck_assert_int_eq(store_hint_scan(s, "nodeB", 0, 10, hint_cb, &seen), 0);
    ck_assert_int_eq(seen.n, 3);
    ck_assert_uint_eq(seen.seqs[0], 1);
    ck_assert_uint_eq(seen.seqs[2], 3);
    free(r);
    store_free(s);
    rm_tmp();
}
END_TEST

START_TEST(hints_byte_bound)
{
    mk_tmp();
    struct store_opts o = STORE_OPTS_INIT;
    o.max_hint_bytes = 1000;
    store *s = open_store(&o);
    size_t n;
    uint8_t *r = rec(&n, 1, 0, 0, "0123456789", 10);
    int added = 0, rc;
    while ((rc = store_hint_add(s, "x", RK_SLICE("key", 3), RK_SLICE(r, n))) ==
           0)
        added++;
    ck_assert_int_eq(rc, RK_EFULL);
    /* each hint keeps 4 + 3 + 20 bytes: 37 fit in 1000 */
    ck_assert_int_eq(added, 1000 / (4 + 3 + 20));
    static const uint64_t ten[] = {1, 2, 3, 4, 5, 6, 7, 8, 9, 10};
    ck_assert_int_eq(store_hint_delete_seqs(s, "x", ten, 10), 0); /* frees 10 */
    store_free(s);
    s = open_store(&o); /* the byte count survives reopen */
    added = 0;
    while (store_hint_add(s, "y", RK_SLICE("key", 3), RK_SLICE(r, n)) == 0)
        added++;
    ck_assert_int_eq(added, 10);
    free(r);
    store_free(s);
    rm_tmp();
}
END_TEST

START_TEST(hints)
{
    mk_tmp();
    struct store_opts o = STORE_OPTS_INIT;
    o.max_hints = 5;
    store *s = open_store(&o);
    size_t n;
    uint8_t *r = rec(&n, 1, 0, 0, "v", 1);
    for (int i = 0; i < 5; i++)
        ck_assert_int_eq(
            store_hint_add(s, "nodeA", RK_SLICE("k1", 2), RK_SLICE(r, n)), 0);
    ck_assert_int_eq(
        store_hint_add(s, "nodeA", RK_SLICE("k1", 2), RK_SLICE(r, n)),
        RK_EFULL);
    ck_assert_int_eq(
        store_hint_add(s, "nodeB", RK_SLICE("k2", 2), RK_SLICE(r, n)), 0);
    ck_assert_int_eq(
        store_hint_add(s, "nodeB", RK_SLICE("", 0), RK_SLICE(r, n)),
        RK_EBADREQ);
    uint64_t c;
    ck_assert_int_eq(store_hint_count(&c, s, "nodeA"), 0);
    ck_assert_uint_eq(c, 5);
    struct hints_seen h = {{0}, 0};
    ck_assert_int_eq(store_hint_scan(s, "nodeA", 2, 10, hint_cb, &h), 0);
    ck_assert_int_eq(h.n, 3);
    ck_assert_uint_eq(h.seqs[0], 3);
    ck_assert_uint_eq(h.seqs[2], 5);
    static const uint64_t first3[] = {1, 2, 3};
    ck_assert_int_eq(store_hint_delete_seqs(s, "nodeA", first3, 3), 0);
    ck_assert_int_eq(store_hint_count(&c, s, "nodeA"), 0);
    ck_assert_uint_eq(c, 2);
    store_free(s);
    s = open_store(&o);
    h.n = 0;
    ck_assert_int_eq(store_hint_scan(s, "nodeA", 0, 10, hint_cb, &h), 0);
    ck_assert_int_eq(h.n, 2);
    ck_assert_uint_eq(h.seqs[0], 4);
    /* new hints number after the last */
    ck_assert_int_eq(
        store_hint_add(s, "nodeA", RK_SLICE("k3", 2), RK_SLICE(r, n)), 0);
    h.n = 0;
    ck_assert_int_eq(store_hint_scan(s, "nodeA", 5, 10, hint_cb, &h), 0);
    ck_assert_int_eq(h.n, 1);
    ck_assert_uint_eq(h.seqs[0], 6);
    static const uint64_t rest[] = {4, 5, 6};
    ck_assert_int_eq(store_hint_delete_seqs(s, "nodeA", rest, 3), 0);
    ck_assert_int_eq(store_hint_count(&c, s, "nodeA"), 0);
    ck_assert_uint_eq(c, 0);
    h.n = 0;
    ck_assert_int_eq(store_hint_scan(s, "nodeB", 0, 10, hint_cb, &h), 0);
    ck_assert_int_eq(h.n, 1);
    free(r);
    store_free(s);
    rm_tmp();
}
END_TEST

/* Hints deleted by seq, out of order: those named go (a seq not kept is
 * skipped), the others stay with their seqs, and the count and the byte
 * total shrink by what went. */
START_TEST(hints_delete_seqs)
{
    mk_tmp();
    struct store_opts o = STORE_OPTS_INIT;
    o.max_hint_bytes = 5 * (4 + 2 + 20);
    store *s = open_store(&o);
    size_t n;
    uint8_t *r = rec(&n, 1, 0, 0, "0123456789", 10);
    ck_assert_uint_eq(n, 20);
    for (int i = 0; i < 5; i++)
        ck_assert_int_eq(
            store_hint_add(s, "nodeA", RK_SLICE("k1", 2), RK_SLICE(r, n)), 0);
    ck_assert_int_eq(
        store_hint_add(s, "nodeA", RK_SLICE("k1", 2), RK_SLICE(r, n)),
        RK_EFULL);
    uint64_t del[] = {4, 2, 9, 2};
    ck_assert_int_eq(store_hint_delete_seqs(s, "nodeA", del, 4), 0);
    ck_assert_int_eq(store_hint_delete_seqs(s, "", del, 4), RK_EBADREQ);
    uint64_t c;
    ck_assert_int_eq(store_hint_count(&c, s, "nodeA"), 0);
    ck_assert_uint_eq(c, 3);
    struct hints_seen h = {{0}, 0};
    ck_assert_int_eq(store_hint_scan(s, "nodeA", 0, 10, hint_cb, &h), 0);
    ck_assert_int_eq(h.n, 3);
    ck_assert_uint_eq(h.seqs[0], 1);
    ck_assert_uint_eq(h.seqs[1], 3);
    ck_assert_uint_eq(h.seqs[2], 5);
    store_free(s);
    s = open_store(&o); /* the bytes of the two deleted are free */
    int added = 0;
    while (store_hint_add(s, "nodeB", RK_SLICE("k2", 2), RK_SLICE(r, n)) == 0)
        added++;
    ck_assert_int_eq(added, 2);
    uint64_t all[] = {1, 3, 5};
    ck_assert_int_eq(store_hint_delete_seqs(s, "nodeA", all, 3), 0);
    ck_assert_int_eq(store_hint_count(&c, s, "nodeA"), 0);
    ck_assert_uint_eq(c, 0);
    free(r);
    store_free(s);
    rm_tmp();
}
END_TEST

struct hints_any {
    uint64_t seqs[16];
    size_t klens[16];
    int n;
};

static int
hint_any_cb(uint64_t seq, struct rk_slice key, struct rk_slice r, void *arg)
{
    struct hints_any *h = arg;
    (void)r;
    h->klens[h->n] = key.len;
    h->seqs[h->n++] = seq;
    return 0;
}

/* Regression: a hint whose stored bytes did not split into key and record
 * made every scan stop there with RK_ECORRUPT, so no hint after it was ever
 * replayed (nor the damaged one deleted). */
START_TEST(regression_hint_damaged_stops_scan)
{
    mk_tmp();
    store *s = open_store(NULL);
    size_t n;
    uint8_t *r = rec(&n, 1, 0, 0, "v", 1);
    for (int i = 0; i < 3; i++)
        ck_assert_int_eq(
            store_hint_add(s, "nodeA", RK_SLICE("k1", 2), RK_SLICE(r, n)), 0);
    free(r);
    store_free(s);
    /* hint 2: a key length past the end of its bytes */
    char dir[300];
    snprintf(dir, sizeof(dir), "%s/hints", tmpdir);
    MDB_env *env;
    MDB_dbi dbi;
    MDB_txn *txn = raw_begin(&env, &dbi, dir);
    uint8_t kb[2 + 5 + 8] = {'h', 5, 'n', 'o', 'd', 'e', 'A'};
    be64(kb + 7, 2);
    uint8_t bad[4] = {0xff, 0xff, 0xff, 0xff};
    MDB_val k = {sizeof(kb), kb}, v = {sizeof(bad), bad};
    ck_assert_int_eq(mdb_put(txn, dbi, &k, &v, 0), 0);
    ck_assert_int_eq(mdb_txn_commit(txn), 0);
    mdb_env_close(env);

    s = open_store(NULL);
    struct hints_any h = {{0}, {0}, 0};
    ck_assert_int_eq(store_hint_scan(s, "nodeA", 0, 10, hint_any_cb, &h), 0);
    ck_assert_int_eq(h.n, 3);
    ck_assert_uint_eq(h.seqs[1], 2);
    ck_assert_uint_eq(h.klens[0], 2);
    ck_assert_uint_eq(h.klens[1], 0); /* damaged: an empty key */
    ck_assert_uint_eq(h.klens[2], 2);
    static const uint64_t all3[] = {1, 2, 3};
    ck_assert_int_eq(store_hint_delete_seqs(s, "nodeA", all3, 3), 0);
    uint64_t c;
    ck_assert_int_eq(store_hint_count(&c, s, "nodeA"), 0);
    ck_assert_uint_eq(c, 0);
    store_free(s);
    rm_tmp();
}
END_TEST

/* ---- full disk ---------------------------------------------------------- */

/* A small tmpfs of its own (we run as root in CI; mount(2) is tried and the
 * tests say they were skipped when it is refused), mounted and unmounted
 * by the parent (unchecked fixture), so a test killed by a signal leaves
 * no mount behind. Each test starts by emptying it. */
#define FULL_DISK_MB 32
static char fulldisk[200];
static bool fulldisk_ok;

static void fulldisk_mount(void)
{
    const char *t = getenv("TMPDIR");
    snprintf(fulldisk, sizeof(fulldisk), "%s/rk_full_XXXXXX", t ? t : "/tmp");
    if (mkdtemp(fulldisk) == NULL)
        return;
    char opt[32];
    snprintf(opt, sizeof(opt), "size=%dm", FULL_DISK_MB);
    fulldisk_ok = mount("tmpfs", fulldisk, "tmpfs", 0, opt) == 0;
    if (!fulldisk_ok)
        fprintf(stderr,
                "full_disk tests skipped: mount tmpfs on %s: %s (they need "
                "root)\n",
                fulldisk, strerror(errno));
}

static void fulldisk_unmount(void)
{
    if (fulldisk_ok)
        umount2(fulldisk, MNT_DETACH);
    rmdir(fulldisk);
    fulldisk_ok = false;
}

/* Use the tmpfs, emptied, as tmpdir; false (test skipped) without it. */
static bool fulldisk_begin(void)
{
    if (!fulldisk_ok)
        return false;
    char cmd[300];
    snprintf(cmd, sizeof(cmd), "rm -rf '%s'/*", fulldisk);
    ck_assert_int_eq(system(cmd), 0);
    snprintf(tmpdir, sizeof(tmpdir), "%s/store", fulldisk);
    return true;
}

/* Write zeros to `name` under the tmpfs until it is full. */
static void fill_disk(const char *name)
{
    char p[300];
    snprintf(p, sizeof(p), "%s/%s", fulldisk, name);
    int fd = open(p, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
    ck_assert_int_ge(fd, 0);
    static const char zeros[1 << 16];
    ssize_t w;
    while ((w = write(fd, zeros, sizeof(zeros))) > 0)
        ;
    ck_assert_msg(w < 0 && errno == ENOSPC, "filling %s: %s", p,
                  strerror(errno));
    close(fd);
}

static void free_disk(const char *name)
{
    char p[300];
    snprintf(p, sizeof(p), "%s/%s", fulldisk, name);
    ck_assert_int_eq(unlink(p), 0);
}

/* Whether every byte of dir/name has its blocks (no hole to fault on). */
static void check_allocated(const char *dir, const char *name)
{
    char p[600];
    snprintf(p, sizeof(p), "%s/%s", dir, name);
    struct stat st;
    ck_assert_int_eq(stat(p, &st), 0);
    ck_assert_msg((uint64_t)st.st_blocks * 512 >= (uint64_t)st.st_size,
                  "%s: %lld bytes, %lld allocated", p, (long long)st.st_size,
                  (long long)st.st_blocks * 512);
}

/* The retired log segments kept for reuse in tmpdir's commit log. */
static int log_spares(void)
{
    char p[300];
    snprintf(p, sizeof(p), "%s/commitlog", tmpdir);
    DIR *d = opendir(p);
    ck_assert_ptr_nonnull(d);
    int n = 0;
    for (struct dirent *e; (e = readdir(d)) != NULL;)
        n += strstr(e->d_name, ".spare") != NULL;
    closedir(d);
    return n;
}

static struct store_opts small_opts(bool write_map)
{
    struct store_opts o = STORE_OPTS_INIT;
    o.map_size = (size_t)1 << 20;
    o.log_segment_bytes = (uint64_t)1 << 20;
    o.auto_compact_pct = -1;
    o.write_map = write_map;
    return o;
}

/* Regression env_open_full_disk_enospc: LMDB writes its new lock file
 * (and data.mdb with write_map) through a map of a hole, so opening an env
 * on a full disk died of SIGBUS; it fails with -ENOSPC, the store serves
 * on, and once space is freed the env opens with its mapped files
 * allocated. Both ways of opening range envs. */
START_TEST(env_open_full_disk_enospc)
{
    if (!fulldisk_begin())
        return;
    struct store_opts o = small_opts(_i);
    store *s = open_store(&o);
    uint64_t q = UINT64_MAX / 2;
    struct store_range a = {0, q}, b = {q, 0};
    if (!store_range_contains(a, rk_token("k", 1))) { /* a holds "k" */
        a = (struct store_range){q, 0};
        b = (struct store_range){0, q};
    }
    ck_assert_int_eq(store_range_create(s, a), 0);
    ck_assert_int_eq(put(s, "k", 1, "v"), 0);
    ck_assert_int_eq(store_flush(s), 0);
    fill_disk("filler");
    int rc = store_range_create(s, b);
    ck_assert_msg(rc == -ENOSPC, "create on a full disk: %s", rk_strerror(rc));
    expect(s, "k", "v");
    free_disk("filler");
    ck_assert_int_eq(store_range_create(s, b), 0);
    char dir[512];
    snprintf(dir, sizeof(dir), "%s/ranges/%016llx_%016llx", tmpdir,
             (unsigned long long)b.start, (unsigned long long)b.end);
    check_allocated(dir, "lock.mdb");
    if (o.write_map)
        check_allocated(dir, "data.mdb");
    store_free(s);
    s = open_store(&o);
    expect(s, "k", "v");
    store_free(s);
}
END_TEST

/* Regression compaction_on_full_disk_no_sigbus: the compactor's new env on
 * a full disk died of SIGBUS (store__rewrite -> store__new_env ->
 * mdb_env_open). A compaction (and a keep, a split) with no room for its
 * copy is skipped with -ENOSPC before it writes anything, counted and
 * reported once a minute per range; the data stays readable and writable
 * enough to serve, and with space freed the compaction runs. */
START_TEST(compaction_on_full_disk_no_sigbus)
{
    if (!fulldisk_begin())
        return;
    struct store_opts o = small_opts(false);
    o.memtable_bytes = 1; /* applied at once: pages half full */
    store *s = open_store(&o);
    ck_assert_int_eq(store_range_create(s, WHOLE), 0);
    fill(s, NK, 3);
    ck_assert_int_eq(store_checkpoint(s), 0);
    struct store_digest d0, d1;
    ck_assert_int_eq(store_digest(&d0, s, WHOLE), 0);
    fill_disk("filler");
    int rc = store_range_compact(s, WHOLE);
    ck_assert_msg(rc == -ENOSPC, "compact on a full disk: %s", rk_strerror(rc));
    struct store_range half[1] = {{0, UINT64_MAX / 2}};
    ck_assert_int_eq(store_range_keep(s, WHOLE, half, 1), -ENOSPC);
    ck_assert_int_eq(store_range_split(s, WHOLE, UINT64_MAX / 2), -ENOSPC);
    ck_assert_uint_eq(store_space_skips(s), 3);
    struct store_space_skip sk[4];
    ck_assert_uint_eq(store_space_skips_take(sk, 4, s), 1); /* a minute */
    ck_assert_str_eq(sk[0].job, "compact");
    ck_assert_uint_eq(sk[0].skips, 1);
    ck_assert(sk[0].r.start == 0 && sk[0].r.end == 0);
    ck_assert_uint_lt(sk[0].avail, sk[0].need);
    ck_assert_uint_eq(store_space_skips_take(sk, 4, s), 0);
    check_all(s, NK, 3);
    free_disk("filler");
    ck_assert_int_eq(store_range_compact(s, WHOLE), 0);
    ck_assert_int_eq(store_digest(&d1, s, WHOLE), 0);
    ck_assert_uint_eq(d1.hash, d0.hash);
    ck_assert_uint_eq(d1.keys, d0.keys);
    store_free(s);
    s = open_store(&o);
    check_all(s, NK, 3);
    store_free(s);
}
END_TEST

/* Leave about `left` bytes free on the tmpfs: fill it, then give back
 * that much of the filler (its blocks are freed at once). */
static void fill_disk_but(const char *name, off_t left)
{
    fill_disk(name);
    char p[300];
    snprintf(p, sizeof(p), "%s/%s", fulldisk, name);
    struct stat st;
    ck_assert_int_eq(stat(p, &st), 0);
    ck_assert_int_ge(st.st_size, left);
    ck_assert_int_eq(truncate(p, st.st_size - left), 0);
}

/* Poll the reserve's state until `low` is as wanted (the background
 * thread looks once a second); fails after 20 s. */
static void space_wait(store *s, bool low)
{
    struct store_space_info si;
    for (int i = 0; i < 400; i++) {
        store_space_info(&si, s);
        if (si.low == low)
            return;
        struct timespec d = {0, 50 * 1000000};
        nanosleep(&d, NULL);
    }
    ck_abort_msg("the reserve never became %s (free %llu of %llu)",
                 low ? "low" : "clear", (unsigned long long)si.avail,
                 (unsigned long long)si.reserve);
}

/* Regression full_disk_refused_at_reserve: a store whose disk filled
 * took writes until the commit log's write came short (EIO) and gave no
 * sign before. With disk_reserve_bytes, writes that would leave less
 * free are refused with RK_EFULL before anything is written, reads go on,
 * the state is reported (store_space_info), and writes are taken again,
 * without a reopen, once space is freed. Meanwhile the commit log keeps
 * no spare segments (wal.c): their room is given back. */
START_TEST(regression_full_disk_refused_at_reserve)
{
    if (!fulldisk_begin())
        return;
    struct store_opts o = small_opts(false);
    o.disk_reserve_bytes = (uint64_t)4 << 20;
    store *s = open_store(&o);
    ck_assert_int_eq(store_range_create(s, WHOLE), 0);
    ck_assert_int_eq(put(s, "k1", 1, "v1"), 0);
    /* 3 MiB logged in 1 MiB segments, then a checkpoint: spares kept */
    static char big[64 << 10];
    memset(big, 'b', sizeof(big) - 1);
    for (int i = 0; i < 48; i++) /* one key: the env stays small */
        ck_assert_int_eq(put(s, "big", (uint64_t)i + 1, big), 0);
    ck_assert_int_eq(store_checkpoint(s), 0);
    ck_assert_int_eq(log_spares(), 2);
    struct store_space_info si;
    store_space_info(&si, s);
    ck_assert(!si.low);
    ck_assert_uint_eq(si.reserve, o.disk_reserve_bytes);
    ck_assert_uint_ge(si.avail, o.disk_reserve_bytes);
    /* the loops' lock-free look (node__disk_full): ~25 of 32 MiB free is
     * over the reserve and its margin (4 + 8 MiB) */
    ck_assert(!store_space_near_full(s));

    fill_disk_but("filler", 2 << 20); /* room, but under the reserve */
    space_wait(s, true);
    ck_assert(store_space_near_full(s));
    /* short of space, the log keeps no spares (the background thread's
     * next second) */
    for (int i = 0; i < 400 && log_spares() > 0; i++) {
        struct timespec d = {0, 50 * 1000000};
        nanosleep(&d, NULL);
    }
    ck_assert_int_eq(log_spares(), 0);
    ck_assert_int_eq(put(s, "k2", 1, "v2"), RK_EFULL);
    expect(s, "k2", NULL);
    expect(s, "k1", "v1"); /* reads go on */
    ck_assert_int_eq(store_failed(s), 0);
    store_space_info(&si, s);
    ck_assert(si.low);
    ck_assert_uint_ge(si.refused, 1);
    ck_assert_uint_eq(si.episodes, 1);
    ck_assert_uint_lt(si.avail, o.disk_reserve_bytes);

    free_disk("filler");
    space_wait(s, false);
    ck_assert(!store_space_near_full(s));
    ck_assert_int_eq(put(s, "k3", 1, "v3"), 0);
    expect(s, "k3", "v3");
    store_free(s);
    s = open_store(&o);
    expect(s, "k1", "v1");
    expect(s, "k2", NULL);
    expect(s, "k3", "v3");
    store_free(s);
}
END_TEST

static Suite *system_suite(void)
{
    Suite *s = suite_create("storage_system");
    TCase *tc = tcase_create("system");
    tcase_add_test(tc, system_state);
    tcase_add_test(tc, system_write_many);
    tcase_add_test(tc, hints);
    tcase_add_test(tc, hints_add_many);
    tcase_add_test(tc, hints_byte_bound);
    tcase_add_test(tc, hints_delete_seqs);
    tcase_add_test(tc, regression_hint_damaged_stops_scan);
    suite_add_tcase(s, tc);
    tc = tcase_create("full_disk");
    tcase_set_timeout(tc, 60);
    tcase_add_unchecked_fixture(tc, fulldisk_mount, fulldisk_unmount);
    tcase_add_loop_test(tc, env_open_full_disk_enospc, 0, 2); /* write_map */
    tcase_add_test(tc, compaction_on_full_disk_no_sigbus);
    tcase_add_test(tc, regression_full_disk_refused_at_reserve);
    suite_add_tcase(s, tc);
    return s;
}

int main(void)
{
    SRunner *sr = srunner_create(system_suite());
    srunner_run_all(sr, CK_NORMAL);
    int failed = srunner_ntests_failed(sr);
    srunner_free(sr);
    return failed == 0 ? EXIT_SUCCESS : EXIT_FAILURE;
}
