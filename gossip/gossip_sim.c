/*
 * gossip_sim.c - fake clock, fake lossy network, N gossip state machines.
 *
 * A binary heap orders three kinds of events by (time, sequence): a node's
 * tick, which schedules the next one interval_ms later, the delivery of a
 * datagram, and a node's failure-detector timer (gossip_timer), armed for
 * gossip_timer_due after everything the node does; a timer item that is no
 * longer the node's armed one is skipped. Packets a node emits are copied into
 * deliveries with a random delay, or dropped, or doubled. The sequence number
 * breaks time ties, so the order is total and the run is a function of the
 * seed.
 */
#include "gossip/gossip_sim.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

enum sim_kind { SIM_TICK, SIM_DELIVER, SIM_TIMER };

struct sim_item {
    uint64_t time, seq;
    enum sim_kind kind;
    size_t node; /* tick: who; deliver: destination */
    size_t from; /* deliver: sender */
    uint8_t *buf;
    size_t len;
};

struct gossip_sim {
    struct gossip_sim_config cfg;
    gossip **nodes;
    bool *isolated;
    bool *dead;
    uint64_t *timer_at; /* the armed timer of each node, UINT64_MAX: none */
    uint64_t rng, now, seq;
    struct sim_item *heap;
    size_t n_heap, cap_heap;
    struct gossip_out out;
    struct gossip_sim_counters counters;
};

static uint64_t sim_rng(gossip_sim *s)
{
    uint64_t z = (s->rng += UINT64_C(0x9e3779b97f4a7c15));
    z = (z ^ (z >> 30)) * UINT64_C(0xbf58476d1ce4e5b9);
    z = (z ^ (z >> 27)) * UINT64_C(0x94d049bb133111eb);
    return z ^ (z >> 31);
}

static double sim_unit(gossip_sim *s)
{
    return (double)(sim_rng(s) >> 11) * 0x1p-53;
}

static bool item_less(const struct sim_item *a, const struct sim_item *b)
{
    return a->time < b->time || (a->time == b->time && a->seq < b->seq);
}

static int heap_push(gossip_sim *s, struct sim_item it)
{
    if (s->n_heap == s->cap_heap) {
        size_t cap = s->cap_heap ? s->cap_heap * 2 : 256;
        struct sim_item *h = realloc(s->heap, cap * sizeof(*h));
        if (h == NULL)
            return -ENOMEM;
        s->heap = h;
        s->cap_heap = cap;
    }
    it.seq = s->seq++;
    size_t i = s->n_heap++;
    while (i > 0) {
        size_t p = (i - 1) / 2;
        if (!item_less(&it, &s->heap[p]))
            break;
        s->heap[i] = s->heap[p];
        i = p;
    }
    s->heap[i] = it;
    return 0;
}

static struct sim_item heap_pop(gossip_sim *s)
{
    struct sim_item top = s->heap[0];
    struct sim_item last = s->heap[--s->n_heap];
    size_t i = 0;
    for (;;) {
        size_t l = 2 * i + 1, r = l + 1, m = i;
        const struct sim_item *best = &last;
        if (l < s->n_heap && item_less(&s->heap[l], best)) {
            m = l;
            best = &s->heap[l];
        }
        if (r < s->n_heap && item_less(&s->heap[r], best))
            m = r;
        if (m == i)
            break;
        s->heap[i] = s->heap[m];
        i = m;
    }
    if (s->n_heap > 0)
        s->heap[i] = last;
    return top;
}

static void node_addr(char *buf, size_t cap, size_t i)
{
    snprintf(buf, cap, "sim:%zu", i);
}

static int timer_arm(gossip_sim *s, size_t node);

static int node_setup(gossip_sim *s, size_t i)
{
    char name[32], addr[32], rack[16];
    snprintf(name, sizeof(name), "n%zu", i);
    node_addr(addr, sizeof(addr), i);
    snprintf(rack, sizeof(rack), "r%zu", i % 3);
    char seeds_buf[GOSSIP_SEEDS_MAX][32];
    const char *seeds[GOSSIP_SEEDS_MAX];
    size_t n_seeds = s->cfg.n_seeds;
    if (n_seeds > GOSSIP_SEEDS_MAX)
        n_seeds = GOSSIP_SEEDS_MAX;
    if (n_seeds > s->cfg.n_nodes)
        n_seeds = s->cfg.n_nodes;
    for (size_t k = 0; k < n_seeds; k++) {
        node_addr(seeds_buf[k], sizeof(seeds_buf[k]), k);
        seeds[k] = seeds_buf[k];
    }
    static const uint8_t secret[] = "sim-secret";
    struct gossip_config gc = GOSSIP_CONFIG_INIT;
    gc.cluster_name = "sim";
    gc.node_name = name;
    gc.secret = secret;
    gc.secret_len = sizeof(secret) - 1;
    gc.generation = 1;
    gc.seed = sim_rng(s);
    gc.seeds = seeds;
    gc.n_seeds = n_seeds;
    gc.phi_threshold = s->cfg.phi_threshold;
    gc.interval_ms = s->cfg.interval_ms;
    gc.max_packet = s->cfg.max_packet;
    gc.probe = !s->cfg.no_probe;
    int rc = gossip_new(&s->nodes[i], &gc);
    if (rc != 0)
        return rc;
    gossip *g = s->nodes[i];
    uint64_t tokens[GOSSIP_VALUE_MAX / 8];
    size_t nt = s->cfg.n_tokens;
    if (nt > GOSSIP_VALUE_MAX / 8)
        return RK_ECONFIG;
    for (size_t k = 0; k < nt; k++)
        tokens[k] = sim_rng(s);
    if ((rc = gossip_state_set(g, GOSSIP_KEY_ADDRESS, addr, strlen(addr))) ||
        (rc = gossip_state_set(g, GOSSIP_KEY_DC, "dc1", 3)) ||
        (rc = gossip_state_set(g, GOSSIP_KEY_RACK, rack, strlen(rack))) ||
        (rc = gossip_tokens_set(g, tokens, nt)) ||
        (rc = gossip_status_set(g, GOSSIP_STATUS_NORMAL, 1, NULL)))
        return rc;
    gossip_ring_applied(g, 1);
    struct sim_item tick = {
        .time = sim_rng(s) % s->cfg.interval_ms, .kind = SIM_TICK, .node = i};
    rc = heap_push(s, tick);
    return rc != 0 ? rc : timer_arm(s, i);
}

int gossip_sim_new(gossip_sim **out, const struct gossip_sim_config *cfg)
{
    if (cfg->n_nodes == 0 || cfg->interval_ms == 0 ||
        cfg->delay_min_ms > cfg->delay_max_ms || cfg->n_nodes > 100000)
        return RK_ECONFIG;
    gossip_sim *s = calloc(1, sizeof(*s));
    if (s == NULL)
        return -ENOMEM;
    s->cfg = *cfg;
    s->rng = cfg->seed;
    gossip_out_init(&s->out);
    s->nodes = calloc(cfg->n_nodes, sizeof(*s->nodes));
    s->isolated = calloc(cfg->n_nodes, sizeof(*s->isolated));
    s->dead = calloc(cfg->n_nodes, sizeof(*s->dead));
    s->timer_at = malloc(cfg->n_nodes * sizeof(*s->timer_at));
    int rc = -ENOMEM;
    if (s->nodes == NULL || s->isolated == NULL || s->dead == NULL ||
        s->timer_at == NULL)
        goto fail;
    for (size_t i = 0; i < cfg->n_nodes; i++)
        s->timer_at[i] = UINT64_MAX;
    for (size_t i = 0; i < cfg->n_nodes; i++)
        if ((rc = node_setup(s, i)) != 0)
            goto fail;
    *out = s;
    return 0;
fail:
    gossip_sim_free(s);
    return rc;
}

void gossip_sim_free(gossip_sim *s)
{
    if (s == NULL)
        return;
    for (size_t i = 0; s->nodes != NULL && i < s->cfg.n_nodes; i++)
        gossip_free(s->nodes[i]);
    for (size_t i = 0; i < s->n_heap; i++)
        free(s->heap[i].buf);
    free(s->heap);
    free(s->nodes);
    free(s->isolated);
    free(s->dead);
    free(s->timer_at);
    gossip_out_free(&s->out);
    free(s);
}

static int send_one(gossip_sim *s, size_t from, const struct gossip_packet *p)
{
    unsigned long to;
    char tail;
    if (sscanf(p->to, "sim:%lu%c", &to, &tail) != 1 || to >= s->cfg.n_nodes)
        return 0; /* no such address: lost */
    s->counters.pkts_sent++;
    s->counters.bytes_sent += p->len;
    int copies = sim_unit(s) < s->cfg.dup ? 2 : 1;
    if (copies == 2)
        s->counters.pkts_duplicated++;
    for (int c = 0; c < copies; c++) {
        if (s->isolated[from] || s->isolated[to] || s->dead[to] ||
            sim_unit(s) < s->cfg.loss) {
            s->counters.pkts_lost++;
            continue;
        }
        uint32_t span = s->cfg.delay_max_ms - s->cfg.delay_min_ms + 1;
        struct sim_item it = {
            .time = s->now + s->cfg.delay_min_ms + sim_rng(s) % span,
            .kind = SIM_DELIVER,
            .node = to,
            .from = from,
            .len = p->len,
        };
        it.buf = malloc(p->len);
        if (it.buf == NULL)
            return -ENOMEM;
        memcpy(it.buf, p->buf, p->len);
        int rc = heap_push(s, it);
        if (rc != 0) {
            free(it.buf);
            return rc;
        }
    }
    return 0;
}

/* Arm node's timer for when its failure detector wants it. */
static int timer_arm(gossip_sim *s, size_t node)
{
    uint64_t due = gossip_timer_due(s->nodes[node]);
    if (due == UINT64_MAX || s->dead[node])
        return 0;
    if (due < s->now)
        due = s->now;
    if (due >= s->timer_at[node])
        return 0;
    s->timer_at[node] = due;
    struct sim_item it = {.time = due, .kind = SIM_TIMER, .node = node};
    return heap_push(s, it);
}

static int handle_out(gossip_sim *s, size_t node)
{
    for (size_t i = 0; i < s->out.n_events; i++) {
        const struct gossip_event *ev = &s->out.events[i];
        switch (ev->type) {
        case GOSSIP_EV_UP:
            s->counters.ev_up++;
            break;
        case GOSSIP_EV_DOWN:
            s->counters.ev_down++;
            break;
        case GOSSIP_EV_MEMBERSHIP:
            s->counters.ev_membership++;
            break;
        case GOSSIP_EV_AUTH_FAIL:
            s->counters.ev_auth_fail++;
            break;
        default:
            break;
        }
        if (s->cfg.on_event != NULL)
            s->cfg.on_event(s->cfg.arg, node, ev);
    }
    for (size_t i = 0; i < s->out.n_pkts; i++) {
        int rc = send_one(s, node, &s->out.pkts[i]);
        if (rc != 0)
            return rc;
    }
    return timer_arm(s, node);
}

int gossip_sim_inject(
    gossip_sim *s, size_t to, const char *from, const uint8_t *pkt, size_t len)
{
    if (to >= s->cfg.n_nodes)
        return RK_ENOTFOUND;
    int rc = gossip_recv(s->nodes[to], s->now, from, pkt, len, &s->out);
    int hrc = handle_out(s, to);
    return hrc != 0 ? hrc : rc;
}

int gossip_sim_run(gossip_sim *s, uint64_t until_ms)
{
    while (s->n_heap > 0 && s->heap[0].time <= until_ms) {
        struct sim_item it = heap_pop(s);
        s->now = it.time;
        int rc;
        if (s->dead[it.node]) {
            free(it.buf);
            continue;
        }
        if (it.kind == SIM_TICK) {
            rc = gossip_tick(s->nodes[it.node], s->now, &s->out);
            it.time += s->cfg.interval_ms;
            if (rc == 0)
                rc = heap_push(s, it);
        } else if (it.kind == SIM_TIMER) {
            if (it.time != s->timer_at[it.node])
                continue; /* re-armed since */
            s->timer_at[it.node] = UINT64_MAX;
            rc = gossip_timer(s->nodes[it.node], s->now, &s->out);
        } else {
            char from[32];
            node_addr(from, sizeof(from), it.from);
            rc = gossip_recv(s->nodes[it.node], s->now, from, it.buf, it.len,
                             &s->out);
            free(it.buf);
        }
        if (rc == 0)
            rc = handle_out(s, it.node);
        if (rc != 0)
            return rc;
    }
    if (until_ms > s->now)
        s->now = until_ms;
    return 0;
}

uint64_t gossip_sim_now(const gossip_sim *s)
{
    return s->now;
}

gossip *gossip_sim_node(gossip_sim *s, size_t i)
{
    return i < s->cfg.n_nodes ? s->nodes[i] : NULL;
}

void gossip_sim_isolate(gossip_sim *s, size_t i, bool isolated)
{
    if (i < s->cfg.n_nodes)
        s->isolated[i] = isolated;
}

size_t gossip_sim_down_count(const gossip_sim *s, size_t i)
{
    char name[32];
    snprintf(name, sizeof(name), "n%zu", i);
    size_t down = 0;
    for (size_t k = 0; k < s->cfg.n_nodes; k++) {
        struct gossip_peer_info pi;
        if (k != i && gossip_peer_find(&pi, s->nodes[k], name, s->now) == 0 &&
            !pi.up)
            down++;
    }
    return down;
}

void gossip_sim_kill(gossip_sim *s, size_t i)
{
    if (i < s->cfg.n_nodes)
        s->dead[i] = true;
}

void gossip_sim_counters_get(struct gossip_sim_counters *out,
                             const gossip_sim *s)
{
    *out = s->counters;
}
