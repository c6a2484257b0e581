#!/usr/bin/env python3
"""Regression: one slow replica made the coordinator shed with OVERLOADED.

Admission control counted a request until its last replica answered, not
until the client was answered. With one replica frozen (SIGSTOP, not yet
convicted DOWN) every QUORUM write is answered after two acks but its RPC
to the frozen replica stays outstanding until write_timeout_ms, so after
max_inflight such writes the node answered OVERLOADED to every request,
though it had nothing in flight for any client.

Proves: with max_inflight 16 and one replica frozen, 3 x max_inflight
sequential QUORUM writes (each answered before the next is sent) all
succeed, and QUORUM reads of them succeed too; after SIGCONT the cluster
serves ALL writes again.
"""
import signal

import harness as h

MAX_INFLIGHT = 16


def main():
    ips = ["127.0.0.81", "127.0.0.82", "127.0.0.83"]
    # the frozen replica must not be convicted DOWN during the test (a
    # DOWN replica gets hints, not RPCs), and its RPCs must stay
    # outstanding: slow gossip, a high conviction threshold, long timeouts
    c = h.Cluster(ips, seeds=ips[:1], replication="dc1:3",
                  gossip_interval_ms=1000, phi_convict_threshold=16,
                  suspicion_timeout_ms=60000,
                  write_timeout_ms=60000, read_timeout_ms=60000)
    for i, n in enumerate(c.nodes):
        n.extra["rack"] = "r%d" % (i + 1)
    c.nodes[0].extra["max_inflight"] = MAX_INFLIGHT
    c.start()
    c.wait_converged(timeout=60)
    n1, n2, n3 = c.nodes

    cl = n1.client(timeout=30)
    r = cl.call("PUT", key="warm", value="1", cl="ALL")
    h.check(not r.err, "ALL write before the freeze: %r" % r)
    n3.proc.send_signal(signal.SIGSTOP)
    try:
        writes = 3 * MAX_INFLIGHT
        for i in range(writes):
            r = cl.call("PUT", key="slow%d" % i, value="v%d" % i,
                        cl="QUORUM")
            h.check(not r.err, "QUORUM write %d of %d with a frozen replica "
                    "(max_inflight %d): %r" % (i + 1, writes, MAX_INFLIGHT,
                                               r))
        print("%d QUORUM writes answered with a frozen replica "
              "(max_inflight %d)" % (writes, MAX_INFLIGHT))
        for i in range(0, writes, 7):
            r = cl.call("GET", key="slow%d" % i, cl="QUORUM")
            h.check(r.value == ("v%d" % i).encode(),
                    "QUORUM read with a frozen replica: %r" % r)
    finally:
        n3.proc.send_signal(signal.SIGCONT)
    c.wait_converged(timeout=60)
    r = cl.call("PUT", key="after", value="1", cl="ALL")
    h.check(not r.err, "ALL write after SIGCONT: %r" % r)
    cl.close()
    for n in c.nodes:
        h.check(n.stop() == 0, "%s unclean exit" % n.name)


if __name__ == "__main__":
    h.run(main)
