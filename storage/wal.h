/*
 * wal.h - the commit log (write-ahead log) of the store; internal to
 * storage/ (docs/storage.md, "Durability").
 *
 * Segments are files data_dir/commitlog/<seq, 16 hex digits>.log, written
 * sequentially; up to two retired ones are kept as <seq>.spare and reused
 * as the next segments (wal.c). Each record is
 *   u32 magic | u32 payload length | u64 segment seq | u64 record number
 *   | u64 XXH3-64 of the 24 bytes before it and the payload | payload
 * (big-endian). Record numbers grow by one across all segments of one run,
 * so a log sequence number (LSN) is a record number. A record that is short,
 * has a bad magic, checksum, segment seq or record number ends its segment.
 * A segment is sealed (a record with an empty payload appended, then
 * fdatasync'd) before the next one gets its first record, so only the
 * newest segment can end in a torn record; an older segment that does not
 * end in its seal record is corrupt.
 *
 * Zero fill: a background caller (store__wal_prefill) writes zeros ahead
 * of the append position and syncs them, so most appends overwrite blocks
 * that are already allocated and written, and their fdatasync flushes data
 * only (no file size or extent change to commit to the journal). It syncs
 * through a file description of its own, so a writeback error is still
 * reported to the commits' sync (Linux reports one per description).
 *
 * Threads: every function may be called from any thread; appends are
 * serialised, syncs are shared (a sync that starts after an append covers
 * it, and callers that arrive during a sync share the next one), one at a
 * time; after a failed sync nothing more counts as durable (every sync and
 * append fails: the log is broken until reopened).
 */
#ifndef RK_STORAGE_WAL_H
#define RK_STORAGE_WAL_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

typedef struct store__wal store__wal;

#define STORE__WAL_HDR 32u

/* Open (creating) the log directory `dir` and list its segments and
 * spares. Appends are refused until store__wal_start. Returns 0, -errno or
 * RK_ECORRUPT for a file in `dir` that is neither.
 * @note The caller owns *out (store__wal_free). */
int store__wal_open(store__wal **out, const char *dir, uint64_t seg_bytes);

/* Write segments through the page cache, never with O_DIRECT (which is
 * used where the file system takes it, wal.c). Before store__wal_start. */
void store__wal_buffered(store__wal *w);

/* Whether the current segment is written with O_DIRECT (false before
 * store__wal_start). Takes no lock: the log's is held across disk writes,
 * and the node reads this on its event loop (metrics). */
bool store__wal_direct(store__wal *w);

/* Close (no sync). NULL is a no-op. */
void store__wal_free(store__wal *w);

/* Called per record payload, in log order; nonzero stops the replay and is
 * returned. @note p lives until the callback's segment is done: until
 * `seg_done` is called. */
typedef int (*store__wal_cb)(const uint8_t *p, size_t len, void *arg);
typedef int (*store__wal_seg_cb)(void *arg);

/* Replay every segment found at open, oldest first: cb per valid record,
 * seg_done after each segment. A torn or bad record ends the newest segment
 * quietly; in an older (sealed) segment it is RK_ECORRUPT. */
int store__wal_replay(store__wal *w,
                      store__wal_cb cb,
                      store__wal_seg_cb seg_done,
                      void *arg);

/* After replay: start a new segment, and with `retire` first retire every
 * segment found at open (oldest first, so a crash leaves a suffix; kept as
 * spares or deleted, as store__wal_retire does). Without
 * it the caller retires them later (store__wal_cut, store__wal_retire),
 * e.g. after logging again what replay could not apply. */
int store__wal_start(store__wal *w, bool retire);

#define STORE__WAL_SEALED 1 /* a full segment was sealed: checkpoint due */
#define STORE__WAL_FILL   2 /* little zero fill left: store__wal_prefill */

/* Append one record (a non-empty payload). *out_lsn is its LSN (for
 * store__wal_sync); *out_flags gets STORE__WAL_* bits. A failed append
 * leaves no trace. */
int store__wal_append(uint64_t *out_lsn,
                      int *out_flags,
                      store__wal *w,
                      const uint8_t *p,
                      size_t len);

/* A record to append: payload p[0..len) (len > 0); lsn is set once it is
 * written. */
struct store__wal_rec {
    const uint8_t *p;
    size_t len;
    uint64_t lsn;
};

/* Append r[0..n) in order, with one write per segment they go to (one
 * for all, unless the segment fills). On error the records written before
 * it keep their lsn (nonzero), the others have lsn 0; what failed leaves
 * no trace. *out_flags as for store__wal_append. */
int store__wal_append_many(int *out_flags,
                           store__wal *w,
                           struct store__wal_rec *r,
                           size_t n);

/* Return once every record up to `lsn` is on stable storage. */
int store__wal_sync(store__wal *w, uint64_t lsn);

/* 0, or the error that broke the log (a failed sync or write). Takes no
 * lock: callable from an event loop. */
int store__wal_broken(store__wal *w);

/* LSN of the last record appended (0: none). */
uint64_t store__wal_last(store__wal *w);

/* Seal the current segment and start a new one, unless it is empty.
 * *out_cut: segments with seq below it may be retired once the envs hold
 * (durably) everything they logged. */
int store__wal_cut(store__wal *w, uint64_t *out_cut);

/* Retire the segments with seq < cut: the first two kept (renamed) as
 * spares for the next segments while there is room, the rest deleted. */
int store__wal_retire(store__wal *w, uint64_t cut);

/* Whether retired segments are kept as spares (they are from open). Not:
 * the spares kept are deleted, and retired segments too until it is
 * called with true again; the store says so while its disk is short of
 * its reserve, so that the log holds no space it does not need. */
void store__wal_keep_spares(store__wal *w, bool keep);

/* Write and sync zeros ahead of the append position in the current
 * segment (up to its size), a MiB at a time; appends go on meanwhile. */
int store__wal_prefill(store__wal *w);

/* Segments on disk (for tests and status). */
size_t store__wal_segments(store__wal *w);

#endif
