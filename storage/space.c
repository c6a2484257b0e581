/*
 * space.c - the disk reserve of writes (store.h, "Disk space of writes"):
 * a commit whose log record would leave less than disk_reserve_bytes free
 * is refused with RK_EFULL before anything is written.
 *
 * Why before: LMDB and the commit log meet a full disk in the middle of a
 * write. Commits then fail half done (clients saw LMDB's short write as
 * "Input/output error"), the memtable cannot be applied, checkpoints
 * cannot run and the node says nothing useful while its replicas fall
 * behind. Refusing at a reserve keeps room for the writes already
 * acknowledged and gives clients and coordinators an error that says what
 * is wrong (a coordinator keeps a hint for a replica that answers it).
 *
 * statvfs costs a system call, not a disk access, but a commit is the hot
 * path: a look is reused for up to STORE_SPACE_LOOK_MS, with the bytes
 * logged since taken off it, until those bytes reach a part of the room
 * over the reserve (so looks come more often as the disk fills, and at
 * every commit near the reserve; at most every STORE__RELOOK_MS while
 * refusing). The first look is at open.
 */
#include <errno.h>
#include <stdatomic.h>
#include <sys/statvfs.h>
#include <time.h>

#include "storage/store.h"
#include "storage/store_internal.h"

#define STORE__RELOOK_MS 50
#define STORE__LOOK_PART 4

static uint64_t space_now_ms(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000 + (uint64_t)ts.tv_nsec / 1000000;
}

/* Bytes free for an unprivileged user on path's file system; *out is
 * left alone when statvfs fails. */
static int space_free(uint64_t *out, const char *path)
{
    struct statvfs vs;
    if (statvfs(path, &vs) != 0)
        return -errno;
    *out = (uint64_t)vs.f_bavail * vs.f_frsize;
    return 0;
}

/* The estimate of what is free now (spacemu held). */
static uint64_t space_left(const store *s)
{
    return s->space_avail > s->space_since ? s->space_avail - s->space_since
                                           : 0;
}

/* Whether `left` bytes free is below the reserve, given whether writes
 * are refused already (the way back needs a part more: no flapping). */
static bool space_short(const store *s, uint64_t left)
{
    uint64_t need = s->o.disk_reserve_bytes;
    if (s->space.low)
        need += need / STORE_SPACE_RESUME_PART;
    return left < need;
}

/* statvfs of data_dir and the commit log's directory (spacemu held). A
 * failed look counts as room: the reserve never refuses for lack of an
 * answer (the writes then meet what the disk says). */
static void space_look(store *s, uint64_t now)
{
    uint64_t a = UINT64_MAX, b = UINT64_MAX;
    s->space_at_ms = now;
    s->space_since = 0;
    (void)space_free(&a, s->dir);
    (void)space_free(&b, s->logdir);
    if (b < a)
        a = b;
    s->space_avail = a;
    uint64_t r = s->o.disk_reserve_bytes;
    s->space_head = a > r ? a - r : 0;
}

/* Take the estimate into space.avail and whether it is within the
 * near-full margin into space_near (store_space_near_full), which the
 * loops read without spacemu; stored only when it changes, so a commit
 * leaves their cache line alone (spacemu held). */
static void space_publish(store *s)
{
    s->space.avail = space_left(s);
    bool near = false;
    uint64_t r = s->space.reserve;
    if (r != 0) {
        uint64_t margin = r / STORE_SPACE_RESUME_PART;
        if (margin < STORE_SPACE_MARGIN)
            margin = STORE_SPACE_MARGIN;
        near = s->space.low || s->space.avail < r + margin;
    }
    if (atomic_load(&s->space_near) != near)
        atomic_store(&s->space_near, near);
}

/* Set `low` from the estimate (spacemu held). */
static void space_judge(store *s)
{
    bool low = space_short(s, space_left(s));
    if (low && !s->space.low)
        s->space.episodes++;
    s->space.low = low;
    space_publish(s);
}

int store__space_admit(store *s, uint64_t bytes, size_t nwrites)
{
    if (s->o.disk_reserve_bytes == 0)
        return 0;
    pthread_mutex_lock(&s->spacemu);
    uint64_t now = space_now_ms(), age = now - s->space_at_ms;
    /* Look again once the bytes logged since the last look reach a
     * STORE__LOOK_PART of the room there was over the reserve: the disk
     * also takes the memtable's apply to the envs (as much again, and
     * more in split pages) and the log's zero fill, which this count does
     * not see. Near the reserve that is every commit. */
    bool due = s->space_at_ms == 0 || age >= STORE_SPACE_LOOK_MS ||
               (s->space_since + bytes) * STORE__LOOK_PART >= s->space_head;
    if (s->space.low && age < STORE__RELOOK_MS)
        due = false; /* refusing: at most one look per STORE__RELOOK_MS */
    if (due) {
        space_look(s, now);
        space_judge(s);
    }
    uint64_t left = space_left(s);
    bool refuse = s->space.low || left < bytes || space_short(s, left - bytes);
    if (refuse)
        s->space.refused += nwrites;
    else
        s->space_since += bytes;
    space_publish(s);
    pthread_mutex_unlock(&s->spacemu);
    return refuse ? RK_EFULL : 0;
}

bool store__space_tick(store *s)
{
    pthread_mutex_lock(&s->spacemu);
    uint64_t now = space_now_ms();
    if (s->space_at_ms == 0 || now - s->space_at_ms >= STORE_SPACE_LOOK_MS) {
        space_look(s, now);
        space_judge(s);
    }
    bool low = s->space.low;
    pthread_mutex_unlock(&s->spacemu);
    return low;
}

bool store_space_near_full(store *s)
{
    return atomic_load(&s->space_near);
}

void store_space_info(struct store_space_info *out, store *s)
{
    pthread_mutex_lock(&s->spacemu);
    *out = s->space;
    pthread_mutex_unlock(&s->spacemu);
}
