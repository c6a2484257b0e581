#!/usr/bin/env python3
"""Regression: one node's clock, 10 minutes off, pulled the cluster's
data with it.

Replicas already refused a write stamped more than max_clock_drift_ms
ahead of their clocks, but the node whose clock was wrong did not know it.
Until 2026-12-06:
- a node 10 minutes ahead stored every write it coordinated in its own
  replica before the others refused it: the client got CLOCK_SKEW, yet the
  copy, stamped 10 minutes ahead, won every read that asked that node over
  the writes acknowledged through the others after it, and its TTL ran
  10 minutes long there;
- TTLs were expiry times from the coordinator's wall clock, judged by the
  reading coordinator's: a SET EX 300 through a node 10 minutes behind was
  acknowledged and at once invisible, a value SET EX 300 through a good
  node was invisible through a node ahead, and one SET EX 5 was still
  served 8 s later through a node behind;
- nothing said which node's clock was wrong.
Now gossip carries each node's wall clock, a node that most of its peers
see further off than max_clock_drift_ms is skewed (ringkv_clock_skewed,
`ringkv status`, INFO, log clock.skewed) and coordinates no writes; TTLs
run from the write's timestamp; a skewed node judges expiries by its
peers' time; and a node whose clock was ahead and has been put right
coordinates no write until its wall clock has caught up with its
timestamps.

1. Three nodes (127.0.2.21-23), RF 3, n3's wall clock 10 minutes ahead
   (tests/cluster/fakeclock.c). n3 reports the skew (metric, offset,
   status, INFO, log); n1 and n2 do not. Every key is first written
   through n3 (refused: CLOCK_SKEW, saying how far ahead) and then through
   n1 or n2 (acknowledged). A SET EX 300 through n1 is visible through n3
   with a TTL near 300; a SET EX 5 through n1 is gone through every node
   8 s after it was acknowledged. n1 stopped cleanly and restarted did not
   take up a clock dragged ahead (no hlc.restored). n3 is then killed and
   restarted with its clock right: it reports no skew, still refuses
   writes (the clock's ceiling it saved is 10 minutes ahead), and every
   acknowledged key reads back at QUORUM through each node with the value
   acknowledged last.
2. Three nodes (127.0.2.24-26), n3's clock 10 minutes behind. n3 reports
   the skew (behind) and refuses a SET EX 300; a SET EX 300 through n1 is
   visible through every node and a SET EX 5 through n1 is gone through
   every node 8 s after it was acknowledged.

Expiry bounds are correctness bounds (a value must be gone once its TTL
and a margin have passed), not speed thresholds.
"""
# ctest: alongside others
import re
import time

import harness as h

IPS_AHEAD = ["127.0.2.21", "127.0.2.22", "127.0.2.23"]
IPS_BEHIND = ["127.0.2.24", "127.0.2.25", "127.0.2.26"]
TEN_MIN = 10 * 60 * 1000
KEYS = 12
RESP = 6379


def call(node, op, **kw):
    return h.call_served(node, op, timeout=30, **kw)


def resp(node, *args):
    c = h.RespConn(node.ip, RESP)
    try:
        return c.call(*args)
    finally:
        c.s.close()


def wait_skewed(node):
    got = h.wait_metric(node, "ringkv_clock_skewed", 1, timeout=30)
    h.check(got == 1, "%s: ringkv_clock_skewed %r, its clock 10 minutes "
            "off" % (node.name, got))


def check_not_skewed(node):
    """Once node has heard its peers for a while (gossip every 200 ms:
    its estimates are made), it reports no skew."""
    h.wait_metric(node, "ringkv_gossip_packets_in_total",
                  node.metrics().get("ringkv_gossip_packets_in_total", 0) + 20)
    got = node.metrics().get("ringkv_clock_skewed", 0)
    h.check(got == 0, "%s reports skew, its clock right" % node.name)


def check_reports_skew(node, word):
    """node says, everywhere, that its clock is 10 minutes `word`."""
    wait_skewed(node)
    off = node.metrics().get("ringkv_clock_offset_ms", 0)
    sign = 1 if word == "ahead" else -1
    h.check(abs(off - sign * TEN_MIN) < 60000,
            "%s: ringkv_clock_offset_ms %r, its clock is 10 minutes %s" %
            (node.name, off, word))
    rc, out = h.cli(node, "status")
    h.check(rc == 0 and re.search(r"Clock: %s's clock is \d+ ms %s its "
                                  r"peers'" % (node.name, "ahead of"
                                               if word == "ahead"
                                               else "behind"), out),
            "`ringkv status` through %s does not say its clock is %s:\n%s"
            % (node.name, word, out))
    info = resp(node, "INFO", "ringkv")
    h.check(b"clock_skewed:1" in info, "INFO of %s: %r" % (node.name, info))
    h.check("event=clock.skewed" in node.log(),
            "%s did not log clock.skewed" % node.name)
    print("%s reports its clock %d ms off (metric, status, INFO, log)" %
          (node.name, off))


def check_refuses(node, key, word):
    r = call(node, "PUT", key=key, value="refused", cl="QUORUM")
    h.check(r.err == "CLOCK_SKEW", "a write through %s (clock %s) was "
            "answered %r (%r), not CLOCK_SKEW" % (node.name, word,
                                                  r.err or "OK", r.msg))
    return r


def check_ttls(via, nodes):
    """SET EX 300 through `via` is visible through every node with a TTL
    near 300; SET EX 5 through it is gone through every node once 5 s and
    a margin of 3 s have passed since it was acknowledged."""
    h.check(resp(via, "SET", "t300", "v", "EX", "300") == b"+OK",
            "SET EX 300 through %s" % via.name)
    h.check(resp(via, "SET", "t5", "v", "EX", "5") == b"+OK",
            "SET EX 5 through %s" % via.name)
    acked = time.time()
    for n in nodes:
        # QUORUM: a ONE read may ask the replica the write has not reached
        r = call(n, "GET", key="t300", cl="QUORUM")
        h.check(not r.err and r.value == b"v", "SET EX 300 through %s "
                "read through %s at QUORUM: %r" % (via.name, n.name,
                                                   r.err or r.value))
        ttl = int(resp(n, "TTL", "t300")[1:])
        h.check(250 <= ttl <= 300, "TTL of a SET EX 300 through %s, read "
                "through %s: %d" % (via.name, n.name, ttl))
    time.sleep(max(0.0, acked + 8 - time.time()))
    for n in nodes:
        for cl in ("ONE", "QUORUM"):
            r = call(n, "GET", key="t5", cl=cl)
            h.check(r.err == "NOT_FOUND", "SET EX 5 through %s still read "
                    "through %s at %s 8 s after it: %r" %
                    (via.name, n.name, cl, r.err or r.value))
    print("SET EX 300 through %s visible everywhere, SET EX 5 gone "
          "everywhere after 8 s" % via.name)


def ahead():
    c = h.Cluster(IPS_AHEAD, replication="dc1:3", resp_port=RESP)
    n1, n2, n3 = c.nodes
    h.fake_clock(n3, TEN_MIN)
    c.start()
    c.wait_converged(timeout=30)
    check_reports_skew(n3, "ahead")
    for n in (n1, n2):
        check_not_skewed(n)

    acked = {}
    for i in range(KEYS):
        key = "k%d" % i
        r = check_refuses(n3, key, "10 min ahead")
        if i == 0:
            m = re.search(r"this node's clock is (\d+) ms ahead of its "
                          r"peers'", r.msg or "")
            h.check(m and abs(int(m.group(1)) - TEN_MIN) < 60000,
                    "CLOCK_SKEW's message: %r" % r.msg)
            print("write through n3 refused: %s" % r.msg)
        via = n1 if i % 2 else n2
        r = call(via, "PUT", key=key, value="v%d" % i, cl="QUORUM")
        h.check(not r.err, "PUT %s through %s: %r" % (key, via.name, r))
        acked[key] = b"v%d" % i
    print("%d keys refused through n3, acknowledged through n1/n2" % KEYS)
    check_ttls(n1, c.nodes)

    # n1's clock: not pulled ahead by n3's gossip or answers (a clean
    # stop saves the clock itself; one minutes ahead is logged at start)
    h.check(n1.stop() == 0, "n1 unclean exit")
    n1.start()
    c.wait_converged(timeout=30)
    h.check("event=hlc.restored" not in n1.log(),
            "n1's clock was dragged ahead of its wall clock:\n" +
            "\n".join(x for x in n1.log().splitlines() if "hlc." in x))

    # n3 crashes and comes back with its clock put right: the ceiling of
    # its clock saved before (from its wall clock then) is 10 minutes ahead
    n3.kill9()
    n3.env = {}
    n3.start()
    c.wait_converged(timeout=30)
    check_not_skewed(n3)
    r = check_refuses(n3, "k0", "put right, timestamps ahead")
    h.check("timestamps are" in (r.msg or ""), "message: %r" % r.msg)
    r = call(n1, "PUT", key="k0", value="last", cl="QUORUM")
    h.check(not r.err, "PUT k0 through n1: %r" % r)
    acked["k0"] = b"last"
    wrong = []
    for n in c.nodes:
        for key, want in sorted(acked.items()):
            r = call(n, "GET", key=key, cl="QUORUM")
            if r.err or r.value != want:
                wrong.append((key, n.name, r.err or r.value, want))
    h.check(not wrong, "acknowledged writes lost or shadowed (key, read "
            "through, got, acknowledged): %r" % wrong[:6])
    print("every acknowledged key reads back at QUORUM through each node")
    for n in c.nodes:
        n.stop()


def behind():
    c = h.Cluster(IPS_BEHIND, replication="dc1:3", resp_port=RESP)
    n1, n2, n3 = c.nodes
    h.fake_clock(n3, -TEN_MIN)
    c.start()
    c.wait_converged(timeout=30)
    check_reports_skew(n3, "behind")
    r = resp(n3, "SET", "behind300", "v", "EX", "300")
    h.check(r.startswith(b"-CLOCK_SKEW"), "SET EX 300 through n3 (10 min "
            "behind) answered %r, not CLOCK_SKEW" % r)
    h.check(b"behind its peers'" in r, "message: %r" % r)
    r = call(n1, "GET", key="behind300", cl="QUORUM")
    h.check(r.err == "NOT_FOUND", "the refused SET reads %r" % r.value)
    check_ttls(n1, c.nodes)
    for n in c.nodes:
        n.stop()


def main():
    ahead()
    behind()


if __name__ == "__main__":
    h.run(main)
