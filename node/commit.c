/*
 * commit.c - group commit of local replica writes.
 *
 * Writes that arrive during one loop turn (from the coordinator, from
 * internode RPC, from read repair and hint replay) are appended to the open
 * batch. At the end of the turn (the node's check handle) the open batch
 * joins the commit queue. The committer thread takes every batch waiting
 * (up to COMMIT_GROUP), commits them with one log sync
 * (store_batch_commit_many) and hands them back to the loop (an async
 * handle), where each write's waiter is told its result; then it takes the
 * batches queued meanwhile, without sleeping, while there are any.
 *
 * One committer, not a thread-pool job per batch: a pool job cost a wakeup
 * to start and a trip through the loop before the next could start (the
 * disk idle meanwhile), and with two jobs per node the three nodes of a
 * one-machine cluster kept six log syncs in flight on one disk, each taking
 * ~1.1 ms. With one committer a sync takes ~0.5 ms there, and redis-benchmark
 * SET at -P 1 went from 14.6-16.3k to 15.6-19.1k/s in three paired runs
 * (docs/performance-resp-history.md). NODE_COMMITTERS could be raised for a
 * disk that completes concurrent flushes in parallel (storage/wal.c lets two
 * run).
 *
 * Like every ringkvd thread, the committer runs under SCHED_BATCH by
 * default (cpu_scheduling, set in main.c before any thread starts): its
 * wakeup when a log sync completes does not preempt the event loop, which
 * keeps reading, coordinating and flushing replies; the committer takes
 * the next free slice, with a larger group waiting by then. On the
 * one-machine demo cluster (3 nodes and redis-benchmark on 2 vCPUs) the
 * committer alone under SCHED_BATCH gave 1.19-1.28x SET/s at -P 1 in
 * paired runs, neutral at -P 16 (docs/performance-resp-history.md).
 */
#include "node/commit.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "node/daemon.h"
#include "node/log.h"
#include "node/obs.h"
#include "storage/store.h"

#define COMMIT_GROUP 64 /* batches one committer takes at once, at most */

struct commit_waiter {
    node_commit_cb cb;
    void *arg;
};

/* Committed jobs kept for reuse (n->commit.spare): their batch's write
 * array and copy chunks and their waiter array stay allocated, so a loop
 * turn's batch costs no malloc in the steady state. */
#define COMMIT_SPARE 4

static struct commit_job *job_new(node *n)
{
    struct commit_job *j = n->commit.spare;
    if (j) {
        n->commit.spare = j->next;
        n->commit.nspare--;
        j->next = NULL;
        j->status = 0;
        j->lead = false;
        j->us = 0;
        return j;
    }
    j = calloc(1, sizeof(*j));
    if (!j)
        return NULL;
    if (store_batch_new(&j->batch) < 0) {
        free(j);
        return NULL;
    }
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

/* j's waiters have been told: keep it for job_new, or free it. */
static void job_done(node *n, struct commit_job *j)
{
    if (!n->commit.cq.inited || n->commit.nspare >= COMMIT_SPARE ||
        j->cap > 4096) {
        job_free(j);
        return;
    }
    store_batch_reset(j->batch);
    j->nwaiters = 0;
    j->next = n->commit.spare;
    n->commit.spare = j;
    n->commit.nspare++;
}

static void job_fail(struct commit_job *j, int rc)
{
    for (size_t i = 0; i < j->nwaiters; i++)
        j->waiters[i].cb(rc, j->waiters[i].arg);
    job_free(j);
}

int node__commit_add(node *n,
                     struct rk_slice key,
                     struct rk_slice rec,
                     node_commit_cb cb,
                     void *arg)
{
    if (n->stopping && !n->commit.open && !n->commit.running)
        return RK_ECLOSED;
    if (!n->store)
        return RK_ECLOSED;
    if (!n->commit.open) {
        n->commit.open = job_new(n);
        if (!n->commit.open)
            return -ENOMEM;
    }
    struct commit_job *j = n->commit.open;
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

/* ---- committer threads -------------------------------------------------- */

static void *committer_main(void *arg)
{
    node *n = arg;
    struct commit_queue *q = &n->commit.cq;
    struct commit_job *js[COMMIT_GROUP];
    store_batch *bs[COMMIT_GROUP];
    int st[COMMIT_GROUP];
    pthread_setname_np(pthread_self(), "rk-commit");
    pthread_mutex_lock(&q->mu);
    for (;;) {
        while (!q->head && !q->stop)
            pthread_cond_wait(&q->cv, &q->mu);
        if (!q->head)
            break; /* stopping, and nothing is left */
        size_t k = 0;
        for (; q->head && k < COMMIT_GROUP; k++) {
            js[k] = q->head;
            bs[k] = js[k]->batch;
            q->head = js[k]->next;
        }
        if (!q->head)
            q->tail = NULL;
        pthread_mutex_unlock(&q->mu);
        uint64_t t0 = uv_hrtime();
        store_batch_commit_many(n->store, bs, k, st);
        js[0]->us = (uv_hrtime() - t0) / 1000u;
        for (size_t i = 0; i < k; i++) {
            js[i]->status = st[i];
            js[i]->lead = i == 0;
            js[i]->next = i + 1 < k ? js[i + 1] : NULL;
        }
        pthread_mutex_lock(&q->mu);
        if (q->done_tail)
            q->done_tail->next = js[0];
        else
            q->done = js[0];
        q->done_tail = js[k - 1];
        pthread_mutex_unlock(&q->mu);
        uv_async_send(&q->async); /* closed only after this thread's join */
        pthread_mutex_lock(&q->mu);
    }
    pthread_mutex_unlock(&q->mu);
    return NULL;
}

/* On the loop: tell the waiters of every committed batch, oldest first. */
static void on_commit_done(uv_async_t *a)
{
    node *n = a->data;
    struct commit_queue *q = &n->commit.cq;
    pthread_mutex_lock(&q->mu);
    struct commit_job *j = q->done;
    q->done = q->done_tail = NULL;
    pthread_mutex_unlock(&q->mu);
    while (j) {
        struct commit_job *next = j->next;
        n->commit.running--;
        if (j->status < 0)
            LOG(ERROR, "store.commit_fail", "writes=%zu error=\"%s\"",
                j->nwaiters, rk_strerror(j->status));
        n->stats.commits += j->lead; /* one per log sync */
        if (j->lead)
            node__obs_commit(n, j->us);
        n->stats.commit_writes += j->nwaiters;
        for (size_t i = 0; i < j->nwaiters; i++) {
            int rc =
                j->status < 0 ? j->status : store_batch_result(j->batch, i);
            j->waiters[i].cb(rc, j->waiters[i].arg);
        }
        job_done(n, j);
        j = next;
    }
    node__stop_progress(n);
}

int node__commit_start(node *n)
{
    struct commit_queue *q = &n->commit.cq;
    int rc = uv_async_init(n->loop, &q->async, on_commit_done);
    if (rc < 0)
        return rc;
    q->async.data = n;
    q->async_open = true;
    pthread_mutex_init(&q->mu, NULL);
    pthread_cond_init(&q->cv, NULL);
    q->inited = true;
    for (int i = 0; i < NODE_COMMITTERS; i++) {
        rc = -pthread_create(&q->th[i], NULL, committer_main, n);
        if (rc < 0)
            return rc; /* node__commit_free joins those started */
        q->nth++;
    }
    return 0;
}

void node__commit_flush(node *n)
{
    struct commit_job *j = n->commit.open;
    if (!j || !j->nwaiters)
        return;
    n->commit.open = NULL;
    struct commit_queue *q = &n->commit.cq;
    if (q->nth == 0) { /* never started, or could not start */
        job_fail(j, RK_ECLOSED);
        return;
    }
    j->next = NULL;
    pthread_mutex_lock(&q->mu);
    if (q->tail)
        q->tail->next = j;
    else
        q->head = j;
    q->tail = j;
    pthread_cond_signal(&q->cv); /* no syscall when it is not waiting */
    pthread_mutex_unlock(&q->mu);
    n->commit.running++;
}

void node__commit_free(node *n)
{
    /* Only called once nothing commits; an open batch still has waiters. */
    if (n->commit.open) {
        struct commit_job *j = n->commit.open;
        n->commit.open = NULL;
        job_fail(j, RK_ECLOSED);
    }
    struct commit_queue *q = &n->commit.cq;
    if (q->inited) {
        pthread_mutex_lock(&q->mu);
        q->stop = true;
        pthread_cond_broadcast(&q->cv);
        pthread_mutex_unlock(&q->mu);
        for (int i = 0; i < q->nth; i++)
            pthread_join(q->th[i], NULL);
        q->nth = 0;
        pthread_cond_destroy(&q->cv);
        pthread_mutex_destroy(&q->mu);
        q->inited = false;
    }
    if (q->async_open) {
        q->async_open = false;
        uv_close((uv_handle_t *)&q->async, NULL);
    }
    while (n->commit.spare) {
        struct commit_job *j = n->commit.spare;
        n->commit.spare = j->next;
        job_free(j);
    }
    n->commit.nspare = 0;
}
