/*
 * ringkv_internal.h - what libringkv's files share: the handle, and the
 * token-aware routing (route.c) that ringkv.c calls.
 *
 * A handle is one connection. A token-aware handle (opts.token_aware)
 * also owns a route: the ring it learned from a node (RING), and one more
 * handle per node it has sent requests to, opened lazily, each with the
 * node's client address as its only host. Those node handles are the same
 * struct, marked by `owner`; their requests carry the owner's ids, and
 * their answers are read by the owner's ringkv_recv / ringkv_call.
 */
#ifndef CLIENT_RINGKV_INTERNAL_H
#define CLIENT_RINGKV_INTERNAL_H

#include <openssl/ssl.h>
#include <poll.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "client/ringkv.h"
#include "ring/ring.h"
#include "wire/client_msg.h"

#define RINGKV__NAME_MAX 256 /* a node name kept (longer: not kept) */

struct ringkv__host {
    char *name;
    char port[8];
    char node[RINGKV__NAME_MAX]; /* the node it answered as, "" unknown */
};

struct ringkv__route;

struct ringkv {
    struct ringkv_opts opts;
    char *password;
    char *user;
    char *client_name;
    struct ringkv__host *hosts;
    size_t nhosts;
    size_t cur; /* index of the host last used */
    bool used_any;
    uint64_t rng; /* opts.spread: the state of the host picks */
    int fd;
    SSL_CTX *tls_ctx; /* opts.tls */
    SSL *ssl;         /* on fd, while connected with TLS */
    char *tls_ca_file, *tls_verify_name;
    uint64_t next_id;
    size_t pending;       /* requests outstanding, the route's RING included */
    size_t internal;      /* of those, the route's RING request (0 or 1) */
    struct wire_cbuf out; /* queued bytes, sent from out_off */
    size_t out_off;
    uint64_t written; /* bytes ever handed to the kernel (never reset) */
    uint8_t *in;      /* received bytes in [in_off, in_len) */
    size_t in_len, in_cap, in_off;
    char err[512];
    char peer[320];
    /* the node connected to (HELLO's or RING's `node`), "" unknown */
    char node[RINGKV__NAME_MAX];
    /* a node handle of a token-aware handle: */
    ringkv *owner;       /* the handle it belongs to (NULL: it is one) */
    int64_t down_ms;     /* not tried again before (monotonic ms) */
    unsigned fails;      /* connection failures in a row */
    bool mapped;         /* a node of the current ring */
    size_t rr;           /* ringkv_recv's first connection looked at */
    struct pollfd *pfds; /* ringkv_recv's poll set, pcap long */
    ringkv **pfh;        /* the handle of each */
    size_t pcap;
    struct ringkv__route *rt; /* opts.token_aware, on the handle only */
};

/* ---- ringkv.c ----------------------------------------------------------- */

int64_t ringkv__now_ms(void);
__attribute__((format(printf, 2, 3))) void
ringkv__seterr(ringkv *c, const char *fmt, ...);
/* Close h's connection; its outstanding requests are forgotten. */
void ringkv__drop(ringkv *h);
/* Queue req on h (connected) with the next id of c, the handle. */
int ringkv__queue(ringkv *c,
                  ringkv *h,
                  uint64_t *out_id,
                  const struct wire_creq *req);
/* Wait on h for its next answer by deadline: 0 and *out (a request's),
 * or RINGKV__INTERNAL when `internal` and the route's RING request was
 * answered instead (nothing in *out), or an error. */
#define RINGKV__INTERNAL 1
int ringkv__recv_until(ringkv *h,
                       struct wire_cresp *out,
                       int64_t deadline,
                       bool internal);
int ringkv__flush_until(ringkv *h, int64_t deadline);

/* ---- route.c: token-aware routing ---------------------------------------- */

/* The route of a token-aware handle; -ENOMEM. */
int ringkv__route_new(ringkv *c);
/* Frees the node handles and the ring. NULL: nothing. */
void ringkv__route_free(struct ringkv__route *rt);
/* Drops every node handle's connection (ringkv_close). */
void ringkv__route_close(ringkv *c);
/* The i-th node handle (i < ringkv__route_count), maybe NULL. */
size_t ringkv__route_count(const ringkv *c);
ringkv *ringkv__route_at(const ringkv *c, size_t i);
/* An answer arrived on h: notes its epoch, and when it answers the
 * route's RING request applies it and returns true (not the caller's). */
bool ringkv__route_answer(ringkv *h, struct wire_cresp *resp);
/* h's connection is gone: a RING request on it is lost. */
void ringkv__route_lost(ringkv *h);
/* Before keyed request req: ask for the ring when it is stale (a reply
 * carried a newer epoch, or none is known) and no request for it is in
 * flight, on the node that carried the newest epoch, else on c's own
 * connection. `wait`: wait for the answer (a synchronous call; nothing
 * else outstanding). Returns 0, or the error of connecting c (which req
 * would meet too: the caller returns it rather than connect again); other
 * failures only delay the next try. */
int ringkv__route_refresh(ringkv *c, const struct wire_creq *req, bool wait);
/* Where req goes: a connected handle of a live replica of its key (its
 * first key for MGET) when the ring is known and current, else c. Opens
 * node connections as needed; one that fails is skipped for a while. */
ringkv *ringkv__route_pick(ringkv *c, const struct wire_creq *req);
/* A node handle answered RING_STALE or failed: skip it for a while. */
void ringkv__route_avoid(ringkv *h);

/* The ring a RING answer describes (pure; fuzzed): its placed nodes'
 * rows (name, client address, dc, rack) and tokens, and the replication
 * on the answering node's row, built with ring/ and checked against the
 * answer's fingerprint. On success *out holds a ring (ring_free) and
 * *out_addrs a malloc'd array of ring_node_count strings, "" where the
 * address is unknown (ringkv__addrs_free). RK_ENOTSUP: the answer has no
 * rows or no replication (an older server), RK_EPROTO: it is not
 * consistent (why says how), -ENOMEM. */
int ringkv__ring_build(ring **out,
                       char ***out_addrs,
                       const struct wire_cresp *r,
                       const char **why);
void ringkv__addrs_free(char **addrs, size_t n);

#endif
