/*
 * rpc_msg.c - internode RPC messages: each message's fields in one table
 * (wire_internal.h), written and read by wire/'s one encoder and one
 * decoder (codec.c) through its msgpack writer and bounds-checked reader;
 * libsodium for the handshake MAC. The replica write and read and their
 * answers, sent for every client request, write their tables as field
 * lists (X-macros, codec_steps.h) that also expand into unrolled code.
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
 *   STREAM_CHUNK, STREAM_PUSH
 *              [7 or 8, status, hlc, start, end, pos, started, done, last,
 *               count, items, checksum]
 *              items: a bin holding `count` item arrays back to back,
 *              each [key, ts, flags, expiry, value]; checksum: XXH3-64 of
 *              the bin's bytes
 *   MERKLE     [9, epoch, start, end, depth]
 *   MERKLE_RESP [10, status, hlc, depth, keys, leaves]
 *   SCAN       [11, epoch, start, end, limit]
 *   SCAN_RESP  [12, status, hlc, done, next, count, items]
 *              items as a chunk's, every value empty
 * A decoder accepts extra trailing array elements (skipped, for later
 * fields) but no bytes after the array. A str or bin over its limit is
 * RK_ETOOLARGE even when its bytes are missing (docs/internode.md).
 */
#include "wire/rpc_msg.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include <sodium.h>

#include "wire/codec_steps.h"

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

/* ---- one message in, one message out ------------------------------------ */

/* Appends msg laid out by l, with the unrolled encoder when there is one
 * (encode NULL: the walker); on failure out is as it was. Inlined, so that
 * a constant encode is a direct call. */
WIRE__INLINE int encode_msg(struct rpc_buf *out,
                            const struct wire__layout *l,
                            void (*encode)(struct wire__wr *, const void *),
                            const void *msg)
{
    struct wire__wr w;
    wire__wr_init(&w, &out->data, &out->len, &out->cap);
    if (encode != NULL)
        encode(&w, msg);
    else
        wire__encode(&w, l, msg);
    return wire__wr_end(&w);
}

/* Decodes the message of layout l that is all of buf into out (size
 * bytes), with the unrolled decoder when there is one (decode NULL: the
 * walker), and only on success writes out. */
WIRE__INLINE int decode_msg(void *out,
                            size_t size,
                            const struct wire__layout *l,
                            int (*decode)(struct wire__rd *, void *, int),
                            struct rk_slice buf)
{
    union {
        struct rpc_handshake hs;
        struct rpc_write w;
        struct rpc_write_ack a;
        struct rpc_read rd;
        struct rpc_read_resp rr;
        struct rpc_stream_req sq;
        struct rpc_stream_chunk sc;
        struct rpc_merkle_req mq;
        struct rpc_merkle_resp mr;
        struct rpc_scan scan;
        struct rpc_scan_resp sr;
    } m;
    struct wire__rd r;
    int rc;
    if (buf.p == NULL && buf.len != 0)
        return RK_EPROTO;
    memset(&m, 0, size);
    wire__rd_init(&r, buf.p, buf.len);
    if (decode != NULL)
        rc = decode(&r, &m, 0);
    else
        rc = wire__decode(&r, l, &m, 0);
    if (rc == 0 && r.p != r.end)
        rc = RK_EPROTO; /* bytes after the message */
    if (rc != 0)
        return wire__rd_code(rc, RK_EPROTO);
    memcpy(out, &m, size);
    return 0;
}

/* Table shorthands: a str or bin of least..most bytes that is RK_ETOOLARGE
 * past most even when cut short; a message (an array opening with its type
 * tag); a group of fields read inline. */
#define LIMITED(k, T, m, least, most)                                  \
    WIRE__FIELD(k, T, m, .flags = WIRE__F_LIMIT_FIRST, .min = (least), \
                .max = (most))

#define MESSAGE(type_tag, T, a, ...) \
    WIRE__LAYOUT(MESSAGE, T, a, .tag = (type_tag), __VA_ARGS__)
#define GROUP_OF(T, a, ...) WIRE__LAYOUT(TUPLE, T, a, __VA_ARGS__)

/* A message's head and type, r left at its first field; 0 or RK_EPROTO.
 * `fields`: how many the head must announce after the type, at least. */
static int peek_type(struct wire__rd *r,
                     uint64_t *type,
                     struct rk_slice buf,
                     uint64_t fields)
{
    uint64_t n;
    if (buf.p == NULL && buf.len != 0)
        return RK_EPROTO;
    wire__rd_init(r, buf.p, buf.len);
    if (wire__rd_head(r, false, &n) || n < 1 + fields ||
        wire__rd_uint(r, type) || *type > INT32_MAX)
        return RK_EPROTO;
    return 0;
}

int rpc_msg_type_peek(enum rpc_msg_type *out, struct rk_slice buf)
{
    struct wire__rd r;
    uint64_t t;
    if (peek_type(&r, &t, buf, 0))
        return RK_EPROTO;
    *out = (enum rpc_msg_type)t;
    return 0;
}

int rpc_read_token_peek(uint64_t *out, struct rk_slice buf)
{
    struct wire__rd r;
    uint64_t t;
    if (peek_type(&r, &t, buf, 1) || t != RPC_MSG_READ ||
        wire__rd_uint(&r, out))
        return RK_EPROTO;
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

/* A record inline: ts, flags, expiry, value. */
#define RECORD_LIST(X)                                                    \
    X(FIELD, UINT, struct rpc_record, ts)                                 \
    X(FIELD, UINT32, struct rpc_record, flags)                            \
    X(FIELD, UINT, struct rpc_record, expiry)                             \
    X(FIELD, BIN, struct rpc_record, value, .flags = WIRE__F_LIMIT_FIRST, \
      .max = RK_MAX_VALUE)

WIRE__LIST_FIELDS(record, RECORD_LIST);
static const struct wire__layout record_layout =
    GROUP_OF(struct rpc_record, record_fields);
WIRE__LIST_CODE(record, RECORD_LIST)

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

static int hs_names_check(struct wire__rd *r, const void *base)
{
    if (check_names(base) != 0)
        return wire__rd_fail(r, WIRE__RD_BAD, "a name empty or too long");
    return 0;
}

/* [1, version, role, cluster, from, to, nonce, peer_nonce, time, mac] */
static const struct wire__field hs_fields[] = {
    WIRE__FIELD(UINT32,
                struct rpc_handshake,
                version,
                .min = RPC_HS_VERSION,
                .max = RPC_HS_VERSION,
                .err = RK_EVERSION),
    WIRE__FIELD(UINT32, struct rpc_handshake, role, .max = RPC_HS_PROOF),
    LIMITED(STR, struct rpc_handshake, cluster, 0, RPC_NAME_MAX),
    LIMITED(STR, struct rpc_handshake, from, 0, RPC_NAME_MAX),
    LIMITED(STR, struct rpc_handshake, to, 0, RPC_NAME_MAX),
    WIRE__FIELD(FIXED, struct rpc_handshake, nonce, .max = RPC_NONCE_BYTES),
    WIRE__FIELD(
        FIXED, struct rpc_handshake, peer_nonce, .max = RPC_NONCE_BYTES),
    WIRE__FIELD(UINT, struct rpc_handshake, time_ms),
    WIRE__FIELD(FIXED, struct rpc_handshake, mac, .max = RPC_MAC_BYTES),
};

static const struct wire__layout hs_layout = MESSAGE(RPC_MSG_HANDSHAKE,
                                                     struct rpc_handshake,
                                                     hs_fields,
                                                     .check = hs_names_check);

int rpc_handshake_encode(struct rpc_buf *out, const struct rpc_handshake *hs)
{
    int rc = check_names(hs);
    if (rc)
        return rc;
    return encode_msg(out, &hs_layout, NULL, hs);
}

int rpc_handshake_decode(struct rpc_handshake *out, struct rk_slice buf)
{
    return decode_msg(out, sizeof(*out), &hs_layout, NULL, buf);
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
    memset(&got, 0, sizeof(got)); /* gcc -O3 cannot see decode_msg fill it */
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

/* [2, token, epoch, key, ts, flags, expiry, value] */
#define WRITE_LIST(X)                                                  \
    X(FIELD, UINT, struct rpc_write, token)                            \
    X(FIELD, UINT, struct rpc_write, epoch)                            \
    X(FIELD, BIN, struct rpc_write, key, .flags = WIRE__F_LIMIT_FIRST, \
      .min = 1, .max = RK_MAX_KEY)                                     \
    X(GROUP, offsetof(struct rpc_write, rec), record)

WIRE__LIST_FIELDS(write, WRITE_LIST);
static const struct wire__layout write_layout =
    MESSAGE(RPC_MSG_WRITE, struct rpc_write, write_fields);
WIRE__LIST_CODE(write, WRITE_LIST)
WIRE__MESSAGE_CODE(write)

int rpc_write_encode(struct rpc_buf *out, const struct rpc_write *msg)
{
    int rc = check_key(msg->key);
    if (rc)
        return rc;
    if (msg->rec.value.len > RK_MAX_VALUE)
        return RK_ETOOLARGE;
    return encode_msg(out, &write_layout, encode_write, msg);
}

int rpc_write_decode(struct rpc_write *out, struct rk_slice buf)
{
    return decode_msg(out, sizeof(*out), &write_layout, decode_write, buf);
}

/* [3, status, hlc] */
#define WRITE_ACK_LIST(X)                          \
    X(FIELD, STATUS, struct rpc_write_ack, status) \
    X(FIELD, UINT, struct rpc_write_ack, hlc)

WIRE__LIST_FIELDS(write_ack, WRITE_ACK_LIST);
static const struct wire__layout write_ack_layout =
    MESSAGE(RPC_MSG_WRITE_ACK, struct rpc_write_ack, write_ack_fields);
WIRE__LIST_CODE(write_ack, WRITE_ACK_LIST)
WIRE__MESSAGE_CODE(write_ack)

int rpc_write_ack_encode(struct rpc_buf *out, const struct rpc_write_ack *msg)
{
    return encode_msg(out, &write_ack_layout, encode_write_ack, msg);
}

int rpc_write_ack_decode(struct rpc_write_ack *out, struct rk_slice buf)
{
    return decode_msg(out, sizeof(*out), &write_ack_layout, decode_write_ack,
                      buf);
}

/* ---- replica read ------------------------------------------------------- */

/* [4, token, epoch, key, digest?] */
#define READ_LIST(X)                                                  \
    X(FIELD, UINT, struct rpc_read, token)                            \
    X(FIELD, UINT, struct rpc_read, epoch)                            \
    X(FIELD, BIN, struct rpc_read, key, .flags = WIRE__F_LIMIT_FIRST, \
      .min = 1, .max = RK_MAX_KEY)                                    \
    X(FIELD, BOOL, struct rpc_read, digest)

WIRE__LIST_FIELDS(read, READ_LIST);
static const struct wire__layout read_layout =
    MESSAGE(RPC_MSG_READ, struct rpc_read, read_fields);
WIRE__LIST_CODE(read, READ_LIST)
WIRE__MESSAGE_CODE(read)

int rpc_read_encode(struct rpc_buf *out, const struct rpc_read *msg)
{
    int rc = check_key(msg->key);
    if (rc)
        return rc;
    return encode_msg(out, &read_layout, encode_read, msg);
}

int rpc_read_decode(struct rpc_read *out, struct rk_slice buf)
{
    return decode_msg(out, sizeof(*out), &read_layout, decode_read, buf);
}

/* A digest inline: ts, flags, expiry, value_hash. */
#define DIGEST_LIST(X)                         \
    X(FIELD, UINT, struct rpc_digest, ts)      \
    X(FIELD, UINT32, struct rpc_digest, flags) \
    X(FIELD, UINT, struct rpc_digest, expiry)  \
    X(FIELD, UINT, struct rpc_digest, value_hash)

WIRE__LIST_FIELDS(digest, DIGEST_LIST);
static const struct wire__layout digest_layout =
    GROUP_OF(struct rpc_digest, digest_fields);
WIRE__LIST_CODE(digest, DIGEST_LIST)

/* When found: is_digest, then the digest or the record. */
#define FOUND_LIST(X)                                       \
    X(FIELD, BOOL, struct rpc_read_resp, is_digest)         \
    X(WHEN, offsetof(struct rpc_read_resp, dig),            \
      offsetof(struct rpc_read_resp, is_digest), 1, digest) \
    X(WHEN, offsetof(struct rpc_read_resp, rec),            \
      offsetof(struct rpc_read_resp, is_digest), 0, record)

WIRE__LIST_FIELDS(found, FOUND_LIST);
static const struct wire__layout found_layout =
    GROUP_OF(struct rpc_read_resp, found_fields);
WIRE__LIST_CODE(found, FOUND_LIST)

/* [5, status, hlc, found, (is_digest, ts, flags, expiry, value or hash)];
 * the found group is at offset 0: it reads more of the same struct. */
#define READ_RESP_LIST(X)                          \
    X(FIELD, STATUS, struct rpc_read_resp, status) \
    X(FIELD, UINT, struct rpc_read_resp, hlc)      \
    X(FIELD, BOOL, struct rpc_read_resp, found)    \
    X(WHEN, 0, offsetof(struct rpc_read_resp, found), 1, found)

WIRE__LIST_FIELDS(read_resp, READ_RESP_LIST);
static const struct wire__layout read_resp_layout =
    MESSAGE(RPC_MSG_READ_RESP, struct rpc_read_resp, read_resp_fields);
WIRE__LIST_CODE(read_resp, READ_RESP_LIST)
WIRE__MESSAGE_CODE(read_resp)

int rpc_read_resp_encode(struct rpc_buf *out, const struct rpc_read_resp *msg)
{
    if (msg->found && !msg->is_digest && msg->rec.value.len > RK_MAX_VALUE)
        return RK_ETOOLARGE;
    return encode_msg(out, &read_resp_layout, encode_read_resp, msg);
}

int rpc_read_resp_decode(struct rpc_read_resp *out, struct rk_slice buf)
{
    return decode_msg(out, sizeof(*out), &read_resp_layout, decode_read_resp,
                      buf);
}

/* ---- range streaming ---------------------------------------------------- */

static int pos_check(struct wire__rd *r, const void *base)
{
    const struct rpc_stream_pos *p = base;
    if (p->last.len && !p->started)
        return wire__rd_fail(r, WIRE__RD_BAD, "a resume key before the start");
    return 0;
}

/* A stream position inline: start, end, pos, started, done, last. */
static const struct wire__field pos_fields[] = {
    WIRE__FIELD(UINT, struct rpc_stream_pos, start),
    WIRE__FIELD(UINT, struct rpc_stream_pos, end),
    WIRE__FIELD(UINT, struct rpc_stream_pos, pos),
    WIRE__FIELD(BOOL, struct rpc_stream_pos, started),
    WIRE__FIELD(BOOL, struct rpc_stream_pos, done),
    LIMITED(BIN, struct rpc_stream_pos, last, 0, RPC_STREAM_LAST_MAX),
};

static const struct wire__layout pos_group =
    GROUP_OF(struct rpc_stream_pos, pos_fields, .check = pos_check);

/* [6, epoch, start, end, pos, started, done, last, max_bytes] */
static const struct wire__field stream_req_fields[] = {
    WIRE__FIELD(UINT, struct rpc_stream_req, epoch),
    WIRE__GROUP(struct rpc_stream_req, at, &pos_group),
    WIRE__FIELD(UINT32, struct rpc_stream_req, max_bytes),
};

static const struct wire__layout stream_req_layout =
    MESSAGE(RPC_MSG_STREAM, struct rpc_stream_req, stream_req_fields);

int rpc_stream_req_encode(struct rpc_buf *out, const struct rpc_stream_req *msg)
{
    if (msg->at.last.len > RPC_STREAM_LAST_MAX)
        return RK_ETOOLARGE;
    return encode_msg(out, &stream_req_layout, NULL, msg);
}

int rpc_stream_req_decode(struct rpc_stream_req *out, struct rk_slice buf)
{
    return decode_msg(out, sizeof(*out), &stream_req_layout, NULL, buf);
}

/* One item of a chunk's items. */
struct rpc__item {
    struct rk_slice key;
    struct rpc_record rec;
};

/* [key, ts, flags, expiry, value] */
static const struct wire__field item_fields[] = {
    LIMITED(BIN, struct rpc__item, key, 1, RK_MAX_KEY),
    WIRE__GROUP(struct rpc__item, rec, &record_layout),
};

static const struct wire__layout item_layout =
    GROUP_OF(struct rpc__item, item_fields);

int rpc_stream_item_add(struct rpc_buf *items,
                        struct rk_slice key,
                        const struct rpc_record *rec)
{
    if (key.len == 0)
        return RK_EBADREQ;
    if (key.len > RK_MAX_KEY || rec->value.len > RK_MAX_VALUE)
        return RK_ETOOLARGE;
    struct rpc__item item = {key, *rec};
    return encode_msg(items, &item_layout, NULL, &item);
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
    struct rpc__item item;
    memset(&item, 0, sizeof(item));
    wire__rd_init(&r, it->p, it->len);
    int rc = wire__decode(&r, &item_layout, &item, 0);
    *key = item.key;
    *rec = item.rec;
    if (rc)
        return wire__rd_code(rc, RK_EPROTO);
    size_t used = (size_t)(r.p - it->p);
    it->p += used;
    it->len -= used;
    return 1;
}

static uint64_t items_hash(struct rk_slice items)
{
    return XXH3_64bits(items.len ? (const void *)items.p : "", items.len);
}

/* [7 or 8, status, hlc, start, end, pos, started, done, last, count, items,
 *  checksum] */
static const struct wire__field chunk_fields[] = {
    WIRE__FIELD(STATUS, struct rpc_stream_chunk, status),
    WIRE__FIELD(UINT, struct rpc_stream_chunk, hlc),
    WIRE__GROUP(struct rpc_stream_chunk, next, &pos_group),
    WIRE__FIELD(
        UINT32, struct rpc_stream_chunk, count, .max = RPC_STREAM_ITEMS_MAX),
    WIRE__FIELD(BIN, struct rpc_stream_chunk, items),
    WIRE__FIELD(UINT, struct rpc_stream_chunk, checksum),
};

static const struct wire__layout chunk_layout =
    MESSAGE(RPC_MSG_STREAM_CHUNK, struct rpc_stream_chunk, chunk_fields);
static const struct wire__layout push_layout =
    MESSAGE(RPC_MSG_STREAM_PUSH, struct rpc_stream_chunk, chunk_fields);

/* Every item of items must decode, and there must be exactly count of
 * them: 0, RK_EPROTO or RK_ETOOLARGE. */
static int items_check(struct rk_slice items, uint32_t count)
{
    struct rk_slice it = items, key;
    struct rpc_record rec;
    uint32_t seen = 0;
    int rc;
    for (;;) {
        rc = rpc_stream_item_next(&it, &key, &rec);
        if (rc <= 0)
            break;
        seen++;
    }
    if (rc < 0 || seen != count)
        return rc < 0 && rc != RK_EPROTO ? rc : RK_EPROTO;
    return 0;
}

static int chunk_encode(struct rpc_buf *out,
                        const struct rpc_stream_chunk *msg,
                        const struct wire__layout *l)
{
    if (msg->next.last.len > RPC_STREAM_LAST_MAX)
        return RK_ETOOLARGE;
    struct rpc_stream_chunk m = *msg;
    m.checksum = items_hash(msg->items);
    return encode_msg(out, l, NULL, &m);
}

static int chunk_decode(struct rpc_stream_chunk *out,
                        struct rk_slice buf,
                        const struct wire__layout *l)
{
    struct rpc_stream_chunk m;
    int rc = decode_msg(&m, sizeof(m), l, NULL, buf);
    if (rc)
        return rc;
    if (m.checksum != items_hash(m.items))
        return RK_EPROTO;
    if ((rc = items_check(m.items, m.count)))
        return rc;
    *out = m;
    return 0;
}

int rpc_stream_chunk_encode(struct rpc_buf *out,
                            const struct rpc_stream_chunk *msg)
{
    return chunk_encode(out, msg, &chunk_layout);
}

int rpc_stream_chunk_decode(struct rpc_stream_chunk *out, struct rk_slice buf)
{
    return chunk_decode(out, buf, &chunk_layout);
}

int rpc_stream_push_encode(struct rpc_buf *out,
                           const struct rpc_stream_chunk *msg)
{
    return chunk_encode(out, msg, &push_layout);
}

int rpc_stream_push_decode(struct rpc_stream_chunk *out, struct rk_slice buf)
{
    return chunk_decode(out, buf, &push_layout);
}

/* ---- Merkle leaves ------------------------------------------------------ */

/* [9, epoch, start, end, depth] */
static const struct wire__field merkle_req_fields[] = {
    WIRE__FIELD(UINT, struct rpc_merkle_req, epoch),
    WIRE__FIELD(UINT, struct rpc_merkle_req, start),
    WIRE__FIELD(UINT, struct rpc_merkle_req, end),
    WIRE__FIELD(
        UINT32, struct rpc_merkle_req, depth, .max = RPC_MERKLE_MAX_DEPTH),
};

static const struct wire__layout merkle_req_layout =
    MESSAGE(RPC_MSG_MERKLE, struct rpc_merkle_req, merkle_req_fields);

int rpc_merkle_req_encode(struct rpc_buf *out, const struct rpc_merkle_req *msg)
{
    if (msg->depth > RPC_MERKLE_MAX_DEPTH)
        return RK_EBADREQ;
    return encode_msg(out, &merkle_req_layout, NULL, msg);
}

int rpc_merkle_req_decode(struct rpc_merkle_req *out, struct rk_slice buf)
{
    return decode_msg(out, sizeof(*out), &merkle_req_layout, NULL, buf);
}

/* The leaves' length for depth when status is 0, else none. */
static size_t merkle_leaves_len(int32_t status, uint32_t depth)
{
    return status == 0 ? (size_t)8 << depth : 0;
}

static int merkle_resp_check(struct wire__rd *r, const void *base)
{
    const struct rpc_merkle_resp *m = base;
    if (m->leaves.len != merkle_leaves_len(m->status, m->depth))
        return wire__rd_fail(r, WIRE__RD_BAD, "leaves of the wrong length");
    return 0;
}

/* [10, status, hlc, depth, keys, leaves] */
static const struct wire__field merkle_resp_fields[] = {
    WIRE__FIELD(STATUS, struct rpc_merkle_resp, status),
    WIRE__FIELD(UINT, struct rpc_merkle_resp, hlc),
    WIRE__FIELD(
        UINT32, struct rpc_merkle_resp, depth, .max = RPC_MERKLE_MAX_DEPTH),
    WIRE__FIELD(UINT, struct rpc_merkle_resp, keys),
    WIRE__FIELD(BIN,
                struct rpc_merkle_resp,
                leaves,
                .max = (size_t)8 << RPC_MERKLE_MAX_DEPTH),
};

static const struct wire__layout merkle_resp_layout =
    MESSAGE(RPC_MSG_MERKLE_RESP,
            struct rpc_merkle_resp,
            merkle_resp_fields,
            .check = merkle_resp_check);

int rpc_merkle_resp_encode(struct rpc_buf *out,
                           const struct rpc_merkle_resp *msg)
{
    if (msg->depth > RPC_MERKLE_MAX_DEPTH ||
        msg->leaves.len != merkle_leaves_len(msg->status, msg->depth))
        return RK_EBADREQ;
    return encode_msg(out, &merkle_resp_layout, NULL, msg);
}

int rpc_merkle_resp_decode(struct rpc_merkle_resp *out, struct rk_slice buf)
{
    return decode_msg(out, sizeof(*out), &merkle_resp_layout, NULL, buf);
}

/* ---- key scan ----------------------------------------------------------- */

/* [11, epoch, start, end, limit] */
static const struct wire__field scan_fields[] = {
    WIRE__FIELD(UINT, struct rpc_scan, epoch),
    WIRE__FIELD(UINT, struct rpc_scan, start),
    WIRE__FIELD(UINT, struct rpc_scan, end),
    WIRE__FIELD(
        UINT32, struct rpc_scan, limit, .min = 1, .max = RPC_SCAN_LIMIT_MAX),
};

static const struct wire__layout scan_layout =
    MESSAGE(RPC_MSG_SCAN, struct rpc_scan, scan_fields);

int rpc_scan_encode(struct rpc_buf *out, const struct rpc_scan *msg)
{
    if (msg->limit < 1 || msg->limit > RPC_SCAN_LIMIT_MAX)
        return RK_EBADREQ;
    return encode_msg(out, &scan_layout, NULL, msg);
}

int rpc_scan_decode(struct rpc_scan *out, struct rk_slice buf)
{
    return decode_msg(out, sizeof(*out), &scan_layout, NULL, buf);
}

/* [12, status, hlc, done, next, count, items] */
static const struct wire__field scan_resp_fields[] = {
    WIRE__FIELD(STATUS, struct rpc_scan_resp, status),
    WIRE__FIELD(UINT, struct rpc_scan_resp, hlc),
    WIRE__FIELD(BOOL, struct rpc_scan_resp, done),
    WIRE__FIELD(UINT, struct rpc_scan_resp, next),
    WIRE__FIELD(
        UINT32, struct rpc_scan_resp, count, .max = RPC_STREAM_ITEMS_MAX),
    WIRE__FIELD(BIN, struct rpc_scan_resp, items),
};

static const struct wire__layout scan_resp_layout =
    MESSAGE(RPC_MSG_SCAN_RESP, struct rpc_scan_resp, scan_resp_fields);

int rpc_scan_resp_encode(struct rpc_buf *out, const struct rpc_scan_resp *msg)
{
    if (msg->count > RPC_STREAM_ITEMS_MAX)
        return RK_ETOOLARGE;
    return encode_msg(out, &scan_resp_layout, NULL, msg);
}

int rpc_scan_resp_decode(struct rpc_scan_resp *out, struct rk_slice buf)
{
    struct rpc_scan_resp m;
    int rc = decode_msg(&m, sizeof(m), &scan_resp_layout, NULL, buf);
    if (rc)
        return rc;
    if ((rc = items_check(m.items, m.count)))
        return rc;
    *out = m;
    return 0;
}

/* ---- the unrolled messages, for their test ------------------------------ */

size_t rpc__unrolled(const struct wire__unrolled **out)
{
    static const struct wire__unrolled all[] = {
        WIRE__UNROLLED(write, struct rpc_write),
        WIRE__UNROLLED(write_ack, struct rpc_write_ack),
        WIRE__UNROLLED(read, struct rpc_read),
        WIRE__UNROLLED(read_resp, struct rpc_read_resp),
    };
    *out = all;
    return sizeof(all) / sizeof(all[0]);
}
