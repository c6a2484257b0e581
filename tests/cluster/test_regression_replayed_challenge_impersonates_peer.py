#!/usr/bin/env python3
"""Regression: a replayed internode challenge let anyone impersonate a peer.

Until handshake version 2 the accepting node spoke first with a signed
CHALLENGE, handed to any TCP client on 7001, and the connecting node
accepted any correctly signed CHALLENGE: no nonce of its own in it, no
check of whom it had reached. Reproduced: read a challenge from n1, kill -9
n3, bind n3's internode address, serve the challenge: n1 completed the
handshake, and SETs at ALL were answered OK though n3 stored nothing and
no hints were kept. Now the connecting node speaks first (HELLO with its
nonce and the name of the member it means to reach) and accepts only an
ANSWER whose MAC covers that nonce and both names.

Three nodes (127.0.1.11-13, RF 3, phi_convict_threshold 100 and
suspicion_timeout_ms 600000 (the probe detector) so that n3
stays UP for the ~45 s after its kill that this test needs at most). The
test reads what n1 hands an unauthenticated client on 7001 (a CHALLENGE
before the fix; nothing now, so it says HELLO in n3's name and takes the
ANSWER); kills n3; binds n3's internode address with a fake n3 that
replays the captured bytes to whoever connects and answers every request
it gets with an OK WRITE_ACK. Then 10 SETs at ALL through n1: the fake n3
must see n1's HELLO naming n3 and no request; no SET is answered OK; n1
logs internode.handshake_fail for n3's address and keeps a hint per SET
it wrote (a SET answered UNAVAILABLE was written nowhere: once the
handshake failed, n1 plans the unreachable n3 as DOWN and refuses ALL
up front).
Before the fix the fake n3 got the writes, acknowledged them, and every
SET was answered OK.
"""
# ctest: alongside others
import os
import socket
import struct
import threading
import time

import harness as h

IPS = ["127.0.1.11", "127.0.1.12", "127.0.1.13"]
PORT = 7001  # internode_port
SETS = 10


def frame(body):
    return struct.pack(">I", len(body)) + body


def read_frame(sock, buf):
    """One frame body from sock (buf: bytes already read, a list of one
    bytes object kept between calls); None at EOF."""
    while True:
        b = buf[0]
        if len(b) >= 4:
            n = struct.unpack(">I", b[:4])[0]
            if len(b) >= 4 + n:
                buf[0] = b[4 + n:]
                return b[4:4 + n]
        got = sock.recv(65536)
        if not got:
            return None
        buf[0] = b + got


def capture(ip):
    """What n1 hands an unauthenticated client: the frame it sends first
    (version 1), or else the ANSWER to a HELLO in n3's name (version 2;
    on a new connection, since n1 closes a silent one at its handshake
    deadline, 1 s here)."""
    s = socket.create_connection((ip, PORT), timeout=1.0)
    try:
        f = read_frame(s, [b""])
        if f:
            return "sent first", frame(f)
    except socket.timeout:
        pass
    finally:
        s.close()
    s = socket.create_connection((ip, PORT), timeout=5)
    try:
        hello = h.mp_pack([1, 2, 0, "test", "n3", "n1", os.urandom(16),
                           bytes(16), int(time.time() * 1000), bytes(32)])
        s.sendall(frame(hello))
        f = read_frame(s, [b""])
        return "answered a HELLO", frame(f) if f else b""
    finally:
        s.close()


class FakePeer(threading.Thread):
    """Listens on n3's internode address; to each connection: reads what
    comes first (briefly), sends the captured bytes, then reads frames,
    counting RPC requests and acknowledging writes as n3 would."""

    def __init__(self, ip, captured):
        super().__init__(daemon=True)
        self.captured = captured
        self.conns = 0
        self.first = []     # the first frame of each connection, if any
        self.requests = 0   # RPC request frames after the handshake
        self.stop = False
        self.ls = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        self.ls.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        self.ls.bind((ip, PORT))
        self.ls.listen(16)
        self.ls.settimeout(0.2)

    def run(self):
        while not self.stop:
            try:
                c, _ = self.ls.accept()
            except socket.timeout:
                continue
            except OSError:
                return
            self.conns += 1
            threading.Thread(target=self.serve, args=(c,), daemon=True).start()

    def serve(self, c):
        buf = [b""]
        try:
            c.settimeout(0.3)
            try:
                self.first.append(read_frame(c, buf))
            except socket.timeout:
                self.first.append(None)
            c.settimeout(5)
            c.sendall(self.captured)
            while True:
                f = read_frame(c, buf)
                if f is None:
                    return
                if len(f) < 9 or f[0] != 1:  # a handshake frame
                    continue
                self.requests += 1
                rid = f[1:9]
                msg, _ = h.mp_unpack(f[9:])
                if isinstance(msg, list) and msg and msg[0] == 2:  # WRITE
                    ack = h.mp_pack([3, 0, 0])  # WRITE_ACK status 0
                    c.sendall(frame(b"\x02" + rid + ack))
        except OSError:
            pass
        finally:
            c.close()

    def close(self):
        self.stop = True
        self.ls.close()


def main():
    c = h.racked_cluster(IPS, replication="dc1:3", phi_convict_threshold=100,
                         suspicion_timeout_ms=600000)
    n1, n2, n3 = c.nodes
    cl = n1.client()
    r = cl.call("PUT", key="warm", value="up", cl="ALL")
    h.check(not r.err, "SET at ALL with every node up: %r" % r)

    how, captured = capture(n1.ip)
    print("n1 %s: %d bytes" % (how, len(captured)))
    h.check(len(captured) > 4, "n1 handed out nothing to capture")

    hints0 = n1.metrics().get("ringkv_hints_stored_total", 0)
    n3.kill9()
    fake = FakePeer(n3.ip, captured)
    fake.start()
    try:
        # n1 saw n3's connection reset by the kill: it plans n3 unreachable
        # and connects again in the background once its backoff has passed
        # (a request is what prompts it); wait until it has reached the
        # fake n3 before the SETs that count
        deadline = time.time() + 20
        while fake.conns == 0 and time.time() < deadline:
            cl.call("PUT", key="probe", value="x", cl="ONE")
            time.sleep(0.2)
        replies = [cl.call("PUT", key="k%d" % i, value="v%d" % i, cl="ALL")
                   for i in range(SETS)]
    finally:
        fake.close()
    cl.close()
    ok = [i for i, r in enumerate(replies) if not r.err]
    errs = sorted(set(r.err for r in replies if r.err))
    print("fake n3: %d connections, %d requests; SETs at ALL answered OK: "
          "%d of %d (errors %r)" % (fake.conns, fake.requests, len(ok), SETS,
                                    errs))
    h.check(fake.conns >= 1, "n1 never connected to n3's address")
    h.check(fake.requests == 0,
            "the fake n3 received %d RPC requests" % fake.requests)
    h.check(not ok, "SETs at ALL answered OK with n3 an impostor: %r" % ok)
    hello = next((f for f in fake.first if f), None)
    h.check(hello is not None, "n1 sent the fake n3 no HELLO")
    msg, _ = h.mp_unpack(hello)
    print("n1's HELLO: role %r from %r to %r" % (msg[2], msg[4], msg[5]))
    h.check(msg[:3] == [1, 2, 0] and msg[4] == "n1" and msg[5] == "n3",
            "n1's first frame is not a HELLO from n1 to n3: %r" % (msg,))
    fails = [l for l in n1.log().splitlines()
             if "internode.handshake_fail" in l and
             "to=%s:%d" % (n3.ip, PORT) in l]
    h.check(fails, "n1 logged no handshake failure for n3's address")
    print("n1: %s" % fails[0])
    # a SET refused UNAVAILABLE must be written nowhere (n1 and n2 hold
    # no copy); every other one must leave n1 a hint for n3
    refused = [i for i, r in enumerate(replies) if r.err == "UNAVAILABLE"]
    for i in refused:
        for n in (n1, n2):
            cn = n.client()
            g = cn.call("GET", key="k%d" % i, cl="ONE")
            cn.close()
            h.check(g.err == "NOT_FOUND", "SET k%d was refused UNAVAILABLE "
                    "but %s holds it: %r" % (i, n.name, g))
    written = SETS - len(refused)
    deadline = time.time() + 20  # hints are written on the thread pool
    hints = hints0
    while time.time() < deadline:
        hints = n1.metrics().get("ringkv_hints_stored_total", 0)
        if hints >= hints0 + written:
            break
        time.sleep(0.2)
    print("n1 stored %d hints for the %d SETs it wrote" %
          (hints - hints0, written))
    h.check(hints >= hints0 + written, "n1 kept %d hints for %d SETs" %
            (hints - hints0, written))


if __name__ == "__main__":
    h.run(main)
