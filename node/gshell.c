/*
 * gshell.c - the libuv shell around the pure gossip state machine, and what
 * follows from membership: the ring snapshot, the peer table and the local
 * storage ranges.
 *
 * Every gossip_interval_ms the timer calls gossip_tick(); every datagram on
 * the gossip port goes to gossip_recv(). Both return packets (sent with
 * net_udp) and events, handled here: UP/DOWN update routing (and UP starts
 * hint replay), MEMBERSHIP rebuilds the ring, RING_STALE/CAUGHT_UP gate the
 * coordinator, AUTH_FAIL and BAD_PACKET are counted and logged.
 *
 * Joining: a node with a new data_dir announces STATUS BOOT and listens for
 * a few rounds. It chooses its tokens (balanced by default, against the
 * ring it has learnt) only when no live node with a smaller name is still
 * BOOT, so nodes started together join one after the other and never pick
 * the same tokens; a non-seed node also waits until it has heard from the
 * cluster. Then it announces its TOKENS and STATUS NORMAL (a new epoch) and
 * persists them, so a restart re-announces the same tokens. There is no
 * streaming yet: a node that joins a cluster holding data gets its share
 * through writes, hints and read repair only.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>

#include "node/log.h"
#include "node/node_internal.h"
#include "node/obs.h"

#define RING_DELAY_TICKS 5    /* rounds a fresh node listens before joining */
#define SETTLE_INTERVALS 10   /* a restarted node waits this long for a peer */
#define RING_DELAY_MS    2000 /* ... and at least this long */

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
    for (size_t i = 0; i < n->nnames && !e; i++)
        if (strcmp(n->names[i]->host_port, host_port) == 0)
            e = n->names[i];
    if (!e) {
        if (n->nnames == NODE_NAMES_MAX ||
            strlen(host_port) >= sizeof(e->host_port) ||
            !(e = calloc(1, sizeof(*e))))
            return NULL;
        e->n = n;
        e->req.data = e;
        memcpy(e->host_port, host_port, strlen(host_port) + 1);
        n->names[n->nnames++] = e;
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
    for (size_t i = 0; i < n->gout.n_pkts; i++) {
        struct gossip_packet *p = &n->gout.pkts[i];
        int rc = net_udp_send_to(n->udp, p->to, RK_SLICE(p->buf, p->len));
        if (rc == -EINVAL) { /* a host name */
            const char *num = name_addr(n, p->to);
            rc = num ? net_udp_send_to(n->udp, num, RK_SLICE(p->buf, p->len))
                     : -EHOSTUNREACH;
        }
        if (rc == 0)
            n->stats.gossip_out++;
        else
            LOG(DEBUG, "gossip.send_fail", "to=%s error=\"%s\"", p->to,
                rk_strerror(rc));
    }
}

/* ---- peer table and ring ---------------------------------------------- */

/* Whether SCHEMA holds the word `flag` (after the first). */
static bool peer_flag(const struct rk_slice *schema, const char *flag)
{
    char buf[GOSSIP_VALUE_MAX + 2];
    size_t l = schema->len < GOSSIP_VALUE_MAX ? schema->len : GOSSIP_VALUE_MAX;
    if (l)
        memcpy(buf, schema->p, l);
    buf[l] = ' ';
    buf[l + 1] = '\0';
    char pat[32];
    snprintf(pat, sizeof(pat), " %s ", flag);
    return strstr(buf, pat) != NULL;
}

static uint32_t
peer_port(const struct rk_slice *schema, const char *key, uint32_t dflt)
{
    /* SCHEMA holds "repl=... internode=7001 client=7380" */
    char buf[GOSSIP_VALUE_MAX + 1];
    size_t l = schema->len < GOSSIP_VALUE_MAX ? schema->len : GOSSIP_VALUE_MAX;
    memcpy(buf, schema->p, l);
    buf[l] = '\0';
    char pat[32];
    snprintf(pat, sizeof(pat), " %s=", key);
    const char *p = strstr(buf, pat);
    if (!p)
        return dflt;
    long v = strtol(p + strlen(pat), NULL, 10);
    return v > 0 && v < 65536 ? (uint32_t)v : dflt;
}

struct rk_slice node__schema_repl(struct rk_slice schema)
{
    static const char key[] = "repl=";
    const char *p = (const char *)schema.p;
    size_t k = sizeof(key) - 1;
    if (schema.len < k || memcmp(p, key, k) != 0)
        return RK_SLICE(NULL, 0);
    size_t e = k;
    while (e < schema.len && p[e] != ' ')
        e++;
    return RK_SLICE(p + k, e - k);
}

size_t node__repl_mismatches(const node *n)
{
    size_t k = 0;
    for (size_t i = 0; i < n->npeers; i++)
        k += n->peer[i].repl_differs;
    return k;
}

static void host_of(char *out, size_t len, struct rk_slice addr)
{
    size_t l = addr.len < len - 1 ? addr.len : len - 1;
    memcpy(out, addr.p, l);
    out[l] = '\0';
    char *colon = strrchr(out, ':');
    if (colon)
        *colon = '\0';
}

/* A peer's "host:port" for one of its TCP services ("client",
 * "internode"), from the address and SCHEMA it gossips. */
static void peer_service(char *out,
                         size_t cap,
                         const struct gossip_peer_info *pi,
                         const char *service,
                         int dflt)
{
    char host[GOSSIP_ADDR_MAX + 1];
    host_of(host, sizeof(host), pi->state[GOSSIP_KEY_ADDRESS]);
    snprintf(out, cap, "%s:%u", host,
             peer_port(&pi->state[GOSSIP_KEY_SCHEMA], service, (uint32_t)dflt));
}

bool node__peer_waiting(node *n,
                        const struct gossip_peer_info *pi,
                        char *caddr,
                        size_t cap)
{
    if (pi->quarantined ||
        !peer_flag(&pi->state[GOSSIP_KEY_SCHEMA], "join=wait"))
        return false;
    peer_service(caddr, cap, pi, "client", n->cfg.client_port);
    return true;
}

static enum ring_node_state ring_state_of(enum gossip_status s)
{
    switch (s) {
    case GOSSIP_STATUS_NORMAL:
        return RING_NORMAL;
    case GOSSIP_STATUS_LEAVING:
        return RING_LEAVING;
    case GOSSIP_STATUS_LEFT:
        return RING_LEFT;
    case GOSSIP_STATUS_REMOVED:
        return RING_REMOVED;
    default:
        return RING_BOOT;
    }
}

static void ranges_ensure_in(node *n, const ring *r, uint32_t self);

/* Make sure the store holds ranges covering every arc this node
 * replicates, in the ring and, while a node joins or leaves, in the
 * pending ring: the ranges it is about to replicate, which writes and the
 * streams fill meanwhile. Missing pieces are created; ranges no longer
 * replicated are kept until `ringkv cleanup` (cleanup.c). */
void node__ranges_ensure(node *n)
{
    /* restarted and no peer heard yet: the ring holds this node alone, and
     * would have it create ranges for the whole ring (ranges it does not
     * replicate, which then take writes a replica must refuse: regression
     * test_regression_hint_poison_stalls_replay, once gaps were no longer
     * capped); done when the ring settles */
    if (n->settling)
        return;
    ranges_ensure_in(n, n->ring, n->self_idx);
    if (n->ring_pending)
        ranges_ensure_in(n, n->ring_pending,
                         ring_node_find(n->ring_pending, n->cfg.node_name));
}

static void ranges_ensure_in(node *n, const ring *r, uint32_t self)
{
    if (!r || self == RING_NONE || !n->store)
        return;
    size_t want = ring_node_ranges(r, self, NULL, 0);
    if (!want)
        return;
    struct ring_range *rr = calloc(want, sizeof(*rr));
    struct store_range *have = NULL;
    struct ring_range *hr = NULL, *gaps = NULL;
    size_t nhave = 0, ngaps = 0;
    int created = 0, rc = rr ? 0 : -ENOMEM;
    if (rc == 0) {
        ring_node_ranges(r, self, rr, want);
        rc = store_range_list(&have, &nhave, n->store);
    }
    if (rc == 0 && nhave) {
        hr = calloc(nhave, sizeof(*hr));
        rc = hr ? 0 : -ENOMEM;
    }
    for (size_t i = 0; rc == 0 && i < nhave; i++)
        hr[i] = (struct ring_range){have[i].start, have[i].end};
    /* until 2026-12-06 the gaps went into a buffer of 2 * want + 2: a
     * node holding more separate ranges than that, and now replicating
     * fewer, larger arcs (the whole ring), created nothing, silently */
    if (rc == 0)
        rc = ring_ranges_uncovered(&gaps, &ngaps, rr, want, hr, nhave);
    if (rc < 0)
        LOG(ERROR, "store.ranges_fail", "error=\"%s\"", rk_strerror(rc));
    for (size_t i = 0; rc == 0 && i < ngaps; i++) {
        struct store_range nr = {gaps[i].start, gaps[i].end};
        rc = store_range_create(n->store, nr);
        if (rc < 0)
            LOG(ERROR, "store.range_create_fail",
                "start=%llu end=%llu error=\"%s\"",
                (unsigned long long)nr.start, (unsigned long long)nr.end,
                rk_strerror(rc));
        else
            created++;
    }
    if (created)
        LOG(INFO, "store.ranges", "created=%d replicated_arcs=%zu held=%zu",
            created, want, nhave);
    free(gaps);
    free(hr);
    free(have);
    free(rr);
}

static void fill_repl(node *n, struct ring_config *rc, struct ring_dc_rf *rdc)
{
    if (n->cfg.ndcs == 1 && strcmp(n->cfg.replication[0].name, "*") == 0) {
        rc->repl.strategy = RING_SIMPLE;
        rc->repl.rf = (unsigned)n->cfg.replication[0].rf;
    } else {
        for (int i = 0; i < n->cfg.ndcs; i++) {
            rdc[i].dc = n->cfg.replication[i].name;
            rdc[i].rf = (unsigned)n->cfg.replication[i].rf;
        }
        rc->repl.strategy = RING_NTS;
        rc->repl.dcs = rdc;
        rc->repl.ndcs = (size_t)n->cfg.ndcs;
    }
}

/* Does one of this node's tokens equal a token of a placed member with a
 * smaller name? */
static bool tokens_collide(node *n, const struct ring_member *m, size_t nm)
{
    uint64_t *mine = malloc(sizeof(uint64_t) * (size_t)(n->st.ntokens + 1));
    if (!mine)
        return false;
    memcpy(mine, n->st.tokens, sizeof(uint64_t) * (size_t)n->st.ntokens);
    qsort(mine, (size_t)n->st.ntokens, sizeof(uint64_t), rk_u64_cmp);
    bool hit = false;
    for (size_t i = 0; i < nm && !hit; i++) {
        if (m[i].state == RING_BOOT || m[i].state == RING_LEFT ||
            m[i].state == RING_REMOVED)
            continue;
        if (strcmp(m[i].name, n->cfg.node_name) >= 0)
            continue;
        for (size_t k = 0; k < m[i].ntokens && !hit; k++)
            hit = bsearch(&m[i].tokens[k], mine, (size_t)n->st.ntokens,
                          sizeof(uint64_t), rk_u64_cmp) != NULL;
    }
    free(mine);
    return hit;
}

static void announce_tokens(node *n, size_t nt, size_t others, bool stream);

/* Choose new tokens against the ring of every other placed member. */
static void retoken(node *n,
                    struct ring_member *m,
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
    struct ring_joiner j = {
        .name = n->cfg.node_name,
        .dc = n->cfg.datacenter,
        .rack = n->cfg.rack,
        .weight = (uint32_t)(n->cfg.weight * RING_WEIGHT_UNIT + 0.5)};
    size_t nt = (size_t)n->st.ntokens;
    err = ring_tokens_alloc(
        n->st.tokens, nt, ring_token_count(base) ? base : NULL, &j,
        n->cfg.token_allocation == NODE_ALLOC_RANDOM ? RING_ALLOC_RANDOM
                                                     : RING_ALLOC_BALANCED);
    ring_free(base);
    free(o);
    if (err < 0) {
        LOG(ERROR, "boot.alloc_fail", "error=\"%s\"", rk_strerror(err));
        return;
    }
    LOG(WARN, "boot.token_collision", "action=%s", "chose new tokens");
    announce_tokens(n, nt, nm ? nm - 1 : 0, false);
}

/* A peer's replication started or stopped differing from ours. Nodes
 * that disagree place replicas differently, so what one writes another may
 * not read: an operator error that is logged (and shown by `ringkv
 * status` and ringkv_replication_mismatch), not guessed around. */
static void repl_note(const char *name,
                      bool differs,
                      struct rk_slice theirs,
                      struct rk_slice own)
{
    if (differs)
        LOG(ERROR, "cluster.replication_mismatch",
            "peer=%s theirs=\"%.*s\" ours=\"%.*s\" action=\"%s\"", name,
            (int)theirs.len, (const char *)theirs.p, (int)own.len,
            (const char *)own.p,
            "set the same replication on every node and restart those that "
            "differ");
    else
        LOG(INFO, "cluster.replication_agrees", "peer=%s replication=\"%.*s\"",
            name, (int)own.len, (const char *)own.p);
}

/* RING_STALE: heard of a newer ring epoch than the one applied, or
 * restarted and no peer heard yet (settling). */
static int stale_now(node *n)
{
    return n->settling || gossip_ring_stale(n->g);
}

void node__ring_rebuild(node *n)
{
    uint64_t now = node__mono_ms(n);
    size_t cnt = gossip_peer_count(n->g);
    struct ring_member *m = calloc(cnt ? cnt : 1, sizeof(*m));
    uint64_t *toks =
        calloc(cnt ? cnt : 1, sizeof(uint64_t) * RING_MAX_TOKENS_PER_NODE);
    char(*dcs)[2][GOSSIP_VALUE_MAX + 1] = calloc(cnt ? cnt : 1, sizeof(*dcs));
    char(*names)[GOSSIP_NAME_MAX + 1] = calloc(cnt ? cnt : 1, sizeof(*names));
    /* BOOT's tokens; (size_t)-1 for a node LEAVING */
    size_t *pend = calloc(cnt ? cnt : 1, sizeof(*pend));
    struct ring_dc_rf rdc[NODE_CONFIG_MAX_DCS];
    size_t nm = 0, npend = 0;
    ring *r = NULL;
    if (!m || !toks || !dcs || !names || !pend)
        goto out;
    for (size_t i = 0; i < cnt; i++) {
        struct gossip_peer_info pi;
        if (gossip_peer_get(&pi, n->g, i, now) < 0)
            continue;
        if (pi.status == GOSSIP_STATUS_UNKNOWN)
            continue;
        size_t nt = 0;
        uint64_t *t = toks + nm * RING_MAX_TOKENS_PER_NODE;
        if (gossip_tokens_decode(t, RING_MAX_TOKENS_PER_NODE, &nt,
                                 pi.state[GOSSIP_KEY_TOKENS]) < 0)
            nt = 0;
        snprintf(names[nm], sizeof(names[nm]), "%s", pi.name);
        for (int k = 0; k < 2; k++) {
            struct rk_slice v =
                pi.state[k == 0 ? GOSSIP_KEY_DC : GOSSIP_KEY_RACK];
            memcpy(dcs[nm][k], v.p, v.len);
            dcs[nm][k][v.len] = '\0';
        }
        m[nm].name = names[nm];
        m[nm].dc = dcs[nm][0];
        m[nm].rack = dcs[nm][1];
        m[nm].tokens = t;
        m[nm].ntokens = nt;
        m[nm].weight = 0;
        m[nm].state = ring_state_of(pi.status);
        if (m[nm].state == RING_NORMAL && nt == 0)
            m[nm].state = RING_BOOT;
        if (m[nm].state == RING_LEAVING && nt > 0) {
            pend[nm] = (size_t)-1; /* leaving: not in the pending ring */
            npend++;
        }
        if (m[nm].state == RING_BOOT) {
            m[nm].ntokens = 0;
            if (pi.status == GOSSIP_STATUS_BOOT && nt > 0) {
                pend[nm] = nt; /* joining: placed in the pending ring */
                npend++;
            }
        }
        nm++;
    }
    struct ring_config rc = {.members = m, .nmembers = nm};
    rc.epoch = gossip_epoch_membership(n->g);
    fill_repl(n, &rc, rdc);
    if (n->boot == NODE_BOOT_DONE && !n->retokening &&
        tokens_collide(n, m, nm)) {
        /* Two nodes chose the same token (they joined without knowing of
         * each other). The one with the larger name chooses again. */
        n->retokening = true;
        retoken(n, m, nm, &rc);
        n->retokening = false;
        goto out;
    }
    int err = ring_new(&r, &rc);
    if (err < 0) {
        LOG(ERROR, "ring.build_fail", "members=%zu epoch=%llu error=\"%s\"", nm,
            (unsigned long long)rc.epoch, rk_strerror(err));
        goto out;
    }
    uint64_t old_fp = n->ring ? ring_fingerprint(n->ring) : 0;
    uint64_t old_epoch = n->ring ? ring_epoch(n->ring) : 0;
    ring_free(n->ring);
    n->ring = r;
    gossip_ring_applied(n->g, ring_epoch(r));
    ring *rp = NULL;
    if (npend) {
        for (size_t i = 0; i < nm; i++) {
            if (pend[i] == (size_t)-1) {
                m[i].state = RING_LEFT;
            } else if (pend[i]) {
                m[i].state = RING_NORMAL;
                m[i].ntokens = pend[i];
            }
        }
        err = ring_new(&rp, &rc);
        if (err < 0)
            LOG(ERROR, "ring.pending_build_fail", "moving=%zu error=\"%s\"",
                npend, rk_strerror(err));
    }
    if ((rp != NULL) != (n->ring_pending != NULL))
        LOG(INFO, "ring.pending", "moving=%zu", rp ? npend : 0);
    ring_free(n->ring_pending);
    n->ring_pending = rp;
    n->ring_stale = stale_now(n);

    /* peer table, indexed like the ring */
    size_t rn = ring_node_count(r);
    struct node_peer_tab *tab =
        calloc(1, sizeof(*tab) + (rn ? rn : 1) * sizeof(tab->p[0]));
    if (!tab)
        goto out;
    tab->refs = 1;
    tab->n = rn;
    struct node_peer *pt = tab->p;
    n->self_idx = RING_NONE;
    struct gossip_peer_info self;
    struct rk_slice own = RK_SLICE(NULL, 0);
    if (gossip_peer_get(&self, n->g, 0, now) == 0)
        own = node__schema_repl(self.state[GOSSIP_KEY_SCHEMA]);
    for (uint32_t i = 0; i < rn; i++) {
        struct ring_node_info ni;
        ring_node_get(r, &ni, i);
        snprintf(pt[i].name, sizeof(pt[i].name), "%s", ni.name);
        struct gossip_peer_info pi;
        struct rk_slice theirs = RK_SLICE(NULL, 0); /* its replication */
        if (gossip_peer_find(&pi, n->g, ni.name, now) == 0) {
            peer_service(pt[i].iaddr, sizeof(pt[i].iaddr), &pi, "internode",
                         n->cfg.internode_port);
            peer_service(pt[i].caddr, sizeof(pt[i].caddr), &pi, "client",
                         n->cfg.client_port);
            pt[i].up = pi.up;
            pt[i].self = pi.self;
            theirs = node__schema_repl(pi.state[GOSSIP_KEY_SCHEMA]);
            pt[i].repl_differs = !pi.self && theirs.len > 0 &&
                                 (theirs.len != own.len ||
                                  memcmp(theirs.p, own.p, theirs.len) != 0);
            if (!pi.up && !pi.self)
                pt[i].down_since_ms = now;
        }
        if (pt[i].self && ni.state != RING_BOOT && ni.ntokens)
            n->self_idx = i;
        /* keep a replay in progress marked, where it goes on, and when
         * the peer went DOWN */
        bool differed = false;
        for (size_t k = 0; k < n->npeers; k++) {
            if (strcmp(n->peer[k].name, pt[i].name) == 0) {
                pt[i].replaying = n->peer[k].replaying;
                pt[i].replay_after = n->peer[k].replay_after;
                pt[i].silent = n->peer[k].silent;
                differed = n->peer[k].repl_differs;
                if (!pt[i].up && n->peer[k].down_since_ms)
                    pt[i].down_since_ms = n->peer[k].down_since_ms;
            }
        }
        if (theirs.len == 0) /* not heard yet (restarted): as it was */
            pt[i].repl_differs = differed;
        if (pt[i].repl_differs != differed)
            repl_note(pt[i].name, pt[i].repl_differs, theirs, own);
    }
    node__peer_tab_unref(n->peer_tab);
    n->peer_tab = tab;
    n->peer = pt;
    n->npeers = rn;
    if (old_fp != ring_fingerprint(r) || old_epoch != ring_epoch(r))
        LOG(INFO, "ring.applied",
            "epoch=%llu fingerprint=%016llx nodes=%zu tokens=%zu "
            "replicas=%zu stale=%d",
            (unsigned long long)ring_epoch(r),
            (unsigned long long)ring_fingerprint(r), rn, ring_token_count(r),
            ring_replica_count(r), n->ring_stale);
    node__ranges_ensure(n);
out:
    free(pend);
    free(m);
    free(toks);
    free(dcs);
    free(names);
}

void node__peer_tab_unref(struct node_peer_tab *t)
{
    if (t && --t->refs == 0)
        free(t);
}

static void peer_set_up(node *n, const char *name, bool up)
{
    for (uint32_t i = 0; i < n->npeers; i++) {
        if (strcmp(n->peer[i].name, name) == 0) {
            n->peer[i].up = up;
            n->peer[i].down_since_ms = up ? 0 : node__mono_ms(n);
            if (up)
                node__hints_kick(n, i);
            return;
        }
    }
}

/* ---- events ----------------------------------------------------------- */

static void handle_events(node *n)
{
    bool rebuild = false;
    for (size_t i = 0; i < n->gout.n_events; i++) {
        const struct gossip_event *e = &n->gout.events[i];
        switch (e->type) {
        case GOSSIP_EV_JOINED:
            LOG(INFO, "gossip.joined", "peer=%s", e->name);
            break;
        case GOSSIP_EV_RESTARTED:
            LOG(INFO, "gossip.restarted", "peer=%s", e->name);
            break;
        case GOSSIP_EV_UP:
            LOG(INFO, "gossip.up", "peer=%s", e->name);
            peer_set_up(n, e->name, true);
            if (n->settling) { /* heard the cluster: its ring from now */
                n->settling = false;
                n->ring_stale = stale_now(n);
                LOG(INFO, "ring.settled", "peer=%s", e->name);
                rebuild = true;
            }
            break;
        case GOSSIP_EV_DOWN:
            LOG(WARN, "gossip.down", "peer=%s", e->name);
            peer_set_up(n, e->name, false);
            break;
        case GOSSIP_EV_STATE:
            if (e->key == GOSSIP_KEY_ADDRESS || e->key == GOSSIP_KEY_SCHEMA ||
                e->key == GOSSIP_KEY_TOKENS)
                rebuild = true;
            break;
        case GOSSIP_EV_MEMBERSHIP:
            rebuild = true;
            break;
        case GOSSIP_EV_RING_STALE:
            n->ring_stale = 1;
            LOG(INFO, "ring.stale", "epoch_known=%llu",
                (unsigned long long)e->epoch);
            rebuild = true;
            break;
        case GOSSIP_EV_RING_CAUGHT_UP:
            n->ring_stale = stale_now(n);
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
        }
    }
    if (rebuild)
        node__ring_rebuild(n);
    node__coord_unpark(n); /* requests that waited for this ring */
}

/* ---- joining ---------------------------------------------------------- */

static void boot_try(node *n, uint64_t now)
{
    if (n->boot != NODE_BOOT_WAIT || n->parked)
        return;
    size_t cnt = gossip_peer_count(n->g);
    /* listen until the set of known endpoints has been stable a while */
    if (cnt != n->boot_known) {
        n->boot_known = cnt;
        n->boot_stable_ticks = 0;
    } else {
        n->boot_stable_ticks++;
    }
    if (n->ticks < RING_DELAY_TICKS ||
        n->ticks * (uint64_t)n->cfg.gossip_interval_ms < RING_DELAY_MS ||
        n->boot_stable_ticks < RING_DELAY_TICKS)
        return;
    size_t others = 0;
    for (size_t i = 0; i < cnt; i++) {
        struct gossip_peer_info pi;
        if (gossip_peer_get(&pi, n->g, i, now) < 0 || pi.self)
            continue;
        others++;
        if (pi.quarantined ||
            peer_flag(&pi.state[GOSSIP_KEY_SCHEMA], "join=wait"))
            continue; /* parked: it joins when asked, not in turn */
        bool alive = pi.up || pi.phi < n->cfg.phi_convict_threshold;
        bool booting = pi.status == GOSSIP_STATUS_BOOT ||
                       pi.status == GOSSIP_STATUS_UNKNOWN;
        /* one range movement at a time: a node streaming its ranges in
         * (BOOT with tokens) or out (LEAVING) goes first, whatever its
         * name */
        bool moving = (pi.status == GOSSIP_STATUS_BOOT &&
                       pi.state[GOSSIP_KEY_TOKENS].len > 0) ||
                      pi.status == GOSSIP_STATUS_LEAVING;
        if (alive &&
            (moving || (booting && strcmp(pi.name, n->cfg.node_name) < 0))) {
            if (n->ticks % 5 == 0)
                LOG(INFO, "boot.waiting", "for=%s%s", pi.name,
                    moving ? " reason=moving" : "");
            return; /* its turn first */
        }
    }
    if (!n->is_seed && n->nseeds > 0 && others == 0) {
        if (n->ticks % 5 == 0)
            LOG(INFO, "boot.waiting", "for=seeds seeds=%d", n->nseeds);
        return;
    }
    /* choose tokens against the ring learnt so far */
    struct ring_joiner j = {
        .name = n->cfg.node_name,
        .dc = n->cfg.datacenter,
        .rack = n->cfg.rack,
        .weight = (uint32_t)(n->cfg.weight * RING_WEIGHT_UNIT + 0.5)};
    size_t nt = ring_tokens_for_weight((unsigned)n->cfg.num_tokens, j.weight);
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
    const ring *base = n->ring && ring_token_count(n->ring) ? n->ring : NULL;
    int rc = ring_tokens_alloc(n->st.tokens, nt, base, &j,
                               n->cfg.token_allocation == NODE_ALLOC_RANDOM
                                   ? RING_ALLOC_RANDOM
                                   : RING_ALLOC_BALANCED);
    if (rc < 0) {
        LOG(ERROR, "boot.alloc_fail", "error=\"%s\"", rk_strerror(rc));
        return;
    }
    n->st.ntokens = (int)nt;
    announce_tokens(n, nt, others, n->cfg.auto_bootstrap && base);
}

_Static_assert(GOSSIP_MAX_TOKENS <= NODE_STATE_MAX_TOKENS,
               "node.state holds every token a node can announce");

/* Announce this node's tokens under a new epoch and persist them: with
 * STATUS NORMAL, or, to stream the ranges in first (a cluster to take them
 * from), with STATUS BOOT and joining=1, persisted before the announce so
 * that a restart resumes the join; stream.c announces NORMAL at its end. */
static void announce_tokens(node *n, size_t nt, size_t others, bool stream)
{
    int rc = 0;
    if (stream) {
        n->st.joining = 1;
        rc = node_state_save(&n->st, n->cfg.data_dir);
    }
    if (rc == 0)
        rc = gossip_tokens_set(n->g, n->st.tokens, nt);
    uint64_t epoch = 0;
    if (rc == 0)
        rc = gossip_status_set(
            n->g, stream ? GOSSIP_STATUS_BOOT : GOSSIP_STATUS_NORMAL, 0,
            &epoch);
    if (rc == 0 && stream)
        rc = node__stream_begin(n);
    if (rc < 0) {
        LOG(ERROR, "boot.announce_fail", "error=\"%s\"", rk_strerror(rc));
        return;
    }
    n->st.ring_epoch = epoch;
    node__state_save(n);
    const char *alloc =
        n->cfg.token_allocation == NODE_ALLOC_RANDOM ? "random" : "balanced";
    if (stream) {
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

/* ---- loop glue -------------------------------------------------------- */

/* Log when a peer has left requests unanswered for write_timeout_ms, so
 * that reads ask it last (node/coord_read.c) and writes to it are hinted
 * (node/coord.c), and when it answers again: an operator sees why, before
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

static void on_tick(uv_timer_t *t)
{
    node *n = t->data;
    uint64_t now = node__mono_ms(n);
    n->ticks++;
    (void)node__obs_store_watch(n);
    if (n->ticks % 10 == 1 && n->store) {
        /* LOAD: bytes on disk of the local ranges */
        uint64_t ranges, keys, bytes;
        node__obs_store_totals(n, &ranges, &keys, &bytes);
        char load[32];
        int l = snprintf(load, sizeof(load), "%llu", (unsigned long long)bytes);
        gossip_state_set(n->g, GOSSIP_KEY_LOAD, load, (size_t)l);
    }
    int rc = gossip_tick(n->g, now, &n->gout);
    if (rc == 0) {
        gossip_send_all(n);
        handle_events(n);
    }
    boot_try(n, now);
    node__clock_tick(n);
    node__stream_tick(n);
    node__leave_tick(n);
    node__cleanup_auto(n);
    node__repair_after_join(n);
    silence_watch(n);
    if (n->settling && now >= n->settle_until) {
        n->settling = false;
        n->ring_stale = stale_now(n);
        LOG(WARN, "ring.settle_timeout",
            "note=\"no peer heard since the restart: serving with the ring "
            "as saved\"");
        node__ranges_ensure(n);
    }
}

static void on_udp(void *arg, struct rk_slice pkt, const struct sockaddr *from)
{
    node *n = arg;
    char addr[96];
    if (net_addr_format(addr, sizeof(addr), from) < 0)
        return;
    n->stats.gossip_in++;
    gossip_recv(n->g, node__mono_ms(n), addr, pkt.p, pkt.len, &n->gout);
    gossip_send_all(n);
    handle_events(n);
}

/* SCHEMA: "repl=dc1:3,... internode=7001 client=7380", and " join=wait"
 * while parked (peers do not wait for such a node to join first). */
static void schema_set(node *n)
{
    const struct node_config *c = &n->cfg;
    char v[GOSSIP_VALUE_MAX];
    /* DCs by name: the order a config lists them in places nothing, and
     * peers compare this text (regression: repl_order_mismatch) */
    int ord[NODE_CONFIG_MAX_DCS];
    for (int i = 0; i < c->ndcs; i++) {
        int j = i;
        for (; j > 0 && strcmp(c->replication[ord[j - 1]].name,
                               c->replication[i].name) > 0;
             j--)
            ord[j] = ord[j - 1];
        ord[j] = i;
    }
    int l = snprintf(v, sizeof(v), "repl=");
    for (int i = 0; i < c->ndcs; i++)
        l += snprintf(v + l, sizeof(v) - (size_t)l, "%s%s:%d", i ? "," : "",
                      c->replication[ord[i]].name, c->replication[ord[i]].rf);
    l += snprintf(v + l, sizeof(v) - (size_t)l, " internode=%d client=%d%s",
                  c->internode_port, c->client_port,
                  n->parked ? " join=wait" : "");
    gossip_state_set(n->g, GOSSIP_KEY_SCHEMA, v, (size_t)l);
}

int node__join_withdraw(node *n, uint64_t *epoch)
{
    int joining = n->st.joining, ntokens = n->st.ntokens;
    n->st.joining = 0;
    n->st.ntokens = 0;
    n->st.wait_join = 1;
    /* persisted before the announce: a restart must not resume the join */
    int rc = node_state_save(&n->st, n->cfg.data_dir);
    if (rc < 0) {
        n->st.joining = joining;
        n->st.ntokens = ntokens;
        n->st.wait_join = 0;
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
    if (n->parked && node__stream_busy(n)) {
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
    n->boot_stable_ticks = 0;
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
         * streaming resumed (stream.c); a leave: LEAVING again (leave.c) */
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
            node__stream_leftover(n);
        if (n->st.joining) {
            rc = node__stream_begin(n);
            if (rc < 0) {
                snprintf(err, errlen, "cannot resume joining: %s",
                         rk_strerror(rc));
                return rc;
            }
            LOG(INFO, "boot.joining",
                "tokens=%d epoch=%llu resumed=1 note=\"a join was cut short: "
                "resuming it (stream.resumed says from where)\"",
                n->st.ntokens, (unsigned long long)ep);
        } else if (n->st.leaving) {
            rc = node__leave_resume(n);
            if (rc < 0) {
                snprintf(err, errlen, "cannot resume leaving: %s",
                         rk_strerror(rc));
                return rc;
            }
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
            n->settle_until =
                node__mono_ms(n) +
                SETTLE_INTERVALS * (uint64_t)c->gossip_interval_ms;
        }
    } else if (n->parked) {
        n->boot = NODE_BOOT_WAIT; /* no STATUS: not in anyone's ring */
        LOG(INFO, "boot.parked",
            "note=\"join_ring is false: this node stays out of the ring "
            "until `ringkv join`\"");
    } else {
        gossip_status_set(n->g, GOSSIP_STATUS_BOOT, 0, NULL);
        n->boot = NODE_BOOT_WAIT;
    }

    struct net_udp_opts uo = NET_UDP_OPTS_INIT;
    uo.host = n->listen_ip;
    uo.port = (uint16_t)c->gossip_port;
    uo.on_recv = on_udp;
    uo.arg = n;
    rc = net_udp_new(&n->udp, n->loop, &uo);
    if (rc < 0) {
        snprintf(err, errlen, "gossip_port: cannot bind %s:%d/udp: %s",
                 n->listen_ip, c->gossip_port, rk_strerror(rc));
        return rc;
    }
    uv_timer_init(n->loop, &n->gtimer);
    n->gtimer.data = n;
    n->gtimer_open = 1;
    uv_timer_start(&n->gtimer, on_tick, 10, (uint64_t)c->gossip_interval_ms);
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
    for (size_t i = 0; i < n->nnames; i++)
        if (n->names[i]->busy)
            uv_cancel((uv_req_t *)&n->names[i]->req);
    if (n->gtimer_open) {
        n->gtimer_open = 0;
        n->pending_closes++;
        uv_close((uv_handle_t *)&n->gtimer, node__handle_closed);
    }
    if (n->udp) {
        net_udp *u = n->udp;
        n->udp = NULL;
        n->pending_closes++;
        net_udp_close(u, on_udp_closed, n);
    }
}
