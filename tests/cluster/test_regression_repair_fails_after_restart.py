#!/usr/bin/env python3
"""Regression repair_fails_after_restart: a repair while a replica
restarts ended "done with failures".

Right after a restart, one `ringkv repair --wait` in three ended "done
with failures" (exit 8): a comparison whose replica refused the
connection for a moment (it was restarting, or its connection was backing
off) failed at once. Now such a step is asked again every 200 ms, up to
50 times, as OVERLOADED and RING_STALE already were.

Three nodes (127.0.1.180-182, RF 3, a rack each, a high conviction
threshold so that a node down for a few seconds stays UP in gossip) hold
2,000 keys. n3 is killed -9 and `ringkv -h n1 repair --wait` starts at
once; n3 is started again 3 s later. Proves: the repair ends "done"
(exit 0), not "done with failures", after asking n3 again (repair.retry
with a connection error in n1's log).
"""
# ctest: alongside others
import subprocess
import time

import harness as h


def main():
    ips = ["127.0.1.180", "127.0.1.181", "127.0.1.182"]
    c = h.racked_cluster(ips, replication="dc1:3", phi_convict_threshold=100,
                         repair_after_join="false")
    n1, n2, n3 = c.nodes
    h.load_keys(n1, 2000)
    n3.kill9()
    p = subprocess.Popen([h.RINGKV, "-h", "%s:7380" % n1.ip, "repair",
                          "--wait"], stdout=subprocess.PIPE,
                         stderr=subprocess.STDOUT, text=True)
    time.sleep(3)
    n3.start()
    out, _ = p.communicate(timeout=180)
    print("ringkv repair --wait -> %d: %r" % (p.returncode,
                                             out.strip().splitlines()[-1]))
    h.check(p.returncode == 0 and "Repair: done in" in out,
            "repair while n3 restarted: %d %r" % (p.returncode, out[-400:]))
    retries = [l for l in n1.log().splitlines() if "event=repair.retry " in l]
    h.check(any("peer=n3" in l for l in retries),
            "n1 never asked n3 again: %r" % retries[:3])
    print("n1 asked n3 again: %s" % retries[0].split("event=")[1])
    c.wait_converged(timeout=60)


if __name__ == "__main__":
    h.run(main)
