#!/bin/sh
# demo.sh - a local 3-node ringkv cluster for trying things out.
#
#   ./scripts/demo.sh start [BUILD_DIR]   (make demo)
#   ./scripts/demo.sh stop  [BUILD_DIR]   (make demo-stop)
#   ./scripts/demo.sh status [BUILD_DIR]
#   ./scripts/demo.sh settle [BUILD_DIR]  (benchmarks: see settle below)
#
# Nodes node1..node3 listen on 127.0.0.11..13 (one rack each, RF 3) and
# keep their data, logs and pid files under ./run/demo/. Starting twice is
# harmless (running nodes are left alone); stopping sends SIGTERM and waits
# for a clean exit. `rm -rf run/demo` after a stop forgets the cluster.
set -eu

cmd=${1:-start}
build=${2:-build}
root=$(cd "$(dirname "$0")/.." && pwd)
cd "$root"
bin="$root/$build/bin"
run="$root/run/demo"
ips="127.0.0.11 127.0.0.12 127.0.0.13"

die() {
    echo "demo: $*" >&2
    exit 1
}

pid_of() { # node -> pid if running
    f="$run/$1.pid"
    [ -f "$f" ] || return 1
    p=$(cat "$f")
    kill -0 "$p" 2>/dev/null || return 1
    echo "$p"
}

cli() {
    "$bin/ringkv" -h 127.0.0.11:7380,127.0.0.12:7380,127.0.0.13:7380 "$@"
}

start() {
    [ -x "$bin/ringkvd" ] || die "$bin/ringkvd not found: build first (make build)"
    [ -x "$bin/ringkv" ] || die "$bin/ringkv not found: build first (make build)"
    mkdir -p "$run"
    if [ ! -s "$run/secret" ]; then
        head -c 32 /dev/urandom | od -An -tx1 | tr -d ' \n' >"$run/secret"
        chmod 600 "$run/secret"
    fi
    i=0
    for ip in $ips; do
        i=$((i + 1))
        name=node$i
        if p=$(pid_of $name); then
            echo "demo: $name already running (pid $p) on $ip"
            continue
        fi
        "$bin/ringkvd" --config="$root/deploy/ringkv.yaml" --check-config \
            --cluster_name=demo --node_name=$name --listen_address=$ip \
            --seeds=127.0.0.11 --rack=rack$i --data_dir="$run/$name" \
            --cluster_secret_file="$run/secret" >/dev/null ||
            die "configuration of $name is invalid (see above)"
        nohup "$bin/ringkvd" --config="$root/deploy/ringkv.yaml" \
            --cluster_name=demo --node_name=$name --listen_address=$ip \
            --seeds=127.0.0.11 --rack=rack$i --data_dir="$run/$name" \
            --cluster_secret_file="$run/secret" \
            --log_file="$run/$name.log" \
            >"$run/$name.out" 2>&1 </dev/null &
        echo $! >"$run/$name.pid"
        echo "demo: started $name (pid $!) on $ip"
    done
    printf 'demo: waiting for the nodes to see each other'
    n=0
    while :; do
        # every node sees all three UP (a restarted node answers
        # RING_STALE until it has heard the others)
        up=0
        for ip in 127.0.0.11 127.0.0.12 127.0.0.13; do
            u=$("$bin/ringkv" -h $ip status 2>/dev/null | grep -c '^UN' || true)
            up=$((up + u))
        done
        [ "$up" = 9 ] && break
        n=$((n + 1))
        if [ $n -ge 120 ]; then
            echo
            for f in "$run"/node*.out; do tail -n 5 "$f"; done
            die "the cluster did not form in 60 s; logs: $run/node*.log"
        fi
        for nm in node1 node2 node3; do
            pid_of $nm >/dev/null ||
                { echo; tail -n 20 "$run/$nm.out" "$run/$nm.log" 2>/dev/null;
                  die "$nm exited; see $run/$nm.log"; }
        done
        printf .
        sleep 0.5
    done
    echo " ok"
    echo
    echo "\$ ringkv put greeting 'hello, ringkv'"
    cli put greeting 'hello, ringkv'
    echo "\$ ringkv get greeting"
    cli get greeting
    echo "\$ ringkv --consistency ALL put counter 1"
    cli --consistency ALL put counter 1
    echo "\$ ringkv --ttl 60 put session abc"
    cli --ttl 60 put session abc
    echo "\$ ringkv -h 127.0.0.13 get counter"
    "$bin/ringkv" -h 127.0.0.13 get counter
    echo "\$ ringkv getendpoints greeting"
    cli getendpoints greeting
    echo "\$ ringkv status"
    cli status
    if command -v redis-cli >/dev/null 2>&1; then
        echo
        echo "Redis protocol (port 6379 on every node):"
        for c in "SET user:1 alice" "GET user:1" "CONSISTENCY ALL" \
            "MGET user:1 greeting nosuchkey" "INFO ringkv"; do
            echo "\$ redis-cli -h 127.0.0.12 $c"
            # shellcheck disable=SC2086
            redis-cli -h 127.0.0.12 $c | grep -v '^#' | grep -v '^$' || true
        done
    fi
    cat <<EOT

The demo cluster is running (3 nodes, RF 3, data in $run).
Try:
  $build/bin/ringkv -h 127.0.0.11 put KEY VALUE
  $build/bin/ringkv -h 127.0.0.12 --consistency QUORUM get KEY
  $build/bin/ringkv -h 127.0.0.13 status        (also: ring, metrics, --json)
  redis-cli -h 127.0.0.11                       (GET, SET, CONSISTENCY ...)
  curl http://127.0.0.11:9180/metrics           (Prometheus text)
  kill -9 \$(cat $run/node3.pid)   then QUORUM still works, ALL is UNAVAILABLE
Logs: $run/node*.log
Stop it with: make demo-stop   (./scripts/demo.sh stop)
EOT
}

stop() {
    found=0
    for nm in node1 node2 node3; do
        if p=$(pid_of $nm); then
            found=1
            kill -TERM "$p" 2>/dev/null || true
            n=0
            while kill -0 "$p" 2>/dev/null; do
                n=$((n + 1))
                if [ $n -ge 60 ]; then
                    echo "demo: $nm did not stop in 15 s, killing it"
                    kill -KILL "$p" 2>/dev/null || true
                    break
                fi
                sleep 0.25
            done
            echo "demo: stopped $nm"
        fi
        rm -f "$run/$nm.pid"
    done
    [ $found = 1 ] || echo "demo: no demo node was running"
    [ -d "$run" ] && echo "demo: data kept in $run (rm -rf run/demo to forget it)"
    return 0
}

# node2 and node3 join node1 by streaming, and 3-4 s after they are
# NORMAL each repairs its ranges once (repair_after_join). Its scans apply
# the memtable first, so a benchmark started before it ends is billed for
# it: tools/bench's scripts wait here for both repair.done lines, at most
# 30 s (none come with repair_after_join off).
settle() {
    i=0
    while [ $i -lt 60 ]; do
        n=$(grep -l "event=repair.done" "$run/node2.log" "$run/node3.log" \
            2>/dev/null | wc -l)
        [ "$n" -ge 2 ] && return 0
        i=$((i + 1))
        sleep 0.5
    done
    echo "demo: no repair after join ended in 30 s (repair_after_join off?)" >&2
}

case $cmd in
start) start ;;
stop) stop ;;
settle) settle ;;
status)
    [ -x "$bin/ringkv" ] || die "$bin/ringkv not found"
    cli status
    ;;
*) die "usage: $0 start|stop|status|settle [BUILD_DIR]" ;;
esac
