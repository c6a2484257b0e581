/*
 * coord_internal.h - what coord.c and coord_read.c share and nothing
 * outside coord/ sees: the coordinator's struct, the request struct and the
 * steps of its life that reads and writes both take (planning, finishing,
 * the wake list, waiting for the ring). coord.h is the coordinator's
 * contract; coord_plan.h the pure level planning both use.
 */
#ifndef COORD_COORD_INTERNAL_H
#define COORD_COORD_INTERNAL_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "common/pool.h"
#include "coord/coord.h"
#include "coord/coord_host.h"
#include "coord/coord_plan.h"
#include "wire/rpc_msg.h"

enum { C_GET = 0, C_PUT, C_DEL };

/* One log line through the host: CLOG(c, WARN, "coord.event", "k=%s", v). */
void coord__log(struct coord *c,
                enum coord_log_level level,
                const char *event,
                const char *fmt,
                ...) __attribute__((format(printf, 4, 5)));
#define CLOG(c, lvl, ...) coord__log((c), COORD_LOG_##lvl, __VA_ARGS__)

#define COORD_KEY_INLINE 64
#define COORD_QUIET_MS   100 /* see coord_quiet_limit() */
/* coord__check: the request waits for the ring */
#define COORD_PARK 1

/* A replica as the ring saw it when the request was planned: name and
 * iaddr point into what the host keeps for the request (q->hold: the
 * node's peer table of that moment, which it may replace meanwhile). Its
 * DC, state and progress are in the request's plan (coord_plan.h). */
struct crep {
    const char *name;
    const char *iaddr;
};

/* What a replica's read returned; rec.value points into the request's
 * rbuf[] of the same index. */
struct creply {
    bool found;
    bool asked_dig; /* asked for a digest (coord_read.c) */
    bool dig;       /* rec holds a digest's version fields, no value */
    uint64_t hash;  /* dig: XXH3 of the replica's value */
    struct rpc_record rec;
};

/* A buffer a request keeps across reuse (up to COORD_BUF_KEEP bytes), so
 * that a read costs no malloc in the steady state. */
struct cbuf {
    uint8_t *p;
    size_t cap;
};

struct creq;

/* The coordinator (coord_host.h): its host, its requests and counters. */
struct coord {
    struct coord_host h;
    struct coord_opts o;
    struct coord_stats stats;
    struct creq *deferred; /* decisions due at the end of the turn */
    /* reads waiting for replicas (by hedge point, deadline), writes
     * waiting for the local commit (by deadline), requests waiting for
     * the ring (by deadline) */
    bool wake_open;   /* coord_open ran, coord_close not yet */
    uint64_t wake_at; /* loop ms the host's timer is armed for, 0: none */
    struct creq *wake_head, *wake_tail;
    struct rk_pool pool;        /* finished request structs */
    uint64_t refused_logged_ms; /* coord.write_refused: last logged */
    uint64_t refused_unlogged;  /* refusals since */
};

/* The callback argument of one replica's request (one outstanding
 * request per replica at a time: a write, a read, then maybe its repair):
 * q's address with the replica's index in its low bits, which q's
 * alignment leaves zero. A reply's first touch is then q's first cache
 * line, which it needs anyway; a {q, i} pair kept in q (until 2026-12-07)
 * was a cache miss of its own on every reply (on_remote_read's and
 * on_remote_write's first load: about half of their samples under
 * redis-benchmark at -P 16). */
#define CREQ_ALIGN 64 /* >= RING_MAX_REPLICAS; a cache line */
_Static_assert(RING_MAX_REPLICAS <= CREQ_ALIGN, "index bits of a cctx");

static inline void *cctx_arg(struct creq *q, uint32_t i)
{
    return (void *)((uintptr_t)q | i);
}

static inline struct creq *cctx_q(void *arg)
{
    return (struct creq *)((uintptr_t)arg & ~(uintptr_t)(CREQ_ALIGN - 1));
}

static inline uint32_t cctx_i(void *arg)
{
    return (uint32_t)((uintptr_t)arg & (CREQ_ALIGN - 1));
}

struct creq {
    /* ---- zeroed for every request (coord__req_new) ---- */
    struct coord *c;
    int op;
    enum coord_cl cl;
    coord_cb cb;
    void *arg;
    uint64_t start_ns;
    uint64_t expiry; /* get: the answered value's expiry (ms), 0: none */
    struct creq *next_deferred;
    struct coord_meter *meter; /* get: told what r[] holds until finish */
    size_t metered;            /* bytes added to meter */
    bool done;
    bool deferred;
    bool background; /* answered, counted in stats.background */
    int refs;
    uint8_t *key; /* kbuf or malloc'd */
    size_t klen;
    uint64_t token;
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
    struct creq *pnext; /* coord_unpark's list */
    uint8_t *pval;      /* put: a copy of the value (malloc'd; NULL: none) */
    size_t pval_len;
    bool pval_set; /* put: a value was given (it may be empty) */
    uint64_t pttl;
    /* the ring epoch of q->wmsg, the message sent next (a read's, then a
     * read repair's write, which may be newer) */
    uint64_t epoch;
    /* planned again (coord__replan): already counted in stats.req */
    bool replanned;
    /* read repair */
    int phase;
    uint32_t repair_pending;
    int newest; /* index into r[], -1 */
    /* replicas known to hold the newest: those that answered it, and
     * those its read repair reached (coord__read_decide) */
    uint32_t holders;
    void *hold; /* the host's: rp[] points into what it keeps */
    /* digest reads (coord_read.c) */
    bool data_only;   /* asks every replica for the record (read_again) */
    bool wmsg_dig;    /* q->wmsg is a read asking for a digest */
    bool best_hashed; /* best_hash is the newest's value hash */
    uint64_t best_hash;
    /* ---- not zeroed: 532 bytes sized for RING_MAX_REPLICAS replicas, of
     * which a request uses plan.nrep (coord__req_new clears the plan's
     * counts, coord_plan_make the replicas it plans) ---- */
    struct coord_plan plan; /* the level, the replicas' progress */
    /* the epoch of the message each replica was sent: what its OLD_RING
     * answer is about (coord__replan); read only for a replica sent one */
    uint64_t sent_epoch[RING_MAX_REPLICAS];
    /* ---- set by coord__plan() for the plan.nrep replicas ---- */
    uint32_t rep[RING_MAX_REPLICAS];
    struct creply r[RING_MAX_REPLICAS];
    struct crep rp[RING_MAX_REPLICAS];
    /* ---- kept across reuse ---- */
    struct cbuf rbuf[RING_MAX_REPLICAS]; /* r[i]'s value */
    struct creq *next_free;
    struct rpc_buf wmsg; /* encoded rpc_write (or rpc_read) */
    uint8_t *srec;       /* encoded store record (hints) */
    size_t srec_len, srec_cap;
    uint8_t kbuf[COORD_KEY_INLINE];
};

/* ---- coord.c ---- */

/* Take q's replicas from the ring (and the pending ring's, for a write)
 * and plan its level over them (q->plan): 0, RK_EUNAVAILABLE, RK_EBADREQ. */
int coord__plan(struct creq *q);
/* A received record is held by q: its caller's meter counts its value. */
void coord__meter_add(struct creq *q, const struct rpc_record *rec);
/* Drop a reference; the last one returns q to the pool. */
void coord__unref(struct creq *q);
/* Answer q's caller (once; later calls do nothing). */
void coord__finish(struct creq *q, int err, struct rk_slice value);
/* Put q on the wake list for `at`, from the end nearer in time. */
void coord__wake_link(struct creq *q, uint64_t at);
/* Defer a decision made inside coord_*() to the end of the loop turn, so
 * the callback never runs from inside the call. */
void coord__defer(struct creq *q);
/* Note a failed replica request (the first failure is reported). */
void coord__note_failure(struct creq *q, int st);
/* A failure a replica reported itself (its disk: -EIO, -ENOSPC...), not
 * one of the network between: the first is named in a TIMEOUT reply.
 * OLD_RING is noted as RING_STALE (retryable; clients do not know it). */
void coord__note_replica_failure(struct creq *q, int st);
/* Encode q's rpc_write of `rec` into q->wmsg, and its store record (for
 * hints) into q->srec. */
int coord__encode_records(struct creq *q, const struct rpc_record *rec);
/* Send q->wmsg to replica i (c->h.rpc), noting its epoch as the one that
 * replica was sent (sent_epoch[i]: what an OLD_RING answer is about). */
int coord__send(struct creq *q,
                uint32_t i,
                uint32_t timeout_ms,
                uint32_t max_quiet_ms,
                coord_rpc_cb cb,
                void *arg);
/* Checks before a request starts: 0, COORD_PARK (wait for the ring), or
 * the error to answer at once. */
int coord__check(struct coord *c, struct rk_slice key);
/* A request from the pool (or malloc'd) holding one reference, counted in
 * stats.inflight; NULL when out of memory. */
struct creq *coord__req_new(struct coord *c,
                            int op,
                            struct rk_slice key,
                            enum coord_cl cl,
                            coord_cb cb,
                            void *arg);
/* Replica i refused q as planned on an older ring than its own
 * (RK_EOLDRING): if q is still deciding, its caller is handed to a new
 * request that waits for the newer ring (as a request arriving while the
 * ring is stale does) and is then planned and sent again, by q's
 * deadline; q goes on in the background, answering no one. True if so;
 * false (q answered already, or no wake list): q goes on, counting the
 * refusal as a failure. Either way the host hears that its ring is behind
 * (ring_behind). */
bool coord__replan(struct creq *q, uint64_t refused_epoch);
/* A read whose digests cannot be ordered without their values: its
 * caller is handed to a new read, started at once by q's deadline, that
 * asks its replicas for their records only (data_only); q goes on in the
 * background, answering no one. False (q answered already, or no wake
 * list, or no memory): nothing was done. */
bool coord__read_again(struct creq *q);
/* q waits for the ring on the wake list, until `until` (the loop's
 * clock), when it is answered RING_STALE; coord_unpark finds it
 * there if the ring catches up first. */
void coord__park(struct creq *q, uint64_t until);

/* ---- coord_read.c ---- */

/* Plan q's read and ask the replicas it needs; an error, having sent
 * nothing, when it cannot start. */
int coord__read_start(struct creq *q);
/* Answer q, ask more replicas or repair, as its answers so far allow. */
void coord__read_decide(struct creq *q);
/* coord_request's reads. */
int coord__read_request(struct coord *c, const struct coord_request *r);
/* q's wake time came (on_wake): its hedge point or its deadline. */
void coord__read_wake(struct creq *q, uint64_t now);

#endif
