#!/usr/bin/env python3
"""Regression: writes lost after a restart, the HLC neither persisted nor
restored; and one node whose clock runs ahead dragged every node's clock.

A node's hybrid logical clock moves past every timestamp it receives, so
one node whose wall clock runs ahead pushes the others' clocks ahead with
its writes. Until 2026-12-06 a restarted node started its clock again from
its wall clock: its writes were stamped below the ones it had stored and
seen before, and lost last-write-wins to them -- an acknowledged overwrite
that read back the old value, a DEL answered 1 that left the key readable.
Now the clock's ceiling is kept in the system store (written before the
clock passes it; the clock itself at a clean stop) and restored at start.

1. Three nodes (127.0.1.21-23), RF 3, max_clock_drift_ms 0 (off), n1's
   wall clock 5 minutes ahead (tests/cluster/fakeclock.c). 20 keys are
   written through n1 at ALL. Then n1 stops, n2 is killed (-9: its ceiling
   saved while running) and n3 stopped (SIGTERM: its clock saved at the
   stop), and all three start again, n1's clock now right. Overwrites
   through n2 and n3 at QUORUM must read back at ALL, and DELs through them
   must leave the keys NOT_FOUND at ALL. Before the fix every overwrite read
   back the old value.

2. Three nodes (127.0.1.24-26), RF 3, max_clock_drift_ms at its default
   (500) on n2 and n3 and 0 on n1 (its own clock unchecked), n1's clock
   10 minutes ahead. A QUORUM write through n1 is refused
   by n2 and n3: the client gets CLOCK_SKEW with a message naming
   max_clock_drift_ms, the replicas count it (ringkv_clock_skew_refused_total)
   and log hlc.refused, n1 logs coord.write_refused. n2 coordinates a write
   (n1's answer carries its clock: not followed), is killed and restarted:
   its saved ceiling is near its wall clock (no hlc.restored, which a
   clock dragged minutes ahead logs). With n1 stopped, an overwrite through
   n2 reads back at QUORUM. Before the fix n1's write was acknowledged and
   dragged n2's and n3's clocks 10 minutes ahead.
"""
# ctest: alongside others
import time

import harness as h

IPS1 = ["127.0.1.21", "127.0.1.22", "127.0.1.23"]
IPS2 = ["127.0.1.24", "127.0.1.25", "127.0.1.26"]
KEYS = 20


def call(node, op, **kw):
    return h.call_served(node, op, **kw)


def restart_loses_writes():
    c = h.Cluster(IPS1, replication="dc1:3", max_clock_drift_ms=0)
    n1, n2, n3 = c.nodes
    h.fake_clock(n1, 5 * 60 * 1000)
    c.start()
    c.wait_converged(timeout=30)
    for i in range(KEYS):
        r = call(n1, "PUT", key="k%d" % i, value="old", cl="ALL")
        h.check(not r.err, "PUT k%d through n1 (5 min ahead): %r" % (i, r))
    print("%d keys written at ALL through n1, its clock 5 min ahead" % KEYS)

    h.check(n1.stop() == 0, "n1 unclean exit")
    n2.kill9()
    h.check(n3.stop() == 0, "n3 unclean exit")
    n1.env = {}  # its clock fixed
    c.start()
    c.wait_converged(timeout=30)
    print("n1 stopped, n2 killed, n3 stopped; all restarted, clocks right")

    via = lambda i: n2 if i < KEYS // 2 else n3  # noqa: E731
    for i in range(KEYS):
        r = call(via(i), "PUT", key="k%d" % i, value="new", cl="QUORUM")
        h.check(not r.err, "overwrite k%d through %s: %r" %
                (i, via(i).name, r))
    lost = []
    for i in range(KEYS):
        r = call(n1, "GET", key="k%d" % i, cl="ALL")
        if r.err or r.value != b"new":
            lost.append(("k%d" % i, via(i).name, r.err or r.value))
    h.check(not lost, "%d of %d acknowledged overwrites through the "
            "restarted nodes lost to the writes from before the restart "
            "(key, through, read at ALL): %r" % (len(lost), KEYS, lost[:4]))
    print("%d overwrites through the restarted n2 and n3 read back at ALL"
          % KEYS)

    for i in range(0, KEYS, 2):
        r = call(via(i), "DEL", key="k%d" % i, cl="QUORUM")
        h.check(not r.err, "DEL k%d through %s: %r" % (i, via(i).name, r))
    alive = []
    for i in range(0, KEYS, 2):
        r = call(n1, "GET", key="k%d" % i, cl="ALL")
        if r.err != "NOT_FOUND":
            alive.append(("k%d" % i, r.err or r.value))
    h.check(not alive, "keys still readable at ALL after a DEL through "
            "the restarted nodes: %r" % alive[:4])
    print("%d DELs through them effective at ALL" % (KEYS // 2))
    h.check("event=hlc.restored" in n2.log(), "n2 (killed) did not log "
            "hlc.restored: its clock was not taken up minutes ahead")
    for n in c.nodes:
        n.stop()


def skewed_node_refused():
    # repair_after_join off: a joined node's repair copies n1's own copy of
    # its refused write (stamped 10 minutes ahead) to the others, and the
    # overwrite below then loses to it. n1's own max_clock_drift_ms is 0:
    # a node that checks nothing of its own clock, as all did before
    # 2026-12-06 (test_regression_clock_skew_pulls_cluster: a node that
    # checks refuses to coordinate writes, and its replicas never see
    # them), so that the replicas' refusal is what this part tests.
    c = h.Cluster(IPS2, replication="dc1:3", repair_after_join="false")
    n1, n2, n3 = c.nodes
    n1.extra["max_clock_drift_ms"] = 0
    h.fake_clock(n1, 10 * 60 * 1000)
    c.start()
    c.wait_converged(timeout=30)
    r = call(n1, "PUT", key="skew", value="from-n1", cl="QUORUM")
    print("QUORUM write through n1 (10 min ahead): %r %r" % (r.err, r.msg))
    h.check(r.err == "CLOCK_SKEW", "a write through n1, 10 minutes ahead, "
            "was answered %r (%r), not CLOCK_SKEW: its replicas took its "
            "timestamp" % (r.err or "OK", r.msg))
    h.check("max_clock_drift_ms" in (r.msg or ""),
            "CLOCK_SKEW's message does not say why: %r" % r.msg)
    for n in (n2, n3):
        h.wait_metric(n, "ringkv_clock_skew_refused_total", 1)
        h.check("event=hlc.refused" in n.log(), "%s did not log "
                "hlc.refused" % n.name)
    h.check("error=CLOCK_SKEW" in n1.log(), "n1 did not log the refusal")

    # n2 coordinates: n1's answer carries a clock 10 minutes ahead
    r = call(n2, "PUT", key="probe", value="1", cl="ALL")
    h.check(not r.err, "ALL write through n2: %r" % r)
    n2.kill9()
    n2.start()
    c.wait_converged(timeout=30)
    h.check("event=hlc.restored" not in n2.log(),
            "n2's clock was dragged ahead of its wall clock:\n" +
            "\n".join(line for line in n2.log().splitlines()
                      if "hlc." in line))

    h.check(n1.stop() == 0, "n1 unclean exit")
    # until n2 has n3's clock again after its restart, n1's (ten minutes
    # ahead) may be the only one it has, and it judges itself skewed
    # (CLOCK_SKEW, "behind its peers'"): sent again while it does
    deadline = time.time() + 30
    while True:
        r = call(n2, "PUT", key="skew", value="from-n2", cl="QUORUM")
        if r.err != "CLOCK_SKEW" or time.time() > deadline:
            break
        time.sleep(0.2)
    h.check(not r.err, "overwrite through n2: %r" % r)
    r = call(n3, "GET", key="skew", cl="QUORUM")
    h.check(not r.err and r.value == b"from-n2", "overwrite through n2 "
            "read back at QUORUM as %r" % (r.err or r.value))
    print("n1 refused; n2's clock stayed near its wall clock; n2's "
          "overwrite wins")


def main():
    restart_loses_writes()
    skewed_node_refused()


if __name__ == "__main__":
    h.run(main)
