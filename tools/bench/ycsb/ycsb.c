/*
 * ycsb.c - `ringkv-ycsb`, a YCSB-style load generator for ringkv's native
 * protocol and, as the reference, any RESP server (redis-server).
 *
 * Workloads are YCSB's core mixes: A 50% reads / 50% updates, B 95/5, C
 * reads only. Keys "user<N>" are chosen by YCSB's scrambled zipfian
 * (ScrambledZipfianGenerator, constant 0.99: a zipfian over 10^10 items
 * with YCSB's precomputed zeta, each draw hashed by FNV-1a-64 onto the N
 * keys); an update rewrites the whole value (--value-size random bytes).
 *
 * Load is open loop: each of --connections threads owns one connection
 * and a schedule of intended send times (rate / connections a second), and
 * keeps at most --pipeline requests in flight. Latency runs from the
 * intended send time, not from when the request could leave, so a stalled
 * server shows as latency rather than as a quieter client (coordinated
 * omission). --rate 0 is closed loop (latency from the send).
 *
 * Both protocols go through the same code here: a non-blocking socket,
 * ppoll() with a nanosecond timeout (so pacing does not add a millisecond
 * of wake-up slack), the native frames encoded and decoded by wire/'s
 * codecs, RESP written and parsed by hand. libringkv is not used: its
 * waits are in milliseconds, and the two targets should meet one client.
 *
 * Latencies go to a log-linear histogram (HdrHistogram's layout: 128
 * linear sub-buckets per power of two, under 0.8% relative error,
 * reported at a bucket's middle). Output is JSON lines: one per second of
 * completions, then a summary with p50/p95/p99/p999/max per operation.
 * --load writes each key once (threads split the key range, closed loop).
 * --self-test checks the zipfian chooser and the histogram, and exits.
 */
#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <math.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#include "common/rk.h"
#include "tools/bench/hist.h"
#include "wire/client_msg.h"

/* ---- YCSB's scrambled zipfian ----------------------------------------------
 *
 * ZipfianGenerator(0, ITEM_COUNT, 0.99, ZETAN) as YCSB's
 * ScrambledZipfianGenerator builds it: Gray et al.'s "Quickly generating
 * billion-record synthetic databases" method over ITEM_COUNT + 1 items,
 * then FNV-1a-64 of the item, absolute value, modulo the key count. Pure:
 * the uniform draw u in [0, 1) is an argument.
 */

#define ZIPF_ITEM_COUNT 10000000000ull
#define ZIPF_CONSTANT   0.99
#define ZIPF_ZETAN      26.46902820178302 /* zeta(ITEM_COUNT + 1, 0.99) */

struct zipf {
    double items, theta, alpha, zetan, eta, half_pow_theta;
};

static void zipf_init(struct zipf *z, double items, double theta, double zetan)
{
    z->items = items;
    z->theta = theta;
    z->alpha = 1.0 / (1.0 - theta);
    z->zetan = zetan;
    z->half_pow_theta = pow(0.5, theta);
    double zeta2 = 1.0 + z->half_pow_theta;
    z->eta = (1.0 - pow(2.0 / items, 1.0 - theta)) / (1.0 - zeta2 / zetan);
}

/* The zipfian item (0 the most popular) for uniform draw u. */
static uint64_t zipf_item(const struct zipf *z, double u)
{
    double uz = u * z->zetan;
    if (uz < 1.0)
        return 0;
    if (uz < 1.0 + z->half_pow_theta)
        return 1;
    return (uint64_t)(z->items * pow(z->eta * u - z->eta + 1.0, z->alpha));
}

/* YCSB's Utils.fnvhash64: FNV-1a over the 8 little-endian bytes, then
 * Math.abs of the signed result. */
static uint64_t fnv64(uint64_t v)
{
    uint64_t h = 0xcbf29ce484222325ull;
    for (int i = 0; i < 8; i++) {
        h ^= v & 0xff;
        v >>= 8;
        h *= 1099511628211ull;
    }
    return (h >> 63) ? ~h + 1 : h;
}

/* The key index in [0, nkeys) for uniform draw u. */
static uint64_t ycsb_key(const struct zipf *z, uint64_t nkeys, double u)
{
    return fnv64(zipf_item(z, u)) % nkeys;
}

/* ---- configuration and shared state ----------------------------------------
 */

#define MAX_HOSTS 16

struct conf {
    char host[MAX_HOSTS][48]; /* connection i goes to host i mod nhosts */
    int port[MAX_HOSTS], nhosts;
    bool resp;
    int conns, depth;
    size_t vsize;
    double reads, rate, duration, warmup;
    uint64_t keys;
    uint32_t cl;
    int timeout_ms;
    uint64_t seed;
    bool load;
    const char *workload;
};

#define MAX_SECONDS 7200
#define NERR        4 /* connection, timeout, server error, protocol */

static const char *const err_names[NERR] = {"connection", "timeout", "server",
                                            "protocol"};

static struct zipf g_zipf;
static uint64_t g_t0;
static atomic_uint_fast64_t g_sec_ops[MAX_SECONDS];
static atomic_uint_fast64_t g_sec_err[MAX_SECONDS];

static uint64_t now_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

/* ---- one connection: native frames or RESP over a non-blocking socket -----
 */

struct conn {
    const struct conf *cf;
    int fd;
    struct wire_cbuf out; /* bytes not yet written start at out_off */
    size_t out_off;
    uint8_t *in;
    size_t in_len, in_off, in_cap;
    uint64_t skip; /* RESP: bulk bytes (and CRLF) still to pass over */
    uint64_t next_id;
    char err[200];
};

enum reply { REPLY_OK, REPLY_MISS, REPLY_ERR };

static int conn_open(struct conn *c, int hi)
{
    struct sockaddr_in sa = {.sin_family = AF_INET,
                             .sin_port = htons((uint16_t)c->cf->port[hi])};
    if (inet_pton(AF_INET, c->cf->host[hi], &sa.sin_addr) != 1)
        return RK_EBADREQ;
    int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    if (fd < 0)
        return -errno;
    if (connect(fd, (struct sockaddr *)&sa, sizeof(sa)) != 0) {
        int e = -errno;
        close(fd);
        return e;
    }
    int one = 1;
    setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
    fcntl(fd, F_SETFL, fcntl(fd, F_GETFL) | O_NONBLOCK);
    c->fd = fd;
    c->out.len = c->out_off = 0;
    c->in_len = c->in_off = 0;
    c->skip = 0;
    return 0;
}

static void conn_close(struct conn *c)
{
    if (c->fd >= 0)
        close(c->fd);
    c->fd = -1;
}

static int buf_put(struct wire_cbuf *b, const void *p, size_t n)
{
    if (b->len + n > b->cap) {
        size_t cap = b->cap ? b->cap : 4096;
        while (cap < b->len + n)
            cap *= 2;
        uint8_t *q = realloc(b->p, cap);
        if (q == NULL)
            return -ENOMEM;
        b->p = q;
        b->cap = cap;
    }
    memcpy(b->p + b->len, p, n);
    b->len += n;
    return 0;
}

static int resp_bulk(struct wire_cbuf *b, const void *p, size_t n)
{
    char hdr[32];
    int hl = snprintf(hdr, sizeof(hdr), "$%zu\r\n", n);
    int rc = buf_put(b, hdr, (size_t)hl);
    if (rc == 0)
        rc = buf_put(b, p, n);
    if (rc == 0)
        rc = buf_put(b, "\r\n", 2);
    return rc;
}

/* Queue a GET (value NULL) or a write of key. *out_id: the native id. */
static int conn_send(struct conn *c,
                     uint64_t *out_id,
                     const char *key,
                     size_t klen,
                     const uint8_t *value,
                     size_t vlen)
{
    if (c->out_off == c->out.len)
        c->out.len = c->out_off = 0;
    if (c->cf->resp) {
        int rc = buf_put(
            &c->out, value ? "*3\r\n$3\r\nSET\r\n" : "*2\r\n$3\r\nGET\r\n", 13);
        if (rc == 0)
            rc = resp_bulk(&c->out, key, klen);
        if (rc == 0 && value)
            rc = resp_bulk(&c->out, value, vlen);
        *out_id = 0;
        return rc;
    }
    struct wire_creq q = {.id = ++c->next_id,
                          .op = value ? WIRE_COP_PUT : WIRE_COP_GET,
                          .has = WIRE_CREQ_KEY,
                          .key = RK_SLICE(key, klen)};
    if (value) {
        q.has |= WIRE_CREQ_VALUE;
        q.value = RK_SLICE(value, vlen);
    }
    if (c->cf->cl != WIRE_CCL_DEFAULT) {
        q.has |= WIRE_CREQ_CL;
        q.cl = c->cf->cl;
    }
    *out_id = q.id;
    return wire_creq_encode(&c->out, &q);
}

/* One RESP reply from the input, if whole: 1 and *out; 0 when more bytes
 * are needed; RK_EPROTO. A bulk's bytes are passed over as they come, so a
 * 1 MiB value never needs a 1 MiB buffer. */
static int resp_take(struct conn *c, enum reply *out)
{
    while (1) {
        size_t avail = c->in_len - c->in_off;
        if (c->skip > 0) {
            size_t n = c->skip < avail ? (size_t)c->skip : avail;
            c->in_off += n;
            c->skip -= n;
            if (c->skip > 0)
                return 0;
            *out = REPLY_OK;
            return 1;
        }
        uint8_t *p = c->in + c->in_off;
        uint8_t *nl = avail >= 2 ? memmem(p, avail, "\r\n", 2) : NULL;
        if (nl == NULL)
            return avail > 4096 ? RK_EPROTO : 0;
        size_t line = (size_t)(nl - p);
        c->in_off += line + 2;
        switch (p[0]) {
        case '+':
        case ':':
            *out = REPLY_OK;
            return 1;
        case '-':
            snprintf(c->err, sizeof(c->err), "%.*s",
                     (int)(line > 150 ? 150 : line - 1), (char *)p + 1);
            *out = REPLY_ERR;
            return 1;
        case '$': {
            long long n = strtoll((char *)p + 1, NULL, 10);
            if (n < 0) {
                *out = REPLY_MISS;
                return 1;
            }
            c->skip = (uint64_t)n + 2;
            continue;
        }
        default:
            return RK_EPROTO;
        }
    }
}

/* One native response from the input, if whole: 1, *out_id and *out. */
static int native_take(struct conn *c, uint64_t *out_id, enum reply *out)
{
    struct rk_slice body;
    size_t used;
    int rc = wire_cframe_parse(&body, &used, c->in + c->in_off,
                               c->in_len - c->in_off);
    if (rc != 0)
        return rc;
    if (used == 0)
        return 0;
    struct wire_cresp r;
    rc = wire_cresp_decode(&r, body.p, body.len);
    c->in_off += used;
    if (rc != 0) {
        wire_cresp_clear(&r);
        return RK_EPROTO;
    }
    *out_id = r.id;
    if (r.err == 0)
        *out = REPLY_OK;
    else if (r.err == RK_ENOTFOUND)
        *out = REPLY_MISS;
    else {
        *out = REPLY_ERR;
        snprintf(c->err, sizeof(c->err), "%.*s: %.*s", (int)r.errname.len,
                 (const char *)r.errname.p, (int)r.msg.len,
                 (const char *)r.msg.p);
    }
    wire_cresp_clear(&r);
    return 1;
}

/* Write what is queued and wait until deadline_ns (0: return at once when
 * nothing is whole) for one reply. Returns 0 with *out_id and *out,
 * RK_ETIMEOUT, RK_ECLOSED, RK_EPROTO or -errno. */
static int conn_wait(struct conn *c,
                     uint64_t *out_id,
                     enum reply *out,
                     uint64_t deadline_ns)
{
    while (1) {
        int rc = c->cf->resp ? resp_take(c, out) : native_take(c, out_id, out);
        if (rc == 1)
            return 0;
        if (rc < 0)
            return rc;
        if (c->in_off == c->in_len)
            c->in_off = c->in_len = 0;
        bool want_out = c->out_off < c->out.len;
        if (want_out) {
            ssize_t w =
                write(c->fd, c->out.p + c->out_off, c->out.len - c->out_off);
            if (w > 0)
                c->out_off += (size_t)w;
            else if (w < 0 && errno != EAGAIN && errno != EINTR)
                return -errno;
            want_out = c->out_off < c->out.len;
        }
        /* room for the next read: a whole native frame must fit */
        if (c->in_off > 0 && c->in_cap - c->in_len < 65536) {
            memmove(c->in, c->in + c->in_off, c->in_len - c->in_off);
            c->in_len -= c->in_off;
            c->in_off = 0;
        }
        if (c->in_cap - c->in_len < 65536) {
            size_t cap = c->in_cap ? c->in_cap * 2 : 262144;
            uint8_t *q = realloc(c->in, cap);
            if (q == NULL)
                return -ENOMEM;
            c->in = q;
            c->in_cap = cap;
        }
        ssize_t r = read(c->fd, c->in + c->in_len, c->in_cap - c->in_len);
        if (r > 0) {
            c->in_len += (size_t)r;
            continue;
        }
        if (r == 0)
            return RK_ECLOSED;
        if (errno != EAGAIN && errno != EINTR)
            return -errno;
        uint64_t now = now_ns();
        if (deadline_ns <= now)
            return RK_ETIMEOUT;
        uint64_t left = deadline_ns - now;
        struct timespec ts = {.tv_sec = (time_t)(left / 1000000000u),
                              .tv_nsec = (long)(left % 1000000000u)};
        struct pollfd pfd = {.fd = c->fd,
                             .events = POLLIN | (want_out ? POLLOUT : 0)};
        if (ppoll(&pfd, 1, &ts, NULL) < 0 && errno != EINTR)
            return -errno;
    }
}

/* ---- workers ----------------------------------------------------------------
 */

struct slot {
    uint64_t id, t0, key;
    bool read;
};

struct worker {
    const struct conf *cf;
    int idx;
    pthread_t th;
    struct hist lat_r, lat_w;
    uint64_t reads, writes, misses, errors, late, retried;
    uint64_t err_by[NERR];
    char first_err[256];
};

static void
note_err(struct worker *w, int kind, uint64_t n, uint64_t t1, const char *why)
{
    w->errors += n;
    w->err_by[kind] += n;
    uint64_t sec = (t1 - g_t0) / 1000000000u;
    if (sec < MAX_SECONDS)
        atomic_fetch_add(&g_sec_err[sec], n);
    if (w->first_err[0] == '\0')
        snprintf(w->first_err, sizeof(w->first_err), "%s", why);
}

static int push_retry(uint64_t **keys, size_t *n, size_t *cap, uint64_t k)
{
    if (*n == *cap) {
        size_t nc = *cap ? *cap * 2 : 1024;
        uint64_t *q = realloc(*keys, nc * sizeof(*q));
        if (q == NULL)
            return -ENOMEM;
        *keys = q;
        *cap = nc;
    }
    (*keys)[(*n)++] = k;
    return 0;
}

static void *worker_main(void *arg)
{
    struct worker *w = arg;
    const struct conf *cf = w->cf;
    struct conn c = {.cf = cf, .fd = -1};
    /* --load: keys refused (OVERLOADED, ...) or lost with a connection,
     * written again 10 ms later, so that every key is loaded */
    uint64_t *retry = NULL, retry_at = 0;
    size_t nretry = 0, retry_cap = 0;
    struct slot *slots = calloc((size_t)cf->depth, sizeof(*slots));
    uint8_t *val = malloc(cf->vsize ? cf->vsize : 1);
    uint64_t rs = cf->seed * 1000003u + (uint64_t)w->idx + 1;
    if (slots == NULL || val == NULL) {
        snprintf(w->first_err, sizeof(w->first_err), "out of memory");
        goto out;
    }
    for (size_t i = 0; i < cf->vsize; i++)
        val[i] = (uint8_t)('a' + rng_next(&rs) % 26);
    /* --load: this thread's share of the keys, in order */
    uint64_t lk = cf->keys * (uint64_t)w->idx / (uint64_t)cf->conns;
    uint64_t lk_end = cf->keys * (uint64_t)(w->idx + 1) / (uint64_t)cf->conns;
    uint64_t interval =
        cf->rate > 0 && !cf->load ? (uint64_t)(1e9 * cf->conns / cf->rate) : 0;
    uint64_t next = g_t0 + interval * (uint64_t)w->idx / (uint64_t)cf->conns;
    uint64_t end = g_t0 + (uint64_t)(cf->duration * 1e9);
    uint64_t warm = g_t0 + (uint64_t)(cf->warmup * 1e9);
    uint64_t tmo = (uint64_t)cf->timeout_ms * 1000000u;
    int head = 0, inflight = 0; /* slots form a ring, oldest at head */
    char key[32];
    while (1) {
        uint64_t now = now_ns();
        bool sending = cf->load ? lk < lk_end || nretry > 0 : now < end;
        if (c.fd < 0 && sending) {
            int rc = conn_open(&c, w->idx % cf->nhosts);
            if (rc != 0) {
                note_err(w, 0, 1, now, rk_strerror(rc));
                usleep(100000);
                continue;
            }
        }
        while (sending && inflight < cf->depth &&
               (interval == 0 || next <= now)) {
            uint64_t k;
            bool read;
            if (cf->load) {
                if (nretry > 0 && now >= retry_at)
                    k = retry[--nretry];
                else if (lk < lk_end)
                    k = lk++;
                else
                    break;
                read = false;
            } else {
                k = ycsb_key(&g_zipf, cf->keys, rng_unit(&rs));
                read = rng_unit(&rs) < cf->reads;
            }
            int kl = snprintf(key, sizeof(key), "user%" PRIu64, k);
            uint64_t id;
            int rc = conn_send(&c, &id, key, (size_t)kl, read ? NULL : val,
                               cf->vsize);
            if (rc != 0) {
                note_err(w, 3, 1, now, rk_strerror(rc));
                goto out;
            }
            int s = (head + inflight) % cf->depth;
            slots[s] = (struct slot){id, interval ? next : now, k, read};
            inflight++;
            if (interval)
                next += interval;
            sending = cf->load ? lk < lk_end || nretry > 0 : now < end;
        }
        if (inflight == 0) {
            if (!sending)
                break;
            if (cf->load && lk == lk_end && now < retry_at)
                usleep((useconds_t)((retry_at - now) / 1000 + 1));
            if (interval && next > now) {
                struct timespec ts = {
                    .tv_sec = (time_t)((next - now) / 1000000000u),
                    .tv_nsec = (long)((next - now) % 1000000000u)};
                nanosleep(&ts, NULL);
            }
            continue;
        }
        /* wait for a reply until the next send is due (or for long when
         * the window is full or nothing more will be sent) */
        bool can_send = sending && inflight < cf->depth && interval;
        uint64_t deadline = can_send ? next : now + tmo;
        uint64_t id = 0;
        enum reply rep;
        int rc = conn_wait(&c, &id, &rep, deadline);
        uint64_t t1 = now_ns();
        if (rc == RK_ETIMEOUT && can_send)
            continue;
        if (rc != 0) {
            /* lost or stuck: everything in flight is abandoned (and
             * written again when loading) */
            for (int i = 0; cf->load && i < inflight; i++)
                if (push_retry(&retry, &nretry, &retry_cap,
                               slots[(head + i) % cf->depth].key) != 0)
                    goto out;
            w->retried += cf->load ? (uint64_t)inflight : 0;
            retry_at = t1 + 10000000u;
            note_err(w,
                     rc == RK_ETIMEOUT ? 1
                     : rc == RK_EPROTO ? 3
                                       : 0,
                     (uint64_t)inflight, t1, rk_strerror(rc));
            conn_close(&c);
            inflight = 0;
            continue;
        }
        if (!cf->resp) {
            /* the node answers in any order */
            int i = 0;
            while (i < inflight && slots[(head + i) % cf->depth].id != id)
                i++;
            if (i == inflight) {
                note_err(w, 3, 1, t1, "response to an unknown id");
                continue;
            }
            int s = (head + i) % cf->depth;
            struct slot tmp = slots[s];
            slots[s] = slots[head];
            slots[head] = tmp;
        }
        struct slot sl = slots[head];
        head = (head + 1) % cf->depth;
        inflight--;
        if (rep == REPLY_ERR && cf->load) {
            if (push_retry(&retry, &nretry, &retry_cap, sl.key) != 0)
                goto out;
            w->retried++;
            retry_at = t1 + 10000000u;
            if (w->first_err[0] == '\0')
                snprintf(w->first_err, sizeof(w->first_err), "%s (retried)",
                         c.err);
            continue;
        }
        if (rep == REPLY_ERR) {
            note_err(w, 2, 1, t1, c.err);
            continue;
        }
        uint64_t sec = (t1 - g_t0) / 1000000000u;
        if (sec < MAX_SECONDS)
            atomic_fetch_add(&g_sec_ops[sec], 1);
        if (sl.t0 >= warm || cf->load)
            hist_add(sl.read ? &w->lat_r : &w->lat_w, (t1 - sl.t0) / 1000);
        if (sl.read)
            w->reads++;
        else
            w->writes++;
        w->misses += rep == REPLY_MISS;
        w->late += t1 > end && !cf->load;
    }
out:
    free(retry);
    conn_close(&c);
    wire_cbuf_release(&c.out);
    free(c.in);
    free(slots);
    free(val);
    return NULL;
}

/* ---- self test --------------------------------------------------------------
 */

static int fail(const char *what, double got, double want)
{
    fprintf(stderr, "self-test: %s: got %.9g, want %.9g\n", what, got, want);
    return 1;
}

/* zeta(n, theta) = sum 1/i^theta for i = 1..n: the first 10^6 terms
 * summed, the rest by Euler-Maclaurin (integral, end points, first
 * derivative term), exact to ~1e-12 here. */
static double zeta_approx(double n, double theta)
{
    double m = 1e6, s = 0;
    for (double i = 1; i <= m; i++)
        s += pow(i, -theta);
    double f_m = pow(m, -theta), f_n = pow(n, -theta);
    s += (pow(n, 1 - theta) - pow(m, 1 - theta)) / (1 - theta);
    s += (f_n - f_m) / 2;
    s += -theta * (pow(n, -theta - 1) - pow(m, -theta - 1)) / 12;
    return s;
}

static int self_test(void)
{
    int bad = 0;
    /* YCSB's constant is zeta(10^10 + 1, 0.99) */
    double z = zeta_approx((double)ZIPF_ITEM_COUNT + 1, ZIPF_CONSTANT);
    if (fabs(z - ZIPF_ZETAN) > 1e-9 * ZIPF_ZETAN)
        bad |= fail("zeta(1e10+1, 0.99)", z, ZIPF_ZETAN);
    /* the chooser against the distribution it claims: the frequencies of
     * the three most popular items over 4 million draws */
    struct zipf zp;
    zipf_init(&zp, (double)ZIPF_ITEM_COUNT + 1, ZIPF_CONSTANT, ZIPF_ZETAN);
    uint64_t rs = 42, n = 4000000, cnt[3] = {0};
    for (uint64_t i = 0; i < n; i++) {
        uint64_t it = zipf_item(&zp, rng_unit(&rs));
        if (it > ZIPF_ITEM_COUNT)
            return fail("item out of range", (double)it, 0);
        if (it < 3)
            cnt[it]++;
    }
    for (int i = 0; i < 3; i++) {
        double want = pow(i + 1, -ZIPF_CONSTANT) / ZIPF_ZETAN;
        double got = (double)cnt[i] / (double)n;
        /* items 0 and 1 are exact by construction; item 2 and on come
         * from the continuous approximation (Gray et al.) */
        if (fabs(got - want) > (i < 2 ? 0.02 : 0.25) * want)
            bad |= fail(i == 0   ? "P(item 0)"
                        : i == 1 ? "P(item 1)"
                                 : "P(item 2)",
                        got, want);
    }
    /* the extremes: u = 0 is item 0; u near 1 the last items */
    if (zipf_item(&zp, 0.0) != 0)
        bad |= fail("item(0)", (double)zipf_item(&zp, 0.0), 0);
    if (zipf_item(&zp, 0.999999999) < ZIPF_ITEM_COUNT / 2)
        bad |= fail("item(1-)", (double)zipf_item(&zp, 0.999999999), 1e10);
    /* the scramble: FNV-1a-64 of eight zero bytes is 0xa8c7f832281a39c5
     * (computed apart, in Python), negative as a Java long; Math.abs
     * makes it this. Then the key range. */
    if (fnv64(0) != 0x573807cdd7e5c63bull)
        bad |= fail("fnv64(0)", (double)fnv64(0), 0);
    uint64_t hot = ycsb_key(&zp, 1000000, 0.0);
    if (hot != fnv64(0) % 1000000)
        bad |= fail("hot key", (double)hot, (double)(fnv64(0) % 1000000));
    rs = 7;
    for (int i = 0; i < 100000; i++)
        if (ycsb_key(&zp, 1000, rng_unit(&rs)) >= 1000)
            return fail("key out of range", 0, 1000);
    /* histogram: every value lands in a bucket whose middle is within
     * 1/256 of it, and percentiles of 1..100000 are within that */
    for (uint64_t v = 0; v < 50000000; v = v * 1.001 + 1) {
        uint64_t m = hist_value(hist_index(v));
        if (fabs((double)m - (double)v) > (double)v / 256.0 + 0.5)
            bad |= fail("bucket middle", (double)m, (double)v);
    }
    static struct hist h;
    for (uint64_t v = 1; v <= 100000; v++)
        hist_add(&h, v);
    double ps[] = {50, 95, 99, 99.9};
    for (int i = 0; i < 4; i++) {
        double got = (double)hist_pct(&h, ps[i]), want = ps[i] * 1000;
        if (fabs(got - want) > want / 128)
            bad |= fail("percentile", got, want);
    }
    if (!bad)
        printf("self-test: ok (zeta %.14g, P(0) %.5f, fnv64(0) %016" PRIx64
               ")\n",
               z, (double)cnt[0] / (double)n, fnv64(0));
    return bad;
}

/* ---- main -------------------------------------------------------------------
 */

static const char usage[] =
    "usage: ringkv-ycsb [options]\n"
    "  -h, --host IP[:PORT],.. targets, connection i to the i-th mod their\n"
    "                          number (default 127.0.0.1:7380; RESP: 6379)\n"
    "      --resp              speak RESP (redis-server) instead of ringkv's\n"
    "                          native protocol\n"
    "  -w, --workload A|B|C    YCSB mix: A 50% reads, B 95%, C 100%\n"
    "  -r, --reads F           fraction of reads instead, 0..1\n"
    "  -k, --keys N            keys user0..user(N-1) (default 1000000)\n"
    "  -d, --value-size B      value bytes (default 1024)\n"
    "      --consistency L     ONE TWO QUORUM ALL ... (native; default: the\n"
    "                          server's)\n"
    "  -c, --connections N     connections, one thread each (default 8)\n"
    "  -P, --pipeline N        most requests in flight per connection\n"
    "                          (default 16)\n"
    "  -R, --rate OPS          offered load, ops/s in all (default 0: as\n"
    "                          fast as the window allows, closed loop)\n"
    "  -t, --duration S        seconds to offer load (default 10)\n"
    "      --warmup S          latencies of ops due in the first S seconds\n"
    "                          are not recorded (default 1)\n"
    "      --load              write every key once, then stop\n"
    "      --timeout MS        a reply later than this abandons the\n"
    "                          connection's window (default 10000)\n"
    "      --seed N            (default 1)\n"
    "      --self-test         check the zipfian and the histogram\n"
    "output: JSON lines, {\"type\":\"second\",...} per second of the run,\n"
    "then {\"type\":\"summary\",...}; latencies in ms from the intended\n"
    "send time.\n";

static int bad(const char *opt, const char *val)
{
    fprintf(stderr, "ringkv-ycsb: bad value for %s: %s\n%s", opt,
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

static void print_lat(const char *name, const struct hist *h)
{
    printf(",\"%s\":{\"count\":%" PRIu64 ",\"mean\":%.3f,\"p50\":%.3f,"
           "\"p95\":%.3f,\"p99\":%.3f,\"p999\":%.3f,\"max\":%.3f}",
           name, h->count,
           h->count ? (double)h->sum / (double)h->count / 1000.0 : 0.0,
           (double)hist_pct(h, 50) / 1000.0, (double)hist_pct(h, 95) / 1000.0,
           (double)hist_pct(h, 99) / 1000.0, (double)hist_pct(h, 99.9) / 1000.0,
           (double)h->max / 1000.0);
}

int main(int argc, char **argv)
{
    struct conf cf = {.conns = 8,
                      .depth = 16,
                      .vsize = 1024,
                      .reads = 0.5,
                      .keys = 1000000,
                      .duration = 10,
                      .warmup = 1,
                      .timeout_ms = 10000,
                      .seed = 1,
                      .workload = "A"};
    const char *hosts = "127.0.0.1";
    for (int i = 1; i < argc; i++) {
        const char *o = argv[i];
        const char *v = i + 1 < argc ? argv[i + 1] : NULL;
        double d;
        if (!strcmp(o, "--resp")) {
            cf.resp = true;
            continue;
        }
        if (!strcmp(o, "--load")) {
            cf.load = true;
            continue;
        }
        if (!strcmp(o, "--self-test"))
            return self_test();
        if (!strcmp(o, "--help")) {
            fputs(usage, stdout);
            return 0;
        }
        i++;
        if (!strcmp(o, "-h") || !strcmp(o, "--host")) {
            if (v == NULL)
                return bad(o, v);
            hosts = v;
        } else if (!strcmp(o, "-w") || !strcmp(o, "--workload")) {
            if (v == NULL || strlen(v) != 1 || !strchr("ABCabc", v[0]))
                return bad(o, v);
            char wl = (char)(v[0] & ~0x20);
            cf.reads = wl == 'A' ? 0.5 : wl == 'B' ? 0.95 : 1.0;
            cf.workload = wl == 'A' ? "A" : wl == 'B' ? "B" : "C";
        } else if (!strcmp(o, "-r") || !strcmp(o, "--reads")) {
            if (!num(v, 0, 1, &cf.reads))
                return bad(o, v);
            cf.workload = "custom";
        } else if (!strcmp(o, "-k") || !strcmp(o, "--keys")) {
            if (!num(v, 1, 1e15, &d))
                return bad(o, v);
            cf.keys = (uint64_t)d;
        } else if (!strcmp(o, "-d") || !strcmp(o, "--value-size")) {
            if (!num(v, 0, RK_MAX_VALUE, &d))
                return bad(o, v);
            cf.vsize = (size_t)d;
        } else if (!strcmp(o, "--consistency")) {
            if (v == NULL || wire_ccl_parse(&cf.cl, v) != 0)
                return bad(o, v);
        } else if (!strcmp(o, "-c") || !strcmp(o, "--connections")) {
            if (!num(v, 1, 1024, &d))
                return bad(o, v);
            cf.conns = (int)d;
        } else if (!strcmp(o, "-P") || !strcmp(o, "--pipeline")) {
            if (!num(v, 1, 4096, &d))
                return bad(o, v);
            cf.depth = (int)d;
        } else if (!strcmp(o, "-R") || !strcmp(o, "--rate")) {
            if (!num(v, 0, 1e9, &cf.rate))
                return bad(o, v);
        } else if (!strcmp(o, "-t") || !strcmp(o, "--duration")) {
            if (!num(v, 0.01, MAX_SECONDS - 60, &cf.duration))
                return bad(o, v);
        } else if (!strcmp(o, "--warmup")) {
            if (!num(v, 0, 1e6, &cf.warmup))
                return bad(o, v);
        } else if (!strcmp(o, "--timeout")) {
            if (!num(v, 1, 3600000, &d))
                return bad(o, v);
            cf.timeout_ms = (int)d;
        } else if (!strcmp(o, "--seed")) {
            if (!num(v, 0, 1e15, &d))
                return bad(o, v);
            cf.seed = (uint64_t)d;
        } else {
            fprintf(stderr, "ringkv-ycsb: unknown option %s\n%s", o, usage);
            return 2;
        }
    }
    for (const char *p = hosts; *p;) {
        size_t n = strcspn(p, ",");
        if (cf.nhosts == MAX_HOSTS || n == 0 || n >= sizeof(cf.host[0]))
            return bad("--host", hosts);
        char *h = cf.host[cf.nhosts];
        memcpy(h, p, n);
        h[n] = '\0';
        char *colon = strchr(h, ':');
        double d = cf.resp ? 6379 : 7380;
        if (colon) {
            *colon = '\0';
            if (!num(colon + 1, 1, 65535, &d))
                return bad("--host", hosts);
        }
        cf.port[cf.nhosts++] = (int)d;
        p += n + (p[n] == ',');
    }
    if (cf.warmup >= cf.duration)
        cf.warmup = 0;
    signal(SIGPIPE, SIG_IGN);
    zipf_init(&g_zipf, (double)ZIPF_ITEM_COUNT + 1, ZIPF_CONSTANT, ZIPF_ZETAN);
    struct worker *w = calloc((size_t)cf.conns, sizeof(*w));
    if (w == NULL)
        return 8;
    g_t0 = now_ns() + 1000000; /* a millisecond to start the threads */
    int started = 0;
    for (int i = 0; i < cf.conns; i++) {
        w[i].cf = &cf;
        w[i].idx = i;
        if (pthread_create(&w[i].th, NULL, worker_main, &w[i]) != 0)
            break;
        started++;
    }
    for (int i = 0; i < started; i++)
        pthread_join(w[i].th, NULL);
    uint64_t t_end = now_ns();
    double secs = (double)(t_end - g_t0) / 1e9;
    static struct hist all, all_r, all_w;
    uint64_t reads = 0, writes = 0, misses = 0, errors = 0, late = 0;
    uint64_t retried = 0;
    uint64_t by[NERR] = {0};
    const char *first_err = NULL;
    for (int i = 0; i < started; i++) {
        hist_merge(&all_r, &w[i].lat_r);
        hist_merge(&all_w, &w[i].lat_w);
        reads += w[i].reads;
        writes += w[i].writes;
        misses += w[i].misses;
        errors += w[i].errors;
        late += w[i].late;
        retried += w[i].retried;
        for (int k = 0; k < NERR; k++)
            by[k] += w[i].err_by[k];
        if (first_err == NULL && w[i].first_err[0])
            first_err = w[i].first_err;
    }
    hist_merge(&all, &all_r);
    hist_merge(&all, &all_w);
    /* throughput over time: completions per whole second */
    uint64_t nsec = (uint64_t)ceil(secs);
    if (nsec > MAX_SECONDS)
        nsec = MAX_SECONDS;
    for (uint64_t s = 0; s < nsec; s++)
        printf("{\"type\":\"second\",\"t\":%" PRIu64 ",\"ops\":%" PRIu64
               ",\"errors\":%" PRIu64 "}\n",
               s, (uint64_t)atomic_load(&g_sec_ops[s]),
               (uint64_t)atomic_load(&g_sec_err[s]));
    uint64_t done = reads + writes;
    /* a timed run's throughput counts what completed within its duration */
    double window = cf.load ? secs : cf.duration;
    double ops_s = (double)(done - late) / window;
    printf(
        "{\"type\":\"summary\",\"target\":\"%s\",\"host\":\"%s:%d\","
        "\"hosts\":%d,\"workload\":\"%s\",\"load\":%s,\"reads_fraction\":%.3f,"
        "\"keys\":%" PRIu64 ",\"value_size\":%zu,\"consistency\":\"%s\","
        "\"connections\":%d,\"pipeline\":%d,\"offered_ops_per_sec\":%.1f,"
        "\"seconds\":%.3f,\"ops\":%" PRIu64 ",\"ops_per_sec\":%.1f,"
        "\"mib_per_sec\":%.3f,\"reads\":%" PRIu64 ",\"writes\":%" PRIu64
        ",\"misses\":%" PRIu64 ",\"errors\":%" PRIu64
        ",\"load_retries\":%" PRIu64,
        cf.resp ? "resp" : "native", cf.host[0], cf.port[0], cf.nhosts,
        cf.load ? "load" : cf.workload, cf.load ? "true" : "false",
        cf.load ? 0.0 : cf.reads, cf.keys, cf.vsize,
        cf.resp ? "n/a" : wire_ccl_name(cf.cl), cf.conns, cf.depth, cf.rate,
        secs, done, ops_s, ops_s * (double)cf.vsize / 1048576.0, reads, writes,
        misses, errors, retried);
    printf(",\"errors_by_type\":{");
    for (int k = 0; k < NERR; k++)
        printf("%s\"%s\":%" PRIu64, k ? "," : "", err_names[k], by[k]);
    printf("}");
    print_lat("latency_ms", &all);
    print_lat("read_latency_ms", &all_r);
    print_lat("update_latency_ms", &all_w);
    printf(",\"first_error\":\"");
    for (const char *p = first_err ? first_err : ""; *p; p++)
        if (*p != '"' && *p != '\\' && (unsigned char)*p >= 0x20)
            putchar(*p);
    printf("\"}\n");
    free(w);
    return errors && done == 0 ? 3 : 0;
}
