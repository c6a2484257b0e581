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
 * repair's exchange) writes a chunk's records straight into the range's
 * env on the pool, in one synced transaction, last-write-wins
 * (stream_items_commit: store_batch_commit_direct), each key checked to
 * lie in the chunk's range, and moves on only once the chunk is durable.
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

/* A chunk's records are written on the pool straight into their range's
 * env (store_batch_commit_direct: one transaction, last-write-wins against
 * the env and the memtable, the env synced before the job ends), not
 * through the node's group commit: bulk data would pay the commit log, the
 * memtable and a second write to the env (docs/performance.md, "Bootstrap
 * from every donor"). The HLC sees every record's timestamp on the loop
 * first, as for a replica write. The job owns a copy of the items: the
 * answer that carried them is borrowed only until the caller returns. */
struct commit_job {
    struct stream_work w;
    store *st; /* read on the loop when queued */
    stream_items_cb cb;
    void *arg;
    bool sync;
    uint8_t *items; /* the copy */
    size_t len;
    int status;
    uint32_t keys;
    uint64_t bytes;
};

/* Encode rec as the store keeps it, into *buf of *cap bytes (grown). */
static int record_encode(uint8_t **buf,
                         size_t *cap,
                         size_t *out_len,
                         const struct rpc_record *rec)
{
    struct store_record sr = {.ts = rec->ts};
    if (rec->flags & RPC_REC_TOMBSTONE)
        sr.flags = STORE_REC_TOMBSTONE;
    else
        sr.value = rec->value;
    if (rec->expiry) {
        sr.flags |= STORE_REC_EXPIRES;
        sr.expiry_ms = rec->expiry;
    }
    return store_record_encode_grow(buf, cap, out_len, &sr);
}

/* On the pool: the batch of the chunk's records, committed. A record the
 * store refuses ends the batch there (what came before is committed), as
 * a refused write ended the chunk on the group commit's path. */
static void commit_work(struct stream_work *w)
{
    struct commit_job *j = (struct commit_job *)w;
    store_batch *b = NULL;
    uint8_t *buf = NULL;
    size_t cap = 0;
    int rc = store_batch_new(&b), first = 0;
    struct rk_slice it = RK_SLICE(j->items, j->len), key;
    struct rpc_record rec;
    while (rc == 0 && rpc_stream_item_next(&it, &key, &rec) == 1) {
        size_t len = 0;
        rc = record_encode(&buf, &cap, &len, &rec);
        if (rc == 0)
            rc = store_batch_add(b, key, RK_SLICE(buf, len));
        if (rc == 0) {
            j->keys++;
            j->bytes += key.len + rec.value.len;
        }
    }
    first = rc;
    if (b != NULL && store_batch_count(b) > 0) {
        rc = store_batch_commit_direct(j->st, b, j->sync);
        for (size_t i = 0; rc == 0 && i < store_batch_count(b); i++)
            rc = store_batch_result(b, i);
        if (rc < 0)
            first = rc;
    }
    j->status = first;
    store_batch_free(b);
    free(buf);
}

static void commit_done(struct stream_work *w, int status)
{
    struct commit_job *j = (struct commit_job *)w;
    j->cb(j->arg, status < 0 ? status : j->status, j->keys, j->bytes);
    free(j->items);
    free(j);
}

int stream_items_commit(stream *s,
                        struct ring_range rg,
                        struct rk_slice items,
                        stream_items_cb cb,
                        void *arg)
{
    return stream__items_commit(s, rg, items, true, cb, arg);
}

int stream__items_commit(stream *s,
                         struct ring_range rg,
                         struct rk_slice items,
                         bool sync,
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
    struct commit_job *j = calloc(1, sizeof(*j));
    if (!j)
        return -ENOMEM;
    j->items = malloc(items.len ? items.len : 1);
    if (!j->items) {
        free(j);
        return -ENOMEM;
    }
    if (items.len)
        memcpy(j->items, items.p, items.len);
    j->len = items.len;
    j->w.work = commit_work;
    j->w.done = commit_done;
    j->st = stream__store(s);
    j->cb = cb;
    j->arg = arg;
    j->sync = sync;
    int rc = 0;
    for (it = items; rc == 0 && rpc_stream_item_next(&it, &key, &rec) == 1;)
        rc = s->h.clock_seen(s->h.arg, rec.ts);
    if (rc == 0)
        rc = s->h.queue_work(s->h.arg, &j->w);
    if (rc < 0) {
        free(j->items);
        free(j);
    }
    return rc;
}
