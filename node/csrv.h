/*
 * csrv.h - the native client server (csrv.c, wire/client_msg.h) on
 * client_port: a protocol handler on net/'s connection engine.
 *
 * Not a public header: only node/'s files include it. Everything runs on
 * the loop thread.
 */
#ifndef NODE_CSRV_H
#define NODE_CSRV_H

#include <stddef.h>

#include "node/node.h"

/* Listen on listen_address:client_port; 0, or an error with why in err. */
int node__csrv_start(node *n, char *err, size_t errlen);
void node__csrv_stop(node *n);
void node__csrv_drain(node *n); /* stop reading; close once answered */

#endif
