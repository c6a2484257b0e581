#!/usr/bin/env python3
"""Regression repair_first_pull_empty: a repair whose first differing
sub-arc held nothing on the other replica (this node had a write that one
lacked, the commonest repair there is) sorted the pull's fingerprints with
qsort(NULL, 0, ...): undefined behaviour, and the ASan+UBSan build's node
aborted in the middle of the repair (found when a join's repair ran into
it in test_regression_write_outlives_timeout).

Proves: two nodes (RF 2, hinted handoff and the repair after a join off,
so that only this repair moves anything); n2 is killed -9 and one key is
written at ONE through n1; n2 comes back without it; `ringkv repair
--wait` on n1 ends `done` with nothing pulled and the key pushed, n1 is
still running, and n2 then serves the key at ONE from its own replica.
The crash itself shows only in the ASan+UBSan build (`make test` runs
both): in the plain build qsort(NULL, 0) did no harm, and there this test
checks the repair's outcome only.
"""
# ctest: alongside others
import re

import harness as h


def main():
    ips = ["127.0.0.23", "127.0.0.24"]
    c = h.racked_cluster(ips, replication="dc1:2", hinted_handoff="false",
                         repair_after_join="false")
    n1, n2 = c.nodes
    n2.kill9()
    c.wait_state(n1, "n2", "DN", timeout=30)
    cl = n1.client()
    r = cl.call("PUT", key="only-on-n1", value="v", cl="ONE")
    cl.close()
    h.check(not r.err, "ONE write with n2 down: %r" % r)
    n2.start()
    c.wait_converged(timeout=60)
    rc, out = h.cli(n1, "repair", "--wait")
    h.check(rc == 0 and "Repair: done in" in out,
            "repair on n1: %d %r" % (rc, out))
    h.check(n1.alive(), "n1 died during the repair")
    m = re.search(r"event=repair\.done .*keys_in=(\d+) keys_out=(\d+)",
                  n1.log())
    h.check(m and m.group(1) == "0" and int(m.group(2)) >= 1,
            "n1's repair: %r" % (m and m.group(0)))
    cl = n2.client()
    r = cl.call("GET", key="only-on-n1", cl="ONE")
    cl.close()
    h.check(r.value == b"v", "n2 after the repair: %r" % r)
    print("repair with an empty first pull: done, pushed %s keys" %
          m.group(2))


if __name__ == "__main__":
    h.run(main)
