/*
 * config.h - ringkvd's configuration: one validated struct, filled from
 * defaults, then a YAML file (cassandra.yaml-style keys), then RINGKV_<KEY>
 * environment variables, then --key=value flags, in that order.
 *
 * Every key is a scalar string at heart: the YAML reader, the environment and
 * the flags all end in node_config_set(), so a key behaves the same wherever
 * it comes from. Lists (seeds) are comma separated, maps (replication) are
 * "dc:rf,dc:rf", each item split at its last ':' (a bare number means that
 * RF in every data centre). The one exception: replication written as a
 * YAML mapping is read entry by entry (through the same checks), so quoted
 * data centre names may hold ':' and ','. The struct holds fixed-size
 * strings, so it is plain data: copy it, no _free.
 *
 * Errors name the key: every function that can fail writes a one-line
 * message into `err` ("num_tokens: expected an integer in 1..1024, got
 * 'abc'") and returns RK_ECONFIG (or -errno when a file cannot be read).
 */
#ifndef NODE_CONFIG_H
#define NODE_CONFIG_H

#include <stddef.h>
#include <stdint.h>

#include "coord/coord.h" /* enum coord_cl: the consistency levels */

#define NODE_CONFIG_STR       256 /* longest string value + 1 */
#define NODE_CONFIG_MAX_SEEDS 32
#define NODE_CONFIG_MAX_DCS   8
#define NODE_CONFIG_ERR       512 /* size callers give to `err` */

enum node_alloc { NODE_ALLOC_BALANCED = 0, NODE_ALLOC_RANDOM };

enum node_durability {
    NODE_DURABILITY_GROUP = 0, /* ack after the batch's fsync */
    NODE_DURABILITY_PERIODIC   /* ack before fsync; synced every interval */
};

/* CPU scheduling policy of every ringkvd thread (cpu_scheduling). */
enum node_cpu_sched {
    NODE_SCHED_BATCH = 0, /* SCHED_BATCH: wakeups do not preempt */
    NODE_SCHED_NORMAL     /* SCHED_OTHER, as started */
};

/* Log levels; the logger (node/log.h) uses the same numbers. */
/* client_port in TLS (tls_cert_file): off, or required (plaintext refused). */
enum node_client_tls { NODE_CLIENT_TLS_OFF = 0, NODE_CLIENT_TLS_REQUIRED };
/* internode_port in mutual TLS (tls_cert_file, tls_ca_file): off, or
 * required (a plaintext peer, or one of another CA, refused). */
enum node_internode_tls {
    NODE_INTERNODE_TLS_OFF = 0,
    NODE_INTERNODE_TLS_REQUIRED
};

enum node_log_level {
    NODE_LOG_DEBUG = 0,
    NODE_LOG_INFO,
    NODE_LOG_WARN,
    NODE_LOG_ERROR
};

struct node_config_dc {
    char name[64];
    int rf;
};

struct node_config {
    char cluster_name[NODE_CONFIG_STR];
    char cluster_secret_file[NODE_CONFIG_STR]; /* "" = derived from name */
    char node_name[NODE_CONFIG_STR];           /* "" = host name */
    char datacenter[64];
    char rack[64];
    char listen_address[NODE_CONFIG_STR];
    char advertise_address[NODE_CONFIG_STR]; /* "" = listen_address */
    int nseeds;
    char seeds[NODE_CONFIG_MAX_SEEDS][NODE_CONFIG_STR]; /* host[:port] */
    int gossip_port;
    int internode_port;
    int client_port;
    int resp_port;    /* 0 = off */
    int tls_port;     /* RESP in TLS, with tls_cert_file; 0 = off */
    int metrics_port; /* 0 = off */
    char data_dir[NODE_CONFIG_STR];
    int num_tokens;
    enum node_alloc token_allocation;
    double weight;
    int ndcs;
    struct node_config_dc replication[NODE_CONFIG_MAX_DCS];
    enum coord_cl default_consistency;
    int auto_bootstrap;
    int join_ring;                 /* 0: a fresh node waits for `ringkv join` */
    char replace[NODE_CONFIG_STR]; /* "": none; a dead node's name: take its
                                      tokens and stream its ranges in */
    enum node_durability durability;
    enum node_cpu_sched cpu_scheduling;
    int periodic_sync_ms;
    int log_direct_io; /* commit log with O_DIRECT where it works */
    int read_timeout_ms;
    int write_timeout_ms;
    int connect_timeout_ms;
    int gossip_interval_ms;
    int ring_delay_ms; /* a fresh node listens at least this long */
    double phi_convict_threshold;
    int failure_probes;       /* the probe detector (gossip/probe.c) */
    int suspicion_timeout_ms; /* its shortest suspicion; 0: gossip interval */
    int hinted_handoff;       /* store hints for DOWN replicas */
    int64_t max_hint_window_ms;
    int64_t gc_grace_seconds;
    int max_clock_drift_ms; /* refuse timestamps this far ahead; 0: off */
    int memtable_mb;        /* committed writes kept in memory before applied */
    int read_cache_mb;      /* stored records of keys read recently; 0: none */
    int disk_reserve_mb;    /* refuse writes with less free on the disk */
    int auto_compact_pct;   /* compact a range at this % new keys; -1: never */
    int auto_cleanup_s; /* clean up this long after the ring settled; 0: no */
    int repair_after_join;       /* a streamed join repairs its ranges after */
    int64_t repair_interval_s;   /* each arc repaired this often; 0: never */
    int64_t purge_interval_s;    /* a purge cycle this often; 0: never */
    int stream_throughput_mb;    /* MiB/s a node streams in or out; 0: no cap */
    int stream_max_ranges;       /* a join's ranges pulled at once... */
    int stream_donor_max_ranges; /* ...and from one donor */
    int stall_warning_s;     /* a long operation without progress this long is
                                reported stalled (streaming/stall.c) */
    int max_inflight;        /* admission control: requests in flight */
    int max_pipeline;        /* per client connection */
    int max_clients;         /* client connections, native and RESP */
    int max_input_buffer_mb; /* all client input buffers together */
    int client_frame_timeout_s;        /* part of a request, no byte: close */
    char requirepass[NODE_CONFIG_STR]; /* "" = no password */
    char requirepass_file[NODE_CONFIG_STR];    /* or read from this file */
    char admin_password[NODE_CONFIG_STR];      /* "" = requirepass's */
    char admin_password_file[NODE_CONFIG_STR]; /* or read from this file */
    char metrics_password[NODE_CONFIG_STR]; /* /metrics basic auth; "": open */
    char metrics_password_file[NODE_CONFIG_STR];
    int auth_fail_delay_max_ms; /* a failed AUTH's answer waits at most */
    enum node_log_level log_level;
    char log_file[NODE_CONFIG_STR];      /* "" = stderr */
    char tls_cert_file[NODE_CONFIG_STR]; /* "" = no TLS */
    char tls_key_file[NODE_CONFIG_STR];
    enum node_client_tls client_tls;       /* client_port in TLS */
    enum node_client_tls metrics_tls;      /* metrics_port in TLS (HTTPS) */
    char metrics_address[NODE_CONFIG_STR]; /* metrics_port's; "" = listen */
    char tls_ca_file[NODE_CONFIG_STR];     /* the cluster's CA (internode) */
    enum node_internode_tls internode_tls; /* internode_port in mutual TLS */
};

/* The defaults, as documented in docs/config.md. */
#define NODE_CONFIG_INIT                                                       \
    {                                                                          \
        .cluster_name = "ringkv", .datacenter = "dc1", .rack = "rack1",        \
        .listen_address = "127.0.0.1", .gossip_port = 7000,                    \
        .internode_port = 7001, .client_port = 7380, .resp_port = 6379,        \
        .tls_port = 6380, .metrics_port = 9180, .data_dir = "./data",          \
        .num_tokens = 16, .token_allocation = NODE_ALLOC_BALANCED,             \
        .weight = 1.0, .ndcs = 1, .replication = {{"dc1", 3}},                 \
        .default_consistency = COORD_CL_QUORUM, .auto_bootstrap = 1,           \
        .join_ring = 1, .durability = NODE_DURABILITY_GROUP,                   \
        .cpu_scheduling = NODE_SCHED_BATCH, .periodic_sync_ms = 1000,          \
        .log_direct_io = 1, .read_timeout_ms = 2000, .write_timeout_ms = 2000, \
        .connect_timeout_ms = 1000, .gossip_interval_ms = 1000,                \
        .ring_delay_ms = 2000, .phi_convict_threshold = 8.0,                   \
        .failure_probes = 1, .hinted_handoff = 1,                              \
        .max_hint_window_ms = 3 * 3600 * 1000LL,                               \
        .gc_grace_seconds = 10 * 86400LL, .max_clock_drift_ms = 500,           \
        .memtable_mb = 16, .read_cache_mb = 64, .disk_reserve_mb = 256,        \
        .auto_compact_pct = 25, .auto_cleanup_s = 3600, .max_inflight = 10000, \
        .repair_after_join = 1, .repair_interval_s = 3 * 86400LL,              \
        .purge_interval_s = 3600, .max_pipeline = 1024, .stall_warning_s = 30, \
        .max_clients = 10000, .stream_max_ranges = 12,                         \
        .stream_donor_max_ranges = 2, .max_input_buffer_mb = 256,              \
        .client_frame_timeout_s = 30, .auth_fail_delay_max_ms = 5000,          \
        .log_level = NODE_LOG_INFO,                                            \
    }

/* Set one key from its string form. Unknown keys and bad values are errors
 * naming the key. Keys are matched case-insensitively, '-' equals '_'. */
int node_config_set(struct node_config *c,
                    const char *key,
                    const char *value,
                    char *err,
                    size_t errlen);

/* Apply a YAML document (a top-level mapping). Scalars are set as they are,
 * sequences are joined with ',' and mappings of scalars become "k:v,k:v".
 * `origin` names the source in messages (a file name). */
int node_config_parse_yaml(struct node_config *c,
                           const char *text,
                           size_t len,
                           const char *origin,
                           char *err,
                           size_t errlen);

/* Read and apply a YAML file. -errno if it cannot be read. */
int node_config_load_file(struct node_config *c,
                          const char *path,
                          char *err,
                          size_t errlen);

/* Apply every RINGKV_<KEY>=value of `envp` (NULL-terminated, as environ)
 * whose <KEY> is a configuration key. Other RINGKV_* names (RINGKV_CONFIG,
 * the file name; variables of the CLI and tools) are skipped. */
int node_config_apply_env(struct node_config *c,
                          char *const *envp,
                          char *err,
                          size_t errlen);

/* Apply --key=value (or --key value) flags. argv[0] is skipped; flags the
 * program handles itself (--config, --check-config, --help) are skipped
 * too. Anything that is not a flag is an error. */
int node_config_apply_args(struct node_config *c,
                           int argc,
                           char *const *argv,
                           char *err,
                           size_t errlen);

/* Check the whole struct for consistency (ports distinct, replication for
 * this node's data centre, ...). Fills empty node_name / advertise_address
 * is the caller's job (they depend on the host); this only checks. */
int node_config_validate(const struct node_config *c, char *err, size_t errlen);

/* Find the config file name among flags (--config=F / --config F / -c F)
 * or RINGKV_CONFIG; NULL if none. Borrowed from argv or the environment. */
const char *
node_config_file_arg(int argc, char *const *argv, char *const *envp);

/* Replication factor configured for `dc`, 0 if none. */
int node_config_rf(const struct node_config *c, const char *dc);
/* The same in a setting dcs[0..n) ("*" counts for all), as a replication
 * change holds one apart from the config (node/replication.h). */
int node_config_dcs_rf(const struct node_config_dc *dcs, int n, const char *dc);

/* Names and parsing of consistency levels ("QUORUM", case-insensitive). */
const char *node_cl_name(enum coord_cl cl);
int node_cl_parse(enum coord_cl *out, const char *s);

/* Write the effective configuration as YAML to `buf` (for --check-config and
 * logs); the secret and the password are shown as "<set>". Returns the
 * length it needed, like snprintf. */
int node_config_dump(const struct node_config *c, char *buf, size_t len);

#endif
