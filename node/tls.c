/*
 * tls.c - the node's TLS certificates: loaded once at start (and by
 * `ringkvd --check-config`, through node_config_validate, so a bad or
 * expired certificate stops the node before it listens, with a line that
 * says why), handed to the client servers, and the refusals they report
 * counted (ringkv_tls_refused_total) and logged through the limiter, since
 * any client can make them at will.
 */
#include "node/tls.h"

#include <stdio.h>

#include "node/daemon.h"
#include "node/log.h"

int node__tls_load(node *n, char *err, size_t errlen)
{
    const struct node_config *c = &n->cfg;
    char why[512];
    if (c->tls_cert_file[0] == '\0')
        return 0;
    struct net_tls_opts o = NET_TLS_OPTS_INIT;
    o.server = true;
    o.cert_file = c->tls_cert_file;
    o.key_file = c->tls_key_file;
    int rc = net_tls_new(&n->tls.server, &o, why, sizeof(why));
    if (rc < 0) {
        snprintf(err, errlen, "tls_cert_file: %s", why);
        return rc;
    }
    LOG(INFO, "tls.loaded", "cert=%s key=%s", c->tls_cert_file,
        c->tls_key_file);
    return 0;
}

void node__tls_free(node *n)
{
    net_tls_free(n->tls.server);
    n->tls.server = NULL;
}

void node__tls_client_refused(void *arg, const char *peer, const char *why)
{
    node *n = arg;
    n->tls.refused_clients++;
    LOG_LIMITED(&n->loglim.tls_refused, node__mono_ms(n), WARN,
                "client.tls_refused", "peer=%s why=\"%s\"", peer, why);
}
