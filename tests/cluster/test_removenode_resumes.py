#!/usr/bin/env python3
"""A removenode cut short by a restart of the node driving it is taken
up again by that node, and resumes where it was.

Proves: four nodes (RF 2, a rack each) hold 3,000 keys (300 deleted) and
8,000 values of 2,000 bytes. n4 is killed -9; n2, started with
stream_throughput_mb 1 (so the copy takes seconds), is asked to remove
it while a writer writes at ONE through n1 (writes whose replicas are
all down meanwhile fail UNAVAILABLE or TIMEOUT and are not counted).
Once n2 has copied at least one whole range it is killed -9 (its
node.state says removing=n4) and restarted without the cap; n4 is still
LEAVING. Nobody asks again: n2 logs `removenode.taken_up`, then
`removenode.resumed` with at least the ranges it had done a second before
the kill (positions are saved each gossip tick), copies none of those
again (`leave.range_done`), and the rest of the removal moves fewer bytes
than the whole removal needs (the bytes of every range, summed over both
runs). n4 is REMOVED (n2's node.state then says removing=, none), and
each remaining node serves every key it replicates, written before or
during the removal (n2 those written while it was down once n1's hints
reach it), and no deleted key. Until 2026-12-05 a removal cut
short stayed so (n4 LEAVING, every other movement refused) until asked
again, and then copied every range from its start (regressions:
removenode_forgotten_at_restart, removenode_recopies_everything).
"""
# ctest: alongside others
# ctest: long

import harness as h

KEYS = 3000
BIG = 8000  # 2,000 bytes each: about 8 MB of n4's ranges, 8 s at 1 MB/s


def main():
    ips = ["127.0.0.69", "127.0.0.70", "127.0.0.71", "127.0.0.72"]
    c = h.racked_cluster(ips, replication="dc1:2",
                         node_extra={1: {"stream_throughput_mb": 1}})
    n1, n2, n3, n4 = c.nodes
    expect, gone = h.load_keys(n1, KEYS)
    h.load_big(n1, expect, BIG)
    n4.kill9()
    c.wait_state(n2, "n4", "DN", timeout=60)

    w = h.Writer(n1, "live", cl="ONE")
    w.start()
    rc, out = h.cli(n2, "removenode", "n4")
    h.check(rc == 0 and "removing n4" in out, "removenode: %d %r" % (rc, out))
    saved, before = h.kill_after_first_range(
        n2, "leave.range_done", "removenode.done", "removing=n4\n")
    del n2.extra["stream_throughput_mb"]
    mark = len(n2.log())
    n2.start()
    h.wait_log(n2, "removenode.taken_up", timeout=120)
    h.wait_log(n2, "removenode.done", timeout=180,
               unless="removenode.aborted")
    h.check("removing=\n" in open(n2.data_dir + "/node.state").read(),
            "n2's node.state still names a removal")
    h.check_resumed(n2, n2.log()[mark:], "removal", "removenode.resumed",
                    "leave.range_done", "removenode.done", saved, before)

    rest = c.nodes[:3]
    c.nodes = rest
    for o in rest:
        c.wait_state(o, "n4", None, timeout=60)
    c.wait_converged(timeout=60)
    expect.update(w.finish(allowed=("TIMEOUT", "UNAVAILABLE")))
    # n2 gets the writes it missed while down as hints: waited for
    h.check_served_by(rest, expect, gone, wait_s=60)


if __name__ == "__main__":
    h.run(main)
