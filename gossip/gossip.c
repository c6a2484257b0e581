/*
 * gossip.c - the gossip state machine: endpoints, version rules, the
 * phi-accrual detector, epochs, quarantine, this node's own states and the
 * queries. The SYN/ACK/ACK2 round (packets built and applied, gossip_recv,
 * gossip_tick) is in round.c; gossip_internal.h is what both share.
 *
 * Design notes.
 * - One version counter per endpoint (Cassandra's VersionGenerator): the
 *   heartbeat bumps it every tick and every state change takes the next
 *   value, so "I hold X up to version v" summarises everything. A delta
 *   covers the range (base, top] completely, so applying it keeps the
 *   invariant "holding v means holding every state written up to v". Large
 *   deltas are split into chunks (base, v1], (v1, v2], ... sent in version
 *   order; a chunk whose base is above what we hold is a gap and is ignored
 *   (the next round asks again), so a lost packet can never leave a hole.
 * - The failure detector records an arrival when an endpoint's version moves
 *   forward, whoever relayed it. The first state of an endpoint learned from
 *   a third party is not proof of life; first-hand state or a later
 *   heartbeat is.
 * - Endpoints live in an array (index 0 is self) with an open-addressing
 *   index over their names, rebuilt when the array grows or shrinks.
 */
#include "gossip/gossip.h"

#include <assert.h>
#include <errno.h>
#include <inttypes.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "gossip/gossip_internal.h"
#include "wire/gossip_msg.h"
#include "wire/wire.h"

_Static_assert(GOSSIP_NAME_MAX == WIRE_GOSSIP_MAX_NAME, "name limits differ");
_Static_assert(GOSSIP_VALUE_MAX <= WIRE_GOSSIP_MAX_VALUE, "value limit");

#define FD_MAX_SAMPLE 65535u /* ms; longer gaps are clamped */

/* ---- small helpers ------------------------------------------------------ */

static uint64_t rng_next(gossip *g)
{
    /* splitmix64 */
    uint64_t z = (g->rng += UINT64_C(0x9e3779b97f4a7c15));
    z = (z ^ (z >> 30)) * UINT64_C(0xbf58476d1ce4e5b9);
    z = (z ^ (z >> 27)) * UINT64_C(0x94d049bb133111eb);
    return z ^ (z >> 31);
}

size_t gossip__rng_below(gossip *g, size_t n)
{
    return n == 0 ? 0 : (size_t)(rng_next(g) % n);
}

double gossip__rng_unit(gossip *g)
{
    return (double)(rng_next(g) >> 11) * 0x1p-53;
}

bool gossip__slice_eq_str(struct rk_slice s, const char *str, size_t len)
{
    return s.len == len && memcmp(s.p, str, len) == 0;
}

void gossip__copy_name(char *dst, size_t cap, const void *src, size_t len)
{
    if (len >= cap)
        len = cap - 1;
    memcpy(dst, src, len);
    dst[len] = '\0';
}

bool gossip__is_membership_key(unsigned k)
{
    return k == GOSSIP_KEY_STATUS || k == GOSSIP_KEY_TOKENS ||
           k == GOSSIP_KEY_DC || k == GOSSIP_KEY_RACK ||
           k == GOSSIP_KEY_ADDRESS;
}

double gossip_phi(double since_ms, double mean_interval_ms)
{
    if (mean_interval_ms <= 0 || since_ms <= 0)
        return 0.0;
    return since_ms / mean_interval_ms * M_LOG10E;
}

/* ---- output ------------------------------------------------------------- */

void gossip_out_init(struct gossip_out *out)
{
    memset(out, 0, sizeof(*out));
}

void gossip_out_clear(struct gossip_out *out)
{
    for (size_t i = 0; i < out->n_pkts; i++)
        free(out->pkts[i].buf);
    out->n_pkts = 0;
    out->n_events = 0;
}

void gossip_out_free(struct gossip_out *out)
{
    if (out == NULL)
        return;
    gossip_out_clear(out);
    free(out->pkts);
    free(out->events);
    memset(out, 0, sizeof(*out));
}

struct gossip_event *gossip__ev_push(struct gossip_out *out,
                                     enum gossip_event_type type,
                                     const char *name)
{
    if (out->n_events == out->cap_events) {
        size_t cap = out->cap_events ? out->cap_events * 2 : 16;
        struct gossip_event *ev = realloc(out->events, cap * sizeof(*ev));
        if (ev == NULL)
            return NULL;
        out->events = ev;
        out->cap_events = cap;
    }
    struct gossip_event *e = &out->events[out->n_events++];
    memset(e, 0, sizeof(*e));
    e->type = type;
    if (name != NULL)
        gossip__copy_name(e->name, sizeof(e->name), name, strlen(name));
    return e;
}

/* Takes ownership of buf (freed on failure). */
int gossip__pkt_push(struct gossip_out *out,
                     const char *to,
                     uint8_t *buf,
                     size_t len)
{
    if (out->n_pkts == out->cap_pkts) {
        size_t cap = out->cap_pkts ? out->cap_pkts * 2 : 8;
        struct gossip_packet *p = realloc(out->pkts, cap * sizeof(*p));
        if (p == NULL) {
            free(buf);
            return -ENOMEM;
        }
        out->pkts = p;
        out->cap_pkts = cap;
    }
    struct gossip_packet *p = &out->pkts[out->n_pkts++];
    gossip__copy_name(p->to, sizeof(p->to), to, strlen(to));
    p->buf = buf;
    p->len = len;
    return 0;
}

/* ---- endpoint table ----------------------------------------------------- */

static size_t name_hash(const void *name, size_t len)
{
    return (size_t)XXH3_64bits(name, len);
}

int gossip__index_rebuild(gossip *g, size_t want)
{
    size_t cap = 16;
    while (cap < want * 2)
        cap *= 2;
    uint32_t *idx = calloc(cap, sizeof(*idx));
    if (idx == NULL)
        return -ENOMEM;
    for (size_t i = 0; i < g->n_eps; i++) {
        size_t h = name_hash(g->eps[i].name, g->eps[i].name_len) & (cap - 1);
        while (idx[h] != 0)
            h = (h + 1) & (cap - 1);
        idx[h] = (uint32_t)(i + 1);
    }
    free(g->index);
    g->index = idx;
    g->index_cap = cap;
    return 0;
}

long gossip__ep_find(const gossip *g, const void *name, size_t len)
{
    size_t mask = g->index_cap - 1;
    size_t h = name_hash(name, len) & mask;
    while (g->index[h] != 0) {
        const struct gossip__ep *e = &g->eps[g->index[h] - 1];
        if (e->name_len == len && memcmp(e->name, name, len) == 0)
            return (long)(g->index[h] - 1);
        h = (h + 1) & mask;
    }
    return -1;
}

const char *gossip__ep_addr(const struct gossip__ep *e)
{
    const struct gossip__state *s = &e->st[GOSSIP_KEY_ADDRESS];
    if (s->len == 0 || s->len > GOSSIP_ADDR_MAX ||
        memchr(s->val, '\0', s->len) != NULL)
        return NULL;
    return (const char *)s->val;
}

const struct gossip__ep *gossip__ep_at(const gossip *g, const char *to)
{
    size_t len = strlen(to);
    for (size_t i = 1; i < g->n_eps; i++) {
        const struct gossip__state *s = &g->eps[i].st[GOSSIP_KEY_ADDRESS];
        if (s->len == len && memcmp(s->val, to, len) == 0)
            return &g->eps[i];
    }
    return NULL;
}

int gossip__ep_add(gossip *g, const void *name, size_t len, size_t *out_idx)
{
    if (g->n_eps == g->cap_eps) {
        size_t cap = g->cap_eps ? g->cap_eps * 2 : 16;
        struct gossip__ep *eps = realloc(g->eps, cap * sizeof(*eps));
        if (eps == NULL)
            return -ENOMEM;
        g->eps = eps;
        g->cap_eps = cap;
    }
    if ((g->n_eps + 1) * 2 > g->index_cap) {
        int rc = gossip__index_rebuild(g, g->n_eps + 1);
        if (rc != 0)
            return rc;
    }
    struct gossip__ep *e = &g->eps[g->n_eps];
    memset(e, 0, sizeof(*e));
    gossip__copy_name(e->name, sizeof(e->name), name, len);
    e->name_len = len;
    size_t mask = g->index_cap - 1;
    size_t h = name_hash(name, len) & mask;
    while (g->index[h] != 0)
        h = (h + 1) & mask;
    g->index[h] = (uint32_t)(g->n_eps + 1);
    *out_idx = g->n_eps++;
    return 0;
}

void gossip__ep_clear_states(struct gossip__ep *e)
{
    for (int k = 0; k < GOSSIP_KEY_COUNT; k++) {
        free(e->st[k].val);
        e->st[k].val = NULL;
        e->st[k].len = 0;
        e->st[k].version = 0;
    }
}

int gossip__ep_store(struct gossip__ep *e,
                     unsigned key,
                     uint64_t version,
                     const void *val,
                     size_t len)
{
    /* Values are kept NUL-terminated (not counted in len), so text states
     * such as ADDRESS can be used as C strings. */
    uint8_t *copy = malloc(len + 1);
    if (copy == NULL)
        return -ENOMEM;
    if (len > 0)
        memcpy(copy, val, len);
    copy[len] = '\0';
    free(e->st[key].val);
    e->st[key].val = copy;
    e->st[key].len = len;
    e->st[key].version = version;
    return 0;
}

void gossip__fd_reset(struct gossip__ep *e)
{
    e->has_arrival = false;
    e->iv_n = e->iv_pos = e->iv_sum = 0;
}

static double fd_mean(const struct gossip__ep *e)
{
    return e->iv_n ? (double)e->iv_sum / e->iv_n : 0.0;
}

double gossip__fd_phi(const struct gossip__ep *e, uint64_t now)
{
    if (!e->has_arrival || now <= e->last_arrival)
        return 0.0;
    return gossip_phi((double)(now - e->last_arrival), fd_mean(e));
}

void gossip__fd_sample(struct gossip__ep *e, uint64_t ms)
{
    uint16_t v = (uint16_t)(ms > FD_MAX_SAMPLE ? FD_MAX_SAMPLE : ms);
    if (e->iv_n == GOSSIP__FD_WINDOW)
        e->iv_sum -= e->iv[e->iv_pos];
    else
        e->iv_n++;
    e->iv[e->iv_pos] = v;
    e->iv_sum += v;
    e->iv_pos = (e->iv_pos + 1) % GOSSIP__FD_WINDOW;
}

/* A newer heartbeat of e arrived (first-hand or relayed: gossip relays, so
 * the mean interval is how often news of e reaches us, typically 1-3 ticks).
 * The window starts with one sample of two ticks (Cassandra's initial
 * value), which keeps a node learned while the cluster forms from being
 * convicted before real samples exist. Intervals are recorded only while e
 * is up: the gap of an outage would poison the mean. Alternatives measured
 * with tools/gossip-sim and rejected (docs/gossip.md): dropping intervals
 * over two ticks (Cassandra) detects faster but convicted healthy nodes at
 * 30% loss; dividing an interval by the versions it skipped made the mean
 * tiny at start-up (versions also count state changes). */
int gossip__fd_arrival(gossip *g,
                       struct gossip__ep *e,
                       uint64_t now,
                       struct gossip_out *out)
{
    if (e->convicted) {
        /* Held DOWN by the probe detector: relayed heartbeats go on
         * arriving after a death. Only a refutation brings it back; tell it,
         * in case it lives and does not know. */
        e->has_arrival = true;
        e->last_arrival = now;
        return out != NULL ? gossip__probe_heartbeat(g, e, now, out) : 0;
    }
    if (!e->has_arrival || e->iv_n == 0)
        gossip__fd_sample(e, 2u * g->interval_ms);
    else if (e->up && now >= e->last_arrival)
        gossip__fd_sample(e, now - e->last_arrival);
    e->has_arrival = true;
    e->last_arrival = now;
    if (!e->up) {
        e->up = true;
        if (e->up_first == 0)
            e->up_first = now ? now : 1;
        if (out != NULL && gossip__ev_push(out, GOSSIP_EV_UP, e->name) == NULL)
            return -ENOMEM;
    }
    return 0;
}

struct gossip__tomb *
gossip__tomb_find(const gossip *g, const void *name, size_t len)
{
    for (size_t i = 0; i < g->n_tombs; i++)
        if (strlen(g->tombs[i].name) == len &&
            memcmp(g->tombs[i].name, name, len) == 0)
            return &g->tombs[i];
    return NULL;
}

/* ---- epochs ------------------------------------------------------------- */

int gossip__parse_u64(uint64_t *out, const uint8_t *p, size_t len)
{
    uint64_t v = 0;
    if (len == 0 || len > 20)
        return RK_EPROTO;
    for (size_t i = 0; i < len; i++) {
        if (p[i] < '0' || p[i] > '9')
            return RK_EPROTO;
        uint64_t d = (uint64_t)(p[i] - '0');
        if (v > (UINT64_MAX - d) / 10)
            return RK_EPROTO;
        v = v * 10 + d;
    }
    *out = v;
    return 0;
}

static const char *const status_names[] = {
    [GOSSIP_STATUS_UNKNOWN] = "UNKNOWN", [GOSSIP_STATUS_BOOT] = "BOOT",
    [GOSSIP_STATUS_NORMAL] = "NORMAL",   [GOSSIP_STATUS_LEAVING] = "LEAVING",
    [GOSSIP_STATUS_LEFT] = "LEFT",       [GOSSIP_STATUS_REMOVED] = "REMOVED",
};

const char *gossip_status_name(enum gossip_status s)
{
    if ((unsigned)s > GOSSIP_STATUS_REMOVED)
        return "UNKNOWN";
    return status_names[s];
}

int gossip_status_parse(enum gossip_status *out,
                        uint64_t *out_epoch,
                        struct rk_slice value)
{
    const uint8_t *sp = memchr(value.p, ' ', value.len);
    if (value.len == 0 || sp == NULL)
        return RK_EPROTO;
    size_t nlen = (size_t)(sp - value.p);
    uint64_t epoch;
    if (gossip__parse_u64(&epoch, sp + 1, value.len - nlen - 1) != 0)
        return RK_EPROTO;
    for (int s = GOSSIP_STATUS_BOOT; s <= GOSSIP_STATUS_REMOVED; s++) {
        if (strlen(status_names[s]) == nlen &&
            memcmp(status_names[s], value.p, nlen) == 0) {
            *out = (enum gossip_status)s;
            *out_epoch = epoch;
            return 0;
        }
    }
    return RK_EPROTO;
}

int gossip_tokens_decode(uint64_t *out,
                         size_t cap,
                         size_t *out_n,
                         struct rk_slice value)
{
    if (value.len % 8 != 0)
        return RK_EPROTO;
    size_t n = value.len / 8;
    if (n > cap)
        return RK_ETOOLARGE;
    for (size_t i = 0; i < n; i++) {
        uint64_t t = 0;
        for (int b = 0; b < 8; b++)
            t = (t << 8) | value.p[i * 8 + b];
        out[i] = t;
    }
    *out_n = n;
    return 0;
}

void gossip__epoch_seen(gossip *g, uint64_t epoch)
{
    if (epoch > g->max_epoch)
        g->max_epoch = epoch;
}

int gossip__own_u64_set(gossip *g, unsigned key, uint64_t v)
{
    char buf[24];
    int n = snprintf(buf, sizeof(buf), "%" PRIu64, v);
    struct gossip__ep *self = &g->eps[0];
    int rc = gossip__ep_store(self, key, self->version + 1, buf, (size_t)n);
    if (rc == 0)
        self->version++;
    return rc;
}

/* Keeps this node's RING_EPOCH equal to the highest epoch known. */
int gossip__own_ring_epoch_sync(gossip *g)
{
    if (g->own_ring_epoch >= g->max_epoch)
        return 0;
    int rc = gossip__own_u64_set(g, GOSSIP_KEY_RING_EPOCH, g->max_epoch);
    if (rc == 0)
        g->own_ring_epoch = g->max_epoch;
    return rc;
}

int gossip__stale_check(gossip *g, struct gossip_out *out)
{
    bool stale = g->max_epoch > g->applied_epoch;
    struct gossip_event *ev = NULL;
    if (stale && !g->stale_reported) {
        ev = gossip__ev_push(out, GOSSIP_EV_RING_STALE, NULL);
        if (ev == NULL)
            return -ENOMEM;
        g->stale_reported = true;
    } else if (!stale && g->stale_reported) {
        ev = gossip__ev_push(out, GOSSIP_EV_RING_CAUGHT_UP, NULL);
        if (ev == NULL)
            return -ENOMEM;
        g->stale_reported = false;
    }
    if (ev != NULL)
        ev->epoch = g->max_epoch;
    return 0;
}

uint64_t gossip_epoch_max(const gossip *g)
{
    return g->max_epoch;
}

uint64_t gossip_epoch_ring(const gossip *g)
{
    return g->adopted_epoch > g->membership_epoch ? g->adopted_epoch
                                                  : g->membership_epoch;
}

int gossip__hearsay_check(gossip *g, uint64_t now, struct gossip_out *out)
{
    if (g->max_epoch <= gossip_epoch_ring(g)) {
        g->hearsay_since = 0;
        return 0;
    }
    if (g->hearsay_since == 0 || g->hearsay_max != g->max_epoch ||
        g->hearsay_mem != g->membership_epoch) {
        g->hearsay_since = now ? now : 1; /* something new: wait again */
        g->hearsay_max = g->max_epoch;
        g->hearsay_mem = g->membership_epoch;
        return 0;
    }
    if (now - g->hearsay_since <
        (uint64_t)GOSSIP_HEARSAY_ROUNDS * g->interval_ms)
        return 0;
    struct gossip_event *ev =
        gossip__ev_push(out, GOSSIP_EV_EPOCH_ADOPTED, NULL);
    if (ev == NULL)
        return -ENOMEM;
    ev->epoch = g->max_epoch;
    g->adopted_epoch = g->max_epoch;
    g->hearsay_since = 0;
    return 0;
}

uint64_t gossip_epoch_membership(const gossip *g)
{
    return g->membership_epoch;
}

void gossip_ring_applied(gossip *g, uint64_t epoch)
{
    if (epoch > g->applied_epoch)
        g->applied_epoch = epoch;
    gossip__epoch_seen(g, epoch);
}

bool gossip_ring_stale(const gossip *g)
{
    return g->max_epoch > g->applied_epoch;
}

void gossip_epoch_heard(gossip *g, uint64_t epoch)
{
    gossip__epoch_seen(g, epoch);
}

/* A STATUS value landed on e (self or peer): track status, epochs and, for a
 * peer, quarantine. */
int gossip__status_applied(gossip *g,
                           struct gossip__ep *e,
                           bool is_self,
                           uint64_t now,
                           struct gossip_out *out)
{
    enum gossip_status st;
    uint64_t epoch;
    struct rk_slice v =
        RK_SLICE(e->st[GOSSIP_KEY_STATUS].val, e->st[GOSSIP_KEY_STATUS].len);
    if (gossip_status_parse(&st, &epoch, v) != 0) {
        e->status = GOSSIP_STATUS_UNKNOWN;
        return 0;
    }
    e->status = st;
    e->status_epoch = epoch;
    gossip__epoch_seen(g, epoch);
    if (epoch > g->membership_epoch)
        g->membership_epoch = epoch;
    if (!is_self && (st == GOSSIP_STATUS_LEFT || st == GOSSIP_STATUS_REMOVED) &&
        !e->quarantined) {
        e->quarantined = true;
        e->quarantine_until = now + g->quarantine_ms;
        if (e->up) {
            e->up = false;
            if (out != NULL &&
                gossip__ev_push(out, GOSSIP_EV_DOWN, e->name) == NULL)
                return -ENOMEM;
        }
    }
    return 0;
}

/* ---- lifecycle ---------------------------------------------------------- */

static bool name_valid(const char *s)
{
    if (s == NULL)
        return false;
    size_t n = strlen(s);
    return n >= 1 && n <= GOSSIP_NAME_MAX;
}

int gossip_new(gossip **out, const struct gossip_config *cfg)
{
    if (!name_valid(cfg->cluster_name) || !name_valid(cfg->node_name) ||
        cfg->secret == NULL || cfg->secret_len == 0 || cfg->generation == 0 ||
        cfg->n_seeds > GOSSIP_SEEDS_MAX ||
        (cfg->n_seeds > 0 && cfg->seeds == NULL) || !(cfg->phi_threshold > 0) ||
        cfg->interval_ms == 0 || cfg->max_packet < 1024 ||
        cfg->max_packet > WIRE_GOSSIP_MAX_PACKET ||
        (cfg->suspicion_max_ms != 0 &&
         cfg->suspicion_max_ms <
             (cfg->suspicion_ms ? cfg->suspicion_ms : cfg->interval_ms)))
        return RK_ECONFIG;
    for (size_t i = 0; i < cfg->n_seeds; i++) {
        if (cfg->seeds[i] == NULL || cfg->seeds[i][0] == '\0' ||
            strlen(cfg->seeds[i]) > GOSSIP_ADDR_MAX)
            return RK_ECONFIG;
    }

    int rc = -ENOMEM;
    gossip *g = calloc(1, sizeof(*g));
    if (g == NULL)
        return -ENOMEM;
    rc = wire_key_derive(&g->key, cfg->secret, cfg->secret_len);
    if (rc != 0)
        goto free_g;
    rc = -ENOMEM;
    if (cfg->n_seeds > 0) {
        g->seeds = calloc(cfg->n_seeds, sizeof(*g->seeds));
        if (g->seeds == NULL)
            goto wipe_key;
        for (size_t i = 0; i < cfg->n_seeds; i++)
            gossip__copy_name(g->seeds[i], sizeof(g->seeds[i]), cfg->seeds[i],
                              strlen(cfg->seeds[i]));
        g->n_seeds = cfg->n_seeds;
    }
    g->cluster_len = strlen(cfg->cluster_name);
    memcpy(g->cluster, cfg->cluster_name, g->cluster_len + 1);
    g->phi_threshold = cfg->phi_threshold;
    g->interval_ms = cfg->interval_ms;
    g->max_packet = cfg->max_packet;
    g->quarantine_ms = cfg->quarantine_ms;
    g->rng = cfg->seed;
    size_t self;
    if (gossip__index_rebuild(g, 8) != 0)
        goto free_seeds;
    if (gossip__ep_add(g, cfg->node_name, strlen(cfg->node_name), &self) != 0)
        goto free_table;
    g->eps[self].generation = cfg->generation;
    g->eps[self].up = true;
    if (gossip__fresh_init(g, cfg) != 0 || gossip__probe_init(g, cfg) != 0)
        goto free_states;
    *out = g;
    return 0;

free_states:
    gossip__ep_clear_states(&g->eps[self]);

free_table:
    free(g->index);
    free(g->eps);
free_seeds:
    free(g->seeds);
wipe_key:
    wire_key_wipe(&g->key);
free_g:
    free(g);
    return rc;
}

void gossip_free(gossip *g)
{
    if (g == NULL)
        return;
    for (size_t i = 0; i < g->n_eps; i++)
        gossip__ep_clear_states(&g->eps[i]);
    gossip__probe_free(g);
    free(g->eps);
    free(g->index);
    free(g->tombs);
    free(g->seeds);
    wire_key_wipe(&g->key);
    free(g);
}

/* ---- setting this node's states ----------------------------------------- */

/* Largest value that fits one packet with this node's names. */
static size_t value_budget(const gossip *g)
{
    struct wire_gossip_delta head = {
        .node = RK_SLICE(g->eps[0].name, g->eps[0].name_len),
        .generation = UINT64_MAX,
        .base = UINT64_MAX,
        .top = UINT64_MAX,
    };
    struct wire_gossip_state s = {WIRE_GOSSIP_MAX_KEY, UINT64_MAX,
                                  RK_SLICE(NULL, 0)};
    size_t fixed = gossip__builder_base(g) +
                   wire_gossip_size_delta_head(&head, WIRE_GOSSIP_MAX_STATES) +
                   wire_gossip_size_state(&s) + 4; /* bin header growth */
    return g->max_packet > fixed ? g->max_packet - fixed : 0;
}

static int own_set(gossip *g, unsigned key, const void *value, size_t len)
{
    if (len > GOSSIP_VALUE_MAX || len > value_budget(g))
        return RK_ETOOLARGE;
    struct gossip__ep *self = &g->eps[0];
    int rc = gossip__ep_store(self, key, self->version + 1, value, len);
    if (rc == 0)
        self->version++;
    return rc;
}

int gossip_state_set(gossip *g,
                     enum gossip_key key,
                     const void *value,
                     size_t len)
{
    if ((unsigned)key >= GOSSIP_KEY_COUNT || key == GOSSIP_KEY_STATUS ||
        key == GOSSIP_KEY_RING_EPOCH || key == GOSSIP_KEY_INCARNATION ||
        key == GOSSIP_KEY_CLOCK || key == GOSSIP_KEY_FRESH ||
        (len > 0 && value == NULL))
        return RK_EBADREQ;
    if (key == GOSSIP_KEY_ADDRESS &&
        (len == 0 || len > GOSSIP_ADDR_MAX || memchr(value, '\0', len) != NULL))
        return RK_EBADREQ;
    return own_set(g, key, value, len);
}

int gossip_tokens_set(gossip *g, const uint64_t *tokens, size_t n)
{
    if (n > GOSSIP_MAX_TOKENS || (n > 0 && tokens == NULL))
        return RK_ETOOLARGE;
    uint8_t buf[GOSSIP_VALUE_MAX];
    for (size_t i = 0; i < n; i++)
        for (int b = 0; b < 8; b++)
            buf[i * 8 + b] = (uint8_t)(tokens[i] >> (56 - 8 * b));
    return own_set(g, GOSSIP_KEY_TOKENS, buf, n * 8);
}

static int
status_value(char *buf, size_t cap, enum gossip_status st, uint64_t epoch)
{
    return snprintf(buf, cap, "%s %" PRIu64, gossip_status_name(st), epoch);
}

int gossip_status_set(gossip *g,
                      enum gossip_status status,
                      uint64_t epoch,
                      uint64_t *out_epoch)
{
    if (status < GOSSIP_STATUS_BOOT || status > GOSSIP_STATUS_REMOVED)
        return RK_EBADREQ;
    if (epoch == 0)
        epoch = g->max_epoch + 1;
    char buf[48];
    int n = status_value(buf, sizeof(buf), status, epoch);
    int rc = own_set(g, GOSSIP_KEY_STATUS, buf, (size_t)n);
    if (rc == 0)
        rc = gossip__status_applied(g, &g->eps[0], true, 0, NULL);
    if (rc == 0)
        rc = gossip__own_ring_epoch_sync(g);
    if (rc == 0 && out_epoch != NULL)
        *out_epoch = epoch;
    return rc;
}

int gossip_peer_remove(gossip *g,
                       const char *name,
                       uint64_t now_ms,
                       uint64_t *out_epoch)
{
    return gossip_peer_status_set(g, name, GOSSIP_STATUS_REMOVED, now_ms,
                                  out_epoch);
}

int gossip_peer_status_set(gossip *g,
                           const char *name,
                           enum gossip_status status,
                           uint64_t now_ms,
                           uint64_t *out_epoch)
{
    if (name == NULL)
        return RK_ENOTFOUND;
    long idx = gossip__ep_find(g, name, strlen(name));
    if (idx < 0)
        return RK_ENOTFOUND;
    struct gossip__ep *e = &g->eps[idx];
    if (idx == 0 || e->quarantined ||
        (status != GOSSIP_STATUS_REMOVED && status != GOSSIP_STATUS_LEAVING &&
         status != GOSSIP_STATUS_NORMAL) ||
        (status == GOSSIP_STATUS_LEAVING &&
         e->status != GOSSIP_STATUS_NORMAL) ||
        (status == GOSSIP_STATUS_NORMAL && e->status != GOSSIP_STATUS_LEAVING))
        return RK_EBADREQ;
    uint64_t epoch = g->max_epoch + 1;
    char buf[48];
    int n = status_value(buf, sizeof(buf), status, epoch);
    /* Re-issue under generation + 1: the other states renumbered 1..k in
     * their old order, STATUS last. */
    int order[GOSSIP_KEY_COUNT];
    size_t n_order = 0;
    for (int k = 0; k < GOSSIP_KEY_COUNT; k++) {
        if (k == GOSSIP_KEY_STATUS || e->st[k].version == 0)
            continue;
        size_t j = n_order++;
        while (j > 0 && e->st[order[j - 1]].version > e->st[k].version) {
            order[j] = order[j - 1];
            j--;
        }
        order[j] = k;
    }
    int rc =
        gossip__ep_store(e, GOSSIP_KEY_STATUS, n_order + 1, buf, (size_t)n);
    if (rc != 0)
        return rc;
    for (size_t i = 0; i < n_order; i++)
        e->st[order[i]].version = i + 1;
    e->generation++;
    e->version = n_order + 1;
    rc = gossip__status_applied(g, e, false, now_ms, NULL);
    if (rc == 0)
        rc = gossip__own_ring_epoch_sync(g);
    if (rc == 0 && out_epoch != NULL)
        *out_epoch = epoch;
    return rc;
}

/* ---- reading ------------------------------------------------------------ */

size_t gossip_peer_count(const gossip *g)
{
    return g->n_eps;
}

int gossip_peer_get(struct gossip_peer_info *out,
                    const gossip *g,
                    size_t i,
                    uint64_t now_ms)
{
    if (i >= g->n_eps)
        return RK_ENOTFOUND;
    const struct gossip__ep *e = &g->eps[i];
    memset(out, 0, sizeof(*out));
    out->name = e->name;
    out->self = i == 0;
    out->up = i == 0 ? true : e->up;
    out->quarantined = e->quarantined;
    out->phi = i == 0 ? 0.0 : gossip__fd_phi(e, now_ms);
    out->probes = i == 0 ? g->probe_on : e->probes;
    out->suspect = i != 0 && e->suspect;
    out->incarnation = i == 0 ? g->incarnation : e->incarnation;
    out->generation = e->generation;
    out->version = e->version;
    out->status = e->status;
    out->status_epoch = e->status_epoch;
    for (int k = 0; k < GOSSIP_KEY_COUNT; k++) {
        out->state[k] = RK_SLICE(e->st[k].val, e->st[k].len);
        out->state_version[k] = e->st[k].version;
    }
    if (i != 0)
        out->clock_known =
            gossip__clock_offset(&out->clock_offset_ms, g, e, now_ms);
    return 0;
}

int gossip_peer_find(struct gossip_peer_info *out,
                     const gossip *g,
                     const char *name,
                     uint64_t now_ms)
{
    if (name == NULL)
        return RK_ENOTFOUND;
    long idx = gossip__ep_find(g, name, strlen(name));
    if (idx < 0)
        return RK_ENOTFOUND;
    return gossip_peer_get(out, g, (size_t)idx, now_ms);
}

void gossip_stats_get(struct gossip_stats *out, const gossip *g)
{
    *out = g->stats;
    out->health = g->health;
}
