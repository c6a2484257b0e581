/*
 * ring_internal.h - helpers shared by the files of ring/ only.
 *
 * The placement walk is the one definition of "which nodes replicate the arc
 * that ends at position p": ring.c runs it over a built snapshot, and the
 * balanced allocator (ring_alloc.c) runs it over a virtual ring with one
 * candidate token inserted, so both always agree.
 */
#ifndef RING_RING_INTERNAL_H
#define RING_RING_INTERNAL_H

#include <stdatomic.h>
#include <stddef.h>
#include <stdint.h>

#include "ring/ring.h"

/* The snapshot (ring.c builds it; ring_alloc.c and ring_plan.c read it). */
struct ring__node {
    char *name, *dc, *rack;
    uint64_t *tokens; /* ascending */
    size_t ntokens;
    uint32_t weight;
    enum ring_node_state state;
    uint32_t dc_id;   /* index into ring.dcs */
    uint32_t rack_id; /* unique over (dc, rack) */
    double raw, eff;
};

struct ring {
    atomic_uint refs;
    uint64_t epoch, fingerprint;
    struct ring__node *nodes; /* ascending by name */
    size_t nnodes;
    char **dcs; /* distinct DC names of members, ascending */
    size_t ndcs;
    enum ring_strategy strategy;
    unsigned rf;
    struct ring_dc_rf *repl_dcs; /* copied names */
    size_t nrepl_dcs;
    uint64_t *tok; /* placed tokens, ascending */
    uint32_t *tok_node;
    size_t ntok;
    uint32_t *index; /* (1 << bits) + 1 entries */
    unsigned shift;  /* 64 - bits */
    uint32_t *rep;   /* ntok * nrep replica node indices */
    size_t nrep;
};

static inline int ring__placed(enum ring_node_state s)
{
    return s == RING_NORMAL || s == RING_LEAVING;
}

/* RF of data centre `dc` under r's replication (SimpleStrategy: r->rf). */
unsigned ring__dc_rf(const ring *r, const char *dc);

/* One replication group: the tokens of one DC (NTS) or of all nodes
 * (SimpleStrategy), in ring order, with an optional virtual token inserted
 * at position `ins` (SIZE_MAX: none). Positions are then 0 .. n (+1). */
struct ring__walk {
    size_t n;             /* real positions */
    const uint32_t *node; /* node id per real position */
    const uint32_t *rack; /* rack id per node id; NULL: not rack-aware */
    unsigned rf;          /* replicas wanted */
    unsigned nracks;      /* distinct racks in the group (rack-aware) */
    unsigned target;      /* min(rf, nodes in the group) */
    size_t ins;           /* virtual position of the inserted token */
    uint32_t ins_node;
};

static inline uint32_t ring__walk_node(const struct ring__walk *w, size_t v)
{
    if (w->ins == SIZE_MAX)
        return w->node[v];
    if (v == w->ins)
        return w->ins_node;
    return w->node[v < w->ins ? v : v - 1];
}

/* Replicas of the arc ending at virtual position `start`: walks clockwise
 * taking new nodes (rack-aware: nodes of unused racks, and nodes of used
 * racks while rf - nracks repeats remain) until `target` are taken or every
 * position was seen. Writes them to out (capacity >= target) in walk order,
 * the virtual position where each was taken to pos (if not NULL), their
 * count to *nout, and returns the number of positions visited. */
static inline size_t ring__walk_run(const struct ring__walk *w,
                                    size_t start,
                                    uint32_t *out,
                                    size_t *pos,
                                    unsigned *nout)
{
    size_t n = w->n + (w->ins != SIZE_MAX);
    unsigned cnt = 0, nseen = 0;
    unsigned repeats = w->rf > w->nracks ? w->rf - w->nracks : 0;
    uint32_t seen[RING_MAX_REPLICAS];
    size_t v = start, steps = 0;

    while (steps < n && cnt < w->target) {
        uint32_t nd = ring__walk_node(w, v);
        unsigned i;
        steps++;
        if (++v == n)
            v = 0;
        for (i = 0; i < cnt && out[i] != nd; i++)
            ;
        if (i < cnt)
            continue;
        if (w->rack) {
            uint32_t rk = w->rack[nd];
            unsigned s;
            for (s = 0; s < nseen && seen[s] != rk; s++)
                ;
            if (s == nseen) {
                if (nseen < RING_MAX_REPLICAS)
                    seen[nseen++] = rk;
            } else if (repeats > 0) {
                repeats--;
            } else {
                continue;
            }
        }
        if (pos)
            pos[cnt] = v ? v - 1 : n - 1;
        out[cnt++] = nd;
    }
    *nout = cnt;
    return cnt < w->target ? n : steps;
}

/* Distance of token range (a, b] as a fraction of the ring; a == b is 1. */
static inline double ring__span(uint64_t a, uint64_t b)
{
    uint64_t d = b - a;
    return d == 0 ? 1.0 : (double)d * 0x1p-64;
}

#endif
