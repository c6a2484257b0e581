#!/usr/bin/env python3
"""Regression: a gossip datagram captured on the wire and sent again was
answered as if new, at the source address the sender wrote in it: a SYN
replayed a minute later got an ACK back (92 bytes for 77 on the tree
before, in this test's setup), with every state newer than its digests (a
reflector that also told whoever asked every node's tokens and load).

Two nodes, n1 (127.0.0.136) and n2 (127.0.0.137). n2 also lists
127.0.0.138 as a seed, where this test listens: the SYNs n2 sends there
are real datagrams (numbered, MAC'd under the cluster secret), captured
without ever reaching n1. The test sends one to n1 from 127.0.0.139, a
forged source (the "victim").

Proves: n1 takes the captured SYN once (it has not seen it) and answers n2
at the address n2 gossips, sending the victim nothing; the same datagram
again, at once and a while later, is dropped: nothing comes back to the
victim, n1 counts each in ringkv_gossip_replayed_total (and in
ringkv_gossip_packets_rejected_total) and logs gossip.replayed; the
cluster stays converged.
"""
# ctest: alongside others
import socket
import time

import harness as h

GOSSIP_PORT = 7000
TRAP = "127.0.0.138"
VICTIM = "127.0.0.139"


def udp(ip):
    s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    s.bind((ip, GOSSIP_PORT))
    return s


def next_syn(trap):
    """The next gossip packet n2 sends the trap (drained of older ones)."""
    trap.setblocking(False)
    try:
        while True:
            trap.recvfrom(65536)
    except BlockingIOError:
        pass
    trap.settimeout(30)
    while True:
        pkt, _ = trap.recvfrom(65536)
        if pkt[:3] == b"RKG":
            return pkt


def nothing_for(sock):
    """What sock has received and not read (b"" if nothing)."""
    sock.setblocking(False)
    got = b""
    try:
        while True:
            got += sock.recvfrom(65536)[0]
    except BlockingIOError:
        return got


def main():
    ips = ["127.0.0.136", "127.0.0.137"]
    trap, victim = udp(TRAP), udp(VICTIM)
    c = h.Cluster(ips, seeds=ips[:1], replication="dc1:2")
    n1, n2 = c.nodes
    n2.extra["seeds"] = "%s,%s" % (ips[0], TRAP)
    c.start()
    epoch, fp = c.wait_converged(timeout=60)

    pkt = next_syn(trap)
    m = n1.metrics()
    replayed0 = m.get("ringkv_gossip_replayed_total", 0)
    rejected0 = m.get("ringkv_gossip_packets_rejected_total", 0)
    for i in range(4):
        victim.sendto(pkt, (ips[0], GOSSIP_PORT))
        if i == 1:
            time.sleep(2)  # later copies: no different
    # three copies after the first: once counted, n1 has handled all four
    got = h.wait_metric(n1, "ringkv_gossip_replayed_total", replayed0 + 3)
    h.check(got == replayed0 + 3,
            "n1 counted %d replays of the captured SYN (want 3)" %
            (got - replayed0))
    rejected = n1.metrics().get("ringkv_gossip_packets_rejected_total", 0)
    h.check(rejected >= rejected0 + 3,
            "replays not among the rejected packets (%d -> %d)" %
            (rejected0, rejected))
    back = nothing_for(victim)
    h.check(back == b"", "the forged source got %d bytes back for a "
            "%d-byte SYN sent 4 times" % (len(back), len(pkt)))
    h.check("event=gossip.replayed" in n1.log(), "no gossip.replayed line")
    print("a %d-byte SYN of n2 sent 4 times from a forged source: 0 bytes "
          "back there, 3 copies dropped as replays" % len(pkt))

    h.check(c.wait_converged(timeout=30) == (epoch, fp), "ring changed")
    for n in c.nodes:
        h.check(n.stop() == 0, "%s unclean exit" % n.name)
    trap.close()
    victim.close()


h.run(main)
