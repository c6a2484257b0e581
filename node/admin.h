/*
 * admin.h - the native protocol's admin answers (admin.c): STATUS, RING,
 * ENDPOINTS, METRICS, NETSTATS.
 *
 * Not a public header: only node/'s files include it. Everything runs on
 * the loop thread.
 */
#ifndef NODE_ADMIN_H
#define NODE_ADMIN_H

#include "node/node.h"

struct wire_cresp;
struct wire_creq;

/* What an answer's arrays point to, freed once the response is encoded. */
struct node_admin_buf {
    void *allocs[8];
    int n;
    char text_small[64];
};
void node_admin_buf_init(struct node_admin_buf *b);
void node_admin_buf_free(struct node_admin_buf *b);
int node__admin(node *n,
                struct wire_cresp *r,
                struct node_admin_buf *b,
                const struct wire_creq *q);

#endif
