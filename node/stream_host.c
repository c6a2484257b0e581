/*
 * stream_host.c - the node's side of streaming/: the host interface
 * (struct stream_host) filled in with the node's clock (and its HLC, which
 * sees every streamed record's timestamp), log, store, peers, internode
 * RPCs, rings, gossip announcements, saved state and thread pool; and the
 * wiring the admin commands use (the join begun, `ringkv abort`, the netstats
 * text).
 *
 * streaming/ holds the logic of a join's pull, a leave's push and a
 * cleanup and never sees `struct node`; this file is the only place that
 * translates between the two. Works queued on the pool are counted in
 * pending_closes, so the node's stop waits for them.
 */
#include "node/stream_host.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "gossip/gossip.h"
#include "net/net.h"
#include "node/clock.h"
#include "node/daemon.h"
#include "node/log.h"
#include "node/membership.h"
#include "node/purge.h"
#include "node/repair_host.h"
#include "node/replica.h"
#include "node/ring_view.h"
#include "node/snapshot.h"
#include "ring/ring.h"
#include "storage/store.h"
#include "streaming/streaming.h"
#include "wire/rpc_msg.h"

_Static_assert(GOSSIP_NAME_MAX <= STREAM_NAME_MAX,
               "streaming holds every node name gossip carries");
_Static_assert(sizeof(((struct node_peer *)0)->iaddr) <= STREAM_ADDR_MAX,
               "streaming holds every internode address");
_Static_assert(STREAM_DONOR_MAX_RANGES_DEFAULT == 2 &&
                   STREAM_MAX_RANGES_DEFAULT == 12,
               "config.h's defaults are streaming's");

/* ---- the host interface ---------------------------------------------------
 */

static uint64_t h_now_ms(void *arg)
{
    return node__mono_ms(arg);
}

static uint64_t h_wall_ms(void *arg)
{
    (void)arg;
    return node__now_ms();
}

static uint64_t h_hlc(void *arg)
{
    node *n = arg;
    return n->clock.hlc.last;
}

static void h_log(void *arg,
                  enum stream_log_level level,
                  const char *event,
                  const char *fmt,
                  va_list ap)
{
    (void)arg;
    enum node_log_level l = level == STREAM_LOG_DEBUG  ? NODE_LOG_DEBUG
                            : level == STREAM_LOG_INFO ? NODE_LOG_INFO
                            : level == STREAM_LOG_WARN ? NODE_LOG_WARN
                                                       : NODE_LOG_ERROR;
    if (l >= node_log_min)
        node_log_vwrite(l, event, fmt, ap);
}

static store *h_store(void *arg)
{
    node *n = arg;
    return n->store;
}

static bool h_stopping(void *arg)
{
    node *n = arg;
    return n->stopping != 0;
}

static void sw_run(void *job)
{
    struct stream_work *sw = job;
    sw->work(sw);
}

static void sw_done(void *job, int status)
{
    struct stream_work *sw = job;
    sw->done(sw, status); /* may free sw */
}

static int h_queue_work(void *arg, struct stream_work *sw)
{
    return node__queue_work(arg, sw_run, sw_done, sw);
}

static int h_clock_seen(void *arg, uint64_t ts)
{
    return node__clock_seen(arg, ts);
}

static void peer_copy(struct stream_peer *out, const struct node_peer *p)
{
    snprintf(out->name, sizeof(out->name), "%s", p->name);
    snprintf(out->iaddr, sizeof(out->iaddr), "%s", p->iaddr);
    out->up = p->up;
    out->self = p->self;
}

static int h_peer_by_name(void *arg, const char *name, struct stream_peer *out)
{
    const struct node_peer *p = node__peer_by_name(arg, name, NULL);
    if (!p)
        return RK_ENOTFOUND;
    peer_copy(out, p);
    return 0;
}

static int h_peer_at(void *arg, uint32_t idx, struct stream_peer *out)
{
    node *n = arg;
    if (idx >= n->npeers)
        return RK_ENOTFOUND;
    peer_copy(out, &n->peer[idx]);
    return 0;
}

static int h_rpc(void *arg,
                 const char *iaddr,
                 struct rk_slice msg,
                 uint32_t timeout_ms,
                 stream_rpc_cb cb,
                 void *cbarg)
{
    /* net/ copies the frame into the connection's output */
    struct rpc_buf view = {.data = (uint8_t *)msg.p, .len = msg.len};
    return node__rpc_addr(arg, iaddr, &view, timeout_ms, 0, cb, cbarg);
}

static void h_reply(void *arg, void *conn, uint64_t id, struct rk_slice frame)
{
    (void)arg;
    net_conn_reply(conn, id, frame);
}

static void h_conn_ref(void *arg, void *conn)
{
    (void)arg;
    net_conn_ref(conn);
}

static void h_conn_unref(void *arg, void *conn)
{
    (void)arg;
    net_conn_unref(conn);
}

static void h_bad_frame(void *arg)
{
    node *n = arg;
    n->stats.internode_bad++;
}

static const ring *h_ring(void *arg)
{
    node *n = arg;
    return n->ring;
}

static const ring *h_ring_pending(void *arg)
{
    node *n = arg;
    /* a joining node streams what its own join moves: the ring with it
     * alone placed, not with the other joiners too (where one of them
     * would take ranges it replicates once it is NORMAL before them) */
    if (n->boot == NODE_BOOT_STREAM)
        return node__join_ring(n, n->cfg.node_name);
    return n->ring_pending;
}

static bool h_ring_stale(void *arg)
{
    node *n = arg;
    return n->ring_stale || n->settling;
}

static bool h_ring_member(void *arg)
{
    node *n = arg;
    return n->boot == NODE_BOOT_DONE;
}

static void h_ring_rebuild(void *arg)
{
    node__ring_rebuild(arg);
}

static void h_ranges_ensure(void *arg)
{
    node__ranges_ensure(arg);
}

static size_t h_repl_mismatches(void *arg)
{
    return node__repl_mismatches(arg);
}

static int h_dc_rf(void *arg, const char *dc)
{
    node *n = arg;
    int rf = 0;
    for (int i = 0; i < n->cfg.ndcs; i++)
        if (strcmp(n->cfg.replication[i].name, dc) == 0)
            rf = n->cfg.replication[i].rf;
    return rf;
}

static int h_announce(void *arg,
                      const char *peer,
                      enum stream_announce st,
                      uint64_t *epoch)
{
    node *n = arg;
    int gs = st == STREAM_ANNOUNCE_NORMAL    ? GOSSIP_STATUS_NORMAL
             : st == STREAM_ANNOUNCE_LEAVING ? GOSSIP_STATUS_LEAVING
                                             : GOSSIP_STATUS_LEFT;
    if (!peer)
        return st == STREAM_ANNOUNCE_REMOVED
                   ? RK_EBADREQ
                   : gossip_status_set(n->g, gs, 0, epoch);
    if (st == STREAM_ANNOUNCE_REMOVED)
        return gossip_peer_remove(n->g, peer, node__mono_ms(n), epoch);
    return gossip_peer_status_set(n->g, peer, gs, node__mono_ms(n), epoch);
}

static void h_state_get(void *arg, struct stream_state *out)
{
    node *n = arg;
    out->ring_epoch = n->st.ring_epoch;
    out->first_token = n->st.ntokens ? n->st.tokens[0] : 0;
    out->ntokens = n->st.ntokens;
    out->leaving = n->st.leaving != 0;
    out->left = n->st.left != 0;
    snprintf(out->removing, sizeof(out->removing), "%.*s", STREAM_NAME_MAX,
             n->st.removing);
    snprintf(out->replacing, sizeof(out->replacing), "%.*s", STREAM_NAME_MAX,
             n->st.joining ? n->st.replace : "");
    snprintf(out->rebuild_from, sizeof(out->rebuild_from), "%.*s",
             STREAM_NAME_MAX, n->st.rebuild_from);
}

static int h_state_save(void *arg, const struct stream_state *st)
{
    node *n = arg;
    n->st.ring_epoch = st->ring_epoch;
    n->st.leaving = st->leaving;
    n->st.left = st->left;
    snprintf(n->st.removing, sizeof(n->st.removing), "%s", st->removing);
    snprintf(n->st.rebuild_from, sizeof(n->st.rebuild_from), "%s",
             st->rebuild_from);
    return node__state_save(n);
}

static void h_join_done(void *arg, uint64_t epoch)
{
    node *n = arg;
    n->st.ring_epoch = epoch;
    n->st.joining = 0;
    n->st.repair_due = n->cfg.repair_after_join; /* repair.c */
    n->raj_since_ms = node__mono_ms(n);
    node__state_save(n);
    n->boot = NODE_BOOT_DONE;
}

static int h_join_withdraw(void *arg, uint64_t *epoch)
{
    return node__join_withdraw(arg, epoch);
}

static bool
h_join_queued(void *arg, char *ahead, size_t cap, char *why, size_t why_cap)
{
    return node__join_gate(arg, ahead, cap, why, why_cap);
}

/* Hints this node keeps for the other members would be lost with it: the
 * first member that has some (replay kicked), or 0 when none does. */
static uint64_t h_hints_pending(void *arg, char *for_name, size_t cap)
{
    node *n = arg;
    if (n->hints.stores > 0) { /* not even stored yet */
        snprintf(for_name, cap, "(being stored)");
        return (uint64_t)n->hints.stores;
    }
    for (uint32_t i = 0; n->ring && n->store && i < n->npeers; i++) {
        struct ring_node_info ni;
        uint64_t cnt = 0;
        if (n->peer[i].self || ring_node_get(n->ring, &ni, i) < 0 ||
            (ni.state != RING_NORMAL && ni.state != RING_LEAVING) ||
            store_hint_count(&cnt, n->store, n->peer[i].name) < 0 || cnt == 0)
            continue;
        snprintf(for_name, cap, "%s", n->peer[i].name);
        node__hints_kick(n, i);
        return cnt;
    }
    return 0;
}

static void h_self_stop(void *arg)
{
    node *n = arg;
    node_stop(n, n->self_stop_cb, n->self_stop_arg);
}

int node__streaming_new(node *n)
{
    struct stream_config sc = STREAM_CONFIG_INIT;
    snprintf(sc.node_name, sizeof(sc.node_name), "%.*s", STREAM_NAME_MAX,
             n->cfg.node_name);
    sc.stream_throughput_mb = n->cfg.stream_throughput_mb;
    sc.stream_max_ranges = n->cfg.stream_max_ranges;
    sc.stream_donor_max_ranges = n->cfg.stream_donor_max_ranges;
    sc.stall_warning_s = n->cfg.stall_warning_s;
    sc.auto_cleanup_s = n->cfg.auto_cleanup_s;
    sc.gossip_interval_ms = n->cfg.gossip_interval_ms;
    sc.hinted_handoff = n->cfg.hinted_handoff;
    sc.max_hint_window_ms = (uint64_t)n->cfg.max_hint_window_ms;
    struct stream_host h = {
        .arg = n,
        .now_ms = h_now_ms,
        .wall_ms = h_wall_ms,
        .hlc = h_hlc,
        .log = h_log,
        .store = h_store,
        .stopping = h_stopping,
        .queue_work = h_queue_work,
        .clock_seen = h_clock_seen,
        .peer_by_name = h_peer_by_name,
        .peer_at = h_peer_at,
        .rpc = h_rpc,
        .reply = h_reply,
        .conn_ref = h_conn_ref,
        .conn_unref = h_conn_unref,
        .bad_frame = h_bad_frame,
        .ring = h_ring,
        .ring_pending = h_ring_pending,
        .ring_stale = h_ring_stale,
        .ring_member = h_ring_member,
        .ring_rebuild = h_ring_rebuild,
        .ranges_ensure = h_ranges_ensure,
        .repl_mismatches = h_repl_mismatches,
        .dc_rf = h_dc_rf,
        .announce = h_announce,
        .state_get = h_state_get,
        .state_save = h_state_save,
        .join_done = h_join_done,
        .join_withdraw = h_join_withdraw,
        .join_queued = h_join_queued,
        .hints_pending = h_hints_pending,
        .self_stop = h_self_stop,
    };
    return stream_new(&n->streaming, &sc, &h);
}

/* ---- the wiring ------------------------------------------------------------
 */

int node__stream_begin(node *n)
{
    int rc = stream_join_begin(n->streaming);
    if (rc == 0)
        n->boot = NODE_BOOT_STREAM;
    return rc;
}

int node__abort(node *n, char **text, size_t *len)
{
    char msg[1024];
    int rc = RK_EBADREQ;
    if (n->boot == NODE_BOOT_STREAM) {
        rc = stream_join_abort(n->streaming, msg, sizeof(msg));
    } else if (n->boot == NODE_BOOT_WAIT && !n->parked) {
        /* about to join: learning the cluster, no tokens chosen yet */
        uint64_t epoch = 0;
        rc = node__join_withdraw(n, &epoch);
        if (rc < 0)
            snprintf(msg, sizeof(msg), "cannot stop the join of %s: %s",
                     n->cfg.node_name, rk_strerror(rc));
        else
            snprintf(msg, sizeof(msg),
                     "%s will not join: it had chosen no tokens yet; it waits "
                     "for `ringkv join` (after a restart too)",
                     n->cfg.node_name);
        if (rc == 0)
            LOG(WARN, "join.aborted",
                "epoch=%llu ranges_done=0 ranges=0 keys=0 note=\"before "
                "choosing tokens: waiting for `ringkv join`\"",
                (unsigned long long)epoch);
    } else if (n->parked) {
        snprintf(msg, sizeof(msg),
                 "nothing to abort on %s: it is not in the ring, waiting for "
                 "`ringkv join`%s",
                 n->cfg.node_name,
                 n->st.wait_join ? " (its join was aborted)" : "");
    } else {
        rc = stream_move_abort(n->streaming, msg, sizeof(msg));
    }
    *text = strdup(msg);
    if (!*text)
        return -ENOMEM;
    *len = strlen(*text);
    return rc;
}

char *node__netstats_text(node *n, size_t *len)
{
    char *t = NULL;
    size_t tl = 0;
    FILE *f = open_memstream(&t, &tl);
    if (!f)
        return NULL;
    const char *mode =
        n->parked && n->st.wait_join
            ? "WAITING (its join was aborted: `ringkv join` makes it "
              "join again)"
        : n->parked ? "WAITING (join_ring is false: `ringkv join` "
                      "makes it join)"
        : n->boot == NODE_BOOT_WAIT ? "STARTING (learning the cluster)"
                                    : "NORMAL";
    stream_text(n->streaming, f, mode);
    node__repair_text(n, f);
    node__purge_text(n, f);
    node__snapshot_text(n, f);
    stream_text_sent(n->streaming, f);
    if (fclose(f) != 0) {
        free(t);
        return NULL;
    }
    *len = tl;
    return t;
}
