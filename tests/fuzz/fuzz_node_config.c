/*
 * fuzz_node_config.c - ringkvd's YAML configuration reader on arbitrary
 * bytes: it must return 0 or RK_ECONFIG with a message, never crash, and a
 * configuration it accepts must dump to YAML that reads back to the same
 * configuration, field by field (the dump quotes every string, so there is
 * no value it may lose). The only differences allowed are the ones the dump
 * documents: the passwords print as "<set>", and an
 * empty advertise_address prints as the listen_address it stands for.
 */
#include <errno.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/rk.h"
#include "node/config.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static void differ(const char *field, const char *dump)
{
    fprintf(stderr, "fuzz_node_config: %s differs after dump and reparse\n%s",
            field, dump);
    abort();
}

#define SAME_NUM(f)           \
    do {                      \
        if (a->f != b->f)     \
            differ(#f, dump); \
    } while (0)
#define SAME_STR(f)                  \
    do {                             \
        if (strcmp(a->f, b->f) != 0) \
            differ(#f, dump);        \
    } while (0)

static void same_config(const struct node_config *a,
                        const struct node_config *b,
                        const char *dump)
{
    SAME_STR(cluster_name);
    SAME_STR(cluster_secret_file);
    SAME_STR(node_name);
    SAME_STR(datacenter);
    SAME_STR(rack);
    SAME_STR(listen_address);
    const char *adv_a =
        a->advertise_address[0] ? a->advertise_address : a->listen_address;
    if (strcmp(adv_a, b->advertise_address) != 0)
        differ("advertise_address", dump);
    SAME_NUM(nseeds);
    for (int i = 0; i < a->nseeds; i++)
        SAME_STR(seeds[i]);
    SAME_NUM(gossip_port);
    SAME_NUM(internode_port);
    SAME_NUM(client_port);
    SAME_NUM(resp_port);
    SAME_NUM(metrics_port);
    SAME_STR(data_dir);
    SAME_NUM(num_tokens);
    SAME_NUM(token_allocation);
    SAME_NUM(weight);
    SAME_NUM(ndcs);
    for (int i = 0; i < a->ndcs; i++) {
        SAME_STR(replication[i].name);
        SAME_NUM(replication[i].rf);
    }
    SAME_NUM(default_consistency);
    SAME_NUM(auto_bootstrap);
    SAME_NUM(durability);
    SAME_NUM(periodic_sync_ms);
    SAME_NUM(read_timeout_ms);
    SAME_NUM(write_timeout_ms);
    SAME_NUM(connect_timeout_ms);
    SAME_NUM(gossip_interval_ms);
    SAME_NUM(phi_convict_threshold);
    SAME_NUM(hinted_handoff);
    SAME_NUM(max_hint_window_ms);
    SAME_NUM(gc_grace_seconds);
    SAME_NUM(memtable_mb);
    SAME_NUM(auto_compact_pct);
    SAME_NUM(max_inflight);
    SAME_NUM(max_pipeline);
    if (!a->requirepass[0] != !b->requirepass[0])
        differ("requirepass (set or not)", dump);
    if (!a->admin_password[0] != !b->admin_password[0])
        differ("admin_password (set or not)", dump);
    if (!a->metrics_password[0] != !b->metrics_password[0])
        differ("metrics_password (set or not)", dump);
    SAME_STR(requirepass_file);
    SAME_STR(admin_password_file);
    SAME_STR(metrics_password_file);
    SAME_NUM(log_level);
    SAME_STR(log_file);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    struct node_config c = NODE_CONFIG_INIT;
    char err[NODE_CONFIG_ERR];
    err[0] = '\0';
    int rc = node_config_parse_yaml(&c, (const char *)data, size, "fuzz", err,
                                    sizeof(err));
    if (rc < 0) {
        if (rc != RK_ECONFIG && rc != -ENOMEM)
            abort();
        if (rc == RK_ECONFIG && err[0] == '\0')
            abort(); /* every refusal names a reason */
        return 0;
    }
    node_config_validate(&c, err, sizeof(err));
    static char dump[1 << 20];
    int n = node_config_dump(&c, dump, sizeof(dump));
    if (n < 0 || (size_t)n >= sizeof(dump))
        abort(); /* the largest possible dump fits: every string is bounded */
    struct node_config d = NODE_CONFIG_INIT;
    rc = node_config_parse_yaml(&d, dump, (size_t)n, "dump", err, sizeof(err));
    if (rc == -ENOMEM)
        return 0;
    if (rc < 0) {
        fprintf(stderr, "fuzz_node_config: the dump does not parse: %s\n%s",
                err, dump);
        abort();
    }
    same_config(&c, &d, dump);
    return 0;
}
