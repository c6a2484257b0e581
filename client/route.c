/*
 * route.c - libringkv's token-aware routing (opts.token_aware): the ring
 * learned from a node, kept current, and the choice of the connection
 * each request goes on.
 *
 * The ring comes from a RING answer: its placed tokens, a row per placed
 * node (name, client address, dc, rack) and the answering node's
 * replication. ringkv__ring_build turns it into a ring/ snapshot, the
 * same code the nodes place replicas with, and checks it against the
 * answer's fingerprint: a client that computed another placement than
 * the node would send every request to the wrong place, so it then uses
 * no ring at all.
 *
 * Every answer carries the epoch of the ring its node has applied. One
 * newer than the client's makes the ring stale: the next request asks
 * that node for RING again (in the background when pipelining, before
 * the request in a synchronous call), and until the answer arrives the
 * requests go to the handle's own connection, as without a ring.
 *
 * A keyed request (GET, PUT, DEL; an MGET by its first key) goes to a
 * replica of its key: the handle's own node when it is one, else the
 * first replica in preference order that can be reached, on a connection
 * opened when first needed (one per node) that says HELLO and must be
 * answered by the node the ring names. A node that cannot be reached, or
 * answers as another, is skipped for a second, doubling to 30 s while it
 * keeps failing; with no replica reachable the request goes to the
 * handle's own connection, which fails over along the host list.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "client/ringkv_internal.h"
#include "common/rk.h"

#define ROUTE_RETRY_MS      200   /* between two RING requests */
#define ROUTE_FAIL_RETRY_MS 1000  /* after one that failed */
#define ROUTE_DOWN_MS       1000  /* a node that failed: its first pause */
#define ROUTE_DOWN_MAX_MS   30000 /* the longest */
#define ROUTE_MAX_DCS       RING_MAX_REPLICAS

struct ringkv__route {
    ring *r;          /* NULL: none usable (none yet, or not one) */
    char **addrs;     /* by ring node index, "" unknown */
    ringkv **by_node; /* by ring node index: its handle, NULL: none yet */
    size_t nnodes;
    bool have; /* a RING answer was applied: the one of `epoch` */
    uint64_t epoch;
    uint64_t seen;   /* the newest epoch an answer carried */
    ringkv *seen_on; /* the connection it came on */
    uint64_t req_id; /* the RING request in flight, 0: none */
    ringkv *req_on;
    int64_t next_ms; /* no RING request before */
    ringkv **conns;  /* every node handle */
    size_t nconns, capconns;
    struct ringkv_route_stats st;
};

/* ---- the ring of a RING answer ----------------------------------------- */

static int slice_cmp(struct rk_slice a, struct rk_slice b)
{
    size_t n = a.len < b.len ? a.len : b.len;
    int c = n ? memcmp(a.p, b.p, n) : 0;
    return c ? c : (a.len > b.len) - (a.len < b.len);
}

/* A NUL-terminated copy of s, or NULL (no memory, or a NUL inside). */
static char *slice_dup(struct rk_slice s)
{
    if (s.len && memchr(s.p, '\0', s.len))
        return NULL;
    char *p = malloc(s.len + 1);
    if (p) {
        if (s.len)
            memcpy(p, s.p, s.len);
        p[s.len] = '\0';
    }
    return p;
}

/* "*:3" (SimpleStrategy) or "dc1:3,dc2:2" into repl, its DC names
 * pointing into buf (a writable copy of the text). 0 or -1. */
static int
repl_parse(struct ring_replication *repl, struct ring_dc_rf *dcs, char *buf)
{
    size_t n = 0;
    memset(repl, 0, sizeof(*repl));
    for (char *p = buf; *p;) {
        char *end = strchr(p, ',');
        if (end)
            *end = '\0';
        char *colon = strrchr(p, ':');
        if (!colon || colon == p || n == ROUTE_MAX_DCS)
            return -1;
        *colon = '\0';
        char *e;
        unsigned long rf = strtoul(colon + 1, &e, 10);
        if (e == colon + 1 || *e || rf == 0 || rf > RING_MAX_REPLICAS)
            return -1;
        dcs[n].dc = p;
        dcs[n].rf = (unsigned)rf;
        n++;
        if (!end)
            break;
        p = end + 1;
    }
    if (n == 0)
        return -1;
    if (n == 1 && strcmp(dcs[0].dc, "*") == 0) {
        repl->strategy = RING_SIMPLE;
        repl->rf = dcs[0].rf;
    } else {
        repl->strategy = RING_NTS;
        repl->dcs = dcs;
        repl->ndcs = n;
    }
    return 0;
}

struct row_ref {
    struct rk_slice name;
    size_t row;
};

static int row_ref_cmp(const void *a, const void *b)
{
    return slice_cmp(((const struct row_ref *)a)->name,
                     ((const struct row_ref *)b)->name);
}

void ringkv__addrs_free(char **addrs, size_t n)
{
    for (size_t i = 0; addrs && i < n; i++)
        free(addrs[i]);
    free(addrs);
}

int ringkv__ring_build(ring **out,
                       char ***out_addrs,
                       const struct wire_cresp *r,
                       const char **why)
{
    *out = NULL;
    *out_addrs = NULL;
    *why = NULL;
    size_t n = r->nnodes, nt = r->ntokens;
    if (!(r->has & WIRE_CRESP_NODES) || !(r->has & WIRE_CRESP_NODE) ||
        !(r->has & WIRE_CRESP_TOKENS) || n == 0) {
        *why = "its RING answer has no node rows (an older server)";
        return RK_ENOTSUP;
    }
    if (n > RING_MAX_NODES) {
        *why = "too many nodes";
        return RK_EPROTO;
    }
    const struct wire_cnode *self = NULL;
    for (size_t i = 0; i < n && !self; i++)
        if (slice_cmp(r->nodes[i].name, r->node) == 0)
            self = &r->nodes[i];
    if (!self || self->repl.len == 0) {
        *why = "its RING answer does not say its replication";
        return RK_ENOTSUP;
    }
    int rc = -ENOMEM;
    struct row_ref *refs = calloc(n, sizeof(*refs));
    size_t *cnt = calloc(n + 1, sizeof(*cnt)); /* tokens, then offsets */
    uint64_t *toks = calloc(nt ? nt : 1, sizeof(*toks));
    struct ring_member *m = calloc(n, sizeof(*m));
    char **strs = calloc(3 * n, sizeof(*strs));
    char *rbuf = slice_dup(self->repl);
    char **addrs = calloc(n, sizeof(*addrs));
    ring *rg = NULL;
    if (!refs || !cnt || !toks || !m || !strs || !rbuf || !addrs)
        goto done;
    for (size_t i = 0; i < n; i++)
        refs[i] = (struct row_ref){r->nodes[i].name, i};
    qsort(refs, n, sizeof(*refs), row_ref_cmp);
    /* tokens by owner: count, offsets, then place */
    size_t *owner = malloc((nt ? nt : 1) * sizeof(*owner));
    if (!owner)
        goto done;
    rc = RK_EPROTO;
    for (size_t i = 0; i < nt; i++) {
        struct row_ref key = {r->tokens[i].node, 0};
        struct row_ref *f = bsearch(&key, refs, n, sizeof(*refs), row_ref_cmp);
        if (!f) {
            *why = "a token of a node without a row";
            free(owner);
            goto done;
        }
        owner[i] = f->row;
        cnt[f->row]++;
    }
    size_t *off = calloc(n + 1, sizeof(*off));
    if (!off) {
        rc = -ENOMEM;
        free(owner);
        goto done;
    }
    for (size_t i = 0; i < n; i++)
        off[i + 1] = off[i] + cnt[i];
    memset(cnt, 0, (n + 1) * sizeof(*cnt));
    for (size_t i = 0; i < nt; i++)
        toks[off[owner[i]] + cnt[owner[i]]++] = r->tokens[i].token;
    free(owner);
    for (size_t i = 0; i < n; i++) {
        const struct wire_cnode *row = &r->nodes[i];
        strs[3 * i] = slice_dup(row->name);
        strs[3 * i + 1] = slice_dup(row->dc);
        strs[3 * i + 2] = slice_dup(row->rack);
        if (!strs[3 * i] || !strs[3 * i + 1] || !strs[3 * i + 2]) {
            *why = "a name with a NUL, or no memory";
            free(off);
            goto done;
        }
        m[i] = (struct ring_member){.name = strs[3 * i],
                                    .dc = strs[3 * i + 1],
                                    .rack = strs[3 * i + 2],
                                    .tokens = toks + off[i],
                                    .ntokens = cnt[i],
                                    .state = RING_NORMAL};
    }
    free(off);
    struct ring_dc_rf dcs[ROUTE_MAX_DCS];
    struct ring_config cfg = {.members = m, .nmembers = n, .epoch = r->epoch};
    if (repl_parse(&cfg.repl, dcs, rbuf) != 0) {
        *why = "its replication cannot be read";
        goto done;
    }
    int e = ring_new(&rg, &cfg);
    if (e != 0) {
        rc = e == -ENOMEM ? -ENOMEM : RK_EPROTO;
        *why = "the ring it describes cannot be built";
        goto done;
    }
    if (ring_fingerprint(rg) != r->fprint) {
        *why = "the ring it describes has another fingerprint than it says";
        goto done;
    }
    /* addresses by ring index (ring/ numbers nodes by name) */
    rc = -ENOMEM;
    for (size_t i = 0; i < n; i++) {
        struct ring_node_info ni;
        if (ring_node_get(rg, &ni, (uint32_t)i) != 0) {
            rc = RK_EPROTO;
            goto done;
        }
        struct row_ref key = {RK_SLICE(ni.name, strlen(ni.name)), 0};
        struct row_ref *f = bsearch(&key, refs, n, sizeof(*refs), row_ref_cmp);
        addrs[i] = f ? slice_dup(r->nodes[f->row].addr) : strdup("");
        if (!addrs[i])
            goto done;
    }
    *out = rg;
    *out_addrs = addrs;
    rg = NULL;
    addrs = NULL;
    rc = 0;
done:
    if (rc == -ENOMEM && !*why)
        *why = "out of memory";
    ring_free(rg);
    ringkv__addrs_free(addrs, n);
    for (size_t i = 0; strs && i < 3 * n; i++)
        free(strs[i]);
    free(strs);
    free(rbuf);
    free(m);
    free(toks);
    free(cnt);
    free(refs);
    return rc;
}

/* ---- the route -------------------------------------------------------- */

int ringkv__route_new(ringkv *c)
{
    c->rt = calloc(1, sizeof(*c->rt));
    return c->rt ? 0 : -ENOMEM;
}

void ringkv__route_free(struct ringkv__route *rt)
{
    if (!rt)
        return;
    for (size_t i = 0; i < rt->nconns; i++)
        ringkv_free(rt->conns[i]);
    free(rt->conns);
    free(rt->by_node);
    ringkv__addrs_free(rt->addrs, rt->nnodes);
    ring_free(rt->r);
    free(rt);
}

size_t ringkv__route_count(const ringkv *c)
{
    return c->rt ? c->rt->nconns : 0;
}

ringkv *ringkv__route_at(const ringkv *c, size_t i)
{
    return c->rt && i < c->rt->nconns ? c->rt->conns[i] : NULL;
}

void ringkv__route_close(ringkv *c)
{
    for (size_t i = 0; c->rt && i < c->rt->nconns; i++)
        ringkv__drop(c->rt->conns[i]);
}

void ringkv__route_lost(ringkv *h)
{
    ringkv *c = h->owner ? h->owner : h;
    struct ringkv__route *rt = c->rt;
    if (rt && rt->req_id && rt->req_on == h) {
        rt->req_id = 0;
        rt->req_on = NULL;
        rt->next_ms = ringkv__now_ms() + ROUTE_FAIL_RETRY_MS;
    }
    if (rt && rt->seen_on == h)
        rt->seen_on = NULL;
}

void ringkv__route_avoid(ringkv *h)
{
    unsigned shift = h->fails < 5 ? h->fails : 5;
    int64_t pause = (int64_t)ROUTE_DOWN_MS << shift;
    h->fails++;
    h->down_ms = ringkv__now_ms() +
                 (pause < ROUTE_DOWN_MAX_MS ? pause : ROUTE_DOWN_MAX_MS);
}

/* "host:port" of a node handle, as the ring's addresses are written. */
static bool handle_at(const ringkv *h, const char *addr)
{
    char a[320];
    bool v6 = strchr(h->hosts[0].name, ':') != NULL;
    snprintf(a, sizeof(a), v6 ? "[%s]:%s" : "%s:%s", h->hosts[0].name,
             h->hosts[0].port);
    return strcmp(a, addr) == 0;
}

/* Install a newly built ring: node handles follow their node by name and
 * address; those of nodes gone are freed once nothing waits on them. */
static void install(struct ringkv__route *rt, ring *rg, char **addrs)
{
    size_t nn = ring_node_count(rg);
    ringkv **by = calloc(nn ? nn : 1, sizeof(*by));
    if (!by) { /* keep the old ring: it is only stale */
        ring_free(rg);
        ringkv__addrs_free(addrs, nn);
        return;
    }
    for (size_t k = 0; k < rt->nconns; k++)
        rt->conns[k]->mapped = false;
    for (size_t i = 0; i < nn; i++) {
        struct ring_node_info ni;
        ring_node_get(rg, &ni, (uint32_t)i);
        for (size_t k = 0; k < rt->nconns; k++) {
            ringkv *h = rt->conns[k];
            if (!h->mapped && strcmp(h->node, ni.name) == 0 &&
                handle_at(h, addrs[i])) {
                h->mapped = true;
                by[i] = h;
                break;
            }
        }
    }
    for (size_t k = 0; k < rt->nconns;) {
        ringkv *h = rt->conns[k];
        if (!h->mapped && h->pending == 0 && rt->req_on != h) {
            if (rt->seen_on == h)
                rt->seen_on = NULL;
            ringkv_free(h);
            rt->conns[k] = rt->conns[--rt->nconns];
        } else {
            k++;
        }
    }
    free(rt->by_node);
    ringkv__addrs_free(rt->addrs, rt->nnodes);
    ring_free(rt->r);
    rt->r = rg;
    rt->addrs = addrs;
    rt->by_node = by;
    rt->nnodes = nn;
}

/* The RING answer on h (c's own connection or a node handle). */
static void apply(ringkv *c, ringkv *h, const struct wire_cresp *resp)
{
    struct ringkv__route *rt = c->rt;
    int64_t now = ringkv__now_ms();
    if (resp->err != 0) {
        rt->next_ms = now + ROUTE_FAIL_RETRY_MS;
        return;
    }
    if ((resp->has & WIRE_CRESP_NODE) && resp->node.len < RINGKV__NAME_MAX &&
        !h->owner) {
        memcpy(h->node, resp->node.p, resp->node.len);
        h->node[resp->node.len] = '\0';
        if (h->used_any)
            memcpy(h->hosts[h->cur].node, h->node, sizeof(h->node));
    }
    ring *rg = NULL;
    char **addrs = NULL;
    const char *why = NULL;
    int rc = ringkv__ring_build(&rg, &addrs, resp, &why);
    rt->have = true;
    rt->epoch = resp->epoch;
    if (rt->seen < rt->epoch)
        rt->seen = rt->epoch;
    /* at once for a newer epoch; not again and again for one this
     * node has not applied yet */
    rt->next_ms = rt->seen > rt->epoch ? now + ROUTE_RETRY_MS : 0;
    rt->st.refreshes++;
    if (rc == 0) {
        install(rt, rg, addrs);
        return;
    }
    /* no usable ring at this epoch: every request goes to c's own
     * connection until a newer epoch is seen */
    free(rt->by_node);
    ringkv__addrs_free(rt->addrs, rt->nnodes);
    ring_free(rt->r);
    rt->r = NULL;
    rt->addrs = NULL;
    rt->by_node = NULL;
    rt->nnodes = 0;
}

bool ringkv__route_answer(ringkv *h, struct wire_cresp *resp)
{
    ringkv *c = h->owner ? h->owner : h;
    struct ringkv__route *rt = c->rt;
    if (!rt)
        return false;
    if ((resp->has & WIRE_CRESP_EPOCH) && resp->epoch > rt->seen) {
        rt->seen = resp->epoch;
        rt->seen_on = h;
    }
    if (rt->req_id == 0 || resp->id != rt->req_id || rt->req_on != h)
        return false;
    rt->req_id = 0;
    rt->req_on = NULL;
    h->internal = 0;
    apply(c, h, resp);
    return true;
}

/* The key a request is placed by, or false. */
static bool routed_key(struct rk_slice *out, const struct wire_creq *req)
{
    switch (req->op) {
    case WIRE_COP_GET:
    case WIRE_COP_PUT:
    case WIRE_COP_DEL:
        *out = req->key;
        return (req->has & WIRE_CREQ_KEY) != 0;
    case WIRE_COP_MGET:
        if (!(req->has & WIRE_CREQ_KEYS) || req->nkeys == 0)
            return false;
        *out = req->keys[0];
        return true;
    default:
        return false;
    }
}

int ringkv__route_refresh(ringkv *c, const struct wire_creq *req, bool wait)
{
    struct ringkv__route *rt = c->rt;
    struct rk_slice key;
    if (!rt || !routed_key(&key, req))
        return 0;
    int64_t now = ringkv__now_ms();
    bool stale = !rt->have || rt->seen > rt->epoch;
    if (!stale || (rt->req_id == 0 && now < rt->next_ms))
        return 0;
    ringkv *h = rt->req_on;
    uint64_t id = rt->req_id;
    if (id == 0) {
        h = rt->seen_on && rt->seen_on->fd >= 0 && rt->seen > rt->epoch
                ? rt->seen_on
                : c;
        rt->next_ms = now + ROUTE_FAIL_RETRY_MS;
        int rc;
        if (h->fd < 0 && (rc = ringkv_connect(h)) != 0)
            return rc; /* the request could not go either */
        struct wire_creq q = {.op = WIRE_COP_RING};
        if (ringkv__queue(c, h, &id, &q) != 0)
            return 0;
        h->internal = 1;
        rt->req_id = id;
        rt->req_on = h;
    }
    if (!wait)
        return 0; /* written by the next flush, answered in ringkv_recv */
    int64_t deadline = now + c->opts.timeout_ms;
    while (rt->req_id == id && h->fd >= 0) {
        struct wire_cresp tmp;
        memset(&tmp, 0, sizeof(tmp));
        int rc = ringkv__recv_until(h, &tmp, deadline, true);
        if (rc == RINGKV__INTERNAL)
            break;
        if (rc == 0) { /* nothing else is outstanding in a call */
            wire_cresp_clear(&tmp);
            continue;
        }
        if (rc == RK_ETIMEOUT)
            ringkv__drop(h); /* a late answer must not be taken for one */
        break;
    }
    if (rt->req_id == id) { /* lost */
        rt->req_id = 0;
        rt->req_on = NULL;
        h->internal = 0;
    }
    if (h == c)
        c->err[0] = '\0'; /* the caller's request says what happened */
    return 0;
}

/* A handle for ring node idx, as c's options say, with HELLO (so that it
 * proves which node it reached). NULL: no memory or a bad address. */
static ringkv *node_handle(ringkv *c, uint32_t idx)
{
    struct ringkv__route *rt = c->rt;
    struct ring_node_info ni;
    if (ring_node_get(rt->r, &ni, idx) != 0 ||
        strlen(ni.name) >= RINGKV__NAME_MAX)
        return NULL;
    if (rt->nconns == rt->capconns) {
        size_t cap = rt->capconns ? 2 * rt->capconns : 4;
        ringkv **p = realloc(rt->conns, cap * sizeof(*p));
        if (!p)
            return NULL;
        rt->conns = p;
        rt->capconns = cap;
    }
    struct ringkv_opts o = c->opts;
    o.hosts = rt->addrs[idx];
    o.hello = 1;
    o.retries = 0;
    o.spread = RINGKV_SPREAD_NONE;
    o.token_aware = 0;
    ringkv *h = NULL;
    if (ringkv_new(&h, &o, NULL) != 0)
        return NULL;
    h->owner = c;
    h->mapped = true;
    snprintf(h->node, sizeof(h->node), "%s", ni.name);
    rt->conns[rt->nconns++] = h;
    rt->by_node[idx] = h;
    return h;
}

ringkv *ringkv__route_pick(ringkv *c, const struct wire_creq *req)
{
    struct ringkv__route *rt = c->rt;
    struct rk_slice key;
    if (!rt || !routed_key(&key, req))
        return c;
    if (!rt->r || !rt->have || rt->seen > rt->epoch ||
        ring_token_count(rt->r) == 0) {
        rt->st.fallback++;
        return c;
    }
    uint32_t reps[RING_MAX_REPLICAS];
    size_t n =
        ring_replicas(rt->r, rk_token(key.p, key.len), reps, RING_MAX_REPLICAS);
    if (n > RING_MAX_REPLICAS)
        n = RING_MAX_REPLICAS;
    uint32_t home =
        c->node[0] && c->fd >= 0 ? ring_node_find(rt->r, c->node) : RING_NONE;
    for (size_t i = 0; i < n; i++) {
        if (reps[i] == home) {
            rt->st.to_replica++;
            return c;
        }
    }
    int64_t now = ringkv__now_ms();
    for (size_t i = 0; i < n; i++) {
        ringkv *h = rt->by_node[reps[i]];
        if (!h && rt->addrs[reps[i]][0])
            h = node_handle(c, reps[i]);
        if (!h || now < h->down_ms)
            continue;
        if (h->fd < 0 && ringkv_connect(h) != 0) {
            ringkv__route_avoid(h);
            continue;
        }
        h->fails = 0;
        rt->st.to_replica++;
        return h;
    }
    rt->st.fallback++;
    return c;
}

void ringkv_route_stats(const ringkv *c, struct ringkv_route_stats *out)
{
    memset(out, 0, sizeof(*out));
    if (!c->rt)
        return;
    const struct ringkv__route *rt = c->rt;
    *out = rt->st;
    out->epoch = rt->have ? rt->epoch : 0;
    for (size_t i = 0; rt->r && i < rt->nnodes; i++) {
        struct ring_node_info ni;
        if (ring_node_get(rt->r, &ni, (uint32_t)i) == 0 && ni.ntokens > 0)
            out->nodes++;
    }
    out->connections = c->fd >= 0;
    for (size_t i = 0; i < rt->nconns; i++)
        out->connections += rt->conns[i]->fd >= 0;
}
