/*
 * merkle.h - the pure core of repair: how an arc is cut into Merkle leaves,
 * how deep, how a leaf's hash is made from its records, and which runs of
 * leaves two replicas disagree on. No I/O, no clock, no logging: the
 * session feeds it the records of a local scan and the leaves a replica
 * sent, and moves the differing runs (session.c, serve.c,
 * docs/repair.md). Used inside repair/ and by its unit test only; the
 * part's public face is repair.h.
 *
 * Leaves: an arc (start, end] (start == end: the whole ring) is split into
 * 2^depth leaves of equal width, the last one taking the remainder. The
 * split depends only on the arc and the depth, so every replica computes
 * the same leaves. A leaf's hash is XXH3-64 over its records in scan order
 * (token, key), each as be64 token, be32 key length, be32 record length,
 * key, record: the bytes storage's store_digest hashes, so a leaf's hash is
 * the store_digest of its sub-arc and an empty leaf hashes as XXH3 of
 * nothing. The leaves cross the network as one flat list, 8 bytes each,
 * big-endian (RPC_MSG_MERKLE, wire/rpc_msg.h).
 */
#ifndef RK_REPAIR_MERKLE_H
#define RK_REPAIR_MERKLE_H

#include <stddef.h>
#include <stdint.h>

#include "common/rk.h"
#include "ring/ring.h"

#define MERKLE_MAX_DEPTH 14 /* 16,384 leaves; wire's RPC_MERKLE_MAX_DEPTH */
#define MERKLE_LEAF_KEYS 8  /* keys a leaf merkle_depth_choose aims at */

/* ---- the leaf plan ------------------------------------------------------ */

/* The depth `arc` can be split to: `want` (at most MERKLE_MAX_DEPTH), or
 * less for an arc narrower than 2^want tokens. Never more than want. */
unsigned merkle_depth_fit(struct ring_range arc, unsigned want);

/* The depth for a comparison of `arc`: the least that gives at most
 * MERKLE_LEAF_KEYS keys a leaf, estimating the arc's keys from the
 * range_keys of the local range `range` holding it in proportion to the
 * part of the range the arc covers (all of them if the arc is as wide or
 * wider), then merkle_depth_fit. 0 <= result <= MERKLE_MAX_DEPTH, and it
 * never falls as range_keys grows or as the arc widens inside the range.
 * range_keys 0 (no range known) gives 0. */
unsigned merkle_depth_choose(struct ring_range arc,
                             struct ring_range range,
                             uint64_t range_keys);

/* Leaf i (< 2^depth) of arc at depth (a depth merkle_depth_fit accepts).
 * The leaves tile the arc in order: leaf 0 starts at arc.start, each
 * starts where the one before ends, the last ends at arc.end. */
struct ring_range
merkle_leaf(struct ring_range arc, unsigned depth, uint64_t i);

/* The leaf of arc at depth holding `token` into *out. RK_EBADREQ if the
 * token is outside the arc or the depth is not one merkle_depth_fit
 * accepts. */
int merkle_leaf_of(uint64_t *out,
                   struct ring_range arc,
                   unsigned depth,
                   uint64_t token);

/* ---- leaf hashes ---------------------------------------------------------
 *
 * A build fills leaves[] from the records of the arc, fed in scan order
 * (tokens along the arc from arc.start, then key). */

typedef struct merkle_build merkle_build;

/* A build of the 2^depth leaves of arc into leaves[], every leaf set to the
 * empty leaf's hash at once. RK_EBADREQ for a depth merkle_depth_fit does
 * not accept, -ENOMEM (*out NULL on failure).
 * @note leaves is borrowed: it must hold 2^depth hashes and outlive the
 * build; the caller frees the build with merkle_build_free. */
int merkle_build_new(merkle_build **out,
                     uint64_t *leaves,
                     struct ring_range arc,
                     unsigned depth);

/* One record of the arc. RK_EBADREQ (and nothing hashed) for a token
 * outside the arc or in a leaf before the one being hashed.
 * @note key and rec are only read during the call. */
int merkle_build_add(merkle_build *b,
                     uint64_t token,
                     struct rk_slice key,
                     struct rk_slice rec);

/* The last leaf's hash written out, after the last record; returns how
 * many records were added. merkle_build_add refuses records after it. */
uint64_t merkle_build_finish(merkle_build *b);

void merkle_build_free(merkle_build *b);

/* ---- comparing two lists of leaves -------------------------------------- */

/* The runs of leaves where mine[] and theirs[] (2^depth each) differ, as
 * sub-arcs of arc in leaf order, adjacent differing leaves merged into one
 * run, into *out (*nout of them), and the number of differing leaves into
 * *ndiff (may be NULL). No difference: *out NULL and *nout 0. -ENOMEM.
 * @note *out is the caller's, to free(). */
int merkle_diff(struct ring_range **out,
                size_t *nout,
                size_t *ndiff,
                struct ring_range arc,
                unsigned depth,
                const uint64_t *mine,
                const uint64_t *theirs);

/* ---- the leaves on the wire --------------------------------------------- */

/* n leaf hashes as 8n bytes, big-endian, into out. */
void merkle_leaves_put(uint8_t *out, const uint64_t *leaves, size_t n);

/* n leaf hashes from bytes; RK_EPROTO unless bytes is exactly 8n long. */
int merkle_leaves_get(uint64_t *out, size_t n, struct rk_slice bytes);

#endif
