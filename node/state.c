/*
 * state.c - the node's identity file (see state.h).
 */
#include "node/state.h"

#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "common/rk.h"

#define STATE_FILE "node.state"

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

int node_state_load(struct node_state *out, const char *dir)
{
    char path[4096];
    char *line = NULL; /* a tokens line is up to ~21 KB: getline */
    size_t cap = 0;
    int rc = 0;
    snprintf(path, sizeof(path), "%s/%s", dir, STATE_FILE);
    FILE *f = fopen(path, "r");
    if (!f)
        return errno == ENOENT ? RK_ENOTFOUND : -errno;
    memset(out, 0, sizeof(*out));
    int have_name = 0, have_gen = 0;
    ssize_t got;
    while ((got = getline(&line, &cap, f)) >= 0) {
        size_t l = (size_t)got;
        if (strlen(line) != l) { /* a NUL byte */
            rc = RK_ECORRUPT;
            goto out;
        }
        if (l && line[l - 1] == '\n')
            line[--l] = '\0';
        char *eq = strchr(line, '=');
        if (!eq) {
            rc = RK_ECORRUPT;
            goto out;
        }
        *eq = '\0';
        const char *k = line, *v = eq + 1;
        if (strcmp(k, "node_name") == 0) {
            snprintf(out->node_name, sizeof(out->node_name), "%s", v);
            have_name = 1;
        } else if (strcmp(k, "cluster_name") == 0) {
            snprintf(out->cluster_name, sizeof(out->cluster_name), "%s", v);
        } else if (strcmp(k, "generation") == 0) {
            out->generation = strtoll(v, NULL, 10);
            have_gen = 1;
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
        } else if (strcmp(k, "tokens") == 0) {
            const char *p = v;
            while (*p) {
                char *end;
                errno = 0;
                uint64_t t = strtoull(p, &end, 10);
                if (end == p || errno ||
                    out->ntokens == NODE_STATE_MAX_TOKENS) {
                    rc = RK_ECORRUPT;
                    goto out;
                }
                out->tokens[out->ntokens++] = t;
                p = end;
                if (*p == ',')
                    p++;
            }
        }
    }
    if (ferror(f))
        rc = -EIO;
    else if (!have_name || !have_gen)
        rc = RK_ECORRUPT;
out:
    free(line);
    fclose(f);
    return rc;
}

int node_state_save(const struct node_state *st, const char *dir)
{
    char path[4096], tmp[4096];
    snprintf(path, sizeof(path), "%s/%s", dir, STATE_FILE);
    snprintf(tmp, sizeof(tmp), "%s/%s.tmp", dir, STATE_FILE);
    int rc = 0;
    FILE *f = fopen(tmp, "w");
    if (!f)
        return -errno;
    fprintf(f,
            "node_name=%s\ncluster_name=%s\ngeneration=%" PRId64
            "\nring_epoch=%" PRIu64
            "\njoining=%d\nleaving=%d\nleft=%d\nrepair_due=%d\ntokens=",
            st->node_name, st->cluster_name, st->generation, st->ring_epoch,
            st->joining ? 1 : 0, st->leaving ? 1 : 0, st->left ? 1 : 0,
            st->repair_due ? 1 : 0);
    for (int i = 0; i < st->ntokens; i++)
        fprintf(f, "%s%" PRIu64, i ? "," : "", st->tokens[i]);
    fprintf(f, "\n");
    if (fflush(f) != 0 || fsync(fileno(f)) != 0) {
        rc = -errno;
        fclose(f);
        goto out_tmp;
    }
    if (fclose(f) != 0) {
        rc = -errno;
        goto out_tmp;
    }
    if (rename(tmp, path) < 0) {
        rc = -errno;
        goto out_tmp;
    }
    int dfd = open(dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    if (dfd >= 0) {
        fsync(dfd);
        close(dfd);
    }
    return 0;
out_tmp:
    unlink(tmp);
    return rc;
}
