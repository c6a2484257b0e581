/*
 * check_metrics.c - the metrics registry and its Prometheus text rendering.
 *
 * The rendering of a known registry is compared byte for byte, so a change
 * of format (what scrapers parse) is a failing test. The HTTP server is
 * started on 127.0.0.1 on an ephemeral port on the test's libuv loop, run
 * by the test thread, and read with a raw socket from a helper thread.
 */
#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/time.h>
#include <unistd.h>

#include <check.h>

#include "common/metrics.h"
#include "common/rk.h"
#include "net/http.h"

static const char *const ops[] = {"get", "set"};
static const char *const levels[] = {"ONE", "QUORUM"};

START_TEST(render_known_registry)
{
    metrics *m;
    metrics_family *req, *epoch, *peer, *lat;
    ck_assert_int_eq(metrics_new(&m), 0);

    struct metrics_family_cfg c1 = {
        .name = "ringkv_requests_total",
        .help = "Client requests by op and level.",
        .type = METRICS_COUNTER,
        .ndims = 2,
        .dims = {{"op", 2, ops}, {"level", 2, levels}}};
    ck_assert_int_eq(metrics_family_add(&req, m, &c1), 0);
    struct metrics_family_cfg c2 = {.name = "ringkv_ring_epoch",
                                    .help = "Ring epoch \\ applied\nhere.",
                                    .type = METRICS_GAUGE};
    ck_assert_int_eq(metrics_family_add(&epoch, m, &c2), 0);
    struct metrics_family_cfg c3 = {.name = "ringkv_peer_up",
                                    .help = "1 if the peer is UP.",
                                    .type = METRICS_GAUGE,
                                    .ndims = 1,
                                    .dims = {{"peer", 3, NULL}}};
    ck_assert_int_eq(metrics_family_add(&peer, m, &c3), 0);
    static const uint64_t bounds[] = {100, 1000, 2500000};
    struct metrics_family_cfg c4 = {.name = "ringkv_request_seconds",
                                    .help = "Request latency.",
                                    .type = METRICS_HISTOGRAM,
                                    .ndims = 1,
                                    .dims = {{"op", 1, ops}},
                                    .bounds_us = bounds,
                                    .nbounds = 3};
    ck_assert_int_eq(metrics_family_add(&lat, m, &c4), 0);

    ck_assert_uint_eq(metrics_nseries(req), 4);
    size_t s = metrics_series(req, 1, 1, 0);
    ck_assert_uint_eq(s, 3);
    metrics_counter_add(req, s, 5);
    metrics_counter_add(req, metrics_series(req, 0, 1, 0), 1);
    metrics_counter_add(req, metrics_series(req, 1, 1, 0), 2);
    ck_assert_uint_eq(metrics_counter_get(req, 3), 7);
    metrics_gauge_set(epoch, 0, 41);
    metrics_gauge_add(epoch, 0, 1);
    ck_assert_int_eq(metrics_gauge_get(epoch, 0), 42);
    ck_assert_int_eq(metrics_label_set(peer, 0, 0, "n1"), 0);
    ck_assert_int_eq(metrics_label_set(peer, 0, 2, "n\"3\\x\n"), 0);
    metrics_gauge_set(peer, 0, 1);
    metrics_gauge_set(peer, 1, 1); /* slot 1 has no label: not rendered */
    metrics_gauge_add(peer, 2, -1);
    static const uint64_t obs[] = {50, 100, 101, 1000, 3000000};
    for (size_t i = 0; i < 5; i++)
        metrics_observe_us(lat, 0, obs[i]);
    ck_assert_uint_eq(metrics_hist_count(lat, 0), 5);
    ck_assert_uint_eq(metrics_hist_sum_us(lat, 0), 3001251);

    static const char want[] =
        "# HELP ringkv_requests_total Client requests by op and level.\n"
        "# TYPE ringkv_requests_total counter\n"
        "ringkv_requests_total{op=\"get\",level=\"ONE\"} 0\n"
        "ringkv_requests_total{op=\"get\",level=\"QUORUM\"} 1\n"
        "ringkv_requests_total{op=\"set\",level=\"ONE\"} 0\n"
        "ringkv_requests_total{op=\"set\",level=\"QUORUM\"} 7\n"
        "# HELP ringkv_ring_epoch Ring epoch \\\\ applied\\nhere.\n"
        "# TYPE ringkv_ring_epoch gauge\n"
        "ringkv_ring_epoch 42\n"
        "# HELP ringkv_peer_up 1 if the peer is UP.\n"
        "# TYPE ringkv_peer_up gauge\n"
        "ringkv_peer_up{peer=\"n1\"} 1\n"
        "ringkv_peer_up{peer=\"n\\\"3\\\\x\\n\"} -1\n"
        "# HELP ringkv_request_seconds Request latency.\n"
        "# TYPE ringkv_request_seconds histogram\n"
        "ringkv_request_seconds_bucket{op=\"get\",le=\"0.0001\"} 2\n"
        "ringkv_request_seconds_bucket{op=\"get\",le=\"0.001\"} 4\n"
        "ringkv_request_seconds_bucket{op=\"get\",le=\"2.5\"} 4\n"
        "ringkv_request_seconds_bucket{op=\"get\",le=\"+Inf\"} 5\n"
        "ringkv_request_seconds_sum{op=\"get\"} 3.001251\n"
        "ringkv_request_seconds_count{op=\"get\"} 5\n";
    char *text;
    size_t len;
    ck_assert_int_eq(metrics_render(&text, &len, m), 0);
    ck_assert_str_eq(text, want);
    ck_assert_uint_eq(len, strlen(want));
    free(text);

    /* unset hides again; clear zeroes */
    ck_assert_int_eq(metrics_label_set(peer, 0, 2, NULL), 0);
    metrics_series_clear(lat, 0);
    metrics_series_clear(epoch, 0);
    ck_assert_uint_eq(metrics_hist_count(lat, 0), 0);
    ck_assert_int_eq(metrics_gauge_get(epoch, 0), 0);
    ck_assert_int_eq(metrics_render(&text, &len, m), 0);
    ck_assert_ptr_null(strstr(text, "n\\\"3"));
    ck_assert_ptr_nonnull(strstr(text, "ringkv_ring_epoch 0\n"));
    ck_assert_ptr_nonnull(
        strstr(text, "ringkv_request_seconds_sum{op=\"get\"} 0\n"));
    free(text);
    metrics_free(m);
    metrics_free(NULL);
}
END_TEST

START_TEST(render_empty_registry)
{
    metrics *m;
    char *text;
    size_t len;
    ck_assert_int_eq(metrics_new(&m), 0);
    ck_assert_int_eq(metrics_render(&text, &len, m), 0);
    ck_assert_uint_eq(len, 0);
    ck_assert_str_eq(text, "");
    free(text);
    metrics_free(m);
}
END_TEST

/* Every default bound: an observation equal to it lands in its bucket (le is
 * inclusive), one microsecond more in the next. */
START_TEST(histogram_default_buckets)
{
    metrics *m;
    metrics_family *h;
    ck_assert_int_eq(metrics_new(&m), 0);
    struct metrics_family_cfg c = {
        .name = "lat_seconds", .help = "x", .type = METRICS_HISTOGRAM};
    ck_assert_int_eq(metrics_family_add(&h, m, &c), 0);
    size_t i = (size_t)_i;
    uint64_t bound = METRICS_DEFAULT_BOUNDS_US[i];
    metrics_observe_us(h, 0, bound);
    metrics_observe_us(h, 0, bound + 1);
    char *text;
    size_t len;
    ck_assert_int_eq(metrics_render(&text, &len, m), 0);
    /* count the lines with cumulative value 0, 1 and 2 */
    size_t zeros = 0, ones = 0, twos = 0;
    for (char *line = strstr(text, "_bucket{"); line != NULL;
         line = strstr(line + 1, "_bucket{")) {
        char *eol = strchr(line, '\n');
        ck_assert_ptr_nonnull(eol);
        if (eol[-1] == '0')
            zeros++;
        else if (eol[-1] == '1')
            ones++;
        else if (eol[-1] == '2')
            twos++;
    }
    ck_assert_uint_eq(zeros, i);
    ck_assert_uint_eq(ones, 1);
    ck_assert_uint_eq(twos, METRICS_DEFAULT_NBOUNDS - i);
    ck_assert_uint_eq(metrics_hist_count(h, 0), 2);
    ck_assert_uint_eq(metrics_hist_sum_us(h, 0), 2 * bound + 1);
    free(text);
    metrics_free(m);
}
END_TEST

START_TEST(histogram_default_labels)
{
    metrics *m;
    metrics_family *h;
    ck_assert_int_eq(metrics_new(&m), 0);
    struct metrics_family_cfg c = {
        .name = "lat_seconds", .help = "x", .type = METRICS_HISTOGRAM};
    ck_assert_int_eq(metrics_family_add(&h, m, &c), 0);
    metrics_observe_us(h, 0, 20000000);
    char *text;
    size_t len;
    ck_assert_int_eq(metrics_render(&text, &len, m), 0);
    static const char want[] = "# HELP lat_seconds x\n"
                               "# TYPE lat_seconds histogram\n"
                               "lat_seconds_bucket{le=\"0.00005\"} 0\n"
                               "lat_seconds_bucket{le=\"0.0001\"} 0\n"
                               "lat_seconds_bucket{le=\"0.00025\"} 0\n"
                               "lat_seconds_bucket{le=\"0.0005\"} 0\n"
                               "lat_seconds_bucket{le=\"0.001\"} 0\n"
                               "lat_seconds_bucket{le=\"0.0025\"} 0\n"
                               "lat_seconds_bucket{le=\"0.005\"} 0\n"
                               "lat_seconds_bucket{le=\"0.01\"} 0\n"
                               "lat_seconds_bucket{le=\"0.025\"} 0\n"
                               "lat_seconds_bucket{le=\"0.05\"} 0\n"
                               "lat_seconds_bucket{le=\"0.1\"} 0\n"
                               "lat_seconds_bucket{le=\"0.25\"} 0\n"
                               "lat_seconds_bucket{le=\"0.5\"} 0\n"
                               "lat_seconds_bucket{le=\"1\"} 0\n"
                               "lat_seconds_bucket{le=\"2.5\"} 0\n"
                               "lat_seconds_bucket{le=\"5\"} 0\n"
                               "lat_seconds_bucket{le=\"10\"} 0\n"
                               "lat_seconds_bucket{le=\"+Inf\"} 1\n"
                               "lat_seconds_sum 20\n"
                               "lat_seconds_count 1\n";
    ck_assert_str_eq(text, want);
    free(text);
    metrics_free(m);
}
END_TEST

START_TEST(registry_rejects_bad_config)
{
    metrics *m;
    metrics_family *f;
    ck_assert_int_eq(metrics_new(&m), 0);
    struct metrics_family_cfg c = {.name = "ok_total",
                                   .help = "h",
                                   .type = METRICS_COUNTER,
                                   .ndims = 1,
                                   .dims = {{"op", 2, ops}}};
    ck_assert_int_eq(metrics_family_add(&f, m, &c), 0);
    ck_assert_int_eq(metrics_family_add(&f, m, &c), RK_EEXIST);
    c.name = "9bad";
    ck_assert_int_eq(metrics_family_add(&f, m, &c), -EINVAL);
    c.name = "bad-name";
    ck_assert_int_eq(metrics_family_add(&f, m, &c), -EINVAL);
    c.name = "ns:good_total";
    c.dims[0].label = "bad:label";
    ck_assert_int_eq(metrics_family_add(&f, m, &c), -EINVAL);
    c.dims[0].label = "__reserved";
    ck_assert_int_eq(metrics_family_add(&f, m, &c), -EINVAL);
    c.dims[0].label = "op";
    c.dims[0].size = 0;
    ck_assert_int_eq(metrics_family_add(&f, m, &c), -EINVAL);
    c.dims[0].size = 2;
    c.ndims = 2;
    c.dims[1] = c.dims[0]; /* duplicate label */
    ck_assert_int_eq(metrics_family_add(&f, m, &c), -EINVAL);
    c.ndims = 4;
    ck_assert_int_eq(metrics_family_add(&f, m, &c), -EINVAL);
    c.ndims = 1;
    c.type = METRICS_HISTOGRAM;
    c.dims[0].label = "le";
    ck_assert_int_eq(metrics_family_add(&f, m, &c), -EINVAL);
    c.dims[0].label = "op";
    static const uint64_t not_increasing[] = {10, 10};
    c.bounds_us = not_increasing;
    c.nbounds = 2;
    ck_assert_int_eq(metrics_family_add(&f, m, &c), -EINVAL);
    c.nbounds = 1;
    ck_assert_int_eq(metrics_family_add(&f, m, &c), 0);
    ck_assert_int_eq(metrics_label_set(f, 1, 0, "x"), -EINVAL);
    ck_assert_int_eq(metrics_label_set(f, 0, 2, "x"), -EINVAL);
    ck_assert_int_eq(metrics_label_set(f, 0, 1, "renamed"), 0);
    metrics_free(m);
}
END_TEST

START_TEST(series_index_three_dims)
{
    metrics *m;
    metrics_family *f;
    static const char *const a[] = {"a0", "a1"};
    static const char *const b[] = {"b0", "b1", "b2"};
    static const char *const c[] = {"c0", "c1", "c2", "c3"};
    ck_assert_int_eq(metrics_new(&m), 0);
    struct metrics_family_cfg cfg = {
        .name = "x_total",
        .help = "h",
        .type = METRICS_COUNTER,
        .ndims = 3,
        .dims = {{"a", 2, a}, {"b", 3, b}, {"c", 4, c}}};
    ck_assert_int_eq(metrics_family_add(&f, m, &cfg), 0);
    ck_assert_uint_eq(metrics_nseries(f), 24);
    /* every series index is distinct and renders with its own labels */
    for (size_t i = 0; i < 2; i++)
        for (size_t j = 0; j < 3; j++)
            for (size_t k = 0; k < 4; k++)
                metrics_counter_add(f, metrics_series(f, i, j, k),
                                    100 * i + 10 * j + k);
    char *text;
    size_t len;
    ck_assert_int_eq(metrics_render(&text, &len, m), 0);
    ck_assert_ptr_nonnull(strstr(text, "x_total{a=\"a1\",b=\"b2\",c=\"c3\"} "
                                       "123\n"));
    ck_assert_ptr_nonnull(strstr(text, "x_total{a=\"a0\",b=\"b1\",c=\"c0\"} "
                                       "10\n"));
    ck_assert_ptr_nonnull(strstr(text, "x_total{a=\"a1\",b=\"b0\",c=\"c2\"} "
                                       "102\n"));
    free(text);
    metrics_free(m);
}
END_TEST

/* ------------------------------------------------------------------------
 * HTTP server
 * ------------------------------------------------------------------------ */

struct http_reply {
    int status;
    char head[2048];
    char *body;
    size_t body_len;
};

/* One HTTP/1.0 request on a fresh connection; reads until the server
 * closes (bounded by a 10 s receive timeout). */
static void http_do(struct http_reply *out, uint16_t port, const char *req)
{
    int fd = socket(AF_INET, SOCK_STREAM, 0);
    ck_assert_int_ge(fd, 0);
    struct timeval tv = {.tv_sec = 10};
    setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof(tv));
    struct sockaddr_in sa = {.sin_family = AF_INET, .sin_port = htons(port)};
    sa.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    ck_assert_int_eq(connect(fd, (struct sockaddr *)&sa, sizeof(sa)), 0);
    size_t n = strlen(req);
    ck_assert_int_eq(write(fd, req, n), (ssize_t)n);
    size_t cap = 1 << 16, len = 0;
    char *buf = malloc(cap);
    ck_assert_ptr_nonnull(buf);
    for (;;) {
        if (len + 1 == cap) {
            cap *= 2;
            buf = realloc(buf, cap);
            ck_assert_ptr_nonnull(buf);
        }
        ssize_t r = read(fd, buf + len, cap - len - 1);
        ck_assert_int_ge(r, 0); /* a timeout fails the test */
        if (r == 0)
            break;
        len += (size_t)r;
    }
    close(fd);
    buf[len] = '\0';
    char *sep = strstr(buf, "\r\n\r\n");
    ck_assert_ptr_nonnull(sep);
    size_t hl = (size_t)(sep - buf);
    ck_assert_uint_lt(hl, sizeof(out->head));
    memcpy(out->head, buf, hl);
    out->head[hl] = '\0';
    ck_assert_int_eq(sscanf(buf, "HTTP/1.%*d %d", &out->status), 1);
    out->body_len = len - hl - 4;
    out->body = malloc(out->body_len + 1);
    ck_assert_ptr_nonnull(out->body);
    memcpy(out->body, sep + 4, out->body_len + 1);
    free(buf);
}

/* The server's loop, run by the test thread while a helper thread is the
 * client; the helper wakes it when it is done. */
struct hloop {
    uv_loop_t loop;
    uv_async_t wake;
};

static void hloop_wake_cb(uv_async_t *a)
{
    (void)a;
}

static void hloop_init(struct hloop *L)
{
    ck_assert_int_eq(uv_loop_init(&L->loop), 0);
    ck_assert_int_eq(uv_async_init(&L->loop, &L->wake, hloop_wake_cb), 0);
}

static void set_flag(void *arg)
{
    *(bool *)arg = true;
}

/* Frees h (if any), closes the loop: every handle must be gone. */
static void hloop_finish(struct hloop *L, http_server *h)
{
    bool freed = h == NULL;
    http_server_free(h, set_flag, &freed);
    uv_close((uv_handle_t *)&L->wake, NULL);
    while (uv_run(&L->loop, UV_RUN_ONCE) != 0)
        ;
    ck_assert(freed);
    ck_assert_int_eq(uv_loop_close(&L->loop), 0);
}

struct hreq {
    struct hloop *L;
    struct http_reply *out;
    uint16_t port;
    const char *req;
    atomic_int done;
};

static void *hreq_run(void *arg)
{
    struct hreq *r = arg;
    http_do(r->out, r->port, r->req);
    atomic_store(&r->done, 1);
    uv_async_send(&r->L->wake);
    return NULL;
}

/* http_do from a helper thread while this one runs the server's loop. */
static void http_get(struct hloop *L,
                     struct http_reply *out,
                     uint16_t port,
                     const char *req)
{
    struct hreq r = {.L = L, .out = out, .port = port, .req = req};
    pthread_t th;
    atomic_init(&r.done, 0);
    ck_assert_int_eq(pthread_create(&th, NULL, hreq_run, &r), 0);
    while (!atomic_load(&r.done))
        uv_run(&L->loop, UV_RUN_ONCE);
    ck_assert_int_eq(pthread_join(th, NULL), 0);
}

/* Runs on the loop thread (the test's): a plain counter would do. */
static void on_scrape(void *arg)
{
    atomic_fetch_add((atomic_int *)arg, 1);
}

START_TEST(http_serves_published_snapshot)
{
    atomic_int scraped;
    atomic_init(&scraped, 0);
    struct http_server_opts o = HTTP_SERVER_OPTS_INIT;
    o.address = "127.0.0.1";
    o.port = 0;
    o.on_scrape = on_scrape;
    o.arg = &scraped;
    struct hloop L;
    hloop_init(&L);
    http_server *h;
    ck_assert_int_eq(http_server_start(&h, &L.loop, &o), 0);
    uint16_t port = http_server_port(h);
    ck_assert_uint_ne(port, 0);
    struct http_reply r;

    /* nothing published yet */
    http_get(&L, &r, port, "GET /metrics HTTP/1.0\r\n\r\n");
    ck_assert_int_eq(r.status, 503);
    free(r.body);

    /* publish a rendered registry and read it back verbatim */
    metrics *m;
    metrics_family *f;
    ck_assert_int_eq(metrics_new(&m), 0);
    struct metrics_family_cfg c = {.name = "ringkv_requests_total",
                                   .help = "Requests.",
                                   .type = METRICS_COUNTER,
                                   .ndims = 1,
                                   .dims = {{"op", 2, ops}}};
    ck_assert_int_eq(metrics_family_add(&f, m, &c), 0);
    metrics_counter_add(f, metrics_series(f, 1, 0, 0), 3);
    char *text;
    size_t len;
    ck_assert_int_eq(metrics_render(&text, &len, m), 0);
    char *expect = strdup(text);
    ck_assert_int_eq(http_server_publish(h, text, len), 0);
    http_get(&L, &r, port, "GET /metrics HTTP/1.0\r\nHost: x\r\n\r\n");
    ck_assert_int_eq(r.status, 200);
    ck_assert_uint_eq(r.body_len, len);
    ck_assert_str_eq(r.body, expect);
    ck_assert_ptr_nonnull(
        strstr(r.head, "text/plain; version=0.0.4; charset=utf-8"));
    free(r.body);
    free(expect);
    ck_assert_uint_eq(http_server_scrapes(h), 1);
    ck_assert_int_eq(atomic_load(&scraped), 1);

    /* a new snapshot replaces the old one */
    metrics_counter_add(f, metrics_series(f, 1, 0, 0), 4);
    ck_assert_int_eq(metrics_render(&text, &len, m), 0);
    ck_assert_int_eq(http_server_publish(h, text, len), 0);
    http_get(&L, &r, port,
             "GET /metrics HTTP/1.1\r\nHost: x\r\n"
             "Connection: close\r\n\r\n");
    ck_assert_int_eq(r.status, 200);
    ck_assert_ptr_nonnull(
        strstr(r.body, "ringkv_requests_total{op=\"set\"} 7\n"));
    free(r.body);

    /* other paths and methods */
    http_get(&L, &r, port, "GET / HTTP/1.0\r\n\r\n");
    ck_assert_int_eq(r.status, 404);
    free(r.body);
    http_get(&L, &r, port, "GET /metrics/x HTTP/1.0\r\n\r\n");
    ck_assert_int_eq(r.status, 404);
    free(r.body);
    http_get(&L, &r, port,
             "POST /metrics HTTP/1.0\r\nContent-Length: 0\r\n\r\n");
    ck_assert_int_eq(r.status, 405);
    free(r.body);
    http_get(&L, &r, port, "HEAD /metrics HTTP/1.0\r\n\r\n");
    ck_assert_int_eq(r.status, 200);
    ck_assert_uint_eq(r.body_len, 0);
    free(r.body);
    ck_assert_uint_eq(http_server_scrapes(h), 3);

    /* the port is taken while the server runs */
    http_server *h2;
    o.port = port;
    int rc = http_server_start(&h2, &L.loop, &o);
    ck_assert_msg(rc < 0, "second bind of port %u succeeded", port);
    ck_assert_int_eq(rc, -EADDRINUSE);

    http_server_free(NULL, NULL, NULL);
    hloop_finish(&L, h);
    metrics_free(m);
}
END_TEST

/* The health callback of http_health_routes: ready while *arg is true. */
static bool health_of(void *arg, char *text, size_t cap)
{
    bool ready = *(bool *)arg;
    snprintf(text, cap, ready ? "ready: yes" : "not ready: joining");
    return ready;
}

START_TEST(http_health_routes)
{
    bool ready = false;
    struct http_server_opts o = HTTP_SERVER_OPTS_INIT;
    o.address = "127.0.0.1";
    o.port = 0;
    struct hloop L;
    hloop_init(&L);
    http_server *h;
    struct http_reply r;

    /* no callback: only liveness is answered */
    ck_assert_int_eq(http_server_start(&h, &L.loop, &o), 0);
    uint16_t port = http_server_port(h);
    http_get(&L, &r, port, "GET /health/live HTTP/1.0\r\n\r\n");
    ck_assert_int_eq(r.status, 200);
    ck_assert_str_eq(r.body, "live\n");
    free(r.body);
    http_get(&L, &r, port, "GET /health HTTP/1.0\r\n\r\n");
    ck_assert_int_eq(r.status, 404);
    free(r.body);
    hloop_finish(&L, h);

    o.health = health_of;
    o.arg = &ready;
    hloop_init(&L);
    ck_assert_int_eq(http_server_start(&h, &L.loop, &o), 0);
    port = http_server_port(h);
    const char *ready_paths[] = {"/health", "/health/ready"};
    for (size_t i = 0; i < 2; i++) {
        char req[64];
        snprintf(req, sizeof(req), "GET %s HTTP/1.0\r\n\r\n", ready_paths[i]);
        ready = false;
        http_get(&L, &r, port, req);
        ck_assert_int_eq(r.status, 503);
        ck_assert_str_eq(r.body, "not ready: joining\n");
        free(r.body);
        ready = true;
        http_get(&L, &r, port, req);
        ck_assert_int_eq(r.status, 200);
        ck_assert_str_eq(r.body, "ready: yes\n");
        free(r.body);
    }
    /* liveness does not ask; HEAD has no body; other methods refused; a
     * health probe is not a scrape */
    ready = false;
    http_get(&L, &r, port, "GET /health/live HTTP/1.0\r\n\r\n");
    ck_assert_int_eq(r.status, 200);
    free(r.body);
    http_get(&L, &r, port, "HEAD /health/ready HTTP/1.0\r\n\r\n");
    ck_assert_int_eq(r.status, 503);
    ck_assert_uint_eq(r.body_len, 0);
    free(r.body);
    http_get(&L, &r, port,
             "POST /health HTTP/1.0\r\nContent-Length: 0\r\n\r\n");
    ck_assert_int_eq(r.status, 405);
    free(r.body);
    http_get(&L, &r, port, "GET /health/other HTTP/1.0\r\n\r\n");
    ck_assert_int_eq(r.status, 404);
    free(r.body);
    ck_assert_uint_eq(http_server_scrapes(h), 0);
    hloop_finish(&L, h);
}
END_TEST

/* Authorization: Basic, as RFC 7617 writes it ("bWV0cmljczpzM2NyZXQ="
 * is "metrics:s3cret"). */
START_TEST(http_basic_auth_header)
{
    uint8_t buf[HTTP_BASIC_AUTH_MAX];
    const uint8_t *u, *pw;
    size_t ul, pl;
#define PARSE(head)                                                           \
    http_basic_auth_parse(head, strlen(head), buf, sizeof(buf), &u, &ul, &pw, \
                          &pl)
    ck_assert_int_eq(PARSE("GET /metrics HTTP/1.1\r\nHost: x\r\n"
                           "Authorization: Basic bWV0cmljczpzM2NyZXQ=\r\n\r\n"),
                     0);
    ck_assert(ul == 7 && memcmp(u, "metrics", 7) == 0);
    ck_assert(pl == 6 && memcmp(pw, "s3cret", 6) == 0);
    /* name and scheme case-insensitive, blanks around the value */
    ck_assert_int_eq(PARSE("GET /metrics HTTP/1.1\r\n"
                           "aUTHORIZATION:\t bAsIc  bWV0cmljczpzM2NyZXQ= "
                           "\r\n\r\n"),
                     0);
    ck_assert(pl == 6);
    /* a password holding ':' keeps it ("u:a:b") */
    ck_assert_int_eq(PARSE("GET / HTTP/1.1\r\nAuthorization: Basic "
                           "dTphOmI=\r\n\r\n"),
                     0);
    ck_assert(ul == 1 && pl == 3 && memcmp(pw, "a:b", 3) == 0);
    /* refused: none, another scheme, not base64, no ':', on the request
     * line only, a header whose name merely starts the same */
    ck_assert_int_eq(PARSE("GET / HTTP/1.1\r\nHost: x\r\n\r\n"), -1);
    ck_assert_int_eq(PARSE("GET / HTTP/1.1\r\nAuthorization: Bearer "
                           "bWV0cmljczpzM2NyZXQ=\r\n\r\n"),
                     -1);
    ck_assert_int_eq(PARSE("GET / HTTP/1.1\r\nAuthorization: Basic "
                           "!!!!\r\n\r\n"),
                     -1);
    ck_assert_int_eq(PARSE("GET / HTTP/1.1\r\nAuthorization: Basic "
                           "bWV0cmljcw==\r\n\r\n"),
                     -1);
    ck_assert_int_eq(PARSE("GET /Authorization: Basic dTphOmI= HTTP/1.1"
                           "\r\n\r\n"),
                     -1);
    ck_assert_int_eq(PARSE("GET / HTTP/1.1\r\nAuthorization-X: Basic "
                           "dTphOmI=\r\n\r\n"),
                     -1);
    ck_assert_int_eq(PARSE("GET / HTTP/1.1\r\nAuthorization: Basic\r\n\r\n"),
                     -1);
    /* longer than the buffer: refused, not cut */
    char big[4096] = "GET / HTTP/1.1\r\nAuthorization: Basic ";
    size_t o = strlen(big);
    for (size_t i = 0; i < 2000; i++)
        big[o++] = 'Q';
    memcpy(big + o, "\r\n\r\n", 5);
    ck_assert_int_eq(PARSE(big), -1);
#undef PARSE
}
END_TEST

static bool check_creds(void *arg,
                        const uint8_t *user,
                        size_t ulen,
                        const uint8_t *pass,
                        size_t plen)
{
    (void)arg;
    return ulen == 7 && memcmp(user, "metrics", 7) == 0 && plen == 6 &&
           memcmp(pass, "s3cret", 6) == 0;
}

START_TEST(http_basic_auth_required)
{
    struct http_server_opts o = HTTP_SERVER_OPTS_INIT;
    o.address = "127.0.0.1";
    o.port = 0;
    o.authorize = check_creds;
    struct hloop L;
    hloop_init(&L);
    http_server *h;
    ck_assert_int_eq(http_server_start(&h, &L.loop, &o), 0);
    uint16_t port = http_server_port(h);
    char *text = strdup("x 1\n");
    ck_assert_int_eq(http_server_publish(h, text, 4), 0);
    struct http_reply r;
    http_get(&L, &r, port, "GET /metrics HTTP/1.0\r\n\r\n");
    ck_assert_int_eq(r.status, 401);
    ck_assert_ptr_nonnull(strstr(r.head, "WWW-Authenticate: Basic realm="));
    free(r.body);
    /* "metrics:wrong" */
    http_get(&L, &r, port,
             "GET /metrics HTTP/1.0\r\nAuthorization: Basic "
             "bWV0cmljczp3cm9uZw==\r\n\r\n");
    ck_assert_int_eq(r.status, 401);
    free(r.body);
    http_get(&L, &r, port,
             "GET /metrics HTTP/1.0\r\nAuthorization: Basic "
             "bWV0cmljczpzM2NyZXQ=\r\n\r\n");
    ck_assert_int_eq(r.status, 200);
    ck_assert_str_eq(r.body, "x 1\n");
    free(r.body);
    ck_assert_uint_eq(http_server_unauthorized(h), 2);
    ck_assert_uint_eq(http_server_scrapes(h), 1);
    hloop_finish(&L, h);
}
END_TEST

START_TEST(http_bad_address)
{
    struct http_server_opts o = HTTP_SERVER_OPTS_INIT;
    o.address = "256.1.1.1";
    o.port = 0;
    struct hloop L;
    hloop_init(&L);
    http_server *h;
    ck_assert_int_eq(http_server_start(&h, &L.loop, &o), -EINVAL);
    hloop_finish(&L, NULL);
}
END_TEST

/* Publishes on the loop's thread between its turns while another thread
 * scrapes: every scrape sees one whole snapshot, never an older one than
 * the last it saw (the sanitizers watch the frees). */
struct scraper {
    uint16_t port;
    atomic_int done;
    int bad;
};

static void *scrape_loop(void *arg)
{
    struct scraper *sc = arg;
    int last = -1;
    for (int i = 0; i < 40; i++) {
        struct http_reply r;
        int n, end = 0;
        http_do(&r, sc->port, "GET /metrics HTTP/1.0\r\n\r\n");
        if (r.status != 200 ||
            sscanf(r.body, "snapshot %d end\n%n", &n, &end) != 1 ||
            (size_t)end != r.body_len || n < last)
            sc->bad++;
        else
            last = n;
        free(r.body);
    }
    atomic_store(&sc->done, 1);
    return NULL;
}

START_TEST(http_publish_during_scrapes)
{
    struct http_server_opts o = HTTP_SERVER_OPTS_INIT;
    o.address = "127.0.0.1";
    o.port = 0;
    struct hloop L;
    hloop_init(&L);
    http_server *h;
    ck_assert_int_eq(http_server_start(&h, &L.loop, &o), 0);
    struct scraper sc = {.port = http_server_port(h), .bad = 0};
    atomic_init(&sc.done, 0);
    int i = 0;
    for (; i < 1; i++) {
        char *t = strdup("snapshot 0 end\n");
        ck_assert_int_eq(http_server_publish(h, t, strlen(t)), 0);
    }
    pthread_t th;
    ck_assert_int_eq(pthread_create(&th, NULL, scrape_loop, &sc), 0);
    while (!atomic_load(&sc.done) && i < 1000000) {
        char *t = malloc(64);
        ck_assert_ptr_nonnull(t);
        int n = snprintf(t, 64, "snapshot %d end\n", i++);
        ck_assert_int_eq(http_server_publish(h, t, (size_t)n), 0);
        uv_run(&L.loop, UV_RUN_NOWAIT);
        usleep(100);
    }
    ck_assert_int_eq(pthread_join(th, NULL), 0);
    ck_assert_int_eq(sc.bad, 0);
    ck_assert_uint_eq(http_server_scrapes(h), 40);
    hloop_finish(&L, h);
}
END_TEST

/* A connected socket to 127.0.0.1:port (blocking connect: the listener's
 * backlog takes it without the loop running). */
static int raw_connect(uint16_t port)
{
    int fd = socket(AF_INET, SOCK_STREAM, 0);
    ck_assert_int_ge(fd, 0);
    struct sockaddr_in sa = {.sin_family = AF_INET, .sin_port = htons(port)};
    sa.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    ck_assert_int_eq(connect(fd, (struct sockaddr *)&sa, sizeof(sa)), 0);
    return fd;
}

/* A client trickling a request head a byte every 50 ms until the server
 * closes the connection or 200 bytes (10 s) are sent. */
struct trickler {
    struct hloop *L;
    uint16_t port;
    bool closed_early; /* closed by the server before the head was whole */
    size_t sent;
    atomic_int done;
};

static void *trickle_run(void *arg)
{
    struct trickler *t = arg;
    int fd = raw_connect(t->port);
    const char *pre = "GET /metrics HTTP/1.0\r\nX-Slow: ";
    for (t->sent = 0; t->sent < 200; t->sent++) {
        char ch = t->sent < strlen(pre) ? pre[t->sent] : 'a';
        char b;
        if (send(fd, &ch, 1, MSG_NOSIGNAL) != 1 ||
            recv(fd, &b, 1, MSG_DONTWAIT) == 0) {
            t->closed_early = true;
            break;
        }
        usleep(50 * 1000);
    }
    close(fd);
    atomic_store(&t->done, 1);
    uv_async_send(&t->L->wake);
    return NULL;
}

/* Slow clients cannot keep scrapes out. Past max_connections the oldest
 * connection whose request has not arrived is closed to admit a new one,
 * so a scrape gets in among connections that sent a byte each; and a head
 * trickled a byte at a time is closed once request_timeout_ms has passed
 * since its first byte, however often bytes come. */
START_TEST(http_slow_clients)
{
    struct http_server_opts o = HTTP_SERVER_OPTS_INIT;
    o.address = "127.0.0.1";
    o.port = 0;
    o.max_connections = 4;
    o.request_timeout_ms = 1000;
    struct hloop L;
    hloop_init(&L);
    http_server *h;
    ck_assert_int_eq(http_server_start(&h, &L.loop, &o), 0);
    uint16_t port = http_server_port(h);
    ck_assert_int_eq(http_server_publish(h, strdup("x 1\n"), 4), 0);

    int fds[8];
    for (int i = 0; i < 8; i++) {
        fds[i] = raw_connect(port);
        ck_assert_int_eq(write(fds[i], "G", 1), 1);
    }
    struct http_reply r;
    http_get(&L, &r, port, "GET /metrics HTTP/1.0\r\n\r\n");
    ck_assert_int_eq(r.status, 200);
    ck_assert_str_eq(r.body, "x 1\n");
    free(r.body);
    /* 8 + 1 connections into 4 places: the 5 oldest waiting went */
    ck_assert_uint_eq(http_server_evicted(h), 5);
    for (int i = 0; i < 8; i++)
        close(fds[i]);

    struct trickler t = {.L = &L, .port = port};
    atomic_init(&t.done, 0);
    pthread_t th;
    ck_assert_int_eq(pthread_create(&th, NULL, trickle_run, &t), 0);
    while (!atomic_load(&t.done))
        uv_run(&L.loop, UV_RUN_ONCE);
    ck_assert_int_eq(pthread_join(th, NULL), 0);
    ck_assert_msg(t.closed_early, "a head trickled for 10 s stayed open");
    ck_assert_uint_eq(http_server_timeouts(h), 1);
    ck_assert_uint_eq(http_server_scrapes(h), 1);
    hloop_finish(&L, h);
}
END_TEST

static Suite *metrics_suite(void)
{
    Suite *s = suite_create("metrics");
    TCase *tc = tcase_create("render");
    tcase_add_test(tc, render_known_registry);
    tcase_add_test(tc, render_empty_registry);
    suite_add_tcase(s, tc);
    tc = tcase_create("histogram");
    tcase_add_loop_test(tc, histogram_default_buckets, 0,
                        METRICS_DEFAULT_NBOUNDS);
    tcase_add_test(tc, histogram_default_labels);
    suite_add_tcase(s, tc);
    tc = tcase_create("registry");
    tcase_add_test(tc, registry_rejects_bad_config);
    tcase_add_test(tc, series_index_three_dims);
    suite_add_tcase(s, tc);
    tc = tcase_create("http");
    tcase_set_timeout(tc, 60);
    tcase_add_test(tc, http_serves_published_snapshot);
    tcase_add_test(tc, http_health_routes);
    tcase_add_test(tc, http_bad_address);
    tcase_add_test(tc, http_basic_auth_header);
    tcase_add_test(tc, http_basic_auth_required);
    tcase_add_test(tc, http_publish_during_scrapes);
    tcase_add_test(tc, http_slow_clients);
    suite_add_tcase(s, tc);
    return s;
}

int main(void)
{
    SRunner *sr = srunner_create(metrics_suite());
    srunner_run_all(sr, CK_NORMAL);
    int failed = srunner_ntests_failed(sr);
    srunner_free(sr);
    return failed == 0 ? EXIT_SUCCESS : EXIT_FAILURE;
}
