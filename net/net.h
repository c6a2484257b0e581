/*
 * net.h - ringkv's network layer: framed TCP, internode RPC, UDP, on libuv.
 *
 * net/ knows sockets and nothing of the data: it moves opaque frames. Every
 * object here runs on one libuv loop thread (the daemon's), holds no global
 * state, embeds its libuv handles and is freed only from their close
 * callbacks: *_close() starts the close, the object disappears once the loop
 * has run the close callbacks (run the loop until uv_run returns 0).
 *
 * Framing: a frame is a 4-byte big-endian length then that many bytes. A
 * peer announcing a frame over max_frame is closed with RK_ETOOLARGE.
 * RPC frames (internode) carry a 9-byte header inside the frame: a kind byte
 * (NET_RPC_REQUEST / NET_RPC_RESPONSE) and a big-endian 64-bit request id,
 * then the payload (an rpc_msg from wire/, which net/ never looks into).
 *
 * Batching: frames sent in one loop turn are copied into per-connection
 * chunks and go out in one uv_write (a writev of the chunks) from a
 * uv_prepare/uv_check pair, so a coordinator fanning out a thousand writes in
 * one turn costs one syscall per peer, not a thousand.
 *
 * Back-pressure: each connection counts the bytes it has queued and not yet
 * written (waiting + in the kernel-bound write). A send that would pass
 * max_queued fails at once with RK_EOVERLOADED (a single frame is always
 * accepted on an empty queue). A server connection also stops reading while
 * its queue is over max_queued / 2 and resumes under max_queued / 4, so a
 * client that sends without reading cannot grow the server's memory.
 *
 * Handshake hook (optional, internode): the connecting side speaks first,
 * three messages, each a frame of at most NET_HANDSHAKE_MAX bytes (a larger
 * one is refused before authentication: RK_ETOOLARGE).
 *   connect: make(to = the "host:port" dialed, peer = empty) -> sent; the
 *            first frame received is check(got, sent = that); then
 *            make(peer = the frame received) -> sent; requests queued
 *            meanwhile go out right after it.
 *   accept:  make(to = NULL, peer = the first frame received) -> sent; the
 *            second frame received is check(got, sent = that); only then is
 *            the connection announced (on_accept) and its frames delivered.
 * A failing make or check (or a handshake not finished in
 * handshake_timeout_ms) closes the connection and counts
 * stats.handshake_failed. wire/rpc_msg.h provides rpc_handshake_make/check
 * for these two slots. Given a TLS context too (net_server_opts.tls,
 * net_peers_opts.tls: mutual TLS), a connection does the TLS handshake
 * first and the hook's inside it, and refuses a peer whose certificate
 * does not carry the name the hook's check returned (NET_TLS_FAIL_NAME);
 * every refusal is reported with its reason (on_tls_fail).
 *
 * Raw-stream servers (net_server_opts.on_input; the client protocols): no
 * framing of net/'s own. Each connection's input buffer holds what arrived
 * and was not consumed yet, and the protocol handler's on_input consumes
 * whole requests from its front; the buffer grows towards the size the
 * handler says its current request needs, never past twice what arrived
 * (so announcing a large request allocates nothing) and never past the
 * connection's input cap. Growth past NET_INPUT_BASE a connection is
 * charged to an optional input budget shared by servers (net_budget): when
 * it is spent, the connection stops reading until other buffers drain. A
 * connection holding part of a request with no byte for frame_timeout_ms
 * is closed (RK_ETIMEOUT); with frame_deadline the timeout counts from the
 * first byte of the held request instead, so a request must arrive whole
 * within frame_timeout_ms however it trickles in (a sender of a byte now
 * and then cannot hold the connection). Output is raw bytes (net_conn_write),
 * batched per turn as above. A connection stops reading while its unsent output
 * is over max_queued / 2 or it has max_requests requests in flight
 * (net_conn_request_begin/end), and when the handler pauses it. A peer's
 * EOF (half-close) delivers what is buffered once more (eof set), then the
 * connection closes once every request is answered and written; so does
 * net_conn_finish (QUIT, protocol errors) and, for every connection,
 * net_server_drain (shutdown), without delivering more input.
 *
 * Borrowed memory: every rk_slice passed to a callback lives only for that
 * call. Slices passed in are copied before the call returns.
 */
#ifndef RK_NET_H
#define RK_NET_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include <uv.h>

#include "common/rk.h"

typedef struct net_server net_server;
typedef struct net_conn net_conn;
typedef struct net_peers net_peers;
typedef struct net_udp net_udp;

#define NET_FRAME_HDR     4    /* length prefix */
#define NET_RPC_HDR       9    /* kind byte + request id, inside the frame */
#define NET_HANDSHAKE_MAX 1024 /* bytes a handshake frame may take */
#define NET_NAME_MAX      256  /* peer name buffer, with its NUL */

/* Default max_frame: the largest key and value plus room for headers. */
#define NET_MAX_FRAME_DEFAULT  (RK_MAX_VALUE + RK_MAX_KEY + 64u * 1024u)
#define NET_MAX_QUEUED_DEFAULT (64u * 1024u * 1024u)

enum net_rpc_kind {
    NET_RPC_REQUEST = 1,
    NET_RPC_RESPONSE = 2,
};

/* Counters; every object keeps its own. frames_out / writes is the batching
 * factor. */
struct net_stats {
    uint64_t conns_accepted; /* server: connections accepted */
    uint64_t conns_opened;   /* peers: connections that finished connect */
    uint64_t conns_failed;   /* peers: connect/resolve/handshake failures */
    uint64_t conns_closed;
    uint64_t frames_in, frames_out;
    uint64_t bytes_in, bytes_out; /* including headers */
    uint64_t writes;              /* uv_write calls */
    uint64_t handshake_failed;    /* refused or timed-out handshakes */
    uint64_t oversize;            /* frames over max_frame (conn closed) */
    uint64_t proto_errors;        /* malformed RPC frames (conn closed) */
    uint64_t overloaded;          /* sends refused with RK_EOVERLOADED */
    uint64_t read_pauses;         /* back-pressure read stops */
    uint64_t rpc_sent, rpc_ok, rpc_timeout, rpc_failed;
    uint64_t rpc_unmatched;  /* responses for no pending request (late) */
    uint64_t udp_dropped;    /* UDP sends refused (queue full) or failed */
    uint64_t frame_timeouts; /* raw: closed idle in mid-request */
    uint64_t budget_waits;   /* raw: reads paused for the input budget */
};

/* ---- frames (pure helpers, also used by the fuzz target) ---------------- */

/* Looks for one whole frame at the start of buf[0..len). Returns 1 and sets
 * *out (the frame's body, borrowing buf) and *consumed (header + body) if
 * one is there; 0 if more bytes are needed; RK_ETOOLARGE if the announced
 * length is over max_frame. */
int net_frame_next(struct rk_slice *out,
                   size_t *consumed,
                   const uint8_t *buf,
                   size_t len,
                   size_t max_frame);

/* Splits an RPC frame body into kind, id and payload (borrowing frame).
 * Returns 0, or RK_EPROTO if shorter than NET_RPC_HDR or of unknown kind. */
int net_rpc_parse(uint8_t *kind,
                  uint64_t *id,
                  struct rk_slice *payload,
                  struct rk_slice frame);

/* ---- addresses ---------------------------------------------------------- */

/* Parses a numeric "a.b.c.d:port" or "[v6]:port" into out. Returns 0 or
 * -EINVAL (also for host names: those are resolved by net_peers only). */
int net_addr_parse(struct sockaddr_storage *out, const char *host_port);

/* Formats sa as "a.b.c.d:port" / "[v6]:port" into out[0..cap).
 * Returns 0, -EINVAL (unknown family) or -ENOSPC. */
int net_addr_format(char *out, size_t cap, const struct sockaddr *sa);

/* ---- handshake hook ----------------------------------------------------- */

struct net_handshake {
    /* Writes this side's next handshake frame into out[0..cap) (cap is
     * NET_HANDSHAKE_MAX) and sets *out_len. to is the "host:port" the
     * connecting side dialed (net_peers' key), NULL on the accepting side;
     * peer is the frame last received (empty for the connecting side's
     * first). Nonzero refuses the connection. */
    int (*make)(void *arg,
                const char *to,
                struct rk_slice peer,
                uint8_t *out,
                size_t cap,
                size_t *out_len);
    /* Checks the frame received after this side's frame sent (as make
     * wrote it). to as for make. On success writes the peer's name
     * (NUL-terminated) into name[0..cap) and returns 0; anything else
     * refuses the connection. */
    int (*check)(void *arg,
                 const char *to,
                 struct rk_slice got,
                 struct rk_slice sent,
                 char *name,
                 size_t name_cap);
    void *arg;
};

/* ---- TLS refusals ---------------------------------------------------------
 */

/* Why a TLS connection refused its peer (net_server_opts.on_tls_fail,
 * net_peers_opts.on_tls_fail): its handshake failed, or, on an internode
 * connection, the name the peer gave in the handshake hook is not one its
 * certificate carries. */
enum net_tls_fail {
    NET_TLS_FAIL_OTHER = 0,
    NET_TLS_FAIL_PLAINTEXT,     /* the peer does not speak TLS */
    NET_TLS_FAIL_UNTRUSTED,     /* its certificate is not signed by the CA */
    NET_TLS_FAIL_EXPIRED,       /* its certificate has expired */
    NET_TLS_FAIL_NOT_YET_VALID, /* its certificate is not valid yet */
    NET_TLS_FAIL_NO_CERT,       /* it sent no certificate (mutual TLS) */
    NET_TLS_FAIL_NAME,          /* its certificate does not name it */
    NET_TLS_FAIL_PEER,          /* it refused ours (a TLS alert) */
    NET_TLS_FAIL_CLOSED,        /* it closed during the TLS handshake */
    NET_TLS_FAIL_TIMEOUT,       /* the TLS handshake did not finish in time */
    NET_TLS_FAIL_COUNT
};

/* The reason's metric label: "other", "plaintext", "wrong_ca", "expired",
 * "not_yet_valid", "no_cert", "name_mismatch", "peer_refused", "closed",
 * "timeout". Static strings. */
const char *net_tls_fail_name(enum net_tls_fail f);

/* A TLS refusal on a connection (peer: its "ip:port", or the "host:port"
 * dialed; why: one line; both live for the call). */
typedef void (*net_tls_fail_cb)(void *arg,
                                const char *peer,
                                enum net_tls_fail reason,
                                const char *why);

/* ---- input budget (raw-stream servers) ---------------------------------- */

/* Bytes of input buffer every raw-stream connection may hold without
 * charging a budget, and the least it reads at once. 8 KiB: 5,000
 * connections each holding part of a request keep 40 MB outside the
 * budget (with their other state, under 100 MB). */
#define NET_INPUT_BASE (8u * 1024u)

/* One bound on the input buffers of every connection of the servers that
 * share it (their growth past NET_INPUT_BASE each). Loop thread only. */
typedef struct net_budget net_budget;

/* max: bytes (at least NET_INPUT_BASE). Returns 0, -EINVAL or -ENOMEM. */
int net_budget_new(net_budget **out, size_t max);
/* Frees b; every server using it must be freed first. NULL: no-op. */
void net_budget_free(net_budget *b);
/* Bytes charged now; times a connection had to wait for the budget. */
size_t net_budget_used(const net_budget *b);
uint64_t net_budget_waits(const net_budget *b);

/* ---- server and its connections ----------------------------------------- */

/* What a raw-stream server hands its protocol handler (net.h's top). */
struct net_input {
    uint8_t *p;      /* bytes received and not consumed, in order */
    size_t len;      /* how many; the handler may lower it to drop bytes
                        it skipped (moving the rest down itself) */
    size_t cap;      /* the most this connection may hold */
    size_t consumed; /* out: bytes of whole requests done, from p */
    size_t need;     /* out: bytes the request being read needs in all,
                        from p + consumed (0: not known yet) */
    bool eof;        /* the peer shut its side down: nothing more comes */
};

/* Bytes may be consumed on c (some arrived, the peer half-closed, or the
 * handler asked: net_conn_input_again). Returning nonzero closes c at once
 * with that code; anything else sets in->consumed and in->need. */
typedef int (*net_input_cb)(void *arg, net_conn *c, struct net_input *in);
/* Output of c was written (all of it, or one write finished). */
typedef void (*net_sent_cb)(void *arg, net_conn *c);

/* RPC servers: the request payloads of whole frames that arrived on c and
 * that on_frame will be given, in order -- at most NET_PEEK_MAX -- shown
 * before their turn (the engine keeps about half that many ahead of
 * on_frame): a look ahead, to start what they will need (a prefetch). The
 * payloads stay on_frame's: the peek neither keeps nor answers them, and
 * may see a frame again. */
#define NET_PEEK_MAX 32
typedef void (*net_peek_cb)(void *arg,
                            net_conn *c,
                            const struct rk_slice *payloads,
                            size_t n);

/* A connection passed the handshake (or was accepted, without one). */
typedef void (*net_accept_cb)(void *arg, net_conn *c);
/* A frame arrived on c. Raw servers: id is 0 and frame the whole body. RPC
 * servers: a request; id is its request id (answer with net_conn_reply) and
 * frame its payload. Returning nonzero closes c with that code. */
typedef int (*net_frame_cb)(void *arg,
                            net_conn *c,
                            uint64_t id,
                            struct rk_slice frame);
/* c (previously passed to net_accept_cb) is closed: err is why (0 for a
 * clean close by either side, RK_ETOOLARGE, RK_EPROTO, -errno, ...). c's
 * memory lives on while references are held (net_conn_ref). */
typedef void (*net_conn_close_cb)(void *arg, net_conn *c, int err);

struct net_server_opts {
    const char *host; /* numeric listen address, e.g. "127.0.0.1", "::" */
    uint16_t port;    /* 0: an ephemeral port (see net_server_port) */
    size_t max_frame;
    size_t max_queued;
    uint32_t handshake_timeout_ms;  /* with hs: close if not done by then;
                                       also bounds a graceful close's drain */
    bool rpc;                       /* frames carry the RPC header */
    const struct net_handshake *hs; /* NULL: none; copied */
    net_accept_cb on_accept;        /* may be NULL */
    net_frame_cb on_frame;          /* required */
    net_conn_close_cb on_close;     /* may be NULL */
    void *arg;
    bool no_batching; /* one write per frame: for measurements only */
    /* Raw-stream mode (on_input set; then on_frame, rpc and hs unused): */
    net_input_cb on_input;
    net_sent_cb on_sent;         /* may be NULL */
    size_t input_cap;            /* per connection; 0: max_frame */
    uint32_t frame_timeout_ms;   /* part of a request, no byte: close; 0 off */
    bool frame_deadline;         /* frame_timeout_ms counts from the request's
                                    first byte held, not from the last */
    size_t max_requests;         /* in flight: stop reading; 0: no bound */
    net_budget *budget;          /* NULL: none; must outlive the server */
    struct net_tls *tls;         /* speak TLS with this context (net/tls.h;
                                    the server takes a reference); NULL:
                                    plaintext. With hs, the handshake hook
                                    runs inside TLS, and the name check
                                    returns must be one the peer's
                                    certificate carries (mutual TLS: a
                                    context made with verify_peer) */
    net_tls_fail_cb on_tls_fail; /* a TLS refusal; may be NULL */
    net_peek_cb on_peek;         /* rpc only; may be NULL */
};

#define NET_SERVER_OPTS_INIT                                                 \
    {                                                                        \
        "127.0.0.1", 0, NET_MAX_FRAME_DEFAULT, NET_MAX_QUEUED_DEFAULT, 5000, \
            false, NULL, NULL, NULL, NULL, NULL, false, NULL, NULL, 0, 0,    \
            false, 0, NULL, NULL, NULL, NULL                                 \
    }

/* Binds and listens. Returns 0, -errno (e.g. -EADDRINUSE), -EINVAL (bad
 * options: no on_frame nor on_input) or -ENOMEM. On failure *out is untouched;
 * libuv handles already made are closed and freed by the next loop run. */
int net_server_new(net_server **out,
                   uv_loop_t *loop,
                   const struct net_server_opts *opts);

/* The bound port (useful with port 0). */
int net_server_port(const net_server *s);

/* Handshakes from now on use tls (a reference is taken; the server's
 * previous one is dropped); live connections keep theirs. Returns 0, or
 * -EINVAL for a server made without TLS or tls NULL. */
int net_server_tls_set(net_server *s, struct net_tls *tls);

/* Stops listening and closes every connection (their on_close run with
 * RK_ECLOSED). s is freed, and done(arg) called, once every handle is
 * closed and every connection reference dropped. s NULL: no-op. */
void net_server_close(net_server *s, void (*done)(void *arg), void *arg);

void net_server_stats(const net_server *s, struct net_stats *out);

/* Raw-stream servers, shutdown's first half: stops listening and reading;
 * each connection closes once its requests are answered and written
 * (net_conn_finish). net_server_close ends what is left. NULL: no-op. */
void net_server_drain(net_server *s);

/* ---- raw-stream connections ---- */

/* Queues bytes (copied) to go out at the end of the turn. Returns 0,
 * RK_ECLOSED or -ENOMEM. Never refuses for a full queue: the handler
 * bounds its output by pausing (net_conn_read_pause). */
int net_conn_write(net_conn *c, const void *p, size_t len);

/* A request of c is in flight / is answered (its reply queued). c closes
 * while finishing only once none is; max_requests pauses reading. */
void net_conn_request_begin(net_conn *c);
void net_conn_request_end(net_conn *c);

/* No more input is delivered; c closes once every request is answered
 * and the output written (QUIT, a protocol error after its reply). */
void net_conn_finish(net_conn *c);

/* Runs on_input again on what c holds (the handler can take more now). */
void net_conn_input_again(net_conn *c);

/* The most c may hold (a small frame before authentication, say). The
 * engine never reads past it; a full buffer without a whole request
 * closes c with RK_ETOOLARGE. */
void net_conn_input_cap_set(net_conn *c, size_t cap);

/* Queues one frame (raw servers). Returns 0, RK_EOVERLOADED (queue full),
 * RK_ETOOLARGE (over max_frame), RK_ECLOSED or -ENOMEM. */
int net_conn_send(net_conn *c, struct rk_slice frame);

/* Queues the response to request id (RPC servers); same returns. */
int net_conn_reply(net_conn *c, uint64_t id, struct rk_slice payload);

/* Closes c. err 0: graceful, what is queued is written first, then the
 * write side is shut down (for at most handshake_timeout_ms if the peer does
 * not read); otherwise at once. on_close reports err. */
void net_conn_close(net_conn *c, int err);

/* Keep c's memory alive past its close (e.g. across asynchronous work that
 * will reply); every ref needs an unref. Sends on a closed c fail with
 * RK_ECLOSED. */
void net_conn_ref(net_conn *c);
void net_conn_unref(net_conn *c);

void net_conn_set_data(net_conn *c, void *data);
void *net_conn_data(const net_conn *c);

/* The name the handshake established ("" without one); on raw-stream
 * servers the remote "ip:port" taken at accept ("?" if unknown). Lives
 * with c. */
const char *net_conn_peer_name(const net_conn *c);

/* The remote address as "ip:port". Returns 0 or -errno. */
int net_conn_peer_addr(const net_conn *c, char *out, size_t cap);

/* Stop / restart delivering frames from c (admission control). Frames
 * already buffered are held until resume. */
void net_conn_read_pause(net_conn *c);
void net_conn_read_resume(net_conn *c);

/* Bytes queued on c and not yet written. */
size_t net_conn_queued(const net_conn *c);

bool net_conn_is_open(const net_conn *c);

/* ---- peers: outbound RPC ------------------------------------------------ */

/* The end of one request: status 0 and the response payload, RK_ETIMEOUT,
 * RK_ECLOSED (net_peers_close / net_peers_drop), or the connection's error
 * (-ECONNREFUSED, -ECONNRESET, RK_EAUTH...). Called exactly once. */
typedef void (*net_rpc_cb)(void *arg, int status, struct rk_slice resp);

struct net_peers_opts {
    size_t max_frame;
    size_t max_queued;              /* per connection */
    uint32_t connect_timeout_ms;    /* resolve + connect + handshake; also
                                       bounds a graceful close's drain */
    uint32_t backoff_min_ms;        /* after a failed connect ... */
    uint32_t backoff_max_ms;        /* ... doubling up to this */
    const struct net_handshake *hs; /* NULL: none; copied */
    bool no_batching;    /* one write per frame: for measurements only */
    struct net_tls *tls; /* connect in TLS with this client context
                            (net/tls.h; a reference is taken): the peer's
                            certificate is verified against its CA, ours
                            presented, and the name the hook's check
                            returns must be one the peer's certificate
                            carries; NULL: plaintext */
    net_tls_fail_cb on_tls_fail; /* a TLS refusal (peer: the "host:port"
                                    dialed); may be NULL */
    void *arg;                   /* on_tls_fail's */
    const char *bind_ip; /* the source address of every connection (an IP
                            literal; the port the kernel's): the node's
                            listen address, so a peer, its logs and a
                            firewall see the node's own; NULL or a
                            wildcard: the kernel's choice */
};

#define NET_PEERS_OPTS_INIT                                                   \
    {                                                                         \
        NET_MAX_FRAME_DEFAULT, NET_MAX_QUEUED_DEFAULT, 2000, 100, 5000, NULL, \
            false, NULL, NULL, NULL, NULL                                     \
    }

int net_peers_new(net_peers **out,
                  uv_loop_t *loop,
                  const struct net_peers_opts *opts);

/* Fails every pending request with RK_ECLOSED, closes every connection;
 * frees p and calls done(arg) when all is closed. NULL: no-op. */
void net_peers_close(net_peers *p, void (*done)(void *arg), void *arg);

/* Connections opened from now on use tls (a reference is taken, the
 * previous one dropped); open ones keep theirs. Returns 0, or -EINVAL for
 * peers made without TLS or tls NULL. */
int net_peers_tls_set(net_peers *p, struct net_tls *tls);

/* Sends payload as a request to host_port ("10.0.0.1:7001", "[::1]:7001",
 * "node3:7001"), connecting (resolving a name) on demand and reusing the
 * peer's connection afterwards. cb runs exactly once, never from inside this
 * call. Returns 0 (cb will run) or, without calling cb: -EINVAL (bad
 * address), RK_EUNAVAILABLE (the last connect failed and the peer is in its
 * backoff window), RK_EOVERLOADED (queue full), RK_ETOOLARGE, RK_ECLOSED
 * (p is closing), -ENOMEM. timeout_ms counts from now, connect included. */
int net_peers_request(net_peers *p,
                      const char *host_port,
                      struct rk_slice payload,
                      uint32_t timeout_ms,
                      net_rpc_cb cb,
                      void *arg);

/* As net_peers_request, except that when host_port has been silent with
 * a request to answer for max_quiet_ms or more (net_peers_quiet_ms),
 * nothing is sent and RK_EUNAVAILABLE is returned, as while a peer backs
 * off: its earlier requests are timing out, and this one would. 0: no
 * limit. */
int net_peers_request_unless_quiet(net_peers *p,
                                   const char *host_port,
                                   struct rk_slice payload,
                                   uint32_t timeout_ms,
                                   uint32_t max_quiet_ms,
                                   net_rpc_cb cb,
                                   void *arg);

/* Closes the connection to host_port, failing its pending requests with
 * RK_ECLOSED, and forgets its backoff and that it was unreachable. Unknown
 * peer: no-op. */
void net_peers_drop(net_peers *p, const char *host_port);

enum net_peer_state {
    NET_PEER_NONE = 0,   /* no connection (never, or closed) */
    NET_PEER_CONNECTING, /* resolving, connecting or in the handshake */
    NET_PEER_READY,      /* connected and authenticated */
    NET_PEER_BACKOFF,    /* the last connect failed; waiting */
};

enum net_peer_state net_peers_state(net_peers *p, const char *host_port);

/* False when the last attempt to connect to host_port was refused, or its
 * last connection was reset or closed by the other end (a process that
 * died: its port refuses at once), until a connection to it is ready
 * again (or net_peers_drop); true otherwise, also for an unknown peer and
 * for one connected but not answering (net_peers_quiet_ms) or whose
 * connect timed out. While false and past its backoff window, this call
 * starts a connection attempt in the background (no request waits on it),
 * so a peer that comes back is seen reachable without a request risked on
 * it. */
bool net_peers_reachable(net_peers *p, const char *host_port);

/* host_port is back (gossip says so): forgets its backoff and that it was
 * unreachable, keeping its connection if it has one; the next request
 * connects at once, and a refusal makes it unreachable again. Unknown
 * peer: no-op. */
void net_peers_retry(net_peers *p, const char *host_port);

/* Opens a connection to host_port now (its handshake included), unless it
 * has one or backs off from it: gossip says the peer is UP, and the first
 * request to it then need not wait for the connect. No request waits on
 * it; a refusal makes the peer unreachable, as a request's would. 0 (one
 * is open or opening), RK_EUNAVAILABLE while it backs off (as a request
 * would be answered), or an error starting it. */
int net_peers_connect(net_peers *p, const char *host_port);

/* How long (ms, loop clock) host_port has been silent with a request to
 * answer: since the first request sent after its last response, or after
 * its connection became ready. 0: it has answered everything sent (or is
 * unknown). A request that times out leaves the silence running, so a
 * frozen peer stays silent until it answers something, however late, or
 * its connection closes. */
uint64_t net_peers_quiet_ms(net_peers *p, const char *host_port);

/* Requests awaiting an answer, all peers. */
size_t net_peers_pending(const net_peers *p);

void net_peers_stats(const net_peers *p, struct net_stats *out);

/* ---- UDP (gossip) ------------------------------------------------------- */

/* One datagram from `from`; pkt borrows the receive buffer. arrived_ms:
 * the wall clock (Unix ms) at which the datagram reached the host, as the
 * kernel stamped it (SIOCGSTAMP), not when the loop came to read it: a
 * datagram that waited in the socket while the process was stopped or
 * its loop busy arrived earlier than it is read. 0: not known. */
typedef void (*net_udp_recv_cb)(void *arg,
                                struct rk_slice pkt,
                                const struct sockaddr *from,
                                uint64_t arrived_ms);

struct net_udp_opts {
    const char *host;  /* numeric bind address */
    uint16_t port;     /* 0: ephemeral */
    size_t max_queued; /* bytes of datagrams waiting for the socket */
    net_udp_recv_cb on_recv;
    void *arg;
};

#define NET_UDP_OPTS_INIT                              \
    {                                                  \
        "127.0.0.1", 0, 4u * 1024u * 1024u, NULL, NULL \
    }

#define NET_UDP_MAX 65507 /* largest datagram payload */

/* Binds a UDP socket and starts receiving. Returns 0, -EINVAL, -errno
 * (-EADDRINUSE) or -ENOMEM; on failure as net_server_new. */
int net_udp_new(net_udp **out,
                uv_loop_t *loop,
                const struct net_udp_opts *opts);
int net_udp_port(const net_udp *u);

/* Sends one datagram (copied if it cannot go at once). Returns 0,
 * RK_EOVERLOADED, RK_ETOOLARGE (over NET_UDP_MAX), RK_ECLOSED or -errno.
 * Datagrams may be lost; no callback. */
int net_udp_send(net_udp *u, const struct sockaddr *to, struct rk_slice pkt);

/* net_udp_send to a numeric "ip:port"; -EINVAL for anything else. */
int net_udp_send_to(net_udp *u, const char *host_port, struct rk_slice pkt);

void net_udp_close(net_udp *u, void (*done)(void *arg), void *arg);
void net_udp_stats(const net_udp *u, struct net_stats *out);

#endif
