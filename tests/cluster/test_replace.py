#!/usr/bin/env python3
"""replace: a new node started with `replace: DEAD` takes the dead node's
tokens, streams its ranges from the other replicas and only then serves
them; the dead node leaves the ring. Refused, with nothing changed, for a
live node, an unknown one, the node itself and a node that has tokens.

Proves: four nodes (RF 3, a rack each) hold 1,000 small keys (100 of them
deleted) and 2,000 of 2,000 bytes, written at QUORUM. A new node n6 asked
to replace n1 (UP) or n9 (unknown) stops with exit code 1 and says why,
and to replace itself is a configuration error (exit 2); the ring epoch
and fingerprint stay as they were. n4 is killed -9; while a writer writes
at QUORUM through n2, n5 (rack r4) starts with replace: n4. n5 ends UN with
exactly n4's tokens (node.state), n4 is gone from every node's status,
every acknowledged key reads back at ALL with no deleted key coming back,
and n5 serves at ONE every key it replicates. The bytes n5 streamed in
are within 10% of n4's share of the data (the keys written before n4 died
that n5 replicates, which are n4's), and no other node planned a stream. n5 restarted with
replace: n4 still in its config goes on as a member; n5's data_dir with
replace: n3 is refused (it has tokens). Then n5 is killed and n10 and n11
both start to replace it: n11 is refused (n10 is replacing n5 already);
n10, killed -9 after its first range, resumes from its saved positions
when restarted and ends with n5's tokens, serving its keys. Before replace existed, the key
was unknown and n5 joined with tokens of its own (a second movement).
"""
# ctest: alongside others
import os
import subprocess
import time

import harness as h

IPS = ["127.0.5.25", "127.0.5.26", "127.0.5.27", "127.0.5.28"]


def tokens_of(node):
    for line in open(os.path.join(node.data_dir, "node.state")):
        if line.startswith("tokens="):
            return sorted(int(t) for t in line.strip()[7:].split(",") if t)
    return []


def ring_id(node):
    st = node.status()
    return st["epoch"], st["fingerprint"]


def refused(c, name, ip, replace, want, code=1):
    """A fresh node `name` started with replace: `replace` stops with exit
    status `code` and `want` in its output; returns that output."""
    n = h.Node(c, name, ip, {"rack": "r9", "replace": replace})
    c.nodes.append(n)
    n.start()
    try:
        rc = n.proc.wait(timeout=60)
    except subprocess.TimeoutExpired:
        h.check(False, "%s (replace: %s) still runs" % (name, replace))
    c.nodes.remove(n)
    out = open(n.log_path + ".stderr", errors="replace").read() + n.log()
    h.check(rc == code and want in out,
            "replace %s: exit %r, output %r" % (replace, rc, out[-600:]))
    line = [x for x in out.splitlines() if want in x][0]
    print("replace: %s refused: %s" % (replace, line.strip()[:200]))
    return out


def main():
    c = h.racked_cluster(IPS, replication="dc1:3")
    n1, n2, n3, n4 = c.nodes
    expect, gone = h.load_keys(n1, 1000)
    h.load_big(n1, expect, 2000)
    before = ring_id(n1)

    # refused, nothing changed (each one a new data_dir: a fresh node)
    refused(c, "n6", "127.0.5.47", "n1", "n1 is UP")
    refused(c, "n7", "127.0.5.48", "n9", "no node n9 in the cluster")
    refused(c, "n8", "127.0.5.49", "n8", "this node's own name", code=2)
    h.check(ring_id(n1) == before, "the refusals changed the ring: %r -> %r"
            % (before, ring_id(n1)))
    for o in (n1, n2, n3, n4):
        rows = o.status()["rows"]
        for x in ("n6", "n7", "n8"):
            h.check(not rows.get(x, {}).get(7),
                    "%s sees %s with tokens" % (o.name, x))
    print("ring unchanged after the refusals: epoch %d" % before[0])

    dead_tokens = tokens_of(n4)
    h.check(len(dead_tokens) == 8, "n4's tokens: %r" % dead_tokens)
    planned = {o.name: o.log().count("event=stream.planned ")
               for o in (n1, n2, n3)}
    n4.kill9()
    for o in (n1, n2, n3):
        c.wait_state(o, "n4", "DN", timeout=60)

    w = h.Writer(n2, "live")
    w.start()
    time.sleep(0.5)
    n5 = h.Node(c, "n5", "127.0.5.29", {"rack": "r4", "replace": "n4"})
    c.nodes.append(n5)
    n5.start()
    h.wait_log(n5, "boot.replacing", timeout=60)
    c.wait_state(n1, "n5", ("UJ", "UN"), timeout=60)
    c.wait_state(n1, "n5", "UN", timeout=180)
    for o in (n1, n2, n3, n5):  # n4 is out of every ring
        c.wait_state(o, "n4", None, timeout=60)
    c.wait_converged(timeout=60)
    time.sleep(0.5)
    w.finish()
    print("n5 replaced n4 (%d writes during the replace, %d sent again "
          "after RING_STALE)" % (len(w.acked), w.stale))
    log = n5.log()
    for mark in ("replace.begin", "stream.planned", "replace.removed",
                 "replaced=n4"):
        h.check(mark in log, "n5's log lacks %s" % mark)
    h.check("replacing=n4" in log.split("event=stream.planned ")[1]
            .splitlines()[0], "n5's plan was not a replace")

    h.check(tokens_of(n5) == dead_tokens, "n5's tokens %r are not n4's %r"
            % (tokens_of(n5), dead_tokens))
    h.check("joining=0" in open(n5.data_dir + "/node.state").read(),
            "n5's node.state still says joining")
    row = n1.status()["rows"]["n5"]
    h.check(row.get(5) == "UN" and row.get(7) == 8, "n5's row: %r" % row)

    pre = dict(expect)  # written before n4 died: n5 gets it only by streaming
    expect.update(w.acked)
    mine, dead = h.check_served(n5, expect, gone)
    print("n5 serves at ONE its %d keys and none of its %d deleted ones" %
          (len(mine), len(dead)))
    # what moved: n5's share (n4's ranges) once, nothing anywhere else
    # n4's share: what n4 held when it died, the keys (and values) written
    # before that which n5 now replicates; n5 streams all of it, plus the
    # writes n4 missed before n5 announced itself (small ones)
    old = [k for k in mine if k in pre]
    share = sum(len(k) + len(pre[k]) for k in old)
    m = n5.metrics()
    got = m.get('ringkv_stream_bytes_total{direction="in"}', 0)
    keys_in = m.get('ringkv_stream_keys_total{direction="in"}', 0)
    ratio = got / share
    print("n5 streamed %d keys, %d bytes; n4's share was %d keys (+%d "
          "deleted), %d bytes of keys and values: %.3f of it" %
          (keys_in, got, len(old), len(dead), share, ratio))
    h.check(0.9 <= ratio <= 1.1, "n5 streamed %.3f of its share" % ratio)
    for o in (n1, n2, n3):  # no other node gained a range
        h.check(o.log().count("event=stream.planned ") == planned[o.name],
                "%s planned a stream during the replace" % o.name)
    print("removenode n4 then a join would move about twice that: the "
          "removal copies n4's ranges to the nodes that gain them (%d "
          "bytes), the join pulls a share again (tools/bench/"
          "replace.py measures both)" % share)

    # every acknowledged key at ALL, no deleted one back
    cl = n1.client()
    try:
        keys = list(expect)
        res = cl.pipeline([("GET", {"key": k, "cl": "ALL"}) for k in keys])
        bad = [(k, r.err) for k, r in zip(keys, res)
               if r.err or r.value != expect[k]]
        h.check(not bad, "%d of %d keys not read at ALL: %r" %
                (len(bad), len(keys), bad[:5]))
        res = cl.pipeline([("GET", {"key": k, "cl": "ALL"}) for k in gone])
        back = [k for k, r in zip(gone, res) if r.err != "NOT_FOUND"]
        h.check(not back, "deleted keys came back: %r" % back[:5])
    finally:
        cl.close()
    print("all %d acknowledged keys read at ALL, none of %d deleted ones"
          % (len(expect), len(gone)))
    # a restart with replace: n4 still set goes on; another name is refused
    n5.stop()
    n5.start()
    c.wait_converged(timeout=60)
    h.check(tokens_of(n5) == dead_tokens, "n5's tokens changed on restart")
    n5.stop()
    n5.extra["replace"] = "n3"
    n5.start()
    rc = n5.proc.wait(timeout=60)
    err = open(n5.log_path + ".stderr", errors="replace").read()
    h.check(rc == 1 and "holds tokens already" in err,
            "n5 replacing n3: %r %r" % (rc, err[-400:]))
    print("n5's data_dir with replace: n3 refused: %s" %
          err.strip().splitlines()[-1][:200])
    h.check(n1.status()["rows"]["n3"].get(5) == "UN", "n3 changed")
    n5.extra["replace"] = "n4"
    n5.start()
    c.wait_converged(timeout=60)

    # n5 dies too; n10 and n11 both start to replace it: n11 is refused;
    # n10, killed -9 in the middle of its streams, resumes when restarted
    # more bytes first, so that n10's streams (1 MiB/s) still run 1.5 s
    # after its first range is done (with 3 MB they could all end by then)
    more = ["c%d" % i for i in range(2000)]
    h.put_all(n1, more, b"y" * 4000)
    expect.update((k, b"y" * 4000) for k in more)
    dead_tokens = tokens_of(n5)
    n5.kill9()
    for o in (n1, n2, n3):
        c.wait_state(o, "n5", "DN", timeout=60)
    n10 = h.Node(c, "n10", "127.0.5.30", {"rack": "r4", "replace": "n5",
                                          "stream_throughput_mb": 1})
    c.nodes.append(n10)
    n10.start()
    refused(c, "n11", "127.0.5.47", "n5", "is replacing n5 already")
    deadline = time.time() + 30
    while True:  # its streams, as `ringkv netstats` shows them
        rc, ns = h.cli(n10, "netstats")
        if "Mode: JOINING (replacing n5)" in ns:
            break
        h.check(time.time() < deadline, "n10's netstats: %d %r" % (rc, ns))
        time.sleep(0.1)
    print("n10's netstats: %r" % ns.splitlines()[0])
    saved, done = h.kill_after_first_range(
        n10, "stream.range_done", "boot.joined", "joining=1")
    h.check("replace=n5" in open(n10.data_dir + "/node.state").read(),
            "n10's node.state does not name n5")
    mark = len(n10.log())
    n10.start()
    c.wait_state(n1, "n10", "UN", timeout=180)
    for o in (n1, n2, n3, n10):
        c.wait_state(o, "n5", None, timeout=60)
    c.wait_converged(timeout=60)
    h.check_resumed(n10, n10.log()[mark:], "replace", "stream.resumed",
                    "stream.range_done", "boot.joined", saved, done)
    h.check(tokens_of(n10) == dead_tokens, "n10's tokens are not n5's")
    mine, dead = h.check_served(n10, expect, gone)
    print("n10 replaced n5 across a kill -9 and serves its %d keys" %
          len(mine))


if __name__ == "__main__":
    h.run(main)
