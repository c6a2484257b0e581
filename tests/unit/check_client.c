/*
 * check_client.c - libringkv against a fake server thread on 127.0.0.1
 * (client_fixture.h, which says how it misbehaves on cue): synchronous
 * calls, pipelining, failures (timeouts, reconnects, failover between
 * hosts, typed errors, authentication) and the handle's configuration.
 *
 * The `ringkv` CLI and `ringkv-load`, run against the same fake server,
 * are check_client_programs.c's; token-aware routing is
 * check_client_ring.c's.
 */
#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
#include <poll.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include <check.h>

#include "client/ringkv.h"
#include "common/rk.h"
#include "tests/unit/client_fixture.h"
#include "wire/client_msg.h"

static ringkv *client_for(struct fake *f, const char *password, int timeout)
{
    char hosts[64];
    snprintf(hosts, sizeof(hosts), "127.0.0.1:%u", f->port);
    struct ringkv_opts o = RINGKV_OPTS_INIT;
    o.hosts = hosts;
    o.password = password;
    o.timeout_ms = timeout;
    ringkv *c = NULL;
    ck_assert_int_eq(ringkv_new(&c, &o, NULL), 0);
    return c;
}

/* ---- tests ----------------------------------------------------------------
 */

START_TEST(sync_put_get_del)
{
    struct fake *f = fake_start(false, NULL);
    ringkv *c = client_for(f, NULL, 5000);
    uint8_t *v;
    size_t n;
    ck_assert_int_eq(ringkv_get(c, &v, &n, "k", 1), RK_ENOTFOUND);
    ck_assert_ptr_null(v);
    ck_assert_int_eq(ringkv_put(c, "k", 1, "hello", 5, 0), 0);
    ck_assert_int_eq(ringkv_get(c, &v, &n, "k", 1), 0);
    ck_assert_uint_eq(n, 5);
    ck_assert_str_eq((char *)v, "hello");
    free(v);
    ck_assert_int_eq(ringkv_put(c, "e", 1, "", 0, 60), 0);
    ck_assert_int_eq(ringkv_get(c, &v, &n, "e", 1), 0);
    ck_assert_uint_eq(n, 0);
    free(v);
    ck_assert_int_eq(ringkv_del(c, "k", 1), 0);
    ck_assert_int_eq(ringkv_get(c, &v, &n, "k", 1), RK_ENOTFOUND);
    ck_assert_int_eq(atomic_load(&f->accepted), 1);
    /* invalid requests fail locally, without a round trip */
    int before = atomic_load(&f->requests);
    ck_assert_int_eq(ringkv_get(c, &v, &n, "", 0), RK_EBADREQ);
    ck_assert_int_eq(atomic_load(&f->requests), before);
    ringkv_free(c);
    fake_stop(f);
}
END_TEST

struct seen {
    int n, stop_at;
    char keys[8][8];
};

static int on_key(const uint8_t *key, size_t len, void *arg)
{
    struct seen *s = arg;
    if (s->n == s->stop_at)
        return 42;
    ck_assert(s->n < 8 && len < 8);
    memcpy(s->keys[s->n], key, len);
    s->keys[s->n++][len] = '\0';
    return 0;
}

/* ringkv_scan: one call each; the cursor moves on success only, and the
 * callback sees each key of the answer (and can stop the walk). */
START_TEST(scan_calls)
{
    struct fake *f = fake_start(false, NULL);
    ringkv *c = client_for(f, NULL, 2000);
    const char *names[] = {"a", "b", "c", "d", "e"};
    for (int i = 0; i < 5; i++)
        ck_assert_int_eq(ringkv_put(c, names[i], 1, "v", 1, 0), 0);
    struct seen s = {.stop_at = -1};
    uint64_t cursor = 0;
    int calls = 0;
    do {
        ck_assert_int_eq(ringkv_scan(c, &cursor, NULL, 2, on_key, &s), 0);
        calls++;
    } while (cursor != 0);
    ck_assert_int_eq(s.n, 5);
    ck_assert_int_eq(calls, 3);
    for (int i = 0; i < 5; i++) {
        bool found = false;
        for (int k = 0; k < s.n; k++)
            found |= strcmp(s.keys[k], names[i]) == 0;
        ck_assert(found);
    }
    /* an error: the cursor stays where it was, to call again */
    cursor = 3;
    ck_assert_int_eq(ringkv_scan(c, &cursor, "!", 2, on_key, &s), RK_EBADREQ);
    ck_assert_uint_eq(cursor, 3);
    /* the callback stops the walk: its return, cursor unchanged */
    s = (struct seen){.stop_at = 1};
    cursor = 0;
    ck_assert_int_eq(ringkv_scan(c, &cursor, NULL, 4, on_key, &s), 42);
    ck_assert_uint_eq(cursor, 0);
    ck_assert_int_eq(s.n, 1);
    ringkv_free(c);
    fake_stop(f);
}
END_TEST

START_TEST(large_values)
{
    struct fake *f = fake_start(false, NULL);
    ringkv *c = client_for(f, NULL, 20000);
    size_t n = 4u << 20;
    uint8_t *big = malloc(n);
    for (size_t i = 0; i < n; i++)
        big[i] = (uint8_t)(i * 7 + (i >> 13));
    ck_assert_int_eq(ringkv_put(c, "big", 3, big, n, 0), 0);
    uint8_t *v;
    size_t vn;
    ck_assert_int_eq(ringkv_get(c, &v, &vn, "big", 3), 0);
    ck_assert_uint_eq(vn, n);
    ck_assert_mem_eq(v, big, n);
    free(v);
    free(big);
    ringkv_free(c);
    fake_stop(f);
}
END_TEST

START_TEST(pipelined_out_of_order)
{
    struct fake *f = fake_start(true, NULL);
    ringkv *c = client_for(f, NULL, 10000);
    enum { N = 200 };
    uint64_t ids[N];
    char keys[N][16];
    /* 100 puts then 100 gets of the same keys, all in flight at once */
    for (int i = 0; i < N; i++) {
        snprintf(keys[i], sizeof(keys[i]), "key%d", i % 50);
        struct wire_creq q = {.op = i < 100 ? WIRE_COP_PUT : WIRE_COP_GET,
                              .has = WIRE_CREQ_KEY,
                              .key = RK_SLICE(keys[i], strlen(keys[i]))};
        if (i < 100) {
            q.has |= WIRE_CREQ_VALUE;
            q.value = q.key;
        }
        ck_assert_int_eq(ringkv_send(c, &ids[i], &q), 0);
    }
    ck_assert_uint_eq(ringkv_pending(c), N);
    ck_assert_int_eq(ringkv_flush(c), 0);
    bool seen[N] = {false};
    int out_of_order = 0;
    uint64_t last = 0;
    for (int k = 0; k < N; k++) {
        struct wire_cresp r;
        ck_assert_int_eq(ringkv_recv(c, &r, -1), 0);
        ck_assert_int_eq(r.err, 0);
        int i = -1;
        for (int j = 0; j < N; j++)
            if (ids[j] == r.id)
                i = j;
        ck_assert_int_ge(i, 0);
        ck_assert(!seen[i]);
        seen[i] = true;
        out_of_order += r.id < last;
        last = r.id;
        if (i >= 100) {
            ck_assert_uint_eq(r.op, WIRE_COP_GET);
            ck_assert_uint_eq(r.value.len, strlen(keys[i]));
            ck_assert_mem_eq(r.value.p, keys[i], r.value.len);
        } else {
            ck_assert_uint_eq(r.op, WIRE_COP_PUT);
        }
        wire_cresp_clear(&r);
    }
    /* the fake answers each batch of ten last-first */
    ck_assert_int_eq(out_of_order, N - N / 10);
    ck_assert_uint_eq(ringkv_pending(c), 0);
    struct wire_cresp r;
    ck_assert_int_eq(ringkv_recv(c, &r, 10), RK_EBADREQ);
    ck_assert_int_eq(atomic_load(&f->accepted), 1);
    ringkv_free(c);
    fake_stop(f);
}
END_TEST

/* Many large requests without reading: flush must drain responses while it
 * writes, or client and server block each other forever. */
START_TEST(pipeline_does_not_deadlock)
{
    struct fake *f = fake_start(false, NULL);
    ringkv *c = client_for(f, NULL, 30000);
    enum { N = 3000 };
    static uint8_t val[8192];
    memset(val, 'v', sizeof(val));
    for (int i = 0; i < N; i++) {
        struct wire_creq q = {.op = WIRE_COP_PUT,
                              .has = WIRE_CREQ_KEY | WIRE_CREQ_VALUE,
                              .key = RK_SLICE("same", 4),
                              .value = RK_SLICE(val, sizeof(val))};
        ck_assert_int_eq(ringkv_send(c, NULL, &q), 0);
    }
    ck_assert_int_eq(ringkv_flush(c), 0);
    for (int i = 0; i < N; i++) {
        struct wire_cresp r;
        ck_assert_int_eq(ringkv_recv(c, &r, -1), 0);
        ck_assert_int_eq(r.err, 0);
        wire_cresp_clear(&r);
    }
    ringkv_free(c);
    fake_stop(f);
}
END_TEST

START_TEST(timeouts)
{
    struct fake *f = fake_start(false, NULL);
    ringkv *c = client_for(f, NULL, 200);
    uint8_t *v;
    size_t n;
    ck_assert_int_eq(ringkv_get(c, &v, &n, "slow", 4), RK_ETIMEOUT);
    ck_assert_ptr_nonnull(strstr(ringkv_errmsg(c), "no answer"));
    /* the handle reconnects and works */
    ck_assert_int_eq(ringkv_put(c, "a", 1, "1", 1, 0), 0);
    ck_assert_int_eq(atomic_load(&f->accepted), 2);
    /* a pipelined recv timeout keeps the connection and the request */
    struct wire_creq q = {
        .op = WIRE_COP_GET, .has = WIRE_CREQ_KEY, .key = RK_SLICE("slow", 4)};
    ck_assert_int_eq(ringkv_send(c, NULL, &q), 0);
    q.key = RK_SLICE("a", 1);
    uint64_t id2;
    ck_assert_int_eq(ringkv_send(c, &id2, &q), 0);
    struct wire_cresp r;
    ck_assert_int_eq(ringkv_recv(c, &r, 5000), 0);
    ck_assert_uint_eq(r.id, id2);
    wire_cresp_clear(&r);
    ck_assert_int_eq(ringkv_recv(c, &r, 50), RK_ETIMEOUT);
    ck_assert_uint_eq(ringkv_pending(c), 1);
    ck_assert_int_eq(atomic_load(&f->accepted), 2);
    ringkv_free(c);
    fake_stop(f);
}
END_TEST

START_TEST(reconnect_and_retry)
{
    struct fake *f = fake_start(false, NULL);
    ringkv *c = client_for(f, NULL, 5000);
    ck_assert_int_eq(ringkv_put(c, "x", 1, "1", 1, 0), 0);
    /* closed the first time: a read is resent on a new connection */
    uint8_t *v;
    size_t n;
    ck_assert_int_eq(ringkv_get(c, &v, &n, "droponce", 8), RK_ENOTFOUND);
    ck_assert_int_eq(atomic_load(&f->accepted), 2);
    /* closed every time: the retry fails too */
    ck_assert_int_eq(ringkv_get(c, &v, &n, "drop", 4), RK_ECLOSED);
    ck_assert_ptr_nonnull(strstr(ringkv_errmsg(c), "closed"));
    ck_assert_int_eq(atomic_load(&f->accepted), 3);
    /* and the next call reconnects */
    ck_assert_int_eq(ringkv_get(c, &v, &n, "x", 1), 0);
    free(v);
    ck_assert_int_eq(atomic_load(&f->accepted), 4);
    /* pipelined: a lost connection fails recv and forgets what was sent */
    struct wire_creq q = {
        .op = WIRE_COP_GET, .has = WIRE_CREQ_KEY, .key = RK_SLICE("drop", 4)};
    ck_assert_int_eq(ringkv_send(c, NULL, &q), 0);
    struct wire_cresp r;
    ck_assert_int_eq(ringkv_recv(c, &r, 5000), RK_ECLOSED);
    ck_assert_uint_eq(ringkv_pending(c), 0);
    ringkv_free(c);
    fake_stop(f);
}
END_TEST

/* Regression: ringkv_call resent a PUT or DEL on a new connection after
 * the first connection broke although the request had been written whole,
 * so a write the first node had already applied was applied again with a
 * new, later timestamp (overwriting any write made in between). */
START_TEST(no_resend_of_sent_write)
{
    struct fake *f = fake_start(false, NULL);
    ringkv *c = client_for(f, NULL, 5000);
    ck_assert_int_eq(ringkv_put(c, "applydrop", 9, "v", 1, 0), RK_ECLOSED);
    ck_assert_ptr_nonnull(strstr(ringkv_errmsg(c), "PUT was sent"));
    ck_assert_ptr_nonnull(strstr(ringkv_errmsg(c), "may have been applied"));
    ck_assert_int_eq(atomic_load(&f->applied), 1);
    ck_assert_int_eq(atomic_load(&f->accepted), 1);
    ck_assert_int_eq(ringkv_del(c, "applydrop", 9), RK_ECLOSED);
    ck_assert_ptr_nonnull(strstr(ringkv_errmsg(c), "DEL was sent"));
    ck_assert_int_eq(atomic_load(&f->applied), 2);
    ck_assert_int_eq(atomic_load(&f->accepted), 2);
    /* the handle is usable again */
    ck_assert_int_eq(ringkv_put(c, "k", 1, "v", 1, 0), 0);
    /* what may be resent */
    struct wire_creq q = {.op = WIRE_COP_GET};
    static const uint32_t idem[] = {
        WIRE_COP_HELLO,         WIRE_COP_PING,     WIRE_COP_GET,
        WIRE_COP_MGET,          WIRE_COP_STATUS,   WIRE_COP_RING,
        WIRE_COP_ENDPOINTS,     WIRE_COP_METRICS,  WIRE_COP_NETSTATS,
        WIRE_COP_LISTSNAPSHOTS, WIRE_COP_RELOADTLS};
    static const uint32_t once[] = {
        WIRE_COP_PUT,          WIRE_COP_DEL,        WIRE_COP_JOIN,
        WIRE_COP_DECOMMISSION, WIRE_COP_REMOVENODE, WIRE_COP_REPAIR,
        WIRE_COP_CLEANUP,      WIRE_COP_SNAPSHOT,   WIRE_COP_CLEARSNAPSHOT};
    for (size_t i = 0; i < sizeof(idem) / sizeof(idem[0]); i++) {
        q.op = idem[i];
        ck_assert_msg(ringkv_idempotent(&q), "%s", wire_cop_name(q.op));
    }
    for (size_t i = 0; i < sizeof(once) / sizeof(once[0]); i++) {
        q.op = once[i];
        ck_assert_msg(!ringkv_idempotent(&q), "%s", wire_cop_name(q.op));
    }
    ringkv_free(c);
    fake_stop(f);
}
END_TEST

/* The client's socket to the fake (the one whose peer is the fake's
 * listening port), so a test can wait until it has seen the fake close. */
static int client_fd_to(const struct fake *f)
{
    for (int fd = 3; fd < 1024; fd++) {
        struct sockaddr_in a;
        socklen_t sl = sizeof(a);
        if (getpeername(fd, (struct sockaddr *)&a, &sl) == 0 &&
            a.sin_family == AF_INET && ntohs(a.sin_port) == f->port)
            return fd;
    }
    return -1;
}

/* A write is still resent when the server cannot have decoded it: when the
 * connection was found closed before sending, and when it broke before the
 * frame was written whole. */
START_TEST(write_resent_when_not_sent_whole)
{
    struct fake *f = fake_start(false, NULL);
    ringkv *c = client_for(f, NULL, 30000);
    uint8_t *v;
    size_t n;
    /* the fake answers, then closes the idle connection */
    ck_assert_int_eq(ringkv_get(c, &v, &n, "closeafter", 10), RK_ENOTFOUND);
    int fd = client_fd_to(f);
    ck_assert_int_ge(fd, 0);
    struct pollfd p = {fd, POLLRDHUP, 0};
    ck_assert_int_eq(poll(&p, 1, -1), 1);
    ck_assert_int_eq(ringkv_put(c, "k", 1, "v", 1, 0), 0);
    ck_assert_int_eq(atomic_load(&f->accepted), 2);
    ck_assert_int_eq(atomic_load(&f->requests), 2);
    /* the fake closes the connection 64 KiB into a 16 MiB PUT: the frame
     * cannot have been written whole (socket buffers hold a few MiB) */
    uint8_t *big = malloc(RK_MAX_VALUE);
    ck_assert_ptr_nonnull(big);
    memset(big, 'b', RK_MAX_VALUE);
    atomic_store(&f->close_partial, true);
    ck_assert_int_eq(ringkv_put(c, "big", 3, big, RK_MAX_VALUE, 0), 0);
    ck_assert(!atomic_load(&f->close_partial));
    ck_assert_int_eq(atomic_load(&f->accepted), 3);
    ck_assert_int_eq(ringkv_get(c, &v, &n, "big", 3), 0);
    ck_assert_uint_eq(n, RK_MAX_VALUE);
    free(v);
    free(big);
    ringkv_free(c);
    fake_stop(f);
}
END_TEST

START_TEST(failover_between_hosts)
{
    struct fake *f = fake_start(false, NULL);
    char hosts[128];
    snprintf(hosts, sizeof(hosts), "127.0.0.1:%u, 127.0.0.1:%u", dead_port(),
             f->port);
    struct ringkv_opts o = RINGKV_OPTS_INIT;
    o.hosts = hosts;
    ringkv *c;
    ck_assert_int_eq(ringkv_new(&c, &o, NULL), 0);
    ck_assert_int_eq(ringkv_connect(c), 0);
    char want[32];
    snprintf(want, sizeof(want), "127.0.0.1:%u", f->port);
    ck_assert_str_eq(ringkv_peer(c), want);
    ck_assert_int_eq(ringkv_put(c, "a", 1, "b", 1, 0), 0);
    ringkv_free(c);
    /* nobody listening anywhere */
    snprintf(hosts, sizeof(hosts), "127.0.0.1:%u", dead_port());
    ck_assert_int_eq(ringkv_new(&c, &o, NULL), 0);
    ck_assert_int_eq(ringkv_connect(c), -ECONNREFUSED);
    ck_assert_ptr_nonnull(strstr(ringkv_errmsg(c), "cannot connect"));
    ringkv_free(c);
    /* two hosts, neither listening: each host's failure, "; " between */
    unsigned d1 = dead_port(), d2 = dead_port();
    snprintf(hosts, sizeof(hosts), "127.0.0.1:%u,127.0.0.1:%u", d1, d2);
    ck_assert_int_eq(ringkv_new(&c, &o, NULL), 0);
    ck_assert_int_eq(ringkv_connect(c), -ECONNREFUSED);
    char both[160];
    snprintf(both, sizeof(both), "127.0.0.1:%u: %s; 127.0.0.1:%u: %s", d1,
             rk_strerror(-ECONNREFUSED), d2, rk_strerror(-ECONNREFUSED));
    ck_assert_msg(strstr(ringkv_errmsg(c), both), "%s", ringkv_errmsg(c));
    ringkv_free(c);
    fake_stop(f);
}
END_TEST

/* A listening socket on 127.0.0.1 (a connect to it succeeds without an
 * accept, up to its backlog); its port in *port. */
static int listener(uint16_t *port)
{
    int fd = socket(AF_INET, SOCK_STREAM, 0);
    ck_assert_int_ge(fd, 0);
    struct sockaddr_in a = {.sin_family = AF_INET,
                            .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
    ck_assert_int_eq(bind(fd, (struct sockaddr *)&a, sizeof(a)), 0);
    socklen_t sl = sizeof(a);
    ck_assert_int_eq(getsockname(fd, (struct sockaddr *)&a, &sl), 0);
    ck_assert_int_eq(listen(fd, 512), 0);
    *port = ntohs(a.sin_port);
    return fd;
}

/* Which of ports[0..n) c is connected to (ringkv_peer). */
static int peer_index(ringkv *c, const uint16_t *ports, int n)
{
    for (int i = 0; i < n; i++) {
        char want[32];
        snprintf(want, sizeof(want), "127.0.0.1:%u", ports[i]);
        if (strcmp(ringkv_peer(c), want) == 0)
            return i;
    }
    ck_abort_msg("connected to %s, not a listed host", ringkv_peer(c));
    return -1;
}

/* opts.spread: clients given one list spread over it, and after a lost
 * connection each goes to another host chosen at random, so the clients of
 * a failed host spread over the rest; without it every client takes the
 * first host, and on losing it the next one (regression:
 * failover_piles_on_next_host: all of a dead node's clients moved to its
 * successor, doubling its load). The chance that a spread count below
 * fails by luck is under 1e-7. */
#define SPREAD_CLIENTS 200
static void spread_run(enum ringkv_spread spread)
{
    enum { N = 4 };
    uint16_t ports[N];
    int lfd[N];
    char hosts[128];
    size_t len = 0;
    for (int i = 0; i < N; i++) {
        lfd[i] = listener(&ports[i]);
        len += (size_t)snprintf(hosts + len, sizeof(hosts) - len,
                                "%s127.0.0.1:%u", i ? "," : "", ports[i]);
    }
    struct ringkv_opts o = RINGKV_OPTS_INIT;
    o.hosts = hosts;
    o.spread = spread;
    static ringkv *c[SPREAD_CLIENTS];
    int on[N] = {0}, first[SPREAD_CLIENTS];
    for (int k = 0; k < SPREAD_CLIENTS; k++) {
        ck_assert_int_eq(ringkv_new(&c[k], &o, NULL), 0);
        ck_assert_int_eq(ringkv_connect(c[k]), 0);
        first[k] = peer_index(c[k], ports, N);
        on[first[k]]++;
    }
    for (int i = 0; i < N; i++)
        ck_assert_msg(spread == RINGKV_SPREAD_RANDOM
                          ? on[i] > 0
                          : on[i] == (i ? 0 : SPREAD_CLIENTS),
                      "spread %d: %d clients on host %d", spread, on[i], i);
    /* every connection lost: where do host 0's clients go? */
    int moved[N] = {0};
    for (int k = 0; k < SPREAD_CLIENTS; k++) {
        ringkv_close(c[k]);
        ck_assert_int_eq(ringkv_connect(c[k]), 0);
        int now = peer_index(c[k], ports, N);
        ck_assert_int_ne(now, first[k]);
        if (first[k] == 0)
            moved[now]++;
        ringkv_free(c[k]);
    }
    if (spread != RINGKV_SPREAD_NONE) /* each other host takes some */
        ck_assert(moved[1] > 0 && moved[2] > 0 && moved[3] > 0);
    else
        ck_assert_int_eq(moved[1], SPREAD_CLIENTS);
    for (int i = 0; i < N; i++)
        close(lfd[i]);
}

START_TEST(spread_clients_over_hosts)
{
    spread_run(RINGKV_SPREAD_NONE);
    spread_run(RINGKV_SPREAD_RANDOM);
    spread_run(RINGKV_SPREAD_FAILOVER);
}
END_TEST

START_TEST(ring_stale_tries_next_host)
{
    struct fake *stale = fake_start(false, NULL);
    struct fake *good = fake_start(false, NULL);
    atomic_store(&stale->stale, true);
    char hosts[64];
    snprintf(hosts, sizeof(hosts), "127.0.0.1:%u,127.0.0.1:%u", stale->port,
             good->port);
    struct ringkv_opts o = RINGKV_OPTS_INIT;
    o.hosts = hosts;
    ringkv *c;
    ck_assert_int_eq(ringkv_new(&c, &o, NULL), 0);
    ck_assert_int_eq(ringkv_put(c, "k", 1, "v", 1, 0), 0);
    char want[32];
    snprintf(want, sizeof(want), "127.0.0.1:%u", good->port);
    ck_assert_str_eq(ringkv_peer(c), want);
    ck_assert_int_eq(atomic_load(&stale->requests), 1);
    ringkv_free(c);
    /* with one host there is nowhere else to go: the error comes back */
    snprintf(hosts, sizeof(hosts), "127.0.0.1:%u", stale->port);
    ck_assert_int_eq(ringkv_new(&c, &o, NULL), 0);
    ck_assert_int_eq(ringkv_put(c, "k", 1, "v", 1, 0), RK_ESTALE);
    ck_assert_str_eq(ringkv_errmsg(c), "RING_STALE: ring epoch 4 < 5");
    ringkv_free(c);
    fake_stop(stale);
    fake_stop(good);
}
END_TEST

START_TEST(error_mapping)
{
    struct fake *f = fake_start(false, NULL);
    ringkv *c = client_for(f, NULL, 5000);
    uint8_t *v;
    size_t n;
    ck_assert_int_eq(ringkv_get(c, &v, &n, "unavail", 7), RK_EUNAVAILABLE);
    ck_assert_str_eq(ringkv_errmsg(c),
                     "UNAVAILABLE: 1 of 3 replicas alive, QUORUM needs 2");
    struct wire_creq q = {.op = WIRE_COP_PUT,
                          .has = WIRE_CREQ_KEY | WIRE_CREQ_VALUE,
                          .key = RK_SLICE("timeout", 7),
                          .value = RK_SLICE("v", 1)};
    struct wire_cresp r;
    ck_assert_int_eq(ringkv_call(c, &r, &q), RK_ETIMEOUT);
    ck_assert_uint_eq(r.acks, 1);
    ck_assert_uint_eq(r.need, 2);
    wire_cresp_clear(&r);
    struct wire_creq j = {.op = WIRE_COP_JOIN};
    ck_assert_int_eq(ringkv_call(c, &r, &j), RK_ENOTSUP);
    ck_assert_ptr_nonnull(strstr(ringkv_errmsg(c), "NOT_IMPLEMENTED"));
    wire_cresp_clear(&r);
    struct wire_creq s = {.op = WIRE_COP_STATUS};
    ck_assert_int_eq(ringkv_call(c, &r, &s), 0);
    ck_assert_uint_eq(r.nnodes, 2);
    ck_assert_uint_eq(r.epoch, 3);
    wire_cresp_clear(&r);
    /* an undecodable answer is a protocol error and drops the link */
    ck_assert_int_eq(ringkv_get(c, &v, &n, "garbage", 7), RK_EPROTO);
    ck_assert_int_eq(ringkv_get(c, &v, &n, "unavail", 7), RK_EUNAVAILABLE);
    ck_assert_int_eq(atomic_load(&f->accepted), 2);
    ringkv_free(c);
    fake_stop(f);
}
END_TEST

START_TEST(default_consistency_applied)
{
    struct fake *f = fake_start(false, NULL);
    char hosts[64];
    snprintf(hosts, sizeof(hosts), "127.0.0.1:%u", f->port);
    struct ringkv_opts o = RINGKV_OPTS_INIT;
    o.hosts = hosts;
    o.consistency = WIRE_CCL_LOCAL_QUORUM;
    ringkv *c;
    ck_assert_int_eq(ringkv_new(&c, &o, NULL), 0);
    ck_assert_int_eq(ringkv_put(c, "a", 1, "b", 1, 0), 0);
    ck_assert_uint_eq(f->last_cl, WIRE_CCL_LOCAL_QUORUM);
    struct wire_creq q = {.op = WIRE_COP_DEL,
                          .has = WIRE_CREQ_KEY | WIRE_CREQ_CL,
                          .key = RK_SLICE("a", 1),
                          .cl = WIRE_CCL_ALL};
    struct wire_cresp r;
    ck_assert_int_eq(ringkv_call(c, &r, &q), 0);
    wire_cresp_clear(&r);
    ck_assert_uint_eq(f->last_cl, WIRE_CCL_ALL);
    ringkv_free(c);
    o.consistency = 99;
    const char *why = NULL;
    ck_assert_int_eq(ringkv_new(&c, &o, &why), RK_ECONFIG);
    ck_assert_ptr_nonnull(why);
    fake_stop(f);
}
END_TEST

START_TEST(authentication)
{
    struct fake *f = fake_start(false, "s3cret");
    ringkv *c = client_for(f, "wrong", 5000);
    uint8_t *v;
    size_t n;
    ck_assert_int_eq(ringkv_get(c, &v, &n, "a", 1), RK_EAUTH);
    ck_assert_ptr_nonnull(strstr(ringkv_errmsg(c), "wrong password"));
    ringkv_free(c);
    c = client_for(f, NULL, 5000);
    ck_assert_int_eq(ringkv_get(c, &v, &n, "a", 1), RK_EAUTH);
    ringkv_free(c);
    c = client_for(f, "s3cret", 5000);
    ck_assert_int_eq(ringkv_put(c, "a", 1, "b", 1, 0), 0);
    ck_assert_int_eq(ringkv_get(c, &v, &n, "a", 1), 0);
    free(v);
    ringkv_free(c);
    fake_stop(f);
}
END_TEST

START_TEST(host_lists)
{
    static const char *good[] = {"h",     "h:1",        "h:65535", "a,b:7,c",
                                 "[::1]", "[::1]:7380", " x , y "};
    static const char *bad[] = {"",        ",",   "h:",  "h:0",
                                "h:65536", "h:x", "::1", "[::1",
                                "[::1]x",  ":80", "h,",  "h:123456"};
    struct ringkv_opts o = RINGKV_OPTS_INIT;
    ringkv *c;
    for (size_t i = 0; i < sizeof(good) / sizeof(good[0]); i++) {
        o.hosts = good[i];
        ck_assert_msg(ringkv_new(&c, &o, NULL) == 0, "%s", good[i]);
        ringkv_free(c);
    }
    for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
        o.hosts = bad[i];
        const char *why = NULL;
        ck_assert_msg(ringkv_new(&c, &o, &why) == RK_ECONFIG, "%s", bad[i]);
        ck_assert_ptr_null(c);
        ck_assert_ptr_nonnull(why);
    }
    ringkv_free(NULL);
}
END_TEST

/* Regression: the CLI's exit codes, ringkv-load's error counts and the
 * library's reconnects each had their own list of connection errors, and
 * they disagreed (ringkv-load counted an unresolvable host, -EHOSTUNREACH,
 * as OTHER; the library did not reconnect after -ENETUNREACH; the CLI
 * exited 8 on -ENOTCONN). Now there is one, ringkv_errkind. */
START_TEST(errkind_one_list)
{
    static const int conn[] = {RK_ECLOSED,    -ECONNREFUSED, -ECONNRESET,
                               -ECONNABORTED, -EPIPE,        -ENOTCONN,
                               -ETIMEDOUT,    -EHOSTUNREACH, -EHOSTDOWN,
                               -ENETUNREACH,  -ENETDOWN,     -EADDRNOTAVAIL};
    for (size_t i = 0; i < sizeof(conn) / sizeof(conn[0]); i++) {
        ck_assert_msg(ringkv_errkind(conn[i]) == RINGKV_KIND_CONNECTION, "%s",
                      rk_strerror(conn[i]));
        ck_assert(ringkv_retryable(conn[i], true));
        ck_assert(!ringkv_retryable(conn[i], false));
    }
    ck_assert_int_eq(ringkv_errkind(0), RINGKV_KIND_OK);
    ck_assert_int_eq(ringkv_errkind(RK_ENOTFOUND), RINGKV_KIND_NOTFOUND);
    ck_assert_int_eq(ringkv_errkind(RK_EAUTH), RINGKV_KIND_AUTH);
    /* CLOCK_SKEW: exit 8 (OTHER) until 2026-12-06 */
    static const int cluster[] = {RK_EUNAVAILABLE, RK_ETIMEOUT, RK_EOVERLOADED,
                                  RK_ESTALE, RK_ECLOCKSKEW};
    for (size_t i = 0; i < sizeof(cluster) / sizeof(cluster[0]); i++)
        ck_assert_int_eq(ringkv_errkind(cluster[i]), RINGKV_KIND_CLUSTER);
    ck_assert_int_eq(ringkv_errkind(RK_EBADREQ), RINGKV_KIND_REJECTED);
    ck_assert_int_eq(ringkv_errkind(RK_ETOOLARGE), RINGKV_KIND_REJECTED);
    ck_assert_int_eq(ringkv_errkind(RK_EPROTO), RINGKV_KIND_OTHER);
    ck_assert_int_eq(ringkv_errkind(-ENOMEM), RINGKV_KIND_OTHER);
    ck_assert_int_eq(ringkv_errkind(RK_ENOTSUP), RINGKV_KIND_NOTSUP);
    ck_assert_int_eq(ringkv_errkind(RK_ENOPERM), RINGKV_KIND_NOPERM);
    ck_assert_int_eq(ringkv_errkind(-ENOSYS), RINGKV_KIND_OTHER);
    /* nothing was done: worth another try whatever the request */
    ck_assert(ringkv_retryable(RK_ESTALE, false));
    ck_assert(ringkv_retryable(RK_EOVERLOADED, false));
    ck_assert(ringkv_retryable(RK_EUNAVAILABLE, false));
    /* may have been applied: only when applying twice is harmless */
    ck_assert(ringkv_retryable(RK_ETIMEOUT, true));
    /* the coordinator's own copy may have been written */
    ck_assert(!ringkv_retryable(RK_ECLOCKSKEW, false));
    ck_assert(!ringkv_retryable(RK_ETIMEOUT, false));
    /* retrying cannot help */
    ck_assert(!ringkv_retryable(RK_EBADREQ, true));
    ck_assert(!ringkv_retryable(RK_EAUTH, true));
    ck_assert(!ringkv_retryable(RK_EPROTO, true));
    ck_assert(!ringkv_retryable(RK_ENOTFOUND, true));
}
END_TEST

static Suite *client_suite(void)
{
    Suite *s = suite_create("client");
    TCase *tc = tcase_create("sync");
    tcase_set_timeout(tc, 60);
    tcase_add_test(tc, sync_put_get_del);
    tcase_add_test(tc, large_values);
    tcase_add_test(tc, scan_calls);
    tcase_add_test(tc, default_consistency_applied);
    suite_add_tcase(s, tc);
    tc = tcase_create("pipeline");
    tcase_set_timeout(tc, 120);
    tcase_add_test(tc, pipelined_out_of_order);
    tcase_add_test(tc, pipeline_does_not_deadlock);
    suite_add_tcase(s, tc);
    tc = tcase_create("failures");
    tcase_set_timeout(tc, 60);
    tcase_add_test(tc, timeouts);
    tcase_add_test(tc, reconnect_and_retry);
    tcase_add_test(tc, no_resend_of_sent_write);
    tcase_add_test(tc, write_resent_when_not_sent_whole);
    tcase_add_test(tc, failover_between_hosts);
    tcase_add_test(tc, spread_clients_over_hosts);
    tcase_add_test(tc, ring_stale_tries_next_host);
    tcase_add_test(tc, error_mapping);
    tcase_add_test(tc, authentication);
    suite_add_tcase(s, tc);
    tc = tcase_create("config");
    tcase_add_test(tc, host_lists);
    tcase_add_test(tc, errkind_one_list);
    suite_add_tcase(s, tc);
    return s;
}

int main(void)
{
    SRunner *sr = srunner_create(client_suite());
    srunner_run_all(sr, CK_NORMAL);
    int failed = srunner_ntests_failed(sr);
    srunner_free(sr);
    return failed == 0 ? EXIT_SUCCESS : EXIT_FAILURE;
}
