#!/usr/bin/env python3
"""A decommission that stops moving says so, and why: `ringkv netstats`
shows a 'Stalled:' line with the last error, the node logs leave.stalled
once, `--wait` repeats the line on stderr as a warning (when it appears and
when its reason changes, not every second), and once the cause is gone the
leave goes on (leave.progressing) and ends.

Proves: four nodes (RF 2, a rack each, stall_warning_s 2) hold 3,000 keys
and 3,000 values of 2,000 bytes. `ringkv -h n4 decommission --wait` is
started and n3, a gaining node, is frozen (SIGSTOP) before n4 pushes
anything. n4's sessions to n1 and n2 finish; those to n3 fail (a push that
times out, then "the gaining node is not UP" once n3 is convicted). Within
120 s n4's netstats has a line starting 'Stalled:' naming n3 and the last
error, and its log has leave.stalled. The stall is kept for 15 more
seconds; then n3 is resumed (SIGCONT): n4 logs leave.progressing, leaves
and exits 0, the --wait ends with exit 0, and its stderr has at least one
'warning: Stalled:' line and at most 8 (one per change of reason, not one
per second of the stall). n1-n3 then serve every key. Until this change a
stalled leave repeated leave.retry in n4's log only, while netstats and
--wait showed the same progress line forever (issue tracker, defect 1:
'stops at 21 of 27 ranges ... nothing can cancel it').
"""
# ctest: alongside others
# ctest: long
import signal
import subprocess
import time

import harness as h

KEYS = 3000
BIG = 3000


def main():
    ips = ["127.0.1.111", "127.0.1.112", "127.0.1.113", "127.0.1.114"]
    c = h.racked_cluster(ips, replication="dc1:2", stall_warning_s=2)
    n1, n2, n3, n4 = c.nodes
    expect, gone = h.load_keys(n1, KEYS)
    h.load_big(n1, expect, BIG)

    wait = subprocess.Popen([h.RINGKV, "-h", n4.ip, "decommission", "--wait"],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    first = wait.stdout.readline().decode()
    h.check("is leaving" in first, "decommission --wait: %r" % first)
    # before its first push: n4 pushes LEAVE_DELAY (2 s) after LEAVING
    n3.proc.send_signal(signal.SIGSTOP)
    try:
        deadline = time.time() + 120
        while True:
            ns = h.cli(n4, "netstats")[1]
            line = [l for l in ns.splitlines() if l.startswith("Stalled:")]
            if line and "last error:" in line[0] and "n3" in line[0]:
                break
            h.check(time.time() < deadline,
                    "n4's netstats never said it stalled: %r" % ns)
            time.sleep(0.5)
        print("n4's netstats: %r" % line[0])
        h.check("event=leave.stalled " in n4.log(),
                "n4 did not log leave.stalled")
        h.check("event=leave.left " not in n4.log(), "n4 left with n3 frozen")
        time.sleep(15)  # a stall that lasts: --wait must not repeat itself
    finally:
        n3.proc.send_signal(signal.SIGCONT)
    try:
        out, err = wait.communicate(timeout=180)
    except subprocess.TimeoutExpired:
        wait.kill()
        c.dump_logs()
        raise AssertionError("decommission --wait did not end within 180 s")
    out, err = out.decode(), err.decode()
    h.check(wait.returncode == 0, "--wait exited %d: %r %r" %
            (wait.returncode, out, err))
    warned = [l for l in err.splitlines()
              if l.startswith("ringkv decommission: warning: Stalled:")]
    h.check(1 <= len(warned) <= 8, "--wait's stall warnings: %r" % err)
    print("--wait warned %d times: %r" % (len(warned), warned[-1]))
    h.check(n4.proc.wait(timeout=30) == 0, "n4 did not exit 0")
    h.check("event=leave.progressing " in n4.log(),
            "n4 did not log leave.progressing")
    c.nodes = [n1, n2, n3]
    c.wait_converged(timeout=90)
    h.check_served_by(c.nodes, expect, gone, wait_s=60)


if __name__ == "__main__":
    h.run(main)
