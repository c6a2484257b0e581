/*
 * client_fixture.h - the fake server libringkv's unit runners share
 * (check_client.c, check_client_programs.c): a thread on 127.0.0.1.
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
 * Header-only, as store_fixture.h: each runner is one file and starts its
 * own fakes (fake_start, fake_stop).
 */
#ifndef TESTS_UNIT_CLIENT_FIXTURE_H
#define TESTS_UNIT_CLIENT_FIXTURE_H

#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
#include <poll.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include <check.h>

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

static inline bool key_is(const struct wire_creq *q, const char *s)
{
    return q->key.len == strlen(s) && memcmp(q->key.p, s, q->key.len) == 0;
}

static inline int kv_find(struct fake *f, struct rk_slice k, bool create)
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

static inline int write_all(int fd, const uint8_t *p, size_t n)
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
static inline int fake_answer(struct fake *f,
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

static inline void fake_serve(struct fake *f, int fd)
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

static inline void *fake_main(void *arg)
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

static inline struct fake *fake_start(bool reverse, const char *password)
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

static inline void fake_stop(struct fake *f)
{
    atomic_store(&f->stop, true);
    pthread_join(f->th, NULL);
    close(f->lfd);
    for (int i = 0; i < NKV; i++)
        free(f->kv[i].val);
    free(f);
}

/* A port on 127.0.0.1 with nothing listening. */
static inline uint16_t dead_port(void)
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

#endif
