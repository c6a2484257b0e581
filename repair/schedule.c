/*
 * schedule.c - repair on a schedule (repair.h, "the repair schedule"):
 * every arc this node replicates is repaired at least once per
 * repair_interval_s by a session of its own, and the node keeps, per arc,
 * when the last repair that completed with every replica began. That
 * record is what lets the node purge a tombstone (node/purge.c): a delete
 * written before such a repair began is on every replica, so forgetting it
 * cannot let an older copy come back.
 *
 * Pacing: one session at a time (as every session), the arc that waited
 * longest first once it waited half the interval, sessions at least
 * interval / (4 x arcs) apart, each within stream_throughput_mb. An arc
 * the node just began to replicate (or saw first after a restart without
 * a record) waits from then: repairing every arc at start would put the
 * whole data set through Merkle scans on every restart, and until its
 * first complete repair nothing of the arc is purged anyway.
 *
 * The records are kept by the host (node.state's neighbour in the store's
 * system env, sched_save) in the encoding below; repair_sched_decode reads
 * bytes from disk and has a fuzz target (tests/fuzz/fuzz_repair_sched.c).
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "repair/repair_internal.h"

/* ---- the records' encoding ---------------------------------------------- */

static void put64(uint8_t *p, uint64_t v)
{
    for (int i = 7; i >= 0; i--, v >>= 8)
        p[i] = (uint8_t)v;
}

static uint64_t get64(const uint8_t *p)
{
    uint64_t v = 0;
    for (int i = 0; i < 8; i++)
        v = v << 8 | p[i];
    return v;
}

int repair_sched_encode(uint8_t **out,
                        size_t *out_len,
                        const struct repair_arc_state *a,
                        size_t n)
{
    if (n > REPAIR_SCHED_MAX)
        return RK_ETOOLARGE;
    size_t len = 5 + n * REPAIR_SCHED_REC;
    uint8_t *p = malloc(len);
    if (!p)
        return -ENOMEM;
    p[0] = REPAIR_SCHED_VERSION;
    p[1] = (uint8_t)(n >> 24);
    p[2] = (uint8_t)(n >> 16);
    p[3] = (uint8_t)(n >> 8);
    p[4] = (uint8_t)n;
    for (size_t i = 0; i < n; i++) {
        uint8_t *q = p + 5 + i * REPAIR_SCHED_REC;
        put64(q, a[i].arc.start);
        put64(q + 8, a[i].arc.end);
        put64(q + 16, a[i].seen_ms);
        put64(q + 24, a[i].repaired_ms);
        put64(q + 32, a[i].done_ms);
    }
    *out = p;
    *out_len = len;
    return 0;
}

int repair_sched_decode(struct repair_arc_state **out,
                        size_t *out_n,
                        const uint8_t *p,
                        size_t len)
{
    if (len < 1)
        return RK_ECORRUPT;
    if (p[0] != REPAIR_SCHED_VERSION)
        return RK_EVERSION;
    if (len < 5)
        return RK_ECORRUPT;
    size_t n = (size_t)p[1] << 24 | (size_t)p[2] << 16 | (size_t)p[3] << 8 |
               (size_t)p[4];
    if (n > REPAIR_SCHED_MAX || len - 5 != n * REPAIR_SCHED_REC)
        return RK_ECORRUPT;
    struct repair_arc_state *a = NULL;
    if (n) {
        a = calloc(n, sizeof(*a));
        if (!a)
            return -ENOMEM;
    }
    for (size_t i = 0; i < n; i++) {
        const uint8_t *q = p + 5 + i * REPAIR_SCHED_REC;
        a[i] = (struct repair_arc_state){
            .arc = {get64(q), get64(q + 8)},
            .seen_ms = get64(q + 16),
            .repaired_ms = get64(q + 24),
            .done_ms = get64(q + 32),
        };
        /* a repair ends after it begins, and the arc was seen before */
        if (a[i].done_ms < a[i].repaired_ms ||
            (a[i].repaired_ms && !a[i].done_ms)) {
            free(a);
            return RK_ECORRUPT;
        }
    }
    *out = a;
    *out_n = n;
    return 0;
}

int repair_sched_load(repair *r, struct rk_slice blob)
{
    struct repair_arc_state *a;
    size_t n;
    int rc = repair_sched_decode(&a, &n, blob.p, blob.len);
    if (rc < 0)
        return rc;
    free(r->loaded);
    r->loaded = a;
    r->nloaded = n;
    r->sa_synced = false;
    return 0;
}

int repair_sched_list(struct repair_arc_state **out,
                      size_t *out_n,
                      const repair *r)
{
    *out = NULL;
    *out_n = 0;
    if (r->nsa == 0)
        return 0;
    struct repair_arc_state *a = calloc(r->nsa, sizeof(*a));
    if (!a)
        return -ENOMEM;
    for (size_t i = 0; i < r->nsa; i++)
        a[i] = r->sa[i].s;
    *out = a;
    *out_n = r->nsa;
    return 0;
}

/* ---- the records kept -------------------------------------------------- */

static void sched_save(repair *r)
{
    struct repair_arc_state *a;
    size_t n;
    uint8_t *blob;
    size_t len;
    if (repair_sched_list(&a, &n, r) < 0)
        return; /* kept next time */
    int rc = repair_sched_encode(&blob, &len, a, n);
    if (rc == 0) {
        r->h.sched_save(r->h.arg, RK_SLICE(blob, len));
        free(blob);
    } else if (rc == RK_ETOOLARGE && !r->sched_too_many) {
        r->sched_too_many = true; /* said once */
        char fields[160];
        snprintf(fields, sizeof(fields),
                 "arcs=%zu at_most=%d note=\"the records are kept in memory "
                 "only: after a restart, nothing is purged until each arc "
                 "is repaired again\"",
                 n, REPAIR_SCHED_MAX);
        r->h.log(r->h.arg, REPAIR_LOG_WARN, "repair.schedule_too_large",
                 fields);
    }
    free(a);
}

static bool same_arc(struct ring_range a, struct ring_range b)
{
    return a.start == b.start && a.end == b.end;
}

/* The record of arc among n, or NULL. */
static const struct repair_arc_state *
state_find(const struct repair_arc_state *a, size_t n, struct ring_range arc)
{
    for (size_t i = 0; i < n; i++)
        if (same_arc(a[i].arc, arc))
            return &a[i];
    return NULL;
}

/* The arcs of ring `cur` this node replicates, with what was known of
 * each (a new arc is seen now); the others forgotten. */
static void sched_sync(repair *r, const ring *cur, uint32_t self, uint64_t now)
{
    struct repair_cmp *c;
    struct repair_arc_run *arcs;
    size_t nc, narcs;
    if (repair__plan(cur, self, NULL, false, &c, &nc, &arcs, &narcs) < 0)
        return; /* next tick */
    free(c);
    struct repair_sched_arc *sa = calloc(narcs + 1, sizeof(*sa));
    if (!sa) {
        free(arcs);
        return;
    }
    for (size_t i = 0; i < narcs; i++) {
        const struct repair_sched_arc *kept = NULL;
        for (size_t k = 0; k < r->nsa && !kept; k++)
            if (same_arc(r->sa[k].s.arc, arcs[i].arc))
                kept = &r->sa[k];
        const struct repair_arc_state *loaded =
            kept ? NULL : state_find(r->loaded, r->nloaded, arcs[i].arc);
        if (kept)
            sa[i] = *kept; /* its record, last try and overdue report */
        else if (loaded)
            sa[i].s = *loaded;
        else
            sa[i].s =
                (struct repair_arc_state){.arc = arcs[i].arc, .seen_ms = now};
    }
    free(arcs);
    free(r->sa);
    free(r->loaded);
    r->loaded = NULL;
    r->nloaded = 0;
    r->sa = sa;
    r->nsa = narcs;
    r->sa_synced = true;
    r->sa_epoch = ring_epoch(cur);
    sched_save(r);
}

/* Since when the arc waits: its last complete repair's start, or when the
 * node first replicated it. */
static uint64_t waits_since(const struct repair_sched_arc *a)
{
    return a->s.repaired_ms ? a->s.repaired_ms : a->s.seen_ms;
}

static uint64_t age(uint64_t now, uint64_t since)
{
    return now > since ? now - since : 0;
}

void repair__sched_record(repair *r)
{
    uint64_t now = r->h.wall_ms(r->h.arg);
    bool any = false;
    for (size_t i = 0; i < r->narcs; i++) {
        const struct repair_arc_run *ar = &r->arcs[i];
        if (!ar->whole || ar->failed || !ar->closed)
            continue;
        for (size_t k = 0; k < r->nsa; k++) {
            struct repair_sched_arc *a = &r->sa[k];
            if (!same_arc(a->s.arc, ar->arc))
                continue;
            a->s.repaired_ms = r->start_wall_ms ? r->start_wall_ms : 1;
            a->s.done_ms = now > a->s.repaired_ms ? now : a->s.repaired_ms;
            a->overdue_logged = false;
            any = true;
        }
    }
    if (any)
        sched_save(r);
}

/* ---- every tick -------------------------------------------------------- */

static void overdue_watch(repair *r, uint64_t now)
{
    for (size_t i = 0; i < r->nsa; i++) {
        struct repair_sched_arc *a = &r->sa[i];
        uint64_t since = waits_since(a);
        if (age(now, since) <= r->interval_ms || a->overdue_logged)
            continue;
        a->overdue_logged = true;
        char fields[448];
        snprintf(fields, sizeof(fields),
                 "range=(%llu,%llu] since_s=%llu interval_s=%llu "
                 "repaired=%s note=\"not repaired with every replica within "
                 "repair_interval_s: what was deleted in it since (or ever, "
                 "if never) is not purged; `ringkv netstats` shows the "
                 "repairs' failures, or raise repair_interval_s if its "
                 "sessions cannot keep up\"",
                 (unsigned long long)a->s.arc.start,
                 (unsigned long long)a->s.arc.end,
                 (unsigned long long)(age(now, since) / 1000),
                 (unsigned long long)(r->interval_ms / 1000),
                 a->s.repaired_ms ? "yes" : "never");
        r->h.log(r->h.arg, REPAIR_LOG_WARN, "repair.overdue", fields);
    }
}

/* The arc to repair now, or NULL: the one that waited longest, once it
 * waited half the interval and was not tried within an eighth of it. */
static struct repair_sched_arc *pick(repair *r, uint64_t now)
{
    struct repair_sched_arc *best = NULL;
    for (size_t i = 0; i < r->nsa; i++) {
        struct repair_sched_arc *a = &r->sa[i];
        if (age(now, waits_since(a)) < r->interval_ms / 2 ||
            (a->tried_ms && age(now, a->tried_ms) < r->interval_ms / 8))
            continue;
        if (!best || waits_since(a) < waits_since(best))
            best = a;
    }
    return best;
}

void repair__sched_tick(repair *r)
{
    if (r->h.stopping(r->h.arg))
        return;
    uint64_t now = r->h.wall_ms(r->h.arg);
    const ring *cur = r->h.ring(r->h.arg);
    uint32_t self = RING_NONE;
    char why[256];
    bool settled =
        cur && r->h.ring_settled(r->h.arg, &self, why, sizeof(why)) == 0;
    if (settled && (!r->sa_synced || r->sa_epoch != ring_epoch(cur)))
        sched_sync(r, cur, self, now);
    /* without a schedule the records are kept all the same: a manual
     * repair's let the purge go on */
    if (r->interval_ms == 0)
        return;
    overdue_watch(r, now);
    if (!settled || r->running || now < r->next_ms)
        return;
    struct repair_sched_arc *a = pick(r, now);
    if (!a)
        return;
    a->tried_ms = now;
    struct ring_range arc = a->s.arc;
    char *t = NULL;
    size_t len = 0;
    int rc = repair__begin(r, &arc, REPAIR_SCHEDULED, &t, &len);
    free(t);
    uint64_t gap = r->nsa ? r->interval_ms / (4 * r->nsa) : 0;
    r->next_ms = now + gap;
    if (rc < 0) /* counted in runs, and its failure by repair_end */
        r->runs_failed++;
}

/* ---- what it shows ---------------------------------------------------- */

void repair_sched_stats_get(struct repair_sched_stats *out, const repair *r)
{
    *out = (struct repair_sched_stats){
        .arcs = r->nsa, .runs = r->runs, .runs_failed = r->runs_failed};
    uint64_t now = r->h.wall_ms(r->h.arg);
    for (size_t i = 0; i < r->nsa; i++) {
        const struct repair_sched_arc *a = &r->sa[i];
        uint64_t g = age(now, waits_since(a));
        out->never += a->s.repaired_ms == 0;
        out->overdue += r->interval_ms && g > r->interval_ms;
        if (g > out->oldest_age_ms)
            out->oldest_age_ms = g;
    }
}

#define SCHED_TEXT_ARCS 8

void repair_sched_text(const repair *r, FILE *f)
{
    struct repair_sched_stats st;
    repair_sched_stats_get(&st, r);
    if (r->interval_ms == 0)
        fprintf(f, "Repair schedule: off (repair_interval_s: 0)");
    else
        fprintf(f, "Repair schedule: every arc within %llu s",
                (unsigned long long)(r->interval_ms / 1000));
    fprintf(f,
            "; %llu arcs replicated here, %llu never repaired with every "
            "replica, %llu overdue, oldest %.1f s; %llu scheduled sessions "
            "(%llu failed).\n",
            (unsigned long long)st.arcs, (unsigned long long)st.never,
            (unsigned long long)st.overdue, (double)st.oldest_age_ms / 1000,
            (unsigned long long)st.runs, (unsigned long long)st.runs_failed);
    /* the longest waiting first, a few */
    uint64_t now = r->h.wall_ms(r->h.arg);
    const struct repair_sched_arc *top[SCHED_TEXT_ARCS];
    size_t printed = 0;
    for (size_t i = 0; i < r->nsa; i++) {
        const struct repair_sched_arc *a = &r->sa[i];
        size_t k = printed < SCHED_TEXT_ARCS ? printed++ : SCHED_TEXT_ARCS;
        for (; k > 0 && waits_since(top[k - 1]) > waits_since(a); k--)
            if (k < SCHED_TEXT_ARCS)
                top[k] = top[k - 1];
        if (k < SCHED_TEXT_ARCS)
            top[k] = a;
    }
    for (size_t k = 0; k < printed; k++) {
        const struct repair_sched_arc *o = top[k];
        uint64_t g = age(now, waits_since(o));
        const char *late =
            r->interval_ms && g > r->interval_ms ? ", OVERDUE" : "";
        if (o->s.repaired_ms)
            fprintf(f, "  (%llu,%llu]: repaired %.1f s ago (took %.1f s)%s\n",
                    (unsigned long long)o->s.arc.start,
                    (unsigned long long)o->s.arc.end, (double)g / 1000,
                    (double)(o->s.done_ms - o->s.repaired_ms) / 1000, late);
        else
            fprintf(f,
                    "  (%llu,%llu]: never repaired, replicated here for "
                    "%.1f s%s\n",
                    (unsigned long long)o->s.arc.start,
                    (unsigned long long)o->s.arc.end, (double)g / 1000, late);
    }
    if (printed < r->nsa)
        fprintf(f, "  ... and %zu more arcs, waiting less long\n",
                r->nsa - printed);
}
