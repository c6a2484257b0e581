#!/usr/bin/env python3
"""scan.py - what listing every key costs, on real ringkvd processes on
127.0.0.251-253.

    tools/bench/scan.py [--keys 100000] [--build build]

Three nodes (RF 2, a rack each) are loaded with --keys small values
through n1 (the native client, pipelined). Then, each timed from the
client, through n2:

1. `redis-cli --scan` (COUNT 10 a call, Redis's default);
2. python3-redis's scan_iter with COUNT 1000 (the cap);
3. `ringkv scan` (the native SCAN, 500 keys' work a call), at QUORUM and
   at ONE;

each checked to list exactly the keys loaded. Last, DBSIZE on each node
(an estimate) next to the true count. As a reference measured in the same
run: the time the load took (one write per key, at QUORUM).
"""
import argparse
import os
import subprocess
import sys
import time

ROOT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..")
sys.path.insert(0, os.path.join(ROOT, "tests", "cluster"))
sys.path.append("/usr/lib/python3/dist-packages")  # Debian's python3-redis


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--keys", type=int, default=100000)
    ap.add_argument("--build", default="build")
    o = ap.parse_args()
    os.environ["RINGKV_BIN_DIR"] = os.path.join(ROOT, o.build, "bin")
    import harness as h
    import redis

    ips = ["127.0.0.251", "127.0.0.252", "127.0.0.253"]
    c = h.racked_cluster(ips, replication="dc1:2", resp_port=6379,
                         read_timeout_ms=5000)
    n1, n2, _ = c.nodes
    keys = ["k:%08d" % i for i in range(o.keys)]
    t = time.time()
    h.put_all(n1, keys, b"v")
    rows = [("load (reference: one write per key)", o.keys, time.time() - t)]
    want = set(keys)

    def timed(name, run):
        t0 = time.time()
        got = run()
        took = time.time() - t0
        if len(got) != len(want) or set(got) != want:
            raise SystemExit("%s: %d keys listed, %d distinct, want %d" %
                             (name, len(got), len(set(got)), len(want)))
        rows.append((name, len(got), took))

    def cli_scan():
        out = subprocess.run(["redis-cli", "-h", ips[1], "-p", "6379",
                              "--scan"], capture_output=True,
                             check=True).stdout
        return [k for k in out.decode().split("\n") if k]

    def py_scan():
        r = redis.Redis(host=ips[1], port=6379, socket_timeout=60)
        return [k.decode() for k in r.scan_iter(count=1000)]

    def ringkv_scan(*level):
        rc, out = h.cli(n2, *level, "scan")
        if rc != 0:
            raise SystemExit("ringkv scan: %s" % out[-300:])
        return [k for k in out.split("\n") if k]

    timed("redis-cli --scan (COUNT 10)", cli_scan)
    timed("redis-py scan_iter(count=1000)", py_scan)
    timed("ringkv scan (QUORUM)", ringkv_scan)
    timed("ringkv -c ONE scan", lambda: ringkv_scan("-c", "ONE"))
    print("%-40s %9s %8s %10s" % ("", "keys", "seconds", "keys/s"))
    for name, n, s in rows:
        print("%-40s %9d %8.2f %10.0f" % (name, n, s, n / s))
    for node, ip in zip(c.nodes, ips):
        est = redis.Redis(host=ip, port=6379).dbsize()
        print("DBSIZE on %s: %d (%+.1f%% of %d)" %
              (node.name, est, 100.0 * (est - o.keys) / o.keys, o.keys))


if __name__ == "__main__":
    sys.exit(main())
