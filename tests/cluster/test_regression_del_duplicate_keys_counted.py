#!/usr/bin/env python3
"""Regression (del_duplicate_keys_counted): DEL counts a key named twice
once, as Redis does.

DEL answers the number of keys it removed. Redis deletes a key at its
first mention, so `DEL k k` answers 1. ringkv read every named key and
counted each read that found one: `DEL k k` answered 2, `UNLINK k k k` 3
(it also read and deleted the key once per mention). EXISTS is different:
Redis counts a key named twice twice there, and so does ringkv.

On one node: DEL / UNLINK naming existing and missing keys several times
must count each existing key once and delete it; a DEL of 100 keys named 3
times each answers 100; pipelined SET k, DEL k k, GET k still run in order;
EXISTS k k still answers 2.
"""
# ctest: alongside others

import harness as h

IP = "127.0.0.184"
PORT = 6379


def main():
    c = h.Cluster([IP], seeds=[IP], replication="dc1:1", resp_port=PORT)
    c.start()
    c.wait_converged(timeout=60)
    r = h.resp_serving(IP, PORT)

    h.check(r.call("SET", "a", "1") == b"+OK", "SET a")
    h.check(r.call("EXISTS", "a", "a") == b":2", "EXISTS a a counts twice")
    rep = r.call("DEL", "a", "a")
    h.check(rep == b":1", "DEL a a: %r, want :1" % rep)
    h.check(r.call("GET", "a") == b"$-1", "a after DEL")
    r.call("MSET", "a", "1", "b", "2")
    rep = r.call("UNLINK", "a", "b", "a", "b", "none", "none", "a")
    h.check(rep == b":2", "UNLINK a b a b none none a: %r, want :2" % rep)
    h.check(r.call("EXISTS", "a", "b") == b":0", "a, b after UNLINK")

    keys = [b"k%d" % i for i in range(100)]
    h.check(r.call("MSET", *[x for k in keys for x in (k, b"v")]) == b"+OK",
            "MSET 100")
    rep = r.call("DEL", *(keys * 3))
    h.check(rep == b":100", "DEL of 100 keys named 3 times: %r" % rep)
    h.check(r.call("EXISTS", *keys) == b":0", "the 100 after DEL")

    r.s.sendall(h.resp_cmd("SET", "p", "1") + h.resp_cmd("DEL", "p", "p") + h.resp_cmd("GET", "p"))
    for want in (b"+OK", b":1", b"$-1"):
        h.check(r.reply() == want, "pipelined SET, DEL p p, GET")
    r.s.close()
    print("DEL counts a key named twice once")
    h.check(c.nodes[0].stop() == 0, "unclean exit")


if __name__ == "__main__":
    h.run(main)
