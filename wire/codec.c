/*
 * codec.c - the one encoder and the one decoder of wire/'s field tables
 * (struct wire__layout, wire_internal.h).
 *
 * Each codec file describes its messages as tables; these functions walk a
 * table to write a struct as msgpack (through the writer) or to read
 * untrusted msgpack into a struct (through the reader). The decoder checks
 * what a table states (types, lengths, integer ranges, element counts,
 * required and repeated map keys) in the order the fields arrive, and
 * allocates an array only after its count was checked against the bytes
 * left and the field's limit. Each step on one field is an inline function
 * of codec_steps.h, which the hot messages' unrolled codecs share.
 */
#include <stdlib.h>
#include <string.h>

#include "wire/codec_steps.h"

/* The number of array elements the fields of l always take (groups
 * flattened, those with a condition left out). Walked only on a failed
 * decode, to report a short array before a bad field as it comes first. */
size_t wire__width(const struct wire__layout *l)
{
    size_t n = 0;
    for (size_t i = 0; i < l->n; i++) {
        const struct wire__field *f = &l->fields[i];
        if (f->kind != WIRE__K_GROUP)
            n++;
        else if (!(f->flags & WIRE__F_WHEN))
            n += wire__width(f->sub);
    }
    return n;
}

/* ---- encoding ------------------------------------------------------------ */

/* Writes the fields of l in order, groups inline; returns how many values
 * that was. */
static size_t encode_fields(struct wire__wr *w,
                            const struct wire__layout *l,
                            const void *base)
{
    size_t n = 0;
    for (size_t i = 0; i < l->n; i++) {
        const struct wire__field *f = &l->fields[i];
        if (f->kind != WIRE__K_GROUP) {
            wire__encode_one(w, f, base);
            n++;
        } else if (wire__taken(f, base)) {
            n += encode_fields(w, f->sub, WIRE__CAT(base, f->off, char));
        }
    }
    return n;
}

/* The array of a TUPLE or a MESSAGE (tag first). */
static void encode_array(struct wire__wr *w,
                         const struct wire__layout *l,
                         const void *base,
                         bool tag)
{
    size_t at = wire__array_begin(w, l, tag);
    wire__array_end(w, at, (tag ? 1 : 0) + encode_fields(w, l, base));
}

void wire__encode(struct wire__wr *w,
                  const struct wire__layout *l,
                  const void *base)
{
    switch (l->shape) {
    case WIRE__MAP: {
        uint64_t there = 0; /* a map has at most 64 fields (its keys) */
        size_t n = 0;
        assert(l->n <= 64);
        for (size_t i = 0; i < l->n; i++) {
            if (wire__present(l, &l->fields[i], base)) {
                there |= UINT64_C(1) << i;
                n++;
            }
        }
        wire__wr_map(w, n);
        for (size_t i = 0; i < l->n; i++) {
            if (!(there & UINT64_C(1) << i))
                continue;
            wire__wr_uint(w, l->fields[i].key);
            wire__encode_one(w, &l->fields[i], base);
        }
        break;
    }
    case WIRE__MESSAGE:
        encode_array(w, l, base, true);
        break;
    case WIRE__TUPLE:
        encode_array(w, l, base, false);
        break;
    case WIRE__BARE:
        encode_fields(w, l, base);
        break;
    }
}

/* ---- decoding ------------------------------------------------------------ */

static int decode_array(struct wire__rd *r,
                        const struct wire__field *f,
                        void *base,
                        int depth)
{
    uint32_t n;
    int rc =
        wire__rd_container(r, false, &n, f->max ? (size_t)f->max : UINT32_MAX);
    if (rc != 0 || n == 0)
        return rc;
    char *items = calloc(n, f->sub->size);
    if (items == NULL)
        return wire__rd_fail(r, WIRE__RD_NOMEM, "out of memory");
    memcpy(WIRE__AT(base, f->off, char), &items, sizeof(items));
    *WIRE__AT(base, f->aux, size_t) = n;
    for (uint32_t i = 0; i < n && rc == 0; i++)
        rc = wire__decode(r, f->sub, items + (size_t)i * f->sub->size, depth);
    return rc;
}

int wire__decode_rare(struct wire__rd *r,
                      const struct wire__field *f,
                      void *base,
                      int depth)
{
    int32_t i32;
    int rc;
    switch (f->kind) {
    case WIRE__K_STATUS:
        if ((rc = wire__rd_int32(r, &i32)) != 0)
            return rc;
        if (i32 > 0)
            return wire__rd_fail(r, WIRE__RD_BAD, "a positive status");
        *WIRE__AT(base, f->off, int32_t) = i32;
        return 0;
    case WIRE__K_SHARE: {
        double *d = WIRE__AT(base, f->off, double);
        if ((rc = wire__rd_double(r, d)) == 0 && !(*d >= 0 && *d <= 1.000001))
            rc = wire__rd_fail(r, WIRE__RD_BAD, "ownership out of [0, 1]");
        return rc;
    }
    case WIRE__K_FIXED: {
        struct rk_slice s;
        rc = wire__rd_raw(r, WIRE__RD_BIN, SIZE_MAX, &s);
        if (rc == 0 && s.len != f->max)
            rc = wire__rd_fail(r, WIRE__RD_BAD, "bytes of the wrong length");
        if (rc == 0)
            memcpy(WIRE__AT(base, f->off, uint8_t), s.p, s.len);
        return rc;
    }
    case WIRE__K_ARRAY:
        return decode_array(r, f, base, depth);
    default:
        return wire__rd_fail(r, WIRE__RD_BAD, "bad field table");
    }
}

/* The fields of l, in order, into the struct at base; groups are read
 * inline. *left counts the elements the enclosing array still holds. */
static int decode_fields(struct wire__rd *r,
                         const struct wire__layout *l,
                         void *base,
                         int depth,
                         uint64_t *left)
{
    int rc = 0;
    for (size_t i = 0; i < l->n && rc == 0; i++) {
        const struct wire__field *f = &l->fields[i];
        if (f->kind == WIRE__K_GROUP) {
            if (!wire__taken(f, base))
                continue;
            void *sub = WIRE__AT(base, f->off, char);
            rc = decode_fields(r, f->sub, sub, depth, left);
            if (rc == 0 && f->sub->check != NULL)
                rc = f->sub->check(r, sub);
            continue;
        }
        rc = wire__decode_elem(r, f, base, depth, left);
    }
    return rc;
}

static const struct wire__field *field_of(const struct wire__layout *l,
                                          uint32_t key)
{
    for (size_t i = 0; i < l->n; i++)
        if (l->fields[i].key == key)
            return &l->fields[i];
    return NULL;
}

static int decode_map(struct wire__rd *r,
                      const struct wire__layout *l,
                      void *base,
                      int depth)
{
    uint32_t n, key;
    uint64_t seen = 0;
    int rc = wire__rd_container(r, true, &n, UINT32_MAX);
    for (size_t i = 0; i < l->n; i++)
        wire__map_init(&l->fields[i], base);
    for (uint32_t i = 0; i < n && rc == 0; i++) {
        if ((rc = wire__decode_key(r, &key)) != 0)
            break;
        const struct wire__field *f =
            key == UINT32_MAX ? NULL : field_of(l, key);
        if (f == NULL)
            rc = wire__rd_skip(r, depth + 1);
        else
            rc = wire__map_field(r, l, f, base, depth, &seen);
    }
    for (size_t i = 0; i < l->n && rc == 0; i++)
        rc = wire__map_required(r, &l->fields[i], seen);
    return rc;
}

int wire__decode(struct wire__rd *r,
                 const struct wire__layout *l,
                 void *base,
                 int depth)
{
    uint32_t n;
    uint64_t left;
    int rc;
    switch (l->shape) {
    case WIRE__MAP:
        rc = decode_map(r, l, base, depth);
        break;
    case WIRE__BARE: /* one value, as if an array of one */
        left = 1;
        rc = decode_fields(r, l, base, depth, &left);
        break;
    case WIRE__TUPLE:
        if ((rc = wire__rd_container(r, false, &n, UINT32_MAX)) != 0)
            return rc;
        left = n;
        rc = decode_fields(r, l, base, depth + 1, &left);
        if (rc == 0 && left != 0)
            rc = wire__rd_fail(r, WIRE__RD_BAD, "too many elements");
        if (rc != 0 && n != wire__width(l)) /* the count is read first */
            return wire__rd_fail(r, WIRE__RD_BAD, "wrong number of elements");
        break;
    case WIRE__MESSAGE:
        if ((rc = wire__rd_container(r, false, &n, UINT32_MAX)) != 0)
            return rc;
        left = n;
        rc = wire__message_tag(r, l, &left);
        if (rc == 0)
            rc = decode_fields(r, l, base, depth + 1, &left);
        return wire__message_end(r, l, base, depth, rc, n, left);
    default:
        return wire__rd_fail(r, WIRE__RD_BAD, "bad field table");
    }
    if (rc == 0 && l->check != NULL)
        rc = l->check(r, base);
    return rc;
}

/* ---- freeing ------------------------------------------------------------- */

static bool owns_arrays(const struct wire__layout *l)
{
    for (size_t i = 0; i < l->n; i++) {
        const struct wire__field *f = &l->fields[i];
        if (f->kind == WIRE__K_ARRAY ||
            (f->kind == WIRE__K_GROUP && owns_arrays(f->sub)))
            return true;
    }
    return false;
}

void wire__free(const struct wire__layout *l, void *base)
{
    for (size_t i = 0; i < l->n; i++) {
        const struct wire__field *f = &l->fields[i];
        if (f->kind == WIRE__K_GROUP) {
            wire__free(f->sub, WIRE__AT(base, f->off, char));
            continue;
        }
        if (f->kind != WIRE__K_ARRAY)
            continue;
        wire__free_array(f, base);
    }
}

void wire__free_array(const struct wire__field *f, void *base)
{
    char *items = wire__array_at(base, f->off), *none = NULL;
    if (items != NULL && owns_arrays(f->sub)) {
        size_t n = *WIRE__AT(base, f->aux, size_t);
        for (size_t j = 0; j < n; j++)
            wire__free(f->sub, items + j * f->sub->size);
    }
    free(items);
    memcpy(WIRE__AT(base, f->off, char), &none, sizeof(none));
}
