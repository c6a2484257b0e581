/*
 * hist.h - the benchmark clients' latency histogram and random numbers
 * (ringkv-load, ringkv-ycsb), one copy for both.
 *
 * The histogram is log-linear (HdrHistogram's bucket layout): values below
 * 2 * H_SUB each have a bucket; above, every power of two is cut into
 * H_SUB linear sub-buckets, so a percentile is within 1/(2 * H_SUB) of
 * the value (under 0.4% with 128). A bucket reports its middle, never more
 * than the largest value seen. Fixed size, no allocation: a thread's own
 * histograms are merged at the end.
 */
#ifndef RINGKV_BENCH_HIST_H
#define RINGKV_BENCH_HIST_H

#include <math.h>
#include <stdint.h>

#define H_SUB_BITS 7
#define H_SUB      (1u << H_SUB_BITS) /* linear sub-buckets per octave */
#define H_BUCKETS  (2 * H_SUB + (64 - H_SUB_BITS - 1) * H_SUB)

struct hist {
    uint64_t n[H_BUCKETS];
    uint64_t count, max, sum;
};

static inline unsigned hist_index(uint64_t v)
{
    if (v < 2 * H_SUB)
        return (unsigned)v;
    unsigned e = 63 - (unsigned)__builtin_clzll(v); /* >= H_SUB_BITS + 1 */
    unsigned shift = e - H_SUB_BITS;
    return 2 * H_SUB + (e - H_SUB_BITS - 1) * H_SUB +
           (unsigned)((v >> shift) - H_SUB);
}

/* The middle of bucket i's values (exact below 2 * H_SUB). */
static inline uint64_t hist_value(unsigned i)
{
    if (i < 2 * H_SUB)
        return i;
    unsigned e = (i - 2 * H_SUB) / H_SUB + H_SUB_BITS + 1;
    uint64_t sub = (i - 2 * H_SUB) % H_SUB + H_SUB;
    unsigned shift = e - H_SUB_BITS;
    uint64_t lo = sub << shift, hi = ((sub + 1) << shift) - 1;
    return lo + (hi - lo) / 2;
}

static inline void hist_add(struct hist *h, uint64_t v)
{
    h->n[hist_index(v)]++;
    h->count++;
    h->sum += v;
    if (v > h->max)
        h->max = v;
}

static inline void hist_merge(struct hist *into, const struct hist *h)
{
    for (unsigned i = 0; i < H_BUCKETS; i++)
        into->n[i] += h->n[i];
    into->count += h->count;
    into->sum += h->sum;
    if (h->max > into->max)
        into->max = h->max;
}

/* The p-th percentile (0 < p <= 100) of what was added; 0 if nothing. */
static inline uint64_t hist_pct(const struct hist *h, double p)
{
    if (h->count == 0)
        return 0;
    uint64_t want = (uint64_t)ceil(p / 100.0 * (double)h->count);
    if (want == 0)
        want = 1;
    uint64_t seen = 0;
    for (unsigned i = 0; i < H_BUCKETS; i++) {
        seen += h->n[i];
        if (seen >= want) {
            uint64_t v = hist_value(i);
            return v > h->max ? h->max : v;
        }
    }
    return h->max;
}

/* splitmix64: a thread's own stream from its seed. */
static inline uint64_t rng_next(uint64_t *s)
{
    uint64_t z = (*s += 0x9e3779b97f4a7c15ull);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    return z ^ (z >> 31);
}

/* Uniform in [0, 1). */
static inline double rng_unit(uint64_t *s)
{
    return (double)(rng_next(s) >> 11) * (1.0 / 9007199254740992.0);
}

#endif
