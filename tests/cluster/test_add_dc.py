#!/usr/bin/env python3
"""A replication change on a live cluster, then a second data centre.

Proves, with no acknowledged write lost:
1. `ringkv replication set dc1:3` through one node of a three-node dc1 at
   RF 2 (2,000 keys and 2,500 values of 2,000 bytes loaded, a QUORUM
   writer running) reaches every node with one version (`ringkv
   replication` on each shows it, "Converged"), with no restart; each node
   gained ranges and repairs them by itself (`ringkv status` says so, then
   "done"), after which every node serves every acknowledged key at ONE
   from its own replica: three replicas hold each.
2. Three dc2 nodes, started while the setting names no dc2 (their config
   file says dc1:2; they adopt the cluster's dc1:3), join without
   streaming (they replicate nothing). `ringkv replication set
   dc1:3,dc2:3` (through a dc2 node) says to run rebuild; `ringkv rebuild
   --from dc1` on each dc2 node fills it while an EACH_QUORUM writer runs
   through a dc2 node. n4 (stream_throughput_mb 1) is killed -9 after its
   first range and restarted: node.state kept rebuild_from=dc1, it resumes
   from its saved positions (`stream.resumed`, no range done before the
   kill streamed again) and ends `rebuild.done`.
3. Every acknowledged key reads back at EACH_QUORUM through a dc2 node with
   both data centres up, and at LOCAL_QUORUM through a dc2 node once every
   dc1 node is killed -9.
4. A node down during the change (n2) adopts the setting when it is back,
   over its config file's (`replication.file_differs`) and its
   node.state's; `ringkv replication` says "Not converged" meanwhile.
"""
# ctest: long
# ctest: load
import re
import time

import harness as h

DC1 = ["127.0.8.11", "127.0.8.12", "127.0.8.13"]
DC2 = ["127.0.8.21", "127.0.8.22", "127.0.8.23"]


def replication_converged(nodes, want, timeout=30):
    """Until `ringkv replication` on each of nodes says every node uses
    `want` under one version; returns that version."""
    deadline = time.time() + timeout
    last = None
    while time.time() < deadline:
        versions = set()
        ok = True
        for n in nodes:
            rc, out = h.cli(n, "replication")
            m = re.search(r"Converged: every node \(\d+\) uses (\S+), "
                          r"version (\d+)", out)
            if rc != 0 or not m or m.group(1) != want:
                ok, last = False, (n.name, out)
                break
            versions.add(int(m.group(2)))
        if ok and len(versions) == 1:
            return versions.pop()
        time.sleep(0.3)
    raise AssertionError("replication never converged on %s: %r" %
                         (want, last))


def wait_status(node, text, timeout=120):
    deadline = time.time() + timeout
    out = ""
    while time.time() < deadline:
        rc, out = h.cli(node, "status")
        if rc == 0 and text in out:
            return out
        time.sleep(0.5)
    raise AssertionError("%s's status never said %r:\n%s" %
                         (node.name, text, out))


def read_all(node, expect, cl):
    c = node.client(timeout=30)
    try:
        keys = list(expect)
        bad = []
        for b in range(0, len(keys), 2000):
            res = c.pipeline([("GET", {"key": k, "cl": cl})
                              for k in keys[b:b + 2000]])
            bad += [(k, r.err, r.value) for k, r in zip(keys[b:b + 2000], res)
                    if r.err or r.value != expect[k]]
    finally:
        c.close()
    h.check(not bad, "%d of %d keys wrong at %s through %s: %r" %
            (len(bad), len(expect), cl, node.name, bad[:5]))
    print("%d keys read back at %s through %s" % (len(expect), cl, node.name))


def main():
    c = h.Cluster(DC1 + DC2, seeds=DC1[:2], replication="dc1:2")
    for i, n in enumerate(c.nodes):
        n.extra["datacenter"] = "dc1" if i < 3 else "dc2"
        n.extra["rack"] = "r%d" % (i % 3)
    dc1, dc2 = c.nodes[:3], c.nodes[3:]
    n1, n2, n3 = dc1
    n4, n5, n6 = dc2
    n4.extra["stream_throughput_mb"] = 1
    for n in dc1:
        n.start()
    c.wait_converged(timeout=60)
    expect, gone = h.load_keys(n1, 2000)
    h.load_big(n1, expect, 2500)

    # 1. RF 2 -> 3 with one command, under a QUORUM writer
    w = h.Writer(n2, "w", cl="QUORUM")
    w.start()
    time.sleep(1)
    rc, out = h.cli(n1, "replication", "set", "dc1:3")
    print(out)
    h.check(rc == 0 and "Replication set to dc1:3" in out and
            "repairs its ranges" in out, "replication set: %d %s" % (rc, out))
    v1 = replication_converged(dc1, "dc1:3")
    for n in dc1:
        got = n.metrics().get("ringkv_replication_version")
        h.check(got == v1, "%s's ringkv_replication_version %r, not %d" %
                (n.name, got, v1))
    for n in dc1:
        st = wait_status(n, "Repair after the replication change: done")
        if n is n1:
            print(st)
        h.check("Repair: done with failures" not in st,
                "%s's repair failed:\n%s" % (n.name, st))
        h.check("version %d" % v1 in st, "%s's status: %s" % (n.name, st))
    expect.update(w.finish())
    print("RF 3 (version %d): %d writes acknowledged meanwhile" %
          (v1, len(w.acked)))
    eps = h.endpoints(n1, list(expect)[:100])
    h.check(all(len(v) == 3 for v in eps.values()), "not 3 replicas: %r" %
            list(eps.items())[:3])
    h.check_served_by(dc1, expect, gone)

    # 2. a second data centre, not in the setting yet: no streaming
    for n in dc2:
        n.start()
    c.wait_converged(timeout=90)
    replication_converged(c.nodes, "dc1:3")
    for n in dc2:  # the join's plan is empty: nothing of dc1 replicated
        m = re.search(r"event=boot.joined .*ranges=(\d+) keys=(\d+)", n.log())
        h.check(m and m.group(1) == "0" and m.group(2) == "0",
                "%s streamed to join: %r" % (n.name, m and m.group(0)))
    # n2 is down during the change: it adopts the setting when back, over
    # its file's (dc1:2) and its node.state's (dc1:3)
    h.check(n2.stop() == 0, "n2 unclean exit")
    mark = len(n2.log())
    rc, out = h.cli(n5, "replication", "set", "dc1:3,dc2:3")
    print(out)
    h.check(rc == 0 and "rebuild --from dc1" in out,
            "replication set: %d %s" % (rc, out))
    # every live node adopts it as gossip reaches it: within a second or
    # two, but not always within one (n6 had not in a make test run,
    # 2026-12-07); n2, down, cannot
    want = "Not converged: 5 of 6 nodes use dc1:3,dc2:3"
    deadline = time.time() + 30
    while True:
        rc, out = h.cli(n1, "replication")
        if want in out or time.time() > deadline:
            break
        time.sleep(0.5)
    print(out)
    h.check(want in out, out)
    n2.start()
    v2 = replication_converged(c.nodes, "dc1:3,dc2:3")
    print(h.cli(n4, "replication")[1])
    h.check(v2 > v1, "version %d after %d" % (v2, v1))
    log = n2.log()[mark:]
    h.check("event=replication.file_differs" in log and
            'event=replication.adopted replication="dc1:3,dc2:3"' in log,
            "n2 did not adopt the setting after its restart")
    wait_status(n4, "Rebuild needed")
    w = h.Writer(n5, "e", cl="EACH_QUORUM")
    w.start()
    # n6 followed to its end (--wait); n4 started last, so that it is
    # still streaming when it is killed below (started first, it had
    # finished during n6's wait under ASan, make test 2026-12-06)
    for n in (n5, n6, n4):
        rc, out = h.cli(n, "rebuild", "--from", "dc1",
                        *(["--wait"] if n is n6 else []))
        h.check(rc == 0 and "rebuilds from data centre dc1" in out,
                "rebuild on %s: %d %s" % (n.name, rc, out))
        print(out)
        if n is n6:
            h.check("Rebuilt from dc1: " in out, "--wait: %s" % out)
    rc, out = h.cli(n4, "rebuild", "--from", "dc3")
    h.check(rc != 0, "a second rebuild was accepted: %s" % out)
    # n4 killed -9 mid-way, and resumed
    saved, before = h.kill_after_first_range(
        n4, "stream.range_done", "rebuild.done", "rebuild_from=dc1\n",
        wait_s=0.6)
    del n4.extra["stream_throughput_mb"]
    mark = len(n4.log())
    n4.start()
    for n in dc2:
        h.wait_log(n, "rebuild.done", timeout=180)
    st = wait_status(n4, "Rebuilt from dc1")
    print(st)
    h.check_resumed(n4, n4.log()[mark:], "rebuild", "stream.resumed",
                    "stream.range_done", "rebuild.done", saved, before)
    c.wait_converged(timeout=60)
    # writes to n4 failed while it was down and not yet seen so
    expect.update(w.finish(allowed=("TIMEOUT", "UNAVAILABLE")))
    print("dc2 rebuilt: %d EACH_QUORUM writes acknowledged meanwhile" %
          len(w.acked))

    # 3. EACH_QUORUM across, then LOCAL_QUORUM in dc2 alone
    read_all(n6, expect, "EACH_QUORUM")
    for n in dc1:
        n.kill9()
    for n in dc1:
        c.wait_state(n4, n.name, "DN", timeout=30)
    read_all(n4, expect, "LOCAL_QUORUM")
    for n in dc2:
        h.check(n.stop() == 0, "%s unclean exit" % n.name)


h.run(main)
