/*
 * check_wire_rpc.c - the internode RPC message codecs: golden byte vectors
 * (a change of encoding must fail here, not split a mixed-version cluster),
 * round trips, standard msgpack (msgpack-c reads what we write), every
 * truncation and every single-byte corruption handled without a crash, size
 * limits, and the handshake's MAC, roles and nonce binding.
 */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <check.h>
#include <msgpack.h>

#include "common/rk.h"
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
#define GOLDEN_HS                                                      \
    "99010100a26331a26e31c410aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaac4100000" \
    "00000000000000000000000000007bc420110852c87de7375a0f01ce83aa7458" \
    "052460ee3a8079dfdd5b6e668d82e30303"

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

    uint8_t nonce[RPC_NONCE_BYTES], out[RPC_HANDSHAKE_MAX];
    size_t len = 0;
    memset(nonce, 0xaa, sizeof(nonce));
    ck_assert_int_eq(rpc_handshake_make(out, sizeof(out), &len, key,
                                        RK_SLICE("c1", 2), RK_SLICE("n1", 2),
                                        nonce, 123, RK_SLICE(NULL, 0)),
                     0);
    struct rpc_buf hb = {out, len, len};
    assert_bytes(&hb, GOLDEN_HS);
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

static const struct {
    const char *hex;
    decode_fn fn;
} corruptible[] = {
    {GOLDEN_WRITE, dec_write}, {GOLDEN_ACK, dec_ack},
    {GOLDEN_READ, dec_read},   {GOLDEN_RR_NF, dec_rr},
    {GOLDEN_RR_DATA, dec_rr},  {GOLDEN_RR_DIG, dec_rr},
    {GOLDEN_HS, dec_hs},
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

struct hs_fixture {
    uint8_t key[RPC_KEY_BYTES];
    uint8_t n1[RPC_NONCE_BYTES];
    uint8_t n2[RPC_NONCE_BYTES];
    uint8_t ch[RPC_HANDSHAKE_MAX];
    size_t ch_len;
    uint8_t re[RPC_HANDSHAKE_MAX];
    size_t re_len;
};

static void hs_setup(struct hs_fixture *f, const char *secret)
{
    rpc_key_derive(f->key, RK_SLICE(secret, strlen(secret)));
    memset(f->n1, 1, sizeof(f->n1));
    memset(f->n2, 2, sizeof(f->n2));
    ck_assert_int_eq(rpc_handshake_make(f->ch, sizeof(f->ch), &f->ch_len,
                                        f->key, RK_SLICE("prod", 4),
                                        RK_SLICE("node-a", 6), f->n1, 1000,
                                        RK_SLICE(NULL, 0)),
                     0);
    ck_assert_int_eq(rpc_handshake_make(f->re, sizeof(f->re), &f->re_len,
                                        f->key, RK_SLICE("prod", 4),
                                        RK_SLICE("node-b", 6), f->n2, 1001,
                                        RK_SLICE(f->ch, f->ch_len)),
                     0);
}

START_TEST(handshake_protocol)
{
    struct hs_fixture f;
    hs_setup(&f, "s3cret");
    char name[64];
    struct rk_slice none = RK_SLICE(NULL, 0), prod = RK_SLICE("prod", 4);
    /* Connecting side checks the challenge. */
    ck_assert_int_eq(rpc_handshake_check(RK_SLICE(f.ch, f.ch_len), none, f.key,
                                         prod, name, sizeof(name)),
                     0);
    ck_assert_str_eq(name, "node-a");
    /* Accepting side checks the response against the challenge it sent. */
    ck_assert_int_eq(rpc_handshake_check(RK_SLICE(f.re, f.re_len),
                                         RK_SLICE(f.ch, f.ch_len), f.key, prod,
                                         name, sizeof(name)),
                     0);
    ck_assert_str_eq(name, "node-b");
    /* Truncated name buffer. */
    ck_assert_int_eq(rpc_handshake_check(RK_SLICE(f.re, f.re_len),
                                         RK_SLICE(f.ch, f.ch_len), f.key, prod,
                                         name, 3),
                     0);
    ck_assert_str_eq(name, "no");

    /* A challenge reflected back as the response is refused (role). */
    ck_assert_int_eq(rpc_handshake_check(RK_SLICE(f.ch, f.ch_len),
                                         RK_SLICE(f.ch, f.ch_len), f.key, prod,
                                         NULL, 0),
                     RK_EPROTO);
    /* A response recorded for another challenge is refused (nonce). */
    struct hs_fixture g;
    hs_setup(&g, "s3cret");
    g.ch[30] ^= 0xff; /* inside nonce n1: a different challenge */
    ck_assert_int_eq(rpc_handshake_check(RK_SLICE(f.re, f.re_len),
                                         RK_SLICE(g.ch, g.ch_len), f.key, prod,
                                         NULL, 0),
                     RK_EPROTO);
    /* Wrong secret, wrong cluster name. */
    struct hs_fixture w;
    hs_setup(&w, "other");
    ck_assert_int_eq(rpc_handshake_check(RK_SLICE(w.ch, w.ch_len), none, f.key,
                                         prod, NULL, 0),
                     RK_EAUTH);
    ck_assert_int_eq(rpc_handshake_check(RK_SLICE(f.ch, f.ch_len), none, f.key,
                                         RK_SLICE("prox", 4), NULL, 0),
                     RK_EAUTH);
    /* Any flipped byte in the signed part fails. */
    for (size_t i = 1; i < f.ch_len; i++) {
        uint8_t c[RPC_HANDSHAKE_MAX];
        memcpy(c, f.ch, f.ch_len);
        c[i] ^= 0x01;
        ck_assert_int_ne(rpc_handshake_check(RK_SLICE(c, f.ch_len), none, f.key,
                                             prod, NULL, 0),
                         0);
    }
    /* Answering something that is not a challenge. */
    uint8_t out[RPC_HANDSHAKE_MAX];
    size_t len;
    ck_assert_int_eq(rpc_handshake_make(out, sizeof(out), &len, f.key, prod,
                                        RK_SLICE("x", 1), f.n1, 0,
                                        RK_SLICE(f.re, f.re_len)),
                     RK_EPROTO);
    ck_assert_int_eq(rpc_handshake_make(out, 10, &len, f.key, prod,
                                        RK_SLICE("x", 1), f.n1, 0, none),
                     RK_ETOOLARGE);
    /* Longest names fit in RPC_HANDSHAKE_MAX; longer ones are refused. */
    char lname[RPC_NAME_MAX + 2];
    memset(lname, 'n', sizeof(lname));
    ck_assert_int_eq(rpc_handshake_make(out, sizeof(out), &len, f.key,
                                        RK_SLICE(lname, RPC_NAME_MAX),
                                        RK_SLICE(lname, RPC_NAME_MAX), f.n1,
                                        UINT64_MAX, none),
                     0);
    ck_assert_int_eq(rpc_handshake_make(out, sizeof(out), &len, f.key,
                                        RK_SLICE(lname, RPC_NAME_MAX + 1),
                                        RK_SLICE("x", 1), f.n1, 0, none),
                     RK_ETOOLARGE);
    /* Version from the future. */
    memcpy(out, f.ch, f.ch_len);
    out[2] = 2;
    ck_assert_int_eq(rpc_handshake_check(RK_SLICE(out, f.ch_len), none, f.key,
                                         prod, NULL, 0),
                     RK_EVERSION);
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
