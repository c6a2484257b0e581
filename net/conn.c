/*
 * conn.c - one framed TCP connection and the end-of-turn flusher its owner
 * shares.
 *
 * Output: net__conn_queue copies a frame into the connection's chunks
 * (64 KiB blocks; a larger frame gets its own block) and puts the
 * connection on its owner's dirty list. The owner's uv_prepare (runs before
 * the loop blocks for I/O, catching frames queued by timers) and uv_check
 * (runs right after I/O callbacks) flush each dirty connection: with no
 * write in progress its chunks go to one uv_try_write (one writev, no
 * request allocated), and only what the socket did not take goes to one
 * uv_write. One written 64 KiB block is kept per connection for the next
 * turn, so a turn's frames cost no malloc. Both handles are unreferenced
 * and only active while something is dirty.
 *
 * Input: the read buffer (frame.c) grows to hold a whole frame, frames are
 * handed out as borrowed slices, and the buffer shrinks again when idle.
 *
 * Raw-stream connections (the client protocols, net.h) hand the buffer to
 * the protocol handler instead (conn_input), which consumes whole requests
 * from its front; their output is raw bytes in the same chunks. Their
 * buffer's growth past NET_INPUT_BASE is charged to the server's budget
 * (net_budget, budget.c): a read that would pass it waits on the budget's
 * list, in order, and is woken when other buffers shrink. The deadline timer,
 * idle while a raw connection is established, is its frame timeout.
 *
 * TLS (servers and peers given a context, tls.h): the socket's bytes go
 * to the connection's session (tls.c) through one read buffer its owner
 * shares, never more than NET__TLS_IN_MAX held there (the socket is not
 * read past it); the handshake runs as they arrive, its output written at
 * once; then conn_input decrypts into the input buffer as far as its room
 * (input cap, budget) allows before each call of the handler, so the
 * handler and every bound on input see plaintext as without TLS. Bytes
 * the session holds when the buffer had no room are decrypted when the
 * connection may read again (update_reading schedules it for the
 * flusher), as a socket would deliver them. Output is encrypted as it is
 * flushed: the turn's plaintext chunks become one write of ciphertext.
 * Framed connections (internode, in mutual TLS: server.c, peers.c) run
 * the same session; once TLS is done the handshake hook runs inside it,
 * its frames each in a record written at once, and the name the hook
 * establishes must be one the peer's certificate carries (tls_name_check).
 * What they receive is decrypted whole into the read buffer, whose
 * framing bounds it. No plaintext byte ever leaves a TLS connection.
 *
 * Lifetime: a connection is freed when its tcp and timer handles have
 * closed, no getaddrinfo is in flight, and no one holds a reference.
 */
#include <assert.h>
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "net/net_internal.h"

#define CONN_OF(h, field) ((net_conn *)((char *)(h)-offsetof(net_conn, field)))

static void update_reading(net_conn *c);
static void conn_input(net_conn *c);

void net__conn_reading_update(net_conn *c)
{
    update_reading(c);
}

/* ---- base: flusher and release ------------------------------------------ */

static void base_flush(struct net__base *b);

static void base_maybe_release(struct net__base *b)
{
    if (b->closing && b->handles_open == 0 && b->conns == NULL)
        b->on_released(b);
}

void net__base_handle_closed(struct net__base *b)
{
    b->handles_open--;
    base_maybe_release(b);
}

static void base_prepare_cb(uv_prepare_t *h)
{
    base_flush(h->data);
}

static void base_check_cb(uv_check_t *h)
{
    base_flush(h->data);
}

/* A flush that wrote everything lifts a back-pressure pause itself
 * (conn_flush), and may do so in the prepare phase, after the owner's
 * end-of-turn work (a node starts its commits in its check handle): the
 * frames it parses would then wait for the loop's next wakeup. An idle
 * handle, active for one turn, keeps that poll from blocking, so the check
 * phase comes at once. */
static void base_idle_cb(uv_idle_t *h)
{
    struct net__base *b = h->data;
    uv_idle_stop(h);
    b->idle_active = false;
}

static void base_kick(struct net__base *b)
{
    if (!b->idle_active && !b->closing) {
        uv_idle_start(&b->idle, base_idle_cb);
        b->idle_active = true;
    }
}

static void base_flusher_closed(uv_handle_t *h)
{
    net__base_handle_closed(h->data);
}

int net__base_init(struct net__base *b, uv_loop_t *loop)
{
    /* Neither init can fail on unix (they only fill the struct). */
    b->loop = loop;
    uv_prepare_init(loop, &b->prepare);
    uv_check_init(loop, &b->check);
    uv_idle_init(loop, &b->idle);
    b->prepare.data = b;
    b->check.data = b;
    b->idle.data = b;
    uv_unref((uv_handle_t *)&b->prepare);
    uv_unref((uv_handle_t *)&b->check);
    uv_unref((uv_handle_t *)&b->idle);
    b->handles_open += 3;
    return 0;
}

void net__base_close(struct net__base *b)
{
    b->closing = true;
    uv_close((uv_handle_t *)&b->prepare, base_flusher_closed);
    uv_close((uv_handle_t *)&b->check, base_flusher_closed);
    uv_close((uv_handle_t *)&b->idle, base_flusher_closed);
}

static void dirty_link(net_conn *c)
{
    struct net__base *b = c->base;
    if (c->dirty)
        return;
    c->dirty = true;
    c->dprev = NULL;
    c->dnext = b->dirty;
    if (b->dirty)
        b->dirty->dprev = c;
    b->dirty = c;
    if (!b->flusher_active && !b->closing) {
        uv_prepare_start(&b->prepare, base_prepare_cb);
        uv_check_start(&b->check, base_check_cb);
        b->flusher_active = true;
    }
}

static void dirty_unlink(net_conn *c)
{
    struct net__base *b = c->base;
    if (!c->dirty)
        return;
    if (c->dprev)
        c->dprev->dnext = c->dnext;
    else
        b->dirty = c->dnext;
    if (c->dnext)
        c->dnext->dprev = c->dprev;
    c->dirty = false;
    c->dprev = c->dnext = NULL;
}

/* ---- writing ------------------------------------------------------------ */

struct wreq {
    uv_write_t req;
    net_conn *c;
    size_t bytes;
    size_t n;
    struct net__chunk chunks[];
};

static void conn_parse(net_conn *c);

static void chunks_free(net_conn *c)
{
    for (size_t i = 0; i < c->nchunks; i++)
        free(c->chunks[i].p);
    c->nchunks = 0;
    c->waiting = 0;
}

/* A written chunk: kept as c's spare block when it is a standard one and
 * there is none, else freed. */
static void chunk_recycle(net_conn *c, struct net__chunk *ch)
{
    if (c->spare.p == NULL && ch->cap == NET__CHUNK_SIZE) {
        c->spare = *ch;
        c->spare.len = 0;
    } else {
        free(ch->p);
    }
    ch->p = NULL;
}

/* Lifts a back-pressure pause once the output has drained to a quarter,
 * and parses what was buffered meanwhile. Wherever that happens (a write
 * completed inside uv_write calls its write_cb in the next pending phase;
 * conn_flush may run in the prepare phase) the owner's end-of-turn work
 * for those frames runs in the check phase, after the poll: base_kick
 * keeps that poll from blocking. */
static void maybe_bp_resume(net_conn *c)
{
    struct net__base *b = c->base;
    if (c->bp_paused && c->waiting + c->inflight <= b->max_queued / 4) {
        c->bp_paused = false;
        update_reading(c);
        conn_parse(c);
        base_kick(b);
    }
}

static void write_cb(uv_write_t *req, int status)
{
    struct wreq *w = (struct wreq *)req;
    net_conn *c = w->c;
    c->inflight -= w->bytes;
    for (size_t i = 0; i < w->n; i++)
        chunk_recycle(c, &w->chunks[i]);
    free(w);
    if (status < 0) {
        if (status != UV_ECANCELED)
            net__conn_close(c, status);
        return;
    }
    maybe_bp_resume(c);
    if (c->base->on_sent && c->state == NET__READY)
        c->base->on_sent(c->base, c);
}

/* Hands chunks[0..n) to one uv_write, the first from byte off. Takes
 * ownership of the chunk memory whatever happens. */
static int
write_chunks(net_conn *c, struct net__chunk *chunks, size_t n, size_t off)
{
    uv_buf_t stack[16] = {{NULL, 0}}, *bufs = stack;
    struct wreq *w = malloc(sizeof(*w) + n * sizeof(w->chunks[0]));
    int rc = -ENOMEM;
    if (w == NULL)
        goto free_chunks;
    if (n > 16) {
        bufs = malloc(n * sizeof(*bufs));
        if (bufs == NULL)
            goto free_wreq;
    }
    w->c = c;
    w->n = n;
    w->bytes = 0;
    for (size_t i = 0; i < n; i++) {
        size_t skip = i == 0 ? off : 0;
        w->chunks[i] = chunks[i];
        w->bytes += chunks[i].len - skip;
        bufs[i] = uv_buf_init((char *)chunks[i].p + skip,
                              (unsigned)(chunks[i].len - skip));
    }
    rc = uv_write(&w->req, (uv_stream_t *)&c->tcp, bufs, (unsigned)n, write_cb);
    if (bufs != stack)
        free(bufs);
    if (rc)
        goto free_wreq;
    c->inflight += w->bytes;
    c->base->stats.writes++;
    return 0;
free_wreq:
    free(w);
free_chunks:
    for (size_t i = 0; i < n; i++)
        free(chunks[i].p);
    return rc;
}

/* Sends the ciphertext c's session has made (handshake messages, alerts,
 * records), in one write after everything before it. */
static int tls_out(net_conn *c)
{
    size_t n = net__tls_out_pending(c->tls);
    if (n == 0)
        return 0;
    struct net__chunk ch = {malloc(n), 0, n};
    if (ch.p == NULL)
        return -ENOMEM;
    ch.len = net__tls_out_take(c->tls, ch.p, n);
    if (ch.len == 0) {
        free(ch.p);
        return 0;
    }
    return write_chunks(c, &ch, 1, 0);
}

/* A TLS connection's flush: the plaintext waiting is encrypted and goes
 * as one write. */
static int tls_flush(net_conn *c)
{
    int rc = 0;
    size_t n = c->nchunks;
    c->nchunks = 0;
    c->waiting = 0;
    for (size_t i = 0; i < n; i++) {
        if (rc == 0)
            rc = net__tls_write(c->tls, c->chunks[i].p, c->chunks[i].len);
        chunk_recycle(c, &c->chunks[i]);
    }
    if (rc == 0)
        rc = tls_out(c);
    return rc;
}

static int conn_flush(net_conn *c)
{
    if (c->tls != NULL) /* no plaintext ever goes out of a TLS conn */
        return c->nchunks && net__tls_done(c->tls) ? tls_flush(c) : 0;
    if (c->nchunks == 0)
        return 0;
    size_t n = c->nchunks;
    c->nchunks = 0;
    c->waiting = 0;
    size_t first = 0, off = 0;
    if (c->inflight == 0 && n <= 16) { /* nothing queued in libuv */
        uv_buf_t bufs[16];
        for (size_t i = 0; i < n; i++)
            bufs[i] =
                uv_buf_init((char *)c->chunks[i].p, (unsigned)c->chunks[i].len);
        int w = uv_try_write((uv_stream_t *)&c->tcp, bufs, (unsigned)n);
        if (w < 0 && w != UV_EAGAIN && w != UV_ENOSYS) {
            for (size_t i = 0; i < n; i++)
                free(c->chunks[i].p);
            return w;
        }
        size_t done = w > 0 ? (size_t)w : 0;
        while (first < n && done >= c->chunks[first].len) {
            done -= c->chunks[first].len;
            chunk_recycle(c, &c->chunks[first]);
            first++;
        }
        off = done;
        if (first == n) {
            c->base->stats.writes++; /* else write_chunks counts it */
            /* no write_cb will come to lift a back-pressure pause */
            if (c->state == NET__READY && c->bp_paused)
                maybe_bp_resume(c);
            if (c->base->on_sent && c->state == NET__READY)
                c->base->on_sent(c->base, c);
            return 0;
        }
    }
    return write_chunks(c, c->chunks + first, n - first, off);
}

static void base_flush(struct net__base *b)
{
    net_conn *c;
    while ((c = b->dirty) != NULL) {
        dirty_unlink(c);
        if (c->tls_again) {
            c->tls_again = false;
            conn_input(c);
            if (c->dirty)
                continue; /* linked again: it comes back */
        }
        if (c->state == NET__CLOSING || c->hold || c->state == NET__RESOLVING ||
            c->state == NET__CONNECTING)
            continue;
        if (c->finishing && c->requests == 0 && !c->in_parse) {
            net__conn_close(c, 0); /* writes what is queued, then closes */
            continue;
        }
        int rc = conn_flush(c);
        if (rc)
            net__conn_close(c, rc);
    }
    if (b->flusher_active) {
        uv_prepare_stop(&b->prepare);
        uv_check_stop(&b->check);
        b->flusher_active = false;
    }
}

/* Writes one frame at once, ahead of anything queued (handshakes; in a
 * TLS record of its own on a TLS connection). */
static int write_now(net_conn *c, const uint8_t *p, size_t len)
{
    if (c->tls != NULL) {
        uint8_t f[NET_FRAME_HDR + NET_HANDSHAKE_MAX];
        if (len > NET_HANDSHAKE_MAX)
            return RK_EINTERNAL;
        net__be32_put(f, (uint32_t)len);
        memcpy(f + NET_FRAME_HDR, p, len);
        c->base->stats.frames_out++;
        c->base->stats.bytes_out += NET_FRAME_HDR + len;
        int rc = net__tls_write(c->tls, f, NET_FRAME_HDR + len);
        return rc ? rc : tls_out(c);
    }
    struct net__chunk ch = {malloc(NET_FRAME_HDR + len), NET_FRAME_HDR + len,
                            NET_FRAME_HDR + len};
    if (ch.p == NULL)
        return -ENOMEM;
    net__be32_put(ch.p, (uint32_t)len);
    memcpy(ch.p + NET_FRAME_HDR, p, len);
    c->base->stats.frames_out++;
    c->base->stats.bytes_out += ch.len;
    return write_chunks(c, &ch, 1, 0);
}

/* Appends a frame (framed: its length prefix, then hdr and body) or raw
 * bytes (body only) to c's chunks. */
static int chunk_append(net_conn *c,
                        bool framed,
                        const uint8_t *hdr,
                        size_t hdr_len,
                        struct rk_slice body)
{
    size_t pre = framed ? NET_FRAME_HDR : 0;
    size_t need = pre + hdr_len + body.len;
    struct net__chunk *last = c->nchunks ? &c->chunks[c->nchunks - 1] : NULL;
    if (last == NULL || last->cap - last->len < need) {
        if (c->nchunks == c->chunks_cap) {
            size_t cap = c->chunks_cap ? c->chunks_cap * 2 : 8;
            struct net__chunk *n = realloc(c->chunks, cap * sizeof(*n));
            if (n == NULL)
                return -ENOMEM;
            c->chunks = n;
            c->chunks_cap = cap;
        }
        size_t cap = need > NET__CHUNK_SIZE ? need : NET__CHUNK_SIZE;
        uint8_t *p;
        if (cap == NET__CHUNK_SIZE && c->spare.p) {
            p = c->spare.p;
            c->spare.p = NULL;
        } else {
            p = malloc(cap);
        }
        if (p == NULL)
            return -ENOMEM;
        last = &c->chunks[c->nchunks++];
        last->p = p;
        last->len = 0;
        last->cap = cap;
    }
    uint8_t *p = last->p + last->len;
    if (framed)
        net__be32_put(p, (uint32_t)(hdr_len + body.len));
    if (hdr_len)
        memcpy(p + pre, hdr, hdr_len);
    if (body.len)
        memcpy(p + pre + hdr_len, body.p, body.len);
    last->len += need;
    return 0;
}

/* Queues what chunk_append took: counted, flushed at the end of the turn
 * (or now, without batching), reading paused past half of max_queued. */
static int conn_enqueue(net_conn *c,
                        bool framed,
                        const uint8_t *hdr,
                        size_t hdr_len,
                        struct rk_slice body)
{
    struct net__base *b = c->base;
    size_t need = (framed ? NET_FRAME_HDR : 0) + hdr_len + body.len;
    int rc = chunk_append(c, framed, hdr, hdr_len, body);
    if (rc)
        return rc;
    c->waiting += need;
    b->stats.frames_out++;
    b->stats.bytes_out += need;
    if (b->no_batching && c->state == NET__READY && !c->hold) {
        rc = conn_flush(c);
        if (rc)
            return rc; /* the frame is gone; the caller sees the error */
    } else {
        dirty_link(c);
    }
    if (b->pause_on_bp && !c->bp_paused &&
        c->waiting + c->inflight > b->max_queued / 2) {
        c->bp_paused = true;
        b->stats.read_pauses++;
        update_reading(c);
    }
    return 0;
}

int net__conn_queue(net_conn *c,
                    const uint8_t *hdr,
                    size_t hdr_len,
                    struct rk_slice body)
{
    struct net__base *b = c->base;
    if (c->state == NET__CLOSING)
        return RK_ECLOSED;
    if (body.len > b->max_frame - hdr_len)
        return RK_ETOOLARGE;
    size_t need = NET_FRAME_HDR + hdr_len + body.len;
    size_t queued = c->waiting + c->inflight;
    if (queued > 0 &&
        (queued >= b->max_queued || need > b->max_queued - queued)) {
        b->stats.overloaded++;
        return RK_EOVERLOADED;
    }
    return conn_enqueue(c, true, hdr, hdr_len, body);
}

/* ---- reading ------------------------------------------------------------ */

static void alloc_cb(uv_handle_t *h, size_t suggested, uv_buf_t *buf);
static void read_cb(uv_stream_t *s, ssize_t nread, const uv_buf_t *buf);

static void frame_timer_sync(net_conn *c, bool restart);

/* A raw connection reads unless the peer is done, it is finishing, it
 * waits for the budget or has max_requests in flight. */
static bool raw_wants_input(const net_conn *c)
{
    const struct net__base *b = c->base;
    return !c->eof && !c->finishing && !c->budget_wait &&
           (b->max_requests == 0 || c->requests < b->max_requests) &&
           (c->tls == NULL || net__tls_in_pending(c->tls) < NET__TLS_IN_MAX);
}

static void update_reading(net_conn *c)
{
    bool want = (c->state == NET__HANDSHAKE || c->state == NET__READY) &&
                !c->user_paused && !c->bp_paused &&
                (c->base->on_input == NULL || raw_wants_input(c));
    if (want != c->reading) {
        if (want) {
            if (uv_read_start((uv_stream_t *)&c->tcp, alloc_cb, read_cb) == 0)
                c->reading = true;
        } else {
            uv_read_stop((uv_stream_t *)&c->tcp);
            c->reading = false;
        }
    }
    if (c->base->on_input)
        frame_timer_sync(c, false);
    /* what the session holds is read as a socket's bytes would be */
    if (want && c->tls && c->base->on_input && c->state == NET__READY &&
        !c->in_parse && !c->tls_again && net__tls_has_input(c->tls)) {
        c->tls_again = true;
        dirty_link(c);
        base_kick(c->base);
    }
}

static void become_ready(net_conn *c)
{
    c->state = NET__READY;
    c->hold = false;
    c->rbuf.max_frame = c->base->max_frame;
    uv_timer_stop(&c->timer);
    update_reading(c);
    c->base->on_ready(c->base, c);
    if (c->state == NET__READY && c->nchunks > 0)
        dirty_link(c);
}

/* Makes this side's next handshake frame (answering peer, which may be
 * empty), keeps it in hs_sent for the check of the reply, and sends it. */
static int handshake_send(net_conn *c, struct rk_slice peer)
{
    struct net__base *b = c->base;
    size_t len = 0;
    int rc = b->hs.make(b->hs.arg, c->dialed, peer, c->hs_sent,
                        sizeof(c->hs_sent), &len);
    if (rc == 0 && len > sizeof(c->hs_sent))
        rc = RK_EINTERNAL;
    if (rc == 0)
        c->hs_sent_len = len;
    if (rc == 0)
        rc = write_now(c, c->hs_sent, len);
    return rc;
}

/* c refused its peer: reported to the owner (counting is the caller's). */
static void tls_report(net_conn *c, enum net_tls_fail f, const char *why)
{
    if (c->base->on_tls_fail)
        c->base->on_tls_fail(c->base, c, f, why);
}

/* A TLS connection's peer authenticated in the hook as c->name: its
 * certificate must name that node, or anyone holding a certificate of the
 * CA and the secret could speak for any node. */
static int tls_name_check(net_conn *c)
{
    char why[300];
    if (net__tls_peer_is(c->tls, c->name, why, sizeof(why)))
        return 0;
    tls_report(c, NET_TLS_FAIL_NAME, why);
    return RK_EAUTH;
}

/* One frame received during the handshake. The connecting side sent its
 * first frame at the start: what comes back is checked against it, and its
 * last frame answers it. The accepting side answers the first frame and
 * checks the second against its answer. */
static int handshake_step(net_conn *c, struct rk_slice frame)
{
    struct net__base *b = c->base;
    struct rk_slice sent = {c->hs_sent, c->hs_sent_len};
    int rc;
    c->name[0] = '\0';
    if (!c->outbound && c->hs_sent_len == 0) {
        rc = handshake_send(c, frame);
        return rc > 0 ? RK_EAUTH : rc;
    }
    rc = b->hs.check(b->hs.arg, c->dialed, frame, sent, c->name,
                     sizeof(c->name));
    c->name[sizeof(c->name) - 1] = '\0';
    if (rc == 0 && c->tls != NULL)
        rc = tls_name_check(c);
    if (rc == 0 && c->outbound)
        rc = handshake_send(c, frame);
    if (rc > 0)
        rc = RK_EAUTH;
    if (rc == 0)
        become_ready(c);
    return rc;
}

static void conn_input(net_conn *c);

/* Shows the base's on_peek the whole frames held from byte *at of the
 * read buffer on, at most NET_PEEK_MAX, before any of them is handed out;
 * *at moves past them. Returns how many. */
static size_t conn_peek(net_conn *c, size_t *at)
{
    struct rk_slice f[NET_PEEK_MAX];
    size_t n = 0, used;
    while (n < NET_PEEK_MAX && *at < c->rbuf.len &&
           net_frame_next(&f[n], &used, c->rbuf.p + *at, c->rbuf.len - *at,
                          c->rbuf.max_frame) == 1) {
        *at += used;
        n++;
    }
    if (n > 0)
        c->base->on_peek(c->base, c, f, n);
    return n;
}

static void conn_parse(net_conn *c)
{
    struct net__base *b = c->base;
    if (b->on_input) {
        conn_input(c);
        return;
    }
    if (c->in_parse)
        return;
    c->in_parse = true;
    /* the look ahead keeps half a window of frames shown before their turn
     * (one read brings hundreds from a busy peer) */
    bool peek = b->on_peek && c->state == NET__READY;
    size_t peek_at = c->rbuf.off, ahead = 0;
    while (c->state != NET__CLOSING && !c->user_paused && !c->bp_paused) {
        struct rk_slice f;
        if (peek && ahead <= NET_PEEK_MAX / 2) {
            if (peek_at < c->rbuf.off)
                peek_at = c->rbuf.off;
            ahead += conn_peek(c, &peek_at);
        }
        int rc = net__rbuf_next(&c->rbuf, &f);
        if (rc == 0)
            break;
        if (rc < 0) {
            b->stats.oversize++;
            net__conn_close(c, rc);
            break;
        }
        b->stats.frames_in++;
        ahead -= ahead > 0;
        if (c->state == NET__HANDSHAKE) {
            rc = handshake_step(c, f);
            if (rc) {
                b->stats.handshake_failed++;
                net__conn_close(c, rc);
                break;
            }
            continue;
        }
        rc = b->on_frame(b, c, f);
        if (rc) {
            net__conn_close(c, rc);
            break;
        }
    }
    c->in_parse = false;
    net__rbuf_compact(&c->rbuf);
}

/* ---- raw-stream input ---------------------------------------------------- */

static void frame_timeout_cb(uv_timer_t *t)
{
    net_conn *c = CONN_OF(t, timer);
    c->base->stats.frame_timeouts++;
    net__conn_close(c, RK_ETIMEOUT);
}

/* The frame timer runs while part of a request is held and c waits for
 * its bytes (reading, or waiting for the budget: a budget spent on
 * requests that never complete is given back by their timeouts); restart:
 * a byte arrived. With frame_deadline a byte does not restart it: it runs
 * from the first byte held until the request is consumed whole (or c
 * stops waiting for bytes: paused, answering). */
static void frame_timer_sync(net_conn *c, bool restart)
{
    struct net__base *b = c->base;
    if (b->frame_timeout_ms == 0 || c->state != NET__READY)
        return;
    bool held = c->rbuf.len > c->rbuf.off;
    if (!held || (!c->reading && !c->budget_wait)) {
        uv_timer_stop(&c->timer);
        return;
    }
    if ((restart && !b->frame_deadline) ||
        !uv_is_active((uv_handle_t *)&c->timer))
        uv_timer_start(&c->timer, frame_timeout_cb, b->frame_timeout_ms, 0);
}

/* An empty buffer past NET_INPUT_BASE is given back (and its charge). */
static void raw_shrink(net_conn *c)
{
    if (c->rbuf.len == c->rbuf.off) {
        c->rbuf.len = c->rbuf.off = 0;
        if (c->rbuf.cap > NET_INPUT_BASE)
            net__rbuf_free(&c->rbuf);
    }
    net__budget_set(c, c->rbuf.cap);
}

static void alloc_raw(net_conn *c, uv_buf_t *buf);
static void raw_no_room(net_conn *c);
static bool raw_wants_input(const net_conn *c);

static void tls_failed(net_conn *c, int rc);

/* Decrypts what c's session holds into its input buffer. A raw-stream
 * connection's buffer takes as much as its room allows (*stuck: bytes wait
 * that found no room; the handler makes room, or conn_input decides as a
 * read with no room would). A framed one's grows as it needs (its framing
 * bounds it: conn_parse refuses a frame over max_frame from its header,
 * and the socket is read at most NET__TLS_IN_MAX at a time). Returns 0, 1
 * when c closed, 2 when the peer ended the session (close_notify: what
 * came before it is taken, then c ends as at the end of a plaintext
 * stream). A failure before the handshake hook is done is a TLS refusal:
 * in TLS 1.3 a client learns that the server refused its certificate only
 * here, from the alert. */
static int tls_decrypt(net_conn *c, bool *stuck)
{
    *stuck = false;
    while (net__tls_has_input(c->tls)) {
        uint8_t *p = NULL;
        size_t len = 0, n = 0;
        if (c->base->on_input) {
            uv_buf_t buf;
            alloc_raw(c, &buf);
            if (buf.len == 0) {
                *stuck = true;
                break;
            }
            p = (uint8_t *)buf.base;
            len = buf.len;
        } else if (net__rbuf_reserve(&c->rbuf, &p, &len) != 0) {
            net__conn_close(c, -ENOMEM);
            return 1;
        }
        int rc = net__tls_read(c->tls, p, len, &n);
        if (rc == 1)
            return 2;
        if (rc && c->state == NET__HANDSHAKE) {
            tls_failed(c, rc);
            return 1;
        }
        if (rc) {
            net__conn_close(c, rc);
            return 1;
        }
        if (n == 0)
            break; /* the rest of a record is still on its way */
        net__rbuf_commit(&c->rbuf, n);
    }
    int rc = tls_out(c); /* a TLS 1.3 key update's answer, say */
    if (rc) {
        net__conn_close(c, rc);
        return 1;
    }
    return 0;
}

/* tls_decrypt for a raw-stream connection: a close_notify is a half-close
 * (what came is answered, then c closes). Returns 0, or 1 when c closed. */
static int tls_decrypt_raw(net_conn *c, bool *stuck)
{
    int rc = tls_decrypt(c, stuck);
    if (rc == 2)
        c->eof = true;
    return rc == 1;
}

/* c's session failed (rc): counted, reported with its reason, closed. */
static void tls_failed(net_conn *c, int rc)
{
    char why[300];
    enum net_tls_fail f = net__tls_why(c->tls, why, sizeof(why));
    c->base->stats.handshake_failed++;
    tls_report(c, f, why);
    net__conn_close(c, rc);
}

/* Ciphertext arrived during c's TLS handshake: advance it, send what it
 * made (also an alert that refuses the peer), and once done announce c or,
 * with the handshake hook, begin that inside TLS (the connecting side
 * speaks first). */
static void tls_handshake(net_conn *c)
{
    struct net__base *b = c->base;
    int rc = net__tls_handshake(c->tls);
    int wrc = tls_out(c);
    if (rc < 0) {
        tls_failed(c, rc);
        return;
    }
    if (wrc) {
        net__conn_close(c, wrc);
        return;
    }
    if (rc != 1)
        return;
    if (!b->has_hs) {
        become_ready(c);
        return;
    }
    if (c->outbound && (rc = handshake_send(c, (struct rk_slice){NULL, 0})))
        net__conn_close(c, rc > 0 ? RK_EINTERNAL : rc);
}

/* Hands what c holds to the handler until it takes no more. A finishing
 * connection (EOF seen, or net_conn_finish) is closed by the flusher once
 * no request is in flight. */
static void conn_input(net_conn *c)
{
    struct net__base *b = c->base;
    if (c->in_parse) {
        c->parse_again = true;
        return;
    }
    c->in_parse = true;
    do {
        c->parse_again = false;
        if (c->state != NET__READY || c->no_input || c->user_paused ||
            c->bp_paused)
            break;
        bool stuck = false;
        if (c->tls && tls_decrypt_raw(c, &stuck) != 0)
            break; /* closed */
        size_t held = c->rbuf.len - c->rbuf.off;
        struct net_input in = {held ? c->rbuf.p + c->rbuf.off : NULL,
                               held,
                               c->input_cap,
                               0,
                               0,
                               c->eof};
        int rc = b->on_input(b, c, &in);
        if (rc == 0 && (in.len > held || in.consumed > in.len))
            rc = RK_EINTERNAL;
        if (rc) {
            net__conn_close(c, rc);
            break;
        }
        c->rbuf.len = c->rbuf.off + in.len;
        c->rbuf.off += in.consumed;
        c->need = in.need;
        b->stats.frames_in += in.consumed > 0;
        /* a deadline belongs to the request it started with: what is held
         * after a whole one is the next one's, timed from now */
        if (in.consumed > 0 && b->frame_deadline)
            uv_timer_stop(&c->timer);
        /* room was made: the session may hold more */
        if (c->tls && in.consumed > 0 && net__tls_has_input(c->tls))
            c->parse_again = true;
        /* nothing taken from a full buffer, bytes waiting: as a read that
         * finds no room, unless the room grows for the need just told */
        if (c->tls && in.consumed == 0 && stuck && raw_wants_input(c)) {
            size_t had = c->rbuf.len;
            if (tls_decrypt_raw(c, &stuck) != 0)
                break;
            if (c->rbuf.len > had) {
                c->parse_again = true;
            } else if (stuck) {
                raw_no_room(c);
                break;
            }
        }
    } while (c->parse_again);
    c->in_parse = false;
    if (c->state != NET__READY)
        return;
    raw_shrink(c);
    if (c->eof)
        c->finishing = true;
    if (c->finishing)
        dirty_link(c);
    update_reading(c);
}

static void alloc_raw(net_conn *c, uv_buf_t *buf)
{
    uint8_t *p = NULL;
    size_t len = 0;
    size_t cap = net__rbuf_raw_target(&c->rbuf, c->need, c->input_cap);
    size_t allowed = net__budget_cap_allowed(c);
    if (cap > c->rbuf.cap && cap > allowed)
        cap = allowed > c->rbuf.cap ? allowed : c->rbuf.cap;
    if (net__rbuf_reserve_cap(&c->rbuf, cap, c->input_cap, &p, &len) != 0)
        len = 0;
    net__budget_set(c, c->rbuf.cap);
    if (len > UINT32_MAX)
        len = UINT32_MAX;
    *buf = uv_buf_init(len ? (char *)p : NULL, (unsigned)len);
}

/* No room to read into: the connection's cap is reached without a whole
 * request (RK_ETOOLARGE), the budget is spent (wait for it), or memory. */
static void raw_no_room(net_conn *c)
{
    struct net__base *b = c->base;
    uv_read_stop((uv_stream_t *)&c->tcp);
    c->reading = false;
    if (c->rbuf.len - c->rbuf.off >= c->input_cap) {
        b->stats.oversize++;
        net__conn_close(c, RK_ETOOLARGE);
    } else if (b->budget != NULL && net__budget_cap_allowed(c) <= c->rbuf.cap) {
        net__budget_wait(c);
        frame_timer_sync(c, false);
    } else {
        net__conn_close(c, -ENOMEM);
    }
}

static void alloc_cb(uv_handle_t *h, size_t suggested, uv_buf_t *buf)
{
    net_conn *c = CONN_OF(h, tcp);
    uint8_t *p = NULL;
    size_t len = 0;
    (void)suggested;
    if (c->tls) {
        struct net__base *b = c->base;
        size_t held = net__tls_in_pending(c->tls);
        if (b->tls_rd == NULL)
            b->tls_rd = malloc(NET__TLS_IN_MAX);
        len = held < NET__TLS_IN_MAX ? NET__TLS_IN_MAX - held : 0;
        *buf = uv_buf_init(b->tls_rd && len ? (char *)b->tls_rd : NULL,
                           b->tls_rd ? (unsigned)len : 0);
        return;
    }
    if (c->base->on_input) {
        alloc_raw(c, buf);
        return;
    }
    if (net__rbuf_reserve(&c->rbuf, &p, &len) != 0) {
        *buf = uv_buf_init(NULL, 0); /* read_cb gets UV_ENOBUFS */
        return;
    }
    if (len > UINT32_MAX)
        len = UINT32_MAX;
    *buf = uv_buf_init((char *)p, (unsigned)len);
}

/* read_cb of a TLS connection: the bytes go to its session. */
static void tls_read(net_conn *c, ssize_t nread, const uv_buf_t *buf)
{
    struct net__base *b = c->base;
    bool raw = b->on_input != NULL;
    if (nread == 0)
        return;
    if (nread < 0 && !net__tls_done(c->tls)) {
        /* closed in the TLS handshake: nothing to answer */
        b->stats.handshake_failed++;
        if (nread == UV_EOF)
            tls_report(c, NET_TLS_FAIL_CLOSED,
                       "closed during the TLS handshake (a peer that does "
                       "not speak TLS, or refused it)");
        net__conn_close(c, nread == UV_EOF ? RK_EAUTH : (int)nread);
        return;
    }
    if (nread == UV_EOF && !raw) { /* as a plaintext stream's end */
        net__conn_close(c, 0);
        return;
    }
    if (nread == UV_EOF) { /* as raw: answer what was sent, then close */
        c->reading = false;
        c->eof = true;
        conn_input(c);
        return;
    }
    if (nread < 0) {
        net__conn_close(c, nread == UV_ENOBUFS ? -ENOMEM : (int)nread);
        return;
    }
    b->stats.bytes_in += (uint64_t)nread;
    int rc = net__tls_feed(c->tls, (const uint8_t *)buf->base, (size_t)nread);
    if (rc) {
        net__conn_close(c, rc);
        return;
    }
    if (!net__tls_done(c->tls)) {
        tls_handshake(c);
        if (c->state == NET__CLOSING || !net__tls_done(c->tls))
            return;
    }
    if (!raw) {
        bool stuck;
        rc = tls_decrypt(c, &stuck);
        if (rc != 1)
            conn_parse(c);
        if (rc == 2)
            net__conn_close(c, 0);
        return;
    }
    if (c->state != NET__READY)
        return;
    conn_input(c);
    frame_timer_sync(c, true);
}

static void read_input(net_conn *c, ssize_t nread, const uv_buf_t *buf);

/* What one read brought is worked on under one reading of the clocks
 * (rk_clock_hold, common/rk.h): a pipeline of requests or a batch of
 * answers costs one clock_gettime, not one or three each. */
static void read_cb(uv_stream_t *s, ssize_t nread, const uv_buf_t *buf)
{
    rk_clock_hold();
    read_input(CONN_OF(s, tcp), nread, buf);
    rk_clock_release();
}

static void read_input(net_conn *c, ssize_t nread, const uv_buf_t *buf)
{
    bool raw = c->base->on_input != NULL;
    if (c->tls) {
        tls_read(c, nread, buf);
        return;
    }
    if (raw && nread == UV_ENOBUFS) {
        raw_no_room(c);
        return;
    }
    if (raw && nread == UV_EOF) {
        /* A half-close: what it sent is answered, then c closes. libuv
         * stopped reading. */
        c->reading = false;
        c->eof = true;
        conn_input(c);
        return;
    }
    if (nread < 0) {
        net__conn_close(c, nread == UV_EOF ? 0 : (int)nread);
        return;
    }
    if (nread == 0)
        return;
    net__rbuf_commit(&c->rbuf, (size_t)nread);
    c->base->stats.bytes_in += (uint64_t)nread;
    conn_parse(c);
    if (raw)
        frame_timer_sync(c, true);
}

/* ---- lifetime ----------------------------------------------------------- */

net_conn *net__conn_new(struct net__base *b, int *err)
{
    net_conn *c = calloc(1, sizeof(*c));
    if (c == NULL) {
        *err = -ENOMEM;
        return NULL;
    }
    c->base = b;
    c->rbuf.max_frame = b->max_frame;
    c->input_cap = b->input_cap;
    *err = uv_tcp_init(b->loop, &c->tcp);
    if (*err) {
        free(c);
        return NULL;
    }
    uv_timer_init(b->loop, &c->timer); /* cannot fail on unix */
    c->tcp_inited = true;
    c->handles_open = 2;
    c->state = NET__CONNECTING;
    c->next = b->conns;
    if (b->conns)
        b->conns->prev = c;
    b->conns = c;
    return c;
}

int net__conn_start(net_conn *c)
{
    struct net__base *b = c->base;
    uv_tcp_nodelay(&c->tcp, 1);
    if (b->has_hs || c->tls) {
        c->state = NET__HANDSHAKE;
        c->hold = c->outbound;
        /* Until authenticated, a peer may send only small frames. */
        if (b->has_hs)
            c->rbuf.max_frame = NET_HANDSHAKE_MAX;
        /* the connecting side speaks first: TLS's ClientHello (the hook's
         * first frame follows once TLS is done), or the hook's */
        if (c->outbound && c->tls) {
            int rc = net__tls_handshake(c->tls);
            if (rc == 0)
                rc = tls_out(c);
            if (rc)
                return rc > 0 ? RK_EINTERNAL : rc;
        } else if (c->outbound) {
            int rc = handshake_send(c, (struct rk_slice){NULL, 0});
            if (rc)
                return rc > 0 ? RK_EINTERNAL : rc;
        }
        update_reading(c);
    } else {
        become_ready(c);
    }
    return 0;
}

static void deadline_cb(uv_timer_t *t)
{
    net_conn *c = CONN_OF(t, timer);
    if (c->state == NET__HANDSHAKE)
        c->base->stats.handshake_failed++;
    if (c->state == NET__HANDSHAKE && c->tls && !net__tls_done(c->tls))
        tls_report(c, NET_TLS_FAIL_TIMEOUT,
                   "the TLS handshake did not finish in time");
    net__conn_close(c, RK_ETIMEOUT);
}

void net__conn_deadline(net_conn *c, uint64_t ms)
{
    uv_timer_start(&c->timer, deadline_cb, ms, 0);
}

void net__conn_maybe_free(net_conn *c)
{
    struct net__base *b = c->base;
    if (c->handles_open > 0 || c->refs > 0 || c->gai_busy)
        return;
    if (c->prev)
        c->prev->next = c->next;
    else
        b->conns = c->next;
    if (c->next)
        c->next->prev = c->prev;
    chunks_free(c);
    free(c->chunks);
    free(c->spare.p);
    net__rbuf_free(&c->rbuf);
    net__tls_free(c->tls);
    free(c);
    base_maybe_release(b);
}

static void handle_closed(uv_handle_t *h)
{
    net_conn *c = h->data;
    if (--c->handles_open > 0)
        return;
    if (c->base->on_input) { /* nothing reads into it any more */
        net__rbuf_free(&c->rbuf);
        net__budget_set(c, 0);
    }
    c->base->stats.conns_closed++;
    c->refs++; /* on_closed may drop the owner's last reference */
    c->base->on_closed(c->base, c, c->close_err);
    c->refs--;
    net__conn_maybe_free(c);
}

static void close_handles(net_conn *c)
{
    if (c->handles_closing)
        return;
    c->handles_closing = true;
    c->tcp.data = c;
    c->timer.data = c;
    uv_close((uv_handle_t *)&c->tcp, handle_closed);
    uv_close((uv_handle_t *)&c->timer, handle_closed);
}

static void shutdown_cb(uv_shutdown_t *req, int status)
{
    net_conn *c = CONN_OF(req, shutdown);
    (void)status;
    close_handles(c);
}

/* A graceful close whose output does not drain (the peer stopped reading)
 * is cut short: closing the handles cancels the writes and the shutdown. */
static void linger_cb(uv_timer_t *t)
{
    close_handles(CONN_OF(t, timer));
}

/* A TLS connection closing gracefully tells its peer (close_notify). */
static int tls_close_notify(net_conn *c)
{
    if (c->tls == NULL)
        return 0;
    net__tls_shutdown(c->tls);
    return tls_out(c);
}

void net__conn_close(net_conn *c, int err)
{
    if (c->state == NET__CLOSING)
        return;
    bool graceful = err == 0 && c->state == NET__READY;
    /* a raw connection closed by its server's close: what is ready goes
     * out first, as far as the socket takes it at once */
    if (err == RK_ECLOSED && c->base->on_input && c->state == NET__READY)
        (void)conn_flush(c); /* a write of the rest is cancelled below */
    net__budget_unwait(c);
    c->state = NET__CLOSING;
    c->close_err = err;
    dirty_unlink(c);
    uv_timer_stop(&c->timer);
    if (c->reading) {
        uv_read_stop((uv_stream_t *)&c->tcp);
        c->reading = false;
    }
    if (c->gai_busy)
        uv_cancel((uv_req_t *)&c->gai);
    c->base->on_closing(c->base, c, err);
    if (graceful && conn_flush(c) == 0 && tls_close_notify(c) == 0 &&
        uv_shutdown(&c->shutdown, (uv_stream_t *)&c->tcp, shutdown_cb) == 0) {
        uv_timer_start(&c->timer, linger_cb, c->base->linger_ms, 0);
        return;
    }
    chunks_free(c);
    close_handles(c);
}

/* ---- public connection calls -------------------------------------------- */

int net_conn_send(net_conn *c, struct rk_slice frame)
{
    if (c->state != NET__READY)
        return RK_ECLOSED;
    return net__conn_queue(c, NULL, 0, frame);
}

int net_conn_reply(net_conn *c, uint64_t id, struct rk_slice payload)
{
    uint8_t hdr[NET_RPC_HDR];
    if (c->state != NET__READY)
        return RK_ECLOSED;
    hdr[0] = NET_RPC_RESPONSE;
    net__be64_put(hdr + 1, id);
    return net__conn_queue(c, hdr, sizeof(hdr), payload);
}

void net_conn_close(net_conn *c, int err)
{
    net__conn_close(c, err);
}

void net_conn_ref(net_conn *c)
{
    c->refs++;
}

void net_conn_unref(net_conn *c)
{
    if (--c->refs == 0 && c->state == NET__CLOSING)
        net__conn_maybe_free(c);
}

void net_conn_set_data(net_conn *c, void *data)
{
    c->data = data;
}

void *net_conn_data(const net_conn *c)
{
    return c->data;
}

const char *net_conn_peer_name(const net_conn *c)
{
    return c->name;
}

int net_conn_peer_addr(const net_conn *c, char *out, size_t cap)
{
    struct sockaddr_storage ss;
    int len = sizeof(ss);
    if (c->state == NET__CLOSING)
        return RK_ECLOSED;
    int rc = uv_tcp_getpeername(&c->tcp, (struct sockaddr *)&ss, &len);
    if (rc)
        return rc;
    return net_addr_format(out, cap, (struct sockaddr *)&ss);
}

void net_conn_read_pause(net_conn *c)
{
    c->user_paused = true;
    update_reading(c);
}

void net_conn_read_resume(net_conn *c)
{
    if (!c->user_paused)
        return;
    c->user_paused = false;
    update_reading(c);
    conn_parse(c);
    if (c->base->on_input)
        base_kick(c->base);
}

size_t net_conn_queued(const net_conn *c)
{
    return c->waiting + c->inflight;
}

bool net_conn_is_open(const net_conn *c)
{
    return c->state != NET__CLOSING;
}

/* ---- raw-stream connections --------------------------------------------- */

int net_conn_write(net_conn *c, const void *p, size_t len)
{
    if (c->state != NET__READY)
        return RK_ECLOSED;
    if (len == 0)
        return 0;
    return conn_enqueue(c, false, NULL, 0, (struct rk_slice){p, len});
}

void net_conn_request_begin(net_conn *c)
{
    c->requests++;
    if (c->state == NET__READY)
        update_reading(c);
}

void net_conn_request_end(net_conn *c)
{
    assert(c->requests > 0);
    c->requests--;
    if (c->state != NET__READY)
        return;
    update_reading(c);
    if (c->finishing)
        dirty_link(c); /* the flusher closes it once all is answered */
}

void net_conn_finish(net_conn *c)
{
    if (c->state != NET__READY || c->base->on_input == NULL)
        return;
    c->finishing = true;
    c->no_input = true;
    update_reading(c);
    dirty_link(c);
}

/* Input run at the handler's request may start work from any phase of the
 * loop (a write callback, the flusher in the prepare phase): base_kick
 * keeps the next poll from blocking so the owner's end-of-turn work for it
 * comes at once. */
void net_conn_input_again(net_conn *c)
{
    if (c->state == NET__READY && c->base->on_input) {
        conn_input(c);
        base_kick(c->base);
    }
}

void net_conn_input_cap_set(net_conn *c, size_t cap)
{
    c->input_cap = cap;
}
