#!/usr/bin/env python3
"""Three nodes, RF 3 (one rack each): quorum reads and writes, kill -9,
hints, restart.

Proves: 1,000 keys written at QUORUM read back at QUORUM from every node;
with one node killed (-9) QUORUM writes and reads still succeed while ALL
fails at once with UNAVAILABLE; the writes it missed are hinted and, once
it is back, replayed to it (it serves them from its own storage at ONE),
and ALL reads see every write. The restarted node keeps its name, tokens
and data, with a higher generation.
"""
# ctest: alongside others
import time

import harness as h

KEYS = 1000


def main():
    ips = ["127.0.0.41", "127.0.0.42", "127.0.0.43"]
    c = h.racked_cluster(ips, replication="dc1:3")
    n1, n2, n3 = c.nodes

    cl = n1.client()
    reqs = [("PUT", {"key": "k%d" % i, "value": "v%d" % i, "cl": "QUORUM"})
            for i in range(KEYS)]
    res = cl.pipeline(reqs)
    bad = [r for r in res if r.err]
    h.check(not bad, "QUORUM writes failed: %r" % bad[:3])
    h.check(all(r.acks and r.acks >= 2 for r in res), "acks below quorum")
    cl.close()
    for n in c.nodes:
        cn = n.client()
        res = cn.pipeline([("GET", {"key": "k%d" % i, "cl": "QUORUM"})
                           for i in range(KEYS)])
        cn.close()
        wrong = [(i, r.err, r.value) for i, r in enumerate(res)
                 if r.err or r.value != ("v%d" % i).encode()]
        h.check(not wrong, "%s QUORUM reads wrong: %r" % (n.name, wrong[:3]))
    print("1000 keys at QUORUM read back from all 3 nodes")

    # one connection reads its own writes, even pipelined
    cl = n2.client()
    reqs = []
    for i in range(200):
        reqs.append(("PUT", {"key": "ryw%d" % (i % 20), "value": "x%d" % i,
                             "cl": "QUORUM"}))
        reqs.append(("GET", {"key": "ryw%d" % (i % 20), "cl": "QUORUM"}))
    res = cl.pipeline(reqs, depth=400)
    cl.close()
    wrong = [(i, res[2 * i + 1].value) for i in range(200)
             if res[2 * i + 1].value != ("x%d" % i).encode()]
    h.check(not wrong, "pipelined PUT then GET saw: %r" % wrong[:3])

    # a replica that stops answering (SIGSTOP, not yet convicted DOWN):
    # ALL times out and says how many answered; QUORUM still succeeds
    import signal
    n3.proc.send_signal(signal.SIGSTOP)
    try:
        cl = n1.client()
        r = cl.call("PUT", key="stopped", value="1", cl="ALL")
        h.check(r.err == "TIMEOUT" and r.acks == 2 and r.get(6) == 3,
                "ALL write with a frozen replica: %r" % r)
        print("frozen replica: %s (%s)" % (r.err, r.msg))
        r = cl.call("PUT", key="stopped", value="2", cl="QUORUM")
        h.check(not r.err, "QUORUM write with a frozen replica: %r" % r)
        cl.close()
    finally:
        n3.proc.send_signal(signal.SIGCONT)
    c.wait_converged(timeout=30)

    gen_before = int(open(n3.data_dir + "/node.state").read().split(
        "generation=")[1].split()[0])
    n3.kill9()
    c.wait_state(n1, "n3", "DN", timeout=30)
    c.wait_state(n2, "n3", "DN", timeout=30)
    cl = n1.client()
    res = cl.pipeline([("PUT", {"key": "k%d" % i, "value": "w%d" % i,
                                "cl": "QUORUM"}) for i in range(200)])
    h.check(not [r for r in res if r.err],
            "QUORUM writes with n3 down failed: %r" %
            [r for r in res if r.err][:3])
    r = cl.call("GET", key="k5", cl="QUORUM")
    h.check(r.value == b"w5", "QUORUM read with n3 down: %r" % r)
    r = cl.call("GET", key="k5", cl="ALL")
    h.check(r.err == "UNAVAILABLE", "ALL read with n3 down: %r" % r)
    r = cl.call("PUT", key="k5", value="x", cl="ALL")
    h.check(r.err == "UNAVAILABLE", "ALL write with n3 down: %r" % r)
    cl.close()
    deadline = time.time() + 20  # hints are written on the thread pool
    while True:
        hints = n1.metrics().get("ringkv_hints_stored_total", 0)
        if hints >= 200 or time.time() > deadline:
            break
        time.sleep(0.2)
    print("n3 down: QUORUM ok, ALL UNAVAILABLE, n1 stored %d hints" % hints)
    h.check(hints >= 200, "n1 stored only %d hints" % hints)

    n3.start()
    c.wait_converged(timeout=60)
    gen_after = int(open(n3.data_dir + "/node.state").read().split(
        "generation=")[1].split()[0])
    h.check(gen_after > gen_before, "generation did not increase")
    # hints replay: n3 serves the missed writes from its own store at ONE
    deadline = time.time() + 40
    missing = None
    while time.time() < deadline:
        c3 = n3.client()
        res = c3.pipeline([("GET", {"key": "k%d" % i, "cl": "ONE"})
                           for i in range(200)])
        c3.close()
        missing = [i for i, r in enumerate(res)
                   if r.value != ("w%d" % i).encode()]
        if not missing:
            break
        time.sleep(0.5)
    h.check(not missing, "n3 lacks %d hinted writes (e.g. %r)" %
            (len(missing), missing[:5]))
    replayed = n1.metrics().get("ringkv_hints_replayed_total", 0)
    h.check(replayed >= 200, "n1 replayed %d hints" % replayed)
    print("n3 back: %d hints replayed" % replayed)
    for n in c.nodes:
        cn = n.client()
        res = cn.pipeline([("GET", {"key": "k%d" % i, "cl": "ALL"})
                           for i in range(KEYS)])
        cn.close()
        want = lambda i: ("w%d" % i if i < 200 else "v%d" % i).encode()
        wrong = [(i, r.err) for i, r in enumerate(res)
                 if r.value != want(i)]
        h.check(not wrong, "%s ALL reads wrong: %r" % (n.name, wrong[:3]))
    print("ALL reads see every write on every node")
    for n in c.nodes:
        h.check(n.stop() == 0, "%s unclean exit" % n.name)


h.run(main)
