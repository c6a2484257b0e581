/*
 * snapshot_manifest.c - a snapshot's manifest and tag rules (see
 * snapshot_manifest.h). The manifest is read back from disk by
 * `ringkv listsnapshots` and by a restore, so the parser takes any bytes
 * (fuzz_snapshot_manifest).
 */
#include "storage/snapshot_manifest.h"

#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "common/rk.h"
#include "storage/node_state.h"

static bool name_char(char c)
{
    return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') ||
           (c >= '0' && c <= '9') || c == '.' || c == '_' || c == '-' ||
           c == ':';
}

static bool name_valid(const char *s, size_t len, size_t max)
{
    if (len == 0 || len > max || s[0] == '.' || s[0] == '-')
        return false;
    for (size_t i = 0; i < len; i++)
        if (!name_char(s[i]))
            return false;
    return true;
}

bool snapshot_tag_valid(const char *tag, size_t len)
{
    return name_valid(tag, len, SNAPSHOT_TAG_MAX);
}

bool snapshot_file_valid(const char *name, size_t len)
{
    return name_valid(name, len, SNAPSHOT_FILE_MAX);
}

void snapshot_tag_default(char *out, size_t cap, uint64_t now_ms)
{
    time_t s = (time_t)(now_ms / 1000u);
    struct tm tm;
    char day[32];
    gmtime_r(&s, &tm);
    strftime(day, sizeof(day), "%Y%m%dT%H%M%S", &tm);
    snprintf(out, cap, "%s.%03uZ", day, (unsigned)(now_ms % 1000u));
}

/* A whole decimal u64 (no sign, no blanks). */
static int parse_u64(uint64_t *out, const char *s, int base)
{
    char *end;
    if (!((s[0] >= '0' && s[0] <= '9') ||
          (base == 16 &&
           ((s[0] >= 'a' && s[0] <= 'f') || (s[0] >= 'A' && s[0] <= 'F')))))
        return RK_ECORRUPT;
    errno = 0;
    unsigned long long v = strtoull(s, &end, base);
    if (errno || *end)
        return RK_ECORRUPT;
    *out = v;
    return 0;
}

/* "START END BYTES FILE" */
static int parse_range(struct snapshot_manifest *m, char *v)
{
    char *f[4], *save = NULL;
    int nf = 0;
    for (char *t = strtok_r(v, " ", &save); t; t = strtok_r(NULL, " ", &save))
        if (nf < 4)
            f[nf++] = t;
        else
            return RK_ECORRUPT;
    if (nf != 4 || m->nranges == SNAPSHOT_RANGES_MAX ||
        !snapshot_file_valid(f[3], strlen(f[3])))
        return RK_ECORRUPT;
    struct snapshot_range r = {0};
    if (parse_u64(&r.start, f[0], 16) || parse_u64(&r.end, f[1], 16) ||
        parse_u64(&r.bytes, f[2], 10))
        return RK_ECORRUPT;
    snprintf(r.file, sizeof(r.file), "%s", f[3]);
    struct snapshot_range *a =
        realloc(m->ranges, (m->nranges + 1) * sizeof(*a));
    if (!a)
        return -ENOMEM;
    m->ranges = a;
    m->ranges[m->nranges++] = r;
    return 0;
}

/* One line, NUL-terminated, without its newline; *have collects the
 * required keys seen. */
static int parse_line(struct snapshot_manifest *m, char *line, int *have)
{
    char *eq = strchr(line, '=');
    if (!eq)
        return line[0] ? RK_ECORRUPT : 0; /* blank lines are fine */
    *eq = '\0';
    const char *k = line;
    char *v = eq + 1;
    uint64_t x;
    if (strcmp(k, "format") == 0) {
        if (parse_u64(&x, v, 10))
            return RK_ECORRUPT;
        if (x != SNAPSHOT_FORMAT)
            return RK_EVERSION;
        *have |= 1;
    } else if (strcmp(k, "tag") == 0) {
        if (!snapshot_tag_valid(v, strlen(v)))
            return RK_ECORRUPT;
        snprintf(m->tag, sizeof(m->tag), "%s", v);
        *have |= 2;
    } else if (strcmp(k, "node_name") == 0) {
        if (strlen(v) >= sizeof(m->node_name))
            return RK_ECORRUPT;
        snprintf(m->node_name, sizeof(m->node_name), "%s", v);
        *have |= 4;
    } else if (strcmp(k, "cluster_name") == 0) {
        if (strlen(v) >= sizeof(m->cluster_name))
            return RK_ECORRUPT;
        snprintf(m->cluster_name, sizeof(m->cluster_name), "%s", v);
    } else if (strcmp(k, "created_ms") == 0) {
        if (parse_u64(&m->created_ms, v, 10))
            return RK_ECORRUPT;
        *have |= 8;
    } else if (strcmp(k, "duration_ms") == 0) {
        if (parse_u64(&m->duration_ms, v, 10))
            return RK_ECORRUPT;
    } else if (strcmp(k, "range") == 0) {
        return parse_range(m, v);
    }
    return 0;
}

struct manifest_parse {
    struct snapshot_manifest *m;
    int have;
};

static int manifest_line(char *l, void *arg)
{
    struct manifest_parse *p = arg;
    return parse_line(p->m, l, &p->have);
}

int snapshot_manifest_parse(struct snapshot_manifest *out,
                            const char *text,
                            size_t len)
{
    memset(out, 0, sizeof(*out));
    if (len > SNAPSHOT_MANIFEST_MAX)
        return RK_ECORRUPT;
    struct manifest_parse p = {out, 0};
    int rc = node_state_lines(text, len, manifest_line, &p);
    if (rc == 0 && p.have != 15)
        rc = RK_ECORRUPT;
    if (rc != 0)
        snapshot_manifest_clear(out);
    return rc;
}

char *snapshot_manifest_format(const struct snapshot_manifest *m)
{
    char *text = NULL;
    size_t len = 0;
    FILE *f = open_memstream(&text, &len);
    if (!f)
        return NULL;
    fprintf(
        f,
        "format=%d\ntag=%s\nnode_name=%s\ncluster_name=%s\ncreated_ms=%" PRIu64
        "\nduration_ms=%" PRIu64 "\n",
        SNAPSHOT_FORMAT, m->tag, m->node_name, m->cluster_name, m->created_ms,
        m->duration_ms);
    for (size_t i = 0; i < m->nranges; i++) {
        const struct snapshot_range *r = &m->ranges[i];
        fprintf(f, "range=%016" PRIx64 " %016" PRIx64 " %" PRIu64 " %s\n",
                r->start, r->end, r->bytes, r->file);
    }
    if (fclose(f) != 0) {
        free(text);
        return NULL;
    }
    return text;
}

uint64_t snapshot_manifest_bytes(const struct snapshot_manifest *m)
{
    uint64_t b = 0;
    for (size_t i = 0; i < m->nranges; i++)
        b += m->ranges[i].bytes;
    return b;
}

void snapshot_manifest_clear(struct snapshot_manifest *m)
{
    free(m->ranges);
    m->ranges = NULL;
    m->nranges = 0;
}
