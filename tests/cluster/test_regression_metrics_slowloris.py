#!/usr/bin/env python3
"""Regression metrics_slowloris: slow clients kept every scrape out.

/metrics was served by libmicrohttpd with 32 connections and a 10 s idle
timeout: 32 connections each sending a byte every 2 s held every place,
and no scrape was answered while they did. The metrics port is now served
on the node's loop: a request head must arrive whole within 5 s of its
first byte, and past 32 connections the oldest one whose request has not
arrived is closed to admit the new one, so a scraper, whose request comes
at once, always gets in.

One node (127.0.1.230, RF 1, metrics_port 9180). 64 connections to its
metrics port each trickle a request head a byte every 1-2 s, connecting
again 0.2 s after the node closes one (as a slowloris does), from 2 s
before the first scrape to the last (about 15 s). Proves: meanwhile 10
scrapes of /metrics (urllib, 5 s timeout) are all
answered 200 with the metrics text, the node counts the connections it
closed for them (ringkv_metrics_connections_closed_total), and it keeps
serving PUT and GET.
"""
# ctest: alongside others
import random
import socket
import threading
import time
import urllib.request

import harness as h

IP = "127.0.1.230"
MPORT = 9180
URL = "http://%s:%d/metrics" % (IP, MPORT)
SLOW = 64
HEAD = b"GET /metrics HTTP/1.1\r\nHost: x\r\nX-Slow: " + b"a" * 200


class Slowloris(threading.Thread):
    """SLOW connections, each sending the next byte of HEAD every 1-2 s
    and connecting again soon after it is closed, until stop is set."""

    def __init__(self):
        super().__init__(daemon=True)
        self.conns = [None] * SLOW  # [socket, bytes sent, next send time]
        self.connects = 0
        self.closed_by_node = 0
        self.stop = threading.Event()

    def connect(self, i):
        try:
            s = socket.create_connection((IP, MPORT), timeout=2)
            s.setblocking(False)
            self.connects += 1
            self.conns[i] = [s, 0, time.time() + random.uniform(0, 1)]
        except OSError:
            self.conns[i] = [None, 0, time.time() + 0.2]

    def step(self, i, now):
        s, sent, at = self.conns[i]
        if now < at:
            return
        if s is None:
            self.connect(i)
            return
        closed = False
        try:
            if s.recv(1) == b"":
                closed = True
        except BlockingIOError:
            pass
        except OSError:
            closed = True
        if not closed:
            try:
                s.send(HEAD[sent % len(HEAD):sent % len(HEAD) + 1])
            except OSError:
                closed = True
        if closed:
            self.closed_by_node += 1
            s.close()
            self.conns[i] = [None, 0, now + 0.2]
        else:
            self.conns[i] = [s, sent + 1, now + random.uniform(1, 2)]

    def run(self):
        for i in range(SLOW):
            self.connect(i)
        while not self.stop.is_set():
            now = time.time()
            for i in range(SLOW):
                self.step(i, now)
            time.sleep(0.05)
        for c in self.conns:
            if c[0] is not None:
                c[0].close()


def scrape():
    """(status, body) of GET /metrics, or (None, the error)."""
    try:
        with urllib.request.urlopen(URL, timeout=5) as r:
            return r.status, r.read().decode()
    except Exception as e:  # noqa: BLE001 - any failure is the finding
        return None, repr(e)


def works(node):
    c = node.client()
    k = "alive-%d" % random.randrange(1 << 30)
    r = c.call("PUT", key=k, value="yes", cl="ONE")
    h.check(not r.err, "PUT under the slowloris: %r" % r)
    r = c.call("GET", key=k, cl="ONE")
    h.check(r.value == b"yes", "GET under the slowloris: %r" % r)
    c.close()


def closed_count(text, why):
    key = 'ringkv_metrics_connections_closed_total{why="%s"} ' % why
    for line in text.splitlines():
        if line.startswith(key):
            return float(line[len(key):])
    return None


def main():
    c = h.Cluster([IP], seeds=[IP], replication="dc1:1", metrics_port=MPORT)
    c.start()
    n = c.nodes[0]
    deadline = time.time() + 30
    while True:
        status, body = scrape()
        if status == 200 and "ringkv_requests_total" in body:
            break
        h.check(time.time() < deadline, "/metrics never answered: %s" % body)
        time.sleep(0.3)
    while True:  # the node has joined its ring
        try:
            cl = n.client()
            r = cl.call("PUT", key="up", value="yes", cl="ONE")
            cl.close()
            if not r.err:
                break
        except (OSError, ConnectionError, RuntimeError):
            pass
        h.check(time.time() < deadline, "the node did not come up")
        time.sleep(0.3)

    slow = Slowloris()
    slow.start()
    time.sleep(2)  # every slow connection has sent a byte or two
    results = []
    for i in range(10):
        t0 = time.time()
        status, body = scrape()
        ok = status == 200 and "ringkv_requests_total" in body
        results.append(ok)
        print("scrape %d: %s in %.2fs" % (
            i, status if ok else "failed: %s" % body[:200],
            time.time() - t0))
        if i % 3 == 0:
            works(n)
        time.sleep(1.2)
    slow.stop.set()
    slow.join()
    print("slowloris: %d connects, %d closed by the node" %
          (slow.connects, slow.closed_by_node))
    h.check(all(results), "scrapes failed under the slowloris: %d of 10" %
            results.count(False))
    h.check(slow.closed_by_node > 0, "the node never closed a slow connection")
    status, body = scrape()
    h.check(status == 200, "/metrics after the slowloris: %s" % body[:200])
    evicted = closed_count(body, "evicted")
    timeouts = closed_count(body, "request_timeout")
    print("closed: evicted %r, request_timeout %r" % (evicted, timeouts))
    h.check(evicted is not None and timeouts is not None and
            evicted + timeouts > 0,
            "slow connections closed were not counted: %r %r" %
            (evicted, timeouts))
    works(n)


if __name__ == "__main__":
    h.run(main)
