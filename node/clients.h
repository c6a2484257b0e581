/*
 * clients.h - what the two client servers (csrv.c, rsrv.c) share
 * (clients.c): admission of client connections (max_clients), their input
 * caps and budget (max_input_buffer_mb), and listening for a protocol on
 * net/'s raw-stream engine.
 *
 * Not a public header: only node/'s files include it. Everything runs on
 * the loop thread.
 */
#ifndef NODE_CLIENTS_H
#define NODE_CLIENTS_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "common/rk.h"
#include "net/net.h"
#include "node/node.h"

/* The client servers' shared part of struct node (n->clients). */
struct node_clients {
    net_budget *budget; /* max_input_buffer_mb */
    int64_t inflight;   /* client requests in flight (both servers) */
    uint64_t open, max; /* client connections: admitted, admissible */
};

/* At start: raise the descriptor limit, and set how many clients the node
 * admits (max_clients, or fewer when the limit leaves less room). */
void node__clients_limit(node *n);
/* A client connection just accepted: true if admitted (counted); false if
 * past the limit: the client was told why (its protocol), it was counted
 * and logged, and it closes once that is written. */
bool node__client_admit(node *n, net_conn *c, bool resp, const char *peer);
/* An admitted client connection closed. */
void node__client_gone(node *n);
/* What a client connection may hold before it authenticates (requirepass
 * set): the largest valid HELLO or AUTH is some 300 bytes (a 255-byte
 * password); 8 KiB also takes what clients send with it on connecting
 * (redis-cli's COMMAND DOCS, CLIENT SETINFO), is one read, and is what
 * every connection holds without charging the budget: 5,000 connections
 * before HELLO hold 40 MB at most. After it: a whole frame / request. */
#define CLIENT_PREAUTH_INPUT NET_INPUT_BASE
/* The largest request either protocol takes, headers included: a native
 * frame (WIRE_CFRAME_MAX, checked in csrv.c) or a RESP request (max_request
 * of payload, plus the headers of up to max_args bulks). */
#define CLIENT_INPUT_MAX (4u * RK_MAX_VALUE + 2u * 1024u * 1024u)
/* A client protocol on net/'s raw-stream engine: its port (and config
 * key, for errors), the output past which it stops reading, its handler. */
struct node_client_proto {
    const char *key;
    int port;
    size_t out_high;
    net_input_cb on_input;
    net_sent_cb on_sent;
    net_accept_cb on_accept;
    net_conn_close_cb on_close;
    struct net_tls *tls; /* speak TLS with it (node/tls.h); NULL: not */
};
/* Listens on listen_address for proto, with the client servers' common
 * input caps, frame timeout and budget (callbacks' arg: n). 0, or an
 * error with why in err (naming the port's key); *out NULL then. */
int node__client_listen(node *n,
                        net_server **out,
                        const struct node_client_proto *proto,
                        char *err,
                        size_t errlen);
/* At start, before the servers: the input budget. 0 or -ENOMEM. */
int node__client_budget_open(node *n);
/* A client connection closed with err: count and log (rate-limited) the
 * input refused (frame timeout, a frame too large). */
void node__client_closed(
    node *n, bool resp, const char *peer, int err, bool authed);

#endif
