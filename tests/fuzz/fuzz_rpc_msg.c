/*
 * fuzz_rpc_msg.c - every internode RPC decoder on untrusted bytes. Whatever
 * decodes must re-encode and decode to the same message (the codec is a
 * bijection on what it accepts, up to skipped extra fields). A decoded
 * stream chunk or scan answer must also yield exactly its count of items,
 * never an error.
 */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "wire/rpc_msg.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static void check(int cond)
{
    if (!cond)
        abort();
}

static int same(struct rk_slice a, struct rk_slice b)
{
    return a.len == b.len && (a.len == 0 || memcmp(a.p, b.p, a.len) == 0);
}

static int same_pos(const struct rpc_stream_pos *a,
                    const struct rpc_stream_pos *b)
{
    return a->start == b->start && a->end == b->end && a->pos == b->pos &&
           a->started == b->started && a->done == b->done &&
           same(a->last, b->last);
}

/* Walks every item of a decoded chunk: exactly c->count, each inside the
 * items, then the end, and never an error. */
static void walk_items(const struct rpc_stream_chunk *c)
{
    struct rk_slice it = c->items, key;
    struct rpc_record rec;
    uint32_t seen = 0;
    int rc;
    while ((rc = rpc_stream_item_next(&it, &key, &rec)) == 1) {
        check(key.len > 0 && key.len <= RK_MAX_KEY);
        check(key.p >= c->items.p &&
              key.p + key.len <= c->items.p + c->items.len);
        check(rec.value.len <= RK_MAX_VALUE);
        check(rec.value.len == 0 ||
              (rec.value.p >= c->items.p &&
               rec.value.p + rec.value.len <= c->items.p + c->items.len));
        seen++;
        check(seen <= c->count);
    }
    check(rc == 0 && it.len == 0 && seen == c->count);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    struct rk_slice in = RK_SLICE(data, size);
    struct rpc_buf b = RPC_BUF_INIT;
    enum rpc_msg_type t;
    (void)rpc_msg_type_peek(&t, in);

    struct rpc_write w, w2;
    if (rpc_write_decode(&w, in) == 0) {
        check(rpc_write_encode(&b, &w) == 0);
        check(rpc_write_decode(&w2, RK_SLICE(b.data, b.len)) == 0);
        check(w.token == w2.token && w.epoch == w2.epoch &&
              same(w.key, w2.key) && w.rec.ts == w2.rec.ts &&
              w.rec.flags == w2.rec.flags && w.rec.expiry == w2.rec.expiry &&
              same(w.rec.value, w2.rec.value));
        rpc_buf_reset(&b);
    }
    struct rpc_write_ack a, a2;
    if (rpc_write_ack_decode(&a, in) == 0) {
        check(rpc_write_ack_encode(&b, &a) == 0);
        check(rpc_write_ack_decode(&a2, RK_SLICE(b.data, b.len)) == 0);
        check(a.status == a2.status && a.hlc == a2.hlc);
        rpc_buf_reset(&b);
    }
    struct rpc_read r, r2;
    uint64_t peeked = 0;
    int peek_rc = rpc_read_token_peek(&peeked, in);
    if (rpc_read_decode(&r, in) == 0) {
        check(peek_rc == 0 && peeked == r.token); /* what the peek saw */
        check(rpc_read_encode(&b, &r) == 0);
        check(rpc_read_decode(&r2, RK_SLICE(b.data, b.len)) == 0);
        check(r.token == r2.token && r.epoch == r2.epoch &&
              same(r.key, r2.key) && r.digest == r2.digest);
        rpc_buf_reset(&b);
    }
    struct rpc_read_resp rr, rr2;
    if (rpc_read_resp_decode(&rr, in) == 0) {
        check(rpc_read_resp_encode(&b, &rr) == 0);
        check(rpc_read_resp_decode(&rr2, RK_SLICE(b.data, b.len)) == 0);
        check(rr.status == rr2.status && rr.hlc == rr2.hlc &&
              rr.found == rr2.found);
        if (rr.found && rr.is_digest)
            check(rr2.is_digest && rr.dig.ts == rr2.dig.ts &&
                  rr.dig.flags == rr2.dig.flags &&
                  rr.dig.expiry == rr2.dig.expiry &&
                  rr.dig.value_hash == rr2.dig.value_hash);
        if (rr.found && !rr.is_digest)
            check(!rr2.is_digest && rr.rec.ts == rr2.rec.ts &&
                  same(rr.rec.value, rr2.rec.value));
        rpc_buf_reset(&b);
    }
    struct rpc_handshake h, h2;
    if (rpc_handshake_decode(&h, in) == 0) {
        check(rpc_handshake_encode(&b, &h) == 0);
        check(rpc_handshake_decode(&h2, RK_SLICE(b.data, b.len)) == 0);
        check(h.role == h2.role && same(h.cluster, h2.cluster) &&
              same(h.from, h2.from) && same(h.to, h2.to) &&
              memcmp(h.nonce, h2.nonce, sizeof(h.nonce)) == 0 &&
              memcmp(h.peer_nonce, h2.peer_nonce, sizeof(h.nonce)) == 0 &&
              h.time_ms == h2.time_ms &&
              memcmp(h.mac, h2.mac, sizeof(h.mac)) == 0);
        rpc_buf_reset(&b);
        uint8_t key[RPC_KEY_BYTES], nonce[RPC_NONCE_BYTES] = {7};
        rpc_key_derive(key, RK_SLICE("fuzz", 4));
        (void)rpc_handshake_verify(&h, key);
        /* Nothing is accepted without a message of ours to bind it. */
        check(rpc_handshake_check(in, RK_SLICE(NULL, 0), key, h.cluster, NULL,
                                  0) != 0);
        check(rpc_handshake_check(in, in, key, h.cluster, NULL, 0) != 0);
        /* As the peer's message to its addressee: what that node answers
         * (an ANSWER to a HELLO, a PROOF to an ANSWER) decodes, binds the
         * peer's nonce, and an ANSWER passes the check of the HELLO it
         * answers, and its PROOF the check of the ANSWER. */
        uint8_t out[RPC_HANDSHAKE_MAX], out2[RPC_HANDSHAKE_MAX];
        size_t len, len2;
        if (rpc_handshake_make(out, sizeof(out), &len, key, h.cluster, h.to,
                               RK_SLICE(NULL, 0), nonce, 1, in) == 0) {
            check(h.role == RPC_HS_HELLO || h.role == RPC_HS_ANSWER);
            check(rpc_handshake_decode(&h2, RK_SLICE(out, len)) == 0);
            check(same(h2.from, h.to) && same(h2.to, h.from) &&
                  memcmp(h2.peer_nonce, h.nonce, sizeof(h.nonce)) == 0);
            check(rpc_handshake_verify(&h2, key) == 0);
            if (h.role == RPC_HS_HELLO) {
                check(rpc_handshake_check(RK_SLICE(out, len), in, key,
                                          h.cluster, NULL, 0) == 0);
                check(rpc_handshake_make(out2, sizeof(out2), &len2, key,
                                         h.cluster, h.from, RK_SLICE(NULL, 0),
                                         nonce, 2, RK_SLICE(out, len)) == 0);
                check(rpc_handshake_check(RK_SLICE(out2, len2),
                                          RK_SLICE(out, len), key, h.cluster,
                                          NULL, 0) == 0);
            }
        }
    }
    struct rpc_stream_req sq, sq2;
    if (rpc_stream_req_decode(&sq, in) == 0) {
        check(sq.at.last.len <= RPC_STREAM_LAST_MAX);
        check(sq.at.started || sq.at.last.len == 0);
        check(rpc_stream_req_encode(&b, &sq) == 0);
        check(rpc_stream_req_decode(&sq2, RK_SLICE(b.data, b.len)) == 0);
        check(sq.epoch == sq2.epoch && same_pos(&sq.at, &sq2.at) &&
              sq.max_bytes == sq2.max_bytes);
        rpc_buf_reset(&b);
    }
    struct rpc_stream_chunk sc, sc2;
    if (rpc_stream_chunk_decode(&sc, in) == 0) {
        check(sc.status <= 0 && sc.count <= RPC_STREAM_ITEMS_MAX);
        check(sc.next.last.len <= RPC_STREAM_LAST_MAX);
        check(sc.next.started || sc.next.last.len == 0);
        walk_items(&sc);
        check(rpc_stream_chunk_encode(&b, &sc) == 0);
        check(rpc_stream_chunk_decode(&sc2, RK_SLICE(b.data, b.len)) == 0);
        check(sc.status == sc2.status && sc.hlc == sc2.hlc &&
              same_pos(&sc.next, &sc2.next) && sc.count == sc2.count &&
              same(sc.items, sc2.items) && sc.checksum == sc2.checksum);
        walk_items(&sc2);
        rpc_buf_reset(&b);
    }
    if (rpc_stream_push_decode(&sc, in) == 0) {
        check(sc.status <= 0 && sc.count <= RPC_STREAM_ITEMS_MAX);
        check(sc.next.last.len <= RPC_STREAM_LAST_MAX);
        walk_items(&sc);
        check(rpc_stream_push_encode(&b, &sc) == 0);
        check(rpc_stream_push_decode(&sc2, RK_SLICE(b.data, b.len)) == 0);
        check(sc.hlc == sc2.hlc && same_pos(&sc.next, &sc2.next) &&
              sc.count == sc2.count && same(sc.items, sc2.items));
        rpc_buf_reset(&b);
    }
    struct rpc_scan sn, sn2;
    if (rpc_scan_decode(&sn, in) == 0) {
        check(sn.limit >= 1 && sn.limit <= RPC_SCAN_LIMIT_MAX);
        check(rpc_scan_encode(&b, &sn) == 0);
        check(rpc_scan_decode(&sn2, RK_SLICE(b.data, b.len)) == 0);
        check(sn.epoch == sn2.epoch && sn.start == sn2.start &&
              sn.end == sn2.end && sn.limit == sn2.limit);
        rpc_buf_reset(&b);
    }
    struct rpc_scan_resp sr, sr2;
    if (rpc_scan_resp_decode(&sr, in) == 0) {
        check(sr.status <= 0 && sr.count <= RPC_STREAM_ITEMS_MAX);
        struct rpc_stream_chunk as_chunk = {.count = sr.count,
                                            .items = sr.items};
        walk_items(&as_chunk);
        check(rpc_scan_resp_encode(&b, &sr) == 0);
        check(rpc_scan_resp_decode(&sr2, RK_SLICE(b.data, b.len)) == 0);
        check(sr.status == sr2.status && sr.hlc == sr2.hlc &&
              sr.done == sr2.done && sr.next == sr2.next &&
              sr.count == sr2.count && same(sr.items, sr2.items));
        rpc_buf_reset(&b);
    }
    struct rpc_merkle_req mq, mq2;
    if (rpc_merkle_req_decode(&mq, in) == 0) {
        check(mq.depth <= RPC_MERKLE_MAX_DEPTH);
        check(rpc_merkle_req_encode(&b, &mq) == 0);
        check(rpc_merkle_req_decode(&mq2, RK_SLICE(b.data, b.len)) == 0);
        check(mq.epoch == mq2.epoch && mq.start == mq2.start &&
              mq.end == mq2.end && mq.depth == mq2.depth);
        rpc_buf_reset(&b);
    }
    struct rpc_merkle_resp mr, mr2;
    if (rpc_merkle_resp_decode(&mr, in) == 0) {
        check(mr.status <= 0 && mr.depth <= RPC_MERKLE_MAX_DEPTH);
        check(mr.leaves.len == (mr.status ? 0 : (size_t)8 << mr.depth));
        check(rpc_merkle_resp_encode(&b, &mr) == 0);
        check(rpc_merkle_resp_decode(&mr2, RK_SLICE(b.data, b.len)) == 0);
        check(mr.status == mr2.status && mr.hlc == mr2.hlc &&
              mr.depth == mr2.depth && mr.keys == mr2.keys &&
              same(mr.leaves, mr2.leaves));
        rpc_buf_reset(&b);
    }
    /* The input as the items of a chunk (a decoded chunk's items are rarely
     * fuzzed: a changed byte breaks the checksum). The iterator moves
     * forward and stops at the end or on an error; if every item decodes, a
     * chunk of them encodes and decodes. */
    struct rk_slice it = in, key;
    struct rpc_record rec;
    uint32_t n = 0;
    int rc;
    size_t left = it.len;
    while ((rc = rpc_stream_item_next(&it, &key, &rec)) == 1) {
        check(it.len < left && key.len > 0 && key.p >= in.p &&
              key.p + key.len <= in.p + in.len);
        left = it.len;
        n++;
    }
    check(rc == 0 || rc == RK_EPROTO || rc == RK_ETOOLARGE);
    if (rc == 0 && n <= RPC_STREAM_ITEMS_MAX) {
        struct rpc_stream_chunk c = {.count = n, .items = in};
        check(rpc_stream_chunk_encode(&b, &c) == 0);
        check(rpc_stream_chunk_decode(&sc, RK_SLICE(b.data, b.len)) == 0);
        check(sc.count == n && same(sc.items, in));
        walk_items(&sc);
        rpc_buf_reset(&b);
    }
    rpc_buf_free(&b);
    return 0;
}
