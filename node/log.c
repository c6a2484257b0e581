/*
 * log.c - the key=value line logger behind LOG().
 */
#include "node/log.h"

#include <errno.h>
#include <fcntl.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>
#include <sys/time.h>
#include <time.h>
#include <unistd.h>

enum node_log_level node_log_min = NODE_LOG_INFO;

static int log_fd = 2;
static char log_node[128];

static const char *level_names[] = {"debug", "info", "warn", "error"};

int node_log_open(const char *path,
                  enum node_log_level min,
                  const char *node_name)
{
    node_log_close();
    if (path && path[0]) {
        int fd = open(path, O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0644);
        if (fd < 0)
            return -errno;
        log_fd = fd;
    }
    node_log_min = min;
    snprintf(log_node, sizeof(log_node), "%s", node_name ? node_name : "");
    return 0;
}

void node_log_close(void)
{
    if (log_fd > 2)
        close(log_fd);
    log_fd = 2;
}

bool node_log_limit(struct node_log_limit *l,
                    uint64_t now_ms,
                    uint64_t *suppressed)
{
    if (l->last_ms != 0 && now_ms - l->last_ms < NODE_LOG_LIMIT_MS) {
        l->suppressed++;
        return false;
    }
    *suppressed = l->suppressed;
    l->suppressed = 0;
    l->last_ms = now_ms ? now_ms : 1;
    return true;
}

const char *node_log_quote(char *buf, size_t len, const char *s)
{
    if (!s[0])
        return "\"\"";
    if (!strpbrk(s, " \t\n=\""))
        return s;
    size_t j = 0;
    if (len < 3)
        return "\"\"";
    buf[j++] = '"';
    for (const char *p = s; *p && j + 3 < len; p++) {
        if (*p == '"' || *p == '\\')
            buf[j++] = '\\';
        buf[j++] = *p == '\n' ? ' ' : *p;
    }
    buf[j++] = '"';
    buf[j] = '\0';
    return buf;
}

void node_log_write(enum node_log_level level,
                    const char *event,
                    const char *fmt,
                    ...)
{
    va_list ap;
    va_start(ap, fmt);
    node_log_vwrite(level, event, fmt, ap);
    va_end(ap);
}

void node_log_vwrite(enum node_log_level level,
                     const char *event,
                     const char *fmt,
                     va_list ap)
{
    char line[2048];
    struct timeval tv;
    struct tm tm;
    gettimeofday(&tv, NULL);
    gmtime_r(&tv.tv_sec, &tm);
    int n = snprintf(
        line, sizeof(line), "ts=%04d-%02d-%02dT%02d:%02d:%02d.%03dZ level=%s",
        tm.tm_year + 1900, tm.tm_mon + 1, tm.tm_mday, tm.tm_hour, tm.tm_min,
        tm.tm_sec, (int)(tv.tv_usec / 1000), level_names[level]);
    if (log_node[0] && n < (int)sizeof(line))
        n += snprintf(line + n, sizeof(line) - (size_t)n, " node=%s", log_node);
    if (n < (int)sizeof(line))
        n += snprintf(line + n, sizeof(line) - (size_t)n, " event=%s", event);
    if (fmt[0] && n < (int)sizeof(line) - 1) {
        line[n++] = ' ';
        n += vsnprintf(line + n, sizeof(line) - (size_t)n, fmt, ap);
    }
    if (n > (int)sizeof(line) - 2)
        n = (int)sizeof(line) - 2;
    line[n++] = '\n';
    ssize_t w = write(log_fd, line, (size_t)n);
    (void)w;
}
