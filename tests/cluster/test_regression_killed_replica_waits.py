#!/usr/bin/env python3
"""A killed replica is not waited for while gossip still says it is UP.

Three nodes, RF 3, with a high conviction threshold and a long suspicion
timeout, so that gossip does not convict a dead node for a long while, and
read_timeout_ms 10000. n3 is killed (-9): its connections close and
connecting to it is refused. Before gossip convicts it (n1 still shows it
UN), an ALL read through n1 answers UNAVAILABLE at once, not TIMEOUT at the
read's deadline; QUORUM reads succeed at once, and QUORUM writes succeed
and are hinted for n3. (Until 2026-12-06 the coordinator chose n3 as long
as gossip said UP, and the ALL read answered TIMEOUT.) A node frozen but
connected still times out: tests/cluster/test_read_frozen_replica.py.
"""
import time

import harness as h

TIMEOUT_MS = 10000


def main():
    ips = ["127.0.1.240", "127.0.1.241", "127.0.1.242"]
    c = h.racked_cluster(ips, replication="dc1:3", read_timeout_ms=TIMEOUT_MS,
                         write_timeout_ms=TIMEOUT_MS,
                         phi_convict_threshold=100,
                         suspicion_timeout_ms=600000)
    n1, n2, n3 = c.nodes
    keys = ["kr%d" % i for i in range(24)]
    cl = n1.client(timeout=30)
    res = cl.pipeline([("PUT", {"key": k, "value": k, "cl": "ALL"})
                       for k in keys])
    h.check(not [r for r in res if r.err], "ALL writes: %r" % res[:2])

    n3.kill9()
    time.sleep(0.3)  # its connections' ends reach n1

    t0 = time.time()
    r = cl.call("GET", key=keys[0], cl="ALL")
    took = time.time() - t0
    print("ALL read after kill -9 of n3: %s (%s) in %.0f ms" %
          (r.err, r.msg, took * 1000))
    h.check(r.err == "UNAVAILABLE" and took < 5.0,
            "ALL read with n3 killed: %r in %.1f s (read_timeout_ms %d)" %
            (r, took, TIMEOUT_MS))

    t0 = time.time()
    res = cl.pipeline([("GET", {"key": k, "cl": "QUORUM"}) for k in keys])
    took = time.time() - t0
    print("24 QUORUM reads: errors %r in %.0f ms" %
          (sorted(set(x.err for x in res if x.err)), took * 1000))
    h.check(all(not x.err and x.value == k.encode()
                for k, x in zip(keys, res)),
            "QUORUM reads with n3 killed: %r" %
            [(x.err, x.msg) for x in res if x.err][:3])
    h.check(took < 5.0, "QUORUM reads took %.1f s" % took)

    hints0 = n1.metrics().get("ringkv_hints_stored_total", 0)
    t0 = time.time()
    res = cl.pipeline([("PUT", {"key": k, "value": "w", "cl": "QUORUM"})
                       for k in keys])
    took = time.time() - t0
    h.check(not [x for x in res if x.err], "QUORUM writes with n3 killed: "
            "%r" % [(x.err, x.msg) for x in res if x.err][:3])
    h.check(took < 5.0, "QUORUM writes took %.1f s" % took)
    cl.close()
    deadline = time.time() + 20  # hints are written on the thread pool
    hints = hints0
    while time.time() < deadline:
        hints = n1.metrics().get("ringkv_hints_stored_total", 0)
        if hints - hints0 >= len(keys):
            break
        time.sleep(0.2)
    print("QUORUM writes in %.0f ms, n1 stored %d hints for n3" %
          (took * 1000, hints - hints0))
    h.check(hints - hints0 >= len(keys), "n1 stored only %d hints" %
            (hints - hints0))

    seen = n1.status()["rows"].get("n3", {}).get(5)
    h.check(seen == "UN", "gossip convicted n3 already (%r): the test did "
            "not test anything" % seen)


if __name__ == "__main__":
    h.run(main)
