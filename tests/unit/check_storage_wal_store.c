/*
 * check_storage_wal_store.c - the store and its commit log (storage/store.c
 * over storage/wal.c): writes that live only in the log replayed at open,
 * twice harmlessly, into a split ring and only where a range holds the
 * token; checkpoints retiring segments, also while writers, splits and
 * merges run; drops (and keeps) not resurrected by replay; writes logged in
 * periodic mode; how the log is written (store_log_direct); a failed env
 * sync keeping the log. The log on its own is in check_storage_wal.c; what
 * both share is in wal_fixture.h.
 *
 * Some tests write log records directly (store__wal_*, log_keys in
 * wal_fixture.h, with the payload format spelled out there: a golden check
 * of it), so a write lives only in the log when the store opens: what a
 * power loss leaves when the env pages had not reached the disk.
 */
#include <dlfcn.h>
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include <check.h>

#include "common/rk.h"
#include "storage/store.h"
#include "storage/wal.h"
#include "tests/unit/wal_fixture.h"

static store *open_store(void)
{
    struct store_opts o = STORE_OPTS_INIT;
    return open_opts(&o);
}

/* ---- sync failures -------------------------------------------------------
 *
 * syncfs is interposed (this executable's definition wins over libc's
 * for the storage code linked into it). Unarmed, it calls libc's. */
static atomic_int fail_syncfs; /* syncfs calls to fail with EIO */

int syncfs(int fd)
{
    static int (*real)(int);
    if (real == NULL)
        real = (int (*)(int))dlsym(RTLD_NEXT, "syncfs");
    if (atomic_load(&fail_syncfs) > 0) {
        atomic_fetch_sub(&fail_syncfs, 1);
        errno = EIO;
        return -1;
    }
    return real(fd);
}

/* store_put keys 0..n-1 with their records. */
static void put_keys(store *s, int n)
{
    for (int i = 0; i < n; i++) {
        char k[32];
        uint8_t rb[64];
        key_of(k, sizeof(k), i);
        size_t rl = rec_of(rb, sizeof(rb), i);
        ck_assert_int_eq(store_put(s, RK_SLICE(k, strlen(k)), RK_SLICE(rb, rl)),
                         0);
    }
}

/* Whether key i reads with its value. */
static bool has_key(store *s, int i)
{
    char k[32];
    uint8_t want[64];
    key_of(k, sizeof(k), i);
    size_t wl = rec_of(want, sizeof(want), i);
    uint8_t *p;
    size_t n;
    int rc = store_get(&p, &n, s, RK_SLICE(k, strlen(k)), 1);
    if (rc == RK_ENOTFOUND)
        return false;
    ck_assert_msg(rc == 0, "get %d: %s", i, rk_strerror(rc));
    bool same = n == wl && memcmp(p, want, n) == 0;
    free(p);
    ck_assert_msg(same, "key %d has a wrong record", i);
    return true;
}

/* Every entry of every env inside its range (nothing misplaced). */
static void check_placement(store *s)
{
    struct store_range *rs;
    size_t n;
    ck_assert_int_eq(store_flush(s), 0); /* info counts applied writes */
    ck_assert_int_eq(store_range_list(&rs, &n, s), 0);
    for (size_t i = 0; i < n; i++) {
        struct store_range_info info;
        struct store_digest d;
        ck_assert_int_eq(store_range_info(&info, s, rs[i]), 0);
        ck_assert_int_eq(store_digest(&d, s, rs[i]), 0);
        ck_assert_uint_eq(info.keys, d.keys);
    }
    free(rs);
}

/* ---- the store and its log ---------------------------------------------- */

/* Regression (env_sync_retry_retired_log): a checkpoint whose sync of the
 * range envs failed was retried, the retry's sync returned 0 (the error
 * having been reported once), and the log segments -- the only durable copy
 * of what the failed sync lost -- were deleted. The failure now sticks:
 * checkpoints fail and the log is kept until the store is reopened. */
START_TEST(regression_env_sync_retry_retired_log)
{
    mk_tmp();
    struct store_opts o = STORE_OPTS_INIT;
    o.sync_method = STORE_SYNC_SYNCFS;
    store *s = open_opts(&o);
    ck_assert_int_eq(store_range_create(s, (struct store_range){0, 0}), 0);
    put_keys(s, 20);
    ck_assert_int_eq(store_failed(s), 0);
    atomic_store(&fail_syncfs, 1);
    ck_assert_int_eq(store_checkpoint(s), -EIO);
    ck_assert_int_eq(atomic_load(&fail_syncfs), 0); /* it was the env sync */
    ck_assert_int_eq(store_checkpoint(s), -EIO);    /* was 0: log retired */
    ck_assert_int_ge(nsegs(), 1);
    ck_assert_int_eq(store_failed(s), -EIO); /* what the node reports */
    store_free(s);
    /* reopened: everything is there (replayed from the kept log) */
    s = open_opts(&o);
    for (int i = 0; i < 20; i++)
        ck_assert(has_key(s, i));
    store_free(s);
    rm_tmp();
}
END_TEST

/* store_log_direct says how the log is written (the node's metric and log
 * line): direct where the file system takes it, unless log_buffered. */
START_TEST(store_log_direct_reports_mode)
{
    mk_tmp();
    bool direct = fs_takes_direct();
    store *s = open_store();
    ck_assert_int_eq(store_log_direct(s), direct);
    store_free(s);
    struct store_opts o = STORE_OPTS_INIT;
    o.log_buffered = true;
    s = open_opts(&o);
    ck_assert_int_eq(store_log_direct(s), 0);
    ck_assert_int_eq(seg_fd_flags(2) & O_DIRECT, 0); /* 1 was retired */
    store_free(s);
    rm_tmp();
}
END_TEST

START_TEST(store_replays_log_only_writes)
{
    mk_tmp();
    store *s = open_store();
    ck_assert_int_eq(store_range_create(s, (struct store_range){0, 0}), 0);
    store_free(s);
    char p[400];
    seg_path(p, sizeof(p), 1); /* a clean close leaves an empty log */
    ck_assert_int_eq(nsegs(), 1);
    ck_assert_int_eq(log_end(p), 0);
    log_keys(10, 30, 1 << 20);
    s = open_store();
    for (int i = 0; i < 300; i++)
        ck_assert_msg(has_key(s, i), "key %d not replayed", i);
    ck_assert_int_eq(nsegs(), 1); /* replayed, synced, retired; a new one */
    store_free(s);
    /* Replaying again (the log of a run that crashed while replaying) is
     * harmless: the same records, merged again. */
    log_keys(10, 30, 1 << 20);
    s = open_store();
    struct store_digest d;
    ck_assert_int_eq(store_digest(&d, s, (struct store_range){0, 0}), 0);
    ck_assert_uint_eq(d.keys, 300);
    store_free(s);
    rm_tmp();
}
END_TEST

START_TEST(store_replay_lands_in_split_ranges)
{
    mk_tmp();
    store *s = open_store();
    ck_assert_int_eq(store_range_create(s, (struct store_range){0, 0}), 0);
    ck_assert_int_eq(
        store_range_split(s, (struct store_range){0, 0}, 1ull << 62), 0);
    ck_assert_int_eq(
        store_range_split(s, (struct store_range){1ull << 62, 0}, 3ull << 62),
        0);
    store_free(s);
    log_keys(8, 50, 1 << 20);
    s = open_store();
    for (int i = 0; i < 400; i++)
        ck_assert(has_key(s, i));
    check_placement(s);
    store_free(s);
    rm_tmp();
}
END_TEST

START_TEST(store_replay_skips_tokens_not_held)
{
    mk_tmp();
    struct store_range half = {0, 1ull << 63};
    store *s = open_store();
    ck_assert_int_eq(store_range_create(s, half), 0);
    store_free(s);
    log_keys(4, 50, 1 << 20);
    s = open_store();
    int held = 0;
    for (int i = 0; i < 200; i++) {
        char k[32];
        key_of(k, sizeof(k), i);
        bool in = store_range_contains(half, rk_token(k, strlen(k)));
        ck_assert_int_eq(has_key(s, i), in);
        held += in;
    }
    ck_assert_int_gt(held, 0);
    ck_assert_int_lt(held, 200);
    store_free(s);
    rm_tmp();
}
END_TEST

START_TEST(store_checkpoint_retires_segments)
{
    mk_tmp();
    struct store_opts o = STORE_OPTS_INIT;
    o.log_segment_bytes = 4096;
    store *s = open_opts(&o);
    ck_assert_int_eq(store_range_create(s, (struct store_range){0, 0}), 0);
    store_batch *b;
    ck_assert_int_eq(store_batch_new(&b), 0);
    for (int r = 0; r < 40; r++) {
        store_batch_reset(b);
        for (int i = r * 25; i < r * 25 + 25; i++) {
            char k[32];
            uint8_t rb[64];
            key_of(k, sizeof(k), i);
            size_t rl = rec_of(rb, sizeof(rb), i);
            ck_assert_int_eq(
                store_batch_add(b, RK_SLICE(k, strlen(k)), RK_SLICE(rb, rl)),
                0);
        }
        ck_assert_int_eq(store_batch_commit(s, b), 0);
        ck_assert_int_eq(store_batch_result(b, 0), 0);
    }
    store_batch_free(b);
    ck_assert_int_eq(store_checkpoint(s), 0);
    ck_assert_int_eq(nsegs(), 1);
    ck_assert_int_eq(nspares(), 2); /* two kept for reuse, the rest gone */
    ck_assert_int_eq(store_checkpoint(s), 0); /* an empty log: nothing */
    ck_assert_int_eq(nsegs(), 1);
    store_free(s);
    s = open_store();
    for (int i = 0; i < 1000; i++)
        ck_assert(has_key(s, i));
    store_free(s);
    rm_tmp();
}
END_TEST

/* A dropped range's logged writes must not come back at replay into a
 * range created again over the same tokens. The child writes, drops (or
 * keeps the other half of a range: store_range_keep), re-creates and exits
 * without closing (no checkpoint but the drop's). */
static void not_resurrected(bool keep)
{
    mk_tmp();
    struct store_range a = {0, 1ull << 63}, bb = {1ull << 63, 0};
    struct store_range whole = {0, 0};
    pid_t pid = fork();
    ck_assert_int_ge(pid, 0);
    if (pid == 0) {
        store *s = NULL;
        struct store_opts o = STORE_OPTS_INIT;
        o.data_dir = tmpdir;
        if (store_open(&s, &o) ||
            (keep ? store_range_create(s, whole)
                  : store_range_create(s, a) || store_range_create(s, bb)))
            _exit(2);
        store_batch *b;
        if (store_batch_new(&b))
            _exit(2);
        for (int i = 0; i < 200; i++) {
            char k[32];
            uint8_t rb[64];
            key_of(k, sizeof(k), i);
            size_t rl = rec_of(rb, sizeof(rb), i);
            if (store_batch_add(b, RK_SLICE(k, strlen(k)), RK_SLICE(rb, rl)))
                _exit(3);
        }
        if (store_batch_commit(s, b) ||
            (keep ? store_range_keep(s, whole, &bb, 1)
                  : store_range_drop(s, a)) ||
            store_range_create(s, a))
            _exit(4);
        _exit(0);
    }
    int st;
    ck_assert_int_eq(waitpid(pid, &st, 0), pid);
    ck_assert(WIFEXITED(st) && WEXITSTATUS(st) == 0);
    store *s = open_store();
    int inb = 0;
    for (int i = 0; i < 200; i++) {
        char k[32];
        key_of(k, sizeof(k), i);
        bool in_a = store_range_contains(a, rk_token(k, strlen(k)));
        ck_assert_msg(has_key(s, i) == !in_a,
                      "key %d: %s after %s + create + replay", i,
                      in_a ? "resurrected" : "lost", keep ? "keep" : "drop");
        inb += !in_a;
    }
    ck_assert_int_gt(inb, 0);
    check_placement(s);
    store_free(s);
    rm_tmp();
}

START_TEST(store_drop_is_not_resurrected_by_replay)
{
    not_resurrected(false);
}
END_TEST

START_TEST(store_keep_is_not_resurrected_by_replay)
{
    not_resurrected(true);
}
END_TEST

struct writer {
    store *s;
    int first, n, rc;
};

static void *writer_main(void *arg)
{
    struct writer *w = arg;
    for (int i = w->first; w->rc == 0 && i < w->first + w->n; i++) {
        char k[32];
        uint8_t rb[64];
        key_of(k, sizeof(k), i);
        size_t rl = rec_of(rb, sizeof(rb), i);
        w->rc = store_put(w->s, RK_SLICE(k, strlen(k)), RK_SLICE(rb, rl));
    }
    return NULL;
}

/* Writers run while segments fill every few commits (checkpoints by the
 * background thread), another thread checkpoints, splits and merges: no
 * deadlock, every write present and placed, also after reopen. */
START_TEST(store_checkpoints_during_writes_and_splits)
{
    mk_tmp();
    struct store_opts o = STORE_OPTS_INIT;
    o.log_segment_bytes = 8192;
    store *s = open_opts(&o);
    struct store_range all = {0, 0};
    ck_assert_int_eq(store_range_create(s, all), 0);
    pthread_t th[4];
    struct writer w[4];
    for (int i = 0; i < 4; i++) {
        w[i] = (struct writer){s, i * 400, 400, 0};
        ck_assert_int_eq(pthread_create(&th[i], NULL, writer_main, &w[i]), 0);
    }
    uint64_t at = 1ull << 63;
    for (int r = 0; r < 6; r++) {
        ck_assert_int_eq(store_checkpoint(s), 0);
        ck_assert_int_eq(store_range_split(s, all, at), 0);
        ck_assert_int_eq(store_checkpoint(s), 0);
        ck_assert_int_eq(store_range_merge(s, (struct store_range){0, at},
                                           (struct store_range){at, 0}),
                         0);
    }
    for (int i = 0; i < 4; i++) {
        pthread_join(th[i], NULL);
        ck_assert_int_eq(w[i].rc, 0);
    }
    for (int i = 0; i < 1600; i++)
        ck_assert(has_key(s, i));
    check_placement(s);
    store_free(s);
    s = open_store();
    for (int i = 0; i < 1600; i++)
        ck_assert(has_key(s, i));
    check_placement(s);
    store_free(s);
    rm_tmp();
}
END_TEST

/* In periodic mode writes are logged too and replayed. */
START_TEST(store_periodic_logs_writes)
{
    mk_tmp();
    struct store_opts o = STORE_OPTS_INIT;
    o.durability = STORE_PERIODIC;
    o.periodic_ms = 10;
    store *s = open_opts(&o);
    ck_assert_int_eq(store_range_create(s, (struct store_range){0, 0}), 0);
    put_keys(s, 50);
    ck_assert_int_eq(store_sync(s), 0);
    struct seen sn;
    memset(&sn, 0, sizeof(sn));
    store__wal *w;
    ck_assert_int_eq(store__wal_open(&w, logdir, 1 << 20), 0);
    ck_assert_int_eq(store__wal_replay(w, seen_cb, NULL, &sn), 0);
    store__wal_free(w);
    ck_assert_int_ge(sn.n, 1); /* store_put groups: 1..50 records */
    ck_assert_int_le(sn.n, 50);
    store_free(s);
    rm_tmp();
}
END_TEST

static Suite *wal_store_suite(void)
{
    Suite *s = suite_create("storage_wal_store");
    TCase *tc = tcase_create("store");
    tcase_set_timeout(tc, 60);
    tcase_add_test(tc, store_replays_log_only_writes);
    tcase_add_test(tc, store_log_direct_reports_mode);
    tcase_add_test(tc, store_replay_lands_in_split_ranges);
    tcase_add_test(tc, store_replay_skips_tokens_not_held);
    tcase_add_test(tc, store_checkpoint_retires_segments);
    tcase_add_test(tc, store_drop_is_not_resurrected_by_replay);
    tcase_add_test(tc, store_keep_is_not_resurrected_by_replay);
    tcase_add_test(tc, store_periodic_logs_writes);
    tcase_add_test(tc, regression_env_sync_retry_retired_log);
    tcase_add_test(tc, store_checkpoints_during_writes_and_splits);
    suite_add_tcase(s, tc);
    return s;
}

int main(void)
{
    SRunner *sr = srunner_create(wal_store_suite());
    srunner_run_all(sr, CK_NORMAL);
    int failed = srunner_ntests_failed(sr);
    srunner_free(sr);
    return failed == 0 ? EXIT_SUCCESS : EXIT_FAILURE;
}
