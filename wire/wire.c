/*
 * wire.c - the cluster MAC (libsodium): key derivation, MAC and its
 * constant-time check. See wire.h for the why.
 */
#include "wire/wire.h"

#include <sodium.h>

/* ---- keys and MACs ------------------------------------------------------ */

static const char wire_key_label[] = "ringkv cluster MAC key v1";

int wire_key_derive(struct wire_key *out, const uint8_t *secret, size_t len)
{
    if (secret == NULL || len == 0)
        return RK_ECONFIG;
    if (sodium_init() < 0)
        return RK_EINTERNAL;
    crypto_generichash_state st;
    /* Domain label first, then the secret: the same secret used elsewhere
     * (another protocol's key) yields an unrelated key here. */
    if (crypto_generichash_init(&st, NULL, 0, WIRE_KEY_BYTES) != 0 ||
        crypto_generichash_update(&st, (const uint8_t *)wire_key_label,
                                  sizeof(wire_key_label)) != 0 ||
        crypto_generichash_update(&st, secret, len) != 0 ||
        crypto_generichash_final(&st, out->bytes, WIRE_KEY_BYTES) != 0) {
        sodium_memzero(&st, sizeof(st));
        return RK_EINTERNAL;
    }
    sodium_memzero(&st, sizeof(st));
    return 0;
}

void wire_key_wipe(struct wire_key *key)
{
    if (key != NULL)
        sodium_memzero(key->bytes, sizeof(key->bytes));
}

void wire_mac_compute(uint8_t out[WIRE_MAC_BYTES],
                      const struct wire_key *key,
                      const uint8_t *msg,
                      size_t len)
{
    crypto_auth(out, msg, len, key->bytes);
}

int wire_mac_verify(const uint8_t mac[WIRE_MAC_BYTES],
                    const struct wire_key *key,
                    const uint8_t *msg,
                    size_t len)
{
    return crypto_auth_verify(mac, msg, len, key->bytes) == 0 ? 0 : RK_EAUTH;
}
