/*
 * writes.c - the write path of the store (store.h): batches, their sort by
 * range, the commit log, the memtable and its flush into the range envs,
 * and store_put's group commit across threads. store.c opens the store,
 * keeps the range map and syncs; range.c has the range operations.
 *
 * A commit logs its batch (wal.c) and applies it to the memtable, or, when
 * the log is direct, writes it straight into the range envs; the memtable
 * is flushed into the envs when it grows past its budget (docs/storage.md,
 * "Writes"). A chunk copied from a peer skips the log and the memtable
 * (store_batch_commit_direct: into its env in one transaction, synced
 * then or by a later store_sync_envs).
 * Locking as in store.c's opening comment.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include <xxhash.h>

#include "storage/hlc.h"
#include "storage/store.h"
#include "storage/store_internal.h"

/* ---- Batches ------------------------------------------------------------ */

#define STORE__PENDING 1 /* result not known yet (positive: never an error) */
#define STORE__REGROW  2 /* its env was full: grow and retry */

struct store__w {
    uint64_t token;
    struct rk_slice key;
    struct rk_slice rec;
    uint8_t *own; /* NULL when key/rec are borrowed */
    int result;
};

/* The copies a batch keeps of its writes (store_batch_add) are carved
 * from chunks of STORE__CHUNK bytes: one malloc per chunk instead of one
 * per write (a write larger than a quarter of a chunk gets its own).
 * Copies never move, since the writes point into them; a reset keeps up to
 * STORE__CHUNKS_KEPT chunks for the next use of the batch. */
#define STORE__CHUNK       (64u * 1024u)
#define STORE__CHUNKS_KEPT 4
#define STORE__LOG_KEPT    (1u << 20) /* a larger log record buffer is freed */

struct store__chunk {
    struct store__chunk *next;
    size_t used;
    uint8_t data[];
};

struct store_batch {
    struct store__w *w;
    size_t n, cap;
    struct store__chunk *chunks; /* the one being filled first */
    struct store__chunk *spare;  /* emptied by a reset */
    uint32_t *order;
    size_t order_cap;
    uint8_t *log; /* the commit log record being built */
    size_t log_cap;
    uint64_t lsn; /* its log record in the commit under way, 0: none */
};

int store_batch_new(store_batch **out)
{
    store_batch *b = calloc(1, sizeof(*b));
    if (b == NULL)
        return -ENOMEM;
    *out = b;
    return 0;
}

static void store__chunks_free(struct store__chunk *c)
{
    while (c != NULL) {
        struct store__chunk *next = c->next;
        free(c);
        c = next;
    }
}

void store_batch_reset(store_batch *b)
{
    for (size_t i = 0; i < b->n; i++)
        free(b->w[i].own);
    b->n = 0;
    if (b->log_cap > STORE__LOG_KEPT) {
        free(b->log);
        b->log = NULL;
        b->log_cap = 0;
    }
    size_t kept = 0;
    for (struct store__chunk *c = b->spare; c != NULL; c = c->next)
        kept++;
    while (b->chunks != NULL) {
        struct store__chunk *c = b->chunks;
        b->chunks = c->next;
        if (kept < STORE__CHUNKS_KEPT) {
            c->used = 0;
            c->next = b->spare;
            b->spare = c;
            kept++;
        } else {
            free(c);
        }
    }
}

void store_batch_free(store_batch *b)
{
    if (b == NULL)
        return;
    store_batch_reset(b);
    store__chunks_free(b->spare);
    free(b->w);
    free(b->order);
    free(b->log);
    free(b);
}

size_t store_batch_count(const store_batch *b)
{
    return b->n;
}

int store_batch_result(const store_batch *b, size_t i)
{
    if (i >= b->n)
        return RK_EBADREQ;
    return b->w[i].result > 0 ? RK_EINTERNAL : b->w[i].result;
}

int store__check_write(struct rk_slice key, struct rk_slice rec)
{
    int rc = store__key_check(key);
    if (rc)
        return rc;
    if (rec.len > STORE_REC_MAX)
        return RK_ETOOLARGE;
    struct store_record r;
    return store_record_decode(&r, rec.p, rec.len);
}

/* len bytes of b's chunks (NULL: none free and no memory for one). */
static uint8_t *store__chunk_take(store_batch *b, size_t len)
{
    struct store__chunk *c = b->chunks;
    if (c == NULL || STORE__CHUNK - c->used < len) {
        c = b->spare;
        if (c != NULL)
            b->spare = c->next;
        else if ((c = malloc(sizeof(*c) + STORE__CHUNK)) == NULL)
            return NULL;
        c->used = 0;
        c->next = b->chunks;
        b->chunks = c;
    }
    uint8_t *p = c->data + c->used;
    c->used += len;
    return p;
}

int store__batch_push(store_batch *b,
                      uint64_t token,
                      struct rk_slice key,
                      struct rk_slice rec,
                      bool copy)
{
    if (b->n == b->cap) {
        size_t cap = b->cap ? b->cap * 2 : 16;
        struct store__w *w = realloc(b->w, cap * sizeof(*w));
        if (w == NULL)
            return -ENOMEM;
        b->w = w;
        b->cap = cap;
    }
    struct store__w *w = &b->w[b->n];
    w->own = NULL;
    if (copy) {
        size_t len = key.len + rec.len;
        uint8_t *p;
        if (len > STORE__CHUNK / 4)
            p = w->own = malloc(len ? len : 1);
        else
            p = store__chunk_take(b, len);
        if (p == NULL)
            return -ENOMEM;
        memcpy(p, key.p, key.len);
        memcpy(p + key.len, rec.p, rec.len);
        key.p = p;
        rec.p = p + key.len;
    }
    w->token = token;
    w->key = key;
    w->rec = rec;
    w->result = STORE__PENDING;
    b->n++;
    return 0;
}

int store_batch_add(store_batch *b, struct rk_slice key, struct rk_slice rec)
{
    int rc = store__check_write(key, rec);
    if (rc)
        return rc;
    return store__batch_push(b, rk_token(key.p, key.len), key, rec, true);
}

/* Merge one write into the env through `cur`, a cursor of the env's write
 * transaction; *fresh (may be NULL) is set when the key was new to the env.
 * One cursor serves a whole (sorted) pass: LMDB's cursor search first looks
 * at the leaf page the cursor is on, so a key near the previous one skips
 * the descent from the root, and an overwrite reuses the lookup's position
 * (MDB_CURRENT) instead of searching again. */
static int store__apply(MDB_cursor *cur, const struct store__w *w, bool *fresh)
{
    uint8_t kb[STORE__IKEY_MAX];
    MDB_val k = {store__ikey(kb, w->token, w->key), kb}, v;
    unsigned flags = MDB_RESERVE;
    int rc = mdb_cursor_get(cur, &k, &v, MDB_SET); /* k stays ours */
    if (rc == 0) {
        struct rk_slice uk, rec;
        struct store_record old, nw;
        if (store__stored_split(&uk, &rec, &k, &v) == 0) {
            if (uk.len != w->key.len || memcmp(uk.p, w->key.p, uk.len) != 0)
                return RK_EINTERNAL; /* XXH3-128 collision */
            if (store_record_decode(&old, rec.p, rec.len) == 0 &&
                store_record_decode(&nw, w->rec.p, w->rec.len) == 0 &&
                store_record_cmp(&nw, &old) <= 0)
                return 0; /* the stored record wins or is the same */
        }
        /* an undecodable stored value is replaced */
        flags |= MDB_CURRENT;
    } else if (rc != MDB_NOTFOUND) {
        return rc;
    } else if (fresh != NULL) {
        *fresh = true;
    }
    bool lng = k.mv_size == STORE__LONG_IKEY;
    v.mv_size = w->rec.len + (lng ? 4 + w->key.len : 0);
    rc = mdb_cursor_put(cur, &k, &v, flags);
    if (rc)
        return rc;
    uint8_t *p = v.mv_data;
    if (lng) {
        p[0] = (uint8_t)(w->key.len >> 24);
        p[1] = (uint8_t)(w->key.len >> 16);
        p[2] = (uint8_t)(w->key.len >> 8);
        p[3] = (uint8_t)w->key.len;
        memcpy(p + 4, w->key.p, w->key.len);
        p += 4 + w->key.len;
    }
    memcpy(p, w->rec.p, w->rec.len);
    return 0;
}

int store__batch_apply(MDB_cursor *cur, const store_batch *b, size_t i)
{
    return store__apply(cur, &b->w[i], NULL);
}

uint64_t store__batch_token(const store_batch *b, size_t i)
{
    return b->w[i].token;
}

/* Merge the writes ord[i..j) that fall in rr's shadow arc into the shadow
 * env (a split or merge in progress); a failure fails that operation. */
static void store__mirror(struct store__range *rr,
                          store_batch *b,
                          const uint32_t *ord,
                          size_t i,
                          size_t j)
{
    struct store__range *sh = rr->shadow;
    MDB_txn *txn = NULL;
    MDB_cursor *cur = NULL;
    int rc = mdb_txn_begin(sh->env, NULL, 0, &txn);
    if (rc == 0)
        rc = mdb_cursor_open(txn, sh->dbi, &cur);
    for (size_t x = i; rc == 0 && x < j; x++) {
        const struct store__w *w = &b->w[ord[x]];
        if (w->result == STORE__PENDING &&
            store_range_contains(rr->shadow_arc, w->token))
            rc = store__apply(cur, w, NULL);
    }
    if (cur != NULL)
        mdb_cursor_close(cur);
    if (rc == 0)
        rc = mdb_txn_commit(txn);
    else if (txn != NULL)
        mdb_txn_abort(txn);
    if (rc != 0)
        atomic_store(&rr->shadow_failed, true);
}

/* Keep copies of the writes ord[i..j) for the compaction of rr. */
static void store__log(struct store__range *rr,
                       store_batch *b,
                       const uint32_t *ord,
                       size_t i,
                       size_t j)
{
    struct store__wlog *log = rr->shadow_log;
    pthread_mutex_lock(&log->mu);
    for (size_t x = i; !log->failed && x < j; x++) {
        const struct store__w *w = &b->w[ord[x]];
        if (w->result == STORE__PENDING &&
            store__batch_push(log->b, w->token, w->key, w->rec, true) != 0)
            log->failed = true;
    }
    pthread_mutex_unlock(&log->mu);
}

struct store__tok {
    uint64_t token;
    uint32_t idx;
};

/* Order write indices by token, ties in their given order, so each env's
 * writes are adjacent and go into its B-tree in key order. A radix sort,
 * least significant byte first, a pass skipped where every token has the
 * same byte: qsort's comparisons were a fifth of a replica's memtable
 * apply (perf of node2 under redis-benchmark SETs, 2026-12-07). */
int store__sort_ord(const store_batch *b, uint32_t *ord, size_t n)
{
    if (n < 2)
        return 0;
    struct store__tok *t = malloc(2 * n * sizeof(*t));
    if (t == NULL)
        return -ENOMEM;
    struct store__tok *in = t, *out = t + n;
    uint32_t cnt[8][256];
    memset(cnt, 0, sizeof(cnt));
    for (size_t i = 0; i < n; i++) {
        uint64_t tok = b->w[ord[i]].token;
        in[i] = (struct store__tok){tok, ord[i]};
        for (int d = 0; d < 8; d++)
            cnt[d][(tok >> (8 * d)) & 0xff]++;
    }
    for (int d = 0; d < 8; d++) {
        unsigned shift = 8u * (unsigned)d;
        if (cnt[d][(in[0].token >> shift) & 0xff] == n)
            continue; /* one byte value in all: the order stays */
        uint32_t at = 0;
        for (int v = 0; v < 256; v++) {
            uint32_t c = cnt[d][v];
            cnt[d][v] = at;
            at += c;
        }
        for (size_t i = 0; i < n; i++)
            out[cnt[d][(in[i].token >> shift) & 0xff]++] = in[i];
        struct store__tok *x = in;
        in = out;
        out = x;
    }
    for (size_t i = 0; i < n; i++)
        ord[i] = in[i].idx;
    free(t);
    return 0;
}

#define STORE__TXN_WRITES 8192
#define STORE__TXN_BYTES  ((size_t)128 << 20)

/* One pass over the writes still pending: one write txn per env, committed
 * with MDB_NOSYNC, and with `sync` the env synced after it, under the same
 * hold of the map lock (a range operation cannot close the env between
 * the two). Writes whose env was full are left as STORE__REGROW and their
 * range put in *grow. */
static void store__commit_pass(store *s,
                               store_batch *b,
                               uint32_t *ord,
                               size_t n,
                               struct store_range *grow,
                               size_t *ngrow,
                               bool sync)
{
    size_t i = 0;
    while (i < n) {
        /* The map lock is taken per env transaction, not for the pass: an
         * apply of a whole memtable takes a while, and a map switch or
         * growth waiting for it would hold up every reader meanwhile (the
         * lock prefers writers). */
        pthread_rwlock_rdlock(&s->maplock);
        struct store__w *w = &b->w[ord[i]];
        struct store__range *rr = store__lookup(s, w->token);
        if (rr == NULL) {
            pthread_rwlock_unlock(&s->maplock);
            w->result = RK_ENOTFOUND;
            i++;
            continue;
        }
        /* One txn per env, bounded so it never dirties more pages than
         * LMDB allows (MDB_TXN_FULL). */
        size_t j = i + 1, bytes = w->key.len + w->rec.len;
        while (j < n && j - i < STORE__TXN_WRITES && bytes < STORE__TXN_BYTES &&
               store_range_contains(rr->r, b->w[ord[j]].token)) {
            bytes += b->w[ord[j]].key.len + b->w[ord[j]].rec.len;
            j++;
        }
        MDB_txn *txn = NULL;
        uint64_t fresh = 0;
        MDB_cursor *cur = NULL;
        int mrc = mdb_txn_begin(rr->env, NULL, 0, &txn);
        if (mrc == 0)
            mrc = mdb_cursor_open(txn, rr->dbi, &cur);
        for (size_t x = i; mrc == 0 && x < j; x++) {
            bool f = false;
            mrc = store__apply(cur, &b->w[ord[x]], &f);
            fresh += f;
            if (mrc == RK_EINTERNAL) { /* that write alone fails */
                b->w[ord[x]].result = RK_EINTERNAL;
                mrc = 0;
            }
        }
        if (cur != NULL)
            mdb_cursor_close(cur);
        if (mrc == 0)
            mrc = mdb_txn_commit(txn);
        else if (txn != NULL)
            mdb_txn_abort(txn);
        int res = 0;
        if (mrc == MDB_MAP_FULL) {
            res = STORE__REGROW;
            if (*ngrow == 0 || grow[*ngrow - 1].end != rr->r.end ||
                grow[*ngrow - 1].start != rr->r.start)
                grow[(*ngrow)++] = rr->r; /* once per env */
        } else if (mrc != 0) {
            res = store__err(mrc);
        } else {
            atomic_fetch_add(&rr->inserts, fresh);
            if (rr->shadow != NULL)
                store__mirror(rr, b, ord, i, j);
            else if (rr->shadow_log != NULL)
                store__log(rr, b, ord, i, j);
            if (!sync) {
                atomic_store(&rr->dirty, true);
            } else if ((res = store__sync_ranges(s, &rr, 1)) != 0) {
                /* Linux reports a writeback error to one sync only, and
                 * this one may have taken a memtable apply's: the next
                 * checkpoint must not retire the log (store__sync_envs) */
                atomic_store(&s->env_sync_err, res);
            }
        }
        pthread_rwlock_unlock(&s->maplock);
        for (size_t x = i; x < j; x++)
            if (b->w[ord[x]].result == STORE__PENDING)
                b->w[ord[x]].result = res;
        i = j;
    }
}

/* Apply and commit every pending write (growing full maps and retrying),
 * syncing each env committed to only with `sync`. */
static int store__commit_writes(store *s, store_batch *b, bool sync)
{
    int rc = -ENOMEM;
    uint32_t *ord = malloc(b->n * sizeof(*ord));
    struct store_range *grow = malloc(b->n * sizeof(*grow));
    if (ord == NULL || grow == NULL)
        goto free_all;
    size_t n = 0;
    for (size_t i = 0; i < b->n; i++)
        if (b->w[i].result == STORE__PENDING)
            ord[n++] = (uint32_t)i;
    if ((rc = store__sort_ord(b, ord, n)))
        goto free_all;
    for (int pass = 0; n > 0; pass++) {
        size_t ngrow = 0;
        store__commit_pass(s, b, ord, n, grow, &ngrow, sync);
        if (ngrow == 0)
            break;
        /* Grow the full envs, then retry their writes. */
        pthread_rwlock_wrlock(&s->maplock);
        for (size_t g = 0; g < ngrow; g++) {
            int idx = store__range_index(s, grow[g]);
            int grc = idx < 0 ? 0 : store__grow(s, s->ranges[idx]);
            if (grc != 0 || pass >= 40)
                for (size_t i = 0; i < n; i++) {
                    struct store__w *w = &b->w[ord[i]];
                    if (w->result == STORE__REGROW &&
                        store_range_contains(grow[g], w->token))
                        w->result = grc ? grc : RK_EFULL;
                }
        }
        pthread_rwlock_unlock(&s->maplock);
        size_t m = 0;
        for (size_t i = 0; i < n; i++)
            if (b->w[ord[i]].result == STORE__REGROW) {
                b->w[ord[i]].result = STORE__PENDING;
                ord[m++] = ord[i];
            }
        n = m;
    }
    rc = 0;
free_all:
    free(ord);
    free(grow);
    return rc;
}

/* ---- The commit log ------------------------------------------------------
 *
 * A batch is one log record whose payload is
 *   u32 count | count x (u32 key length | u32 record length | key | record)
 * (big-endian). Only writes some local range holds are logged (the others
 * get RK_ENOTFOUND at once), so the log never holds a write for a token
 * that no range covered when it was logged; a drop cuts the log under
 * walock, so none for a dropped range outlives it either. */

static void store__put32(uint8_t *p, size_t v)
{
    p[0] = (uint8_t)(v >> 24);
    p[1] = (uint8_t)(v >> 16);
    p[2] = (uint8_t)(v >> 8);
    p[3] = (uint8_t)v;
}

static size_t store__get32(const uint8_t *p)
{
    return (size_t)p[0] << 24 | (size_t)p[1] << 16 | (size_t)p[2] << 8 | p[3];
}

/* Give b's pending writes that no local range holds RK_ENOTFOUND, and
 * those of a stuck range its error unless `stuck_too`; the number of the
 * others, and their keys' and records' bytes in *kv_bytes. */
static size_t store__admit_ranges(store *s,
                                  store_batch *b,
                                  bool stuck_too,
                                  uint64_t *kv_bytes)
{
    size_t n = 0;
    *kv_bytes = 0;
    pthread_rwlock_rdlock(&s->maplock);
    for (size_t i = 0; i < b->n; i++) {
        struct store__w *w = &b->w[i];
        if (w->result != STORE__PENDING)
            continue;
        struct store__range *rr = store__lookup(s, w->token);
        if (rr == NULL) {
            w->result = RK_ENOTFOUND;
            continue;
        }
        int stuck = atomic_load(&rr->stuck);
        if (stuck != 0 && !stuck_too) {
            w->result = stuck;
            continue;
        }
        n++;
        *kv_bytes += w->key.len + w->rec.len;
    }
    pthread_rwlock_unlock(&s->maplock);
    return n;
}

/* Every write of b still pending gets rc. */
static void store__fail_pending(store_batch *b, int rc)
{
    for (size_t i = 0; i < b->n; i++)
        if (b->w[i].result == STORE__PENDING)
            b->w[i].result = rc;
}

/* Whether `bytes` of n new writes fit within disk_reserve_bytes
 * (store__space_admit); if not, every pending write of b gets RK_EFULL. */
static bool
store__space_take(store *s, store_batch *b, uint64_t bytes, size_t n)
{
    if (store__space_admit(s, bytes, n) == 0)
        return true;
    store__fail_pending(b, RK_EFULL);
    return false;
}

/* Encode b's pending writes as one log record in b->log; *out_bytes = 0
 * when there is nothing to log. Writes to a stuck range get its error
 * unless `stuck_too`. */
static int
store__log_encode(store *s, store_batch *b, size_t *out_bytes, bool stuck_too)
{
    uint64_t kv;
    *out_bytes = 0;
    size_t n = store__admit_ranges(s, b, stuck_too, &kv);
    if (n == 0)
        return 0;
    size_t bytes = 4 + 8 * n + (size_t)kv;
    /* new writes only: what is logged again was accepted once */
    if (!stuck_too && !store__space_take(s, b, bytes, n))
        return 0;
    if (bytes > b->log_cap) {
        uint8_t *p = realloc(b->log, bytes);
        if (p == NULL)
            return -ENOMEM;
        b->log = p;
        b->log_cap = bytes;
    }
    uint8_t *p = b->log;
    store__put32(p, n);
    p += 4;
    for (size_t i = 0; i < b->n; i++) {
        const struct store__w *w = &b->w[i];
        if (w->result != STORE__PENDING)
            continue;
        store__put32(p, w->key.len);
        store__put32(p + 4, w->rec.len);
        memcpy(p + 8, w->key.p, w->key.len);
        memcpy(p + 8 + w->key.len, w->rec.p, w->rec.len);
        p += 8 + w->key.len + w->rec.len;
    }
    *out_bytes = bytes;
    return 0;
}

/* Append b's pending writes to the log as one record (under walock held
 * shared). *out_lsn = 0 when there was nothing to log. */
static int
store__log_batch(store *s, store_batch *b, uint64_t *out_lsn, bool stuck_too)
{
    size_t bytes;
    *out_lsn = 0;
    int rc = store__log_encode(s, b, &bytes, stuck_too);
    if (rc || bytes == 0)
        return rc;
    int flags = 0;
    rc = store__wal_append(out_lsn, &flags, s->wal, b->log, bytes);
    if (flags)
        store__bg_due(s, flags);
    return rc;
}

/* Replay: every logged write goes into the memtable, applied whenever it
 * fills and at the end. Per-write failures are those the writes met when
 * first committed (no range holds the token any more): dropped then. */
static int store__replay_rec(const uint8_t *p, size_t len, void *arg)
{
    store *s = arg;
    if (len < 4)
        return RK_ECORRUPT;
    size_t n = store__get32(p), off = 4;
    for (size_t i = 0; i < n; i++) {
        if (len - off < 8)
            return RK_ECORRUPT;
        size_t kl = store__get32(p + off), rl = store__get32(p + off + 4);
        off += 8;
        if (kl > len - off || rl > len - off - kl)
            return RK_ECORRUPT;
        struct rk_slice key = RK_SLICE(p + off, kl),
                        rec = RK_SLICE(p + off + kl, rl);
        off += kl + rl;
        if (store__check_write(key, rec) != 0)
            return RK_ECORRUPT; /* the checksum matched: not a torn write */
        int rc = store__mem_add(s, rk_token(key.p, key.len), key, rec);
        /* Past the limit over what the last apply kept back (a full env),
         * as store__mem_check does: counting the kept writes too retried
         * them all once per replayed write (regression:
         * replay_retries_kept_writes, quadratic: hours at open). */
        if (rc == 0 && store__mem_bytes(s->mem) >= s->mem_floor + s->mem_limit)
            (void)store__flush_locked(s); /* what fails stays in mem */
        if (rc)
            return rc;
    }
    return off == len ? 0 : RK_ECORRUPT;
}

/* At open: merge every logged write into the env that now holds its token
 * (LWW merges are idempotent and commutative, so writes that had reached
 * the envs already change nothing). What cannot be applied (a full env)
 * stays in the memtable, to be logged again once the log restarts. */
int store__replay(store *s)
{
    int rc = store__wal_replay(s->wal, store__replay_rec, NULL, s);
    if (rc == 0)
        (void)store__flush_locked(s);
    return rc;
}

/* ---- The memtable ------------------------------------------------------- */

/* Put the pending writes of every batch whose status is 0 into the
 * memtable (one memmu hold); returns the bytes of the part taking writes
 * (mem) and sets *held, those and the part being applied (imm), and
 * *floor, the part kept back by stuck ranges. */
static size_t store__mem_take(store *s,
                              store_batch *const *bs,
                              const int *status,
                              size_t n,
                              size_t *held,
                              size_t *floor)
{
    pthread_mutex_lock(&s->memmu);
    for (size_t j = 0; j < n; j++) {
        store_batch *b = bs[j];
        for (size_t i = 0; status[j] == 0 && i < b->n; i++) {
            if (i + 8 < b->n)
                store__mem_prefetch(s->mem, b->w[i + 8].token, 0);
            if (i + 4 < b->n)
                store__mem_prefetch(s->mem, b->w[i + 4].token, 1);
            struct store__w *w = &b->w[i];
            if (w->result == STORE__PENDING)
                w->result = store__mem_add(s, w->token, w->key, w->rec);
        }
    }
    store__mem_publish(s); /* the puts may have doubled its buckets */
    size_t bytes = store__mem_bytes(s->mem);
    *held = bytes + (s->imm ? store__mem_bytes(s->imm) : 0);
    *floor = s->mem_floor;
    pthread_mutex_unlock(&s->memmu);
    return bytes;
}

/* Stored only when changed: the readers' cache line is left alone by a
 * commit that did not move the buckets. */
static void store__pf_set(store *s, int i, uintptr_t tab, size_t mask)
{
    if (atomic_load_explicit(&s->pf_tab[i], memory_order_relaxed) == tab &&
        atomic_load_explicit(&s->pf_mask[i], memory_order_relaxed) == mask)
        return;
    atomic_store_explicit(&s->pf_mask[i], mask, memory_order_relaxed);
    atomic_store_explicit(&s->pf_tab[i], tab, memory_order_relaxed);
}

void store__mem_publish(store *s)
{
    size_t mask = 0;
    uintptr_t tab = store__mem_buckets(s->mem, &mask);
    store__pf_set(s, 0, tab, mask);
    mask = 0;
    tab = s->imm ? store__mem_buckets(s->imm, &mask) : 0;
    store__pf_set(s, 1, tab, mask);
    store__cache_publish(s);
}

void store__cache_publish(store *s)
{
    size_t mask = 0;
    uintptr_t tab = s->cache ? store__cache_buckets(s->cache, &mask) : 0;
    store__pf_set(s, 2, tab, mask);
}

int store__mem_add(store *s,
                   uint64_t token,
                   struct rk_slice key,
                   struct rk_slice rec)
{
    uint64_t ts = store__rec_ts(rec);
    if (ts > s->mem_max_ts)
        s->mem_max_ts = ts;
    /* newer than every env's record: known as it comes */
    uint64_t known = ts > s->ts_bound ? s->known_epoch : 0;
    return store__mem_put(s->mem, token, key, rec, known);
}

/* How far ahead of ts_bound a saved ceiling is put: one save per minute of
 * timestamps while writes come, and a reopened store marks writes known
 * from the start again once the clock has passed it. */
#define STORE__TS_CEILING_AHEAD ((uint64_t)60000 << HLC_LOGICAL_BITS)

static uint64_t store__sat_add(uint64_t a, uint64_t b)
{
    return a > UINT64_MAX - b ? UINT64_MAX : a + b;
}

/* Save a ceiling AHEAD above b if the saved one is below b + slack. */
static int store__ts_ceiling_put(store *s, uint64_t b, uint64_t slack)
{
    pthread_mutex_lock(&s->ceilmu);
    int rc = 0;
    if (store__sat_add(b, slack) > s->ts_ceiling) {
        uint64_t c = store__sat_add(b, STORE__TS_CEILING_AHEAD);
        if ((rc = store_sys_set_u64(s, STORE__TS_CEILING, c)) == 0)
            s->ts_ceiling = c;
    }
    pthread_mutex_unlock(&s->ceilmu);
    return rc;
}

int store__ts_take(store *s, uint64_t top)
{
    pthread_mutex_lock(&s->memmu);
    if (top > s->ts_bound)
        s->ts_bound = top;
    uint64_t b = s->ts_bound;
    pthread_mutex_unlock(&s->memmu);
    return store__ts_ceiling_put(s, b, 0);
}

void store__ts_ceiling_ahead(store *s)
{
    pthread_mutex_lock(&s->memmu);
    uint64_t b = s->ts_bound > s->mem_max_ts ? s->ts_bound : s->mem_max_ts;
    pthread_mutex_unlock(&s->memmu);
    (void)store__ts_ceiling_put(s, b, STORE__TS_CEILING_AHEAD / 2);
}

void store__env_moved(store *s, bool outside)
{
    pthread_mutex_lock(&s->memmu);
    s->env_gen++;
    if (outside)
        s->known_epoch++;
    pthread_mutex_unlock(&s->memmu);
}

uint64_t store__cache_id_next(void)
{
    static _Atomic uint64_t next = 1;
    return atomic_fetch_add(&next, 1);
}

/* Keys forgotten per hold of memmu: a big apply's would otherwise stall
 * reads and commits for milliseconds. */
#define CACHE_DEL_STEP 1024u

/* b's keys' entries, in steps: merged with their writes (`merge`), or
 * dropped -- and dropped, merged or not, for a write refused alone (an
 * XXH3-128 collision: it is dropped, not kept, so the env keeps what the
 * entry had before). */
static void store__cache_batch(store *s, const store_batch *b, bool merge)
{
    for (size_t i = 0; s->cache != NULL && b != NULL && i < b->n;) {
        pthread_mutex_lock(&s->memmu);
        for (size_t end = i + CACHE_DEL_STEP; i < b->n && i < end; i++) {
            const struct store__w *w = &b->w[i];
            if (merge && w->result != RK_EINTERNAL)
                store__cache_merge(s->cache, w->token, w->key, w->rec);
            else
                store__cache_del(s->cache, w->token, w->key);
        }
        store__cache_publish(s); /* a merge may have grown the cache */
        pthread_mutex_unlock(&s->memmu);
    }
}

/* While the hold is on no read keeps an entry, so what was dropped stays
 * out until store__cache_end. */
void store__cache_begin(store *s, const store_batch *drop)
{
    pthread_mutex_lock(&s->memmu);
    s->env_gen++;
    s->cache_hold++;
    pthread_mutex_unlock(&s->memmu);
    store__cache_batch(s, drop, false);
}

/* env_gen moves on as the hold ends: a read that began during the change
 * (and may have read the env before it) keeps nothing. */
static void store__cache_end_locked(store *s, bool outside)
{
    s->env_gen++;
    if (outside)
        s->known_epoch++;
    s->cache_hold--;
}

void store__cache_end(store *s, bool outside)
{
    pthread_mutex_lock(&s->memmu);
    store__cache_end_locked(s, outside);
    pthread_mutex_unlock(&s->memmu);
}

void store__cache_forget_range(store *s, struct store__range *rr)
{
    atomic_store(&rr->cache_id, store__cache_id_next());
    store__env_moved(s, false);
}

/* Write result classes after applying the memtable. */
static bool store__keep(int x)
{
    /* applied; no range any more (dropped); an XXH3-128 collision */
    return x != 0 && x != RK_ENOTFOUND && x != RK_EINTERNAL;
}

/* No range keeps writes back (maplock held). */
static void store__unstick_all(store *s)
{
    for (size_t i = 0; i < s->nranges; i++)
        atomic_store(&s->ranges[i]->stuck, 0);
}

/* Apply imm (set by the caller, flmu held) to the envs and drop it. The
 * writes that could not be applied go back into mem and mark their ranges
 * stuck; every other range is unstuck (stuck means: this apply kept back a
 * write of it). Returns 0 or the first such failure. */
static int store__apply_imm(store *s)
{
    store_batch *b = NULL;
    int rc = store_batch_new(&b);
    if (rc == 0)
        rc = store__mem_to_batch(s->imm, b, false);
    store__cache_begin(s, NULL); /* the hold ends with imm */
    if (rc == 0)
        rc = store__ts_take(s, 0); /* imm's records are below the bound */
    bool tried = rc == 0;
    if (tried)
        rc = store__commit_writes(s, b, false);
    /* imm's writes are merged into their keys' read cache entries: what
     * the envs hold now, or, for a write kept back into mem, what reads
     * merge with mem's record as they would the env's. Until then reads
     * found each write in imm, which an older entry loses to. */
    if (tried)
        store__cache_batch(s, b, true);
    bool any_keep = rc != 0, any_stuck = false;
    for (size_t i = 0; !any_keep && i < b->n; i++)
        any_keep = store__keep(b->w[i].result);
    pthread_rwlock_rdlock(&s->maplock);
    for (size_t i = 0; !any_stuck && i < s->nranges; i++)
        any_stuck = atomic_load(&s->ranges[i]->stuck) != 0;
    int first = rc;
    size_t kept = 0;
    if (any_keep || any_stuck) {
        /* Regression (stuck_after_split): a range that kept nothing back
         * (the empty half of a split, one whose writes all went in) stayed
         * stuck while only its own applied writes could unstick it. */
        /* Each range's new flag is set once, from what it kept: clearing
         * them all first let a commit in between see a full range
         * unstuck and accept a write (regression:
         * full_range_refuses_during_apply_retry; first seen as a flaky
         * failure of map_full_grows_or_refuses under ASan). */
        for (size_t i = 0; i < s->nranges; i++)
            s->ranges[i]->stuck_next = 0;
        pthread_mutex_lock(&s->memmu);
        for (size_t i = 0; b != NULL && i < b->n; i++) {
            struct store__w *w = &b->w[i];
            int x = rc ? rc : w->result;
            struct store__range *rr = store__lookup(s, w->token);
            if (!store__keep(x)) {
                store__mem_del(s->imm, w->token, w->key);
                continue;
            }
            if (rr != NULL)
                rr->stuck_next = x;
            if (first == 0)
                first = x;
        }
        for (size_t i = 0; i < s->nranges; i++)
            atomic_store(&s->ranges[i]->stuck, s->ranges[i]->stuck_next);
        /* What is left of imm is kept: back into mem (LWW). */
        kept = store__mem_live(s->imm);
        store__mem_merge(s->mem, s->imm);
        store__mem_publish(s);
        pthread_mutex_unlock(&s->memmu);
    }
    pthread_rwlock_unlock(&s->maplock);
    store_batch_free(b);
    pthread_mutex_lock(&s->memmu);
    store__mem *old = s->imm;
    s->imm = NULL;
    store__mem_publish(s);
    s->mem_applies++;
    store__cache_end_locked(s, false);
    s->mem_floor = kept;
    pthread_mutex_unlock(&s->memmu);
    store__mem_free(old);
    return first;
}

/* mem becomes imm (for an apply) and `fresh` takes writes (memmu held).
 * ts_bound then bounds imm's records too. */
static void store__mem_swap(store *s, store__mem *fresh)
{
    s->imm = s->mem;
    s->mem = fresh;
    store__mem_publish(s);
    if (s->mem_max_ts > s->ts_bound)
        s->ts_bound = s->mem_max_ts;
    s->mem_max_ts = 0;
}

/* How many keys the memtable holds now (the size for its successor). */
static size_t store__mem_keys(store *s)
{
    pthread_mutex_lock(&s->memmu);
    size_t n = store__mem_count(s->mem);
    pthread_mutex_unlock(&s->memmu);
    return n;
}

int store__flush_locked(store *s)
{
    store__mem *fresh;
    if (store__mem_new(&fresh, store__mem_keys(s)) != 0)
        return -ENOMEM;
    pthread_mutex_lock(&s->memmu);
    if (store__mem_count(s->mem) == 0) {
        pthread_mutex_unlock(&s->memmu);
        store__mem_free(fresh);
        pthread_rwlock_rdlock(&s->maplock); /* nothing is kept back */
        store__unstick_all(s);
        pthread_rwlock_unlock(&s->maplock);
        return 0;
    }
    store__mem_swap(s, fresh);
    pthread_mutex_unlock(&s->memmu);
    return store__apply_imm(s);
}

void store_mem_info(struct store_mem_info *out, store *s)
{
    pthread_mutex_lock(&s->memmu);
    out->writes = store__mem_count(s->mem);
    out->bytes = store__mem_bytes(s->mem);
    out->applies = s->mem_applies;
    out->known_reads = s->known_reads;
    out->cache_entries = out->cache_bytes = 0;
    out->cache_hits = out->cache_misses = 0;
    if (s->cache != NULL)
        store__cache_stats(out, s->cache);
    if (s->imm != NULL) {
        out->writes += store__mem_count(s->imm);
        out->bytes += store__mem_bytes(s->imm);
    }
    pthread_mutex_unlock(&s->memmu);
}

int store_failed(store *s)
{
    int rc = store__wal_broken(s->wal);
    return rc ? rc : atomic_load(&s->env_sync_err);
}

bool store_log_direct(store *s)
{
    return store__wal_direct(s->wal);
}

int store_flush(store *s)
{
    pthread_mutex_lock(&s->flmu);
    int rc = store__flush_locked(s);
    pthread_mutex_unlock(&s->flmu);
    return rc;
}

/* After a commit left `bytes` in the memtable's part taking writes and
 * `held` in all of it: past the limit the background thread applies that
 * part; past twice the limit held, the committer applies it itself (or
 * waits for the apply in progress), which holds writers back. Held counts
 * the part being applied too: counting only the part taking writes let
 * writers fill twice the limit again while the first twice was applied
 * (regression: memtable_held_within_twice_its_budget; 57 MiB held for a
 * 16 MiB memtable_mb in tools/bench/ycsb.py's load, 2026-12-07). */
static void store__mem_check(store *s, size_t bytes, size_t held, size_t floor)
{
    /* Writes kept back by a stuck range (the floor) are retried by the
     * background thread every second, not by every commit. */
    if (held < floor + 2 * s->mem_limit) {
        if (bytes >= floor + s->mem_limit)
            store__bg_due(s, STORE__FLUSH_DUE);
        return;
    }
    pthread_mutex_lock(&s->flmu);
    pthread_mutex_lock(&s->memmu);
    bytes = store__mem_bytes(s->mem);
    floor = s->mem_floor;
    pthread_mutex_unlock(&s->memmu);
    if (bytes >= floor + s->mem_limit)
        (void)store__flush_locked(s);
    pthread_mutex_unlock(&s->flmu);
}

/* Log what the memtable holds again (after the cut of a checkpoint that
 * could not apply it all, so retiring the old segments loses nothing) and
 * wait until that is durable. */
int store__relog(store *s)
{
    store_batch *b = NULL;
    uint64_t lsn = 0;
    int rc = store_batch_new(&b);
    if (rc == 0) {
        pthread_mutex_lock(&s->memmu);
        rc = store__mem_to_batch(s->mem, b, true);
        pthread_mutex_unlock(&s->memmu);
    }
    if (rc == 0 && b->n > 0)
        rc = store__log_batch(s, b, &lsn, true);
    if (rc == 0 && lsn != 0)
        rc = store__wal_sync(s->wal, lsn);
    store_batch_free(b);
    return rc;
}

int store__checkpoint_locked(store *s,
                             int (*at_cut)(store *, void *),
                             void *arg)
{
    uint64_t cut;
    store__mem *fresh;
    if (store__mem_new(&fresh, store__mem_keys(s)) != 0)
        return -ENOMEM;
    pthread_rwlock_wrlock(&s->walock);
    int rc = store__wal_cut(s->wal, &cut);
    if (rc == 0 && at_cut != NULL)
        rc = at_cut(s, arg);
    if (rc == 0) {
        /* No commit sits between its log append and the memtable: all
         * that was logged before the cut is in mem (or already applied). */
        pthread_mutex_lock(&s->memmu);
        store__mem_swap(s, fresh);
        fresh = NULL;
        pthread_mutex_unlock(&s->memmu);
    }
    pthread_rwlock_unlock(&s->walock);
    store__mem_free(fresh);
    if (rc == 0 && store__apply_imm(s) != 0)
        rc = store__relog(s);
    if (rc == 0)
        rc = store__sync_envs(s);
    if (rc == 0)
        rc = store__wal_retire(s->wal, cut);
    return rc;
}

/* Log each batch as its own record, wait for one log sync covering them
 * all (group commit) and put them in the memtable; status[i] is batch i's
 * result. `handoff` (may be NULL) runs right after the appends, so the next
 * group can append while this one syncs. */
#define STORE__LOG_CHUNK 64

static void store__commit_logged(store *s,
                                 store_batch *const *bs,
                                 size_t n,
                                 int *status,
                                 void (*handoff)(store *),
                                 bool *handed)
{
    uint64_t last = 0;
    size_t floor = 0;
    pthread_rwlock_rdlock(&s->walock);
    /* The records of up to STORE__LOG_CHUNK batches go to the log in one
     * write (wal.h); the node's committer passes at most that many. */
    for (size_t base = 0; base < n; base += STORE__LOG_CHUNK) {
        struct store__wal_rec rs[STORE__LOG_CHUNK];
        size_t ri[STORE__LOG_CHUNK], nr = 0;
        size_t end = n - base > STORE__LOG_CHUNK ? base + STORE__LOG_CHUNK : n;
        for (size_t i = base; i < end; i++) {
            size_t bytes = 0;
            bs[i]->lsn = 0;
            status[i] = bs[i]->n > UINT32_MAX
                            ? RK_ETOOLARGE
                            : store__log_encode(s, bs[i], &bytes, false);
            if (status[i] == 0 && bytes > 0) {
                rs[nr] = (struct store__wal_rec){bs[i]->log, bytes, 0};
                ri[nr++] = i;
            }
        }
        if (nr == 0)
            continue;
        int flags = 0;
        int rc = store__wal_append_many(&flags, s->wal, rs, nr);
        if (flags)
            store__bg_due(s, flags);
        for (size_t j = 0; j < nr; j++) {
            bs[ri[j]]->lsn = rs[j].lsn;
            if (rs[j].lsn == 0)
                status[ri[j]] = rc;
            else if (rs[j].lsn > last)
                last = rs[j].lsn;
        }
    }
    if (handoff != NULL) {
        handoff(s);
        *handed = true;
    }
    int rc = 0;
    if (last != 0 && s->o.durability == STORE_GROUP_COMMIT)
        rc = store__wal_sync(s->wal, last);
    /* a batch that logged nothing waited for no sync: its status stays */
    for (size_t i = 0; i < n; i++)
        if (status[i] == 0 && bs[i]->lsn != 0)
            status[i] = rc;
    size_t held;
    size_t bytes = store__mem_take(s, bs, status, n, &held, &floor);
    pthread_rwlock_unlock(&s->walock);
    store__mem_check(s, bytes, held, floor);
}

void store_batch_commit_many(store *s,
                             store_batch *const *bs,
                             size_t n,
                             int *status)
{
    store__commit_logged(s, bs, n, status, NULL, NULL);
}

int store_batch_commit(store *s, store_batch *b)
{
    int rc;
    store__commit_logged(s, &b, 1, &rc, NULL, NULL);
    return rc;
}

/* ---- Chunks copied from a peer: straight into the envs -------------------
 *
 * A streamed chunk (a join's pull, a pushed range, a repair's exchange) is
 * bulk data that already sits durably on its sender: the commit log and the
 * memtable would only copy it twice more before it reaches its env. It goes
 * into its env in one write transaction, merged last-write-wins with the
 * record there, and with `sync` the env is synced before the call returns
 * (without, see the end of this comment). A record the
 * memtable holds in its place is merged too: a newer (or the same) one there
 * leaves the chunk's record out, since the memtable's is the merge already
 * and reaches the env at its apply; an older one there loses at that apply
 * (store__apply compares) and in every read meanwhile (store__get merges the
 * two). So neither order of a live write and a streamed one lets the older
 * win. Without `sync` the env is marked dirty as by a memtable apply, and
 * store_sync_envs (or the next checkpoint) makes the write durable. */

/* Writes of b whose key the memtable holds a newer (or the same) record of
 * get their result 0 and are left out. Only in STORE_GROUP_COMMIT mode:
 * there a memtable record is in the synced log; in STORE_PERIODIC mode it
 * may not be, and a machine crash would lose both. */
static void store__mem_supersede(store *s, store_batch *b)
{
    pthread_mutex_lock(&s->memmu);
    for (size_t i = 0; i < b->n; i++) {
        struct store__w *w = &b->w[i];
        struct store_record nw, old;
        struct rk_slice m;
        if (w->result != STORE__PENDING ||
            store_record_decode(&nw, w->rec.p, w->rec.len) != 0)
            continue;
        store__mem *ms[2] = {s->mem, s->imm};
        for (int k = 0; k < 2 && w->result == STORE__PENDING; k++)
            if (ms[k] != NULL &&
                store__mem_get(&m, NULL, ms[k], w->token, w->key) == 0 &&
                store_record_decode(&old, m.p, m.len) == 0 &&
                store_record_cmp(&nw, &old) <= 0)
                w->result = 0;
    }
    pthread_mutex_unlock(&s->memmu);
}

int store_batch_commit_direct(store *s, store_batch *b, bool sync)
{
    int rc = atomic_load(&s->env_sync_err);
    if (rc)
        return rc;
    uint64_t bytes;
    size_t n = store__admit_ranges(s, b, false, &bytes);
    if (n == 0)
        return 0;
    if (!store__space_take(s, b, bytes, n))
        return 0;
    if (s->o.durability == STORE_GROUP_COMMIT)
        store__mem_supersede(s, b);
    /* writes entering mem from now on are known only above these */
    uint64_t top = 0;
    for (size_t i = 0; i < b->n; i++) {
        uint64_t ts = store__rec_ts(b->w[i].rec);
        if (b->w[i].result == STORE__PENDING && ts > top)
            top = ts;
    }
    if ((rc = store__ts_take(s, top)) != 0) {
        store__fail_pending(b, rc);
        return rc;
    }
    /* its keys' entries go first: in group commit it leaves out writes the
     * memtable has newer, so the env's record is not always the merge */
    store__cache_begin(s, b);
    rc = store__commit_writes(s, b, sync);
    store__cache_end(s, true); /* records from outside the memtable */
    return rc;
}

/* ---- store_put: group commit across threads ----------------------------- */

/* Waiting writers queue up; one of them (the leader) takes the whole queue,
 * appends it to the log as one batch, then hands leadership to one writer
 * of the queue formed meanwhile (the next group appends while this one's
 * log sync runs; syncs are shared, never overlapping) and applies its batch
 * once the log is durable. Each writer sleeps on its own condition
 * variable and is woken once: to lead, or when its write is done (one
 * shared broadcast woke all 64 writers of a benchmark twice per group). */
struct store__waiter {
    struct rk_slice key, rec;
    int result;
    bool done;
    bool lead;
    pthread_cond_t cv;
    struct store__waiter *next;
};

static void store__lead_next(store *s)
{
    pthread_mutex_lock(&s->gmu);
    if (s->gq != NULL) { /* the next group may append meanwhile */
        s->gq->lead = true;
        pthread_cond_signal(&s->gq->cv);
    } else {
        s->gleader = false;
    }
    pthread_mutex_unlock(&s->gmu);
}

int store_put(store *s, struct rk_slice key, struct rk_slice rec)
{
    int rc = store__check_write(key, rec);
    if (rc)
        return rc;
    struct store__waiter me = {.key = key, .rec = rec};
    pthread_cond_init(&me.cv, NULL);
    pthread_mutex_lock(&s->gmu);
    me.next = s->gq;
    s->gq = &me;
    if (!s->gleader) {
        s->gleader = true;
        me.lead = true;
    }
    while (!me.done && !me.lead)
        pthread_cond_wait(&me.cv, &s->gmu);
    if (me.lead) { /* still queued: take the queue, me included */
        struct store__waiter *list = s->gq;
        s->gq = NULL;
        pthread_mutex_unlock(&s->gmu);
        store_batch *b = NULL;
        bool handed = false;
        rc = store_batch_new(&b);
        for (struct store__waiter *w = list; rc == 0 && w; w = w->next)
            rc = store__batch_push(b, rk_token(w->key.p, w->key.len), w->key,
                                   w->rec, false);
        if (rc == 0)
            store__commit_logged(s, &b, 1, &rc, store__lead_next, &handed);
        if (!handed)
            store__lead_next(s);
        size_t i = 0;
        for (struct store__waiter *w = list; w; w = w->next, i++)
            w->result = rc ? rc : store_batch_result(b, i);
        store_batch_free(b);
        pthread_mutex_lock(&s->gmu);
        for (struct store__waiter *w = list; w; w = w->next) {
            w->done = true;
            if (w != &me)
                pthread_cond_signal(&w->cv);
        }
    }
    pthread_mutex_unlock(&s->gmu);
    pthread_cond_destroy(&me.cv);
    return me.result;
}
