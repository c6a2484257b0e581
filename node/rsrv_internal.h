/*
 * rsrv_internal.h - what rsrv.c and resp_data_commands.c share and the rest
 * of node/ does not see: the connection and slot structs of the RESP
 * server, and the steps of a slot's life that both take. rsrv.h is what
 * the rest of node/ sees of the server.
 */
#ifndef NODE_RSRV_INTERNAL_H
#define NODE_RSRV_INTERNAL_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include <uv.h>

#include "node/node_internal.h"
#include "wire/resp.h"

#define RSRV_OUT_HIGH (4u * 1024u * 1024u)
/* Values one MGET may return in all: past it the MGET is answered
 * -TOO_LARGE (300 keys of one 16 MiB value would have asked for 4.8 GiB of
 * copies and as much reply from a 2.7 KB request). */
#define RSRV_MGET_MAX ((size_t)4 * RK_MAX_VALUE)
/* The reads one EXISTS / MGET / DEL keeps in flight: more are issued as
 * they answer, while the connection's meter is under RSRV_OUT_HIGH (one
 * at least). All at once, `EXISTS big big ...` (65,536 keys a request)
 * had the coordinator copy a local 16 MiB value per key within the call
 * (regression: multikey_reads_unbounded). Never more than max_inflight:
 * key_window() in resp_data_commands.c. */
#define RSRV_KEY_READS 64
#define RSRV_BUCKETS   256 /* key buckets for pipeline ordering */

struct rsrv;

struct rslot;

struct rconn {
    uv_tcp_t tcp;
    struct rsrv *rs;
    node *n;
    struct rconn *next, *prev;
    struct rconn *dirty_next;
    resp_parser *p;
    struct resp_out out;  /* replies not yet handed to the socket */
    struct resp_out wbuf; /* bytes uv_write is sending */
    struct rslot *head, *tail;
    bool admitted; /* counted in n->clients_open (clients.c) */
    uint32_t nslots;
    size_t queued; /* reply bytes of completed slots waiting behind head */
    /* values held for reads in flight: by the coordinator until it
     * answers (coord_get_metered), then MGET's copies until its reply */
    struct coord_meter meter;
    uint32_t inflight; /* slots waiting for the coordinator */
    uint32_t max_queued;
    /* pending reads / writes per key bucket, and the command held back
     * because it conflicts with one (its argv stays valid: no parser call
     * is made while it is held) */
    uint32_t rpend[RSRV_BUCKETS], wpend[RSRV_BUCKETS];
    bool held;
    struct resp_cmd hcmd;
    int refs;
    enum node_cl cl;
    bool on_dirty, closing, close_after_flush, reading, writing, authed;
    bool stopped;    /* no more requests: QUIT or protocol error */
    bool eof;        /* the client sent EOF: run what is buffered, then close */
    bool in_multi;   /* after a refused MULTI (resp_multi_filter) */
    bool processing; /* inside node__rsrv_conn_process */
    char peer[64];
};

/* One sub-request of a slot (one key). */
struct rsub {
    struct rslot *s;
    uint8_t bk;  /* key bucket (RSRV_BUCKETS) */
    bool rd, wr; /* registered as a pending read / write of bk */
    bool found;
    uint8_t *val; /* MGET: copy of the value */
    size_t vlen;
};

enum slot_kind { K_DONE, K_GET, K_SET, K_DEL, K_EXISTS, K_MGET, K_MSET, K_TTL };

struct rslot {
    struct rconn *c;
    struct rslot *next;
    struct resp_out out; /* reply, when completed behind the head */
    enum slot_kind kind;
    bool done;
    bool counted;     /* holds a unit of c->inflight and n->inflight */
    uint32_t pending; /* sub-requests outstanding */
    int err;          /* first error (not RK_ENOTFOUND) */
    uint32_t acks, need;
    int cause; /* coord_result.cause */
    enum node_cl cl;
    /* TTL / PTTL */
    bool pttl;
    uint64_t expiry; /* the value's, Unix ms; 0: none */
    /* SET */
    struct resp_set_opts set;
    uint64_t ttl_ms;
    bool expired;  /* EXAT/PXAT in the past: delete */
    uint8_t *copy; /* key (and value) bytes for the second phase */
    size_t klen, vlen;
    /* multi-key */
    size_t nsub;
    struct rsub *sub;
    struct rsub sub1;
    size_t mget_bytes; /* MGET: value bytes copied so far */
    uint8_t **keys;    /* EXISTS / MGET / DEL: key copies */
    size_t *klens;
    size_t next_key;   /* the next key to read */
    uint32_t reads;    /* its reads in flight */
    uint64_t deadline; /* its reads answer by then (coord_read_deadline) */
    /* MSET / DEL's deletes */
    size_t next_write; /* the next key to write */
    uint32_t writes;   /* its writes in flight */
    size_t *vlens;     /* MSET: keys[i] holds key and value past the first
                          window (the request's bytes are gone by then) */
    size_t wbytes;     /* SET / MSET: the keys and values it writes,
                          counted in c->meter until its reply */
};

/* ---- rsrv.c ---- */

/* A slot of `kind` at the tail of c's queue (from the server's pool),
 * holding a reference to c; NULL when out of memory. */
struct rslot *node__rsrv_slot_new(struct rconn *c, enum slot_kind kind);
/* Where the reply of s goes: the output when s is the head, else its own
 * buffer. */
struct resp_out *node__rsrv_slot_out(struct rslot *s);
/* Move completed slots at the head into the output, in order. */
void node__rsrv_conn_drain(struct rconn *c);
/* Close c once it was asked to close after its last reply and that is
 * written. */
void node__rsrv_conn_maybe_close(struct rconn *c);
/* Execute the commands buffered in the parser until it needs more bytes,
 * the connection is full, or it stops. */
void node__rsrv_conn_process(struct rconn *c);
/* Drop a reference; the last one frees c. */
void node__rsrv_conn_unref(struct rconn *c);

/* ---- resp_data_commands.c ---- */

/* The slot's reply is encoded: release its in-flight units and drain. */
void node__rsrv_slot_complete(struct rslot *s);
/* Start a data command in a new slot. Returns 0 (the slot completes
 * later, or has completed), 1 (held back: conflicts with a pending
 * command, or the connection has max_pipeline in flight; nothing done) or
 * -ENOMEM (nothing queued). */
int node__rsrv_exec_data(struct rconn *c, const struct resp_request *q);

#endif
