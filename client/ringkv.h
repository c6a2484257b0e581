/*
 * ringkv.h - libringkv, the C client of ringkv's native protocol
 * (docs/protocol.md).
 *
 * One `ringkv` handle is one TCP connection to one node of a cluster, chosen
 * from a list of hosts; when the connection fails the next call reconnects,
 * moving on to the next host. A token-aware handle (opts.token_aware)
 * also learns the ring from that node and sends each GET, PUT, DEL (and
 * MGET, by its first key) to a replica of its key, on one more connection
 * per node, opened when first needed; see "Token-aware" below. Calls block;
 * every wait is bounded by poll() timeouts (the socket itself is non-blocking).
 * A handle is not thread-safe: use one per thread.
 *
 * Two ways to talk:
 *  - synchronous: ringkv_get / ringkv_put / ringkv_del, or ringkv_call for
 *    any request (one request on the wire at a time; retried once on another
 *    connection if the connection drops, unless it is a write that may
 *    already have been applied: see ringkv_call);
 *  - pipelined: ringkv_send queues any number of requests, ringkv_flush
 *    writes them, ringkv_recv returns responses as they come, in any order;
 *    match them by id. Do not mix the two while requests are outstanding.
 *
 * TLS (opts.tls; a node's client_tls: required): every connection is TLS
 * over the same non-blocking socket (OpenSSL), the node's certificate
 * verified against tls_ca_file (or the system's CAs) and its name against
 * the host dialed (or tls_verify_name). A certificate refused is RK_EAUTH,
 * ringkv_errmsg() saying why; the next host is tried.
 *
 * Errors: 0, -errno (system: -ECONNREFUSED, ...), or an RK_E* code from
 * common/rk.h (the server's typed errors, RK_ENOTSUP for NOT_IMPLEMENTED,
 * RK_ETIMEOUT for a local timeout, RK_ECLOSED for a lost connection,
 * RK_EPROTO for a broken peer). ringkv_errmsg() says what happened in
 * words; ringkv_errkind() sorts any code into the kinds below.
 */
#ifndef RINGKV_H
#define RINGKV_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "common/rk.h"
#include "wire/client_msg.h"

#define RINGKV_DEFAULT_PORT 7380

typedef struct ringkv ringkv;

struct ringkv_opts {
    /* Comma-separated "host[:port]" list ("[v6addr]:port" for IPv6); the
     * port defaults to 7380. Required. */
    const char *hosts;
    /* Sent in HELLO after every connect when not NULL. */
    const char *password;
    /* The user HELLO names ("default", "admin"), when not NULL; the server
     * takes "default" without one. Sent only with a password. */
    const char *user;
    /* Sent in HELLO as the client name (HELLO is sent only with a
     * password or when hello is nonzero). */
    const char *client_name;
    int hello;
    int connect_timeout_ms; /* per address tried */
    int timeout_ms;         /* per synchronous call / flush */
    /* Consistency level added to requests that carry none
     * (WIRE_CCL_DEFAULT: leave it to the server). */
    uint32_t consistency;
    /* Extra attempts of a synchronous call after a lost connection. */
    int retries;
    /* Which host to connect to (enum ringkv_spread). */
    int spread;
    /* Speak TLS (nonzero). */
    int tls;
    /* PEM CA bundle that verifies the nodes' certificates; NULL: the
     * system's. */
    const char *tls_ca_file;
    /* The name (or address) the node's certificate must carry; NULL: the
     * host as given in hosts (or, for a node the ring names, its
     * address); "": any (the CA's signature only). */
    const char *tls_verify_name;
    /* Token-aware (nonzero): send each keyed request to a replica of its
     * key (docs/protocol.md, "Token-aware clients"). Off in
     * RINGKV_OPTS_INIT, so that a program keeps its one connection per
     * handle until it asks; the CLI and ringkv-load turn it on. */
    int token_aware;
};

/* ringkv_opts.spread. */
enum ringkv_spread {
    /* The first host of the list that answers, and after a lost connection
     * the next one (the order given). */
    RINGKV_SPREAD_NONE = 0,
    /* A host chosen at random, and after a lost connection one of the
     * others chosen at random: many clients given the same list spread
     * over it, and the clients of a node that fails spread over the rest
     * instead of all moving to the next one in the list. */
    RINGKV_SPREAD_RANDOM = 1,
    /* The first host of the list, and after a lost connection one of the
     * others chosen at random (for clients that spread themselves at first,
     * as ringkv-load does by rotating the list). */
    RINGKV_SPREAD_FAILOVER = 2,
};

#define RINGKV_OPTS_INIT                                                    \
    {                                                                       \
        .hosts = "127.0.0.1", .password = NULL, .user = NULL,               \
        .client_name = "libringkv", .hello = 0, .connect_timeout_ms = 2000, \
        .timeout_ms = 5000, .consistency = WIRE_CCL_DEFAULT, .retries = 1,  \
        .spread = RINGKV_SPREAD_NONE, .tls = 0, .tls_ca_file = NULL,        \
        .tls_verify_name = NULL, .token_aware = 0                           \
    }

/* Make a handle. Parses and copies the options; does not connect (the first
 * call does, or ringkv_connect). Returns 0, RK_ECONFIG for a bad host list
 * or a TLS CA file that cannot be loaded (message in *out_err if not NULL:
 * a static string), -ENOMEM.
 * @note *out belongs to the caller: ringkv_free. */
int ringkv_new(ringkv **out,
               const struct ringkv_opts *opts,
               const char **out_err);

/* Close the connection and free everything. ringkv_free(NULL) is a no-op. */
void ringkv_free(ringkv *c);

/* Connect now (if not connected), trying each host once, starting after the
 * last one used (opts.spread: see enum ringkv_spread). Sends HELLO when
 * configured; a rejected user or password is RK_EAUTH and stops the
 * search. */
int ringkv_connect(ringkv *c);

/* Drop the connection (outstanding requests are forgotten). */
void ringkv_close(ringkv *c);

/* The last error's description, or "" . @note Valid until the next call on
 * c. */
const char *ringkv_errmsg(const ringkv *c);

/* ---- error kinds -------------------------------------------------------- */

/* What kind of failure a code is: the one classification that the CLI's exit
 * codes (docs/cli.md), ringkv-load's error counts and this library's own
 * reconnects use. */
enum ringkv_errkind {
    RINGKV_KIND_OK = 0,   /* 0 */
    RINGKV_KIND_NOTFOUND, /* RK_ENOTFOUND */
    /* No connection could be made, or it broke: RK_ECLOSED, -ECONNREFUSED,
     * -ECONNRESET, -ECONNABORTED, -EPIPE, -ENOTCONN, -ETIMEDOUT,
     * -EHOSTUNREACH (also a host name that does not resolve),
     * -EHOSTDOWN, -ENETUNREACH, -ENETDOWN, -EADDRNOTAVAIL. */
    RINGKV_KIND_CONNECTION,
    RINGKV_KIND_AUTH, /* RK_EAUTH */
    /* The cluster could not serve the request now: RK_EUNAVAILABLE,
     * RK_ETIMEOUT (the server's, or no answer in time), RK_EOVERLOADED,
     * RK_ESTALE. */
    RINGKV_KIND_CLUSTER,
    RINGKV_KIND_REJECTED, /* the request itself: RK_EBADREQ, RK_ETOOLARGE */
    RINGKV_KIND_NOTSUP,   /* RK_ENOTSUP: NOT_IMPLEMENTED by this server */
    RINGKV_KIND_OTHER,    /* RK_EPROTO, RK_EINTERNAL, -ENOMEM, ... */
    /* RK_ENOPERM: the user's role may not run the command (an admin
     * command sent by the data user) */
    RINGKV_KIND_NOPERM
};

/* The kind of any code this library returns (0, -errno or RK_E*). */
enum ringkv_errkind ringkv_errkind(int err);

/* Whether sending the same request again may succeed: a connection error
 * (on a new connection), RK_ESTALE (at another node), RK_EOVERLOADED and
 * RK_EUNAVAILABLE (after a pause); none of those did anything. A connection
 * error and RK_ETIMEOUT leave the request's outcome unknown (it may have
 * been applied), so they count only when `idempotent` says that applying it
 * twice is harmless. Everything else: retrying cannot help. */
bool ringkv_retryable(int err, bool idempotent);

/* "host:port" of the current (or last) connection, or "" . @note Valid until
 * the next call on c. */
const char *ringkv_peer(const ringkv *c);

/* The host of entry i of the host list as ringkv_new parsed it (an IPv6
 * address without its brackets, no port), or NULL past the list's end.
 * @note Valid as long as c. */
const char *ringkv_host_name(const ringkv *c, size_t i);

/* ---- token-aware -------------------------------------------------------
 *
 * With opts.token_aware the handle asks its node for RING before its first
 * keyed request (a synchronous call waits for it; pipelined requests go to
 * the handle's own node meanwhile) and computes each key's replicas from
 * it with ring/, as the nodes do. A GET, PUT or DEL then goes to a
 * replica of its key (an MGET to one of its first key's): the handle's own
 * node when it is one, else the first replica in the ring's preference
 * order, on a connection of its own (opened at first use, HELLO first: it
 * must be answered by the node the ring names). Every answer carries its
 * node's ring epoch; a newer one than the handle's makes it ask that node
 * for RING again, and until the answer comes requests go to its own node
 * (as they do when no replica can be reached: a node that fails is skipped
 * for a second, longer while it keeps failing). Other requests always go
 * to the handle's own connection. Ids are the handle's, unique over all
 * its connections. A server older than the ring rows of RING answers
 * (docs/protocol.md) leaves the handle with its one connection. */

struct ringkv_route_stats {
    uint64_t epoch;      /* of the ring last asked for (0: none yet) */
    size_t nodes;        /* nodes placing tokens in the ring in use (0:
                            none usable) */
    size_t connections;  /* open now, the handle's own included */
    uint64_t to_replica; /* keyed requests sent to a replica of the key */
    /* keyed requests sent to the handle's own node instead: no ring (yet),
     * a stale one, or no replica reachable */
    uint64_t fallback;
    uint64_t refreshes; /* RING answers taken */
};

/* What the handle's routing did so far (all zero when not token-aware). */
void ringkv_route_stats(const ringkv *c, struct ringkv_route_stats *out);

/* ---- pipelined API ---------------------------------------------------- */

/* Queue req (connecting first if needed). The handle assigns the id (req->id
 * is ignored), stored in *out_id if not NULL. req's bytes are copied at
 * once; req is not kept. Nothing is written until ringkv_flush or
 * ringkv_recv. Returns encode errors (RK_EBADREQ, RK_ETOOLARGE) or connect
 * errors. */
int ringkv_send(ringkv *c, uint64_t *out_id, const struct wire_creq *req);

/* Write every queued byte, reading what the server sends meanwhile so
 * neither side can block the other. Waits at most opts.timeout_ms:
 * RK_ETIMEOUT (the connection is kept). A broken connection: RK_ECLOSED or
 * -errno, and the handle is disconnected. */
int ringkv_flush(ringkv *c);

/* Number of requests sent (queued) whose response has not been returned. */
size_t ringkv_pending(const ringkv *c);

/* Wait up to timeout_ms (< 0: opts.timeout_ms) for the next response, of
 * any outstanding request. Flushes queued bytes first. Returns 0 with *out
 * filled (the server's verdict is out->err), RK_ETIMEOUT (nothing yet; the
 * connection is kept), RK_EPROTO (undecodable frame; disconnected),
 * RK_ECLOSED / -errno (connection lost; disconnected, outstanding requests
 * are gone), or RK_EBADREQ when nothing is outstanding. A token-aware
 * handle waits on all its connections; when one is lost or sends an
 * undecodable frame, it closes them all, so that "outstanding requests
 * are gone" holds for every request as with one connection.
 * @note *out owns its memory: wire_cresp_clear(out) after use, on success
 * only. */
int ringkv_recv(ringkv *c, struct wire_cresp *out, int timeout_ms);

/* ---- synchronous API -------------------------------------------------- */

/* Whether applying req twice is harmless, so it may be resent when its
 * outcome is unknown: HELLO, PING, GET, MGET, SCAN, STATUS, RING,
 * ENDPOINTS, METRICS, NETSTATS, LISTSNAPSHOTS, RELOADTLS (loading the same
 * files again is harmless). Not PUT or DEL (see ringkv_call)
 * nor the admin ops that change the cluster (JOIN, DECOMMISSION, REMOVENODE,
 * REPAIR, CLEANUP, ABORT). */
bool ringkv_idempotent(const struct wire_creq *req);

/* Send req and wait for its response (opts.timeout_ms). On a connection
 * failure before the answer, reconnects (to the next host) and resends, up
 * to opts.retries times, when that is safe:
 *  - always when req's frame was not written whole (the server cannot have
 *    decoded it), e.g. a connection refused or closed while idle (checked
 *    before sending);
 *  - after it was written, only when req is idempotent (ringkv_idempotent:
 *    reads and queries). PUT and DEL carry no timestamp of their own: the
 *    coordinator stamps each copy anew, so a resent write is a second, newer
 *    write that can overwrite a write made in between by someone else (a
 *    lost update) and restarts a ttl. They are not resent; the connection
 *    error is returned and ringkv_errmsg says the write may have been
 *    applied. Write again yourself if last-writer-wins on your own clock is
 *    what you want.
 * A local timeout disconnects (a late answer must not be taken for the next
 * request's) and returns RK_ETIMEOUT, never resent. A RING_STALE answer (the
 * node refuses to coordinate until its ring catches up; nothing was done) is
 * retried on the next host too, when there is one. Returns the transport
 * error, else out->err (0 on success).
 * @note When a response arrived (the return value is 0 or out->err), *out
 * owns memory: wire_cresp_clear(out); on other errors *out is cleared. Must
 * not be used while pipelined requests are pending (RK_EBADREQ). */
int ringkv_call(ringkv *c, struct wire_cresp *out, const struct wire_creq *req);

/* GET key. 0 with *out_value (malloc'd, NUL-terminated for convenience,
 * length *out_len; the caller frees it), RK_ENOTFOUND, or an error. */
int ringkv_get(ringkv *c,
               uint8_t **out_value,
               size_t *out_len,
               const void *key,
               size_t klen);

/* PUT key = value; ttl_s 0 means no expiry. */
int ringkv_put(ringkv *c,
               const void *key,
               size_t klen,
               const void *value,
               size_t vlen,
               uint32_t ttl_s);

/* DEL key. */
int ringkv_del(ringkv *c, const void *key, size_t klen);

/* Called by ringkv_scan for each key; a nonzero return stops it and is
 * returned. @note key lives only during the call. */
typedef int (*ringkv_key_cb)(const uint8_t *key, size_t len, void *arg);

/* One SCAN call (docs/protocol.md): the live keys from *cursor on (0
 * starts a scan), in token order, that match the glob `match` (NULL: all),
 * about `count` keys' work (0: the server's default, 10; at most
 * WIRE_CSCAN_MAX). On success cb has seen each key the call returned
 * (maybe none) and *cursor is where the next call goes on: 0 when the
 * scan is over. A key present from the first call to the last is seen at
 * least once, whatever the ring does meanwhile; one written or deleted
 * during the scan may be seen or not. Returns 0, cb's nonzero return, or
 * an error (*cursor unchanged: call again to retry). */
int ringkv_scan(ringkv *c,
                uint64_t *cursor,
                const char *match,
                uint32_t count,
                ringkv_key_cb cb,
                void *arg);

#endif
