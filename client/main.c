/*
 * main.c - `ringkv`, the command-line client and nodetool-like admin tool.
 *
 * Every command is one request over libringkv to one node (-h); output is a
 * human table or, with --json, one JSON object on stdout. Exit codes are
 * part of the interface (docs/cli.md):
 *   0 ok, 1 key not found, 2 usage, 3 cannot connect / connection lost,
 *   4 authentication, 5 cluster could not serve (UNAVAILABLE, TIMEOUT,
 *   OVERLOADED, RING_STALE), 6 request rejected (BAD_REQUEST, TOO_LARGE),
 *   7 not implemented in this version (NOT_IMPLEMENTED), 8 any other error.
 */
#include <errno.h>
#include <inttypes.h>
#include <math.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "client/ringkv.h"
#include "common/rk.h"
#include "wire/client_msg.h"

enum {
    EXIT_OK = 0,
    EXIT_NOTFOUND = 1,
    EXIT_USAGE = 2,
    EXIT_CONNECT = 3,
    EXIT_AUTH = 4,
    EXIT_CLUSTER = 5,
    EXIT_REJECTED = 6,
    EXIT_NOTIMPL = 7,
    EXIT_OTHER = 8
};

struct cli {
    const char *hosts;
    const char *password;
    bool json;
    bool wait; /* decommission, removenode, cleanup, repair: until done */
    uint32_t cl;
    double timeout_s;
    uint32_t ttl;
    const char *cmd;
    const char **pos; /* positional arguments after the command */
    int npos;
};

struct cmd {
    const char *name;
    const char *args;
    const char *help;
    int min, max; /* positional arguments */
    int (*run)(struct cli *, ringkv *);
    uint32_t op; /* for the generic admin commands */
};

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

static void json_slice(FILE *f, struct rk_slice s)
{
    json_str(f, s.p, s.len);
}

static void json_cstr(FILE *f, const char *s)
{
    json_str(f, (const uint8_t *)s, strlen(s));
}

/* Bytes as a JSON member: "name": "text" when UTF-8, else "name_hex". */
static void json_bytes_member(FILE *f, const char *name, struct rk_slice s)
{
    if (utf8_valid(s.p, s.len)) {
        fprintf(f, "\"%s\":", name);
        json_slice(f, s);
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

/* ---- error reporting --------------------------------------------------- */

static int exit_code(int rc)
{
    switch (ringkv_errkind(rc)) {
    case RINGKV_KIND_OK:
        return EXIT_OK;
    case RINGKV_KIND_NOTFOUND:
        return EXIT_NOTFOUND;
    case RINGKV_KIND_CONNECTION:
        return EXIT_CONNECT;
    case RINGKV_KIND_AUTH:
        return EXIT_AUTH;
    case RINGKV_KIND_CLUSTER:
        return EXIT_CLUSTER;
    case RINGKV_KIND_REJECTED:
        return EXIT_REJECTED;
    case RINGKV_KIND_NOTSUP:
        return EXIT_NOTIMPL;
    case RINGKV_KIND_OTHER:
        break;
    }
    return EXIT_OTHER;
}

/* The error's name in --json output: the protocol name of a server error,
 * CONNECTION for a transport failure, ERROR otherwise. */
static const char *error_name(int rc)
{
    if (rc <= RK_ERR_BASE && rc >= RK_ERR_LAST)
        return wire_cerr_name(rc);
    return ringkv_errkind(rc) == RINGKV_KIND_CONNECTION ? "CONNECTION"
                                                        : "ERROR";
}

static int report(struct cli *a, ringkv *c, int rc)
{
    const char *msg = c ? ringkv_errmsg(c) : "";
    char notsup[1024];
    if (msg[0] == '\0')
        msg = rk_strerror(rc);
    if (c != NULL && ringkv_errkind(rc) == RINGKV_KIND_NOTSUP) {
        /* the node knows the command; this version of it does not do it */
        snprintf(notsup, sizeof(notsup),
                 "not implemented in this version (the node %s answered %s)",
                 ringkv_peer(c), msg);
        msg = notsup;
    }
    if (a->json) {
        printf("{\"error\":");
        json_cstr(stdout, error_name(rc));
        printf(",\"message\":");
        json_cstr(stdout, msg);
        printf(",\"exit\":%d}\n", exit_code(rc));
    } else {
        fprintf(stderr, "ringkv %s: %s\n", a->cmd, msg);
    }
    return exit_code(rc);
}

/* Run one request synchronously; on error report it. Returns EXIT_OK or
 * the (nonzero) exit code already reported. */
static int
call(struct cli *a, ringkv *c, struct wire_cresp *r, struct wire_creq *q)
{
    int rc = ringkv_call(c, r, q);
    if (rc != 0) {
        int code = report(a, c, rc);
        wire_cresp_clear(r);
        return code;
    }
    return EXIT_OK;
}

/* ---- data commands ------------------------------------------------------ */

static struct rk_slice arg_slice(const char *s)
{
    return RK_SLICE(s, strlen(s));
}

static int cmd_get(struct cli *a, ringkv *c)
{
    struct wire_creq q = {
        .op = WIRE_COP_GET, .has = WIRE_CREQ_KEY, .key = arg_slice(a->pos[0])};
    struct wire_cresp r;
    int rc = ringkv_call(c, &r, &q);
    if (rc == RK_ENOTFOUND) {
        wire_cresp_clear(&r);
        if (a->json) {
            printf("{\"key\":");
            json_cstr(stdout, a->pos[0]);
            printf(",\"found\":false}\n");
        } else {
            fprintf(stderr, "ringkv get: key not found\n");
        }
        return EXIT_NOTFOUND;
    }
    if (rc != 0) {
        wire_cresp_clear(&r);
        return report(a, c, rc);
    }
    if (a->json) {
        printf("{\"key\":");
        json_cstr(stdout, a->pos[0]);
        printf(",\"found\":true,");
        json_bytes_member(stdout, "value", r.value);
        printf("}\n");
    } else {
        fwrite(r.value.p, 1, r.value.len, stdout);
        if (isatty(STDOUT_FILENO) || r.value.len == 0 ||
            r.value.p[r.value.len - 1] != '\n')
            fputc('\n', stdout);
    }
    wire_cresp_clear(&r);
    return EXIT_OK;
}

static int cmd_mget(struct cli *a, ringkv *c)
{
    struct rk_slice keys[WIRE_CMGET_MAX];
    for (int i = 0; i < a->npos; i++)
        keys[i] = arg_slice(a->pos[i]);
    struct wire_creq q = {.op = WIRE_COP_MGET,
                          .has = WIRE_CREQ_KEYS,
                          .keys = keys,
                          .nkeys = (size_t)a->npos};
    struct wire_cresp r;
    int rc = call(a, c, &r, &q);
    if (rc != 0)
        return rc;
    if (r.nvalues != (size_t)a->npos) {
        fprintf(stderr, "ringkv mget: %zu values for %d keys\n", r.nvalues,
                a->npos);
        wire_cresp_clear(&r);
        return EXIT_OTHER;
    }
    if (a->json)
        printf("{\"values\":[");
    for (size_t i = 0; i < r.nvalues; i++) {
        if (a->json) {
            printf("%s{\"key\":", i ? "," : "");
            json_cstr(stdout, a->pos[i]);
            printf(",\"found\":%s", r.values[i].found ? "true" : "false");
            if (r.values[i].found) {
                fputc(',', stdout);
                json_bytes_member(stdout, "value", r.values[i].value);
            }
            fputc('}', stdout);
        } else if (r.values[i].found) {
            printf("%s\t%.*s\n", a->pos[i], (int)r.values[i].value.len,
                   (const char *)r.values[i].value.p);
        } else {
            printf("%s\t(not found)\n", a->pos[i]);
        }
    }
    if (a->json)
        printf("]}\n");
    wire_cresp_clear(&r);
    return EXIT_OK;
}

static int read_stdin(uint8_t **out, size_t *out_len)
{
    size_t cap = 4096, len = 0;
    uint8_t *b = malloc(cap);
    if (b == NULL)
        return -ENOMEM;
    size_t n;
    while ((n = fread(b + len, 1, cap - len, stdin)) > 0) {
        len += n;
        if (len > RK_MAX_VALUE) {
            free(b);
            return RK_ETOOLARGE;
        }
        if (len == cap) {
            uint8_t *nb = realloc(b, cap * 2);
            if (nb == NULL) {
                free(b);
                return -ENOMEM;
            }
            b = nb;
            cap *= 2;
        }
    }
    *out = b;
    *out_len = len;
    return 0;
}

static void print_ok(struct cli *a, const struct wire_cresp *r)
{
    if (a->json) {
        printf("{\"ok\":true");
        if (r->has & WIRE_CRESP_ACKS)
            printf(",\"acks\":%" PRIu32, r->acks);
        if (r->has & WIRE_CRESP_NEED)
            printf(",\"need\":%" PRIu32, r->need);
        printf("}\n");
    } else {
        printf("OK\n");
    }
}

static int cmd_put(struct cli *a, ringkv *c)
{
    uint8_t *stdin_buf = NULL;
    struct wire_creq q = {.op = WIRE_COP_PUT,
                          .has = WIRE_CREQ_KEY | WIRE_CREQ_VALUE,
                          .key = arg_slice(a->pos[0]),
                          .value = arg_slice(a->pos[1])};
    if (strcmp(a->pos[1], "-") == 0) {
        size_t n;
        int rc = read_stdin(&stdin_buf, &n);
        if (rc != 0)
            return report(a, NULL, rc);
        q.value = RK_SLICE(stdin_buf, n);
    }
    if (a->ttl) {
        q.has |= WIRE_CREQ_TTL;
        q.ttl = a->ttl;
    }
    struct wire_cresp r;
    int rc = call(a, c, &r, &q);
    free(stdin_buf);
    if (rc != 0)
        return rc;
    print_ok(a, &r);
    wire_cresp_clear(&r);
    return EXIT_OK;
}

static int cmd_del(struct cli *a, ringkv *c)
{
    struct wire_creq q = {
        .op = WIRE_COP_DEL, .has = WIRE_CREQ_KEY, .key = arg_slice(a->pos[0])};
    struct wire_cresp r;
    int rc = call(a, c, &r, &q);
    if (rc != 0)
        return rc;
    print_ok(a, &r);
    wire_cresp_clear(&r);
    return EXIT_OK;
}

static int cmd_ping(struct cli *a, ringkv *c)
{
    struct wire_creq q = {.op = WIRE_COP_PING};
    struct wire_cresp r;
    int rc = call(a, c, &r, &q);
    if (rc != 0)
        return rc;
    if (a->json) {
        printf("{\"ok\":true,\"peer\":");
        json_cstr(stdout, ringkv_peer(c));
        printf("}\n");
    } else {
        printf("PONG from %s\n", ringkv_peer(c));
    }
    wire_cresp_clear(&r);
    return EXIT_OK;
}

/* ---- admin commands ----------------------------------------------------- */

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

/* Peers that leave the answering node's requests unanswered while gossip
 * still has them UP (a hung disk, a stopped process not yet convicted). */
static void print_silent(const struct wire_cresp *r)
{
    for (size_t i = 0; i < r->nnodes; i++) {
        const struct wire_cnode *n = &r->nodes[i];
        if (n->silent_ms == 0)
            continue;
        printf("Silent: %.*s has not answered %.*s%s requests for %.1f s: "
               "reads ask it last; writes to it are hinted once that "
               "passes write_timeout_ms\n",
               (int)n->name.len, (const char *)n->name.p, (int)r->node.len,
               (const char *)r->node.p,
               r->node.len ? "'s" : "the answering node's",
               (double)n->silent_ms / 1000.0);
    }
}

/* Nodes started with join_ring: false, waiting for `ringkv join`. */
static void print_waiting(const struct wire_cresp *r)
{
    for (size_t i = 0; i < r->nnodes; i++) {
        const struct wire_cnode *n = &r->nodes[i];
        if (n->state.len != 2 || ((const char *)n->state.p)[1] != 'W')
            continue;
        printf("Waiting: %.*s holds no tokens until `ringkv -h %.*s join`\n",
               (int)n->name.len, (const char *)n->name.p, (int)n->addr.len,
               (const char *)n->addr.p);
    }
}

static void print_ring_line(const struct wire_cresp *r)
{
    printf("\nRing epoch: %" PRIu64 ", fingerprint: %016" PRIx64, r->epoch,
           r->fprint);
    if (r->has & WIRE_CRESP_NODE)
        printf(" (as seen by %.*s)", (int)r->node.len, (const char *)r->node.p);
    printf("\n");
}

static void json_ring_head(const struct wire_cresp *r)
{
    printf("{\"epoch\":%" PRIu64 ",\"fingerprint\":\"%016" PRIx64 "\"",
           r->epoch, r->fprint);
    if (r->has & WIRE_CRESP_NODE) {
        printf(",\"node\":");
        json_slice(stdout, r->node);
    }
    if (r->has & WIRE_CRESP_CLUSTER) {
        printf(",\"cluster\":");
        json_slice(stdout, r->cluster);
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

static int cmd_status(struct cli *a, ringkv *c)
{
    struct wire_creq q = {.op = WIRE_COP_STATUS};
    struct wire_cresp r;
    int rc = call(a, c, &r, &q);
    if (rc != 0)
        return rc;
    if (a->json) {
        json_ring_head(&r);
        printf(",\"nodes\":[");
        for (size_t i = 0; i < r.nnodes; i++) {
            const struct wire_cnode *n = &r.nodes[i];
            printf("%s{\"state\":", i ? "," : "");
            json_slice(stdout, n->state);
            printf(",\"address\":");
            json_slice(stdout, n->addr);
            printf(",\"load\":%" PRIu64 ",\"tokens\":%" PRIu32, n->load,
                   n->tokens);
            if (n->owns >= 0)
                printf(",\"owns\":%.6f", n->owns);
            else
                printf(",\"owns\":null");
            printf(",\"host\":");
            json_slice(stdout, n->name);
            printf(",\"rack\":");
            json_slice(stdout, n->rack);
            printf(",\"dc\":");
            json_slice(stdout, n->dc);
            if (n->repl.len > 0) {
                printf(",\"replication\":");
                json_slice(stdout, n->repl);
            }
            if (n->silent_ms > 0)
                printf(",\"silent_ms\":%" PRIu64, n->silent_ms);
            printf("}");
        }
        printf("]}\n");
    } else {
        if (r.has & WIRE_CRESP_CLUSTER)
            printf("Cluster: %.*s\n", (int)r.cluster.len,
                   (const char *)r.cluster.p);
        status_table(&r);
        print_silent(&r);
        print_waiting(&r);
        print_ring_line(&r);
        print_replication(&r);
    }
    wire_cresp_clear(&r);
    return EXIT_OK;
}

static int cmd_ring(struct cli *a, ringkv *c)
{
    struct wire_creq q = {.op = WIRE_COP_RING};
    struct wire_cresp r;
    int rc = call(a, c, &r, &q);
    if (rc != 0)
        return rc;
    if (a->json) {
        json_ring_head(&r);
        printf(",\"tokens\":[");
        for (size_t i = 0; i < r.ntokens; i++) {
            printf("%s{\"token\":%" PRIu64 ",\"node\":", i ? "," : "",
                   r.tokens[i].token);
            json_slice(stdout, r.tokens[i].node);
            printf("}");
        }
        printf("]}\n");
    } else {
        int w = 4;
        for (size_t i = 0; i < r.ntokens; i++)
            if ((int)r.tokens[i].node.len > w)
                w = (int)r.tokens[i].node.len;
        printf("%-*s  %20s  %s\n", w, "Node", "Token", "Token (hex)");
        for (size_t i = 0; i < r.ntokens; i++)
            printf("%-*.*s  %20" PRIu64 "  %016" PRIx64 "\n", w,
                   (int)r.tokens[i].node.len, (const char *)r.tokens[i].node.p,
                   r.tokens[i].token, r.tokens[i].token);
        print_ring_line(&r);
    }
    wire_cresp_clear(&r);
    return EXIT_OK;
}

static int cmd_endpoints(struct cli *a, ringkv *c)
{
    struct wire_creq q = {.op = WIRE_COP_ENDPOINTS,
                          .has = WIRE_CREQ_KEY,
                          .key = arg_slice(a->pos[0])};
    struct wire_cresp r;
    int rc = call(a, c, &r, &q);
    if (rc != 0)
        return rc;
    /* the partitioner is shared: a different token means the client and the
     * server disagree on where keys live */
    uint64_t mine = rk_token(a->pos[0], strlen(a->pos[0]));
    if (mine != r.token)
        fprintf(stderr,
                "ringkv getendpoints: warning: the node says token %" PRIu64
                ", this client computes %" PRIu64 "\n",
                r.token, mine);
    if (a->json) {
        printf("{\"key\":");
        json_cstr(stdout, a->pos[0]);
        printf(",\"token\":%" PRIu64 ",\"endpoints\":[", r.token);
        for (size_t i = 0; i < r.nendpoints; i++) {
            printf("%s{\"host\":", i ? "," : "");
            json_slice(stdout, r.endpoints[i].name);
            printf(",\"address\":");
            json_slice(stdout, r.endpoints[i].addr);
            printf("}");
        }
        printf("]}\n");
    } else {
        for (size_t i = 0; i < r.nendpoints; i++)
            printf("%.*s\t%.*s\n", (int)r.endpoints[i].addr.len,
                   (const char *)r.endpoints[i].addr.p,
                   (int)r.endpoints[i].name.len,
                   (const char *)r.endpoints[i].name.p);
    }
    wire_cresp_clear(&r);
    return EXIT_OK;
}

/* METRICS and the admin ops whose result is text. */
/* Send op with the positional arguments as its args (call()). */
static int
text_call(struct cli *a, ringkv *c, uint32_t op, struct wire_cresp *r)
{
    struct rk_slice args[WIRE_CARGS_MAX];
    struct wire_creq q = {.op = op};
    if (a->npos > 0) {
        for (int i = 0; i < a->npos; i++)
            args[i] = arg_slice(a->pos[i]);
        q.has |= WIRE_CREQ_ARGS;
        q.args = args;
        q.nargs = (size_t)a->npos;
    }
    return call(a, c, r, &q);
}

static int cmd_text(struct cli *a, ringkv *c, uint32_t op)
{
    struct wire_cresp r;
    int rc = text_call(a, c, op, &r);
    if (rc != 0)
        return rc;
    if (a->json) {
        printf("{\"ok\":true,\"text\":");
        json_slice(stdout, r.text);
        printf("}\n");
    } else if (r.text.len) {
        fwrite(r.text.p, 1, r.text.len, stdout);
        if (r.text.p[r.text.len - 1] != '\n')
            fputc('\n', stdout);
    } else {
        printf("OK\n");
    }
    wire_cresp_clear(&r);
    return EXIT_OK;
}

static int cmd_metrics(struct cli *a, ringkv *c)
{
    return cmd_text(a, c, WIRE_COP_METRICS);
}

static int cmd_admin(struct cli *a, ringkv *c);

static const struct cmd cmds[] = {
    {"get", "KEY", "Print the value of KEY (exit 1 if absent).", 1, 1, cmd_get,
     0},
    {"put", "KEY VALUE [--ttl S]",
     "Store VALUE under KEY (VALUE '-' reads stdin); --ttl expires it after "
     "S seconds.",
     2, 2, cmd_put, 0},
    {"del", "KEY", "Delete KEY.", 1, 1, cmd_del, 0},
    {"mget", "KEY...", "Print the values of several keys.", 1,
     (int)WIRE_CMGET_MAX, cmd_mget, 0},
    {"ping", "", "Check that the node answers.", 0, 0, cmd_ping, 0},
    {"status", "",
     "One row per node: state, address, load, tokens, effective ownership, "
     "host, rack, by data centre (nodes waiting for `join` too, as UW); "
     "peers that leave this node's requests unanswered; then the ring epoch "
     "and fingerprint.",
     0, 0, cmd_status, 0},
    {"ring", "", "Every token of the ring and the node that owns it.", 0, 0,
     cmd_ring, 0},
    {"getendpoints", "KEY", "The replicas of KEY, in order.", 1, 1,
     cmd_endpoints, 0},
    {"metrics", "", "The node's metrics (Prometheus text format).", 0, 0,
     cmd_metrics, 0},
    {"join", "", "Ask the node to join the ring.", 0, 0, cmd_admin,
     WIRE_COP_JOIN},
    {"decommission", "",
     "Ask the node to push its ranges to the nodes that gain them, then leave "
     "the ring and stop (--wait follows it).",
     0, 0, cmd_admin, WIRE_COP_DECOMMISSION},
    {"removenode", "NODE", "Remove a dead node from the ring.", 1, 1, cmd_admin,
     WIRE_COP_REMOVENODE},
    {"repair", "[START,END]",
     "Make the node's replicas agree with the others' (Merkle), or only "
     "those of the tokens (START, END].",
     0, 1, cmd_admin, WIRE_COP_REPAIR},
    {"cleanup", "", "Drop data the node no longer replicates.", 0, 0, cmd_admin,
     WIRE_COP_CLEANUP},
    {"netstats", "",
     "Streaming sessions: bytes, keys, rate, ETA; a line 'Stalled: ...' when "
     "an operation has made no progress for stall_warning_s.",
     0, 0, cmd_admin, WIRE_COP_NETSTATS},
    {"abort", "",
     "Stop the node's decommission, or the removenode it drives, and put the "
     "ring back as it was (the node, or the removed one, NORMAL again).",
     0, 0, cmd_admin, WIRE_COP_ABORT},
};

#define NCMDS (sizeof(cmds) / sizeof(cmds[0]))

/* The line of a NETSTATS text that starts with `prefix`, or "". */
static void
stats_line(char *out, size_t cap, struct rk_slice text, const char *prefix)
{
    out[0] = '\0';
    const char *p = (const char *)text.p, *end = p + text.len;
    size_t pl = strlen(prefix);
    while (p && p < end) {
        const char *nl = memchr(p, '\n', (size_t)(end - p));
        size_t len = (size_t)((nl ? nl : end) - p);
        if (len >= pl && memcmp(p, prefix, pl) == 0) {
            snprintf(out, cap, "%.*s", (int)len, p);
            return;
        }
        p = nl ? nl + 1 : NULL;
    }
}

/* --wait warns when the progress line has not moved for this long and the
 * node reports no stall itself: stall_warning_s's default (docs/cli.md). */
#define WAIT_STALL_S 30

/* The part of a progress line that moves only with progress: without the
 * elapsed time, the rate and the ETA ("Sending 27 ranges: ...; 12 keys,
 * 3.4 MiB in 12.3 s (1.0 MiB/s), ETA 5 s", "Cleanup: running for 2.0 s;
 * 3 ranges dropped ..."). */
static void progress_key(char *out, size_t cap, const char *line)
{
    const char *p = strstr(line, "running for ");
    if (p) {
        const char *rest = strpbrk(p, ";:");
        snprintf(out, cap, "%.*s%s", (int)(p - line), line, rest ? rest : "");
        return;
    }
    p = strstr(line, " in ");
    snprintf(out, cap, "%.*s", p ? (int)(p - line) : (int)strlen(line), line);
}

/* What a NETSTATS "Stalled: ..." line says is wrong, without how long it
 * has been nor how many failures: its part between the first "; " and the
 * next ("last error: push to n4: not found"). */
static void stall_key(char *out, size_t cap, const char *line)
{
    const char *p = strstr(line, "; ");
    snprintf(out, cap, "%s", p ? p + 2 : line);
    char *q = strstr(out, "; ");
    if (q)
        *q = '\0';
}

/* Each poll of --wait: the node's stall line printed to stderr when it
 * appears and when its reason changes; without one, a warning of ours once
 * the progress line has not moved for WAIT_STALL_S. */
struct wait_stall {
    char seen[512]; /* the last poll's Stalled line, or "" */
    char said[512]; /* the reason last printed */
    char key[512];  /* the progress line's moving part */
    time_t moved;   /* when it last changed */
    bool warned;    /* our own warning printed since */
};

static void wait_stall_poll(struct wait_stall *w,
                            const char *cmd,
                            struct rk_slice text,
                            const char *line)
{
    char key[512];
    time_t now = time(NULL);
    progress_key(key, sizeof(key), line);
    if (!w->moved || strcmp(key, w->key) != 0) {
        snprintf(w->key, sizeof(w->key), "%s", key);
        w->moved = now;
        w->warned = false;
    }
    stats_line(w->seen, sizeof(w->seen), text, "Stalled:");
    if (w->seen[0]) {
        stall_key(key, sizeof(key), w->seen);
        if (strcmp(key, w->said) != 0) {
            fprintf(stderr, "ringkv %s: warning: %s\n", cmd, w->seen);
            snprintf(w->said, sizeof(w->said), "%s", key);
        }
        return;
    }
    w->said[0] = '\0';
    if (line[0] && !w->warned && now - w->moved >= WAIT_STALL_S) {
        fprintf(stderr,
                "ringkv %s: warning: no progress seen for %d s (the node "
                "reports no stall; `ringkv netstats` on it shows each "
                "session)\n",
                cmd, (int)(now - w->moved));
        w->warned = true;
    }
}

/* --wait: follow the node's NETSTATS every second until the operation is
 * over, printing its progress line when it changes, and a warning when it
 * stalls (wait_stall_poll). A decommission is over when the node stops
 * answering (it exits once it has left), or aborted. */
static int wait_done(struct cli *a, ringkv *c, const char *started)
{
    char last[512] = "", line[512], done_line[512] = "";
    struct wait_stall ws = {0};
    bool dec = strcmp(a->cmd, "decommission") == 0;
    char node[256]; /* the node asked: progress is only known there */
    snprintf(node, sizeof(node), "%s", ringkv_peer(c));
    int code = EXIT_OK;
    bool seen_left = false;
    for (;;) {
        struct timespec ts = {1, 0};
        nanosleep(&ts, NULL);
        struct wire_creq q = {.op = WIRE_COP_NETSTATS};
        struct wire_cresp r;
        int rc = ringkv_call(c, &r, &q);
        if (rc == 0 && strcmp(ringkv_peer(c), node) != 0) {
            /* another host of the list answered: the node did not */
            wire_cresp_clear(&r);
            rc = RK_ECLOSED;
        }
        if (rc != 0) {
            if (dec && ringkv_errkind(rc) == RINGKV_KIND_CONNECTION) {
                snprintf(done_line, sizeof(done_line),
                         seen_left ? "the node has left the ring and stopped"
                                   : "the node stopped answering: it has left "
                                     "or it stopped; `ringkv status` on "
                                     "another node tells which");
                break;
            }
            if (ringkv_errkind(rc) == RINGKV_KIND_CONNECTION && !a->json)
                fprintf(stderr,
                        "ringkv %s: lost %s, which alone shows the progress; "
                        "the operation goes on there\n",
                        a->cmd, node);
            return report(a, c, rc);
        }
        struct rk_slice t = r.text;
        if (dec) {
            stats_line(line, sizeof(line), t, "Mode: LEFT");
            seen_left |= line[0] != '\0';
            stats_line(done_line, sizeof(done_line), t, "Decommission aborted");
            code = done_line[0] ? EXIT_OTHER : EXIT_OK;
            stats_line(line, sizeof(line), t, "Sending");
        } else if (strcmp(a->cmd, "cleanup") == 0) {
            stats_line(line, sizeof(line), t, "Cleanup:");
            bool failed = strncmp(line, "Cleanup: failed", 15) == 0;
            if (failed || strncmp(line, "Cleanup: done", 13) == 0) {
                snprintf(done_line, sizeof(done_line), "%s", line);
                code = failed ? EXIT_OTHER : EXIT_OK;
            }
        } else if (strcmp(a->cmd, "repair") == 0) {
            stats_line(line, sizeof(line), t, "Repair:");
            bool failed = strncmp(line, "Repair: done with failures", 26) == 0;
            if (strncmp(line, "Repair: done", 12) == 0) {
                snprintf(done_line, sizeof(done_line), "%s", line);
                code = failed ? EXIT_OTHER : EXIT_OK;
            }
        } else { /* removenode */
            stats_line(line, sizeof(line), t, "Copying");
            char what[300];
            snprintf(what, sizeof(what), "Removed %s:", a->pos[0]);
            stats_line(done_line, sizeof(done_line), t, what);
            if (!done_line[0]) {
                snprintf(what, sizeof(what), "Removal of %s aborted",
                         a->pos[0]);
                stats_line(done_line, sizeof(done_line), t, what);
                code = done_line[0] ? EXIT_OTHER : EXIT_OK;
            }
        }
        if (!done_line[0])
            wait_stall_poll(&ws, a->cmd, t, line);
        wire_cresp_clear(&r);
        if (done_line[0])
            break;
        if (!a->json && line[0] && strcmp(line, last) != 0) {
            printf("%s\n", line);
            fflush(stdout);
            snprintf(last, sizeof(last), "%s", line);
        }
    }
    if (a->json) {
        printf("{\"ok\":%s,\"text\":", code == EXIT_OK ? "true" : "false");
        json_cstr(stdout, started);
        printf(",\"done\":");
        json_cstr(stdout, done_line);
        if (ws.seen[0]) {
            printf(",\"stalled\":");
            json_cstr(stdout, ws.seen);
        }
        printf("}\n");
    } else {
        printf("%s\n", done_line);
    }
    return code;
}

static int cmd_admin(struct cli *a, ringkv *c)
{
    const struct cmd *cmd = NULL;
    for (size_t i = 0; i < NCMDS; i++)
        if (strcmp(cmds[i].name, a->cmd) == 0)
            cmd = &cmds[i];
    if (!cmd)
        return EXIT_USAGE;
    if (!a->wait)
        return cmd_text(a, c, cmd->op);
    struct wire_cresp r;
    int code = text_call(a, c, cmd->op, &r);
    if (code != EXIT_OK)
        return code;
    char *started = strndup(r.text.p ? (const char *)r.text.p : "", r.text.len);
    wire_cresp_clear(&r);
    if (!started)
        return EXIT_OTHER;
    if (!a->json) {
        printf("%s\n", started);
        fflush(stdout);
    }
    code = wait_done(a, c, started);
    free(started);
    return code;
}

/* ---- usage and argument parsing ----------------------------------------- */

static const char global_help[] =
    "Options (anywhere on the line):\n"
    "  -h, --host HOST[:PORT][,HOST...]  node(s) to ask, first that answers\n"
    "                                    (default 127.0.0.1:7380, or "
    "$RINGKV_HOST)\n"
    "  -c, --consistency LEVEL  ONE TWO QUORUM ALL LOCAL_ONE LOCAL_QUORUM\n"
    "                           EACH_QUORUM (default: the server's)\n"
    "  -a, --password PW        or $RINGKV_PASSWORD\n"
    "  -t, --timeout SECONDS    per request (default 5; decimals allowed)\n"
    "      --ttl SECONDS        put: expire the value\n"
    "      --json               one JSON object on stdout\n"
    "      --wait               decommission, removenode, cleanup, repair:\n"
    "                           follow the progress until it is over (a\n"
    "                           warning on stderr when it stalls)\n"
    "      --help               this help, or a command's\n"
    "  --                       end of options (keys that start with '-')\n"
    "Exit codes: 0 ok, 1 not found, 2 usage, 3 cannot connect, 4 auth,\n"
    "  5 cluster could not serve (UNAVAILABLE, TIMEOUT, OVERLOADED,\n"
    "  RING_STALE), 6 rejected (BAD_REQUEST, TOO_LARGE), 7 not implemented,\n"
    "  8 other.\n";

static void usage_all(FILE *f)
{
    fprintf(f, "usage: ringkv [options] COMMAND [ARGS]\n\nCommands:\n");
    for (size_t i = 0; i < NCMDS; i++)
        fprintf(f, "  %-12s %-20s %s\n", cmds[i].name, cmds[i].args,
                cmds[i].help);
    fprintf(f, "  %-12s %-20s %s\n\n%s", "help", "[COMMAND]",
            "Help on all commands or one.", global_help);
}

static void usage_cmd(FILE *f, const struct cmd *c)
{
    fprintf(f, "usage: ringkv [options] %s %s\n\n%s\n\n%s", c->name, c->args,
            c->help, global_help);
}

static const struct cmd *find_cmd(const char *name)
{
    for (size_t i = 0; i < NCMDS; i++)
        if (strcmp(cmds[i].name, name) == 0)
            return &cmds[i];
    return NULL;
}

static int usage_error(const char *fmt, const char *arg)
{
    fprintf(stderr, "ringkv: ");
    fprintf(stderr, fmt, arg);
    fprintf(stderr, "\n(ringkv --help for usage)\n");
    return EXIT_USAGE;
}

static int parse_u32(uint32_t *out, const char *s, uint32_t max)
{
    char *end;
    errno = 0;
    unsigned long long v = strtoull(s, &end, 10);
    if (errno || end == s || *end || s[0] == '-' || v > max)
        return -1;
    *out = (uint32_t)v;
    return 0;
}

int main(int argc, char **argv)
{
    struct cli a = {.hosts = getenv("RINGKV_HOST"),
                    .password = getenv("RINGKV_PASSWORD"),
                    .timeout_s = 5};
    const char **pos = calloc((size_t)argc + 1, sizeof(*pos));
    int npos = 0, help = 0;
    bool ttl_given = false, opts_done = false;
    if (pos == NULL)
        return EXIT_OTHER;
    if (a.hosts == NULL || a.hosts[0] == '\0')
        a.hosts = "127.0.0.1:7380";
    for (int i = 1; i < argc; i++) {
        const char *s = argv[i];
        const char *val = NULL;
        if (opts_done || s[0] != '-' || strcmp(s, "-") == 0) {
            pos[npos++] = s;
            continue;
        }
        if (strcmp(s, "--") == 0) {
            opts_done = true;
            continue;
        }
        if (strcmp(s, "--json") == 0) {
            a.json = true;
            continue;
        }
        if (strcmp(s, "--wait") == 0) {
            a.wait = true;
            continue;
        }
        if (strcmp(s, "--help") == 0 || strcmp(s, "-?") == 0) {
            help = 1;
            continue;
        }
        /* options with a value: "--opt V" or "--opt=V" */
        static const char *const withval[] = {
            "-h",         "--host", "-c",        "--consistency", "-a",
            "--password", "-t",     "--timeout", "--ttl"};
        const char *eq = strchr(s, '=');
        size_t nlen = eq && s[1] == '-' ? (size_t)(eq - s) : strlen(s);
        const char *name = NULL;
        for (size_t k = 0; k < sizeof(withval) / sizeof(withval[0]); k++)
            if (strlen(withval[k]) == nlen && strncmp(withval[k], s, nlen) == 0)
                name = withval[k];
        if (name == NULL) {
            free(pos);
            return usage_error("unknown option %s", s);
        }
        if (eq && s[1] == '-') {
            val = eq + 1;
        } else if (i + 1 < argc) {
            val = argv[++i];
        } else {
            free(pos);
            return usage_error("option %s needs a value", s);
        }
        if (!strcmp(name, "-h") || !strcmp(name, "--host")) {
            a.hosts = val;
        } else if (!strcmp(name, "-c") || !strcmp(name, "--consistency")) {
            if (wire_ccl_parse(&a.cl, val) != 0) {
                free(pos);
                return usage_error("unknown consistency level %s (ONE, TWO, "
                                   "QUORUM, ALL, LOCAL_ONE, LOCAL_QUORUM, "
                                   "EACH_QUORUM)",
                                   val);
            }
        } else if (!strcmp(name, "-a") || !strcmp(name, "--password")) {
            a.password = val;
        } else if (!strcmp(name, "-t") || !strcmp(name, "--timeout")) {
            char *end;
            a.timeout_s = strtod(val, &end);
            if (end == val || *end || !(a.timeout_s > 0) ||
                a.timeout_s > 86400) {
                free(pos);
                return usage_error("bad --timeout %s (seconds, > 0)", val);
            }
        } else {
            if (parse_u32(&a.ttl, val, WIRE_CTTL_MAX) != 0 || a.ttl == 0) {
                free(pos);
                return usage_error("bad --ttl %s (seconds, 1..315360000)", val);
            }
            ttl_given = true;
        }
    }
    int code = EXIT_USAGE;
    ringkv *c = NULL;
    if (npos == 0) {
        usage_all(help ? stdout : stderr);
        code = help ? EXIT_OK : EXIT_USAGE;
        goto out;
    }
    a.cmd = pos[0];
    a.pos = pos + 1;
    a.npos = npos - 1;
    if (strcmp(a.cmd, "help") == 0) {
        const struct cmd *hc = a.npos > 0 ? find_cmd(a.pos[0]) : NULL;
        if (a.npos > 0 && hc == NULL) {
            code = usage_error("unknown command %s", a.pos[0]);
            goto out;
        }
        if (hc)
            usage_cmd(stdout, hc);
        else
            usage_all(stdout);
        code = EXIT_OK;
        goto out;
    }
    const struct cmd *cmd = find_cmd(a.cmd);
    if (cmd == NULL) {
        code = usage_error("unknown command %s", a.cmd);
        goto out;
    }
    if (help) {
        usage_cmd(stdout, cmd);
        code = EXIT_OK;
        goto out;
    }
    if (a.npos < cmd->min || a.npos > cmd->max) {
        fprintf(stderr, "ringkv %s: wrong number of arguments\n", cmd->name);
        usage_cmd(stderr, cmd);
        goto out;
    }
    if (ttl_given && cmd->run != cmd_put) {
        code = usage_error("--ttl applies to put only, not %s", cmd->name);
        goto out;
    }
    if (a.wait && strcmp(cmd->name, "decommission") != 0 &&
        strcmp(cmd->name, "removenode") != 0 &&
        strcmp(cmd->name, "cleanup") != 0 && strcmp(cmd->name, "repair") != 0) {
        code = usage_error("--wait applies to decommission, removenode, "
                           "cleanup and repair, not %s",
                           cmd->name);
        goto out;
    }
    struct ringkv_opts o = RINGKV_OPTS_INIT;
    o.hosts = a.hosts;
    o.password = a.password && a.password[0] ? a.password : NULL;
    o.client_name = "ringkv-cli";
    o.consistency = a.cl;
    o.timeout_ms = (int)ceil(a.timeout_s * 1000);
    o.connect_timeout_ms = o.timeout_ms < 2000 ? o.timeout_ms : 2000;
    const char *why = NULL;
    int rc = ringkv_new(&c, &o, &why);
    if (rc != 0) {
        code = usage_error("%s", why);
        goto out;
    }
    code = cmd->run(&a, c);
out:
    ringkv_free(c);
    free(pos);
    fflush(stdout);
    return code;
}
