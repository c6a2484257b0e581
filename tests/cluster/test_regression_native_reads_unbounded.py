#!/usr/bin/env python3
"""Regression (native_mget_unbounded): a native-protocol MGET read all its
keys at once (up to 4,096), and the coordinator copies a value the node
holds within each read: one MGET naming a 16 MiB key 40 times made the
node hold 40 copies (and 40 more for the reply) before finding the reply
too big to send as one frame.

One node (RF 1, every read local), a 16 MiB value stored. An MGET naming
it 40 times must raise the node's peak resident memory by less than 200
MiB and answer TOO_LARGE (the reply cannot fit a 64 MiB frame); an MGET of
3 of them (48 MiB) and of 100 small keys, present and absent, must answer
every value, in order, and an MGET of 4 of them (64 MiB of values, over
the frame with its encoding) TOO_LARGE (regression mget_too_large_internal:
it answered INTERNAL). Then (regression: native_get_pipeline_unbounded)
40 pipelined GETs of it, sent at once by a client that reads nothing for
a while, must raise peak memory by less than 200 MiB, and every reply
must then arrive, in order.
"""
# ctest: alongside others
import time

import harness as h

IP = "127.0.0.163"
BIG = 16 * 1024 * 1024
N = 40
GROWTH_MAX_KB = 200 * 1024


def main():
    c = h.Cluster([IP], seeds=[IP], replication="dc1:1",
                  default_consistency="ONE")
    h.small_asan_quarantine()
    c.start()
    c.wait_converged(timeout=60)
    n = c.nodes[0]
    cl = n.client(timeout=120)
    # OVERLOADED (the clock's ceiling not saved yet on a slow disk) or
    # TIMEOUT on a loaded machine (make test 2026-12-06) say nothing of
    # what this test is about: asked again
    deadline = time.time() + 60
    while True:
        r = cl.call("PUT", key="big", value=b"v" * BIG)
        if r.err not in ("OVERLOADED", "TIMEOUT") or time.time() > deadline:
            break
        time.sleep(0.5)
    h.check(not r.err, "PUT of a 16 MiB value: %r" % r)
    small = ["s%d" % i for i in range(100)]
    res = cl.pipeline([("PUT", {"key": k, "value": "x" + k})
                       for k in small[::2]])
    h.check(not [x for x in res if x.err], "small PUTs")

    rss0 = h.rss_kb(n.proc.pid)
    h.peak_rss_reset(n.proc.pid)
    r = cl.call("MGET", keys=["big"] * N)
    grown = h.peak_rss_kb(n.proc.pid) - rss0
    print("MGET of %d x 16 MiB: %s, peak RSS +%d KiB" % (N, r.err, grown))
    h.check(r.err == "TOO_LARGE" and "fewer keys" in (r.msg or ""),
            "MGET of 640 MiB answered %r %r" % (r.err, r.msg))
    h.check(grown < GROWTH_MAX_KB, "peak RSS grew by %d KiB: the MGET's "
            "reads and copies are not bounded" % grown)

    r = cl.call("MGET", keys=["big"] * 3)
    vals = r.get(17) or []
    h.check(not r.err and len(vals) == 3 and
            all(v == b"v" * BIG for v in vals), "MGET of 3 x 16 MiB: %r" %
            ((r.err, r.msg, [len(v or b"") for v in vals]),))
    # regression mget_too_large_internal: 4 x 16 MiB is exactly 64 MiB of
    # values, and the values alone were checked against the frame limit:
    # the reply failed to encode and was answered INTERNAL
    r = cl.call("MGET", keys=["big"] * 4)
    h.check(r.err == "TOO_LARGE" and "fewer keys" in (r.msg or ""),
            "MGET of 4 x 16 MiB answered %r %r" % (r.err, r.msg))
    r = cl.call("MGET", keys=small)
    want = [("x" + k).encode() if i % 2 == 0 else None
            for i, k in enumerate(small)]
    h.check(not r.err and r.get(17) == want, "MGET of 100 small keys: %r" %
            ((r.err, (r.get(17) or [])[:4]),))
    cl.close()
    print("MGET of 3 x 16 MiB and of 100 small keys: every value, in order")

    # Regression (native_get_pipeline_unbounded): 40 pipelined GETs of the
    # 16 MiB value, sent at once by a client that reads nothing for now,
    # were all read (each copying the value) and answered into the output
    # before the connection stopped reading. On a node just restarted, so
    # that memory an earlier part freed does not hide this one's.
    h.check(n.stop() == 0, "unclean exit")
    n.start()
    c.wait_converged(timeout=60)
    cl = n.client(timeout=120)
    rss0 = h.rss_kb(n.proc.pid)
    h.peak_rss_reset(n.proc.pid)
    ids = []
    frames = b""
    for _ in range(N):
        rid, f = cl.encode("GET", key="big")
        ids.append(rid)
        frames += f
    cl.sock.sendall(frames)
    last, since = None, time.time()
    deadline = time.time() + 120
    while time.time() - since < 2.0:  # settled: no GET started for 2 s
        h.check(time.time() < deadline, "the node never settled")
        time.sleep(0.2)
        now = sum(v for k, v in n.metrics().items()
                  if k.startswith("ringkv_requests_total") and 'op="get"' in k)
        if now != last:
            last, since = now, time.time()
    grown = h.peak_rss_kb(n.proc.pid) - rss0
    print("%d pipelined GETs of 16 MiB: peak RSS +%d KiB" % (N, grown))
    h.check(grown < GROWTH_MAX_KB, "peak RSS grew by %d KiB: the GETs in "
            "flight are not bounded in bytes" % grown)
    for rid in ids:
        r = cl.read_frame()
        h.check(r.get(1) == rid and not r.err and r.value == b"v" * BIG,
                "GET %d: id %r err %r" % (rid, r.get(1), r.err))
    h.check(not cl.call("GET", key="s0").err, "GET after the pipeline")
    cl.close()
    print("%d pipelined GETs answered, in order" % N)
    h.check(n.stop() == 0, "unclean exit")


if __name__ == "__main__":
    h.run(main)
