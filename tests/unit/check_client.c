/*
 * check_client.c - libringkv against a fake server thread on 127.0.0.1.
 *
 * The fake server speaks the native protocol through the same codecs and
 * misbehaves on cue by key: "slow" is never answered, "drop" closes the
 * connection, "droponce" closes it the first time only, "applydrop" (PUT,
 * DEL) is applied and counted, then the connection is closed unanswered,
 * "closeafter" is answered and then the connection closed, "unavail" and
 * "timeout" answer typed errors, "garbage" answers an undecodable frame. With
 * close_partial set it closes the connection once while a request frame is
 * still arriving (64 KiB of it read). In
 * reverse mode it collects ten requests and answers them last-first, so the
 * client must match responses by id.
 *
 * The "programs" cases run the built `ringkv` and `ringkv-load` binaries
 * (found next to this test binary) against the same fake server and check
 * their output and exit codes.
 */
#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <netinet/in.h>
#include <poll.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <check.h>

#include "client/ringkv.h"
#include "common/rk.h"
#include "wire/client_msg.h"

#define NKV 64

struct fake {
    int lfd;
    uint16_t port;
    pthread_t th;
    atomic_bool stop;
    bool reverse;         /* answer in batches of ten, last first */
    atomic_bool stale;    /* answer every op but PING with RING_STALE */
    const char *password; /* required when set */
    atomic_int accepted;
    atomic_int requests;
    atomic_int applied;        /* PUT/DEL of "applydrop" applied */
    atomic_bool close_partial; /* close once mid-frame */
    bool dropped_once;
    uint32_t last_cl;
    uint32_t last_ttl;
    char last_user[16]; /* the last HELLO's user; "" when it named none */
    struct {
        char key[64];
        uint8_t *val;
        size_t len;
        bool used;
    } kv[NKV];
};

static bool key_is(const struct wire_creq *q, const char *s)
{
    return q->key.len == strlen(s) && memcmp(q->key.p, s, q->key.len) == 0;
}

static int kv_find(struct fake *f, struct rk_slice k, bool create)
{
    for (int i = 0; i < NKV; i++)
        if (f->kv[i].used && strlen(f->kv[i].key) == k.len &&
            memcmp(f->kv[i].key, k.p, k.len) == 0)
            return i;
    if (!create || k.len >= sizeof(f->kv[0].key))
        return -1;
    for (int i = 0; i < NKV; i++) {
        if (!f->kv[i].used) {
            memcpy(f->kv[i].key, k.p, k.len);
            f->kv[i].key[k.len] = '\0';
            f->kv[i].used = true;
            return i;
        }
    }
    return -1;
}

static int write_all(int fd, const uint8_t *p, size_t n)
{
    while (n > 0) {
        ssize_t w = send(fd, p, n, MSG_NOSIGNAL);
        if (w <= 0) {
            if (w < 0 && errno == EINTR)
                continue;
            return -1;
        }
        p += w;
        n -= (size_t)w;
    }
    return 0;
}

/* STATUS rows of the fake (cli_status changes one's replication). */
#define SL(lit)                                 \
    {                                           \
        (const uint8_t *)(lit), sizeof(lit) - 1 \
    }
static struct wire_cnode nodes[] = {{.name = SL("n1"),
                                     .addr = SL("127.0.0.11:7380"),
                                     .dc = SL("dc1"),
                                     .rack = SL("r1"),
                                     .state = SL("UN"),
                                     .load = 1536,
                                     .tokens = 16,
                                     .owns = 0.5,
                                     .repl = SL("dc1:3")},
                                    {.name = SL("n2"),
                                     .addr = SL("127.0.0.12:7380"),
                                     .dc = SL("dc1"),
                                     .rack = SL("r2"),
                                     .state = SL("DN"),
                                     .tokens = 16,
                                     .owns = 0.5,
                                     .repl = SL("dc1:3"),
                                     .clock_ahead_ms = 600000,
                                     .clock_far = true}};
#undef SL

/* Build the answer to q into out; returns 1 to send it, 0 to stay silent,
 * -1 to close the connection, 2 to send garbage, 3 to send it and then
 * close the connection. */
static int fake_answer(struct fake *f,
                       bool *authed,
                       const struct wire_creq *q,
                       struct wire_cresp *r)
{
    memset(r, 0, sizeof(*r));
    r->id = q->id;
    r->op = q->op;
    if (q->has & WIRE_CREQ_CL)
        f->last_cl = q->cl;
    if (q->op == WIRE_COP_PUT)
        f->last_ttl = (q->has & WIRE_CREQ_TTL) ? q->ttl : 0;
    if (q->op == WIRE_COP_HELLO) {
        snprintf(f->last_user, sizeof(f->last_user), "%.*s",
                 (q->has & WIRE_CREQ_USER) ? (int)q->user.len : 0,
                 (const char *)q->user.p);
        if (f->password != NULL &&
            (!(q->has & WIRE_CREQ_PASSWORD) ||
             q->password.len != strlen(f->password) ||
             memcmp(q->password.p, f->password, q->password.len) != 0)) {
            r->err = RK_EAUTH;
            r->has = WIRE_CRESP_MSG;
            r->msg = RK_SLICE("wrong password", 14);
            return 1;
        }
        *authed = true;
        r->has = WIRE_CRESP_VERSION;
        r->version = WIRE_CPROTO_VERSION;
        return 1;
    }
    if (f->password != NULL && !*authed) {
        r->err = RK_EAUTH;
        r->has = WIRE_CRESP_MSG;
        r->msg = RK_SLICE("HELLO with a password first", 27);
        return 1;
    }
    if (atomic_load(&f->stale) && q->op != WIRE_COP_PING) {
        r->err = RK_ESTALE;
        r->has = WIRE_CRESP_MSG;
        r->msg = RK_SLICE("ring epoch 4 < 5", 16);
        return 1;
    }
    if (key_is(q, "slow"))
        return 0;
    if (key_is(q, "drop"))
        return -1;
    if (key_is(q, "droponce") && !f->dropped_once) {
        f->dropped_once = true;
        return -1;
    }
    if (key_is(q, "garbage"))
        return 2;
    if (key_is(q, "closeafter") && q->op == WIRE_COP_GET) {
        r->err = RK_ENOTFOUND;
        return 3;
    }
    if (key_is(q, "unavail")) {
        r->err = RK_EUNAVAILABLE;
        r->has = WIRE_CRESP_MSG;
        r->msg = RK_SLICE("1 of 3 replicas alive, QUORUM needs 2", 37);
        return 1;
    }
    if (key_is(q, "timeout")) {
        r->err = RK_ETIMEOUT;
        r->has = WIRE_CRESP_MSG | WIRE_CRESP_ACKS | WIRE_CRESP_NEED;
        r->msg = RK_SLICE("1 of 2 replicas answered", 24);
        r->acks = 1;
        r->need = 2;
        return 1;
    }
    switch (q->op) {
    case WIRE_COP_PING:
        return 1;
    case WIRE_COP_GET: {
        int i = kv_find(f, q->key, false);
        if (i < 0) {
            r->err = RK_ENOTFOUND;
            return 1;
        }
        r->has = WIRE_CRESP_VALUE;
        r->value = RK_SLICE(f->kv[i].val, f->kv[i].len);
        return 1;
    }
    case WIRE_COP_PUT: {
        int i = kv_find(f, q->key, true);
        if (i < 0) {
            r->err = RK_EFULL;
            return 1;
        }
        free(f->kv[i].val);
        f->kv[i].val = malloc(q->value.len + 1);
        memcpy(f->kv[i].val, q->value.p, q->value.len);
        f->kv[i].len = q->value.len;
        if (key_is(q, "applydrop")) {
            atomic_fetch_add(&f->applied, 1);
            return -1;
        }
        r->has = WIRE_CRESP_ACKS | WIRE_CRESP_NEED;
        r->acks = r->need = 2;
        return 1;
    }
    case WIRE_COP_DEL: {
        int i = kv_find(f, q->key, false);
        if (i >= 0) {
            free(f->kv[i].val);
            f->kv[i].val = NULL;
            f->kv[i].used = false;
        }
        if (key_is(q, "applydrop")) {
            atomic_fetch_add(&f->applied, 1);
            return -1;
        }
        return 1;
    }
    case WIRE_COP_ENDPOINTS: {
        static struct wire_cendpoint eps[] = {
            {{(const uint8_t *)"n2", 2},
             {(const uint8_t *)"127.0.0.12:7380", 15}},
            {{(const uint8_t *)"n1", 2},
             {(const uint8_t *)"127.0.0.11:7380", 15}}};
        r->has = WIRE_CRESP_TOKEN | WIRE_CRESP_ENDPOINTS;
        /* "badtoken" gets a token the client cannot agree with */
        r->token = key_is(q, "badtoken") ? 1 : rk_token(q->key.p, q->key.len);
        r->endpoints = eps;
        r->nendpoints = 2;
        return 1;
    }
    case WIRE_COP_RING: {
        static struct wire_ctoken toks[] = {
            {100, {(const uint8_t *)"n1", 2}},
            {UINT64_MAX, {(const uint8_t *)"n2", 2}}};
        r->has = WIRE_CRESP_EPOCH | WIRE_CRESP_FPRINT | WIRE_CRESP_TOKENS;
        r->epoch = 3;
        r->fprint = 0xabcdef;
        r->tokens = toks;
        r->ntokens = 2;
        return 1;
    }
    case WIRE_COP_SCAN: {
        /* the cursor is a slot index: `count` keys from it; match "!"
         * is refused, for the client's error path */
        static struct rk_slice keys[NKV];
        if ((q->has & WIRE_CREQ_MATCH) && q->match.len == 1 &&
            q->match.p[0] == '!') {
            r->err = RK_EBADREQ;
            return 1;
        }
        uint32_t want = (q->has & WIRE_CREQ_COUNT) ? q->count : 10;
        uint64_t i = (q->has & WIRE_CREQ_CURSOR) ? q->cursor : 0;
        r->nkeys = 0;
        for (; i < NKV && r->nkeys < want; i++)
            if (f->kv[i].used)
                keys[r->nkeys++] = RK_SLICE(f->kv[i].key, strlen(f->kv[i].key));
        r->has = WIRE_CRESP_CURSOR | WIRE_CRESP_KEYS;
        r->cursor = i < NKV ? i : 0;
        r->keys = keys;
        return 1;
    }
    case WIRE_COP_METRICS:
        r->has = WIRE_CRESP_TEXT;
        r->text = RK_SLICE("# TYPE x counter\nx 1\n", 22);
        return 1;
    case WIRE_COP_CLEANUP: /* an admin op: NOPERM but for user admin */
        if (strcmp(f->last_user, "admin") != 0) {
            r->err = RK_ENOPERM;
            r->has = WIRE_CRESP_MSG;
            r->msg = RK_SLICE("needs the admin role", 20);
            return 1;
        }
        r->has = WIRE_CRESP_TEXT;
        r->text = RK_SLICE("cleanup started", 15);
        return 1;
    case WIRE_COP_REPLICATION:
    case WIRE_COP_REPLICATION_SET:
    case WIRE_COP_REBUILD: {
        /* the op and its argument, echoed */
        static char echo[128];
        bool a = (q->has & WIRE_CREQ_ARGS) && q->nargs;
        int l = snprintf(echo, sizeof(echo), "%s %.*s", wire_cop_name(q->op),
                         a ? (int)q->args[0].len : 0,
                         a ? (const char *)q->args[0].p : "");
        r->has = WIRE_CRESP_TEXT;
        r->text = RK_SLICE(echo, (size_t)l);
        return 1;
    }
    case WIRE_COP_STATUS:
        r->has = WIRE_CRESP_EPOCH | WIRE_CRESP_FPRINT | WIRE_CRESP_NODES;
        r->epoch = 3;
        r->fprint = 0xabcdef;
        r->nodes = nodes;
        r->nnodes = 2;
        return 1;
    default:
        r->err = RK_ENOTSUP;
        r->has = WIRE_CRESP_MSG;
        r->msg = RK_SLICE("not implemented yet", 19);
        return 1;
    }
}

static void fake_serve(struct fake *f, int fd)
{
    uint8_t *in = NULL;
    size_t len = 0, cap = 0;
    bool authed = false;
    struct wire_cbuf batch[10];
    int nbatch = 0;
    memset(batch, 0, sizeof(batch));
    while (!atomic_load(&f->stop)) {
        struct pollfd p = {fd, POLLIN, 0};
        if (poll(&p, 1, 50) <= 0)
            continue;
        if (cap - len < 65536) {
            cap = cap ? cap * 2 : 131072;
            in = realloc(in, cap);
        }
        ssize_t n = recv(fd, in + len, cap - len, 0);
        if (n <= 0)
            break;
        len += (size_t)n;
        size_t off = 0;
        while (1) {
            struct rk_slice body;
            size_t used;
            if (wire_cframe_parse(&body, &used, in + off, len - off) != 0)
                goto out;
            if (used == 0) {
                if (len - off >= 65536 &&
                    atomic_exchange(&f->close_partial, false))
                    goto out;
                break;
            }
            off += used;
            atomic_fetch_add(&f->requests, 1);
            struct wire_creq q;
            struct wire_cresp r;
            int act;
            if (wire_creq_decode(&q, body.p, body.len) != 0) {
                memset(&r, 0, sizeof(r));
                r.id = q.id;
                r.err = RK_EBADREQ;
                act = 1;
            } else {
                act = fake_answer(f, &authed, &q, &r);
            }
            wire_creq_clear(&q);
            if (act < 0)
                goto out;
            if (act == 0)
                continue;
            struct wire_cbuf *b = &batch[f->reverse ? nbatch : 0];
            if (act == 2) {
                static const uint8_t junk[] = {0, 0, 0, 2, 0xc1, 0xc1};
                write_all(fd, junk, sizeof(junk));
                continue;
            }
            wire_cresp_encode(b, &r);
            if (!f->reverse) {
                write_all(fd, b->p, b->len);
                b->len = 0;
                if (act == 3)
                    goto out;
            } else if (++nbatch == 10) {
                for (int i = 9; i >= 0; i--) {
                    write_all(fd, batch[i].p, batch[i].len);
                    batch[i].len = 0;
                }
                nbatch = 0;
            }
        }
        memmove(in, in + off, len - off);
        len -= off;
    }
out:
    for (int i = 0; i < 10; i++)
        wire_cbuf_release(&batch[i]);
    free(in);
    close(fd);
}

static void *fake_main(void *arg)
{
    struct fake *f = arg;
    while (!atomic_load(&f->stop)) {
        struct pollfd p = {f->lfd, POLLIN, 0};
        if (poll(&p, 1, 50) <= 0)
            continue;
        int fd = accept(f->lfd, NULL, NULL);
        if (fd < 0)
            continue;
        atomic_fetch_add(&f->accepted, 1);
        fake_serve(f, fd);
    }
    return NULL;
}

static struct fake *fake_start(bool reverse, const char *password)
{
    struct fake *f = calloc(1, sizeof(*f));
    ck_assert_ptr_nonnull(f);
    f->reverse = reverse;
    f->password = password;
    f->lfd = socket(AF_INET, SOCK_STREAM, 0);
    ck_assert_int_ge(f->lfd, 0);
    struct sockaddr_in a = {.sin_family = AF_INET,
                            .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
    ck_assert_int_eq(bind(f->lfd, (struct sockaddr *)&a, sizeof(a)), 0);
    socklen_t sl = sizeof(a);
    ck_assert_int_eq(getsockname(f->lfd, (struct sockaddr *)&a, &sl), 0);
    f->port = ntohs(a.sin_port);
    ck_assert_int_eq(listen(f->lfd, 16), 0);
    ck_assert_int_eq(pthread_create(&f->th, NULL, fake_main, f), 0);
    return f;
}

static void fake_stop(struct fake *f)
{
    atomic_store(&f->stop, true);
    pthread_join(f->th, NULL);
    close(f->lfd);
    for (int i = 0; i < NKV; i++)
        free(f->kv[i].val);
    free(f);
}

/* A port on 127.0.0.1 with nothing listening. */
static uint16_t dead_port(void)
{
    int fd = socket(AF_INET, SOCK_STREAM, 0);
    struct sockaddr_in a = {.sin_family = AF_INET,
                            .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
    bind(fd, (struct sockaddr *)&a, sizeof(a));
    socklen_t sl = sizeof(a);
    getsockname(fd, (struct sockaddr *)&a, &sl);
    close(fd);
    return ntohs(a.sin_port);
}

static ringkv *client_for(struct fake *f, const char *password, int timeout)
{
    char hosts[64];
    snprintf(hosts, sizeof(hosts), "127.0.0.1:%u", f->port);
    struct ringkv_opts o = RINGKV_OPTS_INIT;
    o.hosts = hosts;
    o.password = password;
    o.timeout_ms = timeout;
    ringkv *c = NULL;
    ck_assert_int_eq(ringkv_new(&c, &o, NULL), 0);
    return c;
}

/* ---- tests ----------------------------------------------------------------
 */

START_TEST(sync_put_get_del)
{
    struct fake *f = fake_start(false, NULL);
    ringkv *c = client_for(f, NULL, 5000);
    uint8_t *v;
    size_t n;
    ck_assert_int_eq(ringkv_get(c, &v, &n, "k", 1), RK_ENOTFOUND);
    ck_assert_ptr_null(v);
    ck_assert_int_eq(ringkv_put(c, "k", 1, "hello", 5, 0), 0);
    ck_assert_int_eq(ringkv_get(c, &v, &n, "k", 1), 0);
    ck_assert_uint_eq(n, 5);
    ck_assert_str_eq((char *)v, "hello");
    free(v);
    ck_assert_int_eq(ringkv_put(c, "e", 1, "", 0, 60), 0);
    ck_assert_int_eq(ringkv_get(c, &v, &n, "e", 1), 0);
    ck_assert_uint_eq(n, 0);
    free(v);
    ck_assert_int_eq(ringkv_del(c, "k", 1), 0);
    ck_assert_int_eq(ringkv_get(c, &v, &n, "k", 1), RK_ENOTFOUND);
    ck_assert_int_eq(atomic_load(&f->accepted), 1);
    /* invalid requests fail locally, without a round trip */
    int before = atomic_load(&f->requests);
    ck_assert_int_eq(ringkv_get(c, &v, &n, "", 0), RK_EBADREQ);
    ck_assert_int_eq(atomic_load(&f->requests), before);
    ringkv_free(c);
    fake_stop(f);
}
END_TEST

struct seen {
    int n, stop_at;
    char keys[8][8];
};

static int on_key(const uint8_t *key, size_t len, void *arg)
{
    struct seen *s = arg;
    if (s->n == s->stop_at)
        return 42;
    ck_assert(s->n < 8 && len < 8);
    memcpy(s->keys[s->n], key, len);
    s->keys[s->n++][len] = '\0';
    return 0;
}

/* ringkv_scan: one call each; the cursor moves on success only, and the
 * callback sees each key of the answer (and can stop the walk). */
START_TEST(scan_calls)
{
    struct fake *f = fake_start(false, NULL);
    ringkv *c = client_for(f, NULL, 2000);
    const char *names[] = {"a", "b", "c", "d", "e"};
    for (int i = 0; i < 5; i++)
        ck_assert_int_eq(ringkv_put(c, names[i], 1, "v", 1, 0), 0);
    struct seen s = {.stop_at = -1};
    uint64_t cursor = 0;
    int calls = 0;
    do {
        ck_assert_int_eq(ringkv_scan(c, &cursor, NULL, 2, on_key, &s), 0);
        calls++;
    } while (cursor != 0);
    ck_assert_int_eq(s.n, 5);
    ck_assert_int_eq(calls, 3);
    for (int i = 0; i < 5; i++) {
        bool found = false;
        for (int k = 0; k < s.n; k++)
            found |= strcmp(s.keys[k], names[i]) == 0;
        ck_assert(found);
    }
    /* an error: the cursor stays where it was, to call again */
    cursor = 3;
    ck_assert_int_eq(ringkv_scan(c, &cursor, "!", 2, on_key, &s), RK_EBADREQ);
    ck_assert_uint_eq(cursor, 3);
    /* the callback stops the walk: its return, cursor unchanged */
    s = (struct seen){.stop_at = 1};
    cursor = 0;
    ck_assert_int_eq(ringkv_scan(c, &cursor, NULL, 4, on_key, &s), 42);
    ck_assert_uint_eq(cursor, 0);
    ck_assert_int_eq(s.n, 1);
    ringkv_free(c);
    fake_stop(f);
}
END_TEST

START_TEST(large_values)
{
    struct fake *f = fake_start(false, NULL);
    ringkv *c = client_for(f, NULL, 20000);
    size_t n = 4u << 20;
    uint8_t *big = malloc(n);
    for (size_t i = 0; i < n; i++)
        big[i] = (uint8_t)(i * 7 + (i >> 13));
    ck_assert_int_eq(ringkv_put(c, "big", 3, big, n, 0), 0);
    uint8_t *v;
    size_t vn;
    ck_assert_int_eq(ringkv_get(c, &v, &vn, "big", 3), 0);
    ck_assert_uint_eq(vn, n);
    ck_assert_mem_eq(v, big, n);
    free(v);
    free(big);
    ringkv_free(c);
    fake_stop(f);
}
END_TEST

START_TEST(pipelined_out_of_order)
{
    struct fake *f = fake_start(true, NULL);
    ringkv *c = client_for(f, NULL, 10000);
    enum { N = 200 };
    uint64_t ids[N];
    char keys[N][16];
    /* 100 puts then 100 gets of the same keys, all in flight at once */
    for (int i = 0; i < N; i++) {
        snprintf(keys[i], sizeof(keys[i]), "key%d", i % 50);
        struct wire_creq q = {.op = i < 100 ? WIRE_COP_PUT : WIRE_COP_GET,
                              .has = WIRE_CREQ_KEY,
                              .key = RK_SLICE(keys[i], strlen(keys[i]))};
        if (i < 100) {
            q.has |= WIRE_CREQ_VALUE;
            q.value = q.key;
        }
        ck_assert_int_eq(ringkv_send(c, &ids[i], &q), 0);
    }
    ck_assert_uint_eq(ringkv_pending(c), N);
    ck_assert_int_eq(ringkv_flush(c), 0);
    bool seen[N] = {false};
    int out_of_order = 0;
    uint64_t last = 0;
    for (int k = 0; k < N; k++) {
        struct wire_cresp r;
        ck_assert_int_eq(ringkv_recv(c, &r, -1), 0);
        ck_assert_int_eq(r.err, 0);
        int i = -1;
        for (int j = 0; j < N; j++)
            if (ids[j] == r.id)
                i = j;
        ck_assert_int_ge(i, 0);
        ck_assert(!seen[i]);
        seen[i] = true;
        out_of_order += r.id < last;
        last = r.id;
        if (i >= 100) {
            ck_assert_uint_eq(r.op, WIRE_COP_GET);
            ck_assert_uint_eq(r.value.len, strlen(keys[i]));
            ck_assert_mem_eq(r.value.p, keys[i], r.value.len);
        } else {
            ck_assert_uint_eq(r.op, WIRE_COP_PUT);
        }
        wire_cresp_clear(&r);
    }
    /* the fake answers each batch of ten last-first */
    ck_assert_int_eq(out_of_order, N - N / 10);
    ck_assert_uint_eq(ringkv_pending(c), 0);
    struct wire_cresp r;
    ck_assert_int_eq(ringkv_recv(c, &r, 10), RK_EBADREQ);
    ck_assert_int_eq(atomic_load(&f->accepted), 1);
    ringkv_free(c);
    fake_stop(f);
}
END_TEST

/* Many large requests without reading: flush must drain responses while it
 * writes, or client and server block each other forever. */
START_TEST(pipeline_does_not_deadlock)
{
    struct fake *f = fake_start(false, NULL);
    ringkv *c = client_for(f, NULL, 30000);
    enum { N = 3000 };
    static uint8_t val[8192];
    memset(val, 'v', sizeof(val));
    for (int i = 0; i < N; i++) {
        struct wire_creq q = {.op = WIRE_COP_PUT,
                              .has = WIRE_CREQ_KEY | WIRE_CREQ_VALUE,
                              .key = RK_SLICE("same", 4),
                              .value = RK_SLICE(val, sizeof(val))};
        ck_assert_int_eq(ringkv_send(c, NULL, &q), 0);
    }
    ck_assert_int_eq(ringkv_flush(c), 0);
    for (int i = 0; i < N; i++) {
        struct wire_cresp r;
        ck_assert_int_eq(ringkv_recv(c, &r, -1), 0);
        ck_assert_int_eq(r.err, 0);
        wire_cresp_clear(&r);
    }
    ringkv_free(c);
    fake_stop(f);
}
END_TEST

START_TEST(timeouts)
{
    struct fake *f = fake_start(false, NULL);
    ringkv *c = client_for(f, NULL, 200);
    uint8_t *v;
    size_t n;
    ck_assert_int_eq(ringkv_get(c, &v, &n, "slow", 4), RK_ETIMEOUT);
    ck_assert_ptr_nonnull(strstr(ringkv_errmsg(c), "no answer"));
    /* the handle reconnects and works */
    ck_assert_int_eq(ringkv_put(c, "a", 1, "1", 1, 0), 0);
    ck_assert_int_eq(atomic_load(&f->accepted), 2);
    /* a pipelined recv timeout keeps the connection and the request */
    struct wire_creq q = {
        .op = WIRE_COP_GET, .has = WIRE_CREQ_KEY, .key = RK_SLICE("slow", 4)};
    ck_assert_int_eq(ringkv_send(c, NULL, &q), 0);
    q.key = RK_SLICE("a", 1);
    uint64_t id2;
    ck_assert_int_eq(ringkv_send(c, &id2, &q), 0);
    struct wire_cresp r;
    ck_assert_int_eq(ringkv_recv(c, &r, 5000), 0);
    ck_assert_uint_eq(r.id, id2);
    wire_cresp_clear(&r);
    ck_assert_int_eq(ringkv_recv(c, &r, 50), RK_ETIMEOUT);
    ck_assert_uint_eq(ringkv_pending(c), 1);
    ck_assert_int_eq(atomic_load(&f->accepted), 2);
    ringkv_free(c);
    fake_stop(f);
}
END_TEST

START_TEST(reconnect_and_retry)
{
    struct fake *f = fake_start(false, NULL);
    ringkv *c = client_for(f, NULL, 5000);
    ck_assert_int_eq(ringkv_put(c, "x", 1, "1", 1, 0), 0);
    /* closed the first time: a read is resent on a new connection */
    uint8_t *v;
    size_t n;
    ck_assert_int_eq(ringkv_get(c, &v, &n, "droponce", 8), RK_ENOTFOUND);
    ck_assert_int_eq(atomic_load(&f->accepted), 2);
    /* closed every time: the retry fails too */
    ck_assert_int_eq(ringkv_get(c, &v, &n, "drop", 4), RK_ECLOSED);
    ck_assert_ptr_nonnull(strstr(ringkv_errmsg(c), "closed"));
    ck_assert_int_eq(atomic_load(&f->accepted), 3);
    /* and the next call reconnects */
    ck_assert_int_eq(ringkv_get(c, &v, &n, "x", 1), 0);
    free(v);
    ck_assert_int_eq(atomic_load(&f->accepted), 4);
    /* pipelined: a lost connection fails recv and forgets what was sent */
    struct wire_creq q = {
        .op = WIRE_COP_GET, .has = WIRE_CREQ_KEY, .key = RK_SLICE("drop", 4)};
    ck_assert_int_eq(ringkv_send(c, NULL, &q), 0);
    struct wire_cresp r;
    ck_assert_int_eq(ringkv_recv(c, &r, 5000), RK_ECLOSED);
    ck_assert_uint_eq(ringkv_pending(c), 0);
    ringkv_free(c);
    fake_stop(f);
}
END_TEST

/* Regression: ringkv_call resent a PUT or DEL on a new connection after
 * the first connection broke although the request had been written whole,
 * so a write the first node had already applied was applied again with a
 * new, later timestamp (overwriting any write made in between). */
START_TEST(no_resend_of_sent_write)
{
    struct fake *f = fake_start(false, NULL);
    ringkv *c = client_for(f, NULL, 5000);
    ck_assert_int_eq(ringkv_put(c, "applydrop", 9, "v", 1, 0), RK_ECLOSED);
    ck_assert_ptr_nonnull(strstr(ringkv_errmsg(c), "PUT was sent"));
    ck_assert_ptr_nonnull(strstr(ringkv_errmsg(c), "may have been applied"));
    ck_assert_int_eq(atomic_load(&f->applied), 1);
    ck_assert_int_eq(atomic_load(&f->accepted), 1);
    ck_assert_int_eq(ringkv_del(c, "applydrop", 9), RK_ECLOSED);
    ck_assert_ptr_nonnull(strstr(ringkv_errmsg(c), "DEL was sent"));
    ck_assert_int_eq(atomic_load(&f->applied), 2);
    ck_assert_int_eq(atomic_load(&f->accepted), 2);
    /* the handle is usable again */
    ck_assert_int_eq(ringkv_put(c, "k", 1, "v", 1, 0), 0);
    /* what may be resent */
    struct wire_creq q = {.op = WIRE_COP_GET};
    static const uint32_t idem[] = {
        WIRE_COP_HELLO,         WIRE_COP_PING,     WIRE_COP_GET,
        WIRE_COP_MGET,          WIRE_COP_STATUS,   WIRE_COP_RING,
        WIRE_COP_ENDPOINTS,     WIRE_COP_METRICS,  WIRE_COP_NETSTATS,
        WIRE_COP_LISTSNAPSHOTS, WIRE_COP_RELOADTLS};
    static const uint32_t once[] = {
        WIRE_COP_PUT,          WIRE_COP_DEL,        WIRE_COP_JOIN,
        WIRE_COP_DECOMMISSION, WIRE_COP_REMOVENODE, WIRE_COP_REPAIR,
        WIRE_COP_CLEANUP,      WIRE_COP_SNAPSHOT,   WIRE_COP_CLEARSNAPSHOT};
    for (size_t i = 0; i < sizeof(idem) / sizeof(idem[0]); i++) {
        q.op = idem[i];
        ck_assert_msg(ringkv_idempotent(&q), "%s", wire_cop_name(q.op));
    }
    for (size_t i = 0; i < sizeof(once) / sizeof(once[0]); i++) {
        q.op = once[i];
        ck_assert_msg(!ringkv_idempotent(&q), "%s", wire_cop_name(q.op));
    }
    ringkv_free(c);
    fake_stop(f);
}
END_TEST

/* The client's socket to the fake (the one whose peer is the fake's
 * listening port), so a test can wait until it has seen the fake close. */
static int client_fd_to(const struct fake *f)
{
    for (int fd = 3; fd < 1024; fd++) {
        struct sockaddr_in a;
        socklen_t sl = sizeof(a);
        if (getpeername(fd, (struct sockaddr *)&a, &sl) == 0 &&
            a.sin_family == AF_INET && ntohs(a.sin_port) == f->port)
            return fd;
    }
    return -1;
}

/* A write is still resent when the server cannot have decoded it: when the
 * connection was found closed before sending, and when it broke before the
 * frame was written whole. */
START_TEST(write_resent_when_not_sent_whole)
{
    struct fake *f = fake_start(false, NULL);
    ringkv *c = client_for(f, NULL, 30000);
    uint8_t *v;
    size_t n;
    /* the fake answers, then closes the idle connection */
    ck_assert_int_eq(ringkv_get(c, &v, &n, "closeafter", 10), RK_ENOTFOUND);
    int fd = client_fd_to(f);
    ck_assert_int_ge(fd, 0);
    struct pollfd p = {fd, POLLRDHUP, 0};
    ck_assert_int_eq(poll(&p, 1, -1), 1);
    ck_assert_int_eq(ringkv_put(c, "k", 1, "v", 1, 0), 0);
    ck_assert_int_eq(atomic_load(&f->accepted), 2);
    ck_assert_int_eq(atomic_load(&f->requests), 2);
    /* the fake closes the connection 64 KiB into a 16 MiB PUT: the frame
     * cannot have been written whole (socket buffers hold a few MiB) */
    uint8_t *big = malloc(RK_MAX_VALUE);
    ck_assert_ptr_nonnull(big);
    memset(big, 'b', RK_MAX_VALUE);
    atomic_store(&f->close_partial, true);
    ck_assert_int_eq(ringkv_put(c, "big", 3, big, RK_MAX_VALUE, 0), 0);
    ck_assert(!atomic_load(&f->close_partial));
    ck_assert_int_eq(atomic_load(&f->accepted), 3);
    ck_assert_int_eq(ringkv_get(c, &v, &n, "big", 3), 0);
    ck_assert_uint_eq(n, RK_MAX_VALUE);
    free(v);
    free(big);
    ringkv_free(c);
    fake_stop(f);
}
END_TEST

START_TEST(failover_between_hosts)
{
    struct fake *f = fake_start(false, NULL);
    char hosts[128];
    snprintf(hosts, sizeof(hosts), "127.0.0.1:%u, 127.0.0.1:%u", dead_port(),
             f->port);
    struct ringkv_opts o = RINGKV_OPTS_INIT;
    o.hosts = hosts;
    ringkv *c;
    ck_assert_int_eq(ringkv_new(&c, &o, NULL), 0);
    ck_assert_int_eq(ringkv_connect(c), 0);
    char want[32];
    snprintf(want, sizeof(want), "127.0.0.1:%u", f->port);
    ck_assert_str_eq(ringkv_peer(c), want);
    ck_assert_int_eq(ringkv_put(c, "a", 1, "b", 1, 0), 0);
    ringkv_free(c);
    /* nobody listening anywhere */
    snprintf(hosts, sizeof(hosts), "127.0.0.1:%u", dead_port());
    ck_assert_int_eq(ringkv_new(&c, &o, NULL), 0);
    ck_assert_int_eq(ringkv_connect(c), -ECONNREFUSED);
    ck_assert_ptr_nonnull(strstr(ringkv_errmsg(c), "cannot connect"));
    ringkv_free(c);
    /* two hosts, neither listening: each host's failure, "; " between */
    unsigned d1 = dead_port(), d2 = dead_port();
    snprintf(hosts, sizeof(hosts), "127.0.0.1:%u,127.0.0.1:%u", d1, d2);
    ck_assert_int_eq(ringkv_new(&c, &o, NULL), 0);
    ck_assert_int_eq(ringkv_connect(c), -ECONNREFUSED);
    char both[160];
    snprintf(both, sizeof(both), "127.0.0.1:%u: %s; 127.0.0.1:%u: %s", d1,
             rk_strerror(-ECONNREFUSED), d2, rk_strerror(-ECONNREFUSED));
    ck_assert_msg(strstr(ringkv_errmsg(c), both), "%s", ringkv_errmsg(c));
    ringkv_free(c);
    fake_stop(f);
}
END_TEST

/* A listening socket on 127.0.0.1 (a connect to it succeeds without an
 * accept, up to its backlog); its port in *port. */
static int listener(uint16_t *port)
{
    int fd = socket(AF_INET, SOCK_STREAM, 0);
    ck_assert_int_ge(fd, 0);
    struct sockaddr_in a = {.sin_family = AF_INET,
                            .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
    ck_assert_int_eq(bind(fd, (struct sockaddr *)&a, sizeof(a)), 0);
    socklen_t sl = sizeof(a);
    ck_assert_int_eq(getsockname(fd, (struct sockaddr *)&a, &sl), 0);
    ck_assert_int_eq(listen(fd, 512), 0);
    *port = ntohs(a.sin_port);
    return fd;
}

/* Which of ports[0..n) c is connected to (ringkv_peer). */
static int peer_index(ringkv *c, const uint16_t *ports, int n)
{
    for (int i = 0; i < n; i++) {
        char want[32];
        snprintf(want, sizeof(want), "127.0.0.1:%u", ports[i]);
        if (strcmp(ringkv_peer(c), want) == 0)
            return i;
    }
    ck_abort_msg("connected to %s, not a listed host", ringkv_peer(c));
    return -1;
}

/* opts.spread: clients given one list spread over it, and after a lost
 * connection each goes to another host chosen at random, so the clients of
 * a failed host spread over the rest; without it every client takes the
 * first host, and on losing it the next one (regression:
 * failover_piles_on_next_host: all of a dead node's clients moved to its
 * successor, doubling its load). The chance that a spread count below
 * fails by luck is under 1e-7. */
#define SPREAD_CLIENTS 200
static void spread_run(enum ringkv_spread spread)
{
    enum { N = 4 };
    uint16_t ports[N];
    int lfd[N];
    char hosts[128];
    size_t len = 0;
    for (int i = 0; i < N; i++) {
        lfd[i] = listener(&ports[i]);
        len += (size_t)snprintf(hosts + len, sizeof(hosts) - len,
                                "%s127.0.0.1:%u", i ? "," : "", ports[i]);
    }
    struct ringkv_opts o = RINGKV_OPTS_INIT;
    o.hosts = hosts;
    o.spread = spread;
    static ringkv *c[SPREAD_CLIENTS];
    int on[N] = {0}, first[SPREAD_CLIENTS];
    for (int k = 0; k < SPREAD_CLIENTS; k++) {
        ck_assert_int_eq(ringkv_new(&c[k], &o, NULL), 0);
        ck_assert_int_eq(ringkv_connect(c[k]), 0);
        first[k] = peer_index(c[k], ports, N);
        on[first[k]]++;
    }
    for (int i = 0; i < N; i++)
        ck_assert_msg(spread == RINGKV_SPREAD_RANDOM
                          ? on[i] > 0
                          : on[i] == (i ? 0 : SPREAD_CLIENTS),
                      "spread %d: %d clients on host %d", spread, on[i], i);
    /* every connection lost: where do host 0's clients go? */
    int moved[N] = {0};
    for (int k = 0; k < SPREAD_CLIENTS; k++) {
        ringkv_close(c[k]);
        ck_assert_int_eq(ringkv_connect(c[k]), 0);
        int now = peer_index(c[k], ports, N);
        ck_assert_int_ne(now, first[k]);
        if (first[k] == 0)
            moved[now]++;
        ringkv_free(c[k]);
    }
    if (spread != RINGKV_SPREAD_NONE) /* each other host takes some */
        ck_assert(moved[1] > 0 && moved[2] > 0 && moved[3] > 0);
    else
        ck_assert_int_eq(moved[1], SPREAD_CLIENTS);
    for (int i = 0; i < N; i++)
        close(lfd[i]);
}

START_TEST(spread_clients_over_hosts)
{
    spread_run(RINGKV_SPREAD_NONE);
    spread_run(RINGKV_SPREAD_RANDOM);
    spread_run(RINGKV_SPREAD_FAILOVER);
}
END_TEST

START_TEST(ring_stale_tries_next_host)
{
    struct fake *stale = fake_start(false, NULL);
    struct fake *good = fake_start(false, NULL);
    atomic_store(&stale->stale, true);
    char hosts[64];
    snprintf(hosts, sizeof(hosts), "127.0.0.1:%u,127.0.0.1:%u", stale->port,
             good->port);
    struct ringkv_opts o = RINGKV_OPTS_INIT;
    o.hosts = hosts;
    ringkv *c;
    ck_assert_int_eq(ringkv_new(&c, &o, NULL), 0);
    ck_assert_int_eq(ringkv_put(c, "k", 1, "v", 1, 0), 0);
    char want[32];
    snprintf(want, sizeof(want), "127.0.0.1:%u", good->port);
    ck_assert_str_eq(ringkv_peer(c), want);
    ck_assert_int_eq(atomic_load(&stale->requests), 1);
    ringkv_free(c);
    /* with one host there is nowhere else to go: the error comes back */
    snprintf(hosts, sizeof(hosts), "127.0.0.1:%u", stale->port);
    ck_assert_int_eq(ringkv_new(&c, &o, NULL), 0);
    ck_assert_int_eq(ringkv_put(c, "k", 1, "v", 1, 0), RK_ESTALE);
    ck_assert_str_eq(ringkv_errmsg(c), "RING_STALE: ring epoch 4 < 5");
    ringkv_free(c);
    fake_stop(stale);
    fake_stop(good);
}
END_TEST

START_TEST(error_mapping)
{
    struct fake *f = fake_start(false, NULL);
    ringkv *c = client_for(f, NULL, 5000);
    uint8_t *v;
    size_t n;
    ck_assert_int_eq(ringkv_get(c, &v, &n, "unavail", 7), RK_EUNAVAILABLE);
    ck_assert_str_eq(ringkv_errmsg(c),
                     "UNAVAILABLE: 1 of 3 replicas alive, QUORUM needs 2");
    struct wire_creq q = {.op = WIRE_COP_PUT,
                          .has = WIRE_CREQ_KEY | WIRE_CREQ_VALUE,
                          .key = RK_SLICE("timeout", 7),
                          .value = RK_SLICE("v", 1)};
    struct wire_cresp r;
    ck_assert_int_eq(ringkv_call(c, &r, &q), RK_ETIMEOUT);
    ck_assert_uint_eq(r.acks, 1);
    ck_assert_uint_eq(r.need, 2);
    wire_cresp_clear(&r);
    struct wire_creq j = {.op = WIRE_COP_JOIN};
    ck_assert_int_eq(ringkv_call(c, &r, &j), RK_ENOTSUP);
    ck_assert_ptr_nonnull(strstr(ringkv_errmsg(c), "NOT_IMPLEMENTED"));
    wire_cresp_clear(&r);
    struct wire_creq s = {.op = WIRE_COP_STATUS};
    ck_assert_int_eq(ringkv_call(c, &r, &s), 0);
    ck_assert_uint_eq(r.nnodes, 2);
    ck_assert_uint_eq(r.epoch, 3);
    wire_cresp_clear(&r);
    /* an undecodable answer is a protocol error and drops the link */
    ck_assert_int_eq(ringkv_get(c, &v, &n, "garbage", 7), RK_EPROTO);
    ck_assert_int_eq(ringkv_get(c, &v, &n, "unavail", 7), RK_EUNAVAILABLE);
    ck_assert_int_eq(atomic_load(&f->accepted), 2);
    ringkv_free(c);
    fake_stop(f);
}
END_TEST

START_TEST(default_consistency_applied)
{
    struct fake *f = fake_start(false, NULL);
    char hosts[64];
    snprintf(hosts, sizeof(hosts), "127.0.0.1:%u", f->port);
    struct ringkv_opts o = RINGKV_OPTS_INIT;
    o.hosts = hosts;
    o.consistency = WIRE_CCL_LOCAL_QUORUM;
    ringkv *c;
    ck_assert_int_eq(ringkv_new(&c, &o, NULL), 0);
    ck_assert_int_eq(ringkv_put(c, "a", 1, "b", 1, 0), 0);
    ck_assert_uint_eq(f->last_cl, WIRE_CCL_LOCAL_QUORUM);
    struct wire_creq q = {.op = WIRE_COP_DEL,
                          .has = WIRE_CREQ_KEY | WIRE_CREQ_CL,
                          .key = RK_SLICE("a", 1),
                          .cl = WIRE_CCL_ALL};
    struct wire_cresp r;
    ck_assert_int_eq(ringkv_call(c, &r, &q), 0);
    wire_cresp_clear(&r);
    ck_assert_uint_eq(f->last_cl, WIRE_CCL_ALL);
    ringkv_free(c);
    o.consistency = 99;
    const char *why = NULL;
    ck_assert_int_eq(ringkv_new(&c, &o, &why), RK_ECONFIG);
    ck_assert_ptr_nonnull(why);
    fake_stop(f);
}
END_TEST

START_TEST(authentication)
{
    struct fake *f = fake_start(false, "s3cret");
    ringkv *c = client_for(f, "wrong", 5000);
    uint8_t *v;
    size_t n;
    ck_assert_int_eq(ringkv_get(c, &v, &n, "a", 1), RK_EAUTH);
    ck_assert_ptr_nonnull(strstr(ringkv_errmsg(c), "wrong password"));
    ringkv_free(c);
    c = client_for(f, NULL, 5000);
    ck_assert_int_eq(ringkv_get(c, &v, &n, "a", 1), RK_EAUTH);
    ringkv_free(c);
    c = client_for(f, "s3cret", 5000);
    ck_assert_int_eq(ringkv_put(c, "a", 1, "b", 1, 0), 0);
    ck_assert_int_eq(ringkv_get(c, &v, &n, "a", 1), 0);
    free(v);
    ringkv_free(c);
    fake_stop(f);
}
END_TEST

START_TEST(host_lists)
{
    static const char *good[] = {"h",     "h:1",        "h:65535", "a,b:7,c",
                                 "[::1]", "[::1]:7380", " x , y "};
    static const char *bad[] = {"",        ",",   "h:",  "h:0",
                                "h:65536", "h:x", "::1", "[::1",
                                "[::1]x",  ":80", "h,",  "h:123456"};
    struct ringkv_opts o = RINGKV_OPTS_INIT;
    ringkv *c;
    for (size_t i = 0; i < sizeof(good) / sizeof(good[0]); i++) {
        o.hosts = good[i];
        ck_assert_msg(ringkv_new(&c, &o, NULL) == 0, "%s", good[i]);
        ringkv_free(c);
    }
    for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
        o.hosts = bad[i];
        const char *why = NULL;
        ck_assert_msg(ringkv_new(&c, &o, &why) == RK_ECONFIG, "%s", bad[i]);
        ck_assert_ptr_null(c);
        ck_assert_ptr_nonnull(why);
    }
    ringkv_free(NULL);
}
END_TEST

/* Regression: the CLI's exit codes, ringkv-load's error counts and the
 * library's reconnects each had their own list of connection errors, and
 * they disagreed (ringkv-load counted an unresolvable host, -EHOSTUNREACH,
 * as OTHER; the library did not reconnect after -ENETUNREACH; the CLI
 * exited 8 on -ENOTCONN). Now there is one, ringkv_errkind. */
START_TEST(errkind_one_list)
{
    static const int conn[] = {RK_ECLOSED,    -ECONNREFUSED, -ECONNRESET,
                               -ECONNABORTED, -EPIPE,        -ENOTCONN,
                               -ETIMEDOUT,    -EHOSTUNREACH, -EHOSTDOWN,
                               -ENETUNREACH,  -ENETDOWN,     -EADDRNOTAVAIL};
    for (size_t i = 0; i < sizeof(conn) / sizeof(conn[0]); i++) {
        ck_assert_msg(ringkv_errkind(conn[i]) == RINGKV_KIND_CONNECTION, "%s",
                      rk_strerror(conn[i]));
        ck_assert(ringkv_retryable(conn[i], true));
        ck_assert(!ringkv_retryable(conn[i], false));
    }
    ck_assert_int_eq(ringkv_errkind(0), RINGKV_KIND_OK);
    ck_assert_int_eq(ringkv_errkind(RK_ENOTFOUND), RINGKV_KIND_NOTFOUND);
    ck_assert_int_eq(ringkv_errkind(RK_EAUTH), RINGKV_KIND_AUTH);
    /* CLOCK_SKEW: exit 8 (OTHER) until 2026-12-06 */
    static const int cluster[] = {RK_EUNAVAILABLE, RK_ETIMEOUT, RK_EOVERLOADED,
                                  RK_ESTALE, RK_ECLOCKSKEW};
    for (size_t i = 0; i < sizeof(cluster) / sizeof(cluster[0]); i++)
        ck_assert_int_eq(ringkv_errkind(cluster[i]), RINGKV_KIND_CLUSTER);
    ck_assert_int_eq(ringkv_errkind(RK_EBADREQ), RINGKV_KIND_REJECTED);
    ck_assert_int_eq(ringkv_errkind(RK_ETOOLARGE), RINGKV_KIND_REJECTED);
    ck_assert_int_eq(ringkv_errkind(RK_EPROTO), RINGKV_KIND_OTHER);
    ck_assert_int_eq(ringkv_errkind(-ENOMEM), RINGKV_KIND_OTHER);
    ck_assert_int_eq(ringkv_errkind(RK_ENOTSUP), RINGKV_KIND_NOTSUP);
    ck_assert_int_eq(ringkv_errkind(RK_ENOPERM), RINGKV_KIND_NOPERM);
    ck_assert_int_eq(ringkv_errkind(-ENOSYS), RINGKV_KIND_OTHER);
    /* nothing was done: worth another try whatever the request */
    ck_assert(ringkv_retryable(RK_ESTALE, false));
    ck_assert(ringkv_retryable(RK_EOVERLOADED, false));
    ck_assert(ringkv_retryable(RK_EUNAVAILABLE, false));
    /* may have been applied: only when applying twice is harmless */
    ck_assert(ringkv_retryable(RK_ETIMEOUT, true));
    /* the coordinator's own copy may have been written */
    ck_assert(!ringkv_retryable(RK_ECLOCKSKEW, false));
    ck_assert(!ringkv_retryable(RK_ETIMEOUT, false));
    /* retrying cannot help */
    ck_assert(!ringkv_retryable(RK_EBADREQ, true));
    ck_assert(!ringkv_retryable(RK_EAUTH, true));
    ck_assert(!ringkv_retryable(RK_EPROTO, true));
    ck_assert(!ringkv_retryable(RK_ENOTFOUND, true));
}
END_TEST

/* ---- the ringkv CLI and ringkv-load, run as processes ----------------------
 */

/* Run build/bin/<prog> (next to this test binary) with args; capture stdout
 * (and stderr when err != NULL) and return the exit status. */
static int run_prog(const char *prog,
                    const char *const *args,
                    char *out,
                    size_t outsz,
                    char *err,
                    size_t errsz,
                    const char *env)
{
    char self[4096], path[4200];
    ssize_t n = readlink("/proc/self/exe", self, sizeof(self) - 1);
    ck_assert_int_gt(n, 0);
    self[n] = '\0';
    char *slash = strrchr(self, '/');
    *slash = '\0';
    snprintf(path, sizeof(path), "%s/%s", self, prog);
    ck_assert_msg(access(path, X_OK) == 0, "%s not built", path);
    int po[2], pe[2];
    ck_assert_int_eq(pipe(po), 0);
    ck_assert_int_eq(pipe(pe), 0);
    pid_t pid = fork();
    ck_assert_int_ge(pid, 0);
    if (pid == 0) {
        dup2(po[1], 1);
        dup2(pe[1], 2);
        close(po[0]);
        close(pe[0]);
        const char *argv[32];
        int k = 0;
        argv[k++] = prog;
        for (int i = 0; args[i] && k < 31; i++)
            argv[k++] = args[i];
        argv[k] = NULL;
        int devnull = open("/dev/null", O_RDONLY);
        dup2(devnull, 0);
        unsetenv("RINGKV_PASSWORD");
        unsetenv("RINGKV_HOST");
        if (env)
            putenv((char *)env);
        execv(path, (char *const *)argv);
        _exit(127);
    }
    close(po[1]);
    close(pe[1]);
    size_t ol = 0, el = 0;
    struct pollfd p[2] = {{po[0], POLLIN, 0}, {pe[0], POLLIN, 0}};
    int open_fds = 2;
    char scratch[4096];
    while (open_fds > 0 && poll(p, 2, 60000) > 0) {
        for (int i = 0; i < 2; i++) {
            if (p[i].fd < 0 || !(p[i].revents & (POLLIN | POLLHUP)))
                continue;
            char *dst = i == 0 ? out + ol : (err ? err + el : scratch);
            size_t room = i == 0 ? outsz - 1 - ol
                                 : (err ? errsz - 1 - el : sizeof(scratch));
            ssize_t r = read(p[i].fd, room ? dst : scratch,
                             room ? room : sizeof(scratch));
            if (r <= 0) {
                close(p[i].fd);
                p[i].fd = -1;
                open_fds--;
            } else if (room && i == 0) {
                ol += (size_t)r;
            } else if (room && err) {
                el += (size_t)r;
            }
        }
    }
    out[ol] = '\0';
    if (err)
        err[el] = '\0';
    for (int i = 0; i < 2; i++)
        if (p[i].fd >= 0)
            close(p[i].fd);
    int st;
    ck_assert_int_eq(waitpid(pid, &st, 0), pid);
    ck_assert(WIFEXITED(st));
    return WEXITSTATUS(st);
}

static int cli(struct fake *f,
               const char *env,
               char *out,
               char *err,
               const char *a0,
               const char *a1,
               const char *a2,
               const char *a3,
               const char *a4)
{
    char host[32];
    snprintf(host, sizeof(host), "127.0.0.1:%u", f ? f->port : dead_port());
    const char *args[] = {"-h", host, a0, a1, a2, a3, a4, NULL};
    return run_prog("ringkv", args, out, 8192, err, 8192, env);
}

START_TEST(cli_data_commands)
{
    struct fake *f = fake_start(false, NULL);
    char out[8192], err[8192];
    ck_assert_int_eq(cli(f, NULL, out, err, "put", "k", "hello", "--ttl", "30"),
                     0);
    ck_assert_str_eq(out, "OK\n");
    ck_assert_uint_eq(f->last_ttl, 30);
    ck_assert_int_eq(cli(f, NULL, out, err, "get", "k", NULL, NULL, NULL), 0);
    ck_assert_str_eq(out, "hello\n");
    ck_assert_int_eq(cli(f, NULL, out, err, "--json", "get", "k", NULL, NULL),
                     0);
    ck_assert_str_eq(out,
                     "{\"key\":\"k\",\"found\":true,\"value\":\"hello\"}\n");
    /* "-" reads the value from stdin (here /dev/null: an empty value) */
    ck_assert_int_eq(cli(f, NULL, out, err, "put", "e", "-", NULL, NULL), 0);
    ck_assert_int_eq(cli(f, NULL, out, err, "--json", "get", "e", NULL, NULL),
                     0);
    ck_assert_str_eq(out, "{\"key\":\"e\",\"found\":true,\"value\":\"\"}\n");
    /* a key that starts with '-' after "--" */
    ck_assert_int_eq(cli(f, NULL, out, err, "put", "--", "-k", "x", NULL), 0);
    ck_assert_int_eq(cli(f, NULL, out, err, "get", "--", "-k", NULL, NULL), 0);
    ck_assert_str_eq(out, "x\n");
    ck_assert_int_eq(cli(f, NULL, out, err, "del", "k", "-c", "quorum", NULL),
                     0);
    ck_assert_uint_eq(f->last_cl, WIRE_CCL_QUORUM);
    ck_assert_int_eq(cli(f, NULL, out, err, "get", "k", NULL, NULL, NULL), 1);
    ck_assert_str_eq(out, "");
    ck_assert_int_eq(cli(f, NULL, out, err, "get", "k", "--json", NULL, NULL),
                     1);
    ck_assert_str_eq(out, "{\"key\":\"k\",\"found\":false}\n");
    /* typed errors become exit codes and say what happened */
    ck_assert_int_eq(cli(f, NULL, out, err, "get", "unavail", NULL, NULL, NULL),
                     5);
    ck_assert_ptr_nonnull(strstr(err, "UNAVAILABLE: 1 of 3 replicas alive"));
    ck_assert_int_eq(
        cli(f, NULL, out, err, "--json", "put", "timeout", "v", NULL), 5);
    ck_assert_ptr_nonnull(strstr(out, "\"error\":\"TIMEOUT\""));
    ck_assert_int_eq(
        cli(f, NULL, out, err, "removenode", "n2", NULL, NULL, NULL), 7);
    fake_stop(f);
}
END_TEST

/* Regression: an admin command the node does not implement printed only
 * the server's "NOT_IMPLEMENTED: ..." (and, with --json, the error name
 * came from a special case for -ENOSYS); it must say plainly that this
 * version does not do it, with its own exit code, 7. */
START_TEST(cli_not_implemented_says_so)
{
    struct fake *f = fake_start(false, NULL);
    char out[8192], err[8192], want[128];
    snprintf(want, sizeof(want),
             "ringkv decommission: not implemented in this version (the "
             "node 127.0.0.1:%u answered NOT_IMPLEMENTED: ",
             f->port);
    ck_assert_int_eq(
        cli(f, NULL, out, err, "decommission", NULL, NULL, NULL, NULL), 7);
    ck_assert_msg(strncmp(err, want, strlen(want)) == 0, "%s", err);
    ck_assert_str_eq(out, "");
    ck_assert_int_eq(
        cli(f, NULL, out, err, "--json", "repair", NULL, NULL, NULL), 7);
    const char *wj = "{\"error\":\"NOT_IMPLEMENTED\",\"message\":\"not "
                     "implemented in this version";
    ck_assert_msg(strncmp(out, wj, strlen(wj)) == 0, "%s", out);
    ck_assert_ptr_nonnull(strstr(out, "\"exit\":7}"));
    fake_stop(f);
}
END_TEST

START_TEST(cli_status)
{
    struct fake *f = fake_start(false, NULL);
    char out[8192], err[8192];
    ck_assert_int_eq(cli(f, NULL, out, err, "status", NULL, NULL, NULL, NULL),
                     0);
    ck_assert_ptr_nonnull(strstr(out, "Datacenter: dc1"));
    ck_assert_ptr_nonnull(strstr(out, "Owns (effective)"));
    ck_assert_ptr_nonnull(strstr(out, "UN  127.0.0.11:7380  1.50 KiB"));
    ck_assert_ptr_nonnull(strstr(out, "50.0%"));
    ck_assert_ptr_nonnull(strstr(out, "DN  127.0.0.12:7380"));
    ck_assert_ptr_nonnull(
        strstr(out, "Ring epoch: 3, fingerprint: 0000000000abcdef"));
    ck_assert_ptr_nonnull(strstr(out, "\nReplication: dc1:3\n"));
    ck_assert_ptr_null(strstr(out, "WARNING"));
    ck_assert_int_eq(
        cli(f, NULL, out, err, "status", "--json", NULL, NULL, NULL), 0);
    ck_assert_ptr_nonnull(strstr(out, "{\"epoch\":3,\"fingerprint\":"
                                      "\"0000000000abcdef\",\"nodes\":[{"
                                      "\"state\":\"UN\",\"address\":\"127.0.0."
                                      "11:7380\",\"load\":1536,\"tokens\":16,"
                                      "\"owns\":0.500000,\"host\":\"n1\","
                                      "\"rack\":\"r1\",\"dc\":\"dc1\","
                                      "\"replication\":\"dc1:3\"}"));
    /* a node configured otherwise: named, with what each says */
    nodes[1].repl = RK_SLICE("dc1:2", 5);
    ck_assert_int_eq(cli(f, NULL, out, err, "status", NULL, NULL, NULL, NULL),
                     0);
    nodes[1].repl = RK_SLICE("dc1:3", 5);
    ck_assert_ptr_nonnull(strstr(out, "WARNING: the nodes are configured "
                                      "with different replication"));
    ck_assert_ptr_nonnull(strstr(out, "  n1: dc1:3\n  n2: dc1:2\n"));
    ck_assert_ptr_null(strstr(out, "Replication: "));
    ck_assert_ptr_null(strstr(out, "Silent"));
    /* a peer the answering node waits on: a line under the table */
    nodes[0].silent_ms = 2400;
    ck_assert_int_eq(cli(f, NULL, out, err, "status", NULL, NULL, NULL, NULL),
                     0);
    ck_assert_ptr_nonnull(strstr(out, "\nSilent: n1 has not answered "));
    ck_assert_ptr_nonnull(strstr(out, "requests for 2.4 s: reads ask it last"));
    ck_assert_int_eq(
        cli(f, NULL, out, err, "status", "--json", NULL, NULL, NULL), 0);
    nodes[0].silent_ms = 0;
    ck_assert_ptr_nonnull(
        strstr(out, "\"replication\":\"dc1:3\",\"silent_ms\":2400}"));
    /* a peer's clock far off (n2's row: 600000 ms ahead) */
    ck_assert_ptr_nonnull(
        strstr(out, "\"replication\":\"dc1:3\",\"clock_ms\":600000,"
                    "\"clock_far\":true}"));
    ck_assert_int_eq(cli(f, NULL, out, err, "status", NULL, NULL, NULL, NULL),
                     0);
    ck_assert_ptr_nonnull(
        strstr(out, "\nClock: n2's clock is 600000 ms ahead of the answering "
                    "node's, more than max_clock_drift_ms\n"));
    nodes[1].clock_ahead_ms = 0;
    nodes[1].clock_behind_ms = 1200;
    ck_assert_int_eq(
        cli(f, NULL, out, err, "status", "--json", NULL, NULL, NULL), 0);
    nodes[1].clock_ahead_ms = 600000;
    nodes[1].clock_behind_ms = 0;
    ck_assert_ptr_nonnull(strstr(out, "\"clock_ms\":-1200,"));
    ck_assert_ptr_null(strstr(out, "disk_full"));
    /* the answering node short of disk space: a line, and in --json */
    nodes[0].disk_full = 1;
    ck_assert_int_eq(cli(f, NULL, out, err, "status", NULL, NULL, NULL, NULL),
                     0);
    ck_assert_ptr_nonnull(strstr(out, "\nDisk full: n1 has less free disk "
                                      "space than its disk_reserve_mb"));
    ck_assert_int_eq(
        cli(f, NULL, out, err, "status", "--json", NULL, NULL, NULL), 0);
    nodes[0].disk_full = 0;
    ck_assert_ptr_nonnull(
        strstr(out, "\"replication\":\"dc1:3\",\"disk_full\":true}"));
    /* the answering node's repair schedule: a line, and in --json */
    ck_assert_ptr_null(strstr(out, "repair"));
    nodes[0].repair_arcs = 24;
    nodes[0].repair_oldest_ms = 3 * 3600 * 1000 + 720 * 1000;
    nodes[0].repair_overdue = 2;
    nodes[0].repair_never = 1;
    ck_assert_int_eq(cli(f, NULL, out, err, "status", NULL, NULL, NULL, NULL),
                     0);
    ck_assert_ptr_nonnull(
        strstr(out, "\nRepair: n1 replicates 24 arcs; the longest any has "
                    "gone without a complete repair is 3.2 h; 2 overdue "
                    "(past repair_interval_s); 1 never repaired"));
    ck_assert_int_eq(
        cli(f, NULL, out, err, "status", "--json", NULL, NULL, NULL), 0);
    nodes[0].repair_arcs = nodes[0].repair_oldest_ms = 0;
    nodes[0].repair_overdue = nodes[0].repair_never = 0;
    ck_assert_ptr_nonnull(
        strstr(out, "\"replication\":\"dc1:3\",\"repair\":{\"arcs\":24,"
                    "\"oldest_ms\":11520000,\"overdue\":2,\"never\":1}}"));
    /* a joining node waiting for another to stream: a line, and in --json */
    nodes[1].queued = (struct rk_slice){(const uint8_t *)"n1", 2};
    ck_assert_int_eq(cli(f, NULL, out, err, "status", NULL, NULL, NULL, NULL),
                     0);
    ck_assert_ptr_nonnull(
        strstr(out, "\nQueued: n2 streams its ranges once n1 is done"));
    ck_assert_int_eq(
        cli(f, NULL, out, err, "status", "--json", NULL, NULL, NULL), 0);
    nodes[1].queued = (struct rk_slice){NULL, 0};
    ck_assert_ptr_nonnull(strstr(out, "\"clock_far\":true,\"queued\":\"n1\"}"));
    fake_stop(f);
}
END_TEST

START_TEST(cli_ring_endpoints_metrics)
{
    struct fake *f = fake_start(false, NULL);
    char out[8192], err[8192];
    ck_assert_int_eq(
        cli(f, NULL, out, err, "getendpoints", "user:1", NULL, NULL, NULL), 0);
    ck_assert_str_eq(out, "127.0.0.12:7380\tn2\n127.0.0.11:7380\tn1\n");
    ck_assert_str_eq(err, "");
    ck_assert_int_eq(
        cli(f, NULL, out, err, "getendpoints", "badtoken", NULL, NULL, NULL),
        0);
    ck_assert_ptr_nonnull(strstr(err, "warning: the node says token 1"));
    ck_assert_int_eq(
        cli(f, NULL, out, err, "--json", "getendpoints", "k", NULL, NULL), 0);
    char want[256];
    snprintf(want, sizeof(want),
             "{\"key\":\"k\",\"token\":%" PRIu64 ",\"endpoints\":[{\"host\":"
             "\"n2\",\"address\":\"127.0.0.12:7380\"},",
             rk_token("k", 1));
    ck_assert_ptr_nonnull(strstr(out, want));
    ck_assert_int_eq(cli(f, NULL, out, err, "ring", NULL, NULL, NULL, NULL), 0);
    ck_assert_ptr_nonnull(
        strstr(out, "18446744073709551615  ffffffffffffffff"));
    ck_assert_int_eq(cli(f, NULL, out, err, "ring", "--json", NULL, NULL, NULL),
                     0);
    ck_assert_ptr_nonnull(strstr(out, "{\"token\":100,\"node\":\"n1\"}"));
    ck_assert_int_eq(cli(f, NULL, out, err, "metrics", NULL, NULL, NULL, NULL),
                     0);
    ck_assert_str_eq(out, "# TYPE x counter\nx 1\n");
    fake_stop(f);
}
END_TEST

START_TEST(cli_usage_and_connection)
{
    char out[8192], err[8192];
    ck_assert_int_eq(cli(NULL, NULL, out, err, "get", "k", NULL, NULL, NULL),
                     3);
    ck_assert_ptr_nonnull(strstr(err, "cannot connect"));
    ck_assert_int_eq(cli(NULL, NULL, out, err, "bogus", NULL, NULL, NULL, NULL),
                     2);
    ck_assert_int_eq(cli(NULL, NULL, out, err, "get", NULL, NULL, NULL, NULL),
                     2);
    ck_assert_int_eq(cli(NULL, NULL, out, err, "get", "k", "-c", "SOME", NULL),
                     2);
    ck_assert_int_eq(cli(NULL, NULL, out, err, "del", "k", "--ttl", "5", NULL),
                     2);
    ck_assert_int_eq(
        cli(NULL, NULL, out, err, "help", "status", NULL, NULL, NULL), 0);
    ck_assert_ptr_nonnull(strstr(out, "usage: ringkv [options] status"));
    ck_assert_int_eq(
        cli(NULL, NULL, out, err, "put", "--help", NULL, NULL, NULL), 0);
    ck_assert_ptr_nonnull(strstr(out, "--ttl"));
}
END_TEST

/* `replication`, `replication set SETTING` and `rebuild --from DC`: the
 * ops and arguments sent, and the usage errors (exit 2) caught before. */
START_TEST(cli_replication_and_rebuild)
{
    struct fake *f = fake_start(false, NULL);
    char out[8192], err[8192];
    ck_assert_int_eq(
        cli(f, NULL, out, err, "replication", NULL, NULL, NULL, NULL), 0);
    ck_assert_str_eq(out, "REPLICATION \n");
    ck_assert_int_eq(
        cli(f, NULL, out, err, "replication", "set", "dc1:3,dc2:3", NULL, NULL),
        0);
    ck_assert_str_eq(out, "REPLICATION_SET dc1:3,dc2:3\n");
    ck_assert_int_eq(
        cli(f, NULL, out, err, "rebuild", "--from", "dc1", NULL, NULL), 0);
    ck_assert_str_eq(out, "REBUILD dc1\n");
    ck_assert_int_eq(
        cli(f, NULL, out, err, "rebuild", "--from=dc2", NULL, NULL, NULL), 0);
    ck_assert_str_eq(out, "REBUILD dc2\n");
    /* usage errors */
    ck_assert_int_eq(cli(f, NULL, out, err, "rebuild", NULL, NULL, NULL, NULL),
                     2);
    ck_assert_ptr_nonnull(strstr(err, "--from DC"));
    ck_assert_int_eq(cli(f, NULL, out, err, "rebuild", "dc1", NULL, NULL, NULL),
                     2);
    ck_assert_int_eq(
        cli(f, NULL, out, err, "replication", "set", NULL, NULL, NULL), 2);
    ck_assert_int_eq(
        cli(f, NULL, out, err, "replication", "get", "dc1:3", NULL, NULL), 2);
    ck_assert_int_eq(
        cli(f, NULL, out, err, "replication", "set", "a:1", "b:1", NULL), 2);
    ck_assert_int_eq(cli(f, NULL, out, err, "get", "k", "--from", "dc1", NULL),
                     2);
    ck_assert_ptr_nonnull(strstr(err, "--from applies to rebuild only"));
    fake_stop(f);
}
END_TEST

START_TEST(cli_password)
{
    struct fake *f = fake_start(false, "pw");
    char out[8192], err[8192];
    ck_assert_int_eq(cli(f, NULL, out, err, "get", "k", NULL, NULL, NULL), 4);
    ck_assert_int_eq(
        cli(f, NULL, out, err, "get", "k", "--password", "no", NULL), 4);
    ck_assert_int_eq(
        cli(f, "RINGKV_PASSWORD=pw", out, err, "put", "k", "v", NULL, NULL), 0);
    ck_assert_int_eq(cli(f, NULL, out, err, "get", "k", "-a", "pw", NULL), 0);
    ck_assert_str_eq(out, "v\n");
    ck_assert_str_eq(f->last_user, ""); /* no user: the server's default */
    /* the user: --user, -u, $RINGKV_USER; an admin op as another user
     * exits 9 (NOPERM) */
    ck_assert_int_eq(cli(f, NULL, out, err, "cleanup", "-a", "pw", NULL, NULL),
                     9);
    ck_assert_ptr_nonnull(strstr(err, "admin role"));
    ck_assert_int_eq(
        cli(f, NULL, out, err, "cleanup", "-a", "pw", "--user=bob", NULL), 9);
    ck_assert_str_eq(f->last_user, "bob");
    ck_assert_int_eq(
        cli(f, NULL, out, err, "cleanup", "-a", "pw", "-u", "admin"), 0);
    ck_assert_str_eq(f->last_user, "admin");
    ck_assert_int_eq(cli(f, "RINGKV_USER=admin", out, err, "--json", "cleanup",
                         "-a", "pw", NULL),
                     0);
    ck_assert_str_eq(f->last_user, "admin");
    ck_assert_int_eq(
        cli(f, NULL, out, err, "--json", "cleanup", "-a", "pw", NULL), 9);
    ck_assert_ptr_nonnull(strstr(out, "\"error\":\"NOPERM\""));
    ck_assert_ptr_nonnull(strstr(out, "\"exit\":9"));

    /* the password from a file: --password-file, $RINGKV_PASSWORD_FILE */
    char path[] = "/tmp/check_client_pw_XXXXXX", env[64];
    int fd = mkstemp(path);
    ck_assert_int_ge(fd, 0);
    ck_assert_int_eq(write(fd, "pw\n", 3), 3);
    close(fd);
    snprintf(env, sizeof(env), "RINGKV_PASSWORD_FILE=%s", path);
    ck_assert_int_eq(
        cli(f, NULL, out, err, "get", "k", "--password-file", path, NULL), 0);
    ck_assert_str_eq(out, "v\n");
    ck_assert_int_eq(cli(f, env, out, err, "get", "k", NULL, NULL, NULL), 0);
    ck_assert_int_eq(cli(f, env, out, err, "get", "k", "-a", "no", NULL), 4);
    ck_assert_int_eq(cli(f, NULL, out, err, "get", "k", "-a", "pw",
                         "--password-file=/nonexistent"),
                     2);
    ck_assert_int_eq(cli(f, NULL, out, err, "get", "k",
                         "--password-file=/nonexistent", NULL, NULL),
                     2);
    ck_assert_ptr_nonnull(strstr(err, "/nonexistent"));
    unlink(path);
    fake_stop(f);
}
END_TEST

START_TEST(load_generator_runs)
{
    struct fake *f = fake_start(false, NULL);
    char host[32], out[8192];
    snprintf(host, sizeof(host), "127.0.0.1:%u", f->port);
    const char *args[] = {"-h", host, "-c", "1",   "-P",     "8",  "-n", "300",
                          "-k", "20", "-r", "0.5", "--json", NULL, NULL};
    ck_assert_int_eq(
        run_prog("ringkv-load", args, out, sizeof(out), NULL, 0, NULL), 0);
    ck_assert_ptr_nonnull(strstr(out, "\"ops\":300,"));
    ck_assert_ptr_nonnull(strstr(out, "\"errors\":0,"));
    ck_assert_ptr_nonnull(strstr(out, "\"p999\":"));
    /* token-aware by default: one RING first, which this fake answers
     * without node rows (an older server), so all go to the one host */
    ck_assert_ptr_nonnull(strstr(out, "\"token_aware\":true,"));
    ck_assert_ptr_nonnull(strstr(out, "\"to_replica\":0,"));
    ck_assert_int_eq(atomic_load(&f->requests), 301);
    args[13] = "--no-token-aware";
    atomic_store(&f->requests, 0);
    ck_assert_int_eq(
        run_prog("ringkv-load", args, out, sizeof(out), NULL, 0, NULL), 0);
    ck_assert_ptr_nonnull(strstr(out, "\"ops\":300,"));
    ck_assert_ptr_nonnull(strstr(out, "\"token_aware\":false,"));
    ck_assert_int_eq(atomic_load(&f->requests), 300);
    fake_stop(f);
}
END_TEST

/* Regression: ringkv-load counted a host it cannot resolve ("a..b" fails
 * in the resolver without asking DNS; libringkv returns -EHOSTUNREACH) as
 * OTHER instead of CONNECTION, unlike the CLI (exit 3). */
START_TEST(load_counts_unresolvable_host_as_connection)
{
    char out[8192];
    const char *args[] = {"-h", "a..b", "-c", "1", "-n", "3", "--json", NULL};
    ck_assert_int_eq(
        run_prog("ringkv-load", args, out, sizeof(out), NULL, 0, NULL), 3);
    ck_assert_ptr_nonnull(strstr(out, "\"errors_by_type\":{\"CONNECTION\":3}"));
    const char *cargs[] = {"-h", "a..b", "--json", "get", "k", NULL};
    ck_assert_int_eq(run_prog("ringkv", cargs, out, sizeof(out), NULL, 0, NULL),
                     3);
    ck_assert_ptr_nonnull(strstr(out, "\"error\":\"CONNECTION\""));
}
END_TEST

static Suite *client_suite(void)
{
    Suite *s = suite_create("client");
    TCase *tc = tcase_create("sync");
    tcase_set_timeout(tc, 60);
    tcase_add_test(tc, sync_put_get_del);
    tcase_add_test(tc, large_values);
    tcase_add_test(tc, scan_calls);
    tcase_add_test(tc, default_consistency_applied);
    suite_add_tcase(s, tc);
    tc = tcase_create("pipeline");
    tcase_set_timeout(tc, 120);
    tcase_add_test(tc, pipelined_out_of_order);
    tcase_add_test(tc, pipeline_does_not_deadlock);
    suite_add_tcase(s, tc);
    tc = tcase_create("failures");
    tcase_set_timeout(tc, 60);
    tcase_add_test(tc, timeouts);
    tcase_add_test(tc, reconnect_and_retry);
    tcase_add_test(tc, no_resend_of_sent_write);
    tcase_add_test(tc, write_resent_when_not_sent_whole);
    tcase_add_test(tc, failover_between_hosts);
    tcase_add_test(tc, spread_clients_over_hosts);
    tcase_add_test(tc, ring_stale_tries_next_host);
    tcase_add_test(tc, error_mapping);
    tcase_add_test(tc, authentication);
    suite_add_tcase(s, tc);
    tc = tcase_create("programs");
    tcase_set_timeout(tc, 120);
    tcase_add_test(tc, cli_data_commands);
    tcase_add_test(tc, cli_not_implemented_says_so);
    tcase_add_test(tc, cli_status);
    tcase_add_test(tc, cli_ring_endpoints_metrics);
    tcase_add_test(tc, cli_usage_and_connection);
    tcase_add_test(tc, cli_replication_and_rebuild);
    tcase_add_test(tc, cli_password);
    tcase_add_test(tc, load_generator_runs);
    tcase_add_test(tc, load_counts_unresolvable_host_as_connection);
    suite_add_tcase(s, tc);
    tc = tcase_create("config");
    tcase_add_test(tc, host_lists);
    tcase_add_test(tc, errkind_one_list);
    suite_add_tcase(s, tc);
    return s;
}

int main(void)
{
    SRunner *sr = srunner_create(client_suite());
    srunner_run_all(sr, CK_NORMAL);
    int failed = srunner_ntests_failed(sr);
    srunner_free(sr);
    return failed == 0 ? EXIT_SUCCESS : EXIT_FAILURE;
}
