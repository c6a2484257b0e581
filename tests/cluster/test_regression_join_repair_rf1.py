#!/usr/bin/env python3
"""Regression join_repair_rf1: with replication factor 1 a range has no
other replica to compare with, so the repair after a join has no
comparison and is over as soon as it starts. It must then count as done:
before the fix its end came before it was marked as the join's, node.state
kept repair_due=1, and the node started an empty repair every gossip tick
for as long as it ran.

Proves: two nodes with RF 1 hold 500 keys; n3 joins by streaming; 5 s
after it is UN its log has exactly one `repair.after_join` (with
comparisons=0) and one `repair.start`, node.state says repair_due=0, and
it serves every key it now owns.
"""
# ctest: alongside others
import time

import harness as h


def main():
    ips = ["127.0.0.17", "127.0.0.18"]
    c = h.racked_cluster(ips, replication="dc1:1")
    n1 = c.nodes[0]
    expect, gone = h.load_keys(n1, 500)
    n3 = h.Node(c, "n3", "127.0.0.19", {"rack": "r3"})
    c.nodes.append(n3)
    n3.start()
    c.wait_state(n1, "n3", "UN", timeout=120)
    h.wait_log(n3, "repair.after_join", timeout=30)
    time.sleep(5)  # 25 gossip ticks
    log = n3.log()
    after, starts = (log.count("event=repair.after_join "),
                     log.count("event=repair.start "))
    h.check(after == 1 and starts == 1 and
            "event=repair.after_join comparisons=0 " in log,
            "n3 started %d repairs after its join (%d repair.start)" %
            (after, starts))
    h.check("repair_due=0" in open(n3.data_dir + "/node.state").read(),
            "n3's node.state still has a repair due")
    mine, _ = h.check_served(n3, expect, gone)
    print("RF 1: one empty repair after the join, none due; n3 serves its "
          "%d keys" % len(mine))


if __name__ == "__main__":
    h.run(main)
