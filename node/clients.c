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
 */
#include <errno.h>
#include <stdio.h>
#include <string.h>
#include <sys/resource.h>

#include "node/log.h"
#include "node/node_internal.h"
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
    n->clients_max = max;
}

/* Tell a refused client why, in its protocol, on a socket with nothing
 * queued yet: one small write that the kernel takes whole. */
static void refuse(node *n, uv_tcp_t *tcp, bool resp)
{
    char msg[96];
    snprintf(msg, sizeof(msg), "max_clients (%llu) reached: try another node",
             (unsigned long long)n->clients_max);
    uv_buf_t b;
    struct wire_cbuf out = {0};
    if (resp) {
        static const char line[] = "-ERR max number of clients reached\r\n";
        b = uv_buf_init((char *)line, sizeof(line) - 1);
    } else {
        struct wire_cresp r = {.err = RK_EOVERLOADED, .has = WIRE_CRESP_MSG};
        r.msg = RK_SLICE(msg, strlen(msg));
        if (wire_cresp_encode(&out, &r) < 0) {
            wire_cbuf_release(&out);
            return;
        }
        b = uv_buf_init((char *)out.p, (unsigned)out.len);
    }
    (void)uv_try_write((uv_stream_t *)tcp, &b, 1);
    wire_cbuf_release(&out);
}

bool node__client_admit(node *n, uv_tcp_t *tcp, bool resp, const char *peer)
{
    if (n->clients_open < n->clients_max) {
        n->clients_open++;
        return true;
    }
    n->stats.clients_refused++;
    refuse(n, tcp, resp);
    LOG_LIMITED(&n->loglim.clients_refused, node__mono_ms(n), WARN,
                "clients.refused", "peer=%s protocol=%s max_clients=%llu", peer,
                resp ? "resp" : "native", (unsigned long long)n->clients_max);
    return false;
}

void node__client_gone(node *n)
{
    n->clients_open--;
}
