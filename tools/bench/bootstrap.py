#!/usr/bin/env python3
"""bootstrap.py - a node bootstrapping into a six-node cluster that holds
data, against copying the same bytes on the same disk (issue 29, item 3:
the join at most 3x `cp -r` + `sync`, the largest donor at most twice the
mean), on real ringkvd processes on 127.0.0.161-167.

    tools/bench/bootstrap.py [--gib 1] [--value-kib 256] [--build build]
                             [--loaders 6] [--keep]

Six nodes (RF 3, a rack each, num_tokens 16) are loaded with --gib GiB of
distinct keys and values (values of --value-kib KiB, written at QUORUM by
--loaders clients at once, one per node). Then a seventh node starts and
joins: it pulls its ranges from every replica that holds them
(docs/streaming.md, "How a join picks its donors"). Printed:

- the join's streaming time, from its log (stream.planned -> boot.joined:
  the ring delay before the plan is not counted), and the time from its
  start to UN as seen by n1;
- the reference, measured right after on the same disk: `cp -r` + `sync`
  of the new node's data directory (the same bytes, as LMDB files);
- the ratio of the two;
- the bytes each donor sent (boot.joined's bytes_by_donor, checked against
  each donor's ringkv_stream_bytes_total{direction="out"}), each one's
  share, and the largest over the mean.
"""
import argparse
import datetime
import os
import re
import sys
import threading
import time

ROOT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..")
sys.path.insert(0, os.path.join(ROOT, "tests", "cluster"))

OUT = 'ringkv_stream_bytes_total{direction="out"}'


def ts(log, event):
    m = re.search(r"ts=(\S+) level=\w+ node=\w+ event=%s\b" % event, log)
    if not m:
        raise SystemExit("no %s in the log" % event)
    return datetime.datetime.fromisoformat(
        m.group(1).replace("Z", "+00:00")).timestamp()


def load(h, nodes, nkeys, value, loaders, o_depth):
    """Writes k0..k<nkeys-1> = value at QUORUM, `loaders` clients at once
    (each through another node), `o_depth` requests in flight each."""
    errors = []

    def run(i):
        node = nodes[i % len(nodes)]
        c = node.client(timeout=60)
        try:
            keys = ["k%d" % k for k in range(i, nkeys, loaders)]
            for b in range(0, len(keys), 32):
                todo = keys[b:b + 32]
                # OVERLOADED and TIMEOUT are the node shedding load (a
                # commit log or memtable behind the disk): sent again, as
                # a client would, after a pause, 20 times at most
                for attempt in range(20):
                    res = c.pipeline([("PUT", {"key": k, "value": value,
                                               "cl": "QUORUM"})
                                      for k in todo], depth=o_depth)
                    todo = [k for k, r in zip(todo, res)
                            if r.err in ("OVERLOADED", "TIMEOUT")]
                    bad = [r.err for r in res if r.err and
                           r.err not in ("OVERLOADED", "TIMEOUT")]
                    if bad:
                        errors.append(bad[0])
                        return
                    if not todo:
                        break
                    time.sleep(0.2 * (attempt + 1))
                if todo:
                    errors.append("still OVERLOADED or TIMEOUT after 20 tries")
                    return
        finally:
            c.close()

    ts_ = [threading.Thread(target=run, args=(i,)) for i in range(loaders)]
    for t in ts_:
        t.start()
    for t in ts_:
        t.join()
    if errors:
        raise SystemExit("writes failed: %r" % errors[:3])


def cpu_s(node):
    """CPU seconds (user + system) the node's process has used."""
    with open("/proc/%d/stat" % node.proc.pid) as f:
        v = f.read().rsplit(")", 1)[1].split()
    return (int(v[11]) + int(v[12])) / os.sysconf("SC_CLK_TCK")


def netstats(node):
    c = node.client(timeout=5)
    try:
        r = c.call("NETSTATS")
    finally:
        c.close()
    t = r.get(38) or ""
    return t.decode() if isinstance(t, bytes) else t


def watch(node, seen, stop):
    """Keeps in seen[0] the last netstats of node while it joins."""
    while not stop.is_set():
        try:
            t = netstats(node)
            if t.startswith("Mode: JOINING") and "Receiving" in t:
                seen[0] = t
        except (OSError, ConnectionError, RuntimeError):
            pass
        time.sleep(0.5)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--gib", type=float, default=1.0,
                    help="distinct bytes of keys and values loaded")
    ap.add_argument("--value-kib", type=int, default=256)
    ap.add_argument("--loaders", type=int, default=6)
    ap.add_argument("--depth", type=int, default=4,
                    help="writes in flight per loader")
    ap.add_argument("--build", default="build")
    ap.add_argument("--set", action="append", default=[],
                    metavar="KEY=VALUE",
                    help="a setting of every node (e.g. stream_max_ranges=24)")
    ap.add_argument("--keep", action="store_true",
                    help="keep the data directories (RINGKV_KEEP=1)")
    o = ap.parse_args()
    os.environ["RINGKV_BIN_DIR"] = os.path.join(ROOT, o.build, "bin")
    if o.keep:
        os.environ["RINGKV_KEEP"] = "1"
    import harness as h

    ips = ["127.0.0.%d" % i for i in range(161, 167)]
    extra = dict(kv.split("=", 1) for kv in o.set)
    c = h.racked_cluster(ips, replication="dc1:3", num_tokens=16,
                         read_timeout_ms=10000, write_timeout_ms=10000,
                         gossip_interval_ms=500, **extra)
    n1 = c.nodes[0]
    vbytes = o.value_kib << 10
    nkeys = int(o.gib * (1 << 30)) // vbytes
    value = b"v" * vbytes
    t0 = time.time()
    load(h, c.nodes, nkeys, value, o.loaders, o.depth)
    load_s = time.time() - t0
    total = sum(len("k%d" % k) + vbytes for k in range(nkeys))
    print("loaded %d keys of %d KiB (%.2f GiB of keys and values, RF 3: "
          "%.2f GiB on the six nodes) in %.1f s" %
          (nkeys, o.value_kib, total / (1 << 30), 3 * total / (1 << 30),
           load_s))
    # every write applied before the join, so donors read settled stores
    h.keys_applied(c.nodes, timeout=300)
    base = {n.name: n.metrics().get(OUT, 0) for n in c.nodes}
    cpu0 = sum(cpu_s(n) for n in c.nodes)

    n7 = h.Node(c, "n7", "127.0.0.167", {"rack": "r7"})
    c.nodes.append(n7)
    t0 = time.time()
    n7.start()
    seen, stop = [None], threading.Event()
    w = threading.Thread(target=watch, args=(n7, seen, stop))
    w.start()
    try:
        c.wait_state(n1, "n7", "UN", timeout=3600)
    finally:
        stop.set()
        w.join()
    to_un = time.time() - t0
    cpu = sum(cpu_s(n) for n in c.nodes) + cpu_s(n7) - cpu0
    log = n7.log()
    m = re.search(r"event=boot\.joined .* ranges=(\d+) keys=(\d+) "
                  r"bytes=(\d+) ", log)
    if not m:
        raise SystemExit("n7 did not log boot.joined")
    ranges, keys, streamed = int(m.group(1)), int(m.group(2)), \
        int(m.group(3))
    join_s = ts(log, "boot.joined") - ts(log, "stream.planned")
    c.wait_converged(timeout=120)
    counted = {n.name: n.metrics().get(OUT, 0) - base[n.name]
               for n in c.nodes[:6]}
    d = re.search(r"event=boot\.joined .* bytes_by_donor=(\S+) "
                  r"largest_donor_to_mean=([\d.]+)", log)
    if d:
        by_donor = {x.split(":")[0]: int(x.split(":")[1])
                    for x in d.group(1).split(",")}
        own = d.group(2)
    else:  # a build from before the donors were counted: the metrics
        by_donor = {k: int(v) for k, v in counted.items() if v > 0}
        own = "not logged by this build"

    cp_s, du = h.copy_reference(n7.data_dir)

    if seen[0]:
        lines = seen[0].splitlines()
        print("n7's netstats, last seen while joining (head):")
        for l in [l for l in lines if not l.startswith("  (")][:12]:
            print("  | " + l)
    print("n7 joined: %d ranges, %d keys, %.1f MiB of keys and values "
          "streamed" % (ranges, keys, streamed / 1048576))
    print("%-34s %10s %8s %10s" % ("", "MiB", "s", "MiB/s"))
    print("%-34s %10.1f %8.2f %10.1f" % (
        "join: stream.planned -> joined", streamed / 1048576, join_s,
        streamed / 1048576 / join_s))
    print("%-34s %10.1f %8.2f %10.1f" % (
        "join: start -> UN (ring delays in)", streamed / 1048576, to_un,
        streamed / 1048576 / to_un))
    print("%-34s %10.1f %8.2f %10.1f" % (
        "cp -r + sync of n7's data_dir", du / 1048576, cp_s,
        du / 1048576 / cp_s))
    print("CPU of the seven nodes from n7's start to UN: %.1f s (%d "
          "cores, %.1f s of wall time)" % (cpu, os.cpu_count(), to_un))
    print("ratio join / cp: %.2f (streaming), %.2f (start to UN); "
          "issue 29's bound: 3" % (join_s / cp_s, to_un / cp_s))
    mean = sum(by_donor.values()) / len(by_donor)
    print("%-6s %12s %7s %8s %14s" % ("donor", "bytes", "share", "/ mean",
                                      "metric (out)"))
    for name in sorted(by_donor):
        b = by_donor[name]
        print("%-6s %12d %6.1f%% %8.2f %14d" % (
            name, b, 100.0 * b / streamed, b / mean, counted.get(name, 0)))
    print("largest donor / mean: %.2f (the node's own figure: %s); "
          "issue 29's bound: 2" % (max(by_donor.values()) / mean, own))


if __name__ == "__main__":
    main()
