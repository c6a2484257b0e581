/*
 * stall.c - noticing that a long operation (a join's streaming, a
 * decommission, a removenode, a cleanup, a repair) has stopped moving,
 * and saying why.
 *
 * Each operation keeps a struct stream_stall: when it last made progress (a
 * chunk committed, a range done, a comparison finished) and the last step
 * that failed since (which step, with which node, on which range, the
 * error, how many failures). Once stall_warning_s (STALL_AFTER, default 30
 * s) passes without progress while work remains, the operation is stalled:
 * the node logs `<ev>.stalled` (WARN: join.stalled, leave.stalled,
 * removenode.stalled, cleanup.stalled, repair.stalled) once, `ringkv
 * netstats` shows one line starting with STREAM_STALL_PREFIX that `ringkv
 * --wait` repeats as a warning, and the first progress after logs
 * `<ev>.progressing` (INFO).
 * Before, an operation whose every retry failed (a gaining node answering
 * NOT_FOUND, a frozen peer) repeated its retry lines in the log while
 * netstats and --wait showed the same progress line forever.
 */
#include <stdio.h>
#include <string.h>

#include "streaming/streaming_internal.h"

void stream_stall_start(stream *st,
                        struct stream_stall *s,
                        const char *what,
                        const char *ev)
{
    memset(s, 0, sizeof(*s));
    s->what = what;
    s->ev = ev;
    s->progress_ms = stream__now(st);
}

void stream_stall_progress(stream *st, struct stream_stall *s)
{
    uint64_t now = stream__now(st);
    if (s->stalled) {
        char ev[48];
        snprintf(ev, sizeof(ev), "%s.progressing", s->ev);
        SLOG(st, INFO, ev, "stalled_ms=%llu failures=%llu",
             (unsigned long long)(now - s->progress_ms),
             (unsigned long long)s->failures);
    }
    s->stalled = false;
    s->progress_ms = now;
    s->failures = 0;
    s->err = 0;
}

void stream_stall_fail(struct stream_stall *s,
                       const char *step,
                       const char *peer,
                       const struct ring_range *range,
                       int err)
{
    s->failures++;
    s->err = err;
    snprintf(s->step, sizeof(s->step), "%s", step);
    snprintf(s->peer, sizeof(s->peer), "%s", peer ? peer : "");
    s->has_range = range != NULL;
    if (range)
        s->range = *range;
}

/* "last error: push to n4: not found; 37 failures since the last
 * progress, range (a,b]", or what it waits for when nothing failed. */
static void stall_reason(const struct stream_stall *s, char *out, size_t cap)
{
    if (!s->err && s->wait[0]) {
        snprintf(out, cap, "waiting for %s", s->wait);
        return;
    }
    if (!s->err) {
        snprintf(out, cap,
                 "no step has failed (a request or a job on the node's "
                 "thread pool has not come back)");
        return;
    }
    char rg[64] = "";
    if (s->has_range)
        snprintf(rg, sizeof(rg), ", range (%llu,%llu]",
                 (unsigned long long)s->range.start,
                 (unsigned long long)s->range.end);
    /* "push to n4", "the gaining node is not UP, to n4" */
    const char *sep = !s->peer[0] ? "" : strchr(s->step, ' ') ? ", " : " ";
    snprintf(out, cap,
             "last error: %s%s%s: %s; %llu failure%s since the last "
             "progress%s",
             s->step, sep, s->peer, rk_strerror(s->err),
             (unsigned long long)s->failures, s->failures == 1 ? "" : "s", rg);
}

void stream_stall_check(stream *st, struct stream_stall *s, bool work_left)
{
    uint64_t now = stream__now(st);
    if (!work_left) {
        s->stalled = false;
        s->progress_ms = now; /* the wait starts with the next work */
        return;
    }
    uint64_t quiet = now - s->progress_ms;
    if (s->stalled || quiet < (uint64_t)st->cfg.stall_warning_s * 1000u)
        return;
    s->stalled = true;
    char why[512], ev[48];
    stall_reason(s, why, sizeof(why));
    snprintf(ev, sizeof(ev), "%s.stalled", s->ev);
    SLOG(st, WARN, ev, "no_progress_ms=%llu why=\"%s\"",
         (unsigned long long)quiet, why);
}

void stream_stall_text(stream *st, const struct stream_stall *s, FILE *f)
{
    if (!s->stalled)
        return;
    char why[512];
    stall_reason(s, why, sizeof(why));
    fprintf(
        f, STREAM_STALL_PREFIX " the %s has made no progress for %llu s; %s\n",
        s->what,
        (unsigned long long)((stream__now(st) - s->progress_ms) / 1000), why);
}
