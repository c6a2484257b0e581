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
# ctest: alongside others
import harness as h

IPS = ["127.0.0.205", "127.0.0.206", "127.0.0.207"]
JOINER = "joiner-node-four"  # matched in n1's datagrams: no short name


def main():
    _, n1, r1, _ = h.stale_ring_cluster(IPS, "127.0.0.208", JOINER,
                                        {"write_timeout_ms": 30000})
    waits0 = n1.metrics().get("ringkv_ring_stale_waits_total", 0)

    w = h.RespConn(n1.ip, 6379, timeout=60)
    t, box = h.reply_later(w, "SET", "at-stop", "v1")
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
