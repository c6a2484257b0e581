/*
 * rsrv.c - the RESP2 server (see rsrv.h; commands in docs/resp.md): the
 * listener, connections, their output and reading, the queue of slots that
 * keeps replies in order, and the commands answered on the spot. The data
 * commands, run through the coordinator (slot_meter_writes,
 * slot_reads_more and slot_writes_more, named below), are in
 * resp_data_commands.c; rsrv_internal.h is what both share.
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
#include "node/rsrv_internal.h"
#include "wire/resp.h"

#define RSRV_READ_CHUNK (64u * 1024u)
#define RSRV_VERSION    RK_VERSION
#define SLOT_LINK       offsetof(struct rslot, next)

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

static void conn_close(struct rconn *c);
static void conn_update_reading(struct rconn *c);

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
    node__rsrv_conn_unref(c);
}

void node__rsrv_conn_maybe_close(struct rconn *c)
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
        node__rsrv_conn_maybe_close(c);
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
        node__rsrv_conn_maybe_close(c);
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
            node__rsrv_conn_unref(c);
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

void node__rsrv_conn_unref(struct rconn *c)
{
    if (--c->refs == 0)
        conn_free(c);
}

static void on_conn_closed(uv_handle_t *h)
{
    node__rsrv_conn_unref(h->data);
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
    if (c->admitted)
        node__client_gone(c->n);
    uv_close((uv_handle_t *)&c->tcp, on_conn_closed);
}

/* ---- slots ------------------------------------------------------------ */

struct rslot *node__rsrv_slot_new(struct rconn *c, enum slot_kind kind)
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
struct resp_out *node__rsrv_slot_out(struct rslot *s)
{
    return s == s->c->head ? &s->c->out : &s->out;
}

/* Move completed slots at the head into the output, in order. */
void node__rsrv_conn_drain(struct rconn *c)
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
        node__rsrv_conn_unref(c);
    }
    if (any || c->out.len)
        conn_mark_dirty(c);
}

/* ---- commands answered on the spot ------------------------------------ */

/* A reply known now: straight to the output when nothing is pending,
 * else into a completed slot. The callback fills `o`. */
static struct resp_out *sync_out(struct rconn *c, struct rslot **slot)
{
    *slot = NULL;
    if (!c->head)
        return &c->out;
    *slot = node__rsrv_slot_new(c, K_DONE);
    return *slot ? &(*slot)->out : NULL;
}

static void sync_done(struct rconn *c, struct rslot *s)
{
    if (s)
        node__rsrv_slot_complete(s);
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
            LOG_LIMITED(&n->loglim.resp_auth, node__mono_ms(n), WARN,
                        "resp.auth_fail", "peer=%s", c->peer);
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
void node__rsrv_conn_process(struct rconn *c)
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
                node__rsrv_conn_maybe_close(c);
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
                s = node__rsrv_slot_new(c, K_DONE);
                if (!s) {
                    resp_out_free(&scratch);
                    conn_close(c);
                    break;
                }
                s->out = scratch;
                node__rsrv_slot_complete(s);
            } else {
                conn_mark_dirty(c);
            }
            if (q.close) {
                c->stopped = true;
                c->close_after_flush = true;
                node__rsrv_conn_maybe_close(c);
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
            rc = node__rsrv_exec_data(c, &q);
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
    node__rsrv_conn_unref(c);
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
        node__rsrv_conn_process(c);
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
    node__rsrv_conn_process(c);
}

/* Output was written: a connection that stopped because it was full runs
 * what it had buffered or held back (node__rsrv_conn_process restarts reading
 * at its end); one that is still reading only updates that. Before this, a
 * command held back (pipeline full) while the output was over its bound was
 * never run once the output drained (regression: held_after_full_output). */
static bool conn_resume(struct rconn *c)
{
    if (c->closing)
        return false;
    if (!c->processing && !c->stopped && !conn_full(c) &&
        (c->held || !c->reading)) {
        uint64_t before = c->rs->commands;
        bool held = c->held;
        node__rsrv_conn_process(c);
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
    if (!node__client_admit(n, &c->tcp, true, c->peer)) {
        conn_close(c);
        return;
    }
    c->admitted = true;
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
