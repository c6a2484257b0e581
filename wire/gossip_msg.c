/*
 * gossip_msg.c - encoder and decoder of the gossip packets (SYN/ACK/ACK2).
 *
 * The layout is in gossip_msg.h. The decoder authenticates first (a packet
 * from outside the cluster costs one HMAC and is never parsed), then lets
 * wire_unpack() prove the msgpack honest, then copies every field into plain
 * structs through the checked wire_obj_* readers.
 */
#include "wire/gossip_msg.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include <msgpack.h>

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

/* ---- encoder ------------------------------------------------------------ */

static int pack_slice_str(msgpack_packer *pk, struct rk_slice s)
{
    if (msgpack_pack_str(pk, s.len) != 0)
        return -1;
    return s.len ? msgpack_pack_str_body(pk, s.p, s.len) : 0;
}

static int pack_msg(msgpack_packer *pk, const struct wire_gossip_msg *m)
{
    if (msgpack_pack_array(pk, 5) || pack_slice_str(pk, m->cluster) ||
        msgpack_pack_uint64(pk, (uint64_t)m->type) ||
        pack_slice_str(pk, m->from) || msgpack_pack_array(pk, m->n_digests))
        return -1;
    for (size_t i = 0; i < m->n_digests; i++) {
        const struct wire_gossip_digest *d = &m->digests[i];
        if (msgpack_pack_array(pk, 3) || pack_slice_str(pk, d->node) ||
            msgpack_pack_uint64(pk, d->generation) ||
            msgpack_pack_uint64(pk, d->version))
            return -1;
    }
    if (msgpack_pack_array(pk, m->n_deltas))
        return -1;
    for (size_t i = 0; i < m->n_deltas; i++) {
        const struct wire_gossip_delta *d = &m->deltas[i];
        if (msgpack_pack_array(pk, 5) || pack_slice_str(pk, d->node) ||
            msgpack_pack_uint64(pk, d->generation) ||
            msgpack_pack_uint64(pk, d->base) ||
            msgpack_pack_uint64(pk, d->top) ||
            msgpack_pack_array(pk, d->n_states))
            return -1;
        for (size_t j = 0; j < d->n_states; j++) {
            const struct wire_gossip_state *s = &d->states[j];
            if (msgpack_pack_array(pk, 3) || msgpack_pack_uint32(pk, s->key) ||
                msgpack_pack_uint64(pk, s->version) ||
                msgpack_pack_bin(pk, s->value.len) ||
                (s->value.len &&
                 msgpack_pack_bin_body(pk, s->value.p, s->value.len)))
                return -1;
        }
    }
    return 0;
}

int wire_gossip_msg_encode(uint8_t **out,
                           size_t *out_len,
                           const struct wire_gossip_msg *m,
                           const struct wire_key *key)
{
    if (m->type < WIRE_GOSSIP_SYN || m->type > WIRE_GOSSIP_ACK2 ||
        !name_ok(m->cluster) || !name_ok(m->from))
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

    msgpack_sbuffer sb;
    msgpack_packer pk;
    int rc = -ENOMEM;
    msgpack_sbuffer_init(&sb);
    msgpack_packer_init(&pk, &sb, msgpack_sbuffer_write);
    static const char header[WIRE_GOSSIP_HEADER] = {'R', 'K', 'G',
                                                    WIRE_GOSSIP_VERSION};
    if (msgpack_sbuffer_write(&sb, header, sizeof(header)) != 0 ||
        pack_msg(&pk, m) != 0)
        goto free_buffer;
    if (sb.size + WIRE_MAC_BYTES > WIRE_GOSSIP_MAX_PACKET) {
        rc = RK_ETOOLARGE;
        goto free_buffer;
    }
    uint8_t mac[WIRE_MAC_BYTES];
    wire_mac_compute(mac, key, (const uint8_t *)sb.data, sb.size);
    if (msgpack_sbuffer_write(&sb, (const char *)mac, sizeof(mac)) != 0)
        goto free_buffer;
    *out_len = sb.size;
    *out = (uint8_t *)msgpack_sbuffer_release(&sb);
    return 0;

free_buffer:
    msgpack_sbuffer_destroy(&sb);
    return rc;
}

/* ---- decoder ------------------------------------------------------------ */

void wire_gossip_msg_release(struct wire_gossip_msg *m)
{
    if (m == NULL || !m->owned_)
        return;
    free(m->digests);
    free(m->deltas);
    free(m->state_pool_);
    memset(m, 0, sizeof(*m));
}

static int decode_digest(struct wire_gossip_digest *out,
                         const msgpack_object *o)
{
    const msgpack_object *f;
    size_t n;
    if (wire_obj_array(&f, &n, o, 3, 0) ||
        wire_obj_str(&out->node, &f[0], WIRE_GOSSIP_MAX_NAME) ||
        !name_ok(out->node) || wire_obj_u64(&out->generation, &f[1]) ||
        wire_obj_u64(&out->version, &f[2]))
        return RK_EPROTO;
    return 0;
}

static int decode_state(struct wire_gossip_state *out, const msgpack_object *o)
{
    const msgpack_object *f;
    size_t n;
    uint64_t key;
    if (wire_obj_array(&f, &n, o, 3, 0) || wire_obj_u64(&key, &f[0]) ||
        key > WIRE_GOSSIP_MAX_KEY || wire_obj_u64(&out->version, &f[1]) ||
        wire_obj_bin(&out->value, &f[2], WIRE_GOSSIP_MAX_VALUE))
        return RK_EPROTO;
    out->key = (uint32_t)key;
    return 0;
}

/* Decodes delta fields; states go to pool[*used...]. */
static int decode_delta(struct wire_gossip_delta *out,
                        struct wire_gossip_state *pool,
                        size_t pool_cap,
                        size_t *used,
                        const msgpack_object *o)
{
    const msgpack_object *f, *st;
    size_t n, n_st;
    if (wire_obj_array(&f, &n, o, 5, 0) ||
        wire_obj_str(&out->node, &f[0], WIRE_GOSSIP_MAX_NAME) ||
        wire_obj_u64(&out->generation, &f[1]) ||
        wire_obj_u64(&out->base, &f[2]) || wire_obj_u64(&out->top, &f[3]) ||
        wire_obj_array(&st, &n_st, &f[4], 0, WIRE_GOSSIP_MAX_STATES) ||
        n_st > pool_cap - *used)
        return RK_EPROTO;
    out->states = n_st > 0 ? pool + *used : NULL;
    out->n_states = n_st;
    for (size_t i = 0; i < n_st; i++)
        if (decode_state(&out->states[i], &st[i]) != 0)
            return RK_EPROTO;
    *used += n_st;
    return delta_check(out) == 0 ? 0 : RK_EPROTO;
}

static int decode_body(struct wire_gossip_msg *out, const msgpack_object *root)
{
    const msgpack_object *f, *dg, *dl;
    size_t n, n_dg, n_dl;
    uint64_t type;
    if (wire_obj_array(&f, &n, root, 5, 0) ||
        wire_obj_str(&out->cluster, &f[0], WIRE_GOSSIP_MAX_NAME) ||
        !name_ok(out->cluster) || wire_obj_u64(&type, &f[1]) ||
        type < WIRE_GOSSIP_SYN || type > WIRE_GOSSIP_ACK2 ||
        wire_obj_str(&out->from, &f[2], WIRE_GOSSIP_MAX_NAME) ||
        !name_ok(out->from) ||
        wire_obj_array(&dg, &n_dg, &f[3], 0, WIRE_GOSSIP_MAX_DIGESTS) ||
        wire_obj_array(&dl, &n_dl, &f[4], 0, WIRE_GOSSIP_MAX_DELTAS))
        return RK_EPROTO;
    out->type = (enum wire_gossip_type)type;

    /* Count states first so one allocation holds them all. */
    size_t n_states = 0;
    for (size_t i = 0; i < n_dl; i++) {
        if (dl[i].type != MSGPACK_OBJECT_ARRAY || dl[i].via.array.size != 5 ||
            dl[i].via.array.ptr[4].type != MSGPACK_OBJECT_ARRAY)
            return RK_EPROTO;
        n_states += dl[i].via.array.ptr[4].via.array.size;
    }
    out->owned_ = 1;
    if (n_dg > 0 &&
        (out->digests = calloc(n_dg, sizeof(*out->digests))) == NULL)
        return -ENOMEM;
    if (n_dl > 0 && (out->deltas = calloc(n_dl, sizeof(*out->deltas))) == NULL)
        return -ENOMEM;
    if (n_states > 0 && (out->state_pool_ = calloc(
                             n_states, sizeof(*out->state_pool_))) == NULL)
        return -ENOMEM;
    for (size_t i = 0; i < n_dg; i++) {
        if (decode_digest(&out->digests[i], &dg[i]) != 0)
            return RK_EPROTO;
        out->n_digests++;
    }
    size_t used = 0;
    struct wire_gossip_state *pool = out->state_pool_;
    for (size_t i = 0; i < n_dl; i++) {
        if (decode_delta(&out->deltas[i], pool, n_states, &used, &dl[i]) != 0)
            return RK_EPROTO;
        out->n_deltas++;
    }
    return 0;
}

int wire_gossip_msg_decode(struct wire_gossip_msg *out,
                           const struct wire_key *key,
                           const uint8_t *pkt,
                           size_t len)
{
    memset(out, 0, sizeof(*out));
    if (pkt == NULL || len < WIRE_GOSSIP_HEADER + 1 + WIRE_MAC_BYTES ||
        len > WIRE_GOSSIP_MAX_PACKET || memcmp(pkt, WIRE_GOSSIP_MAGIC, 3) != 0)
        return RK_EPROTO;
    size_t signed_len = len - WIRE_MAC_BYTES;
    if (wire_mac_verify(pkt + signed_len, key, pkt, signed_len) != 0)
        return RK_EAUTH;
    if (pkt[3] != WIRE_GOSSIP_VERSION)
        return RK_EVERSION;

    msgpack_unpacked up;
    msgpack_unpacked_init(&up);
    int rc = wire_unpack(&up, pkt + WIRE_GOSSIP_HEADER,
                         signed_len - WIRE_GOSSIP_HEADER);
    if (rc == 0)
        rc = decode_body(out, &up.data);
    msgpack_unpacked_destroy(&up);
    if (rc != 0)
        wire_gossip_msg_release(out);
    return rc;
}
