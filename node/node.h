/*
 * node.h - the daemon's one context: `struct node` owns the libuv handles,
 * the configuration and every part's state, and wires the parts together.
 *
 * Life cycle: node_new() checks the data_dir and takes the node's identity
 * (name, generation), node_start() opens listeners and timers on the loop,
 * node_stop() closes them (in-flight work finishes or fails clearly) and
 * calls `done` once every handle is closed; node_free() after that.
 */
#ifndef NODE_NODE_H
#define NODE_NODE_H

#include <stdint.h>

#include <uv.h>

#include "node/config.h"

typedef struct node node;

/* Create a node for `cfg` (copied) on `loop` (borrowed, must outlive the
 * node). Creates data_dir, loads or creates the identity, increases the
 * generation and saves it. On error writes a message into err. */
int node_new(node **out,
             uv_loop_t *loop,
             const struct node_config *cfg,
             char *err,
             size_t errlen);

/* Open sockets and timers. 0 or an error (nothing left open on error). */
int node_start(node *n, char *err, size_t errlen);

/* Begin a clean shutdown; `done(arg)` runs on the loop once every handle
 * is closed. Calling it again is a no-op. */
void node_stop(node *n, void (*done)(void *arg), void *arg);
/* The done that node_stop gets when the node stops by itself: after a
 * decommission, once it has announced LEFT. */
void node_on_self_stop(node *n, void (*done)(void *arg), void *arg);

/* What ringkvd exits with once the node has stopped: 0, or 1 when it
 * stopped by itself on an error (a replace refused, membership.c). */
int node_exit_code(const node *n);

/* Free a stopped (or never started) node. NULL is a no-op. */
void node_free(node *n);

/* SIGHUP (and `ringkv reloadtls`): loads tls_cert_file, tls_key_file and,
 * with internode_tls required, tls_ca_file again. New handshakes on the
 * client ports and the internode port (and connections to peers) use
 * them; connections keep the session they have. A certificate that does
 * not load (unreadable, expired, not yet valid, a key of another, a CA
 * file that does not load) is refused with a log line (tls.reload_failed)
 * and every context loaded before stays. Nothing when the node speaks no
 * TLS. */
void node_reload_tls(node *n);

/* The node's name and generation (valid for the node's life). */
const char *node_name(const node *n);
int64_t node_generation(const node *n);

#endif
