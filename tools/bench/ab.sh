#!/usr/bin/env bash
# ab.sh - a paired A/B of two ringkv variants on the local demo cluster.
#
#   tools/bench/ab.sh ROUNDS LABEL:BUILD[:ENV=VALUE ...] LABEL:BUILD[:...]
#
# Each round starts a fresh demo cluster (scripts/demo.sh start, then
# settle: its repair after join is not billed; run/demo wiped)
# with each variant in turn -- BUILD is a build directory under the
# repository root (a symlink to another worktree's build works), ENV
# settings are added to the nodes' environment (RINGKV_<KEY>=... sets a
# config key) -- runs
#   redis-benchmark -h 127.0.0.11 -t $OP -n $N -c 50 -d $D -r 100000 -P $P
# (OP=set, N=200000, P=1, D=100 unless set in the environment), and prints
# that variant's ops/s (of the last test in OP), the ratio of each variant
# to the round's first, and the CPU time the three nodes used (utime +
# stime from /proc) per request sent. The variants alternate, so a slow
# spell of a shared machine falls on both: compare the ratios, not the
# figures. Stops any demo cluster first, and leaves none running.
#
# PRELOAD=K first writes K keys' values (redis-benchmark -t set -n K -P 16,
# the same -d and -r), waits 12 s for the memtable's apply and warms with
# one uncounted run of OP: a GET then reads what is there. REDIS=1 runs the
# same (preload, warm run, measured run) against a fresh redis-server (no
# persistence, port 6390) after each variant's and prints its CPU per
# request and ringkv's ratio to it, side by side in the round.
#   PRELOAD=300000 REDIS=1 OP=get P=16 N=400000 D=1024 \
#       tools/bench/ab.sh 3 old:build-old new:build
set -euo pipefail

usage() {
    sed -n "4,/^set -euo/{/^set -euo/d;s/^# \{0,1\}//;p}" "$0" >&2
    exit 2
}

[ $# -ge 3 ] || usage
rounds=$1
shift
root=$(cd "$(dirname "$0")/../.." && pwd)
cd "$root"
OP=${OP:-set}
N=${N:-200000}
P=${P:-1}
D=${D:-100}
PRELOAD=${PRELOAD:-0}
REDIS=${REDIS:-0}
command -v redis-benchmark >/dev/null || {
    echo "$0: redis-benchmark not found (make deps)" >&2
    exit 1
}

# utime + stime of the three nodes, in clock ticks
cpu_ticks() {
    local t=0 f
    for f in run/demo/node*.pid; do
        t=$((t + $(awk '{ print $14 + $15 }' "/proc/$(cat "$f")/stat")))
    done
    echo "$t"
}

ntests=$(($(tr -cd , <<<"$OP" | wc -c) + 1))
hz=$(getconf CLK_TCK)

# host port: the preload and the warm run, when PRELOAD > 0
prepare() {
    if [ "$PRELOAD" -gt 0 ]; then
        redis-benchmark -h "$1" -p "$2" -t set -n "$PRELOAD" -c 50 -d "$D" \
            -r 100000 -P 16 --csv >/dev/null 2>&1
        sleep 12
        redis-benchmark -h "$1" -p "$2" -t "$OP" -n "$N" -c 50 -d "$D" \
            -r 100000 -P "$P" --csv >/dev/null 2>&1
    fi
}
measure() { # host port -> ops/s of the last test in OP
    redis-benchmark -h "$1" -p "$2" -t "$OP" -n "$N" -c 50 -d "$D" \
        -r 100000 -P "$P" --csv 2>/dev/null | tail -1 | cut -d, -f2 | tr -d '"'
}
per_op() { # ticks -> us per request
    awk -v t="$1" -v hz="$hz" -v n="$((N * ntests))" \
        'BEGIN { printf "%.2f", t * 1e6 / hz / n }'
}

for r in $(seq "$rounds"); do
    first=""
    for v in "$@"; do
        IFS=: read -r label build envs <<<"$v"
        scripts/demo.sh stop "$build" >/dev/null 2>&1 || true
        rm -rf run/demo
        # shellcheck disable=SC2086 # envs is a list of NAME=VALUE words
        if ! env $envs scripts/demo.sh start "$build" >/dev/null 2>&1; then
            echo "round $r $label: the demo cluster did not start" >&2
            exit 1
        fi
        scripts/demo.sh settle "$build" # its repair after join is not ours
        prepare 127.0.0.11 6379
        t0=$(cpu_ticks)
        rps=$(measure 127.0.0.11 6379)
        t1=$(cpu_ticks)
        scripts/demo.sh stop "$build" >/dev/null 2>&1 || true
        [ -n "$first" ] || first=$rps
        us=$(per_op $((t1 - t0)))
        line=$(awk -v r="$r" -v l="$label" -v x="$rps" -v f="$first" -v u="$us" \
            'BEGIN { printf "round %s %-10s %10.0f ops/s  %.3fx  %6.2f us CPU/op", r, l, x, (f > 0 ? x / f : 0), u }')
        if [ "$REDIS" = 1 ]; then
            redis-server --port 6390 --save '' --appendonly no \
                --daemonize yes --pidfile "/tmp/ab-redis.$$.pid" >/dev/null
            sleep 0.5
            rp=$(cat "/tmp/ab-redis.$$.pid")
            prepare 127.0.0.1 6390
            t0=$(awk '{ print $14 + $15 }' "/proc/$rp/stat")
            rr=$(measure 127.0.0.1 6390)
            t1=$(awk '{ print $14 + $15 }' "/proc/$rp/stat")
            kill "$rp"
            while kill -0 "$rp" 2>/dev/null; do sleep 0.1; done
            ru=$(per_op $((t1 - t0)))
            line+=$(awk -v x="$rps" -v y="$rr" -v u="$us" -v w="$ru" \
                'BEGIN { printf "  | redis %10.0f ops/s %6.2f us CPU/op | ratio ops %.2f CPU %.2f", y, w, (y > 0 ? x / y : 0), (w > 0 ? u / w : 0) }')
        fi
        echo "$line"
    done
done
