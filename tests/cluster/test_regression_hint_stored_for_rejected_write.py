#!/usr/bin/env python3
"""Regression: the coordinator stored a hint for a replica that had refused
the write for good.

A replica that answers a write BAD_REQUEST, PROTOCOL, NOT_FOUND or
NOT_SUPPORTED would answer its replay the same: the hint replay drops such
a hint (node__hint_rejected_for_good), so storing it only cost a synced
store, hint space and a replay. A replica that failed or timed out still
gets a hint.

Two nodes (127.0.0.124-125). n2 is started with replication dc1:1 while n1
has dc1:2 (a misconfiguration, but a real one): n2 holds ranges only for
its own arcs and answers NOT_FOUND for the others' keys. n1 coordinates
writes at ALL with both UP: those n2 holds succeed, the others fail with
n2's NOT_FOUND. Then n2 is stopped and n1 coordinates one more write, which
must leave a hint (n2 DOWN).

Proves: n1 stored exactly that one hint (ringkv_hints_stored_total), none
for the writes n2 refused, and dropped none; the refusals are counted
(ringkv_writes_refused_total) and logged once (coord.write_refused, at
most every 10 s) instead of vanishing.
"""
# ctest: alongside others
import harness as h

KEYS = 40


def main():
    ips = ["127.0.0.124", "127.0.0.125"]
    c = h.Cluster(ips, seeds=ips[:1], replication="dc1:2")
    n1, n2 = c.nodes
    n2.extra["replication"] = "dc1:1"
    c.start()
    c.wait_converged(timeout=60)

    # the keys n2 holds a range for, as n2 places them
    c2 = n2.client()
    eps = c2.pipeline([("ENDPOINTS", {"key": "k%d" % i})
                       for i in range(KEYS)])
    c2.close()
    mine = set(i for i, r in enumerate(eps)
               if [e[0] for e in r.get(36)] == ["n2"])
    h.check(0 < len(mine) < KEYS, "n2 owns %d of %d keys" % (len(mine), KEYS))

    cl = n1.client()
    res = cl.pipeline([("PUT", {"key": "k%d" % i, "value": "v%d" % i,
                                "cl": "ALL"}) for i in range(KEYS)])
    wrong = [i for i, r in enumerate(res) if bool(r.err) != (i not in mine)]
    h.check(not wrong, "writes at ALL: %r" %
            [(i, res[i].err, res[i].msg) for i in wrong[:5]])
    print("n2 refused %d of %d writes" % (KEYS - len(mine), KEYS))
    # not hinted, but not silent either: counted and logged (rate-limited)
    refused = n1.metrics().get("ringkv_writes_refused_total", 0)
    h.check(refused == KEYS - len(mine), "ringkv_writes_refused_total %r, "
            "want %d" % (refused, KEYS - len(mine)))
    logged = [x for x in n1.log().splitlines()
              if "event=coord.write_refused" in x]
    h.check(len(logged) == 1 and "peer=n2 error=NOT_FOUND" in logged[0],
            "coord.write_refused lines: %r" % logged)

    # a write for n2 while it is DOWN is hinted; the hints of the refused
    # writes, had they been kept, were queued seconds before it
    h.check(n2.stop() == 0, "n2 unclean exit")
    c.wait_state(n1, "n2", "DN", timeout=30)
    r = cl.call("PUT", key="down", value="d", cl="ONE")
    cl.close()
    h.check(not r.err, "PUT with n2 down: %r" % r)
    h.wait_metric(n1, "ringkv_hints_stored_total", 1)
    m = n1.metrics()
    dropped = m.get("ringkv_hints_dropped_total", 0)
    stored = m.get("ringkv_hints_stored_total", 0)
    h.check(stored == 1 and dropped == 0,
            "n1 stored %d hints (want 1: none for the %d refused writes), "
            "dropped %d" % (stored, KEYS - len(mine), dropped))
    h.check(n1.stop() == 0, "n1 unclean exit")


h.run(main)
