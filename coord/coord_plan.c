/*
 * coord_plan.c - the coordinator's level planning (coord_plan.h): the
 * constraints of a level over a replica list, the check for UNAVAILABLE,
 * counting answers, the order a read asks its replicas in, the hedge
 * point, and the outcome so far. Pure: the request's I/O, timers and
 * peers are coord.c's and coord_read.c's; tests/unit/check_coord_plan.c checks
 * it against a brute-force definition of each level.
 */
#include "coord/coord_plan.h"

#include <string.h>

#include "common/rk.h"

/* ---- levels ----------------------------------------------------------- */

static void cons_add(struct coord_plan *p, int dc, uint32_t need)
{
    p->cons[p->ncons].dc = dc;
    p->cons[p->ncons].need = need;
    p->cons[p->ncons].got = 0;
    p->ncons++;
    p->need += need;
}

static bool in_scope(const struct coord_plan_cons *c, int dc)
{
    return c->dc < 0 || c->dc == dc;
}

/* dc ids: 0 is this node's DC (it need not hold a replica: 16 replicas in
 * 16 other DCs), the others numbered as met; per_dc[d]: the ring's
 * replicas in d. Returns the number of DCs. */
static int number_dcs(struct coord_plan *p,
                      uint32_t *per_dc,
                      const char *local_dc,
                      const struct coord_plan_replica *reps)
{
    const char *name[RING_MAX_REPLICAS + 1];
    int ndc = 1;
    name[0] = local_dc ? local_dc : "";
    for (uint32_t i = 0; i < p->nrep; i++) {
        const char *dc = reps[i].dc ? reps[i].dc : "";
        int d = -1;
        for (int k = 0; k < ndc && d < 0; k++)
            if (name[k] == dc || strcmp(name[k], dc) == 0)
                d = k;
        if (d < 0) {
            d = ndc;
            name[ndc++] = dc;
        }
        p->rep[i].dc = d;
        if (i < p->nnat)
            per_dc[d]++;
    }
    return ndc;
}

void coord_plan_clear(struct coord_plan *p)
{
    p->nrep = p->nnat = p->need = p->acks = 0;
    p->ncons = 0;
}

int coord_plan_make(struct coord_plan *out,
                    enum coord_cl cl,
                    const char *local_dc,
                    const struct coord_plan_replica *reps,
                    uint32_t nrep,
                    uint32_t nnat)
{
    struct coord_plan *p = out;
    coord_plan_clear(p);
    if (nrep > RING_MAX_REPLICAS || nnat > nrep)
        return RK_EBADREQ;
    p->nrep = nrep;
    p->nnat = nnat;
    for (uint32_t i = 0; i < nrep; i++)
        p->rep[i] =
            (struct coord_plan_rep){.up = reps[i].up, .self = reps[i].self};
    uint32_t per_dc[RING_MAX_REPLICAS + 1] = {0};
    int ndc = number_dcs(p, per_dc, local_dc, reps);
    switch (cl) {
    case COORD_CL_ONE:
        cons_add(p, -1, 1);
        break;
    case COORD_CL_TWO:
        cons_add(p, -1, 2);
        break;
    case COORD_CL_QUORUM:
        cons_add(p, -1, nnat / 2 + 1);
        break;
    case COORD_CL_ALL:
        cons_add(p, -1, nnat ? nnat : 1);
        break;
    case COORD_CL_LOCAL_ONE:
        cons_add(p, 0, 1);
        break;
    case COORD_CL_LOCAL_QUORUM:
        cons_add(p, 0, per_dc[0] / 2 + 1);
        break;
    case COORD_CL_EACH_QUORUM:
        for (int d = 0; d < ndc; d++)
            if (per_dc[d])
                cons_add(p, d, per_dc[d] / 2 + 1);
        if (p->ncons == 0)
            cons_add(p, 0, 1);
        break;
    default:
        return RK_EBADREQ;
    }
    for (uint32_t i = nnat; i < nrep; i++) /* live pending replicas */
        for (int c = 0; c < p->ncons && p->rep[i].up; c++)
            if (in_scope(&p->cons[c], p->rep[i].dc)) {
                p->cons[c].need++;
                p->need++;
            }
    /* enough live replicas for every constraint? */
    for (int c = 0; c < p->ncons; c++) {
        uint32_t live = 0;
        for (uint32_t i = 0; i < nrep; i++)
            if (p->rep[i].up && in_scope(&p->cons[c], p->rep[i].dc))
                live++;
        if (live < p->cons[c].need) {
            p->acks = 0;
            for (uint32_t i = 0; i < nrep; i++)
                p->acks += p->rep[i].up;
            return RK_EUNAVAILABLE;
        }
    }
    return 0;
}

/* ---- answers ---------------------------------------------------------- */

void coord_plan_asked(struct coord_plan *p, uint32_t i)
{
    p->rep[i].asked = true;
}

void coord_plan_answered(struct coord_plan *p, uint32_t i, bool ok)
{
    p->rep[i].answered = true;
    p->rep[i].ok = ok;
    if (!ok)
        return;
    p->acks++;
    for (int c = 0; c < p->ncons; c++)
        if (in_scope(&p->cons[c], p->rep[i].dc))
            p->cons[c].got++;
}

void coord_plan_drop_pending(struct coord_plan *p, uint32_t i)
{
    for (int c = 0; c < p->ncons; c++)
        if (in_scope(&p->cons[c], p->rep[i].dc)) {
            p->cons[c].need--;
            p->need--;
        }
}

bool coord_plan_satisfied(const struct coord_plan *p)
{
    for (int c = 0; c < p->ncons; c++)
        if (p->cons[c].got < p->cons[c].need)
            return false;
    return true;
}

enum coord_plan_outcome coord_plan_outcome(const struct coord_plan *p)
{
    if (coord_plan_satisfied(p))
        return COORD_PLAN_SATISFIED;
    for (uint32_t i = 0; i < p->nrep; i++)
        if (p->rep[i].asked && !p->rep[i].answered)
            return COORD_PLAN_WAITING;
    return COORD_PLAN_FAILED;
}

/* ---- the order of a read ---------------------------------------------- */

bool coord_plan_read_helps(const struct coord_plan *p, uint32_t i)
{
    for (int c = 0; c < p->ncons; c++) {
        if (!in_scope(&p->cons[c], p->rep[i].dc))
            continue;
        uint32_t have = 0;
        for (uint32_t k = 0; k < p->nrep; k++) {
            const struct coord_plan_rep *r = &p->rep[k];
            if ((r->answered ? r->ok : r->asked && !r->slow) &&
                in_scope(&p->cons[c], r->dc))
                have++;
        }
        if (have < p->cons[c].need)
            return true;
    }
    return false;
}

int coord_plan_read_next(struct coord_plan *p,
                         struct coord_plan_cursor *c,
                         const bool *quiet,
                         uint32_t *passed)
{
    for (; c->pass < 3; c->pass++, c->i = 0) {
        for (; c->i < p->nrep; c->i++) {
            uint32_t i = c->i;
            struct coord_plan_rep *r = &p->rep[i];
            if (r->asked || !r->up || (c->pass == 0) != r->self ||
                (c->pass == 2 && !r->passed_over) ||
                !coord_plan_read_helps(p, i))
                continue;
            if (c->pass == 1 && quiet && quiet[i]) {
                if (!r->passed_over && passed)
                    (*passed)++;
                r->passed_over = true;
                continue;
            }
            c->i++;
            return (int)i;
        }
    }
    return -1;
}

uint32_t coord_plan_hedge(struct coord_plan *p)
{
    uint32_t asked = 0;
    for (uint32_t i = 0; i < p->nrep; i++) {
        if (!p->rep[i].asked)
            continue;
        asked++;
        if (!p->rep[i].answered)
            p->rep[i].slow = true;
    }
    return asked;
}

uint32_t coord_plan_asked_count(const struct coord_plan *p)
{
    uint32_t asked = 0;
    for (uint32_t i = 0; i < p->nrep; i++)
        asked += p->rep[i].asked;
    return asked;
}
