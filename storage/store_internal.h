/*
 * store_internal.h - what the storage files share and nobody else sees: the
 * store and range structs, the LMDB key layout and error mapping.
 */
#ifndef RK_STORAGE_STORE_INTERNAL_H
#define RK_STORAGE_STORE_INTERNAL_H

#include <pthread.h>
#include <stdatomic.h>

#include <lmdb.h>

#include "storage/store.h"
#include "storage/wal.h"

/* Inner (LMDB) keys: token (8, big-endian) || user key when the user key is
 * at most STORE__SHORT bytes; longer keys become token || first STORE__SHORT
 * bytes || XXH3-128 of the whole key, always STORE__LONG_IKEY bytes, and the
 * stored value is then u32 key length || key || record. */
#define STORE__SHORT     400u
#define STORE__IKEY_MAX  (8u + STORE__SHORT + 16u)
#define STORE__LONG_IKEY STORE__IKEY_MAX

/* Reader slots of an env, and the bytes of its lock file allocated before
 * LMDB maps it. LMDB wants sizeof(MDB_txninfo) + (maxreaders - 1) * 64
 * bytes (a 64-byte slot per reader; the header is 192 bytes on x86-64
 * Linux, a few cache lines anywhere). It extends a shorter file with
 * ftruncate (a hole: SIGBUS when first written on a full disk) but maps a
 * longer one whole, as it is, taking the extra bytes as more reader slots
 * (mdb_env_setup_locks). So a file allocated to this bound, which holds
 * any header up to 4 KiB, is used without a hole. */
#define STORE__MAXREADERS 256
#define STORE__LOCK_BYTES ((uint64_t)STORE__MAXREADERS * 64 + 4096)

/* While a compaction rewrites an env, every write committed to it is also
 * copied here (the new env is filled with MDB_APPEND, which takes keys in
 * order only), and merged into the new env before the switch. */
struct store__wlog {
    pthread_mutex_t mu;
    store_batch *b;
    bool failed; /* a write could not be kept: the compaction fails */
};

struct store__range {
    struct store_range r;
    MDB_env *env;
    MDB_dbi dbi;
    char *dir; /* full path of its directory */
    size_t map_size;
    atomic_bool dirty;    /* committed but maybe not synced */
    pthread_mutex_t txmu; /* guards the pool of reset read txns */
    MDB_txn *txpool[8];
    int ntx;
    /* While a split or merge copies entries out of this env, commits here
     * also merge their writes in `shadow_arc` into `shadow` (the env being
     * filled); set and cleared under maplock held exclusively. */
    struct store__range *shadow;
    struct store_range shadow_arc;
    atomic_bool shadow_failed;
    /* While a compaction rewrites this env (set and cleared the same way). */
    struct store__wlog *shadow_log;
    /* Nonzero (an RK_ code, e.g. RK_EFULL) while the memtable holds writes
     * for this range that could not be applied: new writes are refused
     * with it until an apply succeeds. */
    atomic_int stuck;
    int stuck_next; /* store__apply_imm's scratch (flmu held) */
    /* Which incarnation of the env the read cache's entries were read
     * from (store__cache_id_next): a new one when the range is opened and
     * after a deletion in place (a purge, a split's or merge's cut), so
     * that entries of what is gone are dead (cache.c). */
    _Atomic uint64_t cache_id;
    /* Keys new to this env since it was written whole (created, compacted,
     * adopted): splits they caused left pages half full. */
    atomic_uint_fast64_t inserts;
    /* Jobs on this env skipped for lack of disk space since the last one
     * reported, and when that was (monotonic ms; under skipmu). */
    uint64_t skips_unreported;
    uint64_t skip_reported_ms;
    bool skip_reported;
};

/* The memtable (mem.c): writes committed (logged) but not yet applied to
 * the range envs, the LWW winner per key. Not thread-safe: the store holds
 * memmu around every call. */
typedef struct store__mem store__mem;
/* A new table with buckets for about `keys` keys (0: the minimum): a
 * memtable replacing one that held n keys is made for n, so it does not
 * rehash its way up again every second. */
int store__mem_new(store__mem **out, size_t keys);
void store__mem_free(store__mem *m); /* NULL is a no-op */
size_t store__mem_count(const store__mem *m);
/* The bytes of its entries: all it holds (an entry replaced by a larger
 * record, or deleted, until the table is freed), and the live ones'. */
size_t store__mem_bytes(const store__mem *m);
size_t store__mem_live(const store__mem *m);
/* Warm the cache for a put or get of `token` a few calls ahead: stage 0
 * fetches its bucket, stage 1 (later) the bucket's first entry. A hint
 * only; a lookup of a million-key table is two cache misses without it. */
void store__mem_prefetch(const store__mem *m, uint64_t token, int stage);
/* Where m's buckets are now and their mask (for store_prefetch). */
uintptr_t store__mem_buckets(const store__mem *m, size_t *mask);
/* Publish where mem's, imm's and the read cache's buckets are now (memmu
 * held): after every change of those tables (a commit's puts, a swap, an
 * apply's end, entries kept in the cache). */
void store__mem_publish(store *s);
/* The same for the read cache's buckets alone (memmu held). */
void store__cache_publish(store *s);
/* LWW-merge a copy of the (validated) write in. 0, -ENOMEM. A record that
 * replaces one keeps its `known` mark (it is newer still), or takes
 * `known` when that is not 0. */
int store__mem_put(store__mem *m,
                   uint64_t token,
                   struct rk_slice key,
                   struct rk_slice rec,
                   uint64_t known);
/* The kept record of key (borrowed: valid until m changes), or
 * RK_ENOTFOUND; with out_known, where its entry's `known` mark is (the
 * store's known_epoch when the record was known to be at least as new as
 * the env's; store.c, store__mem_find). */
int store__mem_get(struct rk_slice *out_rec,
                   uint64_t **out_known,
                   const store__mem *m,
                   uint64_t token,
                   struct rk_slice key);
/* Forget key's write. */
void store__mem_del(store__mem *m, uint64_t token, struct rk_slice key);
/* Move every write of src into dst (LWW), leaving src empty. */
void store__mem_merge(store__mem *dst, store__mem *src);
/* Push every kept write into b (copied, or borrowed from m). */
int store__mem_to_batch(const store__mem *m, store_batch *b, bool copy);

/* The read cache (cache.c, docs/storage.md "The read cache"): the range
 * envs' records of recently read keys, or that they had none, keyed like
 * the memtable and tagged with their range's cache_id. Bounded by bytes
 * (CLOCK eviction). Not thread-safe: the store holds memmu around every
 * call. */
typedef struct store__cache store__cache;
/* Records longer than this are not kept: the cache saves a B-tree
 * descent, which matters next to a small record's copy only. */
#define STORE__CACHE_REC_MAX 8192u
int store__cache_new(store__cache **out, size_t budget_bytes);
void store__cache_free(store__cache *c); /* NULL is a no-op */
/* key's entry read from the range whose cache_id is `rid`: 0 with the
 * record (borrowed: valid until c changes) or *out_absent, else
 * RK_ENOTFOUND (an entry of another rid is dropped). Counts a hit or a
 * miss. */
int store__cache_get(struct rk_slice *out_rec,
                     bool *out_absent,
                     store__cache *c,
                     uint64_t token,
                     uint64_t rid,
                     struct rk_slice key);
/* Keep what the env of range `rid` held for key: *rec, or none (NULL),
 * replacing any entry of key; evicts to stay within the budget; a record
 * over STORE__CACHE_REC_MAX (or an entry over a sixteenth of the budget)
 * is not kept. */
void store__cache_put(store__cache *c,
                      uint64_t token,
                      uint64_t rid,
                      struct rk_slice key,
                      const struct rk_slice *rec);
/* The entry token's bucket points at starts on its way into the CPU's
 * cache, its first three lines (header, key, the start of the record):
 * for store_prefetch_many, once the bucket itself was prefetched. */
void store__cache_prefetch(const store__cache *c, uint64_t token);
/* Where c's buckets are now and their mask (for store_prefetch). */
uintptr_t store__cache_buckets(const store__cache *c, size_t *mask);
/* Forget key's entry. */
void store__cache_del(store__cache *c, uint64_t token, struct rk_slice key);
/* rec was LWW-merged into the env that key's entry was read from: the
 * entry, if there is one, becomes the merge's winner, which is what the
 * env holds (an entry that cannot be decoded goes). */
void store__cache_merge(store__cache *c,
                        uint64_t token,
                        struct rk_slice key,
                        struct rk_slice rec);
/* Entries, bytes, hits and misses into out's cache_* fields. */
void store__cache_stats(struct store_mem_info *out, const store__cache *c);
/* A cache_id no range has had (process-wide). */
uint64_t store__cache_id_next(void);
/* The envs are about to change by a commit: the entries of drop's keys
 * (NULL: none) go, and none is kept until store__cache_end (memmu taken;
 * env_gen moves on at both). With `outside` (records from outside the
 * memtable) known_epoch moves on too, as in store__env_moved. An apply
 * merges its writes into their entries after its commit, before the
 * end (writes.c). */
void store__cache_begin(store *s, const store_batch *drop);
void store__cache_end(store *s, bool outside);
/* Entries read from rr are dead (a deletion in place was committed):
 * rr gets a new cache_id, and env_gen moves on (memmu taken). */
void store__cache_forget_range(store *s, struct store__range *rr);

/* ---- Reads the memtable answers alone (store.c, store__mem_find) ---- */
/* A record's timestamp, read from its header (storage/record.c);
 * UINT64_MAX when it has none readable, which bounds nothing. */
uint64_t store__rec_ts(struct rk_slice rec);
/* The system value that keeps ts_ceiling (store__ts_take). */
#define STORE__TS_CEILING "storage_ts_ceiling"
/* Put a write into mem (memmu held, or at open), marked known when its
 * timestamp is above ts_bound; mem_max_ts follows it. */
int store__mem_add(store *s,
                   uint64_t token,
                   struct rk_slice key,
                   struct rk_slice rec);
/* Records up to timestamp `top` are about to reach an env: raise ts_bound
 * to it (0: an apply of imm, already below it) and save a ceiling at or
 * above ts_bound unless the one saved is (takes ceilmu; a synced system
 * write). Before any env commit of records that may be above the saved
 * ceiling. */
int store__ts_take(store *s, uint64_t top);
/* The syncer's, every second: save the next ceiling once the bound (or
 * the memtable's newest write, which the next flush makes it) is within
 * half the margin of the saved one, so that an apply, which must not
 * commit before it, seldom waits for that synced write. Errors are left
 * to store__ts_take. */
void store__ts_ceiling_ahead(store *s);
/* The highest record timestamp in rr's env, into *io if higher. */
int store__env_max_ts(struct store__range *rr, uint64_t *io);
/* An env changes (or changed): env_gen moves on, and with `outside` (the
 * change brought records from outside the memtable) known_epoch too
 * (struct store). Takes memmu. */
void store__env_moved(store *s, bool outside);

struct store {
    struct store_opts o;
    char *dir;
    int dir_fd;
    /* Readers and committers hold `maplock` shared; range operations and
     * map growth hold it exclusively. */
    pthread_rwlock_t maplock;
    pthread_mutex_t opmu;         /* one range operation at a time */
    struct store__range **ranges; /* sorted by r.end */
    size_t nranges;
    MDB_env *sys_env;
    MDB_dbi sys_dbi;
    MDB_env *hint_env;
    MDB_dbi hint_dbi;
    pthread_mutex_t hintmu;
    uint64_t hint_bytes;
    /* store_put group commit */
    pthread_mutex_t gmu;
    struct store__waiter *gq;
    bool gleader;
    /* The commit log. Commits hold `walock` shared from appending their
     * record until their writes are in the memtable; a checkpoint (and a
     * drop) takes it exclusively to cut the log where every record before
     * the cut is in the memtable it then applies. `ckmu`: one checkpoint
     * at a time. */
    store__wal *wal;
    pthread_rwlock_t walock;
    pthread_mutex_t ckmu;
    atomic_int env_sync_err; /* sticky: a range env sync failed */
    /* The memtable (docs/storage.md): `mem` takes commits; a flush moves
     * it to `imm` and applies that to the envs, then drops it. Reads look
     * in mem, imm, then the env (in that order, so a write moving from imm
     * to its env is never missed). memmu guards both pointers and mem's
     * content (imm is read-only while set); flmu: one flush at a time.
     * Lock order: opmu, flmu, ckmu, walock, maplock, memmu. */
    pthread_mutex_t memmu;
    pthread_mutex_t flmu;
    store__mem *mem;
    store__mem *imm;
    size_t mem_limit;     /* flush past this many bytes */
    size_t mem_floor;     /* bytes kept in mem by stuck ranges (under memmu) */
    uint64_t mem_applies; /* memtable applies finished (under memmu) */
    /* Reads that skip the env (store.c, store__mem_find): a memtable
     * record whose `known` mark equals known_epoch is at least as new as
     * its env's record. known_epoch moves on (every mark void) after each
     * commit that brings records into an env from outside the memtable
     * (streamed chunks, an adopted env); env_gen moves before and after
     * every env change, and a read marks a record only when it did not
     * move meanwhile. Both under memmu. */
    uint64_t known_epoch;
    uint64_t env_gen;
    /* The read cache (NULL: none), under memmu; no entry is kept while
     * cache_hold is not 0 (an env change is under way, store__cache_begin)
     * nor by a read during which env_gen moved. */
    store__cache *cache;
    int cache_hold;
    uint64_t known_reads; /* reads that skipped the env so */
    /* Where mem's [0], imm's [1] and the read cache's [2] buckets are (0:
     * no imm, no cache), for store_prefetch: set under memmu by
     * store__mem_publish whenever they may have moved, read without it.
     * Only ever a prefetch's address, never dereferenced, so one that is
     * stale costs a wasted prefetch. */
    _Atomic uintptr_t pf_tab[3];
    _Atomic size_t pf_mask[3];
    /* A write is marked known as it enters mem when its timestamp is above
     * ts_bound: every record in an env or in imm has a timestamp at or
     * below it. mem_max_ts bounds mem's, and a flush raises ts_bound by it
     * as mem becomes imm; streamed chunks and adopted envs raise it by
     * theirs. Under memmu. */
    uint64_t ts_bound, mem_max_ts;
    /* ts_bound as saved (system value STORE__TS_CEILING, synced), always
     * at least ts_bound before any env commit holds a record above it, so
     * that a reopened store starts from it (store__ts_take).
     * Under ceilmu. */
    pthread_mutex_t ceilmu;
    uint64_t ts_ceiling;
    /* background thread: periodic log syncs and due checkpoints */
    pthread_t syncer;
    bool syncer_on;
    bool stopping;
    bool ckpt_due;
    bool fill_due;
    bool flush_due;
    pthread_mutex_t smu;
    pthread_cond_t scv;
    /* background thread: compactions (store__compact_due) */
    pthread_t compactor;
    bool compactor_on;
    pthread_cond_t ccv;
    atomic_int auto_pct; /* auto_compact_pct, store_auto_compact_set */
    /* Range jobs skipped for lack of disk space (store_space_skips_take):
     * the count, and those reported but not yet taken. */
    pthread_mutex_t skipmu;
    uint64_t space_skips;
    struct store_space_skip skipq[STORE_SKIPS_QUEUED];
    size_t nskipq;
    /* Free space against disk_reserve_bytes (space.c), under spacemu. */
    pthread_mutex_t spacemu;
    char *logdir;         /* data_dir/commitlog */
    uint64_t space_avail; /* bytes free at the last look */
    uint64_t space_since; /* bytes logged since */
    uint64_t space_head;  /* room over the reserve at the last look */
    uint64_t space_at_ms; /* when (monotonic ms), 0: never */
    struct store_space_info space;
    /* store_space_near_full, read by the loops on every write without
     * spacemu: a lock there (node__disk_full) shared its cache line with
     * each commit's admission, 2.8% of a coordinator's loop under SETs
     * (perf, 2026-12-08). A cache line of its own (padding, not
     * _Alignas: the store is malloc'd), written only on a change. */
    char space_pad0[64];
    atomic_bool space_near;
    char space_pad1[63];
};

/* LMDB and system codes to ringkv codes. */
int store__err(int mdb_rc);

static inline void store__be64(uint8_t *p, uint64_t v)
{
    for (int i = 7; i >= 0; i--) {
        p[i] = (uint8_t)v;
        v >>= 8;
    }
}

static inline uint64_t store__get64(const uint8_t *p)
{
    uint64_t v = 0;
    for (int i = 0; i < 8; i++)
        v = (v << 8) | p[i];
    return v;
}

/* Inner key of (token, key) into out (STORE__IKEY_MAX bytes); its length. */
size_t store__ikey(uint8_t *out, uint64_t token, struct rk_slice key);

/* Split a stored value into user key and record, given its inner key.
 * Returns 0 or RK_ECORRUPT. */
int store__stored_split(struct rk_slice *out_key,
                        struct rk_slice *out_rec,
                        const MDB_val *ik,
                        const MDB_val *v);

/* Validation of a write (store.c). */
int store__check_write(struct rk_slice key, struct rk_slice rec);
/* "dir/name", malloc'd, or NULL. */
char *store__path(const char *dir, const char *name);

/* Batches (store.c): append without validation (copy or borrow) a write
 * whose token (rk_token of key) the caller already has. */
int store__batch_push(store_batch *b,
                      uint64_t token,
                      struct rk_slice key,
                      struct rk_slice rec,
                      bool copy);
/* LWW-merge write i of b into an env through `cur`, a cursor of the env's
 * write transaction (LMDB or RK_ code); one cursor for a whole pass, so
 * sorted writes find their page without a search from the root. */
int store__batch_apply(MDB_cursor *cur, const store_batch *b, size_t i);
/* The token of write i of b. */
uint64_t store__batch_token(const store_batch *b, size_t i);
/* Order ord[0..n) (indices of b's writes) by their writes' tokens, ties
 * in their given order (writes.c; 0 or -ENOMEM). */
int store__sort_ord(const store_batch *b, uint32_t *ord, size_t n);

/* Range map (store.c). */
struct store__range *store__lookup(store *s, uint64_t t);
int store__range_index(store *s, struct store_range r);
int store__env_open(MDB_env **out,
                    MDB_dbi *out_dbi,
                    const char *dir,
                    size_t map_size,
                    unsigned flags);
int store__range_open(struct store__range **out,
                      store *s,
                      struct store_range r,
                      const char *dir);
void store__range_close(struct store__range *rr);
/* Set rr's map to `size` (allocating data.mdb first with write_map);
 * maplock held exclusively. */
int store__map_set(store *s, struct store__range *rr, size_t size);
int store__grow(store *s, struct store__range *rr);
int store__sync_ranges(store *s, struct store__range **rs, size_t n);
/* Make every env write committed before the call durable; hold ckmu. */
int store__sync_envs(store *s);
/* Apply the memtable to the envs (flmu held by the caller). */
int store__flush_locked(store *s);
/* A checkpoint (flmu and ckmu held by the caller): cut the log, run at_cut
 * (may be NULL; nonzero fails it) under walock held exclusively, apply the
 * memtable, sync the envs, retire the log before the cut. */
int store__checkpoint_locked(store *s,
                             int (*at_cut)(store *, void *),
                             void *arg);

/* System env (sys.c) */
int store__sys_open(store *s);
int store__map_load(store *s);
/* One synced system txn: delete `del`, then map each add[i] to the
 * directory basename of dirs[i] (with prevs[i], if prevs and it are not
 * NULL, recorded as a rename in progress). */
int store__map_put(store *s,
                   const struct store_range *add,
                   size_t nadd,
                   const char *const *dirs,
                   const char *const *prevs,
                   const struct store_range *del,
                   size_t ndel);
/* At load: finish the rename prev -> dir of range r, if still to do. */
int store__finish_rename(store *s,
                         struct store_range r,
                         const char *dir,
                         const char *prev);
int store__hint_open(store *s);

/* Recovery and range dirs (range.c) */
/* data_dir/ranges/<name>, or the canonical data_dir/ranges/<start>_<end>
 * when name is NULL. malloc'd, or NULL. */
char *store__range_dirname(store *s, struct store_range r, const char *name);
int store__rmtree(const char *path);
int store__purge_outside(struct store__range *rr);
/* Whether a range env is due for compaction (auto_compact_pct): the one
 * with the most new keys since it was last written whole, if those are at
 * least auto_compact_pct of its keys and it holds at least a MiB. */
bool store__compact_due(store *s, struct store_range *out);
int store__recover(store *s);

/* Walking an arc (scan.c) */
typedef int (*store__walk_cb)(MDB_cursor *cur,
                              const MDB_val *k,
                              const MDB_val *v,
                              void *arg);
/* Visit, in arc order, every entry of txn's dbi whose token is in `arc`.
 * cb may delete the current entry. Returns 0, cb's nonzero return, or an
 * error. */
int store__walk(MDB_txn *txn,
                MDB_dbi dbi,
                struct store_range arc,
                store__walk_cb cb,
                void *arg);

/* Shared by store.c and writes.c */
/* RK_EBADREQ for an empty key, RK_ETOOLARGE past RK_MAX_KEY, else 0. */
int store__key_check(struct rk_slice key);
#define STORE__FLUSH_DUE 0x100 /* beside the STORE__WAL_* flags */
/* Ask the background thread (store.c) for a checkpoint, zero fill and/or a
 * memtable flush: STORE__WAL_SEALED, STORE__WAL_FILL, STORE__FLUSH_DUE. */
void store__bg_due(store *s, int flags);
/* At open (writes.c): apply the commit log's records since the last
 * checkpoint; then write what replay kept in the memtable to a fresh log. */
int store__replay(store *s);
int store__relog(store *s);

/* Disk space of writes (space.c, store.h). */
/* 0 if `bytes` more of commit log keep disk_reserve_bytes free, counting
 * them as written; else RK_EFULL, `nwrites` counted as refused. */
int store__space_admit(store *s, uint64_t bytes, size_t nwrites);
/* Look at free space if the last look is STORE_SPACE_LOOK_MS old (the
 * background thread, every second); whether writes are refused (low). */
bool store__space_tick(store *s);

#endif
