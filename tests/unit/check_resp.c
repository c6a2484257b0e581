/*
 * check_resp.c - the RESP2 parser, reply encoders and command table.
 *
 * The parser is checked by feeding the same byte streams whole, one byte at
 * a time, split at every position and through reserve/commit, and requiring
 * the same requests out; malformed streams must fail with the named protocol
 * error. Encoder outputs are compared byte for byte.
 */
#include <errno.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <check.h>

#include "common/rk.h"
#include "wire/resp.h"

/* ------------------------------------------------------------------------
 * Helpers
 * ------------------------------------------------------------------------ */

/* A transcript of parsed requests: each argument as <len>:<bytes> and each
 * request ended by ';'. Binary-safe and unambiguous. */
struct transcript {
    char *p;
    size_t len, cap;
};

static void tr_add(struct transcript *t, const void *data, size_t n)
{
    if (t->len + n + 1 > t->cap) {
        t->cap = (t->len + n + 1) * 2;
        t->p = realloc(t->p, t->cap);
        ck_assert_ptr_nonnull(t->p);
    }
    memcpy(t->p + t->len, data, n);
    t->len += n;
    t->p[t->len] = '\0';
}

static void tr_cmd(struct transcript *t, const struct resp_cmd *c)
{
    char num[32];
    for (size_t i = 0; i < c->argc; i++) {
        int n = snprintf(num, sizeof(num), "%zu:", c->argv[i].len);
        tr_add(t, num, (size_t)n);
        tr_add(t, c->argv[i].p, c->argv[i].len);
        tr_add(t, " ", 1);
    }
    tr_add(t, ";", 1);
}

/* Drain every complete request; returns the last resp_parser_next code. */
static int drain(resp_parser *p, struct transcript *t)
{
    struct resp_cmd c;
    int rc;
    while ((rc = resp_parser_next(&c, p)) == 1)
        tr_cmd(t, &c);
    return rc;
}

/* Feed `in` in chunks: chunk == 0 means one feed, otherwise chunks of that
 * size; split > 0 means two feeds cut at `split`. Returns the final code and
 * the transcript; *err gets the parser's error text (copied). */
static int run(const void *in,
               size_t n,
               size_t chunk,
               size_t split,
               bool zero_copy,
               const struct resp_limits *lim,
               struct transcript *t,
               char *err,
               size_t errcap)
{
    resp_parser *p;
    ck_assert_int_eq(resp_parser_new(&p, lim), 0);
    const uint8_t *b = in;
    size_t off = 0;
    int rc = 0;
    while (off < n && rc >= 0) {
        size_t step = n - off;
        if (chunk > 0 && step > chunk)
            step = chunk;
        if (split > 0 && off < split && off + step > split)
            step = split - off;
        if (zero_copy) {
            uint8_t *dst;
            size_t room;
            ck_assert_int_eq(resp_parser_reserve(&dst, &room, p, step), 0);
            ck_assert_uint_ge(room, step);
            memcpy(dst, b + off, step);
            resp_parser_commit(p, step);
        } else {
            rc = resp_parser_feed(p, b + off, step);
            if (rc < 0)
                break;
        }
        off += step;
        rc = drain(p, t);
    }
    if (err != NULL)
        snprintf(err, errcap, "%s", resp_parser_error(p));
    resp_parser_free(p);
    return rc;
}

/* Parse `in` every way and require the same outcome each time. */
static void expect(const char *in,
                   size_t n,
                   const char *want,
                   int want_rc,
                   const char *want_err)
{
    for (int mode = 0; mode < 4; mode++) {
        size_t ways = mode == 2 ? n : 1;
        for (size_t s = 0; s < ways; s++) {
            struct transcript t = {0};
            char err[128];
            tr_add(&t, "", 0);
            int rc = run(in, n, mode == 1 ? 1 : 0, mode == 2 ? s : 0, mode == 3,
                         NULL, &t, err, sizeof(err));
            ck_assert_msg(rc == want_rc, "mode %d split %zu: rc %d want %d",
                          mode, s, rc, want_rc);
            ck_assert_msg(strcmp(t.p, want) == 0,
                          "mode %d split %zu: got [%s] want [%s]", mode, s, t.p,
                          want);
            if (want_err != NULL)
                ck_assert_str_eq(err, want_err);
            free(t.p);
        }
    }
}

#define EXPECT_OK(in, want) expect(in, sizeof(in) - 1, want, 0, NULL)
#define EXPECT_ERR(in, want, msg) \
    expect(in, sizeof(in) - 1, want, RK_EPROTO, msg)

/* ------------------------------------------------------------------------
 * Parser
 * ------------------------------------------------------------------------ */

START_TEST(parse_multibulk)
{
    EXPECT_OK("*2\r\n$3\r\nGET\r\n$1\r\nk\r\n", "3:GET 1:k ;");
    EXPECT_OK("*3\r\n$3\r\nSET\r\n$0\r\n\r\n$4\r\n\r\n\0x\r\n",
              "3:SET 0: 4:\r\n\0x ;");
    EXPECT_OK("*1\r\n$4\r\nPING\r\n", "4:PING ;");
    /* a partial request stays pending */
    EXPECT_OK("*2\r\n$3\r\nGET\r\n$5\r\nab", "");
}
END_TEST

START_TEST(parse_pipelined)
{
    static const char in[] = "*1\r\n$4\r\nPING\r\n"
                             "PING\r\n"
                             "*2\r\n$4\r\nECHO\r\n$2\r\nhi\r\n"
                             "set a 'b c'\n"
                             "*3\r\n$3\r\nSET\r\n$1\r\nk\r\n$1\r\nv\r\n"
                             "*2\r\n$3\r\nGET\r\n$1\r\n";
    EXPECT_OK(in, "4:PING ;4:PING ;4:ECHO 2:hi ;3:set 1:a 3:b c ;"
                  "3:SET 1:k 1:v ;");
}
END_TEST

/* The bytes of every request taken out since the last feed stay valid, so a
 * pipelined batch can be executed without copying. */
START_TEST(parse_pipelined_bytes_stay)
{
    resp_parser *p;
    ck_assert_int_eq(resp_parser_new(&p, NULL), 0);
    char in[64 * 40];
    size_t n = 0;
    for (int i = 0; i < 64; i++)
        n += (size_t)sprintf(in + n, "*2\r\n$3\r\nGET\r\n$5\r\nk%04d\r\n", i);
    ck_assert_int_eq(resp_parser_feed(p, in, n), 0);
    struct rk_slice keys[64];
    struct resp_cmd c;
    for (int i = 0; i < 64; i++) {
        ck_assert_int_eq(resp_parser_next(&c, p), 1);
        ck_assert_uint_eq(c.argc, 2);
        keys[i] = c.argv[1];
    }
    ck_assert_int_eq(resp_parser_next(&c, p), 0);
    ck_assert_uint_eq(resp_parser_pending(p), 0);
    for (int i = 0; i < 64; i++) {
        char want[16];
        sprintf(want, "k%04d", i);
        ck_assert_uint_eq(keys[i].len, 5);
        ck_assert(memcmp(keys[i].p, want, 5) == 0);
    }
    resp_parser_free(p);
}
END_TEST

START_TEST(parse_inline)
{
    EXPECT_OK("PING\r\n", "4:PING ;");
    EXPECT_OK("PING\n", "4:PING ;");
    EXPECT_OK("  get   key  \r\n", "3:get 3:key ;");
    EXPECT_OK("set k \"a b\\x41\\n\\\"\"\n", "3:set 1:k 6:a bA\n\" ;");
    EXPECT_OK("set k 'it\\'s'\n", "3:set 1:k 4:it's ;");
    EXPECT_OK("set k \"\"\n", "3:set 1:k 0: ;");
    EXPECT_OK("echo a\"b c\"\n", "4:echo 4:ab c ;");
    /* a line without its end is pending */
    EXPECT_OK("PING", "");
    EXPECT_ERR("set k \"abc\n", "", "unbalanced quotes in request");
    EXPECT_ERR("set k \"ab\"c\n", "", "unbalanced quotes in request");
    EXPECT_ERR("set k 'ab\n", "", "unbalanced quotes in request");
    /* binary garbage and HTTP close the connection */
    EXPECT_ERR("PING\r\n\x16\x03\x01\x02\x00\x01", "4:PING ;",
               "binary data in inline request");
    EXPECT_ERR("get \x00k\n", "", "binary data in inline request");
    EXPECT_ERR("POST / HTTP/1.1\r\n", "", "cross protocol scripting attempt");
    EXPECT_ERR("GET / HTTP/1.1\r\nHost: x\r\n", "3:GET 1:/ 8:HTTP/1.1 ;",
               "cross protocol scripting attempt");
    /* UTF-8 and tabs are text */
    EXPECT_OK("echo\t\xc3\xa9t\xc3\xa9\n", "4:echo 5:\xc3\xa9t\xc3\xa9 ;");
}
END_TEST

START_TEST(parse_empty)
{
    /* empty lines, "*0" and "*-1" are skipped, as Redis does */
    EXPECT_OK("\r\n\n   \r\nPING\r\n", "4:PING ;");
    EXPECT_OK("*0\r\n*-1\r\n*1\r\n$4\r\nPING\r\n", "4:PING ;");
    EXPECT_OK("", "");
}
END_TEST

START_TEST(parse_bad_lengths)
{
    EXPECT_ERR("*-2\r\n", "", "invalid multibulk length");
    EXPECT_ERR("*abc\r\n", "", "invalid multibulk length");
    EXPECT_ERR("*+1\r\n$4\r\nPING\r\n", "", "invalid multibulk length");
    EXPECT_ERR("* 1\r\n", "", "invalid multibulk length");
    EXPECT_ERR("*\r\n", "", "invalid multibulk length");
    EXPECT_ERR("*1\rx", "", "invalid multibulk length");
    EXPECT_ERR("*99999999999999999999\r\n", "", "invalid multibulk length");
    EXPECT_ERR("*1\r\n$-1\r\n", "", "invalid bulk length");
    EXPECT_ERR("*1\r\n$x\r\n", "", "invalid bulk length");
    EXPECT_ERR("*1\r\n$\r\n", "", "invalid bulk length");
    EXPECT_ERR("*1\r\n$1\rab", "", "invalid bulk length");
    EXPECT_ERR("*1\r\n$9223372036854775808\r\n", "", "invalid bulk length");
    EXPECT_ERR("*1\r\n$1\r\nab\r\n", "", "expected CRLF after bulk string");
    EXPECT_ERR("*1\r\n$4\r\nPING\n\n", "", "expected CRLF after bulk string");
    EXPECT_ERR("*1\r\n$4\r\nPING\rX", "", "expected CRLF after bulk string");
    EXPECT_ERR("*1\r\nPING\r\n", "", "expected '$', got 'P'");
    EXPECT_ERR("*1\r\n\x01", "", "expected '$', got byte 0x01");
    /* a length line that never ends is refused once it is too long */
    EXPECT_ERR("*111111111111111111111111111111111111", "",
               "too big mbulk count string");
    EXPECT_ERR("*1\r\n$111111111111111111111111111111111111", "",
               "too big bulk count string");
    /* a good request before the bad one is still delivered */
    EXPECT_ERR("PING\r\n*1\r\n$-5\r\n", "4:PING ;", "invalid bulk length");
}
END_TEST

/* Lengths and integer arguments are read as Redis reads them: a leading
 * zero ("$04", "*01", "EX 010") or "-0" was taken until 2026-12-03. */
START_TEST(regression_leading_zero_lengths)
{
    EXPECT_ERR("*1\r\n$04\r\nPING\r\n", "", "invalid bulk length");
    EXPECT_ERR("*01\r\n$4\r\nPING\r\n", "", "invalid multibulk length");
    EXPECT_ERR("*1\r\n$-0\r\n", "", "invalid bulk length");
    EXPECT_ERR("*-0\r\n", "", "invalid multibulk length");
    EXPECT_ERR("*1\r\n$00\r\n\r\n", "", "invalid bulk length");
    /* "0" itself is a length */
    EXPECT_ERR("*2\r\n$4\r\nECHO\r\n$0\r\n\r\n*1\r\n$04\r\n", "4:ECHO 0: ;",
               "invalid bulk length");
}
END_TEST

START_TEST(parse_nested_refused)
{
    EXPECT_ERR("*1\r\n*1\r\n$1\r\na\r\n", "", "expected '$', got '*'");
    EXPECT_ERR("*2\r\n$3\r\nGET\r\n:1\r\n", "", "expected '$', got ':'");
}
END_TEST

START_TEST(parse_huge_bulk_refused)
{
    /* refused from the header alone: nothing is buffered for it (past
     * max_skip; a shorter bulk over max_bulk is dropped, below) */
    EXPECT_ERR("*3\r\n$3\r\nSET\r\n$1\r\nk\r\n$536870913\r\n", "",
               "invalid bulk length");
    EXPECT_ERR("*1\r\n$999999999999\r\n", "", "invalid bulk length");
    EXPECT_ERR("*65537\r\n", "", "invalid multibulk length");
    EXPECT_OK("*65536\r\n", "");
}
END_TEST

START_TEST(parse_limits)
{
    struct resp_limits lim = {
        .max_bulk = 4, .max_args = 3, .max_inline = 16, .max_request = 6};
    struct transcript t = {0};
    char err[128];
    tr_add(&t, "", 0);
    static const char ok[] = "*2\r\n$4\r\nabcd\r\n$2\r\nef\r\nA B C\n";
    ck_assert_int_eq(
        run(ok, sizeof(ok) - 1, 0, 0, false, &lim, &t, err, sizeof(err)), 0);
    ck_assert_str_eq(t.p, "4:abcd 2:ef ;1:A 1:B 1:C ;");

    static const struct {
        const char *in, *err;
    } bad[] = {
        {"*1\r\n$5\r\n", "invalid bulk length"},
        {"*4\r\n", "invalid multibulk length"},
        {"*2\r\n$4\r\nabcd\r\n$3\r\n", "request too large"},
        {"A B C D\n", "too many arguments in inline request"},
        {"12345678901234567", "too big inline request"},
        {"1234567890123456789\n", "too big inline request"},
    };
    for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
        t.len = 0;
        int rc = run(bad[i].in, strlen(bad[i].in), 1, 0, false, &lim, &t, err,
                     sizeof(err));
        ck_assert_msg(rc == RK_EPROTO, "case %zu rc %d", i, rc);
        ck_assert_str_eq(err, bad[i].err);
    }
    free(t.p);
}
END_TEST

/* regression resp_value_too_large_closes: a bulk over max_bulk (16 MiB +
 * 1) was a protocol error that closed the connection, where docs/resp.md
 * promises -TOO_LARGE. Now its bytes are dropped as they arrive, never
 * buffered, the request comes out with too_large set, is answered
 * -TOO_LARGE, and the next request on the connection is read as usual. */
START_TEST(parse_oversized_bulk_dropped)
{
    resp_parser *p;
    ck_assert_int_eq(resp_parser_new(&p, NULL), 0);
    static const char head[] = "*3\r\n$3\r\nSET\r\n$1\r\nk\r\n$16777217\r\n";
    ck_assert_int_eq(resp_parser_feed(p, head, sizeof(head) - 1), 0);
    struct resp_cmd c;
    ck_assert_int_eq(resp_parser_next(&c, p), 0);
    static uint8_t chunk[65536];
    memset(chunk, 'v', sizeof(chunk));
    size_t left = 16777217, peak = 0;
    while (left > 0) {
        size_t n = left < sizeof(chunk) ? left : sizeof(chunk);
        ck_assert_int_eq(resp_parser_feed(p, chunk, n), 0);
        ck_assert_int_eq(resp_parser_next(&c, p), 0);
        size_t m = resp_parser_memory(p);
        peak = m > peak ? m : peak;
        left -= n;
    }
    ck_assert_uint_lt(peak, 1024 * 1024); /* nothing of it kept */
    static const char tail[] = "\r\n*1\r\n$4\r\nPING\r\n";
    ck_assert_int_eq(resp_parser_feed(p, tail, sizeof(tail) - 1), 0);
    ck_assert_int_eq(resp_parser_next(&c, p), 1);
    ck_assert_uint_eq(c.argc, 3);
    ck_assert_uint_eq(c.too_large, 16777217);
    ck_assert_uint_eq(c.argv[2].len, 0);
    struct resp_request q;
    struct resp_out o = RESP_OUT_INIT;
    ck_assert_int_eq(resp_request_parse(&q, &c, &o), RESP_REQ_ANSWERED);
    static const char want[] =
        "-TOO_LARGE argument of 16777217 bytes, limit 16777216\r\n";
    ck_assert_uint_eq(o.len, sizeof(want) - 1);
    ck_assert(memcmp(o.p, want, o.len) == 0);
    resp_out_free(&o);
    /* the connection goes on */
    ck_assert_int_eq(resp_parser_next(&c, p), 1);
    ck_assert_uint_eq(c.argc, 1);
    ck_assert_uint_eq(c.too_large, 0);
    ck_assert_int_eq(resp_parser_next(&c, p), 0);
    resp_parser_free(p);
}
END_TEST

/* Announcing a large bulk does not allocate it: the buffer grows with what
 * arrives (at most about twice the bytes received). */
START_TEST(parse_announced_bulk_not_allocated)
{
    resp_parser *p;
    ck_assert_int_eq(resp_parser_new(&p, NULL), 0);
    static const char head[] = "*3\r\n$3\r\nSET\r\n$1\r\nk\r\n$16777216\r\n";
    ck_assert_int_eq(resp_parser_feed(p, head, sizeof(head) - 1), 0);
    struct resp_cmd c;
    ck_assert_int_eq(resp_parser_next(&c, p), 0);
    uint8_t *dst;
    size_t room;
    ck_assert_int_eq(resp_parser_reserve(&dst, &room, p, 65536), 0);
    ck_assert_uint_lt(resp_parser_memory(p), 256 * 1024);
    resp_parser_commit(p, 0);
    resp_parser_free(p);
}
END_TEST

/* A very wide request grows the argument arrays; they are given back. */
START_TEST(parse_wide_request_memory)
{
    resp_parser *p;
    ck_assert_int_eq(resp_parser_new(&p, NULL), 0);
    size_t before = resp_parser_memory(p);
    struct resp_out in = RESP_OUT_INIT;
    ck_assert_int_eq(resp_out_array(&in, 20001), 0);
    ck_assert_int_eq(resp_out_bulk(&in, "DEL", 3), 0);
    for (int i = 0; i < 20000; i++)
        ck_assert_int_eq(resp_out_bulk(&in, "k", 1), 0);
    ck_assert_int_eq(resp_parser_feed(p, in.p, in.len), 0);
    struct resp_cmd c;
    ck_assert_int_eq(resp_parser_next(&c, p), 1);
    ck_assert_uint_eq(c.argc, 20001);
    ck_assert_uint_gt(resp_parser_memory(p), before + 20000 * 32);
    ck_assert_int_eq(resp_parser_feed(p, "PING\r\n", 6), 0);
    ck_assert_uint_lt(resp_parser_memory(p), before + 300 * 1024);
    ck_assert_int_eq(resp_parser_next(&c, p), 1);
    ck_assert_uint_eq(c.argc, 1);
    resp_out_free(&in);
    resp_parser_free(p);
}
END_TEST

START_TEST(parse_error_sticky)
{
    resp_parser *p;
    struct resp_cmd c;
    ck_assert_int_eq(resp_parser_new(&p, NULL), 0);
    ck_assert_str_eq(resp_parser_error(p), "");
    ck_assert_int_eq(resp_parser_feed(p, "*x\r\n", 4), 0);
    ck_assert_int_eq(resp_parser_next(&c, p), RK_EPROTO);
    ck_assert_int_eq(resp_parser_next(&c, p), RK_EPROTO);
    ck_assert_int_eq(resp_parser_feed(p, "PING\r\n", 6), RK_EPROTO);
    ck_assert_int_eq(resp_parser_next(&c, p), RK_EPROTO);
    struct resp_out o = RESP_OUT_INIT;
    ck_assert_int_eq(resp_out_proto_error(&o, p), 0);
    ck_assert_uint_eq(o.len, strlen("-ERR Protocol error: invalid multibulk "
                                    "length\r\n"));
    ck_assert(memcmp(o.p, "-ERR Protocol error: invalid multibulk length\r\n",
                     o.len) == 0);
    resp_out_free(&o);
    resp_parser_free(p);
    resp_parser_free(NULL);
}
END_TEST

/* A 1 MiB value read 4 KiB at a time through reserve/commit, then more
 * requests on the same parser. */
START_TEST(parse_large_value_zero_copy)
{
    size_t vlen = 1u << 20;
    char head[64];
    int hn = sprintf(head, "*3\r\n$3\r\nSET\r\n$1\r\nk\r\n$%zu\r\n", vlen);
    size_t n = (size_t)hn + vlen + 2 + 14;
    uint8_t *in = malloc(n);
    ck_assert_ptr_nonnull(in);
    memcpy(in, head, (size_t)hn);
    for (size_t i = 0; i < vlen; i++)
        in[hn + i] = (uint8_t)(i * 7);
    memcpy(in + hn + vlen, "\r\n", 2);
    memcpy(in + hn + vlen + 2, "*1\r\n$4\r\nPING\r\n", 14);

    resp_parser *p;
    ck_assert_int_eq(resp_parser_new(&p, NULL), 0);
    size_t off = 0;
    int got = 0;
    struct resp_cmd c;
    while (off < n) {
        uint8_t *dst;
        size_t room;
        ck_assert_int_eq(resp_parser_reserve(&dst, &room, p, 4096), 0);
        size_t step = n - off < 4096 ? n - off : 4096;
        memcpy(dst, in + off, step);
        resp_parser_commit(p, step);
        off += step;
        int rc;
        while ((rc = resp_parser_next(&c, p)) == 1) {
            if (got == 0) {
                ck_assert_uint_eq(c.argc, 3);
                ck_assert_uint_eq(c.argv[2].len, vlen);
                ck_assert(memcmp(c.argv[2].p, in + hn, vlen) == 0);
            } else {
                ck_assert_uint_eq(c.argc, 1);
                ck_assert(memcmp(c.argv[0].p, "PING", 4) == 0);
            }
            got++;
        }
        ck_assert_int_eq(rc, 0);
    }
    ck_assert_int_eq(got, 2);
    ck_assert_uint_gt(resp_parser_memory(p), vlen);
    /* the buffer is usable and shrinks afterwards */
    ck_assert_int_eq(resp_parser_feed(p, "PING\n", 5), 0);
    ck_assert_int_eq(resp_parser_next(&c, p), 1);
    ck_assert_uint_le(resp_parser_memory(p), 300 * 1024);
    resp_parser_free(p);
    free(in);
}
END_TEST

/* ------------------------------------------------------------------------
 * Encoders
 * ------------------------------------------------------------------------ */

#define OUT_IS(o, lit)                                                        \
    do {                                                                      \
        ck_assert_uint_eq((o).len, sizeof(lit) - 1);                          \
        ck_assert_msg(memcmp((o).p, lit, sizeof(lit) - 1) == 0, "got [%.*s]", \
                      (int)(o).len, (const char *)(o).p);                     \
        (o).len = 0;                                                          \
    } while (0)

START_TEST(encode_exact)
{
    struct resp_out o = RESP_OUT_INIT;
    ck_assert_int_eq(resp_out_ok(&o), 0);
    OUT_IS(o, "+OK\r\n");
    ck_assert_int_eq(resp_out_simple(&o, "PONG"), 0);
    OUT_IS(o, "+PONG\r\n");
    ck_assert_int_eq(resp_out_simple(&o, "a\r\nb"), 0);
    OUT_IS(o, "+a  b\r\n");
    ck_assert_int_eq(resp_out_error(&o, "ERR", "syntax error"), 0);
    OUT_IS(o, "-ERR syntax error\r\n");
    ck_assert_int_eq(resp_out_error(&o, "TIMEOUT", NULL), 0);
    OUT_IS(o, "-TIMEOUT\r\n");
    ck_assert_int_eq(resp_out_error(&o, "ERR", "x\ny"), 0);
    OUT_IS(o, "-ERR x y\r\n");
    ck_assert_int_eq(resp_out_errorf(&o, "ERR n=%d", 5), 0);
    OUT_IS(o, "-ERR n=5\r\n");
    ck_assert_int_eq(resp_out_int(&o, 0), 0);
    OUT_IS(o, ":0\r\n");
    ck_assert_int_eq(resp_out_int(&o, -1), 0);
    OUT_IS(o, ":-1\r\n");
    ck_assert_int_eq(resp_out_int(&o, INT64_MAX), 0);
    OUT_IS(o, ":9223372036854775807\r\n");
    ck_assert_int_eq(resp_out_int(&o, INT64_MIN), 0);
    OUT_IS(o, ":-9223372036854775808\r\n");
    ck_assert_int_eq(resp_out_bulk(&o, "", 0), 0);
    OUT_IS(o, "$0\r\n\r\n");
    ck_assert_int_eq(resp_out_bulk(&o, "a\r\n\0b", 5), 0);
    OUT_IS(o, "$5\r\na\r\n\0b\r\n");
    ck_assert_int_eq(resp_out_null(&o), 0);
    OUT_IS(o, "$-1\r\n");
    ck_assert_int_eq(resp_out_array(&o, 0), 0);
    OUT_IS(o, "*0\r\n");
    ck_assert_int_eq(resp_out_array(&o, 12), 0);
    OUT_IS(o, "*12\r\n");
    /* appends, and grows past its first allocation */
    for (int i = 0; i < 1000; i++)
        ck_assert_int_eq(resp_out_bulk(&o, "abc", 3), 0);
    ck_assert_uint_eq(o.len, 9000);
    ck_assert(memcmp(o.p + 8991, "$3\r\nabc\r\n", 9) == 0);
    resp_out_free(&o);
    ck_assert_ptr_null(o.p);
    resp_out_free(&o);
}
END_TEST

START_TEST(encode_typed_errors)
{
    struct resp_out o = RESP_OUT_INIT;
    ck_assert_int_eq(resp_out_rkerr(&o, RK_EUNAVAILABLE, NULL), 0);
    OUT_IS(o, "-UNAVAILABLE not enough live replicas\r\n");
    ck_assert_int_eq(resp_out_rkerr(&o, RK_ETIMEOUT, "2 of 3 acks"), 0);
    OUT_IS(o, "-TIMEOUT 2 of 3 acks\r\n");
    ck_assert_int_eq(resp_out_rkerr(&o, RK_EOVERLOADED, NULL), 0);
    OUT_IS(o, "-OVERLOADED node overloaded, request shed\r\n");
    ck_assert_int_eq(resp_out_rkerr(&o, RK_ESTALE, "epoch 4 < 7"), 0);
    OUT_IS(o, "-RING_STALE epoch 4 < 7\r\n");
    ck_assert_int_eq(resp_out_rkerr(&o, RK_ETOOLARGE, NULL), 0);
    OUT_IS(o, "-TOO_LARGE key or value too large\r\n");
    ck_assert_int_eq(resp_out_rkerr(&o, RK_EAUTH, NULL), 0);
    OUT_IS(o, "-AUTH authentication failed\r\n");
    ck_assert_int_eq(resp_out_rkerr(&o, RK_EBADREQ, "bad"), 0);
    OUT_IS(o, "-BAD_REQUEST bad\r\n");
    ck_assert_int_eq(resp_out_rkerr(&o, -ENOSPC, NULL), 0);
    OUT_IS(o, "-ERR No space left on device\r\n");
    resp_out_free(&o);
}
END_TEST

/* ------------------------------------------------------------------------
 * Command table
 * ------------------------------------------------------------------------ */

/* Build a resp_cmd from NUL-terminated strings (NULL-terminated list). */
struct argv_buf {
    struct rk_slice a[16];
    struct resp_cmd c;
};

static struct resp_cmd *mk(struct argv_buf *b, const char *first, ...)
{
    va_list ap;
    size_t n = 0;
    va_start(ap, first);
    for (const char *s = first; s != NULL; s = va_arg(ap, const char *))
        b->a[n++] = RK_SLICE(s, strlen(s));
    va_end(ap);
    b->c.argc = n;
    b->c.too_large = 0;
    b->c.argv = b->a;
    return &b->c;
}

/* rc and reply of a resp_request_parse or resp_multi_filter: the answer
 * byte-exact (want_reply == NULL: RESP_REQ_EXEC, nothing written). Frees
 * the reply. */
static void reply_expect(int rc, struct resp_out *o, const char *want_reply)
{
    if (want_reply == NULL) {
        ck_assert_msg(rc == RESP_REQ_EXEC, "rc %d reply [%.*s]", rc,
                      (int)o->len, o->p ? (const char *)o->p : "");
        ck_assert_uint_eq(o->len, 0);
    } else {
        ck_assert_int_eq(rc, RESP_REQ_ANSWERED);
        ck_assert_msg(o->len == strlen(want_reply) &&
                          memcmp(o->p, want_reply, o->len) == 0,
                      "got [%.*s] want [%s]", (int)o->len, (const char *)o->p,
                      want_reply);
    }
    resp_out_free(o);
}

/* Parse and expect an answer byte-exact (want_reply == NULL: EXEC, empty). */
static void req_expect(struct resp_request *r,
                       const struct resp_cmd *c,
                       const char *want_reply)
{
    struct resp_out o = RESP_OUT_INIT;
    reply_expect(resp_request_parse(r, c, &o), &o, want_reply);
}

#define R(...) mk(&ab, __VA_ARGS__, NULL)

START_TEST(cmd_lookup_and_arity)
{
    struct argv_buf ab;
    struct resp_request r;
    req_expect(&r, R("gEt", "k"), NULL);
    ck_assert_int_eq(r.op, RESP_OP_GET);
    ck_assert_uint_eq(r.key.len, 1);
    req_expect(&r, R("FOO", "a"), "-ERR unknown command 'FOO'\r\n");
    req_expect(&r, R(""), "-ERR unknown command ''\r\n");
    req_expect(&r, R("G\r\nT'"), "-ERR unknown command 'G??T?'\r\n");
    req_expect(&r, R("GET"),
               "-ERR wrong number of arguments for 'get' command\r\n");
    req_expect(&r, R("get", "a", "b"),
               "-ERR wrong number of arguments for 'get' command\r\n");
    req_expect(&r, R("MSET", "a", "1", "b"),
               "-ERR wrong number of arguments for 'mset' command\r\n");
    req_expect(&r, R("ping", "a", "b"),
               "-ERR wrong number of arguments for 'ping' command\r\n");
    req_expect(&r, R("set", "k"),
               "-ERR wrong number of arguments for 'set' command\r\n");
    ck_assert_str_eq(resp_op_name(RESP_OP_MGET), "mget");
    ck_assert_str_eq(resp_op_name(RESP_OP_CONSISTENCY), "consistency");
    for (int op = 0; op < RESP_OP_COUNT_; op++)
        ck_assert_str_ne(resp_op_name((enum resp_op)op), "?");
}
END_TEST

START_TEST(cmd_set_options)
{
    struct argv_buf ab;
    struct resp_request r;
    req_expect(&r, R("SET", "k", "v"), NULL);
    ck_assert_int_eq(r.op, RESP_OP_SET);
    ck_assert(memcmp(r.value.p, "v", 1) == 0);
    ck_assert_int_eq(r.set.cond, RESP_SET_ALWAYS);
    ck_assert(!r.set.has_expire);
    req_expect(&r, R("set", "k", "v", "ex", "10"), NULL);
    ck_assert(r.set.has_expire && !r.set.expire_at);
    ck_assert_int_eq(r.set.expire_ms, 10000);
    req_expect(&r, R("set", "k", "v", "PX", "5", "NX"), NULL);
    ck_assert_int_eq(r.set.expire_ms, 5);
    ck_assert_int_eq(r.set.cond, RESP_SET_NX);
    req_expect(&r, R("set", "k", "v", "xx", "XX"), NULL);
    ck_assert_int_eq(r.set.cond, RESP_SET_XX);
    req_expect(&r, R("set", "k", "v", "EXAT", "1700000000"), NULL);
    ck_assert(r.set.expire_at);
    ck_assert_int_eq(r.set.expire_ms, INT64_C(1700000000000));
    req_expect(&r, R("set", "k", "v", "pxat", "1700000000123"), NULL);
    ck_assert(r.set.expire_at);
    ck_assert_int_eq(r.set.expire_ms, INT64_C(1700000000123));

    req_expect(&r, R("set", "k", "v", "NX", "XX"), "-ERR syntax error\r\n");
    req_expect(&r, R("set", "k", "v", "EX"), "-ERR syntax error\r\n");
    req_expect(&r, R("set", "k", "v", "EX", "1", "PX", "1"),
               "-ERR syntax error\r\n");
    req_expect(&r, R("set", "k", "v", "bogus"), "-ERR syntax error\r\n");
    req_expect(&r, R("set", "k", "v", "EX", "0"),
               "-ERR invalid expire time in 'set' command\r\n");
    req_expect(&r, R("set", "k", "v", "PX", "-3"),
               "-ERR invalid expire time in 'set' command\r\n");
    req_expect(&r, R("set", "k", "v", "EX", "9223372036854776"),
               "-ERR invalid expire time in 'set' command\r\n");
    req_expect(&r, R("set", "k", "v", "EX", "1x"),
               "-ERR value is not an integer or out of range\r\n");
    req_expect(&r, R("set", "k", "v", "keepttl"),
               "-ERR SET option 'keepttl' is not supported by ringkv\r\n");
    req_expect(&r, R("set", "k", "v", "GET"),
               "-ERR SET option 'GET' is not supported by ringkv\r\n");
}
END_TEST

/* ... and so are integer arguments ("EX 010", "PX -0" were taken). */
START_TEST(regression_leading_zero_arguments)
{
    struct argv_buf ab;
    struct resp_request r;
    req_expect(&r, R("set", "k", "v", "EX", "010"),
               "-ERR value is not an integer or out of range\r\n");
    req_expect(&r, R("set", "k", "v", "PX", "-0"),
               "-ERR value is not an integer or out of range\r\n");
    req_expect(&r, R("set", "k", "v", "PX", "10"), NULL);
    ck_assert_int_eq(r.set.expire_ms, 10);
}
END_TEST

/* SETEX, PSETEX and SETNX are SETs with an expiry or NX; UNLINK is DEL.
 * Transactions and read-modify-write commands are refused with a reason. */
START_TEST(cmd_set_older_forms)
{
    struct argv_buf ab;
    struct resp_request r;
    req_expect(&r, R("SETEX", "k", "10", "v"), NULL);
    ck_assert_int_eq(r.op, RESP_OP_SET);
    ck_assert(r.key.len == 1 && r.key.p[0] == 'k');
    ck_assert(r.value.len == 1 && r.value.p[0] == 'v');
    ck_assert(r.set.has_expire && !r.set.expire_at && !r.set.reply_int);
    ck_assert_int_eq(r.set.expire_ms, 10000);
    ck_assert_int_eq(r.set.cond, RESP_SET_ALWAYS);
    ck_assert_str_eq(r.name, "setex"); /* for the daemon's messages */
    req_expect(&r, R("psetex", "k", "1500", "v"), NULL);
    ck_assert_int_eq(r.set.expire_ms, 1500);
    ck_assert_str_eq(r.name, "psetex");
    req_expect(&r, R("setnx", "k", "v"), NULL);
    ck_assert_int_eq(r.op, RESP_OP_SET);
    ck_assert_int_eq(r.set.cond, RESP_SET_NX);
    ck_assert(r.set.reply_int && !r.set.has_expire);
    ck_assert(r.value.len == 1 && r.value.p[0] == 'v');
    req_expect(&r, R("TTL", "k"), NULL);
    ck_assert_int_eq(r.op, RESP_OP_TTL);
    ck_assert(!r.pttl && r.key.len == 1);
    req_expect(&r, R("pttl", "k"), NULL);
    ck_assert(r.pttl);
    req_expect(&r, R("ttl", "k", "x"),
               "-ERR wrong number of arguments for 'ttl' command\r\n");
    req_expect(&r, R("UNLINK", "a", "b"), NULL);
    ck_assert_int_eq(r.op, RESP_OP_DEL);
    ck_assert_uint_eq(r.nkeys, 2);
    ck_assert_str_eq(resp_op_name(RESP_OP_SET), "set");
    ck_assert_str_eq(resp_op_name(RESP_OP_DEL), "del");

    req_expect(&r, R("setex", "k", "0", "v"),
               "-ERR invalid expire time in 'setex' command\r\n");
    req_expect(&r, R("psetex", "k", "-1", "v"),
               "-ERR invalid expire time in 'psetex' command\r\n");
    req_expect(&r, R("setex", "k", "9223372036854776", "v"),
               "-ERR invalid expire time in 'setex' command\r\n");
    req_expect(&r, R("setex", "k", "ten", "v"),
               "-ERR value is not an integer or out of range\r\n");
    req_expect(&r, R("setex", "k", "10"),
               "-ERR wrong number of arguments for 'setex' command\r\n");
    req_expect(&r, R("setnx", "k", "v", "x"),
               "-ERR wrong number of arguments for 'setnx' command\r\n");
    req_expect(&r, R("setex", "", "10", "v"),
               "-BAD_REQUEST keys may not be empty\r\n");

    req_expect(&r, R("exec"),
               "-ERR unknown command 'exec' (no "
               "transactions)\r\n");
    req_expect(&r, R("incr", "k"),
               "-ERR unknown command 'incr' (no atomic read-modify-write "
               "under last-write-wins)\r\n");
}
END_TEST

/* Filter one command; want NULL: not filtered (RESP_REQ_EXEC). */
static void
multi_expect(bool *in_multi, const struct resp_cmd *c, const char *want_reply)
{
    struct resp_out o = RESP_OUT_INIT;
    reply_expect(resp_multi_filter(in_multi, c, &o), &o, want_reply);
}

/* Regression (multi_ran_queued_writes): MULTI was an unknown command, so a
 * client's MULTI / SET / EXEC ran the SET although the client was told the
 * transaction failed. What follows a refused MULTI is not executed. */
START_TEST(regression_multi_ran_queued_writes)
{
    struct argv_buf ab;
    bool in = false;
    static const char not_run[] =
        "-ERR not executed: inside a MULTI that ringkv refused (send EXEC "
        "or DISCARD)\r\n";
    multi_expect(&in, R("SET", "k", "v"), NULL);
    ck_assert(!in);
    multi_expect(&in, R("exec"), NULL); /* outside MULTI: the parser's */
    multi_expect(&in, R("Multi"),
                 "-ERR unknown command 'Multi' (no transactions: each key "
                 "is written on its own; what follows up to EXEC or DISCARD "
                 "is not executed; a pipeline without MULTI runs the same "
                 "commands)\r\n");
    ck_assert(in);
    multi_expect(&in, R("SET", "k", "v"), not_run);
    multi_expect(&in, R("get", "k"), not_run);
    multi_expect(&in, R("multi"), "-ERR MULTI calls can not be nested\r\n");
    multi_expect(&in, R("QUIT"), NULL);
    ck_assert(in);
    multi_expect(&in, R("EXEC"),
                 "-EXECABORT Transaction discarded: ringkv has no "
                 "transactions, nothing in it was executed\r\n");
    ck_assert(!in);
    multi_expect(&in, R("SET", "k", "v"), NULL);
    multi_expect(&in, R("MULTI"),
                 "-ERR unknown command 'MULTI' (no transactions: each key "
                 "is written on its own; what follows up to EXEC or DISCARD "
                 "is not executed; a pipeline without MULTI runs the same "
                 "commands)\r\n");
    ck_assert(in);
    multi_expect(&in, R("discard"), "+OK\r\n");
    ck_assert(!in);
    multi_expect(&in, R("DEL", "k"), NULL);
}
END_TEST

START_TEST(cmd_key_limits)
{
    struct argv_buf ab;
    struct resp_request r;
    char *big = malloc(RK_MAX_KEY + 2);
    ck_assert_ptr_nonnull(big);
    memset(big, 'k', RK_MAX_KEY + 1);
    big[RK_MAX_KEY + 1] = '\0';
    req_expect(&r, R("GET", big),
               "-TOO_LARGE key of 65537 bytes, "
               "limit 65536\r\n");
    req_expect(&r, R("SET", big, "v"),
               "-TOO_LARGE key of 65537 bytes, "
               "limit 65536\r\n");
    req_expect(&r, R("DEL", "a", big),
               "-TOO_LARGE key of 65537 bytes, "
               "limit 65536\r\n");
    req_expect(&r, R("MSET", "a", "1", big, "2"),
               "-TOO_LARGE key of 65537 bytes, limit 65536\r\n");
    big[RK_MAX_KEY] = '\0';
    req_expect(&r, R("GET", big), NULL);
    ck_assert_uint_eq(r.key.len, RK_MAX_KEY);
    req_expect(&r, R("GET", ""), "-BAD_REQUEST keys may not be empty\r\n");
    req_expect(&r, R("MGET", "a", ""),
               "-BAD_REQUEST keys may not be empty\r\n");
    /* an empty value is fine */
    req_expect(&r, R("MSET", "a", "", "b", "2"), NULL);
    free(big);
}
END_TEST

START_TEST(cmd_multi_key)
{
    struct argv_buf ab;
    struct resp_request r;
    req_expect(&r, R("DEL", "a", "b", "c"), NULL);
    ck_assert_int_eq(r.op, RESP_OP_DEL);
    ck_assert_uint_eq(r.nkeys, 3);
    ck_assert(memcmp(r.keys[2].p, "c", 1) == 0);
    req_expect(&r, R("exists", "a"), NULL);
    ck_assert_int_eq(r.op, RESP_OP_EXISTS);
    ck_assert_uint_eq(r.nkeys, 1);
    req_expect(&r, R("MGET", "a", "b"), NULL);
    ck_assert_uint_eq(r.nkeys, 2);
    req_expect(&r, R("MSET", "a", "1", "b", "2"), NULL);
    ck_assert_int_eq(r.op, RESP_OP_MSET);
    ck_assert_uint_eq(r.nkeys, 2);
    ck_assert(memcmp(r.keys[2].p, "b", 1) == 0);
    ck_assert(memcmp(r.keys[3].p, "2", 1) == 0);
}
END_TEST

START_TEST(cmd_scan)
{
    struct argv_buf ab;
    struct resp_request r;
    req_expect(&r, R("SCAN", "0"), NULL);
    ck_assert_int_eq(r.op, RESP_OP_SCAN);
    ck_assert(r.scan_cursor == 0 && r.scan_count == 0 && r.scan_match.len == 0);
    req_expect(&r,
               R("scan", "18446744073709551615", "match", "k*", "COUNT", "7",
                 "MATCH", "a?", "TYPE", "string"),
               NULL);
    ck_assert(r.scan_cursor == UINT64_MAX && r.scan_count == 7);
    ck_assert(r.scan_match.len == 2 && memcmp(r.scan_match.p, "a?", 2) == 0);
    req_expect(&r, R("SCAN", "00042"), NULL);
    ck_assert(r.scan_cursor == 42);
    /* a cursor is an unsigned 64-bit decimal and nothing else */
    const char *bad[] = {"",
                         "-1",
                         "+1",
                         "1.5",
                         "0x10",
                         "abc",
                         " 1",
                         "1 ",
                         "18446744073709551616",
                         "99999999999999999999",
                         "000000000000000000001"};
    for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++)
        req_expect(&r, R("SCAN", bad[i]), "-ERR invalid cursor\r\n");
    req_expect(&r, R("SCAN", "0", "COUNT", "0"), "-ERR syntax error\r\n");
    req_expect(&r, R("SCAN", "0", "COUNT", "-3"), "-ERR syntax error\r\n");
    req_expect(&r, R("SCAN", "0", "COUNT", "x"),
               "-ERR value is not an integer or out of range\r\n");
    req_expect(&r, R("SCAN", "0", "MATCH"), "-ERR syntax error\r\n");
    req_expect(&r, R("SCAN", "0", "LIMIT", "3"), "-ERR syntax error\r\n");
    req_expect(&r, R("SCAN", "0", "TYPE", "hash"),
               "-ERR unknown type name (ringkv holds strings)\r\n");
    req_expect(&r, R("SCAN"),
               "-ERR wrong number of arguments for 'scan' command\r\n");
    req_expect(&r, R("DBSIZE"), NULL);
    ck_assert_int_eq(r.op, RESP_OP_DBSIZE);
    req_expect(&r, R("DBSIZE", "x"),
               "-ERR wrong number of arguments for 'dbsize' command\r\n");
    req_expect(&r, R("KEYS", "*"),
               "-ERR unknown command 'KEYS' (a whole-keyspace command would "
               "read every node at once: iterate with SCAN)\r\n");
}
END_TEST

START_TEST(cmd_consistency)
{
    struct argv_buf ab;
    struct resp_request r;
    req_expect(&r, R("CONSISTENCY", "local_quorum"), NULL);
    ck_assert_int_eq(r.op, RESP_OP_CONSISTENCY);
    ck_assert(r.has_level);
    ck_assert_int_eq(r.level, RESP_LEVEL_LOCAL_QUORUM);
    req_expect(&r, R("consistency"), NULL);
    ck_assert(!r.has_level);
    req_expect(&r, R("CONSISTENCY", "three"),
               "-BAD_REQUEST unknown consistency level 'three' (ONE, TWO, "
               "QUORUM, ALL, LOCAL_ONE, LOCAL_QUORUM, EACH_QUORUM)\r\n");
    for (int l = 0; l < RESP_LEVEL_COUNT_; l++) {
        enum resp_level got;
        const char *name = resp_level_name((enum resp_level)l);
        ck_assert_int_eq(resp_level_parse(&got, name, strlen(name)), 0);
        ck_assert_int_eq(got, l);
    }
    enum resp_level got;
    ck_assert_int_eq(resp_level_parse(&got, "quorumx", 7), RK_EBADREQ);
    ck_assert_int_eq(resp_level_parse(&got, "QUORU", 5), RK_EBADREQ);
    ck_assert_str_eq(resp_level_name(RESP_LEVEL_COUNT_), "?");
}
END_TEST

START_TEST(cmd_local_answers)
{
    struct argv_buf ab;
    struct resp_request r;
    req_expect(&r, R("PING"), "+PONG\r\n");
    req_expect(&r, R("ping", "hi"), "$2\r\nhi\r\n");
    req_expect(&r, R("ECHO", "a b"), "$3\r\na b\r\n");
    req_expect(&r, R("SELECT", "0"), "+OK\r\n");
    req_expect(&r, R("SELECT", "1"), "-ERR DB index is out of range\r\n");
    req_expect(&r, R("SELECT", "x"),
               "-ERR value is not an integer or out of range\r\n");
    req_expect(&r, R("QUIT"), "+OK\r\n");
    ck_assert(r.close);
    req_expect(&r, R("COMMAND"), "*0\r\n");
    req_expect(&r, R("COMMAND", "DOCS"), "*0\r\n");
    req_expect(&r, R("command", "count"), ":32\r\n");
    req_expect(&r, R("COMMAND", "INFO", "get", "set"), "*2\r\n$-1\r\n$-1\r\n");
    req_expect(&r, R("COMMAND", "X"),
               "-ERR unknown subcommand 'X' of 'command'\r\n");
    req_expect(&r, R("CONFIG", "GET", "save", "nope", "APPENDONLY"),
               "*4\r\n$4\r\nsave\r\n$0\r\n\r\n$10\r\nappendonly\r\n$2\r\nno"
               "\r\n");
    req_expect(&r, R("CONFIG", "GET", "maxmemory"), "*0\r\n");
    req_expect(&r, R("CONFIG", "GET"),
               "-ERR wrong number of arguments for 'config|get' command\r\n");
    req_expect(&r, R("CONFIG", "SET", "a", "b"),
               "-ERR CONFIG SET is not supported by ringkv\r\n");
    req_expect(&r, R("CLIENT", "SETNAME", "app-1"), "+OK\r\n");
    req_expect(&r, R("CLIENT", "SETNAME", "a b"),
               "-ERR Client names cannot contain spaces, newlines or special "
               "characters.\r\n");
    req_expect(&r, R("CLIENT", "GETNAME"), "$-1\r\n");
    req_expect(&r, R("CLIENT", "SETINFO", "LIB-NAME", "x"), "+OK\r\n");
    req_expect(&r, R("CLIENT", "KILL", "x"),
               "-ERR unsupported CLIENT subcommand or arity 'KILL'\r\n");
}
END_TEST

START_TEST(cmd_exec_ops)
{
    struct argv_buf ab;
    struct resp_request r;
    req_expect(&r, R("AUTH", "secret"), NULL);
    ck_assert_int_eq(r.op, RESP_OP_AUTH);
    ck_assert_uint_eq(r.user.len, 0);
    ck_assert(r.password.len == 6 && memcmp(r.password.p, "secret", 6) == 0);
    req_expect(&r, R("AUTH", "bob", "pw"), NULL);
    ck_assert(r.user.len == 3 && r.password.len == 2);
    req_expect(&r, R("AUTH", "a", "b", "c"),
               "-ERR wrong number of arguments for 'auth' command\r\n");
    req_expect(&r, R("INFO"), NULL);
    ck_assert_int_eq(r.op, RESP_OP_INFO);
    ck_assert_uint_eq(r.nkeys, 0);
    req_expect(&r, R("INFO", "ringkv", "server"), NULL);
    ck_assert(r.nkeys == 2 && r.keys[0].len == 6 && r.keys[1].len == 6);
}
END_TEST

/* The operator's commands: left to the daemon (which checks the role),
 * named as the native ops are, their arguments in keys. */
START_TEST(cmd_admin_ops)
{
    struct argv_buf ab;
    struct resp_request r;
    static const char *const names[] = {"decommission", "cleanup", "abort",
                                        "join"};
    for (size_t i = 0; i < sizeof(names) / sizeof(names[0]); i++) {
        req_expect(&r, R(names[i]), NULL);
        ck_assert_int_eq(r.op, RESP_OP_ADMIN);
        ck_assert_str_eq(r.name, names[i]);
        ck_assert_uint_eq(r.nkeys, 0);
    }
    req_expect(&r, R("DECOMMISSION", "now"),
               "-ERR wrong number of arguments for 'decommission' "
               "command\r\n");
    req_expect(&r, R("RemoveNode", "n3"), NULL);
    ck_assert_str_eq(r.name, "removenode");
    ck_assert(r.nkeys == 1 && r.keys[0].len == 2);
    req_expect(&r, R("removenode"),
               "-ERR wrong number of arguments for 'removenode' command\r\n");
    req_expect(&r, R("repair"), NULL);
    ck_assert_uint_eq(r.nkeys, 0);
    req_expect(&r, R("repair", "1,2"), NULL);
    ck_assert_uint_eq(r.nkeys, 1);
    req_expect(&r, R("snapshot", "t1"), NULL);
    ck_assert_str_eq(r.name, "snapshot");
    req_expect(&r, R("snapshot", "a", "b"),
               "-ERR wrong number of arguments for 'snapshot' command\r\n");
}
END_TEST

/* Parser and table together, as the daemon uses them. */
/* resp_peek_gets: the GETs at the front of a pipeline, in the canonical
 * form only, stopping at anything else; never past the bytes given. */
static size_t
peek(const char *in, size_t len, struct rk_slice *keys, size_t max)
{
    /* a copy of exactly len bytes: ASan sees a read past them */
    uint8_t *b = malloc(len ? len : 1);
    ck_assert_ptr_nonnull(b);
    memcpy(b, in, len);
    size_t n = resp_peek_gets(b, len, keys, max);
    for (size_t i = 0; i < n; i++) /* offsets survive the free */
        keys[i].p = (const uint8_t *)in + (keys[i].p - b);
    free(b);
    return n;
}

/* Regression peek_gets_on_no_input: a connection whose input buffer held
 * nothing (its pointer NULL) was peeked at NULL + 0, undefined in C
 * (clang's UBSan stopped nodes in test_resp and test_roles; gcc's does not
 * check it). Nothing given: no GET, and the buffer is not touched. */
START_TEST(regression_peek_gets_on_no_input)
{
    struct rk_slice k[2];
    ck_assert_uint_eq(resp_peek_gets(NULL, 0, k, 2), 0);
}
END_TEST

START_TEST(peek_gets_pipeline)
{
    struct rk_slice k[8];
    static const char in[] = "*2\r\n$3\r\nGET\r\n$3\r\nabc\r\n"
                             "*2\r\n$3\r\ngEt\r\n$0\r\n\r\n"
                             "*2\r\n$3\r\nget\r\n$10\r\n0123456789\r\n"
                             "*3\r\n$3\r\nSET\r\n$1\r\nk\r\n$1\r\nv\r\n"
                             "*2\r\n$3\r\nGET\r\n$1\r\nz\r\n";
    ck_assert_uint_eq(peek(in, sizeof(in) - 1, k, 8), 3); /* stops at SET */
    ck_assert(k[0].len == 3 && memcmp(k[0].p, "abc", 3) == 0);
    ck_assert_uint_eq(k[1].len, 0);
    ck_assert(k[2].len == 10 && memcmp(k[2].p, "0123456789", 10) == 0);
    ck_assert_uint_eq(peek(in, sizeof(in) - 1, k, 2), 2); /* max */
    /* every cut of the first two GETs: only whole ones count */
    static const char two[] = "*2\r\n$3\r\nGET\r\n$3\r\nabc\r\n"
                              "*2\r\n$3\r\nGET\r\n$1\r\nz\r\n";
    for (size_t len = 0; len < sizeof(two); len++) {
        size_t want = len >= sizeof(two) - 1 ? 2 : len >= 22 ? 1 : 0;
        ck_assert_uint_eq(peek(two, len, k, 8), want);
    }
}
END_TEST

START_TEST(peek_gets_refuses_other_forms)
{
    struct rk_slice k[4];
    static const char *const no[] = {
        "GET abc\r\n",                               /* inline */
        "*2\r\n$3\r\nGETX\r\n$1\r\nk\r\n",           /* another name */
        "*3\r\n$3\r\nGET\r\n$1\r\nk\r\n$1\r\nk\r\n", /* arity */
        "*2\r\n$3\r\nGET\r\n$01\r\nk\r\n",           /* the parser refuses it */
        "*2\r\n$3\r\nGET\r\n$-1\r\n",
        "*2\r\n$3\r\nGET\r\n$\r\nk\r\n",
        "*2\r\n$3\r\nGET\r\n$1\r\nkk\r\n", /* the length is wrong */
        "*2\r\n$3\r\nGET\r\n$1\r\nk\n\n",
        "*2\r\n$3\r\nGET\r\n$1234567890\r\nk\r\n", /* ten digits */
    };
    for (size_t i = 0; i < sizeof(no) / sizeof(no[0]); i++)
        ck_assert_msg(peek(no[i], strlen(no[i]), k, 4) == 0, "%zu", i);
}
END_TEST

START_TEST(cmd_from_parser)
{
    resp_parser *p;
    ck_assert_int_eq(resp_parser_new(&p, NULL), 0);
    static const char in[] = "set k v EX 5\r\n*2\r\n$3\r\nGET\r\n$1\r\nk\r\n"
                             "PING\r\nNOPE\r\n";
    ck_assert_int_eq(resp_parser_feed(p, in, sizeof(in) - 1), 0);
    struct resp_out o = RESP_OUT_INIT;
    struct resp_cmd c;
    struct resp_request r;
    int ops[4], rcs[4], n = 0;
    while (resp_parser_next(&c, p) == 1) {
        ck_assert_int_lt(n, 4);
        rcs[n] = resp_request_parse(&r, &c, &o);
        ops[n++] = r.op;
    }
    ck_assert_int_eq(n, 4);
    ck_assert_int_eq(ops[0], RESP_OP_SET);
    ck_assert_int_eq(rcs[0], RESP_REQ_EXEC);
    ck_assert_int_eq(ops[1], RESP_OP_GET);
    ck_assert_int_eq(rcs[1], RESP_REQ_EXEC);
    ck_assert_int_eq(rcs[2], RESP_REQ_ANSWERED);
    ck_assert_int_eq(rcs[3], RESP_REQ_ANSWERED);
    static const char want[] = "+PONG\r\n-ERR unknown command 'NOPE'\r\n";
    ck_assert_uint_eq(o.len, sizeof(want) - 1);
    ck_assert(memcmp(o.p, want, o.len) == 0);
    resp_out_free(&o);
    resp_parser_free(p);
}
END_TEST

static Suite *resp_suite(void)
{
    Suite *s = suite_create("resp");
    TCase *tc = tcase_create("parser");
    tcase_add_test(tc, parse_multibulk);
    tcase_add_test(tc, parse_pipelined);
    tcase_add_test(tc, parse_pipelined_bytes_stay);
    tcase_add_test(tc, parse_inline);
    tcase_add_test(tc, parse_empty);
    tcase_add_test(tc, parse_bad_lengths);
    tcase_add_test(tc, regression_leading_zero_lengths);
    tcase_add_test(tc, parse_nested_refused);
    tcase_add_test(tc, parse_huge_bulk_refused);
    tcase_add_test(tc, parse_oversized_bulk_dropped);
    tcase_add_test(tc, parse_limits);
    tcase_add_test(tc, parse_wide_request_memory);
    tcase_add_test(tc, parse_announced_bulk_not_allocated);
    tcase_add_test(tc, parse_error_sticky);
    tcase_add_test(tc, parse_large_value_zero_copy);
    tcase_add_test(tc, regression_peek_gets_on_no_input);
    tcase_add_test(tc, peek_gets_pipeline);
    tcase_add_test(tc, peek_gets_refuses_other_forms);
    suite_add_tcase(s, tc);
    tc = tcase_create("encoder");
    tcase_add_test(tc, encode_exact);
    tcase_add_test(tc, encode_typed_errors);
    suite_add_tcase(s, tc);
    tc = tcase_create("commands");
    tcase_add_test(tc, cmd_lookup_and_arity);
    tcase_add_test(tc, cmd_set_options);
    tcase_add_test(tc, regression_leading_zero_arguments);
    tcase_add_test(tc, cmd_set_older_forms);
    tcase_add_test(tc, regression_multi_ran_queued_writes);
    tcase_add_test(tc, cmd_key_limits);
    tcase_add_test(tc, cmd_multi_key);
    tcase_add_test(tc, cmd_scan);
    tcase_add_test(tc, cmd_consistency);
    tcase_add_test(tc, cmd_local_answers);
    tcase_add_test(tc, cmd_exec_ops);
    tcase_add_test(tc, cmd_admin_ops);
    tcase_add_test(tc, cmd_from_parser);
    suite_add_tcase(s, tc);
    return s;
}

int main(void)
{
    SRunner *sr = srunner_create(resp_suite());
    srunner_run_all(sr, CK_NORMAL);
    int failed = srunner_ntests_failed(sr);
    srunner_free(sr);
    return failed == 0 ? EXIT_SUCCESS : EXIT_FAILURE;
}
