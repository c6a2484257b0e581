/*
 * coord_host.h - the coordinator's core (coord.c, coord_read.c) and what it
 * needs of its host: the ring's replicas of a key, the local replica, RPC
 * to the remote ones, hints, the hybrid logical clock, a wake timer and
 * the clocks, the log. The daemon fills it in (node/coord_node.c, over
 * struct node and libuv); tests/unit/check_coord.c fills it with fake
 * replicas on a fake clock and runs the request state machine in-process.
 *
 * Everything runs on one thread (the loop's). The core calls the host only
 * from its own entry points and from the callbacks the host calls; the
 * contract of coord.h holds here too: a request that returns an error
 * never calls its callback, one that returns 0 calls it exactly once,
 * later (from coord_run_deferred, coord_wake or a replica's callback).
 */
#ifndef COORD_COORD_HOST_H
#define COORD_COORD_HOST_H

#include <stdarg.h>
#include <stdbool.h>
#include <stdint.h>

#include "common/rk.h"
#include "coord/coord.h"
#include "coord/coord_plan.h"
#include "ring/ring.h"
#include "wire/rpc_msg.h"

/* The replicas of one token as the host sees them now: rep[0..nnat) the
 * ring's, the rest the pending ring's extra ones (writes only).
 * @note name, iaddr and rep[].dc are borrowed until release(hold). */
struct coord_replicas {
    uint32_t nrep, nnat;
    struct coord_plan_replica rep[RING_MAX_REPLICAS];
    const char *name[RING_MAX_REPLICAS];  /* "" if unknown */
    const char *iaddr[RING_MAX_REPLICAS]; /* internode "host:port" */
    void *hold;                           /* given back to release */
};

/* What ready() answers besides 0 and RK_ECLOSED: the ring is stale
 * and the request may wait for it (RK_ESTALE: refuse at once). */
#define COORD_HOST_STALE_WAIT 1

/* The levels of the lines the core logs (node/log.h's numbers). */
enum coord_log_level {
    COORD_LOG_DEBUG = 0,
    COORD_LOG_INFO,
    COORD_LOG_WARN,
    COORD_LOG_ERROR
};

typedef void (*coord_local_cb)(int status, void *arg);
/* A remote replica's answer (net/'s net_rpc_cb): status, or 0 and resp. */
typedef void (*coord_rpc_cb)(void *arg, int status, struct rk_slice resp);

struct coord_host {
    void *arg; /* the first argument of every call */
    /* The loop's clock (ms), and a monotonic one in ns for latencies. */
    uint64_t (*now_ms)(void *arg);
    uint64_t (*now_ns)(void *arg);
    /* Wall clock (ms since the epoch): expiries. */
    uint64_t (*wall_ms)(void *arg);
    /* One log line: `event`, then fmt's key=value fields. */
    void (*log)(void *arg,
                enum coord_log_level level,
                const char *event,
                const char *fmt,
                va_list ap);
    /* Call coord_wake at loop ms `at` (once; a later arm replaces it);
     * at 0: not at all. */
    void (*wake_arm)(void *arg, uint64_t at);
    /* May a request start now: 0; RK_ECLOSED (stopping); RK_ESTALE (stale
     * ring, refuse); COORD_HOST_STALE_WAIT (stale ring, it may wait). */
    int (*ready)(void *arg);
    /* The replicas of token (write: with the pending ones): 0, or
     * RK_EUNAVAILABLE when there is no ring yet (nothing to release). */
    int (*replicas)(void *arg,
                    struct coord_replicas *out,
                    uint64_t token,
                    bool write);
    void (*release)(void *arg, void *hold); /* hold NULL: nothing */
    uint64_t (*epoch)(void *arg);           /* the applied ring's */
    /* A replica refused a request planned on ring epoch `epoch - 1` as
     * older than its own (RK_EOLDRING): the host counts `epoch` as heard
     * of, so that ready() says stale until its ring has reached it. */
    void (*ring_behind)(void *arg, uint64_t epoch);
    /* The local replica: a write, answered later through cb (an error
     * returned: cb never called); a read, at once (the value is copied
     * into the caller's buffer *buf of *cap bytes, grown with realloc when
     * too small; the caller keeps it and frees it). */
    int (*local_write)(void *arg,
                       struct rk_slice key,
                       const struct rpc_record *rec,
                       coord_local_cb cb,
                       void *cb_arg);
    int (*local_read)(void *arg,
                      struct rk_slice key,
                      bool *found,
                      struct rpc_record *rec,
                      uint8_t **buf,
                      size_t *cap);
    /* A local read of token's key may come soon (store_prefetch): called
     * as a read starts, before its plan. NULL: none. */
    void (*local_prefetch)(void *arg, uint64_t token);
    /* 0, or RK_EFULL while the local replica would refuse writes for lack
     * of disk space (the store's disk reserve, with a margin): a write
     * that needs a copy here is then refused before anything is sent. */
    int (*local_full)(void *arg);
    /* A request to a remote replica, as net_peers_request_unless_quiet:
     * answered through cb by timeout_ms, or an error and nothing sent
     * (RK_EUNAVAILABLE: silent for max_quiet_ms, 0: no limit). */
    int (*rpc)(void *arg,
               const char *iaddr,
               const struct rpc_buf *msg,
               uint32_t timeout_ms,
               uint32_t max_quiet_ms,
               coord_rpc_cb cb,
               void *cb_arg);
    /* How long the peer has been silent with a request to answer. */
    uint64_t (*quiet_ms)(void *arg, const char *iaddr);
    /* False while the peer's last connect was refused or its connection
     * reset or closed by it (net_peers_reachable): planned as DOWN
     * although gossip may still say UP. */
    bool (*reachable)(void *arg, const char *iaddr);
    /* Keep a hint (key, encoded store record) for replica `name`. */
    void (*hint)(void *arg,
                 const char *name,
                 struct rk_slice key,
                 struct rk_slice rec);
    /* A replica's answer that a hint's replay would get again. */
    bool (*refused_for_good)(void *arg, int status);
    /* The HLC: a timestamp for a write (0 or an error), a peer's clock
     * seen (0 or RK_ECLOCKSKEW...), a record copied from a peer. */
    int (*clock_now)(void *arg, uint64_t *out);
    int (*clock_recv)(void *arg, uint64_t remote, const char *from);
    int (*clock_seen)(void *arg, uint64_t ts);
    /* A request (op: COORD_OP_*) answered with err, started at start_ns. */
    void (*observe)(
        void *arg, int op, enum coord_cl cl, int err, uint64_t start_ns);
};

/* The coordinator's settings (from node_config). */
struct coord_opts {
    const char *datacenter; /* this node's; borrowed for c's life */
    uint32_t read_timeout_ms;
    uint32_t write_timeout_ms; /* coord_write_time_ms */
    int64_t max_inflight;
};

/* 0 or -ENOMEM. h and o are copied. Requests may wait (for the ring, the
 * local commit, silent replicas) only once coord_open has run. */
int coord_new(struct coord **out,
              const struct coord_host *h,
              const struct coord_opts *o);
/* Frees c and its pool; requests must all have been released. NULL: no-op. */
void coord_free(struct coord *c);
/* The host's wake timer is ready: requests may wait. */
void coord_open(struct coord *c);
/* Stop waiting: every request on the wake list is let go (answered by its
 * replicas' failures as the host closes its connections). */
void coord_close(struct coord *c);
/* The host's wake time came: hedge points and deadlines due. */
void coord_wake(struct coord *c);
/* The end of a loop turn: decisions deferred by the calls below. */
void coord_run_deferred(struct coord *c);
/* The ring caught up (or the host stops): start (or answer CLOSED) the
 * requests waiting for it; nothing while ready() says stale. */
void coord_unpark(struct coord *c);
/* @note borrowed: lives as long as c. */
const struct coord_stats *coord_stats(const struct coord *c);

/* A client request: coord.h's coord_get_metered, coord_put, coord_del.
 * @note key and value are copied; meter is borrowed until cb runs. */
struct coord_request {
    int op; /* COORD_OP_GET, COORD_OP_PUT, COORD_OP_DEL */
    struct rk_slice key;
    struct rk_slice value; /* put; value.p NULL: none given */
    uint64_t ttl_ms;       /* put: 0, no expiry */
    enum coord_cl cl;
    uint64_t deadline;         /* get: loop ms; 0: read_timeout_ms from now */
    struct coord_meter *meter; /* get: NULL or what its values count in */
    coord_cb cb;
    void *arg;
};

/* Start request r on c: 0 and r->cb runs once, later; or an error, and
 * it never runs (coord.h lists them). */
int coord_request(struct coord *c, const struct coord_request *r);

/* How long a peer may stay silent before reads ask it last:
 * coord_quiet_limit's rule on read_timeout_ms. */
uint64_t coord_quiet_limit_ms(uint32_t read_timeout_ms);

#endif
