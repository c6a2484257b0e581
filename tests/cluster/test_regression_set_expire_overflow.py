#!/usr/bin/env python3
"""Regression (set_expire_overflow): a SET whose relative expiry passes
INT64_MAX milliseconds once the clock is added is refused, and TTL / PTTL
never overflow.

SET k v PX 9223372036854775807 (or EX, SETEX, PSETEX near the limit) was
answered +OK: the parser only checks that the number is positive and that
EX's seconds fit in milliseconds, and the node stored an expiry of now +
2^63 - 1. PTTL k then computed `(int64_t)expiry - now`, a signed overflow:
UBSan aborted the node (sanitized builds, -fno-sanitize-recover), and a
release build answered a made-up number. Redis refuses such a SET with
-ERR invalid expire time in 'set' command, as docs/resp.md says ringkv
does for an "overflowing expiry".

On one node: each overflowing form must be refused with the command's
name and write nothing; the largest expiries that do fit (a relative one
a little under the limit, PXAT at the limit) must be taken, with PTTL and
TTL answering them; and the node must still serve and exit cleanly.
"""
# ctest: alongside others
import time

import harness as h

IP = "127.0.0.183"
PORT = 6379
I64 = 2**63 - 1


def main():
    c = h.Cluster([IP], seeds=[IP], replication="dc1:1", resp_port=PORT)
    c.start()
    c.wait_converged(timeout=60)
    r = h.resp_serving(IP, PORT)

    for args, name in ((("SET", "k", "v", "PX", I64), "set"),
                       (("SET", "k", "v", "EX", I64 // 1000), "set"),
                       (("SET", "k", "v", "NX", "PX", I64 - 1000), "set"),
                       (("PSETEX", "k", I64, "v"), "psetex"),
                       (("SETEX", "k", I64 // 1000, "v"), "setex")):
        rep = r.call(*args)
        h.check(rep == b"-ERR invalid expire time in '%s' command" %
                name.encode(), "%r: %r" % (args, rep))
        h.check(r.call("GET", "k") == b"$-1", "%r wrote the key" % (args,))

    # The largest that fit: relative 9e18 ms (now is ~1.8e12), and PXAT at
    # the limit.
    h.check(r.call("SET", "k", "v", "PX", 9 * 10**18) == b"+OK", "PX 9e18")
    pttl = int(r.call("PTTL", "k")[1:])
    h.check(9 * 10**18 - 60000 <= pttl <= 9 * 10**18, "PTTL %d" % pttl)
    ttl = int(r.call("TTL", "k")[1:])
    h.check(9 * 10**15 - 60 <= ttl <= 9 * 10**15, "TTL %d" % ttl)
    h.check(r.call("SET", "k", "v", "PXAT", I64) == b"+OK", "PXAT max")
    pttl = int(r.call("PTTL", "k")[1:])
    left = I64 - int(time.time() * 1000)
    h.check(left - 60000 <= pttl <= left + 60000, "PTTL %d, want ~%d" %
            (pttl, left))
    h.check(r.call("GET", "k") == b"v", "GET")
    h.check(r.call("PING") == b"+PONG", "PING after")
    r.s.close()
    print("overflowing expiries refused; the largest that fit answered")
    h.check(c.nodes[0].stop() == 0, "unclean exit")


if __name__ == "__main__":
    h.run(main)
