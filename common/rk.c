/*
 * rk.c - names for ringkv's error codes, and reading and writing a file
 * whole.
 */
#include "common/rk.h"

#include <errno.h>
#include <fcntl.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

static const struct {
    int code;
    const char *name;
    const char *text;
} rk__errs[] = {
    {RK_EUNAVAILABLE, "UNAVAILABLE", "not enough live replicas"},
    {RK_ETIMEOUT, "TIMEOUT", "replicas did not answer in time"},
    {RK_EOVERLOADED, "OVERLOADED", "node overloaded, request shed"},
    {RK_ESTALE, "RING_STALE", "ring view is stale, retry"},
    {RK_EBADREQ, "BAD_REQUEST", "bad request"},
    {RK_ETOOLARGE, "TOO_LARGE", "key or value too large"},
    {RK_EAUTH, "AUTH", "authentication failed"},
    {RK_ENOTFOUND, "NOT_FOUND", "not found"},
    {RK_ECORRUPT, "CORRUPT", "data corrupt"},
    {RK_EVERSION, "VERSION", "unknown format version"},
    {RK_EPROTO, "PROTOCOL", "protocol error"},
    {RK_EFULL, "FULL", "storage full"},
    {RK_EEXIST, "EXISTS", "already exists"},
    {RK_ECONFIG, "CONFIG", "invalid configuration"},
    {RK_ECLOSED, "CLOSED", "closed"},
    {RK_EINTERNAL, "INTERNAL", "internal error"},
    {RK_ENOTSUP, "NOT_IMPLEMENTED", "not implemented in this version"},
    {RK_ECLOCKSKEW, "CLOCK_SKEW",
     "timestamp more than max_clock_drift_ms ahead of a replica's clock"},
    {RK_EOLDRING, "OLD_RING",
     "the coordinator's ring epoch is older than the replica's"},
    {RK_ENOPERM, "NOPERM", "the user's role may not run this command"},
};

#define RK__NERRS (sizeof(rk__errs) / sizeof(rk__errs[0]))

bool rk_err_connection(int err)
{
    switch (err) {
    case RK_ECLOSED:
    case -ECONNREFUSED:
    case -ECONNRESET:
    case -ECONNABORTED:
    case -EPIPE:
    case -ENOTCONN:
    case -ETIMEDOUT:
    case -EHOSTUNREACH:
    case -EHOSTDOWN:
    case -ENETUNREACH:
    case -ENETDOWN:
    case -EADDRNOTAVAIL:
        return true;
    default:
        return false;
    }
}

const char *rk_strerror(int err)
{
    if (err == 0)
        return "success";
    for (size_t i = 0; i < RK__NERRS; i++)
        if (rk__errs[i].code == err)
            return rk__errs[i].text;
    if (rk_is_errno(err))
        return strerror(-err);
    return "unknown error";
}

const char *rk_errname(int err)
{
    for (size_t i = 0; i < RK__NERRS; i++)
        if (rk__errs[i].code == err)
            return rk__errs[i].name;
    return "ERR";
}

int rk_errcode(const char *name)
{
    for (size_t i = 0; i < RK__NERRS; i++)
        if (strcmp(rk__errs[i].name, name) == 0)
            return rk__errs[i].code;
    return 0;
}

int rk_u64_cmp(const void *a, const void *b)
{
    uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;
    return (x > y) - (x < y);
}

int rk_read_file(const char *path, size_t max, char **out, size_t *len)
{
    *out = NULL;
    *len = 0;
    FILE *f = fopen(path, "rb");
    if (!f)
        return -errno;
    size_t cap = 0, n = 0;
    char *buf = NULL;
    int rc = 0;
    for (;;) {
        if (n + 1 >= cap) { /* room for the next read and the NUL */
            size_t ncap = cap ? cap * 2 : 4096;
            /* full past max + 1 bytes: more than max */
            char *nb = cap > max + 1 ? NULL : realloc(buf, ncap);
            if (!nb) {
                rc = cap > max + 1 ? -EFBIG : -ENOMEM;
                break;
            }
            buf = nb;
            cap = ncap;
        }
        size_t r = fread(buf + n, 1, cap - 1 - n, f);
        n += r;
        if (r == 0)
            break;
    }
    if (rc == 0 && ferror(f))
        rc = -EIO;
    else if (rc == 0 && n > max)
        rc = -EFBIG;
    fclose(f);
    if (rc < 0) {
        free(buf);
        return rc;
    }
    buf[n] = '\0';
    *out = buf;
    *len = n;
    return 0;
}

int rk_fsync_dir(const char *dir)
{
    int fd = open(dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    if (fd < 0)
        return -errno;
    int rc = fsync(fd) == 0 ? 0 : -errno;
    close(fd);
    return rc;
}

int rk_write_file_atomic(const char *dir, const char *name, const char *text)
{
    char path[4096], tmp[4096];
    int k = snprintf(path, sizeof(path), "%s/%s", dir, name);
    if (k < 0 || (size_t)k >= sizeof(path) ||
        snprintf(tmp, sizeof(tmp), "%s.tmp", path) >= (int)sizeof(tmp))
        return -ENAMETOOLONG;
    int fd = open(tmp, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
    if (fd < 0)
        return -errno;
    int rc = 0;
    size_t len = strlen(text), off = 0;
    while (rc == 0 && off < len) {
        ssize_t w = write(fd, text + off, len - off);
        if (w < 0 && errno != EINTR)
            rc = -errno;
        else if (w > 0)
            off += (size_t)w;
    }
    if (rc == 0 && fsync(fd) != 0)
        rc = -errno;
    if (close(fd) != 0 && rc == 0)
        rc = -errno;
    if (rc == 0 && rename(tmp, path) != 0)
        rc = -errno;
    if (rc)
        unlink(tmp);
    return rc == 0 ? rk_fsync_dir(dir) : rc;
}

int rk_answer(char **text, size_t *len, int rc, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    int l = vasprintf(text, fmt, ap);
    va_end(ap);
    if (l < 0) {
        *text = NULL;
        *len = 0;
        return -ENOMEM;
    }
    *len = (size_t)l;
    return rc;
}

/* ---- clocks held for one input ------------------------------------------ */

/* held: inside a hold; mono_ns/wall_ms: read in it (0: not yet) */
static _Thread_local struct {
    bool held;
    uint64_t mono_ns, wall_ms;
} rk_clock;

void rk_clock_hold(void)
{
    if (rk_clock.held)
        return;
    rk_clock.held = true;
    rk_clock.mono_ns = 0;
    rk_clock.wall_ms = 0;
}

void rk_clock_release(void)
{
    rk_clock.held = false;
}

uint64_t rk_clock_mono_fresh_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

uint64_t rk_clock_mono_ns(void)
{
    if (!rk_clock.held)
        return rk_clock_mono_fresh_ns();
    if (rk_clock.mono_ns == 0)
        rk_clock.mono_ns = rk_clock_mono_fresh_ns();
    return rk_clock.mono_ns;
}

uint64_t rk_clock_wall_ms(void)
{
    if (rk_clock.held && rk_clock.wall_ms != 0)
        return rk_clock.wall_ms;
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    uint64_t ms = (uint64_t)ts.tv_sec * 1000u + (uint64_t)ts.tv_nsec / 1000000u;
    if (rk_clock.held)
        rk_clock.wall_ms = ms;
    return ms;
}
