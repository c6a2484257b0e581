#!/usr/bin/env python3
"""Regression: a repair failed every comparison with a replica whose ring
was a gossip round behind.

A replica answers a repair's leaf request RING_STALE while its ring is not
the repairing node's (its ring a membership change behind, or a different
epoch): both rings must place the arc alike for the comparison to mean
anything. Before c026833 the repair counted that as a failed comparison
and went on, so a repair started right after a join (as the repair a
joined node runs by itself is) ended `done with failures`. Now the step is
asked again every 200 ms, up to 50 times a comparison; the log says
`repair.retry` once a comparison, `ringkv netstats` says what the repair
waits for, and its result counts the steps asked again.

Three nodes (127.0.0.65-67, RF 3, a rack each), then a fourth (.68)
joins; n1 runs with dropudp.c preloaded, deaf to gossip that mentions the
joiner, so its ring stays stale (harness.stale_ring_cluster). A repair on
n2 (whose ring is current) reaches a comparison with n1: n1 answers
RING_STALE, n2 logs repair.retry and netstats says `waiting: n1 answered
RING_STALE`. The fault ends, n1 catches up, and the repair ends `done`,
without failures, having asked again. Checked that it fails (n2 logs
repair.done, its comparisons with n1 failed, before any repair.retry)
when RING_STALE is not retried.
"""
# ctest: alongside others
import os
import re
import time

import harness as h

IPS = ["127.0.0.65", "127.0.0.66", "127.0.0.67"]
JOINER = "joiner-node-four"  # matched in n1's datagrams: no short name


def netstats_until(node, text, timeout):
    deadline = time.time() + timeout
    while True:
        rc, out = h.cli(node, "netstats")
        if text in out:
            return out
        h.check(time.time() < deadline,
                "%s's netstats never said %r: %s" % (node.name, text, out))
        time.sleep(0.05)


def main():
    c, n1, r1, deaf = h.stale_ring_cluster(IPS, "127.0.0.68", JOINER,
                                           repair_after_join="false")
    n2 = c.nodes[1]
    c.wait_state(n2, JOINER, "UN", timeout=120)  # repair waits for moves
    h.check(n2.metrics().get("ringkv_ring_stale") == 0, "n2's ring stale")
    rc, out = h.cli(n2, "repair")
    h.check(rc == 0 and "repair started" in out, "repair on n2: %r" % out)
    print(out.strip())

    # (n3 or the joiner may be a round behind too, for a moment)
    deadline = time.time() + 60
    while True:
        lines = [ln for ln in n2.log().splitlines()
                 if "event=repair.retry " in ln and " peer=n1 " in ln]
        if lines:
            break
        h.check("event=repair.done " not in n2.log() and
                time.time() < deadline,
                "n2's repair did not ask n1 again: %s" %
                [ln for ln in n2.log().splitlines() if "event=repair." in ln])
        time.sleep(0.05)
    print(lines[0])
    h.check("error=RING_STALE " in lines[0], "the step retried: %r" %
            lines[0])
    out = netstats_until(n2, "waiting: n1 answered RING_STALE", 5)
    print([ln for ln in out.splitlines() if ln.startswith("Repair:")][0])
    h.check(n1.metrics().get("ringkv_ring_stale") == 1,
            "n1 caught up before the fault ended")

    os.unlink(deaf)
    out = netstats_until(n2, "Repair: done", 120)
    done = [ln for ln in out.splitlines() if ln.startswith("Repair:")][0]
    print(done)
    h.check(done.startswith("Repair: done in") and
            "asked again (" in done, "n2's repair: %r" % done)
    m = re.search(r"event=repair\.done .*failed=(\d+) .*retried=(\d+) ",
                  n2.log())
    h.check(m and m.group(1) == "0" and int(m.group(2)) >= 1,
            "n2's repair.done: %r" % (m and m.group(0)))
    h.check(n1.metrics().get("ringkv_ring_stale") == 0, "n1 still stale")
    r1.s.close()


if __name__ == "__main__":
    h.run(main)
