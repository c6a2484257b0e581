/*
 * check_scan.c - SCAN's pure parts: the glob matcher (common/glob.h)
 * against known cases and, exhaustively over small inputs, against a
 * direct port of Redis's recursive stringmatchlen; the walk's segments
 * and the merge of replica answers (coord/scan_merge.h), by cases and
 * against a brute-force model on random replicas.
 */
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <check.h>

#include "common/glob.h"
#include "common/rk.h"
#include "coord/scan_merge.h"
#include "rng.h"
#include "wire/rpc_msg.h"

/* ---- the glob matcher ---------------------------------------------------- */

static bool m(const char *pat, const char *s)
{
    return rk_glob_match(RK_SLICE(pat, strlen(pat)), RK_SLICE(s, strlen(s)),
                         false);
}

START_TEST(glob_cases)
{
    ck_assert(m("", ""));
    ck_assert(!m("", "a"));
    ck_assert(m("*", ""));
    ck_assert(m("*", "anything"));
    ck_assert(m("**", "x"));
    ck_assert(m("a*", "a"));
    ck_assert(m("a*", "abc"));
    ck_assert(!m("a*", "ba"));
    ck_assert(m("*c", "abc"));
    ck_assert(m("a*c", "abbbc"));
    ck_assert(!m("a*c", "abbbd"));
    ck_assert(m("h?llo", "hello"));
    ck_assert(!m("h?llo", "hllo"));
    ck_assert(m("h*llo", "hllo"));
    ck_assert(m("h[ae]llo", "hallo"));
    ck_assert(!m("h[ae]llo", "hillo"));
    ck_assert(m("h[^e]llo", "hallo"));
    ck_assert(!m("h[^e]llo", "hello"));
    ck_assert(m("h[a-b]llo", "hbllo"));
    ck_assert(m("h[b-a]llo", "hallo")); /* ends in either order */
    ck_assert(!m("h[a-b]llo", "hcllo"));
    ck_assert(m("\\*", "*"));
    ck_assert(!m("\\*", "a"));
    ck_assert(m("[\\]]", "]"));
    /* as Redis: a-] is a range (']' to 'a'), and the class is left open */
    ck_assert(m("[a-]", "a"));
    ck_assert(m("[a-]", "]"));
    ck_assert(!m("[a-]", "-"));
    ck_assert(m("key:[0-9][0-9]", "key:42"));
    ck_assert(m("[abc", "b")); /* an open class runs to the end */
    ck_assert(!m("[", "a"));
    ck_assert(m("a\\", "a\\")); /* a trailing backslash is itself */
    ck_assert(m("*a*a*a*a*a*a*a*a*b", "aaaaaaaaaaaaaaaaaaaaab"));
    ck_assert(rk_glob_match(RK_SLICE("HeLLo*", 6), RK_SLICE("hello world", 11),
                            true));
    ck_assert(!rk_glob_match(RK_SLICE("HeLLo*", 6), RK_SLICE("hello world", 11),
                             false));
    ck_assert(rk_glob_match(RK_SLICE("[A-C]x", 6), RK_SLICE("bX", 2), true));
    /* bytes, not strings: a NUL is a byte like any other */
    ck_assert(rk_glob_match(RK_SLICE("a?c", 3), RK_SLICE("a\0c", 3), false));
}
END_TEST

/* The matcher backtracks to the last star only: a pattern that makes a
 * recursive matcher take exponential time is answered (false) here after
 * at most len(pattern) * len(string) steps. */
START_TEST(glob_no_blowup)
{
    char pat[64] = "", s[20001];
    for (int i = 0; i < 20; i++)
        strcat(pat, "*a");
    strcat(pat, "*b");
    memset(s, 'a', sizeof(s) - 1);
    s[sizeof(s) - 1] = '\0';
    ck_assert(!m(pat, s));
    s[sizeof(s) - 2] = 'b';
    ck_assert(m(pat, s));
}
END_TEST

/* A trailing star ends the match: "prefix*" is a prefix test, whatever
 * follows the prefix in the key. */
START_TEST(glob_prefix)
{
    ck_assert(m("user:*", "user:"));
    ck_assert(m("user:*", "user:42*?["));
    ck_assert(!m("user:*", "user"));
    ck_assert(!m("user:*", "usex:42"));
    ck_assert(m("us?r:**", "user:42"));
    ck_assert(m("a\\\\*", "a\\bc")); /* an escaped backslash, then a star */
    ck_assert(!m("a\\\\*", "abc"));
    ck_assert(m("a\\*", "a*")); /* an escaped star is no star */
    ck_assert(!m("a\\*", "ab"));
    ck_assert(m("[ab]*", "b:x"));
    ck_assert(!m("[ab]*", ""));
}
END_TEST

/* Redis's stringmatchlen (util.c), recursion and all, as the reference. */
static int redis_match(const char *pattern,
                       int patternLen,
                       const char *string,
                       int stringLen,
                       int nocase)
{
    while (patternLen && stringLen) {
        switch (pattern[0]) {
        case '*':
            while (patternLen && pattern[1] == '*') {
                pattern++;
                patternLen--;
            }
            if (patternLen == 1)
                return 1;
            while (stringLen) {
                if (redis_match(pattern + 1, patternLen - 1, string, stringLen,
                                nocase))
                    return 1;
                string++;
                stringLen--;
            }
            return 0;
        case '?':
            string++;
            stringLen--;
            break;
        case '[': {
            int not, match;
            pattern++;
            patternLen--;
            not = patternLen && pattern[0] == '^';
            if (not ) {
                pattern++;
                patternLen--;
            }
            match = 0;
            while (1) {
                if (patternLen >= 2 && pattern[0] == '\\') {
                    pattern++;
                    patternLen--;
                    if (pattern[0] == string[0])
                        match = 1;
                } else if (patternLen == 0) {
                    pattern--;
                    patternLen++;
                    break;
                } else if (pattern[0] == ']') {
                    break;
                } else if (patternLen >= 3 && pattern[1] == '-') {
                    int start = (unsigned char)pattern[0];
                    int end = (unsigned char)pattern[2];
                    int c = (unsigned char)string[0];
                    if (start > end) {
                        int t = start;
                        start = end;
                        end = t;
                    }
                    pattern += 2;
                    patternLen -= 2;
                    if (c >= start && c <= end)
                        match = 1;
                } else if (pattern[0] == string[0]) {
                    match = 1;
                }
                pattern++;
                patternLen--;
            }
            if (not )
                match = !match;
            if (!match)
                return 0;
            string++;
            stringLen--;
            break;
        }
        case '\\':
            if (patternLen >= 2) {
                pattern++;
                patternLen--;
            }
            /* fall through */
        default:
            if (pattern[0] != string[0])
                return 0;
            string++;
            stringLen--;
            break;
        }
        pattern++;
        patternLen--;
        if (stringLen == 0) {
            while (patternLen && *pattern == '*') {
                pattern++;
                patternLen--;
            }
            break;
        }
    }
    return patternLen == 0 && stringLen == 0;
}

/* Every pattern of up to 5 symbols over a glob-rich alphabet against
 * every string of 1 to 4 bytes over a small one: the same answer as
 * Redis's matcher. (The empty string differs: Redis matches it with no
 * pattern at all, not even "*"; a ringkv key is never empty.) */
START_TEST(glob_matches_redis_exhaustively)
{
    static const char pa[] = "ab*?[]^-\\";
    static const char sa[] = "ab-]";
    const int np = (int)sizeof(pa) - 1, ns = (int)sizeof(sa) - 1;
    char p[8], s[8];
    long cases = 0;
    for (int pl = 0; pl <= 5; pl++) {
        long ptotal = 1;
        for (int i = 0; i < pl; i++)
            ptotal *= np;
        for (long pi = 0; pi < ptotal; pi++) {
            long v = pi;
            for (int i = 0; i < pl; i++, v /= np)
                p[i] = pa[v % np];
            for (int sl = 1; sl <= 4; sl++) {
                long stotal = 1;
                for (int i = 0; i < sl; i++)
                    stotal *= ns;
                for (long si = 0; si < stotal; si++) {
                    long w = si;
                    for (int i = 0; i < sl; i++, w /= ns)
                        s[i] = sa[w % ns];
                    bool want = redis_match(p, pl, s, sl, 0) != 0;
                    bool got = rk_glob_match(RK_SLICE(p, (size_t)pl),
                                             RK_SLICE(s, (size_t)sl), false);
                    if (want != got)
                        ck_abort_msg("pattern [%.*s] string [%.*s]: redis "
                                     "%d, ours %d",
                                     pl, p, sl, s, want, got);
                    cases++;
                }
            }
        }
    }
    ck_assert(cases > 1000000);
}
END_TEST

/* ---- the walk -------------------------------------------------------------
 */

START_TEST(segments)
{
    uint64_t s, e;
    scan_segment(&s, &e, 0, 100); /* the first arc, from token 0 */
    ck_assert(s == UINT64_MAX && e == 100);
    scan_segment(&s, &e, 50, 100);
    ck_assert(s == 49 && e == 100);
    scan_segment(&s, &e, 101, 100); /* past the last token: to the end */
    ck_assert(s == 100 && e == UINT64_MAX);
    scan_segment(&s, &e, 0, UINT64_MAX); /* one arc: the whole ring */
    ck_assert(s == UINT64_MAX && e == UINT64_MAX);
    scan_segment(&s, &e, UINT64_MAX, 7);
    ck_assert(s == UINT64_MAX - 1 && e == UINT64_MAX);
}
END_TEST

/* ---- the merge ------------------------------------------------------------
 */

struct ver {
    const char *key;
    uint64_t ts;
    bool tomb;
    uint64_t expiry;
};

static int by_token(const void *a, const void *b)
{
    const struct ver *x = a, *y = b;
    uint64_t tx = rk_token(x->key, strlen(x->key));
    uint64_t ty = rk_token(y->key, strlen(y->key));
    return tx < ty ? -1 : tx > ty;
}

/* An answer's items: vers sorted by token and encoded. */
static struct rpc_buf items_of(struct ver *v, size_t n)
{
    struct rpc_buf b = RPC_BUF_INIT;
    qsort(v, n, sizeof(*v), by_token);
    for (size_t i = 0; i < n; i++) {
        struct rpc_record r = {.ts = v[i].ts,
                               .flags = v[i].tomb ? RPC_REC_TOMBSTONE : 0,
                               .expiry = v[i].expiry,
                               .value = RK_SLICE("", 0)};
        ck_assert_int_eq(
            rpc_stream_item_add(&b, RK_SLICE(v[i].key, strlen(v[i].key)), &r),
            0);
    }
    return b;
}

struct got {
    char keys[256][16];
    size_t n;
};

static int collect(struct rk_slice key, void *arg)
{
    struct got *g = arg;
    ck_assert(g->n < 256 && key.len < 16);
    memcpy(g->keys[g->n], key.p, key.len);
    g->keys[g->n++][key.len] = '\0';
    return 0;
}

static bool has(const struct got *g, const char *k)
{
    for (size_t i = 0; i < g->n; i++)
        if (strcmp(g->keys[i], k) == 0)
            return true;
    return false;
}

START_TEST(merge_resolves_versions)
{
    /* replica A: a (ts 5), b (ts 5), c (ts 9 expired at 1000), d (ts 1)
     * replica B: a tombstone (ts 6), b (ts 4), e (ts 2), d tombstone (ts 1,
     * a tie: the tombstone wins) */
    struct ver a[] = {{"a", 5, false, 0},
                      {"b", 5, false, 0},
                      {"c", 9, false, 1000},
                      {"d", 1, false, 0}};
    struct ver b[] = {{"a", 6, true, 0},
                      {"b", 4, false, 0},
                      {"e", 2, false, 0},
                      {"d", 1, true, 0}};
    struct rpc_buf ia = items_of(a, 4), ib = items_of(b, 4);
    struct scan_answer ans[2] = {
        {.done = true, .items = RK_SLICE(ia.data, ia.len)},
        {.done = true, .items = RK_SLICE(ib.data, ib.len)}};
    struct got g = {.n = 0};
    bool done = false;
    uint64_t next = 1;
    ck_assert_int_eq(scan_merge(&done, &next, UINT64_MAX, UINT64_MAX, ans, 2,
                                2000, collect, &g),
                     0);
    ck_assert(done);
    ck_assert_uint_eq(g.n, 2);
    ck_assert(has(&g, "b") && has(&g, "e"));
    /* each emitted once, in token order */
    ck_assert(rk_token("b", 1) < rk_token("e", 1)
                  ? strcmp(g.keys[0], "b") == 0
                  : strcmp(g.keys[0], "e") == 0);
    /* before its expiry c is live */
    g.n = 0;
    ck_assert_int_eq(scan_merge(&done, &next, UINT64_MAX, UINT64_MAX, ans, 2,
                                999, collect, &g),
                     0);
    ck_assert(has(&g, "c") && g.n == 3);
    rpc_buf_free(&ia);
    rpc_buf_free(&ib);
}
END_TEST

/* Keys past the least cover wait for the next round: the merged cover is
 * the least of the answers', and only keys inside it are emitted. */
START_TEST(merge_stops_at_least_cover)
{
    struct ver v[6] = {{"k0", 1, false, 0}, {"k1", 1, false, 0},
                       {"k2", 1, false, 0}, {"k3", 1, false, 0},
                       {"k4", 1, false, 0}, {"k5", 1, false, 0}};
    struct rpc_buf all = items_of(v, 6); /* sorted now */
    uint64_t t2 = rk_token(v[2].key, 2), t4 = rk_token(v[4].key, 2);
    /* A answered three keys and covers up to t2; B all six */
    struct rpc_buf a = items_of(v, 3);
    struct scan_answer ans[2] = {
        {.done = false, .next = t2 + 1, .items = RK_SLICE(a.data, a.len)},
        {.done = true, .items = RK_SLICE(all.data, all.len)}};
    struct got g = {.n = 0};
    bool done = true;
    uint64_t next = 0;
    ck_assert_int_eq(scan_merge(&done, &next, UINT64_MAX, UINT64_MAX, ans, 2, 0,
                                collect, &g),
                     0);
    ck_assert(!done && next == t2 + 1);
    ck_assert_uint_eq(g.n, 3);
    for (int i = 0; i < 3; i++)
        ck_assert_str_eq(g.keys[i], v[i].key);
    /* the next round starts at t2 + 1 */
    uint64_t s, e;
    scan_segment(&s, &e, next, UINT64_MAX);
    g.n = 0;
    ans[0] = (struct scan_answer){.done = true, .items = RK_SLICE(NULL, 0)};
    ck_assert_int_eq(scan_merge(&done, &next, s, e, ans, 1, 0, collect, &g), 0);
    ck_assert(done && g.n == 0);
    /* an answer with an item at or past its own cover is refused */
    ans[0] = (struct scan_answer){
        .done = false, .next = t4, .items = RK_SLICE(all.data, all.len)};
    ck_assert_int_eq(scan_merge(&done, &next, UINT64_MAX, UINT64_MAX, ans, 1, 0,
                                collect, &g),
                     RK_EPROTO);
    rpc_buf_free(&a);
    rpc_buf_free(&all);
}
END_TEST

START_TEST(merge_refuses_bad_answers)
{
    struct ver v[3] = {
        {"x", 1, false, 0}, {"y", 1, false, 0}, {"z", 1, false, 0}};
    struct rpc_buf b = items_of(v, 3);
    struct got g = {.n = 0};
    bool done;
    uint64_t next;
    /* out of order: the items reversed */
    struct rpc_buf r = RPC_BUF_INIT;
    for (int i = 2; i >= 0; i--) {
        struct rpc_record rec = {.ts = 1, .value = RK_SLICE("", 0)};
        rpc_stream_item_add(&r, RK_SLICE(v[i].key, 1), &rec);
    }
    struct scan_answer a = {.done = true, .items = RK_SLICE(r.data, r.len)};
    ck_assert_int_eq(
        scan_merge(&done, &next, UINT64_MAX, UINT64_MAX, &a, 1, 0, collect, &g),
        RK_EPROTO);
    /* outside the arc: an arc that ends before the first item */
    uint64_t t0 = rk_token(v[0].key, 1);
    a.items = RK_SLICE(b.data, b.len);
    ck_assert_int_eq(scan_merge(&done, &next, t0, t0 + 1 == 0 ? 1 : t0 + 1, &a,
                                1, 0, collect, &g),
                     RK_EPROTO);
    /* bytes that are not items */
    a.items = RK_SLICE("\xc1\xc1", 2);
    ck_assert_int_eq(
        scan_merge(&done, &next, UINT64_MAX, UINT64_MAX, &a, 1, 0, collect, &g),
        RK_EPROTO);
    /* a cover past the arc */
    a = (struct scan_answer){.done = false, .next = 50, .items = {NULL, 0}};
    ck_assert_int_eq(scan_merge(&done, &next, 10, 20, &a, 1, 0, collect, &g),
                     RK_EPROTO);
    ck_assert_int_eq(scan_merge(&done, &next, 10, 20, &a, 0, 0, collect, &g),
                     RK_EPROTO);
    rpc_buf_free(&b);
    rpc_buf_free(&r);
}
END_TEST

/* Random replicas of 40 keys (each holding a random subset with random
 * versions, covering a random prefix of the arc): the merge emits exactly
 * the keys the model says, each once, in token order. */
START_TEST(merge_matches_model)
{
    uint64_t seed = 0x5ca9 + (uint64_t)_i;
    char names[40][16];
    for (int k = 0; k < 40; k++)
        snprintf(names[k], sizeof(names[k]), "m%d", k);
    for (int round = 0; round < 200; round++) {
        int nrep = 1 + (int)(rng_next(&seed) % 3);
        struct ver v[3][40];
        size_t nv[3] = {0};
        struct rpc_buf b[3];
        struct scan_answer ans[3];
        uint64_t cover_min = UINT64_MAX; /* tokens below it covered */
        bool all_done = true;
        for (int r = 0; r < nrep; r++) {
            for (int k = 0; k < 40; k++) {
                if (rng_next(&seed) % 3 == 0)
                    continue;
                uint64_t x = rng_next(&seed);
                v[r][nv[r]++] =
                    (struct ver){names[k], 1 + x % 4, (x >> 8) % 4 == 0,
                                 (x >> 16) % 5 == 0 ? 50 : 0};
            }
            qsort(v[r], nv[r], sizeof(v[r][0]), by_token);
            bool done = rng_next(&seed) % 3 == 0 || nv[r] == 0;
            uint64_t next = 0;
            size_t keep = nv[r];
            if (!done) { /* covers the tokens up to one of its items */
                keep = 1 + rng_next(&seed) % nv[r];
                next =
                    rk_token(v[r][keep - 1].key, strlen(v[r][keep - 1].key)) +
                    1;
                all_done = false;
                if (next < cover_min)
                    cover_min = next;
            }
            b[r] = items_of(v[r], keep);
            ans[r] =
                (struct scan_answer){.done = done,
                                     .next = next,
                                     .items = RK_SLICE(b[r].data, b[r].len)};
        }
        struct got g = {.n = 0};
        bool done;
        uint64_t next;
        ck_assert_int_eq(scan_merge(&done, &next, UINT64_MAX, UINT64_MAX, ans,
                                    (size_t)nrep, 100, collect, &g),
                         0);
        ck_assert(done == all_done);
        if (!done)
            ck_assert(next == cover_min);
        /* the model: per key, the newest version among the replicas that
         * answered it within their cover, if the key is within all covers */
        size_t want = 0;
        for (int k = 0; k < 40; k++) {
            uint64_t t = rk_token(names[k], strlen(names[k]));
            if (!all_done && t >= cover_min)
                continue;
            bool any = false;
            struct ver best = {0};
            for (int r = 0; r < nrep; r++)
                for (size_t i = 0; i < nv[r]; i++) {
                    if (strcmp(v[r][i].key, names[k]) != 0)
                        continue;
                    struct ver c = v[r][i];
                    bool newer = !any || c.ts > best.ts ||
                                 (c.ts == best.ts && c.tomb && !best.tomb) ||
                                 (c.ts == best.ts && c.tomb == best.tomb &&
                                  (c.expiry ? c.expiry : UINT64_MAX) >
                                      (best.expiry ? best.expiry : UINT64_MAX));
                    if (newer)
                        best = c;
                    any = true;
                }
            bool live =
                any && !best.tomb && !(best.expiry && best.expiry <= 100);
            ck_assert_msg(live == has(&g, names[k]),
                          "seed %d round %d key %s: model %d", _i, round,
                          names[k], live);
            want += live;
        }
        ck_assert_uint_eq(g.n, want); /* each once */
        for (size_t i = 1; i < g.n; i++)
            ck_assert(rk_token(g.keys[i - 1], strlen(g.keys[i - 1])) <
                      rk_token(g.keys[i], strlen(g.keys[i])));
        for (int r = 0; r < nrep; r++)
            rpc_buf_free(&b[r]);
    }
}
END_TEST

static Suite *scan_suite(void)
{
    Suite *s = suite_create("scan");
    TCase *tc = tcase_create("glob");
    tcase_set_timeout(tc, 120);
    tcase_add_test(tc, glob_cases);
    tcase_add_test(tc, glob_no_blowup);
    tcase_add_test(tc, glob_prefix);
    tcase_add_test(tc, glob_matches_redis_exhaustively);
    suite_add_tcase(s, tc);
    tc = tcase_create("merge");
    tcase_add_test(tc, segments);
    tcase_add_test(tc, merge_resolves_versions);
    tcase_add_test(tc, merge_stops_at_least_cover);
    tcase_add_test(tc, merge_refuses_bad_answers);
    tcase_add_loop_test(tc, merge_matches_model, 0, 8);
    suite_add_tcase(s, tc);
    return s;
}

int main(void)
{
    SRunner *sr = srunner_create(scan_suite());
    srunner_run_all(sr, CK_NORMAL);
    int failed = srunner_ntests_failed(sr);
    srunner_free(sr);
    return failed == 0 ? EXIT_SUCCESS : EXIT_FAILURE;
}
