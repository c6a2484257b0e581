#!/usr/bin/env python3
"""snapshot.py - what `ringkv snapshot` costs, next to `cp -r` + `sync` of
the same data directory, and what the restore costs; real ringkvd
processes on 127.0.2.85-87.

    tools/bench/snapshot.py [--keys 100000] [--value-bytes 1000] \\
                            [--tokens 16] [--build build]

Three nodes (RF 2, --tokens tokens each) are loaded with --keys values
through n1 at QUORUM, and n1 runs `cleanup` (it started alone and held the
whole ring: the cleanup cuts it to the arcs it replicates, several
ranges). Then, in turn on n1:
`ringkv snapshot` (seconds and bytes from its result line, and the wall
time of the command, which waits for it), the reference copy of n1's data
directory (`cp -r` + `sync` on the same disk, harness.copy_reference:
it holds the commit log's segments too) and of its ranges/ alone (what
the snapshot copies), a second snapshot while a client writes through n1
(writes/s during it and in the 2 s before), and the offline restore of the first
snapshot (n1 stopped; `ringkvd --restore-snapshot`, wall time). Run it in
a network namespace of its own:

    unshare --net sh -c 'ip link set lo up && tools/bench/snapshot.py'
"""
import argparse
import os
import re
import subprocess
import sys
import threading
import time

ROOT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..")
sys.path.insert(0, os.path.join(ROOT, "tests", "cluster"))


def du(path):
    return int(subprocess.run(["du", "-sb", path], check=True,
                              stdout=subprocess.PIPE).stdout.split()[0])


def snapshot(h, node, tag):
    """(seconds the node reports, bytes, ranges, wall seconds)."""
    t0 = time.time()
    rc, out = h.cli(node, "snapshot", tag)
    wall = time.time() - t0
    m = re.search(r"done: (\d+) ranges, .* \((\d+) bytes\) in ([\d.]+) s",
                  out)
    if rc != 0 or not m:
        raise SystemExit("snapshot %s: %d %s" % (tag, rc, out))
    ms = int(re.findall(r"event=snapshot\.done tag=%s ranges=\d+ bytes=\d+ "
                        r"ms=(\d+)" % tag, node.log())[-1])
    return ms / 1000, int(m.group(2)), int(m.group(1)), wall


def while_writing(h, node, tag):
    """A snapshot while a client writes through node: (snapshot seconds,
    writes/s for 2 s before it, writes/s while `ringkv snapshot` ran, its
    wall seconds, writes that failed)."""
    stop = threading.Event()
    ok, failed = [0], [0]

    def writer():
        cl = node.client()
        i = 0
        try:
            while not stop.is_set():
                res = cl.pipeline([("PUT", {"key": "w%d" % (i + j),
                                            "value": b"y" * 100,
                                            "cl": "QUORUM"})
                                   for j in range(64)])
                i += 64
                ok[0] += sum(1 for r in res if not r.err)
                failed[0] += sum(1 for r in res if r.err)
        finally:
            cl.close()

    t = threading.Thread(target=writer)
    t.start()
    time.sleep(1)
    t0, before = time.time(), ok[0]
    time.sleep(2)
    rate = (ok[0] - before) / (time.time() - t0)  # without a snapshot
    t0, before = time.time(), ok[0]
    s, _, _, wall = snapshot(h, node, tag)
    during = (ok[0] - before) / (time.time() - t0)
    stop.set()
    t.join()
    return s, rate, during, wall, failed[0]


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--keys", type=int, default=100000)
    ap.add_argument("--value-bytes", type=int, default=1000)
    ap.add_argument("--tokens", type=int, default=16)
    ap.add_argument("--build", default="build")
    o = ap.parse_args()
    os.environ["RINGKV_BIN_DIR"] = os.path.join(ROOT, o.build, "bin")
    import harness as h

    c = h.Cluster(["127.0.2.85", "127.0.2.86", "127.0.2.87"],
                  replication="dc1:2", num_tokens=o.tokens).start()
    c.wait_converged()
    n1 = c.nodes[0]
    h.put_all(n1, ["k%d" % i for i in range(o.keys)], b"x" * o.value_bytes)
    # n1 started alone and holds the whole ring until a cleanup cuts it to
    # the arcs it replicates
    rc, out = h.cli(n1, "cleanup", "--wait")
    if rc != 0:
        raise SystemExit("cleanup: %s" % out)
    time.sleep(2)  # let the compactor settle, as a node at rest is
    ranges_du = du(os.path.join(n1.data_dir, "ranges"))

    s1, b1, nr, wall1 = snapshot(h, n1, "bench1")
    cp_s, cp_bytes = h.copy_reference(n1.data_dir)
    cpr_s, cpr_bytes = h.copy_reference(os.path.join(n1.data_dir, "ranges"))
    s2, rate, during, wall2, failed = while_writing(h, n1, "bench2")

    n1.stop()
    t0 = time.time()
    p = subprocess.run(n1.args() + ["--restore-snapshot", "bench1"],
                       stdout=subprocess.PIPE, stderr=subprocess.STDOUT)
    restore_s = time.time() - t0
    if p.returncode != 0:
        raise SystemExit("restore: %s" % p.stdout.decode())

    mib = 1048576
    print("n1: %d ranges, ranges/ %.1f MiB on disk (du), data_dir %.1f MiB"
          % (nr, ranges_du / mib, cp_bytes / mib))
    print("%-44s %10s %9s %9s" % ("", "MiB", "s", "MiB/s"))
    for name, b, s in (
            ("snapshot (node's own time)", b1, s1),
            ("snapshot (ringkv snapshot, wall)", b1, wall1),
            ("cp -r + sync of the data_dir (reference)", cp_bytes, cp_s),
            ("cp -r + sync of data_dir/ranges", cpr_bytes, cpr_s),
            ("restore of the snapshot (ringkvd, wall)", b1, restore_s)):
        print("%-44s %10.1f %9.2f %9.1f" % (name, b / mib, s,
                                            b / mib / s if s else 0))
    print("snapshot while a client writes through n1 (QUORUM, 100 B, "
          "pipelines of 64): %.2f s (wall %.2f s); %.0f writes/s during it, "
          "%.0f/s in the 2 s before; %d failed" %
          (s2, wall2, during, rate, failed))
    print("(the wall time of `ringkv snapshot` is whole seconds or more: "
          "it polls netstats once a second)")


if __name__ == "__main__":
    main()
