/*
 * node.c - the daemon's context: identity, life cycle, and the wiring of
 * the parts on one libuv loop.
 *
 * Start-up: node_new() takes the identity from data_dir (or creates it),
 * raises the generation, reads the cluster secret and opens the store;
 * node_start() opens, in order, the gossip socket, the internode server and
 * client, and the client port. Shutdown (node_stop) closes listeners first,
 * lets in-flight replica writes and hint jobs finish, then closes the store
 * (LMDB synced and closed) and reports done.
 */
#include "node/node.h"

#include <errno.h>
#include <netdb.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#include <sodium.h>

#include "common/rk.h"
#include "gossip/gossip.h"
#include "net/net.h"
#include "node/auth_delay.h"
#include "node/clients.h"
#include "node/clock.h"
#include "node/commit.h"
#include "node/coord_node.h"
#include "node/csrv.h"
#include "node/daemon.h"
#include "node/log.h"
#include "node/membership.h"
#include "node/obs.h"
#include "node/purge.h"
#include "node/repair_host.h"
#include "node/replica.h"
#include "node/replication.h"
#include "node/ring_view.h"
#include "node/rsrv.h"
#include "node/snapshot.h"
#include "node/stream_host.h"
#include "ring/ring.h"
#include "storage/hlc.h"
#include "storage/node_state.h"
#include "storage/store.h"
#include "streaming/streaming.h"
#include "wire/rpc_msg.h"

static int fail(char *err, size_t errlen, int rc, const char *fmt, ...)
    __attribute__((format(printf, 4, 5)));

static int fail(char *err, size_t errlen, int rc, const char *fmt, ...)
{
    if (err && errlen) {
        va_list ap;
        va_start(ap, fmt);
        vsnprintf(err, errlen, fmt, ap);
        va_end(ap);
    }
    return rc;
}

uint64_t node__now_ms(void)
{
    return rk_clock_wall_ms(); /* held while a read is worked on */
}

uint64_t node__mono_ms(node *n)
{
    uv_update_time(n->loop);
    return uv_now(n->loop);
}

int node__resolve(struct sockaddr_storage *out, const char *host, int port)
{
    struct addrinfo hints, *res = NULL;
    memset(&hints, 0, sizeof(hints));
    hints.ai_family = AF_UNSPEC;
    hints.ai_socktype = SOCK_STREAM;
    char ps[16];
    snprintf(ps, sizeof(ps), "%d", port);
    int rc = getaddrinfo(host, ps, &hints, &res);
    if (rc != 0 || !res)
        return -EHOSTUNREACH;
    memset(out, 0, sizeof(*out));
    memcpy(out, res->ai_addr, res->ai_addrlen);
    freeaddrinfo(res);
    return 0;
}

const char *
node__split_host_port(char *host, size_t cap, int *port, const char *host_port)
{
    const char *colon = strrchr(host_port, ':');
    if (!colon)
        return NULL;
    size_t hl = (size_t)(colon - host_port);
    if (hl >= cap)
        return NULL;
    memcpy(host, host_port, hl);
    host[hl] = '\0';
    char *h = host;
    if (h[0] == '[' && hl > 2 && h[hl - 1] == ']') {
        h[hl - 1] = '\0';
        h++;
    }
    *port = atoi(colon + 1);
    return h;
}

/* "host:port" or "[v6]:port" -> numeric "ip:port". */
int node__resolve_str(char *out, size_t len, const char *host_port)
{
    char host[256];
    int port;
    const char *h = node__split_host_port(host, sizeof(host), &port, host_port);
    if (!h)
        return -EINVAL;
    struct sockaddr_storage ss;
    int rc = node__resolve(&ss, h, port);
    if (rc < 0)
        return rc;
    return net_addr_format(out, len, (struct sockaddr *)&ss);
}

/* ---- identity --------------------------------------------------------- */

static int node__identity(node *n, char *err, size_t errlen)
{
    struct node_config *c = &n->cfg;
    int rc = node_state_mkdirs(c->data_dir);
    if (rc < 0)
        return fail(err, errlen, rc, "data_dir: cannot create '%s': %s",
                    c->data_dir, rk_strerror(rc));
    rc = node_state_lock(&n->lock_fd, c->data_dir);
    if (rc == RK_EEXIST)
        return fail(err, errlen, rc,
                    "data_dir: '%s' is in use by another ringkvd (or a "
                    "restore): stop it first",
                    c->data_dir);
    if (rc < 0)
        return fail(err, errlen, rc, "data_dir: cannot lock '%s': %s",
                    c->data_dir, rk_strerror(rc));
    rc = node_state_load(&n->st, c->data_dir);
    if (rc == RK_ENOTFOUND) {
        n->fresh = 1;
        memset(&n->st, 0, sizeof(n->st));
        if (!c->node_name[0]) {
            char host[256];
            if (gethostname(host, sizeof(host)) < 0)
                snprintf(host, sizeof(host), "node");
            host[sizeof(host) - 1] = '\0';
            snprintf(c->node_name, sizeof(c->node_name), "%s", host);
        }
        snprintf(n->st.node_name, sizeof(n->st.node_name), "%s", c->node_name);
        snprintf(n->st.cluster_name, sizeof(n->st.cluster_name), "%s",
                 c->cluster_name);
    } else if (rc < 0) {
        return fail(err, errlen, rc, "data_dir: cannot read %s/node.state: %s",
                    c->data_dir, rk_strerror(rc));
    } else {
        if (c->node_name[0] && strcmp(c->node_name, n->st.node_name) != 0)
            return fail(err, errlen, RK_ECONFIG,
                        "node_name: data_dir '%s' belongs to node '%s', not "
                        "'%s'",
                        c->data_dir, n->st.node_name, c->node_name);
        if (strcmp(c->cluster_name, n->st.cluster_name) != 0)
            return fail(err, errlen, RK_ECONFIG,
                        "cluster_name: data_dir '%s' belongs to cluster '%s', "
                        "not '%s'",
                        c->data_dir, n->st.cluster_name, c->cluster_name);
        if (n->st.left)
            return fail(err, errlen, RK_ECONFIG,
                        "data_dir: node '%s' left the cluster (it was "
                        "decommissioned) and does not come back on the data "
                        "it had; to join again, start it on an empty data_dir "
                        "(remove '%s')",
                        n->st.node_name, c->data_dir);
        snprintf(c->node_name, sizeof(c->node_name), "%s", n->st.node_name);
        /* a node that never finished joining starts over */
        if (n->st.ntokens == 0)
            n->fresh = 1;
    }
    if (strlen(c->node_name) > GOSSIP_NAME_MAX)
        return fail(err, errlen, RK_ECONFIG, "node_name: longer than %d bytes",
                    GOSSIP_NAME_MAX);
    if (c->replace[0] && strcmp(c->replace, c->node_name) == 0)
        return fail(err, errlen, RK_ECONFIG,
                    "replace: '%s' is this node's own name: a node replaces "
                    "another, dead node",
                    c->replace);
    /* replace takes a new node; a restart in the middle of (or after) the
     * replace it names goes on (node.state remembers it) */
    if (c->replace[0] && !n->fresh && strcmp(c->replace, n->st.replace) != 0)
        return fail(err, errlen, RK_ECONFIG,
                    "replace: node '%s' holds tokens already (data_dir '%s'): "
                    "only a new node, on an empty data_dir, can replace '%s'; "
                    "nothing was changed",
                    c->node_name, c->data_dir, c->replace);
    n->st.generation =
        node_state_next_generation(n->st.generation, (int64_t)time(NULL));
    rc = node_state_save(&n->st, c->data_dir);
    if (rc < 0)
        return fail(err, errlen, rc, "data_dir: cannot write node.state: %s",
                    rk_strerror(rc));
    return 0;
}

int node__state_save(node *n)
{
    int rc = node_state_save(&n->st, n->cfg.data_dir);
    if (rc < 0)
        LOG(ERROR, "state.save_fail", "error=\"%s\"", rk_strerror(rc));
    return rc;
}

static int node__secret(node *n, char *err, size_t errlen)
{
    const struct node_config *c = &n->cfg;
    if (!c->cluster_secret_file[0]) {
        n->secret_len = strlen(c->cluster_name);
        memcpy(n->secret, c->cluster_name, n->secret_len);
        LOG(WARN, "config.no_secret",
            "msg=\"cluster_secret_file not set: the MAC key is derived from "
            "cluster_name, which is not a secret\"");
    } else {
        FILE *f = fopen(c->cluster_secret_file, "rb");
        if (!f)
            return fail(err, errlen, -errno,
                        "cluster_secret_file: cannot open '%s': %s",
                        c->cluster_secret_file, strerror(errno));
        n->secret_len = fread(n->secret, 1, sizeof(n->secret), f);
        fclose(f);
        if (n->secret_len == 0)
            return fail(err, errlen, RK_ECONFIG,
                        "cluster_secret_file: '%s' is empty",
                        c->cluster_secret_file);
    }
    rpc_key_derive(n->rpc_key, RK_SLICE(n->secret, n->secret_len));
    return 0;
}

static int node__addresses(node *n, char *err, size_t errlen)
{
    struct node_config *c = &n->cfg;
    struct sockaddr_storage ss;
    int rc = node__resolve(&ss, c->listen_address, c->gossip_port);
    if (rc < 0)
        return fail(err, errlen, RK_ECONFIG,
                    "listen_address: cannot resolve '%s'", c->listen_address);
    char buf[96];
    net_addr_format(buf, sizeof(buf), (struct sockaddr *)&ss);
    char *colon = strrchr(buf, ':');
    if (colon)
        *colon = '\0';
    const char *ip = buf;
    if (ip[0] == '[') {
        ip++;
        buf[strlen(buf) - 1] = '\0';
    }
    snprintf(n->listen_ip, sizeof(n->listen_ip), "%s", ip);

    char self_adv[96] = "", self_name[300];
    char tmp[300];
    snprintf(self_name, sizeof(self_name), "%s:%d", c->advertise_address,
             c->gossip_port);
    node__resolve_str(self_adv, sizeof(self_adv), self_name);
    n->nseeds = 0;
    for (int i = 0; i < c->nseeds; i++) {
        const char *s = c->seeds[i];
        const char *colon2 = strrchr(s, ':');
        if (colon2 && strchr(s, ':') == colon2)
            snprintf(tmp, sizeof(tmp), "%s", s);
        else
            snprintf(tmp, sizeof(tmp), "%s:%d", s, c->gossip_port);
        char out[sizeof(n->seeds[0])];
        if (node__resolve_str(out, sizeof(out), tmp) < 0) {
            /* Kept by name: dropping it made a node whose seeds did not
             * resolve yet (a container not started, DNS catching up) its
             * own only seed, and a new one formed a cluster alone. */
            size_t tl = strlen(tmp);
            if (tl >= sizeof(out))
                return fail(err, errlen, RK_ECONFIG, "seeds: '%s' is too long",
                            s);
            LOG(WARN, "config.seed_unresolved",
                "seed=%s note=\"kept by name: gossip resolves it again "
                "every second until it does\"",
                s);
            memcpy(out, tmp, tl + 1);
        }
        if (strcmp(out, self_adv) == 0 || strcmp(out, self_name) == 0)
            n->is_seed = true;
        snprintf(n->seeds[n->nseeds++], sizeof(n->seeds[0]), "%s", out);
    }
    return 0;
}

void node__store_opts(struct store_opts *so, const struct node_config *cfg)
{
    *so = (struct store_opts)STORE_OPTS_INIT;
    so->data_dir = cfg->data_dir;
    so->durability = cfg->durability == NODE_DURABILITY_GROUP
                         ? STORE_GROUP_COMMIT
                         : STORE_PERIODIC;
    so->periodic_ms = (uint32_t)cfg->periodic_sync_ms;
    so->gc_grace_ms = (uint64_t)cfg->gc_grace_seconds * 1000u;
    so->memtable_bytes = (size_t)cfg->memtable_mb << 20;
    so->read_cache_bytes = (size_t)cfg->read_cache_mb << 20;
    so->disk_reserve_bytes = (uint64_t)cfg->disk_reserve_mb << 20;
    so->log_buffered = !cfg->log_direct_io;
    /* 0 means "the store's default" there; the config says 25 itself */
    so->auto_compact_pct = cfg->auto_compact_pct ? cfg->auto_compact_pct : -1;
}

static int node__store_open(node *n, char *err, size_t errlen)
{
    struct store_opts so;
    node__store_opts(&so, &n->cfg);
    int rc = store_open(&n->store, &so);
    if (rc < 0)
        return fail(err, errlen, rc,
                    "data_dir: cannot open the store in "
                    "'%s': %s",
                    n->cfg.data_dir, rk_strerror(rc));
    bool direct = store_log_direct(n->store);
    LOG(INFO, "store.commit_log", "direct_io=%s%s", direct ? "true" : "false",
        !direct && n->cfg.log_direct_io ? " why=\"the file system refuses it\""
                                        : "");
    return 0;
}

int node_new(node **out,
             uv_loop_t *loop,
             const struct node_config *cfg,
             char *err,
             size_t errlen)
{
    node *n = calloc(1, sizeof(*n));
    if (!n)
        return -ENOMEM;
    n->loop = loop;
    n->cfg = *cfg;
    n->self_idx = RING_NONE;
    n->lock_fd = -1;
    n->clock.hlc = (struct hlc)HLC_INIT;
    node__membership_init(n);
    if (!n->cfg.advertise_address[0])
        memcpy(n->cfg.advertise_address, n->cfg.listen_address,
               sizeof(n->cfg.listen_address));
    int rc = node__coord_new(&n->coord, n);
    if (rc < 0)
        snprintf(err, errlen, "out of memory");
    if (rc == 0)
        rc = node__identity(n, err, errlen);
    if (rc == 0)
        node__repl_start(n); /* node.state's setting over the file's */
    if (rc == 0)
        rc = node__secret(n, err, errlen);
    if (rc == 0)
        rc = node__addresses(n, err, errlen);
    if (rc == 0)
        rc = node__store_open(n, err, errlen);
    if (rc == 0) {
        rc = node__clock_open(n, err, errlen);
        if (rc < 0)
            store_free(n->store);
    }
    if (rc == 0) {
        rc = node__streaming_new(n);
        if (rc < 0) {
            snprintf(err, errlen, "out of memory");
            store_free(n->store);
        }
    }
    if (rc < 0) {
        node__membership_free(n);
        node__coord_free(n->coord);
        if (n->lock_fd >= 0)
            close(n->lock_fd);
        free(n);
        return rc;
    }
    *out = n;
    return 0;
}

/* ---- life cycle ------------------------------------------------------- */

void node__handle_closed(uv_handle_t *h)
{
    node *n = h->data;
    n->pending_closes--;
    node__stop_progress(n);
}

struct node_work {
    uv_work_t w;
    node *n;
    void (*work)(void *job);
    void (*done)(void *job, int status);
    void *job;
};

static void node_work_run(uv_work_t *w)
{
    struct node_work *nw = w->data;
    nw->work(nw->job);
}

static void node_work_done(uv_work_t *w, int status)
{
    struct node_work *nw = w->data;
    node *n = nw->n;
    nw->done(nw->job, status); /* may free job */
    free(nw);
    n->pending_closes--;
    node__stop_progress(n);
}

int node__queue_work(node *n,
                     void (*work)(void *job),
                     void (*done)(void *job, int status),
                     void *job)
{
    struct node_work *nw = malloc(sizeof(*nw));
    if (!nw)
        return -ENOMEM;
    *nw = (struct node_work){.n = n, .work = work, .done = done, .job = job};
    nw->w.data = nw;
    int rc = uv_queue_work(n->loop, &nw->w, node_work_run, node_work_done);
    if (rc < 0) {
        free(nw);
        return rc;
    }
    n->pending_closes++;
    return 0;
}

static void node__stop_check(node *n);

/* End-of-turn work: coordinator decisions, group commits, hints. The
 * client servers' output is flushed by net/'s engine at the end of the
 * turn too (its own check and prepare handles); a connection whose output
 * drained there may start requests, and the engine keeps the next poll
 * from blocking so that their end-of-turn work comes at once. */
static void turn_flush(node *n)
{
    node__coord_run_deferred(n);
    node__commit_flush(n);
    node__hint_flush(n);
}

/* After the poll: what its I/O callbacks did. */
static void on_check(uv_check_t *h)
{
    node *n = h->data;
    turn_flush(n);
    if (n->stopping == 1)
        node__stop_check(n);
}

/* Before the poll blocks: what timers and write callbacks did (a read
 * answered TIMEOUT at its deadline), which would otherwise wait for
 * something else to wake the loop -- up to a second on a quiet node
 * (test_regression_timer_reply_delayed). As net/conn.c's flusher does. */
static void on_prepare(uv_prepare_t *h)
{
    turn_flush(h->data);
}

int node_start(node *n, char *err, size_t errlen)
{
    LOG(INFO, "node.start",
        "generation=%lld fresh=%d data_dir=%s listen=%s dc=%s rack=%s "
        "seed=%d",
        (long long)n->st.generation, n->fresh, n->cfg.data_dir, n->listen_ip,
        n->cfg.datacenter, n->cfg.rack, n->is_seed);
    uv_check_init(n->loop, &n->check);
    n->check.data = n;
    uv_check_start(&n->check, on_check);
    uv_prepare_init(n->loop, &n->prepare);
    n->prepare.data = n;
    uv_prepare_start(&n->prepare, on_prepare);
    node__coord_start(n);
    /* the users first: the metrics server (obs) checks its password */
    int rc = node_users_load(&n->users, &n->cfg, err, errlen);
    if (rc == 0 && n->users.data.set && !n->users.admin.set)
        LOG(WARN, "auth.admin_by_requirepass",
            "no admin_password: requirepass grants the admin role too "
            "(decommission, removenode, cleanup, repair, ...); set "
            "admin_password to keep them from data clients");
    else if (rc == 0 && !node_users_any(&n->users))
        LOG(WARN, "auth.open",
            "no requirepass nor admin_password: every client may read, "
            "write and run admin commands");
    if (rc == 0) {
        rc = node__commit_start(n);
        if (rc < 0)
            snprintf(err, errlen, "cannot start the committer threads: %s",
                     rk_strerror(rc));
    }
    if (rc == 0)
        rc = node__repair_start(n, err, errlen);
    if (rc == 0) /* before the first port that may speak TLS (metrics,
                    internode, clients) */
        rc = node__tls_load(n, err, errlen);
    if (rc == 0)
        rc = node__obs_start(n, err, errlen);
    if (rc == 0)
        rc = node__internode_start(n, err, errlen);
    if (rc == 0)
        rc = node__gossip_start(n, err, errlen);
    if (rc == 0) {
        node__clients_limit(n);
        rc = node__client_budget_open(n);
        if (rc < 0)
            snprintf(err, errlen, "max_input_buffer_mb: %s", rk_strerror(rc));
    }
    if (rc == 0) {
        rc = node__auth_start(n);
        if (rc < 0)
            snprintf(err, errlen, "failed authentications' table: %s",
                     rk_strerror(rc));
    }
    if (rc == 0)
        rc = node__csrv_start(n, err, errlen);
    if (rc == 0)
        rc = node__rsrv_start(n, err, errlen);
    if (rc < 0) {
        node_stop(n, NULL, NULL);
        return rc;
    }
    LOG(INFO, "node.listening", "gossip=%s:%d internode=%s:%d client=%s:%d",
        n->listen_ip, n->cfg.gossip_port, n->listen_ip, n->cfg.internode_port,
        n->listen_ip, n->cfg.client_port);
    return 0;
}

void node__stop_progress(node *n)
{
    if (!n->stopping || n->pending_closes > 0 || n->commit.running)
        return;
    if (n->commit.open && n->commit.open->nwaiters) {
        node__commit_flush(n);
        return;
    }
    if (n->hints.open) {
        node__hint_flush(n);
        if (n->pending_closes > 0)
            return;
    }
    if (n->stopping == 1) {
        n->stopping = 2;
        node__commit_free(n);
        uv_close((uv_handle_t *)&n->check, NULL);
        uv_close((uv_handle_t *)&n->prepare, NULL);
        if (n->store) {
            node__clock_close(n);
            store_free(n->store);
            n->store = NULL;
            LOG(INFO, "store.closed", "%s", "");
        }
        if (n->stop_done) {
            void (*done)(void *) = n->stop_done;
            n->stop_done = NULL;
            done(n->stop_arg);
        }
    }
}

/* Second half of a shutdown: close everything once in-flight requests
 * are answered (or the drain bound passed). */
static void node__stop_close(node *n)
{
    if (n->stopping != 1 || n->closing_parts)
        return;
    n->closing_parts = 1;
    const struct coord_stats *cs = node__coord_stats(n);
    LOG(INFO, "node.closing", "inflight=%lld background=%lld",
        (long long)cs->inflight, (long long)cs->background);
    if (n->drain_open) {
        n->drain_open = 0;
        uv_close((uv_handle_t *)&n->drain, node__handle_closed);
    }
    node__coord_stop(n);
    node__csrv_stop(n);
    node__rsrv_stop(n);
    node__auth_stop(n);
    node__obs_stop(n);
    node__gossip_stop(n);
    node__internode_stop(n);
    n->pending_closes--; /* the hold taken by node_stop */
    node__stop_progress(n);
}

static void on_drain_timeout(uv_timer_t *t)
{
    node *n = t->data;
    const struct coord_stats *cs = node__coord_stats(n);
    LOG(WARN, "node.drain_timeout", "inflight=%lld background=%lld",
        (long long)cs->inflight, (long long)cs->background);
    node__stop_close(n);
}

/* Called from the check handle while stopping. */
static void node__stop_check(node *n)
{
    const struct coord_stats *cs = node__coord_stats(n);
    if (n->stopping == 1 && !n->closing_parts && cs->inflight == 0 &&
        cs->background == 0 && n->clients.inflight == 0)
        node__stop_close(n);
}

void node_on_self_stop(node *n, void (*done)(void *arg), void *arg)
{
    n->self_stop_cb = done;
    n->self_stop_arg = arg;
}

void node_stop(node *n, void (*done)(void *arg), void *arg)
{
    if (n->stopping)
        return;
    n->stopping = 1;
    n->stop_done = done;
    n->stop_arg = arg;
    LOG(INFO, "node.stop", "generation=%lld inflight=%lld",
        (long long)n->st.generation, (long long)node__coord_stats(n)->inflight);
    /* first stop taking requests and let those in flight be answered */
    n->pending_closes++; /* held until node__stop_close */
    node__snapshot_stop(n);
    node__coord_unpark(n); /* requests waiting for the ring: CLOSED */
    node__csrv_drain(n);
    node__rsrv_drain(n);
    node__auth_flush(n); /* answers held back go now: their conns finish */
    n->pending_closes++;
    uv_timer_init(n->loop, &n->drain);
    n->drain.data = n;
    n->drain_open = 1;
    int t = n->cfg.read_timeout_ms > n->cfg.write_timeout_ms
                ? n->cfg.read_timeout_ms
                : n->cfg.write_timeout_ms;
    uint64_t bound = (uint64_t)t * 2 + 500;
    /* and no less than a write of the largest value has (4.5 s by default
     * bounded the drain while a 16 MiB write had 6 s) */
    uint64_t wr =
        coord_write_time_ms((uint32_t)n->cfg.write_timeout_ms, RK_MAX_VALUE) +
        500;
    uv_timer_start(&n->drain, on_drain_timeout, bound > wr ? bound : wr, 0);
    node__stop_check(n);
}

void node_free(node *n)
{
    if (!n)
        return;
    if (n->store)
        store_free(n->store);
    gossip_free(n->g);
    node__membership_free(n);
    node__coord_free(n->coord);
    node__replica_free(n);
    ring_free(n->ring);
    ring_free(n->ring_pending);
    node__join_rings_free(n);
    stream_free(n->streaming);
    node__repair_free(n);
    node__purge_free(n);
    node__snapshot_free(n);
    net_budget_free(n->clients.budget);
    node__tls_free(n);
    node__auth_free(n);
    sodium_memzero(&n->users, sizeof(n->users));
    node__peer_tab_unref(n->peer_tab);
    if (n->lock_fd >= 0)
        close(n->lock_fd); /* after the store is closed */
    free(n);
}

int node_exit_code(const node *n)
{
    return n->exit_code;
}

const char *node_name(const node *n)
{
    return n->cfg.node_name;
}

int64_t node_generation(const node *n)
{
    return n->st.generation;
}
