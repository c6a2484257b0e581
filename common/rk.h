/*
 * rk.h - the few definitions every part of ringkv shares: error codes, the
 * borrowed byte slice, the key partitioner and fixed limits.
 *
 * Errors follow libuv and LMDB: 0 is success, a negative errno is a system
 * error, and ringkv's own conditions sit in a reserved range below
 * RK_ERR_BASE so they never collide with -errno. rk_strerror() names both.
 */
#ifndef RK_H
#define RK_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include <xxhash.h>

/* A borrowed run of bytes. Whoever receives one copies what it keeps. */
struct rk_slice {
    const uint8_t *p;
    size_t len;
};

#define RK_SLICE(ptr, n) ((struct rk_slice){(const uint8_t *)(ptr), (n)})

/* ringkv's own error codes. The first eight, RK_ENOTSUP, RK_ECLOCKSKEW and
 * RK_ENOPERM are the typed errors that cross the client protocols; their names
 * (rk_errname) are part of the protocol. New codes go at the end, below the
 * last one. */
#define RK_ERR_BASE -31000
enum rk_err {
    RK_EUNAVAILABLE = RK_ERR_BASE,    /* too few live replicas for the level */
    RK_ETIMEOUT = RK_ERR_BASE - 1,    /* replicas did not answer in time */
    RK_EOVERLOADED = RK_ERR_BASE - 2, /* admission control shed the request */
    RK_ESTALE = RK_ERR_BASE - 3,      /* RING_STALE: this node's ring is old */
    RK_EBADREQ = RK_ERR_BASE - 4,     /* malformed or invalid request */
    RK_ETOOLARGE = RK_ERR_BASE - 5,   /* key or value over the limit */
    RK_EAUTH = RK_ERR_BASE - 6,       /* missing or wrong password / MAC */
    RK_ENOTFOUND = RK_ERR_BASE - 7,   /* no such key / entry */
    RK_ECORRUPT = RK_ERR_BASE - 8,    /* bytes on disk or wire are damaged */
    RK_EVERSION = RK_ERR_BASE - 9,    /* unknown format version */
    RK_EPROTO = RK_ERR_BASE - 10,     /* protocol violation from a peer */
    RK_EFULL = RK_ERR_BASE - 11,      /* storage full (map or disk) */
    RK_EEXIST = RK_ERR_BASE - 12,     /* already exists */
    RK_ECONFIG = RK_ERR_BASE - 13,    /* invalid configuration */
    RK_ECLOSED = RK_ERR_BASE - 14,    /* connection or object closed */
    RK_EINTERNAL = RK_ERR_BASE - 15,  /* a bug: an invariant failed */
    RK_ENOTSUP = RK_ERR_BASE - 16,    /* NOT_IMPLEMENTED in this version */
    RK_ECLOCKSKEW = RK_ERR_BASE - 17, /* timestamp too far ahead of a clock */
    RK_EOLDRING = RK_ERR_BASE - 18,   /* internode: the sender's ring epoch
                                         is older than the replica's */
    RK_ENOPERM = RK_ERR_BASE - 19,    /* the user's role may not run it */
    RK_ERR_LAST = RK_ERR_BASE - 19
};

/* Human-readable description of any code: 0, -errno or RK_E*. Never NULL;
 * the string is static. */
/* Whether err is a negative errno (a system error: the network's, the
 * disk's), not one of ringkv's own codes nor 0. */
static inline bool rk_is_errno(int err)
{
    return err < 0 && err > -4096;
}
const char *rk_strerror(int err);

/* Whether err says a connection could not be made or was lost (refused,
 * reset, closed, timed out connecting, no route): the one list the client's
 * error kinds and the node's retries share. */
bool rk_err_connection(int err);

/* Short upper-case protocol name ("UNAVAILABLE", "TIMEOUT", ...) of a ringkv
 * code; "ERR" for anything else. Static string. */
const char *rk_errname(int err);

/* The inverse of rk_errname for the protocol names; 0 if unknown. */
int rk_errcode(const char *name);

/* The whole of the file at `path` in *out (malloc'd, NUL-terminated after
 * its *len bytes; the caller frees it). 0, -EFBIG if it is longer than
 * `max` bytes, -ENOMEM, or the -errno of opening or reading it. */
int rk_read_file(const char *path, size_t max, char **out, size_t *len);

/* fsync the directory `dir` (so the names created, renamed or removed in
 * it last). 0 or -errno. Blocks: off the loop thread. */
int rk_fsync_dir(const char *dir);

/* Write the NUL-terminated `text` to dir/name atomically: to
 * dir/name.tmp, synced, renamed over dir/name, then dir synced. A reader
 * sees the old file or the new one whole, after a crash too. 0,
 * -ENAMETOOLONG, or the -errno of a step (the .tmp removed). Blocks: off
 * the loop thread. */
int rk_write_file_atomic(const char *dir, const char *name, const char *text);

/* qsort / bsearch comparator of uint64_t, ascending. */
int rk_u64_cmp(const void *a, const void *b);

/* An admin command's answer: the text fmt makes, malloc'd in *text (the
 * caller frees) with its length in *len, and rc returned; -ENOMEM (with
 * *text NULL, *len 0) when it cannot be made. */
int rk_answer(char **text, size_t *len, int rc, const char *fmt, ...)
    __attribute__((format(printf, 4, 5)));

/* The clocks, held for one input. The work done on the bytes of one read
 * (net/conn.c's read_cb: a client's pipeline, a peer's batch of answers)
 * takes its times from one reading of each clock: the first ask after
 * rk_clock_hold reads it, the others until rk_clock_release get the same.
 * Every byte of that read arrived before the read, so a time taken there
 * is never earlier than any request in it. Outside a hold, every ask reads
 * the clock. Per thread; holds do not nest (a second hold is a no-op, the
 * first release ends it). A request's latency ends with a fresh reading
 * (rk_clock_mono_fresh_ns): one started and answered in the same input
 * would show none. */
void rk_clock_hold(void);
void rk_clock_release(void);
/* CLOCK_MONOTONIC in ns and CLOCK_REALTIME in ms. */
uint64_t rk_clock_mono_ns(void);
uint64_t rk_clock_wall_ms(void);
uint64_t rk_clock_mono_fresh_ns(void);

/* Hard limits, enforced by storage and every protocol decoder. */
#define RK_MAX_KEY   (64u * 1024u)         /* bytes, keys may not be empty */
#define RK_MAX_VALUE (16u * 1024u * 1024u) /* bytes */

/* The partitioner: a key's token on the ring [0, 2^64). XXH3_64bits with no
 * seed; servers and clients share this one definition and its test vectors
 * (tests/unit/check_common.c). */
static inline uint64_t rk_token(const void *key, size_t len)
{
    return XXH3_64bits(key, len);
}

#endif
