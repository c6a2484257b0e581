#!/usr/bin/env python3
"""Bad input on every port: the node answers with clear errors and keeps
serving.

One node with a password (requirepass), RF 1. Checked: requests before
HELLO and a wrong password get AUTH; a frame that decodes badly gets
BAD_REQUEST with the connection kept; a key over 64 KiB and a value over
16 MiB get TOO_LARGE; a frame header over the protocol limit gets an error
and the connection is closed; random bytes and truncated frames on the
client port, the internode port (which wants a handshake) and the gossip
port change nothing; after all of it the node still serves correct reads
and writes.
"""
# ctest: alongside others
import os
import random
import socket
import struct
import time

import harness as h

PW = "s3cret"


def raw(ip, port, data, wait=1.0):
    """Send bytes, return what came back before close or timeout."""
    s = socket.create_connection((ip, port), timeout=5)
    s.settimeout(wait)
    got = b""
    try:
        s.sendall(data)
        while True:
            chunk = s.recv(65536)
            if not chunk:
                break
            got += chunk
    except (socket.timeout, ConnectionResetError, BrokenPipeError):
        pass
    finally:
        s.close()
    return got


def works(node):
    c = node.client(password=PW)
    k = "alive-%d" % random.randrange(1 << 30)
    r = c.call("PUT", key=k, value="yes", cl="ONE")
    h.check(not r.err, "PUT after abuse: %r" % r)
    r = c.call("GET", key=k, cl="ONE")
    h.check(r.value == b"yes", "GET after abuse: %r" % r)
    c.close()


def main():
    seed = int(os.environ.get("SEED", random.randrange(1 << 30)))
    print("seed %d" % seed)
    random.seed(seed)
    ip = "127.0.0.50"
    c = h.Cluster([ip], seeds=[ip], replication="dc1:1", requirepass=PW)
    c.start()
    node = c.nodes[0]
    # wait for the node to serve (STATUS needs the password)
    deadline = time.time() + 30
    while True:
        try:
            cl = node.client(password=PW)
            r = cl.call("STATUS")
            cl.close()
            if r.get(34) and r[34][0].get(5) == "UN":
                break
        except (OSError, ConnectionError, RuntimeError):
            pass
        h.check(time.time() < deadline, "node did not come up")
        time.sleep(0.3)

    # authentication
    cl = node.client()
    r = cl.call("GET", key="x")
    h.check(r.err == "AUTH", "GET before HELLO: %r" % r)
    r = cl.call("HELLO", password="wrong")
    h.check(r.err == "AUTH", "wrong password: %r" % r)
    r = cl.call("PUT", key="x", value="y")
    h.check(r.err == "AUTH", "PUT after wrong password: %r" % r)
    r = cl.call("HELLO", password=PW)
    h.check(not r.err, "right password: %r" % r)
    # limits
    r = cl.call("PUT", key=b"k" * (64 * 1024 + 1), value="v", cl="ONE")
    h.check(r.err == "TOO_LARGE", "oversized key: %r" % r)
    r = cl.call("PUT", key="big", value=b"v" * (16 * 1024 * 1024 + 1),
                cl="ONE")
    h.check(r.err == "TOO_LARGE", "oversized value: %r" % r)
    r = cl.call("GET", key="")
    h.check(r.err == "BAD_REQUEST", "empty key: %r" % r)
    # a well-framed body that is not a request: answered, connection kept
    body = h.mp_pack({1: 77, 2: 10, 4: 5})  # key of the wrong type
    cl.sock.sendall(struct.pack(">I", len(body)) + body)
    r = cl.read_frame()
    h.check(r.err == "BAD_REQUEST" and r.get(1) == 77,
            "bad body: %r" % r)
    body = b"\x93\x01\x02\x03"  # an array, not a map
    cl.sock.sendall(struct.pack(">I", len(body)) + body)
    r = cl.read_frame()
    h.check(r.err == "BAD_REQUEST", "array body: %r" % r)
    r = cl.call("JOIN")  # a member: refused with the reason
    h.check(r.err == "BAD_REQUEST" and "member of the ring" in (r.msg or ""),
            "JOIN on a member: %r" % r)
    for args in (["0-100"], ["1,"], [",1"], ["a,b"], ["1,2", "3,4"],
                 ["99999999999999999999,1"], ["-1,5"]):
        r = cl.call("REPAIR", args=args)
        h.check(r.err == "BAD_REQUEST" and "START,END" in (r.msg or ""),
                "REPAIR %r: %r" % (args, r))
    # the last node of its data centre may not leave
    r = cl.call("DECOMMISSION")
    h.check(r.err == "BAD_REQUEST" and "add a node first" in (r.msg or ""),
            "decommission of a lone node: %r" % r)
    for args in (None, [], ["a", "b"], [""], ["x" * 300]):
        r = cl.call("REMOVENODE", args=args)
        h.check(r.err == "BAD_REQUEST", "REMOVENODE %r: %r" % (args, r))
    r = cl.call("REMOVENODE", args=["nobody"])
    h.check(r.err == "BAD_REQUEST" and "no node nobody" in (r.msg or ""),
            "REMOVENODE nobody: %r" % r)
    r = cl.call("PING")
    h.check(not r.err, "PING on the same connection: %r" % r)
    cl.close()
    # a frame header over the limit: error, then closed
    got = raw(ip, 7380, struct.pack(">I", 0x7fffffff) + b"xx")
    h.check(b"TOO_LARGE" in got, "huge frame header answer: %r" % got[:80])
    got = raw(ip, 7380, struct.pack(">I", 0))
    h.check(b"PROTOCOL" in got or b"BAD_REQUEST" in got,
            "zero-length frame answer: %r" % got[:80])
    # random bytes and truncated frames, client and internode ports
    for i in range(30):
        junk = os.urandom(random.randrange(1, 3000))
        raw(ip, 7380, junk, wait=0.2)
        raw(ip, 7001, junk, wait=0.2)
        good = h.Client(ip).encode("PUT", key="t", value="v" * 100)[1]
        cut = random.randrange(1, len(good))
        raw(ip, 7380, good[:cut], wait=0.1)
        raw(ip, 7001, struct.pack(">I", 200) + junk[:100], wait=0.1)
    s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    for i in range(50):
        s.sendto(os.urandom(random.randrange(1, 1400)), (ip, 7000))
    s.close()
    works(node)
    m = node.metrics(password=PW)
    print("bad frames %d, auth failures %d, internode handshake failures %d"
          % (m.get("ringkv_client_bad_frames_total", 0),
             m.get("ringkv_client_auth_failures_total", 0),
             m.get("ringkv_internode_auth_failures_total", 0)))
    h.check(m.get("ringkv_client_auth_failures_total", 0) >= 1,
            "auth failure not counted")
    h.check(node.alive(), "node died")
    h.check(node.stop() == 0, "unclean exit")


h.run(main)
