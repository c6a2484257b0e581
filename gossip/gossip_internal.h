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
#include "wire/wire.h"

#define GOSSIP__FD_WINDOW 32 /* intervals the failure detector keeps */

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
    bool stale_reported;
    bool ticked;
    uint64_t last_tick;
    struct gossip_stats stats;
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
void gossip__epoch_seen(gossip *g, uint64_t epoch);
int gossip__own_ring_epoch_sync(gossip *g);
int gossip__stale_check(gossip *g, struct gossip_out *out);
int gossip__status_applied(gossip *g,
                           struct gossip__ep *e,
                           bool is_self,
                           uint64_t now,
                           struct gossip_out *out);

/* ---- round.c ---- */

/* Bytes of a packet before its digests and deltas. */
size_t gossip__builder_base(const gossip *g);

#endif
