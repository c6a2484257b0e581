/*
 * gossip_msg.h - the gossip packets (SYN, ACK, ACK2) and their codec.
 *
 * One UDP datagram is one message:
 *
 *   "RKG" 0x01 | msgpack [cluster, type, from, [digest...], [delta...]] | MAC
 *   "RKG" 0x01 | msgpack [cluster, type, from, [digest...], [delta...],
 *                         wall_ms] | MAC
 *   "RKG" 0x01 | msgpack [cluster, type, from, [digest...], [delta...],
 *                         wall_ms, boot, seq] | MAC
 *
 *   digest = [node, generation, version]
 *   delta  = [node, generation, base, top, [[key, version, value(bin)]...]]
 *   MAC    = 32 bytes of HMAC-SHA-512-256 under the cluster key over every
 *            byte before it (wire.h).
 *
 * A digest says "I hold <node> at <generation> up to <version>". A delta
 * carries every application state of <node> whose version lies in
 * (base, top] (the heartbeat is the version itself); base 0 means the whole
 * state of that generation. SYN carries digests; ACK carries requests (as
 * digests of what the sender holds) and deltas; ACK2 carries deltas. The
 * gossip state machine (gossip/) gives the fields their meaning; this file
 * only moves them to and from bytes, with every length checked.
 *
 * wall_ms, when there (non-zero), is the sender's wall clock (Unix ms) as
 * it built the packet: the receiver estimates its offset from the sender's
 * (gossip_clock_view). The five-element form is the one nodes that predate
 * it read, and is still read.
 */
#ifndef RK_WIRE_GOSSIP_MSG_H
#define RK_WIRE_GOSSIP_MSG_H

#include <stddef.h>
#include <stdint.h>

#include "common/rk.h"
#include "wire/wire.h"

#define WIRE_GOSSIP_MAGIC   "RKG"
#define WIRE_GOSSIP_VERSION 1
#define WIRE_GOSSIP_HEADER  4 /* magic + format version */

/* Decoder limits (encoder refuses the same). */
#define WIRE_GOSSIP_MAX_PACKET  65507 /* largest IPv4 UDP payload */
#define WIRE_GOSSIP_MAX_NAME    64    /* cluster and node names, bytes */
#define WIRE_GOSSIP_MAX_DIGESTS 4096  /* per packet */
#define WIRE_GOSSIP_MAX_DELTAS  4096  /* per packet */
#define WIRE_GOSSIP_MAX_STATES  64    /* per delta */
#define WIRE_GOSSIP_MAX_VALUE   16384 /* one application state value */
#define WIRE_GOSSIP_MAX_KEY     255   /* application state keys 0..255 */

enum wire_gossip_type {
    WIRE_GOSSIP_SYN = 1,
    WIRE_GOSSIP_ACK = 2,
    WIRE_GOSSIP_ACK2 = 3,
};

struct wire_gossip_digest {
    struct rk_slice node;
    uint64_t generation;
    uint64_t version;
};

struct wire_gossip_state {
    uint32_t key;
    uint64_t version;
    struct rk_slice value;
};

struct wire_gossip_delta {
    struct rk_slice node;
    uint64_t generation;
    uint64_t base; /* states with version in (base, top] follow */
    uint64_t top;
    struct wire_gossip_state *states;
    size_t n_states;
};

/* A message. For encoding, the caller fills it with borrowed data. A decoded
 * message owns its arrays: digests, deltas and each delta's states (free
 * them with wire_gossip_msg_release); its slices borrow from the packet
 * bytes given to the decoder. */
struct wire_gossip_msg {
    enum wire_gossip_type type;
    struct rk_slice cluster;
    struct rk_slice from;
    struct wire_gossip_digest *digests;
    size_t n_digests;
    struct wire_gossip_delta *deltas;
    size_t n_deltas;
    uint64_t wall_ms; /* the sender's wall clock; 0: not sent */
    uint64_t boot;    /* the sender's generation; 0: no boot and seq */
    uint64_t seq;     /* its packet counter (>= 1 when boot is there) */
    int owned_;       /* set by the decoder */
};

/* Encode and authenticate m. On success *out is a malloc()ed packet of
 * *out_len bytes, owned by the caller (free()). Returns 0, RK_EBADREQ (bad
 * type, name, or version order; boot without seq), RK_ETOOLARGE (a limit
 * above), -ENOMEM. */
int wire_gossip_msg_encode(uint8_t **out,
                           size_t *out_len,
                           const struct wire_gossip_msg *m,
                           const struct wire_key *key);

/* Authenticate and decode a packet. The MAC is checked (in constant time)
 * before any msgpack is read. On success *out owns arrays (release them) and
 * borrows pkt: use it only while pkt lives. On failure *out holds nothing.
 * Returns 0, RK_EAUTH (bad MAC), RK_EVERSION (unknown format version),
 * RK_EPROTO (not a gossip packet / malformed / over a limit), -ENOMEM.
 * Checks done here: types, limits, base <= top and every state version in
 * (base, top]. The cluster name is returned, not checked. */
int wire_gossip_msg_decode(struct wire_gossip_msg *out,
                           const struct wire_key *key,
                           const uint8_t *pkt,
                           size_t len);

/* Free what a decoded message owns and zero it. A NULL or caller-built
 * message (owned_ == 0) is left alone. */
void wire_gossip_msg_release(struct wire_gossip_msg *m);

/* Exact encoded sizes, so a sender can split under a packet budget:
 * the fixed part of a packet (header, cluster, type, from, MAC) given the
 * number of digests and deltas it will hold; one digest; one delta without
 * its states and with n_states states; one state; what wall_ms adds
 * (0 when it is 0, at most 9); what boot and seq add to a packet with
 * a stamp (wire_gossip_size_clock(UINT64_MAX) counted: at most 18). */
size_t wire_gossip_size_base(size_t cluster_len,
                             size_t from_len,
                             size_t n_digests,
                             size_t n_deltas);
size_t wire_gossip_size_clock(uint64_t wall_ms);
size_t wire_gossip_size_fresh(uint64_t boot, uint64_t seq);
size_t wire_gossip_size_digest(const struct wire_gossip_digest *d);
size_t wire_gossip_size_delta_head(const struct wire_gossip_delta *d,
                                   size_t n_states);
size_t wire_gossip_size_state(const struct wire_gossip_state *s);

#endif
