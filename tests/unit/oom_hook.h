/*
 * oom_hook.h - allocation failure injection for unit tests.
 *
 * Included by exactly one test file per runner. Outside ASan builds it replaces
 * malloc (glibc supports replacing it) to fail after a countdown and to count
 * live blocks, so constructors can be run with every possible allocation
 * failing in turn (libuv's test-loop-oom.c habit) and checked to return -ENOMEM
 * without leaking. Under ASan the hook is compiled out: ASan owns malloc there.
 */
#ifndef RK_TEST_OOM_HOOK_H
#define RK_TEST_OOM_HOOK_H

#include <stddef.h>

#if defined(__has_feature)
#if __has_feature(address_sanitizer) || __has_feature(memory_sanitizer)
#define RK_TEST_NO_OOM 1
#endif
#endif
#if !defined(__SANITIZE_ADDRESS__) && !defined(RK_TEST_NO_OOM)
#define RK_TEST_OOM 1
extern void *__libc_malloc(size_t n);
extern void *__libc_calloc(size_t n, size_t size);
extern void *__libc_realloc(void *p, size_t n);
extern void __libc_free(void *p);

static long oom_countdown = -1; /* -1: never fail */
static long oom_live;           /* blocks allocated and not freed */

static int oom_fail(void)
{
    if (oom_countdown == 0)
        return 1;
    if (oom_countdown > 0)
        oom_countdown--;
    return 0;
}

void *malloc(size_t n)
{
    void *p = oom_fail() ? NULL : __libc_malloc(n);
    oom_live += p != NULL;
    return p;
}

void *calloc(size_t n, size_t size)
{
    void *p = oom_fail() ? NULL : __libc_calloc(n, size);
    oom_live += p != NULL;
    return p;
}

void *realloc(void *old, size_t n)
{
    if (oom_fail())
        return NULL;
    void *p = __libc_realloc(old, n);
    if (old == NULL && p != NULL)
        oom_live++;
    return p;
}

void free(void *p)
{
    oom_live -= p != NULL;
    __libc_free(p);
}
#endif

#endif
