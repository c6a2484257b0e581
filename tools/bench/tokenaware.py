#!/usr/bin/env python3
"""tokenaware.py - the native client token-aware or not, against RESP, on
one 3-node cluster in one run (issue 30, item 3).

    unshare --net sh -c 'ip link set lo up && \\
        tools/bench/tokenaware.py [--rounds 3] [--seconds 10] \\
            [--replication dc1:3] [--connections 2] [--pipeline 32] \\
            [--rb-clients 50] [--rb-pipeline 1] [--rb-requests 100000] \\
            [--keys 100000] [--settle 3] [--build build] \\
            [--json results.jsonl]'

What it does:

1. starts three ringkvd on 127.0.0.191-193 (a rack each, --replication,
   default_consistency QUORUM, group commit, RESP on 6379) and writes
   --keys values of 100 bytes through ringkv-load --preload;
2. --rounds times, one after the other in each round (so that the
   machine's noise hits all three alike), the order rotated from one
   round to the next (what a run leaves to do, e.g. redis-benchmark's
   100,000 SETs' memtable flush, is then charged to each kind in turn),
   with --settle seconds between runs:
   - `ringkv-load -h <the three> -c C -P P -d 100 -r 0.5 -k KEYS
     --consistency QUORUM -t SECONDS` (token-aware, libringkv's default),
   - the same with --no-token-aware,
   - `redis-benchmark -h 127.0.0.191 -p 6379 -t set,get -n N -c RBC
     -d 100 -r KEYS -P RBP` over RESP (its GET and SET ops/s averaged);
   before and after each it reads utime + stime of the three ringkvd from
   /proc (server CPU per operation) and each node's
   ringkv_coordinated_requests_total (requests coordinated by a replica
   of their key or by another node);
3. prints a row per run and the medians: ops/s, server CPU us per op, the
   share of requests coordinated by a replica, and the ratios of the
   token-aware client to RESP.

With RF 3 on three nodes every node is a replica of every key, so token
awareness changes nothing there but the client; --replication dc1:2 shows
what it changes when a third of the requests would reach a node that is
not a replica. Only ratios within one run mean anything on a shared
machine; the client programs share the machine's cores with the nodes.

ringkv-load runs a thread per connection: the default is 64 requests in
flight on two threads. Until 2026-12-07 it was the same 64 on eight
threads, which on a two-core machine preempted the nodes' loops seven
times as often as redis-benchmark's one thread did (24,450 against 3,270
involuntary switches over about as many operations, 490k and 500k) and
cost the native client its lead: 0.99x
RESP's ops/s at 1.04x the CPU then, 1.19-1.27x at 0.79-0.85x with two
(docs/performance.md).
"""
import argparse
import json
import os
import re
import statistics
import subprocess
import sys
import time

ROOT = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", ".."))
sys.path.insert(0, os.path.join(ROOT, "tests", "cluster"))

IPS = ["127.0.0.191", "127.0.0.192", "127.0.0.193"]
TICKS = os.sysconf("SC_CLK_TCK")
PLACED = 'ringkv_coordinated_requests_total{coordinator="%s"}'


def cpu_seconds(pid):
    with open("/proc/%d/stat" % pid) as f:
        fields = f.read().rpartition(")")[2].split()
    return (int(fields[11]) + int(fields[12])) / TICKS  # utime + stime


def placement(h, nodes):
    """(replica, other): requests the nodes coordinated so far."""
    rep = oth = 0
    for n in nodes:
        m = h.metrics_of(n.ip)
        rep += m.get(PLACED % "replica", 0)
        oth += m.get(PLACED % "other", 0)
    return rep, oth


def measured(h, nodes, run):
    """Runs run() -> (ops, ops_per_sec, extra) and adds the nodes' CPU and
    coordination counts over it."""
    pids = [n.proc.pid for n in nodes]
    p0 = placement(h, nodes)
    c0 = sum(cpu_seconds(p) for p in pids)
    ops, rate, extra = run()
    cpu = sum(cpu_seconds(p) for p in pids) - c0
    p1 = placement(h, nodes)
    rep, oth = p1[0] - p0[0], p1[1] - p0[1]
    return dict(extra, ops=ops, ops_per_sec=rate, server_cpu_s=cpu,
                cpu_us_per_op=1e6 * cpu / ops if ops else 0.0,
                by_replica=rep / (rep + oth) if rep + oth else 0.0)


def load_run(o, tool, hosts, token_aware):
    def run():
        cmd = [tool, "-h", hosts, "-c", str(o.connections), "-P",
               str(o.pipeline), "-d", "100", "-r", "0.5", "-k", str(o.keys),
               "--consistency", "QUORUM", "-t", str(o.seconds), "--json"]
        if not token_aware:
            cmd.append("--no-token-aware")
        p = subprocess.run(cmd, stdout=subprocess.PIPE, check=True)
        s = json.loads(p.stdout)
        return s["ops"], s["ops_per_sec"], {
            "errors": s["errors"], "p50_ms": s["latency_ms"]["p50"],
            "p99_ms": s["latency_ms"]["p99"],
            "to_replica": s.get("to_replica", 0),
            "fallback": s.get("fallback", 0),
            "ring_refreshes": s.get("ring_refreshes", 0),
            "connections_open": s.get("connections_open", 0)}
    return run


def resp_run(o):
    def run():
        cmd = ["redis-benchmark", "-h", IPS[0], "-p", "6379", "-t", "set,get",
               "-n", str(o.rb_requests), "-c", str(o.rb_clients), "-d", "100",
               "-r", str(o.keys), "-P", str(o.rb_pipeline), "--csv"]
        p = subprocess.run(cmd, stdout=subprocess.PIPE, check=True)
        rps = {}
        for line in p.stdout.decode().splitlines():
            f = [x.strip('"') for x in line.split(",")]
            if f[0] in ("SET", "GET"):
                rps[f[0]] = float(f[1])
        if set(rps) != {"SET", "GET"}:
            raise RuntimeError("redis-benchmark: %r" % p.stdout[-300:])
        return 2 * o.rb_requests, (rps["SET"] + rps["GET"]) / 2, {
            "set_per_sec": rps["SET"], "get_per_sec": rps["GET"]}
    return run


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--seconds", type=float, default=10)
    ap.add_argument("--replication", default="dc1:3")
    ap.add_argument("--connections", type=int, default=2)
    ap.add_argument("--pipeline", type=int, default=32)
    ap.add_argument("--rb-clients", type=int, default=50)
    ap.add_argument("--rb-pipeline", type=int, default=1)
    ap.add_argument("--rb-requests", type=int, default=100000)
    ap.add_argument("--keys", type=int, default=100000)
    ap.add_argument("--settle", type=float, default=3)
    ap.add_argument("--build", default="build")
    ap.add_argument("--json", help="append each run as a JSON line")
    o = ap.parse_args()
    bindir = os.path.join(ROOT, o.build, "bin") if not os.path.isabs(
        o.build) else os.path.join(o.build, "bin")
    os.environ["RINGKV_BIN_DIR"] = bindir
    tool = os.path.join(bindir, "ringkv-load")
    import harness as h

    c = h.racked_cluster(IPS, replication=o.replication, log_level="warn",
                         default_consistency="QUORUM", resp_port=6379)
    try:
        nodes = c.nodes
        hosts = ",".join("%s:7380" % n.ip for n in nodes)
        subprocess.run([tool, "-h", hosts, "-k", str(o.keys), "-d", "100",
                        "--consistency", "QUORUM", "--preload", "-n", "1",
                        "--json"], stdout=subprocess.DEVNULL, check=True)
        kinds = [("native token-aware", load_run(o, tool, hosts, True)),
                 ("native plain", load_run(o, tool, hosts, False)),
                 ("RESP redis-benchmark", resp_run(o))]
        res = {k: [] for k, _ in kinds}
        jout = open(o.json, "a") if o.json else None
        print("3 nodes %s, QUORUM; ringkv-load -c %d -P %d -d 100 -r 0.5 "
              "-k %d -t %g; redis-benchmark -t set,get -n %d -c %d -P %d "
              "-d 100 -r %d" % (o.replication, o.connections, o.pipeline,
                                o.keys, o.seconds, o.rb_requests,
                                o.rb_clients, o.rb_pipeline, o.keys))
        print("%-22s %5s %10s %11s %12s %8s" % (
            "run", "round", "ops/s", "cpu us/op", "by replica", "errors"))
        for rnd in range(o.rounds):
            for k in range(len(kinds)):
                label, run = kinds[(k + rnd) % len(kinds)]
                s = measured(h, nodes, run)
                s.update(label=label, round=rnd + 1,
                         replication=o.replication)
                res[label].append(s)
                if jout:
                    jout.write(json.dumps(s) + "\n")
                    jout.flush()
                print("%-22s %5d %10.0f %11.1f %11.1f%% %8s %s" % (
                    label, rnd + 1, s["ops_per_sec"], s["cpu_us_per_op"],
                    100 * s["by_replica"], s.get("errors", "-"),
                    "" if "to_replica" not in s else
                    "(%d to a replica, %d fell back, %d rings, %d conns)" % (
                        s["to_replica"], s["fallback"], s["ring_refreshes"],
                        s["connections_open"])),
                    flush=True)
                time.sleep(o.settle)
        print("\nmedians over %d rounds" % o.rounds)
        med = {}
        for label, _ in kinds:
            rows = res[label]
            med[label] = {k: statistics.median(r[k] for r in rows)
                          for k in ("ops_per_sec", "cpu_us_per_op",
                                    "by_replica")}
            m = med[label]
            print("%-22s ops/s %9.0f  cpu us/op %6.1f  by replica %5.1f%%" % (
                label, m["ops_per_sec"], m["cpu_us_per_op"],
                100 * m["by_replica"]))
        ta, pl, rs = (med["native token-aware"], med["native plain"],
                      med["RESP redis-benchmark"])
        print("token-aware / RESP: ops/s %.2f, cpu per op %.2f" % (
            ta["ops_per_sec"] / rs["ops_per_sec"],
            ta["cpu_us_per_op"] / rs["cpu_us_per_op"]))
        print("token-aware / plain: ops/s %.2f, cpu per op %.2f" % (
            ta["ops_per_sec"] / pl["ops_per_sec"],
            ta["cpu_us_per_op"] / pl["cpu_us_per_op"]))
    finally:
        for n in c.nodes:
            n.stop()
    return 0


if __name__ == "__main__":
    sys.exit(main())
