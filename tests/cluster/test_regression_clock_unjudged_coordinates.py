#!/usr/bin/env python3
"""Regression clock_unjudged_coordinates: a node whose clock was wrong
coordinated writes for the first gossip rounds after its start, before it
had compared its clock with its peers', and its own replica kept what its
peers refused.

A node learns that its clock is off from the stamps in its peers' gossip
(max_clock_drift_ms, docs/storage.md); until most of its live peers have
given it an estimate it had no opinion, and coordinated writes as if its
clock were right. Its peers refused those stamped 10 minutes ahead
(CLOCK_SKEW), but its own replica stored them first: future-stamped copies
that read repair could later spread over newer writes. Now a node issues
no timestamp until its clock has been judged once (RING_STALE, retried
through another node; log clock.judged), at most ten gossip intervals.

Three nodes (127.0.1.136-138, RF 3), n3's wall clock 10 minutes ahead
(tests/cluster/fakeclock.c). Once all three are UN, n3 is stopped and
started again, and from the moment its client port opens writes of new
keys are sent through it at QUORUM for 4 s, one after the other. None may
be acknowledged, and afterwards a read at ONE through n3 (its own replica
first) must find none of them. Before the fix n3's replica held the first
ones.
"""
# ctest: alongside others
import time

import harness as h

IPS = ["127.0.1.136", "127.0.1.137", "127.0.1.138"]
TEN_MIN = 600000


def main():
    c = h.Cluster(IPS, replication="dc1:3", gossip_interval_ms=500)
    n1, n2, n3 = c.nodes
    h.fake_clock(n3, TEN_MIN)
    c.start()
    c.wait_converged(timeout=30)
    h.check(n3.stop() == 0, "n3 unclean exit")
    mark = len(n3.log())
    n3.start()
    cl = h.client_when_open(n3, within=30, timeout=10)
    keys, answers = [], {}
    t0 = time.time()
    while time.time() < t0 + 4:
        k = "u%d" % len(keys)
        keys.append(k)
        r = cl.call("PUT", key=k, value="from-n3", cl="QUORUM")
        answers[r.err] = answers.get(r.err, 0) + 1
        h.check(r.err, "PUT %s through n3, 10 minutes ahead, acknowledged"
                % k)
    print("%d writes through n3 in its first 4 s: %r" % (len(keys), answers))
    held = []
    for k in keys:
        r = cl.call("GET", key=k, cl="ONE")
        if r.err != "NOT_FOUND":
            held.append((k, r.err or r.value))
    cl.close()
    h.check(not held, "n3's own replica kept %d of the %d writes it "
            "coordinated before judging its clock: %r" %
            (len(held), len(keys), held[:5]))
    h.check("event=clock.judged " in n3.log()[mark:], "no clock.judged")
    print("n3's replica kept none of them; %s" % [
        ln.split("event=")[1] for ln in n3.log()[mark:].splitlines()
        if "event=clock.judged " in ln][0])


if __name__ == "__main__":
    h.run(main)
