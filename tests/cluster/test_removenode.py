#!/usr/bin/env python3
"""removenode: a dead node's ranges are copied from their other replicas to
the nodes that gain them, and it is removed from the ring, while writes go
on; nothing acknowledged is lost.

Proves: four nodes (RF 2, a rack each) hold 3,000 keys (300 of them
deleted). `ringkv removenode` is refused, with the reason, for a node that
is UP, for the node asked itself and for a name not in the ring. n4 is
killed -9; `ringkv -h n1 removenode n4` announces it LEAVING on its behalf
(the others see it DL, or UL until they convict it), copies each of its
ranges from a surviving replica to the node that gains it (netstats on n1
shows the sessions) and announces it REMOVED; the others drop it from the ring. Meanwhile a writer writes at
ONE through n2. Afterwards each remaining node serves (ONE through it,
which reads its own replica first) every key it now replicates -- the
earlier ones, of which those it gained reached it only by the copy, and
every write acknowledged during the removal -- with no deleted key coming
back. Then n3 is killed -9 while decommissioning itself, and removenode on
n2 finishes its leave: n1 and n2 then hold every key. Before removenode
existed the command answered NOT_IMPLEMENTED.
"""
# ctest: alongside others
import time

import harness as h

KEYS = 3000


def main():
    ips = ["127.0.0.231", "127.0.0.232", "127.0.0.233", "127.0.0.234"]
    c = h.racked_cluster(ips, replication="dc1:2")
    n1, n2, n3, n4 = c.nodes

    expect, gone = h.load_keys(n1, KEYS)
    before = h.endpoints(n1, list(expect))

    for args, want in ((("removenode", "n4"), "n4 is UP"),
                       (("removenode", "n1"), "n1 is this node"),
                       (("removenode", "n9"), "no node n9")):
        rc, out = h.cli(n1, *args)
        h.check(rc == 6 and want in out, "%r: %d %r" % (args, rc, out))
        print("refused: %r" % out.strip())

    n4.kill9()
    c.wait_state(n1, "n4", "DN", timeout=60)
    w = h.Writer(n2, "live", cl="ONE")
    w.start()
    time.sleep(0.5)
    rc, out = h.cli(n1, "removenode", "n4")
    h.check(rc == 0 and "removing n4" in out, "removenode: %d %r" % (rc, out))
    print("ringkv removenode n4: %r" % out.strip())
    # LEAVING: DL, or UL while n3 has not convicted n4 yet itself (each
    # node's failure detector judges alone; ASan runs are slow enough)
    c.wait_state(n3, "n4", ("DL", "UL"), timeout=30)
    deadline = time.time() + 120
    seen_sessions = False
    while True:
        ns = h.cli(n1, "netstats")[1]
        seen_sessions |= " from " in ns and " to " in ns
        if "Removed n4" in ns:
            break
        h.check(time.time() < deadline, "n1's NETSTATS: %r" % ns)
        time.sleep(0.1)
    h.check(seen_sessions, "n1's NETSTATS never showed a copy session")
    print("n1's NETSTATS: %r" % ns.splitlines()[1])
    for o in (n1, n2, n3):  # no longer in the ring
        c.wait_state(o, "n4", None, timeout=60)
    c.wait_converged(timeout=60)
    time.sleep(0.5)
    w.stop.set()
    w.join(timeout=30)
    h.check(not w.errors, "writes failed during the removal: %r" %
            w.errors[:5])
    h.check(len(w.acked) > 100, "only %d writes during the removal" %
            len(w.acked))
    log = n1.log()
    for mark in ("removenode.leaving", "removenode.planned",
                 "removenode.done"):
        h.check(mark in log, "n1's log lacks %s" % mark)

    expect.update(w.acked)
    gained = h.check_gained((n1, n2, n3), expect, gone, before)
    print("%d earlier keys changed hands (%d writes during the removal, %d "
          "sent again after RING_STALE)" % (gained, len(w.acked), w.stale))
    rc, out = h.cli(n2, "removenode", "n4")
    h.check(rc == 6 and "no node n4" in out, "n4 again: %d %r" % (rc, out))

    # n3 dies while decommissioning itself; removenode on n2 finishes it
    rc, out = h.cli(n3, "decommission")
    h.check(rc == 0, "decommission n3: %r" % out)
    c.wait_state(n2, "n3", "UL", timeout=30)  # before it pushes (2 s)
    n3.kill9()
    c.wait_state(n2, "n3", "DL", timeout=60)
    rc, out = h.cli(n2, "removenode", "n3", "--wait")  # until done
    h.check(rc == 0 and "it was LEAVING already" in out and
            "Removed n3" in out, "removenode n3 --wait: %d %r" % (rc, out))
    print("ringkv removenode n3 --wait: %r" % out)
    c.wait_state(n1, "n3", None, timeout=60)
    for n in (n1, n2):
        mine, _ = h.check_served(n, expect, gone)
        h.check(len(mine) == len(expect),
                "%s serves %d of %d keys with RF 2 on two nodes" %
                (n.name, len(mine), len(expect)))
    print("n3 died while leaving; removenode on n2 finished it: n1 and n2 "
          "hold every key")


if __name__ == "__main__":
    h.run(main)
