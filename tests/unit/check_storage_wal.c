/*
 * check_storage_wal.c - the commit log itself (storage/wal.c): append/replay
 * round trip, torn tails, corruption, stray files, direct and buffered
 * writes, the zero fill ahead of the records, recycled segments, appends of
 * several records at once, and failed writes and syncs (interposed pwrite,
 * openat and fdatasync). The store's use of the log (replay into a split
 * ring, checkpoints retiring segments, drops not resurrected by replay) is
 * in check_storage_wal_store.c; what both share is in wal_fixture.h.
 */
#include <dirent.h>
#include <dlfcn.h>
#include <errno.h>
#include <fcntl.h>
#include <linux/kcmp.h>
#include <pthread.h>
#include <sched.h>
#include <signal.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <check.h>

#include "common/rk.h"
#include "storage/store.h"
#include "storage/wal.h"
#include "tests/unit/wal_fixture.h"

static off_t fsize(const char *p)
{
    struct stat st;
    ck_assert_int_eq(stat(p, &st), 0);
    return st.st_size;
}

/* ---- sync failures -------------------------------------------------------
 *
 * fdatasync is interposed (this executable's definition wins over libc's
 * for the storage code linked into it). Unarmed, it calls libc's; syncfs
 * is interposed in check_storage_wal_store.c. */
static atomic_int hold_sync; /* the next fdatasync waits for release_sync,
                                then fails with EIO */
static atomic_int sync_entered, sync_released;
static atomic_int pwrites;              /* pwrite calls, counted always */
static atomic_int refuse_direct_writes; /* writes to an O_DIRECT fd fail
                                           with EINVAL while set */
static atomic_int slow_zeros;           /* writes of 4 KiB or more of zeros (the
                                           zero fill's) take 1 ms more while set */

ssize_t pwrite(int fd, const void *p, size_t n, off_t at)
{
    static ssize_t (*real)(int, const void *, size_t, off_t);
    static const uint8_t zero[4096];
    if (real == NULL)
        real = (ssize_t(*)(int, const void *, size_t, off_t))dlsym(RTLD_NEXT,
                                                                   "pwrite");
    atomic_fetch_add(&pwrites, 1);
    if (atomic_load(&refuse_direct_writes) && (fcntl(fd, F_GETFL) & O_DIRECT)) {
        errno = EINVAL;
        return -1;
    }
    if (atomic_load(&slow_zeros) && n >= sizeof(zero) &&
        memcmp(p, zero, sizeof(zero)) == 0 &&
        memcmp((const uint8_t *)p + n - sizeof(zero), zero, sizeof(zero)) == 0)
        usleep(1000);
    return real(fd, p, n, at);
}

/* openat with O_DIRECT fails with EINVAL while set, as on a file system
 * without direct I/O. */
static atomic_int refuse_direct;

int openat(int dirfd, const char *path, int flags, ...)
{
    static int (*real)(int, const char *, int, ...);
    if (real == NULL)
        real = (int (*)(int, const char *, int, ...))dlsym(RTLD_NEXT, "openat");
    int mode = 0;
    if ((flags & O_CREAT) || (flags & O_TMPFILE) == O_TMPFILE) {
        va_list ap;
        va_start(ap, flags);
        mode = va_arg(ap, int);
        va_end(ap);
    }
    if ((flags & O_DIRECT) && atomic_load(&refuse_direct)) {
        errno = EINVAL;
        return -1;
    }
    return real(dirfd, path, flags, mode);
}

/* A writeback error as Linux reports it (errseq): once armed, the next
 * fdatasync through each open file description returns EIO once; every fd
 * sharing that description (dup) has then seen it. Descriptions are told
 * apart with kcmp(KCMP_FILE). */
static atomic_int wb_error;
static pthread_mutex_t wb_mu = PTHREAD_MUTEX_INITIALIZER;
static int wb_seen[256]; /* fds whose description has reported it */
static int wb_nseen;

static bool wb_error_reported(int fd)
{
    pid_t me = getpid();
    bool seen = false;
    pthread_mutex_lock(&wb_mu);
    for (int i = 0; i < wb_nseen && !seen; i++)
        seen = wb_seen[i] == fd;
    if (!seen) /* report it; remember every fd of this description */
        for (int f = 0; f < 1024 && wb_nseen < 256; f++)
            if (syscall(SYS_kcmp, me, me, KCMP_FILE, fd, f) == 0)
                wb_seen[wb_nseen++] = f;
    pthread_mutex_unlock(&wb_mu);
    return seen;
}

static void wb_error_arm(bool on)
{
    pthread_mutex_lock(&wb_mu);
    wb_nseen = 0;
    atomic_store(&wb_error, on);
    pthread_mutex_unlock(&wb_mu);
}

int fdatasync(int fd)
{
    static int (*real)(int);
    if (real == NULL)
        real = (int (*)(int))dlsym(RTLD_NEXT, "fdatasync");
    if (atomic_load(&wb_error) && !wb_error_reported(fd)) {
        errno = EIO;
        return -1;
    }
    if (atomic_exchange(&hold_sync, 0)) {
        atomic_store(&sync_entered, 1);
        while (!atomic_load(&sync_released))
            usleep(1000);
        errno = EIO;
        return -1;
    }
    return real(fd);
}

/* ---- the log itself ----------------------------------------------------- */

static int replay_seen(struct seen *s, uint64_t seg_bytes)
{
    store__wal *w;
    memset(s, 0, sizeof(*s));
    ck_assert_int_eq(store__wal_open(&w, logdir, seg_bytes), 0);
    int rc = store__wal_replay(w, seen_cb, NULL, s);
    store__wal_free(w);
    return rc;
}

/* Records i = 0..n-1 of length 10 + i, filled with byte i. */
static void append_n(uint64_t seg_bytes, int n, int *out_sealed)
{
    store__wal *w;
    wal_open_for_test(&w, seg_bytes);
    ck_assert_int_eq(store__wal_start(w, true), 0);
    uint64_t lsn = 0, prev = 0;
    *out_sealed = 0;
    for (int i = 0; i < n; i++) {
        uint8_t b[64];
        memset(b, i, sizeof(b));
        int sealed;
        ck_assert_int_eq(store__wal_append(&lsn, &sealed, w, b, 10 + (size_t)i),
                         0);
        ck_assert_uint_gt(lsn, prev); /* + 1, and + 1 per seal record */
        prev = lsn;
        *out_sealed += (sealed & STORE__WAL_SEALED) != 0;
    }
    ck_assert_int_eq(store__wal_sync(w, lsn), 0);
    ck_assert_uint_eq(store__wal_last(w), lsn);
    ck_assert_uint_eq(lsn, (uint64_t)(n + *out_sealed));
    store__wal_free(w);
}

static void round_trip(void)
{
    mk_tmp();
    int sealed;
    append_n(1 << 20, 20, &sealed);
    ck_assert_int_eq(sealed, 0);
    ck_assert_int_eq(nsegs(), 1);
    struct seen s;
    ck_assert_int_eq(replay_seen(&s, 1 << 20), 0);
    ck_assert_int_eq(s.n, 20);
    for (int i = 0; i < 20; i++) {
        ck_assert_uint_eq(s.len[i], 10 + (size_t)i);
        ck_assert_uint_eq(s.first[i], (uint8_t)i);
    }
    /* Across segments: 200-byte segments hold about 3 records each. */
    rm_tmp();
    mk_tmp();
    append_n(200, 20, &sealed);
    ck_assert_int_gt(sealed, 3);
    ck_assert_int_eq(nsegs(), sealed + 1);
    ck_assert_int_eq(replay_seen(&s, 200), 0);
    ck_assert_int_eq(s.n, 20);
    for (int i = 0; i < 20; i++)
        ck_assert_uint_eq(s.first[i], (uint8_t)i);
    rm_tmp();
}

START_TEST(log_append_replay_round_trip)
{
    round_trip();
}
END_TEST

START_TEST(log_append_replay_round_trip_buffered)
{
    buffered_log = true;
    round_trip();
    buffered_log = false;
}
END_TEST

START_TEST(log_torn_tail_ends_replay)
{
    mk_tmp();
    int sealed;
    append_n(1 << 20, 5, &sealed);
    char p[400];
    seg_path(p, sizeof(p), 1);
    off_t full = log_end(p);
    /* Every cut inside the last record (header or payload) drops only it. */
    off_t last = STORE__WAL_HDR + 14; /* record 4: 32-byte header + 14 */
    for (off_t cut = full - last + 1; cut < full; cut += 7) {
        ck_assert_int_eq(truncate(p, cut), 0);
        struct seen s;
        ck_assert_int_eq(replay_seen(&s, 1 << 20), 0);
        ck_assert_int_eq(s.n, 4);
    }
    /* Zeros after the last record (a preallocated or torn block). */
    ck_assert_int_eq(truncate(p, full + 4096), 0);
    struct seen s;
    ck_assert_int_eq(replay_seen(&s, 1 << 20), 0);
    ck_assert_int_eq(s.n, 4);
    rm_tmp();
}
END_TEST

static void flip(const char *p, off_t at)
{
    int fd = open(p, O_RDWR);
    ck_assert_int_ge(fd, 0);
    uint8_t c;
    ck_assert_int_eq(pread(fd, &c, 1, at), 1);
    c ^= 0x40;
    ck_assert_int_eq(pwrite(fd, &c, 1, at), 1);
    close(fd);
}

START_TEST(log_corruption_in_newest_segment_stops)
{
    mk_tmp();
    int sealed;
    append_n(1 << 20, 5, &sealed);
    char p[400];
    seg_path(p, sizeof(p), 1);
    /* A payload byte of record 2 (records 0 and 1: 32+10 and 32+11). */
    flip(p, 32 + 10 + 32 + 11 + 32 + 3);
    struct seen s;
    ck_assert_int_eq(replay_seen(&s, 1 << 20), 0);
    ck_assert_int_eq(s.n, 2); /* a torn tail cannot be told from it */
    rm_tmp();
}
END_TEST

START_TEST(log_corruption_in_sealed_segment_is_error)
{
    mk_tmp();
    int sealed;
    append_n(200, 20, &sealed);
    ck_assert_int_gt(sealed, 1);
    char p[400];
    seg_path(p, sizeof(p), 1);
    flip(p, STORE__WAL_HDR + 2);
    struct seen s;
    ck_assert_int_eq(replay_seen(&s, 200), RK_ECORRUPT);
    /* A sealed segment cut short is corrupt too. */
    rm_tmp();
    mk_tmp();
    append_n(200, 20, &sealed);
    seg_path(p, sizeof(p), 2);
    ck_assert_int_eq(truncate(p, log_end(p) - 1), 0);
    ck_assert_int_eq(replay_seen(&s, 200), RK_ECORRUPT);
    /* ... and the store refuses to open rather than lose what follows
     * (it opens the same log uncorrupted). */
    struct store_opts o = STORE_OPTS_INIT;
    store *st = NULL;
    rm_tmp();
    mk_tmp();
    log_keys(20, 1, 200);
    ck_assert_int_gt(nsegs(), 2);
    st = open_opts(&o);
    store_free(st);
    rm_tmp();
    mk_tmp();
    log_keys(20, 1, 200);
    seg_path(p, sizeof(p), 1);
    ck_assert_int_eq(truncate(p, log_end(p) - 1), 0);
    o.data_dir = tmpdir;
    st = NULL;
    ck_assert_int_eq(store_open(&st, &o), RK_ECORRUPT);
    ck_assert_ptr_null(st);
    rm_tmp();
}
END_TEST

/* Zeros written ahead of the append position (in the newest segment and
 * after the seal of older ones) are skipped, records keep their order. */
START_TEST(log_prefill_zeros_are_skipped)
{
    mk_tmp();
    store__wal *w;
    ck_assert_int_eq(store__wal_open(&w, logdir, 1 << 20), 0);
    ck_assert_int_eq(store__wal_start(w, true), 0);
    uint64_t lsn = 0;
    int flags, fills = 0;
    uint8_t b[40000];
    for (int i = 0; i < 40; i++) {
        memset(b, i, sizeof(b));
        ck_assert_int_eq(store__wal_append(&lsn, &flags, w, b, sizeof(b)), 0);
        if (flags & STORE__WAL_FILL) {
            ck_assert_int_eq(store__wal_prefill(w), 0);
            fills++;
        }
    }
    ck_assert_int_gt(fills, 0);
    ck_assert_int_eq(store__wal_sync(w, lsn), 0);
    ck_assert_int_eq(store__wal_segments(w), 2); /* 1 MiB segments */
    store__wal_free(w);
    char p[400];
    seg_path(p, sizeof(p), 2);
    ck_assert_int_eq(fsize(p), 1 << 20); /* zeros up to the segment size */
    struct seen s;
    ck_assert_int_eq(replay_seen(&s, 1 << 20), 0);
    ck_assert_int_eq(s.n, 40);
    for (int i = 0; i < 40; i++)
        ck_assert_uint_eq(s.first[i], (uint8_t)i);
    rm_tmp();
}
END_TEST

/* Records of 10, 5,000 and 7 bytes, synced, then one of 3,000 more: each
 * append but the first starts inside a block a direct write rewrites.
 * Replay finds them after the `before` records the log had. */
static void append_odd_sizes_and_replay(store__wal *w, int before)
{
    static uint8_t b[4][5000];
    size_t len[4] = {10, 5000, 7, 3000};
    struct store__wal_rec r[3];
    for (int i = 0; i < 4; i++)
        memset(b[i], 'a' + i, len[i]);
    for (int i = 0; i < 3; i++)
        r[i] = (struct store__wal_rec){b[i], len[i], 0};
    int flags;
    ck_assert_int_eq(store__wal_append_many(&flags, w, r, 1), 0);
    ck_assert_int_eq(store__wal_append_many(&flags, w, r + 1, 2), 0);
    ck_assert_int_eq(store__wal_sync(w, r[2].lsn), 0);
    uint64_t lsn;
    ck_assert_int_eq(store__wal_append(&lsn, &flags, w, b[3], len[3]), 0);
    ck_assert_int_eq(store__wal_sync(w, lsn), 0);
    store__wal_free(w);
    struct seen s;
    ck_assert_int_eq(replay_seen(&s, 1 << 20), 0);
    ck_assert_int_eq(s.n, before + 4);
    for (int i = 0; i < 4; i++) {
        ck_assert_uint_eq(s.len[before + i], len[i]);
        ck_assert_uint_eq(s.first[before + i], 'a' + i);
    }
}

/* The log is written with O_DIRECT exactly where the file system takes
 * direct writes (less CPU and a shorter commit; wal.c), and never when
 * asked to stay buffered; both replay what they wrote. */
START_TEST(log_direct_where_the_file_system_takes_it)
{
    for (int mode = 0; mode < 2; mode++) {
        mk_tmp();
        bool direct = mode == 0 && fs_takes_direct();
        buffered_log = mode == 1;
        store__wal *w;
        wal_open_for_test(&w, 1 << 20);
        buffered_log = false;
        ck_assert_int_eq(store__wal_start(w, true), 0);
        int fl = seg_fd_flags(1);
        ck_assert_int_ge(fl, 0);
        ck_assert_int_eq((fl & O_DIRECT) != 0, direct);
        append_odd_sizes_and_replay(w, 0);
        rm_tmp();
    }
}
END_TEST

struct filler {
    store__wal *w;
    atomic_int stop;
    atomic_int fills;
};

static void *fill_thread(void *arg)
{
    struct filler *f = arg;
    while (!atomic_load(&f->stop)) {
        ck_assert_int_eq(store__wal_prefill(f->w), 0);
        atomic_fetch_add(&f->fills, 1);
    }
    return NULL;
}

/* The zero fill writes outside the log's lock: appends (and the seal of a
 * full segment) that reach past what it has filled wait for it, so its
 * zeros never land on a record. Big appends here outrun the fill (slowed
 * down) again and again; every record must be replayed, in order, in both
 * write modes, with one segment and with a seal every few records (an
 * older segment without its seal does not replay at all). */
START_TEST(log_appends_during_prefill_are_kept)
{
    static uint8_t b[200000];
    atomic_store(&slow_zeros, 1);
    for (int mode = 0; mode < 4; mode++) {
        uint64_t seg = mode < 2 ? 64 << 20 : 1 << 20;
        mk_tmp();
        buffered_log = mode % 2 == 1;
        store__wal *w;
        wal_open_for_test(&w, seg);
        buffered_log = false;
        ck_assert_int_eq(store__wal_start(w, true), 0);
        struct filler f = {.w = w};
        pthread_t th;
        ck_assert_int_eq(pthread_create(&th, NULL, fill_thread, &f), 0);
        /* the filler under way before the appends: on a loaded machine it
         * was first scheduled after all 60 (CI: "f.fills > 0" failed) */
        while (atomic_load(&f.fills) == 0)
            sched_yield();
        uint64_t lsn = 0;
        int flags;
        for (int i = 0; i < 60; i++) {
            memset(b, i + 1, sizeof(b));
            size_t len = sizeof(b) - (size_t)i * 997; /* odd sizes */
            ck_assert_int_eq(store__wal_append(&lsn, &flags, w, b, len), 0);
            if (i % 4 == 3)
                ck_assert_int_eq(store__wal_sync(w, lsn), 0);
        }
        ck_assert_int_eq(store__wal_sync(w, lsn), 0);
        atomic_store(&f.stop, 1);
        pthread_join(th, NULL);
        ck_assert_int_gt(f.fills, 0);
        store__wal_free(w);
        struct seen s;
        ck_assert_int_eq(replay_seen(&s, seg), 0);
        ck_assert_int_eq(s.n, 60);
        for (int i = 0; i < 60; i++) {
            ck_assert_uint_eq(s.len[i], sizeof(b) - (size_t)i * 997);
            ck_assert_uint_eq(s.first[i], (uint8_t)(i + 1));
        }
        rm_tmp();
    }
    atomic_store(&slow_zeros, 0);
}
END_TEST

/* Where O_DIRECT is refused (tmpfs before Linux 6.6, some network file
 * systems) the log is written through the page cache, as before. */
START_TEST(log_buffered_where_direct_is_refused)
{
    /* refused by open, then by the first direct write (open takes it) */
    for (int how = 0; how < 2; how++) {
        mk_tmp();
        atomic_store(how == 0 ? &refuse_direct : &refuse_direct_writes, 1);
        store__wal *w;
        ck_assert_int_eq(store__wal_open(&w, logdir, 1 << 20), 0);
        ck_assert_int_eq(store__wal_start(w, true), 0);
        int fl = seg_fd_flags(1);
        ck_assert_int_ge(fl, 0);
        ck_assert_int_eq(fl & O_DIRECT, 0);
        uint8_t b[100000];
        memset(b, 1, sizeof(b));
        uint64_t lsn;
        int flags;
        ck_assert_int_eq(store__wal_append(&lsn, &flags, w, b, sizeof(b)), 0);
        ck_assert_int_ne(flags & STORE__WAL_FILL, 0);
        /* its own fd, buffered as the segment's (was -EINVAL when open
         * took O_DIRECT) */
        ck_assert_int_eq(store__wal_prefill(w), 0);
        append_odd_sizes_and_replay(w, 1);
        atomic_store(&refuse_direct, 0);
        atomic_store(&refuse_direct_writes, 0);
        rm_tmp();
    }
}
END_TEST

/* Several records in one append, across segments: numbered in order, all
 * replayed; what goes to one segment is one write. */
START_TEST(log_append_many_in_order)
{
    mk_tmp();
    store__wal *w;
    ck_assert_int_eq(store__wal_open(&w, logdir, 300), 0);
    ck_assert_int_eq(store__wal_start(w, true), 0);
    uint8_t b[20][64];
    struct store__wal_rec r[20];
    for (int i = 0; i < 20; i++) {
        memset(b[i], i, sizeof(b[i]));
        r[i] = (struct store__wal_rec){b[i], 10 + (size_t)i, 0};
    }
    int flags;
    atomic_store(&pwrites, 0);
    ck_assert_int_eq(store__wal_append_many(&flags, w, r, 6), 0);
    ck_assert_int_eq(flags & STORE__WAL_SEALED, 0); /* 267 B: one segment */
    int nw = atomic_load(&pwrites);
    ck_assert_int_eq(nw, 1); /* in one write */
    for (int i = 0; i < 6; i++)
        ck_assert_uint_eq(r[i].lsn, (uint64_t)i + 1);
    ck_assert_int_eq(store__wal_append_many(&flags, w, r + 6, 14), 0);
    ck_assert_int_ne(flags & STORE__WAL_SEALED, 0);
    for (int i = 7; i < 20; i++) /* a seal record between segments */
        ck_assert_uint_gt(r[i].lsn, r[i - 1].lsn);
    ck_assert_int_eq(store__wal_sync(w, r[19].lsn), 0);
    ck_assert_uint_eq(store__wal_last(w), r[19].lsn);
    /* An empty payload is refused, and nothing of that call is written. */
    r[0].len = 0;
    ck_assert_int_eq(store__wal_append_many(&flags, w, r, 2), RK_EBADREQ);
    ck_assert_uint_eq(r[1].lsn, 0);
    ck_assert_uint_eq(store__wal_last(w), r[19].lsn);
    store__wal_free(w);
    struct seen s;
    ck_assert_int_eq(replay_seen(&s, 300), 0);
    ck_assert_int_eq(s.n, 20);
    for (int i = 0; i < 20; i++) {
        ck_assert_uint_eq(s.len[i], 10 + (size_t)i);
        ck_assert_uint_eq(s.first[i], (uint8_t)i);
    }
    rm_tmp();
    /* A record bigger than the write buffer (which is not kept past
     * 1 MiB) between small ones, then another append. */
    static uint8_t big[3 << 20];
    memset(big, 0xab, sizeof(big));
    mk_tmp();
    ck_assert_int_eq(store__wal_open(&w, logdir, 8 << 20), 0);
    ck_assert_int_eq(store__wal_start(w, true), 0);
    struct store__wal_rec r2[3] = {
        {b[1], 11, 0}, {big, sizeof(big), 0}, {b[2], 12, 0}};
    ck_assert_int_eq(store__wal_append_many(&flags, w, r2, 3), 0);
    ck_assert_int_eq(store__wal_append_many(&flags, w, r2, 1), 0);
    ck_assert_int_eq(store__wal_sync(w, r2[0].lsn), 0);
    store__wal_free(w);
    ck_assert_int_eq(replay_seen(&s, 8 << 20), 0);
    ck_assert_int_eq(s.n, 4);
    ck_assert_uint_eq(s.len[1], sizeof(big));
    ck_assert_uint_eq(s.first[1], 0xab);
    ck_assert_uint_eq(s.first[2], 2);
    ck_assert_uint_eq(s.first[3], 1);
    rm_tmp();
}
END_TEST

/* Regression (failed_append_replayed): a write of several records that
 * lands in part (here cut by RLIMIT_FSIZE) must leave none of them: all are
 * reported failed, and the next append reuses their record numbers, so a
 * whole second record left on disk was replayed after it. */
START_TEST(regression_failed_append_replayed)
{
    mk_tmp();
    signal(SIGXFSZ, SIG_IGN); /* EFBIG instead of a signal */
    store__wal *w;
    ck_assert_int_eq(store__wal_open(&w, logdir, 1 << 20), 0);
    ck_assert_int_eq(store__wal_start(w, true), 0);
    static uint8_t a[1000], b[1000], c[3000], d[1000];
    memset(a, 'a', sizeof(a));
    memset(b, 'b', sizeof(b));
    memset(c, 'c', sizeof(c));
    memset(d, 'd', sizeof(d));
    struct store__wal_rec r[3] = {
        {a, sizeof(a), 0}, {b, sizeof(b), 0}, {c, sizeof(c), 0}};
    struct rlimit old, lim;
    ck_assert_int_eq(getrlimit(RLIMIT_FSIZE, &old), 0);
    lim = old;
    lim.rlim_cur = 4096; /* a and b fit, c does not */
    ck_assert_int_eq(setrlimit(RLIMIT_FSIZE, &lim), 0);
    int flags;
    ck_assert_int_eq(store__wal_append_many(&flags, w, r, 3), -EFBIG);
    ck_assert_int_eq(setrlimit(RLIMIT_FSIZE, &old), 0);
    signal(SIGXFSZ, SIG_DFL);
    for (int i = 0; i < 3; i++)
        ck_assert_uint_eq(r[i].lsn, 0);
    uint64_t lsn;
    ck_assert_int_eq(store__wal_append(&lsn, &flags, w, d, sizeof(d)), 0);
    ck_assert_uint_eq(lsn, 1);
    ck_assert_int_eq(store__wal_sync(w, lsn), 0);
    store__wal_free(w);
    struct seen s;
    ck_assert_int_eq(replay_seen(&s, 1 << 20), 0);
    ck_assert_int_eq(s.n, 1); /* d only: not d, b */
    ck_assert_uint_eq(s.first[0], 'd');
    rm_tmp();
}
END_TEST

/* Regression (write_after_seal_lost): when the next segment could not be
 * created after the current one was sealed, a record small enough to fit
 * went after the seal, was acknowledged, and replay (which stops at a seal)
 * lost it. Now the append fails until the next segment exists. */
START_TEST(regression_write_after_seal_lost)
{
    mk_tmp();
    store__wal *w;
    ck_assert_int_eq(store__wal_open(&w, logdir, 200), 0);
    ck_assert_int_eq(store__wal_start(w, true), 0);
    uint8_t big[100], small[4];
    memset(big, 1, sizeof(big));
    memset(small, 2, sizeof(small));
    uint64_t lsn;
    int flags;
    ck_assert_int_eq(store__wal_append(&lsn, &flags, w, big, sizeof(big)), 0);
    char p[400];
    seg_path(p, sizeof(p), 2);
    ck_assert_int_eq(mkdir(p, 0755), 0); /* segment 2 cannot be created */
    ck_assert_int_eq(store__wal_append(&lsn, &flags, w, big, sizeof(big)),
                     -EISDIR);
    /* big 132 + seal 32 + small 36 = 200 fits the segment: small must
     * not go after the seal */
    ck_assert_int_eq(store__wal_append(&lsn, &flags, w, small, sizeof(small)),
                     -EISDIR);
    ck_assert_int_eq(rmdir(p), 0);
    ck_assert_int_eq(store__wal_append(&lsn, &flags, w, small, sizeof(small)),
                     0);
    ck_assert_int_eq(store__wal_sync(w, lsn), 0);
    store__wal_free(w);
    struct seen s;
    ck_assert_int_eq(replay_seen(&s, 200), 0);
    ck_assert_int_eq(s.n, 2); /* big (segment 1), small (segment 2) */
    ck_assert_uint_eq(s.first[0], 1);
    ck_assert_uint_eq(s.first[1], 2);
    rm_tmp();
}
END_TEST

struct syncer_arg {
    store__wal *w;
    uint64_t lsn;
    int rc;
};

static void *sync_thread(void *arg)
{
    struct syncer_arg *a = arg;
    a->rc = store__wal_sync(a->w, a->lsn);
    return NULL;
}

/* Regression (acked_after_failed_sync): with two log syncs overlapping, a
 * second one that returned 0 acknowledged its records although the first,
 * covering pages they share, had failed (Linux reports a writeback error
 * to one fsync only). After a failed sync nothing may count as durable. */
START_TEST(regression_acked_after_failed_sync)
{
    mk_tmp();
    store__wal *w;
    ck_assert_int_eq(store__wal_open(&w, logdir, 1 << 20), 0);
    ck_assert_int_eq(store__wal_start(w, true), 0);
    uint64_t l1, l2;
    int flags;
    ck_assert_int_eq(store__wal_append(&l1, &flags, w, (const uint8_t *)"a", 1),
                     0);
    atomic_store(&sync_entered, 0);
    atomic_store(&sync_released, 0);
    atomic_store(&hold_sync, 1);
    struct syncer_arg a = {w, l1, 1}, b;
    pthread_t ta, tb;
    ck_assert_int_eq(pthread_create(&ta, NULL, sync_thread, &a), 0);
    while (!atomic_load(&sync_entered)) /* a's sync is on the "device" */
        usleep(1000);
    ck_assert_int_eq(store__wal_append(&l2, &flags, w, (const uint8_t *)"b", 1),
                     0);
    b = (struct syncer_arg){w, l2, 1};
    ck_assert_int_eq(pthread_create(&tb, NULL, sync_thread, &b), 0);
    usleep(200000); /* room for b to start a sync of its own, if allowed */
    atomic_store(&sync_released, 1);
    pthread_join(ta, NULL);
    pthread_join(tb, NULL);
    ck_assert_int_eq(a.rc, -EIO);
    ck_assert_int_eq(b.rc, -EIO); /* was 0: acknowledged */
    ck_assert_int_eq(store__wal_sync(w, l2), -EIO);
    ck_assert_int_eq(store__wal_broken(w), -EIO);
    ck_assert_int_eq(store__wal_append(&l2, &flags, w, (const uint8_t *)"c", 1),
                     -EIO);
    uint64_t cut;
    ck_assert_int_eq(store__wal_cut(w, &cut), -EIO);
    store__wal_free(w);
    rm_tmp();
}
END_TEST

static void *append_thread(void *arg)
{
    struct syncer_arg *a = arg;
    int flags;
    static const uint8_t big[80];
    a->rc = store__wal_append(&a->lsn, &flags, a->w, big, sizeof(big));
    return NULL;
}

/* Regression (metrics_wait_for_log_sync): store__wal_direct took the log's
 * lock, which a rotation holds across the seal's fdatasync, and the node
 * asks it on its event loop for every metrics scrape: the loop stalled for
 * a sync. Here the seal's sync is held until store__wal_direct returns; it
 * deadlocked (the test timed out) and must now answer at once. */
START_TEST(regression_metrics_wait_for_log_sync)
{
    mk_tmp();
    store__wal *w;
    ck_assert_int_eq(store__wal_open(&w, logdir, 100), 0);
    ck_assert_int_eq(store__wal_start(w, true), 0);
    bool direct = store__wal_direct(w);
    uint64_t lsn;
    int flags;
    ck_assert_int_eq(
        store__wal_append(&lsn, &flags, w, (const uint8_t *)"first record", 12),
        0);
    atomic_store(&sync_entered, 0);
    atomic_store(&sync_released, 0);
    atomic_store(&hold_sync, 1);
    struct syncer_arg a = {w, 0, 1};
    pthread_t t;
    /* 44 + 112 bytes pass the 100-byte segment: seal, fdatasync (held) */
    ck_assert_int_eq(pthread_create(&t, NULL, append_thread, &a), 0);
    while (!atomic_load(&sync_entered))
        usleep(1000);
    ck_assert_int_eq(store__wal_direct(w), direct); /* blocked here */
    atomic_store(&sync_released, 1);
    pthread_join(t, NULL);
    ck_assert_int_eq(a.rc, -EIO); /* the held sync fails */
    store__wal_free(w);
    rm_tmp();
}
END_TEST

/* Regression (prefill_sync_hid_log_error): the zero fill synced through a
 * dup of the log's fd -- the same open file description -- so a writeback
 * error was reported to the fill's fdatasync (whose result nobody reads)
 * and the commit's own sync then returned 0: a write the disk had lost
 * was acknowledged. The fill now syncs through a description of its own. */
START_TEST(regression_prefill_sync_hid_log_error)
{
    /* the model needs kcmp (a seccomp profile may refuse it): without it
     * every sync would fail and the test could not fail */
    pid_t me = getpid();
    int probe = open("/dev/null", O_RDONLY);
    ck_assert_int_ge(probe, 0);
    ck_assert_msg(syscall(SYS_kcmp, me, me, KCMP_FILE, probe, probe) == 0,
                  "kcmp(KCMP_FILE) unavailable: %s", strerror(errno));
    close(probe);
    mk_tmp();
    store__wal *w;
    ck_assert_int_eq(store__wal_open(&w, logdir, 1 << 20), 0);
    ck_assert_int_eq(store__wal_start(w, true), 0);
    uint64_t lsn;
    int flags;
    ck_assert_int_eq(
        store__wal_append(&lsn, &flags, w, (const uint8_t *)"lost", 4), 0);
    wb_error_arm(true); /* writing the record's page back failed */
    (void)store__wal_prefill(w);
    ck_assert_int_eq(store__wal_sync(w, lsn), -EIO); /* was 0 */
    wb_error_arm(false);
    ck_assert_int_eq(store__wal_broken(w), -EIO);
    store__wal_free(w);
    rm_tmp();
}
END_TEST

/* Append n records of length len + i, filled with byte first + i, and
 * sync them; the number of segments sealed meanwhile. */
static int append_bytes(store__wal *w, int n, size_t len, int first)
{
    static uint8_t b[1024];
    uint64_t lsn = 0;
    int seals = 0;
    for (int i = 0; i < n; i++) {
        memset(b, first + i, len + (size_t)i);
        int sealed;
        ck_assert_int_eq(
            store__wal_append(&lsn, &sealed, w, b, len + (size_t)i), 0);
        seals += (sealed & STORE__WAL_SEALED) != 0;
    }
    ck_assert_int_eq(store__wal_sync(w, lsn), 0);
    return seals;
}

/* Recycled segments (wal.c, WAL_SPARES): retired segments are kept as
 * spares and become the next segments, their old records still in them.
 * Those never come back in a replay: after a crash in the middle of the
 * second spare, exactly what was appended since the cut is replayed. A
 * new segment's seq is above every spare's, even with no segment left
 * (the old rule, one above the newest segment, started again at 1).
 * Direct (_i 0) and through the page cache (_i 1). */
START_TEST(log_recycled_segments_replay_only_their_records)
{
    buffered_log = _i == 1;
    mk_tmp();
    store__wal *w;
    wal_open_for_test(&w, 8192);
    ck_assert_int_eq(store__wal_start(w, true), 0);
    /* 60 records of ~500 bytes, byte 0xaa: segments 1..4 */
    ck_assert_int_ge(append_bytes(w, 60, 500, 0), 3);
    uint64_t cut;
    ck_assert_int_eq(store__wal_cut(w, &cut), 0);
    ck_assert_int_eq(store__wal_retire(w, cut), 0);
    ck_assert_int_eq(nsegs(), 1);
    ck_assert_int_eq(nspares(), 2);
    /* 50 records of 300 + i bytes, byte i: two rotations, into both spares */
    ck_assert_int_ge(append_bytes(w, 50, 300, 0), 2);
    ck_assert_int_eq(nspares(), 0);
    /* a recycled segment's blocks are written already: no zero fill (a
     * direct one's: whole blocks to its end; through the page cache the
     * file may end short of the segment size, and the rest is filled) */
    int writes = atomic_load(&pwrites);
    ck_assert_int_eq(store__wal_prefill(w), 0);
    if (store__wal_direct(w))
        ck_assert_int_eq(atomic_load(&pwrites), writes);
    store__wal_free(w); /* a crash: the newest segment unsealed */
    struct seen s;
    ck_assert_int_eq(replay_seen(&s, 8192), 0);
    ck_assert_int_eq(s.n, 50);
    for (int i = 0; i < 50; i++) {
        ck_assert_uint_eq(s.len[i], 300 + (size_t)i);
        ck_assert_uint_eq(s.first[i], (uint8_t)i);
    }
    /* Retired at the next start: two spares, one of them its new segment;
     * then no segment at all. */
    wal_open_for_test(&w, 8192);
    ck_assert_int_eq(store__wal_start(w, true), 0);
    store__wal_free(w);
    ck_assert_int_eq(nspares(), 1);
    ck_assert_int_eq(nsegs(), 1);
    char cmd[600];
    snprintf(cmd, sizeof(cmd), "rm -f '%s'/*.log", logdir);
    ck_assert_int_eq(system(cmd), 0);
    uint64_t top = 0;
    DIR *d = opendir(logdir);
    ck_assert_ptr_nonnull(d);
    for (struct dirent *e; (e = readdir(d)) != NULL;) {
        uint64_t q = strtoull(e->d_name, NULL, 16);
        top = q > top ? q : top;
    }
    closedir(d);
    wal_open_for_test(&w, 8192);
    ck_assert_int_eq(store__wal_start(w, false), 0);
    append_bytes(w, 3, 100, 0x70);
    store__wal_free(w);
    char p[400];
    seg_path(p, sizeof(p), top + 1);
    ck_assert_int_eq(access(p, F_OK), 0);
    ck_assert_int_eq(nsegs(), 1);
    ck_assert_int_eq(replay_seen(&s, 8192), 0);
    ck_assert_int_eq(s.n, 3);
    ck_assert_uint_eq(s.first[0], 0x70);
    buffered_log = false;
    rm_tmp();
}
END_TEST

START_TEST(log_stray_file_is_error)
{
    mk_tmp();
    ck_assert_int_eq(mkdir(logdir, 0755), 0);
    char p[400];
    snprintf(p, sizeof(p), "%s/junk", logdir);
    FILE *f = fopen(p, "w");
    ck_assert_ptr_nonnull(f);
    fclose(f);
    store__wal *w = NULL;
    ck_assert_int_eq(store__wal_open(&w, logdir, 1 << 20), RK_ECORRUPT);
    ck_assert_ptr_null(w);
    rm_tmp();
}
END_TEST

static Suite *wal_suite(void)
{
    Suite *s = suite_create("storage_wal");
    TCase *tc = tcase_create("log");
    tcase_add_test(tc, log_append_replay_round_trip);
    tcase_add_test(tc, log_append_replay_round_trip_buffered);
    tcase_add_test(tc, log_direct_where_the_file_system_takes_it);
    tcase_add_test(tc, log_buffered_where_direct_is_refused);
    tcase_add_test(tc, log_appends_during_prefill_are_kept);
    tcase_add_test(tc, log_torn_tail_ends_replay);
    tcase_add_test(tc, log_corruption_in_newest_segment_stops);
    tcase_add_test(tc, log_corruption_in_sealed_segment_is_error);
    tcase_add_test(tc, log_prefill_zeros_are_skipped);
    tcase_add_test(tc, log_stray_file_is_error);
    tcase_add_loop_test(tc, log_recycled_segments_replay_only_their_records, 0,
                        2);
    tcase_add_test(tc, log_append_many_in_order);
    tcase_add_test(tc, regression_failed_append_replayed);
    tcase_add_test(tc, regression_write_after_seal_lost);
    tcase_add_test(tc, regression_acked_after_failed_sync);
    tcase_add_test(tc, regression_prefill_sync_hid_log_error);
    tcase_add_test(tc, regression_metrics_wait_for_log_sync);
    suite_add_tcase(s, tc);
    return s;
}

int main(void)
{
    SRunner *sr = srunner_create(wal_suite());
    srunner_run_all(sr, CK_NORMAL);
    int failed = srunner_ntests_failed(sr);
    srunner_free(sr);
    return failed == 0 ? EXIT_SUCCESS : EXIT_FAILURE;
}
