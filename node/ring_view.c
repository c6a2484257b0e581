/*
 * ring_view.c - the ring as this node sees it, rebuilt from gossip's
 * membership whenever it changes (membership.c calls node__ring_rebuild
 * on MEMBERSHIP, STATE and RING_STALE events; a join, leave or abort
 * after announcing).
 *
 * A rebuild reads every endpoint gossip holds (its STATUS, TOKENS, DC and
 * RACK), builds the ring under the membership epoch (gossip tells the
 * state machine it is applied, which ends RING_STALE) and, while a node
 * is joining (BOOT with tokens) or LEAVING, the pending ring: the ring
 * after the movement, whose extra replicas take writes too (coord.c).
 * Then the peer table indexed like the ring: each member's internode and
 * client addresses (ADDRESS and the ports in SCHEMA), UP/DOWN, and whether
 * it gossips the same replication as this node (a mismatch is logged, not
 * guessed around). Last, the local storage ranges: every arc this node
 * replicates, in either ring, gets a range before data arrives.
 *
 * Two nodes that joined without knowing of each other may have chosen the
 * same token; the rebuild notices it and lets the one with the larger name
 * choose again (node__boot_retoken, membership.c).
 */
#include "node/ring_view.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "gossip/gossip.h"
#include "node/daemon.h"
#include "node/log.h"
#include "node/membership.h"
#include "node/replication.h"
#include "ring/ring.h"
#include "storage/store.h"

/* ---- SCHEMA ----------------------------------------------------------- */

int node__schema_format(char *out,
                        size_t cap,
                        const struct node_config *c,
                        uint64_t repl_version,
                        bool parked,
                        const char *replacing)
{
    /* DCs by name: the order a config lists them in places nothing, and
     * peers compare this text (regression: repl_order_mismatch) */
    char repl[NODE_CONFIG_MAX_DCS * 80];
    node_repl_format(repl, sizeof(repl), c->replication, c->ndcs);
    int l =
        snprintf(out, cap, "repl=%s internode=%d client=%d%s", repl,
                 c->internode_port, c->client_port, parked ? " join=wait" : "");
    if (replacing && replacing[0] && l >= 0 && (size_t)l < cap)
        l += snprintf(out + l, cap - (size_t)l, " replacing=%s", replacing);
    /* a setting made by `ringkv replication set` (replication.h) */
    if (repl_version && l >= 0 && (size_t)l < cap)
        l += snprintf(out + l, cap - (size_t)l, " replv=%llu",
                      (unsigned long long)repl_version);
    return l < (int)cap ? l : (int)cap - 1;
}

void node__schema_replacing(char *out, size_t cap, struct rk_slice schema)
{
    node__schema_word(out, cap, schema, "replacing");
}

void node__schema_word(char *out,
                       size_t cap,
                       struct rk_slice schema,
                       const char *name)
{
    char key[32];
    size_t k = (size_t)snprintf(key, sizeof(key), " %s=", name);
    out[0] = '\0';
    if (k >= sizeof(key))
        return;
    const char *p = (const char *)schema.p;
    for (size_t i = 0; i + k <= schema.len; i++) {
        if (memcmp(p + i, key, k) != 0)
            continue;
        size_t e = i + k;
        while (e < schema.len && p[e] != ' ')
            e++;
        size_t l = e - i - k;
        if (l == 0 || l >= cap)
            return; /* no name, or none a node can have */
        memcpy(out, p + i + k, l);
        out[l] = '\0';
        return;
    }
}

bool node__schema_flag(struct rk_slice schema, const char *flag)
{
    char buf[GOSSIP_VALUE_MAX + 2];
    size_t l = schema.len < GOSSIP_VALUE_MAX ? schema.len : GOSSIP_VALUE_MAX;
    if (l)
        memcpy(buf, schema.p, l);
    buf[l] = ' ';
    buf[l + 1] = '\0';
    char pat[32];
    snprintf(pat, sizeof(pat), " %s ", flag);
    return strstr(buf, pat) != NULL;
}

uint32_t
node__schema_port(struct rk_slice schema, const char *key, uint32_t dflt)
{
    /* SCHEMA holds "repl=... internode=7001 client=7380" */
    char buf[GOSSIP_VALUE_MAX + 1];
    size_t l = schema.len < GOSSIP_VALUE_MAX ? schema.len : GOSSIP_VALUE_MAX;
    if (l)
        memcpy(buf, schema.p, l);
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
             node__schema_port(pi->state[GOSSIP_KEY_SCHEMA], service,
                               (uint32_t)dflt));
}

bool node__peer_waiting(node *n,
                        const struct gossip_peer_info *pi,
                        char *caddr,
                        size_t cap)
{
    if (pi->quarantined ||
        !node__schema_flag(pi->state[GOSSIP_KEY_SCHEMA], "join=wait"))
        return false;
    peer_service(caddr, cap, pi, "client", n->cfg.client_port);
    return true;
}

/* ---- ring ------------------------------------------------------------- */

enum ring_node_state node__ring_state_of(enum gossip_status s)
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

void node__ring_repl_fill(struct ring_config *rc,
                          struct ring_dc_rf *rdc,
                          const struct node_config *c)
{
    if (c->ndcs == 1 && strcmp(c->replication[0].name, "*") == 0) {
        rc->repl.strategy = RING_SIMPLE;
        rc->repl.rf = (unsigned)c->replication[0].rf;
    } else {
        for (int i = 0; i < c->ndcs; i++) {
            rdc[i].dc = c->replication[i].name;
            rdc[i].rf = (unsigned)c->replication[i].rf;
        }
        rc->repl.strategy = RING_NTS;
        rc->repl.dcs = rdc;
        rc->repl.ndcs = (size_t)c->ndcs;
    }
}

bool node__tokens_collide(const uint64_t *mine,
                          size_t nmine,
                          const char *self,
                          const struct ring_member *m,
                          size_t nm)
{
    uint64_t *sorted = malloc(sizeof(uint64_t) * (nmine + 1));
    if (!sorted)
        return false;
    if (nmine)
        memcpy(sorted, mine, sizeof(uint64_t) * nmine);
    qsort(sorted, nmine, sizeof(uint64_t), rk_u64_cmp);
    bool hit = false;
    for (size_t i = 0; i < nm && !hit; i++) {
        if (m[i].state == RING_BOOT || m[i].state == RING_LEFT ||
            m[i].state == RING_REMOVED)
            continue;
        if (strcmp(m[i].name, self) >= 0)
            continue;
        for (size_t k = 0; k < m[i].ntokens && !hit; k++)
            hit = bsearch(&m[i].tokens[k], sorted, nmine, sizeof(uint64_t),
                          rk_u64_cmp) != NULL;
    }
    free(sorted);
    return hit;
}

/* Whether a[0..na) and b[0..nb) hold the same tokens (any order). */
static bool
same_tokens(const uint64_t *a, size_t na, const uint64_t *b, size_t nb)
{
    if (na != nb || na == 0)
        return false;
    for (size_t i = 0; i < na; i++) {
        size_t k = 0;
        while (k < nb && b[k] != a[i])
            k++;
        if (k == nb)
            return false;
    }
    return true;
}

/* The member that member i replaces: placed (NORMAL or LEAVING) with
 * exactly the tokens member i announces (nt of them), or SIZE_MAX. */
static size_t replaced_of(const struct ring_member *m,
                          size_t nm,
                          const char *const *replacing,
                          size_t i,
                          size_t nt)
{
    if (!replacing[i] || !replacing[i][0])
        return SIZE_MAX;
    for (size_t k = 0; k < nm; k++)
        if (k != i && strcmp(m[k].name, replacing[i]) == 0 &&
            (m[k].state == RING_NORMAL || m[k].state == RING_LEAVING) &&
            same_tokens(m[i].tokens, nt, m[k].tokens, m[k].ntokens))
            return k;
    return SIZE_MAX;
}

void node__ring_replaced(struct ring_member *m,
                         size_t nm,
                         const char *const *replacing)
{
    for (size_t i = 0; i < nm; i++) {
        if (m[i].state != RING_NORMAL)
            continue;
        size_t k = replaced_of(m, nm, replacing, i, m[i].ntokens);
        if (k != SIZE_MAX)
            m[k].state = RING_REMOVED;
    }
}

size_t node__ring_pending_members(struct ring_member *m,
                                  size_t nm,
                                  const size_t *pend,
                                  const char *const *replacing)
{
    size_t out = 0;
    for (size_t i = 0; i < nm; i++) {
        if (!pend[i] || pend[i] == (size_t)-1)
            continue;
        size_t k = replaced_of(m, nm, replacing, i, pend[i]);
        if (k != SIZE_MAX) {
            m[k].state = RING_LEFT; /* its tokens are the replacement's */
            out++;
        }
    }
    for (size_t i = 0; i < nm; i++) {
        if (pend[i] == (size_t)-1) {
            m[i].state = RING_LEFT;
        } else if (pend[i]) {
            m[i].state = RING_NORMAL;
            m[i].ntokens = pend[i];
        }
    }
    return out;
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
int node__ring_stale_now(node *n)
{
    return n->settling || gossip_ring_stale(n->g);
}

void node__join_rings_free(node *n)
{
    for (size_t i = 0; i < n->njoins; i++)
        ring_free(n->joins[i].r);
    free(n->joins);
    n->joins = NULL;
    n->njoins = 0;
}

const ring *node__join_ring(const node *n, const char *name)
{
    for (size_t i = 0; i < n->njoins; i++)
        if (strcmp(n->joins[i].name, name) == 0)
            return n->joins[i].r;
    return NULL;
}

/* Each joining member's own pending ring (member i with pend[i] tokens
 * alone placed), into n->joins, replacing the last rebuild's. A ring that
 * cannot be built is logged and left out: that joiner then has no ring of
 * its own, and streams only once it can be built (node__join_queued). */
static void join_rings_build(node *n,
                             const struct ring_member *m,
                             size_t nm,
                             const size_t *pend,
                             const uint64_t *epoch,
                             const char *const *replp,
                             const struct ring_config *rc0)
{
    node__join_rings_free(n);
    size_t k = 0;
    for (size_t i = 0; i < nm; i++)
        k += pend[i] && pend[i] != (size_t)-1;
    if (!k)
        return;
    struct ring_member *m1 = calloc(nm, sizeof(*m1));
    size_t *p1 = calloc(nm, sizeof(*p1));
    n->joins = calloc(k, sizeof(*n->joins));
    if (!m1 || !p1 || !n->joins) {
        free(n->joins);
        n->joins = NULL;
        goto out;
    }
    for (size_t i = 0; i < nm; i++) {
        if (!pend[i] || pend[i] == (size_t)-1)
            continue;
        memcpy(m1, m, nm * sizeof(*m1));
        memset(p1, 0, nm * sizeof(*p1));
        p1[i] = pend[i];
        node__ring_pending_members(m1, nm, p1, replp);
        struct ring_config rc = *rc0;
        rc.members = m1;
        ring *r = NULL;
        int err = ring_new(&r, &rc);
        if (err < 0) {
            LOG(ERROR, "ring.join_build_fail", "joining=%s error=\"%s\"",
                m[i].name, rk_strerror(err));
            continue;
        }
        struct node_join_ring *j = &n->joins[n->njoins++];
        snprintf(j->name, sizeof(j->name), "%s", m[i].name);
        j->epoch = epoch[i];
        j->r = r;
    }
out:
    free(p1);
    free(m1);
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
    /* the node each member replaces (SCHEMA's replacing=), "" if none */
    char(*repl)[GOSSIP_NAME_MAX + 1] = calloc(cnt ? cnt : 1, sizeof(*repl));
    const char **replp = calloc(cnt ? cnt : 1, sizeof(*replp));
    uint64_t *pepoch = calloc(cnt ? cnt : 1, sizeof(*pepoch));
    struct ring_dc_rf rdc[NODE_CONFIG_MAX_DCS];
    size_t nm = 0, npend = 0;
    ring *r = NULL;
    if (!m || !toks || !dcs || !names || !pend || !repl || !replp || !pepoch)
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
        m[nm].state = node__ring_state_of(pi.status);
        node__schema_replacing(repl[nm], sizeof(repl[nm]),
                               pi.state[GOSSIP_KEY_SCHEMA]);
        replp[nm] = repl[nm];
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
                pepoch[nm] = pi.status_epoch;
                npend++;
            }
        }
        nm++;
    }
    /* a replace finished whose REMOVED of the dead node is not heard yet:
     * the dead node is out already (its tokens are the replacement's) */
    node__ring_replaced(m, nm, replp);
    struct ring_config rc = {.members = m, .nmembers = nm};
    rc.epoch = gossip_epoch_ring(n->g);
    node__ring_repl_fill(&rc, rdc, &n->cfg);
    /* Two nodes chose the same token (they joined without knowing of
     * each other). The one with the larger name chooses again. */
    if (n->boot == NODE_BOOT_DONE &&
        node__tokens_collide(n->st.tokens, (size_t)n->st.ntokens,
                             n->cfg.node_name, m, nm) &&
        node__boot_retoken(n, m, nm, &rc))
        goto out;
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
    join_rings_build(n, m, nm, pend, pepoch, replp, &rc);
    ring *rp = NULL;
    if (npend) {
        node__ring_pending_members(m, nm, pend, replp);
        err = ring_new(&rp, &rc);
        if (err < 0)
            LOG(ERROR, "ring.pending_build_fail", "moving=%zu error=\"%s\"",
                npend, rk_strerror(err));
    }
    if ((rp != NULL) != (n->ring_pending != NULL))
        LOG(INFO, "ring.pending", "moving=%zu", rp ? npend : 0);
    ring_free(n->ring_pending);
    n->ring_pending = rp;
    n->ring_stale = node__ring_stale_now(n);

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
    uint64_t own_v = 0;
    if (gossip_peer_get(&self, n->g, 0, now) == 0) {
        own = node__schema_repl(self.state[GOSSIP_KEY_SCHEMA]);
        own_v = node_repl_schema_version(self.state[GOSSIP_KEY_SCHEMA]);
    }
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
            /* a setting of another version is not a mismatch: the node
             * with the older one adopts the newer (replication.h) */
            pt[i].repl_differs = !pi.self && theirs.len > 0 &&
                                 node_repl_schema_version(
                                     pi.state[GOSSIP_KEY_SCHEMA]) == own_v &&
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
    free(pepoch);
    free(replp);
    free(repl);
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

/* ---- local ranges ----------------------------------------------------- */

static void ranges_ensure_in(node *n, const ring *r, uint32_t self);

/* Make sure the store holds ranges covering every arc this node
 * replicates, in the ring and, while a node joins or leaves, in the
 * pending ring: the ranges it is about to replicate, which writes and the
 * streams fill meanwhile. Missing pieces are created; ranges no longer
 * replicated are kept until `ringkv cleanup` (streaming/cleanup.c). */
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
    /* joining: the ring with it alone placed, which it streams against
     * (it replicates more there than with the other joiners placed too) */
    const ring *own = node__join_ring(n, n->cfg.node_name);
    if (own)
        ranges_ensure_in(n, own, ring_node_find(own, n->cfg.node_name));
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

/* ---- joins that wait for each other ------------------------------------ */

/* Whether join a comes before join b: announced first (its STATUS epoch),
 * then by name (two that announced without hearing each other). */
static bool join_before(const struct node_join_ring *a,
                        const struct node_join_ring *b)
{
    if (a->epoch != b->epoch)
        return a->epoch < b->epoch;
    return strcmp(a->name, b->name) < 0;
}

bool node__join_queued(
    node *n, char *ahead, size_t cap, size_t *ranges, bool *before)
{
    *ranges = 0;
    *before = true;
    ahead[0] = '\0';
    const struct node_join_ring *me = NULL;
    for (size_t i = 0; i < n->njoins && !me; i++)
        if (strcmp(n->joins[i].name, n->cfg.node_name) == 0)
            me = &n->joins[i];
    if (!n->ring || !me)
        return false; /* no ring of its own yet: the join waits for it */
    uint64_t now = node__mono_ms(n);
    /* a leave goes first, whatever it overlaps */
    for (size_t i = 0; i < ring_node_count(n->ring); i++) {
        struct ring_node_info ni;
        if (ring_node_get(n->ring, &ni, (uint32_t)i) == 0 &&
            ni.state == RING_LEAVING) {
            snprintf(ahead, cap, "%s", ni.name);
            return true;
        }
    }
    /* the joins announced before this one, in their order, then those
     * after it that have not said they wait (they may be streaming: a
     * join resumed after a restart comes after one that went meanwhile) */
    const struct node_join_ring *best = NULL;
    size_t best_k = 0;
    for (size_t i = 0; i < n->njoins; i++) {
        const struct node_join_ring *j = &n->joins[i];
        struct gossip_peer_info pi;
        char q[GOSSIP_NAME_MAX + 1];
        if (j == me || gossip_peer_find(&pi, n->g, j->name, now) < 0 ||
            !(pi.up || pi.phi < n->cfg.phi_convict_threshold))
            continue; /* a joiner that is down holds nobody back */
        node__schema_word(q, sizeof(q), pi.state[GOSSIP_KEY_SCHEMA], "queued");
        if (!join_before(j, me) && q[0])
            continue; /* after this one, and waiting itself */
        size_t k = 0;
        if (ring_moves_overlap(&k, n->ring, me->r, j->r) < 0 || !k)
            continue;
        if (!best || join_before(j, best)) {
            best = j;
            best_k = k;
        }
    }
    if (!best)
        return false;
    snprintf(ahead, cap, "%s", best->name);
    *ranges = best_k;
    *before = join_before(best, me);
    return true;
}
