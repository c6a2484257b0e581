/*
 * coord_node.c - the coordinator in the daemon: its host
 * (coord/coord_host.h) filled in over struct node -- the ring and the
 * pending ring's replicas with the peer table's names, the local replica,
 * internode RPC, hints, the HLC, metrics, the log -- and the one libuv
 * timer of its wake list; and coord_node.h's entry points, which take the
 * node.
 *
 * Apart from coord/ so that the coordinator's core reaches the daemon
 * only through the host: tests/unit/check_coord.c runs the same core with
 * fake replicas on a fake clock.
 */
#include "node/coord_node.h"

#include <errno.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>

#include <uv.h>

#include "coord/coord_host.h"
#include "gossip/gossip.h"
#include "node/clock.h"
#include "node/daemon.h"
#include "node/log.h"
#include "node/obs.h"
#include "node/replica.h"
#include "node/ring_view.h"
#include "ring/ring.h"
#include "storage/store.h"
#include "wire/rpc_msg.h"

/* The coordinator of a node and its wake timer. */
struct coord_node {
    node *n;
    struct coord *core;
    uv_timer_t wake;
    bool wake_open;
};

/* ---- the host --------------------------------------------------------- */

static uint64_t host_now_ms(void *arg)
{
    node *n = arg;
    return uv_now(n->loop);
}

/* a request's start: the time of the read that brought it (held, rk.h) */
static uint64_t host_now_ns(void *arg)
{
    (void)arg;
    return rk_clock_mono_ns();
}

/* expiries are judged by it: the peers' time while this node's clock is
 * off (clock.c) */
static uint64_t host_wall_ms(void *arg)
{
    return node__clock_cluster_ms(arg);
}

_Static_assert(COORD_LOG_DEBUG == (int)NODE_LOG_DEBUG &&
                   COORD_LOG_ERROR == (int)NODE_LOG_ERROR,
               "coord_log_level takes node/log.h's numbers");

static void host_log(void *arg,
                     enum coord_log_level level,
                     const char *event,
                     const char *fmt,
                     va_list ap)
{
    (void)arg;
    if ((enum node_log_level)level >= node_log_min)
        node_log_vwrite((enum node_log_level)level, event, fmt, ap);
}

static void on_wake(uv_timer_t *t)
{
    node *n = t->data;
    coord_wake(n->coord->core);
}

static void host_wake_arm(void *arg, uint64_t at)
{
    node *n = arg;
    struct coord_node *cn = n->coord;
    if (!cn->wake_open)
        return;
    if (at == 0) {
        uv_timer_stop(&cn->wake);
        return;
    }
    uint64_t now = uv_now(n->loop);
    uv_timer_start(&cn->wake, on_wake, at > now ? at - now : 0, 0);
}

/* A node that has heard of a newer ring epoch than it applied holds its
 * requests until it catches up; one settling after a restart (no peer
 * heard yet) refuses them at once: that can last seconds, and a client
 * with several hosts does better elsewhere. */
static int host_ready(void *arg)
{
    node *n = arg;
    if (n->stopping)
        return RK_ECLOSED;
    if (n->ring_stale)
        return n->settling ? RK_ESTALE : COORD_HOST_STALE_WAIT;
    return 0;
}

static int
host_replicas(void *arg, struct coord_replicas *out, uint64_t token, bool write)
{
    node *n = arg;
    ring *r = n->ring;
    if (!r || ring_token_count(r) == 0)
        return RK_EUNAVAILABLE;
    uint32_t idx[RING_MAX_REPLICAS];
    size_t nr = ring_replicas(r, token, idx, RING_MAX_REPLICAS);
    if (nr > RING_MAX_REPLICAS)
        nr = RING_MAX_REPLICAS;
    /* A node joining (n->ring_pending) is a pending replica of the keys it
     * is about to own: a write goes to it too, and needs its answer on top
     * of the level's (Cassandra's rule), so that a write acknowledged
     * during the join is on the new replica set as well as on the old
     * one, whichever of the two the next read is counted against. Unlike
     * Cassandra, a pending replica that is DOWN is not waited for (it gets
     * a hint, as any DOWN replica): a joiner that died would otherwise
     * make every write of its ranges need all the old replicas until it
     * came back. When it does, it resumes each range where it was, the
     * hints bringing what it missed meanwhile, or, down past the hint
     * window, streams every range again from the start (streaming/). Both
     * rings hold the same members, so their node indices agree. */
    uint32_t nat = (uint32_t)nr;
    /* Several joins at once: each joiner's own pending ring too (the ring
     * with it alone placed, which it streams against), so that a join
     * queued behind another (ring_view.c, node__join_queued) has every
     * write of the ranges it will gain from its announcement on, and
     * streams as soon as its turn comes, without a ring delay of its
     * own. Their node indices agree with the ring's as well. */
    for (size_t j = 0; write && j <= n->njoins; j++) {
        const ring *pr_ring = j < n->njoins ? n->joins[j].r : n->ring_pending;
        if (!pr_ring)
            continue;
        uint32_t pr[RING_MAX_REPLICAS];
        size_t np = ring_replicas(pr_ring, token, pr, RING_MAX_REPLICAS);
        for (size_t k = 0; k < np && k < RING_MAX_REPLICAS; k++) {
            bool known = false;
            for (uint32_t i = 0; i < nr; i++)
                known |= idx[i] == pr[k];
            if (!known && nr < RING_MAX_REPLICAS)
                idx[nr++] = pr[k];
        }
    }
    out->nrep = (uint32_t)nr;
    out->nnat = nat;
    /* names and addresses point into the current peer table, which the
     * request holds until it is released (the node may replace it) */
    out->hold = n->peer_tab;
    if (n->peer_tab)
        n->peer_tab->refs++;
    for (uint32_t i = 0; i < out->nrep; i++) {
        struct ring_node_info ni;
        ring_node_get(r, &ni, idx[i]);
        out->rep[i].dc = ni.dc;
        if (idx[i] >= n->npeers) { /* unknown: neither up nor self */
            out->name[i] = out->iaddr[i] = "";
            out->rep[i].self = out->rep[i].up = false;
            continue;
        }
        const struct node_peer *p = &n->peer[idx[i]];
        out->name[i] = p->name;
        out->iaddr[i] = p->iaddr;
        out->rep[i].self = p->self;
        out->rep[i].up = p->up;
    }
    return 0;
}

static void host_release(void *arg, void *hold)
{
    (void)arg;
    node__peer_tab_unref(hold);
}

static uint64_t host_epoch(void *arg)
{
    node *n = arg;
    return n->ring ? ring_epoch(n->ring) : 0;
}

/* A replica's ring is at least `epoch`: heard of, as if by gossip
 * (gossip_epoch_heard); the ring is stale until membership.c applies it. */
static void host_ring_behind(void *arg, uint64_t epoch)
{
    node *n = arg;
    gossip_epoch_heard(n->g, epoch);
    n->ring_stale = node__ring_stale_now(n);
}

static int host_local_write(void *arg,
                            struct rk_slice key,
                            const struct rpc_record *rec,
                            coord_local_cb cb,
                            void *cb_arg)
{
    return node__local_write(arg, key, rec, cb, cb_arg);
}

static int host_local_read(void *arg,
                           struct rk_slice key,
                           bool *found,
                           struct rpc_record *rec,
                           uint8_t **buf,
                           size_t *cap)
{
    return node__local_read(arg, key, found, rec, buf, cap);
}

static void host_local_prefetch(void *arg, uint64_t token)
{
    node *n = arg;
    if (n->store)
        store_prefetch(n->store, token);
}

static int host_rpc(void *arg,
                    const char *iaddr,
                    const struct rpc_buf *msg,
                    uint32_t timeout_ms,
                    uint32_t max_quiet_ms,
                    coord_rpc_cb cb,
                    void *cb_arg)
{
    return node__rpc_addr(arg, iaddr, msg, timeout_ms, max_quiet_ms, cb,
                          cb_arg);
}

static uint64_t host_quiet_ms(void *arg, const char *iaddr)
{
    return node__peer_quiet_ms(arg, iaddr);
}

static bool host_reachable(void *arg, const char *iaddr)
{
    return node__peer_reachable(arg, iaddr);
}

static void
host_hint(void *arg, const char *name, struct rk_slice key, struct rk_slice rec)
{
    node__hint_store(arg, name, key, rec);
}

static int host_local_full(void *arg)
{
    return node__disk_full(arg) ? RK_EFULL : 0;
}

static bool host_refused_for_good(void *arg, int status)
{
    (void)arg;
    return node__hint_rejected_for_good(status);
}

static int host_clock_now(void *arg, uint64_t *out)
{
    return node__clock_now(out, arg);
}

static int host_clock_recv(void *arg, uint64_t remote, const char *from)
{
    return node__clock_recv(arg, remote, from);
}

static int host_clock_seen(void *arg, uint64_t ts)
{
    return node__clock_seen(arg, ts);
}

static void
host_observe(void *arg, int op, enum coord_cl cl, int err, uint64_t start_ns)
{
    node__obs_request(arg, op, cl, err, start_ns);
}

/* ---- the node's entry points ------------------------------------------ */

int node__coord_new(struct coord_node **out, node *n)
{
    struct coord_node *cn = calloc(1, sizeof(*cn));
    if (!cn)
        return -ENOMEM;
    const struct coord_host h = {.arg = n,
                                 .now_ms = host_now_ms,
                                 .now_ns = host_now_ns,
                                 .wall_ms = host_wall_ms,
                                 .log = host_log,
                                 .wake_arm = host_wake_arm,
                                 .ready = host_ready,
                                 .replicas = host_replicas,
                                 .release = host_release,
                                 .epoch = host_epoch,
                                 .ring_behind = host_ring_behind,
                                 .local_write = host_local_write,
                                 .local_read = host_local_read,
                                 .local_prefetch = host_local_prefetch,
                                 .local_full = host_local_full,
                                 .rpc = host_rpc,
                                 .quiet_ms = host_quiet_ms,
                                 .reachable = host_reachable,
                                 .hint = host_hint,
                                 .refused_for_good = host_refused_for_good,
                                 .clock_now = host_clock_now,
                                 .clock_recv = host_clock_recv,
                                 .clock_seen = host_clock_seen,
                                 .observe = host_observe};
    const struct coord_opts o = {
        .datacenter = n->cfg.datacenter,
        .read_timeout_ms = (uint32_t)n->cfg.read_timeout_ms,
        .write_timeout_ms = (uint32_t)n->cfg.write_timeout_ms,
        .max_inflight = n->cfg.max_inflight};
    int rc = coord_new(&cn->core, &h, &o);
    if (rc < 0) {
        free(cn);
        return rc;
    }
    cn->n = n;
    *out = cn;
    return 0;
}

void node__coord_free(struct coord_node *cn)
{
    if (!cn)
        return;
    coord_free(cn->core);
    free(cn);
}

void node__coord_start(node *n)
{
    struct coord_node *cn = n->coord;
    uv_timer_init(n->loop, &cn->wake);
    cn->wake.data = n;
    cn->wake_open = true;
    coord_open(cn->core);
}

void node__coord_stop(node *n)
{
    struct coord_node *cn = n->coord;
    if (!cn->wake_open)
        return;
    coord_close(cn->core);
    cn->wake_open = false;
    n->pending_closes++;
    uv_close((uv_handle_t *)&cn->wake, node__handle_closed);
}

void node__coord_run_deferred(node *n)
{
    coord_run_deferred(n->coord->core);
}

void node__coord_unpark(node *n)
{
    coord_unpark(n->coord->core);
}

const struct coord_stats *node__coord_stats(const node *n)
{
    return coord_stats(n->coord->core);
}

int coord_get(
    node *n, struct rk_slice key, enum coord_cl cl, coord_cb cb, void *arg)
{
    return coord_get_metered(n, key, cl, 0, NULL, cb, arg);
}

int coord_get_metered(node *n,
                      struct rk_slice key,
                      enum coord_cl cl,
                      uint64_t deadline,
                      struct coord_meter *m,
                      coord_cb cb,
                      void *arg)
{
    const struct coord_request r = {.op = COORD_OP_GET,
                                    .key = key,
                                    .cl = cl,
                                    .deadline = deadline,
                                    .meter = m,
                                    .cb = cb,
                                    .arg = arg};
    return coord_request(n->coord->core, &r);
}

int coord_put(node *n,
              struct rk_slice key,
              struct rk_slice value,
              uint64_t ttl_ms,
              enum coord_cl cl,
              coord_cb cb,
              void *arg)
{
    const struct coord_request r = {.op = COORD_OP_PUT,
                                    .key = key,
                                    .value = value,
                                    .ttl_ms = ttl_ms,
                                    .cl = cl,
                                    .cb = cb,
                                    .arg = arg};
    return coord_request(n->coord->core, &r);
}

int coord_del(
    node *n, struct rk_slice key, enum coord_cl cl, coord_cb cb, void *arg)
{
    const struct coord_request r = {
        .op = COORD_OP_DEL, .key = key, .cl = cl, .cb = cb, .arg = arg};
    return coord_request(n->coord->core, &r);
}

uint64_t coord_read_deadline(node *n)
{
    return uv_now(n->loop) + (uint64_t)n->cfg.read_timeout_ms;
}

uint64_t coord_quiet_limit(const node *n)
{
    return coord_quiet_limit_ms((uint32_t)n->cfg.read_timeout_ms);
}

enum coord_cl coord_default_cl(const node *n)
{
    return n->cfg.default_consistency;
}
