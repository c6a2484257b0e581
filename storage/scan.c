/*
 * scan.c - reading an arc of the store (store.h): the walk over an arc's
 * entries, gc of expired tombstones, scans and digests (Merkle leaves are
 * hashed by repair/merkle.c over a scan).
 * range.c has the range operations, which use the walk to delete the
 * entries an env holds outside its range.
 *
 * Apart from range.c because nothing here changes the range map: these
 * read the entries of the ranges that exist (gc also deletes expired ones)
 * under maplock held shared, while range.c builds, switches and removes
 * envs. gc and purge delete in place, which a range operation's copy would
 * miss: they hold opmu too.
 */
#include <errno.h>
#include <string.h>

#include <xxhash.h>

#include "storage/hlc.h"
#include "storage/store.h"
#include "storage/store_internal.h"

/* ---- Walking an arc ----------------------------------------------------- */

/* Visit, in arc order, every entry whose token is in the arc (lo, hi],
 * starting at token `from` (in the arc) after inner key `after` (NULL: from
 * the first entry of `from`). cb may delete the current entry. Returns 0,
 * cb's nonzero return, or an error. store__walk starts at the arc's first
 * token. */
static int store__walk_from(MDB_txn *txn,
                            MDB_dbi dbi,
                            struct store_range arc,
                            uint64_t from,
                            const MDB_val *after,
                            store__walk_cb cb,
                            void *arg)
{
    uint64_t seg[2][2];
    int nseg = 0;
    if (from <= arc.end && !(arc.start < arc.end && from <= arc.start) &&
        !(arc.start >= arc.end && from > arc.start)) {
        seg[nseg][0] = from; /* from .. end, no wrap */
        seg[nseg++][1] = arc.end;
    } else {
        seg[nseg][0] = from; /* from .. 2^64-1, then 0 .. end */
        seg[nseg++][1] = UINT64_MAX;
        seg[nseg][0] = 0;
        seg[nseg++][1] = arc.end;
    }
    MDB_cursor *cur;
    int rc = mdb_cursor_open(txn, dbi, &cur);
    if (rc)
        return store__err(rc);
    for (int i = 0; i < nseg; i++) {
        uint8_t kb[8];
        MDB_val k, v;
        if (i == 0 && after != NULL) {
            k = *after;
        } else {
            store__be64(kb, seg[i][0]);
            k.mv_size = 8;
            k.mv_data = kb;
        }
        rc = mdb_cursor_get(cur, &k, &v, MDB_SET_RANGE);
        if (rc == 0 && i == 0 && after != NULL && k.mv_size == after->mv_size &&
            memcmp(k.mv_data, after->mv_data, k.mv_size) == 0)
            rc = mdb_cursor_get(cur, &k, &v, MDB_NEXT);
        for (; rc == 0; rc = mdb_cursor_get(cur, &k, &v, MDB_NEXT)) {
            if (k.mv_size < 9) {
                rc = RK_ECORRUPT;
                goto close_cur;
            }
            if (store__get64(k.mv_data) > seg[i][1])
                break;
            if ((rc = cb(cur, &k, &v, arg)))
                goto close_cur;
        }
        if (rc != 0 && rc != MDB_NOTFOUND) {
            rc = store__err(rc);
            goto close_cur;
        }
        rc = 0;
    }
close_cur:
    mdb_cursor_close(cur);
    return rc;
}

int store__walk(MDB_txn *txn,
                MDB_dbi dbi,
                struct store_range arc,
                store__walk_cb cb,
                void *arg)
{
    return store__walk_from(txn, dbi, arc, arc.start + 1, NULL, cb, arg);
}
/* ---- gc ----------------------------------------------------------------- */

struct store__gc {
    uint64_t now, grace, n;
};

bool store_record_purgeable(const struct store_record *r,
                            uint64_t now_ms,
                            uint64_t grace_ms,
                            uint64_t covered_ms)
{
    uint64_t dead_at;
    if (r->flags & STORE_REC_TOMBSTONE)
        dead_at = hlc_ts_ms(r->ts);
    else if (r->flags & STORE_REC_EXPIRES)
        dead_at = r->expiry_ms;
    else
        return false;
    if (dead_at > now_ms || now_ms - dead_at < grace_ms)
        return false;
    return hlc_ts_ms(r->ts) < covered_ms;
}

/* The entry at the cursor, deleted if purgeable; its kind in *tomb. */
static int gc_entry(MDB_cursor *cur,
                    const MDB_val *k,
                    const MDB_val *v,
                    uint64_t now,
                    uint64_t grace,
                    uint64_t covered,
                    bool *out_tomb)
{
    struct rk_slice uk, rec;
    struct store_record r;
    if (store__stored_split(&uk, &rec, k, v) != 0 ||
        store_record_decode(&r, rec.p, rec.len) != 0)
        return 0; /* not ours to judge: left for repair to overwrite */
    if (!store_record_purgeable(&r, now, grace, covered))
        return 0;
    *out_tomb = (r.flags & STORE_REC_TOMBSTONE) != 0;
    return mdb_cursor_del(cur, 0) ? RK_EINTERNAL : 1;
}

static int
store__gc_cb(MDB_cursor *cur, const MDB_val *k, const MDB_val *v, void *arg)
{
    struct store__gc *g = arg;
    bool tomb;
    int rc = gc_entry(cur, k, v, g->now, g->grace, UINT64_MAX, &tomb);
    if (rc == 1)
        g->n++;
    return rc < 0 ? rc : 0;
}

int store_gc(store *s, uint64_t now_ms, uint64_t *out_purged)
{
    struct store__gc g = {now_ms, s->o.gc_grace_ms, 0};
    int rc = 0;
    (void)store_flush(s);         /* the memtable's tombstones too */
    pthread_mutex_lock(&s->opmu); /* deletes in place: see store_purge_next */
    pthread_rwlock_rdlock(&s->maplock);
    for (size_t i = 0; rc == 0 && i < s->nranges; i++) {
        struct store__range *rr = s->ranges[i];
        MDB_txn *txn;
        uint64_t before = g.n;
        if ((rc = store__err(mdb_txn_begin(rr->env, NULL, 0, &txn))))
            break;
        rc = store__walk(txn, rr->dbi, rr->r, store__gc_cb, &g);
        if (rc) {
            mdb_txn_abort(txn);
            g.n = before;
            break;
        }
        if ((rc = store__err(mdb_txn_commit(txn))) == 0 && g.n > before) {
            atomic_store(&rr->dirty, true);
            store__cache_forget_range(s, rr); /* what it read is gone */
        }
    }
    pthread_rwlock_unlock(&s->maplock);
    pthread_mutex_unlock(&s->opmu);
    /* Not synced: the envs are marked dirty and the next checkpoint syncs
     * them. A crash before it only brings back records a later gc purges
     * again; replay merges the log over them by LWW. */
    if (out_purged)
        *out_purged = g.n;
    return rc;
}

/* The next step of a scan: the env holding its first token, that token,
 * whether it resumes inside it after the scan's last key, and the segment
 * of the arc in that env. */
struct scan_at {
    struct store__range *rr;
    uint64_t nt;
    bool resume;
    struct store_range seg;
};

/* Where the next step of scan sc goes (maplock held): 1 when the arc is
 * through, 0 and *out, or RK_ENOTFOUND if its first token is not held
 * locally. */
static int scan_step(store *s, const struct store_scan *sc, struct scan_at *out)
{
    bool resume = sc->started && sc->last_len > 0;
    if (sc->started && !resume && sc->pos == sc->arc.end)
        return 1;
    uint64_t nt = !sc->started ? sc->arc.start + 1
                  : resume     ? sc->pos
                               : sc->pos + 1;
    struct store__range *rr = store__lookup(s, nt);
    if (rr == NULL)
        return RK_ENOTFOUND;
    /* Walk from nt to whichever comes first: the env's end or ours. */
    uint64_t stop =
        (rr->r.end - nt) < (sc->arc.end - nt) ? rr->r.end : sc->arc.end;
    if (rr->r.start == rr->r.end)
        stop = sc->arc.end;
    struct store_range seg = {nt - 1, stop};
    if (nt - 1 == stop) /* the walk covers the whole ring */
        seg.start = stop;
    *out = (struct scan_at){rr, nt, resume, seg};
    return 0;
}

/* ---- purge of an arc, in steps ----------------------------------------- */

void store_purge_init(struct store_purge *p,
                      struct store_range arc,
                      uint64_t now_ms,
                      uint64_t grace_ms,
                      uint64_t covered_ms)
{
    memset(p, 0, sizeof(*p));
    p->arc = arc;
    p->now_ms = now_ms;
    p->grace_ms = grace_ms;
    p->covered_ms = covered_ms;
    store_scan_init(&p->at, arc);
}

struct store__purgest {
    struct store_purge *p;
    size_t max, items;
    bool deleted;
};

#define STORE__STEP_FULL 1

static int
store__purge_cb(MDB_cursor *cur, const MDB_val *k, const MDB_val *v, void *arg)
{
    struct store__purgest *st = arg;
    struct store_purge *p = st->p;
    if (st->items >= st->max)
        return STORE__STEP_FULL;
    /* the resume point first: the entry may be deleted below */
    p->at.started = true;
    p->at.pos = store__get64(k->mv_data);
    p->at.last_len = k->mv_size;
    memcpy(p->at.last, k->mv_data, k->mv_size);
    st->items++;
    p->seen++;
    bool tomb = false;
    int rc = gc_entry(cur, k, v, p->now_ms, p->grace_ms, p->covered_ms, &tomb);
    if (rc < 0)
        return rc;
    if (rc == 1) {
        st->deleted = true;
        if (tomb)
            p->tombstones++;
        else
            p->expired++;
    }
    return 0;
}

int store_purge_next(store *s, struct store_purge *p, size_t max_items)
{
    struct store_scan *sc = &p->at;
    if (p->done)
        return 0;
    if (!sc->started)
        (void)store_flush(s); /* the memtable's tombstones too */
    struct store__purgest st = {p, max_items ? max_items : 1, 0, false};
    int rc = 0;
    /* A compaction, split or merge copies an env while commits go on and
     * mirrors their writes into the copy, but a deletion in place is no
     * write: one made behind the copy would be lost (the record back in
     * the new env). So a step waits for a range operation to end, and
     * none starts during it (opmu: one at a time). */
    pthread_mutex_lock(&s->opmu);
    pthread_rwlock_rdlock(&s->maplock);
    struct scan_at w;
    if ((rc = scan_step(s, sc, &w)) == 1)
        p->done = true;
    if (rc)
        goto unlock_ok;
    uint64_t stop = w.seg.end;
    MDB_txn *txn;
    if ((rc = store__err(mdb_txn_begin(w.rr->env, NULL, 0, &txn))))
        goto unlock;
    MDB_val after = {sc->last_len, sc->last};
    struct store_scan keep = *sc;
    uint64_t t0 = p->tombstones, e0 = p->expired, s0 = p->seen;
    rc = store__walk_from(txn, w.rr->dbi, w.seg, w.nt, w.resume ? &after : NULL,
                          store__purge_cb, &st);
    bool full = rc == STORE__STEP_FULL;
    if (full)
        rc = 0;
    if (rc == 0 && st.deleted)
        rc = store__err(mdb_txn_commit(txn));
    else
        mdb_txn_abort(txn);
    if (rc) { /* nothing of this step happened */
        *sc = keep;
        p->tombstones = t0;
        p->expired = e0;
        p->seen = s0;
        goto unlock;
    }
    if (st.deleted) {
        atomic_store(&w.rr->dirty, true);
        store__cache_forget_range(s, w.rr); /* what it read is gone */
    }
    if (!full) { /* this env's part of the arc is through */
        sc->started = true;
        sc->pos = stop;
        sc->last_len = 0;
        if (stop == sc->arc.end)
            p->done = true;
    }
unlock_ok:
    if (rc == 1)
        rc = 0; /* the arc is through */
unlock:
    pthread_rwlock_unlock(&s->maplock);
    pthread_mutex_unlock(&s->opmu);
    return rc;
}

/* ---- Scans and digests -------------------------------------------------- */

void store_scan_init(struct store_scan *sc, struct store_range arc)
{
    memset(sc, 0, sizeof(*sc));
    sc->arc = arc;
}

struct store__scanst {
    struct store_scan *sc;
    size_t max_items, max_bytes, items, bytes;
    store_scan_cb cb;
    void *arg;
};

#define STORE__CHUNK_FULL 1

static int
store__scan_cb(MDB_cursor *cur, const MDB_val *k, const MDB_val *v, void *arg)
{
    (void)cur;
    struct store__scanst *st = arg;
    if (st->items >= st->max_items ||
        (st->items > 0 && st->bytes >= st->max_bytes))
        return STORE__CHUNK_FULL;
    struct store_item it;
    int rc = store__stored_split(&it.key, &it.rec, k, v);
    if (rc)
        return rc;
    it.token = store__get64(k->mv_data);
    if ((rc = st->cb(&it, st->arg)))
        return rc;
    st->items++;
    st->bytes += it.key.len + it.rec.len;
    st->sc->started = true;
    st->sc->pos = it.token;
    st->sc->last_len = k->mv_size;
    memcpy(st->sc->last, k->mv_data, k->mv_size);
    return 0;
}

int store_scan_next(store *s,
                    struct store_scan *sc,
                    size_t max_items,
                    size_t max_bytes,
                    store_scan_cb cb,
                    void *arg)
{
    if (sc->done)
        return 0;
    if (!sc->started)
        (void)store_flush(s); /* the scan sees every committed write */
    struct store__scanst st = {
        sc, max_items ? max_items : 1, max_bytes, 0, 0, cb, arg};
    int rc = 0;
    pthread_rwlock_rdlock(&s->maplock);
    while (!sc->done && rc == 0) {
        struct scan_at w;
        if ((rc = scan_step(s, sc, &w)) == 1) {
            sc->done = true;
            rc = 0;
            break;
        }
        if (rc)
            break;
        uint64_t stop = w.seg.end;
        MDB_txn *txn;
        if ((rc = store__err(mdb_txn_begin(w.rr->env, NULL, MDB_RDONLY, &txn))))
            break;
        MDB_val after = {sc->last_len, sc->last};
        rc = store__walk_from(txn, w.rr->dbi, w.seg, w.nt,
                              w.resume ? &after : NULL, store__scan_cb, &st);
        mdb_txn_abort(txn);
        if (rc == STORE__CHUNK_FULL) {
            rc = 0;
            break;
        }
        if (rc)
            break;
        sc->started = true;
        sc->pos = stop;
        sc->last_len = 0;
        if (stop == sc->arc.end)
            sc->done = true;
        if (st.items >= st.max_items ||
            (st.items > 0 && st.bytes >= st.max_bytes))
            break;
    }
    pthread_rwlock_unlock(&s->maplock);
    return rc;
}

struct store__digst {
    XXH3_state_t *x;
    struct store_digest *d;
};

static int store__dig_cb(const struct store_item *it, void *arg)
{
    struct store__digst *st = arg;
    uint8_t h[16];
    store__be64(h, it->token);
    h[8] = (uint8_t)(it->key.len >> 24);
    h[9] = (uint8_t)(it->key.len >> 16);
    h[10] = (uint8_t)(it->key.len >> 8);
    h[11] = (uint8_t)it->key.len;
    h[12] = (uint8_t)(it->rec.len >> 24);
    h[13] = (uint8_t)(it->rec.len >> 16);
    h[14] = (uint8_t)(it->rec.len >> 8);
    h[15] = (uint8_t)it->rec.len;
    XXH3_64bits_update(st->x, h, sizeof(h));
    XXH3_64bits_update(st->x, it->key.p, it->key.len);
    XXH3_64bits_update(st->x, it->rec.p, it->rec.len);
    st->d->keys++;
    st->d->bytes += it->key.len + it->rec.len;
    return 0;
}

int store_digest(struct store_digest *out, store *s, struct store_range arc)
{
    struct store_digest d = {0, 0, 0};
    XXH3_state_t *x = XXH3_createState();
    if (x == NULL)
        return -ENOMEM;
    XXH3_64bits_reset(x);
    struct store__digst st = {x, &d};
    struct store_scan sc;
    store_scan_init(&sc, arc);
    int rc = 0;
    while (rc == 0 && !sc.done)
        rc =
            store_scan_next(s, &sc, 4096, (size_t)16 << 20, store__dig_cb, &st);
    if (rc == 0) {
        d.hash = XXH3_64bits_digest(x);
        *out = d;
    }
    XXH3_freeState(x);
    return rc;
}
