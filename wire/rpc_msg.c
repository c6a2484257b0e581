/*
 * rpc_msg.c - internode RPC messages: msgpack-c packer out, wire/'s
 * bounds-checked reader (wire_internal.h) in, libsodium for the handshake
 * MAC.
 *
 * Wire layout (each a msgpack array; names are str, keys/values/nonces bin):
 *   HANDSHAKE  [1, version, role, cluster, from, to, nonce, peer_nonce, time,
 *               mac]
 *   WRITE      [2, token, epoch, key, ts, flags, expiry, value]
 *   WRITE_ACK  [3, status, hlc]
 *   READ       [4, token, epoch, key, digest?]
 *   READ_RESP  [5, status, hlc, false]                       not found
 *              [5, status, hlc, true, false, ts, flags, expiry, value]
 *              [5, status, hlc, true, true, ts, flags, expiry, value_hash]
 *   STREAM     [6, epoch, start, end, pos, started, done, last, max_bytes]
 *   STREAM_CHUNK
 *              [7, status, hlc, start, end, pos, started, done, last,
 *               count, items, checksum]
 *              items: a bin holding `count` item arrays back to back,
 *              each [key, ts, flags, expiry, value]; checksum: XXH3-64 of
 *              the bin's bytes
 * A decoder accepts extra trailing array elements (skipped, for later
 * fields) but no bytes after the array.
 */
#include "wire/rpc_msg.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include <msgpack.h>
#include <sodium.h>

#include "wire/wire_internal.h"

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

/* ---- reading (the shared reader of wire_internal.h) -------------------- */

/* A str or bin (kind) of at most max bytes; a declared length over max is
 * RK_ETOOLARGE even if the bytes are missing. */
static int
rd_bytes(struct wire__rd *r, unsigned kind, size_t max, struct rk_slice *out)
{
    return wire__rd_raw(r, kind | WIRE__RD_LIMIT_FIRST, max, out);
}

/* A bin of exactly n bytes, copied into out. */
static int rd_fixed(struct wire__rd *r, uint8_t *out, size_t n)
{
    struct rk_slice s;
    int rc = wire__rd_raw(r, WIRE__RD_BIN, SIZE_MAX, &s);
    if (rc == 0 && s.len != n)
        rc = wire__rd_fail(r, WIRE__RD_BAD, "bytes of the wrong length");
    if (rc == 0)
        memcpy(out, s.p, n);
    return rc;
}

/* Opens a message: an array of at least min elements whose first is type.
 * *extra receives the number of elements past min, skipped by rd_close. */
static int rd_open(struct wire__rd *r,
                   struct rk_slice buf,
                   enum rpc_msg_type type,
                   uint64_t min,
                   uint64_t *extra)
{
    uint32_t n;
    uint64_t t;
    if (buf.p == NULL && buf.len != 0)
        return RK_EPROTO;
    wire__rd_init(r, buf.p, buf.len);
    int rc = wire__rd_container(r, false, &n, UINT32_MAX);
    if (rc == 0 && n < min)
        rc = RK_EPROTO;
    if (rc == 0)
        rc = wire__rd_uint(r, &t);
    if (rc == 0 && t != (uint64_t)type)
        rc = RK_EPROTO;
    if (rc == 0)
        *extra = n - min;
    return rc;
}

static int rd_close(struct wire__rd *r, uint64_t extra)
{
    int rc = 0;
    for (uint64_t i = 0; i < extra && rc == 0; i++)
        rc = wire__rd_skip(r, 1);
    if (rc == 0 && r->p != r->end)
        rc = RK_EPROTO;
    return rc;
}

/* A record's fields: ts, flags, expiry, value. */
static void enc_record(struct rpc__enc *e, const struct rpc_record *rec)
{
    enc_u64(e, rec->ts);
    enc_u64(e, rec->flags);
    enc_u64(e, rec->expiry);
    enc_bin(e, rec->value.p, rec->value.len);
}

static int rd_record(struct wire__rd *r, struct rpc_record *rec)
{
    int rc = wire__rd_uint(r, &rec->ts);
    if (rc == 0)
        rc = wire__rd_uint32(r, &rec->flags);
    if (rc == 0)
        rc = wire__rd_uint(r, &rec->expiry);
    if (rc == 0)
        rc = rd_bytes(r, WIRE__RD_BIN, RK_MAX_VALUE, &rec->value);
    return rc;
}

/* The status (0 or a negative code) and HLC that open every answer. */
static int rd_status_hlc(struct wire__rd *r, int32_t *status, uint64_t *hlc)
{
    int rc = wire__rd_int32(r, status);
    if (rc == 0 && *status > 0)
        rc = RK_EPROTO;
    if (rc == 0)
        rc = wire__rd_uint(r, hlc);
    return rc;
}

int rpc_msg_type_peek(enum rpc_msg_type *out, struct rk_slice buf)
{
    struct wire__rd r;
    uint64_t n, t;
    if (buf.p == NULL && buf.len != 0)
        return RK_EPROTO;
    wire__rd_init(&r, buf.p, buf.len);
    if (wire__rd_head(&r, false, &n) || n < 1 || wire__rd_uint(&r, &t) ||
        t > INT32_MAX)
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

static int check_names(const struct rpc_handshake *hs)
{
    int rc = check_name(hs->cluster);
    if (rc == 0)
        rc = check_name(hs->from);
    if (rc == 0)
        rc = check_name(hs->to);
    return rc;
}

static bool same_name(struct rk_slice a, struct rk_slice b)
{
    return a.len == b.len && (a.len == 0 || memcmp(a.p, b.p, a.len) == 0);
}

static size_t put_name(uint8_t *buf, struct rk_slice s)
{
    buf[0] = (uint8_t)s.len;
    memcpy(buf + 1, s.p, s.len);
    return 1 + s.len;
}

/* The MAC'd bytes of an ANSWER or a PROOF: a tag naming the direction, so
 * that one side's MAC is never valid as the other's, then the version, the
 * cluster, the receiver's nonce, the sender's, the sender's name, the
 * receiver's and the time, names with one-byte lengths. Returns the length
 * written into buf. */
static size_t hs_mac_input(uint8_t *buf, const struct rpc_handshake *hs)
{
    static const char tag_s[] = "ringkv-hs-s", tag_c[] = "ringkv-hs-c";
    const char *tag = hs->role == RPC_HS_ANSWER ? tag_s : tag_c;
    size_t n = sizeof(tag_s) - 1;
    memcpy(buf, tag, n);
    for (int i = 3; i >= 0; i--)
        buf[n++] = (uint8_t)(hs->version >> (8 * i));
    n += put_name(buf + n, hs->cluster);
    memcpy(buf + n, hs->peer_nonce, RPC_NONCE_BYTES);
    n += RPC_NONCE_BYTES;
    memcpy(buf + n, hs->nonce, RPC_NONCE_BYTES);
    n += RPC_NONCE_BYTES;
    n += put_name(buf + n, hs->from);
    n += put_name(buf + n, hs->to);
    for (int i = 7; i >= 0; i--)
        buf[n++] = (uint8_t)(hs->time_ms >> (8 * i));
    return n;
}

#define HS_MAC_INPUT_MAX \
    (11 + 4 + 3 * (1 + RPC_NAME_MAX) + 2 * RPC_NONCE_BYTES + 8)

int rpc_handshake_sign(struct rpc_handshake *hs,
                       const uint8_t key[RPC_KEY_BYTES])
{
    uint8_t buf[HS_MAC_INPUT_MAX];
    int rc = check_names(hs);
    if (rc)
        return rc;
    if (hs->role != RPC_HS_ANSWER && hs->role != RPC_HS_PROOF)
        return RK_EBADREQ;
    size_t n = hs_mac_input(buf, hs);
    crypto_auth(hs->mac, buf, n, key);
    return 0;
}

int rpc_handshake_verify(const struct rpc_handshake *hs,
                         const uint8_t key[RPC_KEY_BYTES])
{
    uint8_t buf[HS_MAC_INPUT_MAX];
    if (check_names(hs) != 0 ||
        (hs->role != RPC_HS_ANSWER && hs->role != RPC_HS_PROOF))
        return RK_EAUTH;
    size_t n = hs_mac_input(buf, hs);
    return crypto_auth_verify(hs->mac, buf, n, key) == 0 ? 0 : RK_EAUTH;
}

int rpc_handshake_encode(struct rpc_buf *out, const struct rpc_handshake *hs)
{
    struct rpc__enc e;
    int rc = check_names(hs);
    if (rc)
        return rc;
    rpc__enc_init(&e, out);
    enc_array(&e, 10);
    enc_u64(&e, RPC_MSG_HANDSHAKE);
    enc_u64(&e, hs->version);
    enc_u64(&e, hs->role);
    enc_str(&e, hs->cluster);
    enc_str(&e, hs->from);
    enc_str(&e, hs->to);
    enc_bin(&e, hs->nonce, RPC_NONCE_BYTES);
    enc_bin(&e, hs->peer_nonce, RPC_NONCE_BYTES);
    enc_u64(&e, hs->time_ms);
    enc_bin(&e, hs->mac, RPC_MAC_BYTES);
    return rpc__enc_end(&e);
}

int rpc_handshake_decode(struct rpc_handshake *out, struct rk_slice buf)
{
    struct wire__rd r;
    uint64_t extra;
    struct rpc_handshake hs;
    memset(&hs, 0, sizeof(hs));
    int rc = rd_open(&r, buf, RPC_MSG_HANDSHAKE, 10, &extra);
    if (rc == 0)
        rc = wire__rd_uint32(&r, &hs.version);
    if (rc == 0 && hs.version != RPC_HS_VERSION)
        rc = RK_EVERSION;
    if (rc == 0)
        rc = wire__rd_uint32(&r, &hs.role);
    if (rc == 0 && hs.role != RPC_HS_HELLO && hs.role != RPC_HS_ANSWER &&
        hs.role != RPC_HS_PROOF)
        rc = RK_EPROTO;
    if (rc == 0)
        rc = rd_bytes(&r, WIRE__RD_STR, RPC_NAME_MAX, &hs.cluster);
    if (rc == 0)
        rc = rd_bytes(&r, WIRE__RD_STR, RPC_NAME_MAX, &hs.from);
    if (rc == 0)
        rc = rd_bytes(&r, WIRE__RD_STR, RPC_NAME_MAX, &hs.to);
    if (rc == 0 && check_names(&hs) != 0)
        rc = RK_EPROTO;
    if (rc == 0)
        rc = rd_fixed(&r, hs.nonce, RPC_NONCE_BYTES);
    if (rc == 0)
        rc = rd_fixed(&r, hs.peer_nonce, RPC_NONCE_BYTES);
    if (rc == 0)
        rc = wire__rd_uint(&r, &hs.time_ms);
    if (rc == 0)
        rc = rd_fixed(&r, hs.mac, RPC_MAC_BYTES);
    if (rc == 0)
        rc = rd_close(&r, extra);
    if (rc)
        return wire__rd_code(rc, RK_EPROTO);
    *out = hs;
    return 0;
}

/* Decodes a handshake message from the peer for rpc_handshake_make:
 * RK_EVERSION or RK_EPROTO. */
static int decode_peer(struct rpc_handshake *out, struct rk_slice buf)
{
    int rc = rpc_handshake_decode(out, buf);
    if (rc)
        return rc == RK_EVERSION ? rc : RK_EPROTO;
    return 0;
}

int rpc_handshake_make(uint8_t *out,
                       size_t cap,
                       size_t *out_len,
                       const uint8_t key[RPC_KEY_BYTES],
                       struct rk_slice cluster,
                       struct rk_slice self,
                       struct rk_slice to,
                       const uint8_t nonce[RPC_NONCE_BYTES],
                       uint64_t now_ms,
                       struct rk_slice peer)
{
    struct rpc_handshake hs, got;
    struct rpc_buf b = RPC_BUF_INIT;
    int rc;
    memset(&hs, 0, sizeof(hs));
    hs.version = RPC_HS_VERSION;
    hs.cluster = cluster;
    hs.from = self;
    hs.time_ms = now_ms;
    if (peer.len == 0) {
        hs.role = RPC_HS_HELLO;
        hs.to = to;
        memcpy(hs.nonce, nonce, RPC_NONCE_BYTES);
        rc = check_names(&hs);
    } else {
        rc = decode_peer(&got, peer);
        if (rc)
            return rc;
        if (got.role == RPC_HS_HELLO) {
            /* Sign nothing for a HELLO meant for another node or cluster. */
            if (!same_name(got.cluster, cluster) || !same_name(got.to, self))
                return RK_EAUTH;
            hs.role = RPC_HS_ANSWER;
            memcpy(hs.nonce, nonce, RPC_NONCE_BYTES);
        } else if (got.role == RPC_HS_ANSWER) {
            hs.role = RPC_HS_PROOF;
            memcpy(hs.nonce, got.peer_nonce, RPC_NONCE_BYTES);
        } else {
            return RK_EPROTO;
        }
        hs.to = got.from;
        memcpy(hs.peer_nonce, got.nonce, RPC_NONCE_BYTES);
        rc = rpc_handshake_sign(&hs, key);
    }
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
    struct rpc_handshake hs, mine;
    int rc = rpc_handshake_decode(&hs, got);
    if (rc)
        return rc;
    /* Nothing is accepted but an answer to a message of ours: our own
     * fresh nonce is what makes a recorded message useless. */
    if (sent.len == 0 || rpc_handshake_decode(&mine, sent) != 0)
        return RK_EPROTO;
    if (!(mine.role == RPC_HS_HELLO && hs.role == RPC_HS_ANSWER) &&
        !(mine.role == RPC_HS_ANSWER && hs.role == RPC_HS_PROOF))
        return RK_EPROTO;
    if (rpc_handshake_verify(&hs, key))
        return RK_EAUTH;
    /* got must bind our nonce, and a PROOF also the one it answers. */
    if (sodium_memcmp(hs.peer_nonce, mine.nonce, RPC_NONCE_BYTES) != 0 ||
        (hs.role == RPC_HS_PROOF &&
         sodium_memcmp(hs.nonce, mine.peer_nonce, RPC_NONCE_BYTES) != 0))
        return RK_EPROTO;
    /* The two names of this exchange: for a HELLO of ours, the acceptor
     * must be the node we meant to reach. */
    if (!same_name(hs.cluster, cluster) || !same_name(hs.to, mine.from) ||
        !same_name(hs.from, mine.to))
        return RK_EAUTH;
    if (name != NULL && name_cap > 0) {
        size_t n = hs.from.len < name_cap - 1 ? hs.from.len : name_cap - 1;
        memcpy(name, hs.from.p, n);
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
    enc_record(&e, &msg->rec);
    return rpc__enc_end(&e);
}

/* The token, epoch and non-empty key that open a replica write or read. */
static int rd_addr(struct wire__rd *r,
                   uint64_t *token,
                   uint64_t *epoch,
                   struct rk_slice *key)
{
    int rc = wire__rd_uint(r, token);
    if (rc == 0)
        rc = wire__rd_uint(r, epoch);
    if (rc == 0)
        rc = rd_bytes(r, WIRE__RD_BIN, RK_MAX_KEY, key);
    if (rc == 0 && key->len == 0)
        rc = RK_EPROTO;
    return rc;
}

int rpc_write_decode(struct rpc_write *out, struct rk_slice buf)
{
    struct wire__rd r;
    uint64_t extra;
    struct rpc_write m;
    memset(&m, 0, sizeof(m));
    int rc = rd_open(&r, buf, RPC_MSG_WRITE, 8, &extra);
    if (rc == 0)
        rc = rd_addr(&r, &m.token, &m.epoch, &m.key);
    if (rc == 0)
        rc = rd_record(&r, &m.rec);
    if (rc == 0)
        rc = rd_close(&r, extra);
    if (rc)
        return wire__rd_code(rc, RK_EPROTO);
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
    struct wire__rd r;
    uint64_t extra;
    struct rpc_write_ack m = {0, 0};
    int rc = rd_open(&r, buf, RPC_MSG_WRITE_ACK, 3, &extra);
    if (rc == 0)
        rc = rd_status_hlc(&r, &m.status, &m.hlc);
    if (rc == 0)
        rc = rd_close(&r, extra);
    if (rc)
        return wire__rd_code(rc, RK_EPROTO);
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
    struct wire__rd r;
    uint64_t extra;
    struct rpc_read m;
    memset(&m, 0, sizeof(m));
    int rc = rd_open(&r, buf, RPC_MSG_READ, 5, &extra);
    if (rc == 0)
        rc = rd_addr(&r, &m.token, &m.epoch, &m.key);
    if (rc == 0)
        rc = wire__rd_bool(&r, &m.digest);
    if (rc == 0)
        rc = rd_close(&r, extra);
    if (rc)
        return wire__rd_code(rc, RK_EPROTO);
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
            enc_record(&e, &msg->rec);
        }
    }
    return rpc__enc_end(&e);
}

int rpc_read_resp_decode(struct rpc_read_resp *out, struct rk_slice buf)
{
    struct wire__rd r;
    uint64_t extra;
    struct rpc_read_resp m;
    memset(&m, 0, sizeof(m));
    int rc = rd_open(&r, buf, RPC_MSG_READ_RESP, 4, &extra);
    if (rc == 0)
        rc = rd_status_hlc(&r, &m.status, &m.hlc);
    if (rc == 0)
        rc = wire__rd_bool(&r, &m.found);
    if (rc == 0 && m.found) {
        if (extra < 5)
            rc = RK_EPROTO;
        else
            extra -= 5;
        if (rc == 0)
            rc = wire__rd_bool(&r, &m.is_digest);
        if (rc == 0 && m.is_digest) {
            rc = wire__rd_uint(&r, &m.dig.ts);
            if (rc == 0)
                rc = wire__rd_uint32(&r, &m.dig.flags);
            if (rc == 0)
                rc = wire__rd_uint(&r, &m.dig.expiry);
            if (rc == 0)
                rc = wire__rd_uint(&r, &m.dig.value_hash);
        } else if (rc == 0) {
            rc = rd_record(&r, &m.rec);
        }
    }
    if (rc == 0)
        rc = rd_close(&r, extra);
    if (rc)
        return wire__rd_code(rc, RK_EPROTO);
    *out = m;
    return 0;
}

/* ---- range streaming ---------------------------------------------------- */

static void enc_pos(struct rpc__enc *e, const struct rpc_stream_pos *p)
{
    enc_u64(e, p->start);
    enc_u64(e, p->end);
    enc_u64(e, p->pos);
    enc_bool(e, p->started);
    enc_bool(e, p->done);
    enc_bin(e, p->last.p, p->last.len);
}

static int rd_pos(struct wire__rd *r, struct rpc_stream_pos *p)
{
    int rc = wire__rd_uint(r, &p->start);
    if (rc == 0)
        rc = wire__rd_uint(r, &p->end);
    if (rc == 0)
        rc = wire__rd_uint(r, &p->pos);
    if (rc == 0)
        rc = wire__rd_bool(r, &p->started);
    if (rc == 0)
        rc = wire__rd_bool(r, &p->done);
    if (rc == 0)
        rc = rd_bytes(r, WIRE__RD_BIN, RPC_STREAM_LAST_MAX, &p->last);
    if (rc == 0 && p->last.len && !p->started)
        rc = wire__rd_fail(r, WIRE__RD_BAD, "a resume key before the start");
    return rc;
}

int rpc_stream_req_encode(struct rpc_buf *out, const struct rpc_stream_req *msg)
{
    struct rpc__enc e;
    if (msg->at.last.len > RPC_STREAM_LAST_MAX)
        return RK_ETOOLARGE;
    rpc__enc_init(&e, out);
    enc_array(&e, 9);
    enc_u64(&e, RPC_MSG_STREAM);
    enc_u64(&e, msg->epoch);
    enc_pos(&e, &msg->at);
    enc_u64(&e, msg->max_bytes);
    return rpc__enc_end(&e);
}

int rpc_stream_req_decode(struct rpc_stream_req *out, struct rk_slice buf)
{
    struct wire__rd r;
    uint64_t extra;
    struct rpc_stream_req m;
    memset(&m, 0, sizeof(m));
    int rc = rd_open(&r, buf, RPC_MSG_STREAM, 9, &extra);
    if (rc == 0)
        rc = wire__rd_uint(&r, &m.epoch);
    if (rc == 0)
        rc = rd_pos(&r, &m.at);
    if (rc == 0)
        rc = wire__rd_uint32(&r, &m.max_bytes);
    if (rc == 0)
        rc = rd_close(&r, extra);
    if (rc)
        return wire__rd_code(rc, RK_EPROTO);
    *out = m;
    return 0;
}

int rpc_stream_item_add(struct rpc_buf *items,
                        struct rk_slice key,
                        const struct rpc_record *rec)
{
    if (key.len == 0)
        return RK_EBADREQ;
    if (key.len > RK_MAX_KEY || rec->value.len > RK_MAX_VALUE)
        return RK_ETOOLARGE;
    struct rpc__enc e;
    rpc__enc_init(&e, items);
    enc_array(&e, 5);
    enc_bin(&e, key.p, key.len);
    enc_record(&e, rec);
    return rpc__enc_end(&e);
}

static uint64_t items_hash(struct rk_slice items)
{
    return XXH3_64bits(items.len ? (const void *)items.p : "", items.len);
}

static int chunk_encode(struct rpc_buf *out,
                        const struct rpc_stream_chunk *msg,
                        enum rpc_msg_type type)
{
    struct rpc__enc e;
    if (msg->next.last.len > RPC_STREAM_LAST_MAX)
        return RK_ETOOLARGE;
    rpc__enc_init(&e, out);
    enc_array(&e, 12);
    enc_u64(&e, type);
    enc_i64(&e, msg->status);
    enc_u64(&e, msg->hlc);
    enc_pos(&e, &msg->next);
    enc_u64(&e, msg->count);
    enc_bin(&e, msg->items.p, msg->items.len);
    enc_u64(&e, items_hash(msg->items));
    return rpc__enc_end(&e);
}

/* One item [key, ts, flags, expiry, value] from r. */
static int
rd_item(struct wire__rd *r, struct rk_slice *key, struct rpc_record *rec)
{
    uint32_t n;
    memset(rec, 0, sizeof(*rec));
    int rc = wire__rd_container(r, false, &n, UINT32_MAX);
    if (rc == 0 && n != 5)
        rc = wire__rd_fail(r, WIRE__RD_BAD, "an item is not 5 elements");
    if (rc == 0)
        rc = rd_bytes(r, WIRE__RD_BIN, RK_MAX_KEY, key);
    if (rc == 0 && key->len == 0)
        rc = wire__rd_fail(r, WIRE__RD_BAD, "an empty key");
    if (rc == 0)
        rc = rd_record(r, rec);
    return rc;
}

int rpc_stream_item_next(struct rk_slice *it,
                         struct rk_slice *key,
                         struct rpc_record *rec)
{
    if (it->len == 0)
        return 0;
    if (it->p == NULL)
        return RK_EPROTO;
    struct wire__rd r;
    wire__rd_init(&r, it->p, it->len);
    int rc = rd_item(&r, key, rec);
    if (rc)
        return wire__rd_code(rc, RK_EPROTO);
    size_t used = (size_t)(r.p - it->p);
    it->p += used;
    it->len -= used;
    return 1;
}

static int chunk_decode(struct rpc_stream_chunk *out,
                        struct rk_slice buf,
                        enum rpc_msg_type type)
{
    struct wire__rd r;
    uint64_t extra;
    struct rpc_stream_chunk m;
    memset(&m, 0, sizeof(m));
    int rc = rd_open(&r, buf, type, 12, &extra);
    if (rc == 0)
        rc = rd_status_hlc(&r, &m.status, &m.hlc);
    if (rc == 0)
        rc = rd_pos(&r, &m.next);
    if (rc == 0)
        rc = wire__rd_uint32(&r, &m.count);
    if (rc == 0 && m.count > RPC_STREAM_ITEMS_MAX)
        rc = wire__rd_fail(&r, WIRE__RD_BAD, "too many items");
    if (rc == 0)
        rc = wire__rd_raw(&r, WIRE__RD_BIN, SIZE_MAX, &m.items);
    if (rc == 0)
        rc = wire__rd_uint(&r, &m.checksum);
    if (rc == 0)
        rc = rd_close(&r, extra);
    if (rc)
        return wire__rd_code(rc, RK_EPROTO);
    if (m.checksum != items_hash(m.items))
        return RK_EPROTO;
    /* every item must decode, and there must be exactly count of them */
    struct rk_slice it = m.items, key;
    struct rpc_record rec;
    uint32_t seen = 0;
    for (;;) {
        rc = rpc_stream_item_next(&it, &key, &rec);
        if (rc <= 0)
            break;
        seen++;
    }
    if (rc < 0 || seen != m.count)
        return rc < 0 && rc != RK_EPROTO ? rc : RK_EPROTO;
    *out = m;
    return 0;
}

int rpc_stream_chunk_encode(struct rpc_buf *out,
                            const struct rpc_stream_chunk *msg)
{
    return chunk_encode(out, msg, RPC_MSG_STREAM_CHUNK);
}

int rpc_stream_chunk_decode(struct rpc_stream_chunk *out, struct rk_slice buf)
{
    return chunk_decode(out, buf, RPC_MSG_STREAM_CHUNK);
}

int rpc_stream_push_encode(struct rpc_buf *out,
                           const struct rpc_stream_chunk *msg)
{
    return chunk_encode(out, msg, RPC_MSG_STREAM_PUSH);
}

int rpc_stream_push_decode(struct rpc_stream_chunk *out, struct rk_slice buf)
{
    return chunk_decode(out, buf, RPC_MSG_STREAM_PUSH);
}

/* ---- Merkle leaves --------------------------------------------------------
 */

int rpc_merkle_req_encode(struct rpc_buf *out, const struct rpc_merkle_req *msg)
{
    struct rpc__enc e;
    if (msg->depth > RPC_MERKLE_MAX_DEPTH)
        return RK_EBADREQ;
    rpc__enc_init(&e, out);
    enc_array(&e, 5);
    enc_u64(&e, RPC_MSG_MERKLE);
    enc_u64(&e, msg->epoch);
    enc_u64(&e, msg->start);
    enc_u64(&e, msg->end);
    enc_u64(&e, msg->depth);
    return rpc__enc_end(&e);
}

int rpc_merkle_req_decode(struct rpc_merkle_req *out, struct rk_slice buf)
{
    struct wire__rd r;
    uint64_t extra;
    struct rpc_merkle_req m;
    memset(&m, 0, sizeof(m));
    int rc = rd_open(&r, buf, RPC_MSG_MERKLE, 5, &extra);
    if (rc == 0)
        rc = wire__rd_uint(&r, &m.epoch);
    if (rc == 0)
        rc = wire__rd_uint(&r, &m.start);
    if (rc == 0)
        rc = wire__rd_uint(&r, &m.end);
    if (rc == 0)
        rc = wire__rd_uint32(&r, &m.depth);
    if (rc == 0 && m.depth > RPC_MERKLE_MAX_DEPTH)
        rc = wire__rd_fail(&r, WIRE__RD_BAD, "Merkle depth over the limit");
    if (rc == 0)
        rc = rd_close(&r, extra);
    if (rc)
        return wire__rd_code(rc, RK_EPROTO);
    *out = m;
    return 0;
}

/* The leaves' length for depth when status is 0, else none. */
static size_t merkle_leaves_len(int32_t status, uint32_t depth)
{
    return status == 0 ? (size_t)8 << depth : 0;
}

int rpc_merkle_resp_encode(struct rpc_buf *out,
                           const struct rpc_merkle_resp *msg)
{
    struct rpc__enc e;
    if (msg->depth > RPC_MERKLE_MAX_DEPTH ||
        msg->leaves.len != merkle_leaves_len(msg->status, msg->depth))
        return RK_EBADREQ;
    rpc__enc_init(&e, out);
    enc_array(&e, 6);
    enc_u64(&e, RPC_MSG_MERKLE_RESP);
    enc_i64(&e, msg->status);
    enc_u64(&e, msg->hlc);
    enc_u64(&e, msg->depth);
    enc_u64(&e, msg->keys);
    enc_bin(&e, msg->leaves.p, msg->leaves.len);
    return rpc__enc_end(&e);
}

int rpc_merkle_resp_decode(struct rpc_merkle_resp *out, struct rk_slice buf)
{
    struct wire__rd r;
    uint64_t extra;
    struct rpc_merkle_resp m;
    memset(&m, 0, sizeof(m));
    int rc = rd_open(&r, buf, RPC_MSG_MERKLE_RESP, 6, &extra);
    if (rc == 0)
        rc = rd_status_hlc(&r, &m.status, &m.hlc);
    if (rc == 0)
        rc = wire__rd_uint32(&r, &m.depth);
    if (rc == 0 && m.depth > RPC_MERKLE_MAX_DEPTH)
        rc = wire__rd_fail(&r, WIRE__RD_BAD, "Merkle depth over the limit");
    if (rc == 0)
        rc = wire__rd_uint(&r, &m.keys);
    if (rc == 0)
        rc = wire__rd_raw(&r, WIRE__RD_BIN, (size_t)8 << RPC_MERKLE_MAX_DEPTH,
                          &m.leaves);
    if (rc == 0 && m.leaves.len != merkle_leaves_len(m.status, m.depth))
        rc = wire__rd_fail(&r, WIRE__RD_BAD, "leaves of the wrong length");
    if (rc == 0)
        rc = rd_close(&r, extra);
    if (rc)
        return wire__rd_code(rc, RK_EPROTO);
    *out = m;
    return 0;
}
