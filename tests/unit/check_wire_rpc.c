/*
 * check_wire_rpc.c - the internode RPC message codecs: golden byte vectors
 * (a change of encoding must fail here, not split a mixed-version cluster),
 * round trips, standard msgpack (msgpack-c reads what we write), every
 * truncation and every single-byte corruption handled without a crash, size
 * limits, and the handshake's MACs, roles, nonce and name binding. The
 * range streaming, Merkle and SCAN messages are check_wire_rpc_stream.c's.
 */
#include <errno.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <check.h>
#include <msgpack.h>

#include "common/rk.h"
#include "golden.h"
#include "tests/unit/rpc_golden.h"
#include "wire/rpc_msg.h"

static const struct rpc_write golden_write = {
    .token = UINT64_C(0x0102030405060708),
    .epoch = 7,
    .key = {(const uint8_t *)"k", 1},
    .rec = {.ts = 1000,
            .flags = RPC_REC_TOMBSTONE,
            .expiry = 0,
            .value = {(const uint8_t *)"v", 1}},
};

#define GOLDEN_WRITE   "9802cf010203040506070807c4016bcd03e80100c40176"
#define GOLDEN_ACK     "9303d186e72a"
#define GOLDEN_READ    "95040102c4026162c3"
#define GOLDEN_RR_NF   "94050005c2"
#define GOLDEN_RR_DATA "99050005c3c2090000c40378797a"
#define GOLDEN_RR_DIG  "99050005c3c3090000cfffffffffffffffff"
#define GOLDEN_KEY \
    "f12beaad7bc9ee4440f7e73d0ddef90bb348d9322ffee1fb297f7e86fc2cbbb0"
/* The handshake of n1 (nonce aa..) reaching n2 (nonce bb..) in cluster c1
 * under rpc_key_derive("secret"), at times 123, 124, 125. The MACs were
 * computed apart from this code (Python's hmac, hashlib.sha512, the first
 * 32 bytes) over the layout of rpc_handshake_sign. */
#define GOLDEN_HS_HELLO                                                  \
    "9a010200a26331a26e31a26e32c410aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaac410" \
    "000000000000000000000000000000007bc42000000000000000000000000000"   \
    "00000000000000000000000000000000000000"
#define GOLDEN_HS_ANSWER                                                 \
    "9a010201a26331a26e32a26e31c410bbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbc410" \
    "aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa7cc420d9b38244f2510fd8efd722326c"   \
    "ff3e84e4cd7bf5b54d96f2016284bd7ab483ef"
#define GOLDEN_HS_PROOF                                                  \
    "9a010202a26331a26e31a26e32c410aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaac410" \
    "bbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbb7dc42032911fa07d50a1473234fa819e"   \
    "3f13cf7e42a516b8c3427a8cab66d394eed34a"

#define GOLDEN_INT_WIDTHS                                                  \
    "930300009303ff7f9303e0cc809303d0dfccff9303d080cd01009303d1ff7fcdffff" \
    "9303d18000ce000100009303d2ffff7fffceffffffff9303d2fffeee90cf00000001" \
    "000000009303d280000000cfffffffffffffffff"
#define GOLDEN_LENGTHS_LEN  395728
#define GOLDEN_LENGTHS_HASH UINT64_C(0xa456a164ed7fc6e1)

START_TEST(golden_vectors)
{
    struct rpc_buf b = RPC_BUF_INIT;
    ck_assert_int_eq(rpc_write_encode(&b, &golden_write), 0);
    assert_bytes(&b, GOLDEN_WRITE);
    rpc_buf_reset(&b);

    struct rpc_write_ack ack = {RK_ETIMEOUT, 42};
    ck_assert_int_eq(rpc_write_ack_encode(&b, &ack), 0);
    assert_bytes(&b, GOLDEN_ACK);
    rpc_buf_reset(&b);

    struct rpc_read rd = {
        .token = 1, .epoch = 2, .key = RK_SLICE("ab", 2), .digest = true};
    ck_assert_int_eq(rpc_read_encode(&b, &rd), 0);
    assert_bytes(&b, GOLDEN_READ);
    rpc_buf_reset(&b);

    struct rpc_read_resp rr;
    memset(&rr, 0, sizeof(rr));
    rr.hlc = 5;
    ck_assert_int_eq(rpc_read_resp_encode(&b, &rr), 0);
    assert_bytes(&b, GOLDEN_RR_NF);
    rpc_buf_reset(&b);
    rr.found = true;
    rr.rec.ts = 9;
    rr.rec.value = RK_SLICE("xyz", 3);
    ck_assert_int_eq(rpc_read_resp_encode(&b, &rr), 0);
    assert_bytes(&b, GOLDEN_RR_DATA);
    rpc_buf_reset(&b);
    rr.is_digest = true;
    rr.dig.ts = 9;
    rr.dig.value_hash = UINT64_MAX;
    ck_assert_int_eq(rpc_read_resp_encode(&b, &rr), 0);
    assert_bytes(&b, GOLDEN_RR_DIG);
    rpc_buf_free(&b);

    uint8_t key[RPC_KEY_BYTES], want[RPC_KEY_BYTES];
    rpc_key_derive(key, RK_SLICE("secret", 6));
    unhex(want, GOLDEN_KEY);
    ck_assert_mem_eq(key, want, RPC_KEY_BYTES);

    uint8_t nc[RPC_NONCE_BYTES], ns[RPC_NONCE_BYTES];
    uint8_t hello[RPC_HANDSHAKE_MAX], answer[RPC_HANDSHAKE_MAX];
    uint8_t proof[RPC_HANDSHAKE_MAX];
    size_t hl = 0, al = 0, pl = 0;
    struct rk_slice c1 = RK_SLICE("c1", 2), none = RK_SLICE(NULL, 0);
    memset(nc, 0xaa, sizeof(nc));
    memset(ns, 0xbb, sizeof(ns));
    ck_assert_int_eq(rpc_handshake_make(hello, sizeof(hello), &hl, key, c1,
                                        RK_SLICE("n1", 2), RK_SLICE("n2", 2),
                                        nc, 123, none),
                     0);
    struct rpc_buf hb = {hello, hl, hl};
    assert_bytes(&hb, GOLDEN_HS_HELLO);
    ck_assert_int_eq(rpc_handshake_make(answer, sizeof(answer), &al, key, c1,
                                        RK_SLICE("n2", 2), none, ns, 124,
                                        RK_SLICE(hello, hl)),
                     0);
    hb = (struct rpc_buf){answer, al, al};
    assert_bytes(&hb, GOLDEN_HS_ANSWER);
    ck_assert_int_eq(rpc_handshake_make(proof, sizeof(proof), &pl, key, c1,
                                        RK_SLICE("n1", 2), none, nc, 125,
                                        RK_SLICE(answer, al)),
                     0);
    hb = (struct rpc_buf){proof, pl, pl};
    assert_bytes(&hb, GOLDEN_HS_PROOF);
}
END_TEST

/* Every integer width of both signs, and str/bin lengths at each msgpack
 * boundary, through the messages that carry them: the bytes of today's
 * encoder pinned by length and XXH3-64 (a mismatch prints both). */
START_TEST(golden_boundaries)
{
    static const int32_t status[] = {0,    -1,     -32,    -33,    -128,
                                     -129, -32768, -32769, -70000, INT32_MIN};
    static const uint64_t num[] = {
        0,         127,        128,
        255,       256,        65535,
        65536,     UINT32_MAX, (uint64_t)UINT32_MAX + 1,
        UINT64_MAX};
    struct rpc_buf b = RPC_BUF_INIT;
    for (size_t i = 0; i < sizeof(num) / sizeof(num[0]); i++) {
        struct rpc_write_ack a = {status[i], num[i]};
        ck_assert_int_eq(rpc_write_ack_encode(&b, &a), 0);
    }
    assert_bytes(&b, GOLDEN_INT_WIDTHS);
    rpc_buf_reset(&b);

    static const size_t lens[] = {0, 1, 31, 32, 255, 256, 65535, 65536};
    uint8_t *big = malloc(70000);
    ck_assert_ptr_nonnull(big);
    for (size_t i = 0; i < 70000; i++)
        big[i] = (uint8_t)('a' + i % 26);
    for (size_t i = 0; i < sizeof(lens) / sizeof(lens[0]); i++) {
        struct rpc_write w = {.token = num[i],
                              .epoch = num[i + 1],
                              .key = RK_SLICE(big, lens[i] ? lens[i] : 1),
                              .rec = {.ts = num[i + 2],
                                      .flags = (uint32_t)num[i],
                                      .expiry = num[i + 1],
                                      .value = RK_SLICE(big, lens[i])}};
        ck_assert_int_eq(rpc_write_encode(&b, &w), 0);
        struct rpc_read_resp rr = {
            .status = status[i], .hlc = num[i], .found = true, .rec = w.rec};
        ck_assert_int_eq(rpc_read_resp_encode(&b, &rr), 0);
    }
    struct rpc_handshake hs = {.version = RPC_HS_VERSION,
                               .role = RPC_HS_ANSWER,
                               .cluster = RK_SLICE(big, 31),
                               .from = RK_SLICE(big, 32),
                               .to = RK_SLICE(big, RPC_NAME_MAX),
                               .time_ms = UINT64_MAX};
    memset(hs.nonce, 0xab, sizeof(hs.nonce));
    memset(hs.mac, 0xcd, sizeof(hs.mac));
    ck_assert_int_eq(rpc_handshake_encode(&b, &hs), 0);
    golden_digest_check(b.data, b.len, GOLDEN_LENGTHS_LEN, GOLDEN_LENGTHS_HASH,
                        "lengths");
    rpc_buf_free(&b);
    free(big);
}
END_TEST

START_TEST(golden_decode)
{
    uint8_t buf[256];
    size_t n = unhex(buf, GOLDEN_WRITE);
    struct rpc_write w;
    ck_assert_int_eq(rpc_write_decode(&w, RK_SLICE(buf, n)), 0);
    ck_assert_uint_eq(w.token, golden_write.token);
    ck_assert_uint_eq(w.epoch, 7);
    ck_assert_uint_eq(w.key.len, 1);
    ck_assert_ptr_eq(w.key.p, buf + 14); /* borrowed, not copied */
    ck_assert_uint_eq(w.rec.ts, 1000);
    ck_assert_uint_eq(w.rec.flags, RPC_REC_TOMBSTONE);
    ck_assert_uint_eq(w.rec.value.len, 1);
    ck_assert_int_eq(w.rec.value.p[0], 'v');

    n = unhex(buf, GOLDEN_ACK);
    struct rpc_write_ack a;
    ck_assert_int_eq(rpc_write_ack_decode(&a, RK_SLICE(buf, n)), 0);
    ck_assert_int_eq(a.status, RK_ETIMEOUT);
    ck_assert_uint_eq(a.hlc, 42);

    enum rpc_msg_type t;
    ck_assert_int_eq(rpc_msg_type_peek(&t, RK_SLICE(buf, n)), 0);
    ck_assert_int_eq(t, RPC_MSG_WRITE_ACK);
    /* A message of another type is refused by each decoder. */
    ck_assert_int_eq(rpc_write_decode(&w, RK_SLICE(buf, n)), RK_EPROTO);
    struct rpc_read_resp rr;
    ck_assert_int_eq(rpc_read_resp_decode(&rr, RK_SLICE(buf, n)), RK_EPROTO);

    n = unhex(buf, GOLDEN_RR_DIG);
    ck_assert_int_eq(rpc_read_resp_decode(&rr, RK_SLICE(buf, n)), 0);
    ck_assert(rr.found && rr.is_digest);
    ck_assert_uint_eq(rr.dig.ts, 9);
    ck_assert_uint_eq(rr.dig.value_hash, UINT64_MAX);
}
END_TEST

/* msgpack-c itself reads our bytes as the expected standard objects. */
/* rpc_read_token_peek: a READ's token, as rpc_read_decode reads it (a
 * token of every width); any other message, or one cut before its token,
 * is refused. */
START_TEST(read_token_peek)
{
    const uint64_t toks[] = {
        0,         1,       0x7f,       0x80,
        0xffff,    0x10000, UINT32_MAX, (uint64_t)UINT32_MAX + 1,
        UINT64_MAX};
    struct rpc_buf b = RPC_BUF_INIT;
    for (size_t i = 0; i < sizeof(toks) / sizeof(toks[0]); i++) {
        struct rpc_read rd = {.token = toks[i],
                              .epoch = 3,
                              .key = RK_SLICE("k", 1),
                              .digest = i % 2};
        rpc_buf_reset(&b);
        ck_assert_int_eq(rpc_read_encode(&b, &rd), 0);
        uint64_t t = ~toks[i];
        ck_assert_int_eq(rpc_read_token_peek(&t, RK_SLICE(b.data, b.len)), 0);
        ck_assert_uint_eq(t, toks[i]);
        for (size_t cut = 0; cut < b.len; cut++) {
            int rc = rpc_read_token_peek(&t, RK_SLICE(b.data, cut));
            if (rc == 0) /* the token was whole before the cut */
                ck_assert_uint_eq(t, toks[i]);
            else
                ck_assert_int_eq(rc, RK_EPROTO);
        }
    }
    rpc_buf_reset(&b);
    ck_assert_int_eq(rpc_write_encode(&b, &golden_write), 0);
    uint64_t t;
    ck_assert_int_eq(rpc_read_token_peek(&t, RK_SLICE(b.data, b.len)),
                     RK_EPROTO); /* a WRITE starts with a token too */
    ck_assert_int_eq(rpc_read_token_peek(&t, RK_SLICE(NULL, 0)), RK_EPROTO);
    uint8_t two[] = {0x91, 0x04}; /* [4]: a READ's type, no token */
    ck_assert_int_eq(rpc_read_token_peek(&t, RK_SLICE(two, 2)), RK_EPROTO);
    rpc_buf_free(&b);
}
END_TEST

START_TEST(standard_msgpack)
{
    struct rpc_buf b = RPC_BUF_INIT;
    ck_assert_int_eq(rpc_write_encode(&b, &golden_write), 0);
    msgpack_unpacked u;
    msgpack_unpacked_init(&u);
    size_t off = 0;
    ck_assert_int_eq(msgpack_unpack_next(&u, (const char *)b.data, b.len, &off),
                     MSGPACK_UNPACK_SUCCESS);
    ck_assert_uint_eq(off, b.len);
    msgpack_object o = u.data;
    ck_assert_int_eq(o.type, MSGPACK_OBJECT_ARRAY);
    ck_assert_uint_eq(o.via.array.size, 8);
    ck_assert_uint_eq(o.via.array.ptr[0].via.u64, RPC_MSG_WRITE);
    ck_assert_uint_eq(o.via.array.ptr[1].via.u64, golden_write.token);
    ck_assert_int_eq(o.via.array.ptr[3].type, MSGPACK_OBJECT_BIN);
    ck_assert_int_eq(o.via.array.ptr[7].type, MSGPACK_OBJECT_BIN);
    msgpack_unpacked_destroy(&u);
    rpc_buf_free(&b);
}
END_TEST

/* Decoders accept later fields appended to a message (forward
 * compatibility) but refuse bytes after the array. */
START_TEST(extra_fields_and_trailing_bytes)
{
    uint8_t buf[256];
    size_t n = unhex(buf, GOLDEN_ACK);
    buf[0] = 0x95; /* 5 elements: add a map and a string */
    memcpy(buf + n, "\x81\xa1x\x91\xc0\xa2hi", 8);
    struct rpc_write_ack a;
    ck_assert_int_eq(rpc_write_ack_decode(&a, RK_SLICE(buf, n + 8)), 0);
    ck_assert_uint_eq(a.hlc, 42);
    n = unhex(buf, GOLDEN_ACK);
    buf[n] = 0xc0;
    ck_assert_int_eq(rpc_write_ack_decode(&a, RK_SLICE(buf, n + 1)), RK_EPROTO);
    /* Fewer elements than required. */
    n = unhex(buf, GOLDEN_ACK);
    buf[0] = 0x92;
    ck_assert_int_eq(rpc_write_ack_decode(&a, RK_SLICE(buf, n - 1)), RK_EPROTO);
    /* A positive status is not a code. */
    n = unhex(buf, "930301"
                   "2a");
    ck_assert_int_eq(rpc_write_ack_decode(&a, RK_SLICE(buf, n)), RK_EPROTO);
}
END_TEST

START_TEST(round_trip_sizes)
{
    static const size_t klens[] = {1, 31, 32, 255, 256, 65535, RK_MAX_KEY};
    static const size_t vlens[] = {0, 1, 31, 255, 65536, RK_MAX_VALUE};
    uint8_t *kb = big_value(RK_MAX_KEY);
    uint8_t *vb = big_value(RK_MAX_VALUE);
    struct rpc_buf b = RPC_BUF_INIT;
    for (size_t i = 0; i < sizeof(klens) / sizeof(klens[0]); i++) {
        for (size_t j = 0; j < sizeof(vlens) / sizeof(vlens[0]); j++) {
            struct rpc_write w = {
                .token = rk_token(kb, klens[i]),
                .epoch = UINT64_MAX - i,
                .key = RK_SLICE(kb, klens[i]),
                .rec = {.ts = UINT64_C(1) << (j * 10),
                        .flags = 0xffffffffu,
                        .expiry = j,
                        .value = RK_SLICE(vb, vlens[j])},
            };
            rpc_buf_reset(&b);
            ck_assert_int_eq(rpc_write_encode(&b, &w), 0);
            struct rpc_write d;
            ck_assert_int_eq(rpc_write_decode(&d, RK_SLICE(b.data, b.len)), 0);
            ck_assert_uint_eq(d.token, w.token);
            ck_assert_uint_eq(d.epoch, w.epoch);
            ck_assert_uint_eq(d.key.len, klens[i]);
            ck_assert_mem_eq(d.key.p, kb, klens[i]);
            ck_assert_uint_eq(d.rec.ts, w.rec.ts);
            ck_assert_uint_eq(d.rec.flags, w.rec.flags);
            ck_assert_uint_eq(d.rec.expiry, w.rec.expiry);
            ck_assert_uint_eq(d.rec.value.len, vlens[j]);
            if (vlens[j])
                ck_assert_mem_eq(d.rec.value.p, vb, vlens[j]);

            struct rpc_read_resp rr, dr;
            memset(&rr, 0, sizeof(rr));
            rr.status = -(int32_t)j;
            rr.found = true;
            rr.rec = w.rec;
            rpc_buf_reset(&b);
            ck_assert_int_eq(rpc_read_resp_encode(&b, &rr), 0);
            ck_assert_int_eq(rpc_read_resp_decode(&dr, RK_SLICE(b.data, b.len)),
                             0);
            ck_assert_int_eq(dr.status, rr.status);
            ck_assert(dr.found && !dr.is_digest);
            ck_assert_uint_eq(dr.rec.value.len, vlens[j]);
            struct rpc_digest d1, d2;
            rpc_record_digest(&d1, &rr.rec);
            rpc_record_digest(&d2, &dr.rec);
            ck_assert(d1.ts == d2.ts && d1.flags == d2.flags &&
                      d1.expiry == d2.expiry && d1.value_hash == d2.value_hash);
        }
        struct rpc_read rd = {.token = i,
                              .epoch = 0,
                              .key = RK_SLICE(kb, klens[i]),
                              .digest = i & 1};
        rpc_buf_reset(&b);
        ck_assert_int_eq(rpc_read_encode(&b, &rd), 0);
        struct rpc_read dd;
        ck_assert_int_eq(rpc_read_decode(&dd, RK_SLICE(b.data, b.len)), 0);
        ck_assert_uint_eq(dd.key.len, klens[i]);
        ck_assert_int_eq(dd.digest, rd.digest);
    }
    rpc_buf_free(&b);
    free(kb);
    free(vb);
}
END_TEST

START_TEST(size_limits)
{
    uint8_t *kb = big_value(RK_MAX_KEY + 1);
    uint8_t *vb = big_value(RK_MAX_VALUE + 1);
    struct rpc_buf b = RPC_BUF_INIT;
    struct rpc_write w = {.key = RK_SLICE(kb, RK_MAX_KEY + 1)};
    ck_assert_int_eq(rpc_write_encode(&b, &w), RK_ETOOLARGE);
    w.key.len = 0;
    ck_assert_int_eq(rpc_write_encode(&b, &w), RK_EBADREQ);
    w.key.len = 1;
    w.rec.value = RK_SLICE(vb, RK_MAX_VALUE + 1);
    ck_assert_int_eq(rpc_write_encode(&b, &w), RK_ETOOLARGE);
    ck_assert_uint_eq(b.len, 0);

    /* Hand-made encodings over the limits: the decoder says TOO_LARGE from
     * the declared length alone, before the bytes even arrive. */
    uint8_t msg[64];
    size_t n = 0;
    memcpy(msg, "\x95\x04\x01\x02\xc6", 5); /* READ, key bin32 */
    n = 5;
    uint32_t kl = RK_MAX_KEY + 1;
    for (int i = 3; i >= 0; i--)
        msg[n++] = (uint8_t)(kl >> (8 * i));
    struct rpc_read rd;
    ck_assert_int_eq(rpc_read_decode(&rd, RK_SLICE(msg, n)), RK_ETOOLARGE);
    /* An honest-looking length with the bytes missing is a protocol error. */
    msg[5] = msg[6] = 0;
    msg[7] = 0;
    msg[8] = 10;
    ck_assert_int_eq(rpc_read_decode(&rd, RK_SLICE(msg, n)), RK_EPROTO);
    /* Empty key. */
    n = unhex(msg, "95040102c400c3");
    ck_assert_int_eq(rpc_read_decode(&rd, RK_SLICE(msg, n)), RK_EPROTO);
    /* An array claiming 2^32-1 elements in 5 bytes. */
    n = unhex(msg, "ddffffffff");
    ck_assert_int_eq(rpc_read_decode(&rd, RK_SLICE(msg, n)), RK_EPROTO);
    enum rpc_msg_type t;
    ck_assert_int_eq(rpc_msg_type_peek(&t, RK_SLICE(msg, n)), RK_EPROTO);
    ck_assert_int_eq(rpc_read_decode(&rd, RK_SLICE(NULL, 0)), RK_EPROTO);

    rpc_buf_free(&b);
    free(kb);
    free(vb);
}
END_TEST

typedef int (*decode_fn)(struct rk_slice buf);

static int dec_write(struct rk_slice b)
{
    struct rpc_write m;
    return rpc_write_decode(&m, b);
}
static int dec_ack(struct rk_slice b)
{
    struct rpc_write_ack m;
    return rpc_write_ack_decode(&m, b);
}
static int dec_read(struct rk_slice b)
{
    struct rpc_read m;
    return rpc_read_decode(&m, b);
}
static int dec_rr(struct rk_slice b)
{
    struct rpc_read_resp m;
    return rpc_read_resp_decode(&m, b);
}
static int dec_hs(struct rk_slice b)
{
    struct rpc_handshake m;
    return rpc_handshake_decode(&m, b);
}

static int dec_scan(struct rk_slice b)
{
    struct rpc_scan m;
    return rpc_scan_decode(&m, b);
}
static int dec_scan_resp(struct rk_slice b)
{
    struct rpc_scan_resp m;
    return rpc_scan_resp_decode(&m, b);
}

static int dec_merkle_req(struct rk_slice b)
{
    struct rpc_merkle_req m;
    return rpc_merkle_req_decode(&m, b);
}
static int dec_merkle_resp(struct rk_slice b)
{
    struct rpc_merkle_resp m;
    return rpc_merkle_resp_decode(&m, b);
}

static int dec_stream_push(struct rk_slice b)
{
    struct rpc_stream_chunk m;
    return rpc_stream_push_decode(&m, b);
}

static const struct {
    const char *hex;
    decode_fn fn;
} corruptible[] = {
    {GOLDEN_WRITE, dec_write},
    {GOLDEN_ACK, dec_ack},
    {GOLDEN_READ, dec_read},
    {GOLDEN_RR_NF, dec_rr},
    {GOLDEN_RR_DATA, dec_rr},
    {GOLDEN_RR_DIG, dec_rr},
    {GOLDEN_HS_HELLO, dec_hs},
    {GOLDEN_HS_ANSWER, dec_hs},
    {GOLDEN_HS_PROOF, dec_hs},
    {GOLDEN_STREAM_REQ, dec_stream_req},
    {GOLDEN_STREAM_END, dec_stream_chunk},
    {GOLDEN_STREAM_CHUNK, dec_stream_chunk},
    {GOLDEN_STREAM_PUSH, dec_stream_push},
    {GOLDEN_MERKLE_REQ, dec_merkle_req},
    {GOLDEN_MERKLE_RESP, dec_merkle_resp},
    {GOLDEN_MERKLE_ERR, dec_merkle_resp},
    {GOLDEN_SCAN, dec_scan},
    {GOLDEN_SCAN_RESP, dec_scan_resp},
    {GOLDEN_SCAN_ERR, dec_scan_resp},
};

/* Every proper prefix is refused; every single-byte change of every byte
 * to every value decodes or fails cleanly (ASan watches each read, and each
 * input is copied to a heap block of its exact size). */
START_TEST(truncation_and_corruption)
{
    uint8_t buf[256];
    size_t n = unhex(buf, corruptible[_i].hex);
    ck_assert_int_eq(corruptible[_i].fn(RK_SLICE(buf, n)), 0);
    for (size_t cut = 0; cut < n; cut++) {
        uint8_t *p = malloc(cut ? cut : 1);
        memcpy(p, buf, cut);
        ck_assert_int_ne(corruptible[_i].fn(RK_SLICE(p, cut)), 0);
        free(p);
    }
    for (size_t pos = 0; pos < n; pos++) {
        for (int v = 0; v < 256; v++) {
            uint8_t *p = malloc(n);
            memcpy(p, buf, n);
            p[pos] = (uint8_t)v;
            int rc = corruptible[_i].fn(RK_SLICE(p, n));
            ck_assert(rc == 0 || rc == RK_EPROTO || rc == RK_ETOOLARGE ||
                      rc == RK_EVERSION);
            free(p);
        }
    }
}
END_TEST

/* One exchange: node-a (connecting, meaning to reach `to`) and node-b
 * (accepting) under the key of `secret`, cluster "prod". */
struct hs_fixture {
    uint8_t key[RPC_KEY_BYTES];
    uint8_t hello[RPC_HANDSHAKE_MAX];
    size_t hello_len;
    uint8_t answer[RPC_HANDSHAKE_MAX];
    size_t answer_len;
    uint8_t proof[RPC_HANDSHAKE_MAX];
    size_t proof_len;
};

#define HS_PROD   RK_SLICE("prod", 4)
#define HS_NONE   RK_SLICE(NULL, 0)
#define HELLO(f)  RK_SLICE((f)->hello, (f)->hello_len)
#define ANSWER(f) RK_SLICE((f)->answer, (f)->answer_len)
#define PROOF(f)  RK_SLICE((f)->proof, (f)->proof_len)

/* nonce_c and nonce_s fill the two nonces; the ANSWER and PROOF are made
 * without checks (as a peer that skipped them would). */
static void hs_setup(struct hs_fixture *f,
                     const char *secret,
                     const char *to,
                     uint8_t nonce_c,
                     uint8_t nonce_s)
{
    uint8_t nc[RPC_NONCE_BYTES], ns[RPC_NONCE_BYTES];
    memset(f, 0, sizeof(*f));
    memset(nc, nonce_c, sizeof(nc));
    memset(ns, nonce_s, sizeof(ns));
    rpc_key_derive(f->key, RK_SLICE(secret, strlen(secret)));
    ck_assert_int_eq(
        rpc_handshake_make(f->hello, sizeof(f->hello), &f->hello_len, f->key,
                           HS_PROD, RK_SLICE("node-a", 6),
                           RK_SLICE(to, strlen(to)), nc, 1000, HS_NONE),
        0);
    ck_assert_int_eq(rpc_handshake_make(f->answer, sizeof(f->answer),
                                        &f->answer_len, f->key, HS_PROD,
                                        RK_SLICE(to, strlen(to)), HS_NONE, ns,
                                        1001, HELLO(f)),
                     0);
    ck_assert_int_eq(rpc_handshake_make(f->proof, sizeof(f->proof),
                                        &f->proof_len, f->key, HS_PROD,
                                        RK_SLICE("node-a", 6), HS_NONE, nc,
                                        1002, ANSWER(f)),
                     0);
}

/* Re-encodes the handshake message in buf[0..*len) after edit(hs) (its MAC
 * kept as it was, unless edit signs it again). */
static void hs_edit(uint8_t *buf,
                    size_t *len,
                    void (*edit)(struct rpc_handshake *hs, const void *arg),
                    const void *arg)
{
    struct rpc_handshake hs;
    uint8_t copy[RPC_HANDSHAKE_MAX];
    memcpy(copy, buf, *len);
    ck_assert_int_eq(rpc_handshake_decode(&hs, RK_SLICE(copy, *len)), 0);
    edit(&hs, arg);
    struct rpc_buf b = RPC_BUF_INIT;
    ck_assert_int_eq(rpc_handshake_encode(&b, &hs), 0);
    ck_assert_uint_le(b.len, RPC_HANDSHAKE_MAX);
    memcpy(buf, b.data, b.len);
    *len = b.len;
    rpc_buf_free(&b);
}

START_TEST(handshake_protocol)
{
    struct hs_fixture f;
    hs_setup(&f, "s3cret", "node-b", 1, 2);
    char name[64];
    /* The connector checks the ANSWER against its HELLO. */
    ck_assert_int_eq(rpc_handshake_check(ANSWER(&f), HELLO(&f), f.key, HS_PROD,
                                         name, sizeof(name)),
                     0);
    ck_assert_str_eq(name, "node-b");
    /* The acceptor checks the PROOF against its ANSWER. */
    ck_assert_int_eq(rpc_handshake_check(PROOF(&f), ANSWER(&f), f.key, HS_PROD,
                                         name, sizeof(name)),
                     0);
    ck_assert_str_eq(name, "node-a");
    /* Truncated name buffer. */
    ck_assert_int_eq(
        rpc_handshake_check(PROOF(&f), ANSWER(&f), f.key, HS_PROD, name, 3), 0);
    ck_assert_str_eq(name, "no");

    /* Messages in the wrong place are refused by their role: a HELLO is
     * never accepted, an ANSWER or a PROOF only after ours. */
    ck_assert_int_eq(
        rpc_handshake_check(HELLO(&f), HELLO(&f), f.key, HS_PROD, NULL, 0),
        RK_EPROTO);
    ck_assert_int_eq(
        rpc_handshake_check(PROOF(&f), HELLO(&f), f.key, HS_PROD, NULL, 0),
        RK_EPROTO);
    ck_assert_int_eq(
        rpc_handshake_check(ANSWER(&f), ANSWER(&f), f.key, HS_PROD, NULL, 0),
        RK_EPROTO);
    ck_assert_int_eq(
        rpc_handshake_check(ANSWER(&f), PROOF(&f), f.key, HS_PROD, NULL, 0),
        RK_EPROTO);
    /* Wrong secret, wrong cluster name. */
    struct hs_fixture w;
    hs_setup(&w, "other", "node-b", 1, 2);
    ck_assert_int_eq(
        rpc_handshake_check(ANSWER(&w), HELLO(&f), f.key, HS_PROD, NULL, 0),
        RK_EAUTH);
    ck_assert_int_eq(
        rpc_handshake_check(PROOF(&w), ANSWER(&f), f.key, HS_PROD, NULL, 0),
        RK_EAUTH);
    ck_assert_int_eq(rpc_handshake_check(ANSWER(&f), HELLO(&f), f.key,
                                         RK_SLICE("prox", 4), NULL, 0),
                     RK_EAUTH);
    /* An acceptor signs nothing for a HELLO of another cluster. */
    uint8_t out[RPC_HANDSHAKE_MAX], nonce[RPC_NONCE_BYTES] = {0};
    size_t len;
    ck_assert_int_eq(
        rpc_handshake_make(out, sizeof(out), &len, f.key, RK_SLICE("prox", 4),
                           RK_SLICE("node-b", 6), HS_NONE, nonce, 0, HELLO(&f)),
        RK_EAUTH);
    /* Any flipped byte of an ANSWER or a PROOF fails. */
    for (size_t i = 1; i < f.answer_len; i++) {
        uint8_t c[RPC_HANDSHAKE_MAX];
        memcpy(c, f.answer, f.answer_len);
        c[i] ^= 0x01;
        ck_assert_int_ne(rpc_handshake_check(RK_SLICE(c, f.answer_len),
                                             HELLO(&f), f.key, HS_PROD, NULL,
                                             0),
                         0);
    }
    for (size_t i = 1; i < f.proof_len; i++) {
        uint8_t c[RPC_HANDSHAKE_MAX];
        memcpy(c, f.proof, f.proof_len);
        c[i] ^= 0x01;
        ck_assert_int_ne(rpc_handshake_check(RK_SLICE(c, f.proof_len),
                                             ANSWER(&f), f.key, HS_PROD, NULL,
                                             0),
                         0);
    }
    /* A PROOF answers only an ANSWER; nothing answers a PROOF. */
    ck_assert_int_eq(rpc_handshake_make(out, sizeof(out), &len, f.key, HS_PROD,
                                        RK_SLICE("x", 1), HS_NONE, nonce, 0,
                                        PROOF(&f)),
                     RK_EPROTO);
    ck_assert_int_eq(rpc_handshake_make(out, 10, &len, f.key, HS_PROD,
                                        RK_SLICE("x", 1), RK_SLICE("y", 1),
                                        nonce, 0, HS_NONE),
                     RK_ETOOLARGE);
    /* A HELLO needs the name of the node it is for. */
    ck_assert_int_eq(rpc_handshake_make(out, sizeof(out), &len, f.key, HS_PROD,
                                        RK_SLICE("x", 1), HS_NONE, nonce, 0,
                                        HS_NONE),
                     RK_EBADREQ);
    /* Longest names fit in RPC_HANDSHAKE_MAX; longer ones are refused. */
    char lname[RPC_NAME_MAX + 2];
    memset(lname, 'n', sizeof(lname));
    struct rk_slice longest = RK_SLICE(lname, RPC_NAME_MAX);
    uint8_t lh[RPC_HANDSHAKE_MAX], la[RPC_HANDSHAKE_MAX];
    size_t lhl, lal;
    ck_assert_int_eq(rpc_handshake_make(lh, sizeof(lh), &lhl, f.key, longest,
                                        longest, longest, nonce, UINT64_MAX,
                                        HS_NONE),
                     0);
    ck_assert_int_eq(rpc_handshake_make(la, sizeof(la), &lal, f.key, longest,
                                        longest, HS_NONE, nonce, UINT64_MAX,
                                        RK_SLICE(lh, lhl)),
                     0);
    ck_assert_int_eq(rpc_handshake_check(RK_SLICE(la, lal), RK_SLICE(lh, lhl),
                                         f.key, longest, NULL, 0),
                     0);
    ck_assert_int_eq(rpc_handshake_make(out, sizeof(out), &len, f.key,
                                        RK_SLICE(lname, RPC_NAME_MAX + 1),
                                        RK_SLICE("x", 1), RK_SLICE("y", 1),
                                        nonce, 0, HS_NONE),
                     RK_ETOOLARGE);
    /* Version 1 (or one from the future) is refused. */
    memcpy(out, f.answer, f.answer_len);
    out[2] = 1;
    ck_assert_int_eq(rpc_handshake_check(RK_SLICE(out, f.answer_len), HELLO(&f),
                                         f.key, HS_PROD, NULL, 0),
                     RK_EVERSION);
    out[2] = 3;
    ck_assert_int_eq(rpc_handshake_check(RK_SLICE(out, f.answer_len), HELLO(&f),
                                         f.key, HS_PROD, NULL, 0),
                     RK_EVERSION);
}
END_TEST

static void set_role(struct rpc_handshake *hs, const void *arg)
{
    hs->role = *(const uint32_t *)arg;
}

/* Regression: the connecting side accepted any correctly signed challenge
 * (rpc_handshake_check with nothing sent), so a challenge read from a node
 * by any TCP client and served from a dead peer's address passed. Now an
 * ANSWER or a PROOF recorded from one exchange is refused in another: each
 * side's MAC covers the other side's fresh nonce. */
START_TEST(handshake_replayed_challenge_refused)
{
    struct hs_fixture one, two, mine;
    hs_setup(&one, "s3cret", "node-b", 1, 2);
    hs_setup(&two, "s3cret", "node-b", 3, 4);
    /* A message checked against nothing of ours is never accepted. */
    ck_assert_int_eq(
        rpc_handshake_check(ANSWER(&one), HS_NONE, one.key, HS_PROD, NULL, 0),
        RK_EPROTO);
    /* The ANSWER of exchange one replayed to the HELLO of exchange two. */
    ck_assert_int_eq(rpc_handshake_check(ANSWER(&one), HELLO(&two), one.key,
                                         HS_PROD, NULL, 0),
                     RK_EPROTO);
    /* The PROOF of exchange one replayed to the ANSWER of exchange two. */
    ck_assert_int_eq(rpc_handshake_check(PROOF(&one), ANSWER(&two), one.key,
                                         HS_PROD, NULL, 0),
                     RK_EPROTO);
    /* Same connector nonce, other acceptor nonce: the PROOF binds both. */
    hs_setup(&mine, "s3cret", "node-b", 1, 5);
    ck_assert_int_eq(rpc_handshake_check(PROOF(&one), ANSWER(&mine), one.key,
                                         HS_PROD, NULL, 0),
                     RK_EPROTO);
    /* The attack: anyone may say HELLO to node-b, in node-a's name, and
     * get an ANSWER signed by node-b (exchange one, made by the attacker);
     * node-a, meaning to reach node-b, sends its own HELLO (exchange two)
     * to the attacker, who serves the captured ANSWER: refused. */
    ck_assert_int_eq(rpc_handshake_check(ANSWER(&one), HELLO(&two), one.key,
                                         HS_PROD, NULL, 0),
                     RK_EPROTO);
    /* Reflection: node-b's own ANSWER sent back to it as a PROOF (role
     * changed, MAC kept) fails the MAC: the two directions are tagged
     * apart. */
    uint8_t refl[RPC_HANDSHAKE_MAX];
    size_t rl = one.answer_len;
    memcpy(refl, one.answer, rl);
    uint32_t proof_role = RPC_HS_PROOF;
    hs_edit(refl, &rl, set_role, &proof_role);
    struct rpc_handshake d;
    ck_assert_int_eq(rpc_handshake_decode(&d, RK_SLICE(refl, rl)), 0);
    ck_assert_int_eq(rpc_handshake_verify(&d, one.key), RK_EAUTH);
    /* Each message still passes in its own exchange. */
    ck_assert_int_eq(rpc_handshake_check(ANSWER(&two), HELLO(&two), two.key,
                                         HS_PROD, NULL, 0),
                     0);
    ck_assert_int_eq(rpc_handshake_check(PROOF(&two), ANSWER(&two), two.key,
                                         HS_PROD, NULL, 0),
                     0);
}
END_TEST

static void sign_as(struct rpc_handshake *hs, const void *arg)
{
    const struct hs_fixture *f = arg;
    ck_assert_int_eq(rpc_handshake_sign(hs, f->key), 0);
}

static void set_from(struct rpc_handshake *hs, const void *arg)
{
    const char *name = arg;
    hs->from = RK_SLICE(name, strlen(name));
}

static void set_to(struct rpc_handshake *hs, const void *arg)
{
    const char *name = arg;
    hs->to = RK_SLICE(name, strlen(name));
}

/* An acceptor that is not the node the connector means to reach is refused,
 * even with the cluster's key: node-c signs no ANSWER to a HELLO meant for
 * node-b, and an ANSWER node-c signs anyway (or one it made for another
 * connector) fails the connector's check. */
START_TEST(handshake_wrong_peer_refused)
{
    struct hs_fixture f, c;
    hs_setup(&f, "s3cret", "node-b", 1, 2);
    uint8_t out[RPC_HANDSHAKE_MAX], nonce[RPC_NONCE_BYTES] = {0};
    size_t len;
    ck_assert_int_eq(rpc_handshake_make(out, sizeof(out), &len, f.key, HS_PROD,
                                        RK_SLICE("node-c", 6), HS_NONE, nonce,
                                        0, HELLO(&f)),
                     RK_EAUTH);
    /* node-c's own ANSWER (to a HELLO for node-c with node-a's nonce),
     * served to node-a's HELLO for node-b. */
    hs_setup(&c, "s3cret", "node-c", 1, 2);
    ck_assert_int_eq(
        rpc_handshake_check(ANSWER(&c), HELLO(&c), c.key, HS_PROD, NULL, 0), 0);
    ck_assert_int_eq(
        rpc_handshake_check(ANSWER(&c), HELLO(&f), f.key, HS_PROD, NULL, 0),
        RK_EAUTH);
    /* node-b's ANSWER re-signed as if from node-c: still not node-b. */
    memcpy(out, f.answer, f.answer_len);
    len = f.answer_len;
    hs_edit(out, &len, set_from, "node-c");
    hs_edit(out, &len, sign_as, &f);
    ck_assert_int_eq(rpc_handshake_check(RK_SLICE(out, len), HELLO(&f), f.key,
                                         HS_PROD, NULL, 0),
                     RK_EAUTH);
    /* An ANSWER node-b made for another connector (node-x). */
    memcpy(out, f.answer, f.answer_len);
    len = f.answer_len;
    hs_edit(out, &len, set_to, "node-x");
    hs_edit(out, &len, sign_as, &f);
    ck_assert_int_eq(rpc_handshake_check(RK_SLICE(out, len), HELLO(&f), f.key,
                                         HS_PROD, NULL, 0),
                     RK_EAUTH);
    /* A PROOF in another connector's name, to the acceptor. */
    memcpy(out, f.proof, f.proof_len);
    len = f.proof_len;
    hs_edit(out, &len, set_from, "node-x");
    hs_edit(out, &len, sign_as, &f);
    ck_assert_int_eq(rpc_handshake_check(RK_SLICE(out, len), ANSWER(&f), f.key,
                                         HS_PROD, NULL, 0),
                     RK_EAUTH);
}
END_TEST

/* Regression: encoding an empty value given as a NULL slice passed NULL to
 * memcpy, which UBSan aborts on (it crashed DEL under ASan). */
START_TEST(regression_empty_value_null_pointer)
{
    struct rpc_buf b = RPC_BUF_INIT;
    struct rpc_write w = {
        .token = 7,
        .key = RK_SLICE("k", 1),
        .rec = {.ts = 1, .flags = RPC_REC_TOMBSTONE, .value = {NULL, 0}},
    };
    ck_assert_int_eq(rpc_write_encode(&b, &w), 0);
    struct rpc_write d;
    ck_assert_int_eq(rpc_write_decode(&d, RK_SLICE(b.data, b.len)), 0);
    ck_assert_uint_eq(d.rec.value.len, 0);
    ck_assert_uint_eq(d.rec.flags, RPC_REC_TOMBSTONE);
    struct rpc_read_resp r = {.found = true, .rec = w.rec};
    rpc_buf_reset(&b);
    ck_assert_int_eq(rpc_read_resp_encode(&b, &r), 0);
    rpc_buf_free(&b);
}
END_TEST

static Suite *wire_rpc_suite(void)
{
    Suite *s = suite_create("wire_rpc");
    TCase *tc = tcase_create("golden");
    tcase_add_test(tc, golden_vectors);
    tcase_add_test(tc, golden_decode);
    tcase_add_test(tc, read_token_peek);
    tcase_add_test(tc, golden_boundaries);
    tcase_add_test(tc, standard_msgpack);
    tcase_add_test(tc, extra_fields_and_trailing_bytes);
    suite_add_tcase(s, tc);
    tc = tcase_create("limits");
    tcase_set_timeout(tc, 120);
    tcase_add_test(tc, round_trip_sizes);
    tcase_add_test(tc, size_limits);
    tcase_add_test(tc, regression_empty_value_null_pointer);
    suite_add_tcase(s, tc);
    tc = tcase_create("untrusted");
    tcase_set_timeout(tc, 120);
    tcase_add_loop_test(tc, truncation_and_corruption, 0,
                        sizeof(corruptible) / sizeof(corruptible[0]));
    suite_add_tcase(s, tc);
    tc = tcase_create("handshake");
    tcase_add_test(tc, handshake_protocol);
    tcase_add_test(tc, handshake_replayed_challenge_refused);
    tcase_add_test(tc, handshake_wrong_peer_refused);
    suite_add_tcase(s, tc);
    return s;
}

int main(void)
{
    SRunner *sr = srunner_create(wire_rpc_suite());
    srunner_run_all(sr, CK_NORMAL);
    int failed = srunner_ntests_failed(sr);
    srunner_free(sr);
    return failed == 0 ? EXIT_SUCCESS : EXIT_FAILURE;
}
