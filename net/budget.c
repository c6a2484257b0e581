/*
 * budget.c - the input budget raw-stream connections share (net_budget,
 * net.h): one bound on the growth of their input buffers past
 * NET_INPUT_BASE. A connection is charged for its buffer's capacity
 * (net__budget_set); a read that would pass the bound waits on the
 * budget's list, in order (net__budget_wait), and is woken when other
 * buffers shrink. conn.c decides when; this file keeps the account.
 */
#include <errno.h>
#include <stdint.h>
#include <stdlib.h>

#include "net/net_internal.h"

struct net_budget {
    size_t max;
    size_t used;
    uint64_t waits;
    net_conn *whead, *wtail; /* connections waiting to read, in order */
};

int net_budget_new(net_budget **out, size_t max)
{
    if (max < NET_INPUT_BASE)
        return -EINVAL;
    net_budget *b = calloc(1, sizeof(*b));
    if (b == NULL)
        return -ENOMEM;
    b->max = max;
    *out = b;
    return 0;
}

void net_budget_free(net_budget *b)
{
    free(b);
}

size_t net_budget_used(const net_budget *b)
{
    return b->used;
}

uint64_t net_budget_waits(const net_budget *b)
{
    return b->waits;
}

/* What a buffer of capacity cap costs the budget. */
static size_t budget_charge_of(size_t cap)
{
    return cap > NET_INPUT_BASE ? cap - NET_INPUT_BASE : 0;
}

/* The largest capacity c's buffer may have within the budget. */
size_t net__budget_cap_allowed(const net_conn *c)
{
    const net_budget *b = c->base->budget;
    if (b == NULL)
        return SIZE_MAX;
    size_t left = b->used < b->max ? b->max - b->used : 0;
    return NET_INPUT_BASE + c->charged + left;
}

void net__budget_unwait(net_conn *c)
{
    net_budget *b = c->base->budget;
    if (!c->budget_wait)
        return;
    if (c->bprev)
        c->bprev->bnext = c->bnext;
    else
        b->whead = c->bnext;
    if (c->bnext)
        c->bnext->bprev = c->bprev;
    else
        b->wtail = c->bprev;
    c->bprev = c->bnext = NULL;
    c->budget_wait = false;
}

/* Wakes waiting connections in order, as many as the budget left could
 * serve a read's worth (each charges only when it reads; one that finds
 * the budget spent again waits at the tail). */
static void budget_wake(net_budget *b)
{
    size_t left = b->used < b->max ? b->max - b->used : 0;
    size_t n = left / NET__READ_CHUNK + 1;
    while (b->whead != NULL && n-- > 0 && b->used < b->max) {
        net_conn *c = b->whead;
        net__budget_unwait(c);
        net__conn_reading_update(c);
    }
}

/* c's buffer now has capacity cap: charge or refund the difference. */
void net__budget_set(net_conn *c, size_t cap)
{
    net_budget *b = c->base->budget;
    if (b == NULL)
        return;
    size_t ch = budget_charge_of(cap);
    bool freed = ch < c->charged;
    b->used = b->used - c->charged + ch;
    c->charged = ch;
    if (freed)
        budget_wake(b);
}

void net__budget_wait(net_conn *c)
{
    net_budget *b = c->base->budget;
    if (c->budget_wait)
        return;
    c->budget_wait = true;
    c->bnext = NULL;
    c->bprev = b->wtail;
    if (b->wtail)
        b->wtail->bnext = c;
    else
        b->whead = c;
    b->wtail = c;
    b->waits++;
    c->base->stats.budget_waits++;
}
