/*
 * membership.c - the libuv shell around the pure gossip state machine: how
 * this node learns and announces who is in the cluster. The ring those
 * members make is the ring view's (ring_view.c).
 *
 * Every gossip_interval_ms the timer calls gossip_tick(); every datagram on
 * the gossip port goes to gossip_recv(); a second timer, re-armed after
 * each of them for gossip_timer_due(), calls gossip_timer() (the failure
 * detector's probes and suspicions). All return packets (sent with
 * net_udp; a "host:port" name is resolved off the loop first) and events,
 * handled here: UP/DOWN update routing (and UP starts hint replay),
 * MEMBERSHIP rebuilds the ring, RING_STALE/CAUGHT_UP gate the coordinator,
 * AUTH_FAIL and BAD_PACKET are counted and logged. The tick also drives
 * the other parts' periodic work (clock, streams, leave, cleanup, repair),
 * the silence watch (a peer that leaves requests unanswered) and the end
 * of settling (a restarted node that heard no peer).
 *
 * Joining: a node with a new data_dir announces STATUS BOOT and listens for
 * a few rounds. It chooses its tokens (balanced by default, against the
 * ring it has learnt with the joining nodes' tokens placed) only when no
 * live node with a smaller name is still BOOT without tokens and none is
 * leaving, so nodes started together choose one after the other and never
 * pick the same tokens; a non-seed node also waits until it has heard from
 * the cluster. Then it announces its TOKENS and, with a cluster to stream
 * its ranges from, STATUS BOOT while it streams them in (streaming/), or
 * else STATUS NORMAL (a new epoch), and persists them, so a restart
 * re-announces the same tokens. Joins stream at the same time unless
 * their ranges overlap; then the later waits (node__join_gate, asked by
 * streaming/ each tick until it plans, says so in gossip and the log). A node
 * started with join_ring false (or whose join was aborted) waits, parked, for
 * `ringkv join`.
 *
 * Replacing: a new node started with replace: X gossips "replacing=X" in
 * its SCHEMA but no STATUS while it listens; then, if X is a member with
 * tokens that is not UP, not leaving or joining, and no other node is
 * replacing X, it takes X's tokens and joins as above (BOOT, streaming):
 * the ring view puts it in X's place in the pending ring, its stream
 * pulls exactly X's ranges from the other replicas, and at the end it
 * announces X REMOVED and itself NORMAL. Otherwise it logs why it refuses
 * and stops (exit code 1), having announced nothing that changes the
 * ring.
 */
#include "node/membership.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>

#include "gossip/gossip.h"
#include "net/net.h"
#include "node/clock.h"
#include "node/coord_node.h"
#include "node/daemon.h"
#include "node/log.h"
#include "node/obs.h"
#include "node/purge.h"
#include "node/repair_host.h"
#include "node/replica.h"
#include "node/replication.h"
#include "node/ring_view.h"
#include "node/stream_host.h"
#include "ring/ring.h"
#include "storage/node_state.h"
#include "streaming/streaming.h"

/* A fresh node listens at least RING_DELAY_TICKS gossip rounds, and at
 * least ring_delay_ms (config), and until the endpoints it knows have not
 * changed for RING_DELAY_TICKS rounds, before it chooses its tokens. */
#define RING_DELAY_TICKS 5
#define SETTLE_INTERVALS 10 /* a restarted node waits this long for a peer */

/* ---- sending ---------------------------------------------------------- */

#define NAME_TTL_MS   30000 /* a resolved name is used this long, then again */
#define NAME_RETRY_MS 1000  /* after a failure */

static void on_name(uv_getaddrinfo_t *req, int status, struct addrinfo *res)
{
    struct node_name *e = req->data;
    e->busy = false;
    char out[sizeof(e->addr)];
    if (status == 0 && res &&
        net_addr_format(out, sizeof(out), res->ai_addr) == 0) {
        if (strcmp(out, e->addr) != 0)
            LOG(INFO, "name.resolved", "name=%s addr=%s", e->host_port, out);
        memcpy(e->addr, out, sizeof(out));
        e->next_ms = node__mono_ms(e->n) + NAME_TTL_MS;
    } else if (status != UV_ECANCELED) {
        /* the last address found, if any, is used meanwhile */
        LOG(DEBUG, "name.unresolved", "name=%s error=\"%s\"", e->host_port,
            status ? uv_strerror(status) : "no address");
        e->next_ms = node__mono_ms(e->n) + NAME_RETRY_MS;
    }
    uv_freeaddrinfo(res);
}

/* The numeric address of the name host_port as last resolved, or NULL;
 * starts resolving it again, off the loop, when that is due. */
static const char *name_addr(node *n, const char *host_port)
{
    struct node_name *e = NULL;
    for (size_t i = 0; i < n->membership.nnames && !e; i++)
        if (strcmp(n->membership.names[i]->host_port, host_port) == 0)
            e = n->membership.names[i];
    if (!e) {
        if (n->membership.nnames == NODE_NAMES_MAX ||
            strlen(host_port) >= sizeof(e->host_port) ||
            !(e = calloc(1, sizeof(*e))))
            return NULL;
        e->n = n;
        e->req.data = e;
        memcpy(e->host_port, host_port, strlen(host_port) + 1);
        n->membership.names[n->membership.nnames++] = e;
    }
    if (!e->busy && !n->stopping && node__mono_ms(n) >= e->next_ms) {
        char buf[sizeof(e->host_port)], port[8];
        int p;
        const char *host =
            node__split_host_port(buf, sizeof(buf), &p, host_port);
        struct addrinfo hints = {.ai_family = AF_UNSPEC,
                                 .ai_socktype = SOCK_DGRAM};
        snprintf(port, sizeof(port), "%d", p);
        if (host &&
            uv_getaddrinfo(n->loop, &e->req, on_name, host, port, &hints) == 0)
            e->busy = true;
        else
            e->next_ms = node__mono_ms(n) + NAME_RETRY_MS;
    }
    return e->addr[0] ? e->addr : NULL;
}

static void gossip_send_all(node *n)
{
    for (size_t i = 0; i < n->membership.gout.n_pkts; i++) {
        struct gossip_packet *p = &n->membership.gout.pkts[i];
        int rc =
            net_udp_send_to(n->membership.udp, p->to, RK_SLICE(p->buf, p->len));
        if (rc == -EINVAL) { /* a host name */
            const char *num = name_addr(n, p->to);
            rc = num ? net_udp_send_to(n->membership.udp, num,
                                       RK_SLICE(p->buf, p->len))
                     : -EHOSTUNREACH;
        }
        if (rc == 0)
            n->stats.gossip_out++;
        else
            LOG(DEBUG, "gossip.send_fail", "to=%s error=\"%s\"", p->to,
                rk_strerror(rc));
    }
}

void node__membership_init(node *n)
{
    gossip_out_init(&n->membership.gout);
}

void node__membership_free(node *n)
{
    gossip_out_free(&n->membership.gout);
    for (size_t i = 0; i < n->membership.nnames; i++)
        free(n->membership.names[i]);
}

/* ---- events ----------------------------------------------------------- */

static void peer_set_up(node *n, const char *name, bool up)
{
    for (uint32_t i = 0; i < n->npeers; i++) {
        if (strcmp(n->peer[i].name, name) == 0) {
            n->peer[i].up = up;
            n->peer[i].down_since_ms = up ? 0 : node__mono_ms(n);
            if (up) {
                node__peer_retry(n, n->peer[i].iaddr);
                node__hints_kick(n, i);
            }
            return;
        }
    }
}

/* A peer that restarted may have refused our connections while it was
 * gone, and coordinators plan it DOWN for that: it is back. */
static void peer_retry(node *n, const char *name)
{
    for (uint32_t i = 0; i < n->npeers; i++)
        if (strcmp(n->peer[i].name, name) == 0)
            node__peer_retry(n, n->peer[i].iaddr);
}

static void boot_try(node *n, uint64_t now, bool tick);

static void handle_events(node *n)
{
    bool rebuild = false, boot_news = false, repl_news = false;
    for (size_t i = 0; i < n->membership.gout.n_events; i++) {
        const struct gossip_event *e = &n->membership.gout.events[i];
        switch (e->type) {
        case GOSSIP_EV_JOINED:
            LOG(INFO, "gossip.joined", "peer=%s", e->name);
            break;
        case GOSSIP_EV_RESTARTED:
            LOG(INFO, "gossip.restarted", "peer=%s", e->name);
            peer_retry(n, e->name);
            break;
        case GOSSIP_EV_UP:
            LOG(INFO, "gossip.up", "peer=%s", e->name);
            peer_set_up(n, e->name, true);
            if (n->settling) { /* heard the cluster: its ring from now */
                n->settling = false;
                n->ring_stale = node__ring_stale_now(n);
                LOG(INFO, "ring.settled", "peer=%s", e->name);
                rebuild = true;
            }
            break;
        case GOSSIP_EV_DOWN:
            LOG(WARN, "gossip.down", "peer=%s", e->name);
            peer_set_up(n, e->name, false);
            break;
        case GOSSIP_EV_SUSPECT:
            LOG(INFO, "gossip.suspect", "peer=%s", e->name);
            break;
        case GOSSIP_EV_STATE:
            if (e->key == GOSSIP_KEY_ADDRESS || e->key == GOSSIP_KEY_SCHEMA ||
                e->key == GOSSIP_KEY_TOKENS)
                rebuild = true;
            boot_news |= e->key == GOSSIP_KEY_TOKENS;
            repl_news |= e->key == GOSSIP_KEY_SCHEMA;
            break;
        case GOSSIP_EV_MEMBERSHIP:
            rebuild = true;
            boot_news = true;
            repl_news = true;
            break;
        case GOSSIP_EV_RING_STALE:
            n->ring_stale = 1;
            LOG(INFO, "ring.stale", "epoch_known=%llu",
                (unsigned long long)e->epoch);
            rebuild = true;
            break;
        case GOSSIP_EV_EPOCH_ADOPTED:
            LOG(WARN, "ring.epoch_adopted",
                "epoch=%llu membership_epoch=%llu why=\"heard of for %d "
                "gossip rounds, announced by no member's status: the ring "
                "is built under it\"",
                (unsigned long long)e->epoch,
                (unsigned long long)gossip_epoch_membership(n->g),
                GOSSIP_HEARSAY_ROUNDS);
            rebuild = true;
            break;
        case GOSSIP_EV_RING_CAUGHT_UP:
            n->ring_stale = node__ring_stale_now(n);
            LOG(INFO, "ring.caught_up", "epoch=%llu",
                (unsigned long long)e->epoch);
            break;
        case GOSSIP_EV_EVICTED:
            LOG(INFO, "gossip.evicted", "peer=%s", e->name);
            rebuild = true;
            break;
        case GOSSIP_EV_AUTH_FAIL:
            n->stats.gossip_bad++;
            LOG_LIMITED(&n->loglim.gossip_auth, node__mono_ms(n), WARN,
                        "gossip.auth_fail", "from=%s error=%s", e->addr,
                        rk_errname(e->err));
            break;
        case GOSSIP_EV_BAD_PACKET:
            n->stats.gossip_bad++;
            LOG_LIMITED(&n->loglim.gossip_bad, node__mono_ms(n), INFO,
                        "gossip.bad_packet", "from=%s error=%s", e->addr,
                        rk_errname(e->err));
            break;
        case GOSSIP_EV_REPLAYED:
            n->stats.gossip_bad++;
            LOG_LIMITED(&n->loglim.gossip_replayed, node__mono_ms(n), WARN,
                        "gossip.replayed", "from=%s peer=%s", e->addr, e->name);
            break;
        }
    }
    /* a newer replication setting heard: adopted (its own rebuild) */
    if (repl_news)
        node__repl_watch(n);
    if (rebuild)
        node__ring_rebuild(n);
    /* a peer announced its tokens or a new status: perhaps this fresh
     * node's turn to choose, against the ring just rebuilt, ... */
    if (boot_news && n->boot == NODE_BOOT_WAIT)
        boot_try(n, node__mono_ms(n), false);
    /* ... or for its join, queued behind another, to stream */
    if (boot_news && n->boot == NODE_BOOT_STREAM)
        stream_join_poke(n->streaming);
    node__coord_unpark(n); /* requests that waited for this ring */
}

/* ---- joining ---------------------------------------------------------- */

static void announce_tokens(node *n, size_t nt, size_t others, bool pull);

/* This node as the token allocator sees it. */
static struct ring_joiner joiner_of(const node *n)
{
    return (struct ring_joiner){
        .name = n->cfg.node_name,
        .dc = n->cfg.datacenter,
        .rack = n->cfg.rack,
        .weight = (uint32_t)(n->cfg.weight * RING_WEIGHT_UNIT + 0.5)};
}

/* Choose nt tokens into n->st.tokens against base (NULL: none placed), as
 * token_allocation says; 0, or the allocator's error (logged). */
static int tokens_choose(node *n, size_t nt, const ring *base)
{
    struct ring_joiner j = joiner_of(n);
    int rc = ring_tokens_alloc(n->st.tokens, nt, base, &j,
                               n->cfg.token_allocation == NODE_ALLOC_RANDOM
                                   ? RING_ALLOC_RANDOM
                                   : RING_ALLOC_BALANCED);
    if (rc < 0)
        LOG(ERROR, "boot.alloc_fail", "error=\"%s\"", rk_strerror(rc));
    return rc;
}

/* Whether a live member of the ring (NORMAL or LEAVING) gossips another
 * replication setting than this node's: nodes that disagree place
 * replicas differently, so a node joining such a ring would take ranges
 * under a placement its peers do not use, and what it is given, or later
 * serves, would be at the wrong replicas. It stays out (logged every 30
 * ticks) until its setting is the ring's: restarted with the same
 * `replication`. Members that came to differ later are logged and shown
 * (ring_view.c), not stopped. */
static bool repl_refused(node *n, uint64_t now)
{
    /* the ring view marks the members whose replication differs
     * (repl_differs): only whether one is live and placed is asked here */
    for (size_t i = 0; i < n->npeers; i++) {
        struct gossip_peer_info pi, self;
        if (!n->peer[i].repl_differs ||
            gossip_peer_find(&pi, n->g, n->peer[i].name, now) < 0 ||
            !(pi.up || pi.phi < n->cfg.phi_convict_threshold) ||
            (pi.status != GOSSIP_STATUS_NORMAL &&
             pi.status != GOSSIP_STATUS_LEAVING))
            continue;
        struct node_membership *m = &n->membership;
        if ((m->repl_refused_logged == 0 ||
             m->ticks >= m->repl_refused_logged + 30) &&
            gossip_peer_get(&self, n->g, 0, now) == 0) {
            struct rk_slice theirs =
                node__schema_repl(pi.state[GOSSIP_KEY_SCHEMA]);
            struct rk_slice own =
                node__schema_repl(self.state[GOSSIP_KEY_SCHEMA]);
            m->repl_refused_logged = m->ticks ? m->ticks : 1;
            LOG(ERROR, "boot.replication_refused",
                "member=%s theirs=\"%.*s\" ours=\"%.*s\" action=\"%s\"",
                pi.name, (int)theirs.len, (const char *)theirs.p, (int)own.len,
                (const char *)own.p,
                "not joining a ring whose members place replicas otherwise: "
                "restart this node with the cluster's replication");
        }
        return true;
    }
    return false;
}

/* ---- replacing a dead node -------------------------------------------- */

/* The node this one replaces: the one node.state names (a replace under
 * way, or done), else, on a fresh node, the one the config names. */
static const char *replacing_of(const node *n)
{
    if (n->st.replace[0])
        return n->st.replace;
    return n->fresh ? n->cfg.replace : "";
}

/* Whether this node may replace cfg.replace now: 0 and the dead node's
 * tokens into n->st.tokens (*nt of them), or RK_EBADREQ and why. */
static int
replace_check(node *n, uint64_t now, size_t *nt, char *why, size_t cap)
{
    const char *x = n->cfg.replace;
    struct gossip_peer_info pi;
    size_t cnt = gossip_peer_count(n->g);
    for (size_t i = 0; i < cnt; i++) {
        char r[GOSSIP_NAME_MAX + 1];
        if (gossip_peer_get(&pi, n->g, i, now) < 0 || pi.self ||
            pi.quarantined || !pi.up)
            continue;
        node__schema_replacing(r, sizeof(r), pi.state[GOSSIP_KEY_SCHEMA]);
        if (strcmp(r, x) != 0)
            continue;
        /* two at once: the one with the smaller name goes */
        if (pi.state[GOSSIP_KEY_TOKENS].len > 0 ||
            strcmp(pi.name, n->cfg.node_name) < 0) {
            snprintf(why, cap, "%.64s is replacing %.64s already", pi.name, x);
            return RK_EBADREQ;
        }
    }
    if (gossip_peer_find(&pi, n->g, x, now) < 0) {
        snprintf(why, cap,
                 "no node %.64s in the cluster (check the name with `ringkv "
                 "status`)",
                 x);
        return RK_EBADREQ;
    }
    if (pi.quarantined || pi.status == GOSSIP_STATUS_LEFT ||
        pi.status == GOSSIP_STATUS_REMOVED) {
        snprintf(why, cap,
                 "%.64s has left the ring (LEFT or REMOVED): there is nothing "
                 "to replace; start this node without replace to join as a "
                 "new node",
                 x);
        return RK_EBADREQ;
    }
    if (pi.status == GOSSIP_STATUS_LEAVING) {
        snprintf(why, cap,
                 "%.64s is leaving (decommission or removenode under way): let "
                 "that finish, or abort it first",
                 x);
        return RK_EBADREQ;
    }
    if (pi.status != GOSSIP_STATUS_NORMAL ||
        pi.state[GOSSIP_KEY_TOKENS].len == 0) {
        snprintf(why, cap,
                 "%.64s is joining: it holds no tokens in the ring yet", x);
        return RK_EBADREQ;
    }
    if (pi.up) {
        snprintf(
            why, cap,
            "%.64s is UP: only a dead node can be replaced (stop it first, "
            "or decommission it)",
            x);
        return RK_EBADREQ;
    }
    if (gossip_tokens_decode(n->st.tokens, GOSSIP_MAX_TOKENS, nt,
                             pi.state[GOSSIP_KEY_TOKENS]) < 0 ||
        *nt == 0) {
        snprintf(why, cap, "cannot read the tokens %.64s gossips", x);
        return RK_EBADREQ;
    }
    return 0;
}

/* Take the dead node's tokens and stream its ranges in, or refuse and
 * stop. */
static void replace_try(node *n, uint64_t now, size_t others)
{
    char why[512];
    size_t nt = 0;
    if (replace_check(n, now, &nt, why, sizeof(why)) < 0) {
        n->st.ntokens = 0;
        LOG(ERROR, "replace.refused",
            "replace=%s why=\"%s\" note=\"nothing was changed; stopping\"",
            n->cfg.replace, why);
        fprintf(stderr, "ringkvd: replace %s refused: %s\n", n->cfg.replace,
                why);
        n->exit_code = 1;
        n->boot = NODE_BOOT_DONE; /* no other attempt */
        node_stop(n, n->self_stop_cb, n->self_stop_arg);
        return;
    }
    snprintf(n->st.replace, sizeof(n->st.replace), "%s", n->cfg.replace);
    n->st.ntokens = (int)nt;
    LOG(INFO, "replace.begin",
        "replace=%s tokens=%zu note=\"taking its tokens; streaming its "
        "ranges from the other replicas\"",
        n->cfg.replace, nt);
    announce_tokens(n, nt, others, true);
}

/* Whether pi, a peer this node may know by hearsay only (not UP: phi
 * stays 0 for a peer never heard), is taken as alive: since it was first
 * seen, its heartbeat has advanced within the last twenty gossip
 * intervals (5 s at least). A fresh node that died before choosing tokens
 * stops advancing and holds a joiner back that long only
 * (test_regression_dead_fresh_node_blocks_join); one alive, known through
 * the seeds before it is heard, holds it back (test_gossip: twelve nodes
 * started at once chose tokens together when it did not, and collided). */
static bool
hb_advancing(node *n, const struct gossip_peer_info *pi, uint64_t now)
{
    struct node_membership *m = &n->membership;
    struct node_boot_hb *e = NULL;
    for (size_t i = 0; i < m->nboot_hb && !e; i++)
        if (strcmp(m->boot_hb[i].name, pi->name) == 0)
            e = &m->boot_hb[i];
    if (!e) {
        if (m->nboot_hb == NODE_BOOT_HB_MAX)
            return true; /* cannot follow it: as before, alive */
        e = &m->boot_hb[m->nboot_hb++];
        snprintf(e->name, sizeof(e->name), "%s", pi->name);
        e->version = pi->version;
        e->advanced_ms = now ? now : 1; /* first seen: taken as alive */
        return true;
    }
    if (pi->version > e->version) {
        e->version = pi->version;
        e->advanced_ms = now ? now : 1;
    }
    uint64_t window = 20 * (uint64_t)n->cfg.gossip_interval_ms;
    if (window < 5000)
        window = 5000;
    return now - e->advanced_ms < window;
}

/* A fresh node's turn to choose its tokens: each gossip tick (`tick`),
 * and at once when gossip brings a peer's TOKENS or STATUS (the node
 * before it in the queue has announced: the next need not wait for its
 * tick, which took up to a gossip interval per node of a batch). */
static void boot_try(node *n, uint64_t now, bool tick)
{
    if (n->boot != NODE_BOOT_WAIT || n->parked)
        return;
    size_t cnt = gossip_peer_count(n->g);
    /* listen until the set of known endpoints has been stable a while */
    if (!tick) {
        if (cnt != n->membership.boot_known)
            return; /* the tick notes it */
    } else if (cnt != n->membership.boot_known) {
        n->membership.boot_known = cnt;
        n->membership.boot_stable_ticks = 0;
    } else {
        n->membership.boot_stable_ticks++;
    }
    if (n->membership.ticks < RING_DELAY_TICKS ||
        n->membership.ticks * (uint64_t)n->cfg.gossip_interval_ms <
            (uint64_t)n->cfg.ring_delay_ms ||
        n->membership.boot_stable_ticks < RING_DELAY_TICKS)
        return;
    size_t others = 0;
    for (size_t i = 0; i < cnt; i++) {
        struct gossip_peer_info pi;
        if (gossip_peer_get(&pi, n->g, i, now) < 0 || pi.self)
            continue;
        others++;
        if (pi.quarantined ||
            node__schema_flag(pi.state[GOSSIP_KEY_SCHEMA], "join=wait"))
            continue; /* parked: it joins when asked, not in turn */
        bool alive = pi.up || pi.phi < n->cfg.phi_convict_threshold;
        /* a fresh node that has not chosen its tokens yet */
        bool booting = (pi.status == GOSSIP_STATUS_BOOT ||
                        pi.status == GOSSIP_STATUS_UNKNOWN) &&
                       pi.state[GOSSIP_KEY_TOKENS].len == 0;
        /* A node leaving goes first, whatever its name. A node joining
         * (BOOT with tokens) does not hold this one back any more: its
         * tokens are in the pending ring this one chooses against, and
         * the two stream one after the other only where their ranges
         * overlap (node__join_gate; until 2026-12-06 every join waited
         * for the one before to end: twelve nodes took 97 s). */
        bool moving = pi.status == GOSSIP_STATUS_LEAVING;
        char r[GOSSIP_NAME_MAX + 1];
        node__schema_replacing(r, sizeof(r), pi.state[GOSSIP_KEY_SCHEMA]);
        if (n->cfg.replace[0] && strcmp(r, n->cfg.replace) == 0)
            continue; /* replacing the same node: replace_check refuses */
        /* a replace chooses no tokens: only a movement holds it back.
         * And only a node heard (UP), or whose heartbeat is seen to
         * advance, goes first by its name: one known by hearsay alone has
         * phi 0, and a fresh node dead before choosing tokens (a replace
         * refused) held a later one back for ever (regression
         * test_regression_dead_fresh_node_blocks_join) */
        bool before = booting && !n->cfg.replace[0] &&
                      strcmp(pi.name, n->cfg.node_name) < 0 &&
                      (pi.up || hb_advancing(n, &pi, now));
        if (alive && (moving || before)) {
            if (tick && n->membership.ticks % 5 == 0)
                LOG(INFO, "boot.waiting", "for=%s%s", pi.name,
                    moving ? " reason=moving" : "");
            return; /* its turn first */
        }
    }
    if (!n->is_seed && n->nseeds > 0 && others == 0) {
        if (tick && n->membership.ticks % 5 == 0)
            LOG(INFO, "boot.waiting", "for=seeds seeds=%d", n->nseeds);
        return;
    }
    if (repl_refused(n, now))
        return;
    if (n->cfg.replace[0]) {
        replace_try(n, now, others);
        return;
    }
    /* choose tokens against the ring learnt so far */
    size_t nt = ring_tokens_for_weight((unsigned)n->cfg.num_tokens,
                                       joiner_of(n).weight);
    if (nt > GOSSIP_MAX_TOKENS) {
        /* num_tokens x weight past what gossip can announce: until
         * 2026-12-06 the announce failed and the node never joined
         * (regression test_regression_many_tokens_never_join) */
        LOG(WARN, "boot.tokens_capped",
            "wanted=%zu tokens=%d why=\"num_tokens x weight is more than "
            "a node can announce\"",
            nt, GOSSIP_MAX_TOKENS);
        nt = GOSSIP_MAX_TOKENS;
    }
    /* against the ring with the nodes joining now placed too: their
     * tokens are taken, and their shares counted */
    const ring *base = n->ring && ring_token_count(n->ring) ? n->ring : NULL;
    const ring *alloc = n->ring_pending && ring_token_count(n->ring_pending)
                            ? n->ring_pending
                            : base;
    if (tokens_choose(n, nt, alloc) < 0)
        return;
    n->st.ntokens = (int)nt;
    announce_tokens(n, nt, others, n->cfg.auto_bootstrap && base);
}

_Static_assert(GOSSIP_MAX_TOKENS <= NODE_STATE_MAX_TOKENS,
               "node.state holds every token a node can announce");

/* Announce this node's tokens under a new epoch and persist them: with
 * STATUS NORMAL, or, to stream the ranges in first (a cluster to take them
 * from), with STATUS BOOT and joining=1, persisted before the announce so
 * that a restart resumes the join; streaming/ announces NORMAL at its end. */
static void announce_tokens(node *n, size_t nt, size_t others, bool pull)
{
    int rc = 0;
    if (pull) {
        n->st.joining = 1;
        rc = node_state_save(&n->st, n->cfg.data_dir);
    }
    if (rc == 0)
        rc = gossip_tokens_set(n->g, n->st.tokens, nt);
    uint64_t epoch = 0;
    if (rc == 0)
        rc = gossip_status_set(
            n->g, pull ? GOSSIP_STATUS_BOOT : GOSSIP_STATUS_NORMAL, 0, &epoch);
    if (rc == 0 && pull)
        rc = node__stream_begin(n);
    if (rc < 0) {
        LOG(ERROR, "boot.announce_fail", "error=\"%s\"", rk_strerror(rc));
        return;
    }
    n->st.ring_epoch = epoch;
    node__state_save(n);
    const char *alloc =
        n->cfg.token_allocation == NODE_ALLOC_RANDOM ? "random" : "balanced";
    if (pull && n->st.replace[0]) {
        LOG(INFO, "boot.replacing",
            "replace=%s tokens=%zu epoch=%llu peers=%zu note=\"streaming "
            "its ranges in before it serves them\"",
            n->st.replace, nt, (unsigned long long)epoch, others);
    } else if (pull) {
        LOG(INFO, "boot.joining",
            "tokens=%zu epoch=%llu allocation=%s peers=%zu note=\"streaming "
            "its ranges in before it serves them\"",
            nt, (unsigned long long)epoch, alloc, others);
    } else {
        n->boot = NODE_BOOT_DONE;
        LOG(INFO, "boot.joined",
            "tokens=%zu epoch=%llu allocation=%s peers=%zu", nt,
            (unsigned long long)epoch, alloc, others);
    }
    node__ring_rebuild(n);
}

/* Choose new tokens against the ring of every other placed member. */
static void retoken(node *n,
                    const struct ring_member *m,
                    size_t nm,
                    const struct ring_config *rc0)
{
    struct ring_member *o = calloc(nm ? nm : 1, sizeof(*o));
    size_t no = 0;
    if (!o)
        return;
    for (size_t i = 0; i < nm; i++)
        if (strcmp(m[i].name, n->cfg.node_name) != 0)
            o[no++] = m[i];
    struct ring_config rc = *rc0;
    rc.members = o;
    rc.nmembers = no;
    ring *base = NULL;
    int err = ring_new(&base, &rc);
    if (err < 0) {
        LOG(WARN, "boot.retoken_wait", "error=\"%s\"", rk_strerror(err));
        free(o);
        return;
    }
    size_t nt = (size_t)n->st.ntokens;
    err = tokens_choose(n, nt, ring_token_count(base) ? base : NULL);
    ring_free(base);
    free(o);
    if (err < 0)
        return;
    LOG(WARN, "boot.token_collision", "action=%s", "chose new tokens");
    announce_tokens(n, nt, nm ? nm - 1 : 0, false);
}

bool node__boot_retoken(node *n,
                        const struct ring_member *m,
                        size_t nm,
                        const struct ring_config *rc0)
{
    if (n->membership.retokening) /* the rebuild of its own announce */
        return false;
    n->membership.retokening = true;
    retoken(n, m, nm, rc0);
    n->membership.retokening = false;
    return true;
}

/* ---- loop glue -------------------------------------------------------- */

/* Log when a peer has left requests unanswered for write_timeout_ms, so
 * that reads ask it last (coord/coord_read.c) and writes to it are hinted
 * (coord/coord.c), and when it answers again: an operator sees why, before
 * gossip says DOWN. */
static void silence_watch(node *n)
{
    for (size_t i = 0; i < n->npeers; i++) {
        struct node_peer *p = &n->peer[i];
        if (p->self)
            continue;
        uint64_t quiet = node__peer_quiet_ms(n, p->iaddr);
        bool silent = quiet >= (uint64_t)n->cfg.write_timeout_ms;
        if (silent == p->silent)
            continue;
        p->silent = silent;
        if (silent)
            LOG(WARN, "peer.silent",
                "peer=%s silent_ms=%llu note=\"no answer to requests sent: "
                "reads ask it last, writes to it are hinted until it "
                "answers\"",
                p->name, (unsigned long long)quiet);
        else
            LOG(INFO, "peer.answering", "peer=%s", p->name);
    }
}

static void on_probe_timer(uv_timer_t *t);

/* Arm the failure detector's timer for when gossip wants it next. */
static void probe_arm(node *n)
{
    if (!n->membership.ptimer_open)
        return;
    uint64_t due = gossip_timer_due(n->g), now = node__mono_ms(n);
    if (due == UINT64_MAX)
        uv_timer_stop(&n->membership.ptimer);
    else
        uv_timer_start(&n->membership.ptimer, on_probe_timer,
                       due > now ? due - now : 0, 0);
}

static void on_probe_timer(uv_timer_t *t)
{
    node *n = t->data;
    gossip_wall_set(n->g, node__now_ms());
    if (gossip_timer(n->g, node__mono_ms(n), &n->membership.gout) == 0) {
        gossip_send_all(n);
        handle_events(n);
    }
    probe_arm(n);
}

static void on_tick(uv_timer_t *t)
{
    node *n = t->data;
    uint64_t now = node__mono_ms(n);
    n->membership.ticks++;
    (void)node__obs_store_watch(n);
    if (n->membership.ticks % 10 == 1 && n->store) {
        /* LOAD: bytes on disk of the local ranges */
        uint64_t ranges, keys, bytes;
        node__obs_store_totals(n, &ranges, &keys, &bytes);
        char load[32];
        int l = snprintf(load, sizeof(load), "%llu", (unsigned long long)bytes);
        gossip_state_set(n->g, GOSSIP_KEY_LOAD, load, (size_t)l);
    }
    gossip_wall_set(n->g, node__now_ms());
    int rc = gossip_tick(n->g, now, &n->membership.gout);
    if (rc == 0) {
        gossip_send_all(n);
        handle_events(n);
    }
    probe_arm(n);
    boot_try(n, now, true);
    node__clock_tick(n);
    stream_tick(n->streaming); /* join, leave, automatic cleanup */
    node__repair_after_join(n);
    node__purge_tick(n);
    silence_watch(n);
    if (n->settling && now >= n->membership.settle_until) {
        n->settling = false;
        n->ring_stale = node__ring_stale_now(n);
        LOG(WARN, "ring.settle_timeout",
            "note=\"no peer heard since the restart: serving with the ring "
            "as saved\"");
        node__ranges_ensure(n);
    }
}

static void on_udp(void *arg,
                   struct rk_slice pkt,
                   const struct sockaddr *from,
                   uint64_t arrived_ms)
{
    node *n = arg;
    char addr[96];
    if (net_addr_format(addr, sizeof(addr), from) < 0)
        return;
    n->stats.gossip_in++;
    /* the packet's stamp is compared with its arrival (gossip/clock.c) */
    gossip_wall_set(n->g, node__now_ms());
    gossip_arrival_set(n->g, arrived_ms);
    gossip_recv(n->g, node__mono_ms(n), addr, pkt.p, pkt.len,
                &n->membership.gout);
    gossip_send_all(n);
    handle_events(n);
    probe_arm(n);
}

/* SCHEMA: "repl=dc1:3,... internode=7001 client=7380", " join=wait"
 * while parked (peers do not wait for such a node to join first), and
 * " replacing=X" for a node replacing X (ring_view.c). */
static void schema_set(node *n)
{
    char v[GOSSIP_VALUE_MAX];
    int l = node__schema_format(v, sizeof(v), &n->cfg, n->st.repl_version,
                                n->parked, replacing_of(n));
    /* " queued=X": joining, it waits for X before it streams */
    const char *q = n->membership.queued_for;
    if (q[0] && (size_t)l < sizeof(v)) {
        int k = snprintf(v + l, sizeof(v) - (size_t)l, " queued=%s", q);
        l = (size_t)(l + k) < sizeof(v) ? l + k : (int)sizeof(v) - 1;
    }
    gossip_state_set(n->g, GOSSIP_KEY_SCHEMA, v, (size_t)l);
}

void node__schema_publish(node *n)
{
    schema_set(n);
}

bool node__join_gate(node *n, char *ahead, size_t cap, char *why, size_t wcap)
{
    size_t k = 0;
    bool before = true;
    bool q = node__join_queued(n, ahead, cap, &k, &before);
    if (!q)
        ahead[0] = '\0';
    else if (k == 0)
        snprintf(why, wcap, "%s is leaving (a leave goes first)", ahead);
    else if (before)
        snprintf(why, wcap,
                 "%s joins too, announced first, and its join changes the "
                 "replicas of %zu of the ranges this one's changes",
                 ahead, k);
    else
        snprintf(why, wcap,
                 "%s joins too and may be streaming (it has not said it "
                 "waits), and its join changes the replicas of %zu of the "
                 "ranges this one's changes",
                 ahead, k);
    struct node_membership *m = &n->membership;
    if (strcmp(ahead, m->queued_for) == 0)
        return q;
    uint64_t now = node__mono_ms(n);
    if (q)
        LOG(INFO, "boot.queued", "behind=%s ranges=%zu why=\"%s\"", ahead, k,
            why);
    else
        LOG(INFO, "boot.queue_done", "behind=%s waited_ms=%llu", m->queued_for,
            (unsigned long long)(now - m->queued_since));
    if (q && !m->queued_for[0])
        m->queued_since = now;
    snprintf(m->queued_for, sizeof(m->queued_for), "%s", ahead);
    schema_set(n);
    return q;
}

int node__join_withdraw(node *n, uint64_t *epoch)
{
    int joining = n->st.joining, ntokens = n->st.ntokens;
    char replace[sizeof(n->st.replace)];
    memcpy(replace, n->st.replace, sizeof(replace));
    n->st.joining = 0;
    n->st.ntokens = 0;
    n->st.wait_join = 1;
    n->st.replace[0] = '\0'; /* an aborted replace is over */
    n->membership.queued_for[0] = '\0';
    /* persisted before the announce: a restart must not resume the join */
    int rc = node_state_save(&n->st, n->cfg.data_dir);
    if (rc < 0) {
        n->st.joining = joining;
        n->st.ntokens = ntokens;
        n->st.wait_join = 0;
        memcpy(n->st.replace, replace, sizeof(replace));
        return rc;
    }
    rc = gossip_tokens_set(n->g, NULL, 0);
    if (rc == 0) {
        n->parked = true;
        n->boot = NODE_BOOT_WAIT;
        schema_set(n);
        rc = gossip_status_set(n->g, GOSSIP_STATUS_BOOT, 0, epoch);
    }
    if (rc < 0)
        return rc;
    n->st.ring_epoch = *epoch;
    node__state_save(n);
    node__ring_rebuild(n);
    return 0;
}

int node__join(node *n, char *why, size_t cap)
{
    if (n->parked && stream_join_busy(n->streaming)) {
        snprintf(why, cap,
                 "%.64s is still winding down the join it aborted (requests "
                 "in flight, or dropping what it had streamed in): try again "
                 "shortly",
                 n->cfg.node_name);
        return RK_EBADREQ;
    }
    if (!n->parked) {
        snprintf(why, cap, "%.64s is not waiting to join: %s", n->cfg.node_name,
                 n->boot == NODE_BOOT_DONE
                     ? "it is a member of the ring already"
                     : "it is joining already (join_ring is true, or "
                       "`ringkv join` was sent)");
        return RK_EBADREQ;
    }
    if (n->st.wait_join) { /* a join aborted before: joining again now */
        n->st.wait_join = 0;
        int rc = node_state_save(&n->st, n->cfg.data_dir);
        if (rc < 0) {
            n->st.wait_join = 1;
            snprintf(why, cap, "cannot save node.state: %s", rk_strerror(rc));
            return rc;
        }
    }
    n->parked = false;
    schema_set(n);
    gossip_status_set(n->g, GOSSIP_STATUS_BOOT, 0, NULL);
    n->membership.boot_stable_ticks = 0;
    LOG(INFO, "boot.join_requested",
        "note=\"joining: learning the "
        "cluster, then choosing tokens and streaming its ranges in\"");
    snprintf(why, cap,
             "%.64s is joining: it chooses its tokens once it has listened to "
             "the cluster a few gossip rounds, then streams its ranges in; "
             "`ringkv netstats` shows the progress",
             n->cfg.node_name);
    return 0;
}

/* A restart in the middle of a join or a leave: take it up again (begin),
 * or say in err why it cannot be (`what`: "joining", "leaving"). */
static int resume(
    node *n, int (*begin)(node *), const char *what, char *err, size_t errlen)
{
    int rc = begin(n);
    if (rc < 0)
        snprintf(err, errlen, "cannot resume %s: %s", what, rk_strerror(rc));
    return rc;
}

static int leave_resume(node *n)
{
    return stream_leave_resume(n->streaming);
}

int node__gossip_start(node *n, char *err, size_t errlen)
{
    struct node_config *c = &n->cfg;
    const char *seedp[NODE_CONFIG_MAX_SEEDS];
    for (int i = 0; i < n->nseeds; i++)
        seedp[i] = n->seeds[i];
    uint64_t seed = 0;
    if (getrandom(&seed, sizeof(seed), 0) != sizeof(seed))
        seed = node__now_ms() ^ (uint64_t)n->st.generation;
    struct gossip_config gc = GOSSIP_CONFIG_INIT;
    gc.cluster_name = c->cluster_name;
    gc.node_name = c->node_name;
    gc.secret = (const uint8_t *)n->secret;
    gc.secret_len = n->secret_len;
    gc.generation = (uint64_t)n->st.generation;
    gc.seed = seed;
    gc.seeds = seedp;
    gc.n_seeds = (size_t)n->nseeds;
    gc.phi_threshold = c->phi_convict_threshold;
    gc.probe = c->failure_probes != 0;
    gc.suspicion_ms = (uint32_t)c->suspicion_timeout_ms;
    gc.interval_ms = (uint32_t)c->gossip_interval_ms;
    int rc = gossip_new(&n->g, &gc);
    if (rc < 0) {
        snprintf(err, errlen,
                 "gossip: %s (cluster_name and node_name must "
                 "be 1..%d bytes)",
                 rk_strerror(rc), GOSSIP_NAME_MAX);
        return rc;
    }
    char v[GOSSIP_VALUE_MAX];
    int l =
        snprintf(v, sizeof(v), "%s:%d", c->advertise_address, c->gossip_port);
    gossip_state_set(n->g, GOSSIP_KEY_ADDRESS, v, (size_t)l);
    gossip_state_set(n->g, GOSSIP_KEY_DC, c->datacenter, strlen(c->datacenter));
    gossip_state_set(n->g, GOSSIP_KEY_RACK, c->rack, strlen(c->rack));
    /* join_ring false, or a join aborted (`ringkv abort`): out of the
     * ring until `ringkv join` */
    n->parked = n->fresh && (!c->join_ring || n->st.wait_join);
    schema_set(n);
    if (!n->fresh) {
        gossip_tokens_set(n->g, n->st.tokens, (size_t)n->st.ntokens);
        uint64_t ep = 0;
        /* a join cut short by the restart: BOOT with the same tokens, and
         * streaming resumed (streaming/join.c); a leave: LEAVING again
         * (streaming/leave.c) */
        rc = gossip_status_set(n->g,
                               n->st.joining   ? GOSSIP_STATUS_BOOT
                               : n->st.leaving ? GOSSIP_STATUS_LEAVING
                                               : GOSSIP_STATUS_NORMAL,
                               n->st.ring_epoch ? n->st.ring_epoch : 0, &ep);
        if (rc == 0 && ep != n->st.ring_epoch) {
            n->st.ring_epoch = ep;
            node_state_save(&n->st, c->data_dir);
        }
        n->boot = NODE_BOOT_DONE;
        if (!n->st.joining)
            stream_join_leftover(n->streaming);
        /* a rebuild cut short: it goes on once the ring has settled */
        if (!n->st.joining && !n->st.leaving && n->st.rebuild_from[0] &&
            stream_rebuild_resume(n->streaming, n->st.rebuild_from) < 0)
            LOG(ERROR, "rebuild.resume_fail",
                "from=%s note=\"out of memory: run `ringkv rebuild` again\"",
                n->st.rebuild_from);
        if (n->st.joining) {
            rc = resume(n, node__stream_begin, "joining", err, errlen);
            if (rc < 0)
                return rc;
            LOG(INFO, "boot.joining",
                "tokens=%d epoch=%llu resumed=1 note=\"a join was cut short: "
                "resuming it (stream.resumed says from where)\"",
                n->st.ntokens, (unsigned long long)ep);
        } else if (n->st.leaving) {
            rc = resume(n, leave_resume, "leaving", err, errlen);
            if (rc < 0)
                return rc;
            LOG(INFO, "leave.leaving",
                "epoch=%llu resumed=1 note=\"a decommission was cut short: "
                "sending its ranges again\"",
                (unsigned long long)ep);
        }
        /* Restarted: the ring it can build holds only its own tokens until
         * gossip brings the others'. Coordinating with it would place a
         * QUORUM write on this node alone (a quorum of one), or a key on a
         * node that is not its replica. So it answers RING_STALE (retry
         * via another node) until a peer is heard, at most
         * SETTLE_INTERVALS gossip intervals -- unless it is its own only
         * seed (a one-node cluster). Until 2026-12-03 it served at once:
         * for the first seconds after a restart its QUORUM writes were
         * acknowledged by itself alone. */
        if (n->nseeds > (n->is_seed ? 1 : 0)) {
            n->settling = true;
            n->ring_stale = 1;
            n->membership.settle_until =
                node__mono_ms(n) +
                SETTLE_INTERVALS * (uint64_t)c->gossip_interval_ms;
        }
    } else if (n->parked) {
        n->boot = NODE_BOOT_WAIT; /* no STATUS: not in anyone's ring */
        LOG(INFO, "boot.parked",
            "note=\"join_ring is false: this node stays out of the ring "
            "until `ringkv join`\"");
    } else if (c->replace[0]) {
        /* no STATUS until the replace is allowed: a refusal changes
         * nothing in anyone's ring */
        n->boot = NODE_BOOT_WAIT;
        LOG(INFO, "replace.listening",
            "replace=%s note=\"learning the cluster before taking its "
            "tokens\"",
            c->replace);
    } else {
        gossip_status_set(n->g, GOSSIP_STATUS_BOOT, 0, NULL);
        n->boot = NODE_BOOT_WAIT;
    }

    struct net_udp_opts uo = NET_UDP_OPTS_INIT;
    uo.host = n->listen_ip;
    uo.port = (uint16_t)c->gossip_port;
    uo.on_recv = on_udp;
    uo.arg = n;
    rc = net_udp_new(&n->membership.udp, n->loop, &uo);
    if (rc < 0) {
        snprintf(err, errlen, "gossip_port: cannot bind %s:%d/udp: %s",
                 n->listen_ip, c->gossip_port, rk_strerror(rc));
        return rc;
    }
    uv_timer_init(n->loop, &n->membership.gtimer);
    n->membership.gtimer.data = n;
    n->membership.gtimer_open = 1;
    uv_timer_start(&n->membership.gtimer, on_tick, 10,
                   (uint64_t)c->gossip_interval_ms);
    uv_timer_init(n->loop, &n->membership.ptimer);
    n->membership.ptimer.data = n;
    n->membership.ptimer_open = 1;
    probe_arm(n);
    node__ring_rebuild(n);
    return 0;
}

static void on_udp_closed(void *arg)
{
    node *n = arg;
    n->pending_closes--;
    node__stop_progress(n);
}

void node__gossip_stop(node *n)
{
    /* a resolution not started yet is dropped; the loop waits for one
     * already running in the thread pool */
    for (size_t i = 0; i < n->membership.nnames; i++)
        if (n->membership.names[i]->busy)
            uv_cancel((uv_req_t *)&n->membership.names[i]->req);
    if (n->membership.gtimer_open) {
        n->membership.gtimer_open = 0;
        n->pending_closes++;
        uv_close((uv_handle_t *)&n->membership.gtimer, node__handle_closed);
    }
    if (n->membership.ptimer_open) {
        n->membership.ptimer_open = 0;
        n->pending_closes++;
        uv_close((uv_handle_t *)&n->membership.ptimer, node__handle_closed);
    }
    if (n->membership.udp) {
        net_udp *u = n->membership.udp;
        n->membership.udp = NULL;
        n->pending_closes++;
        net_udp_close(u, on_udp_closed, n);
    }
}
