/*
 * client_msg.c - codecs of the native client protocol (see client_msg.h and
 * docs/protocol.md).
 *
 * Encoding uses msgpack-c's packer, writing straight into a wire_cbuf.
 * Decoding does not use msgpack-c's unpacker: it allocates every array a
 * header announces before reading a single element (a 5-byte "array of 2^32"
 * asks for ~100 GB), which an untrusted peer must not be able to trigger.
 * Instead wire/'s bounds-checked cursor (wire_internal.h, shared with
 * rpc_msg.c) reads exactly the msgpack subset the protocol uses, checks every
 * count against the bytes left and the field's limit before allocating, and
 * skips unknown fields with a depth bound.
 * Decoded structs copy the body once and point their slices into the copy.
 */
#include "wire/client_msg.h"

#include <errno.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include <msgpack.h>

#include "wire/wire_internal.h"

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

static int wire__cbuf_write(void *data, const char *buf, size_t len)
{
    struct wire_cbuf *b = data;
    if (len > SIZE_MAX - b->len)
        return -1;
    if (b->len + len > b->cap) {
        size_t cap = b->cap ? b->cap : 256;
        while (cap < b->len + len)
            cap = cap > SIZE_MAX / 2 ? b->len + len : cap * 2;
        uint8_t *np = realloc(b->p, cap);
        if (np == NULL)
            return -1;
        b->p = np;
        b->cap = cap;
    }
    memcpy(b->p + b->len, buf, len);
    b->len += len;
    return 0;
}

/* Packing helpers: each returns 0 or -1 (out of memory). */
static int pk_bytes(msgpack_packer *pk, struct rk_slice s)
{
    if (msgpack_pack_bin(pk, s.len) != 0)
        return -1;
    return s.len ? msgpack_pack_bin_body(pk, s.p, s.len) : 0;
}

static int pk_str(msgpack_packer *pk, struct rk_slice s)
{
    if (msgpack_pack_str(pk, s.len) != 0)
        return -1;
    return s.len ? msgpack_pack_str_body(pk, s.p, s.len) : 0;
}

static int pk_cstr(msgpack_packer *pk, const char *s)
{
    return pk_str(pk, RK_SLICE(s, strlen(s)));
}

static int pk_key(msgpack_packer *pk, unsigned k)
{
    return msgpack_pack_unsigned_int(pk, k);
}

static int wire__frame_begin(struct wire_cbuf *out, size_t *start)
{
    static const uint8_t zero[WIRE_CFRAME_HDR];
    *start = out->len;
    return wire__cbuf_write(out, (const char *)zero, sizeof(zero)) == 0
               ? 0
               : -ENOMEM;
}

static int wire__frame_end(struct wire_cbuf *out, size_t start)
{
    size_t body = out->len - start - WIRE_CFRAME_HDR;
    if (body > WIRE_CFRAME_MAX) {
        out->len = start;
        return RK_ETOOLARGE;
    }
    uint8_t *h = out->p + start;
    h[0] = (uint8_t)(body >> 24);
    h[1] = (uint8_t)(body >> 16);
    h[2] = (uint8_t)(body >> 8);
    h[3] = (uint8_t)body;
    return 0;
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

/* ---- request encoding ---------------------------------------------- */

static unsigned wire__popcount(uint32_t x)
{
    unsigned n = 0;
    for (; x; x &= x - 1)
        n++;
    return n;
}

static int wire__creq_pack(msgpack_packer *pk, const struct wire_creq *r)
{
    uint32_t has = r->has & 0x1ffu;
    if (msgpack_pack_map(pk, 2 + wire__popcount(has)) != 0)
        return -1;
    if (pk_key(pk, WIRE_CF_ID) || msgpack_pack_uint64(pk, r->id) ||
        pk_key(pk, WIRE_CF_OP) || msgpack_pack_uint32(pk, r->op))
        return -1;
    if ((has & WIRE_CREQ_CL) &&
        (pk_key(pk, WIRE_CF_CL) || msgpack_pack_uint32(pk, r->cl)))
        return -1;
    if ((has & WIRE_CREQ_KEY) &&
        (pk_key(pk, WIRE_CF_KEY) || pk_bytes(pk, r->key)))
        return -1;
    if ((has & WIRE_CREQ_VALUE) &&
        (pk_key(pk, WIRE_CF_VALUE) || pk_bytes(pk, r->value)))
        return -1;
    if ((has & WIRE_CREQ_TTL) &&
        (pk_key(pk, WIRE_CF_TTL) || msgpack_pack_uint32(pk, r->ttl)))
        return -1;
    if (has & WIRE_CREQ_KEYS) {
        if (pk_key(pk, WIRE_CF_KEYS) || msgpack_pack_array(pk, r->nkeys) != 0)
            return -1;
        for (size_t i = 0; i < r->nkeys; i++)
            if (pk_bytes(pk, r->keys[i]))
                return -1;
    }
    if ((has & WIRE_CREQ_PASSWORD) &&
        (pk_key(pk, WIRE_CF_PASSWORD) || pk_str(pk, r->password)))
        return -1;
    if (has & WIRE_CREQ_ARGS) {
        if (pk_key(pk, WIRE_CF_ARGS) || msgpack_pack_array(pk, r->nargs) != 0)
            return -1;
        for (size_t i = 0; i < r->nargs; i++)
            if (pk_str(pk, r->args[i]))
                return -1;
    }
    if ((has & WIRE_CREQ_VERSION) &&
        (pk_key(pk, WIRE_CF_VERSION) || msgpack_pack_uint32(pk, r->version)))
        return -1;
    if ((has & WIRE_CREQ_CLIENT) &&
        (pk_key(pk, WIRE_CF_CLIENT) || pk_str(pk, r->client)))
        return -1;
    return 0;
}

int wire_creq_encode(struct wire_cbuf *out, const struct wire_creq *req)
{
    const char *why = NULL;
    int rc = wire__creq_check(req, &why);
    if (rc != 0)
        return rc;
    size_t start;
    if ((rc = wire__frame_begin(out, &start)) != 0)
        return rc;
    msgpack_packer pk;
    msgpack_packer_init(&pk, out, wire__cbuf_write);
    if (wire__creq_pack(&pk, req) != 0) {
        out->len = start;
        return -ENOMEM;
    }
    return wire__frame_end(out, start);
}

/* ---- response encoding --------------------------------------------- */

static int wire__cnode_pack(msgpack_packer *pk, const struct wire_cnode *n)
{
    bool owns = n->owns >= 0 && !isnan(n->owns);
    bool repl = n->repl.len > 0;
    bool silent = n->silent_ms > 0;
    if (msgpack_pack_map(pk, 7 + (owns ? 1 : 0) + (repl ? 1 : 0) +
                                 (silent ? 1 : 0)) != 0)
        return -1;
    if (pk_key(pk, WIRE_CN_NAME) || pk_str(pk, n->name) ||
        pk_key(pk, WIRE_CN_ADDR) || pk_str(pk, n->addr) ||
        pk_key(pk, WIRE_CN_DC) || pk_str(pk, n->dc) ||
        pk_key(pk, WIRE_CN_RACK) || pk_str(pk, n->rack) ||
        pk_key(pk, WIRE_CN_STATE) || pk_str(pk, n->state) ||
        pk_key(pk, WIRE_CN_LOAD) || msgpack_pack_uint64(pk, n->load) ||
        pk_key(pk, WIRE_CN_TOKENS) || msgpack_pack_uint32(pk, n->tokens))
        return -1;
    if (owns && (pk_key(pk, WIRE_CN_OWNS) || msgpack_pack_double(pk, n->owns)))
        return -1;
    if (repl && (pk_key(pk, WIRE_CN_REPL) || pk_str(pk, n->repl)))
        return -1;
    if (silent &&
        (pk_key(pk, WIRE_CN_SILENT) || msgpack_pack_uint64(pk, n->silent_ms)))
        return -1;
    return 0;
}

static int wire__cresp_pack(msgpack_packer *pk, const struct wire_cresp *r)
{
    uint32_t has = r->has & 0xffffu;
    unsigned n = 2 + wire__popcount(has) + (r->err != 0 ? 1 : 0);
    if (msgpack_pack_map(pk, n) != 0)
        return -1;
    if (pk_key(pk, WIRE_CR_ID) || msgpack_pack_uint64(pk, r->id) ||
        pk_key(pk, WIRE_CR_OP) || msgpack_pack_uint32(pk, r->op))
        return -1;
    if (r->err != 0 &&
        (pk_key(pk, WIRE_CR_ERR) || pk_cstr(pk, wire_cerr_name(r->err))))
        return -1;
    if ((has & WIRE_CRESP_MSG) &&
        (pk_key(pk, WIRE_CR_MSG) || pk_str(pk, r->msg)))
        return -1;
    if ((has & WIRE_CRESP_ACKS) &&
        (pk_key(pk, WIRE_CR_ACKS) || msgpack_pack_uint32(pk, r->acks)))
        return -1;
    if ((has & WIRE_CRESP_NEED) &&
        (pk_key(pk, WIRE_CR_NEED) || msgpack_pack_uint32(pk, r->need)))
        return -1;
    if ((has & WIRE_CRESP_VALUE) &&
        (pk_key(pk, WIRE_CR_VALUE) || pk_bytes(pk, r->value)))
        return -1;
    if (has & WIRE_CRESP_VALUES) {
        if (pk_key(pk, WIRE_CR_VALUES) ||
            msgpack_pack_array(pk, r->nvalues) != 0)
            return -1;
        for (size_t i = 0; i < r->nvalues; i++) {
            if (r->values[i].found ? pk_bytes(pk, r->values[i].value)
                                   : msgpack_pack_nil(pk))
                return -1;
        }
    }
    if ((has & WIRE_CRESP_EPOCH) &&
        (pk_key(pk, WIRE_CR_EPOCH) || msgpack_pack_uint64(pk, r->epoch)))
        return -1;
    if ((has & WIRE_CRESP_FPRINT) &&
        (pk_key(pk, WIRE_CR_FPRINT) || msgpack_pack_uint64(pk, r->fprint)))
        return -1;
    if (has & WIRE_CRESP_NODES) {
        if (pk_key(pk, WIRE_CR_NODES) || msgpack_pack_array(pk, r->nnodes) != 0)
            return -1;
        for (size_t i = 0; i < r->nnodes; i++)
            if (wire__cnode_pack(pk, &r->nodes[i]))
                return -1;
    }
    if (has & WIRE_CRESP_TOKENS) {
        if (pk_key(pk, WIRE_CR_TOKENS) ||
            msgpack_pack_array(pk, r->ntokens) != 0)
            return -1;
        for (size_t i = 0; i < r->ntokens; i++) {
            if (msgpack_pack_array(pk, 2) ||
                msgpack_pack_uint64(pk, r->tokens[i].token) ||
                pk_str(pk, r->tokens[i].node))
                return -1;
        }
    }
    if (has & WIRE_CRESP_ENDPOINTS) {
        if (pk_key(pk, WIRE_CR_ENDPOINTS) ||
            msgpack_pack_array(pk, r->nendpoints) != 0)
            return -1;
        for (size_t i = 0; i < r->nendpoints; i++) {
            if (msgpack_pack_array(pk, 2) || pk_str(pk, r->endpoints[i].name) ||
                pk_str(pk, r->endpoints[i].addr))
                return -1;
        }
    }
    if ((has & WIRE_CRESP_TOKEN) &&
        (pk_key(pk, WIRE_CR_TOKEN) || msgpack_pack_uint64(pk, r->token)))
        return -1;
    if ((has & WIRE_CRESP_TEXT) &&
        (pk_key(pk, WIRE_CR_TEXT) || pk_str(pk, r->text)))
        return -1;
    if ((has & WIRE_CRESP_NODE) &&
        (pk_key(pk, WIRE_CR_NODE) || pk_str(pk, r->node)))
        return -1;
    if ((has & WIRE_CRESP_CLUSTER) &&
        (pk_key(pk, WIRE_CR_CLUSTER) || pk_str(pk, r->cluster)))
        return -1;
    if ((has & WIRE_CRESP_VERSION) &&
        (pk_key(pk, WIRE_CR_VERSION) || msgpack_pack_uint32(pk, r->version)))
        return -1;
    if ((has & WIRE_CRESP_SERVER) &&
        (pk_key(pk, WIRE_CR_SERVER) || pk_str(pk, r->server)))
        return -1;
    return 0;
}

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
    size_t start;
    if ((rc = wire__frame_begin(out, &start)) != 0)
        return rc;
    msgpack_packer pk;
    msgpack_packer_init(&pk, out, wire__cbuf_write);
    if (wire__cresp_pack(&pk, resp) != 0) {
        out->len = start;
        return -ENOMEM;
    }
    return wire__frame_end(out, start);
}

/* ---- reading (the shared reader of wire_internal.h) ----------------- */

/* Field numbers must be small unsigned ints; anything else is skipped as an
 * unknown field after being read as a value. Returns the key or UINT32_MAX
 * for a non-integer key (already skipped). */
static int rd_field(struct wire__rd *r, uint32_t *out)
{
    if (r->p < r->end && *r->p <= 0x7f) {
        *out = *r->p++;
        return 0;
    }
    *out = UINT32_MAX;
    return wire__rd_skip(r, 1);
}

/* Marks a field seen; a repeated field is malformed. */
static int rd_once(struct wire__rd *r, uint64_t *seen, uint32_t f)
{
    if (f >= 64)
        return 0;
    if (*seen & (UINT64_C(1) << f))
        return wire__rd_fail(r, WIRE__RD_BAD, "duplicate field");
    *seen |= UINT64_C(1) << f;
    return 0;
}

/* Closes a request or response body: no trailing bytes, and the id and op
 * fields (numbered alike in both, see client_msg.h) were present. */
static int rd_end(struct wire__rd *r, uint64_t seen)
{
    _Static_assert((int)WIRE_CF_ID == (int)WIRE_CR_ID &&
                       (int)WIRE_CF_OP == (int)WIRE_CR_OP,
                   "request and response share the id and op field numbers");
    if (r->p != r->end)
        return wire__rd_fail(r, WIRE__RD_BAD, "trailing bytes after the body");
    if (!(seen & (UINT64_C(1) << WIRE_CF_ID)))
        return wire__rd_fail(r, WIRE__RD_BAD, "missing request id");
    if (!(seen & (UINT64_C(1) << WIRE_CF_OP)))
        return wire__rd_fail(r, WIRE__RD_BAD, "missing op");
    return 0;
}

/* Allocate an array of n elements of size sz; n was bounded by the bytes
 * left, so the product cannot overflow for the sizes used here. */
static void *rd_alloc(size_t n, size_t sz)
{
    return calloc(n ? n : 1, sz);
}

static int rd_bytes_array(struct wire__rd *r,
                          struct rk_slice **out,
                          size_t *out_n,
                          size_t max,
                          bool str_only,
                          size_t elem_max)
{
    uint32_t n;
    int rc;
    if (*out != NULL)
        return wire__rd_fail(r, WIRE__RD_BAD, "duplicate field");
    if ((rc = wire__rd_container(r, false, &n, max)) != 0)
        return rc;
    struct rk_slice *a = rd_alloc(n, sizeof(*a));
    if (a == NULL)
        return wire__rd_fail(r, WIRE__RD_NOMEM, "out of memory");
    *out = a;
    *out_n = n;
    for (uint32_t i = 0; i < n; i++) {
        rc = str_only ? wire__rd_str(r, &a[i], elem_max)
                      : wire__rd_bytes(r, &a[i], elem_max);
        if (rc != 0)
            return rc;
    }
    return 0;
}

/* ---- request decoding ----------------------------------------------- */

static int wire__creq_read(struct wire__rd *r, struct wire_creq *q)
{
    uint32_t n, f;
    uint64_t seen = 0, v;
    int rc;
    if ((rc = wire__rd_container(r, true, &n, UINT32_MAX)) != 0)
        return rc;
    /* The id and op come first from our encoder; read them wherever they
     * are, and remember them even if a later field is bad. */
    for (uint32_t i = 0; i < n; i++) {
        if ((rc = rd_field(r, &f)) != 0)
            return rc;
        if (f == UINT32_MAX) {
            if ((rc = wire__rd_skip(r, 1)) != 0)
                return rc;
            continue;
        }
        if ((rc = rd_once(r, &seen, f)) != 0)
            return rc;
        switch (f) {
        case WIRE_CF_ID:
            if ((rc = wire__rd_uint(r, &v)) != 0)
                return rc;
            q->id = v;
            q->has_id = true;
            break;
        case WIRE_CF_OP:
            rc = wire__rd_uint32(r, &q->op);
            break;
        case WIRE_CF_CL:
            rc = wire__rd_uint32(r, &q->cl);
            q->has |= WIRE_CREQ_CL;
            break;
        case WIRE_CF_KEY:
            rc = wire__rd_bytes(r, &q->key, RK_MAX_KEY);
            q->has |= WIRE_CREQ_KEY;
            break;
        case WIRE_CF_VALUE:
            rc = wire__rd_bytes(r, &q->value, RK_MAX_VALUE);
            q->has |= WIRE_CREQ_VALUE;
            break;
        case WIRE_CF_TTL:
            rc = wire__rd_uint32(r, &q->ttl);
            q->has |= WIRE_CREQ_TTL;
            break;
        case WIRE_CF_KEYS:
            rc = rd_bytes_array(r, &q->keys, &q->nkeys, WIRE_CMGET_MAX, false,
                                RK_MAX_KEY);
            q->has |= WIRE_CREQ_KEYS;
            break;
        case WIRE_CF_PASSWORD:
            rc = wire__rd_bytes(r, &q->password, WIRE_CSTR_MAX);
            q->has |= WIRE_CREQ_PASSWORD;
            break;
        case WIRE_CF_ARGS:
            rc = rd_bytes_array(r, &q->args, &q->nargs, WIRE_CARGS_MAX, true,
                                WIRE_CSTR_MAX);
            q->has |= WIRE_CREQ_ARGS;
            break;
        case WIRE_CF_VERSION:
            rc = wire__rd_uint32(r, &q->version);
            q->has |= WIRE_CREQ_VERSION;
            break;
        case WIRE_CF_CLIENT:
            rc = wire__rd_str(r, &q->client, WIRE_CSTR_MAX);
            q->has |= WIRE_CREQ_CLIENT;
            break;
        default:
            rc = wire__rd_skip(r, 1);
            break;
        }
        if (rc != 0)
            return rc;
    }
    return rd_end(r, seen);
}

int wire_creq_decode(struct wire_creq *out, const uint8_t *body, size_t len)
{
    memset(out, 0, sizeof(*out));
    out->owned_arrays_ = true;
    if (len == 0 || len > WIRE_CFRAME_MAX) {
        out->why = len ? "frame too large" : "empty frame";
        return len ? RK_ETOOLARGE : RK_EBADREQ;
    }
    out->owned_ = malloc(len);
    if (out->owned_ == NULL) {
        out->why = "out of memory";
        return -ENOMEM;
    }
    memcpy(out->owned_, body, len);
    struct wire__rd r;
    wire__rd_init(&r, out->owned_, len);
    int rc = wire__creq_read(&r, out);
    if (rc != 0) {
        out->why = r.why;
        return wire__rd_code(rc, RK_EBADREQ);
    }
    const char *why = NULL;
    if ((rc = wire__creq_check(out, &why)) != 0)
        out->why = why;
    return rc;
}

void wire_creq_clear(struct wire_creq *req)
{
    if (req == NULL)
        return;
    if (req->owned_arrays_) {
        free(req->keys);
        free(req->args);
    }
    free(req->owned_);
    memset(req, 0, sizeof(*req));
}

/* ---- response decoding ---------------------------------------------- */

static int wire__cnode_read(struct wire__rd *r, struct wire_cnode *nd)
{
    uint32_t n, f;
    uint64_t seen = 0;
    int rc;
    nd->owns = -1;
    if ((rc = wire__rd_container(r, true, &n, UINT32_MAX)) != 0)
        return rc;
    for (uint32_t i = 0; i < n; i++) {
        if ((rc = rd_field(r, &f)) != 0)
            return rc;
        if (f == UINT32_MAX) {
            if ((rc = wire__rd_skip(r, 2)) != 0)
                return rc;
            continue;
        }
        if ((rc = rd_once(r, &seen, f)) != 0)
            return rc;
        switch (f) {
        case WIRE_CN_NAME:
            rc = wire__rd_str(r, &nd->name, WIRE_CSTR_MAX);
            break;
        case WIRE_CN_ADDR:
            rc = wire__rd_str(r, &nd->addr, WIRE_CSTR_MAX);
            break;
        case WIRE_CN_DC:
            rc = wire__rd_str(r, &nd->dc, WIRE_CSTR_MAX);
            break;
        case WIRE_CN_RACK:
            rc = wire__rd_str(r, &nd->rack, WIRE_CSTR_MAX);
            break;
        case WIRE_CN_STATE:
            rc = wire__rd_str(r, &nd->state, 16);
            break;
        case WIRE_CN_LOAD:
            rc = wire__rd_uint(r, &nd->load);
            break;
        case WIRE_CN_TOKENS:
            rc = wire__rd_uint32(r, &nd->tokens);
            break;
        case WIRE_CN_REPL:
            rc = wire__rd_str(r, &nd->repl, WIRE_CSTR_MAX);
            break;
        case WIRE_CN_SILENT:
            rc = wire__rd_uint(r, &nd->silent_ms);
            break;
        case WIRE_CN_OWNS:
            if ((rc = wire__rd_double(r, &nd->owns)) == 0 &&
                !(nd->owns >= 0 && nd->owns <= 1.000001))
                rc = wire__rd_fail(r, WIRE__RD_BAD, "ownership out of [0, 1]");
            break;
        default:
            rc = wire__rd_skip(r, 2);
            break;
        }
        if (rc != 0)
            return rc;
    }
    if (!(seen & (UINT64_C(1) << WIRE_CN_NAME)))
        return wire__rd_fail(r, WIRE__RD_BAD, "node without a name");
    return 0;
}

static int wire__cresp_read(struct wire__rd *r, struct wire_cresp *s)
{
    uint32_t n, f, cnt;
    uint64_t seen = 0;
    int rc;
    if ((rc = wire__rd_container(r, true, &n, UINT32_MAX)) != 0)
        return rc;
    for (uint32_t i = 0; i < n; i++) {
        if ((rc = rd_field(r, &f)) != 0)
            return rc;
        if (f == UINT32_MAX) {
            if ((rc = wire__rd_skip(r, 1)) != 0)
                return rc;
            continue;
        }
        if ((rc = rd_once(r, &seen, f)) != 0)
            return rc;
        switch (f) {
        case WIRE_CR_ID:
            rc = wire__rd_uint(r, &s->id);
            break;
        case WIRE_CR_OP:
            rc = wire__rd_uint32(r, &s->op);
            break;
        case WIRE_CR_ERR:
            if ((rc = wire__rd_str(r, &s->errname, WIRE_CMSG_MAX)) != 0)
                break;
            if (s->errname.len == 0) {
                rc = wire__rd_fail(r, WIRE__RD_BAD, "empty error name");
                break;
            }
            s->err = wire_cerr_code((const char *)s->errname.p, s->errname.len);
            if (s->err == 0)
                s->err = RK_EINTERNAL;
            break;
        case WIRE_CR_MSG:
            rc = wire__rd_str(r, &s->msg, WIRE_CMSG_MAX);
            s->has |= WIRE_CRESP_MSG;
            break;
        case WIRE_CR_ACKS:
            rc = wire__rd_uint32(r, &s->acks);
            s->has |= WIRE_CRESP_ACKS;
            break;
        case WIRE_CR_NEED:
            rc = wire__rd_uint32(r, &s->need);
            s->has |= WIRE_CRESP_NEED;
            break;
        case WIRE_CR_VALUE:
            rc = wire__rd_bytes(r, &s->value, RK_MAX_VALUE);
            s->has |= WIRE_CRESP_VALUE;
            break;
        case WIRE_CR_VALUES:
            if ((rc = wire__rd_container(r, false, &cnt, WIRE_CMGET_MAX)) != 0)
                break;
            if ((s->values = rd_alloc(cnt, sizeof(*s->values))) == NULL) {
                rc = wire__rd_fail(r, WIRE__RD_NOMEM, "out of memory");
                break;
            }
            s->nvalues = cnt;
            s->has |= WIRE_CRESP_VALUES;
            for (uint32_t j = 0; j < cnt && rc == 0; j++) {
                if (wire__rd_nil(r))
                    continue;
                s->values[j].found = true;
                rc = wire__rd_bytes(r, &s->values[j].value, RK_MAX_VALUE);
            }
            break;
        case WIRE_CR_EPOCH:
            rc = wire__rd_uint(r, &s->epoch);
            s->has |= WIRE_CRESP_EPOCH;
            break;
        case WIRE_CR_FPRINT:
            rc = wire__rd_uint(r, &s->fprint);
            s->has |= WIRE_CRESP_FPRINT;
            break;
        case WIRE_CR_NODES:
            if ((rc = wire__rd_container(r, false, &cnt, WIRE_CNODES_MAX)) != 0)
                break;
            if ((s->nodes = rd_alloc(cnt, sizeof(*s->nodes))) == NULL) {
                rc = wire__rd_fail(r, WIRE__RD_NOMEM, "out of memory");
                break;
            }
            s->nnodes = cnt;
            s->has |= WIRE_CRESP_NODES;
            for (uint32_t j = 0; j < cnt && rc == 0; j++)
                rc = wire__cnode_read(r, &s->nodes[j]);
            break;
        case WIRE_CR_TOKENS:
            if ((rc = wire__rd_container(r, false, &cnt, WIRE_CTOKENS_MAX)) !=
                0)
                break;
            if ((s->tokens = rd_alloc(cnt, sizeof(*s->tokens))) == NULL) {
                rc = wire__rd_fail(r, WIRE__RD_NOMEM, "out of memory");
                break;
            }
            s->ntokens = cnt;
            s->has |= WIRE_CRESP_TOKENS;
            for (uint32_t j = 0; j < cnt && rc == 0; j++) {
                uint32_t two;
                if ((rc = wire__rd_container(r, false, &two, 2)) != 0)
                    break;
                if (two != 2) {
                    rc = wire__rd_fail(r, WIRE__RD_BAD,
                                       "ring entry is not a pair");
                    break;
                }
                if ((rc = wire__rd_uint(r, &s->tokens[j].token)) == 0)
                    rc = wire__rd_str(r, &s->tokens[j].node, WIRE_CSTR_MAX);
            }
            break;
        case WIRE_CR_ENDPOINTS:
            if ((rc = wire__rd_container(r, false, &cnt,
                                         WIRE_CENDPOINTS_MAX)) != 0)
                break;
            if ((s->endpoints = rd_alloc(cnt, sizeof(*s->endpoints))) == NULL) {
                rc = wire__rd_fail(r, WIRE__RD_NOMEM, "out of memory");
                break;
            }
            s->nendpoints = cnt;
            s->has |= WIRE_CRESP_ENDPOINTS;
            for (uint32_t j = 0; j < cnt && rc == 0; j++) {
                uint32_t two;
                if ((rc = wire__rd_container(r, false, &two, 2)) != 0)
                    break;
                if (two != 2) {
                    rc = wire__rd_fail(r, WIRE__RD_BAD,
                                       "endpoint is not a pair");
                    break;
                }
                if ((rc = wire__rd_str(r, &s->endpoints[j].name,
                                       WIRE_CSTR_MAX)) == 0)
                    rc = wire__rd_str(r, &s->endpoints[j].addr, WIRE_CSTR_MAX);
            }
            break;
        case WIRE_CR_TOKEN:
            rc = wire__rd_uint(r, &s->token);
            s->has |= WIRE_CRESP_TOKEN;
            break;
        case WIRE_CR_TEXT:
            rc = wire__rd_str(r, &s->text, WIRE_CFRAME_MAX);
            s->has |= WIRE_CRESP_TEXT;
            break;
        case WIRE_CR_NODE:
            rc = wire__rd_str(r, &s->node, WIRE_CSTR_MAX);
            s->has |= WIRE_CRESP_NODE;
            break;
        case WIRE_CR_CLUSTER:
            rc = wire__rd_str(r, &s->cluster, WIRE_CSTR_MAX);
            s->has |= WIRE_CRESP_CLUSTER;
            break;
        case WIRE_CR_VERSION:
            rc = wire__rd_uint32(r, &s->version);
            s->has |= WIRE_CRESP_VERSION;
            break;
        case WIRE_CR_SERVER:
            rc = wire__rd_str(r, &s->server, WIRE_CSTR_MAX);
            s->has |= WIRE_CRESP_SERVER;
            break;
        default:
            rc = wire__rd_skip(r, 1);
            break;
        }
        if (rc != 0)
            return rc;
    }
    return rd_end(r, seen);
}

int wire_cresp_decode(struct wire_cresp *out, const uint8_t *body, size_t len)
{
    memset(out, 0, sizeof(*out));
    out->owned_arrays_ = true;
    if (len == 0 || len > WIRE_CFRAME_MAX) {
        out->why = len ? "frame too large" : "empty frame";
        return len ? RK_ETOOLARGE : RK_EPROTO;
    }
    out->owned_ = malloc(len);
    if (out->owned_ == NULL) {
        out->why = "out of memory";
        return -ENOMEM;
    }
    memcpy(out->owned_, body, len);
    struct wire__rd r;
    wire__rd_init(&r, out->owned_, len);
    int rc = wire__cresp_read(&r, out);
    if (rc != 0) {
        out->why = r.why;
        return wire__rd_code(rc, RK_EPROTO);
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
    if (resp->owned_arrays_) {
        free(resp->values);
        free(resp->nodes);
        free(resp->tokens);
        free(resp->endpoints);
    }
    free(resp->owned_);
    memset(resp, 0, sizeof(*resp));
}
