/*
 * snapshot.c - snapshots of the node's ranges (see snapshot.h): taking one
 * on the pool while the node serves, listing and removing them, and the
 * offline restore of `ringkvd --restore-snapshot`.
 *
 * The copy: the memtable is applied first (store_flush), so each range's
 * copy holds every write committed before the snapshot began; then each
 * range is copied whole with LMDB's compacting copy (store_range_copy_fd:
 * a consistent read transaction, so reads and writes go on) and synced,
 * one range after another. Writes that arrive during the copy may or may
 * not be in it; a snapshot is a point in time per range, not across
 * ranges (Cassandra's snapshots are per SSTable the same way). The
 * manifest is written last, through a temporary file and a rename, so a
 * folder without one is a copy that did not finish: the listing says so,
 * a restore refuses it, and a failed copy removes its folder.
 */
#include "node/snapshot.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/statvfs.h>
#include <time.h>
#include <unistd.h>

#include "common/rk.h"
#include "node/daemon.h"
#include "node/log.h"
#include "storage/node_state.h"
#include "storage/snapshot_manifest.h"
#include "storage/store.h"
#include "streaming/streaming.h"

#define SNAP_DIR   "snapshots"
#define SNAP_STATE "node.state"
/* room left free beyond the copy's estimate: writes go on meanwhile */
#define SNAP_SPACE_MARGIN ((uint64_t)16 << 20)

struct node_snapshot {
    bool running;
    char tag[SNAPSHOT_TAG_MAX + 1];
    uint64_t started_ms; /* loop's monotonic clock */
    atomic_bool cancel;
    /* progress, written by the copy, read by NETSTATS */
    atomic_size_t nranges, done;
    atomic_uint_fast64_t bytes;
    char last[768]; /* the line of the last one to finish, or "" */
};

/* ---- paths and files -------------------------------------------------- */

static int path_join(char *out, size_t cap, const char *a, const char *b)
{
    int k = snprintf(out, cap, "%s/%s", a, b);
    return k < 0 || (size_t)k >= cap ? -ENAMETOOLONG : 0;
}

/* Remove the files of a snapshot folder, then the folder. A snapshot holds
 * plain files only: anything else in it is left, and the error says so.
 * *bytes (may be NULL) adds what the files held. */
static int remove_snapshot_dir(const char *dir, uint64_t *bytes)
{
    DIR *d = opendir(dir);
    if (!d)
        return -errno;
    int rc = 0;
    struct dirent *e;
    while ((e = readdir(d)) != NULL) {
        if (strcmp(e->d_name, ".") == 0 || strcmp(e->d_name, "..") == 0)
            continue;
        struct stat st;
        if (fstatat(dirfd(d), e->d_name, &st, AT_SYMLINK_NOFOLLOW) == 0 &&
            bytes && S_ISREG(st.st_mode))
            *bytes += (uint64_t)st.st_size;
        if (unlinkat(dirfd(d), e->d_name, 0) != 0 && rc == 0)
            rc = -errno;
    }
    closedir(d);
    if (rc == 0 && rmdir(dir) != 0)
        rc = -errno;
    return rc;
}

/* ---- the copy (pool) -------------------------------------------------- */

struct snap_job {
    node *n;
    struct node_snapshot *s;
    store *st;
    char dir[4096]; /* data_dir/snapshots/TAG */
    char *state_text;
    struct snapshot_manifest m;
    uint64_t t0_ms; /* monotonic, for the duration */
    int rc;
    char why[512];
};

static uint64_t mono_ms(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000u + (uint64_t)ts.tv_nsec / 1000000u;
}

/* Whether data_dir's file system has room for copies of ranges
 * r[0..nr): their pages in use (a compact copy holds no more) and a
 * margin. */
static int
snap_space(struct snap_job *j, const struct store_range *r, size_t nr)
{
    uint64_t need = SNAP_SPACE_MARGIN;
    for (size_t i = 0; i < nr; i++) {
        struct store_range_info ri;
        if (store_range_info(&ri, j->st, r[i]) == 0)
            need += ri.disk_bytes;
    }
    struct statvfs vfs;
    if (statvfs(j->dir, &vfs) != 0)
        return 0; /* cannot tell: the copy says it if the disk fills */
    uint64_t avail = (uint64_t)vfs.f_bavail * vfs.f_frsize;
    if (avail >= need)
        return 0;
    char a[32], b[32];
    stream_human_bytes(a, sizeof(a), need);
    stream_human_bytes(b, sizeof(b), avail);
    snprintf(j->why, sizeof(j->why),
             "not enough disk space: the copy needs about %s, %s free", a, b);
    return -ENOSPC;
}

/* Copy range r to its file in the snapshot; its size into *out. */
static int snap_copy_range(struct snap_job *j,
                           struct snapshot_range *out,
                           struct store_range r)
{
    char path[4096];
    *out = (struct snapshot_range){.start = r.start, .end = r.end};
    snprintf(out->file, sizeof(out->file), "%016" PRIx64 "_%016" PRIx64 ".mdb",
             r.start, r.end);
    int rc = path_join(path, sizeof(path), j->dir, out->file);
    if (rc)
        return rc;
    int fd = open(path, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0644);
    if (fd < 0)
        return -errno;
    rc = store_range_copy_fd(j->st, r, fd);
    struct stat sb;
    if (rc == 0 && (fsync(fd) != 0 || fstat(fd, &sb) != 0))
        rc = -errno;
    if (close(fd) != 0 && rc == 0)
        rc = -errno;
    if (rc == 0)
        out->bytes = (uint64_t)sb.st_size;
    if (rc == RK_ENOTFOUND)
        snprintf(j->why, sizeof(j->why),
                 "the node's ranges changed during the copy (a cleanup, "
                 "join or leave split or dropped one); take it again");
    return rc;
}

static int snap_copy_all(struct snap_job *j)
{
    struct store_range *r = NULL;
    size_t nr = 0;
    char base[sizeof(j->dir)]; /* data_dir/snapshots, where begin made dir */
    snprintf(base, sizeof(base), "%s", j->dir);
    *strrchr(base, '/') = '\0';
    int rc = rk_fsync_dir(base);
    if (rc)
        return rc;
    rc = store_flush(j->st); /* applied state is complete */
    if (rc) {
        /* a full disk shows here first (the apply grows the envs) */
        struct statvfs vfs;
        char h[32] = "?";
        if (statvfs(j->dir, &vfs) == 0)
            stream_human_bytes(h, sizeof(h),
                               (uint64_t)vfs.f_bavail * vfs.f_frsize);
        snprintf(j->why, sizeof(j->why),
                 "writes could not be applied to the ranges: %s (%s free "
                 "on the data_dir's disk)",
                 rk_strerror(rc), h);
        return rc;
    }
    if ((rc = store_range_list(&r, &nr, j->st)))
        return rc;
    atomic_store(&j->s->nranges, nr);
    j->m.ranges = calloc(nr ? nr : 1, sizeof(*j->m.ranges));
    rc = j->m.ranges ? snap_space(j, r, nr) : -ENOMEM;
    if (rc == 0)
        rc = rk_write_file_atomic(j->dir, SNAP_STATE, j->state_text);
    for (size_t i = 0; rc == 0 && i < nr; i++) {
        if (atomic_load(&j->s->cancel)) {
            snprintf(j->why, sizeof(j->why), "the node is stopping");
            rc = -ECANCELED;
            break;
        }
        rc = snap_copy_range(j, &j->m.ranges[i], r[i]);
        if (rc == 0) {
            j->m.nranges++;
            atomic_fetch_add(&j->s->bytes, j->m.ranges[i].bytes);
            atomic_fetch_add(&j->s->done, 1);
        }
    }
    free(r);
    if (rc == 0)
        rc = rk_fsync_dir(j->dir);
    return rc;
}

static void snap_work(void *arg)
{
    struct snap_job *j = arg;
    j->rc = snap_copy_all(j);
    j->m.duration_ms = mono_ms() - j->t0_ms;
    char *t = j->rc == 0 ? snapshot_manifest_format(&j->m) : NULL;
    if (j->rc == 0)
        j->rc =
            t ? rk_write_file_atomic(j->dir, SNAPSHOT_MANIFEST, t) : -ENOMEM;
    free(t);
    if (j->rc != 0)
        (void)remove_snapshot_dir(j->dir, NULL); /* no half snapshot stays */
}

static void snap_done(void *arg, int status)
{
    struct snap_job *j = arg;
    struct node_snapshot *s = j->s;
    if (status < 0 && j->rc == 0) {
        j->rc = status; /* never ran (the pool was cancelled) */
        rmdir(j->dir);  /* as begin left it: empty */
    }
    if (j->rc == 0) {
        char h[32];
        uint64_t b = snapshot_manifest_bytes(&j->m);
        stream_human_bytes(h, sizeof(h), b);
        snprintf(s->last, sizeof(s->last),
                 "Snapshot %s: done: %zu ranges, %s (%" PRIu64
                 " bytes) in %.1f s",
                 s->tag, j->m.nranges, h, b, (double)j->m.duration_ms / 1e3);
        LOG(INFO, "snapshot.done",
            "tag=%s ranges=%zu bytes=%" PRIu64 " ms=%" PRIu64, s->tag,
            j->m.nranges, b, j->m.duration_ms);
    } else {
        snprintf(s->last, sizeof(s->last), "Snapshot %s: failed: %s", s->tag,
                 j->why[0] ? j->why : rk_strerror(j->rc));
        LOG(WARN, "snapshot.failed", "tag=%s error=\"%s\"", s->tag,
            j->why[0] ? j->why : rk_strerror(j->rc));
    }
    s->running = false;
    snapshot_manifest_clear(&j->m);
    free(j->state_text);
    free(j);
}

/* ---- begin, progress ---------------------------------------------------- */

static struct node_snapshot *snap_state(node *n)
{
    if (!n->snap)
        n->snap = calloc(1, sizeof(*n->snap));
    return n->snap;
}

/* data_dir/snapshots/TAG into out, created (RK_EEXIST if it is there). */
static int
snap_mkdir(char *out, size_t cap, const char *data_dir, const char *tag)
{
    char base[4096];
    int rc = path_join(base, sizeof(base), data_dir, SNAP_DIR);
    if (rc == 0)
        rc = path_join(out, cap, base, tag);
    if (rc == 0)
        rc = node_state_mkdirs(base);
    if (rc == 0 && mkdir(out, 0755) != 0)
        rc = errno == EEXIST ? RK_EEXIST : -errno;
    return rc; /* its name in base is synced on the pool (snap_copy_all) */
}

static struct snap_job *snap_job_new(node *n, struct node_snapshot *s)
{
    struct snap_job *j = calloc(1, sizeof(*j));
    if (!j)
        return NULL;
    j->n = n;
    j->s = s;
    j->st = n->store;
    j->state_text = node_state_format(&n->st);
    if (!j->state_text) {
        free(j);
        return NULL;
    }
    snprintf(j->m.tag, sizeof(j->m.tag), "%s", s->tag);
    snprintf(j->m.node_name, sizeof(j->m.node_name), "%s", n->cfg.node_name);
    snprintf(j->m.cluster_name, sizeof(j->m.cluster_name), "%s",
             n->cfg.cluster_name);
    j->m.created_ms = node__now_ms();
    j->t0_ms = mono_ms();
    return j;
}

int node__snapshot_begin(node *n, const char *tag, char **text, size_t *len)
{
    struct node_snapshot *s = snap_state(n);
    char deftag[SNAPSHOT_TAG_MAX + 1];
    if (!s)
        return -ENOMEM;
    if (n->stopping || !n->store)
        return rk_answer(text, len, RK_ECLOSED, "the node is stopping");
    if (!tag) {
        snapshot_tag_default(deftag, sizeof(deftag), node__now_ms());
        tag = deftag;
    }
    if (!snapshot_tag_valid(tag, strlen(tag)))
        return rk_answer(text, len, RK_EBADREQ,
                         "bad snapshot tag '%.*s': " SNAPSHOT_TAG_RULE,
                         SNAPSHOT_TAG_MAX + 8, tag);
    if (s->running)
        return rk_answer(text, len, RK_EBADREQ,
                         "snapshot %s is being taken; one at a time", s->tag);
    char dir[4096];
    int rc = snap_mkdir(dir, sizeof(dir), n->cfg.data_dir, tag);
    if (rc == RK_EEXIST)
        return rk_answer(
            text, len, RK_EBADREQ,
            "snapshot %s exists (`ringkv clearsnapshot %s` removes "
            "it)",
            tag, tag);
    if (rc)
        return rk_answer(text, len, rc, "cannot create %s/%s/%s: %s",
                         n->cfg.data_dir, SNAP_DIR, tag, rk_strerror(rc));
    snprintf(s->tag, sizeof(s->tag), "%s", tag);
    struct snap_job *j = snap_job_new(n, s);
    if (j)
        snprintf(j->dir, sizeof(j->dir), "%s", dir);
    rc = j ? node__queue_work(n, snap_work, snap_done, j) : -ENOMEM;
    if (rc) {
        if (j)
            free(j->state_text);
        free(j);
        rmdir(dir);
        return rk_answer(text, len, rc, "cannot start the snapshot: %s",
                         rk_strerror(rc));
    }
    s->running = true;
    s->started_ms = node__mono_ms(n);
    atomic_store(&s->cancel, false);
    atomic_store(&s->nranges, 0);
    atomic_store(&s->done, 0);
    atomic_store(&s->bytes, 0);
    LOG(INFO, "snapshot.start", "tag=%s dir=%s", tag, dir);
    return rk_answer(text, len, 0, "Snapshot %s: started in %s", tag, dir);
}

void node__snapshot_text(node *n, FILE *f)
{
    struct node_snapshot *s = n->snap;
    if (!s)
        return;
    if (!s->running) {
        if (s->last[0])
            fprintf(f, "%s\n", s->last);
        return;
    }
    char h[32];
    stream_human_bytes(h, sizeof(h), atomic_load(&s->bytes));
    fprintf(f,
            "Snapshot %s: running for %.1f s; %zu of %zu ranges copied, %s\n",
            s->tag, (double)(node__mono_ms(n) - s->started_ms) / 1e3,
            atomic_load(&s->done), atomic_load(&s->nranges), h);
}

void node__snapshot_stop(node *n)
{
    if (n->snap)
        atomic_store(&n->snap->cancel, true);
}

void node__snapshot_free(node *n)
{
    free(n->snap);
    n->snap = NULL;
}

/* ---- listing and removal (pool) ----------------------------------------- */

struct files_job {
    char base[4096]; /* data_dir/snapshots */
    char tag[SNAPSHOT_TAG_MAX + 1];
    bool all;
    char running[SNAPSHOT_TAG_MAX + 1]; /* "" when none */
    node_snapshot_cb cb;
    void *arg;
    int rc;
    char *text;
    size_t len;
};

static int cmp_str(const void *a, const void *b)
{
    return strcmp(*(char *const *)a, *(char *const *)b);
}

/* The snapshot folders under base, sorted (names that are no tag are not
 * ours and left out). *out is malloc'd, each name too. */
static int list_tags(char ***out, size_t *n, const char *base)
{
    *out = NULL;
    *n = 0;
    DIR *d = opendir(base);
    if (!d)
        return errno == ENOENT ? 0 : -errno;
    int rc = 0;
    struct dirent *e;
    while (rc == 0 && (e = readdir(d)) != NULL) {
        struct stat st;
        if (!snapshot_tag_valid(e->d_name, strlen(e->d_name)) ||
            fstatat(dirfd(d), e->d_name, &st, AT_SYMLINK_NOFOLLOW) != 0 ||
            !S_ISDIR(st.st_mode))
            continue;
        char **a = realloc(*out, (*n + 1) * sizeof(*a));
        char *name = strdup(e->d_name);
        if (a)
            *out = a;
        if (!a || !name) {
            free(name);
            rc = -ENOMEM;
            break;
        }
        (*out)[(*n)++] = name;
    }
    closedir(d);
    if (*n > 1)
        qsort(*out, *n, sizeof(**out), cmp_str);
    return rc;
}

static void free_tags(char **t, size_t n)
{
    for (size_t i = 0; i < n; i++)
        free(t[i]);
    free(t);
}

/* Read and parse dir/manifest. */
static int manifest_load(struct snapshot_manifest *m, const char *dir)
{
    char path[4096], *t;
    size_t len;
    int rc = path_join(path, sizeof(path), dir, SNAPSHOT_MANIFEST);
    if (rc == 0)
        rc = rk_read_file(path, SNAPSHOT_MANIFEST_MAX, &t, &len);
    if (rc == -ENOENT)
        return RK_ENOTFOUND;
    if (rc == -EFBIG)
        return RK_ECORRUPT;
    if (rc)
        return rc;
    rc = snapshot_manifest_parse(m, t, len);
    free(t);
    return rc;
}

static void list_row(FILE *f, const struct files_job *j, const char *tag)
{
    char dir[4096];
    struct snapshot_manifest m;
    if (path_join(dir, sizeof(dir), j->base, tag) != 0)
        return;
    int rc = manifest_load(&m, dir);
    if (rc != 0) {
        const char *why = strcmp(tag, j->running) == 0 ? "being taken"
                          : rc == RK_ENOTFOUND ? "incomplete (no manifest)"
                                               : rk_strerror(rc);
        fprintf(f, "%-24s %-20s %6s %14s %8s  %s\n", tag, "-", "-", "-", "-",
                why);
        return;
    }
    time_t s = (time_t)(m.created_ms / 1000u);
    struct tm tm;
    char when[32];
    gmtime_r(&s, &tm);
    strftime(when, sizeof(when), "%Y-%m-%dT%H:%M:%SZ", &tm);
    fprintf(f, "%-24s %-20s %6zu %14" PRIu64 " %8.1f  %s\n", tag, when,
            m.nranges, snapshot_manifest_bytes(&m), (double)m.duration_ms / 1e3,
            strcmp(m.tag, tag) == 0 ? "ok" : "ok (taken as another tag)");
    snapshot_manifest_clear(&m);
}

static void list_work(void *arg)
{
    struct files_job *j = arg;
    char **tags;
    size_t nt;
    FILE *f = open_memstream(&j->text, &j->len);
    if (!f) {
        j->rc = -ENOMEM;
        return;
    }
    j->rc = list_tags(&tags, &nt, j->base);
    if (j->rc == 0 && nt == 0)
        fprintf(f, "No snapshots.\n");
    if (j->rc == 0 && nt > 0)
        fprintf(f, "%-24s %-20s %6s %14s %8s  %s\n", "Tag", "Created (UTC)",
                "Ranges", "Bytes", "Seconds", "State");
    for (size_t i = 0; j->rc == 0 && i < nt; i++)
        list_row(f, j, tags[i]);
    if (j->rc)
        fprintf(f, "cannot list %s: %s\n", j->base, rk_strerror(j->rc));
    free_tags(tags, nt);
    if (fclose(f) != 0 && j->rc == 0)
        j->rc = -ENOMEM;
}

/* Remove one snapshot; a line for the answer. */
static int clear_one(FILE *f, struct files_job *j, const char *tag)
{
    char dir[4096];
    uint64_t bytes = 0;
    int rc = path_join(dir, sizeof(dir), j->base, tag);
    if (rc == 0)
        rc = remove_snapshot_dir(dir, &bytes);
    char h[32];
    stream_human_bytes(h, sizeof(h), bytes);
    if (rc == 0)
        fprintf(f, "Cleared snapshot %s (%s)\n", tag, h);
    else if (rc == -ENOENT)
        fprintf(f, "No snapshot %s in %s\n", tag, j->base);
    else
        fprintf(f, "Cannot clear snapshot %s: %s (%s)\n", tag, rk_strerror(rc),
                dir);
    return rc == -ENOENT ? RK_ENOTFOUND : rc;
}

static void clear_work(void *arg)
{
    struct files_job *j = arg;
    FILE *f = open_memstream(&j->text, &j->len);
    if (!f) {
        j->rc = -ENOMEM;
        return;
    }
    if (!j->all) {
        j->rc = clear_one(f, j, j->tag);
    } else {
        char **tags;
        size_t nt, cleared = 0;
        j->rc = list_tags(&tags, &nt, j->base);
        for (size_t i = 0; j->rc == 0 && i < nt; i++) {
            if (strcmp(tags[i], j->running) == 0) {
                fprintf(f, "Kept snapshot %s: it is being taken\n", tags[i]);
                continue;
            }
            int rc = clear_one(f, j, tags[i]);
            cleared += rc == 0;
            if (rc && !j->rc)
                j->rc = rc;
        }
        fprintf(f, "Cleared %zu snapshots\n", cleared);
        free_tags(tags, nt);
    }
    if (fclose(f) != 0 && j->rc == 0)
        j->rc = -ENOMEM;
}

static void files_done(void *arg, int status)
{
    struct files_job *j = arg;
    if (status < 0 && j->rc == 0)
        j->rc = status;
    j->cb(j->rc, j->text, j->text ? j->len : 0, j->arg);
    free(j);
}

static int files_queue(node *n,
                       struct files_job *j,
                       void (*work)(void *),
                       node_snapshot_cb cb,
                       void *arg)
{
    j->cb = cb;
    j->arg = arg;
    if (n->snap && n->snap->running)
        snprintf(j->running, sizeof(j->running), "%s", n->snap->tag);
    int rc = path_join(j->base, sizeof(j->base), n->cfg.data_dir, SNAP_DIR);
    if (rc == 0)
        rc = node__queue_work(n, work, files_done, j);
    if (rc)
        free(j);
    return rc;
}

int node__snapshot_list(node *n, node_snapshot_cb cb, void *arg)
{
    struct files_job *j = calloc(1, sizeof(*j));
    return j ? files_queue(n, j, list_work, cb, arg) : -ENOMEM;
}

int node__snapshot_clear(node *n,
                         const char *tag,
                         node_snapshot_cb cb,
                         void *arg)
{
    if (tag &&
        (!snapshot_tag_valid(tag, strlen(tag)) ||
         (n->snap && n->snap->running && strcmp(tag, n->snap->tag) == 0)))
        return RK_EBADREQ;
    struct files_job *j = calloc(1, sizeof(*j));
    if (!j)
        return -ENOMEM;
    j->all = tag == NULL;
    if (tag)
        snprintf(j->tag, sizeof(j->tag), "%s", tag);
    return files_queue(n, j, clear_work, cb, arg);
}

/* ---- restore (offline: ringkvd --restore-snapshot) ---------------------- */

static int restore_fail(char *err, size_t errlen, int rc, const char *fmt, ...)
    __attribute__((format(printf, 4, 5)));

static int restore_fail(char *err, size_t errlen, int rc, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(err, errlen, fmt, ap);
    va_end(ap);
    return rc;
}

/* Copy src to dst (created or truncated) and sync it. */
static int copy_file(const char *src, const char *dst)
{
    enum { BUF = 1 << 20 };
    int in = open(src, O_RDONLY | O_CLOEXEC);
    if (in < 0)
        return -errno;
    int out = open(dst, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
    char *buf = malloc(BUF);
    int rc = out < 0 ? -errno : buf ? 0 : -ENOMEM;
    for (;;) {
        ssize_t r = rc ? 0 : read(in, buf, BUF);
        if (r < 0 && errno == EINTR)
            continue;
        if (r <= 0) {
            rc = rc ? rc : r < 0 ? -errno : 0;
            break;
        }
        for (ssize_t off = 0; rc == 0 && off < r;) {
            ssize_t w = write(out, buf + off, (size_t)(r - off));
            if (w < 0 && errno != EINTR)
                rc = -errno;
            else if (w > 0)
                off += w;
        }
    }
    if (rc == 0 && fsync(out) != 0)
        rc = -errno;
    if (out >= 0 && close(out) != 0 && rc == 0)
        rc = -errno;
    close(in);
    free(buf);
    return rc;
}

/* The folder of the snapshot `what` names: a path (it has a '/'), or a
 * TAG under data_dir/snapshots. */
static int restore_dir(char *out,
                       size_t cap,
                       const struct node_config *cfg,
                       const char *what,
                       char *err,
                       size_t errlen)
{
    if (strchr(what, '/'))
        return snprintf(out, cap, "%s", what) < (int)cap ? 0 : -ENAMETOOLONG;
    if (!snapshot_tag_valid(what, strlen(what)))
        return restore_fail(err, errlen, RK_EBADREQ,
                            "bad snapshot tag '%s' (a TAG under %s/%s, or "
                            "the path of a snapshot folder)",
                            what, cfg->data_dir, SNAP_DIR);
    char base[4096];
    int rc = path_join(base, sizeof(base), cfg->data_dir, SNAP_DIR);
    return rc ? rc : path_join(out, cap, base, what);
}

/* The data_dir's identity must be the snapshot's; a data_dir without one
 * takes the snapshot's node.state. */
static int restore_identity(const struct node_config *cfg,
                            const struct snapshot_manifest *m,
                            const char *dir,
                            FILE *out,
                            char *err,
                            size_t errlen)
{
    struct node_state st;
    if (strcmp(cfg->cluster_name, m->cluster_name) != 0 ||
        (cfg->node_name[0] && strcmp(cfg->node_name, m->node_name) != 0))
        return restore_fail(err, errlen, RK_EBADREQ,
                            "the snapshot is of node '%s' of cluster '%s', "
                            "the configuration is of node '%s' of cluster "
                            "'%s'",
                            m->node_name, m->cluster_name, cfg->node_name,
                            cfg->cluster_name);
    int rc = node_state_load(&st, cfg->data_dir);
    if (rc == 0 && (strcmp(st.node_name, m->node_name) != 0 ||
                    strcmp(st.cluster_name, m->cluster_name) != 0))
        return restore_fail(err, errlen, RK_EBADREQ,
                            "data_dir '%s' belongs to node '%s' of cluster "
                            "'%s', the snapshot to '%s' of '%s'",
                            cfg->data_dir, st.node_name, st.cluster_name,
                            m->node_name, m->cluster_name);
    if (rc != RK_ENOTFOUND)
        return rc ? restore_fail(err, errlen, rc,
                                 "cannot read %s/node.state: %s", cfg->data_dir,
                                 rk_strerror(rc))
                  : 0;
    rc = node_state_load(&st, dir);
    if (rc == 0 && strcmp(st.node_name, m->node_name) != 0)
        rc = RK_ECORRUPT;
    if (rc == 0)
        rc = node_state_save(&st, cfg->data_dir);
    if (rc)
        return restore_fail(err, errlen, rc,
                            "data_dir has no node.state and the snapshot's "
                            "cannot be used: %s",
                            rk_strerror(rc));
    fprintf(out,
            "node.state taken from the snapshot (the data_dir had none)\n");
    return 0;
}

/* Every range file is there, with the size the manifest says. */
static int restore_check_files(const struct snapshot_manifest *m,
                               const char *dir,
                               char *err,
                               size_t errlen)
{
    for (size_t i = 0; i < m->nranges; i++) {
        char path[4096];
        struct stat sb;
        int rc = path_join(path, sizeof(path), dir, m->ranges[i].file);
        if (rc == 0 && stat(path, &sb) != 0)
            rc = -errno;
        if (rc)
            return restore_fail(err, errlen, rc, "%s: %s", path,
                                rk_strerror(rc));
        if ((uint64_t)sb.st_size != m->ranges[i].bytes)
            return restore_fail(err, errlen, RK_ECORRUPT,
                                "%s: %lld bytes, the manifest says %" PRIu64,
                                path, (long long)sb.st_size,
                                m->ranges[i].bytes);
    }
    return 0;
}

/* Drop every local range of st, then adopt the snapshot's. */
static int restore_ranges(store *st,
                          const struct node_config *cfg,
                          const struct snapshot_manifest *m,
                          const char *dir,
                          FILE *out,
                          char *err,
                          size_t errlen)
{
    struct store_range *have = NULL;
    size_t nhave = 0;
    int rc = store_range_list(&have, &nhave, st);
    for (size_t i = 0; rc == 0 && i < nhave; i++)
        rc = store_range_drop(st, have[i]);
    free(have);
    if (rc)
        return restore_fail(err, errlen, rc,
                            "cannot drop the data_dir's ranges: %s",
                            rk_strerror(rc));
    fprintf(out, "dropped the data_dir's %zu ranges\n", nhave);
    char tmp[4096];
    rc = path_join(tmp, sizeof(tmp), cfg->data_dir, "restore.tmp");
    for (size_t i = 0; rc == 0 && i < m->nranges; i++) {
        char src[4096];
        const struct snapshot_range *r = &m->ranges[i];
        rc = path_join(src, sizeof(src), dir, r->file);
        if (rc == 0)
            rc = copy_file(src, tmp);
        if (rc == 0)
            rc = store_range_adopt(st, (struct store_range){r->start, r->end},
                                   tmp);
        if (rc) {
            unlink(tmp);
            return restore_fail(err, errlen, rc,
                                "range %016" PRIx64 "_%016" PRIx64
                                " (%s): %s; %zu of %zu ranges restored, the "
                                "node must not start so: run the restore "
                                "again",
                                r->start, r->end, r->file, rk_strerror(rc), i,
                                m->nranges);
        }
    }
    return rc;
}

static int restore_drop_hints(store *st, FILE *out, char *err, size_t errlen)
{
    uint64_t bytes = 0;
    int rc = store_hint_clear(st, &bytes);
    if (rc)
        return restore_fail(err, errlen, rc, "cannot drop the hints: %s",
                            rk_strerror(rc));
    char h[32];
    stream_human_bytes(h, sizeof(h), bytes);
    fprintf(out, "dropped the hints the node kept for others (%s)\n", h);
    return 0;
}

int node_snapshot_restore(const struct node_config *cfg,
                          const char *what,
                          bool drop_hints,
                          FILE *out,
                          char *err,
                          size_t errlen)
{
    char dir[4096];
    struct snapshot_manifest m = {0};
    int lock_fd = -1;
    store *st = NULL;
    uint64_t t0 = mono_ms();
    int rc = restore_dir(dir, sizeof(dir), cfg, what, err, errlen);
    if (rc)
        return err[0] ? rc
                      : restore_fail(err, errlen, rc, "%s", rk_strerror(rc));
    if ((rc = node_state_mkdirs(cfg->data_dir)) ||
        (rc = node_state_lock(&lock_fd, cfg->data_dir))) {
        return restore_fail(err, errlen, rc, "data_dir '%s': %s", cfg->data_dir,
                            rc == RK_EEXIST ? "a ringkvd runs on it: stop it "
                                              "first"
                                            : rk_strerror(rc));
    }
    rc = manifest_load(&m, dir);
    if (rc) {
        restore_fail(err, errlen, rc, "%s/%s: %s", dir, SNAPSHOT_MANIFEST,
                     rc == RK_ENOTFOUND ? "missing: not a snapshot, or one "
                                          "that did not finish"
                                        : rk_strerror(rc));
        goto unlock;
    }
    if ((rc = restore_identity(cfg, &m, dir, out, err, errlen)) ||
        (rc = restore_check_files(&m, dir, err, errlen)))
        goto clear;
    struct store_opts so;
    node__store_opts(&so, cfg);
    so.auto_compact_pct = -1; /* copies are packed; no compactor needed */
    rc = store_open(&st, &so);
    if (rc) {
        restore_fail(err, errlen, rc, "cannot open the store in '%s': %s",
                     cfg->data_dir, rk_strerror(rc));
        goto clear;
    }
    rc = restore_ranges(st, cfg, &m, dir, out, err, errlen);
    if (rc == 0 && drop_hints)
        rc = restore_drop_hints(st, out, err, errlen);
    store_free(st);
    if (rc == 0) {
        char h[32];
        stream_human_bytes(h, sizeof(h), snapshot_manifest_bytes(&m));
        fprintf(out,
                "restored %zu ranges (%s) of snapshot %s into %s in %.1f s; "
                "start the node, then run `ringkv repair` on it\n",
                m.nranges, h, m.tag, cfg->data_dir,
                (double)(mono_ms() - t0) / 1e3);
    }
clear:
    snapshot_manifest_clear(&m);
unlock:
    close(lock_fd);
    return rc;
}
