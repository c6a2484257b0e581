/*
 * check_client_programs.c - the built `ringkv` CLI and `ringkv-load`
 * binaries (found next to this test binary), run as processes against the
 * fake server of client_fixture.h (as libringkv is in check_client.c):
 * their output and exit codes.
 */
#include <fcntl.h>
#include <inttypes.h>
#include <poll.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include <check.h>

#include "common/rk.h"
#include "tests/unit/client_fixture.h"
#include "wire/client_msg.h"

/* ---- the ringkv CLI and ringkv-load, run as processes ----------------------
 */

/* Run build/bin/<prog> (next to this test binary) with args; capture stdout
 * (and stderr when err != NULL) and return the exit status. */
static int run_prog(const char *prog,
                    const char *const *args,
                    char *out,
                    size_t outsz,
                    char *err,
                    size_t errsz,
                    const char *env)
{
    char self[4096], path[4200];
    ssize_t n = readlink("/proc/self/exe", self, sizeof(self) - 1);
    ck_assert_int_gt(n, 0);
    self[n] = '\0';
    char *slash = strrchr(self, '/');
    *slash = '\0';
    snprintf(path, sizeof(path), "%s/%s", self, prog);
    ck_assert_msg(access(path, X_OK) == 0, "%s not built", path);
    int po[2], pe[2];
    ck_assert_int_eq(pipe(po), 0);
    ck_assert_int_eq(pipe(pe), 0);
    pid_t pid = fork();
    ck_assert_int_ge(pid, 0);
    if (pid == 0) {
        dup2(po[1], 1);
        dup2(pe[1], 2);
        close(po[0]);
        close(pe[0]);
        const char *argv[32];
        int k = 0;
        argv[k++] = prog;
        for (int i = 0; args[i] && k < 31; i++)
            argv[k++] = args[i];
        argv[k] = NULL;
        int devnull = open("/dev/null", O_RDONLY);
        dup2(devnull, 0);
        unsetenv("RINGKV_PASSWORD");
        unsetenv("RINGKV_HOST");
        if (env)
            putenv((char *)env);
        execv(path, (char *const *)argv);
        _exit(127);
    }
    close(po[1]);
    close(pe[1]);
    size_t ol = 0, el = 0;
    struct pollfd p[2] = {{po[0], POLLIN, 0}, {pe[0], POLLIN, 0}};
    int open_fds = 2;
    char scratch[4096];
    while (open_fds > 0 && poll(p, 2, 60000) > 0) {
        for (int i = 0; i < 2; i++) {
            if (p[i].fd < 0 || !(p[i].revents & (POLLIN | POLLHUP)))
                continue;
            char *dst = i == 0 ? out + ol : (err ? err + el : scratch);
            size_t room = i == 0 ? outsz - 1 - ol
                                 : (err ? errsz - 1 - el : sizeof(scratch));
            ssize_t r = read(p[i].fd, room ? dst : scratch,
                             room ? room : sizeof(scratch));
            if (r <= 0) {
                close(p[i].fd);
                p[i].fd = -1;
                open_fds--;
            } else if (room && i == 0) {
                ol += (size_t)r;
            } else if (room && err) {
                el += (size_t)r;
            }
        }
    }
    out[ol] = '\0';
    if (err)
        err[el] = '\0';
    for (int i = 0; i < 2; i++)
        if (p[i].fd >= 0)
            close(p[i].fd);
    int st;
    ck_assert_int_eq(waitpid(pid, &st, 0), pid);
    ck_assert(WIFEXITED(st));
    return WEXITSTATUS(st);
}

static int cli(struct fake *f,
               const char *env,
               char *out,
               char *err,
               const char *a0,
               const char *a1,
               const char *a2,
               const char *a3,
               const char *a4)
{
    char host[32];
    snprintf(host, sizeof(host), "127.0.0.1:%u", f ? f->port : dead_port());
    const char *args[] = {"-h", host, a0, a1, a2, a3, a4, NULL};
    return run_prog("ringkv", args, out, 8192, err, 8192, env);
}

START_TEST(cli_data_commands)
{
    struct fake *f = fake_start(false, NULL);
    char out[8192], err[8192];
    ck_assert_int_eq(cli(f, NULL, out, err, "put", "k", "hello", "--ttl", "30"),
                     0);
    ck_assert_str_eq(out, "OK\n");
    ck_assert_uint_eq(f->last_ttl, 30);
    ck_assert_int_eq(cli(f, NULL, out, err, "get", "k", NULL, NULL, NULL), 0);
    ck_assert_str_eq(out, "hello\n");
    ck_assert_int_eq(cli(f, NULL, out, err, "--json", "get", "k", NULL, NULL),
                     0);
    ck_assert_str_eq(out,
                     "{\"key\":\"k\",\"found\":true,\"value\":\"hello\"}\n");
    /* "-" reads the value from stdin (here /dev/null: an empty value) */
    ck_assert_int_eq(cli(f, NULL, out, err, "put", "e", "-", NULL, NULL), 0);
    ck_assert_int_eq(cli(f, NULL, out, err, "--json", "get", "e", NULL, NULL),
                     0);
    ck_assert_str_eq(out, "{\"key\":\"e\",\"found\":true,\"value\":\"\"}\n");
    /* a key that starts with '-' after "--" */
    ck_assert_int_eq(cli(f, NULL, out, err, "put", "--", "-k", "x", NULL), 0);
    ck_assert_int_eq(cli(f, NULL, out, err, "get", "--", "-k", NULL, NULL), 0);
    ck_assert_str_eq(out, "x\n");
    ck_assert_int_eq(cli(f, NULL, out, err, "del", "k", "-c", "quorum", NULL),
                     0);
    ck_assert_uint_eq(f->last_cl, WIRE_CCL_QUORUM);
    ck_assert_int_eq(cli(f, NULL, out, err, "get", "k", NULL, NULL, NULL), 1);
    ck_assert_str_eq(out, "");
    ck_assert_int_eq(cli(f, NULL, out, err, "get", "k", "--json", NULL, NULL),
                     1);
    ck_assert_str_eq(out, "{\"key\":\"k\",\"found\":false}\n");
    /* typed errors become exit codes and say what happened */
    ck_assert_int_eq(cli(f, NULL, out, err, "get", "unavail", NULL, NULL, NULL),
                     5);
    ck_assert_ptr_nonnull(strstr(err, "UNAVAILABLE: 1 of 3 replicas alive"));
    ck_assert_int_eq(
        cli(f, NULL, out, err, "--json", "put", "timeout", "v", NULL), 5);
    ck_assert_ptr_nonnull(strstr(out, "\"error\":\"TIMEOUT\""));
    ck_assert_int_eq(
        cli(f, NULL, out, err, "removenode", "n2", NULL, NULL, NULL), 7);
    fake_stop(f);
}
END_TEST

/* Regression: an admin command the node does not implement printed only
 * the server's "NOT_IMPLEMENTED: ..." (and, with --json, the error name
 * came from a special case for -ENOSYS); it must say plainly that this
 * version does not do it, with its own exit code, 7. */
START_TEST(cli_not_implemented_says_so)
{
    struct fake *f = fake_start(false, NULL);
    char out[8192], err[8192], want[128];
    snprintf(want, sizeof(want),
             "ringkv decommission: not implemented in this version (the "
             "node 127.0.0.1:%u answered NOT_IMPLEMENTED: ",
             f->port);
    ck_assert_int_eq(
        cli(f, NULL, out, err, "decommission", NULL, NULL, NULL, NULL), 7);
    ck_assert_msg(strncmp(err, want, strlen(want)) == 0, "%s", err);
    ck_assert_str_eq(out, "");
    ck_assert_int_eq(
        cli(f, NULL, out, err, "--json", "repair", NULL, NULL, NULL), 7);
    const char *wj = "{\"error\":\"NOT_IMPLEMENTED\",\"message\":\"not "
                     "implemented in this version";
    ck_assert_msg(strncmp(out, wj, strlen(wj)) == 0, "%s", out);
    ck_assert_ptr_nonnull(strstr(out, "\"exit\":7}"));
    fake_stop(f);
}
END_TEST

START_TEST(cli_status)
{
    struct fake *f = fake_start(false, NULL);
    char out[8192], err[8192];
    ck_assert_int_eq(cli(f, NULL, out, err, "status", NULL, NULL, NULL, NULL),
                     0);
    ck_assert_ptr_nonnull(strstr(out, "Datacenter: dc1"));
    ck_assert_ptr_nonnull(strstr(out, "Owns (effective)"));
    ck_assert_ptr_nonnull(strstr(out, "UN  127.0.0.11:7380  1.50 KiB"));
    ck_assert_ptr_nonnull(strstr(out, "50.0%"));
    ck_assert_ptr_nonnull(strstr(out, "DN  127.0.0.12:7380"));
    ck_assert_ptr_nonnull(
        strstr(out, "Ring epoch: 3, fingerprint: 0000000000abcdef"));
    ck_assert_ptr_nonnull(strstr(out, "\nReplication: dc1:3\n"));
    ck_assert_ptr_null(strstr(out, "WARNING"));
    ck_assert_int_eq(
        cli(f, NULL, out, err, "status", "--json", NULL, NULL, NULL), 0);
    ck_assert_ptr_nonnull(strstr(out, "{\"epoch\":3,\"fingerprint\":"
                                      "\"0000000000abcdef\",\"nodes\":[{"
                                      "\"state\":\"UN\",\"address\":\"127.0.0."
                                      "11:7380\",\"load\":1536,\"tokens\":16,"
                                      "\"owns\":0.500000,\"host\":\"n1\","
                                      "\"rack\":\"r1\",\"dc\":\"dc1\","
                                      "\"replication\":\"dc1:3\"}"));
    /* a node configured otherwise: named, with what each says */
    nodes[1].repl = RK_SLICE("dc1:2", 5);
    ck_assert_int_eq(cli(f, NULL, out, err, "status", NULL, NULL, NULL, NULL),
                     0);
    nodes[1].repl = RK_SLICE("dc1:3", 5);
    ck_assert_ptr_nonnull(strstr(out, "WARNING: the nodes are configured "
                                      "with different replication"));
    ck_assert_ptr_nonnull(strstr(out, "  n1: dc1:3\n  n2: dc1:2\n"));
    ck_assert_ptr_null(strstr(out, "Replication: "));
    ck_assert_ptr_null(strstr(out, "Silent"));
    /* a peer the answering node waits on: a line under the table */
    nodes[0].silent_ms = 2400;
    ck_assert_int_eq(cli(f, NULL, out, err, "status", NULL, NULL, NULL, NULL),
                     0);
    ck_assert_ptr_nonnull(strstr(out, "\nSilent: n1 has not answered "));
    ck_assert_ptr_nonnull(strstr(out, "requests for 2.4 s: reads ask it last"));
    ck_assert_int_eq(
        cli(f, NULL, out, err, "status", "--json", NULL, NULL, NULL), 0);
    nodes[0].silent_ms = 0;
    ck_assert_ptr_nonnull(
        strstr(out, "\"replication\":\"dc1:3\",\"silent_ms\":2400}"));
    /* a peer's clock far off (n2's row: 600000 ms ahead) */
    ck_assert_ptr_nonnull(
        strstr(out, "\"replication\":\"dc1:3\",\"clock_ms\":600000,"
                    "\"clock_far\":true}"));
    ck_assert_int_eq(cli(f, NULL, out, err, "status", NULL, NULL, NULL, NULL),
                     0);
    ck_assert_ptr_nonnull(
        strstr(out, "\nClock: n2's clock is 600000 ms ahead of the answering "
                    "node's, more than max_clock_drift_ms\n"));
    nodes[1].clock_ahead_ms = 0;
    nodes[1].clock_behind_ms = 1200;
    ck_assert_int_eq(
        cli(f, NULL, out, err, "status", "--json", NULL, NULL, NULL), 0);
    nodes[1].clock_ahead_ms = 600000;
    nodes[1].clock_behind_ms = 0;
    ck_assert_ptr_nonnull(strstr(out, "\"clock_ms\":-1200,"));
    ck_assert_ptr_null(strstr(out, "disk_full"));
    /* the answering node short of disk space: a line, and in --json */
    nodes[0].disk_full = 1;
    ck_assert_int_eq(cli(f, NULL, out, err, "status", NULL, NULL, NULL, NULL),
                     0);
    ck_assert_ptr_nonnull(strstr(out, "\nDisk full: n1 has less free disk "
                                      "space than its disk_reserve_mb"));
    ck_assert_int_eq(
        cli(f, NULL, out, err, "status", "--json", NULL, NULL, NULL), 0);
    nodes[0].disk_full = 0;
    ck_assert_ptr_nonnull(
        strstr(out, "\"replication\":\"dc1:3\",\"disk_full\":true}"));
    /* the answering node's repair schedule: a line, and in --json */
    ck_assert_ptr_null(strstr(out, "repair"));
    nodes[0].repair_arcs = 24;
    nodes[0].repair_oldest_ms = 3 * 3600 * 1000 + 720 * 1000;
    nodes[0].repair_overdue = 2;
    nodes[0].repair_never = 1;
    ck_assert_int_eq(cli(f, NULL, out, err, "status", NULL, NULL, NULL, NULL),
                     0);
    ck_assert_ptr_nonnull(
        strstr(out, "\nRepair: n1 replicates 24 arcs; the longest any has "
                    "gone without a complete repair is 3.2 h; 2 overdue "
                    "(past repair_interval_s); 1 never repaired"));
    ck_assert_int_eq(
        cli(f, NULL, out, err, "status", "--json", NULL, NULL, NULL), 0);
    nodes[0].repair_arcs = nodes[0].repair_oldest_ms = 0;
    nodes[0].repair_overdue = nodes[0].repair_never = 0;
    ck_assert_ptr_nonnull(
        strstr(out, "\"replication\":\"dc1:3\",\"repair\":{\"arcs\":24,"
                    "\"oldest_ms\":11520000,\"overdue\":2,\"never\":1}}"));
    /* a joining node waiting for another to stream: a line, and in --json */
    nodes[1].queued = (struct rk_slice){(const uint8_t *)"n1", 2};
    ck_assert_int_eq(cli(f, NULL, out, err, "status", NULL, NULL, NULL, NULL),
                     0);
    ck_assert_ptr_nonnull(
        strstr(out, "\nQueued: n2 streams its ranges once n1 is done"));
    ck_assert_int_eq(
        cli(f, NULL, out, err, "status", "--json", NULL, NULL, NULL), 0);
    nodes[1].queued = (struct rk_slice){NULL, 0};
    ck_assert_ptr_nonnull(strstr(out, "\"clock_far\":true,\"queued\":\"n1\"}"));
    fake_stop(f);
}
END_TEST

START_TEST(cli_ring_endpoints_metrics)
{
    struct fake *f = fake_start(false, NULL);
    char out[8192], err[8192];
    ck_assert_int_eq(
        cli(f, NULL, out, err, "getendpoints", "user:1", NULL, NULL, NULL), 0);
    ck_assert_str_eq(out, "127.0.0.12:7380\tn2\n127.0.0.11:7380\tn1\n");
    ck_assert_str_eq(err, "");
    ck_assert_int_eq(
        cli(f, NULL, out, err, "getendpoints", "badtoken", NULL, NULL, NULL),
        0);
    ck_assert_ptr_nonnull(strstr(err, "warning: the node says token 1"));
    ck_assert_int_eq(
        cli(f, NULL, out, err, "--json", "getendpoints", "k", NULL, NULL), 0);
    char want[256];
    snprintf(want, sizeof(want),
             "{\"key\":\"k\",\"token\":%" PRIu64 ",\"endpoints\":[{\"host\":"
             "\"n2\",\"address\":\"127.0.0.12:7380\"},",
             rk_token("k", 1));
    ck_assert_ptr_nonnull(strstr(out, want));
    ck_assert_int_eq(cli(f, NULL, out, err, "ring", NULL, NULL, NULL, NULL), 0);
    ck_assert_ptr_nonnull(
        strstr(out, "18446744073709551615  ffffffffffffffff"));
    ck_assert_int_eq(cli(f, NULL, out, err, "ring", "--json", NULL, NULL, NULL),
                     0);
    ck_assert_ptr_nonnull(strstr(out, "{\"token\":100,\"node\":\"n1\"}"));
    ck_assert_int_eq(cli(f, NULL, out, err, "metrics", NULL, NULL, NULL, NULL),
                     0);
    ck_assert_str_eq(out, "# TYPE x counter\nx 1\n");
    fake_stop(f);
}
END_TEST

START_TEST(cli_usage_and_connection)
{
    char out[8192], err[8192];
    ck_assert_int_eq(cli(NULL, NULL, out, err, "get", "k", NULL, NULL, NULL),
                     3);
    ck_assert_ptr_nonnull(strstr(err, "cannot connect"));
    ck_assert_int_eq(cli(NULL, NULL, out, err, "bogus", NULL, NULL, NULL, NULL),
                     2);
    ck_assert_int_eq(cli(NULL, NULL, out, err, "get", NULL, NULL, NULL, NULL),
                     2);
    ck_assert_int_eq(cli(NULL, NULL, out, err, "get", "k", "-c", "SOME", NULL),
                     2);
    ck_assert_int_eq(cli(NULL, NULL, out, err, "del", "k", "--ttl", "5", NULL),
                     2);
    ck_assert_int_eq(
        cli(NULL, NULL, out, err, "help", "status", NULL, NULL, NULL), 0);
    ck_assert_ptr_nonnull(strstr(out, "usage: ringkv [options] status"));
    ck_assert_int_eq(
        cli(NULL, NULL, out, err, "put", "--help", NULL, NULL, NULL), 0);
    ck_assert_ptr_nonnull(strstr(out, "--ttl"));
}
END_TEST

/* `replication`, `replication set SETTING` and `rebuild --from DC`: the
 * ops and arguments sent, and the usage errors (exit 2) caught before. */
START_TEST(cli_replication_and_rebuild)
{
    struct fake *f = fake_start(false, NULL);
    char out[8192], err[8192];
    ck_assert_int_eq(
        cli(f, NULL, out, err, "replication", NULL, NULL, NULL, NULL), 0);
    ck_assert_str_eq(out, "REPLICATION \n");
    ck_assert_int_eq(
        cli(f, NULL, out, err, "replication", "set", "dc1:3,dc2:3", NULL, NULL),
        0);
    ck_assert_str_eq(out, "REPLICATION_SET dc1:3,dc2:3\n");
    ck_assert_int_eq(
        cli(f, NULL, out, err, "rebuild", "--from", "dc1", NULL, NULL), 0);
    ck_assert_str_eq(out, "REBUILD dc1\n");
    ck_assert_int_eq(
        cli(f, NULL, out, err, "rebuild", "--from=dc2", NULL, NULL, NULL), 0);
    ck_assert_str_eq(out, "REBUILD dc2\n");
    /* usage errors */
    ck_assert_int_eq(cli(f, NULL, out, err, "rebuild", NULL, NULL, NULL, NULL),
                     2);
    ck_assert_ptr_nonnull(strstr(err, "--from DC"));
    ck_assert_int_eq(cli(f, NULL, out, err, "rebuild", "dc1", NULL, NULL, NULL),
                     2);
    ck_assert_int_eq(
        cli(f, NULL, out, err, "replication", "set", NULL, NULL, NULL), 2);
    ck_assert_int_eq(
        cli(f, NULL, out, err, "replication", "get", "dc1:3", NULL, NULL), 2);
    ck_assert_int_eq(
        cli(f, NULL, out, err, "replication", "set", "a:1", "b:1", NULL), 2);
    ck_assert_int_eq(cli(f, NULL, out, err, "get", "k", "--from", "dc1", NULL),
                     2);
    ck_assert_ptr_nonnull(strstr(err, "--from applies to rebuild only"));
    fake_stop(f);
}
END_TEST

START_TEST(cli_password)
{
    struct fake *f = fake_start(false, "pw");
    char out[8192], err[8192];
    ck_assert_int_eq(cli(f, NULL, out, err, "get", "k", NULL, NULL, NULL), 4);
    ck_assert_int_eq(
        cli(f, NULL, out, err, "get", "k", "--password", "no", NULL), 4);
    ck_assert_int_eq(
        cli(f, "RINGKV_PASSWORD=pw", out, err, "put", "k", "v", NULL, NULL), 0);
    ck_assert_int_eq(cli(f, NULL, out, err, "get", "k", "-a", "pw", NULL), 0);
    ck_assert_str_eq(out, "v\n");
    ck_assert_str_eq(f->last_user, ""); /* no user: the server's default */
    /* the user: --user, -u, $RINGKV_USER; an admin op as another user
     * exits 9 (NOPERM) */
    ck_assert_int_eq(cli(f, NULL, out, err, "cleanup", "-a", "pw", NULL, NULL),
                     9);
    ck_assert_ptr_nonnull(strstr(err, "admin role"));
    ck_assert_int_eq(
        cli(f, NULL, out, err, "cleanup", "-a", "pw", "--user=bob", NULL), 9);
    ck_assert_str_eq(f->last_user, "bob");
    ck_assert_int_eq(
        cli(f, NULL, out, err, "cleanup", "-a", "pw", "-u", "admin"), 0);
    ck_assert_str_eq(f->last_user, "admin");
    ck_assert_int_eq(cli(f, "RINGKV_USER=admin", out, err, "--json", "cleanup",
                         "-a", "pw", NULL),
                     0);
    ck_assert_str_eq(f->last_user, "admin");
    ck_assert_int_eq(
        cli(f, NULL, out, err, "--json", "cleanup", "-a", "pw", NULL), 9);
    ck_assert_ptr_nonnull(strstr(out, "\"error\":\"NOPERM\""));
    ck_assert_ptr_nonnull(strstr(out, "\"exit\":9"));

    /* the password from a file: --password-file, $RINGKV_PASSWORD_FILE */
    char path[] = "/tmp/check_client_pw_XXXXXX", env[64];
    int fd = mkstemp(path);
    ck_assert_int_ge(fd, 0);
    ck_assert_int_eq(write(fd, "pw\n", 3), 3);
    close(fd);
    snprintf(env, sizeof(env), "RINGKV_PASSWORD_FILE=%s", path);
    ck_assert_int_eq(
        cli(f, NULL, out, err, "get", "k", "--password-file", path, NULL), 0);
    ck_assert_str_eq(out, "v\n");
    ck_assert_int_eq(cli(f, env, out, err, "get", "k", NULL, NULL, NULL), 0);
    ck_assert_int_eq(cli(f, env, out, err, "get", "k", "-a", "no", NULL), 4);
    ck_assert_int_eq(cli(f, NULL, out, err, "get", "k", "-a", "pw",
                         "--password-file=/nonexistent"),
                     2);
    ck_assert_int_eq(cli(f, NULL, out, err, "get", "k",
                         "--password-file=/nonexistent", NULL, NULL),
                     2);
    ck_assert_ptr_nonnull(strstr(err, "/nonexistent"));
    unlink(path);
    fake_stop(f);
}
END_TEST

START_TEST(load_generator_runs)
{
    struct fake *f = fake_start(false, NULL);
    char host[32], out[8192];
    snprintf(host, sizeof(host), "127.0.0.1:%u", f->port);
    const char *args[] = {"-h", host, "-c", "1",   "-P",     "8",  "-n", "300",
                          "-k", "20", "-r", "0.5", "--json", NULL, NULL};
    ck_assert_int_eq(
        run_prog("ringkv-load", args, out, sizeof(out), NULL, 0, NULL), 0);
    ck_assert_ptr_nonnull(strstr(out, "\"ops\":300,"));
    ck_assert_ptr_nonnull(strstr(out, "\"errors\":0,"));
    ck_assert_ptr_nonnull(strstr(out, "\"p999\":"));
    /* token-aware by default: one RING first, which this fake answers
     * without node rows (an older server), so all go to the one host */
    ck_assert_ptr_nonnull(strstr(out, "\"token_aware\":true,"));
    ck_assert_ptr_nonnull(strstr(out, "\"to_replica\":0,"));
    ck_assert_int_eq(atomic_load(&f->requests), 301);
    args[13] = "--no-token-aware";
    atomic_store(&f->requests, 0);
    ck_assert_int_eq(
        run_prog("ringkv-load", args, out, sizeof(out), NULL, 0, NULL), 0);
    ck_assert_ptr_nonnull(strstr(out, "\"ops\":300,"));
    ck_assert_ptr_nonnull(strstr(out, "\"token_aware\":false,"));
    ck_assert_int_eq(atomic_load(&f->requests), 300);
    fake_stop(f);
}
END_TEST

/* Regression: ringkv-load counted a host it cannot resolve ("a..b" fails
 * in the resolver without asking DNS; libringkv returns -EHOSTUNREACH) as
 * OTHER instead of CONNECTION, unlike the CLI (exit 3). */
START_TEST(load_counts_unresolvable_host_as_connection)
{
    char out[8192];
    const char *args[] = {"-h", "a..b", "-c", "1", "-n", "3", "--json", NULL};
    ck_assert_int_eq(
        run_prog("ringkv-load", args, out, sizeof(out), NULL, 0, NULL), 3);
    ck_assert_ptr_nonnull(strstr(out, "\"errors_by_type\":{\"CONNECTION\":3}"));
    const char *cargs[] = {"-h", "a..b", "--json", "get", "k", NULL};
    ck_assert_int_eq(run_prog("ringkv", cargs, out, sizeof(out), NULL, 0, NULL),
                     3);
    ck_assert_ptr_nonnull(strstr(out, "\"error\":\"CONNECTION\""));
}
END_TEST

static Suite *client_programs_suite(void)
{
    Suite *s = suite_create("client_programs");
    TCase *tc = tcase_create("programs");
    tcase_set_timeout(tc, 120);
    tcase_add_test(tc, cli_data_commands);
    tcase_add_test(tc, cli_not_implemented_says_so);
    tcase_add_test(tc, cli_status);
    tcase_add_test(tc, cli_ring_endpoints_metrics);
    tcase_add_test(tc, cli_usage_and_connection);
    tcase_add_test(tc, cli_replication_and_rebuild);
    tcase_add_test(tc, cli_password);
    tcase_add_test(tc, load_generator_runs);
    tcase_add_test(tc, load_counts_unresolvable_host_as_connection);
    suite_add_tcase(s, tc);
    return s;
}

int main(void)
{
    SRunner *sr = srunner_create(client_programs_suite());
    srunner_run_all(sr, CK_NORMAL);
    int failed = srunner_ntests_failed(sr);
    srunner_free(sr);
    return failed == 0 ? EXIT_SUCCESS : EXIT_FAILURE;
}
