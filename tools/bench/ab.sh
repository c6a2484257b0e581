#!/usr/bin/env bash
# ab.sh - a paired A/B of two ringkv variants on the local demo cluster.
#
#   tools/bench/ab.sh ROUNDS LABEL:BUILD[:ENV=VALUE ...] LABEL:BUILD[:...]
#
# Each round starts a fresh demo cluster (scripts/demo.sh, run/demo wiped)
# with each variant in turn -- BUILD is a build directory under the
# repository root (a symlink to another worktree's build works), ENV
# settings are added to the nodes' environment (RINGKV_<KEY>=... sets a
# config key) -- runs
#   redis-benchmark -h 127.0.0.11 -t $OP -n $N -c 50 -d 100 -r 100000 -P $P
# (OP=set, N=200000, P=1 unless set in the environment), and prints that
# variant's ops/s (of the last test in OP), the ratio of each variant to
# the round's first, and the CPU time the three nodes used (utime + stime
# from /proc) per request sent. The variants alternate, so a slow spell of
# a shared machine falls on both: compare the ratios, not the figures.
# Stops any demo cluster first, and leaves none running.
set -euo pipefail

usage() {
    sed -n 4,17p "$0" >&2
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
        t0=$(cpu_ticks)
        rps=$(redis-benchmark -h 127.0.0.11 -t "$OP" -n "$N" -c 50 -d 100 \
            -r 100000 -P "$P" --csv 2>/dev/null | tail -1 | cut -d, -f2 |
            tr -d '"')
        t1=$(cpu_ticks)
        scripts/demo.sh stop "$build" >/dev/null 2>&1 || true
        [ -n "$first" ] || first=$rps
        awk -v r="$r" -v l="$label" -v x="$rps" -v f="$first" \
            -v t="$((t1 - t0))" -v hz="$(getconf CLK_TCK)" -v n="$((N * ntests))" \
            'BEGIN { printf "round %s %-10s %10.0f ops/s  %.3fx  %6.1f us CPU/op\n", r, l, x, (f > 0 ? x / f : 0), t * 1e6 / hz / n }'
    done
done
