/*
 * wal_fixture.h - what the commit log's unit runners share
 * (check_storage_wal.c, check_storage_wal_store.c): a fresh directory under
 * $TMPDIR (or /tmp) per test with the log's directory in it, a store opened
 * there, the log's segment files counted, named and read up to their last
 * record, records written straight into the log (log_keys, with the payload
 * format spelled out here: a golden check of it) as a store that crashed
 * before applying them would leave it, the records a replay hands over, and
 * how a segment is opened (O_DIRECT where the file system takes it).
 * Header-only, as store_fixture.h: each runner is one file.
 */
#ifndef TESTS_UNIT_WAL_FIXTURE_H
#define TESTS_UNIT_WAL_FIXTURE_H

#include <dirent.h>
#include <fcntl.h>
#include <limits.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/types.h>
#include <unistd.h>

#include <check.h>

#include "common/rk.h"
#include "storage/store.h"
#include "storage/wal.h"

static char tmpdir[256];
static char logdir[300];

static inline void mk_tmp(void)
{
    const char *t = getenv("TMPDIR");
    snprintf(tmpdir, sizeof(tmpdir), "%s/rk_wal_XXXXXX", t ? t : "/tmp");
    ck_assert_ptr_nonnull(mkdtemp(tmpdir));
    snprintf(logdir, sizeof(logdir), "%s/commitlog", tmpdir);
}

static inline void rm_tmp(void)
{
    char cmd[300];
    snprintf(cmd, sizeof(cmd), "rm -rf '%s'", tmpdir);
    ck_assert_int_eq(system(cmd), 0);
}

static inline store *open_opts(struct store_opts *o)
{
    o->data_dir = tmpdir;
    store *s = NULL;
    int rc = store_open(&s, o);
    ck_assert_msg(rc == 0, "store_open: %s", rk_strerror(rc));
    return s;
}

/* Segment files in the log directory. */
/* Files in the log directory whose names end in `suffix`. */
static inline int nfiles(const char *suffix)
{
    DIR *d = opendir(logdir);
    ck_assert_ptr_nonnull(d);
    int n = 0;
    struct dirent *e;
    size_t sl = strlen(suffix);
    while ((e = readdir(d)) != NULL) {
        size_t l = strlen(e->d_name);
        if (e->d_name[0] != '.' && l > sl &&
            strcmp(e->d_name + l - sl, suffix) == 0)
            n++;
    }
    closedir(d);
    return n;
}

static inline int nsegs(void)
{
    return nfiles(".log");
}

/* Retired segments kept for reuse (wal.c, WAL_SPARES). */
static inline int nspares(void)
{
    return nfiles(".spare");
}

static inline void seg_path(char *out, size_t n, uint64_t seq)
{
    snprintf(out, n, "%s/%016llx.log", logdir, (unsigned long long)seq);
}

/* Where the records of segment file `p` end: the offset of the first
 * header without the magic (zeros written ahead, the padding of a direct
 * write) or the end of the file. Checksums are not checked. */
static inline off_t log_end(const char *p)
{
    FILE *f = fopen(p, "rb");
    ck_assert_ptr_nonnull(f);
    off_t at = 0;
    uint8_t h[8];
    while (fseeko(f, at, SEEK_SET) == 0 && fread(h, 1, 8, f) == 8 &&
           h[0] == 'R' && h[1] == 'K' && h[2] == 'L' && h[3] == '1')
        at += STORE__WAL_HDR +
              ((off_t)h[4] << 24 | (off_t)h[5] << 16 | (off_t)h[6] << 8 | h[7]);
    fclose(f);
    return at;
}

/* The test's logs are written through the page cache when set
 * (store__wal_buffered), else with O_DIRECT where the file system takes
 * it, as the store does by default. */
static bool buffered_log;

static inline void wal_open_for_test(store__wal **w, uint64_t seg_bytes)
{
    ck_assert_int_eq(store__wal_open(w, logdir, seg_bytes), 0);
    if (buffered_log)
        store__wal_buffered(*w);
}

static inline void key_of(char *k, size_t n, int i)
{
    snprintf(k, n, "wal:%d", i);
}

static inline size_t rec_of(uint8_t *out, size_t cap, int i)
{
    char v[32];
    snprintf(v, sizeof(v), "v%d", i);
    struct store_record r = {100 + (uint64_t)i, 0, 0, RK_SLICE(v, strlen(v))};
    size_t n;
    ck_assert_int_eq(store_record_encode(out, cap, &n, &r), 0);
    return n;
}

static inline void put32(uint8_t *p, size_t v)
{
    p[0] = (uint8_t)(v >> 24);
    p[1] = (uint8_t)(v >> 16);
    p[2] = (uint8_t)(v >> 8);
    p[3] = (uint8_t)v;
}

/* A log payload with the writes of keys first..first+n-1:
 * u32 count | (u32 klen | u32 rlen | key | rec)... */
static inline size_t payload(uint8_t *out, int first, int n)
{
    size_t off = 4;
    put32(out, (size_t)n);
    for (int i = first; i < first + n; i++) {
        char k[32];
        uint8_t r[64];
        key_of(k, sizeof(k), i);
        size_t rl = rec_of(r, sizeof(r), i);
        put32(out + off, strlen(k));
        put32(out + off + 4, rl);
        memcpy(out + off + 8, k, strlen(k));
        memcpy(out + off + 8 + strlen(k), r, rl);
        off += 8 + strlen(k) + rl;
    }
    return off;
}

/* Write `nrec` records of `per` keys each straight into the log (as a
 * store that crashed before applying them would leave it). */
static inline void log_keys(int nrec, int per, uint64_t seg_bytes)
{
    store__wal *w;
    wal_open_for_test(&w, seg_bytes);
    ck_assert_int_eq(store__wal_start(w, true), 0);
    static uint8_t buf[1 << 16];
    uint64_t lsn = 0;
    for (int r = 0; r < nrec; r++) {
        size_t n = payload(buf, r * per, per);
        int sealed;
        ck_assert_int_eq(store__wal_append(&lsn, &sealed, w, buf, n), 0);
    }
    ck_assert_int_eq(store__wal_sync(w, lsn), 0);
    store__wal_free(w);
}

struct seen {
    int n;
    size_t len[64];
    uint8_t first[64];
};

static inline int seen_cb(const uint8_t *p, size_t len, void *arg)
{
    struct seen *s = arg;
    ck_assert_int_lt(s->n, 64);
    s->len[s->n] = len;
    s->first[s->n] = len ? p[0] : 0;
    s->n++;
    return 0;
}

/* The open flags of this process's descriptor of segment `seq`, or -1. */
static inline int seg_fd_flags(uint64_t seq)
{
    char want[400], link[400], path[300];
    seg_path(want, sizeof(want), seq);
    char real_want[PATH_MAX];
    ck_assert_ptr_nonnull(realpath(want, real_want));
    DIR *d = opendir("/proc/self/fd");
    ck_assert_ptr_nonnull(d);
    int flags = -1;
    struct dirent *e;
    while (flags < 0 && (e = readdir(d)) != NULL) {
        if (e->d_name[0] == '.')
            continue;
        snprintf(path, sizeof(path), "/proc/self/fd/%s", e->d_name);
        ssize_t n = readlink(path, link, sizeof(link) - 1);
        if (n <= 0)
            continue;
        link[n] = 0;
        if (strcmp(link, real_want) != 0)
            continue;
        snprintf(path, sizeof(path), "/proc/self/fdinfo/%s", e->d_name);
        FILE *f = fopen(path, "r");
        ck_assert_ptr_nonnull(f);
        char line[128];
        while (fgets(line, sizeof(line), f))
            if (strncmp(line, "flags:", 6) == 0)
                flags = (int)strtol(line + 6, NULL, 8);
        fclose(f);
    }
    closedir(d);
    return flags;
}

/* Whether the file system of the test's directory takes a direct write of
 * one 4 KiB block. */
static inline bool fs_takes_direct(void)
{
    char p[400];
    snprintf(p, sizeof(p), "%s/probe", tmpdir);
    int fd = open(p, O_WRONLY | O_CREAT | O_DIRECT, 0644);
    bool ok = false;
    if (fd >= 0) {
        void *b;
        ck_assert_int_eq(posix_memalign(&b, 4096, 4096), 0);
        memset(b, 0, 4096);
        ok = pwrite(fd, b, 4096, 0) == 4096;
        free(b);
        close(fd);
    }
    unlink(p);
    return ok;
}

#endif
