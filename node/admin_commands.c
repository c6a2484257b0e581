/*
 * admin_commands.c - the operator's commands that change the node or the
 * cluster, shared by the native server (csrv.c) and the RESP server
 * (rsrv.c), and the role each native op needs (admin_commands.h).
 *
 * Each command checks its arguments here, so both protocols refuse the
 * same things with the same words, then starts its work through the part
 * that does it (streaming/, membership, repair, snapshots) and answers
 * with that part's text.
 */
#include "node/admin_commands.h"

#include <errno.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>

#include "gossip/gossip.h"
#include "node/daemon.h"
#include "node/membership.h"
#include "node/repair_host.h"
#include "node/replication.h"
#include "node/snapshot.h"
#include "node/stream_host.h"
#include "node/tls.h"
#include "ring/ring.h"
#include "storage/snapshot_manifest.h"
#include "streaming/streaming.h"
#include "wire/client_msg.h"

enum node_role node__op_role(uint32_t op)
{
    switch (op) {
    case WIRE_COP_HELLO:
        return NODE_ROLE_NONE;
    case WIRE_COP_PING:
    case WIRE_COP_GET:
    case WIRE_COP_PUT:
    case WIRE_COP_DEL:
    case WIRE_COP_MGET:
    case WIRE_COP_SCAN:
    case WIRE_COP_STATUS:
    case WIRE_COP_RING:
    case WIRE_COP_ENDPOINTS:
    case WIRE_COP_METRICS:
    case WIRE_COP_NETSTATS:
    case WIRE_COP_LISTSNAPSHOTS:
    case WIRE_COP_REPLICATION:
        return NODE_ROLE_DATA;
    default:
        return NODE_ROLE_ADMIN;
    }
}

int node__admin_command_op(uint32_t op)
{
    switch (op) {
    case WIRE_COP_JOIN:
    case WIRE_COP_DECOMMISSION:
    case WIRE_COP_REMOVENODE:
    case WIRE_COP_REPAIR:
    case WIRE_COP_CLEANUP:
    case WIRE_COP_ABORT:
    case WIRE_COP_SNAPSHOT:
    case WIRE_COP_RELOADTLS:
    case WIRE_COP_REPLICATION_SET:
    case WIRE_COP_REBUILD:
        return 1;
    default:
        return 0;
    }
}

/* "START,END", two decimal tokens: the arc (START, END]. */
static int parse_arc(struct ring_range *out, struct rk_slice a)
{
    char buf[64];
    if (a.len == 0 || a.len >= sizeof(buf))
        return RK_EBADREQ;
    memcpy(buf, a.p, a.len);
    buf[a.len] = '\0';
    char *comma = strchr(buf, ',');
    if (!comma)
        return RK_EBADREQ;
    *comma = '\0';
    const char *part[2] = {buf, comma + 1};
    uint64_t v[2];
    for (int i = 0; i < 2; i++) {
        char *end;
        if (part[i][0] < '0' || part[i][0] > '9')
            return RK_EBADREQ;
        errno = 0;
        unsigned long long x = strtoull(part[i], &end, 10);
        if (errno || *end)
            return RK_EBADREQ;
        v[i] = x;
    }
    *out = (struct ring_range){v[0], v[1]};
    return 0;
}

/* A refusal of the arguments: RK_EBADREQ with why as the text. */
static int bad_args(char **text, size_t *len, const char *why)
{
    *text = strdup(why);
    *len = *text ? strlen(why) : 0;
    return RK_EBADREQ;
}

int node__admin_command(node *n,
                        uint32_t op,
                        const struct rk_slice *args,
                        size_t nargs,
                        char **text,
                        size_t *len)
{
    *text = NULL;
    *len = 0;
    switch (op) {
    case WIRE_COP_DECOMMISSION:
        return stream_leave_begin(n->streaming, text, len);
    case WIRE_COP_CLEANUP:
        return stream_cleanup_begin(n->streaming, text, len);
    case WIRE_COP_ABORT:
        return node__abort(n, text, len);
    case WIRE_COP_REMOVENODE: {
        char name[GOSSIP_NAME_MAX + 1] = "";
        if (nargs != 1 || args[0].len == 0 || args[0].len > GOSSIP_NAME_MAX ||
            memchr(args[0].p, '\0', args[0].len))
            return bad_args(text, len,
                            "REMOVENODE takes one argument: the node's name");
        memcpy(name, args[0].p, args[0].len);
        return stream_remove_begin(n->streaming, name, text, len);
    }
    case WIRE_COP_REPAIR: {
        struct ring_range only;
        if (nargs > 1 || (nargs == 1 && parse_arc(&only, args[0]) < 0))
            return bad_args(
                text, len,
                "REPAIR takes no argument (every range this node "
                "replicates) or one: START,END, the tokens (START, END] "
                "(decimal; START equal to END: the whole ring)");
        return node__repair_begin(n, nargs ? &only : NULL, text, len);
    }
    case WIRE_COP_SNAPSHOT: {
        char tag[SNAPSHOT_TAG_MAX + 2];
        if (nargs > 1)
            return bad_args(text, len,
                            "takes one argument: the snapshot's TAG");
        if (nargs == 1) {
            size_t tl =
                args[0].len < sizeof(tag) - 1 ? args[0].len : sizeof(tag) - 1;
            memcpy(tag, args[0].p, tl);
            tag[tl] = '\0';
            if (memchr(args[0].p, '\0', args[0].len) || tl < args[0].len)
                tag[0] = '\0'; /* a tag never has a NUL; too long: refused */
        }
        return node__snapshot_begin(n, nargs ? tag : NULL, text, len);
    }
    case WIRE_COP_RELOADTLS: { /* what SIGHUP does (node/tls.c) */
        char msg[1024];
        if (nargs != 0)
            return bad_args(text, len, "RELOADTLS takes no argument");
        int rc = node__tls_reload(n, msg, sizeof(msg));
        *text = strdup(msg);
        *len = *text ? strlen(*text) : 0;
        return rc;
    }
    case WIRE_COP_REPLICATION_SET:
        if (nargs != 1)
            return bad_args(text, len,
                            "REPLICATION_SET takes one argument: the "
                            "replication setting, e.g. dc1:3,dc2:3");
        return node__repl_set(n, args[0], text, len);
    case WIRE_COP_REBUILD: {
        char dc[64];
        if (nargs != 1 || args[0].len == 0 || args[0].len >= sizeof(dc) ||
            memchr(args[0].p, '\0', args[0].len))
            return bad_args(text, len,
                            "REBUILD takes one argument: the data centre to "
                            "stream from");
        memcpy(dc, args[0].p, args[0].len);
        dc[args[0].len] = '\0';
        return stream_rebuild_begin(n->streaming, dc, text, len);
    }
    case WIRE_COP_JOIN: {
        char msg[512];
        int rc = node__join(n, msg, sizeof(msg));
        *text = strdup(msg);
        *len = *text ? strlen(*text) : 0;
        return rc;
    }
    default:
        return bad_args(text, len, "unknown operation");
    }
}
