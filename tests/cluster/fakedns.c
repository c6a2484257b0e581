/*
 * fakedns.c - an LD_PRELOAD library for cluster tests: one host name that
 * resolves, or does not, on demand, with no DNS query leaving the machine.
 *
 * getaddrinfo of the name in RINGKV_FAKE_HOST fails with EAI_NONAME while
 * the file named by RINGKV_FAKE_HOST_DOWN exists, and otherwise resolves
 * to the address in RINGKV_FAKE_HOST_IP; either way it first waits
 * RINGKV_FAKE_HOST_DELAY_MS (a slow resolver) if that is set. Every other
 * name goes to the real getaddrinfo. Used through harness.fake_host; not
 * part of ringkvd.
 */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif
#include <dlfcn.h>
#include <netdb.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

int getaddrinfo(const char *node,
                const char *service,
                const struct addrinfo *hints,
                struct addrinfo **res)
{
    static int (*real)(const char *, const char *, const struct addrinfo *,
                       struct addrinfo **);
    if (!real)
        *(void **)&real = dlsym(RTLD_NEXT, "getaddrinfo");
    if (!real)
        return EAI_SYSTEM;
    const char *name = getenv("RINGKV_FAKE_HOST");
    if (node && name && strcmp(node, name) == 0) {
        const char *down = getenv("RINGKV_FAKE_HOST_DOWN");
        const char *ip = getenv("RINGKV_FAKE_HOST_IP");
        const char *delay = getenv("RINGKV_FAKE_HOST_DELAY_MS");
        if (delay)
            usleep((useconds_t)atoi(delay) * 1000u);
        if ((down && access(down, F_OK) == 0) || !ip)
            return EAI_NONAME;
        node = ip;
    }
    return real(node, service, hints, res);
}
