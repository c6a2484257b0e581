/*
 * fuzz_http_auth.c - the metrics port's reader of a request head's
 * Authorization header (net/http.h http_basic_auth_parse) on arbitrary
 * bytes: it must return 0 or -1, never crash nor read past the head, and
 * what it returns must lie inside its buffer: the user, a ':' and the
 * password, filling exactly the bytes it decoded.
 */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "net/http.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    /* a copy of exactly size bytes, so ASan sees any read past them */
    char *head = malloc(size ? size : 1);
    if (!head)
        return 0;
    if (size)
        memcpy(head, data, size);
    uint8_t buf[HTTP_BASIC_AUTH_MAX];
    const uint8_t *user = NULL, *pass = NULL;
    size_t ulen = 0, plen = 0;
    int rc = http_basic_auth_parse(head, size, buf, sizeof(buf), &user, &ulen,
                                   &pass, &plen);
    if (rc != 0 && rc != -1)
        abort();
    if (rc == 0 && (user != buf || pass != buf + ulen + 1 ||
                    ulen + 1 + plen > sizeof(buf) || buf[ulen] != ':' ||
                    memchr(user, ':', ulen) != NULL))
        abort();
    free(head);
    return 0;
}
