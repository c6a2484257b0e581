/*
 * repair_host.h - repair/ on the node (repair_host.c): the entry points
 * the rest of node/ calls.
 *
 * Not a public header: only node/'s files include it. Everything runs on
 * the loop thread.
 */
#ifndef NODE_REPAIR_HOST_H
#define NODE_REPAIR_HOST_H

#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#include "common/rk.h"
#include "net/net.h"
#include "node/node.h"
#include "ring/ring.h"

struct repair_stats;

/* At start: the repair part on this node's host interface (err says why
 * not: -ENOMEM). */
int node__repair_start(node *n, char *err, size_t errlen);
/* `ringkv repair`: compare this node's replicas of every arc it replicates
 * (only the parts inside `only`, unless NULL) with the other replicas'
 * (Merkle leaves) and exchange the sub-arcs that differ. Returns at once
 * with the text to answer (repair_begin). */
int node__repair_begin(node *n,
                       const struct ring_range *only,
                       char **text,
                       size_t *len);
void node__repair_text(node *n, FILE *f); /* NETSTATS line, if any */
/* The last repair session's lines alone (no schedule), if there was one. */
void node__repair_session_text(node *n, FILE *f);
void node__repair_free(node *n);
/* An RPC_MSG_MERKLE request from another node's repair. */
void node__repair_serve(node *n, net_conn *c, uint64_t id, struct rk_slice f);
/* Every gossip tick: a node that joined by streaming (node.state
 * repair_due) repairs its ranges once the ring has settled
 * (repair_after_join), again after a restart until one has run; and a
 * running repair is watched for a stall (stream_stall_check). */
void node__repair_after_join(node *n);
/* The repair schedule (repair.h): its counts, and the records of the
 * arcs this node replicates (malloc'd, the caller's). */
struct repair_sched_stats;
struct repair_arc_state;
void node__repair_sched_stats(node *n, struct repair_sched_stats *out);
int node__repair_sched_list(node *n,
                            struct repair_arc_state **out,
                            size_t *out_n);
/* What this node's repairs exchanged (ringkv_repair_*). */
void node__repair_stats(node *n, struct repair_stats *out);

#endif
