#!/usr/bin/env python3
"""Regression (queued_replies_bound): replies that completed behind a slow
first request count toward a RESP connection's 4 MiB output bound.

A connection stops reading while its unsent output is over 4 MiB. The
replies of pipelined requests that completed behind a request still in
flight wait in their slots, and those were not counted: a client that
pipelined ECHO <16 MiB> (or GETs of a 16 MiB value) behind a slow GET made
the node hold every reply -- up to 2 x max_pipeline slots of 16 MiB, 32 GiB
at the defaults -- while the bound never stopped the reading.

On a 2-node RF-2 cluster the connection's first request is a GET at ALL
while n2 is stopped (SIGSTOP; read_timeout_ms is long and the failure
detector lenient, so the GET simply waits). Behind it the client pipelines
(a) 40 ECHOs of 16 MiB and (b) 32 GETs at ONE of a 16 MiB value (n1 has
max_pipeline 4). While n2 is stopped, n1 must parse only the first few of
them (it stops reading once the queued replies pass 4 MiB) and its RSS must
not grow by more than 200 MiB (before the fix: every request was parsed
and about 640 / 512 MiB held). Then n2 continues: every reply must arrive,
in order and whole, while the client reads (no hang).
"""
# ctest: alongside others
import os
import signal
import socket
import sys
import threading
import time

import harness as h

try:
    import redis
except ImportError:  # python3-redis lives with Debian's python3
    sys.path.append("/usr/lib/python3/dist-packages")
    import redis

IPS = ["127.0.0.100", "127.0.0.101"]
PORT = 6379
BIG = 16 * 1024 * 1024  # RK_MAX_VALUE: the largest bulk a request may carry
GROWTH_MAX_KB = 200 * 1024


def bulk(b):
    return b"$%d\r\n%s\r\n" % (len(b), b)


def cmd(*args):
    return b"*%d\r\n" % len(args) + b"".join(bulk(a) for a in args)


class Replies:
    """Reads RESP replies (simple, error, integer, bulk) from a socket,
    keeping of a bulk only its length and first 16 bytes."""

    def __init__(self, sock):
        self.s = sock
        self.buf = bytearray()

    def _more(self, deadline, what):
        h.check(time.time() < deadline, "no %s in time" % what)
        self.s.settimeout(max(0.1, deadline - time.time()))
        try:
            d = self.s.recv(1 << 20)
        except socket.timeout:
            d = None
        if d is not None:
            h.check(d, "connection closed waiting for %s" % what)
            self.buf += d

    def _line(self, deadline, what):
        while True:
            i = self.buf.find(b"\r\n")
            if i >= 0:
                line = bytes(self.buf[:i])
                del self.buf[:i + 2]
                return line
            self._more(deadline, what)

    def next(self, deadline, what):
        line = self._line(deadline, what)
        if line[:1] != b"$" or int(line[1:]) < 0:
            return line, None
        vlen = int(line[1:])
        keep = min(vlen, 16)
        left = vlen + 2
        head = b""
        while left > 0:
            if not self.buf:
                self._more(deadline, what)
            take = min(left, len(self.buf))
            if len(head) < keep:
                head += bytes(self.buf[:min(take, keep - len(head))])
            left -= take
            if left == 0:
                h.check(self.buf[take - 2:take] == b"\r\n",
                        "bulk without CRLF in %s" % what)
            del self.buf[:take]
        return vlen, head


def processed(r):
    """total_commands_processed, less the INFO commands of this poller."""
    processed.polls += 1
    return r.info("stats")["total_commands_processed"] - processed.polls


processed.polls = 0


def wait_settled(r, base, most, timeout=60):
    """Wait until n1 stops parsing the pipeline (nothing new for 2 s, or
    `most` commands parsed); return how many it parsed."""
    deadline = time.time() + timeout
    last, since = processed(r) - base, time.time()
    while time.time() - since < 2.0 and last < most:
        h.check(time.time() < deadline, "n1 never settled")
        time.sleep(0.2)
        now = processed(r) - base
        if now != last:
            last, since = now, time.time()
    time.sleep(0.5)  # replies of the last ones parsed
    return processed(r) - base


def run_case(c, name, reqs, check_reply, parsed_max):
    """`reqs`: (header, shared tail) pairs pipelined behind a GET at ALL
    that waits for the stopped n2."""
    n1, n2 = c.nodes
    info = redis.Redis(host=n1.ip, port=PORT, socket_timeout=20)
    s = socket.create_connection((n1.ip, PORT), timeout=30)
    s.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 256 * 1024)
    rd = Replies(s)
    s.sendall(cmd(b"CONSISTENCY", b"ALL"))
    h.check(rd.next(time.time() + 30, "CONSISTENCY")[0] == b"+OK",
            "CONSISTENCY ALL")
    rss0 = h.rss_kb(n1.proc.pid)
    base = processed(info)
    os.kill(n2.proc.pid, signal.SIGSTOP)
    stopped = True
    sender_err = []

    def send():
        try:
            s.sendall(cmd(b"GET", b"slow"))
            for hdr, tail in reqs:
                s.sendall(hdr)
                s.sendall(tail)
        except OSError as e:
            sender_err.append(e)

    t = threading.Thread(target=send, daemon=True)
    try:
        t.start()
        parsed = wait_settled(info, base, 1 + len(reqs))
        grown = h.rss_kb(n1.proc.pid) - rss0
        print("%s: %d of %d requests parsed behind the slow GET, RSS +%d "
              "KiB" % (name, parsed, 1 + len(reqs), grown))
        h.check(parsed <= parsed_max,
                "%s: %d requests parsed while the first waits (want <= %d):"
                " the queued replies are not bounded" %
                (name, parsed, parsed_max))
        h.check(grown < GROWTH_MAX_KB, "%s: RSS grew by %d KiB behind the "
                "slow GET" % (name, grown))
        os.kill(n2.proc.pid, signal.SIGCONT)
        stopped = False
        deadline = time.time() + 120
        first = rd.next(deadline, "the slow GET's reply")
        h.check(first == (4, b"slow"), "slow GET: %r" % (first,))
        for i in range(len(reqs)):
            check_reply(i, rd.next(deadline, "reply %d" % i))
        t.join(30)
        h.check(not t.is_alive() and not sender_err,
                "sender: %r" % sender_err)
    finally:
        if stopped:
            os.kill(n2.proc.pid, signal.SIGCONT)
    s.close()
    info.close()


def main():
    # write_timeout_ms: the 16 MiB SET at ALL below must not time out on a
    # busy machine under ASan (it did once in 1.5 s: 2026-12-03)
    c = h.Cluster(IPS, seeds=IPS[:1], replication="dc1:2", resp_port=PORT,
                  read_timeout_ms=120000, write_timeout_ms=30000,
                  phi_convict_threshold=100, suspicion_timeout_ms=600000)
    c.nodes[0].extra["max_pipeline"] = 4
    h.small_asan_quarantine()
    c.start()
    c.wait_converged(timeout=60)
    r = redis.Redis(host=IPS[0], port=PORT, socket_timeout=30)
    r.execute_command("CONSISTENCY", "ALL")
    h.check(r.set("slow", "slow") is True, "SET slow")
    big = b"g" * BIG
    h.check(r.set("big", big) is True, "SET of a 16 MiB value")
    del big
    r.close()

    # (a) ECHO: answered on the spot, queued in completed slots
    tail = b"e" * (BIG - 16) + b"\r\n"
    necho = 40

    def echo_reply(i, rep):
        h.check(rep == (BIG, b"%016d" % i), "ECHO %d: %r" % (i, rep))

    run_case(c, "ECHO",
             [(b"*2\r\n$4\r\nECHO\r\n$%d\r\n%016d" % (BIG, i), tail)
              for i in range(necho)], echo_reply, 4)

    # (b) GET at ONE: answered by n1 alone, behind the GET at ALL
    nget = 32
    get = cmd(b"GET", b"big")

    def get_reply(i, rep):
        if i == 0:
            h.check(rep == (b"+OK", None), "CONSISTENCY ONE: %r" % (rep,))
        else:
            h.check(rep == (BIG, b"g" * 16), "GET %d: %r" % (i, rep))

    run_case(c, "GET", [(cmd(b"CONSISTENCY", b"ONE"), b"")] +
             [(get, b"") for _ in range(nget)], get_reply, 8)
    for n in c.nodes:
        h.check(n.stop() == 0, "%s unclean exit" % n.name)


if __name__ == "__main__":
    h.run(main)
