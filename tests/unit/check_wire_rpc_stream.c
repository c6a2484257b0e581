/*
 * check_wire_rpc_stream.c - the internode messages of range streaming,
 * Merkle leaves and SCAN (wire/rpc_msg.h): golden byte vectors, round
 * trips, the cursor, the items' checksum and count, item iteration, and
 * what a decoder must refuse (messages packed by hand with msgpack-c, so
 * that tests can make what the encoders refuse), truncations included. The
 * other internode messages are check_wire_rpc.c's.
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

static Suite *wire_rpc_stream_suite(void)
{
    Suite *s = suite_create("wire_rpc_stream");
    TCase *tc = tcase_create("stream");
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
    SRunner *sr = srunner_create(wire_rpc_stream_suite());
    srunner_run_all(sr, CK_NORMAL);
    int failed = srunner_ntests_failed(sr);
    srunner_free(sr);
    return failed == 0 ? EXIT_SUCCESS : EXIT_FAILURE;
}
