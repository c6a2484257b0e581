/*
 * fuzz_record.c - the record decoder on arbitrary bytes (records come from
 * disk and from peers). A decoded record must re-encode to the same bytes,
 * compare equal to itself, and its value must lie inside the input; the
 * timestamp read from the header alone (store__rec_ts) must be the
 * decoded one.
 */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "storage/store.h"
#include "storage/store_internal.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    struct store_record r;
    uint64_t ts = store__rec_ts(RK_SLICE(data, size));
    if (store_record_decode(&r, data, size) != 0)
        return 0;
    if (ts != r.ts)
        abort();
    if (r.value.len > 0 &&
        (r.value.p < data || r.value.p + r.value.len > data + size))
        abort();
    if (store_record_cmp(&r, &r) != 0)
        abort();
    (void)store_record_live(&r, 0);
    uint8_t *out = malloc(size ? size : 1);
    size_t n = 0;
    if (out == NULL)
        return 0;
    if (store_record_encode(out, size, &n, &r) != 0 || n != size ||
        memcmp(out, data, size) != 0)
        abort();
    free(out);
    return 0;
}
