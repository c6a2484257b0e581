/*
 * seal.c - the envelope both gossip packet families share (gossip_msg.c,
 * gossip_probe.c): a 3-byte magic and a format version before the msgpack
 * body, the cluster MAC after it. Sealing appends the MAC to a packet
 * written by a wire__wr; opening checks the size and magic, then the MAC
 * in constant time, then the version, before a byte of the body is read,
 * so a packet from outside the cluster costs one HMAC.
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "wire/wire.h"
#include "wire/wire_internal.h"

void wire__seal_begin(struct wire__wr *w,
                      uint8_t **buf,
                      size_t *len,
                      size_t *cap,
                      const char magic[3],
                      uint8_t version)
{
    const uint8_t header[WIRE__SEAL_HEADER] = {
        (uint8_t)magic[0], (uint8_t)magic[1], (uint8_t)magic[2], version};
    wire__wr_init(w, buf, len, cap);
    wire__wr_raw(w, header, sizeof(header));
}

int wire__seal(uint8_t **out,
               size_t *out_len,
               struct wire__wr *w,
               const struct wire_key *key,
               size_t max)
{
    int rc = wire__wr_end(w);
    if (rc == 0 && *w->buf_len + WIRE_MAC_BYTES > max)
        rc = RK_ETOOLARGE;
    if (rc == 0) {
        uint8_t mac[WIRE_MAC_BYTES];
        wire_mac_compute(mac, key, *w->buf, *w->buf_len);
        wire__wr_raw(w, mac, sizeof(mac));
        rc = wire__wr_end(w);
    }
    if (rc != 0) {
        free(*w->buf);
        *w->buf = NULL;
        return rc;
    }
    *out_len = *w->buf_len;
    *out = *w->buf;
    return 0;
}

int wire__unseal(struct rk_slice *body,
                 const uint8_t *pkt,
                 size_t len,
                 const char magic[3],
                 uint8_t version,
                 const struct wire_key *key,
                 size_t max)
{
    if (pkt == NULL || len < WIRE__SEAL_HEADER + 1 + WIRE_MAC_BYTES ||
        len > max || memcmp(pkt, magic, 3) != 0)
        return RK_EPROTO;
    size_t signed_len = len - WIRE_MAC_BYTES;
    if (wire_mac_verify(pkt + signed_len, key, pkt, signed_len) != 0)
        return RK_EAUTH;
    if (pkt[3] != version)
        return RK_EVERSION;
    *body = RK_SLICE(pkt + WIRE__SEAL_HEADER, signed_len - WIRE__SEAL_HEADER);
    return 0;
}
