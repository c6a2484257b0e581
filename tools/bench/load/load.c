/*
 * load.c - `ringkv-load`, a load generator over libringkv.
 *
 * Each of --connections threads owns one connection and keeps --pipeline
 * requests in flight: it tops the window up, flushes, takes one response,
 * and records the time from its send to its arrival in a per-thread
 * log-linear histogram (1/64 relative precision). Keys are uniform over
 * --keys; --reads is the fraction of GETs. The run stops after --duration
 * seconds or --ops operations, or at SIGINT or SIGTERM: then no thread
 * sends again, each waits for the answers to its requests in flight, and
 * the report is printed as at the end of a run (so a caller can stop a
 * run started long, once it has what it measures). Results: ops/s and
 * p50/p99/p999/max, as text or --json. NOT_FOUND answers to GETs are
 * counted as misses, not errors.
 *
 * Token-aware (libringkv's opts.token_aware; --no-token-aware turns it
 * off): each thread's handle sends each request to a replica of its key,
 * on up to one connection per node; the requests sent to a replica and
 * those sent to the thread's first node instead are counted.
 */
#include <errno.h>
#include <inttypes.h>
#include <math.h>
#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "client/ringkv.h"
#include "common/rk.h"
#include "tools/bench/hist.h"
#include "wire/client_msg.h"

/* ---- configuration and state -----------------------------------------------
 */

struct conf {
    const char *hosts, *password;
    int conns, depth;
    size_t vsize;
    double reads;
    uint64_t keys, ops;
    double duration;
    uint32_t cl;
    int timeout_ms;
    uint64_t seed;
    bool json, preload;
    bool token_aware;
};

#define NERR 10 /* err_slot() classes, named in err_names */

struct worker {
    const struct conf *cf;
    int idx;
    pthread_t th;
    struct hist lat_r, lat_w; /* all latencies = their merge */
    uint64_t reads, writes, misses, errors;
    uint64_t err_by[NERR]; /* by exit class, see err_slot */
    struct ringkv_route_stats route;
    char first_err[256];
    int fatal;
};

/* set by the end of --duration or by SIGINT/SIGTERM (on_stop_signal) */
static atomic_bool g_stop;
static atomic_uint_fast64_t g_claimed;

static const char *const err_names[NERR] = {
    "UNAVAILABLE", "TIMEOUT", "OVERLOADED", "RING_STALE", "BAD_REQUEST",
    "TOO_LARGE",   "AUTH",    "CONNECTION", "PROTOCOL",   "OTHER"};

static int err_slot(int rc)
{
    switch (rc) {
    case RK_EUNAVAILABLE:
        return 0;
    case RK_ETIMEOUT:
        return 1;
    case RK_EOVERLOADED:
        return 2;
    case RK_ESTALE:
        return 3;
    case RK_EBADREQ:
        return 4;
    case RK_ETOOLARGE:
        return 5;
    case RK_EAUTH:
        return 6;
    case RK_EPROTO:
        return 8;
    default:
        /* libringkv's one list of connection errors */
        return ringkv_errkind(rc) == RINGKV_KIND_CONNECTION ? 7 : 9;
    }
}

static void on_stop_signal(int sig)
{
    (void)sig;
    atomic_store(&g_stop, true); /* lock-free: safe in a handler */
}

/* SIGINT and SIGTERM end the run early (see the top). The worker threads
 * start with both blocked, so the main thread takes them: a worker's wait
 * for an answer is never cut short by one. */
static int stop_signals_catch(sigset_t *out_blocked)
{
    struct sigaction sa;
    memset(&sa, 0, sizeof(sa));
    sa.sa_handler = on_stop_signal;
    sigemptyset(&sa.sa_mask);
    sigemptyset(out_blocked);
    sigaddset(out_blocked, SIGINT);
    sigaddset(out_blocked, SIGTERM);
    if (sigaction(SIGINT, &sa, NULL) != 0 || sigaction(SIGTERM, &sa, NULL) != 0)
        return -errno;
    return -pthread_sigmask(SIG_BLOCK, out_blocked, NULL);
}

static uint64_t now_us(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000000u + (uint64_t)ts.tv_nsec / 1000u;
}

static bool claim_op(const struct conf *cf)
{
    if (atomic_load(&g_stop))
        return false;
    if (cf->ops == 0)
        return true;
    return atomic_fetch_add(&g_claimed, 1) < cf->ops;
}

static void note_error(struct worker *w, ringkv *c, int rc)
{
    w->errors++;
    w->err_by[err_slot(rc)]++;
    if (w->first_err[0] == '\0')
        snprintf(w->first_err, sizeof(w->first_err), "%s",
                 ringkv_errmsg(c)[0] ? ringkv_errmsg(c) : rk_strerror(rc));
}

/* The host list rotated left by k items, so connection k starts at host
 * k mod n and the connections spread over the nodes listed. Returns a
 * malloc'd string, or NULL (use the list as it is). */
static char *rotate_hosts(const char *hosts, int k)
{
    size_t n = 1, len = strlen(hosts);
    for (const char *p = hosts; *p; p++)
        n += *p == ',';
    size_t skip = (size_t)k % n;
    if (skip == 0)
        return NULL;
    const char *p = hosts;
    for (size_t i = 0; i < skip; i++)
        p = strchr(p, ',') + 1;
    char *out = malloc(len + 2);
    if (out == NULL)
        return NULL;
    size_t tail = len - (size_t)(p - hosts);
    memcpy(out, p, tail);
    out[tail] = ',';
    memcpy(out + tail + 1, hosts, (size_t)(p - hosts) - 1);
    out[len] = '\0';
    return out;
}

struct slot {
    uint64_t id, t0;
    bool read, used;
};

static void *worker_main(void *arg)
{
    struct worker *w = arg;
    const struct conf *cf = w->cf;
    struct ringkv_opts o = RINGKV_OPTS_INIT;
    char *hosts = rotate_hosts(cf->hosts, w->idx);
    o.hosts = hosts ? hosts : cf->hosts;
    o.password = cf->password;
    o.client_name = "ringkv-load";
    o.consistency = cf->cl;
    o.timeout_ms = cf->timeout_ms;
    /* the rotation spreads the connections; a node's connections that
     * lose it spread over the others too */
    o.spread = RINGKV_SPREAD_FAILOVER;
    o.token_aware = cf->token_aware;
    ringkv *c = NULL;
    struct slot *slots = calloc((size_t)cf->depth, sizeof(*slots));
    uint8_t *val = malloc(cf->vsize ? cf->vsize : 1);
    uint64_t rs = cf->seed * 1000003u + (uint64_t)w->idx + 1;
    if (slots == NULL || val == NULL) {
        w->fatal = -ENOMEM;
        goto out;
    }
    for (size_t i = 0; i < cf->vsize; i++)
        val[i] = (uint8_t)('a' + rng_next(&rs) % 26);
    const char *why = NULL;
    if ((w->fatal = ringkv_new(&c, &o, &why)) != 0) {
        snprintf(w->first_err, sizeof(w->first_err), "%s", why);
        goto out;
    }
    int inflight = 0;
    char key[32];
    while (1) {
        /* top the window up */
        while (inflight < cf->depth && claim_op(cf)) {
            uint64_t k = rng_next(&rs) % cf->keys;
            int kl = snprintf(key, sizeof(key), "key:%" PRIu64, k);
            bool read = rng_unit(&rs) < cf->reads;
            struct wire_creq q = {.op = read ? WIRE_COP_GET : WIRE_COP_PUT,
                                  .has = WIRE_CREQ_KEY,
                                  .key = RK_SLICE(key, (size_t)kl)};
            if (!read) {
                q.has |= WIRE_CREQ_VALUE;
                q.value = RK_SLICE(val, cf->vsize);
            }
            uint64_t id;
            int rc = ringkv_send(c, &id, &q);
            if (rc != 0) {
                note_error(w, c, rc);
                if (rc == RK_EAUTH || rc == RK_EBADREQ || rc == RK_ETOOLARGE) {
                    w->fatal = rc;
                    goto out;
                }
                usleep(10000); /* cannot connect: do not spin */
                continue;
            }
            int s = 0;
            while (slots[s].used)
                s++;
            slots[s] = (struct slot){id, now_us(), read, true};
            inflight++;
        }
        if (inflight == 0)
            break;
        struct wire_cresp r;
        int rc = ringkv_recv(c, &r, cf->timeout_ms);
        uint64_t t1 = now_us();
        if (rc != 0) {
            /* timed out or lost: everything in flight is abandoned */
            note_error(w, c, rc);
            w->errors += (uint64_t)inflight - 1;
            w->err_by[err_slot(rc)] += (uint64_t)inflight - 1;
            if (rc == RK_ETIMEOUT)
                ringkv_close(c);
            memset(slots, 0, (size_t)cf->depth * sizeof(*slots));
            inflight = 0;
            continue;
        }
        int s = 0;
        while (s < cf->depth && !(slots[s].used && slots[s].id == r.id))
            s++;
        if (s == cf->depth) {
            note_error(w, c, RK_EPROTO);
            wire_cresp_clear(&r);
            continue;
        }
        slots[s].used = false;
        inflight--;
        /* Only answered operations count as throughput and latency: an
         * error reply (OVERLOADED, UNAVAILABLE, ...) is counted apart. A
         * miss is a successful read. */
        if (r.err != 0 && !(r.err == RK_ENOTFOUND && slots[s].read)) {
            w->errors++;
            w->err_by[err_slot(r.err)]++;
            if (w->first_err[0] == '\0')
                snprintf(w->first_err, sizeof(w->first_err), "%.*s: %.*s",
                         (int)r.errname.len, (const char *)r.errname.p,
                         (int)r.msg.len, (const char *)r.msg.p);
            wire_cresp_clear(&r);
            continue;
        }
        hist_add(slots[s].read ? &w->lat_r : &w->lat_w, t1 - slots[s].t0);
        if (slots[s].read)
            w->reads++;
        else
            w->writes++;
        w->misses += r.err == RK_ENOTFOUND;
        wire_cresp_clear(&r);
    }
out:
    if (c)
        ringkv_route_stats(c, &w->route);
    ringkv_free(c);
    free(slots);
    free(val);
    free(hosts);
    return NULL;
}

/* Write every key once (pipelined, one connection), before the clock. */
static int preload(const struct conf *cf)
{
    struct ringkv_opts o = RINGKV_OPTS_INIT;
    o.hosts = cf->hosts;
    o.password = cf->password;
    o.consistency = cf->cl;
    o.timeout_ms = cf->timeout_ms;
    o.token_aware = cf->token_aware;
    ringkv *c;
    const char *why;
    int rc = ringkv_new(&c, &o, &why);
    if (rc != 0)
        return rc;
    uint8_t *val = calloc(1, cf->vsize ? cf->vsize : 1);
    memset(val, 'p', cf->vsize);
    char key[32];
    for (uint64_t k = 0; k < cf->keys && rc == 0; k++) {
        int kl = snprintf(key, sizeof(key), "key:%" PRIu64, k);
        struct wire_creq q = {.op = WIRE_COP_PUT,
                              .has = WIRE_CREQ_KEY | WIRE_CREQ_VALUE,
                              .key = RK_SLICE(key, (size_t)kl),
                              .value = RK_SLICE(val, cf->vsize)};
        rc = ringkv_send(c, NULL, &q);
        while (rc == 0 && (ringkv_pending(c) >= 64 ||
                           (k + 1 == cf->keys && ringkv_pending(c) > 0))) {
            struct wire_cresp r;
            rc = ringkv_recv(c, &r, -1);
            if (rc == 0) {
                rc = r.err;
                wire_cresp_clear(&r);
            }
        }
    }
    if (rc != 0)
        fprintf(stderr, "ringkv-load: preload: %s\n",
                ringkv_errmsg(c)[0] ? ringkv_errmsg(c) : rk_strerror(rc));
    free(val);
    ringkv_free(c);
    return rc;
}

static const char usage[] =
    "usage: ringkv-load [options]\n"
    "  -h, --host HOSTS        host[:port][,...] (default $RINGKV_HOST or\n"
    "                          127.0.0.1:7380)\n"
    "  -c, --connections N     connections, one thread each (default 4)\n"
    "  -P, --pipeline N        requests in flight per connection (default "
    "1)\n"
    "  -d, --value-size B      value bytes (default 100)\n"
    "  -r, --reads F           fraction of GETs, 0..1 (default 0.5)\n"
    "  -k, --keys N            key space key:0..N-1 (default 100000)\n"
    "      --consistency L     ONE TWO QUORUM ALL LOCAL_ONE LOCAL_QUORUM\n"
    "                          EACH_QUORUM (default: the server's)\n"
    "  -t, --duration S        seconds to run (default 10)\n"
    "  -n, --ops N             stop after N operations instead\n"
    "                          (SIGINT or SIGTERM stops a run early: no\n"
    "                          more requests, those in flight answered,\n"
    "                          and the report as at the end of a run)\n"
    "      --preload           write every key once before measuring\n"
    "  -a, --password PW       or $RINGKV_PASSWORD\n"
    "      --timeout MS        per-response timeout (default 5000)\n"
    "      --seed N            key/value randomness (default 1)\n"
    "      --no-token-aware    send every request to the connection's\n"
    "                          first host, not to a replica of its key\n"
    "      --json              one JSON object on stdout\n";

static void json_cstr(const char *s)
{
    putchar('"');
    for (; *s; s++) {
        if (*s == '"' || *s == '\\')
            printf("\\%c", *s);
        else if ((unsigned char)*s < 0x20)
            printf("\\u%04x", (unsigned char)*s);
        else
            putchar(*s);
    }
    putchar('"');
}

static void print_lat_json(const char *name, const struct hist *h)
{
    printf("\"%s\":{\"p50\":%.3f,\"p99\":%.3f,\"p999\":%.3f,\"max\":%.3f},",
           name, (double)hist_pct(h, 50) / 1000.0,
           (double)hist_pct(h, 99) / 1000.0, (double)hist_pct(h, 99.9) / 1000.0,
           (double)h->max / 1000.0);
}

static void print_lat_text(const char *name, const struct hist *h)
{
    if (h->count == 0)
        return;
    printf("%s     p50 %.3f  p99 %.3f  p999 %.3f  max %.3f\n", name,
           (double)hist_pct(h, 50) / 1000.0, (double)hist_pct(h, 99) / 1000.0,
           (double)hist_pct(h, 99.9) / 1000.0, (double)h->max / 1000.0);
}

static int bad(const char *opt, const char *val)
{
    fprintf(stderr, "ringkv-load: bad value for %s: %s\n%s", opt,
            val ? val : "(missing)", usage);
    return 2;
}

static bool num(const char *s, double lo, double hi, double *out)
{
    char *end;
    if (s == NULL)
        return false;
    double v = strtod(s, &end);
    if (end == s || *end || !(v >= lo && v <= hi))
        return false;
    *out = v;
    return true;
}

int main(int argc, char **argv)
{
    struct conf cf = {.hosts = "127.0.0.1:7380",
                      .password = getenv("RINGKV_PASSWORD"),
                      .conns = 4,
                      .depth = 1,
                      .vsize = 100,
                      .reads = 0.5,
                      .keys = 100000,
                      .duration = 10,
                      .timeout_ms = 5000,
                      .seed = 1,
                      .token_aware = true};
    bool host_given = false;
    for (int i = 1; i < argc; i++) {
        const char *o = argv[i];
        const char *v = i + 1 < argc ? argv[i + 1] : NULL;
        double d;
        if (!strcmp(o, "--json")) {
            cf.json = true;
            continue;
        }
        if (!strcmp(o, "--preload")) {
            cf.preload = true;
            continue;
        }
        if (!strcmp(o, "--no-token-aware")) {
            cf.token_aware = false;
            continue;
        }
        if (!strcmp(o, "--help")) {
            fputs(usage, stdout);
            return 0;
        }
        i++;
        if (!strcmp(o, "-h") || !strcmp(o, "--host")) {
            if (v == NULL)
                return bad(o, v);
            cf.hosts = v;
            host_given = true;
        } else if (!strcmp(o, "-a") || !strcmp(o, "--password")) {
            if (v == NULL)
                return bad(o, v);
            cf.password = v;
        } else if (!strcmp(o, "-c") || !strcmp(o, "--connections")) {
            if (!num(v, 1, 1024, &d))
                return bad(o, v);
            cf.conns = (int)d;
        } else if (!strcmp(o, "-P") || !strcmp(o, "--pipeline")) {
            if (!num(v, 1, 4096, &d))
                return bad(o, v);
            cf.depth = (int)d;
        } else if (!strcmp(o, "-d") || !strcmp(o, "--value-size")) {
            if (!num(v, 0, RK_MAX_VALUE, &d))
                return bad(o, v);
            cf.vsize = (size_t)d;
        } else if (!strcmp(o, "-r") || !strcmp(o, "--reads")) {
            if (!num(v, 0, 1, &cf.reads))
                return bad(o, v);
        } else if (!strcmp(o, "-k") || !strcmp(o, "--keys")) {
            if (!num(v, 1, 1e15, &d))
                return bad(o, v);
            cf.keys = (uint64_t)d;
        } else if (!strcmp(o, "-t") || !strcmp(o, "--duration")) {
            if (!num(v, 0.01, 1e6, &cf.duration))
                return bad(o, v);
        } else if (!strcmp(o, "-n") || !strcmp(o, "--ops")) {
            if (!num(v, 1, 1e15, &d))
                return bad(o, v);
            cf.ops = (uint64_t)d;
        } else if (!strcmp(o, "--timeout")) {
            if (!num(v, 1, 3600000, &d))
                return bad(o, v);
            cf.timeout_ms = (int)d;
        } else if (!strcmp(o, "--seed")) {
            if (!num(v, 0, 1e15, &d))
                return bad(o, v);
            cf.seed = (uint64_t)d;
        } else if (!strcmp(o, "--consistency")) {
            if (v == NULL || wire_ccl_parse(&cf.cl, v) != 0)
                return bad(o, v);
        } else {
            fprintf(stderr, "ringkv-load: unknown option %s\n%s", o, usage);
            return 2;
        }
    }
    if (!host_given && getenv("RINGKV_HOST") && getenv("RINGKV_HOST")[0])
        cf.hosts = getenv("RINGKV_HOST");
    if (cf.password && !cf.password[0])
        cf.password = NULL;
    if (cf.preload && preload(&cf) != 0)
        return 3;
    struct worker *w = calloc((size_t)cf.conns, sizeof(*w));
    if (w == NULL)
        return 8;
    sigset_t stop_sigs;
    if (stop_signals_catch(&stop_sigs) != 0) {
        free(w);
        return 8;
    }
    uint64_t t0 = now_us();
    int started = 0;
    for (int i = 0; i < cf.conns; i++) {
        w[i].cf = &cf;
        w[i].idx = i;
        if (pthread_create(&w[i].th, NULL, worker_main, &w[i]) != 0)
            break;
        started++;
    }
    pthread_sigmask(SIG_UNBLOCK, &stop_sigs, NULL);
    if (cf.ops == 0) {
        /* sleep in slices; a signal ends the sleep and the run */
        uint64_t end = t0 + (uint64_t)(cf.duration * 1e6);
        while (now_us() < end && !atomic_load(&g_stop)) {
            uint64_t left = end - now_us();
            usleep(left > 100000 ? 100000 : (useconds_t)left);
        }
        atomic_store(&g_stop, true);
    }
    for (int i = 0; i < started; i++)
        pthread_join(w[i].th, NULL);
    double secs = (double)(now_us() - t0) / 1e6;
    static struct hist all, all_r, all_w;
    uint64_t reads = 0, writes = 0, misses = 0, errors = 0, by[NERR] = {0};
    uint64_t to_replica = 0, fallback = 0, refreshes = 0, conns = 0;
    const char *first_err = NULL;
    int fatal = 0;
    for (int i = 0; i < started; i++) {
        hist_merge(&all_r, &w[i].lat_r);
        hist_merge(&all_w, &w[i].lat_w);
        reads += w[i].reads;
        writes += w[i].writes;
        misses += w[i].misses;
        errors += w[i].errors;
        to_replica += w[i].route.to_replica;
        fallback += w[i].route.fallback;
        refreshes += w[i].route.refreshes;
        conns += w[i].route.connections;
        for (int k = 0; k < NERR; k++)
            by[k] += w[i].err_by[k];
        if (first_err == NULL && w[i].first_err[0])
            first_err = w[i].first_err;
        if (w[i].fatal)
            fatal = w[i].fatal;
    }
    hist_merge(&all, &all_r);
    hist_merge(&all, &all_w);
    uint64_t done = reads + writes;
    double ops_s = secs > 0 ? (double)done / secs : 0;
    double p50 = (double)hist_pct(&all, 50) / 1000.0;
    double p99 = (double)hist_pct(&all, 99) / 1000.0;
    double p999 = (double)hist_pct(&all, 99.9) / 1000.0;
    double mx = (double)all.max / 1000.0;
    if (cf.json) {
        printf("{\"hosts\":");
        json_cstr(cf.hosts);
        printf(",\"connections\":%d,\"pipeline\":%d,"
               "\"value_size\":%zu,\"reads_fraction\":%.3f,\"keys\":%" PRIu64
               ",\"consistency\":\"%s\",\"seconds\":%.3f,\"ops\":%" PRIu64
               ",\"ops_per_sec\":%.1f,\"reads\":%" PRIu64 ",\"writes\":%" PRIu64
               ",\"misses\":%" PRIu64 ",\"errors\":%" PRIu64
               ",\"latency_ms\":{\"p50\":%.3f,\"p99\":%.3f,\"p999\":%.3f,"
               "\"max\":%.3f},",
               cf.conns, cf.depth, cf.vsize, cf.reads, cf.keys,
               wire_ccl_name(cf.cl), secs, done, ops_s, reads, writes, misses,
               errors, p50, p99, p999, mx);
        printf("\"token_aware\":%s,\"to_replica\":%" PRIu64
               ",\"fallback\":%" PRIu64 ",\"ring_refreshes\":%" PRIu64
               ",\"connections_open\":%" PRIu64 ",",
               cf.token_aware ? "true" : "false", to_replica, fallback,
               refreshes, conns);
        print_lat_json("read_latency_ms", &all_r);
        print_lat_json("write_latency_ms", &all_w);
        printf("\"errors_by_type\":{");
        bool first = true;
        for (int k = 0; k < NERR; k++) {
            if (by[k] == 0)
                continue;
            printf("%s\"%s\":%" PRIu64, first ? "" : ",", err_names[k], by[k]);
            first = false;
        }
        printf("}}\n");
    } else {
        printf("ringkv-load: %s, %d connections x pipeline %d, %zu-byte "
               "values, %.0f%% reads, %" PRIu64 " keys, consistency %s\n",
               cf.hosts, cf.conns, cf.depth, cf.vsize, cf.reads * 100, cf.keys,
               wire_ccl_name(cf.cl));
        printf("%" PRIu64 " ops in %.2f s: %.0f ops/s (%" PRIu64
               " reads, %" PRIu64 " writes, %" PRIu64 " misses, %" PRIu64
               " errors)\n",
               done, secs, ops_s, reads, writes, misses, errors);
        printf("latency ms: p50 %.3f  p99 %.3f  p999 %.3f  max %.3f\n", p50,
               p99, p999, mx);
        if (cf.token_aware)
            printf("token-aware: %" PRIu64 " sent to a replica of the key, "
                   "%" PRIu64 " to the first node (no ring yet, or stale)\n",
                   to_replica, fallback);
        print_lat_text("  reads ", &all_r);
        print_lat_text("  writes", &all_w);
        for (int k = 0; k < NERR; k++)
            if (by[k])
                printf("  %s: %" PRIu64 "\n", err_names[k], by[k]);
    }
    if (first_err)
        fprintf(stderr, "ringkv-load: first error: %s\n", first_err);
    free(w);
    if (fatal)
        return 3;
    return errors && done == 0 ? 3 : 0;
}
