/*
 * admin.c - the native protocol's admin answers (STATUS, RING, ENDPOINTS,
 * METRICS) and the Prometheus text of the node's counters.
 *
 * Answers are built from the node's current ring snapshot and gossip view;
 * the arrays they point to are allocated into a node_admin_buf that the
 * caller frees once the response is encoded.
 */
#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "node/node_internal.h"
#include "node/obs.h"
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

static int do_status(node *n, struct wire_cresp *r, struct node_admin_buf *b)
{
    ring *rg = n->ring;
    size_t cnt = rg ? ring_node_count(rg) : 0;
    struct wire_cnode *rows = ab_alloc(b, cnt * sizeof(*rows));
    char(*addrs)[GOSSIP_ADDR_MAX + 16] = ab_alloc(b, cnt * sizeof(*addrs));
    if (!rows || !addrs)
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
        struct gossip_peer_info pi;
        if (n->g && gossip_peer_find(&pi, n->g, ni.name, now) == 0) {
            char lb[32];
            struct rk_slice l = pi.state[GOSSIP_KEY_LOAD];
            size_t ll = l.len < sizeof(lb) - 1 ? l.len : sizeof(lb) - 1;
            memcpy(lb, l.p, ll);
            lb[ll] = '\0';
            rows[k].load = strtoull(lb, NULL, 10);
        }
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

static int do_ring(node *n, struct wire_cresp *r, struct node_admin_buf *b)
{
    ring *rg = n->ring;
    size_t cnt = rg ? ring_token_count(rg) : 0;
    struct wire_ctoken *t = ab_alloc(b, cnt * sizeof(*t));
    if (!t)
        return -ENOMEM;
    for (size_t i = 0; i < cnt; i++) {
        struct ring_node_info ni;
        ring_node_get(rg, &ni, ring_arc_owner(rg, i));
        t[i].token = ring_arc_range(rg, i).end;
        t[i].node = S(ni.name);
    }
    r->tokens = t;
    r->ntokens = cnt;
    r->epoch = rg ? ring_epoch(rg) : 0;
    r->fprint = rg ? ring_fingerprint(rg) : 0;
    r->has |= WIRE_CRESP_TOKENS | WIRE_CRESP_EPOCH | WIRE_CRESP_FPRINT;
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

int node__admin(node *n,
                struct wire_cresp *r,
                struct node_admin_buf *b,
                const struct wire_creq *q)
{
    switch (q->op) {
    case WIRE_COP_STATUS:
        return do_status(n, r, b);
    case WIRE_COP_RING:
        return do_ring(n, r, b);
    case WIRE_COP_ENDPOINTS:
        return do_endpoints(n, r, b, q);
    case WIRE_COP_METRICS: {
        size_t len = 0;
        char *t = node__metrics_text(n, &len);
        if (!t)
            return -ENOMEM;
        if (b->n == (int)(sizeof(b->allocs) / sizeof(b->allocs[0]))) {
            free(t);
            return -ENOMEM;
        }
        b->allocs[b->n++] = t;
        r->text = RK_SLICE(t, len);
        r->has |= WIRE_CRESP_TEXT;
        return 0;
    }
    }
    return RK_EBADREQ;
}

/* ---- Prometheus text -------------------------------------------------- */

struct tb {
    char *p;
    size_t len, cap;
    bool oom;
};

static void tb_printf(struct tb *t, const char *fmt, ...)
    __attribute__((format(printf, 2, 3)));

static void tb_printf(struct tb *t, const char *fmt, ...)
{
    if (t->oom)
        return;
    for (;;) {
        va_list ap;
        va_start(ap, fmt);
        int w = vsnprintf(t->p + t->len, t->cap - t->len, fmt, ap);
        va_end(ap);
        if (w < 0) {
            t->oom = true;
            return;
        }
        if ((size_t)w < t->cap - t->len) {
            t->len += (size_t)w;
            return;
        }
        size_t ncap = t->cap * 2 + (size_t)w;
        char *np = realloc(t->p, ncap);
        if (!np) {
            t->oom = true;
            return;
        }
        t->p = np;
        t->cap = ncap;
    }
}

char *node__metrics_text(node *n, size_t *out_len)
{
    if (n->obs) /* the registry of node/obs.c, when running */
        return node__obs_text(n, out_len);
    struct tb t = {.p = malloc(8192), .cap = 8192};
    if (!t.p)
        return NULL;
    t.p[0] = '\0';
    static const char *ops[] = {"get", "put", "del"};
    const struct node_stats *s = &n->stats;
    tb_printf(&t, "# HELP ringkv_requests_total Coordinator requests by "
                  "operation and consistency level.\n"
                  "# TYPE ringkv_requests_total counter\n");
    for (int o = 0; o < NODE_OP_N; o++)
        for (int c = NODE_CL_ONE; c <= NODE_CL_EACH_QUORUM; c++)
            if (s->req[o][c])
                tb_printf(&t,
                          "ringkv_requests_total{op=\"%s\",cl=\"%s\"} "
                          "%llu\n",
                          ops[o], node_cl_name((enum node_cl)c),
                          (unsigned long long)s->req[o][c]);
    const struct {
        const char *name;
        const uint64_t (*v)[8];
    } errs[] = {{"unavailable", s->unavailable}, {"timeout", s->timeout}};
    for (size_t e = 0; e < 2; e++) {
        tb_printf(&t, "# TYPE ringkv_%s_total counter\n", errs[e].name);
        for (int o = 0; o < NODE_OP_N; o++)
            for (int c = NODE_CL_ONE; c <= NODE_CL_EACH_QUORUM; c++)
                if (errs[e].v[o][c])
                    tb_printf(&t, "ringkv_%s_total{op=\"%s\",cl=\"%s\"} %llu\n",
                              errs[e].name, ops[o],
                              node_cl_name((enum node_cl)c),
                              (unsigned long long)errs[e].v[o][c]);
    }
    const struct {
        const char *name;
        uint64_t v;
    } ctr[] = {
        {"overloaded", s->overloaded},
        {"ring_stale_refusals", s->stale},
        {"read_repairs", s->read_repairs},
        {"hints_stored", s->hints_stored},
        {"hints_replayed", s->hints_replayed},
        {"hints_dropped", s->hints_dropped},
        {"gossip_packets_in", s->gossip_in},
        {"gossip_packets_out", s->gossip_out},
        {"gossip_packets_rejected", s->gossip_bad},
        {"client_connections", s->client_conns},
        {"client_bad_frames", s->client_bad_frames},
        {"client_auth_failures", s->client_auth_fail},
        {"internode_auth_failures", s->internode_auth_fail},
        {"internode_bad_requests", s->internode_bad},
        {"commits", s->commits},
        {"commit_writes", s->commit_writes},
        {"replica_writes", s->replica_writes},
        {"replica_reads", s->replica_reads},
    };
    for (size_t i = 0; i < sizeof(ctr) / sizeof(ctr[0]); i++)
        tb_printf(&t, "# TYPE ringkv_%s_total counter\nringkv_%s_total %llu\n",
                  ctr[i].name, ctr[i].name, (unsigned long long)ctr[i].v);
    if (n->g) {
        struct gossip_stats gs;
        gossip_stats_get(&gs, n->g);
        tb_printf(&t,
                  "# TYPE ringkv_gossip_auth_failures_total counter\n"
                  "ringkv_gossip_auth_failures_total %llu\n"
                  "# TYPE ringkv_gossip_wrong_cluster_total counter\n"
                  "ringkv_gossip_wrong_cluster_total %llu\n"
                  "# TYPE ringkv_gossip_malformed_total counter\n"
                  "ringkv_gossip_malformed_total %llu\n"
                  "# TYPE ringkv_gossip_rounds_total counter\n"
                  "ringkv_gossip_rounds_total %llu\n",
                  (unsigned long long)gs.rx_auth_fail,
                  (unsigned long long)gs.rx_wrong_cluster,
                  (unsigned long long)gs.rx_malformed,
                  (unsigned long long)gs.rounds);
    }
    size_t up = 0, down = 0;
    for (size_t i = 0; i < n->npeers; i++) {
        if (n->peer[i].self)
            continue;
        if (n->peer[i].up)
            up++;
        else
            down++;
    }
    tb_printf(&t,
              "# TYPE ringkv_peers_up gauge\nringkv_peers_up %zu\n"
              "# TYPE ringkv_peers_down gauge\nringkv_peers_down %zu\n"
              "# TYPE ringkv_ring_epoch gauge\nringkv_ring_epoch %llu\n"
              "# TYPE ringkv_ring_fingerprint gauge\n"
              "ringkv_ring_fingerprint{hex=\"%016llx\"} 1\n"
              "# TYPE ringkv_ring_stale gauge\nringkv_ring_stale %d\n"
              "# TYPE ringkv_inflight gauge\nringkv_inflight %lld\n",
              up, down, (unsigned long long)(n->ring ? ring_epoch(n->ring) : 0),
              (unsigned long long)(n->ring ? ring_fingerprint(n->ring) : 0),
              n->ring_stale, (long long)n->coord_inflight);
    if (n->store) {
        uint64_t nr, keys, bytes;
        node__obs_store_totals(n, &nr, &keys, &bytes);
        tb_printf(&t,
                  "# TYPE ringkv_ranges gauge\nringkv_ranges %llu\n"
                  "# TYPE ringkv_keys gauge\nringkv_keys %llu\n"
                  "# TYPE ringkv_disk_bytes gauge\nringkv_disk_bytes %llu\n",
                  (unsigned long long)nr, (unsigned long long)keys,
                  (unsigned long long)bytes);
    }
    if (t.oom) {
        free(t.p);
        return NULL;
    }
    *out_len = t.len;
    return t.p;
}
