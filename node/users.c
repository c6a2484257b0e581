/*
 * users.c - the client users, their passwords and roles (users.h).
 *
 * Only a password's SHA-256 is kept. A password sent is hashed and the
 * digests compared with crypto_verify_32: the time depends neither on
 * where the bytes differ nor on the lengths (the native check compared
 * with memcmp until 2026-12-06). SHA-256 rather than crypto_pwhash_str:
 * a check runs on the loop thread for every AUTH, and Argon2's tens of
 * milliseconds and megabytes per attempt would stall every client of the
 * node; a configured digest is as strong as the password behind it, so
 * docs/operations.md asks for long random ones.
 */
#include "node/users.h"

#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <sodium.h>

#include "node/config.h"

const char *node_role_name(enum node_role role)
{
    switch (role) {
    case NODE_ROLE_DATA:
        return "data";
    case NODE_ROLE_ADMIN:
        return "admin";
    case NODE_ROLE_NONE:
        break;
    }
    return "none";
}

__attribute__((format(printf, 3, 4))) static int
fail(char *err, size_t errlen, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    if (err && errlen)
        vsnprintf(err, errlen, fmt, ap);
    va_end(ap);
    return RK_ECONFIG;
}

int node_secret_parse(struct node_secret *out,
                      const char *text,
                      size_t len,
                      char *err,
                      size_t errlen)
{
    const size_t plen = strlen(NODE_SECRET_PREFIX);
    memset(out, 0, sizeof(*out));
    if (len == 0)
        return fail(err, errlen, "the password is empty");
    if (len > NODE_SECRET_MAX)
        return fail(err, errlen, "the password is longer than %d bytes",
                    NODE_SECRET_MAX);
    if (memchr(text, '\0', len))
        return fail(err, errlen, "the password holds a NUL byte");
    if (len < plen || memcmp(text, NODE_SECRET_PREFIX, plen) != 0) {
        crypto_hash_sha256(out->sha256, (const uint8_t *)text, len);
        out->set = true;
        return 0;
    }
    if (len != plen + 64)
        return fail(err, errlen,
                    "a password starting with \"" NODE_SECRET_PREFIX
                    "\" is a SHA-256 digest: 64 hex digits must follow "
                    "(%zu characters do)",
                    len - plen);
    size_t got = 0;
    const char *end = NULL;
    if (sodium_hex2bin(out->sha256, sizeof(out->sha256), text + plen, 64, NULL,
                       &got, &end) != 0 ||
        got != sizeof(out->sha256) || end != text + len) {
        memset(out, 0, sizeof(*out));
        return fail(err, errlen,
                    "a password starting with \"" NODE_SECRET_PREFIX
                    "\" is a SHA-256 digest: 64 hex digits must follow "
                    "(a non-hex character at %zu)",
                    (size_t)((end ? end : text + plen) - text));
    }
    out->set = true;
    return 0;
}

bool node_secret_verify(const struct node_secret *s,
                        const uint8_t *pw,
                        size_t len)
{
    uint8_t got[32];
    crypto_hash_sha256(got, pw, len);
    bool same = crypto_verify_32(got, s->sha256) == 0;
    sodium_memzero(got, sizeof(got));
    return s->set && same;
}

/* One user's password from key `name` (inline) or `name`_file. */
static int load_one(struct node_secret *out,
                    const char *name,
                    const char *inline_value,
                    const char *file,
                    char *err,
                    size_t errlen)
{
    char why[200];
    memset(out, 0, sizeof(*out));
    if (inline_value[0] && file[0])
        return fail(err, errlen, "%s and %s_file are both set: set one", name,
                    name);
    if (inline_value[0]) {
        if (node_secret_parse(out, inline_value, strlen(inline_value), why,
                              sizeof(why)) != 0)
            return fail(err, errlen, "%s: %s", name, why);
        return 0;
    }
    if (!file[0])
        return 0;
    char *buf = NULL;
    size_t len = 0;
    int rc = rk_read_file(file, NODE_SECRET_MAX + 2, &buf, &len);
    if (rc == -EFBIG)
        return fail(err, errlen, "%s_file: '%s' is longer than %d bytes", name,
                    file, NODE_SECRET_MAX + 1);
    if (rc < 0)
        return fail(err, errlen, "%s_file: cannot read '%s': %s", name, file,
                    rk_strerror(rc));
    if (len > 0 && buf[len - 1] == '\n')
        len--;
    if (len > 0 && buf[len - 1] == '\r')
        len--;
    rc = node_secret_parse(out, buf, len, why, sizeof(why));
    sodium_memzero(buf, len);
    free(buf);
    if (rc != 0)
        return fail(err, errlen, "%s_file: '%s': %s", name, file, why);
    return 0;
}

int node_users_load(struct node_users *out,
                    const struct node_config *c,
                    char *err,
                    size_t errlen)
{
    memset(out, 0, sizeof(*out));
    if (sodium_init() < 0)
        return fail(err, errlen, "libsodium failed to initialise");
    int rc = load_one(&out->data, "requirepass", c->requirepass,
                      c->requirepass_file, err, errlen);
    if (rc == 0)
        rc = load_one(&out->admin, "admin_password", c->admin_password,
                      c->admin_password_file, err, errlen);
    if (rc == 0)
        rc = load_one(&out->metrics, "metrics_password", c->metrics_password,
                      c->metrics_password_file, err, errlen);
    if (rc != 0)
        memset(out, 0, sizeof(*out));
    return rc;
}

bool node_users_metrics_ok(const struct node_users *u,
                           struct rk_slice user,
                           struct rk_slice password)
{
    if (!u->metrics.set)
        return true;
    bool pw_ok = node_secret_verify(&u->metrics, password.p, password.len);
    return pw_ok && user.len == 7 && memcmp(user.p, "metrics", 7) == 0;
}

enum node_role node_users_open_role(const struct node_users *u)
{
    if (u->data.set)
        return NODE_ROLE_NONE;
    return u->admin.set ? NODE_ROLE_DATA : NODE_ROLE_ADMIN;
}

bool node_users_any(const struct node_users *u)
{
    return u->data.set || u->admin.set;
}

static bool slice_is(struct rk_slice s, const char *word)
{
    size_t n = strlen(word);
    return s.len == n && memcmp(s.p, word, n) == 0;
}

enum node_role node_users_check(const struct node_users *u,
                                struct rk_slice user,
                                struct rk_slice password)
{
    /* the admin user's password: admin_password, else requirepass */
    const struct node_secret *admin = u->admin.set ? &u->admin : &u->data;
    bool data_ok = node_secret_verify(&u->data, password.p, password.len);
    bool admin_ok = node_secret_verify(admin, password.p, password.len);
    if (user.len == 0 || slice_is(user, "default")) {
        if (!u->data.set)
            return node_users_open_role(u);
        if (!data_ok)
            return NODE_ROLE_NONE;
        return u->admin.set ? NODE_ROLE_DATA : NODE_ROLE_ADMIN;
    }
    if (slice_is(user, "admin")) {
        if (!admin->set)
            return node_users_open_role(u);
        return admin_ok ? NODE_ROLE_ADMIN : NODE_ROLE_NONE;
    }
    return NODE_ROLE_NONE;
}
