#!/usr/bin/env python3
"""Regression restart_stamps_future: a node restarted after kill -9 stamped
its writes up to max_clock_drift_ms in the future, and a write through
another node, started after one through it was acknowledged, lost
last-write-wins to it.

A node saves its clock's ceiling ahead of its clock while it runs; after a
crash it restores its clock to that ceiling, so that no timestamp it issues
is below one it issued before. It waited only until the ceiling was within
max_clock_drift_ms (500 ms) of the wall clock, so for up to 500 ms after it
served again its timestamps were in the future. Found by test_history (the
lost writes came 0.3-1.5 s after a node was killed and restarted). Now it
waits until the wall clock has passed the ceiling (log hlc.wait).

Five nodes (127.0.1.131-135, RF 3, a rack each, max_clock_drift_ms 10000:
with the default the window closed while n1 waited for its peers to answer,
so the test caught the bug only when they answered at once). n1 coordinates
writes for
2 s (its ceiling is saved ahead), is killed -9 and started again. From the
moment it serves, for 2 s: a PUT of key k through n1 at QUORUM, then, 2 ms
after its answer (more than a millisecond: within one millisecond two
coordinators may order two writes either way, docs/storage.md), a PUT of k
through Y at QUORUM, then a GET of k through Y at QUORUM, where Y and n1
are not replicas of k. Every GET must return Y's value. Before the fix the
first rounds returned n1's.
"""
# ctest: alongside others
import time

import harness as h

IPS = ["127.0.1.%d" % i for i in range(131, 136)]


def main():
    # max_clock_drift_ms far above the ceiling's window (3 s): before the
    # fix n1 then did not wait at all, and its clock stayed in the future
    # for seconds, not for at most 500 ms after its port opened
    c = h.Cluster(IPS, seeds=IPS[:2], replication="dc1:3",
                  max_clock_drift_ms=10000)
    for i, n in enumerate(c.nodes):
        n.extra["rack"] = "r%d" % (i + 1)
    c.start()
    c.wait_converged(timeout=60)
    n1 = c.nodes[0]
    keys = ["k%d" % i for i in range(200)]
    eps = h.endpoints(n1, keys)
    key = next(k for k in keys if "n1" not in eps[k])
    y = next(n for n in c.nodes if n.name not in eps[key] and n is not n1)
    print("key %s: replicas %s; first writer n1, then %s" %
          (key, eps[key], y.name))

    cl = n1.client()
    t = time.time()
    i = 0
    while time.time() < t + 2:
        r = cl.call("PUT", key="warm%d" % i, value=b"x", cl="QUORUM")
        h.check(not r.err, "warm-up PUT: %r" % r)
        i += 1
    cl.close()
    n1.kill9()
    n1.start()
    deadline = time.time() + 60
    cl = h.client_when_open(n1, within=60)

    def put_n1(value):
        """PUT k through n1, again while it has not heard its peers yet
        (UNAVAILABLE, RING_STALE) or its port is not open."""
        while True:
            r = cl.call("PUT", key=key, value=value, cl="QUORUM")
            if r.err not in ("UNAVAILABLE", "RING_STALE"):
                return r
            h.check(time.time() < deadline, "n1 never served again: %r" % r)
            time.sleep(0.01)

    h.check(not put_n1(b"first").err, "n1's first PUT")
    start = time.time()
    waits = [ln for ln in n1.log().splitlines() if "event=hlc.wait " in ln]
    print("n1 serves again after %d warm-up writes; %s" %
          (i, waits[-1].split("event=")[1] if waits else "no hlc.wait"))

    cy = y.client()
    lost, rounds = [], 0
    while time.time() < start + 2:
        r1 = put_n1(b"n1-%d" % rounds)
        time.sleep(0.002)
        r2 = cy.call("PUT", key=key, value=b"y-%d" % rounds, cl="QUORUM")
        r3 = cy.call("GET", key=key, cl="QUORUM")
        h.check(not r1.err and not r2.err and not r3.err,
                "round %d: %r %r %r" % (rounds, r1, r2, r3))
        if r3.value != b"y-%d" % rounds:
            lost.append((rounds, round(time.time() - start, 3), r3.value))
        rounds += 1
    cl.close()
    cy.close()
    print("%d rounds, %d lost the later write %s" %
          (rounds, len(lost), lost[:3]))
    h.check(not lost, "the write through %s, started after n1's was "
            "acknowledged, lost to it: n1's clock ran ahead after its "
            "restart" % y.name)


if __name__ == "__main__":
    h.run(main)
