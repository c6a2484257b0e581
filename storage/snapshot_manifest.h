/*
 * snapshot_manifest.h - what a snapshot (`ringkv snapshot`, node/snapshot.c)
 * says about itself: the manifest file beside its range files, and the
 * rules for a snapshot's tag. Pure: no files, no clock.
 *
 * The manifest is key=value text like node.state, one line each:
 *
 *   format=1
 *   tag=TAG
 *   node_name=n1
 *   cluster_name=demo
 *   created_ms=1764892000123     (Unix ms when the copy started)
 *   duration_ms=2310             (how long the copy took)
 *   range=START END BYTES FILE   (one line per range; START and END as 16
 *                                 hex digits: the arc (START, END]; BYTES
 *                                 the size of FILE, an LMDB data file in
 *                                 the snapshot's folder)
 *
 * It is written last (after every file is synced), so a snapshot folder
 * without one is a copy that did not finish.
 */
#ifndef RK_STORAGE_SNAPSHOT_MANIFEST_H
#define RK_STORAGE_SNAPSHOT_MANIFEST_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#define SNAPSHOT_FORMAT   1
#define SNAPSHOT_TAG_MAX  100 /* bytes */
#define SNAPSHOT_FILE_MAX 100 /* bytes of a range file's name */
#define SNAPSHOT_MANIFEST "manifest"
/* a manifest longer than this is not one (1 MiB holds ~10,000 ranges) */
#define SNAPSHOT_MANIFEST_MAX (1u << 20)
#define SNAPSHOT_RANGES_MAX   16384

struct snapshot_range {
    uint64_t start, end; /* the arc (start, end] */
    uint64_t bytes;      /* size of the file */
    char file[SNAPSHOT_FILE_MAX + 1];
};

struct snapshot_manifest {
    char tag[SNAPSHOT_TAG_MAX + 1];
    char node_name[256];
    char cluster_name[256];
    uint64_t created_ms;
    uint64_t duration_ms;
    struct snapshot_range *ranges; /* malloc'd, nranges of them */
    size_t nranges;
};

/* Whether tag[0..len) may name a snapshot: 1..SNAPSHOT_TAG_MAX bytes of
 * letters, digits, '.', '_', '-' and ':', not starting with '.' or '-'. So
 * it is one folder name under snapshots/ (no '/', never "." or ".."), and
 * never taken for a command-line option. */
bool snapshot_tag_valid(const char *tag, size_t len);

/* That rule in words, for the errors that refuse a tag. */
#define SNAPSHOT__STR(x)  #x
#define SNAPSHOT__XSTR(x) SNAPSHOT__STR(x)
#define SNAPSHOT_TAG_RULE                                                   \
    "1 to " SNAPSHOT__XSTR(SNAPSHOT_TAG_MAX) " letters, digits, '.', '_', " \
                                             "'-' or ':', not starting "    \
                                             "with '.' or '-'"

/* The same rule for the name of a range file in a manifest (no '/', not
 * starting with '.', at most SNAPSHOT_FILE_MAX bytes). */
bool snapshot_file_valid(const char *name, size_t len);

/* The default tag for a snapshot taken at Unix ms `now_ms`, in UTC:
 * "20261206T115500.123Z" (sorts by time). out has room for cap bytes. */
void snapshot_tag_default(char *out, size_t cap, uint64_t now_ms);

/* Parse manifest text (len bytes). 0, RK_ECORRUPT (a line without '=', a
 * NUL byte, a bad number, tag or file name, a missing field, more than
 * SNAPSHOT_RANGES_MAX ranges), RK_EVERSION (another format), -ENOMEM.
 * Unknown keys are ignored (a later format may add some). Whether the
 * ranges overlap is the store's to say when they are restored
 * (store_range_adopt).
 * @note out->ranges is malloc'd: snapshot_manifest_clear frees it. */
int snapshot_manifest_parse(struct snapshot_manifest *out,
                            const char *text,
                            size_t len);

/* The text of m (malloc'd, NUL-terminated), or NULL without memory;
 * snapshot_manifest_parse reads it back to the same manifest. */
char *snapshot_manifest_format(const struct snapshot_manifest *m);

/* Bytes of every range file together. */
uint64_t snapshot_manifest_bytes(const struct snapshot_manifest *m);

/* Free what a parse allocated; m is then empty. */
void snapshot_manifest_clear(struct snapshot_manifest *m);

#endif
