/*
 * commit.c - group commit of local replica writes.
 *
 * Writes that arrive during one loop turn (from the coordinator, from
 * internode RPC, from read repair and hint replay) are appended to the open
 * batch. At the end of the turn (the node's check handle), if no commit is
 * running, the open batch goes to the thread pool: store_batch_commit()
 * applies every write and makes them durable with one fsync; back on the
 * loop each write's waiter is told its result. Up to COMMIT_JOBS batches
 * are on the thread pool at once: the store applies one while the previous
 * one's fsync runs (syncs never overlap, and each waits for the one that
 * covers it), and the next batch collects meanwhile, so under load batches
 * grow and fsyncs are shared.
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "node/log.h"
#include "node/node_internal.h"

#define COMMIT_JOBS 2

struct commit_waiter {
    node_commit_cb cb;
    void *arg;
};

static void commit_start(node *n);

static struct commit_job *job_new(node *n)
{
    struct commit_job *j = calloc(1, sizeof(*j));
    if (!j)
        return NULL;
    if (store_batch_new(&j->batch) < 0) {
        free(j);
        return NULL;
    }
    j->n = n;
    j->work.data = j;
    return j;
}

static void job_free(struct commit_job *j)
{
    if (!j)
        return;
    store_batch_free(j->batch);
    free(j->waiters);
    free(j);
}

int node__commit_add(node *n,
                     struct rk_slice key,
                     struct rk_slice rec,
                     node_commit_cb cb,
                     void *arg)
{
    if (n->stopping && !n->commit_open && !n->commit_running)
        return RK_ECLOSED;
    if (!n->store)
        return RK_ECLOSED;
    if (!n->commit_open) {
        n->commit_open = job_new(n);
        if (!n->commit_open)
            return -ENOMEM;
    }
    struct commit_job *j = n->commit_open;
    if (j->nwaiters == j->cap) {
        size_t ncap = j->cap ? j->cap * 2 : 64;
        struct commit_waiter *w = realloc(j->waiters, ncap * sizeof(*w));
        if (!w)
            return -ENOMEM;
        j->waiters = w;
        j->cap = ncap;
    }
    int rc = store_batch_add(j->batch, key, rec);
    if (rc < 0)
        return rc;
    j->waiters[j->nwaiters].cb = cb;
    j->waiters[j->nwaiters].arg = arg;
    j->nwaiters++;
    return 0;
}

static void commit_work(uv_work_t *w)
{
    struct commit_job *j = w->data;
    j->status = store_batch_commit(j->n->store, j->batch);
}

static void commit_after(uv_work_t *w, int status)
{
    struct commit_job *j = w->data;
    node *n = j->n;
    n->commit_running--;
    n->pending_closes--;
    if (status < 0 && j->status == 0)
        j->status = status; /* cancelled */
    if (j->status < 0)
        LOG(ERROR, "store.commit_fail", "writes=%zu error=\"%s\"", j->nwaiters,
            rk_strerror(j->status));
    n->stats.commits++;
    n->stats.commit_writes += j->nwaiters;
    n->totals.valid = false; /* keys and bytes changed */
    for (size_t i = 0; i < j->nwaiters; i++) {
        int rc = j->status < 0 ? j->status : store_batch_result(j->batch, i);
        j->waiters[i].cb(rc, j->waiters[i].arg);
    }
    job_free(j);
    /* the next batch may have collected meanwhile */
    commit_start(n);
    node__stop_progress(n);
}

static void commit_start(node *n)
{
    if (n->commit_running >= COMMIT_JOBS || !n->commit_open ||
        !n->commit_open->nwaiters)
        return;
    struct commit_job *j = n->commit_open;
    n->commit_open = NULL;
    int rc = uv_queue_work(n->loop, &j->work, commit_work, commit_after);
    if (rc < 0) {
        for (size_t i = 0; i < j->nwaiters; i++)
            j->waiters[i].cb(rc, j->waiters[i].arg);
        job_free(j);
        return;
    }
    n->commit_running++;
    n->pending_closes++;
}

void node__commit_flush(node *n)
{
    commit_start(n);
}

void node__commit_free(node *n)
{
    /* Only called once nothing runs; an open batch still has waiters. */
    if (n->commit_open) {
        struct commit_job *j = n->commit_open;
        n->commit_open = NULL;
        for (size_t i = 0; i < j->nwaiters; i++)
            j->waiters[i].cb(RK_ECLOSED, j->waiters[i].arg);
        job_free(j);
    }
}
