/*
 * auth_delay.h - the answer to a failed authentication (RESP AUTH, native
 * HELLO with a password) waits, longer with every failure in a row from
 * its source address (auth_failures.h says how long), so a client cannot
 * try passwords at the speed of the loop: until 2026-12-06 20,000 wrong
 * AUTHs were answered at full speed (regression
 * test_regression_auth_failures_unslowed).
 *
 * One libuv timer for the node wakes the connections whose answers are
 * due; each connection embeds its node_auth_wait and reads nothing
 * meanwhile (its server stops parsing and pauses it). The loop never
 * blocks, and a client from another address is answered at once.
 *
 * Not a public header: only node/'s files include it. Loop thread only.
 */
#ifndef NODE_AUTH_DELAY_H
#define NODE_AUTH_DELAY_H

#include <stdbool.h>
#include <stdint.h>

#include <uv.h>

#include "node/log.h"
#include "node/node.h"

struct net_auth_failures;

/* A connection's answer waiting: embedded in the connection. */
struct node_auth_wait {
    struct node_auth_wait *prev, *next;
    uint64_t due_ms;                      /* loop ms */
    void (*cb)(struct node_auth_wait *w); /* due: answer now */
    bool armed;
};

/* The node's part (n->auth). */
struct node_auth {
    struct net_auth_failures *table;
    uv_timer_t timer;
    bool timer_open;
    uint64_t timer_due;           /* what the timer is set for (0: none) */
    struct node_auth_wait *waits; /* armed, in no order */
    uint64_t nwaits;              /* ringkv_client_auth_delayed */
};

/* At start, before the client servers: the table and the timer. 0 or
 * -ENOMEM. */
int node__auth_start(node *n);
/* At stop, first half: every waiting answer is given now (their
 * connections may finish); later failures are answered at once. */
void node__auth_flush(node *n);
/* At stop, second half: the timer closes (counted in pending_closes). */
void node__auth_stop(node *n);
/* At node_free. */
void node__auth_free(node *n);

/* A password from peer ("ip:port", "[v6]:port") checked: the ms its
 * answer waits. Wrong: counted (ringkv_client_auth_failures_total) and
 * logged as `event` through lim, with the delay (net_auth_failures_fail; 0
 * with auth_fail_delay_max_ms 0). Right: 0 unless answers to failures
 * from the same address still wait; the address is forgotten. */
uint32_t node__auth_checked(node *n,
                            const char *peer,
                            bool ok,
                            struct node_log_limit *lim,
                            const char *event);
/* Calls w->cb = cb ms from now, from the loop. false (nothing armed:
 * answer now) when ms is 0 or the node is stopping. */
bool node__auth_wait(node *n,
                     struct node_auth_wait *w,
                     uint32_t ms,
                     void (*cb)(struct node_auth_wait *w));
/* w will not be called (its connection closed). Not armed: no-op. */
void node__auth_cancel(node *n, struct node_auth_wait *w);

/* Sources forgotten to make room in the table (metrics). */
uint64_t node__auth_evictions(const node *n);

#endif
