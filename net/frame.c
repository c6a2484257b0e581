/*
 * frame.c - the pure parts of net/: frame splitting, the RPC header, the
 * read buffer, address parsing. No libuv handles here, so fuzz_frame drives
 * exactly the code the sockets use.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>

#include "net/net_internal.h"

int net_frame_next(struct rk_slice *out,
                   size_t *consumed,
                   const uint8_t *buf,
                   size_t len,
                   size_t max_frame)
{
    if (len < NET_FRAME_HDR)
        return 0;
    size_t n = ((size_t)buf[0] << 24) | ((size_t)buf[1] << 16) |
               ((size_t)buf[2] << 8) | buf[3];
    if (n > max_frame)
        return RK_ETOOLARGE;
    if (len - NET_FRAME_HDR < n)
        return 0;
    out->p = buf + NET_FRAME_HDR;
    out->len = n;
    *consumed = NET_FRAME_HDR + n;
    return 1;
}

int net_rpc_parse(uint8_t *kind,
                  uint64_t *id,
                  struct rk_slice *payload,
                  struct rk_slice frame)
{
    if (frame.len < NET_RPC_HDR)
        return RK_EPROTO;
    uint8_t k = frame.p[0];
    if (k != NET_RPC_REQUEST && k != NET_RPC_RESPONSE)
        return RK_EPROTO;
    uint64_t v = 0;
    for (int i = 1; i < NET_RPC_HDR; i++)
        v = (v << 8) | frame.p[i];
    *kind = k;
    *id = v;
    payload->p = frame.p + NET_RPC_HDR;
    payload->len = frame.len - NET_RPC_HDR;
    return 0;
}

/* ---- read buffer -------------------------------------------------------- */

/* r grown to cap bytes, its held bytes kept (NET__RBUF_MAP). */
static int rbuf_grow(struct net__rbuf *r, size_t cap)
{
    void *n;
    if (!r->mapped && cap < NET__RBUF_MAP) {
        n = realloc(r->p, cap);
        if (n == NULL)
            return -ENOMEM;
    } else if (r->mapped) {
        n = mremap(r->p, r->cap, cap, MREMAP_MAYMOVE);
        if (n == MAP_FAILED)
            return -ENOMEM;
    } else {
        n = mmap(NULL, cap, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS,
                 -1, 0);
        if (n == MAP_FAILED)
            return -ENOMEM;
        if (r->len)
            memcpy(n, r->p, r->len);
        free(r->p);
        r->mapped = true;
    }
    r->p = n;
    r->cap = cap;
    return 0;
}

int net__rbuf_reserve(struct net__rbuf *r, uint8_t **p, size_t *len)
{
    size_t want = NET__READ_MIN;
    size_t held = r->len - r->off;
    /* A frame whose header is in: make room for all of it at once. */
    if (held >= NET_FRAME_HDR) {
        const uint8_t *h = r->p + r->off;
        size_t n = ((size_t)h[0] << 24) | ((size_t)h[1] << 16) |
                   ((size_t)h[2] << 8) | h[3];
        if (n <= r->max_frame && NET_FRAME_HDR + n > held &&
            NET_FRAME_HDR + n - held > want)
            want = NET_FRAME_HDR + n - held;
    }
    if (r->off > 0 && r->cap - r->len < want) {
        memmove(r->p, r->p + r->off, held);
        r->len = held;
        r->off = 0;
    }
    if (r->cap - r->len < want) {
        /* Grow geometrically, by at least a read's worth. */
        size_t cap = r->len + (want > NET__READ_CHUNK ? want : NET__READ_CHUNK);
        if (cap < r->cap * 2)
            cap = r->cap * 2;
        if (rbuf_grow(r, cap) != 0)
            return -ENOMEM;
    }
    *p = r->p + r->len;
    *len = r->cap - r->len;
    return 0;
}

void net__rbuf_commit(struct net__rbuf *r, size_t n)
{
    r->len += n;
}

int net__rbuf_next(struct net__rbuf *r, struct rk_slice *out)
{
    size_t used;
    if (r->off == r->len) /* nothing held: r->p may be NULL (freed) */
        return 0;
    int rc = net_frame_next(out, &used, r->p + r->off, r->len - r->off,
                            r->max_frame);
    if (rc == 1)
        r->off += used;
    return rc;
}

void net__rbuf_compact(struct net__rbuf *r)
{
    if (r->off == r->len) {
        r->off = r->len = 0;
        if (r->cap > NET__RBUF_KEEP)
            net__rbuf_free(r);
    }
}

void net__rbuf_free(struct net__rbuf *r)
{
    if (r->mapped)
        munmap(r->p, r->cap);
    else
        free(r->p);
    r->p = NULL;
    r->mapped = false;
    r->len = r->off = r->cap = 0;
}

/* ---- addresses ---------------------------------------------------------- */

int net__split_host_port(char *host,
                         size_t cap,
                         uint16_t *port,
                         const char *host_port)
{
    if (host_port == NULL)
        return -EINVAL;
    const char *colon = strrchr(host_port, ':');
    if (colon == NULL || colon == host_port || colon[1] == '\0')
        return -EINVAL;
    const char *h = host_port;
    size_t hlen = (size_t)(colon - host_port);
    if (h[0] == '[') {
        if (hlen < 3 || h[hlen - 1] != ']')
            return -EINVAL;
        h++;
        hlen -= 2;
    } else if (memchr(h, ':', hlen) != NULL) {
        return -EINVAL; /* bare IPv6 needs brackets */
    }
    if (hlen == 0 || hlen >= cap)
        return -EINVAL;
    unsigned long v = 0;
    for (const char *q = colon + 1; *q; q++) {
        if (*q < '0' || *q > '9' || v > 65535)
            return -EINVAL;
        v = v * 10 + (unsigned long)(*q - '0');
    }
    if (v == 0 || v > 65535)
        return -EINVAL;
    memcpy(host, h, hlen);
    host[hlen] = '\0';
    *port = (uint16_t)v;
    return 0;
}

int net_addr_parse(struct sockaddr_storage *out, const char *host_port)
{
    char host[256];
    uint16_t port;
    int rc = net__split_host_port(host, sizeof(host), &port, host_port);
    if (rc)
        return rc;
    memset(out, 0, sizeof(*out));
    if (uv_ip4_addr(host, port, (struct sockaddr_in *)out) == 0)
        return 0;
    if (uv_ip6_addr(host, port, (struct sockaddr_in6 *)out) == 0)
        return 0;
    return -EINVAL;
}

int net_addr_format(char *out, size_t cap, const struct sockaddr *sa)
{
    char ip[64];
    int n;
    if (sa->sa_family == AF_INET) {
        const struct sockaddr_in *a = (const struct sockaddr_in *)sa;
        uv_ip4_name(a, ip, sizeof(ip));
        n = snprintf(out, cap, "%s:%u", ip, (unsigned)ntohs(a->sin_port));
    } else if (sa->sa_family == AF_INET6) {
        const struct sockaddr_in6 *a = (const struct sockaddr_in6 *)sa;
        uv_ip6_name(a, ip, sizeof(ip));
        n = snprintf(out, cap, "[%s]:%u", ip, (unsigned)ntohs(a->sin6_port));
    } else {
        return -EINVAL;
    }
    return n < 0 || (size_t)n >= cap ? -ENOSPC : 0;
}

/* ---- raw-stream input --------------------------------------------------- */

size_t
net__rbuf_raw_target(const struct net__rbuf *r, size_t need, size_t limit)
{
    size_t held = r->len - r->off;
    size_t want = NET_INPUT_BASE;
    if (need > held) {
        size_t more = need - held;
        if (more > held)
            more = held; /* never past twice what arrived */
        if (more > want)
            want = more;
    }
    if (held >= limit)
        return r->cap;
    if (want > limit - held)
        want = limit - held;
    if (r->cap >= held + want)
        return r->cap; /* room, perhaps after moving the bytes down */
    return held + want;
}

int net__rbuf_reserve_cap(
    struct net__rbuf *r, size_t cap, size_t limit, uint8_t **p, size_t *len)
{
    size_t held = r->len - r->off;
    if (r->off > 0) {
        memmove(r->p, r->p + r->off, held);
        r->len = held;
        r->off = 0;
    }
    if (cap > r->cap && rbuf_grow(r, cap) != 0)
        return -ENOMEM;
    size_t room = r->cap - r->len;
    if (r->p == NULL)
        room = 0;
    else if (held >= limit)
        room = 0;
    else if (room > limit - held)
        room = limit - held;
    *p = r->p != NULL ? r->p + r->len : NULL;
    *len = room;
    return 0;
}
