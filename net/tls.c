/*
 * tls.c - TLS contexts (net_tls, tls.h) and the session engine the
 * connections use (net__tls, net_internal.h), on OpenSSL 3.
 *
 * A session never touches a socket: its SSL object reads ciphertext from
 * one memory BIO (net__tls_feed puts what the socket delivered there) and
 * writes ciphertext to another (net__tls_out_take empties it for the
 * socket). So a handshake, a read or a write never blocks: each runs as
 * far as the bytes at hand allow and says whether it wants more, and the
 * one loop thread that owns the connection drives it from its read and
 * flush callbacks (conn.c). The same property lets a unit test run a
 * client and a server in one process by handing bytes across by hand.
 *
 * OpenSSL reports failures through a per-thread error queue; every call
 * here clears it first, so one session's failure never shows up as
 * another's.
 */
#include "net/tls.h"

#include <errno.h>
#include <openssl/bio.h>
#include <openssl/err.h>
#include <openssl/ssl.h>
#include <openssl/x509.h>
#include <openssl/x509v3.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "net/net_internal.h"

struct net_tls {
    SSL_CTX *ctx;
    int refs;
    bool server;
};

struct net__tls {
    SSL *ssl;
    BIO *in;  /* ciphertext from the peer, not yet read by ssl */
    BIO *out; /* ciphertext ssl wrote, not yet taken for the socket */
    bool done;
    bool failed;
    /* the first failure verifying the peer's chain (verify_cb): its
     * X509_V_ERR_ code (X509_V_OK: none) and the certificate it is about,
     * "/CN=n4" and, for a date, " (notAfter ...)" */
    int verr;
    char vsubject[128];
    char vdate[64];
};

/* ---- contexts ----------------------------------------------------------- */

static void why_set(char *why, size_t cap, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));

static void why_set(char *why, size_t cap, const char *fmt, ...)
{
    va_list ap;
    if (why == NULL || cap == 0)
        return;
    va_start(ap, fmt);
    vsnprintf(why, cap, fmt, ap);
    va_end(ap);
}

/* The reason of OpenSSL's last error, "" if none. */
static const char *ssl_reason(char *buf, size_t cap)
{
    unsigned long e = ERR_peek_last_error();
    buf[0] = '\0';
    if (e != 0)
        ERR_error_string_n(e, buf, cap);
    return buf;
}

/* t formatted as OpenSSL prints it ("Jan  1 00:00:00 2030 GMT"). */
static void asn1_time_str(char *out, size_t cap, const ASN1_TIME *t)
{
    BIO *b = BIO_new(BIO_s_mem());
    out[0] = '\0';
    if (b == NULL)
        return;
    if (ASN1_TIME_print(b, t) == 1) {
        int n = BIO_read(b, out, (int)(cap - 1));
        out[n > 0 ? n : 0] = '\0';
    }
    BIO_free(b);
}

/* x's subject as one line ("/CN=n1"). */
static void subject_str(char *out, size_t cap, X509 *x)
{
    out[0] = '\0';
    if (x != NULL &&
        X509_NAME_oneline(X509_get_subject_name(x), out, (int)cap) == NULL)
        out[0] = '\0';
}

/* An expired or not-yet-valid certificate is refused at load: a node that
 * starts (or reloads) with one would fail every handshake later. */
static int check_dates(X509 *x, const char *file, char *why, size_t cap)
{
    char when[64];
    const ASN1_TIME *nb = X509_get0_notBefore(x);
    const ASN1_TIME *na = X509_get0_notAfter(x);
    if (X509_cmp_current_time(nb) >= 0) {
        asn1_time_str(when, sizeof(when), nb);
        why_set(why, cap, "certificate %s is not valid yet (notBefore %s)",
                file, when);
        return RK_ECONFIG;
    }
    if (X509_cmp_current_time(na) <= 0) {
        asn1_time_str(when, sizeof(when), na);
        why_set(why, cap, "certificate %s expired (notAfter %s)", file, when);
        return RK_ECONFIG;
    }
    return 0;
}

static int
file_readable(const char *file, const char *what, char *why, size_t cap)
{
    FILE *f = fopen(file, "rb");
    if (f == NULL) {
        int e = errno;
        why_set(why, cap, "%s %s: %s", what, file, strerror(e));
        return -e;
    }
    fclose(f);
    return 0;
}

/* OpenSSL's verdict on each certificate of the peer's chain, kept as it
 * stands: the first failure is noted in the session (its code, the
 * certificate's subject and the date at fault), so the log line of a
 * refusal says whose certificate and since when. */
static int verify_cb(int ok, X509_STORE_CTX *x)
{
    if (ok)
        return 1;
    SSL *ssl =
        X509_STORE_CTX_get_ex_data(x, SSL_get_ex_data_X509_STORE_CTX_idx());
    struct net__tls *s = ssl ? SSL_get_app_data(ssl) : NULL;
    if (s == NULL || s->verr != X509_V_OK)
        return 0;
    X509 *cert = X509_STORE_CTX_get_current_cert(x);
    s->verr = X509_STORE_CTX_get_error(x);
    subject_str(s->vsubject, sizeof(s->vsubject), cert);
    if (cert && s->verr == X509_V_ERR_CERT_HAS_EXPIRED) {
        char when[48];
        asn1_time_str(when, sizeof(when), X509_get0_notAfter(cert));
        snprintf(s->vdate, sizeof(s->vdate), " (notAfter %s)", when);
    } else if (cert && s->verr == X509_V_ERR_CERT_NOT_YET_VALID) {
        char when[48];
        asn1_time_str(when, sizeof(when), X509_get0_notBefore(cert));
        snprintf(s->vdate, sizeof(s->vdate), " (notBefore %s)", when);
    }
    return 0;
}

int net_tls_new(net_tls **out,
                const struct net_tls_opts *opts,
                char *why,
                size_t why_cap)
{
    char reason[256];
    int rc;
    if (opts->server && (opts->cert_file == NULL || opts->key_file == NULL)) {
        why_set(why, why_cap, "a TLS server needs a certificate and a key");
        return RK_ECONFIG;
    }
    if ((opts->cert_file == NULL) != (opts->key_file == NULL)) {
        why_set(why, why_cap,
                "a certificate needs its key, and a key its "
                "certificate");
        return RK_ECONFIG;
    }
    if (opts->cert_file &&
        ((rc = file_readable(opts->cert_file, "certificate", why, why_cap)) ||
         (rc = file_readable(opts->key_file, "key", why, why_cap))))
        return rc;
    if (opts->ca_file &&
        (rc = file_readable(opts->ca_file, "CA file", why, why_cap)))
        return rc;

    net_tls *t = calloc(1, sizeof(*t));
    if (t == NULL)
        return -ENOMEM;
    ERR_clear_error();
    t->ctx =
        SSL_CTX_new(opts->server ? TLS_server_method() : TLS_client_method());
    if (t->ctx == NULL) {
        rc = -ENOMEM;
        goto free_t;
    }
    t->refs = 1;
    t->server = opts->server;
    SSL_CTX_set_min_proto_version(t->ctx, TLS1_2_VERSION);
    /* idle connections give their record buffers back */
    SSL_CTX_set_mode(t->ctx, SSL_MODE_RELEASE_BUFFERS);
    /* no session resumption: a server sends no tickets after the
     * handshake (bytes an idle client would have to read) */
    if (opts->server)
        SSL_CTX_set_num_tickets(t->ctx, 0);
    rc = RK_ECONFIG;
    if (opts->cert_file) {
        if (SSL_CTX_use_certificate_chain_file(t->ctx, opts->cert_file) != 1) {
            why_set(why, why_cap, "certificate %s: %s", opts->cert_file,
                    ssl_reason(reason, sizeof(reason)));
            goto free_ctx;
        }
        if (SSL_CTX_use_PrivateKey_file(t->ctx, opts->key_file,
                                        SSL_FILETYPE_PEM) != 1) {
            if (ERR_GET_REASON(ERR_peek_last_error()) ==
                X509_R_KEY_VALUES_MISMATCH) {
                why_set(why, why_cap, "key %s does not match certificate %s",
                        opts->key_file, opts->cert_file);
                goto free_ctx;
            }
            why_set(why, why_cap, "key %s: %s", opts->key_file,
                    ssl_reason(reason, sizeof(reason)));
            goto free_ctx;
        }
        if (SSL_CTX_check_private_key(t->ctx) != 1) {
            why_set(why, why_cap, "key %s does not match certificate %s",
                    opts->key_file, opts->cert_file);
            goto free_ctx;
        }
        if (check_dates(SSL_CTX_get0_certificate(t->ctx), opts->cert_file, why,
                        why_cap) != 0)
            goto free_ctx;
    }
    if (opts->ca_file) {
        if (SSL_CTX_load_verify_locations(t->ctx, opts->ca_file, NULL) != 1) {
            why_set(why, why_cap, "CA file %s: %s", opts->ca_file,
                    ssl_reason(reason, sizeof(reason)));
            goto free_ctx;
        }
    } else if (!opts->server) {
        SSL_CTX_set_default_verify_paths(t->ctx);
    }
    if (!opts->server)
        SSL_CTX_set_verify(t->ctx, SSL_VERIFY_PEER, verify_cb);
    else if (opts->verify_peer)
        SSL_CTX_set_verify(t->ctx,
                           SSL_VERIFY_PEER | SSL_VERIFY_FAIL_IF_NO_PEER_CERT,
                           verify_cb);
    ERR_clear_error();
    *out = t;
    return 0;
free_ctx:
    SSL_CTX_free(t->ctx);
    ERR_clear_error();
free_t:
    free(t);
    return rc;
}

net_tls *net_tls_ref(net_tls *t)
{
    t->refs++;
    return t;
}

void net_tls_free(net_tls *t)
{
    if (t == NULL || --t->refs > 0)
        return;
    SSL_CTX_free(t->ctx);
    free(t);
}

/* ---- sessions ----------------------------------------------------------- */

int net__tls_new(struct net__tls **out, net_tls *ctx, const char *verify_name)
{
    struct net__tls *s = calloc(1, sizeof(*s));
    if (s == NULL)
        return -ENOMEM;
    ERR_clear_error();
    s->ssl = SSL_new(ctx->ctx);
    s->in = BIO_new(BIO_s_mem());
    s->out = BIO_new(BIO_s_mem());
    if (s->ssl == NULL || s->in == NULL || s->out == NULL)
        goto fail;
    /* an empty memory BIO asks to be retried rather than reporting EOF */
    BIO_set_mem_eof_return(s->in, -1);
    BIO_set_mem_eof_return(s->out, -1);
    SSL_set_bio(s->ssl, s->in, s->out); /* ssl owns both from here */
    s->verr = X509_V_OK;
    SSL_set_app_data(s->ssl, s); /* for verify_cb */
    if (ctx->server) {
        SSL_set_accept_state(s->ssl);
    } else {
        SSL_set_connect_state(s->ssl);
        if (verify_name && verify_name[0]) {
            X509_VERIFY_PARAM *vp = SSL_get0_param(s->ssl);
            /* an address is checked against the certificate's IP SANs,
             * a name against its DNS SANs (or CN) and sent as SNI */
            if (X509_VERIFY_PARAM_set1_ip_asc(vp, verify_name) != 1) {
                ERR_clear_error();
                if (SSL_set1_host(s->ssl, verify_name) != 1 ||
                    SSL_set_tlsext_host_name(s->ssl, verify_name) != 1)
                    goto free_ssl;
            }
        }
    }
    *out = s;
    return 0;
fail:
    BIO_free(s->in);
    BIO_free(s->out);
free_ssl:
    SSL_free(s->ssl);
    ERR_clear_error();
    free(s);
    return -ENOMEM;
}

void net__tls_free(struct net__tls *s)
{
    if (s == NULL)
        return;
    SSL_free(s->ssl); /* and its BIOs */
    free(s);
}

int net__tls_feed(struct net__tls *s, const uint8_t *p, size_t len)
{
    while (len > 0) {
        int n = len > INT32_MAX ? INT32_MAX : (int)len;
        int w = BIO_write(s->in, p, n);
        if (w <= 0)
            return -ENOMEM;
        p += w;
        len -= (size_t)w;
    }
    return 0;
}

size_t net__tls_in_pending(const struct net__tls *s)
{
    return BIO_ctrl_pending(s->in);
}

bool net__tls_has_input(const struct net__tls *s)
{
    return BIO_ctrl_pending(s->in) > 0 || SSL_pending(s->ssl) > 0;
}

/* What an SSL call's result means: 0 wants more bytes, RK_EAUTH the
 * peer failed the handshake or spoke something else than TLS, -ENOMEM. */
static int ssl_result(struct net__tls *s, int r)
{
    switch (SSL_get_error(s->ssl, r)) {
    case SSL_ERROR_WANT_READ:
    case SSL_ERROR_WANT_WRITE:
        return 0;
    default:
        s->failed = true;
        return RK_EAUTH;
    }
}

int net__tls_handshake(struct net__tls *s)
{
    if (s->done)
        return 1;
    if (s->failed)
        return RK_EAUTH;
    ERR_clear_error();
    int r = SSL_do_handshake(s->ssl);
    if (r == 1) {
        s->done = true;
        return 1;
    }
    return ssl_result(s, r);
}

bool net__tls_done(const struct net__tls *s)
{
    return s->done;
}

int net__tls_read(struct net__tls *s, uint8_t *p, size_t cap, size_t *n)
{
    size_t got = 0;
    *n = 0;
    if (s->failed)
        return RK_EAUTH;
    ERR_clear_error();
    int r = SSL_read_ex(s->ssl, p, cap, &got);
    if (r == 1) {
        *n = got;
        return 0;
    }
    int e = SSL_get_error(s->ssl, r);
    if (e == SSL_ERROR_ZERO_RETURN)
        return 1; /* close_notify: the peer is done */
    return ssl_result(s, r);
}

int net__tls_write(struct net__tls *s, const uint8_t *p, size_t len)
{
    size_t done = 0;
    if (s->failed)
        return RK_EAUTH;
    if (len == 0)
        return 0;
    ERR_clear_error();
    /* into a memory BIO a write goes whole or fails */
    if (SSL_write_ex(s->ssl, p, len, &done) != 1 || done != len) {
        s->failed = true;
        return -ENOMEM;
    }
    return 0;
}

void net__tls_shutdown(struct net__tls *s)
{
    if (!s->done || s->failed)
        return;
    ERR_clear_error();
    (void)SSL_shutdown(s->ssl); /* queues close_notify; no answer awaited */
    ERR_clear_error();
}

size_t net__tls_out_pending(const struct net__tls *s)
{
    return BIO_ctrl_pending(s->out);
}

size_t net__tls_out_take(struct net__tls *s, uint8_t *p, size_t cap)
{
    size_t got = 0;
    if (cap == 0 || BIO_read_ex(s->out, p, cap, &got) != 1)
        return 0;
    return got;
}

const char *net_tls_fail_name(enum net_tls_fail f)
{
    static const char *const names[NET_TLS_FAIL_COUNT] = {
        [NET_TLS_FAIL_OTHER] = "other",
        [NET_TLS_FAIL_PLAINTEXT] = "plaintext",
        [NET_TLS_FAIL_UNTRUSTED] = "wrong_ca",
        [NET_TLS_FAIL_EXPIRED] = "expired",
        [NET_TLS_FAIL_NOT_YET_VALID] = "not_yet_valid",
        [NET_TLS_FAIL_NO_CERT] = "no_cert",
        [NET_TLS_FAIL_NAME] = "name_mismatch",
        [NET_TLS_FAIL_PEER] = "peer_refused",
        [NET_TLS_FAIL_CLOSED] = "closed",
        [NET_TLS_FAIL_TIMEOUT] = "timeout",
    };
    return (unsigned)f < NET_TLS_FAIL_COUNT ? names[f] : "other";
}

enum net_tls_fail net__tls_why(const struct net__tls *s, char *out, size_t cap)
{
    long v = s->verr != X509_V_OK ? s->verr : SSL_get_verify_result(s->ssl);
    char reason[200];
    if (cap == 0)
        return NET_TLS_FAIL_OTHER;
    if (v != X509_V_OK) {
        enum net_tls_fail f = NET_TLS_FAIL_UNTRUSTED;
        if (v == X509_V_ERR_CERT_HAS_EXPIRED)
            f = NET_TLS_FAIL_EXPIRED;
        else if (v == X509_V_ERR_CERT_NOT_YET_VALID)
            f = NET_TLS_FAIL_NOT_YET_VALID;
        snprintf(out, cap, "certificate%s%s: %s%s", s->vsubject[0] ? " " : "",
                 s->vsubject, X509_verify_cert_error_string(v), s->vdate);
        return f;
    }
    unsigned long e = ERR_peek_last_error();
    int r = ERR_GET_REASON(e);
    ssl_reason(reason, sizeof(reason));
    if (ERR_GET_LIB(e) != ERR_LIB_SSL) {
        snprintf(out, cap, "%s", reason[0] ? reason : "handshake failed");
        return NET_TLS_FAIL_OTHER;
    }
    /* what a plaintext client's first bytes read as */
    if (r == SSL_R_WRONG_VERSION_NUMBER || r == SSL_R_HTTP_REQUEST ||
        r == SSL_R_HTTPS_PROXY_REQUEST || r == SSL_R_PACKET_LENGTH_TOO_LONG) {
        snprintf(out, cap, "not TLS (a plaintext client?): %s", reason);
        return NET_TLS_FAIL_PLAINTEXT;
    }
    if (r == SSL_R_PEER_DID_NOT_RETURN_A_CERTIFICATE) {
        snprintf(out, cap, "the peer sent no certificate: %s", reason);
        return NET_TLS_FAIL_NO_CERT;
    }
    /* an alert: the peer refused the handshake (our certificate, say) */
    if (r >= SSL_AD_REASON_OFFSET && r < SSL_AD_REASON_OFFSET + 256) {
        snprintf(out, cap, "the peer refused the handshake: %s", reason);
        return NET_TLS_FAIL_PEER;
    }
    snprintf(out, cap, "%s", reason[0] ? reason : "handshake failed");
    return NET_TLS_FAIL_OTHER;
}

bool net__tls_peer_is(const struct net__tls *s,
                      const char *name,
                      char *why,
                      size_t cap)
{
    X509 *x = SSL_get0_peer_certificate(s->ssl);
    char subject[128];
    if (x == NULL) {
        snprintf(why, cap, "the peer presented no certificate");
        return false;
    }
    ERR_clear_error();
    bool ok = name[0] != '\0' && (X509_check_ip_asc(x, name, 0) == 1 ||
                                  X509_check_host(x, name, 0, 0, NULL) == 1);
    ERR_clear_error();
    if (!ok) {
        subject_str(subject, sizeof(subject), x);
        snprintf(why, cap,
                 "certificate %s does not name %s, the node the peer says "
                 "it is",
                 subject[0] ? subject : "(no subject)", name);
    }
    return ok;
}
