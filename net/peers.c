/*
 * peers.c - outbound internode RPC: one reused connection per "host:port",
 * opened on demand (names resolved with uv_getaddrinfo), request ids, and
 * per-request deadlines.
 *
 * Pending requests sit in three lists at once: a hash by id (to match a
 * response), the peer's list (to fail them all when its connection dies),
 * and one deadline-ordered list for the whole table with one uv_timer armed
 * at its head. Requests mostly share one timeout, so insertion from the
 * tail is O(1); one given what is left of an older deadline goes in from
 * the head, also near its place. A request leaves all three lists before
 * its callback runs, which is what makes "exactly once" hold whatever the
 * callback does.
 *
 * Each peer also keeps since when it has been silent with a request to
 * answer (net_peers_quiet_ms): any response frame, even one too late to
 * match, ends the silence, and a new connection starts afresh.
 *
 * A peer whose last connection attempt was refused, or whose last
 * connection the other end reset or closed, is unreachable
 * (net_peers_reachable) until a connection to it is ready again: a process
 * that died leaves its port refusing at once, and a coordinator that knows
 * it need not wait for it before gossip says it is DOWN. A connection that
 * timed out (a frozen or cut-off peer) does not make it so.
 *
 * After a connection that never got ready fails, the peer backs off
 * (backoff_min doubling to backoff_max); requests in that window fail fast
 * with RK_EUNAVAILABLE instead of queueing behind a dead address. A
 * connection that was ready and then closed is reopened by the next request.
 *
 * With a TLS context (net_peers_opts.tls) every connection is a TLS
 * client: the handshake hook runs inside TLS once it is done, and the name
 * the hook's check returns must be one the peer's certificate carries.
 *
 * Finished request structs go to a pool (common/pool.h), so a request in
 * the steady state costs no malloc.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/pool.h"
#include "net/net_internal.h"
#include "net/tls.h"

struct req {
    uint64_t id;
    uint64_t deadline;
    net_rpc_cb cb;
    void *arg;
    struct peer *peer;
    struct req *hnext;
    struct req *pprev, *pnext;
    struct req *tprev, *tnext;
};

struct peer {
    char *name;
    struct peer *hnext;
    net_conn *conn;
    uint64_t retry_at;
    uint32_t backoff_ms;
    struct req *reqs;
    /* Loop time since when the peer has had a request to answer without
     * sending anything back: set by the first request after its last
     * response (or its connection's start), 0 when it has answered
     * everything sent. A request timing out does not clear it. */
    uint64_t quiet_since;
    /* The last connect was refused, or the last connection reset or
     * closed by the peer; cleared when a connection is ready. */
    bool refused;
};

/* The peers last looked up, by the address of the name asked with: a
 * coordinator asks again and again with the same few strings (its ring's),
 * and a hit costs a pointer compare and one strcmp instead of strlen, a
 * hash and a bucket's walk. Checked by content, so a string reused for
 * another name is only a miss. */
#define PEER_RECENT 4

struct net_peers {
    struct net__base base; /* first: the base callbacks cast back */
    struct {
        const char *asked;
        struct peer *e;
    } recent[PEER_RECENT];
    unsigned recent_next;
    uv_timer_t timer;
    struct sockaddr_storage bind; /* opts.bind_ip, port 0 */
    bool has_bind;
    uint64_t armed_at; /* deadline the timer is set for; 0 = none */
    struct peer **pb;  /* peer hash buckets */
    size_t npb, npeers;
    struct req **rb; /* request hash buckets */
    size_t nrb, nreqs;
    struct req *thead, *ttail; /* by deadline */
    struct rk_pool rfree;      /* finished requests (linked by hnext) */
    uint64_t next_id;
    uint32_t connect_timeout_ms, backoff_min_ms, backoff_max_ms;
    net_tls_fail_cb on_tls_fail;
    void *arg;
    void (*done)(void *arg);
    void *done_arg;
};

#define CONN_OF(h, field) ((net_conn *)((char *)(h)-offsetof(net_conn, field)))

/* ---- tables ------------------------------------------------------------- */

#define REQ_LINK offsetof(struct req, hnext)

static struct req *req_get(net_peers *p)
{
    struct req *r = rk_pool_get(&p->rfree, REQ_LINK);
    return r ? r : malloc(sizeof(*r));
}

static void req_put(net_peers *p, struct req *r)
{
    if (!rk_pool_put(&p->rfree, r, REQ_LINK))
        free(r);
}

static struct peer *peer_find(net_peers *p, const char *name)
{
    for (unsigned i = 0; i < PEER_RECENT; i++)
        if (p->recent[i].asked == name &&
            strcmp(p->recent[i].e->name, name) == 0)
            return p->recent[i].e;
    size_t h = (size_t)rk_token(name, strlen(name)) & (p->npb - 1);
    for (struct peer *e = p->pb[h]; e; e = e->hnext)
        if (strcmp(e->name, name) == 0) {
            unsigned i = p->recent_next++ % PEER_RECENT;
            p->recent[i].asked = name;
            p->recent[i].e = e;
            return e;
        }
    return NULL;
}

static int peers_grow(net_peers *p)
{
    size_t n = p->npb * 2;
    struct peer **nb = calloc(n, sizeof(*nb));
    if (nb == NULL)
        return -ENOMEM;
    for (size_t i = 0; i < p->npb; i++) {
        struct peer *e = p->pb[i], *next;
        for (; e; e = next) {
            next = e->hnext;
            size_t h = (size_t)rk_token(e->name, strlen(e->name)) & (n - 1);
            e->hnext = nb[h];
            nb[h] = e;
        }
    }
    free(p->pb);
    p->pb = nb;
    p->npb = n;
    return 0;
}

static int peer_get(struct peer **out, net_peers *p, const char *name)
{
    char host[256];
    uint16_t port;
    struct peer *e = peer_find(p, name);
    if (e) {
        *out = e;
        return 0;
    }
    if (net__split_host_port(host, sizeof(host), &port, name) != 0)
        return -EINVAL;
    if (p->npeers >= p->npb && peers_grow(p) != 0)
        return -ENOMEM;
    e = calloc(1, sizeof(*e));
    if (e == NULL)
        return -ENOMEM;
    e->name = strdup(name);
    if (e->name == NULL) {
        free(e);
        return -ENOMEM;
    }
    size_t h = (size_t)rk_token(name, strlen(name)) & (p->npb - 1);
    e->hnext = p->pb[h];
    p->pb[h] = e;
    p->npeers++;
    *out = e;
    return 0;
}

static struct req *req_find(net_peers *p, uint64_t id)
{
    for (struct req *r = p->rb[id & (p->nrb - 1)]; r; r = r->hnext)
        if (r->id == id)
            return r;
    return NULL;
}

static int reqs_grow(net_peers *p)
{
    size_t n = p->nrb * 2;
    struct req **nb = calloc(n, sizeof(*nb));
    if (nb == NULL)
        return -ENOMEM;
    for (size_t i = 0; i < p->nrb; i++) {
        struct req *r = p->rb[i], *next;
        for (; r; r = next) {
            next = r->hnext;
            r->hnext = nb[r->id & (n - 1)];
            nb[r->id & (n - 1)] = r;
        }
    }
    free(p->rb);
    p->rb = nb;
    p->nrb = n;
    return 0;
}

static void timer_arm(net_peers *p);

static void req_link(net_peers *p, struct req *r)
{
    struct req **b = &p->rb[r->id & (p->nrb - 1)];
    r->hnext = *b;
    *b = r;
    p->nreqs++;
    struct peer *e = r->peer;
    r->pprev = NULL;
    r->pnext = e->reqs;
    if (e->reqs)
        e->reqs->pprev = r;
    e->reqs = r;
    /* Deadline list, from the end nearer in deadline: usually no step at
     * all, from the tail for a request with the usual timeout, from the
     * head for one given what is left of an earlier deadline (a read that
     * asks another replica late, coord/coord_read.c). t: the last request
     * due no later than r, NULL if none. */
    struct req *t = p->ttail;
    if (t == NULL || t->deadline <= r->deadline) {
        /* after the tail */
    } else if (r->deadline < p->thead->deadline) {
        t = NULL;
    } else if (r->deadline - p->thead->deadline < t->deadline - r->deadline) {
        t = p->thead;
        while (t->tnext->deadline <= r->deadline)
            t = t->tnext;
    } else {
        while (t->deadline > r->deadline)
            t = t->tprev;
    }
    r->tprev = t;
    r->tnext = t ? t->tnext : p->thead;
    if (r->tnext)
        r->tnext->tprev = r;
    else
        p->ttail = r;
    if (t)
        t->tnext = r;
    else
        p->thead = r;
    timer_arm(p);
}

/* Takes r out of the id hash and the deadline list. */
static void req_unlink_global(net_peers *p, struct req *r)
{
    struct req **b = &p->rb[r->id & (p->nrb - 1)];
    while (*b != r)
        b = &(*b)->hnext;
    *b = r->hnext;
    p->nreqs--;
    if (r->tprev)
        r->tprev->tnext = r->tnext;
    else
        p->thead = r->tnext;
    if (r->tnext)
        r->tnext->tprev = r->tprev;
    else
        p->ttail = r->tprev;
}

static void req_unlink(net_peers *p, struct req *r)
{
    req_unlink_global(p, r);
    struct peer *e = r->peer;
    if (r->pprev)
        r->pprev->pnext = r->pnext;
    else
        e->reqs = r->pnext;
    if (r->pnext)
        r->pnext->pprev = r->pprev;
}

/* Fails every request of e with status; new requests made by the callbacks
 * are not in the detached list and are left alone. */
static void peer_fail_all(net_peers *p, struct peer *e, int status)
{
    struct req *list = e->reqs;
    e->reqs = NULL;
    while (list) {
        struct req *r = list;
        list = r->pnext;
        req_unlink_global(p, r);
        p->base.stats.rpc_failed++;
        r->cb(r->arg, status, (struct rk_slice){NULL, 0});
        req_put(p, r);
    }
    timer_arm(p);
}

/* ---- deadlines ---------------------------------------------------------- */

static void timer_cb(uv_timer_t *t)
{
    net_peers *p = t->data;
    uint64_t now = uv_now(p->base.loop);
    p->armed_at = 0;
    while (p->thead && p->thead->deadline <= now) {
        struct req *r = p->thead;
        req_unlink(p, r);
        p->base.stats.rpc_timeout++;
        r->cb(r->arg, RK_ETIMEOUT, (struct rk_slice){NULL, 0});
        req_put(p, r);
    }
    timer_arm(p);
}

static void timer_arm(net_peers *p)
{
    if (p->base.closing)
        return;
    if (p->thead == NULL) {
        if (p->armed_at) {
            uv_timer_stop(&p->timer);
            p->armed_at = 0;
        }
        return;
    }
    /* Arm only for an earlier deadline; a timer that fires for a request
     * already answered just re-arms (cheaper than re-arming per answer). */
    uint64_t d = p->thead->deadline;
    if (p->armed_at != 0 && p->armed_at <= d)
        return;
    uint64_t now = uv_now(p->base.loop);
    uv_timer_start(&p->timer, timer_cb, d > now ? d - now : 0, 0);
    p->armed_at = d;
}

/* ---- connections -------------------------------------------------------- */

/* err ends a connection because of the other end: refused, reset, or
 * closed by it (0: end of stream, net__conn_close's graceful end). */
static bool closed_by_peer(int err)
{
    return err == 0 || err == -ECONNREFUSED || err == -ECONNRESET ||
           err == -EPIPE;
}

static void connect_cb(uv_connect_t *req, int status)
{
    net_conn *c = CONN_OF(req, connect);
    if (c->state == NET__CLOSING)
        return;
    int rc = status;
    if (rc == 0)
        rc = net__conn_start(c);
    if (rc)
        net__conn_close(c, rc);
}

static int start_connect(net_conn *c, const struct sockaddr *sa)
{
    const net_peers *p = (const net_peers *)c->base;
    c->state = NET__CONNECTING;
    if (p->has_bind && p->bind.ss_family == sa->sa_family) {
        int rc = uv_tcp_bind(&c->tcp, (const struct sockaddr *)&p->bind, 0);
        if (rc)
            return rc;
    }
    return uv_tcp_connect(&c->connect, &c->tcp, sa, connect_cb);
}

/* opts.bind_ip into p->bind: 0, or -EINVAL (not an IP literal). A
 * wildcard (0.0.0.0, ::) binds nothing. */
static int bind_set(net_peers *p, const char *ip)
{
    static const uint8_t any6[16];
    if (ip == NULL || ip[0] == '\0')
        return 0;
    struct sockaddr_in *a4 = (struct sockaddr_in *)&p->bind;
    struct sockaddr_in6 *a6 = (struct sockaddr_in6 *)&p->bind;
    if (uv_ip4_addr(ip, 0, a4) == 0)
        p->has_bind = a4->sin_addr.s_addr != htonl(INADDR_ANY);
    else if (uv_ip6_addr(ip, 0, a6) == 0)
        p->has_bind = memcmp(&a6->sin6_addr, any6, sizeof(any6)) != 0;
    else
        return -EINVAL;
    return 0;
}

static void gai_cb(uv_getaddrinfo_t *req, int status, struct addrinfo *res)
{
    net_conn *c = CONN_OF(req, gai);
    c->gai_busy = false;
    if (c->state == NET__CLOSING) {
        uv_freeaddrinfo(res);
        net__conn_maybe_free(c);
        return;
    }
    int rc = status;
    if (rc == 0 && res == NULL)
        rc = -EINVAL;
    if (rc == 0)
        rc = start_connect(c, res->ai_addr);
    uv_freeaddrinfo(res);
    if (rc)
        net__conn_close(c, rc);
}

static int peer_connect(net_peers *p, struct peer *e)
{
    struct sockaddr_storage ss;
    int rc;
    net_conn *c = net__conn_new(&p->base, &rc);
    if (c == NULL)
        return rc;
    c->outbound = true;
    c->owner = e;
    c->dialed = e->name; /* e outlives its connections */
    e->conn = c;
    net__conn_deadline(c, p->connect_timeout_ms);
    /* the peer's name is checked after the hook's handshake, against the
     * node it proved to be (conn.c), not against the address dialed */
    if (p->base.tls && (rc = net__tls_new(&c->tls, p->base.tls, NULL)) != 0) {
        net__conn_close(c, rc);
        return rc;
    }
    if (net_addr_parse(&ss, e->name) == 0) {
        rc = start_connect(c, (struct sockaddr *)&ss);
    } else {
        char host[256], port[8];
        uint16_t pn;
        struct addrinfo hints;
        net__split_host_port(host, sizeof(host), &pn, e->name);
        snprintf(port, sizeof(port), "%u", (unsigned)pn);
        memset(&hints, 0, sizeof(hints));
        hints.ai_family = AF_UNSPEC;
        hints.ai_socktype = SOCK_STREAM;
        c->state = NET__RESOLVING;
        c->gai_busy = true;
        rc = uv_getaddrinfo(p->base.loop, &c->gai, gai_cb, host, port, &hints);
        if (rc)
            c->gai_busy = false;
    }
    if (rc)
        net__conn_close(c, rc); /* no requests yet: no callback runs */
    return rc;
}

/* A connection to e: 0 if it has one (ready or opening) or one was
 * started now, RK_EUNAVAILABLE while it backs off from e, or the error
 * starting one. */
static int peer_ensure(net_peers *p, struct peer *e, uint64_t now)
{
    if (e->conn != NULL)
        return 0;
    if (now < e->retry_at)
        return RK_EUNAVAILABLE;
    return peer_connect(p, e);
}

/* e answered (or connected): silent again only from its next request
 * not answered, or now if some are still out. */
static void peer_heard(net_peers *p, struct peer *e)
{
    e->quiet_since = e->reqs ? uv_now(p->base.loop) : 0;
}

/* How long e has been silent with a request to answer, at loop time now. */
static uint64_t peer_quiet(const struct peer *e, uint64_t now)
{
    return e->quiet_since && now > e->quiet_since ? now - e->quiet_since : 0;
}

static int peers_frame(struct net__base *b, net_conn *c, struct rk_slice frame)
{
    net_peers *p = (net_peers *)b;
    uint8_t kind;
    uint64_t id;
    struct rk_slice payload;
    if (net_rpc_parse(&kind, &id, &payload, frame) != 0 ||
        kind != NET_RPC_RESPONSE) {
        b->stats.proto_errors++;
        return RK_EPROTO;
    }
    struct peer *e = c->owner; /* a late answer is a sign of life too */
    struct req *r = req_find(p, id);
    if (r == NULL || r->peer->conn != c) {
        peer_heard(p, e);
        b->stats.rpc_unmatched++;
        return 0;
    }
    req_unlink(p, r);
    peer_heard(p, e);
    timer_arm(p);
    b->stats.rpc_ok++;
    r->cb(r->arg, 0, payload);
    req_put(p, r);
    return 0;
}

static void peers_ready(struct net__base *b, net_conn *c)
{
    struct peer *e = c->owner;
    c->announced = true;
    b->stats.conns_opened++;
    e->backoff_ms = 0;
    e->retry_at = 0;
    e->refused = false;
    peer_heard((net_peers *)b, e);
}

static void peers_closing(struct net__base *b, net_conn *c, int err)
{
    net_peers *p = (net_peers *)b;
    struct peer *e = c->owner;
    if (e->conn != c)
        return;
    e->conn = NULL;
    if (!c->announced) {
        b->stats.conns_failed++;
        if (e->backoff_ms == 0)
            e->backoff_ms = p->backoff_min_ms;
        else if (e->backoff_ms < p->backoff_max_ms / 2)
            e->backoff_ms *= 2;
        else
            e->backoff_ms = p->backoff_max_ms;
        e->retry_at = uv_now(b->loop) + e->backoff_ms;
    }
    if (closed_by_peer(err))
        e->refused = true; /* until a connection is ready */
    e->quiet_since = 0;    /* the next connection is judged afresh */
    peer_fail_all(p, e, err ? err : RK_ECLOSED);
}

static void peers_tls_fail(struct net__base *b,
                           net_conn *c,
                           enum net_tls_fail reason,
                           const char *why)
{
    net_peers *p = (net_peers *)b;
    if (p->on_tls_fail)
        p->on_tls_fail(p->arg, c->dialed, reason, why);
}

static void peers_closed(struct net__base *b, net_conn *c, int err)
{
    (void)b;
    (void)c;
    (void)err;
}

static void peers_released(struct net__base *b)
{
    net_peers *p = (net_peers *)b;
    void (*done)(void *) = p->done;
    void *arg = p->done_arg;
    for (size_t i = 0; i < p->npb; i++) {
        struct peer *e = p->pb[i], *next;
        for (; e; e = next) {
            next = e->hnext;
            free(e->name);
            free(e);
        }
    }
    free(p->pb);
    free(p->rb);
    net_tls_free(b->tls);
    free(b->tls_rd);
    for (struct req *r; (r = rk_pool_get(&p->rfree, REQ_LINK)) != NULL;)
        free(r);
    free(p);
    if (done)
        done(arg);
}

static void peers_timer_closed(uv_handle_t *h)
{
    net_peers *p = h->data;
    net__base_handle_closed(&p->base);
}

/* ---- public ------------------------------------------------------------- */

int net_peers_new(net_peers **out,
                  uv_loop_t *loop,
                  const struct net_peers_opts *opts)
{
    if (opts->max_frame <= NET_RPC_HDR || opts->max_frame > UINT32_MAX ||
        opts->max_queued == 0 || opts->connect_timeout_ms == 0)
        return -EINVAL;
    if (opts->hs && (opts->hs->make == NULL || opts->hs->check == NULL))
        return -EINVAL;
    net_peers *p = calloc(1, sizeof(*p));
    if (p == NULL)
        return -ENOMEM;
    if (bind_set(p, opts->bind_ip) != 0) {
        free(p);
        return -EINVAL;
    }
    p->npb = 16;
    p->nrb = 256;
    p->pb = calloc(p->npb, sizeof(*p->pb));
    p->rb = calloc(p->nrb, sizeof(*p->rb));
    if (p->pb == NULL || p->rb == NULL) {
        free(p->pb);
        free(p->rb);
        free(p);
        return -ENOMEM;
    }
    struct net__base *b = &p->base;
    b->max_frame = opts->max_frame;
    b->max_queued = opts->max_queued;
    b->pause_on_bp = false;
    b->no_batching = opts->no_batching;
    if (opts->hs) {
        b->has_hs = true;
        b->hs = *opts->hs;
    }
    if (opts->tls) {
        b->tls = net_tls_ref(opts->tls);
        b->on_tls_fail = peers_tls_fail;
        p->on_tls_fail = opts->on_tls_fail;
        p->arg = opts->arg;
    }
    b->on_frame = peers_frame;
    b->on_ready = peers_ready;
    b->on_closing = peers_closing;
    b->on_closed = peers_closed;
    b->on_released = peers_released;
    p->connect_timeout_ms = opts->connect_timeout_ms;
    b->linger_ms = opts->connect_timeout_ms;
    p->backoff_min_ms = opts->backoff_min_ms ? opts->backoff_min_ms : 1;
    p->backoff_max_ms = opts->backoff_max_ms > p->backoff_min_ms
                            ? opts->backoff_max_ms
                            : p->backoff_min_ms;
    net__base_init(b, loop);
    uv_timer_init(loop, &p->timer);
    p->timer.data = p;
    b->handles_open++;
    *out = p;
    return 0;
}

void net_peers_close(net_peers *p, void (*done)(void *arg), void *arg)
{
    if (p == NULL || p->base.closing)
        return;
    p->done = done;
    p->done_arg = arg;
    p->base.closing = true;
    uv_timer_stop(&p->timer);
    p->armed_at = 0;
    while (p->thead) {
        struct req *r = p->thead;
        req_unlink(p, r);
        p->base.stats.rpc_failed++;
        r->cb(r->arg, RK_ECLOSED, (struct rk_slice){NULL, 0});
        req_put(p, r);
    }
    for (net_conn *c = p->base.conns; c != NULL; c = c->next)
        net__conn_close(c, RK_ECLOSED);
    uv_close((uv_handle_t *)&p->timer, peers_timer_closed);
    net__base_close(&p->base);
}

int net_peers_tls_set(net_peers *p, struct net_tls *tls)
{
    if (p->base.tls == NULL || tls == NULL)
        return -EINVAL;
    net_tls_ref(tls);
    net_tls_free(p->base.tls);
    p->base.tls = tls;
    return 0;
}

int net_peers_request(net_peers *p,
                      const char *host_port,
                      struct rk_slice payload,
                      uint32_t timeout_ms,
                      net_rpc_cb cb,
                      void *arg)
{
    return net_peers_request_unless_quiet(p, host_port, payload, timeout_ms, 0,
                                          cb, arg);
}

int net_peers_request_unless_quiet(net_peers *p,
                                   const char *host_port,
                                   struct rk_slice payload,
                                   uint32_t timeout_ms,
                                   uint32_t max_quiet_ms,
                                   net_rpc_cb cb,
                                   void *arg)
{
    struct peer *e;
    uint8_t hdr[NET_RPC_HDR];
    if (p->base.closing)
        return RK_ECLOSED;
    if (cb == NULL)
        return -EINVAL;
    if (payload.len > p->base.max_frame - NET_RPC_HDR)
        return RK_ETOOLARGE;
    int rc = peer_get(&e, p, host_port);
    if (rc)
        return rc;
    uint64_t now = uv_now(p->base.loop);
    if (max_quiet_ms && peer_quiet(e, now) >= max_quiet_ms)
        return RK_EUNAVAILABLE;
    if ((rc = peer_ensure(p, e, now)) != 0)
        return rc;
    if (p->nreqs >= p->nrb && reqs_grow(p) != 0)
        return -ENOMEM;
    struct req *r = req_get(p);
    if (r == NULL)
        return -ENOMEM;
    r->id = ++p->next_id;
    r->deadline = now + timeout_ms;
    r->cb = cb;
    r->arg = arg;
    r->peer = e;
    hdr[0] = NET_RPC_REQUEST;
    net__be64_put(hdr + 1, r->id);
    rc = net__conn_queue(e->conn, hdr, sizeof(hdr), payload);
    if (rc) {
        req_put(p, r);
        return rc;
    }
    req_link(p, r);
    if (e->quiet_since == 0)
        e->quiet_since = now ? now : 1;
    p->base.stats.rpc_sent++;
    return 0;
}

void net_peers_drop(net_peers *p, const char *host_port)
{
    struct peer *e = peer_find(p, host_port);
    if (e == NULL)
        return;
    if (e->conn)
        net__conn_close(e->conn, RK_ECLOSED);
    e->backoff_ms = 0;
    e->retry_at = 0;
    e->refused = false;
}

enum net_peer_state net_peers_state(net_peers *p, const char *host_port)
{
    struct peer *e = peer_find(p, host_port);
    if (e == NULL)
        return NET_PEER_NONE;
    if (e->conn)
        return e->conn->state == NET__READY ? NET_PEER_READY
                                            : NET_PEER_CONNECTING;
    if (uv_now(p->base.loop) < e->retry_at)
        return NET_PEER_BACKOFF;
    return NET_PEER_NONE;
}

void net_peers_retry(net_peers *p, const char *host_port)
{
    struct peer *e = peer_find(p, host_port);
    if (e == NULL)
        return;
    e->backoff_ms = 0;
    e->retry_at = 0;
    e->refused = false;
}

int net_peers_connect(net_peers *p, const char *host_port)
{
    struct peer *e;
    if (p->base.closing)
        return RK_ECLOSED;
    int rc = peer_get(&e, p, host_port);
    return rc ? rc : peer_ensure(p, e, uv_now(p->base.loop));
}

bool net_peers_reachable(net_peers *p, const char *host_port)
{
    struct peer *e = peer_find(p, host_port);
    if (e == NULL || !e->refused)
        return true;
    /* try again in the background once its backoff allows: ready, it is
     * reachable; refused again, it backs off longer */
    if (!p->base.closing)
        (void)peer_ensure(p, e, uv_now(p->base.loop));
    return false;
}

uint64_t net_peers_quiet_ms(net_peers *p, const char *host_port)
{
    struct peer *e = peer_find(p, host_port);
    return e ? peer_quiet(e, uv_now(p->base.loop)) : 0;
}

size_t net_peers_pending(const net_peers *p)
{
    return p->nreqs;
}

void net_peers_stats(const net_peers *p, struct net_stats *out)
{
    *out = p->base.stats;
}
