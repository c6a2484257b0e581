/*
 * commit.h - group commit of local replica writes (commit.c): writes
 * gathered during a loop turn, committed together by the node's committer
 * thread, each acknowledged after the log sync that covers it.
 *
 * Not a public header: only node/'s files include it. The committer thread
 * touches only the store, its own job structs and the commit queue under
 * its mutex; everything else runs on the loop thread.
 */
#ifndef NODE_COMMIT_H
#define NODE_COMMIT_H

#include <pthread.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include <uv.h>

#include "common/rk.h"
#include "node/node.h"
#include "storage/store.h"

struct commit_waiter;

typedef void (*node_commit_cb)(int status, void *arg);

struct commit_job {
    store_batch *batch;
    struct commit_waiter *waiters; /* one per write, in batch order */
    size_t nwaiters, cap;
    int status;
    bool lead;   /* the first of the batches one log sync committed */
    uint64_t us; /* lead: how long that commit took on the committer */
    struct commit_job *next; /* in the queue or the done list */
};

#define NODE_COMMITTERS 1 /* threads; commit.c says why one */

struct commit_queue {
    pthread_mutex_t mu;
    pthread_cond_t cv;
    struct commit_job *head, *tail;      /* waiting for a committer */
    struct commit_job *done, *done_tail; /* committed, for the loop */
    bool inited, stop;
    pthread_t th[NODE_COMMITTERS];
    int nth;
    uv_async_t async; /* wakes the loop for done */
    bool async_open;
};

/* The group commit's part of struct node (n->commit). */
struct node_commit {
    struct commit_job *open;  /* collecting */
    int running;              /* jobs queued or being committed */
    struct commit_job *spare; /* committed, kept for reuse (commit.c) */
    int nspare;
    struct commit_queue cq;
};

/* Queue a write of (key, encoded record) for the next group commit; cb
 * gets the write's result after its fsync. Errors returned at once (cb not
 * called): those of store_batch_add, -ENOMEM, RK_ECLOSED. */
int node__commit_add(node *n,
                     struct rk_slice key,
                     struct rk_slice rec,
                     node_commit_cb cb,
                     void *arg);
void node__commit_flush(node *n);
/* Start the committer threads and their loop handle (node_start). */
int node__commit_start(node *n);
/* Stop them; fails a batch still open (only once nothing is committing). */
void node__commit_free(node *n);

#endif
