#!/usr/bin/env python3
"""A node whose disk fills stays up, serves reads and says what it skipped.

One ringkvd (RF 1) with the default configuration (automatic compaction
on; a 1 MB memtable) keeps its data_dir on a 64 MB tmpfs mounted by the test. Writes of
4 KiB values arrive until the disk is full and for a few seconds past it:
they may be refused, but the node must not die, must keep answering reads
of what it acknowledged, and must log the compactions it skipped for lack
of space (`store.job_skipped`, counted in ringkv_storage_jobs_skipped_total).
With the tmpfs grown, writes are accepted again.

Regression full_disk_sigbus: the compactor opened a new LMDB environment on
the full disk, LMDB's first write to its freshly mapped lock.mdb (a hole)
faulted, and the node died of SIGBUS with no log line.
"""
# ctest: alongside others
import os
import subprocess
import time

import harness as h

IP = "127.0.1.41"
VALUE = b"v" * (4 << 10)


def wait_up(node, timeout=30):
    deadline = time.time() + timeout
    while True:
        try:
            if node.status()["rows"].get(node.name, {}).get(5) == "UN":
                return
        except (OSError, ConnectionError, RuntimeError):
            pass
        h.check(time.time() < deadline, "%s did not come up" % node.name)
        time.sleep(0.2)


def check_alive(node, when, wait=0):
    """Fails, naming the signal, if the node died; waits up to `wait` s
    for it to die (a lost connection)."""
    try:
        node.proc.wait(timeout=wait) if wait else None
    except Exception:
        pass
    rc = node.proc.poll()
    h.check(rc is None, "the node died %s: %s" % (
        when, "signal %d" % -rc if rc is not None and rc < 0 else
        "exit %r" % rc))


def free_mb(path):
    st = os.statvfs(path)
    return st.f_bavail * st.f_frsize / (1 << 20)


def main():
    # memtable_mb 1: writes reach the range env (and make it due for
    # compaction) a megabyte at a time, not 16 at once, so the compactor
    # finds it due while the disk fills
    # disk_reserve_mb 0: no reserve, so the disk does fill (the reserve's
    # refusals are test_regression_full_disk_invisible's)
    h.on_tmpfs(IP, "64m", run, memtable_mb=1, disk_reserve_mb=0)


def run(c, node):
    c.start()
    wait_up(node)
    cl = node.client(timeout=20)
    acked, refused, i = [], 0, 0
    full_at = None
    deadline = time.time() + 40
    # until the disk is full and 5 s past it
    while time.time() < deadline and (
            full_at is None or time.time() - full_at < 5):
        keys = ["big%d" % (i + j) for j in range(64)]
        i += 64
        try:
            res = cl.pipeline([("PUT", {"key": k, "value": VALUE,
                                        "cl": "ONE"}) for k in keys])
        except (OSError, ConnectionError):
            check_alive(node, "as the disk filled (%d acknowledged, %.1f MB "
                        "free)" % (len(acked), free_mb(node.data_dir)), 5)
            raise
        for k, r in zip(keys, res):
            if r.err:
                refused += 1
                if full_at is None:
                    full_at = time.time()
                    print("first refusal after %d writes: %s %s" %
                          (len(acked), r.err, r.msg))
            else:
                acked.append(k)
        check_alive(node, "as the disk filled (%d acknowledged, %.1f MB "
                    "free)" % (len(acked), free_mb(node.data_dir)))
    print("%d writes acknowledged, %d refused; %.1f MB free" %
          (len(acked), refused, free_mb(node.data_dir)))
    h.check(full_at is not None, "the disk never filled")
    h.check(len(acked) > 100, "only %d writes acknowledged" % len(acked))

    # reads go on: every 20th acknowledged write, from the full disk
    for k in acked[::20]:
        try:
            r = cl.call("GET", key=k, cl="ONE")
        except (OSError, ConnectionError):
            check_alive(node, "on the full disk", 5)
            raise
        h.check(r.value == VALUE, "GET %s on the full disk: %r" %
                (k, (r.err, r.msg)))

    # the skipped compactions are said, and counted
    h.wait_log(node, "store.job_skipped", timeout=20)
    line = [ln for ln in node.log().splitlines()
            if "store.job_skipped" in ln][0]
    print(line)
    h.check("job=compact" in line, "not a compaction: %s" % line)
    m = node.metrics()
    h.check(m.get("ringkv_storage_jobs_skipped_total", 0) >= 1,
            "ringkv_storage_jobs_skipped_total: %r" %
            m.get("ringkv_storage_jobs_skipped_total"))
    check_alive(node, "on the full disk")

    # room again: writes are taken again
    subprocess.run(["mount", "-o", "remount,size=512m", node.data_dir],
                   check=True)
    h.put_until_taken(cl, "after", b"x", "ONE", 20,
                      "writes still refused with room again")
    r = cl.call("GET", key="after", cl="ONE")
    h.check(r.value == b"x", "GET after: %r" % r)
    cl.close()
    check_alive(node, "after the disk grew")


if __name__ == "__main__":
    h.run(main)
