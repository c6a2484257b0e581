#!/usr/bin/env python3
"""cleanup: after a node joins, the old replicas drop the ranges it took,
and nothing any node replicates is lost.

Proves: three nodes (RF 2, a rack each) hold 3,000 keys (300 deleted); a
fourth joins, streaming its ranges in. `ringkv cleanup` is refused while
the join is under way. Once n4 is UN, cleanup on n1, n2 and n3 (each
answering at once; netstats then says "Cleanup: done") leaves each of them
holding about the keys it still replicates (ringkv_keys, tombstones
included, falls from what it held to at most that number, plus a small
allowance for the metric's memtable count), rewriting ranges that it keeps
only in part to those parts (store_range_keep); every node then serves every key it replicates at ONE and no
deleted key comes back. Before cleanup existed the command answered
NOT_IMPLEMENTED.
"""
# ctest: alongside others
import re
import time

import harness as h

KEYS = 3000


def wait_done(node):
    deadline = time.time() + 60
    while True:
        ns = h.cli(node, "netstats")[1]
        if "Cleanup: done" in ns:
            return [l for l in ns.splitlines() if l.startswith("Cleanup")][0]
        h.check("Cleanup: failed" not in ns, "%s: %r" % (node.name, ns))
        h.check(time.time() < deadline, "%s's NETSTATS: %r" % (node.name, ns))
        time.sleep(0.2)


def main():
    ips = ["127.0.0.241", "127.0.0.242", "127.0.0.243"]
    c = h.racked_cluster(ips, replication="dc1:2")
    n1, n2, n3 = c.nodes
    expect, gone = h.load_keys(n1, KEYS)
    before = h.keys_applied((n1, n2, n3))

    n4 = h.Node(c, "n4", "127.0.0.244", {"rack": "r4"})
    c.nodes.append(n4)
    n4.start()
    c.wait_state(n1, "n4", "UJ", timeout=60)
    rc, out = h.cli(n1, "cleanup")
    h.check(rc == 6 and "joining or leaving" in out,
            "cleanup during a join: %d %r" % (rc, out))
    print("refused during the join: %r" % out.strip())
    c.wait_state(n1, "n4", "UN", timeout=120)
    c.wait_converged(timeout=60)

    eps = h.endpoints(n1, list(expect) + gone)
    for n in (n1, n2):
        rc, out = h.cli(n, "cleanup")
        h.check(rc == 0 and "cleanup started" in out,
                "cleanup on %s: %d %r" % (n.name, rc, out))
        line = wait_done(n)
        print("%s: %r; %s" % (n.name, out.strip(), line))
    # --wait follows it to the end
    rc, out = h.cli(n3, "cleanup", "--wait")
    h.check(rc == 0 and "cleanup started" in out and "Cleanup: done" in out,
            "cleanup --wait on n3: %d %r" % (rc, out))
    print("n3: ringkv cleanup --wait: %r" % out)
    time.sleep(1.5)
    h.check_cleaned((n1, n2, n3), before, eps)
    for n in (n1, n2, n3, n4):
        mine, _ = h.check_served(n, expect, gone)
        print("%s serves its %d keys" % (n.name, len(mine)))
    log = n1.log()
    m = re.search(r"event=cleanup\.done dropped=(\d+) rewritten=(\d+) "
                  r"splits=(\d+) .* ms=(\d+) keep_ms=(\d+) split_ms=(\d+) "
                  r"drop_ms=(\d+)", log)
    h.check(m is not None, "n1's log lacks cleanup.done with its times")
    dropped, rewritten, splits, ms, keep_ms, split_ms, drop_ms = \
        map(int, m.groups())
    print("n1 cleanup.done: dropped %d, rewritten %d, splits %d, %d ms (%d "
          "rewriting, %d splitting, %d dropping)" %
          (dropped, rewritten, splits, ms, keep_ms, split_ms, drop_ms))
    h.check(dropped + rewritten > 0 and
            keep_ms + split_ms + drop_ms <= ms + 1,
            "n1's cleanup.done times: %r" % m.group(0))

if __name__ == "__main__":
    h.run(main)
