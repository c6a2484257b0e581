/*
 * replication.c - the cluster's replication setting changed on a live
 * cluster (replication.h says how it spreads and which value wins).
 *
 * Sections: the pure helpers (parsing, the canonical text, the version
 * order), then the node's side: the start, the adoption of a newer
 * setting heard through gossip (what this node gained under it, and how
 * it gets that data), the `ringkv replication set` command, and the texts
 * of `ringkv replication` and `ringkv status`.
 */
#include "node/replication.h"

#include <errno.h>
#include <inttypes.h>
#include <stdlib.h>
#include <string.h>

#include "gossip/gossip.h"
#include "node/daemon.h"
#include "node/log.h"
#include "node/membership.h"
#include "node/repair_host.h"
#include "node/ring_view.h"
#include "ring/ring.h"
#include "streaming/streaming.h"

/* ---- pure ------------------------------------------------------------- */

int node_repl_parse(struct node_config_dc *out,
                    int *nout,
                    const char *spec,
                    char *err,
                    size_t errlen)
{
    /* the config's parser, on a scratch config: the same names, factors
     * and messages as the `replication` key */
    struct node_config *c = malloc(sizeof(*c));
    if (!c) {
        snprintf(err, errlen, "out of memory");
        return -ENOMEM;
    }
    memset(c, 0, sizeof(*c));
    int rc = node_config_set(c, "replication", spec, err, errlen);
    if (rc == 0) {
        memcpy(out, c->replication, sizeof(out[0]) * (size_t)c->ndcs);
        *nout = c->ndcs;
    }
    free(c);
    return rc;
}

int node_repl_format(char *out,
                     size_t cap,
                     const struct node_config_dc *dcs,
                     int n)
{
    /* by name: the order one lists them in places nothing, and nodes
     * compare this text (regression: repl_order_mismatch) */
    int ord[NODE_CONFIG_MAX_DCS];
    if (n > NODE_CONFIG_MAX_DCS)
        n = NODE_CONFIG_MAX_DCS;
    for (int i = 0; i < n; i++) {
        int j = i;
        for (; j > 0 && strcmp(dcs[ord[j - 1]].name, dcs[i].name) > 0; j--)
            ord[j] = ord[j - 1];
        ord[j] = i;
    }
    size_t l = 0;
    if (cap)
        out[0] = '\0';
    for (int i = 0; i < n && l < cap; i++) {
        int k = snprintf(out + l, cap - l, "%s%s:%d", i ? "," : "",
                         dcs[ord[i]].name, dcs[ord[i]].rf);
        if (k < 0)
            break;
        l += (size_t)k;
    }
    return l < cap ? (int)l : (int)cap - 1;
}

bool node_repl_supersedes(uint64_t va,
                          struct rk_slice ta,
                          uint64_t vb,
                          struct rk_slice tb)
{
    if (va != vb)
        return va > vb;
    if (va == 0)
        return false;
    size_t l = ta.len < tb.len ? ta.len : tb.len;
    int c = l ? memcmp(ta.p, tb.p, l) : 0;
    return c > 0 || (c == 0 && ta.len > tb.len);
}

uint64_t node_repl_next_version(uint64_t highest, uint64_t wall_ms)
{
    return wall_ms > highest ? wall_ms : highest + 1;
}

uint64_t node_repl_schema_version(struct rk_slice schema)
{
    char w[32];
    node__schema_word(w, sizeof(w), schema, "replv");
    if (w[0] < '0' || w[0] > '9')
        return 0;
    char *end;
    errno = 0;
    unsigned long long v = strtoull(w, &end, 10);
    return errno || *end ? 0 : (uint64_t)v;
}

/* ---- start ------------------------------------------------------------ */

static void own_text(const node *n, char *out, size_t cap)
{
    node_repl_format(out, cap, n->cfg.replication, n->cfg.ndcs);
}

/* The setting in use gives this node's data centre no RF: said at start. */
static void no_rf_note(node *n)
{
    if (node_config_dcs_rf(n->cfg.replication, n->cfg.ndcs, n->cfg.datacenter))
        return;
    LOG(WARN, "replication.no_rf_here",
        "dc=%s note=\"the replication gives this data centre no RF: the "
        "node holds no replicas until `ringkv replication set` names it "
        "(then `ringkv rebuild --from <dc>` fills it)\"",
        n->cfg.datacenter);
}

void node__repl_start(node *n)
{
    struct node_repl *r = &n->repl;
    memcpy(r->file, n->cfg.replication, sizeof(r->file));
    r->nfile = n->cfg.ndcs;
    struct node_config_dc dcs[NODE_CONFIG_MAX_DCS];
    int nd = 0;
    char err[NODE_CONFIG_ERR];
    if (n->st.repl_version &&
        node_repl_parse(dcs, &nd, n->st.repl, err, sizeof(err)) < 0) {
        LOG(ERROR, "replication.state_bad",
            "replication=\"%s\" version=%" PRIu64 " error=\"%s\" "
            "note=\"node.state's setting does not parse: the config file's "
            "is used until gossip brings the cluster's\"",
            n->st.repl, n->st.repl_version, err);
        n->st.repl_version = 0;
    }
    if (n->st.repl_version == 0) {
        no_rf_note(n);
        return;
    }
    char file[512];
    own_text(n, file, sizeof(file));
    memcpy(n->cfg.replication, dcs, sizeof(dcs[0]) * (size_t)nd);
    n->cfg.ndcs = nd;
    if (strcmp(file, n->st.repl) != 0)
        LOG(WARN, "replication.file_differs",
            "file=\"%s\" cluster=\"%s\" version=%" PRIu64 " note=\"the "
            "cluster's setting (`ringkv replication set`, kept in node.state) "
            "is used; the config file's replication counts only for a fresh "
            "cluster\"",
            file, n->st.repl, n->st.repl_version);
    else
        LOG(INFO, "replication.setting", "replication=\"%s\" version=%" PRIu64,
            n->st.repl, n->st.repl_version);
    no_rf_note(n);
}

/* ---- adopting a setting ----------------------------------------------- */

/* What this node gained from ring `old` to its ring now: the ranges, and
 * how their data comes (a repair of its ranges, or a rebuild). */
static void gained_note(node *n,
                        const ring *old,
                        const struct node_config_dc *was,
                        int nwas,
                        uint64_t version)
{
    struct node_repl *r = &n->repl;
    r->changed_version = version;
    r->gained = 0;
    r->repair = false;
    r->rebuild_dc[0] = '\0';
    uint32_t self =
        n->ring ? ring_node_find(n->ring, n->cfg.node_name) : RING_NONE;
    if (!old || self == RING_NONE || n->boot != NODE_BOOT_DONE || n->st.joining)
        return; /* not placed yet: its join streams what it replicates */
    struct ring_move *mv = NULL;
    size_t nmv = 0;
    if (ring_plan_new(&mv, &nmv, old, n->ring) == 0) {
        for (size_t i = 0; i < nmv; i++)
            r->gained += mv[i].gain == self;
        ring_plan_free(mv);
    }
    /* The rings compared hold the members gossip knows now: right after a
     * restart (the node was down when the setting changed) that may be
     * itself and one peer, where it replicates everything either way. So
     * a higher RF in its data centre, or another strategy, counts as a
     * gain too: the count is for people, the repair is what matters. */
    int was_rf = node_config_dcs_rf(was, nwas, n->cfg.datacenter);
    int now_rf =
        node_config_dcs_rf(n->cfg.replication, n->cfg.ndcs, n->cfg.datacenter);
    bool was_simple = nwas == 1 && strcmp(was[0].name, "*") == 0;
    bool now_simple =
        n->cfg.ndcs == 1 && strcmp(n->cfg.replication[0].name, "*") == 0;
    if (now_rf == 0 ||
        (r->gained == 0 && now_rf <= was_rf && was_simple == now_simple))
        return;
    if (was_rf == 0) {
        /* a data centre that had no replicas: no replica here to repair
         * from, the whole of it comes from another data centre */
        snprintf(r->rebuild_dc, sizeof(r->rebuild_dc), "%s", n->cfg.datacenter);
        LOG(WARN, "replication.rebuild_needed",
            "ranges_gained=%zu dc=%s note=\"this data centre had no "
            "replicas: run `ringkv rebuild --from <another dc>` on each of "
            "its nodes\"",
            r->gained, n->cfg.datacenter);
        return;
    }
    if (!n->cfg.repair_after_join) {
        LOG(WARN, "replication.repair_needed",
            "ranges_gained=%zu note=\"repair_after_join is off: run "
            "`ringkv repair` on this node\"",
            r->gained);
        return;
    }
    r->repair = true;
    n->st.repair_due = 1;
    n->raj_since_ms = node__mono_ms(n);
    node__state_save(n);
    LOG(INFO, "replication.repair_due",
        "ranges_gained=%zu note=\"the node repairs its ranges against the "
        "other replicas once the ring settles (progress: ringkv status, "
        "netstats)\"",
        r->gained);
}

/* Take (version, text) as the setting, heard from `by` (NULL: set here). */
static int adopt(node *n, uint64_t version, const char *text, const char *by)
{
    struct node_config_dc dcs[NODE_CONFIG_MAX_DCS];
    int nd = 0;
    char err[NODE_CONFIG_ERR];
    int rc = node_repl_parse(dcs, &nd, text, err, sizeof(err));
    if (rc < 0) {
        LOG(ERROR, "replication.bad_setting",
            "from=%s replication=\"%s\" version=%" PRIu64 " error=\"%s\"",
            by ? by : "-", text, version, err);
        return rc;
    }
    char before[512];
    own_text(n, before, sizeof(before));
    struct node_config_dc was[NODE_CONFIG_MAX_DCS];
    int nwas = n->cfg.ndcs;
    memcpy(was, n->cfg.replication, sizeof(was));
    memcpy(n->cfg.replication, dcs, sizeof(dcs[0]) * (size_t)nd);
    n->cfg.ndcs = nd;
    n->st.repl_version = version;
    own_text(n, n->st.repl, sizeof(n->st.repl));
    node__state_save(n);
    node__schema_publish(n);
    LOG(INFO, "replication.adopted",
        "replication=\"%s\" version=%" PRIu64 " was=\"%s\" from=%s", n->st.repl,
        version, before, by ? by : "-");
    ring *old = n->ring ? ring_ref(n->ring) : NULL;
    node__ring_rebuild(n);
    gained_note(n, old, was, nwas, version);
    ring_free(old);
    return 0;
}

void node__repl_watch(node *n)
{
    if (!n->g)
        return;
    uint64_t now = node__mono_ms(n);
    char mine[512];
    own_text(n, mine, sizeof(mine));
    uint64_t best_v = n->st.repl_version;
    struct rk_slice best_t = RK_SLICE(mine, strlen(mine));
    char best_text[512] = "", best_by[GOSSIP_NAME_MAX + 1] = "";
    size_t cnt = gossip_peer_count(n->g);
    for (size_t i = 0; i < cnt; i++) {
        struct gossip_peer_info pi;
        if (gossip_peer_get(&pi, n->g, i, now) < 0 || pi.self || pi.quarantined)
            continue;
        struct rk_slice sch = pi.state[GOSSIP_KEY_SCHEMA];
        struct rk_slice t = node__schema_repl(sch);
        uint64_t v = node_repl_schema_version(sch);
        if (t.len == 0 || t.len >= sizeof(best_text) ||
            !node_repl_supersedes(v, t, best_v, best_t))
            continue;
        memcpy(best_text, t.p, t.len);
        best_text[t.len] = '\0';
        best_t = RK_SLICE(best_text, t.len);
        best_v = v;
        snprintf(best_by, sizeof(best_by), "%s", pi.name);
    }
    if (best_by[0])
        (void)adopt(n, best_v, best_text, best_by);
}

/* ---- `ringkv replication set` ------------------------------------------ */

/* The highest setting version gossip holds (this node's included). */
static uint64_t highest_version(node *n)
{
    uint64_t v = n->st.repl_version, now = node__mono_ms(n);
    size_t cnt = n->g ? gossip_peer_count(n->g) : 0;
    for (size_t i = 0; i < cnt; i++) {
        struct gossip_peer_info pi;
        if (gossip_peer_get(&pi, n->g, i, now) == 0) {
            uint64_t pv = node_repl_schema_version(pi.state[GOSSIP_KEY_SCHEMA]);
            v = pv > v ? pv : v;
        }
    }
    return v;
}

/* The ring's nodes in data centre dc. */
static size_t dc_nodes(const ring *r, const char *dc)
{
    size_t k = 0;
    for (uint32_t i = 0; r && i < ring_node_count(r); i++) {
        struct ring_node_info ni;
        if (ring_node_get(r, &ni, i) == 0 && ni.state == RING_NORMAL &&
            (strcmp(dc, "*") == 0 || strcmp(ni.dc, dc) == 0))
            k++;
    }
    return k;
}

int node__repl_set(node *n, struct rk_slice spec, char **text, size_t *len)
{
    char s[NODE_CONFIG_STR], err[NODE_CONFIG_ERR];
    if (spec.len == 0 || spec.len >= sizeof(s) ||
        memchr(spec.p, '\0', spec.len))
        return rk_answer(text, len, RK_EBADREQ,
                         "replication set takes one argument: the setting, "
                         "e.g. dc1:3,dc2:3");
    memcpy(s, spec.p, spec.len);
    s[spec.len] = '\0';
    struct node_config_dc dcs[NODE_CONFIG_MAX_DCS];
    int nd = 0;
    if (node_repl_parse(dcs, &nd, s, err, sizeof(err)) < 0)
        return rk_answer(text, len, RK_EBADREQ, "%s", err);
    if (n->ring_stale || !n->ring)
        return rk_answer(text, len, RK_ESTALE,
                         "%s's ring is behind the cluster's (restarted, or a "
                         "change not heard yet): ask again in a moment",
                         n->cfg.node_name);
    /* a movement plans its streams under the setting it started with:
     * another one under its feet would leave ranges unstreamed */
    if (n->ring_pending || n->njoins)
        return rk_answer(text, len, RK_EBADREQ,
                         "a node is joining or leaving (`ringkv status` shows "
                         "which): change the replication once it is done");
    char want[512], cur[512];
    node_repl_format(want, sizeof(want), dcs, nd);
    own_text(n, cur, sizeof(cur));
    if (strcmp(want, cur) == 0 && n->st.repl_version)
        return rk_answer(text, len, 0,
                         "Replication is %s already (version %" PRIu64
                         "): nothing changed.",
                         cur, n->st.repl_version);
    struct node_config_dc was[NODE_CONFIG_MAX_DCS];
    int nwas = n->cfg.ndcs;
    memcpy(was, n->cfg.replication, sizeof(was));
    uint64_t v = node_repl_next_version(highest_version(n), node__now_ms());
    int rc = adopt(n, v, want, NULL);
    if (rc < 0)
        return rk_answer(text, len, RK_EBADREQ, "cannot use %s", want);
    char *out = NULL;
    size_t olen = 0;
    FILE *f = open_memstream(&out, &olen);
    if (!f)
        return -ENOMEM;
    fprintf(f,
            "Replication set to %s (version %" PRIu64 ", was %s) on %s; "
            "gossip carries it to every node: `ringkv replication` shows "
            "each node's.\n",
            want, v, cur, n->cfg.node_name);
    for (int i = 0; i < nd; i++) {
        size_t have = dc_nodes(n->ring, dcs[i].name);
        int old = node_config_dcs_rf(was, nwas, dcs[i].name);
        if (have < (size_t)dcs[i].rf)
            fprintf(f,
                    "Note: data centre %s has %zu nodes in the ring, fewer "
                    "than its RF %d: each range has %zu replicas there until "
                    "more join.\n",
                    dcs[i].name, have, dcs[i].rf, have);
        if (old == 0 && have > 0) {
            const char *other = NULL;
            for (int k = 0; k < nwas && !other; k++)
                if (strcmp(was[k].name, dcs[i].name) != 0)
                    other = was[k].name;
            fprintf(f,
                    "Data centre %s had no replicas: fill it by running "
                    "`ringkv rebuild --from %s` on each of its nodes (one "
                    "at a time or all at once); until then its replicas "
                    "lack the older data.\n",
                    dcs[i].name, other ? other : "<dc>");
        } else if (old > 0 && old < dcs[i].rf) {
            fprintf(f, "Data centre %s goes from RF %d to %d: %s\n",
                    dcs[i].name, old, dcs[i].rf,
                    n->cfg.repair_after_join
                        ? "each node that gained replicas repairs its ranges "
                          "by itself once every node has the setting "
                          "(progress: `ringkv status` and `ringkv netstats` "
                          "on that node)."
                        : "repair_after_join is off: run `ringkv repair` on "
                          "each of its nodes.");
        } else if (old > dcs[i].rf) {
            fprintf(f,
                    "Data centre %s goes from RF %d to %d: run `ringkv "
                    "cleanup` on its nodes to drop the data they no longer "
                    "replicate.\n",
                    dcs[i].name, old, dcs[i].rf);
        }
    }
    for (int k = 0; k < nwas; k++)
        if (node_config_dcs_rf(dcs, nd, was[k].name) == 0)
            fprintf(f,
                    "Data centre %s no longer has replicas: run `ringkv "
                    "cleanup` on its nodes to drop what they held.\n",
                    was[k].name);
    if (fclose(f) != 0) {
        free(out);
        return -ENOMEM;
    }
    *text = out;
    *len = olen;
    return 0;
}

/* ---- texts ------------------------------------------------------------ */

char *node__repl_show(node *n, size_t *len)
{
    char *out = NULL;
    size_t olen = 0;
    FILE *f = open_memstream(&out, &olen);
    if (!f)
        return NULL;
    uint64_t now = node__mono_ms(n);
    char mine[512];
    own_text(n, mine, sizeof(mine));
    fprintf(f, "%-20s %-10s %-6s %-30s %s\n", "Node", "DC", "State",
            "Replication", "Version");
    size_t cnt = n->g ? gossip_peer_count(n->g) : 0, nodes = 0, agree = 0;
    for (size_t i = 0; i < cnt; i++) {
        struct gossip_peer_info pi;
        if (gossip_peer_get(&pi, n->g, i, now) < 0 || pi.quarantined ||
            pi.status == GOSSIP_STATUS_LEFT ||
            pi.status == GOSSIP_STATUS_REMOVED)
            continue;
        struct rk_slice sch = pi.state[GOSSIP_KEY_SCHEMA];
        struct rk_slice t = node__schema_repl(sch);
        uint64_t v = node_repl_schema_version(sch);
        struct rk_slice dc = pi.state[GOSSIP_KEY_DC];
        if (pi.self) {
            t = RK_SLICE(mine, strlen(mine));
            v = n->st.repl_version;
        }
        nodes++;
        agree += v == n->st.repl_version && t.len == strlen(mine) &&
                 memcmp(t.p, mine, t.len) == 0;
        fprintf(f, "%-20s %-10.*s %-6s %-30.*s %" PRIu64 "%s\n", pi.name,
                (int)dc.len, (const char *)dc.p,
                pi.self ? "self"
                : pi.up ? "up"
                        : "down",
                (int)t.len, (const char *)t.p, v,
                v == 0 ? " (config file)" : "");
    }
    if (agree == nodes)
        fprintf(f, "Converged: every node (%zu) uses %s, version %" PRIu64 "\n",
                nodes, mine, n->st.repl_version);
    else
        fprintf(f,
                "Not converged: %zu of %zu nodes use %s, version %" PRIu64
                " (as %s); the others %s\n",
                agree, nodes, mine, n->st.repl_version, n->cfg.node_name,
                n->st.repl_version
                    ? "adopt it as gossip reaches them (a node down adopts it "
                      "when it is back)"
                    : "were configured otherwise: set one with `ringkv "
                      "replication set`");
    char file[512];
    node_repl_format(file, sizeof(file), n->repl.file, n->repl.nfile);
    if (strcmp(file, mine) != 0)
        fprintf(f,
                "Note: %s's config file says %s; the cluster's setting "
                "(version %" PRIu64 ") is used.\n",
                n->cfg.node_name, file, n->st.repl_version);
    if (fclose(f) != 0) {
        free(out);
        return NULL;
    }
    *len = olen;
    return out;
}

void node__repl_status_text(node *n, FILE *f)
{
    char mine[512];
    own_text(n, mine, sizeof(mine));
    if (n->st.repl_version)
        fprintf(f,
                "Replication on %s: %s, version %" PRIu64 " (set with "
                "`ringkv replication set`)\n",
                n->cfg.node_name, mine, n->st.repl_version);
    const struct node_repl *r = &n->repl;
    if (r->changed_version && r->rebuild_dc[0])
        fprintf(f,
                "Rebuild needed: %s gained %zu ranges with replication "
                "version %" PRIu64 " and data centre %s had no replicas "
                "before: run `ringkv rebuild --from <dc>` on it.\n",
                n->cfg.node_name, r->gained, r->changed_version, r->rebuild_dc);
    if (r->changed_version && r->repair) {
        if (n->st.repair_due)
            fprintf(f,
                    "Repair after the replication change: %s gained %zu "
                    "ranges; it repairs its ranges once the ring has "
                    "settled.\n",
                    n->cfg.node_name, r->gained);
        else
            fprintf(f,
                    "Repair after the replication change: done (%zu ranges "
                    "gained).\n",
                    r->gained);
    }
    if (r->repair || n->st.repair_due)
        node__repair_session_text(n, f);
    stream_rebuild_text(n->streaming, f);
}
