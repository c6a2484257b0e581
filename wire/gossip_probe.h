/*
 * gossip_probe.h - the failure detector's packets (SWIM-style probes) and
 * their codec.
 *
 * They share the gossip UDP port with SYN/ACK/ACK2 (gossip_msg.h) but have a
 * magic of their own, so a node that predates them drops them as "not a
 * gossip packet" before reading anything (and gossip/ sends them only to
 * peers that announce they speak them). One datagram is one message:
 *
 *   "RKP" 0x01 | msgpack [cluster, type, from, seq, target, incarnation,
 *                         [rumor...]] | MAC
 *   "RKP" 0x01 | msgpack [cluster, type, from, seq, target, incarnation,
 *                         [rumor...], boot, pkt_seq] | MAC
 *
 *   rumor = [node, generation, incarnation, kind, origin]
 *   MAC   = 32 bytes of HMAC-SHA-512-256 under the cluster key (wire.h).
 *
 * PING asks `target` (the receiver) for an ACK echoing `seq`; PING_REQ asks
 * the receiver to ping `target` on the sender's behalf and relay the ACK;
 * ACK says `target` answered probe `seq` at `incarnation`; NACK says a
 * relay did not hear from `target` in time (incarnation 0) or could not
 * ping it at all (WIRE_PROBE_NACK_UNTRIED: it does not know it); NEWS only
 * carries rumors, which every type may carry. A rumor says that `origin` holds
 * `node` (of `generation`) ALIVE or SUSPECT at `incarnation`. This file only
 * moves the fields to and from bytes, with every length checked; gossip/probe.c
 * gives them their meaning.
 *
 * boot and pkt_seq, when there (the nine-element form), are the sender's
 * generation and its packet counter, shared with SYN/ACK/ACK2 (see
 * gossip_msg.h): the receiver drops a packet it has seen already. `seq`
 * is the probe's own number, which ACK and NACK echo.
 */
#ifndef RK_WIRE_GOSSIP_PROBE_H
#define RK_WIRE_GOSSIP_PROBE_H

#include <stddef.h>
#include <stdint.h>

#include "common/rk.h"
#include "wire/wire.h"

#define WIRE_PROBE_MAGIC      "RKP"
#define WIRE_PROBE_VERSION    1
#define WIRE_PROBE_HEADER     4 /* magic + format version */
#define WIRE_PROBE_MAX_PACKET 65507
#define WIRE_PROBE_MAX_NAME   64 /* cluster and node names, bytes */
#define WIRE_PROBE_MAX_RUMORS 64 /* per packet */

enum wire_probe_type {
    WIRE_PROBE_PING = 1,
    WIRE_PROBE_PING_REQ = 2,
    WIRE_PROBE_ACK = 3,
    WIRE_PROBE_NACK = 4,
    WIRE_PROBE_NEWS = 5,
};

#define WIRE_PROBE_NACK_UNTRIED 1 /* NACK's incarnation: relay did not try */

enum wire_probe_rumor_kind {
    WIRE_PROBE_ALIVE = 1,
    WIRE_PROBE_SUSPECT = 2,
};

struct wire_probe_rumor {
    struct rk_slice node;
    uint64_t generation;
    uint64_t incarnation;
    enum wire_probe_rumor_kind kind;
    struct rk_slice origin;
};

/* A message. For encoding, the caller fills it with borrowed data. A decoded
 * message owns its rumor array (free with wire_probe_msg_release) and its
 * slices borrow from the packet bytes given to the decoder. `target` is
 * empty in NEWS. */
struct wire_probe_msg {
    enum wire_probe_type type;
    struct rk_slice cluster;
    struct rk_slice from;
    uint64_t seq;
    struct rk_slice target;
    uint64_t incarnation;
    struct wire_probe_rumor *rumors;
    size_t n_rumors;
    uint64_t boot;    /* the sender's generation; 0: no boot and pkt_seq */
    uint64_t pkt_seq; /* its packet counter (>= 1 when boot is there) */
    int owned_;       /* set by the decoder */
};

/* True if pkt starts like a probe packet (its magic), so the receiver knows
 * which decoder to use. Reads at most WIRE_PROBE_HEADER - 1 bytes. */
int wire_probe_is(const uint8_t *pkt, size_t len);

/* As wire_gossip_msg_encode / _decode / _release (gossip_msg.h), for probe
 * packets. Encode: RK_EBADREQ for a bad type, kind or name, RK_ETOOLARGE
 * over WIRE_PROBE_MAX_RUMORS. Decode: *out owns its rumor array and
 * borrows pkt; RK_EAUTH, RK_EVERSION, RK_EPROTO (any malformation or
 * limit), -ENOMEM; the cluster name is returned, not checked. */
int wire_probe_msg_encode(uint8_t **out,
                          size_t *out_len,
                          const struct wire_probe_msg *m,
                          const struct wire_key *key);
int wire_probe_msg_decode(struct wire_probe_msg *out,
                          const struct wire_key *key,
                          const uint8_t *pkt,
                          size_t len);
void wire_probe_msg_release(struct wire_probe_msg *m);

/* Exact encoded size of a message with the given names and no rumors (seq,
 * incarnation, boot and pkt_seq counted at their largest; without boot and
 * pkt_seq it is smaller), and of one rumor. */
size_t wire_probe_size_base(size_t cluster_len,
                            size_t from_len,
                            size_t target_len,
                            size_t n_rumors);
size_t wire_probe_size_rumor(const struct wire_probe_rumor *r);

#endif
