/*
 * store_fixture.h - what the store's unit runners share: a fresh directory
 * under $TMPDIR (or /tmp) per test, a store opened in it, records built
 * and read back by key, and an env opened with LMDB itself behind a closed
 * store's back. Header-only: each runner is one file (check_storage*.c).
 */
#ifndef TESTS_UNIT_STORE_FIXTURE_H
#define TESTS_UNIT_STORE_FIXTURE_H

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <check.h>
#include <lmdb.h>

#include "common/rk.h"
#include "storage/store.h"

static char tmpdir[256];

static inline void mk_tmp(void)
{
    const char *t = getenv("TMPDIR");
    snprintf(tmpdir, sizeof(tmpdir), "%s/rk_store_XXXXXX", t ? t : "/tmp");
    ck_assert_ptr_nonnull(mkdtemp(tmpdir));
}

static inline void rm_tmp(void)
{
    char cmd[300];
    snprintf(cmd, sizeof(cmd), "rm -rf '%s'", tmpdir);
    ck_assert_int_eq(system(cmd), 0);
}

static inline store *open_store(struct store_opts *o)
{
    struct store_opts d = STORE_OPTS_INIT;
    if (o == NULL)
        o = &d;
    o->data_dir = tmpdir;
    store *s = NULL;
    int rc = store_open(&s, o);
    ck_assert_msg(rc == 0, "store_open: %s", rk_strerror(rc));
    return s;
}

/* Encode a record into a heap buffer; *len set. */
static inline uint8_t *rec(size_t *len,
                           uint64_t ts,
                           uint8_t flags,
                           uint64_t exp,
                           const void *val,
                           size_t vlen)
{
    struct store_record r = {ts, flags, exp, RK_SLICE(val, vlen)};
    size_t n = store_record_size(&r);
    uint8_t *p = malloc(n);
    ck_assert_ptr_nonnull(p);
    ck_assert_int_eq(store_record_encode(p, n, len, &r), 0);
    return p;
}

static inline int put(store *s, const char *key, uint64_t ts, const char *val)
{
    size_t n;
    uint8_t *r = rec(&n, ts, val ? 0 : STORE_REC_TOMBSTONE, 0, val,
                     val ? strlen(val) : 0);
    int rc = store_put(s, RK_SLICE(key, strlen(key)), RK_SLICE(r, n));
    free(r);
    return rc;
}

/* The value of key at now, as a malloc'd C string, or NULL. */
static char *get(store *s, const char *key, uint64_t now)
{
    uint8_t *p;
    size_t n;
    int rc = store_get(&p, &n, s, RK_SLICE(key, strlen(key)), now);
    if (rc == RK_ENOTFOUND)
        return NULL;
    ck_assert_msg(rc == 0, "get %s: %s", key, rk_strerror(rc));
    struct store_record r;
    ck_assert_int_eq(store_record_decode(&r, p, n), 0);
    char *v = malloc(r.value.len + 1);
    memcpy(v, r.value.p, r.value.len);
    v[r.value.len] = 0;
    free(p);
    return v;
}

static inline void expect(store *s, const char *key, const char *val)
{
    char *v = get(s, key, 1);
    if (val == NULL)
        ck_assert_msg(v == NULL, "%s: expected absent, got %s", key, v);
    else
        ck_assert_msg(v && strcmp(v, val) == 0, "%s: expected %s got %s", key,
                      val, v ? v : "(absent)");
    free(v);
}

static const struct store_range WHOLE = {0, 0};

/* Open a raw LMDB env (the store must be closed). */
static inline MDB_txn *raw_begin(MDB_env **env, MDB_dbi *dbi, const char *path)
{
    MDB_txn *txn;
    ck_assert_int_eq(mdb_env_create(env), 0);
    ck_assert_int_eq(mdb_env_open(*env, path, 0, 0644), 0);
    ck_assert_int_eq(mdb_txn_begin(*env, NULL, 0, &txn), 0);
    ck_assert_int_eq(mdb_dbi_open(txn, NULL, 0, dbi), 0);
    return txn;
}

/* v as 8 bytes, big-endian (a stored key's token, a hint's seq). */
static inline void be64(uint8_t *p, uint64_t v)
{
    for (int i = 7; i >= 0; i--, v >>= 8)
        p[i] = (uint8_t)v;
}

#endif
