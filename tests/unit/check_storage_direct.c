/*
 * check_storage_direct.c - chunks copied from a peer written straight into
 * the range envs (store_batch_commit_direct, storage/writes.c): merged
 * last-write-wins with the env's record and with the memtable's in both
 * orders, tombstones and expiring records kept as they are, and durable
 * without the commit log (after kill -9, with the log deleted, they are
 * there). Apart from check_storage.c, which is past its size already.
 *
 * Every test works in its own fresh directory under $TMPDIR (or /tmp).
 */
#include <fcntl.h>
#include <inttypes.h>
#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include <check.h>

#include "common/rk.h"
#include "storage/store.h"
#include "tests/unit/store_fixture.h"

/* ---- helpers ------------------------------------------------------------ */

/* Add a write of key = val (NULL: a tombstone) at ts, expiring at exp (0:
 * never), to b. */
static void
add(store_batch *b, const char *key, uint64_t ts, const char *val, uint64_t exp)
{
    size_t n;
    uint8_t flags =
        (val ? 0 : STORE_REC_TOMBSTONE) | (exp ? STORE_REC_EXPIRES : 0);
    uint8_t *r = rec(&n, ts, flags, exp, val, val ? strlen(val) : 0);
    ck_assert_int_eq(
        store_batch_add(b, RK_SLICE(key, strlen(key)), RK_SLICE(r, n)), 0);
    free(r);
}

/* Commit b directly; every write's result must be 0. */
static void commit_direct(store *s, store_batch *b)
{
    ck_assert_int_eq(store_batch_commit_direct(s, b, true), 0);
    for (size_t i = 0; i < store_batch_count(b); i++)
        ck_assert_msg(store_batch_result(b, i) == 0, "write %zu: %s", i,
                      rk_strerror(store_batch_result(b, i)));
}

/* One direct write of key = val (NULL: tombstone) at ts. */
static void direct(store *s, const char *key, uint64_t ts, const char *val)
{
    store_batch *b;
    ck_assert_int_eq(store_batch_new(&b), 0);
    add(b, key, ts, val, 0);
    commit_direct(s, b);
    store_batch_free(b);
}

/* The raw record of key (tombstones and expired ones too); its flags and
 * timestamp. False when absent. */
static bool raw(store *s, const char *key, uint64_t *ts, uint8_t *flags)
{
    uint8_t *p;
    size_t n;
    int rc = store_get_raw(&p, &n, s, RK_SLICE(key, strlen(key)));
    if (rc == RK_ENOTFOUND)
        return false;
    ck_assert_int_eq(rc, 0);
    struct store_record r;
    ck_assert_int_eq(store_record_decode(&r, p, n), 0);
    *ts = r.ts;
    *flags = r.flags;
    free(p);
    return true;
}

static uint64_t env_keys(store *s)
{
    struct store_range_info info;
    ck_assert_int_eq(store_range_info(&info, s, WHOLE), 0);
    return info.keys;
}

static struct store_mem_info mem_info(store *s)
{
    struct store_mem_info mi;
    store_mem_info(&mi, s);
    return mi;
}

static uint64_t mem_applies(store *s)
{
    return mem_info(s).applies;
}

/* Reads the memtable answered alone (store.c, store__mem_find). */
static uint64_t known_reads(store *s)
{
    return mem_info(s).known_reads;
}

/* ---- tests -------------------------------------------------------------- */

/* Against records in the env: an older write loses, a newer one wins, a
 * tombstone at a value's timestamp wins and a value at a tombstone's
 * loses, new keys (an expiring one too) go in; all of it in the env at
 * once, nothing in the memtable, and the same after a reopen. */
START_TEST(direct_lww_against_env)
{
    mk_tmp();
    store *s = open_store(NULL);
    ck_assert_int_eq(store_range_create(s, WHOLE), 0);
    ck_assert_int_eq(put(s, "a", 20, "env"), 0);
    ck_assert_int_eq(put(s, "b", 20, "env"), 0);
    ck_assert_int_eq(put(s, "c", 20, "env"), 0);
    ck_assert_int_eq(put(s, "t", 40, "env"), 0);
    ck_assert_int_eq(put(s, "u", 40, NULL), 0);
    ck_assert_int_eq(store_flush(s), 0);
    ck_assert_uint_eq(env_keys(s), 5);
    store_batch *b;
    ck_assert_int_eq(store_batch_new(&b), 0);
    add(b, "a", 10, "old", 0);   /* loses */
    add(b, "b", 30, "new", 0);   /* wins */
    add(b, "c", 30, NULL, 0);    /* a newer tombstone wins */
    add(b, "t", 40, NULL, 0);    /* a tombstone wins a tie */
    add(b, "u", 40, "value", 0); /* a value loses one */
    add(b, "d", 5, "fresh", 0);
    add(b, "e", 5, "ttl", 100); /* expires at 100 ms */
    commit_direct(s, b);
    store_batch_free(b);
    struct store_mem_info mi;
    store_mem_info(&mi, s);
    ck_assert_uint_eq(mi.writes, 0);
    ck_assert_uint_eq(env_keys(s), 7);
    for (int round = 0; round < 2; round++) {
        expect(s, "a", "env");
        expect(s, "b", "new");
        expect(s, "c", NULL);
        expect(s, "t", NULL);
        expect(s, "u", NULL);
        expect(s, "d", "fresh");
        char *v = get(s, "e", 50);
        ck_assert_str_eq(v, "ttl");
        free(v);
        ck_assert_ptr_null(get(s, "e", 200));
        uint64_t ts;
        uint8_t flags;
        ck_assert(raw(s, "c", &ts, &flags));
        ck_assert(flags & STORE_REC_TOMBSTONE);
        ck_assert_uint_eq(ts, 30);
        ck_assert(raw(s, "u", &ts, &flags));
        ck_assert(flags & STORE_REC_TOMBSTONE);
        ck_assert(raw(s, "e", &ts, &flags)); /* expired, still kept */
        ck_assert(flags & STORE_REC_EXPIRES);
        store_free(s);
        s = open_store(NULL);
    }
    store_free(s);
    rm_tmp();
}
END_TEST

/* A live write that reached the memtable first, newer than the streamed
 * record (or the same record): the streamed one is left out (result 0, the
 * env not written while the memtable has not been applied), and the
 * memtable's stays after its apply and after a reopen. A write with no
 * local range gets RK_ENOTFOUND. */
START_TEST(direct_loses_to_newer_memtable)
{
    mk_tmp();
    store *s = open_store(NULL);
    ck_assert_int_eq(store_range_create(s, WHOLE), 0);
    uint64_t applies = mem_applies(s);
    ck_assert_int_eq(put(s, "a", 30, "live"), 0);
    ck_assert_int_eq(put(s, "b", 30, "same"), 0);
    ck_assert_int_eq(put(s, "c", 30, NULL), 0); /* a live delete */
    store_batch *b;
    ck_assert_int_eq(store_batch_new(&b), 0);
    add(b, "a", 20, "streamed", 0);
    add(b, "b", 30, "same", 0);
    add(b, "c", 20, "streamed", 0);
    commit_direct(s, b);
    store_batch_free(b);
    /* unless the background apply ran meanwhile (a second after the
     * writes), nothing went into the env */
    if (mem_applies(s) == applies)
        ck_assert_uint_eq(env_keys(s), 0);
    for (int round = 0; round < 3; round++) {
        expect(s, "a", "live");
        expect(s, "b", "same");
        expect(s, "c", NULL);
        if (round == 0) {
            ck_assert_int_eq(store_flush(s), 0);
        } else if (round == 1) {
            store_free(s);
            s = open_store(NULL);
        }
    }
    store_free(s);
    rm_tmp();

    mk_tmp();
    s = open_store(NULL);
    struct store_range lo = {0, UINT64_C(1) << 63};
    ck_assert_int_eq(store_range_create(s, lo), 0);
    ck_assert_int_eq(store_batch_new(&b), 0);
    for (int i = 0; i < 32; i++) {
        char k[16];
        snprintf(k, sizeof(k), "k%d", i);
        add(b, k, 5, "v", 0);
    }
    ck_assert_int_eq(store_batch_commit_direct(s, b, true), 0);
    int held = 0, missing = 0;
    for (size_t i = 0; i < store_batch_count(b); i++) {
        int rc = store_batch_result(b, i);
        ck_assert_msg(rc == 0 || rc == RK_ENOTFOUND, "%s", rk_strerror(rc));
        held += rc == 0;
        missing += rc == RK_ENOTFOUND;
    }
    ck_assert_int_gt(held, 0);
    ck_assert_int_gt(missing, 0);
    struct store_range_info info;
    ck_assert_int_eq(store_range_info(&info, s, lo), 0);
    ck_assert_uint_eq(info.keys, (uint64_t)held);
    store_batch_free(b);
    store_free(s);
    rm_tmp();
}
END_TEST

/* The other order: an older write in the memtable (a value, a tombstone)
 * when the streamed record arrives. The streamed one wins at once, and
 * still after the memtable's apply, a checkpoint and a reopen. */
START_TEST(older_memtable_applied_after_direct_loses)
{
    mk_tmp();
    store *s = open_store(NULL);
    ck_assert_int_eq(store_range_create(s, WHOLE), 0);
    ck_assert_int_eq(put(s, "a", 10, "live-old"), 0);
    ck_assert_int_eq(put(s, "b", 10, NULL), 0);
    direct(s, "a", 20, "streamed");
    direct(s, "b", 20, "streamed");
    for (int round = 0; round < 4; round++) {
        expect(s, "a", "streamed");
        expect(s, "b", "streamed");
        if (round == 0)
            ck_assert_int_eq(store_flush(s), 0); /* applies a@10, b@10 */
        else if (round == 1)
            ck_assert_int_eq(store_checkpoint(s), 0);
        else if (round == 2) {
            store_free(s);
            s = open_store(NULL);
        }
    }
    store_free(s);
    rm_tmp();
}
END_TEST

/* Reads that the memtable answers alone (issue 30). A write newer than
 * every record in the envs (the store's ts_bound) is marked known as it
 * enters the memtable, and reads of it skip the env; so does a newer write
 * replacing it. A streamed chunk committed straight into the env voids
 * every mark and raises the bound: a write no newer than the chunk is not
 * marked. An older write than the bound is marked by its first read, when
 * that finds it newer than the env's. The bound survives a reopen (a
 * saved ceiling) and, in a store without one, is read from the envs. Each
 * "expect" below read an older record before its fix. */
START_TEST(regression_known_memtable_record_hides_newer_streamed)
{
    mk_tmp();
    store *s = open_store(NULL);
    ck_assert_int_eq(store_range_create(s, WHOLE), 0);
    ck_assert_int_eq(put(s, "a", 10, "live"), 0);
    uint64_t k0 = known_reads(s);
    expect(s, "a", "live"); /* marked as it came: above every env's */
    ck_assert_uint_eq(known_reads(s), k0 + 1);
    ck_assert_int_eq(put(s, "a", 20, "newer"), 0); /* keeps the mark */
    expect(s, "a", "newer");
    ck_assert_uint_eq(known_reads(s), k0 + 2);
    direct(s, "a", 30, "streamed");
    expect(s, "a", "streamed"); /* the mark is void */
    ck_assert_uint_eq(known_reads(s), k0 + 2);
    ck_assert_int_eq(put(s, "a", 25, "late"), 0); /* not above the chunk */
    expect(s, "a", "streamed");
    expect(s, "a", "streamed");
    ck_assert_uint_eq(known_reads(s), k0 + 2);
    ck_assert_int_eq(put(s, "a", 40, "live2"), 0);
    expect(s, "a", "live2");
    ck_assert_uint_eq(known_reads(s), k0 + 3);
    /* applied: a write older than it is not marked, and loses */
    ck_assert_int_eq(store_flush(s), 0);
    ck_assert_int_eq(put(s, "a", 35, "late"), 0);
    expect(s, "a", "live2");
    expect(s, "a", "live2");
    ck_assert_uint_eq(known_reads(s), k0 + 3);
    /* below the bound but newer than its key's env record (none): marked
     * by its first read */
    ck_assert_int_eq(put(s, "c", 5, "c5"), 0);
    expect(s, "c", "c5");
    ck_assert_uint_eq(known_reads(s), k0 + 3);
    expect(s, "c", "c5");
    ck_assert_uint_eq(known_reads(s), k0 + 4);
    /* reopened: the bound is the saved ceiling, not 0 */
    ck_assert_int_eq(store_flush(s), 0);
    store_free(s);
    s = open_store(NULL);
    ck_assert_int_eq(put(s, "a", 38, "after reopen"), 0);
    expect(s, "a", "live2");
    expect(s, "a", "live2");
    /* a store written before the ceiling was kept: read from the envs */
    ck_assert_int_eq(store_flush(s), 0);
    ck_assert_int_eq(store_sys_del(s, "storage_ts_ceiling"), 0);
    store_free(s);
    s = open_store(NULL);
    ck_assert_int_eq(put(s, "a", 39, "no ceiling"), 0);
    expect(s, "a", "live2");
    expect(s, "a", "live2");
    store_free(s);
    rm_tmp();
}
END_TEST

/* An env adopted whole (a restored snapshot) raises the bound by its
 * records: a later write older than the adopted record is not marked. */
START_TEST(regression_known_write_hides_newer_adopted)
{
    mk_tmp();
    char src[256], file[300];
    store *s1 = open_store(NULL);
    ck_assert_int_eq(store_range_create(s1, WHOLE), 0);
    ck_assert_int_eq(put(s1, "a", 50, "adopted"), 0);
    ck_assert_int_eq(store_flush(s1), 0);
    snprintf(file, sizeof(file), "%s/copy.mdb", tmpdir);
    int fd = open(file, O_WRONLY | O_CREAT | O_TRUNC, 0644);
    ck_assert_int_ge(fd, 0);
    ck_assert_int_eq(store_range_copy_fd(s1, WHOLE, fd), 0);
    close(fd);
    store_free(s1);
    memcpy(src, tmpdir, sizeof(src));

    mk_tmp();
    char moved[300];
    snprintf(moved, sizeof(moved), "%s/in.mdb", tmpdir);
    ck_assert_int_eq(rename(file, moved), 0);
    store *s = open_store(NULL);
    ck_assert_int_eq(store_range_adopt(s, WHOLE, moved), 0);
    ck_assert_int_eq(put(s, "a", 45, "mine"), 0);
    expect(s, "a", "adopted");
    expect(s, "a", "adopted");
    store_free(s);
    rm_tmp();
    memcpy(tmpdir, src, sizeof(src));
    rm_tmp();
}
END_TEST

/* The same under threads: chunks stream in with rising timestamps while
 * live writes, each newer than the last chunk, reach the memtable and get
 * marked by a reader, and the memtable is applied now and then. Every
 * read must see at least the last chunk committed before it began. */
struct known_race {
    store *s;
    atomic_uint_fast64_t committed; /* ts of the last chunk committed */
    atomic_bool stop;
    uint64_t bad_ts, bad_want;
};

static void *known_race_reader(void *arg)
{
    struct known_race *k = arg;
    while (!atomic_load(&k->stop)) {
        uint64_t want = atomic_load(&k->committed), ts;
        uint8_t flags;
        if (raw(k->s, "a", &ts, &flags) && ts < want && k->bad_want == 0) {
            k->bad_ts = ts;
            k->bad_want = want;
        }
    }
    return NULL;
}

static void *known_race_live(void *arg)
{
    struct known_race *k = arg;
    for (int i = 0; !atomic_load(&k->stop); i++) {
        ck_assert_int_eq(put(k->s, "a", atomic_load(&k->committed) + 1, "l"),
                         0);
        if (i % 64 == 63)
            ck_assert_int_eq(store_flush(k->s), 0);
    }
    return NULL;
}

START_TEST(known_memtable_records_under_streaming)
{
    mk_tmp();
    struct known_race k = {.s = open_store(NULL)};
    ck_assert_int_eq(store_range_create(k.s, WHOLE), 0);
    direct(k.s, "a", 2, "d");
    atomic_store(&k.committed, 2);
    pthread_t r, l;
    ck_assert_int_eq(pthread_create(&r, NULL, known_race_reader, &k), 0);
    ck_assert_int_eq(pthread_create(&l, NULL, known_race_live, &k), 0);
    uint64_t k0 = known_reads(k.s);
    for (uint64_t ts = 4; ts <= 2000; ts += 2) {
        store_batch *b;
        ck_assert_int_eq(store_batch_new(&b), 0);
        add(b, "a", ts, "d", 0);
        ck_assert_int_eq(store_batch_commit_direct(k.s, b, false), 0);
        store_batch_free(b);
        atomic_store(&k.committed, ts);
        usleep(200);
    }
    atomic_store(&k.stop, true);
    pthread_join(r, NULL);
    pthread_join(l, NULL);
    ck_assert_msg(k.bad_want == 0,
                  "read ts %" PRIu64 " after %" PRIu64 " was committed",
                  k.bad_ts, k.bad_want);
    /* the marks were in play */
    ck_assert_uint_gt(known_reads(k.s), k0);
    store_free(k.s);
    rm_tmp();
}
END_TEST

/* Durable without the commit log: a child commits a chunk directly (and
 * an older write of one of its keys through the log) and is killed with
 * SIGKILL, before any checkpoint; the commit log is deleted; the store
 * reopens with the chunk in it, and the log's older write, had it been
 * replayed, would have lost (tested with the log kept too). The chunk is
 * synced by the commit, or committed unsynced and then synced by
 * store_sync_envs. */
START_TEST(direct_durable_without_log)
{
    for (int round = 0; round < 4; round++) {
        bool keep_log = round & 1, sync = round < 2;
        mk_tmp();
        store *s = open_store(NULL);
        ck_assert_int_eq(store_range_create(s, WHOLE), 0);
        store_free(s);
        int fds[2];
        ck_assert_int_eq(pipe(fds), 0);
        pid_t pid = fork();
        ck_assert_int_ge(pid, 0);
        if (pid == 0) {
            close(fds[0]);
            struct store_opts o = STORE_OPTS_INIT;
            o.data_dir = tmpdir;
            store *c = NULL;
            if (store_open(&c, &o) != 0 || put(c, "x", 10, "logged") != 0)
                _exit(2);
            store_batch *b;
            if (store_batch_new(&b) != 0)
                _exit(3);
            for (int i = 0; i < 64; i++) {
                char k[16];
                snprintf(k, sizeof(k), "k%d", i);
                add(b, k, 5, k, 0);
            }
            add(b, "x", 20, "streamed", 0);
            if (store_batch_commit_direct(c, b, sync) != 0)
                _exit(4);
            for (size_t i = 0; i < store_batch_count(b); i++)
                if (store_batch_result(b, i) != 0)
                    _exit(5);
            if (!sync && store_sync_envs(c) != 0)
                _exit(8);
            char ok = 1;
            if (write(fds[1], &ok, 1) != 1)
                _exit(6);
            pause();
            _exit(7);
        }
        close(fds[1]);
        char ok = 0;
        ck_assert_int_eq(read(fds[0], &ok, 1), 1);
        close(fds[0]);
        ck_assert_int_eq(kill(pid, SIGKILL), 0);
        int st;
        ck_assert_int_eq(waitpid(pid, &st, 0), pid);
        ck_assert(WIFSIGNALED(st));
        if (!keep_log) {
            char cmd[400];
            snprintf(cmd, sizeof(cmd), "rm -f '%s'/commitlog/*", tmpdir);
            ck_assert_int_eq(system(cmd), 0);
        }
        s = open_store(NULL);
        for (int i = 0; i < 64; i++) {
            char k[16];
            snprintf(k, sizeof(k), "k%d", i);
            expect(s, k, k);
        }
        expect(s, "x", "streamed");
        store_free(s);
        rm_tmp();
    }
}
END_TEST

static Suite *direct_suite(void)
{
    Suite *s = suite_create("storage_direct");
    TCase *tc = tcase_create("direct");
    tcase_add_test(tc, direct_lww_against_env);
    tcase_add_test(tc, direct_loses_to_newer_memtable);
    tcase_add_test(tc, older_memtable_applied_after_direct_loses);
    tcase_add_test(tc, direct_durable_without_log);
    tcase_add_test(tc, regression_known_memtable_record_hides_newer_streamed);
    tcase_add_test(tc, regression_known_write_hides_newer_adopted);
    tcase_add_test(tc, known_memtable_records_under_streaming);
    suite_add_tcase(s, tc);
    return s;
}

int main(void)
{
    SRunner *sr = srunner_create(direct_suite());
    srunner_run_all(sr, CK_NORMAL);
    int failed = srunner_ntests_failed(sr);
    srunner_free(sr);
    return failed == 0 ? EXIT_SUCCESS : EXIT_FAILURE;
}
