/*
 * msgpack_read.c - the one msgpack reader of wire/ (wire_internal.h).
 *
 * One cursor for every decoder of untrusted bytes (gossip, client and RPC
 * messages, through codec.c's field tables, and the RPC type peek):
 * it reads exactly the values asked for, checks every length and count
 * against the bytes left before using it, allocates nothing and bounds the
 * nesting of what it skips. Each failure records a short reason.
 */
#include <string.h>

#include "wire/wire_internal.h"

/* ---- cursor ------------------------------------------------------------- */

void wire__rd_init(struct wire__rd *r, const uint8_t *buf, size_t len)
{
    r->p = buf;
    r->end = len ? buf + len : buf;
    r->why = NULL;
}

int wire__rd_fail(struct wire__rd *r, int code, const char *why)
{
    if (r->why == NULL)
        r->why = why;
    return code;
}

static int rd_be(struct wire__rd *r, unsigned n, uint64_t *out)
{
    if (wire__rd_left(r) < n)
        return wire__rd_fail(r, WIRE__RD_BAD, "truncated");
    uint64_t v = 0;
    for (unsigned i = 0; i < n; i++)
        v = v << 8 | r->p[i];
    r->p += n;
    *out = v;
    return 0;
}

static int rd_byte(struct wire__rd *r, uint8_t *out)
{
    if (r->p >= r->end)
        return wire__rd_fail(r, WIRE__RD_BAD, "truncated");
    *out = *r->p++;
    return 0;
}

/* ---- scalars ------------------------------------------------------------ */

/* The size of the big-endian body of an int type byte 0xcc..0xd3. */
static unsigned rd_int_size(uint8_t t)
{
    return 1u << ((t - 0xcc) & 3);
}

int wire__rd_int(struct wire__rd *r, uint64_t *out, bool *neg)
{
    uint8_t t;
    uint64_t v;
    int rc;
    if ((rc = rd_byte(r, &t)) != 0)
        return rc;
    if (t <= 0x7f || t >= 0xe0) {
        *out = (uint64_t)(int64_t)(int8_t)t;
        *neg = t >= 0xe0;
        return 0;
    }
    if (t < 0xcc || t > 0xd3)
        return wire__rd_fail(r, WIRE__RD_BAD, "expected an integer");
    unsigned bits = 8 * rd_int_size(t);
    if ((rc = rd_be(r, bits / 8, &v)) != 0)
        return rc;
    *neg = t >= 0xd0 && v >> (bits - 1) & 1;
    if (*neg && bits < 64)
        v |= ~UINT64_C(0) << bits; /* sign-extend */
    *out = v;
    return 0;
}

int wire__rd_uint_wide(struct wire__rd *r, uint64_t *out)
{
    uint8_t t;
    uint64_t v;
    int rc;
    if ((rc = rd_byte(r, &t)) != 0)
        return rc;
    if (t <= 0x7f) {
        *out = t;
        return 0;
    }
    if (t < 0xcc || t > 0xd3)
        return wire__rd_fail(r, WIRE__RD_BAD, "expected an unsigned integer");
    unsigned n = rd_int_size(t);
    if ((rc = rd_be(r, n, &v)) != 0)
        return rc;
    if (t >= 0xd0 && v >> (n * 8 - 1) & 1)
        return wire__rd_fail(r, WIRE__RD_BAD, "negative integer");
    *out = v;
    return 0;
}

int wire__rd_int32(struct wire__rd *r, int32_t *out)
{
    uint64_t u;
    bool neg;
    int rc = wire__rd_int(r, &u, &neg);
    if (rc != 0)
        return rc;
    int64_t v = (int64_t)u;
    if (neg ? v < INT32_MIN : u > INT32_MAX)
        return wire__rd_fail(r, WIRE__RD_BAD, "integer out of range");
    *out = (int32_t)v;
    return 0;
}

static bool rd_is_uint(uint8_t t)
{
    return t <= 0x7f || (t >= 0xcc && t <= 0xd3);
}

int wire__rd_double(struct wire__rd *r, double *out)
{
    uint8_t t;
    uint64_t v;
    int rc;
    if (r->p < r->end && rd_is_uint(*r->p)) {
        if ((rc = wire__rd_uint(r, &v)) != 0)
            return rc;
        *out = (double)v;
        return 0;
    }
    if ((rc = rd_byte(r, &t)) != 0)
        return rc;
    if (t == 0xca) {
        if ((rc = rd_be(r, 4, &v)) != 0)
            return rc;
        uint32_t u = (uint32_t)v;
        float f;
        memcpy(&f, &u, sizeof(f));
        *out = f;
        return 0;
    }
    if (t == 0xcb) {
        if ((rc = rd_be(r, 8, &v)) != 0)
            return rc;
        memcpy(out, &v, sizeof(*out));
        return 0;
    }
    return wire__rd_fail(r, WIRE__RD_BAD, "expected a number");
}

int wire__rd_bool(struct wire__rd *r, bool *out)
{
    uint8_t t;
    int rc;
    if ((rc = rd_byte(r, &t)) != 0)
        return rc;
    if (t != 0xc2 && t != 0xc3)
        return wire__rd_fail(r, WIRE__RD_BAD, "expected a boolean");
    *out = t == 0xc3;
    return 0;
}

bool wire__rd_nil(struct wire__rd *r)
{
    if (r->p < r->end && *r->p == 0xc0) {
        r->p++;
        return true;
    }
    return false;
}

/* ---- str and bin -------------------------------------------------------- */

/* The header of a str or bin of the given kinds: its declared length. */
static int rd_raw_len(struct wire__rd *r, unsigned kinds, uint64_t *out)
{
    uint8_t t;
    int rc;
    if ((rc = rd_byte(r, &t)) != 0)
        return rc;
    bool is_str = (t >= 0xa0 && t <= 0xbf) || (t >= 0xd9 && t <= 0xdb);
    bool is_bin = t >= 0xc4 && t <= 0xc6;
    if (!((is_str && (kinds & WIRE__RD_STR)) ||
          (is_bin && (kinds & WIRE__RD_BIN))))
        return wire__rd_fail(r, WIRE__RD_BAD,
                             kinds & WIRE__RD_BIN ? "expected bytes"
                                                  : "expected a string");
    if (t >= 0xa0 && t <= 0xbf) {
        *out = t & 0x1f;
        return 0;
    }
    return rd_be(r, 1u << (is_str ? t - 0xd9 : t - 0xc4), out);
}

int wire__rd_raw_any(struct wire__rd *r,
                     unsigned kinds,
                     size_t max,
                     struct rk_slice *out)
{
    uint64_t n;
    int rc;
    if ((rc = rd_raw_len(r, kinds, &n)) != 0)
        return rc;
    if ((kinds & WIRE__RD_LIMIT_FIRST) && n > max)
        return wire__rd_fail(r, WIRE__RD_BIG, "string or bytes over the limit");
    if (n > wire__rd_left(r))
        return wire__rd_fail(r, WIRE__RD_BAD, "truncated string");
    if (n > max)
        return wire__rd_fail(r, WIRE__RD_BIG, "string or bytes over the limit");
    out->p = r->p;
    out->len = (size_t)n;
    r->p += n;
    return 0;
}

int wire__rd_bytes(struct wire__rd *r, struct rk_slice *out, size_t max)
{
    return wire__rd_raw(r, WIRE__RD_STR | WIRE__RD_BIN, max, out);
}

/* ---- arrays, maps, skipping --------------------------------------------- */

/* wire__rd_head(), inlined in this file. */
static inline int rd_head(struct wire__rd *r, bool map, uint64_t *out)
{
    uint8_t t;
    int rc;
    if ((rc = rd_byte(r, &t)) != 0)
        return rc;
    if ((t & 0xf0) == (map ? 0x80 : 0x90)) {
        *out = t & 0x0f;
        return 0;
    }
    if (t == (map ? 0xde : 0xdc))
        return rd_be(r, 2, out);
    if (t == (map ? 0xdf : 0xdd))
        return rd_be(r, 4, out);
    return wire__rd_fail(r, WIRE__RD_BAD,
                         map ? "expected a map" : "expected an array");
}

int wire__rd_head(struct wire__rd *r, bool map, uint64_t *out)
{
    return rd_head(r, map, out);
}

int wire__rd_container(struct wire__rd *r, bool map, uint32_t *out, size_t max)
{
    uint64_t n;
    int rc;
    if ((rc = rd_head(r, map, &n)) != 0)
        return rc;
    if (n > wire__rd_left(r) / (map ? 2 : 1))
        return wire__rd_fail(r, WIRE__RD_BAD, "count exceeds the bytes left");
    if (n > max)
        return wire__rd_fail(r, WIRE__RD_BIG, "too many elements");
    *out = (uint32_t)n;
    return 0;
}

/* Bytes after the type byte of a fixed-size value (ints, floats, fixext:
 * type byte + data); 0 for a type byte that is not one. */
static unsigned rd_fixed_body(uint8_t t)
{
    switch (t) {
    case 0xcc:
    case 0xd0:
        return 1;
    case 0xcd:
    case 0xd1:
    case 0xd4:
        return 2;
    case 0xd5:
        return 3;
    case 0xca:
    case 0xce:
    case 0xd2:
        return 4;
    case 0xd6:
        return 5;
    case 0xcb:
    case 0xcf:
    case 0xd3:
        return 8;
    case 0xd7:
        return 9;
    case 0xd8:
        return 17;
    default:
        return 0;
    }
}

int wire__rd_skip(struct wire__rd *r, int depth)
{
    uint8_t t;
    uint64_t n;
    int rc;
    if (depth > WIRE__RD_DEPTH_MAX)
        return wire__rd_fail(r, WIRE__RD_BAD, "nesting too deep");
    if (r->p >= r->end)
        return wire__rd_fail(r, WIRE__RD_BAD, "truncated");
    t = *r->p;
    if (t <= 0x7f || t >= 0xe0 || t == 0xc0 || t == 0xc2 || t == 0xc3) {
        r->p++;
        return 0;
    }
    if ((t >= 0xa0 && t <= 0xbf) || (t >= 0xd9 && t <= 0xdb) ||
        (t >= 0xc4 && t <= 0xc6)) {
        struct rk_slice s;
        return wire__rd_bytes(r, &s, SIZE_MAX);
    }
    if ((t >= 0x80 && t <= 0x9f) || (t >= 0xdc && t <= 0xdf)) {
        bool map = (t >= 0x80 && t <= 0x8f) || t == 0xde || t == 0xdf;
        uint32_t cnt;
        if ((rc = wire__rd_container(r, map, &cnt, UINT32_MAX)) != 0)
            return rc;
        uint64_t items = (uint64_t)cnt * (map ? 2 : 1);
        for (uint64_t i = 0; i < items; i++)
            if ((rc = wire__rd_skip(r, depth + 1)) != 0)
                return rc;
        return 0;
    }
    r->p++;
    if (t >= 0xc7 && t <= 0xc9) { /* ext 8/16/32: length, type byte, data */
        if ((rc = rd_be(r, 1u << (t - 0xc7), &n)) != 0)
            return rc;
        n += 1;
    } else if ((n = rd_fixed_body(t)) == 0) { /* 0xc1 is never used */
        return wire__rd_fail(r, WIRE__RD_BAD, "invalid msgpack type byte");
    }
    if (n > wire__rd_left(r))
        return wire__rd_fail(r, WIRE__RD_BAD, "truncated");
    r->p += n;
    return 0;
}
