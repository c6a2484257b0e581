#!/usr/bin/env python3
"""Regression resp_value_too_large_closes: a RESP value of 16 MiB + 1
closed the connection, where docs/resp.md promises -TOO_LARGE.

The parser refused any bulk over 16 MiB as a protocol error. Now a bulk
over 16 MiB (up to 512 MiB) is read and dropped as it arrives, never held
in memory, and its request is answered -TOO_LARGE on a connection that
goes on; past 512 MiB the length is still a protocol error.

One node (127.0.1.172, RF 1, RESP on 6379). Proves: a SET of 16 MiB + 1
answers -TOO_LARGE, a PING after it on the same connection +PONG, a SET
of 16 MiB exactly +OK and reads back; the node's resident memory grows by
less than 16 MiB while the oversized value goes through; a bulk length of
512 MiB + 1 still gets "-ERR Protocol error: invalid bulk length".
"""
# ctest: alongside others
import socket

import harness as h

IP = "127.0.1.172"
MIB16 = 16 * 1024 * 1024


def main():
    # a 16 MiB write takes seconds under ASan: time enough for it
    c = h.Cluster([IP], seeds=[IP], replication="dc1:1", resp_port=6379,
                  default_consistency="ONE", write_timeout_ms=30000,
                  read_timeout_ms=30000)
    c.start()
    c.wait_converged(timeout=60)
    n = c.nodes[0]
    h.resp_serving(IP, 6379)
    r = h.RespConn(IP, 6379, timeout=60)
    rss0 = h.rss_kb(n.proc.pid)
    h.peak_rss_reset(n.proc.pid)
    head = b"*3\r\n$3\r\nSET\r\n$1\r\nk\r\n$%d\r\n" % (MIB16 + 1)
    r.s.sendall(head)
    chunk = b"v" * (1 << 20)
    for _ in range(16):
        r.s.sendall(chunk)
    r.s.sendall(b"v\r\n")
    rep = r.reply()
    grown = h.peak_rss_kb(n.proc.pid) - rss0
    print("SET of 16 MiB + 1: %r, peak RSS +%d KiB" % (rep, grown))
    h.check(rep.startswith(b"-TOO_LARGE"), "SET of 16 MiB + 1: %r" % rep)
    h.check(grown < 16 * 1024, "the node kept the dropped value: +%d KiB"
            % grown)
    rep = r.call("PING")
    h.check(rep == b"+PONG", "PING after it: %r" % rep)
    rep = r.call("SET", "k", b"w" * MIB16)
    h.check(rep == b"+OK", "SET of 16 MiB: %r" % rep)
    rep = r.call("GET", "k")
    h.check(rep == b"w" * MIB16, "GET of the 16 MiB value: %d bytes" %
            len(rep))
    r.s.close()

    r = h.RespConn(IP, 6379)
    r.s.sendall(b"*3\r\n$3\r\nSET\r\n$1\r\nk\r\n$%d\r\n" % ((512 << 20) + 1))
    rep = r.reply()
    h.check(rep == b"-ERR Protocol error: invalid bulk length",
            "a bulk of 512 MiB + 1: %r" % rep)
    r.s.settimeout(10)
    try:
        closed = r.s.recv(1) == b""
    except (socket.timeout, ConnectionResetError):
        closed = False
    h.check(closed, "the connection stayed open after a protocol error")
    print("16 MiB + 1: -TOO_LARGE and the connection goes on; 512 MiB + 1: "
          "protocol error")


if __name__ == "__main__":
    h.run(main)
