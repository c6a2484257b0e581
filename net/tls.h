/*
 * tls.h - TLS contexts for net/'s servers (OpenSSL 3).
 *
 * A net_tls is one loaded set of certificate, private key and CA bundle: an
 * OpenSSL SSL_CTX with ringkv's settings (TLS 1.2 at least, peers verified
 * against the CA bundle when asked). Loading checks that the key matches
 * the certificate and that the certificate is valid now: an expired or
 * not-yet-valid certificate is refused, with a sentence that says which and
 * since when, for the daemon to log.
 *
 * A raw-stream server given a context (net_server_opts.tls) speaks TLS on
 * every connection it accepts: the engine (conn.c, with tls.c's session
 * over two memory BIOs) decrypts what arrives into the connection's input
 * buffer, so the protocol handler sees plaintext and the input cap and
 * budget bound plaintext as before, and encrypts each turn's output as it
 * is flushed. A connection is announced (on_accept) only once its
 * handshake is done; one that fails or does not finish within
 * handshake_timeout_ms is closed and counted (stats.handshake_failed).
 * An internode server (rpc, with the handshake hook) given a context made
 * with verify_peer, and net_peers given a client context with its own
 * certificate, speak mutual TLS: each side verifies the other's chain
 * against its CA file (dates included: an expired peer certificate is
 * refused, and the reason says since when), then runs the hook inside TLS
 * and checks that the peer's certificate names the node the hook says it
 * is (net.h). Refusals are reported with a reason (enum net_tls_fail).
 *
 * Reference-counted: every holder (a server, the daemon) takes its own
 * reference; connections hold the underlying SSL_CTX themselves, so a
 * context replaced by a reload lives on until its last connection closes.
 * Loop thread only.
 */
#ifndef RK_NET_TLS_H
#define RK_NET_TLS_H

#include <stdbool.h>
#include <stddef.h>

typedef struct net_tls net_tls;

struct net_tls_opts {
    const char *cert_file; /* PEM: certificate (and chain); NULL: none */
    const char *key_file;  /* PEM private key; with cert_file */
    const char *ca_file;   /* PEM CA bundle that verifies peers; NULL:
                              the system's (a client) or none */
    bool server;           /* the accepting side */
    bool verify_peer;      /* server: ask for a client certificate and
                              refuse a connection without a valid one;
                              client: verify the server's (the default
                              for a client, set by net_tls_new) */
};

#define NET_TLS_OPTS_INIT              \
    {                                  \
        NULL, NULL, NULL, false, false \
    }

/* Loads a context. A server needs cert_file and key_file. Returns 0,
 * -ENOENT-like -errno for an unreadable file, RK_ECONFIG (bad PEM, a key
 * that does not match, an expired or not-yet-valid certificate) or -ENOMEM;
 * on failure writes why (one line, NUL-terminated) into why[0..why_cap). */
int net_tls_new(net_tls **out,
                const struct net_tls_opts *opts,
                char *why,
                size_t why_cap);

/* Another reference to t; returns t. */
net_tls *net_tls_ref(net_tls *t);

/* Drops a reference; the last frees. NULL: no-op. */
void net_tls_free(net_tls *t);

#endif
