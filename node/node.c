/*
 * node.c - the daemon's context: identity, life cycle, and the wiring of
 * the parts on one libuv loop.
 */
#include "node/node.h"

#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "common/rk.h"
#include "node/log.h"
#include "node/state.h"

struct node {
    uv_loop_t *loop;
    struct node_config cfg;
    struct node_state st;
    int fresh; /* data_dir was new at start */
    int stopping;
    int open_handles;
    void (*stop_done)(void *arg);
    void *stop_arg;
};

static int fail(char *err, size_t errlen, int rc, const char *fmt, ...)
    __attribute__((format(printf, 4, 5)));

static int fail(char *err, size_t errlen, int rc, const char *fmt, ...)
{
    if (err && errlen) {
        va_list ap;
        va_start(ap, fmt);
        vsnprintf(err, errlen, fmt, ap);
        va_end(ap);
    }
    return rc;
}

static int node__identity(node *n, char *err, size_t errlen)
{
    struct node_config *c = &n->cfg;
    int rc = node_state_mkdirs(c->data_dir);
    if (rc < 0)
        return fail(err, errlen, rc, "data_dir: cannot create '%s': %s",
                    c->data_dir, rk_strerror(rc));
    rc = node_state_load(&n->st, c->data_dir);
    if (rc == RK_ENOTFOUND) {
        n->fresh = 1;
        memset(&n->st, 0, sizeof(n->st));
        if (!c->node_name[0]) {
            char host[256];
            if (gethostname(host, sizeof(host)) < 0)
                snprintf(host, sizeof(host), "node");
            host[sizeof(host) - 1] = '\0';
            snprintf(c->node_name, sizeof(c->node_name), "%s", host);
        }
        snprintf(n->st.node_name, sizeof(n->st.node_name), "%s", c->node_name);
        snprintf(n->st.cluster_name, sizeof(n->st.cluster_name), "%s",
                 c->cluster_name);
    } else if (rc < 0) {
        return fail(err, errlen, rc, "data_dir: cannot read %s/node.state: %s",
                    c->data_dir, rk_strerror(rc));
    } else {
        if (c->node_name[0] && strcmp(c->node_name, n->st.node_name) != 0)
            return fail(err, errlen, RK_ECONFIG,
                        "node_name: data_dir '%s' belongs to node '%s', not "
                        "'%s'",
                        c->data_dir, n->st.node_name, c->node_name);
        if (strcmp(c->cluster_name, n->st.cluster_name) != 0)
            return fail(err, errlen, RK_ECONFIG,
                        "cluster_name: data_dir '%s' belongs to cluster '%s', "
                        "not '%s'",
                        c->data_dir, n->st.cluster_name, c->cluster_name);
        snprintf(c->node_name, sizeof(c->node_name), "%s", n->st.node_name);
    }
    n->st.generation =
        node_state_next_generation(n->st.generation, (int64_t)time(NULL));
    rc = node_state_save(&n->st, c->data_dir);
    if (rc < 0)
        return fail(err, errlen, rc, "data_dir: cannot write node.state: %s",
                    rk_strerror(rc));
    return 0;
}

int node_new(node **out,
             uv_loop_t *loop,
             const struct node_config *cfg,
             char *err,
             size_t errlen)
{
    node *n = calloc(1, sizeof(*n));
    if (!n)
        return -ENOMEM;
    n->loop = loop;
    n->cfg = *cfg;
    if (!n->cfg.advertise_address[0])
        memcpy(n->cfg.advertise_address, n->cfg.listen_address,
               sizeof(n->cfg.listen_address));
    int rc = node__identity(n, err, errlen);
    if (rc < 0) {
        free(n);
        return rc;
    }
    *out = n;
    return 0;
}

int node_start(node *n, char *err, size_t errlen)
{
    (void)err;
    (void)errlen;
    LOG(INFO, "node.start",
        "generation=%lld fresh=%d data_dir=%s listen=%s dc=%s rack=%s",
        (long long)n->st.generation, n->fresh, n->cfg.data_dir,
        n->cfg.listen_address, n->cfg.datacenter, n->cfg.rack);
    return 0;
}

static void node__maybe_done(node *n)
{
    if (n->stopping && n->open_handles == 0 && n->stop_done) {
        void (*done)(void *) = n->stop_done;
        n->stop_done = NULL;
        done(n->stop_arg);
    }
}

void node_stop(node *n, void (*done)(void *arg), void *arg)
{
    if (n->stopping)
        return;
    n->stopping = 1;
    n->stop_done = done;
    n->stop_arg = arg;
    LOG(INFO, "node.stop", "generation=%lld", (long long)n->st.generation);
    node__maybe_done(n);
}

void node_free(node *n)
{
    if (!n)
        return;
    free(n);
}

const char *node_name(const node *n)
{
    return n->cfg.node_name;
}

int64_t node_generation(const node *n)
{
    return n->st.generation;
}
