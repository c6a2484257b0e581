/*
 * fuzz_wal.c - the commit log's segment reader and payload decoder, through
 * store_open's recovery.
 *
 * The first input byte picks a mode. Mode 0 writes the rest as a raw segment
 * file (record framing: magic, lengths, sequence and record numbers,
 * checksums). Otherwise the rest is a list of payloads (2-byte big-endian
 * length each) that are sealed into valid records, so the payload decoder
 * behind the checksum is reached too; bit 1 of the mode byte breaks the
 * record numbering and bit 2 appends a seal. Then the store is opened
 * (replaying the log into a range covering the whole ring) and closed.
 * Whatever the bytes, open must return 0 or an error, never crash or leak.
 */
#include <dirent.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <xxhash.h>

#include "storage/store.h"
#include "storage/wal.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static char dir[256], seg[320];

static void put32(uint8_t *p, uint32_t v)
{
    p[0] = v >> 24;
    p[1] = v >> 16;
    p[2] = v >> 8;
    p[3] = v;
}

static void put64(uint8_t *p, uint64_t v)
{
    put32(p, v >> 32);
    put32(p + 4, (uint32_t)v);
}

static void cleanup(void)
{
    char cmd[300];
    snprintf(cmd, sizeof(cmd), "rm -rf '%s'", dir);
    if (system(cmd) != 0)
        fprintf(stderr, "fuzz_wal: could not remove %s\n", dir);
}

static int setup(void)
{
    const char *t = getenv("TMPDIR");
    snprintf(dir, sizeof(dir), "%s/rk_fuzz_wal_XXXXXX", t ? t : "/tmp");
    if (mkdtemp(dir) == NULL)
        return -1;
    atexit(cleanup);
    struct store_opts o = STORE_OPTS_INIT;
    o.data_dir = dir;
    store *s = NULL;
    if (store_open(&s, &o) != 0 ||
        store_range_create(s, (struct store_range){0, 0}) != 0)
        return -1;
    store_free(s);
    snprintf(seg, sizeof(seg), "%s/commitlog/%016x.log", dir, 1u);
    return 0;
}

/* Remove whatever segments the last open left (without a shell per input,
 * which would dominate the fuzzer's time). */
static void clear_log(void)
{
    char path[600];
    snprintf(path, sizeof(path), "%s/commitlog", dir);
    DIR *d = opendir(path);
    if (d == NULL)
        return;
    struct dirent *e;
    while ((e = readdir(d)) != NULL) {
        if (e->d_name[0] == '.')
            continue;
        snprintf(path, sizeof(path), "%s/commitlog/%s", dir, e->d_name);
        if (unlink(path) != 0)
            abort();
    }
    closedir(d);
}

/* One record with a valid checksum (see storage/wal.c). */
static void put_record(FILE *f, uint64_t recno, const uint8_t *p, size_t len)
{
    uint8_t h[STORE__WAL_HDR];
    put32(h, UINT32_C(0x524b4c31));
    put32(h + 4, (uint32_t)len);
    put64(h + 8, 1);
    put64(h + 16, recno);
    put64(h + 24, XXH3_64bits_withSeed(p, len, XXH3_64bits(h, 24)));
    fwrite(h, 1, sizeof(h), f);
    if (len != 0)
        fwrite(p, 1, len, f);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    static int ready;
    if (!ready) {
        if (setup() != 0)
            abort();
        ready = 1;
    }
    if (size == 0)
        return 0;
    clear_log();
    FILE *f = fopen(seg, "wb");
    if (f == NULL)
        abort();
    uint8_t mode = data[0];
    data++;
    size--;
    if (mode == 0) {
        fwrite(data, 1, size, f);
    } else {
        uint64_t recno = 1;
        while (size >= 2) {
            size_t len = (size_t)data[0] << 8 | data[1];
            data += 2;
            size -= 2;
            if (len > size)
                len = size;
            put_record(f, (mode & 2) ? recno * 3 : recno, data, len);
            recno++;
            data += len;
            size -= len;
        }
        if (mode & 4)
            put_record(f, recno, NULL, 0);
    }
    fclose(f);
    struct store_opts o = STORE_OPTS_INIT;
    o.data_dir = dir;
    store *s = NULL;
    if (store_open(&s, &o) == 0)
        store_free(s);
    return 0;
}
