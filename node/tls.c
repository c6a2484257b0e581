/*
 * tls.c - the node's TLS certificates: loaded once at start (and by
 * `ringkvd --check-config`, through node_config_validate, so a bad or
 * expired certificate stops the node before it listens, with a line that
 * says why), handed to the client servers and, with internode_tls
 * required, to the internode server and peers (mutual TLS under
 * tls_ca_file); loaded again on SIGHUP or `ringkv reloadtls`, all or
 * nothing; and the refusals they report counted
 * (ringkv_tls_refused_total, ringkv_internode_tls_refused_total) and logged
 * through the limiter, since any client, or anything that reaches the
 * internode port, can make them at will.
 */
#include "node/tls.h"

#include <stdbool.h>
#include <stdio.h>

#include "node/daemon.h"
#include "node/log.h"
#include "node/node.h"
#include "node/obs.h"
#include "node/rsrv.h"

/* One context from the node's certificate: a server's (verify_peer: ask
 * for the peer's certificate and refuse one without a valid one) or a
 * client's, with ca_file (NULL: none). */
static int context(net_tls **out,
                   const struct node_config *c,
                   bool server,
                   bool verify_peer,
                   const char *ca_file,
                   char *why,
                   size_t whylen)
{
    struct net_tls_opts o = NET_TLS_OPTS_INIT;
    o.server = server;
    o.verify_peer = verify_peer;
    o.cert_file = c->tls_cert_file;
    o.key_file = c->tls_key_file;
    o.ca_file = ca_file;
    return net_tls_new(out, &o, why, whylen);
}

int node__tls_contexts(struct node_tls_contexts *out,
                       const struct node_config *c,
                       char *why,
                       size_t whylen)
{
    char w[512];
    int rc;
    *out = (struct node_tls_contexts){NULL, NULL, NULL};
    if (c->tls_cert_file[0] == '\0')
        return 0;
    rc = context(&out->ports, c, true, false, NULL, w, sizeof(w));
    if (rc < 0) {
        snprintf(why, whylen, "tls_cert_file: %s", w);
        return rc;
    }
    if (c->internode_tls == NODE_INTERNODE_TLS_OFF)
        return 0;
    rc = context(&out->inode_server, c, true, true, c->tls_ca_file, w,
                 sizeof(w));
    if (rc == 0)
        rc = context(&out->inode_client, c, false, true, c->tls_ca_file, w,
                     sizeof(w));
    if (rc < 0) {
        /* the certificate loaded above: what failed is the CA file */
        snprintf(why, whylen, "tls_ca_file: %s", w);
        node__tls_contexts_free(out);
        return rc;
    }
    return 0;
}

void node__tls_contexts_free(struct node_tls_contexts *t)
{
    net_tls_free(t->ports);
    net_tls_free(t->inode_server);
    net_tls_free(t->inode_client);
    *t = (struct node_tls_contexts){NULL, NULL, NULL};
}

int node__tls_load(node *n, char *err, size_t errlen)
{
    const struct node_config *c = &n->cfg;
    int rc = node__tls_contexts(&n->tls.ctx, c, err, errlen);
    if (rc < 0)
        return rc;
    if (n->tls.ctx.ports)
        LOG(INFO, "tls.loaded", "cert=%s key=%s internode=%s ca=%s",
            c->tls_cert_file, c->tls_key_file,
            n->tls.ctx.inode_server ? "required" : "off",
            c->tls_ca_file[0] ? c->tls_ca_file : "-");
    return 0;
}

int node__tls_reload(node *n, char *msg, size_t msglen)
{
    const struct node_config *c = &n->cfg;
    struct node_tls_contexts fresh;
    char why[600];
    if (n->tls.ctx.ports == NULL) {
        LOG(INFO, "tls.reload_skipped",
            "note=\"no tls_cert_file: the node speaks no TLS\"");
        snprintf(msg, msglen,
                 "nothing to reload: the node speaks no TLS (no "
                 "tls_cert_file)");
        return 0;
    }
    int rc = node__tls_contexts(&fresh, c, why, sizeof(why));
    if (rc < 0) {
        n->tls.reload_failed++;
        LOG(WARN, "tls.reload_failed",
            "cert=%s why=\"%s\" note=\"the certificates loaded before "
            "stay in use\"",
            c->tls_cert_file, why);
        snprintf(msg, msglen, "%s; the certificates loaded before stay in use",
                 why);
        return rc;
    }
    /* new handshakes use them; connections keep the session they have */
    if (n->csrv && c->client_tls == NODE_CLIENT_TLS_REQUIRED)
        net_server_tls_set(n->csrv, fresh.ports);
    node__rsrv_tls_set(n, fresh.ports);
    (void)node__obs_tls_set(n, fresh.ports);
    if (fresh.inode_server && n->replica.srv)
        net_server_tls_set(n->replica.srv, fresh.inode_server);
    if (fresh.inode_client && n->replica.peers)
        net_peers_tls_set(n->replica.peers, fresh.inode_client);
    node__tls_contexts_free(&n->tls.ctx);
    n->tls.ctx = fresh;
    n->tls.reloads++;
    LOG(INFO, "tls.reloaded", "cert=%s key=%s internode=%s ca=%s",
        c->tls_cert_file, c->tls_key_file,
        fresh.inode_server ? "required" : "off",
        c->tls_ca_file[0] ? c->tls_ca_file : "-");
    if (fresh.inode_server)
        snprintf(msg, msglen,
                 "reloaded %s and %s: new TLS handshakes on the client ports "
                 "and internode (CA %s) use them; connections open keep "
                 "theirs",
                 c->tls_cert_file, c->tls_key_file, c->tls_ca_file);
    else
        snprintf(msg, msglen,
                 "reloaded %s and %s: new TLS handshakes on the client ports "
                 "use them; connections open keep theirs",
                 c->tls_cert_file, c->tls_key_file);
    return 0;
}

void node_reload_tls(node *n)
{
    char msg[1024];
    (void)node__tls_reload(n, msg, sizeof(msg));
}

void node__tls_free(node *n)
{
    node__tls_contexts_free(&n->tls.ctx);
}

void node__tls_client_refused(void *arg,
                              const char *peer,
                              enum net_tls_fail reason,
                              const char *why)
{
    node *n = arg;
    n->tls.refused_clients++;
    LOG_LIMITED(&n->loglim.tls_refused, node__mono_ms(n), WARN,
                "client.tls_refused", "peer=%s reason=%s why=\"%s\"", peer,
                net_tls_fail_name(reason), why);
}

static void internode_refused(node *n,
                              const char *side,
                              const char *peer,
                              enum net_tls_fail reason,
                              const char *why)
{
    if ((unsigned)reason >= NET_TLS_FAIL_COUNT)
        reason = NET_TLS_FAIL_OTHER;
    n->tls.inode_refused[reason]++;
    LOG_LIMITED(&n->loglim.inode_tls[reason], node__mono_ms(n), WARN,
                "internode.tls_refused", "side=%s peer=%s reason=%s why=\"%s\"",
                side, peer, net_tls_fail_name(reason), why);
}

void node__tls_internode_refused_accept(void *arg,
                                        const char *peer,
                                        enum net_tls_fail reason,
                                        const char *why)
{
    internode_refused(arg, "accept", peer, reason, why);
}

void node__tls_internode_refused_connect(void *arg,
                                         const char *peer,
                                         enum net_tls_fail reason,
                                         const char *why)
{
    internode_refused(arg, "connect", peer, reason, why);
}
