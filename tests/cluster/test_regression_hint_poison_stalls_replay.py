#!/usr/bin/env python3
"""Regression: one hint that cannot be delivered stalled hint replay to its
peer for ever.

Hints are replayed in batches of 256 and a batch was deleted only when every
hint of it was delivered: one hint that could not be decoded, or that the
replica rejected for good, failed its batch, the same batch was sent again
every 5 s, and no hint after it ever reached the peer.

Two nodes (127.0.0.90-91). n2 runs with replication dc1:1 while n1 has
dc1:2 (a misconfiguration, but a real one: both joined with dc1:1, then n1
was restarted with dc1:2): n2 holds ranges only for
its own arcs and rejects writes to the others with NOT_FOUND, a permanent
error. With n2 down, n1 hints two writes whose hints are then damaged on
disk (one's record format byte, the other's key length), then 300 more; n2
owns about half of those.

Proves: once n2 is back, every hinted write n2 owns reaches it, including
those past the first batch; the damaged hints and the rejected ones are
dropped (counted in ringkv_hints_dropped_total, logged as hints.dropped),
the others counted as replayed, and n1 keeps none.
"""
# ctest: alongside others
import time

import harness as h

KEYS = 300
BAD_RECORD = b"poison-record"
BAD_SPLIT = b"poison-split"


def damage_hints(path):
    """Damage the hints for BAD_RECORD and BAD_SPLIT in the hints env (n1
    stopped). A hint is stored as u32 key length | key | record, the record
    starting with its version (1): BAD_RECORD's version becomes unknown,
    BAD_SPLIT's key length runs past the end. LMDB may keep stale copies of
    a page: every copy is damaged. Returns the copies found of each."""
    with open(path, "r+b") as f:
        data = bytearray(f.read())
        found = []
        for key in (BAD_RECORD, BAD_SPLIT):
            pat = len(key).to_bytes(4, "big") + key + b"\x01"
            n = 0
            i = data.find(pat)
            while i >= 0:
                if key == BAD_RECORD:
                    data[i + len(pat) - 1] = 0x7f
                else:
                    data[i:i + 4] = b"\xff\xff\xff\xff"
                n += 1
                i = data.find(pat, i + 1)
            found.append(n)
        f.seek(0)
        f.write(data)
        f.flush()
    return found


def main():
    ips = ["127.0.0.90", "127.0.0.91"]
    # both join with dc1:1, then n1 is restarted with dc1:2: a new node
    # whose setting differs from the members' does not join
    # (test_replication_mismatch), a member restarted with another one is
    # only reported
    c = h.Cluster(ips, seeds=ips[:1], replication="dc1:1")
    n1, n2 = c.nodes
    c.start()
    c.wait_converged(timeout=60)
    h.check(n1.stop() == 0, "n1 unclean exit")
    n1.extra["replication"] = "dc1:2"
    n1.start()
    c.wait_converged(timeout=60)

    h.check(n2.stop() == 0, "n2 unclean exit")
    c.wait_state(n1, "n2", "DN", timeout=30)
    cl = n1.client()
    # hints are stored on the thread pool: the damaged ones go first
    for i, key in enumerate((BAD_RECORD, BAD_SPLIT)):
        r = cl.call("PUT", key=key, value="p", cl="ONE")
        h.check(not r.err, "PUT %r: %r" % (key, r))
        h.check(h.wait_metric(n1, "ringkv_hints_stored_total", i + 1) == i + 1,
                "n1 did not hint %r" % key)
    res = cl.pipeline([("PUT", {"key": "k%d" % i, "value": "v%d" % i,
                                "cl": "ONE"}) for i in range(KEYS)])
    cl.close()
    h.check(not [r for r in res if r.err], "writes with n2 down failed")
    stored = h.wait_metric(n1, "ringkv_hints_stored_total", KEYS + 2)
    h.check(stored == KEYS + 2, "n1 stored %d hints" % stored)

    h.check(n1.stop() == 0, "n1 unclean exit")
    copies = damage_hints(n1.data_dir + "/hints/data.mdb")
    h.check(min(copies) >= 1, "damaged hints not found: %r" % copies)
    print("%d hints for n2, the first two damaged (copies %r)" %
          (stored, copies))
    n1.start()
    n2.start()
    c.wait_converged(timeout=60)

    # the keys n2 holds a range for, as n2 places them
    c2 = n2.client()
    eps = c2.pipeline([("ENDPOINTS", {"key": "k%d" % i})
                       for i in range(KEYS)])
    mine = [i for i, r in enumerate(eps)
            if [e[0] for e in r.get(36)] == ["n2"]]
    h.check(0 < len(mine) < KEYS, "n2 owns %d of %d keys" % (len(mine), KEYS))
    deadline = time.time() + 40
    missing = None
    while time.time() < deadline:
        res = c2.pipeline([("GET", {"key": "k%d" % i, "cl": "ONE"})
                           for i in mine])
        missing = [i for i, r in zip(mine, res)
                   if r.value != ("v%d" % i).encode()]
        if not missing:
            break
        time.sleep(0.5)
    c2.close()
    h.check(not missing, "n2 lacks %d of its %d hinted writes (e.g. %r)" %
            (len(missing), len(mine), missing[:5]))
    print("n2 has its %d hinted writes" % len(mine))

    deadline = time.time() + 20
    while True:
        m = n1.metrics()
        replayed = m.get("ringkv_hints_replayed_total", 0)
        dropped = m.get("ringkv_hints_dropped_total", 0)
        if replayed + dropped >= KEYS + 2 or time.time() > deadline:
            break
        time.sleep(0.2)
    want_dropped = 2 + KEYS - len(mine)
    h.check(replayed == len(mine) and dropped == want_dropped,
            "n1 replayed %d (want %d), dropped %d (want %d)" %
            (replayed, len(mine), dropped, want_dropped))
    bad = rejected = 0
    for line in n1.log().splitlines():
        if "event=hints.dropped" in line:
            f = dict(x.split("=", 1) for x in line.split() if "=" in x)
            bad += int(f["undecodable"])
            rejected += int(f["rejected"])
    h.check(bad == 2 and rejected == KEYS - len(mine),
            "n1 logged %d undecodable and %d rejected hints dropped" %
            (bad, rejected))
    print("n1: %d replayed, %d dropped" % (replayed, dropped))
    for n in c.nodes:
        h.check(n.stop() == 0, "%s unclean exit" % n.name)


h.run(main)
