/*
 * mem.c - the memtable: committed writes not yet applied to the range envs
 * (store_internal.h, docs/storage.md "The memtable").
 *
 * A chained hash table keyed by (token, user key); the token (XXH3 of the
 * key) is the hash. Each key keeps only the LWW winner of the writes it got
 * since the table was started, so a hot key costs one entry. Pure memory:
 * no LMDB, no locks (the store guards it with memmu).
 *
 * Entries are carved from chunks of MEM_CHUNK bytes (one larger than a
 * quarter of a chunk gets its own), freed together with the table: an
 * entry replaced by a larger record, or deleted, stays in its chunk until
 * then and is counted in the bytes held. A malloc and a free per entry
 * were a fifth of a replica's memtable apply (the apply freeing ~98,000
 * entries one by one after 400,000 SETs of 100,000 keys; perf,
 * 2026-12-07).
 */
#include <errno.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>

#include "storage/store.h"
#include "storage/store_internal.h"

struct store__ment {
    struct store__ment *next;
    uint64_t token;
    uint32_t klen;
    uint32_t rlen;
    /* The store's `known_epoch` when this record was known to be at least
     * as new as its env's (0: never): as it came, or by a read; store.c,
     * store__mem_find. */
    uint64_t known;
    uint8_t data[]; /* key || record */
};

struct mem_chunk {
    struct mem_chunk *next;
    size_t used, cap;
    _Alignas(8) uint8_t data[];
};

struct store__mem {
    struct store__ment **tab;
    size_t mask; /* buckets - 1 (a power of two) */
    size_t n;
    size_t bytes;             /* of the chunks' entries, live or not */
    size_t live;              /* of the live entries */
    struct mem_chunk *chunks; /* the one carved from first */
};

#define MEM_CHUNK ((size_t)64 * 1024)

#define MEM_BUCKETS0 1024u
/* A new table sized for the keys the last one held starts with at most this
 * many buckets (8 MiB); past it, it grows by doubling as any table does. */
#define MEM_BUCKETS_HINT_MAX ((size_t)1 << 20)

/* The bytes an entry of klen + rlen takes in its chunk (8-aligned). */
static size_t mem_size(size_t klen, size_t rlen)
{
    return (sizeof(struct store__ment) + klen + rlen + 7) & ~(size_t)7;
}

static size_t mem_ent_bytes(const struct store__ment *e)
{
    return mem_size(e->klen, e->rlen);
}

/* Room for an entry of klen + rlen bytes, or NULL. */
static struct store__ment *mem_alloc(store__mem *m, size_t klen, size_t rlen)
{
    size_t need = mem_size(klen, rlen);
    struct mem_chunk *c = m->chunks;
    if (c == NULL || c->cap - c->used < need) {
        size_t cap = need > MEM_CHUNK / 4 ? need : MEM_CHUNK;
        struct mem_chunk *nc = malloc(sizeof(*nc) + cap);
        if (nc == NULL)
            return NULL;
        nc->used = 0;
        nc->cap = cap;
        if (cap == MEM_CHUNK || c == NULL) { /* carve from it next */
            nc->next = c;
            m->chunks = nc;
        } else { /* an entry's own: behind the one carved from */
            nc->next = c->next;
            c->next = nc;
        }
        c = nc;
    }
    struct store__ment *e = (struct store__ment *)(void *)(c->data + c->used);
    c->used += need;
    m->bytes += need;
    return e;
}

int store__mem_new(store__mem **out, size_t keys)
{
    size_t nb = MEM_BUCKETS0;
    while (nb < keys && nb < MEM_BUCKETS_HINT_MAX)
        nb *= 2;
    store__mem *m = calloc(1, sizeof(*m));
    if (m == NULL)
        return -ENOMEM;
    m->tab = calloc(nb, sizeof(*m->tab));
    if (m->tab == NULL) {
        free(m);
        return -ENOMEM;
    }
    m->mask = nb - 1;
    *out = m;
    return 0;
}

void store__mem_free(store__mem *m)
{
    if (m == NULL)
        return;
    for (struct mem_chunk *c = m->chunks, *nx; c != NULL; c = nx) {
        nx = c->next;
        free(c);
    }
    free(m->tab);
    free(m);
}

size_t store__mem_count(const store__mem *m)
{
    return m->n;
}

size_t store__mem_bytes(const store__mem *m)
{
    return m->bytes;
}

size_t store__mem_live(const store__mem *m)
{
    return m->live;
}

/* The link that points at key's entry (or at the NULL ending its chain). */
static struct store__ment **
mem_slot(const store__mem *m, uint64_t token, struct rk_slice key)
{
    struct store__ment **pp = &m->tab[token & m->mask];
    for (; *pp != NULL; pp = &(*pp)->next) {
        const struct store__ment *e = *pp;
        if (e->token == token && e->klen == key.len &&
            memcmp(e->data, key.p, key.len) == 0)
            break;
    }
    return pp;
}

/* Whether the kept entry `old` wins over (or is the same as) `rec`. Both
 * were validated before they got here; an undecodable one loses, as an
 * undecodable stored value does in the envs. */
static bool mem_old_wins(const struct store__ment *old, struct rk_slice rec)
{
    struct store_record a, b;
    return store_record_decode(&b, old->data + old->klen, old->rlen) == 0 &&
           (store_record_decode(&a, rec.p, rec.len) != 0 ||
            store_record_cmp(&a, &b) <= 0);
}

/* Double the buckets (a failed allocation just leaves chains longer). */
static void mem_grow(store__mem *m)
{
    size_t nb = (m->mask + 1) * 2;
    struct store__ment **tab = calloc(nb, sizeof(*tab));
    if (tab == NULL)
        return;
    for (size_t i = 0; i <= m->mask; i++)
        for (struct store__ment *e = m->tab[i], *nx; e != NULL; e = nx) {
            nx = e->next;
            size_t b = e->token & (nb - 1);
            e->next = tab[b];
            tab[b] = e;
        }
    free(m->tab);
    m->tab = tab;
    m->mask = nb - 1;
}

/* Put e (carved from m) at *pp (key's slot from mem_slot), replacing the
 * entry there, which stays in its chunk. */
static void
mem_link(store__mem *m, struct store__ment **pp, struct store__ment *e)
{
    struct store__ment *old = *pp;
    if (old != NULL) {
        e->next = old->next;
        m->live -= mem_ent_bytes(old);
    } else {
        e->next = NULL;
        m->n++;
    }
    *pp = e;
    m->live += mem_ent_bytes(e);
    if (m->n > m->mask + 1)
        mem_grow(m);
}

int store__mem_put(store__mem *m,
                   uint64_t token,
                   struct rk_slice key,
                   struct rk_slice rec,
                   uint64_t known)
{
    if (key.len > UINT32_MAX || rec.len > UINT32_MAX)
        return RK_ETOOLARGE;
    struct store__ment **pp = mem_slot(m, token, key), *old = *pp;
    if (old != NULL) {
        if (mem_old_wins(old, rec))
            return 0;
        if (old->rlen == rec.len) { /* newer than old: still known */
            memcpy(old->data + old->klen, rec.p, rec.len);
            if (known)
                old->known = known;
            return 0;
        }
    }
    struct store__ment *e = mem_alloc(m, key.len, rec.len);
    if (e == NULL)
        return -ENOMEM;
    e->token = token;
    e->klen = (uint32_t)key.len;
    e->rlen = (uint32_t)rec.len;
    /* Newer than the record it replaces: as new as the env's if that was. */
    e->known = known ? known : old != NULL ? old->known : 0;
    memcpy(e->data, key.p, key.len);
    memcpy(e->data + key.len, rec.p, rec.len);
    mem_link(m, pp, e);
    return 0;
}

uintptr_t store__mem_buckets(const store__mem *m, size_t *mask)
{
    *mask = m->mask;
    return (uintptr_t)m->tab;
}

void store__mem_prefetch(const store__mem *m, uint64_t token, int stage)
{
    struct store__ment *const *pp = &m->tab[token & m->mask];
    if (stage == 0)
        __builtin_prefetch(pp);
    else if (*pp != NULL) /* the bucket is cached by now: its first entry */
        __builtin_prefetch(*pp);
}

int store__mem_get(struct rk_slice *out_rec,
                   uint64_t **out_known,
                   const store__mem *m,
                   uint64_t token,
                   struct rk_slice key)
{
    if (m->n == 0) /* its buckets, a cache miss away, are all empty */
        return RK_ENOTFOUND;
    struct store__ment *e = *mem_slot(m, token, key);
    if (e == NULL)
        return RK_ENOTFOUND;
    *out_rec = RK_SLICE(e->data + e->klen, e->rlen);
    if (out_known != NULL)
        *out_known = &e->known;
    return 0;
}

void store__mem_del(store__mem *m, uint64_t token, struct rk_slice key)
{
    struct store__ment **pp = mem_slot(m, token, key), *e = *pp;
    if (e == NULL)
        return;
    *pp = e->next;
    m->live -= mem_ent_bytes(e);
    m->n--;
}

/* Copies of src's winners go into dst's chunks, so src's (with what
 * src's apply deleted) are freed with src. Should a copy find no memory,
 * the entry itself is linked and dst takes src's chunks: nothing is lost. */
void store__mem_merge(store__mem *dst, store__mem *src)
{
    bool adopt = false;
    for (size_t i = 0; i <= src->mask; i++)
        for (struct store__ment *e = src->tab[i], *nx; e != NULL; e = nx) {
            nx = e->next;
            struct rk_slice key = RK_SLICE(e->data, e->klen);
            struct store__ment **pp = mem_slot(dst, e->token, key), *old = *pp;
            if (old != NULL &&
                mem_old_wins(old, RK_SLICE(e->data + e->klen, e->rlen)))
                continue;
            struct store__ment *c = mem_alloc(dst, e->klen, e->rlen);
            if (c != NULL)
                memcpy(c, e, sizeof(*c) + e->klen + e->rlen);
            else
                adopt = true, c = e;
            mem_link(dst, pp, c);
        }
    if (adopt && src->chunks != NULL) {
        struct mem_chunk *last = src->chunks;
        while (last->next != NULL)
            last = last->next;
        if (dst->chunks == NULL) {
            dst->chunks = src->chunks;
        } else { /* behind the one dst carves from */
            last->next = dst->chunks->next;
            dst->chunks->next = src->chunks;
        }
        dst->bytes += src->bytes;
        src->chunks = NULL;
        src->bytes = 0;
    }
    memset(src->tab, 0, (src->mask + 1) * sizeof(*src->tab));
    src->n = 0;
    src->live = 0;
}

int store__mem_to_batch(const store__mem *m, store_batch *b, bool copy)
{
    for (size_t i = 0; i <= m->mask; i++)
        for (const struct store__ment *e = m->tab[i]; e != NULL; e = e->next) {
            int rc =
                store__batch_push(b, e->token, RK_SLICE(e->data, e->klen),
                                  RK_SLICE(e->data + e->klen, e->rlen), copy);
            if (rc)
                return rc;
        }
    return 0;
}
