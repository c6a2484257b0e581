#!/usr/bin/env python3
"""stream.py - how fast ranges move: a join (pull), a decommission (push)
and a cleanup, on real ringkvd processes on 127.0.0.251-254.

    tools/bench/stream.py [--keys 60000] [--value-bytes 2000] [--build build]

Three nodes (RF 2, a rack each) are loaded with --keys values; a fourth
joins (it pulls its ranges), then every old node runs `cleanup`, then the
fourth decommissions itself (it pushes every range it holds). Each step's
bytes and time come from the nodes' own logs (stream.planned ->
boot.joined, leave.left's streaming_ms, cleanup.done's ms), and, as the
reference measured in the same run on the same disk, the time `cp` takes to
copy the new node's data directory (what a whole-file transfer would do at
best, without a network). The ring delays (2 s after an announcement) are
not counted.
"""
import argparse
import datetime
import os
import re
import sys

ROOT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..")
sys.path.insert(0, os.path.join(ROOT, "tests", "cluster"))


def ts(log, event):
    m = re.search(r"ts=(\S+) level=\w+ node=\w+ event=%s\b" % event, log)
    if not m:
        raise SystemExit("no %s in the log" % event)
    return datetime.datetime.fromisoformat(
        m.group(1).replace("Z", "+00:00")).timestamp()


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--keys", type=int, default=60000)
    ap.add_argument("--value-bytes", type=int, default=2000)
    ap.add_argument("--build", default="build")
    o = ap.parse_args()
    os.environ["RINGKV_BIN_DIR"] = os.path.join(ROOT, o.build, "bin")
    import harness as h

    c = h.racked_cluster(["127.0.0.251", "127.0.0.252", "127.0.0.253"],
                         replication="dc1:2", gossip_interval_ms=1000)
    n1 = c.nodes[0]
    h.put_all(n1, ["k%d" % i for i in range(o.keys)], b"x" * o.value_bytes)
    rows = []

    n4 = h.Node(c, "n4", "127.0.0.254", {"rack": "r4"})
    c.nodes.append(n4)
    n4.start()
    c.wait_state(n1, "n4", "UN", timeout=600)
    log = n4.log()
    mib = int(re.search(r"event=boot\.joined .* bytes=(\d+)",
                        log).group(1)) / 1048576
    rows.append(("join (pull)", mib,
                 ts(log, "boot.joined") - ts(log, "stream.planned")))
    c.wait_converged(timeout=120)

    # the reference: copying n4's data directory on the same disk (the
    # node is live: a range its compactor rewrites meanwhile vanishes under
    # cp, which is then tried again)
    cp_s, du = h.copy_reference(n4.data_dir)

    dropped = 0
    spent = keep_s = split_s = drop_s = 0.0
    for n in c.nodes[:3]:
        rc, out = h.cli(n, "cleanup", "--wait")
        if rc != 0:
            raise SystemExit("cleanup on %s: %s" % (n.name, out))
        m = re.search(r"event=cleanup\.done .* bytes=(\d+) ms=(\d+) "
                      r"keep_ms=(\d+) split_ms=(\d+) drop_ms=(\d+)",
                      n.log())
        dropped += int(m.group(1))
        spent += int(m.group(2)) / 1000
        keep_s += int(m.group(3)) / 1000
        split_s += int(m.group(4)) / 1000
        drop_s += int(m.group(5)) / 1000
    rows.append(("cleanup (3 nodes)", dropped / 1048576, spent))
    print("cleanup: %.2f s rewriting ranges to their kept parts (a copy of "
          "what is kept), %.2f s splitting, %.2f s dropping (a checkpoint "
          "each)" % (keep_s, split_s, drop_s))

    rc, out = h.cli(n4, "decommission", "--wait")
    if rc != 0:
        raise SystemExit("decommission: %s" % out)
    m = re.search(r"event=leave\.left .* bytes=(\d+) .*streaming_ms=(\d+)",
                  n4.log())
    rows.append(("decommission (push)", int(m.group(1)) / 1048576,
                 int(m.group(2)) / 1000))

    print("%d values of %d bytes, RF 2, 3 + 1 nodes on this machine" %
          (o.keys, o.value_bytes))
    print("%-22s %10s %8s %10s" % ("step", "MiB", "s", "MiB/s"))
    for name, mb, s in rows:
        print("%-22s %10.1f %8.2f %10.1f" % (name, mb, s,
                                             mb / s if s > 0 else 0))
    print("%-22s %10.1f %8.2f %10.1f   (reference: cp -r + sync of n4's "
          "data_dir)" % ("cp", du / 1048576, cp_s, du / 1048576 / cp_s))


if __name__ == "__main__":
    main()
