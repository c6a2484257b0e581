#!/usr/bin/env python3
"""conns.py - a node's memory under many clients each holding part of a
frame (issue 26's figure: 5,000 connections each trickling a maximal frame
keep the node's RSS under its input budget + 100 MB, and it keeps serving).

    tools/bench/conns.py [--conns 5000] [--budget-mb 64] [--seconds 20]
                         [--build build]

One ringkvd (127.0.0.249, RF 1, a password) with max_input_buffer_mb
--budget-mb and a client frame timeout longer than the run. --conns
native connections authenticate (HELLO) and announce a frame of 64 MiB
(the native frame limit, so the node may buffer all of it); then, for
--seconds, each sends 64 KiB more of it whenever its socket takes it. Meanwhile a separate
client PUTs and GETs once a second and the time of each is printed: the
node must keep serving. Printed at the end: the peak resident memory over
the node's own before the connections (VmHWM, reset when they start), the
input bytes the node says it holds (ringkv_client_input_buffer_bytes), the
budget waits, and the growth minus the budget against the 100 MB of the
figure. Run it from the plain build (an ASan build measures ASan's shadow
memory and quarantine too).
"""
import argparse
import os
import resource
import selectors
import socket
import struct
import sys
import time

ROOT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..")
sys.path.insert(0, os.path.join(ROOT, "tests", "cluster"))

IP = "127.0.0.249"
PW = "bench-pw"
MiB = 1024 * 1024
FRAME = 64 * MiB  # the native frame limit (WIRE_CFRAME_MAX)
PIECE = 64 * 1024


def served(n):
    """Seconds one authenticated PUT and GET take through a new client."""
    t0 = time.time()
    cl = n.client(password=PW, timeout=30)
    try:
        r = cl.call("PUT", key="probe", value="v")
        if r.err:
            raise RuntimeError("PUT refused: %r" % r)
        r = cl.call("GET", key="probe")
        if r.err or r.value != b"v":
            raise RuntimeError("GET failed: %r" % r)
    finally:
        cl.close()
    return time.time() - t0


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--conns", type=int, default=5000)
    ap.add_argument("--budget-mb", type=int, default=64)
    ap.add_argument("--seconds", type=int, default=20)
    ap.add_argument("--build", default="build")
    o = ap.parse_args()
    os.environ["RINGKV_BIN_DIR"] = os.path.join(ROOT, o.build, "bin")
    import harness as h

    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    want = o.conns + 256
    if hard != resource.RLIM_INFINITY and hard < want:
        raise SystemExit("descriptor limit %d < %d: raise it (ulimit -Hn)" %
                         (hard, want))
    resource.setrlimit(resource.RLIMIT_NOFILE, (want, hard))

    c = h.Cluster([IP], seeds=[IP], replication="dc1:1",
                  default_consistency="ONE", requirepass=PW,
                  max_input_buffer_mb=o.budget_mb,
                  client_frame_timeout_s=o.seconds + 600,
                  max_clients=o.conns + 100)
    c.start()
    n = c.nodes[0]
    h.wait_served(n, served)
    pid = n.proc.pid
    rss0 = h.rss_kb(pid)
    h.peak_rss_reset(pid)

    sel = selectors.DefaultSelector()
    held, sent = [], 0
    t0 = time.time()
    head = struct.pack(">I", FRAME)
    piece = b"t" * PIECE
    for i in range(o.conns):
        cl = n.client(password=PW, timeout=30)
        cl.sock.setblocking(False)
        try:
            sent += cl.sock.send(head + piece)
        except BlockingIOError:
            pass
        held.append(cl)
        sel.register(cl.sock, selectors.EVENT_WRITE, cl)
    opened = time.time() - t0
    print("%d connections authenticated and holding part of a %d MiB frame "
          "in %.1f s" % (o.conns, FRAME // MiB, opened))

    probes = []
    end = time.time() + o.seconds
    next_probe = time.time()
    while time.time() < end:
        for key, _ in sel.select(timeout=0.2):
            try:
                sent += key.fileobj.send(piece)
            except (BlockingIOError, ConnectionError):
                pass
        if time.time() >= next_probe:
            probes.append(served(n))
            next_probe = time.time() + 1
    m = n.metrics(password=PW)
    grown_kb = h.peak_rss_kb(pid) - rss0
    held_b = m.get("ringkv_client_input_buffer_bytes", 0)
    waits = m.get("ringkv_client_input_budget_waits_total", 0)
    for cl in held:
        cl.close()
    over_mb = grown_kb / 1024 - o.budget_mb
    print("sent %d MiB on %d connections in %d s" %
          (sent // MiB, o.conns, o.seconds))
    print("node RSS before: %d MiB; peak growth: %.0f MiB; budget %d MiB; "
          "growth - budget: %.0f MiB (figure: under 100 MB = %.0f MiB)" %
          (rss0 // 1024, grown_kb / 1024, o.budget_mb, over_mb,
           100e6 / MiB))
    print("input held by the node at the end: %.1f MiB; budget waits: %d" %
          (held_b / MiB, waits))
    probes.sort()
    print("served meanwhile: %d PUT+GET probes on new connections, median "
          "%.3f s, slowest %.3f s" %
          (len(probes), probes[len(probes) // 2], probes[-1]))


if __name__ == "__main__":
    main()
