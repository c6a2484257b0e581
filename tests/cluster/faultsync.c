/*
 * faultsync.c - an LD_PRELOAD library for cluster tests: makes a real
 * ringkvd's disk syncs fail on demand.
 *
 * While the file named by RINGKV_FAULT_SYNC exists, fdatasync, fsync and
 * syncfs return -1 with errno EIO without syncing, as a disk that lost a
 * write would report it. While the file named by RINGKV_FAULT_SYNC_HANG
 * exists, they wait (a disk that stops completing writes), then go on.
 * Used through harness.fault_disk by test_disk_fault.py and the
 * test_regression_*_outlives_timeout.py tests;
 * not part of ringkvd.
 */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif
#include <dlfcn.h>
#include <errno.h>
#include <stdlib.h>
#include <unistd.h>

static int faulting(void)
{
    const char *p = getenv("RINGKV_FAULT_SYNC");
    return p != NULL && access(p, F_OK) == 0;
}

static void hang(void)
{
    const char *p = getenv("RINGKV_FAULT_SYNC_HANG");
    while (p != NULL && access(p, F_OK) == 0)
        usleep(10000);
}

#define PASS(name, fd)                                  \
    do {                                                \
        static int (*real)(int);                        \
        hang();                                         \
        if (faulting()) {                               \
            errno = EIO;                                \
            return -1;                                  \
        }                                               \
        if (!real)                                      \
            *(void **)&real = dlsym(RTLD_NEXT, (name)); \
        if (!real) {                                    \
            errno = ENOSYS;                             \
            return -1;                                  \
        }                                               \
        return real(fd);                                \
    } while (0)

int fdatasync(int fd)
{
    PASS("fdatasync", fd);
}

int fsync(int fd)
{
    PASS("fsync", fd);
}

int syncfs(int fd)
{
    PASS("syncfs", fd);
}
