#!/usr/bin/env bash
# wire.sh - instructions per encode and decode of wire/'s hot messages,
# two builds side by side, counted by callgrind.
#
#   tools/bench/wire.sh LABEL:BUILD [LABEL:BUILD ...] [-n ITERATIONS]
#
# Runs each BUILD's bin/bench-wire (tools/bench/wire/main.c) under
# `valgrind --tool=callgrind` for ITERATIONS (default 100000) of each
# message and direction, and prints, per message and direction, the
# inclusive instructions of its bench function divided by ITERATIONS, then
# the whole run's total (Ir, the loop's own few instructions included).
# Instruction counts do not move with the machine's load, so one run is
# enough. Ratios are against the first build.
set -euo pipefail

usage() {
    sed -n 4,13p "$0" >&2
    exit 2
}

n=100000
builds=()
while [ $# -gt 0 ]; do
    case $1 in
    -n) n=$2; shift 2 ;;
    *:*) builds+=("$1"); shift ;;
    *) usage ;;
    esac
done
[ ${#builds[@]} -ge 1 ] || usage
command -v valgrind >/dev/null || {
    echo "$0: valgrind not found" >&2
    exit 1
}

tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
fns="write_encode write_decode write_ack_encode write_ack_decode
read_encode read_decode read_resp_encode read_resp_decode
put_req_encode put_req_decode get_req_encode get_req_decode
put_resp_encode put_resp_decode get_resp_encode get_resp_decode"

labels=()
for b in "${builds[@]}"; do
    label=${b%%:*}
    dir=${b#*:}
    bin=$dir/bin/bench-wire
    [ -x "$bin" ] || {
        echo "$0: $bin not found (cmake --build $dir --target bench-wire)" >&2
        exit 1
    }
    labels+=("$label")
    out=$tmp/$label.out
    valgrind --tool=callgrind --callgrind-out-file="$out" "$bin" "$n" \
        >"$tmp/$label.log" 2>&1 || {
        cat "$tmp/$label.log" >&2
        exit 1
    }
    callgrind_annotate --inclusive=yes --threshold=100 "$out" \
        >"$tmp/$label.txt" 2>/dev/null
    # "Ir (pct)  file:function [binary]": each bench function's inclusive Ir
    for f in $fns; do
        ir=$(grep -E ":$f( |\\.|\$)" "$tmp/$label.txt" | head -1 |
            awk '{ gsub(/,/, "", $1); print $1 }')
        echo "${ir:-0}" >"$tmp/$label.$f"
    done
    awk '/PROGRAM TOTALS/ { gsub(/,/, "", $1); print $1; exit }' \
        "$tmp/$label.txt" >"$tmp/$label.total"
done

printf '%-18s' "Ir per op"
for l in "${labels[@]}"; do printf ' %10s' "$l"; done
[ ${#labels[@]} -gt 1 ] && printf '  %s' "ratio to ${labels[0]}"
printf '\n'
for f in $fns; do
    printf '%-18s' "$f"
    first=$(cat "$tmp/${labels[0]}.$f")
    for l in "${labels[@]}"; do
        printf ' %10d' $(($(cat "$tmp/$l.$f") / n))
    done
    for l in "${labels[@]:1}"; do
        awk -v a="$first" -v b="$(cat "$tmp/$l.$f")" \
            'BEGIN { printf "  %.2f", a ? b / a : 0 }'
    done
    printf '\n'
done
printf '%-18s' "total (M Ir)"
for l in "${labels[@]}"; do
    printf ' %10d' $(($(cat "$tmp/$l.total") / 1000000))
done
printf '\n'
