#!/bin/sh
# tls.sh BUILD [RUNS] - issue 27's TLS figures, side by side in one run:
# a 3-node RF-3 cluster on 127.0.0.11-13 with certificates from
# tests/tls/make-certs.sh, measured by resp.sh in plaintext RESP and then
# RESP in TLS (the ratio to redis-server in each); then the same cluster
# started again with internode_tls: required and measured in plaintext
# RESP at -P 16 (against the first run's figures: internode TLS's cost).
# Run it alone on the machine, in a network namespace of its own:
#   unshare --net sh -c 'ip link set lo up && tools/bench/tls.sh build 3'
# Figures: docs/performance.md, "TLS on a quiet machine".
set -u
build=${1:?usage: tls.sh BUILD [RUNS]}
runs=${2:-3}
root=$(cd "$(dirname "$0")/../.." && pwd)
bin=$(cd "$build" && pwd)/bin
dir=$(mktemp -d /tmp/ringkv-tls-bench.XXXXXX)
sh "$root/tests/tls/make-certs.sh" "$dir/pki" n1=127.0.0.11 n2=127.0.0.12 \
    n3=127.0.0.13 >/dev/null
head -c 32 /dev/urandom | base64 >"$dir/secret"
pids=""

start() { # internode_tls: off or required
    pids=""
    for i in 1 2 3; do
        "$bin/ringkvd" --node_name=n$i --listen_address=127.0.0.1$i \
            --data_dir="$dir/n$i-$1" --log_file="$dir/n$i-$1.log" \
            --seeds=127.0.0.11,127.0.0.12 --replication=dc1:3 \
            --cluster_secret_file="$dir/secret" \
            --tls_cert_file="$dir/pki/n$i.crt" \
            --tls_key_file="$dir/pki/n$i.key" \
            --tls_ca_file="$dir/pki/ca.crt" --internode_tls="$1" \
            --tls_port=6380 --metrics_port=0 &
        pids="$pids${pids:+,}$!"
    done
    for _ in $(seq 1 120); do
        [ "$("$bin/ringkv" -h 127.0.0.11 status 2>/dev/null |
            grep -c '^UN')" = 3 ] && return 0
        sleep 1
    done
    echo "tls.sh: the cluster did not converge (logs in $dir)" >&2
    exit 1
}

stop() {
    for p in $(echo "$pids" | tr , ' '); do kill "$p"; done
    wait
}

start off
echo "== internode plaintext, RESP plaintext"
"$root/tools/bench/resp.sh" -n 100000 --runs "$runs" --pids "$pids" \
    127.0.0.11:6379
echo "== internode plaintext, RESP in TLS"
"$root/tools/bench/resp.sh" -n 100000 --runs "$runs" --pids "$pids" \
    --tls "$dir/pki/ca.crt" "$dir/pki/n1.crt" "$dir/pki/n1.key" \
    127.0.0.11:6380
stop
start required
echo "== internode mutual TLS, RESP plaintext"
"$root/tools/bench/resp.sh" -n 100000 --runs "$runs" -P 16 --pids "$pids" \
    127.0.0.11:6379
stop
rm -rf "$dir"
