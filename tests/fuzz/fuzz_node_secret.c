/*
 * fuzz_node_secret.c - the reader of a configured password (requirepass,
 * admin_password, or their files: node/users.h) on arbitrary bytes: it
 * must return 0 or RK_ECONFIG with a message, never crash nor read past
 * the bytes; a password it takes as itself must verify against the same
 * bytes and not against them one byte shorter, and a digest it takes must
 * be the one written ("sha256:" and 64 hex digits).
 */
#include <ctype.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/rk.h"
#include "node/users.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    /* a copy of exactly size bytes, so ASan sees any read past them */
    char *text = calloc(1, size ? size : 1);
    if (!text)
        return 0;
    if (size)
        memcpy(text, data, size);
    struct node_secret s;
    char err[200];
    err[0] = '\0';
    int rc = node_secret_parse(&s, text, size, err, sizeof(err));
    if (rc != 0 && (rc != RK_ECONFIG || !err[0] || s.set))
        abort();
    const size_t plen = strlen(NODE_SECRET_PREFIX);
    bool digest = size >= plen && memcmp(text, NODE_SECRET_PREFIX, plen) == 0;
    if (rc == 0 && !digest) {
        if (!node_secret_verify(&s, data, size))
            abort();
        if (node_secret_verify(&s, data, size - 1))
            abort();
    }
    if (rc == 0 && digest) {
        char hex[65];
        for (size_t i = 0; i < 32; i++)
            snprintf(hex + 2 * i, 3, "%02x", s.sha256[i]);
        for (size_t i = 0; i < 64; i++)
            if (hex[i] != tolower((unsigned char)text[plen + i]))
                abort();
    }
    free(text);
    return 0;
}
