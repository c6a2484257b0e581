/*
 * net_internal.h - what the files of net/ share: the read buffer (pure, so
 * it can be fuzzed), the connection and the "base" every connection owner
 * (server, peers) embeds: options, stats, and the end-of-turn flusher.
 */
#ifndef RK_NET_INTERNAL_H
#define RK_NET_INTERNAL_H

#include "net/net.h"

/* ---- read buffer: bytes from the socket in, whole frames out ------------ */

struct net__rbuf {
    uint8_t *p;
    size_t len; /* bytes held */
    size_t off; /* bytes already handed out as frames */
    size_t cap;
    size_t max_frame;
    bool mapped; /* p is pages of its own (NET__RBUF_MAP) */
};

/* Read buffers of this size and more (in practice every one: a raw
 * connection's starts at NET_INPUT_BASE, a framed one's at NET__READ_CHUNK;
 * only a raw server's with an input_cap below NET_INPUT_BASE, none in
 * ringkvd, stays on the heap) are pages of their own: mmap, grown with
 * mremap (no copy), munmap gives them back. On the heap, 5,000 connections
 * each holding part of a large request left the heap full of the freed
 * smaller copies and base buffers: peak RSS 107 MiB past the 256 MiB input
 * budget, 74 MiB mapped (tools/bench/conns.py --conns 5000 --budget-mb 256,
 * before and after; docs/performance.md, "Memory under many clients").
 * Output chunks stay on the heap. */
#define NET__RBUF_MAP NET_INPUT_BASE

#define NET__READ_MIN   (16u * 1024u)
#define NET__READ_CHUNK (64u * 1024u)
#define NET__RBUF_KEEP  (256u * 1024u) /* shrink above this when empty */

/* Space to read into: all the free space, at least NET__READ_MIN bytes or
 * what the current frame still needs (growing geometrically, by at least
 * NET__READ_CHUNK). Returns 0 or -ENOMEM. */
int net__rbuf_reserve(struct net__rbuf *r, uint8_t **p, size_t *len);

/* n bytes were written at the reserved space. */
void net__rbuf_commit(struct net__rbuf *r, size_t n);

/* Next whole frame (1, *out borrows r until the next reserve), 0 when more
 * bytes are needed, RK_ETOOLARGE. */
int net__rbuf_next(struct net__rbuf *r, struct rk_slice *out);

/* Drops consumed bytes, shrinks a large idle buffer. */
void net__rbuf_compact(struct net__rbuf *r);

void net__rbuf_free(struct net__rbuf *r);

/* Raw-stream input. The capacity r should have for the next read: room
 * for at least NET_INPUT_BASE more bytes or, towards need (the bytes the
 * current request needs from the unconsumed start; 0: unknown), at most
 * as many as are held (so never past twice what arrived), never room for
 * more than limit held. r->cap when no growth is needed. */
size_t
net__rbuf_raw_target(const struct net__rbuf *r, size_t need, size_t limit);

/* Moves the unconsumed bytes to the front, grows r to cap if it is
 * smaller, and gives the free space, never room for more than limit held
 * (*len 0: none). Returns 0 or -ENOMEM (r unchanged but compacted). */
int net__rbuf_reserve_cap(
    struct net__rbuf *r, size_t cap, size_t limit, uint8_t **p, size_t *len);

/* Splits "host:port" / "[v6]:port" into host (NUL-terminated, without
 * brackets) and port (1..65535). Returns 0 or -EINVAL. */
int net__split_host_port(char *host,
                         size_t cap,
                         uint16_t *port,
                         const char *host_port);

/* ---- TLS sessions (tls.c) ------------------------------------------------ */

struct net_tls;
struct net__tls;

/* One TLS session over two memory BIOs (tls.c's top): no socket, no
 * blocking. ctx's role (server or client) decides the session's; a client
 * checks the server's certificate against verify_name (a DNS name, or an
 * address against its IP SANs; NULL or "": the CA's signature only).
 * Returns 0 or -ENOMEM. */
int net__tls_new(struct net__tls **out,
                 struct net_tls *ctx,
                 const char *verify_name);
void net__tls_free(struct net__tls *s); /* NULL: no-op */

/* Ciphertext from the peer (copied). Returns 0 or -ENOMEM. */
int net__tls_feed(struct net__tls *s, const uint8_t *p, size_t len);
/* Ciphertext fed and not yet taken in by the session. */
size_t net__tls_in_pending(const struct net__tls *s);
/* Fed bytes or decrypted plaintext wait to be read. */
bool net__tls_has_input(const struct net__tls *s);

/* Advances the handshake with what was fed: 1 done, 0 more bytes are
 * needed (send net__tls_out_take's first), RK_EAUTH refused (a bad or
 * untrusted certificate, not TLS at all: net__tls_why says which; an alert
 * for the peer may wait in the output). */
int net__tls_handshake(struct net__tls *s);
bool net__tls_done(const struct net__tls *s);

/* Plaintext into p[0..cap): 0 with *n bytes (0: more ciphertext needed),
 * 1 the peer closed the session (close_notify), RK_EAUTH a damaged
 * record. */
int net__tls_read(struct net__tls *s, uint8_t *p, size_t cap, size_t *n);
/* Encrypts p[0..len) into the output. Returns 0, RK_EAUTH (session
 * failed) or -ENOMEM. */
int net__tls_write(struct net__tls *s, const uint8_t *p, size_t len);
/* Queues close_notify (after a finished handshake). */
void net__tls_shutdown(struct net__tls *s);

/* Ciphertext waiting for the socket, and taking up to cap of it. */
size_t net__tls_out_pending(const struct net__tls *s);
size_t net__tls_out_take(struct net__tls *s, uint8_t *p, size_t cap);

/* Why the handshake (or a read) failed, one line in out, and its kind: a
 * certificate the session refused says whose, why and, for a date, since
 * when ("certificate /CN=n4: certificate has expired (notAfter Jan  2
 * 00:00:00 2020 GMT)"). */
enum net_tls_fail net__tls_why(const struct net__tls *s, char *out, size_t cap);

/* Whether the peer's certificate (verified by the handshake) names name:
 * an address among its IP SANs, a host name among its DNS SANs (or its CN
 * when it has none). If not, why says so (one line in why[0..cap)). */
bool net__tls_peer_is(const struct net__tls *s,
                      const char *name,
                      char *why,
                      size_t cap);

/* Ciphertext a TLS connection holds before it stops reading its socket
 * (the session's input BIO; OpenSSL takes what a record needs from it into
 * its own record buffer, so one record's worth is enough to go on);
 * plaintext is bounded by the input cap. Neither is charged to the input
 * budget: a TLS connection may hold this and a record buffer (some 17 KiB,
 * given back while idle) more than a plaintext one. */
#define NET__TLS_IN_MAX (16u * 1024u)

/* ---- connections -------------------------------------------------------- */

struct net__chunk {
    uint8_t *p;
    size_t len;
    size_t cap;
};

#define NET__CHUNK_SIZE (64u * 1024u)

enum net__state {
    NET__RESOLVING,
    NET__CONNECTING,
    NET__HANDSHAKE, /* connected, handshake not finished */
    NET__READY,
    NET__CLOSING,
};

struct net__base;

struct net_conn {
    uv_tcp_t tcp;
    uv_timer_t timer; /* connect / handshake deadline */
    uv_getaddrinfo_t gai;
    uv_connect_t connect;
    uv_shutdown_t shutdown;
    struct net__base *base;
    enum net__state state;
    bool outbound;
    bool hold;        /* outbound: keep queued frames until handshake sent */
    bool announced;   /* server: on_accept was called */
    bool reading;     /* uv_read_start active */
    bool user_paused; /* net_conn_read_pause */
    bool bp_paused;   /* back-pressure pause */
    bool in_parse;
    bool dirty;
    bool gai_busy;
    bool tcp_inited;
    bool handles_closing;
    int handles_open; /* tcp, timer: freed when 0 (and refs, gai) */
    int refs;
    int close_err;
    struct net__rbuf rbuf;
    struct net__chunk *chunks; /* waiting to be written */
    size_t nchunks, chunks_cap;
    struct net__chunk spare;        /* a written block kept for reuse */
    size_t waiting;                 /* bytes in chunks */
    size_t inflight;                /* bytes in uv_write requests */
    struct net_conn *dprev, *dnext; /* base's dirty list */
    struct net_conn *prev, *next;   /* base's list of all conns */
    void *data;                     /* user data (server) */
    void *owner;                    /* peers: the net__peer */
    const char *dialed;             /* peers: the "host:port" (peer's key) */
    /* raw-stream connections */
    bool eof;         /* the peer half-closed */
    bool finishing;   /* close once no request is in flight */
    bool no_input;    /* deliver no more input */
    bool budget_wait; /* on the budget's waiting list */
    bool parse_again; /* net_conn_input_again during on_input */
    size_t requests;  /* in flight (net_conn_request_begin) */
    size_t need;      /* bytes the request being read needs (on_input) */
    size_t input_cap;
    size_t charged;                 /* bytes charged to the budget */
    struct net_conn *bprev, *bnext; /* the budget's waiting list */
    struct net__tls *tls;           /* NULL: plaintext */
    bool tls_again; /* decrypt what the session holds at the flush */
    char name[NET_NAME_MAX];
    uint8_t hs_sent[NET_HANDSHAKE_MAX]; /* this side's last handshake frame */
    size_t hs_sent_len;
};

/* The owner's side of a connection. */
struct net__base {
    uv_loop_t *loop;
    uv_prepare_t prepare;
    uv_check_t check;
    uv_idle_t idle; /* active for a turn: the next poll must not block */
    bool flusher_active;
    bool idle_active;
    bool closing;
    int handles_open; /* prepare, check, idle and the owner's handles */
    size_t max_frame;
    size_t max_queued;
    uint64_t linger_ms; /* bound on a graceful close's drain */
    bool pause_on_bp;   /* server conns stop reading under back-pressure */
    bool no_batching;   /* write each frame as it is queued (measurements) */
    bool has_hs;
    struct net_handshake hs;
    struct net_conn *dirty; /* conns with frames waiting */
    struct net_conn *conns; /* every live conn */
    struct net_stats stats;
    /* raw-stream mode (on_input set) */
    int (*on_input)(struct net__base *b, net_conn *c, struct net_input *in);
    void (*on_sent)(struct net__base *b, net_conn *c);
    size_t input_cap;
    uint64_t frame_timeout_ms;
    bool frame_deadline; /* the frame timeout counts from the first byte */
    size_t max_requests;
    struct net_budget *budget;
    struct net_tls *tls; /* connections speak TLS with this context (its
                            role: the server's or the peers') */
    uint8_t *tls_rd;     /* ciphertext read buffer, NET__TLS_IN_MAX */
    /* c refused its peer (why: one line); may be NULL */
    void (*on_tls_fail)(struct net__base *b,
                        net_conn *c,
                        enum net_tls_fail reason,
                        const char *why);
    /* The whole frames[0..n) held on an established conn, to go to
     * on_frame after those before them (may be NULL: no look ahead). */
    void (*on_peek)(struct net__base *b,
                    net_conn *c,
                    const struct rk_slice *frames,
                    size_t n);
    /* A whole frame arrived on an established conn. Nonzero closes it. */
    int (*on_frame)(struct net__base *b, net_conn *c, struct rk_slice frame);
    /* c finished its handshake (or needs none). */
    void (*on_ready)(struct net__base *b, net_conn *c);
    /* c started closing (err as given); called once. */
    void (*on_closing)(struct net__base *b, net_conn *c, int err);
    /* c's handles are closed; it is freed after this unless referenced. */
    void (*on_closed)(struct net__base *b, net_conn *c, int err);
    /* The base has no more handles or conns (after net__base_close). */
    void (*on_released)(struct net__base *b);
};

int net__base_init(struct net__base *b, uv_loop_t *loop);
/* Closes the flusher handles; on_released runs when all is gone. */
void net__base_close(struct net__base *b);
/* Counts one of the owner's own handles closing (call from its close cb). */
void net__base_handle_closed(struct net__base *b);

/* A new conn (tcp initialised) linked into b. NULL on -ENOMEM / -errno in
 * *err. */
net_conn *net__conn_new(struct net__base *b, int *err);
/* Starts reading and the handshake on a connected conn. */
int net__conn_start(net_conn *c);
/* Queues a frame: hdr (may be NULL/0) then body. */
int net__conn_queue(net_conn *c,
                    const uint8_t *hdr,
                    size_t hdr_len,
                    struct rk_slice body);
void net__conn_close(net_conn *c, int err);
/* Arms c's deadline timer: close with RK_ETIMEOUT after ms. */
void net__conn_deadline(net_conn *c, uint64_t ms);
/* Frees c if nothing holds it any more. */
void net__conn_maybe_free(net_conn *c);
/* Starts or stops reading c as its state asks (a budget waking it). */
void net__conn_reading_update(net_conn *c);

/* ---- input budget (budget.c; raw-stream connections) -------------------- */

/* The largest capacity c's input buffer may have within its budget
 * (SIZE_MAX without one). */
size_t net__budget_cap_allowed(const net_conn *c);
/* c's buffer now has capacity cap: charge or refund the difference (a
 * refund wakes waiting connections). No budget: no-op. */
void net__budget_set(net_conn *c, size_t cap);
/* c waits for the budget (at the tail of its list); net__budget_unwait
 * takes it off (no-op if it is not waiting). */
void net__budget_wait(net_conn *c);
void net__budget_unwait(net_conn *c);

static inline void net__be32_put(uint8_t *p, uint32_t v)
{
    p[0] = (uint8_t)(v >> 24);
    p[1] = (uint8_t)(v >> 16);
    p[2] = (uint8_t)(v >> 8);
    p[3] = (uint8_t)v;
}

static inline void net__be64_put(uint8_t *p, uint64_t v)
{
    for (int i = 0; i < 8; i++)
        p[i] = (uint8_t)(v >> (56 - 8 * i));
}

#endif
