/*
 * main.c - `ringkv`, the command-line client and nodetool-like admin tool.
 *
 * Every command is one request over libringkv to one node (-h); output is a
 * human table or, with --json, one JSON object on stdout. Exit codes are
 * part of the interface (docs/cli.md):
 *   0 ok, 1 key not found, 2 usage, 3 cannot connect / connection lost,
 *   4 authentication, 5 cluster could not serve (UNAVAILABLE, TIMEOUT,
 *   OVERLOADED, RING_STALE), 6 request rejected (BAD_REQUEST, TOO_LARGE),
 *   7 not implemented in this version (NOT_IMPLEMENTED), 8 any other error,
 *   9 the user may not run the command (NOPERM: an admin command as the
 *   data user).
 */
#include <errno.h>
#include <inttypes.h>
#include <math.h>
#include <netdb.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/time.h>
#include <time.h>
#include <unistd.h>

#include "client/main_out.h"
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
    EXIT_OTHER = 8,
    EXIT_NOPERM = 9
};

struct cli {
    const char *hosts;
    const char *password;
    const char *password_file;
    const char *user;
    bool json;
    bool wait;      /* decommission, removenode, cleanup, repair: until done */
    bool all;       /* clearsnapshot --all */
    char snap[160]; /* snapshot: "Snapshot TAG:", its NETSTATS line */
    uint32_t cl;
    double timeout_s;
    uint32_t ttl;
    uint32_t metrics_port; /* health: the node's metrics port */
    bool tls;              /* --tls (also implied by --cacert, --tls-name) */
    const char *cacert;    /* --cacert: the CA that signed the nodes */
    const char *tls_name;  /* --tls-name: the name their certificate has */
    const char *from;      /* rebuild --from: the data centre to stream from */
    bool no_token_aware;   /* --no-token-aware: every request to -h's node */
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
    case RINGKV_KIND_NOPERM:
        return EXIT_NOPERM;
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
        cli_json_cstr(stdout, error_name(rc));
        printf(",\"message\":");
        cli_json_cstr(stdout, msg);
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
            cli_json_cstr(stdout, a->pos[0]);
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
        cli_json_cstr(stdout, a->pos[0]);
        printf(",\"found\":true,");
        cli_json_bytes_member(stdout, "value", r.value);
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

/* `scan`'s state: how many keys were printed, as JSON or lines. */
struct scan_out {
    struct cli *a;
    uint64_t n;
};

static int scan_key(const uint8_t *key, size_t len, void *arg)
{
    struct scan_out *o = arg;
    if (o->a->json) {
        fputs(o->n ? ",{" : "{", stdout); /* {"key": ...} or "key_hex" */
        cli_json_bytes_member(stdout, "key", RK_SLICE(key, len));
        fputc('}', stdout);
    } else {
        fwrite(key, 1, len, stdout);
        fputc('\n', stdout);
    }
    o->n++;
    return 0;
}

/* The MATCH pattern of a prefix: its glob characters escaped, then `*`.
 * NULL for an empty prefix (every key); malloc'd, or NULL and *err. */
static char *prefix_pattern(const char *prefix, bool *err)
{
    size_t n = strlen(prefix);
    *err = false;
    if (n == 0)
        return NULL;
    char *p = malloc(2 * n + 2), *w = p;
    if (!p) {
        *err = true;
        return NULL;
    }
    for (size_t i = 0; i < n; i++) {
        if (strchr("*?[]\\", prefix[i]))
            *w++ = '\\';
        *w++ = prefix[i];
    }
    *w++ = '*';
    *w = '\0';
    return p;
}

/* Every live key (with PREFIX), a call of SCAN_BATCH keys' work at a time
 * until the cursor comes back 0: printed as they come, so memory stays
 * one call's. */
#define SCAN_BATCH 500

static int cmd_scan(struct cli *a, ringkv *c)
{
    bool oom;
    char *match = prefix_pattern(a->npos ? a->pos[0] : "", &oom);
    if (oom)
        return report(a, c, -ENOMEM);
    struct scan_out o = {a, 0};
    uint64_t cursor = 0;
    int rc;
    if (a->json)
        printf("{\"keys\":[");
    do {
        rc = ringkv_scan(c, &cursor, match, SCAN_BATCH, scan_key, &o);
    } while (rc == 0 && cursor != 0);
    free(match);
    if (!a->json) {
        return rc == 0 ? EXIT_OK : report(a, c, rc);
    }
    printf("],\"count\":%" PRIu64, o.n);
    if (rc != 0) {
        const char *msg = ringkv_errmsg(c);
        printf(",\"error\":");
        cli_json_cstr(stdout, error_name(rc));
        printf(",\"message\":");
        cli_json_cstr(stdout, msg[0] ? msg : rk_strerror(rc));
    }
    printf("}\n");
    return rc == 0 ? EXIT_OK : exit_code(rc);
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
            cli_json_cstr(stdout, a->pos[i]);
            printf(",\"found\":%s", r.values[i].found ? "true" : "false");
            if (r.values[i].found) {
                fputc(',', stdout);
                cli_json_bytes_member(stdout, "value", r.values[i].value);
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
        cli_json_cstr(stdout, ringkv_peer(c));
        printf("}\n");
    } else {
        printf("PONG from %s\n", ringkv_peer(c));
    }
    wire_cresp_clear(&r);
    return EXIT_OK;
}

/* ---- admin commands ----------------------------------------------------- */

static int cmd_status(struct cli *a, ringkv *c)
{
    struct wire_creq q = {.op = WIRE_COP_STATUS};
    struct wire_cresp r;
    int rc = call(a, c, &r, &q);
    if (rc != 0)
        return rc;
    if (a->json)
        cli_status_json(&r);
    else
        cli_status_text(&r);
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
        cli_json_ring_head(&r);
        printf(",\"tokens\":[");
        for (size_t i = 0; i < r.ntokens; i++) {
            printf("%s{\"token\":%" PRIu64 ",\"node\":", i ? "," : "",
                   r.tokens[i].token);
            cli_json_slice(stdout, r.tokens[i].node);
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
        cli_print_ring_line(&r);
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
        cli_json_cstr(stdout, a->pos[0]);
        printf(",\"token\":%" PRIu64 ",\"endpoints\":[", r.token);
        for (size_t i = 0; i < r.nendpoints; i++) {
            printf("%s{\"host\":", i ? "," : "");
            cli_json_slice(stdout, r.endpoints[i].name);
            printf(",\"address\":");
            cli_json_slice(stdout, r.endpoints[i].addr);
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
        cli_json_slice(stdout, r.text);
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

/* health: GET /health/ready from the metrics port of the first host (no
 * password: the answer says only whether the node serves). The one command
 * that does not speak the native protocol: a container's health check runs
 * it, and /health is what an orchestrator's HTTP probe asks too. */
static int cmd_health(struct cli *a, ringkv *c)
{
    const char *host = ringkv_host_name(c, 0); /* parsed by ringkv_new */
    char port[8];
    snprintf(port, sizeof(port), "%u", (unsigned)a->metrics_port);
    struct addrinfo hints = {.ai_socktype = SOCK_STREAM}, *ai = NULL;
    int g = getaddrinfo(host, port, &hints, &ai);
    if (g != 0) {
        fprintf(stderr, "ringkv health: %s: %s\n", host, gai_strerror(g));
        return EXIT_CONNECT;
    }
    int fd = socket(ai->ai_family, SOCK_STREAM, 0);
    struct timeval tv = {.tv_sec = (time_t)a->timeout_s,
                         .tv_usec = (suseconds_t)(fmod(a->timeout_s, 1) * 1e6)};
    bool ok = fd >= 0 &&
              setsockopt(fd, SOL_SOCKET, SO_SNDTIMEO, &tv, sizeof(tv)) == 0 &&
              setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof(tv)) == 0 &&
              connect(fd, ai->ai_addr, ai->ai_addrlen) == 0;
    freeaddrinfo(ai);
    static const char req[] = "GET /health/ready HTTP/1.0\r\n\r\n";
    if (!ok || write(fd, req, sizeof(req) - 1) != (ssize_t)(sizeof(req) - 1)) {
        fprintf(stderr, "ringkv health: %s port %s: %s\n", host, port,
                strerror(errno));
        if (fd >= 0)
            close(fd);
        return EXIT_CONNECT;
    }
    char buf[4096];
    size_t len = 0;
    ssize_t r;
    while (len < sizeof(buf) - 1 &&
           (r = read(fd, buf + len, sizeof(buf) - 1 - len)) > 0)
        len += (size_t)r;
    close(fd);
    buf[len] = '\0';
    int status = 0;
    const char *body = strstr(buf, "\r\n\r\n");
    if (sscanf(buf, "HTTP/1.%*d %d", &status) != 1 || body == NULL) {
        fprintf(stderr, "ringkv health: %s port %s: no HTTP answer\n", host,
                port);
        return EXIT_OTHER;
    }
    body += 4;
    if (status != 200 && status != 503) {
        fprintf(stderr, "ringkv health: %s port %s: HTTP %d\n", host, port,
                status);
        return EXIT_OTHER;
    }
    fputs(body, status == 200 ? stdout : stderr);
    return status == 200 ? EXIT_OK : EXIT_CLUSTER;
}

static int cmd_metrics(struct cli *a, ringkv *c)
{
    return cmd_text(a, c, WIRE_COP_METRICS);
}

static int cmd_admin(struct cli *a, ringkv *c);
static int cmd_replication(struct cli *a, ringkv *c);
static int cmd_rebuild(struct cli *a, ringkv *c);
static int cmd_snapshot(struct cli *a, ringkv *c);
static int cmd_clearsnapshot(struct cli *a, ringkv *c);

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
    {"scan", "[PREFIX]",
     "Print every live key of the cluster (with PREFIX: those that start "
     "with it), one per line, in token order, walking the cluster with SCAN "
     "at the level of -c; a key that exists throughout is printed at least "
     "once even while nodes join or leave.",
     0, 1, cmd_scan, 0},
    {"ping", "", "Check that the node answers.", 0, 0, cmd_ping, 0},
    {"status", "",
     "One row per node: state, address, load, tokens, effective ownership, "
     "host, rack, by data centre (nodes waiting for `join` too, as UW); "
     "peers that leave this node's requests unanswered; this node's disk if "
     "it is full; then the ring epoch and fingerprint.",
     0, 0, cmd_status, 0},
    {"ring", "", "Every token of the ring and the node that owns it.", 0, 0,
     cmd_ring, 0},
    {"getendpoints", "KEY", "The replicas of KEY, in order.", 1, 1,
     cmd_endpoints, 0},
    {"metrics", "", "The node's metrics (Prometheus text format).", 0, 0,
     cmd_metrics, 0},
    {"health", "",
     "Whether the node serves: GET /health/ready on its metrics port "
     "(--metrics-port, default 9180); prints the reason, exit 0 ready, 5 "
     "not (joining, leaving, catching up, clock not judged or skewed, "
     "storage failed), 3 no answer.",
     0, 0, cmd_health, 0},
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
    {"replication", "[set SETTING]",
     "Without arguments: each node's replication setting and its version, "
     "and whether they agree. `set dc1:3,dc2:3` (admin): the cluster's new "
     "setting, carried to every node by gossip; nodes that gain replicas "
     "repair them by themselves, a data centre that had none is filled by "
     "`rebuild`.",
     0, 2, cmd_replication, WIRE_COP_REPLICATION},
    {"rebuild", "--from DC",
     "Stream every range the node replicates from the replicas in data "
     "centre DC (fills a new data centre); resumed after a restart, "
     "progress in status and netstats (--wait follows it).",
     0, 0, cmd_rebuild, WIRE_COP_REBUILD},
    {"netstats", "",
     "Streaming sessions: bytes, keys, rate, ETA; a line 'Stalled: ...' when "
     "an operation has made no progress for stall_warning_s; the last "
     "repair, the repair schedule (arcs overdue, the oldest) and the purge.",
     0, 0, cmd_admin, WIRE_COP_NETSTATS},
    {"abort", "",
     "Stop the node's decommission, or the removenode it drives, and put the "
     "ring back as it was (the node, or the removed one, NORMAL again).",
     0, 0, cmd_admin, WIRE_COP_ABORT},
    {"snapshot", "[TAG]",
     "Copy every range the node holds to data_dir/snapshots/TAG (default: "
     "the UTC time) while it serves; waits, showing progress, and prints "
     "ranges, bytes and seconds.",
     0, 1, cmd_snapshot, WIRE_COP_SNAPSHOT},
    {"listsnapshots", "",
     "The node's snapshots: tag, time, ranges, bytes, seconds, state.", 0, 0,
     cmd_admin, WIRE_COP_LISTSNAPSHOTS},
    {"clearsnapshot", "TAG | --all", "Remove a snapshot of the node, or all.",
     0, 1, cmd_clearsnapshot, WIRE_COP_CLEARSNAPSHOT},
    {"reloadtls", "",
     "Load the node's TLS certificate, key and CA file again, as SIGHUP "
     "does: new handshakes (client ports, internode) use them, open "
     "connections keep theirs; a file that does not load changes nothing.",
     0, 0, cmd_admin, WIRE_COP_RELOADTLS},
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

/* One poll of a snapshot's progress: its NETSTATS line ("Snapshot TAG:
 * running for ...", then "... done: ..." or "... failed: ..."); when it is
 * over, done_line and *code. A line gone means another snapshot started
 * since ours ended (NETSTATS shows the last one only): over, result
 * unknown here. */
static void snapshot_poll(char *line,
                          size_t cap,
                          char *done_line,
                          size_t done_cap,
                          int *code,
                          const char *prefix,
                          struct rk_slice t)
{
    size_t pl = strlen(prefix);
    stats_line(line, cap, t, prefix);
    if (!line[0]) {
        snprintf(done_line, done_cap,
                 "%s over, result not known (another snapshot has started "
                 "since): `ringkv listsnapshots` shows it",
                 prefix);
        *code = EXIT_OTHER;
        return;
    }
    bool failed = strncmp(line + pl, " failed", 7) == 0;
    if (failed || strncmp(line + pl, " done", 5) == 0) {
        snprintf(done_line, done_cap, "%s", line);
        *code = failed ? EXIT_OTHER : EXIT_OK;
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
        } else if (a->snap[0]) {
            snapshot_poll(line, sizeof(line), done_line, sizeof(done_line),
                          &code, a->snap, t);
        } else if (strcmp(a->cmd, "repair") == 0) {
            stats_line(line, sizeof(line), t, "Repair:");
            bool failed = strncmp(line, "Repair: done with failures", 26) == 0;
            if (strncmp(line, "Repair: done", 12) == 0) {
                snprintf(done_line, sizeof(done_line), "%s", line);
                code = failed ? EXIT_OTHER : EXIT_OK;
            }
        } else if (strcmp(a->cmd, "rebuild") == 0) {
            stats_line(line, sizeof(line), t, "Receiving");
            stats_line(done_line, sizeof(done_line), t, "Rebuilt from");
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
        cli_json_cstr(stdout, started);
        printf(",\"done\":");
        cli_json_cstr(stdout, done_line);
        if (ws.seen[0]) {
            printf(",\"stalled\":");
            cli_json_cstr(stdout, ws.seen);
        }
        printf("}\n");
    } else {
        printf("%s\n", done_line);
    }
    return code;
}

/* The "Snapshot TAG:" a SNAPSHOT's answer begins with ("Snapshot TAG:
 * started ..."; the node names TAG, its default one too), into a->snap:
 * the prefix of its NETSTATS line. */
static int snapshot_prefix(struct cli *a, const char *started)
{
    const char *colon = strchr(started, ':');
    if (strncmp(started, "Snapshot ", 9) != 0 || !colon ||
        (size_t)(colon - started) + 1 >= sizeof(a->snap)) {
        fprintf(stderr, "ringkv snapshot: unexpected answer: %s\n", started);
        return EXIT_OTHER;
    }
    snprintf(a->snap, sizeof(a->snap), "%.*s", (int)(colon - started + 1),
             started);
    return EXIT_OK;
}

/* Send op, print its answer (the operation started) and follow it to its
 * end (wait_done). */
static int start_and_wait(struct cli *a, ringkv *c, uint32_t op)
{
    struct wire_cresp r;
    int code = text_call(a, c, op, &r);
    if (code != EXIT_OK)
        return code;
    char *started = strndup(r.text.p ? (const char *)r.text.p : "", r.text.len);
    wire_cresp_clear(&r);
    if (!started)
        return EXIT_OTHER;
    if (op == WIRE_COP_SNAPSHOT)
        code = snapshot_prefix(a, started);
    if (code == EXIT_OK && !a->json) {
        printf("%s\n", started);
        fflush(stdout);
    }
    if (code == EXIT_OK)
        code = wait_done(a, c, started);
    free(started);
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
    return a->wait ? start_and_wait(a, c, cmd->op) : cmd_text(a, c, cmd->op);
}

/* replication: each node's setting; replication set SETTING: a new one. */
static int cmd_replication(struct cli *a, ringkv *c)
{
    if (a->npos == 0)
        return cmd_text(a, c, WIRE_COP_REPLICATION);
    if (a->npos != 2 || strcmp(a->pos[0], "set") != 0) {
        fprintf(stderr, "ringkv replication: give no argument, or `set "
                        "SETTING` (e.g. set dc1:3,dc2:3)\n");
        return EXIT_USAGE;
    }
    a->pos++;
    a->npos--;
    return cmd_text(a, c, WIRE_COP_REPLICATION_SET);
}

/* rebuild --from DC: the data centre goes as the op's argument. */
static int cmd_rebuild(struct cli *a, ringkv *c)
{
    static const char *dc[1];
    if (!a->from || !a->from[0]) {
        fprintf(stderr, "ringkv rebuild: say which data centre to stream "
                        "from: --from DC\n");
        return EXIT_USAGE;
    }
    dc[0] = a->from;
    a->pos = dc;
    a->npos = 1;
    return a->wait ? start_and_wait(a, c, WIRE_COP_REBUILD)
                   : cmd_text(a, c, WIRE_COP_REBUILD);
}

/* A snapshot is always followed to its end: it is not done until its
 * files are. */
static int cmd_snapshot(struct cli *a, ringkv *c)
{
    return start_and_wait(a, c, WIRE_COP_SNAPSHOT);
}

/* clearsnapshot TAG, or --all (sent as the argument "--all", which no tag
 * can be: tags do not start with '-'). */
static int cmd_clearsnapshot(struct cli *a, ringkv *c)
{
    static const char *all[] = {"--all"};
    if (a->all == (a->npos == 1)) {
        fprintf(stderr, "ringkv clearsnapshot: give a TAG or --all\n");
        return EXIT_USAGE;
    }
    if (a->all) {
        a->pos = all;
        a->npos = 1;
    }
    return cmd_text(a, c, WIRE_COP_CLEARSNAPSHOT);
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
    "      --password-file FILE the password from FILE (its content less\n"
    "                           a trailing newline), or $RINGKV_PASSWORD_FILE\n"
    "  -u, --user USER          default (data role) or admin (admin\n"
    "                           commands), or $RINGKV_USER; needs -a\n"
    "  -t, --timeout SECONDS    per request (default 5; decimals allowed)\n"
    "      --ttl SECONDS        put: expire the value\n"
    "      --json               one JSON object on stdout\n"
    "      --from DC            rebuild: the data centre to stream from\n"
    "      --wait               decommission, removenode, cleanup, repair,\n"
    "                           rebuild:\n"
    "                           follow the progress until it is over (a\n"
    "                           warning on stderr when it stalls; snapshot\n"
    "                           always does)\n"
    "      --all                clearsnapshot: every snapshot of the node\n"
    "      --metrics-port PORT  health: the node's metrics port (default\n"
    "                           9180)\n"
    "      --tls                TLS to the client port (client_tls:\n"
    "                           required), the node's certificate verified\n"
    "      --cacert FILE        the CA (PEM) that signed the nodes'\n"
    "                           certificates (default: the system's); --tls\n"
    "      --tls-name NAME      the name their certificates must carry\n"
    "                           (default: the host given; \"\": any); --tls\n"
    "      --no-token-aware     get, put, del, mget: ask the node of -h (or\n"
    "                           the next host) instead of a replica of the\n"
    "                           key\n"
    "      --help               this help, or a command's\n"
    "  --                       end of options (keys that start with '-')\n"
    "Exit codes: 0 ok, 1 not found, 2 usage, 3 cannot connect, 4 auth,\n"
    "  5 cluster could not serve (UNAVAILABLE, TIMEOUT, OVERLOADED,\n"
    "  RING_STALE), 6 rejected (BAD_REQUEST, TOO_LARGE), 7 not implemented,\n"
    "  8 other, 9 no permission (NOPERM: an admin command as a data user).\n";

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

/* The password from --password-file, or from $RINGKV_PASSWORD_FILE when
 * no other gives one: the file's content less one trailing newline, in
 * *buf (the caller frees it). -a and --password-file together are a usage
 * error, and so is a file that cannot be read or is empty. */
static int password_from_file(struct cli *a, bool pw_flag, char **buf)
{
    const char *path = a->password_file;
    if (path && pw_flag)
        return usage_error("%s", "-a/--password and --password-file both "
                                 "given: give one");
    if (!path && !(a->password && a->password[0]))
        path = getenv("RINGKV_PASSWORD_FILE");
    if (!path || !path[0])
        return EXIT_OK;
    size_t len = 0;
    int rc = rk_read_file(path, 4097, buf, &len);
    if (rc == 0 && len > 0 && (*buf)[len - 1] == '\n')
        (*buf)[--len] = '\0';
    if (rc == 0 && len > 0 && (*buf)[len - 1] == '\r')
        (*buf)[--len] = '\0';
    if (rc == 0 && len == 0)
        rc = -ENODATA;
    if (rc < 0) {
        fprintf(stderr, "ringkv: password file %s: %s\n", path,
                rc == -ENODATA ? "empty" : rk_strerror(rc));
        return EXIT_USAGE;
    }
    a->password = *buf;
    return EXIT_OK;
}

int main(int argc, char **argv)
{
    struct cli a = {.hosts = getenv("RINGKV_HOST"),
                    .password = getenv("RINGKV_PASSWORD"),
                    .user = getenv("RINGKV_USER"),
                    .timeout_s = 5,
                    .metrics_port = 9180};
    const char **pos = calloc((size_t)argc + 1, sizeof(*pos));
    int npos = 0, help = 0;
    bool ttl_given = false, opts_done = false, pw_flag = false;
    char *pw_read = NULL; /* the password file's content */
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
        if (strcmp(s, "--all") == 0) {
            a.all = true;
            continue;
        }
        if (strcmp(s, "--tls") == 0) {
            a.tls = true;
            continue;
        }
        if (strcmp(s, "--no-token-aware") == 0) {
            a.no_token_aware = true;
            continue;
        }
        if (strcmp(s, "--help") == 0 || strcmp(s, "-?") == 0) {
            help = 1;
            continue;
        }
        /* options with a value: "--opt V" or "--opt=V" */
        static const char *const withval[] = {"-h",
                                              "--host",
                                              "-c",
                                              "--consistency",
                                              "-a",
                                              "--password",
                                              "-t",
                                              "--timeout",
                                              "--ttl",
                                              "-u",
                                              "--user",
                                              "--password-file",
                                              "--metrics-port",
                                              "--cacert",
                                              "--tls-name",
                                              "--from"};
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
            pw_flag = true;
        } else if (!strcmp(name, "--password-file")) {
            a.password_file = val;
        } else if (!strcmp(name, "-u") || !strcmp(name, "--user")) {
            a.user = val;
        } else if (!strcmp(name, "-t") || !strcmp(name, "--timeout")) {
            char *end;
            a.timeout_s = strtod(val, &end);
            if (end == val || *end || !(a.timeout_s > 0) ||
                a.timeout_s > 86400) {
                free(pos);
                return usage_error("bad --timeout %s (seconds, > 0)", val);
            }
        } else if (!strcmp(name, "--cacert")) {
            a.cacert = val;
        } else if (!strcmp(name, "--tls-name")) {
            a.tls_name = val;
        } else if (!strcmp(name, "--from")) {
            a.from = val;
        } else if (!strcmp(name, "--metrics-port")) {
            if (parse_u32(&a.metrics_port, val, 65535) != 0 ||
                a.metrics_port == 0) {
                free(pos);
                return usage_error("bad --metrics-port %s (1..65535)", val);
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
    if (a.all && cmd->run != cmd_clearsnapshot) {
        code = usage_error("--all applies to clearsnapshot only, not %s",
                           cmd->name);
        goto out;
    }
    if (a.wait && strcmp(cmd->name, "decommission") != 0 &&
        strcmp(cmd->name, "removenode") != 0 &&
        strcmp(cmd->name, "cleanup") != 0 && strcmp(cmd->name, "repair") != 0 &&
        strcmp(cmd->name, "rebuild") != 0) {
        code = usage_error("--wait applies to decommission, removenode, "
                           "cleanup, repair and rebuild, not %s",
                           cmd->name);
        goto out;
    }
    if (a.from && cmd->run != cmd_rebuild) {
        code = usage_error("--from applies to rebuild only, not %s", cmd->name);
        goto out;
    }
    code = password_from_file(&a, pw_flag, &pw_read);
    if (code != EXIT_OK)
        goto out;
    struct ringkv_opts o = RINGKV_OPTS_INIT;
    o.hosts = a.hosts;
    o.password = a.password && a.password[0] ? a.password : NULL;
    o.user = a.user && a.user[0] ? a.user : NULL;
    o.client_name = "ringkv-cli";
    o.consistency = a.cl;
    o.timeout_ms = (int)ceil(a.timeout_s * 1000);
    o.connect_timeout_ms = o.timeout_ms < 2000 ? o.timeout_ms : 2000;
    o.tls = a.tls || a.cacert || a.tls_name;
    o.tls_ca_file = a.cacert;
    o.tls_verify_name = a.tls_name;
    o.token_aware = !a.no_token_aware;
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
    free(pw_read);
    fflush(stdout);
    return code;
}
