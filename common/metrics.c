/*
 * metrics.c - counters, gauges and histograms in fixed arrays, rendered as
 * Prometheus text.
 *
 * Every family keeps its values in one flat array of nseries slots
 * (histograms: nbounds + 1 bucket counts, then sum and count per slot), so an
 * update is one index computation and one add. Histogram buckets are stored
 * per bucket and made cumulative only when rendering.
 *
 * Numbers are rendered from integers only -- durations are kept in
 * microseconds and printed as exact decimal seconds -- so the output is
 * byte-for-byte reproducible (tests compare it verbatim).
 */
#include "common/metrics.h"

#include <assert.h>
#include <errno.h>
#include <inttypes.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/rk.h"

const uint64_t METRICS_DEFAULT_BOUNDS_US[METRICS_DEFAULT_NBOUNDS] = {
    50,    100,    250,    500,    1000,    2500,    5000,    10000,    25000,
    50000, 100000, 250000, 500000, 1000000, 2500000, 5000000, 10000000,
};

struct metrics__dim {
    char *label;
    size_t size;
    char **values; /* size entries, NULL = unset */
};

struct metrics_family {
    struct metrics_family *next;
    char *name;
    char *help;
    enum metrics_type type;
    size_t ndims;
    struct metrics__dim dims[METRICS_MAX_DIMS];
    size_t nseries;
    uint64_t *bounds_us; /* histograms */
    size_t nbounds;
    size_t stride;  /* values per series: 1, or nbounds + 3 */
    uint64_t *vals; /* counters; histograms (buckets..., sum, count) */
    int64_t *gauges;
};

struct metrics {
    struct metrics_family *head;
    struct metrics_family *tail;
};

/* ------------------------------------------------------------------------
 * Registry
 * ------------------------------------------------------------------------ */

int metrics_new(metrics **out)
{
    metrics *m = calloc(1, sizeof(*m));
    if (m == NULL)
        return -ENOMEM;
    *out = m;
    return 0;
}

static void metrics__family_free(struct metrics_family *f)
{
    if (f == NULL)
        return;
    for (size_t d = 0; d < f->ndims; d++) {
        if (f->dims[d].values != NULL)
            for (size_t i = 0; i < f->dims[d].size; i++)
                free(f->dims[d].values[i]);
        free(f->dims[d].values);
        free(f->dims[d].label);
    }
    free(f->name);
    free(f->help);
    free(f->bounds_us);
    free(f->vals);
    free(f->gauges);
    free(f);
}

void metrics_free(metrics *m)
{
    if (m == NULL)
        return;
    struct metrics_family *f = m->head;
    while (f != NULL) {
        struct metrics_family *next = f->next;
        metrics__family_free(f);
        f = next;
    }
    free(m);
}

static bool metrics__valid_name(const char *s, bool colon_ok)
{
    if (s == NULL || s[0] == '\0' || (s[0] >= '0' && s[0] <= '9'))
        return false;
    for (const char *c = s; *c != '\0'; c++) {
        bool ok = (*c >= 'a' && *c <= 'z') || (*c >= 'A' && *c <= 'Z') ||
                  (*c >= '0' && *c <= '9') || *c == '_' ||
                  (colon_ok && *c == ':');
        if (!ok)
            return false;
    }
    return true;
}

static int metrics__check_cfg(const metrics *m,
                              const struct metrics_family_cfg *cfg)
{
    if (!metrics__valid_name(cfg->name, true) || cfg->ndims > METRICS_MAX_DIMS)
        return -EINVAL;
    if (cfg->type != METRICS_COUNTER && cfg->type != METRICS_GAUGE &&
        cfg->type != METRICS_HISTOGRAM)
        return -EINVAL;
    for (size_t d = 0; d < cfg->ndims; d++) {
        const struct metrics_dim *dim = &cfg->dims[d];
        if (!metrics__valid_name(dim->label, false) || dim->size == 0 ||
            strncmp(dim->label, "__", 2) == 0 ||
            (cfg->type == METRICS_HISTOGRAM && strcmp(dim->label, "le") == 0))
            return -EINVAL;
        for (size_t e = 0; e < d; e++)
            if (strcmp(cfg->dims[e].label, dim->label) == 0)
                return -EINVAL;
    }
    if (cfg->type == METRICS_HISTOGRAM && cfg->bounds_us != NULL) {
        if (cfg->nbounds == 0)
            return -EINVAL;
        for (size_t i = 1; i < cfg->nbounds; i++)
            if (cfg->bounds_us[i] <= cfg->bounds_us[i - 1])
                return -EINVAL;
    }
    for (const struct metrics_family *f = m->head; f != NULL; f = f->next)
        if (strcmp(f->name, cfg->name) == 0)
            return RK_EEXIST;
    return 0;
}

static char *metrics__strdup(const char *s)
{
    size_t n = strlen(s) + 1;
    char *c = malloc(n);
    if (c != NULL)
        memcpy(c, s, n);
    return c;
}

int metrics_family_add(metrics_family **out,
                       metrics *m,
                       const struct metrics_family_cfg *cfg)
{
    int rc = metrics__check_cfg(m, cfg);
    if (rc != 0)
        return rc;
    struct metrics_family *f = calloc(1, sizeof(*f));
    if (f == NULL)
        return -ENOMEM;
    f->type = cfg->type;
    f->ndims = cfg->ndims;
    f->name = metrics__strdup(cfg->name);
    f->help = metrics__strdup(cfg->help != NULL ? cfg->help : "");
    if (f->name == NULL || f->help == NULL)
        goto fail_family;
    f->nseries = 1;
    for (size_t d = 0; d < cfg->ndims; d++) {
        const struct metrics_dim *src = &cfg->dims[d];
        struct metrics__dim *dst = &f->dims[d];
        if (f->nseries > SIZE_MAX / src->size / 64)
            goto fail_family;
        f->nseries *= src->size;
        dst->size = src->size;
        dst->label = metrics__strdup(src->label);
        dst->values = calloc(src->size, sizeof(char *));
        if (dst->label == NULL || dst->values == NULL)
            goto fail_family;
        for (size_t i = 0; src->values != NULL && i < src->size; i++) {
            if (src->values[i] == NULL)
                continue;
            dst->values[i] = metrics__strdup(src->values[i]);
            if (dst->values[i] == NULL)
                goto fail_family;
        }
    }
    f->stride = 1;
    if (f->type == METRICS_HISTOGRAM) {
        const uint64_t *b = cfg->bounds_us;
        f->nbounds = cfg->nbounds;
        if (b == NULL) {
            b = METRICS_DEFAULT_BOUNDS_US;
            f->nbounds = METRICS_DEFAULT_NBOUNDS;
        }
        f->bounds_us = malloc(f->nbounds * sizeof(uint64_t));
        if (f->bounds_us == NULL)
            goto fail_family;
        memcpy(f->bounds_us, b, f->nbounds * sizeof(uint64_t));
        f->stride = f->nbounds + 3;
    }
    if (f->type == METRICS_GAUGE)
        f->gauges = calloc(f->nseries, sizeof(int64_t));
    else
        f->vals = calloc(f->nseries * f->stride, sizeof(uint64_t));
    if (f->gauges == NULL && f->vals == NULL)
        goto fail_family;

    if (m->tail != NULL)
        m->tail->next = f;
    else
        m->head = f;
    m->tail = f;
    *out = f;
    return 0;

fail_family:
    metrics__family_free(f);
    return -ENOMEM;
}

int metrics_label_set(metrics_family *f,
                      size_t dim,
                      size_t i,
                      const char *value)
{
    if (dim >= f->ndims || i >= f->dims[dim].size)
        return -EINVAL;
    char *copy = NULL;
    if (value != NULL && (copy = metrics__strdup(value)) == NULL)
        return -ENOMEM;
    free(f->dims[dim].values[i]);
    f->dims[dim].values[i] = copy;
    return 0;
}

size_t metrics_series(const metrics_family *f, size_t i0, size_t i1, size_t i2)
{
    size_t idx[METRICS_MAX_DIMS] = {i0, i1, i2};
    size_t s = 0;
    for (size_t d = 0; d < METRICS_MAX_DIMS; d++) {
        if (d < f->ndims) {
            assert(idx[d] < f->dims[d].size);
            s = s * f->dims[d].size + idx[d];
        } else {
            assert(idx[d] == 0);
        }
    }
    return s;
}

size_t metrics_nseries(const metrics_family *f)
{
    return f->nseries;
}

/* ------------------------------------------------------------------------
 * Updates and reads
 * ------------------------------------------------------------------------ */

void metrics_counter_add(metrics_family *f, size_t series, uint64_t n)
{
    assert(f->type == METRICS_COUNTER && series < f->nseries);
    f->vals[series] += n;
}

void metrics_gauge_set(metrics_family *f, size_t series, int64_t v)
{
    assert(f->type == METRICS_GAUGE && series < f->nseries);
    f->gauges[series] = v;
}

void metrics_gauge_add(metrics_family *f, size_t series, int64_t delta)
{
    assert(f->type == METRICS_GAUGE && series < f->nseries);
    f->gauges[series] += delta;
}

void metrics_observe_us(metrics_family *f, size_t series, uint64_t us)
{
    assert(f->type == METRICS_HISTOGRAM && series < f->nseries);
    uint64_t *h = f->vals + series * f->stride;
    size_t b = 0;
    while (b < f->nbounds && us > f->bounds_us[b])
        b++;
    h[b]++; /* b == nbounds: the +Inf bucket */
    h[f->nbounds + 1] += us;
    h[f->nbounds + 2]++;
}

void metrics_series_clear(metrics_family *f, size_t series)
{
    assert(series < f->nseries);
    if (f->type == METRICS_GAUGE)
        f->gauges[series] = 0;
    else
        memset(f->vals + series * f->stride, 0, f->stride * sizeof(uint64_t));
}

uint64_t metrics_counter_get(const metrics_family *f, size_t series)
{
    assert(f->type == METRICS_COUNTER && series < f->nseries);
    return f->vals[series];
}

int64_t metrics_gauge_get(const metrics_family *f, size_t series)
{
    assert(f->type == METRICS_GAUGE && series < f->nseries);
    return f->gauges[series];
}

uint64_t metrics_hist_count(const metrics_family *f, size_t series)
{
    assert(f->type == METRICS_HISTOGRAM && series < f->nseries);
    return f->vals[series * f->stride + f->nbounds + 2];
}

uint64_t metrics_hist_sum_us(const metrics_family *f, size_t series)
{
    assert(f->type == METRICS_HISTOGRAM && series < f->nseries);
    return f->vals[series * f->stride + f->nbounds + 1];
}

/* ------------------------------------------------------------------------
 * Rendering
 * ------------------------------------------------------------------------ */

struct metrics__buf {
    char *p;
    size_t len, cap;
    bool oom;
};

static void metrics__put(struct metrics__buf *b, const char *s, size_t n)
{
    if (b->oom)
        return;
    if (b->len + n + 1 > b->cap) {
        size_t ncap = b->cap < 4096 ? 4096 : b->cap;
        while (ncap < b->len + n + 1)
            ncap *= 2;
        char *np = realloc(b->p, ncap);
        if (np == NULL) {
            b->oom = true;
            return;
        }
        b->p = np;
        b->cap = ncap;
    }
    memcpy(b->p + b->len, s, n);
    b->len += n;
    b->p[b->len] = '\0';
}

static void metrics__puts(struct metrics__buf *b, const char *s)
{
    metrics__put(b, s, strlen(s));
}

/* Escaped text: HELP escapes \ and newline; label values also ". */
static void
metrics__put_escaped(struct metrics__buf *b, const char *s, bool quote)
{
    const char *run = s;
    for (; *s != '\0'; s++) {
        const char *esc = NULL;
        if (*s == '\\')
            esc = "\\\\";
        else if (*s == '\n')
            esc = "\\n";
        else if (quote && *s == '"')
            esc = "\\\"";
        if (esc == NULL)
            continue;
        metrics__put(b, run, (size_t)(s - run));
        metrics__puts(b, esc);
        run = s + 1;
    }
    metrics__put(b, run, (size_t)(s - run));
}

static void metrics__put_u64(struct metrics__buf *b, uint64_t v)
{
    char num[24];
    int n = snprintf(num, sizeof(num), "%" PRIu64, v);
    metrics__put(b, num, (size_t)n);
}

/* Microseconds as exact decimal seconds: 50 -> "0.00005", 2500000 -> "2.5",
 * 1000000 -> "1". Returns the length written into num. */
static size_t metrics__fmt_seconds(char num[48], uint64_t us)
{
    int n = snprintf(num, 48, "%" PRIu64, us / 1000000);
    uint64_t frac = us % 1000000;
    if (frac != 0) {
        n += snprintf(num + n, 48 - (size_t)n, ".%06" PRIu64, frac);
        while (num[n - 1] == '0')
            n--;
        num[n] = '\0';
    }
    return (size_t)n;
}

static void metrics__put_seconds(struct metrics__buf *b, uint64_t us)
{
    char num[48];
    size_t n = metrics__fmt_seconds(num, us);
    metrics__put(b, num, n);
}

static const char *const metrics__type_names[] = {"counter", "gauge",
                                                  "histogram"};

/* Value indices of series s; false if a label value is unset. */
static bool metrics__labels_of(const struct metrics_family *f,
                               size_t s,
                               size_t idx[METRICS_MAX_DIMS])
{
    for (size_t d = f->ndims; d-- > 0;) {
        idx[d] = s % f->dims[d].size;
        s /= f->dims[d].size;
        if (f->dims[d].values[idx[d]] == NULL)
            return false;
    }
    return true;
}

/* name{l1="v1",...[,le="x"]} -- `le` NULL for none; suffix appended to the
 * name ("_bucket", "_sum", "_count" or ""). */
static void metrics__put_series(struct metrics__buf *b,
                                const struct metrics_family *f,
                                const size_t idx[METRICS_MAX_DIMS],
                                const char *suffix,
                                const char *le)
{
    metrics__puts(b, f->name);
    metrics__puts(b, suffix);
    if (f->ndims == 0 && le == NULL) {
        metrics__puts(b, " ");
        return;
    }
    metrics__puts(b, "{");
    for (size_t d = 0; d < f->ndims; d++) {
        if (d > 0)
            metrics__puts(b, ",");
        metrics__puts(b, f->dims[d].label);
        metrics__puts(b, "=\"");
        metrics__put_escaped(b, f->dims[d].values[idx[d]], true);
        metrics__puts(b, "\"");
    }
    if (le != NULL) {
        metrics__puts(b, f->ndims > 0 ? ",le=\"" : "le=\"");
        metrics__puts(b, le);
        metrics__puts(b, "\"");
    }
    metrics__puts(b, "} ");
}

static void metrics__render_family(struct metrics__buf *b,
                                   const struct metrics_family *f)
{
    metrics__puts(b, "# HELP ");
    metrics__puts(b, f->name);
    metrics__puts(b, " ");
    metrics__put_escaped(b, f->help, false);
    metrics__puts(b, "\n# TYPE ");
    metrics__puts(b, f->name);
    metrics__puts(b, " ");
    metrics__puts(b, metrics__type_names[f->type]);
    metrics__puts(b, "\n");

    size_t idx[METRICS_MAX_DIMS] = {0, 0, 0};
    for (size_t s = 0; s < f->nseries; s++) {
        if (!metrics__labels_of(f, s, idx))
            continue;
        if (f->type == METRICS_COUNTER) {
            metrics__put_series(b, f, idx, "", NULL);
            metrics__put_u64(b, f->vals[s]);
            metrics__puts(b, "\n");
            continue;
        }
        if (f->type == METRICS_GAUGE) {
            char num[24];
            int n = snprintf(num, sizeof(num), "%" PRId64, f->gauges[s]);
            metrics__put_series(b, f, idx, "", NULL);
            metrics__put(b, num, (size_t)n);
            metrics__puts(b, "\n");
            continue;
        }
        const uint64_t *h = f->vals + s * f->stride;
        uint64_t cum = 0;
        for (size_t i = 0; i <= f->nbounds; i++) {
            char le[48];
            cum += h[i];
            if (i < f->nbounds)
                metrics__fmt_seconds(le, f->bounds_us[i]);
            else
                memcpy(le, "+Inf", 5);
            metrics__put_series(b, f, idx, "_bucket", le);
            metrics__put_u64(b, cum);
            metrics__puts(b, "\n");
        }
        metrics__put_series(b, f, idx, "_sum", NULL);
        metrics__put_seconds(b, h[f->nbounds + 1]);
        metrics__puts(b, "\n");
        metrics__put_series(b, f, idx, "_count", NULL);
        metrics__put_u64(b, h[f->nbounds + 2]);
        metrics__puts(b, "\n");
    }
}

int metrics_render(char **out, size_t *out_len, const metrics *m)
{
    struct metrics__buf b = {0};
    metrics__put(&b, "", 0);
    for (const struct metrics_family *f = m->head; f != NULL; f = f->next)
        metrics__render_family(&b, f);
    if (b.oom) {
        free(b.p);
        return -ENOMEM;
    }
    *out = b.p;
    *out_len = b.len;
    return 0;
}
