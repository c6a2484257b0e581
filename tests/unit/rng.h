/*
 * rng.h - the unit tests' seeded PRNG (splitmix64): the random cases of a
 * property test come from one 64-bit seed, printed when a case fails, so
 * the failure replays. Header-only: each runner is one file.
 */
#ifndef TESTS_UNIT_RNG_H
#define TESTS_UNIT_RNG_H

#include <stdint.h>

/* The next number of the sequence seeded by *s (which it advances). */
static inline uint64_t rng_next(uint64_t *s)
{
    uint64_t z = (*s += 0x9e3779b97f4a7c15ULL);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
    return z ^ (z >> 31);
}

#endif
