/*
 * fuzz_rpc_msg.c - every internode RPC decoder on untrusted bytes. Whatever
 * decodes must re-encode and decode to the same message (the codec is a
 * bijection on what it accepts, up to skipped extra fields).
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
    if (rpc_read_decode(&r, in) == 0) {
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
        check(same(h.cluster, h2.cluster) && same(h.node, h2.node) &&
              memcmp(h.mac, h2.mac, sizeof(h.mac)) == 0);
        uint8_t key[RPC_KEY_BYTES];
        rpc_key_derive(key, RK_SLICE("fuzz", 4));
        (void)rpc_handshake_verify(&h, key);
        (void)rpc_handshake_check(in, RK_SLICE(NULL, 0), key, h.cluster, NULL,
                                  0);
    }
    rpc_buf_free(&b);
    return 0;
}
