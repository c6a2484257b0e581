#!/usr/bin/env python3
"""Regression decommission_stalls_after_join: add one node, then
decommission another, with data.

Three nodes of RF 3 hold 5,000 keys; n4 joins by streaming and so holds
several separate ranges (each node replicates 3/4 of the ring), then n1 is
decommissioned with `ringkv decommission --wait`. Back at three nodes of RF
3, n4 replicates the whole ring: the gaps between its ranges must be
created as ranges before n1 pushes them. Until 2026-12-06 gshell.c kept
those gaps in a buffer of 2 * (ranges replicated) + 2 = 4 entries; with
more gaps it created none, silently, every push of a gap to n4 answered
"not found" (leave.retry ... error="not found") and the decommission
never ended. Proves: the decommission ends (--wait exits 0 once n1 has
left), and n2, n3 and n4 each serve every key, no deleted key back.
"""
# ctest: alongside others
import subprocess
import time

import harness as h

KEYS = 5000


def main():
    ips = ["127.0.1.61", "127.0.1.62", "127.0.1.63"]
    c = h.racked_cluster(ips, replication="dc1:3", num_tokens=16)
    n1, n2, n3 = c.nodes
    expect, gone = h.load_keys(n1, KEYS)

    n4 = h.Node(c, "n4", "127.0.1.64", {"rack": "r4"})
    c.nodes.append(n4)
    n4.start()
    c.wait_converged(timeout=120)
    h.check("streamed=1" in n4.log(), "n4 did not join by streaming")
    held = n4.metrics().get("ringkv_stored_ranges", 0)
    print("n4 joined, holding %d separate ranges" % held)
    # what broke needed more than 4 gaps to fill
    h.check(held > 4, "n4 holds only %d ranges: the test no longer sets "
            "up what broke" % held)

    p = subprocess.Popen([h.RINGKV, "-h", "%s:7380" % n1.ip, "decommission",
                          "--wait"], stdout=subprocess.PIPE,
                         stderr=subprocess.STDOUT, text=True)
    try:
        out, _ = p.communicate(timeout=90)
    except subprocess.TimeoutExpired:
        p.kill()
        out, _ = p.communicate()
        c.dump_logs()
        retries = [l for l in n1.log().splitlines() if "leave.retry" in l]
        raise AssertionError("decommission of n1 never ended; its last "
                             "output %r; retries %r" %
                             (out[-500:], retries[-3:]))
    h.check(p.returncode == 0, "decommission --wait exited %d: %r" %
            (p.returncode, out[-500:]))
    print("ringkv decommission --wait: %r" % out.strip().splitlines()[-1])
    h.check(n1.proc.wait(timeout=30) == 0, "n1 did not exit 0")
    h.check("not found" not in n1.log(), "a push answered not found")
    c.wait_converged(timeout=60, up=[n2, n3, n4])
    time.sleep(0.5)
    for n in (n2, n3, n4):
        mine, _ = h.check_served(n, expect, gone)
        h.check(len(mine) == len(expect), "%s serves %d of %d keys" %
                (n.name, len(mine), len(expect)))
    print("n2, n3 and n4 each serve all %d keys" % len(expect))


if __name__ == "__main__":
    h.run(main)
