/*
 * bench-storage - the store's throughput beside raw LMDB, in one run.
 *
 * Rows: raw LMDB writes in one big transaction (the physical ceiling), group
 * commit with 1, 16 and 64 concurrent writers (store_put, 48 range envs as a
 * node replicating 3 nodes x 16 tokens x RF 3 holds), the same with each
 * sync method, periodic mode, point reads against raw mdb_get, and disk
 * overhead per record after random-token inserts and after compaction. Ratios
 * are against the raw rows of this same run.
 *
 * Usage: bench-storage [seconds-per-row (2)] [dir ($TMPDIR or /tmp)]
 * RK_BENCH_ONLY=<text>: only the rows whose label contains <text>;
 * RK_BENCH_NORAW=1: skip the raw rows (to profile one store row alone).
 */
#include <errno.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include <lmdb.h>

#include "common/rk.h"
#include "storage/store.h"

#define VAL     100
#define NRANGES 48
#define NREAD   200000

static double secs = 2.0;
static char base[256];

static double now(void)
{
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)t.tv_sec + (double)t.tv_nsec / 1e9;
}

static void rmrf(const char *p)
{
    char cmd[512];
    snprintf(cmd, sizeof(cmd), "rm -rf '%s'", p);
    if (system(cmd) != 0)
        fprintf(stderr, "rm failed: %s\n", p);
}

static size_t mkkey(char *k, uint64_t i)
{
    return (size_t)snprintf(k, 32, "bench:%012llu", (unsigned long long)i);
}

static size_t mkrec(uint8_t *out, uint64_t ts)
{
    uint8_t v[VAL];
    memset(v, 'v', sizeof(v));
    struct store_record r = {ts, 0, 0, RK_SLICE(v, VAL)};
    size_t n = 0;
    if (store_record_encode(out, 256, &n, &r) != 0)
        abort();
    return n;
}

static void be64(uint8_t *p, uint64_t v)
{
    for (int i = 7; i >= 0; i--, v >>= 8)
        p[i] = (uint8_t)v;
}

/* The inner key the store uses for record i (token || key) in kb[48]. */
static MDB_val rawkey(uint8_t *kb, uint64_t i)
{
    char k[32];
    size_t kl = mkkey(k, i);
    be64(kb, rk_token(k, kl));
    memcpy(kb + 8, k, kl);
    return (MDB_val){kl + 8, kb};
}

/* Write back what earlier rows left dirty in the page cache, so that the
 * kernel's writeback of one row does not slow the syncs of the next. */
static void settle(void)
{
    sync();
}

/* ---- raw LMDB ------------------------------------------------------------ */

static MDB_env *raw_env;
static MDB_dbi raw_dbi;

/* Range envs of the next store opened use MDB_WRITEMAP (store_opts). */
static bool use_wmap;

static double raw_write(uint64_t n, const char *name, unsigned flags)
{
    char dir[300];
    if (raw_env != NULL)
        mdb_env_close(raw_env);
    snprintf(dir, sizeof(dir), "%s/%s", base, name);
    mkdir(dir, 0755);
    if (mdb_env_create(&raw_env) || mdb_env_set_mapsize(raw_env, 1ull << 34) ||
        mdb_env_open(raw_env, dir, MDB_NOTLS | flags, 0644))
        abort();
    MDB_txn *txn;
    settle();
    double t0 = now();
    if (mdb_txn_begin(raw_env, NULL, 0, &txn) ||
        mdb_dbi_open(txn, NULL, 0, &raw_dbi))
        abort();
    uint8_t rb[256];
    size_t rl = mkrec(rb, 1);
    for (uint64_t i = 0; i < n; i++) {
        uint8_t kb[48];
        MDB_val key = rawkey(kb, i), val = {rl, rb};
        if (mdb_put(txn, raw_dbi, &key, &val, 0))
            abort();
    }
    if (mdb_txn_commit(txn) || mdb_env_sync(raw_env, 1))
        abort();
    return (double)n / (now() - t0);
}

/* The device's bound for a closed loop of 64 writers: raw LMDB, one env,
 * transactions of `per` writes, each committed with LMDB's own sync. */
static double raw_synced(int per)
{
    char dir[300];
    snprintf(dir, sizeof(dir), "%s/rawsync%d", base, per);
    mkdir(dir, 0755);
    MDB_env *env;
    MDB_dbi dbi;
    MDB_txn *txn;
    if (mdb_env_create(&env) || mdb_env_set_mapsize(env, 1ull << 32) ||
        mdb_env_open(env, dir, MDB_NOTLS, 0644))
        abort();
    uint8_t rb[256];
    size_t rl = mkrec(rb, 1);
    uint64_t i = 0;
    settle();
    double t0 = now(), t;
    do {
        if (mdb_txn_begin(env, NULL, 0, &txn) ||
            mdb_dbi_open(txn, NULL, 0, &dbi))
            abort();
        for (int j = 0; j < per; j++, i++) {
            uint8_t kb[48];
            MDB_val key = rawkey(kb, i), val = {rl, rb};
            if (mdb_put(txn, dbi, &key, &val, 0))
                abort();
        }
        if (mdb_txn_commit(txn))
            abort();
        t = now();
    } while (t - t0 < secs);
    mdb_env_close(env);
    return (double)i / (t - t0);
}

static double raw_read(uint64_t n)
{
    MDB_txn *txn;
    if (mdb_txn_begin(raw_env, NULL, MDB_RDONLY, &txn))
        abort();
    unsigned seed = 1;
    volatile size_t sink = 0;
    double t0 = now();
    for (int i = 0; i < NREAD; i++) {
        uint8_t kb[48];
        MDB_val key = rawkey(kb, (uint64_t)rand_r(&seed) % n), val;
        if (mdb_get(txn, raw_dbi, &key, &val))
            abort();
        sink += val.mv_size;
    }
    double r = NREAD / (now() - t0);
    mdb_txn_abort(txn);
    (void)sink;
    return r;
}

/* ---- the store ----------------------------------------------------------- */

/* Range envs of the next store opened are compacted in the background
 * (store_opts.auto_compact_pct); off but for the compactor row, so the
 * disk rows can show both layouts. */
static bool use_autoc;

/* The next store opened writes its commit log through the page cache
 * (store_opts.log_buffered) instead of with O_DIRECT. */
static bool use_buffered_log;

/* CPU time (user + system, the whole process) per write of the last node
 * loop row, in microseconds; printed beside that row. */
static double loop_cpu_us;

static double cpu_now(void)
{
    struct rusage ru;
    getrusage(RUSAGE_SELF, &ru);
    return (double)(ru.ru_utime.tv_sec + ru.ru_stime.tv_sec) +
           (double)(ru.ru_utime.tv_usec + ru.ru_stime.tv_usec) / 1e6;
}

static store *
open_store(const char *name, int durability, int sync_method, int nranges)
{
    char dir[300];
    snprintf(dir, sizeof(dir), "%s/%s", base, name);
    struct store_opts o = STORE_OPTS_INIT;
    o.data_dir = dir;
    o.durability = durability;
    o.sync_method = sync_method;
    o.periodic_ms = 1000;
    o.write_map = use_wmap;
    o.auto_compact_pct = use_autoc ? 0 : -1;
    o.log_buffered = use_buffered_log;
    store *s;
    int rc = store_open(&s, &o);
    if (rc) {
        fprintf(stderr, "store_open: %s\n", rk_strerror(rc));
        exit(1);
    }
    uint64_t step = UINT64_MAX / (uint64_t)nranges + 1;
    for (int i = 0; i < nranges; i++) {
        struct store_range r = {(uint64_t)i * step,
                                i == nranges - 1 ? 0
                                                 : (uint64_t)(i + 1) * step};
        if (nranges == 1)
            r = (struct store_range){0, 0};
        if ((rc = store_range_create(s, r))) {
            fprintf(stderr, "create: %s\n", rk_strerror(rc));
            exit(1);
        }
    }
    return s;
}

struct wctx {
    store *s;
    atomic_uint_fast64_t *next;
    atomic_bool *stop;
    uint64_t done;
};

static void *writer(void *arg)
{
    struct wctx *w = arg;
    uint8_t rb[256];
    size_t rl = mkrec(rb, 2);
    while (!atomic_load(w->stop)) {
        uint64_t i = atomic_fetch_add(w->next, 1);
        char k[32];
        size_t kl = mkkey(k, i);
        int rc = store_put(w->s, RK_SLICE(k, kl), RK_SLICE(rb, rl));
        if (rc) {
            fprintf(stderr, "store_put: %s\n", rk_strerror(rc));
            exit(1);
        }
        w->done++;
    }
    return NULL;
}

static double run_writers(store *s, int nw)
{
    atomic_uint_fast64_t next;
    atomic_bool stop;
    atomic_init(&next, 0);
    atomic_init(&stop, false);
    pthread_t th[64];
    struct wctx w[64];
    settle();
    double t0 = now();
    for (int i = 0; i < nw; i++) {
        w[i] = (struct wctx){s, &next, &stop, 0};
        pthread_create(&th[i], NULL, writer, &w[i]);
    }
    usleep((useconds_t)(secs * 1e6));
    atomic_store(&stop, true);
    uint64_t total = 0;
    for (int i = 0; i < nw; i++) {
        pthread_join(th[i], NULL);
        total += w[i].done;
    }
    return (double)total / (now() - t0);
}

/* Writers as a node has them (node/commit.c): `nw` clients, each with one
 * write in flight, served by one loop thread that gathers the writes that
 * are ready into a batch and hands it to a pool of LOOP_JOBS worker threads
 * (store_batch_commit, durable on return); when a batch is done its
 * writers send their next writes, which the loop gathers into the next
 * batch. One wakeup per batch, not per write: what a thread per writer
 * (run_writers) pays for on top of the store. */
#define LOOP_JOBS 2

struct loop;

struct loop_job {
    struct loop *l;
    pthread_t th;
    pthread_cond_t cv; /* the worker waits for its batch */
    store_batch *b;
    int state; /* LJ_* */
};

enum { LJ_IDLE, LJ_QUEUED, LJ_DONE };

struct loop {
    store *s;
    pthread_mutex_t mu;
    pthread_cond_t cv; /* the loop waits for a done batch */
    struct loop_job job[LOOP_JOBS];
    bool stop;
};

static void *loop_worker(void *arg)
{
    struct loop_job *j = arg;
    struct loop *l = j->l;
    pthread_mutex_lock(&l->mu);
    for (;;) {
        while (j->state != LJ_QUEUED && !l->stop)
            pthread_cond_wait(&j->cv, &l->mu);
        if (l->stop)
            break;
        pthread_mutex_unlock(&l->mu);
        int rc = store_batch_commit(l->s, j->b);
        for (size_t i = 0; rc == 0 && i < store_batch_count(j->b); i++)
            rc = store_batch_result(j->b, i);
        if (rc) {
            fprintf(stderr, "store_batch_commit: %s\n", rk_strerror(rc));
            exit(1);
        }
        pthread_mutex_lock(&l->mu);
        j->state = LJ_DONE;
        pthread_cond_signal(&l->cv);
    }
    pthread_mutex_unlock(&l->mu);
    return NULL;
}

static double loop_row(const char *name, int nw, int durability)
{
    struct loop l = {
        .s = open_store(name, durability, STORE_SYNC_AUTO, NRANGES)};
    pthread_mutex_init(&l.mu, NULL);
    pthread_cond_init(&l.cv, NULL);
    for (int i = 0; i < LOOP_JOBS; i++) {
        struct loop_job *j = &l.job[i];
        j->l = &l;
        pthread_cond_init(&j->cv, NULL);
        if (store_batch_new(&j->b) != 0)
            abort();
        pthread_create(&j->th, NULL, loop_worker, j);
    }
    uint8_t rb[256];
    size_t rl = mkrec(rb, 2);
    uint64_t next = 0, done = 0;
    size_t ready = (size_t)nw; /* writers with their next write to send */
    settle();
    double t0 = now(), t = t0, c0 = cpu_now();
    pthread_mutex_lock(&l.mu);
    while (t - t0 < secs) {
        int idle = -1;
        for (int i = 0; i < LOOP_JOBS; i++) {
            struct loop_job *j = &l.job[i];
            if (j->state == LJ_DONE) {
                ready += store_batch_count(j->b);
                done += store_batch_count(j->b);
                j->state = LJ_IDLE;
            }
            if (j->state == LJ_IDLE && idle < 0)
                idle = i;
        }
        if (ready == 0 || idle < 0) {
            pthread_cond_wait(&l.cv, &l.mu);
            t = now();
            continue;
        }
        struct loop_job *j = &l.job[idle];
        store_batch_reset(j->b);
        for (; ready > 0; ready--, next++) {
            char key[32];
            size_t kl = mkkey(key, next);
            if (store_batch_add(j->b, RK_SLICE(key, kl), RK_SLICE(rb, rl)))
                abort();
        }
        j->state = LJ_QUEUED;
        pthread_cond_signal(&j->cv);
        t = now();
    }
    l.stop = true;
    for (int i = 0; i < LOOP_JOBS; i++)
        pthread_cond_signal(&l.job[i].cv);
    pthread_mutex_unlock(&l.mu);
    for (int i = 0; i < LOOP_JOBS; i++) {
        pthread_join(l.job[i].th, NULL);
        if (l.job[i].state == LJ_DONE)
            done += store_batch_count(l.job[i].b);
        store_batch_free(l.job[i].b);
        pthread_cond_destroy(&l.job[i].cv);
    }
    t = now();
    loop_cpu_us = done ? (cpu_now() - c0) * 1e6 / (double)done : 0;
    store_free(l.s);
    pthread_cond_destroy(&l.cv);
    pthread_mutex_destroy(&l.mu);
    return (double)done / (t - t0);
}

/* A node's loop turn: one thread builds batches of `per` writes and
 * commits each with store_batch_commit (durable on return). */
static double batch_row(const char *name, int per, int durability)
{
    store *s = open_store(name, durability, STORE_SYNC_AUTO, NRANGES);
    store_batch *b;
    if (store_batch_new(&b) != 0)
        abort();
    uint8_t rb[256];
    size_t rl = mkrec(rb, 2);
    uint64_t i = 0;
    settle();
    double t0 = now(), t;
    do {
        store_batch_reset(b);
        for (int k = 0; k < per; k++, i++) {
            char key[32];
            size_t kl = mkkey(key, i);
            if (store_batch_add(b, RK_SLICE(key, kl), RK_SLICE(rb, rl)))
                abort();
        }
        if (store_batch_commit(s, b) != 0)
            abort();
        t = now();
    } while (t - t0 < secs);
    store_batch_free(b);
    store_free(s);
    return (double)i / (t - t0);
}

static double gc_row(const char *name, int nw, int method)
{
    store *s = open_store(name, STORE_GROUP_COMMIT, method, NRANGES);
    double r = run_writers(s, nw);
    store_free(s);
    return r;
}

/* A one-range store holding records 0..n-1 in random token order, applied
 * to the env in 20 transactions (each batch of 10,000 by itself, so the
 * layout does not depend on when the memtable happened to be applied). */
static store *load_store(const char *name, uint64_t n)
{
    store *s = open_store(name, STORE_PERIODIC, STORE_SYNC_AUTO, 1);
    store_batch *b;
    if (store_batch_new(&b) != 0)
        abort();
    uint8_t rb[256];
    size_t rl = mkrec(rb, 1);
    for (uint64_t i = 0; i < n; i++) {
        char k[32];
        size_t kl = mkkey(k, i);
        if (store_batch_add(b, RK_SLICE(k, kl), RK_SLICE(rb, rl)))
            abort();
        if (store_batch_count(b) == n / 20 || i + 1 == n) {
            if (store_batch_commit(s, b) != 0 || store_flush(s) != 0)
                abort();
            store_batch_reset(b);
        }
    }
    store_batch_free(b);
    return s;
}

static double store_reads(store *s, uint64_t n)
{
    unsigned seed = 1;
    double t0 = now();
    for (int i = 0; i < NREAD; i++) {
        char k[32];
        size_t kl = mkkey(k, (uint64_t)rand_r(&seed) % n);
        uint8_t *p;
        size_t pl;
        if (store_get(&p, &pl, s, RK_SLICE(k, kl), 1) != 0)
            abort();
        free(p);
    }
    return NREAD / (now() - t0);
}

/* RK_BENCH_ONLY=<text> runs only the rows whose label contains it (for
 * profiling one row); the raw rows always run. */
static bool want(const char *label)
{
    const char *only = getenv("RK_BENCH_ONLY");
    return only == NULL || strstr(label, only) != NULL;
}

/* Write rows are printed at the end, against the mean ceiling. */
static struct {
    char label[64];
    double v;
    bool wmap;     /* against the MDB_WRITEMAP ceiling */
    double cpu_us; /* CPU per write, node loop rows only */
} rows[24];
static int nrows;

static void row(const char *label, double v)
{
    snprintf(rows[nrows].label, sizeof(rows[nrows].label), "%s", label);
    rows[nrows].wmap = use_wmap;
    rows[nrows].cpu_us = loop_cpu_us;
    loop_cpu_us = 0;
    rows[nrows++].v = v;
}

int main(int argc, char **argv)
{
    if (argc > 1)
        secs = atof(argv[1]);
    const char *t = getenv("TMPDIR");
    snprintf(base, sizeof(base), "%s/rk_bench_XXXXXX",
             argc > 2 ? argv[2] : (t ? t : "/tmp"));
    if (mkdtemp(base) == NULL) {
        perror("mkdtemp");
        return 1;
    }
    const uint64_t nraw = 500000;
    printf("bench-storage: key 18 B, value %d B, %d range envs, %.1f s per "
           "row, dir %s\n\n",
           VAL, NRANGES, secs, base);
    /* The machine is shared: the ceiling is measured before and after the
     * store rows, and ratios use the mean. */
    bool noraw = getenv("RK_BENCH_NORAW") != NULL; /* when profiling */
    double raw = noraw ? 0 : raw_write(nraw, "raw", 0);
    double rawm = noraw ? 0 : raw_write(nraw, "rawm", MDB_WRITEMAP);

    const int ws[3] = {1, 16, 64};
    for (int i = 0; i < 3; i++) {
        char name[32], label[64];
        snprintf(name, sizeof(name), "gc%d", ws[i]);
        snprintf(label, sizeof(label), "group commit, %d writer%s", ws[i],
                 ws[i] > 1 ? "s" : "");
        if (want(label))
            row(label, gc_row(name, ws[i], STORE_SYNC_AUTO));
    }
    for (int i = 0; i < 3; i++) {
        char name[32], label[64];
        snprintf(name, sizeof(name), "gl%d", ws[i]);
        snprintf(label, sizeof(label), "group commit, %d writer%s, node loop",
                 ws[i], ws[i] > 1 ? "s" : "");
        if (want(label))
            row(label, loop_row(name, ws[i], STORE_GROUP_COMMIT));
    }
    /* The node loop rows again with the log through the page cache, as
     * before it was written with O_DIRECT (and where O_DIRECT is refused) */
    use_buffered_log = true;
    for (int i = 0; i < 3; i++) {
        char name[32], label[64];
        snprintf(name, sizeof(name), "glb%d", ws[i]);
        snprintf(label, sizeof(label),
                 "group commit, %d writer%s, node loop, buffered log", ws[i],
                 ws[i] > 1 ? "s" : "");
        if (want(label))
            row(label, loop_row(name, ws[i], STORE_GROUP_COMMIT));
    }
    use_buffered_log = false;
    const int perb[2] = {256, 1024};
    for (int i = 0; i < 2; i++) {
        char name[32], label[64];
        snprintf(name, sizeof(name), "batch%d", perb[i]);
        snprintf(label, sizeof(label), "group commit, batch API, %d/batch",
                 perb[i]);
        if (want(label))
            row(label, batch_row(name, perb[i], STORE_GROUP_COMMIT));
    }
    const char *l = "group commit, 64 writers, fdatasync each env";
    if (want(l))
        row(l, gc_row("gcfd", 64, STORE_SYNC_FDATASYNC));
    l = "group commit, 1 writer, syncfs";
    if (want(l))
        row(l, gc_row("gcfs", 1, STORE_SYNC_SYNCFS));
    store *s;
    const int pw[2] = {1, 64};
    for (int i = 0; i < 2; i++) {
        char name[32], label[64];
        snprintf(name, sizeof(name), "per%d", pw[i]);
        snprintf(label, sizeof(label), "periodic (1 s), %d writer%s", pw[i],
                 pw[i] > 1 ? "s" : "");
        if (!want(label))
            continue;
        s = open_store(name, STORE_PERIODIC, STORE_SYNC_AUTO, NRANGES);
        row(label, run_writers(s, pw[i]));
        store_free(s);
    }
    l = "periodic (1 s), 64 writers, node loop";
    if (want(l))
        row(l, loop_row("perl64", 64, STORE_PERIODIC));
    l = "periodic (1 s), batch API, 1024/batch";
    if (want(l))
        row(l, batch_row("perbatch", 1024, STORE_PERIODIC));
    /* The same with store_opts.write_map (MDB_WRITEMAP), against the raw
     * WRITEMAP ceiling. */
    use_wmap = true;
    l = "group commit, 64 writers, write_map";
    if (want(l))
        row(l, gc_row("wgc64", 64, STORE_SYNC_AUTO));
    l = "periodic (1 s), 64 writers, write_map";
    if (want(l)) {
        s = open_store("wper64", STORE_PERIODIC, STORE_SYNC_AUTO, NRANGES);
        row(l, run_writers(s, 64));
        store_free(s);
    }
    l = "periodic (1 s), 1024/batch, write_map";
    if (want(l))
        row(l, batch_row("wperbatch", 1024, STORE_PERIODIC));
    use_wmap = false;

    double rs64 = noraw ? 0 : raw_synced(64);
    double raw2 = noraw ? 0 : raw_write(nraw, "raw2", 0);
    double rawm2 = noraw ? 0 : raw_write(nraw, "rawm2", MDB_WRITEMAP);
    double ceiling = (raw + raw2) / 2, ceilm = (rawm + rawm2) / 2;
    printf("%-44s %12.0f writes/s\n", "raw LMDB, one txn (ceiling), before",
           raw);
    printf("%-44s %12.0f writes/s\n", "raw LMDB, one txn (ceiling), after",
           raw2);
    printf("%-44s %12.0f writes/s\n", "raw LMDB, WRITEMAP (ceiling W), before",
           rawm);
    printf("%-44s %12.0f writes/s\n", "raw LMDB, WRITEMAP (ceiling W), after",
           rawm2);
    printf("%-44s %12.0f writes/s  %6.2f%% of raw\n",
           "raw LMDB, 1 env, 64 writes per synced txn", rs64,
           noraw ? 0 : 100 * rs64 / ceiling);
    for (int i = 0; i < nrows; i++) {
        printf("%-52s %12.0f writes/s  %6.2f%% of raw%s", rows[i].label,
               rows[i].v,
               noraw ? 0 : 100 * rows[i].v / (rows[i].wmap ? ceilm : ceiling),
               rows[i].wmap ? " W" : "");
        if (rows[i].cpu_us > 0)
            printf("  %5.1f us CPU/write", rows[i].cpu_us);
        printf("\n");
    }

    if (!want("reads and disk")) {
        mdb_env_close(raw_env);
        rmrf(base);
        return 0;
    }
    /* Reads: load the same records into a one-range store. */
    const uint64_t nload = 200000;
    s = load_store("read", nload);
    /* Reads and sizes of the envs, as most data is read: the memtable
     * holds only the last second's writes. */
    if (store_flush(s) != 0)
        abort();
    (void)raw_write(nload, "rawread", 0); /* the same records, raw */
    double rr = 0, sr = 0;
    for (int i = 0; i < 3; i++) { /* alternate, against machine noise */
        rr += raw_read(nload) / 3;
        sr += store_reads(s, nload) / 3;
    }
    printf("\n%-44s %12.0f reads/s\n", "raw mdb_get (one read txn)", rr);
    printf("%-44s %12.0f reads/s   %6.2f%% of raw\n", "store_get", sr,
           100 * sr / rr);
    /* Disk per record: as the random-token inserts above left the env, as
     * a compact copy of it, and after store_range_compact (the layout of a
     * range loaded in token order: compacted or streamed in; what the
     * store's compactor thread does by itself once a quarter of a range's
     * keys are new, off here so both layouts can be measured). */
    struct store_range_info info;
    store_range_info(&info, s, (struct store_range){0, 0});
    char k[32];
    double payload = (double)(mkkey(k, 0) + VAL);
    double per = (double)info.disk_bytes / (double)info.keys;
    printf("\n%-44s %12.1f bytes (payload %.0f, overhead %.1f)\n",
           "disk/record after 20 applies of 10,000", per, payload,
           per - payload);
    char cpath[300];
    snprintf(cpath, sizeof(cpath), "%s/compact.mdb", base);
    FILE *cf = fopen(cpath, "w");
    if (cf == NULL ||
        store_range_copy_fd(s, (struct store_range){0, 0}, fileno(cf)) != 0)
        abort();
    fclose(cf);
    struct stat st;
    stat(cpath, &st);
    double cper = (double)st.st_size / (double)info.keys;
    printf("%-44s %12.1f bytes (payload %.0f, overhead %.1f)\n",
           "  the same, compact copy file (copy_fd)", cper, payload,
           cper - payload);
    double t0 = now();
    if (store_range_compact(s, (struct store_range){0, 0}) != 0)
        abort();
    double tc = now() - t0;
    store_range_info(&info, s, (struct store_range){0, 0});
    per = (double)info.disk_bytes / (double)info.keys;
    printf("%-44s %12.1f bytes (payload %.0f, overhead %.1f)\n",
           "disk/record after store_range_compact", per, payload,
           per - payload);
    printf("%-44s %12.0f records/s (%.2f s)\n", "  compaction speed",
           (double)info.keys / tc, tc);
    store_free(s);
    /* The same load with the compactor thread on (the default): what it
     * leaves once it has looked (it looks once a second). */
    use_autoc = true;
    s = load_store("autoc", nload);
    use_autoc = false;
    t0 = now();
    do {
        usleep(100 * 1000);
        store_range_info(&info, s, (struct store_range){0, 0});
        per = (double)info.disk_bytes / (double)info.keys;
    } while (per > payload + 40 && now() - t0 < 10);
    printf("%-44s %12.1f bytes (payload %.0f, overhead %.1f) after %.1f s\n",
           "disk/record, same load, compactor on", per, payload, per - payload,
           now() - t0);
    store_free(s);
    mdb_env_close(raw_env);
    rmrf(base);
    return 0;
}
