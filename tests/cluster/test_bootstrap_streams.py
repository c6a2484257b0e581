#!/usr/bin/env python3
"""Bootstrap streaming: a node joining a cluster that holds data streams
its ranges in before it serves them, while writes go on.

Proves: three nodes (RF 2, a rack each) hold 3,000 keys (300 of them
deleted); a fourth node joins while a writer keeps writing at QUORUM
through another node. The joining node is seen as UJ, then UN; its log
shows the join streamed (boot.joining, boot.joined streamed=1). Afterwards
every key that the new node replicates is served by it alone (ONE through
it, which reads its own replica first): the 2,700 live keys written before
it joined and every write acknowledged during the join, with no deleted key
coming back. A fifth node killed -9 while joining resumes the join when
restarted (joining=1 in its node.state; log resumed=1) and ends with its
share of the data too. Before streaming existed, the new node answered
NOT_FOUND for every key written before it joined.
"""
# ctest: alongside others
import time

import harness as h

KEYS = 3000


def netstats(node):
    cl = node.client()
    try:
        r = cl.call("NETSTATS")
    finally:
        cl.close()
    h.check(not r.err, "NETSTATS: %r" % r)
    return (r.get(38) or b"").decode() if isinstance(r.get(38), bytes) \
        else (r.get(38) or "")


def add_node(c, name, ip, rack):
    n = h.Node(c, name, ip, {"rack": rack})
    c.nodes.append(n)
    return n


def main():
    ips = ["127.0.0.211", "127.0.0.212", "127.0.0.213"]
    c = h.racked_cluster(ips, replication="dc1:2")
    n1, n2, n3 = c.nodes

    expect, gone = h.load_keys(n1, KEYS)

    # n4 joins while n2 takes writes
    w = h.Writer(n2, "live")
    w.start()
    n4 = add_node(c, "n4", "127.0.0.214", "r4").start()
    c.wait_state(n1, "n4", "UJ", timeout=60)
    print("n4 seen joining (UJ)")
    deadline = time.time() + 60
    while True:
        ns = netstats(n4)
        if ns.startswith("Mode: JOINING") or "Joined with" in ns:
            break
        h.check(time.time() < deadline, "n4's NETSTATS: %r" % ns)
        time.sleep(0.1)
    print("n4's NETSTATS while joining: %r" % ns.splitlines()[1])
    c.wait_state(n1, "n4", "UN", timeout=120)
    c.wait_converged(timeout=60)
    time.sleep(1)
    w.stop.set()
    w.join(timeout=30)
    log = n4.log()
    h.check("boot.joining" in log and "streamed=1" in log,
            "n4's log does not show a streamed join")
    h.check(not w.errors, "writes failed during the join: %r" % w.errors[:5])
    h.check(len(w.acked) > 100, "only %d writes during the join" %
            len(w.acked))
    before = list(expect)  # live keys written before n4 joined
    expect.update(w.acked)
    mine, dead = map(len, h.check_served(n4, expect, gone))
    # those of them n4 replicates reached it only by streaming
    eps = h.endpoints(n4, before)
    streamed_min = sum(1 for k in before if "n4" in eps[k])
    h.check(streamed_min > 0, "n4 replicates none of the earlier keys")
    h.check(mine > len(expect) // 4, "n4 replicates only %d of %d keys" %
            (mine, len(expect)))
    print("n4 joined and serves its %d keys (of %d; %d written during the "
          "join) and none of its %d deleted ones" %
          (mine, len(expect), len(w.acked), dead))
    ns = netstats(n4)
    h.check("Joined with" in ns and "Mode: NORMAL" in ns,
            "n4's NETSTATS after joining: %r" % ns)
    sent = 0
    for n in (n1, n2, n3):
        t = netstats(n)
        sent += int(t.split("Sent to joining nodes (or pushed while leaving): ")[1].split()[0])
    h.check(sent >= streamed_min,
            "the donors say they sent %d keys, n4 needed %d" %
            (sent, streamed_min))
    print("NETSTATS: n4 %r; donors sent %d keys" % (ns.splitlines()[1], sent))
    m = n4.metrics()
    got = m.get("ringkv_stream_keys_total{direction=\"in\"}", 0)
    h.check(got >= streamed_min,
            "n4 counted %r keys streamed in, it needed %d" %
            (got, streamed_min))

    # n5 is killed -9 while joining, and resumes when restarted
    n5 = add_node(c, "n5", "127.0.0.215", "r5").start()
    deadline = time.time() + 60
    while "boot.joining" not in n5.log():
        h.check(time.time() < deadline, "n5 never started joining")
        time.sleep(0.05)
    n5.kill9()
    h.check("joining=1" in open(n5.data_dir + "/node.state").read(),
            "n5's node.state does not say it was joining")
    n5.start()
    c.wait_state(n1, "n5", "UN", timeout=120)
    c.wait_converged(timeout=60)
    h.check("resumed=1" in n5.log(), "n5 did not resume its join")
    h.check("joining=0" in open(n5.data_dir + "/node.state").read(),
            "n5's node.state still says joining")
    mine5 = len(h.check_served(n5, expect, gone)[0])
    print("n5, killed while joining, resumed and serves its %d keys" % mine5)
    mine4 = len(h.check_served(n4, expect, gone)[0])
    print("n4 still serves its %d keys" % mine4)


if __name__ == "__main__":
    h.run(main)
