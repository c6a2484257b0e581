#!/usr/bin/env python3
"""A join streams each range from one replica; writes that replica missed
are brought by the repair that follows the join (repair_after_join).

Proves: three nodes (RF 3, a rack each, hinted_handoff off so that nothing
brings a down replica what it missed) hold 1,000 keys; n2 is killed -9 and
1,000 more keys are written at QUORUM (on n1 and n3 only), then n2 comes
back without them. n4 joins: it streams each range it gains from the
replica that loses it, n2 for about a third of them, so right after the
join it lacks some of the second 1,000 keys; it then logs
`repair.after_join` and `repair.done` with keys pulled (its netstats
says so), and serves (ONE,
from its own replica) every key it replicates; node.state says
repair_due=0. Until 2026-12-04 a join did not repair, and n4 served
NOT_FOUND at ONE for the writes its source had missed until a read repair
or a `ringkv repair` (regression: join_misses_writes_source_missed). A
fifth node joining with repair_after_join false logs no repair.
"""
# ctest: alongside others
import re
import time

import harness as h


def put_keys(node, prefix, count):
    cl = node.client()
    res = cl.pipeline([("PUT", {"key": "%s%d" % (prefix, i),
                                "value": "v%d" % i, "cl": "QUORUM"})
                       for i in range(count)])
    cl.close()
    bad = [r.err for r in res if r.err]
    h.check(not bad, "QUORUM writes failed: %r" % bad[:5])
    return {"%s%d" % (prefix, i): ("v%d" % i).encode() for i in range(count)}


def main():
    ips = ["127.0.0.35", "127.0.0.36", "127.0.0.37"]
    c = h.racked_cluster(ips, replication="dc1:3", hinted_handoff="false")
    n1, n2, n3 = c.nodes
    expect = put_keys(n1, "a", 1000)
    # n2 and n3 joined by streaming: their own repairs after the join run
    # once the ring has settled, and would bring n2 what it misses below
    # if they ran after its restart (they did once failure detection took
    # less time than the settling: 2026-12-06)
    # (the harness forms a new cluster without streaming: then there is
    # no such repair to wait for)
    for n in (n2, n3):
        if "boot.joining" in n.log():
            h.wait_log(n, "repair.done")
    n2.kill9()
    c.wait_state(n1, "n2", "DN", timeout=30)
    expect.update(put_keys(n1, "b", 1000))
    n2.start()
    c.wait_converged(timeout=60)
    cl = n2.client()
    res = cl.pipeline([("GET", {"key": "b%d" % i, "cl": "ONE"})
                       for i in range(1000)])
    cl.close()
    h.check(all(r.err == "NOT_FOUND" for r in res),
            "n2 has some of the writes made while it was down")

    n4 = h.Node(c, "n4", "127.0.0.38", {"rack": "r4"})
    c.nodes.append(n4)
    n4.start()
    c.wait_state(n1, "n4", "UN", timeout=120)
    h.wait_log(n4, "repair.done")
    log = n4.log()
    h.check("event=repair.after_join " in log,
            "n4 did not start a repair after its join")
    m = re.search(r"level=(\w+) node=n4 event=repair\.done .*failed=(\d+) "
                  r".*keys_in=(\d+)", log)
    h.check(m.group(1) == "info" and m.group(2) == "0",
            "n4's repair after its join failed: %r" % m.group(0))
    pulled = int(m.group(3))
    h.check(pulled > 0, "the repair after the join pulled nothing: the "
            "stream from n2 lacked nothing")
    rc, ns = h.cli(n4, "netstats")
    h.check(rc == 0 and "Repair: done in" in ns and
            "after joining by streaming" in ns, "n4's netstats: %r" % ns)
    mine, _ = h.check_served(n4, expect, [])
    h.check("repair_due=0" in open(n4.data_dir + "/node.state").read(),
            "n4's node.state still has a repair due")
    print("n4 joined, its repair pulled %d keys its sources missed, and "
          "it serves its %d keys" % (pulled, len(mine)))

    c.wait_converged(timeout=60)
    n5 = h.Node(c, "n5", "127.0.0.39",
                {"rack": "r5", "repair_after_join": "false"})
    c.nodes.append(n5)
    n5.start()
    c.wait_state(n1, "n5", "UN", timeout=120)
    time.sleep(5)  # past when the repair would have started
    h.check("event=repair." not in n5.log(),
            "n5 repaired with repair_after_join false")
    print("n5, with repair_after_join false, did not repair")


if __name__ == "__main__":
    h.run(main)
