/*
 * log.h - ringkvd's one logger: key=value lines with a level.
 *
 *   LOG(INFO, "gossip.peer_up", "peer=%s addr=%s", name, addr);
 *
 * writes
 *
 *   ts=2026-12-02T11:46:00.123Z level=info node=n1 event=gossip.peer_up
 *   peer=n2 addr=127.0.0.22
 *
 * on one line. The macro checks the level before any formatting happens
 * (Redis's serverLog), so a DEBUG line costs one comparison when disabled.
 * Each line goes out in a single write(2), so lines of concurrent processes
 * sharing a file do not interleave.
 *
 * The level and the output file are the only process-wide state outside
 * `struct node`: they are set once at start-up, before the loop runs, and
 * only read afterwards. Pure parts never log; node/ logs the events they
 * return.
 */
#ifndef NODE_LOG_H
#define NODE_LOG_H

#include <stdarg.h>
#include <stdbool.h>
#include <stdint.h>

#include "node/config.h"

/* Lowest level written; set by node_log_open(). Read-only elsewhere. */
extern enum node_log_level node_log_min;

#define LOG(lvl, ...)                                    \
    do {                                                 \
        if (NODE_LOG_##lvl >= node_log_min)              \
            node_log_write(NODE_LOG_##lvl, __VA_ARGS__); \
    } while (0)

/* An event that input from outside can repeat at will (a bad gossip
 * packet, a wrong password, a failed internode handshake) is written at
 * most once every NODE_LOG_LIMIT_MS per limiter, the line after a pause
 * carrying how many were left out (`suppressed=N`): until 2026-12-06 a
 * flood of bad-MAC datagrams wrote 2.6 million lines in 25 s. The
 * limiter lives with its caller (struct node), used on one thread. */
struct node_log_limit {
    uint64_t last_ms;    /* when its last line was written; 0: never */
    uint64_t suppressed; /* left out since */
};
#define NODE_LOG_LIMIT_MS 10000

/* Whether to write a line now (monotonic now_ms); if so *suppressed is how
 * many were left out since the last one, and the count starts again;
 * otherwise one more is counted as left out. */
bool node_log_limit(struct node_log_limit *l,
                    uint64_t now_ms,
                    uint64_t *suppressed);

/* LOG through a limiter: `fmt` a string literal, at least one argument. */
#define LOG_LIMITED(lim, now_ms, lvl, event, fmt, ...)                      \
    do {                                                                    \
        uint64_t sup_;                                                      \
        if (NODE_LOG_##lvl >= node_log_min &&                               \
            node_log_limit((lim), (now_ms), &sup_))                         \
            node_log_write(NODE_LOG_##lvl, (event), fmt " suppressed=%llu", \
                           __VA_ARGS__, (unsigned long long)sup_);          \
    } while (0)

/* Open the log: `path` "" or NULL means stderr. `node_name` is put on every
 * line. Returns 0 or -errno (the file could not be opened). */
int node_log_open(const char *path,
                  enum node_log_level min,
                  const char *node_name);

/* Close the log file (stderr stays). Safe to call twice. */
void node_log_close(void);

/* Write one line: `event` is a short dotted name, `fmt` more key=value
 * fields (may be ""). Use LOG() rather than calling this directly. */
void node_log_write(enum node_log_level level,
                    const char *event,
                    const char *fmt,
                    ...) __attribute__((format(printf, 3, 4)));

/* node_log_write with its fields' arguments in ap (a part's log lines,
 * passed on by node/: streaming's host). */
void node_log_vwrite(enum node_log_level level,
                     const char *event,
                     const char *fmt,
                     va_list ap) __attribute__((format(printf, 3, 0)));

/* Quote a value for a key=value field if it holds blanks, '=' or '"':
 * returns `buf` (or `s` itself when no quoting is needed). */
const char *node_log_quote(char *buf, size_t len, const char *s);

#endif
