#!/usr/bin/env python3
"""Nodes configured with different `replication` place replicas differently
(what one writes, the other may look for elsewhere).

1. A new node whose setting differs from the ring's members' does not join
   (regression: mismatched_node_joins): n2 (dc1:1) starting next to n1
   (dc1:2) logs `boot.replication_refused` naming both settings, never
   takes tokens (n1 never lists it UN), is given no data while n1 takes
   writes, and its own ringkv_replication_mismatch is 1 with a WARNING in
   its `ringkv status`. Before 2026-12-06 it joined and took data under
   its own placement.
2. Restarted with the ring's setting, it joins.
3. A member restarted with another setting (it has joined; it is not
   stopped) is an operator error each side must report: `cluster.
   replication_mismatch` logged at ERROR with both settings,
   ringkv_replication_mismatch 1, and a WARNING in `ringkv status` naming
   each node's setting; `ringkv cleanup` is refused meanwhile (it could
   drop writes that sit on non-replicas); once it is restarted with the
   same setting, `cluster.replication_agrees`, the gauge back to 0 and
   `Replication: dc1:2`.
4. The same setting listed in another order is no mismatch (regression:
   repl_order_mismatch).
"""
# ctest: alongside others
import json
import subprocess
import time

import harness as h

IPS = ["127.0.0.161", "127.0.0.162"]
GAUGE = "ringkv_replication_mismatch"


def wait_gauge(nodes, want, timeout=60):
    deadline = time.time() + timeout
    last = None
    while time.time() < deadline:
        try:
            last = [n.metrics().get(GAUGE) for n in nodes]
            if all(v == want for v in last):
                return
        except (OSError, ConnectionError, RuntimeError) as e:
            last = repr(e)
        time.sleep(0.3)
    raise AssertionError("%s never %d on every node: %r" % (GAUGE, want, last))


def status(ip):
    r = subprocess.run([h.RINGKV, "-h", ip, "status"], capture_output=True,
                       text=True, timeout=20)
    h.check(r.returncode == 0, "ringkv status exited %d: %s" %
            (r.returncode, r.stderr))
    return r.stdout


def main():
    c = h.Cluster(IPS, seeds=IPS[:1], replication="dc1:2")
    n1, n2 = c.nodes
    n2.extra["replication"] = "dc1:1"
    n2.extra["metrics_port"] = 0
    c.start()
    # 1. refused at the join
    deadline = time.time() + 60
    while "event=boot.replication_refused" not in n2.log():
        h.check(time.time() < deadline, "n2 never refused to join")
        time.sleep(0.2)
    line = [x for x in n2.log().splitlines()
            if "boot.replication_refused" in x][0]
    for want in ("level=error", "member=n1", 'theirs="dc1:2"',
                 'ours="dc1:1"'):
        h.check(want in line, "%r lacks %s" % (line, want))
    cl = n1.client()
    try:
        res = cl.pipeline([("PUT", {"key": "k%d" % i, "value": "v",
                                    "cl": "ONE"}) for i in range(200)])
    finally:
        cl.close()
    h.check(not [r for r in res if r.err], "writes through n1 failed")
    time.sleep(3)  # 15 gossip rounds: a join would have happened
    row = n1.status()["rows"].get("n2", {})
    h.check(row.get(5) != "UN" and not row.get(7),
            "n1 lists n2 as a member: %r" % row)
    wait_gauge([n2], 1)
    h.check(n2.metrics().get("ringkv_keys", 0) == 0, "n2 was given data")
    out = status(IPS[1])
    h.check("WARNING: the nodes are configured with different replication"
            in out, "n2's status shows no warning:\n" + out)
    h.check("event=boot.joined" not in n2.log() and
            "event=boot.joining" not in n2.log(), "n2 joined anyway")
    print("a new node with another replication: refused, no tokens, no "
          "data, it says why")

    # 2. the ring's setting: it joins
    h.check(n2.stop() == 0, "n2: unclean exit")
    n2.extra["replication"] = "dc1:2"
    n2.start()
    c.wait_converged(timeout=60)
    wait_gauge(c.nodes, 0)
    print("restarted with dc1:2, n2 joined")

    # 3. a member restarted with another setting
    h.check(n2.stop() == 0, "n2: unclean exit")
    logged = len([x for x in n1.log().splitlines()
                  if "cluster.replication_mismatch" in x])
    n2.extra["replication"] = "dc1:1"
    n2.start()
    wait_gauge(c.nodes, 1)
    line = [x for x in n1.log().splitlines()
            if "cluster.replication_mismatch" in x][logged:]
    h.check(len(line) == 1, "n1 logged the mismatch %d times" % len(line))
    for want in ("level=error", "peer=n2", 'theirs="dc1:1"', 'ours="dc1:2"'):
        h.check(want in line[0], "%r lacks %s" % (line[0], want))
    h.check('peer=n1 theirs="dc1:2" ours="dc1:1"' in n2.log(),
            "n2 did not log n1's setting")
    out = status(IPS[0])
    h.check("WARNING: the nodes are configured with different replication"
            in out, "status shows no warning:\n" + out)
    h.check("  n1: dc1:2\n" in out and "  n2: dc1:1\n" in out,
            "status does not name each node's setting:\n" + out)
    h.check("Replication: " not in out, "status claims agreement:\n" + out)
    rc, out = h.cli(n1, "cleanup")
    h.check(rc == 6 and "replication setting differs" in out,
            "cleanup during the mismatch: %d %r" % (rc, out))
    print("a member's mismatch: logged, counted, shown; cleanup refused")

    h.check(n2.stop() == 0, "n2: unclean exit")
    n2.extra["replication"] = "dc1:2"
    n2.start()
    wait_gauge(c.nodes, 0)
    log = n1.log()
    h.check("cluster.replication_agrees" in log and
            "peer=n2" in log.split("cluster.replication_mismatch")[-1],
            "n1 did not log that n2 agrees now")
    out = status(IPS[0])
    h.check("\nReplication: dc1:2\n" in out, "status after the fix:\n" + out)
    h.check("WARNING" not in out, "status still warns:\n" + out)
    print("agreement: logged, gauge 0, status shows it")

    # Regression (repl_order_mismatch): the same setting listed in another
    # order (a YAML mapping's order is the writer's) was reported as a
    # mismatch, though replicas are placed by DC name.
    for n in c.nodes:
        h.check(n.stop() == 0, "%s: unclean exit" % n.name)
    before = n1.log().count("cluster.replication_mismatch")
    n1.extra["replication"] = "dc1:2,dc2:1"
    n2.extra["replication"] = "dc2:1,dc1:2"
    c.start()
    deadline = time.time() + 60
    seen = None
    while time.time() < deadline:
        r = subprocess.run([h.RINGKV, "-h", IPS[0], "status", "--json"],
                           capture_output=True, text=True, timeout=20)
        if r.returncode == 0:
            nodes = json.loads(r.stdout)["nodes"]
            seen = sorted((x["host"], x.get("replication")) for x in nodes)
            if all(v for _, v in seen) and len(seen) == 2:
                break
        time.sleep(0.3)
    h.check(seen == [("n1", "dc1:2,dc2:1"), ("n2", "dc1:2,dc2:1")],
            "each node's replication, by DC name: %r" % (seen,))
    for n in c.nodes:
        h.check(n.metrics().get(GAUGE) == 0, "%s counts a mismatch" % n.name)
    h.check(n1.log().count("cluster.replication_mismatch") == before,
            "the same setting in another order logged as a mismatch")
    print("same setting, other order: no mismatch")
    for n in c.nodes:
        h.check(n.stop() == 0, "%s: unclean exit" % n.name)


if __name__ == "__main__":
    h.run(main)
