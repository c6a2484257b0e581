/*
 * wire.h - what every wire/ format shares: the cluster MAC and the exact
 * encoded sizes of msgpack values.
 *
 * Authentication: every gossip packet and every internode handshake carries a
 * MAC under the cluster secret. The key is derived from the bytes of the
 * secret file with BLAKE2b (crypto_generichash) under a fixed domain label;
 * the MAC is libsodium's crypto_auth (HMAC-SHA-512-256), verified in constant
 * time. Nothing here is home-made cryptography.
 *
 * msgpack: the codecs of wire/ read through one bounds-checked reader and
 * write through one writer (wire_internal.h); no msgpack type crosses this
 * header, and nothing outside wire/ needs a msgpack library.
 *
 * Pure: no I/O, no clock, no globals (libsodium's own one-time init aside).
 */
#ifndef RK_WIRE_H
#define RK_WIRE_H

#include <stddef.h>
#include <stdint.h>

#include "common/rk.h"

#define WIRE_KEY_BYTES 32 /* crypto_auth_KEYBYTES */
#define WIRE_MAC_BYTES 32 /* crypto_auth_BYTES */

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

/* Exact encoded sizes, for codecs that split messages under a byte budget:
 * a msgpack uint, a str or bin header plus body, an array header
 * (msgpack_write.c: the writer's own header code). */
size_t wire_size_uint(uint64_t v);
size_t wire_size_str(size_t len);
size_t wire_size_bin(size_t len);
size_t wire_size_array(size_t n);

#endif
