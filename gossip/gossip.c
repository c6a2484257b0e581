/*
 * gossip.c - the gossip state machine: endpoints, version rules, the
 * phi-accrual detector, epochs, quarantine, and the SYN/ACK/ACK2 round.
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

#include "wire/gossip_msg.h"
#include "wire/wire.h"

_Static_assert(GOSSIP_NAME_MAX == WIRE_GOSSIP_MAX_NAME, "name limits differ");
_Static_assert(GOSSIP_VALUE_MAX <= WIRE_GOSSIP_MAX_VALUE, "value limit");

#define FD_WINDOW         32
#define FD_MAX_SAMPLE     65535u /* ms; longer gaps are clamped */
#define LOCAL_PAUSE_TICKS 5      /* a tick this late means we were paused */

struct gossip__state {
    uint64_t version; /* 0: never set */
    uint8_t *val;
    size_t len;
};

struct gossip__ep {
    char name[GOSSIP_NAME_MAX + 1];
    size_t name_len;
    uint64_t generation;
    uint64_t version;
    struct gossip__state st[GOSSIP_KEY_COUNT];
    enum gossip_status status;
    uint64_t status_epoch;
    /* failure detector */
    bool up;
    bool has_arrival;
    uint64_t last_arrival;
    uint16_t iv[FD_WINDOW];
    uint32_t iv_n, iv_pos, iv_sum;
    /* quarantine of LEFT / REMOVED */
    bool quarantined;
    uint64_t quarantine_until;
    /* the last SYN sent back to it because its SYN missed endpoints */
    bool syn_back_sent;
    uint64_t syn_back_ms;
};

struct gossip__tomb {
    char name[GOSSIP_NAME_MAX + 1];
    uint64_t generation;
};

struct gossip {
    char cluster[GOSSIP_NAME_MAX + 1];
    size_t cluster_len;
    struct wire_key key;
    char (*seeds)[GOSSIP_ADDR_MAX + 1];
    size_t n_seeds;
    double phi_threshold;
    uint32_t interval_ms;
    size_t max_packet;
    uint64_t quarantine_ms;
    uint64_t rng;

    struct gossip__ep *eps; /* eps[0] is this node */
    size_t n_eps, cap_eps;
    uint32_t *index; /* slot: endpoint index + 1, 0 = empty */
    size_t index_cap;
    struct gossip__tomb *tombs;
    size_t n_tombs, cap_tombs;

    uint64_t max_epoch, membership_epoch, applied_epoch, own_ring_epoch;
    bool stale_reported;
    bool ticked;
    uint64_t last_tick;
    struct gossip_stats stats;
};

/* ---- small helpers ------------------------------------------------------ */

static uint64_t rng_next(gossip *g)
{
    /* splitmix64 */
    uint64_t z = (g->rng += UINT64_C(0x9e3779b97f4a7c15));
    z = (z ^ (z >> 30)) * UINT64_C(0xbf58476d1ce4e5b9);
    z = (z ^ (z >> 27)) * UINT64_C(0x94d049bb133111eb);
    return z ^ (z >> 31);
}

static size_t rng_below(gossip *g, size_t n)
{
    return n == 0 ? 0 : (size_t)(rng_next(g) % n);
}

static double rng_unit(gossip *g)
{
    return (double)(rng_next(g) >> 11) * 0x1p-53;
}

static bool slice_eq_str(struct rk_slice s, const char *str, size_t len)
{
    return s.len == len && memcmp(s.p, str, len) == 0;
}

static void copy_name(char *dst, size_t cap, const void *src, size_t len)
{
    if (len >= cap)
        len = cap - 1;
    memcpy(dst, src, len);
    dst[len] = '\0';
}

static bool is_membership_key(unsigned k)
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

static struct gossip_event *
ev_push(struct gossip_out *out, enum gossip_event_type type, const char *name)
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
        copy_name(e->name, sizeof(e->name), name, strlen(name));
    return e;
}

/* Takes ownership of buf (freed on failure). */
static int
pkt_push(struct gossip_out *out, const char *to, uint8_t *buf, size_t len)
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
    copy_name(p->to, sizeof(p->to), to, strlen(to));
    p->buf = buf;
    p->len = len;
    return 0;
}

/* ---- endpoint table ----------------------------------------------------- */

static size_t name_hash(const void *name, size_t len)
{
    return (size_t)XXH3_64bits(name, len);
}

static int index_rebuild(gossip *g, size_t want)
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

static long ep_find(const gossip *g, const void *name, size_t len)
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

static int ep_add(gossip *g, const void *name, size_t len, size_t *out_idx)
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
        int rc = index_rebuild(g, g->n_eps + 1);
        if (rc != 0)
            return rc;
    }
    struct gossip__ep *e = &g->eps[g->n_eps];
    memset(e, 0, sizeof(*e));
    copy_name(e->name, sizeof(e->name), name, len);
    e->name_len = len;
    size_t mask = g->index_cap - 1;
    size_t h = name_hash(name, len) & mask;
    while (g->index[h] != 0)
        h = (h + 1) & mask;
    g->index[h] = (uint32_t)(g->n_eps + 1);
    *out_idx = g->n_eps++;
    return 0;
}

static void ep_clear_states(struct gossip__ep *e)
{
    for (int k = 0; k < GOSSIP_KEY_COUNT; k++) {
        free(e->st[k].val);
        e->st[k].val = NULL;
        e->st[k].len = 0;
        e->st[k].version = 0;
    }
}

static int ep_store(struct gossip__ep *e,
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

static void fd_reset(struct gossip__ep *e)
{
    e->has_arrival = false;
    e->iv_n = e->iv_pos = e->iv_sum = 0;
}

static double fd_mean(const struct gossip__ep *e)
{
    return e->iv_n ? (double)e->iv_sum / e->iv_n : 0.0;
}

static double fd_phi(const struct gossip__ep *e, uint64_t now)
{
    if (!e->has_arrival || now <= e->last_arrival)
        return 0.0;
    return gossip_phi((double)(now - e->last_arrival), fd_mean(e));
}

static void fd_sample(struct gossip__ep *e, uint64_t ms)
{
    uint16_t v = (uint16_t)(ms > FD_MAX_SAMPLE ? FD_MAX_SAMPLE : ms);
    if (e->iv_n == FD_WINDOW)
        e->iv_sum -= e->iv[e->iv_pos];
    else
        e->iv_n++;
    e->iv[e->iv_pos] = v;
    e->iv_sum += v;
    e->iv_pos = (e->iv_pos + 1) % FD_WINDOW;
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
static int fd_arrival(gossip *g,
                      struct gossip__ep *e,
                      uint64_t now,
                      struct gossip_out *out)
{
    if (!e->has_arrival || e->iv_n == 0)
        fd_sample(e, 2u * g->interval_ms);
    else if (e->up && now >= e->last_arrival)
        fd_sample(e, now - e->last_arrival);
    e->has_arrival = true;
    e->last_arrival = now;
    if (!e->up) {
        e->up = true;
        if (out != NULL && ev_push(out, GOSSIP_EV_UP, e->name) == NULL)
            return -ENOMEM;
    }
    return 0;
}

static struct gossip__tomb *
tomb_find(const gossip *g, const void *name, size_t len)
{
    for (size_t i = 0; i < g->n_tombs; i++)
        if (strlen(g->tombs[i].name) == len &&
            memcmp(g->tombs[i].name, name, len) == 0)
            return &g->tombs[i];
    return NULL;
}

/* ---- epochs ------------------------------------------------------------- */

static int parse_u64(uint64_t *out, const uint8_t *p, size_t len)
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
    if (parse_u64(&epoch, sp + 1, value.len - nlen - 1) != 0)
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

static void epoch_seen(gossip *g, uint64_t epoch)
{
    if (epoch > g->max_epoch)
        g->max_epoch = epoch;
}

/* Keeps this node's RING_EPOCH equal to the highest epoch known. */
static int own_ring_epoch_sync(gossip *g)
{
    if (g->own_ring_epoch >= g->max_epoch)
        return 0;
    char buf[24];
    int n = snprintf(buf, sizeof(buf), "%" PRIu64, g->max_epoch);
    struct gossip__ep *self = &g->eps[0];
    int rc = ep_store(self, GOSSIP_KEY_RING_EPOCH, self->version + 1, buf,
                      (size_t)n);
    if (rc != 0)
        return rc;
    self->version++;
    g->own_ring_epoch = g->max_epoch;
    return 0;
}

static int stale_check(gossip *g, struct gossip_out *out)
{
    bool stale = g->max_epoch > g->applied_epoch;
    struct gossip_event *ev = NULL;
    if (stale && !g->stale_reported) {
        ev = ev_push(out, GOSSIP_EV_RING_STALE, NULL);
        if (ev == NULL)
            return -ENOMEM;
        g->stale_reported = true;
    } else if (!stale && g->stale_reported) {
        ev = ev_push(out, GOSSIP_EV_RING_CAUGHT_UP, NULL);
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

uint64_t gossip_epoch_membership(const gossip *g)
{
    return g->membership_epoch;
}

void gossip_ring_applied(gossip *g, uint64_t epoch)
{
    if (epoch > g->applied_epoch)
        g->applied_epoch = epoch;
    epoch_seen(g, epoch);
}

bool gossip_ring_stale(const gossip *g)
{
    return g->max_epoch > g->applied_epoch;
}

/* A STATUS value landed on e (self or peer): track status, epochs and, for a
 * peer, quarantine. */
static int status_applied(gossip *g,
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
    epoch_seen(g, epoch);
    if (epoch > g->membership_epoch)
        g->membership_epoch = epoch;
    if (!is_self && (st == GOSSIP_STATUS_LEFT || st == GOSSIP_STATUS_REMOVED) &&
        !e->quarantined) {
        e->quarantined = true;
        e->quarantine_until = now + g->quarantine_ms;
        if (e->up) {
            e->up = false;
            if (out != NULL && ev_push(out, GOSSIP_EV_DOWN, e->name) == NULL)
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
        cfg->max_packet > WIRE_GOSSIP_MAX_PACKET)
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
            copy_name(g->seeds[i], sizeof(g->seeds[i]), cfg->seeds[i],
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
    if (index_rebuild(g, 8) != 0)
        goto free_seeds;
    if (ep_add(g, cfg->node_name, strlen(cfg->node_name), &self) != 0)
        goto free_table;
    g->eps[self].generation = cfg->generation;
    g->eps[self].up = true;
    *out = g;
    return 0;

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
        ep_clear_states(&g->eps[i]);
    free(g->eps);
    free(g->index);
    free(g->tombs);
    free(g->seeds);
    wire_key_wipe(&g->key);
    free(g);
}

/* ---- building packets ---------------------------------------------------- */

/* Accumulates digests and deltas of one message type for one destination and
 * cuts a packet whenever the next item would not fit in max_packet. */
struct builder {
    gossip *g;
    enum wire_gossip_type type;
    const char *to;
    struct gossip_out *out;
    size_t used; /* bytes the current packet will take (upper bound) */
    struct wire_gossip_digest *dg;
    size_t n_dg, cap_dg;
    struct wire_gossip_delta *dl;
    size_t *dl_first; /* index of each delta's first state in st */
    size_t n_dl, cap_dl;
    struct wire_gossip_state *st;
    size_t n_st, cap_st;
};

static size_t builder_base(const gossip *g)
{
    return wire_gossip_size_base(g->cluster_len, g->eps[0].name_len,
                                 WIRE_GOSSIP_MAX_DIGESTS,
                                 WIRE_GOSSIP_MAX_DELTAS);
}

static void builder_init(struct builder *b,
                         gossip *g,
                         enum wire_gossip_type type,
                         const char *to,
                         struct gossip_out *out)
{
    memset(b, 0, sizeof(*b));
    b->g = g;
    b->type = type;
    b->to = to;
    b->out = out;
    b->used = builder_base(g);
}

static void builder_free(struct builder *b)
{
    free(b->dg);
    free(b->dl);
    free(b->dl_first);
    free(b->st);
}

static bool builder_empty(const struct builder *b)
{
    return b->n_dg == 0 && b->n_dl == 0;
}

static int builder_flush(struct builder *b)
{
    gossip *g = b->g;
    if (builder_empty(b))
        return 0;
    for (size_t i = 0; i < b->n_dl; i++)
        b->dl[i].states = b->dl[i].n_states ? &b->st[b->dl_first[i]] : NULL;
    struct wire_gossip_msg m = {
        .type = b->type,
        .cluster = RK_SLICE(g->cluster, g->cluster_len),
        .from = RK_SLICE(g->eps[0].name, g->eps[0].name_len),
        .digests = b->dg,
        .n_digests = b->n_dg,
        .deltas = b->dl,
        .n_deltas = b->n_dl,
    };
    uint8_t *buf;
    size_t len;
    int rc = wire_gossip_msg_encode(&buf, &len, &m, &g->key);
    b->n_dg = b->n_dl = b->n_st = 0;
    b->used = builder_base(g);
    if (rc != 0)
        return rc;
    /* The size accounting is an upper bound of the encoder's output. */
    assert(len <= g->max_packet);
    g->stats.tx_packets++;
    g->stats.tx_bytes += len;
    return pkt_push(b->out, b->to, buf, len);
}

static int builder_digest(struct builder *b,
                          struct rk_slice node,
                          uint64_t generation,
                          uint64_t version)
{
    struct wire_gossip_digest d = {node, generation, version};
    size_t sz = wire_gossip_size_digest(&d);
    if ((b->used + sz > b->g->max_packet ||
         b->n_dg == WIRE_GOSSIP_MAX_DIGESTS) &&
        !builder_empty(b)) {
        int rc = builder_flush(b);
        if (rc != 0)
            return rc;
    }
    if (b->n_dg == b->cap_dg) {
        size_t cap = b->cap_dg ? b->cap_dg * 2 : 64;
        struct wire_gossip_digest *p = realloc(b->dg, cap * sizeof(*p));
        if (p == NULL)
            return -ENOMEM;
        b->dg = p;
        b->cap_dg = cap;
    }
    b->dg[b->n_dg++] = d;
    b->used += sz;
    return 0;
}

static int builder_reserve_delta(struct builder *b, size_t n_states)
{
    if (b->n_dl == b->cap_dl) {
        size_t cap = b->cap_dl ? b->cap_dl * 2 : 16;
        struct wire_gossip_delta *p = realloc(b->dl, cap * sizeof(*p));
        if (p == NULL)
            return -ENOMEM;
        b->dl = p;
        size_t *f = realloc(b->dl_first, cap * sizeof(*f));
        if (f == NULL)
            return -ENOMEM;
        b->dl_first = f;
        b->cap_dl = cap;
    }
    if (b->n_st + n_states > b->cap_st) {
        size_t cap = b->cap_st ? b->cap_st : 64;
        while (cap < b->n_st + n_states)
            cap *= 2;
        struct wire_gossip_state *p = realloc(b->st, cap * sizeof(*p));
        if (p == NULL)
            return -ENOMEM;
        b->st = p;
        b->cap_st = cap;
    }
    return 0;
}

/* Adds endpoint e's states with version > base, split in version order over
 * as many packets as needed. An endpoint with one state larger than a packet
 * (only possible if a peer uses a larger max_packet) is skipped. */
static int
builder_delta(struct builder *b, const struct gossip__ep *e, uint64_t base)
{
    struct wire_gossip_state sorted[GOSSIP_KEY_COUNT];
    size_t n = 0;
    for (unsigned k = 0; k < GOSSIP_KEY_COUNT; k++) {
        if (e->st[k].version <= base || e->st[k].version == 0)
            continue;
        struct wire_gossip_state s = {k, e->st[k].version,
                                      RK_SLICE(e->st[k].val, e->st[k].len)};
        size_t j = n++;
        while (j > 0 && sorted[j - 1].version > s.version) {
            sorted[j] = sorted[j - 1];
            j--;
        }
        sorted[j] = s;
    }
    int rc = builder_reserve_delta(b, n);
    if (rc != 0)
        return rc;
    struct wire_gossip_delta head = {
        .node = RK_SLICE(e->name, e->name_len),
        .generation = e->generation,
        .base = base,
        .top = e->version,
    };
    size_t head_sz = wire_gossip_size_delta_head(&head, WIRE_GOSSIP_MAX_STATES);
    size_t i = 0;
    for (;;) {
        if ((b->used + head_sz > b->g->max_packet ||
             b->n_dl == WIRE_GOSSIP_MAX_DELTAS) &&
            !builder_empty(b)) {
            rc = builder_flush(b);
            if (rc != 0)
                return rc;
        }
        size_t used = b->used + head_sz, first = i;
        while (i < n &&
               used + wire_gossip_size_state(&sorted[i]) <= b->g->max_packet) {
            used += wire_gossip_size_state(&sorted[i]);
            i++;
        }
        if (i == first && i < n) {
            if (builder_empty(b))
                return 0; /* a single state that can never fit: skip */
            rc = builder_flush(b);
            if (rc != 0)
                return rc;
            continue;
        }
        struct wire_gossip_delta *d = &b->dl[b->n_dl];
        *d = head;
        d->top = i == n ? e->version : sorted[i - 1].version;
        d->n_states = i - first;
        b->dl_first[b->n_dl] = b->n_st;
        if (i > first)
            memcpy(&b->st[b->n_st], &sorted[first],
                   (i - first) * sizeof(sorted[0]));
        b->n_st += i - first;
        b->n_dl++;
        b->used = used;
        if (i == n)
            return 0;
        head.base = d->top;
        rc = builder_flush(b);
        if (rc != 0)
            return rc;
    }
}

/* Does the holder of (gen, version) lack something of e? *base gets where
 * the delta starts. */
static bool delta_wanted(const struct gossip__ep *e,
                         uint64_t gen,
                         uint64_t version,
                         uint64_t *base)
{
    if (e->generation > gen) {
        *base = 0;
        return true;
    }
    if (e->generation == gen && e->version > version) {
        *base = version;
        return true;
    }
    return false;
}

/* ---- applying deltas ----------------------------------------------------- */

struct recv_ctx {
    gossip *g;
    uint64_t now;
    struct rk_slice sender;
    struct gossip_out *out;
    bool membership;
};

static int apply_delta(struct recv_ctx *c, const struct wire_gossip_delta *d)
{
    gossip *g = c->g;
    struct gossip_out *out = c->out;
    if (d->generation == 0 ||
        slice_eq_str(d->node, g->eps[0].name, g->eps[0].name_len))
        goto ignored; /* we are the only authority on ourselves */
    const struct gossip__tomb *tomb = tomb_find(g, d->node.p, d->node.len);
    if (tomb != NULL && d->generation <= tomb->generation)
        goto ignored;
    bool created = false, restarted = false;
    long idx = ep_find(g, d->node.p, d->node.len);
    if (idx < 0) {
        if (d->base != 0)
            goto ignored; /* need the whole state first */
        size_t ni;
        if (ep_add(g, d->node.p, d->node.len, &ni) != 0)
            return -ENOMEM;
        idx = (long)ni;
        g->eps[idx].generation = d->generation;
        created = true;
    } else {
        struct gossip__ep *e = &g->eps[idx];
        if (d->generation < e->generation ||
            (e->quarantined && d->generation != e->generation))
            goto ignored;
        if (d->generation > e->generation) {
            if (d->base != 0)
                goto ignored;
            ep_clear_states(e);
            e->generation = d->generation;
            e->version = 0;
            e->status = GOSSIP_STATUS_UNKNOWN;
            e->status_epoch = 0;
            fd_reset(e);
            restarted = true;
        } else if (d->base > e->version || d->top <= e->version) {
            goto ignored; /* a gap, or nothing new (replay, duplicate) */
        }
    }
    struct gossip__ep *e = &g->eps[idx];
    bool changed[GOSSIP_KEY_COUNT] = {false};
    for (size_t i = 0; i < d->n_states; i++) {
        const struct wire_gossip_state *s = &d->states[i];
        if (s->key >= GOSSIP_KEY_COUNT || s->version <= e->st[s->key].version)
            continue;
        if (ep_store(e, s->key, s->version, s->value.p, s->value.len) != 0)
            return -ENOMEM;
        changed[s->key] = true;
    }
    e->version = d->top;
    g->stats.deltas_applied++;

    if ((created && ev_push(out, GOSSIP_EV_JOINED, e->name) == NULL) ||
        (restarted && ev_push(out, GOSSIP_EV_RESTARTED, e->name) == NULL))
        return -ENOMEM;
    if (created || restarted)
        c->membership = true;
    for (unsigned k = 0; k < GOSSIP_KEY_COUNT; k++) {
        if (!changed[k])
            continue;
        struct gossip_event *ev = ev_push(out, GOSSIP_EV_STATE, e->name);
        if (ev == NULL)
            return -ENOMEM;
        ev->key = (enum gossip_key)k;
        if (is_membership_key(k))
            c->membership = true;
        if (k == GOSSIP_KEY_STATUS) {
            int rc = status_applied(g, e, false, c->now, out);
            if (rc != 0)
                return rc;
        } else if (k == GOSSIP_KEY_RING_EPOCH) {
            uint64_t ep;
            if (parse_u64(&ep, e->st[k].val, e->st[k].len) == 0)
                epoch_seen(g, ep);
        }
    }
    if (e->quarantined)
        return 0;
    bool first_hand = slice_eq_str(c->sender, e->name, e->name_len);
    if (created && !first_hand)
        return 0; /* hearsay: wait for a fresher heartbeat */
    if (restarted && !first_hand) {
        /* Hearsay too, and maybe not the node's own: removenode re-issues
         * a dead node's state under generation + 1 (gossip_peer_status_set).
         * The detector starts over from now, but only the node's next
         * heartbeat marks it UP. Until 2026-12-04 the re-issue marked a
         * dead node UP on every node but the one that made it. */
        fd_sample(e, 2u * g->interval_ms);
        e->has_arrival = true;
        e->last_arrival = c->now;
        return 0;
    }
    return fd_arrival(g, e, c->now, out);

ignored:
    g->stats.deltas_ignored++;
    return 0;
}

/* ---- the round ----------------------------------------------------------- */

/* A SYN to `to`: every endpoint's digest (maybe several packets). */
static int syn_build(gossip *g, const char *to, struct gossip_out *out)
{
    struct builder b;
    int rc = 0;
    builder_init(&b, g, WIRE_GOSSIP_SYN, to, out);
    for (size_t i = 0; i < g->n_eps && rc == 0; i++) {
        const struct gossip__ep *e = &g->eps[i];
        rc = builder_digest(&b, RK_SLICE(e->name, e->name_len), e->generation,
                            e->version);
    }
    if (rc == 0)
        rc = builder_flush(&b);
    builder_free(&b);
    return rc;
}

/* Whether a SYN leaves out an endpoint this node knows (itself included)
 * and does not quarantine: its sender has not heard of that one. */
static bool syn_lacks(const gossip *g, const struct wire_gossip_msg *m)
{
    size_t known = 0, listed = 0;
    for (size_t i = 0; i < g->n_eps; i++)
        known += !g->eps[i].quarantined;
    for (size_t i = 0; i < m->n_digests; i++) {
        const struct wire_gossip_digest *d = &m->digests[i];
        long idx = ep_find(g, d->node.p, d->node.len);
        listed += d->generation != 0 && idx >= 0 && !g->eps[idx].quarantined;
    }
    return listed < known;
}

/* An ACK answers only for the endpoints a SYN lists, so a node learns of
 * a new one only from a SYN that lists it: one of the nodes that know it
 * must pick it as a target, which can take several rounds (in a cluster of
 * four, with each of the others picking one of its three peers, no SYN
 * reaches a given node in a round with probability (2/3)^3, about 3 in 10).
 * Meanwhile it has heard of the new node's epoch through the others' RING_EPOCH
 * and its ring is stale: its requests wait (node/coord.c). So a node whose SYN
 * misses endpoints gets a SYN back at once, and asks for them in its ACK. At
 * most one per sender per half interval: a sender that cannot take an endpoint
 * (a tombstone) would otherwise be sent one per SYN, and two such nodes would
 * SYN each other back and forth. */
static int syn_back(struct recv_ctx *c,
                    const struct wire_gossip_msg *m,
                    const char *reply_to)
{
    gossip *g = c->g;
    if (!syn_lacks(g, m))
        return 0;
    long idx = ep_find(g, c->sender.p, c->sender.len);
    if (idx > 0) {
        struct gossip__ep *e = &g->eps[idx];
        if (e->syn_back_sent && c->now - e->syn_back_ms < g->interval_ms / 2)
            return 0;
        e->syn_back_sent = true;
        e->syn_back_ms = c->now;
    }
    g->stats.syn_back++;
    return syn_build(g, reply_to, c->out);
}

static int handle_syn(struct recv_ctx *c,
                      const struct wire_gossip_msg *m,
                      const char *reply_to)
{
    gossip *g = c->g;
    struct builder b;
    int rc = 0;
    builder_init(&b, g, WIRE_GOSSIP_ACK, reply_to, c->out);
    /* Requests first, so they go out even if deltas need many packets. */
    for (size_t i = 0; i < m->n_digests && rc == 0; i++) {
        const struct wire_gossip_digest *d = &m->digests[i];
        if (d->generation == 0 ||
            slice_eq_str(d->node, g->eps[0].name, g->eps[0].name_len))
            continue;
        const struct gossip__tomb *t = tomb_find(g, d->node.p, d->node.len);
        if (t != NULL && d->generation <= t->generation)
            continue;
        long idx = ep_find(g, d->node.p, d->node.len);
        if (idx < 0) {
            rc = builder_digest(&b, d->node, 0, 0);
            continue;
        }
        const struct gossip__ep *e = &g->eps[idx];
        if (e->quarantined && d->generation > e->generation)
            continue;
        if (d->generation > e->generation ||
            (d->generation == e->generation && d->version > e->version))
            rc = builder_digest(&b, d->node, e->generation, e->version);
    }
    for (size_t i = 0; i < m->n_digests && rc == 0; i++) {
        const struct wire_gossip_digest *d = &m->digests[i];
        long idx = ep_find(g, d->node.p, d->node.len);
        uint64_t base;
        if (d->generation == 0 || idx < 0)
            continue;
        if (delta_wanted(&g->eps[idx], d->generation, d->version, &base))
            rc = builder_delta(&b, &g->eps[idx], base);
    }
    if (rc == 0)
        rc = builder_flush(&b);
    builder_free(&b);
    if (rc == 0)
        rc = syn_back(c, m, reply_to);
    return rc;
}

static int handle_ack(struct recv_ctx *c,
                      const struct wire_gossip_msg *m,
                      const char *reply_to)
{
    gossip *g = c->g;
    int rc = 0;
    for (size_t i = 0; i < m->n_deltas && rc == 0; i++)
        rc = apply_delta(c, &m->deltas[i]);
    if (rc != 0)
        return rc;
    struct builder b;
    builder_init(&b, g, WIRE_GOSSIP_ACK2, reply_to, c->out);
    for (size_t i = 0; i < m->n_digests && rc == 0; i++) {
        const struct wire_gossip_digest *d = &m->digests[i];
        long idx = ep_find(g, d->node.p, d->node.len);
        uint64_t base;
        if (idx >= 0 &&
            delta_wanted(&g->eps[idx], d->generation, d->version, &base))
            rc = builder_delta(&b, &g->eps[idx], base);
    }
    if (rc == 0)
        rc = builder_flush(&b);
    builder_free(&b);
    return rc;
}

static int packet_event(struct gossip_out *out,
                        enum gossip_event_type type,
                        const char *from,
                        int err)
{
    struct gossip_event *ev = ev_push(out, type, NULL);
    if (ev == NULL)
        return -ENOMEM;
    copy_name(ev->addr, sizeof(ev->addr), from, strlen(from));
    ev->err = err;
    return 0;
}

int gossip_recv(gossip *g,
                uint64_t now_ms,
                const char *from,
                const uint8_t *pkt,
                size_t len,
                struct gossip_out *out)
{
    gossip_out_clear(out);
    g->stats.rx_packets++;
    g->stats.rx_bytes += len;
    if (from == NULL || from[0] == '\0' || strlen(from) > GOSSIP_ADDR_MAX) {
        g->stats.rx_malformed++;
        return RK_EPROTO;
    }
    struct wire_gossip_msg m;
    int rc = wire_gossip_msg_decode(&m, &g->key, pkt, len);
    if (rc == RK_EAUTH) {
        g->stats.rx_auth_fail++;
        int erc = packet_event(out, GOSSIP_EV_AUTH_FAIL, from, rc);
        return erc != 0 ? erc : rc;
    }
    if (rc == -ENOMEM)
        return rc;
    if (rc != 0) {
        g->stats.rx_malformed++;
        int erc = packet_event(out, GOSSIP_EV_BAD_PACKET, from, rc);
        return erc != 0 ? erc : rc;
    }
    if (!slice_eq_str(m.cluster, g->cluster, g->cluster_len)) {
        g->stats.rx_wrong_cluster++;
        wire_gossip_msg_release(&m);
        int erc = packet_event(out, GOSSIP_EV_AUTH_FAIL, from, RK_EAUTH);
        return erc != 0 ? erc : RK_EAUTH;
    }
    if (slice_eq_str(m.from, g->eps[0].name, g->eps[0].name_len)) {
        wire_gossip_msg_release(&m); /* our own packet (a seed is us) */
        return 0;
    }
    struct recv_ctx c = {g, now_ms, m.from, out, false};
    switch (m.type) {
    case WIRE_GOSSIP_SYN:
        g->stats.rx_syn++;
        rc = handle_syn(&c, &m, from);
        break;
    case WIRE_GOSSIP_ACK:
        g->stats.rx_ack++;
        rc = handle_ack(&c, &m, from);
        break;
    case WIRE_GOSSIP_ACK2:
        g->stats.rx_ack2++;
        for (size_t i = 0; i < m.n_deltas && rc == 0; i++)
            rc = apply_delta(&c, &m.deltas[i]);
        break;
    }
    wire_gossip_msg_release(&m);
    if (rc == 0 && c.membership &&
        ev_push(out, GOSSIP_EV_MEMBERSHIP, NULL) == NULL)
        rc = -ENOMEM;
    if (rc == 0)
        rc = own_ring_epoch_sync(g);
    if (rc == 0)
        rc = stale_check(g, out);
    return rc;
}

static bool is_seed(const gossip *g, const char *addr)
{
    for (size_t i = 0; i < g->n_seeds; i++)
        if (strcmp(g->seeds[i], addr) == 0)
            return true;
    return false;
}

static const char *ep_addr(const struct gossip__ep *e)
{
    const struct gossip__state *s = &e->st[GOSSIP_KEY_ADDRESS];
    if (s->len == 0 || s->len > GOSSIP_ADDR_MAX ||
        memchr(s->val, '\0', s->len) != NULL)
        return NULL;
    return (const char *)s->val;
}

/* Sends the SYN packets built in out->pkts[first..n) again to `to`. */
static int syn_copy(struct gossip_out *out,
                    size_t first,
                    size_t n,
                    const char *to,
                    struct gossip_stats *stats)
{
    for (size_t i = first; i < first + n; i++) {
        uint8_t *buf = malloc(out->pkts[i].len);
        if (buf == NULL)
            return -ENOMEM;
        memcpy(buf, out->pkts[i].buf, out->pkts[i].len);
        int rc = pkt_push(out, to, buf, out->pkts[i].len);
        if (rc != 0)
            return rc;
        stats->tx_packets++;
        stats->tx_bytes += out->pkts[i].len;
    }
    return 0;
}

static int evict_expired(gossip *g, uint64_t now, struct gossip_out *out)
{
    bool evicted = false;
    for (size_t i = g->n_eps; i-- > 1;) {
        struct gossip__ep *e = &g->eps[i];
        if (!e->quarantined || now < e->quarantine_until)
            continue;
        struct gossip__tomb *t = tomb_find(g, e->name, e->name_len);
        if (t == NULL) {
            if (g->n_tombs == g->cap_tombs) {
                size_t cap = g->cap_tombs ? g->cap_tombs * 2 : 8;
                struct gossip__tomb *p = realloc(g->tombs, cap * sizeof(*p));
                if (p == NULL)
                    return -ENOMEM;
                g->tombs = p;
                g->cap_tombs = cap;
            }
            t = &g->tombs[g->n_tombs++];
            memcpy(t->name, e->name, e->name_len + 1);
            t->generation = 0;
        }
        if (e->generation > t->generation)
            t->generation = e->generation;
        if (ev_push(out, GOSSIP_EV_EVICTED, e->name) == NULL)
            return -ENOMEM;
        ep_clear_states(e);
        g->eps[i] = g->eps[g->n_eps - 1];
        g->n_eps--;
        evicted = true;
    }
    return evicted ? index_rebuild(g, g->n_eps) : 0;
}

int gossip_tick(gossip *g, uint64_t now_ms, struct gossip_out *out)
{
    gossip_out_clear(out);
    bool paused =
        g->ticked && now_ms > g->last_tick &&
        now_ms - g->last_tick > (uint64_t)LOCAL_PAUSE_TICKS * g->interval_ms;
    g->ticked = true;
    g->last_tick = now_ms;
    g->stats.rounds++;
    g->eps[0].version++; /* heartbeat */

    /* Failure detection. After a local pause (our own stall, not theirs)
     * nobody is convicted and the clocks restart. */
    for (size_t i = 1; i < g->n_eps; i++) {
        struct gossip__ep *e = &g->eps[i];
        if (paused && e->has_arrival) {
            e->last_arrival = now_ms;
            continue;
        }
        if (e->up && fd_phi(e, now_ms) > g->phi_threshold) {
            e->up = false;
            if (ev_push(out, GOSSIP_EV_DOWN, e->name) == NULL)
                return -ENOMEM;
        }
    }
    int rc = evict_expired(g, now_ms, out);
    if (rc != 0)
        return rc;
    rc = stale_check(g, out);
    if (rc != 0)
        return rc;

    /* Choose targets: a live peer; a down one with probability
     * down / (live + 1); a seed as Cassandra does. */
    size_t n_live = 0, n_down = 0;
    size_t *live = malloc(g->n_eps * sizeof(*live));
    size_t *down = malloc(g->n_eps * sizeof(*down));
    if (live == NULL || down == NULL) {
        rc = -ENOMEM;
        goto free_lists;
    }
    for (size_t i = 1; i < g->n_eps; i++) {
        const struct gossip__ep *e = &g->eps[i];
        if (e->quarantined || ep_addr(e) == NULL)
            continue;
        if (e->up)
            live[n_live++] = i;
        else
            down[n_down++] = i;
    }
    const char *self_addr = ep_addr(&g->eps[0]);
    const char *seeds[GOSSIP_SEEDS_MAX];
    size_t n_seeds = 0;
    for (size_t i = 0; i < g->n_seeds; i++)
        if (self_addr == NULL || strcmp(g->seeds[i], self_addr) != 0)
            seeds[n_seeds++] = g->seeds[i];

    const char *targets[3];
    size_t n_targets = 0;
    bool to_seed = false;
    if (n_live > 0) {
        targets[n_targets] = ep_addr(&g->eps[live[rng_below(g, n_live)]]);
        to_seed = is_seed(g, targets[n_targets]);
        n_targets++;
    }
    if (n_down > 0 && rng_unit(g) < (double)n_down / (double)(n_live + 1))
        targets[n_targets++] = ep_addr(&g->eps[down[rng_below(g, n_down)]]);
    if (n_seeds > 0 && (!to_seed || n_live < n_seeds)) {
        if (n_live == 0 ||
            rng_unit(g) < (double)n_seeds / (double)(n_live + n_down)) {
            const char *s = seeds[rng_below(g, n_seeds)];
            bool dup = false;
            for (size_t i = 0; i < n_targets; i++)
                dup = dup || strcmp(targets[i], s) == 0;
            if (!dup)
                targets[n_targets++] = s;
        }
    }
    if (n_targets == 0)
        goto free_lists;

    /* One set of SYN packets with every digest, copied to each target. */
    size_t first = out->n_pkts;
    rc = syn_build(g, targets[0], out);
    size_t n_syn = out->n_pkts - first;
    for (size_t t = 1; t < n_targets && rc == 0; t++)
        rc = syn_copy(out, first, n_syn, targets[t], &g->stats);

free_lists:
    free(live);
    free(down);
    return rc;
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
    size_t fixed = builder_base(g) +
                   wire_gossip_size_delta_head(&head, WIRE_GOSSIP_MAX_STATES) +
                   wire_gossip_size_state(&s) + 4; /* bin header growth */
    return g->max_packet > fixed ? g->max_packet - fixed : 0;
}

static int own_set(gossip *g, unsigned key, const void *value, size_t len)
{
    if (len > GOSSIP_VALUE_MAX || len > value_budget(g))
        return RK_ETOOLARGE;
    struct gossip__ep *self = &g->eps[0];
    int rc = ep_store(self, key, self->version + 1, value, len);
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
        key == GOSSIP_KEY_RING_EPOCH || (len > 0 && value == NULL))
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
        rc = status_applied(g, &g->eps[0], true, 0, NULL);
    if (rc == 0)
        rc = own_ring_epoch_sync(g);
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
    long idx = ep_find(g, name, strlen(name));
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
    int rc = ep_store(e, GOSSIP_KEY_STATUS, n_order + 1, buf, (size_t)n);
    if (rc != 0)
        return rc;
    for (size_t i = 0; i < n_order; i++)
        e->st[order[i]].version = i + 1;
    e->generation++;
    e->version = n_order + 1;
    rc = status_applied(g, e, false, now_ms, NULL);
    if (rc == 0)
        rc = own_ring_epoch_sync(g);
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
    out->phi = i == 0 ? 0.0 : fd_phi(e, now_ms);
    out->generation = e->generation;
    out->version = e->version;
    out->status = e->status;
    out->status_epoch = e->status_epoch;
    for (int k = 0; k < GOSSIP_KEY_COUNT; k++) {
        out->state[k] = RK_SLICE(e->st[k].val, e->st[k].len);
        out->state_version[k] = e->st[k].version;
    }
    return 0;
}

int gossip_peer_find(struct gossip_peer_info *out,
                     const gossip *g,
                     const char *name,
                     uint64_t now_ms)
{
    if (name == NULL)
        return RK_ENOTFOUND;
    long idx = ep_find(g, name, strlen(name));
    if (idx < 0)
        return RK_ENOTFOUND;
    return gossip_peer_get(out, g, (size_t)idx, now_ms);
}

void gossip_stats_get(struct gossip_stats *out, const gossip *g)
{
    *out = g->stats;
}
