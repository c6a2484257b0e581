/*
 * gossip_sim.h - a deterministic simulation of many gossip state machines.
 *
 * N nodes ("n0".."n<N-1>", addresses "sim:<i>") run in one process on a fake
 * clock and a fake network that drops, delays, duplicates and (through random
 * delays) reorders packets. Everything derives from one seed, so a run is
 * replayed exactly from it. Used by the unit tests and by tools/gossip-sim.
 *
 * This is the one second public header of gossip/: it is part of the
 * library's test surface, not something the daemon uses. Pure like the rest:
 * no I/O, no clock.
 */
#ifndef RK_GOSSIP_SIM_H
#define RK_GOSSIP_SIM_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "gossip/gossip.h"

typedef struct gossip_sim gossip_sim;

struct gossip_sim_config {
    size_t n_nodes;
    uint64_t seed;
    double loss;           /* probability a packet is dropped */
    double dup;            /* probability a packet is delivered twice */
    uint32_t delay_min_ms; /* one-way delay, uniform in [min, max] */
    uint32_t delay_max_ms;
    uint32_t interval_ms; /* gossip tick */
    size_t max_packet;
    size_t n_seeds;  /* nodes 0..n_seeds-1 are the seeds */
    size_t n_tokens; /* tokens per node */
    double phi_threshold;
    bool no_probe; /* phi-accrual alone (gossip_config.probe = false) */
    /* Called for every event of every node, may be NULL. */
    void (*on_event)(void *arg, size_t node, const struct gossip_event *ev);
    void *arg;
};

#define GOSSIP_SIM_CONFIG_INIT                                                 \
    {                                                                          \
        .n_nodes = 100, .seed = 1, .loss = 0.1, .dup = 0.02,                   \
        .delay_min_ms = 1, .delay_max_ms = 200, .interval_ms = 1000,           \
        .max_packet = 8192, .n_seeds = 3, .n_tokens = 16, .phi_threshold = 8.0 \
    }

/* Create the nodes, each with ADDRESS, DC, RACK, TOKENS and STATUS NORMAL
 * (epoch 1, applied) set, ticking with random phases. Returns 0,
 * RK_ECONFIG, -ENOMEM. */
int gossip_sim_new(gossip_sim **out, const struct gossip_sim_config *cfg);
void gossip_sim_free(gossip_sim *s);

/* Run every tick and delivery due up to and including until_ms. Returns 0 or
 * the first error a node returned other than the expected drop codes. */
int gossip_sim_run(gossip_sim *s, uint64_t until_ms);

uint64_t gossip_sim_now(const gossip_sim *s);

/* Node i's state machine (borrowed; valid until gossip_sim_free). */
gossip *gossip_sim_node(gossip_sim *s, size_t i);

/* Cut node i off (every packet to or from it is lost) or heal it. */
void gossip_sim_isolate(gossip_sim *s, size_t i, bool isolated);

/* How many nodes other than node i see it DOWN (the failure detectors'
 * verdict on it, as of now). */
size_t gossip_sim_down_count(const gossip_sim *s, size_t i);

/* Kill node i: it stops ticking, sending and receiving, for good. */
void gossip_sim_kill(gossip_sim *s, size_t i);

/* Inject a raw datagram to node `to` as if sent from address `from`. */
int gossip_sim_inject(
    gossip_sim *s, size_t to, const char *from, const uint8_t *pkt, size_t len);

struct gossip_sim_counters {
    uint64_t pkts_sent, pkts_lost, pkts_duplicated, bytes_sent;
    uint64_t ev_up, ev_down, ev_membership, ev_auth_fail;
};

void gossip_sim_counters_get(struct gossip_sim_counters *out,
                             const gossip_sim *s);

#endif
