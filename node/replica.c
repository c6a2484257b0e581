/*
 * replica.c - the replica side: the internode RPC server (replica writes
 * and reads from coordinators), the authenticated outbound connections
 * (net_peers), local reads and writes, and hinted handoff.
 *
 * Every internode connection starts with the mutual challenge-response
 * handshake of wire/rpc_msg.h under the cluster key (inside mutual TLS
 * under the cluster's CA with internode_tls required, the name each side
 * proves checked against its certificate: node/tls.c, net/conn.c); a peer
 * without the secret never gets a frame delivered, and a connection to a
 * member's address is used only once the node there has proved it is that
 * member. A malformed request is answered with an error status (BAD_REQUEST /
 * PROTOCOL); a frame that breaks the framing closes that one connection.
 *
 * Hints: a write for a DOWN (or unreachable) replica is stored in the store's
 * hints env (on the thread pool: it fsyncs), the hints of one loop turn in one
 * transaction (node__hint_flush), at most HINT_STORES_MAX waiting. When the
 * replica is UP again (gossip event, and every HINT_TIMER_MS while hints
 * remain) they are read in batches on the thread pool and sent as ordinary
 * replica writes; those answered for good are deleted by seq
 * (store_hint_delete_seqs). A hint that cannot be decoded, or that the replica
 * rejects for good (node__hint_rejected_for_good), is dropped: counted in
 * hints_dropped and logged as hints.dropped, since sending it again would fail
 * again. A hint whose write failed otherwise (timeout, peer closed or busy, an
 * error the replica may not answer next time) is kept, and the replay moves
 * past it: the peer's replay_after says where the next batch starts, back at
 * the first hint once a batch reaches the last. A hint records an
 * LWW-timestamped write, so the order in which hints arrive does not matter,
 * and one that fails the same way every time holds back no other (until
 * 2026-12-03 hints were deleted in order, up to the first one kept, and a hint
 * stuck that way stalled every later batch).
 *
 * A round goes on with the next batch at once after a batch that delivered
 * or dropped some hints (from the first hint again once a batch was the
 * last, short of HINT_BATCH; a full batch that happened to end at the last
 * hint finds none after it, and the round ends there), and otherwise ends,
 * as it also does when its last batch kept some; the next round, at the
 * next timer tick or UP event, goes on where it ended (at the first hint
 * if that was the last). So a kept hint is
 * sent again only after another was delivered or dropped, or once per
 * HINT_TIMER_MS, and a peer that fails every write gets one batch per
 * tick, each past the last. Kept hints are retried for as long as they
 * fail, never dropped for a transient failure (the store bounds how many
 * are kept, max_hints); each batch that keeps some logs hints.replay_kept.
 */
#include "node/replica.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <sodium.h>

#include "gossip/gossip.h"
#include "net/net.h"
#include "node/clock.h"
#include "node/commit.h"
#include "node/daemon.h"
#include "node/log.h"
#include "node/repair_host.h"
#include "node/ring_view.h"
#include "node/scan.h"
#include "ring/ring.h"
#include "storage/store.h"
#include "streaming/streaming.h"
#include "wire/rpc_msg.h"

#define HINT_BATCH 256
/* Hints waiting to be stored, at most; past it a hint is dropped and
 * counted (hints_dropped), so a write storm to a DOWN replica cannot queue
 * without bound (it did, ~16 KiB each, before 2026-12-03). */
#define HINT_STORES_MAX      4096
#define HINT_STORE_BYTES_MAX ((size_t)64 << 20) /* and their keys + values */
#define HINT_TIMER_MS        5000

/* ---- handshake -------------------------------------------------------- */

/* The ring member at internode address iaddr: the node this one means to
 * reach when it dials iaddr (connections are keyed by address, and every
 * request goes to a member's address). Should two members give one address
 * (a node replaced under a new name before the old is removed), the one
 * gossip has UP. NULL if none does. */
static const char *member_at(node *n, const char *iaddr)
{
    const char *found = NULL;
    for (size_t i = 0; i < n->npeers; i++) {
        const struct node_peer *p = &n->peer[i];
        if (strcmp(p->iaddr, iaddr) != 0)
            continue;
        if (p->up || p->self)
            return p->name;
        if (found == NULL)
            found = p->name;
    }
    return found;
}

static void hs_failed(node *n, const char *to, int rc)
{
    n->stats.internode_auth_fail++;
    if (to != NULL)
        LOG_LIMITED(&n->loglim.inode_hs, node__mono_ms(n), WARN,
                    "internode.handshake_fail", "side=connect to=%s error=%s",
                    to, rk_errname(rc));
    else
        LOG_LIMITED(&n->loglim.inode_hs, node__mono_ms(n), WARN,
                    "internode.handshake_fail", "side=accept error=%s",
                    rk_errname(rc));
}

static int hs_make(void *arg,
                   const char *to,
                   struct rk_slice peer,
                   uint8_t *out,
                   size_t cap,
                   size_t *out_len)
{
    node *n = arg;
    uint8_t nonce[RPC_NONCE_BYTES];
    const char *want = "";
    if (to != NULL && peer.len == 0) {
        want = member_at(n, to);
        if (want == NULL) { /* no longer a member's address */
            LOG(WARN, "internode.handshake_fail",
                "side=connect to=%s error=UNAVAILABLE reason=no_member", to);
            return RK_EUNAVAILABLE;
        }
    }
    randombytes_buf(nonce, sizeof(nonce));
    int rc = rpc_handshake_make(
        out, cap, out_len, n->rpc_key,
        RK_SLICE(n->cfg.cluster_name, strlen(n->cfg.cluster_name)),
        RK_SLICE(n->cfg.node_name, strlen(n->cfg.node_name)),
        RK_SLICE(want, strlen(want)), nonce, node__now_ms(), peer);
    if (rc < 0)
        hs_failed(n, to, rc);
    return rc;
}

static int hs_check(void *arg,
                    const char *to,
                    struct rk_slice got,
                    struct rk_slice sent,
                    char *name,
                    size_t name_cap)
{
    node *n = arg;
    int rc = rpc_handshake_check(
        got, sent, n->rpc_key,
        RK_SLICE(n->cfg.cluster_name, strlen(n->cfg.cluster_name)), name,
        name_cap);
    if (rc < 0)
        hs_failed(n, to, rc);
    return rc;
}

/* ---- local reads and writes ------------------------------------------- */

static void record_to_store(struct store_record *out,
                            const struct rpc_record *in)
{
    memset(out, 0, sizeof(*out));
    out->ts = in->ts;
    out->flags = (in->flags & RPC_REC_TOMBSTONE) ? STORE_REC_TOMBSTONE : 0;
    if (in->expiry) {
        out->flags |= STORE_REC_EXPIRES;
        out->expiry_ms = in->expiry;
    }
    out->value =
        (in->flags & RPC_REC_TOMBSTONE) ? RK_SLICE(NULL, 0) : in->value;
}

int node__local_write(node *n,
                      struct rk_slice key,
                      const struct rpc_record *rec,
                      node_commit_cb cb,
                      void *arg)
{
    struct store_record sr;
    record_to_store(&sr, rec);
    size_t need = store_record_size(&sr), len = 0;
    uint8_t stackbuf[512];
    uint8_t *buf = need <= sizeof(stackbuf) ? stackbuf : malloc(need);
    if (!buf)
        return -ENOMEM;
    int rc = store_record_encode(buf, need, &len, &sr);
    if (rc == 0)
        rc = node__commit_add(n, key, RK_SLICE(buf, len), cb, arg);
    if (buf != stackbuf)
        free(buf);
    return rc;
}

int node__local_read(node *n,
                     struct rk_slice key,
                     bool *found,
                     struct rpc_record *rec,
                     uint8_t **buf,
                     size_t *cap)
{
    size_t len = 0;
    *found = false;
    memset(rec, 0, sizeof(*rec));
    if (!n->store)
        return RK_ECLOSED;
    int rc = store_get_raw_into(buf, cap, &len, n->store, key);
    if (rc == RK_ENOTFOUND)
        return 0;
    if (rc < 0)
        return rc;
    struct store_record sr;
    rc = store_record_decode(&sr, *buf, len);
    if (rc < 0)
        return rc;
    *found = true;
    rec->ts = sr.ts;
    rec->flags = (sr.flags & STORE_REC_TOMBSTONE) ? RPC_REC_TOMBSTONE : 0;
    rec->expiry = (sr.flags & STORE_REC_EXPIRES) ? sr.expiry_ms : 0;
    rec->value = sr.value;
    return 0;
}

bool node__disk_full(node *n)
{
    return n->store != NULL && store_space_near_full(n->store);
}

/* ---- the internode server --------------------------------------------- */

/* A replica write waiting for its group commit. Kept in a pool of the node
 * (n->replica.iwrite_pool, common/pool.h), as replies are encoded into one
 * reused buffer (n->replica.reply_buf; net copies what it queues): answering a
 * replica request costs no malloc in the steady state. */
struct iwrite {
    net_conn *c;
    uint64_t id;
    node *n;
    bool behind;   /* the sender's ring is newer than ours (or we have none) */
    bool old_ring; /* the sender's ring is older: answer OLD_RING */
    struct iwrite *next; /* the pool's link */
};

#define IWRITE_LINK offsetof(struct iwrite, next)

static struct iwrite *iwrite_get(node *n)
{
    struct iwrite *w = rk_pool_get(&n->replica.iwrite_pool, IWRITE_LINK);
    return w ? w : malloc(sizeof(*w));
}

static void iwrite_put(node *n, struct iwrite *w)
{
    if (!rk_pool_put(&n->replica.iwrite_pool, w, IWRITE_LINK))
        free(w);
}

static void hint_store_job_free(struct hint_store_job *j);

void node__replica_free(node *n)
{
    for (struct iwrite *w;
         (w = rk_pool_get(&n->replica.iwrite_pool, IWRITE_LINK));)
        free(w);
    rpc_buf_free(&n->replica.reply_buf);
    free(n->replica.read_buf);
    n->replica.read_buf = NULL;
    n->replica.read_cap = 0;
    if (n->hints.open) { /* only if the node never ran its stop */
        hint_store_job_free(n->hints.open);
        n->hints.open = NULL;
    }
}

void node__reply_status(node *n, net_conn *c, uint64_t id, int type, int status)
{
    struct rpc_buf *b = &n->replica.reply_buf;
    int rc;
    rpc_buf_reset(b);
    if (type == RPC_MSG_READ) {
        struct rpc_read_resp r = {.status = status, .hlc = n->clock.hlc.last};
        rc = rpc_read_resp_encode(b, &r);
    } else {
        struct rpc_write_ack a = {.status = status, .hlc = n->clock.hlc.last};
        rc = rpc_write_ack_encode(b, &a);
    }
    if (rc == 0)
        net_conn_reply(c, id, RK_SLICE(b->data, b->len));
}

static void on_iwrite_done(int status, void *arg)
{
    struct iwrite *w = arg;
    node *n = w->n;
    /* No range here for the key, but our ring is behind the sender's: the
     * range may be ours in its ring. RING_STALE, which a sender retries
     * (a hint is kept), not NOT_FOUND, which a hint replay drops. */
    if (status == RK_ENOTFOUND && w->behind)
        status = RK_ESTALE;
    /* Stored (or no range here for the key), but planned on an older
     * ring than ours: OLD_RING, so the coordinator writes it again on the
     * newer ring's replica set (node__sender_ring_old). */
    if (w->old_ring && (status == 0 || status == RK_ENOTFOUND))
        status = RK_EOLDRING;
    node__reply_status(n, w->c, w->id, RPC_MSG_WRITE, status);
    net_conn_unref(w->c);
    iwrite_put(n, w);
}

/* A read or write planned on a ring older than the newest this node has
 * applied or heard of is answered RK_EOLDRING, so that the coordinator
 * waits for the newer ring and plans the request again on it (coord.c).
 * For about a gossip round after a join or a leave, coordinators on the
 * old ring and on the new one place a key on different replica sets:
 * until 2026-12-06 both were served, and a QUORUM read through a node on
 * the old ring (the leaving node's replica set) missed a QUORUM write
 * acknowledged by the new set (anomaly D of tests/cluster/test_history.py).
 * A read is refused, nothing read; a write is stored all the same (where
 * this node has a range for the key) and then answered OLD_RING, so that a
 * replica of both rings does not lack it when the coordinator does not
 * write it again (answered at its level already, it keeps a hint; when
 * writes were refused outright, test_removenode found a replica lacking
 * writes acknowledged during the removal until the hints came). Epoch 0
 * (no ring) is not refused. Requests are refused whatever the key: a
 * replica keeps no older ring to tell which keys moved, and the
 * coordinator's wait is short (docs/operations.md, "A client during a
 * ring change"). */
bool node__sender_ring_old(node *n, uint64_t epoch)
{
    /* gossip's newest epoch is at least the applied ring's: each ring is
     * reported to it as it is swapped in (gossip_ring_applied) */
    if (epoch == 0 || !n->ring || epoch >= gossip_epoch_max(n->g))
        return false;
    n->stats.replica_old_ring++;
    return true;
}

static int on_iframe(void *arg, net_conn *c, uint64_t id, struct rk_slice f)
{
    node *n = arg;
    enum rpc_msg_type t;
    if (rpc_msg_type_peek(&t, f) < 0) {
        n->stats.internode_bad++;
        node__reply_status(n, c, id, RPC_MSG_WRITE, RK_EPROTO);
        return 0;
    }
    if (t == RPC_MSG_WRITE) {
        struct rpc_write w;
        int rc = rpc_write_decode(&w, f);
        if (rc == 0 && w.token != rk_token(w.key.p, w.key.len))
            rc = RK_EBADREQ;
        if (rc < 0) {
            n->stats.internode_bad++;
            node__reply_status(n, c, id, RPC_MSG_WRITE, rc);
            return 0;
        }
        n->stats.replica_writes++;
        /* a timestamp too far ahead is refused (CLOCK_SKEW), and the
         * ceiling is saved before a record above it is stored */
        rc = node__clock_recv(n, w.rec.ts, net_conn_peer_name(c));
        if (rc < 0) {
            node__reply_status(n, c, id, RPC_MSG_WRITE, rc);
            return 0;
        }
        struct iwrite *iw = iwrite_get(n);
        if (!iw) {
            node__reply_status(n, c, id, RPC_MSG_WRITE, -ENOMEM);
            return 0;
        }
        iw->c = c;
        iw->id = id;
        iw->n = n;
        iw->behind = !n->ring || w.epoch > ring_epoch(n->ring);
        iw->old_ring = node__sender_ring_old(n, w.epoch);
        net_conn_ref(c);
        rc = node__local_write(n, w.key, &w.rec, on_iwrite_done, iw);
        if (rc < 0) {
            net_conn_unref(c);
            iwrite_put(n, iw);
            node__reply_status(n, c, id, RPC_MSG_WRITE, rc);
        }
        return 0;
    }
    if (t == RPC_MSG_READ) {
        struct rpc_read rq;
        int rc = rpc_read_decode(&rq, f);
        if (rc < 0) {
            n->stats.internode_bad++;
            node__reply_status(n, c, id, RPC_MSG_READ, rc);
            return 0;
        }
        n->stats.replica_reads++;
        if (node__sender_ring_old(n, rq.epoch)) {
            node__reply_status(n, c, id, RPC_MSG_READ, RK_EOLDRING);
            return 0;
        }
        struct rpc_read_resp r = {.status = 0};
        bool found;
        rc = node__local_read(n, rq.key, &found, &r.rec, &n->replica.read_buf,
                              &n->replica.read_cap);
        r.status = rc;
        r.found = rc == 0 && found;
        r.hlc = n->clock.hlc.last;
        if (!r.rec.value.p)
            r.rec.value = RK_SLICE("", 0);
        if (r.found && rq.digest) {
            r.is_digest = true;
            rpc_record_digest(&r.dig, &r.rec);
        }
        struct rpc_buf *b = &n->replica.reply_buf;
        rpc_buf_reset(b);
        if (rpc_read_resp_encode(b, &r) == 0)
            net_conn_reply(c, id, RK_SLICE(b->data, b->len));
        if (b->cap > 64 * 1024)
            rpc_buf_free(b); /* a large value: do not keep its buffer */
        if (n->replica.read_cap > 64 * 1024) {
            free(n->replica.read_buf);
            n->replica.read_buf = NULL;
            n->replica.read_cap = 0;
        }
        return 0;
    }
    if (t == RPC_MSG_STREAM) {
        stream_serve(n->streaming, c, id, f);
        return 0;
    }
    if (t == RPC_MSG_STREAM_PUSH) {
        stream_push_serve(n->streaming, c, id, f);
        return 0;
    }
    if (t == RPC_MSG_MERKLE) {
        node__repair_serve(n, c, id, f);
        return 0;
    }
    if (t == RPC_MSG_SCAN) {
        node__scan_serve(n, c, id, f);
        return 0;
    }
    n->stats.internode_bad++;
    node__reply_status(n, c, id, RPC_MSG_WRITE, RK_EBADREQ);
    return 0;
}

int node__rpc(node *n,
              uint32_t idx,
              const struct rpc_buf *msg,
              uint32_t timeout_ms,
              net_rpc_cb cb,
              void *arg)
{
    if (!n->replica.peers || idx >= n->npeers || !n->peer[idx].iaddr[0])
        return RK_EUNAVAILABLE;
    return net_peers_request(n->replica.peers, n->peer[idx].iaddr,
                             RK_SLICE(msg->data, msg->len), timeout_ms, cb,
                             arg);
}

int node__rpc_addr(node *n,
                   const char *iaddr,
                   const struct rpc_buf *msg,
                   uint32_t timeout_ms,
                   uint32_t max_quiet_ms,
                   net_rpc_cb cb,
                   void *arg)
{
    if (!n->replica.peers || !iaddr[0])
        return RK_EUNAVAILABLE;
    return net_peers_request_unless_quiet(n->replica.peers, iaddr,
                                          RK_SLICE(msg->data, msg->len),
                                          timeout_ms, max_quiet_ms, cb, arg);
}

uint64_t node__peer_quiet_ms(node *n, const char *iaddr)
{
    return n->replica.peers && iaddr[0]
               ? net_peers_quiet_ms(n->replica.peers, iaddr)
               : 0;
}

bool node__peer_reachable(node *n, const char *iaddr)
{
    return n->replica.peers && iaddr[0]
               ? net_peers_reachable(n->replica.peers, iaddr)
               : true;
}

void node__peer_retry(node *n, const char *iaddr)
{
    if (n->replica.peers && iaddr[0]) {
        net_peers_retry(n->replica.peers, iaddr);
        /* connected before a write needs it: the first would otherwise
         * wait for the connect and the handshake (the write's deadline
         * counts from its start) */
        (void)net_peers_connect(n->replica.peers, iaddr);
    }
}

/* ---- hints ------------------------------------------------------------ */

/* What became of one hint of a replay batch. */
enum hint_fate {
    HINT_SENT = 0,    /* waiting for the replica's answer */
    HINT_DELIVERED,   /* acknowledged */
    HINT_UNDECODABLE, /* its stored bytes do not make a write: dropped */
    HINT_REJECTED,    /* the replica refused it for good: dropped */
    HINT_RETRY        /* failed for now: kept for a later round */
};

struct hint_job;

/* The callback argument of the replica write of hint i. */
struct hint_ack {
    struct hint_job *j;
    size_t i;
};

/* The hints one loop turn left, stored in one LMDB transaction (one sync)
 * on the thread pool: a synced commit per hint managed ~2-3k/s. Each hint's
 * name, key and record are one malloc'd block, starting at h[i].node. */
struct hint_store_job {
    uv_work_t work;
    node *n;
    struct store_hint *h;
    size_t count, cap, bytes; /* bytes: keys + records */
};

struct hint_job {
    uv_work_t work;
    node *n;
    char name[GOSSIP_NAME_MAX + 1];
    int kind; /* 1 scan, 2 delete */
    /* scan results */
    uint64_t after; /* scan: the hints with a seq past this one */
    size_t count;
    uint64_t seqs[HINT_BATCH];
    uint8_t *keys[HINT_BATCH], *recs[HINT_BATCH];
    size_t klens[HINT_BATCH], rlens[HINT_BATCH];
    int status;
    /* replay progress */
    size_t pending;
    struct hint_ack acks[HINT_BATCH];
    uint8_t fates[HINT_BATCH]; /* enum hint_fate */
    int errs[HINT_BATCH];      /* why a hint was dropped or kept */
    uint64_t gone[HINT_BATCH]; /* delete: the seqs answered for good */
    size_t ngone;
    bool more; /* delete: then the next batch at once */
};

static void hint_job_free(struct hint_job *j)
{
    for (size_t i = 0; i < j->count; i++) {
        free(j->keys[i]);
        free(j->recs[i]);
    }
    free(j);
}

static int
hint_scan_cb(uint64_t seq, struct rk_slice key, struct rk_slice rec, void *arg)
{
    struct hint_job *j = arg;
    if (j->count == HINT_BATCH)
        return 1;
    size_t i = j->count;
    j->keys[i] = malloc(key.len ? key.len : 1);
    j->recs[i] = malloc(rec.len ? rec.len : 1);
    if (!j->keys[i] || !j->recs[i]) {
        free(j->keys[i]);
        free(j->recs[i]);
        return -ENOMEM;
    }
    memcpy(j->keys[i], key.p, key.len);
    memcpy(j->recs[i], rec.p, rec.len);
    j->klens[i] = key.len;
    j->rlens[i] = rec.len;
    j->seqs[i] = seq;
    j->count++;
    return 0;
}

static void hint_work(uv_work_t *w)
{
    struct hint_job *j = w->data;
    store *s = j->n->store;
    if (j->kind == 1)
        j->status =
            store_hint_scan(s, j->name, j->after, HINT_BATCH, hint_scan_cb, j);
    else
        j->status = store_hint_delete_seqs(s, j->name, j->gone, j->ngone);
}

static void hint_after(uv_work_t *w, int status);

static int hint_queue(node *n, struct hint_job *j)
{
    int rc = uv_queue_work(n->loop, &j->work, hint_work, hint_after);
    if (rc == 0)
        n->pending_closes++;
    return rc;
}

struct node_peer *node__peer_by_name(node *n, const char *name, uint32_t *idx)
{
    for (uint32_t i = 0; i < n->npeers; i++) {
        if (strcmp(n->peer[i].name, name) == 0) {
            if (idx)
                *idx = i;
            return &n->peer[i];
        }
    }
    return NULL;
}

static void replay_done(node *n, struct hint_job *j, bool more)
{
    uint32_t idx = 0;
    struct node_peer *p = node__peer_by_name(n, j->name, &idx);
    if (p)
        p->replaying = false;
    if (more && p && p->up && !n->stopping)
        node__hints_kick(n, idx);
}

static void hint_batch_release(struct hint_job *j);

/* A replica's answer that sending the hint again would get again: the
 * write is malformed or of a kind the replica does not know, or no range of
 * the replica holds its key (a replica whose ring is older than the
 * sender's answers RING_STALE instead, on_iwrite_done). Everything else
 * keeps the hint: timeouts, a
 * closed, busy or stale peer, a full disk, a system error, and also
 * TOO_LARGE, CORRUPT and VERSION, which a replica answers for a range it
 * cannot write to for now (stuck, storage/store.c) -- the record itself
 * was decoded and checked here before it was sent. */
bool node__hint_rejected_for_good(int status)
{
    switch (status) {
    case RK_EBADREQ:
    case RK_EPROTO:
    case RK_ENOTFOUND:
    case RK_ENOTSUP:
    case RK_ECLOCKSKEW:
        return true;
    default:
        return false;
    }
}

static void on_hint_ack(void *arg, int status, struct rk_slice resp)
{
    struct hint_ack *a = arg;
    struct hint_job *j = a->j;
    int st = status, fate = HINT_RETRY;
    struct rpc_write_ack ack;
    if (st == 0 && (st = rpc_write_ack_decode(&ack, resp)) == 0) {
        st = ack.status;
        if (st == 0)
            fate = HINT_DELIVERED;
        else if (node__hint_rejected_for_good(st))
            fate = HINT_REJECTED;
    }
    j->fates[a->i] = (uint8_t)fate;
    j->errs[a->i] = st;
    hint_batch_release(j);
}

/* Every hint of the batch is answered: delete those answered for good,
 * keep the others for a later round (a replica write is idempotent), and
 * move the peer's replay past the batch, or back to its first hint if the
 * batch reached the last (see the comment at the top). */
static void hint_batch_release(struct hint_job *j)
{
    node *n = j->n;
    if (--j->pending > 0)
        return;
    size_t kept = 0, first = j->count;
    j->ngone = 0;
    for (size_t i = 0; i < j->count; i++) {
        if (j->fates[i] != HINT_RETRY)
            j->gone[j->ngone++] = j->seqs[i];
        else if (kept++ == 0)
            first = i;
    }
    if (kept || n->stopping)
        LOG(INFO, "hints.replay_kept",
            "peer=%s failed=%zu of=%zu first_seq=%llu error=\"%s\"", j->name,
            kept, j->count, (unsigned long long)(kept ? j->seqs[first] : 0),
            kept ? rk_strerror(j->errs[first]) : "node stopping");
    bool full = j->count == HINT_BATCH;
    struct node_peer *p = node__peer_by_name(n, j->name, NULL);
    if (p)
        p->replay_after = full ? j->seqs[j->count - 1] : 0;
    if (j->ngone == 0 || n->stopping) {
        replay_done(n, j, false);
        hint_job_free(j);
        return;
    }
    /* the job deletes them; hint_after counts them once deleted */
    j->kind = 2;
    j->more = full || kept == 0;
    if (hint_queue(n, j) < 0) {
        replay_done(n, j, false);
        hint_job_free(j);
    }
}

/* The hints of the batch answered for good are deleted: count them, and
 * log those dropped in one line (with the first one's seq and error). */
static void hint_batch_deleted(node *n, const struct hint_job *j)
{
    size_t delivered = 0, bad = 0, rejected = 0, first = j->count;
    for (size_t i = 0; i < j->count; i++) {
        if (j->fates[i] == HINT_RETRY)
            continue;
        if (j->fates[i] == HINT_DELIVERED) {
            delivered++;
            continue;
        }
        if (first == j->count)
            first = i;
        if (j->fates[i] == HINT_REJECTED)
            rejected++;
        else
            bad++;
    }
    n->stats.hints_replayed += delivered;
    n->stats.hints_dropped += bad + rejected;
    if (bad + rejected)
        LOG(WARN, "hints.dropped",
            "peer=%s undecodable=%zu rejected=%zu first_seq=%llu "
            "error=\"%s\"",
            j->name, bad, rejected, (unsigned long long)j->seqs[first],
            rk_strerror(j->errs[first]));
    LOG(INFO, "hints.replayed", "peer=%s count=%zu", j->name, delivered);
}

/* Send hint i of the batch to peer idx: HINT_SENT (its answer will come to
 * on_hint_ack), else its fate, the error in errs[i]. */
static int hint_send(node *n, struct hint_job *j, size_t i, uint32_t idx)
{
    struct store_record sr;
    /* an empty key: bytes that did not split (store_hint_scan) */
    int rc = j->klens[i] == 0
                 ? RK_ECORRUPT
                 : store_record_decode(&sr, j->recs[i], j->rlens[i]);
    if (rc < 0) {
        j->errs[i] = rc;
        return HINT_UNDECODABLE;
    }
    struct rpc_write w = {.token = rk_token(j->keys[i], j->klens[i])};
    w.epoch = n->ring ? ring_epoch(n->ring) : 0;
    w.key = RK_SLICE(j->keys[i], j->klens[i]);
    w.rec.ts = sr.ts;
    w.rec.flags = (sr.flags & STORE_REC_TOMBSTONE) ? RPC_REC_TOMBSTONE : 0;
    w.rec.expiry = (sr.flags & STORE_REC_EXPIRES) ? sr.expiry_ms : 0;
    w.rec.value = sr.value.p ? sr.value : RK_SLICE("", 0);
    struct rpc_buf b = RPC_BUF_INIT;
    rc = rpc_write_encode(&b, &w);
    if (rc == 0) {
        j->acks[i] = (struct hint_ack){.j = j, .i = i};
        rc = node__rpc(n, idx, &b, (uint32_t)n->cfg.write_timeout_ms,
                       on_hint_ack, &j->acks[i]);
    }
    rpc_buf_free(&b);
    j->errs[i] = rc;
    if (rc == 0)
        return HINT_SENT;
    /* a key or value past the limits cannot be sent, ever (the store
     * checked them when the hint was added: damaged bytes) */
    return rc == RK_EBADREQ || rc == RK_ETOOLARGE ? HINT_UNDECODABLE
                                                  : HINT_RETRY;
}

static void hint_send_batch(node *n, struct hint_job *j)
{
    uint32_t idx;
    struct node_peer *p = node__peer_by_name(n, j->name, &idx);
    if (p && j->count == 0)
        p->replay_after = 0; /* none past it: the next round starts over */
    if (!p || !p->up || j->count == 0 || n->stopping) {
        replay_done(n, j, false);
        hint_job_free(j);
        return;
    }
    j->pending = 1;
    for (size_t i = 0; i < j->count; i++) {
        j->fates[i] = (uint8_t)hint_send(n, j, i, idx);
        if (j->fates[i] == HINT_SENT)
            j->pending++;
    }
    hint_batch_release(j); /* drop the hold */
}

static void hint_after(uv_work_t *w, int status)
{
    struct hint_job *j = w->data;
    node *n = j->n;
    n->pending_closes--;
    if (status < 0 && j->status == 0)
        j->status = status;
    if (j->kind == 1) {
        if (j->status < 0 && j->status != 1)
            LOG(WARN, "hints.scan_fail", "peer=%s error=\"%s\"", j->name,
                rk_strerror(j->status));
        hint_send_batch(n, j);
    } else {
        if (j->status == 0)
            hint_batch_deleted(n, j);
        else
            LOG(WARN, "hints.delete_fail", "peer=%s error=\"%s\"", j->name,
                rk_strerror(j->status));
        replay_done(n, j, j->status == 0 && j->more);
        hint_job_free(j);
    }
    node__stop_progress(n);
}

static void hint_store_job_free(struct hint_store_job *j)
{
    for (size_t i = 0; i < j->count; i++)
        free((void *)j->h[i].node); /* the hint's one block */
    free(j->h);
    free(j);
}

/* The job's hints are stored, or failed with status (< 0: all of them):
 * count them and free the job. */
static void hint_store_done(node *n, struct hint_store_job *j, int status)
{
    n->hints.stores -= j->count;
    n->hints.store_bytes -= j->bytes;
    if (n->hints.stores <= HINT_STORES_MAX / 2 &&
        n->hints.store_bytes <= HINT_STORE_BYTES_MAX / 2)
        n->hints.stores_full = false;
    size_t failed = 0, first = 0;
    for (size_t i = 0; i < j->count; i++) {
        int rc = status < 0 ? status : j->h[i].result;
        if (rc == 0) {
            n->stats.hints_stored++;
        } else {
            if (failed++ == 0)
                first = i;
            n->stats.hints_dropped++;
        }
    }
    if (failed)
        LOG(WARN, "hints.store_fail", "peer=%s failed=%zu of=%zu error=\"%s\"",
            j->h[first].node, failed, j->count,
            rk_strerror(status < 0 ? status : j->h[first].result));
    hint_store_job_free(j);
}

static void hint_store_work(uv_work_t *w)
{
    struct hint_store_job *j = w->data;
    (void)store_hint_add_many(j->n->store, j->h, j->count); /* in results */
}

static void hint_store_after(uv_work_t *w, int status)
{
    struct hint_store_job *j = w->data;
    node *n = j->n;
    n->pending_closes--;
    hint_store_done(n, j, status);
    node__stop_progress(n);
}

void node__hint_flush(node *n)
{
    struct hint_store_job *j = n->hints.open;
    if (!j)
        return;
    n->hints.open = NULL;
    int rc =
        uv_queue_work(n->loop, &j->work, hint_store_work, hint_store_after);
    if (rc < 0)
        hint_store_done(n, j, rc);
    else
        n->pending_closes++;
}

void node__hint_store(node *n,
                      const char *name,
                      struct rk_slice key,
                      struct rk_slice rec)
{
    /* Also while stopping: writes still coordinated in the drain, and those
     * failed by the closing of the internode peers, keep their hints. A
     * queued job holds pending_closes, and node__stop_progress flushes an
     * open one, so the store is closed (n->store NULL) only once every
     * hint is stored and synced. */
    if (!n->store || !n->cfg.hinted_handoff)
        return;
    /* past max_hint_window a DOWN peer gets no more hints (repair must
     * bring it up to date) */
    struct node_peer *p = node__peer_by_name(n, name, NULL);
    if (p && p->down_since_ms &&
        node__mono_ms(n) - p->down_since_ms >
            (uint64_t)n->cfg.max_hint_window_ms) {
        n->stats.hints_dropped++;
        return;
    }
    if (n->hints.stores >= HINT_STORES_MAX ||
        (n->hints.stores > 0 &&
         n->hints.store_bytes + key.len + rec.len > HINT_STORE_BYTES_MAX)) {
        n->stats.hints_dropped++;
        if (!n->hints.stores_full) {
            n->hints.stores_full = true;
            LOG(WARN, "hints.queue_full",
                "peer=%s queued=%d bytes=%zu note=\"hints past this are "
                "dropped (ringkv_hints_dropped_total) until the queue "
                "drains\"",
                name, n->hints.stores, n->hints.store_bytes);
        }
        return;
    }
    struct hint_store_job *j = n->hints.open;
    if (!j) {
        j = calloc(1, sizeof(*j));
        if (!j) {
            n->stats.hints_dropped++;
            return;
        }
        j->n = n;
        j->work.data = j;
        n->hints.open = j;
    }
    if (j->count == j->cap) {
        size_t cap = j->cap ? j->cap * 2 : 64;
        struct store_hint *h = realloc(j->h, cap * sizeof(*h));
        if (!h) {
            n->stats.hints_dropped++;
            return;
        }
        j->h = h;
        j->cap = cap;
    }
    size_t nl = strlen(name) + 1;
    char *b = malloc(nl + key.len + rec.len);
    if (!b) {
        n->stats.hints_dropped++;
        return;
    }
    memcpy(b, name, nl);
    memcpy(b + nl, key.p, key.len);
    memcpy(b + nl + key.len, rec.p, rec.len);
    j->h[j->count++] =
        (struct store_hint){.node = b,
                            .key = RK_SLICE(b + nl, key.len),
                            .rec = RK_SLICE(b + nl + key.len, rec.len)};
    j->bytes += key.len + rec.len;
    n->hints.stores++;
    n->hints.store_bytes += key.len + rec.len;
}

void node__hints_kick(node *n, uint32_t idx)
{
    if (n->stopping || !n->store || idx >= n->npeers)
        return;
    struct node_peer *p = &n->peer[idx];
    if (p->self || !p->up || p->replaying)
        return;
    uint64_t cnt = 0;
    if (store_hint_count(&cnt, n->store, p->name) < 0 || cnt == 0)
        return;
    struct hint_job *j = calloc(1, sizeof(*j));
    if (!j)
        return;
    j->n = n;
    j->work.data = j;
    j->kind = 1;
    j->after = p->replay_after;
    snprintf(j->name, sizeof(j->name), "%s", p->name);
    p->replaying = true;
    LOG(INFO, "hints.replay", "peer=%s pending=%llu", p->name,
        (unsigned long long)cnt);
    if (hint_queue(n, j) < 0) {
        p->replaying = false;
        hint_job_free(j);
    }
}

static void on_htimer(uv_timer_t *t)
{
    node *n = t->data;
    for (uint32_t i = 0; i < n->npeers; i++)
        node__hints_kick(n, i);
}

/* ---- start / stop ----------------------------------------------------- */

/* The reads among the requests a peer sent at once: their keys'
 * memtable and read cache entries start on their way into the CPU's cache
 * together (store_prefetch_many), as a client's pipeline of GETs does
 * (rsrv.c); a coordinator's reads arrive here in batches of dozens. */
static void
on_ipeek(void *arg, net_conn *c, const struct rk_slice *payloads, size_t n)
{
    node *nd = arg;
    uint64_t tokens[NET_PEEK_MAX];
    size_t k = 0;
    (void)c;
    if (nd->store == NULL)
        return;
    for (size_t i = 0; i < n && i < NET_PEEK_MAX; i++) /* READs only */
        if (rpc_read_token_peek(&tokens[k], payloads[i]) == 0)
            k++;
    if (k >= 2)
        store_prefetch_many(nd->store, tokens, k);
}

int node__internode_start(node *n, char *err, size_t errlen)
{
    if (sodium_init() < 0) {
        snprintf(err, errlen, "libsodium: cannot initialise");
        return RK_EINTERNAL;
    }
    struct net_handshake hs = {.make = hs_make, .check = hs_check, .arg = n};
    struct net_server_opts so = NET_SERVER_OPTS_INIT;
    so.host = n->listen_ip;
    so.port = (uint16_t)n->cfg.internode_port;
    so.rpc = true;
    so.hs = &hs;
    so.on_frame = on_iframe;
    so.on_peek = on_ipeek;
    so.arg = n;
    so.handshake_timeout_ms = (uint32_t)n->cfg.connect_timeout_ms * 2;
    /* internode_tls required: mutual TLS, the handshake above inside it */
    so.tls = n->tls.ctx.inode_server;
    so.on_tls_fail = node__tls_internode_refused_accept;
    int rc = net_server_new(&n->replica.srv, n->loop, &so);
    if (rc < 0) {
        snprintf(err, errlen, "internode_port: cannot listen on %s:%d: %s",
                 n->listen_ip, n->cfg.internode_port, rk_strerror(rc));
        return rc;
    }
    struct net_peers_opts po = NET_PEERS_OPTS_INIT;
    po.connect_timeout_ms = (uint32_t)n->cfg.connect_timeout_ms;
    po.backoff_min_ms = 100;
    po.backoff_max_ms = 2000;
    po.hs = &hs;
    po.tls = n->tls.ctx.inode_client;
    po.on_tls_fail = node__tls_internode_refused_connect;
    po.arg = n;
    po.bind_ip = n->listen_ip; /* peers see this node's address */
    rc = net_peers_new(&n->replica.peers, n->loop, &po);
    if (rc < 0) {
        snprintf(err, errlen, "internode: %s", rk_strerror(rc));
        return rc;
    }
    uv_timer_init(n->loop, &n->hints.timer);
    n->hints.timer.data = n;
    n->hints.timer_open = 1;
    uv_timer_start(&n->hints.timer, on_htimer, HINT_TIMER_MS, HINT_TIMER_MS);
    return 0;
}

static void on_net_closed(void *arg)
{
    node *n = arg;
    n->pending_closes--;
    node__stop_progress(n);
}

void node__internode_stop(node *n)
{
    if (n->hints.timer_open) {
        n->hints.timer_open = 0;
        n->pending_closes++;
        uv_close((uv_handle_t *)&n->hints.timer, node__handle_closed);
    }
    if (n->replica.srv) {
        net_server *s = n->replica.srv;
        n->replica.srv = NULL;
        n->pending_closes++;
        net_server_close(s, on_net_closed, n);
    }
    if (n->replica.peers) {
        net_peers *p = n->replica.peers;
        n->replica.peers = NULL;
        n->pending_closes++;
        net_peers_close(p, on_net_closed, n);
    }
}
