/*
 * fuzz_frame.c - net/'s read path on untrusted bytes: the read buffer that
 * every connection uses, fed in pieces whose sizes come from the input,
 * must yield exactly the frames a one-shot parse of the whole stream finds
 * (same bytes, same order, same oversize verdict), and the RPC header parser
 * must accept or refuse each frame without reading out of bounds.
 *
 * Input: byte 0 picks max_frame (0..255 -> up to 64 KiB), byte 1 seeds the
 * piece sizes, the rest is the stream.
 */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "net/net_internal.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static void check(int cond)
{
    if (!cond)
        abort();
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (size < 2)
        return 0;
    size_t max_frame = (size_t)data[0] * 257;
    unsigned seed = data[1];
    const uint8_t *s = data + 2;
    size_t n = size - 2;

    struct net__rbuf r;
    memset(&r, 0, sizeof(r));
    r.max_frame = max_frame;
    size_t fed = 0, ref_off = 0;
    int ref_rc = 0;
    while (fed < n) {
        uint8_t *p;
        size_t cap;
        if (net__rbuf_reserve(&r, &p, &cap) != 0)
            break;
        seed = seed * 1103515245u + 12345u;
        size_t piece = 1 + (seed >> 16) % 97;
        if (piece > cap)
            piece = cap;
        if (piece > n - fed)
            piece = n - fed;
        memcpy(p, s + fed, piece);
        net__rbuf_commit(&r, piece);
        fed += piece;
        struct rk_slice f;
        int rc;
        while ((rc = net__rbuf_next(&r, &f)) == 1) {
            /* The reference: a one-shot parse of the whole stream. */
            struct rk_slice g;
            size_t used;
            ref_rc =
                net_frame_next(&g, &used, s + ref_off, n - ref_off, max_frame);
            check(ref_rc == 1 && g.len == f.len &&
                  memcmp(g.p, f.p, f.len) == 0);
            ref_off += used;
            uint8_t kind;
            uint64_t id;
            struct rk_slice pl;
            if (net_rpc_parse(&kind, &id, &pl, f) == 0)
                check(pl.len + NET_RPC_HDR == f.len);
        }
        if (rc < 0) {
            struct rk_slice g;
            size_t used;
            check(rc == RK_ETOOLARGE);
            check(net_frame_next(&g, &used, s + ref_off, n - ref_off,
                                 max_frame) == RK_ETOOLARGE);
            net__rbuf_free(&r);
            return 0;
        }
        net__rbuf_compact(&r);
    }
    /* Whatever is left is an incomplete frame for the reference too. */
    struct rk_slice g;
    size_t used;
    check(net_frame_next(&g, &used, s + ref_off, n - ref_off, max_frame) != 1);
    net__rbuf_free(&r);
    return 0;
}
