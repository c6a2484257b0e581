/*
 * admin_commands.h - the operator's commands that change the node or the
 * cluster (admin_commands.c): JOIN, DECOMMISSION, REMOVENODE, REPAIR,
 * CLEANUP, ABORT, SNAPSHOT, RELOADTLS, run alike for the native protocol (its
 * ops) and RESP (commands of the same names), and the role each op needs.
 *
 * Not a public header: only node/'s files include it. Runs on the loop
 * thread.
 */
#ifndef NODE_ADMIN_COMMANDS_H
#define NODE_ADMIN_COMMANDS_H

#include <stddef.h>
#include <stdint.h>

#include "common/rk.h"
#include "node/node.h"
#include "node/users.h"

/* The role a native op (enum wire_cop) needs: ADMIN for the ones that
 * change the node or the cluster (JOIN, DECOMMISSION, REMOVENODE, REPAIR,
 * CLEANUP, ABORT, SNAPSHOT, CLEARSNAPSHOT, RELOADTLS) and for ops this version
 * does not know, DATA for reads, writes and read-only views (PING, GET, PUT,
 * DEL, MGET, STATUS, RING, ENDPOINTS, METRICS, NETSTATS, LISTSNAPSHOTS),
 * NONE for HELLO. Pure. */
enum node_role node__op_role(uint32_t op);

/* Whether op is one node__admin_command runs. */
int node__admin_command_op(uint32_t op);

/* Run op with its nargs arguments. 0 (or more) with the answer's text in
 * *text, or a negative code with the reason in *text (NULL: rk_strerror
 * says it). @note *text is malloc'd (or NULL); the caller frees it. */
int node__admin_command(node *n,
                        uint32_t op,
                        const struct rk_slice *args,
                        size_t nargs,
                        char **text,
                        size_t *len);

#endif
