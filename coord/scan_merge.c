/*
 * scan_merge.c - SCAN's walk position and the merge of replica answers
 * (scan_merge.h). Pure.
 *
 * Offsets: in the arc (start, end] a token t sits at t - (start + 1), so
 * the arc (2^64 - 1, end] that opens the walk compares as plainly as any
 * other. An answer covers offsets below its cover: the arc's length when
 * done, else next's offset.
 */
#include "coord/scan_merge.h"

#include <string.h>

#include "wire/rpc_msg.h"

void scan_segment(uint64_t *start,
                  uint64_t *end,
                  uint64_t cursor,
                  uint64_t ring_end)
{
    *start = cursor - 1; /* 0 wraps to 2^64 - 1: the walk from token 0 */
    *end = ring_end >= cursor ? ring_end : UINT64_MAX;
}

/* An answer's cover: whole (the arc to its end) or the offsets below off. */
struct cover {
    bool whole;
    uint64_t off;
};

static bool covered(struct cover c, uint64_t off)
{
    return c.whole || off < c.off;
}

/* One answer being read: its next item, decoded (valid), and its cover. */
struct head {
    struct rk_slice it;
    bool valid;
    uint64_t off;
    struct rk_slice key;
    struct rpc_record rec;
    struct cover cov;
};

static int head_next(struct head *h, uint64_t start, uint64_t end)
{
    uint64_t prev = h->off;
    bool had = h->valid;
    int rc = rpc_stream_item_next(&h->it, &h->key, &h->rec);
    h->valid = rc == 1;
    if (rc <= 0)
        return rc;
    uint64_t t = rk_token(h->key.p, h->key.len);
    h->off = t - (start + 1);
    if (h->off > end - (start + 1) || !covered(h->cov, h->off) ||
        (had && h->off < prev))
        return RK_EPROTO;
    return 0;
}

/* Whether a wins over b by last write wins without the values: higher
 * timestamp, a tombstone on a tie, then the later expiry (none latest). */
static bool newer(const struct rpc_record *a, const struct rpc_record *b)
{
    if (a->ts != b->ts)
        return a->ts > b->ts;
    bool ta = a->flags & RPC_REC_TOMBSTONE, tb = b->flags & RPC_REC_TOMBSTONE;
    if (ta != tb)
        return ta;
    uint64_t ea = a->expiry ? a->expiry : UINT64_MAX;
    uint64_t eb = b->expiry ? b->expiry : UINT64_MAX;
    return ea > eb;
}

static bool live(const struct rpc_record *r, uint64_t now_ms)
{
    return !(r->flags & RPC_REC_TOMBSTONE) &&
           !(r->expiry && r->expiry <= now_ms);
}

static bool same_key(struct rk_slice a, struct rk_slice b)
{
    return a.len == b.len && memcmp(a.p, b.p, a.len) == 0;
}

int scan_merge(bool *out_done,
               uint64_t *out_next,
               uint64_t start,
               uint64_t end,
               const struct scan_answer *a,
               size_t n,
               uint64_t now_ms,
               scan_emit_cb emit,
               void *arg)
{
    struct head h[SCAN_ANSWERS_MAX];
    if (n == 0 || n > SCAN_ANSWERS_MAX)
        return RK_EPROTO;
    uint64_t len = end - (start + 1); /* the arc's last offset */
    struct cover all = {true, 0};
    int rc;
    for (size_t i = 0; i < n; i++) {
        h[i] = (struct head){.it = a[i].items, .cov = {a[i].done, 0}};
        if (!a[i].done) {
            h[i].cov.off = a[i].next - (start + 1);
            if (h[i].cov.off > len)
                return RK_EPROTO;
            if (all.whole || h[i].cov.off < all.off)
                all = h[i].cov;
        }
        if ((rc = head_next(&h[i], start, end)) < 0)
            return rc;
    }
    struct {
        struct rk_slice key;
        struct rpc_record rec;
    } tie[SCAN_MERGE_TIE_MAX];
    for (;;) {
        bool any = false;
        uint64_t off = 0;
        for (size_t i = 0; i < n; i++)
            if (h[i].valid && (!any || h[i].off < off)) {
                off = h[i].off;
                any = true;
            }
        if (!any || !covered(all, off))
            break;
        size_t nt = 0;
        for (size_t i = 0; i < n; i++) {
            for (; h[i].valid && h[i].off == off;) {
                size_t k = 0;
                while (k < nt && !same_key(tie[k].key, h[i].key))
                    k++;
                if (k == nt) {
                    if (nt == SCAN_MERGE_TIE_MAX)
                        return RK_ETOOLARGE;
                    tie[nt].key = h[i].key;
                    tie[nt++].rec = h[i].rec;
                } else if (newer(&h[i].rec, &tie[k].rec)) {
                    tie[k].rec = h[i].rec;
                }
                if ((rc = head_next(&h[i], start, end)) < 0)
                    return rc;
            }
        }
        for (size_t k = 0; k < nt; k++)
            if (live(&tie[k].rec, now_ms) && (rc = emit(tie[k].key, arg)))
                return rc;
    }
    *out_done = all.whole;
    *out_next = all.whole ? 0 : start + 1 + all.off;
    return 0;
}
