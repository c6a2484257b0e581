/*
 * fakeclock.c - an LD_PRELOAD library for cluster tests: a wall clock off
 * by a set amount, as on a machine whose clock is wrong.
 *
 * clock_gettime(CLOCK_REALTIME and its _COARSE variant) and time answer
 * the real time plus RINGKV_FAKE_CLOCK_OFFSET_MS milliseconds (negative:
 * behind): the clocks ringkvd's timestamps, expiries and generation come
 * from. So does the kernel's arrival stamp of a datagram (ioctl
 * SIOCGSTAMP, net/udp.c), which comes from the same clock on a host whose
 * clock is wrong. Monotonic clocks are left alone, and so is gettimeofday
 * (the log's time stamps stay true). Used through harness.fake_clock; not part
 * of ringkvd.
 */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif
#include <dlfcn.h>
#include <errno.h>
#include <linux/sockios.h>
#include <stdarg.h>
#include <stdlib.h>
#include <sys/ioctl.h>
#include <sys/time.h>
#include <time.h>

static long long offset_ms(void)
{
    const char *v = getenv("RINGKV_FAKE_CLOCK_OFFSET_MS");
    return v ? atoll(v) : 0;
}

static void shift(struct timespec *ts, long long ms)
{
    long long ns = (long long)ts->tv_nsec + (ms % 1000) * 1000000LL;
    ts->tv_sec += (time_t)(ms / 1000);
    while (ns < 0) {
        ns += 1000000000LL;
        ts->tv_sec--;
    }
    while (ns >= 1000000000LL) {
        ns -= 1000000000LL;
        ts->tv_sec++;
    }
    ts->tv_nsec = (long)ns;
}

int clock_gettime(clockid_t id, struct timespec *ts)
{
    static int (*real)(clockid_t, struct timespec *);
    if (!real)
        *(void **)&real = dlsym(RTLD_NEXT, "clock_gettime");
    if (!real) {
        errno = ENOSYS;
        return -1;
    }
    int rc = real(id, ts);
    if (rc == 0 && (id == CLOCK_REALTIME || id == CLOCK_REALTIME_COARSE))
        shift(ts, offset_ms());
    return rc;
}

time_t time(time_t *out)
{
    struct timespec ts;
    if (clock_gettime(CLOCK_REALTIME, &ts) < 0)
        return (time_t)-1;
    if (out)
        *out = ts.tv_sec;
    return ts.tv_sec;
}

int ioctl(int fd, unsigned long req, ...)
{
    static int (*real)(int, unsigned long, ...);
    va_list ap;
    va_start(ap, req);
    void *arg = va_arg(ap, void *);
    va_end(ap);
    if (!real)
        *(void **)&real = dlsym(RTLD_NEXT, "ioctl");
    if (!real) {
        errno = ENOSYS;
        return -1;
    }
    int rc = real(fd, req, arg);
    if (rc == 0 && req == SIOCGSTAMP) {
        struct timeval *tv = arg;
        struct timespec ts = {tv->tv_sec, (long)tv->tv_usec * 1000L};
        shift(&ts, offset_ms());
        tv->tv_sec = ts.tv_sec;
        tv->tv_usec = ts.tv_nsec / 1000L;
    }
    return rc;
}
