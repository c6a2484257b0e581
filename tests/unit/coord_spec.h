/*
 * coord_spec.h - replica lists for the coordinator's unit tests, written
 * as "dc1* dc2 dc1- | dc2" (mk): check_coord_plan.c plans them,
 * check_coord.c builds its fake host from them. Header-only, as rng.h.
 */
#ifndef TESTS_UNIT_COORD_SPEC_H
#define TESTS_UNIT_COORD_SPEC_H

#include <stdbool.h>
#include <stdint.h>
#include <string.h>

#include "coord/coord_plan.h"
#include "ring/ring.h"

/* A replica list: rep[0..nnat) the ring's, the rest pending. */
struct tcase {
    const char *local;
    uint32_t nrep, nnat;
    struct coord_plan_replica rep[RING_MAX_REPLICAS];
    char name[RING_MAX_REPLICAS][8]; /* mk's DC names */
};

static inline void add(struct tcase *t, const char *dc, bool up, bool self)
{
    t->rep[t->nrep++] = (struct coord_plan_replica){dc, up, self};
}

/* A case from a list of replicas such as "dc1* dc2 dc1- | dc2": each a
 * DC name, '*' this node, '-' down; those after '|' pending. */
static inline void mk(struct tcase *t, const char *local, const char *spec)
{
    memset(t, 0, sizeof(*t));
    t->local = local;
    bool pending = false;
    for (const char *c = spec; *c;) {
        if (*c == ' ' || *c == '|') {
            pending |= *c++ == '|';
            continue;
        }
        char *name = t->name[t->nrep];
        size_t k = 0;
        while (*c && !strchr(" *-|", *c) && k + 1 < sizeof(t->name[0]))
            name[k++] = *c++;
        name[k] = 0;
        bool self = false, up = true;
        for (; *c == '*' || *c == '-'; c++) {
            if (*c == '*')
                self = true;
            else
                up = false;
        }
        add(t, name, up, self);
        if (!pending)
            t->nnat = t->nrep;
    }
}

#endif
