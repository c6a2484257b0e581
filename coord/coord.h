/*
 * coord.h - the coordinator: any node serves get/put/del for any key at a
 * chosen consistency level. Its levels, its results and its counters; the
 * entry points both client servers (native and RESP) use take the node and
 * are node/coord_node.h's, the core behind them (requests on a host
 * interface) is coord_host.h's.
 *
 * token = rk_token(key); the replicas are the ring's preference list for it.
 * Writes get an HLC timestamp here and go to every live replica (local ones
 * through the group-commit batch, remote ones over internode RPC); DOWN
 * replicas get a hint. Reads ask as many live replicas as the level needs,
 * return the newest version and repair the replicas that answered with an
 * older one before replying (blocking read repair). A read's callback runs
 * by its deadline (read_timeout_ms from its start, or the one it is
 * given), whatever its replicas and repairs do.
 *
 * Contract (libuv's): a call that returns an error never calls `cb`; a call
 * that returns 0 calls `cb` exactly once, later, from the loop (never from
 * inside the call). Errors returned at once: RK_EBADREQ (empty key),
 * RK_ETOOLARGE, RK_EUNAVAILABLE (too few live replicas; nothing was sent),
 * RK_ESTALE (this node's ring is older than one it has heard of),
 * RK_EOVERLOADED (admission control), RK_ECLOSED (shutting down).
 */
#ifndef COORD_COORD_H
#define COORD_COORD_H

#include <stdint.h>

#include "common/rk.h"

/* Consistency levels, in the order of wire/ and the CLI (node/config.h
 * parses and names them). */
enum coord_cl {
    COORD_CL_ONE = 1,
    COORD_CL_TWO,
    COORD_CL_QUORUM,
    COORD_CL_ALL,
    COORD_CL_LOCAL_ONE,
    COORD_CL_LOCAL_QUORUM,
    COORD_CL_EACH_QUORUM
};

/* The coordinator's operations, as its counters and node/obs.h index them. */
enum coord_op { COORD_OP_GET = 0, COORD_OP_PUT, COORD_OP_DEL, COORD_OP_N };

/* Answered coordinator requests still waiting for replicas are bounded at
 * this many times max_inflight (the metric's help says it). */
#define COORD_BACKGROUND_FACTOR 4

/* The outcome handed to the callback.
 * @note value borrows: it lives only during the callback. */
struct coord_result {
    int err;               /* 0, RK_ENOTFOUND (get), RK_ETIMEOUT, ... */
    uint32_t acks;         /* replicas that answered in time */
    uint32_t need;         /* replicas the level needed */
    struct rk_slice value; /* get: the value when err == 0 */
    uint64_t expiry_ms; /* get: its expiry (Unix ms) when err == 0; 0: none */
    int cause;          /* TIMEOUT: a replica's own failure (-EIO...) among the
                         * reasons, else 0 (coord_errmsg says it) */
};

/* The message of a failed request's reply: what went wrong, how many
 * replicas answered of those needed, a replica's own failure if any. */
/* What a write's deadline grows by for each MiB of its value. */
#define COORD_WRITE_MS_PER_MIB 250

/* The time a write of value_bytes has: write_timeout_ms and
 * COORD_WRITE_MS_PER_MIB more for each MiB of its value. The largest a
 * request can have (RK_MAX_VALUE) bounds a drain at stop. */
uint64_t coord_write_time_ms(uint32_t write_timeout_ms, size_t value_bytes);

void coord_errmsg(
    char *buf, size_t len, int err, uint32_t acks, uint32_t need, int cause);

typedef void (*coord_cb)(const struct coord_result *res, void *arg);

/* What the read requests of one caller hold for it before they answer:
 * the bytes of the values the replicas have returned (read locally at the
 * call, or received later), which are waiting for the level, the newest
 * version or a repair. A request adds what it receives and takes it all
 * back just before its callback runs (so the meter need only live until
 * then). A client server that stops taking requests while a connection's
 * meter is high bounds what that connection's reads hold, not just how
 * many there are. */
struct coord_meter {
    size_t bytes;
};

/* The coordinator's core: requests in flight, the wake list of their
 * deadlines, the requests waiting for the ring, the pool of finished
 * requests, its counters (coord_internal.h), reaching the daemon through
 * a host (coord_host.h). */
struct coord;

/* What the coordinator counts, exported by METRICS and read by the node's
 * stop (index by enum coord_op, then by enum coord_cl). */
struct coord_stats {
    int64_t inflight;    /* requests not yet answered (admission) */
    int64_t background;  /* answered, replica requests still outstanding */
    int64_t parked;      /* of those in flight, waiting for the ring */
    uint64_t overloaded; /* refused: past max_inflight (admission) */
    uint64_t req[COORD_OP_N][8];
    uint64_t unavailable[COORD_OP_N][8];
    uint64_t timeout[COORD_OP_N][8];
    uint64_t stale;       /* answered RING_STALE */
    uint64_t stale_waits; /* requests that waited for the ring */
    uint64_t replans; /* refused OLD_RING by a replica: waited, planned again */
    uint64_t read_repairs;     /* replicas a read repaired */
    uint64_t read_hedges;      /* reads that asked past silent replicas */
    uint64_t read_passed_over; /* replicas a read asked last: silent */
    uint64_t writes_unsent;    /* replica writes not sent (hinted instead) */
    uint64_t writes_refused;   /* by a replica for good: no hint kept */
    uint64_t writes_full;      /* refused: this node, a replica, is short of
                                  disk space (coord_host local_full) */
    uint64_t local_full_late;  /* answered OK before this node's own copy
                                  was refused for disk space */
    /* data requests by where they were coordinated (first planning
     * only): [1] this node is a natural replica of the key (a token-aware
     * client's choice), [0] it is not */
    uint64_t placement[2];
    /* reads asked again for the replicas' records: a digest answer could
     * not be ordered without its value (coord_read.c) */
    uint64_t read_digest_mismatches;
};

#endif
