/*
 * wire.c - the cluster MAC (libsodium) and bounds-checked msgpack reading.
 *
 * See wire.h for the why. The validator below is the only hand-written
 * parsing: it never builds anything, it only proves that every length in the
 * buffer is honest before msgpack-c allocates on its word.
 */
#include "wire/wire.h"

#include <errno.h>
#include <string.h>

#include <sodium.h>

/* ---- keys and MACs ------------------------------------------------------ */

static const char wire_key_label[] = "ringkv cluster MAC key v1";

int wire_key_derive(struct wire_key *out, const uint8_t *secret, size_t len)
{
    if (secret == NULL || len == 0)
        return RK_ECONFIG;
    if (sodium_init() < 0)
        return RK_EINTERNAL;
    crypto_generichash_state st;
    /* Domain label first, then the secret: the same secret used elsewhere
     * (another protocol's key) yields an unrelated key here. */
    if (crypto_generichash_init(&st, NULL, 0, WIRE_KEY_BYTES) != 0 ||
        crypto_generichash_update(&st, (const uint8_t *)wire_key_label,
                                  sizeof(wire_key_label)) != 0 ||
        crypto_generichash_update(&st, secret, len) != 0 ||
        crypto_generichash_final(&st, out->bytes, WIRE_KEY_BYTES) != 0) {
        sodium_memzero(&st, sizeof(st));
        return RK_EINTERNAL;
    }
    sodium_memzero(&st, sizeof(st));
    return 0;
}

void wire_key_wipe(struct wire_key *key)
{
    if (key != NULL)
        sodium_memzero(key->bytes, sizeof(key->bytes));
}

void wire_mac_compute(uint8_t out[WIRE_MAC_BYTES],
                      const struct wire_key *key,
                      const uint8_t *msg,
                      size_t len)
{
    crypto_auth(out, msg, len, key->bytes);
}

int wire_mac_verify(const uint8_t mac[WIRE_MAC_BYTES],
                    const struct wire_key *key,
                    const uint8_t *msg,
                    size_t len)
{
    return crypto_auth_verify(mac, msg, len, key->bytes) == 0 ? 0 : RK_EAUTH;
}

/* ---- msgpack validation ------------------------------------------------- */

static uint64_t be_read(const uint8_t *p, size_t n)
{
    uint64_t v = 0;
    for (size_t i = 0; i < n; i++)
        v = (v << 8) | p[i];
    return v;
}

/* Reads the header of the item at buf[*pos]; sets *skip to the bytes of its
 * body that follow the header and *children to the number of nested items. */
static int item_header(const uint8_t *buf,
                       size_t len,
                       size_t *pos,
                       uint64_t *skip,
                       uint64_t *children)
{
    uint8_t b = buf[(*pos)++];
    size_t lenbytes = 0;
    *skip = 0;
    *children = 0;
    if (b <= 0x7f || b >= 0xe0 || b == 0xc0 || b == 0xc2 || b == 0xc3)
        return 0;
    if (b >= 0x80 && b <= 0x8f) {
        *children = 2u * (b & 0x0fu);
        return 0;
    }
    if (b >= 0x90 && b <= 0x9f) {
        *children = b & 0x0fu;
        return 0;
    }
    if (b >= 0xa0 && b <= 0xbf) {
        *skip = b & 0x1fu;
        return 0;
    }
    switch (b) {
    case 0xc4: /* bin 8/16/32 */
    case 0xd9: /* str 8/16/32 */
        lenbytes = 1;
        break;
    case 0xc5:
    case 0xda:
    case 0xdc: /* array16 */
    case 0xde: /* map16 */
        lenbytes = 2;
        break;
    case 0xc6:
    case 0xdb:
    case 0xdd: /* array32 */
    case 0xdf: /* map32 */
        lenbytes = 4;
        break;
    case 0xca:
        *skip = 4;
        return 0;
    case 0xcb:
        *skip = 8;
        return 0;
    case 0xcc:
    case 0xd0:
        *skip = 1;
        return 0;
    case 0xcd:
    case 0xd1:
        *skip = 2;
        return 0;
    case 0xce:
    case 0xd2:
        *skip = 4;
        return 0;
    case 0xcf:
    case 0xd3:
        *skip = 8;
        return 0;
    default: /* 0xc1 reserved, ext and fixext: not used by ringkv */
        return RK_EPROTO;
    }
    if (len - *pos < lenbytes)
        return RK_EPROTO;
    uint64_t n = be_read(buf + *pos, lenbytes);
    *pos += lenbytes;
    if (b == 0xdc || b == 0xdd)
        *children = n;
    else if (b == 0xde || b == 0xdf)
        *children = 2 * n;
    else
        *skip = n;
    return 0;
}

int wire_msgpack_check(const uint8_t *buf, size_t len, unsigned max_depth)
{
    uint64_t remaining[WIRE_MAX_DEPTH + 1];
    int depth = 0;
    size_t pos = 0;
    if (buf == NULL || len == 0 || max_depth > WIRE_MAX_DEPTH)
        return RK_EPROTO;
    remaining[0] = 1;
    while (depth >= 0) {
        if (remaining[depth] == 0) {
            depth--;
            continue;
        }
        remaining[depth]--;
        if (pos >= len)
            return RK_EPROTO;
        uint64_t skip, children;
        int rc = item_header(buf, len, &pos, &skip, &children);
        if (rc != 0)
            return rc;
        if (skip > len - pos)
            return RK_EPROTO;
        pos += (size_t)skip;
        if (children > 0) {
            /* Each child takes at least one byte. */
            if (children > len - pos || (unsigned)depth + 1 > max_depth)
                return RK_EPROTO;
            remaining[++depth] = children;
        }
    }
    return pos == len ? 0 : RK_EPROTO;
}

int wire_unpack(msgpack_unpacked *out, const uint8_t *buf, size_t len)
{
    int rc = wire_msgpack_check(buf, len, WIRE_MAX_DEPTH);
    if (rc != 0)
        return rc;
    size_t off = 0;
    msgpack_unpack_return ur =
        msgpack_unpack_next(out, (const char *)buf, len, &off);
    if (ur == MSGPACK_UNPACK_NOMEM_ERROR)
        return -ENOMEM;
    if (ur != MSGPACK_UNPACK_SUCCESS || off != len)
        return RK_EPROTO;
    return 0;
}

/* ---- object readers ----------------------------------------------------- */

int wire_obj_u64(uint64_t *out, const msgpack_object *o)
{
    if (o->type != MSGPACK_OBJECT_POSITIVE_INTEGER)
        return RK_EPROTO;
    *out = o->via.u64;
    return 0;
}

int wire_obj_str(struct rk_slice *out, const msgpack_object *o, size_t max)
{
    if (o->type != MSGPACK_OBJECT_STR || o->via.str.size > max)
        return RK_EPROTO;
    *out = RK_SLICE(o->via.str.ptr, o->via.str.size);
    return 0;
}

int wire_obj_bin(struct rk_slice *out, const msgpack_object *o, size_t max)
{
    if (o->type != MSGPACK_OBJECT_BIN || o->via.bin.size > max)
        return RK_EPROTO;
    *out = RK_SLICE(o->via.bin.ptr, o->via.bin.size);
    return 0;
}

int wire_obj_array(const msgpack_object **out_items,
                   size_t *out_n,
                   const msgpack_object *o,
                   size_t want,
                   size_t max)
{
    if (o->type != MSGPACK_OBJECT_ARRAY)
        return RK_EPROTO;
    size_t n = o->via.array.size;
    if (want != 0 ? n != want : n > max)
        return RK_EPROTO;
    *out_items = o->via.array.ptr;
    *out_n = n;
    return 0;
}

/* ---- sizes (msgpack-c always packs the shortest form) ------------------- */

size_t wire_size_uint(uint64_t v)
{
    if (v < 0x80)
        return 1;
    if (v <= UINT8_MAX)
        return 2;
    if (v <= UINT16_MAX)
        return 3;
    if (v <= UINT32_MAX)
        return 5;
    return 9;
}

size_t wire_size_str(size_t len)
{
    if (len < 32)
        return 1 + len;
    if (len <= UINT8_MAX)
        return 2 + len;
    if (len <= UINT16_MAX)
        return 3 + len;
    return 5 + len;
}

size_t wire_size_bin(size_t len)
{
    if (len <= UINT8_MAX)
        return 2 + len;
    if (len <= UINT16_MAX)
        return 3 + len;
    return 5 + len;
}

size_t wire_size_array(size_t n)
{
    if (n < 16)
        return 1;
    if (n <= UINT16_MAX)
        return 3;
    return 5;
}
