#!/usr/bin/env python3
"""A request waiting for a stale ring is answered CLOSED when its node stops.

A node whose ring is a membership change behind parks client requests
until the ring catches up or their timeout passes
(test_regression_stale_ring_refuses_requests). When the node is stopped
meanwhile (SIGTERM), a parked request must not wait out its timeout nor be
dropped without a word: it is answered -CLOSED at once, and the node exits
cleanly (status 0) without waiting for it.

Three nodes (127.0.0.205-207, RF 3, QUORUM, RESP on), then a fourth (.208)
joins; n1 runs with dropudp.c preloaded, deaf to gossip that mentions the
joiner, so its ring stays stale, and with write_timeout_ms 30000 so that a
parked SET would otherwise be answered RING_STALE only after 30 s. A SET
through n1 parks (ringkv_ring_stale_waits_total counts it); n1 is stopped;
the SET's reply is -CLOSED, not -RING_STALE, and n1 exits 0. Checked
that it fails (n1 still running 20 s after SIGTERM) when the coordinator
keeps parked requests while the ring is stale even during a stop.
"""
import threading

import harness as h

IPS = ["127.0.0.205", "127.0.0.206", "127.0.0.207"]
JOINER = "joiner-node-four"  # matched in n1's datagrams: no short name


def main():
    c = h.Cluster(IPS, seeds=IPS[1:3], replication="dc1:3",
                  default_consistency="QUORUM", resp_port=6379)
    for i, n in enumerate(c.nodes):
        n.extra["rack"] = "r%d" % (i + 1)
    n1 = c.nodes[0]
    n1.extra["write_timeout_ms"] = 30000
    h.drop_udp(n1, JOINER, "deaf-to-joiner")
    c.start()
    c.wait_converged(timeout=60)
    r1 = h.resp_serving(n1.ip, 6379)
    h.check(r1.call("SET", "before", "v0") == b"+OK", "SET before the join")

    d = h.Node(c, JOINER, "127.0.0.208", {"rack": "r4"})
    c.nodes.append(d)
    d.start()
    c.wait_state(c.nodes[1], JOINER, ("UJ", "UN"), timeout=60)
    got = h.wait_metric(n1, "ringkv_ring_stale", 1, timeout=30)
    h.check(got == 1, "n1's ring never went stale (ringkv_ring_stale %r)" %
            got)
    waits0 = n1.metrics().get("ringkv_ring_stale_waits_total", 0)

    w = h.RespConn(n1.ip, 6379, timeout=60)
    box = {}

    def run():
        try:
            box["reply"] = w.reply()
        except Exception as e:  # noqa: BLE001 -- reported below
            box["error"] = repr(e)

    w.s.sendall(h.resp_cmd("SET", "at-stop", "v1"))
    t = threading.Thread(target=run, daemon=True)
    t.start()
    got = h.wait_metric(n1, "ringkv_ring_stale_waits_total", waits0 + 1,
                        timeout=10)
    h.check(got >= waits0 + 1, "the SET did not wait for the ring (waits "
            "%r -> %r, reply %r)" % (waits0, got, box))
    h.check("reply" not in box, "the SET was answered before the stop: %r" %
            box)

    rc = n1.stop(timeout=20)  # well under the SET's 30 s timeout
    t.join(10)
    print("n1 exit status %r; the waiting SET: %r" % (rc, box))
    h.check(rc == 0, "n1 exited with status %r" % rc)
    h.check(box.get("reply", b"").startswith(b"-CLOSED"),
            "the waiting SET at the stop: %r (want -CLOSED)" % box)
    w.s.close()
    r1.s.close()


if __name__ == "__main__":
    h.run(main)
