/*
 * fuzz_glob.c - the glob matcher (common/glob.h) on untrusted patterns:
 * SCAN's MATCH comes from clients. Input: pattern, a NUL byte, the string
 * (no NUL: the pattern against itself). Never crashes or reads out of
 * bounds; a match that respects case also matches without (patterns
 * without a class); a literal
 * prefix pattern ("abc*") answers as a prefix test; "*" + p + "*" matches
 * whatever p matches.
 */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "common/glob.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static void check(int cond)
{
    if (!cond)
        abort();
}

/* Whether p is "prefix*" with a literal prefix (no `*?[\` in it): then
 * *len is its length. */
static bool literal_prefix(struct rk_slice p, size_t *len)
{
    if (p.len == 0 || p.p[p.len - 1] != '*')
        return false;
    for (size_t i = 0; i + 1 < p.len; i++)
        if (memchr("*?[\\", p.p[i], 4))
            return false;
    *len = p.len - 1;
    return true;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (size > 4096)
        return 0;
    const uint8_t *nul = memchr(data, 0, size);
    size_t plen = nul ? (size_t)(nul - data) : size;
    struct rk_slice p = RK_SLICE(data, plen);
    struct rk_slice s =
        nul ? RK_SLICE(nul + 1, size - plen - 1) : RK_SLICE(data, size);
    /* copies of their exact size: ASan sees a read past either */
    uint8_t *pc = malloc(p.len ? p.len : 1), *sc = malloc(s.len ? s.len : 1);
    uint8_t *wide = malloc(p.len + 2);
    if (!pc || !sc || !wide)
        abort();
    memcpy(pc, p.p, p.len);
    memcpy(sc, s.p, s.len);
    p = RK_SLICE(pc, p.len);
    s = RK_SLICE(sc, s.len);
    bool exact = rk_glob_match(p, s, false);
    bool nocase = rk_glob_match(p, s, true);
    bool has_class = memchr(p.p, '[', p.len) != NULL;
    /* (a range lowered for nocase may lose bytes: [A-z] holds '_') */
    check(has_class || !exact || nocase);
    size_t pre;
    if (literal_prefix(p, &pre))
        check(exact == (s.len >= pre && memcmp(s.p, p.p, pre) == 0));
    /* "*" p "*": a pattern ending in a backslash would escape the star
     * after it, and one with a class left open would take it in: only
     * patterns with neither */
    if (!memchr(p.p, '[', p.len) && (p.len == 0 || p.p[p.len - 1] != '\\')) {
        wide[0] = '*';
        memcpy(wide + 1, p.p, p.len);
        wide[p.len + 1] = '*';
        if (exact)
            check(rk_glob_match(RK_SLICE(wide, p.len + 2), s, false));
    }
    free(pc);
    free(sc);
    free(wide);
    return 0;
}
