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
import threading
import time

import harness as h

IPS = ["127.0.0.216", "127.0.0.217", "127.0.0.218"]
JOINER = "joiner-node-four"  # matched in n1's datagrams: no short name


def answer_later(conn, *args):
    """Send a RESP request now; the reply is collected by a thread."""
    box = {}

    def run():
        try:
            box["reply"] = conn.reply()
        except Exception as e:  # noqa: BLE001 -- reported by the caller
            box["error"] = repr(e)

    conn.s.sendall(h.resp_cmd(*args))
    t = threading.Thread(target=run, daemon=True)
    t.start()
    return t, box


def main():
    c = h.Cluster(IPS, seeds=IPS[1:3], replication="dc1:3",
                  default_consistency="QUORUM", resp_port=6379)
    for i, n in enumerate(c.nodes):
        n.extra["rack"] = "r%d" % (i + 1)
    n1 = c.nodes[0]
    deaf = h.drop_udp(n1, JOINER, "deaf-to-joiner")
    c.start()
    c.wait_converged(timeout=60)
    r1 = h.resp_serving(n1.ip, 6379)
    h.check(r1.call("SET", "before", "v0") == b"+OK", "SET before the join")

    d = h.Node(c, JOINER, "127.0.0.219", {"rack": "r4"})
    c.nodes.append(d)
    d.start()
    c.wait_state(c.nodes[1], JOINER, ("UJ", "UN"), timeout=60)
    got = h.wait_metric(n1, "ringkv_ring_stale", 1, timeout=30)
    h.check(got == 1, "n1's ring never went stale (ringkv_ring_stale %r)" %
            got)
    h.check(not n1.status()["rows"].get(JOINER),
            "n1 heard of the joiner through the fault")
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
    ts, bs = answer_later(w1, "SET", "during", "v1")
    tg, bg = answer_later(w2, "GET", "before")
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
