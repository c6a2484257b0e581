/*
 * glob.c - glob-style matching as Redis's stringmatchlen (glob.h), without
 * its recursion: a pattern is a run of stars and single-byte tokens (a
 * literal, `?`, an escape or a bracket class), matched left to right; on a
 * mismatch the last star takes one more byte and matching resumes after
 * it. Since every token other than a star matches exactly one byte, going
 * back to the last star alone finds a match whenever there is one.
 */
#include "common/glob.h"

#include <stddef.h>
#include <stdint.h>

static uint8_t lower(uint8_t c)
{
    return c >= 'A' && c <= 'Z' ? (uint8_t)(c + ('a' - 'A')) : c;
}

/* Whether the token at p[i] (not a star) matches byte c; *next is the
 * index after the token. */
static bool token_match(const uint8_t *p,
                        size_t plen,
                        size_t i,
                        uint8_t c,
                        bool nocase,
                        size_t *next)
{
    if (nocase)
        c = lower(c);
    if (p[i] == '?') {
        *next = i + 1;
        return true;
    }
    if (p[i] == '\\' && i + 1 < plen) {
        *next = i + 2;
        return (nocase ? lower(p[i + 1]) : p[i + 1]) == c;
    }
    if (p[i] != '[') {
        *next = i + 1;
        return (nocase ? lower(p[i]) : p[i]) == c;
    }
    i++;
    bool neg = i < plen && p[i] == '^';
    if (neg)
        i++;
    bool match = false;
    for (; i < plen && p[i] != ']'; i++) {
        if (p[i] == '\\' && i + 1 < plen) {
            i++;
            match |= (nocase ? lower(p[i]) : p[i]) == c;
        } else if (i + 2 < plen && p[i + 1] == '-') {
            uint8_t lo = p[i], hi = p[i + 2];
            if (lo > hi) {
                uint8_t t = lo;
                lo = hi;
                hi = t;
            }
            if (nocase) {
                lo = lower(lo);
                hi = lower(hi);
            }
            match |= c >= lo && c <= hi;
            i += 2;
        } else {
            match |= (nocase ? lower(p[i]) : p[i]) == c;
        }
    }
    *next = i < plen ? i + 1 : plen; /* past the `]`, or the open end */
    return match != neg;
}

bool rk_glob_match(struct rk_slice pattern, struct rk_slice s, bool nocase)
{
    const uint8_t *p = pattern.p;
    size_t plen = pattern.len, pi = 0, si = 0;
    size_t star_p = SIZE_MAX, star_s = 0; /* after the last star, its start */
    while (si < s.len) {
        if (pi < plen && p[pi] == '*') {
            while (pi < plen && p[pi] == '*')
                pi++;
            if (pi == plen)
                return true; /* a trailing star takes the rest */
            star_p = pi;
            star_s = si;
            continue;
        }
        size_t next;
        if (pi < plen && token_match(p, plen, pi, s.p[si], nocase, &next)) {
            pi = next;
            si++;
            continue;
        }
        if (star_p == SIZE_MAX)
            return false;
        pi = star_p; /* the last star takes one more byte */
        si = ++star_s;
    }
    while (pi < plen && p[pi] == '*')
        pi++;
    return pi == plen;
}
