#!/usr/bin/env python3
"""Two data centres (two nodes each, RF dc1:2 dc2:2): per-DC levels.

Proves: replicas are placed in both DCs (ENDPOINTS lists two of each);
with dc2 entirely down, LOCAL_QUORUM and LOCAL_ONE from dc1 succeed while
EACH_QUORUM and ALL answer UNAVAILABLE and QUORUM (3 of 4) too; a dc1
node's LOCAL_QUORUM read returns what it wrote.
"""
# ctest: alongside others
import harness as h


def main():
    ips = ["127.0.0.55", "127.0.0.56", "127.0.0.57", "127.0.0.58"]
    c = h.Cluster(ips, seeds=[ips[0], ips[2]], replication="dc1:2,dc2:2")
    for i, n in enumerate(c.nodes):
        n.extra["datacenter"] = "dc1" if i < 2 else "dc2"
        n.extra["rack"] = "r%d" % (i % 2)
    c.start()
    c.wait_converged(timeout=60)
    a, b, x, y = c.nodes
    cl = a.client()
    r = cl.call("ENDPOINTS", key="k")
    names = [e[0] for e in r.get(36)]
    h.check(len(names) == 4 and set(names) == {"n1", "n2", "n3", "n4"},
            "replicas %r" % names)
    r = cl.call("PUT", key="k", value="v1", cl="EACH_QUORUM")
    h.check(not r.err and r.acks >= 4, "EACH_QUORUM write: %r" % r)
    cl.close()
    x.kill9()
    y.kill9()
    c.wait_state(a, "n3", "DN", timeout=30)
    c.wait_state(a, "n4", "DN", timeout=30)
    cl = a.client()
    r = cl.call("PUT", key="k", value="v2", cl="LOCAL_QUORUM")
    h.check(not r.err, "LOCAL_QUORUM write with dc2 down: %r" % r)
    r = cl.call("GET", key="k", cl="LOCAL_QUORUM")
    h.check(r.value == b"v2", "LOCAL_QUORUM read: %r" % r)
    r = cl.call("GET", key="k", cl="LOCAL_ONE")
    h.check(r.value == b"v2", "LOCAL_ONE read: %r" % r)
    for lvl in ("EACH_QUORUM", "ALL", "QUORUM"):
        r = cl.call("GET", key="k", cl=lvl)
        h.check(r.err == "UNAVAILABLE", "%s with dc2 down: %r" % (lvl, r))
    r = cl.call("PUT", key="k", value="v3", cl="EACH_QUORUM")
    h.check(r.err == "UNAVAILABLE", "EACH_QUORUM write: %r" % r)
    cl.close()
    print("dc2 down: LOCAL_* ok; EACH_QUORUM, ALL, QUORUM UNAVAILABLE")
    for n in (a, b):
        h.check(n.stop() == 0, "%s unclean exit" % n.name)


h.run(main)
