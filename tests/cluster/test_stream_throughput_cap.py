#!/usr/bin/env python3
"""stream_throughput_mb caps what a node streams, in (a join) and out (a
decommission).

Proves: three nodes (RF 2, a rack each) hold 16,000 values of 1 KiB. A
fourth node with stream_throughput_mb=1 joins: its NETSTATS says "capped at
1 MiB/s" while it streams, and from stream.planned to boot.joined it takes
at least 0.7 x (its MiB streamed - 2) seconds (the budget holds a second
of the cap and a chunk of about 1 MiB may start on its last byte; without
the cap the same join takes well under a second here). Then it
decommissions itself under the same cap: leave.left's streaming_ms obeys
the same bound. The bound is a minimum, which a slow or loaded machine only
makes easier to meet.
"""
# ctest: alongside others
# ctest: long
import datetime
import re
import subprocess
import time

import harness as h


def ts(log, event):
    m = re.search(r"ts=(\S+) level=\w+ node=\w+ event=%s\b" % event, log)
    h.check(m, "no %s in the log" % event)
    return datetime.datetime.fromisoformat(
        m.group(1).replace("Z", "+00:00")).timestamp()


def main():
    ips = ["127.0.0.246", "127.0.0.247", "127.0.0.248"]
    c = h.racked_cluster(ips, replication="dc1:2")
    n1 = c.nodes[0]
    h.put_all(n1, ["k%d" % i for i in range(16000)], b"v" * 1024)

    n4 = h.Node(c, "n4", "127.0.0.249",
                {"rack": "r4", "stream_throughput_mb": 1})
    c.nodes.append(n4)
    n4.start()
    seen = ""
    deadline = time.time() + 120
    while True:
        st = n1.status()["rows"].get("n4", {}).get(5)
        if st == "UN":
            break
        ns = h.cli(n4, "netstats")[1]
        if "capped at 1 MiB/s" in ns:
            seen = ns.splitlines()[1]
        h.check(time.time() < deadline, "n4 did not join: %r" % st)
        time.sleep(0.3)
    h.check(seen, "n4's NETSTATS never showed the cap")
    print("n4 while joining: %r" % seen)
    log = n4.log()
    m = re.search(r"event=boot\.joined .* bytes=(\d+)", log)
    h.check(m, "no boot.joined with bytes")
    mib = int(m.group(1)) / 1048576
    took = ts(log, "boot.joined") - ts(log, "stream.planned")
    h.check(mib > 5, "n4 streamed only %.1f MiB" % mib)
    h.check(took >= 0.7 * (mib - 2), "n4 streamed %.1f MiB in %.1f s "
            "under a 1 MiB/s cap" % (mib, took))
    print("join: %.1f MiB in %.1f s under a 1 MiB/s cap" % (mib, took))
    c.wait_converged(timeout=60)

    # --wait follows it until it is gone, even with another host to fall
    # back on (which must not be taken for the leaving node)
    p = subprocess.run([h.RINGKV, "-h", "%s,%s" % (n4.ip, n1.ip),
                        "decommission", "--wait"], stdout=subprocess.PIPE,
                       stderr=subprocess.STDOUT, timeout=180)
    rc, out = p.returncode, p.stdout.decode(errors="replace")
    h.check(rc == 0 and "has left the ring and stopped" in out,
            "decommission --wait: %d %r" % (rc, out))
    print("ringkv decommission --wait: %r" % out.splitlines()[-1])
    h.check(n4.proc.wait(timeout=30) == 0, "n4 did not leave cleanly")
    m = re.search(r"event=leave\.left .* bytes=(\d+) .*streaming_ms=(\d+)",
                  n4.log())
    h.check(m, "no leave.left with bytes and streaming_ms")
    mib, took = int(m.group(1)) / 1048576, int(m.group(2)) / 1000
    h.check(mib > 5, "n4 pushed only %.1f MiB" % mib)
    h.check(took >= 0.7 * (mib - 2), "n4 pushed %.1f MiB in %.1f s under a "
            "1 MiB/s cap" % (mib, took))
    print("decommission: %.1f MiB in %.1f s under a 1 MiB/s cap" %
          (mib, took))


if __name__ == "__main__":
    h.run(main)
