/*
 * replication.h - the cluster's replication setting on a live cluster:
 * `ringkv replication set dc1:3,dc2:3` through any node, carried to every
 * node by gossip, and `ringkv replication` showing what each node uses.
 *
 * The setting has a version (Unix ms of the `set`, above every version
 * seen before). Each node gossips the setting it uses and its version in
 * its SCHEMA ("repl=dc1:3 ... replv=V"); a node that hears a newer one
 * (node_repl_supersedes: the higher version; an equal version, the larger
 * text, so two sets in one millisecond still converge) adopts it, saves
 * it in node.state and rebuilds its ring with it. So the precedence is:
 *
 *   1. a setting made with `ringkv replication set` (version > 0): the
 *      newest one heard, kept in node.state across restarts, over the
 *      config file's `replication`, which a node that differs logs
 *      (replication.file_differs) at start;
 *   2. the config file's `replication` (version 0): only for a cluster
 *      whose setting was never changed by the command (a fresh cluster).
 *      Nodes that both say version 0 and disagree are a mismatch, reported
 *      as before (ring_view.c), never guessed around.
 *
 * A node that gains replicas under the new setting gets their data: in a
 * data centre that had replicas before, by repairing its ranges by itself
 * once the ring settles (node.state's repair_due, as after a join); in a
 * data centre that had none (a new one), by `ringkv rebuild --from DC`,
 * which the operator runs on each of its nodes (logged, and said by the
 * command and by `ringkv status`).
 *
 * The helpers under "pure" need no node (tests/unit/check_node_repl.c).
 */
#ifndef NODE_REPLICATION_H
#define NODE_REPLICATION_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#include "common/rk.h"
#include "node/config.h"
#include "node/node.h"

/* What the node keeps of the replication setting besides cfg (the setting
 * in use) and node.state (its version and text). */
struct node_repl {
    /* the config file's replication, as given at start */
    struct node_config_dc file[NODE_CONFIG_MAX_DCS];
    int nfile;
    /* the last change adopted: what this node gained under it */
    uint64_t changed_version;
    size_t gained;           /* ranges gained */
    bool repair;             /* their repair is due (repair_due set) */
    char rebuild_dc[64 + 1]; /* its DC had no replicas: rebuild needed */
};

/* ---- pure ---- */

/* Parse a replication setting ("dc1:3,dc2:3", or "3": that RF in every
 * data centre) as the config's `replication` is parsed, into out[] (*nout
 * entries, at most NODE_CONFIG_MAX_DCS): 0, or RK_ECONFIG with err
 * saying why. "*" (every data centre) cannot be mixed with named ones. */
int node_repl_parse(struct node_config_dc *out,
                    int *nout,
                    const char *spec,
                    char *err,
                    size_t errlen);
/* The setting's canonical text into out[0..cap): "dc1:3,dc2:3", the data
 * centres by name ("*:3" for one RF everywhere). Returns its length
 * (truncated to cap - 1). */
int node_repl_format(char *out,
                     size_t cap,
                     const struct node_config_dc *dcs,
                     int n);
/* Whether setting (va, ta) replaces setting (vb, tb): a higher version, or
 * the same version above 0 and a text that sorts after (a tie broken the
 * same way on every node). Version 0 never replaces: two config files
 * that disagree are a mismatch. */
bool node_repl_supersedes(uint64_t va,
                          struct rk_slice ta,
                          uint64_t vb,
                          struct rk_slice tb);
/* The version of a new setting made at wall_ms: above every version known
 * (highest), and wall_ms when the clock is ahead of them. */
uint64_t node_repl_next_version(uint64_t highest, uint64_t wall_ms);
/* The version a gossiped SCHEMA value carries (" replv=V"), 0 if none. */
uint64_t node_repl_schema_version(struct rk_slice schema);

/* ---- on the node ---- */

/* At start, after node.state is read and before gossip: a setting made by
 * `ringkv replication set` (node.state's, version > 0) replaces the
 * config file's, which is kept aside (logged if it differs). */
void node__repl_start(node *n);
/* After gossip brought news: adopt the newest setting a peer gossips, if
 * it replaces this node's (saved, gossiped, the ring rebuilt, and the
 * repair or the rebuild of what this node gained set going). */
void node__repl_watch(node *n);
/* `ringkv replication set SPEC`: 0 with the operator's answer (malloc'd)
 * in *text, or RK_EBADREQ / RK_ESTALE with why; -ENOMEM. */
int node__repl_set(node *n, struct rk_slice spec, char **text, size_t *len);
/* `ringkv replication`: each node's setting and version as gossip has
 * them here, and whether they agree (malloc'd text; NULL: -ENOMEM). */
char *node__repl_show(node *n, size_t *len);
/* `ringkv status`'s notes of this node: the setting in use, its version,
 * and the repair or rebuild that follows a change. */
void node__repl_status_text(node *n, FILE *f);

#endif
