/*
 * udp.c - one UDP socket for gossip: datagrams in through a callback with
 * the sender's address, datagrams out with uv_udp_try_send, falling back to
 * a copied, queued uv_udp_send bounded by max_queued bytes.
 *
 * Each datagram comes with the wall clock of its arrival as the kernel
 * stamped it (SIOCGSTAMP: the stamp of the datagram the last recvmsg
 * returned; libuv reads one per recvmsg and calls back before the next,
 * unless told to use recvmmsg, which this socket is not). Gossip compares
 * its peers' clocks with it: the time the loop read a datagram is late by
 * however long the datagram waited, which is long when the process was
 * stopped (test_regression_stopped_node_judges_skew).
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/time.h>
#ifdef __linux__
#include <linux/sockios.h>
#endif

#include "net/net_internal.h"

struct net_udp {
    uv_udp_t udp;
    net_udp_recv_cb on_recv;
    void *arg;
    size_t max_queued;
    size_t queued;
    bool closing;
    int port;
    int fd; /* the socket's, for its arrival stamps; -1: none */
    struct net_stats stats;
    void (*done)(void *arg);
    void *done_arg;
    uint8_t rbuf[65536];
};

struct sreq {
    uv_udp_send_t req;
    net_udp *u;
    size_t len;
    uint8_t data[];
};

static void udp_alloc(uv_handle_t *h, size_t suggested, uv_buf_t *buf)
{
    net_udp *u = h->data;
    (void)suggested;
    *buf = uv_buf_init((char *)u->rbuf, sizeof(u->rbuf));
}

/* The arrival of the datagram read last, in Unix ms; 0: not known (the
 * first ones, read before stamping was on, or no SIOCGSTAMP here). */
static uint64_t arrived_ms(const net_udp *u)
{
#ifdef SIOCGSTAMP
    struct timeval tv;
    if (u->fd < 0 || ioctl(u->fd, SIOCGSTAMP, &tv) != 0 || tv.tv_sec <= 0)
        return 0;
    return (uint64_t)tv.tv_sec * 1000u + (uint64_t)tv.tv_usec / 1000u;
#else
    (void)u;
    return 0;
#endif
}

static void udp_recv(uv_udp_t *h,
                     ssize_t nread,
                     const uv_buf_t *buf,
                     const struct sockaddr *addr,
                     unsigned flags)
{
    net_udp *u = h->data;
    (void)buf;
    if (nread < 0 || addr == NULL || u->closing)
        return; /* errors on UDP are per datagram; nothing to close */
    if (flags & UV_UDP_PARTIAL) {
        u->stats.udp_dropped++;
        return;
    }
    u->stats.frames_in++;
    u->stats.bytes_in += (uint64_t)nread;
    u->on_recv(u->arg, (struct rk_slice){u->rbuf, (size_t)nread}, addr,
               arrived_ms(u));
}

int net_udp_new(net_udp **out, uv_loop_t *loop, const struct net_udp_opts *opts)
{
    struct sockaddr_storage ss;
    char hp[128];
    int rc;
    if (opts->on_recv == NULL || opts->host == NULL)
        return -EINVAL;
    snprintf(hp, sizeof(hp), strchr(opts->host, ':') ? "[%s]:1" : "%s:1",
             opts->host);
    if (net_addr_parse(&ss, hp) != 0)
        return -EINVAL;
    if (ss.ss_family == AF_INET)
        ((struct sockaddr_in *)&ss)->sin_port = htons(opts->port);
    else
        ((struct sockaddr_in6 *)&ss)->sin6_port = htons(opts->port);
    net_udp *u = calloc(1, sizeof(*u));
    if (u == NULL)
        return -ENOMEM;
    u->on_recv = opts->on_recv;
    u->arg = opts->arg;
    u->max_queued = opts->max_queued;
    u->fd = -1;
    rc = uv_udp_init(loop, &u->udp);
    if (rc) {
        free(u);
        return rc;
    }
    u->udp.data = u;
    rc = uv_udp_bind(&u->udp, (struct sockaddr *)&ss, 0);
    if (rc == 0) {
        int len = sizeof(ss);
        rc = uv_udp_getsockname(&u->udp, (struct sockaddr *)&ss, &len);
    }
    uv_os_fd_t fd;
    if (rc == 0 && uv_fileno((uv_handle_t *)&u->udp, &fd) == 0) {
        u->fd = fd;
        /* turns stamping on (ENOENT: none yet); the kernel does it with
         * a deferred work item when no socket had it on, so a datagram
         * or two may still come stamped with the time they are read */
        (void)arrived_ms(u);
    }
    if (rc == 0)
        rc = uv_udp_recv_start(&u->udp, udp_alloc, udp_recv);
    if (rc) {
        net_udp_close(u, NULL, NULL); /* freed by the next loop run */
        return rc;
    }
    u->port = ntohs(ss.ss_family == AF_INET
                        ? ((struct sockaddr_in *)&ss)->sin_port
                        : ((struct sockaddr_in6 *)&ss)->sin6_port);
    *out = u;
    return 0;
}

int net_udp_port(const net_udp *u)
{
    return u->port;
}

static void udp_sent(uv_udp_send_t *req, int status)
{
    struct sreq *s = (struct sreq *)req;
    s->u->queued -= s->len;
    if (status < 0 && status != UV_ECANCELED)
        s->u->stats.udp_dropped++;
    free(s);
}

int net_udp_send(net_udp *u, const struct sockaddr *to, struct rk_slice pkt)
{
    if (u->closing)
        return RK_ECLOSED;
    if (pkt.len > NET_UDP_MAX)
        return RK_ETOOLARGE;
    uv_buf_t b = uv_buf_init((char *)pkt.p, (unsigned)pkt.len);
    int rc = uv_udp_try_send(&u->udp, &b, 1, to);
    if (rc >= 0) {
        u->stats.frames_out++;
        u->stats.bytes_out += pkt.len;
        return 0;
    }
    if (rc != UV_EAGAIN) {
        u->stats.udp_dropped++;
        return rc;
    }
    if (pkt.len > u->max_queued - u->queued || u->queued > u->max_queued) {
        u->stats.overloaded++;
        u->stats.udp_dropped++;
        return RK_EOVERLOADED;
    }
    struct sreq *s = malloc(sizeof(*s) + pkt.len);
    if (s == NULL)
        return -ENOMEM;
    s->u = u;
    s->len = pkt.len;
    if (pkt.len)
        memcpy(s->data, pkt.p, pkt.len);
    b = uv_buf_init((char *)s->data, (unsigned)pkt.len);
    rc = uv_udp_send(&s->req, &u->udp, &b, 1, to, udp_sent);
    if (rc) {
        free(s);
        u->stats.udp_dropped++;
        return rc;
    }
    u->queued += pkt.len;
    u->stats.frames_out++;
    u->stats.bytes_out += pkt.len;
    u->stats.writes++;
    return 0;
}

int net_udp_send_to(net_udp *u, const char *host_port, struct rk_slice pkt)
{
    struct sockaddr_storage ss;
    int rc = net_addr_parse(&ss, host_port);
    if (rc)
        return rc;
    return net_udp_send(u, (struct sockaddr *)&ss, pkt);
}

static void udp_closed(uv_handle_t *h)
{
    net_udp *u = h->data;
    void (*done)(void *) = u->done;
    void *arg = u->done_arg;
    free(u);
    if (done)
        done(arg);
}

void net_udp_close(net_udp *u, void (*done)(void *arg), void *arg)
{
    if (u == NULL || u->closing)
        return;
    u->closing = true;
    u->done = done;
    u->done_arg = arg;
    uv_close((uv_handle_t *)&u->udp, udp_closed);
}

void net_udp_stats(const net_udp *u, struct net_stats *out)
{
    *out = u->stats;
}
