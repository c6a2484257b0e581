#!/usr/bin/env python3
"""Regression (unresolved_seed_lone_cluster): a new node whose seeds did not
resolve when it started formed a cluster of its own.

A seed given as a host name was resolved once, at start; one that did not
resolve then (a container not started yet, DNS still catching up) was
dropped for good. A node left with no seed was taken for its own only
seed: a fresh one joined alone, with a ring of its own (boot.joined
peers=0), and never looked for the real cluster again -- two clusters
with the same name; a restarted one served at once, as if it were a
one-node cluster. Now an unresolved seed is kept by name and gossip
resolves it again (every second until it resolves), so the node waits for
its seeds (boot.waiting for=seeds) and joins the cluster once the name
resolves.

Gossip resolves such a name off the event loop (uv_getaddrinfo, kept for
30 s): resolving it on the loop at each send would stall the node for as
long as the resolver takes, every gossip round, for as long as the name
does not resolve.

n1 (127.0.0.2) seeds itself. n2 (127.0.0.3) has the single seed
"ringkv-test-seed", a name that fakedns.c (LD_PRELOAD) fails to resolve
until the test lets it resolve to 127.0.0.2, each answer after 1 s (a slow
resolver) -- no DNS query is made. For 3 s (well past n2's ring delay) n2
must not join, and must answer each of its PINGs in less than the
resolver's 1 s; then the name resolves and n1 and n2 must converge on one
ring with both UN.
"""
import os
import time

import harness as h

IPS = ["127.0.0.2", "127.0.0.3"]
NAME = "ringkv-test-seed"
DELAY_MS = 1000


def main():
    c = h.Cluster(IPS, seeds=IPS[:1], replication="dc1:2")
    n1, n2 = c.nodes
    n2.extra["seeds"] = NAME
    marker = h.fake_host(n2, NAME, IPS[0], delay_ms=DELAY_MS)
    n1.start()
    c.wait_converged(timeout=60)
    n2.start()
    deadline = time.time() + 30
    while True:  # n2 resolves its seeds once, on the loop, before serving
        try:
            h.status_of(IPS[1])
            break
        except (OSError, ConnectionError):
            h.check(time.time() < deadline, "n2 never served")
            time.sleep(0.2)
    slowest = 0.0
    cl = n2.client(timeout=30)
    t_end = time.time() + 3
    while time.time() < t_end:
        t0 = time.time()
        r = cl.call("PING")
        slowest = max(slowest, time.time() - t0)
        h.check(not r.err, "PING: %r" % r)
        time.sleep(0.05)
    cl.close()
    print("n2's slowest PING while its seed does not resolve: %.0f ms" %
          (slowest * 1000))
    h.check(slowest < DELAY_MS / 1000.0,
            "n2 took %.0f ms to answer a PING: its loop waited on the "
            "resolver (%d ms)" % (slowest * 1000, DELAY_MS))
    log = n2.log()
    h.check("event=boot.joined" not in log,
            "n2 joined while its seed did not resolve:\n" +
            "\n".join(l for l in log.splitlines() if "boot." in l))
    h.check("event=boot.waiting for=seeds" in log,
            "n2 did not say it waits for its seeds")
    h.check("event=config.seed_unresolved" in log,
            "n2 did not log the unresolved seed")

    os.remove(marker)
    c.wait_converged(timeout=60)
    # the line where n2 chose its tokens: boot.joining when it streams its
    # ranges in from n1 (auto_bootstrap), boot.joined when it does not
    chose = [l for l in n2.log().splitlines()
             if "event=boot.joining" in l or "event=boot.joined" in l]
    h.check(chose and "peers=1" in chose[0],
            "n2 did not join with n1 as its peer: %r" % chose[:1])
    print("n2 waited for its seed, then joined n1's cluster")


if __name__ == "__main__":
    h.run(main)
