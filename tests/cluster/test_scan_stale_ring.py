#!/usr/bin/env python3
"""SCAN through a node whose ring is a membership change behind.

A coordinator that has heard of a newer ring epoch than it applied does
not walk its old ring (whose arcs may name replicas that no longer hold
them, or miss writes the new replicas took): a SCAN call waits for the
ring to catch up and is then served; one still stale at read_timeout_ms
is answered -RING_STALE (retryable: the same cursor works afterwards).

Three nodes (127.0.0.151-153, RF 3, QUORUM, RESP on), then a fourth
(.154) joins. n1 is deaf to every gossip packet that mentions the joiner
(dropudp.c), so its ring stays stale (ringkv_ring_stale 1). Through n1: a
SCAN while stale throughout is answered -RING_STALE; a SCAN sent while
stale waits, the fault ends, and it is answered with keys and a cursor;
the scan goes on from that cursor to the end and returns exactly the keys
written (through n2, before and during the join), each once.
"""
import os
import sys
import time

try:
    import redis
except ImportError:  # python3-redis lives with Debian's python3
    sys.path.append("/usr/lib/python3/dist-packages")
    import redis

import harness as h

IPS = ["127.0.0.151", "127.0.0.152", "127.0.0.153"]
JOINER = "joiner-node-four"  # matched in n1's datagrams: no short name


def main():
    # read_timeout_ms 4 s: room for n1 to hear of the join once the fault
    # ends while the waiting SCAN still waits
    c, n1, r1, deaf = h.stale_ring_cluster(IPS, "127.0.0.154", JOINER,
                                           read_timeout_ms=4000)
    r2 = redis.Redis(host=IPS[1], port=6379, socket_timeout=20)
    keys = {"before", "ready"}  # the helper's SETs, through n1
    for i in range(0, 300, 50):
        batch = {"s:%04d" % j: "v" for j in range(i, i + 50)}
        r2.mset(batch)
        keys.update(batch)

    # stale throughout its read timeout: RING_STALE
    t0 = time.time()
    rep = r1.call("SCAN", "0", "COUNT", "50")
    took = time.time() - t0
    print("SCAN while stale throughout: %r after %.2f s" % (rep, took))
    h.check(isinstance(rep, bytes) and rep.startswith(b"-RING_STALE"),
            "SCAN through a stale n1: %r" % (rep,))

    # a SCAN waits; the fault ends; it is served
    w = h.RespConn(n1.ip, 6379)
    t, box = h.reply_later(w, "SCAN", "0", "COUNT", "50")
    time.sleep(0.5)
    h.check(not box, "the SCAN was answered while n1 was stale: %r" % box)
    h.check(n1.metrics().get("ringkv_ring_stale") == 1,
            "n1 caught up before the fault ended")
    os.unlink(deaf)
    t.join(20)
    rep = box.get("reply")
    print("after the fault ended: %r" % (str(rep)[:120],))
    h.check(isinstance(rep, list) and len(rep) == 2,
            "the waiting SCAN: %r" % (box,))
    cur = int(rep[0])
    seen = list(rep[1])
    rc = redis.Redis(host=IPS[0], port=6379, socket_timeout=20)
    while cur != 0:
        cur, got = rc.scan(cur, count=50)
        seen += got
    names = {k.decode() for k in seen}
    h.check(len(names) == len(seen), "keys repeated")
    h.check(names == keys, "the scan through n1: %d keys, %d missing, %d "
            "extra: %r" % (len(names), len(keys - names), len(names - keys),
                          sorted(names - keys)[:5]))
    h.check(n1.metrics().get("ringkv_ring_stale") == 0, "n1 still stale")
    print("the waiting SCAN went on to the end: the %d keys, each once" %
          len(keys))
    for x in (r1, w):
        x.s.close()


if __name__ == "__main__":
    h.run(main)
