/*
 * net_fixture.h - what net/'s loop-driven unit runners share (check_net.c,
 * check_net_rpc.c, check_net_raw_stream.c): a real libuv loop that tests
 * run until a condition holds, with a generous guard against a hang
 * (struct env, RUN_UNTIL, env_sleep, env_finish), FAST_ASSERT for hot
 * loops, a raw TCP test client on 127.0.0.1 that writes bytes or frames
 * and reads, or checks frame by frame, what comes back (struct tcli), and
 * the framed or RPC test server whose behaviour each test sets: echo,
 * hold requests, close, bursts, a look ahead (struct srv). Header-only:
 * each runner is one file.
 */
#ifndef TESTS_UNIT_NET_FIXTURE_H
#define TESTS_UNIT_NET_FIXTURE_H

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <check.h>
#include <uv.h>

#include "common/rk.h"
#include "net/net.h"
#include "net/net_internal.h"
#include "tests/unit/loop_check.h"

/* ---- loop harness ------------------------------------------------------- */

struct env {
    uv_loop_t loop;
    uv_timer_t tick; /* wakes UV_RUN_ONCE so conditions are re-checked */
};

static inline void tick_cb(uv_timer_t *t)
{
    (void)t;
}

static inline void env_init(struct env *e)
{
    ck_assert_int_eq(uv_loop_init(&e->loop), 0);
    uv_timer_init(&e->loop, &e->tick);
    uv_timer_start(&e->tick, tick_cb, 5, 5);
}

#define GUARD_NS (30ull * 1000 * 1000 * 1000)

#define RUN_UNTIL(e, cond)                                                    \
    do {                                                                      \
        uint64_t t0__ = uv_hrtime();                                          \
        while (!(cond)) {                                                     \
            ck_assert_msg(uv_hrtime() - t0__ < GUARD_NS, "stuck waiting: %s", \
                          #cond);                                             \
            uv_run(&(e)->loop, UV_RUN_ONCE);                                  \
        }                                                                     \
    } while (0)

static inline void env_sleep(struct env *e, uint64_t ms)
{
    uint64_t until = uv_hrtime() + ms * 1000000ull;
    RUN_UNTIL(e, uv_hrtime() >= until);
}

static inline void env_finish(struct env *e)
{
    uv_close((uv_handle_t *)&e->tick, NULL);
    uint64_t t0 = uv_hrtime();
    while (uv_run(&e->loop, UV_RUN_NOWAIT) != 0)
        ck_assert_msg(uv_hrtime() - t0 < GUARD_NS, "loop does not drain");
    ck_assert_int_eq(uv_loop_close(&e->loop), 0);
}

/* ck_assert records every passing check through a pipe to the parent
 * process; hot loops use this instead, which costs nothing until it fails
 * (LOOP_CHECK of tests/unit/loop_check.h, by the name these tests use). */
#define FAST_ASSERT(cond, ...) LOOP_CHECK(cond, __VA_ARGS__)

static inline void set_flag(void *arg)
{
    *(bool *)arg = true;
}

/* ---- a raw TCP test client ---------------------------------------------- */

struct tcli {
    uv_tcp_t tcp;
    uv_connect_t creq;
    bool connected, eof, closed;
    int err;
    uint8_t *rx;
    size_t rxlen, rxcap;
    size_t written;
    bool verify;        /* consume frames as they come: body[0] == index */
    size_t frames_seen; /* in verify mode */
    bool bad_frame;
};

static inline void tcli_alloc(uv_handle_t *h, size_t sz, uv_buf_t *buf)
{
    struct tcli *t = h->data;
    (void)sz;
    if (t->rxcap - t->rxlen < 65536) {
        t->rxcap = t->rxcap ? t->rxcap * 2 : 131072;
        t->rx = realloc(t->rx, t->rxcap);
        ck_assert_ptr_nonnull(t->rx);
    }
    *buf =
        uv_buf_init((char *)t->rx + t->rxlen, (unsigned)(t->rxcap - t->rxlen));
}

static inline void tcli_read(uv_stream_t *s, ssize_t n, const uv_buf_t *buf)
{
    struct tcli *t = s->data;
    (void)buf;
    if (n < 0) {
        t->eof = true;
        t->err = (int)n;
        uv_read_stop(s);
        return;
    }
    t->rxlen += (size_t)n;
    if (!t->verify)
        return;
    struct rk_slice f;
    size_t used, off = 0;
    while (net_frame_next(&f, &used, t->rx + off, t->rxlen - off, 1u << 30) ==
           1) {
        if (f.len == 0 || f.p[0] != (uint8_t)t->frames_seen ||
            f.p[f.len - 1] != (uint8_t)t->frames_seen)
            t->bad_frame = true;
        t->frames_seen++;
        off += used;
    }
    memmove(t->rx, t->rx + off, t->rxlen - off);
    t->rxlen -= off;
}

static inline void tcli_connected(uv_connect_t *req, int status)
{
    struct tcli *t = req->handle->data;
    ck_assert_int_eq(status, 0);
    t->connected = true;
}

static inline void
tcli_connect(struct env *e, struct tcli *t, int port, bool read)
{
    struct sockaddr_in a;
    memset(t, 0, sizeof(*t));
    uv_tcp_init(&e->loop, &t->tcp);
    t->tcp.data = t;
    uv_ip4_addr("127.0.0.1", port, &a);
    ck_assert_int_eq(uv_tcp_connect(&t->creq, &t->tcp, (struct sockaddr *)&a,
                                    tcli_connected),
                     0);
    RUN_UNTIL(e, t->connected);
    if (read)
        uv_read_start((uv_stream_t *)&t->tcp, tcli_alloc, tcli_read);
}

struct twrite {
    uv_write_t req;
    struct tcli *t;
    size_t len;
    uint8_t data[];
};

static inline void tcli_wrote(uv_write_t *req, int status)
{
    struct twrite *w = (struct twrite *)req;
    (void)status;
    w->t->written += w->len;
    free(w);
}

static inline void tcli_write(struct tcli *t, const void *p, size_t len)
{
    struct twrite *w = malloc(sizeof(*w) + len);
    ck_assert_ptr_nonnull(w);
    w->t = t;
    w->len = len;
    memcpy(w->data, p, len);
    uv_buf_t b = uv_buf_init((char *)w->data, (unsigned)len);
    ck_assert_int_eq(
        uv_write(&w->req, (uv_stream_t *)&t->tcp, &b, 1, tcli_wrote), 0);
}

static inline void tcli_write_frame(struct tcli *t, const void *p, size_t len)
{
    uint8_t h[4];
    net__be32_put(h, (uint32_t)len);
    tcli_write(t, h, 4);
    if (len)
        tcli_write(t, p, len);
}

static inline void tcli_closed(uv_handle_t *h)
{
    struct tcli *t = h->data;
    t->closed = true;
    free(t->rx);
    t->rx = NULL;
}

static inline void tcli_close(struct env *e, struct tcli *t)
{
    uv_close((uv_handle_t *)&t->tcp, tcli_closed);
    RUN_UNTIL(e, t->closed);
}

/* ---- servers used by the tests ------------------------------------------ */

struct srv {
    net_server *s;
    int accepted, closed, frames;
    int last_close_err;
    net_conn *last;
    /* behaviour */
    bool echo;         /* raw: send the frame back; rpc: reply with it */
    bool hold;         /* rpc: keep requests (with a conn ref) */
    bool close_on_req; /* close the connection on the first request */
    bool quit_after;   /* raw: reply then close gracefully */
    bool pause_on_accept;
    size_t burst;    /* raw: answer with this many 1 MiB frames... */
    int burst_rc[2]; /* ...or a frame of `burst` bytes then 10 bytes */
    bool burst_pair;
    size_t max_seen_queued;
    int send_overloaded;
    char peer_name[NET_NAME_MAX];
    struct held {
        net_conn *c;
        uint64_t id;
        uint8_t *p;
        size_t len;
    } * held;
    size_t nheld, heldcap;
    /* rpc: a look ahead (on_peek) that checks each payload it is shown is
     * that of a frame on_frame has not had yet, in order (their first 8
     * bytes: the request's number times PEEK_MUL) */
    bool peek;
    int peeks;
    size_t peek_max, peek_bad, peek_seen;
};

#define PEEK_MUL 2654435761u

static inline void
srv_peek(void *arg, net_conn *c, const struct rk_slice *pl, size_t n)
{
    struct srv *v = arg;
    (void)c;
    v->peeks++;
    if (n > v->peek_max)
        v->peek_max = n;
    /* the look ahead keeps frames shown before their turn: this window
     * starts at or after the next frame on_frame gets, and runs on in
     * order from there */
    uint64_t first = 0;
    if (n > 0 && pl[0].len >= 8)
        memcpy(&first, pl[0].p, 8);
    first /= PEEK_MUL;
    v->peek_bad += first < (uint64_t)v->frames;
    for (size_t j = 0; j < n; j++) {
        uint64_t tag = 0;
        if (pl[j].len >= 8)
            memcpy(&tag, pl[j].p, 8);
        v->peek_bad += tag != (first + j) * PEEK_MUL;
        v->peek_seen++;
    }
}

static inline void srv_accept(void *arg, net_conn *c)
{
    struct srv *v = arg;
    v->accepted++;
    v->last = c;
    snprintf(v->peer_name, sizeof(v->peer_name), "%s", net_conn_peer_name(c));
    if (v->pause_on_accept)
        net_conn_read_pause(c);
}

static inline int
srv_frame(void *arg, net_conn *c, uint64_t id, struct rk_slice f)
{
    struct srv *v = arg;
    v->frames++;
    if (v->close_on_req) {
        v->close_on_req = false;
        return RK_ECLOSED;
    }
    if (v->hold) {
        if (v->nheld == v->heldcap) {
            v->heldcap = v->heldcap ? v->heldcap * 2 : 64;
            v->held = realloc(v->held, v->heldcap * sizeof(*v->held));
        }
        struct held *h = &v->held[v->nheld++];
        h->c = c;
        h->id = id;
        h->len = f.len;
        h->p = malloc(f.len ? f.len : 1);
        memcpy(h->p, f.p, f.len);
        net_conn_ref(c);
        return 0;
    }
    if (v->burst_pair) {
        uint8_t *big = calloc(1, v->burst);
        v->burst_rc[0] = net_conn_send(c, RK_SLICE(big, v->burst));
        v->burst_rc[1] = net_conn_send(c, RK_SLICE(big, 10));
        free(big);
    } else if (v->burst) {
        uint8_t *big = calloc(1, 1u << 20);
        for (size_t i = 0; i < v->burst; i++)
            ck_assert_int_eq(net_conn_send(c, RK_SLICE(big, 1u << 20)), 0);
        free(big);
    }
    if (v->echo) {
        int rc = id ? net_conn_reply(c, id, f) : net_conn_send(c, f);
        if (rc == RK_EOVERLOADED)
            v->send_overloaded++;
        else
            ck_assert_int_eq(rc, 0);
        if (net_conn_queued(c) > v->max_seen_queued)
            v->max_seen_queued = net_conn_queued(c);
    }
    if (v->quit_after)
        net_conn_close(c, 0);
    return 0;
}

static inline void srv_close(void *arg, net_conn *c, int err)
{
    struct srv *v = arg;
    (void)c;
    v->closed++;
    v->last_close_err = err;
    if (v->last == c)
        v->last = NULL;
}

static inline void srv_release_held(struct srv *v, bool reply)
{
    /* Answer in reverse order: ids, not order, must match responses. */
    for (size_t i = v->nheld; i-- > 0;) {
        struct held *h = &v->held[i];
        if (reply)
            net_conn_reply(h->c, h->id, (struct rk_slice){h->p, h->len});
        net_conn_unref(h->c);
        free(h->p);
    }
    v->nheld = 0;
}

/* As srv_start, on port (0: an ephemeral one). */
static inline void srv_start_on(struct env *e,
                                struct srv *v,
                                bool rpc,
                                const struct net_handshake *hs,
                                size_t max_frame,
                                size_t max_queued,
                                uint16_t port)
{
    struct net_server_opts o = NET_SERVER_OPTS_INIT;
    o.port = port;
    o.rpc = rpc;
    o.hs = hs;
    if (max_frame)
        o.max_frame = max_frame;
    if (max_queued)
        o.max_queued = max_queued;
    o.handshake_timeout_ms = 200;
    o.on_accept = srv_accept;
    o.on_frame = srv_frame;
    o.on_close = srv_close;
    if (v->peek)
        o.on_peek = srv_peek;
    o.arg = v;
    ck_assert_int_eq(net_server_new(&v->s, &e->loop, &o), 0);
    ck_assert_int_gt(net_server_port(v->s), 0);
}

static inline void srv_start(struct env *e,
                             struct srv *v,
                             bool rpc,
                             const struct net_handshake *hs,
                             size_t max_frame,
                             size_t max_queued)
{
    srv_start_on(e, v, rpc, hs, max_frame, max_queued, 0);
}

static inline void srv_stop(struct env *e, struct srv *v)
{
    bool done = false;
    srv_release_held(v, false);
    free(v->held);
    v->held = NULL;
    net_server_close(v->s, set_flag, &done);
    RUN_UNTIL(e, done);
}

#endif
