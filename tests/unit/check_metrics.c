/*
 * check_metrics.c - the metrics registry and its Prometheus text rendering.
 *
 * The rendering of a known registry is compared byte for byte, so a change
 * of format (what scrapers parse) is a failing test. The HTTP server is
 * started on 127.0.0.1 on an ephemeral port and read with a raw socket.
 */
#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/time.h>
#include <unistd.h>

#include <check.h>

#include "common/rk.h"
#include "node/http.h"
#include "node/metrics.h"

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
    http_server *h;
    ck_assert_int_eq(http_server_start(&h, &o), 0);
    uint16_t port = http_server_port(h);
    ck_assert_uint_ne(port, 0);
    struct http_reply r;

    /* nothing published yet */
    http_do(&r, port, "GET /metrics HTTP/1.0\r\n\r\n");
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
    http_do(&r, port, "GET /metrics HTTP/1.0\r\nHost: x\r\n\r\n");
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
    http_do(&r, port,
            "GET /metrics HTTP/1.1\r\nHost: x\r\n"
            "Connection: close\r\n\r\n");
    ck_assert_int_eq(r.status, 200);
    ck_assert_ptr_nonnull(
        strstr(r.body, "ringkv_requests_total{op=\"set\"} 7\n"));
    free(r.body);

    /* other paths and methods */
    http_do(&r, port, "GET / HTTP/1.0\r\n\r\n");
    ck_assert_int_eq(r.status, 404);
    free(r.body);
    http_do(&r, port, "GET /metrics/x HTTP/1.0\r\n\r\n");
    ck_assert_int_eq(r.status, 404);
    free(r.body);
    http_do(&r, port, "POST /metrics HTTP/1.0\r\nContent-Length: 0\r\n\r\n");
    ck_assert_int_eq(r.status, 405);
    free(r.body);
    http_do(&r, port, "HEAD /metrics HTTP/1.0\r\n\r\n");
    ck_assert_int_eq(r.status, 200);
    ck_assert_uint_eq(r.body_len, 0);
    free(r.body);
    ck_assert_uint_eq(http_server_scrapes(h), 3);

    /* the port is taken while the server runs */
    http_server *h2;
    o.port = port;
    int rc = http_server_start(&h2, &o);
    ck_assert_msg(rc < 0, "second bind of port %u succeeded", port);
    ck_assert_int_eq(rc, -EADDRINUSE);

    http_server_free(h);
    http_server_free(NULL);
    metrics_free(m);
}
END_TEST

START_TEST(http_bad_address)
{
    struct http_server_opts o = HTTP_SERVER_OPTS_INIT;
    o.address = "256.1.1.1";
    o.port = 0;
    http_server *h;
    ck_assert_int_eq(http_server_start(&h, &o), -EINVAL);
}
END_TEST

/* Publishes on this thread while another thread scrapes: every scrape sees
 * one whole snapshot, never an older one than the last it saw (the
 * sanitizers watch the handover and the frees). */
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
    http_server *h;
    ck_assert_int_eq(http_server_start(&h, &o), 0);
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
        usleep(100);
    }
    ck_assert_int_eq(pthread_join(th, NULL), 0);
    ck_assert_int_eq(sc.bad, 0);
    ck_assert_uint_eq(http_server_scrapes(h), 40);
    http_server_free(h);
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
    tcase_add_test(tc, http_bad_address);
    tcase_add_test(tc, http_publish_during_scrapes);
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
