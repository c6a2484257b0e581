/*
 * server.c - a TCP listener whose connections deliver frames to the
 * daemon: raw frames (the native client port) or RPC requests (internode),
 * optionally behind the handshake hook -- or, in raw-stream mode, bytes
 * to a protocol handler (the client ports; net.h); either in TLS when
 * given a context (tls.h), the hook then running inside it (internode
 * mutual TLS).
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "net/net_internal.h"
#include "net/tls.h"

struct net_server {
    struct net__base base; /* first: the base callbacks cast back */
    uv_tcp_t listener;
    int port;
    uint32_t hs_timeout_ms;
    bool rpc;
    bool listening; /* the listener is open */
    net_input_cb on_input;
    net_sent_cb on_sent;
    net_accept_cb on_accept;
    net_frame_cb on_frame;
    net_peek_cb on_peek;
    net_conn_close_cb on_close;
    void *arg;
    net_tls_fail_cb on_tls_fail;
    void (*done)(void *arg);
    void *done_arg;
};

static int srv_frame(struct net__base *b, net_conn *c, struct rk_slice frame)
{
    net_server *s = (net_server *)b;
    if (!s->rpc)
        return s->on_frame(s->arg, c, 0, frame);
    uint8_t kind;
    uint64_t id;
    struct rk_slice payload;
    if (net_rpc_parse(&kind, &id, &payload, frame) != 0 ||
        kind != NET_RPC_REQUEST) {
        b->stats.proto_errors++;
        return RK_EPROTO;
    }
    return s->on_frame(s->arg, c, id, payload);
}

/* The requests' payloads up to the first frame on_frame would refuse. */
static void srv_peek(struct net__base *b,
                     net_conn *c,
                     const struct rk_slice *frames,
                     size_t n)
{
    net_server *s = (net_server *)b;
    struct rk_slice pl[NET_PEEK_MAX];
    size_t m = 0;
    uint8_t kind;
    uint64_t id;
    while (m < n && net_rpc_parse(&kind, &id, &pl[m], frames[m]) == 0 &&
           kind == NET_RPC_REQUEST)
        m++;
    if (m > 0)
        s->on_peek(s->arg, c, pl, m);
}

static int srv_input(struct net__base *b, net_conn *c, struct net_input *in)
{
    net_server *s = (net_server *)b;
    return s->on_input(s->arg, c, in);
}

static void srv_sent(struct net__base *b, net_conn *c)
{
    net_server *s = (net_server *)b;
    if (s->on_sent)
        s->on_sent(s->arg, c);
}

static void srv_ready(struct net__base *b, net_conn *c)
{
    net_server *s = (net_server *)b;
    c->announced = true;
    if (s->on_accept)
        s->on_accept(s->arg, c);
}

static void srv_closing(struct net__base *b, net_conn *c, int err)
{
    (void)b;
    (void)c;
    (void)err;
}

static void srv_closed(struct net__base *b, net_conn *c, int err)
{
    net_server *s = (net_server *)b;
    if (c->announced && s->on_close)
        s->on_close(s->arg, c, err);
}

static void srv_tls_fail(struct net__base *b,
                         net_conn *c,
                         enum net_tls_fail reason,
                         const char *why)
{
    net_server *s = (net_server *)b;
    char addr[NET_NAME_MAX];
    if (s->on_tls_fail == NULL)
        return;
    /* a raw conn's name is its address; a framed one's, the name its
     * handshake hook gave (if any) */
    if (s->on_input == NULL && net_conn_peer_addr(c, addr, sizeof(addr)) != 0)
        snprintf(addr, sizeof(addr), "?");
    s->on_tls_fail(s->arg, s->on_input ? c->name : addr, reason, why);
}

static void srv_released(struct net__base *b)
{
    net_server *s = (net_server *)b;
    void (*done)(void *) = s->done;
    void *arg = s->done_arg;
    net_tls_free(b->tls);
    free(b->tls_rd);
    free(s);
    if (done)
        done(arg);
}

static void srv_connection(uv_stream_t *listener, int status)
{
    net_server *s = listener->data;
    int rc;
    if (status < 0 || s->base.closing)
        return;
    net_conn *c = net__conn_new(&s->base, &rc);
    if (c == NULL)
        return; /* the connection stays in the backlog; retried next time */
    rc = uv_accept(listener, (uv_stream_t *)&c->tcp);
    if (rc == 0) {
        s->base.stats.conns_accepted++;
        if (s->on_input && net_conn_peer_addr(c, c->name, sizeof(c->name)) != 0)
            snprintf(c->name, sizeof(c->name), "?");
        if (s->base.tls)
            rc = net__tls_new(&c->tls, s->base.tls, NULL);
        if (s->base.has_hs || s->base.tls)
            net__conn_deadline(c, s->hs_timeout_ms);
        if (rc == 0)
            rc = net__conn_start(c);
    }
    if (rc)
        net__conn_close(c, rc);
}

static void srv_listener_closed(uv_handle_t *h)
{
    net_server *s = h->data;
    net__base_handle_closed(&s->base);
}

int net_server_new(net_server **out,
                   uv_loop_t *loop,
                   const struct net_server_opts *opts)
{
    struct sockaddr_storage ss;
    char hp[128];
    int rc;
    if ((opts->on_frame == NULL && opts->on_input == NULL) ||
        opts->host == NULL || opts->max_frame == 0 ||
        opts->max_frame > UINT32_MAX || opts->max_queued == 0 ||
        (opts->on_input != NULL && (opts->hs != NULL || opts->rpc)))
        return -EINVAL;
    if (strchr(opts->host, ':'))
        rc = snprintf(hp, sizeof(hp), "[%s]:%u", opts->host, 1u);
    else
        rc = snprintf(hp, sizeof(hp), "%s:%u", opts->host, 1u);
    if (rc < 0 || (size_t)rc >= sizeof(hp) || net_addr_parse(&ss, hp) != 0)
        return -EINVAL;
    if (ss.ss_family == AF_INET)
        ((struct sockaddr_in *)&ss)->sin_port = htons(opts->port);
    else
        ((struct sockaddr_in6 *)&ss)->sin6_port = htons(opts->port);

    net_server *s = calloc(1, sizeof(*s));
    if (s == NULL)
        return -ENOMEM;
    struct net__base *b = &s->base;
    b->max_frame = opts->max_frame;
    b->max_queued = opts->max_queued;
    b->pause_on_bp = true;
    b->no_batching = opts->no_batching;
    if (opts->hs) {
        if (opts->hs->make == NULL || opts->hs->check == NULL) {
            free(s);
            return -EINVAL;
        }
        b->has_hs = true;
        b->hs = *opts->hs;
    }
    b->on_frame = srv_frame;
    if (opts->rpc && opts->on_peek)
        b->on_peek = srv_peek;
    if (opts->on_input) {
        b->on_input = srv_input;
        b->on_sent = srv_sent;
        b->input_cap = opts->input_cap ? opts->input_cap : opts->max_frame;
        b->frame_timeout_ms = opts->frame_timeout_ms;
        b->frame_deadline = opts->frame_deadline;
        b->max_requests = opts->max_requests;
        b->budget = opts->budget;
    }
    if (opts->tls) {
        b->tls = net_tls_ref(opts->tls);
        b->on_tls_fail = srv_tls_fail;
    }
    b->on_ready = srv_ready;
    b->on_closing = srv_closing;
    b->on_closed = srv_closed;
    b->on_released = srv_released;
    s->hs_timeout_ms =
        opts->handshake_timeout_ms ? opts->handshake_timeout_ms : 5000;
    b->linger_ms = s->hs_timeout_ms;
    s->rpc = opts->rpc;
    s->on_input = opts->on_input;
    s->on_sent = opts->on_sent;
    s->on_accept = opts->on_accept;
    s->on_frame = opts->on_frame;
    s->on_peek = opts->on_peek;
    s->on_close = opts->on_close;
    s->arg = opts->arg;
    s->on_tls_fail = opts->on_tls_fail;
    net__base_init(b, loop);
    rc = uv_tcp_init(loop, &s->listener);
    if (rc)
        goto close_base;
    s->listener.data = s;
    b->handles_open++;
    s->listening = true;
    rc = uv_tcp_bind(&s->listener, (struct sockaddr *)&ss, 0);
    if (rc == 0)
        rc = uv_listen((uv_stream_t *)&s->listener, 511, srv_connection);
    if (rc == 0) {
        int len = sizeof(ss);
        rc = uv_tcp_getsockname(&s->listener, (struct sockaddr *)&ss, &len);
    }
    if (rc)
        goto close_listener;
    s->port = ntohs(ss.ss_family == AF_INET
                        ? ((struct sockaddr_in *)&ss)->sin_port
                        : ((struct sockaddr_in6 *)&ss)->sin6_port);
    *out = s;
    return 0;
close_listener:
    s->listening = false;
    uv_close((uv_handle_t *)&s->listener, srv_listener_closed);
close_base:
    /* The handles close on the next loop run; s frees itself then. */
    net__base_close(b);
    return rc;
}

int net_server_port(const net_server *s)
{
    return s->port;
}

int net_server_tls_set(net_server *s, struct net_tls *tls)
{
    if (s->base.tls == NULL || tls == NULL)
        return -EINVAL;
    net_tls_ref(tls);
    net_tls_free(s->base.tls);
    s->base.tls = tls;
    return 0;
}

void net_server_close(net_server *s, void (*done)(void *arg), void *arg)
{
    if (s == NULL || s->base.closing)
        return;
    s->done = done;
    s->done_arg = arg;
    if (s->listening) {
        s->listening = false;
        uv_close((uv_handle_t *)&s->listener, srv_listener_closed);
    }
    for (net_conn *c = s->base.conns; c != NULL; c = c->next)
        net__conn_close(c, RK_ECLOSED);
    net__base_close(&s->base);
}

void net_server_drain(net_server *s)
{
    if (s == NULL || s->base.closing || s->on_input == NULL)
        return;
    if (s->listening) {
        s->listening = false;
        uv_close((uv_handle_t *)&s->listener, srv_listener_closed);
    }
    for (net_conn *c = s->base.conns; c != NULL; c = c->next)
        net_conn_finish(c);
}

void net_server_stats(const net_server *s, struct net_stats *out)
{
    *out = s->base.stats;
}
