#!/usr/bin/env python3
"""Regression: a hint whose replay failed the same transient way every time
held back every later hint to that peer for ever.

Hints are replayed in batches of 256 and were deleted in order, up to the
first one kept: a hint the replica never answered (it timed out every
round) was the first of every batch, nothing was deleted, and the hints
past the first batch were never sent. Hints are LWW-timestamped writes, so
the replay may deliver the others and keep only the stuck one.

Two nodes, RF 2: n1 (127.0.0.121) and n2, which listens on 127.0.0.122 but
advertises 127.0.0.123, where a relay in this test forwards n1's gossip
and internode traffic to it, swallowing every internode frame that carries
the key STUCK: n2 never answers that write, n1 times it out. With n2 down,
n1 hints STUCK first, then 300 more writes.

Proves: once n2 is back, every one of the 300 writes reaches n2 (those past
the first batch too) while STUCK's hint keeps timing out, is counted
neither replayed nor dropped, and is kept: once the relay lets it through,
it is delivered too.
"""
# ctest: alongside others
import socket
import threading
import time

import harness as h

KEYS = 300
STUCK = b"stuck-hint-key"
GOSSIP_PORT = 7000
INTERNODE_PORT = 7001


def recv_exact(s, n):
    b = b""
    while len(b) < n:
        x = s.recv(n - len(b))
        if not x:
            raise OSError("closed")
        b += x
    return b


class Relay:
    """Stands at ip for the node at target: gossip datagrams both ways, and
    internode TCP, whose frames towards target (4-byte length, then the
    frame) are dropped while `swallow` is set and they contain `key`."""

    def __init__(self, ip, target, key):
        self.target = target
        self.key = key
        self.swallow = True
        self.swallowed = 0
        self.udp = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
        self.udp.bind((ip, GOSSIP_PORT))
        self.tcp = socket.socket()
        self.tcp.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        self.tcp.bind((ip, INTERNODE_PORT))
        self.tcp.listen(16)
        for f in (self.relay_udp, self.accept):
            threading.Thread(target=f, daemon=True).start()

    def relay_udp(self):
        back = None  # who gossips to target through us
        while True:
            try:
                data, src = self.udp.recvfrom(65536)
                if src == (self.target, GOSSIP_PORT):
                    if back:
                        self.udp.sendto(data, back)
                else:
                    back = src
                    self.udp.sendto(data, (self.target, GOSSIP_PORT))
            except OSError:
                pass

    def accept(self):
        while True:
            c, _ = self.tcp.accept()
            try:
                u = socket.create_connection((self.target, INTERNODE_PORT))
            except OSError:
                c.close()
                continue
            for f, a in ((self.frames, (c, u)), (self.copy, (u, c))):
                threading.Thread(target=f, args=a, daemon=True).start()

    def frames(self, src, dst):
        try:
            while True:
                hdr = recv_exact(src, 4)
                frame = recv_exact(src, int.from_bytes(hdr, "big"))
                if self.swallow and self.key in frame:
                    self.swallowed += 1
                    continue
                dst.sendall(hdr + frame)
        except OSError:
            pass
        finally:
            src.close()
            dst.close()

    def copy(self, src, dst):
        try:
            while True:
                b = src.recv(65536)
                if not b:
                    break
                dst.sendall(b)
        except OSError:
            pass
        finally:
            src.close()
            dst.close()


def values(node, keys):
    c = node.client()
    try:
        res = c.pipeline([("GET", {"key": k, "cl": "ONE"}) for k in keys])
    finally:
        c.close()
    return [r.value for r in res]


def main():
    ips = ["127.0.0.121", "127.0.0.122"]
    relay = Relay("127.0.0.123", ips[1], STUCK)
    c = h.Cluster(ips, seeds=ips[:1], replication="dc1:2")
    n1, n2 = c.nodes
    n2.extra["advertise_address"] = "127.0.0.123"
    c.start()
    c.wait_converged(timeout=60)

    h.check(n2.stop() == 0, "n2 unclean exit")
    c.wait_state(n1, "n2", "DN", timeout=30)
    cl = n1.client()
    # hints are stored on the thread pool: STUCK's goes first
    r = cl.call("PUT", key=STUCK, value="s", cl="ONE")
    h.check(not r.err, "PUT %r: %r" % (STUCK, r))
    h.check(h.wait_metric(n1, "ringkv_hints_stored_total", 1) == 1,
            "n1 did not hint %r" % STUCK)
    res = cl.pipeline([("PUT", {"key": "k%d" % i, "value": "v%d" % i,
                                "cl": "ONE"}) for i in range(KEYS)])
    cl.close()
    h.check(not [r for r in res if r.err], "writes with n2 down failed")
    stored = h.wait_metric(n1, "ringkv_hints_stored_total", KEYS + 1)
    h.check(stored == KEYS + 1, "n1 stored %d hints" % stored)

    n2.start()
    c.wait_converged(timeout=60)
    keys = ["k%d" % i for i in range(KEYS)]
    deadline = time.time() + 60
    missing = None
    while time.time() < deadline:
        got = values(n2, keys)
        missing = [i for i, v in enumerate(got)
                   if v != ("v%d" % i).encode()]
        if not missing:
            break
        time.sleep(0.5)
    h.check(not missing, "n2 lacks %d of the %d hinted writes (e.g. %r), "
            "%d frames with %r swallowed" %
            (len(missing), KEYS, missing[:5], relay.swallowed, STUCK))
    h.check(relay.swallowed >= 1, "STUCK's hint was never sent")
    h.check(values(n2, [STUCK]) == [None], "n2 has %r" % STUCK)
    replayed = h.wait_metric(n1, "ringkv_hints_replayed_total", KEYS)
    m = n1.metrics()
    dropped = m.get("ringkv_hints_dropped_total", 0)
    h.check(replayed == KEYS and dropped == 0,
            "n1 replayed %d (want %d), dropped %d (want 0)" %
            (replayed, KEYS, dropped))
    print("n2 has the %d hinted writes; %r swallowed %d times" %
          (KEYS, STUCK, relay.swallowed))

    # kept, not lost: delivered once the replica answers it
    relay.swallow = False
    replayed = h.wait_metric(n1, "ringkv_hints_replayed_total", KEYS + 1,
                             timeout=40)
    h.check(replayed == KEYS + 1, "n1 replayed %d (want %d)" %
            (replayed, KEYS + 1))
    h.check(values(n2, [STUCK]) == [b"s"], "n2 lacks %r" % STUCK)
    h.check(n1.metrics().get("ringkv_hints_dropped_total", 0) == 0,
            "n1 dropped hints")
    for n in c.nodes:
        h.check(n.stop() == 0, "%s unclean exit" % n.name)


h.run(main)
