/*
 * wire_internal.h - helpers shared by the files of wire/ only: the
 * bounds-checked msgpack reader (mpread.c) that client_msg.c and rpc_msg.c
 * decode untrusted bytes with.
 *
 * Why not msgpack_unpack: it allocates the element count an array header
 * announces before reading one element (five bytes can ask for gigabytes).
 * This reader never allocates, checks every length against the bytes left
 * before using it, and bounds nesting when it skips.
 *
 * A reader is a cursor over a borrowed buffer; every slice it returns points
 * into that buffer. Functions return 0 or one of the WIRE__RD_* codes and
 * record in `why` the first failure (a static string); after a failure the
 * cursor is somewhere inside the value and the caller gives up. Each decoder
 * maps the codes to its own errors.
 */
#ifndef RK_WIRE_INTERNAL_H
#define RK_WIRE_INTERNAL_H

#include <errno.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "common/rk.h"

/* Malformed, over a caller's limit, out of memory (the last only from the
 * callers' own allocations; the reader allocates nothing). */
enum { WIRE__RD_BAD = -1, WIRE__RD_BIG = -2, WIRE__RD_NOMEM = -3 };

/* A reader code as a decoder's error: malformed is `bad` (the decoder's own
 * code: RK_EBADREQ for requests, RK_EPROTO otherwise), over a limit
 * RK_ETOOLARGE, out of memory -ENOMEM; 0 and RK_ codes pass unchanged. */
static inline int wire__rd_code(int rc, int bad)
{
    switch (rc) {
    case WIRE__RD_BAD:
        return bad;
    case WIRE__RD_BIG:
        return RK_ETOOLARGE;
    case WIRE__RD_NOMEM:
        return -ENOMEM;
    default:
        return rc;
    }
}

/* How deep wire__rd_skip() follows nested arrays and maps. */
#define WIRE__RD_DEPTH_MAX 16

/* Kinds of raw value accepted by wire__rd_raw(), and how it checks. */
#define WIRE__RD_STR         1u
#define WIRE__RD_BIN         2u
#define WIRE__RD_LIMIT_FIRST 4u /* see wire__rd_raw() */

struct wire__rd {
    const uint8_t *p, *end;
    const char *why; /* first failure, NULL while none */
};

/* A reader over buf[0..len); buf may be NULL when len is 0. */
void wire__rd_init(struct wire__rd *r, const uint8_t *buf, size_t len);

/* Records why (unless a failure is already recorded) and returns code. */
int wire__rd_fail(struct wire__rd *r, int code, const char *why);

static inline size_t wire__rd_left(const struct wire__rd *r)
{
    return (size_t)(r->end - r->p);
}

/* Any msgpack integer. *neg tells a negative value, whose two's-complement
 * bits *out then holds. */
int wire__rd_int(struct wire__rd *r, uint64_t *out, bool *neg);

/* A non-negative integer of any encoding (a signed encoding of a
 * non-negative value is fine). */
int wire__rd_uint(struct wire__rd *r, uint64_t *out);

/* The same, at most UINT32_MAX / within int32_t. */
int wire__rd_uint32(struct wire__rd *r, uint32_t *out);
int wire__rd_int32(struct wire__rd *r, int32_t *out);

/* A float 32/64 or a non-negative integer. */
int wire__rd_double(struct wire__rd *r, double *out);

int wire__rd_bool(struct wire__rd *r, bool *out);

/* Consumes a nil and returns true if one is next; else reads nothing. */
bool wire__rd_nil(struct wire__rd *r);

/* A whole str or bin of the given kinds (WIRE__RD_STR, WIRE__RD_BIN). A
 * length past the end is WIRE__RD_BAD, then one over max is WIRE__RD_BIG;
 * with WIRE__RD_LIMIT_FIRST a length over max is WIRE__RD_BIG even when the
 * bytes are missing (the internode decoders' rule, docs/internode.md). */
int wire__rd_raw(struct wire__rd *r,
                 unsigned kinds,
                 size_t max,
                 struct rk_slice *out);

/* A str / a str or bin, of at most max bytes. */
int wire__rd_str(struct wire__rd *r, struct rk_slice *out, size_t max);
int wire__rd_bytes(struct wire__rd *r, struct rk_slice *out, size_t max);

/* The header of an array (map false) or map: *out gets the declared count,
 * unchecked. */
int wire__rd_head(struct wire__rd *r, bool map, uint64_t *out);

/* An array or map header whose count is checked against the bytes left
 * (every element takes at least one byte, a map entry two), then against
 * max (WIRE__RD_BIG). */
int wire__rd_container(struct wire__rd *r, bool map, uint32_t *out, size_t max);

/* Skips one value of any type; depth is the nesting of that value, which
 * fails past WIRE__RD_DEPTH_MAX. */
int wire__rd_skip(struct wire__rd *r, int depth);

#endif
