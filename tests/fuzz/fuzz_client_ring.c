/*
 * fuzz_client_ring.c - a token-aware client's reading of RING answers on
 * untrusted bytes: each frame is decoded as a response and, whatever it
 * holds, handed to ringkv__ring_build (client/route.c), which must refuse
 * what is not a consistent ring (no rows, no replication, tokens of a node
 * without a row, duplicate names, a NUL in a name, a fingerprint that
 * differs) and otherwise return a ring with an address per node.
 */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "client/ringkv_internal.h"
#include "common/rk.h"
#include "ring/ring.h"
#include "wire/client_msg.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static void check_ring(const uint8_t *body, size_t len)
{
    struct wire_cresp r;
    if (wire_cresp_decode(&r, body, len) == 0) {
        ring *rg = NULL;
        char **addrs = NULL;
        const char *why = NULL;
        int rc = ringkv__ring_build(&rg, &addrs, &r, &why);
        if (rc == 0) {
            size_t n = ring_node_count(rg);
            if (n != r.nnodes || ring_fingerprint(rg) != r.fprint)
                abort();
            if (ring_token_count(rg) > 0) {
                uint32_t reps[RING_MAX_REPLICAS];
                size_t k = ring_replicas(rg, 12345, reps, RING_MAX_REPLICAS);
                for (size_t i = 0; i < k && i < RING_MAX_REPLICAS; i++)
                    if (reps[i] >= n || addrs[reps[i]] == NULL)
                        abort();
            }
            ringkv__addrs_free(addrs, n);
            ring_free(rg);
        } else if (rg != NULL || addrs != NULL || why == NULL) {
            abort();
        }
    }
    wire_cresp_clear(&r);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    while (size > 0) {
        struct rk_slice body;
        size_t used;
        if (wire_cframe_parse(&body, &used, data, size) != 0 || used == 0) {
            check_ring(data, size);
            return 0;
        }
        check_ring(body.p, body.len);
        data += used;
        size -= used;
    }
    return 0;
}
