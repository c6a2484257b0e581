#!/usr/bin/env python3
"""purge.py - does a node give back the space of deleted data? Real
ringkvd processes on 127.0.3.151-153 (issue 28, items 1-2).

    tools/bench/purge.py [--keys 200000] [--value-bytes 1024] \\
                         [--tokens 8] [--grace 5] [--interval 10] \\
                         [--build build]

Three nodes (RF 3, --tokens tokens each, gc_grace_seconds --grace,
repair_interval_s --interval, purge_interval_s 2) start empty: each one's
data directory is measured then (the empty node's size). --keys values of
--value-bytes bytes are written through n1 at QUORUM, then every one is
deleted at QUORUM. The script then waits (polling the metrics, no fixed
sleep) until every node has purged at least --keys tombstones
(ringkv_storage_purged_total{kind="tombstone"}: a scheduled repair of each
arc began after the deletes, gc_grace_seconds passed, a purge cycle ran),
holds no key (ringkv_keys 0) and its purge cycles compacted what lost
most, and prints per node: the data directory loaded, after the deletes,
and after the purge, against its size when empty, in bytes on disk
(`du -s --block-size=1`: the commit log's segments are allocated whole)
and the ratio; the target is within 10% of the empty size. Run it in a
network namespace of its own on a shared machine:

    unshare --net sh -c 'ip link set lo up && tools/bench/purge.py'
"""
import argparse
import os
import subprocess
import sys
import time

ROOT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..")
sys.path.insert(0, os.path.join(ROOT, "tests", "cluster"))

TOMB = 'ringkv_storage_purged_total{kind="tombstone"}'


def du(path):
    out = subprocess.run(["du", "-s", "--block-size=1", path], check=True,
                         stdout=subprocess.PIPE).stdout
    return int(out.split()[0])


def mib(b):
    if b < 10 << 20:
        return "%d KiB" % (b // 1024)
    return "%.1f MiB" % (b / 1048576)


def write_all(h, node, keys, value, op):
    cl = node.client(timeout=60)
    try:
        for b in range(0, len(keys), 2000):
            if op == "PUT":
                reqs = [("PUT", {"key": k, "value": value, "cl": "QUORUM"})
                        for k in keys[b:b + 2000]]
            else:
                reqs = [("DEL", {"key": k, "cl": "QUORUM"})
                        for k in keys[b:b + 2000]]
            bad = [r.err for r in cl.pipeline(reqs) if r.err]
            h.check(not bad, "%s failed: %r" % (op, bad[:3]))
    finally:
        cl.close()


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--keys", type=int, default=200000)
    ap.add_argument("--value-bytes", type=int, default=1024)
    ap.add_argument("--tokens", type=int, default=8)
    ap.add_argument("--grace", type=int, default=5)
    ap.add_argument("--interval", type=int, default=10)
    ap.add_argument("--build", default="build")
    o = ap.parse_args()
    os.environ["RINGKV_BIN_DIR"] = os.path.join(ROOT, o.build, "bin")
    import harness as h

    def run():
        ips = ["127.0.3.151", "127.0.3.152", "127.0.3.153"]
        c = h.racked_cluster(ips, replication="dc1:3", num_tokens=o.tokens,
                             gc_grace_seconds=o.grace,
                             repair_interval_s=o.interval,
                             purge_interval_s=2, write_timeout_ms=10000,
                             read_timeout_ms=10000, disk_reserve_mb=0)
        n1 = c.nodes[0]
        empty = {n.name: du(n.data_dir) for n in c.nodes}
        keys = ["key:%d" % i for i in range(o.keys)]
        value = b"v" * o.value_bytes
        t0 = time.time()
        write_all(h, n1, keys, value, "PUT")
        t_load = time.time() - t0
        h.keys_applied(c.nodes, timeout=120)
        loaded = {n.name: du(n.data_dir) for n in c.nodes}
        t0 = time.time()
        write_all(h, n1, keys, None, "DEL")
        t_del = time.time() - t0
        deleted = {n.name: du(n.data_dir) for n in c.nodes}
        t0 = time.time()
        for n in c.nodes:
            got = h.wait_metric(n, TOMB, o.keys, timeout=3600)
            h.check(got >= o.keys, "%s purged %d of %d" %
                    (n.name, got, o.keys))
        # the cycle that purged the last of them ends with its compactions
        while True:
            ks = h.keys_applied(c.nodes, timeout=120)
            if all(v == 0 for v in ks.values()):
                break
            h.check(time.time() - t0 < 3600, "keys left: %r" % ks)
            time.sleep(1)
        cycles = {n.name: n.metrics().get("ringkv_purge_cycles_total", 0)
                  for n in c.nodes}
        for n in c.nodes:  # one more cycle: its compactions are done
            h.wait_metric(n, "ringkv_purge_cycles_total",
                          cycles[n.name] + 1, timeout=600)
        t_purge = time.time() - t0
        after = {n.name: du(n.data_dir) for n in c.nodes}
        print("%d values of %d bytes, RF 3, %d tokens a node, "
              "gc_grace_seconds %d, repair_interval_s %d" %
              (o.keys, o.value_bytes, o.tokens, o.grace, o.interval))
        print("load %.1f s, delete %.1f s, purged %.1f s after the deletes"
              % (t_load, t_del, t_purge))
        print("%-4s %12s %12s %12s %12s %8s %s" %
              ("node", "empty", "loaded", "deleted", "purged", "ratio",
               "compactions"))
        worst = 0.0
        for n in c.nodes:
            ratio = after[n.name] / empty[n.name]
            worst = max(worst, ratio)
            print("%-4s %12s %12s %12s %12s %8.3f %d" %
                  (n.name, mib(empty[n.name]), mib(loaded[n.name]),
                   mib(deleted[n.name]), mib(after[n.name]), ratio,
                   n.metrics().get("ringkv_purge_compactions_total", 0)))
        print("worst: %.1f%% of the empty node's size (target: within 10%%)"
              % (100 * worst))
        print("left over at most %d KiB a node, %.3f%% of a loaded node" % (
            max(after[k] - empty[k] for k in after) // 1024,
            100.0 * max(after[k] - empty[k] for k in after) /
            min(loaded.values())))
        for n in c.nodes:  # where what is left lies
            parts = sorted(os.listdir(n.data_dir))
            print("%s after the purge: %s" % (n.name, ", ".join(
                "%s %s" % (p, mib(du(os.path.join(n.data_dir, p))))
                for p in parts)))
        for n in c.nodes:
            h.check(n.stop() == 0, "%s unclean exit" % n.name)

    h.run(run)


if __name__ == "__main__":
    main()
