#!/usr/bin/env python3
"""Decommission: a node streams its ranges out to the nodes that gain them,
announces LEFT and stops, while writes go on; nothing acknowledged is lost.

Proves: four nodes (RF 2, a rack each) hold 3,000 keys (300 of them
deleted). `ringkv decommission` is refused, with the reason, while another
node is DOWN. Then n4 leaves through the CLI while a writer keeps writing at
QUORUM through n1 (and after writes through n4 while n3 was down, whose
hints n4 must not take away): n4 is seen as UL, its NETSTATS says LEAVING, it exits 0
by itself, the others drop it from the ring, and each remaining node serves
(ONE through it, which reads its own replica first) every key it now
replicates -- the ones written before (most of those it gained reached it
only by the push) and every write acknowledged during the leave -- with no
deleted key coming back. n4 then refuses to start on its data_dir. n3 is
killed -9 while leaving and, restarted, resumes and finishes. Last, with two
nodes left for RF 2, decommission is refused. Before decommission existed
the command answered NOT_IMPLEMENTED.
"""
# ctest: alongside others
# ctest: long
import subprocess
import time

import harness as h

KEYS = 3000


def netstats(node):
    return h.cli(node, "netstats")[1]


def wait_exit(node, timeout):
    try:
        return node.proc.wait(timeout=timeout)
    except subprocess.TimeoutExpired:
        node.cluster.dump_logs()
        raise AssertionError("%s did not stop by itself within %d s" %
                             (node.name, timeout))


def wait_gone(c, observers, name, timeout=60):
    """Until no observer lists name in its ring any more."""
    deadline = time.time() + timeout
    while True:
        rows = [o.status()["rows"].get(name) for o in observers]
        if all(r is None or r.get(5) not in ("UN", "UL", "DN", "DL")
               for r in rows):
            return
        h.check(time.time() < deadline,
                "%s still in the ring: %r" % (name, rows))
        time.sleep(0.2)


def main():
    ips = ["127.0.0.221", "127.0.0.222", "127.0.0.223", "127.0.0.224"]
    c = h.racked_cluster(ips, replication="dc1:2")
    n1, n2, n3, n4 = c.nodes

    expect, gone = h.load_keys(n1, KEYS)
    before = h.endpoints(n1, list(expect))

    # refused while a node that may gain a range is DOWN
    n3.kill9()
    c.wait_state(n4, "n3", "DN", timeout=60)
    rc, out = h.cli(n4, "decommission")
    h.check(rc != 0 and "n3 is DOWN" in out,
            "decommission with n3 down: %d %r" % (rc, out))
    print("refused while n3 is down: %r" % out.strip())
    # writes through n4 meanwhile leave hints on n4 for n3, which n4 must
    # not take away with it
    hinted = {"h%d" % i: ("x%d" % i).encode() for i in range(300)}
    cl = n4.client()
    res = cl.pipeline([("PUT", {"key": k, "value": v, "cl": "ONE"})
                       for k, v in hinted.items()])
    cl.close()
    h.check(not [r for r in res if r.err], "writes at ONE with n3 down")
    expect.update(hinted)
    n3.start()
    c.wait_converged(timeout=60)

    # n4 leaves while n1 takes writes
    w = h.Writer(n1, "live")
    w.start()
    time.sleep(0.5)
    rc, out = h.cli(n4, "decommission")
    h.check(rc == 0 and "n4 is leaving" in out,
            "decommission: %d %r" % (rc, out))
    print("ringkv decommission: %r" % out.strip())
    c.wait_state(n1, "n4", "UL", timeout=30)
    ns = netstats(n4)
    h.check("Mode: LEAVING" in ns or "Mode: LEFT" in ns,
            "n4's NETSTATS while leaving: %r" % ns)
    rc, out = h.cli(n4, "decommission")
    h.check(rc == 0 and "already" in out, "a second decommission: %r" % out)
    rc = wait_exit(n4, 120)
    h.check(rc == 0, "n4 exited %r after leaving" % rc)
    wait_gone(c, [n1, n2, n3], "n4")
    c.wait_converged(timeout=60)
    time.sleep(0.5)
    w.stop.set()
    w.join(timeout=30)
    h.check(not w.errors, "writes failed during the leave: %r" % w.errors[:5])
    h.check(len(w.acked) > 100, "only %d writes during the leave" %
            len(w.acked))
    log = n4.log()
    for mark in ("leave.leaving", "leave.planned", "leave.left",
                 "node.decommissioned"):
        h.check(mark in log, "n4's log lacks %s" % mark)
    h.check("left=1" in open(n4.data_dir + "/node.state").read(),
            "n4's node.state does not say it left")
    print("n4 left (%d writes acknowledged meanwhile, %d sent again after "
          "RING_STALE)" % (len(w.acked), w.stale))

    expect.update(w.acked)
    gained = h.check_gained((n1, n2, n3), expect, gone, before)
    got = sum(n.metrics().get("ringkv_stream_keys_total{direction=\"in\"}", 0)
              for n in (n1, n2, n3))
    h.check(got >= gained, "the gaining nodes counted %r keys pushed in, "
            "they gained %d" % (got, gained))
    print("%d earlier keys changed hands; %d keys counted in" %
          (gained, got))

    # a decommissioned node does not come back on its data
    n4.start()
    rc = wait_exit(n4, 30)
    err = open(n4.log_path + ".stderr", errors="replace").read()
    h.check(rc != 0 and "decommissioned" in err,
            "n4 restarted on its data_dir: %r %r" % (rc, err[-300:]))

    # n3 is killed -9 while leaving, and resumes when restarted
    rc, out = h.cli(n3, "decommission")
    h.check(rc == 0, "decommission n3: %r" % out)
    deadline = time.time() + 30
    while "leave.leaving" not in n3.log():
        h.check(time.time() < deadline, "n3 never started leaving")
        time.sleep(0.05)
    n3.kill9()
    h.check("leaving=1" in open(n3.data_dir + "/node.state").read(),
            "n3's node.state does not say it was leaving")
    n3.start()
    rc = wait_exit(n3, 120)
    h.check(rc == 0 and "resumed=1" in n3.log(),
            "n3 did not resume its leave (exit %r)" % rc)
    wait_gone(c, [n1, n2], "n3")
    c.wait_converged(timeout=60)
    for n in (n1, n2):
        mine, _ = h.check_served(n, expect, gone)
        h.check(len(mine) == len(expect),
                "%s serves %d of %d keys with RF 2 on two nodes" %
                (n.name, len(mine), len(expect)))
    print("n3, killed while leaving, resumed and left; n1 and n2 hold "
          "every key")

    # two nodes for RF 2: neither may leave
    rc, out = h.cli(n2, "decommission")
    h.check(rc != 0 and "replication factor 2" in out,
            "decommission down to one node: %d %r" % (rc, out))
    print("refused: %r" % out.strip())


if __name__ == "__main__":
    h.run(main)
