/*
 * users.h - the client users and their roles (users.c): who may read and
 * write (the data role) and who may also run the operator's commands that
 * change the node or the cluster (the admin role).
 *
 * Two users, as Redis ACL names them: `default` (requirepass, data role)
 * and `admin` (admin_password, admin role). A password is configured as
 * it is, or as "sha256:<64 hex digits>" (its SHA-256), inline or in a file
 * (requirepass_file, admin_password_file); only its SHA-256 is kept, and a
 * password sent is compared by hashing it and comparing the two digests
 * with crypto_verify_32, in time independent of where they differ and of
 * the lengths. With no admin password, requirepass grants the admin role
 * too (as before roles existed; the daemon warns at start-up); with no
 * password at all, every connection has the admin role.
 *
 * Not a public header: only node/'s files include it. node_secret_parse
 * and node_users_check are pure; node_users_load reads the files.
 */
#ifndef NODE_USERS_H
#define NODE_USERS_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "common/rk.h"

struct node_config;

/* What a connection may do. The order is the order of privilege. */
enum node_role {
    NODE_ROLE_NONE = 0, /* not authenticated: AUTH / HELLO, QUIT only */
    NODE_ROLE_DATA = 1, /* reads, writes, read-only status and metrics */
    NODE_ROLE_ADMIN = 2 /* and the commands that change the node */
};

/* "none", "data" or "admin". */
const char *node_role_name(enum node_role role);

#define NODE_SECRET_PREFIX "sha256:"
#define NODE_SECRET_MAX    4096 /* longest password (WIRE_CSTR_MAX) */

/* One configured password: its SHA-256, or none. */
struct node_secret {
    bool set;
    uint8_t sha256[32];
};

/* Parse a configured password of len bytes: "sha256:" followed by exactly
 * 64 hex digits is a digest; anything else not starting with "sha256:" is
 * the password itself (1..NODE_SECRET_MAX bytes, no NUL). A text starting
 * with "sha256:" that is not a digest is refused, so a mistyped digest is
 * never taken for a password. 0, or RK_ECONFIG with why in err (which
 * never quotes the text). */
int node_secret_parse(struct node_secret *out,
                      const char *text,
                      size_t len,
                      char *err,
                      size_t errlen);

/* Whether the len bytes at pw are the password of s (false when s is not
 * set). Constant time in the bytes compared. */
bool node_secret_verify(const struct node_secret *s,
                        const uint8_t *pw,
                        size_t len);

/* The users, as the configuration sets them. */
struct node_users {
    struct node_secret data;    /* user `default` */
    struct node_secret admin;   /* user `admin`; unset: data's password */
    struct node_secret metrics; /* /metrics basic auth, user `metrics` */
};

/* Fill *out from c's requirepass / requirepass_file, admin_password /
 * admin_password_file and metrics_password / metrics_password_file (a
 * file holds the value on its first line; one
 * trailing newline is dropped). A key and its _file variant both set, an
 * unreadable or empty file, or a bad digest: RK_ECONFIG with the key named
 * in err. Reads the files: at start-up, off the loop. */
int node_users_load(struct node_users *out,
                    const struct node_config *c,
                    char *err,
                    size_t errlen);

/* Whether the HTTP basic credentials user / password may read /metrics:
 * always when metrics_password is not set; else user `metrics` with its
 * password. Constant time in the password's bytes. */
bool node_users_metrics_ok(const struct node_users *u,
                           struct rk_slice user,
                           struct rk_slice password);

/* The role of a connection that has not authenticated: NONE when a
 * default password is set, DATA when only an admin password is, ADMIN when
 * none is. */
enum node_role node_users_open_role(const struct node_users *u);

/* Whether a password is configured at all (a wrong one is then counted
 * and slowed, auth_delay.h). */
bool node_users_any(const struct node_users *u);

/* The role that user (empty: `default`) and password grant: DATA or ADMIN,
 * or NONE for an unknown user or a wrong password. Without a password for
 * the user named, the open role (any password is accepted, as Redis's
 * nopass). Both users' passwords are compared whichever is named, so the
 * time does not tell which users exist. */
enum node_role node_users_check(const struct node_users *u,
                                struct rk_slice user,
                                struct rk_slice password);

#endif
