#!/usr/bin/env python3
"""A node that flaps -- killed -9 and restarted, frozen and thawed, stopped
and started, over and over -- while clients write: nothing acknowledged is
lost, the others never fail a QUORUM write, and the flapping node ends up
with every write.

Proves: three nodes (RF 3, a rack each) and two writers at QUORUM, through
n1 and n2, each key written once, and a reader reading back at QUORUM
through n2 what was acknowledged through n1. For about 12 s n3 goes through a seeded
random sequence of: kill -9 and a restart after 0.2-2 s; SIGSTOP for
0.3-3 s (a hung process, convicted DOWN or not) and SIGCONT; SIGTERM and
an immediate restart. Throughout, with two replicas of every key always
up, no QUORUM write fails (a RING_STALE is retried, as clients do) and
every QUORUM read finds the acknowledged value. Then
the cluster converges (every node UN, one ring fingerprint), every
acknowledged write reads back at QUORUM through each node, and once n1's
and n2's hints are replayed n3 serves every acknowledged write at ONE from
its own replica; no node crashed (the harness checks every run's log).
"""
import random
import signal
import threading
import time

import harness as h

FLAP_S = 12


class Reader(threading.Thread):
    """Reads back at QUORUM, through node, keys writer has had
    acknowledged: each must be found with its value (a QUORUM read after
    a QUORUM write overlaps it)."""

    def __init__(self, node, writer):
        super().__init__(daemon=True)
        self.node, self.writer = node, writer
        self.reads, self.wrong = 0, []
        self.stop = threading.Event()

    def run(self):
        cl = self.node.client()
        rnd = random.Random(7)
        try:
            while not self.stop.is_set():
                done = list(self.writer.acked.items())
                if not done:
                    time.sleep(0.05)
                    continue
                batch = [rnd.choice(done) for _ in range(20)]
                res = cl.pipeline([("GET", {"key": k, "cl": "QUORUM"})
                                   for k, _ in batch])
                for (k, v), r in zip(batch, res):
                    if r.err or r.value != v:
                        self.wrong.append((k, r.err))
                self.reads += len(batch)
        finally:
            cl.close()


def flap(c, n3, rnd):
    """The sequence of faults; returns what was done, for the log."""
    done = []
    end = time.time() + FLAP_S
    while time.time() < end:
        what = rnd.choice(["kill", "kill", "freeze", "term"])
        if what == "kill":
            n3.kill9()
            time.sleep(rnd.uniform(0.2, 2.0))
            n3.start()
        elif what == "freeze":
            n3.proc.send_signal(signal.SIGSTOP)
            time.sleep(rnd.uniform(0.3, 3.0))
            n3.proc.send_signal(signal.SIGCONT)
        else:
            h.check(n3.stop() == 0, "n3 did not stop cleanly on SIGTERM")
            n3.start()
        done.append(what)
        time.sleep(rnd.uniform(0.2, 1.5))  # up for a moment
    return done


def main():
    ips = ["127.0.0.8", "127.0.0.9", "127.0.0.10"]
    c = h.racked_cluster(ips, replication="dc1:3")
    n1, n2, n3 = c.nodes
    writers = [h.Writer(n1, "a"), h.Writer(n2, "b")]
    reader = Reader(n2, writers[0])
    for t in writers + [reader]:
        t.start()
    time.sleep(1)
    done = flap(c, n3, random.Random(20261204))
    time.sleep(1)
    reader.stop.set()
    acked = {}
    for w in writers:
        acked.update(w.finish(at_least=500))
    reader.join(timeout=60)
    print("n3: %s" % " ".join(done))
    h.check(reader.reads > 1000 and not reader.wrong,
            "QUORUM reads through n2 of writes acknowledged through n1: "
            "%d of %d wrong, e.g. %r" % (len(reader.wrong), reader.reads,
                                         reader.wrong[:5]))
    print("%d QUORUM reads of acknowledged writes, all right" %
          reader.reads)
    print("%d writes acknowledged, none failed (%d RING_STALE retried)" %
          (len(acked), sum(w.stale for w in writers)))

    c.wait_converged(timeout=90)
    keys = sorted(acked)
    for n in c.nodes:
        cl = n.client()
        res = cl.pipeline([("GET", {"key": k, "cl": "QUORUM"}) for k in keys])
        cl.close()
        wrong = [(k, r.err) for k, r in zip(keys, res)
                 if r.err or r.value != acked[k]]
        h.check(not wrong, "%s: %d acknowledged writes not read back at "
                "QUORUM: %r" % (n.name, len(wrong), wrong[:5]))
    print("every acknowledged write reads back at QUORUM through each node")

    deadline = time.time() + 90
    while True:
        cl = n3.client()
        res = cl.pipeline([("GET", {"key": k, "cl": "ONE"}) for k in keys])
        cl.close()
        missing = [k for k, r in zip(keys, res) if r.value != acked[k]]
        if not missing:
            break
        h.check(time.time() < deadline,
                "n3 lacks %d acknowledged writes after its peers' hints "
                "(e.g. %r)" % (len(missing), missing[:5]))
        time.sleep(1)
    dropped = sum(n.metrics().get("ringkv_hints_dropped_total", 0)
                  for n in (n1, n2))
    h.check(dropped == 0, "%d hints dropped" % dropped)
    replayed = sum(n.metrics().get("ringkv_hints_replayed_total", 0)
                   for n in (n1, n2))
    print("n3 serves all %d writes from its own replica (%d hints "
          "replayed)" % (len(keys), replayed))
    for n in c.nodes:
        h.check(n.stop() == 0, "%s unclean exit" % n.name)


if __name__ == "__main__":
    h.run(main)
