/*
 * range.c - range operations (create, split, merge, compact, drop, adopt)
 * and the recovery that makes them crash-safe. Scans, digests, Merkle
 * leaves, gc and the walk over an arc's entries are in scan.c.
 *
 * The range map in system/ is the single source of truth. Every operation
 * first builds whatever new env it needs and syncs it, then switches the
 * map in one synced system transaction, then cleans up. Recovery at open
 * (store__recover) finishes the clean-up from whatever point a crash left:
 * envs the map does not name are deleted, and entries an env holds outside
 * its range (left by a split or merge) are removed. So after kill -9 at any
 * point every key is in exactly one env. Directory renames (to keep
 * ranges/<start>_<end> names true after a split) are recorded in the map
 * before they happen and finished at load.
 */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <ftw.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/statvfs.h>
#include <time.h>
#include <unistd.h>

#include "storage/store.h"
#include "storage/store_internal.h"

/* ---- Directories -------------------------------------------------------- */

char *store__range_dirname(store *s, struct store_range r, const char *name)
{
    size_t n = strlen(s->dir) + 8 + 40 + (name ? strlen(name) : 0);
    char *p = malloc(n);
    if (p == NULL)
        return NULL;
    if (name)
        snprintf(p, n, "%s/ranges/%s", s->dir, name);
    else
        snprintf(p, n, "%s/ranges/%016" PRIx64 "_%016" PRIx64, s->dir, r.start,
                 r.end);
    return p;
}

static int store__rm_one(const char *path,
                         const struct stat *st,
                         int flag,
                         struct FTW *ftw)
{
    (void)st;
    (void)flag;
    (void)ftw;
    return remove(path) == 0 || errno == ENOENT ? 0 : -1;
}

int store__rmtree(const char *path)
{
    struct stat st;
    if (lstat(path, &st) != 0)
        return errno == ENOENT ? 0 : -errno;
    if (nftw(path, store__rm_one, 16, FTW_DEPTH | FTW_PHYS) != 0)
        return -errno;
    return 0;
}

static int store__fsync_ranges_dir(store *s)
{
    char *p = store__path(s->dir, "ranges");
    if (p == NULL)
        return -ENOMEM;
    int rc = rk_fsync_dir(p);
    free(p);
    return rc;
}

static bool
store__dir_used(store *s, const char *dir, const struct store__range *except)
{
    for (size_t i = 0; i < s->nranges; i++)
        if (s->ranges[i] != except && strcmp(s->ranges[i]->dir, dir) == 0)
            return true;
    return false;
}

/* A directory for a new env of range r that no live env uses: the
 * canonical name when free, else with a "~N" suffix. Garbage found at
 * that path (not in the map) is removed. */
static char *store__fresh_dir(store *s, struct store_range r)
{
    char *base = store__range_dirname(s, r, NULL);
    if (base == NULL)
        return NULL;
    char *p = strdup(base);
    for (int i = 1; p != NULL && store__dir_used(s, p, NULL); i++) {
        free(p);
        size_t n = strlen(base) + 16;
        p = malloc(n);
        if (p)
            snprintf(p, n, "%s~%d", base, i);
    }
    free(base);
    if (p != NULL && store__rmtree(p) != 0) {
        free(p);
        return NULL;
    }
    return p;
}

int store__finish_rename(store *s,
                         struct store_range r,
                         const char *dir,
                         const char *prev)
{
    struct stat st;
    if (stat(dir, &st) == 0)
        return 0; /* the rename happened */
    char *old = store__range_dirname(s, r, prev);
    if (old == NULL)
        return -ENOMEM;
    int rc = rename(old, dir) == 0 ? 0 : -errno;
    free(old);
    if (rc == 0)
        rc = store__fsync_ranges_dir(s);
    return rc;
}

/* Give rr's directory its canonical name, crash-safely (see the top). */
static int store__canonicalize(store *s, struct store__range *rr)
{
    char *canon = store__range_dirname(s, rr->r, NULL);
    if (canon == NULL)
        return -ENOMEM;
    int rc = 0;
    if (strcmp(canon, rr->dir) == 0 || store__dir_used(s, canon, rr))
        goto free_canon;
    if ((rc = store__rmtree(canon)))
        goto free_canon;
    const char *names[1] = {canon}, *prevs[1] = {rr->dir};
    if ((rc = store__map_put(s, &rr->r, 1, names, prevs, NULL, 0)))
        goto free_canon;
    if (rename(rr->dir, canon) != 0) {
        rc = -errno;
        goto free_canon; /* the map keeps prev; load finishes or keeps it */
    }
    (void)store__fsync_ranges_dir(s);
    rc = store__map_put(s, &rr->r, 1, names, NULL, NULL, 0);
    free(rr->dir);
    rr->dir = canon;
    return rc;
free_canon:
    free(canon);
    return rc;
}

/* ---- Deleting an arc ---------------------------------------------------- */

static int
store__del_cb(MDB_cursor *cur, const MDB_val *k, const MDB_val *v, void *arg)
{
    (void)k;
    (void)v;
    (*(uint64_t *)arg)++;
    return mdb_cursor_del(cur, 0) ? RK_EINTERNAL : 0;
}

/* Delete every entry of rr's env in `arc`, commit (not synced). */
static int store__delete_arc(struct store__range *rr,
                             struct store_range arc,
                             uint64_t *out_n)
{
    MDB_txn *txn;
    uint64_t n = 0;
    int rc = mdb_txn_begin(rr->env, NULL, 0, &txn);
    if (rc)
        return store__err(rc);
    rc = store__walk(txn, rr->dbi, arc, store__del_cb, &n);
    if (rc) {
        mdb_txn_abort(txn);
        return rc;
    }
    rc = store__err(mdb_txn_commit(txn));
    if (rc == 0 && out_n)
        *out_n = n;
    return rc;
}

int store__purge_outside(struct store__range *rr)
{
    if (rr->r.start == rr->r.end)
        return 0; /* the whole ring: nothing is outside */
    struct store_range out = {rr->r.end, rr->r.start};
    uint64_t n = 0;
    int rc = store__delete_arc(rr, out, &n);
    if (rc == 0 && n > 0)
        rc = store__err(mdb_env_sync(rr->env, 1));
    return rc;
}

/* Raise rr's map to at least `size` (capped by map_size_max). Exclusive. */
static int store__map_atleast(store *s, struct store__range *rr, size_t size)
{
    if (size > s->o.map_size_max)
        size = s->o.map_size_max;
    if (size <= rr->map_size)
        return 0;
    return store__map_set(s, rr, size);
}

/* ---- Disk space --------------------------------------------------------- */

#define STORE__SKIP_REPORT_MS 60000 /* a range's skips reported this often */

/* Count a skip of a job on rr, and report it unless rr's last report is
 * under a minute old (opmu held: rr stays). */
static void store__skip_note(store *s,
                             struct store__range *rr,
                             const char *job,
                             uint64_t need,
                             uint64_t avail)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    uint64_t now = (uint64_t)ts.tv_sec * 1000 + (uint64_t)ts.tv_nsec / 1000000;
    pthread_mutex_lock(&s->skipmu);
    s->space_skips++;
    rr->skips_unreported++;
    if ((!rr->skip_reported ||
         now - rr->skip_reported_ms >= STORE__SKIP_REPORT_MS) &&
        s->nskipq < STORE_SKIPS_QUEUED) {
        s->skipq[s->nskipq++] = (struct store_space_skip){
            rr->r, job, need, avail, rr->skips_unreported};
        rr->skips_unreported = 0;
        rr->skip_reported = true;
        rr->skip_reported_ms = now;
    }
    pthread_mutex_unlock(&s->skipmu);
}

/* 0 if data_dir's file system has room for a job on rr that writes about
 * `bytes` (store.h: plus an eighth and STORE_SPACE_MARGIN); else -ENOSPC,
 * the skip noted. opmu and maplock held. */
static int store__space_check(store *s,
                              struct store__range *rr,
                              const char *job,
                              uint64_t bytes)
{
    struct statvfs vs;
    if (statvfs(s->dir, &vs) != 0)
        return -errno;
    uint64_t avail = (uint64_t)vs.f_bavail * vs.f_frsize;
    uint64_t need = bytes + bytes / 8 + STORE_SPACE_MARGIN;
    if (avail >= need)
        return 0;
    store__skip_note(s, rr, job, need, avail);
    return -ENOSPC;
}

/* rr's pages in use, in bytes: what a packed copy of it takes at most. */
static uint64_t store__live_bytes(struct store__range *rr)
{
    MDB_stat st;
    if (mdb_env_stat(rr->env, &st) != 0)
        return rr->map_size; /* cannot happen on an open env; be safe */
    return (uint64_t)st.ms_psize *
           (st.ms_branch_pages + st.ms_leaf_pages + st.ms_overflow_pages);
}

/* The map of a new env filled with (part of) rr's entries: twice rr's.
 * With write_map the map is allocated whole on disk, so it is sized by
 * what is copied instead: twice rr's pages in use, at least map_size (a
 * keep then a merge, over and over, would double it each time). */
static size_t store__copy_map(store *s, struct store__range *rr)
{
    if (!s->o.write_map)
        return 2 * rr->map_size;
    uint64_t want = 2 * store__live_bytes(rr);
    return want > s->o.map_size ? (size_t)want : s->o.map_size;
}

/* The bytes `maps` new envs copying rr's entries take: its pages in use,
 * or with write_map their maps (allocated whole). */
static uint64_t
store__copy_bytes(store *s, struct store__range *rr, size_t maps)
{
    if (s->o.write_map)
        return (uint64_t)maps * store__copy_map(s, rr);
    return store__live_bytes(rr);
}

uint64_t store_space_skips(store *s)
{
    pthread_mutex_lock(&s->skipmu);
    uint64_t n = s->space_skips;
    pthread_mutex_unlock(&s->skipmu);
    return n;
}

size_t
store_space_skips_take(struct store_space_skip *out, size_t max, store *s)
{
    pthread_mutex_lock(&s->skipmu);
    size_t n = s->nskipq < max ? s->nskipq : max;
    memcpy(out, s->skipq, n * sizeof(*out));
    memmove(s->skipq, s->skipq + n, (s->nskipq - n) * sizeof(*s->skipq));
    s->nskipq -= n;
    pthread_mutex_unlock(&s->skipmu);
    return n;
}

/* ---- Recovery ----------------------------------------------------------- */

int store__recover(store *s)
{
    int rc = 0;
    for (size_t i = 0; i < s->nranges; i++) {
        struct store__range *rr = s->ranges[i];
        if ((rc = store__purge_outside(rr)))
            return rc;
        /* Rewrite the map entry, which also clears a finished rename. */
        const char *names[1] = {rr->dir};
        if ((rc = store__map_put(s, &rr->r, 1, names, NULL, NULL, 0)))
            return rc;
        if ((rc = store__canonicalize(s, rr)))
            return rc;
    }
    char *rdir = store__path(s->dir, "ranges");
    if (rdir == NULL)
        return -ENOMEM;
    DIR *d = opendir(rdir);
    if (d == NULL) {
        rc = -errno;
        free(rdir);
        return rc;
    }
    struct dirent *e;
    while (rc == 0 && (e = readdir(d)) != NULL) {
        if (strcmp(e->d_name, ".") == 0 || strcmp(e->d_name, "..") == 0)
            continue;
        char *p = store__path(rdir, e->d_name);
        if (p == NULL) {
            rc = -ENOMEM;
            break;
        }
        if (!store__dir_used(s, p, NULL))
            rc = store__rmtree(p); /* an env the map does not name */
        free(p);
    }
    closedir(d);
    free(rdir);
    return rc;
}

/* ---- Range operations --------------------------------------------------- */

static bool store__overlap(struct store_range a, struct store_range b)
{
    return store_range_contains(a, b.end) || store_range_contains(b, a.end);
}

static int store__rcmp(const void *a, const void *b)
{
    const struct store__range *x = *(struct store__range *const *)a;
    const struct store__range *y = *(struct store__range *const *)b;
    return x->r.end < y->r.end ? -1 : x->r.end > y->r.end;
}

static int store__insert(store *s, struct store__range *rr)
{
    struct store__range **nr =
        realloc(s->ranges, (s->nranges + 1) * sizeof(*nr));
    if (nr == NULL)
        return -ENOMEM;
    s->ranges = nr;
    s->ranges[s->nranges++] = rr;
    qsort(s->ranges, s->nranges, sizeof(*s->ranges), store__rcmp);
    return 0;
}

static void store__remove(store *s, size_t idx)
{
    memmove(&s->ranges[idx], &s->ranges[idx + 1],
            (s->nranges - idx - 1) * sizeof(*s->ranges));
    s->nranges--;
}

/* Open a new env for r in a fresh directory, synced into ranges/. */
static int
store__new_env(struct store__range **out, store *s, struct store_range r)
{
    *out = NULL;
    char *dir = store__fresh_dir(s, r);
    if (dir == NULL)
        return -ENOMEM;
    int rc = store__range_open(out, s, r, dir);
    if (rc == 0)
        rc = store__fsync_ranges_dir(s);
    if (rc) {
        if (*out) {
            store__range_close(*out);
            *out = NULL;
        }
        store__rmtree(dir);
    }
    free(dir);
    return rc;
}

static void store__discard_env(struct store__range *rr)
{
    char *dir = strdup(rr->dir);
    store__range_close(rr);
    if (dir)
        store__rmtree(dir);
    free(dir);
}

int store_range_create(store *s, struct store_range r)
{
    int rc = 0;
    struct store__range *rr = NULL;
    pthread_mutex_lock(&s->opmu);
    pthread_rwlock_wrlock(&s->maplock);
    for (size_t i = 0; i < s->nranges; i++)
        if (store__overlap(s->ranges[i]->r, r)) {
            rc = RK_EEXIST;
            goto unlock;
        }
    if ((rc = store__new_env(&rr, s, r)))
        goto unlock;
    const char *names[1] = {rr->dir};
    if ((rc = store__map_put(s, &r, 1, names, NULL, NULL, 0)) ||
        (rc = store__insert(s, rr))) {
        store__discard_env(rr);
        goto unlock;
    }
unlock:
    pthread_rwlock_unlock(&s->maplock);
    pthread_mutex_unlock(&s->opmu);
    return rc;
}

static int store__fill_cb(const struct store_item *it, void *arg)
{
    return store__batch_push(arg, it->token, it->key, it->rec, true);
}

/* LWW-merge every entry of `arc` (held by some local env) into dst, in
 * chunks, each read and then written under the shared map lock (taken
 * before dst's LMDB writer lock, in the order commits take them). Commits
 * go on in between; those in `arc` are mirrored into dst by the source
 * env's shadow. */
static int
store__fill(store *s, struct store__range *dst, struct store_range arc)
{
    store_batch *b;
    int rc = store_batch_new(&b);
    if (rc)
        return rc;
    struct store_scan sc;
    store_scan_init(&sc, arc);
    while (rc == 0 && !sc.done) {
        store_batch_reset(b);
        rc = store_scan_next(s, &sc, 1024, (size_t)4 << 20, store__fill_cb, b);
        if (rc || store_batch_count(b) == 0)
            continue;
        /* Shared lock first, then dst's writer lock, as commits take them:
         * no cycle, and no map growth of dst under this transaction. */
        pthread_rwlock_rdlock(&s->maplock);
        MDB_txn *txn = NULL;
        MDB_cursor *cur = NULL;
        rc = store__err(mdb_txn_begin(dst->env, NULL, 0, &txn));
        if (rc == 0)
            rc = store__err(mdb_cursor_open(txn, dst->dbi, &cur));
        for (size_t i = 0; rc == 0 && i < store_batch_count(b); i++)
            rc = store__err(store__batch_apply(cur, b, i));
        if (cur != NULL)
            mdb_cursor_close(cur);
        if (rc == 0)
            rc = store__err(mdb_txn_commit(txn));
        else if (txn != NULL)
            mdb_txn_abort(txn);
        pthread_rwlock_unlock(&s->maplock);
    }
    store_batch_free(b);
    return rc;
}

/* Copy src's entries in `arc` into dst while commits go on (src mirrors its
 * writes in `arc` into dst meanwhile), then sync dst. Called and returns with
 * maplock held for writing; drops it during the copy. */
static int store__fill_shadowed(store *s,
                                struct store__range *src,
                                struct store__range *dst,
                                struct store_range arc)
{
    src->shadow = dst;
    src->shadow_arc = arc;
    atomic_store(&src->shadow_failed, false);
    pthread_rwlock_unlock(&s->maplock);
    int rc = store__fill(s, dst, arc);
    pthread_rwlock_wrlock(&s->maplock);
    src->shadow = NULL;
    if (rc == 0 && atomic_load(&src->shadow_failed))
        rc = RK_EFULL;
    if (rc == 0)
        rc = store__err(mdb_env_sync(dst->env, 1));
    return rc;
}

int store_range_split(store *s, struct store_range r, uint64_t at)
{
    int rc;
    struct store__range *nr = NULL, *old;
    pthread_mutex_lock(&s->opmu);
    pthread_rwlock_wrlock(&s->maplock);
    int idx = store__range_index(s, r);
    if (idx < 0) {
        rc = idx;
        goto unlock;
    }
    if (!store_range_contains(r, at) || at == r.end) {
        rc = RK_EBADREQ;
        goto unlock;
    }
    old = s->ranges[idx];
    struct store_range lo = {r.start, at}, hi = {at, r.end};
    if ((rc =
             store__space_check(s, old, "split", store__copy_bytes(s, old, 1))))
        goto unlock;
    if ((rc = store__new_env(&nr, s, hi)) ||
        (rc = store__map_atleast(s, nr, store__copy_map(s, old))))
        goto discard;
    /* Fill the new env while commits go on, mirroring into it. */
    if ((rc = store__fill_shadowed(s, old, nr, hi)) ||
        (rc = store__err(mdb_env_sync(old->env, 1))))
        goto discard;
    struct store_range add[2] = {lo, hi};
    const char *names[2] = {old->dir, nr->dir};
    if ((rc = store__map_put(s, add, 2, names, NULL, &r, 1)))
        goto discard;
    /* The map now says lo lives in old's env, hi in nr's. */
    old->r = lo;
    if ((rc = store__insert(s, nr))) {
        store__range_close(nr); /* recovery reopens it from the map */
        goto unlock;
    }
    (void)store__delete_arc(old, hi, NULL); /* else recovery does it */
    store__cache_forget_range(s, old);      /* hi's records left it */
    rc = store__canonicalize(s, old);
    goto unlock;
discard:
    if (nr)
        store__discard_env(nr);
unlock:
    pthread_rwlock_unlock(&s->maplock);
    pthread_mutex_unlock(&s->opmu);
    return rc;
}

int store_range_merge(store *s, struct store_range a, struct store_range b)
{
    int rc;
    pthread_mutex_lock(&s->opmu);
    pthread_rwlock_wrlock(&s->maplock);
    int ia = store__range_index(s, a), ib = store__range_index(s, b);
    if (ia < 0 || ib < 0) {
        rc = RK_ENOTFOUND;
        goto unlock;
    }
    if (ia == ib || a.end != b.start) {
        rc = RK_EBADREQ;
        goto unlock;
    }
    struct store__range *A = s->ranges[ia], *B = s->ranges[ib];
    struct store_range m = {a.start, b.end};
    size_t grow = s->o.write_map ? store__copy_map(s, B) : B->map_size;
    if ((rc = store__space_check(s, B, "merge", store__copy_bytes(s, B, 1))) ||
        (rc = store__map_atleast(s, A, A->map_size + grow)))
        goto unlock;
    /* Copy B into A while commits go on, mirroring B's writes into A. */
    if ((rc = store__fill_shadowed(s, B, A, b))) {
        (void)store__delete_arc(A, b, NULL); /* else recovery does it */
        goto unlock;
    }
    const char *names[1] = {A->dir};
    struct store_range del[2] = {a, b};
    if ((rc = store__map_put(s, &m, 1, names, NULL, del, 2)))
        goto unlock;
    A->r = m;
    store__cache_forget_range(s, A); /* it holds b's records now */
    store__remove(s, (size_t)store__range_index(s, b));
    store__discard_env(B);
    qsort(s->ranges, s->nranges, sizeof(*s->ranges), store__rcmp);
    rc = store__canonicalize(s, A);
unlock:
    pthread_rwlock_unlock(&s->maplock);
    pthread_mutex_unlock(&s->opmu);
    return rc;
}

/* ---- Compaction and keeping sub-arcs ------------------------------------ */

/* A rewrite of the env of range r into one fresh env per kept arc. */
struct store__rw {
    store *s;
    struct store_range r;
    const struct store_range *keep; /* in order along r, disjoint */
    size_t nkeep;
    struct store__range *old;
    struct store__range **nr; /* nkeep: the new envs */
    MDB_txn **wt;             /* nkeep: a write txn on each, while open */
    MDB_cursor **wcur;
    struct store__wlog *log;
    store_batch *work; /* an empty batch, swapped with the log's */
};

/* Where token t (in r) lies along r: 0 just after r.start. */
static uint64_t store__pos(struct store_range r, uint64_t t)
{
    return t - r.start - 1;
}

/* The kept arc holding token t, or nkeep (t is dropped): a binary search,
 * the arcs being in order along r. */
static size_t store__rw_arc(const struct store__rw *w, uint64_t t)
{
    uint64_t p = store__pos(w->r, t);
    size_t lo = 0, hi = w->nkeep;
    while (lo < hi) { /* the first arc ending at or after t */
        size_t mid = lo + (hi - lo) / 2;
        if (store__pos(w->r, w->keep[mid].end) < p)
            lo = mid + 1;
        else
            hi = mid;
    }
    return lo < w->nkeep && store_range_contains(w->keep[lo], t) ? lo
                                                                 : w->nkeep;
}

/* A cursor of a write txn on new env i, begun when first needed. */
static int store__rw_cursor(struct store__rw *w, size_t i, MDB_cursor **out)
{
    if (w->wt[i] == NULL) {
        int rc = mdb_txn_begin(w->nr[i]->env, NULL, 0, &w->wt[i]);
        if (rc == 0 &&
            (rc = mdb_cursor_open(w->wt[i], w->nr[i]->dbi, &w->wcur[i])) != 0) {
            mdb_txn_abort(w->wt[i]);
            w->wt[i] = NULL;
        }
        if (rc)
            return rc;
    }
    *out = w->wcur[i];
    return 0;
}

/* Commit (rc 0) or abort every write txn begun; the first error. */
static int store__rw_end(struct store__rw *w, int rc)
{
    for (size_t i = 0; i < w->nkeep; i++) {
        if (w->wt[i] == NULL)
            continue;
        if (rc == 0)
            rc = mdb_txn_commit(w->wt[i]); /* closes the cursor */
        else
            mdb_txn_abort(w->wt[i]);
        w->wt[i] = NULL;
    }
    return rc;
}

/* Copy the next chunk of old's entries into the new env of the kept arc
 * holding each (an entry in none is left behind), in key order with
 * MDB_APPEND, so the new envs' leaf pages are packed full. last/last_len
 * hold the last key copied (0: none yet); *done is set at the end of old.
 * Called under the shared map lock. */
static int store__append_chunk(struct store__rw *w,
                               uint8_t *last,
                               size_t *last_len,
                               bool *done)
{
    MDB_txn *rt = NULL;
    MDB_cursor *rcur = NULL, *wc;
    int rc = mdb_txn_begin(w->old->env, NULL, MDB_RDONLY, &rt);
    if (rc)
        return store__err(rc);
    if ((rc = mdb_cursor_open(rt, w->old->dbi, &rcur)))
        goto end;
    MDB_val k = {*last_len, last}, v;
    if (*last_len == 0) {
        rc = mdb_cursor_get(rcur, &k, &v, MDB_FIRST);
    } else {
        rc = mdb_cursor_get(rcur, &k, &v, MDB_SET_RANGE);
        if (rc == 0 && k.mv_size == *last_len &&
            memcmp(k.mv_data, last, *last_len) == 0)
            rc = mdb_cursor_get(rcur, &k, &v, MDB_NEXT);
    }
    size_t n = 0, bytes = 0;
    for (; rc == 0; rc = mdb_cursor_get(rcur, &k, &v, MDB_NEXT)) {
        if (n >= 4096 || bytes >= ((size_t)4 << 20))
            break;
        if (k.mv_size < 9 || k.mv_size > STORE__IKEY_MAX) {
            rc = RK_ECORRUPT;
            goto end;
        }
        size_t i = store__rw_arc(w, store__get64(k.mv_data));
        if (i < w->nkeep) {
            if ((rc = store__rw_cursor(w, i, &wc)) ||
                (rc = mdb_cursor_put(wc, &k, &v, MDB_APPEND)))
                goto end;
            bytes += k.mv_size + v.mv_size;
        }
        memcpy(last, k.mv_data, k.mv_size);
        *last_len = k.mv_size;
        n++;
    }
    if (rc == MDB_NOTFOUND)
        *done = true;
    if (rc == MDB_NOTFOUND || rc == 0)
        rc = 0;
end:
    if (rcur)
        mdb_cursor_close(rcur);
    mdb_txn_abort(rt);
    return store__err(store__rw_end(w, rc));
}

/* Merge (LWW) the writes logged so far into the new env of the kept arc
 * holding each (writes in none are dropped). */
static int store__drain(struct store__rw *w, size_t *out_n)
{
    struct store__wlog *log = w->log;
    pthread_mutex_lock(&log->mu);
    store_batch *b = log->b;
    log->b = w->work;
    w->work = b;
    bool failed = log->failed;
    pthread_mutex_unlock(&log->mu);
    *out_n = store_batch_count(b);
    if (failed)
        return -ENOMEM;
    int rc = 0;
    MDB_cursor *wc;
    for (size_t j = 0; rc == 0 && j < *out_n; j++) {
        size_t i = store__rw_arc(w, store__batch_token(b, j));
        if (i < w->nkeep && (rc = store__rw_cursor(w, i, &wc)) == 0)
            rc = store__batch_apply(wc, b, j);
    }
    store_batch_reset(b);
    return store__err(store__rw_end(w, rc));
}

/* The switch, under the exclusive map lock: stop logging old's writes,
 * merge the last of them, sync the new envs, name them in the map in one
 * synced txn (r's entry goes unless the kept arc is r itself) and put them
 * in old's place. On error before the map txn old stays as it was and the
 * new envs are left to the caller; after it they are the store's. */
static int store__rw_switch(struct store__rw *w)
{
    store *s = w->s;
    size_t n;
    w->old->shadow_log = NULL;
    int rc = store__drain(w, &n);
    for (size_t i = 0; rc == 0 && i < w->nkeep; i++)
        rc = store__err(mdb_env_sync(w->nr[i]->env, 1));
    if (rc)
        return rc;
    const char **names = malloc(w->nkeep * sizeof(*names));
    if (names == NULL)
        return -ENOMEM;
    for (size_t i = 0; i < w->nkeep; i++)
        names[i] = w->nr[i]->dir;
    bool same = w->keep[0].start == w->r.start && w->keep[0].end == w->r.end;
    rc = store__map_put(s, w->keep, w->nkeep, names, NULL, &w->r, same ? 0 : 1);
    free(names);
    if (rc)
        return rc;
    /* The map now names the new envs: from here on they are the store's. */
    store__remove(s, (size_t)store__range_index(s, w->r)); /* opmu held */
    store__discard_env(w->old); /* else recovery deletes it (not in the map) */
    w->old = NULL;
    for (size_t i = 0; i < w->nkeep; i++) {
        if (rc == 0 && (rc = store__insert(s, w->nr[i])) == 0)
            w->nr[i] = NULL;
        if (w->nr[i] != NULL) { /* recovery reopens it from the map */
            store__range_close(w->nr[i]);
            w->nr[i] = NULL;
        }
    }
    (void)store__fsync_ranges_dir(s);
    return rc;
}

/* The switch of a rewrite that drops part of r, at a checkpoint's cut (as
 * store_range_drop's, below, and for the same reason). */
static int store__rw_at_cut(store *s, void *arg)
{
    pthread_rwlock_wrlock(&s->maplock);
    int rc = store__rw_switch(arg);
    pthread_rwlock_unlock(&s->maplock);
    return rc;
}

/* Whether keep[0..n) are disjoint sub-arcs of r in order along it; *whole
 * is set when the one kept arc is r itself. */
static bool store__keep_ok(struct store_range r,
                           const struct store_range *keep,
                           size_t n,
                           bool *whole)
{
    *whole = n == 1 && keep[0].start == r.start && keep[0].end == r.end;
    if (n == 0 || n > STORE_KEEP_MAX)
        return false;
    for (size_t i = 0; i < n && !*whole; i++) {
        uint64_t a = keep[i].start, b = keep[i].end;
        if (a == b || !store_range_contains(r, b))
            return false;
        if (a == r.start ? i > 0
                         : !store_range_contains(r, a) ||
                               store__pos(r, a) >= store__pos(r, b) ||
                               (i > 0 && store__pos(r, a) <
                                             store__pos(r, keep[i - 1].end)))
            return false;
    }
    return true;
}

/* Rewrite the env of the local range that is exactly r into one fresh env
 * per keep[i] in key order, while reads and writes go on (old's writes are
 * logged and merged into the new envs), then switch: the new envs replace
 * old in the map and what lies outside every keep[i] is gone. With keep =
 * {r} that is a compaction; else the switch runs at a checkpoint's cut.
 * Crash-safe: the map names either old or the new envs, and recovery
 * deletes the others. */
static int store__rewrite(store *s,
                          struct store_range r,
                          const struct store_range *keep,
                          size_t nkeep)
{
    bool whole;
    if (!store__keep_ok(r, keep, nkeep, &whole))
        return RK_EBADREQ;
    int rc = -ENOMEM;
    struct store__wlog log = {.b = NULL, .failed = false};
    struct store__rw w = {.s = s, .r = r, .keep = keep, .nkeep = nkeep};
    w.log = &log;
    uint8_t last[STORE__IKEY_MAX];
    size_t last_len = 0, n;
    bool done = false;
    pthread_mutex_init(&log.mu, NULL);
    w.nr = calloc(nkeep, sizeof(*w.nr));
    w.wt = calloc(nkeep, sizeof(*w.wt));
    w.wcur = calloc(nkeep, sizeof(*w.wcur));
    if (!w.nr || !w.wt || !w.wcur || (rc = store_batch_new(&log.b)) ||
        (rc = store_batch_new(&w.work)))
        goto free_all;
    pthread_mutex_lock(&s->opmu);
    pthread_rwlock_wrlock(&s->maplock);
    int idx = store__range_index(s, r);
    if (idx < 0) {
        rc = idx;
        goto unlock;
    }
    w.old = s->ranges[idx];
    if ((rc = store__space_check(s, w.old, whole ? "compact" : "keep",
                                 store__copy_bytes(s, w.old, nkeep))))
        goto unlock;
    for (size_t i = 0; i < nkeep; i++)
        if ((rc = store__new_env(&w.nr[i], s, keep[i])) ||
            (rc = store__map_atleast(s, w.nr[i], store__copy_map(s, w.old))))
            goto discard;
    /* From here on every commit to old is logged; the copy below starts
     * later, so each write is in the copy, in the log, or in both (LWW
     * merges make that harmless). */
    w.old->shadow_log = &log;
    pthread_rwlock_unlock(&s->maplock);
    while (rc == 0 && !done) {
        pthread_rwlock_rdlock(&s->maplock);
        rc = store__append_chunk(&w, last, &last_len, &done);
        pthread_rwlock_unlock(&s->maplock);
    }
    /* Catch up with the log while commits go on, until it is short. */
    for (int i = 0; rc == 0 && i < 16; i++)
        if ((rc = store__drain(&w, &n)) == 0 && n < 256)
            break;
    if (rc == 0 && !whole) {
        pthread_mutex_lock(&s->flmu);
        pthread_mutex_lock(&s->ckmu);
        rc = store__checkpoint_locked(s, store__rw_at_cut, &w);
        pthread_mutex_unlock(&s->ckmu);
        pthread_mutex_unlock(&s->flmu);
        pthread_rwlock_wrlock(&s->maplock);
    } else {
        pthread_rwlock_wrlock(&s->maplock);
        if (rc == 0)
            rc = store__rw_switch(&w);
    }
    if (rc)
        goto discard; /* after the switch only the checkpoint's tail failed */
    for (size_t i = 0; i < nkeep; i++) {
        idx = store__range_index(s, keep[i]);
        if (idx >= 0 && (rc = store__canonicalize(s, s->ranges[idx])))
            break;
    }
    goto unlock;
discard:
    if (w.old)
        w.old->shadow_log = NULL;
    for (size_t i = 0; i < nkeep; i++)
        if (w.nr[i])
            store__discard_env(w.nr[i]);
unlock:
    pthread_rwlock_unlock(&s->maplock);
    pthread_mutex_unlock(&s->opmu);
free_all:
    store_batch_free(log.b);
    store_batch_free(w.work);
    free(w.nr);
    free(w.wt);
    free(w.wcur);
    pthread_mutex_destroy(&log.mu);
    return rc;
}

int store_range_compact(store *s, struct store_range r)
{
    return store__rewrite(s, r, &r, 1);
}

int store_range_keep(store *s,
                     struct store_range r,
                     const struct store_range *keep,
                     size_t nkeep)
{
    if (nkeep == 0)
        return store_range_drop(s, r);
    return store__rewrite(s, r, keep, nkeep);
}

/* The log and the memtable may hold writes for r. They must not outlive
 * the drop (a range created over the same tokens later would get them back
 * at replay), so the drop is a checkpoint whose cut also takes r out of the
 * map: no commit sits between its log append and the memtable (walock held
 * exclusively), the memtable's writes for r find no range when applied, and
 * the segments before the cut are retired once the other envs are synced.
 * A crash before that replays them into a map without r: they are
 * skipped. */
static int store__drop_at_cut(store *s, void *arg)
{
    struct store_range r = *(const struct store_range *)arg;
    pthread_rwlock_wrlock(&s->maplock);
    int idx = store__range_index(s, r), rc = idx;
    if (idx >= 0 && (rc = store__map_put(s, NULL, 0, NULL, NULL, &r, 1)) == 0) {
        struct store__range *rr = s->ranges[idx];
        store__remove(s, (size_t)idx);
        store__discard_env(rr);
    }
    pthread_rwlock_unlock(&s->maplock);
    return rc;
}

int store_range_drop(store *s, struct store_range r)
{
    pthread_mutex_lock(&s->opmu);
    pthread_mutex_lock(&s->flmu);
    pthread_mutex_lock(&s->ckmu);
    int rc = store__checkpoint_locked(s, store__drop_at_cut, &r);
    pthread_mutex_unlock(&s->ckmu);
    pthread_mutex_unlock(&s->flmu);
    pthread_mutex_unlock(&s->opmu);
    return rc;
}

int store_range_adopt(store *s, struct store_range r, const char *path)
{
    int rc = 0;
    struct store__range *rr = NULL;
    char *dir = NULL, *file = NULL;
    pthread_mutex_lock(&s->opmu);
    pthread_rwlock_wrlock(&s->maplock);
    for (size_t i = 0; i < s->nranges; i++)
        if (store__overlap(s->ranges[i]->r, r)) {
            rc = RK_EEXIST;
            goto unlock;
        }
    dir = store__fresh_dir(s, r);
    file = dir ? store__path(dir, "data.mdb") : NULL;
    if (file == NULL) {
        rc = -ENOMEM;
        goto unlock;
    }
    if (mkdir(dir, 0755) != 0 || rename(path, file) != 0) {
        rc = -errno;
        goto rmdir;
    }
    if ((rc = store__range_open(&rr, s, r, dir)))
        goto rmdir;
    uint64_t top = 0;
    if ((rc = store__purge_outside(rr)) ||
        (rc = store__err(mdb_env_sync(rr->env, 1))) ||
        (rc = store__fsync_ranges_dir(s)) || (rc = store__env_max_ts(rr, &top)))
        goto close;
    /* its records bound the writes known from now on, before it is kept */
    if ((rc = store__ts_take(s, top)))
        goto close;
    const char *names[1] = {rr->dir};
    if ((rc = store__map_put(s, &r, 1, names, NULL, NULL, 0)) ||
        (rc = store__insert(s, rr)))
        goto close;
    /* Its records come from outside the memtable. No memtable record of
     * r can be marked known (a range's writes leave with its drop, and
     * none is taken without a range), so this is only a guard. */
    store__env_moved(s, true);
    goto unlock;
close:
    store__range_close(rr);
rmdir:
    store__rmtree(dir);
unlock:
    pthread_rwlock_unlock(&s->maplock);
    pthread_mutex_unlock(&s->opmu);
    free(dir);
    free(file);
    return rc;
}

int store_range_list(struct store_range **out, size_t *out_n, store *s)
{
    pthread_rwlock_rdlock(&s->maplock);
    struct store_range *a = malloc((s->nranges + 1) * sizeof(*a));
    if (a != NULL) {
        for (size_t i = 0; i < s->nranges; i++)
            a[i] = s->ranges[i]->r;
        *out = a;
        *out_n = s->nranges;
    }
    pthread_rwlock_unlock(&s->maplock);
    return a ? 0 : -ENOMEM;
}

int store_range_find(struct store_range *out, store *s, uint64_t t)
{
    pthread_rwlock_rdlock(&s->maplock);
    struct store__range *rr = store__lookup(s, t);
    if (rr)
        *out = rr->r;
    pthread_rwlock_unlock(&s->maplock);
    return rr ? 0 : RK_ENOTFOUND;
}

int store_range_info(struct store_range_info *out,
                     store *s,
                     struct store_range r)
{
    pthread_rwlock_rdlock(&s->maplock);
    int rc = store__range_index(s, r);
    if (rc >= 0) {
        struct store__range *rr = s->ranges[rc];
        MDB_stat st;
        rc = store__err(mdb_env_stat(rr->env, &st));
        if (rc == 0) {
            out->keys = st.ms_entries;
            out->disk_bytes =
                (uint64_t)st.ms_psize *
                (st.ms_branch_pages + st.ms_leaf_pages + st.ms_overflow_pages);
            out->map_size = rr->map_size;
        }
    }
    pthread_rwlock_unlock(&s->maplock);
    return rc;
}

int store_range_copy_fd(store *s, struct store_range r, int fd)
{
    (void)store_flush(s); /* the copy holds every committed write */
    pthread_rwlock_rdlock(&s->maplock);
    int rc = store__range_index(s, r);
    if (rc >= 0)
        rc =
            store__err(mdb_env_copyfd2(s->ranges[rc]->env, fd, MDB_CP_COMPACT));
    pthread_rwlock_unlock(&s->maplock);
    return rc;
}

bool store__compact_due(store *s, struct store_range *out)
{
    int pct = atomic_load(&s->auto_pct);
    if (pct < 0)
        return false;
    if (pct == 0)
        pct = 25;
    uint64_t best = 0;
    pthread_rwlock_rdlock(&s->maplock);
    for (size_t i = 0; i < s->nranges; i++) {
        struct store__range *rr = s->ranges[i];
        uint64_t ins = atomic_load(&rr->inserts);
        MDB_stat st;
        if (ins <= best || ins < 1024 || mdb_env_stat(rr->env, &st) != 0 ||
            (uint64_t)st.ms_psize * (st.ms_branch_pages + st.ms_leaf_pages +
                                     st.ms_overflow_pages) <
                ((uint64_t)1 << 20) ||
            ins * 100 < st.ms_entries * (uint64_t)pct)
            continue;
        best = ins;
        *out = rr->r;
    }
    pthread_rwlock_unlock(&s->maplock);
    return best > 0;
}
