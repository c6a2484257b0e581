/*
 * rpc_msg.c - internode RPC messages: msgpack-c packer out, a bounds-checked
 * reader in, libsodium for the handshake MAC.
 *
 * Wire layout (each a msgpack array; names are str, keys/values/nonces bin):
 *   HANDSHAKE  [1, version, role, cluster, node, nonce, peer_nonce, time, mac]
 *   WRITE      [2, token, epoch, key, ts, flags, expiry, value]
 *   WRITE_ACK  [3, status, hlc]
 *   READ       [4, token, epoch, key, digest?]
 *   READ_RESP  [5, status, hlc, false]                       not found
 *              [5, status, hlc, true, false, ts, flags, expiry, value]
 *              [5, status, hlc, true, true, ts, flags, expiry, value_hash]
 * A decoder accepts extra trailing array elements (skipped, for later
 * fields) but no bytes after the array.
 */
#include "wire/rpc_msg.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include <msgpack.h>
#include <sodium.h>

/* ---- output buffer ------------------------------------------------------ */

void rpc_buf_reset(struct rpc_buf *buf)
{
    buf->len = 0;
}

void rpc_buf_free(struct rpc_buf *buf)
{
    if (buf == NULL)
        return;
    free(buf->data);
    buf->data = NULL;
    buf->len = buf->cap = 0;
}

static int rpc__buf_write(void *data, const char *p, size_t len)
{
    struct rpc_buf *b = data;
    if (len > b->cap - b->len) {
        size_t cap = b->cap ? b->cap : 256;
        while (cap - b->len < len) {
            if (cap > SIZE_MAX / 2)
                return -1;
            cap *= 2;
        }
        uint8_t *n = realloc(b->data, cap);
        if (n == NULL)
            return -1;
        b->data = n;
        b->cap = cap;
    }
    if (len != 0) /* p may be NULL for an empty value */
        memcpy(b->data + b->len, p, len);
    b->len += len;
    return 0;
}

/* The packer reports failure per call; we OR them and map to -ENOMEM. */
struct rpc__enc {
    msgpack_packer pk;
    struct rpc_buf *out;
    size_t start;
    int fail;
};

static void rpc__enc_init(struct rpc__enc *e, struct rpc_buf *out)
{
    msgpack_packer_init(&e->pk, out, rpc__buf_write);
    e->out = out;
    e->start = out->len;
    e->fail = 0;
}

static int rpc__enc_end(struct rpc__enc *e)
{
    if (e->fail) {
        e->out->len = e->start; /* drop the partial message */
        return -ENOMEM;
    }
    return 0;
}

static void enc_array(struct rpc__enc *e, size_t n)
{
    e->fail |= msgpack_pack_array(&e->pk, n);
}

static void enc_u64(struct rpc__enc *e, uint64_t v)
{
    e->fail |= msgpack_pack_uint64(&e->pk, v);
}

static void enc_i64(struct rpc__enc *e, int64_t v)
{
    e->fail |= msgpack_pack_int64(&e->pk, v);
}

static void enc_bool(struct rpc__enc *e, bool v)
{
    e->fail |= v ? msgpack_pack_true(&e->pk) : msgpack_pack_false(&e->pk);
}

static void enc_bin(struct rpc__enc *e, const void *p, size_t len)
{
    e->fail |= msgpack_pack_bin(&e->pk, len);
    e->fail |= msgpack_pack_bin_body(&e->pk, p, len);
}

static void enc_str(struct rpc__enc *e, struct rk_slice s)
{
    e->fail |= msgpack_pack_str(&e->pk, s.len);
    e->fail |= msgpack_pack_str_body(&e->pk, s.p, s.len);
}

/* ---- bounds-checked reader ---------------------------------------------- */

struct rd {
    const uint8_t *p;
    const uint8_t *end;
};

#define RD_MAX_DEPTH 16

static size_t rd_left(const struct rd *r)
{
    return (size_t)(r->end - r->p);
}

static int rd_be(struct rd *r, size_t n, uint64_t *out)
{
    if (rd_left(r) < n)
        return RK_EPROTO;
    uint64_t v = 0;
    for (size_t i = 0; i < n; i++)
        v = (v << 8) | r->p[i];
    r->p += n;
    *out = v;
    return 0;
}

static int rd_byte(struct rd *r, uint8_t *out)
{
    if (rd_left(r) < 1)
        return RK_EPROTO;
    *out = *r->p++;
    return 0;
}

static int rd_array(struct rd *r, uint64_t *n)
{
    uint8_t b;
    if (rd_byte(r, &b))
        return RK_EPROTO;
    if ((b & 0xf0) == 0x90) {
        *n = b & 0x0f;
        return 0;
    }
    if (b == 0xdc)
        return rd_be(r, 2, n);
    if (b == 0xdd)
        return rd_be(r, 4, n);
    return RK_EPROTO;
}

/* Any msgpack integer; sets *neg for negative values (then *u is the
 * two's-complement bits of the int64). */
static int rd_integer(struct rd *r, uint64_t *u, bool *neg)
{
    uint8_t b;
    uint64_t v;
    *neg = false;
    if (rd_byte(r, &b))
        return RK_EPROTO;
    if (b <= 0x7f) {
        *u = b;
        return 0;
    }
    if (b >= 0xe0) {
        *u = (uint64_t)(int64_t)(int8_t)b;
        *neg = true;
        return 0;
    }
    switch (b) {
    case 0xcc:
        return rd_be(r, 1, u);
    case 0xcd:
        return rd_be(r, 2, u);
    case 0xce:
        return rd_be(r, 4, u);
    case 0xcf:
        return rd_be(r, 8, u);
    case 0xd0:
        if (rd_be(r, 1, &v))
            return RK_EPROTO;
        *u = (uint64_t)(int64_t)(int8_t)v;
        break;
    case 0xd1:
        if (rd_be(r, 2, &v))
            return RK_EPROTO;
        *u = (uint64_t)(int64_t)(int16_t)v;
        break;
    case 0xd2:
        if (rd_be(r, 4, &v))
            return RK_EPROTO;
        *u = (uint64_t)(int64_t)(int32_t)v;
        break;
    case 0xd3:
        if (rd_be(r, 8, &v))
            return RK_EPROTO;
        *u = v;
        break;
    default:
        return RK_EPROTO;
    }
    *neg = (int64_t)*u < 0;
    return 0;
}

static int rd_u64(struct rd *r, uint64_t *out)
{
    bool neg;
    if (rd_integer(r, out, &neg) || neg)
        return RK_EPROTO;
    return 0;
}

static int rd_u32(struct rd *r, uint32_t *out)
{
    uint64_t v;
    if (rd_u64(r, &v) || v > UINT32_MAX)
        return RK_EPROTO;
    *out = (uint32_t)v;
    return 0;
}

static int rd_i32(struct rd *r, int32_t *out)
{
    uint64_t u;
    bool neg;
    if (rd_integer(r, &u, &neg))
        return RK_EPROTO;
    int64_t v = (int64_t)u;
    if (neg ? v < INT32_MIN : u > INT32_MAX)
        return RK_EPROTO;
    *out = (int32_t)v;
    return 0;
}

static int rd_bool(struct rd *r, bool *out)
{
    uint8_t b;
    if (rd_byte(r, &b) || (b != 0xc2 && b != 0xc3))
        return RK_EPROTO;
    *out = b == 0xc3;
    return 0;
}

/* A bin (want_str false) or str (true) of at most max bytes. A declared
 * length over max is RK_ETOOLARGE even if the bytes are missing. */
static int
rd_bytes(struct rd *r, bool want_str, size_t max, struct rk_slice *out)
{
    uint8_t b;
    uint64_t n;
    if (rd_byte(r, &b))
        return RK_EPROTO;
    if (want_str && (b & 0xe0) == 0xa0) {
        n = b & 0x1f;
    } else if (want_str && b >= 0xd9 && b <= 0xdb) {
        if (rd_be(r, (size_t)1 << (b - 0xd9), &n))
            return RK_EPROTO;
    } else if (!want_str && b >= 0xc4 && b <= 0xc6) {
        if (rd_be(r, (size_t)1 << (b - 0xc4), &n))
            return RK_EPROTO;
    } else {
        return RK_EPROTO;
    }
    if (n > max)
        return RK_ETOOLARGE;
    if (n > rd_left(r))
        return RK_EPROTO;
    out->p = r->p;
    out->len = (size_t)n;
    r->p += n;
    return 0;
}

static int rd_fixed(struct rd *r, uint8_t *out, size_t n)
{
    struct rk_slice s;
    int rc = rd_bytes(r, false, n, &s);
    if (rc)
        return rc == RK_ETOOLARGE ? RK_EPROTO : rc;
    if (s.len != n)
        return RK_EPROTO;
    memcpy(out, s.p, n);
    return 0;
}

/* Skips one object of any type. Every length is checked against the bytes
 * left before it is used, and nesting is bounded. */
static int rd_skip(struct rd *r, int depth)
{
    uint8_t b;
    uint64_t n = 0, v;
    size_t body = 0;
    if (depth > RD_MAX_DEPTH || rd_byte(r, &b))
        return RK_EPROTO;
    if (b <= 0x7f || b >= 0xe0 || b == 0xc0 || b == 0xc2 || b == 0xc3)
        return 0;
    if ((b & 0xe0) == 0xa0) {
        body = b & 0x1f;
    } else if ((b & 0xf0) == 0x90 || (b & 0xf0) == 0x80) {
        n = (uint64_t)(b & 0x0f) * ((b & 0xf0) == 0x80 ? 2 : 1);
        goto elems;
    } else {
        switch (b) {
        case 0xc4:
        case 0xc5:
        case 0xc6:
            if (rd_be(r, (size_t)1 << (b - 0xc4), &v))
                return RK_EPROTO;
            if (v > rd_left(r))
                return RK_EPROTO;
            body = (size_t)v;
            break;
        case 0xd9:
        case 0xda:
        case 0xdb:
            if (rd_be(r, (size_t)1 << (b - 0xd9), &v))
                return RK_EPROTO;
            if (v > rd_left(r))
                return RK_EPROTO;
            body = (size_t)v;
            break;
        case 0xc7:
        case 0xc8:
        case 0xc9: /* ext 8/16/32 */
            if (rd_be(r, (size_t)1 << (b - 0xc7), &v))
                return RK_EPROTO;
            if (v > rd_left(r) || rd_left(r) - v < 1)
                return RK_EPROTO;
            body = (size_t)v + 1;
            break;
        case 0xca:
            body = 4;
            break;
        case 0xcb:
            body = 8;
            break;
        case 0xcc:
        case 0xd0:
            body = 1;
            break;
        case 0xcd:
        case 0xd1:
            body = 2;
            break;
        case 0xce:
        case 0xd2:
            body = 4;
            break;
        case 0xcf:
        case 0xd3:
            body = 8;
            break;
        case 0xd4:
            body = 2;
            break;
        case 0xd5:
            body = 3;
            break;
        case 0xd6:
            body = 5;
            break;
        case 0xd7:
            body = 9;
            break;
        case 0xd8:
            body = 17;
            break;
        case 0xdc:
        case 0xdd:
            if (rd_be(r, b == 0xdc ? 2 : 4, &n))
                return RK_EPROTO;
            goto elems;
        case 0xde:
        case 0xdf:
            if (rd_be(r, b == 0xde ? 2 : 4, &n))
                return RK_EPROTO;
            n *= 2;
            goto elems;
        default:
            return RK_EPROTO; /* 0xc1, never used */
        }
    }
    if (body > rd_left(r))
        return RK_EPROTO;
    r->p += body;
    return 0;
elems:
    /* Each element takes at least one byte: a count over the bytes left
     * is a lie, refused before looping. */
    if (n > rd_left(r))
        return RK_EPROTO;
    for (uint64_t i = 0; i < n; i++)
        if (rd_skip(r, depth + 1))
            return RK_EPROTO;
    return 0;
}

/* Opens a message: an array of at least min elements whose first is type.
 * *extra receives the number of elements past min, skipped by rd_close. */
static int rd_open(struct rd *r,
                   struct rk_slice buf,
                   enum rpc_msg_type type,
                   uint64_t min,
                   uint64_t *extra)
{
    uint64_t n, t;
    r->p = buf.p;
    r->end = buf.p + buf.len;
    if (buf.p == NULL && buf.len != 0)
        return RK_EPROTO;
    if (rd_array(r, &n) || n < min || n > rd_left(r))
        return RK_EPROTO;
    if (rd_u64(r, &t) || t != (uint64_t)type)
        return RK_EPROTO;
    *extra = n - min;
    return 0;
}

static int rd_close(struct rd *r, uint64_t extra)
{
    for (uint64_t i = 0; i < extra; i++)
        if (rd_skip(r, 1))
            return RK_EPROTO;
    return r->p == r->end ? 0 : RK_EPROTO;
}

int rpc_msg_type_peek(enum rpc_msg_type *out, struct rk_slice buf)
{
    struct rd r = {buf.p, buf.p + buf.len};
    uint64_t n, t;
    if ((buf.p == NULL && buf.len) || rd_array(&r, &n) || n < 1 ||
        rd_u64(&r, &t) || t > INT32_MAX)
        return RK_EPROTO;
    *out = (enum rpc_msg_type)t;
    return 0;
}

/* ---- records ------------------------------------------------------------ */

void rpc_record_digest(struct rpc_digest *out, const struct rpc_record *rec)
{
    out->ts = rec->ts;
    out->flags = rec->flags;
    out->expiry = rec->expiry;
    out->value_hash = XXH3_64bits(rec->value.len ? (const void *)rec->value.p
                                                 : (const void *)"",
                                  rec->value.len);
}

static int check_key(struct rk_slice key)
{
    if (key.len == 0)
        return RK_EBADREQ;
    if (key.len > RK_MAX_KEY)
        return RK_ETOOLARGE;
    return 0;
}

/* ---- handshake ---------------------------------------------------------- */

static const uint8_t rpc__kdf_key[crypto_generichash_KEYBYTES] =
    "ringkv-internode-v1";

void rpc_key_derive(uint8_t out[RPC_KEY_BYTES], struct rk_slice secret)
{
    crypto_generichash(out, RPC_KEY_BYTES, secret.len ? secret.p : NULL,
                       secret.len, rpc__kdf_key, sizeof(rpc__kdf_key));
}

static int check_name(struct rk_slice s)
{
    if (s.len == 0)
        return RK_EBADREQ;
    if (s.len > RPC_NAME_MAX)
        return RK_ETOOLARGE;
    return 0;
}

/* The MAC'd bytes: a domain tag, then every field in fixed order with
 * one-byte name lengths. Returns the length written into buf. */
static size_t hs_mac_input(uint8_t *buf, const struct rpc_handshake *hs)
{
    static const char tag[] = "ringkv-hs";
    size_t n = 0;
    memcpy(buf, tag, sizeof(tag) - 1);
    n += sizeof(tag) - 1;
    for (int i = 3; i >= 0; i--)
        buf[n++] = (uint8_t)(hs->version >> (8 * i));
    for (int i = 3; i >= 0; i--)
        buf[n++] = (uint8_t)(hs->role >> (8 * i));
    buf[n++] = (uint8_t)hs->cluster.len;
    memcpy(buf + n, hs->cluster.p, hs->cluster.len);
    n += hs->cluster.len;
    buf[n++] = (uint8_t)hs->node.len;
    memcpy(buf + n, hs->node.p, hs->node.len);
    n += hs->node.len;
    memcpy(buf + n, hs->nonce, RPC_NONCE_BYTES);
    n += RPC_NONCE_BYTES;
    memcpy(buf + n, hs->peer_nonce, RPC_NONCE_BYTES);
    n += RPC_NONCE_BYTES;
    for (int i = 7; i >= 0; i--)
        buf[n++] = (uint8_t)(hs->time_ms >> (8 * i));
    return n;
}

#define HS_MAC_INPUT_MAX \
    (9 + 4 + 4 + 2 * (1 + RPC_NAME_MAX) + 2 * RPC_NONCE_BYTES + 8)

int rpc_handshake_sign(struct rpc_handshake *hs,
                       const uint8_t key[RPC_KEY_BYTES])
{
    uint8_t buf[HS_MAC_INPUT_MAX];
    int rc = check_name(hs->cluster);
    if (rc == 0)
        rc = check_name(hs->node);
    if (rc)
        return rc;
    size_t n = hs_mac_input(buf, hs);
    crypto_auth(hs->mac, buf, n, key);
    return 0;
}

int rpc_handshake_verify(const struct rpc_handshake *hs,
                         const uint8_t key[RPC_KEY_BYTES])
{
    uint8_t buf[HS_MAC_INPUT_MAX];
    if (check_name(hs->cluster) || check_name(hs->node))
        return RK_EAUTH;
    size_t n = hs_mac_input(buf, hs);
    return crypto_auth_verify(hs->mac, buf, n, key) == 0 ? 0 : RK_EAUTH;
}

int rpc_handshake_encode(struct rpc_buf *out, const struct rpc_handshake *hs)
{
    struct rpc__enc e;
    int rc = check_name(hs->cluster);
    if (rc == 0)
        rc = check_name(hs->node);
    if (rc)
        return rc;
    rpc__enc_init(&e, out);
    enc_array(&e, 9);
    enc_u64(&e, RPC_MSG_HANDSHAKE);
    enc_u64(&e, hs->version);
    enc_u64(&e, hs->role);
    enc_str(&e, hs->cluster);
    enc_str(&e, hs->node);
    enc_bin(&e, hs->nonce, RPC_NONCE_BYTES);
    enc_bin(&e, hs->peer_nonce, RPC_NONCE_BYTES);
    enc_u64(&e, hs->time_ms);
    enc_bin(&e, hs->mac, RPC_MAC_BYTES);
    return rpc__enc_end(&e);
}

int rpc_handshake_decode(struct rpc_handshake *out, struct rk_slice buf)
{
    struct rd r;
    uint64_t extra;
    struct rpc_handshake hs;
    memset(&hs, 0, sizeof(hs));
    int rc = rd_open(&r, buf, RPC_MSG_HANDSHAKE, 9, &extra);
    if (rc == 0)
        rc = rd_u32(&r, &hs.version);
    if (rc == 0 && hs.version != RPC_HS_VERSION)
        rc = RK_EVERSION;
    if (rc == 0)
        rc = rd_u32(&r, &hs.role);
    if (rc == 0 && hs.role != RPC_HS_CHALLENGE && hs.role != RPC_HS_RESPONSE)
        rc = RK_EPROTO;
    if (rc == 0)
        rc = rd_bytes(&r, true, RPC_NAME_MAX, &hs.cluster);
    if (rc == 0)
        rc = rd_bytes(&r, true, RPC_NAME_MAX, &hs.node);
    if (rc == 0 && (hs.cluster.len == 0 || hs.node.len == 0))
        rc = RK_EPROTO;
    if (rc == 0)
        rc = rd_fixed(&r, hs.nonce, RPC_NONCE_BYTES);
    if (rc == 0)
        rc = rd_fixed(&r, hs.peer_nonce, RPC_NONCE_BYTES);
    if (rc == 0)
        rc = rd_u64(&r, &hs.time_ms);
    if (rc == 0)
        rc = rd_fixed(&r, hs.mac, RPC_MAC_BYTES);
    if (rc == 0)
        rc = rd_close(&r, extra);
    if (rc)
        return rc;
    *out = hs;
    return 0;
}

int rpc_handshake_make(uint8_t *out,
                       size_t cap,
                       size_t *out_len,
                       const uint8_t key[RPC_KEY_BYTES],
                       struct rk_slice cluster,
                       struct rk_slice node,
                       const uint8_t nonce[RPC_NONCE_BYTES],
                       uint64_t now_ms,
                       struct rk_slice peer)
{
    struct rpc_handshake hs;
    struct rpc_buf b = RPC_BUF_INIT;
    int rc;
    memset(&hs, 0, sizeof(hs));
    hs.version = RPC_HS_VERSION;
    hs.role = RPC_HS_CHALLENGE;
    hs.cluster = cluster;
    hs.node = node;
    memcpy(hs.nonce, nonce, RPC_NONCE_BYTES);
    hs.time_ms = now_ms;
    if (peer.len != 0) {
        struct rpc_handshake ch;
        rc = rpc_handshake_decode(&ch, peer);
        if (rc)
            return rc == RK_EVERSION ? rc : RK_EPROTO;
        if (ch.role != RPC_HS_CHALLENGE)
            return RK_EPROTO;
        hs.role = RPC_HS_RESPONSE;
        memcpy(hs.peer_nonce, ch.nonce, RPC_NONCE_BYTES);
    }
    rc = rpc_handshake_sign(&hs, key);
    if (rc)
        return rc;
    rc = rpc_handshake_encode(&b, &hs);
    if (rc)
        goto free_buf;
    if (b.len > cap) {
        rc = RK_ETOOLARGE;
        goto free_buf;
    }
    memcpy(out, b.data, b.len);
    *out_len = b.len;
free_buf:
    rpc_buf_free(&b);
    return rc;
}

int rpc_handshake_check(struct rk_slice got,
                        struct rk_slice sent,
                        const uint8_t key[RPC_KEY_BYTES],
                        struct rk_slice cluster,
                        char *name,
                        size_t name_cap)
{
    struct rpc_handshake hs;
    int rc = rpc_handshake_decode(&hs, got);
    if (rc)
        return rc;
    if (rpc_handshake_verify(&hs, key))
        return RK_EAUTH;
    if (hs.cluster.len != cluster.len ||
        memcmp(hs.cluster.p, cluster.p, cluster.len) != 0)
        return RK_EAUTH;
    if (sent.len == 0) {
        if (hs.role != RPC_HS_CHALLENGE)
            return RK_EPROTO;
    } else {
        struct rpc_handshake mine;
        if (rpc_handshake_decode(&mine, sent))
            return RK_EPROTO;
        if (hs.role != RPC_HS_RESPONSE ||
            sodium_memcmp(hs.peer_nonce, mine.nonce, RPC_NONCE_BYTES) != 0)
            return RK_EPROTO;
    }
    if (name != NULL && name_cap > 0) {
        size_t n = hs.node.len < name_cap - 1 ? hs.node.len : name_cap - 1;
        memcpy(name, hs.node.p, n);
        name[n] = '\0';
    }
    return 0;
}

/* ---- replica write ------------------------------------------------------ */

int rpc_write_encode(struct rpc_buf *out, const struct rpc_write *msg)
{
    struct rpc__enc e;
    int rc = check_key(msg->key);
    if (rc)
        return rc;
    if (msg->rec.value.len > RK_MAX_VALUE)
        return RK_ETOOLARGE;
    rpc__enc_init(&e, out);
    enc_array(&e, 8);
    enc_u64(&e, RPC_MSG_WRITE);
    enc_u64(&e, msg->token);
    enc_u64(&e, msg->epoch);
    enc_bin(&e, msg->key.p, msg->key.len);
    enc_u64(&e, msg->rec.ts);
    enc_u64(&e, msg->rec.flags);
    enc_u64(&e, msg->rec.expiry);
    enc_bin(&e, msg->rec.value.p, msg->rec.value.len);
    return rpc__enc_end(&e);
}

/* The token, epoch and non-empty key that open a replica write or read. */
static int
rd_addr(struct rd *r, uint64_t *token, uint64_t *epoch, struct rk_slice *key)
{
    int rc = rd_u64(r, token);
    if (rc == 0)
        rc = rd_u64(r, epoch);
    if (rc == 0)
        rc = rd_bytes(r, false, RK_MAX_KEY, key);
    if (rc == 0 && key->len == 0)
        rc = RK_EPROTO;
    return rc;
}

int rpc_write_decode(struct rpc_write *out, struct rk_slice buf)
{
    struct rd r;
    uint64_t extra;
    struct rpc_write m;
    memset(&m, 0, sizeof(m));
    int rc = rd_open(&r, buf, RPC_MSG_WRITE, 8, &extra);
    if (rc == 0)
        rc = rd_addr(&r, &m.token, &m.epoch, &m.key);
    if (rc == 0)
        rc = rd_u64(&r, &m.rec.ts);
    if (rc == 0)
        rc = rd_u32(&r, &m.rec.flags);
    if (rc == 0)
        rc = rd_u64(&r, &m.rec.expiry);
    if (rc == 0)
        rc = rd_bytes(&r, false, RK_MAX_VALUE, &m.rec.value);
    if (rc == 0)
        rc = rd_close(&r, extra);
    if (rc)
        return rc;
    *out = m;
    return 0;
}

int rpc_write_ack_encode(struct rpc_buf *out, const struct rpc_write_ack *msg)
{
    struct rpc__enc e;
    rpc__enc_init(&e, out);
    enc_array(&e, 3);
    enc_u64(&e, RPC_MSG_WRITE_ACK);
    enc_i64(&e, msg->status);
    enc_u64(&e, msg->hlc);
    return rpc__enc_end(&e);
}

int rpc_write_ack_decode(struct rpc_write_ack *out, struct rk_slice buf)
{
    struct rd r;
    uint64_t extra;
    struct rpc_write_ack m = {0, 0};
    int rc = rd_open(&r, buf, RPC_MSG_WRITE_ACK, 3, &extra);
    if (rc == 0)
        rc = rd_i32(&r, &m.status);
    if (rc == 0 && m.status > 0)
        rc = RK_EPROTO;
    if (rc == 0)
        rc = rd_u64(&r, &m.hlc);
    if (rc == 0)
        rc = rd_close(&r, extra);
    if (rc)
        return rc;
    *out = m;
    return 0;
}

/* ---- replica read ------------------------------------------------------- */

int rpc_read_encode(struct rpc_buf *out, const struct rpc_read *msg)
{
    struct rpc__enc e;
    int rc = check_key(msg->key);
    if (rc)
        return rc;
    rpc__enc_init(&e, out);
    enc_array(&e, 5);
    enc_u64(&e, RPC_MSG_READ);
    enc_u64(&e, msg->token);
    enc_u64(&e, msg->epoch);
    enc_bin(&e, msg->key.p, msg->key.len);
    enc_bool(&e, msg->digest);
    return rpc__enc_end(&e);
}

int rpc_read_decode(struct rpc_read *out, struct rk_slice buf)
{
    struct rd r;
    uint64_t extra;
    struct rpc_read m;
    memset(&m, 0, sizeof(m));
    int rc = rd_open(&r, buf, RPC_MSG_READ, 5, &extra);
    if (rc == 0)
        rc = rd_addr(&r, &m.token, &m.epoch, &m.key);
    if (rc == 0)
        rc = rd_bool(&r, &m.digest);
    if (rc == 0)
        rc = rd_close(&r, extra);
    if (rc)
        return rc;
    *out = m;
    return 0;
}

int rpc_read_resp_encode(struct rpc_buf *out, const struct rpc_read_resp *msg)
{
    struct rpc__enc e;
    if (msg->found && !msg->is_digest && msg->rec.value.len > RK_MAX_VALUE)
        return RK_ETOOLARGE;
    rpc__enc_init(&e, out);
    enc_array(&e, msg->found ? 9 : 4);
    enc_u64(&e, RPC_MSG_READ_RESP);
    enc_i64(&e, msg->status);
    enc_u64(&e, msg->hlc);
    enc_bool(&e, msg->found);
    if (msg->found) {
        enc_bool(&e, msg->is_digest);
        if (msg->is_digest) {
            enc_u64(&e, msg->dig.ts);
            enc_u64(&e, msg->dig.flags);
            enc_u64(&e, msg->dig.expiry);
            enc_u64(&e, msg->dig.value_hash);
        } else {
            enc_u64(&e, msg->rec.ts);
            enc_u64(&e, msg->rec.flags);
            enc_u64(&e, msg->rec.expiry);
            enc_bin(&e, msg->rec.value.p, msg->rec.value.len);
        }
    }
    return rpc__enc_end(&e);
}

int rpc_read_resp_decode(struct rpc_read_resp *out, struct rk_slice buf)
{
    struct rd r;
    uint64_t extra;
    struct rpc_read_resp m;
    memset(&m, 0, sizeof(m));
    int rc = rd_open(&r, buf, RPC_MSG_READ_RESP, 4, &extra);
    if (rc == 0)
        rc = rd_i32(&r, &m.status);
    if (rc == 0 && m.status > 0)
        rc = RK_EPROTO;
    if (rc == 0)
        rc = rd_u64(&r, &m.hlc);
    if (rc == 0)
        rc = rd_bool(&r, &m.found);
    if (rc == 0 && m.found) {
        if (extra < 5)
            rc = RK_EPROTO;
        else
            extra -= 5;
        if (rc == 0)
            rc = rd_bool(&r, &m.is_digest);
        if (rc == 0 && m.is_digest) {
            rc = rd_u64(&r, &m.dig.ts);
            if (rc == 0)
                rc = rd_u32(&r, &m.dig.flags);
            if (rc == 0)
                rc = rd_u64(&r, &m.dig.expiry);
            if (rc == 0)
                rc = rd_u64(&r, &m.dig.value_hash);
        } else if (rc == 0) {
            rc = rd_u64(&r, &m.rec.ts);
            if (rc == 0)
                rc = rd_u32(&r, &m.rec.flags);
            if (rc == 0)
                rc = rd_u64(&r, &m.rec.expiry);
            if (rc == 0)
                rc = rd_bytes(&r, false, RK_MAX_VALUE, &m.rec.value);
        }
    }
    if (rc == 0)
        rc = rd_close(&r, extra);
    if (rc)
        return rc;
    *out = m;
    return 0;
}
