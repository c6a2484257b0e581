/*
 * cache.c - the read cache: range envs' records of recently read keys
 * (store_internal.h, docs/storage.md "The read cache").
 *
 * A read the memtable cannot answer alone descends its env's B-tree: a
 * binary search of three or four pages, each step a cache miss, the
 * dearest part of a GET on every replica once the memtable has been
 * applied (issue 30). This table keeps what such a read found -- the
 * record, or that there was none -- keyed by (token, user key) like the
 * memtable, with the id of the range it was read from (store__range
 * cache_id): an entry whose range has another id now (dropped, split,
 * purged in place) is dead. The store merges an apply's writes into their
 * keys' entries (store__cache_merge), drops those of a direct commit
 * (store__cache_del), and takes no entry while an env changes.
 *
 * Bounded by bytes: entries, their chain links and the bucket array count;
 * past the budget the CLOCK hand evicts entries not read since it last
 * passed them. Pure memory, no locks: the store holds memmu around every
 * call, as for the memtable.
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "storage/store.h"
#include "storage/store_internal.h"

struct store__cent {
    struct store__cent *next;
    uint64_t token;
    uint64_t rid; /* the range's cache_id when it was read */
    uint32_t klen;
    uint32_t rlen;  /* STORE__CACHE_ABSENT: the env had no record */
    uint32_t slot;  /* index in the clock ring */
    bool ref;       /* read since the hand last passed it */
    uint8_t data[]; /* key || record */
};

struct store__cache {
    struct store__cent **tab;
    size_t mask;               /* buckets - 1 (a power of two) */
    struct store__cent **ring; /* every entry, for the clock hand */
    size_t n, ring_cap, hand;
    size_t bytes, budget;
    uint64_t hits, misses;
};

#define STORE__CACHE_ABSENT UINT32_MAX
#define CACHE_BUCKETS0      1024u

static size_t cent_bytes(const struct store__cent *e)
{
    return sizeof(*e) + sizeof(e) /* its ring slot */ + e->klen +
           (e->rlen == STORE__CACHE_ABSENT ? 0 : e->rlen);
}

int store__cache_new(store__cache **out, size_t budget)
{
    store__cache *c = calloc(1, sizeof(*c));
    if (c == NULL)
        return -ENOMEM;
    c->tab = calloc(CACHE_BUCKETS0, sizeof(*c->tab));
    if (c->tab == NULL) {
        free(c);
        return -ENOMEM;
    }
    c->mask = CACHE_BUCKETS0 - 1;
    c->budget = budget;
    c->bytes = CACHE_BUCKETS0 * sizeof(*c->tab);
    *out = c;
    return 0;
}

void store__cache_free(store__cache *c)
{
    if (c == NULL)
        return;
    for (size_t i = 0; i < c->n; i++)
        free(c->ring[i]);
    free(c->ring);
    free(c->tab);
    free(c);
}

static struct store__cent **
cache_slot(const store__cache *c, uint64_t token, struct rk_slice key)
{
    struct store__cent **pp = &c->tab[token & c->mask];
    for (; *pp != NULL; pp = &(*pp)->next) {
        const struct store__cent *e = *pp;
        if (e->token == token && e->klen == key.len &&
            memcmp(e->data, key.p, key.len) == 0)
            break;
    }
    return pp;
}

/* Unlink the entry at *pp (its chain link) and free it. */
static void cache_drop(store__cache *c, struct store__cent **pp)
{
    struct store__cent *e = *pp;
    *pp = e->next;
    struct store__cent *last = c->ring[--c->n];
    c->ring[e->slot] = last;
    last->slot = e->slot;
    c->bytes -= cent_bytes(e);
    free(e);
}

/* Evict entries by the clock until `need` more bytes fit (or none is
 * left). */
static void cache_evict(store__cache *c, size_t need)
{
    /* two turns at most: the first clears every ref bit it passes */
    for (size_t steps = 2 * c->n + 1;
         c->n > 0 && c->bytes + need > c->budget && steps > 0; steps--) {
        if (c->hand >= c->n)
            c->hand = 0;
        struct store__cent *e = c->ring[c->hand];
        if (e->ref) {
            e->ref = false;
            c->hand++;
            continue;
        }
        /* the ring's last entry takes its slot: the hand stays */
        cache_drop(c,
                   cache_slot(c, e->token, RK_SLICE(e->data, (size_t)e->klen)));
    }
}

/* Double the buckets while they would take at most an eighth of the
 * budget (a failed allocation just leaves chains longer). */
static void cache_grow(store__cache *c)
{
    size_t nb = (c->mask + 1) * 2, add = (c->mask + 1) * sizeof(*c->tab);
    if (nb * sizeof(*c->tab) > c->budget / 8)
        return;
    cache_evict(c, add);
    struct store__cent **tab = calloc(nb, sizeof(*tab));
    if (tab == NULL)
        return;
    for (size_t i = 0; i < c->n; i++) {
        struct store__cent *e = c->ring[i];
        size_t b = e->token & (nb - 1);
        e->next = tab[b];
        tab[b] = e;
    }
    free(c->tab);
    c->tab = tab;
    c->mask = nb - 1;
    c->bytes += add;
}

int store__cache_get(struct rk_slice *out_rec,
                     bool *out_absent,
                     store__cache *c,
                     uint64_t token,
                     uint64_t rid,
                     struct rk_slice key)
{
    struct store__cent **pp = cache_slot(c, token, key);
    struct store__cent *e = *pp;
    if (e != NULL && e->rid != rid) { /* read from a range since gone */
        cache_drop(c, pp);
        e = NULL;
    }
    if (e == NULL) {
        c->misses++;
        return RK_ENOTFOUND;
    }
    c->hits++;
    e->ref = true;
    *out_absent = e->rlen == STORE__CACHE_ABSENT;
    *out_rec = *out_absent ? RK_SLICE(NULL, 0)
                           : RK_SLICE(e->data + e->klen, (size_t)e->rlen);
    return 0;
}

void store__cache_put(store__cache *c,
                      uint64_t token,
                      uint64_t rid,
                      struct rk_slice key,
                      const struct rk_slice *rec)
{
    size_t rlen = rec ? rec->len : 0;
    if (rlen > STORE__CACHE_REC_MAX || key.len > UINT32_MAX)
        return;
    struct store__cent **pp = cache_slot(c, token, key);
    if (*pp != NULL)
        cache_drop(c, pp);
    size_t sz = sizeof(struct store__cent) + sizeof(void *) + key.len + rlen;
    if (sz > c->budget / 16)
        return;
    if (c->n >= c->ring_cap) {
        size_t cap = c->ring_cap ? c->ring_cap * 2 : 1024;
        struct store__cent **r = realloc(c->ring, cap * sizeof(*r));
        if (r == NULL)
            return;
        c->ring = r;
        c->ring_cap = cap;
    }
    if (c->n >= c->mask + 1)
        cache_grow(c);
    cache_evict(c, sz);
    if (c->bytes + sz > c->budget)
        return;
    struct store__cent *e = malloc(sizeof(*e) + key.len + rlen);
    if (e == NULL)
        return;
    e->token = token;
    e->rid = rid;
    e->klen = (uint32_t)key.len;
    e->rlen = rec ? (uint32_t)rlen : STORE__CACHE_ABSENT;
    e->ref = false;
    memcpy(e->data, key.p, key.len);
    if (rlen)
        memcpy(e->data + key.len, rec->p, rlen);
    pp = &c->tab[token & c->mask]; /* the table may have grown */
    e->next = *pp;
    *pp = e;
    e->slot = (uint32_t)c->n;
    c->ring[c->n++] = e;
    c->bytes += sz;
}

void store__cache_merge(store__cache *c,
                        uint64_t token,
                        struct rk_slice key,
                        struct rk_slice rec)
{
    struct store__cent **pp = cache_slot(c, token, key);
    struct store__cent *e = *pp;
    if (e == NULL)
        return;
    if (e->rlen != STORE__CACHE_ABSENT) {
        struct store_record a, b;
        if (store_record_decode(&a, e->data + e->klen, e->rlen) != 0 ||
            store_record_decode(&b, rec.p, rec.len) != 0) {
            cache_drop(c, pp);
            return;
        }
        if (store_record_cmp(&b, &a) <= 0)
            return; /* the env keeps its record: so does the entry */
        if (e->rlen == rec.len) { /* the same size: in place */
            memcpy(e->data + e->klen, rec.p, rec.len);
            return;
        }
    }
    uint64_t rid = e->rid;
    cache_drop(c, pp);
    store__cache_put(c, token, rid, key, &rec);
}

void store__cache_del(store__cache *c, uint64_t token, struct rk_slice key)
{
    struct store__cent **pp = cache_slot(c, token, key);
    if (*pp != NULL)
        cache_drop(c, pp);
}

void store__cache_prefetch(const store__cache *c, uint64_t token)
{
    const char *e = (const char *)c->tab[token & c->mask];
    if (e != NULL) { /* a prefetch past the entry's end faults nothing */
        __builtin_prefetch(e);
        __builtin_prefetch(e + 64);
        __builtin_prefetch(e + 128);
    }
}

uintptr_t store__cache_buckets(const store__cache *c, size_t *mask)
{
    *mask = c->mask;
    return (uintptr_t)c->tab;
}

void store__cache_stats(struct store_mem_info *out, const store__cache *c)
{
    out->cache_entries = c->n;
    out->cache_bytes = c->bytes;
    out->cache_hits = c->hits;
    out->cache_misses = c->misses;
}
