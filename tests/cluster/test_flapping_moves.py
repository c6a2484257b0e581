#!/usr/bin/env python3
"""A node that flaps while ranges move: a join while one of its sources is
killed -9 and restarted over and over, then a decommission while one of
the gaining nodes is; nothing acknowledged is lost and both finish.

Proves: three nodes (RF 3, a rack each) hold 2,000 keys (200 deleted) and
2,000 values of 2,000 bytes; a writer writes at QUORUM through n1
throughout (a RING_STALE is retried, as clients do). n4 joins with
stream_throughput_mb 1 while n2 -- a replica of every range, so a source
n4 may stream from -- is killed -9 and restarted every second or so: the
join still finishes (streamed=1), and the repair that follows it brings
n4 the writes its sources missed while down (until 2026-12-04 there was
none, and n4 lacked them: regression join_misses_writes_source_missed),
running again if n2 was DOWN when it ran (until 2026-12-07 it gave up:
after_join_repair_gave_up_on_a_flapping_replica).
Then n4 is decommissioned while n3 is
killed and restarted the same way: n4 still announces LEFT and exits 0.
With three replicas of every key and one node flapping no write fails
during the join (n2 is a source). During the decommission n3 gains n4's
ranges: a move requires its gaining replica's answer on top of the
level's, so a write of those ranges sent while n3 is killed and not yet
convicted is answered TIMEOUT (not acknowledged; it may be applied), as
Cassandra's pending replicas are; those are allowed there (CI,
2026-12-06: 21 of them in a decommission during which n3 was killed 82
times under ASan), every other error is not.
After each move, once the cluster has converged and hints are replayed,
every node serves (ONE, from its own replica) every key it replicates,
written before or during the moves, and no deleted key.
"""
import random
import re
import time

import harness as h

KEYS = 2000


def flap_until(node, over, rnd, timeout=180):
    """Kills node -9 and restarts it, again and again, until over() is
    true; leaves it running; returns how many times it was killed. Runs on
    the main thread: a node started from another thread would get the
    harness's parent-death signal when that thread ends."""
    kills = 0
    deadline = time.time() + timeout
    while not over():
        h.check(time.time() < deadline, "still not over after %d s of "
                "flapping %s" % (timeout, node.name))
        time.sleep(rnd.uniform(0.5, 1.5))
        if over():
            break
        node.kill9()
        kills += 1
        time.sleep(rnd.uniform(0.2, 1.0))
        node.start()
    return kills


def state_of(observer, name):
    try:
        return observer.status()["rows"].get(name, {}).get(5)
    except (OSError, ConnectionError, RuntimeError):
        return None


def served_everywhere(nodes, expect, gone, timeout=90):
    """check_served on every node, waiting for hint replay to bring what a
    flapping node missed."""
    deadline = time.time() + timeout
    for n in nodes:
        while True:
            try:
                mine, dead = map(len, h.check_served(n, expect, gone))
                break
            except AssertionError:
                if time.time() > deadline:
                    raise
                time.sleep(1)
        print("%s serves its %d keys and none of its %d deleted ones" %
              (n.name, mine, dead))


def main():
    ips = ["127.0.0.31", "127.0.0.32", "127.0.0.33"]
    c = h.racked_cluster(ips, replication="dc1:3")
    n1, n2, n3 = c.nodes
    expect, gone = h.load_keys(n1, KEYS)
    h.load_big(n1, expect, KEYS)
    w = h.Writer(n1, "live")
    w.start()

    n4 = h.Node(c, "n4", "127.0.0.34",
                {"rack": "r4", "stream_throughput_mb": 1})
    c.nodes.append(n4)
    n4.start()
    kills = flap_until(n2, lambda: state_of(n1, "n4") == "UN",
                       random.Random(1))
    h.check("event=boot.joined" in n4.log() and "streamed=1" in n4.log(),
            "n4's log does not show a streamed join")
    c.wait_converged(timeout=90)
    print("n4 joined while n2 was killed %d times" % kills)
    # n4 streamed each range from one replica; one that was down missed
    # writes the others have: the repair after the join brings them. It
    # may start while n2, killed last, is still DOWN or restarting: that
    # run fails its comparisons with n2 and runs again 10 s later
    # (regression after_join_repair_gave_up_on_a_flapping_replica, CI
    # 2026-12-07: it was no longer due, and n4 kept what it lacked)
    deadline = time.time() + 240
    while "level=info node=n4 event=repair.done " not in n4.log():
        h.check(time.time() < deadline and
                "run=5 at_most=5 note=" not in n4.log(),
                "n4's repair after its join never ended without failures")
        time.sleep(0.2)
    m = re.search(r"level=info node=n4 event=repair\.done .*keys_in=(\d+)",
                  n4.log())
    runs = n4.log().count("event=repair.after_join ")
    h.check(runs >= 1, "n4's repair after its join did not run")
    print("n4's repair after its join pulled %s keys (%d run%s)" %
          (m.group(1), runs, "" if runs == 1 else "s"))
    h.check(not w.errors, "QUORUM writes failed during the join: %r" %
            w.errors[:5])
    expect.update(w.acked)
    served_everywhere(c.nodes, expect, gone)

    rc, out = h.cli(n4, "decommission")
    h.check(rc == 0 and "is leaving" in out,
            "decommission: %d %r" % (rc, out))
    # every restart of n3, a gaining node, sends n4's pushes to it back
    # to their last saved position: under ASan on a loaded machine the
    # leave took 150 s (82 kills) to more than 180 (CI, 2026-12-06)
    kills = flap_until(n3, lambda: not n4.alive(), random.Random(2),
                       timeout=420)
    h.check(n4.proc.returncode == 0, "n4 exited %d after leaving" %
            n4.proc.returncode)
    print("n4 left while n3 was killed %d times" % kills)
    c.nodes.remove(n4)
    c.wait_converged(timeout=90)
    expect.update(w.finish(allowed=("TIMEOUT",), at_least=1000))
    timeouts = sum(1 for _, e in w.errors if e == "TIMEOUT")
    print("%d writes answered TIMEOUT while n3, gaining n4's ranges, was "
          "killed" % timeouts)
    served_everywhere(c.nodes, expect, gone)
    print("%d writes acknowledged during the moves, none lost (%d "
          "RING_STALE retried)" % (len(w.acked), w.stale))


if __name__ == "__main__":
    h.run(main)
