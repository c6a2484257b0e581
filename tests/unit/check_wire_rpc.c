/*
 * check_wire_rpc.c - the internode RPC message codecs: golden byte vectors
 * (a change of encoding must fail here, not split a mixed-version cluster),
 * round trips, standard msgpack (msgpack-c reads what we write), every
 * truncation and every single-byte corruption handled without a crash, size
 * limits, the handshake's MACs, roles, nonce and name binding, and the range
 * streaming messages (cursor, items checksum and count, item iteration).
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
#include "wire/rpc_msg.h"

static size_t unhex(uint8_t *out, const char *hex)
{
    size_t n = 0;
    for (; hex[0] && hex[1]; hex += 2) {
        unsigned v;
        sscanf(hex, "%2x", &v);
        out[n++] = (uint8_t)v;
    }
    return n;
}

static void assert_bytes(const struct rpc_buf *b, const char *hex)
{
    uint8_t want[1024];
    size_t n = unhex(want, hex);
    if (b->len != n || memcmp(b->data, want, n) != 0) {
        fprintf(stderr, "got ");
        for (size_t i = 0; i < b->len; i++)
            fprintf(stderr, "%02x", b->data[i]);
        fprintf(stderr, "\n");
    }
    ck_assert_uint_eq(b->len, n);
    ck_assert_mem_eq(b->data, want, n);
}

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

static uint8_t *big_value(size_t n)
{
    uint8_t *v = malloc(n ? n : 1);
    ck_assert_ptr_nonnull(v);
    for (size_t i = 0; i < n; i++)
        v[i] = (uint8_t)(i * 31 + 7);
    return v;
}

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

/* STREAM {epoch 3, at (10, 20] at token 15 after key "ab", max_bytes 64 KiB}
 * and two STREAM_CHUNKs: the end of that arc (no items, done) and one
 * tombstone of key "k" with an empty value, resuming after "k". The
 * checksums are XXH3-64 of the items bin (empty: 2d06800538d394c2). */
#define GOLDEN_STREAM_REQ "9906030a140fc3c2c4026162ce00010000"
#define GOLDEN_STREAM_END "9c0700050a1414c3c3c40000c400cf2d06800538d394c2"
#define GOLDEN_STREAM_CHUNK \
    "9c0700050a140fc3c2c4016b01c40995c4016b010100c400cfb352071724a2eb0a"
/* The same chunk pushed by a leaving node: only the type differs. */
#define GOLDEN_STREAM_PUSH \
    "9c0800050a140fc3c2c4016b01c40995c4016b010100c400cfb352071724a2eb0a"

/* MERKLE {epoch 3, (10, 20], depth 1}; MERKLE_RESP {status 0, hlc 5,
 * depth 1, keys 2, leaves 1 and 2}; MERKLE_RESP {status -5, hlc 5, depth
 * 3, no leaves}. */
#define GOLDEN_MERKLE_REQ  "9509030a1401"
#define GOLDEN_MERKLE_RESP "960a00050102c41000000000000000010000000000000002"
#define GOLDEN_MERKLE_ERR  "960afb050300c400"

/* SCAN {epoch 3, (10, 20], limit 5}; SCAN_RESP {status 0, hlc 5, not
 * done, next 15, one item: "k" ts 1 tombstone}; SCAN_RESP {status -5,
 * hlc 5}. */
#define GOLDEN_SCAN      "950b030a1405"
#define GOLDEN_SCAN_RESP "970c0005c20f01c40995c4016b010100c400"
#define GOLDEN_SCAN_ERR  "970cfb05c20000c400"

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

static int dec_stream_req(struct rk_slice b)
{
    struct rpc_stream_req m;
    return rpc_stream_req_decode(&m, b);
}
static int dec_stream_chunk(struct rk_slice b)
{
    struct rpc_stream_chunk m;
    return rpc_stream_chunk_decode(&m, b);
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

/* ---- range streaming ---------------------------------------------------- */

static void assert_pos_eq(const struct rpc_stream_pos *a,
                          const struct rpc_stream_pos *b)
{
    ck_assert_uint_eq(a->start, b->start);
    ck_assert_uint_eq(a->end, b->end);
    ck_assert_uint_eq(a->pos, b->pos);
    ck_assert_int_eq(a->started, b->started);
    ck_assert_int_eq(a->done, b->done);
    ck_assert_uint_eq(a->last.len, b->last.len);
    if (a->last.len)
        ck_assert_mem_eq(a->last.p, b->last.p, a->last.len);
}

/* The layout of the comment atop rpc_msg.c, packed by hand with msgpack-c
 * and none of the checks of the encoders, so that tests can make messages
 * the encoders refuse. extra: elements appended after the last field. */
static void pack_pos(msgpack_packer *pk, const struct rpc_stream_pos *p)
{
    msgpack_pack_uint64(pk, p->start);
    msgpack_pack_uint64(pk, p->end);
    msgpack_pack_uint64(pk, p->pos);
    p->started ? msgpack_pack_true(pk) : msgpack_pack_false(pk);
    p->done ? msgpack_pack_true(pk) : msgpack_pack_false(pk);
    msgpack_pack_bin(pk, p->last.len);
    msgpack_pack_bin_body(pk, p->last.p, p->last.len);
}

static void pack_extra(msgpack_packer *pk, int extra)
{
    for (int i = 0; i < extra; i++) {
        if (i % 2 == 0) { /* a map {"x": [nil]} */
            msgpack_pack_map(pk, 1);
            msgpack_pack_str(pk, 1);
            msgpack_pack_str_body(pk, "x", 1);
            msgpack_pack_array(pk, 1);
            msgpack_pack_nil(pk);
        } else {
            msgpack_pack_str(pk, 2);
            msgpack_pack_str_body(pk, "hi", 2);
        }
    }
}

static void pack_stream_req(msgpack_sbuffer *sb,
                            uint64_t type,
                            const struct rpc_stream_req *m,
                            int extra)
{
    msgpack_packer pk;
    msgpack_sbuffer_clear(sb);
    msgpack_packer_init(&pk, sb, msgpack_sbuffer_write);
    msgpack_pack_array(&pk, 9 + (size_t)extra);
    msgpack_pack_uint64(&pk, type);
    msgpack_pack_uint64(&pk, m->epoch);
    pack_pos(&pk, &m->at);
    msgpack_pack_uint64(&pk, m->max_bytes);
    pack_extra(&pk, extra);
}

/* m->checksum is packed as given. */
static void pack_stream_chunk(msgpack_sbuffer *sb,
                              uint64_t type,
                              int64_t status,
                              const struct rpc_stream_chunk *m,
                              int extra)
{
    msgpack_packer pk;
    msgpack_sbuffer_clear(sb);
    msgpack_packer_init(&pk, sb, msgpack_sbuffer_write);
    msgpack_pack_array(&pk, 12 + (size_t)extra);
    msgpack_pack_uint64(&pk, type);
    msgpack_pack_int64(&pk, status);
    msgpack_pack_uint64(&pk, m->hlc);
    pack_pos(&pk, &m->next);
    msgpack_pack_uint64(&pk, m->count);
    msgpack_pack_bin(&pk, m->items.len);
    msgpack_pack_bin_body(&pk, m->items.p, m->items.len);
    msgpack_pack_uint64(&pk, m->checksum);
    pack_extra(&pk, extra);
}

static uint64_t xxh3(struct rk_slice s)
{
    return XXH3_64bits(s.len ? (const void *)s.p : "", s.len);
}

#define SB_SLICE(sb) RK_SLICE((sb).data, (sb).size)

/* The items of the tests: a plain record, a tombstone with an empty (NULL)
 * value, a key of RK_MAX_KEY bytes with every field at its maximum, and an
 * empty but non-NULL value. */
struct stream_items {
    uint8_t *kb; /* RK_MAX_KEY bytes */
    size_t n;
    struct rk_slice key[4];
    struct rpc_record rec[4];
    struct rpc_buf buf;
};

static void stream_items_make(struct stream_items *s, bool big_key)
{
    memset(s, 0, sizeof(*s));
    s->kb = big_value(RK_MAX_KEY);
    s->key[0] = RK_SLICE("apple", 5);
    s->rec[0] = (struct rpc_record){.ts = 1000, .value = RK_SLICE("red", 3)};
    s->key[1] = RK_SLICE("tomb", 4);
    s->rec[1] = (struct rpc_record){
        .ts = 1001, .flags = RPC_REC_TOMBSTONE, .value = {NULL, 0}};
    s->key[2] = big_key ? RK_SLICE(s->kb, RK_MAX_KEY) : RK_SLICE("k2", 2);
    s->rec[2] = (struct rpc_record){.ts = UINT64_MAX,
                                    .flags = 0xffffffffu,
                                    .expiry = UINT64_MAX,
                                    .value = RK_SLICE("xyz", 3)};
    s->key[3] = RK_SLICE("z", 1);
    s->rec[3] = (struct rpc_record){
        .ts = 7, .expiry = 1234567890123, .value = RK_SLICE("", 0)};
    s->n = 4;
    for (size_t i = 0; i < s->n; i++)
        ck_assert_int_eq(rpc_stream_item_add(&s->buf, s->key[i], &s->rec[i]),
                         0);
}

static void stream_items_free(struct stream_items *s)
{
    rpc_buf_free(&s->buf);
    free(s->kb);
}

/* Walks items and checks they are exactly s's records, then the end. */
static void assert_items(struct rk_slice items, const struct stream_items *s)
{
    struct rk_slice it = items, key;
    struct rpc_record rec;
    for (size_t i = 0; i < s->n; i++) {
        ck_assert_int_eq(rpc_stream_item_next(&it, &key, &rec), 1);
        ck_assert_uint_eq(key.len, s->key[i].len);
        ck_assert_mem_eq(key.p, s->key[i].p, key.len);
        ck_assert(key.p >= items.p && key.p + key.len <= items.p + items.len);
        ck_assert_uint_eq(rec.ts, s->rec[i].ts);
        ck_assert_uint_eq(rec.flags, s->rec[i].flags);
        ck_assert_uint_eq(rec.expiry, s->rec[i].expiry);
        ck_assert_uint_eq(rec.value.len, s->rec[i].value.len);
        if (rec.value.len)
            ck_assert_mem_eq(rec.value.p, s->rec[i].value.p, rec.value.len);
    }
    ck_assert_uint_eq(it.len, 0);
    ck_assert_int_eq(rpc_stream_item_next(&it, &key, &rec), 0);
    ck_assert_int_eq(rpc_stream_item_next(&it, &key, &rec), 0);
}

START_TEST(stream_golden)
{
    uint8_t buf[256];
    struct rpc_buf b = RPC_BUF_INIT;
    struct rpc_stream_req q = {
        .epoch = 3,
        .at = {.start = 10,
               .end = 20,
               .pos = 15,
               .started = true,
               .last = RK_SLICE("ab", 2)},
        .max_bytes = 65536,
    };
    ck_assert_int_eq(rpc_stream_req_encode(&b, &q), 0);
    assert_bytes(&b, GOLDEN_STREAM_REQ);
    size_t n = unhex(buf, GOLDEN_STREAM_REQ);
    struct rpc_stream_req dq;
    ck_assert_int_eq(rpc_stream_req_decode(&dq, RK_SLICE(buf, n)), 0);
    ck_assert_uint_eq(dq.epoch, 3);
    assert_pos_eq(&dq.at, &q.at);
    ck_assert_ptr_eq(dq.at.last.p, buf + 10); /* borrowed */
    ck_assert_uint_eq(dq.max_bytes, 65536);
    enum rpc_msg_type t;
    ck_assert_int_eq(rpc_msg_type_peek(&t, RK_SLICE(buf, n)), 0);
    ck_assert_int_eq(t, RPC_MSG_STREAM);

    rpc_buf_reset(&b);
    struct rpc_stream_chunk c = {
        .hlc = 5,
        .next =
            {.start = 10, .end = 20, .pos = 20, .started = true, .done = true},
        .checksum = 42, /* ignored by the encoder */
    };
    ck_assert_int_eq(rpc_stream_chunk_encode(&b, &c), 0);
    assert_bytes(&b, GOLDEN_STREAM_END);

    rpc_buf_reset(&b);
    struct rpc_buf items = RPC_BUF_INIT;
    struct rpc_record tomb = {.ts = 1, .flags = RPC_REC_TOMBSTONE};
    ck_assert_int_eq(rpc_stream_item_add(&items, RK_SLICE("k", 1), &tomb), 0);
    c.next.pos = 15;
    c.next.done = false;
    c.next.last = RK_SLICE("k", 1);
    c.count = 1;
    c.items = RK_SLICE(items.data, items.len);
    ck_assert_int_eq(rpc_stream_chunk_encode(&b, &c), 0);
    assert_bytes(&b, GOLDEN_STREAM_CHUNK);
    rpc_buf_free(&items);
    rpc_buf_free(&b);

    n = unhex(buf, GOLDEN_STREAM_CHUNK);
    struct rpc_stream_chunk d;
    ck_assert_int_eq(rpc_stream_chunk_decode(&d, RK_SLICE(buf, n)), 0);
    ck_assert_int_eq(d.status, 0);
    ck_assert_uint_eq(d.hlc, 5);
    assert_pos_eq(&d.next, &c.next);
    ck_assert_uint_eq(d.count, 1);
    ck_assert_ptr_eq(d.items.p, buf + 15); /* borrowed */
    ck_assert_uint_eq(d.items.len, 9);
    ck_assert_uint_eq(d.checksum, UINT64_C(0xb352071724a2eb0a));
    ck_assert_int_eq(rpc_msg_type_peek(&t, RK_SLICE(buf, n)), 0);
    ck_assert_int_eq(t, RPC_MSG_STREAM_CHUNK);
    /* Each decoder refuses the other's message (the type tag). */
    ck_assert_int_eq(rpc_stream_req_decode(&dq, RK_SLICE(buf, n)), RK_EPROTO);
    n = unhex(buf, GOLDEN_STREAM_REQ);
    ck_assert_int_eq(rpc_stream_chunk_decode(&d, RK_SLICE(buf, n)), RK_EPROTO);
}
END_TEST

/* A pushed chunk (decommission) is a chunk under RPC_MSG_STREAM_PUSH; the
 * chunk and push decoders each refuse the other's type. */
START_TEST(stream_push_golden)
{
    uint8_t buf[256];
    struct rpc_buf b = RPC_BUF_INIT, items = RPC_BUF_INIT;
    struct rpc_record tomb = {.ts = 1, .flags = RPC_REC_TOMBSTONE};
    ck_assert_int_eq(rpc_stream_item_add(&items, RK_SLICE("k", 1), &tomb), 0);
    struct rpc_stream_chunk c = {
        .hlc = 5,
        .next = {.start = 10,
                 .end = 20,
                 .pos = 15,
                 .started = true,
                 .last = RK_SLICE("k", 1)},
        .count = 1,
        .items = RK_SLICE(items.data, items.len),
    };
    ck_assert_int_eq(rpc_stream_push_encode(&b, &c), 0);
    assert_bytes(&b, GOLDEN_STREAM_PUSH);
    rpc_buf_free(&items);
    rpc_buf_free(&b);

    size_t n = unhex(buf, GOLDEN_STREAM_PUSH);
    struct rpc_stream_chunk d;
    ck_assert_int_eq(rpc_stream_push_decode(&d, RK_SLICE(buf, n)), 0);
    ck_assert_uint_eq(d.hlc, 5);
    assert_pos_eq(&d.next, &c.next);
    ck_assert_uint_eq(d.count, 1);
    ck_assert_ptr_eq(d.items.p, buf + 15); /* borrowed */
    enum rpc_msg_type t;
    ck_assert_int_eq(rpc_msg_type_peek(&t, RK_SLICE(buf, n)), 0);
    ck_assert_int_eq(t, RPC_MSG_STREAM_PUSH);
    ck_assert_int_eq(rpc_stream_chunk_decode(&d, RK_SLICE(buf, n)), RK_EPROTO);
    n = unhex(buf, GOLDEN_STREAM_CHUNK);
    ck_assert_int_eq(rpc_stream_push_decode(&d, RK_SLICE(buf, n)), RK_EPROTO);
}
END_TEST

/* Repair's leaf exchange: golden bytes both ways; leaves must be exactly
 * 8 << depth bytes with status 0 and absent otherwise; depth bounded. */
START_TEST(merkle_golden)
{
    uint8_t buf[64];
    struct rpc_buf b = RPC_BUF_INIT;
    struct rpc_merkle_req q = {.epoch = 3, .start = 10, .end = 20, .depth = 1};
    ck_assert_int_eq(rpc_merkle_req_encode(&b, &q), 0);
    assert_bytes(&b, GOLDEN_MERKLE_REQ);
    struct rpc_merkle_req q2;
    size_t n = unhex(buf, GOLDEN_MERKLE_REQ);
    ck_assert_int_eq(rpc_merkle_req_decode(&q2, RK_SLICE(buf, n)), 0);
    ck_assert(q2.epoch == 3 && q2.start == 10 && q2.end == 20 && q2.depth == 1);
    q.depth = RPC_MERKLE_MAX_DEPTH + 1;
    rpc_buf_reset(&b);
    ck_assert_int_eq(rpc_merkle_req_encode(&b, &q), RK_EBADREQ);
    buf[n - 1] = RPC_MERKLE_MAX_DEPTH + 1; /* a fixint */
    ck_assert_int_eq(rpc_merkle_req_decode(&q2, RK_SLICE(buf, n)), RK_EPROTO);

    uint8_t leaves[16] = {0};
    leaves[7] = 1;
    leaves[15] = 2;
    struct rpc_merkle_resp r = {
        .hlc = 5, .depth = 1, .keys = 2, .leaves = RK_SLICE(leaves, 16)};
    rpc_buf_reset(&b);
    ck_assert_int_eq(rpc_merkle_resp_encode(&b, &r), 0);
    assert_bytes(&b, GOLDEN_MERKLE_RESP);
    struct rpc_merkle_resp r2;
    n = unhex(buf, GOLDEN_MERKLE_RESP);
    ck_assert_int_eq(rpc_merkle_resp_decode(&r2, RK_SLICE(buf, n)), 0);
    ck_assert(r2.status == 0 && r2.hlc == 5 && r2.depth == 1 && r2.keys == 2);
    ck_assert_ptr_eq(r2.leaves.p, buf + 8); /* borrowed */
    ck_assert_mem_eq(r2.leaves.p, leaves, 16);
    r.depth = 2; /* 16 bytes are not 4 leaves */
    rpc_buf_reset(&b);
    ck_assert_int_eq(rpc_merkle_resp_encode(&b, &r), RK_EBADREQ);
    buf[4] = 2;
    ck_assert_int_eq(rpc_merkle_resp_decode(&r2, RK_SLICE(buf, n)), RK_EPROTO);

    struct rpc_merkle_resp e = {.status = -5, .hlc = 5, .depth = 3};
    rpc_buf_reset(&b);
    ck_assert_int_eq(rpc_merkle_resp_encode(&b, &e), 0);
    assert_bytes(&b, GOLDEN_MERKLE_ERR);
    e.leaves = RK_SLICE(leaves, 16); /* an error carries no leaves */
    rpc_buf_reset(&b);
    ck_assert_int_eq(rpc_merkle_resp_encode(&b, &e), RK_EBADREQ);
    n = unhex(buf, GOLDEN_MERKLE_ERR);
    ck_assert_int_eq(rpc_merkle_resp_decode(&r2, RK_SLICE(buf, n)), 0);
    ck_assert(r2.status == -5 && r2.leaves.len == 0);
    ck_assert_int_eq(rpc_merkle_req_decode(&q2, RK_SLICE(buf, n)), RK_EPROTO);
    rpc_buf_free(&b);
}
END_TEST

START_TEST(scan_golden)
{
    struct rpc_buf b = RPC_BUF_INIT;
    uint8_t buf[64];
    struct rpc_scan q = {.epoch = 3, .start = 10, .end = 20, .limit = 5};
    ck_assert_int_eq(rpc_scan_encode(&b, &q), 0);
    assert_bytes(&b, GOLDEN_SCAN);
    struct rpc_scan q2;
    size_t n = unhex(buf, GOLDEN_SCAN);
    ck_assert_int_eq(rpc_scan_decode(&q2, RK_SLICE(buf, n)), 0);
    ck_assert(q2.epoch == 3 && q2.start == 10 && q2.end == 20 && q2.limit == 5);
    /* a limit of 0 or past RPC_SCAN_LIMIT_MAX is refused both ways */
    q.limit = 0;
    rpc_buf_reset(&b);
    ck_assert_int_eq(rpc_scan_encode(&b, &q), RK_EBADREQ);
    q.limit = RPC_SCAN_LIMIT_MAX + 1;
    ck_assert_int_eq(rpc_scan_encode(&b, &q), RK_EBADREQ);
    buf[n - 1] = 0;
    ck_assert_int_eq(rpc_scan_decode(&q2, RK_SLICE(buf, n)), RK_EPROTO);

    struct rpc_buf items = RPC_BUF_INIT;
    struct rpc_record rec = {
        .ts = 1, .flags = RPC_REC_TOMBSTONE, .value = RK_SLICE("", 0)};
    ck_assert_int_eq(rpc_stream_item_add(&items, RK_SLICE("k", 1), &rec), 0);
    struct rpc_scan_resp r = {.hlc = 5,
                              .next = 15,
                              .count = 1,
                              .items = RK_SLICE(items.data, items.len)};
    rpc_buf_reset(&b);
    ck_assert_int_eq(rpc_scan_resp_encode(&b, &r), 0);
    assert_bytes(&b, GOLDEN_SCAN_RESP);
    struct rpc_scan_resp r2;
    n = unhex(buf, GOLDEN_SCAN_RESP);
    ck_assert_int_eq(rpc_scan_resp_decode(&r2, RK_SLICE(buf, n)), 0);
    ck_assert(r2.status == 0 && r2.hlc == 5 && !r2.done && r2.next == 15 &&
              r2.count == 1);
    struct rk_slice it = r2.items, key;
    struct rpc_record got;
    ck_assert_int_eq(rpc_stream_item_next(&it, &key, &got), 1);
    ck_assert(key.len == 1 && key.p[0] == 'k' && got.ts == 1 &&
              got.flags == RPC_REC_TOMBSTONE && got.value.len == 0);
    ck_assert_int_eq(rpc_stream_item_next(&it, &key, &got), 0);
    buf[6] = 2; /* a count that is not the items' */
    ck_assert_int_eq(rpc_scan_resp_decode(&r2, RK_SLICE(buf, n)), RK_EPROTO);
    buf[6] = 0;
    ck_assert_int_eq(rpc_scan_resp_decode(&r2, RK_SLICE(buf, n)), RK_EPROTO);

    struct rpc_scan_resp e = {.status = -5, .hlc = 5};
    rpc_buf_reset(&b);
    ck_assert_int_eq(rpc_scan_resp_encode(&b, &e), 0);
    assert_bytes(&b, GOLDEN_SCAN_ERR);
    e.count = RPC_STREAM_ITEMS_MAX + 1;
    rpc_buf_reset(&b);
    ck_assert_int_eq(rpc_scan_resp_encode(&b, &e), RK_ETOOLARGE);
    n = unhex(buf, GOLDEN_SCAN_ERR);
    ck_assert_int_eq(rpc_scan_resp_decode(&r2, RK_SLICE(buf, n)), 0);
    ck_assert(r2.status == -5 && r2.count == 0);
    ck_assert_int_eq(rpc_scan_decode(&q2, RK_SLICE(buf, n)), RK_EPROTO);
    rpc_buf_free(&items);
    rpc_buf_free(&b);
}
END_TEST

START_TEST(stream_req_round_trip)
{
    uint8_t last[RPC_STREAM_LAST_MAX];
    memset(last, 0xab, sizeof(last));
    last[0] = 0;
    const struct rpc_stream_pos ats[] = {
        {.start = 0, .end = 0}, /* the whole ring, not started */
        {.start = 100, .end = 50, .pos = 100, .started = true},
        {.start = UINT64_MAX,
         .end = 1,
         .pos = 0,
         .started = true,
         .last = RK_SLICE(last, 1)},
        {.start = 1,
         .end = UINT64_MAX,
         .pos = UINT64_MAX - 1,
         .started = true,
         .last = RK_SLICE(last, RPC_STREAM_LAST_MAX)},
    };
    struct rpc_buf b = RPC_BUF_INIT;
    msgpack_sbuffer sb;
    msgpack_sbuffer_init(&sb);
    for (size_t i = 0; i < sizeof(ats) / sizeof(ats[0]); i++) {
        struct rpc_stream_req q = {
            .epoch = i ? UINT64_MAX - i : 0,
            .at = ats[i],
            .max_bytes = i ? UINT32_MAX - (uint32_t)i : 0,
        };
        rpc_buf_reset(&b);
        ck_assert_int_eq(rpc_stream_req_encode(&b, &q), 0);
        /* the layout of the comment, byte for byte */
        pack_stream_req(&sb, RPC_MSG_STREAM, &q, 0);
        ck_assert_uint_eq(b.len, sb.size);
        ck_assert_mem_eq(b.data, sb.data, sb.size);
        struct rpc_stream_req d;
        memset(&d, 0x5a, sizeof(d));
        ck_assert_int_eq(rpc_stream_req_decode(&d, RK_SLICE(b.data, b.len)), 0);
        ck_assert_uint_eq(d.epoch, q.epoch);
        assert_pos_eq(&d.at, &q.at);
        ck_assert_uint_eq(d.max_bytes, q.max_bytes);
        if (q.at.last.len)
            ck_assert(d.at.last.p > b.data &&
                      d.at.last.p + d.at.last.len <= b.data + b.len);
        /* Forward compatibility: later fields are skipped. */
        pack_stream_req(&sb, RPC_MSG_STREAM, &q, 3);
        memset(&d, 0, sizeof(d));
        ck_assert_int_eq(rpc_stream_req_decode(&d, SB_SLICE(sb)), 0);
        ck_assert_uint_eq(d.epoch, q.epoch);
        assert_pos_eq(&d.at, &q.at);
        ck_assert_uint_eq(d.max_bytes, q.max_bytes);
    }
    msgpack_sbuffer_destroy(&sb);
    rpc_buf_free(&b);
}
END_TEST

START_TEST(stream_chunk_round_trip)
{
    struct stream_items s;
    stream_items_make(&s, true);
    uint8_t last[RPC_STREAM_LAST_MAX];
    memset(last, 0xcd, sizeof(last));
    struct rpc_buf b = RPC_BUF_INIT;
    msgpack_sbuffer sb;
    msgpack_sbuffer_init(&sb);

    /* No items: the end of an arc, or an error of the donor. */
    struct rpc_stream_chunk c = {
        .status = 0,
        .hlc = UINT64_MAX,
        .next = {.start = 5, .end = 5, .pos = 4, .started = true, .done = true},
        .items = {NULL, 0},
    };
    const int32_t statuses[] = {0, RK_ENOTFOUND, -ENOMEM, INT32_MIN};
    for (size_t i = 0; i < sizeof(statuses) / sizeof(statuses[0]); i++) {
        c.status = statuses[i];
        rpc_buf_reset(&b);
        ck_assert_int_eq(rpc_stream_chunk_encode(&b, &c), 0);
        struct rpc_stream_chunk d;
        memset(&d, 0x5a, sizeof(d));
        ck_assert_int_eq(rpc_stream_chunk_decode(&d, RK_SLICE(b.data, b.len)),
                         0);
        ck_assert_int_eq(d.status, statuses[i]);
        ck_assert_uint_eq(d.hlc, UINT64_MAX);
        assert_pos_eq(&d.next, &c.next);
        ck_assert_uint_eq(d.count, 0);
        ck_assert_uint_eq(d.items.len, 0);
        ck_assert_uint_eq(d.checksum, xxh3(RK_SLICE(NULL, 0)));
        struct rk_slice it = d.items, key;
        struct rpc_record rec;
        ck_assert_int_eq(rpc_stream_item_next(&it, &key, &rec), 0);
    }

    /* Several items, a resume key of the largest size, each flag. */
    const struct rpc_stream_pos nexts[] = {
        {.start = 1, .end = 0, .pos = 77, .started = true},
        {.start = 1,
         .end = 0,
         .pos = 77,
         .started = true,
         .last = RK_SLICE(last, RPC_STREAM_LAST_MAX)},
        {.start = 1, .end = 0, .pos = 0, .started = true, .done = true},
    };
    for (size_t i = 0; i < sizeof(nexts) / sizeof(nexts[0]); i++) {
        c = (struct rpc_stream_chunk){
            .status = 0,
            .hlc = 99 + i,
            .next = nexts[i],
            .count = (uint32_t)s.n,
            .items = RK_SLICE(s.buf.data, s.buf.len),
        };
        rpc_buf_reset(&b);
        ck_assert_int_eq(rpc_stream_chunk_encode(&b, &c), 0);
        c.checksum = xxh3(c.items);
        pack_stream_chunk(&sb, RPC_MSG_STREAM_CHUNK, c.status, &c, 0);
        ck_assert_uint_eq(b.len, sb.size);
        ck_assert_mem_eq(b.data, sb.data, sb.size);
        struct rpc_stream_chunk d;
        memset(&d, 0x5a, sizeof(d));
        ck_assert_int_eq(rpc_stream_chunk_decode(&d, RK_SLICE(b.data, b.len)),
                         0);
        ck_assert_int_eq(d.status, 0);
        ck_assert_uint_eq(d.hlc, c.hlc);
        assert_pos_eq(&d.next, &c.next);
        ck_assert_uint_eq(d.count, s.n);
        ck_assert_uint_eq(d.items.len, s.buf.len);
        ck_assert_mem_eq(d.items.p, s.buf.data, s.buf.len);
        ck_assert(d.items.p > b.data &&
                  d.items.p + d.items.len <= b.data + b.len);
        ck_assert_uint_eq(d.checksum, xxh3(d.items));
        assert_items(d.items, &s);
        /* Forward compatibility: later fields are skipped. */
        pack_stream_chunk(&sb, RPC_MSG_STREAM_CHUNK, 0, &c, 2);
        memset(&d, 0, sizeof(d));
        ck_assert_int_eq(rpc_stream_chunk_decode(&d, SB_SLICE(sb)), 0);
        ck_assert_uint_eq(d.count, s.n);
        assert_pos_eq(&d.next, &c.next);
        assert_items(d.items, &s);
    }
    msgpack_sbuffer_destroy(&sb);
    rpc_buf_free(&b);
    stream_items_free(&s);
}
END_TEST

/* RPC_STREAM_ITEMS_MAX items decode; a count over it does not, whatever the
 * items. */
START_TEST(stream_items_max)
{
    struct rpc_buf items = RPC_BUF_INIT, b = RPC_BUF_INIT;
    for (uint32_t i = 0; i < RPC_STREAM_ITEMS_MAX; i++) {
        uint8_t k[4] = {(uint8_t)(i >> 24), (uint8_t)(i >> 16),
                        (uint8_t)(i >> 8), (uint8_t)i};
        struct rpc_record rec = {.ts = i, .value = RK_SLICE(k, i % 5)};
        ck_assert_int_eq(rpc_stream_item_add(&items, RK_SLICE(k, 4), &rec), 0);
    }
    struct rpc_stream_chunk c = {
        .next = {.started = true, .pos = 9},
        .count = RPC_STREAM_ITEMS_MAX,
        .items = RK_SLICE(items.data, items.len),
    };
    ck_assert_int_eq(rpc_stream_chunk_encode(&b, &c), 0);
    struct rpc_stream_chunk d;
    ck_assert_int_eq(rpc_stream_chunk_decode(&d, RK_SLICE(b.data, b.len)), 0);
    ck_assert_uint_eq(d.count, RPC_STREAM_ITEMS_MAX);
    struct rk_slice it = d.items, key;
    struct rpc_record rec;
    uint32_t seen = 0;
    int rc;
    while ((rc = rpc_stream_item_next(&it, &key, &rec)) == 1) {
        ck_assert_uint_eq(key.len, 4);
        ck_assert_uint_eq(rec.ts, seen);
        ck_assert_uint_eq(rec.value.len, seen % 5);
        seen++;
    }
    ck_assert_int_eq(rc, 0);
    ck_assert_uint_eq(seen, RPC_STREAM_ITEMS_MAX);

    /* One more item, with the count saying so: over the limit. */
    struct rpc_record one = {.ts = 1};
    ck_assert_int_eq(rpc_stream_item_add(&items, RK_SLICE("x", 1), &one), 0);
    c.items = RK_SLICE(items.data, items.len);
    c.count = RPC_STREAM_ITEMS_MAX + 1;
    rpc_buf_reset(&b);
    ck_assert_int_eq(rpc_stream_chunk_encode(&b, &c), 0);
    ck_assert_int_eq(rpc_stream_chunk_decode(&d, RK_SLICE(b.data, b.len)),
                     RK_EPROTO);
    /* A count over the limit with no items, and the largest count. */
    c.items = RK_SLICE(NULL, 0);
    const uint32_t counts[] = {RPC_STREAM_ITEMS_MAX + 1, UINT32_MAX};
    for (size_t i = 0; i < 2; i++) {
        c.count = counts[i];
        rpc_buf_reset(&b);
        ck_assert_int_eq(rpc_stream_chunk_encode(&b, &c), 0);
        ck_assert_int_eq(rpc_stream_chunk_decode(&d, RK_SLICE(b.data, b.len)),
                         RK_EPROTO);
    }
    rpc_buf_free(&items);
    rpc_buf_free(&b);
}
END_TEST

START_TEST(stream_item_add_limits)
{
    uint8_t *kb = big_value(RK_MAX_KEY + 1);
    uint8_t *vb = big_value(RK_MAX_VALUE + 1);
    struct rpc_buf items = RPC_BUF_INIT;
    struct rpc_record rec = {.ts = 1, .value = RK_SLICE("v", 1)};
    ck_assert_int_eq(rpc_stream_item_add(&items, RK_SLICE("a", 1), &rec), 0);
    size_t len = items.len;
    ck_assert_int_eq(rpc_stream_item_add(&items, RK_SLICE(NULL, 0), &rec),
                     RK_EBADREQ);
    ck_assert_int_eq(
        rpc_stream_item_add(&items, RK_SLICE(kb, RK_MAX_KEY + 1), &rec),
        RK_ETOOLARGE);
    rec.value = RK_SLICE(vb, RK_MAX_VALUE + 1);
    ck_assert_int_eq(rpc_stream_item_add(&items, RK_SLICE("b", 1), &rec),
                     RK_ETOOLARGE);
    ck_assert_uint_eq(items.len, len); /* nothing appended */
    /* The largest key and value. */
    rec.value = RK_SLICE(vb, RK_MAX_VALUE);
    ck_assert_int_eq(
        rpc_stream_item_add(&items, RK_SLICE(kb, RK_MAX_KEY), &rec), 0);
    struct rk_slice it = RK_SLICE(items.data, items.len), key;
    struct rpc_record got;
    ck_assert_int_eq(rpc_stream_item_next(&it, &key, &got), 1);
    ck_assert_int_eq(rpc_stream_item_next(&it, &key, &got), 1);
    ck_assert_uint_eq(key.len, RK_MAX_KEY);
    ck_assert_mem_eq(key.p, kb, RK_MAX_KEY);
    ck_assert_uint_eq(got.value.len, RK_MAX_VALUE);
    ck_assert_mem_eq(got.value.p, vb, RK_MAX_VALUE);
    ck_assert_int_eq(rpc_stream_item_next(&it, &key, &got), 0);
    /* A resume key over the limit is refused by both encoders. */
    struct rpc_buf b = RPC_BUF_INIT;
    struct rpc_stream_req q = {
        .at = {.started = true, .last = RK_SLICE(kb, RPC_STREAM_LAST_MAX + 1)}};
    ck_assert_int_eq(rpc_stream_req_encode(&b, &q), RK_ETOOLARGE);
    struct rpc_stream_chunk c = {.next = q.at};
    ck_assert_int_eq(rpc_stream_chunk_encode(&b, &c), RK_ETOOLARGE);
    ck_assert_uint_eq(b.len, 0);
    rpc_buf_free(&b);
    rpc_buf_free(&items);
    free(kb);
    free(vb);
}
END_TEST

START_TEST(stream_rejects)
{
    struct stream_items s;
    stream_items_make(&s, false);
    uint8_t last[RPC_STREAM_LAST_MAX + 1];
    memset(last, 'l', sizeof(last));
    msgpack_sbuffer sb;
    msgpack_sbuffer_init(&sb);
    struct rpc_buf b = RPC_BUF_INIT;
    struct rpc_stream_req q = {
        .epoch = 1, .at = {.start = 3, .end = 9}, .max_bytes = 1000};
    struct rpc_stream_req dq;
    struct rpc_stream_chunk c = {
        .hlc = 2,
        .next = {.start = 3, .end = 9, .pos = 4, .started = true},
        .count = (uint32_t)s.n,
        .items = RK_SLICE(s.buf.data, s.buf.len),
    };
    c.checksum = xxh3(c.items);
    struct rpc_stream_chunk d;
    pack_stream_chunk(&sb, RPC_MSG_STREAM_CHUNK, 0, &c, 0);
    ck_assert_int_eq(rpc_stream_chunk_decode(&d, SB_SLICE(sb)), 0);

    /* Any flipped byte of the items bin, or of the checksum: the checksum
     * does not match. */
    ck_assert_int_eq(rpc_stream_chunk_encode(&b, &c), 0);
    uint8_t *at = memmem(b.data, b.len, s.buf.data, s.buf.len);
    ck_assert_ptr_nonnull(at);
    size_t off = (size_t)(at - b.data);
    for (size_t i = off; i < off + s.buf.len; i++) {
        for (int bit = 0; bit < 8; bit++) {
            b.data[i] ^= (uint8_t)(1u << bit);
            ck_assert_int_eq(
                rpc_stream_chunk_decode(&d, RK_SLICE(b.data, b.len)),
                RK_EPROTO);
            b.data[i] ^= (uint8_t)(1u << bit);
        }
    }
    ck_assert_uint_eq(b.data[off + s.buf.len], 0xcf); /* the checksum */
    for (size_t i = off + s.buf.len + 1; i < b.len; i++) {
        b.data[i] ^= 0x10;
        ck_assert_int_eq(rpc_stream_chunk_decode(&d, RK_SLICE(b.data, b.len)),
                         RK_EPROTO);
        b.data[i] ^= 0x10;
    }
    ck_assert_int_eq(rpc_stream_chunk_decode(&d, RK_SLICE(b.data, b.len)), 0);

    /* A count that disagrees with the items. */
    const uint32_t counts[] = {0, (uint32_t)s.n - 1, (uint32_t)s.n + 1};
    for (size_t i = 0; i < 3; i++) {
        c.count = counts[i];
        rpc_buf_reset(&b);
        ck_assert_int_eq(rpc_stream_chunk_encode(&b, &c), 0);
        ck_assert_int_eq(rpc_stream_chunk_decode(&d, RK_SLICE(b.data, b.len)),
                         RK_EPROTO);
    }
    c.count = (uint32_t)s.n;

    /* A resume key over RPC_STREAM_LAST_MAX: RK_ETOOLARGE from the declared
     * length (wire__rd_code of the reader's WIRE__RD_BIG), even with the
     * bytes missing. */
    q.at.started = true;
    q.at.last = RK_SLICE(last, RPC_STREAM_LAST_MAX + 1);
    pack_stream_req(&sb, RPC_MSG_STREAM, &q, 0);
    ck_assert_int_eq(rpc_stream_req_decode(&dq, SB_SLICE(sb)), RK_ETOOLARGE);
    uint8_t *lp = memmem(sb.data, sb.size, last, sizeof(last));
    ck_assert_ptr_nonnull(lp);
    ck_assert_int_eq(
        rpc_stream_req_decode(
            &dq, RK_SLICE(sb.data, (size_t)(lp - (uint8_t *)sb.data))),
        RK_ETOOLARGE);
    c.next.last = q.at.last;
    pack_stream_chunk(&sb, RPC_MSG_STREAM_CHUNK, 0, &c, 0);
    ck_assert_int_eq(rpc_stream_chunk_decode(&d, SB_SLICE(sb)), RK_ETOOLARGE);
    q.at.last.len = c.next.last.len = RPC_STREAM_LAST_MAX;
    pack_stream_req(&sb, RPC_MSG_STREAM, &q, 0);
    ck_assert_int_eq(rpc_stream_req_decode(&dq, SB_SLICE(sb)), 0);
    pack_stream_chunk(&sb, RPC_MSG_STREAM_CHUNK, 0, &c, 0);
    ck_assert_int_eq(rpc_stream_chunk_decode(&d, SB_SLICE(sb)), 0);

    /* A resume key with started false. */
    q.at.started = c.next.started = false;
    q.at.last.len = c.next.last.len = 1;
    pack_stream_req(&sb, RPC_MSG_STREAM, &q, 0);
    ck_assert_int_eq(rpc_stream_req_decode(&dq, SB_SLICE(sb)), RK_EPROTO);
    pack_stream_chunk(&sb, RPC_MSG_STREAM_CHUNK, 0, &c, 0);
    ck_assert_int_eq(rpc_stream_chunk_decode(&d, SB_SLICE(sb)), RK_EPROTO);
    q.at.last.len = c.next.last.len = 0;
    pack_stream_req(&sb, RPC_MSG_STREAM, &q, 0);
    ck_assert_int_eq(rpc_stream_req_decode(&dq, SB_SLICE(sb)), 0);
    pack_stream_chunk(&sb, RPC_MSG_STREAM_CHUNK, 0, &c, 0);
    ck_assert_int_eq(rpc_stream_chunk_decode(&d, SB_SLICE(sb)), 0);

    /* Wrong type tags. */
    const uint64_t tags[] = {
        0, RPC_MSG_READ_RESP, RPC_MSG_STREAM, RPC_MSG_STREAM_CHUNK,
        8, UINT64_MAX};
    for (size_t i = 0; i < sizeof(tags) / sizeof(tags[0]); i++) {
        pack_stream_req(&sb, tags[i], &q, 0);
        ck_assert_int_eq(rpc_stream_req_decode(&dq, SB_SLICE(sb)),
                         tags[i] == RPC_MSG_STREAM ? 0 : RK_EPROTO);
        pack_stream_chunk(&sb, tags[i], 0, &c, 0);
        ck_assert_int_eq(rpc_stream_chunk_decode(&d, SB_SLICE(sb)),
                         tags[i] == RPC_MSG_STREAM_CHUNK ? 0 : RK_EPROTO);
    }

    /* A positive status is not a code; one past int32 is out of range. */
    const int64_t bad_status[] = {1, INT32_MAX, (int64_t)INT32_MIN - 1};
    for (size_t i = 0; i < 3; i++) {
        pack_stream_chunk(&sb, RPC_MSG_STREAM_CHUNK, bad_status[i], &c, 0);
        ck_assert_int_eq(rpc_stream_chunk_decode(&d, SB_SLICE(sb)), RK_EPROTO);
    }
    pack_stream_chunk(&sb, RPC_MSG_STREAM_CHUNK, RK_ESTALE, &c, 0);
    ck_assert_int_eq(rpc_stream_chunk_decode(&d, SB_SLICE(sb)), 0);
    ck_assert_int_eq(d.status, RK_ESTALE);

    /* Trailing bytes after the array; an element missing. */
    pack_stream_req(&sb, RPC_MSG_STREAM, &q, 0);
    msgpack_sbuffer_write(&sb, "\xc0", 1);
    ck_assert_int_eq(rpc_stream_req_decode(&dq, SB_SLICE(sb)), RK_EPROTO);
    pack_stream_chunk(&sb, RPC_MSG_STREAM_CHUNK, 0, &c, 1);
    msgpack_sbuffer_write(&sb, "\x00", 1);
    ck_assert_int_eq(rpc_stream_chunk_decode(&d, SB_SLICE(sb)), RK_EPROTO);
    rpc_buf_reset(&b);
    ck_assert_int_eq(rpc_stream_req_encode(&b, &q), 0);
    b.data[0] = 0x98; /* 8 elements: max_bytes (cd 03e8) missing */
    ck_assert_int_eq(rpc_stream_req_decode(&dq, RK_SLICE(b.data, b.len - 3)),
                     RK_EPROTO);
    rpc_buf_reset(&b);
    ck_assert_int_eq(rpc_stream_chunk_encode(&b, &c), 0);
    b.data[0] = 0x9b; /* 11 elements: the checksum (cf + 8) missing */
    ck_assert_int_eq(rpc_stream_chunk_decode(&d, RK_SLICE(b.data, b.len - 9)),
                     RK_EPROTO);

    msgpack_sbuffer_destroy(&sb);
    rpc_buf_free(&b);
    stream_items_free(&s);
}
END_TEST

/* Items bins that are not count well-formed items, under a checksum that
 * matches: the chunk does not decode. */
START_TEST(stream_bad_items)
{
    msgpack_sbuffer items, sb;
    msgpack_sbuffer_init(&items);
    msgpack_sbuffer_init(&sb);
    msgpack_packer pk;
    struct rpc_stream_chunk c = {.next = {.started = true}};
    struct rpc_stream_chunk d;
    for (int kind = 0; kind < 9; kind++) {
        msgpack_sbuffer_clear(&items);
        msgpack_packer_init(&pk, &items, msgpack_sbuffer_write);
        int want = RK_EPROTO;
        switch (kind) {
        case 0: /* an empty key */
            msgpack_pack_array(&pk, 5);
            msgpack_pack_bin(&pk, 0);
            msgpack_pack_uint64(&pk, 1);
            msgpack_pack_uint64(&pk, 0);
            msgpack_pack_uint64(&pk, 0);
            msgpack_pack_bin(&pk, 0);
            break;
        case 1: /* six elements (a later field) */
        case 2: /* four, with the value after the array */
            msgpack_pack_array(&pk, kind == 1 ? 6 : 4);
            msgpack_pack_bin(&pk, 1);
            msgpack_pack_bin_body(&pk, "k", 1);
            for (int i = 0; i < 3; i++)
                msgpack_pack_uint64(&pk, 0);
            msgpack_pack_bin(&pk, 0);
            if (kind == 1)
                msgpack_pack_uint64(&pk, 0);
            break;
        case 3: /* not an array */
            msgpack_pack_map(&pk, 0);
            break;
        case 4: /* a str key */
            msgpack_pack_array(&pk, 5);
            msgpack_pack_str(&pk, 1);
            msgpack_pack_str_body(&pk, "k", 1);
            for (int i = 0; i < 3; i++)
                msgpack_pack_uint64(&pk, 0);
            msgpack_pack_bin(&pk, 0);
            break;
        case 5: /* flags over 32 bits */
            msgpack_pack_array(&pk, 5);
            msgpack_pack_bin(&pk, 1);
            msgpack_pack_bin_body(&pk, "k", 1);
            msgpack_pack_uint64(&pk, 0);
            msgpack_pack_uint64(&pk, UINT64_C(1) << 32);
            msgpack_pack_uint64(&pk, 0);
            msgpack_pack_bin(&pk, 0);
            break;
        case 6: /* a good item, then a byte that is not one */
            msgpack_pack_array(&pk, 5);
            msgpack_pack_bin(&pk, 1);
            msgpack_pack_bin_body(&pk, "k", 1);
            for (int i = 0; i < 3; i++)
                msgpack_pack_uint64(&pk, 0);
            msgpack_pack_bin(&pk, 0);
            msgpack_pack_nil(&pk);
            break;
        case 7: /* a key declared over RK_MAX_KEY (the bytes missing) */
            msgpack_pack_array(&pk, 5);
            msgpack_pack_bin(&pk, RK_MAX_KEY + 1);
            want = RK_ETOOLARGE;
            break;
        case 8: /* a value whose bytes are missing */
            msgpack_pack_array(&pk, 5);
            msgpack_pack_bin(&pk, 1);
            msgpack_pack_bin_body(&pk, "k", 1);
            for (int i = 0; i < 3; i++)
                msgpack_pack_uint64(&pk, 0);
            msgpack_pack_bin(&pk, 100);
            break;
        }
        c.items = SB_SLICE(items);
        c.count = 1;
        c.checksum = xxh3(c.items);
        pack_stream_chunk(&sb, RPC_MSG_STREAM_CHUNK, 0, &c, 0);
        ck_assert_int_eq(rpc_stream_chunk_decode(&d, SB_SLICE(sb)), want);
        /* the iterator says the same, without reading past the items */
        uint8_t *copy = malloc(items.size);
        memcpy(copy, items.data, items.size);
        struct rk_slice it = RK_SLICE(copy, items.size), key;
        struct rpc_record rec;
        int rc = rpc_stream_item_next(&it, &key, &rec);
        if (kind == 6)
            rc = rpc_stream_item_next(&it, &key, &rec);
        ck_assert_int_eq(rc, want);
        free(copy);
    }
    struct rk_slice it = RK_SLICE(NULL, 3), key;
    struct rpc_record rec;
    ck_assert_int_eq(rpc_stream_item_next(&it, &key, &rec), RK_EPROTO);
    msgpack_sbuffer_destroy(&items);
    msgpack_sbuffer_destroy(&sb);
}
END_TEST

/* Every proper prefix of a request and of a chunk of several items is
 * refused (each copied to a heap block of its exact size, for ASan); so is
 * every cut of the items inside an item, by the iterator. */
START_TEST(stream_truncation)
{
    struct stream_items s;
    stream_items_make(&s, false);
    uint8_t last[RPC_STREAM_LAST_MAX];
    memset(last, 'q', sizeof(last));
    struct rpc_buf rq = RPC_BUF_INIT, ch = RPC_BUF_INIT;
    struct rpc_stream_req q = {
        .epoch = 1000,
        .at = {.start = 1,
               .end = 2,
               .pos = UINT64_MAX,
               .started = true,
               .last = RK_SLICE(last, sizeof(last))},
        .max_bytes = 1 << 20,
    };
    ck_assert_int_eq(rpc_stream_req_encode(&rq, &q), 0);
    struct rpc_stream_chunk c = {
        .status = RK_ENOTFOUND,
        .hlc = UINT64_C(1) << 40,
        .next = q.at,
        .count = (uint32_t)s.n,
        .items = RK_SLICE(s.buf.data, s.buf.len),
    };
    ck_assert_int_eq(rpc_stream_chunk_encode(&ch, &c), 0);
    ck_assert_int_eq(dec_stream_req(RK_SLICE(rq.data, rq.len)), 0);
    ck_assert_int_eq(dec_stream_chunk(RK_SLICE(ch.data, ch.len)), 0);
    for (size_t cut = 0; cut < rq.len; cut++) {
        uint8_t *p = malloc(cut ? cut : 1);
        memcpy(p, rq.data, cut);
        ck_assert_int_eq(dec_stream_req(RK_SLICE(p, cut)), RK_EPROTO);
        free(p);
    }
    for (size_t cut = 0; cut < ch.len; cut++) {
        uint8_t *p = malloc(cut ? cut : 1);
        memcpy(p, ch.data, cut);
        ck_assert_int_eq(dec_stream_chunk(RK_SLICE(p, cut)), RK_EPROTO);
        free(p);
    }
    /* Item boundaries: where each item ends. */
    size_t ends[4], n = 0;
    struct rk_slice it = RK_SLICE(s.buf.data, s.buf.len), key;
    struct rpc_record rec;
    while (rpc_stream_item_next(&it, &key, &rec) == 1)
        ends[n++] = s.buf.len - it.len;
    ck_assert_uint_eq(n, s.n);
    for (size_t cut = 1; cut < s.buf.len; cut++) {
        uint8_t *p = malloc(cut);
        memcpy(p, s.buf.data, cut);
        it = RK_SLICE(p, cut);
        size_t got = 0, whole = 0;
        int rc;
        while ((rc = rpc_stream_item_next(&it, &key, &rec)) == 1)
            got++;
        for (size_t i = 0; i < n; i++)
            whole += ends[i] <= cut;
        ck_assert_uint_eq(got, whole);
        ck_assert_int_eq(rc,
                         ends[whole ? whole - 1 : 0] == cut ? 0 : RK_EPROTO);
        free(p);
    }
    rpc_buf_free(&rq);
    rpc_buf_free(&ch);
    stream_items_free(&s);
}
END_TEST

static Suite *wire_rpc_suite(void)
{
    Suite *s = suite_create("wire_rpc");
    TCase *tc = tcase_create("golden");
    tcase_add_test(tc, golden_vectors);
    tcase_add_test(tc, golden_decode);
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
    tc = tcase_create("stream");
    tcase_set_timeout(tc, 120);
    tcase_add_test(tc, stream_golden);
    tcase_add_test(tc, stream_req_round_trip);
    tcase_add_test(tc, stream_chunk_round_trip);
    tcase_add_test(tc, stream_push_golden);
    tcase_add_test(tc, merkle_golden);
    tcase_add_test(tc, scan_golden);
    tcase_add_test(tc, stream_items_max);
    tcase_add_test(tc, stream_item_add_limits);
    tcase_add_test(tc, stream_rejects);
    tcase_add_test(tc, stream_bad_items);
    tcase_add_test(tc, stream_truncation);
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
