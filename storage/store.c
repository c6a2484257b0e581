/*
 * store.c - opening the store, the range map lookup, the range envs, reads
 * and syncing (store.h). The write path (batches, commit log, memtable,
 * group commit) lives in writes.c, range operations in range.c, system
 * state and hints in sys.c, the record format in record.c.
 *
 * Concurrency: `maplock` (a writer-preferring rwlock) is held shared by
 * every read, scan and commit for as long as it uses a range env, and
 * exclusively by whatever changes the set of envs or grows a map (LMDB's
 * mdb_env_set_mapsize needs no transaction in flight). Write transactions
 * on one env are serialised by LMDB itself; a commit opens at most one
 * write transaction at a time, so two commits never wait on each other in
 * a cycle.
 */
#include "storage/store.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include <xxhash.h>

#include "storage/store_internal.h"

int store__err(int rc)
{
    switch (rc) {
    case MDB_SUCCESS:
        return 0;
    case MDB_MAP_FULL:
        return RK_EFULL;
    case MDB_NOTFOUND:
        return RK_ENOTFOUND;
    case MDB_CORRUPTED:
    case MDB_PAGE_NOTFOUND:
        return RK_ECORRUPT;
    case MDB_VERSION_MISMATCH:
    case MDB_INVALID:
        return RK_EVERSION;
    case MDB_TXN_FULL:
        return RK_ETOOLARGE; /* one transaction dirtied too many pages */
    case MDB_READERS_FULL:
        return RK_EOVERLOADED;
    default:
        break;
    }
    if (rc > 0)
        return -rc;
    if (rk_is_errno(rc))
        return rc;
    return RK_EINTERNAL;
}

size_t store__ikey(uint8_t *out, uint64_t token, struct rk_slice key)
{
    store__be64(out, token);
    if (key.len <= STORE__SHORT) {
        memcpy(out + 8, key.p, key.len);
        return 8 + key.len;
    }
    memcpy(out + 8, key.p, STORE__SHORT);
    XXH128_canonical_t c;
    XXH128_canonicalFromHash(&c, XXH3_128bits(key.p, key.len));
    memcpy(out + 8 + STORE__SHORT, c.digest, 16);
    return STORE__LONG_IKEY;
}

int store__stored_split(struct rk_slice *out_key,
                        struct rk_slice *out_rec,
                        const MDB_val *ik,
                        const MDB_val *v)
{
    const uint8_t *p = v->mv_data;
    if (ik->mv_size < 9 || ik->mv_size > STORE__IKEY_MAX)
        return RK_ECORRUPT;
    if (ik->mv_size != STORE__LONG_IKEY) {
        *out_key = RK_SLICE((const uint8_t *)ik->mv_data + 8, ik->mv_size - 8);
        *out_rec = RK_SLICE(p, v->mv_size);
        return 0;
    }
    if (v->mv_size < 4)
        return RK_ECORRUPT;
    size_t kl =
        (size_t)p[0] << 24 | (size_t)p[1] << 16 | (size_t)p[2] << 8 | p[3];
    if (kl <= STORE__SHORT || kl > RK_MAX_KEY || v->mv_size - 4 < kl)
        return RK_ECORRUPT;
    *out_key = RK_SLICE(p + 4, kl);
    *out_rec = RK_SLICE(p + 4 + kl, v->mv_size - 4 - kl);
    return 0;
}

int store__key_check(struct rk_slice key)
{
    if (key.len == 0)
        return RK_EBADREQ;
    if (key.len > RK_MAX_KEY)
        return RK_ETOOLARGE;
    return 0;
}

/* ---- Range map ---------------------------------------------------------- */

bool store_range_contains(struct store_range r, uint64_t t)
{
    if (r.start == r.end)
        return true;
    if (r.start < r.end)
        return t > r.start && t <= r.end;
    return t > r.start || t <= r.end;
}

struct store__range *store__lookup(store *s, uint64_t t)
{
    size_t lo = 0, hi = s->nranges;
    if (hi == 0)
        return NULL;
    while (lo < hi) {
        size_t mid = lo + (hi - lo) / 2;
        if (s->ranges[mid]->r.end < t)
            lo = mid + 1;
        else
            hi = mid;
    }
    struct store__range *rr = s->ranges[lo == s->nranges ? 0 : lo];
    return store_range_contains(rr->r, t) ? rr : NULL;
}

int store__range_index(store *s, struct store_range r)
{
    for (size_t i = 0; i < s->nranges; i++)
        if (s->ranges[i]->r.start == r.start && s->ranges[i]->r.end == r.end)
            return (int)i;
    return RK_ENOTFOUND;
}

/* Allocate the blocks of dir/name up to `len` bytes (and any holes below
 * its current size), creating it if missing. */
static int store__falloc(const char *dir, const char *name, uint64_t len)
{
    char *p = store__path(dir, name);
    if (p == NULL)
        return -ENOMEM;
    int fd = open(p, O_RDWR | O_CREAT | O_CLOEXEC, 0644);
    free(p);
    if (fd < 0)
        return -errno;
    struct stat st;
    int rc = fstat(fd, &st) == 0 ? 0 : -errno;
    if (rc == 0 && (uint64_t)st.st_size > len)
        len = (uint64_t)st.st_size;
    if (rc == 0)
        rc = -posix_fallocate(fd, 0, (off_t)len); /* returns an errno */
    close(fd);
    return rc;
}

int store__env_open(MDB_env **out,
                    MDB_dbi *out_dbi,
                    const char *dir,
                    size_t map_size,
                    unsigned flags)
{
    MDB_env *env = NULL;
    MDB_txn *txn = NULL;
    int rc = mkdir(dir, 0755);
    if (rc != 0 && errno != EEXIST)
        return -errno;
    /* LMDB writes its lock file through a shared map, and with
     * MDB_WRITEMAP data.mdb too, which it extends to the map size as a
     * hole: on a full disk a write fault on a hole there is SIGBUS, not
     * ENOSPC. So their blocks are allocated before LMDB writes them, and a
     * full disk fails the open with -ENOSPC (regression:
     * env_open_full_disk_enospc): the lock file before the open; data.mdb
     * after it (a new env must start empty; the open writes its meta pages
     * with pwrite and nothing through the map) and before the first txn. */
    if ((rc = store__falloc(dir, "lock.mdb", STORE__LOCK_BYTES)))
        return rc;
    rc = mdb_env_create(&env);
    if (rc)
        return store__err(rc);
    if ((rc = mdb_env_set_mapsize(env, map_size)) ||
        (rc = mdb_env_set_maxreaders(env, STORE__MAXREADERS)))
        goto close_env;
    rc = mdb_env_open(env, dir, flags | MDB_NOTLS, 0644);
    if (rc)
        goto close_env;
    if (flags & MDB_WRITEMAP) {
        MDB_envinfo info;
        mdb_env_info(env, &info);
        if ((rc = store__falloc(dir, "data.mdb", info.me_mapsize))) {
            mdb_env_close(env);
            return rc;
        }
    }
    rc = mdb_txn_begin(env, NULL, 0, &txn);
    if (rc)
        goto close_env;
    rc = mdb_dbi_open(txn, NULL, 0, out_dbi);
    if (rc) {
        mdb_txn_abort(txn);
        goto close_env;
    }
    rc = mdb_txn_commit(txn);
    if (rc)
        goto close_env;
    *out = env;
    return 0;
close_env:
    mdb_env_close(env);
    return store__err(rc);
}

int store__range_open(struct store__range **out,
                      store *s,
                      struct store_range r,
                      const char *dir)
{
    struct store__range *rr = calloc(1, sizeof(*rr));
    if (rr == NULL)
        return -ENOMEM;
    rr->r = r;
    rr->dir = strdup(dir);
    if (rr->dir == NULL) {
        free(rr);
        return -ENOMEM;
    }
    int rc = store__env_open(&rr->env, &rr->dbi, dir, s->o.map_size,
                             MDB_NOSYNC | (s->o.write_map ? MDB_WRITEMAP : 0));
    if (rc) {
        free(rr->dir);
        free(rr);
        return rc;
    }
    MDB_envinfo info;
    mdb_env_info(rr->env, &info);
    rr->map_size = info.me_mapsize;
    pthread_mutex_init(&rr->txmu, NULL);
    atomic_init(&rr->dirty, false);
    atomic_init(&rr->stuck, 0);
    atomic_init(&rr->inserts, 0);
    atomic_init(&rr->cache_id, store__cache_id_next());
    *out = rr;
    return 0;
}

void store__range_close(struct store__range *rr)
{
    if (rr == NULL)
        return;
    for (int i = 0; i < rr->ntx; i++)
        mdb_txn_abort(rr->txpool[i]);
    mdb_env_close(rr->env);
    pthread_mutex_destroy(&rr->txmu);
    free(rr->dir);
    free(rr);
}

int store__map_set(store *s, struct store__range *rr, size_t size)
{
    int rc;
    /* With write_map LMDB extends data.mdb to the map size as a hole:
     * allocate it first (see store__env_open). */
    if (s->o.write_map && (rc = store__falloc(rr->dir, "data.mdb", size)))
        return rc;
    if ((rc = mdb_env_set_mapsize(rr->env, size)))
        return store__err(rc);
    MDB_envinfo info;
    mdb_env_info(rr->env, &info);
    rr->map_size = info.me_mapsize;
    return 0;
}

/* Under maplock held exclusively. */
int store__grow(store *s, struct store__range *rr)
{
    size_t want = rr->map_size * 2;
    if (rr->map_size >= s->o.map_size_max)
        return RK_EFULL;
    if (want > s->o.map_size_max)
        want = s->o.map_size_max;
    return store__map_set(s, rr, want);
}

static int store__rtxn(MDB_txn **out, struct store__range *rr)
{
    MDB_txn *t = NULL;
    pthread_mutex_lock(&rr->txmu);
    if (rr->ntx > 0)
        t = rr->txpool[--rr->ntx];
    pthread_mutex_unlock(&rr->txmu);
    if (t != NULL) {
        if (mdb_txn_renew(t) == 0) {
            *out = t;
            return 0;
        }
        mdb_txn_abort(t);
    }
    return store__err(mdb_txn_begin(rr->env, NULL, MDB_RDONLY, out));
}

static void store__rtxn_done(struct store__range *rr, MDB_txn *t)
{
    mdb_txn_reset(t);
    pthread_mutex_lock(&rr->txmu);
    if (rr->ntx < (int)(sizeof(rr->txpool) / sizeof(rr->txpool[0]))) {
        rr->txpool[rr->ntx++] = t;
        t = NULL;
    }
    pthread_mutex_unlock(&rr->txmu);
    if (t != NULL)
        mdb_txn_abort(t);
}

/* ---- Syncing ------------------------------------------------------------ */

int store__sync_ranges(store *s, struct store__range **rs, size_t n)
{
    if (n == 0)
        return 0;
    int method = s->o.sync_method;
    if (method == STORE_SYNC_AUTO)
        method = n == 1 ? STORE_SYNC_FDATASYNC : STORE_SYNC_SYNCFS;
    if (method == STORE_SYNC_SYNCFS)
        return syncfs(s->dir_fd) == 0 ? 0 : -errno;
    for (size_t i = 0; i < n; i++) {
        int rc = mdb_env_sync(rs[i]->env, 1);
        if (rc)
            return store__err(rc);
    }
    return 0;
}

/* Sync every env committed to since its last sync. Callers are serialised
 * by ckmu (checkpoint, drop) or run before the background thread starts
 * (store_open), so no two syncs overlap. */
int store__sync_envs(store *s)
{
    /* A failed sync is not retried: Linux reports a writeback error to one
     * fsync only, so a retry's success would not mean the pages are on
     * disk, and the log segments (the only durable copy) would be deleted
     * (regression: env_sync_retry_retired_log). Checkpoints fail from then
     * on and the log is kept; reopening replays it. */
    int failed = atomic_load(&s->env_sync_err);
    if (failed)
        return failed;
    pthread_rwlock_rdlock(&s->maplock);
    struct store__range **rs = malloc((s->nranges + 1) * sizeof(*rs));
    int rc = -ENOMEM;
    if (rs == NULL)
        goto unlock;
    size_t n = 0;
    for (size_t i = 0; i < s->nranges; i++)
        if (atomic_exchange(&s->ranges[i]->dirty, false))
            rs[n++] = s->ranges[i];
    rc = store__sync_ranges(s, rs, n);
    if (rc)
        atomic_store(&s->env_sync_err, rc); /* never retried (above) */
    free(rs);
unlock:
    pthread_rwlock_unlock(&s->maplock);
    return rc;
}

int store_sync_envs(store *s)
{
    pthread_mutex_lock(&s->ckmu);
    int rc = store__sync_envs(s);
    pthread_mutex_unlock(&s->ckmu);
    return rc;
}

int store_sync(store *s)
{
    return store__wal_sync(s->wal, store__wal_last(s->wal));
}

/* A checkpoint: cut the log where every record before the cut is in the
 * memtable (walock held exclusively for the cut only), apply that memtable,
 * make the envs durable, then delete the segments before the cut
 * (store__checkpoint_locked). */
int store_checkpoint(store *s)
{
    pthread_mutex_lock(&s->flmu);
    pthread_mutex_lock(&s->ckmu);
    int rc = store__checkpoint_locked(s, NULL, NULL);
    pthread_mutex_unlock(&s->ckmu);
    pthread_mutex_unlock(&s->flmu);
    return rc;
}

void store__bg_due(store *s, int flags)
{
    pthread_mutex_lock(&s->smu);
    if (flags & STORE__WAL_SEALED)
        s->ckpt_due = true;
    if (flags & STORE__WAL_FILL)
        s->fill_due = true;
    if (flags & STORE__FLUSH_DUE)
        s->flush_due = true;
    pthread_cond_signal(&s->scv);
    pthread_mutex_unlock(&s->smu);
}

/* The background thread: in periodic mode it syncs the log every
 * periodic_ms; in both modes it writes zeros ahead of the log's append
 * position (wal.h), applies the memtable when it fills or is STORE__FLUSH_MS
 * old, and runs the checkpoints that filled segments ask for, and one a
 * minute when anything was logged (a failed one is retried a second later).
 *
 * Ten seconds, not one: the memtable keeps one version per key, so a longer
 * interval applies fewer writes for keys written again, and each apply
 * copies (LMDB copy-on-write) and writes every page it touches once, not
 * once a second. Memory stays bounded by memtable_bytes (an apply starts
 * when it fills), nothing waits for it (reads look in the memtable first,
 * scans, checkpoints and drops apply it first), and replay after a crash
 * starts at the last checkpoint either way. SET at -P 1 on the demo
 * cluster: 1.08-1.12x in 10 paired runs (docs/performance-resp-history.md). */
#define STORE__FLUSH_MS 10000
#define STORE__CKPT_MS                                    \
    60000 /* a checkpoint at least this often, if written \
           */

static uint64_t store__mono_ms(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000 + (uint64_t)ts.tv_nsec / 1000000;
}

static void *store__syncer_main(void *arg)
{
    store *s = arg;
    pthread_setname_np(pthread_self(), "rk-syncer"); /* shown by top -H */
    uint32_t ms = s->o.durability == STORE_PERIODIC ? s->o.periodic_ms : 1000;
    if (ms > 1000)
        ms = 1000; /* the checks below, at least once a second */
    uint64_t last_ckpt = store__mono_ms(), last_lsn = 0;
    uint64_t last_flush = last_ckpt;
    pthread_mutex_lock(&s->smu);
    while (!s->stopping) {
        if (!s->ckpt_due && !s->fill_due && !s->flush_due) {
            struct timespec ts;
            clock_gettime(CLOCK_REALTIME, &ts);
            uint64_t ns = (uint64_t)ts.tv_nsec + (uint64_t)ms * 1000000;
            ts.tv_sec += (time_t)(ns / 1000000000);
            ts.tv_nsec = (long)(ns % 1000000000);
            pthread_cond_timedwait(&s->scv, &s->smu, &ts);
        }
        if (s->stopping)
            break;
        bool due = s->ckpt_due, fill = s->fill_due, flush = s->flush_due;
        s->ckpt_due = false;
        s->fill_due = false;
        s->flush_due = false;
        pthread_mutex_unlock(&s->smu);
        if (s->o.durability == STORE_PERIODIC)
            (void)store_sync(s);
        if (fill)
            (void)store__wal_prefill(s->wal); /* appends extend the file */
        /* refusals end without a write to try; while short of space the
         * log keeps no spare segments */
        store__wal_keep_spares(s->wal, !store__space_tick(s));
        store__ts_ceiling_ahead(s);
        uint64_t now = store__mono_ms(), lsn = store__wal_last(s->wal);
        /* writes kept back by a stuck range (the floor) are retried
         * every second, so a range unsticks soon after space is freed */
        pthread_mutex_lock(&s->memmu);
        uint64_t every = s->mem_floor > 0 ? 1000 : STORE__FLUSH_MS;
        pthread_mutex_unlock(&s->memmu);
        if (!due && (flush || now - last_flush >= every)) {
            (void)store_flush(s); /* what fails stays in mem (stuck) */
            last_flush = now;
        }
        if (now - last_ckpt >= STORE__CKPT_MS && lsn != last_lsn)
            due = true; /* bounds replay time and unsynced env pages */
        if (due) {
            last_ckpt = now;
            last_lsn = lsn;
        }
        if (due && store_checkpoint(s) != 0) {
            struct timespec d = {1, 0};
            nanosleep(&d, NULL);
            pthread_mutex_lock(&s->smu);
            s->ckpt_due = true;
            continue;
        }
        pthread_mutex_lock(&s->smu);
    }
    pthread_mutex_unlock(&s->smu);
    return NULL;
}

/* The compactor thread: once a second, rewrites the range env that most
 * needs it (store__compact_due, range.c), one at a time, off the syncer's
 * way (a big env takes seconds). One skipped for lack of disk space
 * (-ENOSPC: checked before anything is written, store.h) is tried again
 * every STORE_SPACE_RETRY_S seconds, so it runs soon after space is freed;
 * after another failure it waits twice as long each time, up to 5 min. */
static void *store__compactor_main(void *arg)
{
    store *s = arg;
    pthread_setname_np(pthread_self(), "rk-compactor");
    int wait_s = 1; /* doubles after a failure (a full disk), up to 5 min */
    pthread_mutex_lock(&s->smu);
    while (!s->stopping) {
        struct timespec ts;
        clock_gettime(CLOCK_REALTIME, &ts);
        ts.tv_sec += wait_s;
        pthread_cond_timedwait(&s->ccv, &s->smu, &ts);
        if (s->stopping)
            break;
        pthread_mutex_unlock(&s->smu);
        struct store_range r;
        int rc = store__compact_due(s, &r) ? store_range_compact(s, r) : 0;
        if (rc == -ENOSPC)
            wait_s = STORE_SPACE_RETRY_S;
        else if (rc != 0)
            wait_s = wait_s < 150 ? wait_s * 2 : 300;
        else
            wait_s = 1;
        pthread_mutex_lock(&s->smu);
    }
    pthread_mutex_unlock(&s->smu);
    return NULL;
}

int store_auto_compact_set(store *s, int pct)
{
    if (!s->compactor_on)
        return RK_EBADREQ;
    atomic_store(&s->auto_pct, pct);
    return 0;
}

/* ---- Open and close ----------------------------------------------------- */

char *store__path(const char *dir, const char *name)
{
    size_t n = strlen(dir) + strlen(name) + 2;
    char *p = malloc(n);
    if (p != NULL)
        snprintf(p, n, "%s/%s", dir, name);
    return p;
}

static int store__mkdir(const char *dir, const char *name)
{
    char *p = store__path(dir, name);
    if (p == NULL)
        return -ENOMEM;
    int rc = mkdir(p, 0755) == 0 || errno == EEXIST ? 0 : -errno;
    free(p);
    return rc;
}

/* ts_bound at open, before the log's replay: the saved ceiling, or, in a
 * store that has none (one written before it was kept), the highest
 * timestamp its envs hold, read once. */
static int store__ts_load(store *s)
{
    uint64_t c = 0;
    int rc = store_sys_get_u64(&c, s, STORE__TS_CEILING);
    if (rc == 0) {
        s->ts_bound = s->ts_ceiling = c;
        return 0;
    }
    if (rc != RK_ENOTFOUND)
        return rc;
    for (size_t i = 0; i < s->nranges; i++)
        if ((rc = store__env_max_ts(s->ranges[i], &s->ts_bound)))
            return rc;
    return 0;
}

static int
store__max_ts_cb(MDB_cursor *cur, const MDB_val *k, const MDB_val *v, void *arg)
{
    uint64_t *top = arg, ts = UINT64_MAX; /* unreadable: bounds nothing */
    struct rk_slice uk, rec;
    (void)cur;
    if (store__stored_split(&uk, &rec, k, v) == 0)
        ts = store__rec_ts(rec);
    if (ts > *top)
        *top = ts;
    return 0;
}

int store__env_max_ts(struct store__range *rr, uint64_t *io)
{
    MDB_txn *txn;
    int rc = store__err(mdb_txn_begin(rr->env, NULL, MDB_RDONLY, &txn));
    if (rc)
        return rc;
    rc = store__walk(txn, rr->dbi, rr->r, store__max_ts_cb, io);
    mdb_txn_abort(txn);
    return rc;
}

int store_open(store **out, const struct store_opts *opts)
{
    if (opts == NULL || opts->data_dir == NULL || opts->map_size == 0 ||
        opts->map_size_max < opts->map_size ||
        (opts->durability != STORE_GROUP_COMMIT &&
         opts->durability != STORE_PERIODIC) ||
        (opts->durability == STORE_PERIODIC && opts->periodic_ms == 0) ||
        opts->sync_method < 0 || opts->sync_method > STORE_SYNC_SYNCFS)
        return RK_ECONFIG;
    char *logdir = NULL;
    int rc;
    store *s = calloc(1, sizeof(*s));
    if (s == NULL)
        return -ENOMEM;
    s->o = *opts;
    s->dir_fd = -1;
    s->dir = strdup(opts->data_dir);
    if (s->dir == NULL) {
        rc = -ENOMEM;
        goto free_store;
    }
    s->o.data_dir = s->dir;
    if (s->o.log_segment_bytes == 0)
        s->o.log_segment_bytes = UINT64_C(64) << 20;
    if (mkdir(s->dir, 0755) != 0 && errno != EEXIST) {
        rc = -errno;
        goto free_store;
    }
    if ((rc = store__mkdir(s->dir, "system")) ||
        (rc = store__mkdir(s->dir, "hints")) ||
        (rc = store__mkdir(s->dir, "ranges")))
        goto free_store;
    s->dir_fd = open(s->dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    if (s->dir_fd < 0) {
        rc = -errno;
        goto free_store;
    }
    pthread_rwlockattr_t attr;
    pthread_rwlockattr_init(&attr);
    pthread_rwlockattr_setkind_np(&attr,
                                  PTHREAD_RWLOCK_PREFER_WRITER_NONRECURSIVE_NP);
    pthread_rwlock_init(&s->maplock, &attr);
    pthread_rwlockattr_init(&attr);
    pthread_rwlockattr_setkind_np(&attr,
                                  PTHREAD_RWLOCK_PREFER_WRITER_NONRECURSIVE_NP);
    pthread_rwlock_init(&s->walock, &attr);
    pthread_rwlockattr_destroy(&attr);
    pthread_mutex_init(&s->ckmu, NULL);
    pthread_mutex_init(&s->hintmu, NULL);
    pthread_mutex_init(&s->opmu, NULL);
    pthread_mutex_init(&s->gmu, NULL);
    pthread_mutex_init(&s->smu, NULL);
    pthread_cond_init(&s->scv, NULL);
    pthread_cond_init(&s->ccv, NULL);
    pthread_mutex_init(&s->memmu, NULL);
    s->known_epoch = 1; /* a new entry's mark, 0, is void */
    pthread_mutex_init(&s->ceilmu, NULL);
    pthread_mutex_init(&s->flmu, NULL);
    pthread_mutex_init(&s->skipmu, NULL);
    pthread_mutex_init(&s->spacemu, NULL);
    s->space.reserve = s->o.disk_reserve_bytes;
    if ((s->logdir = store__path(s->dir, "commitlog")) == NULL) {
        rc = -ENOMEM;
        goto close_all;
    }
    s->mem_limit = s->o.memtable_bytes ? s->o.memtable_bytes : (size_t)16 << 20;
    if ((rc = store__mem_new(&s->mem, 0)))
        goto close_all;
    if (s->o.read_cache_bytes &&
        (rc = store__cache_new(&s->cache, s->o.read_cache_bytes)))
        goto close_all;
    store__mem_publish(s);
    if ((rc = store__sys_open(s)) || (rc = store__hint_open(s)) ||
        (rc = store__map_load(s)) || (rc = store__recover(s)) ||
        (rc = store__ts_load(s)))
        goto close_all;
    if ((logdir = store__path(s->dir, "commitlog")) == NULL) {
        rc = -ENOMEM;
        goto close_all;
    }
    /* Replay whatever the log still holds into the recovered envs, make
     * them durable, and only then delete the old segments (after logging
     * again what could not be applied). */
    if ((rc = store__wal_open(&s->wal, logdir, s->o.log_segment_bytes)))
        goto close_all;
    if (s->o.log_buffered)
        store__wal_buffered(s->wal);
    if ((rc = store__replay(s)) || (rc = store__sync_envs(s)))
        goto close_all;
    if (store__mem_count(s->mem) == 0) {
        rc = store__wal_start(s->wal, true);
    } else {
        uint64_t cut;
        if ((rc = store__wal_start(s->wal, false)) == 0 &&
            (rc = store__wal_cut(s->wal, &cut)) == 0 &&
            (rc = store__relog(s)) == 0)
            rc = store__wal_retire(s->wal, cut);
    }
    if (rc)
        goto close_all;
    store__space_tick(s); /* the first look at free space */
    rc = -pthread_create(&s->syncer, NULL, store__syncer_main, s);
    if (rc)
        goto close_all;
    s->syncer_on = true;
    atomic_init(&s->auto_pct, s->o.auto_compact_pct);
    if (s->o.auto_compact_pct >= 0) {
        rc = -pthread_create(&s->compactor, NULL, store__compactor_main, s);
        if (rc)
            goto close_all;
        s->compactor_on = true;
    }
    free(logdir);
    *out = s;
    return 0;
close_all:
    free(logdir);
    store_free(s);
    return rc;
free_store:
    if (s->dir_fd >= 0)
        close(s->dir_fd);
    free(s->dir);
    free(s);
    return rc;
}

void store_free(store *s)
{
    if (s == NULL)
        return;
    if (s->syncer_on) {
        pthread_mutex_lock(&s->smu);
        s->stopping = true;
        pthread_cond_signal(&s->scv);
        pthread_cond_signal(&s->ccv);
        pthread_mutex_unlock(&s->smu);
        pthread_join(s->syncer, NULL);
        if (s->compactor_on)
            pthread_join(s->compactor, NULL);
    }
    if (s->syncer_on)
        (void)store_checkpoint(s); /* leaves an empty log */
    store__wal_free(s->wal);
    store__mem_free(s->mem);
    store__mem_free(s->imm);
    store__cache_free(s->cache);
    for (size_t i = 0; i < s->nranges; i++)
        store__range_close(s->ranges[i]);
    free(s->ranges);
    if (s->sys_env)
        mdb_env_close(s->sys_env);
    if (s->hint_env)
        mdb_env_close(s->hint_env);
    pthread_rwlock_destroy(&s->maplock);
    pthread_rwlock_destroy(&s->walock);
    pthread_mutex_destroy(&s->ckmu);
    pthread_mutex_destroy(&s->hintmu);
    pthread_mutex_destroy(&s->opmu);
    pthread_mutex_destroy(&s->gmu);
    pthread_mutex_destroy(&s->smu);
    pthread_cond_destroy(&s->scv);
    pthread_cond_destroy(&s->ccv);
    pthread_mutex_destroy(&s->memmu);
    pthread_mutex_destroy(&s->ceilmu);
    pthread_mutex_destroy(&s->flmu);
    pthread_mutex_destroy(&s->skipmu);
    pthread_mutex_destroy(&s->spacemu);
    close(s->dir_fd);
    free(s->logdir);
    free(s->dir);
    free(s);
}

/* ---- Reads -------------------------------------------------------------- */

/* Copy len bytes of p into the caller's buffer *buf of *cap bytes (NULL /
 * 0: none yet), growing it with realloc: 0 or -ENOMEM (*buf untouched). */
static int store__buf_put_at(
    uint8_t **buf, size_t *cap, size_t at, const void *p, size_t len)
{
    if (*buf == NULL || *cap < at + len) {
        size_t want = at + len ? at + len : 1;
        uint8_t *nb = realloc(*buf, want);
        if (nb == NULL)
            return -ENOMEM;
        *buf = nb;
        *cap = want;
    }
    if (len)
        memcpy(*buf + at, p, len);
    return 0;
}

static int store__buf_put(uint8_t **buf, size_t *cap, const void *p, size_t len)
{
    return store__buf_put_at(buf, cap, 0, p, len);
}

void store_prefetch(store *s, uint64_t token)
{
    for (int i = 0; i < 3; i++) {
        uintptr_t tab =
            atomic_load_explicit(&s->pf_tab[i], memory_order_relaxed);
        size_t mask =
            atomic_load_explicit(&s->pf_mask[i], memory_order_relaxed);
        /* integer arithmetic: a stale table's slot is only an address */
        if (tab != 0)
            __builtin_prefetch(
                (const void *)(tab + (token & mask) * sizeof(void *)));
    }
}

void store_prefetch_many(store *s, const uint64_t *tokens, size_t n)
{
    for (size_t i = 0; i < n; i++)
        store_prefetch(s, tokens[i]);
    pthread_mutex_lock(&s->memmu);
    for (size_t i = 0; i < n; i++) {
        store__mem_prefetch(s->mem, tokens[i], 1);
        if (s->imm != NULL)
            store__mem_prefetch(s->imm, tokens[i], 1);
        if (s->cache != NULL)
            store__cache_prefetch(s->cache, tokens[i]);
    }
    pthread_mutex_unlock(&s->memmu);
}

/* What a read learned from the memtable (store__mem_find), for
 * store__read_note. */
struct store__memseen {
    bool known; /* the record found is marked: the env need not be read */
    uint64_t epoch, gen; /* the store's known_epoch and env_gen then */
    /* The read cache had the env's record (cached: copied after the
     * memtable's, clen bytes) or knew it had none (absent). */
    bool cached, absent;
    size_t clen;
};

/* The memtable's record of key, the LWW winner of mem's and imm's (mem's
 * on a tie), and where its entry's `known` mark is (memmu held). */
static int store__mem_winner(struct rk_slice *rec,
                             uint64_t **known,
                             store *s,
                             uint64_t t,
                             struct rk_slice key)
{
    struct rk_slice b;
    uint64_t *kb;
    int ra = store__mem_get(rec, known, s->mem, t, key);
    int rb = s->imm ? store__mem_get(&b, &kb, s->imm, t, key) : RK_ENOTFOUND;
    if (rb != 0)
        return ra;
    struct store_record x, y;
    if (ra != 0 || (store_record_decode(&x, rec->p, rec->len) == 0 &&
                    store_record_decode(&y, b.p, b.len) == 0 &&
                    store_record_cmp(&y, &x) > 0)) {
        *rec = b;
        *known = kb;
    }
    return 0;
}

/* The memtable's record of key copied into *buf (store__buf_put): 0,
 * RK_ENOTFOUND or -ENOMEM.
 *
 * A record whose entry is marked with the current known_epoch is at least
 * as new as the env's record of its key, so the read can end here: a
 * benchmark's GETs of keys it just SET did two lookups, each a few cache
 * misses, where one answers (issue 30). A record is marked as it enters
 * the memtable when its timestamp is above every env's (ts_bound,
 * store__mem_add), or by a read that has also read the env and found the
 * memtable's record newer (store__read_note). The mark stays true: the env
 * changes only by
 *  - a memtable apply, which writes imm's records, each one no newer than
 *    the winner of mem and imm that was marked;
 *  - a commit from outside the memtable (a streamed chunk, an adopted
 *    env), which raises ts_bound first, and after which known_epoch moves
 *    on and every mark is void;
 *  - deletes (a purge, a drop), which leave nothing newer.
 * A record that replaces a marked one in its table is newer, so it keeps
 * the mark (store__mem_put). As Cassandra stops reading SSTables older
 * than a cell already found, by timestamp. */
static int store__mem_find(uint8_t **buf,
                           size_t *cap,
                           size_t *out_len,
                           struct store__memseen *seen,
                           store *s,
                           uint64_t rid,
                           uint64_t t,
                           struct rk_slice key)
{
    struct rk_slice a;
    uint64_t *ka;
    seen->known = seen->cached = seen->absent = false;
    seen->clen = 0;
    pthread_mutex_lock(&s->memmu);
    seen->epoch = s->known_epoch;
    seen->gen = s->env_gen;
    int rc = store__mem_winner(&a, &ka, s, t, key);
    size_t mlen = 0;
    if (rc == 0) {
        seen->known = *ka == seen->epoch;
        s->known_reads += seen->known;
        if ((rc = store__buf_put(buf, cap, a.p, a.len)) == 0)
            *out_len = mlen = a.len;
    }
    struct rk_slice c;
    if ((rc == 0 || rc == RK_ENOTFOUND) && !seen->known && s->cache &&
        store__cache_get(&c, &seen->absent, s->cache, t, rid, key) == 0) {
        seen->cached = true;
        if (!seen->absent) { /* after the memtable's record */
            int r2 = store__buf_put_at(buf, cap, mlen, c.p, c.len);
            seen->cached = r2 == 0;
            seen->clen = c.len;
        }
    }
    pthread_mutex_unlock(&s->memmu);
    return rc;
}

/* What a read learned from the env, noted under memmu -- only if no env
 * changed since its memtable lookup (env_gen):
 *  - with `mark`, the memtable's record of key, rec (found by
 *    store__mem_find, then found at least as new as the env's), is marked
 *    known, if the memtable's winner is still rec byte for byte (an entry
 *    freed meanwhile may have been reused; a newer write that came
 *    meanwhile is marked by its next read);
 *  - with `cache`, the read cache keeps the env's record of key, *env (or
 *    that it had none: NULL), read from range rid, unless an env change
 *    is under way (cache_hold). */
static void store__read_note(store *s,
                             const struct store__memseen *seen,
                             uint64_t t,
                             struct rk_slice key,
                             bool mark,
                             struct rk_slice rec,
                             bool cache,
                             uint64_t rid,
                             const struct rk_slice *env)
{
    struct rk_slice a;
    uint64_t *ka;
    cache = cache && s->cache != NULL;
    if (!mark && !cache)
        return;
    pthread_mutex_lock(&s->memmu);
    if (s->env_gen == seen->gen) {
        if (mark && store__mem_winner(&a, &ka, s, t, key) == 0 &&
            a.len == rec.len && memcmp(a.p, rec.p, rec.len) == 0)
            *ka = seen->epoch;
        if (cache && s->cache_hold == 0) {
            store__cache_put(s->cache, t, rid, key, env);
            store__cache_publish(s); /* it may have grown */
        }
    }
    pthread_mutex_unlock(&s->memmu);
}

/* The record of key, the LWW winner of the memtable's and the env's, into
 * *buf (store__buf_put). The memtable's record is copied there first; an
 * env record that wins replaces it (m, decoded from it, is not used after
 * that). The env's record comes from the read cache when it has it
 * (store__mem_find copies it after the memtable's), else from the env,
 * and then goes into the cache. */
static int store__get(uint8_t **buf,
                      size_t *cap,
                      size_t *out_len,
                      store *s,
                      struct rk_slice key,
                      bool live_only,
                      uint64_t now_ms)
{
    int rc = store__key_check(key);
    if (rc)
        return rc;
    uint64_t t = rk_token(key.p, key.len);
    uint8_t kb[STORE__IKEY_MAX];
    MDB_val k = {store__ikey(kb, t, key), kb}, v;
    MDB_txn *txn = NULL;
    bool inmem = false; /* *buf holds the memtable's record */
    size_t mlen = 0;
    struct store_record r, m;
    struct store__memseen seen;
    pthread_rwlock_rdlock(&s->maplock);
    struct store__range *rr = store__lookup(s, t);
    if (rr == NULL) {
        rc = RK_ENOTFOUND;
        goto unlock;
    }
    uint64_t rid = atomic_load(&rr->cache_id);
    /* The memtable first: a write that moves from it to the env meanwhile
     * is then found in the env (or in the read cache, which takes it
     * before it leaves imm; docs/storage.md, "The read cache"). */
    rc = store__mem_find(buf, cap, &mlen, &seen, s, rid, t, key);
    if (rc != 0 && rc != RK_ENOTFOUND)
        goto unlock;
    inmem = rc == 0;
    if (inmem && (rc = store_record_decode(&m, *buf, mlen)))
        goto unlock;
    if (inmem && seen.known) {
        rc = live_only && !store_record_live(&m, now_ms) ? RK_ENOTFOUND : 0;
        if (rc == 0)
            *out_len = mlen;
        goto unlock;
    }
    struct rk_slice uk, rec;
    if (seen.cached && seen.absent) {
        rc = RK_ENOTFOUND;
        if (inmem)
            store__read_note(s, &seen, t, key, true, RK_SLICE(*buf, mlen),
                             false, 0, NULL);
        goto done;
    }
    if (seen.cached) {
        rec = RK_SLICE(*buf + mlen, seen.clen);
    } else {
        if ((rc = store__rtxn(&txn, rr)))
            goto unlock;
        rc = store__err(mdb_get(txn, rr->dbi, &k, &v));
        if (rc == 0 && (rc = store__stored_split(&uk, &rec, &k, &v)) == 0 &&
            (uk.len != key.len || memcmp(uk.p, key.p, key.len) != 0))
            rc = RK_ENOTFOUND; /* another key's 128-bit hash: not this key */
        if (rc == RK_ENOTFOUND)
            store__read_note(s, &seen, t, key, inmem, RK_SLICE(*buf, mlen),
                             true, rid, NULL);
        if (rc)
            goto done;
    }
    if ((rc = store_record_decode(&r, rec.p, rec.len)))
        goto done;
    bool mwins = inmem && store_record_cmp(&m, &r) >= 0;
    if (mwins || !seen.cached)
        store__read_note(s, &seen, t, key, mwins, RK_SLICE(*buf, mlen),
                         !seen.cached, rid, &rec);
    if (mwins)
        goto done; /* the memtable's wins */
    inmem = false;
    if (live_only && !store_record_live(&r, now_ms)) {
        rc = RK_ENOTFOUND;
        goto done;
    }
    if (seen.cached) {
        memmove(*buf, rec.p, rec.len);
        *out_len = rec.len;
    } else if ((rc = store__buf_put(buf, cap, rec.p, rec.len)) == 0) {
        *out_len = rec.len;
    }
done:
    if (txn != NULL)
        store__rtxn_done(rr, txn);
    if (inmem && (rc == 0 || rc == RK_ENOTFOUND || rc == RK_ECORRUPT ||
                  rc == RK_EVERSION)) {
        /* the memtable's record wins (an undecodable stored one loses) */
        rc = live_only && !store_record_live(&m, now_ms) ? RK_ENOTFOUND : 0;
        if (rc == 0)
            *out_len = mlen;
    }
unlock:
    pthread_rwlock_unlock(&s->maplock);
    return rc;
}

/* store_get and store_get_raw: a malloc'd copy of the caller's own. */
static int store__get_copy(uint8_t **out,
                           size_t *out_len,
                           store *s,
                           struct rk_slice key,
                           bool live_only,
                           uint64_t now_ms)
{
    uint8_t *buf = NULL;
    size_t cap = 0;
    int rc = store__get(&buf, &cap, out_len, s, key, live_only, now_ms);
    if (rc == 0)
        *out = buf;
    else
        free(buf);
    return rc;
}

int store_get(uint8_t **out,
              size_t *out_len,
              store *s,
              struct rk_slice key,
              uint64_t now_ms)
{
    return store__get_copy(out, out_len, s, key, true, now_ms);
}

int store_get_raw(uint8_t **out, size_t *out_len, store *s, struct rk_slice key)
{
    return store__get_copy(out, out_len, s, key, false, 0);
}

int store_get_raw_into(
    uint8_t **buf, size_t *cap, size_t *out_len, store *s, struct rk_slice key)
{
    return store__get(buf, cap, out_len, s, key, false, 0);
}
