/*
 * fuzz_resp.c - libFuzzer target for the RESP2 parser and command table.
 *
 * The first input byte picks a chunk size; the rest is a byte stream from a
 * client. It is parsed three times -- in one feed, in chunks through
 * reserve/commit, and in chunks appended to a buffer the caller owns (the
 * connection engine's way: resp_parser_next_in, consumed bytes dropped
 * from the front) -- and every run must produce the same requests and the
 * same final status (a difference aborts). Every request also goes through
 * resp_multi_filter and resp_request_parse, and a protocol error through
 * resp_out_proto_error. The GETs resp_peek_gets finds at the front of the
 * stream must be the parser's first requests, key for key.
 */
#include <stdbool.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include <xxhash.h>

#include "wire/resp.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

struct outcome {
    uint64_t digest; /* of every argument's length and bytes, in order */
    size_t ncmds;
    int rc;
    char err[96];
};

/* A caller-owned input buffer, as net/'s engine keeps one. */
struct owned {
    uint8_t *p;
    size_t len;
};

static void run(struct outcome *out,
                const uint8_t *data,
                size_t size,
                size_t chunk,
                bool borrowed)
{
    struct owned in = {NULL, 0};
    /* small limits so the fuzzer reaches them */
    struct resp_limits lim = {.max_bulk = 4096,
                              .max_args = 64,
                              .max_inline = 256,
                              .max_request = 8192,
                              .max_skip = 16384};
    resp_parser *p;
    XXH3_state_t *h = XXH3_createState();
    struct resp_out reply = RESP_OUT_INIT;
    bool in_multi = false; /* the connection state resp_multi_filter keeps */
    memset(out, 0, sizeof(*out));
    if (h == NULL || resp_parser_new(&p, &lim) != 0)
        abort();
    XXH3_64bits_reset(h);
    size_t off = 0;
    int rc = 0;
    while (off < size && rc >= 0) {
        size_t step = size - off;
        if (chunk != 0 && step > chunk)
            step = chunk;
        if (borrowed) {
            uint8_t *n = realloc(in.p, in.len + step);
            if (n == NULL)
                abort();
            in.p = n;
            memcpy(in.p + in.len, data + off, step);
            in.len += step;
        } else if (chunk == 0) {
            if (resp_parser_feed(p, data + off, step) != 0)
                abort();
        } else {
            uint8_t *dst;
            size_t room;
            if (resp_parser_reserve(&dst, &room, p, step) != 0 || room < step)
                abort();
            memcpy(dst, data + off, step);
            resp_parser_commit(p, step);
        }
        off += step;
        struct resp_cmd c;
        while ((rc = borrowed ? resp_parser_next_in(&c, p, in.p, &in.len)
                              : resp_parser_next(&c, p)) == 1) {
            if (c.argc == 0)
                abort();
            for (size_t i = 0; i < c.argc; i++) {
                uint64_t n = c.argv[i].len;
                XXH3_64bits_update(h, &n, sizeof(n));
                XXH3_64bits_update(h, c.argv[i].p, c.argv[i].len);
            }
            out->ncmds++;
            struct resp_request r;
            reply.len = 0;
            int qr = resp_multi_filter(&in_multi, &c, &reply);
            if (qr == RESP_REQ_EXEC)
                qr = resp_request_parse(&r, &c, &reply);
            XXH3_64bits_update(h, &qr, sizeof(qr)); /* same in every split */
            if (qr != RESP_REQ_EXEC && qr != RESP_REQ_ANSWERED)
                abort();
            if ((qr == RESP_REQ_ANSWERED) != (reply.len > 0))
                abort();
        }
        if (borrowed && rc >= 0) {
            size_t used = resp_parser_take_consumed(p);
            if (used > in.len)
                abort();
            memmove(in.p, in.p + used, in.len - used);
            in.len -= used;
        }
    }
    if (rc == RK_EPROTO) {
        reply.len = 0;
        if (resp_out_proto_error(&reply, p) != 0 || reply.len < 24)
            abort();
        strncpy(out->err, resp_parser_error(p), sizeof(out->err) - 1);
    }
    out->rc = rc;
    out->digest = XXH3_64bits_digest(h);
    resp_out_free(&reply);
    XXH3_freeState(h);
    resp_parser_free(p);
    free(in.p);
}

/* resp_peek_gets looks ahead of the parser: each key it finds is the
 * argument of the GET the parser returns at that place. */
static void peek_check(const uint8_t *data, size_t size)
{
    struct rk_slice keys[8];
    size_t k = resp_peek_gets(data, size, keys, 8);
    if (k > 8)
        abort();
    if (k == 0)
        return;
    resp_parser *p;
    if (resp_parser_new(&p, NULL) != 0 || resp_parser_feed(p, data, size))
        abort();
    for (size_t i = 0; i < k; i++) {
        struct resp_cmd c;
        if (resp_parser_next(&c, p) != 1 || c.argc != 2 || c.argv[0].len != 3 ||
            strncasecmp((const char *)c.argv[0].p, "get", 3) != 0 ||
            c.argv[1].len != keys[i].len ||
            memcmp(c.argv[1].p, keys[i].p, keys[i].len) != 0)
            abort();
    }
    resp_parser_free(p);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (size == 0)
        return 0;
    size_t chunk = (size_t)data[0] % 17 + 1;
    struct outcome whole, parts, owned;
    peek_check(data + 1, size - 1);
    run(&whole, data + 1, size - 1, 0, false);
    run(&parts, data + 1, size - 1, chunk, false);
    run(&owned, data + 1, size - 1, chunk, true);
    if (whole.rc != parts.rc || whole.ncmds != parts.ncmds ||
        whole.digest != parts.digest || strcmp(whole.err, parts.err) != 0)
        abort();
    if (whole.rc != owned.rc || whole.ncmds != owned.ncmds ||
        whole.digest != owned.digest || strcmp(whole.err, owned.err) != 0)
        abort();
    return 0;
}
