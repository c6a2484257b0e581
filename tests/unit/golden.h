/*
 * golden.h - the golden-bytes check the wire tests share: long encodings
 * are pinned by their length and XXH3-64, and a mismatch prints both, so a
 * deliberate change of format can read its new vector off the failure.
 */
#ifndef RK_TESTS_GOLDEN_H
#define RK_TESTS_GOLDEN_H

#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#include <check.h>
#include <xxhash.h>

static inline void golden_digest_check(const void *p,
                                       size_t len,
                                       size_t want_len,
                                       uint64_t want_hash,
                                       const char *what)
{
    uint64_t h = XXH3_64bits(p, len);
    if (len != want_len || h != want_hash)
        fprintf(stderr, "%s: got %zu bytes, XXH3 0x%016llx\n", what, len,
                (unsigned long long)h);
    ck_assert_uint_eq(len, want_len);
    ck_assert_uint_eq(h, want_hash);
}

#endif
