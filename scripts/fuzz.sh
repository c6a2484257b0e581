#!/usr/bin/env bash
# Runs every libFuzzer target of a build for a while, starting from (and
# adding new finds to) its corpus under tests/fuzz/corpus/<name>/.
set -euo pipefail
build=$1
seconds=${2:-60}
root=$(cd "$(dirname "$0")/.." && pwd)
for bin in "$build"/bin/fuzz_*; do
    case "$bin" in *_replay) continue ;; esac
    name=$(basename "$bin"); name=${name#fuzz_}
    mkdir -p "$root/tests/fuzz/corpus/$name"
    echo "== fuzz $name for ${seconds}s"
    "$bin" -max_total_time="$seconds" -max_len=65536 \
        "$root/tests/fuzz/corpus/$name"
done
