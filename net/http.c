/*
 * http.c - the metrics port's HTTP/1.x responder on the raw-stream engine.
 *
 * See http.h for what it answers. It reads one request head per
 * connection, answers it and closes: no keep-alive, no request body (a
 * POST's body is never read: the 405 closes the connection), which is all
 * a Prometheus scraper or curl needs. The engine bounds each connection's
 * input (HTTP_SERVER_HEAD_MAX) and the time its head may take to arrive
 * (frame_timeout_ms with frame_deadline); this file bounds how many
 * connections there are, evicting the oldest one still waiting for its
 * request when a new one comes past max_connections. The connections are
 * kept in a list in the order they were accepted, so that one is the first
 * not answered from the head.
 */
#include "net/http.h"

#include <arpa/inet.h>
#include <errno.h>
#include <netdb.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>

#include <sodium.h>

#include "common/rk.h"
#include "net/net.h"

#define CONTENT_TYPE_METRICS "text/plain; version=0.0.4; charset=utf-8"
#define CONTENT_TYPE_TEXT    "text/plain; charset=utf-8"

/* One connection, from accept to close. */
struct hconn {
    net_conn *c;
    struct hconn *prev, *next; /* the server's list, oldest first */
    bool linked;               /* on the list (counted in nconns) */
    bool answered;             /* its request arrived and was answered */
    size_t scanned;            /* input searched for "\r\n\r\n" so far */
};

struct http_server {
    net_server *srv;
    struct hconn *head, *tail;
    unsigned nconns; /* connections on the list */
    unsigned max_connections;
    char *text; /* the last snapshot published; NULL: none yet */
    size_t len;
    uint64_t scrapes, evicted, timeouts, unauthorized;
    void (*on_scrape)(void *arg);
    bool (*health)(void *arg, char *text, size_t cap);
    void *arg;
    bool (*authorize)(void *arg,
                      const uint8_t *user,
                      size_t ulen,
                      const uint8_t *pass,
                      size_t plen);
    net_tls_fail_cb on_tls_fail;
    void (*done)(void *arg);
    void *done_arg;
    uint16_t port;
};

/* ---- the connection list ------------------------------------------------ */

static void list_unlink(http_server *h, struct hconn *hc)
{
    if (!hc->linked)
        return;
    if (hc->prev)
        hc->prev->next = hc->next;
    else
        h->head = hc->next;
    if (hc->next)
        hc->next->prev = hc->prev;
    else
        h->tail = hc->prev;
    hc->prev = hc->next = NULL;
    hc->linked = false;
    h->nconns--;
}

static void list_append(http_server *h, struct hconn *hc)
{
    hc->prev = h->tail;
    hc->next = NULL;
    if (h->tail)
        h->tail->next = hc;
    else
        h->head = hc;
    h->tail = hc;
    hc->linked = true;
    h->nconns++;
}

/* ---- responses ----------------------------------------------------------- */

static const char *status_text(int status)
{
    switch (status) {
    case 200:
        return "OK";
    case 400:
        return "Bad Request";
    case 404:
        return "Not Found";
    case 405:
        return "Method Not Allowed";
    case 401:
        return "Unauthorized";
    default:
        return "Service Unavailable";
    }
}

/* Queues a whole response on c; HEAD: the head only. */
static int reply(net_conn *c,
                 int status,
                 const char *type,
                 const char *body,
                 size_t len,
                 bool head_only)
{
    char hd[256];
    int n = snprintf(hd, sizeof(hd),
                     "HTTP/1.1 %d %s\r\n"
                     "Content-Type: %s\r\n"
                     "Content-Length: %zu\r\n"
                     "%s"
                     "Connection: close\r\n\r\n",
                     status, status_text(status), type, len,
                     status == 405   ? "Allow: GET, HEAD\r\n"
                     : status == 401 ? "WWW-Authenticate: Basic realm=\"ringkv "
                                       "metrics\", charset=\"UTF-8\"\r\n"
                                     : "");
    if (n < 0 || (size_t)n >= sizeof(hd))
        return RK_EINTERNAL;
    int rc = net_conn_write(c, hd, (size_t)n);
    if (rc == 0 && !head_only)
        rc = net_conn_write(c, body, len);
    return rc;
}

static int reply_static(net_conn *c, int status, const char *body, bool head)
{
    return reply(c, status, CONTENT_TYPE_TEXT, body, strlen(body), head);
}

/* ---- basic authentication ----------------------------------------------- */

static bool ascii_ieq(const char *a, const char *b, size_t n)
{
    for (size_t i = 0; i < n; i++) {
        char x = a[i] >= 'A' && a[i] <= 'Z' ? (char)(a[i] + 32) : a[i];
        if (x != b[i])
            return false;
    }
    return true;
}

/* The value of header `name` (lower case, with its ':') among the lines
 * of the head p[0..len), blanks around it trimmed; NULL if absent. */
static const char *
header_value(const char *p, size_t len, const char *name, size_t *vlen)
{
    size_t nl = strlen(name);
    const char *end = p + len;
    const char *line = memmem(p, len, "\r\n", 2); /* past the request line */
    while (line != NULL && end - line > 2) {
        line += 2;
        const char *eol = memmem(line, (size_t)(end - line), "\r\n", 2);
        if (eol == NULL)
            break;
        if ((size_t)(eol - line) >= nl && ascii_ieq(line, name, nl)) {
            const char *v = line + nl;
            while (v < eol && (*v == ' ' || *v == '\t'))
                v++;
            const char *ve = eol;
            while (ve > v && (ve[-1] == ' ' || ve[-1] == '\t'))
                ve--;
            *vlen = (size_t)(ve - v);
            return v;
        }
        line = eol;
    }
    return NULL;
}

int http_basic_auth_parse(const char *p,
                          size_t len,
                          uint8_t *buf,
                          size_t cap,
                          const uint8_t **user,
                          size_t *ulen,
                          const uint8_t **pass,
                          size_t *plen)
{
    size_t vlen = 0;
    const char *v = header_value(p, len, "authorization:", &vlen);
    if (v == NULL || vlen < 6 || !ascii_ieq(v, "basic ", 6))
        return -1;
    v += 6;
    vlen -= 6;
    while (vlen > 0 && *v == ' ') {
        v++;
        vlen--;
    }
    if (cap > HTTP_BASIC_AUTH_MAX)
        cap = HTTP_BASIC_AUTH_MAX;
    size_t n = 0;
    const char *stop = NULL;
    if (vlen == 0 ||
        sodium_base642bin(buf, cap, v, vlen, NULL, &n, &stop,
                          sodium_base64_VARIANT_ORIGINAL) != 0 ||
        stop != v + vlen)
        return -1;
    const uint8_t *colon = memchr(buf, ':', n);
    if (colon == NULL)
        return -1;
    *user = buf;
    *ulen = (size_t)(colon - buf);
    *pass = colon + 1;
    *plen = n - *ulen - 1;
    return 0;
}

/* Whether the head p[0..len) may have the metrics: no authorize callback,
 * or credentials it accepts. */
static bool authorized(http_server *h, const char *p, size_t len)
{
    if (h->authorize == NULL)
        return true;
    uint8_t buf[HTTP_BASIC_AUTH_MAX];
    const uint8_t *user, *pass;
    size_t ulen, plen;
    bool ok = http_basic_auth_parse(p, len, buf, sizeof(buf), &user, &ulen,
                                    &pass, &plen) == 0 &&
              h->authorize(h->arg, user, ulen, pass, plen);
    sodium_memzero(buf, sizeof(buf));
    return ok;
}

static bool path_is(const char *target, size_t tlen, const char *path)
{
    return tlen == strlen(path) && memcmp(target, path, tlen) == 0;
}

/* Answers the head p[0..len) (its final "\r\n\r\n" included). */
static int answer(http_server *h, net_conn *c, const char *p, size_t len)
{
    /* RFC 9112 2.2: empty lines before the request line are ignored */
    while (len >= 2 && p[0] == '\r' && p[1] == '\n') {
        p += 2;
        len -= 2;
    }
    const char *eol = memmem(p, len, "\r\n", 2);
    const char *sp1 = eol ? memchr(p, ' ', (size_t)(eol - p)) : NULL;
    const char *sp2 =
        sp1 ? memchr(sp1 + 1, ' ', (size_t)(eol - sp1 - 1)) : NULL;
    if (sp2 == NULL || sp1 == p || sp2 == sp1 + 1 || eol - sp2 - 1 != 8 ||
        memcmp(sp2 + 1, "HTTP/1.", 7) != 0)
        return reply_static(c, 400, "bad request\n", false);
    size_t mlen = (size_t)(sp1 - p);
    const char *target = sp1 + 1;
    size_t tlen = (size_t)(sp2 - target);
    const char *q = memchr(target, '?', tlen);
    if (q != NULL)
        tlen = (size_t)(q - target);
    bool get = mlen == 3 && memcmp(p, "GET", 3) == 0;
    bool head = mlen == 4 && memcmp(p, "HEAD", 4) == 0;
    enum { METRICS, LIVE, READY } route;
    if (path_is(target, tlen, "/metrics"))
        route = METRICS;
    else if (path_is(target, tlen, "/health/live"))
        route = LIVE;
    else if ((path_is(target, tlen, "/health") ||
              path_is(target, tlen, "/health/ready")) &&
             h->health != NULL)
        route = READY;
    else
        return reply_static(c, 404, "not found\n", head);
    if (!get && !head)
        return reply_static(c, 405, "method not allowed\n", false);
    if (route == LIVE)
        return reply_static(c, 200, "live\n", head);
    if (route == READY) {
        char why[256] = "";
        /* one byte kept for the line's end */
        bool ready = h->health(h->arg, why, sizeof(why) - 1);
        size_t n = strnlen(why, sizeof(why) - 1);
        why[n] = '\n';
        return reply(c, ready ? 200 : 503, CONTENT_TYPE_TEXT, why, n + 1, head);
    }
    if (!authorized(h, p, len)) {
        h->unauthorized++;
        return reply_static(c, 401, "unauthorized\n", head);
    }
    if (h->text == NULL)
        return reply_static(c, 503, "no metrics published yet\n", head);
    int rc = reply(c, 200, CONTENT_TYPE_METRICS, h->text, h->len, head);
    if (rc == 0) {
        h->scrapes++;
        if (h->on_scrape)
            h->on_scrape(h->arg);
    }
    return rc;
}

/* ---- engine callbacks -----------------------------------------------------
 */

static void on_accept(void *arg, net_conn *c)
{
    http_server *h = arg;
    struct hconn *hc = calloc(1, sizeof(*hc));
    if (hc == NULL) {
        net_conn_close(c, -ENOMEM);
        return;
    }
    hc->c = c;
    net_conn_set_data(c, hc);
    if (h->nconns >= h->max_connections) {
        /* the oldest still waiting for its request; if every one has
         * been answered, the oldest (it had its answer, and a client
         * slow to read it should not keep the next one out) */
        struct hconn *old = h->head;
        while (old != NULL && old->answered)
            old = old->next;
        if (old == NULL)
            old = h->head;
        list_unlink(h, old);
        h->evicted++;
        net_conn_close(old->c, RK_EOVERLOADED);
    }
    list_append(h, hc);
}

static int on_input(void *arg, net_conn *c, struct net_input *in)
{
    http_server *h = arg;
    struct hconn *hc = net_conn_data(c);
    if (hc == NULL || hc->answered)
        return 0;
    /* nothing is consumed before the head ends: search only what is new
     * (and the 3 bytes before it), not the whole head per byte received */
    size_t from = hc->scanned > 3 ? hc->scanned - 3 : 0;
    const uint8_t *end =
        in->len >= from + 4
            ? memmem(in->p + from, in->len - from, "\r\n\r\n", 4)
            : NULL;
    hc->scanned = in->len;
    if (end == NULL)
        return 0; /* more to come, up to the cap and the deadline */
    hc->answered = true;
    int rc = answer(h, c, (const char *)in->p, (size_t)(end + 4 - in->p));
    if (rc)
        return rc;
    in->consumed = in->len; /* what follows the head is never read */
    net_conn_finish(c);
    return 0;
}

static void on_close(void *arg, net_conn *c, int err)
{
    http_server *h = arg;
    struct hconn *hc = net_conn_data(c);
    if (hc == NULL)
        return;
    if (err == RK_ETIMEOUT && !hc->answered)
        h->timeouts++;
    list_unlink(h, hc);
    net_conn_set_data(c, NULL);
    free(hc);
}

/* ---- life ------------------------------------------------------------------
 */

/* Resolves address into a numeric host for net_server_new. */
static void on_tls_fail(void *arg,
                        const char *peer,
                        enum net_tls_fail reason,
                        const char *why)
{
    http_server *h = arg;
    if (h->on_tls_fail)
        h->on_tls_fail(h->arg, peer, reason, why);
}

static int numeric_host(char *out, size_t cap, const char *address)
{
    struct addrinfo hints = {0}, *ai = NULL;
    hints.ai_family = AF_UNSPEC;
    hints.ai_socktype = SOCK_STREAM;
    hints.ai_flags = AI_PASSIVE;
    if (address == NULL || getaddrinfo(address, NULL, &hints, &ai) != 0 ||
        ai == NULL)
        return -EINVAL;
    int rc = getnameinfo(ai->ai_addr, ai->ai_addrlen, out, (socklen_t)cap, NULL,
                         0, NI_NUMERICHOST);
    freeaddrinfo(ai);
    return rc == 0 ? 0 : -EINVAL;
}

int http_server_start(http_server **out,
                      uv_loop_t *loop,
                      const struct http_server_opts *opts)
{
    char host[NI_MAXHOST];
    int rc = numeric_host(host, sizeof(host), opts->address);
    if (rc)
        return rc;
    http_server *h = calloc(1, sizeof(*h));
    if (h == NULL)
        return -ENOMEM;
    h->max_connections = opts->max_connections ? opts->max_connections : 32;
    h->on_scrape = opts->on_scrape;
    h->health = opts->health;
    h->authorize = opts->authorize;
    h->arg = opts->arg;
    uint32_t timeout_ms =
        opts->request_timeout_ms ? opts->request_timeout_ms : 5000;

    struct net_server_opts so = NET_SERVER_OPTS_INIT;
    so.host = host;
    so.port = opts->port;
    so.handshake_timeout_ms = timeout_ms; /* bounds the response's drain */
    so.on_input = on_input;
    so.on_accept = on_accept;
    so.on_close = on_close;
    so.arg = h;
    so.input_cap = HTTP_SERVER_HEAD_MAX;
    so.frame_timeout_ms = timeout_ms;
    so.frame_deadline = true;
    so.tls = opts->tls;
    so.on_tls_fail = on_tls_fail;
    h->on_tls_fail = opts->on_tls_fail;
    rc = net_server_new(&h->srv, loop, &so);
    if (rc) {
        free(h);
        return rc;
    }
    h->port = (uint16_t)net_server_port(h->srv);
    *out = h;
    return 0;
}

int http_server_tls_set(http_server *h, struct net_tls *tls)
{
    return net_server_tls_set(h->srv, tls);
}

uint16_t http_server_port(const http_server *h)
{
    return h->port;
}

int http_server_publish(http_server *h, char *text, size_t len)
{
    free(h->text);
    h->text = text;
    h->len = len;
    return 0;
}

uint64_t http_server_scrapes(const http_server *h)
{
    return h->scrapes;
}

uint64_t http_server_evicted(const http_server *h)
{
    return h->evicted;
}

uint64_t http_server_timeouts(const http_server *h)
{
    return h->timeouts;
}

uint64_t http_server_unauthorized(const http_server *h)
{
    return h->unauthorized;
}

static void server_closed(void *arg)
{
    http_server *h = arg;
    void (*done)(void *) = h->done;
    void *done_arg = h->done_arg;
    free(h->text);
    free(h);
    if (done)
        done(done_arg);
}

void http_server_free(http_server *h, void (*done)(void *arg), void *arg)
{
    if (h == NULL)
        return;
    h->done = done;
    h->done_arg = arg;
    net_server_close(h->srv, server_closed, h);
}
