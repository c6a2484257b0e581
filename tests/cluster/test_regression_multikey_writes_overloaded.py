#!/usr/bin/env python3
"""Regression (multikey_writes_overloaded): an MSET or DEL of more keys
than max_inflight, and an EXISTS or MGET of more keys than max_inflight
below 64, completes on an idle node.

The coordinator admits at most max_inflight requests, one per key. MSET
sent all its writes at once, and DEL all its deletes: with more keys than
max_inflight (10,000 by default; MSET takes up to 32,767 pairs, DEL 65,535
keys) the ones past it were refused, and the command answered
-OVERLOADED "retry later" on an idle node, every time. EXISTS / MGET /
DEL read 64 keys at a time, which fails the same way on a node whose
max_inflight is under 64. Now a command keeps at most a quarter of
max_inflight writes (64 reads) in flight, and never more than
max_inflight; MSET copies the pairs it has not sent yet.

On one node with max_inflight 32: MSET of 1,000 pairs of 2 KiB values,
then EXISTS, MGET (every value checked, those sent from the copies
included), DEL of the 1,000, EXISTS again, and a pipeline MSET / GET /
DEL / EXISTS whose replies must keep their order and meaning. Last
(max_inflight 1,000), a SET and an MSET pipelined behind an MSET of 1,000
pairs must win over it (its later windows went out after them and
overwrote them, before the MSET held back later writes of its keys).
"""
# ctest: alongside others

import harness as h

IP = "127.0.0.186"
PORT = 6379


def main():
    c = h.Cluster([IP], seeds=[IP], replication="dc1:1", resp_port=PORT,
                  max_inflight=32)
    c.start()
    c.wait_converged(timeout=60)
    r = h.resp_serving(IP, PORT)

    n = 1000
    keys = [b"k%04d" % i for i in range(n)]
    vals = [(b"%04d" % i) * 512 for i in range(n)]
    rep = r.call("MSET", *[x for kv in zip(keys, vals) for x in kv])
    h.check(rep == b"+OK", "MSET of %d pairs: %r" % (n, rep))
    rep = r.call("EXISTS", *keys)
    h.check(rep == b":%d" % n, "EXISTS of %d keys: %r" % (n, rep))
    rep = r.call("MGET", *keys)
    h.check(rep == vals, "MGET of %d keys: %r" % (n, rep if not
                                                   isinstance(rep, list) else
                                                   "wrong values"))
    rep = r.call("DEL", *keys)
    h.check(rep == b":%d" % n, "DEL of %d keys: %r" % (n, rep))
    h.check(r.call("EXISTS", *keys) == b":0", "EXISTS after DEL")

    r.s.sendall(h.resp_cmd("MSET", *[x for k in keys for x in (k, k)]) +
                h.resp_cmd("GET", keys[-1]) + h.resp_cmd("DEL", *keys) +
                h.resp_cmd("EXISTS", keys[0], keys[-1]))
    for want in (b"+OK", keys[-1], b":%d" % n, b":0"):
        rep = r.reply()
        h.check(rep == want, "pipeline: %r, want %r" % (rep, want))
    h.check(r.call("PING") == b"+PONG", "PING after")
    r.s.close()

    # Writes behind an MSET sent a window at a time wait for it: they
    # would get older timestamps than its last pairs and lose to them.
    # (max_inflight 1,000 here: 250 at a time, and room for those writes.)
    node = c.nodes[0]
    h.check(node.stop() == 0, "unclean exit")
    node.extra["max_inflight"] = 1000
    node.start()
    r = h.resp_serving(IP, PORT)
    r.s.sendall(h.resp_cmd("MSET", *[x for k in keys for x in (k, b"old")]) +
                h.resp_cmd("SET", keys[-1], "new") +
                h.resp_cmd("MSET", keys[-2], "new2", keys[0], "new3") +
                h.resp_cmd("MGET", keys[0], keys[-2], keys[-1]))
    for want in (b"+OK", b"+OK", b"+OK", [b"new3", b"new2", b"new"]):
        rep = r.reply()
        h.check(rep == want, "writes behind a big MSET: %r, want %r" %
                (rep, want))
    h.check(r.call("PING") == b"+PONG", "PING after")
    r.s.close()
    print("MSET, EXISTS, MGET, DEL of %d keys with max_inflight 32; writes "
          "behind a big MSET win" % n)
    h.check(c.nodes[0].stop() == 0, "unclean exit")


if __name__ == "__main__":
    h.run(main)
