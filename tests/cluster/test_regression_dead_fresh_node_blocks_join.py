#!/usr/bin/env python3
"""Regression: a fresh node that died before choosing tokens held back, for
ever, every later fresh node with a larger name that learnt of it only
from others.

A new node waits for live fresh nodes with smaller names to choose their
tokens first. A node that learns of a peer only by hearsay has never heard
it: its failure detector's phi stays 0, which counted as alive, so a dead
fresh node (here n3, a replace refused: it exits having announced no
tokens) that a later node heard of only through n1 and n2 kept that node
"waiting for n3" -- until 2026-12-06, when a replace refused made this
common. Now a peer known by hearsay holds a joiner back only while its
heartbeat is seen to advance (5 s at least after it stops): n4 joins.
"""
# ctest: alongside others
import harness as h


def main():
    c = h.racked_cluster(["127.0.0.85", "127.0.0.86"], replication="dc1:2")
    n1 = c.nodes[0]
    n3 = h.Node(c, "n3", "127.0.0.88", {"rack": "r3", "replace": "n1"})
    n3.start()
    h.check(n3.proc.wait(timeout=60) == 1, "n3's replace was not refused")
    n4 = h.Node(c, "n4", "127.0.0.89", {"rack": "r4"})
    c.nodes.append(n4)
    n4.start()
    c.wait_state(n1, "n4", "UN", timeout=60)
    print("n4 joined: it waited for n3, a fresh node that died, only until "
          "n3's heartbeat had not advanced for a while")


if __name__ == "__main__":
    h.run(main)
