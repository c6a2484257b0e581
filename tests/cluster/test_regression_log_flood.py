#!/usr/bin/env python3
"""Regression log_flood: input from anyone wrote a log line each.

A flood of bad gossip datagrams (144k/s for 25 s) wrote 2.6 million log
lines, and 20,000 failed AUTHs 20,000: no input may fill the disk through
the log. Such events (gossip.auth_fail, gossip.bad_packet,
client.auth_fail, resp.auth_fail, internode.handshake_fail) are now
written at most once every 10 s each, the next line saying how many were
left out (suppressed=N); the metrics still count every one.

One node (127.0.1.170, RF 1, a password; failed HELLOs answered after
1 ms each, auth_fail_delay_max_ms: at the default a failure's answer waits
up to 5 s, test_regression_auth_failures_unslowed). Proves: 5,000 garbage datagrams
to its gossip port and 500 wrong-password HELLOs on its native port leave
at most 3 lines of each event in its log (the first, and at most one per
10 s after), the metrics count all 500 wrong passwords and the bad gossip
packets that arrived (at least 1,000: the kernel drops some), and the node
still answers the right password.
"""
# ctest: alongside others
import os
import socket
import time

import harness as h

IP = "127.0.1.170"
PW = "flood-pw"


def lines(node, event):
    return [l for l in node.log().splitlines() if "event=%s " % event in l]


def main():
    c = h.Cluster([IP], seeds=[IP], replication="dc1:1", requirepass=PW,
                  auth_fail_delay_max_ms=1)
    c.start()
    n = c.nodes[0]
    deadline = time.time() + 30
    while True:
        try:
            cl = n.client(password=PW)
            r = cl.call("PING")
            cl.close()
            if not r.err:
                break
        except (OSError, ConnectionError, RuntimeError):
            pass
        h.check(time.time() < deadline, "the node did not come up")
        time.sleep(0.3)

    udp = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    for i in range(5000):
        udp.sendto(os.urandom(40 + i % 200), (IP, 7000))
        if i % 500 == 499:
            time.sleep(0.05)  # let the node read them: a full socket drops
    udp.close()
    cl = n.client()
    for _ in range(500):
        r = cl.call("HELLO", password="wrong")
        h.check(r.err == "AUTH", "wrong password: %r" % r)
    cl.close()

    m = n.metrics(password=PW)
    auth = m.get("ringkv_client_auth_failures_total", 0)
    h.check(auth == 500, "client auth failures counted: %r" % auth)
    deadline = time.time() + 10
    while True:
        m = n.metrics(password=PW)
        bad = m.get("ringkv_gossip_packets_rejected_total", 0)
        if bad >= 1000 or time.time() > deadline:
            break
        time.sleep(0.2)
    counted = {k: v for k, v in m.items() if k.startswith("ringkv_gossip_")
               and ("rejected" in k or "auth" in k or "malformed" in k)}
    logged = {e: len(lines(n, e)) for e in
              ("gossip.auth_fail", "gossip.bad_packet", "client.auth_fail")}
    print("counted %r; logged %r" % (counted, logged))
    # UDP: some are dropped before the node reads them
    h.check(counted.get("ringkv_gossip_packets_rejected_total", 0) >= 1000,
            "bad gossip packets counted: %r" % counted)
    h.check(all(v <= 3 for v in logged.values()),
            "a flood of bad input flooded the log: %r" % logged)
    h.check(logged["client.auth_fail"] >= 1, "no client.auth_fail line")
    cl = n.client(password=PW)
    r = cl.call("PING")
    cl.close()
    h.check(not r.err, "PING with the right password: %r" % r)


if __name__ == "__main__":
    h.run(main)
