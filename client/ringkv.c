/*
 * ringkv.c - libringkv: connections, pipelining, timeouts and reconnects over
 * the native protocol codecs of wire/client_msg.h.
 *
 * The socket is non-blocking and every wait is a poll() bounded by a
 * deadline on CLOCK_MONOTONIC, so the blocking API never hangs. Writes and
 * reads interleave in flush: a client pipelining thousands of requests must
 * drain responses while it writes, or both sides' buffers fill and stop.
 *
 * TLS (opts.tls) runs on the same socket: OpenSSL's SSL object reads and
 * writes the non-blocking fd itself, and "would block" from it (in either
 * direction: a read may need to write) is one more reason to poll. Bytes
 * it has decrypted and holds (SSL_pending) are read before polling, since
 * the socket shows nothing for them.
 */
#include "client/ringkv.h"

#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <netdb.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <openssl/err.h>
#include <openssl/ssl.h>
#include <openssl/x509v3.h>
#include <poll.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#include "client/ringkv_internal.h"

#define RINGKV__READ_CHUNK (64u * 1024u)

/* ---- small helpers ----------------------------------------------------- */

int64_t ringkv__now_ms(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

/* splitmix64 over c->rng, seeded in ringkv_new. */
static uint64_t ringkv__rand(ringkv *c)
{
    uint64_t z = (c->rng += 0x9e3779b97f4a7c15ull);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    return z ^ (z >> 31);
}

static int ringkv__left(int64_t deadline)
{
    int64_t l = deadline - ringkv__now_ms();
    return l < 0 ? 0 : (l > INT32_MAX ? INT32_MAX : (int)l);
}

void ringkv__seterr(ringkv *c, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(c->err, sizeof(c->err), fmt, ap);
    va_end(ap);
}

static char *ringkv__strdup(const char *s)
{
    return s ? strdup(s) : NULL;
}

const char *ringkv_errmsg(const ringkv *c)
{
    return c->err;
}

const char *ringkv_peer(const ringkv *c)
{
    return c->peer;
}

const char *ringkv_host_name(const ringkv *c, size_t i)
{
    return i < c->nhosts ? c->hosts[i].name : NULL;
}

size_t ringkv_pending(const ringkv *c)
{
    size_t n = c->pending - c->internal;
    for (size_t i = 0; i < ringkv__route_count(c); i++) {
        const ringkv *h = ringkv__route_at(c, i);
        n += h->pending - h->internal;
    }
    return n;
}

/* ---- handle ------------------------------------------------------------ */

/* Parse one "host[:port]" / "[v6]:port" item of length n into h. */
static int ringkv__host_parse(struct ringkv__host *h, const char *s, size_t n)
{
    const char *host = s, *port = NULL;
    size_t hlen, plen = 0;
    if (n > 0 && s[0] == '[') {
        const char *close = memchr(s, ']', n);
        if (close == NULL)
            return -1;
        host = s + 1;
        hlen = (size_t)(close - host);
        size_t rest = n - (size_t)(close - s) - 1;
        if (rest > 0) {
            if (close[1] != ':')
                return -1;
            port = close + 2;
            plen = rest - 1;
        }
    } else {
        const char *colon = memchr(s, ':', n);
        hlen = colon ? (size_t)(colon - s) : n;
        if (colon != NULL) {
            port = colon + 1;
            plen = n - hlen - 1;
            if (memchr(port, ':', plen) != NULL)
                return -1; /* a bare IPv6 address needs brackets */
        }
    }
    if (hlen == 0)
        return -1;
    unsigned v = RINGKV_DEFAULT_PORT;
    if (port != NULL) {
        if (plen == 0 || plen > 5)
            return -1;
        v = 0;
        for (size_t i = 0; i < plen; i++) {
            if (port[i] < '0' || port[i] > '9')
                return -1;
            v = v * 10 + (unsigned)(port[i] - '0');
        }
        if (v == 0 || v > 65535)
            return -1;
    }
    snprintf(h->port, sizeof(h->port), "%u", v);
    h->name = strndup(host, hlen);
    return h->name ? 0 : -ENOMEM;
}

/* The TLS context of a handle: verify the server against the CA file. */
static int ringkv__tls_ctx(ringkv *c, const char **why)
{
    c->tls_ctx = SSL_CTX_new(TLS_client_method());
    if (c->tls_ctx == NULL) {
        *why = "out of memory";
        return -ENOMEM;
    }
    SSL_CTX_set_min_proto_version(c->tls_ctx, TLS1_2_VERSION);
    SSL_CTX_set_mode(c->tls_ctx, SSL_MODE_ENABLE_PARTIAL_WRITE |
                                     SSL_MODE_ACCEPT_MOVING_WRITE_BUFFER);
    SSL_CTX_set_verify(c->tls_ctx, SSL_VERIFY_PEER, NULL);
    int ok =
        c->tls_ca_file
            ? SSL_CTX_load_verify_locations(c->tls_ctx, c->tls_ca_file, NULL)
            : SSL_CTX_set_default_verify_paths(c->tls_ctx);
    ERR_clear_error();
    if (ok != 1) {
        *why = "cannot load the TLS CA file (PEM certificates)";
        return RK_ECONFIG;
    }
    return 0;
}

int ringkv_new(ringkv **out,
               const struct ringkv_opts *opts,
               const char **out_err)
{
    const char *why = "bad host list";
    int rc = RK_ECONFIG;
    *out = NULL;
    if (opts == NULL || opts->hosts == NULL || opts->hosts[0] == '\0') {
        why = "no host given";
        goto fail;
    }
    if (opts->consistency > WIRE_CCL_LAST) {
        why = "unknown consistency level";
        goto fail;
    }
    ringkv *c = calloc(1, sizeof(*c));
    if (c == NULL) {
        rc = -ENOMEM;
        why = "out of memory";
        goto fail;
    }
    c->fd = -1;
    c->opts = *opts;
    c->next_id = 1;
    /* opts.spread's picks: different in every handle and process */
    if (getrandom(&c->rng, sizeof(c->rng), GRND_NONBLOCK) !=
        (ssize_t)sizeof(c->rng))
        c->rng = (uint64_t)ringkv__now_ms() ^ (uint64_t)(uintptr_t)c ^
                 ((uint64_t)getpid() << 32);
    if (c->opts.connect_timeout_ms <= 0)
        c->opts.connect_timeout_ms = 2000;
    if (c->opts.timeout_ms <= 0)
        c->opts.timeout_ms = 5000;
    if (c->opts.retries < 0)
        c->opts.retries = 0;
    c->password = ringkv__strdup(opts->password);
    c->user = ringkv__strdup(opts->user);
    c->client_name = ringkv__strdup(opts->client_name);
    if ((opts->password && !c->password) || (opts->user && !c->user) ||
        (opts->client_name && !c->client_name)) {
        rc = -ENOMEM;
        why = "out of memory";
        goto free_c;
    }
    c->tls_ca_file = ringkv__strdup(opts->tls_ca_file);
    c->tls_verify_name = ringkv__strdup(opts->tls_verify_name);
    if ((opts->tls_ca_file && !c->tls_ca_file) ||
        (opts->tls_verify_name && !c->tls_verify_name)) {
        rc = -ENOMEM;
        why = "out of memory";
        goto free_c;
    }
    c->opts.tls_ca_file = c->tls_ca_file;
    c->opts.tls_verify_name = c->tls_verify_name;
    if (opts->tls && (rc = ringkv__tls_ctx(c, &why)) != 0)
        goto free_c;
    if (opts->token_aware && (rc = ringkv__route_new(c)) != 0) {
        why = "out of memory";
        goto free_c;
    }
    c->opts.hosts = NULL;
    c->opts.password = c->password;
    c->opts.user = c->user;
    c->opts.client_name = c->client_name;
    size_t n = 1;
    for (const char *p = opts->hosts; *p; p++)
        n += *p == ',';
    c->hosts = calloc(n, sizeof(*c->hosts));
    if (c->hosts == NULL) {
        rc = -ENOMEM;
        why = "out of memory";
        goto free_c;
    }
    const char *p = opts->hosts;
    while (1) {
        const char *e = strchr(p, ',');
        size_t len = e ? (size_t)(e - p) : strlen(p);
        while (len > 0 && *p == ' ') {
            p++;
            len--;
        }
        while (len > 0 && p[len - 1] == ' ')
            len--;
        int prc = ringkv__host_parse(&c->hosts[c->nhosts], p, len);
        if (prc != 0) {
            rc = prc == -ENOMEM ? -ENOMEM : RK_ECONFIG;
            why = prc == -ENOMEM ? "out of memory"
                                 : "bad host (want host[:port] or "
                                   "[ipv6]:port, port 1..65535)";
            goto free_c;
        }
        c->nhosts++;
        if (e == NULL)
            break;
        p = e + 1;
    }
    *out = c;
    return 0;

free_c:
    ringkv_free(c);
fail:
    if (out_err != NULL)
        *out_err = why;
    return rc;
}

void ringkv__drop(ringkv *c)
{
    if (c->fd >= 0 && (c->owner || c->rt))
        ringkv__route_lost(c);
    c->internal = 0;
    if (!c->owner)
        c->node[0] = '\0'; /* the next connection may reach another */
    if (c->ssl) {
        (void)SSL_shutdown(c->ssl); /* close_notify, if the socket takes it */
        SSL_free(c->ssl);
        ERR_clear_error();
        c->ssl = NULL;
    }
    if (c->fd >= 0)
        close(c->fd);
    c->fd = -1;
    c->pending = 0;
    c->out.len = 0;
    c->out_off = 0;
    c->in_len = c->in_off = 0;
}

void ringkv_close(ringkv *c)
{
    ringkv__drop(c);
    ringkv__route_close(c);
}

void ringkv_free(ringkv *c)
{
    if (c == NULL)
        return;
    ringkv__drop(c);
    ringkv__route_free(c->rt);
    for (size_t i = 0; i < c->nhosts; i++)
        free(c->hosts[i].name);
    free(c->hosts);
    free(c->password);
    free(c->user);
    free(c->client_name);
    free(c->tls_ca_file);
    free(c->tls_verify_name);
    SSL_CTX_free(c->tls_ctx);
    wire_cbuf_release(&c->out);
    free(c->in);
    free(c->pfds);
    free(c->pfh);
    free(c);
}

/* ---- I/O ---------------------------------------------------------------- */

/* Broken connection: remember why, disconnect, return the code. */
static int ringkv__broken(ringkv *c, int rc, const char *what)
{
    ringkv__seterr(c, "%s %s: %s", what, c->peer,
                   rc == RK_ECLOSED ? "connection closed by peer"
                                    : rk_strerror(rc));
    ringkv__drop(c);
    return rc;
}

/* A TLS read or write that did not complete: 0 when it would block (poll
 * and retry), else a broken-connection code. */
static int ringkv__tls_fail(ringkv *c, int r, const char *what)
{
    int e = SSL_get_error(c->ssl, r);
    int err = errno;
    ERR_clear_error();
    if (e == SSL_ERROR_WANT_READ || e == SSL_ERROR_WANT_WRITE)
        return 0;
    if (e == SSL_ERROR_ZERO_RETURN || (e == SSL_ERROR_SYSCALL && err == 0))
        return ringkv__broken(c, RK_ECLOSED, what);
    if (e == SSL_ERROR_SYSCALL)
        return ringkv__broken(c, -err, what);
    return ringkv__broken(c, RK_EPROTO, what);
}

static int ringkv__tls_read(ringkv *c)
{
    size_t n = 0;
    int r = SSL_read_ex(c->ssl, c->in + c->in_len, c->in_cap - c->in_len, &n);
    if (r == 1) {
        c->in_len += n;
        return 0;
    }
    return ringkv__tls_fail(c, r, "reading from");
}

/* Read what is available into c->in. 0, or a broken-connection code. */
static int ringkv__read_some(ringkv *c)
{
    if (c->in_off > 0 && c->in_off == c->in_len) {
        c->in_off = c->in_len = 0;
        if (c->in_cap > (4u << 20)) { /* let a huge answer's buffer go */
            free(c->in);
            c->in = NULL;
            c->in_cap = 0;
        }
    }
    if (c->in_cap - c->in_len < RINGKV__READ_CHUNK) {
        if (c->in_off > 0) {
            memmove(c->in, c->in + c->in_off, c->in_len - c->in_off);
            c->in_len -= c->in_off;
            c->in_off = 0;
        }
        if (c->in_cap - c->in_len < RINGKV__READ_CHUNK) {
            size_t cap = c->in_cap ? c->in_cap * 2 : 2 * RINGKV__READ_CHUNK;
            uint8_t *np = realloc(c->in, cap);
            if (np == NULL)
                return ringkv__broken(c, -ENOMEM, "reading from");
            c->in = np;
            c->in_cap = cap;
        }
    }
    if (c->ssl)
        return ringkv__tls_read(c);
    ssize_t n = recv(c->fd, c->in + c->in_len, c->in_cap - c->in_len, 0);
    if (n > 0) {
        c->in_len += (size_t)n;
        return 0;
    }
    if (n == 0)
        return ringkv__broken(c, RK_ECLOSED, "reading from");
    if (errno == EAGAIN || errno == EWOULDBLOCK || errno == EINTR)
        return 0;
    return ringkv__broken(c, -errno, "reading from");
}

/* Write queued bytes until done or deadline, reading meanwhile. */
int ringkv__flush_until(ringkv *c, int64_t deadline)
{
    while (c->fd >= 0 && c->out_off < c->out.len) {
        ssize_t n;
        if (c->ssl) {
            size_t w = 0;
            int r = SSL_write_ex(c->ssl, c->out.p + c->out_off,
                                 c->out.len - c->out_off, &w);
            if (r != 1) {
                int rc = ringkv__tls_fail(c, r, "writing to");
                if (rc != 0)
                    return rc;
            }
            n = r == 1 ? (ssize_t)w : 0; /* 0: poll, then again */
        } else {
            n = send(c->fd, c->out.p + c->out_off, c->out.len - c->out_off,
                     MSG_NOSIGNAL);
        }
        if (n > 0) {
            c->out_off += (size_t)n;
            c->written += (uint64_t)n;
            continue;
        }
        if (n < 0 && errno != EAGAIN && errno != EWOULDBLOCK && errno != EINTR)
            return ringkv__broken(c, -errno, "writing to");
        struct pollfd pfd = {c->fd, POLLOUT | POLLIN, 0};
        int left = ringkv__left(deadline);
        int pr = poll(&pfd, 1, left);
        if (pr < 0 && errno != EINTR)
            return ringkv__broken(c, -errno, "poll on");
        if (pr == 0) {
            ringkv__seterr(c, "timed out writing to %s", c->peer);
            return RK_ETIMEOUT;
        }
        if (pr > 0 && (pfd.revents & (POLLIN | POLLHUP | POLLERR))) {
            int rc = ringkv__read_some(c);
            if (rc != 0)
                return rc;
        }
    }
    if (c->fd < 0)
        return RK_ECLOSED;
    c->out.len = c->out_off = 0;
    return 0;
}

/* The error of node handle h as the handle's own. */
static int ringkv__adopt(ringkv *c, ringkv *h, int rc)
{
    if (h != c)
        memcpy(c->err, h->err, sizeof(c->err));
    return rc;
}

int ringkv_flush(ringkv *c)
{
    int64_t deadline = ringkv__now_ms() + c->opts.timeout_ms;
    for (size_t i = 0; i <= ringkv__route_count(c); i++) {
        ringkv *h = i == 0 ? c : ringkv__route_at(c, i - 1);
        if (h->fd < 0) {
            if (h->out.len > h->out_off)
                return RK_ECLOSED;
            continue;
        }
        int rc = ringkv__flush_until(h, deadline);
        if (rc != 0)
            return ringkv__adopt(c, h, rc);
    }
    return 0;
}

/* One whole response frame from c's buffer decoded into out: 1, 0 when
 * none is whole yet, RK_EPROTO (disconnected). Answers of the route's RING
 * request are taken by the route (2, nothing in out). */
static int ringkv__take(ringkv *c, struct wire_cresp *out)
{
    struct rk_slice body = {NULL, 0};
    size_t used = 0;
    int rc = 0;
    if (c->in != NULL)
        rc = wire_cframe_parse(&body, &used, c->in + c->in_off,
                               c->in_len - c->in_off);
    if (rc != 0) {
        ringkv__seterr(c, "bad frame from %s: %s", c->peer, rk_strerror(rc));
        ringkv__drop(c);
        return RK_EPROTO;
    }
    if (used == 0)
        return 0;
    rc = wire_cresp_decode(out, body.p, body.len);
    c->in_off += used;
    if (rc != 0) {
        ringkv__seterr(c, "bad response from %s: %s", c->peer,
                       out->why ? out->why : rk_strerror(rc));
        wire_cresp_clear(out);
        ringkv__drop(c);
        return RK_EPROTO;
    }
    c->pending--;
    if ((c->rt || c->owner) && ringkv__route_answer(c, out)) {
        wire_cresp_clear(out);
        return 2;
    }
    return 1;
}

/* Wait for one whole response frame and decode it into out. */
int ringkv__recv_until(ringkv *c,
                       struct wire_cresp *out,
                       int64_t deadline,
                       bool internal)
{
    int rc;
    if (c->pending == 0) {
        ringkv__seterr(c, "no request outstanding");
        return RK_EBADREQ;
    }
    if ((rc = ringkv__flush_until(c, deadline)) != 0)
        return rc;
    while (1) {
        rc = ringkv__take(c, out);
        if (rc < 0)
            return rc;
        if (rc == 1)
            return 0;
        if (rc == 2) {
            if (internal)
                return RINGKV__INTERNAL;
            if (c->pending == 0) {
                ringkv__seterr(c, "no request outstanding");
                return RK_EBADREQ;
            }
            continue;
        }
        if (c->ssl && SSL_pending(c->ssl) > 0) { /* decrypted, held */
            if ((rc = ringkv__read_some(c)) != 0)
                return rc;
            continue;
        }
        struct pollfd pfd = {c->fd, POLLIN, 0};
        int pr = poll(&pfd, 1, ringkv__left(deadline));
        if (pr < 0 && errno != EINTR)
            return ringkv__broken(c, -errno, "poll on");
        if (pr == 0) {
            ringkv__seterr(c, "no answer from %s in time", c->peer);
            return RK_ETIMEOUT;
        }
        if (pr > 0 && (rc = ringkv__read_some(c)) != 0)
            return rc;
    }
}

/* A token-aware handle's connection h failed: as with one connection,
 * every outstanding request is gone (ringkv_recv's contract). */
static int ringkv__recv_fail(ringkv *c, ringkv *h, int rc)
{
    ringkv__adopt(c, h, rc);
    ringkv_close(c);
    return rc;
}

/* ringkv_recv over every connection of a token-aware handle. */
static int ringkv__recv_any(ringkv *c, struct wire_cresp *out, int64_t deadline)
{
    size_t nh = ringkv__route_count(c) + 1;
    if (ringkv_pending(c) == 0) {
        ringkv__seterr(c, "no request outstanding");
        return RK_EBADREQ;
    }
    for (size_t i = 0; i < nh; i++) {
        ringkv *h = i == 0 ? c : ringkv__route_at(c, i - 1);
        if (h->fd >= 0 && h->out.len > h->out_off) {
            int rc = ringkv__flush_until(h, deadline);
            if (rc == RK_ETIMEOUT)
                return ringkv__adopt(c, h, rc);
            if (rc != 0)
                return ringkv__recv_fail(c, h, rc);
        }
    }
    while (1) {
        size_t n = 0;
        bool again = false;
        /* a RING answer taken may have dropped node handles: count again */
        nh = ringkv__route_count(c) + 1;
        if (nh > c->pcap) {
            struct pollfd *p = realloc(c->pfds, nh * sizeof(*p));
            if (p)
                c->pfds = p;
            ringkv **q = p ? realloc(c->pfh, nh * sizeof(*q)) : NULL;
            if (q)
                c->pfh = q;
            if (!p || !q)
                return ringkv__recv_fail(c, c, -ENOMEM);
            c->pcap = nh;
        }
        struct pollfd *pfd = c->pfds;
        ringkv **ph = c->pfh;
        /* from a different connection each call: one whose buffer holds
         * many answers must not hide the others' (the route's RING) */
        size_t first = c->rr++ % nh;
        for (size_t k = 0; k < nh; k++) {
            size_t i = (first + k) % nh;
            ringkv *h = i == 0 ? c : ringkv__route_at(c, i - 1);
            if (h->fd < 0 || h->pending == 0)
                continue;
            int rc = ringkv__take(h, out);
            if (rc == 2) { /* the route's RING: handles may have gone */
                again = true;
                break;
            }
            if (rc == 1)
                return 0;
            if (rc < 0)
                return ringkv__recv_fail(c, h, rc);
            if (h->pending == 0)
                continue;
            if (h->ssl && SSL_pending(h->ssl) > 0) { /* decrypted, held */
                if ((rc = ringkv__read_some(h)) != 0)
                    return ringkv__recv_fail(c, h, rc);
                again = true;
                continue;
            }
            pfd[n] = (struct pollfd){h->fd, POLLIN, 0};
            ph[n++] = h;
        }
        if (again)
            continue;
        if (ringkv_pending(c) == 0) { /* only the route's RING was */
            ringkv__seterr(c, "no request outstanding");
            return RK_EBADREQ;
        }
        int pr = poll(pfd, (nfds_t)n, ringkv__left(deadline));
        if (pr < 0 && errno != EINTR)
            return ringkv__recv_fail(c, c, -errno);
        if (pr == 0) {
            ringkv__seterr(c, "no answer in time from %s%s", c->peer,
                           nh > 1 ? " or the replicas' nodes" : "");
            return RK_ETIMEOUT;
        }
        for (size_t i = 0; pr > 0 && i < n; i++) {
            if (!(pfd[i].revents & (POLLIN | POLLHUP | POLLERR)))
                continue;
            int rc = ringkv__read_some(ph[i]);
            if (rc != 0)
                return ringkv__recv_fail(c, ph[i], rc);
        }
    }
}

int ringkv_recv(ringkv *c, struct wire_cresp *out, int timeout_ms)
{
    memset(out, 0, sizeof(*out));
    if (timeout_ms < 0)
        timeout_ms = c->opts.timeout_ms;
    int64_t deadline = ringkv__now_ms() + timeout_ms;
    if (c->rt)
        return ringkv__recv_any(c, out, deadline);
    return ringkv__recv_until(c, out, deadline, false);
}

/* ---- connecting ---------------------------------------------------------- */

static int ringkv__connect_addr(ringkv *c, const struct addrinfo *ai)
{
    int fd =
        socket(ai->ai_family, ai->ai_socktype | SOCK_NONBLOCK | SOCK_CLOEXEC,
               ai->ai_protocol);
    if (fd < 0)
        return -errno;
    int one = 1;
    setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
    if (connect(fd, ai->ai_addr, ai->ai_addrlen) != 0) {
        if (errno != EINPROGRESS) {
            int e = -errno;
            close(fd);
            return e;
        }
        struct pollfd pfd = {fd, POLLOUT, 0};
        int pr;
        do {
            pr = poll(&pfd, 1, c->opts.connect_timeout_ms);
        } while (pr < 0 && errno == EINTR);
        if (pr <= 0) {
            close(fd);
            return pr == 0 ? -ETIMEDOUT : -errno;
        }
        int soerr = 0;
        socklen_t sl = sizeof(soerr);
        if (getsockopt(fd, SOL_SOCKET, SO_ERROR, &soerr, &sl) != 0 ||
            soerr != 0) {
            close(fd);
            return soerr ? -soerr : -errno;
        }
    }
    return fd;
}

/* TLS on the connected fd to host: the handshake, within the connect
 * timeout. 0, or an error with c->err set (RK_EAUTH: the certificate was
 * refused). */
static int ringkv__tls_connect(ringkv *c, int fd, const char *host)
{
    const char *name = c->tls_verify_name ? c->tls_verify_name : host;
    int64_t deadline = ringkv__now_ms() + c->opts.connect_timeout_ms;
    ERR_clear_error();
    c->ssl = SSL_new(c->tls_ctx);
    if (c->ssl == NULL || SSL_set_fd(c->ssl, fd) != 1) {
        ringkv__seterr(c, "TLS with %s: out of memory", c->peer);
        return -ENOMEM;
    }
    if (name[0]) {
        X509_VERIFY_PARAM *vp = SSL_get0_param(c->ssl);
        if (X509_VERIFY_PARAM_set1_ip_asc(vp, name) != 1) {
            ERR_clear_error();
            if (SSL_set1_host(c->ssl, name) != 1 ||
                SSL_set_tlsext_host_name(c->ssl, name) != 1) {
                ringkv__seterr(c, "TLS with %s: bad name %s", c->peer, name);
                return RK_ECONFIG;
            }
        }
    }
    while (1) {
        int r = SSL_connect(c->ssl);
        if (r == 1)
            return 0;
        int e = SSL_get_error(c->ssl, r);
        if (e != SSL_ERROR_WANT_READ && e != SSL_ERROR_WANT_WRITE) {
            long v = SSL_get_verify_result(c->ssl);
            char reason[160] = "";
            unsigned long le = ERR_peek_last_error();
            if (le)
                ERR_error_string_n(le, reason, sizeof(reason));
            ERR_clear_error();
            if (v != X509_V_OK) {
                ringkv__seterr(c, "TLS with %s: certificate refused: %s",
                               c->peer, X509_verify_cert_error_string(v));
                return RK_EAUTH;
            }
            ringkv__seterr(c, "TLS with %s failed: %s", c->peer,
                           reason[0] ? reason
                                     : "connection closed in the handshake "
                                       "(not a TLS port?)");
            return RK_EPROTO;
        }
        struct pollfd pfd = {fd, e == SSL_ERROR_WANT_READ ? POLLIN : POLLOUT,
                             0};
        int pr = poll(&pfd, 1, ringkv__left(deadline));
        if (pr < 0 && errno != EINTR) {
            ringkv__seterr(c, "TLS with %s: %s", c->peer, strerror(errno));
            return -errno;
        }
        if (pr == 0) {
            ringkv__seterr(c, "TLS with %s: no handshake in time", c->peer);
            return RK_ETIMEOUT;
        }
    }
}

static int ringkv__hello(ringkv *c)
{
    struct wire_creq q = {.op = WIRE_COP_HELLO,
                          .has = WIRE_CREQ_VERSION,
                          .version = WIRE_CPROTO_VERSION};
    if (c->password) {
        q.has |= WIRE_CREQ_PASSWORD;
        q.password = RK_SLICE(c->password, strlen(c->password));
        if (c->user) {
            q.has |= WIRE_CREQ_USER;
            q.user = RK_SLICE(c->user, strlen(c->user));
        }
    }
    if (c->client_name) {
        q.has |= WIRE_CREQ_CLIENT;
        q.client = RK_SLICE(c->client_name, strlen(c->client_name));
    }
    q.id = c->next_id++;
    int rc = wire_creq_encode(&c->out, &q);
    if (rc != 0) {
        ringkv__seterr(c, "HELLO: %s", rk_strerror(rc));
        return rc;
    }
    c->pending++;
    struct wire_cresp r;
    memset(&r, 0, sizeof(r));
    rc =
        ringkv__recv_until(c, &r, ringkv__now_ms() + c->opts.timeout_ms, false);
    if (rc != 0)
        return rc;
    if (r.err != 0) {
        rc = r.err;
        ringkv__seterr(c, "%s from %s: %.*s", wire_cerr_name(rc), c->peer,
                       (int)r.msg.len, (const char *)r.msg.p);
    } else if (r.id != q.id) {
        rc = RK_EPROTO;
        ringkv__seterr(c, "HELLO answered with a wrong id by %s", c->peer);
    } else if ((r.has & WIRE_CRESP_NODE) && c->owner &&
               (r.node.len != strlen(c->node) ||
                memcmp(r.node.p, c->node, r.node.len) != 0)) {
        /* a node connection must reach the node the ring names there */
        rc = RK_EPROTO;
        ringkv__seterr(c, "%s answered as node %.*s, not %s as the ring says",
                       c->peer, (int)r.node.len, (const char *)r.node.p,
                       c->node);
    } else if ((r.has & WIRE_CRESP_NODE) && !c->owner &&
               r.node.len < sizeof(c->node)) {
        memcpy(c->node, r.node.p, r.node.len);
        c->node[r.node.len] = '\0';
        memcpy(c->hosts[c->cur].node, c->node, sizeof(c->node));
    }
    wire_cresp_clear(&r);
    return rc;
}

/* Appends a host's failure to errs ("; " between two), cut at cap. */
static void errs_add(char *errs, size_t cap, size_t *len, const char *fmt, ...)
{
    if (*len > 0 && *len + 2 < cap) {
        memcpy(errs + *len, "; ", 3);
        *len += 2;
    }
    va_list ap;
    va_start(ap, fmt);
    int n = *len < cap ? vsnprintf(errs + *len, cap - *len, fmt, ap) : 0;
    va_end(ap);
    *len += n > 0 ? (size_t)n : 0;
    if (*len >= cap)
        *len = cap - 1;
}

int ringkv_connect(ringkv *c)
{
    if (c->fd >= 0)
        return 0;
    int last = -ECONNREFUSED;
    char errs[sizeof(c->err)] = "";
    size_t elen = 0;
    size_t first = c->used_any ? c->cur + 1 : 0;
    if (c->opts.spread != RINGKV_SPREAD_NONE && c->nhosts > 1) {
        /* uniform over the hosts, or over those other than the last */
        uint64_t r = ringkv__rand(c);
        if (c->used_any) {
            first = (size_t)(r % (c->nhosts - 1));
            first += first >= c->cur;
        } else if (c->opts.spread == RINGKV_SPREAD_RANDOM) {
            first = (size_t)(r % c->nhosts);
        }
    }
    for (size_t k = 0; k < c->nhosts; k++) {
        size_t i = (first + k) % c->nhosts;
        struct ringkv__host *h = &c->hosts[i];
        struct addrinfo hints = {.ai_family = AF_UNSPEC,
                                 .ai_socktype = SOCK_STREAM};
        struct addrinfo *res = NULL;
        bool v6 = strchr(h->name, ':') != NULL;
        snprintf(c->peer, sizeof(c->peer), v6 ? "[%s]:%s" : "%s:%s", h->name,
                 h->port);
        int g = getaddrinfo(h->name, h->port, &hints, &res);
        if (g != 0) {
            last = -EHOSTUNREACH;
            errs_add(errs, sizeof(errs), &elen, "%s: %s", c->peer,
                     gai_strerror(g));
            continue;
        }
        int fd = -ECONNREFUSED;
        for (struct addrinfo *ai = res; ai; ai = ai->ai_next) {
            fd = ringkv__connect_addr(c, ai);
            if (fd >= 0)
                break;
        }
        freeaddrinfo(res);
        c->cur = i;
        c->used_any = true;
        if (fd < 0) {
            last = fd;
            errs_add(errs, sizeof(errs), &elen, "%s: %s", c->peer,
                     rk_strerror(fd));
            continue;
        }
        c->fd = fd;
        c->pending = 0;
        c->out.len = c->out_off = 0;
        c->in_len = c->in_off = 0;
        if (c->tls_ctx) {
            int rc = ringkv__tls_connect(c, fd, h->name);
            if (rc != 0) {
                ringkv__drop(c);
                last = rc;
                errs_add(errs, sizeof(errs), &elen, "%s", c->err);
                continue;
            }
        }
        if (c->password || c->opts.hello) {
            int rc = ringkv__hello(c);
            if (rc != 0) {
                ringkv__drop(c);
                if (rc == RK_EAUTH)
                    return rc;
                last = rc;
                errs_add(errs, sizeof(errs), &elen, "%s", c->err);
                continue;
            }
        }
        if (!c->owner && !c->node[0])
            memcpy(c->node, h->node, sizeof(c->node)); /* known from before */
        c->err[0] = '\0';
        return 0;
    }
    ringkv__seterr(c, "cannot connect: %s", errs);
    return last;
}

/* ---- requests ------------------------------------------------------------ */

int ringkv__queue(ringkv *c,
                  ringkv *h,
                  uint64_t *out_id,
                  const struct wire_creq *req)
{
    int rc;
    if ((rc = ringkv_connect(h)) != 0)
        return ringkv__adopt(c, h, rc);
    struct wire_creq q = *req;
    q.id = c->next_id++;
    if (!(q.has & WIRE_CREQ_CL) && c->opts.consistency != WIRE_CCL_DEFAULT) {
        q.has |= WIRE_CREQ_CL;
        q.cl = c->opts.consistency;
    }
    /* keep the buffer from growing without bound while pipelining */
    if (h->out.len - h->out_off > (1u << 20) &&
        (rc = ringkv__flush_until(h, ringkv__now_ms() + c->opts.timeout_ms)) !=
            0)
        return ringkv__adopt(c, h, rc);
    if ((rc = wire_creq_encode(&h->out, &q)) != 0) {
        ringkv__seterr(c, "cannot send %s: %s",
                       wire_cop_name(q.op) ? wire_cop_name(q.op) : "request",
                       rk_strerror(rc));
        return rc;
    }
    h->pending++;
    if (out_id != NULL)
        *out_id = q.id;
    return 0;
}

int ringkv_send(ringkv *c, uint64_t *out_id, const struct wire_creq *req)
{
    ringkv *h = c;
    if (c->rt) {
        int rc = ringkv__route_refresh(c, req, false);
        if (rc != 0)
            return rc;
        h = ringkv__route_pick(c, req);
    }
    return ringkv__queue(c, h, out_id, req);
}

/* ---- error kinds ------------------------------------------------------- */

enum ringkv_errkind ringkv_errkind(int err)
{
    switch (err) {
    case 0:
        return RINGKV_KIND_OK;
    case RK_ENOTFOUND:
        return RINGKV_KIND_NOTFOUND;
    case RK_EAUTH:
        return RINGKV_KIND_AUTH;
    case RK_EUNAVAILABLE:
    case RK_ETIMEOUT:
    case RK_EOVERLOADED:
    case RK_ESTALE:
    case RK_ECLOCKSKEW: /* the coordinator's clock is ahead: another node */
        return RINGKV_KIND_CLUSTER;
    case RK_EBADREQ:
    case RK_ETOOLARGE:
        return RINGKV_KIND_REJECTED;
    case RK_ENOTSUP:
        return RINGKV_KIND_NOTSUP;
    case RK_ENOPERM:
        return RINGKV_KIND_NOPERM;
    default:
        return rk_err_connection(err) ? RINGKV_KIND_CONNECTION
                                      : RINGKV_KIND_OTHER;
    }
}

bool ringkv_retryable(int err, bool idempotent)
{
    switch (err) {
    case RK_ESTALE:
    case RK_EOVERLOADED:
    case RK_EUNAVAILABLE:
        return true;
    case RK_ETIMEOUT:
        return idempotent;
    default:
        return idempotent && ringkv_errkind(err) == RINGKV_KIND_CONNECTION;
    }
}

bool ringkv_idempotent(const struct wire_creq *req)
{
    switch (req->op) {
    case WIRE_COP_HELLO:
    case WIRE_COP_PING:
    case WIRE_COP_GET:
    case WIRE_COP_MGET:
    case WIRE_COP_SCAN:
    case WIRE_COP_STATUS:
    case WIRE_COP_RING:
    case WIRE_COP_ENDPOINTS:
    case WIRE_COP_METRICS:
    case WIRE_COP_NETSTATS:
    case WIRE_COP_LISTSNAPSHOTS:
    case WIRE_COP_RELOADTLS: /* loading the same files again is harmless */
    case WIRE_COP_REPLICATION:
        return true;
    default:
        /* PUT and DEL are stamped by the coordinator, so a second copy is
         * a newer write (it can undo someone else's write in between, and
         * a PUT's ttl starts again); the other admin ops change the
         * cluster. */
        return false;
    }
}

/* Before a synchronous request on an idle connection: a connection the
 * server closed while idle (restart, idle timeout) reads as EOF now. Drop
 * it, so the request goes out on a fresh connection instead of being
 * written into a dead one, where a write could not be resent safely.
 * Bytes waiting with nothing outstanding are no answer of ours either. */
static void ringkv__drop_if_dead(ringkv *c)
{
    if (c->fd < 0 || c->pending != 0)
        return;
    struct pollfd pfd = {c->fd, POLLIN, 0};
    if (poll(&pfd, 1, 0) <= 0)
        return;
    if (c->ssl) { /* records to read: a close_notify, or data (not ours) */
        size_t before = c->in_len;
        if (ringkv__read_some(c) == 0 && c->in_len > before)
            ringkv__drop(c);
        return;
    }
    char b;
    ssize_t n = recv(c->fd, &b, 1, MSG_PEEK | MSG_DONTWAIT);
    if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK || errno == EINTR))
        return;
    ringkv__drop(c);
}

int ringkv_call(ringkv *c, struct wire_cresp *out, const struct wire_creq *req)
{
    int rc = 0;
    memset(out, 0, sizeof(*out));
    if (ringkv_pending(c) != 0) {
        ringkv__seterr(c,
                       "synchronous call with %zu pipelined requests "
                       "outstanding",
                       ringkv_pending(c));
        return RK_EBADREQ;
    }
    bool idempotent = ringkv_idempotent(req);
    int skipped = 0; /* replicas' nodes that could not be reached */
    for (int attempt = 0; attempt <= c->opts.retries; attempt++) {
        uint64_t id;
        ringkv *t = c; /* the connection it goes on */
        rc = 0;
        if (c->rt && (rc = ringkv__route_refresh(c, req, true)) == 0)
            t = ringkv__route_pick(c, req);
        ringkv__drop_if_dead(t);
        if (rc != 0 || (rc = ringkv__queue(c, t, &id, req)) != 0) {
            /* not a byte of req was written: any request may go again;
             * a replica's node that cannot be reached is skipped without
             * counting as an attempt (the handle's own node is last) */
            if (t != c && ringkv_errkind(rc) == RINGKV_KIND_CONNECTION &&
                skipped++ < RING_MAX_REPLICAS) {
                ringkv__route_avoid(t);
                attempt--;
                continue;
            }
            if (ringkv_retryable(rc, true))
                continue;
            return rc;
        }
        uint64_t from = t->written;
        size_t len = t->out.len - t->out_off; /* req's frame, queued */
        int64_t deadline = ringkv__now_ms() + c->opts.timeout_ms;
        rc = ringkv__recv_until(t, out, deadline, false);
        if (rc == RK_ETIMEOUT) {
            ringkv__drop(t);
            return ringkv__adopt(c, t, rc);
        }
        if (rc != 0) {
            ringkv__adopt(c, t, rc);
            /* A frame not written whole cannot have been decoded, let
             * alone applied; one written whole may have been. */
            bool whole = t->written - from >= len;
            if (ringkv_retryable(rc, idempotent || !whole))
                continue;
            if (whole && !idempotent &&
                ringkv_errkind(rc) == RINGKV_KIND_CONNECTION) {
                size_t l = strlen(c->err);
                snprintf(c->err + l, sizeof(c->err) - l,
                         " after the %s was sent: it may have been applied, "
                         "so it was not resent",
                         wire_cop_name(req->op) ? wire_cop_name(req->op)
                                                : "request");
            }
            return rc;
        }
        if (out->id != id) {
            ringkv__seterr(c, "%s answered id %llu, expected %llu", t->peer,
                           (unsigned long long)out->id, (unsigned long long)id);
            wire_cresp_clear(out);
            ringkv__drop(t);
            return RK_EPROTO;
        }
        if (out->err != 0) {
            ringkv__seterr(c, "%.*s%s%.*s", (int)(out->errname.len),
                           (const char *)out->errname.p,
                           out->msg.len ? ": " : "", (int)out->msg.len,
                           (const char *)out->msg.p);
        } else {
            c->err[0] = '\0';
        }
        /* A node whose ring is stale refuses to coordinate; another node
         * may not be. Nothing was done, so asking elsewhere is safe: the
         * next host, or for a replica's connection, the next replica or
         * the handle's own node. */
        if (out->err == RK_ESTALE && (c->nhosts > 1 || t != c) &&
            attempt < c->opts.retries) {
            rc = out->err;
            wire_cresp_clear(out);
            if (t != c)
                ringkv__route_avoid(t);
            else
                ringkv__drop(c);
            continue;
        }
        return out->err;
    }
    return rc;
}

int ringkv_get(ringkv *c,
               uint8_t **out_value,
               size_t *out_len,
               const void *key,
               size_t klen)
{
    struct wire_creq q = {
        .op = WIRE_COP_GET, .has = WIRE_CREQ_KEY, .key = RK_SLICE(key, klen)};
    struct wire_cresp r;
    *out_value = NULL;
    *out_len = 0;
    int rc = ringkv_call(c, &r, &q);
    if (rc == 0) {
        uint8_t *v = malloc(r.value.len + 1);
        if (v == NULL) {
            rc = -ENOMEM;
        } else {
            if (r.value.len)
                memcpy(v, r.value.p, r.value.len);
            v[r.value.len] = '\0';
            *out_value = v;
            *out_len = r.value.len;
        }
    }
    wire_cresp_clear(&r);
    return rc;
}

int ringkv_put(ringkv *c,
               const void *key,
               size_t klen,
               const void *value,
               size_t vlen,
               uint32_t ttl_s)
{
    struct wire_creq q = {.op = WIRE_COP_PUT,
                          .has = WIRE_CREQ_KEY | WIRE_CREQ_VALUE,
                          .key = RK_SLICE(key, klen),
                          .value = RK_SLICE(value, vlen)};
    if (ttl_s) {
        q.has |= WIRE_CREQ_TTL;
        q.ttl = ttl_s;
    }
    struct wire_cresp r;
    int rc = ringkv_call(c, &r, &q);
    wire_cresp_clear(&r);
    return rc;
}

int ringkv_del(ringkv *c, const void *key, size_t klen)
{
    struct wire_creq q = {
        .op = WIRE_COP_DEL, .has = WIRE_CREQ_KEY, .key = RK_SLICE(key, klen)};
    struct wire_cresp r;
    int rc = ringkv_call(c, &r, &q);
    wire_cresp_clear(&r);
    return rc;
}

int ringkv_scan(ringkv *c,
                uint64_t *cursor,
                const char *match,
                uint32_t count,
                ringkv_key_cb cb,
                void *arg)
{
    struct wire_creq q = {
        .op = WIRE_COP_SCAN, .has = WIRE_CREQ_CURSOR, .cursor = *cursor};
    if (match && match[0]) {
        q.has |= WIRE_CREQ_MATCH;
        q.match = RK_SLICE(match, strlen(match));
    }
    if (count) {
        q.has |= WIRE_CREQ_COUNT;
        q.count = count;
    }
    struct wire_cresp r;
    int rc = ringkv_call(c, &r, &q);
    if (rc == 0) {
        for (size_t i = 0; i < r.nkeys && rc == 0; i++)
            rc = cb(r.keys[i].p, r.keys[i].len, arg);
        if (rc == 0)
            *cursor = r.cursor;
    }
    wire_cresp_clear(&r);
    return rc;
}
