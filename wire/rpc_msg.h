/*
 * rpc_msg.h - the internode RPC messages and their msgpack codecs (pure).
 *
 * Every message is one msgpack array whose first element is its type
 * (enum rpc_msg_type). Messages travel as the payload of net/'s RPC frames,
 * which carry the request id; nothing here knows about ids or sockets.
 *
 * Each message's fields are one table in rpc_msg.c, which wire/'s one
 * encoder and one decoder walk: standard msgpack out, and in through wire/'s
 * bounds-checked reader (the decoders take untrusted bytes: it never
 * allocates, never trusts a length before checking it against the bytes
 * left, and enforces RK_MAX_KEY / RK_MAX_VALUE).
 *
 * Decoded messages borrow: every rk_slice in a decoded struct points into
 * the input buffer and lives as long as it. Copy what you keep.
 *
 * Decoder errors: RK_EPROTO for malformed or truncated input, a wrong
 * message type, or trailing bytes; RK_ETOOLARGE for a key or value over the
 * limit; RK_EVERSION for a handshake of an unknown protocol version.
 * Encoder errors: RK_EBADREQ for an empty key, RK_ETOOLARGE for a key or value
 * over the limit (or names over RPC_NAME_MAX), -ENOMEM.
 *
 * Authentication (the handshake) uses libsodium's crypto_auth
 * (HMAC-SHA-512-256) under a 32-byte key derived from the cluster secret with
 * crypto_generichash (BLAKE2b). The protocol (version 2), a mutual
 * challenge-response in which the connecting node speaks first:
 *   1. HELLO (connector -> acceptor): its cluster, its name, the name of the
 *      node it means to reach, a fresh random nonce_c; no MAC;
 *   2. ANSWER (acceptor -> connector), sent only if the HELLO names this
 *      cluster and this node: its name, a fresh nonce_s, and
 *      MAC("ringkv-hs-s" | nonce_c | nonce_s | acceptor | connector);
 *   3. the connector checks the MAC, that it covers its own nonce_c and that
 *      the acceptor is the node it meant to reach, and sends a PROOF:
 *      MAC("ringkv-hs-c" | nonce_s | nonce_c | connector | acceptor);
 *   4. the acceptor checks the PROOF against the ANSWER it sent.
 * Each side's MAC covers the other side's fresh nonce, so nothing recorded
 * from one connection is accepted on another; the two directions have their
 * own tags, so a MAC cannot be reflected; both names are covered, so an
 * ANSWER from one node is no use in the name of another. (Version 1 had the
 * acceptor speak first with a CHALLENGE that bound no nonce of the
 * connector's: a challenge read from any node could be replayed to make a
 * connecting node take an impostor for a peer.)
 * rpc_handshake_make() / rpc_handshake_check() implement both sides; the
 * daemon plugs them into net/'s handshake hook (docs/internode.md).
 */
#ifndef RK_WIRE_RPC_MSG_H
#define RK_WIRE_RPC_MSG_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "common/rk.h"

/* Message type tags, the first element of every message. Values are part of
 * the wire format. */
enum rpc_msg_type {
    RPC_MSG_HANDSHAKE = 1,
    RPC_MSG_WRITE = 2,
    RPC_MSG_WRITE_ACK = 3,
    RPC_MSG_READ = 4,
    RPC_MSG_READ_RESP = 5,
    RPC_MSG_STREAM = 6,
    RPC_MSG_STREAM_CHUNK = 7,
    RPC_MSG_STREAM_PUSH = 8,
    RPC_MSG_MERKLE = 9,
    RPC_MSG_MERKLE_RESP = 10,
    RPC_MSG_SCAN = 11,
    RPC_MSG_SCAN_RESP = 12,
};

#define RPC_HS_VERSION  2 /* the handshake protocol version we speak */
#define RPC_NONCE_BYTES 16
#define RPC_MAC_BYTES   32  /* crypto_auth_BYTES */
#define RPC_KEY_BYTES   32  /* crypto_auth_KEYBYTES */
#define RPC_NAME_MAX    255 /* cluster and node names, bytes */
/* An encoded handshake never exceeds this many bytes (three longest
 * names). */
#define RPC_HANDSHAKE_MAX 896

/* Record flags (rpc_record.flags). Unknown bits are carried unchanged. */
#define RPC_REC_TOMBSTONE 0x1u

/* A growable output buffer the encoders append to. Zero-initialise it
 * (RPC_BUF_INIT); rpc_buf_free releases it. */
struct rpc_buf {
    uint8_t *data;
    size_t len;
    size_t cap;
};

#define RPC_BUF_INIT \
    {                \
        NULL, 0, 0   \
    }

/* Empties buf, keeping its memory for reuse. */
void rpc_buf_reset(struct rpc_buf *buf);

/* Frees buf's memory and zeroes it. NULL is a no-op. */
void rpc_buf_free(struct rpc_buf *buf);

/* The type of an encoded message without decoding the rest.
 * Returns 0 or RK_EPROTO (not an array, or no integer type first). */
int rpc_msg_type_peek(enum rpc_msg_type *out, struct rk_slice buf);

/* ---- records ------------------------------------------------------------ */

/* A record version as replicas exchange it. value borrows. */
struct rpc_record {
    uint64_t ts;           /* HLC timestamp assigned by the coordinator */
    uint32_t flags;        /* RPC_REC_* */
    uint64_t expiry;       /* absolute expiry, ms since the epoch; 0 = none */
    struct rk_slice value; /* empty for a tombstone */
};

/* What a replica answers to a digest read: the version fields and an
 * XXH3-64 of the value, enough to tell which replica is newest and which
 * must be repaired without moving the value. */
struct rpc_digest {
    uint64_t ts;
    uint32_t flags;
    uint64_t expiry;
    uint64_t value_hash; /* XXH3_64bits of the value bytes */
};

/* The digest of rec. Pure; never fails. */
void rpc_record_digest(struct rpc_digest *out, const struct rpc_record *rec);

/* ---- handshake ---------------------------------------------------------- */

enum rpc_hs_role {
    RPC_HS_HELLO = 0,  /* sent first, by the connecting node */
    RPC_HS_ANSWER = 1, /* the accepting node's answer */
    RPC_HS_PROOF = 2,  /* the connecting node's last word */
};

struct rpc_handshake {
    uint32_t version;        /* RPC_HS_VERSION */
    uint32_t role;           /* enum rpc_hs_role */
    struct rk_slice cluster; /* cluster name, 1..RPC_NAME_MAX bytes */
    struct rk_slice from;    /* sender's node name, 1..RPC_NAME_MAX bytes */
    struct rk_slice to;      /* the node it is meant for, 1..RPC_NAME_MAX */
    uint8_t nonce[RPC_NONCE_BYTES];      /* HELLO, ANSWER: the sender's fresh
                                            random bytes; PROOF: its HELLO's */
    uint8_t peer_nonce[RPC_NONCE_BYTES]; /* ANSWER, PROOF: the other side's
                                            nonce; HELLO: zeros */
    uint64_t time_ms;           /* sender's wall clock, informational */
    uint8_t mac[RPC_MAC_BYTES]; /* ANSWER, PROOF: see rpc_handshake_sign;
                                   HELLO: zeros */
};

/* The MAC key from the cluster secret (any length, may be empty):
 * crypto_generichash(secret) with the fixed key "ringkv-internode-v1". */
void rpc_key_derive(uint8_t out[RPC_KEY_BYTES], struct rk_slice secret);

/* Computes hs->mac under key over a tag naming the direction ("ringkv-hs-s"
 * for an ANSWER, "ringkv-hs-c" for a PROOF), then version, cluster,
 * peer_nonce, nonce, from, to and time (names with one-byte lengths).
 * Returns 0, RK_ETOOLARGE / RK_EBADREQ if a name is over RPC_NAME_MAX or
 * empty, RK_EBADREQ for a HELLO (which carries no MAC). */
int rpc_handshake_sign(struct rpc_handshake *hs,
                       const uint8_t key[RPC_KEY_BYTES]);

/* Checks hs->mac in constant time. Returns 0 or RK_EAUTH (also for a
 * HELLO). */
int rpc_handshake_verify(const struct rpc_handshake *hs,
                         const uint8_t key[RPC_KEY_BYTES]);

/* Appends hs (with its mac as is) to out. */
int rpc_handshake_encode(struct rpc_buf *out, const struct rpc_handshake *hs);

/* Decodes one handshake message occupying all of buf. Does not check the
 * MAC. RK_EVERSION if version != RPC_HS_VERSION. */
int rpc_handshake_decode(struct rpc_handshake *out, struct rk_slice buf);

/* One step of the handshake, ready for net/'s hook. Writes into
 * out[0..cap) the encoded message this node (`self`) sends and sets
 * *out_len, by what peer holds:
 *   empty:    a HELLO to `to`, the node this side means to reach, with
 *             nonce (connecting side, first);
 *   a HELLO:  the signed ANSWER, with nonce (accepting side); refused with
 *             RK_EAUTH unless the HELLO names cluster and self;
 *   an ANSWER (which rpc_handshake_check has passed): the signed PROOF
 *             (connecting side); nonce is not used.
 * `to` is used for a HELLO only. nonce is this side's fresh random bytes
 * (the caller draws them: this file takes no randomness), now_ms its clock.
 * Returns 0, RK_EPROTO (peer malformed, or a PROOF), RK_EVERSION,
 * RK_EAUTH, RK_ETOOLARGE (cap too small or a name too long), RK_EBADREQ
 * (empty name). */
int rpc_handshake_make(uint8_t *out,
                       size_t cap,
                       size_t *out_len,
                       const uint8_t key[RPC_KEY_BYTES],
                       struct rk_slice cluster,
                       struct rk_slice self,
                       struct rk_slice to,
                       const uint8_t nonce[RPC_NONCE_BYTES],
                       uint64_t now_ms,
                       struct rk_slice peer);

/* Checks a received handshake message against the one this side sent:
 *   sent = our HELLO:  got must be an ANSWER from the node the HELLO names,
 *                      to us, whose peer_nonce is the HELLO's nonce;
 *   sent = our ANSWER: got must be a PROOF from the node the ANSWER
 *                      answered, to us, binding both nonces of the ANSWER.
 * In both cases got must be MAC'd under key, name cluster, and have our
 * version; nothing is accepted without a message of ours to bind it (sent
 * empty or a PROOF: RK_EPROTO). On success copies the peer's node name,
 * NUL-terminated, into name[0..name_cap) (truncated if longer; name may be
 * NULL) and returns 0. Errors: RK_EPROTO (malformed, wrong role, or a nonce
 * not ours: a message recorded from another exchange), RK_EVERSION,
 * RK_EAUTH (bad MAC, wrong cluster, or names other than the two of this
 * exchange: e.g. an acceptor that is not the node the HELLO meant). */
int rpc_handshake_check(struct rk_slice got,
                        struct rk_slice sent,
                        const uint8_t key[RPC_KEY_BYTES],
                        struct rk_slice cluster,
                        char *name,
                        size_t name_cap);

/* ---- replica write ------------------------------------------------------ */

/* Coordinator -> replica: store this version of key (LWW merge). */
struct rpc_write {
    uint64_t token;        /* rk_token(key); checked by the replica, not here */
    uint64_t epoch;        /* coordinator's applied ring epoch */
    struct rk_slice key;   /* 1..RK_MAX_KEY bytes */
    struct rpc_record rec; /* value 0..RK_MAX_VALUE bytes */
};

int rpc_write_encode(struct rpc_buf *out, const struct rpc_write *msg);
int rpc_write_decode(struct rpc_write *out, struct rk_slice buf);

/* Replica -> coordinator. */
struct rpc_write_ack {
    int32_t status; /* 0, or an RK_E* / -errno code of the replica */
    uint64_t hlc;   /* the replica's HLC after the write */
};

int rpc_write_ack_encode(struct rpc_buf *out, const struct rpc_write_ack *msg);
int rpc_write_ack_decode(struct rpc_write_ack *out, struct rk_slice buf);

/* ---- replica read ------------------------------------------------------- */

struct rpc_read {
    uint64_t token;
    uint64_t epoch;
    struct rk_slice key; /* 1..RK_MAX_KEY bytes */
    bool digest;         /* true: answer with a digest, not the data */
};

int rpc_read_encode(struct rpc_buf *out, const struct rpc_read *msg);
int rpc_read_decode(struct rpc_read *out, struct rk_slice buf);
/* The token of what starts as a READ, the rest not read or checked (a
 * hint: the prefetch of a batch's reads, node/replica.c; a full decode
 * there cost as much again as the one that serves it). 0, or RK_EPROTO
 * when buf does not start with a READ's head, type and token. */
int rpc_read_token_peek(uint64_t *out, struct rk_slice buf);

/* Replica -> coordinator. When found, exactly one of rec (is_digest false)
 * or dig (is_digest true) is meaningful. A tombstone is found with the
 * RPC_REC_TOMBSTONE flag, so deletes win read repair. */
struct rpc_read_resp {
    int32_t status; /* 0, or an RK_E* / -errno code of the replica */
    uint64_t hlc;   /* the replica's HLC */
    bool found;
    bool is_digest;
    struct rpc_record rec;
    struct rpc_digest dig;
};

int rpc_read_resp_encode(struct rpc_buf *out, const struct rpc_read_resp *msg);
int rpc_read_resp_decode(struct rpc_read_resp *out, struct rk_slice buf);

/* ---- range streaming (bootstrap) ---------------------------------------- */

/* Where a stream of the arc (start, end] stands: the donor's scan cursor
 * (storage's struct store_scan as plain data), carried in every request
 * and answer so that a donor keeps no session and a gaining node can go on
 * from the last chunk it committed, with the same donor or another. */
struct rpc_stream_pos {
    uint64_t start, end; /* the arc; start == end is the whole ring */
    uint64_t pos;        /* once started, tokens up to pos are done... */
    bool started;
    bool done;            /* the whole arc has been sent */
    struct rk_slice last; /* ...and, within token pos, keys up to this one
                             (0..RPC_STREAM_LAST_MAX bytes) */
};

#define RPC_STREAM_LAST_MAX 424 /* the scan cursor's key room (storage) */
/* A chunk's items, at most (and about max_bytes of keys and values, but
 * always at least one item). */
#define RPC_STREAM_ITEMS_MAX 4096

/* Gaining node -> donor: the chunk of at.arc after at. */
struct rpc_stream_req {
    uint64_t epoch;           /* the asker's applied ring epoch */
    struct rpc_stream_pos at; /* at.done is false */
    uint32_t max_bytes;
};

int rpc_stream_req_encode(struct rpc_buf *out,
                          const struct rpc_stream_req *msg);
int rpc_stream_req_decode(struct rpc_stream_req *out, struct rk_slice buf);

/* Donor -> gaining node: up to RPC_STREAM_ITEMS_MAX records in token
 * order, and where the next chunk starts. items is the msgpack encoding of
 * the records (rpc_stream_item_add), checksum its XXH3-64 (the cursor and
 * count are not covered; the count is checked against the items). A chunk
 * whose checksum does not match, or whose items do not decode, does not
 * decode (RK_EPROTO; RK_ETOOLARGE for an item's key or value over the
 * limit), so rpc_stream_item_next never fails on a decoded one. */
struct rpc_stream_chunk {
    int32_t status; /* 0, or an RK_E* / -errno code of the donor */
    uint64_t hlc;   /* the donor's HLC */
    struct rpc_stream_pos next;
    uint32_t count;        /* items */
    struct rk_slice items; /* borrowed */
    uint64_t checksum;     /* set by the encoder; checked by the decoder */
};

/* Appends one record to an items buffer (a chunk's items under
 * construction). Errors as the write encoder. */
int rpc_stream_item_add(struct rpc_buf *items,
                        struct rk_slice key,
                        const struct rpc_record *rec);

/* Encodes msg; msg->checksum is ignored and computed over msg->items. */
int rpc_stream_chunk_encode(struct rpc_buf *out,
                            const struct rpc_stream_chunk *msg);
int rpc_stream_chunk_decode(struct rpc_stream_chunk *out, struct rk_slice buf);

/* Leaving node -> gaining node (decommission): a chunk pushed rather than
 * asked for. The same fields as RPC_MSG_STREAM_CHUNK under its own type:
 * status is 0, next.start/next.end name the arc the items belong to and
 * next is where the leaving node's scan stands after them. Answered with
 * an RPC_MSG_WRITE_ACK once every item is committed. */
int rpc_stream_push_encode(struct rpc_buf *out,
                           const struct rpc_stream_chunk *msg);
int rpc_stream_push_decode(struct rpc_stream_chunk *out, struct rk_slice buf);

/* ---- Merkle leaves (repair) --------------------------------------------- */

#define RPC_MERKLE_MAX_DEPTH 14 /* repair's MERKLE_MAX_DEPTH */

/* Repairing node -> replica: the leaf hashes of the arc (start, end] split
 * into 2^depth leaves (repair/merkle.h). */
struct rpc_merkle_req {
    uint64_t epoch; /* the asker's applied ring epoch */
    uint64_t start, end;
    uint32_t depth; /* <= RPC_MERKLE_MAX_DEPTH */
};

int rpc_merkle_req_encode(struct rpc_buf *out,
                          const struct rpc_merkle_req *msg);
int rpc_merkle_req_decode(struct rpc_merkle_req *out, struct rk_slice buf);

/* Replica -> repairing node: status 0 and the 2^depth leaf hashes, 8 bytes
 * each big-endian (leaves, borrowed), or an error status and no leaves. A
 * message whose leaves do not have exactly that length does not decode. */
struct rpc_merkle_resp {
    int32_t status;
    uint64_t hlc;
    uint32_t depth;
    uint64_t keys; /* entries the replica hashed */
    struct rk_slice leaves;
};

int rpc_merkle_resp_encode(struct rpc_buf *out,
                           const struct rpc_merkle_resp *msg);
int rpc_merkle_resp_decode(struct rpc_merkle_resp *out, struct rk_slice buf);

/* ---- key scan (SCAN) ---------------------------------------------------- */

/* The most keys a scan request may ask for (the coordinator's COUNT cap). */
#define RPC_SCAN_LIMIT_MAX 1000

/* Coordinator -> replica: the keys of the arc (start, end] in token order,
 * at most limit of them, except that the keys of the last token answered
 * all come with it (a token is never split between two answers, so that
 * a position is a token alone). */
struct rpc_scan {
    uint64_t epoch; /* the asker's applied ring epoch */
    uint64_t start, end;
    uint32_t limit; /* 1..RPC_SCAN_LIMIT_MAX */
};

int rpc_scan_encode(struct rpc_buf *out, const struct rpc_scan *msg);
int rpc_scan_decode(struct rpc_scan *out, struct rk_slice buf);

/* Replica -> coordinator: count items (rpc_stream_item_add's encoding,
 * each with its version and an empty value: a scan moves no values), in
 * token order, and how far they cover the arc: to its end (done), or
 * every token up to next - 1. A message whose items do not decode, or are
 * not count, does not decode. */
struct rpc_scan_resp {
    int32_t status; /* 0, or an RK_E* / -errno code of the replica */
    uint64_t hlc;
    bool done;
    uint64_t next;         /* !done: the first token not covered */
    uint32_t count;        /* <= RPC_STREAM_ITEMS_MAX */
    struct rk_slice items; /* borrowed */
};

int rpc_scan_resp_encode(struct rpc_buf *out, const struct rpc_scan_resp *msg);
int rpc_scan_resp_decode(struct rpc_scan_resp *out, struct rk_slice buf);

/* Iterates the items of a decoded chunk: *it starts as RK_SLICE(items)
 * and is advanced past each. Returns 1 with *key and *rec set (both
 * borrowing from the chunk), 0 at the end, RK_EPROTO on bytes that are not
 * items or RK_ETOOLARGE on a key or value over the limit (never for the
 * items of a decoded chunk). */
int rpc_stream_item_next(struct rk_slice *it,
                         struct rk_slice *key,
                         struct rpc_record *rec);

#endif
