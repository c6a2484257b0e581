/*
 * record.c - the record encoding and the last-write-wins order (store.h).
 *
 * Pure byte code with no LMDB: the decoder reads bytes from disk and from
 * peers, so it checks every length and is fuzzed (tests/fuzz/fuzz_record.c).
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "storage/store.h"
#include "storage/store_internal.h"

size_t store_record_size(const struct store_record *r)
{
    return STORE_REC_HEADER + ((r->flags & STORE_REC_EXPIRES) ? 8 : 0) +
           r->value.len;
}

int store_record_encode(uint8_t *out,
                        size_t cap,
                        size_t *out_len,
                        const struct store_record *r)
{
    if (r->flags & ~(STORE_REC_TOMBSTONE | STORE_REC_EXPIRES))
        return RK_EBADREQ;
    if ((r->flags & STORE_REC_TOMBSTONE) && r->value.len != 0)
        return RK_EBADREQ;
    if (r->value.len > RK_MAX_VALUE)
        return RK_ETOOLARGE;
    size_t n = store_record_size(r);
    if (n > cap)
        return -ENOBUFS;
    out[0] = STORE_REC_VERSION;
    out[1] = r->flags;
    store__be64(out + 2, r->ts);
    size_t off = STORE_REC_HEADER;
    if (r->flags & STORE_REC_EXPIRES) {
        store__be64(out + off, r->expiry_ms);
        off += 8;
    }
    if (r->value.len)
        memcpy(out + off, r->value.p, r->value.len);
    *out_len = n;
    return 0;
}

int store_record_encode_grow(uint8_t **buf,
                             size_t *cap,
                             size_t *out_len,
                             const struct store_record *r)
{
    size_t need = store_record_size(r);
    if (need > *cap) {
        uint8_t *p = realloc(*buf, need);
        if (p == NULL)
            return -ENOMEM;
        *buf = p;
        *cap = need;
    }
    return store_record_encode(*buf, *cap, out_len, r);
}

uint64_t store__rec_ts(struct rk_slice rec)
{
    if (rec.len < STORE_REC_HEADER || rec.p[0] != STORE_REC_VERSION)
        return UINT64_MAX;
    return store__get64(rec.p + 2);
}

int store_record_decode(struct store_record *out, const uint8_t *p, size_t len)
{
    if (len < 1)
        return RK_ECORRUPT;
    if (p[0] != STORE_REC_VERSION)
        return RK_EVERSION;
    if (len < STORE_REC_HEADER)
        return RK_ECORRUPT;
    uint8_t flags = p[1];
    if (flags & ~(STORE_REC_TOMBSTONE | STORE_REC_EXPIRES))
        return RK_ECORRUPT;
    size_t off = STORE_REC_HEADER;
    out->flags = flags;
    out->ts = store__get64(p + 2);
    out->expiry_ms = 0;
    if (flags & STORE_REC_EXPIRES) {
        if (len < off + 8)
            return RK_ECORRUPT;
        out->expiry_ms = store__get64(p + off);
        off += 8;
    }
    if ((flags & STORE_REC_TOMBSTONE) && len != off)
        return RK_ECORRUPT;
    if (len - off > RK_MAX_VALUE)
        return RK_ETOOLARGE;
    out->value = RK_SLICE(p + off, len - off);
    return 0;
}

int store_record_cmp(const struct store_record *a, const struct store_record *b)
{
    if (a->ts != b->ts)
        return a->ts > b->ts ? 1 : -1;
    int ta = (a->flags & STORE_REC_TOMBSTONE) != 0;
    int tb = (b->flags & STORE_REC_TOMBSTONE) != 0;
    if (ta != tb)
        return ta ? 1 : -1;
    size_t n = a->value.len < b->value.len ? a->value.len : b->value.len;
    int c = n ? memcmp(a->value.p, b->value.p, n) : 0;
    if (c != 0)
        return c > 0 ? 1 : -1;
    if (a->value.len != b->value.len)
        return a->value.len > b->value.len ? 1 : -1;
    /* No expiry is the latest expiry. */
    uint64_t ea = (a->flags & STORE_REC_EXPIRES) ? a->expiry_ms : UINT64_MAX;
    uint64_t eb = (b->flags & STORE_REC_EXPIRES) ? b->expiry_ms : UINT64_MAX;
    if (ea != eb)
        return ea > eb ? 1 : -1;
    if (a->flags != b->flags) /* an expiry of UINT64_MAX vs none */
        return (a->flags & STORE_REC_EXPIRES) ? -1 : 1;
    return 0;
}

bool store_record_live(const struct store_record *r, uint64_t now_ms)
{
    if (r->flags & STORE_REC_TOMBSTONE)
        return false;
    if ((r->flags & STORE_REC_EXPIRES) && r->expiry_ms <= now_ms)
        return false;
    return true;
}
