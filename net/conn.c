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
 * Lifetime: a connection is freed when its tcp and timer handles have
 * closed, no getaddrinfo is in flight, and no one holds a reference.
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "net/net_internal.h"

#define CONN_OF(h, field) ((net_conn *)((char *)(h)-offsetof(net_conn, field)))

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

static void update_reading(net_conn *c);
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

static int conn_flush(net_conn *c)
{
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
        if (c->state == NET__CLOSING || c->hold || c->state == NET__RESOLVING ||
            c->state == NET__CONNECTING)
            continue;
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

/* Writes one frame at once, ahead of anything queued (handshakes). */
static int write_now(net_conn *c, const uint8_t *p, size_t len)
{
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

static int chunk_append(net_conn *c,
                        const uint8_t *hdr,
                        size_t hdr_len,
                        struct rk_slice body)
{
    size_t need = NET_FRAME_HDR + hdr_len + body.len;
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
    net__be32_put(p, (uint32_t)(hdr_len + body.len));
    if (hdr_len)
        memcpy(p + NET_FRAME_HDR, hdr, hdr_len);
    if (body.len)
        memcpy(p + NET_FRAME_HDR + hdr_len, body.p, body.len);
    last->len += need;
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
    int rc = chunk_append(c, hdr, hdr_len, body);
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

/* ---- reading ------------------------------------------------------------ */

static void alloc_cb(uv_handle_t *h, size_t suggested, uv_buf_t *buf);
static void read_cb(uv_stream_t *s, ssize_t nread, const uv_buf_t *buf);

static void update_reading(net_conn *c)
{
    bool want = (c->state == NET__HANDSHAKE || c->state == NET__READY) &&
                !c->user_paused && !c->bp_paused;
    if (want == c->reading)
        return;
    if (want) {
        if (uv_read_start((uv_stream_t *)&c->tcp, alloc_cb, read_cb) == 0)
            c->reading = true;
    } else {
        uv_read_stop((uv_stream_t *)&c->tcp);
        c->reading = false;
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
    if (rc == 0 && c->outbound)
        rc = handshake_send(c, frame);
    if (rc > 0)
        rc = RK_EAUTH;
    if (rc == 0)
        become_ready(c);
    return rc;
}

static void conn_parse(net_conn *c)
{
    struct net__base *b = c->base;
    if (c->in_parse)
        return;
    c->in_parse = true;
    while (c->state != NET__CLOSING && !c->user_paused && !c->bp_paused) {
        struct rk_slice f;
        int rc = net__rbuf_next(&c->rbuf, &f);
        if (rc == 0)
            break;
        if (rc < 0) {
            b->stats.oversize++;
            net__conn_close(c, rc);
            break;
        }
        b->stats.frames_in++;
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

static void alloc_cb(uv_handle_t *h, size_t suggested, uv_buf_t *buf)
{
    net_conn *c = CONN_OF(h, tcp);
    uint8_t *p = NULL;
    size_t len = 0;
    (void)suggested;
    if (net__rbuf_reserve(&c->rbuf, &p, &len) != 0) {
        *buf = uv_buf_init(NULL, 0); /* read_cb gets UV_ENOBUFS */
        return;
    }
    if (len > UINT32_MAX)
        len = UINT32_MAX;
    *buf = uv_buf_init((char *)p, (unsigned)len);
}

static void read_cb(uv_stream_t *s, ssize_t nread, const uv_buf_t *buf)
{
    net_conn *c = CONN_OF(s, tcp);
    (void)buf;
    if (nread < 0) {
        net__conn_close(c, nread == UV_EOF ? 0 : (int)nread);
        return;
    }
    if (nread == 0)
        return;
    net__rbuf_commit(&c->rbuf, (size_t)nread);
    c->base->stats.bytes_in += (uint64_t)nread;
    conn_parse(c);
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
    if (b->has_hs) {
        c->state = NET__HANDSHAKE;
        c->hold = c->outbound;
        /* Until authenticated, a peer may send only small frames. */
        c->rbuf.max_frame = NET_HANDSHAKE_MAX;
        if (c->outbound) {
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
    free(c);
    base_maybe_release(b);
}

static void handle_closed(uv_handle_t *h)
{
    net_conn *c = h->data;
    if (--c->handles_open > 0)
        return;
    c->base->stats.conns_closed++;
    c->base->on_closed(c->base, c, c->close_err);
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

void net__conn_close(net_conn *c, int err)
{
    if (c->state == NET__CLOSING)
        return;
    bool graceful = err == 0 && c->state == NET__READY;
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
    if (graceful && conn_flush(c) == 0 &&
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
}

size_t net_conn_queued(const net_conn *c)
{
    return c->waiting + c->inflight;
}

bool net_conn_is_open(const net_conn *c)
{
    return c->state != NET__CLOSING;
}
