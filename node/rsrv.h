/*
 * rsrv.h - the Redis protocol (RESP2) server on resp_port.
 *
 * A protocol handler on net/'s connection engine (raw-stream net_server).
 * Each connection parses pipelined requests with wire/resp.h and executes
 * the data commands through the coordinator (node/coord_node.h), at the
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

#include "net/tls.h"
#include "node/node.h"

/* Listen on listen_address:resp_port (nothing when resp_port is 0); 0, or
 * an error with a message in err. */
int node__rsrv_start(node *n, char *err, size_t errlen);
/* Stop accepting and reading; each connection closes once its requests are
 * answered and written. */
void node__rsrv_drain(node *n);
/* Stop listening and close every connection; requests in flight finish
 * into closed connections; the memory is released once the engine's
 * server is closed and every request has completed (node_stop waits:
 * pending_closes). Safe when not started, and twice. */
void node__rsrv_stop(node *n);
/* Output is written by net/'s engine at the end of each loop turn. */

/* New handshakes on tls_port use tls (node_reload_tls); none if it is off. */
void node__rsrv_tls_set(node *n, net_tls *tls);

/* Open RESP connections (for INFO and metrics); 0 when not running. */
uint64_t node__rsrv_conns(const node *n);

/* RESP counters since start: connections accepted, connections closed for
 * a protocol error. */
void node__rsrv_counts(const node *n, uint64_t *accepted, uint64_t *proto_err);

#endif
