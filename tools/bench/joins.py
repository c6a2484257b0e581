#!/usr/bin/env python3
"""joins.py - many nodes joining at once (issue 29, item 2): N fresh
ringkvd processes (12 by default) on 127.0.1.10.. started together, the
first two the seeds, at the daemon's defaults (gossip_interval_ms 1000,
num_tokens 16, balanced allocation, RF 3, SimpleStrategy).

    tools/bench/joins.py [--nodes 12] [--build build] [--trials 20]

Prints the seconds from the start until every node reports every node UN
with one ring fingerprint, the replicated ownership largest/mean of that
ring (`ringkv status`'s "Owns (effective)"), next to the figure of
`ringkv-sim balance` for the same nodes, tokens and RF (nodes added one at
a time, as the simulator grows its rings), and each node's timeline from
its log: when it chose its tokens (boot.joining, or boot.joined for the
first seed), when it announced NORMAL, and what it logged it waited for
(boot.waiting / boot.queued). Run it inside a network namespace of its own
(`unshare --net sh -c 'ip link set lo up && tools/bench/joins.py'`): it
uses fixed addresses.
"""
import argparse
import os
import re
import subprocess
import sys
import time

ROOT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..")
sys.path.insert(0, os.path.join(ROOT, "tests", "cluster"))

TS = re.compile(r"^ts=(\d+)-(\d+)-(\d+)T(\d+):(\d+):(\d+)\.(\d+)Z")


def line_time(line):
    m = TS.match(line)
    if not m:
        return None
    y, mo, d, hh, mm, ss, ms = (int(x) for x in m.groups())
    import calendar
    return calendar.timegm((y, mo, d, hh, mm, ss)) + ms / 1000.0


def first(log, event):
    for line in log.splitlines():
        if " event=%s " % event in line or line.endswith(" event=" + event):
            return line_time(line)
    return None


def sim_figure(build, nodes, tokens, trials):
    sim = os.path.join(ROOT, build, "bin", "ringkv-sim")
    out = subprocess.run([sim, "balance", "--nodes", str(nodes), "--tokens",
                          str(tokens), "--trials", str(trials), "--alloc",
                          "balanced", "--rf", "3"],
                         capture_output=True, text=True, check=True).stdout
    return out


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--nodes", type=int, default=12)
    ap.add_argument("--build", default="build")
    ap.add_argument("--trials", type=int, default=20)
    ap.add_argument("--timeout", type=int, default=400)
    o = ap.parse_args()
    build = o.build if os.path.isabs(o.build) else os.path.join(ROOT, o.build)
    os.environ["RINGKV_BIN_DIR"] = os.path.join(build, "bin")
    import harness as h

    ips = ["127.0.1.%d" % (10 + i) for i in range(o.nodes)]
    c = h.Cluster(ips, seeds=ips[:2], replication="3",
                  gossip_interval_ms=1000, num_tokens=16,
                  read_timeout_ms=5000, write_timeout_ms=5000,
                  connect_timeout_ms=1000)
    t0 = time.time()
    c.start()
    epoch, fp = c.wait_converged(timeout=o.timeout)
    took = time.time() - t0
    st = c.nodes[0].status()
    owns = [r.get(8, 0.0) for r in st["rows"].values()]
    mean = sum(owns) / len(owns)
    ratio = max(owns) / mean
    print("nodes=%d all UN after %.1f s (epoch %d, fingerprint %016x)" %
          (o.nodes, took, epoch, fp))
    print("replicated ownership: largest/mean %.3f (largest %.4f, mean "
          "%.4f)" % (ratio, max(owns), mean))
    print("timeline (s from start): node  tokens  normal  waited-for")
    for n in c.nodes:
        log = n.log()
        chose = first(log, "boot.joining") or first(log, "boot.joined")
        normal = first(log, "boot.joined")
        waits = sorted(set(re.findall(
            r"event=boot\.(?:waiting|queued) (?:for|behind)=(\S+)", log)))
        print("  %-4s %6s  %6s  %s" % (
            n.name,
            "%.1f" % (chose - t0) if chose else "-",
            "%.1f" % (normal - t0) if normal else "-",
            ",".join(waits) or "-"))
    print("simulator, same nodes/tokens/RF (ringkv-sim balance --nodes %d "
          "--tokens 16 --trials %d --alloc balanced --rf 3):" %
          (o.nodes, o.trials))
    sys.stdout.write(sim_figure(build, o.nodes, 16, o.trials))
    for n in c.nodes:
        n.stop()


if __name__ == "__main__":
    main()
