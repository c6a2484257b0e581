#!/usr/bin/env python3
"""repair.py - what `ringkv repair` costs and moves, on real ringkvd
processes on 127.0.0.251-253.

    tools/bench/repair.py [--keys 30000] [--value-bytes 1000]
                          [--changed 300] [--build build]

Three nodes (RF 3, a rack each, hinted handoff off) are loaded with --keys
values. Then, each step's time and bytes from n3's own log (repair.done):

1. repair on n3 while every replica agrees: the cost of comparing alone
   (both sides hash every arc n3 replicates, with each other replica);
2. n3 is stopped, --changed of the keys are overwritten through n1, n3 is
   started and repaired: what a small divergence moves;
3. the same with 10 times as many keys changed.

As references, measured in the same run on the same disk: the key and
value bytes n3 holds (what re-streaming the whole range would move) and
the time `cp -r` + `sync` of n3's data directory takes (a whole-file copy
without a network, as tools/bench/stream.py does).
"""
import argparse
import os
import re
import sys

ROOT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..")
sys.path.insert(0, os.path.join(ROOT, "tests", "cluster"))


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--keys", type=int, default=30000)
    ap.add_argument("--value-bytes", type=int, default=1000)
    ap.add_argument("--changed", type=int, default=300)
    ap.add_argument("--build", default="build")
    o = ap.parse_args()
    os.environ["RINGKV_BIN_DIR"] = os.path.join(ROOT, o.build, "bin")
    import harness as h

    c = h.racked_cluster(["127.0.0.251", "127.0.0.252", "127.0.0.253"],
                         replication="dc1:3", hinted_handoff="false",
                         gossip_interval_ms=1000)
    n1, _, n3 = c.nodes
    val = b"x" * o.value_bytes

    keys = ["k%d" % i for i in range(o.keys)]
    h.put_all(n1, keys, val)
    total = o.keys * (o.value_bytes + len("k%d" % (o.keys // 2)))

    def repair(name):
        rc, out = h.cli(n3, "repair", "--wait")
        if rc != 0:
            raise SystemExit("repair: %s" % out)
        m = re.findall(r"event=repair\.done .* leaves=(\d+) "
                       r"leaves_differing=(\d+) keys_in=(\d+) keys_out=(\d+) "
                       r"bytes_in=(\d+) bytes_out=(\d+) .*\bms=(\d+)", n3.log())
        lv, ld, ki, ko, bi, bo, ms = (int(x) for x in m[-1])
        rows.append((name, lv, ld, ki + ko, (bi + bo) / 1048576, ms / 1000))

    rows = []
    repair("agree (compare only)")
    for n, tag in ((o.changed, "a"), (o.changed * 10, "b")):
        if n3.stop() != 0:
            raise SystemExit("n3 unclean exit")
        c.wait_state(n1, "n3", "DN", timeout=60)
        step = max(1, o.keys // n)
        h.put_all(n1, keys[::step][:n], (tag * o.value_bytes).encode())
        n3.start()
        c.wait_converged(timeout=120)
        repair("%d keys changed" % n)

    cp_s, du = h.copy_reference(n3.data_dir)

    print("%d values of %d bytes (%.1f MiB of keys and values on n3), RF 3, "
          "3 nodes on this machine; repair on n3" %
          (o.keys, o.value_bytes, total / 1048576))
    print("%-24s %8s %9s %8s %9s %8s" % ("step", "leaves", "differing",
                                         "keys", "MiB moved", "s"))
    for name, lv, ld, k, mb, s in rows:
        print("%-24s %8d %9d %8d %9.2f %8.2f" % (name, lv, ld, k, mb, s))
    print("%-24s %8s %9s %8s %9.1f %8.2f   (reference: cp -r + sync of n3's "
          "data_dir, %.1f MiB on disk)" % ("cp", "", "", "", du / 1048576,
                                         cp_s, du / 1048576))


if __name__ == "__main__":
    main()
