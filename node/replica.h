/*
 * replica.h - the replica side (replica.c): the internode RPC server,
 * the authenticated outbound connections to peers (net_peers), local
 * reads and writes, and hinted handoff.
 *
 * Not a public header: only node/'s files include it. Everything runs on
 * the loop thread, but the bodies of the hint jobs on the pool.
 */
#ifndef NODE_REPLICA_H
#define NODE_REPLICA_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include <uv.h>

#include "common/pool.h"
#include "common/rk.h"
#include "net/net.h"
#include "node/commit.h"
#include "node/node.h"
#include "wire/rpc_msg.h"

struct hint_store_job; /* replica.c */
struct node_peer;      /* node/ring_view.h */

/* The internode server's and peers' part of struct node (n->replica). */
struct node_replica {
    net_server *srv;
    net_peers *peers;
    struct rk_pool iwrite_pool; /* finished replica writes */
    struct rpc_buf reply_buf;   /* replies are encoded here */
    uint8_t *read_buf;          /* replica reads' records are read here */
    size_t read_cap;
};

/* Hinted handoff's part of struct node (n->hints). */
struct node_hints {
    uv_timer_t timer; /* replay */
    int timer_open;
    struct hint_store_job *open; /* hints of this loop turn */
    int stores;                  /* hints not yet stored (open + queued) */
    size_t store_bytes;          /* their keys and records */
    bool stores_full; /* hints.queue_full logged, not drained since */
};

int node__internode_start(node *n, char *err, size_t errlen);
void node__internode_stop(node *n);
void node__hints_kick(node *n, uint32_t idx); /* replay hints to peer idx */
void node__replica_free(node *n);             /* free lists and buffers */
/* Store a hint for peer `name` (key, encoded record), off the loop; also
 * while the node is stopping, until its store is closed. */
void node__hint_store(node *n,
                      const char *name,
                      struct rk_slice key,
                      struct rk_slice rec);
/* End of a loop turn: store the hints it left, in one transaction. */
void node__hint_flush(node *n);
/* A replica's answer to a write that sending it again would get again:
 * no hint is kept for it (coord.c), nor replayed (replica.c). */
bool node__hint_rejected_for_good(int status);
/* The peer table's entry for `name` (and its index, if idx), or NULL. */
struct node_peer *node__peer_by_name(node *n, const char *name, uint32_t *idx);
/* Answer an internode request with only a status: a READ_RESP for
 * type RPC_MSG_READ, else a WRITE_ACK (with this node's HLC). */
void node__reply_status(
    node *n, net_conn *c, uint64_t id, int type, int status);
/* Send one replica write / read to ring member idx (remote). */
int node__rpc(node *n,
              uint32_t idx,
              const struct rpc_buf *msg,
              uint32_t timeout_ms,
              net_rpc_cb cb,
              void *arg);
/* The same to an internode "host:port"; unless the peer has been silent
 * with a request to answer for max_quiet_ms (0: no limit): then
 * RK_EUNAVAILABLE, nothing sent (net_peers_request_unless_quiet). */
int node__rpc_addr(node *n,
                   const char *iaddr,
                   const struct rpc_buf *msg,
                   uint32_t timeout_ms,
                   uint32_t max_quiet_ms,
                   net_rpc_cb cb,
                   void *arg);
/* How long the peer at iaddr has been silent with a request to answer
 * (net_peers_quiet_ms); 0 if it is not. */
uint64_t node__peer_quiet_ms(node *n, const char *iaddr);
/* False while the peer at iaddr refused our connect or closed its
 * connection on us (net_peers_reachable); true if it is not known. */
bool node__peer_reachable(node *n, const char *iaddr);
/* Gossip says the peer at iaddr is up or restarted: reachable again, and
 * connected to at once, not after its backoff (net_peers_retry). */
void node__peer_retry(node *n, const char *iaddr);
/* Whether a request planned on ring `epoch` (0: unknown, never old) comes
 * from a coordinator whose ring is older than the newest this node has
 * applied or heard of: then it is refused OLD_RING (counted in
 * replica_old_ring), for the coordinator to wait for its ring. */
bool node__sender_ring_old(node *n, uint64_t epoch);
/* Apply a replica write locally (advance HLC, group commit). */
int node__local_write(node *n,
                      struct rk_slice key,
                      const struct rpc_record *rec,
                      node_commit_cb cb,
                      void *arg);
/* Read the local raw record of key: 0 and *found, or an error. The record
 * is copied into the caller's buffer *buf of *cap bytes (NULL and 0 at
 * first; grown with realloc when too small, the caller keeps and frees it)
 * and rec->value points into it. */
int node__local_read(node *n,
                     struct rk_slice key,
                     bool *found,
                     struct rpc_record *rec,
                     uint8_t **buf,
                     size_t *cap);
/* Whether the local store is short of disk space for new writes: it
 * refuses them (under disk_reserve_mb) or is within a margin of that (a
 * part of the reserve, at least STORE_SPACE_MARGIN), where this node
 * refuses to coordinate writes that need a copy here (coord.c,
 * write_local_full), so the writes it admitted find room. */
bool node__disk_full(node *n);

#endif
