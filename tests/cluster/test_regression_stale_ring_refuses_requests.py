#!/usr/bin/env python3
"""Regression: a node whose ring was a membership change behind refused
every request with RING_STALE until it caught up.

A node hears of a new ring epoch (another node's RING_EPOCH in gossip)
before it has the change itself; until it has, its ring is stale. Until
2026-12-04 it answered every request RING_STALE meanwhile, so during any
join or decommission a Redis client (which does not retry) saw errors, and
test_decommission once failed on them. Now a request arriving then waits
for the ring to catch up and is served; it is refused RING_STALE only if
its own timeout passes first.

Three nodes (127.0.0.216-218, RF 3, QUORUM, RESP on), then a fourth
(.219) joins. n1 runs with dropudp.c preloaded, deaf to every gossip
packet that mentions the joiner: it hears the others' RING_EPOCH move to
the join's epoch but never the join, so its ring stays stale (metric
ringkv_ring_stale 1). Through n1's RESP port: a SET waits and, still
stale at write_timeout_ms, is answered -RING_STALE; then a SET and a GET
(of a key written before) wait (ringkv_ring_stale_waits_total counts
them); the fault ends, n1 hears of the join, and both are answered: +OK
and the value, and the SET's key reads back. Before the fix the SET and
the GET were answered -RING_STALE at once.
"""
import os
import time

import harness as h

IPS = ["127.0.0.216", "127.0.0.217", "127.0.0.218"]
JOINER = "joiner-node-four"  # matched in n1's datagrams: no short name


def main():
    _, n1, r1, deaf = h.stale_ring_cluster(IPS, "127.0.0.219", JOINER)
    waits0 = n1.metrics().get("ringkv_ring_stale_waits_total", 0)

    # still stale at its timeout (write_timeout_ms 1500): RING_STALE
    t0 = time.time()
    rep = r1.call("SET", "expires", "x")
    took = time.time() - t0
    print("SET while stale throughout: %r after %.2f s" % (rep, took))
    h.check(rep.startswith(b"-RING_STALE"),
            "SET through a stale n1: %r" % rep)

    # a SET and a GET wait; the fault ends; both are served
    w1 = h.RespConn(n1.ip, 6379)
    w2 = h.RespConn(n1.ip, 6379)
    ts, bs = h.reply_later(w1, "SET", "during", "v1")
    tg, bg = h.reply_later(w2, "GET", "before")
    got = h.wait_metric(n1, "ringkv_ring_stale_waits_total", waits0 + 3,
                        timeout=10)
    h.check(got >= waits0 + 3,
            "the SET and GET did not wait for the ring (waits %r -> %r; "
            "SET %r, GET %r)" % (waits0, got, bs, bg))
    h.check(n1.metrics().get("ringkv_ring_stale") == 1,
            "n1 caught up before the fault ended")
    os.unlink(deaf)
    ts.join(20)
    tg.join(20)
    print("after the fault ended: SET %r, GET %r" % (bs, bg))
    h.check(bs.get("reply") == b"+OK", "the waiting SET: %r" % bs)
    h.check(bg.get("reply") == b"v0", "the waiting GET: %r" % bg)
    h.check(r1.call("GET", "during") == b"v1", "the SET's key reads back")
    h.check(n1.metrics().get("ringkv_ring_stale") == 0, "n1 still stale")
    print("n1 ring_stale 0; stale waits %d -> %d" %
          (waits0, n1.metrics().get("ringkv_ring_stale_waits_total", 0)))
    for x in (r1, w1, w2):
        x.s.close()


if __name__ == "__main__":
    h.run(main)
