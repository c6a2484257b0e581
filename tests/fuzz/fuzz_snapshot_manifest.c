/*
 * fuzz_snapshot_manifest.c - the reader of a snapshot's manifest
 * (storage/snapshot_manifest.c), which `ringkv listsnapshots` and a restore
 * read from disk, on arbitrary bytes: it must return 0 or an error, never
 * crash, and a manifest it accepts must format to text that reads back to
 * the same manifest (compared as the formatted text of both).
 */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "storage/snapshot_manifest.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    struct snapshot_manifest a, b;
    if (snapshot_manifest_parse(&a, (const char *)data, size) != 0)
        return 0;
    char *t1 = snapshot_manifest_format(&a);
    snapshot_manifest_clear(&a);
    if (!t1)
        return 0;
    if (snapshot_manifest_parse(&b, t1, strlen(t1)) != 0) {
        fprintf(stderr, "fuzz_snapshot_manifest: its own text is refused:\n%s",
                t1);
        abort();
    }
    char *t2 = snapshot_manifest_format(&b);
    snapshot_manifest_clear(&b);
    if (t2 && strcmp(t1, t2) != 0) {
        fprintf(stderr,
                "fuzz_snapshot_manifest: differs after a round trip:\n%s\n%s",
                t1, t2);
        abort();
    }
    free(t1);
    free(t2);
    return 0;
}
