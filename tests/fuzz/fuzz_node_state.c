/*
 * fuzz_node_state.c - the reader of a node's identity file (node.state,
 * storage/node_state.c) on arbitrary bytes: it must return 0 or an error, never
 * crash, and a state it accepts must format to text that reads back to the
 * same state (compared as the formatted text of both).
 */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "storage/node_state.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    static struct node_state a, b; /* 8 KB of tokens each */
    if (node_state_parse(&a, (const char *)data, size) != 0)
        return 0;
    char *t1 = node_state_format(&a);
    if (!t1)
        return 0;
    if (node_state_parse(&b, t1, strlen(t1)) != 0) {
        fprintf(stderr, "fuzz_node_state: its own text is refused:\n%s", t1);
        abort();
    }
    char *t2 = node_state_format(&b);
    if (t2 && strcmp(t1, t2) != 0) {
        fprintf(stderr, "fuzz_node_state: differs after a round trip:\n%s\n%s",
                t1, t2);
        abort();
    }
    free(t1);
    free(t2);
    return 0;
}
