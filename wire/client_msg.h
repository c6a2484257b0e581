/*
 * client_msg.h - the native client protocol (port 7380): frames, requests,
 * responses and their msgpack codecs. Pure: no sockets, no clock, no globals.
 *
 * A frame is a 4-byte big-endian body length followed by a msgpack body. A
 * request body is a map with small integer keys (WIRE_CF_* below); a response
 * body is a map with its own keys (WIRE_CR_*). Every request carries a
 * client-chosen 64-bit id that its response echoes, so clients pipeline and
 * servers may answer out of order. docs/protocol.md is the prose spec; the
 * golden vectors in tests/unit/check_wire_client.c pin the bytes.
 *
 * Structs are plain data used both ways:
 *  - to encode, fill a struct (slices borrowed from the caller, `has` bits for
 *    the optional fields you set) and call *_encode, which appends one whole
 *    frame to a wire_cbuf;
 *  - to decode, call *_decode on one frame body; the struct then owns a copy
 *    of the body (every slice points into it) and the arrays, until
 *    *_clear. *_clear on a struct you filled yourself does nothing harmful
 *    (it frees only what a decode allocated).
 */
#ifndef WIRE_CLIENT_MSG_H
#define WIRE_CLIENT_MSG_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "common/rk.h"

/* Protocol version announced in HELLO. */
#define WIRE_CPROTO_VERSION 1

/* Limits every decoder enforces (the encoder too, so a client fails early). */
#define WIRE_CFRAME_HDR     4u                    /* length prefix bytes */
#define WIRE_CFRAME_MAX     (64u * 1024u * 1024u) /* max body bytes */
#define WIRE_CMGET_MAX      4096u                 /* keys in one MGET */
#define WIRE_CARGS_MAX      64u                   /* admin op arguments */
#define WIRE_CNODES_MAX     65536u                /* STATUS rows */
#define WIRE_CTOKENS_MAX    (1u << 22)            /* RING entries */
#define WIRE_CENDPOINTS_MAX 1024u                 /* ENDPOINTS rows */
#define WIRE_CSTR_MAX       4096u /* names, addresses, dc, rack, args, password */
#define WIRE_CMSG_MAX       65536u     /* error messages */
#define WIRE_CTTL_MAX       315360000u /* ten years, in seconds */
#define WIRE_CSCAN_MAX      1000u      /* SCAN's COUNT */
#define WIRE_CKEYS_MAX      4096u      /* keys in one SCAN answer */

/* Operation codes. Values are part of the protocol. The "reserved" admin ops
 * are defined so clients can send them; a server that does not implement one
 * answers it with the NOT_IMPLEMENTED error (RK_ENOTSUP). */
enum wire_cop {
    WIRE_COP_HELLO = 1,      /* version, optional user and password (AUTH),
                                client name */
    WIRE_COP_PING = 2,       /* empty result */
    WIRE_COP_GET = 10,       /* key -> value, or NOT_FOUND */
    WIRE_COP_PUT = 11,       /* key, value, optional ttl */
    WIRE_COP_DEL = 12,       /* key */
    WIRE_COP_MGET = 13,      /* keys -> values (nil where absent) */
    WIRE_COP_SCAN = 14,      /* cursor, count, match -> cursor, keys */
    WIRE_COP_STATUS = 30,    /* ring epoch, fingerprint, node rows */
    WIRE_COP_RING = 31,      /* epoch, fingerprint, (token, node) list */
    WIRE_COP_ENDPOINTS = 32, /* key -> token and ordered replicas */
    WIRE_COP_METRICS = 33,   /* Prometheus text */
    WIRE_COP_JOIN = 40,      /* reserved admin ops: result is text */
    WIRE_COP_DECOMMISSION = 41,
    WIRE_COP_REMOVENODE = 42, /* args: node name */
    WIRE_COP_REPAIR = 43,     /* args: none, or "START,END" */
    WIRE_COP_CLEANUP = 44,
    WIRE_COP_NETSTATS = 45,
    WIRE_COP_ABORT = 46,    /* stop the node's decommission or removenode */
    WIRE_COP_SNAPSHOT = 47, /* args: none, or the TAG */
    WIRE_COP_LISTSNAPSHOTS = 48,   /* text: a row per snapshot */
    WIRE_COP_CLEARSNAPSHOT = 49,   /* args: the TAG, or "--all" */
    WIRE_COP_RELOADTLS = 50,       /* load the TLS certificates again */
    WIRE_COP_REPLICATION = 51,     /* text: each node's replication setting */
    WIRE_COP_REPLICATION_SET = 52, /* args: the setting ("dc1:3,dc2:3") */
    WIRE_COP_REBUILD = 53          /* args: the data centre to stream from */
};

/* Consistency levels; 0 (field absent) means the server's default. */
enum wire_ccl {
    WIRE_CCL_DEFAULT = 0,
    WIRE_CCL_ONE = 1,
    WIRE_CCL_TWO = 2,
    WIRE_CCL_QUORUM = 3,
    WIRE_CCL_ALL = 4,
    WIRE_CCL_LOCAL_ONE = 5,
    WIRE_CCL_LOCAL_QUORUM = 6,
    WIRE_CCL_EACH_QUORUM = 7,
    WIRE_CCL_LAST = 7
};

/* Request map keys (msgpack positive fixints). */
enum wire_cfield {
    WIRE_CF_ID = 1,       /* uint64, required */
    WIRE_CF_OP = 2,       /* uint, required */
    WIRE_CF_CL = 3,       /* uint, enum wire_ccl */
    WIRE_CF_KEY = 4,      /* bin (str accepted) */
    WIRE_CF_VALUE = 5,    /* bin (str accepted) */
    WIRE_CF_TTL = 6,      /* uint seconds, 1..WIRE_CTTL_MAX */
    WIRE_CF_KEYS = 7,     /* array of bin */
    WIRE_CF_PASSWORD = 8, /* str or bin */
    WIRE_CF_ARGS = 9,     /* array of str */
    WIRE_CF_VERSION = 10, /* uint, HELLO */
    WIRE_CF_CLIENT = 11,  /* str, HELLO: client name */
    WIRE_CF_USER = 12,    /* str, HELLO: user ("default", "admin"); absent:
                             "default" */
    WIRE_CF_CURSOR = 13,  /* uint64, SCAN: where to go on; absent: 0 */
    WIRE_CF_COUNT = 14,   /* uint, SCAN: 1..WIRE_CSCAN_MAX, work per call */
    WIRE_CF_MATCH = 15    /* bin, SCAN: a glob the keys must match */
};

/* Response map keys. */
enum wire_crfield {
    WIRE_CR_ID = 1,         /* uint64, required (0 if the request's id was
                               unreadable) */
    WIRE_CR_OP = 2,         /* uint, required: the request's op (0 if
                               unreadable) */
    WIRE_CR_ERR = 3,        /* str: error name; absent on success */
    WIRE_CR_MSG = 4,        /* str: human-readable detail */
    WIRE_CR_ACKS = 5,       /* uint: replicas that answered */
    WIRE_CR_NEED = 6,       /* uint: replicas the level needed */
    WIRE_CR_VALUE = 16,     /* bin: GET */
    WIRE_CR_VALUES = 17,    /* array of bin|nil: MGET */
    WIRE_CR_CURSOR = 18,    /* uint64: SCAN, the next call's cursor; 0: end */
    WIRE_CR_KEYS = 19,      /* array of bin: SCAN */
    WIRE_CR_EPOCH = 32,     /* uint64: STATUS, RING */
    WIRE_CR_FPRINT = 33,    /* uint64: STATUS, RING */
    WIRE_CR_NODES = 34,     /* array of node maps: STATUS */
    WIRE_CR_TOKENS = 35,    /* array of [uint64 token, str node]: RING */
    WIRE_CR_ENDPOINTS = 36, /* array of [str name, str address]: ENDPOINTS */
    WIRE_CR_TOKEN = 37,     /* uint64: ENDPOINTS, the key's token */
    WIRE_CR_TEXT = 38,      /* str: METRICS and admin ops */
    WIRE_CR_NODE = 39,      /* str: name of the answering node */
    WIRE_CR_CLUSTER = 40,   /* str: cluster name */
    WIRE_CR_VERSION = 48,   /* uint: HELLO, protocol version */
    WIRE_CR_SERVER = 49     /* str: HELLO, server software version */
};

/* Keys of a STATUS node map. */
enum wire_cnfield {
    WIRE_CN_NAME = 1,    /* str */
    WIRE_CN_ADDR = 2,    /* str "host:port" */
    WIRE_CN_DC = 3,      /* str */
    WIRE_CN_RACK = 4,    /* str */
    WIRE_CN_STATE = 5,   /* str: "UN", "DN", "UJ", "UL", "UM", "DJ", ... */
    WIRE_CN_LOAD = 6,    /* uint64 bytes */
    WIRE_CN_TOKENS = 7,  /* uint token count */
    WIRE_CN_OWNS = 8,    /* float64 effective ownership in [0, 1]; absent if
                            unknown */
    WIRE_CN_REPL = 9,    /* str: the node's configured replication ("dc1:3");
                            absent if unknown */
    WIRE_CN_SILENT = 10, /* uint ms the answering node's requests to it have
                           gone unanswered; absent while it answers */
    /* The node's wall clock against the answering node's (for the
     * answering node itself: against its peers', the median), as gossip
     * estimates it: uint ms ahead or behind, absent when 0 or unknown;
     * CLOCK_FAR true when further off than max_clock_drift_ms (for the
     * answering node: it is skewed, and coordinates no writes). */
    WIRE_CN_CLOCK_AHEAD = 11,
    WIRE_CN_CLOCK_BEHIND = 12,
    WIRE_CN_CLOCK_FAR = 13,
    WIRE_CN_DISK_FULL = 14, /* uint 1: short of disk space, refusing writes
                               (disk_reserve_mb); only the answering node
                               says it, of itself; absent otherwise */
    /* The answering node's repair schedule, of itself only (absent in
     * other rows, and while it replicates nothing): the arcs it
     * replicates, the longest any of them has gone without a complete
     * repair (uint ms; since first replicated if never), how many are
     * past repair_interval_s and how many were never repaired. */
    WIRE_CN_REPAIR_ARCS = 15,
    WIRE_CN_REPAIR_OLDEST = 16,
    WIRE_CN_REPAIR_OVERDUE = 17,
    WIRE_CN_REPAIR_NEVER = 18,
    WIRE_CN_QUEUED = 19 /* str: joining, the node it waits for before it
                           streams its ranges; absent otherwise */
};

/* A growable byte buffer the encoders append frames to.
 * @note The caller owns it; wire_cbuf_release frees the bytes. */
struct wire_cbuf {
    uint8_t *p;
    size_t len;
    size_t cap;
};

void wire_cbuf_release(struct wire_cbuf *b);

/* Bits of wire_creq.has (optional fields). */
#define WIRE_CREQ_CL       (1u << 0)
#define WIRE_CREQ_KEY      (1u << 1)
#define WIRE_CREQ_VALUE    (1u << 2)
#define WIRE_CREQ_TTL      (1u << 3)
#define WIRE_CREQ_KEYS     (1u << 4)
#define WIRE_CREQ_PASSWORD (1u << 5)
#define WIRE_CREQ_ARGS     (1u << 6)
#define WIRE_CREQ_VERSION  (1u << 7)
#define WIRE_CREQ_CLIENT   (1u << 8)
#define WIRE_CREQ_USER     (1u << 9)
#define WIRE_CREQ_CURSOR   (1u << 10)
#define WIRE_CREQ_COUNT    (1u << 11)
#define WIRE_CREQ_MATCH    (1u << 12)

struct wire_creq {
    uint64_t id;
    uint32_t op;  /* enum wire_cop */
    uint32_t has; /* WIRE_CREQ_* bits */
    uint32_t cl;  /* enum wire_ccl, when WIRE_CREQ_CL */
    uint32_t ttl; /* seconds, when WIRE_CREQ_TTL */
    uint32_t version;
    uint64_t cursor;       /* SCAN, when WIRE_CREQ_CURSOR */
    uint32_t count;        /* SCAN, when WIRE_CREQ_COUNT */
    struct rk_slice match; /* SCAN, when WIRE_CREQ_MATCH */
    struct rk_slice key;
    struct rk_slice value;
    struct rk_slice password;
    struct rk_slice client;
    struct rk_slice user;
    struct rk_slice *keys; /* MGET */
    size_t nkeys;
    struct rk_slice *args; /* admin op arguments */
    size_t nargs;
    /* Set by wire_creq_decode: has_id tells whether `id` (and op, if
     * nonzero) were read even when decoding failed, so a server can answer
     * the failure with the right id. why is a static reason on failure. */
    bool has_id;
    const char *why;
    uint8_t *owned_; /* private: the decoded body copy */
    bool owned_arrays_;
};

/* Bits of wire_cresp.has. */
#define WIRE_CRESP_MSG       (1u << 0)
#define WIRE_CRESP_ACKS      (1u << 1)
#define WIRE_CRESP_NEED      (1u << 2)
#define WIRE_CRESP_VALUE     (1u << 3)
#define WIRE_CRESP_VALUES    (1u << 4)
#define WIRE_CRESP_EPOCH     (1u << 5)
#define WIRE_CRESP_FPRINT    (1u << 6)
#define WIRE_CRESP_NODES     (1u << 7)
#define WIRE_CRESP_TOKENS    (1u << 8)
#define WIRE_CRESP_ENDPOINTS (1u << 9)
#define WIRE_CRESP_TOKEN     (1u << 10)
#define WIRE_CRESP_TEXT      (1u << 11)
#define WIRE_CRESP_NODE      (1u << 12)
#define WIRE_CRESP_CLUSTER   (1u << 13)
#define WIRE_CRESP_VERSION   (1u << 14)
#define WIRE_CRESP_SERVER    (1u << 15)
#define WIRE_CRESP_CURSOR    (1u << 16)
#define WIRE_CRESP_KEYS      (1u << 17)

/* One STATUS row. owns < 0 means unknown (field absent on the wire). */
struct wire_cnode {
    struct rk_slice name, addr, dc, rack, state;
    uint64_t load;
    uint32_t tokens;
    double owns;
    struct rk_slice repl;                     /* empty: unknown (not sent) */
    uint64_t silent_ms;                       /* 0: answering (not sent) */
    uint64_t clock_ahead_ms, clock_behind_ms; /* 0: not sent */
    bool clock_far;                           /* false: not sent */
    uint64_t disk_full; /* 1: refusing writes for disk space (0: not sent) */
    /* the answering node's repair schedule (WIRE_CN_REPAIR_*; 0: not
     * sent) */
    uint64_t repair_arcs, repair_oldest_ms, repair_overdue, repair_never;
    struct rk_slice queued; /* joining, waits for this node (empty: not sent) */
};

struct wire_ctoken {
    uint64_t token;
    struct rk_slice node;
};

struct wire_cendpoint {
    struct rk_slice name, addr;
};

/* One MGET result; found is false for a nil. */
struct wire_cvalue {
    bool found;
    struct rk_slice value;
};

struct wire_cresp {
    uint64_t id;
    uint32_t op;
    uint32_t has; /* WIRE_CRESP_* bits */
    /* 0 on success, else the error code: an RK_E* from common/rk.h
     * (RK_ENOTSUP for NOT_IMPLEMENTED). A decoded error name this library
     * does not know becomes RK_EINTERNAL and stays readable in errname. */
    int err;
    struct rk_slice errname; /* decoded only */
    struct rk_slice msg;
    uint32_t acks, need;
    struct rk_slice value;
    struct wire_cvalue *values;
    size_t nvalues;
    uint64_t cursor;       /* SCAN */
    struct rk_slice *keys; /* SCAN */
    size_t nkeys;
    uint64_t epoch, fprint, token;
    struct wire_cnode *nodes;
    size_t nnodes;
    struct wire_ctoken *tokens;
    size_t ntokens;
    struct wire_cendpoint *endpoints;
    size_t nendpoints;
    struct rk_slice text, node, cluster, server;
    uint32_t version;
    const char *why; /* static reason when decoding failed */
    uint8_t *owned_;
    bool owned_arrays_;
};

/* Frame splitting. Looks at buf[0..len) for one whole frame.
 * Returns 0 and *out_used = 0 when more bytes are needed; returns 0,
 * *out_body (borrowed from buf) and *out_used = header + body when a frame
 * is complete; RK_ETOOLARGE when the announced length exceeds
 * WIRE_CFRAME_MAX, RK_EPROTO when it is zero. The length is checked from
 * the first 4 bytes, before the body arrives. */
int wire_cframe_parse(struct rk_slice *out_body,
                      size_t *out_used,
                      const uint8_t *buf,
                      size_t len);

/* Append one request frame. Checks what the decoder checks (required fields
 * per op, key 1..RK_MAX_KEY, value <= RK_MAX_VALUE, counts): RK_EBADREQ or
 * RK_ETOOLARGE, -ENOMEM. On failure out is unchanged. */
int wire_creq_encode(struct wire_cbuf *out, const struct wire_creq *req);

/* Decode one request body (without the length prefix) from untrusted bytes.
 * Returns 0, RK_EBADREQ (malformed, unknown op, missing field), RK_ETOOLARGE
 * (a key, value or count over its limit) or -ENOMEM; out->why names the
 * problem and out->has_id says whether out->id/op are valid anyway.
 * Unknown map keys are skipped (forward compatibility).
 * @note On any return, call wire_creq_clear(out) to free what it owns; the
 * slices in out point into out's own copy of body. */
int wire_creq_decode(struct wire_creq *out, const uint8_t *body, size_t len);

void wire_creq_clear(struct wire_creq *req);

/* Append one response frame. resp->err != 0 writes the error name; on
 * success the op's required result fields must be set (see docs). Returns
 * 0, RK_EBADREQ, RK_ETOOLARGE or -ENOMEM; on failure out is unchanged. */
int wire_cresp_encode(struct wire_cbuf *out, const struct wire_cresp *resp);

/* Decode one response body from untrusted bytes. Returns 0, RK_EPROTO
 * (malformed, or a success without the op's required fields), RK_ETOOLARGE or
 * -ENOMEM; out->why says why. 0 means the frame decoded: the server's
 * verdict is out->err.
 * @note Call wire_cresp_clear(out) on any return; slices point into out's own
 * copy of the body. */
int wire_cresp_decode(struct wire_cresp *out, const uint8_t *body, size_t len);

void wire_cresp_clear(struct wire_cresp *resp);

/* Names. Static strings; NULL / 0 when unknown. */
const char *wire_cop_name(uint32_t op);    /* "GET", "STATUS", ... */
uint32_t wire_cop_parse(const char *name); /* case-insensitive */
const char *wire_ccl_name(uint32_t cl);    /* "QUORUM", ...; "DEFAULT" */
int wire_ccl_parse(uint32_t *out, const char *name); /* 0 or RK_EBADREQ */

/* Error names on the wire: rk_errname for RK_E* ("NOT_IMPLEMENTED" is
 * RK_ENOTSUP; -ENOSYS is still accepted for it when encoding), "INTERNAL" for
 * anything else. wire_cerr_code is the inverse (0 if unknown). */
const char *wire_cerr_name(int err);
int wire_cerr_code(const char *name, size_t len);

#endif
