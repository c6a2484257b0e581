/*
 * purge.c - the node forgets deleted and expired records and gives their
 * space back (docs/operations.md, "Purge"), in the background.
 *
 * A cycle starts every purge_interval_s. It takes the arcs this node
 * replicates whose last repair with every replica completed
 * (repair/schedule.c) and purges each in turn, on the thread pool, one
 * step of PURGE_STEP_KEYS entries at a time (store_purge_next: one short
 * write transaction), each step queued from the loop after the last one
 * ended, so the loop never waits and the pool holds one purge job at most.
 * A record is purged when it is dead for gc_grace_seconds (a tombstone
 * since it was written, a value since its expiry) and it was written
 * before its arc's last complete repair began, less PURGE_MARGIN: the
 * time a write may still be on its way to a replica (the longest write's
 * deadline, coord_write_time_ms) and the clock drift the cluster allows
 * (max_clock_drift_ms). Such a write is on every replica (the repair
 * compared them all), so no replica keeps an older copy that could come
 * back once the tombstone is gone. An arc never repaired completely is
 * skipped (counted, and netstats says how many).
 *
 * Then each range env that lost at least an eighth of its entries in the
 * cycle is compacted (store_range_compact, one at a time, on the pool):
 * LMDB reuses freed pages but never shrinks its file; the rewrite does.
 * Last, if anything was purged, a checkpoint (store_checkpoint): it syncs
 * the purge's deletions and deletes the commit log segments the envs
 * cover, which still hold the writes of what was deleted (the values
 * too) and would otherwise stay until a segment fills.
 */
#include "node/purge.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "common/rk.h"
#include "coord/coord.h"
#include "node/clock.h"
#include "node/daemon.h"
#include "node/log.h"
#include "node/repair_host.h"
#include "repair/repair.h"
#include "storage/store.h"

#define PURGE_STEP_KEYS 1000 /* entries a step looks at (one transaction) */

/* A range env the cycle purged from, and how much. */
struct purge_range {
    struct store_range r;
    uint64_t purged;
};

/* What a cycle did. */
struct purge_cycle {
    uint64_t arcs, unrepaired; /* purged; skipped (never repaired) */
    uint64_t seen, tomb, exp, compacted, failed;
    uint64_t ms, end_ms; /* how long it took; when it ended (loop ms) */
};

struct node_purge {
    node *n;
    bool running;       /* a cycle */
    bool compacting;    /* the cycle's second phase */
    bool checkpointing; /* its third */
    uint64_t next_ms;   /* the next cycle (loop ms) */
    uint64_t started_ms;
    struct repair_arc_state *arcs;
    size_t narcs, cur;
    struct store_purge p;
    int step_rc;
    /* the range env of the arc a step finished (looked up on the pool) */
    struct store_range arc_env;
    bool arc_env_found;
    struct purge_range *ranges;
    size_t nranges, rcur;
    struct purge_cycle c;    /* the running cycle's */
    struct purge_cycle last; /* the last finished one's, for netstats */
    bool last_valid;
    struct node_purge_stats total;
};

static struct node_purge *purge_get(node *n)
{
    if (!n->purge) {
        n->purge = calloc(1, sizeof(*n->purge));
        if (n->purge) {
            n->purge->n = n;
            n->purge->next_ms =
                node__mono_ms(n) + (uint64_t)n->cfg.purge_interval_s * 1000;
        }
    }
    return n->purge;
}

/* How long before an arc's last complete repair began a record must have
 * been written to be purged: a write's longest deadline and the clock
 * drift allowed. */
static uint64_t purge_margin_ms(const node *n)
{
    return coord_write_time_ms((uint32_t)n->cfg.write_timeout_ms,
                               RK_MAX_VALUE) +
           (uint64_t)n->cfg.max_clock_drift_ms;
}

static void step_next(struct node_purge *pg);

static void cycle_end(struct node_purge *pg)
{
    struct purge_cycle *c = &pg->c;
    pg->running = pg->compacting = pg->checkpointing = false;
    c->end_ms = node__mono_ms(pg->n);
    c->ms = c->end_ms - pg->started_ms;
    pg->last = *c;
    pg->last_valid = true;
    pg->total.cycles++;
    enum node_log_level lvl = c->failed ? NODE_LOG_WARN : NODE_LOG_INFO;
    if (lvl >= node_log_min)
        node_log_write(
            lvl, "purge.done",
            "arcs=%llu unrepaired=%llu seen=%llu tombstones=%llu expired=%llu "
            "compacted=%llu failed=%llu ms=%llu",
            (unsigned long long)c->arcs, (unsigned long long)c->unrepaired,
            (unsigned long long)c->seen, (unsigned long long)c->tomb,
            (unsigned long long)c->exp, (unsigned long long)c->compacted,
            (unsigned long long)c->failed, (unsigned long long)c->ms);
    free(pg->arcs);
    free(pg->ranges);
    pg->arcs = NULL;
    pg->ranges = NULL;
    pg->narcs = pg->nranges = 0;
}

/* The purged entries of the arc just done, counted to its range env. */
static void range_note(struct node_purge *pg, uint64_t purged)
{
    struct store_range r = pg->arc_env;
    if (purged == 0 || !pg->arc_env_found)
        return;
    for (size_t i = 0; i < pg->nranges; i++)
        if (pg->ranges[i].r.start == r.start && pg->ranges[i].r.end == r.end) {
            pg->ranges[i].purged += purged;
            return;
        }
    struct purge_range *nr =
        realloc(pg->ranges, (pg->nranges + 1) * sizeof(*nr));
    if (!nr)
        return; /* not compacted this cycle */
    pg->ranges = nr;
    pg->ranges[pg->nranges++] = (struct purge_range){r, purged};
}

#define PURGE_NOT_WORTH 1 /* purge_work: a range not worth compacting */

/* Whether range pr lost enough in this cycle to be rewritten. */
static bool worth_compacting(store *st, const struct purge_range *pr)
{
    struct store_range_info ri;
    if (store_range_info(&ri, st, pr->r) != 0)
        return false;
    return pr->purged * 8 >= pr->purged + ri.keys;
}

/* On the pool: the step, and what it needs of the store (which waits for
 * the store's locks, so never on the loop). */
static void purge_work(void *job)
{
    struct node_purge *pg = job;
    store *st = pg->n->store;
    if (pg->checkpointing) {
        pg->step_rc = store_checkpoint(st);
    } else if (pg->compacting) {
        const struct purge_range *pr = &pg->ranges[pg->rcur];
        pg->step_rc = worth_compacting(st, pr) ? store_range_compact(st, pr->r)
                                               : PURGE_NOT_WORTH;
    } else {
        pg->step_rc = store_purge_next(st, &pg->p, PURGE_STEP_KEYS);
        pg->arc_env_found =
            (pg->step_rc < 0 || pg->p.done) &&
            pg->p.tombstones + pg->p.expired > 0 &&
            store_range_find(&pg->arc_env, st, pg->p.arc.end) == 0;
    }
}

static void purge_after(void *job, int status)
{
    struct node_purge *pg = job;
    node *n = pg->n;
    if (status < 0 || n->stopping || !n->store) {
        cycle_end(pg);
        return;
    }
    int rc = pg->step_rc;
    if (pg->checkpointing) {
        if (rc < 0) {
            pg->c.failed++;
            LOG(WARN, "purge.checkpoint_fail", "error=\"%s\"", rk_strerror(rc));
        }
        cycle_end(pg);
        return;
    }
    if (pg->compacting) {
        if (rc == 0) {
            pg->c.compacted++;
            pg->total.compactions++;
        } else if (rc < 0) {
            pg->c.failed++;
            LOG(WARN, "purge.compact_fail", "range=(%llu,%llu] error=\"%s\"",
                (unsigned long long)pg->ranges[pg->rcur].r.start,
                (unsigned long long)pg->ranges[pg->rcur].r.end,
                rk_strerror(rc));
        }
        pg->rcur++;
        step_next(pg);
        return;
    }
    if (rc < 0 && rc != RK_ENOTFOUND) {
        pg->c.failed++;
        LOG(WARN, "purge.fail", "range=(%llu,%llu] error=\"%s\"",
            (unsigned long long)pg->p.arc.start,
            (unsigned long long)pg->p.arc.end, rk_strerror(rc));
    }
    if (rc < 0 || pg->p.done) { /* this arc is through (or not here) */
        pg->c.tomb += pg->p.tombstones;
        pg->c.exp += pg->p.expired;
        pg->c.seen += pg->p.seen;
        pg->total.tombstones += pg->p.tombstones;
        pg->total.expired += pg->p.expired;
        range_note(pg, pg->p.tombstones + pg->p.expired);
        pg->cur++;
        memset(&pg->p, 0, sizeof(pg->p)); /* now_ms 0: step_next sets it */
    }
    step_next(pg);
}

static void queue(struct node_purge *pg)
{
    int rc = node__queue_work(pg->n, purge_work, purge_after, pg);
    if (rc < 0) {
        LOG(WARN, "purge.fail", "error=\"%s\"", rk_strerror(rc));
        cycle_end(pg);
    }
}

/* The next step of the cycle: the current arc's, the next arc's, the
 * next compaction, or the end. */
static void step_next(struct node_purge *pg)
{
    node *n = pg->n;
    if (n->stopping || !n->store) {
        cycle_end(pg);
        return;
    }
    if (!pg->compacting) {
        if (pg->cur < pg->narcs) {
            const struct repair_arc_state *a = &pg->arcs[pg->cur];
            if (pg->p.now_ms == 0) /* the arc's first step */
                store_purge_init(&pg->p,
                                 (struct store_range){a->arc.start, a->arc.end},
                                 node__clock_cluster_ms(n),
                                 (uint64_t)n->cfg.gc_grace_seconds * 1000,
                                 a->repaired_ms - purge_margin_ms(n));
            queue(pg);
            return;
        }
        pg->compacting = true;
        pg->rcur = 0;
    }
    if (pg->rcur < pg->nranges) {
        queue(pg);
        return;
    }
    if (pg->c.tomb + pg->c.exp > 0) {
        /* the purge's deletions synced, and the commit log that still
         * holds the purged records' writes (and the deleted values) cut */
        pg->checkpointing = true;
        queue(pg);
        return;
    }
    cycle_end(pg);
}

static void cycle_start(struct node_purge *pg)
{
    node *n = pg->n;
    struct repair_arc_state *a = NULL;
    size_t na = 0;
    if (node__repair_sched_list(n, &a, &na) < 0)
        return; /* next tick */
    /* an arc never repaired completely (or too recently to cover
     * anything: covered_ms would be 0) is skipped */
    uint64_t margin = purge_margin_ms(n);
    size_t keep = 0;
    pg->c = (struct purge_cycle){0};
    for (size_t i = 0; i < na; i++) {
        if (a[i].repaired_ms > margin)
            a[keep++] = a[i];
        else
            pg->c.unrepaired++;
    }
    pg->arcs = a;
    pg->narcs = keep;
    pg->c.arcs = keep;
    pg->cur = 0;
    pg->nranges = pg->rcur = 0;
    pg->running = true;
    pg->compacting = false;
    pg->started_ms = node__mono_ms(n);
    memset(&pg->p, 0, sizeof(pg->p));
    step_next(pg);
}

void node__purge_tick(node *n)
{
    if (n->cfg.purge_interval_s <= 0 || n->stopping || !n->store)
        return;
    struct node_purge *pg = purge_get(n);
    if (!pg || pg->running)
        return;
    uint64_t now = node__mono_ms(n);
    if (now < pg->next_ms)
        return;
    pg->next_ms = now + (uint64_t)n->cfg.purge_interval_s * 1000;
    cycle_start(pg);
}

void node__purge_stats(node *n, struct node_purge_stats *out)
{
    *out = (struct node_purge_stats){0};
    if (n->purge) {
        *out = n->purge->total;
        out->arcs_unrepaired = n->purge->last.unrepaired;
    }
}

void node__purge_text(node *n, FILE *f)
{
    if (n->cfg.purge_interval_s <= 0) {
        fprintf(f, "Purge: off (purge_interval_s: 0): deleted and expired "
                   "records are kept.\n");
        return;
    }
    struct node_purge *pg = n->purge;
    fprintf(f,
            "Purge: every %lld s, records dead for gc_grace_seconds (%lld) "
            "in arcs repaired with every replica since they were written",
            (long long)n->cfg.purge_interval_s,
            (long long)n->cfg.gc_grace_seconds);
    if (pg)
        fprintf(f,
                "; %llu tombstones and %llu expired values purged, %llu "
                "ranges compacted since start",
                (unsigned long long)pg->total.tombstones,
                (unsigned long long)pg->total.expired,
                (unsigned long long)pg->total.compactions);
    fprintf(f, ".\n");
    if (!pg)
        return;
    uint64_t now = node__mono_ms(n);
    if (pg->running)
        fprintf(f, "  running for %.1f s: %s %zu of %zu\n",
                (double)(now - pg->started_ms) / 1000,
                pg->compacting ? "compacting range" : "arc",
                pg->compacting ? pg->rcur + 1 : pg->cur + 1,
                pg->compacting ? pg->nranges : pg->narcs);
    if (pg->last_valid)
        fprintf(f,
                "  last cycle %.1f s ago, in %.1f s: %llu arcs (%llu skipped: "
                "not yet repaired with every replica), %llu records looked "
                "at, %llu tombstones and %llu expired values purged, %llu "
                "ranges compacted\n",
                (double)(now - pg->last.end_ms) / 1000,
                (double)pg->last.ms / 1000, (unsigned long long)pg->last.arcs,
                (unsigned long long)pg->last.unrepaired,
                (unsigned long long)pg->last.seen,
                (unsigned long long)pg->last.tomb,
                (unsigned long long)pg->last.exp,
                (unsigned long long)pg->last.compacted);
}

void node__purge_free(node *n)
{
    if (!n->purge)
        return;
    free(n->purge->arcs);
    free(n->purge->ranges);
    free(n->purge);
    n->purge = NULL;
}
