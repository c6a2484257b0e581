/*
 * resp.h - the Redis protocol (RESP2) for ringkv's client port: an
 * incremental request parser, reply encoders and a command table.
 *
 * Pure code: no sockets, no clock, no globals. The daemon feeds the bytes a
 * connection delivers into a resp_parser, takes complete commands out with
 * resp_parser_next(), turns each into a resp_request with
 * resp_request_parse() (lookup, arity, SET options, CONSISTENCY level, key
 * limits; harmless commands such as PING or COMMAND are answered right there)
 * and executes only what is left. Replies are encoded into a resp_out.
 *
 * A protocol error (bad lengths, nested arrays, limits exceeded) is sticky:
 * the caller replies with resp_out_proto_error() and closes the connection.
 * See docs/resp.md for what is supported and how errors map.
 */
#ifndef RK_WIRE_RESP_H
#define RK_WIRE_RESP_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "common/rk.h"

/* ------------------------------------------------------------------------
 * Parser
 * ------------------------------------------------------------------------ */

/* Limits on what one connection may send. Exceeding one is a protocol error
 * (the connection is closed), not a per-command error -- except a bulk
 * longer than max_bulk but no longer than max_skip: its bytes are read and
 * dropped as they arrive (never buffered), and the request it belongs to
 * comes out with too_large set, for a -TOO_LARGE answer on a connection
 * that goes on (until 2026-12-06 a 16 MiB + 1 value closed the
 * connection, where docs/resp.md promised -TOO_LARGE). */
struct resp_limits {
    size_t max_bulk;    /* longest bulk string ($<n>) kept, bytes */
    size_t max_args;    /* most elements in one multibulk request */
    size_t max_inline;  /* longest inline request or header line, bytes */
    size_t max_request; /* most payload bytes (sum of bulks) in one request */
    size_t max_skip;    /* longest bulk read and dropped (Redis's 512 MB) */
};

#define RESP_LIMITS_INIT                                                       \
    {                                                                          \
        .max_bulk = RK_MAX_VALUE, .max_args = 65536, .max_inline = 64 * 1024,  \
        .max_request = 4 * (size_t)RK_MAX_VALUE, .max_skip = (size_t)512 << 20 \
    }

typedef struct resp_parser resp_parser;

/* One complete request. argv[i] points into the parser's buffer.
 * @note argv (the array) is valid until the next call of any resp_parser_*
 * function on the same parser; the bytes it points to stay valid until the
 * next resp_parser_feed(), resp_parser_reserve() or resp_parser_free(). So a
 * caller may take several pipelined commands out of one feed and keep their
 * bytes (not their argv arrays) until it feeds again. */
struct resp_cmd {
    size_t argc; /* >= 1 */
    const struct rk_slice *argv;
    /* 0, or the length of the first bulk over max_bulk: its bytes were
     * dropped and its argv entry is empty; answer -TOO_LARGE */
    size_t too_large;
};

/* Create a parser. limits may be NULL for RESP_LIMITS_INIT.
 * Returns 0 or -ENOMEM. Free with resp_parser_free(). */
int resp_parser_new(resp_parser **out, const struct resp_limits *limits);

/* Free a parser and its buffer. NULL is a no-op. */
void resp_parser_free(resp_parser *p);

/* Append len bytes (copied). Returns 0, -ENOMEM, or RK_EPROTO if the parser
 * already failed. Invalidates the bytes of earlier commands. */
int resp_parser_feed(resp_parser *p, const void *data, size_t len);

/* Zero-copy feeding (for a libuv alloc callback): get room for at least
 * `want` bytes at the end of the buffer (more while a large bulk is being
 * read: up to twice the bytes buffered, so big values arrive in few
 * reallocations), read into *out, then resp_parser_commit() what arrived.
 * Returns 0 or -ENOMEM; *out_len is the room available (>= want).
 * Invalidates the bytes of earlier commands. */
int resp_parser_reserve(uint8_t **out,
                        size_t *out_len,
                        resp_parser *p,
                        size_t want);

/* Mark n bytes written into the reserved room as received. n must not exceed
 * the room returned by the last resp_parser_reserve(). */
void resp_parser_commit(resp_parser *p, size_t n);

/* Borrowed input, for a caller that owns the bytes (net/'s connection
 * engine): buf[0..*len) holds the bytes received and not yet consumed --
 * those of the last call, minus what resp_parser_take_consumed() said,
 * plus what arrived since (buf may have moved). As resp_parser_next()
 * otherwise, except that *len may come back lower: the bytes of a bulk
 * over max_bulk are dropped (the rest moved down). A parser used so never
 * owns a buffer: do not mix with feed/reserve. */
int resp_parser_next_in(struct resp_cmd *out,
                        resp_parser *p,
                        uint8_t *buf,
                        size_t *len);

/* Borrowed input: the bytes of the requests taken out since the last call,
 * which the caller drops from the front of its buffer (after it is done
 * with their argv); the parser counts from there on. */
size_t resp_parser_take_consumed(resp_parser *p);

/* The bytes, from the first not consumed, that the request being read
 * needs at least to complete the bulk it is in; 0 when not known. */
size_t resp_parser_need(const resp_parser *p);

/* New limits, from the request after the one being read (a connection
 * that authenticated may send more). */
void resp_parser_set_limits(resp_parser *p, const struct resp_limits *limits);

/* The keys of the GETs at the front of buf[0..len) (a client's pipeline,
 * from the start of a request), up to max: a look ahead of the parser for
 * a reader that prefetches what those GETs will read. Only the canonical
 * form "*2\r\n$3\r\nGET\r\n$<n>\r\n<key>\r\n" (any case) counts;
 * it stops at anything else, so a key it returns is the argument of a
 * GET that resp_parser_next will return, in the same order, unless its
 * length is over the parser's max_bulk. Reads nothing past len. */
size_t resp_peek_gets(const uint8_t *buf,
                      size_t len,
                      struct rk_slice *keys,
                      size_t max);

/* Take the next complete request out of the buffer.
 * Returns 1 and fills *out; 0 if more bytes are needed; RK_EPROTO on a
 * protocol violation (then resp_parser_error() says what; the state is
 * sticky and every later call returns RK_EPROTO again); -ENOMEM if the
 * argument arrays could not grow (close the connection; the call may be
 * repeated, but after an inline request failed so, it returns RK_EPROTO).
 * Empty inline lines and empty multibulks ("*0", "*-1") are skipped, as
 * Redis does. */
int resp_parser_next(struct resp_cmd *out, resp_parser *p);

/* The message of the protocol error, e.g. "invalid bulk length"; "" if none.
 * @note Static or parser-owned string, valid until resp_parser_free(). */
const char *resp_parser_error(const resp_parser *p);

/* Bytes received and not yet taken out as commands. */
size_t resp_parser_pending(const resp_parser *p);

/* Heap bytes the parser holds now (buffer and argument arrays), for
 * per-connection memory accounting. It grows to fit one request (bounded
 * by the limits) plus what was fed, and shrinks back (the buffer to
 * 256 KiB) at the next feed/reserve once the big request is consumed. */
size_t resp_parser_memory(const resp_parser *p);

/* ------------------------------------------------------------------------
 * Reply encoder
 * ------------------------------------------------------------------------ */

/* A growable output buffer; plain data. Zero-initialised (RESP_OUT_INIT) is
 * an empty buffer. Encoders append and return 0 or -ENOMEM (on -ENOMEM the
 * buffer is unchanged). */
struct resp_out {
    uint8_t *p;
    size_t len;
    size_t cap;
};

#define RESP_OUT_INIT \
    {                 \
        NULL, 0, 0    \
    }

/* Release the memory; the buffer is empty and reusable afterwards. */
void resp_out_free(struct resp_out *o);

/* Make room for `more` bytes after len. 0 or -ENOMEM. */
int resp_out_reserve(struct resp_out *o, size_t more);

/* "+<s>\r\n". CR and LF inside s are replaced by spaces. */
int resp_out_simple(struct resp_out *o, const char *s);

/* "+OK\r\n". */
int resp_out_ok(struct resp_out *o);

/* "-<type> <msg>\r\n", e.g. type "ERR", "UNAVAILABLE", "TOO_LARGE". msg may
 * be NULL or "" for "-<type>\r\n". CR and LF become spaces. */
int resp_out_error(struct resp_out *o, const char *type, const char *msg);

/* printf-style error line; the text must start with the type word, e.g.
 * resp_out_errorf(o, "ERR unknown command '%s'", name). Lines longer than
 * 1 KiB are truncated. */
int resp_out_errorf(struct resp_out *o, const char *fmt, ...)
    __attribute__((format(printf, 2, 3)));

/* The typed error of a ringkv code: "-<rk_errname(err)> <detail>\r\n" with
 * rk_strerror(err) when detail is NULL. A code without a protocol name
 * (-errno) becomes "-ERR <text>". */
int resp_out_rkerr(struct resp_out *o, int err, const char *detail);

/* "-ERR Protocol error: <msg>\r\n" for a parser that failed; the caller
 * sends it and closes the connection. */
int resp_out_proto_error(struct resp_out *o, const resp_parser *p);

/* ":<v>\r\n". */
int resp_out_int(struct resp_out *o, int64_t v);

/* "$<len>\r\n<bytes>\r\n". */
int resp_out_bulk(struct resp_out *o, const void *data, size_t len);

/* "$-1\r\n" (a missing key). */
int resp_out_null(struct resp_out *o);

/* "*<n>\r\n"; the caller appends n elements. */
int resp_out_array(struct resp_out *o, size_t n);

/* ------------------------------------------------------------------------
 * Command table
 * ------------------------------------------------------------------------ */

enum resp_op {
    RESP_OP_PING,
    RESP_OP_ECHO,
    RESP_OP_GET,
    RESP_OP_SET,
    RESP_OP_DEL,
    RESP_OP_EXISTS,
    RESP_OP_MGET,
    RESP_OP_MSET,
    RESP_OP_INFO,
    RESP_OP_AUTH,
    RESP_OP_SELECT,
    RESP_OP_QUIT,
    RESP_OP_COMMAND,
    RESP_OP_CONFIG,
    RESP_OP_CLIENT,
    RESP_OP_CONSISTENCY,
    RESP_OP_TTL,   /* TTL and PTTL */
    RESP_OP_ADMIN, /* DECOMMISSION, REMOVENODE, CLEANUP, REPAIR, ABORT,
                      JOIN, SNAPSHOT: `name` says which, keys its args */
    RESP_OP_SCAN,
    RESP_OP_DBSIZE,
    RESP_OP_COUNT_
};

/* Lower-case name of an op ("get"), for metrics labels and logs. */
const char *resp_op_name(enum resp_op op);

/* Consistency levels, in DESIGN.md's order. */
enum resp_level {
    RESP_LEVEL_ONE,
    RESP_LEVEL_TWO,
    RESP_LEVEL_QUORUM,
    RESP_LEVEL_ALL,
    RESP_LEVEL_LOCAL_ONE,
    RESP_LEVEL_LOCAL_QUORUM,
    RESP_LEVEL_EACH_QUORUM,
    RESP_LEVEL_COUNT_
};

/* Upper-case name ("QUORUM"); "?" for an out-of-range value. */
const char *resp_level_name(enum resp_level level);

/* Case-insensitive name to level. 0, or RK_EBADREQ if unknown. */
int resp_level_parse(enum resp_level *out, const void *name, size_t len);

/* Condition and expiry of a SET. */
enum resp_set_cond {
    RESP_SET_ALWAYS,
    RESP_SET_NX, /* only if the key does not exist */
    RESP_SET_XX  /* only if the key exists */
};

struct resp_set_opts {
    enum resp_set_cond cond;
    bool has_expire;
    bool expire_at;    /* expire_ms is a Unix time in ms (EXAT/PXAT), else a
                          relative duration (EX/PX) */
    int64_t expire_ms; /* > 0 when has_expire */
    bool reply_int;    /* SETNX: answer 1 (written) or 0, not OK / null */
};

/* A request checked against the command table.
 * @note All slices borrow from the resp_cmd it was parsed from. */
struct resp_request {
    enum resp_op op;
    struct rk_slice key;   /* GET, SET */
    struct rk_slice value; /* SET */
    struct resp_set_opts set;
    const struct rk_slice *keys; /* DEL, EXISTS, MGET: nkeys keys; MSET:
                                    nkeys (key, value) pairs, keys[2i] and
                                    keys[2i+1]; INFO: nkeys section names;
                                    ADMIN: its arguments */
    size_t nkeys;
    struct rk_slice user;     /* AUTH with two arguments; else len 0 */
    struct rk_slice password; /* AUTH */
    bool has_level;           /* CONSISTENCY <level>; without: query */
    enum resp_level level;
    bool close; /* QUIT: close after the reply is flushed */
    bool pttl;  /* TTL: answer in milliseconds (PTTL) */
    /* SCAN cursor [MATCH pattern] [COUNT n]: the cursor (an unsigned
     * 64-bit decimal), the last MATCH (len 0: none), the last COUNT (0:
     * none given; else >= 1) */
    uint64_t scan_cursor;
    struct rk_slice scan_match;
    uint64_t scan_count;
    const char *name; /* the command as named in the table, lower case
                         ("setex"), for messages; static */
};

/* Outcome of resp_request_parse(). */
#define RESP_REQ_EXEC 0 /* the daemon executes out->op */
#define RESP_REQ_ANSWERED                            \
    1 /* a reply is in `reply`: an error or the full \
         answer of a local command */

/* Look the command up (case-insensitive), check its arity and arguments and
 * fill *out. Answers on the spot -- appending to `reply` -- unknown commands
 * (-ERR unknown command '<name>'), arity and syntax errors, keys over
 * RK_MAX_KEY (-TOO_LARGE) or empty (-BAD_REQUEST), and the commands that need
 * no data: PING, ECHO, SELECT, QUIT (+OK, out->close set), COMMAND, CONFIG
 * GET and CLIENT. GET, SET, DEL, EXISTS, MGET, MSET, INFO, AUTH,
 * CONSISTENCY, the admin commands (RESP_OP_ADMIN), SCAN and DBSIZE are
 * left to the caller. SCAN's cursor must be a decimal of at most 2^64 - 1
 * (else -ERR invalid cursor), COUNT a positive integer (else -ERR syntax
 * error or not an integer).
 * Returns RESP_REQ_EXEC, RESP_REQ_ANSWERED, or -ENOMEM (reply unchanged). */
int resp_request_parse(struct resp_request *out,
                       const struct resp_cmd *cmd,
                       struct resp_out *reply);

/* Transactions are refused, and so is what a client queues in one, so that
 * a MULTI ... EXEC (redis-py's default pipeline) writes nothing instead of
 * running its commands one by one: MULTI is answered "unknown command"
 * with the reason and sets *in_multi, the connection's state; then every
 * command up to EXEC (-EXECABORT) or DISCARD (+OK) is answered with an
 * error and not executed, except QUIT. Call before resp_request_parse.
 * Returns RESP_REQ_EXEC (not filtered: parse and run it),
 * RESP_REQ_ANSWERED, or -ENOMEM (reply unchanged). */
int resp_multi_filter(bool *in_multi,
                      const struct resp_cmd *cmd,
                      struct resp_out *reply);

#endif
