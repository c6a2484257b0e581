/*
 * sys.c - the system env (node state and the durable range map) and the
 * hints env. Both are small LMDB envs whose commits sync (no MDB_NOSYNC):
 * a set returns once it is on disk.
 *
 * System keys: 'r' + BE start + BE end -> directory name under ranges/
 * (the range map, the single source of truth for which envs exist), and
 * 'u' + name -> a caller's value. Hint keys: 'h' + len + node + BE seq ->
 * u32 key length || key || record; 'c' + len + node -> u64 hint count;
 * 'B' -> u64 bytes of all hints.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "storage/store.h"
#include "storage/store_internal.h"

#define STORE__SYS_MAP    ((size_t)64 << 20)
#define STORE__HINT_MAP   ((size_t)1 << 34)
#define STORE__NAME_MAX   200u
#define STORE__SYSVAL_MAX (1u << 20)

/* Open the synced env named `name` under the store's directory. */
static int store__aux_open(
    store *s, const char *name, MDB_env **env, MDB_dbi *dbi, size_t map)
{
    char *p = store__path(s->dir, name);
    if (p == NULL)
        return -ENOMEM;
    int rc = store__env_open(env, dbi, p, map, 0);
    free(p);
    return rc;
}

int store__sys_open(store *s)
{
    return store__aux_open(s, "system", &s->sys_env, &s->sys_dbi,
                           STORE__SYS_MAP);
}

int store__hint_open(store *s)
{
    int rc = store__aux_open(s, "hints", &s->hint_env, &s->hint_dbi,
                             STORE__HINT_MAP);
    if (rc)
        return rc;
    MDB_txn *txn;
    rc = mdb_txn_begin(s->hint_env, NULL, MDB_RDONLY, &txn);
    if (rc)
        return store__err(rc);
    MDB_val k = {1, "B"}, v;
    if (mdb_get(txn, s->hint_dbi, &k, &v) == 0 && v.mv_size == 8)
        s->hint_bytes = store__get64(v.mv_data);
    mdb_txn_abort(txn);
    return 0;
}

static int store__range_cmp(const void *a, const void *b)
{
    const struct store__range *x = *(struct store__range *const *)a;
    const struct store__range *y = *(struct store__range *const *)b;
    return x->r.end < y->r.end ? -1 : x->r.end > y->r.end;
}

int store__map_load(store *s)
{
    MDB_txn *txn;
    MDB_cursor *cur;
    MDB_val k, v;
    int rc = mdb_txn_begin(s->sys_env, NULL, MDB_RDONLY, &txn);
    if (rc)
        return store__err(rc);
    if ((rc = mdb_cursor_open(txn, s->sys_dbi, &cur))) {
        mdb_txn_abort(txn);
        return store__err(rc);
    }
    k.mv_size = 1;
    k.mv_data = "r";
    rc = mdb_cursor_get(cur, &k, &v, MDB_SET_RANGE);
    for (; rc == 0; rc = mdb_cursor_get(cur, &k, &v, MDB_NEXT)) {
        const uint8_t *kp = k.mv_data;
        if (k.mv_size == 0 || kp[0] != 'r')
            break;
        if (k.mv_size != 17 || v.mv_size == 0 || v.mv_size > 511) {
            rc = RK_ECORRUPT;
            goto done;
        }
        struct store_range r = {store__get64(kp + 1), store__get64(kp + 9)};
        char name[512];
        memcpy(name, v.mv_data, v.mv_size);
        name[v.mv_size] = 0;
        /* "name" or "name\0prev": a rename from prev was under way. */
        const char *prev =
            strlen(name) < v.mv_size ? name + strlen(name) + 1 : NULL;
        if (name[0] == 0 || strchr(name, '/') != NULL || name[0] == '.' ||
            (prev && (prev[0] == 0 || strchr(prev, '/') || prev[0] == '.'))) {
            rc = RK_ECORRUPT;
            goto done;
        }
        char *dir = store__range_dirname(s, r, name);
        if (dir != NULL && prev != NULL) {
            rc = store__finish_rename(s, r, dir, prev);
            if (rc) {
                free(dir);
                goto done;
            }
        }
        struct stat st;
        if (dir != NULL && stat(dir, &st) != 0) {
            free(dir);
            rc = RK_ECORRUPT; /* the map names an env that is gone */
            goto done;
        }
        struct store__range **nr =
            realloc(s->ranges, (s->nranges + 1) * sizeof(*nr));
        if (dir == NULL || nr == NULL) {
            free(dir);
            if (nr)
                s->ranges = nr;
            rc = -ENOMEM;
            goto done;
        }
        s->ranges = nr;
        struct store__range *rr;
        rc = store__range_open(&rr, s, r, dir);
        free(dir);
        if (rc)
            goto done;
        s->ranges[s->nranges++] = rr;
    }
    rc = rc == MDB_NOTFOUND ? 0 : store__err(rc);
    if (s->nranges > 1)
        qsort(s->ranges, s->nranges, sizeof(*s->ranges), store__range_cmp);
    for (size_t i = 0; rc == 0 && i + 1 < s->nranges; i++)
        if (store_range_contains(s->ranges[i]->r, s->ranges[i + 1]->r.end) ||
            store_range_contains(s->ranges[i + 1]->r, s->ranges[i]->r.end))
            rc = RK_ECORRUPT; /* overlapping ranges in the map */
done:
    mdb_cursor_close(cur);
    mdb_txn_abort(txn);
    return rc;
}

static void store__mapkey(uint8_t *k, struct store_range r)
{
    k[0] = 'r';
    store__be64(k + 1, r.start);
    store__be64(k + 9, r.end);
}

int store__map_put(store *s,
                   const struct store_range *add,
                   size_t nadd,
                   const char *const *dirs,
                   const char *const *prevs,
                   const struct store_range *del,
                   size_t ndel)
{
    MDB_txn *txn;
    uint8_t kb[17];
    int rc = mdb_txn_begin(s->sys_env, NULL, 0, &txn);
    if (rc)
        return store__err(rc);
    for (size_t i = 0; i < ndel; i++) {
        store__mapkey(kb, del[i]);
        MDB_val k = {17, kb};
        rc = mdb_del(txn, s->sys_dbi, &k, NULL);
        if (rc && rc != MDB_NOTFOUND)
            goto abort;
    }
    for (size_t i = 0; i < nadd; i++) {
        const char *base = strrchr(dirs[i], '/');
        base = base ? base + 1 : dirs[i];
        const char *prev = prevs ? prevs[i] : NULL;
        if (prev && strrchr(prev, '/'))
            prev = strrchr(prev, '/') + 1;
        char vb[512];
        int vl = prev ? snprintf(vb, sizeof(vb), "%s%c%s", base, 0, prev)
                      : snprintf(vb, sizeof(vb), "%s", base);
        if (vl <= 0 || (size_t)vl >= sizeof(vb)) {
            rc = EINVAL;
            goto abort;
        }
        store__mapkey(kb, add[i]);
        MDB_val k = {17, kb}, v = {(size_t)vl, vb};
        if ((rc = mdb_put(txn, s->sys_dbi, &k, &v, 0)))
            goto abort;
    }
    return store__err(mdb_txn_commit(txn));
abort:
    mdb_txn_abort(txn);
    return store__err(rc);
}

/* ---- Caller's values ---------------------------------------------------- */

static int store__sysname(uint8_t *kb, size_t *klen, const char *name)
{
    size_t n = name ? strlen(name) : 0;
    if (n == 0 || n > STORE__NAME_MAX)
        return RK_EBADREQ;
    kb[0] = 'u';
    memcpy(kb + 1, name, n);
    *klen = n + 1;
    return 0;
}

int store_sys_write(store *s,
                    const char *const *names,
                    const struct rk_slice *vals,
                    size_t n)
{
    uint8_t kb[STORE__NAME_MAX + 1];
    size_t kl;
    int rc = 0;
    for (size_t i = 0; i < n && rc == 0; i++)
        if ((rc = store__sysname(kb, &kl, names[i])) == 0 &&
            vals[i].len > STORE__SYSVAL_MAX)
            rc = RK_ETOOLARGE;
    if (rc)
        return rc;
    MDB_txn *txn;
    if ((rc = mdb_txn_begin(s->sys_env, NULL, 0, &txn)))
        return store__err(rc);
    for (size_t i = 0; i < n && rc == 0; i++) {
        store__sysname(kb, &kl, names[i]);
        MDB_val k = {kl, kb}, v = {vals[i].len, (void *)vals[i].p};
        rc = vals[i].p ? mdb_put(txn, s->sys_dbi, &k, &v, 0)
                       : mdb_del(txn, s->sys_dbi, &k, NULL);
        if (rc == MDB_NOTFOUND)
            rc = 0;
    }
    if (rc) {
        mdb_txn_abort(txn);
        return store__err(rc);
    }
    return store__err(mdb_txn_commit(txn));
}

int store_sys_set(store *s, const char *name, struct rk_slice val)
{
    if (val.p == NULL) /* an empty value, not a delete */
        val.p = (const uint8_t *)"";
    return store_sys_write(s, &name, &val, 1);
}

int store_sys_get(uint8_t **out, size_t *out_len, store *s, const char *name)
{
    uint8_t kb[STORE__NAME_MAX + 1];
    size_t kl;
    int rc = store__sysname(kb, &kl, name);
    if (rc)
        return rc;
    MDB_txn *txn;
    MDB_val k = {kl, kb}, v;
    if ((rc = mdb_txn_begin(s->sys_env, NULL, MDB_RDONLY, &txn)))
        return store__err(rc);
    rc = store__err(mdb_get(txn, s->sys_dbi, &k, &v));
    if (rc == 0) {
        *out = malloc(v.mv_size ? v.mv_size : 1);
        if (*out == NULL) {
            rc = -ENOMEM;
        } else {
            memcpy(*out, v.mv_data, v.mv_size);
            *out_len = v.mv_size;
        }
    }
    mdb_txn_abort(txn);
    return rc;
}

int store_sys_del(store *s, const char *name)
{
    uint8_t kb[STORE__NAME_MAX + 1];
    size_t kl;
    int rc = store__sysname(kb, &kl, name);
    if (rc)
        return rc;
    MDB_txn *txn;
    MDB_val k = {kl, kb};
    if ((rc = mdb_txn_begin(s->sys_env, NULL, 0, &txn)))
        return store__err(rc);
    if ((rc = mdb_del(txn, s->sys_dbi, &k, NULL))) {
        mdb_txn_abort(txn);
        return store__err(rc);
    }
    return store__err(mdb_txn_commit(txn));
}

void store_sys_u64_value(uint8_t out[8], uint64_t v)
{
    store__be64(out, v);
}

int store_sys_set_u64(store *s, const char *name, uint64_t v)
{
    uint8_t b[8];
    store_sys_u64_value(b, v);
    return store_sys_set(s, name, RK_SLICE(b, 8));
}

int store_sys_get_u64(uint64_t *out, store *s, const char *name)
{
    uint8_t *p;
    size_t n;
    int rc = store_sys_get(&p, &n, s, name);
    if (rc)
        return rc;
    if (n == 8)
        *out = store__get64(p);
    else
        rc = RK_ECORRUPT;
    free(p);
    return rc;
}

int store_sys_set_tokens(store *s,
                         const char *name,
                         const uint64_t *tokens,
                         size_t n)
{
    if (n > STORE__SYSVAL_MAX / 8)
        return RK_ETOOLARGE;
    uint8_t *b = malloc(n ? n * 8 : 1);
    if (b == NULL)
        return -ENOMEM;
    for (size_t i = 0; i < n; i++)
        store__be64(b + 8 * i, tokens[i]);
    int rc = store_sys_set(s, name, RK_SLICE(b, n * 8));
    free(b);
    return rc;
}

int store_sys_get_tokens(uint64_t **out,
                         size_t *out_n,
                         store *s,
                         const char *name)
{
    uint8_t *p;
    size_t n;
    int rc = store_sys_get(&p, &n, s, name);
    if (rc)
        return rc;
    if (n % 8 != 0) {
        free(p);
        return RK_ECORRUPT;
    }
    *out = NULL;
    *out_n = n / 8;
    if (n > 0) {
        *out = malloc(n / 8 * sizeof(uint64_t));
        if (*out == NULL) {
            free(p);
            return -ENOMEM;
        }
        for (size_t i = 0; i < n / 8; i++)
            (*out)[i] = store__get64(p + 8 * i);
    }
    free(p);
    return 0;
}

/* ---- Hints -------------------------------------------------------------- */

/* 'h'|'c' + u8 len + node [+ BE seq]; returns the prefix length or error. */
static int store__hkey(uint8_t *kb, char tag, const char *node)
{
    size_t n = node ? strlen(node) : 0;
    if (n == 0 || n > 255)
        return RK_EBADREQ;
    kb[0] = (uint8_t)tag;
    kb[1] = (uint8_t)n;
    memcpy(kb + 2, node, n);
    return (int)(n + 2);
}

static uint64_t store__u64_at(MDB_txn *txn, MDB_dbi dbi, MDB_val *k)
{
    MDB_val v;
    if (mdb_get(txn, dbi, k, &v) == 0 && v.mv_size == 8)
        return store__get64(v.mv_data);
    return 0;
}

static int store__put_u64(MDB_txn *txn, MDB_dbi dbi, MDB_val *k, uint64_t x)
{
    uint8_t b[8];
    store__be64(b, x);
    MDB_val v = {8, b};
    return mdb_put(txn, dbi, k, &v, 0);
}

/* Put one hint in txn (hintmu held): *bytes grows by what it keeps.
 * RK_EFULL past max_hints / max_hint_bytes; an LMDB error fails the txn. */
static int store__hint_put(store *s,
                           MDB_txn *txn,
                           const struct store_hint *h,
                           size_t *bytes,
                           bool *txn_failed)
{
    uint8_t kb[2 + 255 + 8], cb[2 + 255];
    int pl = store__hkey(kb, 'h', h->node);
    if (pl < 0)
        return pl;
    store__hkey(cb, 'c', h->node);
    int rc = store__check_write(h->key, h->rec);
    if (rc)
        return rc;
    size_t vlen = 4 + h->key.len + h->rec.len;
    MDB_cursor *cur;
    MDB_val ck = {(size_t)pl, cb}, bk = {1, "B"};
    uint64_t count = store__u64_at(txn, s->hint_dbi, &ck);
    if (count >= s->o.max_hints ||
        s->hint_bytes + *bytes + vlen > s->o.max_hint_bytes)
        return RK_EFULL;
    *txn_failed = true; /* from here an error leaves the txn unusable */
    /* The next seq: one past the node's last hint. */
    uint64_t seq = 1;
    memset(kb + pl, 0xff, 8);
    MDB_val k = {(size_t)pl + 8, kb}, v;
    if ((rc = mdb_cursor_open(txn, s->hint_dbi, &cur)))
        return store__err(rc);
    int crc = mdb_cursor_get(cur, &k, &v, MDB_SET_RANGE);
    crc = crc == 0 ? mdb_cursor_get(cur, &k, &v, MDB_PREV)
                   : mdb_cursor_get(cur, &k, &v, MDB_LAST);
    if (crc == 0 && k.mv_size == (size_t)pl + 8 &&
        memcmp(k.mv_data, kb, (size_t)pl) == 0)
        seq = store__get64((const uint8_t *)k.mv_data + pl) + 1;
    mdb_cursor_close(cur);
    store__be64(kb + pl, seq);
    k.mv_size = (size_t)pl + 8;
    k.mv_data = kb;
    v.mv_size = vlen;
    if ((rc = mdb_put(txn, s->hint_dbi, &k, &v, MDB_RESERVE)))
        return store__err(rc);
    uint8_t *p = v.mv_data;
    p[0] = (uint8_t)(h->key.len >> 24);
    p[1] = (uint8_t)(h->key.len >> 16);
    p[2] = (uint8_t)(h->key.len >> 8);
    p[3] = (uint8_t)h->key.len;
    memcpy(p + 4, h->key.p, h->key.len);
    memcpy(p + 4 + h->key.len, h->rec.p, h->rec.len);
    if ((rc = store__put_u64(txn, s->hint_dbi, &ck, count + 1)) ||
        (rc = store__put_u64(txn, s->hint_dbi, &bk,
                             s->hint_bytes + *bytes + vlen)))
        return store__err(rc);
    *txn_failed = false;
    *bytes += vlen;
    return 0;
}

int store_hint_add_many(store *s, struct store_hint *h, size_t n)
{
    MDB_txn *txn;
    size_t bytes = 0, kept = 0;
    pthread_mutex_lock(&s->hintmu);
    int rc = mdb_txn_begin(s->hint_env, NULL, 0, &txn);
    if (rc) {
        rc = store__err(rc);
        goto unlock;
    }
    for (size_t i = 0; i < n; i++) {
        bool failed = false;
        h[i].result = store__hint_put(s, txn, &h[i], &bytes, &failed);
        if (failed) { /* the txn is gone: nothing of it is kept */
            rc = h[i].result;
            mdb_txn_abort(txn);
            goto unlock;
        }
        kept += h[i].result == 0;
    }
    if (kept == 0) {
        mdb_txn_abort(txn);
        goto unlock;
    }
    if ((rc = mdb_txn_commit(txn)) == 0)
        s->hint_bytes += bytes;
    rc = store__err(rc);
unlock:
    pthread_mutex_unlock(&s->hintmu);
    if (rc)
        for (size_t i = 0; i < n; i++)
            h[i].result = rc;
    return rc;
}

int store_hint_add(store *s,
                   const char *node,
                   struct rk_slice key,
                   struct rk_slice rec)
{
    struct store_hint h = {.node = node, .key = key, .rec = rec};
    int rc = store_hint_add_many(s, &h, 1);
    return rc ? rc : h.result;
}

static int
store__hint_split(struct rk_slice *key, struct rk_slice *rec, const MDB_val *v)
{
    const uint8_t *p = v->mv_data;
    if (v->mv_size < 4)
        return RK_ECORRUPT;
    size_t kl =
        (size_t)p[0] << 24 | (size_t)p[1] << 16 | (size_t)p[2] << 8 | p[3];
    if (v->mv_size - 4 < kl)
        return RK_ECORRUPT;
    *key = RK_SLICE(p + 4, kl);
    *rec = RK_SLICE(p + 4 + kl, v->mv_size - 4 - kl);
    return 0;
}

int store_hint_scan(store *s,
                    const char *node,
                    uint64_t after_seq,
                    size_t max,
                    store_hint_cb cb,
                    void *arg)
{
    uint8_t kb[2 + 255 + 8];
    int pl = store__hkey(kb, 'h', node);
    if (pl < 0)
        return pl;
    if (after_seq == UINT64_MAX || max == 0)
        return 0;
    store__be64(kb + pl, after_seq + 1);
    MDB_txn *txn;
    MDB_cursor *cur;
    MDB_val k = {(size_t)pl + 8, kb}, v;
    int rc = mdb_txn_begin(s->hint_env, NULL, MDB_RDONLY, &txn);
    if (rc)
        return store__err(rc);
    if ((rc = mdb_cursor_open(txn, s->hint_dbi, &cur))) {
        mdb_txn_abort(txn);
        return store__err(rc);
    }
    size_t n = 0;
    rc = mdb_cursor_get(cur, &k, &v, MDB_SET_RANGE);
    for (; rc == 0 && n < max; rc = mdb_cursor_get(cur, &k, &v, MDB_NEXT)) {
        if (k.mv_size != (size_t)pl + 8 || memcmp(k.mv_data, kb, (size_t)pl))
            break;
        struct rk_slice key, rec;
        if (store__hint_split(&key, &rec, &v)) {
            /* damaged: passed on, to be dropped (store.h) */
            key = RK_SLICE(v.mv_data, 0);
            rec = RK_SLICE(v.mv_data, v.mv_size);
        }
        rc = cb(store__get64((const uint8_t *)k.mv_data + pl), key, rec, arg);
        if (rc)
            goto done;
        n++;
    }
    rc = rc == MDB_NOTFOUND ? 0 : store__err(rc);
done:
    mdb_cursor_close(cur);
    mdb_txn_abort(txn);
    return rc;
}

/* Delete the node's hints numbered seqs[0..n) in txn (kb[0..pl) is the
 * node's hint key prefix, with room for a seq); a seq not kept is skipped.
 * Counts what went. */
static int store__hint_del_seqs(store *s,
                                MDB_txn *txn,
                                uint8_t *kb,
                                size_t pl,
                                const uint64_t *seqs,
                                size_t n,
                                uint64_t *gone,
                                uint64_t *bytes)
{
    for (size_t i = 0; i < n; i++) {
        store__be64(kb + pl, seqs[i]);
        MDB_val k = {pl + 8, kb}, v;
        int rc = mdb_get(txn, s->hint_dbi, &k, &v);
        if (rc == MDB_NOTFOUND)
            continue;
        if (rc == 0) {
            *bytes += v.mv_size;
            rc = mdb_del(txn, s->hint_dbi, &k, NULL);
        }
        if (rc)
            return rc;
        (*gone)++;
    }
    return 0;
}

int store_hint_delete_seqs(store *s,
                           const char *node,
                           const uint64_t *seqs,
                           size_t n)
{
    uint8_t kb[2 + 255 + 8], cb[2 + 255];
    int pl = store__hkey(kb, 'h', node);
    if (pl < 0)
        return pl;
    store__hkey(cb, 'c', node);
    MDB_txn *txn;
    MDB_val ck = {(size_t)pl, cb}, bk = {1, "B"};
    uint64_t bytes = 0, gone = 0;
    pthread_mutex_lock(&s->hintmu);
    int rc = mdb_txn_begin(s->hint_env, NULL, 0, &txn);
    if (rc)
        goto unlock;
    rc = store__hint_del_seqs(s, txn, kb, (size_t)pl, seqs, n, &gone, &bytes);
    if (rc)
        goto abort;
    uint64_t count = store__u64_at(txn, s->hint_dbi, &ck);
    uint64_t nb = s->hint_bytes > bytes ? s->hint_bytes - bytes : 0;
    rc = count > gone ? store__put_u64(txn, s->hint_dbi, &ck, count - gone)
                      : mdb_del(txn, s->hint_dbi, &ck, NULL);
    if (rc && rc != MDB_NOTFOUND)
        goto abort;
    if ((rc = store__put_u64(txn, s->hint_dbi, &bk, nb)))
        goto abort;
    if ((rc = mdb_txn_commit(txn)) == 0)
        s->hint_bytes = nb;
    goto unlock;
abort:
    mdb_txn_abort(txn);
unlock:
    pthread_mutex_unlock(&s->hintmu);
    return store__err(rc);
}

int store_hint_count(uint64_t *out, store *s, const char *node)
{
    uint8_t cb[2 + 255];
    int pl = store__hkey(cb, 'c', node);
    if (pl < 0)
        return pl;
    MDB_txn *txn;
    MDB_val ck = {(size_t)pl, cb};
    int rc = mdb_txn_begin(s->hint_env, NULL, MDB_RDONLY, &txn);
    if (rc)
        return store__err(rc);
    *out = store__u64_at(txn, s->hint_dbi, &ck);
    mdb_txn_abort(txn);
    return 0;
}

int store_hint_clear(store *s, uint64_t *out_bytes)
{
    MDB_txn *txn;
    pthread_mutex_lock(&s->hintmu);
    uint64_t had = s->hint_bytes;
    int rc = mdb_txn_begin(s->hint_env, NULL, 0, &txn);
    if (rc == 0 && (rc = mdb_drop(txn, s->hint_dbi, 0)) != 0)
        mdb_txn_abort(txn);
    else if (rc == 0 && (rc = mdb_txn_commit(txn)) == 0)
        s->hint_bytes = 0;
    pthread_mutex_unlock(&s->hintmu);
    if (rc == 0 && out_bytes)
        *out_bytes = had;
    return store__err(rc);
}
