/*
 * check_wire_client.c - the native client protocol codecs: golden bytes,
 * round trips of every op, and malformed input.
 *
 * The golden vectors are the protocol: if one changes, a client and a server
 * built from different trees no longer understand each other.
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
#include "wire/client_msg.h"

#define S(str) RK_SLICE(str, sizeof(str) - 1)

#define GOLDEN_REQ_LEN   299680
#define GOLDEN_REQ_HASH  UINT64_C(0xbbe35d596942b9a2)
#define GOLDEN_RESP_LEN  68510
#define GOLDEN_RESP_HASH UINT64_C(0x79d299bdce43f072)

static bool slice_eq(struct rk_slice a, const char *s)
{
    return a.len == strlen(s) && memcmp(a.p, s, a.len) == 0;
}

static void
expect_bytes(const struct wire_cbuf *b, const uint8_t *want, size_t n)
{
    if (b->len != n || memcmp(b->p, want, n) != 0) {
        fprintf(stderr, "got %zu bytes:", b->len);
        for (size_t i = 0; i < b->len; i++)
            fprintf(stderr, " %02x", b->p[i]);
        fprintf(stderr, "\n");
    }
    ck_assert_uint_eq(b->len, n);
    ck_assert_mem_eq(b->p, want, n);
}

/* ---- golden vectors ------------------------------------------------- */

START_TEST(golden_get_request)
{
    static const uint8_t want[] = {0x00, 0x00, 0x00, 0x09, 0x83, 0x01, 0x01,
                                   0x02, 0x0a, 0x04, 0xc4, 0x01, 'k'};
    struct wire_creq q = {
        .id = 1, .op = WIRE_COP_GET, .has = WIRE_CREQ_KEY, .key = S("k")};
    struct wire_cbuf b = {0};
    ck_assert_int_eq(wire_creq_encode(&b, &q), 0);
    expect_bytes(&b, want, sizeof(want));
    wire_cbuf_release(&b);
}
END_TEST

/* ABORT (46, `ringkv abort`): an admin op with no argument */
START_TEST(golden_abort_request)
{
    static const uint8_t want[] = {0x00, 0x00, 0x00, 0x05, 0x82,
                                   0x01, 0x07, 0x02, 0x2e};
    struct wire_creq q = {.id = 7, .op = WIRE_COP_ABORT};
    struct wire_cbuf b = {0};
    ck_assert_int_eq(wire_creq_encode(&b, &q), 0);
    expect_bytes(&b, want, sizeof(want));
    wire_cbuf_release(&b);
    struct wire_creq d;
    ck_assert_int_eq(wire_creq_decode(&d, want + 4, sizeof(want) - 4), 0);
    ck_assert_uint_eq(d.op, WIRE_COP_ABORT);
    ck_assert_uint_eq(d.id, 7);
    wire_creq_clear(&d);
}
END_TEST

START_TEST(golden_put_request)
{
    static const uint8_t want[] = {0x00, 0x00, 0x00, 0x15, 0x86, 0x01, 0xcd,
                                   0x12, 0x34, 0x02, 0x0b, 0x03, 0x03, 0x04,
                                   0xc4, 0x01, 'a',  0x05, 0xc4, 0x03, 'x',
                                   'y',  'z',  0x06, 0x3c};
    struct wire_creq q = {.id = 0x1234,
                          .op = WIRE_COP_PUT,
                          .has = WIRE_CREQ_KEY | WIRE_CREQ_VALUE |
                                 WIRE_CREQ_TTL | WIRE_CREQ_CL,
                          .cl = WIRE_CCL_QUORUM,
                          .key = S("a"),
                          .value = S("xyz"),
                          .ttl = 60};
    struct wire_cbuf b = {0};
    ck_assert_int_eq(wire_creq_encode(&b, &q), 0);
    expect_bytes(&b, want, sizeof(want));
    wire_cbuf_release(&b);
}
END_TEST

START_TEST(golden_mget_hello_requests)
{
    static const uint8_t want[] = {
        /* MGET id 2 keys [a, bc] */
        0x00, 0x00, 0x00, 0x0e, 0x83, 0x01, 0x02, 0x02, 0x0d, 0x07, 0x92, 0xc4,
        0x01, 'a', 0xc4, 0x02, 'b', 'c',
        /* HELLO id 0 password "pw" version 1 */
        0x00, 0x00, 0x00, 0x0b, 0x84, 0x01, 0x00, 0x02, 0x01, 0x08, 0xa2, 'p',
        'w', 0x0a, 0x01};
    struct rk_slice keys[] = {S("a"), S("bc")};
    struct wire_creq q = {.id = 2,
                          .op = WIRE_COP_MGET,
                          .has = WIRE_CREQ_KEYS,
                          .keys = keys,
                          .nkeys = 2};
    struct wire_creq h = {.id = 0,
                          .op = WIRE_COP_HELLO,
                          .has = WIRE_CREQ_PASSWORD | WIRE_CREQ_VERSION,
                          .password = S("pw"),
                          .version = 1};
    struct wire_cbuf b = {0};
    ck_assert_int_eq(wire_creq_encode(&b, &q), 0);
    ck_assert_int_eq(wire_creq_encode(&b, &h), 0);
    expect_bytes(&b, want, sizeof(want));
    wire_cbuf_release(&b);
}
END_TEST

/* HELLO with a user (WIRE_CF_USER, 12): after every older field, so a
 * HELLO without one is the bytes it always was. */
START_TEST(golden_hello_user)
{
    static const uint8_t want[] = {
        /* HELLO id 0 password "pw" version 1 user "admin" */
        0x00, 0x00, 0x00, 0x12, 0x85, 0x01, 0x00, 0x02, 0x01, 0x08, 0xa2,
        'p',  'w',  0x0a, 0x01, 0x0c, 0xa5, 'a',  'd',  'm',  'i',  'n'};
    struct wire_creq h = {.id = 0,
                          .op = WIRE_COP_HELLO,
                          .has = WIRE_CREQ_PASSWORD | WIRE_CREQ_VERSION |
                                 WIRE_CREQ_USER,
                          .password = S("pw"),
                          .user = S("admin"),
                          .version = 1};
    struct wire_cbuf b = {0};
    ck_assert_int_eq(wire_creq_encode(&b, &h), 0);
    expect_bytes(&b, want, sizeof(want));
    struct wire_creq d;
    ck_assert_int_eq(
        wire_creq_decode(&d, b.p + WIRE_CFRAME_HDR, b.len - WIRE_CFRAME_HDR),
        0);
    ck_assert(d.has & WIRE_CREQ_USER);
    ck_assert(slice_eq(d.user, "admin"));
    wire_creq_clear(&d);
    wire_cbuf_release(&b);
}
END_TEST

/* SCAN id 3 cursor 7 count 10 match "a*" (fields 13-15), and its answer: cursor
 * 0 (the end), keys ["k"]. A COUNT of 0 or past WIRE_CSCAN_MAX is refused; an
 * answer needs both its cursor and its keys. */
START_TEST(golden_scan)
{
    static const uint8_t want_req[] = {0x00, 0x00, 0x00, 0x0e, 0x85, 0x01,
                                       0x03, 0x02, 0x0e, 0x0d, 0x07, 0x0e,
                                       0x0a, 0x0f, 0xc4, 0x02, 'a',  '*'};
    static const uint8_t want_resp[] = {0x00, 0x00, 0x00, 0x0c, 0x84, 0x01,
                                        0x03, 0x02, 0x0e, 0x12, 0x00, 0x13,
                                        0x91, 0xc4, 0x01, 'k'};
    struct wire_creq q = {.id = 3,
                          .op = WIRE_COP_SCAN,
                          .has = WIRE_CREQ_CURSOR | WIRE_CREQ_COUNT |
                                 WIRE_CREQ_MATCH,
                          .cursor = 7,
                          .count = 10,
                          .match = S("a*")};
    struct wire_cbuf b = {0};
    ck_assert_int_eq(wire_creq_encode(&b, &q), 0);
    expect_bytes(&b, want_req, sizeof(want_req));
    struct wire_creq d;
    ck_assert_int_eq(wire_creq_decode(&d, b.p + 4, b.len - 4), 0);
    ck_assert(d.op == WIRE_COP_SCAN && d.cursor == 7 && d.count == 10 &&
              d.match.len == 2 && memcmp(d.match.p, "a*", 2) == 0);
    wire_creq_clear(&d);
    q.count = 0;
    ck_assert_int_eq(wire_creq_encode(&b, &q), RK_EBADREQ);
    q.count = WIRE_CSCAN_MAX + 1;
    ck_assert_int_eq(wire_creq_encode(&b, &q), RK_EBADREQ);
    b.p[12] = 0x00; /* the count of the encoded request, now 0 */
    ck_assert_int_eq(wire_creq_decode(&d, b.p + 4, b.len - 4), RK_EBADREQ);
    wire_creq_clear(&d);
    wire_cbuf_release(&b);

    struct rk_slice keys[] = {S("k")};
    struct wire_cresp r = {.id = 3,
                           .op = WIRE_COP_SCAN,
                           .has = WIRE_CRESP_CURSOR | WIRE_CRESP_KEYS,
                           .cursor = 0,
                           .keys = keys,
                           .nkeys = 1};
    ck_assert_int_eq(wire_cresp_encode(&b, &r), 0);
    expect_bytes(&b, want_resp, sizeof(want_resp));
    struct wire_cresp rd;
    ck_assert_int_eq(wire_cresp_decode(&rd, b.p + 4, b.len - 4), 0);
    ck_assert(rd.cursor == 0 && rd.nkeys == 1 && rd.keys[0].len == 1 &&
              rd.keys[0].p[0] == 'k');
    wire_cresp_clear(&rd);
    wire_cbuf_release(&b);
    r.has = WIRE_CRESP_KEYS; /* no cursor: the caller could not go on */
    ck_assert_int_eq(wire_cresp_encode(&b, &r), RK_EBADREQ);
    wire_cbuf_release(&b);
}
END_TEST

START_TEST(golden_responses)
{
    static const uint8_t want[] = {
        /* GET ok id 1 value "v" */
        0x00, 0x00, 0x00, 0x09, 0x83, 0x01, 0x01, 0x02, 0x0a, 0x10, 0xc4, 0x01,
        'v',
        /* GET id 7 NOT_FOUND "no" */
        0x00, 0x00, 0x00, 0x14, 0x84, 0x01, 0x07, 0x02, 0x0a, 0x03, 0xa9, 'N',
        'O', 'T', '_', 'F', 'O', 'U', 'N', 'D', 0x04, 0xa2, 'n', 'o',
        /* PUT id 3 TIMEOUT acks 1 need 2 */
        0x00, 0x00, 0x00, 0x12, 0x85, 0x01, 0x03, 0x02, 0x0b, 0x03, 0xa7, 'T',
        'I', 'M', 'E', 'O', 'U', 'T', 0x05, 0x01, 0x06, 0x02};
    struct wire_cresp ok = {
        .id = 1, .op = WIRE_COP_GET, .has = WIRE_CRESP_VALUE, .value = S("v")};
    struct wire_cresp nf = {.id = 7,
                            .op = WIRE_COP_GET,
                            .err = RK_ENOTFOUND,
                            .has = WIRE_CRESP_MSG,
                            .msg = S("no")};
    struct wire_cresp to = {.id = 3,
                            .op = WIRE_COP_PUT,
                            .err = RK_ETIMEOUT,
                            .has = WIRE_CRESP_ACKS | WIRE_CRESP_NEED,
                            .acks = 1,
                            .need = 2};
    struct wire_cbuf b = {0};
    ck_assert_int_eq(wire_cresp_encode(&b, &ok), 0);
    ck_assert_int_eq(wire_cresp_encode(&b, &nf), 0);
    ck_assert_int_eq(wire_cresp_encode(&b, &to), 0);
    expect_bytes(&b, want, sizeof(want));
    wire_cbuf_release(&b);
}
END_TEST

START_TEST(golden_status_response)
{
    static const uint8_t
        want[] = {0x00, 0x00, 0x00, 0x3d, 0x85, 0x01, 0x05, 0x02, 0x1e,
                  0x20, 0x07, /* epoch 7 */
                  0x21, 0xcf, 0x01, 0x02, 0x03, 0x04, 0x05, 0x06, 0x07,
                  0x08, 0x22, 0x91, 0x88, /* one node, 8 fields */
                  0x01, 0xa2, 'n',  '1',  0x02, 0xa6, '1',  '.',  '2',
                  ':',  '7',  '0',  0x03, 0xa3, 'd',  'c',  '1',  0x04,
                  0xa2, 'r',  '1',  0x05, 0xa2, 'U',  'N',  0x06, 0xcd,
                  0x04, 0x00, 0x07, 0x10, 0x08, 0xcb, 0x3f, 0xe0, 0x00,
                  0x00, 0x00, 0x00, 0x00, 0x00};
    struct wire_cnode n = {.name = S("n1"),
                           .addr = S("1.2:70"),
                           .dc = S("dc1"),
                           .rack = S("r1"),
                           .state = S("UN"),
                           .load = 1024,
                           .tokens = 16,
                           .owns = 0.5};
    struct wire_cresp st = {.id = 5,
                            .op = WIRE_COP_STATUS,
                            .has = WIRE_CRESP_EPOCH | WIRE_CRESP_FPRINT |
                                   WIRE_CRESP_NODES,
                            .epoch = 7,
                            .fprint = 0x0102030405060708ull,
                            .nodes = &n,
                            .nnodes = 1};
    struct wire_cbuf b = {0};
    ck_assert_int_eq(wire_cresp_encode(&b, &st), 0);
    expect_bytes(&b, want, sizeof(want));
    /* and it decodes back */
    struct wire_cresp d;
    ck_assert_int_eq(wire_cresp_decode(&d, b.p + 4, b.len - 4), 0);
    ck_assert_uint_eq(d.nnodes, 1);
    ck_assert(slice_eq(d.nodes[0].addr, "1.2:70"));
    ck_assert(d.nodes[0].owns == 0.5);
    ck_assert_uint_eq(d.fprint, 0x0102030405060708ull);
    wire_cresp_clear(&d);
    wire_cbuf_release(&b);
}
END_TEST

/* Every request field and every response field at once, with lengths and
 * numbers at the msgpack boundaries (fixstr/str8/str16, bin8/bin16/bin32,
 * fixarray/array16, fixmap/map16, every uint width, float64): the bytes
 * of today's encoder, pinned by length and XXH3-64 (a mismatch prints
 * both, and the first differing byte of a short one). */
static uint8_t *pattern(size_t n)
{
    uint8_t *p = malloc(n ? n : 1);
    ck_assert_ptr_nonnull(p);
    for (size_t i = 0; i < n; i++)
        p[i] = (uint8_t)('a' + i % 26);
    return p;
}

START_TEST(golden_every_request_field)
{
    static const size_t lens[] = {1, 31, 32, 255, 256, 65535, 65536};
    uint8_t *big = pattern(70000);
    struct rk_slice keys[17];
    for (size_t i = 0; i < 17; i++)
        keys[i] = RK_SLICE(big, i + 1);
    struct rk_slice args[2] = {RK_SLICE(big, 31), RK_SLICE(big, 32)};
    struct wire_cbuf b = {0};
    for (size_t i = 0; i < sizeof(lens) / sizeof(lens[0]); i++) {
        struct wire_creq q = {
            .id = i == 0 ? UINT64_MAX : (uint64_t)1 << (8 * i - 1),
            .op = WIRE_COP_HELLO,
            .has = 0x1ffu,
            .cl = WIRE_CCL_EACH_QUORUM,
            .ttl = WIRE_CTTL_MAX,
            .version = (uint32_t)lens[i],
            .key = RK_SLICE(big, lens[i] > RK_MAX_KEY ? RK_MAX_KEY : lens[i]),
            .value = RK_SLICE(big, lens[i] + 4000),
            .password = RK_SLICE(big, lens[i] % WIRE_CSTR_MAX),
            .client = RK_SLICE(big, 255),
            .keys = keys,
            .nkeys = i % 2 ? 17 : 15,
            .args = args,
            .nargs = 2,
        };
        ck_assert_int_eq(wire_creq_encode(&b, &q), 0);
    }
    golden_digest_check(b.p, b.len, GOLDEN_REQ_LEN, GOLDEN_REQ_HASH,
                        "requests");
    wire_cbuf_release(&b);
    free(big);
}
END_TEST

START_TEST(golden_every_response_field)
{
    uint8_t *big = pattern(70000);
    struct wire_cvalue values[17];
    for (size_t i = 0; i < 17; i++)
        values[i] = (struct wire_cvalue){i % 3 != 0, RK_SLICE(big, i * 20)};
    struct wire_cnode nodes[2] = {
        {.name = S("n1"),
         .addr = S("127.0.0.1:7380"),
         .dc = S("dc1"),
         .rack = S("r1"),
         .state = S("UN"),
         .load = UINT64_C(1) << 40,
         .tokens = 256,
         .owns = 0.25,
         .repl = S("dc1:3"),
         .silent_ms = 70000},
        {.name = RK_SLICE(big, 40),
         .addr = S("h:1"),
         .state = S("DN"),
         .owns = -1},
    };
    struct wire_ctoken tokens[2] = {{UINT64_MAX, S("n1")}, {5, S("n2")}};
    struct wire_cendpoint eps[1] = {{S("n1"), S("127.0.0.1:7001")}};
    struct wire_cresp r = {
        .id = 300,
        .op = WIRE_COP_STATUS,
        .has = 0xffffu,
        .err = RK_EUNAVAILABLE,
        .msg = S("not enough replicas"),
        .acks = 1,
        .need = 65536,
        .value = RK_SLICE(big, 65536),
        .values = values,
        .nvalues = 17,
        .epoch = 70000,
        .fprint = UINT64_C(0xfedcba9876543210),
        .nodes = nodes,
        .nnodes = 2,
        .tokens = tokens,
        .ntokens = 2,
        .endpoints = eps,
        .nendpoints = 1,
        .token = 65535,
        .text = RK_SLICE(big, 300),
        .node = S("n1"),
        .cluster = S("prod"),
        .version = WIRE_CPROTO_VERSION,
        .server = S("0.1.0"),
    };
    struct wire_cbuf b = {0};
    ck_assert_int_eq(wire_cresp_encode(&b, &r), 0);
    r.err = 0;
    r.has = WIRE_CRESP_VALUE;
    r.value = RK_SLICE(big, 255);
    r.op = WIRE_COP_GET;
    ck_assert_int_eq(wire_cresp_encode(&b, &r), 0);
    r.value = RK_SLICE(big, 256);
    ck_assert_int_eq(wire_cresp_encode(&b, &r), 0);
    golden_digest_check(b.p, b.len, GOLDEN_RESP_LEN, GOLDEN_RESP_HASH,
                        "responses");
    /* the first frame decodes back to what was sent */
    struct wire_cresp d;
    struct rk_slice body;
    size_t used;
    ck_assert_int_eq(wire_cframe_parse(&body, &used, b.p, b.len), 0);
    ck_assert_int_eq(wire_cresp_decode(&d, body.p, body.len), 0);
    ck_assert_int_eq(d.err, RK_EUNAVAILABLE);
    ck_assert_uint_eq(d.has, 0xffffu);
    ck_assert_uint_eq(d.nvalues, 17);
    ck_assert(!d.values[0].found && d.values[1].found);
    ck_assert_uint_eq(d.values[16].value.len, 320);
    ck_assert_uint_eq(d.nodes[0].silent_ms, 70000);
    ck_assert(slice_eq(d.nodes[0].repl, "dc1:3"));
    ck_assert(d.nodes[1].owns < 0);
    ck_assert_uint_eq(d.tokens[0].token, UINT64_MAX);
    ck_assert(slice_eq(d.endpoints[0].addr, "127.0.0.1:7001"));
    ck_assert_uint_eq(d.text.len, 300);
    wire_cresp_clear(&d);
    wire_cbuf_release(&b);
    free(big);
}
END_TEST

/* ---- round trips ---------------------------------------------------- */

static void req_roundtrip(const struct wire_creq *q, struct wire_creq *d)
{
    struct wire_cbuf b = {0};
    ck_assert_int_eq(wire_creq_encode(&b, q), 0);
    struct rk_slice body;
    size_t used;
    ck_assert_int_eq(wire_cframe_parse(&body, &used, b.p, b.len), 0);
    ck_assert_uint_eq(used, b.len);
    int rc = wire_creq_decode(d, body.p, body.len);
    if (rc != 0)
        fprintf(stderr, "decode: %s\n", d->why);
    ck_assert_int_eq(rc, 0);
    ck_assert_uint_eq(d->id, q->id);
    ck_assert_uint_eq(d->op, q->op);
    ck_assert_uint_eq(d->has, q->has);
    wire_cbuf_release(&b);
}

START_TEST(roundtrip_every_request_op)
{
    static const uint32_t ops[] = {
        WIRE_COP_HELLO,         WIRE_COP_PING,          WIRE_COP_GET,
        WIRE_COP_PUT,           WIRE_COP_DEL,           WIRE_COP_MGET,
        WIRE_COP_STATUS,        WIRE_COP_RING,          WIRE_COP_ENDPOINTS,
        WIRE_COP_METRICS,       WIRE_COP_JOIN,          WIRE_COP_DECOMMISSION,
        WIRE_COP_REMOVENODE,    WIRE_COP_REPAIR,        WIRE_COP_CLEANUP,
        WIRE_COP_NETSTATS,      WIRE_COP_ABORT,         WIRE_COP_SNAPSHOT,
        WIRE_COP_LISTSNAPSHOTS, WIRE_COP_CLEARSNAPSHOT, WIRE_COP_RELOADTLS};
    struct rk_slice keys[] = {S("k1"), S("k2"), S("\x00\xff")};
    struct rk_slice args[] = {S("node-3"), S("")};
    for (size_t i = 0; i < sizeof(ops) / sizeof(ops[0]); i++) {
        struct wire_creq q = {.id = UINT64_MAX - i,
                              .op = ops[i],
                              .cl = WIRE_CCL_EACH_QUORUM,
                              .has = WIRE_CREQ_CL | WIRE_CREQ_KEY |
                                     WIRE_CREQ_VALUE | WIRE_CREQ_TTL |
                                     WIRE_CREQ_KEYS | WIRE_CREQ_PASSWORD |
                                     WIRE_CREQ_ARGS | WIRE_CREQ_VERSION |
                                     WIRE_CREQ_CLIENT | WIRE_CREQ_USER,
                              .key = S("key"),
                              .value = S(""),
                              .ttl = WIRE_CTTL_MAX,
                              .keys = keys,
                              .nkeys = 3,
                              .password = S("secret"),
                              .args = args,
                              .nargs = 2,
                              .version = 1,
                              .client = S("check"),
                              .user = S("admin")};
        struct wire_creq d;
        req_roundtrip(&q, &d);
        ck_assert_uint_eq(d.cl, WIRE_CCL_EACH_QUORUM);
        ck_assert(slice_eq(d.key, "key"));
        ck_assert_uint_eq(d.value.len, 0);
        ck_assert_uint_eq(d.ttl, WIRE_CTTL_MAX);
        ck_assert_uint_eq(d.nkeys, 3);
        ck_assert_uint_eq(d.keys[2].len, 2);
        ck_assert_mem_eq(d.keys[2].p, "\x00\xff", 2);
        ck_assert(slice_eq(d.password, "secret"));
        ck_assert_uint_eq(d.nargs, 2);
        ck_assert(slice_eq(d.args[0], "node-3"));
        ck_assert(slice_eq(d.client, "check"));
        ck_assert(slice_eq(d.user, "admin"));
        wire_creq_clear(&d);
        wire_creq_clear(&d); /* idempotent */
    }
}
END_TEST

START_TEST(roundtrip_large_value)
{
    size_t n = RK_MAX_VALUE;
    uint8_t *v = malloc(n);
    ck_assert_ptr_nonnull(v);
    for (size_t i = 0; i < n; i++)
        v[i] = (uint8_t)(i * 31);
    struct wire_creq q = {.id = 9,
                          .op = WIRE_COP_PUT,
                          .has = WIRE_CREQ_KEY | WIRE_CREQ_VALUE,
                          .key = S("big"),
                          .value = RK_SLICE(v, n)};
    struct wire_creq d;
    req_roundtrip(&q, &d);
    ck_assert_uint_eq(d.value.len, n);
    ck_assert_mem_eq(d.value.p, v, n);
    wire_creq_clear(&d);
    q.value.len = n + 1;
    struct wire_cbuf b = {0};
    ck_assert_int_eq(wire_creq_encode(&b, &q), RK_ETOOLARGE);
    ck_assert_uint_eq(b.len, 0);
    wire_cbuf_release(&b);
    free(v);
}
END_TEST

START_TEST(roundtrip_every_response)
{
    struct wire_cvalue vals[] = {
        {true, S("one")}, {false, {NULL, 0}}, {true, S("")}};
    struct wire_cnode nodes[] = {{S("a"),
                                  S("127.0.0.11:7380"),
                                  S("dc1"),
                                  S("r1"),
                                  S("UN"),
                                  UINT64_MAX,
                                  256,
                                  1.0,
                                  S("dc1:3,dc2:2"),
                                  2400,
                                  600000,
                                  0,
                                  true,
                                  1,
                                  24,
                                  11520000,
                                  2,
                                  1,
                                  {NULL, 0}},
                                 {S("b"),
                                  S("127.0.0.12:7380"),
                                  S("dc1"),
                                  S("r2"),
                                  S("DN"),
                                  0,
                                  0,
                                  -1,
                                  {NULL, 0},
                                  0,
                                  0,
                                  1200,
                                  false,
                                  0,
                                  0,
                                  0,
                                  0,
                                  0,
                                  {NULL, 0}}};
    struct wire_ctoken toks[] = {{0, S("a")}, {UINT64_MAX, S("b")}};
    struct wire_cendpoint eps[] = {{S("a"), S("127.0.0.11:7380")},
                                   {S("b"), S("127.0.0.12:7380")}};
    nodes[1].queued = S("a");
    struct wire_cresp r = {.id = 42,
                           .op = WIRE_COP_STATUS,
                           .has = 0xffffu,
                           .msg = S("hello"),
                           .acks = 2,
                           .need = 3,
                           .value = S("val"),
                           .values = vals,
                           .nvalues = 3,
                           .epoch = 12,
                           .fprint = 0xdeadbeefcafef00dull,
                           .nodes = nodes,
                           .nnodes = 2,
                           .tokens = toks,
                           .ntokens = 2,
                           .endpoints = eps,
                           .nendpoints = 2,
                           .token = 77,
                           .text = S("# HELP x\nx 1\n"),
                           .node = S("a"),
                           .cluster = S("test"),
                           .version = 1,
                           .server = S("ringkv 0.1")};
    struct wire_cbuf b = {0};
    ck_assert_int_eq(wire_cresp_encode(&b, &r), 0);
    struct wire_cresp d;
    ck_assert_int_eq(wire_cresp_decode(&d, b.p + 4, b.len - 4), 0);
    ck_assert_uint_eq(d.id, 42);
    ck_assert_uint_eq(d.has, 0xffffu);
    ck_assert_int_eq(d.err, 0);
    ck_assert(slice_eq(d.msg, "hello"));
    ck_assert_uint_eq(d.acks, 2);
    ck_assert_uint_eq(d.need, 3);
    ck_assert(slice_eq(d.value, "val"));
    ck_assert_uint_eq(d.nvalues, 3);
    ck_assert(d.values[0].found && slice_eq(d.values[0].value, "one"));
    ck_assert(!d.values[1].found);
    ck_assert(d.values[2].found && d.values[2].value.len == 0);
    ck_assert_uint_eq(d.epoch, 12);
    ck_assert_uint_eq(d.fprint, 0xdeadbeefcafef00dull);
    ck_assert_uint_eq(d.nnodes, 2);
    ck_assert_uint_eq(d.nodes[0].load, UINT64_MAX);
    ck_assert_uint_eq(d.nodes[0].tokens, 256);
    ck_assert(d.nodes[0].owns == 1.0);
    ck_assert(d.nodes[1].owns < 0);
    ck_assert(slice_eq(d.nodes[0].repl, "dc1:3,dc2:2"));
    ck_assert_uint_eq(d.nodes[1].repl.len, 0); /* not sent: unknown */
    ck_assert_uint_eq(d.nodes[0].silent_ms, 2400);
    ck_assert_uint_eq(d.nodes[1].silent_ms, 0); /* not sent: answering */
    ck_assert_uint_eq(d.nodes[0].clock_ahead_ms, 600000);
    ck_assert_uint_eq(d.nodes[0].clock_behind_ms, 0); /* not sent */
    ck_assert(d.nodes[0].clock_far);
    ck_assert_uint_eq(d.nodes[1].clock_ahead_ms, 0);
    ck_assert_uint_eq(d.nodes[1].clock_behind_ms, 1200);
    ck_assert(!d.nodes[1].clock_far); /* not sent */
    ck_assert_uint_eq(d.nodes[0].disk_full, 1);
    ck_assert_uint_eq(d.nodes[1].disk_full, 0); /* not sent */
    ck_assert_uint_eq(d.nodes[0].repair_arcs, 24);
    ck_assert_uint_eq(d.nodes[0].repair_oldest_ms, 11520000);
    ck_assert_uint_eq(d.nodes[0].repair_overdue, 2);
    ck_assert_uint_eq(d.nodes[0].repair_never, 1);
    ck_assert_uint_eq(d.nodes[1].repair_arcs, 0); /* not sent */
    ck_assert_uint_eq(d.nodes[0].queued.len, 0);  /* not sent */
    ck_assert(slice_eq(d.nodes[1].queued, "a"));
    ck_assert(slice_eq(d.nodes[1].state, "DN"));
    ck_assert(slice_eq(d.nodes[1].rack, "r2"));
    ck_assert_uint_eq(d.ntokens, 2);
    ck_assert_uint_eq(d.tokens[1].token, UINT64_MAX);
    ck_assert(slice_eq(d.tokens[1].node, "b"));
    ck_assert_uint_eq(d.nendpoints, 2);
    ck_assert(slice_eq(d.endpoints[1].addr, "127.0.0.12:7380"));
    ck_assert_uint_eq(d.token, 77);
    ck_assert(slice_eq(d.text, "# HELP x\nx 1\n"));
    ck_assert(slice_eq(d.cluster, "test"));
    ck_assert(slice_eq(d.server, "ringkv 0.1"));
    ck_assert_uint_eq(d.version, 1);
    wire_cresp_clear(&d);
    wire_cbuf_release(&b);
}
END_TEST

START_TEST(error_names_roundtrip)
{
    for (int e = RK_ERR_BASE; e >= RK_ERR_LAST; e--) {
        struct wire_cresp r = {.id = 1, .op = WIRE_COP_GET, .err = e};
        struct wire_cbuf b = {0};
        ck_assert_int_eq(wire_cresp_encode(&b, &r), 0);
        struct wire_cresp d;
        ck_assert_int_eq(wire_cresp_decode(&d, b.p + 4, b.len - 4), 0);
        ck_assert_int_eq(d.err, e);
        ck_assert(slice_eq(d.errname, rk_errname(e)));
        wire_cresp_clear(&d);
        wire_cbuf_release(&b);
    }
    ck_assert_str_eq(wire_cerr_name(-ENOSYS), "NOT_IMPLEMENTED");
    ck_assert_int_eq(wire_cerr_code("NOT_IMPLEMENTED", 15), RK_ENOTSUP);
    ck_assert_str_eq(wire_cerr_name(-EIO), "INTERNAL");
    ck_assert_int_eq(wire_cerr_code("BOGUS", 5), 0);
}
END_TEST

START_TEST(unknown_error_name_kept)
{
    /* {1:1, 2:10, 3:"NEWERR"} */
    static const uint8_t body[] = {0x83, 0x01, 0x01, 0x02, 0x0a, 0x03, 0xa6,
                                   'N',  'E',  'W',  'E',  'R',  'R'};
    struct wire_cresp d;
    ck_assert_int_eq(wire_cresp_decode(&d, body, sizeof(body)), 0);
    ck_assert_int_eq(d.err, RK_EINTERNAL);
    ck_assert(slice_eq(d.errname, "NEWERR"));
    wire_cresp_clear(&d);
}
END_TEST

START_TEST(names_parse)
{
    uint32_t cl = 99;
    ck_assert_int_eq(wire_ccl_parse(&cl, "local_quorum"), 0);
    ck_assert_uint_eq(cl, WIRE_CCL_LOCAL_QUORUM);
    ck_assert_int_eq(wire_ccl_parse(&cl, "DEFAULT"), RK_EBADREQ);
    ck_assert_int_eq(wire_ccl_parse(&cl, "quorums"), RK_EBADREQ);
    for (uint32_t i = 0; i <= WIRE_CCL_LAST; i++)
        ck_assert_ptr_nonnull(wire_ccl_name(i));
    ck_assert_ptr_null(wire_ccl_name(WIRE_CCL_LAST + 1));
    ck_assert_uint_eq(wire_cop_parse("getendpoints"), 0);
    ck_assert_uint_eq(wire_cop_parse("endpoints"), WIRE_COP_ENDPOINTS);
    ck_assert_str_eq(wire_cop_name(WIRE_COP_DECOMMISSION), "DECOMMISSION");
    ck_assert_str_eq(wire_cop_name(WIRE_COP_ABORT), "ABORT");
    ck_assert_uint_eq(wire_cop_parse("abort"), WIRE_COP_ABORT);
    ck_assert_uint_eq(wire_cop_parse("snapshot"), 47);
    ck_assert_uint_eq(wire_cop_parse("listsnapshots"), 48);
    ck_assert_uint_eq(wire_cop_parse("clearsnapshot"), 49);
    ck_assert_ptr_null(wire_cop_name(3));
}
END_TEST

/* Our encoding is plain msgpack: msgpack-c's own unpacker reads it. */
START_TEST(msgpack_c_reads_our_frames)
{
    struct rk_slice keys[] = {S("x")};
    struct wire_creq q = {.id = 5,
                          .op = WIRE_COP_MGET,
                          .has = WIRE_CREQ_KEYS,
                          .keys = keys,
                          .nkeys = 1};
    struct wire_cbuf b = {0};
    ck_assert_int_eq(wire_creq_encode(&b, &q), 0);
    msgpack_unpacked u;
    msgpack_unpacked_init(&u);
    size_t off = 0;
    ck_assert_int_eq(
        msgpack_unpack_next(&u, (const char *)b.p + 4, b.len - 4, &off),
        MSGPACK_UNPACK_SUCCESS);
    ck_assert_uint_eq(off, b.len - 4);
    ck_assert_int_eq(u.data.type, MSGPACK_OBJECT_MAP);
    ck_assert_uint_eq(u.data.via.map.size, 3);
    ck_assert_uint_eq(u.data.via.map.ptr[0].val.via.u64, 5);
    ck_assert_int_eq(u.data.via.map.ptr[2].val.type, MSGPACK_OBJECT_ARRAY);
    msgpack_unpacked_destroy(&u);
    wire_cbuf_release(&b);
}
END_TEST

/* ---- frames ---------------------------------------------------------- */

START_TEST(frame_split)
{
    uint8_t buf[16] = {0, 0, 0, 3, 0x81, 0x01, 0x02, 0, 0};
    struct rk_slice body;
    size_t used;
    for (size_t n = 0; n < 7; n++) {
        ck_assert_int_eq(wire_cframe_parse(&body, &used, buf, n), 0);
        ck_assert_uint_eq(used, 0);
    }
    ck_assert_int_eq(wire_cframe_parse(&body, &used, buf, 9), 0);
    ck_assert_uint_eq(used, 7);
    ck_assert_uint_eq(body.len, 3);
    ck_assert_ptr_eq(body.p, buf + 4);
    uint8_t zero[4] = {0};
    ck_assert_int_eq(wire_cframe_parse(&body, &used, zero, 4), RK_EPROTO);
    uint8_t big[4] = {0x04, 0x00, 0x00, 0x01}; /* 64 MiB + 1 */
    ck_assert_int_eq(wire_cframe_parse(&body, &used, big, 4), RK_ETOOLARGE);
    uint8_t max[4] = {0x04, 0x00, 0x00, 0x00};
    ck_assert_int_eq(wire_cframe_parse(&body, &used, max, 4), 0);
    ck_assert_uint_eq(used, 0);
}
END_TEST

/* ---- malformed input ------------------------------------------------- */

static int dec_req(const uint8_t *b, size_t n, struct wire_creq *d)
{
    return wire_creq_decode(d, b, n);
}

START_TEST(malformed_requests)
{
    struct wire_creq d;
    /* not a map */
    static const uint8_t arr[] = {0x91, 0x01};
    ck_assert_int_eq(dec_req(arr, sizeof(arr), &d), RK_EBADREQ);
    ck_assert_ptr_nonnull(d.why);
    wire_creq_clear(&d);
    /* map claims 2^32-1 entries */
    static const uint8_t huge[] = {0xdf, 0xff, 0xff, 0xff, 0xff, 0x01};
    ck_assert_int_eq(dec_req(huge, sizeof(huge), &d), RK_EBADREQ);
    wire_creq_clear(&d);
    /* MGET keys array claims 2^32-1 elements */
    static const uint8_t keys[] = {0x83, 0x01, 0x01, 0x02, 0x0d, 0x07, 0xdd,
                                   0xff, 0xff, 0xff, 0xff, 0xc4, 0x00};
    ck_assert_int_eq(dec_req(keys, sizeof(keys), &d), RK_EBADREQ);
    ck_assert(d.has_id);
    ck_assert_uint_eq(d.id, 1);
    wire_creq_clear(&d);
    /* bin claims more bytes than present */
    static const uint8_t bin[] = {0x83, 0x01, 0x01, 0x02, 0x0a, 0x04,
                                  0xc6, 0x7f, 0xff, 0xff, 0xff, 'k'};
    ck_assert_int_eq(dec_req(bin, sizeof(bin), &d), RK_EBADREQ);
    wire_creq_clear(&d);
    /* duplicate id */
    static const uint8_t dup[] = {0x83, 0x01, 0x01, 0x01, 0x02, 0x02, 0x02};
    ck_assert_int_eq(dec_req(dup, sizeof(dup), &d), RK_EBADREQ);
    ck_assert_str_eq(d.why, "duplicate field");
    wire_creq_clear(&d);
    /* missing op */
    static const uint8_t noop[] = {0x81, 0x01, 0x05};
    ck_assert_int_eq(dec_req(noop, sizeof(noop), &d), RK_EBADREQ);
    ck_assert(d.has_id);
    ck_assert_uint_eq(d.id, 5);
    wire_creq_clear(&d);
    /* missing id */
    static const uint8_t noid[] = {0x81, 0x02, 0x02};
    ck_assert_int_eq(dec_req(noid, sizeof(noid), &d), RK_EBADREQ);
    ck_assert(!d.has_id);
    wire_creq_clear(&d);
    /* unknown op: id still known */
    static const uint8_t unk[] = {0x82, 0x01, 0x09, 0x02, 0x63};
    ck_assert_int_eq(dec_req(unk, sizeof(unk), &d), RK_EBADREQ);
    ck_assert(d.has_id);
    ck_assert_uint_eq(d.op, 0x63);
    ck_assert_str_eq(d.why, "unknown op");
    wire_creq_clear(&d);
    /* GET without key */
    static const uint8_t nokey[] = {0x82, 0x01, 0x09, 0x02, 0x0a};
    ck_assert_int_eq(dec_req(nokey, sizeof(nokey), &d), RK_EBADREQ);
    ck_assert_str_eq(d.why, "missing key");
    wire_creq_clear(&d);
    /* empty key */
    static const uint8_t ekey[] = {0x83, 0x01, 0x09, 0x02, 0x0a, 0x04, 0xa0};
    ck_assert_int_eq(dec_req(ekey, sizeof(ekey), &d), RK_EBADREQ);
    wire_creq_clear(&d);
    /* negative id */
    static const uint8_t neg[] = {0x82, 0x01, 0xff, 0x02, 0x02};
    ck_assert_int_eq(dec_req(neg, sizeof(neg), &d), RK_EBADREQ);
    wire_creq_clear(&d);
    /* trailing bytes */
    static const uint8_t trail[] = {0x82, 0x01, 0x01, 0x02, 0x02, 0x00};
    ck_assert_int_eq(dec_req(trail, sizeof(trail), &d), RK_EBADREQ);
    wire_creq_clear(&d);
    /* bad consistency level */
    static const uint8_t cl[] = {0x83, 0x01, 0x01, 0x02, 0x02, 0x03, 0x08};
    ck_assert_int_eq(dec_req(cl, sizeof(cl), &d), RK_EBADREQ);
    wire_creq_clear(&d);
    /* ttl 0 is invalid (absent means none) */
    static const uint8_t ttl[] = {0x83, 0x01, 0x01, 0x02, 0x02, 0x06, 0x00};
    ck_assert_int_eq(dec_req(ttl, sizeof(ttl), &d), RK_EBADREQ);
    wire_creq_clear(&d);
    /* the never-used type byte 0xc1 in an unknown field */
    static const uint8_t c1[] = {0x83, 0x01, 0x01, 0x02, 0x02, 0x50, 0xc1};
    ck_assert_int_eq(dec_req(c1, sizeof(c1), &d), RK_EBADREQ);
    wire_creq_clear(&d);
    /* empty body */
    ck_assert_int_eq(dec_req(c1, 0, &d), RK_EBADREQ);
    wire_creq_clear(&d);
}
END_TEST

START_TEST(unknown_fields_skipped)
{
    /* {1:3, 2:PING, "x":[1,{2:3}], 99:ext8, 4:"key" (str accepted)} */
    static const uint8_t b[] = {0x85, 0x01, 0x03, 0x02, 0x02, 0xa1, 'x',  0x92,
                                0x01, 0x81, 0x02, 0x03, 0x63, 0xc7, 0x02, 0x05,
                                0xaa, 0xbb, 0x04, 0xa3, 'k',  'e',  'y'};
    struct wire_creq d;
    ck_assert_int_eq(wire_creq_decode(&d, b, sizeof(b)), 0);
    ck_assert_uint_eq(d.op, WIRE_COP_PING);
    ck_assert(slice_eq(d.key, "key"));
    wire_creq_clear(&d);
}
END_TEST

START_TEST(nesting_bounded)
{
    uint8_t b[64];
    size_t n = 0;
    b[n++] = 0x83;
    b[n++] = 0x01;
    b[n++] = 0x01;
    b[n++] = 0x02;
    b[n++] = 0x02;
    b[n++] = 0x50;
    for (int i = 0; i < 40; i++)
        b[n++] = 0x91;
    b[n++] = 0x00;
    struct wire_creq d;
    ck_assert_int_eq(wire_creq_decode(&d, b, n), RK_EBADREQ);
    ck_assert_str_eq(d.why, "nesting too deep");
    wire_creq_clear(&d);
}
END_TEST

START_TEST(oversized_fields)
{
    size_t klen = RK_MAX_KEY + 1;
    uint8_t *b = malloc(klen + 16);
    size_t n = 0;
    b[n++] = 0x83;
    b[n++] = 0x01;
    b[n++] = 0x01;
    b[n++] = 0x02;
    b[n++] = 0x0a;
    b[n++] = 0x04;
    b[n++] = 0xc6;
    b[n++] = (uint8_t)(klen >> 24);
    b[n++] = (uint8_t)(klen >> 16);
    b[n++] = (uint8_t)(klen >> 8);
    b[n++] = (uint8_t)klen;
    memset(b + n, 'k', klen);
    n += klen;
    struct wire_creq d;
    ck_assert_int_eq(wire_creq_decode(&d, b, n), RK_ETOOLARGE);
    ck_assert(d.has_id);
    wire_creq_clear(&d);
    /* The same length with the bytes missing: unlike the internode decoders
     * (check_wire_rpc), the client's checks the bytes before the limit. */
    ck_assert_int_eq(wire_creq_decode(&d, b, 11), RK_EBADREQ);
    ck_assert_str_eq(d.why, "truncated string");
    ck_assert(d.has_id);
    wire_creq_clear(&d);
    free(b);
    struct wire_creq q = {.id = 1,
                          .op = WIRE_COP_GET,
                          .has = WIRE_CREQ_KEY,
                          .key = RK_SLICE("x", RK_MAX_KEY + 1)};
    struct wire_cbuf out = {0};
    ck_assert_int_eq(wire_creq_encode(&out, &q), RK_ETOOLARGE);
    q.has = 0;
    ck_assert_int_eq(wire_creq_encode(&out, &q), RK_EBADREQ);
    ck_assert_uint_eq(out.len, 0);
    wire_cbuf_release(&out);
}
END_TEST

START_TEST(malformed_responses)
{
    struct wire_cresp d;
    /* success GET without value */
    static const uint8_t nov[] = {0x82, 0x01, 0x01, 0x02, 0x0a};
    ck_assert_int_eq(wire_cresp_decode(&d, nov, sizeof(nov)), RK_EPROTO);
    wire_cresp_clear(&d);
    /* ring entry not a pair */
    static const uint8_t ring[] = {0x85, 0x01, 0x01, 0x02, 0x1f, 0x20, 0x01,
                                   0x21, 0x01, 0x23, 0x91, 0x91, 0x01};
    ck_assert_int_eq(wire_cresp_decode(&d, ring, sizeof(ring)), RK_EPROTO);
    wire_cresp_clear(&d);
    /* owns out of range */
    static const uint8_t owns[] = {0x85, 0x01, 0x01, 0x02, 0x1e, 0x20,
                                   0x01, 0x21, 0x01, 0x22, 0x91, 0x82,
                                   0x01, 0xa1, 'n',  0x08, 0x02};
    ck_assert_int_eq(wire_cresp_decode(&d, owns, sizeof(owns)), RK_EPROTO);
    ck_assert_str_eq(d.why, "ownership out of [0, 1]");
    wire_cresp_clear(&d);
    /* node rows claim more than the bytes left */
    static const uint8_t rows[] = {0x85, 0x01, 0x01, 0x02, 0x1e, 0x20, 0x01,
                                   0x21, 0x01, 0x22, 0xdc, 0xff, 0xff};
    ck_assert_int_eq(wire_cresp_decode(&d, rows, sizeof(rows)), RK_EPROTO);
    wire_cresp_clear(&d);
}
END_TEST

/* Every truncation and every single-byte corruption of valid frames decodes
 * or fails cleanly (ASan/UBSan make a bad read fatal). */
START_TEST(mutations_do_not_crash)
{
    struct rk_slice keys[] = {S("k1"), S("k2")};
    struct wire_creq q = {.id = 77,
                          .op = WIRE_COP_MGET,
                          .has = WIRE_CREQ_KEYS | WIRE_CREQ_CL,
                          .cl = 3,
                          .keys = keys,
                          .nkeys = 2};
    struct wire_cnode nodes[] = {{S("a"), S("h:1"), S("d"), S("r"), S("UN"), 5,
                                  2, 0.25, S("d:3"), 1500, 0, 700, true, 1, 3,
                                  5000, 1, 0, S("x")}};
    struct wire_ctoken toks[] = {{9, S("a")}};
    struct wire_cresp r = {.id = 77,
                           .op = WIRE_COP_STATUS,
                           .has = WIRE_CRESP_EPOCH | WIRE_CRESP_FPRINT |
                                  WIRE_CRESP_NODES | WIRE_CRESP_TOKENS,
                           .epoch = 1,
                           .fprint = 2,
                           .nodes = nodes,
                           .nnodes = 1,
                           .tokens = toks,
                           .ntokens = 1};
    struct wire_cbuf a = {0}, b = {0};
    ck_assert_int_eq(wire_creq_encode(&a, &q), 0);
    ck_assert_int_eq(wire_cresp_encode(&b, &r), 0);
    unsigned ok = 0;
    for (int which = 0; which < 2; which++) {
        struct wire_cbuf *f = which ? &b : &a;
        size_t n = f->len - 4;
        uint8_t *m = malloc(n);
        for (size_t cut = 0; cut < n; cut++) {
            struct wire_creq dq;
            struct wire_cresp dr;
            ck_assert_int_ne(wire_creq_decode(&dq, f->p + 4, cut), 0);
            ck_assert_int_ne(wire_cresp_decode(&dr, f->p + 4, cut), 0);
            wire_creq_clear(&dq);
            wire_cresp_clear(&dr);
        }
        for (size_t i = 0; i < n; i++) {
            for (int v = 0; v < 256; v++) {
                memcpy(m, f->p + 4, n);
                m[i] = (uint8_t)v;
                struct wire_creq dq;
                struct wire_cresp dr;
                ok += wire_creq_decode(&dq, m, n) == 0;
                ok += wire_cresp_decode(&dr, m, n) == 0;
                wire_creq_clear(&dq);
                wire_cresp_clear(&dr);
            }
        }
        free(m);
    }
    ck_assert_uint_gt(ok, 0);
    wire_cbuf_release(&a);
    wire_cbuf_release(&b);
}
END_TEST

static Suite *wire_client_suite(void)
{
    Suite *s = suite_create("wire_client");
    TCase *tc = tcase_create("golden");
    tcase_add_test(tc, golden_get_request);
    tcase_add_test(tc, golden_put_request);
    tcase_add_test(tc, golden_abort_request);
    tcase_add_test(tc, golden_mget_hello_requests);
    tcase_add_test(tc, golden_hello_user);
    tcase_add_test(tc, golden_scan);
    tcase_add_test(tc, golden_responses);
    tcase_add_test(tc, golden_status_response);
    tcase_add_test(tc, golden_every_request_field);
    tcase_add_test(tc, golden_every_response_field);
    suite_add_tcase(s, tc);
    tc = tcase_create("roundtrip");
    tcase_set_timeout(tc, 60);
    tcase_add_test(tc, roundtrip_every_request_op);
    tcase_add_test(tc, roundtrip_large_value);
    tcase_add_test(tc, roundtrip_every_response);
    tcase_add_test(tc, error_names_roundtrip);
    tcase_add_test(tc, unknown_error_name_kept);
    tcase_add_test(tc, names_parse);
    tcase_add_test(tc, msgpack_c_reads_our_frames);
    suite_add_tcase(s, tc);
    tc = tcase_create("frames");
    tcase_add_test(tc, frame_split);
    suite_add_tcase(s, tc);
    tc = tcase_create("malformed");
    tcase_set_timeout(tc, 120);
    tcase_add_test(tc, malformed_requests);
    tcase_add_test(tc, unknown_fields_skipped);
    tcase_add_test(tc, nesting_bounded);
    tcase_add_test(tc, oversized_fields);
    tcase_add_test(tc, malformed_responses);
    tcase_add_test(tc, mutations_do_not_crash);
    suite_add_tcase(s, tc);
    return s;
}

int main(void)
{
    SRunner *sr = srunner_create(wire_client_suite());
    srunner_run_all(sr, CK_NORMAL);
    int failed = srunner_ntests_failed(sr);
    srunner_free(sr);
    return failed == 0 ? EXIT_SUCCESS : EXIT_FAILURE;
}
