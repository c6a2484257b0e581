/*
 * fuzz_gossip_msg.c - the gossip packet decoder and the state machine
 * behind it.
 *
 * Random bytes almost never carry a valid MAC, so each input is used twice:
 * as a raw packet (exercising the header and MAC checks) and as the msgpack
 * body of a packet the target seals itself with the fuzz key, which reaches
 * the parser. A body that decodes must re-encode and decode to the same
 * message, and is then fed to a fresh gossip instance (cluster "fuzz") and
 * followed by a tick, so deltas, requests and replies run on hostile input.
 */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "gossip/gossip.h"
#include "wire/gossip_msg.h"
#include "wire/wire.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static bool slice_same(struct rk_slice a, struct rk_slice b)
{
    return a.len == b.len && (a.len == 0 || memcmp(a.p, b.p, a.len) == 0);
}

static void check_roundtrip(const struct wire_gossip_msg *m,
                            const struct wire_key *key)
{
    uint8_t *buf;
    size_t len;
    if (wire_gossip_msg_encode(&buf, &len, m, key) != 0)
        abort(); /* whatever decodes must encode */
    struct wire_gossip_msg m2;
    if (wire_gossip_msg_decode(&m2, key, buf, len) != 0)
        abort();
    if (m2.type != m->type || !slice_same(m2.cluster, m->cluster) ||
        !slice_same(m2.from, m->from) || m2.n_digests != m->n_digests ||
        m2.n_deltas != m->n_deltas)
        abort();
    for (size_t i = 0; i < m->n_digests; i++)
        if (!slice_same(m2.digests[i].node, m->digests[i].node) ||
            m2.digests[i].generation != m->digests[i].generation ||
            m2.digests[i].version != m->digests[i].version)
            abort();
    for (size_t i = 0; i < m->n_deltas; i++) {
        const struct wire_gossip_delta *a = &m->deltas[i], *b = &m2.deltas[i];
        if (!slice_same(a->node, b->node) || a->generation != b->generation ||
            a->base != b->base || a->top != b->top ||
            a->n_states != b->n_states)
            abort();
        for (size_t j = 0; j < a->n_states; j++)
            if (a->states[j].key != b->states[j].key ||
                a->states[j].version != b->states[j].version ||
                !slice_same(a->states[j].value, b->states[j].value))
                abort();
    }
    wire_gossip_msg_release(&m2);
    free(buf);
}

static void feed_gossip(const uint8_t *pkt, size_t len)
{
    static const uint8_t secret[] = "fuzz";
    struct gossip_config cfg = GOSSIP_CONFIG_INIT;
    cfg.cluster_name = "fuzz";
    cfg.node_name = "me";
    cfg.secret = secret;
    cfg.secret_len = 4;
    cfg.max_packet = 1024;
    gossip *g;
    if (gossip_new(&g, &cfg) != 0)
        abort();
    struct gossip_out out;
    gossip_out_init(&out);
    gossip_state_set(g, GOSSIP_KEY_ADDRESS, "me:7000", 7);
    gossip_recv(g, 1000, "peer:7000", pkt, len, &out);
    gossip_recv(g, 1500, "peer:7000", pkt, len, &out); /* replay */
    gossip_tick(g, 2000, &out);
    for (size_t i = 0; i < out.n_pkts; i++)
        if (out.pkts[i].len > 1024)
            abort();
    gossip_tick(g, 60000, &out);
    for (size_t i = 0; i < gossip_peer_count(g); i++) {
        struct gossip_peer_info pi;
        if (gossip_peer_get(&pi, g, i, 60000) != 0)
            abort();
    }
    gossip_out_free(&out);
    gossip_free(g);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    struct wire_key key;
    if (wire_key_derive(&key, (const uint8_t *)"fuzz", 4) != 0)
        abort();
    struct wire_gossip_msg m;
    if (wire_gossip_msg_decode(&m, &key, data, size) == 0)
        wire_gossip_msg_release(&m);

    size_t len = WIRE_GOSSIP_HEADER + size + WIRE_MAC_BYTES;
    if (len > WIRE_GOSSIP_MAX_PACKET)
        return 0;
    uint8_t *pkt = malloc(len);
    if (pkt == NULL)
        return 0;
    memcpy(pkt, "RKG", 3);
    pkt[3] = WIRE_GOSSIP_VERSION;
    if (size > 0)
        memcpy(pkt + WIRE_GOSSIP_HEADER, data, size);
    wire_mac_compute(pkt + WIRE_GOSSIP_HEADER + size, &key, pkt,
                     WIRE_GOSSIP_HEADER + size);
    if (wire_gossip_msg_decode(&m, &key, pkt, len) == 0) {
        check_roundtrip(&m, &key);
        wire_gossip_msg_release(&m);
        feed_gossip(pkt, len);
    }
    free(pkt);
    return 0;
}
