/*
 * dropudp.c - an LD_PRELOAD library for cluster tests: a node that does
 * not hear some gossip, on demand.
 *
 * While the file named by RINGKV_DROP_UDP exists, every datagram the
 * process receives (recvmsg on a datagram socket, which is how libuv reads
 * UDP) that contains the bytes of RINGKV_DROP_UDP_MATCH is dropped, as if
 * lost on the way: the call reads the next one instead (or fails with
 * EAGAIN when there is none, as a non-blocking socket does). Gossip
 * packets carry node names in clear, so matching a node's name makes the
 * node deaf to every packet that mentions that one. Used through
 * harness.drop_udp by test_regression_stale_ring_refuses_requests.py; not
 * part of ringkvd.
 */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif
#include <dlfcn.h>
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/types.h>
#include <unistd.h>

static int dropping(const char **match, size_t *len)
{
    const char *p = getenv("RINGKV_DROP_UDP");
    const char *m = getenv("RINGKV_DROP_UDP_MATCH");
    if (p == NULL || m == NULL || *m == '\0' || access(p, F_OK) != 0)
        return 0;
    *match = m;
    *len = strlen(m);
    return 1;
}

static int is_dgram(int fd)
{
    int type = 0;
    socklen_t len = sizeof(type);
    return getsockopt(fd, SOL_SOCKET, SO_TYPE, &type, &len) == 0 &&
           type == SOCK_DGRAM;
}

/* Whether the n bytes received into msg's buffers contain match. */
static int
contains(const struct msghdr *msg, size_t n, const char *match, size_t mlen)
{
    /* libuv reads a datagram into one buffer; look at the first only */
    if (msg->msg_iovlen < 1 || msg->msg_iov[0].iov_base == NULL)
        return 0;
    size_t len = msg->msg_iov[0].iov_len < n ? msg->msg_iov[0].iov_len : n;
    return memmem(msg->msg_iov[0].iov_base, len, match, mlen) != NULL;
}

ssize_t recvmsg(int fd, struct msghdr *msg, int flags)
{
    static ssize_t (*real)(int, struct msghdr *, int);
    if (!real)
        *(void **)&real = dlsym(RTLD_NEXT, "recvmsg");
    if (!real) {
        errno = ENOSYS;
        return -1;
    }
    for (;;) {
        socklen_t namelen = msg->msg_namelen;
        size_t controllen = msg->msg_controllen;
        ssize_t n = real(fd, msg, flags);
        const char *match;
        size_t mlen;
        if (n < 0 || !dropping(&match, &mlen) || !is_dgram(fd) ||
            !contains(msg, (size_t)n, match, mlen))
            return n;
        msg->msg_namelen = namelen; /* read the next one afresh */
        msg->msg_controllen = controllen;
    }
}
