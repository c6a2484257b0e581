#!/usr/bin/env python3
"""Regression: a write acknowledged at QUORUM was lost across the ring
epoch change of a decommission (anomaly D of test_history).

For about a gossip round after a join or a leave, coordinators on the old
ring and coordinators on the new one place a key on different replica
sets. Until 2026-12-06 replicas served both: a QUORUM write through a node
on the new ring was acknowledged by two replicas of the new set, and a
QUORUM read through a node still on the old ring asked two replicas of the
old set that lacked it, and returned the value before the write. Now a
replica refuses a read or write planned on a ring older than its own
(OLD_RING); the coordinator waits for the newer ring and plans the request
again on it, within the request's timeout.

Five nodes (127.0.2.101-105, RF 3, a rack each), failure detection slowed
(phi only, threshold 16) so that a node deaf to gossip keeps everyone UP.
Key k: replicas {n5, A, B}, n1 none. W1 k=v1 at ALL. n1 is made deaf to
gossip (partition.py: UDP to n1 dropped), so its ring stays at the epoch
before the leave. n5 is decommissioned and leaves: k's replicas become
{A, B, G}. G and A are cut from each other, n1 from B: W2 k=v2 through G
at QUORUM is acknowledged by G and B. R k through n1 at QUORUM (old ring:
n5, A, B; B unreachable) asks n5 and A, which refuse it: it waits
(ringkv_ring_stale_replans_total on n1 counts it), n1 hears gossip again,
and R is answered v2 from the new replica set. Before the fix R was
answered v1 at once.
"""
import threading
import time

import harness as h
import partition

IPS = ["127.0.2.%d" % i for i in range(101, 106)]


def main():
    net = partition.Partitioner()
    c = h.Cluster(IPS, seeds=IPS[:2], replication="dc1:3",
                  failure_probes="false", phi_convict_threshold=16,
                  read_timeout_ms=10000)
    for i, n in enumerate(c.nodes):
        n.extra["rack"] = "r%d" % (i + 1)
        n.gid = 61101 + i
    c.start()
    c.wait_converged(timeout=60)
    by = {n.name: n for n in c.nodes}
    n1 = by["n1"]
    key, old = None, None
    for i in range(500):
        k = "k%d" % i
        eps = h.endpoints(n1, [k])[k]
        if "n5" in eps and "n1" not in eps:
            key, old = k, eps
            break
    h.check(key is not None, "no key placed on n5 and not on n1")
    print("key %s replicas before the leave: %s" % (key, old))
    r = n1.client().call("PUT", key=key, value=b"v1", cl="ALL")
    h.check(not r.err, "W1 %r" % r)

    # n1 deaf to gossip: its ring stays at the epoch before the leave
    deaf = []
    for x in c.nodes:
        if x is not n1:
            rule = ("-m", "owner", "--gid-owner", str(x.gid), "-d", n1.ip,
                    "-p", "udp", "-j", "DROP")
            net._ipt("-A", partition.CHAIN, *rule)
            deaf.append(rule)
    epoch_before = n1.status()["epoch"]
    rc, out = h.cli(by["n5"], "decommission")
    h.check(rc == 0, out)
    h.wait_log(by["n5"], "leave.left", timeout=60)
    deadline = time.time() + 30
    while True:
        seen = [h.endpoints(by[x], [key])[key] for x in ("n2", "n3", "n4")]
        new = seen[0]
        if all("n5" not in e for e in seen):
            break
        h.check(time.time() < deadline, "n2 still places %s on n5" % key)
        time.sleep(0.1)
    h.check(n1.status()["epoch"] == epoch_before,
            "n1 left its old ring: the test needs it behind")
    print("replicas after, as n2 sees them: %s; n1 still at epoch %s" %
          (new, epoch_before))
    a, b = [x for x in old if x != "n5"]
    g = [x for x in new if x not in old][0]
    A, B, G = by[a], by[b], by[g]
    net.cut([G], [A])
    net.cut([n1], [B])
    r2 = G.client().call("PUT", key=key, value=b"v2", cl="QUORUM")
    print("W2 v2 through %s (%s cut off): err=%s acks=%s" %
          (g, a, r2.err, r2.acks))
    h.check(not r2.err, "W2 %r" % r2)

    replans0 = n1.metrics().get("ringkv_ring_stale_replans_total", 0)
    box = {}

    def read():
        try:
            box["r"] = n1.client(timeout=30).call("GET", key=key,
                                                  cl="QUORUM")
        except Exception as e:  # noqa: BLE001 -- reported below
            box["error"] = repr(e)

    t = threading.Thread(target=read, daemon=True)
    t.start()
    # the read waits for the ring (or, before the fix, is answered)
    deadline = time.time() + 30
    while t.is_alive():
        got = n1.metrics().get("ringkv_ring_stale_replans_total", 0)
        if got > replans0:
            break
        h.check(time.time() < deadline, "R neither answered nor waiting")
        time.sleep(0.05)
    h.check("r" not in box or box["r"].value != b"v1",
            "an acknowledged write lost: R returned v1 after W2 v2 was "
            "acknowledged: %r" % box)
    h.check(t.is_alive(), "R answered before n1 had the new ring: %r" % box)
    print("R through n1 waits for the ring (replans %d -> %d)" %
          (replans0, n1.metrics().get("ringkv_ring_stale_replans_total", 0)))
    for rule in deaf:  # n1 hears gossip again; B stays cut off from it
        net._ipt("-D", partition.CHAIN, *rule)
    t.join(30)
    h.check(not t.is_alive(), "R never answered")
    print("R through n1 (planned again on the new ring): %r" % box)
    h.check("r" in box and not box["r"].err and box["r"].value == b"v2",
            "R after n1 caught up: %r" % box)
    h.check(n1.status()["epoch"] > epoch_before, "n1 never caught up")
    net.heal()


if __name__ == "__main__":
    h.run(main)
