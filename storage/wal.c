/*
 * wal.c - the commit log: sequential segment files that make a group
 * commit durable with one fdatasync of one file (wal.h). The store appends
 * a batch as one record, syncs the log, and only then applies the batch to
 * the LMDB envs without syncing them; a checkpoint later syncs the envs
 * and deletes the segments they cover, and store_open replays what is left.
 *
 * A record's checksum is XXH3-64 of its payload seeded with XXH3-64 of the
 * 24 header bytes before the checksum, so a record left over from another
 * segment or run (wrong seq or number) or a torn one never verifies.
 *
 * Segments are written with O_DIRECT where the file system takes it (not
 * tmpfs, say): an append goes straight to the device and the commit's
 * fdatasync only flushes the device's cache, with no page cache copy, no
 * dirty pages and no writeback to wait for. On the development VM a 4 KiB
 * write + fdatasync from each of three threads took ~240 us and ~33 us of
 * CPU this way against ~280 us and ~55 us through the page cache
 * (docs/performance-resp-history.md). A direct write covers whole WAL_DIO
 * blocks: the append rewrites the partial block it starts in (its earlier
 * bytes, kept in `tail`, unchanged: a torn rewrite leaves them as they were)
 * and pads the last one with zeros, which replay reads as the end of the log.
 *
 * Retired segments are recycled: up to WAL_SPARES of them are renamed
 * <seq>.spare instead of deleted, and the next segment is a spare renamed
 * into place, its blocks already allocated and written, so it needs no zero
 * fill (which wrote every byte of the log twice). Its old records carry
 * their own, older segment seq and never verify; seqs are never reused
 * (the next is above every segment's and every spare's).
 */
#include "storage/wal.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/uio.h>
#include <unistd.h>

#include <xxhash.h>

#include "common/rk.h"

#define WAL_MAGIC UINT32_C(0x524b4c31) /* "RKL1" */

/* Alignment of direct writes (offset, length and memory): every logical
 * block size up to 4 KiB divides it. */
#define WAL_DIO 4096u

/* Zeros to write from: the zero fill's, and a new direct segment's first
 * block (aligned for direct writes). */
static const uint8_t wal_zeros[1 << 16] __attribute__((aligned(WAL_DIO)));

/* Retired segments kept for reuse (renamed <seq>.spare). */
#define WAL_SPARES 2

struct store__wal {
    char *dir;
    int dir_fd;
    uint64_t seg_bytes;
    pthread_mutex_t mu;
    pthread_cond_t cv;
    uint64_t *segs; /* seqs of the segment files, ascending */
    size_t nsegs, cap;
    size_t nfound;               /* segs[0..nfound) were found at open */
    uint64_t spares[WAL_SPARES]; /* seqs of the spare files */
    size_t nspares;
    bool no_spares;   /* keep none (store__wal_keep_spares) */
    uint64_t top_seq; /* the highest seq of any file met: a segment's or a
                         spare's (a new segment's is above it) */
    bool started;
    int fd; /* the current segment (the newest), -1 before start */
    uint64_t seq;
    uint64_t off;
    uint64_t filled; /* bytes of the current file written (records, zeros) */
    uint64_t filling_seq;  /* a zero fill of this segment is in flight
                              outside mu, beyond `filled` (0: none) */
    bool buffered;         /* no O_DIRECT (store__wal_buffered) */
    atomic_bool direct;    /* fd is O_DIRECT: writes in WAL_DIO blocks (set
                              under mu; store__wal_direct reads it without) */
    uint8_t tail[WAL_DIO]; /* bytes [off - off % align, off) of the segment,
                              align = wal_align(w) */
    uint8_t *buf; /* what is being written: tail, records, zero padding */
    bool sealed;  /* the current segment ends in its seal: rotate first */
    size_t bufcap;
    uint64_t rno;      /* number of the last record appended */
    uint64_t synced;   /* records up to this one are durable */
    int nsyncing;      /* fdatasyncs in flight (at most WAL_SYNCS) */
    uint64_t syncing;  /* the newest record a started sync covers */
    atomic_int broken; /* sticky: the log can no longer be trusted (set
                          under mu; store__wal_broken reads it without) */
};

static void wal_put32(uint8_t *p, uint32_t v)
{
    p[0] = (uint8_t)(v >> 24);
    p[1] = (uint8_t)(v >> 16);
    p[2] = (uint8_t)(v >> 8);
    p[3] = (uint8_t)v;
}

static void wal_put64(uint8_t *p, uint64_t v)
{
    wal_put32(p, (uint32_t)(v >> 32));
    wal_put32(p + 4, (uint32_t)v);
}

static uint32_t wal_get32(const uint8_t *p)
{
    return (uint32_t)p[0] << 24 | (uint32_t)p[1] << 16 | (uint32_t)p[2] << 8 |
           p[3];
}

static uint64_t wal_get64(const uint8_t *p)
{
    return (uint64_t)wal_get32(p) << 32 | wal_get32(p + 4);
}

static uint64_t wal_hash(const uint8_t *hdr, const uint8_t *p, size_t len)
{
    return XXH3_64bits_withSeed(p, len, XXH3_64bits(hdr, 24));
}

static void wal_name(char *out, size_t n, uint64_t seq)
{
    snprintf(out, n, "%016" PRIx64 ".log", seq);
}

static void wal_spare_name(char *out, size_t n, uint64_t seq)
{
    snprintf(out, n, "%016" PRIx64 ".spare", seq);
}

static int wal_seg_cmp(const void *a, const void *b)
{
    uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;
    return x < y ? -1 : x > y;
}

static int wal_push(store__wal *w, uint64_t seq)
{
    if (w->nsegs == w->cap) {
        size_t cap = w->cap ? w->cap * 2 : 8;
        uint64_t *n = realloc(w->segs, cap * sizeof(*n));
        if (n == NULL)
            return -ENOMEM;
        w->segs = n;
        w->cap = cap;
    }
    w->segs[w->nsegs++] = seq;
    return 0;
}

int store__wal_open(store__wal **out, const char *dir, uint64_t seg_bytes)
{
    int rc;
    store__wal *w = calloc(1, sizeof(*w));
    if (w == NULL)
        return -ENOMEM;
    w->fd = -1;
    w->dir_fd = -1;
    w->seg_bytes = seg_bytes ? seg_bytes : 1;
    pthread_mutex_init(&w->mu, NULL);
    pthread_cond_init(&w->cv, NULL);
    if ((w->dir = strdup(dir)) == NULL) {
        rc = -ENOMEM;
        goto free_w;
    }
    if (mkdir(dir, 0755) != 0 && errno != EEXIST) {
        rc = -errno;
        goto free_w;
    }
    w->dir_fd = open(dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    if (w->dir_fd < 0) {
        rc = -errno;
        goto free_w;
    }
    DIR *d = opendir(dir);
    if (d == NULL) {
        rc = -errno;
        goto free_w;
    }
    struct dirent *e;
    rc = 0;
    while (rc == 0 && (e = readdir(d)) != NULL) {
        if (e->d_name[0] == '.')
            continue;
        char *end;
        uint64_t seq = strtoull(e->d_name, &end, 16);
        bool spare = strcmp(end, ".spare") == 0;
        if (end != e->d_name + 16 || seq == 0 ||
            (strcmp(end, ".log") != 0 && !spare)) {
            rc = RK_ECORRUPT;
            break;
        }
        if (seq > w->top_seq)
            w->top_seq = seq;
        if (!spare)
            rc = wal_push(w, seq);
        else if (w->nspares < WAL_SPARES)
            w->spares[w->nspares++] = seq;
        else if (unlinkat(w->dir_fd, e->d_name, 0) != 0)
            rc = -errno;
    }
    closedir(d);
    if (rc)
        goto free_w;
    if (w->nsegs > 1)
        qsort(w->segs, w->nsegs, sizeof(*w->segs), wal_seg_cmp);
    w->nfound = w->nsegs;
    *out = w;
    return 0;
free_w:
    store__wal_free(w);
    return rc;
}

void store__wal_buffered(store__wal *w)
{
    w->buffered = true;
}

bool store__wal_direct(store__wal *w)
{
    return atomic_load(&w->direct); /* no mu: held across disk writes */
}

/* The size writes to the current segment come in: WAL_DIO, or 1. */
static uint64_t wal_align(const store__wal *w)
{
    return atomic_load(&w->direct) ? WAL_DIO : 1;
}

/* x rounded up to a whole number of wal_align(w). */
static uint64_t wal_up(const store__wal *w, uint64_t x)
{
    uint64_t a = wal_align(w);
    return (x + a - 1) / a * a;
}

void store__wal_free(store__wal *w)
{
    if (w == NULL)
        return;
    if (w->fd >= 0)
        close(w->fd);
    if (w->dir_fd >= 0)
        close(w->dir_fd);
    pthread_mutex_destroy(&w->mu);
    pthread_cond_destroy(&w->cv);
    free(w->segs);
    free(w->buf);
    free(w->dir);
    free(w);
}

/* ---- Replay ------------------------------------------------------------- */

/* Replay segment `seq`; `newest` says whether a bad record may be a torn
 * tail. */
static int wal_replay_seg(store__wal *w,
                          uint64_t seq,
                          bool newest,
                          store__wal_cb cb,
                          store__wal_seg_cb seg_done,
                          void *arg)
{
    char name[32];
    wal_name(name, sizeof(name), seq);
    int fd = openat(w->dir_fd, name, O_RDONLY | O_CLOEXEC);
    if (fd < 0)
        return -errno;
    struct stat st;
    int rc = 0;
    if (fstat(fd, &st) != 0) {
        rc = -errno;
        close(fd);
        return rc;
    }
    size_t size = (size_t)st.st_size;
    const uint8_t *m = NULL;
    if (size > 0) {
        m = mmap(NULL, size, PROT_READ, MAP_PRIVATE, fd, 0);
        if (m == MAP_FAILED) {
            rc = -errno;
            close(fd);
            return rc;
        }
    }
    close(fd);
    size_t pos = 0;
    uint64_t want = 0; /* the next record number (0: any) */
    bool sealed = false;
    while (rc == 0 && !sealed) {
        /* m is NULL for an empty file: no pointer into it before this. */
        bool ok = size - pos >= STORE__WAL_HDR;
        const uint8_t *h = ok ? m + pos : NULL;
        ok = ok && wal_get32(h) == WAL_MAGIC &&
             wal_get32(h + 4) <= size - pos - STORE__WAL_HDR &&
             wal_get64(h + 8) == seq &&
             (want == 0 || wal_get64(h + 16) == want);
        size_t len = ok ? wal_get32(h + 4) : 0;
        if (ok && wal_hash(h, h + STORE__WAL_HDR, len) != wal_get64(h + 24))
            ok = false;
        if (!ok) {
            if (!newest)
                rc = RK_ECORRUPT; /* a sealed segment was fully synced */
            break;                /* a torn tail: never acknowledged */
        }
        want = wal_get64(h + 16) + 1;
        if (len == 0)
            sealed = true; /* its seal: nothing follows */
        else
            rc = cb(h + STORE__WAL_HDR, len, arg);
        pos += STORE__WAL_HDR + len;
    }
    if (rc == 0 && seg_done != NULL)
        rc = seg_done(arg);
    if (m != NULL)
        munmap((void *)m, size);
    return rc;
}

int store__wal_replay(store__wal *w,
                      store__wal_cb cb,
                      store__wal_seg_cb seg_done,
                      void *arg)
{
    int rc = 0;
    for (size_t i = 0; rc == 0 && i < w->nfound; i++)
        rc = wal_replay_seg(w, w->segs[i], i + 1 == w->nfound, cb, seg_done,
                            arg);
    return rc;
}

/* ---- Segments ----------------------------------------------------------- */

/* Open segment file `name` for writing (flags: O_CREAT | O_TRUNC or 0),
 * with O_DIRECT if *direct and the file system takes it; *direct says
 * which it got. With `probe` (a new or recycled segment) its first block
 * is written (zeros) to find out whether direct writes of WAL_DIO blocks
 * work here at all. */
static int wal_open_seg(
    store__wal *w, const char *name, int flags, bool probe, bool *direct)
{
    flags |= O_WRONLY | O_CLOEXEC;
    if (*direct) {
        int fd = openat(w->dir_fd, name, flags | O_DIRECT, 0644);
        int e = fd < 0 ? errno : 0;
        if (fd >= 0 && probe) {
            ssize_t r = pwrite(fd, wal_zeros, WAL_DIO, 0);
            if (r != (ssize_t)WAL_DIO) {
                e = r < 0 ? errno : EIO;
                close(fd);
                fd = -1;
            }
        }
        if (fd >= 0)
            return fd;
        if (e != EINVAL)
            return -e;
        /* the file system does not take direct writes (of these blocks) */
        *direct = false;
    }
    int fd = openat(w->dir_fd, name, flags, 0644);
    return fd >= 0 ? fd : -errno;
}

/* A spare renamed to segment `name` and opened: its descriptor, and in
 * *filled how many of its bytes are written already; or -1 when there is
 * none or it cannot be used (what failed is left to a new file). */
static int
wal_reuse_spare(store__wal *w, const char *name, bool *direct, uint64_t *filled)
{
    while (w->nspares > 0) {
        char old[32];
        wal_spare_name(old, sizeof(old), w->spares[--w->nspares]);
        if (renameat(w->dir_fd, old, w->dir_fd, name) != 0)
            continue; /* gone, or not ours to rename: a new file instead */
        int fd = wal_open_seg(w, name, 0, true, direct);
        struct stat st;
        if (fd >= 0 && fstat(fd, &st) == 0) {
            uint64_t a = *direct ? WAL_DIO : 1;
            *filled = (uint64_t)st.st_size / a * a;
            if (*filled < a)
                *filled = a; /* the probe wrote the first block */
            return fd;
        }
        if (fd >= 0)
            close(fd);
        return -1; /* O_TRUNC makes a new file of it */
    }
    return -1;
}

/* Create segment `seq` as the current one, from a spare if there is one.
 * Under mu (or before start). */
static int wal_new_seg(store__wal *w, uint64_t seq)
{
    char name[32];
    wal_name(name, sizeof(name), seq);
    bool direct = !w->buffered;
    uint64_t filled = 0;
    int fd = wal_reuse_spare(w, name, &direct, &filled);
    if (fd < 0) {
        direct = !w->buffered;
        fd = wal_open_seg(w, name, O_CREAT | O_TRUNC, true, &direct);
        filled = direct ? WAL_DIO : 0; /* the probe's zeros */
    }
    if (fd < 0)
        return fd;
    if (seq > w->top_seq)
        w->top_seq = seq;
    int rc = wal_push(w, seq);
    if (rc == 0 && fsync(w->dir_fd) != 0)
        rc = -errno;
    if (rc) {
        close(fd);
        return rc;
    }
    w->fd = fd;
    atomic_store(&w->direct, direct);
    w->seq = seq;
    w->off = 0;
    w->filled = filled;
    return 0;
}

/* Seal the current segment (durable, closed) and start the next. Under
 * mu; waits for a sync in flight on the old descriptor. */
static int wal_write(store__wal *w, const uint8_t *p, size_t len);
static int wal_write_recs(store__wal *w, struct store__wal_rec *r, size_t n);

/* Whether a zero fill in flight outside mu may still write where `bytes`
 * appended at the append position would go (it writes beyond `filled`
 * only, whole blocks when the log is direct). */
static bool wal_fill_in_way(const store__wal *w, uint64_t bytes)
{
    return w->filling_seq == w->seq && wal_up(w, w->off + bytes) > w->filled;
}

static int wal_rotate(store__wal *w)
{
    while (w->nsyncing > 0 ||
           (!w->sealed && wal_fill_in_way(w, STORE__WAL_HDR)))
        pthread_cond_wait(&w->cv, &w->mu);
    if (w->broken) /* the sync waited for failed: the seal's would not do */
        return w->broken;
    if (!w->sealed) {
        int rc = wal_write(w, NULL, 0); /* the seal */
        if (rc)
            return rc;
        if (fdatasync(w->fd) != 0) {
            w->broken = -errno;
            return w->broken;
        }
        w->synced = w->rno;
        pthread_cond_broadcast(&w->cv);
        w->sealed = true;
    }
    int old = w->fd;
    int rc = wal_new_seg(w, w->seq + 1);
    if (rc) /* the sealed segment stays current: nothing may follow its
               seal (replay stops there), so the next append retries */
        return rc;
    close(old);
    w->sealed = false;
    return 0;
}

/* A retired segment goes: kept as a spare while there is room, else
 * deleted. */
static int wal_unlink(store__wal *w, uint64_t seq)
{
    char name[32], spare[32];
    wal_name(name, sizeof(name), seq);
    if (!w->no_spares && w->nspares < WAL_SPARES) {
        wal_spare_name(spare, sizeof(spare), seq);
        if (renameat(w->dir_fd, name, w->dir_fd, spare) == 0) {
            w->spares[w->nspares++] = seq;
            return 0;
        }
    }
    if (unlinkat(w->dir_fd, name, 0) != 0 && errno != ENOENT)
        return -errno;
    return 0;
}

int store__wal_retire(store__wal *w, uint64_t cut)
{
    int rc = 0;
    pthread_mutex_lock(&w->mu);
    size_t i = 0;
    for (; i < w->nsegs && w->segs[i] < cut; i++) {
        if (w->started && w->segs[i] == w->seq)
            break; /* never the current one */
        if ((rc = wal_unlink(w, w->segs[i])))
            break;
    }
    if (i > 0) {
        memmove(w->segs, w->segs + i, (w->nsegs - i) * sizeof(*w->segs));
        w->nsegs -= i;
        w->nfound = w->nfound > i ? w->nfound - i : 0;
        if (fsync(w->dir_fd) != 0 && rc == 0)
            rc = -errno;
    }
    pthread_mutex_unlock(&w->mu);
    return rc;
}

void store__wal_keep_spares(store__wal *w, bool keep)
{
    pthread_mutex_lock(&w->mu);
    w->no_spares = !keep;
    while (!keep && w->nspares > 0) {
        char name[32];
        wal_spare_name(name, sizeof(name), w->spares[--w->nspares]);
        (void)unlinkat(w->dir_fd, name, 0); /* gone is what is wanted */
    }
    pthread_mutex_unlock(&w->mu);
}

int store__wal_start(store__wal *w, bool retire)
{
    uint64_t next = w->top_seq + 1; /* above every segment and spare */
    int rc = retire ? store__wal_retire(w, next) : 0;
    if (rc)
        return rc;
    pthread_mutex_lock(&w->mu);
    rc = wal_new_seg(w, next);
    if (rc == 0)
        w->started = true;
    pthread_mutex_unlock(&w->mu);
    return rc;
}

int store__wal_cut(store__wal *w, uint64_t *out_cut)
{
    int rc = 0;
    pthread_mutex_lock(&w->mu);
    if (!w->started)
        rc = RK_EINTERNAL;
    else if (w->broken)
        rc = w->broken;
    else if (w->off > 0)
        rc = wal_rotate(w);
    if (rc == 0)
        *out_cut = w->seq;
    pthread_mutex_unlock(&w->mu);
    return rc;
}

size_t store__wal_segments(store__wal *w)
{
    pthread_mutex_lock(&w->mu);
    size_t n = w->nsegs;
    pthread_mutex_unlock(&w->mu);
    return n;
}

int store__wal_broken(store__wal *w)
{
    return atomic_load(&w->broken); /* no mu: held across disk writes */
}

uint64_t store__wal_last(store__wal *w)
{
    pthread_mutex_lock(&w->mu);
    uint64_t r = w->rno;
    pthread_mutex_unlock(&w->mu);
    return r;
}

/* ---- Appending and syncing ---------------------------------------------- */

/* fdatasyncs of the log in flight at once: one. Two overlapping ones got
 * about twice the syncs per second from two threads, but their results
 * cannot be trusted out of order: Linux reports a writeback error to one
 * fdatasync of the file only, so a second sync that returns 0 after (or
 * before) a first one failed says nothing about the pages they share, and
 * a write it covered was acknowledged although it may be lost (regression:
 * acked_after_failed_sync). The node commits from one thread anyway. */
#define WAL_SYNCS 1

/* Room for `n` bytes in buf (aligned for direct writes). */
static int wal_reserve(store__wal *w, size_t n)
{
    if (n <= w->bufcap)
        return 0;
    size_t cap = w->bufcap ? w->bufcap : 16384;
    while (cap < n)
        cap *= 2;
    void *b; /* nothing in buf is kept */
    if (posix_memalign(&b, WAL_DIO, cap) != 0)
        return -ENOMEM;
    free(w->buf);
    w->buf = b;
    w->bufcap = cap;
    return 0;
}

/* Write p[0..n) at `at`; *done (may be NULL) = bytes written, also on
 * error. */
static int
wal_pwrite(int fd, const uint8_t *p, size_t n, uint64_t at, size_t *done)
{
    size_t d0 = n;
    if (done)
        *done = 0;
    while (n > 0) {
        ssize_t r = pwrite(fd, p, n, (off_t)at);
        if (r < 0 && errno == EINTR)
            continue;
        if (r <= 0)
            return r < 0 ? -errno : -EIO;
        p += r;
        n -= (size_t)r;
        at += (uint64_t)r;
        if (done)
            *done = d0 - n;
    }
    return 0;
}

/* Write records r[0..n) at the append position with one write (each with
 * its header; lsn = its record number), from the start of the block the
 * position is in to the end of the last one when the log is direct. Under
 * mu. */
static int wal_write_recs(store__wal *w, struct store__wal_rec *r, size_t n)
{
    size_t total = 0;
    for (size_t i = 0; i < n; i++)
        total += STORE__WAL_HDR + r[i].len;
    size_t tl = (size_t)(w->off % wal_align(w)); /* bytes kept in tail */
    uint64_t at = w->off - tl;
    size_t len = tl + total;
    size_t wlen = (size_t)wal_up(w, len);
    int rc = wal_reserve(w, wlen);
    if (rc)
        return rc;
    /* the callers waited for a zero fill in the way (wal_fill_in_way) */
    memcpy(w->buf, w->tail, tl);
    uint8_t *q = w->buf + tl;
    for (size_t i = 0; i < n; i++) {
        wal_put32(q, WAL_MAGIC);
        wal_put32(q + 4, (uint32_t)r[i].len);
        wal_put64(q + 8, w->seq);
        wal_put64(q + 16, w->rno + 1 + i);
        if (r[i].len)
            memcpy(q + STORE__WAL_HDR, r[i].p, r[i].len);
        wal_put64(q + 24, wal_hash(q, q + STORE__WAL_HDR, r[i].len));
        q += STORE__WAL_HDR + r[i].len;
    }
    memset(q, 0, wlen - len);
    size_t done;
    rc = wal_pwrite(w->fd, w->buf, wlen, at, &done);
    if (rc) {
        /* Leave no record of the failed write behind: a short write may
         * have put whole records on disk after the first, and the next
         * append reuses their numbers, so a later replay would take them
         * for its successors (regression: failed_append_replayed). Zeros
         * (after the tail, rewritten as it was) are harmless. */
        size_t z = done > tl + STORE__WAL_HDR ? done : tl + STORE__WAL_HDR;
        z = (size_t)wal_up(w, z);
        if (z > wlen)
            z = wlen;
        memset(w->buf + tl, 0, z - tl);
        if (wal_pwrite(w->fd, w->buf, z, at, NULL) != 0)
            w->broken = rc;
    } else {
        w->off += total;
        if (at + wlen > w->filled)
            w->filled = at + wlen;
        size_t ntl = (size_t)(w->off % wal_align(w));
        memcpy(w->tail, w->buf + len - ntl, ntl);
        w->rno += n;
        for (size_t i = 0; i < n; i++)
            r[i].lsn = w->rno - n + 1 + i;
    }
    if (w->bufcap > ((size_t)1 << 20)) { /* a big relog: not kept */
        free(w->buf);
        w->buf = NULL;
        w->bufcap = 0;
    }
    return rc;
}

/* Write one record at the append position. Under mu. */
static int wal_write(store__wal *w, const uint8_t *p, size_t len)
{
    struct store__wal_rec r = {p, len, 0};
    return wal_write_recs(w, &r, 1);
}

/* How far ahead of the append position zeros are kept: grows with the
 * segment, so a store that writes little writes few zeros. */
static uint64_t wal_ahead(const store__wal *w)
{
    uint64_t a = 2 * w->off;
    if (a < ((uint64_t)256 << 10))
        a = (uint64_t)256 << 10;
    if (a > ((uint64_t)8 << 20))
        a = (uint64_t)8 << 20;
    return a;
}

int store__wal_append_many(int *out_flags,
                           store__wal *w,
                           struct store__wal_rec *r,
                           size_t n)
{
    *out_flags = 0;
    for (size_t i = 0; i < n; i++)
        r[i].lsn = 0;
    for (size_t i = 0; i < n; i++) {
        if (r[i].len > UINT32_MAX - STORE__WAL_HDR)
            return RK_ETOOLARGE;
        if (r[i].len == 0)
            return RK_EBADREQ; /* an empty payload is a seal */
    }
    int rc = 0;
    pthread_mutex_lock(&w->mu);
    if (!w->started) {
        rc = RK_EINTERNAL;
        goto unlock;
    }
    /* As many records as fit the current segment per write; a segment is
     * sealed and the next started between writes. */
    for (size_t i = 0; i < n && rc == 0;) {
        if (w->broken) {
            rc = w->broken;
            break;
        }
        if (w->sealed ||
            (w->off > 0 && w->off + STORE__WAL_HDR + r[i].len > w->seg_bytes)) {
            if ((rc = wal_rotate(w)))
                break;
            *out_flags |= STORE__WAL_SEALED;
        }
        size_t k = 1;
        uint64_t end = w->off + STORE__WAL_HDR + r[i].len;
        while (i + k < n &&
               end + STORE__WAL_HDR + r[i + k].len <= w->seg_bytes) {
            end += STORE__WAL_HDR + r[i + k].len;
            k++;
        }
        if (wal_fill_in_way(w, end - w->off)) {
            pthread_cond_wait(&w->cv, &w->mu);
            continue; /* mu was let go: everything is decided again */
        }
        rc = wal_write_recs(w, r + i, k);
        i += k;
    }
    if (w->filled - w->off < wal_ahead(w) / 2 && w->filled < w->seg_bytes)
        *out_flags |= STORE__WAL_FILL;
unlock:
    pthread_mutex_unlock(&w->mu);
    return rc;
}

int store__wal_append(uint64_t *out_lsn,
                      int *out_flags,
                      store__wal *w,
                      const uint8_t *p,
                      size_t len)
{
    struct store__wal_rec r = {p, len, 0};
    int rc = store__wal_append_many(out_flags, w, &r, 1);
    if (rc == 0)
        *out_lsn = r.lsn;
    return rc;
}

int store__wal_prefill(store__wal *w)
{
    int rc = 0, fd = -1;
    uint64_t seq = 0;
    pthread_mutex_lock(&w->mu);
    while (rc == 0 && w->started && !w->broken && w->filling_seq == 0) {
        if (fd >= 0 && w->seq != seq)
            break; /* rotated meanwhile: the new segment's turn next time */
        uint64_t target = w->off + wal_ahead(w);
        if (target > w->seg_bytes)
            target = w->seg_bytes;
        target = wal_up(w, target);
        if (w->filled >= target)
            break;
        if (fd < 0) {
            /* A description of its own, not a dup: Linux reports a
             * writeback error once per open file description, and the
             * sync below must not take it from the commits' sync of
             * w->fd (regression: prefill_sync_hid_log_error). */
            char name[32];
            seq = w->seq;
            wal_name(name, sizeof(name), seq);
            bool direct = atomic_load(&w->direct); /* as the segment is */
            if ((fd = wal_open_seg(w, name, 0, false, &direct)) < 0) {
                rc = fd;
                break;
            }
            if (direct != atomic_load(&w->direct)) { /* refused now */
                rc = -EINVAL;
                break;
            }
        }
        /* Up to a MiB at a time, beyond every record, outside mu: appends
         * and seals that would write past `filled` wait for it
         * (wal_fill_in_way). */
        uint64_t from = w->filled, end = from + ((uint64_t)1 << 20);
        if (end > target)
            end = target;
        w->filling_seq = seq;
        pthread_mutex_unlock(&w->mu);
        uint64_t at = from;
        while (rc == 0 && at < end) {
            size_t n = end - at < sizeof(wal_zeros) ? (size_t)(end - at)
                                                    : sizeof(wal_zeros);
            ssize_t r = pwrite(fd, wal_zeros, n, (off_t)at);
            if (r <= 0)
                rc = r < 0 ? -errno : -EIO;
            else
                at += (uint64_t)r;
        }
        pthread_mutex_lock(&w->mu);
        w->filling_seq = 0;
        if (w->seq == seq && at > w->filled)
            w->filled = at;
        pthread_cond_broadcast(&w->cv);
    }
    pthread_mutex_unlock(&w->mu);
    if (fd >= 0) {
        if (rc == 0 && fdatasync(fd) != 0)
            rc = -errno;
        close(fd);
    }
    return rc;
}

int store__wal_sync(store__wal *w, uint64_t lsn)
{
    int rc = 0;
    pthread_mutex_lock(&w->mu);
    while (w->synced < lsn) {
        if (w->broken) {
            rc = w->broken;
            break;
        }
        /* Wait if a sync in flight covers lsn, or if WAL_SYNCS are in
         * flight already; else start one covering every record so far. */
        if (w->syncing >= lsn || w->nsyncing >= WAL_SYNCS) {
            pthread_cond_wait(&w->cv, &w->mu);
            continue;
        }
        w->nsyncing++;
        uint64_t upto = w->rno;
        w->syncing = upto;
        int fd = w->fd;
        pthread_mutex_unlock(&w->mu);
        int r = fdatasync(fd) == 0 ? 0 : -errno;
        pthread_mutex_lock(&w->mu);
        w->nsyncing--;
        /* fdatasync makes every page written before the call durable;
         * after any failure nothing more counts as durable. */
        if (r == 0 && !w->broken && upto > w->synced)
            w->synced = upto;
        if (r != 0)
            w->broken = r; /* after a failed fsync the pages may be lost */
        pthread_cond_broadcast(&w->cv);
    }
    pthread_mutex_unlock(&w->mu);
    return rc;
}
