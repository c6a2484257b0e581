/*
 * gossip_probe.c - encoder and decoder of the failure detector's packets
 * (PING, PING_REQ, ACK, NACK, NEWS).
 *
 * The layout is in gossip_probe.h. The envelope (magic, version, MAC) is
 * seal.c's, shared with gossip_msg.c: the decoder authenticates before it
 * reads anything. The fields are written down once, in the tables below,
 * which the generic encoder and decoder walk (codec.c, as gossip_msg.c's):
 * the decoder allocates the rumor array only once its count has been
 * checked against the bytes left. Apart from gossip_msg.c because it is a
 * second message family with its own magic: the anti-entropy packets'
 * codec does not change.
 */
#include "wire/gossip_probe.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "wire/wire_internal.h"

_Static_assert(WIRE_PROBE_HEADER == WIRE__SEAL_HEADER, "envelope header");

/* ---- sizes -------------------------------------------------------------- */

size_t wire_probe_size_base(size_t cluster_len,
                            size_t from_len,
                            size_t target_len,
                            size_t n_rumors)
{
    return WIRE_PROBE_HEADER + wire_size_array(7) + wire_size_str(cluster_len) +
           wire_size_uint(WIRE_PROBE_NEWS) + wire_size_str(from_len) +
           wire_size_uint(UINT64_MAX) + wire_size_str(target_len) +
           wire_size_uint(UINT64_MAX) + wire_size_array(n_rumors) +
           2 * wire_size_uint(UINT64_MAX) + WIRE_MAC_BYTES;
}

size_t wire_probe_size_rumor(const struct wire_probe_rumor *r)
{
    return wire_size_array(5) + wire_size_str(r->node.len) +
           wire_size_uint(r->generation) + wire_size_uint(r->incarnation) +
           wire_size_uint((uint64_t)r->kind) + wire_size_str(r->origin.len);
}

/* ---- validation shared by both directions ------------------------------- */

static int name_ok(struct rk_slice s)
{
    return s.len >= 1 && s.len <= WIRE_PROBE_MAX_NAME;
}

static int type_ok(uint64_t t)
{
    return t >= WIRE_PROBE_PING && t <= WIRE_PROBE_NEWS;
}

/* NEWS names no target; every other type names one. */
static int target_ok(enum wire_probe_type t, struct rk_slice target)
{
    return t == WIRE_PROBE_NEWS ? target.len == 0 : name_ok(target);
}

static int rumor_ok(const struct wire_probe_rumor *r)
{
    return name_ok(r->node) && name_ok(r->origin) && r->generation != 0 &&
           (r->kind == WIRE_PROBE_ALIVE || r->kind == WIRE_PROBE_SUSPECT);
}

int wire_probe_is(const uint8_t *pkt, size_t len)
{
    return pkt != NULL && len >= 3 && memcmp(pkt, WIRE_PROBE_MAGIC, 3) == 0;
}

/* ---- field tables ------------------------------------------------------- */

_Static_assert(sizeof(enum wire_probe_type) == sizeof(uint32_t) &&
                   sizeof(enum wire_probe_rumor_kind) == sizeof(uint32_t),
               "the type and the rumor kind are read as uint32_t");

/* A name: 1..WIRE_PROBE_MAX_NAME bytes of str. */
#define NAME(T, m) WIRE__FIELD(STR, T, m, .min = 1, .max = WIRE_PROBE_MAX_NAME)

/* rumor = [node, generation, incarnation, kind, origin] */
static const struct wire__field rumor_fields[] = {
    NAME(struct wire_probe_rumor, node),
    WIRE__FIELD(UINT, struct wire_probe_rumor, generation, .min = 1),
    WIRE__FIELD(UINT, struct wire_probe_rumor, incarnation),
    WIRE__FIELD(UINT32,
                struct wire_probe_rumor,
                kind,
                .min = WIRE_PROBE_ALIVE,
                .max = WIRE_PROBE_SUSPECT),
    NAME(struct wire_probe_rumor, origin),
};

static const struct wire__layout rumor_layout =
    WIRE__LAYOUT(TUPLE, struct wire_probe_rumor, rumor_fields);

static int msg_read_check(struct wire__rd *r, const void *base)
{
    const struct wire_probe_msg *m = base;
    if (!target_ok(m->type, m->target))
        return wire__rd_fail(r, WIRE__RD_BAD, "bad target");
    return 0;
}

/* [cluster, type, from, seq, target, incarnation, [rumor...]]; the target
 * is checked against the type after */
static const struct wire__field msg_fields[] = {
    NAME(struct wire_probe_msg, cluster),
    WIRE__FIELD(UINT32,
                struct wire_probe_msg,
                type,
                .min = WIRE_PROBE_PING,
                .max = WIRE_PROBE_NEWS),
    NAME(struct wire_probe_msg, from),
    WIRE__FIELD(UINT, struct wire_probe_msg, seq),
    WIRE__FIELD(STR, struct wire_probe_msg, target, .max = WIRE_PROBE_MAX_NAME),
    WIRE__FIELD(UINT, struct wire_probe_msg, incarnation),
    WIRE__ARRAY(struct wire_probe_msg,
                rumors,
                n_rumors,
                WIRE_PROBE_MAX_RUMORS,
                &rumor_layout),
};

static const struct wire__layout msg_layout = WIRE__LAYOUT(
    TUPLE, struct wire_probe_msg, msg_fields, .check = msg_read_check);

/* The same and which packet of its sender it is: [..., [rumor...], boot,
 * pkt_seq]. Two more elements, sent only to peers that announce FRESH
 * (gossip/fresh.c): nodes that predate them read the seven. */
static const struct wire__field fresh_msg_fields[] = {
    {.kind = WIRE__K_GROUP, .off = 0, .sub = &msg_layout},
    WIRE__FIELD(UINT, struct wire_probe_msg, boot, .min = 1),
    WIRE__FIELD(UINT, struct wire_probe_msg, pkt_seq, .min = 1),
};

static const struct wire__layout fresh_msg_layout =
    WIRE__LAYOUT(TUPLE, struct wire_probe_msg, fresh_msg_fields);

/* The layout of the body r starts at, by its element count. */
static const struct wire__layout *body_layout(const struct wire__rd *r)
{
    struct wire__rd peek = *r;
    uint64_t n;
    if (wire__rd_head(&peek, false, &n) == 0 &&
        n == sizeof(msg_fields) / sizeof(msg_fields[0]) + 2)
        return &fresh_msg_layout;
    return &msg_layout;
}

/* ---- encoder ------------------------------------------------------------ */

int wire_probe_msg_encode(uint8_t **out,
                          size_t *out_len,
                          const struct wire_probe_msg *m,
                          const struct wire_key *key)
{
    if (!type_ok((uint64_t)m->type) || !name_ok(m->cluster) ||
        !name_ok(m->from) || !target_ok(m->type, m->target) ||
        (m->boot != 0 && m->pkt_seq == 0))
        return RK_EBADREQ;
    if (m->n_rumors > WIRE_PROBE_MAX_RUMORS)
        return RK_ETOOLARGE;
    for (size_t i = 0; i < m->n_rumors; i++)
        if (!rumor_ok(&m->rumors[i]))
            return RK_EBADREQ;

    uint8_t *buf = NULL;
    size_t len = 0, cap = 0;
    struct wire__wr w;
    wire__seal_begin(&w, &buf, &len, &cap, WIRE_PROBE_MAGIC,
                     WIRE_PROBE_VERSION);
    wire__encode(&w, m->boot ? &fresh_msg_layout : &msg_layout, m);
    return wire__seal(out, out_len, &w, key, WIRE_PROBE_MAX_PACKET);
}

/* ---- decoder ------------------------------------------------------------ */

void wire_probe_msg_release(struct wire_probe_msg *m)
{
    if (m == NULL || !m->owned_)
        return;
    wire__free(&msg_layout, m);
    memset(m, 0, sizeof(*m));
}

int wire_probe_msg_decode(struct wire_probe_msg *out,
                          const struct wire_key *key,
                          const uint8_t *pkt,
                          size_t len)
{
    memset(out, 0, sizeof(*out));
    struct rk_slice body;
    int rc = wire__unseal(&body, pkt, len, WIRE_PROBE_MAGIC, WIRE_PROBE_VERSION,
                          key, WIRE_PROBE_MAX_PACKET);
    if (rc != 0)
        return rc;
    struct wire__rd r;
    wire__rd_init(&r, body.p, body.len);
    out->owned_ = 1;
    rc = wire__decode(&r, body_layout(&r), out, 0);
    if (rc == 0 && wire__rd_left(&r) != 0)
        rc = WIRE__RD_BAD; /* bytes after the message */
    if (rc != 0) {
        wire_probe_msg_release(out);
        /* any malformation, over a limit included, is not our packet */
        rc = rc == WIRE__RD_NOMEM ? -ENOMEM : RK_EPROTO;
    }
    return rc;
}
