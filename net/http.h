/*
 * http.h - the metrics port: a tiny HTTP/1.x responder on net/'s raw-stream
 * connection engine answering `GET /metrics` with the latest published
 * Prometheus text.
 *
 * Threading. Everything runs on the daemon's loop thread, like the rest of
 * net/: the loop renders its registry (common/metrics.h) into a string and
 * publishes it (http_server_publish); a scrape copies the current text into
 * its connection's output. A scrape therefore sees the text as of the last
 * publish. The daemon publishes on a timer and may also publish on demand:
 * the optional on_scrape callback runs on the loop right after a scrape is
 * answered, so the next scrape sees fresh values.
 *
 * Slow clients. A request head ("\r\n\r\n"-terminated, at most
 * HTTP_SERVER_HEAD_MAX bytes) must arrive whole within request_timeout_ms
 * of its first byte, however it trickles in (net.h's frame_deadline);
 * otherwise the connection is closed. Every response closes its
 * connection (`Connection: close`), and its output may take as long again
 * to drain. Past max_connections, the oldest connection whose request has
 * not arrived whole (or, if every one was answered, the oldest) is closed
 * to admit the new one (counted: http_server_evicted), so a scraper, whose
 * request arrives at once, always gets in; a slowloris holds nothing for
 * long. A connection that sends nothing is not timed: it is the first
 * closed when the server is full.
 *
 * Routes: GET or HEAD /metrics -> 200 text/plain; version=0.0.4 (503 until
 * the first publish; with an authorize callback, 401 with
 * `WWW-Authenticate: Basic` unless the head's Authorization header
 * carries credentials it accepts); /health/live -> 200 "live" (the loop
 * answers); /health and /health/ready -> the health callback's verdict,
 * 200 when it says ready and 503 when not, its text as the body (404 with
 * no callback; never asks for credentials); other methods on these paths
 * -> 405 (Allow: GET, HEAD); any other path -> 404; a head that is not
 * HTTP/1.x -> 400; a head over HTTP_SERVER_HEAD_MAX -> closed.
 */
#ifndef NET_HTTP_H
#define NET_HTTP_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include <uv.h>

#include "net/net.h" /* enum net_tls_fail */

typedef struct http_server http_server;
struct net_tls; /* net/tls.h */

#define HTTP_SERVER_HEAD_MAX (8u * 1024u) /* bytes a request head may take */

struct http_server_opts {
    const char *address; /* numeric IPv4/IPv6 or a name to resolve */
    uint16_t port;       /* 0: an ephemeral port (see http_server_port) */
    unsigned max_connections;
    unsigned request_timeout_ms; /* a request must arrive whole by then */
    /* Optional; called on the loop thread after each scrape of /metrics
     * answered with 200 (it may publish). */
    void (*on_scrape)(void *arg);
    /* Optional; called on the loop thread for /health and /health/ready:
     * writes one line saying why into text[0..cap) and returns true when
     * the server's owner is ready to serve. */
    bool (*health)(void *arg, char *text, size_t cap);
    void *arg;
    /* Optional: HTTP basic authentication of /metrics. Called on the loop
     * thread with the user and password of a request's Authorization
     * header (RFC 7617; borrowed for the call); true lets it through.
     * NULL: no authentication. */
    bool (*authorize)(void *arg,
                      const uint8_t *user,
                      size_t ulen,
                      const uint8_t *pass,
                      size_t plen);
    /* Optional: HTTPS. Every connection speaks TLS with this context
     * (net/tls.h; the server takes a reference); a plaintext request is
     * never answered. on_tls_fail, if set, is told of each refused
     * handshake (the peer, why). NULL: plain HTTP. */
    struct net_tls *tls;
    void (*on_tls_fail)(void *arg,
                        const char *peer,
                        enum net_tls_fail reason,
                        const char *why);
};

#define HTTP_SERVER_OPTS_INIT                                            \
    {                                                                    \
        .address = "0.0.0.0", .port = 9180, .max_connections = 32,       \
        .request_timeout_ms = 5000, .on_scrape = NULL, .health = NULL,   \
        .arg = NULL, .authorize = NULL, .tls = NULL, .on_tls_fail = NULL \
    }

/* Bind and start serving on loop. Returns 0, -ENOMEM, -EINVAL for an
 * address that does not resolve, or the -errno of the failed bind
 * (-EADDRINUSE, -EACCES). On failure the libuv handles already made are
 * freed by the loop's next run. Resolving a name blocks (at start only).
 * Stop with http_server_free(). */
int http_server_start(http_server **out,
                      uv_loop_t *loop,
                      const struct http_server_opts *opts);

#define HTTP_BASIC_AUTH_MAX 1024u /* decoded "user:password" bytes, at most */

/* The credentials of the request head p[0..len): the value of its
 * Authorization header (name case-insensitive, the first one) when its
 * scheme is Basic (case-insensitive), base64-decoded into buf (cap bytes,
 * at most HTTP_BASIC_AUTH_MAX used) and split at the first ':' into
 * *user (ulen bytes) and *pass (plen bytes), both pointing into buf.
 * 0, or -1 when there is no such header or it is malformed (not base64,
 * no ':', longer than fits). Pure: a decoder of network bytes, fuzzed
 * (tests/fuzz/fuzz_http_auth.c). */
int http_basic_auth_parse(const char *p,
                          size_t len,
                          uint8_t *buf,
                          size_t cap,
                          const uint8_t **user,
                          size_t *ulen,
                          const uint8_t **pass,
                          size_t *plen);

/* Scrapes refused for missing or wrong credentials (401). */
uint64_t http_server_unauthorized(const http_server *h);

/* HTTPS handshakes from now on use tls (a reference is taken;
 * connections open keep theirs): a certificate's reload. 0, or -EINVAL
 * for a server started without TLS. */
int http_server_tls_set(http_server *h, struct net_tls *tls);

/* The port actually bound (useful with port 0). */
uint16_t http_server_port(const http_server *h);

/* Publish a new snapshot. Takes ownership of `text` (malloc'd, `len`
 * bytes, e.g. from metrics_render) in every case; the previous one is
 * freed (responses already queued hold their own copy). Returns 0. Loop
 * thread. */
int http_server_publish(http_server *h, char *text, size_t len);

/* Scrapes of /metrics answered with 200 so far. */
uint64_t http_server_scrapes(const http_server *h);

/* Connections closed to admit a new one past max_connections, and
 * connections closed because their request did not arrive whole within
 * request_timeout_ms. */
uint64_t http_server_evicted(const http_server *h);
uint64_t http_server_timeouts(const http_server *h);

/* Stops listening and closes every connection; h is freed, and done(arg)
 * called, once the loop has closed every handle. h NULL: done is not
 * called. */
void http_server_free(http_server *h, void (*done)(void *arg), void *arg);

#endif
