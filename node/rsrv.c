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
 * Connections. The server is a protocol handler on net/'s connection
 * engine (a raw-stream net_server): the engine owns the sockets, the input
 * buffer (parsed in place: resp_parser_next_in), the output (a reply is
 * encoded into `out`, then queued: conn_push; the engine writes a turn's
 * replies with one write(2)), back-pressure, half-close (what was sent is
 * answered, then the connection closes) and drain. Before AUTH (requirepass
 * set) a connection may hold CLIENT_PREAUTH_INPUT bytes and its parser
 * takes requests that fit in them (preauth_limits); past them it gets a
 * protocol error and closes. After AUTH the clients' input budget and
 * frame timeout apply (clients.c).
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
 * Life. A connection is freed when the engine has closed it and no slot
 * refers to it (refs); it holds a reference to its net_conn. The server
 * struct is freed when the engine's server is closed and every connection
 * is gone (refs); node_stop waits for that.
 */
#include "node/rsrv.h"

#include <assert.h>
#include <errno.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <time.h>
#include <unistd.h>

#include "net/net.h"
#include "node/admin_commands.h"
#include "node/auth_delay.h"
#include "node/clients.h"
#include "node/coord_node.h"
#include "node/daemon.h"
#include "node/log.h"
#include "node/membership.h"
#include "node/obs.h"
#include "node/repair_host.h"
#include "node/replica.h"
#include "node/ring_view.h"
#include "node/rsrv_internal.h"
#include "node/scan.h"
#include "repair/repair.h"
#include "ring/ring.h"
#include "storage/node_state.h"
#include "storage/store.h"
#include "wire/client_msg.h"
#include "wire/resp.h"

#define RSRV_VERSION RK_VERSION
#define SLOT_LINK    offsetof(struct rslot, next)
/* The encoding buffer is kept between replies, but not a large one. */
#define RSRV_OUT_KEEP (256u * 1024u)

struct rsrv {
    node *n;
    net_server *srv;     /* resp_port; NULL when 0 */
    net_server *tls_srv; /* tls_port, in TLS; NULL when off */
    int refs;            /* 1 per engine's server + 1 per live connection */
    uint64_t nconns;
    uint64_t accepted, proto_err;
    uint64_t commands; /* commands parsed (INFO total_commands_processed) */
    uint64_t started_ms;
    bool draining;            /* listener closed, connections finishing */
    struct rk_pool slot_pool; /* finished slots (linked by next) */
};

static void conn_close(struct rconn *c, int err);

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

static void on_server_closed(void *arg)
{
    rsrv_unref(arg);
}

/* ---- output ----------------------------------------------------------- */

/* Queue what was encoded into c->out; the engine writes it at the end of
 * the turn. */
static void conn_push(struct rconn *c)
{
    if (c->closing || c->out.len == 0)
        return;
    if (net_conn_write(c->nc, c->out.p, c->out.len) < 0) {
        conn_close(c, -ENOMEM);
        return;
    }
    c->out.len = 0;
    if (c->out.cap > RSRV_OUT_KEEP)
        resp_out_free(&c->out);
}

/* ---- connection life -------------------------------------------------- */

static void conn_free(struct rconn *c)
{
    struct rsrv *rs = c->rs;
    net_conn *nc = c->nc;
    resp_parser_free(c->p);
    resp_out_free(&c->out);
    free(c);
    rsrv_unref(rs);
    net_conn_unref(nc); /* last: it may free the engine's server */
}

void node__rsrv_conn_unref(struct rconn *c)
{
    if (--c->refs == 0)
        conn_free(c);
}

/* Close c at once (out of memory); on_close follows. */
static void conn_close(struct rconn *c, int err)
{
    if (!c->closing)
        net_conn_close(c->nc, err);
}

/* No more requests from c (QUIT, a protocol error): it closes once the
 * replies of those before are written. */
static void conn_stop(struct rconn *c)
{
    c->stopped = true;
    net_conn_finish(c->nc);
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
    net_conn_request_begin(c->nc);
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
    net_conn_request_end(s->c->nc);
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
    while (c->head && c->head->done) {
        struct rslot *s = c->head;
        c->head = s->next;
        if (!c->head)
            c->tail = NULL;
        c->nslots--;
        assert(c->queued >= s->out.len);
        c->queued -= s->out.len;
        if (s->out.len && !c->closing) {
            conn_push(c); /* what the head wrote in place goes first */
            if (!c->closing && net_conn_write(c->nc, s->out.p, s->out.len) < 0)
                conn_close(c, -ENOMEM);
        }
        slot_free(s);
        node__rsrv_conn_unref(c);
    }
    conn_push(c);
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
        conn_push(c);
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
                "disk_bytes:%llu\r\nclock_skewed:%d\r\n"
                "clock_offset_ms:%lld\r\n",
                n->cfg.node_name, n->cfg.cluster_name, n->cfg.datacenter,
                n->cfg.rack, node_state_name(n), (long long)n->st.generation,
                (unsigned long long)(n->ring ? ring_epoch(n->ring) : 0),
                (unsigned long long)(n->ring ? ring_fingerprint(n->ring) : 0),
                n->ring_stale, n->npeers, up, down,
                node_cl_name(coord_default_cl(n)), node_cl_name(c->cl),
                (long long)n->clients.inflight, (unsigned long long)ranges,
                (unsigned long long)keys, (unsigned long long)bytes,
                n->clock.skewed ? 1 : 0, (long long)n->clock.offset_ms);
        struct store_space_info si = {0};
        if (n->store)
            store_space_info(&si, n->store);
        fprintf(f,
                "disk_full:%d\r\ndisk_free_bytes:%llu\r\n"
                "disk_reserve_bytes:%llu\r\n",
                node__disk_full(n), (unsigned long long)si.avail,
                (unsigned long long)si.reserve);
        struct repair_sched_stats rss;
        node__repair_sched_stats(n, &rss);
        fprintf(f,
                "repair_arcs:%llu\r\nrepair_arcs_overdue:%llu\r\n"
                "repair_arcs_never:%llu\r\nrepair_oldest_age_s:%llu\r\n",
                (unsigned long long)rss.arcs, (unsigned long long)rss.overdue,
                (unsigned long long)rss.never,
                (unsigned long long)(rss.oldest_age_ms / 1000));
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

/* AUTH's answer, once its wait (if any) is over. */
static void auth_answer(struct resp_out *o, bool ok)
{
    if (ok)
        resp_out_ok(o);
    else
        resp_out_error(o, "WRONGPASS",
                       "invalid username-password pair or user is "
                       "disabled.");
}

/* The wait of c's AUTH is over: its slot completes with the answer, and c
 * parses on. */
static void on_auth_due(struct node_auth_wait *w)
{
    struct rconn *c =
        (struct rconn *)((char *)w - offsetof(struct rconn, auth_wait));
    struct rslot *s = c->auth_slot;
    c->auth_slot = NULL;
    if (!c->closing)
        auth_answer(node__rsrv_slot_out(s), c->auth_ok);
    node__rsrv_slot_complete(s);
}

/* AUTH's answer waits ms (auth_delay.h) in a slot of its own, c parsing
 * nothing more until then (conn_full). false: answer it now. */
static bool auth_hold(struct rconn *c, bool ok, uint32_t ms)
{
    if (ms == 0)
        return false;
    struct rslot *s = node__rsrv_slot_new(c, K_DONE);
    if (!s)
        return false;
    c->auth_slot = s;
    c->auth_ok = ok;
    if (!node__auth_wait(c->n, &c->auth_wait, ms, on_auth_due)) {
        c->auth_slot = NULL;
        auth_answer(node__rsrv_slot_out(s), ok);
        node__rsrv_slot_complete(s);
    }
    return true;
}

/* AUTH [user] password with a password configured: the user (`default`
 * without one) and password give the connection its role (node/users.h);
 * a wrong pair leaves it as it was. A wrong password's answer waits,
 * longer with each failure in a row from the client's address
 * (auth_delay.h); so does a right one's while that address's failures
 * still wait. true: its answer waits (auth_hold); false: answer
 * c->auth_ok now. */
static bool auth_check(struct rconn *c, const struct resp_request *q)
{
    node *n = c->n;
    enum node_role role = node_users_check(&n->users, q->user, q->password);
    bool ok = role != NODE_ROLE_NONE;
    uint32_t ms = node__auth_checked(n, c->peer, ok, &n->loglim.resp_auth,
                                     "resp.auth_fail");
    if (ok && !c->authed) {
        struct resp_limits lim = RESP_LIMITS_INIT;
        c->authed = true;
        resp_parser_set_limits(c->p, &lim);
        net_conn_input_cap_set(c->nc, CLIENT_INPUT_MAX);
    }
    if (ok)
        c->role = role;
    c->auth_ok = ok;
    return auth_hold(c, ok, ms);
}

/* AUTH with one argument while `default` has no password: Redis's error
 * (a client that sends requirepass to a node without one learns so). */
static bool auth_nopass(const node *n, const struct resp_request *q)
{
    return q->user.len == 0 && !n->users.data.set;
}

/* An admin command (RESP_OP_ADMIN): NOPERM without the admin role, as
 * Redis words it; else run as the native op of the same name
 * (admin_commands.h) and answer its text, or its error. */
static void
exec_admin(struct rconn *c, struct resp_out *o, const struct resp_request *q)
{
    node *n = c->n;
    if (c->role < NODE_ROLE_ADMIN) {
        n->stats.client_noperm++;
        resp_out_errorf(o,
                        "NOPERM User default has no permissions to run the "
                        "'%s' command",
                        q->name);
        return;
    }
    char *t = NULL;
    size_t len = 0;
    int rc = node__admin_command(n, wire_cop_parse(q->name), q->keys, q->nkeys,
                                 &t, &len);
    if (rc < 0) {
        if (t) /* one line: the text may hold line breaks */
            for (char *p = t; *p; p++)
                if (*p == '\r' || *p == '\n')
                    *p = ' ';
        resp_out_rkerr(o, rc, t);
    } else {
        resp_out_bulk(o, t ? t : "", len);
    }
    free(t);
}

/* Local commands the table leaves to us: INFO, AUTH, CONSISTENCY, DBSIZE
 * and the admin commands. */
static void exec_local(struct rconn *c, const struct resp_request *q)
{
    node *n = c->n;
    if (q->op == RESP_OP_AUTH && node_users_any(&n->users) &&
        !auth_nopass(n, q) && auth_check(c, q))
        return;
    struct rslot *s;
    struct resp_out *o = sync_out(c, &s);
    if (!o) {
        conn_close(c, -ENOMEM);
        return;
    }
    switch (q->op) {
    case RESP_OP_INFO:
        info_build(o, c, (struct info_want){q->keys, q->nkeys});
        break;
    case RESP_OP_AUTH:
        if (node_users_any(&n->users) && !auth_nopass(n, q))
            auth_answer(o, c->auth_ok);
        else
            resp_out_error(o, "ERR",
                           "AUTH <password> called without any password "
                           "configured for the default user");
        break;
    case RESP_OP_ADMIN:
        exec_admin(c, o, q);
        break;
    case RESP_OP_DBSIZE: /* an estimate: docs/resp.md */
        resp_out_int(o, (int64_t)node__dbsize(n));
        break;
    case RESP_OP_CONSISTENCY:
        if (q->has_level) {
            c->cl = (enum coord_cl)((int)q->level + COORD_CL_ONE);
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
    if (c->role != NODE_ROLE_NONE)
        return false;
    return !(arg_is(cmd->argv[0], "auth") || arg_is(cmd->argv[0], "quit"));
}

/* Replies waiting in completed slots behind a pending head count as
 * output: they were left out, so a client pipelining ECHO <16 MiB> (or
 * GETs of big values) behind a slow request made the connection hold up
 * to max_queued of them (regression: queued_replies_bound). So do the
 * values the reads in flight already hold: they were left out too, and a
 * client pipelining GETs of a 16 MiB value had every one of max_pipeline
 * reads copy its value before the first reply was encoded, 16 GiB at the
 * defaults (regression: inflight_replies_unbounded). And so do the values
 * of the writes in flight (regression: inflight_writes_unbounded). And an
 * AUTH whose answer waits (auth_hold) holds everything after it back. */
static bool conn_full(const struct rconn *c)
{
    return c->auth_slot != NULL || c->nslots >= c->max_queued ||
           net_conn_queued(c->nc) + c->out.len + c->queued + c->meter.bytes >
               RSRV_OUT_HIGH;
}

/* What a connection may send before AUTH: requests that fit in
 * CLIENT_PREAUTH_INPUT with their headers (64 arguments' headers take
 * well under 2 KiB). */
static struct resp_limits preauth_limits(void)
{
    struct resp_limits lim = RESP_LIMITS_INIT;
    lim.max_args = 64;
    lim.max_bulk = CLIENT_PREAUTH_INPUT - 2048;
    lim.max_inline = CLIENT_PREAUTH_INPUT - 2048;
    lim.max_request = CLIENT_PREAUTH_INPUT - 2048;
    lim.max_skip = 0; /* a longer bulk is a protocol error, not skipped */
    return lim;
}

/* A protocol error: the reply says why (before AUTH: that requests are
 * small until then), and the connection closes once it is written. */
static void proto_error(struct rconn *c)
{
    node *n = c->n;
    c->rs->proto_err++;
    LOG(INFO, "resp.proto_error", "peer=%s error=\"%s\"", c->peer,
        resp_parser_error(c->p));
    struct rslot *s;
    struct resp_out *o = sync_out(c, &s);
    if (!o) {
        conn_close(c, -ENOMEM);
        return;
    }
    if (!c->authed) {
        n->stats.client_preauth_refused++;
        LOG_LIMITED(&n->loglim.client_input, node__mono_ms(n), WARN,
                    "client.preauth_refused",
                    "peer=%s protocol=resp error=\"%s\"", c->peer,
                    resp_parser_error(c->p));
        resp_out_errorf(o,
                        "ERR Protocol error: %s (before AUTH a request may "
                        "take %u bytes)",
                        resp_parser_error(c->p), CLIENT_PREAUTH_INPUT - 2048);
    } else {
        resp_out_proto_error(o, c->p);
    }
    conn_stop(c);
    sync_done(c, s);
}

/* Execute one parsed command. Returns false to stop parsing (held back,
 * or the connection closes). */
static bool conn_exec(struct rconn *c, const struct resp_cmd *cmd)
{
    if (needs_auth(c, cmd)) {
        struct rslot *s;
        struct resp_out *o = sync_out(c, &s);
        if (!o) {
            conn_close(c, -ENOMEM);
            return false;
        }
        resp_out_error(o, "NOAUTH", "Authentication required.");
        sync_done(c, s);
        return true;
    }
    struct resp_request q;
    struct rslot *s = NULL;
    struct resp_out scratch = RESP_OUT_INIT;
    struct resp_out *o = c->head ? &scratch : &c->out;
    q.close = false;
    int rc = resp_multi_filter(&c->in_multi, cmd, o);
    if (rc == RESP_REQ_EXEC)
        rc = resp_request_parse(&q, cmd, o);
    if (rc == RESP_REQ_ANSWERED) {
        if (c->head) { /* queue the reply behind the pending ones */
            s = node__rsrv_slot_new(c, K_DONE);
            if (!s) {
                resp_out_free(&scratch);
                conn_close(c, -ENOMEM);
                return false;
            }
            s->out = scratch;
            node__rsrv_slot_complete(s);
        } else {
            conn_push(c);
        }
        if (q.close) {
            conn_stop(c);
            return false;
        }
        return true;
    }
    resp_out_free(&scratch);
    if (rc < 0) {
        conn_close(c, rc);
        return false;
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
            conn_close(c, rc);
            return false;
        }
        if (rc == 1) { /* wait for the conflicting command */
            c->held = true;
            c->hcmd = *cmd;
            return false;
        }
        return true;
    case RESP_OP_SCAN:
        rc = node__rsrv_exec_scan(c, &q);
        if (rc < 0) {
            conn_close(c, rc);
            return false;
        }
        if (rc == 1) { /* wait for a slot */
            c->held = true;
            c->hcmd = *cmd;
            return false;
        }
        return true;
    default:
        exec_local(c, &q);
        return true;
    }
}

/* The GETs at the front of a client's input (a pipeline) will read their
 * keys here when this node is one of their replicas: their buckets and
 * entries in the memtable and the read cache start on their way into the
 * CPU's cache together (store_prefetch_many), so that each read does not
 * wait for its own misses one after the other. Only a pipeline gains. */
#define RSRV_PEEK 32

static void prefetch_gets(const struct rconn *c, const struct net_input *in)
{
    struct rk_slice keys[RSRV_PEEK];
    uint64_t tokens[RSRV_PEEK];
    /* a client that has not authenticated reads nothing: it starts no
     * work here either */
    if (c->n->store == NULL || c->role == NODE_ROLE_NONE)
        return;
    size_t k = resp_peek_gets(in->p, in->len, keys, RSRV_PEEK);
    if (k < 2)
        return;
    for (size_t i = 0; i < k; i++)
        tokens[i] = rk_token(keys[i].p, keys[i].len);
    store_prefetch_many(c->n->store, tokens, k);
}

/* The engine's on_input: execute the commands in the input until the
 * parser needs more bytes, the connection is full, or it stops. A command
 * held back keeps its bytes (nothing is consumed, and reading stops, until
 * it runs). */
static int on_input(void *arg, net_conn *nc, struct net_input *in)
{
    struct rconn *c = net_conn_data(nc);
    (void)arg;
    if (c == NULL)
        return 0; /* refused at accept: closing */
    c->refs++;
    c->processing = true;
    if (!c->held && !c->closing && !c->stopped)
        prefetch_gets(c, in);
    while (!c->closing && !c->stopped && !conn_full(c)) {
        struct resp_cmd cmd;
        int rc = 1;
        if (c->held) {
            cmd = c->hcmd;
            c->held = false;
        } else {
            rc = resp_parser_next_in(&cmd, c->p, in->p, &in->len);
            c->rs->commands += rc == 1;
        }
        if (rc == 0)
            break; /* at EOF the engine closes c once all is answered */
        if (rc == -ENOMEM) { /* the argument arrays could not grow */
            conn_close(c, rc);
            break;
        }
        if (rc < 0) {
            proto_error(c);
            break;
        }
        if (!conn_exec(c, &cmd))
            break;
    }
    c->processing = false;
    if (!c->held && !c->closing) {
        in->consumed = resp_parser_take_consumed(c->p);
        in->need = resp_parser_need(c->p);
    }
    bool stop = c->held || conn_full(c);
    if (!c->closing && !c->stopped && stop && !c->paused) {
        c->paused = true;
        net_conn_read_pause(nc);
    }
    node__rsrv_conn_unref(c);
    return 0;
}

/* Something that held c back is gone (a slot completed, output drained):
 * run what it buffered or held back. Before this, a command held back
 * (pipeline full) while the output was over its bound was never run once
 * the output drained (regression: held_after_full_output). */
void node__rsrv_conn_wake(struct rconn *c)
{
    if (c->closing || c->processing || c->stopped || conn_full(c))
        return;
    if (c->paused) {
        c->paused = false;
        net_conn_read_resume(c->nc); /* runs on_input */
    } else if (c->held) {
        net_conn_input_again(c->nc);
    }
}

static void on_sent(void *arg, net_conn *nc)
{
    struct rconn *c = net_conn_data(nc);
    (void)arg;
    if (c)
        node__rsrv_conn_wake(c);
}

static void on_accept(void *arg, net_conn *nc)
{
    node *n = arg;
    struct rsrv *rs = n->rsrv;
    const char *peer = net_conn_peer_name(nc);
    rs->accepted++;
    if (!node__client_admit(n, nc, true, peer))
        return; /* refused: the engine writes why and closes */
    struct rconn *c = calloc(1, sizeof(*c));
    struct resp_limits lim = RESP_LIMITS_INIT;
    enum node_role role = node_users_open_role(&n->users);
    bool authed = role != NODE_ROLE_NONE;
    if (!authed)
        lim = preauth_limits();
    if (!c || resp_parser_new(&c->p, &lim) < 0) {
        free(c);
        node__client_gone(n);
        net_conn_close(nc, -ENOMEM);
        return;
    }
    c->rs = rs;
    c->n = n;
    c->nc = nc;
    c->refs = 1;
    c->admitted = true;
    c->authed = authed;
    c->role = role;
    c->peer = peer;
    c->cl = coord_default_cl(n);
    c->max_queued = (uint32_t)n->cfg.max_pipeline * 2;
    if (c->max_queued < 64)
        c->max_queued = 64;
    if (!authed)
        net_conn_input_cap_set(nc, CLIENT_PREAUTH_INPUT);
    rs->refs++;
    rs->nconns++;
    net_conn_ref(nc);
    net_conn_set_data(nc, c);
}

static void on_close(void *arg, net_conn *nc, int err)
{
    node *n = arg;
    struct rconn *c = net_conn_data(nc);
    if (!c)
        return;
    if (err < 0 && err != RK_ECLOSED && err != RK_ETIMEOUT &&
        err != RK_ETOOLARGE)
        LOG(DEBUG, "resp.conn_error", "peer=%s error=%s", c->peer,
            rk_strerror(err));
    node__client_closed(n, true, c->peer, err, c->authed);
    c->closing = true;
    c->held = false;
    if (c->auth_slot) { /* its answer is not waited for any more */
        node__auth_cancel(n, &c->auth_wait);
        on_auth_due(&c->auth_wait);
    }
    c->rs->nconns--;
    if (c->admitted)
        node__client_gone(n);
    net_conn_set_data(nc, NULL);
    node__rsrv_conn_unref(c);
}

/* ---- start / stop ----------------------------------------------------- */

int node__rsrv_start(node *n, char *err, size_t errlen)
{
    int tls_port = n->tls.ctx.ports ? n->cfg.tls_port : 0;
    if ((n->cfg.resp_port == 0 && tls_port == 0) || n->rsrv)
        return 0;
    struct rsrv *rs = calloc(1, sizeof(*rs));
    if (!rs) {
        snprintf(err, errlen, "resp_port: out of memory");
        return -ENOMEM;
    }
    rs->n = n;
    rs->started_ms = node__now_ms();
    struct node_client_proto p = {
        "resp_port", n->cfg.resp_port, RSRV_OUT_HIGH, on_input,
        on_sent,     on_accept,        on_close,      NULL};
    int rc = 0;
    if (n->cfg.resp_port)
        rc = node__client_listen(n, &rs->srv, &p, err, errlen);
    if (rc == 0 && tls_port) {
        p.key = "tls_port";
        p.port = tls_port;
        p.tls = n->tls.ctx.ports;
        rc = node__client_listen(n, &rs->tls_srv, &p, err, errlen);
    }
    rs->refs = (rs->srv != NULL) + (rs->tls_srv != NULL);
    n->rsrv = rs;
    n->pending_closes++; /* released when rs is freed */
    if (rc < 0) {        /* node_start's failure stops the node: it closes rs */
        if (rs->refs == 0) {
            n->rsrv = NULL;
            n->pending_closes--;
            free(rs);
        }
        return rc;
    }
    if (rs->srv)
        LOG(INFO, "resp.listening", "addr=%s:%d", n->listen_ip,
            n->cfg.resp_port);
    if (rs->tls_srv)
        LOG(INFO, "resp.listening", "addr=%s:%d tls=1", n->listen_ip, tls_port);
    return 0;
}

/* Shutdown, first half: stop accepting and reading; requests in flight
 * are answered, then each connection closes once its output is written. */
void node__rsrv_drain(node *n)
{
    if (n->rsrv) {
        net_server_drain(n->rsrv->srv);
        net_server_drain(n->rsrv->tls_srv);
    }
}

void node__rsrv_tls_set(node *n, net_tls *tls)
{
    if (n->rsrv && n->rsrv->tls_srv)
        net_server_tls_set(n->rsrv->tls_srv, tls);
}

/* Second half: close every connection (what is ready is written as far as
 * the socket takes it). */
void node__rsrv_stop(node *n)
{
    struct rsrv *rs = n->rsrv;
    if (!rs)
        return;
    n->rsrv = NULL;
    net_server *srv = rs->srv, *tls_srv = rs->tls_srv;
    if (srv)
        net_server_close(srv, on_server_closed, rs);
    if (tls_srv) /* rs may be gone once both have closed, not before */
        net_server_close(tls_srv, on_server_closed, rs);
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
