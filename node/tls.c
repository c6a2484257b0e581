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
#include "node/node.h"
#include "node/obs.h"
#include "node/rsrv.h"

int node__tls_context(const struct node_config *c,
                      net_tls **out,
                      char *why,
                      size_t whylen)
{
    struct net_tls_opts o = NET_TLS_OPTS_INIT;
    o.server = true;
    o.cert_file = c->tls_cert_file;
    o.key_file = c->tls_key_file;
    return net_tls_new(out, &o, why, whylen);
}

int node__tls_load(node *n, char *err, size_t errlen)
{
    const struct node_config *c = &n->cfg;
    char why[512];
    if (c->tls_cert_file[0] == '\0')
        return 0;
    int rc = node__tls_context(c, &n->tls.server, why, sizeof(why));
    if (rc < 0) {
        snprintf(err, errlen, "tls_cert_file: %s", why);
        return rc;
    }
    LOG(INFO, "tls.loaded", "cert=%s key=%s", c->tls_cert_file,
        c->tls_key_file);
    return 0;
}

void node_reload_tls(node *n)
{
    const struct node_config *c = &n->cfg;
    if (n->tls.server == NULL) {
        LOG(INFO, "tls.reload_skipped",
            "note=\"no tls_cert_file: the node speaks no TLS\"");
        return;
    }
    net_tls *fresh = NULL;
    char why[512];
    if (node__tls_context(c, &fresh, why, sizeof(why)) < 0) {
        n->tls.reload_failed++;
        LOG(WARN, "tls.reload_failed",
            "cert=%s why=\"%s\" note=\"the certificate loaded before "
            "stays in use\"",
            c->tls_cert_file, why);
        return;
    }
    /* new handshakes use it; connections keep the session they have */
    if (n->csrv && c->client_tls == NODE_CLIENT_TLS_REQUIRED)
        net_server_tls_set(n->csrv, fresh);
    node__rsrv_tls_set(n, fresh);
    (void)node__obs_tls_set(n, fresh);
    net_tls_free(n->tls.server);
    n->tls.server = fresh;
    n->tls.reloads++;
    LOG(INFO, "tls.reloaded", "cert=%s key=%s", c->tls_cert_file,
        c->tls_key_file);
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
