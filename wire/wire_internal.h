/*
 * wire_internal.h - what the codec files of wire/ share: one msgpack reader
 * (msgpack_read.c), one msgpack writer (msgpack_write.c), the field
 * tables that drive both (codec.c), and the sealed envelope of the gossip
 * packets (seal.c).
 *
 * The reader: msgpack_unpack allocates the element count an array header
 * announces before reading one element (five bytes can ask for gigabytes).
 * This reader never allocates, checks every length against the bytes left
 * before using it, and bounds nesting when it skips. A reader is a cursor
 * over a borrowed buffer; every slice it returns points into that buffer.
 * Functions return 0 or one of the WIRE__RD_* codes and record in `why` the
 * first failure (a static string); after a failure the cursor is somewhere
 * inside the value and the caller gives up. Each decoder maps the codes to
 * its own errors.
 *
 * The writer appends the shortest standard encoding of each value (the
 * bytes msgpack-c's packer writes, pinned by the golden tests) to a
 * caller's growable buffer; the first failed allocation makes it drop what
 * the message wrote.
 *
 * The field tables: a message is a struct wire__layout, an ordered list of
 * struct wire__field saying where each field lives in the C struct, what
 * msgpack type carries it and what the decoder accepts. One generic encoder
 * and one generic decoder walk the tables, so each message's fields are
 * written down once, in its codec file. Checks across fields (an op's
 * required fields, base <= top) stay code, next to the table.
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
 * non-negative value is fine). The one-byte form is read inline (most
 * fields are small), the others by wire__rd_uint_wide(). */
int wire__rd_uint_wide(struct wire__rd *r, uint64_t *out);

static inline int wire__rd_uint(struct wire__rd *r, uint64_t *out)
{
    if (r->p < r->end && *r->p <= 0x7f) {
        *out = *r->p++;
        return 0;
    }
    return wire__rd_uint_wide(r, out);
}

/* Any integer within int32_t. */
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
int wire__rd_raw_any(struct wire__rd *r,
                     unsigned kinds,
                     size_t max,
                     struct rk_slice *out);

/* wire__rd_raw_any(), with the short forms (a fixstr, a bin 8) that fit
 * read inline; anything else, errors included, goes the long way. */
static inline int wire__rd_raw(struct wire__rd *r,
                               unsigned kinds,
                               size_t max,
                               struct rk_slice *out)
{
    const uint8_t *p = r->p;
    size_t n;
    if (p >= r->end)
        return wire__rd_raw_any(r, kinds, max, out);
    if ((*p & 0xe0) == 0xa0 && (kinds & WIRE__RD_STR)) {
        n = *p & 0x1fu;
        p += 1;
    } else if (*p == 0xc4 && (kinds & WIRE__RD_BIN) && r->end - p >= 2) {
        n = p[1];
        p += 2;
    } else {
        return wire__rd_raw_any(r, kinds, max, out);
    }
    if (n > (size_t)(r->end - p) || n > max)
        return wire__rd_raw_any(r, kinds, max, out);
    out->p = p;
    out->len = n;
    r->p = p + n;
    return 0;
}

/* A str or bin of at most max bytes. */
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

/* ---- the writer (msgpack_write.c) --------------------------------------- */

/* Appends to the caller's buffer (*buf, *len, *cap: a wire_cbuf's or an
 * rpc_buf's fields, or a local one); the buffer grows with realloc. The
 * writer works on its own copy of the three and gives them back at
 * wire__wr_end(), which may be called more than once. */
struct wire__wr {
    uint8_t *p;
    size_t len, cap;
    size_t start; /* the length when the writer began */
    bool fail;    /* an allocation failed: everything after is dropped */
    uint8_t **buf;
    size_t *buf_len, *buf_cap;
};

void wire__wr_init(struct wire__wr *w, uint8_t **buf, size_t *len, size_t *cap);

/* Gives the buffer back to the caller's fields. Returns 0, or -ENOMEM
 * after a failed allocation, having cut the buffer back to where the
 * writer began. */
int wire__wr_end(struct wire__wr *w);

/* Makes room for n more bytes, growing the buffer; false (the writer has
 * failed) if there is none to be had. */
bool wire__wr_grow(struct wire__wr *w, size_t n);

static inline bool wire__wr_room(struct wire__wr *w, size_t n)
{
    return (!w->fail && n <= w->cap - w->len) || wire__wr_grow(w, n);
}

/* One byte, inline: a fixint, nil, true or false. */
static inline void wire__wr_byte(struct wire__wr *w, uint8_t b)
{
    if (wire__wr_room(w, 1))
        w->p[w->len++] = b;
}

void wire__wr_raw(struct wire__wr *w, const void *p, size_t len);
void wire__wr_uint_wide(struct wire__wr *w, uint64_t v);
void wire__wr_int(struct wire__wr *w, int64_t v);

static inline void wire__wr_uint(struct wire__wr *w, uint64_t v)
{
    if (v < 0x80)
        wire__wr_byte(w, (uint8_t)v);
    else
        wire__wr_uint_wide(w, v);
}

static inline void wire__wr_bool(struct wire__wr *w, bool v)
{
    wire__wr_byte(w, v ? 0xc3 : 0xc2);
}

static inline void wire__wr_nil(struct wire__wr *w)
{
    wire__wr_byte(w, 0xc0);
}

void wire__wr_double(struct wire__wr *w, double v);
void wire__wr_str(struct wire__wr *w, const void *p, size_t len);
void wire__wr_bin(struct wire__wr *w, const void *p, size_t len);
void wire__wr_array(struct wire__wr *w, size_t n);
void wire__wr_map(struct wire__wr *w, size_t n);

/* ---- field tables (codec.c) --------------------------------------------- */

/* What a field holds in its struct and how it travels. */
enum wire__kind {
    WIRE__K_UINT,   /* uint64_t; any non-negative integer encoding */
    WIRE__K_UINT32, /* uint32_t */
    WIRE__K_STATUS, /* int32_t, 0 or a negative code; a signed integer */
    WIRE__K_BOOL,   /* bool */
    WIRE__K_SHARE,  /* double in [0, 1] as float 64, read from a float or an
                       integer; negative (or NaN) means unknown: the field
                       is left out, and reads back as -1 */
    WIRE__K_STR,    /* struct rk_slice written as a str */
    WIRE__K_BIN,    /* struct rk_slice written as a bin */
    WIRE__K_FIXED,  /* uint8_t[max], a bin of exactly max bytes */
    WIRE__K_ARRAY,  /* a pointer at off and a size_t count at aux: an array
                       of elements laid out by sub, allocated by the
                       decoder */
    WIRE__K_GROUP,  /* the fields of sub, inline in this array, for the
                       struct at off (positional layouts only) */
};

/* Field flags: a STR or BIN that reads either type; wire__rd_raw()'s
 * WIRE__RD_LIMIT_FIRST; a map field always written that must be read; a
 * map field left out when 0 or empty; a value that may be nil (the bool at
 * aux says it is there); a GROUP read and written only when the bool at aux
 * (in the enclosing struct) equals `when`. */
#define WIRE__F_ANY         0x01u
#define WIRE__F_LIMIT_FIRST 0x02u
#define WIRE__F_REQUIRED    0x04u
#define WIRE__F_OMIT_ZERO   0x08u
#define WIRE__F_NIL         0x10u
#define WIRE__F_WHEN        0x20u

/* How a layout's fields are framed. */
enum wire__shape {
    WIRE__MAP,     /* a map keyed by the fields' small integer keys; unknown
                      keys are skipped, a repeated key is malformed */
    WIRE__TUPLE,   /* an array of exactly the fields, in order (fewer than
                      16 values, as for MESSAGE) */
    WIRE__MESSAGE, /* an array: the uint tag, then the fields in order, then
                      any later fields (skipped when read) */
    WIRE__BARE,    /* the one field alone (array elements) */
};

struct wire__layout;

struct wire__field {
    uint8_t kind; /* enum wire__kind */
    uint8_t key;  /* MAP: the field's key */
    uint8_t flags;
    uint8_t when; /* F_WHEN: the value the bool at aux must have */
    uint32_t has; /* MAP: the bit of the struct's has word that says the
                     field is there (set by the decoder); 0: always */
    size_t off;   /* where the value lives in the struct */
    size_t aux;   /* ARRAY: the count; F_NIL, F_WHEN: the bool */
    uint64_t min; /* least value (integers) or length (STR, BIN) */
    uint64_t max; /* greatest value or length or element count; 0: none
                     beyond the type's own (FIXED: the exact length) */
    int err;      /* the error of a value outside [min, max] (an RK_E*
                     code, e.g. RK_EVERSION); 0: malformed */
    const struct wire__layout *sub; /* ARRAY elements, GROUP fields */
};

struct wire__layout {
    uint8_t shape; /* enum wire__shape */
    uint64_t tag;  /* MESSAGE: the first element */
    size_t size;   /* sizeof the struct (ARRAY elements) */
    size_t has;    /* MAP: offset of the uint32_t has word, or WIRE__NO_HAS */
    const struct wire__field *fields;
    size_t n;
    /* Called after an element or group is read, for what holds across its
     * fields; returns 0 or WIRE__RD_BAD (via wire__rd_fail). NULL: none. */
    int (*check)(struct wire__rd *r, const void *base);
};

#define WIRE__NO_HAS SIZE_MAX

/* Shorthand for the tables: a field of kind k (WIRE__K_k) held by member m
 * of struct type T, then any other members of struct wire__field; a group
 * (taken only when the bool member `flag` is v, for WIRE__WHEN); an array
 * of at most `most` elements of layout l with its count in member n; a
 * layout's fields. */
#define WIRE__FIELD(k, T, m, ...)                               \
    {                                                           \
        .kind = WIRE__K_##k, .off = offsetof(T, m), __VA_ARGS__ \
    }
#define WIRE__GROUP(T, m, l)                                     \
    {                                                            \
        .kind = WIRE__K_GROUP, .off = offsetof(T, m), .sub = (l) \
    }
#define WIRE__WHEN(T, m, flag, v, l)                                         \
    {                                                                        \
        .kind = WIRE__K_GROUP, .off = offsetof(T, m), .flags = WIRE__F_WHEN, \
        .aux = offsetof(T, flag), .when = (v), .sub = (l)                    \
    }
#define WIRE__ARRAY(T, m, n, most, l)                                        \
    {                                                                        \
        .kind = WIRE__K_ARRAY, .off = offsetof(T, m), .aux = offsetof(T, n), \
        .max = (most), .sub = (l)                                            \
    }
#define WIRE__FIELDS(a) .fields = (a), .n = sizeof(a) / sizeof((a)[0])

/* A layout of shape s (WIRE__s) for struct type T with the fields of array
 * a and no has word, then any other members of struct wire__layout. */
#define WIRE__LAYOUT(s, T, a, ...)                                  \
    {                                                               \
        .shape = WIRE__##s, .size = sizeof(T), .has = WIRE__NO_HAS, \
        WIRE__FIELDS(a), __VA_ARGS__                                \
    }

/* Appends the value of layout l for the struct at base. */
void wire__encode(struct wire__wr *w,
                  const struct wire__layout *l,
                  const void *base);

/* Reads one value of layout l into the struct at base (zeroed by the
 * caller); depth is its nesting (0 for a whole message). Arrays are
 * calloc()ed and stored as soon as they are: after a failure, free what was
 * read with wire__free(). */
int wire__decode(struct wire__rd *r,
                 const struct wire__layout *l,
                 void *base,
                 int depth);

/* Frees the arrays a decode allocated in the struct at base (recursively)
 * and sets their pointers to NULL. */
void wire__free(const struct wire__layout *l, void *base);

/* ---- the gossip packets' envelope (seal.c) ------------------------------ */

#define WIRE__SEAL_HEADER 4 /* 3-byte magic + format version */

struct wire_key;

/* Starts a packet in the caller's buffer (*buf NULL, *len and *cap 0):
 * writes the header, magic then version, for the body to follow. */
void wire__seal_begin(struct wire__wr *w,
                      uint8_t **buf,
                      size_t *len,
                      size_t *cap,
                      const char magic[3],
                      uint8_t version);

/* w has written a packet (header and body) into the caller's buffer: ends
 * it, appends the MAC over it and hands the packet over (*out malloc'd,
 * *out_len bytes). Returns 0, RK_ETOOLARGE (over max bytes with the MAC)
 * or -ENOMEM; on failure the buffer is freed. */
int wire__seal(uint8_t **out,
               size_t *out_len,
               struct wire__wr *w,
               const struct wire_key *key,
               size_t max);

/* Check a packet's size (at most max), magic, MAC and version; *body gets
 * the msgpack between header and MAC, borrowed from pkt. Returns 0,
 * RK_EPROTO (not such a packet), RK_EAUTH (bad MAC), RK_EVERSION. */
int wire__unseal(struct rk_slice *body,
                 const uint8_t *pkt,
                 size_t len,
                 const char magic[3],
                 uint8_t version,
                 const struct wire_key *key,
                 size_t max);

#endif
