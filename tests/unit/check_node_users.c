/*
 * check_node_users.c - the client users and roles (node/users.h): the
 * configured password forms (plain, "sha256:<hex>", files), what each
 * user and password grant under each configuration (requirepass alone
 * keeps granting admin), and the role each native op needs
 * (node/admin_commands.h).
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <check.h>

#include "common/rk.h"
#include "node/admin_commands.h"
#include "node/config.h"
#include "node/users.h"
#include "wire/client_msg.h"

/* SHA-256 of "password" (FIPS 180 test tools agree) */
#define PASSWORD_SHA256 \
    "5e884898da28047151d0e56f8dc6292773603d0d6aabbdd62a11ef721d1542d8"

static char err[256];

static int secret(struct node_secret *s, const char *text)
{
    err[0] = '\0';
    return node_secret_parse(s, text, strlen(text), err, sizeof(err));
}

static bool verify(const struct node_secret *s, const char *pw)
{
    return node_secret_verify(s, (const uint8_t *)pw, strlen(pw));
}

static struct rk_slice sl(const char *s)
{
    return RK_SLICE(s, strlen(s));
}

START_TEST(secret_plain_and_digest)
{
    struct node_secret p, d, u;
    ck_assert_int_eq(secret(&p, "password"), 0);
    ck_assert_int_eq(secret(&d, "sha256:" PASSWORD_SHA256), 0);
    ck_assert_int_eq(secret(&u, "SHA256:x"), 0); /* the prefix is lower case */
    ck_assert(p.set && d.set);
    ck_assert_mem_eq(p.sha256, d.sha256, 32);
    ck_assert(verify(&p, "password"));
    ck_assert(verify(&d, "password"));
    ck_assert(verify(&u, "SHA256:x"));
    /* a prefix, an extension, a change in the last byte, the empty one */
    ck_assert(!verify(&p, "passwor"));
    ck_assert(!verify(&p, "password1"));
    ck_assert(!verify(&p, "passworD"));
    ck_assert(!verify(&p, ""));
    ck_assert(!node_secret_verify(&p, (const uint8_t *)"password\0", 9));
    /* the digest's text is not a password */
    ck_assert(!verify(&d, "sha256:" PASSWORD_SHA256));
    /* upper-case hex reads the same */
    char up[80] = "sha256:";
    for (size_t k = 0; k < 64; k++) {
        char h = PASSWORD_SHA256[k];
        up[7 + k] = (char)(h >= 'a' ? h - 32 : h);
    }
    up[71] = '\0';
    ck_assert_int_eq(secret(&u, up), 0);
    ck_assert(verify(&u, "password"));
    /* an unset secret verifies nothing, not even its zero digest */
    struct node_secret none = {0};
    ck_assert(!verify(&none, ""));
    ck_assert(!verify(&none, "password"));
}
END_TEST

START_TEST(secret_refused)
{
    struct node_secret s;
    ck_assert_int_eq(secret(&s, ""), RK_ECONFIG);
    ck_assert(!s.set);
    ck_assert_int_eq(secret(&s, "sha256:abc"), RK_ECONFIG);
    ck_assert_ptr_nonnull(strstr(err, "64 hex digits"));
    ck_assert_int_eq(secret(&s, "sha256:" PASSWORD_SHA256 "0"), RK_ECONFIG);
    char bad[] = "sha256:" PASSWORD_SHA256;
    bad[20] = 'g';
    ck_assert_int_eq(secret(&s, bad), RK_ECONFIG);
    ck_assert_ptr_nonnull(strstr(err, "non-hex"));
    ck_assert(!s.set);
    /* the message never quotes the password */
    ck_assert_ptr_null(strstr(err, "sha256:5e88"));
    ck_assert_int_eq(node_secret_parse(&s, "a\0b", 3, err, sizeof(err)),
                     RK_ECONFIG);
    char *big = malloc(NODE_SECRET_MAX + 2);
    memset(big, 'x', NODE_SECRET_MAX + 1);
    big[NODE_SECRET_MAX + 1] = '\0';
    ck_assert_int_eq(secret(&s, big), RK_ECONFIG);
    big[NODE_SECRET_MAX] = '\0';
    ck_assert_int_eq(secret(&s, big), 0);
    free(big);
}
END_TEST

static enum node_role
check(const struct node_users *u, const char *user, const char *pw)
{
    return node_users_check(u, sl(user), sl(pw));
}

START_TEST(roles_requirepass_only)
{
    /* as before roles: requirepass grants everything, as `default` or
     * `admin` */
    struct node_users u = {0};
    ck_assert_int_eq(secret(&u.data, "s3cret"), 0);
    ck_assert(node_users_any(&u));
    ck_assert_int_eq(node_users_open_role(&u), NODE_ROLE_NONE);
    ck_assert_int_eq(check(&u, "", "s3cret"), NODE_ROLE_ADMIN);
    ck_assert_int_eq(check(&u, "default", "s3cret"), NODE_ROLE_ADMIN);
    ck_assert_int_eq(check(&u, "admin", "s3cret"), NODE_ROLE_ADMIN);
    ck_assert_int_eq(check(&u, "", "wrong"), NODE_ROLE_NONE);
    ck_assert_int_eq(check(&u, "admin", "wrong"), NODE_ROLE_NONE);
    ck_assert_int_eq(check(&u, "bob", "s3cret"), NODE_ROLE_NONE);
    ck_assert_int_eq(check(&u, "Default", "s3cret"), NODE_ROLE_NONE);
}
END_TEST

START_TEST(roles_data_and_admin)
{
    struct node_users u = {0};
    ck_assert_int_eq(secret(&u.data, "data-pw"), 0);
    ck_assert_int_eq(secret(&u.admin, "sha256:" PASSWORD_SHA256), 0);
    ck_assert_int_eq(node_users_open_role(&u), NODE_ROLE_NONE);
    ck_assert_int_eq(check(&u, "", "data-pw"), NODE_ROLE_DATA);
    ck_assert_int_eq(check(&u, "default", "data-pw"), NODE_ROLE_DATA);
    ck_assert_int_eq(check(&u, "admin", "password"), NODE_ROLE_ADMIN);
    /* each user has its own password only */
    ck_assert_int_eq(check(&u, "admin", "data-pw"), NODE_ROLE_NONE);
    ck_assert_int_eq(check(&u, "default", "password"), NODE_ROLE_NONE);
    ck_assert_int_eq(check(&u, "", "password"), NODE_ROLE_NONE);
    ck_assert_int_eq(check(&u, "nobody", "password"), NODE_ROLE_NONE);
}
END_TEST

START_TEST(roles_admin_only_and_open)
{
    /* only an admin password: clients read and write without one */
    struct node_users u = {0};
    ck_assert_int_eq(secret(&u.admin, "adm"), 0);
    ck_assert_int_eq(node_users_open_role(&u), NODE_ROLE_DATA);
    ck_assert_int_eq(check(&u, "admin", "adm"), NODE_ROLE_ADMIN);
    ck_assert_int_eq(check(&u, "admin", "x"), NODE_ROLE_NONE);
    ck_assert_int_eq(check(&u, "default", "anything"), NODE_ROLE_DATA);
    ck_assert_int_eq(check(&u, "", "adm"), NODE_ROLE_DATA);
    /* none: everything open, as it always was */
    struct node_users open = {0};
    ck_assert(!node_users_any(&open));
    ck_assert_int_eq(node_users_open_role(&open), NODE_ROLE_ADMIN);
    ck_assert_int_eq(check(&open, "admin", "x"), NODE_ROLE_ADMIN);
    ck_assert_int_eq(check(&open, "bob", "x"), NODE_ROLE_NONE);
    ck_assert_str_eq(node_role_name(NODE_ROLE_DATA), "data");
    ck_assert_str_eq(node_role_name(NODE_ROLE_ADMIN), "admin");
    ck_assert_str_eq(node_role_name(NODE_ROLE_NONE), "none");
}
END_TEST

START_TEST(metrics_credentials)
{
    struct node_users u = {0};
    /* no metrics_password: open */
    ck_assert(node_users_metrics_ok(&u, sl(""), sl("")));
    ck_assert_int_eq(secret(&u.metrics, "sha256:" PASSWORD_SHA256), 0);
    ck_assert(node_users_metrics_ok(&u, sl("metrics"), sl("password")));
    ck_assert(!node_users_metrics_ok(&u, sl("metrics"), sl("passwor")));
    ck_assert(!node_users_metrics_ok(&u, sl("admin"), sl("password")));
    ck_assert(!node_users_metrics_ok(&u, sl(""), sl("password")));
    ck_assert(!node_users_metrics_ok(&u, sl("metricsx"), sl("password")));
    /* it is not a client password: the client ports stay as they were */
    ck_assert(!node_users_any(&u));
    ck_assert_int_eq(node_users_open_role(&u), NODE_ROLE_ADMIN);
}
END_TEST

static void write_file(const char *path, const char *text)
{
    FILE *f = fopen(path, "wb");
    ck_assert_ptr_nonnull(f);
    fputs(text, f);
    fclose(f);
}

START_TEST(load_from_config_and_files)
{
    char dir[] = "/tmp/check_users_XXXXXX";
    ck_assert_ptr_nonnull(mkdtemp(dir));
    char data_f[64], admin_f[64], empty_f[64];
    snprintf(data_f, sizeof(data_f), "%s/data", dir);
    snprintf(admin_f, sizeof(admin_f), "%s/admin", dir);
    snprintf(empty_f, sizeof(empty_f), "%s/empty", dir);
    write_file(data_f, "from-file\r\n");
    write_file(admin_f, "sha256:" PASSWORD_SHA256 "\n");
    write_file(empty_f, "\n");

    struct node_users u;
    struct node_config c = NODE_CONFIG_INIT;
    ck_assert_int_eq(node_users_load(&u, &c, err, sizeof(err)), 0);
    ck_assert(!node_users_any(&u));

    snprintf(c.requirepass_file, sizeof(c.requirepass_file), "%s", data_f);
    snprintf(c.admin_password_file, sizeof(c.admin_password_file), "%s",
             admin_f);
    ck_assert_int_eq(node_users_load(&u, &c, err, sizeof(err)), 0);
    ck_assert_int_eq(check(&u, "", "from-file"), NODE_ROLE_DATA);
    ck_assert_int_eq(check(&u, "admin", "password"), NODE_ROLE_ADMIN);
    ck_assert_int_eq(node_config_validate(&c, err, sizeof(err)), 0);

    /* a key and its file both set */
    snprintf(c.requirepass, sizeof(c.requirepass), "inline");
    ck_assert_int_eq(node_users_load(&u, &c, err, sizeof(err)), RK_ECONFIG);
    ck_assert_ptr_nonnull(strstr(err, "requirepass and requirepass_file"));
    ck_assert(!node_users_any(&u));
    ck_assert_int_eq(node_config_validate(&c, err, sizeof(err)), RK_ECONFIG);
    c.requirepass[0] = '\0';

    /* an empty file, a missing one, a bad digest inline */
    snprintf(c.admin_password_file, sizeof(c.admin_password_file), "%s",
             empty_f);
    ck_assert_int_eq(node_users_load(&u, &c, err, sizeof(err)), RK_ECONFIG);
    ck_assert_ptr_nonnull(strstr(err, "admin_password_file"));
    ck_assert_ptr_nonnull(strstr(err, "empty"));
    snprintf(c.admin_password_file, sizeof(c.admin_password_file), "%s/missing",
             dir);
    ck_assert_int_eq(node_users_load(&u, &c, err, sizeof(err)), RK_ECONFIG);
    ck_assert_ptr_nonnull(strstr(err, "cannot read"));
    c.admin_password_file[0] = '\0';
    snprintf(c.admin_password, sizeof(c.admin_password), "sha256:nothex");
    ck_assert_int_eq(node_users_load(&u, &c, err, sizeof(err)), RK_ECONFIG);
    ck_assert_ptr_nonnull(strstr(err, "admin_password:"));

    unlink(data_f);
    unlink(admin_f);
    unlink(empty_f);
    rmdir(dir);
}
END_TEST

START_TEST(op_roles)
{
    static const uint32_t admin[] = {
        WIRE_COP_JOIN,     WIRE_COP_DECOMMISSION,  WIRE_COP_REMOVENODE,
        WIRE_COP_REPAIR,   WIRE_COP_CLEANUP,       WIRE_COP_ABORT,
        WIRE_COP_SNAPSHOT, WIRE_COP_CLEARSNAPSHOT, 999};
    /* SCAN among them (regression: native_scan_noperm, the data user's
     * SCAN was answered NOPERM) */
    static const uint32_t data[] = {
        WIRE_COP_PING,    WIRE_COP_GET,      WIRE_COP_PUT,
        WIRE_COP_DEL,     WIRE_COP_MGET,     WIRE_COP_SCAN,
        WIRE_COP_STATUS,  WIRE_COP_RING,     WIRE_COP_ENDPOINTS,
        WIRE_COP_METRICS, WIRE_COP_NETSTATS, WIRE_COP_LISTSNAPSHOTS};
    for (size_t i = 0; i < sizeof(admin) / sizeof(admin[0]); i++)
        ck_assert_int_eq(node__op_role(admin[i]), NODE_ROLE_ADMIN);
    for (size_t i = 0; i < sizeof(data) / sizeof(data[0]); i++)
        ck_assert_int_eq(node__op_role(data[i]), NODE_ROLE_DATA);
    ck_assert_int_eq(node__op_role(WIRE_COP_HELLO), NODE_ROLE_NONE);
    /* every op the shared runner takes needs the admin role */
    for (uint32_t op = 0; op < 256; op++)
        if (node__admin_command_op(op))
            ck_assert_int_eq(node__op_role(op), NODE_ROLE_ADMIN);
}
END_TEST

static Suite *node_users_suite(void)
{
    Suite *s = suite_create("node_users");
    TCase *tc = tcase_create("secrets");
    tcase_add_test(tc, secret_plain_and_digest);
    tcase_add_test(tc, secret_refused);
    suite_add_tcase(s, tc);
    tc = tcase_create("roles");
    tcase_add_test(tc, roles_requirepass_only);
    tcase_add_test(tc, roles_data_and_admin);
    tcase_add_test(tc, roles_admin_only_and_open);
    tcase_add_test(tc, op_roles);
    tcase_add_test(tc, metrics_credentials);
    suite_add_tcase(s, tc);
    tc = tcase_create("load");
    tcase_add_test(tc, load_from_config_and_files);
    suite_add_tcase(s, tc);
    return s;
}

int main(void)
{
    SRunner *sr = srunner_create(node_users_suite());
    srunner_run_all(sr, CK_NORMAL);
    int failed = srunner_ntests_failed(sr);
    srunner_free(sr);
    return failed == 0 ? EXIT_SUCCESS : EXIT_FAILURE;
}
