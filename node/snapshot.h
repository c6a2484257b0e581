/*
 * snapshot.h - snapshots of a node's data (snapshot.c): `ringkv snapshot`,
 * `listsnapshots`, `clearsnapshot`, and the offline restore behind
 * `ringkvd --restore-snapshot`.
 *
 * A snapshot is the folder data_dir/snapshots/TAG: a compact LMDB copy of
 * every range the node holds (store_range_copy_fd), the node.state of the
 * moment, and a manifest (storage/snapshot_manifest.h), written last. What is
 * not in it, and why: the commit log (the memtable is applied to the ranges
 * before they are copied, so the copies hold every write committed before
 * the snapshot began), the system store (the range map is the manifest's
 * range list; the clock's ceiling and a stream's progress belong to the
 * node as it is when restored, not as it was), and hints (writes kept for
 * other nodes, which they have had since, or will get by repair).
 *
 * Not a public header: only node/'s files include it. The node__ calls run
 * on the loop thread; the copy, the listing and the removal run on the
 * libuv pool. node_snapshot_restore runs in a ringkvd that serves nothing.
 */
#ifndef NODE_SNAPSHOT_H
#define NODE_SNAPSHOT_H

#include <stdbool.h>
#include <stddef.h>
#include <stdio.h>

#include "node/config.h"
#include "node/node.h"

struct node_snapshot; /* snapshot.c: the copy running or last done */

/* `ringkv snapshot [TAG]` (tag NULL: the UTC time, snapshot_tag_default):
 * creates data_dir/snapshots/TAG and starts the copy on the pool. Answers
 * at once with the text (malloc'd, caller frees): started, or why not
 * (RK_EBADREQ for a bad or existing TAG or a snapshot running, RK_ECLOSED
 * when the node stops, -errno when the folder cannot be made). Its
 * progress and result are NETSTATS's "Snapshot TAG:" line. */
int node__snapshot_begin(node *n, const char *tag, char **text, size_t *len);

/* The NETSTATS line of the snapshot running, or of the last one. */
void node__snapshot_text(node *n, FILE *f);

/* How a listing or a removal ends, on the loop: rc 0 or an error, and the
 * text to answer (malloc'd, owned by the callback; NULL without memory). */
typedef void (*node_snapshot_cb)(int rc, char *text, size_t len, void *arg);

/* `ringkv listsnapshots`: a row per folder under data_dir/snapshots (TAG,
 * created, ranges, bytes, seconds, state), read on the pool. A callback
 * follows a 0 return only. */
int node__snapshot_list(node *n, node_snapshot_cb cb, void *arg);

/* `ringkv clearsnapshot TAG` (tag NULL: every snapshot but the one being
 * taken), on the pool. Refused with RK_EBADREQ (no callback) for a bad
 * TAG or the snapshot being taken; the callback tells RK_ENOTFOUND for a
 * TAG that is not there. */
int node__snapshot_clear(node *n,
                         const char *tag,
                         node_snapshot_cb cb,
                         void *arg);

/* At node_stop: a copy running stops after its current range (and its
 * folder is removed), so the stop does not wait for the whole of it. */
void node__snapshot_stop(node *n);
void node__snapshot_free(node *n);

/* `ringkvd --restore-snapshot WHAT`: put the ranges of a snapshot (WHAT
 * is a TAG under cfg's data_dir/snapshots, or the path of a snapshot
 * folder, e.g. one copied back from a backup) in place of the ranges of
 * the stopped node of cfg's data_dir: each local range is dropped and
 * each of the snapshot's adopted (copied in, so the snapshot stays). The
 * rest of the data_dir stays (node.state, the system store, hints); a
 * data_dir without node.state (a disk lost whole) gets the snapshot's.
 * With drop_hints the hints go too (every node of the cluster restored:
 * its hints are writes made after the snapshots). Refuses a snapshot of
 * another node or cluster, one without a manifest (not finished), and a
 * data_dir a running ringkvd holds. Prints what it does on `out`; on
 * error writes why into err. 0 or the error. */
int node_snapshot_restore(const struct node_config *cfg,
                          const char *what,
                          bool drop_hints,
                          FILE *out,
                          char *err,
                          size_t errlen);

#endif
