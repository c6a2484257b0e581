/*
 * rsrv.h - the Redis protocol (RESP2) server on resp_port.
 *
 * Each connection parses pipelined requests with wire/resp.h and executes
 * the data commands through the coordinator (node/coord.h), at the
 * connection's consistency level (CONSISTENCY <level>; default from the
 * config). Replies go out in request order even when the coordinator
 * completes them out of order. Admission control answers -OVERLOADED at
 * once past max_inflight client requests on the node (shared with the
 * native server); a connection with max_pipeline requests in flight waits
 * for one to finish before it starts the next.
 * A protocol error closes that one connection after an error reply.
 * docs/resp.md lists the commands and their semantics.
 *
 * Not a public header: only node/'s files include it. Everything runs on the
 * loop thread.
 */
#ifndef NODE_RSRV_H
#define NODE_RSRV_H

#include <stddef.h>
#include <stdint.h>

#include "node/node.h"

/* Declared in node_internal.h (node.c calls them):
 *  node__rsrv_start(n, err, errlen): listen on listen_address:resp_port
 *    (nothing when resp_port is 0); 0, or an error with a message in err.
 *  node__rsrv_stop(n): stop listening and close every connection; requests
 *    in flight finish into closed connections; the memory is released once
 *    the listener is closed and every request has completed (node_stop
 *    waits: pending_closes). Safe when not started, and twice.
 *  node__rsrv_flush(n): end of loop turn: write what each connection has
 *    ready (one write per connection per turn); true when a connection
 *    whose output drained started requests meanwhile (the caller runs its
 *    end-of-turn work again, or they would wait for the next wakeup). */

/* Open RESP connections (for INFO and metrics); 0 when not running. */
uint64_t node__rsrv_conns(const node *n);

/* RESP counters since start: connections accepted, connections closed for
 * a protocol error. */
void node__rsrv_counts(const node *n, uint64_t *accepted, uint64_t *proto_err);

#endif
