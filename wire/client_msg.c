/*
 * client_msg.c - codecs of the native client protocol (see client_msg.h and
 * docs/protocol.md).
 *
 * Each body is a map with small integer keys; the tables below list every
 * field of a request, a response and a STATUS node once, with its key, its
 * C member, its msgpack type and its limit. wire/'s one encoder and one
 * decoder (codec.c) walk them: out through wire/'s writer, in through its
 * bounds-checked reader, which checks every count against the bytes left
 * and the field's limit before allocating, refuses a repeated key and skips
 * unknown fields with a depth bound. (msgpack-c's unpacker allocates every
 * array a header announces before reading a single element: a 5-byte
 * "array of 2^32" asks for ~100 GB, which an untrusted peer must not be
 * able to trigger.) What holds across fields (an op's required fields) is
 * checked by code next to the tables, the same for both directions. The
 * request and response tables are field lists (X-macros, codec_steps.h)
 * that also expand into unrolled code, which every request and response
 * goes through.
 * Decoded structs copy the body once and point their slices into the copy.
 */
#include "wire/client_msg.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "wire/codec_steps.h"

/* ---- names ---------------------------------------------------------- */

static const struct {
    uint32_t op;
    const char *name;
} wire__ops[] = {
    {WIRE_COP_HELLO, "HELLO"},
    {WIRE_COP_PING, "PING"},
    {WIRE_COP_GET, "GET"},
    {WIRE_COP_PUT, "PUT"},
    {WIRE_COP_DEL, "DEL"},
    {WIRE_COP_MGET, "MGET"},
    {WIRE_COP_SCAN, "SCAN"},
    {WIRE_COP_STATUS, "STATUS"},
    {WIRE_COP_RING, "RING"},
    {WIRE_COP_ENDPOINTS, "ENDPOINTS"},
    {WIRE_COP_METRICS, "METRICS"},
    {WIRE_COP_JOIN, "JOIN"},
    {WIRE_COP_DECOMMISSION, "DECOMMISSION"},
    {WIRE_COP_REMOVENODE, "REMOVENODE"},
    {WIRE_COP_REPAIR, "REPAIR"},
    {WIRE_COP_CLEANUP, "CLEANUP"},
    {WIRE_COP_NETSTATS, "NETSTATS"},
    {WIRE_COP_ABORT, "ABORT"},
    {WIRE_COP_SNAPSHOT, "SNAPSHOT"},
    {WIRE_COP_LISTSNAPSHOTS, "LISTSNAPSHOTS"},
    {WIRE_COP_CLEARSNAPSHOT, "CLEARSNAPSHOT"},
    {WIRE_COP_RELOADTLS, "RELOADTLS"},
    {WIRE_COP_REPLICATION, "REPLICATION"},
    {WIRE_COP_REPLICATION_SET, "REPLICATION_SET"},
    {WIRE_COP_REBUILD, "REBUILD"},
};

#define WIRE__NOPS (sizeof(wire__ops) / sizeof(wire__ops[0]))

static const char *const wire__cls[] = {
    "DEFAULT", "ONE",       "TWO",          "QUORUM",
    "ALL",     "LOCAL_ONE", "LOCAL_QUORUM", "EACH_QUORUM",
};

const char *wire_cop_name(uint32_t op)
{
    for (size_t i = 0; i < WIRE__NOPS; i++)
        if (wire__ops[i].op == op)
            return wire__ops[i].name;
    return NULL;
}

uint32_t wire_cop_parse(const char *name)
{
    for (size_t i = 0; i < WIRE__NOPS; i++)
        if (strcasecmp(wire__ops[i].name, name) == 0)
            return wire__ops[i].op;
    return 0;
}

const char *wire_ccl_name(uint32_t cl)
{
    return cl <= WIRE_CCL_LAST ? wire__cls[cl] : NULL;
}

int wire_ccl_parse(uint32_t *out, const char *name)
{
    for (uint32_t i = 1; i <= WIRE_CCL_LAST; i++) {
        if (strcasecmp(wire__cls[i], name) == 0) {
            *out = i;
            return 0;
        }
    }
    return RK_EBADREQ;
}

const char *wire_cerr_name(int err)
{
    if (err == -ENOSYS)
        return "NOT_IMPLEMENTED";
    const char *n = rk_errname(err);
    return strcmp(n, "ERR") == 0 ? "INTERNAL" : n;
}

int wire_cerr_code(const char *name, size_t len)
{
    char buf[32];
    if (len == 0 || len >= sizeof(buf))
        return 0;
    memcpy(buf, name, len);
    buf[len] = '\0';
    return rk_errcode(buf);
}

static bool wire__op_known(uint32_t op)
{
    return wire_cop_name(op) != NULL;
}

/* ---- buffer --------------------------------------------------------- */

void wire_cbuf_release(struct wire_cbuf *b)
{
    if (b == NULL)
        return;
    free(b->p);
    b->p = NULL;
    b->len = b->cap = 0;
}

/* ---- frames --------------------------------------------------------- */

int wire_cframe_parse(struct rk_slice *out_body,
                      size_t *out_used,
                      const uint8_t *buf,
                      size_t len)
{
    *out_used = 0;
    out_body->p = NULL;
    out_body->len = 0;
    if (len < WIRE_CFRAME_HDR)
        return 0;
    uint32_t n = (uint32_t)buf[0] << 24 | (uint32_t)buf[1] << 16 |
                 (uint32_t)buf[2] << 8 | buf[3];
    if (n == 0)
        return RK_EPROTO;
    if (n > WIRE_CFRAME_MAX)
        return RK_ETOOLARGE;
    if (len - WIRE_CFRAME_HDR < n)
        return 0;
    out_body->p = buf + WIRE_CFRAME_HDR;
    out_body->len = n;
    *out_used = WIRE_CFRAME_HDR + (size_t)n;
    return 0;
}

/* ---- request validation (shared by encoder and decoder) ------------ */

static int wire__check_key(struct rk_slice k, const char **why)
{
    if (k.len == 0) {
        *why = "empty key";
        return RK_EBADREQ;
    }
    if (k.len > RK_MAX_KEY) {
        *why = "key too large";
        return RK_ETOOLARGE;
    }
    return 0;
}

static int wire__creq_check(const struct wire_creq *r, const char **why)
{
    int rc;
    if (!wire__op_known(r->op)) {
        *why = "unknown op";
        return RK_EBADREQ;
    }
    if ((r->has & WIRE_CREQ_CL) && r->cl > WIRE_CCL_LAST) {
        *why = "unknown consistency level";
        return RK_EBADREQ;
    }
    if ((r->has & WIRE_CREQ_KEY) && (rc = wire__check_key(r->key, why)) != 0)
        return rc;
    if ((r->has & WIRE_CREQ_VALUE) && r->value.len > RK_MAX_VALUE) {
        *why = "value too large";
        return RK_ETOOLARGE;
    }
    if ((r->has & WIRE_CREQ_TTL) && (r->ttl == 0 || r->ttl > WIRE_CTTL_MAX)) {
        *why = "ttl out of range";
        return RK_EBADREQ;
    }
    if (r->has & WIRE_CREQ_KEYS) {
        if (r->nkeys > WIRE_CMGET_MAX) {
            *why = "too many keys";
            return RK_ETOOLARGE;
        }
        for (size_t i = 0; i < r->nkeys; i++)
            if ((rc = wire__check_key(r->keys[i], why)) != 0)
                return rc;
    }
    if ((r->has & WIRE_CREQ_PASSWORD) && r->password.len > WIRE_CSTR_MAX) {
        *why = "password too long";
        return RK_ETOOLARGE;
    }
    if ((r->has & WIRE_CREQ_CLIENT) && r->client.len > WIRE_CSTR_MAX) {
        *why = "client name too long";
        return RK_ETOOLARGE;
    }
    if ((r->has & WIRE_CREQ_USER) && r->user.len > WIRE_CSTR_MAX) {
        *why = "user name too long";
        return RK_ETOOLARGE;
    }
    if ((r->has & WIRE_CREQ_COUNT) &&
        (r->count == 0 || r->count > WIRE_CSCAN_MAX)) {
        *why = "count out of range";
        return RK_EBADREQ;
    }
    if ((r->has & WIRE_CREQ_MATCH) && r->match.len > RK_MAX_KEY) {
        *why = "pattern too long";
        return RK_ETOOLARGE;
    }
    if (r->has & WIRE_CREQ_ARGS) {
        if (r->nargs > WIRE_CARGS_MAX) {
            *why = "too many arguments";
            return RK_ETOOLARGE;
        }
        for (size_t i = 0; i < r->nargs; i++) {
            if (r->args[i].len > WIRE_CSTR_MAX) {
                *why = "argument too long";
                return RK_ETOOLARGE;
            }
        }
    }
    switch (r->op) {
    case WIRE_COP_GET:
    case WIRE_COP_DEL:
    case WIRE_COP_ENDPOINTS:
        if (!(r->has & WIRE_CREQ_KEY)) {
            *why = "missing key";
            return RK_EBADREQ;
        }
        break;
    case WIRE_COP_PUT:
        if (!(r->has & WIRE_CREQ_KEY)) {
            *why = "missing key";
            return RK_EBADREQ;
        }
        if (!(r->has & WIRE_CREQ_VALUE)) {
            *why = "missing value";
            return RK_EBADREQ;
        }
        break;
    case WIRE_COP_MGET:
        if (!(r->has & WIRE_CREQ_KEYS) || r->nkeys == 0) {
            *why = "missing keys";
            return RK_EBADREQ;
        }
        break;
    case WIRE_COP_REMOVENODE:
        if (!(r->has & WIRE_CREQ_ARGS) || r->nargs == 0) {
            *why = "missing node name";
            return RK_EBADREQ;
        }
        break;
    default:
        break;
    }
    return 0;
}

/* ---- field tables ---------------------------------------------------- */

/* Set by the decoder when a request's id was read (wire_creq.has_id); never
 * one of the WIRE_CREQ_* bits. */
#define CREQ_ID_READ (1u << 31)

/* Entries of a request's, a response's field list (X-macros, see
 * codec_steps.h): a field with its key and its has bit named like the
 * key; an array field; the id and op that open every body, under the same
 * keys in requests and responses (id_has marks a read id in the has word,
 * 0: not marked). A STATUS row field. */
#define REQ(X, k, key_, m, ...)                             \
    X(FIELD, k, struct wire_creq, m, .key = WIRE_CF_##key_, \
      .has = WIRE_CREQ_##key_, __VA_ARGS__)
#define RESP(X, k, key_, m, ...)                             \
    X(FIELD, k, struct wire_cresp, m, .key = WIRE_CR_##key_, \
      .has = WIRE_CRESP_##key_, __VA_ARGS__)
#define REQ_LIST(X, key_, m, n, most, l)                         \
    REQ(X, ARRAY, key_, m, .aux = offsetof(struct wire_creq, n), \
        .max = (most), .sub = (l))
#define RESP_LIST(X, key_, m, n, most, l)                          \
    RESP(X, ARRAY, key_, m, .aux = offsetof(struct wire_cresp, n), \
         .max = (most), .sub = (l))
#define ID_AND_OP(X, T, id_has)                                         \
    X(FIELD, UINT, T, id, .key = WIRE_CF_ID, .flags = WIRE__F_REQUIRED, \
      .has = (id_has))                                                  \
    X(FIELD, UINT32, T, op, .key = WIRE_CF_OP, .flags = WIRE__F_REQUIRED)
#define NODE(k, key_, m, ...) \
    WIRE__FIELD(k, struct wire_cnode, m, .key = WIRE_CN_##key_, __VA_ARGS__)
_Static_assert((int)WIRE_CF_ID == (int)WIRE_CR_ID &&
                   (int)WIRE_CF_OP == (int)WIRE_CR_OP,
               "request and response share the id and op field numbers");

/* An element of MGET's keys: a key as bin (a str is accepted). */
static const struct wire__field key_elem[] = {
    {.kind = WIRE__K_BIN, .flags = WIRE__F_ANY, .max = RK_MAX_KEY},
};
static const struct wire__layout key_layout =
    WIRE__LAYOUT(BARE, struct rk_slice, key_elem);

/* An element of an admin op's arguments: a str. */
static const struct wire__field arg_elem[] = {
    {.kind = WIRE__K_STR, .max = WIRE_CSTR_MAX},
};
static const struct wire__layout arg_layout =
    WIRE__LAYOUT(BARE, struct rk_slice, arg_elem);

/* A request: id and op, then the fields its op uses. */
#define CREQ_LIST(X)                                                     \
    ID_AND_OP(X, struct wire_creq, CREQ_ID_READ)                         \
    REQ(X, UINT32, CL, cl)                                               \
    REQ(X, BIN, KEY, key, .flags = WIRE__F_ANY, .max = RK_MAX_KEY)       \
    REQ(X, BIN, VALUE, value, .flags = WIRE__F_ANY, .max = RK_MAX_VALUE) \
    REQ(X, UINT32, TTL, ttl)                                             \
    REQ_LIST(X, KEYS, keys, nkeys, WIRE_CMGET_MAX, &key_layout)          \
    REQ(X, STR, PASSWORD, password, .flags = WIRE__F_ANY,                \
        .max = WIRE_CSTR_MAX)                                            \
    REQ_LIST(X, ARGS, args, nargs, WIRE_CARGS_MAX, &arg_layout)          \
    REQ(X, UINT32, VERSION, version)                                     \
    REQ(X, STR, CLIENT, client, .max = WIRE_CSTR_MAX)                    \
    REQ(X, STR, USER, user, .max = WIRE_CSTR_MAX)                        \
    REQ(X, UINT, CURSOR, cursor)                                         \
    REQ(X, UINT32, COUNT, count)                                         \
    REQ(X, BIN, MATCH, match, .flags = WIRE__F_ANY, .max = RK_MAX_KEY)

WIRE__LIST_FIELDS(creq, CREQ_LIST);
static const struct wire__layout creq_layout = {
    .shape = WIRE__MAP,
    .size = sizeof(struct wire_creq),
    .has = offsetof(struct wire_creq, has),
    WIRE__FIELDS(creq_fields),
};
WIRE__MAP_CODE(creq, CREQ_LIST)

/* An MGET result: a value as bin (a str is accepted), nil where absent. */
static const struct wire__field value_elem[] = {
    {.kind = WIRE__K_BIN,
     .flags = WIRE__F_ANY | WIRE__F_NIL,
     .off = offsetof(struct wire_cvalue, value),
     .aux = offsetof(struct wire_cvalue, found),
     .max = RK_MAX_VALUE},
};
static const struct wire__layout value_layout =
    WIRE__LAYOUT(BARE, struct wire_cvalue, value_elem);

/* A STATUS row; owns, repl, silent, the clock's, disk_full, the repair
 * schedule's and queued are left out when unknown (or zero). */
static const struct wire__field node_fields[] = {
    NODE(STR, NAME, name, .flags = WIRE__F_REQUIRED, .max = WIRE_CSTR_MAX),
    NODE(STR, ADDR, addr, .max = WIRE_CSTR_MAX),
    NODE(STR, DC, dc, .max = WIRE_CSTR_MAX),
    NODE(STR, RACK, rack, .max = WIRE_CSTR_MAX),
    NODE(STR, STATE, state, .max = 16),
    NODE(UINT, LOAD, load),
    NODE(UINT32, TOKENS, tokens),
    NODE(SHARE, OWNS, owns),
    NODE(STR, REPL, repl, .flags = WIRE__F_OMIT_ZERO, .max = WIRE_CSTR_MAX),
    NODE(UINT, SILENT, silent_ms, .flags = WIRE__F_OMIT_ZERO),
    NODE(UINT, CLOCK_AHEAD, clock_ahead_ms, .flags = WIRE__F_OMIT_ZERO),
    NODE(UINT, CLOCK_BEHIND, clock_behind_ms, .flags = WIRE__F_OMIT_ZERO),
    NODE(BOOL, CLOCK_FAR, clock_far, .flags = WIRE__F_OMIT_ZERO),
    NODE(UINT, DISK_FULL, disk_full, .flags = WIRE__F_OMIT_ZERO),
    NODE(UINT, REPAIR_ARCS, repair_arcs, .flags = WIRE__F_OMIT_ZERO),
    NODE(UINT, REPAIR_OLDEST, repair_oldest_ms, .flags = WIRE__F_OMIT_ZERO),
    NODE(UINT, REPAIR_OVERDUE, repair_overdue, .flags = WIRE__F_OMIT_ZERO),
    NODE(UINT, REPAIR_NEVER, repair_never, .flags = WIRE__F_OMIT_ZERO),
    NODE(STR, QUEUED, queued, .flags = WIRE__F_OMIT_ZERO, .max = WIRE_CSTR_MAX),
};
static const struct wire__layout node_row =
    WIRE__LAYOUT(MAP, struct wire_cnode, node_fields);

/* A RING entry: [token, node]. */
static const struct wire__field token_fields[] = {
    WIRE__FIELD(UINT, struct wire_ctoken, token),
    WIRE__FIELD(STR, struct wire_ctoken, node, .max = WIRE_CSTR_MAX),
};
static const struct wire__layout token_row =
    WIRE__LAYOUT(TUPLE, struct wire_ctoken, token_fields);

/* An ENDPOINTS row: [name, address]. */
static const struct wire__field endpoint_fields[] = {
    WIRE__FIELD(STR, struct wire_cendpoint, name, .max = WIRE_CSTR_MAX),
    WIRE__FIELD(STR, struct wire_cendpoint, addr, .max = WIRE_CSTR_MAX),
};
static const struct wire__layout ep_row =
    WIRE__LAYOUT(TUPLE, struct wire_cendpoint, endpoint_fields);

/* A response: id and op, the error name when err != 0 (wire_cresp_encode
 * fills errname from err; the decoder reads errname, then sets err), then
 * the results its op carries. */
#define CRESP_LIST(X)                                                     \
    ID_AND_OP(X, struct wire_cresp, 0)                                    \
    X(FIELD, STR, struct wire_cresp, errname, .key = WIRE_CR_ERR,         \
      .flags = WIRE__F_OMIT_ZERO, .min = 1, .max = WIRE_CMSG_MAX)         \
    RESP(X, STR, MSG, msg, .max = WIRE_CMSG_MAX)                          \
    RESP(X, UINT32, ACKS, acks)                                           \
    RESP(X, UINT32, NEED, need)                                           \
    RESP(X, BIN, VALUE, value, .flags = WIRE__F_ANY, .max = RK_MAX_VALUE) \
    RESP_LIST(X, VALUES, values, nvalues, WIRE_CMGET_MAX, &value_layout)  \
    RESP(X, UINT, EPOCH, epoch)                                           \
    RESP(X, UINT, FPRINT, fprint)                                         \
    RESP_LIST(X, NODES, nodes, nnodes, WIRE_CNODES_MAX, &node_row)        \
    RESP_LIST(X, TOKENS, tokens, ntokens, WIRE_CTOKENS_MAX, &token_row)   \
    RESP_LIST(X, ENDPOINTS, endpoints, nendpoints, WIRE_CENDPOINTS_MAX,   \
              &ep_row)                                                    \
    RESP(X, UINT, TOKEN, token)                                           \
    RESP(X, STR, TEXT, text, .max = WIRE_CFRAME_MAX)                      \
    RESP(X, STR, NODE, node, .max = WIRE_CSTR_MAX)                        \
    RESP(X, STR, CLUSTER, cluster, .max = WIRE_CSTR_MAX)                  \
    RESP(X, UINT32, VERSION, version)                                     \
    RESP(X, STR, SERVER, server, .max = WIRE_CSTR_MAX)                    \
    RESP(X, UINT, CURSOR, cursor)                                         \
    RESP_LIST(X, KEYS, keys, nkeys, WIRE_CKEYS_MAX, &key_layout)

WIRE__LIST_FIELDS(cresp, CRESP_LIST);
static const struct wire__layout cresp_layout = {
    .shape = WIRE__MAP,
    .size = sizeof(struct wire_cresp),
    .has = offsetof(struct wire_cresp, has),
    WIRE__FIELDS(cresp_fields),
};
WIRE__MAP_CODE(cresp, CRESP_LIST)

/* ---- one frame out, one body in --------------------------------------- */

/* Appends one frame: the length prefix, then msg written by encode (a
 * layout's unrolled encoder). On failure out is as it was. Inlined, so
 * that encode is a direct call. */
WIRE__INLINE int encode_frame(struct wire_cbuf *out,
                              void (*encode)(struct wire__wr *, const void *),
                              const void *msg)
{
    static const uint8_t zero[WIRE_CFRAME_HDR];
    struct wire__wr w;
    wire__wr_init(&w, &out->p, &out->len, &out->cap);
    wire__wr_raw(&w, zero, sizeof(zero));
    encode(&w, msg);
    int rc = wire__wr_end(&w);
    if (rc != 0)
        return rc;
    size_t body = out->len - w.start - WIRE_CFRAME_HDR;
    if (body > WIRE_CFRAME_MAX) {
        out->len = w.start;
        return RK_ETOOLARGE;
    }
    uint8_t *h = out->p + w.start;
    h[0] = (uint8_t)(body >> 24);
    h[1] = (uint8_t)(body >> 16);
    h[2] = (uint8_t)(body >> 8);
    h[3] = (uint8_t)body;
    return 0;
}

/* Copies body into *owned and reads it into msg with decode (a layout's
 * unrolled decoder); returns 0 or
 * a reader code (*why set), or -ENOMEM / RK_ETOOLARGE / `empty` for a body
 * that is not there to read. */
WIRE__INLINE int decode_body(void *msg,
                             uint8_t **owned,
                             const char **why,
                             int (*decode)(struct wire__rd *, void *, int),
                             const uint8_t *body,
                             size_t len,
                             int empty)
{
    if (len == 0 || len > WIRE_CFRAME_MAX) {
        *why = len ? "frame too large" : "empty frame";
        return len ? RK_ETOOLARGE : empty;
    }
    if ((*owned = malloc(len)) == NULL) {
        *why = "out of memory";
        return -ENOMEM;
    }
    memcpy(*owned, body, len);
    struct wire__rd r;
    wire__rd_init(&r, *owned, len);
    int rc = decode(&r, msg, 0);
    if (rc == 0 && r.p != r.end)
        rc = wire__rd_fail(&r, WIRE__RD_BAD, "trailing bytes after the body");
    if (rc != 0)
        *why = r.why;
    return rc;
}

/* ---- requests --------------------------------------------------------- */

int wire_creq_encode(struct wire_cbuf *out, const struct wire_creq *req)
{
    const char *why = NULL;
    int rc = wire__creq_check(req, &why);
    if (rc != 0)
        return rc;
    return encode_frame(out, encode_creq, req);
}

int wire_creq_decode(struct wire_creq *out, const uint8_t *body, size_t len)
{
    memset(out, 0, sizeof(*out));
    out->owned_arrays_ = true;
    int rc = decode_body(out, &out->owned_, &out->why, decode_creq, body, len,
                         RK_EBADREQ);
    out->has_id = (out->has & CREQ_ID_READ) != 0;
    out->has &= ~CREQ_ID_READ;
    if (rc != 0)
        return wire__rd_code(rc, RK_EBADREQ);
    const char *why = NULL;
    if ((rc = wire__creq_check(out, &why)) != 0)
        out->why = why;
    return rc;
}

void wire_creq_clear(struct wire_creq *req)
{
    if (req == NULL)
        return;
    if (req->owned_arrays_)
        free_creq(req);
    free(req->owned_);
    memset(req, 0, sizeof(*req));
}

/* ---- responses -------------------------------------------------------- */

/* What a successful response of each op must carry. */
static uint32_t wire__cresp_required(uint32_t op)
{
    switch (op) {
    case WIRE_COP_HELLO:
        return WIRE_CRESP_VERSION;
    case WIRE_COP_GET:
        return WIRE_CRESP_VALUE;
    case WIRE_COP_MGET:
        return WIRE_CRESP_VALUES;
    case WIRE_COP_SCAN:
        return WIRE_CRESP_CURSOR | WIRE_CRESP_KEYS;
    case WIRE_COP_STATUS:
        return WIRE_CRESP_EPOCH | WIRE_CRESP_FPRINT | WIRE_CRESP_NODES;
    case WIRE_COP_RING:
        return WIRE_CRESP_EPOCH | WIRE_CRESP_FPRINT | WIRE_CRESP_TOKENS;
    case WIRE_COP_ENDPOINTS:
        return WIRE_CRESP_TOKEN | WIRE_CRESP_ENDPOINTS;
    case WIRE_COP_METRICS:
        return WIRE_CRESP_TEXT;
    default:
        return 0;
    }
}

static int wire__cresp_check(const struct wire_cresp *r, const char **why)
{
    if (r->err == 0) {
        uint32_t need = wire__cresp_required(r->op);
        if ((r->has & need) != need) {
            *why = "result field missing for op";
            return -1;
        }
    }
    if ((r->has & WIRE_CRESP_MSG) && r->msg.len > WIRE_CMSG_MAX) {
        *why = "message too long";
        return -2;
    }
    if ((r->has & WIRE_CRESP_VALUE) && r->value.len > RK_MAX_VALUE) {
        *why = "value too large";
        return -2;
    }
    if ((r->has & WIRE_CRESP_VALUES) && r->nvalues > WIRE_CMGET_MAX) {
        *why = "too many values";
        return -2;
    }
    if ((r->has & WIRE_CRESP_KEYS) && r->nkeys > WIRE_CKEYS_MAX) {
        *why = "too many keys";
        return -2;
    }
    if ((r->has & WIRE_CRESP_NODES) && r->nnodes > WIRE_CNODES_MAX) {
        *why = "too many nodes";
        return -2;
    }
    if ((r->has & WIRE_CRESP_TOKENS) && r->ntokens > WIRE_CTOKENS_MAX) {
        *why = "too many tokens";
        return -2;
    }
    if ((r->has & WIRE_CRESP_ENDPOINTS) &&
        r->nendpoints > WIRE_CENDPOINTS_MAX) {
        *why = "too many endpoints";
        return -2;
    }
    return 0;
}

int wire_cresp_encode(struct wire_cbuf *out, const struct wire_cresp *resp)
{
    const char *why = NULL;
    int rc = wire__cresp_check(resp, &why);
    if (rc != 0)
        return rc == -1 ? RK_EBADREQ : RK_ETOOLARGE;
    struct wire_cresp r = *resp;
    r.errname = RK_SLICE(NULL, 0);
    if (r.err != 0) {
        const char *name = wire_cerr_name(r.err);
        r.errname = RK_SLICE(name, strlen(name));
    }
    return encode_frame(out, encode_cresp, &r);
}

int wire_cresp_decode(struct wire_cresp *out, const uint8_t *body, size_t len)
{
    memset(out, 0, sizeof(*out));
    out->owned_arrays_ = true;
    int rc = decode_body(out, &out->owned_, &out->why, decode_cresp, body, len,
                         RK_EPROTO);
    if (rc != 0)
        return wire__rd_code(rc, RK_EPROTO);
    if (out->errname.len > 0) {
        out->err =
            wire_cerr_code((const char *)out->errname.p, out->errname.len);
        if (out->err == 0)
            out->err = RK_EINTERNAL;
    }
    const char *why = NULL;
    rc = wire__cresp_check(out, &why);
    if (rc != 0) {
        out->why = why;
        return rc == -1 ? RK_EPROTO : RK_ETOOLARGE;
    }
    return 0;
}

void wire_cresp_clear(struct wire_cresp *resp)
{
    if (resp == NULL)
        return;
    if (resp->owned_arrays_)
        free_cresp(resp);
    free(resp->owned_);
    memset(resp, 0, sizeof(*resp));
}

/* ---- the unrolled messages, for their test ------------------------------ */

size_t wire__client_unrolled(const struct wire__unrolled **out)
{
    static const struct wire__unrolled all[] = {
        WIRE__UNROLLED(creq, struct wire_creq),
        WIRE__UNROLLED(cresp, struct wire_cresp),
    };
    *out = all;
    return sizeof(all) / sizeof(all[0]);
}
