/*
 * config.c - parse and validate ringkvd's configuration.
 *
 * One table lists every key with its type and bounds; node_config_set() is
 * the single place a value is parsed, so the YAML file, the environment and
 * the flags cannot disagree about what a key accepts.
 */
#include "node/config.h"

#include <ctype.h>
#include <errno.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include <sodium.h>
#include <yaml.h>

#include "common/rk.h"
#include "net/tls.h"
#include "node/tls.h"
#include "node/users.h"

/* ---- the key table ---------------------------------------------------- */

enum ktype {
    K_STR,
    K_PORT,
    K_INT,
    K_I64,
    K_DBL,
    K_BOOL,
    K_CL,
    K_ENUM, /* one of `names`, stored as its index */
    K_SEEDS,
    K_REPL
};

struct key {
    const char *name;
    enum ktype type;
    size_t off;
    size_t size; /* K_STR: buffer size */
    double min, max;
    int empty_ok;             /* K_STR */
    const char *const *names; /* K_ENUM: NULL-terminated, index = value */
};

/* The names of the K_ENUM settings, in the order of their enums' values.
 * K_ENUM stores an int: the enums must be int-sized. */
_Static_assert(sizeof(enum node_alloc) == sizeof(int) &&
                   sizeof(enum node_durability) == sizeof(int) &&
                   sizeof(enum node_cpu_sched) == sizeof(int) &&
                   sizeof(enum node_log_level) == sizeof(int) &&
                   sizeof(enum node_client_tls) == sizeof(int) &&
                   sizeof(enum node_internode_tls) == sizeof(int),
               "K_ENUM fields are stored as int");
static const char *const alloc_names[] = {"balanced", "random", NULL};
static const char *const durability_names[] = {"group", "periodic", NULL};
static const char *const sched_names[] = {"batch", "normal", NULL};
static const char *const client_tls_names[] = {"off", "required", NULL};
static const char *const internode_tls_names[] = {"off", "required", NULL};
static const char *const loglevel_names[] = {"debug", "info", "warn", "error",
                                             NULL};

#define OFF(f) offsetof(struct node_config, f)
#define SZ(f)  sizeof(((struct node_config *)0)->f)

static const struct key keys[] = {
    {"cluster_name", K_STR, OFF(cluster_name), SZ(cluster_name), 0, 0, 0, NULL},
    {"cluster_secret_file", K_STR, OFF(cluster_secret_file),
     SZ(cluster_secret_file), 0, 0, 1, NULL},
    {"node_name", K_STR, OFF(node_name), SZ(node_name), 0, 0, 1, NULL},
    {"datacenter", K_STR, OFF(datacenter), SZ(datacenter), 0, 0, 0, NULL},
    {"rack", K_STR, OFF(rack), SZ(rack), 0, 0, 0, NULL},
    {"listen_address", K_STR, OFF(listen_address), SZ(listen_address), 0, 0, 0,
     NULL},
    {"advertise_address", K_STR, OFF(advertise_address), SZ(advertise_address),
     0, 0, 1, NULL},
    {"seeds", K_SEEDS, 0, 0, 0, 0, 1, NULL},
    {"gossip_port", K_PORT, OFF(gossip_port), 0, 1, 65535, 0, NULL},
    {"internode_port", K_PORT, OFF(internode_port), 0, 1, 65535, 0, NULL},
    {"client_port", K_PORT, OFF(client_port), 0, 1, 65535, 0, NULL},
    {"resp_port", K_PORT, OFF(resp_port), 0, 0, 65535, 0, NULL},
    {"tls_port", K_PORT, OFF(tls_port), 0, 0, 65535, 0, NULL},
    {"tls_cert_file", K_STR, OFF(tls_cert_file), SZ(tls_cert_file), 0, 0, 1,
     NULL},
    {"tls_key_file", K_STR, OFF(tls_key_file), SZ(tls_key_file), 0, 0, 1, NULL},
    {"client_tls", K_ENUM, OFF(client_tls), 0, 0, 0, 0, client_tls_names},
    {"tls_ca_file", K_STR, OFF(tls_ca_file), SZ(tls_ca_file), 0, 0, 1, NULL},
    {"internode_tls", K_ENUM, OFF(internode_tls), 0, 0, 0, 0,
     internode_tls_names},
    {"metrics_port", K_PORT, OFF(metrics_port), 0, 0, 65535, 0, NULL},
    {"metrics_tls", K_ENUM, OFF(metrics_tls), 0, 0, 0, 0, client_tls_names},
    {"metrics_address", K_STR, OFF(metrics_address), SZ(metrics_address), 0, 0,
     1, NULL},
    {"data_dir", K_STR, OFF(data_dir), SZ(data_dir), 0, 0, 0, NULL},
    /* at most what gossip can announce (GOSSIP_MAX_TOKENS): until
     * 2026-12-06 it took 1024, and a node of more than 512 never joined */
    {"num_tokens", K_INT, OFF(num_tokens), 0, 1, 512, 0, NULL},
    {"token_allocation", K_ENUM, OFF(token_allocation), 0, 0, 0, 0,
     alloc_names},
    {"weight", K_DBL, OFF(weight), 0, 0.01, 100, 0, NULL},
    {"replication", K_REPL, 0, 0, 0, 0, 0, NULL},
    {"default_consistency", K_CL, OFF(default_consistency), 0, 0, 0, 0, NULL},
    {"auto_bootstrap", K_BOOL, OFF(auto_bootstrap), 0, 0, 0, 0, NULL},
    {"join_ring", K_BOOL, OFF(join_ring), 0, 0, 0, 0, NULL},
    {"replace", K_STR, OFF(replace), SZ(replace), 0, 0, 1, NULL},
    {"durability", K_ENUM, OFF(durability), 0, 0, 0, 0, durability_names},
    {"cpu_scheduling", K_ENUM, OFF(cpu_scheduling), 0, 0, 0, 0, sched_names},
    {"periodic_sync_ms", K_INT, OFF(periodic_sync_ms), 0, 1, 600000, 0, NULL},
    {"read_timeout_ms", K_INT, OFF(read_timeout_ms), 0, 1, 3600000, 0, NULL},
    {"write_timeout_ms", K_INT, OFF(write_timeout_ms), 0, 1, 3600000, 0, NULL},
    {"connect_timeout_ms", K_INT, OFF(connect_timeout_ms), 0, 1, 600000, 0,
     NULL},
    {"gossip_interval_ms", K_INT, OFF(gossip_interval_ms), 0, 10, 60000, 0,
     NULL},
    {"ring_delay_ms", K_INT, OFF(ring_delay_ms), 0, 0, 600000, 0, NULL},
    {"phi_convict_threshold", K_DBL, OFF(phi_convict_threshold), 0, 1, 100, 0,
     NULL},
    {"failure_probes", K_BOOL, OFF(failure_probes), 0, 0, 0, 0, NULL},
    {"suspicion_timeout_ms", K_INT, OFF(suspicion_timeout_ms), 0, 0, 3600000, 0,
     NULL},
    {"hinted_handoff", K_BOOL, OFF(hinted_handoff), 0, 0, 0, 0, NULL},
    {"log_direct_io", K_BOOL, OFF(log_direct_io), 0, 0, 0, 0, NULL},
    {"max_hint_window_ms", K_I64, OFF(max_hint_window_ms), 0, 0,
     30.0 * 86400 * 1000, 0, NULL},
    {"max_clock_drift_ms", K_INT, OFF(max_clock_drift_ms), 0, 0, 86400000, 0,
     NULL},
    {"gc_grace_seconds", K_I64, OFF(gc_grace_seconds), 0, 0, 365.0 * 86400, 0,
     NULL},
    {"memtable_mb", K_INT, OFF(memtable_mb), 0, 1, 65536, 0, NULL},
    {"read_cache_mb", K_INT, OFF(read_cache_mb), 0, 0, 1048576, 0, NULL},
    {"disk_reserve_mb", K_INT, OFF(disk_reserve_mb), 0, 0, 1048576, 0, NULL},
    {"stream_throughput_mb", K_INT, OFF(stream_throughput_mb), 0, 0, 1000000, 0,
     NULL},
    {"stream_max_ranges", K_INT, OFF(stream_max_ranges), 0, 1, 256, 0, NULL},
    {"stream_donor_max_ranges", K_INT, OFF(stream_donor_max_ranges), 0, 1, 4, 0,
     NULL},
    {"stall_warning_s", K_INT, OFF(stall_warning_s), 0, 1, 86400, 0, NULL},
    {"auto_compact_pct", K_INT, OFF(auto_compact_pct), 0, -1, 1000000, 0, NULL},
    {"auto_cleanup_s", K_INT, OFF(auto_cleanup_s), 0, 0, 30 * 86400, 0, NULL},
    {"repair_after_join", K_BOOL, OFF(repair_after_join), 0, 0, 0, 0, NULL},
    {"repair_interval_s", K_I64, OFF(repair_interval_s), 0, 0, 365.0 * 86400, 0,
     NULL},
    {"purge_interval_s", K_I64, OFF(purge_interval_s), 0, 0, 365.0 * 86400, 0,
     NULL},
    {"max_inflight", K_INT, OFF(max_inflight), 0, 1, 10000000, 0, NULL},
    {"max_pipeline", K_INT, OFF(max_pipeline), 0, 1, 1000000, 0, NULL},
    {"max_clients", K_INT, OFF(max_clients), 0, 1, 1000000, 0, NULL},
    {"max_input_buffer_mb", K_INT, OFF(max_input_buffer_mb), 0, 1, 1048576, 0,
     NULL},
    {"client_frame_timeout_s", K_INT, OFF(client_frame_timeout_s), 0, 1, 86400,
     0, NULL},
    {"requirepass", K_STR, OFF(requirepass), SZ(requirepass), 0, 0, 1, NULL},
    {"requirepass_file", K_STR, OFF(requirepass_file), SZ(requirepass_file), 0,
     0, 1, NULL},
    {"admin_password", K_STR, OFF(admin_password), SZ(admin_password), 0, 0, 1,
     NULL},
    {"admin_password_file", K_STR, OFF(admin_password_file),
     SZ(admin_password_file), 0, 0, 1, NULL},
    {"metrics_password", K_STR, OFF(metrics_password), SZ(metrics_password), 0,
     0, 1, NULL},
    {"metrics_password_file", K_STR, OFF(metrics_password_file),
     SZ(metrics_password_file), 0, 0, 1, NULL},
    {"auth_fail_delay_max_ms", K_INT, OFF(auth_fail_delay_max_ms), 0, 0, 600000,
     0, NULL},
    {"log_level", K_ENUM, OFF(log_level), 0, 0, 0, 0, loglevel_names},
    {"log_file", K_STR, OFF(log_file), SZ(log_file), 0, 0, 1, NULL},
};

#define NKEYS (sizeof(keys) / sizeof(keys[0]))

static const char *cl_names[] = {
    NULL,  "ONE",       "TWO",          "QUORUM",
    "ALL", "LOCAL_ONE", "LOCAL_QUORUM", "EACH_QUORUM",
};

/* ---- small helpers ---------------------------------------------------- */

static int fail(char *err, size_t errlen, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));

static int fail(char *err, size_t errlen, const char *fmt, ...)
{
    if (err && errlen) {
        va_list ap;
        va_start(ap, fmt);
        vsnprintf(err, errlen, fmt, ap);
        va_end(ap);
    }
    return RK_ECONFIG;
}

/* Normalise a key: lower case, '-' -> '_'. Returns 0, or -1 if too long. */
static int key_norm(char *out, size_t outlen, const char *in, size_t inlen)
{
    if (inlen + 1 > outlen)
        return -1;
    for (size_t i = 0; i < inlen; i++) {
        char ch = (char)tolower((unsigned char)in[i]);
        out[i] = ch == '-' ? '_' : ch;
    }
    out[inlen] = '\0';
    return 0;
}

static const struct key *key_find(const char *name)
{
    for (size_t i = 0; i < NKEYS; i++)
        if (strcmp(keys[i].name, name) == 0)
            return &keys[i];
    return NULL;
}

/* Copy `s` trimmed of surrounding blanks into out (size n). */
static int trim_copy(char *out, size_t n, const char *s, size_t len)
{
    while (len && isspace((unsigned char)*s))
        s++, len--;
    while (len && isspace((unsigned char)s[len - 1]))
        len--;
    if (len + 1 > n)
        return -1;
    memcpy(out, s, len);
    out[len] = '\0';
    return 0;
}

static int parse_ll(long long *out, const char *v)
{
    char *end;
    errno = 0;
    long long x = strtoll(v, &end, 10);
    if (errno || end == v)
        return -1;
    while (isspace((unsigned char)*end))
        end++;
    if (*end)
        return -1;
    *out = x;
    return 0;
}

static int parse_dbl(double *out, const char *v)
{
    char *end;
    errno = 0;
    double x = strtod(v, &end);
    if (errno || end == v || !isfinite(x))
        return -1;
    while (isspace((unsigned char)*end))
        end++;
    if (*end)
        return -1;
    *out = x;
    return 0;
}

static int parse_bool(int *out, const char *v)
{
    static const char *yes[] = {"true", "yes", "on", "1"};
    static const char *no[] = {"false", "no", "off", "0"};
    for (size_t i = 0; i < 4; i++) {
        if (strcasecmp(v, yes[i]) == 0) {
            *out = 1;
            return 0;
        }
        if (strcasecmp(v, no[i]) == 0) {
            *out = 0;
            return 0;
        }
    }
    return -1;
}

const char *node_cl_name(enum coord_cl cl)
{
    if (cl < COORD_CL_ONE || cl > COORD_CL_EACH_QUORUM)
        return "?";
    return cl_names[cl];
}

int node_cl_parse(enum coord_cl *out, const char *s)
{
    for (int i = COORD_CL_ONE; i <= COORD_CL_EACH_QUORUM; i++) {
        if (strcasecmp(s, cl_names[i]) == 0) {
            *out = (enum coord_cl)i;
            return 0;
        }
    }
    return RK_EBADREQ;
}

/* A host name or address: letters, digits, '.', '-', '_', ':' (IPv6). */
static int host_ok(const char *h)
{
    if (!*h)
        return 0;
    for (; *h; h++)
        if (!isalnum((unsigned char)*h) && !strchr(".-_:", *h))
            return 0;
    return 1;
}

static int
set_seeds(struct node_config *c, const char *v, char *err, size_t errlen)
{
    int n = 0;
    const char *p = v;
    while (*p) {
        const char *comma = strchr(p, ',');
        size_t len = comma ? (size_t)(comma - p) : strlen(p);
        char item[NODE_CONFIG_STR];
        if (trim_copy(item, sizeof(item), p, len) < 0)
            return fail(err, errlen, "seeds: entry too long");
        if (item[0]) {
            if (n == NODE_CONFIG_MAX_SEEDS)
                return fail(err, errlen, "seeds: more than %d seeds",
                            NODE_CONFIG_MAX_SEEDS);
            char host[NODE_CONFIG_STR];
            snprintf(host, sizeof(host), "%s", item);
            char *colon = strrchr(host, ':');
            if (colon && strchr(host, ':') == colon) {
                long long port;
                if (parse_ll(&port, colon + 1) < 0 || port < 1 || port > 65535)
                    return fail(err, errlen,
                                "seeds: bad port in '%s' (want host[:port])",
                                item);
                *colon = '\0';
            }
            if (!host_ok(host))
                return fail(err, errlen,
                            "seeds: '%s' is not a host name or address", item);
            memcpy(c->seeds[n], item, sizeof(item));
            n++;
        }
        if (!comma)
            break;
        p = comma + 1;
    }
    c->nseeds = n;
    return 0;
}

/* Check one data centre's replication entry (name as given, rf as text) and
 * append it to dcs[*n]. The string form and the YAML mapping both end here,
 * so they accept the same names and factors. */
static int repl_add(struct node_config_dc *dcs,
                    int *n,
                    const char *name_in,
                    const char *rf_s,
                    char *err,
                    size_t errlen)
{
    char name[sizeof(dcs[0].name)];
    long long rf;
    if (trim_copy(name, sizeof(name), name_in, strlen(name_in)) < 0 || !name[0])
        return fail(err, errlen,
                    "replication: bad data centre name '%s' (1..%zu bytes)",
                    name_in, sizeof(name) - 1);
    if (parse_ll(&rf, rf_s) < 0 || rf < 1 || rf > 15)
        return fail(err, errlen, "replication: RF for '%s' must be in 1..15",
                    name);
    if (*n == NODE_CONFIG_MAX_DCS)
        return fail(err, errlen, "replication: more than %d data centres",
                    NODE_CONFIG_MAX_DCS);
    for (int i = 0; i < *n; i++)
        if (strcmp(dcs[i].name, name) == 0)
            return fail(err, errlen,
                        "replication: data centre '%s' given twice", name);
    memcpy(dcs[*n].name, name, sizeof(name));
    dcs[*n].rf = (int)rf;
    (*n)++;
    return 0;
}

static int repl_commit(struct node_config *c,
                       const struct node_config_dc *dcs,
                       int n,
                       char *err,
                       size_t errlen)
{
    if (n == 0)
        return fail(err, errlen, "replication: empty (want dc1:3 or 3)");
    /* '*' is how a bare number is held (SimpleStrategy): as a name beside
     * others it would match every data centre */
    for (int i = 0; n > 1 && i < n; i++)
        if (strcmp(dcs[i].name, "*") == 0)
            return fail(err, errlen,
                        "replication: '*' (every data centre) cannot be "
                        "mixed with named data centres");
    c->ndcs = n;
    memcpy(c->replication, dcs, sizeof(dcs[0]) * (size_t)n);
    return 0;
}

/* "3" (that RF everywhere) or "dc1:3,dc2:2". Each item splits at its last
 * ':' (an RF never holds one), so "us:east:3" names the data centre
 * "us:east". */
static int
set_repl(struct node_config *c, const char *v, char *err, size_t errlen)
{
    struct node_config_dc dcs[NODE_CONFIG_MAX_DCS];
    int n = 0;
    long long rf;
    char item[NODE_CONFIG_STR];

    if (trim_copy(item, sizeof(item), v, strlen(v)) < 0)
        return fail(err, errlen, "replication: value too long");
    if (parse_ll(&rf, item) == 0) {
        /* a bare number: that RF for this node's data centre */
        if (rf < 1 || rf > 15)
            return fail(err, errlen,
                        "replication: RF must be in 1..15, got '%s'", item);
        c->ndcs = 1;
        c->replication[0].rf = (int)rf;
        snprintf(c->replication[0].name, sizeof(c->replication[0].name), "*");
        return 0;
    }
    const char *p = v;
    while (*p) {
        const char *comma = strchr(p, ',');
        size_t len = comma ? (size_t)(comma - p) : strlen(p);
        if (trim_copy(item, sizeof(item), p, len) < 0)
            return fail(err, errlen, "replication: entry too long");
        if (item[0]) {
            char *colon = strrchr(item, ':');
            if (!colon)
                return fail(err, errlen,
                            "replication: '%s' is not dc:rf (e.g. dc1:3)",
                            item);
            *colon = '\0';
            int rc = repl_add(dcs, &n, item, colon + 1, err, errlen);
            if (rc < 0)
                return rc;
        }
        if (!comma)
            break;
        p = comma + 1;
    }
    return repl_commit(c, dcs, n, err, errlen);
}

/* ---- public: one key -------------------------------------------------- */

int node_config_set(struct node_config *c,
                    const char *key,
                    const char *value,
                    char *err,
                    size_t errlen)
{
    char name[64];
    if (key_norm(name, sizeof(name), key, strlen(key)) < 0 || !key_find(name))
        return fail(err, errlen, "%s: unknown configuration key", key);
    const struct key *k = key_find(name);
    char *field = (char *)c + k->off;
    long long ll;
    double d;
    int b;

    switch (k->type) {
    case K_STR: {
        char tmp[NODE_CONFIG_STR];
        if (trim_copy(tmp, sizeof(tmp), value, strlen(value)) < 0 ||
            strlen(tmp) + 1 > k->size)
            return fail(err, errlen, "%s: value longer than %zu bytes", k->name,
                        k->size - 1);
        if (!tmp[0] && !k->empty_ok)
            return fail(err, errlen, "%s: may not be empty", k->name);
        memcpy(field, tmp, strlen(tmp) + 1);
        return 0;
    }
    case K_PORT:
    case K_INT:
        if (parse_ll(&ll, value) < 0 || ll < k->min || ll > k->max)
            return fail(err, errlen,
                        "%s: expected an integer in %.0f..%.0f, got '%s'",
                        k->name, k->min, k->max, value);
        *(int *)field = (int)ll;
        return 0;
    case K_I64:
        if (parse_ll(&ll, value) < 0 || ll < k->min || ll > k->max)
            return fail(err, errlen,
                        "%s: expected an integer in %.0f..%.0f, got '%s'",
                        k->name, k->min, k->max, value);
        *(int64_t *)field = ll;
        return 0;
    case K_DBL:
        if (parse_dbl(&d, value) < 0 || d < k->min || d > k->max)
            return fail(err, errlen,
                        "%s: expected a number in %g..%g, got '%s'", k->name,
                        k->min, k->max, value);
        *(double *)field = d;
        return 0;
    case K_BOOL:
        if (parse_bool(&b, value) < 0)
            return fail(err, errlen, "%s: expected true or false, got '%s'",
                        k->name, value);
        *(int *)field = b;
        return 0;
    case K_CL: {
        enum coord_cl cl;
        if (node_cl_parse(&cl, value) < 0)
            return fail(err, errlen,
                        "%s: expected one of ONE, TWO, QUORUM, ALL, "
                        "LOCAL_ONE, LOCAL_QUORUM, EACH_QUORUM, got '%s'",
                        k->name, value);
        *(enum coord_cl *)field = cl;
        return 0;
    }
    case K_ENUM: {
        for (int i = 0; k->names[i]; i++) {
            if (strcasecmp(value, k->names[i]) == 0) {
                *(int *)field = i; /* the config's enums are int-sized */
                return 0;
            }
        }
        char list[128]; /* "a, b or c": the names are short */
        size_t len = 0;
        list[0] = '\0';
        for (int i = 0; k->names[i] && len < sizeof(list); i++)
            len += (size_t)snprintf(list + len, sizeof(list) - len, "%s%s",
                                    i == 0            ? ""
                                    : k->names[i + 1] ? ", "
                                                      : " or ",
                                    k->names[i]);
        return fail(err, errlen, "%s: expected %s, got '%s'", k->name, list,
                    value);
    }
    case K_SEEDS:
        return set_seeds(c, value, err, errlen);
    case K_REPL:
        return set_repl(c, value, err, errlen);
    }
    return fail(err, errlen, "%s: internal error", k->name);
}

/* ---- YAML ------------------------------------------------------------- */

/* Join a sequence or a flat mapping node into "a,b" / "k:v,k:v". */
static int yaml_flatten(yaml_document_t *doc,
                        yaml_node_t *n,
                        const char *key,
                        char *out,
                        size_t outlen,
                        char *err,
                        size_t errlen)
{
    size_t used = 0;
    out[0] = '\0';
    if (n->type == YAML_SEQUENCE_NODE) {
        for (yaml_node_item_t *it = n->data.sequence.items.start;
             it < n->data.sequence.items.top; it++) {
            yaml_node_t *v = yaml_document_get_node(doc, *it);
            if (!v || v->type != YAML_SCALAR_NODE)
                return fail(err, errlen, "%s: list items must be plain values",
                            key);
            int w = snprintf(out + used, outlen - used, "%s%s", used ? "," : "",
                             (char *)v->data.scalar.value);
            if (w < 0 || (size_t)w >= outlen - used)
                return fail(err, errlen, "%s: list too long", key);
            used += (size_t)w;
        }
        return 0;
    }
    if (n->type == YAML_MAPPING_NODE) {
        for (yaml_node_pair_t *pr = n->data.mapping.pairs.start;
             pr < n->data.mapping.pairs.top; pr++) {
            yaml_node_t *k = yaml_document_get_node(doc, pr->key);
            yaml_node_t *v = yaml_document_get_node(doc, pr->value);
            if (!k || !v || k->type != YAML_SCALAR_NODE ||
                v->type != YAML_SCALAR_NODE)
                return fail(err, errlen,
                            "%s: map entries must be plain key: value", key);
            int w = snprintf(out + used, outlen - used, "%s%s:%s",
                             used ? "," : "", (char *)k->data.scalar.value,
                             (char *)v->data.scalar.value);
            if (w < 0 || (size_t)w >= outlen - used)
                return fail(err, errlen, "%s: map too long", key);
            used += (size_t)w;
        }
        return 0;
    }
    return fail(err, errlen, "%s: unexpected value type", key);
}

/* replication as a YAML mapping: each key a data centre, each value its RF. */
static int yaml_repl(struct node_config *c,
                     yaml_document_t *doc,
                     yaml_node_t *map,
                     char *err,
                     size_t errlen)
{
    struct node_config_dc dcs[NODE_CONFIG_MAX_DCS];
    int n = 0;
    for (yaml_node_pair_t *pr = map->data.mapping.pairs.start;
         pr < map->data.mapping.pairs.top; pr++) {
        yaml_node_t *k = yaml_document_get_node(doc, pr->key);
        yaml_node_t *v = yaml_document_get_node(doc, pr->value);
        if (!k || !v || k->type != YAML_SCALAR_NODE ||
            v->type != YAML_SCALAR_NODE)
            return fail(err, errlen,
                        "replication: map entries must be plain dc: rf");
        int rc = repl_add(dcs, &n, (const char *)k->data.scalar.value,
                          (const char *)v->data.scalar.value, err, errlen);
        if (rc < 0)
            return rc;
    }
    return repl_commit(c, dcs, n, err, errlen);
}

int node_config_parse_yaml(struct node_config *c,
                           const char *text,
                           size_t len,
                           const char *origin,
                           char *err,
                           size_t errlen)
{
    yaml_parser_t parser;
    yaml_document_t doc;
    int rc = 0;
    char *flat = NULL;
    char sub[NODE_CONFIG_ERR];

    if (!origin)
        origin = "config";
    if (!yaml_parser_initialize(&parser))
        return -ENOMEM;
    yaml_parser_set_input_string(&parser, (const unsigned char *)text, len);
    if (!yaml_parser_load(&parser, &doc)) {
        rc = fail(err, errlen, "%s:%zu:%zu: YAML error: %s", origin,
                  parser.problem_mark.line + 1, parser.problem_mark.column + 1,
                  parser.problem ? parser.problem : "unknown");
        goto out_parser;
    }
    yaml_node_t *root = yaml_document_get_root_node(&doc);
    if (!root)
        goto out_doc; /* empty file: nothing to set */
    if (root->type != YAML_MAPPING_NODE) {
        rc = fail(err, errlen, "%s: top level must be a mapping of keys",
                  origin);
        goto out_doc;
    }
    flat = malloc(NODE_CONFIG_STR * NODE_CONFIG_MAX_SEEDS);
    if (!flat) {
        rc = -ENOMEM;
        goto out_doc;
    }
    for (yaml_node_pair_t *pr = root->data.mapping.pairs.start;
         pr < root->data.mapping.pairs.top; pr++) {
        yaml_node_t *k = yaml_document_get_node(&doc, pr->key);
        yaml_node_t *v = yaml_document_get_node(&doc, pr->value);
        if (!k || !v || k->type != YAML_SCALAR_NODE) {
            rc = fail(err, errlen, "%s: keys must be plain names", origin);
            goto out_flat;
        }
        const char *key = (const char *)k->data.scalar.value;
        const char *val;
        char norm[64];
        if (v->type == YAML_MAPPING_NODE &&
            key_norm(norm, sizeof(norm), key, strlen(key)) == 0 &&
            strcmp(norm, "replication") == 0) {
            /* entries one by one, keys verbatim: a quoted data centre name
             * may hold ':' or ',' that the "dc:rf,..." string form splits */
            rc = yaml_repl(c, &doc, v, sub, sizeof(sub));
            if (rc < 0) {
                fail(err, errlen, "%s:%zu: %s", origin, k->start_mark.line + 1,
                     sub);
                goto out_flat;
            }
            continue;
        }
        if (v->type == YAML_SCALAR_NODE) {
            val = (const char *)v->data.scalar.value;
        } else {
            rc = yaml_flatten(&doc, v, key, flat,
                              NODE_CONFIG_STR * NODE_CONFIG_MAX_SEEDS, sub,
                              sizeof(sub));
            if (rc < 0) {
                fail(err, errlen, "%s:%zu: %s", origin, k->start_mark.line + 1,
                     sub);
                goto out_flat;
            }
            val = flat;
        }
        rc = node_config_set(c, key, val, sub, sizeof(sub));
        if (rc < 0) {
            fail(err, errlen, "%s:%zu: %s", origin, k->start_mark.line + 1,
                 sub);
            goto out_flat;
        }
    }
out_flat:
    free(flat);
out_doc:
    yaml_document_delete(&doc);
out_parser:
    yaml_parser_delete(&parser);
    return rc;
}

int node_config_load_file(struct node_config *c,
                          const char *path,
                          char *err,
                          size_t errlen)
{
    char *buf;
    size_t len;
    int rc = rk_read_file(path, 1u << 20, &buf, &len);
    if (rc == -EFBIG)
        return fail(err, errlen, "%s: file larger than 1 MiB", path);
    if (rc < 0) {
        fail(err, errlen, "%s: cannot read: %s", path, strerror(-rc));
        return rc;
    }
    rc = node_config_parse_yaml(c, buf, len, path, err, errlen);
    free(buf);
    return rc;
}

/* ---- environment and flags -------------------------------------------- */

int node_config_apply_env(struct node_config *c,
                          char *const *envp,
                          char *err,
                          size_t errlen)
{
    static const char prefix[] = "RINGKV_";
    char sub[NODE_CONFIG_ERR];
    for (; envp && *envp; envp++) {
        const char *e = *envp;
        if (strncmp(e, prefix, sizeof(prefix) - 1) != 0)
            continue;
        const char *name = e + sizeof(prefix) - 1;
        const char *eq = strchr(name, '=');
        if (!eq)
            continue;
        char key[64];
        /* The RINGKV_ namespace is shared with the CLI and the tools
         * (RINGKV_BIN_DIR, ...): names that are not keys are skipped. */
        if (key_norm(key, sizeof(key), name, (size_t)(eq - name)) < 0 ||
            !key_find(key))
            continue;
        int rc = node_config_set(c, key, eq + 1, sub, sizeof(sub));
        if (rc < 0)
            return fail(err, errlen, "environment %.*s: %s", (int)(eq - e), e,
                        sub);
    }
    return 0;
}

static int is_own_flag(const char *name, size_t len)
{
    static const char *own[] = {"config",  "check_config",     "help",
                                "version", "restore_snapshot", "drop_hints"};
    char k[32];
    if (key_norm(k, sizeof(k), name, len) < 0)
        return 0;
    for (size_t i = 0; i < sizeof(own) / sizeof(own[0]); i++)
        if (strcmp(k, own[i]) == 0)
            return 1;
    return 0;
}

int node_config_apply_args(struct node_config *c,
                           int argc,
                           char *const *argv,
                           char *err,
                           size_t errlen)
{
    char sub[NODE_CONFIG_ERR];
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i];
        if (strcmp(a, "-c") == 0) {
            i++; /* -c FILE */
            continue;
        }
        if (strncmp(a, "--", 2) != 0)
            return fail(err, errlen,
                        "argument '%s': expected --key=value (see --help)", a);
        const char *name = a + 2;
        const char *eq = strchr(name, '=');
        size_t nlen = eq ? (size_t)(eq - name) : strlen(name);
        if (is_own_flag(name, nlen)) {
            char k[32];
            key_norm(k, sizeof(k), name, nlen);
            if (!eq && (strcmp(k, "config") == 0 ||
                        strcmp(k, "restore_snapshot") == 0))
                i++; /* their value */
            continue;
        }
        const char *val;
        if (eq) {
            val = eq + 1;
        } else {
            if (i + 1 >= argc)
                return fail(err, errlen, "flag --%s: missing value", name);
            val = argv[++i];
        }
        char key[64];
        if (key_norm(key, sizeof(key), name, nlen) < 0)
            return fail(err, errlen, "flag --%.*s: unknown configuration key",
                        (int)nlen, name);
        int rc = node_config_set(c, key, val, sub, sizeof(sub));
        if (rc < 0)
            return fail(err, errlen, "flag --%s", sub);
    }
    return 0;
}

const char *node_config_file_arg(int argc, char *const *argv, char *const *envp)
{
    const char *file = NULL;
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i];
        if ((strcmp(a, "--config") == 0 || strcmp(a, "-c") == 0) &&
            i + 1 < argc)
            file = argv[++i];
        else if (strncmp(a, "--config=", 9) == 0)
            file = a + 9;
    }
    if (file)
        return file;
    for (; envp && *envp; envp++)
        if (strncmp(*envp, "RINGKV_CONFIG=", 14) == 0 && (*envp)[14])
            return *envp + 14;
    return NULL;
}

/* ---- validation ------------------------------------------------------- */

int node_config_dcs_rf(const struct node_config_dc *dcs, int n, const char *dc)
{
    for (int i = 0; i < n; i++)
        if (strcmp(dcs[i].name, dc) == 0 || strcmp(dcs[i].name, "*") == 0)
            return dcs[i].rf;
    return 0;
}

int node_config_rf(const struct node_config *c, const char *dc)
{
    return node_config_dcs_rf(c->replication, c->ndcs, dc);
}

/* A node name holds letters, digits and . - _ : only ("" too). */
static bool node_name_ok(const char *s)
{
    for (const char *p = s; *p; p++)
        if (!isalnum((unsigned char)*p) && !strchr(".-_:", *p))
            return false;
    return true;
}

int node_config_validate(const struct node_config *c, char *err, size_t errlen)
{
    if (!host_ok(c->listen_address))
        return fail(err, errlen,
                    "listen_address: '%s' is not a host name or address",
                    c->listen_address);
    if (c->advertise_address[0] && !host_ok(c->advertise_address))
        return fail(err, errlen,
                    "advertise_address: '%s' is not a host name or address",
                    c->advertise_address);
    if (c->metrics_address[0] && !host_ok(c->metrics_address))
        return fail(err, errlen,
                    "metrics_address: '%s' is not a host name or address",
                    c->metrics_address);
    for (const char *p = c->cluster_name; *p; p++)
        if (!isprint((unsigned char)*p))
            return fail(err, errlen,
                        "cluster_name: only printable characters allowed");
    const char *names[] = {"node_name", c->node_name, "replace", c->replace};
    for (size_t i = 0; i < 4; i += 2)
        if (!node_name_ok(names[i + 1]))
            return fail(err, errlen,
                        "%s: '%s' is not a node name: letters, digits and "
                        ". - _ : only",
                        names[i], names[i + 1]);
    if (c->replace[0] && strcmp(c->replace, c->node_name) == 0)
        return fail(err, errlen,
                    "replace: '%s' is this node's own name: a node replaces "
                    "another, dead node (give the new node a name of its own)",
                    c->replace);
    struct {
        const char *name;
        int port;
    } ports[] = {
        {"gossip_port", c->gossip_port},
        {"internode_port", c->internode_port},
        {"client_port", c->client_port},
        {"resp_port", c->resp_port},
        {"metrics_port", c->metrics_port},
        {"tls_port", c->tls_cert_file[0] ? c->tls_port : 0},
    };
    for (size_t i = 0; i < 6; i++)
        for (size_t j = i + 1; j < 6; j++)
            if (ports[i].port && ports[i].port == ports[j].port &&
                !(i == 0 && j == 1) /* gossip is UDP, internode TCP */)
                return fail(err, errlen, "%s: port %d is also %s",
                            ports[j].name, ports[j].port, ports[i].name);
    if ((c->tls_cert_file[0] == '\0') != (c->tls_key_file[0] == '\0'))
        return fail(err, errlen,
                    "tls_cert_file and tls_key_file: set both (the node's "
                    "certificate and its private key) or neither");
    if (c->tls_cert_file[0] == '\0' && c->client_tls != NODE_CLIENT_TLS_OFF)
        return fail(err, errlen,
                    "client_tls: TLS needs tls_cert_file and tls_key_file");
    if (c->tls_cert_file[0] == '\0' && c->metrics_tls != NODE_CLIENT_TLS_OFF)
        return fail(err, errlen,
                    "metrics_tls: HTTPS needs tls_cert_file and tls_key_file");
    if (c->internode_tls != NODE_INTERNODE_TLS_OFF &&
        (c->tls_cert_file[0] == '\0' || c->tls_ca_file[0] == '\0'))
        return fail(err, errlen,
                    "internode_tls: mutual TLS needs tls_cert_file, "
                    "tls_key_file and tls_ca_file (the cluster's CA)");
    if (c->tls_cert_file[0]) {
        char why[600];
        struct node_tls_contexts t = {NULL, NULL, NULL};
        int trc = node__tls_contexts(&t, c, why, sizeof(why));
        node__tls_contexts_free(&t);
        if (trc < 0)
            return fail(err, errlen, "%s", why);
    }
    /* A node of a data centre the replication gives no RF holds no
     * replicas (a new data centre, before `ringkv replication set` names
     * it): allowed, and logged at start (node.c). */
    if (c->cluster_secret_file[0]) {
        FILE *f = fopen(c->cluster_secret_file, "rb");
        if (!f)
            return fail(err, errlen,
                        "cluster_secret_file: cannot open '%s': %s",
                        c->cluster_secret_file, strerror(errno));
        char buf[8];
        size_t n = fread(buf, 1, sizeof(buf), f);
        fclose(f);
        if (n == 0)
            return fail(err, errlen, "cluster_secret_file: '%s' is empty",
                        c->cluster_secret_file);
    }
    struct node_users users;
    int rc = node_users_load(&users, c, err, errlen);
    sodium_memzero(&users, sizeof(users));
    if (rc != 0)
        return rc;
    if (c->durability == NODE_DURABILITY_PERIODIC && c->periodic_sync_ms <= 0)
        return fail(err, errlen, "periodic_sync_ms: must be positive");
    return 0;
}

/* ---- dump ------------------------------------------------------------- */

/* One UTF-8 sequence at s: its code point in *cp and its length, or 0 when
 * the bytes are not a sequence (lenient: no overlong or surrogate checks,
 * whatever decodes is escaped by its value). */
static size_t dump_utf8(uint32_t *cp, const unsigned char *s)
{
    size_t n = s[0] >= 0xf0 && s[0] < 0xf8   ? 4
               : s[0] >= 0xe0 && s[0] < 0xf0 ? 3
               : s[0] >= 0xc0 && s[0] < 0xe0 ? 2
                                             : 0;
    if (n == 0)
        return 0;
    uint32_t v = s[0] & (0x7fu >> n);
    for (size_t i = 1; i < n; i++) {
        if ((s[i] & 0xc0) != 0x80)
            return 0;
        v = v << 6 | (s[i] & 0x3fu);
    }
    *cp = v;
    return n;
}

/* Whether YAML's reader takes code point cp as it is inside a quoted
 * scalar: printable, and not a line break it would fold (NEL, LS, PS) or a
 * byte order mark. */
static int dump_plain_cp(uint32_t cp)
{
    if (cp == 0x85 || cp == 0x2028 || cp == 0x2029 || cp == 0xfeff)
        return 0;
    return (cp >= 0xa0 && cp <= 0xd7ff) || (cp >= 0xe000 && cp <= 0xfffd) ||
           (cp >= 0x10000 && cp <= 0x10ffff);
}

/* s as a YAML double-quoted scalar in dst (cap >= 4 * strlen(s) + 14):
 * quote and backslash escaped, every code point YAML would refuse or fold
 * (control characters, C1, NEL, LS, PS, BOM, U+FFFE/U+FFFF) as \xNN,
 * \uNNNN or \UNNNNNNNN, so the dump parses back to the same string
 * whatever it holds. A byte that is not UTF-8 (only possible from the
 * environment or a flag) is written as \xNN, which reads back as U+00NN. */
static const char *dump_quote(char *dst, size_t cap, const char *str)
{
    const unsigned char *s = (const unsigned char *)str;
    size_t o = 0;
    dst[o++] = '"';
    while (*s != '\0' && o + 12 < cap) {
        uint32_t cp = *s;
        size_t n = 1;
        if (cp >= 0x80 && (n = dump_utf8(&cp, s)) == 0) {
            n = 1; /* not UTF-8: the byte alone */
        } else if (cp == '"' || cp == '\\') {
            dst[o++] = '\\';
            dst[o++] = (char)cp;
            s++;
            continue;
        } else if ((cp >= 0x20 && cp < 0x7f) || dump_plain_cp(cp)) {
            memcpy(dst + o, s, n);
            o += n;
            s += n;
            continue;
        }
        o += (size_t)snprintf(dst + o, cap - o,
                              cp < 0x100     ? "\\x%02x"
                              : cp < 0x10000 ? "\\u%04x"
                                             : "\\U%08x",
                              (unsigned)cp);
        s += n;
    }
    dst[o++] = '"';
    dst[o] = '\0';
    return dst;
}

/* node_config_dump's output: appended to buf while it has room (buf may
 * be NULL, len 0, to measure), counted in *total either way. */
struct dump_out {
    char *buf;
    size_t len, used;
    int total;
};

__attribute__((format(printf, 2, 3))) static void
dump_out(struct dump_out *o, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    size_t room = o->buf && o->used < o->len ? o->len - o->used : 0;
    int w = vsnprintf(room ? o->buf + o->used : NULL, room, fmt, ap);
    va_end(ap);
    if (w > 0) {
        o->total += w;
        o->used = o->used + (size_t)w < o->len ? o->used + (size_t)w : o->len;
    }
}

int node_config_dump(const struct node_config *c, char *buf, size_t len)
{
    struct dump_out o = {buf, len, 0, 0};
    char q[4 * NODE_CONFIG_STR + 14], q2[4 * NODE_CONFIG_STR + 14];
#define OUT(...) dump_out(&o, __VA_ARGS__)
    OUT("cluster_name: %s\n", dump_quote(q, sizeof(q), c->cluster_name));
    OUT("cluster_secret_file: %s\n",
        dump_quote(q, sizeof(q), c->cluster_secret_file));
    OUT("node_name: %s\n", dump_quote(q, sizeof(q), c->node_name));
    OUT("datacenter: %s\nrack: %s\n", dump_quote(q, sizeof(q), c->datacenter),
        dump_quote(q2, sizeof(q2), c->rack));
    OUT("listen_address: %s\nadvertise_address: %s\n",
        dump_quote(q, sizeof(q), c->listen_address),
        dump_quote(q2, sizeof(q2),
                   c->advertise_address[0] ? c->advertise_address
                                           : c->listen_address));
    OUT("seeds: [");
    for (int i = 0; i < c->nseeds; i++)
        OUT("%s%s", i ? ", " : "", dump_quote(q, sizeof(q), c->seeds[i]));
    OUT("]\n");
    OUT("gossip_port: %d\ninternode_port: %d\nclient_port: %d\n"
        "resp_port: %d\nmetrics_port: %d\n",
        c->gossip_port, c->internode_port, c->client_port, c->resp_port,
        c->metrics_port);
    OUT("tls_port: %d\ntls_cert_file: %s\n", c->tls_port,
        dump_quote(q, sizeof(q), c->tls_cert_file));
    OUT("tls_key_file: %s\nclient_tls: %s\nmetrics_tls: %s\n",
        dump_quote(q, sizeof(q), c->tls_key_file),
        client_tls_names[c->client_tls], client_tls_names[c->metrics_tls]);
    OUT("metrics_address: %s\n",
        dump_quote(q, sizeof(q),
                   c->metrics_address[0] ? c->metrics_address
                                         : c->listen_address));
    OUT("tls_ca_file: %s\ninternode_tls: %s\n",
        dump_quote(q, sizeof(q), c->tls_ca_file),
        internode_tls_names[c->internode_tls]);
    OUT("data_dir: %s\nnum_tokens: %d\ntoken_allocation: %s\n"
        "weight: %.17g\n",
        dump_quote(q, sizeof(q), c->data_dir), c->num_tokens,
        alloc_names[c->token_allocation], c->weight);
    OUT("replication: {");
    for (int i = 0; i < c->ndcs; i++)
        OUT("%s%s: %d", i ? ", " : "",
            dump_quote(q, sizeof(q), c->replication[i].name),
            c->replication[i].rf);
    OUT("}\n");
    OUT("default_consistency: %s\nauto_bootstrap: %s\ndurability: %s\n"
        "cpu_scheduling: %s\n",
        node_cl_name(c->default_consistency),
        c->auto_bootstrap ? "true" : "false", durability_names[c->durability],
        sched_names[c->cpu_scheduling]);
    OUT("log_direct_io: %s\n", c->log_direct_io ? "true" : "false");
    OUT("join_ring: %s\n", c->join_ring ? "true" : "false");
    OUT("replace: %s\n", dump_quote(q, sizeof(q), c->replace));
    OUT("periodic_sync_ms: %d\nread_timeout_ms: %d\nwrite_timeout_ms: %d\n"
        "connect_timeout_ms: %d\ngossip_interval_ms: %d\n"
        "ring_delay_ms: %d\nphi_convict_threshold: %.17g\n",
        c->periodic_sync_ms, c->read_timeout_ms, c->write_timeout_ms,
        c->connect_timeout_ms, c->gossip_interval_ms, c->ring_delay_ms,
        c->phi_convict_threshold);
    OUT("failure_probes: %s\nsuspicion_timeout_ms: %d\n",
        c->failure_probes ? "true" : "false", c->suspicion_timeout_ms);
    OUT("hinted_handoff: %s\nmax_hint_window_ms: %lld\n"
        "gc_grace_seconds: %lld\nmemtable_mb: %d\nauto_compact_pct: %d\n",
        c->hinted_handoff ? "true" : "false", (long long)c->max_hint_window_ms,
        (long long)c->gc_grace_seconds, c->memtable_mb, c->auto_compact_pct);
    OUT("read_cache_mb: %d\n", c->read_cache_mb);
    OUT("max_clock_drift_ms: %d\n", c->max_clock_drift_ms);
    OUT("disk_reserve_mb: %d\n", c->disk_reserve_mb);
    OUT("auto_cleanup_s: %d\n", c->auto_cleanup_s);
    OUT("repair_after_join: %s\n", c->repair_after_join ? "true" : "false");
    OUT("repair_interval_s: %lld\npurge_interval_s: %lld\n",
        (long long)c->repair_interval_s, (long long)c->purge_interval_s);
    OUT("stream_throughput_mb: %d\n", c->stream_throughput_mb);
    OUT("stream_max_ranges: %d\nstream_donor_max_ranges: %d\n",
        c->stream_max_ranges, c->stream_donor_max_ranges);
    OUT("stall_warning_s: %d\n", c->stall_warning_s);
    OUT("max_inflight: %d\nmax_pipeline: %d\nmax_clients: %d\n"
        "max_input_buffer_mb: %d\nclient_frame_timeout_s: %d\n"
        "requirepass: %s\nauth_fail_delay_max_ms: %d\n",
        c->max_inflight, c->max_pipeline, c->max_clients,
        c->max_input_buffer_mb, c->client_frame_timeout_s,
        c->requirepass[0] ? "<set>" : "\"\"", c->auth_fail_delay_max_ms);
    OUT("requirepass_file: %s\nadmin_password: %s\n",
        dump_quote(q, sizeof(q), c->requirepass_file),
        c->admin_password[0] ? "<set>" : "\"\"");
    OUT("admin_password_file: %s\n",
        dump_quote(q, sizeof(q), c->admin_password_file));
    OUT("metrics_password: %s\nmetrics_password_file: %s\n",
        c->metrics_password[0] ? "<set>" : "\"\"",
        dump_quote(q, sizeof(q), c->metrics_password_file));
    OUT("log_level: %s\nlog_file: %s\n", loglevel_names[c->log_level],
        dump_quote(q, sizeof(q), c->log_file));
#undef OUT
    return o.total;
}
