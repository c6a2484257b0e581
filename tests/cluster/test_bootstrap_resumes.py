#!/usr/bin/env python3
"""A join cut short resumes where it was: a node killed -9 while streaming
its ranges in keeps the ranges (and the parts of ranges) it had committed,
and on restart streams only the rest.

Proves: three nodes (RF 2, a rack each) hold 3,000 values of 2,000 bytes; a
fourth joins with stream_throughput_mb 1 (so the join takes seconds) while
a writer keeps writing at QUORUM through n1 (writes to n4's ranges may
time out while n4 is down and not yet seen so: they are not counted). Once n4 has streamed at least
one whole range it is killed -9, and restarted (without the cap) after a
second: its log says `stream.resumed` with at least the ranges it had
done a second before the kill (positions are saved each gossip tick), it
streams none of those again, and the join then streams fewer bytes than the whole join
needs (the bytes of every range n4 gains, `stream.range_done` summed over
both runs, minus those done before the kill). n4 then serves every key it
replicates, written before, during or while it was down (those reach it
as hints), and no deleted key. A fifth node, killed the same way but
restarted with max_hint_window_ms 500 after a longer pause, does not trust
its saved positions (no hints cover what it missed that long) and streams
every range again from its start (`stream.resume_skipped`), ending with its
share of the data too. After the join n4's saved positions are gone: a
restart logs no stream.leftover_progress (until 2026-12-04 a position
saved after the deletion came back: stream_progress_left_after_join). Before positions were saved, a restarted join
always streamed everything again.
"""
# ctest: alongside others
# ctest: long
import time

import harness as h

KEYS = 3000


def main():
    ips = ["127.0.0.229", "127.0.0.230", "127.0.0.235"]
    c = h.racked_cluster(ips, replication="dc1:2")
    n1 = c.nodes[0]
    expect, gone = h.load_keys(n1, KEYS)
    h.load_big(n1, expect, KEYS)

    w = h.Writer(n1, "live")
    w.start()
    n4 = h.Node(c, "n4", "127.0.0.236",
                {"rack": "r4", "stream_throughput_mb": 1})
    c.nodes.append(n4)
    n4.start()
    saved, before = h.kill_after_first_range(
        n4, "stream.range_done", "boot.joined", "joining=1\n", wait_s=1)
    time.sleep(1)
    del n4.extra["stream_throughput_mb"]
    mark = len(n4.log())
    n4.start()
    c.wait_state(n1, "n4", "UN", timeout=120)
    c.wait_converged(timeout=60)
    w.stop.set()
    w.join(timeout=30)
    # writes to n4's ranges time out until n4 is seen DOWN (a pending
    # replica is waited for while it is UP): not acknowledged, not counted
    bad = [e for _, e in w.errors if e not in ("TIMEOUT", "UNAVAILABLE")]
    h.check(not bad, "writes failed during the join: %r" % bad[:5])
    h.check(len(w.acked) > 100, "only %d writes acknowledged" % len(w.acked))
    h.check_resumed(n4, n4.log()[mark:], "join", "stream.resumed",
                    "stream.range_done", "boot.joined", saved, before)
    expect.update(w.acked)
    mine, dead = map(len, h.check_served(n4, expect, gone))
    print("n4 serves its %d keys (%d written during the join) and none of "
          "its %d deleted ones" % (mine, len(w.acked), dead))
    # the saved positions went with the join: a restart finds none
    # (regression: stream_progress_left_after_join)
    time.sleep(1)
    h.check(n4.stop() == 0, "n4 did not stop cleanly")
    mark = len(n4.log())
    n4.start()
    c.wait_converged(timeout=60)
    h.check("event=stream.leftover_progress" not in n4.log()[mark:],
            "n4's saved positions outlived its join")

    # n5: down longer than its hint window: everything again
    n5 = h.Node(c, "n5", "127.0.0.237",
                {"rack": "r5", "stream_throughput_mb": 1})
    c.nodes.append(n5)
    n5.start()
    h.kill_after_first_range(n5, "stream.range_done", "boot.joined",
                             "joining=1\n", wait_s=1)
    del n5.extra["stream_throughput_mb"]
    n5.extra["max_hint_window_ms"] = 500
    time.sleep(2)
    mark = len(n5.log())
    n5.start()
    c.wait_state(n1, "n5", "UN", timeout=120)
    c.wait_converged(timeout=60)
    log = n5.log()[mark:]
    h.check("event=stream.resume_skipped" in log and
            "event=stream.resumed" not in log,
            "n5 resumed although it was down past its hint window")
    mine5 = len(h.check_served(n5, expect, gone)[0])
    print("n5, down past its hint window, streamed every range again and "
          "serves its %d keys" % mine5)


if __name__ == "__main__":
    h.run(main)
