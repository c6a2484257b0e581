/*
 * fuzz_client_msg.c - the native client protocol decoders on untrusted bytes.
 *
 * The input is a stream of frames. Each body is decoded both as a request
 * and as a response; whatever decodes must re-encode, and the re-encoding
 * must decode to the same fields (the codecs agree with themselves).
 */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "wire/client_msg.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static void check_req(const uint8_t *body, size_t len)
{
    struct wire_creq q, d;
    struct wire_cbuf b = {0};
    if (wire_creq_decode(&q, body, len) == 0) {
        if (wire_creq_encode(&b, &q) != 0)
            abort();
        if (wire_creq_decode(&d, b.p + 4, b.len - 4) != 0)
            abort();
        if (d.id != q.id || d.op != q.op || d.has != q.has ||
            d.key.len != q.key.len || d.value.len != q.value.len ||
            d.nkeys != q.nkeys || d.nargs != q.nargs || d.cursor != q.cursor ||
            d.count != q.count || d.match.len != q.match.len)
            abort();
        if (q.key.len && memcmp(d.key.p, q.key.p, q.key.len) != 0)
            abort();
        if (q.value.len && memcmp(d.value.p, q.value.p, q.value.len) != 0)
            abort();
        wire_creq_clear(&d);
    }
    wire_creq_clear(&q);
    wire_cbuf_release(&b);
}

static void check_resp(const uint8_t *body, size_t len)
{
    struct wire_cresp r, d;
    struct wire_cbuf b = {0};
    if (wire_cresp_decode(&r, body, len) == 0) {
        int rc = wire_cresp_encode(&b, &r);
        if (rc != 0)
            abort();
        if (wire_cresp_decode(&d, b.p + 4, b.len - 4) != 0)
            abort();
        if (d.id != r.id || d.op != r.op || d.has != r.has ||
            d.nvalues != r.nvalues || d.nnodes != r.nnodes ||
            d.ntokens != r.ntokens || d.nendpoints != r.nendpoints ||
            d.cursor != r.cursor || d.nkeys != r.nkeys)
            abort();
        for (size_t i = 0; i < r.nnodes; i++)
            if (d.nodes[i].silent_ms != r.nodes[i].silent_ms ||
                d.nodes[i].load != r.nodes[i].load)
                abort();
        if (d.value.len != r.value.len ||
            (r.value.len && memcmp(d.value.p, r.value.p, r.value.len) != 0))
            abort();
        /* an unknown error name re-encodes as INTERNAL */
        if ((d.err == 0) != (r.err == 0))
            abort();
        wire_cresp_clear(&d);
    }
    wire_cresp_clear(&r);
    wire_cbuf_release(&b);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    while (size > 0) {
        struct rk_slice body;
        size_t used;
        if (wire_cframe_parse(&body, &used, data, size) != 0 || used == 0) {
            /* not a whole frame: try the rest as one bare body */
            check_req(data, size);
            check_resp(data, size);
            return 0;
        }
        check_req(body.p, body.len);
        check_resp(body.p, body.len);
        data += used;
        size -= used;
    }
    return 0;
}
