/*
 * ring.c - immutable ring snapshots: building, fingerprint, lookup,
 * placement and ownership.
 *
 * A snapshot precomputes everything a request needs: the placed tokens in
 * ascending order, a prefix index over them (the top `bits` bits of a token
 * select a bucket holding the index of the first token of that bucket), and
 * the replica list of every arc. A lookup is then one index load, usually no
 * more than one token comparison, and a copy of RF node indices: no walk, no
 * allocation. Building costs O(T log T + T * walk) for T placed tokens.
 */
#define XXH_STATIC_LINKING_ONLY /* XXH3_state_t on the stack */
#include "ring/ring.h"

#include <errno.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>

#include <xxhash.h>

#include "common/rk.h"
#include "ring/ring_internal.h"

/* ---- the snapshot ---------------------------------------------------------
 */

static const char ring__default_dc[] = "dc1";
static const char ring__default_rack[] = "rack1";

static void ring__destroy(ring *r)
{
    if (r->nodes) {
        for (size_t i = 0; i < r->nnodes; i++) {
            free(r->nodes[i].name);
            free(r->nodes[i].dc);
            free(r->nodes[i].rack);
            free(r->nodes[i].tokens);
        }
    }
    if (r->dcs)
        for (size_t i = 0; i < r->ndcs; i++)
            free(r->dcs[i]);
    if (r->repl_dcs)
        for (size_t i = 0; i < r->nrepl_dcs; i++)
            free((char *)r->repl_dcs[i].dc);
    free(r->nodes);
    free(r->dcs);
    free(r->repl_dcs);
    free(r->tok);
    free(r->tok_node);
    free(r->index);
    free(r->rep);
    free(r);
}

ring *ring_ref(ring *r)
{
    atomic_fetch_add_explicit(&r->refs, 1, memory_order_relaxed);
    return r;
}

void ring_free(ring *r)
{
    if (r == NULL)
        return;
    if (atomic_fetch_sub_explicit(&r->refs, 1, memory_order_acq_rel) == 1)
        ring__destroy(r);
}

/* ---- building -------------------------------------------------------------
 */

static int ring__cmp_node(const void *a, const void *b)
{
    return strcmp(((const struct ring__node *)a)->name,
                  ((const struct ring__node *)b)->name);
}

static int ring__cmp_str(const void *a, const void *b)
{
    return strcmp(*(char *const *)a, *(char *const *)b);
}

struct ring__tokpair {
    uint64_t token;
    uint32_t node;
};

static int ring__cmp_pair(const void *a, const void *b)
{
    const struct ring__tokpair *x = a, *y = b;
    return (x->token > y->token) - (x->token < y->token);
}

static const char *ring__or(const char *s, const char *dflt)
{
    return s && *s ? s : dflt;
}

static int ring__check_repl(const struct ring_replication *repl)
{
    if (repl->strategy == RING_SIMPLE)
        return repl->rf >= 1 && repl->rf <= RING_MAX_REPLICAS ? 0 : RK_ECONFIG;
    if (repl->strategy != RING_NTS || (repl->ndcs > 0 && repl->dcs == NULL))
        return RK_ECONFIG;
    unsigned total = 0;
    for (size_t i = 0; i < repl->ndcs; i++) {
        if (repl->dcs[i].dc == NULL || repl->dcs[i].dc[0] == '\0')
            return RK_ECONFIG;
        for (size_t k = 0; k < i; k++)
            if (strcmp(repl->dcs[i].dc, repl->dcs[k].dc) == 0)
                return RK_ECONFIG;
        if (repl->dcs[i].rf > RING_MAX_REPLICAS)
            return RK_ECONFIG;
        total += repl->dcs[i].rf;
    }
    return total >= 1 && total <= RING_MAX_REPLICAS ? 0 : RK_ECONFIG;
}

unsigned ring__dc_rf(const ring *r, const char *dc)
{
    if (r->strategy == RING_SIMPLE)
        return r->rf;
    for (size_t i = 0; i < r->nrepl_dcs; i++)
        if (strcmp(r->repl_dcs[i].dc, dc) == 0)
            return r->repl_dcs[i].rf;
    return 0;
}

static int ring__copy_members(ring *r, const struct ring_config *cfg)
{
    if (cfg->nmembers > RING_MAX_NODES ||
        (cfg->nmembers > 0 && cfg->members == NULL))
        return RK_ECONFIG;
    r->nodes = calloc(cfg->nmembers ? cfg->nmembers : 1, sizeof(*r->nodes));
    if (r->nodes == NULL)
        return -ENOMEM;
    for (size_t i = 0; i < cfg->nmembers; i++) {
        const struct ring_member *m = &cfg->members[i];
        struct ring__node *n = &r->nodes[i];
        r->nnodes = i + 1;
        if (m->name == NULL || m->name[0] == '\0' ||
            m->ntokens > RING_MAX_TOKENS_PER_NODE ||
            (m->ntokens > 0 && m->tokens == NULL) ||
            (unsigned)m->state > RING_REMOVED)
            return RK_ECONFIG;
        n->name = strdup(m->name);
        n->dc = strdup(ring__or(m->dc, ring__default_dc));
        n->rack = strdup(ring__or(m->rack, ring__default_rack));
        n->tokens = malloc((m->ntokens ? m->ntokens : 1) * sizeof(uint64_t));
        if (!n->name || !n->dc || !n->rack || !n->tokens)
            return -ENOMEM;
        memcpy(n->tokens, m->tokens, m->ntokens * sizeof(uint64_t));
        qsort(n->tokens, m->ntokens, sizeof(uint64_t), rk_u64_cmp);
        n->ntokens = m->ntokens;
        n->weight = m->weight ? m->weight : RING_WEIGHT_UNIT;
        n->state = m->state;
    }
    qsort(r->nodes, r->nnodes, sizeof(*r->nodes), ring__cmp_node);
    for (size_t i = 1; i < r->nnodes; i++)
        if (strcmp(r->nodes[i - 1].name, r->nodes[i].name) == 0)
            return RK_ECONFIG;
    return 0;
}

static int ring__copy_repl(ring *r, const struct ring_replication *repl)
{
    int err = ring__check_repl(repl);
    if (err)
        return err;
    r->strategy = repl->strategy;
    r->rf = repl->rf;
    if (repl->strategy != RING_NTS || repl->ndcs == 0)
        return 0;
    r->repl_dcs = calloc(repl->ndcs, sizeof(*r->repl_dcs));
    if (r->repl_dcs == NULL)
        return -ENOMEM;
    for (size_t i = 0; i < repl->ndcs; i++) {
        r->nrepl_dcs = i + 1;
        r->repl_dcs[i].rf = repl->dcs[i].rf;
        r->repl_dcs[i].dc = strdup(repl->dcs[i].dc);
        if (r->repl_dcs[i].dc == NULL)
            return -ENOMEM;
    }
    return 0;
}

struct ring__rackkey {
    uint32_t dc_id;
    const char *rack;
    uint32_t idx;
};

static int ring__cmp_rackkey(const void *a, const void *b)
{
    const struct ring__rackkey *x = a, *y = b;
    if (x->dc_id != y->dc_id)
        return x->dc_id < y->dc_id ? -1 : 1;
    return strcmp(x->rack, y->rack);
}

/* Distinct DC names, and ids for DCs and (dc, rack) pairs. */
static int ring__assign_ids(ring *r)
{
    size_t n = r->nnodes;
    char **tmp = malloc((n ? n : 1) * sizeof(char *));
    if (tmp == NULL)
        return -ENOMEM;
    for (size_t i = 0; i < n; i++)
        tmp[i] = r->nodes[i].dc;
    qsort(tmp, n, sizeof(char *), ring__cmp_str);
    r->dcs = calloc(n ? n : 1, sizeof(char *));
    if (r->dcs == NULL) {
        free(tmp);
        return -ENOMEM;
    }
    for (size_t i = 0; i < n; i++) {
        if (r->ndcs > 0 && strcmp(r->dcs[r->ndcs - 1], tmp[i]) == 0)
            continue;
        r->dcs[r->ndcs] = strdup(tmp[i]);
        if (r->dcs[r->ndcs] == NULL) {
            free(tmp);
            return -ENOMEM;
        }
        r->ndcs++;
    }
    free(tmp);
    struct ring__rackkey *keys = malloc((n ? n : 1) * sizeof(*keys));
    if (keys == NULL)
        return -ENOMEM;
    for (size_t i = 0; i < n; i++) {
        struct ring__node *nd = &r->nodes[i];
        char **p =
            bsearch(&nd->dc, r->dcs, r->ndcs, sizeof(char *), ring__cmp_str);
        nd->dc_id = (uint32_t)(p - r->dcs);
        keys[i] = (struct ring__rackkey){nd->dc_id, nd->rack, (uint32_t)i};
    }
    /* rack ids: the index of the first node of the same (dc, rack) */
    qsort(keys, n, sizeof(*keys), ring__cmp_rackkey);
    for (size_t i = 0, first = 0; i < n; i++) {
        if (i > 0 && ring__cmp_rackkey(&keys[i - 1], &keys[i]) != 0)
            first = i;
        r->nodes[keys[i].idx].rack_id = keys[first].idx;
    }
    free(keys);
    return 0;
}

static int ring__place_tokens(ring *r)
{
    size_t total = 0;
    for (size_t i = 0; i < r->nnodes; i++)
        if (ring__placed(r->nodes[i].state))
            total += r->nodes[i].ntokens;
    struct ring__tokpair *pairs = malloc((total ? total : 1) * sizeof(*pairs));
    if (pairs == NULL)
        return -ENOMEM;
    size_t k = 0;
    for (size_t i = 0; i < r->nnodes; i++) {
        if (!ring__placed(r->nodes[i].state))
            continue;
        for (size_t t = 0; t < r->nodes[i].ntokens; t++)
            pairs[k++] =
                (struct ring__tokpair){r->nodes[i].tokens[t], (uint32_t)i};
    }
    qsort(pairs, total, sizeof(*pairs), ring__cmp_pair);
    int err = 0;
    for (size_t i = 1; i < total; i++)
        if (pairs[i].token == pairs[i - 1].token)
            err = RK_EEXIST;
    r->tok = malloc((total ? total : 1) * sizeof(uint64_t));
    r->tok_node = malloc((total ? total : 1) * sizeof(uint32_t));
    if (!err && (!r->tok || !r->tok_node))
        err = -ENOMEM;
    if (!err) {
        XXH3_state_t st;
        XXH3_64bits_reset(&st);
        for (size_t i = 0; i < total; i++) {
            uint8_t be[8];
            const char *name = r->nodes[pairs[i].node].name;
            r->tok[i] = pairs[i].token;
            r->tok_node[i] = pairs[i].node;
            for (int b = 0; b < 8; b++)
                be[b] = (uint8_t)(pairs[i].token >> (56 - 8 * b));
            XXH3_64bits_update(&st, be, sizeof(be));
            XXH3_64bits_update(&st, name, strlen(name) + 1);
        }
        r->ntok = total;
        r->fingerprint = XXH3_64bits_digest(&st);
    }
    free(pairs);
    return err;
}

static int ring__build_index(ring *r)
{
    unsigned bits = 1;
    while (bits < 22 && ((size_t)1 << bits) < 2 * r->ntok)
        bits++;
    size_t nb = (size_t)1 << bits;
    r->shift = 64 - bits;
    r->index = malloc((nb + 1) * sizeof(uint32_t));
    if (r->index == NULL)
        return -ENOMEM;
    size_t t = 0;
    for (size_t b = 0; b < nb; b++) {
        uint64_t lo = (uint64_t)b << r->shift;
        while (t < r->ntok && r->tok[t] < lo)
            t++;
        r->index[b] = (uint32_t)t;
    }
    r->index[nb] = (uint32_t)r->ntok;
    return 0;
}

/* Replica lists of every arc: per DC (or once for SimpleStrategy) walk the
 * group's own sub-ring, then give each global arc the replicas of the group
 * arc holding its token. */
static int ring__build_replicas(ring *r)
{
    size_t ngroups = r->strategy == RING_SIMPLE ? 1 : r->ndcs;
    unsigned *grf = calloc(ngroups ? ngroups : 1, sizeof(unsigned));
    unsigned *gcnt = calloc(ngroups ? ngroups : 1, sizeof(unsigned));
    uint32_t *rack = malloc((r->nnodes ? r->nnodes : 1) * sizeof(uint32_t));
    uint32_t *gnode = malloc((r->ntok ? r->ntok : 1) * sizeof(uint32_t));
    size_t *gpos = malloc((r->ntok ? r->ntok : 1) * sizeof(size_t));
    uint8_t *seen = calloc(r->nnodes ? r->nnodes : 1, 1);
    int err = -ENOMEM;
    if (!grf || !gcnt || !rack || !gnode || !gpos || !seen)
        goto out_free;

    /* RF and placed node count per group, and the total replica count */
    r->nrep = 0;
    for (size_t g = 0; g < ngroups; g++) {
        unsigned nodes = 0, rf;
        rf = r->strategy == RING_SIMPLE ? r->rf : ring__dc_rf(r, r->dcs[g]);
        for (size_t i = 0; i < r->nnodes; i++)
            if (ring__placed(r->nodes[i].state) && r->nodes[i].ntokens > 0 &&
                (r->strategy == RING_SIMPLE || r->nodes[i].dc_id == g))
                nodes++;
        grf[g] = rf;
        gcnt[g] = rf < nodes ? rf : nodes;
        r->nrep += gcnt[g];
    }
    r->rep = malloc(((r->ntok * r->nrep) > 0 ? r->ntok * r->nrep : 1) *
                    sizeof(uint32_t));
    if (r->rep == NULL)
        goto out_free;

    size_t col = 0;
    for (size_t g = 0; g < ngroups; g++) {
        if (gcnt[g] == 0)
            continue;
        /* the group's sub-ring, and its racks */
        size_t n = 0;
        unsigned nracks = 0;
        for (size_t i = 0; i < r->ntok; i++) {
            uint32_t nd = r->tok_node[i];
            if (r->strategy == RING_SIMPLE || r->nodes[nd].dc_id == g) {
                gpos[n] = i;
                gnode[n++] = nd;
            }
        }
        memset(seen, 0, r->nnodes);
        for (size_t i = 0; i < r->nnodes; i++) {
            uint32_t rk = r->nodes[i].rack_id;
            if (r->strategy == RING_NTS && ring__placed(r->nodes[i].state) &&
                r->nodes[i].ntokens > 0 && r->nodes[i].dc_id == g &&
                !seen[rk]) {
                seen[rk] = 1;
                nracks++;
            }
            rack[i] = rk;
        }
        struct ring__walk w = {
            .n = n,
            .node = gnode,
            .rack = r->strategy == RING_NTS ? rack : NULL,
            .rf = grf[g],
            .nracks = nracks,
            .target = gcnt[g],
            .ins = SIZE_MAX,
        };
        /* global arc i takes the replicas of the first group token >= it */
        size_t gi = 0;
        uint32_t reps[RING_MAX_REPLICAS];
        unsigned nreps = 0;
        size_t last = SIZE_MAX;
        for (size_t i = 0; i < r->ntok; i++) {
            while (gi < n && gpos[gi] < i)
                gi++;
            size_t at = gi < n ? gi : 0;
            if (at != last) {
                ring__walk_run(&w, at, reps, NULL, &nreps);
                if (nreps != gcnt[g]) {
                    err = RK_EINTERNAL;
                    goto out_free;
                }
                last = at;
            }
            memcpy(&r->rep[i * r->nrep + col], reps,
                   gcnt[g] * sizeof(uint32_t));
        }
        col += gcnt[g];
    }

    /* ownership */
    for (size_t i = 0; i < r->ntok; i++) {
        double len = ring__span(r->tok[i ? i - 1 : r->ntok - 1], r->tok[i]);
        r->nodes[r->tok_node[i]].raw += len;
        for (size_t k = 0; k < r->nrep; k++)
            r->nodes[r->rep[i * r->nrep + k]].eff += len;
    }
    err = 0;
out_free:
    free(grf);
    free(gcnt);
    free(rack);
    free(gnode);
    free(gpos);
    free(seen);
    return err;
}

int ring_new(ring **out, const struct ring_config *cfg)
{
    int err;
    ring *r;

    *out = NULL;
    if (cfg == NULL)
        return RK_ECONFIG;
    r = calloc(1, sizeof(*r));
    if (r == NULL)
        return -ENOMEM;
    atomic_init(&r->refs, 1);
    r->epoch = cfg->epoch;
    if ((err = ring__copy_repl(r, &cfg->repl)) != 0 ||
        (err = ring__copy_members(r, cfg)) != 0 ||
        (err = ring__assign_ids(r)) != 0 ||
        (err = ring__place_tokens(r)) != 0 ||
        (err = ring__build_index(r)) != 0 ||
        (err = ring__build_replicas(r)) != 0)
        goto fail_destroy;
    *out = r;
    return 0;
fail_destroy:
    ring__destroy(r);
    return err;
}

int ring_change(ring **out,
                const ring *base,
                const struct ring_member *upsert,
                const char *remove,
                uint64_t epoch)
{
    struct ring_member *ms;
    size_t n = 0;
    int err;

    *out = NULL;
    ms = calloc(base->nnodes + 1, sizeof(*ms));
    if (ms == NULL)
        return -ENOMEM;
    for (size_t i = 0; i < base->nnodes; i++) {
        const struct ring__node *nd = &base->nodes[i];
        if (remove && strcmp(nd->name, remove) == 0)
            continue;
        if (upsert && upsert->name && strcmp(nd->name, upsert->name) == 0)
            continue;
        ms[n++] =
            (struct ring_member){nd->name,    nd->dc,     nd->rack, nd->tokens,
                                 nd->ntokens, nd->weight, nd->state};
    }
    if (upsert &&
        !(remove && upsert->name && strcmp(upsert->name, remove) == 0))
        ms[n++] = *upsert;
    struct ring_config cfg = {
        .members = ms,
        .nmembers = n,
        .repl = {base->strategy, base->rf, base->repl_dcs, base->nrepl_dcs},
        .epoch = epoch,
    };
    err = ring_new(out, &cfg);
    free(ms);
    return err;
}

/* ---- accessors ------------------------------------------------------------
 */

uint64_t ring_epoch(const ring *r)
{
    return r->epoch;
}

uint64_t ring_fingerprint(const ring *r)
{
    return r->fingerprint;
}

size_t ring_node_count(const ring *r)
{
    return r->nnodes;
}

uint32_t ring_node_find(const ring *r, const char *name)
{
    size_t lo = 0, hi = r->nnodes;
    if (name == NULL)
        return RING_NONE;
    while (lo < hi) {
        size_t mid = lo + (hi - lo) / 2;
        int c = strcmp(r->nodes[mid].name, name);
        if (c == 0)
            return (uint32_t)mid;
        if (c < 0)
            lo = mid + 1;
        else
            hi = mid;
    }
    return RING_NONE;
}

int ring_node_get(const ring *r, struct ring_node_info *out, uint32_t idx)
{
    if (idx >= r->nnodes)
        return RK_ENOTFOUND;
    const struct ring__node *n = &r->nodes[idx];
    *out = (struct ring_node_info){
        .name = n->name,
        .dc = n->dc,
        .rack = n->rack,
        .state = n->state,
        .weight = n->weight,
        .ntokens = n->ntokens,
        .tokens = n->tokens,
        .raw = n->raw,
        .effective = n->eff,
    };
    return 0;
}

size_t ring_token_count(const ring *r)
{
    return r->ntok;
}

size_t ring_replica_count(const ring *r)
{
    return r->nrep;
}

size_t ring_arc_find(const ring *r, uint64_t token)
{
    const uint32_t *ix = &r->index[token >> r->shift];
    size_t lo = ix[0], hi = ix[1];
    while (lo < hi && r->tok[lo] < token)
        lo++;
    return lo < r->ntok ? lo : 0;
}

struct ring_range ring_arc_range(const ring *r, size_t i)
{
    return (struct ring_range){r->tok[i ? i - 1 : r->ntok - 1], r->tok[i]};
}

uint32_t ring_arc_owner(const ring *r, size_t i)
{
    return r->tok_node[i];
}

const uint32_t *ring_arc_replicas(const ring *r, size_t i)
{
    return &r->rep[i * r->nrep];
}

size_t ring_replicas(const ring *r, uint64_t token, uint32_t *out, size_t cap)
{
    if (r->ntok == 0)
        return 0;
    const uint32_t *rep = &r->rep[ring_arc_find(r, token) * r->nrep];
    size_t n = r->nrep < cap ? r->nrep : cap;
    for (size_t i = 0; i < n; i++)
        out[i] = rep[i];
    return r->nrep;
}

static int ring__arc_has(const ring *r, size_t i, uint32_t idx)
{
    const uint32_t *rep = &r->rep[i * r->nrep];
    for (size_t k = 0; k < r->nrep; k++)
        if (rep[k] == idx)
            return 1;
    return 0;
}

size_t ring_node_ranges(const ring *r,
                        uint32_t idx,
                        struct ring_range *out,
                        size_t cap)
{
    size_t count = 0, s;
    int open = 0; /* the previous arc was replicated by idx */

    if (idx >= r->nnodes || r->ntok == 0)
        return 0;
    /* start after an arc idx does not replicate, so no run is cut in two */
    for (s = 0; s < r->ntok && ring__arc_has(r, s, idx); s++)
        ;
    if (s == r->ntok) {
        if (cap > 0)
            out[0] = (struct ring_range){r->tok[0], r->tok[0]};
        return 1;
    }
    for (size_t step = 1; step <= r->ntok; step++) {
        size_t i = (s + step) % r->ntok;
        if (!ring__arc_has(r, i, idx)) {
            open = 0;
            continue;
        }
        struct ring_range a = ring_arc_range(r, i);
        if (open) {
            if (count <= cap)
                out[count - 1].end = a.end;
        } else {
            if (count < cap)
                out[count] = a;
            count++;
        }
        open = 1;
    }
    return count;
}

double ring_range_fraction(struct ring_range rg)
{
    return ring__span(rg.start, rg.end);
}

int ring_range_contains(struct ring_range rg, uint64_t token)
{
    if (rg.start == rg.end)
        return 1;
    if (rg.start < rg.end)
        return token > rg.start && token <= rg.end;
    return token > rg.start || token <= rg.end;
}
