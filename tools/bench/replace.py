#!/usr/bin/env python3
"""replace.py - the bytes a dead node's replacement moves: `replace` against
`removenode` then a join (issue 28, item 5's figure: a replace streams
about the dead node's share, removenode + join about twice that), on real
ringkvd processes on 127.0.0.75-80.

    tools/bench/replace.py [--keys 20000] [--value-bytes 2000] [--build build]

Four nodes (RF 3, a rack each) are loaded with --keys values at QUORUM.
Then, in one run:
  1. n4 is killed -9 and n5 (rack r4) starts with replace: n4;
  2. n5 is killed -9, `ringkv removenode n5` runs on n1 (--wait), and n6
     (rack r4) joins as a new node.
Each step's bytes are the ringkv_stream_bytes_total{direction="in"} the
nodes count (keys and values committed by streaming), summed over the
nodes, and its time runs from the kill to the ring being whole again.
The dead node's share is what it held: the keys whose replicas included
it, in bytes of keys and values.
"""
import argparse
import os
import sys
import time

ROOT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..")
sys.path.insert(0, os.path.join(ROOT, "tests", "cluster"))

METRIC = 'ringkv_stream_bytes_total{direction="in"}'


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--keys", type=int, default=20000)
    ap.add_argument("--value-bytes", type=int, default=2000)
    ap.add_argument("--build", default="build")
    o = ap.parse_args()
    os.environ["RINGKV_BIN_DIR"] = os.path.join(ROOT, o.build, "bin")
    import harness as h

    ips = ["127.0.0.75", "127.0.0.76", "127.0.0.77", "127.0.0.78"]
    c = h.racked_cluster(ips, replication="dc1:3")
    n1, n2, n3, n4 = c.nodes
    keys = ["k%d" % i for i in range(o.keys)]
    h.put_all(n1, keys, b"x" * o.value_bytes)
    eps = h.endpoints(n1, keys)
    per_key = len(keys[0]) + o.value_bytes

    def share(name):
        return sum(len(k) + o.value_bytes for k in keys if name in eps[k])

    def streamed(nodes):
        return sum(n.metrics().get(METRIC, 0) for n in nodes if n.alive())

    rows = []
    dead = share("n4")
    base = streamed(c.nodes)
    t0 = time.time()
    n4.kill9()
    c.wait_state(n1, "n4", "DN", timeout=60)
    n5 = h.Node(c, "n5", "127.0.0.79", {"rack": "r4", "replace": "n4"})
    c.nodes.append(n5)
    n5.start()
    c.wait_state(n1, "n5", "UN", timeout=600)
    c.wait_state(n1, "n4", None, timeout=60)
    c.wait_converged(timeout=120)
    rows.append(("replace n4 by n5", dead, streamed(c.nodes) - base,
                 time.time() - t0))

    eps = h.endpoints(n1, keys)
    dead = share("n5")
    survivors = (n1, n2, n3)  # n5's own counters die with it
    base = streamed(survivors)
    t0 = time.time()
    n5.kill9()
    c.wait_state(n1, "n5", "DN", timeout=60)
    rc, out = h.cli(n1, "removenode", "n5", "--wait")
    h.check(rc == 0, "removenode: %d %r" % (rc, out))
    c.wait_state(n1, "n5", None, timeout=60)
    removed = streamed(survivors) - base
    n6 = h.Node(c, "n6", "127.0.0.80", {"rack": "r4"})
    c.nodes.append(n6)
    n6.start()
    c.wait_state(n1, "n6", "UN", timeout=600)
    c.wait_converged(timeout=120)
    rows.append(("removenode n5 + join n6", dead,
                 streamed(survivors + (n6,)) - base, time.time() - t0))

    print("%d keys of %d bytes, 4 nodes, RF 3" % (o.keys, per_key))
    print("%-26s %12s %12s %8s %8s" % ("", "dead's share", "streamed",
                                        "ratio", "seconds"))
    for what, sh, got, secs in rows:
        print("%-26s %12d %12d %8.3f %8.1f" % (what, sh, got, got / sh,
                                                secs))
    print("(of which removenode alone: %d bytes, %.3f of the share)" %
          (removed, removed / rows[1][1]))


if __name__ == "__main__":
    main()
