/*
 * codec_steps.h - the steps of wire/'s table walker (codec.c), inline, and
 * the X-macros that unroll a message's field list into straight-line code
 * made of the same steps.
 *
 * A field list is an X-macro: LIST(X) calls X once per field, in order,
 * with one of
 *   X(FIELD, k, T, m, ...)           a field, as WIRE__FIELD(k, T, m, ...)
 *   X(GROUP, off, name)              the fields of list `name` inline, for
 *                                    the struct at offset off
 *   X(WHEN, off, flag, v, name)      the same, taken only when the bool at
 *                                    offset flag equals v
 * WIRE__LIST_FIELDS(name, LIST) expands it into the descriptor array
 * name_fields[], the table the walker reads (and the single source of what
 * the message is). WIRE__LIST_CODE(name, LIST) expands the same list into
 * decode_name_fields() and encode_name_fields(): one call of the walker's
 * step per field, each with the constant address of its descriptor, so the
 * compiler folds the descriptor away (kind, flags, offsets and limits
 * become constants) and no loop, switch or table load is left.
 * WIRE__MESSAGE_CODE(name) adds decode_name() and encode_name() for the
 * MESSAGE layout name_layout; WIRE__MAP_CODE(name, LIST) decode_name(),
 * encode_name() and free_name() for a MAP layout. The steps are the
 * walker's own (always inlined), so the unrolled code accepts, rejects and
 * reports exactly what the walker does; check_wire_unrolled.c holds the two
 * to that on sample messages, their truncations and mutations.
 *
 * Why unroll rather than walk: a walker pays per field for the loop, the
 * switch on the kind and the loads of flags, offset and limits, about as
 * much as the msgpack itself. The hot messages (replica write, read and
 * their answers, client requests and responses) are decoded once per
 * request on every replica, so they take the unrolled form; the others
 * keep the walker.
 */
#ifndef RK_WIRE_CODEC_STEPS_H
#define RK_WIRE_CODEC_STEPS_H

#include <assert.h>
#include <math.h>
#include <string.h>

#include "wire/wire_internal.h"

#define WIRE__INLINE static inline __attribute__((always_inline))

/* ---- out of line, in codec.c -------------------------------------------- */

/* The kinds wire__decode_one() leaves out of line: rarer, and heavier. */
int wire__decode_rare(struct wire__rd *r,
                      const struct wire__field *f,
                      void *base,
                      int depth);

/* The number of array elements the fields of l always take (groups
 * flattened, those with a condition left out). Walked only on a failed
 * decode, to report a short array before a bad field as it comes first. */
size_t wire__width(const struct wire__layout *l);

/* Frees the array of an ARRAY field f of the struct at base (its elements'
 * arrays first) and sets its pointer to NULL. */
void wire__free_array(const struct wire__field *f, void *base);

#define WIRE__AT(base, off, type) ((type *)(void *)((char *)(base) + (off)))
#define WIRE__CAT(base, off, type) \
    ((const type *)(const void *)((const char *)(base) + (off)))

/* An ARRAY field's pointer (a struct's `T *items`), copied out with memcpy
 * so that no lvalue of another pointer type reads it. */
WIRE__INLINE char *wire__array_at(const void *base, size_t off)
{
    char *p;
    memcpy(&p, WIRE__CAT(base, off, char), sizeof(p));
    return p;
}

WIRE__INLINE bool wire__flag_at(const void *base, size_t off)
{
    return *WIRE__CAT(base, off, bool);
}

/* Whether a GROUP with F_WHEN is wire__taken for the struct at base. */
WIRE__INLINE bool wire__taken(const struct wire__field *f, const void *base)
{
    return !(f->flags & WIRE__F_WHEN) ||
           wire__flag_at(base, f->aux) == (f->when != 0);
}

/* Whether a MAP field is written for the struct at base. */
WIRE__INLINE bool wire__present(const struct wire__layout *l,
                                const struct wire__field *f,
                                const void *base)
{
    if (f->flags & WIRE__F_REQUIRED)
        return true;
    if (f->has != 0 && l->has != WIRE__NO_HAS)
        return (*WIRE__CAT(base, l->has, uint32_t) & f->has) != 0;
    if (f->kind == WIRE__K_SHARE) {
        double v = *WIRE__CAT(base, f->off, double);
        return v >= 0 && !isnan(v);
    }
    if (f->flags & WIRE__F_OMIT_ZERO) {
        switch (f->kind) {
        case WIRE__K_UINT:
            return *WIRE__CAT(base, f->off, uint64_t) != 0;
        case WIRE__K_UINT32:
            return *WIRE__CAT(base, f->off, uint32_t) != 0;
        case WIRE__K_BOOL:
            return wire__flag_at(base, f->off);
        case WIRE__K_STR:
        case WIRE__K_BIN:
            return WIRE__CAT(base, f->off, struct rk_slice)->len != 0;
        default:
            break;
        }
    }
    return true;
}

/* Writes one value that is not a group. Inline: it runs once per field of
 * every message. */
WIRE__INLINE void wire__encode_one(struct wire__wr *w,
                                   const struct wire__field *f,
                                   const void *base)
{
    const struct rk_slice *s = WIRE__CAT(base, f->off, struct rk_slice);
    if ((f->flags & WIRE__F_NIL) && !wire__flag_at(base, f->aux)) {
        wire__wr_nil(w);
        return;
    }
    switch (f->kind) {
    case WIRE__K_UINT:
        wire__wr_uint(w, *WIRE__CAT(base, f->off, uint64_t));
        break;
    case WIRE__K_UINT32:
        wire__wr_uint(w, *WIRE__CAT(base, f->off, uint32_t));
        break;
    case WIRE__K_STATUS:
        wire__wr_int(w, *WIRE__CAT(base, f->off, int32_t));
        break;
    case WIRE__K_BOOL:
        wire__wr_bool(w, wire__flag_at(base, f->off));
        break;
    case WIRE__K_SHARE:
        wire__wr_double(w, *WIRE__CAT(base, f->off, double));
        break;
    case WIRE__K_STR:
        wire__wr_str(w, s->p, s->len);
        break;
    case WIRE__K_BIN:
        wire__wr_bin(w, s->p, s->len);
        break;
    case WIRE__K_FIXED:
        wire__wr_bin(w, WIRE__CAT(base, f->off, uint8_t), (size_t)f->max);
        break;
    case WIRE__K_ARRAY: {
        const char *items = wire__array_at(base, f->off);
        size_t n = *WIRE__CAT(base, f->aux, size_t);
        wire__wr_array(w, n);
        for (size_t i = 0; i < n; i++)
            wire__encode(w, f->sub, items + i * f->sub->size);
        break;
    }
    case WIRE__K_GROUP: /* encode_fields() writes groups */
        break;
    }
}

/* A value outside [min, max]: the field's own error, else malformed. */
WIRE__INLINE int wire__out_of_range(struct wire__rd *r,
                                    const struct wire__field *f)
{
    if (f->err != 0)
        return f->err;
    return wire__rd_fail(r, WIRE__RD_BAD, "integer out of range");
}

WIRE__INLINE int wire__decode_uint(struct wire__rd *r,
                                   const struct wire__field *f,
                                   uint64_t type_max,
                                   uint64_t *out)
{
    uint64_t v, max = f->max && f->max < type_max ? f->max : type_max;
    int rc = wire__rd_uint(r, &v);
    if (rc != 0)
        return rc;
    if (v > type_max) /* the reader's own words for a type's bound */
        return wire__rd_fail(r, WIRE__RD_BAD, "integer out of range");
    if (v < f->min || v > max)
        return wire__out_of_range(r, f);
    *out = v;
    return 0;
}

WIRE__INLINE int wire__decode_raw(struct wire__rd *r,
                                  const struct wire__field *f,
                                  struct rk_slice *out)
{
    unsigned kinds = f->kind == WIRE__K_STR ? WIRE__RD_STR : WIRE__RD_BIN;
    if (f->flags & WIRE__F_ANY)
        kinds = WIRE__RD_STR | WIRE__RD_BIN;
    if (f->flags & WIRE__F_LIMIT_FIRST)
        kinds |= WIRE__RD_LIMIT_FIRST;
    int rc = wire__rd_raw(r, kinds, f->max ? (size_t)f->max : SIZE_MAX, out);
    if (rc == 0 && out->len < f->min)
        rc = wire__rd_fail(r, WIRE__RD_BAD, "empty string or bytes");
    return rc;
}

/* One value that is not a group into the struct at base. Inline: it runs
 * once per field of every message. */
WIRE__INLINE int wire__decode_one(struct wire__rd *r,
                                  const struct wire__field *f,
                                  void *base,
                                  int depth)
{
    uint64_t v = 0;
    int rc;
    if (f->flags & WIRE__F_NIL) {
        bool there = !wire__rd_nil(r);
        *WIRE__AT(base, f->aux, bool) = there;
        if (!there)
            return 0;
    }
    switch (f->kind) {
    case WIRE__K_UINT:
        return wire__decode_uint(r, f, UINT64_MAX,
                                 WIRE__AT(base, f->off, uint64_t));
    case WIRE__K_UINT32:
        if ((rc = wire__decode_uint(r, f, UINT32_MAX, &v)) == 0)
            *WIRE__AT(base, f->off, uint32_t) = (uint32_t)v;
        return rc;
    case WIRE__K_BOOL:
        return wire__rd_bool(r, WIRE__AT(base, f->off, bool));
    case WIRE__K_STATUS: /* mostly 0, a fixint read inline */
        if (r->p < r->end && *r->p == 0) {
            r->p++;
            *WIRE__AT(base, f->off, int32_t) = 0;
            return 0;
        }
        return wire__decode_rare(r, f, base, depth);
    case WIRE__K_STR:
    case WIRE__K_BIN:
        return wire__decode_raw(r, f, WIRE__AT(base, f->off, struct rk_slice));
    default:
        return wire__decode_rare(r, f, base, depth);
    }
}

/* ---- steps of a positional layout ---------------------------------------- */

/* One element of an array the enclosing layout reads; *left counts the
 * elements it still holds. */
WIRE__INLINE int wire__decode_elem(struct wire__rd *r,
                                   const struct wire__field *f,
                                   void *base,
                                   int depth,
                                   uint64_t *left)
{
    if (*left == 0)
        return wire__rd_fail(r, WIRE__RD_BAD, "too few elements");
    --*left;
    return wire__decode_one(r, f, base, depth);
}

/* The type tag that opens a MESSAGE, after its array header of *left
 * elements (counted down). */
WIRE__INLINE int wire__message_tag(struct wire__rd *r,
                                   const struct wire__layout *l,
                                   uint64_t *left)
{
    uint64_t tag;
    int rc = 0;
    if ((*left)-- == 0 || (rc = wire__rd_uint(r, &tag)) != 0 || tag != l->tag)
        rc = wire__rd_fail(r, WIRE__RD_BAD, "another message type");
    return rc;
}

/* Ends a MESSAGE of n elements whose fields returned rc: later fields are
 * skipped; a failure in an array too short for the fields is reported as
 * that (the count is read first); then the layout's own check. */
WIRE__INLINE int wire__message_end(struct wire__rd *r,
                                   const struct wire__layout *l,
                                   void *base,
                                   int depth,
                                   int rc,
                                   uint32_t n,
                                   uint64_t left)
{
    for (; rc == 0 && left > 0; left--)
        rc = wire__rd_skip(r, depth + 1);
    if (rc != 0 && n < 1 + wire__width(l))
        return wire__rd_fail(r, WIRE__RD_BAD, "too few elements");
    if (rc == 0 && l->check != NULL)
        rc = l->check(r, base);
    return rc;
}

/* The array of a TUPLE or a MESSAGE (tag first): its one-byte header goes
 * first (returns where) and is set by wire__array_end() once the values
 * are counted (a table's arrays hold fewer than 16 values, so a fixarray is
 * their shortest encoding). */
WIRE__INLINE size_t wire__array_begin(struct wire__wr *w,
                                      const struct wire__layout *l,
                                      bool tag)
{
    size_t at = w->len;
    wire__wr_array(w, 0);
    if (tag)
        wire__wr_uint(w, l->tag);
    return at;
}

WIRE__INLINE void wire__array_end(struct wire__wr *w, size_t at, size_t n)
{
    assert(n < 16);
    if (!w->fail)
        w->p[at] = (uint8_t)(0x90 | n);
}

/* ---- steps of a map layout ---------------------------------------------- */

/* Before a map is read: a SHARE field is unknown (-1) until read. */
WIRE__INLINE void wire__map_init(const struct wire__field *f, void *base)
{
    if (f->kind == WIRE__K_SHARE)
        *WIRE__AT(base, f->off, double) = -1;
}

/* Field keys are small unsigned ints; anything else is read as a value and
 * skipped. Sets *out to the key, or to UINT32_MAX for a skipped one. */
WIRE__INLINE int wire__decode_key(struct wire__rd *r, uint32_t *out)
{
    if (r->p < r->end && *r->p <= 0x7f) {
        *out = *r->p++;
        return 0;
    }
    *out = UINT32_MAX;
    return wire__rd_skip(r, 1);
}

/* The value of field f of map layout l, whose key came; *seen has a bit
 * per key already read (a repeated key is malformed). */
WIRE__INLINE int wire__map_field(struct wire__rd *r,
                                 const struct wire__layout *l,
                                 const struct wire__field *f,
                                 void *base,
                                 int depth,
                                 uint64_t *seen)
{
    if (*seen & UINT64_C(1) << f->key)
        return wire__rd_fail(r, WIRE__RD_BAD, "duplicate field");
    *seen |= UINT64_C(1) << f->key;
    int rc = wire__decode_one(r, f, base, depth + 1);
    if (rc == 0 && f->has != 0 && l->has != WIRE__NO_HAS)
        *WIRE__AT(base, l->has, uint32_t) |= f->has;
    return rc;
}

/* After a map is read: a required field that did not come. */
WIRE__INLINE int wire__map_required(struct wire__rd *r,
                                    const struct wire__field *f,
                                    uint64_t seen)
{
    if ((f->flags & WIRE__F_REQUIRED) && !(seen & UINT64_C(1) << f->key))
        return wire__rd_fail(r, WIRE__RD_BAD, "a required field is missing");
    return 0;
}

/* Writes field f of map layout l, key first, if it is there. */
WIRE__INLINE void wire__map_write(struct wire__wr *w,
                                  const struct wire__layout *l,
                                  const struct wire__field *f,
                                  const void *base)
{
    if (wire__present(l, f, base)) {
        wire__wr_uint(w, f->key);
        wire__encode_one(w, f, base);
    }
}

/* ---- X-macros: a field list as a table and as code ----------------------- */

#define WIRE__DESC(tag, ...)           WIRE__DESC_##tag(__VA_ARGS__)
#define WIRE__DESC_FIELD(k, T, m, ...) WIRE__FIELD(k, T, m, __VA_ARGS__),
#define WIRE__DESC_GROUP(at, name) \
    {.kind = WIRE__K_GROUP, .off = (at), .sub = &name##_layout},
#define WIRE__DESC_WHEN(at, flag, v, name) \
    {.kind = WIRE__K_GROUP,                \
     .off = (at),                          \
     .flags = WIRE__F_WHEN,                \
     .aux = (flag),                        \
     .when = (v),                          \
     .sub = &name##_layout},

/* One step each; f walks the descriptor array alongside. */
#define WIRE__READ(tag, ...) WIRE__READ_##tag(__VA_ARGS__)
#define WIRE__READ_FIELD(...)                            \
    if (rc == 0)                                         \
        rc = wire__decode_elem(r, f, base, depth, left); \
    f++;
#define WIRE__READ_GROUP(at, name)                                          \
    if (rc == 0 && wire__taken(f, base)) {                                  \
        rc = decode_##name##_fields(r, WIRE__AT(base, f->off, char), depth, \
                                    left);                                  \
        if (rc == 0 && name##_layout.check != NULL)                         \
            rc = name##_layout.check(r, WIRE__AT(base, f->off, char));      \
    }                                                                       \
    f++;
#define WIRE__READ_WHEN(at, flag, v, name) WIRE__READ_GROUP(at, name)

#define WIRE__WRITE(tag, ...) WIRE__WRITE_##tag(__VA_ARGS__)
#define WIRE__WRITE_FIELD(...)    \
    wire__encode_one(w, f, base); \
    n++;                          \
    f++;
#define WIRE__WRITE_GROUP(at, name)                                    \
    if (wire__taken(f, base))                                          \
        n += encode_##name##_fields(w, WIRE__CAT(base, f->off, char)); \
    f++;
#define WIRE__WRITE_WHEN(at, flag, v, name) WIRE__WRITE_GROUP(at, name)

/* The descriptor array name_fields[] of a field list. */
#define WIRE__LIST_FIELDS(name, LIST) \
    static const struct wire__field name##_fields[] = {LIST(WIRE__DESC)}

/* decode_name_fields(r, base, depth, left) and encode_name_fields(w, base)
 * (returns the number of values written) for the list of name_fields[];
 * the layouts of the list's groups come first. */
#define WIRE__LIST_CODE(name, LIST)                                         \
    WIRE__INLINE int decode_##name##_fields(struct wire__rd *r, void *base, \
                                            int depth, uint64_t *left)      \
    {                                                                       \
        const struct wire__field *f = name##_fields;                        \
        int rc = 0;                                                         \
        (void)depth;                                                        \
        LIST(WIRE__READ)                                                    \
        return rc;                                                          \
    }                                                                       \
    WIRE__INLINE size_t encode_##name##_fields(struct wire__wr *w,          \
                                               const void *base)            \
    {                                                                       \
        const struct wire__field *f = name##_fields;                        \
        size_t n = 0;                                                       \
        LIST(WIRE__WRITE)                                                   \
        return n;                                                           \
    }

/* decode_name(r, base, depth) and encode_name(w, base): wire__decode() and
 * wire__encode() of the MESSAGE layout name_layout, unrolled. */
#define WIRE__MESSAGE_CODE(name)                                               \
    static int decode_##name(struct wire__rd *r, void *base, int depth)        \
    {                                                                          \
        uint32_t n;                                                            \
        uint64_t left;                                                         \
        int rc = wire__rd_container(r, false, &n, UINT32_MAX);                 \
        if (rc != 0)                                                           \
            return rc;                                                         \
        left = n;                                                              \
        rc = wire__message_tag(r, &name##_layout, &left);                      \
        if (rc == 0)                                                           \
            rc = decode_##name##_fields(r, base, depth + 1, &left);            \
        return wire__message_end(r, &name##_layout, base, depth, rc, n, left); \
    }                                                                          \
    static void encode_##name(struct wire__wr *w, const void *base)            \
    {                                                                          \
        size_t at = wire__array_begin(w, &name##_layout, true);                \
        wire__array_end(w, at, 1 + encode_##name##_fields(w, base));           \
    }

/* Steps of a map's list (FIELD entries only); f walks the array. */
#define WIRE__MAP_INIT(tag, ...) wire__map_init(f++, base);
#define WIRE__MAP_READ(tag, ...)                           \
    if (key == f->key) {                                   \
        rc = wire__map_field(r, l, f, base, depth, &seen); \
        continue;                                          \
    }                                                      \
    f++;
#define WIRE__MAP_REQUIRED(tag, ...)         \
    if (rc == 0)                             \
        rc = wire__map_required(r, f, seen); \
    f++;
#define WIRE__MAP_COUNT(tag, ...) n += wire__present(l, f++, base);
#define WIRE__MAP_WRITE(tag, ...) wire__map_write(w, l, f++, base);
#define WIRE__MAP_FREE(tag, ...)                                          \
    if (f->kind == WIRE__K_ARRAY && wire__array_at(base, f->off) != NULL) \
        wire__free_array(f, base);                                        \
    f++;

/* decode_name(r, base, depth), encode_name(w, base) and free_name(base):
 * wire__decode(), wire__encode() and wire__free() of the MAP layout
 * name_layout, whose fields are the list LIST, unrolled. A key is matched
 * by a chain of comparisons with constants, in the list's order. */
#define WIRE__MAP_CODE(name, LIST)                                      \
    static int decode_##name(struct wire__rd *r, void *base, int depth) \
    {                                                                   \
        const struct wire__layout *l = &name##_layout;                  \
        const struct wire__field *f = name##_fields;                    \
        uint32_t n, key;                                                \
        uint64_t seen = 0;                                              \
        int rc = wire__rd_container(r, true, &n, UINT32_MAX);           \
        LIST(WIRE__MAP_INIT)                                            \
        for (uint32_t i = 0; i < n && rc == 0; i++) {                   \
            if ((rc = wire__decode_key(r, &key)) != 0)                  \
                break;                                                  \
            f = name##_fields;                                          \
            LIST(WIRE__MAP_READ)                                        \
            rc = wire__rd_skip(r, depth + 1);                           \
        }                                                               \
        f = name##_fields;                                              \
        LIST(WIRE__MAP_REQUIRED)                                        \
        return rc;                                                      \
    }                                                                   \
    static void encode_##name(struct wire__wr *w, const void *base)     \
    {                                                                   \
        const struct wire__layout *l = &name##_layout;                  \
        const struct wire__field *f = name##_fields;                    \
        size_t n = 0;                                                   \
        LIST(WIRE__MAP_COUNT)                                           \
        wire__wr_map(w, n);                                             \
        f = name##_fields;                                              \
        LIST(WIRE__MAP_WRITE)                                           \
    }                                                                   \
    static void free_##name(void *base)                                 \
    {                                                                   \
        const struct wire__field *f = name##_fields;                    \
        LIST(WIRE__MAP_FREE)                                            \
    }

/* A message with unrolled code, for the test that holds it to the
 * walker: its layout, its struct's size and the two functions. */
struct wire__unrolled {
    const char *name;
    const struct wire__layout *layout;
    size_t size;
    int (*decode)(struct wire__rd *r, void *base, int depth);
    void (*encode)(struct wire__wr *w, const void *base);
};

#define WIRE__UNROLLED(name, T)                                        \
    {                                                                  \
#name, &name##_layout, sizeof(T), decode_##name, encode_##name \
    }

/* The unrolled messages of rpc_msg.c and of client_msg.c: sets *out to an
 * array and returns its length. */
size_t rpc__unrolled(const struct wire__unrolled **out);
size_t wire__client_unrolled(const struct wire__unrolled **out);

#endif
