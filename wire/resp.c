/*
 * resp.c - RESP2 request parser, reply encoders and command table.
 *
 * The parser keeps one contiguous buffer per connection. Bytes are appended
 * at the end (feed, or reserve+commit for zero-copy reads); requests are
 * parsed from `start`, and only when new bytes arrive is the consumed prefix
 * moved out (compaction). So the bytes of every request returned since the
 * last feed stay where they are, and pipelined requests need no copies.
 *
 * A multibulk request is parsed incrementally: the header, then each
 * "$<len>\r\n<bytes>\r\n" in turn, remembering how far it got, so a request
 * split at every byte costs no rescanning. Arguments are kept as offsets
 * until the request is complete (the buffer may move while it grows) and
 * turned into slices at the end. Inline requests ("GET k\n") are split in
 * place, with the quoting rules of Redis's sdssplitargs.
 *
 * Limits follow Redis's (proto-max-bulk-len, 1M args, 64 KiB inline) but are
 * smaller by default and per parser: see resp_limits.
 */
#include "wire/resp.h"

#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* A valid length line is at most "-" + 19 digits + "\r\n" after the type
 * byte; anything longer without a CR is an error, not a reason to wait. */
#define RESP__MAX_NUMLINE 32
/* Buffers above this are shrunk back when they become (nearly) empty. */
#define RESP__BUF_KEEP (256u * 1024u)
#define RESP__BUF_MIN  16384u
/* Argument arrays above this many entries are freed between requests. */
#define RESP__ARGS_KEEP 1024u

struct resp__off {
    size_t off;
    size_t len;
};

struct resp_parser {
    struct resp_limits lim;
    uint8_t *buf;
    size_t len; /* bytes received: [0, len) */
    size_t cap;
    size_t start;       /* first byte of the request being parsed */
    size_t pos;         /* parse cursor */
    size_t inline_scan; /* inline: searched for '\n' up to here */
    long long nargs;    /* multibulk: elements expected; -1 between requests */
    long long bulk;     /* length of the bulk being read; -1: header next */
    size_t argc;        /* elements parsed so far */
    size_t payload;     /* sum of bulk lengths so far */
    size_t skip;        /* bytes of a bulk over max_bulk (and its CRLF)
                           still to drop */
    size_t too_large;   /* the request's first such bulk's length */
    struct resp__off *offs;
    size_t offs_cap;
    struct rk_slice *argv;
    size_t argv_cap;
    bool borrowed;   /* buf is the caller's (resp_parser_next_in) */
    const char *err; /* NULL while healthy */
    char errbuf[64];
};

/* ------------------------------------------------------------------------
 * Parser: buffer management
 * ------------------------------------------------------------------------ */

int resp_parser_new(resp_parser **out, const struct resp_limits *limits)
{
    static const struct resp_limits defaults = RESP_LIMITS_INIT;
    resp_parser *p = calloc(1, sizeof(*p));
    if (p == NULL)
        return -ENOMEM;
    p->lim = limits != NULL ? *limits : defaults;
    p->nargs = -1;
    p->bulk = -1;
    *out = p;
    return 0;
}

void resp_parser_free(resp_parser *p)
{
    if (p == NULL)
        return;
    if (!p->borrowed)
        free(p->buf);
    free(p->offs);
    free(p->argv);
    free(p);
}

/* The first s bytes are gone from the buffer: count from there. */
static void resp__rebase(resp_parser *p, size_t s)
{
    p->len -= s;
    p->pos -= s;
    p->inline_scan = p->inline_scan > s ? p->inline_scan - s : 0;
    for (size_t i = 0; i < p->argc; i++)
        p->offs[i].off -= s;
    p->start = 0;
}

/* Between requests, drop argument arrays grown by a very wide one. */
static void resp__trim_args(resp_parser *p)
{
    if (p->nargs < 0 && p->offs_cap > RESP__ARGS_KEEP) {
        free(p->offs);
        free(p->argv);
        p->offs = NULL;
        p->argv = NULL;
        p->offs_cap = 0;
        p->argv_cap = 0;
    }
}

/* Move the unparsed tail [start, len) to the front of the buffer. */
static void resp__compact(resp_parser *p)
{
    size_t s = p->start;
    if (s == 0)
        return;
    memmove(p->buf, p->buf + s, p->len - s);
    resp__rebase(p, s);
}

/* Ensure cap >= need, growing geometrically; shrink an oversized buffer
 * that holds little. 0 or -ENOMEM (buffer unchanged). */
static int resp__fit(resp_parser *p, size_t need)
{
    size_t ncap;
    if (need <= p->cap) {
        if (p->cap <= RESP__BUF_KEEP || need > RESP__BUF_KEEP / 4)
            return 0;
        ncap = RESP__BUF_KEEP; /* shrink */
    } else {
        ncap = p->cap < RESP__BUF_MIN ? RESP__BUF_MIN : p->cap;
        while (ncap < need) {
            if (ncap > SIZE_MAX / 2) {
                ncap = need;
                break;
            }
            ncap *= 2;
        }
    }
    uint8_t *nb = realloc(p->buf, ncap);
    if (nb == NULL)
        return need <= p->cap ? 0 : -ENOMEM;
    p->buf = nb;
    p->cap = ncap;
    return 0;
}

int resp_parser_reserve(uint8_t **out,
                        size_t *out_len,
                        resp_parser *p,
                        size_t want)
{
    resp__compact(p);
    resp__trim_args(p);
    size_t need = p->len + want;
    if (need < p->len)
        return -ENOMEM;
    /* A bulk whose length is known: grow towards all of it in few steps,
     * but never past twice what actually arrived, so a client that only
     * announces a large bulk does not make us allocate it. */
    if (p->nargs >= 0 && p->bulk >= 0) {
        size_t whole = p->pos + (size_t)p->bulk + 2;
        size_t step = 2 * p->len;
        if (step > whole)
            step = whole;
        if (step > need)
            need = step;
    }
    int rc = resp__fit(p, need);
    if (rc != 0)
        return rc;
    *out = p->buf + p->len;
    *out_len = p->cap - p->len;
    return 0;
}

void resp_parser_commit(resp_parser *p, size_t n)
{
    p->len += n;
}

int resp_parser_feed(resp_parser *p, const void *data, size_t len)
{
    if (p->err != NULL)
        return RK_EPROTO;
    uint8_t *dst;
    size_t room;
    int rc = resp_parser_reserve(&dst, &room, p, len);
    if (rc != 0)
        return rc;
    if (len > 0)
        memcpy(dst, data, len);
    resp_parser_commit(p, len);
    return 0;
}

void resp_parser_set_limits(resp_parser *p, const struct resp_limits *limits)
{
    p->lim = *limits;
}

int resp_parser_next_in(struct resp_cmd *out,
                        resp_parser *p,
                        uint8_t *buf,
                        size_t *len)
{
    if (!p->borrowed) {
        free(p->buf);
        p->borrowed = true;
    }
    p->buf = buf;
    p->len = *len;
    p->cap = *len;
    int rc = resp_parser_next(out, p);
    *len = p->len;
    return rc;
}

size_t resp_parser_take_consumed(resp_parser *p)
{
    size_t s = p->start;
    resp__rebase(p, s);
    resp__trim_args(p);
    return s;
}

size_t resp_parser_need(const resp_parser *p)
{
    if (p->nargs < 0 || p->bulk < 0 || p->skip > 0)
        return 0;
    return p->pos + (size_t)p->bulk + 2 - p->start;
}

size_t resp_parser_pending(const resp_parser *p)
{
    return p->len - p->start;
}

size_t resp_parser_memory(const resp_parser *p)
{
    return sizeof(*p) + p->cap + p->offs_cap * sizeof(struct resp__off) +
           p->argv_cap * sizeof(struct rk_slice);
}

const char *resp_parser_error(const resp_parser *p)
{
    return p->err != NULL ? p->err : "";
}

/* ------------------------------------------------------------------------
 * Parser: requests
 * ------------------------------------------------------------------------ */

static int resp__fail(resp_parser *p, const char *msg)
{
    p->err = msg;
    return RK_EPROTO;
}

static int resp__lower(int c)
{
    return c >= 'A' && c <= 'Z' ? c - 'A' + 'a' : c;
}

/* Case-insensitive: does the slice spell the NUL-terminated name? */
static bool resp__is(const struct rk_slice *s, const char *name)
{
    size_t n = strlen(name);
    if (s->len != n)
        return false;
    for (size_t i = 0; i < n; i++)
        if (resp__lower(s->p[i]) != resp__lower((unsigned char)name[i]))
            return false;
    return true;
}

/* Strict decimal, as Redis reads one (its string2ll): optional '-', 1..19
 * digits, no leading zero but in "0" itself, no "-0", nothing else. Until
 * 2026-12-03 "$04" and "-0" were taken (regression: check_resp's
 * regression_leading_zero_lengths). */
static int resp__parse_ll(long long *out, const uint8_t *s, size_t n)
{
    bool neg = false;
    if (n > 0 && s[0] == '-') {
        neg = true;
        s++;
        n--;
    }
    if (n == 0 || n > 19 || (s[0] == '0' && (n > 1 || neg)))
        return -1;
    unsigned long long v = 0;
    for (size_t i = 0; i < n; i++) {
        if (s[i] < '0' || s[i] > '9')
            return -1;
        v = v * 10 + (unsigned long long)(s[i] - '0');
    }
    if (v > (unsigned long long)INT64_MAX)
        return -1;
    *out = neg ? -(long long)v : (long long)v;
    return 0;
}

/* A line "<c><length>\r\n" at the start of p[0..left), the length as
 * the parser takes it (resp__parse_ll, not negative): *out and the line's
 * bytes, or 0. Looks at 24 bytes at most: a length has 19 digits. */
static size_t
resp__peek_len(size_t *out, const uint8_t *p, size_t left, uint8_t c)
{
    size_t look = left < 24 ? left : 24;
    const uint8_t *cr = look > 1 ? memchr(p, '\r', look - 1) : NULL;
    long long v;
    if (cr == NULL || p[0] != c || cr[1] != '\n' ||
        resp__parse_ll(&v, p + 1, (size_t)(cr - p) - 1) != 0 || v < 0)
        return 0;
    *out = (size_t)v;
    return (size_t)(cr - p) + 2;
}

size_t resp_peek_gets(const uint8_t *buf,
                      size_t len,
                      struct rk_slice *keys,
                      size_t max)
{
    size_t pos = 0, n = 0;
    if (len == 0) /* buf may be NULL: no NULL + 0 (undefined) */
        return 0;
    while (n < max) {
        const uint8_t *p = buf + pos;
        size_t left = len - pos, at, used, argc, nlen, klen;
        if ((at = resp__peek_len(&argc, p, left, '*')) == 0 || argc != 2 ||
            (used = resp__peek_len(&nlen, p + at, left - at, '$')) == 0 ||
            nlen != 3 || left - at - used < 5)
            break;
        at += used;
        struct rk_slice name = RK_SLICE(p + at, 3);
        if (!resp__is(&name, "get") || p[at + 3] != '\r' || p[at + 4] != '\n')
            break;
        at += 5;
        if ((used = resp__peek_len(&klen, p + at, left - at, '$')) == 0)
            break;
        at += used;
        if (left - at < 2 || klen > left - at - 2 || p[at + klen] != '\r' ||
            p[at + klen + 1] != '\n')
            break;
        keys[n++] = RK_SLICE(p + at, klen);
        pos += at + klen + 2;
    }
    return n;
}

static int resp__offs_push(resp_parser *p, size_t off, size_t len)
{
    if (p->argc == p->offs_cap) {
        size_t ncap = p->offs_cap == 0 ? 8 : p->offs_cap * 2;
        struct resp__off *n = realloc(p->offs, ncap * sizeof(*n));
        if (n == NULL)
            return -ENOMEM;
        p->offs = n;
        p->offs_cap = ncap;
    }
    p->offs[p->argc].off = off;
    p->offs[p->argc].len = len;
    p->argc++;
    return 0;
}

/* Turn the offsets of a complete request into slices. */
static int resp__finish(struct resp_cmd *out, resp_parser *p)
{
    if (p->argc > p->argv_cap) {
        struct rk_slice *n = realloc(p->argv, p->argc * sizeof(*n));
        if (n == NULL)
            return -ENOMEM;
        p->argv = n;
        p->argv_cap = p->argc;
    }
    for (size_t i = 0; i < p->argc; i++)
        p->argv[i] = RK_SLICE(p->buf + p->offs[i].off, p->offs[i].len);
    out->argc = p->argc;
    out->argv = p->argv;
    out->too_large = p->too_large;
    p->too_large = 0;
    p->start = p->pos;
    p->nargs = -1;
    p->bulk = -1;
    p->argc = 0;
    p->payload = 0;
    return 1;
}

/* Find the CR ending a length line that starts at `from` (the type byte).
 * Returns 1 with *cr set, 0 if more bytes are needed, or an error. */
static int
resp__numline(size_t *cr, resp_parser *p, size_t from, const char *toolong)
{
    size_t avail = p->len - from;
    size_t scan = avail < RESP__MAX_NUMLINE ? avail : RESP__MAX_NUMLINE;
    const uint8_t *r = memchr(p->buf + from, '\r', scan);
    if (r == NULL)
        return avail >= RESP__MAX_NUMLINE ? resp__fail(p, toolong) : 0;
    size_t at = (size_t)(r - p->buf);
    if (at + 1 >= p->len)
        return 0;
    *cr = at;
    return 1;
}

static bool resp__is_space(uint8_t c)
{
    return c == ' ' || c == '\t' || c == '\r' || c == '\n' || c == '\v' ||
           c == '\f';
}

static int resp__hexval(uint8_t c)
{
    if (c >= '0' && c <= '9')
        return c - '0';
    if (c >= 'a' && c <= 'f')
        return c - 'a' + 10;
    if (c >= 'A' && c <= 'F')
        return c - 'A' + 10;
    return -1;
}

/* Split the inline line [b, e) in place into arguments, like Redis's
 * sdssplitargs: whitespace separates; "..." knows \n \r \t \b \a \\ \" and
 * \xHH; '...' knows \'. A closing quote must be followed by whitespace. */
static int resp__split_inline(resp_parser *p, size_t b, size_t e)
{
    uint8_t *buf = p->buf;
    size_t i = b;
    for (;;) {
        while (i < e && resp__is_space(buf[i]))
            i++;
        if (i == e)
            return 0;
        if (p->argc == p->lim.max_args)
            return resp__fail(p, "too many arguments in inline request");
        size_t w = i, arg = i;
        int quote = 0; /* 0, '"' or '\'' */
        for (;;) {
            if (quote == 0) {
                if (i == e || resp__is_space(buf[i]))
                    break;
                if (buf[i] == '"' || buf[i] == '\'') {
                    quote = buf[i++];
                    continue;
                }
                buf[w++] = buf[i++];
                continue;
            }
            if (i == e)
                return resp__fail(p, "unbalanced quotes in request");
            uint8_t c = buf[i];
            if (c == quote) {
                if (i + 1 < e && !resp__is_space(buf[i + 1]))
                    return resp__fail(p, "unbalanced quotes in request");
                i++;
                break;
            }
            if (quote == '"' && c == '\\' && i + 3 < e && buf[i + 1] == 'x' &&
                resp__hexval(buf[i + 2]) >= 0 &&
                resp__hexval(buf[i + 3]) >= 0) {
                buf[w++] = (uint8_t)(resp__hexval(buf[i + 2]) * 16 +
                                     resp__hexval(buf[i + 3]));
                i += 4;
                continue;
            }
            if (quote == '"' && c == '\\' && i + 1 < e) {
                uint8_t n = buf[i + 1];
                switch (n) {
                case 'n':
                    n = '\n';
                    break;
                case 'r':
                    n = '\r';
                    break;
                case 't':
                    n = '\t';
                    break;
                case 'b':
                    n = '\b';
                    break;
                case 'a':
                    n = '\a';
                    break;
                default:
                    break;
                }
                buf[w++] = n;
                i += 2;
                continue;
            }
            if (quote == '\'' && c == '\\' && i + 1 < e && buf[i + 1] == '\'') {
                buf[w++] = '\'';
                i += 2;
                continue;
            }
            buf[w++] = c;
            i++;
        }
        if (resp__offs_push(p, arg, w - arg) != 0) {
            /* the line is half unescaped: it cannot be parsed again */
            resp__fail(p, "out of memory");
            return -ENOMEM;
        }
    }
}

/* 1: a request; 0: need more; 2: an empty line was skipped; or error. */
static int resp__next_inline(struct resp_cmd *out, resp_parser *p)
{
    /* Byte by byte, in order, so the outcome does not depend on how the
     * bytes were split into reads (the fuzz target checks this). */
    size_t i = p->inline_scan > p->start ? p->inline_scan : p->start;
    for (; i < p->len; i++) {
        uint8_t c = p->buf[i];
        if (c == '\n')
            break;
        if (i - p->start >= p->lim.max_inline)
            return resp__fail(p, "too big inline request");
        if ((c < 0x20 && !resp__is_space(c)) || c == 0x7f)
            return resp__fail(p, "binary data in inline request");
    }
    if (i == p->len) {
        p->inline_scan = p->len;
        return 0;
    }
    size_t end = i;
    size_t e = end;
    if (e > p->start && p->buf[e - 1] == '\r')
        e--;
    p->argc = 0;
    int rc = resp__split_inline(p, p->start, e);
    if (rc != 0) {
        p->argc = 0;
        return rc;
    }
    /* An HTTP request sent to this port (a browser tricked into it): close,
     * as Redis does. */
    if (p->argc > 0) {
        struct rk_slice a0 = RK_SLICE(p->buf + p->offs[0].off, p->offs[0].len);
        if (resp__is(&a0, "post") || resp__is(&a0, "host:")) {
            p->argc = 0;
            return resp__fail(p, "cross protocol scripting attempt");
        }
    }
    p->pos = end + 1;
    p->inline_scan = 0;
    if (p->argc == 0) { /* empty line: skipped */
        p->start = p->pos;
        return 2;
    }
    return resp__finish(out, p);
}

int resp_parser_next(struct resp_cmd *out, resp_parser *p)
{
    int rc;
    size_t cr;
    long long n;

    if (p->err != NULL)
        return RK_EPROTO;
    for (;;) {
        if (p->nargs < 0) {
            if (p->start == p->len)
                return 0;
            if (p->buf[p->start] != '*') {
                rc = resp__next_inline(out, p);
                if (rc == 2)
                    continue; /* skipped an empty line */
                return rc;
            }
            rc = resp__numline(&cr, p, p->start, "too big mbulk count string");
            if (rc <= 0)
                return rc;
            if (p->buf[cr + 1] != '\n' ||
                resp__parse_ll(&n, p->buf + p->start + 1, cr - p->start - 1) !=
                    0 ||
                n < -1 || (n > 0 && (unsigned long long)n > p->lim.max_args))
                return resp__fail(p, "invalid multibulk length");
            p->pos = cr + 2;
            if (n <= 0) { /* "*0" and "*-1": nothing to do, as in Redis */
                p->start = p->pos;
                continue;
            }
            p->nargs = n;
            p->argc = 0;
            p->payload = 0;
            p->bulk = -1;
        }
        while (p->argc < (size_t)p->nargs) {
            if (p->skip > 0) {
                /* a bulk over max_bulk: drop what arrived of it */
                size_t have = p->len - p->pos;
                size_t d = have < p->skip ? have : p->skip;
                memmove(p->buf + p->pos, p->buf + p->pos + d, have - d);
                p->len -= d;
                p->skip -= d;
                if (p->skip > 0)
                    return 0;
                if (resp__offs_push(p, p->pos, 0) != 0)
                    return -ENOMEM;
                continue;
            }
            if (p->bulk < 0) {
                if (p->pos == p->len)
                    return 0;
                uint8_t c = p->buf[p->pos];
                if (c != '$') {
                    if (c >= 0x20 && c < 0x7f)
                        snprintf(p->errbuf, sizeof(p->errbuf),
                                 "expected '$', got '%c'", c);
                    else
                        snprintf(p->errbuf, sizeof(p->errbuf),
                                 "expected '$', got byte 0x%02x", c);
                    return resp__fail(p, p->errbuf);
                }
                rc = resp__numline(&cr, p, p->pos, "too big bulk count string");
                if (rc <= 0)
                    return rc;
                if (p->buf[cr + 1] != '\n' ||
                    resp__parse_ll(&n, p->buf + p->pos + 1, cr - p->pos - 1) !=
                        0 ||
                    n < 0 ||
                    ((unsigned long long)n > p->lim.max_bulk &&
                     (unsigned long long)n > p->lim.max_skip))
                    return resp__fail(p, "invalid bulk length");
                if ((unsigned long long)n > p->lim.max_bulk) {
                    if (p->too_large == 0)
                        p->too_large = (size_t)n;
                    p->skip = (size_t)n + 2; /* and its CRLF */
                    p->pos = cr + 2;
                    continue;
                }
                if ((size_t)n > p->lim.max_request - p->payload)
                    return resp__fail(p, "request too large");
                p->payload += (size_t)n;
                p->bulk = n;
                p->pos = cr + 2;
            }
            size_t blen = (size_t)p->bulk;
            if (p->len - p->pos < blen + 2)
                return 0;
            if (p->buf[p->pos + blen] != '\r' ||
                p->buf[p->pos + blen + 1] != '\n')
                return resp__fail(p, "expected CRLF after bulk string");
            if (resp__offs_push(p, p->pos, blen) != 0)
                return -ENOMEM;
            p->pos += blen + 2;
            p->bulk = -1;
        }
        return resp__finish(out, p);
    }
}

/* ------------------------------------------------------------------------
 * Reply encoder
 * ------------------------------------------------------------------------ */

void resp_out_free(struct resp_out *o)
{
    free(o->p);
    o->p = NULL;
    o->len = 0;
    o->cap = 0;
}

int resp_out_reserve(struct resp_out *o, size_t more)
{
    if (more <= o->cap - o->len)
        return 0;
    size_t need = o->len + more;
    if (need < o->len)
        return -ENOMEM;
    size_t ncap = o->cap < 256 ? 256 : o->cap;
    while (ncap < need) {
        if (ncap > SIZE_MAX / 2) {
            ncap = need;
            break;
        }
        ncap *= 2;
    }
    uint8_t *n = realloc(o->p, ncap);
    if (n == NULL)
        return -ENOMEM;
    o->p = n;
    o->cap = ncap;
    return 0;
}

static void resp__put(struct resp_out *o, const void *p, size_t n)
{
    memcpy(o->p + o->len, p, n);
    o->len += n;
}

/* Decimal of v into the end of buf[24]; returns the start. */
static char *resp__fmt_i64(char buf[24], int64_t v)
{
    char *s = buf + 24;
    uint64_t u = v < 0 ? (uint64_t)0 - (uint64_t)v : (uint64_t)v;
    do {
        *--s = (char)('0' + u % 10);
        u /= 10;
    } while (u != 0);
    if (v < 0)
        *--s = '-';
    return s;
}

/* "<type byte><decimal>\r\n" */
static int resp__put_num(struct resp_out *o, char type, int64_t v)
{
    char nb[24];
    char *s = resp__fmt_i64(nb, v);
    size_t n = (size_t)(nb + 24 - s);
    int rc = resp_out_reserve(o, n + 3);
    if (rc != 0)
        return rc;
    o->p[o->len++] = (uint8_t)type;
    resp__put(o, s, n);
    resp__put(o, "\r\n", 2);
    return 0;
}

/* A line "<type><text>\r\n" with CR/LF in text replaced by spaces. */
static int resp__put_line(struct resp_out *o,
                          char type,
                          const char *a,
                          const char *sep,
                          const char *b)
{
    size_t na = a != NULL ? strlen(a) : 0;
    size_t ns = sep != NULL ? strlen(sep) : 0;
    size_t nb = b != NULL ? strlen(b) : 0;
    int rc = resp_out_reserve(o, 1 + na + ns + nb + 2);
    if (rc != 0)
        return rc;
    o->p[o->len++] = (uint8_t)type;
    size_t from = o->len;
    if (na)
        resp__put(o, a, na);
    if (ns)
        resp__put(o, sep, ns);
    if (nb)
        resp__put(o, b, nb);
    for (size_t i = from; i < o->len; i++)
        if (o->p[i] == '\r' || o->p[i] == '\n')
            o->p[i] = ' ';
    resp__put(o, "\r\n", 2);
    return 0;
}

int resp_out_simple(struct resp_out *o, const char *s)
{
    return resp__put_line(o, '+', s, NULL, NULL);
}

int resp_out_ok(struct resp_out *o)
{
    return resp__put_line(o, '+', "OK", NULL, NULL);
}

int resp_out_error(struct resp_out *o, const char *type, const char *msg)
{
    bool has_msg = msg != NULL && msg[0] != '\0';
    return resp__put_line(o, '-', type, has_msg ? " " : NULL,
                          has_msg ? msg : NULL);
}

int resp_out_errorf(struct resp_out *o, const char *fmt, ...)
{
    char line[1024];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(line, sizeof(line), fmt, ap);
    va_end(ap);
    return resp__put_line(o, '-', line, NULL, NULL);
}

int resp_out_rkerr(struct resp_out *o, int err, const char *detail)
{
    return resp_out_error(o, rk_errname(err),
                          detail != NULL ? detail : rk_strerror(err));
}

int resp_out_proto_error(struct resp_out *o, const resp_parser *p)
{
    return resp__put_line(o, '-', "ERR Protocol error: ", NULL,
                          resp_parser_error(p));
}

int resp_out_int(struct resp_out *o, int64_t v)
{
    return resp__put_num(o, ':', v);
}

int resp_out_bulk(struct resp_out *o, const void *data, size_t len)
{
    char nb[24];
    char *s = resp__fmt_i64(nb, (int64_t)len);
    size_t n = (size_t)(nb + 24 - s);
    if (len > SIZE_MAX - n - 5)
        return -ENOMEM;
    int rc = resp_out_reserve(o, 1 + n + 2 + len + 2);
    if (rc != 0)
        return rc;
    o->p[o->len++] = '$';
    resp__put(o, s, n);
    resp__put(o, "\r\n", 2);
    if (len > 0)
        resp__put(o, data, len);
    resp__put(o, "\r\n", 2);
    return 0;
}

int resp_out_null(struct resp_out *o)
{
    return resp__put_line(o, '$', "-1", NULL, NULL);
}

int resp_out_array(struct resp_out *o, size_t n)
{
    return resp__put_num(o, '*', (int64_t)n);
}

/* ------------------------------------------------------------------------
 * Command table
 * ------------------------------------------------------------------------ */

static const struct resp__cmddef {
    const char *name;
    enum resp_op op;
    int min_argc; /* including the name */
    int max_argc; /* 0: unbounded */
    char form;    /* SET's older forms: 'e' SETEX, 'p' PSETEX, 'n' SETNX */
} resp__cmds[] = {
    /* the hot ones first: the lookup is a linear scan */
    {"get", RESP_OP_GET, 2, 2, 0},
    {"set", RESP_OP_SET, 3, 0, 0},
    {"mget", RESP_OP_MGET, 2, 0, 0},
    {"mset", RESP_OP_MSET, 3, 0, 0},
    {"del", RESP_OP_DEL, 2, 0, 0},
    {"exists", RESP_OP_EXISTS, 2, 0, 0},
    {"ping", RESP_OP_PING, 1, 2, 0},
    {"echo", RESP_OP_ECHO, 2, 2, 0},
    {"info", RESP_OP_INFO, 1, 0, 0},
    {"auth", RESP_OP_AUTH, 2, 3, 0},
    {"select", RESP_OP_SELECT, 2, 2, 0},
    {"quit", RESP_OP_QUIT, 1, 0, 0},
    {"command", RESP_OP_COMMAND, 1, 0, 0},
    {"config", RESP_OP_CONFIG, 2, 0, 0},
    {"client", RESP_OP_CLIENT, 2, 0, 0},
    {"consistency", RESP_OP_CONSISTENCY, 1, 2, 0},
    /* older spellings of SET and DEL that client libraries still send
     * (redis-py's setex/psetex/setnx, cache backends) */
    {"setex", RESP_OP_SET, 4, 4, 'e'},
    {"psetex", RESP_OP_SET, 4, 4, 'p'},
    {"setnx", RESP_OP_SET, 3, 3, 'n'},
    {"unlink", RESP_OP_DEL, 2, 0, 0},
    {"ttl", RESP_OP_TTL, 2, 2, 0},
    {"pttl", RESP_OP_TTL, 2, 2, 'm'},
    /* the operator's commands, as the native protocol's ops of the same
     * names (docs/resp.md); the admin role runs them */
    {"decommission", RESP_OP_ADMIN, 1, 1, 0},
    {"removenode", RESP_OP_ADMIN, 2, 2, 0},
    {"cleanup", RESP_OP_ADMIN, 1, 1, 0},
    {"repair", RESP_OP_ADMIN, 1, 2, 0},
    {"abort", RESP_OP_ADMIN, 1, 1, 0},
    {"join", RESP_OP_ADMIN, 1, 1, 0},
    {"snapshot", RESP_OP_ADMIN, 1, 2, 0},
    {"reloadtls", RESP_OP_ADMIN, 1, 1, 0},
    {"scan", RESP_OP_SCAN, 2, 0, 0},
    {"dbsize", RESP_OP_DBSIZE, 1, 1, 0},
};

/* Commands ringkv will not have, and why, after "unknown command". */
#define RESP__NO_TX  "no transactions"
#define RESP__NO_RMW "no atomic read-modify-write under last-write-wins"
#define RESP__NO_KEYS                                                       \
    "a whole-keyspace command would read every node at once: iterate with " \
    "SCAN"
static const struct {
    const char *name;
    const char *why;
} resp__refused[] = {
    {"exec", RESP__NO_TX},    {"discard", RESP__NO_TX},
    {"watch", RESP__NO_TX},   {"unwatch", RESP__NO_TX},
    {"incr", RESP__NO_RMW},   {"incrby", RESP__NO_RMW},
    {"decr", RESP__NO_RMW},   {"decrby", RESP__NO_RMW},
    {"append", RESP__NO_RMW}, {"getset", RESP__NO_RMW},
    {"keys", RESP__NO_KEYS},
};

#define RESP__NCMDS (sizeof(resp__cmds) / sizeof(resp__cmds[0]))

const char *resp_op_name(enum resp_op op)
{
    for (size_t i = 0; i < RESP__NCMDS; i++)
        if (resp__cmds[i].op == op)
            return resp__cmds[i].name;
    return "?";
}

static const char *const resp__levels[RESP_LEVEL_COUNT_] = {
    "ONE", "TWO", "QUORUM", "ALL", "LOCAL_ONE", "LOCAL_QUORUM", "EACH_QUORUM",
};

const char *resp_level_name(enum resp_level level)
{
    if ((unsigned)level >= RESP_LEVEL_COUNT_)
        return "?";
    return resp__levels[level];
}

int resp_level_parse(enum resp_level *out, const void *name, size_t len)
{
    struct rk_slice s = RK_SLICE(name, len);
    for (int i = 0; i < RESP_LEVEL_COUNT_; i++) {
        if (resp__is(&s, resp__levels[i])) {
            *out = (enum resp_level)i;
            return 0;
        }
    }
    return RK_EBADREQ;
}

/* A printable, quote-free, bounded copy of client bytes for messages. */
static void resp__show(char *dst, size_t cap, const struct rk_slice *s)
{
    size_t n = s->len < cap - 1 ? s->len : cap - 1;
    for (size_t i = 0; i < n; i++) {
        uint8_t c = s->p[i];
        dst[i] = (c >= 0x20 && c < 0x7f && c != '\'') ? (char)c : '?';
    }
    dst[n] = '\0';
}

static int resp__strict_i64(int64_t *out, const struct rk_slice *s)
{
    long long v;
    if (resp__parse_ll(&v, s->p, s->len) != 0)
        return -1;
    *out = v;
    return 0;
}

/* Key limits. Returns RESP_REQ_EXEC if fine, else writes the error. */
static int resp__check_key(struct resp_out *reply, const struct rk_slice *k)
{
    int rc;
    if (k->len == 0)
        rc = resp_out_error(reply, "BAD_REQUEST", "keys may not be empty");
    else if (k->len > RK_MAX_KEY)
        rc = resp_out_errorf(reply, "TOO_LARGE key of %zu bytes, limit %u",
                             k->len, RK_MAX_KEY);
    else
        return RESP_REQ_EXEC;
    return rc != 0 ? rc : RESP_REQ_ANSWERED;
}

static int resp__check_value(struct resp_out *reply, const struct rk_slice *v)
{
    if (v->len <= RK_MAX_VALUE)
        return RESP_REQ_EXEC;
    int rc = resp_out_errorf(reply, "TOO_LARGE value of %zu bytes, limit %u",
                             v->len, RK_MAX_VALUE);
    return rc != 0 ? rc : RESP_REQ_ANSWERED;
}

/* Writes an error line, returning RESP_REQ_ANSWERED or -ENOMEM. */
static int
resp__answer_err(struct resp_out *reply, const char *type, const char *msg)
{
    int rc = resp_out_error(reply, type, msg);
    return rc != 0 ? rc : RESP_REQ_ANSWERED;
}

static int resp__answered(int rc)
{
    return rc != 0 ? rc : RESP_REQ_ANSWERED;
}

static int resp__parse_set(struct resp_request *out,
                           const struct resp_cmd *cmd,
                           struct resp_out *reply)
{
    static const char syntax[] = "syntax error";
    struct resp_set_opts *so = &out->set;
    out->key = cmd->argv[1];
    out->value = cmd->argv[2];
    for (size_t i = 3; i < cmd->argc; i++) {
        const struct rk_slice *a = &cmd->argv[i];
        if (resp__is(a, "nx") || resp__is(a, "xx")) {
            enum resp_set_cond c =
                resp__is(a, "nx") ? RESP_SET_NX : RESP_SET_XX;
            if (so->cond != RESP_SET_ALWAYS && so->cond != c)
                return resp__answer_err(reply, "ERR", syntax);
            so->cond = c;
            continue;
        }
        bool ex = resp__is(a, "ex"), px = resp__is(a, "px");
        bool exat = resp__is(a, "exat"), pxat = resp__is(a, "pxat");
        if (ex || px || exat || pxat) {
            if (so->has_expire || i + 1 >= cmd->argc)
                return resp__answer_err(reply, "ERR", syntax);
            int64_t v;
            if (resp__strict_i64(&v, &cmd->argv[++i]) != 0)
                return resp__answer_err(
                    reply, "ERR", "value is not an integer or out of range");
            if (v <= 0 || ((ex || exat) && v > INT64_MAX / 1000))
                return resp__answer_err(reply, "ERR",
                                        "invalid expire time in 'set' command");
            so->has_expire = true;
            so->expire_at = exat || pxat;
            so->expire_ms = (ex || exat) ? v * 1000 : v;
            continue;
        }
        if (resp__is(a, "keepttl") || resp__is(a, "get")) {
            char name[16];
            resp__show(name, sizeof(name), a);
            int rc = resp_out_errorf(reply,
                                     "ERR SET option '%s' is not "
                                     "supported by ringkv",
                                     name);
            return resp__answered(rc);
        }
        return resp__answer_err(reply, "ERR", syntax);
    }
    int rc = resp__check_key(reply, &out->key);
    if (rc != RESP_REQ_EXEC)
        return rc;
    return resp__check_value(reply, &out->value);
}

/* SETEX key seconds value, PSETEX key ms value, SETNX key value. */
static int resp__parse_set_form(struct resp_request *out,
                                const struct resp_cmd *cmd,
                                struct resp_out *reply,
                                const struct resp__cmddef *def)
{
    out->key = cmd->argv[1];
    if (def->form == 'n') {
        out->value = cmd->argv[2];
        out->set.cond = RESP_SET_NX;
        out->set.reply_int = true;
    } else {
        int64_t v;
        out->value = cmd->argv[3];
        if (resp__strict_i64(&v, &cmd->argv[2]) != 0)
            return resp__answer_err(reply, "ERR",
                                    "value is not an integer or out of range");
        if (v <= 0 || (def->form == 'e' && v > INT64_MAX / 1000))
            return resp__answered(resp_out_errorf(
                reply, "ERR invalid expire time in '%s' command", def->name));
        out->set.has_expire = true;
        out->set.expire_ms = def->form == 'e' ? v * 1000 : v;
    }
    int rc = resp__check_key(reply, &out->key);
    if (rc != RESP_REQ_EXEC)
        return rc;
    return resp__check_value(reply, &out->value);
}

/* An unsigned 64-bit decimal, digits only (SCAN's cursor): 0 or -1. */
static int resp__strict_u64(uint64_t *out, const struct rk_slice *s)
{
    if (s->len == 0 || s->len > 20)
        return -1;
    uint64_t v = 0;
    for (size_t i = 0; i < s->len; i++) {
        uint8_t c = s->p[i];
        if (c < '0' || c > '9')
            return -1;
        uint64_t d = (uint64_t)(c - '0');
        if (v > (UINT64_MAX - d) / 10)
            return -1;
        v = v * 10 + d;
    }
    *out = v;
    return 0;
}

/* SCAN cursor [MATCH pattern] [COUNT n] [TYPE string], Redis's checks
 * and messages; TYPE names the only type ringkv has. */
static int resp__parse_scan(struct resp_request *out,
                            const struct resp_cmd *cmd,
                            struct resp_out *reply)
{
    if (resp__strict_u64(&out->scan_cursor, &cmd->argv[1]) != 0)
        return resp__answer_err(reply, "ERR", "invalid cursor");
    out->scan_match = RK_SLICE(NULL, 0);
    out->scan_count = 0;
    for (size_t i = 2; i < cmd->argc; i += 2) {
        if (i + 1 >= cmd->argc)
            return resp__answer_err(reply, "ERR", "syntax error");
        const struct rk_slice *v = &cmd->argv[i + 1];
        int64_t n;
        if (resp__is(&cmd->argv[i], "match")) {
            out->scan_match = *v;
        } else if (resp__is(&cmd->argv[i], "count")) {
            if (resp__strict_i64(&n, v) != 0)
                return resp__answer_err(
                    reply, "ERR", "value is not an integer or out of range");
            if (n < 1)
                return resp__answer_err(reply, "ERR", "syntax error");
            out->scan_count = (uint64_t)n;
        } else if (resp__is(&cmd->argv[i], "type")) {
            if (!resp__is(v, "string"))
                return resp__answer_err(
                    reply, "ERR", "unknown type name (ringkv holds strings)");
        } else {
            return resp__answer_err(reply, "ERR", "syntax error");
        }
    }
    return RESP_REQ_EXEC;
}

static int resp__answer_command(const struct resp_cmd *cmd,
                                struct resp_out *reply)
{
    if (cmd->argc == 1)
        return resp__answered(resp_out_array(reply, 0));
    const struct rk_slice *sub = &cmd->argv[1];
    if (resp__is(sub, "count"))
        return resp__answered(resp_out_int(reply, (int64_t)RESP__NCMDS));
    if (resp__is(sub, "docs") || resp__is(sub, "list"))
        return resp__answered(resp_out_array(reply, 0));
    if (resp__is(sub, "info")) {
        int rc = resp_out_array(reply, cmd->argc - 2);
        for (size_t i = 2; rc == 0 && i < cmd->argc; i++)
            rc = resp_out_null(reply);
        return resp__answered(rc);
    }
    char name[64];
    resp__show(name, sizeof(name), sub);
    return resp__answered(resp_out_errorf(
        reply, "ERR unknown subcommand '%s' of 'command'", name));
}

static int resp__answer_config(const struct resp_cmd *cmd,
                               struct resp_out *reply)
{
    static const struct {
        const char *name, *value;
    } known[] = {
        /* ringkv has no RDB snapshots and no AOF (see docs/resp.md) */
        {"save", ""},
        {"appendonly", "no"},
    };
    const struct rk_slice *sub = &cmd->argv[1];
    if (!resp__is(sub, "get")) {
        char name[64];
        resp__show(name, sizeof(name), sub);
        return resp__answered(resp_out_errorf(
            reply, "ERR CONFIG %s is not supported by ringkv", name));
    }
    if (cmd->argc < 3)
        return resp__answer_err(
            reply, "ERR", "wrong number of arguments for 'config|get' command");
    size_t n = 0;
    for (size_t i = 2; i < cmd->argc; i++)
        for (size_t k = 0; k < sizeof(known) / sizeof(known[0]); k++)
            n += resp__is(&cmd->argv[i], known[k].name);
    int rc = resp_out_array(reply, 2 * n);
    for (size_t i = 2; rc == 0 && i < cmd->argc; i++)
        for (size_t k = 0; rc == 0 && k < sizeof(known) / sizeof(known[0]); k++)
            if (resp__is(&cmd->argv[i], known[k].name)) {
                rc = resp_out_bulk(reply, known[k].name, strlen(known[k].name));
                if (rc == 0)
                    rc = resp_out_bulk(reply, known[k].value,
                                       strlen(known[k].value));
            }
    return resp__answered(rc);
}

static int resp__answer_client(const struct resp_cmd *cmd,
                               struct resp_out *reply)
{
    const struct rk_slice *sub = &cmd->argv[1];
    if (resp__is(sub, "setname") && cmd->argc == 3) {
        const struct rk_slice *nm = &cmd->argv[2];
        for (size_t i = 0; i < nm->len; i++)
            if (nm->p[i] < '!' || nm->p[i] > '~')
                return resp__answer_err(reply, "ERR",
                                        "Client names cannot contain spaces, "
                                        "newlines or special characters.");
        return resp__answered(resp_out_ok(reply));
    }
    if (resp__is(sub, "getname") && cmd->argc == 2)
        return resp__answered(resp_out_null(reply));
    if (resp__is(sub, "setinfo") && cmd->argc == 4)
        return resp__answered(resp_out_ok(reply));
    char name[64];
    resp__show(name, sizeof(name), sub);
    return resp__answered(resp_out_errorf(
        reply, "ERR unsupported CLIENT subcommand or arity '%s'", name));
}

int resp_multi_filter(bool *in_multi,
                      const struct resp_cmd *cmd,
                      struct resp_out *reply)
{
    const struct rk_slice *name = &cmd->argv[0];
    if (!*in_multi) {
        if (!resp__is(name, "multi"))
            return RESP_REQ_EXEC;
        char shown[16];
        resp__show(shown, sizeof(shown), name);
        int rc = resp_out_errorf(
            reply,
            "ERR unknown command '%s' (no transactions: each key is "
            "written on its own; what follows up to EXEC or DISCARD is not "
            "executed; a pipeline without MULTI runs the same commands)",
            shown);
        if (rc == 0)
            *in_multi = true;
        return resp__answered(rc);
    }
    if (resp__is(name, "quit"))
        return RESP_REQ_EXEC;
    if (resp__is(name, "discard")) {
        int rc = resp_out_ok(reply);
        if (rc == 0)
            *in_multi = false;
        return resp__answered(rc);
    }
    if (resp__is(name, "exec")) {
        int rc = resp_out_error(reply, "EXECABORT",
                                "Transaction discarded: ringkv has no "
                                "transactions, nothing in it was executed");
        if (rc == 0)
            *in_multi = false;
        return resp__answered(rc);
    }
    if (resp__is(name, "multi"))
        return resp__answer_err(reply, "ERR", "MULTI calls can not be nested");
    return resp__answer_err(reply, "ERR",
                            "not executed: inside a MULTI that ringkv "
                            "refused (send EXEC or DISCARD)");
}

int resp_request_parse(struct resp_request *out,
                       const struct resp_cmd *cmd,
                       struct resp_out *reply)
{
    const struct resp__cmddef *def = NULL;
    memset(out, 0, sizeof(*out));
    if (cmd->too_large) { /* a bulk over max_bulk: dropped by the parser */
        int rc =
            resp_out_errorf(reply, "TOO_LARGE argument of %zu bytes, limit %u",
                            cmd->too_large, RK_MAX_VALUE);
        return rc != 0 ? rc : RESP_REQ_ANSWERED;
    }
    int c0 = cmd->argv[0].len > 0 ? resp__lower(cmd->argv[0].p[0]) : -1;
    for (size_t i = 0; i < RESP__NCMDS; i++) {
        if (resp__cmds[i].name[0] == c0 &&
            resp__is(&cmd->argv[0], resp__cmds[i].name)) {
            def = &resp__cmds[i];
            break;
        }
    }
    if (def == NULL) {
        char name[129];
        resp__show(name, sizeof(name), &cmd->argv[0]);
        for (size_t i = 0; i < sizeof(resp__refused) / sizeof(*resp__refused);
             i++)
            if (resp__is(&cmd->argv[0], resp__refused[i].name))
                return resp__answered(
                    resp_out_errorf(reply, "ERR unknown command '%s' (%s)",
                                    name, resp__refused[i].why));
        return resp__answered(
            resp_out_errorf(reply, "ERR unknown command '%s'", name));
    }
    out->op = def->op;
    out->name = def->name;
    if (cmd->argc < (size_t)def->min_argc ||
        (def->max_argc != 0 && cmd->argc > (size_t)def->max_argc) ||
        (def->op == RESP_OP_MSET && cmd->argc % 2 == 0))
        return resp__answered(resp_out_errorf(
            reply, "ERR wrong number of arguments for '%s' command",
            def->name));

    int rc;
    int64_t v;
    switch (def->op) {
    case RESP_OP_GET:
    case RESP_OP_TTL:
        out->key = cmd->argv[1];
        out->pttl = def->form == 'm';
        return resp__check_key(reply, &out->key);
    case RESP_OP_SET:
        if (def->form == 0)
            return resp__parse_set(out, cmd, reply);
        return resp__parse_set_form(out, cmd, reply, def);
    case RESP_OP_DEL:
    case RESP_OP_EXISTS:
    case RESP_OP_MGET:
    case RESP_OP_MSET: {
        size_t stride = def->op == RESP_OP_MSET ? 2 : 1;
        out->keys = cmd->argv + 1;
        out->nkeys = (cmd->argc - 1) / stride;
        for (size_t i = 0; i < out->nkeys; i++) {
            rc = resp__check_key(reply, &out->keys[i * stride]);
            if (rc == RESP_REQ_EXEC && stride == 2)
                rc = resp__check_value(reply, &out->keys[i * 2 + 1]);
            if (rc != RESP_REQ_EXEC)
                return rc;
        }
        return RESP_REQ_EXEC;
    }
    case RESP_OP_INFO:
    case RESP_OP_ADMIN:
        out->keys = cmd->argv + 1;
        out->nkeys = cmd->argc - 1;
        return RESP_REQ_EXEC;
    case RESP_OP_SCAN:
        return resp__parse_scan(out, cmd, reply);
    case RESP_OP_DBSIZE:
        return RESP_REQ_EXEC;
    case RESP_OP_AUTH:
        if (cmd->argc == 3)
            out->user = cmd->argv[1];
        out->password = cmd->argv[cmd->argc - 1];
        return RESP_REQ_EXEC;
    case RESP_OP_CONSISTENCY:
        if (cmd->argc == 1)
            return RESP_REQ_EXEC;
        if (resp_level_parse(&out->level, cmd->argv[1].p, cmd->argv[1].len) !=
            0) {
            char name[64];
            resp__show(name, sizeof(name), &cmd->argv[1]);
            return resp__answered(resp_out_errorf(
                reply,
                "BAD_REQUEST unknown consistency level '%s' (ONE, TWO, "
                "QUORUM, ALL, LOCAL_ONE, LOCAL_QUORUM, EACH_QUORUM)",
                name));
        }
        out->has_level = true;
        return RESP_REQ_EXEC;
    case RESP_OP_PING:
        if (cmd->argc == 2)
            return resp__answered(
                resp_out_bulk(reply, cmd->argv[1].p, cmd->argv[1].len));
        return resp__answered(resp_out_simple(reply, "PONG"));
    case RESP_OP_ECHO:
        return resp__answered(
            resp_out_bulk(reply, cmd->argv[1].p, cmd->argv[1].len));
    case RESP_OP_SELECT:
        if (resp__strict_i64(&v, &cmd->argv[1]) != 0)
            return resp__answer_err(reply, "ERR",
                                    "value is not an integer or out of range");
        if (v != 0)
            return resp__answer_err(reply, "ERR", "DB index is out of range");
        return resp__answered(resp_out_ok(reply));
    case RESP_OP_QUIT:
        out->close = true;
        return resp__answered(resp_out_ok(reply));
    case RESP_OP_COMMAND:
        return resp__answer_command(cmd, reply);
    case RESP_OP_CONFIG:
        return resp__answer_config(cmd, reply);
    case RESP_OP_CLIENT:
        return resp__answer_client(cmd, reply);
    case RESP_OP_COUNT_:
        break;
    }
    return resp__answer_err(reply, "ERR", "internal error: unhandled command");
}
