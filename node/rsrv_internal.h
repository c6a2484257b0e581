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

#include "common/rk.h"
#include "net/net.h"
#include "node/auth_delay.h"
#include "node/config.h"
#include "node/coord_node.h"
#include "node/node.h"
#include "node/users.h"
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
    net_conn *nc; /* net/'s connection (the engine's); held: refs */
    struct rsrv *rs;
    node *n;
    resp_parser *p;      /* parses nc's input in place */
    struct resp_out out; /* the head's reply, encoded here, then queued */
    struct rslot *head, *tail;
    bool admitted; /* counted in n->clients.open (clients.c) */
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
    enum coord_cl cl;
    bool closing;        /* nc closed */
    bool authed;         /* role != NODE_ROLE_NONE */
    enum node_role role; /* node/users.h */
    bool paused;         /* net_conn_read_pause: full, or a command held */
    bool stopped;        /* no more requests: QUIT or protocol error */
    bool in_multi;       /* after a refused MULTI (resp_multi_filter) */
    bool processing;     /* inside on_input */
    const char *peer;    /* "ip:port", lives with nc */
    /* an AUTH whose answer waits (auth_delay.h): its slot, and whether
     * the user and password were right; nothing more is parsed meanwhile */
    struct node_auth_wait auth_wait;
    struct rslot *auth_slot;
    bool auth_ok;
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

enum slot_kind {
    K_DONE,
    K_GET,
    K_SET,
    K_DEL,
    K_EXISTS,
    K_MGET,
    K_MSET,
    K_TTL,
    K_SCAN
};

struct rslot {
    struct rconn *c;
    struct rslot *next;
    struct resp_out out; /* reply, when completed behind the head */
    enum slot_kind kind;
    bool done;
    bool counted;     /* holds a unit of c->inflight and n->clients.inflight */
    uint32_t pending; /* sub-requests outstanding */
    int err;          /* first error (not RK_ENOTFOUND) */
    uint32_t acks, need;
    int cause; /* coord_result.cause */
    enum coord_cl cl;
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
/* Something that held c back is gone: run what it buffered or held back,
 * unless it is still full. */
void node__rsrv_conn_wake(struct rconn *c);
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
/* Start a SCAN in a new slot (coord_scan); returns as
 * node__rsrv_exec_data (1: the connection has max_pipeline in flight). */
int node__rsrv_exec_scan(struct rconn *c, const struct resp_request *q);

#endif
