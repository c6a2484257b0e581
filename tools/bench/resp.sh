#!/usr/bin/env bash
# resp.sh - redis-benchmark against ringkv's RESP port and a redis-server,
# side by side in one run (issue 6).
#
# Starts its own redis-server (no persistence) on 127.0.0.1:$REDIS_PORT,
# then for each pipeline depth (-P 1 and -P 16) runs
#   redis-benchmark -t set,get -n N -c 50 -d 100 -r 100000 -P <p> --csv
# against redis-server and, if an address is given, against ringkv, one
# right after the other, and prints ops/s, p50 and p99 (ms) of both and the
# ratios ringkv/redis. With --runs K every measurement is repeated K times
# (alternating targets) and medians are printed. Each op runs as its own
# redis-benchmark (-t set, then -t get), and the CPU time (utime + stime
# from /proc) its server used during it is printed per operation: the one
# redis-server, and ringkv's nodes (with --demo the demo's three nodes,
# otherwise the pids given with --pids). The count goes on after the
# benchmark until the servers have been idle for a second (at most 15 s):
# work a run leaves behind (ringkv applying its memtable to LMDB after the
# SETs, up to a third of their CPU) is that run's, not the next one's.
# Before 2026-12-07 it was counted in the GET run that followed.
# The memtable's apply comes on a ten-second timer, which the idle second
# does not wait for: with --metrics (the demo's three nodes by default with
# --demo) each ringkv run also waits, up to 15 s, until every node's
# ringkv_memtable_writes gauge reads 0, so a SET run is billed for the
# apply of its writes. Until 2026-12-07 (second change) that apply landed
# in the GET run after it in about one run of three: 360 ms of the nodes'
# CPU after a 200,000-SET run, 1.8 us per GET of the next run.
#
# ringkv is not started here unless asked: start a cluster first (`make
# demo` starts a local 3-node cluster) and pass the RESP address of one
# node, e.g.
#   tools/bench/resp.sh 127.0.0.11:6379
# or let the script run scripts/demo.sh start/stop around the benchmark:
#   tools/bench/resp.sh --demo build 127.0.0.11:6379
# Without an address only redis-server is measured (useful to check this
# script and the machine).
#
# With --tls CA CERT KEY both sides speak TLS: redis-server listens on
# --tls-port only (with CERT/KEY, no client certificates asked), every
# redis-benchmark gets --tls --cacert CA, and the ringkv address given is
# a node's tls_port (docs/operations.md, "TLS"). Run once without and once
# with it to compare the ratios to redis in plaintext and in TLS. Needs redis-server, redis-benchmark (Debian's
# redis-server and redis-tools, 7.0 here: --csv has latency columns) and
# python3 for the table.
set -euo pipefail

usage() {
    cat <<EOF
usage: $0 [options] [RINGKV_HOST:PORT]
  -n N            requests per benchmark (default 200000)
  -c CLIENTS      parallel connections (default 50)
  -d BYTES        value size (default 100)
  -r KEYSPACE     random keys in [0, KEYSPACE) (default 100000)
  -P LIST         pipeline depths, comma separated (default 1,16)
  --runs K        repeat each measurement K times, print medians (default 1)
  --redis-port P  port of the redis-server started here (default 6390)
  --demo BUILD    start the local cluster first with scripts/demo.sh start
                  BUILD (and stop it at the end); still pass the address
  --pids LIST     comma-separated pids of the ringkv nodes whose CPU time
                  is counted (with --demo: the demo's nodes)
  --metrics LIST  comma-separated HOST:PORT of the nodes' metrics (HTTP)
                  endpoints: each ringkv run waits (at most 15 s) until
                  their memtables are applied (with --demo: the demo's)
  --tls CA CERT KEY
                  TLS on both sides (CA verifies both servers; CERT and
                  KEY are redis-server's); the address is ringkv's tls_port
EOF
    exit 2
}

N=200000
CLIENTS=50
SIZE=100
KEYSPACE=100000
PIPES=1,16
RUNS=1
REDIS_PORT=6390
RINGKV=""
DEMO=""
TLS_CA=""
PIDS=""
METRICS=""
while [ $# -gt 0 ]; do
    case "$1" in
    -n) N=$2; shift 2 ;;
    -c) CLIENTS=$2; shift 2 ;;
    -d) SIZE=$2; shift 2 ;;
    -r) KEYSPACE=$2; shift 2 ;;
    -P) PIPES=$2; shift 2 ;;
    --runs) RUNS=$2; shift 2 ;;
    --redis-port) REDIS_PORT=$2; shift 2 ;;
    --demo) DEMO=$2; shift 2 ;;
    --pids) PIDS=$2; shift 2 ;;
    --metrics) METRICS=$2; shift 2 ;;
    --tls) TLS_CA=$2; TLS_CERT=$3; TLS_KEY=$4; shift 4 ;;
    -h | --help) usage ;;
    -*) usage ;;
    *) RINGKV=$1; shift ;;
    esac
done

for tool in redis-server redis-benchmark redis-cli python3; do
    command -v "$tool" >/dev/null || {
        echo "$0: $tool not found (scripts/install-deps.sh installs it)" >&2
        exit 1
    }
done
if [ -n "$RINGKV" ]; then
    RINGKV_HOST=${RINGKV%:*}
    RINGKV_PORT=${RINGKV##*:}
    if [ "$RINGKV_HOST" = "$RINGKV" ] || [ -z "$RINGKV_PORT" ]; then
        echo "$0: ringkv address must be HOST:PORT, got '$RINGKV'" >&2
        exit 2
    fi
fi

root=$(cd "$(dirname "$0")/../.." && pwd)
if [ -n "$DEMO" ]; then
    [ -n "$RINGKV" ] || {
        echo "$0: --demo needs the RESP address of one node too" >&2
        exit 2
    }
    [ -x "$root/scripts/demo.sh" ] || {
        echo "$0: $root/scripts/demo.sh does not exist (yet)" >&2
        exit 1
    }
fi

# every redis-cli / redis-benchmark call gets these (TLS)
TLSARGS=()
REDIS_LISTEN=(--port "$REDIS_PORT")
if [ -n "$TLS_CA" ]; then
    TLSARGS=(--tls --cacert "$TLS_CA")
    REDIS_LISTEN=(--port 0 --tls-port "$REDIS_PORT" --tls-cert-file "$TLS_CERT"
        --tls-key-file "$TLS_KEY" --tls-ca-cert-file "$TLS_CA"
        --tls-auth-clients no)
fi

work=$(mktemp -d /tmp/ringkv-bench-resp.XXXXXX)
redis_pid=""
demo_started=""
cleanup() {
    if [ -n "$demo_started" ]; then
        "$root/scripts/demo.sh" stop "$DEMO" >/dev/null 2>&1 || true
    fi
    if [ -n "$redis_pid" ]; then
        kill "$redis_pid" 2>/dev/null || true
        wait "$redis_pid" 2>/dev/null || true
    fi
    rm -rf "$work"
}
trap cleanup EXIT INT TERM

# --- redis-server: no RDB, no AOF, its own directory and port -------------
if redis-cli "${TLSARGS[@]}" -h 127.0.0.1 -p "$REDIS_PORT" ping >/dev/null 2>&1; then
    echo "$0: something already answers on 127.0.0.1:$REDIS_PORT;" \
        "choose another --redis-port" >&2
    exit 1
fi
redis-server --bind 127.0.0.1 "${REDIS_LISTEN[@]}" --save "" \
    --appendonly no --dir "$work" --daemonize no --logfile "$work/redis.log" &
redis_pid=$!
for _ in $(seq 50); do
    redis-cli "${TLSARGS[@]}" -h 127.0.0.1 -p "$REDIS_PORT" ping >/dev/null 2>&1 && break
    sleep 0.1
done
redis-cli "${TLSARGS[@]}" -h 127.0.0.1 -p "$REDIS_PORT" ping >/dev/null || {
    echo "$0: redis-server did not start; log:" >&2
    cat "$work/redis.log" >&2
    exit 1
}
if [ -n "$DEMO" ]; then
    "$root/scripts/demo.sh" start "$DEMO"
    demo_started=1
    for _ in $(seq 100); do
        redis-cli "${TLSARGS[@]}" -h "$RINGKV_HOST" -p "$RINGKV_PORT" ping >/dev/null 2>&1 &&
            break
        sleep 0.2
    done
    # after the demo's repair after join (scripts/demo.sh settle)
    "$root/scripts/demo.sh" settle "$DEMO"
fi
if [ -n "$RINGKV" ] &&
    ! redis-cli "${TLSARGS[@]}" -h "$RINGKV_HOST" -p "$RINGKV_PORT" ping >/dev/null 2>&1; then
    echo "$0: ringkv does not answer PING at $RINGKV (start it with" \
        "'make demo')" >&2
    exit 1
fi

# --- measurements ----------------------------------------------------------
# results.tsv: target pipeline run op rps p50 p99 failed cpu_us_per_op
# redis-benchmark 7 stops at the first error reply ("Error from server: ..."),
# so a run with any error has no result line and counts as failed.
results="$work/results.tsv"
: >"$results"
if [ -n "$DEMO" ] && [ -z "$PIDS" ]; then
    PIDS=$(cat "$root"/run/demo/node*.pid | paste -sd, -)
fi
if [ -n "$DEMO" ] && [ -z "$METRICS" ]; then
    METRICS=127.0.0.11:9180,127.0.0.12:9180,127.0.0.13:9180
fi
cpu_ticks() { # comma-separated pids -> utime + stime of all, in ticks
    local t=0 p
    for p in ${1//,/ }; do
        [ -r "/proc/$p/stat" ] || continue
        t=$((t + $(awk '{ print $14 + $15 }' "/proc/$p/stat")))
    done
    echo "$t"
}
hz=$(getconf CLK_TCK)
settle() { # pids: until they have used at most a tick in each of two
    local a b quiet=0 i # half-seconds in a row, at most 15 s
    a=$(cpu_ticks "$1")
    for i in $(seq 30); do
        sleep 0.5
        b=$(cpu_ticks "$1")
        if [ $((b - a)) -le 1 ]; then quiet=$((quiet + 1)); else quiet=0; fi
        [ "$quiet" -ge 2 ] && return
        a=$b
    done
}
applied() { # metrics addresses: until no node's memtable holds a write
    [ -n "$1" ] || return 0
    python3 - "$1" <<'PY'
import sys, time, urllib.request
addrs = sys.argv[1].split(",")
def held(a):
    try:
        with urllib.request.urlopen("http://%s/metrics" % a, timeout=2) as r:
            for l in r.read().decode().splitlines():
                if l.startswith("ringkv_memtable_writes "):
                    return int(float(l.split()[1]))
    except OSError:
        pass
    return 0  # no answer: nothing to wait for
end = time.monotonic() + 15  # a node at 0 is not asked again: each
while addrs and time.monotonic() < end:  # answer costs it ~0.25 ms
    addrs = [a for a in addrs if held(a) > 0]
    if addrs:
        time.sleep(0.5)
PY
}
bench() { # target host port pipeline run pids [metrics]
    local out rc op t0 t1
    for op in SET GET; do
        out="$work/out.$1.$4.$5.$op"
        rc=0
        t0=$(cpu_ticks "$6")
        redis-benchmark "${TLSARGS[@]}" -h "$2" -p "$3" -t "${op,,}" -n "$N" \
            -c "$CLIENTS" -d "$SIZE" -r "$KEYSPACE" -P "$4" --csv >"$out" 2>&1 ||
            rc=$?
        applied "${7:-}"
        settle "$6"
        t1=$(cpu_ticks "$6")
        # "SET","78125.00","0.334","0.104","0.319","0.463","0.591","1.207"
        # test, rps, avg, min, p50, p95, p99, max
        if [ "$rc" = 0 ] && grep -qE "^\"$op\"," "$out"; then
            grep -E "^\"$op\"," "$out" | tr -d '"' |
                awk -F, -v t="$1" -v p="$4" -v r="$5" \
                    -v c="$(awk -v d="$((t1 - t0))" -v hz="$hz" -v n="$N" \
                        'BEGIN { printf "%.2f", d * 1e6 / hz / n }')" \
                    '{print t "\t" p "\t" r "\t" $1 "\t" $2 "\t" $5 "\t" $7 "\t0\t" c}' \
                    >>"$results"
        else
            echo "$0: $1 -P $4 run $5: $op failed (exit $rc):" >&2
            grep -v '^"' "$out" | head -3 >&2
            printf '%s\t%s\t%s\t%s\t0\t0\t0\t1\t0\n' "$1" "$4" "$5" "$op" \
                >>"$results"
        fi
    done
}

echo "redis-benchmark -t set,get -n $N -c $CLIENTS -d $SIZE -r $KEYSPACE" \
    "-P {${PIPES}} x $RUNS run(s)"
echo "redis-server 127.0.0.1:$REDIS_PORT (no persistence)" \
    "${RINGKV:+vs ringkv $RINGKV}${TLS_CA:+, both in TLS}"
for p in ${PIPES//,/ }; do
    for run in $(seq "$RUNS"); do
        bench redis 127.0.0.1 "$REDIS_PORT" "$p" "$run" "$redis_pid"
        if [ -n "$RINGKV" ]; then
            bench ringkv "$RINGKV_HOST" "$RINGKV_PORT" "$p" "$run" "$PIDS" \
                "$METRICS"
        fi
    done
done

# --- table -----------------------------------------------------------------
python3 - "$results" "$RUNS" <<'EOF'
import sys
from statistics import median

rows = [l.rstrip("\n").split("\t") for l in open(sys.argv[1]) if l.strip()]
runs = int(sys.argv[2])
data = {}
for t, p, r, op, rps, p50, p99, err, cpu in rows:
    d = data.setdefault((t, int(p), op), {"rps": [], "p50": [], "p99": [],
                                          "cpu": [], "err": 0})
    if int(err):
        d["err"] += 1
        continue
    d["rps"].append(float(rps))
    d["p50"].append(float(p50))
    d["p99"].append(float(p99))
    d["cpu"].append(float(cpu))

def cell(key):
    d = data.get(key)
    if d is None or not d["rps"]:
        return None, "%10s %8s %8s %7s" % ("-", "-", "-", "-")
    v = (median(d["rps"]), median(d["p50"]), median(d["p99"]),
         median(d["cpu"]))
    return v, "%10.0f %8.3f %8.3f %7.2f" % v

what = "median of %d" % runs if runs > 1 else "one run"
print()
print("%-4s %-4s | %-36s | %-36s | %s" % ("", "", "redis-server (" + what + ")",
      "ringkv", "ringkv/redis"))
print("%-4s %-4s | %10s %8s %8s %7s | %10s %8s %8s %7s | %6s %6s %6s %6s" %
      ("-P", "op", "ops/s", "p50 ms", "p99 ms", "us CPU", "ops/s", "p50 ms",
       "p99 ms", "us CPU", "ops/s", "p50", "p99", "CPU"))
errors = {}
for p in sorted({k[1] for k in data}):
    for op in ("SET", "GET"):
        rv, rs = cell(("redis", p, op))
        kv, ks = cell(("ringkv", p, op))
        ratio = ""
        if rv and kv and rv[0] > 0:
            ratio = "%6.2f %6s %6s %6s" % (
                kv[0] / rv[0],
                "%.2f" % (kv[1] / rv[1]) if rv[1] > 0 else "-",
                "%.2f" % (kv[2] / rv[2]) if rv[2] > 0 else "-",
                "%.2f" % (kv[3] / rv[3]) if rv[3] > 0 else "-")
        print("%-4s %-4s | %s | %s | %s" % (p, op, rs, ks, ratio))
for (t, p, op), d in sorted(data.items()):
    errors[t] = errors.get(t, 0) + d["err"]
print()
print("failed benchmarks (an error reply stops redis-benchmark): " +
      ", ".join("%s %d" % (t, n) for t, n in sorted(errors.items())))
sys.exit(1 if any(errors.values()) else 0)
EOF
