/*
 * msgpack_write.c - the msgpack writer of wire/ (wire_internal.h) and the
 * exact encoded sizes of wire.h.
 *
 * Every value is written in its shortest standard form, the bytes
 * msgpack-c's packer writes (the golden tests of tests/unit/check_wire_*.c
 * pin them): positive integers as fixint/uint 8/16/32/64, negative ones as
 * fixint/int 8/16/32/64, str as fixstr/str 8/16/32, bin as bin 8/16/32,
 * containers as fix/16/32, doubles as float 64. Our own writer rather than
 * msgpack-c's packer: the size functions the gossip sender splits packets
 * with are computed by the same header code that writes the bytes, so they
 * cannot drift apart, and the product no longer links msgpack-c at all.
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "wire/wire.h"
#include "wire/wire_internal.h"

/* ---- buffer ------------------------------------------------------------- */

void wire__wr_init(struct wire__wr *w, uint8_t **buf, size_t *len, size_t *cap)
{
    w->p = *buf;
    w->len = w->start = *len;
    w->cap = *cap;
    w->fail = false;
    w->buf = buf;
    w->buf_len = len;
    w->buf_cap = cap;
}

int wire__wr_end(struct wire__wr *w)
{
    *w->buf = w->p;
    *w->buf_cap = w->cap;
    *w->buf_len = w->fail ? w->start : w->len; /* drop a partial message */
    return w->fail ? -ENOMEM : 0;
}

bool wire__wr_grow(struct wire__wr *w, size_t n)
{
    if (w->fail || n > SIZE_MAX - w->len) {
        w->fail = true;
        return false;
    }
    size_t want = w->cap ? w->cap : 256;
    while (want < w->len + n)
        want = want > SIZE_MAX / 2 ? w->len + n : want * 2;
    uint8_t *p = realloc(w->p, want);
    if (p == NULL) {
        w->fail = true;
        return false;
    }
    w->p = p;
    w->cap = want;
    return true;
}

void wire__wr_raw(struct wire__wr *w, const void *p, size_t len)
{
    if (len == 0 ||
        !wire__wr_room(w, len)) /* p may be NULL for an empty value */
        return;
    memcpy(w->p + w->len, p, len);
    w->len += len;
}

/* ---- headers ------------------------------------------------------------ */

/* type byte t then v in n big-endian bytes; returns 1 + n. */
static size_t head_be(uint8_t *out, uint8_t t, uint64_t v, unsigned n)
{
    out[0] = t;
    for (unsigned i = 0; i < n; i++)
        out[1 + i] = (uint8_t)(v >> (8 * (n - 1 - i)));
    return 1 + n;
}

static size_t head_uint(uint8_t out[9], uint64_t v)
{
    if (v < 0x80) {
        out[0] = (uint8_t)v;
        return 1;
    }
    if (v <= UINT8_MAX)
        return head_be(out, 0xcc, v, 1);
    if (v <= UINT16_MAX)
        return head_be(out, 0xcd, v, 2);
    if (v <= UINT32_MAX)
        return head_be(out, 0xce, v, 4);
    return head_be(out, 0xcf, v, 8);
}

static size_t head_int(uint8_t out[9], int64_t v)
{
    if (v >= 0)
        return head_uint(out, (uint64_t)v);
    if (v >= -32) {
        out[0] = (uint8_t)v;
        return 1;
    }
    if (v >= INT8_MIN)
        return head_be(out, 0xd0, (uint64_t)v, 1);
    if (v >= INT16_MIN)
        return head_be(out, 0xd1, (uint64_t)v, 2);
    if (v >= INT32_MIN)
        return head_be(out, 0xd2, (uint64_t)v, 4);
    return head_be(out, 0xd3, (uint64_t)v, 8);
}

/* str: fix (0xa0, < 32), 8, 16, 32 from 0xd9; bin: 8, 16, 32 from 0xc4. */
static size_t head_raw(uint8_t out[5], bool str, size_t len)
{
    if (str && len < 32) {
        out[0] = (uint8_t)(0xa0 | len);
        return 1;
    }
    uint8_t t = str ? 0xd9 : 0xc4;
    if (len <= UINT8_MAX)
        return head_be(out, t, len, 1);
    if (len <= UINT16_MAX)
        return head_be(out, (uint8_t)(t + 1), len, 2);
    return head_be(out, (uint8_t)(t + 2), len, 4);
}

/* array: fix 0x90, 16 0xdc, 32 0xdd; map: fix 0x80, 16 0xde, 32 0xdf. */
static size_t head_container(uint8_t out[5], bool map, size_t n)
{
    if (n < 16) {
        out[0] = (uint8_t)((map ? 0x80 : 0x90) | n);
        return 1;
    }
    if (n <= UINT16_MAX)
        return head_be(out, map ? 0xde : 0xdc, n, 2);
    return head_be(out, map ? 0xdf : 0xdd, n, 4);
}

/* Headers are written in place: room for the longest (9 bytes), then the
 * one the value needs. */
#define HEAD_MAX 9

/* ---- values ------------------------------------------------------------- */

void wire__wr_uint_wide(struct wire__wr *w, uint64_t v)
{
    if (wire__wr_room(w, HEAD_MAX))
        w->len += head_uint(w->p + w->len, v);
}

void wire__wr_int(struct wire__wr *w, int64_t v)
{
    if (wire__wr_room(w, HEAD_MAX))
        w->len += head_int(w->p + w->len, v);
}

void wire__wr_double(struct wire__wr *w, double v)
{
    uint64_t bits;
    memcpy(&bits, &v, sizeof(bits));
    if (wire__wr_room(w, HEAD_MAX))
        w->len += head_be(w->p + w->len, 0xcb, bits, 8);
}

void wire__wr_str(struct wire__wr *w, const void *p, size_t len)
{
    if (wire__wr_room(w, HEAD_MAX))
        w->len += head_raw(w->p + w->len, true, len);
    wire__wr_raw(w, p, len);
}

void wire__wr_bin(struct wire__wr *w, const void *p, size_t len)
{
    if (wire__wr_room(w, HEAD_MAX))
        w->len += head_raw(w->p + w->len, false, len);
    wire__wr_raw(w, p, len);
}

void wire__wr_array(struct wire__wr *w, size_t n)
{
    if (wire__wr_room(w, HEAD_MAX))
        w->len += head_container(w->p + w->len, false, n);
}

void wire__wr_map(struct wire__wr *w, size_t n)
{
    if (wire__wr_room(w, HEAD_MAX))
        w->len += head_container(w->p + w->len, true, n);
}

/* ---- sizes (wire.h) ----------------------------------------------------- */

size_t wire_size_uint(uint64_t v)
{
    uint8_t h[9];
    return head_uint(h, v);
}

size_t wire_size_str(size_t len)
{
    uint8_t h[5];
    return head_raw(h, true, len) + len;
}

size_t wire_size_bin(size_t len)
{
    uint8_t h[5];
    return head_raw(h, false, len) + len;
}

size_t wire_size_array(size_t n)
{
    uint8_t h[5];
    return head_container(h, false, n);
}
