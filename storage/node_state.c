/*
 * node_state.c - the node's identity file (see node_state.h).
 */
#include "storage/node_state.h"

#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <unistd.h>

#include "common/rk.h"

#define STATE_FILE "node.state"
#define LOCK_FILE  "node.lock"

int node_state_lock(int *out_fd, const char *dir)
{
    char path[4096];
    if (snprintf(path, sizeof(path), "%s/%s", dir, LOCK_FILE) >=
        (int)sizeof(path))
        return -ENAMETOOLONG;
    int fd = open(path, O_RDWR | O_CREAT | O_CLOEXEC, 0644);
    if (fd < 0)
        return -errno;
    if (flock(fd, LOCK_EX | LOCK_NB) != 0) {
        int rc = errno == EWOULDBLOCK ? RK_EEXIST : -errno;
        close(fd);
        return rc;
    }
    *out_fd = fd;
    return 0;
}

int node_state_mkdirs(const char *path)
{
    char buf[4096];
    size_t len = strlen(path);
    if (len == 0 || len >= sizeof(buf))
        return -ENAMETOOLONG;
    memcpy(buf, path, len + 1);
    for (size_t i = 1; i <= len; i++) {
        if (buf[i] == '/' || buf[i] == '\0') {
            char c = buf[i];
            buf[i] = '\0';
            if (mkdir(buf, 0755) < 0 && errno != EEXIST)
                return -errno;
            buf[i] = c;
        }
    }
    struct stat sb;
    if (stat(path, &sb) < 0)
        return -errno;
    if (!S_ISDIR(sb.st_mode))
        return -ENOTDIR;
    return 0;
}

int64_t node_state_next_generation(int64_t prev, int64_t now_s)
{
    return now_s > prev ? now_s : prev + 1;
}

/* One line, NUL-terminated, without its newline. */
static int parse_line(struct node_state *out, char *line, int *have)
{
    char *eq = strchr(line, '=');
    if (!eq)
        return RK_ECORRUPT;
    *eq = '\0';
    const char *k = line, *v = eq + 1;
    if (strcmp(k, "node_name") == 0) {
        snprintf(out->node_name, sizeof(out->node_name), "%s", v);
        *have |= 1;
    } else if (strcmp(k, "cluster_name") == 0) {
        snprintf(out->cluster_name, sizeof(out->cluster_name), "%s", v);
    } else if (strcmp(k, "generation") == 0) {
        out->generation = strtoll(v, NULL, 10);
        *have |= 2;
    } else if (strcmp(k, "ring_epoch") == 0) {
        out->ring_epoch = strtoull(v, NULL, 10);
    } else if (strcmp(k, "joining") == 0) {
        out->joining = strcmp(v, "0") != 0;
    } else if (strcmp(k, "leaving") == 0) {
        out->leaving = strcmp(v, "0") != 0;
    } else if (strcmp(k, "left") == 0) {
        out->left = strcmp(v, "0") != 0;
    } else if (strcmp(k, "repair_due") == 0) {
        out->repair_due = strcmp(v, "0") != 0;
    } else if (strcmp(k, "wait_join") == 0) {
        out->wait_join = strcmp(v, "0") != 0;
    } else if (strcmp(k, "removing") == 0) {
        snprintf(out->removing, sizeof(out->removing), "%s", v);
    } else if (strcmp(k, "replace") == 0) {
        snprintf(out->replace, sizeof(out->replace), "%s", v);
    } else if (strcmp(k, "replication_version") == 0) {
        out->repl_version = strtoull(v, NULL, 10);
    } else if (strcmp(k, "replication") == 0) {
        snprintf(out->repl, sizeof(out->repl), "%s", v);
    } else if (strcmp(k, "rebuild_from") == 0) {
        snprintf(out->rebuild_from, sizeof(out->rebuild_from), "%s", v);
    } else if (strcmp(k, "tokens") == 0) {
        const char *p = v;
        while (*p) {
            char *end;
            errno = 0;
            uint64_t t = strtoull(p, &end, 10);
            if (end == p || errno || out->ntokens == NODE_STATE_MAX_TOKENS)
                return RK_ECORRUPT;
            out->tokens[out->ntokens++] = t;
            p = end;
            if (*p == ',')
                p++;
        }
    }
    return 0;
}

int node_state_lines(const char *text,
                     size_t len,
                     int (*line)(char *l, void *arg),
                     void *arg)
{
    if (memchr(text, '\0', len))
        return RK_ECORRUPT;
    char *buf = malloc(len + 1); /* a tokens line is up to ~21 KB */
    if (!buf)
        return -ENOMEM;
    memcpy(buf, text, len);
    buf[len] = '\0';
    int rc = 0;
    char *l = buf;
    while (rc == 0 && l < buf + len) {
        char *nl = strchr(l, '\n');
        if (nl)
            *nl = '\0';
        rc = line(l, arg);
        l = nl ? nl + 1 : buf + len;
    }
    free(buf);
    return rc;
}

struct state_parse {
    struct node_state *out;
    int have;
};

static int state_line(char *l, void *arg)
{
    struct state_parse *p = arg;
    return parse_line(p->out, l, &p->have);
}

int node_state_parse(struct node_state *out, const char *text, size_t len)
{
    memset(out, 0, sizeof(*out));
    struct state_parse p = {out, 0};
    int rc = node_state_lines(text, len, state_line, &p);
    if (rc == 0 && p.have != 3)
        rc = RK_ECORRUPT;
    return rc;
}

int node_state_load(struct node_state *out, const char *dir)
{
    char path[4096];
    snprintf(path, sizeof(path), "%s/%s", dir, STATE_FILE);
    char *text;
    size_t len;
    int rc = rk_read_file(path, 1u << 20, &text, &len); /* ~21 KB at most */
    if (rc == -ENOENT)
        return RK_ENOTFOUND;
    if (rc == -EFBIG)
        return RK_ECORRUPT;
    if (rc < 0)
        return rc;
    rc = node_state_parse(out, text, len);
    free(text);
    return rc;
}

char *node_state_format(const struct node_state *st)
{
    char *text = NULL;
    size_t len = 0;
    FILE *f = open_memstream(&text, &len);
    if (!f)
        return NULL;
    fprintf(f,
            "node_name=%s\ncluster_name=%s\ngeneration=%" PRId64
            "\nring_epoch=%" PRIu64
            "\njoining=%d\nleaving=%d\nleft=%d\nrepair_due=%d\nwait_join=%d"
            "\nremoving=%s\nreplace=%s\nreplication_version=%" PRIu64
            "\nreplication=%s\nrebuild_from=%s\ntokens=",
            st->node_name, st->cluster_name, st->generation, st->ring_epoch,
            st->joining ? 1 : 0, st->leaving ? 1 : 0, st->left ? 1 : 0,
            st->repair_due ? 1 : 0, st->wait_join ? 1 : 0, st->removing,
            st->replace, st->repl_version, st->repl, st->rebuild_from);
    for (int i = 0; i < st->ntokens; i++)
        fprintf(f, "%s%" PRIu64, i ? "," : "", st->tokens[i]);
    fprintf(f, "\n");
    if (fclose(f) != 0) {
        free(text);
        return NULL;
    }
    return text;
}

int node_state_save(const struct node_state *st, const char *dir)
{
    char *text = node_state_format(st);
    if (!text)
        return -ENOMEM;
    int rc = rk_write_file_atomic(dir, STATE_FILE, text);
    free(text);
    return rc;
}
