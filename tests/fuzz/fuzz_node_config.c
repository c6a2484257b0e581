/*
 * fuzz_node_config.c - ringkvd's YAML configuration reader on arbitrary
 * bytes: it must return 0 or RK_ECONFIG with a message, never crash, and a
 * configuration it accepts must dump to YAML that reads back the same way.
 */
#include <stdint.h>
#include <stdlib.h>
#include <errno.h>
#include <string.h>

#include "common/rk.h"
#include "node/config.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

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
    static char dump[16384];
    int n = node_config_dump(&c, dump, sizeof(dump));
    if (n < 0 || (size_t)n >= sizeof(dump))
        return 0;
    struct node_config d = NODE_CONFIG_INIT;
    if (node_config_parse_yaml(&d, dump, (size_t)n, "dump", err,
                               sizeof(err)) < 0)
        return 0; /* e.g. a string the dump cannot quote; not a crash */
    if (d.num_tokens != c.num_tokens || d.nseeds != c.nseeds ||
        d.gossip_port != c.gossip_port || d.ndcs != c.ndcs)
        abort();
    return 0;
}
