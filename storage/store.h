/*
 * store.h - the node's local store: one LMDB environment per token range,
 * last-write-wins records, group-committed durable writes, system state and
 * hints. The only part of ringkv that includes <lmdb.h>; it knows nothing of
 * the network and starts no event loop.
 *
 * Layout of data_dir:
 *   system/                   LMDB env: node state and the range map
 *   hints/                    LMDB env: hinted writes for DOWN replicas
 *   ranges/<start>_<end>/     one LMDB env per local range (16 hex digits)
 *
 * A range is the token arc (start, end]; start >= end wraps past 2^64-1 and
 * start == end is the whole ring. Ranges held by one store never overlap.
 * Inside an env a key is `big-endian token || user key`, so a token sub-range
 * is one contiguous cursor walk (user keys over 400 bytes are stored under a
 * 400-byte prefix plus a 128-bit hash, the full key beside the record).
 *
 * Threads: every function may be called from any thread. Reads (store_get,
 * scans, digests) run concurrently with each other and with commits (LMDB
 * read transactions, MDB_NOTLS). Range operations run one at a time; a
 * split or merge copies while reads and commits go on (commits to the
 * source are mirrored into the env being filled) and blocks them only for
 * the final switch of the range map; so does a compaction (writes to the
 * env being rewritten are logged and merged in). Work that can block on the
 * disk (commit, sync, scans, copies, range operations) belongs off the event
 * loop thread (uv_queue_work); building a store_batch touches no disk and is
 * loop-safe.
 *
 * Durability (docs/storage.md): a commit appends its writes as one record
 * to a commit log (data_dir/commitlog/, sequential segment files) and then
 * merges them into the memtable, which is applied to the range envs (one
 * MDB_NOSYNC transaction per env) in the background. In STORE_GROUP_COMMIT
 * mode store_batch_commit returns only after the log record is on stable
 * storage (one fdatasync of the log, shared by concurrent commits), and the
 * writes become visible to readers only after that. A checkpoint applies
 * the memtable, syncs the envs and deletes the log they cover; store_open
 * replays what is left. In
 * STORE_PERIODIC mode commits do not wait: a background thread syncs the log
 * every periodic_ms, so a machine crash loses up to that window (a process
 * crash loses nothing that was committed). Records streamed from a peer
 * skip the log and the memtable: store_batch_commit_direct writes them into
 * their env and syncs it.
 */
#ifndef RK_STORAGE_STORE_H
#define RK_STORAGE_STORE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "common/rk.h"

/* ---- Records ---------------------------------------------------------- */

/* Encoding (all integers big-endian):
 *   u8 version (STORE_REC_VERSION) | u8 flags | u64 HLC timestamp
 *   | u64 expiry_ms if flags & STORE_REC_EXPIRES | value bytes (the rest)
 * A tombstone carries no value. Unknown flag bits are corruption. */
#define STORE_REC_VERSION   1
#define STORE_REC_TOMBSTONE 0x01u
#define STORE_REC_EXPIRES   0x02u
#define STORE_REC_HEADER    10u /* without expiry */
#define STORE_REC_MAX       (STORE_REC_HEADER + 8u + RK_MAX_VALUE)

struct store_record {
    uint64_t ts;        /* HLC timestamp (storage/hlc.h) */
    uint8_t flags;      /* STORE_REC_* */
    uint64_t expiry_ms; /* absolute Unix ms; meaningful with _EXPIRES */
    struct rk_slice value;
};

/* Encoded size of `r`. */
size_t store_record_size(const struct store_record *r);

/* Encode `r` into out[0..cap). Returns 0 and sets *out_len, RK_ETOOLARGE if
 * the value is over RK_MAX_VALUE, RK_EBADREQ for a tombstone with a value or
 * unknown flags, -ENOBUFS if cap is too small. */
int store_record_encode(uint8_t *out,
                        size_t cap,
                        size_t *out_len,
                        const struct store_record *r);

/* store_record_encode into *buf of *cap bytes, grown first (realloc) when
 * the record needs more: 0, -ENOMEM (*buf as it was), or
 * store_record_encode's error. */
int store_record_encode_grow(uint8_t **buf,
                             size_t *cap,
                             size_t *out_len,
                             const struct store_record *r);

/* Decode p[0..len). Returns 0, RK_EVERSION for an unknown version byte,
 * RK_ETOOLARGE for a value over RK_MAX_VALUE, RK_ECORRUPT for anything else
 * malformed.
 * @note out->value borrows from p and lives as long as p does. */
int store_record_decode(struct store_record *out, const uint8_t *p, size_t len);

/* Last-write-wins order: >0 if `a` wins over `b`, <0 if `b` wins, 0 if they
 * are the same record. Higher timestamp wins; at equal timestamps a
 * tombstone wins, then the greater value bytes, then the later expiry (none
 * counts as latest). A total order, so merging is commutative, associative
 * and idempotent. */
int store_record_cmp(const struct store_record *a,
                     const struct store_record *b);

/* Whether a record reads as present at `now_ms` (not a tombstone, not
 * expired). */
bool store_record_live(const struct store_record *r, uint64_t now_ms);

/* ---- The store ---------------------------------------------------------- */

typedef struct store store;

enum store_durability {
    STORE_GROUP_COMMIT = 0, /* durable before store_batch_commit returns */
    STORE_PERIODIC = 1,     /* synced every periodic_ms in the background */
};

/* How a checkpoint (and store_open, store_range_drop) syncs the range envs;
 * commits sync only the commit log and never read this. */
enum store_sync_method {
    STORE_SYNC_AUTO = 0,      /* fdatasync for 1 env, syncfs for more */
    STORE_SYNC_FDATASYNC = 1, /* fdatasync every touched env, in turn */
    STORE_SYNC_SYNCFS = 2,    /* always one syncfs(2) on data_dir */
};

struct store_opts {
    const char *data_dir;    /* created if missing; borrowed during open */
    int durability;          /* enum store_durability */
    int sync_method;         /* enum store_sync_method */
    uint32_t periodic_ms;    /* STORE_PERIODIC interval */
    uint64_t gc_grace_ms;    /* tombstones/expired records kept this long */
    size_t map_size;         /* initial LMDB map per range env (bytes) */
    size_t map_size_max;     /* a range env never grows past this */
    uint64_t max_hints;      /* hints kept per target node */
    uint64_t max_hint_bytes; /* bytes of hints kept in total */
    /* Open range envs with MDB_WRITEMAP: a commit writes no pages with
     * pwrite (they are changed in place in the shared map), ~2x faster small
     * commits. The price: the data files are sparse up to the map size, so
     * a write fault on a full disk kills the process with SIGBUS instead of
     * returning an error. Off by default. */
    bool write_map;
    /* Commit log segment size (0: 64 MiB); a checkpoint runs whenever a
     * segment fills. Replay at open reads at most about this much more
     * than one segment. */
    uint64_t log_segment_bytes;
    /* Memtable size (0: 16 MiB): committed writes are kept in memory and
     * applied to the range envs in one transaction per env when this many
     * bytes gathered, or a second after the first of them, or before a
     * range operation, scan, digest, copy or checkpoint needs them there.
     * Commits wait (apply it themselves) past twice this. */
    size_t memtable_bytes;
    /* Automatic compaction (store_range_compact in a background thread):
     * a range env whose keys new since it was last written whole (created,
     * compacted, streamed in) reach this percentage of its keys, and which
     * holds at least 1 MiB, is rewritten packed; 0: 25; negative: never.
     * Random-order inserts split pages at their middle and leave them about
     * two-thirds full; rewriting costs a copy of the env per quarter of
     * growth. */
    int auto_compact_pct;
    /* Write the commit log through the page cache. By default it is
     * written with O_DIRECT where the file system takes it (less CPU and
     * a shorter commit; storage/wal.c), through the cache elsewhere. */
    bool log_buffered;
    /* Disk space kept free by refusing writes (0: none; see "Disk space
     * of writes" below). */
    uint64_t disk_reserve_bytes;
    /* The read cache's bound (0: none): the range envs' records of keys
     * read recently, so that a read the memtable cannot answer need not
     * descend its env's B-tree (docs/storage.md, "The read cache"). */
    size_t read_cache_bytes;
};

#define STORE_OPTS_INIT                                                       \
    {                                                                         \
        NULL, STORE_GROUP_COMMIT, STORE_SYNC_AUTO, 1000, UINT64_C(864000000), \
            (size_t)64 << 20, (size_t)1 << 40, UINT64_C(1000000),             \
            UINT64_C(1) << 30, false, UINT64_C(64) << 20, 0, 0, false, 0,     \
            (size_t)64 << 20                                                  \
    }

/* Open (creating if needed) the store in opts->data_dir and recover it: an
 * interrupted split, merge or drop is finished or undone so every key is in
 * exactly one range env. Returns 0 and sets *out, -errno, RK_ECONFIG for bad
 * options, or RK_ECORRUPT / RK_EVERSION for unreadable state.
 * @note The caller owns *out and frees it with store_free. */
int store_open(store **out, const struct store_opts *opts);

/* Sync and close everything. No call may be in flight. NULL is a no-op. */
void store_free(store *s);

/* Make every write committed before the call durable (both modes): one
 * fdatasync of the commit log. Syncs run one at a time; callers that
 * arrive during one share the next. */
int store_sync(store *s);

/* Make every write committed to a range env before the call durable
 * (store_batch_commit_direct without sync, the memtable's applies): each
 * env written since its last sync is synced as a checkpoint syncs them
 * (sync_method), one such sync at a time. 0, or the sync's error (sticky,
 * as store_failed says). Blocks: off the loop thread. */
int store_sync_envs(store *s);

/* Make the range envs durable and delete the commit log segments they
 * cover (runs by itself whenever a segment fills, and at store_free).
 * Writes go on meanwhile; they wait only while the log is cut. */
int store_checkpoint(store *s);

/* Apply the memtable to the range envs now, so that store_range_info
 * counts every write committed before the call (scans, digests, copies and
 * range operations do this themselves). Not needed for durability or for
 * reads. Returns 0, or the error that kept some writes in the memtable
 * (they stay readable and logged; e.g. RK_EFULL). */
int store_flush(store *s);

/* ---- Writes: batches ---------------------------------------------------- */

/* A batch collects writes without touching the disk (loop-thread safe), is
 * committed by store_batch_commit on a worker thread, and then tells each
 * write's result. Not shared between threads at the same time. */
typedef struct store_batch store_batch;

int store_batch_new(store_batch **out);
void store_batch_free(store_batch *b); /* NULL is a no-op */

/* Empty the batch for reuse (keeps its memory, within bounds: the copy
 * chunks of a few writes' worth and a log record buffer up to 1 MiB). */
void store_batch_reset(store_batch *b);

/* Append a write of the encoded record `rec` to `key` (token =
 * rk_token(key)). Key and record are copied. Returns 0, RK_EBADREQ for an
 * empty key, RK_ETOOLARGE for a key over RK_MAX_KEY or a value over
 * RK_MAX_VALUE, or the error of store_record_decode for a bad record;
 * a refused write is not added. */
int store_batch_add(store_batch *b, struct rk_slice key, struct rk_slice rec);

size_t store_batch_count(const store_batch *b);

/* Result of write i after store_batch_commit: 0 when the key's stored
 * record is the LWW merge of the old one and this one (and durable in group
 * commit mode), RK_ENOTFOUND if no local range holds the token, RK_EFULL if
 * the range's env is full (an earlier apply of the memtable to it failed:
 * its map cannot grow, or the disk is full; such writes stay in the
 * memtable and the log, readable, and new ones are refused until an apply
 * succeeds), or another error. */
int store_batch_result(const store_batch *b, size_t i);

/* Apply every write (LWW merge), commit each touched range env once and make
 * them durable (see the top of this file). Returns 0 when every write has
 * its result (some may still be errors), or an error for the whole batch
 * (then no result is durable). Blocks: call it off the loop thread. */
int store_batch_commit(store *s, store_batch *b);

/* Commit n batches with one log sync: each is appended to the log as its
 * own record, one sync covers them all, then each goes to the memtable.
 * status[i] is what store_batch_commit would have returned for bs[i]. A
 * committer that finds several batches waiting commits them together
 * instead of one fsync each. Blocks: call it off the loop thread. */
void store_batch_commit_many(store *s,
                             store_batch *const *bs,
                             size_t n,
                             int *status);

/* Commit a chunk of records copied from a peer (streaming: a join's pull,
 * a pushed range, a repair) straight into the range envs, without the
 * commit log and the memtable: one write transaction per env touched (a
 * chunk of one range: one), each write merged last-write-wins with the
 * env's record and with the memtable's (in STORE_GROUP_COMMIT mode a write
 * the memtable holds a newer or the same record of is left out: result 0;
 * an older one there loses to it at the memtable's apply and in reads).
 * With `sync`, every env written is synced (fdatasync, or syncfs with
 * STORE_SYNC_SYNCFS) before it returns, in both durability modes: a
 * caller may record the chunk as done once this returns. Without, the
 * writes are durable only after a later store_sync_envs (or checkpoint):
 * a caller that streams many chunks syncs once for several. Results as
 * store_batch_commit's (store_batch_result): RK_ENOTFOUND without a local
 * range, a stuck range's error, RK_EFULL under disk_reserve_bytes (the
 * chunk's bytes counted as a commit's log record), the sync's error (then
 * store_failed reports it, and the next checkpoint fails, as when a
 * checkpoint's own sync fails). Returns 0, or an error for the whole batch:
 * -ENOMEM, or an earlier env sync's failure (nothing written). Blocks: call
 * it off the loop thread. */
int store_batch_commit_direct(store *s, store_batch *b, bool sync);

/* One write with group commit across threads: concurrent callers are
 * gathered into one batch by whichever of them commits first. Same results
 * as store_batch_result. */
int store_put(store *s, struct rk_slice key, struct rk_slice rec);

/* ---- Reads -------------------------------------------------------------- */

/* The live record of `key` at `now_ms`. Returns 0 and a malloc'd copy of
 * the encoded record in *out / *out_len (caller frees), RK_ENOTFOUND when
 * absent, deleted or expired (or no local range holds it), RK_EBADREQ /
 * RK_ETOOLARGE for a bad key, RK_ECORRUPT / RK_EVERSION for a bad record. */
int store_get(uint8_t **out,
              size_t *out_len,
              store *s,
              struct rk_slice key,
              uint64_t now_ms);

/* As store_get, but also returns tombstones and expired records (for read
 * repair and replication). */
int store_get_raw(uint8_t **out,
                  size_t *out_len,
                  store *s,
                  struct rk_slice key);

/* As store_get_raw, but the record is copied into the caller's buffer *buf
 * of *cap bytes (NULL and 0 at first), which is grown with realloc when it
 * is too small (*buf and *cap are updated; the caller frees *buf, on
 * failure too). Lets a caller that reads often keep one buffer instead of
 * a malloc and a free per read. *out_len is set only on success. */
int store_get_raw_into(
    uint8_t **buf, size_t *cap, size_t *out_len, store *s, struct rk_slice key);

/* A read of the key whose token is `token` comes soon: the memtable's and
 * the read cache's buckets for it start on their way into the CPU's
 * cache, so that the read's first cache misses overlap the work done
 * before it (a coordinator's plan). A hint: it reads nothing, takes no
 * lock, and any thread may call it while s is open. */
void store_prefetch(store *s, uint64_t token);

/* Reads of the keys whose tokens are tokens[0..n) come soon (a client's
 * pipeline of GETs): as store_prefetch for each, and then, once their
 * buckets are on their way, the first entry each bucket points at, taken
 * under the memtable's lock (once for all of them), so that the reads'
 * entry misses overlap each other instead of coming one read at a time.
 * A hint: it changes nothing. */
void store_prefetch_many(store *s, const uint64_t *tokens, size_t n);

/* ---- Ranges ------------------------------------------------------------- */

struct store_range {
    uint64_t start; /* exclusive */
    uint64_t end;   /* inclusive */
};

/* Whether token t lies in the arc (start, end]. */
bool store_range_contains(struct store_range r, uint64_t t);

/* Create an empty range env. RK_EEXIST if it overlaps a local range. */
int store_range_create(store *s, struct store_range r);

/* Split the range that is exactly `r` at token `at` (start < at < end along
 * the arc) into (start, at] and (at, end]. Crash-safe. RK_ENOTFOUND if `r`
 * is not a local range, RK_EBADREQ if `at` is not strictly inside. */
int store_range_split(store *s, struct store_range r, uint64_t at);

/* Merge the adjacent local ranges (a.start, a.end] and (a.end, b.end] into
 * one. Crash-safe. RK_ENOTFOUND / RK_EBADREQ as above. */
int store_range_merge(store *s, struct store_range a, struct store_range b);

/* Rewrite the env of the local range that is exactly `r` into a fresh env
 * in key order (MDB_APPEND: leaf pages packed full, as a range streamed in
 * token order is) and switch to it. Reads and writes go on meanwhile (the
 * writes are logged and merged into the new env before the switch, which
 * blocks them briefly). Crash-safe: after kill -9 the store reopens with
 * either env, never both. The content (and store_digest) is unchanged.
 * RK_ENOTFOUND if `r` is not a local range. Blocks: off the loop thread. */
int store_range_compact(store *s, struct store_range r);

/* Change auto_compact_pct of a store opened with it >= 0 (negative: no
 * automatic compaction from now on, until set again; a compaction already
 * running finishes). RK_EBADREQ if the store was opened with it negative
 * (no compactor thread). */
int store_auto_compact_set(store *s, int pct);

/* Drop a local range and its data. Crash-safe. */
int store_range_drop(store *s, struct store_range r);

/* Keep only the arcs keep[0..nkeep) of the local range that is exactly
 * `r` and drop the rest of its data: each kept arc becomes a local range
 * of its own, in a fresh env holding its entries in key order (written as
 * store_range_compact writes, so the dropped data's disk space is freed),
 * and the old env goes. The kept arcs are disjoint sub-arcs of r in order
 * along it (from r.start), at most STORE_KEEP_MAX of them; none is a drop
 * (store_range_drop), {r} a compaction. One pass over the old env copies
 * only what is kept, so it costs about the kept bytes, where a split per
 * boundary copied the upper piece each time. Reads and writes go on
 * meanwhile (writes to the old env are logged and merged into the new
 * envs); the switch runs at a checkpoint's cut, as a drop does, so no
 * write to a dropped arc is replayed after it. Crash-safe: the store
 * reopens with the old env or with the new ones. RK_ENOTFOUND if `r` is not
 * a local range, RK_EBADREQ for arcs that are not disjoint sub-arcs of r
 * in order. Blocks: off the loop thread. */
#define STORE_KEEP_MAX 4096
int store_range_keep(store *s,
                     struct store_range r,
                     const struct store_range *keep,
                     size_t nkeep);

/* ---- Disk space of range operations ------------------------------------ */

/* A compaction, keep, split or merge copies a range into an env that is
 * new or grows, beside the old one until its switch. Before it writes
 * anything it checks that data_dir's file system has room for that copy:
 * the range's bytes in use (its pages, not its file: freed pages are not
 * copied; with write_map the new maps, allocated whole) plus an eighth
 * plus STORE_SPACE_MARGIN for the writes meanwhile; else it returns
 * -ENOSPC at once, having changed nothing, and the skip is counted and
 * reported (below). The automatic compactor tries again every
 * STORE_SPACE_RETRY_S seconds, so it goes ahead once space is freed. Each
 * env, and each map growth with write_map, has its mapped files allocated
 * first (posix_fallocate), so a full disk is -ENOSPC, never SIGBUS. */
#define STORE_SPACE_MARGIN  ((uint64_t)8 << 20)
#define STORE_SPACE_RETRY_S 5
#define STORE_SKIPS_QUEUED  16

/* A range operation skipped for lack of disk space. */
struct store_space_skip {
    struct store_range r;
    const char *job; /* "compact", "keep", "split" or "merge" (static) */
    uint64_t need;   /* bytes it wanted free */
    uint64_t avail;  /* bytes free for an unprivileged user */
    uint64_t skips;  /* skips of r since its last report, this one too */
};

/* Skips since the store was opened. Thread-safe. */
uint64_t store_space_skips(store *s);

/* Move the reported skips not yet taken (at most max) into out, oldest
 * first; their number. A range's skip is reported at most once a minute
 * (those in between are counted in its next report's `skips`), and at
 * most STORE_SKIPS_QUEUED reports wait to be taken (a skip finding the
 * queue full is reported later). For a caller's log. Thread-safe. */
size_t
store_space_skips_take(struct store_space_skip *out, size_t max, store *s);

/* ---- Disk space of writes --------------------------------------------- */

/* With disk_reserve_bytes set, a commit first checks that the file system
 * of data_dir, and of data_dir/commitlog when that is another one, keeps
 * that much free after its log record; if not, every write of the batch
 * gets RK_EFULL and nothing is logged (writes already logged are never
 * refused: a checkpoint's relog, replay at open). So a full disk refuses
 * writes before it is full, and the reserve stays for what must still
 * write: applying the memtable, checkpoints, hints, system state, range
 * jobs. Free space is looked at (statvfs) at open and at least once a
 * second, by the background thread too, so the refusals end by themselves
 * within about a second of space being freed; between looks, the bytes
 * logged are taken off the last figure, and a commit looks again first
 * once they reach a quarter of the room there was over the reserve (the
 * disk takes more than the log: the memtable's apply to the envs), so
 * near the reserve every commit looks. Once refusing, writes are taken again
 * only with STORE_SPACE_RESUME_PART of the reserve free beyond it, so a
 * disk at the edge does not flap. */
#define STORE_SPACE_LOOK_MS     1000
#define STORE_SPACE_RESUME_PART 8 /* a 1/8 of the reserve */

struct store_space_info {
    uint64_t reserve;  /* disk_reserve_bytes */
    uint64_t avail;    /* bytes free at the last look (the least of the
                          two file systems), less those logged since */
    bool low;          /* writes are refused (RK_EFULL) now */
    uint64_t refused;  /* writes refused for the reserve since open */
    uint64_t episodes; /* times `low` went from false to true */
};

/* The reserve's state as of the last commit or look; takes a lock, makes
 * no system call (loop-safe). */
void store_space_info(struct store_space_info *out, store *s);

/* Whether writes are refused for the reserve (`low`) or fewer than the
 * reserve plus a margin (STORE_SPACE_RESUME_PART of it, at least
 * STORE_SPACE_MARGIN) bytes are free, as of the last commit or look;
 * false without a reserve. No lock, no system call: for every write. */
bool store_space_near_full(store *s);

/* Purge, from every range, tombstones and expired records older than
 * gc_grace at `now_ms` (a tombstone's age is its timestamp's wall time).
 * *out_purged (may be NULL) counts them. Takes no account of repair: the
 * daemon purges with store_purge_next. */
int store_gc(store *s, uint64_t now_ms, uint64_t *out_purged);

/* The local ranges, sorted by end. Returns 0 and a malloc'd array (caller
 * frees) of *out_n entries. */
int store_range_list(struct store_range **out, size_t *out_n, store *s);

/* The range holding token t: 0 and *out, or RK_ENOTFOUND. */
int store_range_find(struct store_range *out, store *s, uint64_t t);

struct store_range_info {
    uint64_t keys;       /* entries in the env */
    uint64_t disk_bytes; /* pages in use * page size */
    uint64_t map_size;   /* current LMDB map size */
};

/* Counts of the local range that is exactly `r` (cheap: LMDB's stat). */
int store_range_info(struct store_range_info *out,
                     store *s,
                     struct store_range r);

struct store_mem_info {
    uint64_t writes;      /* keys with a write in the memtable */
    uint64_t bytes;       /* memory they hold */
    uint64_t applies;     /* applies to the envs so far: when it moves, the
                             envs' keys and bytes (store_range_info) changed */
    uint64_t known_reads; /* reads answered by the memtable alone, its
                             record known to be newer than the env's */
    /* The read cache: entries, bytes held (bound: read_cache_bytes), and
     * reads that found the env's record there or not. */
    uint64_t cache_entries, cache_bytes, cache_hits, cache_misses;
};

/* The memtable: writes committed but not yet applied to the range envs
 * (they are within about a second). A key may be counted both here and in
 * store_range_info's keys until then. */
void store_mem_info(struct store_mem_info *out, store *s);

/* 0, or the error of a failed log or env sync: from then on commits (log)
 * or checkpoints (envs: the log is kept and grows) fail until the store is
 * reopened, which replays the log. Takes no lock. */
int store_failed(store *s);

/* Whether the commit log is written with O_DIRECT now (store_opts
 * log_buffered unset and the file system takes direct writes). */
bool store_log_direct(store *s);

/* One stored entry, as seen by a scan.
 * @note key and rec borrow from LMDB and live only during the callback. */
struct store_item {
    uint64_t token;
    struct rk_slice key; /* the user key */
    struct rk_slice rec; /* the encoded record */
};

/* Called per item; a nonzero return stops the scan and is returned. It runs
 * with the store's map lock held shared: it must not call the store. */
typedef int (*store_scan_cb)(const struct store_item *it, void *arg);

/* An ordered scan of the token arc (start, end] in bounded chunks. Plain
 * data: initialise with store_scan_init and keep it between chunks (it may
 * be kept across range splits and merges; the next chunk finds where it
 * left off). Items come in token order along the arc. */
struct store_scan {
    struct store_range arc;
    uint64_t pos; /* tokens along the arc up to pos are done... */
    bool started; /* ...once started */
    bool done;
    size_t last_len;   /* inner-key of the last item within token `pos` */
    uint8_t last[424]; /* (resume point inside one token) */
};

void store_scan_init(struct store_scan *sc, struct store_range arc);

/* Feed the next chunk (at most max_items items and about max_bytes bytes,
 * at least one item) to cb. Returns 0 (check sc->done), RK_ENOTFOUND if a
 * part of the arc still to scan is not held locally, or cb's nonzero
 * return. Every local range the arc crosses is scanned in turn. */
int store_scan_next(store *s,
                    struct store_scan *sc,
                    size_t max_items,
                    size_t max_bytes,
                    store_scan_cb cb,
                    void *arg);

struct store_digest {
    uint64_t hash;  /* XXH3-64 over (token, key, record) in scan order */
    uint64_t keys;  /* entries */
    uint64_t bytes; /* key + record bytes */
};

/* Digest of every entry in the arc (start, end] (all of it local). Two
 * stores holding the same entries there give the same digest. Repair's
 * Merkle leaves hash their entries the same way (repair/merkle.h), so a
 * leaf's hash is the digest of its sub-arc. */
int store_digest(struct store_digest *out, store *s, struct store_range arc);

/* Whether record r may be purged at `now_ms` (wall ms): it is dead (a
 * tombstone, or a value with an expiry) for gc_grace_ms at least (a
 * tombstone since its timestamp's wall time, an expired value since its
 * expiry), and it was written (its timestamp's wall time) before
 * `covered_ms`, the time before which every write of its arc is known to
 * have reached every replica (the start of the last repair of the arc that
 * completed with all of them, less a margin; UINT64_MAX: no condition).
 * The second rule is what keeps a purge from letting an older copy on a
 * replica that missed the delete (or the expiring write) come back. */
bool store_record_purgeable(const struct store_record *r,
                            uint64_t now_ms,
                            uint64_t grace_ms,
                            uint64_t covered_ms);

/* A purge of one token arc in bounded steps (store_purge_next): plain
 * data, set with store_purge_init and kept between steps. */
struct store_purge {
    struct store_range arc;
    uint64_t now_ms, grace_ms, covered_ms; /* store_record_purgeable's */
    uint64_t seen;                         /* entries looked at */
    uint64_t tombstones, expired;          /* purged */
    bool done;
    struct store_scan at; /* where the next step starts */
};

void store_purge_init(struct store_purge *p,
                      struct store_range arc,
                      uint64_t now_ms,
                      uint64_t grace_ms,
                      uint64_t covered_ms);

/* One step: look at up to max_items entries of p->arc from where the last
 * step ended, in one write transaction of one range env, and delete those
 * store_record_purgeable allows (undecodable records are left for a write
 * or repair to replace). Returns 0 (check p->done), RK_ENOTFOUND if the
 * part of the arc next is not held locally, or the store's error. The
 * transaction is short (max_items bounds it), so the memtable's applies to
 * the env wait at most one step. Not synced: the next checkpoint syncs the
 * env, and a crash before it only brings back records a later purge
 * deletes again. A step waits for a range operation (compaction, split,
 * merge) to end: their copies would miss its deletions. Blocks: off the
 * loop thread. */
int store_purge_next(store *s, struct store_purge *p, size_t max_items);

/* Write a compacted copy of the env of local range `r` (a complete LMDB
 * data file) to fd. Reads and writes continue meanwhile; the copy is a
 * consistent snapshot. */
int store_range_copy_fd(store *s, struct store_range r, int fd);

/* Install an LMDB data file (as written by store_range_copy_fd, e.g.
 * received from a peer and written to `path`) as the new local range `r`.
 * The file is moved into the store; entries outside `r` are removed.
 * RK_EEXIST if `r` overlaps a local range. */
int store_range_adopt(store *s, struct store_range r, const char *path);

/* ---- System state ------------------------------------------------------- */

/* Small named values kept durably in system/ (node name, generation,
 * tokens, ring epoch, streaming progress, ...). Names are 1..200 bytes of
 * the caller's choosing; values up to 1 MiB. A set is durable on return. */
int store_sys_set(store *s, const char *name, struct rk_slice val);

/* Returns 0 and a malloc'd copy (caller frees; a zero-length value gives a
 * non-NULL pointer), or RK_ENOTFOUND. */
int store_sys_get(uint8_t **out, size_t *out_len, store *s, const char *name);

int store_sys_del(store *s, const char *name); /* RK_ENOTFOUND if absent */

/* Set names[i] to vals[i] for i in [0, n), or delete it where vals[i].p is
 * NULL (absent is fine), in one synced transaction: all or none, one
 * fsync. RK_EBADREQ / RK_ETOOLARGE for a bad name or value, nothing
 * written. */
int store_sys_write(store *s,
                    const char *const *names,
                    const struct rk_slice *vals,
                    size_t n);

/* Typed helpers over the same names: a u64 (generation, ring epoch, a
 * stream's last token done) and an array of tokens. */
int store_sys_set_u64(store *s, const char *name, uint64_t v);
/* The 8 bytes store_sys_set_u64 stores for v (for store_sys_write). */
void store_sys_u64_value(uint8_t out[8], uint64_t v);
int store_sys_get_u64(uint64_t *out, store *s, const char *name);
int store_sys_set_tokens(store *s,
                         const char *name,
                         const uint64_t *tokens,
                         size_t n);
/* @note *out is malloc'd (caller frees); NULL when *out_n == 0. */
int store_sys_get_tokens(uint64_t **out,
                         size_t *out_n,
                         store *s,
                         const char *name);

/* ---- Hints -------------------------------------------------------------- */

/* A hint is a write (key, encoded record) kept for a DOWN target node and
 * replayed when it is back. Hints of one node are numbered in order. Bounded
 * by max_hints per node and max_hint_bytes in total: past either,
 * store_hint_add returns RK_EFULL and keeps nothing. Durable on return. */
int store_hint_add(store *s,
                   const char *node,
                   struct rk_slice key,
                   struct rk_slice rec);

/* Many hints, possibly for several nodes, in one transaction and one sync.
 * Each gets its own result (0, RK_EFULL past a bound, RK_EBADREQ /
 * RK_ETOOLARGE for a bad key or record); if the transaction fails, every
 * result is that error and it is returned. Durable on return. */
struct store_hint {
    const char *node;
    struct rk_slice key, rec;
    int result;
};
int store_hint_add_many(store *s, struct store_hint *h, size_t n);

/* Called per hint in order; nonzero stops the walk and is returned. It
 * must not call the store.
 * @note key and rec live only during the callback. */
typedef int (*store_hint_cb)(uint64_t seq,
                             struct rk_slice key,
                             struct rk_slice rec,
                             void *arg);

/* Walk up to `max` hints of `node` with seq > after_seq. A hint whose bytes
 * do not split into key and record (damaged on disk) is passed with an
 * empty key, which a stored hint never has, and all its bytes as rec: the
 * caller can drop it instead of stopping at it for ever. */
int store_hint_scan(store *s,
                    const char *node,
                    uint64_t after_seq,
                    size_t max,
                    store_hint_cb cb,
                    void *arg);

/* Delete the hints of `node` numbered seqs[0..n), in one transaction; a
 * seq not kept is skipped. For a replay that delivers some hints of a batch
 * and keeps others for a later round. */
int store_hint_delete_seqs(store *s,
                           const char *node,
                           const uint64_t *seqs,
                           size_t n);

/* Number of hints kept for `node`. */
int store_hint_count(uint64_t *out, store *s, const char *node);

/* Drop every hint of every node in one transaction; *out_bytes (may be
 * NULL) gets the bytes they held. For a restore of the whole cluster
 * from snapshots, whose hints are writes made after them. */
int store_hint_clear(store *s, uint64_t *out_bytes);

#endif
