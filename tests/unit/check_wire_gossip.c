/*
 * check_wire_gossip.c - the cluster MAC, the msgpack reader and the gossip
 * packet codec, and the failure detector's probe packets (gossip_probe.h):
 * golden bytes, round trips and rejection of bad input.
 *
 * The golden vectors pin the key derivation, the MAC and the layout: they
 * were cross-checked with Python's hashlib (BLAKE2b-256 of the label and the
 * secret; HMAC-SHA-512 truncated to 32 bytes), see docs/gossip.md. If they
 * change, nodes built from different trees stop hearing each other.
 */
#include <errno.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include <check.h>
#include <msgpack.h>

#include "golden.h"
#include "wire/gossip_msg.h"
#include "wire/gossip_probe.h"
#include "wire/wire.h"
#include "wire/wire_internal.h"

static const uint8_t golden_key[WIRE_KEY_BYTES] = {
    0x6b, 0xeb, 0x70, 0xd9, 0x8d, 0x68, 0xef, 0x62, 0x57, 0xf7, 0xc7,
    0xd7, 0x9c, 0xf0, 0x41, 0x06, 0x20, 0x44, 0x80, 0x13, 0xd7, 0x1c,
    0xe5, 0x7b, 0x60, 0x22, 0xf5, 0xb2, 0x6a, 0x98, 0x2c, 0x17,
};

static const uint8_t golden_syn[] = {
    0x52, 0x4b, 0x47, 0x01, 0x95, 0xa4, 0x70, 0x72, 0x6f, 0x64, 0x01, 0xa2,
    0x6e, 0x31, 0x92, 0x93, 0xa2, 0x6e, 0x31, 0x07, 0x2a, 0x93, 0xa2, 0x6e,
    0x32, 0xcf, 0x00, 0x00, 0x01, 0x8b, 0xcf, 0xe5, 0x68, 0x00, 0x03, 0x90,
    0xea, 0x76, 0x8e, 0x1f, 0x4a, 0x7c, 0xf8, 0x36, 0xf1, 0xd5, 0x29, 0x5a,
    0x75, 0x14, 0xe8, 0x67, 0xc2, 0x93, 0xa2, 0x7e, 0xc3, 0xbd, 0xde, 0xff,
    0x1e, 0xc3, 0xc5, 0xf8, 0xba, 0x81, 0x7b, 0x6f,
};

static const uint8_t golden_ack[] = {
    0x52, 0x4b, 0x47, 0x01, 0x95, 0xa4, 0x70, 0x72, 0x6f, 0x64, 0x02,
    0xa2, 0x6e, 0x32, 0x91, 0x93, 0xa2, 0x6e, 0x33, 0x00, 0x00, 0x91,
    0x95, 0xa2, 0x6e, 0x32, 0x07, 0x04, 0x09, 0x92, 0x93, 0x00, 0x05,
    0xc4, 0x08, 0x4e, 0x4f, 0x52, 0x4d, 0x41, 0x4c, 0x20, 0x33, 0x93,
    0x01, 0x09, 0xc4, 0x08, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00,
    0x2a, 0x7c, 0x87, 0x56, 0xac, 0xb9, 0x05, 0xe9, 0xcf, 0xe9, 0x29,
    0x4f, 0xb9, 0xa9, 0x27, 0xf9, 0x5c, 0x14, 0x18, 0x17, 0xf8, 0x37,
    0x2c, 0xc0, 0xf8, 0xde, 0xfd, 0x62, 0xde, 0xc7, 0x99, 0x41, 0x19,
};

#define GOLDEN_ACK2_LEN    82
#define GOLDEN_ACK2_HASH   UINT64_C(0xd1d6fd375cb3374d)
#define GOLDEN_WIDTHS_LEN  1368
#define GOLDEN_WIDTHS_HASH UINT64_C(0x563a341058bd1af9)

static struct wire_key key_of(const char *secret)
{
    struct wire_key k;
    ck_assert_int_eq(
        wire_key_derive(&k, (const uint8_t *)secret, strlen(secret)), 0);
    return k;
}

/* The golden SYN: two digests, one with a 64-bit generation. */
static struct wire_gossip_digest syn_dg[2] = {
    {{(const uint8_t *)"n1", 2}, 7, 42},
    {{(const uint8_t *)"n2", 2}, UINT64_C(1700000000000), 3},
};

static struct wire_gossip_msg golden_syn_msg(void)
{
    struct wire_gossip_msg m = {.type = WIRE_GOSSIP_SYN,
                                .cluster = RK_SLICE("prod", 4),
                                .from = RK_SLICE("n1", 2),
                                .digests = syn_dg,
                                .n_digests = 2};
    return m;
}

static struct wire_gossip_state ack_st[2] = {
    {0, 5, {(const uint8_t *)"NORMAL 3", 8}},
    {1, 9, {(const uint8_t *)"\0\0\0\0\0\0\0\x2a", 8}},
};
static struct wire_gossip_delta ack_dl[1] = {
    {{(const uint8_t *)"n2", 2}, 7, 4, 9, ack_st, 2},
};
static struct wire_gossip_digest ack_rq[1] = {
    {{(const uint8_t *)"n3", 2}, 0, 0},
};

static struct wire_gossip_msg golden_ack_msg(void)
{
    struct wire_gossip_msg m = {.type = WIRE_GOSSIP_ACK,
                                .cluster = RK_SLICE("prod", 4),
                                .from = RK_SLICE("n2", 2),
                                .digests = ack_rq,
                                .n_digests = 1,
                                .deltas = ack_dl,
                                .n_deltas = 1};
    return m;
}

/* "RKG" version | body | MAC: a packet with arbitrary body bytes. */
static size_t seal(uint8_t *out,
                   const struct wire_key *k,
                   uint8_t version,
                   const void *body,
                   size_t len)
{
    memcpy(out, "RKG", 3);
    out[3] = version;
    memcpy(out + 4, body, len);
    wire_mac_compute(out + 4 + len, k, out, 4 + len);
    return 4 + len + WIRE_MAC_BYTES;
}

/* ---- keys and MAC ------------------------------------------------------- */

START_TEST(key_golden_and_distinct)
{
    struct wire_key k = key_of("golden-secret");
    ck_assert_mem_eq(k.bytes, golden_key, WIRE_KEY_BYTES);
    struct wire_key k2 = key_of("golden-secret\n");
    ck_assert(memcmp(k.bytes, k2.bytes, WIRE_KEY_BYTES) != 0);
    ck_assert_int_eq(wire_key_derive(&k2, (const uint8_t *)"", 0), RK_ECONFIG);
    ck_assert_int_eq(wire_key_derive(&k2, NULL, 3), RK_ECONFIG);
    wire_key_wipe(&k2);
    for (size_t i = 0; i < WIRE_KEY_BYTES; i++)
        ck_assert_uint_eq(k2.bytes[i], 0);
    wire_key_wipe(NULL);
}
END_TEST

START_TEST(mac_verify_rejects_changes)
{
    struct wire_key k = key_of("s1"), other = key_of("s2");
    uint8_t msg[64], mac[WIRE_MAC_BYTES];
    for (size_t i = 0; i < sizeof(msg); i++)
        msg[i] = (uint8_t)(i * 7);
    wire_mac_compute(mac, &k, msg, sizeof(msg));
    ck_assert_int_eq(wire_mac_verify(mac, &k, msg, sizeof(msg)), 0);
    ck_assert_int_eq(wire_mac_verify(mac, &other, msg, sizeof(msg)), RK_EAUTH);
    ck_assert_int_eq(wire_mac_verify(mac, &k, msg, sizeof(msg) - 1), RK_EAUTH);
    for (size_t bit = 0; bit < sizeof(msg) * 8; bit += 13) {
        msg[bit / 8] ^= (uint8_t)(1u << (bit % 8));
        ck_assert_int_eq(wire_mac_verify(mac, &k, msg, sizeof(msg)), RK_EAUTH);
        msg[bit / 8] ^= (uint8_t)(1u << (bit % 8));
    }
    mac[31] ^= 1;
    ck_assert_int_eq(wire_mac_verify(mac, &k, msg, sizeof(msg)), RK_EAUTH);
}
END_TEST

/* ---- the msgpack reader ------------------------------------------------ */

/* What the old validator (the type walker before msgpack-c's unpacker)
 * refused, the one reader refuses too: a count or length beyond the bytes
 * present, a cut integer, the reserved byte, nesting past the bound; and it
 * reads exactly one value, so trailing bytes are left for the caller (every
 * decoder refuses them). */
static int skip_all(const uint8_t *p, size_t len)
{
    struct wire__rd r;
    wire__rd_init(&r, p, len);
    int rc = wire__rd_skip(&r, 0);
    if (rc == 0 && r.p != r.end)
        rc = WIRE__RD_BAD;
    return rc;
}

START_TEST(reader_rejects_dishonest_lengths)
{
    static const uint8_t ok1[] = {0x93, 0x01, 0xa1, 'x', 0xc4, 0x01, 0x00};
    static const uint8_t ok2[] = {0x82, 0x01, 0x02, 0x03, 0x90};
    static const uint8_t ok3[] = {0xcf, 1, 2, 3, 4, 5, 6, 7, 8};
    ck_assert_int_eq(skip_all(ok1, sizeof(ok1)), 0);
    ck_assert_int_eq(skip_all(ok2, sizeof(ok2)), 0);
    ck_assert_int_eq(skip_all(ok3, sizeof(ok3)), 0);
    /* array32 claiming 4 billion elements in 5 bytes */
    static const uint8_t huge[] = {0xdd, 0xff, 0xff, 0xff, 0xff};
    ck_assert_int_eq(skip_all(huge, sizeof(huge)), WIRE__RD_BAD);
    static const uint8_t map_huge[] = {0xdf, 0x80, 0, 0, 0, 1, 2};
    ck_assert_int_eq(skip_all(map_huge, sizeof(map_huge)), WIRE__RD_BAD);
    static const uint8_t short_str[] = {0xa5, 'a', 'b'};
    ck_assert_int_eq(skip_all(short_str, 3), WIRE__RD_BAD);
    static const uint8_t str32[] = {0xdb, 0xff, 0xff, 0xff, 0xff, 'a'};
    ck_assert_int_eq(skip_all(str32, sizeof(str32)), WIRE__RD_BAD);
    static const uint8_t trailing[] = {0x01, 0x02};
    ck_assert_int_eq(skip_all(trailing, 2), WIRE__RD_BAD);
    static const uint8_t reserved[] = {0xc1};
    ck_assert_int_eq(skip_all(reserved, 1), WIRE__RD_BAD);
    static const uint8_t cut_u64[] = {0xcf, 1, 2};
    ck_assert_int_eq(skip_all(cut_u64, 3), WIRE__RD_BAD);
    ck_assert_int_eq(skip_all(ok1, 0), WIRE__RD_BAD);
    uint8_t deep[40];
    memset(deep, 0x91, sizeof(deep));
    deep[39] = 0x00;
    ck_assert_int_eq(skip_all(deep, 40), WIRE__RD_BAD);
    deep[16] = 0x00;
    ck_assert_int_eq(skip_all(deep, 17), 0);
    /* Where a field of a given type is due, nothing else is read: an ext, a
     * nil or a float is not an unsigned integer. */
    static const uint8_t ext[] = {0xd4, 0x01, 0x02};
    static const uint8_t nil[] = {0xc0}, flt[] = {0xca, 0, 0, 0, 0};
    uint64_t v;
    struct wire__rd r;
    wire__rd_init(&r, ext, sizeof(ext));
    ck_assert_int_eq(wire__rd_uint(&r, &v), WIRE__RD_BAD);
    wire__rd_init(&r, nil, sizeof(nil));
    ck_assert_int_eq(wire__rd_uint(&r, &v), WIRE__RD_BAD);
    wire__rd_init(&r, flt, sizeof(flt));
    ck_assert_int_eq(wire__rd_uint(&r, &v), WIRE__RD_BAD);
}
END_TEST

START_TEST(sizes_match_encoder)
{
    for (uint64_t v = 1; v != 0; v <<= 1) {
        msgpack_sbuffer sb;
        msgpack_packer pk;
        msgpack_sbuffer_init(&sb);
        msgpack_packer_init(&pk, &sb, msgpack_sbuffer_write);
        msgpack_pack_uint64(&pk, v - 1);
        ck_assert_uint_eq(sb.size, wire_size_uint(v - 1));
        msgpack_sbuffer_clear(&sb);
        msgpack_pack_array(&pk, (size_t)(v & 0x3ffff));
        ck_assert_uint_eq(sb.size, wire_size_array((size_t)(v & 0x3ffff)));
        msgpack_sbuffer_clear(&sb);
        size_t l = (size_t)(v & 0x1ffff);
        msgpack_pack_str(&pk, l);
        ck_assert_uint_eq(sb.size + l, wire_size_str(l));
        msgpack_sbuffer_clear(&sb);
        msgpack_pack_bin(&pk, l);
        ck_assert_uint_eq(sb.size + l, wire_size_bin(l));
        msgpack_sbuffer_destroy(&sb);
    }
    /* And the packet-level sums equal the encoded size. */
    struct wire_key k = key_of("golden-secret");
    struct wire_gossip_msg m = golden_ack_msg();
    uint8_t *buf;
    size_t len;
    ck_assert_int_eq(wire_gossip_msg_encode(&buf, &len, &m, &k), 0);
    size_t want = wire_gossip_size_base(4, 2, 1, 1) +
                  wire_gossip_size_digest(&ack_rq[0]) +
                  wire_gossip_size_delta_head(&ack_dl[0], 2) +
                  wire_gossip_size_state(&ack_st[0]) +
                  wire_gossip_size_state(&ack_st[1]);
    ck_assert_uint_eq(len, want);
    free(buf);
}
END_TEST

/* ---- gossip codec ------------------------------------------------------- */

START_TEST(golden_syn_and_ack)
{
    struct wire_key k = key_of("golden-secret");
    struct wire_gossip_msg m = golden_syn_msg();
    uint8_t *buf;
    size_t len;
    ck_assert_int_eq(wire_gossip_msg_encode(&buf, &len, &m, &k), 0);
    ck_assert_uint_eq(len, sizeof(golden_syn));
    ck_assert_mem_eq(buf, golden_syn, len);
    free(buf);
    m = golden_ack_msg();
    ck_assert_int_eq(wire_gossip_msg_encode(&buf, &len, &m, &k), 0);
    ck_assert_uint_eq(len, sizeof(golden_ack));
    ck_assert_mem_eq(buf, golden_ack, len);
    free(buf);
}
END_TEST

static bool inside(struct rk_slice s, const uint8_t *p, size_t len)
{
    return s.p >= p && s.p + s.len <= p + len;
}

/* The golden packet golden[0..golden_len) (either family) with its body's
 * array header byte `head` and its elements followed by tail[0..n),
 * sealed again into out (160 bytes); its length. */
static size_t golden_longer(uint8_t *out,
                            const struct wire_key *k,
                            const uint8_t *golden,
                            size_t golden_len,
                            uint8_t head,
                            const uint8_t *tail,
                            size_t n)
{
    size_t len = golden_len - WIRE_MAC_BYTES; /* magic, version, body */
    ck_assert_uint_le(len + n + WIRE_MAC_BYTES, 160);
    memcpy(out, golden, len);
    out[4] = head;
    memcpy(out + len, tail, n);
    wire_mac_compute(out + len + n, k, out, len + n);
    return len + n + WIRE_MAC_BYTES;
}

/* buf[0..len) is golden_longer()'s packet. */
static void golden_longer_check(const uint8_t *buf,
                                size_t len,
                                const struct wire_key *k,
                                const uint8_t *golden,
                                size_t golden_len,
                                uint8_t head,
                                const uint8_t *tail,
                                size_t n)
{
    uint8_t sealed[160];
    size_t want = golden_longer(sealed, k, golden, golden_len, head, tail, n);
    ck_assert_uint_eq(len, want);
    ck_assert_mem_eq(buf, sealed, want);
}

/* The golden SYN with the sender's wall clock: a sixth element, the
 * same bytes otherwise; read back, and sized by wire_gossip_size_clock. */
START_TEST(stamped_round_trip)
{
    struct wire_key k = key_of("golden-secret");
    struct wire_gossip_msg m = golden_syn_msg();
    m.wall_ms = UINT64_C(1796000000000); /* 0x1a229f12800 */
    uint8_t *buf;
    size_t len;
    ck_assert_int_eq(wire_gossip_msg_encode(&buf, &len, &m, &k), 0);
    const uint8_t wall[] = {0xcf, 0x00, 0x00, 0x01, 0xa2,
                            0x29, 0xf1, 0x28, 0x00};
    golden_longer_check(buf, len, &k, golden_syn, sizeof(golden_syn), 0x96,
                        wall, sizeof(wall));
    ck_assert_uint_eq(len,
                      sizeof(golden_syn) + wire_gossip_size_clock(m.wall_ms));
    struct wire_gossip_msg d;
    ck_assert_int_eq(wire_gossip_msg_decode(&d, &k, buf, len), 0);
    ck_assert_uint_eq(d.wall_ms, m.wall_ms);
    ck_assert_uint_eq(d.n_digests, 2);
    wire_gossip_msg_release(&d);
    free(buf);
    /* the five-element form reads as no stamp */
    ck_assert_int_eq(
        wire_gossip_msg_decode(&d, &k, golden_syn, sizeof(golden_syn)), 0);
    ck_assert_uint_eq(d.wall_ms, 0);
    wire_gossip_msg_release(&d);
    ck_assert_uint_eq(wire_gossip_size_clock(0), 0);
    ck_assert_uint_eq(wire_gossip_size_clock(UINT64_MAX), 9);
}
END_TEST

/* The golden SYN numbered: boot 1796000000 (a generation), seq 300, no
 * wall clock (0: one byte); eight elements, the same bytes before them;
 * read back, sized by wire_gossip_size_fresh; the shorter forms read as
 * unnumbered; boot without seq is refused, and so is a boot or seq of 0
 * in the eight-element form. */
START_TEST(numbered_round_trip)
{
    struct wire_key k = key_of("golden-secret");
    struct wire_gossip_msg m = golden_syn_msg();
    m.boot = UINT64_C(1796000000); /* 0x6b0cc900 */
    m.seq = 300;
    uint8_t *buf;
    size_t len;
    ck_assert_int_eq(wire_gossip_msg_encode(&buf, &len, &m, &k), 0);
    const uint8_t tail[] = {0x00, 0xce, 0x6b, 0x0c, 0xc9,
                            0x00, 0xcd, 0x01, 0x2c};
    golden_longer_check(buf, len, &k, golden_syn, sizeof(golden_syn), 0x98,
                        tail, sizeof(tail));
    ck_assert_uint_le(len, sizeof(golden_syn) +
                               wire_gossip_size_clock(UINT64_MAX) +
                               wire_gossip_size_fresh(m.boot, m.seq));
    struct wire_gossip_msg d;
    ck_assert_int_eq(wire_gossip_msg_decode(&d, &k, buf, len), 0);
    ck_assert_uint_eq(d.boot, m.boot);
    ck_assert_uint_eq(d.seq, 300);
    ck_assert_uint_eq(d.wall_ms, 0);
    ck_assert_uint_eq(d.n_digests, 2);
    wire_gossip_msg_release(&d);
    free(buf);
    /* with a wall clock too */
    m.wall_ms = UINT64_C(1796000000000);
    ck_assert_int_eq(wire_gossip_msg_encode(&buf, &len, &m, &k), 0);
    ck_assert_int_eq(wire_gossip_msg_decode(&d, &k, buf, len), 0);
    ck_assert_uint_eq(d.wall_ms, m.wall_ms);
    ck_assert_uint_eq(d.boot, m.boot);
    ck_assert_uint_eq(d.seq, 300);
    ck_assert_uint_eq(len, sizeof(golden_syn) +
                               wire_gossip_size_clock(m.wall_ms) +
                               wire_gossip_size_fresh(m.boot, m.seq));
    wire_gossip_msg_release(&d);
    free(buf);
    /* the five- and six-element forms are unnumbered */
    ck_assert_int_eq(
        wire_gossip_msg_decode(&d, &k, golden_syn, sizeof(golden_syn)), 0);
    ck_assert_uint_eq(d.boot, 0);
    ck_assert_uint_eq(d.seq, 0);
    wire_gossip_msg_release(&d);
    /* boot without seq */
    m.seq = 0;
    ck_assert_int_eq(wire_gossip_msg_encode(&buf, &len, &m, &k), RK_EBADREQ);
    /* eight elements with seq 0, then with boot 0 */
    const uint8_t zero_seq[] = {0x00, 0xce, 0x6b, 0x0c, 0xc9, 0x00, 0x00};
    const uint8_t zero_boot[] = {0x00, 0x00, 0x07};
    uint8_t sealed[160];
    size_t n = golden_longer(sealed, &k, golden_syn, sizeof(golden_syn), 0x98,
                             zero_seq, sizeof(zero_seq));
    ck_assert_int_eq(wire_gossip_msg_decode(&d, &k, sealed, n), RK_EPROTO);
    n = golden_longer(sealed, &k, golden_syn, sizeof(golden_syn), 0x98,
                      zero_boot, sizeof(zero_boot));
    ck_assert_int_eq(wire_gossip_msg_decode(&d, &k, sealed, n), RK_EPROTO);
    ck_assert_uint_eq(wire_gossip_size_fresh(0, 0), 0);
    ck_assert_uint_eq(wire_gossip_size_fresh(UINT64_MAX, UINT64_MAX), 18);
}
END_TEST

/* ACK2, and a packet with a digest array16, a bin16 value, str8 names and
 * every uint width: today's bytes, pinned by length and XXH3-64. */
START_TEST(golden_ack2_and_widths)
{
    struct wire_key k = key_of("golden-secret");
    struct wire_gossip_msg m = golden_ack_msg();
    m.type = WIRE_GOSSIP_ACK2;
    m.digests = NULL;
    m.n_digests = 0;
    uint8_t *buf;
    size_t len;
    ck_assert_int_eq(wire_gossip_msg_encode(&buf, &len, &m, &k), 0);
    golden_digest_check(buf, len, GOLDEN_ACK2_LEN, GOLDEN_ACK2_HASH, "ack2");
    free(buf);

    static const uint64_t num[] = {
        0,         127,        128,
        255,       256,        65535,
        65536,     UINT32_MAX, (uint64_t)UINT32_MAX + 1,
        UINT64_MAX};
    static char name[WIRE_GOSSIP_MAX_NAME];
    static uint8_t value[300];
    memset(name, 'x', sizeof(name));
    memset(value, 'v', sizeof(value));
    struct wire_gossip_digest dg[17];
    for (size_t i = 0; i < 17; i++)
        dg[i] = (struct wire_gossip_digest){RK_SLICE(name, 1 + i * 3),
                                            num[i % 10], num[(i + 3) % 10]};
    struct wire_gossip_state st[3] = {
        {0, 2, RK_SLICE(value, 0)},
        {200, 300, RK_SLICE(value, 255)},
        {255, 70000, RK_SLICE(value, 300)},
    };
    struct wire_gossip_delta dl = {
        RK_SLICE(name, 32), UINT64_MAX, 1, 70000, st, 3};
    m = (struct wire_gossip_msg){.type = WIRE_GOSSIP_ACK,
                                 .cluster = RK_SLICE(name, 31),
                                 .from = RK_SLICE(name, WIRE_GOSSIP_MAX_NAME),
                                 .digests = dg,
                                 .n_digests = 17,
                                 .deltas = &dl,
                                 .n_deltas = 1};
    ck_assert_int_eq(wire_gossip_msg_encode(&buf, &len, &m, &k), 0);
    golden_digest_check(buf, len, GOLDEN_WIDTHS_LEN, GOLDEN_WIDTHS_HASH,
                        "widths");
    struct wire_gossip_msg d;
    ck_assert_int_eq(wire_gossip_msg_decode(&d, &k, buf, len), 0);
    ck_assert_uint_eq(d.n_digests, 17);
    ck_assert_uint_eq(d.digests[16].version, num[9]);
    ck_assert_uint_eq(d.deltas[0].n_states, 3);
    ck_assert_uint_eq(d.deltas[0].states[2].value.len, 300);
    ck_assert_uint_eq(d.deltas[0].states[2].key, 255);
    wire_gossip_msg_release(&d);
    free(buf);
}
END_TEST

START_TEST(decode_golden)
{
    struct wire_key k = key_of("golden-secret");
    struct wire_gossip_msg m;
    ck_assert_int_eq(
        wire_gossip_msg_decode(&m, &k, golden_syn, sizeof(golden_syn)), 0);
    ck_assert_int_eq(m.type, WIRE_GOSSIP_SYN);
    ck_assert_mem_eq(m.cluster.p, "prod", 4);
    ck_assert_uint_eq(m.n_digests, 2);
    ck_assert_uint_eq(m.n_deltas, 0);
    ck_assert_uint_eq(m.digests[1].generation, UINT64_C(1700000000000));
    ck_assert_uint_eq(m.digests[0].version, 42);
    /* slices borrow the packet, they must not point into a freed zone */
    ck_assert(inside(m.digests[1].node, golden_syn, sizeof(golden_syn)));
    wire_gossip_msg_release(&m);

    uint8_t copy[sizeof(golden_ack)];
    memcpy(copy, golden_ack, sizeof(copy));
    ck_assert_int_eq(wire_gossip_msg_decode(&m, &k, copy, sizeof(copy)), 0);
    ck_assert_int_eq(m.type, WIRE_GOSSIP_ACK);
    ck_assert_uint_eq(m.n_deltas, 1);
    ck_assert_uint_eq(m.deltas[0].base, 4);
    ck_assert_uint_eq(m.deltas[0].top, 9);
    ck_assert_uint_eq(m.deltas[0].n_states, 2);
    ck_assert_uint_eq(m.deltas[0].states[1].key, 1);
    ck_assert_uint_eq(m.deltas[0].states[1].value.len, 8);
    ck_assert_uint_eq(m.deltas[0].states[1].value.p[7], 0x2a);
    ck_assert(inside(m.deltas[0].states[0].value, copy, sizeof(copy)));
    ck_assert_mem_eq(m.deltas[0].states[0].value.p, "NORMAL 3", 8);
    wire_gossip_msg_release(&m);
    wire_gossip_msg_release(&m); /* released twice: no-op */
    wire_gossip_msg_release(NULL);
}
END_TEST

START_TEST(decode_rejects_bad_auth_and_format)
{
    struct wire_key k = key_of("golden-secret"), other = key_of("other");
    struct wire_gossip_msg m;
    uint8_t p[sizeof(golden_syn)];
    ck_assert_int_eq(
        wire_gossip_msg_decode(&m, &other, golden_syn, sizeof(golden_syn)),
        RK_EAUTH);
    for (size_t i = 4; i < sizeof(p); i++) {
        memcpy(p, golden_syn, sizeof(p));
        p[i] ^= 0x20;
        ck_assert_int_eq(wire_gossip_msg_decode(&m, &k, p, sizeof(p)),
                         RK_EAUTH);
    }
    memcpy(p, golden_syn, sizeof(p));
    p[0] = 'X';
    ck_assert_int_eq(wire_gossip_msg_decode(&m, &k, p, sizeof(p)), RK_EPROTO);
    ck_assert_int_eq(wire_gossip_msg_decode(&m, &k, golden_syn, 20), RK_EPROTO);
    ck_assert_int_eq(wire_gossip_msg_decode(&m, &k, NULL, 0), RK_EPROTO);

    /* A correctly MACed packet of an unknown format version. */
    uint8_t buf[256];
    size_t body_len = sizeof(golden_syn) - 4 - WIRE_MAC_BYTES;
    size_t n = seal(buf, &k, 2, golden_syn + 4, body_len);
    ck_assert_int_eq(wire_gossip_msg_decode(&m, &k, buf, n), RK_EVERSION);
    n = seal(buf, &k, 1, golden_syn + 4, body_len);
    ck_assert_int_eq(wire_gossip_msg_decode(&m, &k, buf, n), 0);
    wire_gossip_msg_release(&m);
}
END_TEST

/* Correctly authenticated but malformed bodies: each must be RK_EPROTO. */
static const struct {
    const char *what;
    uint8_t body[48];
    size_t len;
} bad_bodies[] = {
    {"not an array", {0x01}, 1},
    {"array of 4", {0x94, 0xa1, 'c', 0x01, 0xa1, 'n', 0x90}, 6},
    {"type 4", {0x95, 0xa1, 'c', 0x04, 0xa1, 'n', 0x90, 0x90}, 8},
    {"type 0", {0x95, 0xa1, 'c', 0x00, 0xa1, 'n', 0x90, 0x90}, 8},
    {"empty cluster", {0x95, 0xa0, 0x01, 0xa1, 'n', 0x90, 0x90}, 7},
    {"from is bin", {0x95, 0xa1, 'c', 0x01, 0xc4, 1, 'n', 0x90, 0x90}, 9},
    {"negative gen",
     {0x95, 0xa1, 'c', 0x01, 0xa1, 'n', 0x91, 0x93, 0xa1, 'x', 0xff, 0x01,
      0x90},
     13},
    {"digest of 2",
     {0x95, 0xa1, 'c', 0x01, 0xa1, 'n', 0x91, 0x92, 0xa1, 'x', 0x01, 0x90},
     12},
    {"base above top",
     {0x95, 0xa1, 'c', 0x03, 0xa1, 'n', 0x90, 0x91, 0x95, 0xa1, 'x', 0x01, 0x05,
      0x04, 0x90},
     15},
    {"state version not above base",
     {0x95, 0xa1, 'c',  0x03, 0xa1, 'n',  0x90, 0x91, 0x95, 0xa1,
      'x',  0x01, 0x04, 0x06, 0x91, 0x93, 0x00, 0x04, 0xc4, 0x00},
     20},
    {"state version above top",
     {0x95, 0xa1, 'c',  0x03, 0xa1, 'n',  0x90, 0x91, 0x95, 0xa1,
      'x',  0x01, 0x04, 0x06, 0x91, 0x93, 0x00, 0x07, 0xc4, 0x00},
     20},
    {"key 256",
     {0x95, 0xa1, 'c',  0x03, 0xa1, 'n',  0x90, 0x91, 0x95, 0xa1, 'x',
      0x01, 0x04, 0x06, 0x91, 0x93, 0xcd, 0x01, 0x00, 0x05, 0xc4, 0x00},
     22},
    {"value as str",
     {0x95, 0xa1, 'c', 0x03, 0xa1, 'n', 0x90, 0x91, 0x95, 0xa1, 'x', 0x01, 0x04,
      0x06, 0x91, 0x93, 0x00, 0x05, 0xa0},
     19},
    {"trailing byte", {0x95, 0xa1, 'c', 0x01, 0xa1, 'n', 0x90, 0x90, 0x00}, 9},
    {"reserved byte as type",
     {0x95, 0xa1, 'c', 0xc1, 0xa1, 'n', 0x90, 0x90},
     8},
    {"ext as generation",
     {0x95, 0xa1, 'c', 0x01, 0xa1, 'n', 0x91, 0x93, 0xa1, 'x', 0xd4, 0x01, 0x02,
      0x01, 0x90},
     15},
    {"cut generation",
     {0x95, 0xa1, 'c', 0x01, 0xa1, 'n', 0x91, 0x93, 0xa1, 'x', 0xcf, 0x01},
     12},
    {"map of digests", {0x95, 0xa1, 'c', 0x01, 0xa1, 'n', 0x80, 0x90}, 8},
    {"cluster longer than the body",
     {0x95, 0xdb, 0xff, 0xff, 0xff, 0xff, 'c'},
     7},
    {"huge array",
     {0x95, 0xa1, 'c', 0x01, 0xa1, 'n', 0xdd, 0x7f, 0xff, 0xff, 0xff, 0x90},
     12},
    {"wall clock 0", {0x96, 0xa1, 'c', 0x01, 0xa1, 'n', 0x90, 0x90, 0x00}, 9},
    {"negative wall clock",
     {0x96, 0xa1, 'c', 0x01, 0xa1, 'n', 0x90, 0x90, 0xff},
     9},
    {"wall clock as str",
     {0x96, 0xa1, 'c', 0x01, 0xa1, 'n', 0x90, 0x90, 0xa1, '1'},
     10},
    {"array of 7",
     {0x97, 0xa1, 'c', 0x01, 0xa1, 'n', 0x90, 0x90, 0x01, 0x01},
     10},
    {"array of 6, wall clock missing",
     {0x96, 0xa1, 'c', 0x01, 0xa1, 'n', 0x90, 0x90},
     8},
};

START_TEST(decode_rejects_malformed_bodies)
{
    struct wire_key k = key_of("golden-secret");
    struct wire_gossip_msg m;
    uint8_t buf[128];
    size_t n = seal(buf, &k, 1, bad_bodies[_i].body, bad_bodies[_i].len);
    int rc = wire_gossip_msg_decode(&m, &k, buf, n);
    ck_assert_msg(rc == RK_EPROTO, "%s: rc=%d", bad_bodies[_i].what, rc);
    ck_assert_ptr_null(m.digests);
}
END_TEST

START_TEST(encode_refuses_bad_messages)
{
    struct wire_key k = key_of("golden-secret");
    uint8_t *buf = NULL;
    size_t len;
    struct wire_gossip_msg m = golden_ack_msg();
    m.type = 9;
    ck_assert_int_eq(wire_gossip_msg_encode(&buf, &len, &m, &k), RK_EBADREQ);
    m = golden_ack_msg();
    char longname[WIRE_GOSSIP_MAX_NAME + 2];
    memset(longname, 'a', sizeof(longname));
    m.from = RK_SLICE(longname, WIRE_GOSSIP_MAX_NAME + 1);
    ck_assert_int_eq(wire_gossip_msg_encode(&buf, &len, &m, &k), RK_EBADREQ);
    m.from = RK_SLICE(longname, WIRE_GOSSIP_MAX_NAME);
    ck_assert_int_eq(wire_gossip_msg_encode(&buf, &len, &m, &k), 0);
    free(buf);
    struct wire_gossip_state st = {0, 3, RK_SLICE("x", 1)};
    struct wire_gossip_delta dl = {RK_SLICE("n", 1), 1, 3, 5, &st, 1};
    m = golden_ack_msg();
    m.deltas = &dl;
    ck_assert_int_eq(wire_gossip_msg_encode(&buf, &len, &m, &k), RK_EBADREQ);
    static uint8_t big[WIRE_GOSSIP_MAX_VALUE + 1];
    st.version = 4;
    st.value = RK_SLICE(big, sizeof(big));
    ck_assert_int_eq(wire_gossip_msg_encode(&buf, &len, &m, &k), RK_ETOOLARGE);
    /* Many values that are each fine but exceed a datagram together. */
    struct wire_gossip_state many[8];
    for (int i = 0; i < 8; i++)
        many[i] = (struct wire_gossip_state){
            (uint32_t)i, (uint64_t)i + 4, RK_SLICE(big, WIRE_GOSSIP_MAX_VALUE)};
    dl.states = many;
    dl.n_states = 8;
    dl.top = 20;
    ck_assert_int_eq(wire_gossip_msg_encode(&buf, &len, &m, &k), RK_ETOOLARGE);
}
END_TEST

/* ---- probe packets ------------------------------------------------------- */

/* A PING from n1 to n2 (seq 7) carrying "n1 suspects n3 (generation 5) at
 * incarnation 2"; bytes and MAC computed apart with Python's hmac module. */
static const uint8_t golden_ping[] = {
    0x52, 0x4b, 0x50, 0x01, 0x97, 0xa4, 0x70, 0x72, 0x6f, 0x64, 0x01,
    0xa2, 0x6e, 0x31, 0x07, 0xa2, 0x6e, 0x32, 0x00, 0x91, 0x95, 0xa2,
    0x6e, 0x33, 0x05, 0x02, 0x02, 0xa2, 0x6e, 0x31, 0xe5, 0xc9, 0x75,
    0xfe, 0x71, 0x3e, 0x9d, 0x2b, 0xf9, 0x3f, 0xe4, 0x7f, 0xf0, 0x33,
    0x94, 0xd4, 0x59, 0x5b, 0x61, 0x15, 0x20, 0xa4, 0x92, 0x8c, 0xe8,
    0xd9, 0x96, 0x5f, 0xeb, 0xab, 0x2f, 0x22,
};

static const struct wire_probe_rumor golden_rumor = {
    {(const uint8_t *)"n3", 2},
    5,
    2,
    WIRE_PROBE_SUSPECT,
    {(const uint8_t *)"n1", 2}};

static struct wire_probe_msg golden_ping_msg(void)
{
    struct wire_probe_msg m = {
        .type = WIRE_PROBE_PING,
        .cluster = RK_SLICE("prod", 4),
        .from = RK_SLICE("n1", 2),
        .seq = 7,
        .target = RK_SLICE("n2", 2),
        .rumors = (struct wire_probe_rumor *)&golden_rumor,
        .n_rumors = 1,
    };
    return m;
}

START_TEST(probe_golden_and_round_trip)
{
    struct wire_key k = key_of("golden-secret");
    struct wire_probe_msg m = golden_ping_msg();
    uint8_t *buf;
    size_t len;
    ck_assert_int_eq(wire_probe_msg_encode(&buf, &len, &m, &k), 0);
    ck_assert_uint_eq(len, sizeof(golden_ping));
    ck_assert_mem_eq(buf, golden_ping, len);
    ck_assert(wire_probe_is(buf, len));
    ck_assert(!wire_probe_is(golden_syn, sizeof(golden_syn)));
    ck_assert_uint_le(len, wire_probe_size_base(4, 2, 2, 1) +
                               wire_probe_size_rumor(&golden_rumor));
    free(buf);

    struct wire_probe_msg d;
    ck_assert_int_eq(
        wire_probe_msg_decode(&d, &k, golden_ping, sizeof(golden_ping)), 0);
    ck_assert_int_eq(d.type, WIRE_PROBE_PING);
    ck_assert_uint_eq(d.seq, 7);
    ck_assert_mem_eq(d.target.p, "n2", 2);
    ck_assert_uint_eq(d.n_rumors, 1);
    ck_assert_mem_eq(d.rumors[0].node.p, "n3", 2);
    ck_assert_uint_eq(d.rumors[0].generation, 5);
    ck_assert_uint_eq(d.rumors[0].incarnation, 2);
    ck_assert_int_eq(d.rumors[0].kind, WIRE_PROBE_SUSPECT);
    ck_assert_mem_eq(d.rumors[0].origin.p, "n1", 2);
    wire_probe_msg_release(&d);

    /* every type round-trips; NEWS names no target */
    for (int t = WIRE_PROBE_PING; t <= WIRE_PROBE_NEWS; t++) {
        m.type = (enum wire_probe_type)t;
        m.target = t == WIRE_PROBE_NEWS ? RK_SLICE(NULL, 0) : RK_SLICE("n2", 2);
        m.seq = UINT64_MAX;
        m.incarnation = UINT64_MAX - 1;
        ck_assert_int_eq(wire_probe_msg_encode(&buf, &len, &m, &k), 0);
        ck_assert_uint_le(len, wire_probe_size_base(4, 2, 2, 1) +
                                   wire_probe_size_rumor(&golden_rumor));
        ck_assert_int_eq(wire_probe_msg_decode(&d, &k, buf, len), 0);
        ck_assert_int_eq(d.type, t);
        ck_assert_uint_eq(d.seq, UINT64_MAX);
        ck_assert_uint_eq(d.incarnation, UINT64_MAX - 1);
        wire_probe_msg_release(&d);
        free(buf);
    }
}
END_TEST

/* The golden PING numbered: boot 1796000000, pkt_seq 300 after the
 * rumors (nine elements, the same bytes before them); the seven-element
 * form reads as unnumbered. */
START_TEST(probe_numbered_round_trip)
{
    struct wire_key k = key_of("golden-secret");
    struct wire_probe_msg m = golden_ping_msg();
    m.boot = UINT64_C(1796000000);
    m.pkt_seq = 300;
    uint8_t *buf;
    size_t len;
    ck_assert_int_eq(wire_probe_msg_encode(&buf, &len, &m, &k), 0);
    const uint8_t tail[] = {0xce, 0x6b, 0x0c, 0xc9, 0x00, 0xcd, 0x01, 0x2c};
    golden_longer_check(buf, len, &k, golden_ping, sizeof(golden_ping), 0x99,
                        tail, sizeof(tail));
    ck_assert_uint_le(len, wire_probe_size_base(4, 2, 2, 1) +
                               wire_probe_size_rumor(&golden_rumor));
    struct wire_probe_msg d;
    ck_assert_int_eq(wire_probe_msg_decode(&d, &k, buf, len), 0);
    ck_assert_uint_eq(d.boot, m.boot);
    ck_assert_uint_eq(d.pkt_seq, 300);
    ck_assert_uint_eq(d.seq, 7);
    ck_assert_uint_eq(d.n_rumors, 1);
    wire_probe_msg_release(&d);
    free(buf);
    ck_assert_int_eq(
        wire_probe_msg_decode(&d, &k, golden_ping, sizeof(golden_ping)), 0);
    ck_assert_uint_eq(d.boot, 0);
    ck_assert_uint_eq(d.pkt_seq, 0);
    wire_probe_msg_release(&d);
    m.pkt_seq = 0;
    ck_assert_int_eq(wire_probe_msg_encode(&buf, &len, &m, &k), RK_EBADREQ);
}
END_TEST

START_TEST(probe_rejects_bad_input)
{
    struct wire_key k = key_of("golden-secret"), other = key_of("other");
    struct wire_probe_msg d;
    uint8_t pkt[sizeof(golden_ping)];
    memcpy(pkt, golden_ping, sizeof(pkt));
    ck_assert_int_eq(wire_probe_msg_decode(&d, &other, pkt, sizeof(pkt)),
                     RK_EAUTH);
    pkt[20] ^= 1;
    ck_assert_int_eq(wire_probe_msg_decode(&d, &k, pkt, sizeof(pkt)), RK_EAUTH);
    ck_assert_int_eq(wire_probe_msg_decode(&d, &k, pkt, 10), RK_EPROTO);
    ck_assert_int_eq(
        wire_probe_msg_decode(&d, &k, golden_syn, sizeof(golden_syn)),
        RK_EPROTO);
    /* the anti-entropy decoder refuses probe packets (what an older node
     * does with them) */
    struct wire_gossip_msg gm;
    ck_assert_int_eq(
        wire_gossip_msg_decode(&gm, &k, golden_ping, sizeof(golden_ping)),
        RK_EPROTO);

    /* the encoder refuses what the decoder would */
    struct wire_probe_msg m = golden_ping_msg();
    uint8_t *buf;
    size_t len;
    m.type = 0;
    ck_assert_int_eq(wire_probe_msg_encode(&buf, &len, &m, &k), RK_EBADREQ);
    m = golden_ping_msg();
    m.target = RK_SLICE(NULL, 0); /* a PING names its target */
    ck_assert_int_eq(wire_probe_msg_encode(&buf, &len, &m, &k), RK_EBADREQ);
    m = golden_ping_msg();
    m.type = WIRE_PROBE_NEWS; /* NEWS names none */
    ck_assert_int_eq(wire_probe_msg_encode(&buf, &len, &m, &k), RK_EBADREQ);
    m = golden_ping_msg();
    struct wire_probe_rumor r = golden_rumor;
    r.generation = 0;
    m.rumors = &r;
    ck_assert_int_eq(wire_probe_msg_encode(&buf, &len, &m, &k), RK_EBADREQ);
    r = golden_rumor;
    r.kind = (enum wire_probe_rumor_kind)3;
    ck_assert_int_eq(wire_probe_msg_encode(&buf, &len, &m, &k), RK_EBADREQ);
    m = golden_ping_msg();
    m.n_rumors = WIRE_PROBE_MAX_RUMORS + 1;
    ck_assert_int_eq(wire_probe_msg_encode(&buf, &len, &m, &k), RK_ETOOLARGE);

    /* a well-sealed body that breaks the layout: a bad kind (7) */
    uint8_t bad[sizeof(golden_ping)];
    memcpy(bad, golden_ping, sizeof(bad));
    bad[26] = 0x07;
    wire_mac_compute(bad + sizeof(bad) - WIRE_MAC_BYTES, &k, bad,
                     sizeof(bad) - WIRE_MAC_BYTES);
    ck_assert_int_eq(wire_probe_msg_decode(&d, &k, bad, sizeof(bad)),
                     RK_EPROTO);
    /* and an unknown format version */
    memcpy(bad, golden_ping, sizeof(bad));
    bad[3] = 2;
    wire_mac_compute(bad + sizeof(bad) - WIRE_MAC_BYTES, &k, bad,
                     sizeof(bad) - WIRE_MAC_BYTES);
    ck_assert_int_eq(wire_probe_msg_decode(&d, &k, bad, sizeof(bad)),
                     RK_EVERSION);
}
END_TEST

static Suite *wire_gossip_suite(void)
{
    Suite *s = suite_create("wire_gossip");
    TCase *tc = tcase_create("mac");
    tcase_add_test(tc, key_golden_and_distinct);
    tcase_add_test(tc, mac_verify_rejects_changes);
    suite_add_tcase(s, tc);
    tc = tcase_create("msgpack");
    tcase_add_test(tc, reader_rejects_dishonest_lengths);
    tcase_add_test(tc, sizes_match_encoder);
    suite_add_tcase(s, tc);
    tc = tcase_create("codec");
    tcase_add_test(tc, golden_syn_and_ack);
    tcase_add_test(tc, decode_golden);
    tcase_add_test(tc, golden_ack2_and_widths);
    tcase_add_test(tc, stamped_round_trip);
    tcase_add_test(tc, numbered_round_trip);
    tcase_add_test(tc, decode_rejects_bad_auth_and_format);
    tcase_add_loop_test(tc, decode_rejects_malformed_bodies, 0,
                        sizeof(bad_bodies) / sizeof(bad_bodies[0]));
    tcase_add_test(tc, encode_refuses_bad_messages);
    suite_add_tcase(s, tc);
    tc = tcase_create("probe");
    tcase_add_test(tc, probe_golden_and_round_trip);
    tcase_add_test(tc, probe_rejects_bad_input);
    tcase_add_test(tc, probe_numbered_round_trip);
    suite_add_tcase(s, tc);
    return s;
}

int main(void)
{
    SRunner *sr = srunner_create(wire_gossip_suite());
    srunner_run_all(sr, CK_NORMAL);
    int failed = srunner_ntests_failed(sr);
    srunner_free(sr);
    return failed == 0 ? EXIT_SUCCESS : EXIT_FAILURE;
}
