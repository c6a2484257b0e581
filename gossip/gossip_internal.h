/*
 * gossip_internal.h - what gossip.c and round.c share and nobody else sees:
 * the gossip struct (opaque in gossip.h), its endpoint table, and the
 * helpers the round uses on them. gossip.h is the part's face.
 */
#ifndef RK_GOSSIP_INTERNAL_H
#define RK_GOSSIP_INTERNAL_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "gossip/gossip.h"
#include "wire/gossip_probe.h"
#include "wire/wire.h"

#define GOSSIP__FD_WINDOW     32 /* intervals the failure detector keeps */
#define GOSSIP__CONFIRM_K     3 /* confirmations that shorten a suspicion most */
#define GOSSIP__PROBES        4    /* probes of this node in flight at most */
#define GOSSIP__RELAYS        16   /* probes run on others' behalf at most */
#define GOSSIP__CLOCK_SAMPLES 4    /* clock offsets kept per peer (clock.c) */
#define GOSSIP__FRESH_WINDOW  1024 /* packets of a peer taken out of order */

struct gossip__state {
    uint64_t version; /* 0: never set */
    uint8_t *val;
    size_t len;
};

struct gossip__ep {
    char name[GOSSIP_NAME_MAX + 1];
    size_t name_len;
    uint64_t generation;
    uint64_t version;
    struct gossip__state st[GOSSIP_KEY_COUNT];
    enum gossip_status status;
    uint64_t status_epoch;
    /* failure detector */
    bool up;
    bool has_arrival;
    uint64_t last_arrival;
    uint16_t iv[GOSSIP__FD_WINDOW];
    uint32_t iv_n, iv_pos, iv_sum;
    /* quarantine of LEFT / REMOVED */
    bool quarantined;
    uint64_t quarantine_until;
    /* the last SYN sent back to it because its SYN missed endpoints */
    bool syn_back_sent;
    uint64_t syn_back_ms;
    /* probe detector (probe.c) */
    bool probes;          /* speaks it: INCARNATION known, or probed us */
    uint64_t incarnation; /* highest known for this generation */
    bool suspect;         /* suspected at suspect_inc since suspect_since */
    uint64_t suspect_inc, suspect_since;
    bool suspect_looked; /* looked for itself before convicting */
    bool self_confirmed; /* this node's own probe failed too */
    uint32_t n_confirm;  /* distinct suspecters heard, the first included */
    uint64_t confirm[GOSSIP__CONFIRM_K + 1]; /* their name hashes */
    bool convicted;         /* DOWN by the probe detector: held DOWN */
    uint64_t convicted_inc; /* until an incarnation above this one */
    uint64_t told_ms;       /* last time it was told it is suspected */
    uint64_t up_first;      /* first UP of this generation (0: never) */
    /* its wall clock minus ours, as its packets said (clock.c) */
    int64_t clock_off[GOSSIP__CLOCK_SAMPLES];
    uint64_t clock_at[GOSSIP__CLOCK_SAMPLES]; /* now_ms of each; 0: none */
    uint32_t clock_pos;
    /* the numbered packets heard from it (fresh.c): its boot (0: none yet),
     * the highest seq of that boot, and which of the GOSSIP__FRESH_WINDOW
     * seqs up to it came (bit seq % window) */
    uint64_t fresh_boot, fresh_top;
    uint64_t fresh_seen[GOSSIP__FRESH_WINDOW / 64];
    bool numbers; /* sent us a numbered packet (in this generation): it
                     reads them, FRESH or not (an older node that relayed
                     its state may have dropped the key) */
};

/* A probe this node runs: ping `name`, then ask others, then suspect. */
struct gossip__probe {
    bool active, indirect, verify;
    char name[GOSSIP_NAME_MAX + 1];
    uint64_t seq, deadline;
    uint64_t inc; /* the peer's incarnation when the probe started */
    uint32_t nacks_wanted, nacks, untried; /* untried: relays that could
                                              not probe it */
};

/* A probe run for someone else (PING_REQ): ACK or NACK goes back to them. */
struct gossip__relay {
    bool active;
    char target[GOSSIP_NAME_MAX + 1];
    char reply_to[GOSSIP_ADDR_MAX + 1];
    uint64_t their_seq, seq, deadline;
};

/* News to spread: `origin` holds `name` ALIVE or SUSPECT at `inc`. */
struct gossip__rumor {
    char name[GOSSIP_NAME_MAX + 1];
    char origin[GOSSIP_NAME_MAX + 1];
    uint64_t generation, inc;
    int kind;      /* enum wire_probe_rumor_kind */
    uint32_t left; /* transmissions left */
};

struct gossip__tomb {
    char name[GOSSIP_NAME_MAX + 1];
    uint64_t generation;
};

struct gossip {
    char cluster[GOSSIP_NAME_MAX + 1];
    size_t cluster_len;
    struct wire_key key;
    char (*seeds)[GOSSIP_ADDR_MAX + 1];
    size_t n_seeds;
    double phi_threshold;
    uint32_t interval_ms;
    size_t max_packet;
    uint64_t quarantine_ms;
    uint64_t rng;

    struct gossip__ep *eps; /* eps[0] is this node */
    size_t n_eps, cap_eps;
    uint32_t *index; /* slot: endpoint index + 1, 0 = empty */
    size_t index_cap;
    struct gossip__tomb *tombs;
    size_t n_tombs, cap_tombs;

    uint64_t max_epoch, membership_epoch, applied_epoch, own_ring_epoch;
    /* gossip_epoch_ring: an epoch above membership_epoch adopted, and the
     * wait before it (since when max_epoch and membership_epoch have
     * stood at hearsay_max, hearsay_mem; 0: not waiting) */
    uint64_t adopted_epoch;
    uint64_t hearsay_since, hearsay_max, hearsay_mem;
    bool stale_reported;
    bool ticked;
    uint64_t last_tick;
    struct gossip_stats stats;

    /* probe detector (probe.c) */
    bool probe_on;
    uint32_t probe_interval_ms, probe_timeout_ms, indirect_probes;
    uint32_t suspicion_ms, suspicion_max_ms;
    uint64_t incarnation; /* this node's */
    uint32_t health;      /* Lifeguard's local health multiplier */
    double direct_miss;   /* recent share of probes the direct ping missed */
    uint64_t seq;
    bool probe_started;
    uint64_t next_probe;
    size_t *order; /* probe order: a shuffle of the peers' indexes */
    size_t n_order, cap_order, order_pos;
    struct gossip__probe probes[GOSSIP__PROBES];
    struct gossip__relay relays[GOSSIP__RELAYS];
    struct gossip__rumor *rumors;
    size_t n_rumors, cap_rumors;
    size_t n_suspects; /* endpoints with suspect set */

    /* wall clocks (clock.c) */
    uint64_t wall_ms;     /* this node's, as of the last gossip_wall_set */
    uint64_t arrival_ms;  /* the packet in gossip_recv's (0: wall_ms) */
    bool clock_announced; /* CLOCK set in its own states */

    /* packet numbers and replies (fresh.c) */
    bool numbered;      /* gossip_config.numbered */
    uint64_t fresh_seq; /* the last seq this node stamped */
    /* While gossip_recv handles a packet from a sender that is not a known
     * member: its source address, where replies go unnumbered if its packet
     * was (plain_to) and with no rumors (bare_to); NULL otherwise. */
    const char *plain_to, *bare_to;
};

/* ---- gossip.c ---- */

/* Randomness from the seeded generator: below n (0 when n is 0), and in
 * [0, 1). */
size_t gossip__rng_below(gossip *g, size_t n);
double gossip__rng_unit(gossip *g);
bool gossip__slice_eq_str(struct rk_slice s, const char *str, size_t len);
/* Copy a name of len bytes into dst (cap bytes), cut and NUL-terminated. */
void gossip__copy_name(char *dst, size_t cap, const void *src, size_t len);
/* The states whose change is a membership change (they carry an epoch). */
bool gossip__is_membership_key(unsigned k);

/* Append an event (or a packet, whose buf it takes, freed on failure) to
 * out. NULL / -ENOMEM when out of memory. */
struct gossip_event *gossip__ev_push(struct gossip_out *out,
                                     enum gossip_event_type type,
                                     const char *name);
int gossip__pkt_push(struct gossip_out *out,
                     const char *to,
                     uint8_t *buf,
                     size_t len);

/* The endpoint table: the name index rebuilt for `want` endpoints; the
 * index of a name, or -1; a new endpoint (its index in *out_idx). */
int gossip__index_rebuild(gossip *g, size_t want);
long gossip__ep_find(const gossip *g, const void *name, size_t len);
int gossip__ep_add(gossip *g, const void *name, size_t len, size_t *out_idx);
void gossip__ep_clear_states(struct gossip__ep *e);
/* Store a copy of val (kept NUL-terminated) as e's state `key`. */
int gossip__ep_store(struct gossip__ep *e,
                     unsigned key,
                     uint64_t version,
                     const void *val,
                     size_t len);
struct gossip__tomb *
gossip__tomb_find(const gossip *g, const void *name, size_t len);
/* e's gossip address as a C string, or NULL when it has no usable one. */
const char *gossip__ep_addr(const struct gossip__ep *e);
/* The endpoint (not this node) whose gossip address is `to`, or NULL. */
const struct gossip__ep *gossip__ep_at(const gossip *g, const char *to);

/* The failure detector: forget e's arrivals; e's phi now; record an
 * interval; a newer heartbeat of e arrived (GOSSIP_EV_UP if it was down). */
void gossip__fd_reset(struct gossip__ep *e);
double gossip__fd_phi(const struct gossip__ep *e, uint64_t now);
void gossip__fd_sample(struct gossip__ep *e, uint64_t ms);
int gossip__fd_arrival(gossip *g,
                       struct gossip__ep *e,
                       uint64_t now,
                       struct gossip_out *out);

/* Epochs: parse a decimal epoch; note one seen; keep this node's
 * RING_EPOCH equal to the highest known; report the ring stale or caught
 * up; a STATUS value landed on e (self or peer): track status, epochs and,
 * for a peer, quarantine. */
int gossip__parse_u64(uint64_t *out, const uint8_t *p, size_t len);
/* Set one of this node's own states to a decimal number (a new version). */
int gossip__own_u64_set(gossip *g, unsigned key, uint64_t v);
void gossip__epoch_seen(gossip *g, uint64_t epoch);
int gossip__own_ring_epoch_sync(gossip *g);
int gossip__stale_check(gossip *g, struct gossip_out *out);
/* Every tick: adopt an epoch heard of but announced by no STATUS once it
 * has stood for GOSSIP_HEARSAY_ROUNDS intervals (gossip_epoch_ring). */
int gossip__hearsay_check(gossip *g, uint64_t now, struct gossip_out *out);
int gossip__status_applied(gossip *g,
                           struct gossip__ep *e,
                           bool is_self,
                           uint64_t now,
                           struct gossip_out *out);

/* ---- clock.c ---- */

/* The wall clock to stamp on a SYN/ACK/ACK2 to `to` (0: none:
 * no wall clock set, or the peer there did not announce CLOCK); a
 * first-hand packet from endpoint idx stamped remote_wall. */
uint64_t gossip__clock_stamp(const gossip *g, const char *to);
void gossip__clock_sample(gossip *g,
                          size_t idx,
                          uint64_t now_ms,
                          uint64_t remote_wall);
/* Endpoint e's offset estimate at now_ms into *out; false if none fresh. */
bool gossip__clock_offset(int64_t *out,
                          const gossip *g,
                          const struct gossip__ep *e,
                          uint64_t now_ms);

/* ---- fresh.c ---- */

/* Set up numbering from cfg: announce FRESH (gossip_new). */
int gossip__fresh_init(gossip *g, const struct gossip_config *cfg);
/* The boot and seq to stamp on a packet to `to` (a new seq each call), or
 * false: send it unnumbered (to a node that predates numbers). */
bool gossip__fresh_stamp(gossip *g,
                         const char *to,
                         uint64_t *boot,
                         uint64_t *seq);
/* A packet of this cluster from `sender` numbered (boot, seq) (boot 0:
 * unnumbered) arrived: true if it must be dropped as a replay. */
bool gossip__fresh_replayed(const gossip *g,
                            struct rk_slice sender,
                            uint64_t boot,
                            uint64_t seq);
/* It was taken: remember its number, if the sender is an endpoint now. */
void gossip__fresh_seen(gossip *g,
                        struct rk_slice sender,
                        uint64_t boot,
                        uint64_t seq);
/* Replies to a sender that is not a known member, the packets in out to
 * `from`, are dropped (counted) when together they take more than `limit`
 * bytes. */
void gossip__reply_bound(gossip *g,
                         struct gossip_out *out,
                         const char *from,
                         size_t limit);

/* ---- probe.c ---- */

/* Set up the probe detector from cfg (announces INCARNATION 0). */
int gossip__probe_init(gossip *g, const struct gossip_config *cfg);
void gossip__probe_free(gossip *g);
/* A probe packet of this cluster from another node arrived (round.c
 * decoded and authenticated it); `from` is its source address. */
int gossip__probe_recv(gossip *g,
                       uint64_t now,
                       const char *from,
                       const struct wire_probe_msg *m,
                       struct gossip_out *out);
/* A SYN/ACK/ACK2 came from peer e itself: a convicted node is told it is
 * suspected, so it refutes. */
int gossip__probe_first_hand(gossip *g,
                             struct gossip__ep *e,
                             uint64_t now,
                             const char *from,
                             struct gossip_out *out);
/* e's INCARNATION state changed (learned through anti-entropy). */
int gossip__probe_inc_learned(gossip *g,
                              struct gossip__ep *e,
                              uint64_t now,
                              struct gossip_out *out);
/* A newer heartbeat of e arrived: a convicted e is told, so it refutes. */
int gossip__probe_heartbeat(gossip *g,
                            struct gossip__ep *e,
                            uint64_t now,
                            struct gossip_out *out);
/* e restarted (new generation) or goes: forget its suspicion and
 * conviction. */
void gossip__probe_reset(gossip *g, struct gossip__ep *e, uint64_t now);

/* ---- round.c ---- */

/* Bytes of a packet before its digests and deltas. */
size_t gossip__builder_base(const gossip *g);

#endif
