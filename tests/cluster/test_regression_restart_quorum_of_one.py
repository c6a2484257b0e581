#!/usr/bin/env python3
"""Regression: a restarted node coordinated with a ring of itself alone.

A restarted node builds its ring from what it saved, its own tokens, and
learns the others' from gossip, which takes a gossip round or two. Until
then it coordinated requests with a one-node ring: a QUORUM write through
it was acknowledged by itself alone (need 1), and a key could be stored on
a node that is not its replica. Now a restarted node answers RING_STALE
(retry via another node) until it has heard a peer (or, with no peer to
hear, for at most ten gossip intervals).

Three nodes (127.0.0.14-16), RF 3, gossip every second. n2 is stopped and
started again; a QUORUM write is sent through it as soon as its client port
accepts: it is answered RING_STALE, or, if gossip was already through,
acknowledged by 2 of the 3 replicas it needs (or TIMEOUT, needing 2, when
their acks are late) -- never with need 1. Once
n2 has heard the others it serves QUORUM writes with need 2.

Also a regression: STATUS on a node whose gossip had not yet brought a
peer's LOAD copied from a NULL pointer (memcpy of 0 bytes), which the
sanitizer build aborted on: n2 died under wait_converged's STATUS, 4 runs
of 4 under ASan+UBSan.
"""
# ctest: alongside others
import socket

import harness as h

IPS = ["127.0.0.14", "127.0.0.15", "127.0.0.16"]


def main():
    c = h.Cluster(IPS, seeds=IPS[:1], replication="dc1:3",
                  gossip_interval_ms=1000)
    for i, n in enumerate(c.nodes):
        n.extra["rack"] = "r%d" % (i + 1)
    c.start()
    c.wait_converged(timeout=60)
    n2 = c.nodes[1]
    h.check(n2.stop() == 0, "n2 unclean exit")
    n2.start()
    cl = h.client_when_open(n2, within=30, timeout=10)
    r = cl.call("PUT", key="early", value="1", cl="QUORUM")
    cl.close()
    print("QUORUM write through n2 just restarted: %r (acks %r, need %r)" %
          (r.err or "OK", r.acks, r.get(6)))
    # The regression is a write acknowledged with need 1 (a ring of n2
    # alone). A TIMEOUT with need 2 planned on the whole ring: under load
    # (both trees of make test) the replicas' acks can miss the deadline of
    # a node that has just started (seen once, 2026-12-07).
    h.check(r.get(6) != 1, "a QUORUM write through the restarted n2 was "
            "answered %r with need 1: its ring held only itself" %
            (r.err or "OK"))
    h.check(r.err in ("RING_STALE", "TIMEOUT") or
            (not r.err and r.get(6) == 2),
            "a QUORUM write through the restarted n2 was answered %r with "
            "need %r" % (r.err or "OK", r.get(6)))
    c.wait_converged(timeout=60)
    # RING_STALE too until n2 has judged its clock against most peers'
    # (docs/storage.md): sent again while it answers so
    r = h.call_served(n2, "PUT", key="later", value="1", cl="QUORUM")
    h.check(not r.err and r.get(6) == 2, "QUORUM write through n2 once "
            "settled: %r" % r)
    h.check("event=ring.settled" in n2.log(), "n2 did not log ring.settled")


if __name__ == "__main__":
    h.run(main)
