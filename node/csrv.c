/*
 * csrv.c - the native client server (wire/client_msg.h) on client_port.
 *
 * A protocol handler on net/'s connection engine (a raw-stream
 * net_server: input buffer, output batching, back-pressure, half-close and
 * drain are the engine's). Each connection's input is cut into
 * length-prefixed frames, each decoded into a request and answered,
 * possibly out of order (responses carry the request id); responses are
 * written once per loop turn by the engine, so a pipelined burst costs one
 * write(2).
 *
 * Before HELLO authenticates it (requirepass set), a connection may hold
 * CLIENT_PREAUTH_INPUT bytes: a frame announced longer gets TOO_LARGE and
 * the connection closes. After it, its buffer grows to a frame's size
 * within the clients' input budget (max_input_buffer_mb, shared with the
 * RESP server), and a frame left unfinished for client_frame_timeout_s
 * closes it (clients.c logs and counts both).
 *
 * Bad input never takes the node down: a frame that decodes badly gets a
 * BAD_REQUEST / TOO_LARGE answer with its id when the id could be read; a
 * frame header that cannot be trusted (zero or over-limit length) gets an
 * error with id 0 and the connection is closed after it is written.
 *
 * Admission control: a connection with max_pipeline requests in flight, or
 * a node with max_inflight, answers OVERLOADED at once. A connection whose
 * unsent output passes CSRV_OUT_HIGH stops being read until it drains. An
 * MGET reads its keys CSRV_MGET_READS at a time (mget_more), all by one
 * deadline (read_timeout_ms from its start, not one per key), and stops
 * copying values at a frame's size (TOO_LARGE). The values reads hold
 * (c->meter: a local replica answers within the call) count with the
 * output (conn_full): a connection past CSRV_OUT_HIGH parses no more
 * frames until they drain, then parses what it buffered (on_sent). Values
 * from other nodes count only once they arrive.
 *
 * A connection is freed when the engine has closed it and no request
 * still refers to it (refs); it holds a reference to its net_conn.
 */
#include "node/csrv.h"

#include <errno.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "net/net.h"
#include "node/admin.h"
#include "node/admin_commands.h"
#include "node/auth_delay.h"
#include "node/clients.h"
#include "node/clock.h"
#include "node/coord_node.h"
#include "node/daemon.h"
#include "node/log.h"
#include "node/obs.h"
#include "node/scan.h"
#include "node/snapshot.h"
#include "ring/ring.h"
#include "storage/snapshot_manifest.h"
#include "wire/client_msg.h"

#define CSRV_OUT_HIGH (8u * 1024u * 1024u)
/* An MGET's reads in flight: more start as they answer, one at a time
 * while the connection's meter is over CSRV_OUT_HIGH. All at once, an MGET
 * of 4,096 keys had the coordinator copy a local 16 MiB value per key
 * within the call (regression: native_mget_unbounded); its copies are cut
 * at a frame's size, past which the reply could not be sent anyway. */
#define CSRV_MGET_READS 64
/* what encoding adds to an MGET reply: a value's header (msgpack bin 32)
 * or nil, and the reply's map, id, op and array headers (well under) */
#define CSRV_VALUE_HDR      5u
#define CSRV_REPLY_ENVELOPE 64u
#define CSRV_VERSION        "ringkvd " RK_VERSION

_Static_assert(WIRE_CFRAME_MAX + WIRE_CFRAME_HDR <= CLIENT_INPUT_MAX,
               "a whole native frame fits a connection's input");

/* A connection reads its own writes: a GET or MGET waits for the
 * connection's PUTs and DELs in flight of keys in the same bucket, the
 * top byte of the key's token (a false conflict only waits), as the RESP
 * server's commands do (node/resp_data_commands.c). Until 2026-12-06 it
 * waited for every write in flight on the connection, which kept a
 * pipelined 50/50 mix to a few requests per connection at a time. */
#define CSRV_BUCKETS 256

static uint8_t key_bucket(struct rk_slice k)
{
    return (uint8_t)(rk_token(k.p, k.len) >> 56);
}

struct csrv_conn {
    net_conn *nc;
    node *n;
    struct wire_cbuf out; /* a response is encoded here, then queued */
    int refs;             /* 1 while nc is open + 1 per request in flight */
    bool closing;         /* nc closed */
    bool admitted;        /* counted in n->clients.open (clients.c) */
    bool finishing;       /* no more requests: closes once answered */
    bool authed;          /* role != NODE_ROLE_NONE */
    enum node_role role;  /* node/users.h */
    bool paused;          /* net_conn_read_pause: full, or a request held */
    int inflight;
    int writes_inflight; /* PUT/DEL not answered yet */
    /* of those, by their key's bucket (key_bucket) */
    uint32_t wpend[CSRV_BUCKETS];
    bool has_held; /* a GET/MGET waits for some of them */
    bool processing;
    struct coord_meter meter; /* values its reads hold, and MGETs' copies */
    struct wire_creq held;
    const char *peer; /* "ip:port", lives with nc */
    /* a HELLO whose answer waits (auth_delay.h): nothing more is parsed
     * meanwhile */
    struct node_auth_wait auth_wait;
    bool auth_held, auth_ok;
    uint64_t auth_id;
    uint32_t auth_op;
};

/* One data request in flight. MGET fans out into nkeys gets. */
struct csrv_req {
    struct csrv_conn *c;
    bool is_write;
    uint8_t bucket; /* a write's key's (key_bucket) */
    uint64_t id;
    uint32_t op;
    size_t nkeys, pending;
    int err;
    uint32_t acks, need;
    int cause;                  /* coord_result.cause */
    struct wire_cvalue *values; /* MGET */
    uint8_t **copies;           /* MGET: value copies */
    uint8_t **keys;             /* MGET: key copies */
    size_t *klens;
    size_t next_key, copied; /* MGET: the next key to read; copied bytes */
    uint32_t reads;          /* MGET: reads in flight */
    uint64_t deadline;       /* MGET: its reads answer by then */
    enum coord_cl cl;
};

struct csrv_sub {
    struct csrv_req *r;
    size_t i;
};

static void conn_unref(struct csrv_conn *c);
static void conn_wake(struct csrv_conn *c);

/* ---- output ----------------------------------------------------------- */

/* The encoding buffer is kept between responses, but not a large one. */
#define CSRV_OUT_KEEP (256u * 1024u)

static void conn_queue(struct csrv_conn *c)
{
    if (net_conn_write(c->nc, c->out.p, c->out.len) < 0) {
        c->out.len = 0;
        net_conn_close(c->nc, -ENOMEM);
        return;
    }
    c->out.len = 0;
    if (c->out.cap > CSRV_OUT_KEEP)
        wire_cbuf_release(&c->out);
}

/* Queue one response. A response that cannot be encoded becomes an
 * INTERNAL error with the same id. */
static void conn_send(struct csrv_conn *c, struct wire_cresp *resp)
{
    if (c->closing)
        return;
    /* every reply says which ring the node has applied: a token-aware
     * client that sees a newer epoch than its own asks for the ring again
     * (docs/protocol.md, "Token-aware clients") */
    if (!(resp->has & WIRE_CRESP_EPOCH) && c->n->ring) {
        resp->epoch = ring_epoch(c->n->ring);
        resp->has |= WIRE_CRESP_EPOCH;
    }
    int rc = wire_cresp_encode(&c->out, resp);
    if (rc < 0) {
        /* a reply over the frame limit is the request's TOO_LARGE, not an
         * internal error (regression: mget_too_large_internal) */
        bool big = rc == RK_ETOOLARGE;
        struct wire_cresp e = {.id = resp->id,
                               .op = resp->op,
                               .err = big ? RK_ETOOLARGE : RK_EINTERNAL};
        e.msg = big ? RK_SLICE("reply over the frame limit: ask for less "
                               "at once",
                               46)
                    : RK_SLICE("response could not be encoded", 29);
        e.has = WIRE_CRESP_MSG;
        c->out.len = 0;
        if (wire_cresp_encode(&c->out, &e) < 0) {
            net_conn_close(c->nc, -ENOMEM);
            return;
        }
    }
    conn_queue(c);
}

static void send_err(
    struct csrv_conn *c, uint64_t id, uint32_t op, int err, const char *msg)
{
    struct wire_cresp r = {.id = id, .op = op, .err = err};
    if (msg) {
        r.msg = RK_SLICE(msg, strlen(msg));
        r.has |= WIRE_CRESP_MSG;
    }
    conn_send(c, &r);
}

/* An admin op's answer: its text, or the error with the text as message
 * (frees t). */
static void send_text(
    struct csrv_conn *c, const struct wire_creq *q, int rc, char *t, size_t len)
{
    if (rc < 0) {
        send_err(c, q->id, q->op, rc, t ? t : rk_strerror(rc));
    } else {
        struct wire_cresp r = {.id = q->id,
                               .op = q->op,
                               .has = WIRE_CRESP_TEXT,
                               .text = RK_SLICE(t, len)};
        conn_send(c, &r);
    }
    free(t);
}

/* ---- connection life -------------------------------------------------- */

static void conn_free(struct csrv_conn *c)
{
    if (c->has_held)
        wire_creq_clear(&c->held);
    wire_cbuf_release(&c->out);
    net_conn_unref(c->nc);
    free(c);
}

static void conn_unref(struct csrv_conn *c)
{
    if (--c->refs == 0)
        conn_free(c);
}

/* No more requests from c: it closes once those in flight are answered
 * and written. */
static void conn_finish(struct csrv_conn *c)
{
    c->finishing = true;
    net_conn_finish(c->nc);
}

/* ---- requests --------------------------------------------------------- */

static enum coord_cl req_cl(node *n, const struct wire_creq *q)
{
    if (!(q->has & WIRE_CREQ_CL) || q->cl == WIRE_CCL_DEFAULT)
        return coord_default_cl(n);
    return (enum coord_cl)q->cl; /* same numbering, checked by the decoder */
}

/* COORD_OP_* of a data request, for node/obs.h. */
static int req_op(const struct wire_creq *q)
{
    return q->op == WIRE_COP_PUT   ? COORD_OP_PUT
           : q->op == WIRE_COP_DEL ? COORD_OP_DEL
                                   : COORD_OP_GET;
}

/* Whether GET or MGET q must wait for c's writes in flight: one of its
 * keys is in the bucket of one of them. */
static bool read_waits(const struct csrv_conn *c, const struct wire_creq *q)
{
    if (c->writes_inflight == 0)
        return false;
    if (q->op == WIRE_COP_GET)
        return c->wpend[key_bucket(q->key)] > 0;
    for (size_t i = 0; q->op == WIRE_COP_MGET && i < q->nkeys; i++)
        if (c->wpend[key_bucket(q->keys[i])] > 0)
            return true;
    return false;
}

/* A request leaves its connection: a GET held behind the connection's
 * writes may go once none of its buckets has one in flight. */
static void req_leave(struct csrv_req *r)
{
    struct csrv_conn *c = r->c;
    if (!r->is_write)
        return;
    c->writes_inflight--;
    c->wpend[r->bucket]--;
    if (c->has_held && !c->processing && !c->closing &&
        !read_waits(c, &c->held))
        conn_wake(c);
}

/* An MGET's copies, keys and values (none for other requests). */
static void req_free_mget(struct csrv_req *r)
{
    for (size_t i = 0; r->copies && i < r->nkeys; i++)
        free(r->copies[i]);
    for (size_t i = 0; r->keys && i < r->nkeys; i++)
        free(r->keys[i]);
    free(r->copies);
    free(r->keys);
    free(r->klens);
    free(r->values);
    r->c->meter.bytes -= r->copied;
    r->copies = r->keys = NULL;
    r->klens = NULL;
    r->values = NULL;
    r->copied = 0;
}

static void req_done(struct csrv_req *r)
{
    struct csrv_conn *c = r->c;
    c->inflight--;
    c->n->clients.inflight--;
    struct wire_cresp resp = {.id = r->id, .op = r->op, .err = r->err};
    if (r->err && r->err != RK_ENOTFOUND) {
        char msg[256];
        if (r->op == WIRE_COP_MGET && r->err == RK_ETOOLARGE)
            snprintf(msg, sizeof(msg),
                     "MGET reply over %u MiB: ask for fewer keys at once",
                     WIRE_CFRAME_MAX >> 20);
        else if (!node__clock_errmsg(c->n, msg, sizeof(msg), r->err,
                                     (int)r->need))
            coord_errmsg(msg, sizeof(msg), r->err, r->acks, r->need, r->cause);
        resp.msg = RK_SLICE(msg, strlen(msg));
        resp.has |= WIRE_CRESP_MSG | WIRE_CRESP_ACKS | WIRE_CRESP_NEED;
        resp.acks = r->acks;
        resp.need = r->need;
        conn_send(c, &resp);
    } else if (r->op == WIRE_COP_MGET) {
        resp.err = 0;
        resp.values = r->values;
        resp.nvalues = r->nkeys;
        resp.has |= WIRE_CRESP_VALUES;
        conn_send(c, &resp);
    } else {
        conn_send(c, &resp); /* PUT/DEL success; GET answered in its cb */
    }
    req_free_mget(r);
    req_leave(r);
    free(r);
    net_conn_request_end(c->nc);
    conn_unref(c);
}

/* Free a request that has been answered already. */
static void req_finish(struct csrv_req *r)
{
    struct csrv_conn *c = r->c;
    c->inflight--;
    c->n->clients.inflight--;
    req_leave(r);
    free(r);
    net_conn_request_end(c->nc); /* a finishing c closes once written */
    conn_unref(c);
}

/* Keep a failed coordinator result for the reply (req_done). */
static void req_note(struct csrv_req *r, const struct coord_result *res)
{
    r->err = res->err;
    r->acks = res->acks;
    r->need = res->need;
    r->cause = res->cause;
}

static void on_write_done(const struct coord_result *res, void *arg)
{
    struct csrv_req *r = arg;
    if (res->err == 0) {
        struct wire_cresp resp = {.id = r->id, .op = r->op};
        resp.has = WIRE_CRESP_ACKS | WIRE_CRESP_NEED;
        resp.acks = res->acks;
        resp.need = res->need;
        conn_send(r->c, &resp);
        req_finish(r);
        return;
    }
    req_note(r, res);
    req_done(r);
}

static void on_scan_done(const struct coord_scan_result *res, void *arg)
{
    struct csrv_req *r = arg;
    if (res->err == 0) {
        struct wire_cresp resp = {.id = r->id, .op = r->op};
        resp.cursor = res->cursor;
        resp.keys = res->keys;
        resp.nkeys = res->nkeys;
        resp.has = WIRE_CRESP_CURSOR | WIRE_CRESP_KEYS;
        conn_send(r->c, &resp);
        req_finish(r);
        return;
    }
    r->err = res->err;
    r->acks = res->acks;
    r->need = res->need;
    req_done(r);
}

static void on_get_done(const struct coord_result *res, void *arg)
{
    struct csrv_req *r = arg;
    if (res->err == 0) {
        struct wire_cresp resp = {.id = r->id, .op = r->op};
        resp.value = res->value;
        resp.has = WIRE_CRESP_VALUE;
        conn_send(r->c, &resp);
        req_finish(r);
        return;
    }
    req_note(r, res);
    req_done(r);
}

static void mget_more(struct csrv_req *r);

static void on_mget_one(const struct coord_result *res, void *arg)
{
    struct csrv_sub *s = arg;
    struct csrv_req *r = s->r;
    size_t i = s->i;
    free(s);
    r->reads--;
    if (res->err == 0 && !r->err) {
        /* the reply could not be sent: the values and what encoding them
         * adds (until 2026-12-06 the values alone were counted, and four of
         * 16 MiB answered INTERNAL: regression mget_too_large_internal) */
        if (r->copied + res->value.len + r->nkeys * CSRV_VALUE_HDR +
                CSRV_REPLY_ENVELOPE >
            WIRE_CFRAME_MAX)
            r->err = RK_ETOOLARGE;
        else if (!(r->copies[i] = malloc(res->value.len ? res->value.len : 1)))
            r->err = -ENOMEM;
        else {
            memcpy(r->copies[i], res->value.p, res->value.len);
            r->values[i].found = true;
            r->values[i].value = RK_SLICE(r->copies[i], res->value.len);
            r->copied += res->value.len;
            r->c->meter.bytes += res->value.len;
        }
    } else if (res->err != 0 && res->err != RK_ENOTFOUND && !r->err) {
        req_note(r, res);
    }
    mget_more(r);
    if (--r->pending == 0)
        req_done(r);
}

/* Start the MGET's next reads: CSRV_MGET_READS in flight at most, one
 * while the connection's meter is over CSRV_OUT_HIGH, none after an error
 * (the reply is that error). The caller holds a unit of r->pending. */
static void mget_more(struct csrv_req *r)
{
    struct csrv_conn *c = r->c;
    while (r->next_key < r->nkeys && !r->err && !c->closing &&
           (r->reads == 0 ||
            (r->reads < CSRV_MGET_READS && c->meter.bytes <= CSRV_OUT_HIGH))) {
        struct csrv_sub *s = malloc(sizeof(*s));
        if (!s) {
            r->err = -ENOMEM;
            break;
        }
        s->r = r;
        s->i = r->next_key++;
        r->pending++;
        r->reads++;
        int e =
            coord_get_metered(c->n, RK_SLICE(r->keys[s->i], r->klens[s->i]),
                              r->cl, r->deadline, &c->meter, on_mget_one, s);
        if (e < 0) {
            r->pending--;
            r->reads--;
            free(s);
            r->err = e;
        }
    }
}

static struct csrv_req *req_new(struct csrv_conn *c, const struct wire_creq *q)
{
    struct csrv_req *r = calloc(1, sizeof(*r));
    if (!r)
        return NULL;
    r->c = c;
    r->id = q->id;
    r->op = q->op;
    r->is_write = q->op == WIRE_COP_PUT || q->op == WIRE_COP_DEL;
    if (r->is_write) {
        r->bucket = key_bucket(q->key);
        c->writes_inflight++;
        c->wpend[r->bucket]++;
    }
    c->refs++;
    net_conn_request_begin(c->nc);
    c->inflight++;
    c->n->clients.inflight++;
    return r;
}

static void req_abort(struct csrv_req *r, int err)
{
    struct csrv_conn *c = r->c;
    c->inflight--;
    c->n->clients.inflight--;
    char msg[256];
    /* CLOCK_SKEW at once: this node's clock, which the message measures;
     * otherwise as the RESP server says it (a FULL says why) */
    if (!node__clock_errmsg(c->n, msg, sizeof(msg), err, 0))
        coord_errmsg(msg, sizeof(msg), err, 0, 0, 0);
    send_err(c, r->id, r->op, err, msg);
    req_leave(r);
    free(r);
    net_conn_request_end(c->nc);
    conn_unref(c);
}

static void do_data(struct csrv_conn *c, const struct wire_creq *q)
{
    node *n = c->n;
    enum coord_cl cl = req_cl(n, q);
    if (c->inflight >= n->cfg.max_pipeline ||
        n->clients.inflight >= n->cfg.max_inflight) {
        n->stats.overloaded++;
        node__obs_overloaded(n, req_op(q), cl);
        send_err(c, q->id, q->op, RK_EOVERLOADED,
                 "too many requests in flight, retry later");
        return;
    }
    struct csrv_req *r = req_new(c, q);
    if (!r) {
        send_err(c, q->id, q->op, -ENOMEM, "out of memory");
        return;
    }
    int rc = 0;
    switch (q->op) {
    case WIRE_COP_GET:
        rc = coord_get_metered(n, q->key, cl, 0, &c->meter, on_get_done, r);
        break;
    case WIRE_COP_PUT:
        rc = coord_put(n, q->key, q->value,
                       (q->has & WIRE_CREQ_TTL) ? (uint64_t)q->ttl * 1000u : 0,
                       cl, on_write_done, r);
        break;
    case WIRE_COP_DEL:
        rc = coord_del(n, q->key, cl, on_write_done, r);
        break;
    case WIRE_COP_SCAN:
        rc = coord_scan(
            n, (q->has & WIRE_CREQ_CURSOR) ? q->cursor : 0,
            (q->has & WIRE_CREQ_COUNT) ? q->count : SCAN_COUNT_DEFAULT,
            (q->has & WIRE_CREQ_MATCH) ? q->match : RK_SLICE(NULL, 0), cl,
            on_scan_done, r);
        break;
    case WIRE_COP_MGET: {
        r->nkeys = q->nkeys;
        r->cl = cl;
        r->values = calloc(q->nkeys, sizeof(*r->values));
        r->copies = calloc(q->nkeys, sizeof(*r->copies));
        r->keys = calloc(q->nkeys, sizeof(*r->keys));
        r->klens = calloc(q->nkeys, sizeof(*r->klens));
        if (!r->values || !r->copies || !r->keys || !r->klens) {
            rc = -ENOMEM;
            break;
        }
        r->pending = 1; /* held until the first gets are issued */
        /* one deadline for all its reads, however late each starts */
        r->deadline = coord_read_deadline(n);
        for (size_t i = 0; i < q->nkeys && !r->err; i++) {
            r->keys[i] = malloc(q->keys[i].len ? q->keys[i].len : 1);
            if (!r->keys[i])
                r->err = -ENOMEM;
            else {
                memcpy(r->keys[i], q->keys[i].p, q->keys[i].len);
                r->klens[i] = q->keys[i].len;
            }
        }
        mget_more(r);
        if (--r->pending == 0)
            req_done(r);
        return;
    }
    }
    if (rc < 0) {
        if (rc == RK_EOVERLOADED) {
            n->stats.overloaded++;
            node__obs_overloaded(n, req_op(q), cl);
        }
        req_free_mget(r);
        req_abort(r, rc);
    }
}

/* HELLO's answer: who this is, or AUTH for a wrong user or password. */
static void hello_answer(struct csrv_conn *c, uint64_t id, uint32_t op, bool ok)
{
    node *n = c->n;
    if (!ok) {
        send_err(c, id, op, RK_EAUTH, "wrong user or password");
        return;
    }
    struct wire_cresp r = {.id = id, .op = op};
    r.has = WIRE_CRESP_VERSION | WIRE_CRESP_SERVER | WIRE_CRESP_NODE |
            WIRE_CRESP_CLUSTER;
    r.version = WIRE_CPROTO_VERSION;
    r.server = RK_SLICE(CSRV_VERSION, strlen(CSRV_VERSION));
    r.node = RK_SLICE(n->cfg.node_name, strlen(n->cfg.node_name));
    r.cluster = RK_SLICE(n->cfg.cluster_name, strlen(n->cfg.cluster_name));
    conn_send(c, &r);
}

/* The wait of c's HELLO is over (or c closed): the answer, and c parses
 * on. */
static void on_auth_due(struct node_auth_wait *w)
{
    struct csrv_conn *c =
        (struct csrv_conn *)((char *)w - offsetof(struct csrv_conn, auth_wait));
    c->auth_held = false;
    if (!c->closing)
        hello_answer(c, c->auth_id, c->auth_op, c->auth_ok);
    net_conn_request_end(c->nc);
    conn_wake(c);
    conn_unref(c);
}

/* HELLO's answer waits ms (auth_delay.h), c parsing nothing more until
 * then. false: answer it now. */
static bool
auth_hold(struct csrv_conn *c, const struct wire_creq *q, bool ok, uint32_t ms)
{
    if (!node__auth_wait(c->n, &c->auth_wait, ms, on_auth_due))
        return false;
    c->auth_held = true;
    c->auth_ok = ok;
    c->auth_id = q->id;
    c->auth_op = q->op;
    c->refs++;
    net_conn_request_begin(c->nc); /* a finishing c waits for the answer */
    return true;
}

/* HELLO with a password configured: the user (absent: `default`) and
 * password give the connection its role (node/users.h); a wrong one
 * leaves it as it was. A wrong password's answer waits, longer with each
 * failure in a row from the client's address (auth_delay.h); so does a
 * right one's while that address's failures still wait. */
static void hello_auth(struct csrv_conn *c, const struct wire_creq *q)
{
    node *n = c->n;
    struct rk_slice none = RK_SLICE("", 0);
    enum node_role role =
        node_users_check(&n->users, (q->has & WIRE_CREQ_USER) ? q->user : none,
                         (q->has & WIRE_CREQ_PASSWORD) ? q->password : none);
    bool ok = role != NODE_ROLE_NONE;
    uint32_t ms = node__auth_checked(n, c->peer, ok, &n->loglim.client_auth,
                                     "client.auth_fail");
    if (ok) {
        c->role = role;
        c->authed = true;
        net_conn_input_cap_set(c->nc, CLIENT_INPUT_MAX);
    }
    if (!auth_hold(c, q, ok, ms))
        hello_answer(c, q->id, q->op, ok);
}

/* ---- snapshots ------------------------------------------------------- */

/* A listing or removal answered from the pool (node/snapshot.h). */
struct csrv_later {
    struct csrv_conn *c;
    uint64_t id;
    uint32_t op;
};

static void answer_later(int rc, char *text, size_t len, void *arg)
{
    struct csrv_later *w = arg;
    struct wire_creq q = {.id = w->id, .op = w->op};
    send_text(w->c, &q, rc, text, len);
    conn_unref(w->c);
    free(w);
}

/* The argument of SNAPSHOT or CLEARSNAPSHOT as a string in buf (a TAG is
 * checked by node/snapshot.c), or NULL when there is none. */
static const char *
snapshot_arg(char *buf, size_t cap, const struct wire_creq *q)
{
    if (!(q->has & WIRE_CREQ_ARGS) || q->nargs == 0)
        return NULL;
    size_t len = q->args[0].len < cap - 1 ? q->args[0].len : cap - 1;
    memcpy(buf, q->args[0].p, len);
    buf[len] = '\0';
    if (memchr(q->args[0].p, '\0', q->args[0].len) || len < q->args[0].len)
        buf[0] = '\0'; /* a tag never has a NUL; too long: refused */
    return buf;
}

static void do_snapshot(struct csrv_conn *c, const struct wire_creq *q)
{
    char arg[SNAPSHOT_TAG_MAX + 2];
    const char *a = snapshot_arg(arg, sizeof(arg), q);
    bool clear = q->op == WIRE_COP_CLEARSNAPSHOT;
    size_t max = q->op == WIRE_COP_LISTSNAPSHOTS ? 0 : 1;
    if ((q->has & WIRE_CREQ_ARGS) && q->nargs > max) {
        send_err(c, q->id, q->op, RK_EBADREQ,
                 max ? "takes one argument: the snapshot's TAG"
                     : "LISTSNAPSHOTS takes no argument");
        return;
    }
    if (clear && !a) {
        send_err(c, q->id, q->op, RK_EBADREQ,
                 "CLEARSNAPSHOT takes one argument: a TAG, or --all");
        return;
    }
    bool all = clear && strcmp(a, "--all") == 0;
    if (clear && !all && !snapshot_tag_valid(a, strlen(a))) {
        send_err(c, q->id, q->op, RK_EBADREQ,
                 "bad snapshot tag: " SNAPSHOT_TAG_RULE);
        return;
    }
    struct csrv_later *w = malloc(sizeof(*w));
    int rc = w ? 0 : -ENOMEM;
    if (w)
        *w = (struct csrv_later){.c = c, .id = q->id, .op = q->op};
    if (rc == 0 && clear)
        rc = node__snapshot_clear(c->n, all ? NULL : a, answer_later, w);
    else if (rc == 0)
        rc = node__snapshot_list(c->n, answer_later, w);
    if (rc == 0) {
        c->refs++; /* answer_later's */
        return;
    }
    free(w);
    send_err(c, q->id, q->op, rc,
             rc == RK_EBADREQ ? "the snapshot is being taken (it can be "
                                "cleared once it is done or failed)"
                              : rk_strerror(rc));
}

static void handle_req(struct csrv_conn *c, const struct wire_creq *q)
{
    node *n = c->n;
    if (q->op == WIRE_COP_HELLO) {
        if (node_users_any(&n->users))
            hello_auth(c, q);
        else
            hello_answer(c, q->id, q->op, true);
        return;
    }
    if (c->role == NODE_ROLE_NONE) {
        send_err(c, q->id, q->op, RK_EAUTH,
                 "password required: send HELLO with the password first");
        return;
    }
    const char *opname = wire_cop_name(q->op); /* NULL: unknown, below */
    if (opname && c->role < node__op_role(q->op)) {
        n->stats.client_noperm++;
        char msg[160];
        snprintf(msg, sizeof(msg),
                 "user default has no permissions to run %s: it needs the "
                 "admin role (HELLO as user admin)",
                 opname);
        send_err(c, q->id, q->op, RK_ENOPERM, msg);
        return;
    }
    if (node__admin_command_op(q->op)) {
        char *t = NULL;
        size_t len = 0;
        int rc = node__admin_command(n, q->op, q->args,
                                     (q->has & WIRE_CREQ_ARGS) ? q->nargs : 0,
                                     &t, &len);
        send_text(c, q, rc, t, len);
        return;
    }
    switch (q->op) {
    case WIRE_COP_PING: {
        struct wire_cresp r = {.id = q->id, .op = q->op};
        conn_send(c, &r);
        return;
    }
    case WIRE_COP_GET:
    case WIRE_COP_PUT:
    case WIRE_COP_DEL:
    case WIRE_COP_MGET:
    case WIRE_COP_SCAN:
        do_data(c, q);
        return;
    case WIRE_COP_STATUS:
    case WIRE_COP_RING:
    case WIRE_COP_ENDPOINTS:
    case WIRE_COP_METRICS:
    case WIRE_COP_NETSTATS:
    case WIRE_COP_REPLICATION: {
        struct wire_cresp r = {.id = q->id, .op = q->op};
        struct node_admin_buf ab;
        node_admin_buf_init(&ab);
        int rc = node__admin(n, &r, &ab, q);
        if (rc < 0) {
            send_err(c, q->id, q->op, rc, rk_strerror(rc));
        } else {
            conn_send(c, &r);
        }
        node_admin_buf_free(&ab);
        return;
    }
    case WIRE_COP_LISTSNAPSHOTS:
    case WIRE_COP_CLEARSNAPSHOT:
        do_snapshot(c, q);
        return;
    default:
        send_err(c, q->id, q->op, RK_EBADREQ, "unknown operation");
    }
}

/* ---- input ------------------------------------------------------------ */

/* Its unsent output and the values its reads hold (GETs' until answered,
 * MGETs' until their reply) are past CSRV_OUT_HIGH: parse no more of its
 * frames and stop reading until they drain (on_sent). Before, a pipeline
 * of GETs of a 16 MiB value had every one read (and copied) before the
 * first reply (regression: native_get_pipeline_unbounded). A HELLO whose
 * answer waits (auth_hold) holds everything after it back too. */
static bool conn_full(const struct csrv_conn *c)
{
    return c->auth_held ||
           net_conn_queued(c->nc) + c->meter.bytes > CSRV_OUT_HIGH;
}

static void conn_pause(struct csrv_conn *c)
{
    if (!c->paused) {
        c->paused = true;
        net_conn_read_pause(c->nc);
    }
}

/* Something that held c back is gone: parse on (held request first). */
static void conn_wake(struct csrv_conn *c)
{
    if (c->closing || c->processing || c->auth_held)
        return;
    if (c->paused) {
        c->paused = false;
        net_conn_read_resume(c->nc); /* runs on_input */
    } else {
        net_conn_input_again(c->nc);
    }
}

/* A frame header that cannot be trusted (zero or over the limit, or over
 * what an unauthenticated connection may send): an error with id 0, and
 * the connection closes once it is written. */
static void bad_header(struct csrv_conn *c, int rc, size_t flen)
{
    node *n = c->n;
    n->stats.client_bad_frames++;
    if (rc == RK_ETOOLARGE && !c->authed) {
        char msg[160];
        n->stats.client_preauth_refused++;
        LOG_LIMITED(&n->loglim.client_input, node__mono_ms(n), WARN,
                    "client.preauth_too_large", "peer=%s bytes=%zu max=%u",
                    c->peer, flen, CLIENT_PREAUTH_INPUT);
        snprintf(msg, sizeof(msg),
                 "frame of %zu bytes before authentication (at most %u "
                 "until HELLO with the password); closing",
                 flen, CLIENT_PREAUTH_INPUT - WIRE_CFRAME_HDR);
        send_err(c, 0, 0, rc, msg);
    } else {
        LOG(INFO, "client.bad_frame", "peer=%s error=%s", c->peer,
            rk_errname(rc));
        send_err(c, 0, 0, rc,
                 rc == RK_ETOOLARGE
                     ? "frame longer than the protocol limit; closing"
                     : "malformed frame header; closing");
    }
    conn_finish(c);
}

/* The engine's on_input: answer the whole frames at the front of the
 * input, in order. A GET or MGET that follows a PUT or DEL still in flight
 * on this connection, of a key in the same bucket as one of its own,
 * waits for it (and reading stops meanwhile), so a connection reads its
 * own writes. */
static int on_input(void *arg, net_conn *nc, struct net_input *in)
{
    struct csrv_conn *c = net_conn_data(nc);
    size_t off = 0;
    (void)arg;
    if (c == NULL)
        return 0; /* refused at accept: closing */
    c->refs++;    /* requests may finish and unref inside */
    c->processing = true;
    if (c->has_held && !read_waits(c, &c->held)) {
        c->has_held = false;
        handle_req(c, &c->held);
        wire_creq_clear(&c->held);
    }
    while (!c->closing && !c->finishing && !c->has_held && !conn_full(c)) {
        /* nothing held (a connection resumed, or at EOF, with an empty
         * buffer): in->p is NULL, and NULL + 0 is undefined (clang's
         * UBSan aborted the node) */
        const uint8_t *p = in->p ? in->p + off : NULL;
        size_t left = in->len - off;
        size_t flen = 0;
        if (left >= WIRE_CFRAME_HDR)
            flen = WIRE_CFRAME_HDR + ((size_t)p[0] << 24 | (size_t)p[1] << 16 |
                                      (size_t)p[2] << 8 | p[3]);
        /* before HELLO, a frame must fit what c may hold then (checked
         * here, not against in->cap: a HELLO just answered lifts it) */
        if (!c->authed && flen > CLIENT_PREAUTH_INPUT) {
            bad_header(c, RK_ETOOLARGE, flen - WIRE_CFRAME_HDR);
            break;
        }
        struct rk_slice body;
        size_t used = 0;
        int rc = wire_cframe_parse(&body, &used, p, left);
        if (rc < 0) {
            bad_header(c, rc, flen ? flen - WIRE_CFRAME_HDR : 0);
            break;
        }
        if (used == 0) {
            in->need = flen;
            break;
        }
        struct wire_creq q;
        rc = wire_creq_decode(&q, body.p, body.len);
        off += used;
        if (rc < 0) {
            c->n->stats.client_bad_frames++;
            send_err(c, q.has_id ? q.id : 0, q.has_id ? q.op : 0, rc,
                     q.why ? q.why : rk_strerror(rc));
        } else if (read_waits(c, &q)) {
            c->held = q; /* owns its copy of the body */
            c->has_held = true;
            break;
        } else {
            handle_req(c, &q);
        }
        wire_creq_clear(&q);
    }
    c->processing = false;
    in->consumed = off;
    if (!c->closing && !c->finishing && (c->has_held || conn_full(c)))
        conn_pause(c);
    conn_unref(c);
    return 0;
}

/* Output was written: a connection that stopped because it was full
 * parses what it buffered once it has drained to half. */
static void on_sent(void *arg, net_conn *nc)
{
    struct csrv_conn *c = net_conn_data(nc);
    (void)arg;
    if (c && c->paused && !c->has_held && !c->finishing && !c->auth_held &&
        net_conn_queued(nc) + c->meter.bytes < CSRV_OUT_HIGH / 2)
        conn_wake(c);
}

static void on_accept(void *arg, net_conn *nc)
{
    node *n = arg;
    const char *peer = net_conn_peer_name(nc);
    if (!node__client_admit(n, nc, false, peer))
        return; /* refused: the engine writes why and closes */
    struct csrv_conn *c = calloc(1, sizeof(*c));
    if (!c) {
        node__client_gone(n);
        net_conn_close(nc, -ENOMEM);
        return;
    }
    c->n = n;
    c->nc = nc;
    c->refs = 1;
    c->admitted = true;
    c->peer = peer;
    c->role = node_users_open_role(&n->users);
    c->authed = c->role != NODE_ROLE_NONE;
    if (!c->authed)
        net_conn_input_cap_set(nc, CLIENT_PREAUTH_INPUT);
    net_conn_ref(nc);
    net_conn_set_data(nc, c);
    n->stats.client_conns++;
}

static void on_close(void *arg, net_conn *nc, int err)
{
    node *n = arg;
    struct csrv_conn *c = net_conn_data(nc);
    if (!c)
        return;
    node__client_closed(n, false, c->peer, err, c->authed);
    c->closing = true;
    if (c->admitted)
        node__client_gone(n);
    net_conn_set_data(nc, NULL);
    if (c->auth_held) { /* its answer is not waited for any more */
        node__auth_cancel(n, &c->auth_wait);
        on_auth_due(&c->auth_wait);
    }
    conn_unref(c);
}

static void on_server_closed(void *arg)
{
    node *n = arg;
    n->pending_closes--;
    node__stop_progress(n);
}

int node__csrv_start(node *n, char *err, size_t errlen)
{
    struct node_client_proto p = {
        "client_port", n->cfg.client_port, CSRV_OUT_HIGH, on_input,
        on_sent,       on_accept,          on_close,      NULL};
    if (n->cfg.client_tls == NODE_CLIENT_TLS_REQUIRED)
        p.tls = n->tls.ctx.ports;
    return node__client_listen(n, &n->csrv, &p, err, errlen);
}

void node__csrv_drain(node *n)
{
    net_server_drain(n->csrv);
}

void node__csrv_stop(node *n)
{
    if (n->csrv) {
        n->pending_closes++;
        net_server_close(n->csrv, on_server_closed, n);
        n->csrv = NULL;
    }
}
