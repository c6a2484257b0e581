/*
 * leave.c - decommission: a node streams every range it replicates out to
 * the nodes that gain it, then leaves the ring (shared/DESIGN.md,
 * "Streaming").
 *
 * `ringkv decommission` (node__leave_begin) first checks that the node may
 * go: it is NORMAL and placed, its ring is current, no other node is
 * joining or leaving (one range movement at a time), every other node is UP
 * (any of them may gain a range), and its data centre keeps at least as many
 * nodes as its replication factor. It then persists leaving=1 and announces
 * STATUS LEAVING under a new epoch. Every node builds, besides its ring, the
 * ring without the leaving node (n->ring_pending, gshell.c), and
 * coordinators send each write to the node that gains its key too (coord.c),
 * so a write acknowledged from then on is also on the replicas of the ring
 * after the leave. After the delay a join waits for the same reason (gossip
 * spreads the announcement), the node computes the movement plan
 * (ring_plan_new from its ring to the pending ring) and runs a session per
 * range it loses, LEAVE_PARALLEL at once.
 *
 * Unlike a join's, these sessions push: the leaving node holds every range
 * it loses, is the one that must know when all are in place, and is alive
 * throughout. A session scans a chunk of its range on the libuv pool (the
 * donor's scan, stream.c), sends it to the gaining node as an
 * RPC_MSG_STREAM_PUSH, and scans the next only once the gaining node has
 * answered that every record of the chunk is committed. A push that fails
 * or is refused is sent again from the same point after LEAVE_RETRY_MS;
 * records merge last-write-wins, so a record sent twice is harmless. When
 * every range is in place, and every hint this node keeps for another node
 * has been replayed (they would leave with it), the node announces LEFT (a
 * new epoch), persists left=1, goes on gossiping for LEAVE_LINGER_MS so that
 * every node hears it, and stops; ringkvd refuses to start on that data_dir
 * again (node.c).
 *
 * A restart while leaving (leaving=1) announces LEAVING again under the same
 * epoch and sends every range again from its start.
 *
 * The gaining side (node__leave_ingest) takes a push only for a range it
 * replicates in its pending ring and only keys inside that range, commits
 * the records through the group commit, and answers with a WRITE_ACK.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "node/log.h"
#include "node/node_internal.h"

#define LEAVE_DELAY_MS                                               \
    2000                    /* after announcing LEAVING (or 5 gossip \
                               intervals, if longer) */
#define LEAVE_PARALLEL    4 /* sessions pushing at once */
#define LEAVE_CHUNK_BYTES (1u << 20)
#define LEAVE_TIMEOUT_MS  30000 /* per push */
#define LEAVE_RETRY_MS    1000
#define LEAVE_LINGER_MS                          \
    3000 /* gossiping LEFT before stopping (or 5 \
            gossip intervals, if longer) */

enum lsess_state { L_IDLE = 0, L_SCANNING, L_SENDING, L_WAIT, L_DONE };

struct leave_sess {
    node *n;
    struct ring_range range;
    char dest[GOSSIP_NAME_MAX + 1]; /* the node that gains the range */
    enum lsess_state state;
    uint64_t retry_at;
    int fails;
    /* where the next scan starts; where the chunk being pushed ends */
    struct rpc_stream_pos at, next;
    uint8_t at_last[RPC_STREAM_LAST_MAX], next_last[RPC_STREAM_LAST_MAX];
    uint32_t chunk_keys;
    uint64_t chunk_bytes, keys, bytes;
};

struct node_leave {
    struct leave_sess *s;
    size_t ns;
    size_t busy; /* sessions scanning or sending */
    bool planned, left;
    uint64_t start_ms, ready_at, plan_ms, left_at, last_log_ms;
    uint64_t keys, bytes; /* in place on the gaining nodes */
    uint64_t epoch;       /* of the LEAVING announcement */
    /* every range is out; hints this node keeps for a peer go first */
    char hints_for[GOSSIP_NAME_MAX + 1];
    uint64_t hints_left;
};

static void leave_kick(node *n);

static uint64_t at_least(uint64_t ms, const node *n)
{
    uint64_t g = 5 * (uint64_t)n->cfg.gossip_interval_ms;
    return g > ms ? g : ms;
}

/* ---- the leaving side --------------------------------------------------- */

static void sess_fail(struct leave_sess *ls, const char *why, int err)
{
    node *n = ls->n;
    struct node_leave *lv = n->leave;
    if (ls->state == L_SCANNING || ls->state == L_SENDING)
        lv->busy--;
    ls->fails++;
    if (ls->fails == 1 || ls->fails % 10 == 0)
        LOG(WARN, "leave.retry",
            "range=(%llu,%llu] to=%s why=\"%s\" error=\"%s\" failures=%d",
            (unsigned long long)ls->range.start,
            (unsigned long long)ls->range.end, ls->dest, why, rk_strerror(err),
            ls->fails);
    ls->state = L_WAIT;
    ls->retry_at = node__mono_ms(n) + LEAVE_RETRY_MS;
}

/* The chunk is committed on the gaining node: the next, or done. */
static void sess_chunk_in_place(struct leave_sess *ls)
{
    node *n = ls->n;
    struct node_leave *lv = n->leave;
    ls->keys += ls->chunk_keys;
    ls->bytes += ls->chunk_bytes;
    lv->keys += ls->chunk_keys;
    lv->bytes += ls->chunk_bytes;
    n->stats.stream_out_keys += ls->chunk_keys;
    n->stats.stream_out_bytes += ls->chunk_bytes;
    ls->fails = 0;
    node__stream_pos_copy(&ls->at, ls->at_last, &ls->next);
    lv->busy--;
    if (ls->at.done) {
        ls->state = L_DONE;
        LOG(INFO, "leave.range_done",
            "range=(%llu,%llu] to=%s keys=%llu bytes=%llu",
            (unsigned long long)ls->range.start,
            (unsigned long long)ls->range.end, ls->dest,
            (unsigned long long)ls->keys, (unsigned long long)ls->bytes);
    } else {
        ls->state = L_IDLE;
    }
    leave_kick(n);
}

static void on_pushed(void *arg, int status, struct rk_slice resp)
{
    struct leave_sess *ls = arg;
    if (status == 0) {
        struct rpc_write_ack a;
        int rc = rpc_write_ack_decode(&a, resp);
        if (rc < 0)
            ls->n->stats.internode_bad++;
        status = rc < 0 ? rc : a.status;
    }
    if (status < 0) {
        sess_fail(ls, "push", status);
        return;
    }
    sess_chunk_in_place(ls);
}

static void on_scanned(void *arg,
                       int status,
                       struct rk_slice frame,
                       const struct rpc_stream_pos *next,
                       uint32_t count,
                       uint64_t kv_bytes)
{
    struct leave_sess *ls = arg;
    node *n = ls->n;
    if (status < 0) {
        sess_fail(ls, "scan", status);
        return;
    }
    if (n->stopping) {
        sess_fail(ls, "stopping", RK_ECLOSED);
        return;
    }
    node__stream_pos_copy(&ls->next, ls->next_last, next);
    ls->chunk_keys = count;
    ls->chunk_bytes = kv_bytes;
    if (count == 0) { /* the rest of the range is empty */
        sess_chunk_in_place(ls);
        return;
    }
    const struct node_peer *p = node__peer_by_name(n, ls->dest, NULL);
    if (!p || !p->up || !p->iaddr[0]) {
        sess_fail(ls, "the gaining node is not UP", RK_EUNAVAILABLE);
        return;
    }
    /* net/ copies the frame into the connection's output */
    struct rpc_buf view = {.data = (uint8_t *)frame.p, .len = frame.len};
    ls->state = L_SENDING;
    int rc =
        node__rpc_addr(n, p->iaddr, &view, LEAVE_TIMEOUT_MS, 0, on_pushed, ls);
    if (rc < 0)
        sess_fail(ls, "send", rc);
}

static void sess_scan(struct leave_sess *ls)
{
    node *n = ls->n;
    ls->state = L_SCANNING;
    n->leave->busy++;
    int rc = node__stream_scan(n, &ls->at, LEAVE_CHUNK_BYTES, on_scanned, ls);
    if (rc < 0)
        sess_fail(ls, "scan", rc);
}

/* The movement plan from the ring to the pending ring (this node gone): a
 * session for every range it loses, to the node that gains it. */
static int leave_plan(node *n)
{
    struct node_leave *lv = n->leave;
    const ring *from = n->ring, *to = n->ring_pending;
    if (!from || !to)
        return RK_EINTERNAL;
    uint32_t self = ring_node_find(from, n->cfg.node_name);
    struct ring_move *mv = NULL;
    size_t nmv = 0;
    int rc = ring_plan_new(&mv, &nmv, from, to);
    if (rc < 0)
        return rc;
    bool *mine = calloc(nmv ? nmv : 1, sizeof(*mine));
    size_t cnt = 0;
    for (size_t i = 0; mine && i < nmv; i++) {
        for (uint32_t k = 0; k < mv[i].nlose; k++)
            mine[i] |= mv[i].lose[k] == self;
        cnt += mine[i];
    }
    lv->s = mine ? calloc(cnt ? cnt : 1, sizeof(*lv->s)) : NULL;
    if (!lv->s) {
        free(mine);
        ring_plan_free(mv);
        return -ENOMEM;
    }
    for (size_t i = 0; i < nmv; i++) {
        struct ring_node_info ni;
        if (!mine[i] || ring_node_get(to, &ni, mv[i].gain) < 0)
            continue;
        struct leave_sess *ls = &lv->s[lv->ns++];
        ls->n = n;
        ls->range = mv[i].range;
        snprintf(ls->dest, sizeof(ls->dest), "%s", ni.name);
        ls->at.start = ls->range.start;
        ls->at.end = ls->range.end;
        ls->at.last = RK_SLICE(ls->at_last, 0);
    }
    free(mine);
    ring_plan_free(mv);
    lv->planned = true;
    lv->plan_ms = node__mono_ms(n);
    LOG(INFO, "leave.planned", "ranges=%zu epoch=%llu", lv->ns,
        (unsigned long long)ring_epoch(from));
    return 0;
}

/* Every range is in place: LEFT, a new epoch, left=1. */
static void leave_finish(node *n)
{
    struct node_leave *lv = n->leave;
    uint64_t epoch = 0;
    int rc = gossip_status_set(n->g, GOSSIP_STATUS_LEFT, 0, &epoch);
    if (rc < 0) {
        LOG(ERROR, "leave.announce_fail", "error=\"%s\"", rk_strerror(rc));
        return; /* again at the next tick */
    }
    n->st.ring_epoch = epoch;
    n->st.leaving = 0;
    n->st.left = 1;
    rc = node_state_save(&n->st, n->cfg.data_dir);
    if (rc < 0)
        LOG(ERROR, "state.save_fail", "error=\"%s\"", rk_strerror(rc));
    lv->left = true;
    lv->left_at = node__mono_ms(n);
    LOG(INFO, "leave.left",
        "epoch=%llu ranges=%zu keys=%llu bytes=%llu ms=%llu streaming_ms=%llu",
        (unsigned long long)epoch, lv->ns, (unsigned long long)lv->keys,
        (unsigned long long)lv->bytes,
        (unsigned long long)(lv->left_at - lv->start_ms),
        (unsigned long long)(lv->left_at - lv->plan_ms));
    node__ring_rebuild(n);
}

/* Hints this node keeps for the other members would be lost with it: the
 * first member that has some (replay kicked), or false when none does. */
static bool hints_pending(node *n)
{
    struct node_leave *lv = n->leave;
    lv->hints_for[0] = '\0';
    lv->hints_left = 0;
    if (n->hint_stores > 0) { /* not even stored yet */
        snprintf(lv->hints_for, sizeof(lv->hints_for), "(being stored)");
        lv->hints_left = (uint64_t)n->hint_stores;
        return true;
    }
    for (uint32_t i = 0; n->ring && n->store && i < n->npeers; i++) {
        struct ring_node_info ni;
        uint64_t cnt = 0;
        if (n->peer[i].self || ring_node_get(n->ring, &ni, i) < 0 ||
            (ni.state != RING_NORMAL && ni.state != RING_LEAVING) ||
            store_hint_count(&cnt, n->store, n->peer[i].name) < 0 || cnt == 0)
            continue;
        snprintf(lv->hints_for, sizeof(lv->hints_for), "%s", n->peer[i].name);
        lv->hints_left = cnt;
        node__hints_kick(n, i);
        return true;
    }
    return false;
}

static void leave_kick(node *n)
{
    struct node_leave *lv = n->leave;
    if (!lv || !lv->planned || lv->left || n->stopping)
        return;
    uint64_t now = node__mono_ms(n);
    size_t done = 0;
    for (size_t i = 0; i < lv->ns; i++) {
        struct leave_sess *ls = &lv->s[i];
        if (ls->state == L_DONE) {
            done++;
            continue;
        }
        if (lv->busy >= LEAVE_PARALLEL)
            continue;
        if (ls->state == L_IDLE || (ls->state == L_WAIT && now >= ls->retry_at))
            sess_scan(ls);
    }
    if (done == lv->ns && lv->busy == 0 && !hints_pending(n))
        leave_finish(n);
}

/* Why this node cannot leave now, in why; 0 if it can. */
static int leave_check(node *n, char *why, size_t cap)
{
    if (n->boot != NODE_BOOT_DONE) {
        snprintf(why, cap,
                 "%s is still joining: it can leave once it is NORMAL",
                 n->cfg.node_name);
        return RK_EBADREQ;
    }
    if (n->ring_stale || n->settling) {
        snprintf(why, cap,
                 "%s's ring is behind the cluster's (it has just started "
                 "or heard of a newer epoch): try again in a few seconds",
                 n->cfg.node_name);
        return RK_ESTALE;
    }
    const ring *r = n->ring;
    uint32_t self = r ? ring_node_find(r, n->cfg.node_name) : RING_NONE;
    struct ring_node_info me;
    if (self == RING_NONE || ring_node_get(r, &me, self) < 0 ||
        me.state != RING_NORMAL) {
        snprintf(why, cap, "%s holds no tokens in the ring", n->cfg.node_name);
        return RK_EBADREQ;
    }
    if (n->ring_pending) {
        snprintf(why, cap,
                 "another node is joining or leaving: one range movement at "
                 "a time; try again once `ringkv status` shows every node "
                 "UN");
        return RK_EBADREQ;
    }
    size_t others = 0;
    for (size_t i = 0; i < ring_node_count(r); i++) {
        struct ring_node_info ni;
        if (i == self || ring_node_get(r, &ni, (uint32_t)i) < 0 ||
            ni.state != RING_NORMAL)
            continue;
        if (i < n->npeers && !n->peer[i].up) {
            snprintf(why, cap,
                     "%s is DOWN: it may gain some of %s's ranges; bring it "
                     "back first",
                     ni.name, n->cfg.node_name);
            return RK_EBADREQ;
        }
        others += strcmp(ni.dc, me.dc) == 0;
    }
    int rf = 0;
    for (int i = 0; i < n->cfg.ndcs; i++)
        if (strcmp(n->cfg.replication[i].name, me.dc) == 0)
            rf = n->cfg.replication[i].rf;
    if (others == 0 || others < (size_t)rf) {
        snprintf(why, cap,
                 "data centre %s would keep %zu node%s for replication "
                 "factor %d: add a node first",
                 me.dc, others, others == 1 ? "" : "s", rf);
        return RK_EBADREQ;
    }
    return 0;
}

static struct node_leave *leave_new(node *n)
{
    struct node_leave *lv = calloc(1, sizeof(*lv));
    if (!lv)
        return NULL;
    lv->start_ms = node__mono_ms(n);
    lv->ready_at = lv->start_ms + at_least(LEAVE_DELAY_MS, n);
    return lv;
}

int node__leave_begin(node *n, char **text, size_t *len)
{
    char msg[512];
    int rc = 0;
    if (n->leave) {
        snprintf(msg, sizeof(msg),
                 "%s is already %s; `ringkv netstats` shows the progress",
                 n->cfg.node_name,
                 n->leave->left ? "LEFT and stopping" : "leaving");
    } else if ((rc = leave_check(n, msg, sizeof(msg))) == 0) {
        n->leave = leave_new(n);
        if (!n->leave)
            return -ENOMEM;
        /* persisted before the announce: a restart resumes the leave */
        n->st.leaving = 1;
        rc = node_state_save(&n->st, n->cfg.data_dir);
        uint64_t epoch = 0;
        if (rc == 0)
            rc = gossip_status_set(n->g, GOSSIP_STATUS_LEAVING, 0, &epoch);
        if (rc < 0) {
            n->st.leaving = 0;
            node_state_save(&n->st, n->cfg.data_dir);
            free(n->leave);
            n->leave = NULL;
            snprintf(msg, sizeof(msg), "cannot announce LEAVING: %s",
                     rk_strerror(rc));
        } else {
            n->leave->epoch = epoch;
            n->st.ring_epoch = epoch;
            node_state_save(&n->st, n->cfg.data_dir);
            LOG(INFO, "leave.leaving", "epoch=%llu", (unsigned long long)epoch);
            node__ring_rebuild(n);
            snprintf(msg, sizeof(msg),
                     "%s is leaving: announced LEAVING (ring epoch %llu). In "
                     "about %.0f s it starts sending every range it holds to "
                     "the node that gains it (`ringkv netstats` shows the "
                     "progress); then it announces LEFT and stops.",
                     n->cfg.node_name, (unsigned long long)epoch,
                     (double)(n->leave->ready_at - n->leave->start_ms) / 1000);
        }
    }
    *text = strdup(msg);
    if (!*text)
        return -ENOMEM;
    *len = strlen(*text);
    return rc;
}

int node__leave_resume(node *n)
{
    n->leave = leave_new(n);
    if (!n->leave)
        return -ENOMEM;
    n->leave->epoch = n->st.ring_epoch;
    return 0;
}

void node__leave_tick(node *n)
{
    struct node_leave *lv = n->leave;
    if (!lv || n->stopping)
        return;
    uint64_t now = node__mono_ms(n);
    if (lv->left) {
        if (now >= lv->left_at + at_least(LEAVE_LINGER_MS, n)) {
            LOG(INFO, "node.decommissioned",
                "note=\"left the cluster; stopping\"");
            node_stop(n, n->self_stop_cb, n->self_stop_arg);
        }
        return;
    }
    if (!lv->planned) {
        /* the ring it streams against must be the cluster's */
        if (now < lv->ready_at || n->ring_stale || n->settling ||
            !n->ring_pending)
            return;
        int rc = leave_plan(n);
        if (rc < 0) {
            LOG(ERROR, "leave.plan_fail", "error=\"%s\"", rk_strerror(rc));
            return;
        }
    }
    if (now - lv->last_log_ms >= 10000 && lv->ns) {
        lv->last_log_ms = now;
        size_t done = 0;
        for (size_t i = 0; i < lv->ns; i++)
            done += lv->s[i].state == L_DONE;
        LOG(INFO, "leave.progress",
            "ranges_done=%zu ranges=%zu keys=%llu bytes=%llu", done, lv->ns,
            (unsigned long long)lv->keys, (unsigned long long)lv->bytes);
    }
    leave_kick(n);
}

void node__leave_text(node *n, FILE *f)
{
    const struct node_leave *lv = n->leave;
    if (!lv)
        return;
    uint64_t ms = node__mono_ms(n) - lv->start_ms;
    char b1[32], b2[32];
    if (lv->left) {
        fprintf(f, "Mode: LEFT (stopping)\n");
    } else {
        fprintf(f, "Mode: LEAVING\n");
        if (!lv->planned) {
            fprintf(f,
                    "Announced LEAVING %.1f s ago; streaming starts once "
                    "the cluster has heard (ring delay).\n",
                    (double)ms / 1000);
            return;
        }
    }
    size_t done = 0;
    double frac = 0;
    for (size_t i = 0; i < lv->ns; i++) {
        done += lv->s[i].state == L_DONE;
        frac += lv->s[i].state == L_DONE
                    ? 1.0
                    : node__stream_fraction(lv->s[i].range, &lv->s[i].at);
    }
    frac = lv->ns ? frac / (double)lv->ns : 1;
    /* the rate and ETA count from the plan, and stop at LEFT */
    double secs =
        (double)((lv->left ? lv->left_at : node__mono_ms(n)) - lv->plan_ms) /
        1000;
    node__human_bytes(b1, sizeof(b1), lv->bytes);
    node__human_bytes(b2, sizeof(b2),
                      secs > 0 ? (uint64_t)((double)lv->bytes / secs) : 0);
    fprintf(f,
            "Sending %zu ranges: %zu done, %.0f%% of the token space; %llu "
            "keys, %s in %.1f s (%s/s)",
            lv->ns, done, frac * 100, (unsigned long long)lv->keys, b1, secs,
            b2);
    if (frac > 0.01 && frac < 1)
        fprintf(f, ", ETA %.0f s", secs * (1 - frac) / frac);
    fprintf(f, "\n");
    if (!lv->left && lv->hints_for[0])
        fprintf(f,
                "Every range is out; waiting for the %llu hint%s it keeps "
                "for %s to be replayed before leaving.\n",
                (unsigned long long)lv->hints_left,
                lv->hints_left == 1 ? "" : "s", lv->hints_for);
    static const char *const sn[] = {"queued", "reading", "sending", "retrying",
                                     "done"};
    for (size_t i = 0; i < lv->ns; i++) {
        const struct leave_sess *ls = &lv->s[i];
        double fr = ls->state == L_DONE
                        ? 1.0
                        : node__stream_fraction(ls->range, &ls->at);
        char bar[21];
        node__stream_bar(bar, fr);
        node__human_bytes(b1, sizeof(b1), ls->bytes);
        fprintf(f, "  (%llu,%llu] to %s [%s] %3.0f%% %s: %llu keys, %s\n",
                (unsigned long long)ls->range.start,
                (unsigned long long)ls->range.end, ls->dest, bar, fr * 100,
                sn[ls->state], (unsigned long long)ls->keys, b1);
    }
}

void node__leave_free(node *n)
{
    struct node_leave *lv = n->leave;
    if (!lv)
        return;
    free(lv->s);
    free(lv);
    n->leave = NULL;
}

/* ---- the gaining side --------------------------------------------------- */

struct ingest {
    node *n;
    net_conn *c;
    uint64_t id;
    uint32_t pending; /* records not yet committed, +1 while adding */
    int err;
    uint32_t keys;
    uint64_t bytes;
};

static void ingest_reply(node *n, net_conn *c, uint64_t id, int status)
{
    struct rpc_write_ack a = {.status = status, .hlc = n->hlc.last};
    struct rpc_buf *b = &n->reply_buf;
    rpc_buf_reset(b);
    if (rpc_write_ack_encode(b, &a) == 0)
        net_conn_reply(c, id, RK_SLICE(b->data, b->len));
}

static void on_ingested(int status, void *arg)
{
    struct ingest *g = arg;
    if (status < 0 && !g->err)
        g->err = status;
    if (--g->pending)
        return;
    node *n = g->n;
    if (!g->err) {
        n->stats.stream_in_keys += g->keys;
        n->stats.stream_in_bytes += g->bytes;
    }
    ingest_reply(n, g->c, g->id, g->err);
    net_conn_unref(g->c);
    free(g);
}

void node__leave_ingest(node *n, net_conn *c, uint64_t id, struct rk_slice f)
{
    struct rpc_stream_chunk ch;
    int rc = rpc_stream_push_decode(&ch, f);
    if (rc == 0 && ch.status != 0)
        rc = RK_EBADREQ;
    if (rc < 0) {
        n->stats.internode_bad++;
        ingest_reply(n, c, id, rc);
        return;
    }
    struct ring_range rg = {ch.next.start, ch.next.end};
    /* only a range this node gains: it has not heard of the leave yet
     * (RING_STALE: the sender tries again) or it is not the range's */
    const ring *pr = n->ring_pending;
    if (!pr || !n->store || n->stopping) {
        ingest_reply(n, c, id, n->stopping ? RK_ECLOSED : RK_ESTALE);
        return;
    }
    uint32_t self = ring_node_find(pr, n->cfg.node_name);
    uint32_t rep[RING_MAX_REPLICAS];
    size_t nr = ring_replicas(pr, rg.end, rep, RING_MAX_REPLICAS);
    bool ours = false;
    for (size_t k = 0; k < nr && k < RING_MAX_REPLICAS; k++)
        ours |= rep[k] == self && self != RING_NONE;
    struct rk_slice it = ch.items, key;
    struct rpc_record rec;
    while (ours && rc == 0 && rpc_stream_item_next(&it, &key, &rec) == 1)
        if (!ring_range_contains(rg, rk_token(key.p, key.len)))
            rc = RK_EPROTO;
    if (!ours || rc < 0) {
        n->stats.internode_bad += rc < 0;
        ingest_reply(n, c, id, rc < 0 ? rc : RK_EBADREQ);
        return;
    }
    struct ingest *g = calloc(1, sizeof(*g));
    if (!g) {
        ingest_reply(n, c, id, -ENOMEM);
        return;
    }
    g->n = n;
    g->c = c;
    g->id = id;
    g->pending = 1; /* held while adding */
    net_conn_ref(c);
    it = ch.items;
    while (rpc_stream_item_next(&it, &key, &rec) == 1) {
        g->pending++;
        rc = node__local_write(n, key, &rec, on_ingested, g);
        if (rc < 0) {
            g->pending--;
            g->err = rc;
            break;
        }
        g->keys++;
        g->bytes += key.len + rec.value.len;
    }
    on_ingested(0, g); /* the hold */
}
