/*
 * auth_delay.c - failed authentications answered late (auth_delay.h): the
 * per-source table (auth_failures.c) and one timer for the node that
 * calls each waiting connection back when its answer is due.
 *
 * The waits are a list in no order: a connection holds one at most, so
 * the list is bounded by the connections (max_clients), and finding the
 * next due one on each firing is a walk of the waits, not of the clients.
 */
#include "node/auth_delay.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "net/auth_failures.h"
#include "node/daemon.h"
#include "node/log.h"

int node__auth_start(node *n)
{
    struct node_auth *a = &n->auth;
    if (!a->table) {
        a->table = malloc(sizeof(*a->table));
        if (!a->table)
            return -ENOMEM;
        net_auth_failures_init(a->table,
                               (uint32_t)n->cfg.auth_fail_delay_max_ms);
    }
    if (!a->timer_open) {
        uv_timer_init(n->loop, &a->timer);
        a->timer.data = n;
        a->timer_open = true;
    }
    return 0;
}

void node__auth_free(node *n)
{
    free(n->auth.table);
    n->auth.table = NULL;
}

/* "ip:port" or "[v6]:port" -> the address alone, into out. */
static void addr_of(char *out, size_t cap, const char *peer)
{
    const char *end = strrchr(peer, ':');
    size_t l = end ? (size_t)(end - peer) : strlen(peer);
    if (l >= 2 && peer[0] == '[' && peer[l - 1] == ']') {
        peer++;
        l -= 2;
    }
    if (l >= cap)
        l = cap - 1;
    memcpy(out, peer, l);
    out[l] = '\0';
}

uint32_t node__auth_checked(node *n,
                            const char *peer,
                            bool ok,
                            struct node_log_limit *lim,
                            const char *event)
{
    char addr[64];
    uint32_t ms = 0;
    addr_of(addr, sizeof(addr), peer);
    uint64_t now = node__mono_ms(n);
    if (ok) {
        if (n->auth.table)
            ms = net_auth_failures_ok(n->auth.table, addr, now);
        return ms;
    }
    n->stats.client_auth_fail++;
    if (n->auth.table)
        ms = net_auth_failures_fail(n->auth.table, addr, now);
    LOG_LIMITED(lim, now, WARN, event, "peer=%s delay_ms=%u", peer, ms);
    return ms;
}

static void unlink_wait(struct node_auth *a, struct node_auth_wait *w)
{
    if (w->prev)
        w->prev->next = w->next;
    else
        a->waits = w->next;
    if (w->next)
        w->next->prev = w->prev;
    w->prev = w->next = NULL;
    w->armed = false;
    a->nwaits--;
}

static void on_timer(uv_timer_t *t);

/* The timer set for the earliest wait (none: stopped). */
static void rearm(node *n)
{
    struct node_auth *a = &n->auth;
    uint64_t due = 0;
    for (struct node_auth_wait *w = a->waits; w; w = w->next)
        if (due == 0 || w->due_ms < due)
            due = w->due_ms;
    if (due == a->timer_due)
        return;
    a->timer_due = due;
    if (due == 0) {
        uv_timer_stop(&a->timer);
        return;
    }
    uint64_t now = node__mono_ms(n);
    uv_timer_start(&a->timer, on_timer, due > now ? due - now : 0, 0);
}

/* Every wait due by now (all of them when `all`), unlinked first and then
 * called: a callback may arm or cancel waits. */
static void run_due(node *n, bool all)
{
    struct node_auth *a = &n->auth;
    uint64_t now = node__mono_ms(n);
    struct node_auth_wait *due = NULL;
    for (struct node_auth_wait *w = a->waits, *next; w; w = next) {
        next = w->next;
        if (all || w->due_ms <= now) {
            unlink_wait(a, w);
            w->next = due;
            due = w;
        }
    }
    while (due) {
        struct node_auth_wait *w = due;
        due = w->next;
        w->next = NULL;
        w->cb(w);
    }
}

static void on_timer(uv_timer_t *t)
{
    node *n = t->data;
    n->auth.timer_due = 0;
    run_due(n, false);
    rearm(n);
}

bool node__auth_wait(node *n,
                     struct node_auth_wait *w,
                     uint32_t ms,
                     void (*cb)(struct node_auth_wait *w))
{
    struct node_auth *a = &n->auth;
    if (ms == 0 || n->stopping || !a->timer_open || w->armed)
        return false;
    /* + 1: the loop's clock counts whole ms, and a wait begun at 4.9 ms
     * due at 4 + ms would end 0.9 ms short */
    ms++;
    w->due_ms = node__mono_ms(n) + ms;
    w->cb = cb;
    w->armed = true;
    w->prev = NULL;
    w->next = a->waits;
    if (a->waits)
        a->waits->prev = w;
    a->waits = w;
    a->nwaits++;
    if (a->timer_due == 0 || w->due_ms < a->timer_due) {
        a->timer_due = w->due_ms;
        uv_timer_start(&a->timer, on_timer, ms, 0);
    }
    return true;
}

void node__auth_cancel(node *n, struct node_auth_wait *w)
{
    if (!w->armed)
        return;
    unlink_wait(&n->auth, w);
    if (n->auth.timer_open)
        rearm(n);
}

void node__auth_flush(node *n)
{
    run_due(n, true);
    if (n->auth.timer_open)
        rearm(n);
}

void node__auth_stop(node *n)
{
    struct node_auth *a = &n->auth;
    run_due(n, true);
    if (!a->timer_open)
        return;
    a->timer_open = false;
    a->timer_due = 0;
    n->pending_closes++;
    uv_close((uv_handle_t *)&a->timer, node__handle_closed);
}

uint64_t node__auth_evictions(const node *n)
{
    return n->auth.table ? n->auth.table->evictions : 0;
}
