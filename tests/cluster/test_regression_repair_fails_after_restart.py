#!/usr/bin/env python3
"""Regression repair_fails_after_restart: a repair right after a replica's
restart ended "done with failures".

Right after a restart, one `ringkv repair --wait` in three ended "done
with failures" (exit 8): a comparison whose replica refused or reset the
connection for a moment (it was restarting, or n1's connection to it was
backing off) failed at once. Now a step that could not reach a replica
gossip still has UP is tried 4 times a comparison, 1, 2 and 4 s apart.

Three nodes (127.0.2.61-63, RF 3, a rack each; the probe detector off
and a high conviction threshold, so that a node restarting stays UP in
gossip, as a quick restart does under the defaults) hold 2,000 keys. n3
is stopped and `ringkv -h n1 repair --wait` starts at once; n3 is started
again 2 s later, while n1 is still trying it. Proves: the repair ends
"done" (exit 0), having asked n3 again after a connection error
(repair.retry in n1's log). Checked that it fails without the retry
(exit 8: "the replica's leaves with n3: Connection refused").
"""
# ctest: alongside others
import subprocess
import time

import harness as h


def main():
    ips = ["127.0.2.61", "127.0.2.62", "127.0.2.63"]
    c = h.racked_cluster(ips, replication="dc1:3", failure_probes="false",
                         phi_convict_threshold=100,
                         repair_after_join="false")
    n1, n2, n3 = c.nodes
    h.load_keys(n1, 2000)
    h.check(n3.stop() == 0, "n3 unclean exit")
    p = subprocess.Popen([h.RINGKV, "-h", "%s:7380" % n1.ip, "repair",
                          "--wait"], stdout=subprocess.PIPE,
                         stderr=subprocess.STDOUT, text=True)
    time.sleep(2)  # n3 down meanwhile: n1's requests to it are refused
    n3.start()
    out, _ = p.communicate(timeout=300)
    print("ringkv repair --wait -> %d: %r" % (p.returncode,
                                             out.strip().splitlines()[-1]))
    h.check(p.returncode == 0 and "Repair: done in" in out,
            "repair while n3 restarted: %d %r" % (p.returncode, out[-400:]))
    retries = [ln for ln in n1.log().splitlines()
               if "event=repair.retry " in ln and " peer=n3 " in ln and
               "error=RING_STALE" not in ln and "error=OVERLOADED" not in ln]
    h.check(retries, "n1 never asked n3 again after a connection error")
    print("n1 asked n3 again: %s" % retries[0].split("event=")[1])
    c.wait_converged(timeout=60)
    for n in c.nodes:
        h.check(n.stop() == 0, "%s unclean exit" % n.name)


if __name__ == "__main__":
    h.run(main)
