#!/usr/bin/env python3
"""Regression: a node stopping (SIGTERM) stored no hints for the writes it
was still coordinating.

node__hint_store returned at once while the node was stopping, so a write
acknowledged just before SIGTERM whose third replica then timed out during
the shutdown drain left no hint, and that replica missed it until repair.

Three nodes (127.0.0.93-95), RF 3. n3 is frozen (SIGSTOP, not yet DOWN);
n1, already connected to n3, acknowledges 50 QUORUM writes (n1 and n2) and
gets SIGTERM at once: its writes to n3 time out while it drains. n3 is then
killed -9 while still frozen, so the writes that reached its socket are
lost with it.

Proves: n1 exits cleanly, and once n1 and n3 are back, n3 serves every one
of the 50 writes from its own store at ONE: n1 stored their hints during
the drain, durably, and replayed them after its restart.
"""
# ctest: alongside others
import signal
import time

import harness as h

KEYS = 50


def main():
    ips = ["127.0.0.93", "127.0.0.94", "127.0.0.95"]
    c = h.racked_cluster(ips, replication="dc1:3")
    n1, n2, n3 = c.nodes

    cl = n1.client()
    # n1's connection to n3 is up, so its writes to n3 time out (rather
    # than fail to connect)
    r = cl.call("PUT", key="warm", value="1", cl="ALL")
    h.check(not r.err, "ALL write: %r" % r)
    n3.proc.send_signal(signal.SIGSTOP)
    res = cl.pipeline([("PUT", {"key": "d%d" % i, "value": "v%d" % i,
                                "cl": "QUORUM"}) for i in range(KEYS)])
    cl.close()
    n1.proc.terminate()
    h.check(not [r for r in res if r.err],
            "QUORUM writes with n3 frozen failed: %r" %
            [r for r in res if r.err][:3])
    h.check(all(r.acks == 2 for r in res), "n3 answered a write while frozen")
    t0 = time.time()
    rc = n1.proc.wait(timeout=30)
    h.check(rc == 0, "n1 exit status %r" % rc)
    print("n1 stopped in %.1fs (write_timeout_ms 1500)" % (time.time() - t0))
    n3.kill9()

    n3.start()
    n1.start()
    c.wait_converged(timeout=60)
    deadline = time.time() + 40
    missing = None
    while time.time() < deadline:
        c3 = n3.client()
        res = c3.pipeline([("GET", {"key": "d%d" % i, "cl": "ONE"})
                           for i in range(KEYS)])
        c3.close()
        missing = [i for i, r in enumerate(res)
                   if r.value != ("v%d" % i).encode()]
        if not missing:
            break
        time.sleep(0.5)
    h.check(not missing, "n3 lacks %d of the %d writes (e.g. %r)" %
            (len(missing), KEYS, missing[:5]))
    # counted once n1 has deleted them, after n3's acks: wait for it
    deadline = time.time() + 20
    while True:
        replayed = n1.metrics().get("ringkv_hints_replayed_total", 0)
        if replayed >= KEYS or time.time() > deadline:
            break
        time.sleep(0.2)
    h.check(replayed == KEYS, "n1 replayed %d hints" % replayed)
    print("n3 has the %d writes n1 hinted while stopping" % KEYS)
    for n in c.nodes:
        h.check(n.stop() == 0, "%s unclean exit" % n.name)


h.run(main)
