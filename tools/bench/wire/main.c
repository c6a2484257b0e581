/*
 * bench-wire - the hot messages of wire/ encoded and decoded in a loop, one
 * function per message and direction, so that callgrind's inclusive cost of
 * each function divided by the loop count is the instructions one encode or
 * decode takes. Uses only the public codec functions, so the same file
 * builds against older trees (tools/bench/wire.sh compares two builds).
 *
 * Messages: a replica write (16-byte key, 100-byte value), its ack, a
 * replica read, a found read response (100-byte value), a client PUT and a
 * client GET request, and the responses to both.
 *
 * Usage: bench-wire [iterations (100000)]
 * Prints the encoded sizes and a checksum of what was decoded (so that no
 * loop can be optimised away); the figures come from callgrind.
 */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "wire/client_msg.h"
#include "wire/rpc_msg.h"

/* noipa: gcc would otherwise fold the identical loops of two messages
 * into one function, and callgrind would show one name for both. */
#if defined(__clang__)
#define NOINLINE __attribute__((noinline))
#else
#define NOINLINE __attribute__((noinline, noipa))
#endif

static uint8_t key[16] = "user:0000012345";
static uint8_t value[100];
static unsigned long iterations = 100000;
static uint64_t sum; /* what was decoded, so nothing is optimised away */

static void die(const char *what, int rc)
{
    fprintf(stderr, "bench-wire: %s failed (%d)\n", what, rc);
    exit(1);
}

/* ---- internode ----------------------------------------------------------- */

static struct rpc_write sample_write(void)
{
    struct rpc_write m;
    memset(&m, 0, sizeof(m));
    m.token = UINT64_C(0x9e3779b97f4a7c15);
    m.epoch = 7;
    m.key = RK_SLICE(key, sizeof(key));
    m.rec.ts = UINT64_C(0x0001800000000123);
    m.rec.flags = 0;
    m.rec.expiry = 0;
    m.rec.value = RK_SLICE(value, sizeof(value));
    return m;
}

static struct rpc_read_resp sample_read_resp(void)
{
    struct rpc_read_resp m;
    memset(&m, 0, sizeof(m));
    m.status = 0;
    m.hlc = UINT64_C(0x0001800000000456);
    m.found = true;
    m.is_digest = false;
    m.rec.ts = UINT64_C(0x0001800000000123);
    m.rec.value = RK_SLICE(value, sizeof(value));
    return m;
}

/* rpc_<name>_encode() of the message `init` and rpc_<name>_decode() of
 * what it wrote, `iterations` times each; sum_of(m) is what a decode adds
 * to the checksum. */
#define RPC_BENCH(name, T, init, sum_of)                                 \
    NOINLINE static void name##_encode(struct rpc_buf *b)                \
    {                                                                    \
        T m = init;                                                      \
        for (unsigned long i = 0; i < iterations; i++) {                 \
            rpc_buf_reset(b);                                            \
            int rc = rpc_##name##_encode(b, &m);                         \
            if (rc != 0)                                                 \
                die("rpc_" #name "_encode", rc);                         \
        }                                                                \
    }                                                                    \
    NOINLINE static void name##_decode(const struct rpc_buf *b)          \
    {                                                                    \
        for (unsigned long i = 0; i < iterations; i++) {                 \
            T m;                                                         \
            int rc = rpc_##name##_decode(&m, RK_SLICE(b->data, b->len)); \
            if (rc != 0)                                                 \
                die("rpc_" #name "_decode", rc);                         \
            sum += sum_of(m);                                            \
        }                                                                \
    }

static struct rpc_write_ack sample_ack(void)
{
    struct rpc_write_ack m = {.status = 0, .hlc = UINT64_C(0x0001800000000456)};
    return m;
}

static struct rpc_read sample_read(void)
{
    struct rpc_read m = {.token = UINT64_C(0x9e3779b97f4a7c15),
                         .epoch = 7,
                         .key = RK_SLICE(key, sizeof(key)),
                         .digest = false};
    return m;
}

#define WRITE_SUM(m)     ((m).rec.value.len + (m).token)
#define ACK_SUM(m)       ((m).hlc)
#define READ_SUM(m)      ((m).key.len)
#define READ_RESP_SUM(m) ((m).rec.value.len)

RPC_BENCH(write, struct rpc_write, sample_write(), WRITE_SUM)
RPC_BENCH(write_ack, struct rpc_write_ack, sample_ack(), ACK_SUM)
RPC_BENCH(read, struct rpc_read, sample_read(), READ_SUM)
RPC_BENCH(read_resp, struct rpc_read_resp, sample_read_resp(), READ_RESP_SUM)

/* ---- client -------------------------------------------------------------- */

static struct wire_creq sample_req(uint32_t op)
{
    struct wire_creq q;
    memset(&q, 0, sizeof(q));
    q.id = 123456;
    q.op = op;
    q.has = WIRE_CREQ_CL | WIRE_CREQ_KEY;
    q.cl = WIRE_CCL_QUORUM;
    q.key = RK_SLICE(key, sizeof(key));
    if (op == WIRE_COP_PUT) {
        q.has |= WIRE_CREQ_VALUE;
        q.value = RK_SLICE(value, sizeof(value));
    }
    return q;
}

static struct wire_cresp sample_resp(uint32_t op)
{
    struct wire_cresp r;
    memset(&r, 0, sizeof(r));
    r.id = 123456;
    r.op = op;
    if (op == WIRE_COP_PUT) {
        r.has = WIRE_CRESP_ACKS | WIRE_CRESP_NEED;
        r.acks = 2;
        r.need = 2;
    } else {
        r.has = WIRE_CRESP_VALUE;
        r.value = RK_SLICE(value, sizeof(value));
    }
    return r;
}

/* wire_c<kind>_encode() of sample_<kind>(op) and wire_c<kind>_decode()
 * of the frame's body, `iterations` times each. */
#define CLIENT_BENCH(kind, T)                                            \
    NOINLINE static void kind##_encode(struct wire_cbuf *b, uint32_t op) \
    {                                                                    \
        T m = sample_##kind(op);                                         \
        for (unsigned long i = 0; i < iterations; i++) {                 \
            b->len = 0;                                                  \
            int rc = wire_c##kind##_encode(b, &m);                       \
            if (rc != 0)                                                 \
                die("wire_c" #kind "_encode", rc);                       \
        }                                                                \
    }                                                                    \
    NOINLINE static void kind##_decode(const struct wire_cbuf *b)        \
    {                                                                    \
        for (unsigned long i = 0; i < iterations; i++) {                 \
            T m;                                                         \
            int rc = wire_c##kind##_decode(&m, b->p + WIRE_CFRAME_HDR,   \
                                           b->len - WIRE_CFRAME_HDR);    \
            if (rc != 0)                                                 \
                die("wire_c" #kind "_decode", rc);                       \
            sum += m.value.len + m.id;                                   \
            wire_c##kind##_clear(&m);                                    \
        }                                                                \
    }

CLIENT_BENCH(req, struct wire_creq)
CLIENT_BENCH(resp, struct wire_cresp)

/* One function per message and direction, named in callgrind's output. */
#define CLIENT_PAIR(name, kind, op)                               \
    NOINLINE static void name##_encode(struct wire_cbuf *b)       \
    {                                                             \
        kind##_encode(b, op);                                     \
    }                                                             \
    NOINLINE static void name##_decode(const struct wire_cbuf *b) \
    {                                                             \
        kind##_decode(b);                                         \
    }

CLIENT_PAIR(put_req, req, WIRE_COP_PUT)
CLIENT_PAIR(get_req, req, WIRE_COP_GET)
CLIENT_PAIR(put_resp, resp, WIRE_COP_PUT)
CLIENT_PAIR(get_resp, resp, WIRE_COP_GET)

int main(int argc, char **argv)
{
    struct rpc_buf rb = RPC_BUF_INIT;
    struct wire_cbuf cb = {NULL, 0, 0};
    if (argc > 1)
        iterations = strtoul(argv[1], NULL, 10);
    for (size_t i = 0; i < sizeof(value); i++)
        value[i] = (uint8_t)(i * 7);

#define RPC_ROW(name)                                \
    do {                                             \
        name##_encode(&rb);                          \
        name##_decode(&rb);                          \
        printf("%-16s %4zu bytes\n", #name, rb.len); \
    } while (0)
#define CLIENT_ROW(name)                             \
    do {                                             \
        name##_encode(&cb);                          \
        name##_decode(&cb);                          \
        printf("%-16s %4zu bytes\n", #name, cb.len); \
    } while (0)

    RPC_ROW(write);
    RPC_ROW(write_ack);
    RPC_ROW(read);
    RPC_ROW(read_resp);
    CLIENT_ROW(put_req);
    CLIENT_ROW(get_req);
    CLIENT_ROW(put_resp);
    CLIENT_ROW(get_resp);
    printf("%lu iterations, checksum %llu\n", iterations,
           (unsigned long long)sum);
    rpc_buf_free(&rb);
    wire_cbuf_release(&cb);
    return 0;
}
