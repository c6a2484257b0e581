/*
 * coord_node.h - the coordinator in the daemon (coord_node.c): coord/'s
 * core on a host filled in over struct node, and the entry points that take
 * the node, the one way both client servers (native and RESP) reach it. The
 * contract is coord/coord.h's: a call that returns an error never calls
 * `cb`, one that returns 0 calls it exactly once, later, from the loop.
 */
#ifndef NODE_COORD_NODE_H
#define NODE_COORD_NODE_H

#include <stdint.h>

#include "common/rk.h"
#include "coord/coord.h"

typedef struct node node; /* node/node.h */

/* The coordinator of a node: its core, host and timer (coord_node.c). */
struct coord_node;

int coord_get(
    node *n, struct rk_slice key, enum coord_cl cl, coord_cb cb, void *arg);

/* coord_get, answered by `deadline` (the loop's clock, ms:
 * coord_read_deadline(); 0: read_timeout_ms from now), and counting the
 * values it holds in `m` until its callback. The reads of one client
 * request (an MGET's keys) share the request's deadline, however late
 * each starts; one that starts past it asks no remote replica.
 * @note m is borrowed until the callback runs (or the call fails). */
int coord_get_metered(node *n,
                      struct rk_slice key,
                      enum coord_cl cl,
                      uint64_t deadline,
                      struct coord_meter *m,
                      coord_cb cb,
                      void *arg);

/* The deadline of a client read arriving now: read_timeout_ms from now,
 * on the loop's clock (what coord_get_metered takes). */
uint64_t coord_read_deadline(node *n);

/* ttl_ms 0 means no expiry. */
int coord_put(node *n,
              struct rk_slice key,
              struct rk_slice value,
              uint64_t ttl_ms,
              enum coord_cl cl,
              coord_cb cb,
              void *arg);

int coord_del(
    node *n, struct rk_slice key, enum coord_cl cl, coord_cb cb, void *arg);

/* How long a peer may leave a request unanswered before reads ask it
 * after the other replicas (and STATUS shows it silent). */
uint64_t coord_quiet_limit(const node *n);

/* The node's configured default level. */
enum coord_cl coord_default_cl(const node *n);

/* At node_new: the node's coordinator, idle (no timer yet). 0 or
 * -ENOMEM. @note *out is owned by n, freed by node__coord_free. */
int node__coord_new(struct coord_node **out, node *n);
/* At node_free, once the loop has closed its timer; NULL: nothing. */
void node__coord_free(struct coord_node *c);
/* The deadline timer (node_start), and its close (node__handle_closed). */
void node__coord_start(node *n);
void node__coord_stop(node *n);
/* End of a loop turn: the decisions deferred by coord_*() calls. */
void node__coord_run_deferred(node *n);
/* Start the requests waiting for the ring (a node that has heard of a
 * newer epoch) once it has caught up, or answer them CLOSED once the node
 * stops; does nothing while the ring is stale. */
void node__coord_unpark(node *n);
/* @note borrowed: lives as long as the node. */
const struct coord_stats *node__coord_stats(const node *n);

#endif
