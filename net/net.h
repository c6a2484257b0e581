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
 * for these two slots.
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
    uint64_t rpc_unmatched; /* responses for no pending request (late) */
    uint64_t udp_dropped;   /* UDP sends refused (queue full) or failed */
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

/* ---- server and its connections ----------------------------------------- */

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
};

#define NET_SERVER_OPTS_INIT                                                 \
    {                                                                        \
        "127.0.0.1", 0, NET_MAX_FRAME_DEFAULT, NET_MAX_QUEUED_DEFAULT, 5000, \
            false, NULL, NULL, NULL, NULL, NULL, false                       \
    }

/* Binds and listens. Returns 0, -errno (e.g. -EADDRINUSE), -EINVAL (bad
 * options) or -ENOMEM. On failure *out is untouched; libuv handles already
 * made are closed and freed by the next loop run. */
int net_server_new(net_server **out,
                   uv_loop_t *loop,
                   const struct net_server_opts *opts);

/* The bound port (useful with port 0). */
int net_server_port(const net_server *s);

/* Stops listening and closes every connection (their on_close run with
 * RK_ECLOSED). s is freed, and done(arg) called, once every handle is
 * closed and every connection reference dropped. s NULL: no-op. */
void net_server_close(net_server *s, void (*done)(void *arg), void *arg);

void net_server_stats(const net_server *s, struct net_stats *out);

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

/* The name the handshake established ("" without one). Lives with c. */
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
    bool no_batching; /* one write per frame: for measurements only */
};

#define NET_PEERS_OPTS_INIT                                                   \
    {                                                                         \
        NET_MAX_FRAME_DEFAULT, NET_MAX_QUEUED_DEFAULT, 2000, 100, 5000, NULL, \
            false                                                             \
    }

int net_peers_new(net_peers **out,
                  uv_loop_t *loop,
                  const struct net_peers_opts *opts);

/* Fails every pending request with RK_ECLOSED, closes every connection;
 * frees p and calls done(arg) when all is closed. NULL: no-op. */
void net_peers_close(net_peers *p, void (*done)(void *arg), void *arg);

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
 * RK_ECLOSED, and forgets its backoff. Unknown peer: no-op. */
void net_peers_drop(net_peers *p, const char *host_port);

enum net_peer_state {
    NET_PEER_NONE = 0,   /* no connection (never, or closed) */
    NET_PEER_CONNECTING, /* resolving, connecting or in the handshake */
    NET_PEER_READY,      /* connected and authenticated */
    NET_PEER_BACKOFF,    /* the last connect failed; waiting */
};

enum net_peer_state net_peers_state(net_peers *p, const char *host_port);

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

/* One datagram from `from`; pkt borrows the receive buffer. */
typedef void (*net_udp_recv_cb)(void *arg,
                                struct rk_slice pkt,
                                const struct sockaddr *from);

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
