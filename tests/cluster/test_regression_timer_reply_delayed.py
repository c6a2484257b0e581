#!/usr/bin/env python3
"""Regression: a reply made in a timer callback waited for the loop's next
wake-up.

The node flushed client output after the poll only (its check handle). A
reply made by a timer -- a read answered TIMEOUT at its deadline -- was
queued and then sat there while the loop blocked in its poll, until
something else woke it: the metrics timer (every second) or a gossip
round. Now the same end-of-turn work also runs before the poll blocks (a
prepare handle, as net/conn.c's flusher does).

Two nodes (127.0.0.194-195), RF 1, read_timeout_ms T = 200, gossip every
second and a high conviction threshold so that n2, frozen (SIGSTOP), is not
DOWN. 20 ONE reads at n1, one after another, of a key only n2 holds: each
is answered TIMEOUT at its deadline, and the median time past T is well
under 150 ms (without the flush each waited for the next metrics tick, up
to a second: about 800 ms in this sequence).
"""
import signal
import time

import harness as h

T = 200  # read_timeout_ms
IPS = ["127.0.0.194", "127.0.0.195"]
READS = 20


def main():
    c = h.Cluster(IPS, seeds=IPS[:1], replication="dc1:1",
                  read_timeout_ms=T, gossip_interval_ms=1000,
                  phi_convict_threshold=16, suspicion_timeout_ms=60000)
    c.start()
    c.wait_converged(timeout=60)
    n1, n2 = c.nodes
    cl = n1.client(timeout=10)
    key = next(k for k in ("k%d" % i for i in range(1000))
               if [e[0] for e in cl.call("ENDPOINTS", key=k).get(36)] ==
               ["n2"])
    r = cl.call("PUT", key=key, value="v", cl="ONE")
    h.check(not r.err, "write: %r" % r)
    n2.proc.send_signal(signal.SIGSTOP)
    late = []
    try:
        for _ in range(READS):
            t0 = time.time()
            r = cl.call("GET", key=key, cl="ONE")
            late.append((time.time() - t0) * 1000 - T)
            h.check(r.err == "TIMEOUT", "GET with n2 frozen: %r" % r)
        seen = n1.status()["rows"].get("n2", {}).get(5)
    finally:
        n2.proc.send_signal(signal.SIGCONT)
    cl.close()
    late.sort()
    median = late[len(late) // 2]
    print("%d ONE reads with the replica frozen: TIMEOUT, %.0f to %.0f ms "
          "past read_timeout_ms %d, median %.0f (n1 sees n2 %s)" %
          (READS, late[0], late[-1], T, median, seen))
    h.check(seen == "UN", "n2 was convicted DOWN during the reads (%r): the "
            "test did not test anything" % seen)
    h.check(median < 150, "TIMEOUT replies left %.0f ms (median) after the "
            "deadline: they waited for the loop to wake" % median)
    c.wait_converged(timeout=60)


if __name__ == "__main__":
    h.run(main)
