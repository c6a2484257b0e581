/*
 * scan.h - SCAN over the whole cluster (node/scan.c): the coordinator's
 * walk of the token space, the replica's answer to RPC_MSG_SCAN, and
 * DBSIZE's estimate. The cursor and the merge of answers are pure
 * (coord/scan_merge.h).
 *
 * Not a public header: node/'s client servers include it.
 */
#ifndef NODE_SCAN_H
#define NODE_SCAN_H

#include <stdint.h>

#include "common/rk.h"
#include "net/net.h"
#include "node/config.h"
#include "node/node.h"

/* COUNT when none is given (Redis's), and the most one call takes. */
#define SCAN_COUNT_DEFAULT 10
#define SCAN_COUNT_MAX     1000 /* RPC_SCAN_LIMIT_MAX */

/* The outcome handed to the callback.
 * @note keys borrow: they live only during the callback. */
struct coord_scan_result {
    int err;         /* 0, RK_EUNAVAILABLE, RK_ETIMEOUT, a replica's... */
    uint32_t acks;   /* the last round: replicas that answered */
    uint32_t need;   /* the replicas its level needed */
    uint64_t cursor; /* err 0: where the next call goes on; 0: the end */
    size_t nkeys;
    struct rk_slice *keys;
};

typedef void (*coord_scan_cb)(const struct coord_scan_result *res, void *arg);

/* One SCAN call: the live keys from token `cursor` on, in token order, at
 * level cl, that match the glob `match` (len 0: all), taking at most about
 * `count` keys' work (1..SCAN_COUNT_MAX) and at most a read timeout. It may
 * return fewer keys than count, none, with a cursor that is not 0: the
 * caller goes on until the cursor is 0. Contract as coord.h's: an error
 * returned (RK_EBADREQ for a count out of range, RK_EUNAVAILABLE,
 * RK_ECLOSED, -ENOMEM) never calls cb; 0 calls it once, later.
 * @note match is copied. */
int coord_scan(node *n,
               uint64_t cursor,
               uint32_t count,
               struct rk_slice match,
               enum coord_cl cl,
               coord_scan_cb cb,
               void *arg);

/* An RPC_MSG_SCAN from a coordinator (frame f, request id): answered
 * later, from the store, off the loop. */
void node__scan_serve(node *n, net_conn *c, uint64_t id, struct rk_slice f);

/* DBSIZE: an estimate of the live and deleted keys in the cluster: this
 * node's local entries over the share of the token space it replicates
 * ("Owns (effective)"), divided by nothing else: each key is counted once
 * whatever the RF. Tombstones not yet purged count. 0 with no ring. */
uint64_t node__dbsize(node *n);

#endif
