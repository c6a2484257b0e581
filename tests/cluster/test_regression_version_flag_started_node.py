#!/usr/bin/env python3
"""Regression (version_flag_started_node): `ringkvd --version` started a
node.

--version was on the list of ringkvd's own flags that the configuration
parser skips, but nothing acted on it, so the daemon went on to start
with the default configuration: it created ./data in the current
directory and listened on 127.0.0.1's ports until killed.

Now it prints the version and exits 0 before reading any configuration;
an unknown flag still fails with exit 2. Run in an empty directory, with
nothing listening: the test fails if ringkvd is still running after 10 s,
if the output is not `ringkvd <version>`, or if anything was created.
"""
# ctest: alongside others
import os
import re
import subprocess

import harness as h


def main():
    d = h.tmpdir()
    p = subprocess.run([h.RINGKVD, "--version"], cwd=d, timeout=10,
                       stdout=subprocess.PIPE, stderr=subprocess.STDOUT)
    out = p.stdout.decode(errors="replace")
    h.check(p.returncode == 0, "--version exited %d: %s" % (p.returncode, out))
    h.check(re.fullmatch(r"ringkvd \d+\.\d+\.\d+\n", out),
            "--version printed %r" % out)
    h.check(os.listdir(d) == [], "--version created %r" % os.listdir(d))
    p = subprocess.run([h.RINGKVD, "--versions=1"], cwd=d, timeout=10,
                       stdout=subprocess.PIPE, stderr=subprocess.STDOUT)
    h.check(p.returncode == 2 and b"unknown configuration key" in p.stdout,
            "--versions: exit %d, %r" % (p.returncode, p.stdout))


h.run(main)
