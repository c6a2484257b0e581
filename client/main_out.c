/*
 * main_out.c - what `ringkv` prints: JSON strings, human sizes and times,
 * and the STATUS table with the lines under it (main.c runs the commands).
 */
#include "client/main_out.h"

#include <inttypes.h>
#include <math.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* ---- output helpers ---------------------------------------------------- */

static bool utf8_valid(const uint8_t *p, size_t n)
{
    size_t i = 0;
    while (i < n) {
        uint8_t b = p[i];
        size_t k;
        if (b < 0x80)
            k = 0;
        else if ((b & 0xe0) == 0xc0 && b >= 0xc2)
            k = 1;
        else if ((b & 0xf0) == 0xe0)
            k = 2;
        else if ((b & 0xf8) == 0xf0 && b <= 0xf4)
            k = 3;
        else
            return false;
        if (k > 0 && i + k >= n)
            return false;
        for (size_t j = 1; j <= k; j++)
            if ((p[i + j] & 0xc0) != 0x80)
                return false;
        /* no overlong forms, surrogates or code points past U+10FFFF */
        if ((b == 0xe0 && p[i + 1] < 0xa0) || (b == 0xed && p[i + 1] >= 0xa0) ||
            (b == 0xf0 && p[i + 1] < 0x90) || (b == 0xf4 && p[i + 1] >= 0x90))
            return false;
        i += k + 1;
    }
    return true;
}

static void json_str(FILE *f, const uint8_t *p, size_t n)
{
    fputc('"', f);
    for (size_t i = 0; i < n; i++) {
        uint8_t b = p[i];
        switch (b) {
        case '"':
            fputs("\\\"", f);
            break;
        case '\\':
            fputs("\\\\", f);
            break;
        case '\n':
            fputs("\\n", f);
            break;
        case '\r':
            fputs("\\r", f);
            break;
        case '\t':
            fputs("\\t", f);
            break;
        default:
            if (b < 0x20 || b == 0x7f)
                fprintf(f, "\\u%04x", b);
            else
                fputc(b, f);
        }
    }
    fputc('"', f);
}

void cli_json_slice(FILE *f, struct rk_slice s)
{
    json_str(f, s.p, s.len);
}

void cli_json_cstr(FILE *f, const char *s)
{
    json_str(f, (const uint8_t *)s, strlen(s));
}

/* Bytes as a JSON member: "name": "text" when UTF-8, else "name_hex". */
void cli_json_bytes_member(FILE *f, const char *name, struct rk_slice s)
{
    if (utf8_valid(s.p, s.len)) {
        fprintf(f, "\"%s\":", name);
        cli_json_slice(f, s);
    } else {
        fprintf(f, "\"%s_hex\":\"", name);
        for (size_t i = 0; i < s.len; i++)
            fprintf(f, "%02x", s.p[i]);
        fputc('"', f);
    }
}

static void human_bytes(char *buf, size_t n, uint64_t v)
{
    static const char *units[] = {"B", "KiB", "MiB", "GiB", "TiB", "PiB"};
    double d = (double)v;
    int u = 0;
    while (d >= 1024 && u < 5) {
        d /= 1024;
        u++;
    }
    if (u == 0)
        snprintf(buf, n, "%" PRIu64 " B", v);
    else
        snprintf(buf, n, "%.2f %s", d, units[u]);
}

/* ---- STATUS ------------------------------------------------------------- */

static int slice_cmp(struct rk_slice a, struct rk_slice b)
{
    size_t n = a.len < b.len ? a.len : b.len;
    int c = n ? memcmp(a.p, b.p, n) : 0;
    return c ? c : (a.len > b.len) - (a.len < b.len);
}

static void fmt_owns(char *buf, size_t n, double owns)
{
    if (owns < 0 || isnan(owns))
        snprintf(buf, n, "?");
    else
        snprintf(buf, n, "%.1f%%", owns * 100.0);
}

static void status_table(const struct wire_cresp *r)
{
    /* group rows by data centre, in order of first appearance */
    bool *done = calloc(r->nnodes ? r->nnodes : 1, sizeof(bool));
    if (done == NULL)
        return;
    for (size_t d = 0; d < r->nnodes; d++) {
        if (done[d])
            continue;
        struct rk_slice dc = r->nodes[d].dc;
        printf("%sDatacenter: %.*s\n", d ? "\n" : "", (int)dc.len,
               (const char *)dc.p);
        size_t ul = 12 + dc.len;
        for (size_t i = 0; i < ul; i++)
            fputc('=', stdout);
        printf("\nStatus=Up/Down\n|/ State=Normal/Leaving/Joining/Waiting\n");
        int wa = 7, wl = 4, wt = 6, wo = 16, wh = 4;
        char load[32], owns[32];
        for (size_t i = d; i < r->nnodes; i++) {
            const struct wire_cnode *n = &r->nodes[i];
            if (slice_cmp(n->dc, dc) != 0)
                continue;
            human_bytes(load, sizeof(load), n->load);
            fmt_owns(owns, sizeof(owns), n->owns);
            int tl = snprintf(NULL, 0, "%" PRIu32, n->tokens);
            if ((int)n->addr.len > wa)
                wa = (int)n->addr.len;
            if ((int)strlen(load) > wl)
                wl = (int)strlen(load);
            if (tl > wt)
                wt = tl;
            if ((int)strlen(owns) > wo)
                wo = (int)strlen(owns);
            if ((int)n->name.len > wh)
                wh = (int)n->name.len;
        }
        printf("--  %-*s  %-*s  %-*s  %-*s  %-*s  %s\n", wa, "Address", wl,
               "Load", wt, "Tokens", wo, "Owns (effective)", wh, "Host",
               "Rack");
        for (size_t i = d; i < r->nnodes; i++) {
            const struct wire_cnode *n = &r->nodes[i];
            if (slice_cmp(n->dc, dc) != 0)
                continue;
            done[i] = true;
            human_bytes(load, sizeof(load), n->load);
            fmt_owns(owns, sizeof(owns), n->owns);
            printf("%-2.*s  %-*.*s  %-*s  %-*" PRIu32 "  %-*s  %-*.*s  %.*s\n",
                   (int)n->state.len, (const char *)n->state.p, wa,
                   (int)n->addr.len, (const char *)n->addr.p, wl, load, wt,
                   n->tokens, wo, owns, wh, (int)n->name.len,
                   (const char *)n->name.p, (int)n->rack.len,
                   (const char *)n->rack.p);
        }
    }
    free(done);
}

/* Lines under the table about single nodes: peers that leave the
 * answering node's requests unanswered while gossip still has them UP (a
 * hung disk, a stopped process not yet convicted), and the answering node
 * refusing writes for lack of disk space (it says so of itself only:
 * another node's disk is not gossiped). */
static void print_node_notes(const struct wire_cresp *r)
{
    for (size_t i = 0; i < r->nnodes; i++) {
        const struct wire_cnode *n = &r->nodes[i];
        int nl = (int)n->name.len;
        const char *name = (const char *)n->name.p;
        if (n->silent_ms > 0)
            printf("Silent: %.*s has not answered %.*s%s requests for "
                   "%.1f s: reads ask it last; writes to it are hinted once "
                   "that passes write_timeout_ms\n",
                   nl, name, (int)r->node.len, (const char *)r->node.p,
                   r->node.len ? "'s" : "the answering node's",
                   (double)n->silent_ms / 1000.0);
        if (n->disk_full)
            printf("Disk full: %.*s has less free disk space than its "
                   "disk_reserve_mb: it refuses writes of the keys it "
                   "replicates (FULL) until space is freed; reads go on\n",
                   nl, name);
    }
}

/* "3.2 h": a duration of ms, in the largest unit that keeps it >= 1. */
static void human_ms(char *buf, size_t n, uint64_t ms)
{
    static const struct {
        const char *unit;
        double ms;
    } u[] = {{"d", 86400e3}, {"h", 3600e3}, {"min", 60e3}, {"s", 1e3}};
    for (size_t i = 0; i < sizeof(u) / sizeof(u[0]); i++)
        if ((double)ms >= u[i].ms || i + 1 == sizeof(u) / sizeof(u[0])) {
            snprintf(buf, n, "%.1f %s", (double)ms / u[i].ms, u[i].unit);
            return;
        }
}

/* The answering node's repair schedule (it says it of itself only: the
 * schedule is not gossiped). */
static void print_repair(const struct wire_cresp *r)
{
    for (size_t i = 0; i < r->nnodes; i++) {
        const struct wire_cnode *n = &r->nodes[i];
        if (n->repair_arcs == 0)
            continue;
        char age[32];
        human_ms(age, sizeof(age), n->repair_oldest_ms);
        printf("Repair: %.*s replicates %" PRIu64 " arcs; the longest any "
               "has gone without a complete repair is %s",
               (int)n->name.len, (const char *)n->name.p, n->repair_arcs, age);
        if (n->repair_overdue)
            printf("; %" PRIu64 " overdue (past repair_interval_s)",
                   n->repair_overdue);
        if (n->repair_never)
            printf("; %" PRIu64 " never repaired", n->repair_never);
        printf(" (ringkv netstats lists them)\n");
    }
}

/* Clocks further off than max_clock_drift_ms: the answering node's own
 * against its peers' (it then coordinates no writes), a peer's against
 * the answering node's. */
static void print_clock(const struct wire_cresp *r)
{
    for (size_t i = 0; i < r->nnodes; i++) {
        const struct wire_cnode *n = &r->nodes[i];
        if (!n->clock_far)
            continue;
        bool ahead = n->clock_ahead_ms > 0;
        uint64_t ms = ahead ? n->clock_ahead_ms : n->clock_behind_ms;
        if (slice_cmp(n->name, r->node) == 0)
            printf("Clock: %.*s's clock is %" PRIu64 " ms %s its peers': it "
                   "coordinates no writes until it is back (check NTP)\n",
                   (int)n->name.len, (const char *)n->name.p, ms,
                   ahead ? "ahead of" : "behind");
        else
            printf("Clock: %.*s's clock is %" PRIu64 " ms %s %.*s%s, more "
                   "than max_clock_drift_ms\n",
                   (int)n->name.len, (const char *)n->name.p, ms,
                   ahead ? "ahead of" : "behind", (int)r->node.len,
                   (const char *)r->node.p,
                   r->node.len ? "'s" : "the answering node's");
    }
}

/* Nodes started with join_ring: false, waiting for `ringkv join`; joining
 * nodes waiting for another movement before they stream. */
static void print_waiting(const struct wire_cresp *r)
{
    for (size_t i = 0; i < r->nnodes; i++) {
        const struct wire_cnode *n = &r->nodes[i];
        if (n->queued.len > 0)
            printf("Queued: %.*s streams its ranges once %.*s is done (their "
                   "movements change the same ranges; `ringkv -h %.*s "
                   "netstats` says more)\n",
                   (int)n->name.len, (const char *)n->name.p,
                   (int)n->queued.len, (const char *)n->queued.p,
                   (int)n->addr.len, (const char *)n->addr.p);
        if (n->state.len != 2 || ((const char *)n->state.p)[1] != 'W')
            continue;
        printf("Waiting: %.*s holds no tokens until `ringkv -h %.*s join`\n",
               (int)n->name.len, (const char *)n->name.p, (int)n->addr.len,
               (const char *)n->addr.p);
    }
}

void cli_print_ring_line(const struct wire_cresp *r)
{
    printf("\nRing epoch: %" PRIu64 ", fingerprint: %016" PRIx64, r->epoch,
           r->fprint);
    if (r->has & WIRE_CRESP_NODE)
        printf(" (as seen by %.*s)", (int)r->node.len, (const char *)r->node.p);
    printf("\n");
}

void cli_json_ring_head(const struct wire_cresp *r)
{
    printf("{\"epoch\":%" PRIu64 ",\"fingerprint\":\"%016" PRIx64 "\"",
           r->epoch, r->fprint);
    if (r->has & WIRE_CRESP_NODE) {
        printf(",\"node\":");
        cli_json_slice(stdout, r->node);
    }
    if (r->has & WIRE_CRESP_CLUSTER) {
        printf(",\"cluster\":");
        cli_json_slice(stdout, r->cluster);
    }
}

/* "Replication: dc1:3" when every node that says agrees; else a warning
 * listing what each node is configured with (nodes that disagree place
 * replicas differently, so reads may miss what was written). */
static void print_replication(const struct wire_cresp *r)
{
    const struct wire_cnode *first = NULL;
    bool differ = false;
    for (size_t i = 0; i < r->nnodes; i++) {
        const struct wire_cnode *n = &r->nodes[i];
        if (n->repl.len == 0)
            continue;
        if (first == NULL)
            first = n;
        else if (slice_cmp(first->repl, n->repl) != 0)
            differ = true;
    }
    if (first == NULL)
        return;
    if (!differ) {
        printf("Replication: %.*s\n", (int)first->repl.len,
               (const char *)first->repl.p);
        return;
    }
    printf("WARNING: the nodes are configured with different replication; "
           "each places replicas by its own, so reads can miss writes. Set "
           "the same on every node:\n");
    for (size_t i = 0; i < r->nnodes; i++) {
        const struct wire_cnode *n = &r->nodes[i];
        if (n->repl.len > 0)
            printf("  %.*s: %.*s\n", (int)n->name.len, (const char *)n->name.p,
                   (int)n->repl.len, (const char *)n->repl.p);
    }
}

void cli_status_json(const struct wire_cresp *r)
{
    cli_json_ring_head(r);
    printf(",\"nodes\":[");
    for (size_t i = 0; i < r->nnodes; i++) {
        const struct wire_cnode *n = &r->nodes[i];
        printf("%s{\"state\":", i ? "," : "");
        cli_json_slice(stdout, n->state);
        printf(",\"address\":");
        cli_json_slice(stdout, n->addr);
        printf(",\"load\":%" PRIu64 ",\"tokens\":%" PRIu32, n->load, n->tokens);
        if (n->owns >= 0)
            printf(",\"owns\":%.6f", n->owns);
        else
            printf(",\"owns\":null");
        printf(",\"host\":");
        cli_json_slice(stdout, n->name);
        printf(",\"rack\":");
        cli_json_slice(stdout, n->rack);
        printf(",\"dc\":");
        cli_json_slice(stdout, n->dc);
        if (n->repl.len > 0) {
            printf(",\"replication\":");
            cli_json_slice(stdout, n->repl);
        }
        if (n->silent_ms > 0)
            printf(",\"silent_ms\":%" PRIu64, n->silent_ms);
        if (n->clock_ahead_ms > 0)
            printf(",\"clock_ms\":%" PRIu64, n->clock_ahead_ms);
        else if (n->clock_behind_ms > 0)
            printf(",\"clock_ms\":-%" PRIu64, n->clock_behind_ms);
        if (n->clock_far)
            printf(",\"clock_far\":true");
        if (n->disk_full)
            printf(",\"disk_full\":true");
        if (n->repair_arcs)
            printf(",\"repair\":{\"arcs\":%" PRIu64 ",\"oldest_ms\":%" PRIu64
                   ",\"overdue\":%" PRIu64 ",\"never\":%" PRIu64 "}",
                   n->repair_arcs, n->repair_oldest_ms, n->repair_overdue,
                   n->repair_never);
        if (n->queued.len > 0) {
            printf(",\"queued\":");
            cli_json_slice(stdout, n->queued);
        }
        printf("}");
    }
    printf("]");
    if ((r->has & WIRE_CRESP_TEXT) && r->text.len) {
        printf(",\"notes\":");
        cli_json_slice(stdout, r->text);
    }
    printf("}\n");
}

void cli_status_text(const struct wire_cresp *r)
{
    if (r->has & WIRE_CRESP_CLUSTER)
        printf("Cluster: %.*s\n", (int)r->cluster.len,
               (const char *)r->cluster.p);
    status_table(r);
    print_node_notes(r);
    print_repair(r);
    print_clock(r);
    print_waiting(r);
    cli_print_ring_line(r);
    print_replication(r);
    /* the node's notes: its replication setting's version, and the repair
     * or rebuild under way after a change */
    if ((r->has & WIRE_CRESP_TEXT) && r->text.len) {
        fwrite(r->text.p, 1, r->text.len, stdout);
        if (r->text.p[r->text.len - 1] != '\n')
            putchar('\n');
    }
}
