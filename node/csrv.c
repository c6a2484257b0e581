/*
 * csrv.c - the native client server (wire/client_msg.h) on client_port.
 *
 * Each connection reads length-prefixed frames, decodes each into a request
 * and answers it, possibly out of order (responses carry the request id).
 * Responses are appended to the connection's output buffer and written once
 * per loop turn (the node's check handle calls node__csrv_flush), so a
 * pipelined burst costs one write(2).
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
 * frames until they drain, then parses what it buffered (on_write). Values
 * from other nodes count only once they arrive.
 *
 * A connection is freed when its handle is closed and no request still
 * refers to it (refs).
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "node/log.h"
#include "node/node_internal.h"
#include "node/obs.h"
#include "wire/client_msg.h"

#define CSRV_READ_CHUNK (64u * 1024u)
#define CSRV_OUT_HIGH   (8u * 1024u * 1024u)
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

struct csrv_conn {
    uv_tcp_t tcp;
    node *n;
    struct csrv_conn *next, *prev;
    struct csrv_conn *dirty_next;
    bool on_dirty;
    uint8_t *rbuf;
    size_t rlen, rcap;
    struct wire_cbuf out;
    size_t writing; /* bytes handed to uv_write, not yet done */
    int refs;       /* 1 for the handle + 1 per request in flight */
    bool closing;
    bool admitted; /* counted in n->clients_open (clients.c) */
    bool close_after_flush;
    bool authed;
    bool reading;
    int inflight;
    int writes_inflight; /* PUT/DEL not answered yet */
    bool has_held;       /* a GET/MGET waits for them */
    bool processing;
    struct coord_meter meter; /* values its reads hold, and MGETs' copies */
    struct wire_creq held;
    char peer[64];
};

struct csrv_write {
    uv_write_t req;
    struct csrv_conn *c;
    struct wire_cbuf buf;
};

/* One data request in flight. MGET fans out into nkeys gets. */
struct csrv_req {
    struct csrv_conn *c;
    bool is_write;
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
    enum node_cl cl;
};

struct csrv_sub {
    struct csrv_req *r;
    size_t i;
};

static void conn_unref(struct csrv_conn *c);
static void node__csrv_resume(struct csrv_conn *c);
static void conn_process(struct csrv_conn *c);

/* ---- output ----------------------------------------------------------- */

static void conn_mark_dirty(struct csrv_conn *c)
{
    if (c->on_dirty || c->closing)
        return;
    c->on_dirty = true;
    c->refs++;
    c->dirty_next = c->n->dirty;
    c->n->dirty = c;
}

static void conn_close(struct csrv_conn *c);

static void on_write(uv_write_t *req, int status)
{
    struct csrv_write *w = (struct csrv_write *)req;
    struct csrv_conn *c = w->c;
    c->writing -= w->buf.len;
    wire_cbuf_release(&w->buf);
    free(w);
    if (status < 0 && !c->closing) {
        LOG(DEBUG, "client.write_fail", "peer=%s error=%s", c->peer,
            uv_strerror(status));
        conn_close(c);
    } else if (!c->closing && c->close_after_flush && c->writing == 0 &&
               c->out.len == 0 && c->inflight == 0) {
        conn_close(c);
    } else if (!c->closing && !c->reading && !c->processing &&
               c->writing + c->meter.bytes < CSRV_OUT_HIGH / 2 &&
               !c->close_after_flush && !c->has_held) {
        conn_process(c); /* frames left buffered first; resumes reading */
    }
    conn_unref(c);
}

static void conn_flush(struct csrv_conn *c)
{
    if (c->closing || c->out.len == 0) {
        if (!c->closing && c->close_after_flush && c->writing == 0 &&
            c->inflight == 0)
            conn_close(c);
        return;
    }
    struct csrv_write *w = calloc(1, sizeof(*w));
    if (!w) {
        conn_close(c);
        return;
    }
    w->c = c;
    w->buf = c->out;
    memset(&c->out, 0, sizeof(c->out));
    uv_buf_t b = uv_buf_init((char *)w->buf.p, (unsigned)w->buf.len);
    int rc = uv_write(&w->req, (uv_stream_t *)&c->tcp, &b, 1, on_write);
    if (rc < 0) {
        wire_cbuf_release(&w->buf);
        free(w);
        conn_close(c);
        return;
    }
    c->writing += w->buf.len;
    c->refs++;
}

void node__csrv_flush(node *n)
{
    struct csrv_conn *c = n->dirty;
    n->dirty = NULL;
    while (c) {
        struct csrv_conn *next = c->dirty_next;
        c->on_dirty = false;
        conn_flush(c);
        conn_unref(c);
        c = next;
    }
}

/* Queue one response. A response that cannot be encoded becomes an
 * INTERNAL error with the same id. */
static void conn_send(struct csrv_conn *c, struct wire_cresp *resp)
{
    if (c->closing)
        return;
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
        if (wire_cresp_encode(&c->out, &e) < 0) {
            conn_close(c);
            return;
        }
    }
    conn_mark_dirty(c);
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

/* "START,END", two decimal tokens: the arc (START, END]. */
static int parse_arc(struct ring_range *out, struct rk_slice a)
{
    char buf[64];
    if (a.len == 0 || a.len >= sizeof(buf))
        return RK_EBADREQ;
    memcpy(buf, a.p, a.len);
    buf[a.len] = '\0';
    char *comma = strchr(buf, ',');
    if (!comma)
        return RK_EBADREQ;
    *comma = '\0';
    const char *part[2] = {buf, comma + 1};
    uint64_t v[2];
    for (int i = 0; i < 2; i++) {
        char *end;
        if (part[i][0] < '0' || part[i][0] > '9')
            return RK_EBADREQ;
        errno = 0;
        unsigned long long x = strtoull(part[i], &end, 10);
        if (errno || *end)
            return RK_EBADREQ;
        v[i] = x;
    }
    *out = (struct ring_range){v[0], v[1]};
    return 0;
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

static void on_conn_closed(uv_handle_t *h)
{
    struct csrv_conn *c = h->data;
    conn_unref(c);
}

static void conn_free(struct csrv_conn *c)
{
    if (c->has_held)
        wire_creq_clear(&c->held);
    free(c->rbuf);
    wire_cbuf_release(&c->out);
    free(c);
}

static void conn_unref(struct csrv_conn *c)
{
    if (--c->refs == 0)
        conn_free(c);
}

static void conn_close(struct csrv_conn *c)
{
    if (c->closing)
        return;
    c->closing = true;
    node *n = c->n;
    if (c->admitted)
        node__client_gone(n);
    if (c->prev)
        c->prev->next = c->next;
    else
        n->conns = c->next;
    if (c->next)
        c->next->prev = c->prev;
    c->next = c->prev = NULL;
    uv_close((uv_handle_t *)&c->tcp, on_conn_closed);
}

/* ---- requests --------------------------------------------------------- */

static enum node_cl req_cl(node *n, const struct wire_creq *q)
{
    if (!(q->has & WIRE_CREQ_CL) || q->cl == WIRE_CCL_DEFAULT)
        return coord_default_cl(n);
    return (enum node_cl)q->cl; /* same numbering, checked by the decoder */
}

/* NODE_OP_* of a data request, for node/obs.h. */
static int req_op(const struct wire_creq *q)
{
    return q->op == WIRE_COP_PUT   ? NODE_OP_PUT
           : q->op == WIRE_COP_DEL ? NODE_OP_DEL
                                   : NODE_OP_GET;
}

/* A request leaves its connection: a GET held behind the connection's
 * writes may go once none is in flight. */
static void req_leave(struct csrv_req *r)
{
    struct csrv_conn *c = r->c;
    if (r->is_write && --c->writes_inflight == 0 && c->has_held &&
        !c->processing && !c->closing)
        conn_process(c);
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
    c->n->inflight--;
    struct wire_cresp resp = {.id = r->id, .op = r->op, .err = r->err};
    if (r->err && r->err != RK_ENOTFOUND) {
        char msg[192];
        if (r->op == WIRE_COP_MGET && r->err == RK_ETOOLARGE)
            snprintf(msg, sizeof(msg),
                     "MGET reply over %u MiB: ask for fewer keys at once",
                     WIRE_CFRAME_MAX >> 20);
        else
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
    if (c->close_after_flush && c->inflight == 0)
        conn_mark_dirty(c);
    conn_unref(c);
}

/* Free a request that has been answered already. */
static void req_finish(struct csrv_req *r)
{
    struct csrv_conn *c = r->c;
    c->inflight--;
    c->n->inflight--;
    req_leave(r);
    free(r);
    if (c->close_after_flush && c->inflight == 0)
        conn_mark_dirty(c); /* the flush closes it once written */
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
    c->writes_inflight += r->is_write;
    c->refs++;
    c->inflight++;
    c->n->inflight++;
    return r;
}

static void req_abort(struct csrv_req *r, int err)
{
    struct csrv_conn *c = r->c;
    c->inflight--;
    c->n->inflight--;
    send_err(c, r->id, r->op, err, rk_strerror(err));
    req_leave(r);
    free(r);
    conn_unref(c);
}

static void do_data(struct csrv_conn *c, const struct wire_creq *q)
{
    node *n = c->n;
    enum node_cl cl = req_cl(n, q);
    if (c->inflight >= n->cfg.max_pipeline ||
        n->inflight >= n->cfg.max_inflight) {
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

static void handle_req(struct csrv_conn *c, const struct wire_creq *q)
{
    node *n = c->n;
    if (q->op == WIRE_COP_HELLO) {
        if (n->cfg.requirepass[0]) {
            size_t pl = strlen(n->cfg.requirepass);
            if (!(q->has & WIRE_CREQ_PASSWORD) || q->password.len != pl ||
                memcmp(q->password.p, n->cfg.requirepass, pl) != 0) {
                n->stats.client_auth_fail++;
                LOG_LIMITED(&n->loglim.client_auth, node__mono_ms(n), WARN,
                            "client.auth_fail", "peer=%s", c->peer);
                send_err(c, q->id, q->op, RK_EAUTH, "wrong password");
                return;
            }
            c->authed = true;
        }
        struct wire_cresp r = {.id = q->id, .op = q->op};
        r.has = WIRE_CRESP_VERSION | WIRE_CRESP_SERVER | WIRE_CRESP_NODE |
                WIRE_CRESP_CLUSTER;
        r.version = WIRE_CPROTO_VERSION;
        r.server = RK_SLICE(CSRV_VERSION, strlen(CSRV_VERSION));
        r.node = RK_SLICE(n->cfg.node_name, strlen(n->cfg.node_name));
        r.cluster = RK_SLICE(n->cfg.cluster_name, strlen(n->cfg.cluster_name));
        conn_send(c, &r);
        return;
    }
    if (n->cfg.requirepass[0] && !c->authed) {
        send_err(c, q->id, q->op, RK_EAUTH,
                 "password required: send HELLO with the password first");
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
        do_data(c, q);
        return;
    case WIRE_COP_STATUS:
    case WIRE_COP_RING:
    case WIRE_COP_ENDPOINTS:
    case WIRE_COP_METRICS:
    case WIRE_COP_NETSTATS: {
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
    case WIRE_COP_DECOMMISSION: {
        char *t = NULL;
        size_t len = 0;
        int rc = node__leave_begin(n, &t, &len);
        send_text(c, q, rc, t, len);
        return;
    }
    case WIRE_COP_REMOVENODE: {
        char name[GOSSIP_NAME_MAX + 1] = "";
        if (!(q->has & WIRE_CREQ_ARGS) || q->nargs != 1 ||
            q->args[0].len == 0 || q->args[0].len > GOSSIP_NAME_MAX ||
            memchr(q->args[0].p, '\0', q->args[0].len)) {
            send_err(c, q->id, q->op, RK_EBADREQ,
                     "REMOVENODE takes one argument: the node's name");
            return;
        }
        memcpy(name, q->args[0].p, q->args[0].len);
        char *t = NULL;
        size_t len = 0;
        int rc = node__remove_begin(n, name, &t, &len);
        send_text(c, q, rc, t, len);
        return;
    }
    case WIRE_COP_CLEANUP: {
        char *t = NULL;
        size_t len = 0;
        int rc = node__cleanup_begin(n, &t, &len);
        send_text(c, q, rc, t, len);
        return;
    }
    case WIRE_COP_ABORT: {
        char *t = NULL;
        size_t len = 0;
        int rc = node__abort(n, &t, &len);
        send_text(c, q, rc, t, len);
        return;
    }
    case WIRE_COP_REPAIR: {
        struct ring_range only;
        bool one = (q->has & WIRE_CREQ_ARGS) && q->nargs > 0;
        if (one && (q->nargs != 1 || parse_arc(&only, q->args[0]) < 0)) {
            send_err(c, q->id, q->op, RK_EBADREQ,
                     "REPAIR takes no argument (every range this node "
                     "replicates) or one: START,END, the tokens (START, END] "
                     "(decimal; START equal to END: the whole ring)");
            return;
        }
        char *t = NULL;
        size_t len = 0;
        int rc = node__repair_begin(n, one ? &only : NULL, &t, &len);
        send_text(c, q, rc, t, len);
        return;
    }
    case WIRE_COP_JOIN: {
        char msg[512];
        int rc = node__join(n, msg, sizeof(msg));
        char *t = strdup(msg);
        send_text(c, q, rc, t, t ? strlen(t) : 0);
        return;
    }
    default:
        send_err(c, q->id, q->op, RK_EBADREQ, "unknown operation");
    }
}

/* ---- reading ---------------------------------------------------------- */

static void on_alloc(uv_handle_t *h, size_t hint, uv_buf_t *buf)
{
    struct csrv_conn *c = h->data;
    (void)hint;
    size_t want = CSRV_READ_CHUNK;
    if (c->rlen >= WIRE_CFRAME_HDR) {
        /* a frame in progress: make room for all of it at once */
        const uint8_t *p = c->rbuf;
        size_t flen = ((size_t)p[0] << 24 | (size_t)p[1] << 16 |
                       (size_t)p[2] << 8 | p[3]) +
                      WIRE_CFRAME_HDR;
        if (flen <= WIRE_CFRAME_MAX + WIRE_CFRAME_HDR && flen > c->rlen &&
            flen - c->rlen > want)
            want = flen - c->rlen;
    }
    if (c->rcap - c->rlen < want) {
        size_t ncap = c->rlen + want;
        uint8_t *nb = realloc(c->rbuf, ncap);
        if (!nb) {
            *buf = uv_buf_init(NULL, 0);
            return;
        }
        c->rbuf = nb;
        c->rcap = ncap;
    }
    *buf =
        uv_buf_init((char *)c->rbuf + c->rlen, (unsigned)(c->rcap - c->rlen));
}

static void on_read(uv_stream_t *s, ssize_t nread, const uv_buf_t *buf)
{
    struct csrv_conn *c = s->data;
    (void)buf;
    if (nread < 0) {
        if (nread != UV_EOF)
            LOG(DEBUG, "client.read_fail", "peer=%s error=%s", c->peer,
                uv_strerror((int)nread));
        conn_close(c);
        return;
    }
    if (nread == 0)
        return;
    c->rlen += (size_t)nread;
    conn_process(c);
}

/* Its unsent output and the values its reads hold (GETs' until answered,
 * MGETs' until their reply) are past CSRV_OUT_HIGH: parse no more of its
 * frames and stop reading until they drain (on_write). Before, a pipeline
 * of GETs of a 16 MiB value had every one read (and copied) before the
 * first reply (regression: native_get_pipeline_unbounded). */
static bool conn_full(const struct csrv_conn *c)
{
    return c->writing + c->out.len + c->meter.bytes > CSRV_OUT_HIGH;
}

/* Answer the frames in the read buffer, in order. A GET or MGET that
 * follows a PUT or DEL still in flight on this connection waits for it (and
 * reading stops meanwhile), so a connection reads its own writes. */
static void conn_process(struct csrv_conn *c)
{
    node *n = c->n;
    size_t off = 0;
    c->refs++; /* requests may finish and unref inside */
    c->processing = true;
    if (c->has_held && c->writes_inflight == 0) {
        c->has_held = false;
        handle_req(c, &c->held);
        wire_creq_clear(&c->held);
    }
    while (!c->closing && !c->close_after_flush && !c->has_held &&
           !conn_full(c)) {
        struct rk_slice body;
        size_t used = 0;
        int rc = wire_cframe_parse(&body, &used, c->rbuf + off, c->rlen - off);
        if (rc < 0) {
            n->stats.client_bad_frames++;
            LOG(INFO, "client.bad_frame", "peer=%s error=%s", c->peer,
                rk_errname(rc));
            send_err(c, 0, 0, rc,
                     rc == RK_ETOOLARGE
                         ? "frame longer than the protocol limit; closing"
                         : "malformed frame header; closing");
            c->close_after_flush = true;
            break;
        }
        if (used == 0)
            break;
        struct wire_creq q;
        rc = wire_creq_decode(&q, body.p, body.len);
        off += used;
        if (rc < 0) {
            n->stats.client_bad_frames++;
            send_err(c, q.has_id ? q.id : 0, q.has_id ? q.op : 0, rc,
                     q.why ? q.why : rk_strerror(rc));
        } else if (c->writes_inflight > 0 &&
                   (q.op == WIRE_COP_GET || q.op == WIRE_COP_MGET)) {
            c->held = q; /* owns its copy of the body */
            c->has_held = true;
            break;
        } else {
            handle_req(c, &q);
        }
        wire_creq_clear(&q);
    }
    c->processing = false;
    if (off) {
        memmove(c->rbuf, c->rbuf + off, c->rlen - off);
        c->rlen -= off;
    }
    if (c->rcap > 4 * CSRV_READ_CHUNK && c->rlen < CSRV_READ_CHUNK) {
        uint8_t *nb = realloc(c->rbuf, CSRV_READ_CHUNK);
        if (nb) {
            c->rbuf = nb;
            c->rcap = CSRV_READ_CHUNK;
        }
    }
    bool stop = c->close_after_flush || c->has_held || conn_full(c);
    if (!c->closing && c->reading && stop) {
        uv_read_stop((uv_stream_t *)&c->tcp);
        c->reading = false;
    } else if (!c->closing && !c->reading && !stop) {
        node__csrv_resume(c);
    }
    conn_unref(c);
}

static void node__csrv_resume(struct csrv_conn *c)
{
    if (uv_read_start((uv_stream_t *)&c->tcp, on_alloc, on_read) == 0)
        c->reading = true;
}

static void on_connection(uv_stream_t *server, int status)
{
    node *n = server->data;
    if (status < 0) {
        LOG(WARN, "client.accept_fail", "error=%s", uv_strerror(status));
        return;
    }
    struct csrv_conn *c = calloc(1, sizeof(*c));
    if (!c)
        return;
    c->n = n;
    c->refs = 1;
    uv_tcp_init(n->loop, &c->tcp);
    c->tcp.data = c;
    if (uv_accept(server, (uv_stream_t *)&c->tcp) < 0) {
        c->closing = true;
        uv_close((uv_handle_t *)&c->tcp, on_conn_closed);
        return;
    }
    uv_tcp_nodelay(&c->tcp, 1);
    node__peer_name(c->peer, sizeof(c->peer), &c->tcp);
    if (!node__client_admit(n, &c->tcp, false, c->peer)) {
        c->closing = true;
        uv_close((uv_handle_t *)&c->tcp, on_conn_closed);
        return;
    }
    c->admitted = true;
    c->next = n->conns;
    if (n->conns)
        n->conns->prev = c;
    n->conns = c;
    n->stats.client_conns++;
    node__csrv_resume(c);
}

int node__csrv_start(node *n, char *err, size_t errlen)
{
    n->csrv_open = 1; /* node_stop closes it, also after a failure here */
    return node__listen(n, &n->csrv, "client_port", n->cfg.client_port,
                        on_connection, err, errlen);
}

void node__csrv_drain(node *n)
{
    if (n->csrv_open) {
        n->csrv_open = 0;
        n->pending_closes++;
        uv_close((uv_handle_t *)&n->csrv, node__handle_closed);
    }
    for (struct csrv_conn *c = n->conns; c; c = c->next) {
        if (c->reading) {
            uv_read_stop((uv_stream_t *)&c->tcp);
            c->reading = false;
        }
        c->close_after_flush = true;
        conn_mark_dirty(c);
    }
}

void node__csrv_stop(node *n)
{
    node__csrv_drain(n);
    while (n->conns)
        conn_close(n->conns);
}
