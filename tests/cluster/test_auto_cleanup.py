#!/usr/bin/env python3
"""auto_cleanup_s: once the ring has settled for that long after a join, the
old replicas drop what they no longer replicate by themselves.

Proves: three nodes (RF 2, a rack each; n1 and n2 with auto_cleanup_s 3,
n3 with 0, the switch that turns it off) form a cluster, after which n1 and
n2 clean up once (the ranges the others took as they joined), then hold
3,000 keys (300 deleted). A fourth joins. Nothing is dropped while the join
moves ranges; about 3 s after it has settled, n1 and n2 log `cleanup.auto`
and `cleanup.done` again and
hold about the keys they still replicate (ringkv_keys falls from what they
held to at most that number, plus a small allowance for the metric's
memtable count); n3, with 0, never cleans up and keeps what it held; every
node then serves every key it replicates at ONE and no deleted key comes
back. Before auto_cleanup_s existed (DESIGN: "donors drop ranges they no
longer replicate ... automatically after the safety delay") only `ringkv
cleanup` dropped them and this test failed at its first wait.
"""
# ctest: alongside others
import time

import harness as h

KEYS = 3000


def wait_cleanups(nodes, k):
    """Wait (60 s at most) until each node has logged k automatic cleanups,
    each done."""
    deadline = time.time() + 60
    while time.time() < deadline:
        if all(n.log().count("event=cleanup.done") >= k for n in nodes):
            break
        time.sleep(0.5)
    for n in nodes:
        log = n.log()
        h.check(log.count("event=cleanup.auto") == k and
                log.count("event=cleanup.done") == k,
                "%s: not %d automatic cleanups within 60 s" % (n.name, k))


def main():
    ips = ["127.0.0.225", "127.0.0.226", "127.0.0.227"]
    c = h.Cluster(ips, seeds=ips[:1], replication="dc1:2")
    for i, n in enumerate(c.nodes):
        n.extra["rack"] = "r%d" % (i + 1)
        n.extra["auto_cleanup_s"] = 3 if i < 2 else 0
    c.start()
    c.wait_converged(timeout=60)
    n1, n2, n3 = c.nodes
    # The cluster's own forming moved ranges already: n1 and n2 held
    # (empty) ranges that n2 and n3 took as they joined; they drop those
    # first, once the ring has settled for 3 s.
    wait_cleanups([n1, n2], 1)
    expect, gone = h.load_keys(n1, KEYS)
    before = h.keys_applied((n1, n2, n3))

    n4 = h.Node(c, "n4", "127.0.0.228", {"rack": "r4", "auto_cleanup_s": 3})
    c.nodes.append(n4)
    n4.start()
    c.wait_state(n1, "n4", "UN", timeout=120)
    c.wait_converged(timeout=60)
    settled = time.time()
    for n in (n1, n2):
        h.check(n.log().count("event=cleanup.auto") == 1,
                "%s cleaned up again before the ring settled" % n.name)
    wait_cleanups([n1, n2], 2)
    print("n1 and n2 cleaned up %.1f s after the ring settled" %
          (time.time() - settled))
    time.sleep(1.5)
    eps = h.endpoints(n1, list(expect) + gone)
    h.check_cleaned((n1, n2), before, eps)
    # n3 (auto_cleanup_s 0) keeps what it held; n4 has nothing to drop
    h.check("event=cleanup" not in n3.log(), "n3 cleaned up with 0")
    after3 = h.keys_applied([n3])["n3"]
    h.check(after3 >= before["n3"],
            "n3 holds %r keys, %r before" % (after3, before["n3"]))
    h.check("event=cleanup.start" not in n4.log(),
            "n4, which holds only what it replicates, cleaned up")
    print("n3 (auto_cleanup_s 0) still holds %d keys; n4 did not clean up"
          % after3)
    for n in (n1, n2, n3, n4):
        mine, _ = h.check_served(n, expect, gone)
        print("%s serves its %d keys" % (n.name, len(mine)))


if __name__ == "__main__":
    h.run(main)
