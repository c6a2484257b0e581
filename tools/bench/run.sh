#!/usr/bin/env bash
# run.sh BUILD - every benchmark, one after the other (make bench).
# Each prints its own side-by-side figures; none is a test.
set -euo pipefail
build=${1:-build}
root=$(cd "$(dirname "$0")/../.." && pwd)
cd "$root"
echo "== ring: preference-list lookup vs jump consistent hash"
"$build/bin/ringkv-sim" bench-lookup --nodes 100 --tokens 256 --rf 3
echo "== storage: group commit, periodic and reads vs raw LMDB"
"$build/bin/bench-storage"
echo "== RESP: redis-benchmark against a 3-node demo cluster and redis-server"
"$root/tools/bench/resp.sh" --demo "$build" 127.0.0.11:6379
echo "== streaming: join, cleanup, decommission vs cp of the data directory"
python3 "$root/tools/bench/stream.py" --build "$build"
echo "== repair: comparing and exchanging what differs vs cp of the data directory"
python3 "$root/tools/bench/repair.py" --build "$build"
