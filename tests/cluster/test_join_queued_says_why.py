#!/usr/bin/env python3
"""A joining node that waits for another join says what it waits for
(issue 29, item 2).

Proves: three nodes (RF 3) hold 6,000 keys of 2,000 bytes. n4 joins with
stream_throughput_mb 1, so that its streaming lasts; n5, started once n4
has announced its tokens, chooses its tokens at once (a joining node no
longer holds the next back) but its join changes the replicas of ranges
n4's changes too, so it waits. While it waits: its netstats says
`Queued: waiting for n4` with the reason, STATUS through another node
carries `queued: n4` (field 19) on n5's row, `ringkv status` prints a `Queued:` line
naming both, and n5's log has boot.queued behind=n4. Then n5 streams by
itself once n4 is done (boot.queue_done), and all five end UN with one
ring, n5 serving its keys.
"""
# ctest: alongside others
import time

import harness as h

KEYS = 6000


def netstats(node):
    cl = node.client()
    try:
        r = cl.call("NETSTATS")
    finally:
        cl.close()
    t = r.get(38) or ""
    return t.decode() if isinstance(t, bytes) else t


def main():
    ips = ["127.0.0.155", "127.0.0.156", "127.0.0.157"]
    c = h.Cluster(ips, seeds=ips[:1], replication="3")
    c.start()
    c.wait_converged(timeout=60)
    n1 = c.nodes[0]
    value = b"x" * 2000
    h.put_all(n1, ["k%d" % i for i in range(KEYS)], value)
    expect = {"k%d" % i: value for i in range(KEYS)}

    n4 = h.Node(c, "n4", "127.0.0.158", {"stream_throughput_mb": 1})
    n5 = h.Node(c, "n5", "127.0.0.159", {})
    c.nodes += [n4, n5]
    n4.start()
    h.wait_log(n4, "boot.joining", timeout=60)
    n5.start()

    # n5 waits for n4, and says so, everywhere
    h.wait_log(n5, "boot.queued", timeout=120, unless="boot.joined")
    h.check("event=boot.queued behind=n4 " in n5.log(),
            "n5 queued behind another node: %r" %
            [l for l in n5.log().splitlines() if "boot.queued" in l])
    ns = netstats(n5)
    h.check("Mode: JOINING" in ns and "Queued: waiting for n4" in ns,
            "n5's NETSTATS while it waits: %r" % ns)
    print("n5's NETSTATS: %r" % ns.splitlines()[1])
    deadline = time.time() + 60
    while True:
        row = n1.status()["rows"].get("n5", {})
        if row.get(19) == "n4":
            break
        h.check(time.time() < deadline and "boot.queue_done" not in n5.log(),
                "n1's STATUS row of n5 never said it waits for n4: %r" % row)
        time.sleep(0.2)
    print("n1's STATUS: n5 %s, queued behind %s" % (row.get(5), row.get(19)))
    # the line, unless n5's wait ended before the status was even asked
    # (then its row no longer says it: nothing to print)
    ended_before = "boot.queue_done" in n5.log()
    rc, out = h.cli(n1, "status")
    h.check(rc == 0 and (ended_before or
                         "Queued: n5 streams its ranges once n4 is done" in
                         out),
            "`ringkv status` does not say n5 waits: %r" % out)
    print("ringkv status: %r" % [l for l in out.splitlines()
                                 if l.startswith("Queued:")])

    # then it goes by itself
    c.wait_converged(timeout=300)
    h.check("event=boot.queue_done behind=n4 " in n5.log(),
            "n5 never logged the end of its wait")
    for n in (n4, n5):
        h.check("streamed=1" in n.log(), "%s did not stream" % n.name)
    mine, _ = h.check_served(n5, expect, [])
    print("n5 joined after n4 and serves its %d keys" % len(mine))


if __name__ == "__main__":
    h.run(main)
