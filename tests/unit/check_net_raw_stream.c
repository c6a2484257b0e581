/*
 * check_net_raw_stream.c - the raw-stream engine of net/'s client servers
 * (on_input in place of frames: the client protocols' engine) on real
 * libuv loops over 127.0.0.1 ephemeral ports, in the test process:
 * partial requests handed over whole, pipelined bursts, a buffer that
 * grows only with what arrives, back-pressure and max_requests that pause
 * reading and resume, drain and half-close, the input budget, the frame
 * timeout and frame_deadline, and the input cap. Apart from check_net.c
 * (the connection engine, framing, UDP); what they share is
 * tests/unit/net_fixture.h. Every test closes every handle and runs its
 * loop to completion, so ASan's leak check covers net/'s lifetimes too.
 *
 * A test that hangs fails after a generous guard (a liveness check, not a
 * timing threshold).
 */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include <check.h>
#include <uv.h>

#include "common/rk.h"
#include "net/net.h"
#include "net/net_internal.h"

/* ---- loop harness, test client, servers: tests/unit/net_fixture.h ------ */

#include "tests/unit/net_fixture.h"

/* ---- raw-stream servers (the client protocols' engine) ----------------- */

/* A test protocol on the raw-stream engine: a request is a 4-byte length
 * and a body whose first byte is its tag; the handler answers with a
 * frame of reply_size bytes (or the body) filled with the tag, at once or,
 * holding them, later (raw_answer_held). */
struct raw {
    net_server *s;
    net_budget *budget;
    net_conn *last;
    int accepted, closed, requests, inputs, eofs;
    int last_err;
    bool hold;          /* keep requests in flight, answer later */
    bool never_consume; /* consume nothing */
    size_t reply_size;  /* 0: echo the body */
    size_t max_len_seen;
    struct {
        net_conn *c;
        uint8_t tag;
    } held[64];
    size_t nheld;
};

static void raw_reply(struct raw *r, net_conn *c, uint8_t tag, size_t len)
{
    uint8_t h[4];
    uint8_t *body = malloc(len ? len : 1);
    ck_assert_ptr_nonnull(body);
    memset(body, tag, len);
    net__be32_put(h, (uint32_t)len);
    ck_assert_int_eq(net_conn_write(c, h, 4), 0);
    ck_assert_int_eq(net_conn_write(c, body, len), 0);
    free(body);
    (void)r;
}

static int raw_input(void *arg, net_conn *c, struct net_input *in)
{
    struct raw *r = arg;
    size_t off = 0;
    r->inputs++;
    r->eofs += in->eof;
    if (in->len > r->max_len_seen)
        r->max_len_seen = in->len;
    if (r->never_consume)
        return 0;
    while (in->len - off >= 4) {
        const uint8_t *p = in->p + off;
        size_t n =
            (size_t)p[0] << 24 | (size_t)p[1] << 16 | (size_t)p[2] << 8 | p[3];
        if (4 + n > in->len - off) {
            in->need = 4 + n;
            break;
        }
        uint8_t tag = n ? p[4] : 0;
        r->requests++;
        if (r->hold) {
            ck_assert_uint_lt(r->nheld, 64);
            net_conn_request_begin(c);
            net_conn_ref(c);
            r->held[r->nheld].c = c;
            r->held[r->nheld].tag = tag;
            r->nheld++;
        } else {
            raw_reply(r, c, tag, r->reply_size ? r->reply_size : n);
        }
        off += 4 + n;
    }
    in->consumed = off;
    return 0;
}

static void raw_answer_held(struct raw *r)
{
    for (size_t i = 0; i < r->nheld; i++) {
        net_conn *c = r->held[i].c;
        if (net_conn_is_open(c))
            raw_reply(r, c, r->held[i].tag, 16);
        net_conn_request_end(c);
        net_conn_unref(c);
    }
    r->nheld = 0;
}

static void raw_accept(void *arg, net_conn *c)
{
    struct raw *r = arg;
    r->accepted++;
    r->last = c;
}

static void raw_close(void *arg, net_conn *c, int err)
{
    struct raw *r = arg;
    r->closed++;
    r->last_err = err;
    if (r->last == c)
        r->last = NULL;
}

static void raw_start(struct env *e, struct raw *r, struct net_server_opts *o)
{
    o->on_input = raw_input;
    o->on_accept = raw_accept;
    o->on_close = raw_close;
    o->arg = r;
    ck_assert_int_eq(net_server_new(&r->s, &e->loop, o), 0);
}

static void raw_stop(struct env *e, struct raw *r)
{
    bool done = false;
    raw_answer_held(r);
    net_server_close(r->s, set_flag, &done);
    RUN_UNTIL(e, done);
    net_budget_free(r->budget);
}

/* A request that arrives a byte at a time is handed over whole, once; a
 * pipelined burst is answered in order; a request announced large makes
 * the buffer grow only with what arrives (never past twice it). */
START_TEST(raw_partial_requests)
{
    struct env e;
    struct raw r = {0};
    struct tcli t;
    struct net_server_opts o = NET_SERVER_OPTS_INIT;
    env_init(&e);
    ck_assert_int_eq(net_budget_new(&r.budget, 64u << 20), 0);
    o.budget = r.budget;
    raw_start(&e, &r, &o);
    tcli_connect(&e, &t, net_server_port(r.s), true);
    t.verify = true;
    uint8_t req[4 + 100];
    net__be32_put(req, 100);
    memset(req + 4, 0, 100);
    for (size_t i = 0; i < sizeof(req); i++) {
        tcli_write(&t, req + i, 1);
        RUN_UNTIL(&e, t.written == i + 1);
        env_sleep(&e, i % 16 == 0 ? 2 : 0);
    }
    RUN_UNTIL(&e, t.frames_seen == 1);
    ck_assert_int_eq(r.requests, 1);
    /* a pipelined burst of 50 in one write */
    uint8_t burst[50 * 9];
    for (int i = 0; i < 50; i++) {
        net__be32_put(burst + 9 * i, 5);
        memset(burst + 9 * i + 4, i + 1, 5);
    }
    tcli_write(&t, burst, sizeof(burst));
    RUN_UNTIL(&e, t.frames_seen == 51);
    ck_assert(!t.bad_frame);
    /* 32 MiB announced, 100 KiB sent: the buffer holds about that */
    static uint8_t part[4 + 100 * 1024];
    net__be32_put(part, 32u << 20);
    memset(part + 4, 51, sizeof(part) - 4);
    tcli_write(&t, part, sizeof(part));
    RUN_UNTIL(&e, r.max_len_seen == sizeof(part));
    ck_assert_uint_le(net_budget_used(r.budget), 2 * sizeof(part));
    ck_assert_int_eq(r.requests, 51);
    tcli_close(&e, &t);
    RUN_UNTIL(&e, r.closed == 1);
    ck_assert_uint_eq(net_budget_used(r.budget), 0);
    raw_stop(&e, &r);
    env_finish(&e);
}
END_TEST

/* A client that sends without reading: past half of max_queued of replies
 * the connection stops reading (and the handler is not called); once the
 * client reads, every reply comes, in order. With max_requests in flight
 * it stops reading too, and resumes when one is answered. */
START_TEST(raw_backpressure_pause_resume)
{
    struct env e;
    struct raw r = {0};
    struct tcli t;
    struct net_stats st;
    struct net_server_opts o = NET_SERVER_OPTS_INIT;
    env_init(&e);
    o.max_queued = 1u << 20;
    r.reply_size = 64 * 1024;
    raw_start(&e, &r, &o);
    tcli_connect(&e, &t, net_server_port(r.s), false);
    uint8_t req[5] = {0, 0, 0, 1, 0};
    int sent = 0;
    do {
        FAST_ASSERT(sent < 100000, "no pause after %d requests", sent);
        for (int i = 0; i < 64; i++, sent++) {
            req[4] = (uint8_t)sent;
            tcli_write(&t, req, sizeof(req));
        }
        uv_run(&e.loop, UV_RUN_ONCE);
        net_server_stats(r.s, &st);
    } while (st.read_pauses == 0);
    /* More, until a pause holds: the replies the server queued drain into
     * the kernel's socket buffers, which grow (autotuned, several MiB on
     * loopback), so the first pause may lift by itself; once those are
     * full it holds (until 2026-12-07 the test checked after one more
     * batch, and a loaded make test once saw all 128 requests parsed) */
    int seen;
    do {
        FAST_ASSERT(sent < 100000, "no pause held after %d requests", sent);
        for (int i = 0; i < 64; i++, sent++) {
            req[4] = (uint8_t)sent;
            tcli_write(&t, req, sizeof(req));
        }
        env_sleep(&e, 100);
        seen = r.requests;
        env_sleep(&e, 100);
    } while (r.requests != seen || r.requests == sent);
    ck_assert_int_eq(r.requests, seen); /* paused: nothing more parsed */
    ck_assert_int_lt(r.requests, sent);
    t.verify = true;
    uv_read_start((uv_stream_t *)&t.tcp, tcli_alloc, tcli_read);
    RUN_UNTIL(&e, t.frames_seen == (size_t)sent);
    ck_assert(!t.bad_frame);
    tcli_close(&e, &t);
    raw_stop(&e, &r);

    /* max_requests */
    memset(&r, 0, sizeof(r));
    struct net_server_opts o2 = NET_SERVER_OPTS_INIT;
    o2.max_requests = 2;
    r.hold = true;
    raw_start(&e, &r, &o2);
    tcli_connect(&e, &t, net_server_port(r.s), true);
    t.verify = true;
    for (int i = 0; i < 2; i++) {
        req[4] = (uint8_t)i;
        tcli_write(&t, req, sizeof(req));
        RUN_UNTIL(&e, r.requests == i + 1);
    }
    req[4] = 2;
    tcli_write(&t, req, sizeof(req));
    env_sleep(&e, 100);
    ck_assert_int_eq(r.requests, 2); /* not read while two are in flight */
    raw_answer_held(&r);
    RUN_UNTIL(&e, r.requests == 3);
    raw_answer_held(&r);
    RUN_UNTIL(&e, t.frames_seen == 3);
    ck_assert(!t.bad_frame);
    tcli_close(&e, &t);
    raw_stop(&e, &r);
    env_finish(&e);
}
END_TEST

/* Drain: no new connection, no more input, and each connection closes once
 * its requests are answered and written -- after the replies, not before.
 * A half-close does the same for one connection, after running what was
 * sent. */
START_TEST(raw_drain_answers_then_closes)
{
    struct env e;
    struct raw r = {0};
    struct tcli t, t2;
    struct net_server_opts o = NET_SERVER_OPTS_INIT;
    env_init(&e);
    r.hold = true;
    raw_start(&e, &r, &o);
    int port = net_server_port(r.s);
    tcli_connect(&e, &t, port, true);
    t.verify = true;
    uint8_t req[5] = {0, 0, 0, 1, 0};
    for (int i = 0; i < 3; i++) {
        req[4] = (uint8_t)i;
        tcli_write(&t, req, sizeof(req));
    }
    RUN_UNTIL(&e, r.requests == 3);
    net_server_drain(r.s);
    req[4] = 3;
    tcli_write(&t, req, sizeof(req));
    env_sleep(&e, 100);
    ck_assert_int_eq(r.requests, 3); /* no more input after the drain */
    ck_assert(!t.eof);               /* requests in flight: still open */
    ck_assert_int_eq(r.closed, 0);
    raw_answer_held(&r);
    RUN_UNTIL(&e, t.eof);
    ck_assert_uint_eq(t.frames_seen, 3); /* every reply, then the close */
    ck_assert(!t.bad_frame);
    RUN_UNTIL(&e, r.closed == 1);
    ck_assert_int_eq(r.last_err, 0);
    tcli_close(&e, &t);
    raw_stop(&e, &r);

    /* half-close: both requests answered, then the close */
    memset(&r, 0, sizeof(r));
    struct net_server_opts o2 = NET_SERVER_OPTS_INIT;
    r.hold = true;
    raw_start(&e, &r, &o2);
    tcli_connect(&e, &t2, net_server_port(r.s), true);
    t2.verify = true;
    uint8_t two[10] = {0, 0, 0, 1, 0, 0, 0, 0, 1, 1};
    tcli_write(&t2, two, sizeof(two));
    uv_shutdown_t sh;
    ck_assert_int_eq(uv_shutdown(&sh, (uv_stream_t *)&t2.tcp, NULL), 0);
    RUN_UNTIL(&e, r.eofs > 0);
    ck_assert_int_eq(r.requests, 2);
    env_sleep(&e, 50);
    ck_assert(!t2.eof);
    raw_answer_held(&r);
    RUN_UNTIL(&e, t2.eof);
    ck_assert_uint_eq(t2.frames_seen, 2);
    tcli_close(&e, &t2);
    raw_stop(&e, &r);
    env_finish(&e);
}
END_TEST

/* The input budget: past it a connection stops reading until another's
 * buffer drains; a connection holding part of a request with no byte for
 * frame_timeout_ms is closed (RK_ETIMEOUT), giving its budget back; a
 * buffer full at its cap without a whole request closes (RK_ETOOLARGE). */
START_TEST(raw_budget_timeout_and_cap)
{
    struct env e;
    struct raw r = {0};
    struct tcli a, b;
    struct net_stats st;
    struct net_server_opts o = NET_SERVER_OPTS_INIT;
    env_init(&e);
    size_t budget = 512 * 1024;
    ck_assert_int_eq(net_budget_new(&r.budget, budget), 0);
    o.budget = r.budget;
    o.frame_timeout_ms = 300;
    raw_start(&e, &r, &o);
    int port = net_server_port(r.s);
    static uint8_t big[4 + (1u << 20)];
    net__be32_put(big, 1u << 20);
    memset(big + 4, 7, sizeof(big) - 4);
    /* a: 400 KiB of a 1 MiB request */
    tcli_connect(&e, &a, port, true);
    tcli_write(&a, big, 400 * 1024);
    RUN_UNTIL(&e, a.written == 400 * 1024 && r.max_len_seen >= 300 * 1024);
    /* b: a whole 1 MiB request, which cannot fit beside a's */
    tcli_connect(&e, &b, port, true);
    tcli_write(&b, big, sizeof(big));
    RUN_UNTIL(&e, net_budget_waits(r.budget) > 0);
    ck_assert_uint_le(net_budget_used(r.budget), budget);
    ck_assert_int_eq(r.requests, 0);
    /* a goes quiet: its frame timeout closes it; b's request needs more
     * than the whole budget, so b is closed too, by its timeout, while it
     * waits; what they held is given back */
    RUN_UNTIL(&e, r.closed == 2);
    ck_assert_int_eq(r.last_err, RK_ETIMEOUT);
    net_server_stats(r.s, &st);
    ck_assert_uint_eq(st.frame_timeouts, 2);
    ck_assert_uint_ge(st.budget_waits, 1);
    ck_assert_int_eq(r.requests, 0);
    ck_assert_uint_eq(net_budget_used(r.budget), 0);
    tcli_close(&e, &a);
    tcli_close(&e, &b);
    raw_stop(&e, &r);

    /* within the budget, requests complete one after another */
    memset(&r, 0, sizeof(r));
    struct net_server_opts o2 = NET_SERVER_OPTS_INIT;
    ck_assert_int_eq(net_budget_new(&r.budget, 3u << 20), 0);
    o2.budget = r.budget;
    o2.frame_timeout_ms = 5000;
    r.reply_size = 1;
    raw_start(&e, &r, &o2);
    port = net_server_port(r.s);
    struct tcli c[4];
    for (int i = 0; i < 4; i++) {
        tcli_connect(&e, &c[i], port, true);
        tcli_write(&c[i], big, sizeof(big));
    }
    RUN_UNTIL(&e, r.requests == 4);
    ck_assert_int_eq(r.closed, 0);
    for (int i = 0; i < 4; i++)
        tcli_close(&e, &c[i]);
    RUN_UNTIL(&e, r.closed == 4);
    ck_assert_uint_eq(net_budget_used(r.budget), 0);
    raw_stop(&e, &r);

    /* the cap: a handler that never finds a whole request */
    memset(&r, 0, sizeof(r));
    struct net_server_opts o3 = NET_SERVER_OPTS_INIT;
    o3.input_cap = 4096;
    r.never_consume = true;
    raw_start(&e, &r, &o3);
    tcli_connect(&e, &a, net_server_port(r.s), true);
    tcli_write(&a, big, 10000);
    RUN_UNTIL(&e, r.closed == 1);
    ck_assert_int_eq(r.last_err, RK_ETOOLARGE);
    ck_assert_uint_le(r.max_len_seen, 4096);
    tcli_close(&e, &a);
    raw_stop(&e, &r);
    env_finish(&e);
}
END_TEST

/* frame_deadline: frame_timeout_ms counts from a request's first byte, so
 * a sender trickling a byte every 50 ms is closed (RK_ETIMEOUT) before its
 * request is whole; without the option each byte restarts the timeout and
 * the same trickle keeps the connection. */
START_TEST(raw_frame_deadline_bounds_trickle)
{
    for (int deadline = 0; deadline <= 1; deadline++) {
        struct env e;
        struct raw r = {0};
        struct tcli t;
        struct net_stats st;
        struct net_server_opts o = NET_SERVER_OPTS_INIT;
        env_init(&e);
        o.frame_timeout_ms = 1000;
        o.frame_deadline = deadline;
        raw_start(&e, &r, &o);
        tcli_connect(&e, &t, net_server_port(r.s), true);
        uint8_t req[4 + 100];
        net__be32_put(req, 100);
        memset(req + 4, 0, 100);
        /* 80 bytes over about 4 s: four times the timeout, each byte 50 ms
         * after the last, a twentieth of it (500 ms against 50 closed the
         * connection without the deadline under ASan on a busy machine) */
        for (size_t i = 0; i < 80 && r.closed == 0; i++) {
            tcli_write(&t, req + i, 1);
            env_sleep(&e, 50);
        }
        net_server_stats(r.s, &st);
        if (deadline) {
            ck_assert_int_eq(r.closed, 1);
            ck_assert_int_eq(r.last_err, RK_ETIMEOUT);
            ck_assert_uint_eq(st.frame_timeouts, 1);
        } else {
            ck_assert_int_eq(r.closed, 0);
            ck_assert_uint_eq(st.frame_timeouts, 0);
            /* the rest arrives: the request is answered */
            tcli_write(&t, req + 80, sizeof(req) - 80);
            RUN_UNTIL(&e, r.requests == 1);
        }
        ck_assert_int_eq(r.requests, 1 - deadline);
        tcli_close(&e, &t);
        raw_stop(&e, &r);
        env_finish(&e);
    }
}
END_TEST

/* With frame_deadline, pipelined requests each get their own deadline: a
 * whole request consumed restarts it for the next one's bytes. */
START_TEST(raw_frame_deadline_per_request)
{
    struct env e;
    struct raw r = {0};
    struct tcli t;
    struct net_server_opts o = NET_SERVER_OPTS_INIT;
    env_init(&e);
    o.frame_timeout_ms = 1500;
    o.frame_deadline = true;
    raw_start(&e, &r, &o);
    tcli_connect(&e, &t, net_server_port(r.s), true);
    /* ten 5-byte requests, each write the end of one and the start of
     * the next, 200 ms apart: the buffer is never empty for 2 s, more
     * than the timeout, and each request arrives whole well within it (a
     * 500 ms timeout with 100 ms steps fired under ASan on a busy
     * machine: CI 2026-12-06) */
    uint8_t req[5] = {0, 0, 0, 1, 0};
    uint8_t step[5] = {1, 0, 0, 0, 0}; /* length end, tag; next start */
    tcli_write(&t, req, 3);
    for (int i = 0; i < 10; i++) {
        env_sleep(&e, 200);
        tcli_write(&t, step, i < 9 ? 5 : 2);
        RUN_UNTIL(&e, r.requests == i + 1);
    }
    ck_assert_int_eq(r.closed, 0);
    tcli_close(&e, &t);
    raw_stop(&e, &r);
    env_finish(&e);
}
END_TEST

static Suite *net_raw_stream_suite(void)
{
    Suite *s = suite_create("net_raw_stream");
    TCase *tc = tcase_create("raw_stream");
    tcase_set_timeout(tc, 120);
    tcase_add_test(tc, raw_partial_requests);
    tcase_add_test(tc, raw_backpressure_pause_resume);
    tcase_add_test(tc, raw_drain_answers_then_closes);
    tcase_add_test(tc, raw_budget_timeout_and_cap);
    tcase_add_test(tc, raw_frame_deadline_bounds_trickle);
    tcase_add_test(tc, raw_frame_deadline_per_request);
    suite_add_tcase(s, tc);
    return s;
}

int main(void)
{
    SRunner *sr = srunner_create(net_raw_stream_suite());
    srunner_run_all(sr, CK_NORMAL);
    int failed = srunner_ntests_failed(sr);
    srunner_free(sr);
    return failed == 0 ? EXIT_SUCCESS : EXIT_FAILURE;
}
