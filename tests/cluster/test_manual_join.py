#!/usr/bin/env python3
"""join_ring: false and `ringkv join`: a node that waits out of the ring
until asked, then joins as any new node does.

Proves: three nodes (RF 2, a rack each) hold 3,000 keys (300 deleted). n4
starts with join_ring false: it logs boot.parked, its NETSTATS says
WAITING, and every node's `ringkv status` lists it as UW (up, waiting)
with no tokens and says how to join it, for as long as nobody asks
(several seconds, many more gossip rounds than a join waits). Meanwhile
it holds nobody back: n5, started normally, joins (n4's name comes first,
and joiners otherwise take turns by name), and `ringkv cleanup` on n1 is
accepted (a parked node is not a node joining). `ringkv join` is refused on
a member (n1); on n4 it answers that n4 is joining, and n4 then streams
its ranges in and becomes UN, serving every key it replicates and no
deleted one; a second `ringkv join` on it is refused. n4's /health/ready
(`ringkv health`) says it is not ready while it waits (503, exit 5, "not in
the ring yet") and ready once it is UN (200, exit 0); /health/live answers
200 throughout. Before this, `ringkv
join` answered NOT_IMPLEMENTED and join_ring did not exist; until
2026-12-04 (regression status_hides_waiting_node) status did not list a
waiting node at all, and an operator could not see it.
"""
# ctest: alongside others
import time
import urllib.request

import harness as h

KEYS = 3000


def live(node):
    """The HTTP status of node's /health/live."""
    with urllib.request.urlopen("http://%s:9180/health/live" % node.ip,
                                timeout=10) as r:
        return r.status


def main():
    ips = ["127.0.0.238", "127.0.0.239", "127.0.0.240"]
    c = h.racked_cluster(ips, replication="dc1:2")
    n1 = c.nodes[0]
    expect, gone = h.load_keys(n1, KEYS)

    n4 = h.Node(c, "n4", "127.0.0.245", {"rack": "r4", "join_ring": "false",
                                         "metrics_port": 9180})
    c.nodes.append(n4)
    n4.start()
    deadline = time.time() + 30
    while "event=boot.parked" not in n4.log():
        h.check(time.time() < deadline, "n4 never logged boot.parked")
        time.sleep(0.1)
    time.sleep(3)  # 15 gossip rounds: a join would have chosen tokens
    rc, ns = h.cli(n4, "netstats")
    h.check(rc == 0 and "Mode: WAITING" in ns, "n4's NETSTATS: %r" % ns)
    print("n4 waits: %r" % ns.splitlines()[0])
    rc, out = h.cli(n4, "health")
    h.check(rc == 5 and "not ready: not in the ring yet" in out,
            "health of the waiting n4: %d %r" % (rc, out))
    h.check(live(n4) == 200, "n4's /health/live while it waits")

    n5 = h.Node(c, "n5", "127.0.0.250", {"rack": "r5"})
    c.nodes.append(n5)
    n5.start()
    c.wait_state(n1, "n5", "UN", timeout=120)
    c.wait_converged(timeout=60, up=[x for x in c.nodes if x is not n4])
    h.check("for=n4" not in n5.log(), "n5 waited for the parked n4")
    for n in c.nodes:
        rc, st = h.cli(n, "status")
        row = [l for l in st.splitlines()
               if l[:1] in "UD" and " n4 " in l]
        h.check(rc == 0 and len(row) == 1 and row[0].startswith("UW ") and
                "127.0.0.245:" in row[0] and "Waiting: n4 " in st,
                "%s's status does not show n4 waiting: %r" % (n.name, st))
        w = n.status()["rows"].get("n4", {})
        h.check(w.get(5) == "UW" and not w.get(7),
                "%s's STATUS row of n4: %r" % (n.name, w))
    print("every status shows n4 waiting: %r" % row[0])
    rc, out = h.cli(n1, "cleanup", "--wait")
    h.check(rc == 0 and "Cleanup: done" in out,
            "cleanup on n1 while n4 waits: %d %r" % (rc, out))
    print("n5 joined and n1 cleaned up while n4 waited")

    rc, out = h.cli(n1, "join")
    h.check(rc != 0 and "member of the ring already" in out,
            "join on a member: %d %r" % (rc, out))
    rc, out = h.cli(n4, "join")
    h.check(rc == 0 and "n4 is joining" in out, "join on n4: %d %r" %
            (rc, out))
    print("ringkv join: %r" % out.strip())
    c.wait_state(n1, "n4", "UN", timeout=120)
    c.wait_converged(timeout=60)
    log = n4.log()
    h.check("event=boot.join_requested" in log and "streamed=1" in log,
            "n4's log does not show a requested, streamed join")
    rc, out = h.cli(n4, "join")
    h.check(rc != 0 and "member of the ring already" in out,
            "a second join on n4: %d %r" % (rc, out))
    rc, out = h.cli(n4, "health")
    h.check(rc == 0 and "ready: NORMAL, serving" in out,
            "health of n4 once UN: %d %r" % (rc, out))
    h.check(live(n4) == 200, "n4's /health/live once UN")
    print("ringkv health on n4: %r" % out.strip())
    mine, dead = map(len, h.check_served(n4, expect, gone))
    h.check(mine > 0, "n4 replicates no key")
    print("n4 joined when asked and serves its %d keys and none of its %d "
          "deleted ones" % (mine, dead))


if __name__ == "__main__":
    h.run(main)
