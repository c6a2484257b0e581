/*
 * tls.h - the node's TLS certificates (tls.c): the context its client
 * ports speak TLS with, loaded at start from tls_cert_file and
 * tls_key_file (docs/config.md), and what refused handshakes count.
 *
 * Not a public header: only node/'s files include it. Loop thread only.
 */
#ifndef NODE_TLS_H
#define NODE_TLS_H

#include <stddef.h>
#include <stdint.h>

#include "net/tls.h"
#include "node/config.h"
#include "node/node.h"

/* The node's part (n->tls). */
struct node_tls {
    net_tls *server;                 /* client ports (tls_port, client_port when
                                        client_tls is required); NULL: no TLS */
    uint64_t refused_clients;        /* handshakes refused on a client port */
    uint64_t refused_metrics;        /* on metrics_port (metrics_tls) */
    uint64_t reloads, reload_failed; /* node_reload_tls (SIGHUP) */
};

/* Loads the contexts the configuration asks for (none without
 * tls_cert_file). 0, or an error with why in err (an expired or
 * not-yet-valid certificate says so, and since when). */
int node__tls_load(node *n, char *err, size_t errlen);

/* The client ports' context from the files c names (tls_cert_file,
 * tls_key_file): what the start, a reload and node_config_validate load.
 * 0, or an error with why (expired, not valid yet, unreadable, a key of
 * another certificate). */
int node__tls_context(const struct node_config *c,
                      net_tls **out,
                      char *why,
                      size_t whylen);

/* Drops the node's references (servers hold their own). */
void node__tls_free(node *n);

/* net_server_opts.on_tls_fail of the client ports (arg: the node):
 * counts, and logs client.tls_refused at most every 10 s. */
void node__tls_client_refused(void *arg, const char *peer, const char *why);

#endif
