#!/usr/bin/env python3
"""The Redis protocol, /metrics and admission control on a 3-node cluster.

Proves: an ordinary Redis client library (python3-redis) works unmodified
against any node (SET/GET/MSET/MGET/EXISTS/DEL, EX expiry, NX/XX,
pipelines, CONSISTENCY); typed errors arrive as RESP errors (-UNAVAILABLE
at ALL with a node down, while QUORUM keeps working); a protocol error
closes only that connection; redis-cli (also --pipe, past max_pipeline)
and redis-benchmark run with zero errors; SETEX/PSETEX/SETNX/UNLINK work
and a MULTI transaction writes nothing; /metrics serves Prometheus text
with latency histograms; a native connection past max_pipeline gets
OVERLOADED at once for the excess and the node serves normally
afterwards.
"""
import shutil
import socket
import subprocess
import time
import sys
import urllib.request

try:
    import redis
except ImportError:  # python3-redis lives with Debian's python3
    sys.path.append("/usr/lib/python3/dist-packages")
    import redis

import harness as h


def main():
    ips = ["127.0.0.51", "127.0.0.52", "127.0.0.53"]
    # read_timeout_ms bounds a whole MGET (one deadline for all its keys):
    # the 60 MiB MGET below, four 15 MiB values read one after another
    # (the reply meter's byte bound), took more than the harness's 1.5 s
    # under ASan on a busy 2-core machine; with 10 s an MGET of the big
    # value still failed TIMEOUT once (fresh-clone make test on a slow
    # machine, 2026-12-07). Nothing here tests timeouts.
    c = h.Cluster(ips, seeds=ips[:1], replication="dc1:3", resp_port=6379,
                  metrics_port=9180, max_pipeline=64, read_timeout_ms=20000,
                  write_timeout_ms=10000)
    c.start()
    c.wait_converged(timeout=60)
    n1, n2, n3 = c.nodes
    r1 = redis.Redis(host=ips[0], port=6379, socket_timeout=10)
    r2 = redis.Redis(host=ips[1], port=6379, socket_timeout=10)
    h.check(r1.ping(), "PING")
    h.check(r1.set("a", "1") is True, "SET")
    h.check(r2.get("a") == b"1", "GET via another node")
    h.check(r1.set("a", "2", nx=True) is None, "SET NX on an existing key")
    h.check(r1.set("b", "2", xx=True) is None, "SET XX on a missing key")
    h.check(r1.set("b", "3", nx=True) is True, "SET NX on a missing key")
    h.check(r1.mset({"m1": "x", "m2": "y"}) is True, "MSET")
    h.check(r2.mget(["m1", "nope", "m2"]) == [b"x", None, b"y"], "MGET")
    h.check(r2.exists("m1", "m2", "nope") == 2, "EXISTS")
    h.check(r1.delete("m1", "nope") == 1, "DEL count")
    h.check(r2.get("m1") is None, "GET after DEL")
    h.check(r1.set("ttl", "v", ex=1) is True, "SET EX")
    h.check(r2.get("ttl") == b"v", "GET before expiry")
    time.sleep(1.5)
    h.check(r2.get("ttl") is None, "GET after expiry")
    # the older spellings client libraries send
    h.check(r1.setex("sx", 1, "v") is True, "SETEX")
    h.check(r1.psetex("psx", 60000, "w") is True, "PSETEX")
    h.check(r1.setnx("snx", "1") is True, "SETNX on a missing key")
    h.check(r1.setnx("snx", "2") is False, "SETNX on an existing key")
    h.check(r2.mget(["sx", "psx", "snx"]) == [b"v", b"w", b"1"],
            "values of SETEX / PSETEX / SETNX")
    h.check(r1.unlink("snx", "nope") == 1, "UNLINK count")
    time.sleep(1.5)
    h.check(r2.get("sx") is None and r2.get("psx") == b"w",
            "SETEX expired, PSETEX not yet")
    ttl, pttl = r2.ttl("psx"), r2.pttl("psx")
    h.check(55 <= ttl <= 60 and 55000 <= pttl <= 60000,
            "TTL / PTTL of a 60 s value: %r / %r" % (ttl, pttl))
    h.check(r1.ttl("a") == -1 and r1.ttl("sx") == -2 and r1.pttl("no") == -2,
            "TTL without expiry / of a missing key: %r %r %r" %
            (r1.ttl("a"), r1.ttl("sx"), r1.pttl("no")))
    # an MGET's reply is bounded (64 MiB of values): one 2.7 KB request
    # could otherwise ask for gigabytes of copies
    big = b"b" * (15 << 20)
    # On a loaded machine (both trees' tests at once) moving 15 MiB between
    # nodes can take longer than a deadline: the write's (its replica is
    # marked silent after write_timeout_ms meanwhile), a
    # read's (read_timeout_ms, whatever the value's size). Such a TIMEOUT
    # is sent again (the same SET is the same write; reads are
    # idempotent), as in CI 2026-12-06; any other error fails.
    def big_op(what, fn):
        for attempt in range(6):
            try:
                return fn()
            except redis.ResponseError as e:
                h.check(str(e).startswith("TIMEOUT") and attempt < 5,
                        "%s: %s" % (what, e))
                time.sleep(2)
    # a socket timeout long enough for 60 MiB through ASan on 2 loaded
    # cores (10 s was not, CI 2026-12-06: the read, not an error)
    r1 = redis.Redis(host=ips[0], port=6379, socket_timeout=60)
    r2 = redis.Redis(host=ips[1], port=6379, socket_timeout=60)
    h.check(big_op("SET of 15 MiB", lambda: r1.set("big15", big)) is True,
            "SET of 15 MiB")
    h.check(big_op("MGET of 60 MiB", lambda: r2.mget(["big15"] * 4)) ==
            [big] * 4, "MGET of 60 MiB")
    try:
        r2.mget(["big15"] * 5)
        h.check(False, "MGET of 75 MiB answered")
    except redis.ResponseError as e:
        # TOO_LARGE once the values are read; a TIMEOUT before that on a
        # loaded machine (full make test run 2026-12-06) says nothing of
        # the bound: asked again
        for attempt in range(3):
            if not str(e).startswith("TIMEOUT"):
                break
            time.sleep(2)
            try:
                r2.mget(["big15"] * 5)
                h.check(False, "MGET of 75 MiB answered")
            except redis.ResponseError as e2:
                e = e2
        h.check(str(e).startswith("TOO_LARGE"), "MGET over the bound: %s" % e)
    h.check(big_op("GET of 15 MiB", lambda: r2.get("big15")) == big,
            "the connection serves after TOO_LARGE")
    # a transaction is refused with the reason, and nothing of it applies
    try:
        t = r1.pipeline()  # redis-py's default: MULTI ... EXEC
        t.set("tx", "1")
        t.execute()
        h.check(False, "MULTI/EXEC accepted")
    except redis.ResponseError as e:
        h.check("no transactions" in str(e), "MULTI refusal: %s" % e)
    h.check(r2.get("tx") is None, "a refused transaction wrote nothing")
    p = r1.pipeline(transaction=False)
    for i in range(25):
        p.set("p%d" % i, "v%d" % i)
    for i in range(25):
        p.get("p%d" % i)
    res = p.execute()
    h.check(res[:25] == [True] * 25, "pipelined SETs")
    h.check(res[25:] == [("v%d" % i).encode() for i in range(25)],
            "pipelined GETs in order")
    info = r1.info()
    h.check("ring_epoch" in info and info.get("ring_nodes") == 3,
            "INFO ring section: %r" % {k: info.get(k) for k in
                                       ("ring_epoch", "ring_nodes")})
    # what redis-cli --stat reads (it printed -9223372036854775808 without)
    h.check(info.get("used_memory", 0) > 1 << 20 and
            info.get("blocked_clients") == 0 and
            info.get("total_connections_received", 0) >= 1 and
            info.get("total_commands_processed", 0) > 50,
            "INFO memory/stats: %r" % {k: info.get(k) for k in
                                       ("used_memory", "blocked_clients",
                                        "total_connections_received",
                                        "total_commands_processed")})
    two = r1.execute_command("INFO", "server", "keyspace")
    h.check("redis_version" in two and "db0" in two and
            "ring_epoch" not in two, "INFO with two sections: %r" %
            sorted(two)[:8])
    h.check(r1.execute_command("CONSISTENCY") == b"QUORUM", "CONSISTENCY?")
    # unknown command: an error, never a hang
    try:
        r1.execute_command("FLUSHALL")
        h.check(False, "FLUSHALL accepted")
    except redis.ResponseError as e:
        h.check("unknown command" in str(e), "unknown command: %s" % e)

    # a protocol error closes that connection only
    s = socket.create_connection((ips[0], 6379), timeout=5)
    s.sendall(b"*1\r\n$99999999999999\r\n")
    got = s.recv(1000)
    h.check(got.startswith(b"-ERR Protocol error"), "protocol error: %r" % got)
    h.check(s.recv(1000) == b"", "connection not closed after protocol error")
    s.close()
    h.check(r1.get("a") == b"1", "node stopped serving")

    # redis-cli and redis-benchmark, zero errors
    if shutil.which("redis-cli"):
        out = subprocess.run(["redis-cli", "-h", ips[2], "SET", "cli", "ok"],
                             capture_output=True, text=True, timeout=20)
        h.check(out.stdout.strip() == "OK", "redis-cli SET: %r" % out)
        out = subprocess.run(["redis-cli", "-h", ips[0], "GET", "cli"],
                             capture_output=True, text=True, timeout=20)
        h.check(out.stdout.strip() == "ok", "redis-cli GET: %r" % out)
        # Regression (pipe_half_overloaded): redis-cli --pipe sends its whole
        # input at once; past max_pipeline (64 here) requests were answered
        # OVERLOADED. A full connection now waits instead.
        n = 5000
        mass = "".join("*3\r\n$3\r\nSET\r\n$%d\r\nmass%d\r\n$1\r\nv\r\n" %
                       (len("mass%d" % i), i) for i in range(n))
        out = subprocess.run(["redis-cli", "-h", ips[0], "--pipe"],
                             input=mass, capture_output=True, text=True,
                             timeout=120)
        h.check("errors: 0, replies: %d" % n in out.stdout,
                "redis-cli --pipe: %r" % out.stdout[-300:])
        h.check(r2.mget(["mass0", "mass%d" % (n - 1)]) == [b"v", b"v"],
                "mass insertion read back")
    if shutil.which("redis-benchmark"):
        out = subprocess.run(["redis-benchmark", "-h", ips[1], "-t",
                              "set,get", "-n", "2000", "-c", "10", "-q"],
                             capture_output=True, text=True, timeout=120)
        text = out.stdout + out.stderr
        h.check(out.returncode == 0, "redis-benchmark exit %d" %
                out.returncode)
        h.check("SET:" in text and "GET:" in text, "benchmark output: %r" %
                text[-300:])
        # redis-benchmark stops at the first error reply
        h.check(text.count("requests per second") == 2 and
                "rror" not in text, "redis-benchmark saw errors: %r" %
                text[-500:])

    # /metrics
    body = urllib.request.urlopen("http://%s:9180/metrics" % ips[0],
                                  timeout=10).read().decode()
    h.check("ringkv_request_duration_seconds_bucket" in body,
            "no latency histogram in /metrics")
    h.check("ringkv_ring_epoch" in body, "no ring epoch in /metrics")

    # admission control: past max_pipeline, OVERLOADED at once
    cl = n1.client()
    reqs = [cl.encode("GET", key="p%d" % (i % 25), cl="ONE")[1]
            for i in range(400)]
    cl.sock.sendall(b"".join(reqs))
    res = [cl.read_frame() for _ in range(400)]
    over = sum(1 for r in res if r.err == "OVERLOADED")
    ok = sum(1 for r in res if not r.err)
    print("pipeline of 400 with max_pipeline 64: %d served, %d OVERLOADED"
          % (ok, over))
    h.check(ok + over == 400, "other errors: %r" %
            [r for r in res if r.err and r.err != "OVERLOADED"][:3])
    h.check(over > 0, "no request was shed")
    h.check(ok >= 64, "fewer than max_pipeline served")
    r = cl.call("GET", key="p1", cl="QUORUM")
    h.check(r.value == b"v1", "not serving after shedding: %r" % r)
    cl.close()
    m = n1.metrics()
    h.check(m.get("ringkv_overloaded_total", 0) >= over, "OVERLOADED count")

    # a node down: QUORUM works, ALL is UNAVAILABLE (typed RESP error)
    n3.kill9()
    c.wait_state(n1, "n3", "DN", timeout=30)
    h.check(r1.set("q", "1") is True, "QUORUM SET with a node down")
    h.check(r1.execute_command("CONSISTENCY", "ALL") == b"OK",
            "CONSISTENCY ALL")
    try:
        r1.get("q")
        h.check(False, "ALL read succeeded with a node down")
    except redis.ResponseError as e:
        h.check(str(e).startswith("UNAVAILABLE"), "ALL error: %s" % e)
    r1.close()
    r2.close()
    for n in (n1, n2):
        h.check(n.stop() == 0, "%s unclean exit" % n.name)


h.run(main)
