#!/usr/bin/env python3
"""QUORUM reads succeed while a replica is frozen, within read_timeout_ms.

Three nodes, RF 3. One replica is frozen (SIGSTOP: not yet convicted DOWN
by gossip) and 24 QUORUM reads are pipelined to another node at once. A
read that asked the frozen replica gets no answer from it; at half of
read_timeout_ms (its hedge point, docs/config.md) it asks the third
replica, which answers at once: every read succeeds, the last one after
half a read timeout and a round trip, before the reads' deadline. (Until
2026-12-03 the third replica was asked only once the frozen one had timed
out, with a read timeout of its own: a read took one read timeout when one
replica stalled and one per stalled replica in turn.)
"""
import signal
import time

import harness as h

TIMEOUT_MS = 1200


def main():
    ips = ["127.0.0.110", "127.0.0.111", "127.0.0.112"]
    c = h.racked_cluster(ips, replication="dc1:3", read_timeout_ms=TIMEOUT_MS)
    n1, n2, n3 = c.nodes
    keys = ["rd%d" % i for i in range(24)]
    cl = n1.client()
    res = cl.pipeline([("PUT", {"key": k, "value": k, "cl": "ALL"})
                       for k in keys])
    h.check(not [r for r in res if r.err], "ALL writes: %r" % res[:2])
    cl.close()

    n3.proc.send_signal(signal.SIGSTOP)
    try:
        cl = n1.client(timeout=30)
        t0 = time.time()
        res = cl.pipeline([("GET", {"key": k, "cl": "QUORUM"})
                           for k in keys])
        took = (time.time() - t0) * 1000
        cl.close()
    finally:
        n3.proc.send_signal(signal.SIGCONT)
    errs = sorted(set(r.err for r in res if r.err))
    ok = sum(1 for r in res if not r.err)
    print("24 QUORUM reads, n3 frozen: %d OK, errors %r, all answered in "
          "%.0f ms (read_timeout_ms %d)" % (ok, errs, took, TIMEOUT_MS))
    h.check(all(r.value == k.encode() for k, r in zip(keys, res)
                if not r.err), "a read returned a wrong value")
    h.check(not errs, "QUORUM reads failed with a replica frozen: %r" %
            [(k, r.err, r.msg) for k, r in zip(keys, res) if r.err][:3])
    # Some read asked n3 (its answer was needed): the pipeline waited for
    # it until the hedge point, and then asked n2, before the deadline.
    h.check(took >= TIMEOUT_MS * 0.45,
            "no read waited for the frozen replica (%.0f ms): the test did "
            "not test anything" % took)
    h.check(took < TIMEOUT_MS,
            "the reads took %.0f ms with read_timeout_ms %d: the third "
            "replica was not asked before the deadline" % (took, TIMEOUT_MS))
    hedges = n1.metrics().get("ringkv_read_hedges_total", 0)
    h.check(hedges >= 1, "no read asked past the frozen replica (%r)" %
            hedges)
    c.wait_converged(timeout=30)


if __name__ == "__main__":
    h.run(main)
