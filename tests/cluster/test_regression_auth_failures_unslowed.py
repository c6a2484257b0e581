#!/usr/bin/env python3
"""Regression auth_failures_unslowed: wrong passwords were answered at
full speed.

20,000 failed AUTHs were answered as fast as the loop ran (only their log
lines were limited), so a client could try passwords at thousands a
second. Now the answer to a failed AUTH (RESP) or HELLO (native) waits,
10 ms for the first failure from an address, doubling with each failure
in a row up to auth_fail_delay_max_ms (5 s), the answers to one address
going out one after the other (more connections buy no more tries), on a
timer: the loop serves everyone else meanwhile.

One node (127.0.2.64, RF 1, a password, RESP on). Proves, with each
client bound to an address of its own:
 - 8 wrong AUTHs pipelined on one RESP connection from 127.0.2.65 are all
   answered WRONGPASS, the last no sooner than the sum of the first 8
   delays (10 + 20 + ... + 1280 ms = 2.55 s);
 - while those wait, a right AUTH from 127.0.2.68 is answered (and a SET
   and GET served) before 127.0.2.65's last answer;
 - 6 wrong HELLOs pipelined on one native connection from 127.0.2.66,
   and 6 sent at once on 6 connections from 127.0.2.67, are each
   answered AUTH no sooner than 10 + ... + 320 ms = 630 ms after sending;
 - ringkv_client_auth_failures_total counts all 20, resp.auth_fail and
   client.auth_fail lines give the delay (delay_ms=);
 - 127.0.2.65 then authenticates with the right password and is served.
Checked that it fails without the delay (the 8 answers came in 1 ms).
"""
# ctest: alongside others
import socket
import time

import harness as h

IP = "127.0.2.64"
PW = "unslowed-pw"
PORT = 6379


def sock_from(src, port):
    s = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    s.settimeout(30)
    s.bind((src, 0))
    s.connect((IP, port))
    return s


def resp_from(src):
    r = h.RespConn.__new__(h.RespConn)
    r.s = sock_from(src, PORT)
    r.buf = b""
    return r


def replies(r, n):
    return [r.reply() for _ in range(n)]


def native_from(src):
    c = h.Client.__new__(h.Client)
    c.sock = sock_from(src, 7380)
    c.buf = b""
    c.next_id = 1
    return c


def min_wait(k):
    """The least the k-th answer to failures in a row waits, in s."""
    return sum(min(10 << i, 5000) for i in range(k)) / 1000.0


def ready(n):
    """The right password, and a ring to write to."""
    r = resp_from("127.0.2.69")
    r.s.sendall(h.resp_cmd("AUTH", PW) + h.resp_cmd("SET", "ready", "1"))
    rep = replies(r, 2)
    r.s.close()
    h.check(rep == [b"+OK", b"+OK"], "AUTH and SET: %r" % rep)


def main():
    c = h.Cluster([IP], seeds=[IP], replication="dc1:1", resp_port=PORT,
                  requirepass=PW)
    c.start()
    n = c.nodes[0]
    h.wait_served(n, ready)
    ok = resp_from("127.0.2.68")  # connected before the burst

    # 8 wrong AUTHs pipelined from one address
    bad = resp_from("127.0.2.65")
    t0 = time.monotonic()
    bad.s.sendall(h.resp_cmd("AUTH", "wrong") * 8)
    # meanwhile another address authenticates and is served
    ok.s.sendall(h.resp_cmd("AUTH", PW) + h.resp_cmd("SET", "k", "v") +
                 h.resp_cmd("GET", "k"))
    rep = replies(ok, 3)
    t_ok = time.monotonic() - t0
    h.check(rep == [b"+OK", b"+OK", b"v"], "the other address: %r" % rep)
    rep = replies(bad, 8)
    t_bad = time.monotonic() - t0
    print("8 wrong AUTHs answered in %.3f s (designed at least %.3f s); "
          "127.0.2.68 authenticated and served after %.3f s" %
          (t_bad, min_wait(8), t_ok))
    h.check(all(r.startswith(b"-WRONGPASS") for r in rep),
            "wrong passwords: %r" % rep)
    h.check(t_bad >= min_wait(8),
            "8 wrong AUTHs answered in %.3f s, before their delays" % t_bad)
    h.check(t_ok < t_bad, "the other address waited for the failures")

    # native: 6 pipelined on one connection, and 6 on 6 connections
    one = native_from("127.0.2.66")
    t0 = time.monotonic()
    res = one.pipeline([("HELLO", {"password": "wrong"})] * 6)
    t_one = time.monotonic() - t0
    h.check(all(r.err == "AUTH" for r in res), "HELLO: %r" % res)
    many = [native_from("127.0.2.67") for _ in range(6)]
    t0 = time.monotonic()
    for cl in many:
        cl.sock.sendall(cl.encode("HELLO", password="wrong")[1])
    res = [cl.read_frame() for cl in many]
    t_many = time.monotonic() - t0
    h.check(all(r.err == "AUTH" for r in res), "HELLO: %r" % res)
    print("6 wrong HELLOs on one connection answered in %.3f s, on 6 "
          "connections in %.3f s (designed at least %.3f s)" %
          (t_one, t_many, min_wait(6)))
    h.check(t_one >= min_wait(6), "one connection: %.3f s" % t_one)
    h.check(t_many >= min_wait(6), "6 connections: %.3f s" % t_many)
    for cl in many + [one]:
        cl.close()

    m = n.metrics(password=PW)
    fails = m.get("ringkv_client_auth_failures_total", 0)
    h.check(fails == 20, "auth failures counted: %r" % fails)
    log = n.log()
    for ev in ("resp.auth_fail", "client.auth_fail"):
        h.check(any("event=%s " % ev in ln and " delay_ms=" in ln
                    for ln in log.splitlines()), "no %s line" % ev)

    # the address that failed authenticates and is served
    bad.s.sendall(h.resp_cmd("AUTH", PW) + h.resp_cmd("GET", "k"))
    rep = replies(bad, 2)
    h.check(rep == [b"+OK", b"v"], "after the right password: %r" % rep)
    bad.s.close()
    ok.s.close()
    h.check(n.stop() == 0, "unclean exit")


if __name__ == "__main__":
    h.run(main)
