/*
 * coord_internal.h - what coord.c and coord_read.c share and the rest of
 * node/ does not see: the request struct and the steps of its life that
 * reads and writes both take (planning, counting answers, finishing, the
 * wake list, waiting for the ring). coord.h is the coordinator's contract.
 */
#ifndef NODE_COORD_INTERNAL_H
#define NODE_COORD_INTERNAL_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "node/node_internal.h"

enum { C_GET = 0, C_PUT, C_DEL };

#define COORD_KEY_INLINE 64
#define COORD_QUIET_MS   100 /* see coord_quiet_limit() */
/* node__coord_check: the request waits for the ring */
#define COORD_PARK 1

struct cons {
    int dc; /* -1: any DC */
    uint32_t need;
    uint32_t got;
};

/* A replica as the ring saw it when the request was planned: name and
 * iaddr point into the peer table of that moment, which the request holds
 * (the node may replace its table while the request is in flight). */
struct crep {
    const char *name;
    const char *iaddr;
    bool self, up;
};

struct creply {
    bool asked, answered, ok, found, repairing;
    bool slow; /* read: silent at its hedge point, no longer counted on */
    bool passed_over; /* read: its peer was silent, asked after others */
    struct rpc_record rec;
    uint8_t *buf; /* owns rec.value */
};

struct creq;

/* The callback argument of one replica's request: one outstanding
 * request per replica at a time (a write, a read, then maybe its repair). */
struct cctx {
    struct creq *q;
    uint32_t i;
};

struct creq {
    /* ---- zeroed for every request (node__coord_new) ---- */
    node *n;
    int op;
    enum node_cl cl;
    coord_cb cb;
    void *arg;
    uint64_t start_ns;
    uint64_t expiry; /* get: the answered value's expiry (ms), 0: none */
    struct creq *next_deferred;
    struct coord_meter *meter; /* get: told what r[] holds until finish */
    size_t metered;            /* bytes added to meter */
    bool done;
    bool deferred;
    bool background; /* answered, counted in n->coord_background */
    int refs;
    uint8_t *key; /* kbuf or malloc'd */
    size_t klen;
    uint64_t token;
    uint32_t nrep;
    uint32_t nnat; /* rep[0..nnat) the ring's; the rest pending (plan) */
    struct cons cons[RING_MAX_REPLICAS];
    int ncons;
    uint32_t acks, need;
    int fail_err; /* first failure */
    int cause;    /* first failure that is a replica's -errno (-EIO...) */
    bool timed_out;
    /* the request's deadline (loop clock, ms) and the node's wake list,
     * ordered by `wake`: a read's hedge point, then its deadline; a write's
     * deadline, while the local replica's commit is outstanding */
    uint64_t deadline;
    uint64_t wake;
    struct creq *wprev, *wnext;
    bool waking; /* on the wake list, which holds a reference */
    /* waiting for the ring (on the wake list until its timeout): what the
     * request needs to start then */
    bool parked;
    struct creq *pnext; /* node__coord_unpark's list */
    uint8_t *pval;      /* put: a copy of the value (malloc'd; NULL: none) */
    size_t pval_len;
    bool pval_set; /* put: a value was given (it may be empty) */
    uint64_t pttl;
    /* read repair */
    int phase;
    uint32_t repair_pending;
    int newest;                /* index into r[], -1 */
    struct node_peer_tab *tab; /* held: rp[] points into it */
    /* ---- set by node__coord_plan() for the nrep replicas ---- */
    uint32_t rep[RING_MAX_REPLICAS];
    int rep_dc[RING_MAX_REPLICAS];
    struct creply r[RING_MAX_REPLICAS];
    struct crep rp[RING_MAX_REPLICAS];
    /* ---- kept across reuse ---- */
    struct cctx ctx[RING_MAX_REPLICAS]; /* {q, i}: set once at malloc */
    struct creq *next_free;
    struct rpc_buf wmsg; /* encoded rpc_write (or rpc_read) */
    uint8_t *srec;       /* encoded store record (hints) */
    size_t srec_len, srec_cap;
    uint8_t kbuf[COORD_KEY_INLINE];
};

/* ---- coord.c ---- */

/* Fill q->rep / rep_dc from the ring and the constraints from the level.
 * dc ids: 0 is this node's DC; others numbered as met. */
int node__coord_plan(node *n, struct creq *q);
/* Every constraint of q's level is met. */
bool node__coord_satisfied(const struct creq *q);
/* Replica i answered in time: it counts towards its constraints. */
void node__coord_count_answer(struct creq *q, uint32_t i);
/* A received record is held by q: its caller's meter counts its value. */
void node__coord_meter_add(struct creq *q, const struct rpc_record *rec);
/* Drop a reference; the last one returns q to the pool. */
void node__coord_unref(struct creq *q);
/* Answer q's caller (once; later calls do nothing). */
void node__coord_finish(struct creq *q, int err, struct rk_slice value);
/* Put q on the wake list for `at`, from the end nearer in time. */
void node__coord_wake_link(struct creq *q, uint64_t at);
/* Defer a decision made inside coord_*() to the end of the loop turn, so
 * the callback never runs from inside the call. */
void node__coord_defer(struct creq *q);
/* Note a failed replica request (the first failure is reported). */
void node__coord_note_failure(struct creq *q, int st);
/* A failure a replica reported itself (its disk: -EIO, -ENOSPC...), not
 * one of the network between: the first is named in a TIMEOUT reply. */
void node__coord_note_replica_failure(struct creq *q, int st);
/* Encode q's rpc_write of `rec` into q->wmsg, and its store record (for
 * hints) into q->srec. */
int node__coord_encode_records(struct creq *q, const struct rpc_record *rec);
/* Checks before a request starts: 0, COORD_PARK (wait for the ring), or
 * the error to answer at once. */
int node__coord_check(node *n, struct rk_slice key);
/* A request from the pool (or malloc'd) holding one reference, counted in
 * n->coord_inflight; NULL when out of memory. */
struct creq *node__coord_new(node *n,
                             int op,
                             struct rk_slice key,
                             enum node_cl cl,
                             coord_cb cb,
                             void *arg);
/* q waits for the ring on the wake list, until `until` (the loop's
 * clock), when it is answered RING_STALE; node__coord_unpark finds it
 * there if the ring catches up first. */
void node__coord_park(struct creq *q, uint64_t until);

/* ---- coord_read.c ---- */

/* Plan q's read and ask the replicas it needs; an error, having sent
 * nothing, when it cannot start. */
int node__coord_read_start(struct creq *q);
/* Answer q, ask more replicas or repair, as its answers so far allow. */
void node__coord_read_decide(struct creq *q);
/* q's wake time came (on_wake): its hedge point or its deadline. */
void node__coord_read_wake(struct creq *q, uint64_t now);

#endif
