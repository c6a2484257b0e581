/*
 * ring.h - the token ring: placement, lookup, token allocation, ownership and
 * movement plans. Pure C: no I/O, no clock, no globals, no threads.
 *
 * Model (shared/DESIGN.md, "Keys, tokens and the ring"):
 *  - Token space is [0, 2^64) as a circle; a key's token is rk_token().
 *  - A ring is an immutable, reference-counted snapshot built from a list of
 *    members. Members in state NORMAL or LEAVING place their tokens; BOOT,
 *    LEFT and REMOVED members are known by name but own nothing.
 *  - A placed token t owns the arc (pred(t), t]. Arc i of a ring is the arc
 *    that ends at its i-th smallest placed token; arc 0 wraps around zero.
 *  - Replicas of an arc: SimpleStrategy takes the first RF distinct nodes
 *    clockwise from the arc's token. NetworkTopologyStrategy does the same per
 *    data centre with that DC's RF, rack-aware: a node from a rack not used
 *    yet is always taken; a node from a used rack is taken only while
 *    "repeats" remain, and a DC with K racks and RF > K allows RF - K repeats
 *    (Cassandra's rule: every rack gets a replica, the rest are the first
 *    repeats met). With K >= RF no two replicas share a rack.
 *  - Node indices (0 .. ring_node_count()-1) number members by ascending
 *    name, so they are stable for a snapshot and comparable across snapshots
 *    only through names (ring_node_find).
 *
 * Thread safety: a snapshot is immutable; any number of threads may read one
 * concurrently. ring_ref/ring_free use an atomic counter.
 */
#ifndef RING_RING_H
#define RING_RING_H

#include <stddef.h>
#include <stdint.h>

typedef struct ring ring;

/* Largest total replica count (sum of RF over DCs) a ring supports. */
#define RING_MAX_REPLICAS 16
/* "No node" in uint32_t node-index fields. */
#define RING_NONE UINT32_MAX
/* A node of weight RING_WEIGHT_UNIT gets exactly num_tokens tokens. */
#define RING_WEIGHT_UNIT 100u
/* Upper bounds that keep arithmetic and allocations sane. */
#define RING_MAX_NODES           65536u
#define RING_MAX_TOKENS_PER_NODE 4096u

enum ring_node_state {
    RING_NORMAL = 0, /* placed: owns its tokens */
    RING_BOOT,       /* joining: known, tokens not placed yet (pending) */
    RING_LEAVING,    /* placed until its ranges have moved */
    RING_LEFT,       /* gone; kept only so its name resolves */
    RING_REMOVED     /* removed by an operator; as LEFT */
};

enum ring_strategy {
    RING_SIMPLE = 0, /* RF distinct nodes clockwise, DCs and racks ignored */
    RING_NTS         /* NetworkTopologyStrategy: RF per DC, rack-aware */
};

enum ring_alloc {
    RING_ALLOC_BALANCED = 0, /* default: minimise replicated-ownership spread */
    RING_ALLOC_RANDOM        /* tokens hashed from the node's name */
};

/* One member, as learned from gossip or config. All pointers are borrowed
 * for the duration of the call that receives them; ring_new copies. */
struct ring_member {
    const char *name; /* unique, non-empty */
    const char *dc;   /* NULL or "" means "dc1" */
    const char *rack; /* NULL or "" means "rack1" */
    const uint64_t *tokens;
    size_t ntokens;  /* may be 0 */
    uint32_t weight; /* capacity; 0 means RING_WEIGHT_UNIT */
    enum ring_node_state state;
};

struct ring_dc_rf {
    const char *dc;
    unsigned rf;
};

/* Replication settings. SimpleStrategy uses rf; NTS uses dcs[] (a DC not
 * listed holds no replicas). Borrowed; ring_new copies. */
struct ring_replication {
    enum ring_strategy strategy;
    unsigned rf;
    const struct ring_dc_rf *dcs;
    size_t ndcs;
};

struct ring_config {
    const struct ring_member *members;
    size_t nmembers;
    struct ring_replication repl;
    uint64_t epoch; /* stamped on the snapshot, not interpreted */
};

/* A token range (start, end]. start == end means the whole ring. A range
 * with start > end wraps through zero. */
struct ring_range {
    uint64_t start;
    uint64_t end;
};

/* What a snapshot knows about one node. Strings are borrowed from the ring
 * and live as long as the caller's reference to it. */
struct ring_node_info {
    const char *name;
    const char *dc;
    const char *rack;
    enum ring_node_state state;
    uint32_t weight;
    size_t ntokens;         /* tokens given (placed or not) */
    const uint64_t *tokens; /* ascending; borrowed from the ring */
    double raw;             /* share of the key space it owns first, [0,1] */
    double effective;       /* share of the key space it holds a replica of
                               ("Owns (effective)"); sums to total RF */
};

/* ---- snapshots ---------------------------------------------------------- */

/* Build a snapshot. Errors: RK_ECONFIG (empty or duplicate name, rf 0 or
 * over RING_MAX_REPLICAS, bad state, too many nodes or tokens, duplicate DC
 * in repl), RK_EEXIST (one token placed by two members or twice by one),
 * -ENOMEM. On success *out holds one reference, owned by the caller. */
int ring_new(ring **out, const struct ring_config *cfg);

/* Build a snapshot from `base`'s members and replication, with `upsert`
 * added or replacing the member of the same name (may be NULL), and the
 * member named `remove` dropped (may be NULL). Same errors as ring_new. */
int ring_change(ring **out,
                const ring *base,
                const struct ring_member *upsert,
                const char *remove,
                uint64_t epoch);

/* Take another reference; returns r. */
ring *ring_ref(ring *r);

/* Drop one reference; the snapshot is freed with the last. NULL is a no-op. */
void ring_free(ring *r);

uint64_t ring_epoch(const ring *r);

/* XXH3 of the ascending list of placed (token, node name) pairs: equal for
 * equal placement whatever order members and tokens were given in. */
uint64_t ring_fingerprint(const ring *r);

/* ---- nodes -------------------------------------------------------------- */

size_t ring_node_count(const ring *r);

/* Index of the node named `name`, or RING_NONE. O(log n). */
uint32_t ring_node_find(const ring *r, const char *name);

/* Fill *out for node `idx`; RK_ENOTFOUND if idx is out of range. */
int ring_node_get(const ring *r, struct ring_node_info *out, uint32_t idx);

/* Ranges replicated by node `idx`, in ring order, adjacent arcs merged.
 * Writes at most `cap` and returns how many there are (call with cap 0 to
 * size the array). 0 for an unplaced or unknown node. */
size_t ring_node_ranges(const ring *r,
                        uint32_t idx,
                        struct ring_range *out,
                        size_t cap);

/* ---- lookup (hot path: no allocation, no error path) -------------------- */

/* Number of placed tokens (= arcs). */
size_t ring_token_count(const ring *r);

/* Replicas per arc: sum over DCs of min(RF, nodes placed in that DC). */
size_t ring_replica_count(const ring *r);

/* Index of the arc holding `token`: the first placed token >= token,
 * wrapping to 0. Undefined (returns 0) for a ring with no placed tokens. */
size_t ring_arc_find(const ring *r, uint64_t token);

/* Arc `i`: its range, and its tokens' owner. i < ring_token_count(r). */
struct ring_range ring_arc_range(const ring *r, size_t i);
uint32_t ring_arc_owner(const ring *r, size_t i);

/* The preference list for `token`: replica node indices in placement order
 * (NTS: DC by DC, DCs in ascending name order; the first of a DC is the
 * owner in that DC). Writes at most `cap`, returns ring_replica_count(r). */
size_t ring_replicas(const ring *r, uint64_t token, uint32_t *out, size_t cap);

/* The same for arc `i`, as a borrowed array of ring_replica_count(r). */
const uint32_t *ring_arc_replicas(const ring *r, size_t i);

/* ---- token allocation --------------------------------------------------- */

/* A node about to join. Borrowed for the call. */
struct ring_joiner {
    const char *name;
    const char *dc;   /* NULL or "" means "dc1" */
    const char *rack; /* NULL or "" means "rack1" */
    uint32_t weight;  /* 0 means RING_WEIGHT_UNIT */
};

/* Tokens a node of `weight` gets when num_tokens is configured:
 * round(num_tokens * weight / RING_WEIGHT_UNIT), at least 1, at most
 * RING_MAX_TOKENS_PER_NODE. */
size_t ring_tokens_for_weight(unsigned num_tokens, uint32_t weight);

/* Choose n tokens for `j` joining the placed nodes of `r` (r may be NULL for
 * the first node; the joiner must not be placed in r). Writes n ascending
 * tokens to out, none already placed in r.
 *  - RING_ALLOC_RANDOM: XXH3_64bits(name || counter as 8 bytes, little-
 *    endian) for counter 0, 1, ...; depends
 *    on the name only (and on r only to skip a taken token).
 *  - RING_ALLOC_BALANCED: one token at a time, each at the split of an
 *    existing arc of the joiner's DC that most reduces the weighted variance
 *    of replicated ownership under r's replication (ring.md explains).
 *    Deterministic. The first node of a DC gets evenly spaced tokens.
 * Errors: RK_ECONFIG (n 0 or too large, empty name), -ENOMEM. */
int ring_tokens_alloc(uint64_t *out,
                      size_t n,
                      const ring *r,
                      const struct ring_joiner *j,
                      enum ring_alloc method);

/* ---- movement plans ----------------------------------------------------- */

/* One change of hands: `gain` (node index in the NEW ring, or RING_NONE when
 * a range only loses replicas) starts replicating `range`; `lose[0..nlose)`
 * (node indices in the OLD ring) stop replicating it. One entry per gaining
 * node; every gainer of a range lists all its losers. */
struct ring_move {
    struct ring_range range;
    uint32_t gain;
    uint32_t nlose;
    uint32_t lose[RING_MAX_REPLICAS];
};

/* The exact movement from ring `from` to ring `to` (nodes matched by name),
 * in ring order (the first move may wrap through zero), a move continuing
 * the previous range with the same gain and losers merged into it.
 * On success *out is a malloc'd array of *nout entries (NULL if none) that
 * the caller frees with ring_plan_free. Errors: -ENOMEM. */
int ring_plan_new(struct ring_move **out,
                  size_t *nout,
                  const ring *from,
                  const ring *to);

void ring_plan_free(struct ring_move *plan);

/* Whether two movements from the same ring `base` -- to ring `a` and to
 * ring `b`, say base with one joining node placed and base with another --
 * change the replicas of a common part of the token space: *out is the
 * number of a's moves (ring_plan_new(base, a)) whose range meets the
 * range of some move of b, 0 when none does (the two can stream at the
 * same time: no range changes hands in both). Nodes are matched by name.
 * Errors: -ENOMEM (*out 0). */
int ring_moves_overlap(size_t *out,
                       const ring *base,
                       const ring *a,
                       const ring *b);

/* The parts of the ranges `want[0..nwant)` that none of `have[0..nhave)`
 * covers, as ranges in ring order (a part that wraps through zero is one
 * range; the whole ring is start == end). `want` ranges must not overlap
 * each other; `have` ranges may. However many pieces `have` cuts `want`
 * into, all are returned. On success *out is a malloc'd array of *nout
 * entries (NULL if none) that the caller frees with free(). Errors:
 * -ENOMEM (*out NULL, *nout 0). */
int ring_ranges_uncovered(struct ring_range **out,
                          size_t *nout,
                          const struct ring_range *want,
                          size_t nwant,
                          const struct ring_range *have,
                          size_t nhave);

/* Length of a range as a fraction of the ring, (0, 1]. */
double ring_range_fraction(struct ring_range rg);

/* Whether `token` lies in `rg`. */
int ring_range_contains(struct ring_range rg, uint64_t token);

#endif
