/*
 * fuzz_repair_sched.c - the reader of the repair schedule's records (kept
 * in the store's system env, repair/schedule.c) on arbitrary bytes: it
 * must return 0 or an error, never crash, and records it accepts must
 * encode back to the same bytes.
 */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "repair/repair.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    struct repair_arc_state *a = NULL;
    size_t n = 0;
    if (repair_sched_decode(&a, &n, data, size) != 0)
        return 0;
    uint8_t *b = NULL;
    size_t len = 0;
    if (repair_sched_encode(&b, &len, a, n) == 0 &&
        (len != size || memcmp(b, data, size) != 0)) {
        fprintf(stderr, "fuzz_repair_sched: differs after a round trip\n");
        abort();
    }
    free(b);
    free(a);
    return 0;
}
