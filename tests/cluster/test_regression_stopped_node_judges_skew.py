#!/usr/bin/env python3
"""Regression (stopped_node_judges_skew): a node paused for a while (SIGSTOP,
a VM's pause, a long stall of its loop) judged its own clock ahead of its
peers' when it went on, refused their writes as CLOCK_SKEW and coordinated
none.

Gossip compares each peer's wall clock, carried in its packets, with this
node's at the packet's receipt (gossip/clock.c). The receipt was taken when
the loop read the packet: packets that waited in the socket while the node
was stopped looked as old as the wait, their senders as far behind, and
the node as far ahead of them. In CI (test_del_read_failure) n2, stopped
for 1.5 s, then refused n1's delete: "CLOCK_SKEW replicas refused the
write's timestamp". The receipt is now the kernel's arrival time of the
datagram (net/udp.c), which a wait in the socket does not change.

Three nodes (127.0.7.11-13), gossip every 200 ms. n2 is stopped, then n1
and n3 (so that the newest packet waiting for n2 is 1.5 s old), then n2
goes on alone for a second, hearing only the packets that waited, and
then n1 and n3 go on. n2 must not have logged clock.skewed, and writes
at ALL through n1 and through n2 succeed afterwards.
"""
import os
import signal
import time

import harness as h

IPS = ["127.0.7.11", "127.0.7.12", "127.0.7.13"]


def main():
    c = h.Cluster(IPS, seeds=IPS[:1], replication="dc1:3",
                  phi_convict_threshold=16, suspicion_timeout_ms=60000,
                  write_timeout_ms=10000)
    c.start()
    c.wait_converged(timeout=60)
    n1, n2, n3 = c.nodes
    # n2's estimates of its peers' clocks are made, and right
    h.wait_metric(n2, "ringkv_gossip_packets_in_total",
                  n2.metrics().get("ringkv_gossip_packets_in_total", 0) + 20)
    h.check(n2.metrics().get("ringkv_clock_skewed", 0) == 0,
            "n2 skewed before any pause")
    for n in (n1, n2):
        r = h.call_served(n, "PUT", key="before", value="v", cl="ALL")
        h.check(not r.err, "write at ALL through %s: %r %r" %
                (n.name, r.err, r.msg))

    os.kill(n2.proc.pid, signal.SIGSTOP)
    time.sleep(2.0)
    for n in (n1, n3):
        os.kill(n.proc.pid, signal.SIGSTOP)
    time.sleep(1.5)
    os.kill(n2.proc.pid, signal.SIGCONT)
    time.sleep(1.0)  # n2 reads what waited, and judges at its ticks
    for n in (n1, n3):
        os.kill(n.proc.pid, signal.SIGCONT)
    time.sleep(0.5)

    log = n2.log()
    h.check("event=clock.skewed" not in log,
            "n2 judged its clock skewed after a pause:\n%s" % "\n".join(
                l for l in log.splitlines() if "clock." in l))
    for n in (n1, n2):
        r = h.call_served(n, "PUT", key="after-" + n.name, value="v",
                          cl="ALL", timeout=30)
        h.check(not r.err, "write at ALL through %s after the pause: %r %r"
                % (n.name, r.err, r.msg))
    for n in c.nodes:
        h.check(n.stop() == 0, "%s unclean exit" % n.name)


if __name__ == "__main__":
    h.run(main)
