/*
 * rsrv.c - the RESP2 server (see rsrv.h; commands in docs/resp.md).
 *
 * Ordering. Every request that cannot be answered on the spot gets a slot
 * at the tail of its connection's queue. A slot that completes while it is
 * the head encodes its reply straight into the connection's output buffer;
 * one that completes behind a pending head encodes into its own buffer and
 * waits. When the head completes, every completed slot behind it is
 * appended in order. A reply answered on the spot goes straight to the
 * output when the queue is empty, else into a completed slot at the tail.
 *
 * Bytes. The coordinator copies what it keeps (key, encoded value) before
 * coord_*() returns, so request bytes borrowed from the parser are dead
 * after the call; only SET NX/XX (a read, then a write), DEL (a read,
 * then a delete), EXISTS / MGET (reads a window at a time) and MSET past
 * its first window copy their keys/values into the slot.
 *
 * Output. Replies accumulate in `out` during a loop turn; at the end of the
 * turn (the node's check handle calls node__rsrv_flush) each dirty
 * connection is flushed with uv_try_write and hands only what the socket did
 * not take to uv_write, from a second buffer, so a pipelined burst costs
 * one write(2) and no allocation.
 *
 * Bounds. A node with max_inflight client requests in flight answers
 * -OVERLOADED at once. A connection with max_pipeline requests in flight
 * holds its next command back (and stops reading) until one completes, as
 * a Redis server keeps a pipelining client waiting: redis-cli --pipe and a
 * client library's long pipeline are served, not half refused. A
 * connection stops reading while its queue holds max_queued slots or its
 * unsent output -- the replies waiting in completed slots behind the head
 * included -- plus the values its reads in flight hold (the coordinator's
 * copies, counted in c->meter by coord_get_metered, and MGET's) and the
 * keys and values its SETs / MSETs in flight write (slot_meter_writes)
 * exceeds RSRV_OUT_HIGH, and resumes (first parsing what it already
 * buffered) when they drain; the parser bounds one request (resp_limits).
 * A local replica answers within coord_get, so a pipeline of big GETs
 * stops after the first; values from remote replicas are counted when they
 * arrive, so the reads issued before then may still bring up to
 * max_pipeline values. One EXISTS / MGET / DEL of many keys reads them
 * RSRV_KEY_READS at a time, one at a time while the meter is over
 * RSRV_OUT_HIGH (slot_reads_more), all by one deadline, read_timeout_ms
 * from the command's start (a read started late gets what is left); MSET
 * and DEL write a quarter of max_inflight at a time (slot_writes_more).
 *
 * Slots are taken from and returned to a pool on the server (common/pool.h),
 * so a request in the steady state allocates nothing here.
 *
 * Life. A connection is freed when its handle is closed and no slot refers
 * to it (refs). The server struct is freed when its listener is closed and
 * every connection is gone (refs); node_stop waits for that.
 */
#include "node/rsrv.h"

#include <assert.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <time.h>
#include <unistd.h>

#include "node/log.h"
#include "node/node_internal.h"
#include "node/obs.h"
#include "node/resp.h"

#define RSRV_READ_CHUNK (64u * 1024u)
#define RSRV_OUT_HIGH   (4u * 1024u * 1024u)
/* Values one MGET may return in all: past it the MGET is answered
 * -TOO_LARGE (300 keys of one 16 MiB value would have asked for 4.8 GiB of
 * copies and as much reply from a 2.7 KB request). */
#define RSRV_MGET_MAX ((size_t)4 * RK_MAX_VALUE)
/* The reads one EXISTS / MGET / DEL keeps in flight: more are issued as
 * they answer, while the connection's meter is under RSRV_OUT_HIGH (one
 * at least). All at once, `EXISTS big big ...` (65,536 keys a request)
 * had the coordinator copy a local 16 MiB value per key within the call
 * (regression: multikey_reads_unbounded). Never more than max_inflight:
 * key_window(). */
#define RSRV_KEY_READS 64
#define RSRV_VERSION   RK_VERSION
#define RSRV_BUCKETS   256 /* key buckets for pipeline ordering */
#define SLOT_LINK      offsetof(struct rslot, next)

struct rsrv {
    node *n;
    uv_tcp_t tcp;
    int refs; /* 1 for the listener + 1 per live connection */
    struct rconn *conns;
    struct rconn *dirty;
    uint64_t nconns;
    uint64_t accepted, proto_err;
    uint64_t commands; /* commands parsed (INFO total_commands_processed) */
    uint64_t started_ms;
    bool draining;            /* listener closed, connections finishing */
    struct rk_pool slot_pool; /* finished slots (linked by next) */
};

struct rslot;

struct rconn {
    uv_tcp_t tcp;
    struct rsrv *rs;
    node *n;
    struct rconn *next, *prev;
    struct rconn *dirty_next;
    resp_parser *p;
    struct resp_out out;  /* replies not yet handed to the socket */
    struct resp_out wbuf; /* bytes uv_write is sending */
    struct rslot *head, *tail;
    uint32_t nslots;
    size_t queued; /* reply bytes of completed slots waiting behind head */
    /* values held for reads in flight: by the coordinator until it
     * answers (coord_get_metered), then MGET's copies until its reply */
    struct coord_meter meter;
    uint32_t inflight; /* slots waiting for the coordinator */
    uint32_t max_queued;
    /* pending reads / writes per key bucket, and the command held back
     * because it conflicts with one (its argv stays valid: no parser call
     * is made while it is held) */
    uint32_t rpend[RSRV_BUCKETS], wpend[RSRV_BUCKETS];
    bool held;
    struct resp_cmd hcmd;
    int refs;
    enum node_cl cl;
    bool on_dirty, closing, close_after_flush, reading, writing, authed;
    bool stopped;    /* no more requests: QUIT or protocol error */
    bool eof;        /* the client sent EOF: run what is buffered, then close */
    bool in_multi;   /* after a refused MULTI (resp_multi_filter) */
    bool processing; /* inside conn_process */
    char peer[64];
};

/* One sub-request of a slot (one key). */
struct rsub {
    struct rslot *s;
    uint8_t bk;  /* key bucket (RSRV_BUCKETS) */
    bool rd, wr; /* registered as a pending read / write of bk */
    bool found;
    uint8_t *val; /* MGET: copy of the value */
    size_t vlen;
};

enum slot_kind { K_DONE, K_GET, K_SET, K_DEL, K_EXISTS, K_MGET, K_MSET, K_TTL };

struct rslot {
    struct rconn *c;
    struct rslot *next;
    struct resp_out out; /* reply, when completed behind the head */
    enum slot_kind kind;
    bool done;
    bool counted;     /* holds a unit of c->inflight and n->inflight */
    uint32_t pending; /* sub-requests outstanding */
    int err;          /* first error (not RK_ENOTFOUND) */
    uint32_t acks, need;
    int cause; /* coord_result.cause */
    enum node_cl cl;
    /* TTL / PTTL */
    bool pttl;
    uint64_t expiry; /* the value's, Unix ms; 0: none */
    /* SET */
    struct resp_set_opts set;
    uint64_t ttl_ms;
    bool expired;  /* EXAT/PXAT in the past: delete */
    uint8_t *copy; /* key (and value) bytes for the second phase */
    size_t klen, vlen;
    /* multi-key */
    size_t nsub;
    struct rsub *sub;
    struct rsub sub1;
    size_t mget_bytes; /* MGET: value bytes copied so far */
    uint8_t **keys;    /* EXISTS / MGET / DEL: key copies */
    size_t *klens;
    size_t next_key;   /* the next key to read */
    uint32_t reads;    /* its reads in flight */
    uint64_t deadline; /* its reads answer by then (coord_read_deadline) */
    /* MSET / DEL's deletes */
    size_t next_write; /* the next key to write */
    uint32_t writes;   /* its writes in flight */
    size_t *vlens;     /* MSET: keys[i] holds key and value past the first
                          window (the request's bytes are gone by then) */
    size_t wbytes;     /* SET / MSET: the keys and values it writes,
                          counted in c->meter until its reply */
};

static void conn_unref(struct rconn *c);
static void conn_close(struct rconn *c);
static void conn_process(struct rconn *c);
static void conn_update_reading(struct rconn *c);

static int node_op_of(enum slot_kind k)
{
    switch (k) {
    case K_SET:
    case K_MSET:
        return NODE_OP_PUT;
    case K_DEL:
        return NODE_OP_DEL;
    default:
        return NODE_OP_GET;
    }
}

/* ---- server life ------------------------------------------------------ */

static void rsrv_unref(struct rsrv *rs)
{
    if (--rs->refs > 0)
        return;
    node *n = rs->n;
    for (struct rslot *s; (s = rk_pool_get(&rs->slot_pool, SLOT_LINK));)
        free(s);
    free(rs);
    n->pending_closes--;
    node__stop_progress(n);
}

static void on_rsrv_handle_closed(uv_handle_t *h)
{
    rsrv_unref(h->data);
}

/* ---- output ----------------------------------------------------------- */

static void conn_mark_dirty(struct rconn *c)
{
    if (c->on_dirty || c->closing)
        return;
    c->on_dirty = true;
    c->refs++;
    c->dirty_next = c->rs->dirty;
    c->rs->dirty = c;
}

static void conn_flush(struct rconn *c);
static bool conn_resume(struct rconn *c);

static void on_write(uv_write_t *req, int status)
{
    struct rconn *c = req->data;
    free(req);
    c->writing = false;
    c->wbuf.len = 0;
    if (c->wbuf.cap > RSRV_OUT_HIGH)
        resp_out_free(&c->wbuf);
    if (status < 0 && !c->closing) {
        LOG(DEBUG, "resp.write_fail", "peer=%s error=%s", c->peer,
            uv_strerror(status));
        conn_close(c);
    } else if (!c->closing) {
        conn_flush(c);
        conn_resume(c);
    }
    conn_unref(c);
}

static void conn_maybe_close(struct rconn *c)
{
    if (!c->closing && c->close_after_flush && !c->head && c->out.len == 0 &&
        !c->writing)
        conn_close(c);
}

static void conn_flush(struct rconn *c)
{
    if (c->closing)
        return;
    if (c->writing || c->out.len == 0) {
        conn_maybe_close(c);
        return;
    }
    /* uv_buf_t's len is a size_t here: uv_buf_init's unsigned would cut
     * an output over 4 GiB (a huge MGET reply) and lose the rest. */
    uv_buf_t b = {.base = (char *)c->out.p, .len = c->out.len};
    int w = uv_try_write((uv_stream_t *)&c->tcp, &b, 1);
    if (w == UV_EAGAIN || w == UV_ENOSYS)
        w = 0;
    if (w < 0) {
        conn_close(c);
        return;
    }
    if ((size_t)w == c->out.len) {
        c->out.len = 0;
        if (c->out.cap > RSRV_OUT_HIGH)
            resp_out_free(&c->out);
        conn_maybe_close(c);
        return;
    }
    /* hand the rest to uv_write from wbuf; out collects what comes next */
    struct resp_out t = c->wbuf;
    c->wbuf = c->out;
    c->out = t;
    c->out.len = 0;
    uv_write_t *req = malloc(sizeof(*req));
    if (!req) {
        conn_close(c);
        return;
    }
    req->data = c;
    b.base = (char *)c->wbuf.p + w;
    b.len = c->wbuf.len - (size_t)w;
    int rc = uv_write(req, (uv_stream_t *)&c->tcp, &b, 1, on_write);
    if (rc < 0) {
        free(req);
        conn_close(c);
        return;
    }
    c->writing = true;
    c->refs++;
}

static bool rsrv_flush(struct rsrv *rs)
{
    bool started = false;
    /* A connection resumed here may answer at once: flush that too. */
    while (rs->dirty) {
        struct rconn *c = rs->dirty;
        rs->dirty = NULL;
        while (c) {
            struct rconn *next = c->dirty_next;
            c->on_dirty = false;
            conn_flush(c);
            started |= conn_resume(c);
            conn_unref(c);
            c = next;
        }
    }
    return started;
}

bool node__rsrv_flush(node *n)
{
    return n->rsrv ? rsrv_flush(n->rsrv) : false;
}

/* ---- connection life -------------------------------------------------- */

static void conn_free(struct rconn *c)
{
    struct rsrv *rs = c->rs;
    resp_parser_free(c->p);
    resp_out_free(&c->out);
    resp_out_free(&c->wbuf);
    free(c);
    rsrv_unref(rs);
}

static void conn_unref(struct rconn *c)
{
    if (--c->refs == 0)
        conn_free(c);
}

static void on_conn_closed(uv_handle_t *h)
{
    conn_unref(h->data);
}

static void conn_close(struct rconn *c)
{
    if (c->closing)
        return;
    c->closing = true;
    struct rsrv *rs = c->rs;
    if (c->prev)
        c->prev->next = c->next;
    else
        rs->conns = c->next;
    if (c->next)
        c->next->prev = c->prev;
    c->next = c->prev = NULL;
    rs->nconns--;
    uv_close((uv_handle_t *)&c->tcp, on_conn_closed);
}

/* ---- slots ------------------------------------------------------------ */

static struct rslot *slot_new(struct rconn *c, enum slot_kind kind)
{
    struct rsrv *rs = c->rs;
    struct rslot *s = rk_pool_get(&rs->slot_pool, SLOT_LINK);
    if (s) {
        memset(s, 0, sizeof(*s));
    } else {
        s = calloc(1, sizeof(*s));
        if (!s)
            return NULL;
    }
    s->c = c;
    s->kind = kind;
    s->cl = c->cl;
    s->sub1.s = s;
    s->sub = &s->sub1;
    s->nsub = 1;
    c->refs++;
    c->nslots++;
    if (c->tail)
        c->tail->next = s;
    else
        c->head = s;
    c->tail = s;
    return s;
}

static void slot_free(struct rslot *s)
{
    struct rsrv *rs = s->c->rs;
    resp_out_free(&s->out);
    if (s->sub != &s->sub1) {
        for (size_t i = 0; i < s->nsub; i++)
            free(s->sub[i].val);
        free(s->sub);
    } else {
        free(s->sub1.val);
    }
    if (s->keys) {
        for (size_t i = 0; i < s->nsub; i++)
            free(s->keys[i]);
        free(s->keys);
    }
    free(s->klens);
    free(s->vlens);
    free(s->copy);
    if (!rk_pool_put(&rs->slot_pool, s, SLOT_LINK))
        free(s);
}

/* Where the reply of s goes: the output when s is the head, else its own
 * buffer. */
static struct resp_out *slot_out(struct rslot *s)
{
    return s == s->c->head ? &s->c->out : &s->out;
}

/* Move completed slots at the head into the output, in order. */
static void conn_drain(struct rconn *c)
{
    bool any = false;
    while (c->head && c->head->done) {
        struct rslot *s = c->head;
        c->head = s->next;
        if (!c->head)
            c->tail = NULL;
        c->nslots--;
        assert(c->queued >= s->out.len);
        c->queued -= s->out.len;
        if (s->out.len && !c->closing) {
            if (c->out.len == 0 && c->out.cap < s->out.cap) {
                struct resp_out t = c->out; /* take its buffer whole */
                c->out = s->out;
                s->out = t;
            } else if (resp_out_reserve(&c->out, s->out.len) == 0) {
                memcpy(c->out.p + c->out.len, s->out.p, s->out.len);
                c->out.len += s->out.len;
            } else {
                conn_close(c);
            }
        }
        slot_free(s);
        any = true;
        conn_unref(c);
    }
    if (any || c->out.len)
        conn_mark_dirty(c);
}

/* The slot's reply is encoded: release its in-flight units and drain. */
static void slot_complete(struct rslot *s)
{
    struct rconn *c = s->c;
    s->done = true;
    c->queued += s->out.len; /* until conn_drain moves it to the output */
    if (s->counted) {
        s->counted = false;
        c->inflight--;
        c->n->inflight--;
    }
    c->refs++; /* drain may drop the last slot reference */
    conn_drain(c);
    if (!c->closing) {
        conn_maybe_close(c);
        if (!c->closing && !c->stopped && !c->reading && !c->processing)
            conn_process(c); /* resume: parse what is buffered first */
    }
    conn_unref(c);
}

static void
reply_err(struct resp_out *o, int err, uint32_t acks, uint32_t need, int cause)
{
    char msg[192];
    coord_errmsg(msg, sizeof(msg), err, acks, need, cause);
    resp_out_rkerr(o, err, msg);
}

/* Record the first real error of a sub-request. */
static void slot_note(struct rslot *s, const struct coord_result *res)
{
    if (res->err && res->err != RK_ENOTFOUND && !s->err) {
        s->err = res->err;
        s->acks = res->acks;
        s->need = res->need;
        s->cause = res->cause;
    }
}

static void slot_note_rc(struct rslot *s, int rc)
{
    if (!s->err) {
        s->err = rc;
        s->acks = 0;
        s->need = 0;
        s->cause = 0;
    }
    if (rc == RK_EOVERLOADED) {
        s->c->n->stats.overloaded++;
        node__obs_overloaded(s->c->n, node_op_of(s->kind), s->cl);
    }
}

/* All sub-requests are in: encode the reply. */
static void slot_finish(struct rslot *s)
{
    struct rconn *c = s->c;
    for (size_t i = 0; i < s->nsub; i++) {
        struct rsub *u = &s->sub[i];
        if (u->rd)
            c->rpend[u->bk]--;
        if (u->wr)
            c->wpend[u->bk]--;
        u->rd = u->wr = false;
    }
    assert(c->meter.bytes >= s->mget_bytes + s->wbytes);
    c->meter.bytes -= s->mget_bytes; /* the copies become the reply */
    c->meter.bytes -= s->wbytes;     /* the writes are answered */
    s->mget_bytes = 0;
    s->wbytes = 0;
    struct resp_out *o = slot_out(s);
    if (s->err == RK_ETOOLARGE && s->kind == K_MGET) {
        char msg[96];
        snprintf(msg, sizeof(msg),
                 "MGET reply over %zu MiB: ask for fewer keys at once",
                 RSRV_MGET_MAX >> 20);
        resp_out_rkerr(o, s->err, msg);
    } else if (s->err) {
        reply_err(o, s->err, s->acks, s->need, s->cause);
    } else {
        switch (s->kind) {
        case K_GET:
            if (!s->sub1.found)
                resp_out_null(o);
            break;    /* found: encoded in on_get */
        case K_TTL: { /* Redis's answers: -2 no key, -1 no expiry */
            uint64_t now = node__now_ms();
            uint64_t left = s->expiry > now ? s->expiry - now : 0;
            if (left > INT64_MAX) /* unsigned: no expiry overflows it */
                left = INT64_MAX;
            if (!s->sub1.found)
                resp_out_int(o, -2);
            else if (!s->expiry)
                resp_out_int(o, -1);
            else
                resp_out_int(o,
                             (int64_t)(s->pttl ? left : (left + 500) / 1000));
            break;
        }
        case K_SET:
            if (s->set.reply_int) /* SETNX */
                resp_out_int(o, s->sub1.found ? 0 : 1);
            else if (s->sub1.found) /* condition failed */
                resp_out_null(o);
            else
                resp_out_ok(o);
            break;
        case K_MSET:
            resp_out_ok(o);
            break;
        case K_DEL:
        case K_EXISTS: {
            int64_t cnt = 0;
            for (size_t i = 0; i < s->nsub; i++)
                cnt += s->sub[i].found;
            resp_out_int(o, cnt);
            break;
        }
        case K_MGET:
            resp_out_array(o, s->nsub);
            for (size_t i = 0; i < s->nsub; i++) {
                if (s->sub[i].found)
                    resp_out_bulk(o, s->sub[i].val, s->sub[i].vlen);
                else
                    resp_out_null(o);
            }
            break;
        case K_DONE:
            break;
        }
    }
    slot_complete(s);
}

/* ---- coordinator callbacks -------------------------------------------- */

static void slot_reads_more(struct rslot *s);

static void on_get(const struct coord_result *res, void *arg)
{
    struct rsub *u = arg;
    struct rslot *s = u->s;
    if (res->err == 0) {
        u->found = true;
        if (s->kind == K_GET) {
            /* encode at once: the value is borrowed for this call only */
            if (resp_out_bulk(slot_out(s), res->value.p, res->value.len) < 0)
                s->err = -ENOMEM;
        } else if (s->kind == K_TTL) {
            s->expiry = res->expiry_ms;
        } else if (s->kind == K_MGET) {
            int err = 0;
            if (s->mget_bytes + res->value.len > RSRV_MGET_MAX)
                err = RK_ETOOLARGE; /* copy nothing more */
            else if (!(u->val = malloc(res->value.len ? res->value.len : 1)))
                err = -ENOMEM;
            if (err && !s->err)
                s->err = err;
            if (!err) {
                memcpy(u->val, res->value.p, res->value.len);
                u->vlen = res->value.len;
                s->mget_bytes += res->value.len;
                s->c->meter.bytes += res->value.len;
            }
        }
    }
    slot_note(s, res);
    slot_reads_more(s);
    if (--s->pending == 0)
        slot_finish(s);
}

static void slot_writes_more(struct rslot *s, const struct resp_request *q);

static void on_write_done(const struct coord_result *res, void *arg)
{
    struct rsub *u = arg;
    struct rslot *s = u->s;
    slot_note(s, res);
    if (s->kind == K_MSET || s->kind == K_DEL) { /* not SET */
        s->writes--;
        slot_writes_more(s, NULL);
    }
    if (--s->pending == 0)
        slot_finish(s);
}

static int set_write(struct rslot *s, struct rk_slice key, struct rk_slice val)
{
    node *n = s->c->n;
    if (s->expired)
        return coord_del(n, key, s->cl, on_write_done, &s->sub1);
    return coord_put(n, key, val, s->ttl_ms, s->cl, on_write_done, &s->sub1);
}

/* SET NX/XX: the read is in; write if the condition holds. */
static void on_set_check(const struct coord_result *res, void *arg)
{
    struct rsub *u = arg;
    struct rslot *s = u->s;
    if (res->err && res->err != RK_ENOTFOUND) {
        slot_note(s, res);
        slot_finish(s);
        return;
    }
    bool exists = res->err == 0;
    bool go = s->set.cond == RESP_SET_NX ? !exists : exists;
    if (!go) {
        u->found = true; /* reply nil */
        slot_finish(s);
        return;
    }
    int rc = set_write(s, RK_SLICE(s->copy, s->klen),
                       RK_SLICE(s->copy + s->klen, s->vlen));
    if (rc < 0) {
        slot_note_rc(s, rc);
        slot_finish(s);
    }
}

/* DEL, second phase: every read is in. If one failed (TIMEOUT,
 * UNAVAILABLE, ...) the count is unknown: answer that error and delete
 * nothing, so the reply means what it says (UNAVAILABLE: nothing was
 * written). Else delete every key, found or not, so versions the reads
 * could not see are covered too. Before, a failed read counted its key as
 * absent and the delete went out anyway: `:0` for a key that may well
 * have existed (regression: del_read_failure_not_absent). */
static void del_send(struct rslot *s)
{
    if (s->err) {
        slot_finish(s);
        return;
    }
    s->pending = 1; /* held while the deletes are issued */
    slot_writes_more(s, NULL);
    if (--s->pending == 0)
        slot_finish(s);
}

/* DEL: the read of one key is in (found or not). */
static void on_del_read(const struct coord_result *res, void *arg)
{
    struct rsub *u = arg;
    struct rslot *s = u->s;
    u->found = res->err == 0;
    slot_note(s, res);
    slot_reads_more(s);
    if (--s->pending == 0)
        del_send(s);
}

/* Sub-requests one slot keeps in flight: RSRV_KEY_READS, or max_inflight
 * if that is less, so that a command of many keys can complete on an idle
 * node whatever its limit. */
static uint32_t key_window(const node *n)
{
    if (n->cfg.max_inflight < RSRV_KEY_READS)
        return n->cfg.max_inflight > 1 ? (uint32_t)n->cfg.max_inflight : 1;
    return RSRV_KEY_READS;
}

/* The writes one MSET / DEL keeps in flight: a quarter of max_inflight
 * (the reads' window if that is more). All at once, one of more keys than
 * max_inflight was refused -OVERLOADED even on an idle node (regression:
 * multikey_writes_overloaded); a window as small as the reads' made a
 * bulk MSET wait for a disk sync every 64 pairs. */
static uint32_t write_window(const node *n)
{
    uint32_t w = (uint32_t)(n->cfg.max_inflight / 4);
    return w > key_window(n) ? w : key_window(n);
}

/* MSET / DEL's deletes: start the next writes, write_window() in flight
 * at most; q is the request while exec_data runs (an MSET's first window
 * is written from its bytes, the later pairs from the slot's copies,
 * mset_copy_rest), NULL later. None after an error: the reply is that
 * error (writes sent before it may have been applied). The caller holds a
 * unit of s->pending. */
static void slot_writes_more(struct rslot *s, const struct resp_request *q)
{
    node *n = s->c->n;
    while (s->next_write < s->nsub && !s->err && s->writes < write_window(n)) {
        size_t i = s->next_write++;
        s->pending++;
        s->writes++;
        int rc;
        if (s->kind == K_DEL)
            rc = coord_del(n, RK_SLICE(s->keys[i], s->klens[i]), s->cl,
                           on_write_done, &s->sub[i]);
        else if (s->keys && s->keys[i])
            rc = coord_put(n, RK_SLICE(s->keys[i], s->klens[i]),
                           RK_SLICE(s->keys[i] + s->klens[i], s->vlens[i]), 0,
                           s->cl, on_write_done, &s->sub[i]);
        else
            rc = coord_put(n, q->keys[2 * i], q->keys[2 * i + 1], 0, s->cl,
                           on_write_done, &s->sub[i]);
        if (rc < 0) {
            s->pending--;
            s->writes--;
            slot_note_rc(s, rc);
        }
    }
}

/* EXISTS / MGET / DEL: a read answered (or none started yet); start the
 * next ones, key_window() in flight at most, and only one while the
 * connection's meter is over RSRV_OUT_HIGH (its copies, the MGET's values
 * included). None after an error: the reply is that error. The caller
 * holds a unit of s->pending. */
static void slot_reads_more(struct rslot *s)
{
    if (!s->keys)
        return; /* GET, TTL, SET's read */
    if (s->reads > 0)
        s->reads--;
    struct rconn *c = s->c;
    while (s->next_key < s->nsub && !s->err && !c->closing &&
           (s->reads == 0 ||
            (s->reads < key_window(c->n) && c->meter.bytes <= RSRV_OUT_HIGH))) {
        size_t i = s->next_key++;
        s->pending++;
        s->reads++;
        int rc = coord_get_metered(
            c->n, RK_SLICE(s->keys[i], s->klens[i]), s->cl, s->deadline,
            &c->meter, s->kind == K_DEL ? on_del_read : on_get, &s->sub[i]);
        if (rc < 0) {
            s->pending--;
            s->reads--;
            slot_note_rc(s, rc);
        }
    }
}

/* ---- commands --------------------------------------------------------- */

/* Admission: a slot of `kind` may start, or the reply is OVERLOADED (the
 * node is full; a full connection waits instead: exec_data). */
static bool admit(struct rconn *c, enum slot_kind kind, struct resp_out *o)
{
    node *n = c->n;
    if (n->inflight < n->cfg.max_inflight)
        return true;
    n->stats.overloaded++;
    node__obs_overloaded(n, node_op_of(kind), c->cl);
    resp_out_rkerr(o, RK_EOVERLOADED,
                   "too many requests in flight, retry later");
    return false;
}

static int sub_alloc(struct rslot *s, size_t nkeys)
{
    s->sub = calloc(nkeys, sizeof(*s->sub));
    if (!s->sub) {
        s->sub = &s->sub1;
        return -ENOMEM;
    }
    s->nsub = nkeys;
    for (size_t i = 0; i < nkeys; i++)
        s->sub[i].s = s;
    return 0;
}

/* Pipeline ordering. Commands of one connection run concurrently, but one
 * that reads a key with a write of the connection still pending (or writes
 * a key with a read pending) is held back until that completes, so a
 * pipelined SET k; GET k reads its own write. Two writes of one key need no
 * wait: the coordinator stamps them with increasing HLC timestamps in
 * issue order (an MSET that writes a window at a time counts as a read as
 * well: kind_rw). Keys are compared by bucket (a false conflict only
 * waits). */
static size_t req_nkeys(const struct resp_request *q)
{
    return (q->op == RESP_OP_GET || q->op == RESP_OP_SET ||
            q->op == RESP_OP_TTL)
               ? 1
               : q->nkeys;
}

static struct rk_slice req_key(const struct resp_request *q, size_t i)
{
    if (q->op == RESP_OP_GET || q->op == RESP_OP_SET || q->op == RESP_OP_TTL)
        return q->key;
    return q->op == RESP_OP_MSET ? q->keys[2 * i] : q->keys[i];
}

static uint8_t key_bucket(struct rk_slice k)
{
    return (uint8_t)(rk_token(k.p, k.len) >> 56);
}

static void kind_rw(const node *n,
                    enum slot_kind kind,
                    const struct resp_request *q,
                    bool *rd,
                    bool *wr)
{
    /* An MSET of more than one window sends its later writes once earlier
     * ones are answered, after the commands behind it may have written
     * the same keys: it holds their writes back as a read does, or those
     * got the older timestamps and lost to it (regression:
     * multikey_writes_overloaded). */
    *rd = kind == K_GET || kind == K_TTL || kind == K_EXISTS ||
          kind == K_MGET || kind == K_DEL ||
          (kind == K_SET && q->set.cond != RESP_SET_ALWAYS) ||
          (kind == K_MSET && q->nkeys > write_window(n));
    *wr = kind == K_SET || kind == K_MSET || kind == K_DEL;
}

static bool conflicts(const struct rconn *c,
                      const struct resp_request *q,
                      enum slot_kind kind)
{
    bool rd, wr;
    kind_rw(c->n, kind, q, &rd, &wr);
    for (size_t i = 0; i < req_nkeys(q); i++) {
        uint8_t b = key_bucket(req_key(q, i));
        if ((rd && c->wpend[b]) || (wr && c->rpend[b]))
            return true;
    }
    return false;
}

static void slot_register(struct rslot *s, const struct resp_request *q)
{
    struct rconn *c = s->c;
    bool rd, wr;
    kind_rw(c->n, s->kind, q, &rd, &wr);
    for (size_t i = 0; i < s->nsub; i++) {
        struct rsub *u = &s->sub[i];
        /* the slot's copies when it has them: DEL's are distinct */
        u->bk =
            key_bucket(s->keys && s->keys[i] ? RK_SLICE(s->keys[i], s->klens[i])
                                             : req_key(q, i));
        u->rd = rd;
        u->wr = wr;
        c->rpend[u->bk] += rd;
        c->wpend[u->bk] += wr;
    }
}

struct key_ref {
    struct rk_slice k;
    size_t i; /* position in the request */
};

static int key_ref_cmp(const void *a, const void *b)
{
    const struct key_ref *x = a, *y = b;
    if (x->k.len != y->k.len)
        return x->k.len < y->k.len ? -1 : 1;
    int d = memcmp(x->k.p, y->k.p, x->k.len);
    if (d != 0)
        return d;
    return x->i < y->i ? -1 : x->i > y->i;
}

/* Set dup[i] for each of the n keys named earlier in the list. Returns
 * the number of distinct keys, or 0 if out of memory. */
static size_t keys_mark_dups(bool *dup, const struct rk_slice *keys, size_t n)
{
    struct key_ref *r = malloc(n * sizeof(*r));
    if (!r)
        return 0;
    for (size_t i = 0; i < n; i++)
        r[i] = (struct key_ref){keys[i], i};
    qsort(r, n, sizeof(*r), key_ref_cmp);
    size_t distinct = n;
    for (size_t j = 1; j < n; j++) {
        if (r[j].k.len == r[j - 1].k.len &&
            memcmp(r[j].k.p, r[j - 1].k.p, r[j].k.len) == 0) {
            dup[r[j].i] = true;
            distinct--;
        }
    }
    free(r);
    return distinct;
}

/* EXISTS / MGET / DEL: copy the keys into the slot (they are read a few
 * at a time, after the request's bytes are gone). DEL takes each key once:
 * Redis deletes a key at its first mention and counts it once, and `DEL k
 * k` answered 2 (regression: del_duplicate_keys_counted). EXISTS counts a
 * key named twice twice, as Redis does; MGET answers each. */
static int slot_copy_keys(struct rslot *s, const struct resp_request *q)
{
    size_t n = q->nkeys, nd = n;
    bool *dup = NULL;
    int rc = -ENOMEM;
    if (s->kind == K_DEL && n > 1) {
        if (!(dup = calloc(n, sizeof(*dup))) ||
            !(nd = keys_mark_dups(dup, q->keys, n)))
            goto out;
    }
    if (nd > 1 && sub_alloc(s, nd) < 0)
        goto out;
    s->keys = calloc(nd, sizeof(*s->keys));
    s->klens = calloc(nd, sizeof(*s->klens));
    if (!s->keys || !s->klens)
        goto out;
    for (size_t i = 0, j = 0; i < n; i++) {
        if (dup && dup[i])
            continue;
        if (!(s->keys[j] = malloc(q->keys[i].len ? q->keys[i].len : 1)))
            goto out;
        memcpy(s->keys[j], q->keys[i].p, q->keys[i].len);
        s->klens[j++] = q->keys[i].len;
    }
    rc = 0;
out:
    free(dup);
    return rc;
}

/* MSET of more pairs than one window: copy the pairs from `from` on, key
 * then value, for slot_writes_more. */
static int
mset_copy_rest(struct rslot *s, const struct resp_request *q, size_t from)
{
    s->keys = calloc(q->nkeys, sizeof(*s->keys));
    s->klens = calloc(q->nkeys, sizeof(*s->klens));
    s->vlens = calloc(q->nkeys, sizeof(*s->vlens));
    if (!s->keys || !s->klens || !s->vlens)
        return -ENOMEM;
    for (size_t i = from; i < q->nkeys; i++) {
        struct rk_slice k = q->keys[2 * i], v = q->keys[2 * i + 1];
        if (!(s->keys[i] = malloc(k.len + v.len)))
            return -ENOMEM; /* slot_free frees what was copied */
        memcpy(s->keys[i], k.p, k.len);
        if (v.len)
            memcpy(s->keys[i] + k.len, v.p, v.len);
        s->klens[i] = k.len;
        s->vlens[i] = v.len;
    }
    return 0;
}

/* The bytes a SET / MSET writes count in the connection's meter until its
 * reply: the coordinator keeps a copy of each value until the replicas
 * answer (MSET's later pairs are copied here). Before, a client that
 * pipelined SETs of big values without reading their small replies had
 * max_pipeline writes' values held at once, 1 GiB for values of 1 MiB at
 * the defaults (regression: inflight_writes_unbounded). */
static void slot_meter_writes(struct rslot *s, const struct resp_request *q)
{
    size_t n = 0;
    if (s->kind == K_SET)
        n = q->key.len + q->value.len;
    else
        for (size_t i = 0; i < 2 * q->nkeys; i++)
            n += q->keys[i].len;
    s->wbytes = n;
    s->c->meter.bytes += n;
}

/* A relative expiry that passes INT64_MAX ms once the clock is added:
 * refused, as Redis does. It was taken, and TTL / PTTL of the key then
 * overflowed (regression: set_expire_overflow). */
static bool set_expiry_overflows(const struct resp_request *q)
{
    return q->set.has_expire && !q->set.expire_at &&
           q->set.expire_ms > INT64_MAX - (int64_t)node__now_ms();
}

/* Start a data command in a new slot. Returns 0 (the slot completes
 * later, or has completed), 1 (held back: conflicts with a pending
 * command, or the connection has max_pipeline in flight; nothing done) or
 * -ENOMEM (nothing queued). */
static int exec_data(struct rconn *c, const struct resp_request *q)
{
    node *n = c->n;
    enum slot_kind kind;
    switch (q->op) {
    case RESP_OP_GET:
        kind = K_GET;
        break;
    case RESP_OP_TTL:
        kind = K_TTL;
        break;
    case RESP_OP_SET:
        kind = K_SET;
        break;
    case RESP_OP_DEL:
        kind = K_DEL;
        break;
    case RESP_OP_EXISTS:
        kind = K_EXISTS;
        break;
    case RESP_OP_MGET:
        kind = K_MGET;
        break;
    default:
        kind = K_MSET;
        break;
    }
    if (c->head &&
        (c->inflight >= (uint32_t)n->cfg.max_pipeline || conflicts(c, q, kind)))
        return 1;
    struct rslot *s = slot_new(c, kind);
    if (!s)
        return -ENOMEM;
    if (kind == K_SET && set_expiry_overflows(q)) {
        resp_out_errorf(slot_out(s), "ERR invalid expire time in '%s' command",
                        q->name);
        slot_complete(s);
        return 0;
    }
    if (!admit(c, kind, slot_out(s))) {
        slot_complete(s);
        return 0;
    }
    s->counted = true;
    c->inflight++;
    n->inflight++;
    s->pending = 1; /* held while sub-requests are issued */
    int rc = 0;
    switch (kind) {
    case K_TTL: /* a GET whose reply is the expiry */
    case K_GET:
        s->pttl = q->pttl;
        s->pending++;
        rc =
            coord_get_metered(n, q->key, s->cl, 0, &c->meter, on_get, &s->sub1);
        if (rc < 0)
            s->pending--;
        break;
    case K_SET: {
        slot_meter_writes(s, q);
        s->set = q->set;
        if (q->set.has_expire) {
            int64_t ms = q->set.expire_ms;
            if (q->set.expire_at)
                ms -= (int64_t)node__now_ms();
            if (ms <= 0)
                s->expired = true;
            else
                s->ttl_ms = (uint64_t)ms;
        }
        s->pending++;
        if (q->set.cond == RESP_SET_ALWAYS) {
            rc = set_write(s, q->key, q->value);
        } else {
            s->copy = malloc(q->key.len + q->value.len + 1);
            if (!s->copy) {
                rc = -ENOMEM;
            } else {
                memcpy(s->copy, q->key.p, q->key.len);
                if (q->value.len)
                    memcpy(s->copy + q->key.len, q->value.p, q->value.len);
                s->klen = q->key.len;
                s->vlen = q->value.len;
                rc = coord_get_metered(n, q->key, s->cl, 0, &c->meter,
                                       on_set_check, &s->sub1);
            }
        }
        if (rc < 0)
            s->pending--;
        break;
    }
    case K_EXISTS:
    case K_MGET:
    case K_DEL:
        rc = slot_copy_keys(s, q);
        if (rc == 0) {
            /* one deadline for all its reads, however late each starts */
            s->deadline = coord_read_deadline(n);
            slot_reads_more(s); /* the first window */
        }
        break;
    case K_MSET:
        slot_meter_writes(s, q);
        if (q->nkeys > 1 && sub_alloc(s, q->nkeys) < 0) {
            rc = -ENOMEM;
            break;
        }
        if (q->nkeys > write_window(n))
            rc = mset_copy_rest(s, q, write_window(n));
        if (rc == 0)
            slot_writes_more(s, q); /* the first window */
        break;
    case K_DONE:
        break;
    }
    slot_register(s, q);
    if (rc < 0)
        slot_note_rc(s, rc);
    if (--s->pending == 0) {
        if (kind == K_DEL)
            del_send(s); /* finishes at once after a failure */
        else
            slot_finish(s);
    }
    return 0;
}

/* A reply known now: straight to the output when nothing is pending,
 * else into a completed slot. The callback fills `o`. */
static struct resp_out *sync_out(struct rconn *c, struct rslot **slot)
{
    *slot = NULL;
    if (!c->head)
        return &c->out;
    *slot = slot_new(c, K_DONE);
    return *slot ? &(*slot)->out : NULL;
}

static void sync_done(struct rconn *c, struct rslot *s)
{
    if (s)
        slot_complete(s);
    else
        conn_mark_dirty(c);
}

static bool arg_is(struct rk_slice a, const char *s)
{
    size_t l = strlen(s);
    return a.len == l && strncasecmp((const char *)a.p, s, l) == 0;
}

/* INFO's sections: none named, or all/everything/default, is every one;
 * else those named (any number, as Redis 7 takes them). */
struct info_want {
    const struct rk_slice *names;
    size_t n;
};

static int info_section_on(struct info_want want, const char *name)
{
    if (want.n == 0)
        return 1;
    for (size_t i = 0; i < want.n; i++)
        if (arg_is(want.names[i], "all") ||
            arg_is(want.names[i], "everything") ||
            arg_is(want.names[i], "default") || arg_is(want.names[i], name))
            return 1;
    return 0;
}

static const char *node_state_name(const node *n)
{
    if (n->stopping)
        return "STOPPING";
    if (n->boot != NODE_BOOT_DONE)
        return "JOINING";
    if (n->ring_stale)
        return "RING_STALE";
    return "NORMAL";
}

static void
info_build(struct resp_out *o, struct rconn *c, struct info_want sec)
{
    node *n = c->n;
    struct rsrv *rs = c->rs;
    char *t = NULL;
    size_t tl = 0;
    FILE *f = open_memstream(&t, &tl);
    if (!f) {
        resp_out_rkerr(o, -ENOMEM, NULL);
        return;
    }
    uint64_t now = node__now_ms();
    if (info_section_on(sec, "server"))
        fprintf(f,
                "# Server\r\nredis_version:7.0.0\r\nringkv_version:%s\r\n"
                "redis_mode:standalone\r\nos:Linux\r\nprocess_id:%ld\r\n"
                "tcp_port:%d\r\nuptime_in_seconds:%llu\r\n\r\n",
                RSRV_VERSION, (long)getpid(), n->cfg.resp_port,
                (unsigned long long)((now - rs->started_ms) / 1000));
    if (info_section_on(sec, "clients"))
        fprintf(f,
                "# Clients\r\nconnected_clients:%llu\r\n"
                "blocked_clients:0\r\n\r\n",
                (unsigned long long)rs->nconns);
    if (info_section_on(sec, "memory")) {
        /* The process's resident memory: ringkv has no allocator
         * accounting of its own (LMDB's maps are in the page cache). */
        unsigned long long pages = 0, rss = 0;
        FILE *m = fopen("/proc/self/statm", "r");
        if (m) {
            if (fscanf(m, "%*s %llu", &pages) == 1)
                rss = pages * (unsigned long long)sysconf(_SC_PAGESIZE);
            fclose(m);
        }
        fprintf(f,
                "# Memory\r\nused_memory:%llu\r\nused_memory_human:%.2fM\r\n"
                "used_memory_rss:%llu\r\nmaxmemory:0\r\n\r\n",
                rss, (double)rss / (1024.0 * 1024.0), rss);
    }
    if (info_section_on(sec, "stats"))
        fprintf(f,
                "# Stats\r\ntotal_connections_received:%llu\r\n"
                "total_commands_processed:%llu\r\n\r\n",
                (unsigned long long)rs->accepted,
                (unsigned long long)rs->commands);
    uint64_t ranges = 0, keys = 0, bytes = 0;
    node__obs_store_totals(n, &ranges, &keys, &bytes);
    if (info_section_on(sec, "ringkv")) {
        size_t up = 0, down = 0;
        for (size_t i = 0; i < n->npeers; i++) {
            if (n->peer[i].up)
                up++;
            else
                down++;
        }
        fprintf(f,
                "# Ringkv\r\nnode_name:%s\r\ncluster_name:%s\r\n"
                "datacenter:%s\r\nrack:%s\r\nnode_state:%s\r\n"
                "generation:%lld\r\nring_epoch:%llu\r\n"
                "ring_fingerprint:%016llx\r\nring_stale:%d\r\n"
                "ring_nodes:%zu\r\nnodes_up:%zu\r\nnodes_down:%zu\r\n"
                "default_consistency:%s\r\nconnection_consistency:%s\r\n"
                "inflight_requests:%lld\r\nranges:%llu\r\nkeys:%llu\r\n"
                "disk_bytes:%llu\r\n",
                n->cfg.node_name, n->cfg.cluster_name, n->cfg.datacenter,
                n->cfg.rack, node_state_name(n), (long long)n->st.generation,
                (unsigned long long)(n->ring ? ring_epoch(n->ring) : 0),
                (unsigned long long)(n->ring ? ring_fingerprint(n->ring) : 0),
                n->ring_stale, n->npeers, up, down,
                node_cl_name(coord_default_cl(n)), node_cl_name(c->cl),
                (long long)n->inflight, (unsigned long long)ranges,
                (unsigned long long)keys, (unsigned long long)bytes);
        for (int i = 0; i < n->cfg.ndcs; i++)
            fprintf(f, "replication_%s:%d\r\n", n->cfg.replication[i].name,
                    n->cfg.replication[i].rf);
        fprintf(f, "\r\n");
    }
    if (info_section_on(sec, "keyspace"))
        fprintf(f, "# Keyspace\r\ndb0:keys=%llu,expires=0,avg_ttl=0\r\n",
                (unsigned long long)keys);
    if (fclose(f) != 0 || !t) {
        free(t);
        resp_out_rkerr(o, -ENOMEM, NULL);
        return;
    }
    resp_out_bulk(o, t, tl);
    free(t);
}

static bool pass_ok(const node *n, struct rk_slice pw)
{
    const char *want = n->cfg.requirepass;
    size_t wl = strlen(want);
    unsigned diff = (unsigned)(pw.len ^ wl);
    for (size_t i = 0; i < pw.len; i++)
        diff |= (unsigned)(pw.p[i] ^ (uint8_t)want[i % (wl ? wl : 1)]);
    return diff == 0;
}

/* Local commands the table leaves to us: INFO, AUTH, CONSISTENCY. */
static void exec_local(struct rconn *c, const struct resp_request *q)
{
    node *n = c->n;
    struct rslot *s;
    struct resp_out *o = sync_out(c, &s);
    if (!o) {
        conn_close(c);
        return;
    }
    switch (q->op) {
    case RESP_OP_INFO:
        info_build(o, c, (struct info_want){q->keys, q->nkeys});
        break;
    case RESP_OP_AUTH:
        if (!n->cfg.requirepass[0]) {
            resp_out_error(o, "ERR",
                           "AUTH <password> called without any password "
                           "configured for the default user");
        } else if ((q->user.len && !arg_is(q->user, "default")) ||
                   !pass_ok(n, q->password)) {
            n->stats.client_auth_fail++;
            LOG(WARN, "resp.auth_fail", "peer=%s", c->peer);
            resp_out_error(o, "WRONGPASS",
                           "invalid username-password pair or user is "
                           "disabled.");
        } else {
            c->authed = true;
            resp_out_ok(o);
        }
        break;
    case RESP_OP_CONSISTENCY:
        if (q->has_level) {
            c->cl = (enum node_cl)((int)q->level + NODE_CL_ONE);
            resp_out_ok(o);
        } else {
            resp_out_simple(o, node_cl_name(c->cl));
        }
        break;
    default:
        resp_out_errorf(o, "ERR command '%s' is not served here",
                        resp_op_name(q->op));
        break;
    }
    sync_done(c, s);
}

/* Before AUTH only AUTH, QUIT and HELLO-less PING... are refused: Redis
 * answers every command but AUTH and QUIT with NOAUTH. */
static bool needs_auth(struct rconn *c, const struct resp_cmd *cmd)
{
    if (!c->n->cfg.requirepass[0] || c->authed)
        return false;
    return !(arg_is(cmd->argv[0], "auth") || arg_is(cmd->argv[0], "quit"));
}

static void conn_stop_reading(struct rconn *c)
{
    if (c->reading) {
        uv_read_stop((uv_stream_t *)&c->tcp);
        c->reading = false;
    }
}

/* Replies waiting in completed slots behind a pending head count as
 * output: they were left out, so a client pipelining ECHO <16 MiB> (or
 * GETs of big values) behind a slow request made the connection hold up
 * to max_queued of them (regression: queued_replies_bound). So do the
 * values the reads in flight already hold: they were left out too, and a
 * client pipelining GETs of a 16 MiB value had every one of max_pipeline
 * reads copy its value before the first reply was encoded, 16 GiB at the
 * defaults (regression: inflight_replies_unbounded). And so do the values
 * of the writes in flight (regression: inflight_writes_unbounded). */
static bool conn_full(const struct rconn *c)
{
    return c->nslots >= c->max_queued ||
           c->out.len + c->wbuf.len + c->queued + c->meter.bytes >
               RSRV_OUT_HIGH;
}

/* Execute the commands buffered in the parser until it needs more bytes,
 * the connection is full, or it stops. */
static void conn_process(struct rconn *c)
{
    c->refs++;
    c->processing = true;
    while (!c->closing && !c->stopped && !conn_full(c)) {
        struct resp_cmd cmd;
        int rc = 1;
        if (c->held) {
            cmd = c->hcmd;
            c->held = false;
        } else {
            rc = resp_parser_next(&cmd, c->p);
            c->rs->commands += rc == 1;
        }
        if (rc == 0) {
            if (c->eof) { /* all it sent is run: close once answered */
                c->stopped = true;
                c->close_after_flush = true;
                conn_maybe_close(c);
            }
            break;
        }
        if (rc == -ENOMEM) { /* the argument arrays could not grow */
            conn_close(c);
            break;
        }
        if (rc < 0) {
            c->rs->proto_err++;
            LOG(INFO, "resp.proto_error", "peer=%s error=\"%s\"", c->peer,
                resp_parser_error(c->p));
            struct rslot *s;
            struct resp_out *o = sync_out(c, &s);
            if (!o) {
                conn_close(c);
                break;
            }
            resp_out_proto_error(o, c->p);
            c->stopped = true;
            c->close_after_flush = true;
            sync_done(c, s);
            break;
        }
        if (needs_auth(c, &cmd)) {
            struct rslot *s;
            struct resp_out *o = sync_out(c, &s);
            if (!o) {
                conn_close(c);
                break;
            }
            resp_out_error(o, "NOAUTH", "Authentication required.");
            sync_done(c, s);
            continue;
        }
        struct resp_request q;
        struct rslot *s = NULL;
        struct resp_out scratch = RESP_OUT_INIT;
        struct resp_out *o = c->head ? &scratch : &c->out;
        q.close = false;
        rc = resp_multi_filter(&c->in_multi, &cmd, o);
        if (rc == RESP_REQ_EXEC)
            rc = resp_request_parse(&q, &cmd, o);
        if (rc == RESP_REQ_ANSWERED) {
            if (c->head) { /* queue the reply behind the pending ones */
                s = slot_new(c, K_DONE);
                if (!s) {
                    resp_out_free(&scratch);
                    conn_close(c);
                    break;
                }
                s->out = scratch;
                slot_complete(s);
            } else {
                conn_mark_dirty(c);
            }
            if (q.close) {
                c->stopped = true;
                c->close_after_flush = true;
                conn_maybe_close(c);
            }
            continue;
        }
        resp_out_free(&scratch);
        if (rc < 0) {
            conn_close(c);
            break;
        }
        switch (q.op) {
        case RESP_OP_GET:
        case RESP_OP_TTL:
        case RESP_OP_SET:
        case RESP_OP_DEL:
        case RESP_OP_EXISTS:
        case RESP_OP_MGET:
        case RESP_OP_MSET:
            rc = exec_data(c, &q);
            if (rc < 0) {
                conn_close(c);
            } else if (rc == 1) { /* wait for the conflicting command */
                c->held = true;
                c->hcmd = cmd;
            }
            break;
        default:
            exec_local(c, &q);
            break;
        }
        if (c->held)
            break;
    }
    c->processing = false;
    conn_update_reading(c);
    conn_unref(c);
}

/* ---- reading ---------------------------------------------------------- */

static void on_alloc(uv_handle_t *h, size_t hint, uv_buf_t *buf)
{
    struct rconn *c = h->data;
    (void)hint;
    uint8_t *p;
    size_t len;
    if (resp_parser_reserve(&p, &len, c->p, RSRV_READ_CHUNK) < 0) {
        *buf = uv_buf_init(NULL, 0);
        return;
    }
    if (len > (size_t)UINT32_MAX)
        len = UINT32_MAX;
    *buf = uv_buf_init((char *)p, (unsigned)len);
}

static void on_read(uv_stream_t *st, ssize_t nread, const uv_buf_t *buf)
{
    struct rconn *c = st->data;
    (void)buf;
    if (nread == UV_EOF) {
        /* A client may shut its side down once it has sent everything
         * (`printf 'GET k\r\n' | nc -N`) and still read: what it sent is
         * run and answered, then the connection closes. Before, EOF closed
         * it at once and the replies of requests still in flight were lost
         * (regression: half_close_drops_replies). libuv stopped reading. */
        c->reading = false;
        c->eof = true;
        conn_process(c);
        return;
    }
    if (nread < 0) {
        LOG(DEBUG, "resp.read_fail", "peer=%s error=%s", c->peer,
            uv_strerror((int)nread));
        conn_close(c);
        return;
    }
    if (nread == 0)
        return;
    resp_parser_commit(c->p, (size_t)nread);
    conn_process(c);
}

/* Output was written: a connection that stopped because it was full runs
 * what it had buffered or held back (conn_process restarts reading at its
 * end); one that is still reading only updates that. Before this, a command
 * held back (pipeline full) while the output was over its bound was never
 * run once the output drained (regression: held_after_full_output). */
static bool conn_resume(struct rconn *c)
{
    if (c->closing)
        return false;
    if (!c->processing && !c->stopped && !conn_full(c) &&
        (c->held || !c->reading)) {
        uint64_t before = c->rs->commands;
        bool held = c->held;
        conn_process(c);
        return held || c->rs->commands != before;
    }
    conn_update_reading(c);
    return false;
}

static void conn_update_reading(struct rconn *c)
{
    if (c->closing)
        return;
    if (c->stopped || c->eof || conn_full(c) || c->held) {
        conn_stop_reading(c);
        return;
    }
    if (!c->reading &&
        uv_read_start((uv_stream_t *)&c->tcp, on_alloc, on_read) == 0)
        c->reading = true;
}

static void on_connection(uv_stream_t *server, int status)
{
    node *n = server->data;
    struct rsrv *rs = n->rsrv;
    if (status < 0 || !rs) {
        LOG(WARN, "resp.accept_fail", "error=%s", uv_strerror(status));
        return;
    }
    struct rconn *c = calloc(1, sizeof(*c));
    if (!c)
        return;
    struct resp_limits lim = RESP_LIMITS_INIT;
    if (resp_parser_new(&c->p, &lim) < 0) {
        free(c);
        return;
    }
    c->rs = rs;
    c->n = n;
    c->refs = 1;
    c->cl = coord_default_cl(n);
    c->max_queued = (uint32_t)n->cfg.max_pipeline * 2;
    if (c->max_queued < 64)
        c->max_queued = 64;
    rs->refs++;
    uv_tcp_init(n->loop, &c->tcp);
    c->tcp.data = c;
    rs->nconns++;
    c->next = rs->conns;
    if (rs->conns)
        rs->conns->prev = c;
    rs->conns = c;
    if (uv_accept(server, (uv_stream_t *)&c->tcp) < 0) {
        conn_close(c);
        return;
    }
    rs->accepted++;
    uv_tcp_nodelay(&c->tcp, 1);
    node__peer_name(c->peer, sizeof(c->peer), &c->tcp);
    conn_update_reading(c);
}

/* ---- start / stop ----------------------------------------------------- */

int node__rsrv_start(node *n, char *err, size_t errlen)
{
    if (n->cfg.resp_port == 0 || n->rsrv)
        return 0;
    struct rsrv *rs = calloc(1, sizeof(*rs));
    if (!rs) {
        snprintf(err, errlen, "resp_port: out of memory");
        return -ENOMEM;
    }
    rs->n = n;
    rs->started_ms = node__now_ms();
    n->rsrv = rs;
    n->pending_closes++; /* released when rs is freed */
    rs->refs = 1;
    int rc = node__listen(n, &rs->tcp, "resp_port", n->cfg.resp_port,
                          on_connection, err, errlen);
    if (rc < 0) {
        node__rsrv_stop(n);
        return rc;
    }
    LOG(INFO, "resp.listening", "addr=%s:%d", n->listen_ip, n->cfg.resp_port);
    return 0;
}

/* Shutdown, first half: stop accepting and reading; requests in flight
 * are answered, then each connection closes once its output is written. */
void node__rsrv_drain(node *n)
{
    struct rsrv *rs = n->rsrv;
    if (!rs || rs->draining)
        return;
    rs->draining = true;
    rs->tcp.data = rs;
    uv_close((uv_handle_t *)&rs->tcp, on_rsrv_handle_closed);
    for (struct rconn *c = rs->conns; c; c = c->next) {
        conn_stop_reading(c);
        c->held = false; /* a command not started is not run */
        c->stopped = true;
        c->close_after_flush = true;
        conn_mark_dirty(c);
    }
}

/* Second half: close every connection (what is written is written). */
void node__rsrv_stop(node *n)
{
    struct rsrv *rs = n->rsrv;
    if (!rs)
        return;
    node__rsrv_drain(n);
    rsrv_flush(rs); /* what is ready goes out before the close */
    n->rsrv = NULL;
    while (rs->conns)
        conn_close(rs->conns);
}

uint64_t node__rsrv_conns(const node *n)
{
    return n->rsrv ? n->rsrv->nconns : 0;
}

void node__rsrv_counts(const node *n, uint64_t *accepted, uint64_t *proto_err)
{
    *accepted = n->rsrv ? n->rsrv->accepted : 0;
    *proto_err = n->rsrv ? n->rsrv->proto_err : 0;
}
