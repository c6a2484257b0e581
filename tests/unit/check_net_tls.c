/*
 * check_net_tls.c - net/'s TLS layer in one process, no sockets: a client
 * and a server session (tls.c) over memory, the bytes each makes handed to
 * the other by hand, so a handshake, data both ways, a refusal and its
 * reason are checked without a loop or a port. Contexts load a PKI that
 * tests/tls/make-certs.sh makes with the openssl CLI in a temporary
 * directory: a CA, node certificates, a wrong CA, an expired and a
 * not-yet-valid certificate.
 *
 * The second case runs the engine itself (conn.c) on a libuv loop: a
 * raw-stream echo server given a TLS context, and a client made of a
 * libuv socket and a client session, both in the test process over
 * 127.0.0.1: a large echo through a small input cap (the session's bytes
 * wait for room and come through), plaintext refused and counted, the
 * pre-authentication input cap holding over TLS, and a context replaced
 * for new handshakes while a live connection keeps its own.
 */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include <check.h>
#include <uv.h>

#include "common/rk.h"
#include "net/net.h"
#include "net/net_internal.h"
#include "net/tls.h"

static char dir[256];

static void pki_make(void)
{
    char cmd[512];
    snprintf(dir, sizeof(dir), "/tmp/rk-tls-unit-XXXXXX");
    ck_assert_ptr_nonnull(mkdtemp(dir));
    snprintf(cmd, sizeof(cmd), "%s/tls/make-certs.sh %s n1 n2", RK_TESTS_DIR,
             dir);
    ck_assert_int_eq(system(cmd), 0);
}

static void pki_remove(void)
{
    char cmd[512];
    snprintf(cmd, sizeof(cmd), "rm -rf %s", dir);
    ck_assert_int_eq(system(cmd), 0);
}

static const char *path(char *buf, const char *file)
{
    snprintf(buf, 512, "%s/%s", dir, file);
    return buf;
}

/* A context: cert/key named by stem ("n1" -> n1.crt, n1.key; NULL: none),
 * CA file by name (NULL: none). */
static int ctx_load(net_tls **out,
                    bool server,
                    const char *stem,
                    const char *ca,
                    bool verify_peer,
                    char *why,
                    size_t why_cap)
{
    char crt[512], key[512], cab[512], f[64];
    struct net_tls_opts o = NET_TLS_OPTS_INIT;
    o.server = server;
    o.verify_peer = verify_peer;
    if (stem) {
        snprintf(f, sizeof(f), "%s.crt", stem);
        o.cert_file = path(crt, f);
        snprintf(f, sizeof(f), "%s.key", stem);
        o.key_file = path(key, f);
    }
    if (ca)
        o.ca_file = path(cab, ca);
    return net_tls_new(out, &o, why, why_cap);
}

static net_tls *ctx(bool server, const char *stem, const char *ca, bool vp)
{
    net_tls *t = NULL;
    char why[256] = "";
    int rc = ctx_load(&t, server, stem, ca, vp, why, sizeof(why));
    ck_assert_msg(rc == 0, "load %s: %s", stem ? stem : "-", why);
    return t;
}

/* Moves every byte one side made to the other. Returns how many. */
static size_t pass(struct net__tls *from, struct net__tls *to)
{
    uint8_t buf[4096];
    size_t total = 0, n;
    while ((n = net__tls_out_take(from, buf, sizeof(buf))) > 0) {
        ck_assert_int_eq(net__tls_feed(to, buf, n), 0);
        total += n;
    }
    return total;
}

/* Runs both handshakes until neither side has anything to say. Returns
 * the client's and server's last results in rc[0], rc[1]. */
static void handshake(struct net__tls *cl, struct net__tls *sv, int rc[2])
{
    rc[0] = net__tls_handshake(cl);
    for (int i = 0; i < 20; i++) {
        size_t moved = pass(cl, sv);
        rc[1] = net__tls_handshake(sv);
        moved += pass(sv, cl);
        rc[0] = net__tls_handshake(cl);
        if (rc[0] < 0 || rc[1] < 0 || (moved == 0 && rc[0] == 1))
            break;
    }
    pass(cl, sv);
    if (rc[1] == 0)
        rc[1] = net__tls_handshake(sv);
}

/* Reads all the plaintext s has into out; returns the count. */
static size_t drain(struct net__tls *s, uint8_t *out, size_t cap)
{
    size_t total = 0, n = 0;
    while (total < cap && net__tls_read(s, out + total, cap - total, &n) == 0 &&
           n > 0)
        total += n;
    return total;
}

START_TEST(pair_handshake_and_data)
{
    net_tls *sc = ctx(true, "n1", "ca.crt", false);
    net_tls *cc = ctx(false, NULL, "ca.crt", false);
    struct net__tls *sv, *cl;
    int rc[2];
    ck_assert_int_eq(net__tls_new(&sv, sc, NULL), 0);
    ck_assert_int_eq(net__tls_new(&cl, cc, "n1"), 0);
    handshake(cl, sv, rc);
    ck_assert_int_eq(rc[0], 1);
    ck_assert_int_eq(rc[1], 1);
    ck_assert(net__tls_done(cl) && net__tls_done(sv));

    /* a large message both ways, fed in small pieces */
    size_t big = 200000;
    uint8_t *msg = malloc(big), *got = malloc(big);
    for (size_t i = 0; i < big; i++)
        msg[i] = (uint8_t)(i * 7 + 3);
    ck_assert_int_eq(net__tls_write(cl, msg, big), 0);
    uint8_t piece[777];
    size_t n, have = 0, r;
    while ((n = net__tls_out_take(cl, piece, sizeof(piece))) > 0) {
        ck_assert_int_eq(net__tls_feed(sv, piece, n), 0);
        have += drain(sv, got + have, big - have);
    }
    ck_assert_uint_eq(have, big);
    ck_assert_mem_eq(got, msg, big);
    ck_assert(!net__tls_has_input(sv));

    ck_assert_int_eq(net__tls_write(sv, (const uint8_t *)"+PONG\r\n", 7), 0);
    pass(sv, cl);
    ck_assert_uint_eq(drain(cl, got, big), 7);
    ck_assert_mem_eq(got, "+PONG\r\n", 7);

    /* close_notify reads as the end */
    net__tls_shutdown(cl);
    pass(cl, sv);
    ck_assert_int_eq(net__tls_read(sv, got, big, &r), 1);
    free(msg);
    free(got);
    net__tls_free(cl);
    net__tls_free(sv);
    net_tls_free(sc);
    net_tls_free(cc);
}
END_TEST

/* The client knows only another CA: it refuses the server, and says why. */
START_TEST(wrong_ca_refused)
{
    net_tls *sc = ctx(true, "n1", "ca.crt", false);
    net_tls *cc = ctx(false, NULL, "wrong-ca.crt", false);
    struct net__tls *sv, *cl;
    int rc[2];
    char why[200];
    ck_assert_int_eq(net__tls_new(&sv, sc, NULL), 0);
    ck_assert_int_eq(net__tls_new(&cl, cc, "n1"), 0);
    handshake(cl, sv, rc);
    ck_assert_int_eq(rc[0], RK_EAUTH);
    ck_assert_int_ne(rc[1], 1);
    net__tls_why(cl, why, sizeof(why));
    ck_assert_msg(strstr(why, "certificate") != NULL, "why: %s", why);
    net__tls_free(cl);
    net__tls_free(sv);
    net_tls_free(sc);
    net_tls_free(cc);
}
END_TEST

/* A server certificate signed by another CA, presented to a client of the
 * cluster's CA; and a mutual-TLS server refusing a client of another CA
 * or without a certificate. */
START_TEST(mutual_refuses_wrong_or_missing_client_cert)
{
    const char *clients[] = {"wrong", NULL, "n2"};
    int expect[] = {RK_EAUTH, RK_EAUTH, 1};
    for (int k = 0; k < 3; k++) {
        net_tls *sc = ctx(true, "n1", "ca.crt", true);
        net_tls *cc = ctx(false, clients[k], "ca.crt", false);
        struct net__tls *sv, *cl;
        int rc[2];
        ck_assert_int_eq(net__tls_new(&sv, sc, NULL), 0);
        ck_assert_int_eq(net__tls_new(&cl, cc, "n1"), 0);
        handshake(cl, sv, rc);
        ck_assert_msg(rc[1] == expect[k], "client %d: server %d", k, rc[1]);
        if (expect[k] == 1) {
            uint8_t b[8];
            ck_assert_int_eq(net__tls_write(cl, (const uint8_t *)"hi", 2), 0);
            pass(cl, sv);
            ck_assert_uint_eq(drain(sv, b, sizeof(b)), 2);
        }
        net__tls_free(cl);
        net__tls_free(sv);
        net_tls_free(sc);
        net_tls_free(cc);
    }
}
END_TEST

/* The certificate is for n1: a client that wants n2, or another address,
 * refuses it; one that wants its IP SAN takes it. */
START_TEST(verify_name_checked)
{
    const char *names[] = {"n2", "127.0.0.9", "127.0.0.2", "n1"};
    int expect[] = {RK_EAUTH, RK_EAUTH, 1, 1};
    net_tls *sc = ctx(true, "n1", NULL, false);
    net_tls *cc = ctx(false, NULL, "ca.crt", false);
    for (int k = 0; k < 4; k++) {
        struct net__tls *sv, *cl;
        int rc[2];
        ck_assert_int_eq(net__tls_new(&sv, sc, NULL), 0);
        ck_assert_int_eq(net__tls_new(&cl, cc, names[k]), 0);
        handshake(cl, sv, rc);
        ck_assert_msg(rc[0] == expect[k], "%s: %d", names[k], rc[0]);
        net__tls_free(cl);
        net__tls_free(sv);
    }
    net_tls_free(sc);
    net_tls_free(cc);
}
END_TEST

/* Plaintext (a RESP PING, an HTTP request, a native frame) to a TLS server is
 * refused at once, not waited on. */
START_TEST(plaintext_to_server_refused)
{
    const char *texts[] = {"*1\r\n$4\r\nPING\r\n", "GET / HTTP/1.1\r\n\r\n",
                           "\x00\x00\x00\x05hello"};
    size_t lens[] = {14, 18, 9};
    net_tls *sc = ctx(true, "n1", NULL, false);
    for (int k = 0; k < 3; k++) {
        struct net__tls *sv;
        ck_assert_int_eq(net__tls_new(&sv, sc, NULL), 0);
        ck_assert_int_eq(net__tls_feed(sv, (const uint8_t *)texts[k], lens[k]),
                         0);
        ck_assert_int_eq(net__tls_handshake(sv), RK_EAUTH);
        char why[200];
        net__tls_why(sv, why, sizeof(why));
        ck_assert_msg(strstr(why, "not TLS") != NULL, "%s", why);
        net__tls_free(sv);
    }
    net_tls_free(sc);
}
END_TEST

/* Loading refuses, with a line that says why: expired, not yet valid, a
 * key of another certificate, a missing file, a server without a cert. */
START_TEST(load_refuses_bad_certificates)
{
    char why[256], crt[512], key[512];
    net_tls *t = NULL;
    struct net_tls_opts o = NET_TLS_OPTS_INIT;
    o.server = true;

    ck_assert_int_eq(
        ctx_load(&t, true, "expired", "ca.crt", false, why, sizeof(why)),
        RK_ECONFIG);
    ck_assert_msg(strstr(why, "expired") && strstr(why, "2020"), "%s", why);
    ck_assert_int_eq(
        ctx_load(&t, true, "future", "ca.crt", false, why, sizeof(why)),
        RK_ECONFIG);
    ck_assert_msg(strstr(why, "not valid yet") && strstr(why, "2090"), "%s",
                  why);

    o.cert_file = path(crt, "n1.crt");
    o.key_file = path(key, "n2.key");
    ck_assert_int_eq(net_tls_new(&t, &o, why, sizeof(why)), RK_ECONFIG);
    ck_assert_msg(strstr(why, "does not match") != NULL, "%s", why);

    o.key_file = path(key, "missing.key");
    ck_assert_int_eq(net_tls_new(&t, &o, why, sizeof(why)), -ENOENT);
    ck_assert_msg(strstr(why, "missing.key") != NULL, "%s", why);

    o.key_file = path(key, "ca.crt"); /* not a key */
    ck_assert_int_eq(net_tls_new(&t, &o, why, sizeof(why)), RK_ECONFIG);

    o.cert_file = o.key_file = NULL;
    ck_assert_int_eq(net_tls_new(&t, &o, why, sizeof(why)), RK_ECONFIG);

    /* and references: the last free frees */
    t = ctx(true, "n1", NULL, false);
    ck_assert_ptr_eq(net_tls_ref(t), t);
    net_tls_free(t);
    net_tls_free(t);
    net_tls_free(NULL);
}
END_TEST

/* ---- the engine on a loop ----------------------------------------------- */

struct env {
    uv_loop_t loop;
    uv_timer_t tick;
};

static void tick_cb(uv_timer_t *t)
{
    (void)t;
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

/* The echo server: answers every whole line it holds, at once. */
struct echo {
    net_server *s;
    size_t accepted, closed, fails;
    int last_err;
    enum net_tls_fail last_fail;
    size_t cap; /* set on each accepted connection (0: leave) */
    bool closed_done;
};

static int echo_input(void *arg, net_conn *c, struct net_input *in)
{
    size_t n = in->len;
    (void)arg;
    while (n > 0 && in->p[n - 1] != '\n')
        n--;
    if (n && net_conn_write(c, in->p, n) != 0)
        return RK_EINTERNAL;
    in->consumed = n;
    return 0;
}

static void echo_accept(void *arg, net_conn *c)
{
    struct echo *v = arg;
    v->accepted++;
    if (v->cap)
        net_conn_input_cap_set(c, v->cap);
}

static void echo_close(void *arg, net_conn *c, int err)
{
    struct echo *v = arg;
    (void)c;
    v->closed++;
    v->last_err = err;
}

static void echo_tls_fail(void *arg,
                          const char *peer,
                          enum net_tls_fail reason,
                          const char *why)
{
    struct echo *v = arg;
    ck_assert_ptr_nonnull(peer);
    ck_assert_ptr_nonnull(why);
    v->fails++;
    v->last_fail = reason;
}

static void echo_done(void *arg)
{
    ((struct echo *)arg)->closed_done = true;
}

static void echo_start(struct env *e, struct echo *v, net_tls *t, size_t cap)
{
    struct net_server_opts o = NET_SERVER_OPTS_INIT;
    o.on_input = echo_input;
    o.on_frame = NULL;
    o.on_accept = echo_accept;
    o.on_close = echo_close;
    o.on_tls_fail = echo_tls_fail;
    o.arg = v;
    o.tls = t;
    o.input_cap = cap;
    ck_assert_int_eq(net_server_new(&v->s, &e->loop, &o), 0);
}

/* A client: a socket and (unless plain) a client session. */
struct cli {
    uv_tcp_t tcp;
    uv_connect_t conn;
    struct net__tls *tls;
    bool connected, eof, closed;
    int hs; /* the handshake's last result */
    uint8_t *got;
    size_t got_len, got_cap;
};

static void cli_alloc(uv_handle_t *h, size_t sz, uv_buf_t *b)
{
    (void)h;
    b->base = malloc(sz);
    b->len = b->base ? sz : 0;
}

static void cli_keep(struct cli *k, const uint8_t *p, size_t n)
{
    if (k->got_len + n > k->got_cap) {
        k->got_cap = (k->got_len + n) * 2;
        k->got = realloc(k->got, k->got_cap);
        ck_assert_ptr_nonnull(k->got);
    }
    memcpy(k->got + k->got_len, p, n);
    k->got_len += n;
}

static void cli_send_out(struct cli *k);

static void cli_read(uv_stream_t *s, ssize_t n, const uv_buf_t *b)
{
    struct cli *k = s->data;
    if (n < 0) {
        k->eof = true;
        uv_read_stop(s);
    } else if (n > 0 && k->tls == NULL) {
        cli_keep(k, (const uint8_t *)b->base, (size_t)n);
    } else if (n > 0) {
        ck_assert_int_eq(
            net__tls_feed(k->tls, (const uint8_t *)b->base, (size_t)n), 0);
        if (k->hs == 0)
            k->hs = net__tls_handshake(k->tls);
        uint8_t buf[16384];
        size_t r;
        while (k->hs == 1 && net__tls_read(k->tls, buf, sizeof(buf), &r) == 0 &&
               r > 0)
            cli_keep(k, buf, r);
        cli_send_out(k);
    }
    free(b->base);
}

struct wr {
    uv_write_t req;
    uint8_t *p;
};

static void cli_written(uv_write_t *req, int status)
{
    struct wr *w = (struct wr *)req;
    (void)status;
    free(w->p);
    free(w);
}

static void cli_write_raw(struct cli *k, const uint8_t *p, size_t n)
{
    struct wr *w = malloc(sizeof(*w));
    ck_assert_ptr_nonnull(w);
    w->p = malloc(n);
    memcpy(w->p, p, n);
    uv_buf_t b = uv_buf_init((char *)w->p, (unsigned)n);
    ck_assert_int_eq(
        uv_write(&w->req, (uv_stream_t *)&k->tcp, &b, 1, cli_written), 0);
}

static void cli_send_out(struct cli *k)
{
    size_t n = net__tls_out_pending(k->tls);
    if (n == 0)
        return;
    uint8_t *p = malloc(n);
    ck_assert_uint_eq(net__tls_out_take(k->tls, p, n), n);
    cli_write_raw(k, p, n);
    free(p);
}

static void cli_connected(uv_connect_t *req, int status)
{
    struct cli *k = req->data;
    ck_assert_int_eq(status, 0);
    k->connected = true;
    ck_assert_int_eq(uv_read_start((uv_stream_t *)&k->tcp, cli_alloc, cli_read),
                     0);
    if (k->tls) {
        k->hs = net__tls_handshake(k->tls);
        cli_send_out(k);
    }
}

static void
cli_start(struct env *e, struct cli *k, int port, net_tls *t, const char *name)
{
    struct sockaddr_in a;
    memset(k, 0, sizeof(*k));
    if (t)
        ck_assert_int_eq(net__tls_new(&k->tls, t, name), 0);
    uv_tcp_init(&e->loop, &k->tcp);
    k->tcp.data = k;
    k->conn.data = k;
    uv_ip4_addr("127.0.0.1", port, &a);
    ck_assert_int_eq(uv_tcp_connect(&k->conn, &k->tcp,
                                    (const struct sockaddr *)&a, cli_connected),
                     0);
    RUN_UNTIL(e, k->connected);
}

static void cli_send(struct cli *k, const void *p, size_t n)
{
    if (k->tls == NULL) {
        cli_write_raw(k, p, n);
        return;
    }
    ck_assert_int_eq(net__tls_write(k->tls, p, n), 0);
    cli_send_out(k);
}

static void cli_closed(uv_handle_t *h)
{
    ((struct cli *)h->data)->closed = true;
}

static void cli_stop(struct env *e, struct cli *k)
{
    uv_close((uv_handle_t *)&k->tcp, cli_closed);
    RUN_UNTIL(e, k->closed);
    net__tls_free(k->tls);
    free(k->got);
}

static void env_start(struct env *e)
{
    ck_assert_int_eq(uv_loop_init(&e->loop), 0);
    uv_timer_init(&e->loop, &e->tick);
    uv_timer_start(&e->tick, tick_cb, 5, 5);
}

static void env_stop(struct env *e, struct echo *v)
{
    net_server_close(v->s, echo_done, v);
    RUN_UNTIL(e, v->closed_done);
    uv_close((uv_handle_t *)&e->tick, NULL);
    while (uv_run(&e->loop, UV_RUN_NOWAIT) != 0)
        ;
    ck_assert_int_eq(uv_loop_close(&e->loop), 0);
}

/* 1 MiB through a server whose connections hold 16 KiB at most: the
 * session holds what has no room yet, and it all comes back in order. */
START_TEST(server_echo_through_small_cap)
{
    struct env e;
    struct echo v = {0};
    struct cli k;
    net_tls *sc = ctx(true, "n1", NULL, false);
    net_tls *cc = ctx(false, NULL, "ca.crt", false);
    env_start(&e);
    echo_start(&e, &v, sc, 16384);
    cli_start(&e, &k, net_server_port(v.s), cc, "127.0.0.1");
    RUN_UNTIL(&e, k.hs != 0 && v.accepted == 1);
    ck_assert_int_eq(k.hs, 1);
    size_t big = 1u << 20;
    uint8_t *msg = malloc(big);
    for (size_t i = 0; i < big; i++)
        msg[i] = (uint8_t)(i % 251); /* a '\n' every 251 bytes */
    msg[big - 1] = '\n';
    for (size_t off = 0; off < big; off += 100000)
        cli_send(&k, msg + off, big - off < 100000 ? big - off : 100000);
    RUN_UNTIL(&e, k.got_len >= big);
    ck_assert_uint_eq(k.got_len, big);
    ck_assert_mem_eq(k.got, msg, big);
    free(msg);

    /* a graceful end: the server closes cleanly after the client's */
    net__tls_shutdown(k.tls);
    cli_send_out(&k);
    RUN_UNTIL(&e, v.closed == 1);
    ck_assert_int_eq(v.last_err, 0);
    cli_stop(&e, &k);
    net_tls_free(sc); /* the server holds its own reference */
    env_stop(&e, &v);
    net_tls_free(cc);
}
END_TEST

/* A RESP PING in plaintext to the TLS port: closed without an answer,
 * never announced, counted and reported. */
START_TEST(server_refuses_plaintext)
{
    struct env e;
    struct echo v = {0};
    struct cli k;
    struct net_stats st;
    net_tls *sc = ctx(true, "n1", NULL, false);
    env_start(&e);
    echo_start(&e, &v, sc, 0);
    cli_start(&e, &k, net_server_port(v.s), NULL, NULL);
    cli_send(&k, "*1\r\n$4\r\nPING\r\n", 14);
    RUN_UNTIL(&e, k.eof);
    ck_assert_uint_eq(v.accepted, 0);
    ck_assert_uint_eq(v.fails, 1);
    /* what came back, if anything, is a TLS alert, never "+PONG" */
    ck_assert(k.got_len == 0 || k.got[0] == 0x15);
    net_server_stats(v.s, &st);
    ck_assert_uint_eq(st.handshake_failed, 1);
    cli_stop(&e, &k);
    env_stop(&e, &v);
    net_tls_free(sc);
}
END_TEST

/* The pre-authentication cap (a small buffer until AUTH) holds over TLS:
 * lines within it are answered; a client that sends more than it without
 * a whole line is closed (RK_ETOOLARGE), whatever the session holds. */
START_TEST(server_input_cap_holds_over_tls)
{
    struct env e;
    struct echo v = {0};
    struct cli k;
    net_tls *sc = ctx(true, "n1", NULL, false);
    net_tls *cc = ctx(false, NULL, "ca.crt", false);
    env_start(&e);
    echo_start(&e, &v, sc, 0);
    v.cap = 4096;
    cli_start(&e, &k, net_server_port(v.s), cc, "n1");
    RUN_UNTIL(&e, k.hs != 0 && v.accepted == 1);
    cli_send(&k, "PING\n", 5);
    RUN_UNTIL(&e, k.got_len == 5);
    size_t big = 300000;
    uint8_t *msg = calloc(1, big);
    cli_send(&k, msg, big);
    RUN_UNTIL(&e, v.closed == 1);
    ck_assert_int_eq(v.last_err, RK_ETOOLARGE);
    ck_assert_uint_eq(k.got_len, 5);
    free(msg);
    cli_stop(&e, &k);
    env_stop(&e, &v);
    net_tls_free(sc);
    net_tls_free(cc);
}
END_TEST

/* net_server_tls_set: new handshakes present the new certificate (n2
 * here), a live connection goes on with its own. */
START_TEST(server_context_replaced_live_untouched)
{
    struct env e;
    struct echo v = {0};
    struct cli a, b, c;
    net_tls *n1 = ctx(true, "n1", NULL, false);
    net_tls *n2 = ctx(true, "n2", NULL, false);
    net_tls *cc = ctx(false, NULL, "ca.crt", false);
    env_start(&e);
    echo_start(&e, &v, n1, 0);
    int port = net_server_port(v.s);
    cli_start(&e, &a, port, cc, "n1");
    RUN_UNTIL(&e, a.hs != 0 && v.accepted == 1);
    ck_assert_int_eq(a.hs, 1);

    ck_assert_int_eq(net_server_tls_set(v.s, n2), 0);
    net_tls_free(n1);
    net_tls_free(n2);
    cli_start(&e, &b, port, cc, "n2");
    RUN_UNTIL(&e, b.hs != 0 && v.accepted == 2);
    ck_assert_int_eq(b.hs, 1);
    cli_start(&e, &c, port, cc, "n1"); /* wants the old one: refused */
    RUN_UNTIL(&e, c.hs != 0);
    ck_assert_int_eq(c.hs, RK_EAUTH);

    cli_send(&a, "old\n", 4);
    cli_send(&b, "new\n", 4);
    RUN_UNTIL(&e, a.got_len == 4 && b.got_len == 4);
    ck_assert_mem_eq(a.got, "old\n", 4);
    ck_assert_mem_eq(b.got, "new\n", 4);
    cli_stop(&e, &a);
    cli_stop(&e, &b);
    cli_stop(&e, &c);
    env_stop(&e, &v);
    net_tls_free(cc);
}
END_TEST

/* A server that answers one line at a time, a timer later, with one
 * request in flight at most (max_requests 1), through a 64-byte cap. */
struct slow {
    struct echo v;
    uv_timer_t timer;
    net_conn *busy;
    size_t answered;
};

static void slow_due(uv_timer_t *t)
{
    struct slow *w = t->data;
    net_conn *c = w->busy;
    w->busy = NULL;
    w->answered++;
    ck_assert_int_eq(net_conn_write(c, "ok\n", 3), 0);
    net_conn_request_end(c); /* the session holds the next lines */
    net_conn_input_again(c); /* as the client servers do */
}

static int slow_input(void *arg, net_conn *c, struct net_input *in)
{
    struct slow *w = arg;
    if (w->busy || in->len == 0)
        return 0;
    uint8_t *nl = memchr(in->p, '\n', in->len);
    if (nl == NULL)
        return 0;
    in->consumed = (size_t)(nl - in->p) + 1;
    net_conn_request_begin(c);
    w->busy = c;
    uv_timer_start(&w->timer, slow_due, 1, 0);
    return 0;
}

/* One request in flight at most, through a 64-byte cap: the lines wait in
 * the session while the handler is busy or the buffer full, and each comes
 * through when the one before is answered, the last one held in part. */
START_TEST(server_one_request_at_a_time)
{
    struct env e;
    struct slow w;
    struct cli k;
    memset(&w, 0, sizeof(w));
    net_tls *sc = ctx(true, "n1", NULL, false);
    net_tls *cc = ctx(false, NULL, "ca.crt", false);
    env_start(&e);
    uv_timer_init(&e.loop, &w.timer);
    w.timer.data = &w;
    struct net_server_opts o = NET_SERVER_OPTS_INIT;
    o.on_input = slow_input;
    o.on_frame = NULL;
    o.on_accept = echo_accept;
    o.on_close = echo_close;
    o.arg = &w;
    o.tls = sc;
    o.input_cap = 64;
    o.max_requests = 1;
    ck_assert_int_eq(net_server_new(&w.v.s, &e.loop, &o), 0);
    /* the struct echo callbacks count into w.v: it is w's first member */
    cli_start(&e, &k, net_server_port(w.v.s), cc, "n1");
    RUN_UNTIL(&e, k.hs != 0 && w.v.accepted == 1);
    char lines[5 * 50 + 40]; /* and part of a sixth, held */
    memset(lines, 'a', sizeof(lines));
    for (int i = 0; i < 5; i++)
        lines[i * 50 + 49] = '\n';
    cli_send(&k, lines, sizeof(lines));
    RUN_UNTIL(&e, k.got_len == 15);
    ck_assert_mem_eq(k.got, "ok\nok\nok\nok\nok\n", 15);
    cli_stop(&e, &k);
    RUN_UNTIL(&e, w.v.closed == 1);
    uv_close((uv_handle_t *)&w.timer, NULL);
    env_stop(&e, &w.v);
    net_tls_free(sc);
    net_tls_free(cc);
}
END_TEST

/* ---- internode: framed RPC in mutual TLS, the handshake hook inside -- */

/* A handshake hook whose frames are the sender's name: the connector says
 * its name (HELLO, then again as its PROOF), the acceptor its own
 * (ANSWER); check takes the name the other side sent. What it proves is
 * nothing; what it claims is what the engine checks the certificate
 * against. */
static int name_make(void *arg,
                     const char *to,
                     struct rk_slice peer,
                     uint8_t *out,
                     size_t cap,
                     size_t *out_len)
{
    const char *me = arg;
    (void)to;
    (void)peer;
    *out_len = strlen(me);
    ck_assert_uint_le(*out_len, cap);
    memcpy(out, me, *out_len);
    return 0;
}

static int name_check(void *arg,
                      const char *to,
                      struct rk_slice got,
                      struct rk_slice sent,
                      char *name,
                      size_t cap)
{
    (void)arg;
    (void)to;
    (void)sent;
    if (got.len == 0 || got.len >= cap)
        return RK_EAUTH;
    memcpy(name, got.p, got.len);
    name[got.len] = '\0';
    return 0;
}

/* One side's TLS refusals, as the daemon's callbacks see them. */
struct fails {
    size_t n;
    enum net_tls_fail last;
    char why[512];
    char peer[NET_NAME_MAX];
};

static void fails_note(void *arg,
                       const char *peer,
                       enum net_tls_fail reason,
                       const char *why)
{
    struct fails *f = arg;
    f->n++;
    f->last = reason;
    snprintf(f->why, sizeof(f->why), "%s", why);
    snprintf(f->peer, sizeof(f->peer), "%s", peer);
}

/* The internode server: answers every request with its payload, and keeps
 * the name each connection proved. */
struct isrv {
    net_server *s;
    struct fails fails;
    size_t accepted;
    char last_peer[NET_NAME_MAX];
    bool closed_done;
};

static void isrv_accept(void *arg, net_conn *c)
{
    struct isrv *v = arg;
    v->accepted++;
    snprintf(v->last_peer, sizeof(v->last_peer), "%s", net_conn_peer_name(c));
}

static int isrv_frame(void *arg, net_conn *c, uint64_t id, struct rk_slice f)
{
    (void)arg;
    return net_conn_reply(c, id, f);
}

static void isrv_done(void *arg)
{
    ((struct isrv *)arg)->closed_done = true;
}

static void isrv_fail(void *arg,
                      const char *peer,
                      enum net_tls_fail reason,
                      const char *why)
{
    fails_note(&((struct isrv *)arg)->fails, peer, reason, why);
}

/* name: what its hook claims; t: its context (NULL: plaintext). */
static void
isrv_start(struct env *e, struct isrv *v, const char *name, net_tls *t)
{
    static struct net_handshake hs;
    struct net_server_opts o = NET_SERVER_OPTS_INIT;
    hs = (struct net_handshake){name_make, name_check, (void *)name};
    memset(v, 0, sizeof(*v));
    o.rpc = true;
    o.hs = &hs;
    o.on_accept = isrv_accept;
    o.on_frame = isrv_frame;
    o.on_tls_fail = isrv_fail;
    o.arg = v;
    o.tls = t;
    o.handshake_timeout_ms = 5000;
    ck_assert_int_eq(net_server_new(&v->s, &e->loop, &o), 0);
}

/* The connecting side: net_peers whose hook claims name. */
struct ipeers {
    net_peers *p;
    struct fails fails;
    char addr[64];
    bool closed_done;
};

static void ipeers_done(void *arg)
{
    ((struct ipeers *)arg)->closed_done = true;
}

static void ipeers_start(
    struct env *e, struct ipeers *q, const char *name, net_tls *t, int port)
{
    struct net_handshake hs = {name_make, name_check, (void *)name};
    struct net_peers_opts o = NET_PEERS_OPTS_INIT;
    memset(q, 0, sizeof(*q));
    o.hs = &hs;
    o.tls = t;
    o.on_tls_fail = fails_note;
    o.arg = &q->fails;
    o.connect_timeout_ms = 5000;
    o.backoff_min_ms = 1;
    o.backoff_max_ms = 1;
    snprintf(q->addr, sizeof(q->addr), "127.0.0.1:%d", port);
    ck_assert_int_eq(net_peers_new(&q->p, &e->loop, &o), 0);
}

struct answer {
    bool done;
    int status;
    char body[64];
};

static void answer_cb(void *arg, int status, struct rk_slice resp)
{
    struct answer *a = arg;
    a->done = true;
    a->status = status;
    snprintf(a->body, sizeof(a->body), "%.*s", (int)resp.len,
             (const char *)resp.p);
}

/* One request through q; its status (the body must echo on success). */
static int ask(struct env *e, struct ipeers *q, const char *what)
{
    struct answer a = {0};
    int rc = net_peers_request(q->p, q->addr, RK_SLICE(what, strlen(what)),
                               10000, answer_cb, &a);
    if (rc)
        return rc;
    RUN_UNTIL(e, a.done);
    if (a.status == 0)
        ck_assert_str_eq(a.body, what);
    return a.status;
}

static void istop(struct env *e, struct isrv *v, struct ipeers *q)
{
    if (q) {
        net_peers_close(q->p, ipeers_done, q);
        RUN_UNTIL(e, q->closed_done);
    }
    net_server_close(v->s, isrv_done, v);
    RUN_UNTIL(e, v->closed_done);
}

static void env_end(struct env *e)
{
    uv_close((uv_handle_t *)&e->tick, NULL);
    while (uv_run(&e->loop, UV_RUN_NOWAIT) != 0)
        ;
    ck_assert_int_eq(uv_loop_close(&e->loop), 0);
}

/* Both sides verify: n2 dials n1, each with its certificate of the CA and
 * the CA to verify the other's; the hook runs inside TLS and requests go
 * both ways of the connection. */
START_TEST(internode_mutual_ok)
{
    struct env e;
    struct isrv v;
    struct ipeers q;
    struct net_stats st;
    net_tls *sc = ctx(true, "n1", "ca.crt", true);
    net_tls *cc = ctx(false, "n2", "ca.crt", false);
    env_start(&e);
    isrv_start(&e, &v, "n1", sc);
    ipeers_start(&e, &q, "n2", cc, net_server_port(v.s));
    net_tls_free(sc); /* each holds its own reference */
    net_tls_free(cc);
    ck_assert_int_eq(ask(&e, &q, "first"), 0);
    for (int i = 0; i < 50; i++)
        ck_assert_int_eq(ask(&e, &q, "again"), 0);
    ck_assert_uint_eq(v.accepted, 1);
    ck_assert_str_eq(v.last_peer, "n2");
    ck_assert_uint_eq(v.fails.n + q.fails.n, 0);
    ck_assert_int_eq(net_peers_state(q.p, q.addr), NET_PEER_READY);
    net_server_stats(v.s, &st);
    ck_assert_uint_eq(st.handshake_failed, 0);
    ck_assert_uint_eq(st.frames_in, 51 + 2); /* requests, the hook's two */
    istop(&e, &v, &q);
    env_end(&e);
}
END_TEST

/* A peer whose certificate another CA signed is refused by the server
 * (it never gets the hook's first frame); a peer that trusts another CA
 * refuses the server. Either way no request is served. */
START_TEST(internode_wrong_ca_refused)
{
    struct env e;
    struct isrv v;
    struct ipeers q;
    net_tls *sc = ctx(true, "n1", "ca.crt", true);
    net_tls *rogue = ctx(false, "wrong", "ca.crt", false);
    net_tls *doubter = ctx(false, "n2", "wrong-ca.crt", false);
    env_start(&e);
    isrv_start(&e, &v, "n1", sc);

    ipeers_start(&e, &q, "n2", rogue, net_server_port(v.s));
    ck_assert_int_ne(ask(&e, &q, "x"), 0);
    RUN_UNTIL(&e, v.fails.n >= 1);
    ck_assert_uint_eq(v.accepted, 0);
    ck_assert_int_eq(v.fails.last, NET_TLS_FAIL_UNTRUSTED);
    ck_assert_msg(strstr(v.fails.why, "certificate") != NULL, "%s",
                  v.fails.why);
    ck_assert_msg(strncmp(v.fails.peer, "127.0.0.1:", 10) == 0, "%s",
                  v.fails.peer);
    /* the rogue learns it from the alert, a refusal of its own too */
    ck_assert_uint_ge(q.fails.n, 1);
    ck_assert_int_eq(q.fails.last, NET_TLS_FAIL_PEER);
    ck_assert_str_eq(q.fails.peer, q.addr);
    net_peers_close(q.p, ipeers_done, &q);
    RUN_UNTIL(&e, q.closed_done);

    size_t before = v.fails.n;
    ipeers_start(&e, &q, "n2", doubter, net_server_port(v.s));
    ck_assert_int_ne(ask(&e, &q, "x"), 0);
    ck_assert_uint_ge(q.fails.n, 1);
    ck_assert_int_eq(q.fails.last, NET_TLS_FAIL_UNTRUSTED);
    RUN_UNTIL(&e, v.fails.n > before);
    ck_assert_int_eq(v.fails.last, NET_TLS_FAIL_PEER);
    ck_assert_uint_eq(v.accepted, 0);
    istop(&e, &v, &q);
    env_end(&e);
    net_tls_free(sc);
    net_tls_free(rogue);
    net_tls_free(doubter);
}
END_TEST

/* A plaintext peer (the hook's HELLO in the clear) to a TLS server is
 * refused as not TLS; a TLS peer to a plaintext server is closed on (its
 * ClientHello reads as a frame too large for a handshake). */
START_TEST(internode_plaintext_refused)
{
    struct env e;
    struct isrv v;
    struct ipeers q;
    struct net_stats st;
    net_tls *sc = ctx(true, "n1", "ca.crt", true);
    net_tls *cc = ctx(false, "n2", "ca.crt", false);
    env_start(&e);
    isrv_start(&e, &v, "n1", sc);
    ipeers_start(&e, &q, "n2", NULL, net_server_port(v.s));
    ck_assert_int_ne(ask(&e, &q, "x"), 0);
    RUN_UNTIL(&e, v.fails.n >= 1);
    ck_assert_int_eq(v.fails.last, NET_TLS_FAIL_PLAINTEXT);
    ck_assert_msg(strstr(v.fails.why, "not TLS") != NULL, "%s", v.fails.why);
    ck_assert_uint_eq(v.accepted, 0);
    net_server_stats(v.s, &st);
    ck_assert_uint_ge(st.handshake_failed, 1);
    istop(&e, &v, &q);

    isrv_start(&e, &v, "n1", NULL);
    ipeers_start(&e, &q, "n2", cc, net_server_port(v.s));
    ck_assert_int_ne(ask(&e, &q, "x"), 0);
    ck_assert_uint_ge(q.fails.n, 1);
    ck_assert_int_eq(q.fails.last, NET_TLS_FAIL_CLOSED);
    ck_assert_uint_eq(v.accepted, 0);
    istop(&e, &v, &q);
    env_end(&e);
    net_tls_free(sc);
    net_tls_free(cc);
}
END_TEST

/* The hook's name must be one the certificate carries: n2's certificate
 * claiming to be n3 is refused by the server; a server with n1's
 * certificate claiming to be n9 is refused by the peer. */
START_TEST(internode_name_mismatch_refused)
{
    struct env e;
    struct isrv v;
    struct ipeers q;
    net_tls *sc = ctx(true, "n1", "ca.crt", true);
    net_tls *cc = ctx(false, "n2", "ca.crt", false);
    env_start(&e);
    isrv_start(&e, &v, "n1", sc);
    ipeers_start(&e, &q, "n3", cc, net_server_port(v.s));
    ck_assert_int_ne(ask(&e, &q, "x"), 0);
    RUN_UNTIL(&e, v.fails.n >= 1);
    ck_assert_int_eq(v.fails.last, NET_TLS_FAIL_NAME);
    ck_assert_msg(strstr(v.fails.why, "/CN=n2") && strstr(v.fails.why, "n3"),
                  "%s", v.fails.why);
    ck_assert_uint_eq(v.accepted, 0);
    istop(&e, &v, &q);

    isrv_start(&e, &v, "n9", sc);
    ipeers_start(&e, &q, "n2", cc, net_server_port(v.s));
    ck_assert_int_ne(ask(&e, &q, "x"), 0);
    ck_assert_uint_ge(q.fails.n, 1);
    ck_assert_int_eq(q.fails.last, NET_TLS_FAIL_NAME);
    ck_assert_msg(strstr(q.fails.why, "/CN=n1") && strstr(q.fails.why, "n9"),
                  "%s", q.fails.why);
    ck_assert_uint_eq(v.accepted, 0);
    istop(&e, &v, &q);

    /* an address the certificate carries as an IP SAN is a name too */
    isrv_start(&e, &v, "127.0.0.2", sc); /* n1's: IP:127.0.0.2 */
    ipeers_start(&e, &q, "n2", cc, net_server_port(v.s));
    ck_assert_int_eq(ask(&e, &q, "x"), 0);
    istop(&e, &v, &q);
    env_end(&e);
    net_tls_free(sc);
    net_tls_free(cc);
}
END_TEST

/* A certificate that was valid when its context loaded and has expired
 * since is refused by the peer verifying it, which says since when. */
START_TEST(internode_expired_peer_refused)
{
    char cmd[2048], nb[32], na[32];
    time_t now = time(NULL);
    struct tm tm;
    time_t from = now - 3600, until = now + 3;
    strftime(nb, sizeof(nb), "%Y%m%d%H%M%SZ", gmtime_r(&from, &tm));
    strftime(na, sizeof(na), "%Y%m%d%H%M%SZ", gmtime_r(&until, &tm));
    snprintf(cmd, sizeof(cmd),
             "cd %s && openssl genpkey -algorithm EC -pkeyopt "
             "ec_paramgen_curve:P-256 -out short.key 2>/dev/null && "
             "openssl req -new -key short.key -subj /CN=n2 -out short.csr "
             "2>/dev/null && openssl ca -batch -config ca.db/ca.cnf -cert "
             "ca.crt -keyfile ca.key -startdate %s -enddate %s -in short.csr "
             "-out short.crt -notext 2>/dev/null",
             dir, nb, na);
    ck_assert_int_eq(system(cmd), 0);
    net_tls *cc = ctx(false, "short", "ca.crt", false); /* valid now */
    net_tls *sc = ctx(true, "n1", "ca.crt", true);
    while (time(NULL) <= until + 1)
        sleep(1);
    struct env e;
    struct isrv v;
    struct ipeers q;
    env_start(&e);
    isrv_start(&e, &v, "n1", sc);
    ipeers_start(&e, &q, "n2", cc, net_server_port(v.s));
    ck_assert_int_ne(ask(&e, &q, "x"), 0);
    RUN_UNTIL(&e, v.fails.n >= 1);
    ck_assert_int_eq(v.fails.last, NET_TLS_FAIL_EXPIRED);
    ck_assert_msg(strstr(v.fails.why, "expired") &&
                      strstr(v.fails.why, "notAfter") &&
                      strstr(v.fails.why, "/CN=n2"),
                  "%s", v.fails.why);
    ck_assert_uint_eq(v.accepted, 0);
    istop(&e, &v, &q);
    env_end(&e);
    net_tls_free(sc);
    net_tls_free(cc);
}
END_TEST

/* Contexts replaced: connections open go on with theirs, new ones use the
 * new: a server that now trusts another CA refuses a new peer while the
 * old connection is served; peers given a certificate of another CA are
 * refused on their next connection. */
START_TEST(internode_context_replaced_live_untouched)
{
    struct env e;
    struct isrv v;
    struct ipeers q1, q2;
    net_tls *sc = ctx(true, "n1", "ca.crt", true);
    net_tls *sc2 = ctx(true, "n1", "wrong-ca.crt", true);
    net_tls *cc = ctx(false, "n2", "ca.crt", false);
    net_tls *rogue = ctx(false, "wrong", "ca.crt", false);
    env_start(&e);
    isrv_start(&e, &v, "n1", sc);
    int port = net_server_port(v.s);
    ipeers_start(&e, &q1, "n2", cc, port);
    ck_assert_int_eq(ask(&e, &q1, "before"), 0);

    ck_assert_int_eq(net_server_tls_set(v.s, sc2), 0);
    ipeers_start(&e, &q2, "n2", cc, port);
    ck_assert_int_ne(ask(&e, &q2, "new"), 0);
    ck_assert_int_eq(v.fails.last, NET_TLS_FAIL_UNTRUSTED);
    ck_assert_int_eq(ask(&e, &q1, "still"), 0);
    ck_assert_uint_eq(v.accepted, 1);

    ck_assert_int_eq(net_server_tls_set(v.s, sc), 0);
    ck_assert_int_eq(net_peers_tls_set(q1.p, rogue), 0);
    ck_assert_int_eq(ask(&e, &q1, "live"), 0); /* its connection stays */
    net_peers_drop(q1.p, q1.addr);
    ck_assert_int_ne(ask(&e, &q1, "reconnected"), 0);
    ck_assert_int_eq(v.fails.last, NET_TLS_FAIL_UNTRUSTED);
    ck_assert_int_eq(net_peers_tls_set(q1.p, cc), 0);
    net_peers_drop(q1.p, q1.addr);
    ck_assert_int_eq(ask(&e, &q1, "back"), 0);
    ck_assert_int_eq(net_peers_tls_set(q1.p, NULL), -EINVAL);

    net_peers_close(q2.p, ipeers_done, &q2);
    RUN_UNTIL(&e, q2.closed_done);
    istop(&e, &v, &q1);
    env_end(&e);
    net_tls_free(sc);
    net_tls_free(sc2);
    net_tls_free(cc);
    net_tls_free(rogue);
}
END_TEST

int main(void)
{
    Suite *s = suite_create("net_tls");
    TCase *tc = tcase_create("sessions");
    tcase_add_unchecked_fixture(tc, pki_make, pki_remove);
    tcase_add_test(tc, pair_handshake_and_data);
    tcase_add_test(tc, wrong_ca_refused);
    tcase_add_test(tc, mutual_refuses_wrong_or_missing_client_cert);
    tcase_add_test(tc, verify_name_checked);
    tcase_add_test(tc, plaintext_to_server_refused);
    tcase_add_test(tc, load_refuses_bad_certificates);
    suite_add_tcase(s, tc);
    tc = tcase_create("server");
    tcase_add_unchecked_fixture(tc, pki_make, pki_remove);
    tcase_add_test(tc, server_echo_through_small_cap);
    tcase_add_test(tc, server_refuses_plaintext);
    tcase_add_test(tc, server_input_cap_holds_over_tls);
    tcase_add_test(tc, server_context_replaced_live_untouched);
    tcase_add_test(tc, server_one_request_at_a_time);
    suite_add_tcase(s, tc);
    tc = tcase_create("internode");
    tcase_add_unchecked_fixture(tc, pki_make, pki_remove);
    tcase_add_test(tc, internode_mutual_ok);
    tcase_add_test(tc, internode_wrong_ca_refused);
    tcase_add_test(tc, internode_plaintext_refused);
    tcase_add_test(tc, internode_name_mismatch_refused);
    tcase_add_test(tc, internode_expired_peer_refused);
    tcase_add_test(tc, internode_context_replaced_live_untouched);
    suite_add_tcase(s, tc);
    SRunner *sr = srunner_create(s);
    srunner_run_all(sr, CK_NORMAL);
    int failed = srunner_ntests_failed(sr);
    srunner_free(sr);
    return failed ? EXIT_FAILURE : EXIT_SUCCESS;
}
