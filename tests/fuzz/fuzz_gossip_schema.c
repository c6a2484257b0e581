/*
 * fuzz_gossip_schema.c - the readers of the SCHEMA value a peer gossips
 * (node/ring_view.h: its replication, ports, flags and the node it
 * replaces) on arbitrary bytes: none may crash or read past the bytes; the
 * replaced node's name it gives must be shorter than the buffer, hold no
 * space, and follow " replacing=" in the value; the replication part must
 * lie within the value. The replication setting's version (" replv=",
 * node/replication.h) and the setting itself, as a node adopting it
 * parses it: a parsed setting holds 1..NODE_CONFIG_MAX_DCS data centres
 * of RF 1..15 and formats back to text that parses to the same.
 */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "common/rk.h"
#include "gossip/gossip.h"
#include "node/replication.h"
#include "node/ring_view.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    /* a copy of exactly size bytes, so ASan sees any read past them */
    uint8_t *v = malloc(size ? size : 1);
    if (!v)
        return 0;
    if (size)
        memcpy(v, data, size);
    struct rk_slice schema = RK_SLICE(v, size);
    char name[GOSSIP_NAME_MAX + 1];
    node__schema_replacing(name, sizeof(name), schema);
    size_t l = strlen(name);
    if (l >= sizeof(name) || strchr(name, ' '))
        abort();
    if (l) {
        static const char key[] = " replacing=";
        size_t k = sizeof(key) - 1;
        int found = 0;
        for (size_t i = 0; i + k + l <= size && !found; i++)
            found = memcmp(v + i, key, k) == 0 &&
                    memcmp(v + i + k, name, l) == 0 &&
                    (i + k + l == size || v[i + k + l] == ' ');
        if (!found)
            abort();
    }
    struct rk_slice repl = node__schema_repl(schema);
    if (repl.len && ((const uint8_t *)repl.p < v ||
                     (const uint8_t *)repl.p + repl.len > v + size))
        abort();
    uint32_t port = node__schema_port(schema, "client", 7380);
    if (port == 0 || port > 65535)
        abort();
    (void)node__schema_flag(schema, "join=wait");
    (void)node_repl_schema_version(schema);
    char text[NODE_CONFIG_STR];
    if (repl.len && repl.len < sizeof(text)) {
        memcpy(text, repl.p, repl.len);
        text[repl.len] = '\0';
        struct node_config_dc dcs[NODE_CONFIG_MAX_DCS],
            again[NODE_CONFIG_MAX_DCS];
        int nd = 0, na = 0;
        char err[NODE_CONFIG_ERR], out[NODE_CONFIG_MAX_DCS * 80];
        if (!memchr(text, '\0', repl.len) &&
            node_repl_parse(dcs, &nd, text, err, sizeof(err)) == 0) {
            if (nd < 1 || nd > NODE_CONFIG_MAX_DCS)
                abort();
            for (int i = 0; i < nd; i++)
                if (dcs[i].rf < 1 || dcs[i].rf > 15)
                    abort();
            node_repl_format(out, sizeof(out), dcs, nd);
            if (node_repl_parse(again, &na, out, err, sizeof(err)) != 0 ||
                na != nd)
                abort();
        }
    }
    free(v);
    return 0;
}
