/*
 * coord_plan.h - the coordinator's level planning, pure: no libuv, no
 * clock, no node. For a consistency level and the replicas of a key (their
 * DCs, up or down, the ring's and the pending ring's), it says how many
 * answers are needed in all and per DC, whether the level can be met at all
 * (UNAVAILABLE before anything is sent), which replica a read asks next and
 * in what order (this node, then the peers in preference order, the silent
 * ones last; past the hedge point the silent ones are no longer counted
 * on), and, from the answers so far, whether the request is satisfied,
 * failed or waiting. coord.c and coord_read.c do the asking; this decides.
 *
 * A level is a list of constraints "at least k answers from replicas of DC
 * d (or of any DC)": ONE/TWO/QUORUM/ALL have one over every replica,
 * LOCAL_* one over this node's DC, EACH_QUORUM one per DC that holds a
 * replica. Quorums are counted over the replicas the ring places (the
 * first nnat), min(RF, nodes) per DC. A pending replica (a joining node's,
 * writes only) that is up adds one to every constraint it falls under: its
 * answer is needed on top of the level's (Cassandra's rule); one that is
 * down, or that turns out not ready (coord_plan_drop_pending), does not.
 */
#ifndef COORD_COORD_PLAN_H
#define COORD_COORD_PLAN_H

#include <stdbool.h>
#include <stdint.h>

#include "coord/coord.h" /* enum coord_cl */
#include "ring/ring.h"

/* A replica as the planner is told of it. @note dc is borrowed during
 * coord_plan_make only. */
struct coord_plan_replica {
    const char *dc;
    bool up;
    bool self; /* this node */
};

/* "At least need answers from DC dc (-1: from any DC)". */
struct coord_plan_cons {
    int dc;
    uint32_t need;
    uint32_t got;
};

/* One replica of a planned request and what became of it. dc: 0 is this
 * node's DC, the others numbered as met in the replica list. */
struct coord_plan_rep {
    int dc;
    bool up, self;
    bool asked;       /* a request was sent (or tried) */
    bool answered;    /* it answered, failed, or could not be sent */
    bool ok;          /* answered, and it counts */
    bool slow;        /* read: silent at its hedge point, not counted on */
    bool passed_over; /* read: silent peer, asked after the others */
};

struct coord_plan {
    uint32_t nrep; /* rep[0..nrep) */
    uint32_t nnat; /* rep[0..nnat) the ring's, the rest pending */
    uint32_t need; /* answers needed in all (the sum of cons[].need) */
    uint32_t acks; /* answers counted; UNAVAILABLE: the live replicas */
    int ncons;
    struct coord_plan_cons cons[RING_MAX_REPLICAS];
    struct coord_plan_rep rep[RING_MAX_REPLICAS];
};

/* An empty plan: no replicas, no constraints. Only the first nrep of
 * rep[] and the first ncons of cons[] are ever set or read (a request's
 * plan is not zeroed whole: coord__req_new). */
void coord_plan_clear(struct coord_plan *p);

/* Plan a request at level cl over nrep replicas, the first nnat the
 * ring's, the rest the pending ring's extra ones (writes only), for a
 * node of DC local_dc. 0; RK_EBADREQ (an unknown level, nrep past
 * RING_MAX_REPLICAS or nnat past nrep); RK_EUNAVAILABLE when too few
 * replicas are up for a constraint (out->acks: how many are up). */
int coord_plan_make(struct coord_plan *out,
                    enum coord_cl cl,
                    const char *local_dc,
                    const struct coord_plan_replica *reps,
                    uint32_t nrep,
                    uint32_t nnat);

/* Replica i was asked. */
void coord_plan_asked(struct coord_plan *p, uint32_t i);
/* Replica i answered (or its request failed, or could not be sent: ok
 * false); ok: its answer counts towards its constraints. */
void coord_plan_answered(struct coord_plan *p, uint32_t i, bool ok);
/* Pending replica i (i >= nnat, up) will not count: it is no longer
 * needed on top of the level (a joiner that has no range for the key
 * yet). */
void coord_plan_drop_pending(struct coord_plan *p, uint32_t i);

/* Every constraint is met. */
bool coord_plan_satisfied(const struct coord_plan *p);

enum coord_plan_outcome {
    COORD_PLAN_WAITING = 0, /* not met, answers outstanding */
    COORD_PLAN_SATISFIED,   /* every constraint met */
    COORD_PLAN_FAILED       /* not met, and nothing outstanding */
};
/* From the answers so far. A read asks what more it can
 * (coord_plan_read_next) before it takes FAILED for an answer. */
enum coord_plan_outcome coord_plan_outcome(const struct coord_plan *p);

/* Where a read's asking stands: pass 0 this node, 1 the peers not silent
 * in preference order, 2 the silent ones passed over in pass 1. */
struct coord_plan_cursor {
    int pass;
    uint32_t i;
};
#define COORD_PLAN_CURSOR_INIT \
    {                          \
        0, 0                   \
    }

/* Would asking replica i help an unmet constraint, counting the answers
 * and the requests outstanding still counted on (not slow)? */
bool coord_plan_read_helps(const struct coord_plan *p, uint32_t i);

/* The next replica a read asks (its index), or -1 when no other live
 * replica not yet asked would help. quiet[i]: peer i is silent with
 * requests to answer; such a peer is passed over in pass 1 (marked
 * passed_over, *passed incremented the first time) and asked in pass 2
 * if it still helps then. The caller asks the replica returned (and
 * records the outcome: coord_plan_asked, coord_plan_answered) before it
 * asks for the next one, from the same cursor. */
int coord_plan_read_next(struct coord_plan *p,
                         struct coord_plan_cursor *c,
                         const bool *quiet,
                         uint32_t *passed);

/* The read's hedge point: the replicas asked that have not answered are
 * no longer counted on (they still count if they answer). Returns how
 * many replicas had been asked. */
uint32_t coord_plan_hedge(struct coord_plan *p);

/* How many replicas have been asked. */
uint32_t coord_plan_asked_count(const struct coord_plan *p);

#endif
