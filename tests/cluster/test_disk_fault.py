#!/usr/bin/env python3
"""A node whose disk stops syncing refuses writes and says so.

One real ringkvd (RF 1) runs with faultsync.c preloaded: while a marker file
exists, fdatasync/fsync/syncfs fail with EIO. A write acknowledged before the
fault is kept; a write whose log sync failed is answered with an error, never
OK; the failure sticks (writes keep failing after the disk "recovers", since
Linux reports a lost writeback once) and is visible without a metrics port:
the log says `store.sync_failed` and METRICS shows ringkv_storage_failed 1.
After a restart on a good disk the node serves again and kept what it had
acknowledged. Also checks cpu_scheduling: every thread runs under
SCHED_BATCH by default, none with `normal`.

Regression: with metrics_port 0 the failure was only computed when someone
asked for metrics, so nothing was ever logged (storage_failed_not_logged).
"""
# ctest: alongside others
import os
import time

import harness as h

IP = "127.0.0.87"


def put(node, k, v):
    c = node.client()
    try:
        return c.call("PUT", key=k, value=v, cl="ONE")
    finally:
        c.close()


def get(node, k):
    c = node.client()
    try:
        return c.call("GET", key=k, cl="ONE")
    finally:
        c.close()


def policies(node):
    """The scheduling policy of each of the node's threads (stat field 41:
    0 normal, 3 SCHED_BATCH)."""
    out = {}
    d = "/proc/%d/task" % node.proc.pid
    for t in os.listdir(d):
        try:
            with open(os.path.join(d, t, "stat")) as f:
                s = f.read()
        except OSError:
            continue
        name = s[s.index("(") + 1:s.rindex(")")]
        out.setdefault(int(s[s.rindex(")") + 2:].split()[38]), set()).add(name)
    return out


def wait_up(node, timeout=30):
    deadline = time.time() + timeout
    while True:
        try:
            st = node.status()
            if st["rows"].get(node.name, {}).get(5) == "UN":
                return
        except (OSError, ConnectionError, RuntimeError):
            pass
        h.check(time.time() < deadline, "%s did not come up" % node.name)
        time.sleep(0.2)


def main():
    c = h.Cluster([IP], seeds=[IP], replication="dc1:1")
    node = c.nodes[0]
    marker = h.fault_disk(node, "RINGKV_FAULT_SYNC", "disk-broken")
    c.start()
    wait_up(node)

    r = put(node, "before", "kept")
    h.check(not r.err, "PUT before the fault: %r" % r)
    pol = policies(node)  # cpu_scheduling: batch, the default
    h.check(set(pol) == {3} and "rk-commit" in pol[3],
            "threads not all SCHED_BATCH: %r" % pol)

    open(marker, "w").close()
    r = put(node, "during", "lost?")
    h.check(r.err, "a write whose log sync failed was acknowledged: %r" % r)
    print("write during the fault: %s %s" % (r.err, r.msg))
    # regression (replica_failure_said_timeout): the reply said only
    # "replicas did not answer in time"
    h.check(r.err == "TIMEOUT" and "a replica failed: Input/output error" in
            (r.msg or ""), "the reply does not say why: %r" % r)

    # logged within a few gossip ticks, with no metrics port and no scrape
    deadline = time.time() + 10
    while "store.sync_failed" not in node.log():
        if time.time() > deadline:
            c.dump_logs()
            raise AssertionError("storage_failed_not_logged: no "
                                 "store.sync_failed line in 10 s")
        time.sleep(0.2)

    os.unlink(marker)  # the disk "recovers": the failure still sticks
    r = put(node, "after", "x")
    h.check(r.err, "a write after a failed sync was acknowledged: %r" % r)
    print("write after the fault: %s %s" % (r.err, r.msg))
    m = node.metrics()
    h.check(m.get("ringkv_storage_failed") == 1,
            "ringkv_storage_failed: %r" % m.get("ringkv_storage_failed"))
    r = get(node, "before")
    h.check(r.value == b"kept", "read during the failure: %r" % r)

    node.stop()
    node.env = {}
    node.extra["cpu_scheduling"] = "normal"
    node.start()
    wait_up(node)
    pol = policies(node)
    h.check(set(pol) == {0}, "cpu_scheduling normal: %r" % pol)
    r = get(node, "before")
    h.check(r.value == b"kept", "acknowledged write after restart: %r" % r)
    r = put(node, "later", "y")
    h.check(not r.err, "PUT after restart on a good disk: %r" % r)
    r = get(node, "later")
    h.check(r.value == b"y", "GET after restart: %r" % r)
    m = node.metrics()
    h.check(m.get("ringkv_storage_failed") == 0,
            "ringkv_storage_failed after restart: %r" %
            m.get("ringkv_storage_failed"))


if __name__ == "__main__":
    h.run(main)
