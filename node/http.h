/*
 * http.h - the metrics port: a libmicrohttpd server answering
 * `GET /metrics` with the latest published Prometheus text.
 *
 * Threading. MHD runs its own polling thread (MHD_USE_INTERNAL_POLLING_
 * THREAD); the daemon's registry (node/metrics.h) lives on the loop thread
 * and is never touched by the HTTP thread. Instead the loop renders the
 * registry into a string and *publishes* it (http_server_publish): the
 * server swaps a reference-counted snapshot pointer under a mutex held for
 * a few instructions, and each scrape takes a reference to the current
 * snapshot and sends it without copying; the snapshot is freed when the
 * last response using it is done. A scrape therefore sees the text as of
 * the last publish. The daemon publishes on a timer (e.g. every second) and
 * may also publish on demand: the optional on_scrape callback runs on the
 * HTTP thread after each scrape, and the only thing it may do is wake the
 * loop in a thread-safe way (uv_async_send), so the loop renders a fresh
 * snapshot for the next scrape.
 *
 * Routes: GET or HEAD /metrics -> 200 text/plain; version=0.0.4 (503 until
 * the first publish); other methods on /metrics -> 405; any other path ->
 * 404.
 */
#ifndef RK_NODE_HTTP_H
#define RK_NODE_HTTP_H

#include <stddef.h>
#include <stdint.h>

typedef struct http_server http_server;

struct http_server_opts {
    const char *address; /* numeric IPv4/IPv6 or a name to resolve */
    uint16_t port;       /* 0: an ephemeral port (see http_server_port) */
    unsigned max_connections;
    unsigned timeout_s; /* idle connection timeout */
    /* Optional; called on the HTTP thread after each scrape of /metrics.
     * Must be thread-safe (uv_async_send and nothing else). */
    void (*on_scrape)(void *arg);
    void *arg;
};

#define HTTP_SERVER_OPTS_INIT                                      \
    {                                                              \
        .address = "0.0.0.0", .port = 9180, .max_connections = 32, \
        .timeout_s = 10, .on_scrape = NULL, .arg = NULL            \
    }

/* Bind and start serving on a new thread. Returns 0, -ENOMEM, -EINVAL for
 * an address that does not resolve, or the -errno of the failed bind
 * (-EADDRINUSE, -EACCES) when MHD cannot start (-EIO if MHD left no errno).
 * Stop with http_server_free(). */
int http_server_start(http_server **out, const struct http_server_opts *opts);

/* The port actually bound (useful with port 0). */
uint16_t http_server_port(const http_server *h);

/* Publish a new snapshot. Takes ownership of `text` (malloc'd, `len`
 * bytes, e.g. from metrics_render) in every case; the previous snapshot is
 * released once no response uses it. 0 or -ENOMEM (text freed, previous
 * snapshot kept). Call from one thread (the loop). */
int http_server_publish(http_server *h, char *text, size_t len);

/* Scrapes of /metrics answered with 200 so far (any thread). */
uint64_t http_server_scrapes(const http_server *h);

/* Stop the thread, close the socket, free everything. NULL is a no-op. */
void http_server_free(http_server *h);

#endif
