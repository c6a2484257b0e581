/*
 * wire.h - codec basics shared by every wire/ format: the cluster MAC and
 * bounds-checked msgpack reading.
 *
 * Authentication: every gossip packet and every internode handshake carries a
 * MAC under the cluster secret. The key is derived from the bytes of the
 * secret file with BLAKE2b (crypto_generichash) under a fixed domain label;
 * the MAC is libsodium's crypto_auth (HMAC-SHA-512-256), verified in constant
 * time. Nothing here is home-made cryptography.
 *
 * msgpack reading: msgpack-c's unpacker allocates an array of `n` objects as
 * soon as it reads an array header claiming `n` elements, so a 5-byte packet
 * can ask for gigabytes. wire_unpack() first walks the bytes with a small
 * validator that rejects any container whose element count exceeds the bytes
 * left (every element takes at least one byte), any nesting deeper than a
 * bound and any trailing garbage, and only then lets msgpack-c build objects.
 * The wire_obj_* helpers turn objects into checked C values; they are meant
 * for the codec files of wire/ only (msgpack objects never leave wire/).
 *
 * Pure: no I/O, no clock, no globals (libsodium's own one-time init aside).
 */
#ifndef RK_WIRE_H
#define RK_WIRE_H

#include <stddef.h>
#include <stdint.h>

#include <msgpack.h>

#include "common/rk.h"

#define WIRE_KEY_BYTES 32 /* crypto_auth_KEYBYTES */
#define WIRE_MAC_BYTES 32 /* crypto_auth_BYTES */

/* Deepest msgpack nesting any ringkv message uses, with headroom. */
#define WIRE_MAX_DEPTH 16

/* A MAC key derived from the cluster secret. Plain data; wipe when done. */
struct wire_key {
    uint8_t bytes[WIRE_KEY_BYTES];
};

/* Derive the MAC key from the secret file's bytes, exactly as read (a trailing
 * newline is part of the secret: every node reads the same file).
 * Returns 0, or RK_ECONFIG if the secret is empty, or RK_EINTERNAL if
 * libsodium cannot initialise. */
int wire_key_derive(struct wire_key *out, const uint8_t *secret, size_t len);

/* Overwrite a key with zeros (sodium_memzero). NULL is a no-op. */
void wire_key_wipe(struct wire_key *key);

/* out = HMAC-SHA-512-256(key, msg[0..len)). */
void wire_mac_compute(uint8_t out[WIRE_MAC_BYTES],
                      const struct wire_key *key,
                      const uint8_t *msg,
                      size_t len);

/* Constant-time check of mac against msg. Returns 0 if it matches, RK_EAUTH
 * otherwise. */
int wire_mac_verify(const uint8_t mac[WIRE_MAC_BYTES],
                    const struct wire_key *key,
                    const uint8_t *msg,
                    size_t len);

/* Check that buf[0..len) is exactly one well-formed msgpack object: every
 * length and count fits in the bytes present, nesting is at most max_depth,
 * no reserved byte (0xc1) and nothing after the object. Ext types are
 * rejected (ringkv uses none). Returns 0 or RK_EPROTO. */
int wire_msgpack_check(const uint8_t *buf, size_t len, unsigned max_depth);

/* wire_msgpack_check() then msgpack_unpack_next() into `out` (which the
 * caller has msgpack_unpacked_init()ed and later msgpack_unpacked_destroy()s).
 * Strings and bins of the result point into buf: they live as long as buf.
 * Returns 0, RK_EPROTO on malformed input, -ENOMEM. */
int wire_unpack(msgpack_unpacked *out, const uint8_t *buf, size_t len);

/* Checked readers of one msgpack object; each returns 0 or RK_EPROTO and
 * leaves *out untouched on error. */
int wire_obj_u64(uint64_t *out, const msgpack_object *o);
/* A STR of at most max bytes; the slice borrows from the unpacked buffer. */
int wire_obj_str(struct rk_slice *out, const msgpack_object *o, size_t max);
/* A BIN of at most max bytes; the slice borrows from the unpacked buffer. */
int wire_obj_bin(struct rk_slice *out, const msgpack_object *o, size_t max);
/* An ARRAY of exactly `want` elements (want > 0) or, if want == 0, of at most
 * max elements; *out_items borrows from the unpacked zone. */
int wire_obj_array(const msgpack_object **out_items,
                   size_t *out_n,
                   const msgpack_object *o,
                   size_t want,
                   size_t max);

/* Exact encoded sizes, for codecs that split messages under a byte budget:
 * a msgpack uint, a str or bin header plus body, an array header. */
size_t wire_size_uint(uint64_t v);
size_t wire_size_str(size_t len);
size_t wire_size_bin(size_t len);
size_t wire_size_array(size_t n);

#endif
