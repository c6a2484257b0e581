/*
 * clients.c - how many client connections a node takes (max_clients), and
 * the descriptors it keeps for everything else.
 *
 * At start the soft RLIMIT_NOFILE is raised to the hard one, and the
 * clients the node admits are max_clients or, if fewer, what the limit
 * leaves once CLIENTS_FD_RESERVE descriptors are kept for peers, range
 * environments, the log and the listeners (logged as clients.limited).
 * Native and RESP connections count together. A connection past the limit
 * is accepted, told why (native: an OVERLOADED frame naming max_clients;
 * RESP: Redis's "-ERR max number of clients reached") and closed; each is
 * counted (ringkv_clients_refused_total) and logged as clients.refused at
 * most every 10 s. Until 2026-12-06 a node with a 1,024-descriptor limit
 * and 1,500 idle clients stopped accepting its peers' internode
 * connections while gossip still showed it UP, and nothing was logged
 * (regression test_regression_clients_exhaust_descriptors).
 *
 * And how much input they may make the node hold. Both client servers are
 * raw-stream servers of net/ sharing one input budget, max_input_buffer_mb
 * (net_budget: past it, connections stop reading until buffers drain).
 * Before authentication (requirepass set) a connection may hold
 * CLIENT_PREAUTH_INPUT bytes, and a frame or bulk announced longer is
 * refused (the server answers TOO_LARGE / a protocol error and closes);
 * a connection with part of a request and no byte for
 * client_frame_timeout_s is closed. Both are counted
 * (ringkv_client_input_refused_total{why}) and logged at most every 10 s
 * (client.input_refused). Until 2026-12-06 16 connections sending 60 MiB
 * of a frame before HELLO made a node hold 986 MB
 * (test_regression_preauth_buffers_unbounded).
 */
#include "node/clients.h"

#include <errno.h>
#include <stdio.h>
#include <string.h>
#include <sys/resource.h>

#include "net/net.h"
#include "node/daemon.h"
#include "node/log.h"
#include "node/tls.h"
#include "wire/client_msg.h"

#define CLIENTS_FD_RESERVE 256

void node__clients_limit(node *n)
{
    struct rlimit rl;
    uint64_t max = (uint64_t)n->cfg.max_clients;
    if (getrlimit(RLIMIT_NOFILE, &rl) == 0) {
        if (rl.rlim_cur < rl.rlim_max) {
            struct rlimit up = {rl.rlim_max, rl.rlim_max};
            if (setrlimit(RLIMIT_NOFILE, &up) == 0)
                rl.rlim_cur = rl.rlim_max;
        }
        uint64_t fit = rl.rlim_cur > CLIENTS_FD_RESERVE + 16
                           ? (uint64_t)rl.rlim_cur - CLIENTS_FD_RESERVE
                           : 16;
        if (rl.rlim_cur != RLIM_INFINITY && fit < max) {
            LOG(WARN, "clients.limited",
                "max_clients=%d admitted=%llu open_files=%llu reserve=%d "
                "why=\"the descriptor limit (ulimit -n) leaves room for "
                "fewer clients: raise it to admit max_clients\"",
                n->cfg.max_clients, (unsigned long long)fit,
                (unsigned long long)rl.rlim_cur, CLIENTS_FD_RESERVE);
            max = fit;
        }
    }
    n->clients.max = max;
}

/* Tell a refused client why, in its protocol, on a socket with nothing
 * queued yet: one small write that the kernel takes whole. */
static void refuse(node *n, net_conn *c, bool resp)
{
    char msg[96];
    snprintf(msg, sizeof(msg), "max_clients (%llu) reached: try another node",
             (unsigned long long)n->clients.max);
    struct wire_cbuf out = {0};
    if (resp) {
        static const char line[] = "-ERR max number of clients reached\r\n";
        (void)net_conn_write(c, line, sizeof(line) - 1);
    } else {
        struct wire_cresp r = {.err = RK_EOVERLOADED, .has = WIRE_CRESP_MSG};
        r.msg = RK_SLICE(msg, strlen(msg));
        if (wire_cresp_encode(&out, &r) == 0)
            (void)net_conn_write(c, out.p, out.len);
        wire_cbuf_release(&out);
    }
    (void)n;
}

bool node__client_admit(node *n, net_conn *c, bool resp, const char *peer)
{
    if (n->clients.open < n->clients.max) {
        n->clients.open++;
        return true;
    }
    n->stats.clients_refused++;
    refuse(n, c, resp);
    net_conn_finish(c); /* closes once that is written */
    LOG_LIMITED(&n->loglim.clients_refused, node__mono_ms(n), WARN,
                "clients.refused", "peer=%s protocol=%s max_clients=%llu", peer,
                resp ? "resp" : "native", (unsigned long long)n->clients.max);
    return false;
}

void node__client_gone(node *n)
{
    n->clients.open--;
}

/* ---- input ------------------------------------------------------------ */

int node__client_listen(node *n,
                        net_server **out,
                        const struct node_client_proto *proto,
                        char *err,
                        size_t errlen)
{
    struct net_server_opts o = NET_SERVER_OPTS_INIT;
    o.host = n->listen_ip;
    o.port = (uint16_t)proto->port;
    o.max_frame = CLIENT_INPUT_MAX;
    o.input_cap = CLIENT_INPUT_MAX;
    o.max_queued = 2 * proto->out_high; /* the engine pauses at half */
    o.frame_timeout_ms = (uint32_t)n->cfg.client_frame_timeout_s * 1000u;
    o.budget = n->clients.budget;
    o.on_input = proto->on_input;
    o.on_sent = proto->on_sent;
    o.on_accept = proto->on_accept;
    o.on_close = proto->on_close;
    o.tls = proto->tls;
    o.on_tls_fail = node__tls_client_refused;
    o.arg = n;
    int rc = net_server_new(out, n->loop, &o);
    if (rc < 0) {
        *out = NULL;
        snprintf(err, errlen, "%s: cannot listen on %s:%d: %s", proto->key,
                 n->cfg.listen_address, proto->port, rk_strerror(rc));
    }
    return rc;
}

int node__client_budget_open(node *n)
{
    size_t max = (size_t)n->cfg.max_input_buffer_mb << 20;
    if (n->clients.budget)
        return 0;
    return net_budget_new(&n->clients.budget, max);
}

void node__client_closed(
    node *n, bool resp, const char *peer, int err, bool authed)
{
    const char *why = NULL;
    if (err == RK_ETIMEOUT) {
        why = "frame_timeout";
        n->stats.client_frame_timeouts++;
    } else if (err == RK_ETOOLARGE) {
        why = authed ? "too_large" : "preauth_too_large";
        n->stats.client_preauth_refused += !authed;
    }
    if (why)
        LOG_LIMITED(
            &n->loglim.client_input, node__mono_ms(n), WARN,
            "client.input_refused", "peer=%s protocol=%s why=%s timeout_s=%d",
            peer, resp ? "resp" : "native", why, n->cfg.client_frame_timeout_s);
}
