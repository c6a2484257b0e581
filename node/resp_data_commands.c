/*
 * resp_data_commands.c - the RESP server's data commands (GET, SET, DEL,
 * EXISTS, MGET, MSET, TTL / PTTL): how each runs through the coordinator
 * (coord.h) in a slot, the callbacks that complete it, the windows of
 * reads and writes of multi-key commands, and the reply each slot encodes
 * when it completes. rsrv.c has the rest of the server: the listener, the
 * connections, their output and reading, the slot queue and the commands
 * it answers on the spot (INFO, AUTH, CONSISTENCY; resp.c answers PING and
 * the like).
 *
 * Apart from rsrv.c because these are what a command means, not how bytes
 * move: a slot here is filled and finished, and rsrv.c's queue puts its
 * reply in order. Ordering, bytes and bounds are rsrv.c's opening comment;
 * rsrv_internal.h is what both share.
 */
#include <assert.h>
#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "node/clients.h"
#include "node/clock.h"
#include "node/coord_node.h"
#include "node/daemon.h"
#include "node/obs.h"
#include "node/rsrv_internal.h"
#include "node/scan.h"
#include "wire/resp.h"

static int node_op_of(enum slot_kind k)
{
    switch (k) {
    case K_SET:
    case K_MSET:
        return COORD_OP_PUT;
    case K_DEL:
        return COORD_OP_DEL;
    default:
        return COORD_OP_GET;
    }
}

/* ---- completing a slot ------------------------------------------------ */

/* The slot's reply is encoded: release its in-flight units and drain. */
void node__rsrv_slot_complete(struct rslot *s)
{
    struct rconn *c = s->c;
    s->done = true;
    c->queued +=
        s->out.len; /* until node__rsrv_conn_drain moves it to the output */
    if (s->counted) {
        s->counted = false;
        c->inflight--;
        c->n->clients.inflight--;
    }
    c->refs++; /* drain may drop the last slot reference */
    node__rsrv_conn_drain(c);
    node__rsrv_conn_wake(c); /* resume: parse what is buffered first */
    node__rsrv_conn_unref(c);
}

static void reply_err(node *n,
                      struct resp_out *o,
                      int err,
                      uint32_t acks,
                      uint32_t need,
                      int cause)
{
    char msg[256];
    if (!node__clock_errmsg(n, msg, sizeof(msg), err, (int)need))
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
    struct resp_out *o = node__rsrv_slot_out(s);
    if (s->err == RK_ETOOLARGE && s->kind == K_MGET) {
        char msg[96];
        snprintf(msg, sizeof(msg),
                 "MGET reply over %zu MiB: ask for fewer keys at once",
                 RSRV_MGET_MAX >> 20);
        resp_out_rkerr(o, s->err, msg);
    } else if (s->err) {
        reply_err(s->c->n, o, s->err, s->acks, s->need, s->cause);
    } else {
        switch (s->kind) {
        case K_GET:
            if (!s->sub1.found)
                resp_out_null(o);
            break;    /* found: encoded in on_get */
        case K_TTL: { /* Redis's answers: -2 no key, -1 no expiry */
            uint64_t now = node__clock_cluster_ms(s->c->n);
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
        case K_SCAN: /* answered by on_scan */
            break;
        }
    }
    node__rsrv_slot_complete(s);
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
            if (resp_out_bulk(node__rsrv_slot_out(s), res->value.p,
                              res->value.len) < 0)
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
 * at most; q is the request while node__rsrv_exec_data runs (an MSET's first
 * window is written from its bytes, the later pairs from the slot's copies,
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

/* ---- data commands ---------------------------------------------------- */

/* Admission: a slot of `kind` may start, or the reply is OVERLOADED (the
 * node is full; a full connection waits instead: node__rsrv_exec_data). */
static bool admit(struct rconn *c, enum slot_kind kind, struct resp_out *o)
{
    node *n = c->n;
    if (n->clients.inflight < n->cfg.max_inflight)
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
            return -ENOMEM; /* slot_free (rsrv.c) frees what was copied */
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
int node__rsrv_exec_data(struct rconn *c, const struct resp_request *q)
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
    struct rslot *s = node__rsrv_slot_new(c, kind);
    if (!s)
        return -ENOMEM;
    if (kind == K_SET && set_expiry_overflows(q)) {
        resp_out_errorf(node__rsrv_slot_out(s),
                        "ERR invalid expire time in '%s' command", q->name);
        node__rsrv_slot_complete(s);
        return 0;
    }
    if (!admit(c, kind, node__rsrv_slot_out(s))) {
        node__rsrv_slot_complete(s);
        return 0;
    }
    s->counted = true;
    c->inflight++;
    n->clients.inflight++;
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
            if (q->set.expire_at) /* by the clock expiries are judged by */
                ms -= (int64_t)node__clock_cluster_ms(c->n);
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
    case K_SCAN: /* node__rsrv_exec_scan */
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

/* ---- SCAN ---------------------------------------------------------------- */

static void on_scan(const struct coord_scan_result *res, void *arg)
{
    struct rslot *s = arg;
    struct resp_out *o = node__rsrv_slot_out(s);
    if (res->err) {
        reply_err(s->c->n, o, res->err, res->acks, res->need, 0);
    } else {
        char cur[24];
        int len = snprintf(cur, sizeof(cur), "%" PRIu64, res->cursor);
        resp_out_array(o, 2);
        resp_out_bulk(o, cur, (size_t)len);
        resp_out_array(o, res->nkeys);
        for (size_t i = 0; i < res->nkeys; i++)
            resp_out_bulk(o, res->keys[i].p, res->keys[i].len);
    }
    node__rsrv_slot_complete(s);
}

int node__rsrv_exec_scan(struct rconn *c, const struct resp_request *q)
{
    node *n = c->n;
    if (c->head && c->inflight >= (uint32_t)n->cfg.max_pipeline)
        return 1;
    struct rslot *s = node__rsrv_slot_new(c, K_SCAN);
    if (!s)
        return -ENOMEM;
    if (!admit(c, K_SCAN, node__rsrv_slot_out(s))) {
        node__rsrv_slot_complete(s);
        return 0;
    }
    s->counted = true;
    c->inflight++;
    n->clients.inflight++;
    uint64_t count = q->scan_count ? q->scan_count : SCAN_COUNT_DEFAULT;
    if (count > SCAN_COUNT_MAX)
        count = SCAN_COUNT_MAX; /* COUNT bounds the work: capped */
    int rc = coord_scan(n, q->scan_cursor, (uint32_t)count, q->scan_match,
                        s->cl, on_scan, s);
    if (rc < 0) {
        slot_note_rc(s, rc);
        reply_err(n, node__rsrv_slot_out(s), rc, 0, 0, 0);
        node__rsrv_slot_complete(s);
    }
    return 0;
}
