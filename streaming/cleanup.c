/*
 * cleanup.c - `ringkv cleanup`: drop the data of the token ranges this node
 * no longer replicates (shared/DESIGN.md, "Streaming": donors drop what
 * they no longer replicate).
 *
 * After a join, the old replicas of the ranges the new node took keep their
 * copies; after a decommission or removenode nothing is left behind, but a
 * node that was a replica of a range before an earlier movement may still
 * hold it. No coordinator sends reads or writes for those ranges any more,
 * so they only take disk space. Cleanup, asked of one node, computes on the
 * loop the arcs the node replicates in its current ring, then, on the libuv
 * pool, goes through its local ranges (one LMDB environment each): a range
 * wholly outside those arcs is dropped (store_range_drop), a range partly
 * outside is rewritten to the pieces of it that are kept, each an env of
 * its own (store_range_keep: one copy of what is kept, the rest freed);
 * both crash-safe. A rewrite the disk has no room for is skipped
 * (-ENOSPC, nothing written) and the others go on; the cleanup then ends
 * failed with -ENOSPC and automatic cleanup tries again auto_cleanup_s
 * later. A split per boundary, with the outside pieces dropped,
 * did that before: it copied each upper piece again at every boundary and
 * spent 94% of a cleanup (docs/performance.md). It refuses while the
 * ring is moving (a join, decommission or removenode under way: the pending
 * ring's ranges are being filled) or is behind the cluster's. When it is
 * done the node makes sure again that it holds a range for every arc it
 * replicates (host->ranges_ensure), in case the ring changed meanwhile.
 */
#include <errno.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <uv.h>

#include "streaming/streaming_internal.h"

struct stream_cleanup {
    struct stream_work w;
    stream *s;
    store *st;                /* read on the loop when queued */
    struct store_range *keep; /* the arcs this node replicates */
    size_t nkeep;
    bool running;
    int status;
    size_t dropped, rewritten, splits;
    size_t skipped;       /* ranges left for lack of disk space (-ENOSPC) */
    uint64_t keys, bytes; /* dropped, and disk space freed */
    uint64_t start_ms, end_ms;
    /* time in store_range_keep, _split, _drop */
    uint64_t keep_ns, split_ns, drop_ns;
    /* local ranges looked at, counted by the job as it goes: the loop
     * reads it each tick (seen: the last count it read) for its stall */
    atomic_size_t looked_at;
    size_t seen;
    struct stream_stall stall;
};

static int drop(struct stream_cleanup *cu, struct store_range r)
{
    store *s = cu->st;
    struct store_range_info info = {0};
    store_range_info(&info, s, r);
    uint64_t t0 = uv_hrtime();
    int rc = store_range_drop(s, r);
    cu->drop_ns += uv_hrtime() - t0;
    if (rc == 0) {
        cu->dropped++;
        cu->keys += info.keys;
        cu->bytes += info.disk_bytes;
    }
    return rc;
}

/* Keep arcs k[0..nk) of local range r (store_range_keep: one pass that
 * copies what is kept into envs of their own and frees the rest). */
static int keep_arcs(struct stream_cleanup *cu,
                     struct store_range r,
                     const struct store_range *k,
                     size_t nk)
{
    store *s = cu->st;
    struct store_range_info before = {0}, after;
    store_range_info(&before, s, r);
    uint64_t t0 = uv_hrtime();
    int rc = store_range_keep(s, r, k, nk);
    cu->keep_ns += uv_hrtime() - t0;
    if (rc < 0)
        return rc;
    cu->rewritten++;
    uint64_t keys = 0, bytes = 0;
    for (size_t i = 0; i < nk; i++)
        if (store_range_info(&after, s, k[i]) == 0) {
            keys += after.keys;
            bytes += after.disk_bytes;
        }
    cu->keys += before.keys > keys ? before.keys - keys : 0;
    cu->bytes += before.disk_bytes > bytes ? before.disk_bytes - bytes : 0;
    return 0;
}

/* The pieces of local range r kept by arcs keep[0..nkeep), in order
 * along r, neighbours joined, into piece (room for nkeep * 2 + 1): the
 * points strictly inside r where being kept changes (the kept arcs' ends,
 * along r from r.start) cut it into pieces, each kept or not as a whole.
 * Returns their number, or -ENOMEM. */
static ssize_t kept_pieces(const struct store_range *keep,
                           size_t nkeep,
                           struct store_range r,
                           struct store_range *piece)
{
    uint64_t *cut = malloc((nkeep * 2 + 1) * sizeof(*cut));
    if (!cut)
        return -ENOMEM;
    size_t nc = 0;
    for (size_t i = 0; i < nkeep; i++) {
        uint64_t b[2] = {keep[i].start, keep[i].end};
        for (int k = 0; k < 2; k++)
            if (store_range_contains(r, b[k]) && b[k] != r.end)
                cut[nc++] = b[k] - r.start; /* distance along r */
    }
    qsort(cut, nc, sizeof(*cut), rk_u64_cmp);
    size_t np = 0;
    uint64_t from = r.start;
    for (size_t i = 0; i <= nc; i++) {
        if (i < nc && i > 0 && cut[i] == cut[i - 1])
            continue;
        uint64_t end = i < nc ? r.start + cut[i] : r.end;
        bool k = false;
        for (size_t j = 0; j < nkeep && !k; j++)
            k = store_range_contains(keep[j], end);
        if (k) {
            if (np > 0 && piece[np - 1].end == from)
                piece[np - 1].end = end;
            else
                piece[np++] = (struct store_range){from, end};
        }
        from = end;
    }
    free(cut);
    return (ssize_t)np;
}

/* One local range r: dropped if none of it is kept; else rewritten to its
 * kept pieces (STORE_KEEP_MAX at a time: past that, the rest is split off
 * first and goes the same way). */
static int clean_range(struct stream_cleanup *cu, struct store_range r)
{
    struct store_range *piece = malloc((cu->nkeep * 2 + 1) * sizeof(*piece));
    if (!piece)
        return -ENOMEM;
    ssize_t got = kept_pieces(cu->keep, cu->nkeep, r, piece);
    if (got < 0) {
        free(piece);
        return (int)got;
    }
    size_t np = (size_t)got;
    int rc = 0;
    struct store_range cur = r;
    size_t first = 0;
    if (np == 0)
        rc = drop(cu, r);
    while (rc == 0 && first < np) {
        size_t k = np - first;
        if (k > STORE_KEEP_MAX) {
            /* split after the last kept piece of this group */
            k = STORE_KEEP_MAX;
            uint64_t at = piece[first + k - 1].end;
            uint64_t t0 = uv_hrtime();
            rc = store_range_split(cu->st, cur, at);
            cu->split_ns += uv_hrtime() - t0;
            if (rc < 0)
                break;
            cu->splits++;
            rc = keep_arcs(cu, (struct store_range){cur.start, at},
                           piece + first, k);
            cur.start = at;
        } else if (!(k == 1 && piece[first].start == cur.start &&
                     piece[first].end == cur.end)) { /* else all is kept */
            rc = keep_arcs(cu, cur, piece + first, k);
        }
        first += k;
    }
    free(piece);
    return rc;
}

static void cleanup_work(struct stream_work *w)
{
    struct stream_cleanup *cu = (struct stream_cleanup *)w;
    struct store_range *have = NULL;
    size_t nhave = 0;
    int rc = store_range_list(&have, &nhave, cu->st);
    for (size_t i = 0; rc == 0 && i < nhave; i++) {
        rc = clean_range(cu, have[i]);
        if (rc == -ENOSPC) { /* no room for its copy: a drop may free some */
            cu->skipped++;
            rc = 0;
        }
        atomic_fetch_add(&cu->looked_at, 1);
    }
    free(have);
    cu->status = rc == 0 && cu->skipped > 0 ? -ENOSPC : rc;
}

static void cleanup_done(struct stream_work *w, int status)
{
    struct stream_cleanup *cu = (struct stream_cleanup *)w;
    stream *s = cu->s;
    (void)status;
    cu->running = false;
    cu->end_ms = stream__now(s);
    free(cu->keep);
    cu->keep = NULL;
    if (cu->status == -ENOSPC) {
        /* ranges left for lack of disk space: try again as automatic
         * cleanup would, auto_cleanup_s from now */
        s->acu_checked = false;
        s->acu_since_ms = cu->end_ms;
    }
    if (cu->status < 0)
        SLOG(s, ERROR, "cleanup.fail",
             "dropped=%zu rewritten=%zu splits=%zu skipped=%zu keys=%llu "
             "error=\"%s\"",
             cu->dropped, cu->rewritten, cu->splits, cu->skipped,
             (unsigned long long)cu->keys, rk_strerror(cu->status));
    else
        SLOG(s, INFO, "cleanup.done",
             "dropped=%zu rewritten=%zu splits=%zu keys=%llu bytes=%llu "
             "ms=%llu keep_ms=%llu split_ms=%llu drop_ms=%llu",
             cu->dropped, cu->rewritten, cu->splits,
             (unsigned long long)cu->keys, (unsigned long long)cu->bytes,
             (unsigned long long)(cu->end_ms - cu->start_ms),
             (unsigned long long)(cu->keep_ns / 1000000u),
             (unsigned long long)(cu->split_ns / 1000000u),
             (unsigned long long)(cu->drop_ns / 1000000u));
    if (!stream__stopping(s))
        s->h.ranges_ensure(s->h.arg);
}

/* Why this node cannot clean up now, in why; 0 if it can (*self: its
 * index in the ring). */
static int cleanup_check(stream *s, uint32_t *self, char *why, size_t cap)
{
    if (s->cleanup && s->cleanup->running) {
        snprintf(why, cap, "a cleanup is already running");
        return RK_EBADREQ;
    }
    /* Writes may sit on nodes that are not their replicas by this node's
     * ring until a repair after the settings agree moves them. */
    if (s->h.repl_mismatches(s->h.arg) > 0) {
        snprintf(why, cap,
                 "a peer's replication setting differs from this node's "
                 "(`ringkv status` shows each): cleanup could drop writes "
                 "that no replica holds yet; set the same replication "
                 "everywhere, restart the nodes that differ, repair, then "
                 "clean up");
        return RK_EBADREQ;
    }
    return stream_ring_settled(s, "clean up", self, why, cap);
}

/* The arcs node `self` replicates in n's ring, malloc'd into *out. */
static int
replicated(stream *s, uint32_t self, struct store_range **out, size_t *nout)
{
    const ring *r = stream__ring(s);
    size_t want = ring_node_ranges(r, self, NULL, 0);
    struct ring_range *rr = calloc(want ? want : 1, sizeof(*rr));
    struct store_range *keep = calloc(want ? want : 1, sizeof(*keep));
    if (!rr || !keep) {
        free(rr);
        free(keep);
        return -ENOMEM;
    }
    ring_node_ranges(r, self, rr, want);
    for (size_t i = 0; i < want; i++)
        keep[i] = (struct store_range){rr[i].start, rr[i].end};
    free(rr);
    *out = keep;
    *nout = want;
    return 0;
}

int stream_cleanup_begin(stream *s, char **text, size_t *len)
{
    char msg[512];
    const ring *r = stream__ring(s);
    uint32_t self = RING_NONE;
    int rc = cleanup_check(s, &self, msg, sizeof(msg));
    if (rc == 0) {
        struct stream_cleanup *cu = s->cleanup;
        if (!cu)
            cu = s->cleanup = calloc(1, sizeof(*cu));
        struct store_range *keep = NULL;
        size_t want = 0;
        if (!cu || replicated(s, self, &keep, &want) < 0)
            return -ENOMEM;
        *cu = (struct stream_cleanup){.s = s,
                                      .st = stream__store(s),
                                      .keep = keep,
                                      .nkeep = want,
                                      .running = true,
                                      .start_ms = stream__now(s)};
        atomic_init(&cu->looked_at, 0);
        stream_stall_start(s, &cu->stall, "cleanup", "cleanup");
        cu->w.work = cleanup_work;
        cu->w.done = cleanup_done;
        rc = s->h.queue_work(s->h.arg, &cu->w);
        if (rc < 0) {
            cu->running = false;
            free(cu->keep);
            cu->keep = NULL;
            snprintf(msg, sizeof(msg), "cannot start: %s", rk_strerror(rc));
        } else {
            SLOG(s, INFO, "cleanup.start", "replicated_arcs=%zu epoch=%llu",
                 want, (unsigned long long)ring_epoch(r));
            snprintf(msg, sizeof(msg),
                     "cleanup started: dropping the ranges %.64s no longer "
                     "replicates (it replicates %zu arcs of ring epoch %llu); "
                     "`ringkv netstats` shows the result",
                     s->cfg.node_name, want, (unsigned long long)ring_epoch(r));
        }
    }
    *text = strdup(msg);
    if (!*text)
        return -ENOMEM;
    *len = strlen(*text);
    return rc;
}

/* Whether a local range holds anything outside the arcs n replicates. */
static bool holds_unreplicated(stream *s, uint32_t self)
{
    struct store_range *keep = NULL, *have = NULL, *piece = NULL;
    size_t nkeep = 0, nhave = 0;
    bool found = false;
    if (replicated(s, self, &keep, &nkeep) < 0 ||
        store_range_list(&have, &nhave, stream__store(s)) < 0 ||
        !(piece = malloc((nkeep * 2 + 1) * sizeof(*piece))))
        goto out;
    for (size_t i = 0; i < nhave && !found; i++) {
        ssize_t np = kept_pieces(keep, nkeep, have[i], piece);
        if (np < 0)
            break;
        found = !(np == 1 && piece[0].start == have[i].start &&
                  piece[0].end == have[i].end); /* not all of it kept */
    }
out:
    free(keep);
    free(have);
    free(piece);
    return found;
}

/* A running cleanup made progress when its job has looked at another local
 * range since the last tick; it is stalled when one range takes
 * stall_warning_s (a disk that does not answer). */
static void cleanup_watch(stream *s)
{
    struct stream_cleanup *cu = s->cleanup;
    if (!cu)
        return;
    size_t k = atomic_load(&cu->looked_at);
    if (k != cu->seen) {
        cu->seen = k;
        stream_stall_progress(s, &cu->stall);
    }
    stream_stall_check(s, &cu->stall, cu->running);
}

void stream__cleanup_auto(stream *s)
{
    cleanup_watch(s);
    const ring *r = stream__ring(s);
    if (s->cfg.auto_cleanup_s <= 0 || !r || !stream__store(s))
        return;
    uint64_t now = stream__now(s), epoch = ring_epoch(r);
    if (epoch != s->acu_epoch) { /* the ring changed: wait from now */
        s->acu_epoch = epoch;
        s->acu_since_ms = now;
        s->acu_checked = false;
        return;
    }
    if (s->acu_checked ||
        now - s->acu_since_ms < (uint64_t)s->cfg.auto_cleanup_s * 1000u)
        return;
    char why[512];
    uint32_t self;
    if (cleanup_check(s, &self, why, sizeof(why)) < 0) {
        s->acu_since_ms = now; /* not settled (or busy): wait again */
        return;
    }
    s->acu_checked = true; /* once per ring epoch */
    if (!holds_unreplicated(s, self))
        return;
    SLOG(s, INFO, "cleanup.auto", "epoch=%llu settled_s=%d",
         (unsigned long long)epoch, s->cfg.auto_cleanup_s);
    char *t = NULL;
    size_t len;
    int rc = stream_cleanup_begin(s, &t, &len);
    if (rc < 0)
        SLOG(s, WARN, "cleanup.auto_fail", "error=\"%s\" why=\"%s\"",
             rk_strerror(rc), t ? t : "");
    free(t);
}

void stream__cleanup_text(stream *s, FILE *f)
{
    const struct stream_cleanup *cu = s->cleanup;
    if (!cu)
        return;
    char b[32];
    stream_human_bytes(b, sizeof(b), cu->bytes);
    if (cu->running) {
        fprintf(f,
                "Cleanup: running for %.1f s; %zu ranges dropped, %zu "
                "rewritten so far.\n",
                (double)(stream__now(s) - cu->start_ms) / 1000, cu->dropped,
                cu->rewritten);
        stream_stall_text(s, &cu->stall, f);
        return;
    }
    fprintf(f,
            "Cleanup: %s in %.1f s: %zu ranges dropped, %zu rewritten "
            "without their parts not replicated (%llu keys, %s freed)"
            "%s%s.\n",
            cu->status < 0 ? "failed" : "done",
            (double)(cu->end_ms - cu->start_ms) / 1000, cu->dropped,
            cu->rewritten, (unsigned long long)cu->keys, b,
            cu->status < 0 ? "; error: " : "",
            cu->status < 0 ? rk_strerror(cu->status) : "");
}

void stream__cleanup_free(stream *s)
{
    if (!s->cleanup)
        return;
    free(s->cleanup->keep);
    free(s->cleanup);
    s->cleanup = NULL;
}
