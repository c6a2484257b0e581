/*
 * stream_host.h - the node's side of streaming/ (stream_host.c): the
 * streaming part on the node's host interface, and what the admin commands
 * use of it.
 *
 * Not a public header: only node/'s files include it. Everything runs on
 * the loop thread.
 */
#ifndef NODE_STREAM_HOST_H
#define NODE_STREAM_HOST_H

#include <stddef.h>

#include "node/node.h"

/* The node's streaming part, its host interface filled in (node_new). */
int node__streaming_new(node *n);
/* Announced BOOT with tokens: stream the ranges in (boot: STREAM), then
 * NORMAL. -EBUSY while an aborted join winds down, -ENOMEM. */
int node__stream_begin(node *n);
/* `ringkv abort`: the join (before or while it streams), the
 * decommission or the removal this node drives (text malloc'd). */
int node__abort(node *n, char **text, size_t *len);
/* NETSTATS: the movement, the cleanup, the repair, what was sent, as
 * text (malloc'd). */
char *node__netstats_text(node *n, size_t *len);

#endif
