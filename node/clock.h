/*
 * clock.h - the node's hybrid logical clock (clock.c), its ceiling kept in
 * the system store.
 *
 * Not a public header: only node/'s files include it. Everything runs on
 * the loop thread, but the body of a ceiling save on the pool.
 */
#ifndef NODE_CLOCK_H
#define NODE_CLOCK_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "node/node.h"
#include "storage/hlc.h"

/* The clock's part of struct node (n->clock). */
struct node_clock {
    struct hlc hlc;
    uint64_t skew_logged_ms; /* hlc.refused: last logged */
    uint64_t skew_unlogged;  /* timestamps refused since */
    /* this clock against its peers' (gossip_clock_view, every tick) */
    bool skewed; /* most live peers see it too far off */
    /* compared with its peers' at least once since start (or nothing to
     * compare with): until then it coordinates no writes (node__clock_now) */
    bool judged;
    uint64_t judge_by;  /* mono ms: judged anyway from then (peers silent) */
    int64_t offset_ms;  /* this clock minus its peers' (median) */
    size_t peers_fresh; /* live peers with a fresh estimate */
    size_t peers_far;   /* of those, further than max_clock_drift_ms */
    uint64_t flip_logged_ms; /* clock.skewed / clock.back: last logged */
    uint64_t flips_unlogged; /* turns of skewed not logged since */
    bool flip_logged_state;  /* the state the last log line said */
    bool failing;            /* the last ceiling save failed */
    bool saving;             /* a ceiling save on the pool */
    int err;                 /* the failed save's error */
};

/* open: at start, once the store is open: restores the clock from the
 * ceiling saved (waiting out a crash's window), 0 or an error with why in
 * err. close: at a clean stop, before the store closes, saves the clock
 * itself. now: a timestamp for a write this node coordinates, 0, the
 * error of a ceiling that could not be saved, or RK_ECLOCKSKEW while the
 * node is skewed or its clock is more than max_clock_drift_ms ahead of its
 * wall clock (nothing issued: replicas would refuse it, and the local
 * replica's copy would shadow later writes), or RK_ESTALE until the clock
 * has been compared with its peers' once after the start (a few gossip
 * rounds at most: clock.c, judge). recv: a timestamp a peer sent
 * (a replica write's record, the clock in a replica's answer): 0,
 * RK_ECLOCKSKEW (more than max_clock_drift_ms ahead: the clock stays;
 * counted and logged, from naming the peer) or a save's error. seen: a
 * record copied from a peer (stream, read repair), stored whatever its
 * timestamp: 0 or a save's error. */
int node__clock_open(node *n, char *err, size_t errlen);
void node__clock_close(node *n);
int node__clock_now(uint64_t *out, node *n);
int node__clock_recv(node *n, uint64_t remote, const char *from);
int node__clock_seen(node *n, uint64_t ts);
/* Every gossip tick: the ceiling kept ahead while the node is idle, so
 * that its first write after a pause finds one saved; and the comparison
 * with the peers' clocks (skewed) brought up to date. */
void node__clock_tick(node *n);

/* The message of a request's error err, need replicas needed: a
 * CLOCK_SKEW with none needed is a write this node refused to coordinate
 * (node__clock_now), and the message, into buf, says how far its clock is
 * off. False otherwise (coord_errmsg says it). */
bool node__clock_errmsg(node *n, char *buf, size_t len, int err, int need);

/* The wall clock by which expiries are judged: the node's own, but while
 * it is skewed its peers' (its own minus its offset), so that a node whose
 * clock is wrong neither hides live values nor serves expired ones. */
uint64_t node__clock_cluster_ms(const node *n);

#endif
