/*
 * rsrv.c - the Redis protocol server (RESP2) on resp_port, over the parser,
 * encoders and command table of node/resp.h and the coordinator.
 *
 * Redis clients expect replies in request order while coordinator requests
 * finish in any order, so every command gets a reply slot in a per-
 * connection queue; a finished slot is moved to the output only when every
 * slot before it is finished too. Output is written once per loop turn.
 *
 * What the commands mean on ringkv:
 *  - GET/SET/DEL/EXISTS/MGET/MSET go through the coordinator at the
 *    connection's level (CONSISTENCY <level>, default_consistency at first).
 *  - SET NX/XX read the key first (at the same level), then write: the
 *    check and the write are not atomic (no compare-and-set in ringkv).
 *  - DEL and EXISTS read each key to count it, DEL then deletes it.
 *  - AUTH checks requirepass; without it every command but AUTH, QUIT and
 *    PING answers -NOAUTH.
 * Errors are typed: -UNAVAILABLE, -TIMEOUT, -OVERLOADED, -RING_STALE,
 * -TOO_LARGE, ... A protocol error closes that one connection.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "node/log.h"
#include "node/node_internal.h"
#include "node/resp.h"

#define RSRV_OUT_HIGH  (8u * 1024u * 1024u)
#define RSRV_READ_WANT (64u * 1024u)

struct rslot {
    struct rslot *next;
    struct resp_out out;
    bool done;
};

struct rconn {
    uv_tcp_t tcp;
    node *n;
    resp_parser *p;
    struct rconn *next, *prev, *dirty_next;
    bool on_dirty, closing, close_after_flush, authed, reading;
    struct rslot *head, *tail;
    size_t nslots;
    struct resp_out out;
    size_t writing;
    int refs;
    enum node_cl cl;
    int writes_inflight; /* SET/MSET/DEL not finished yet */
    bool has_held;       /* a command waits for those writes */
    bool processing;
    struct resp_cmd held;
    char peer[64];
};

struct rwrite {
    uv_write_t req;
    struct rconn *c;
    struct resp_out buf;
};

/* One command in flight. */
struct rop {
    struct rconn *c;
    struct rslot *slot;
    enum resp_op op;
    size_t pending; /* coordinator calls outstanding (+1 while issuing) */
    size_t n;
    int err;
    uint32_t acks, need;
    int64_t count;
    bool found;
    /* MGET */
    uint8_t **vals;
    size_t *lens;
    bool *have;
    /* SET NX/XX: the write to do after the read */
    uint8_t *key, *val;
    size_t klen, vlen;
    uint64_t ttl_ms;
    enum resp_set_cond cond;
    bool is_write; /* counted in c->writes_inflight */
};

struct rsub {
    struct rop *o;
    size_t i;
};

static void rconn_unref(struct rconn *c);
static void rconn_close(struct rconn *c);
static void rconn_resume(struct rconn *c);
static void rconn_process(struct rconn *c);

/* ---- output ----------------------------------------------------------- */

static void mark_dirty(struct rconn *c)
{
    if (c->on_dirty || c->closing)
        return;
    c->on_dirty = true;
    c->refs++;
    c->dirty_next = c->n->rdirty;
    c->n->rdirty = c;
}

/* Move finished slots at the head of the queue to the output. */
static void drain_slots(struct rconn *c)
{
    bool moved = false;
    while (c->head && c->head->done) {
        struct rslot *s = c->head;
        c->head = s->next;
        if (!c->head)
            c->tail = NULL;
        c->nslots--;
        if (!c->closing && resp_out_reserve(&c->out, s->out.len) == 0 &&
            s->out.len) {
            memcpy(c->out.p + c->out.len, s->out.p, s->out.len);
            c->out.len += s->out.len;
        }
        resp_out_free(&s->out);
        free(s);
        moved = true;
    }
    if (moved)
        mark_dirty(c);
}

static struct rslot *slot_new(struct rconn *c)
{
    struct rslot *s = calloc(1, sizeof(*s));
    if (!s)
        return NULL;
    if (c->tail)
        c->tail->next = s;
    else
        c->head = s;
    c->tail = s;
    c->nslots++;
    return s;
}

static void on_write(uv_write_t *req, int status)
{
    struct rwrite *w = (struct rwrite *)req;
    struct rconn *c = w->c;
    c->writing -= w->buf.len;
    resp_out_free(&w->buf);
    free(w);
    if (status < 0 && !c->closing)
        rconn_close(c);
    else if (!c->closing && c->close_after_flush && c->writing == 0 &&
             c->out.len == 0 && !c->head)
        rconn_close(c);
    else if (!c->closing && !c->reading && !c->close_after_flush &&
             !c->has_held && c->writing < RSRV_OUT_HIGH / 2)
        rconn_resume(c);
    rconn_unref(c);
}

static void rconn_flush(struct rconn *c)
{
    if (c->closing)
        return;
    if (c->out.len == 0) {
        if (c->close_after_flush && c->writing == 0 && !c->head)
            rconn_close(c);
        return;
    }
    struct rwrite *w = calloc(1, sizeof(*w));
    if (!w) {
        rconn_close(c);
        return;
    }
    w->c = c;
    w->buf = c->out;
    memset(&c->out, 0, sizeof(c->out));
    uv_buf_t b = uv_buf_init((char *)w->buf.p, (unsigned)w->buf.len);
    if (uv_write(&w->req, (uv_stream_t *)&c->tcp, &b, 1, on_write) < 0) {
        resp_out_free(&w->buf);
        free(w);
        rconn_close(c);
        return;
    }
    c->writing += w->buf.len;
    c->refs++;
}

void node__rsrv_flush(node *n)
{
    struct rconn *c = n->rdirty;
    n->rdirty = NULL;
    while (c) {
        struct rconn *next = c->dirty_next;
        c->on_dirty = false;
        rconn_flush(c);
        rconn_unref(c);
        c = next;
    }
}

/* ---- connection life -------------------------------------------------- */

static void rconn_free(struct rconn *c)
{
    while (c->head) {
        struct rslot *s = c->head;
        c->head = s->next;
        resp_out_free(&s->out);
        free(s);
    }
    resp_parser_free(c->p);
    resp_out_free(&c->out);
    free(c);
}

static void rconn_unref(struct rconn *c)
{
    if (--c->refs == 0)
        rconn_free(c);
}

static void on_closed(uv_handle_t *h)
{
    rconn_unref(h->data);
}

static void rconn_close(struct rconn *c)
{
    if (c->closing)
        return;
    c->closing = true;
    node *n = c->n;
    if (c->prev)
        c->prev->next = c->next;
    else
        n->rconns = c->next;
    if (c->next)
        c->next->prev = c->prev;
    c->next = c->prev = NULL;
    uv_close((uv_handle_t *)&c->tcp, on_closed);
}

/* ---- command execution ------------------------------------------------ */

static void op_free(struct rop *o)
{
    if (o->vals) {
        for (size_t i = 0; i < o->n; i++)
            free(o->vals[i]);
    }
    free(o->vals);
    free(o->lens);
    free(o->have);
    free(o->key);
    free(o->val);
    free(o);
}

static void
reply_err(struct resp_out *out, int err, uint32_t acks, uint32_t need)
{
    if (err == RK_ETIMEOUT || err == RK_EUNAVAILABLE) {
        char d[96];
        snprintf(d, sizeof(d), "%s (%u of %u replicas answered)",
                 rk_strerror(err), acks, need);
        resp_out_rkerr(out, err, d);
    } else {
        resp_out_rkerr(out, err, NULL);
    }
}

/* The op is complete: encode its reply into its slot. */
static void op_finish(struct rop *o)
{
    struct rconn *c = o->c;
    struct resp_out *out = &o->slot->out;
    if (o->err && o->err != RK_ENOTFOUND) {
        reply_err(out, o->err, o->acks, o->need);
    } else {
        switch (o->op) {
        case RESP_OP_GET:
            if (o->found)
                resp_out_bulk(out, o->vals[0], o->lens[0]);
            else
                resp_out_null(out);
            break;
        case RESP_OP_SET:
            if (o->found) /* the write happened */
                resp_out_ok(out);
            else
                resp_out_null(out);
            break;
        case RESP_OP_MSET:
            resp_out_ok(out);
            break;
        case RESP_OP_DEL:
        case RESP_OP_EXISTS:
            resp_out_int(out, o->count);
            break;
        case RESP_OP_MGET:
            resp_out_array(out, o->n);
            for (size_t i = 0; i < o->n; i++) {
                if (o->have[i])
                    resp_out_bulk(out, o->vals[i], o->lens[i]);
                else
                    resp_out_null(out);
            }
            break;
        default:
            resp_out_error(out, "ERR", "internal: unexpected op");
        }
    }
    o->slot->done = true;
    drain_slots(c);
    bool was_write = o->is_write;
    op_free(o);
    if (was_write && --c->writes_inflight == 0 && c->has_held &&
        !c->processing && !c->closing)
        rconn_process(c);
    rconn_unref(c);
}

static void op_note_err(struct rop *o, const struct coord_result *r)
{
    if (r->err && r->err != RK_ENOTFOUND && !o->err) {
        o->err = r->err;
        o->acks = r->acks;
        o->need = r->need;
    }
}

static void op_release(struct rop *o)
{
    if (--o->pending == 0)
        op_finish(o);
}

static void on_sub_get(const struct coord_result *r, void *arg)
{
    struct rsub *s = arg;
    struct rop *o = s->o;
    size_t i = s->i;
    free(s);
    op_note_err(o, r);
    if (r->err == 0) {
        if (o->op == RESP_OP_EXISTS) {
            o->count++;
        } else {
            o->vals[i] = malloc(r->value.len ? r->value.len : 1);
            if (o->vals[i]) {
                memcpy(o->vals[i], r->value.p, r->value.len);
                o->lens[i] = r->value.len;
                o->have[i] = true;
                o->found = true;
            } else if (!o->err) {
                o->err = -ENOMEM;
            }
        }
    }
    op_release(o);
}

static void on_sub_write(const struct coord_result *r, void *arg)
{
    struct rop *o = arg;
    op_note_err(o, r);
    op_release(o);
}

/* DEL: the read of key i told whether it exists; then delete it. */
static void on_del_read(const struct coord_result *r, void *arg)
{
    struct rsub *s = arg;
    struct rop *o = s->o;
    free(s);
    op_note_err(o, r);
    if (r->err == 0)
        o->count++;
    op_release(o);
}

static void on_set_written(const struct coord_result *r, void *arg)
{
    struct rop *o = arg;
    op_note_err(o, r);
    o->found = r->err == 0;
    op_release(o);
}

static void on_set_checked(const struct coord_result *r, void *arg)
{
    struct rop *o = arg;
    node *n = o->c->n;
    if (r->err && r->err != RK_ENOTFOUND) {
        op_note_err(o, r);
        op_release(o);
        return;
    }
    bool exists = r->err == 0;
    bool go = o->cond == RESP_SET_NX ? !exists : exists;
    if (!go || o->c->closing) {
        o->found = false; /* condition not met: nil reply */
        op_release(o);
        return;
    }
    o->pending++;
    int rc = coord_put(n, RK_SLICE(o->key, o->klen), RK_SLICE(o->val, o->vlen),
                       o->ttl_ms, o->c->cl, on_set_written, o);
    if (rc < 0) {
        o->pending--;
        o->err = rc;
    }
    op_release(o);
}

static struct rop *
op_new(struct rconn *c, struct rslot *slot, enum resp_op op, size_t n)
{
    struct rop *o = calloc(1, sizeof(*o));
    if (!o)
        return NULL;
    o->c = c;
    o->slot = slot;
    o->op = op;
    o->n = n;
    o->pending = 1;
    if (op == RESP_OP_GET || op == RESP_OP_MGET) {
        o->vals = calloc(n ? n : 1, sizeof(*o->vals));
        o->lens = calloc(n ? n : 1, sizeof(*o->lens));
        o->have = calloc(n ? n : 1, sizeof(*o->have));
        if (!o->vals || !o->lens || !o->have) {
            op_free(o);
            return NULL;
        }
    }
    c->refs++;
    return o;
}

/* Issue one coordinator get for key i; errors are recorded in o. */
static void sub_get(struct rop *o, size_t i, struct rk_slice key, coord_cb cb)
{
    struct rsub *s = malloc(sizeof(*s));
    if (!s) {
        o->err = -ENOMEM;
        return;
    }
    s->o = o;
    s->i = i;
    o->pending++;
    int rc = coord_get(o->c->n, key, o->c->cl, cb, s);
    if (rc < 0) {
        o->pending--;
        free(s);
        if (!o->err)
            o->err = rc;
    }
}

static void sub_write(struct rop *o,
                      struct rk_slice key,
                      bool del,
                      struct rk_slice val,
                      uint64_t ttl_ms)
{
    o->pending++;
    int rc =
        del ? coord_del(o->c->n, key, o->c->cl, on_sub_write, o)
            : coord_put(o->c->n, key, val, ttl_ms, o->c->cl, on_sub_write, o);
    if (rc < 0) {
        o->pending--;
        if (!o->err)
            o->err = rc;
    }
}

static uint64_t set_ttl(const struct resp_set_opts *so, bool *expired)
{
    *expired = false;
    if (!so->has_expire)
        return 0;
    if (!so->expire_at)
        return (uint64_t)so->expire_ms;
    uint64_t now = node__now_ms();
    if ((uint64_t)so->expire_ms <= now) {
        *expired = true;
        return 0;
    }
    return (uint64_t)so->expire_ms - now;
}

static void info_reply(struct rconn *c, struct resp_out *out)
{
    node *n = c->n;
    char buf[2048];
    const char *state = n->boot == NODE_BOOT_DONE ? "NORMAL" : "JOINING";
    uint64_t keys = 0;
    if (n->store) {
        struct store_range *rs = NULL;
        size_t nr = 0;
        if (store_range_list(&rs, &nr, n->store) == 0) {
            for (size_t i = 0; i < nr; i++) {
                struct store_range_info ri;
                if (store_range_info(&ri, n->store, rs[i]) == 0)
                    keys += ri.keys;
            }
            free(rs);
        }
    }
    int l = snprintf(
        buf, sizeof(buf),
        "# Server\r\nredis_version:7.0.0\r\nringkv_version:0.1.0\r\n"
        "redis_mode:standalone\r\nprocess_id:%ld\r\ntcp_port:%d\r\n"
        "# Ring\r\nnode_name:%s\r\ncluster_name:%s\r\ndatacenter:%s\r\n"
        "rack:%s\r\nnode_state:%s\r\nring_epoch:%llu\r\n"
        "ring_fingerprint:%016llx\r\nring_stale:%d\r\nring_nodes:%zu\r\n"
        "consistency:%s\r\n# Keyspace\r\ndb0:keys=%llu,expires=0\r\n"
        "local_keys:%llu\r\n",
        (long)getpid(), n->cfg.resp_port, n->cfg.node_name, n->cfg.cluster_name,
        n->cfg.datacenter, n->cfg.rack, state,
        (unsigned long long)(n->ring ? ring_epoch(n->ring) : 0),
        (unsigned long long)(n->ring ? ring_fingerprint(n->ring) : 0),
        n->ring_stale, n->npeers, node_cl_name(c->cl), (unsigned long long)keys,
        (unsigned long long)keys);
    resp_out_bulk(out, buf, (size_t)l);
}

static void exec_cmd(struct rconn *c, const struct resp_cmd *cmd)
{
    node *n = c->n;
    struct rslot *slot = slot_new(c);
    if (!slot) {
        rconn_close(c);
        return;
    }
    struct resp_request rq;
    int rc = resp_request_parse(&rq, cmd, &slot->out);
    if (rc < 0) {
        resp_out_error(&slot->out, "ERR", "out of memory");
        slot->done = true;
        return;
    }
    if (rc == RESP_REQ_ANSWERED) {
        if (rq.close)
            c->close_after_flush = true;
        slot->done = true;
        return;
    }
    if (n->cfg.requirepass[0] && !c->authed && rq.op != RESP_OP_AUTH) {
        resp_out_error(&slot->out, "NOAUTH", "Authentication required.");
        slot->done = true;
        return;
    }
    if (c->nslots > (size_t)n->cfg.max_pipeline &&
        (rq.op == RESP_OP_GET || rq.op == RESP_OP_SET || rq.op == RESP_OP_DEL ||
         rq.op == RESP_OP_EXISTS || rq.op == RESP_OP_MGET ||
         rq.op == RESP_OP_MSET)) {
        n->stats.overloaded++;
        resp_out_rkerr(&slot->out, RK_EOVERLOADED,
                       "too many requests in flight on this connection");
        slot->done = true;
        return;
    }
    struct rop *o = NULL;
    switch (rq.op) {
    case RESP_OP_AUTH: {
        size_t pl = strlen(n->cfg.requirepass);
        if (!pl) {
            resp_out_error(&slot->out, "ERR",
                           "AUTH <password> called without any password "
                           "configured for the default user. Are you sure "
                           "your configuration is correct?");
        } else if (rq.password.len == pl &&
                   memcmp(rq.password.p, n->cfg.requirepass, pl) == 0) {
            c->authed = true;
            resp_out_ok(&slot->out);
        } else {
            n->stats.client_auth_fail++;
            resp_out_error(&slot->out, "WRONGPASS",
                           "invalid username-password pair");
        }
        slot->done = true;
        return;
    }
    case RESP_OP_CONSISTENCY:
        if (rq.has_level) {
            c->cl = (enum node_cl)(rq.level + 1);
            resp_out_ok(&slot->out);
        } else {
            resp_out_simple(&slot->out, node_cl_name(c->cl));
        }
        slot->done = true;
        return;
    case RESP_OP_INFO:
        info_reply(c, &slot->out);
        slot->done = true;
        return;
    case RESP_OP_GET:
        o = op_new(c, slot, rq.op, 1);
        if (o)
            sub_get(o, 0, rq.key, on_sub_get);
        break;
    case RESP_OP_MGET:
        o = op_new(c, slot, rq.op, rq.nkeys);
        for (size_t i = 0; o && i < rq.nkeys && !o->err; i++)
            sub_get(o, i, rq.keys[i], on_sub_get);
        break;
    case RESP_OP_EXISTS:
        o = op_new(c, slot, rq.op, rq.nkeys);
        for (size_t i = 0; o && i < rq.nkeys && !o->err; i++)
            sub_get(o, i, rq.keys[i], on_sub_get);
        break;
    case RESP_OP_DEL:
        o = op_new(c, slot, rq.op, rq.nkeys);
        for (size_t i = 0; o && i < rq.nkeys && !o->err; i++) {
            sub_get(o, i, rq.keys[i], on_del_read);
            if (!o->err)
                sub_write(o, rq.keys[i], true, RK_SLICE(NULL, 0), 0);
        }
        break;
    case RESP_OP_MSET:
        o = op_new(c, slot, rq.op, rq.nkeys);
        for (size_t i = 0; o && i < rq.nkeys && !o->err; i++)
            sub_write(o, rq.keys[2 * i], false, rq.keys[2 * i + 1], 0);
        break;
    case RESP_OP_SET: {
        bool expired;
        uint64_t ttl = set_ttl(&rq.set, &expired);
        o = op_new(c, slot, rq.op, 1);
        if (!o)
            break;
        o->found = true;
        if (rq.set.cond == RESP_SET_ALWAYS) {
            sub_write(o, rq.key, expired, rq.value, ttl);
            break;
        }
        /* NX / XX: read, then write (not atomic) */
        o->cond = rq.set.cond;
        o->ttl_ms = ttl;
        o->key = malloc(rq.key.len);
        o->val = malloc(rq.value.len ? rq.value.len : 1);
        if (!o->key || !o->val) {
            o->err = -ENOMEM;
            break;
        }
        memcpy(o->key, rq.key.p, rq.key.len);
        memcpy(o->val, rq.value.p, rq.value.len);
        o->klen = rq.key.len;
        o->vlen = rq.value.len;
        if (rq.value.len > RK_MAX_VALUE) {
            o->err = RK_ETOOLARGE;
            break;
        }
        o->pending++;
        int e = coord_get(n, rq.key, c->cl, on_set_checked, o);
        if (e < 0) {
            o->pending--;
            o->err = e;
        }
        break;
    }
    default:
        resp_out_error(&slot->out, "ERR", "command not supported here");
        slot->done = true;
        return;
    }
    if (!o) {
        resp_out_error(&slot->out, "ERR", "out of memory");
        slot->done = true;
        return;
    }
    if (rq.op == RESP_OP_MSET || rq.op == RESP_OP_DEL ||
        (rq.op == RESP_OP_SET)) {
        o->is_write = true;
        c->writes_inflight++;
    }
    op_release(o); /* drop the issuing hold */
}

/* ---- ordering --------------------------------------------------------- */

static bool arg_is(struct rk_slice a, const char *s)
{
    size_t l = strlen(s);
    if (a.len != l)
        return false;
    for (size_t i = 0; i < l; i++)
        if ((a.p[i] | 0x20) != s[i])
            return false;
    return true;
}

/* Commands that only write (SET without NX/XX, MSET) may run while earlier
 * writes of the connection are in flight: their timestamps are taken in
 * order. Anything else waits for those writes, so a connection reads its
 * own writes, as with Redis. */
static bool may_overtake(const struct resp_cmd *cmd)
{
    if (arg_is(cmd->argv[0], "mset"))
        return true;
    if (!arg_is(cmd->argv[0], "set"))
        return false;
    for (size_t i = 3; i < cmd->argc; i++)
        if (arg_is(cmd->argv[i], "nx") || arg_is(cmd->argv[i], "xx") ||
            arg_is(cmd->argv[i], "get"))
            return false;
    return true;
}

/* Run the commands the parser holds, in order, until one must wait. */
static void rconn_process(struct rconn *c)
{
    c->refs++;
    c->processing = true;
    while (!c->closing && !c->close_after_flush) {
        struct resp_cmd cmd;
        if (c->has_held) {
            cmd = c->held;
        } else {
            int rc = resp_parser_next(&cmd, c->p);
            if (rc == 0)
                break;
            if (rc < 0) {
                struct rslot *sl = slot_new(c);
                if (sl) {
                    if (rc == RK_EPROTO)
                        resp_out_proto_error(&sl->out, c->p);
                    else
                        resp_out_error(&sl->out, "ERR", "out of memory");
                    sl->done = true;
                }
                c->n->stats.client_bad_frames++;
                LOG(INFO, "resp.protocol_error", "peer=%s error=\"%s\"",
                    c->peer, resp_parser_error(c->p));
                c->close_after_flush = true;
                break;
            }
        }
        if (c->writes_inflight > 0 && !may_overtake(&cmd)) {
            c->held = cmd;
            c->has_held = true;
            break;
        }
        c->has_held = false;
        exec_cmd(c, &cmd);
    }
    c->processing = false;
    if ((c->close_after_flush || c->has_held) && c->reading) {
        uv_read_stop((uv_stream_t *)&c->tcp);
        c->reading = false;
    }
    drain_slots(c);
    if (!c->closing && c->reading &&
        (c->writing + c->out.len > RSRV_OUT_HIGH ||
         c->nslots > (size_t)c->n->cfg.max_pipeline * 2)) {
        uv_read_stop((uv_stream_t *)&c->tcp);
        c->reading = false;
    } else if (!c->closing && !c->reading && !c->has_held &&
               !c->close_after_flush && c->writing < RSRV_OUT_HIGH / 2 &&
               c->nslots <= (size_t)c->n->cfg.max_pipeline * 2) {
        rconn_resume(c);
    }
    rconn_unref(c);
}

/* ---- reading ---------------------------------------------------------- */

static void on_alloc(uv_handle_t *h, size_t hint, uv_buf_t *buf)
{
    struct rconn *c = h->data;
    (void)hint;
    uint8_t *p = NULL;
    size_t len = 0;
    if (resp_parser_reserve(&p, &len, c->p, RSRV_READ_WANT) < 0) {
        *buf = uv_buf_init(NULL, 0);
        return;
    }
    *buf =
        uv_buf_init((char *)p, (unsigned)(len > UINT32_MAX ? UINT32_MAX : len));
}

static void on_read(uv_stream_t *s, ssize_t nread, const uv_buf_t *buf)
{
    struct rconn *c = s->data;
    (void)buf;
    if (nread < 0) {
        rconn_close(c);
        return;
    }
    if (nread == 0)
        return;
    resp_parser_commit(c->p, (size_t)nread);
    rconn_process(c);
}

static void rconn_resume(struct rconn *c)
{
    if (uv_read_start((uv_stream_t *)&c->tcp, on_alloc, on_read) == 0)
        c->reading = true;
}

static void on_connection(uv_stream_t *server, int status)
{
    node *n = server->data;
    if (status < 0)
        return;
    struct rconn *c = calloc(1, sizeof(*c));
    if (!c)
        return;
    c->n = n;
    c->refs = 1;
    c->cl = coord_default_cl(n);
    uv_tcp_init(n->loop, &c->tcp);
    c->tcp.data = c;
    struct resp_limits lim = RESP_LIMITS_INIT;
    if (resp_parser_new(&c->p, &lim) < 0 ||
        uv_accept(server, (uv_stream_t *)&c->tcp) < 0) {
        c->closing = true;
        uv_close((uv_handle_t *)&c->tcp, on_closed);
        return;
    }
    uv_tcp_nodelay(&c->tcp, 1);
    struct sockaddr_storage ss;
    int len = sizeof(ss);
    snprintf(c->peer, sizeof(c->peer), "?");
    if (uv_tcp_getpeername(&c->tcp, (struct sockaddr *)&ss, &len) == 0)
        net_addr_format(c->peer, sizeof(c->peer), (struct sockaddr *)&ss);
    c->next = n->rconns;
    if (n->rconns)
        n->rconns->prev = c;
    n->rconns = c;
    n->stats.client_conns++;
    rconn_resume(c);
}

int node__rsrv_start(node *n, char *err, size_t errlen)
{
    if (!n->cfg.resp_port)
        return 0;
    struct sockaddr_storage sa;
    int rc = node__resolve(&sa, n->cfg.listen_address, n->cfg.resp_port);
    if (rc < 0) {
        snprintf(err, errlen, "listen_address: cannot resolve '%s'",
                 n->cfg.listen_address);
        return rc;
    }
    uv_tcp_init(n->loop, &n->rsrv);
    n->rsrv.data = n;
    n->rsrv_open = 1;
    rc = uv_tcp_bind(&n->rsrv, (struct sockaddr *)&sa, 0);
    if (rc == 0)
        rc = uv_listen((uv_stream_t *)&n->rsrv, 511, on_connection);
    if (rc < 0) {
        snprintf(err, errlen, "resp_port: cannot listen on %s:%d: %s",
                 n->cfg.listen_address, n->cfg.resp_port, uv_strerror(rc));
        return rc;
    }
    return 0;
}

void node__rsrv_drain(node *n)
{
    if (n->rsrv_open) {
        n->rsrv_open = 0;
        n->pending_closes++;
        uv_close((uv_handle_t *)&n->rsrv, node__handle_closed);
    }
    for (struct rconn *c = n->rconns; c; c = c->next) {
        if (c->reading) {
            uv_read_stop((uv_stream_t *)&c->tcp);
            c->reading = false;
        }
        c->has_held = false; /* commands not started are not run */
        c->close_after_flush = true;
        mark_dirty(c);
    }
}

void node__rsrv_stop(node *n)
{
    node__rsrv_drain(n);
    while (n->rconns)
        rconn_close(n->rconns);
}
