/*
 * fuzz_tls.c - net/'s TLS sessions (tls.c) on untrusted bytes: whatever a
 * peer sends to a server session (a ClientHello, records, garbage) or, as
 * a server's answer, to a client session, fed in pieces whose sizes come
 * from the input, must end in a handshake done, one that waits, or a
 * refusal, never a crash or a leak; after a refusal every call keeps
 * refusing; and any plaintext read stays within the buffer given.
 *
 * Input: byte 0 picks the side (bit 0: client; bit 1, a server: one that
 * asks for the client's certificate and verifies it, as the internode
 * port does) and seeds the piece sizes, the rest is the peer's bytes. A
 * session that finishes its handshake also has its peer's certificate
 * checked against a name (net__tls_peer_is, the internode name check). The
 * server's certificate (EC P-256, self signed) is made once in-process and
 * loaded through net_tls_new from a temporary file, as a daemon loads its own.
 */
#include <openssl/evp.h>
#include <openssl/pem.h>
#include <openssl/x509.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "common/rk.h"
#include "net/net_internal.h"
#include "net/tls.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static void check(int cond)
{
    if (!cond)
        abort();
}

static net_tls *server_ctx, *mutual_ctx, *client_ctx;

/* A self-signed certificate and its key, written to two temporary files
 * that are removed once loaded. */
static void contexts_make(void)
{
    char crt[] = "/tmp/rk-fuzz-tls-crt-XXXXXX";
    char key[] = "/tmp/rk-fuzz-tls-key-XXXXXX";
    EVP_PKEY *pk = EVP_EC_gen("P-256");
    X509 *x = X509_new();
    check(pk != NULL && x != NULL);
    ASN1_INTEGER_set(X509_get_serialNumber(x), 1);
    X509_gmtime_adj(X509_getm_notBefore(x), -3600);
    X509_gmtime_adj(X509_getm_notAfter(x), 3600L * 24 * 365 * 50);
    X509_set_pubkey(x, pk);
    X509_NAME *n = X509_get_subject_name(x);
    X509_NAME_add_entry_by_txt(n, "CN", MBSTRING_ASC,
                               (const unsigned char *)"fuzz", -1, -1, 0);
    X509_set_issuer_name(x, n);
    check(X509_sign(x, pk, EVP_sha256()) > 0);
    int fc = mkstemp(crt), fk = mkstemp(key);
    check(fc >= 0 && fk >= 0);
    FILE *f = fdopen(fc, "w");
    check(f != NULL && PEM_write_X509(f, x) == 1);
    fclose(f);
    f = fdopen(fk, "w");
    check(f != NULL &&
          PEM_write_PrivateKey(f, pk, NULL, NULL, 0, NULL, NULL) == 1);
    fclose(f);
    struct net_tls_opts o = NET_TLS_OPTS_INIT;
    o.server = true;
    o.cert_file = crt;
    o.key_file = key;
    char why[256];
    check(net_tls_new(&server_ctx, &o, why, sizeof(why)) == 0);
    o.ca_file = crt;
    o.verify_peer = true;
    check(net_tls_new(&mutual_ctx, &o, why, sizeof(why)) == 0);
    struct net_tls_opts c = NET_TLS_OPTS_INIT;
    c.ca_file = crt;
    check(net_tls_new(&client_ctx, &c, why, sizeof(why)) == 0);
    unlink(crt);
    unlink(key);
    X509_free(x);
    EVP_PKEY_free(pk);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (size < 1)
        return 0;
    if (server_ctx == NULL)
        contexts_make();
    bool client = data[0] & 1;
    bool mutual = !client && (data[0] & 2);
    unsigned seed = data[0];
    struct net__tls *s;
    check(net__tls_new(&s,
                       client   ? client_ctx
                       : mutual ? mutual_ctx
                                : server_ctx,
                       client ? "fuzz" : NULL) == 0);
    uint8_t out[4096], plain[1024];
    if (client) { /* its ClientHello goes nowhere */
        check(net__tls_handshake(s) == 0);
        while (net__tls_out_take(s, out, sizeof(out)) > 0)
            ;
    }
    size_t off = 1;
    int hs = 0;
    while (off < size) {
        seed = seed * 1103515245u + 12345u;
        size_t piece = 1 + (seed >> 16) % 700;
        if (piece > size - off)
            piece = size - off;
        check(net__tls_feed(s, data + off, piece) == 0);
        off += piece;
        if (hs == 0)
            hs = net__tls_handshake(s);
        check(hs == 0 || hs == 1 || hs == RK_EAUTH);
        if (hs == RK_EAUTH) {
            check(net__tls_handshake(s) == RK_EAUTH);
            char why[200];
            enum net_tls_fail f = net__tls_why(s, why, sizeof(why));
            check(strlen(why) < sizeof(why));
            check(strlen(net_tls_fail_name(f)) > 0);
            break;
        }
        if (hs == 1) {
            char why[300];
            (void)net__tls_peer_is(s, "fuzz", why, sizeof(why));
            (void)net__tls_peer_is(s, "127.0.0.1", why, sizeof(why));
            size_t n = 0;
            int rc;
            while ((rc = net__tls_read(s, plain, sizeof(plain), &n)) == 0 &&
                   n > 0)
                check(n <= sizeof(plain));
            check(rc == 0 || rc == 1 || rc == RK_EAUTH);
        }
        while (net__tls_out_take(s, out, sizeof(out)) > 0)
            ;
    }
    net__tls_free(s);
    return 0;
}
