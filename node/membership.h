/*
 * membership.h - the daemon's gossip shell: the libuv timer and UDP socket
 * around the pure gossip state machine, the host names it sends to
 * (resolved off the loop), the handling of gossip's events, a fresh node's
 * boot (choosing its tokens, announcing them) and `ringkv join`. What the
 * ring looks like once membership is known is the ring view's
 * (node/ring_view.h).
 *
 * Everything here runs on the loop thread, but the resolver's work.
 */
#ifndef NODE_MEMBERSHIP_H
#define NODE_MEMBERSHIP_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include <uv.h>

#include "gossip/gossip.h"
#include "net/net.h"
#include "node/node.h"
#include "ring/ring.h"

enum node_boot {
    NODE_BOOT_WAIT = 0, /* fresh: announced BOOT, learning the cluster */
    NODE_BOOT_DONE,     /* NORMAL with tokens */
    NODE_BOOT_STREAM    /* BOOT with tokens: streaming its ranges in */
};

/* A host name gossip sends to ("host:port": a seed that did not resolve
 * at start, a peer that advertises a name), resolved with
 * uv_getaddrinfo so that a slow resolver never stalls the loop. */
#define NODE_NAMES_MAX 256
struct node_name {
    uv_getaddrinfo_t req;
    node *n;
    char host_port[GOSSIP_ADDR_MAX + 1];
    char addr[96];    /* numeric "ip:port"; "" until first resolved */
    uint64_t next_ms; /* resolve again from then (loop clock) */
    bool busy;        /* req in flight */
};

/* The shell's own state, inside struct node (n->membership); nothing
 * outside membership.c reads it. What others read of membership (the
 * gossip state machine n->g, n->boot, n->parked, n->settling) stays in
 * struct node. */
#define NODE_BOOT_HB_MAX 256 /* peers whose heartbeats a joiner follows */

struct node_membership {
    net_udp *udp;
    uv_timer_t gtimer; /* every gossip_interval_ms: gossip_tick */
    int gtimer_open;
    uv_timer_t ptimer; /* the failure detector's clock (gossip_timer) */
    int ptimer_open;
    struct gossip_out gout; /* packets and events of the last call */
    /* host names gossip sends to, resolved off the loop */
    struct node_name *names[NODE_NAMES_MAX];
    size_t nnames;
    uint64_t ticks;               /* gossip ticks since the start */
    size_t boot_known;            /* endpoints known at the last tick */
    uint64_t boot_stable_ticks;   /* ... for this many ticks */
    bool retokening;              /* node__boot_retoken running */
    uint64_t repl_refused_logged; /* tick of the last boot.replication_* */
    /* heartbeats of the peers seen while this node waits to join: a fresh
     * peer it has not heard itself holds it back only while its heartbeat
     * is seen to advance (membership.c, boot_try) */
    struct node_boot_hb {
        char name[GOSSIP_NAME_MAX + 1];
        uint64_t version;
        uint64_t advanced_ms; /* 0: not seen to advance yet */
    } boot_hb[NODE_BOOT_HB_MAX];
    size_t nboot_hb;
    uint64_t settle_until; /* mono ms: settling ends by then regardless */
    /* joining, waiting for this node before it streams (node__join_gate;
     * gossiped as " queued=NAME" in SCHEMA), "" if not, and since when */
    char queued_for[GOSSIP_NAME_MAX + 1];
    uint64_t queued_since;
};

/* node_new / node_free: the shell's buffers (before anything else of it),
 * and what it holds (after the loop has closed its handles). */
void node__membership_init(node *n);
void node__membership_free(node *n);

/* At start: the gossip state machine, this node's announced states
 * (ADDRESS, DC, RACK, SCHEMA; TOKENS and STATUS unless fresh), the resumed
 * join or leave of a restart, the UDP socket and the gossip timer, and the
 * first ring. 0, or an error with why in err. */
int node__gossip_start(node *n, char *err, size_t errlen);
/* At stop: close the socket and the timer (counted in pending_closes),
 * cancel resolutions not started yet. */
void node__gossip_stop(node *n);

/* `ringkv join` on a node started with join_ring false (or whose join was
 * aborted): 0 and it joins as a fresh node does; RK_EBADREQ (why) if it is
 * not waiting for that. */
int node__join(node *n, char *why, size_t cap);
/* A join aborted: tokens withdrawn, BOOT without tokens under a new epoch
 * (*epoch), parked until `ringkv join` (wait_join=1 in node.state, saved
 * first). 0 or the error of the save or the announce. */
int node__join_withdraw(node *n, uint64_t *epoch);

/* Joining, asked each tick until it streams: whether it must wait for
 * another movement first (node__join_queued); if so who into
 * ahead[0..cap) and why into why[0..wcap). A change is logged
 * (boot.queued, boot.queue_done) and gossiped (" queued=NAME" in
 * SCHEMA, which `ringkv status` shows on every node). */
bool node__join_gate(node *n, char *ahead, size_t cap, char *why, size_t wcap);
/* Gossip this node's SCHEMA again (the replication setting changed). */
void node__schema_publish(node *n);

/* The ring rebuild found one of this node's tokens held by a placed member
 * with a smaller name (they joined without knowing of each other): choose
 * new tokens against the ring of the other members m[0..nm) (placed as
 * rc describes), announce and persist them, and rebuild the ring. true
 * when it took that on (whether or not new tokens could be chosen: the
 * caller's ring is out of date either way); false, doing nothing, when
 * called from within its own rebuild. @note m and rc are borrowed for the
 * call. */
bool node__boot_retoken(node *n,
                        const struct ring_member *m,
                        size_t nm,
                        const struct ring_config *rc);

#endif
