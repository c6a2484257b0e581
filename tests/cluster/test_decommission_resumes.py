#!/usr/bin/env python3
"""A decommission cut short resumes where it was: a leaving node killed -9
while pushing its ranges out keeps what the gaining nodes had committed,
and on restart pushes only the rest.

Proves: four nodes (RF 2, a rack each) hold 3,000 keys (300 deleted) and
8,000 values of 2,000 bytes; n4, started with stream_throughput_mb 1 (so
its leave takes seconds), is decommissioned while a writer keeps writing at
QUORUM through n1 (writes to n4's ranges fail while n4 is down and not yet
seen so, or need it: they are not counted). Once n4 has pushed at least one
whole range it is killed -9 (node.state still says leaving=1) and
restarted without the cap: its log says `leave.resumed` with at least the
ranges it had done a gossip tick before the kill (positions are saved each
tick), it pushes none of those again (`leave.range_done`), and
the rest of the leave moves fewer bytes than the whole leave needs (the
bytes of every range, summed over both runs). n4 then announces LEFT and
exits 0, and each remaining node serves every key it replicates, written
before or during the leave, and no deleted key. Until 2026-12-04 a
restarted decommission pushed every range again from its start
(regression: decommission_resends_everything).
"""
# ctest: alongside others
import subprocess
import time

import harness as h

KEYS = 3000
BIG = 8000  # 2,000 bytes each: about 8 MB on n4, 8 s at 1 MB/s


def main():
    ips = ["127.0.0.4", "127.0.0.5", "127.0.0.6", "127.0.0.7"]
    c = h.racked_cluster(ips, replication="dc1:2",
                         node_extra={3: {"stream_throughput_mb": 1}})
    n1, n4 = c.nodes[0], c.nodes[3]
    expect, gone = h.load_keys(n1, KEYS)
    h.load_big(n1, expect, BIG)

    w = h.Writer(n1, "live")
    w.start()
    rc, out = h.cli(n4, "decommission")
    h.check(rc == 0 and "is leaving" in out,
            "decommission: %d %r" % (rc, out))
    saved, before = h.kill_after_first_range(n4, "leave.range_done",
                                             "leave.left", "leaving=1\n")
    time.sleep(1)
    del n4.extra["stream_throughput_mb"]
    mark = len(n4.log())
    n4.start()
    try:
        rc = n4.proc.wait(timeout=180)
    except subprocess.TimeoutExpired:
        c.dump_logs()
        raise AssertionError("n4 did not finish leaving within 180 s")
    h.check(rc == 0, "n4 exited %d after leaving" % rc)
    h.check_resumed(n4, n4.log()[mark:], "leave", "leave.resumed",
                    "leave.range_done", "leave.left", saved, before)

    rest = c.nodes[:3]
    c.nodes = rest
    c.wait_converged(timeout=60)
    expect.update(w.finish(allowed=("TIMEOUT", "UNAVAILABLE")))
    h.check_served_by(rest, expect, gone)


if __name__ == "__main__":
    h.run(main)
