/*
 * gossip_msg.c - encoder and decoder of the gossip packets (SYN/ACK/ACK2).
 *
 * The layout is in gossip_msg.h and, field by field, in the tables below,
 * which wire/'s one encoder and one decoder walk (codec.c). The decoder
 * authenticates first (a packet from outside the cluster costs one HMAC and
 * is never parsed), then reads the body through the bounds-checked reader,
 * which checks every count against the bytes left before anything is
 * allocated.
 */
#include "wire/gossip_msg.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "wire/wire_internal.h"

_Static_assert(WIRE_GOSSIP_HEADER == WIRE__SEAL_HEADER, "envelope header");

/* ---- sizes -------------------------------------------------------------- */

size_t wire_gossip_size_base(size_t cluster_len,
                             size_t from_len,
                             size_t n_digests,
                             size_t n_deltas)
{
    return WIRE_GOSSIP_HEADER + wire_size_array(5) +
           wire_size_str(cluster_len) + wire_size_uint(WIRE_GOSSIP_ACK2) +
           wire_size_str(from_len) + wire_size_array(n_digests) +
           wire_size_array(n_deltas) + WIRE_MAC_BYTES;
}

size_t wire_gossip_size_clock(uint64_t wall_ms)
{
    /* a fixarray of 6 takes the byte of a fixarray of 5 */
    return wall_ms ? wire_size_uint(wall_ms) : 0;
}

size_t wire_gossip_size_fresh(uint64_t boot, uint64_t seq)
{
    /* a fixarray of 8 takes the byte of a fixarray of 5; wall_ms, when 0,
     * takes one byte, which wire_gossip_size_clock(UINT64_MAX) covers */
    return boot ? wire_size_uint(boot) + wire_size_uint(seq) : 0;
}

size_t wire_gossip_size_digest(const struct wire_gossip_digest *d)
{
    return wire_size_array(3) + wire_size_str(d->node.len) +
           wire_size_uint(d->generation) + wire_size_uint(d->version);
}

size_t wire_gossip_size_delta_head(const struct wire_gossip_delta *d,
                                   size_t n_states)
{
    return wire_size_array(5) + wire_size_str(d->node.len) +
           wire_size_uint(d->generation) + wire_size_uint(d->base) +
           wire_size_uint(d->top) + wire_size_array(n_states);
}

size_t wire_gossip_size_state(const struct wire_gossip_state *s)
{
    return wire_size_array(3) + wire_size_uint(s->key) +
           wire_size_uint(s->version) + wire_size_bin(s->value.len);
}

/* ---- validation shared by both directions ------------------------------- */

static int name_ok(struct rk_slice s)
{
    return s.len >= 1 && s.len <= WIRE_GOSSIP_MAX_NAME;
}

static int delta_check(const struct wire_gossip_delta *d)
{
    if (!name_ok(d->node) || d->base > d->top)
        return RK_EPROTO;
    if (d->n_states > WIRE_GOSSIP_MAX_STATES)
        return RK_ETOOLARGE;
    for (size_t i = 0; i < d->n_states; i++) {
        const struct wire_gossip_state *s = &d->states[i];
        if (s->key > WIRE_GOSSIP_MAX_KEY || s->version <= d->base ||
            s->version > d->top)
            return RK_EPROTO;
        if (s->value.len > WIRE_GOSSIP_MAX_VALUE)
            return RK_ETOOLARGE;
    }
    return 0;
}

/* ---- field tables ------------------------------------------------------- */

static int delta_read_check(struct wire__rd *r, const void *base)
{
    if (delta_check(base) != 0)
        return wire__rd_fail(r, WIRE__RD_BAD, "bad delta");
    return 0;
}

/* A name: 1..WIRE_GOSSIP_MAX_NAME bytes of str. */
#define NAME(T, m) WIRE__FIELD(STR, T, m, .min = 1, .max = WIRE_GOSSIP_MAX_NAME)

/* digest = [node, generation, version] */
static const struct wire__field digest_fields[] = {
    NAME(struct wire_gossip_digest, node),
    WIRE__FIELD(UINT, struct wire_gossip_digest, generation),
    WIRE__FIELD(UINT, struct wire_gossip_digest, version),
};

static const struct wire__layout digest_layout =
    WIRE__LAYOUT(TUPLE, struct wire_gossip_digest, digest_fields);

/* state = [key, version, value(bin)] */
static const struct wire__field state_fields[] = {
    WIRE__FIELD(
        UINT32, struct wire_gossip_state, key, .max = WIRE_GOSSIP_MAX_KEY),
    WIRE__FIELD(UINT, struct wire_gossip_state, version),
    WIRE__FIELD(
        BIN, struct wire_gossip_state, value, .max = WIRE_GOSSIP_MAX_VALUE),
};

static const struct wire__layout state_layout =
    WIRE__LAYOUT(TUPLE, struct wire_gossip_state, state_fields);

/* delta = [node, generation, base, top, [state...]]; delta_check() after */
static const struct wire__field delta_fields[] = {
    NAME(struct wire_gossip_delta, node),
    WIRE__FIELD(UINT, struct wire_gossip_delta, generation),
    WIRE__FIELD(UINT, struct wire_gossip_delta, base),
    WIRE__FIELD(UINT, struct wire_gossip_delta, top),
    WIRE__ARRAY(struct wire_gossip_delta,
                states,
                n_states,
                WIRE_GOSSIP_MAX_STATES,
                &state_layout),
};

static const struct wire__layout delta_layout = WIRE__LAYOUT(
    TUPLE, struct wire_gossip_delta, delta_fields, .check = delta_read_check);

_Static_assert(sizeof(enum wire_gossip_type) == sizeof(uint32_t),
               "the message type is read as a uint32_t");

/* [cluster, type, from, [digest...], [delta...]] */
static const struct wire__field msg_fields[] = {
    NAME(struct wire_gossip_msg, cluster),
    WIRE__FIELD(UINT32,
                struct wire_gossip_msg,
                type,
                .min = WIRE_GOSSIP_SYN,
                .max = WIRE_GOSSIP_ACK2),
    NAME(struct wire_gossip_msg, from),
    WIRE__ARRAY(struct wire_gossip_msg,
                digests,
                n_digests,
                WIRE_GOSSIP_MAX_DIGESTS,
                &digest_layout),
    WIRE__ARRAY(struct wire_gossip_msg,
                deltas,
                n_deltas,
                WIRE_GOSSIP_MAX_DELTAS,
                &delta_layout),
};

static const struct wire__layout msg_layout =
    WIRE__LAYOUT(TUPLE, struct wire_gossip_msg, msg_fields);

/* The same and the sender's wall clock: [..., [delta...], wall_ms]. A
 * sixth element, not a new field of every packet, so that nodes that
 * predate it still read the packets sent to them (round.c sends it only to
 * peers that announce CLOCK). */
static const struct wire__field clock_msg_fields[] = {
    /* msg_layout's fields, inline: they live in the same struct */
    {.kind = WIRE__K_GROUP, .off = 0, .sub = &msg_layout},
    WIRE__FIELD(UINT, struct wire_gossip_msg, wall_ms, .min = 1),
};

static const struct wire__layout clock_msg_layout =
    WIRE__LAYOUT(TUPLE, struct wire_gossip_msg, clock_msg_fields);

/* The same, the wall clock (0: none) and which packet of its sender it
 * is: [..., [delta...], wall_ms, boot, seq]. Two more elements, sent only
 * to peers that announce FRESH (gossip/fresh.c), for the reason above. */
static const struct wire__field fresh_msg_fields[] = {
    {.kind = WIRE__K_GROUP, .off = 0, .sub = &msg_layout},
    WIRE__FIELD(UINT, struct wire_gossip_msg, wall_ms),
    WIRE__FIELD(UINT, struct wire_gossip_msg, boot, .min = 1),
    WIRE__FIELD(UINT, struct wire_gossip_msg, seq, .min = 1),
};

static const struct wire__layout fresh_msg_layout =
    WIRE__LAYOUT(TUPLE, struct wire_gossip_msg, fresh_msg_fields);

#define N_MSG_FIELDS (sizeof(msg_fields) / sizeof(msg_fields[0]))

/* The layout of the message body r starts at: by its element count
 * (msg_fields', the wall clock's, boot and seq's). */
static const struct wire__layout *body_layout(const struct wire__rd *r)
{
    struct wire__rd peek = *r;
    uint64_t n;
    if (wire__rd_head(&peek, false, &n) != 0)
        return &msg_layout; /* which reports it */
    return n == N_MSG_FIELDS + 1   ? &clock_msg_layout
           : n == N_MSG_FIELDS + 3 ? &fresh_msg_layout
                                   : &msg_layout;
}

/* ---- encoder ------------------------------------------------------------ */

int wire_gossip_msg_encode(uint8_t **out,
                           size_t *out_len,
                           const struct wire_gossip_msg *m,
                           const struct wire_key *key)
{
    if (m->type < WIRE_GOSSIP_SYN || m->type > WIRE_GOSSIP_ACK2 ||
        !name_ok(m->cluster) || !name_ok(m->from) ||
        (m->boot != 0 && m->seq == 0))
        return RK_EBADREQ;
    if (m->n_digests > WIRE_GOSSIP_MAX_DIGESTS ||
        m->n_deltas > WIRE_GOSSIP_MAX_DELTAS)
        return RK_ETOOLARGE;
    for (size_t i = 0; i < m->n_digests; i++)
        if (!name_ok(m->digests[i].node))
            return RK_EBADREQ;
    for (size_t i = 0; i < m->n_deltas; i++) {
        int rc = delta_check(&m->deltas[i]);
        if (rc != 0)
            return rc == RK_EPROTO ? RK_EBADREQ : rc;
    }

    uint8_t *buf = NULL;
    size_t len = 0, cap = 0;
    struct wire__wr w;
    wire__seal_begin(&w, &buf, &len, &cap, WIRE_GOSSIP_MAGIC,
                     WIRE_GOSSIP_VERSION);
    wire__encode(&w,
                 m->boot      ? &fresh_msg_layout
                 : m->wall_ms ? &clock_msg_layout
                              : &msg_layout,
                 m);
    return wire__seal(out, out_len, &w, key, WIRE_GOSSIP_MAX_PACKET);
}

/* ---- decoder ------------------------------------------------------------ */

void wire_gossip_msg_release(struct wire_gossip_msg *m)
{
    if (m == NULL || !m->owned_)
        return;
    wire__free(&msg_layout, m);
    memset(m, 0, sizeof(*m));
}

int wire_gossip_msg_decode(struct wire_gossip_msg *out,
                           const struct wire_key *key,
                           const uint8_t *pkt,
                           size_t len)
{
    memset(out, 0, sizeof(*out));
    struct rk_slice body;
    int rc = wire__unseal(&body, pkt, len, WIRE_GOSSIP_MAGIC,
                          WIRE_GOSSIP_VERSION, key, WIRE_GOSSIP_MAX_PACKET);
    if (rc != 0)
        return rc;
    struct wire__rd r;
    wire__rd_init(&r, body.p, body.len);
    out->owned_ = 1;
    rc = wire__decode(&r, body_layout(&r), out, 0);
    if (rc == 0 && r.p != r.end)
        rc = RK_EPROTO; /* bytes after the message */
    if (rc != 0) {
        wire_gossip_msg_release(out);
        return rc == WIRE__RD_NOMEM ? -ENOMEM : RK_EPROTO;
    }
    return 0;
}
