#!/usr/bin/env python3
"""repair: a replica that missed writes is brought back by comparing Merkle
leaves and exchanging only the sub-arcs that differ, both ways.

Proves: three nodes (127.0.0.201-203, RF 3, a rack each, hinted handoff
off so that nothing else repairs) hold 3,000 keys (300 deleted).

1. n3 is stopped; through n1 at QUORUM 10 keys are overwritten, 10 new
   ones written and 10 deleted; n3 is started again and, read at ONE
   (its own replica first), serves the old state. `ringkv repair --wait` on
   n1 pushes the differing sub-arcs to n3 (and pulls n3's, which bring
   nothing newer): afterwards n3 serves every key at its newest and none
   of the deleted ones. Few of the keys moved (the leaves are ~8 keys).
2. n1 is stopped and the same kind of writes go through n2; `ringkv repair`
   on n1 once it is back pulls them in from n2 and n3.
3. A repair right after finds no leaf that differs and moves nothing.
4. With n3 DOWN, repair on n1 still makes its comparisons with n2; those
   with n3 fail and the run ends "done with failures" (exit 8 under
   --wait), naming the first.
"""
import re
import time

import harness as h

IPS = ["127.0.0.201", "127.0.0.202", "127.0.0.203"]
KEYS = 3000


def change(node, expect, gone, tag):
    """Through node at QUORUM: overwrite 10 live keys, write 10 new ones,
    delete 10 live ones; updates expect/gone."""
    live = sorted(expect)
    over = live[:10]
    dele = live[10:20]
    new = ["new-%s-%d" % (tag, i) for i in range(10)]
    cl = node.client()
    try:
        reqs = [("PUT", {"key": k, "value": "x" + tag, "cl": "QUORUM"})
                for k in over + new]
        reqs += [("DEL", {"key": k, "cl": "QUORUM"}) for k in dele]
        res = cl.pipeline(reqs)
        h.check(not [r for r in res if r.err],
                "writes failed: %r" % [r.err for r in res if r.err][:3])
    finally:
        cl.close()
    for k in over + new:
        expect[k] = ("x" + tag).encode()
    for k in dele:
        del expect[k]
        gone.append(k)
    return over, new, dele


def stale_on(node, expect, gone, keys):
    """How many of keys node serves at ONE differently from expect/gone."""
    cl = node.client()
    try:
        res = cl.pipeline([("GET", {"key": k, "cl": "ONE"}) for k in keys])
    finally:
        cl.close()
    bad = 0
    for k, r in zip(keys, res):
        if k in expect:
            bad += r.err is not None or r.value != expect[k]
        else:
            bad += r.err != "NOT_FOUND"
    return bad


def repair(node, *extra):
    rc, out = h.cli(node, "repair", "--wait", *extra)
    print("%s: ringkv repair --wait -> %d:\n%s" % (node.name, rc, out))
    return rc, out


def moved(out):
    m = re.search(r"(\d+) keys \([^)]*\) pulled, (\d+) keys \([^)]*\) "
                  r"pushed", out)
    h.check(m, "no totals in %r" % out)
    return int(m.group(1)), int(m.group(2))


def main():
    c = h.racked_cluster(IPS, replication="dc1:3", hinted_handoff="false")
    n1, n2, n3 = c.nodes
    expect, gone = h.load_keys(n1, KEYS)

    # 1: n3 misses writes; repair on n1 pushes them
    h.check(n3.stop() == 0, "n3 unclean exit")
    c.wait_state(n1, "n3", "DN", timeout=60)
    over, new, dele = change(n1, expect, gone, "a")
    n3.start()
    c.wait_converged(timeout=60)
    missed = stale_on(n3, expect, gone, over + new + dele)
    h.check(missed == 30, "n3 missed %d of the 30 writes: hints or read "
            "repair on?" % missed)
    rc, out = repair(n1)
    h.check(rc == 0 and "Repair: done in" in out, "repair on n1: %r" % out)
    kin, kout = moved(out)
    h.check(0 < kout < KEYS // 4,
            "n1 pushed %d keys for 30 changed (of %d)" % (kout, KEYS))
    h.check(stale_on(n3, expect, gone, over + new + dele) == 0,
            "n3 still stale after the repair")
    h.check_served(n3, expect, gone)
    print("n3 serves all %d keys after n1's repair" % len(expect))

    # 2: n1 misses writes; repair on n1 pulls them
    h.check(n1.stop() == 0, "n1 unclean exit")
    c.wait_state(n2, "n1", "DN", timeout=60)
    over, new, dele = change(n2, expect, gone, "b")
    n1.start()
    c.wait_converged(timeout=60)
    h.check(stale_on(n1, expect, gone, over + new + dele) == 30,
            "n1 did not miss the writes")
    rc, out = repair(n1)
    h.check(rc == 0 and "Repair: done in" in out, "repair on n1: %r" % out)
    kin, kout = moved(out)
    h.check(0 < kin < KEYS // 4,
            "n1 pulled %d keys for 30 changed (of %d)" % (kin, KEYS))
    for n in (n1, n2, n3):
        h.check_served(n, expect, gone)
    print("every node serves all %d keys" % len(expect))
    m = n1.metrics()
    h.check(m.get('ringkv_repair_keys_total{direction="in"}', 0) >= kin,
            "metrics: %r" % {k: v for k, v in m.items() if "repair" in k})

    # 3: nothing differs any more
    rc, out = repair(n2)
    h.check(rc == 0 and " 0 differed (0 of " in out and
            moved(out) == (0, 0), "a second repair: %r" % out)

    # 4: a replica down: its comparisons fail, the others are made
    n3.kill9()
    c.wait_state(n1, "n3", "DN", timeout=60)
    rc, out = repair(n1)
    h.check(rc == 8 and "done with failures" in out and "not UP" in out,
            "repair with n3 down: %d %r" % (rc, out))
    time.sleep(0.1)


if __name__ == "__main__":
    h.run(main)
