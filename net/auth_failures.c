/*
 * auth_failures.c - the failed authentications of each source address
 * and the delay of their answers (auth_failures.h): a fixed table of
 * 4-way sets, the least recently failing address of a set making room.
 */
#include "net/auth_failures.h"

#include <arpa/inet.h>
#include <stdbool.h>
#include <string.h>

/* The source addr is: 4 bytes of IPv4 (also mapped in IPv6), 8 of an
 * IPv6 /64, else the text. */
struct key {
    uint8_t b[NET_AUTH_KEY_MAX];
    uint8_t len;
};

static struct key key_of(const char *addr)
{
    static const uint8_t mapped[12] = {0, 0, 0, 0, 0,    0,
                                       0, 0, 0, 0, 0xff, 0xff};
    struct key k = {.len = 0};
    uint8_t a6[16];
    if (inet_pton(AF_INET, addr, k.b) == 1) {
        k.len = 4;
    } else if (inet_pton(AF_INET6, addr, a6) == 1) {
        bool v4 = memcmp(a6, mapped, sizeof(mapped)) == 0;
        k.len = v4 ? 4 : 9;
        memcpy(k.b, v4 ? a6 + 12 : a6, v4 ? 4 : 8);
        k.b[8] = 6; /* apart from any 4-byte or text key */
    } else {
        size_t l = strlen(addr);
        k.len = (uint8_t)(l < NET_AUTH_KEY_MAX - 1 ? l : NET_AUTH_KEY_MAX - 1);
        memcpy(k.b, addr, k.len);
        k.b[k.len++] = 't';
    }
    return k;
}

void net_auth_failures_init(struct net_auth_failures *t, uint32_t max_ms)
{
    memset(t, 0, sizeof(*t));
    t->max_ms = max_ms;
}

uint32_t net_auth_failures_delay(const struct net_auth_failures *t, uint32_t k)
{
    uint32_t d = NET_AUTH_DELAY_MIN_MS;
    while (k > 1 && d < t->max_ms) {
        d *= 2;
        k--;
    }
    return d < t->max_ms ? d : t->max_ms;
}

/* FNV-1a: the source's set. */
static size_t set_of(const struct key *k)
{
    uint64_t h = 14695981039346656037ull;
    for (size_t i = 0; i < k->len; i++)
        h = (h ^ k->b[i]) * 1099511628211ull;
    return (size_t)(h % NET_AUTH_FAILURES_SETS) * NET_AUTH_FAILURES_WAYS;
}

/* An entry that holds nothing to remember at now: free, or its last
 * failure NET_AUTH_FORGET_MS ago with no answer still waiting. */
static bool stale(const struct auth_source *e, uint64_t now)
{
    return e->klen == 0 ||
           (now >= e->last_ms + NET_AUTH_FORGET_MS && now >= e->next_ms);
}

static struct auth_source *
find(const struct net_auth_failures *t, const struct key *k, uint64_t now)
{
    size_t s = set_of(k);
    for (size_t i = s; i < s + NET_AUTH_FAILURES_WAYS; i++) {
        const struct auth_source *e = &t->e[i];
        if (!stale(e, now) && e->klen == k->len &&
            memcmp(e->key, k->b, k->len) == 0)
            return (struct auth_source *)e;
    }
    return NULL;
}

/* A fresh entry for k in its set: a stale one, else the one that failed
 * least recently (evicted). */
static struct auth_source *
claim(struct net_auth_failures *t, const struct key *k, uint64_t now)
{
    size_t s = set_of(k);
    struct auth_source *victim = NULL;
    for (size_t i = s; i < s + NET_AUTH_FAILURES_WAYS && !victim; i++)
        if (stale(&t->e[i], now))
            victim = &t->e[i];
    if (!victim) {
        victim = &t->e[s];
        for (size_t i = s + 1; i < s + NET_AUTH_FAILURES_WAYS; i++)
            if (t->e[i].last_ms < victim->last_ms)
                victim = &t->e[i];
        t->evictions++;
    }
    memset(victim, 0, sizeof(*victim));
    memcpy(victim->key, k->b, k->len);
    victim->klen = k->len;
    return victim;
}

uint32_t net_auth_failures_fail(struct net_auth_failures *t,
                                const char *addr,
                                uint64_t now)
{
    struct key k = key_of(addr);
    struct auth_source *e = find(t, &k, now);
    if (!e)
        e = claim(t, &k, now);
    if (e->fails < UINT32_MAX)
        e->fails++;
    uint64_t after = e->next_ms > now ? e->next_ms : now;
    e->next_ms = after + net_auth_failures_delay(t, e->fails);
    e->last_ms = now;
    uint64_t wait = e->next_ms - now;
    return wait < UINT32_MAX ? (uint32_t)wait : UINT32_MAX;
}

uint32_t net_auth_failures_ok(struct net_auth_failures *t,
                              const char *addr,
                              uint64_t now)
{
    struct key k = key_of(addr);
    struct auth_source *e = find(t, &k, now);
    if (!e)
        return 0;
    uint64_t wait = e->next_ms > now ? e->next_ms - now : 0;
    memset(e, 0, sizeof(*e));
    return wait < UINT32_MAX ? (uint32_t)wait : UINT32_MAX;
}

uint32_t net_auth_failures_count(const struct net_auth_failures *t,
                                 const char *addr,
                                 uint64_t now)
{
    struct key k = key_of(addr);
    const struct auth_source *e = find(t, &k, now);
    return e ? e->fails : 0;
}

size_t net_auth_failures_sources(const struct net_auth_failures *t,
                                 uint64_t now)
{
    size_t n = 0;
    for (size_t i = 0; i < NET_AUTH_FAILURES_SLOTS; i++)
        n += !stale(&t->e[i], now);
    return n;
}
