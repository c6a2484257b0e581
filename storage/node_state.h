/*
 * node_state.h - what a node remembers about itself across restarts: its
 * name, the cluster it belongs to, its generation and its tokens; and the
 * data_dir's lock.
 *
 * Stored as a small key=value text file `data_dir/node.state`, replaced
 * atomically (write a temporary file, fsync, rename, fsync the folder), so
 * a crash leaves either the old or the new state, never half of one. The
 * data itself lives in the LMDB environments beside it (store.h); this is
 * only the identity, which node/ fills in and reads back.
 */
#ifndef RK_STORAGE_NODE_STATE_H
#define RK_STORAGE_NODE_STATE_H

#include <stddef.h>
#include <stdint.h>

#define NODE_STATE_MAX_TOKENS 1024

struct node_state {
    char node_name[256];
    char cluster_name[256];
    int64_t generation;
    uint64_t ring_epoch;
    int joining;    /* tokens chosen and announced BOOT, data not all
                       streamed in yet: a restart streams again
                       (streaming/join.c) */
    int leaving;    /* decommissioning: announced LEAVING, its ranges not all
                       streamed out yet: a restart streams again
                       (streaming/leave.c) */
    int left;       /* decommissioned (announced LEFT): ringkvd refuses to
                       start on this data_dir */
    int repair_due; /* joined by streaming: the repair of its ranges
                       against their other replicas has not started yet
                       (repair_after_join, repair/session.c) */
    int wait_join;  /* a join aborted (`ringkv abort`): it holds no tokens
                       and waits for `ringkv join`, whatever join_ring says */
    char removing[256]; /* the dead node whose removal (removenode) this
                           node drives, not finished yet: a restart takes it
                           up again (streaming/leave.c); "" when none */
    char replace[256];  /* the dead node this node replaces (announced BOOT
                           with its tokens, joining=1) or has replaced
                           (joining=0); "" when none (membership.c) */
    /* The cluster's replication setting as this node last adopted it
     * (`ringkv replication set`, gossiped; node/replication.h): its
     * version (0: never set, the config file's `replication` rules) and
     * its text ("dc1:3,dc2:3"). Kept over the config file's value. */
    uint64_t repl_version;
    char repl[512];
    /* `ringkv rebuild --from DC` under way: the data centre it streams
     * from ("" when none); a restart takes it up again
     * (streaming/rebuild.c) */
    char rebuild_from[256];
    int ntokens;
    uint64_t tokens[NODE_STATE_MAX_TOKENS];
};

/* Call line(l, arg) on each line of text[0..len) in turn, l a
 * NUL-terminated copy without its newline, until one returns nonzero
 * (returned). RK_ECORRUPT for text with a NUL byte, -ENOMEM. For the
 * key=value files: node.state, a snapshot's manifest. */
int node_state_lines(const char *text,
                     size_t len,
                     int (*line)(char *l, void *arg),
                     void *arg);

/* Parse the text of a node.state file (len bytes) into `out`: 0, or
 * RK_ECORRUPT for a line without '=', a NUL byte, a bad token or no
 * node_name or generation (-ENOMEM). Unknown keys are ignored. */
int node_state_parse(struct node_state *out, const char *text, size_t len);

/* The text of `st` as node.state holds it (malloc'd, NUL-terminated), or
 * NULL without memory. node_state_parse reads it back to the same state. */
char *node_state_format(const struct node_state *st);

/* Read `dir`/node.state into `out`. RK_ENOTFOUND if there is none (a new
 * data_dir), RK_ECORRUPT if it cannot be parsed, -errno on I/O errors. */
int node_state_load(struct node_state *out, const char *dir);

/* Atomically replace `dir`/node.state. 0 or -errno. */
int node_state_save(const struct node_state *st, const char *dir);

/* The generation to use now: strictly greater than `prev` and at least the
 * wall clock in seconds, like Cassandra's. */
int64_t node_state_next_generation(int64_t prev, int64_t now_s);

/* Take `dir`/node.lock for this process (flock, released when fd closes
 * or the process dies, kill -9 too): 0 and *out_fd, RK_EEXIST when another
 * process holds it (a ringkvd running on this data_dir), -errno. So two
 * processes never open one store: a second ringkvd, or a restore
 * (`ringkvd --restore-snapshot`) under a running node. */
int node_state_lock(int *out_fd, const char *dir);

/* mkdir -p. 0 or -errno. */
int node_state_mkdirs(const char *path);

#endif
