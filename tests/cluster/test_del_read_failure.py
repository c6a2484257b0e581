#!/usr/bin/env python3
"""Regression (del_read_failure_not_absent): a RESP DEL whose read fails
answers the read's error, not a count that calls the key absent, and
deletes nothing.

DEL reads each key to count the keys that existed, then deletes it. A read
that failed (TIMEOUT, UNAVAILABLE at the connection's level) counted the
key as absent and the delete went out anyway, so a client got `:0` (or a
count short by the keys whose reads failed) when the truth was unknown.
Now every read of a DEL must be in before any delete is sent; if one
failed, the DEL answers that error and sends no delete (docs/resp.md).

A 3-node RF-2 cluster (one coordinator, n1, at ALL): key `a` lives on n1
and n2, key `c` on n1 and n3.
 - n2 stopped (SIGSTOP) for 1.5 s, read_timeout_ms 300 and
   write_timeout_ms 10 s: `DEL a` must answer -TIMEOUT (before the fix its
   read timed out, the delete waited for n2 to continue and succeeded, and
   the reply was :0); `DEL c a` -TIMEOUT too (it answered :1: c's read
   worked); afterwards both keys still exist. EXISTS, MGET, GET and TTL of
   `a` answer -TIMEOUT in the same state.
 - n3 killed and seen DOWN: `DEL a c` must answer -UNAVAILABLE and leave
   `a` in place (before, a's delete went out while the reply said
   UNAVAILABLE, "nothing was sent"); EXISTS and MGET of a and c answer
   -UNAVAILABLE.
"""
import os
import signal
import sys
import threading
import time

import harness as h

try:
    import redis
except ImportError:  # python3-redis lives with Debian's python3
    sys.path.append("/usr/lib/python3/dist-packages")
    import redis

IPS = ["127.0.0.102", "127.0.0.103", "127.0.0.104"]
PORT = 6379


def find_key(node, want):
    """A key whose replicas are exactly the node names in `want`."""
    cl = node.client()
    try:
        for i in range(10000):
            k = "k%d" % i
            r = cl.call("ENDPOINTS", key=k)
            if set(e[0] for e in r.get(36)) == want:
                return k
    finally:
        cl.close()
    raise AssertionError("no key on %r" % (want,))


def expect_error(fn, kind, what):
    try:
        got = fn()
    except redis.exceptions.ResponseError as e:
        h.check(str(e).startswith(kind + " "), "%s: %s" % (what, e))
        return
    h.check(False, "%s answered %r, want -%s" % (what, got, kind))


class Stopped:
    """n2 stopped (SIGSTOP) until `cont_after` seconds, or the block's
    end."""

    def __init__(self, node, cont_after=None):
        self.node = node
        self.cont_after = cont_after
        self.lock = threading.Lock()
        self.stopped = False

    def cont(self):
        with self.lock:
            if self.stopped:
                os.kill(self.node.proc.pid, signal.SIGCONT)
                self.stopped = False

    def __enter__(self):
        os.kill(self.node.proc.pid, signal.SIGSTOP)
        self.stopped = True
        self.timer = None
        if self.cont_after is not None:
            self.timer = threading.Timer(self.cont_after, self.cont)
            self.timer.start()
        return self

    def __exit__(self, *exc):
        if self.timer:
            self.timer.join()
        self.cont()
        return False


def main():
    c = h.Cluster(IPS, seeds=IPS[:1], replication="dc1:2", resp_port=PORT,
                  read_timeout_ms=300, write_timeout_ms=10000,
                  phi_convict_threshold=16, suspicion_timeout_ms=60000)
    c.start()
    c.wait_converged(timeout=60)
    n1, n2, n3 = c.nodes
    ka = find_key(n1, {"n1", "n2"})
    kc = find_key(n1, {"n1", "n3"})
    r = redis.Redis(host=n1.ip, port=PORT, socket_timeout=30)
    r.execute_command("CONSISTENCY", "ALL")

    def put_both():
        h.check(r.set(ka, "va") is True, "SET a")
        h.check(r.set(kc, "vc") is True, "SET c")

    def both_there(what):
        h.check(r.mget([ka, kc]) == [b"va", b"vc"], "%s: a and c %r" %
                (what, r.mget([ka, kc])))

    # -- a read TIMEOUT; the delete would have succeeded --------------------
    put_both()
    with Stopped(n2, cont_after=1.5):
        t0 = time.time()
        expect_error(lambda: r.delete(ka), "TIMEOUT",
                     "DEL of a key whose read timed out")
        h.check(time.time() - t0 < 1.2,
                "DEL answered after %.1f s: it waited for a delete" %
                (time.time() - t0))
    both_there("after the DEL whose read timed out")
    with Stopped(n2, cont_after=1.5):
        expect_error(lambda: r.delete(kc, ka), "TIMEOUT",
                     "DEL of two keys, one read timed out")
    both_there("after the two-key DEL with a read timed out")
    with Stopped(n2):
        expect_error(lambda: r.exists(ka), "TIMEOUT", "EXISTS")
        expect_error(lambda: r.exists(kc, ka), "TIMEOUT", "EXISTS c a")
        expect_error(lambda: r.mget([kc, ka]), "TIMEOUT", "MGET c a")
        expect_error(lambda: r.get(ka), "TIMEOUT", "GET")
        expect_error(lambda: r.ttl(ka), "TIMEOUT", "TTL")
    both_there("after the reads that timed out")
    # a DEL whose reads succeed still deletes and counts
    h.check(r.delete(ka, kc) == 2, "DEL with every replica up")
    h.check(r.mget([ka, kc]) == [None, None], "keys after DEL")

    # -- a read UNAVAILABLE ---------------------------------------------------
    put_both()
    n3.kill9()
    c.wait_state(n1, "n3", "DN", timeout=60)
    expect_error(lambda: r.delete(ka, kc), "UNAVAILABLE",
                 "DEL of a and c with n3 down")
    h.check(r.get(ka) == b"va", "a deleted by a DEL that answered "
            "UNAVAILABLE")
    expect_error(lambda: r.delete(kc), "UNAVAILABLE", "DEL c with n3 down")
    expect_error(lambda: r.exists(ka, kc), "UNAVAILABLE", "EXISTS a c")
    expect_error(lambda: r.mget([ka, kc]), "UNAVAILABLE", "MGET a c")
    h.check(r.delete(ka) == 1, "DEL a with its replicas up")
    r.close()
    for n in (n1, n2):
        h.check(n.stop() == 0, "%s unclean exit" % n.name)


if __name__ == "__main__":
    h.run(main)
