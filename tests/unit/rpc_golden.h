/*
 * rpc_golden.h - what the internode message tests share
 * (check_wire_rpc.c, check_wire_rpc_stream.c): hex vectors, the check of
 * an encoding against one, a value of n patterned bytes, the golden
 * vectors of the streaming, Merkle and SCAN messages (the corruption table
 * of check_wire_rpc.c walks them too) and two whole-message decoders.
 * Header-only, as rng.h.
 */
#ifndef TESTS_UNIT_RPC_GOLDEN_H
#define TESTS_UNIT_RPC_GOLDEN_H

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <check.h>

#include "wire/rpc_msg.h"

static inline size_t unhex(uint8_t *out, const char *hex)
{
    size_t n = 0;
    for (; hex[0] && hex[1]; hex += 2) {
        unsigned v;
        sscanf(hex, "%2x", &v);
        out[n++] = (uint8_t)v;
    }
    return n;
}

static inline void assert_bytes(const struct rpc_buf *b, const char *hex)
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

static inline uint8_t *big_value(size_t n)
{
    uint8_t *v = malloc(n ? n : 1);
    ck_assert_ptr_nonnull(v);
    for (size_t i = 0; i < n; i++)
        v[i] = (uint8_t)(i * 31 + 7);
    return v;
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

/* Decoders of a whole message, for tables and truncation loops. */
static inline int dec_stream_req(struct rk_slice b)
{
    struct rpc_stream_req m;
    return rpc_stream_req_decode(&m, b);
}
static inline int dec_stream_chunk(struct rk_slice b)
{
    struct rpc_stream_chunk m;
    return rpc_stream_chunk_decode(&m, b);
}

#endif
