/*
 * admin.c - the native protocol's admin answers (STATUS, RING, ENDPOINTS,
 * METRICS, NETSTATS) and the Prometheus text of the node's counters.
 *
 * Answers are built from the node's current ring snapshot and gossip view;
 * the arrays they point to are allocated into a node_admin_buf that the
 * caller frees once the response is encoded.
 */
#include "node/admin.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "gossip/gossip.h"
#include "node/coord_node.h"
#include "node/daemon.h"
#include "node/obs.h"
#include "node/repair_host.h"
#include "node/replica.h"
#include "node/replication.h"
#include "node/ring_view.h"
#include "node/stream_host.h"
#include "repair/repair.h"
#include "ring/ring.h"
#include "wire/client_msg.h"

void node_admin_buf_init(struct node_admin_buf *b)
{
    memset(b, 0, sizeof(*b));
}

void node_admin_buf_free(struct node_admin_buf *b)
{
    for (int i = 0; i < b->n; i++)
        free(b->allocs[i]);
    b->n = 0;
}

static void *ab_alloc(struct node_admin_buf *b, size_t size)
{
    if (b->n == (int)(sizeof(b->allocs) / sizeof(b->allocs[0])))
        return NULL;
    void *p = calloc(1, size ? size : 1);
    if (p)
        b->allocs[b->n++] = p;
    return p;
}

static struct rk_slice S(const char *s) {
    return RK_SLICE(s, strlen(s));
}

static const char *
state_code(node *n, uint32_t i, enum ring_node_state st)
{
    bool up = i < n->npeers && n->peer[i].up;
    switch (st) {
    case RING_NORMAL:
        return up ? "UN" : "DN";
    case RING_BOOT:
        return up ? "UJ" : "DJ";
    case RING_LEAVING:
        return up ? "UL" : "DL";
    default:
        return NULL;
    }
}

/* A status row's load and replication, from the node's gossip state; the
 * replication is copied into repl[0..cap) (gossip's changes with the next
 * packet). */
/* The answering node's repair schedule, in its own row (not gossiped):
 * what `ringkv status` says of it under the table. */
static void status_repair(struct wire_cnode *row, node *n)
{
    struct repair_sched_stats rss;
    node__repair_sched_stats(n, &rss);
    if (rss.arcs == 0)
        return;
    row->repair_arcs = rss.arcs;
    row->repair_oldest_ms = rss.oldest_age_ms; /* 0 omitted, read as 0 */
    row->repair_overdue = rss.overdue;
    row->repair_never = rss.never;
}

static void status_gossip(struct wire_cnode *row,
                          char *repl,
                          size_t cap,
                          const struct gossip_peer_info *pi)
{
    char lb[32];
    struct rk_slice l = pi->state[GOSSIP_KEY_LOAD];
    size_t ll = l.len < sizeof(lb) - 1 ? l.len : sizeof(lb) - 1;
    if (ll) /* no LOAD heard yet: l.p is NULL (UBSan aborted the node on
             * STATUS just after a restart) */
        memcpy(lb, l.p, ll);
    lb[ll] = '\0';
    row->load = strtoull(lb, NULL, 10);
    struct rk_slice rp = node__schema_repl(pi->state[GOSSIP_KEY_SCHEMA]);
    if (rp.len > 0 && rp.len <= cap) {
        memcpy(repl, rp.p, rp.len);
        row->repl = RK_SLICE(repl, rp.len);
    }
}

/* A status row's clock: the peer's offset from this node's (pi), or this
 * node's from its peers'. */
static void status_clock(struct wire_cnode *row,
                         const node *n,
                         const struct gossip_peer_info *pi)
{
    int64_t off = n->clock.offset_ms;
    bool far = n->clock.skewed;
    if (!pi->self) {
        if (!pi->clock_known)
            return;
        off = pi->clock_offset_ms;
        uint64_t mag = off < 0 ? (uint64_t)0 - (uint64_t)off : (uint64_t)off;
        far = n->cfg.max_clock_drift_ms > 0 &&
              mag > (uint64_t)n->cfg.max_clock_drift_ms;
    }
    if (off > 0)
        row->clock_ahead_ms = (uint64_t)off;
    else if (off < 0)
        row->clock_behind_ms = (uint64_t)0 - (uint64_t)off;
    row->clock_far = far;
}

static int do_status(node *n, struct wire_cresp *r, struct node_admin_buf *b)
{
    ring *rg = n->ring;
    size_t cnt = rg ? ring_node_count(rg) : 0;
    /* the ring's nodes, then those waiting for `ringkv join` */
    size_t gcnt = n->g ? gossip_peer_count(n->g) : 0;
    size_t rows_max = cnt + gcnt;
    struct wire_cnode *rows = ab_alloc(b, rows_max * sizeof(*rows));
    char(*addrs)[GOSSIP_ADDR_MAX + 16] = ab_alloc(b, rows_max * sizeof(*addrs));
    /* "dc:rf," for every DC a config may name */
    char(*repls)[NODE_CONFIG_MAX_DCS * (GOSSIP_NAME_MAX + 4)] =
        ab_alloc(b, rows_max * sizeof(*repls));
    char(*queued)[GOSSIP_NAME_MAX + 1] =
        ab_alloc(b, rows_max * sizeof(*queued));
    if (!rows || !addrs || !repls || !queued)
        return -ENOMEM;
    size_t k = 0;
    uint64_t now = node__mono_ms(n);
    for (uint32_t i = 0; i < cnt; i++) {
        struct ring_node_info ni;
        ring_node_get(rg, &ni, i);
        const char *code = state_code(n, i, ni.state);
        if (!code)
            continue;
        rows[k].name = S(ni.name);
        snprintf(addrs[k], sizeof(addrs[k]), "%s",
                 i < n->npeers ? n->peer[i].caddr : "");
        rows[k].addr = S(addrs[k]);
        rows[k].dc = S(ni.dc);
        rows[k].rack = S(ni.rack);
        rows[k].state = S(code);
        rows[k].tokens = (uint32_t)ni.ntokens;
        rows[k].owns = ni.state == RING_NORMAL || ni.state == RING_LEAVING
                           ? ni.effective
                           : -1.0;
        /* a peer that leaves our requests unanswered while gossip still
         * says UP: reads ask it last, writes to it are hinted */
        uint64_t quiet = i < n->npeers && !n->peer[i].self
                             ? node__peer_quiet_ms(n, n->peer[i].iaddr)
                             : 0;
        rows[k].silent_ms = quiet >= coord_quiet_limit(n) ? quiet : 0;
        /* only this node knows its disk (it is not gossiped) */
        rows[k].disk_full =
            i < n->npeers && n->peer[i].self && node__disk_full(n);
        if (i < n->npeers && n->peer[i].self)
            status_repair(&rows[k], n);
        struct gossip_peer_info pi;
        char wait_addr[sizeof(addrs[0])];
        if (n->g && gossip_peer_find(&pi, n->g, ni.name, now) == 0) {
            status_gossip(&rows[k], repls[k], sizeof(repls[k]), &pi);
            status_clock(&rows[k], n, &pi);
            /* a join aborted: BOOT with no tokens, waiting for `ringkv
             * join` as a node started with join_ring false does */
            if (ni.state == RING_BOOT &&
                node__peer_waiting(n, &pi, wait_addr, sizeof(wait_addr)))
                rows[k].state = S(code[0] == 'U' ? "UW" : "DW");
            /* joining, and waiting for another movement to stream */
            if (ni.state == RING_BOOT) {
                node__schema_word(queued[k], sizeof(queued[k]),
                                  pi.state[GOSSIP_KEY_SCHEMA], "queued");
                rows[k].queued = S(queued[k]);
            }
        }
        k++;
    }
    /* Nodes started with join_ring: false, in gossip but not in the ring
     * until `ringkv join`: "UW" (up, waiting) or "DW". */
    for (size_t i = 0; i < gcnt; i++) {
        struct gossip_peer_info pi;
        if (gossip_peer_get(&pi, n->g, i, now) < 0 ||
            (rg && ring_node_find(rg, pi.name) != RING_NONE) ||
            !node__peer_waiting(n, &pi, addrs[k], sizeof(addrs[k])))
            continue;
        rows[k].name = S(pi.name);
        rows[k].addr = S(addrs[k]);
        rows[k].dc = pi.state[GOSSIP_KEY_DC];
        rows[k].rack = pi.state[GOSSIP_KEY_RACK];
        rows[k].state = S(pi.up ? "UW" : "DW");
        rows[k].tokens = 0;
        rows[k].owns = -1.0;
        status_gossip(&rows[k], repls[k], sizeof(repls[k]), &pi);
        k++;
    }
    r->nodes = rows;
    r->nnodes = k;
    r->epoch = rg ? ring_epoch(rg) : 0;
    r->fprint = rg ? ring_fingerprint(rg) : 0;
    r->node = S(n->cfg.node_name);
    r->cluster = S(n->cfg.cluster_name);
    r->has |= WIRE_CRESP_NODES | WIRE_CRESP_EPOCH | WIRE_CRESP_FPRINT |
              WIRE_CRESP_NODE | WIRE_CRESP_CLUSTER;
    return 0;
}

/* This node's replication as STATUS shows it ("dc1:3,dc2:2", "*:3"),
 * from its config: what places the replicas of its ring. */
static void own_repl(char *out, size_t cap, const struct node_config *c)
{
    size_t l = 0;
    out[0] = '\0';
    for (int i = 0; i < c->ndcs && l < cap; i++) {
        int w = snprintf(out + l, cap - l, "%s%s:%d", i ? "," : "",
                         c->replication[i].name, c->replication[i].rf);
        l += w > 0 ? (size_t)w : 0;
    }
}

/* RING: the placed tokens and, for a token-aware client, a row per
 * placed node (name, client address, dc, rack, state) with this node's
 * replication on its own row: all a client needs to compute each key's
 * replicas with ring/ as this node does (docs/protocol.md). */
static int do_ring(node *n, struct wire_cresp *r, struct node_admin_buf *b)
{
    ring *rg = n->ring;
    size_t cnt = rg ? ring_token_count(rg) : 0;
    size_t nn = rg ? ring_node_count(rg) : 0;
    struct wire_ctoken *t = ab_alloc(b, cnt * sizeof(*t));
    struct wire_cnode *rows = ab_alloc(b, nn * sizeof(*rows));
    char *repl = ab_alloc(b, NODE_CONFIG_MAX_DCS * (GOSSIP_NAME_MAX + 16));
    if (!t || !rows || !repl)
        return -ENOMEM;
    for (size_t i = 0; i < cnt; i++) {
        struct ring_node_info ni;
        ring_node_get(rg, &ni, ring_arc_owner(rg, i));
        t[i].token = ring_arc_range(rg, i).end;
        t[i].node = S(ni.name);
    }
    own_repl(repl, NODE_CONFIG_MAX_DCS * (GOSSIP_NAME_MAX + 16), &n->cfg);
    size_t k = 0;
    for (uint32_t i = 0; i < nn; i++) {
        struct ring_node_info ni;
        ring_node_get(rg, &ni, i);
        bool self = i < n->npeers && n->peer[i].self;
        const char *code = state_code(n, i, ni.state);
        /* a node that places nothing is left out, but for this node's
         * own row: it says the replication (a node that has left still
         * answers RING) */
        if (!self && (!code || ni.state == RING_BOOT || ni.ntokens == 0))
            continue;
        if (!code)
            code = "UL"; /* left or removed: not placed any more */
        rows[k].name = S(ni.name);
        rows[k].addr = S(i < n->npeers ? n->peer[i].caddr : "");
        rows[k].dc = S(ni.dc);
        rows[k].rack = S(ni.rack);
        rows[k].state = S(code);
        rows[k].tokens = (uint32_t)ni.ntokens;
        rows[k].owns = -1.0;
        if (self)
            rows[k].repl = S(repl);
        k++;
    }
    r->tokens = t;
    r->ntokens = cnt;
    r->nodes = rows;
    r->nnodes = k;
    r->epoch = rg ? ring_epoch(rg) : 0;
    r->fprint = rg ? ring_fingerprint(rg) : 0;
    r->node = S(n->cfg.node_name);
    r->has |= WIRE_CRESP_TOKENS | WIRE_CRESP_EPOCH | WIRE_CRESP_FPRINT |
              WIRE_CRESP_NODES | WIRE_CRESP_NODE;
    return 0;
}

static int do_endpoints(node *n,
                        struct wire_cresp *r,
                        struct node_admin_buf *b,
                        const struct wire_creq *q)
{
    ring *rg = n->ring;
    uint64_t tok = rk_token(q->key.p, q->key.len);
    uint32_t reps[RING_MAX_REPLICAS];
    size_t nr = 0;
    if (rg && ring_token_count(rg))
        nr = ring_replicas(rg, tok, reps, RING_MAX_REPLICAS);
    if (nr > RING_MAX_REPLICAS)
        nr = RING_MAX_REPLICAS;
    struct wire_cendpoint *e = ab_alloc(b, nr * sizeof(*e));
    if (!e)
        return -ENOMEM;
    for (size_t i = 0; i < nr; i++) {
        struct ring_node_info ni;
        ring_node_get(rg, &ni, reps[i]);
        e[i].name = S(ni.name);
        e[i].addr = S(reps[i] < n->npeers ? n->peer[reps[i]].caddr : "");
    }
    r->endpoints = e;
    r->nendpoints = nr;
    r->token = tok;
    r->has |= WIRE_CRESP_ENDPOINTS | WIRE_CRESP_TOKEN;
    return 0;
}

/* Answer with the malloc'd text t, which b frees after the encode. */
static int
text_answer(struct wire_cresp *r, struct node_admin_buf *b, char *t, size_t len)
{
    if (b->n == (int)(sizeof(b->allocs) / sizeof(b->allocs[0]))) {
        free(t);
        return -ENOMEM;
    }
    b->allocs[b->n++] = t;
    r->text = RK_SLICE(t, len);
    r->has |= WIRE_CRESP_TEXT;
    return 0;
}

int node__admin(node *n,
                struct wire_cresp *r,
                struct node_admin_buf *b,
                const struct wire_creq *q)
{
    switch (q->op) {
    case WIRE_COP_STATUS: {
        int rc = do_status(n, r, b);
        if (rc < 0)
            return rc;
        /* the answering node's notes: its replication setting, and the
         * repair or rebuild that follows a change (replication.h) */
        char *t = NULL;
        size_t len = 0;
        FILE *f = open_memstream(&t, &len);
        if (!f)
            return -ENOMEM;
        node__repl_status_text(n, f);
        if (fclose(f) != 0) {
            free(t);
            return -ENOMEM;
        }
        if (len == 0) {
            free(t);
            return 0;
        }
        return text_answer(r, b, t, len);
    }
    case WIRE_COP_RING:
        return do_ring(n, r, b);
    case WIRE_COP_ENDPOINTS:
        return do_endpoints(n, r, b, q);
    case WIRE_COP_METRICS: {
        size_t len = 0;
        char *t = node__obs_text(n, &len); /* the registry /metrics serves */
        if (!t)
            return n->obs ? -ENOMEM : RK_ECLOSED;
        return text_answer(r, b, t, len);
    }
    case WIRE_COP_NETSTATS: {
        size_t len = 0;
        char *t = node__netstats_text(n, &len);
        return t ? text_answer(r, b, t, len) : -ENOMEM;
    }
    case WIRE_COP_REPLICATION: {
        size_t len = 0;
        char *t = node__repl_show(n, &len);
        return t ? text_answer(r, b, t, len) : -ENOMEM;
    }
    }
    return RK_EBADREQ;
}
