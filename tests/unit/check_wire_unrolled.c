/*
 * check_wire_unrolled.c - the hot messages' unrolled codecs (generated from
 * their field lists, wire/codec_steps.h) against wire/'s table walker
 * (codec.c) on the same tables: for every sample message, every
 * truncation, every byte replaced by each of a set of type bytes and by
 * seeded random bytes, both decoders must return the same code, stop at
 * the same byte with the same reason, and what they accept must encode to
 * the same bytes with either encoder. The golden vectors of check_wire_rpc.c,
 * check_wire_rpc_stream.c and check_wire_client.c pin the bytes themselves.
 */
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <check.h>

#include "rng.h"
#include "wire/client_msg.h"
#include "wire/codec_steps.h"
#include "wire/rpc_msg.h"

/* The walker's and the unrolled code's encoding of the struct at base. */
static void encode_both(const struct wire__unrolled *u,
                        const void *base,
                        struct wire_cbuf *walked,
                        struct wire_cbuf *unrolled)
{
    struct wire__wr w;
    walked->len = unrolled->len = 0;
    wire__wr_init(&w, &walked->p, &walked->len, &walked->cap);
    wire__encode(&w, u->layout, base);
    ck_assert_int_eq(wire__wr_end(&w), 0);
    wire__wr_init(&w, &unrolled->p, &unrolled->len, &unrolled->cap);
    u->encode(&w, base);
    ck_assert_int_eq(wire__wr_end(&w), 0);
}

static void assert_same_bytes(const struct wire_cbuf *a,
                              const struct wire_cbuf *b,
                              const char *what)
{
    if (a->len != b->len || (a->len && memcmp(a->p, b->p, a->len) != 0))
        ck_abort_msg("%s: the two encoders differ", what);
}

/* The same reason: the same words (each file that inlines a step has its
 * own copy of the string unless the linker merges them). */
static bool same_why(const char *a, const char *b)
{
    return a == b || (a != NULL && b != NULL && strcmp(a, b) == 0);
}

/* Decodes in with both decoders of u and compares what they did. */
static void
compare_decoders(const struct wire__unrolled *u, const uint8_t *in, size_t len)
{
    void *a = calloc(1, u->size), *b = calloc(1, u->size);
    struct wire__rd ra, rb;
    struct wire_cbuf ea = {NULL, 0, 0}, eb = {NULL, 0, 0};
    struct wire_cbuf fa = {NULL, 0, 0}, fb = {NULL, 0, 0};
    ck_assert(a != NULL && b != NULL);
    wire__rd_init(&ra, in, len);
    wire__rd_init(&rb, in, len);
    int rca = wire__decode(&ra, u->layout, a, 0);
    int rcb = u->decode(&rb, b, 0);
    if (rca != rcb || ra.p != rb.p || !same_why(ra.why, rb.why)) {
        fprintf(stderr, "%s on %zu bytes:", u->name, len);
        for (size_t i = 0; i < len; i++)
            fprintf(stderr, " %02x", in[i]);
        fprintf(stderr, "\n  walker %d at %td (%s), unrolled %d at %td (%s)\n",
                rca, ra.p - in, ra.why ? ra.why : "-", rcb, rb.p - in,
                rb.why ? rb.why : "-");
        ck_abort_msg("%s: the two decoders differ", u->name);
    }
    if (rca == 0) {
        encode_both(u, a, &ea, &eb);
        assert_same_bytes(&ea, &eb, u->name);
        encode_both(u, b, &fa, &fb);
        assert_same_bytes(&ea, &fa, u->name);
        assert_same_bytes(&ea, &fb, u->name);
    }
    wire__free(u->layout, a);
    wire__free(u->layout, b);
    free(a);
    free(b);
    wire_cbuf_release(&ea);
    wire_cbuf_release(&eb);
    wire_cbuf_release(&fa);
    wire_cbuf_release(&fb);
}

/* The input, every truncation of it, and every byte replaced by each of a
 * set of type bytes and by random ones, through every unrolled decoder. */
static void compare_mutations(const uint8_t *msg, size_t len, uint64_t *seed)
{
    static const uint8_t types[] = {
        0x00, 0x01, 0x05, 0x7f, 0x80, 0x81, 0x8f, 0x90, 0x93, 0x9f, 0xa0,
        0xa1, 0xbf, 0xc0, 0xc1, 0xc2, 0xc3, 0xc4, 0xc5, 0xc6, 0xc7, 0xca,
        0xcb, 0xcc, 0xcd, 0xce, 0xcf, 0xd0, 0xd1, 0xd2, 0xd3, 0xd4, 0xd9,
        0xda, 0xdb, 0xdc, 0xdd, 0xde, 0xdf, 0xe0, 0xff,
    };
    const struct wire__unrolled *rpc, *client;
    size_t nrpc = rpc__unrolled(&rpc), nclient = wire__client_unrolled(&client);
    uint8_t *buf = malloc(len ? len : 1);
    ck_assert(buf != NULL);
    for (size_t cut = 0; cut <= len; cut++) {
        for (size_t m = 0; m <= (cut ? sizeof(types) + 8 : 0); m++) {
            memcpy(buf, msg, cut);
            if (m > 0) {
                size_t at = (size_t)(rng_next(seed) % cut);
                buf[at] =
                    m <= sizeof(types) ? types[m - 1] : (uint8_t)rng_next(seed);
            }
            for (size_t i = 0; i < nrpc; i++)
                compare_decoders(&rpc[i], buf, cut);
            for (size_t i = 0; i < nclient; i++)
                compare_decoders(&client[i], buf, cut);
        }
    }
    free(buf);
}

static const uint8_t key[] = "user:0000012345";
static const uint8_t value[] = "a value of some length, longer than a fixstr";

START_TEST(rpc_messages)
{
    uint64_t seed = UINT64_C(0x5eed0001);
    struct rpc_buf b = RPC_BUF_INIT;
    struct rpc_write w = {.token = UINT64_C(0x9e3779b97f4a7c15),
                          .epoch = 300,
                          .key = RK_SLICE(key, sizeof(key) - 1),
                          .rec = {.ts = 1ull << 40,
                                  .flags = 1,
                                  .expiry = 70000,
                                  .value = RK_SLICE(value, sizeof(value))}};
    struct rpc_write_ack a = {.status = RK_ETIMEOUT, .hlc = 99};
    struct rpc_read rd = {.token = 5, .epoch = 0, .key = w.key, .digest = 1};
    struct rpc_read_resp rr = {.status = 0, .hlc = 7, .found = true};
    rr.rec = w.rec;

    ck_assert_int_eq(rpc_write_encode(&b, &w), 0);
    compare_mutations(b.data, b.len, &seed);
    rpc_buf_reset(&b);
    ck_assert_int_eq(rpc_write_ack_encode(&b, &a), 0);
    compare_mutations(b.data, b.len, &seed);
    rpc_buf_reset(&b);
    ck_assert_int_eq(rpc_read_encode(&b, &rd), 0);
    compare_mutations(b.data, b.len, &seed);
    for (int found = 0; found <= 1; found++) {
        for (int digest = 0; digest <= 1; digest++) {
            rr.found = found;
            rr.is_digest = digest;
            rr.dig.value_hash = UINT64_MAX;
            rpc_buf_reset(&b);
            ck_assert_int_eq(rpc_read_resp_encode(&b, &rr), 0);
            compare_mutations(b.data, b.len, &seed);
        }
    }
    rpc_buf_free(&b);
}
END_TEST

START_TEST(client_messages)
{
    uint64_t seed = UINT64_C(0x5eed0002);
    struct wire_cbuf b = {NULL, 0, 0};
    struct rk_slice keys[2] = {RK_SLICE(key, 3), RK_SLICE(key, 5)};
    struct wire_creq q = {.id = 1ull << 33,
                          .op = WIRE_COP_PUT,
                          .has = WIRE_CREQ_CL | WIRE_CREQ_KEY |
                                 WIRE_CREQ_VALUE | WIRE_CREQ_TTL,
                          .cl = WIRE_CCL_QUORUM,
                          .ttl = 60,
                          .key = RK_SLICE(key, sizeof(key) - 1),
                          .value = RK_SLICE(value, sizeof(value))};
    struct wire_creq mget = {.id = 2,
                             .op = WIRE_COP_MGET,
                             .has = WIRE_CREQ_KEYS,
                             .keys = keys,
                             .nkeys = 2};
    struct wire_cvalue values[2] = {{true, RK_SLICE(value, 4)},
                                    {false, RK_SLICE(NULL, 0)}};
    struct wire_cresp get = {.id = 3,
                             .op = WIRE_COP_GET,
                             .has = WIRE_CRESP_VALUE,
                             .value = RK_SLICE(value, sizeof(value))};
    struct wire_cresp err = {.id = 4,
                             .op = WIRE_COP_PUT,
                             .err = RK_EUNAVAILABLE,
                             .has = WIRE_CRESP_MSG | WIRE_CRESP_ACKS |
                                    WIRE_CRESP_NEED,
                             .msg = RK_SLICE("no", 2),
                             .acks = 1,
                             .need = 2};
    struct wire_cresp mres = {.id = 5,
                              .op = WIRE_COP_MGET,
                              .has = WIRE_CRESP_VALUES,
                              .values = values,
                              .nvalues = 2};

    ck_assert_int_eq(wire_creq_encode(&b, &q), 0);
    ck_assert_int_eq(wire_creq_encode(&b, &mget), 0);
    ck_assert_int_eq(wire_cresp_encode(&b, &get), 0);
    ck_assert_int_eq(wire_cresp_encode(&b, &err), 0);
    ck_assert_int_eq(wire_cresp_encode(&b, &mres), 0);
    /* each frame's body */
    for (size_t at = 0; at < b.len;) {
        struct rk_slice body;
        size_t used;
        ck_assert_int_eq(wire_cframe_parse(&body, &used, b.p + at, b.len - at),
                         0);
        ck_assert_uint_gt(used, 0);
        compare_mutations(body.p, body.len, &seed);
        at += used;
    }
    wire_cbuf_release(&b);
}
END_TEST

static Suite *wire_unrolled_suite(void)
{
    Suite *s = suite_create("wire_unrolled");
    TCase *tc = tcase_create("unrolled_equals_walker");
    tcase_add_test(tc, rpc_messages);
    tcase_add_test(tc, client_messages);
    suite_add_tcase(s, tc);
    return s;
}

int main(void)
{
    SRunner *sr = srunner_create(wire_unrolled_suite());
    srunner_run_all(sr, CK_NORMAL);
    int failed = srunner_ntests_failed(sr);
    srunner_free(sr);
    return failed == 0 ? EXIT_SUCCESS : EXIT_FAILURE;
}
