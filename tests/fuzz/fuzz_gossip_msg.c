/*
 * fuzz_gossip_msg.c - the decoders of both gossip packet families (SYN /
 * ACK / ACK2 and the failure detector's probes) and the state machine
 * behind them.
 *
 * Random bytes almost never carry a valid MAC, so each input is used three
 * times: as a raw packet (exercising the header and MAC checks) and as the
 * msgpack body of a packet of each family that the target seals itself with
 * the fuzz key, which reaches the parsers. A body that decodes must
 * re-encode and decode to the same message, and is then fed to a fresh
 * gossip instance (cluster "fuzz") and followed by its timers and a tick,
 * so deltas, requests, replies, probes, relays, rumors and refutations run
 * on hostile input, and so do the wall clocks packets carry (the
 * instance has one: it compares theirs, and stamps its replies to a peer
 * that announces CLOCK). For the probes the instance first learns a peer that
 * speaks them, so what the packet says about it counts. The packet numbers
 * (boot, seq) are checked too: each packet is fed to an instance that does
 * not know its sender (replies bounded at the source) and to one that
 * knows it as a member at the packet's source address, announcing FRESH
 * when the packet is numbered (replies at that address; the second copy
 * is a replay).
 */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "gossip/gossip.h"
#include "wire/gossip_msg.h"
#include "wire/gossip_probe.h"
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
        m2.n_deltas != m->n_deltas || m2.wall_ms != m->wall_ms ||
        m2.boot != m->boot || m2.seq != m->seq)
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

/* A fresh instance "me" of cluster "fuzz" that packets come to. */
static gossip *node_new(void)
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
    gossip_state_set(g, GOSSIP_KEY_ADDRESS, "me:7000", 7);
    /* a wall clock: stamps are compared (and sent to peers that announce
     * CLOCK) */
    gossip_wall_set(g, UINT64_C(1796000000000));
    return g;
}

/* Every endpoint it holds must describe itself; then free it all. */
static void node_done(gossip *g, uint64_t now, struct gossip_out *out)
{
    for (size_t i = 0; i < gossip_peer_count(g); i++) {
        struct gossip_peer_info pi;
        if (gossip_peer_get(&pi, g, i, now) != 0)
            abort();
    }
    gossip_out_free(out);
    gossip_free(g);
}

/* g learns "peer" at "peer:7000", speaking probes, numbering its packets
 * if `numbered`. */
static void introduce(gossip *g,
                      const struct wire_key *key,
                      bool numbered,
                      struct gossip_out *out)
{
    struct wire_gossip_state st[3] = {
        {GOSSIP_KEY_ADDRESS, 1, RK_SLICE("peer:7000", 9)},
        {GOSSIP_KEY_INCARNATION, 2, RK_SLICE("0", 1)},
        {GOSSIP_KEY_FRESH, 3, RK_SLICE("1", 1)}};
    struct wire_gossip_delta d = {RK_SLICE("peer", 4), 1,  0,
                                  numbered ? 3 : 2,    st, numbered ? 3 : 2};
    struct wire_gossip_msg m = {.type = WIRE_GOSSIP_ACK2,
                                .cluster = RK_SLICE("fuzz", 4),
                                .from = RK_SLICE("peer", 4),
                                .deltas = &d,
                                .n_deltas = 1};
    uint8_t *intro;
    size_t intro_len;
    if (wire_gossip_msg_encode(&intro, &intro_len, &m, key) != 0)
        abort();
    gossip_recv(g, 500, "peer:7000", intro, intro_len, out);
    free(intro);
}

/* Replies to a sender that is not a known member take no more bytes than
 * its packet, unless the packet made it one at its source address. The
 * sender is a slice: a name may hold a NUL byte. */
static void check_bound(const gossip *g,
                        struct rk_slice sender,
                        const struct gossip_out *out,
                        size_t len)
{
    for (size_t i = 1; i < gossip_peer_count(g); i++) {
        struct gossip_peer_info pi;
        if (gossip_peer_get(&pi, g, i, 1000) != 0)
            abort();
        struct rk_slice a = pi.state[GOSSIP_KEY_ADDRESS];
        if (memcmp(pi.name, sender.p, sender.len) == 0 &&
            pi.name[sender.len] == '\0' && a.len == 9 &&
            memcmp(a.p, "peer:7000", 9) == 0)
            return;
    }
    size_t bytes = 0;
    for (size_t i = 0; i < out->n_pkts; i++)
        if (strcmp(out->pkts[i].to, "peer:7000") == 0)
            bytes += out->pkts[i].len;
    if (bytes > len)
        abort();
}

static void feed_gossip(const uint8_t *pkt,
                        size_t len,
                        struct rk_slice sender,
                        const struct wire_key *key,
                        bool known,
                        bool numbered)
{
    gossip *g = node_new();
    struct gossip_out out;
    gossip_out_init(&out);
    if (known)
        introduce(g, key, numbered, &out);
    gossip_recv(g, 1000, "peer:7000", pkt, len, &out);
    if (!known)
        check_bound(g, sender, &out, len);
    gossip_recv(g, 1500, "peer:7000", pkt, len, &out); /* replay */
    gossip_tick(g, 2000, &out);
    for (size_t i = 0; i < out.n_pkts; i++)
        if (out.pkts[i].len > 1024)
            abort();
    gossip_tick(g, 60000, &out);
    struct gossip_clock_view v;
    gossip_clock_view(&v, g, 60000, 500);
    if (v.far > v.fresh || v.fresh > v.live)
        abort();
    node_done(g, 60000, &out);
}

/* magic + version + data + MAC in a malloc()ed packet of *out_len bytes,
 * or NULL when it would exceed max bytes. */
static uint8_t *seal(const char magic[3],
                     uint8_t version,
                     const uint8_t *data,
                     size_t size,
                     const struct wire_key *key,
                     size_t max,
                     size_t *out_len)
{
    size_t len = 4 + size + WIRE_MAC_BYTES;
    uint8_t *pkt = len <= max ? malloc(len) : NULL;
    if (pkt == NULL)
        return NULL;
    memcpy(pkt, magic, 3);
    pkt[3] = version;
    if (size > 0)
        memcpy(pkt + 4, data, size);
    wire_mac_compute(pkt + 4 + size, key, pkt, 4 + size);
    *out_len = len;
    return pkt;
}

static void probe_roundtrip(const struct wire_probe_msg *m,
                            const struct wire_key *key)
{
    uint8_t *buf;
    size_t len;
    if (wire_probe_msg_encode(&buf, &len, m, key) != 0)
        abort(); /* whatever decodes must encode */
    struct wire_probe_msg m2;
    if (wire_probe_msg_decode(&m2, key, buf, len) != 0)
        abort();
    if (m2.type != m->type || !slice_same(m2.cluster, m->cluster) ||
        !slice_same(m2.from, m->from) || m2.seq != m->seq ||
        !slice_same(m2.target, m->target) || m2.incarnation != m->incarnation ||
        m2.n_rumors != m->n_rumors || m2.boot != m->boot ||
        m2.pkt_seq != m->pkt_seq)
        abort();
    for (size_t i = 0; i < m->n_rumors; i++) {
        const struct wire_probe_rumor *a = &m->rumors[i], *b = &m2.rumors[i];
        if (!slice_same(a->node, b->node) || a->generation != b->generation ||
            a->incarnation != b->incarnation || a->kind != b->kind ||
            !slice_same(a->origin, b->origin))
            abort();
    }
    wire_probe_msg_release(&m2);
    free(buf);
}

/* "me" first learns "peer", which speaks probes (if known), then gets the
 * packet from it (twice), then runs its timers for 10 s and a tick. */
static void probe_feed(const uint8_t *pkt,
                       size_t len,
                       struct rk_slice sender,
                       const struct wire_key *key,
                       bool known,
                       bool numbered)
{
    gossip *g = node_new();
    struct gossip_out out;
    gossip_out_init(&out);
    if (known)
        introduce(g, key, numbered, &out);
    gossip_recv(g, 1000, "peer:7000", pkt, len, &out);
    if (!known)
        check_bound(g, sender, &out, len);
    gossip_recv(g, 1500, "peer:7000", pkt, len, &out); /* replay */
    for (uint64_t t = 1500; t < 12000; t += 100)
        if (gossip_timer_due(g) <= t)
            gossip_timer(g, t, &out);
    gossip_tick(g, 12000, &out);
    for (size_t i = 0; i < out.n_pkts; i++)
        if (out.pkts[i].len > WIRE_PROBE_MAX_PACKET)
            abort();
    node_done(g, 12000, &out);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    struct wire_key key;
    if (wire_key_derive(&key, (const uint8_t *)"fuzz", 4) != 0)
        abort();
    struct wire_gossip_msg m;
    if (wire_gossip_msg_decode(&m, &key, data, size) == 0)
        wire_gossip_msg_release(&m);
    struct wire_probe_msg pm;
    if (wire_probe_msg_decode(&pm, &key, data, size) == 0)
        wire_probe_msg_release(&pm);

    size_t len;
    uint8_t *pkt = seal(WIRE_GOSSIP_MAGIC, WIRE_GOSSIP_VERSION, data, size,
                        &key, WIRE_GOSSIP_MAX_PACKET, &len);
    if (pkt != NULL && wire_gossip_msg_decode(&m, &key, pkt, len) == 0) {
        check_roundtrip(&m, &key);
        bool numbered = m.boot != 0;
        struct rk_slice sender = m.from; /* borrows pkt */
        wire_gossip_msg_release(&m);
        feed_gossip(pkt, len, sender, &key, false, numbered);
        feed_gossip(pkt, len, sender, &key, true, numbered);
    }
    free(pkt);
    pkt = seal(WIRE_PROBE_MAGIC, WIRE_PROBE_VERSION, data, size, &key,
               WIRE_PROBE_MAX_PACKET, &len);
    if (pkt != NULL && wire_probe_msg_decode(&pm, &key, pkt, len) == 0) {
        probe_roundtrip(&pm, &key);
        bool numbered = pm.boot != 0;
        struct rk_slice sender = pm.from; /* borrows pkt */
        wire_probe_msg_release(&pm);
        probe_feed(pkt, len, sender, &key, false, numbered);
        probe_feed(pkt, len, sender, &key, true, numbered);
    }
    free(pkt);
    return 0;
}
