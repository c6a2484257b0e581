/*
 * donor.c - the donor's side of a stream, and committing a chunk.
 *
 * A STREAM request (stream_serve) carries the scan cursor
 * (wire/rpc_msg.h), so a donor keeps no session: each request scans one
 * chunk of the arc from the cursor on the host's pool (store_scan_next; it
 * applies the memtable first, so a chunk sees every committed write) and
 * answers it with the records and where the scan stands after them. At
 * most STREAM_DONOR_SCANS (streaming.h) scans run at once; a request past that
 * is answered OVERLOADED and asked again. A leave's push and a repair read
 * their own chunks the same way (stream_scan), getting the chunk encoded
 * as the push they send.
 *
 * The receiving side of every stream (a join's pull, a pushed chunk, a
 * repair's exchange) commits a chunk's records through the node's group
 * commit (stream_items_commit: host->write, last-write-wins), each key
 * checked to lie in the chunk's range, and moves on only once every record
 * is committed.
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "net/net.h"
#include "streaming/streaming_internal.h"

#define STREAM_DONOR_MAX ((size_t)4 << 20) /* bytes a chunk may ask */
/* room in a frame for the items, besides the chunk's other fields */
#define STREAM_FRAME_ITEMS (NET_MAX_FRAME_DEFAULT - 4096)

/* ---- the donor side ---------------------------------------------------- */

struct donor_job {
    struct stream_work w;
    stream *s;
    store *st; /* read on the loop when queued */
    void *c;   /* a joining node's request, answered with the chunk... */
    uint64_t id;
    stream_scan_cb cb; /* ...or, for a push or a repair, this with it */
    void *cb_arg;
    struct rpc_stream_chunk ch; /* what donor_work read */
    struct store_scan sc;
    size_t max_bytes, frame_left;
    struct rpc_buf items, out;
    uint32_t count;
    uint64_t kv_bytes;    /* the items' keys and values */
    uint64_t hlc;         /* the donor's HLC when asked (read on the loop) */
    const uint64_t *skip; /* fingerprints left out (sorted), borrowed */
    size_t nskip;
    int status;
};

#define DONOR_FULL 1 /* the chunk is full before this item */

uint64_t stream_record_fingerprint(struct rk_slice key,
                                   const struct rpc_record *rec)
{
    return rk_token(key.p, key.len) ^ (rec->ts * 0x9E3779B97F4A7C15ull) ^
           ((uint64_t)rec->flags << 56) ^ rec->expiry;
}

static int donor_item(const struct store_item *it, void *arg)
{
    struct donor_job *j = arg;
    struct store_record sr;
    int rc = store_record_decode(&sr, it->rec.p, it->rec.len);
    if (rc < 0)
        return rc;
    struct rpc_record rec = {
        .ts = sr.ts,
        .flags = (sr.flags & STORE_REC_TOMBSTONE) ? RPC_REC_TOMBSTONE : 0,
        .expiry = (sr.flags & STORE_REC_EXPIRES) ? sr.expiry_ms : 0,
        .value =
            (sr.flags & STORE_REC_TOMBSTONE) ? RK_SLICE(NULL, 0) : sr.value};
    if (j->nskip) {
        uint64_t fp = stream_record_fingerprint(it->key, &rec);
        if (bsearch(&fp, j->skip, j->nskip, sizeof(fp), rk_u64_cmp))
            return 0; /* the other side has just this */
    }
    size_t need = it->key.len + sr.value.len + 64;
    if (j->count > 0 && (j->count >= RPC_STREAM_ITEMS_MAX ||
                         j->items.len + need > j->frame_left))
        return DONOR_FULL; /* the cursor stays before this item */
    rc = rpc_stream_item_add(&j->items, it->key, &rec);
    if (rc < 0)
        return rc;
    j->count++;
    j->kv_bytes += it->key.len + rec.value.len;
    return 0;
}

static void donor_work(struct stream_work *w)
{
    struct donor_job *j = (struct donor_job *)w;
    int rc = store_scan_next(j->st, &j->sc, RPC_STREAM_ITEMS_MAX, j->max_bytes,
                             donor_item, j);
    if (rc == DONOR_FULL)
        rc = 0;
    j->status = rc;
    struct rpc_stream_chunk *ch = &j->ch;
    *ch = (struct rpc_stream_chunk){.status = rc, .hlc = j->hlc};
    if (rc == 0) {
        ch->next.start = j->sc.arc.start;
        ch->next.end = j->sc.arc.end;
        ch->next.pos = j->sc.pos;
        ch->next.started = j->sc.started;
        ch->next.done = j->sc.done;
        ch->next.last = RK_SLICE(j->sc.last, j->sc.last_len);
        ch->count = j->count;
        ch->items = RK_SLICE(j->items.data, j->items.len);
    }
    if ((j->cb ? rpc_stream_push_encode(&j->out, ch)
               : rpc_stream_chunk_encode(&j->out, ch)) < 0)
        j->out.len = 0;
}

static void donor_done(struct stream_work *w, int status)
{
    struct donor_job *j = (struct donor_job *)w;
    stream *s = j->s;
    (void)status;
    s->scans--;
    if (j->cb) {
        int rc = j->status;
        if (rc == 0 && !j->out.len)
            rc = -ENOMEM;
        j->cb(j->cb_arg, rc, rc == 0 ? &j->ch : NULL, j->kv_bytes,
              RK_SLICE(j->out.data, rc == 0 ? j->out.len : 0));
    } else {
        if (j->out.len) {
            if (j->status == 0) {
                s->stats.out_keys += j->count;
                s->stats.out_bytes += j->kv_bytes;
            }
            s->h.reply(s->h.arg, j->c, j->id,
                       RK_SLICE(j->out.data, j->out.len));
        }
        s->h.conn_unref(s->h.arg, j->c);
    }
    rpc_buf_free(&j->items);
    rpc_buf_free(&j->out);
    free(j);
}

static void donor_refuse(stream *s, void *c, uint64_t id, int status)
{
    struct rpc_stream_chunk ch = {.status = status, .hlc = s->h.hlc(s->h.arg)};
    struct rpc_buf *b = &s->reply_buf;
    rpc_buf_reset(b);
    if (rpc_stream_chunk_encode(b, &ch) == 0)
        s->h.reply(s->h.arg, c, id, RK_SLICE(b->data, b->len));
}

/* Queue the scan of job j (its answer set: c/id or cb) from at; frees j
 * on failure. */
static int donor_start(stream *s,
                       struct donor_job *j,
                       const struct rpc_stream_pos *at,
                       uint32_t max_bytes)
{
    j->w.work = donor_work;
    j->w.done = donor_done;
    j->s = s;
    j->st = stream__store(s);
    j->hlc = s->h.hlc(s->h.arg);
    store_scan_init(&j->sc, (struct store_range){at->start, at->end});
    j->sc.pos = at->pos;
    j->sc.started = at->started;
    j->sc.last_len = at->last.len;
    if (at->last.len)
        memcpy(j->sc.last, at->last.p, at->last.len);
    j->max_bytes = max_bytes && max_bytes < STREAM_DONOR_MAX ? max_bytes
                                                             : STREAM_DONOR_MAX;
    j->frame_left = STREAM_FRAME_ITEMS;
    int rc = s->h.queue_work(s->h.arg, &j->w);
    if (rc < 0) {
        free(j);
        return rc;
    }
    s->scans++;
    return 0;
}

void stream_serve(stream *s, void *c, uint64_t id, struct rk_slice f)
{
    struct rpc_stream_req rq;
    int rc = rpc_stream_req_decode(&rq, f);
    if (rc == 0 &&
        (rq.at.done || rq.at.last.len > sizeof(((struct store_scan *)0)->last)))
        rc = RK_EBADREQ;
    if (rc < 0) {
        s->h.bad_frame(s->h.arg);
        donor_refuse(s, c, id, rc);
        return;
    }
    if (!stream__store(s) || stream__stopping(s)) {
        donor_refuse(s, c, id, RK_ECLOSED);
        return;
    }
    if (s->scans >= STREAM_DONOR_SCANS) {
        donor_refuse(s, c, id, RK_EOVERLOADED);
        return;
    }
    struct donor_job *j = calloc(1, sizeof(*j));
    if (!j) {
        donor_refuse(s, c, id, -ENOMEM);
        return;
    }
    j->c = c;
    j->id = id;
    s->h.conn_ref(s->h.arg, c);
    rc = donor_start(s, j, &rq.at, rq.max_bytes);
    if (rc < 0) {
        s->h.conn_unref(s->h.arg, c);
        donor_refuse(s, c, id, rc);
    }
}

int stream_scan(stream *s,
                const struct rpc_stream_pos *at,
                uint32_t max_bytes,
                const uint64_t *skip,
                size_t nskip,
                stream_scan_cb cb,
                void *arg)
{
    if (!stream__store(s) || stream__stopping(s))
        return RK_ECLOSED;
    if (at->done || at->last.len > sizeof(((struct store_scan *)0)->last))
        return RK_EBADREQ;
    if (s->scans >= STREAM_DONOR_SCANS)
        return RK_EOVERLOADED;
    struct donor_job *j = calloc(1, sizeof(*j));
    if (!j)
        return -ENOMEM;
    j->cb = cb;
    j->cb_arg = arg;
    j->skip = skip;
    j->nskip = nskip;
    return donor_start(s, j, at, max_bytes);
}

/* ---- committing a chunk ------------------------------------------------ */

struct commit_items {
    stream_items_cb cb;
    void *arg;
    uint32_t pending; /* records not yet committed, +1 while adding */
    int err;
    uint32_t keys;
    uint64_t bytes;
};

static void on_item_committed(int status, void *arg)
{
    struct commit_items *g = arg;
    if (status < 0 && !g->err)
        g->err = status;
    if (--g->pending)
        return;
    g->cb(g->arg, g->err, g->keys, g->bytes);
    free(g);
}

int stream_items_commit(stream *s,
                        struct ring_range rg,
                        struct rk_slice items,
                        stream_items_cb cb,
                        void *arg)
{
    if (!stream__store(s) || stream__stopping(s))
        return RK_ECLOSED;
    struct rk_slice it = items, key;
    struct rpc_record rec;
    while (rpc_stream_item_next(&it, &key, &rec) == 1)
        if (!ring_range_contains(rg, rk_token(key.p, key.len)))
            return RK_EPROTO;
    struct commit_items *g = calloc(1, sizeof(*g));
    if (!g)
        return -ENOMEM;
    g->cb = cb;
    g->arg = arg;
    g->pending = 1; /* held while adding */
    for (it = items; rpc_stream_item_next(&it, &key, &rec) == 1;) {
        g->pending++;
        int rc = s->h.write(s->h.arg, key, &rec, on_item_committed, g);
        if (rc < 0) {
            g->pending--;
            g->err = rc;
            break;
        }
        g->keys++;
        g->bytes += key.len + rec.value.len;
    }
    on_item_committed(0, g); /* the hold */
    return 0;
}
