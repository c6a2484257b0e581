#!/usr/bin/env python3
"""Regression: a write waited for its coordinator's own disk without end.

A write's remote replicas have write_timeout_ms each (their RPC deadline),
but the coordinator's own replica had none: a write that needed the local
commit to meet its level (ALL, or any level once the peers fall short) was
not answered while the local disk hung, however long that lasted. Now a
write has one deadline, write_timeout_ms from its start, and is answered
by then: TIMEOUT, with how many replicas acknowledged, if its level is not
met.

Three nodes (127.0.0.191-193), RF 3, write_timeout_ms W = 1000; n1's disk
syncs hang on demand (faultsync.c). With n1's disk hanging for 4 W:
 - an ALL write at n1 answers TIMEOUT, 2 of 3 acknowledged, within 2 W
   (the old code gave no answer until the disk came back);
 - a QUORUM write at n1 answers OK (its peers meet the level);
and once the disk is back, both writes are on every replica.
"""
import os
import socket
import time

import harness as h

W = 1000  # write_timeout_ms
IPS = ["127.0.0.191", "127.0.0.192", "127.0.0.193"]


def value_everywhere(c, key, want, timeout=30):
    deadline = time.time() + timeout
    got = None
    while time.time() < deadline:
        got = []
        for n in c.nodes:
            cl = n.client()
            try:
                got.append(cl.call("GET", key=key, cl="ONE").value)
            finally:
                cl.close()
        if all(g == want for g in got):
            return True
        time.sleep(0.2)
    print("%s: %r, want %r" % (key, got, want))
    return False


def main():
    c = h.Cluster(IPS, seeds=IPS[:1], replication="dc1:3",
                  write_timeout_ms=W)
    for i, n in enumerate(c.nodes):
        n.extra["rack"] = "r%d" % (i + 1)
    n1 = c.nodes[0]
    hang = h.fault_disk(n1, "RINGKV_FAULT_SYNC_HANG", "disk-hangs")
    c.start()
    c.wait_converged(timeout=60)
    cl = n1.client()
    r = cl.call("PUT", key="warm", value="1", cl="ALL")
    h.check(not r.err, "ALL write before the hang: %r" % r)
    cl.close()

    open(hang, "w").close()
    hung_at = time.time()
    try:
        cl = n1.client(timeout=4 * W / 1000.0)
        t0 = time.time()
        try:
            r = cl.call("PUT", key="all", value="a", cl="ALL")
        except socket.timeout:
            r = None
        took = time.time() - t0
        cl.close()
        print("ALL write at n1, its disk hanging: %r after %.0f ms "
              "(write_timeout_ms %d)" %
              (r and (r.err, r.acks, r.msg), took * 1000, W))
        h.check(r is not None, "the ALL write was not answered in %d ms: "
                "it waited for the hung disk" % (4 * W))
        h.check(r.err == "TIMEOUT" and r.acks == 2,
                "ALL write: want TIMEOUT, 2 acknowledged: %r" %
                ((r.err, r.acks, r.msg),))
        h.check(took < 2 * W / 1000.0,
                "the ALL write answered after %.0f ms, past 2 x "
                "write_timeout_ms" % (took * 1000))
        cl = n1.client(timeout=4 * W / 1000.0)
        r = cl.call("PUT", key="quorum", value="q", cl="QUORUM")
        cl.close()
        h.check(not r.err, "QUORUM write at n1, its disk hanging: %r" % r)
        time.sleep(max(0, hung_at + 4 * W / 1000.0 - time.time()))
    finally:
        os.unlink(hang)
    h.check(value_everywhere(c, "all", b"a"),
            "the timed-out ALL write did not land everywhere")
    h.check(value_everywhere(c, "quorum", b"q"),
            "the QUORUM write did not land everywhere")
    for n in c.nodes:
        h.check(n.stop() == 0, "%s unclean exit" % n.name)


if __name__ == "__main__":
    h.run(main)
