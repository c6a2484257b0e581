/*
 * pool.h - a free list of objects of one type, kept for reuse so a request
 * in the steady state allocates nothing (net/peers.c RPC requests,
 * coord/coord.c coordinator requests, node/replica.c replica writes,
 * node/rsrv.c RESP slots).
 *
 * Intrusive: an object is linked through a pointer field of its own, named
 * by its offset (offsetof(T, field)), so a field the object uses while live
 * (a hash-chain link, say) can serve. LIFO, so the object reused is the one
 * released last; a get also prefetches the link of the next one, whose
 * line is usually cold by the time it is asked for.
 *
 * A sanitizer build (RK_SANITIZE defines RK_NO_POOLS) keeps nothing: every
 * release is a free() by the caller, so AddressSanitizer reports a use of
 * a released object as a use after free instead of it reading a recycled
 * one.
 */
#ifndef RK_POOL_H
#define RK_POOL_H

#include <stdbool.h>
#include <stddef.h>
#include <string.h>

#define RK_POOL_KEEP 4096 /* objects a pool keeps at most */

struct rk_pool {
    void *head;
    size_t len;
};

/* A kept object (its content as released, its link overwritten), or NULL
 * when the pool is empty. */
static inline void *rk_pool_get(struct rk_pool *p, size_t link_off)
{
    void *o = p->head;
    if (o == NULL)
        return NULL;
    memcpy(&p->head, (char *)o + link_off, sizeof(p->head));
    p->len--;
    if (p->head != NULL)
        __builtin_prefetch((char *)p->head + link_off);
    return o;
}

/* Keep o for reuse; false when the pool is full (or off): the caller frees
 * it then. */
static inline bool rk_pool_put(struct rk_pool *p, void *o, size_t link_off)
{
#ifdef RK_NO_POOLS
    (void)p;
    (void)o;
    (void)link_off;
    return false;
#else
    if (p->len >= RK_POOL_KEEP)
        return false;
    memcpy((char *)o + link_off, &p->head, sizeof(p->head));
    p->head = o;
    p->len++;
    return true;
#endif
}

#endif
