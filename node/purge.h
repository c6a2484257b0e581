/*
 * purge.h - the purge of deleted and expired records (purge.c): in the
 * background, an arc at a time, tombstones and expired values older than
 * gc_grace_seconds whose arc was repaired with every replica after they
 * were written; then the ranges that lost much are compacted.
 *
 * Not a public header: only node/'s files include it. Everything runs on
 * the loop thread; the store's work runs on the pool.
 */
#ifndef NODE_PURGE_H
#define NODE_PURGE_H

#include <stdint.h>
#include <stdio.h>

#include "node/node.h"

struct node_purge_stats {
    uint64_t tombstones, expired; /* purged since start */
    uint64_t cycles;              /* purge cycles finished */
    uint64_t compactions;         /* ranges compacted after a purge */
    uint64_t arcs_unrepaired;     /* arcs the last cycle skipped */
};

/* Every gossip tick: a cycle started every purge_interval_s (the first
 * one purge_interval_s after start), the next step of a running one. */
void node__purge_tick(node *n);
void node__purge_stats(node *n, struct node_purge_stats *out);
void node__purge_text(node *n, FILE *f); /* NETSTATS lines */
void node__purge_free(node *n);

#endif
