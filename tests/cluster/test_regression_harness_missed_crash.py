#!/usr/bin/env python3
"""Regression (harness_missed_crash): a node that crashed during a cluster
test went unnoticed unless the test itself asked that node something
afterwards.

wait_converged looks only at the nodes still running, so an ASan+UBSan
abort of one node (STATUS copying from a NULL pointer, fixed in admin.c)
passed for a node gone quiet. harness.run now ends every test by stopping
the nodes still running with SIGTERM and failing the test if any node
died of a crash signal, printed a sanitizer report, did not exit 0 on that
SIGTERM, or did not stop within 30 s.

This test runs itself as a child test in each of those ways on two nodes
(127.0.0.199-200) and checks the child's verdict: FAIL for an abort, a
segfault, a sanitizer report in stderr and a restarted node whose first
run crashed; PASS for a node a test killed with SIGKILL and for one left
frozen with SIGSTOP (the harness wakes it to stop it).
"""
# ctest: alongside others
import os
import signal
import subprocess
import sys

import harness as h

IPS = ["127.0.0.199", "127.0.0.200"]


def child(mode):
    def main():
        c = h.Cluster(IPS).start()
        c.wait_converged(timeout=60)
        n2 = c.nodes[1]
        if mode in ("abrt", "segv"):
            n2.proc.send_signal(signal.SIGABRT if mode == "abrt"
                                else signal.SIGSEGV)
            n2.proc.wait(timeout=30)
        elif mode == "restarted":
            n2.proc.send_signal(signal.SIGABRT)
            n2.proc.wait(timeout=30)
            n2.start()
            c.wait_converged(timeout=60)
        elif mode == "report":
            with open(n2.log_path + ".stderr", "a") as f:
                f.write("node/x.c:1:2: runtime error: load of null pointer\n")
        elif mode == "kill":
            n2.kill9()
        elif mode == "frozen":
            n2.proc.send_signal(signal.SIGSTOP)
    h.run(main)


def main():
    # ASan catches a SIGSEGV itself: it reports it and exits 1
    want = {"abrt": ("died of signal 6",),
            "segv": ("died of signal 11", "AddressSanitizer: SEGV"),
            "restarted": ("died of signal 6",), "report": ("runtime error",),
            "kill": None, "frozen": None}
    for mode, crash in want.items():
        p = subprocess.run([sys.executable, os.path.abspath(__file__), mode],
                           stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                           timeout=300)
        out = p.stdout.decode(errors="replace")
        if crash is None:
            h.check(p.returncode == 0 and "PASS" in out,
                    "%s: the child failed:\n%s" % (mode, out[-3000:]))
        else:
            h.check(p.returncode == 1 and "a node crashed" in out and
                    any(c in out for c in crash),
                    "%s: the child did not fail on the crash (exit %d):\n%s" %
                    (mode, p.returncode, out[-3000:]))
        print("%s: %s" % (mode, "FAIL as it should" if crash else "PASS"))


if __name__ == "__main__":
    if len(sys.argv) > 1:
        child(sys.argv[1])
    else:
        h.run(main)
