#!/usr/bin/env python3
"""Regression: a client read outlived read_timeout_ms several times over.

Each replica read had a read_timeout_ms of its own, started when it was
sent: a read that asked another replica after one timed out gave it a
fresh read timeout, an MGET or EXISTS reading its keys a window at a time
gave each window one, and a blocking read repair then waited for its
writes (write_timeout_ms more, or for the local commit however long).
Now a client read has one deadline, read_timeout_ms from its start, that
every replica read it sends shares, and it is answered by then, with a
value or TIMEOUT.

Four nodes (127.0.0.171-174), RF 3, read_timeout_ms T = 2000, slow gossip
and a high conviction threshold so that frozen nodes (SIGSTOP) are not
DOWN yet. Proves every read below answers within 2T, which the old code
exceeded by a wide margin:
1. a ONE GET at n4, not a replica, with the key's three replicas frozen:
   TIMEOUT, 0 of 1 answered (old: 3T, one read timeout per replica);
2. a native MGET of 1500 keys at QUORUM through n2 with n3 frozen: the
   values, or TIMEOUT (old: one read timeout per window of 64 reads that
   filled with keys waiting for n3, 6T and more);
3. a RESP EXISTS of the same keys, the same way;
4. a QUORUM GET at n1 whose own copy is stale while n1's disk syncs hang
   (faultsync.c): the newest value, without waiting for the repair of
   n1's copy (old: no answer until the disk came back, here more than
   4T): the third replica, asked once the repair is needed, holds it too
   (check_coord's read_repair_unfinished_is_not_answered); once the disk
   is back, the repair lands.
"""
import os
import signal
import socket
import time

import harness as h

T = 2000  # read_timeout_ms
BOUND = 2 * T / 1000.0  # seconds: the deadline, with a wide margin
IPS = ["127.0.0.171", "127.0.0.172", "127.0.0.173", "127.0.0.174"]
MKEYS = 1500
RESP_PORT = 6379


def replicas(cl, key):
    r = cl.call("ENDPOINTS", key=key)
    return [e[0] for e in r.get(36)]


def timed(f):
    t0 = time.time()
    try:
        res = f()
    except socket.timeout:
        res = "no answer"
    return res, time.time() - t0


def freeze(nodes):
    for n in nodes:
        n.proc.send_signal(signal.SIGSTOP)


def thaw(nodes):
    for n in nodes:
        n.proc.send_signal(signal.SIGCONT)


def resp_command(sock, *args):
    """Send one RESP command; return its reply's first line."""
    out = b"*%d\r\n" % len(args)
    for a in args:
        a = a if isinstance(a, bytes) else a.encode()
        out += b"$%d\r\n%s\r\n" % (len(a), a)
    sock.sendall(out)
    buf = b""
    while not buf.endswith(b"\r\n"):
        chunk = sock.recv(4096)
        if not chunk:
            raise ConnectionError("RESP connection closed")
        buf += chunk
    return buf.decode(errors="replace").strip()


LATE = []  # the reads that outlived their deadline (checked at the end)


def check_bound(what, took, res):
    print("%s: %r after %.0f ms (read_timeout_ms %d)" %
          (what, res, took * 1000, T))
    if res == "no answer" or took >= BOUND:
        LATE.append("%s: %r after %.0f ms" % (what, res, took * 1000))


def wait_value(node, key, want, timeout=30):
    deadline = time.time() + timeout
    while True:
        cl = node.client()
        try:
            got = cl.call("GET", key=key, cl="ONE").value
        finally:
            cl.close()
        if got == want or time.time() > deadline:
            return got
        time.sleep(0.2)


def main():
    c = h.Cluster(IPS, seeds=IPS[:1], replication="dc1:3",
                  read_timeout_ms=T, gossip_interval_ms=1000,
                  phi_convict_threshold=16,
                  suspicion_timeout_ms=60000, hinted_handoff="false",
                  repair_after_join="false",
                  resp_port=RESP_PORT)
    for i, n in enumerate(c.nodes):
        n.extra["rack"] = "r%d" % (i + 1)
    n1, n2, n3, n4 = c.nodes
    hang = h.fault_disk(n1, "RINGKV_FAULT_SYNC_HANG", "disk-hangs")
    c.start()
    c.wait_converged(timeout=60)

    cl = n4.client()
    far = next(k for k in ("far%d" % i for i in range(1000))
               if "n4" not in replicas(cl, k))
    mkeys = ["m%d" % i for i in range(MKEYS)]
    res = cl.pipeline([("PUT", {"key": k, "value": k, "cl": "ALL"})
                       for k in [far] + mkeys])
    h.check(not [r for r in res if r.err], "ALL writes: %r" %
            [r for r in res if r.err][:2])
    # every node's connections to the others open and ready
    for n in c.nodes:
        x = n.client()
        res = x.pipeline([("GET", {"key": k, "cl": "ALL"})
                          for k in mkeys[:50]])
        x.close()
        h.check(not [r for r in res if r.err], "ALL reads on %s" % n.name)
    cl.close()

    # 1. replicas asked one after another
    freeze([n1, n2, n3])
    try:
        cl = n4.client(timeout=4 * BOUND)
        r, took = timed(lambda: cl.call("GET", key=far, cl="ONE"))
        cl.close()
    finally:
        thaw([n1, n2, n3])
    check_bound("ONE GET at a non-replica, its 3 replicas frozen", took,
                r if isinstance(r, str) else (r.err, r.acks))
    h.check(r == "no answer" or (r.err == "TIMEOUT" and r.acks == 0),
            "not TIMEOUT: %r" % r)
    c.wait_converged(timeout=60)

    # 2. and 3. an MGET / EXISTS reading its keys a window at a time
    freeze([n3])
    try:
        cl = n2.client(timeout=4 * BOUND)
        r, took = timed(lambda: cl.call("MGET", keys=mkeys, cl="QUORUM"))
        cl.close()
        mget = r
        rs = socket.create_connection((n2.ip, RESP_PORT), timeout=4 * BOUND)
        h.check(resp_command(rs, "CONSISTENCY", "QUORUM") == "+OK",
                "CONSISTENCY QUORUM")
        ex, ex_took = timed(lambda: resp_command(rs, "EXISTS", *mkeys))
        rs.close()
    finally:
        thaw([n3])
    check_bound("MGET of %d keys at QUORUM, a replica frozen" % MKEYS, took,
                mget if isinstance(mget, str) else mget.err)
    h.check(mget == "no answer" or mget.err in (None, "TIMEOUT"),
            "MGET: %r" % mget)
    if mget != "no answer" and mget.err is None:
        h.check(mget.get(17) == [k.encode() for k in mkeys],
                "MGET values wrong")
    check_bound("RESP EXISTS of %d keys at QUORUM, a replica frozen" %
                MKEYS, ex_took, ex)
    h.check(ex in ("no answer", ":%d" % MKEYS) or ex.startswith("-TIMEOUT"),
            "EXISTS: %r" % ex)
    c.wait_converged(timeout=60)

    # 4. a blocking read repair of the local replica, its disk hanging
    cl = n4.client()
    key = next(k for k in ("rr%d" % i for i in range(1000))
               if "n1" in replicas(cl, k))
    r = cl.call("PUT", key=key, value="old", cl="ALL")
    h.check(not r.err, "ALL write: %r" % r)
    cl.close()
    # n1 is not waited for as DN: with this test's slow failure detection
    # that took more than 60 s under ASan. Its port is closed, so the write
    # fails there at once and QUORUM is met by the other two.
    n1.kill9()
    cl = n2.client()
    r = cl.call("PUT", key=key, value="new", cl="QUORUM")
    h.check(not r.err, "QUORUM write with n1 down: %r" % r)
    cl.close()
    n1.start()
    c.wait_converged(timeout=60)
    h.check(wait_value(n1, key, b"old", timeout=0) == b"old",
            "n1 not stale before the read")
    open(hang, "w").close()
    try:
        cl = n1.client(timeout=4 * BOUND)
        r, took = timed(lambda: cl.call("GET", key=key, cl="QUORUM"))
        cl.close()
    finally:
        os.unlink(hang)
    check_bound("QUORUM GET repairing the local replica, its disk hanging",
                took, r if isinstance(r, str) else (r.err, r.value))
    h.check(r == "no answer" or r.value == b"new", "QUORUM GET: %r" % r)
    got = wait_value(n1, key, b"new")
    h.check(got == b"new", "the repair of n1 did not land: %r" % got)
    m = n1.metrics()
    h.check(m.get("ringkv_read_repairs_total", 0) >= 1, "repair not counted")
    for n in c.nodes:
        h.check(n.stop() == 0, "%s unclean exit" % n.name)
    h.check(not LATE, "reads outlived read_timeout_ms %d (answered after "
            "2x or not at all): %s" % (T, "; ".join(LATE)))


if __name__ == "__main__":
    h.run(main)
