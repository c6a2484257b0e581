/*
 * ring_view.h - the ring as this node sees it, built from what gossip knows
 * of the members: the ring snapshot (n->ring) and, while a node joins or
 * leaves, the pending ring (n->ring_pending); the peer table indexed like
 * the ring (addresses, UP/DOWN, replication agreement); whether the ring
 * is stale (RING_STALE); and the local storage ranges the node replicates
 * in them.
 *
 * The helpers below the rebuild read the gossiped SCHEMA value and the
 * config; they need no node and are unit-tested
 * (tests/unit/check_node_ring_view.c).
 */
#ifndef NODE_RING_VIEW_H
#define NODE_RING_VIEW_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "common/rk.h"
#include "gossip/gossip.h"
#include "node/config.h"
#include "node/node.h"
#include "ring/ring.h"

/* What the node knows of ring member i (same index as the ring's). */
struct node_peer {
    char name[GOSSIP_NAME_MAX + 1];
    char iaddr[GOSSIP_ADDR_MAX + 16]; /* internode "host:port" */
    char caddr[GOSSIP_ADDR_MAX + 16]; /* client "host:port" */
    bool up;
    bool self;
    bool replaying;         /* hint replay running */
    bool repl_differs;      /* gossips a replication other than ours */
    uint64_t replay_after;  /* hint replay goes on after this seq (0: start) */
    uint64_t down_since_ms; /* loop clock when marked DOWN, 0 if UP */
    bool silent; /* logged as silent for a write timeout (membership.c) */
};

/* The peer table, shared with coordinator requests in flight, which point
 * at its names and addresses: a table is freed once the node has replaced
 * it (ring rebuild) and no request holds it. */
struct node_peer_tab {
    int refs;
    size_t n;
    struct node_peer p[];
};

/* A node joining (BOOT with tokens) and the ring with it alone placed. Its
 * STATUS epoch and name order the joins: of two whose movements change
 * the replicas of a common range, the one announced first (the smaller
 * epoch, then the smaller name) streams first (node__join_queued). */
struct node_join_ring {
    char name[GOSSIP_NAME_MAX + 1];
    uint64_t epoch; /* of its STATUS BOOT */
    ring *r;        /* same members as n->ring, so same node indices */
};

/* Build the ring (and the pending ring) from gossip's members under the
 * membership epoch, swap them in, rebuild the peer table, note whether
 * the ring is stale and create the missing local ranges. On a token
 * collision with a member of smaller name it lets membership choose new
 * tokens instead (node__boot_retoken). */
void node__ring_rebuild(node *n);
/* Create the missing local ranges of the arcs this node replicates (in the
 * ring and the pending ring); nothing while the node is settling. */
void node__ranges_ensure(node *n);
void node__peer_tab_unref(struct node_peer_tab *t); /* NULL: nothing */
/* The ring with node `name` alone placed, if it is joining; NULL if not.
 * @note borrowed until the next rebuild. */
const ring *node__join_ring(const node *n, const char *name);
/* Free n->joins. */
void node__join_rings_free(node *n);
/* Whether this node, joining, must wait before it streams: a node is
 * leaving (*ranges 0), or a live joining node changes the replicas of a
 * range its own join changes too (ring_moves_overlap: *ranges of this
 * join's moves) and was announced before it (node_join_ring's order;
 * *before true), or after it but has not said that it waits (" queued="
 * in its SCHEMA; *before false: it may be streaming, a join resumed after
 * a restart comes after one that went meanwhile). The first such node,
 * in that order, goes to ahead[0..cap). A joining node that is down holds
 * nobody back. */
bool node__join_queued(
    node *n, char *ahead, size_t cap, size_t *ranges, bool *before);
/* RING_STALE: heard of a newer ring epoch than the one applied, or
 * restarted and no peer heard yet (settling). */
int node__ring_stale_now(node *n);
/* Peers gossiping a replication other than this node's. */
size_t node__repl_mismatches(const node *n);
/* Whether gossip endpoint pi is a node waiting for `ringkv join`
 * (join_ring: false, SCHEMA " join=wait"); if so its client "host:port"
 * goes to caddr[0..cap). */
bool node__peer_waiting(node *n,
                        const struct gossip_peer_info *pi,
                        char *caddr,
                        size_t cap);

/* ---- pure helpers ---- */

/* This node's SCHEMA value into out[0..cap) (cap GOSSIP_VALUE_MAX):
 * "repl=dc1:3,dc2:2 internode=7001 client=7380", the DCs by name (peers
 * compare this text; the order a config lists them in places nothing),
 * " join=wait" while parked, " replacing=NAME" while it replaces (or
 * has replaced) node NAME (replacing NULL or "": none), and " replv=V"
 * for a replication setting of version V > 0 (`ringkv replication set`,
 * node/replication.h). Returns its length. */
int node__schema_format(char *out,
                        size_t cap,
                        const struct node_config *c,
                        uint64_t repl_version,
                        bool parked,
                        const char *replacing);
/* The word after " NAME=" in a gossiped SCHEMA value into out[0..cap),
 * "" if none (or too long): " replacing=X", " queued=X". */
void node__schema_word(char *out,
                       size_t cap,
                       struct rk_slice schema,
                       const char *name);
/* The name after " replacing=" in a gossiped SCHEMA value (a node started
 * with replace: NAME) into out[0..cap), "" if none (or too long). */
void node__schema_replacing(char *out, size_t cap, struct rk_slice schema);
/* The replication part ("dc1:3,dc2:2") of a gossiped SCHEMA value
 * ("repl=dc1:3 internode=7001 client=7380"), borrowed; empty if absent. */
struct rk_slice node__schema_repl(struct rk_slice schema);
/* Whether SCHEMA holds the word `flag` ("join=wait") after its first. */
bool node__schema_flag(struct rk_slice schema, const char *flag);
/* The port SCHEMA gives for service `key` ("internode", "client"), or
 * dflt when it gives none in 1..65535. */
uint32_t
node__schema_port(struct rk_slice schema, const char *key, uint32_t dflt);
/* The ring's state of a member gossiping STATUS s (BOOT: no STATUS yet). */
enum ring_node_state node__ring_state_of(enum gossip_status s);
/* The config's replication as the ring's: SimpleStrategy for a lone "*"
 * entry, else NetworkTopologyStrategy with rdc[] (NODE_CONFIG_MAX_DCS
 * entries, pointing into c) as its DCs. */
void node__ring_repl_fill(struct ring_config *rc,
                          struct ring_dc_rf *rdc,
                          const struct node_config *c);
/* Members m[0..nm) as gossip describes them, replacing[i] the node member
 * i replaces ("" or NULL: none). For the ring: a NORMAL member that
 * replaces a placed member X announcing exactly X's tokens takes X out
 * (RING_REMOVED): the replace is done and X's REMOVED not heard yet. */
void node__ring_replaced(struct ring_member *m,
                         size_t nm,
                         const char *const *replacing);
/* Turn m[0..nm) into the pending ring's members: a member with pend[i]
 * tokens (joining; m[i].tokens holds them) is placed NORMAL with them, one
 * with pend[i] == (size_t)-1 (LEAVING) is out (RING_LEFT), and so is the
 * placed member a joining one replaces with exactly its tokens. Returns
 * how many members were replaced so. */
size_t node__ring_pending_members(struct ring_member *m,
                                  size_t nm,
                                  const size_t *pend,
                                  const char *const *replacing);
/* Whether one of mine[0..nmine) equals a token of a placed member
 * (NORMAL or LEAVING) of m[0..nm) whose name sorts before self. */
bool node__tokens_collide(const uint64_t *mine,
                          size_t nmine,
                          const char *self,
                          const struct ring_member *m,
                          size_t nm);

#endif
