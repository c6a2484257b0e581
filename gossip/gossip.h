/*
 * gossip.h - cluster membership and failure detection as a pure state machine.
 *
 * Cassandra-style anti-entropy gossip: every tick a node sends a SYN of
 * digests (node, generation, version) to one random live peer, sometimes to a
 * down peer and to a seed; the receiver answers an ACK with the deltas the
 * sender lacks and requests for what it lacks itself; an ACK2 completes the
 * round. Every packet carries the cluster name and a MAC (wire/gossip_msg.h);
 * packets that fail are dropped and counted. Every packet is numbered
 * (boot, seq) inside the MAC, and replays are dropped; replies go to the
 * sender's gossiped address, or, to a sender that is not a known member,
 * to the source with no more bytes than it sent (fresh.c).
 *
 * Each endpoint has a generation (set at start, larger at every restart), a
 * version that grows at every heartbeat and state change, and versioned
 * application states (enum gossip_key). Versions only move forward: a
 * replayed or reordered packet never rolls a state back, a higher generation
 * replaces the old state wholesale and an older one is ignored.
 *
 * Two failure detectors mark peers UP and DOWN (probe.c's opening comment
 * has the details). Peers that announce an INCARNATION speak the probe
 * protocol (SWIM with Lifeguard's refinements, wire/gossip_probe.h): each
 * node pings one peer every probe period, asks k others to ping it when the
 * ack is late, suspects it when none answers, spreads the suspicion as a
 * rumor, and convicts it when the suspicion outlives a timeout that
 * shortens as other nodes confirm it; the suspected node refutes by raising
 * its incarnation. A phi-accrual detector over heartbeats remains for every
 * peer (the only one for peers that do not speak probes, and the one by
 * which a cut-off node sees the others go). DOWN only changes routing;
 * only STATUS and TOKENS changes (join, leave, removenode) change membership.
 * Every membership transition is stamped with an epoch one above the highest
 * seen; nodes gossip the highest epoch they know (RING_EPOCH) and a node whose
 * applied ring is older than an epoch it has heard of is stale. LEFT and
 * REMOVED endpoints are kept in quarantine (no UP, no new generation accepted)
 * and then evicted, leaving a tombstone so a late packet cannot bring the
 * ghost back.
 *
 * Purity: no I/O, no clock, no globals. Time is `now_ms` (any monotonic
 * millisecond clock, the same for all calls on one instance), randomness comes
 * from a PRNG seeded by the caller, packets to send and events are returned in
 * a struct gossip_out. The daemon's shell owns the socket and the timer.
 */
#ifndef RK_GOSSIP_H
#define RK_GOSSIP_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "common/rk.h"

typedef struct gossip gossip;

#define GOSSIP_NAME_MAX  64   /* node and cluster names (the wire limit) */
#define GOSSIP_ADDR_MAX  128  /* "host:port" */
#define GOSSIP_VALUE_MAX 4096 /* one application state */
/* The most tokens a node can announce: TOKENS holds 8 bytes each */
#define GOSSIP_MAX_TOKENS (GOSSIP_VALUE_MAX / 8)
#define GOSSIP_SEEDS_MAX  64

/* Application state keys (their numbers are part of the wire format). */
enum gossip_key {
    GOSSIP_KEY_STATUS = 0,  /* "<STATUS> <epoch>", set by gossip_status_set */
    GOSSIP_KEY_TOKENS = 1,  /* big-endian u64 tokens, see gossip_tokens_* */
    GOSSIP_KEY_DC = 2,      /* text */
    GOSSIP_KEY_RACK = 3,    /* text */
    GOSSIP_KEY_ADDRESS = 4, /* "host:port" of the gossip socket */
    GOSSIP_KEY_LOAD = 5,    /* decimal bytes */
    GOSSIP_KEY_RING_EPOCH = 6,  /* decimal, highest epoch known; gossip-owned */
    GOSSIP_KEY_SCHEMA = 7,      /* replication settings, opaque text */
    GOSSIP_KEY_INCARNATION = 8, /* decimal; gossip-owned. Its presence says
                                   the node speaks the probe protocol */
    GOSSIP_KEY_CLOCK = 9,       /* "1"; gossip-owned. Its presence says the node
                                   reads packets stamped with a wall clock */
    GOSSIP_KEY_FRESH = 10,      /* "1"; gossip-owned. Its presence says the node
                                   numbers its packets (boot, seq) and reads
                                   numbered ones: its unnumbered packets are
                                   replays (fresh.c) */
    GOSSIP_KEY_COUNT = 11
};

enum gossip_status {
    GOSSIP_STATUS_UNKNOWN = 0, /* no STATUS yet */
    GOSSIP_STATUS_BOOT,
    GOSSIP_STATUS_NORMAL,
    GOSSIP_STATUS_LEAVING,
    GOSSIP_STATUS_LEFT,
    GOSSIP_STATUS_REMOVED,
};

struct gossip_config {
    const char *cluster_name; /* 1..64 bytes, required */
    const char *node_name;    /* 1..64 bytes, unique in the cluster */
    const uint8_t *secret;    /* cluster secret file bytes, required */
    size_t secret_len;
    uint64_t generation; /* >= 1; persisted, larger at every restart */
    uint64_t seed;       /* PRNG seed (e.g. from getrandom in the daemon) */
    const char *const *seeds; /* seed addresses ("host:port"), may be NULL */
    size_t n_seeds;           /* <= GOSSIP_SEEDS_MAX */
    double phi_threshold;     /* convict above this phi; default 8 */
    uint32_t interval_ms;     /* expected tick period; default 1000 */
    size_t max_packet;        /* bytes per datagram, 1024..65507; 8192 */
    uint64_t quarantine_ms;   /* LEFT/REMOVED kept this long; 72 h */
    /* The probe detector (probe.c). Off: phi-accrual alone, as before it,
     * and this node neither probes nor announces an INCARNATION. */
    bool probe;
    uint32_t probe_interval_ms; /* one peer probed per period; 0: interval/3 */
    uint32_t probe_timeout_ms;  /* direct ack wait; 0: interval/2 */
    uint32_t indirect_probes;   /* peers asked to probe a silent one; 3 */
    uint32_t suspicion_ms;      /* shortest suspicion; 0: interval */
    uint32_t suspicion_max_ms;  /* longest (unconfirmed); 0: 5 x shortest */
    /* Number every packet (boot, seq), announce FRESH and drop replays
     * (fresh.c). Off: as a node that predates numbers, to test mixed
     * versions (it still reads numbered packets, which such a node does
     * not; nobody sends it one once it is known). */
    bool numbered;
};

#define GOSSIP_CONFIG_INIT                                             \
    {                                                                  \
        .phi_threshold = 8.0, .interval_ms = 1000, .max_packet = 8192, \
        .quarantine_ms = UINT64_C(72) * 3600 * 1000, .generation = 1,  \
        .probe = true, .indirect_probes = 3, .numbered = true          \
    }

/* ---- output of recv and tick ------------------------------------------- */

enum gossip_event_type {
    GOSSIP_EV_JOINED,     /* a new endpoint was learned (name) */
    GOSSIP_EV_RESTARTED,  /* an endpoint came back with a new generation */
    GOSSIP_EV_UP,         /* failure detector: peer alive (name) */
    GOSSIP_EV_DOWN,       /* failure detector: peer convicted (name) */
    GOSSIP_EV_SUSPECT,    /* probe detector: peer suspected (name) */
    GOSSIP_EV_STATE,      /* a peer's application state changed (name, key) */
    GOSSIP_EV_MEMBERSHIP, /* STATUS/TOKENS/DC/RACK/ADDRESS changed somewhere:
                             rebuild the ring (once per call at most) */
    GOSSIP_EV_RING_STALE, /* a newer epoch than the applied one is known */
    GOSSIP_EV_RING_CAUGHT_UP, /* applied epoch reached the highest known */
    GOSSIP_EV_EVICTED,        /* quarantine over, endpoint forgotten (name) */
    GOSSIP_EV_AUTH_FAIL,      /* packet with a bad MAC or cluster name (addr) */
    GOSSIP_EV_BAD_PACKET,     /* malformed packet (addr, err) */
    GOSSIP_EV_REPLAYED,       /* a packet of `name` seen already, of an
                                 older boot of it, too far behind its newest,
                                 or unnumbered from a node that numbers its
                                 packets: dropped (addr, name) */
    GOSSIP_EV_EPOCH_ADOPTED,  /* an epoch no STATUS announces was heard for
                                 GOSSIP_HEARSAY_ROUNDS: the ring is built
                                 under it (epoch; gossip_epoch_ring) */
};

struct gossip_event {
    enum gossip_event_type type;
    char name[GOSSIP_NAME_MAX + 1]; /* endpoint, or "" */
    char addr[GOSSIP_ADDR_MAX + 1]; /* source address for packet events */
    enum gossip_key key;            /* GOSSIP_EV_STATE */
    uint64_t epoch;                 /* RING_STALE / CAUGHT_UP / EPOCH_ADOPTED */
    int err;                        /* BAD_PACKET / AUTH_FAIL code */
};

struct gossip_packet {
    char to[GOSSIP_ADDR_MAX + 1]; /* destination address, as gossiped */
    uint8_t *buf;                 /* owned by the gossip_out */
    size_t len;
};

/* Filled by gossip_recv / gossip_tick. Every call first empties it (keeping
 * its memory), so the caller handles one call's output before the next. */
struct gossip_out {
    struct gossip_packet *pkts;
    size_t n_pkts, cap_pkts;
    struct gossip_event *events;
    size_t n_events, cap_events;
};

void gossip_out_init(struct gossip_out *out);
/* Drop the packets and events, keep the arrays. */
void gossip_out_clear(struct gossip_out *out);
/* Free everything; the struct may be reused after gossip_out_init. NULL ok. */
void gossip_out_free(struct gossip_out *out);

/* ---- lifecycle ---------------------------------------------------------- */

/* Create a node's gossip state. Copies everything it needs from cfg (the
 * secret is turned into a MAC key at once). The node knows only itself:
 * set its ADDRESS (required before peers can answer), DC, RACK, TOKENS and
 * STATUS next. Returns 0, RK_ECONFIG (bad or missing field), -ENOMEM. */
int gossip_new(gossip **out, const struct gossip_config *cfg);

/* Wipes the key and frees. NULL is a no-op. */
void gossip_free(gossip *g);

/* ---- driving it --------------------------------------------------------- */

/* Handle one datagram received from address `from` ("host:port", at most
 * GOSSIP_ADDR_MAX bytes). Replies and events go to out. Replies go to the
 * sender's gossiped ADDRESS when it is a known member, never to `from`
 * (which anybody can forge); to a sender that is not, they go to `from`
 * only if they take no more bytes than the packet did, or at once in full
 * if the packet itself gave the sender's ADDRESS and it is `from` (fresh.c:
 * no reflection, no amplification). Bad packets are dropped, counted and
 * reported as an event; so are replays (GOSSIP_EV_REPLAYED, returns 0).
 * Returns 0 when the packet was processed or dropped as a replay, RK_EAUTH
 * (bad MAC or cluster name), RK_EPROTO / RK_EVERSION (malformed), -ENOMEM
 * (the state stays consistent; out may miss some replies). */
int gossip_recv(gossip *g,
                uint64_t now_ms,
                const char *from,
                const uint8_t *pkt,
                size_t len,
                struct gossip_out *out);

/* One gossip round: heartbeat, failure detection, quarantine expiry and SYNs
 * to the chosen peers. Call every interval_ms. Returns 0 or -ENOMEM. */
int gossip_tick(gossip *g, uint64_t now_ms, struct gossip_out *out);

/* The probe detector's clock: when gossip_timer wants to be called next
 * (UINT64_MAX: nothing pending; it may be in the past). It moves after every
 * call that changes g, so the caller asks again after each. */
uint64_t gossip_timer_due(const gossip *g);

/* Start the probes due, act on late acks (indirect probes, suspicion) and
 * expired suspicions (conviction). Calling it early does nothing harmful.
 * Returns 0 or -ENOMEM. */
int gossip_timer(gossip *g, uint64_t now_ms, struct gossip_out *out);

/* ---- this node's application states ------------------------------------ */

/* Set one of this node's states (not STATUS or RING_EPOCH: RK_EBADREQ).
 * Bumps the version so it spreads. Copies value. Returns 0, RK_EBADREQ,
 * RK_ETOOLARGE (over GOSSIP_VALUE_MAX or the packet budget), -ENOMEM. */
int gossip_state_set(gossip *g,
                     enum gossip_key key,
                     const void *value,
                     size_t len);

/* Set this node's STATUS. A membership transition: epoch 0 stamps a new
 * epoch (highest known + 1); a non-zero epoch restores one (a restart
 * re-announcing its persisted state). *out_epoch (if not NULL) gets the
 * epoch used, which the daemon persists. Returns 0, RK_EBADREQ, -ENOMEM. */
int gossip_status_set(gossip *g,
                      enum gossip_status status,
                      uint64_t epoch,
                      uint64_t *out_epoch);

/* Set this node's TOKENS (n <= GOSSIP_MAX_TOKENS). Does not stamp an
 * epoch: the STATUS change that makes them count does. */
int gossip_tokens_set(gossip *g, const uint64_t *tokens, size_t n);

/* removenode: mark a dead peer REMOVED on its behalf, stamping a new epoch
 * and quarantining it. As Cassandra does, the peer's state is re-issued under
 * generation + 1 (its states kept, STATUS replaced), so every node takes it
 * whatever versions it held. Returns 0, RK_ENOTFOUND, RK_EBADREQ (self or
 * already LEFT/REMOVED), -ENOMEM. */
int gossip_peer_remove(gossip *g,
                       const char *name,
                       uint64_t now_ms,
                       uint64_t *out_epoch);

/* The same for STATUS LEAVING (a peer NORMAL until then: removenode
 * streams a dead node's ranges away on its behalf before REMOVED), NORMAL
 * (a peer LEAVING until then: a removenode aborted, `ringkv abort`) or
 * REMOVED (gossip_peer_remove). RK_EBADREQ for any other status, LEAVING
 * for a peer that is not NORMAL, or NORMAL for one that is not LEAVING. */
int gossip_peer_status_set(gossip *g,
                           const char *name,
                           enum gossip_status status,
                           uint64_t now_ms,
                           uint64_t *out_epoch);

/* ---- reading the cluster ------------------------------------------------ */

struct gossip_peer_info {
    const char *name; /* borrowed */
    bool self;
    bool up;              /* failure detector verdict (self: always true) */
    bool quarantined;     /* LEFT/REMOVED, waiting for eviction */
    double phi;           /* current suspicion (0 for self / never heard) */
    bool probes;          /* speaks the probe protocol */
    bool suspect;         /* probe detector: suspected, not yet convicted */
    uint64_t incarnation; /* highest known (self: its own) */
    uint64_t generation;
    uint64_t version; /* heartbeat: highest version known */
    enum gossip_status status;
    uint64_t status_epoch;
    /* Application states, borrowed; empty slice if unset. */
    struct rk_slice state[GOSSIP_KEY_COUNT];
    uint64_t state_version[GOSSIP_KEY_COUNT];
    /* Its wall clock minus this node's, estimated from the stamps of its
     * recent packets (gossip_wall_set); clock_known false: none fresh. */
    bool clock_known;
    int64_t clock_offset_ms;
};

/* Number of endpoints known, self included (index 0 is always self). */
size_t gossip_peer_count(const gossip *g);

/* Describe endpoint i (0 <= i < count) as of now_ms (for phi). Borrowed
 * pointers live until the next call that changes g (recv, tick, *_set,
 * peer_remove). Returns 0 or RK_ENOTFOUND. */
int gossip_peer_get(struct gossip_peer_info *out,
                    const gossip *g,
                    size_t i,
                    uint64_t now_ms);

/* The same by name. Returns 0 or RK_ENOTFOUND. */
int gossip_peer_find(struct gossip_peer_info *out,
                     const gossip *g,
                     const char *name,
                     uint64_t now_ms);

/* ---- wall clocks -------------------------------------------------------- */

/* This node's wall clock (Unix ms), set before each recv, tick and timer:
 * SYN, ACK and ACK2 to peers that announce CLOCK carry it, and the stamps
 * of the packets received are compared with it. The first non-zero call
 * announces CLOCK. Wall clocks only feed the estimates below: they never
 * move anything else (no HLC travels in gossip). 0: none (nothing is
 * stamped or estimated; the simulator's default). */
void gossip_wall_set(gossip *g, uint64_t wall_ms);

/* The wall clock (Unix ms) at which the datagram given to the next
 * gossip_recv arrived, when it is known and earlier than the clock set
 * by gossip_wall_set: its stamp is compared with this instead. A packet
 * that waited in the socket while this node was stopped would otherwise
 * make its sender look behind by the wait, and this node ahead of all
 * (test_regression_stopped_node_judges_skew). Used by that one
 * gossip_recv; 0: not known. */
void gossip_arrival_set(gossip *g, uint64_t wall_ms);

/* How this node's wall clock compares with its live peers'. Each peer's
 * offset is the largest of its last GOSSIP__CLOCK_SAMPLES stamps minus
 * this node's clock on receipt (one-way: the network delay makes a peer
 * look behind; the largest is the least delayed), counted while its
 * newest sample is younger than GOSSIP_CLOCK_FRESH_INTERVALS intervals. */
#define GOSSIP_CLOCK_FRESH_INTERVALS 30
struct gossip_clock_view {
    size_t live;       /* live peers (UP, not quarantined) */
    size_t fresh;      /* of those, with a fresh estimate */
    size_t far;        /* of those, more than max_drift_ms away */
    bool skewed;       /* far >= 1, far > fresh / 2, fresh > live / 2 */
    int64_t offset_ms; /* this node's clock minus its peers' (the median
                          over the fresh ones, at most 64; of two middle
                          ones the nearer to 0); 0 if none */
};

/* Fills *out as of now_ms. max_drift_ms 0: nothing is far, never skewed.
 * With two nodes whose clocks differ, both are skewed: no majority can
 * tell which one is wrong. */
void gossip_clock_view(struct gossip_clock_view *out,
                       const gossip *g,
                       uint64_t now_ms,
                       uint64_t max_drift_ms);

/* ---- ring epochs -------------------------------------------------------- */

/* Highest epoch known from any STATUS or RING_EPOCH. */
uint64_t gossip_epoch_max(const gossip *g);

/* The epoch to build the ring under: the membership epoch (the highest a
 * STATUS announces), or a higher one heard of (RING_EPOCH, OLD_RING) that
 * no STATUS has announced for GOSSIP_HEARSAY_ROUNDS ticks with nothing new
 * learned meanwhile (GOSSIP_EV_EPOCH_ADOPTED). Such an epoch can never be
 * built from any member's STATUS: the STATUS that made it was lost (its
 * endpoint evicted) or it was never announced (until 2026-12-07 a
 * coordinator could invent one: coord.c, OLD_RING), and every node that
 * heard it stayed stale -- coordinating nothing -- for good, re-teaching it
 * to the others. Labelling the same members with it ends that; a node
 * still missing a STATUS is given GOSSIP_HEARSAY_ROUNDS, many times what
 * gossip takes to spread one, to learn it first. */
uint64_t gossip_epoch_ring(const gossip *g);
#define GOSSIP_HEARSAY_ROUNDS 20
/* Highest epoch among the STATUS values gossip holds (ever held): the epoch
 * of the ring the current endpoint set describes. The daemon builds its ring
 * from the endpoints and applies it with this epoch. */
uint64_t gossip_epoch_membership(const gossip *g);
/* The daemon reports the epoch of the ring it swapped in (never moves back).
 * GOSSIP_EV_RING_CAUGHT_UP is reported by the next recv or tick. */
void gossip_ring_applied(gossip *g, uint64_t epoch);
/* True while an epoch newer than the applied ring is known: coordinate
 * nothing (RK_ESTALE) until caught up. */
bool gossip_ring_stale(const gossip *g);
/* An epoch learned outside gossip: a replica refused a request planned on
 * the applied ring as older than its own (RK_EOLDRING), so some member has
 * applied `epoch` (a lower bound of its own) or later. Known from now on,
 * as if gossip had said it: the node is stale until its ring reaches it
 * (GOSSIP_EV_RING_STALE by the next recv or tick), and gossips it as its
 * RING_EPOCH once it next receives a packet. */
void gossip_epoch_heard(gossip *g, uint64_t epoch);

/* ---- helpers for state values ------------------------------------------- */

const char *gossip_status_name(enum gossip_status s);
/* Parse a STATUS value "<NAME> <epoch>". Returns 0 or RK_EPROTO. */
int gossip_status_parse(enum gossip_status *out,
                        uint64_t *out_epoch,
                        struct rk_slice value);
/* Decode a TOKENS value into out[0..cap); *out_n gets the count.
 * Returns 0, RK_EPROTO (length not a multiple of 8), RK_ETOOLARGE (cap). */
int gossip_tokens_decode(uint64_t *out,
                         size_t cap,
                         size_t *out_n,
                         struct rk_slice value);

/* ---- counters ----------------------------------------------------------- */

struct gossip_stats {
    uint64_t rx_packets, rx_bytes, tx_packets, tx_bytes;
    uint64_t rx_syn, rx_ack, rx_ack2;
    uint64_t rx_auth_fail;     /* bad MAC */
    uint64_t rx_wrong_cluster; /* good MAC, other cluster name */
    uint64_t rx_malformed;
    uint64_t rx_replayed;      /* dropped: seen already, older boot, too far
                                  behind, or unnumbered from a node that
                                  numbers its packets (fresh.c) */
    uint64_t replies_withheld; /* replies to a sender that is not a known
                                  member, not sent: more bytes than its
                                  packet */
    uint64_t deltas_applied;   /* deltas that moved a version forward */
    uint64_t deltas_ignored;   /* old, replayed, gapped or quarantined */
    uint64_t rounds;
    uint64_t syn_back; /* SYNs sent back to a SYN that missed endpoints */
    /* the probe detector */
    uint64_t rx_probe, tx_probe; /* probe packets (all five types) */
    uint64_t probes;             /* probes started by this node */
    uint64_t probes_indirect;    /* of which went on to indirect probes */
    uint64_t probes_failed;      /* of which nobody answered: suspicion */
    uint64_t suspicions;         /* suspicions started (own or heard) */
    uint64_t convictions;        /* suspicions that ran out: DOWN */
    uint64_t refutations;        /* times this node refuted a suspicion */
    uint32_t health;             /* Lifeguard local health (0: healthy) */
};

void gossip_stats_get(struct gossip_stats *out, const gossip *g);

/* phi of the exponential arrival model used by the detector, exposed for
 * tests and tools: log10(e) * since_ms / mean_interval_ms. */
double gossip_phi(double since_ms, double mean_interval_ms);

#endif
