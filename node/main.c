/*
 * main.c - ringkvd: read the configuration, run one node on a libuv loop
 * until SIGTERM or SIGINT, then shut down cleanly.
 */
#include <pthread.h>
#include <sched.h>
#include <signal.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <uv.h>

#include "common/rk.h"
#include "node/config.h"
#include "node/log.h"
#include "node/node.h"
#include "node/snapshot.h"

extern char **environ;

static void usage(FILE *f)
{
    fprintf(f,
            "usage: ringkvd [--config FILE] [--check-config] [--KEY=VALUE...]\n"
            "       ringkvd [--config FILE] [--KEY=VALUE...] "
            "--restore-snapshot TAG|DIR [--drop-hints]\n"
            "\n"
            "Runs one ringkv node. Settings come from the YAML file (or\n"
            "RINGKV_CONFIG), then RINGKV_<KEY> environment variables, then\n"
            "--key=value flags; see docs/config.md for every key.\n"
            "  --check-config  validate the configuration, print it, exit\n"
            "  --restore-snapshot TAG|DIR\n"
            "                  put the ranges of a snapshot (a TAG under\n"
            "                  data_dir/snapshots, or a snapshot folder) in\n"
            "                  place of the stopped node's, exit; see\n"
            "                  docs/operations.md\n"
            "  --drop-hints    with --restore-snapshot: drop the hints too\n"
            "                  (the whole cluster restored)\n"
            "  --replace=NODE  a new node: take the place of dead node NODE\n"
            "                  (its tokens and ranges); see\n"
            "                  docs/operations.md\n"
            "  --version       print the version, exit\n");
}

struct app {
    uv_loop_t loop;
    uv_signal_t sigterm, sigint, sighup;
    node *node;
    int signals;
};

static void on_stopped(void *arg)
{
    struct app *a = arg;
    uv_close((uv_handle_t *)&a->sigterm, NULL);
    uv_close((uv_handle_t *)&a->sigint, NULL);
    uv_close((uv_handle_t *)&a->sighup, NULL);
}

/* SIGHUP: the TLS certificates again (node_reload_tls). */
static void on_sighup(uv_signal_t *h, int signum)
{
    struct app *a = h->data;
    (void)signum;
    LOG(INFO, "signal", "signal=SIGHUP");
    node_reload_tls(a->node);
}

static void on_signal(uv_signal_t *h, int signum)
{
    struct app *a = h->data;
    a->signals++;
    LOG(INFO, "signal", "signal=%s count=%d",
        signum == SIGTERM ? "SIGTERM" : "SIGINT", a->signals);
    if (a->signals > 2) {
        LOG(WARN, "signal.abort", "reason=%s", "third signal, exiting now");
        _exit(1);
    }
    node_stop(a->node, on_stopped, a);
}

int main(int argc, char **argv)
{
    struct node_config cfg = NODE_CONFIG_INIT;
    char err[NODE_CONFIG_ERR] = "";
    int check = 0;
    const char *restore = NULL;
    bool drop_hints = false;

    for (int i = 1; i < argc; i++) {
        if (strcmp(argv[i], "--help") == 0 || strcmp(argv[i], "-h") == 0) {
            usage(stdout);
            return 0;
        }
        if (strcmp(argv[i], "--version") == 0) {
            printf("ringkvd %s\n", RK_VERSION);
            return 0;
        }
        if (strcmp(argv[i], "--check-config") == 0)
            check = 1;
        if (strncmp(argv[i], "--restore-snapshot=", 19) == 0)
            restore = argv[i] + 19;
        else if (strcmp(argv[i], "--restore-snapshot") == 0)
            restore = i + 1 < argc ? argv[++i] : "";
        if (strcmp(argv[i], "--drop-hints") == 0)
            drop_hints = true;
    }
    const char *file = node_config_file_arg(argc, argv, environ);
    if (file && node_config_load_file(&cfg, file, err, sizeof(err)) < 0)
        goto bad_config;
    if (node_config_apply_env(&cfg, environ, err, sizeof(err)) < 0)
        goto bad_config;
    if (node_config_apply_args(&cfg, argc, argv, err, sizeof(err)) < 0)
        goto bad_config;
    if (node_config_validate(&cfg, err, sizeof(err)) < 0)
        goto bad_config;
    if (check) {
        char dump[8192];
        node_config_dump(&cfg, dump, sizeof(dump));
        printf("# configuration OK%s%s%s\n%s", file ? " (from " : "",
               file ? file : "", file ? ")" : "", dump);
        return 0;
    }
    if (drop_hints && !restore) {
        fprintf(stderr, "ringkvd: --drop-hints goes with --restore-snapshot\n");
        return 2;
    }
    if (restore) {
        if (!restore[0]) {
            fprintf(stderr, "ringkvd: --restore-snapshot needs a TAG or a "
                            "snapshot folder\n");
            return 2;
        }
        int rc = node_snapshot_restore(&cfg, restore, drop_hints, stdout, err,
                                       sizeof(err));
        if (rc < 0)
            fprintf(stderr, "ringkvd: restore: %s\n",
                    err[0] ? err : rk_strerror(rc));
        return rc < 0 ? 1 : 0;
    }

    signal(SIGPIPE, SIG_IGN);
    /* Before any thread exists: every thread ringkvd starts inherits it. */
    struct sched_param sp = {0};
    int sched_rc = cfg.cpu_scheduling == NODE_SCHED_BATCH
                       ? pthread_setschedparam(pthread_self(), SCHED_BATCH, &sp)
                       : 0;
    struct app a;
    memset(&a, 0, sizeof(a));
    int rc = uv_loop_init(&a.loop);
    if (rc < 0) {
        fprintf(stderr, "ringkvd: uv_loop_init: %s\n", uv_strerror(rc));
        return 1;
    }
    rc = node_log_open(cfg.log_file, cfg.log_level, cfg.node_name);
    if (rc < 0) {
        fprintf(stderr, "ringkvd: log_file: cannot open '%s': %s\n",
                cfg.log_file, rk_strerror(rc));
        return 1;
    }
    rc = node_new(&a.node, &a.loop, &cfg, err, sizeof(err));
    if (rc < 0) {
        fprintf(stderr, "ringkvd: %s\n", err[0] ? err : rk_strerror(rc));
        LOG(ERROR, "node.fail", "error=\"%s\"", err[0] ? err : rk_strerror(rc));
        uv_loop_close(&a.loop);
        node_log_close();
        return 1;
    }
    node_log_open(cfg.log_file, cfg.log_level, node_name(a.node));
    if (sched_rc != 0)
        LOG(WARN, "node.cpu_scheduling",
            "policy=batch error=\"%s\" note=\"running under the normal "
            "policy\"",
            strerror(sched_rc));
    rc = node_start(a.node, err, sizeof(err));
    if (rc < 0) {
        fprintf(stderr, "ringkvd: %s\n", err[0] ? err : rk_strerror(rc));
        LOG(ERROR, "node.fail", "error=\"%s\"", err[0] ? err : rk_strerror(rc));
        uv_run(&a.loop, UV_RUN_DEFAULT); /* node_start began a stop */
        node_free(a.node);
        uv_loop_close(&a.loop);
        node_log_close();
        return 1;
    }
    uv_signal_init(&a.loop, &a.sigterm);
    uv_signal_init(&a.loop, &a.sigint);
    a.sigterm.data = a.sigint.data = &a;
    uv_signal_start(&a.sigterm, on_signal, SIGTERM);
    uv_signal_start(&a.sigint, on_signal, SIGINT);
    uv_signal_init(&a.loop, &a.sighup);
    a.sighup.data = &a;
    uv_signal_start(&a.sighup, on_sighup, SIGHUP);
    node_on_self_stop(a.node, on_stopped, &a);

    uv_run(&a.loop, UV_RUN_DEFAULT);

    int code = node_exit_code(a.node);
    node_free(a.node);
    rc = uv_loop_close(&a.loop);
    LOG(INFO, "exit", "loop_close=%s code=%d", rc == 0 ? "ok" : uv_strerror(rc),
        code);
    node_log_close();
    return code;

bad_config:
    fprintf(stderr, "ringkvd: configuration error: %s\n", err);
    return 2;
}
