#!/usr/bin/env python3
"""A client port that is already taken: ringkvd exits at start with a clear
error naming the config key, for the native port and for the Redis port
(both servers share one listen helper), and starts normally once the port
is free.
"""
# ctest: alongside others
import socket

import harness as h

IP = "127.0.0.84"


def start_with_busy(key, port):
    busy = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    busy.bind((IP, port))
    busy.listen(1)
    try:
        c = h.Cluster([IP], seeds=[IP], replication="dc1:1", resp_port=6379)
        n = c.nodes[0]
        n.start()
        rc = n.proc.wait(timeout=60)
        with open(n.log_path + ".stderr", errors="replace") as f:
            err = f.read()
        h.check(rc != 0, "%s busy: ringkvd exited %d" % (key, rc))
        want = "%s: cannot listen on %s:%d" % (key, IP, port)
        h.check(want in err, "%s busy: stderr %r lacks %r" % (key, err, want))
        print("%s busy: %s" % (key, err.strip().splitlines()[-1]))
    finally:
        busy.close()


def main():
    start_with_busy("client_port", 7380)
    start_with_busy("resp_port", 6379)
    c = h.Cluster([IP], seeds=[IP], replication="dc1:1", resp_port=6379)
    n = c.nodes[0]
    n.start()
    c.wait_converged(timeout=60)
    s = socket.create_connection((IP, 6379), timeout=10)
    s.sendall(b"PING\r\n")
    h.check(s.recv(64) == b"+PONG\r\n", "PING on the Redis port")
    s.close()
    h.check(n.stop() == 0, "unclean exit")


if __name__ == "__main__":
    h.run(main)
