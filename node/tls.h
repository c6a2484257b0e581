/*
 * tls.h - the node's TLS certificates (tls.c): the context its client
 * ports speak TLS with, loaded at start from tls_cert_file and
 * tls_key_file, and, with internode_tls required, the two the internode
 * port and the connections to peers speak mutual TLS with under
 * tls_ca_file (docs/config.md, docs/internode.md); reloads (SIGHUP,
 * `ringkv reloadtls`), and what refused handshakes count.
 *
 * Not a public header: only node/'s files include it. Loop thread only.
 */
#ifndef NODE_TLS_H
#define NODE_TLS_H

#include <stddef.h>
#include <stdint.h>

#include "net/net.h"
#include "net/tls.h"
#include "node/config.h"
#include "node/node.h"

/* The contexts a configuration asks for (NULL where it asks for none). */
struct node_tls_contexts {
    net_tls *ports;        /* client ports (tls_port, client_port when
                              client_tls is required): tls_cert_file */
    net_tls *inode_server; /* internode_port: asks for the peer's
                              certificate, verified under tls_ca_file */
    net_tls *inode_client; /* connections to peers: presents ours, verifies
                              theirs under tls_ca_file */
};

/* The node's part (n->tls). */
struct node_tls {
    struct node_tls_contexts ctx; /* the node's references */
    uint64_t refused_clients;     /* handshakes refused on a client port */
    uint64_t refused_metrics;     /* on metrics_port (metrics_tls) */
    uint64_t inode_refused[NET_TLS_FAIL_COUNT]; /* internode, by reason */
    uint64_t reloads, reload_failed; /* node__tls_reload (SIGHUP, RELOADTLS) */
};

/* Loads the contexts the configuration c asks for into out (all NULL
 * first): none without tls_cert_file; the client ports' with it; the two
 * internode ones with internode_tls required. 0, or an error with why
 * (naming the key, and for a certificate whether it expired or is not
 * valid yet, and since when) and none loaded. */
int node__tls_contexts(struct node_tls_contexts *out,
                       const struct node_config *c,
                       char *why,
                       size_t whylen);

/* Drops the references t holds (NULL ones skipped) and sets them NULL. */
void node__tls_contexts_free(struct node_tls_contexts *t);

/* Loads the node's contexts at start (node__tls_contexts). 0, or an error
 * with why in err. */
int node__tls_load(node *n, char *err, size_t errlen);

/* Loads the certificate files again and, if every context loads, hands
 * them to the servers and peers: new handshakes use them, connections
 * open keep theirs. If one does not load, none is changed. Logs
 * tls.reloaded / tls.reload_failed / tls.reload_skipped, counts, and
 * writes one line for the operator into msg. 0, or the error. */
int node__tls_reload(node *n, char *msg, size_t msglen);

/* Drops the node's references (servers hold their own). */
void node__tls_free(node *n);

/* net_server_opts.on_tls_fail of the client ports (arg: the node):
 * counts, and logs client.tls_refused at most every 10 s. */
void node__tls_client_refused(void *arg,
                              const char *peer,
                              enum net_tls_fail reason,
                              const char *why);

/* on_tls_fail of the internode server and of the peers (arg: the node):
 * counted by reason (ringkv_internode_tls_refused_total), logged as
 * internode.tls_refused at most every 10 s per reason. */
void node__tls_internode_refused_accept(void *arg,
                                        const char *peer,
                                        enum net_tls_fail reason,
                                        const char *why);
void node__tls_internode_refused_connect(void *arg,
                                         const char *peer,
                                         enum net_tls_fail reason,
                                         const char *why);

#endif
