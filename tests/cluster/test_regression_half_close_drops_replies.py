#!/usr/bin/env python3
"""Regression (half_close_drops_replies): a RESP client that shuts down its
sending side once it has sent its requests still gets every reply.

`printf 'GET k\\r\\n' | nc -N host 6379`, or any client that calls
shutdown(SHUT_WR) after its last request, sends EOF right behind its
requests. The node closed the connection as soon as it read that EOF, so
every request still in flight (a read or write waiting for a replica, or a
command held behind one) was never answered: the GET above got nothing at
all. Redis answers them. Now EOF only ends the input: what arrived before
it is run and answered in order, then the connection closes.

On a 2-node RF-2 cluster (QUORUM needs the other node, so no data command
is answered within the read that brought it) a client sends, then
shutdown(SHUT_WR), then reads to EOF: (a) one inline GET; (b) 300 pipelined
commands of every kind, with GETs held behind SETs of their key; (c) two
commands and the start of a third, which must not run; (d) 20 GETs of a
1 MiB value, read slowly, so the EOF is read only after the output bound
let the node read again. Each must get all its replies, in order, then
EOF. Last the node must still serve, and exit cleanly.
"""
# ctest: alongside others
import socket
import time

import harness as h

IPS = ["127.0.0.181", "127.0.0.182"]
PORT = 6379


def cmd(*args):
    args = [a if isinstance(a, bytes) else str(a).encode() for a in args]
    return b"*%d\r\n" % len(args) + b"".join(
        b"$%d\r\n%s\r\n" % (len(a), a) for a in args)


def half_closed(data, slow=False):
    """Send data, shut the sending side down, read everything up to EOF."""
    s = socket.create_connection((IPS[0], PORT), timeout=30)
    if slow:
        s.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 64 * 1024)
    s.sendall(data)
    s.shutdown(socket.SHUT_WR)
    out = bytearray()
    deadline = time.time() + 60
    while True:
        h.check(time.time() < deadline, "no EOF after %d bytes" % len(out))
        if slow:
            time.sleep(0.01)
        try:
            d = s.recv(64 * 1024)
        except socket.timeout:
            h.check(False, "no EOF after %d bytes: %r" % (len(out),
                                                         bytes(out[-200:])))
        if not d:
            break
        out += d
    s.close()
    return bytes(out)


def bulk(v):
    return b"$%d\r\n%s\r\n" % (len(v), v)


def main():
    # (d) reads 20 MiB through the other replica: with the harness's 1.5 s
    # read_timeout_ms, a loaded machine's ASan nodes answered 15 of 20
    # TIMEOUT (fresh-clone make test, 2026-12-07). Nothing here tests
    # timeouts.
    c = h.Cluster(IPS, seeds=IPS[:1], replication="dc1:2", resp_port=PORT,
                  read_timeout_ms=10000)
    h.small_asan_quarantine()
    c.start()
    c.wait_converged(timeout=60)
    deadline = time.time() + 30
    while True:
        setup = socket.create_connection((IPS[0], PORT), timeout=30)
        setup.sendall(cmd("SET", "k", "v"))
        rep = setup.recv(100)
        if rep == b"+OK\r\n":
            break
        h.check(time.time() < deadline, "SET k: %r" % rep)
        setup.close()
        time.sleep(0.2)
    big = b"b" * (1 << 20)
    setup.sendall(cmd("SET", "big", big))
    h.check(setup.recv(100) == b"+OK\r\n", "SET big")

    got = half_closed(b"GET k\r\n")
    h.check(got == bulk(b"v"), "(a) inline GET then EOF: %r" % got)

    reqs, want = [], []
    for i in range(50):
        k = b"h%d" % (i % 7)
        v = b"v%d" % i
        reqs += [cmd("SET", k, v), cmd("GET", k), cmd("MGET", k, "k"),
                 cmd("PING"), cmd("ECHO", v), cmd("EXISTS", k, "none")]
        want += [b"+OK\r\n", bulk(v), b"*2\r\n" + bulk(v) + bulk(b"v"),
                 b"+PONG\r\n", bulk(v), b":1\r\n"]
    got = half_closed(b"".join(reqs))
    h.check(got == b"".join(want), "(b) 300 commands then EOF: %d of %d "
            "bytes, first difference at %d" % (
                len(got), len(b"".join(want)),
                next((i for i, (x, y) in enumerate(zip(got, b"".join(want)))
                      if x != y), min(len(got), len(b"".join(want))))))

    got = half_closed(cmd("SET", "p", "1") + cmd("GET", "p") +
                      cmd("SET", "p", "2")[:-3])
    h.check(got == b"+OK\r\n" + bulk(b"1"), "(c) partial request: %r" % got)
    setup.sendall(cmd("GET", "p"))
    h.check(setup.recv(100) == bulk(b"1"), "(c) the partial SET must not run")

    n = 20
    got = half_closed(cmd("GET", "big") * n, slow=True)
    # every reply, in order: the value, or a TIMEOUT where the other
    # replica's 1 MiB answer came too late (ASan on a busy machine, CI
    # 2026-12-06: 5 of 20), or UNAVAILABLE once n1 judged the slow n2
    # silent; a reply missing or cut fails
    rest, values, timeouts = got, 0, 0
    for i in range(n):
        if rest.startswith(bulk(big)):
            rest, values = rest[len(bulk(big)):], values + 1
        elif (rest.startswith(b"-TIMEOUT ") or
              rest.startswith(b"-UNAVAILABLE ")) and b"\r\n" in rest:
            rest, timeouts = rest[rest.index(b"\r\n") + 2:], timeouts + 1
        else:
            h.check(False, "(d) %d GETs of 1 MiB then EOF: reply %d of %d "
                    "bytes is %r..." % (n, i, len(got), rest[:80]))
    h.check(rest == b"" and values >= n // 2,
            "(d) %d GETs of 1 MiB then EOF: %d values, %d TIMEOUT, %d bytes "
            "more" % (n, values, timeouts, len(rest)))

    setup.sendall(cmd("PING"))
    h.check(setup.recv(100) == b"+PONG\r\n", "PING after")
    setup.close()
    print("half-closed clients: every reply, then EOF")
    for n in c.nodes:
        h.check(n.stop() == 0, "%s unclean exit" % n.name)


if __name__ == "__main__":
    h.run(main)
