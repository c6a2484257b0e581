/*
 * http.c - libmicrohttpd serving published metrics snapshots.
 *
 * See http.h for the threading design. A snapshot is an immutable string
 * with a reference count: the server holds one reference to the current
 * snapshot, every response in flight holds one, and whoever drops the last
 * frees it. MHD calls the response's free callback on its own thread.
 */
#include "node/http.h"

#include <errno.h>
#include <microhttpd.h>
#include <netdb.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>

#define HTTP__CONTENT_TYPE "text/plain; version=0.0.4; charset=utf-8"

struct http__snap {
    atomic_uint refs;
    size_t len;
    char *text;
};

struct http_server {
    struct MHD_Daemon *mhd;
    pthread_mutex_t lock; /* guards `cur` */
    struct http__snap *cur;
    void (*on_scrape)(void *arg);
    void *arg;
    uint16_t port;
    atomic_uint_fast64_t scrapes;
};

static void http__snap_unref(void *cls)
{
    struct http__snap *s = cls;
    if (s != NULL && atomic_fetch_sub(&s->refs, 1) == 1) {
        free(s->text);
        free(s);
    }
}

static enum MHD_Result
http__reply_static(struct MHD_Connection *c, unsigned status, const char *body)
{
    struct MHD_Response *r = MHD_create_response_from_buffer(
        strlen(body), (void *)body, MHD_RESPMEM_PERSISTENT);
    if (r == NULL)
        return MHD_NO;
    MHD_add_response_header(r, MHD_HTTP_HEADER_CONTENT_TYPE,
                            "text/plain; charset=utf-8");
    if (status == MHD_HTTP_METHOD_NOT_ALLOWED)
        MHD_add_response_header(r, MHD_HTTP_HEADER_ALLOW, "GET, HEAD");
    enum MHD_Result rc = MHD_queue_response(c, status, r);
    MHD_destroy_response(r);
    return rc;
}

static enum MHD_Result http__handle(void *cls,
                                    struct MHD_Connection *c,
                                    const char *url,
                                    const char *method,
                                    const char *version,
                                    const char *upload_data,
                                    size_t *upload_data_size,
                                    void **con_cls)
{
    struct http_server *h = cls;
    (void)version;
    (void)upload_data;
    (void)upload_data_size;
    (void)con_cls;

    if (strcmp(url, "/metrics") != 0)
        return http__reply_static(c, MHD_HTTP_NOT_FOUND, "not found\n");
    if (strcmp(method, MHD_HTTP_METHOD_GET) != 0 &&
        strcmp(method, MHD_HTTP_METHOD_HEAD) != 0)
        return http__reply_static(c, MHD_HTTP_METHOD_NOT_ALLOWED,
                                  "method not allowed\n");

    pthread_mutex_lock(&h->lock);
    struct http__snap *s = h->cur;
    if (s != NULL)
        atomic_fetch_add(&s->refs, 1);
    pthread_mutex_unlock(&h->lock);
    if (s == NULL)
        return http__reply_static(c, MHD_HTTP_SERVICE_UNAVAILABLE,
                                  "no metrics published yet\n");

    struct MHD_Response *r =
        MHD_create_response_from_buffer_with_free_callback_cls(
            s->len, s->text, http__snap_unref, s);
    if (r == NULL) {
        http__snap_unref(s);
        return MHD_NO;
    }
    MHD_add_response_header(r, MHD_HTTP_HEADER_CONTENT_TYPE,
                            HTTP__CONTENT_TYPE);
    enum MHD_Result rc = MHD_queue_response(c, MHD_HTTP_OK, r);
    MHD_destroy_response(r);
    if (rc == MHD_YES) {
        atomic_fetch_add(&h->scrapes, 1);
        if (h->on_scrape != NULL)
            h->on_scrape(h->arg);
    }
    return rc;
}

int http_server_start(http_server **out, const struct http_server_opts *opts)
{
    struct addrinfo hints = {0}, *ai = NULL;
    char port[8];
    int rc;

    hints.ai_family = AF_UNSPEC;
    hints.ai_socktype = SOCK_STREAM;
    hints.ai_flags = AI_PASSIVE;
    snprintf(port, sizeof(port), "%u", (unsigned)opts->port);
    if (getaddrinfo(opts->address, port, &hints, &ai) != 0 || ai == NULL)
        return -EINVAL;

    struct http_server *h = calloc(1, sizeof(*h));
    if (h == NULL) {
        rc = -ENOMEM;
        goto out_addr;
    }
    if (pthread_mutex_init(&h->lock, NULL) != 0) {
        rc = -ENOMEM;
        goto out_server;
    }
    h->on_scrape = opts->on_scrape;
    h->arg = opts->arg;
    atomic_init(&h->scrapes, 0);

    unsigned flags = MHD_USE_INTERNAL_POLLING_THREAD | MHD_USE_AUTO;
    errno = 0;
    if (ai->ai_family == AF_INET6)
        flags |= MHD_USE_IPv6;
    h->mhd = MHD_start_daemon(
        flags, opts->port, NULL, NULL, http__handle, h, MHD_OPTION_SOCK_ADDR,
        ai->ai_addr, MHD_OPTION_CONNECTION_LIMIT,
        (unsigned)(opts->max_connections ? opts->max_connections : 32),
        MHD_OPTION_CONNECTION_TIMEOUT,
        (unsigned)(opts->timeout_s ? opts->timeout_s : 10), MHD_OPTION_END);
    if (h->mhd == NULL) {
        /* MHD does not report why; errno from its failed bind() usually
         * survives, otherwise say -EIO. */
        rc = errno > 0 ? -errno : -EIO;
        goto out_mutex;
    }
    const union MHD_DaemonInfo *info =
        MHD_get_daemon_info(h->mhd, MHD_DAEMON_INFO_BIND_PORT);
    h->port = info != NULL ? info->port : opts->port;
    freeaddrinfo(ai);
    *out = h;
    return 0;

out_mutex:
    pthread_mutex_destroy(&h->lock);
out_server:
    free(h);
out_addr:
    freeaddrinfo(ai);
    return rc;
}

uint16_t http_server_port(const http_server *h)
{
    return h->port;
}

int http_server_publish(http_server *h, char *text, size_t len)
{
    struct http__snap *s = malloc(sizeof(*s));
    if (s == NULL) {
        free(text);
        return -ENOMEM;
    }
    atomic_init(&s->refs, 1);
    s->len = len;
    s->text = text;
    pthread_mutex_lock(&h->lock);
    struct http__snap *old = h->cur;
    h->cur = s;
    pthread_mutex_unlock(&h->lock);
    http__snap_unref(old);
    return 0;
}

uint64_t http_server_scrapes(const http_server *h)
{
    return atomic_load(&((struct http_server *)h)->scrapes);
}

void http_server_free(http_server *h)
{
    if (h == NULL)
        return;
    MHD_stop_daemon(h->mhd); /* joins the thread; responses are released */
    http__snap_unref(h->cur);
    pthread_mutex_destroy(&h->lock);
    free(h);
}
