#!/usr/bin/env python3
"""Twelve ringkvd processes on 127.0.0.21-32 learn each other over gossip.

Proves: nodes started together form one cluster unaided (each fresh node
takes its turn to choose tokens, and joins take turns to stream only where
their ranges overlap), every node ends with the same ring epoch
and fingerprint and sees all twelve UN; a thirteenth process with the right
cluster name but the wrong secret is never admitted, and its packets are
counted as rejected; random bytes on the gossip port are rejected too and
the cluster keeps working.
"""
import os
import socket
import time

import harness as h

N = 12


def main():
    ips = ["127.0.0.%d" % (21 + i) for i in range(N)]
    c = h.Cluster(ips, seeds=ips[:2], replication="dc1:3")
    c.start()
    # twelve fresh nodes choose their tokens one after another and stream
    # at once where their ranges do not overlap (docs/streaming.md); under
    # ASan on a loaded machine the joins took over 120 s when each waited
    # for the one before (CI, 2026-12-06: 10 of 12 UN by then)
    epoch, fp = c.wait_converged(timeout=300)
    print("converged: %d nodes, epoch %d, fingerprint %016x" % (N, epoch, fp))
    st = c.nodes[5].status()
    h.check(len(st["rows"]) == N, "node 6 sees %d rows" % len(st["rows"]))
    owns = sum(r.get(8, 0) for r in st["rows"].values())
    h.check(abs(owns - 3.0) < 0.01, "effective ownership sums to %f" % owns)

    # an intruder: right cluster name, wrong secret
    bad_secret = os.path.join(c.dir, "bad-secret")
    with open(bad_secret, "wb") as f:
        f.write(b"not the secret\n")
    intruder = h.Node(c, "intruder", "127.0.0.40",
                      {"cluster_secret_file": bad_secret})
    intruder.start()
    # random bytes straight at a seed's gossip port
    s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    for i in range(20):
        s.sendto(os.urandom(50 + i * 10), (ips[0], 7000))
    s.sendto(b"RKG\x01" + os.urandom(100), (ips[0], 7000))
    s.close()
    deadline = time.time() + 30
    rejected = 0
    while time.time() < deadline:
        m = c.nodes[0].metrics()
        rejected = m.get("ringkv_gossip_packets_rejected_total", 0)
        auth = m.get("ringkv_gossip_auth_failures_total", 0)
        if auth >= 3 and rejected >= 20:
            break
        time.sleep(0.5)
    print("seed 1: %d gossip packets rejected (%d bad MAC)" %
          (rejected, auth))
    h.check(auth >= 3, "intruder packets not counted as auth failures")
    h.check(rejected >= 20, "random packets not counted")
    for n in c.nodes:
        rows = n.status()["rows"]
        h.check("intruder" not in rows, "%s admitted the intruder" % n.name)
    h.check(intruder.alive(), "intruder process died")
    h.check(all(n.alive() for n in c.nodes), "a node died")
    intruder.kill9()
    # still one ring after all that
    epoch2, fp2 = c.wait_converged(timeout=30)
    h.check((epoch2, fp2) == (epoch, fp), "ring changed by the intruder")
    # clean shutdown of every node
    for n in c.nodes:
        rc = n.stop()
        h.check(rc == 0, "%s exited with %r on SIGTERM" % (n.name, rc))
        h.check("store.closed" in n.log(), "%s did not close its store" %
                n.name)


h.run(main)
