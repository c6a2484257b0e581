/*
 * metrics.h - a small metrics registry rendered in the Prometheus text
 * exposition format (version 0.0.4).
 *
 * The registry belongs to the daemon (no globals) and is touched only from
 * its loop thread: updates and rendering are not synchronised. To serve the
 * text, render it and hand the string over (net/http.h's
 * http_server_publish does exactly that).
 *
 * A family (one metric name, one type, one help text) has up to three label
 * dimensions, each with a fixed number of values known at registration, e.g.
 * op x level. Its series live in one flat array; a series is addressed by
 * its index, computed once with metrics_series(), so the hot path is an
 * array increment -- no hashing, no string compare, no allocation.
 *
 * Label values may be left unset and set later (metrics_label_set), e.g. one
 * slot per peer; a series with any unset label value is not rendered.
 *
 * Example (op x level, as the daemon would use it):
 *
 *     static const char *const ops[] = {"get", "set", "del"};
 *     static const char *const lv[] = {"ONE", "QUORUM", "ALL"};
 *     struct metrics_family_cfg c = {
 *         .name = "ringkv_request_duration_seconds",
 *         .help = "Client request latency by operation and level.",
 *         .type = METRICS_HISTOGRAM, .ndims = 2,
 *         .dims = {{"op", 3, ops}, {"level", 3, lv}}};
 *     metrics_family_add(&lat, m, &c);              // at start
 *     metrics_observe_us(lat, metrics_series(lat, op, level, 0), us);
 *     metrics_render(&text, &len, m);               // on a timer
 *     http_server_publish(http, text, len);         // takes text
 */
#ifndef COMMON_METRICS_H
#define COMMON_METRICS_H

#include <stddef.h>
#include <stdint.h>

typedef struct metrics metrics;
typedef struct metrics_family metrics_family;

enum metrics_type { METRICS_COUNTER, METRICS_GAUGE, METRICS_HISTOGRAM };

#define METRICS_MAX_DIMS 3

struct metrics_dim {
    const char *label;         /* label name, e.g. "op" (not "le") */
    size_t size;               /* number of values, >= 1 */
    const char *const *values; /* `size` values, copied; NULL: all unset */
};

struct metrics_family_cfg {
    const char *name; /* e.g. "ringkv_requests_total" */
    const char *help; /* one line */
    enum metrics_type type;
    size_t ndims;
    struct metrics_dim dims[METRICS_MAX_DIMS];
    /* Histograms: strictly increasing upper bounds in microseconds (the +Inf
     * bucket is implicit). NULL: METRICS_DEFAULT_BOUNDS_US. Copied. */
    const uint64_t *bounds_us;
    size_t nbounds;
};

/* 50 us .. 10 s: 50, 100, 250, 500 us, 1, 2.5, 5, 10, 25, 50, 100, 250,
 * 500 ms, 1, 2.5, 5, 10 s. */
#define METRICS_DEFAULT_NBOUNDS 17
extern const uint64_t METRICS_DEFAULT_BOUNDS_US[METRICS_DEFAULT_NBOUNDS];

/* An empty registry. 0 or -ENOMEM. Free with metrics_free(). */
int metrics_new(metrics **out);

/* Free the registry and every family in it. NULL is a no-op. */
void metrics_free(metrics *m);

/* Register a family; families render in registration order.
 * Returns 0, -ENOMEM, -EINVAL (bad name, label, dimension or bounds) or
 * RK_EEXIST (name already registered).
 * @note *out is owned by the registry and lives until metrics_free(). */
int metrics_family_add(metrics_family **out,
                       metrics *m,
                       const struct metrics_family_cfg *cfg);

/* Set (copy) or, with NULL, unset the value `i` of dimension `dim`.
 * 0, -ENOMEM or -EINVAL (out of range). */
int metrics_label_set(metrics_family *f,
                      size_t dim,
                      size_t i,
                      const char *value);

/* Index of the series with value indices i0, i1, i2 (0 for dimensions the
 * family does not have). Indices must be in range (asserted: they come from
 * the daemon's own enums). */
size_t metrics_series(const metrics_family *f, size_t i0, size_t i1, size_t i2);

/* Number of series of a family (the product of its dimension sizes). */
size_t metrics_nseries(const metrics_family *f);

/* Hot-path updates; the family must have the matching type. */
void metrics_counter_add(metrics_family *f, size_t series, uint64_t n);
void metrics_gauge_set(metrics_family *f, size_t series, int64_t v);
void metrics_gauge_add(metrics_family *f, size_t series, int64_t delta);
void metrics_observe_us(metrics_family *f, size_t series, uint64_t us);

/* Zero a series' values (e.g. when a peer slot is reused). */
void metrics_series_clear(metrics_family *f, size_t series);

/* Reads, for `ringkv metrics`, INFO and tests. */
uint64_t metrics_counter_get(const metrics_family *f, size_t series);
int64_t metrics_gauge_get(const metrics_family *f, size_t series);
uint64_t metrics_hist_count(const metrics_family *f, size_t series);
uint64_t metrics_hist_sum_us(const metrics_family *f, size_t series);

/* Render every family as Prometheus text into a new NUL-terminated string.
 * 0 or -ENOMEM.
 * @note *out is malloc'd and owned by the caller (free() it, or hand it to
 * http_server_publish). */
int metrics_render(char **out, size_t *out_len, const metrics *m);

#endif
