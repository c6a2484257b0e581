/*
 * scan_merge.h - SCAN's pure parts: the position of the walk, and the merge of
 * the replicas' answers for one arc. No libuv, no clock, no node: the
 * coordinator (node/scan.c) asks, these decide; tests/unit/check_scan.c
 * tests them alone.
 *
 * Position. SCAN walks the token space [0, 2^64) in order. A cursor is the
 * first token not yet walked: every key whose token is below it has been
 * returned (if it was live). A replica never splits a token between two
 * answers (wire/rpc_msg.h, RPC_MSG_SCAN), so a token alone is a position:
 * no key is needed to resume ties, and the cursor is a plain unsigned
 * 64-bit decimal, which Redis clients need (redis-cli reads it with
 * strtoull, redis-py with int(); wire/resp.c parses it). "0" starts a scan and
 * ends it (the token after 2^64 - 1 wraps to 0), as in Redis; a scan that
 * returned 2^64 - 1 answers 0 and stops, which is where its next position would
 * be. The cursor names a token, not a node or an offset, so it stays valid
 * across ring changes: the next call finds whichever replicas hold that token
 * then.
 */
#ifndef COORD_SCAN_MERGE_H
#define COORD_SCAN_MERGE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "common/rk.h"
#include "ring/ring.h"

/* The part of the walk one round asks replicas for: the arc (start, end]
 * of the ring that holds token `cursor`, cut at 2^64 - 1 so that the walk
 * never wraps. ring_end is the end of that arc (its token); start is
 * cursor - 1, wrapping for cursor 0 (the arc (2^64 - 1, end] is tokens 0
 * to end; with end 2^64 - 1 too, the whole ring). */
void scan_segment(uint64_t *start,
                  uint64_t *end,
                  uint64_t cursor,
                  uint64_t ring_end);

/* One replica's answer for the arc (start, end] (rpc_scan_resp's fields). */
struct scan_answer {
    bool done;             /* covers the arc to its end */
    uint64_t next;         /* !done: covers the tokens before this one */
    struct rk_slice items; /* rpc_stream_item_add's encoding, token order */
};

/* The most answers merged at once: one per replica. */
#define SCAN_ANSWERS_MAX RING_MAX_REPLICAS

/* The most distinct keys the answers may hold for one token (a 64-bit
 * hash collision: practically never more than one). */
#define SCAN_MERGE_TIE_MAX 64

/* Called for each live key; a nonzero return stops the merge and is
 * returned. @note key borrows from the answers. */
typedef int (*scan_emit_cb)(struct rk_slice key, void *arg);

/* Merge n answers for the arc (start, end] as a read does: the part of
 * the arc every answer covers (its least cover), and in it each key once,
 * its newest version over the answers (last write wins: higher timestamp,
 * a tombstone on a tie, then the later expiry), emitted in token order if
 * that version is live at now_ms (not a tombstone, not expired).
 * Sets *out_done (the merged cover reaches end) or *out_next (the first
 * token not covered). Returns 0, emit's nonzero return, RK_EPROTO for
 * items that do not decode or that lie outside the arc, out of order or
 * past their answer's cover, RK_ETOOLARGE for more than
 * SCAN_MERGE_TIE_MAX keys of one token; RK_EPROTO also for n 0 or over
 * SCAN_ANSWERS_MAX. */
int scan_merge(bool *out_done,
               uint64_t *out_next,
               uint64_t start,
               uint64_t end,
               const struct scan_answer *a,
               size_t n,
               uint64_t now_ms,
               scan_emit_cb emit,
               void *arg);

#endif
