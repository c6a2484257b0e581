#!/usr/bin/env python3
"""Regression many_tokens_never_join: a node of more tokens than gossip
can announce never joined.

A node announces its tokens in one gossip value of at most 4,096 bytes,
512 tokens; the configuration took num_tokens up to 1,024, and a node gets
num_tokens x weight. Past 512 the announce failed (boot.announce_fail,
TOO_LARGE) every time the node tried, and it stayed out of the ring for
good. Now num_tokens above 512 is a configuration error, and a node whose
num_tokens x weight passes 512 takes 512 and says so (boot.tokens_capped).

Two nodes (127.0.1.150-151, RF 2); n2 has num_tokens 300 and weight 2
(600 wanted). Proves: both see both UN with one ring, n2 with 512 tokens,
n2 logs boot.tokens_capped wanted=600; a key written through n1 reads
back through n2 at ALL; and `ringkvd --check-config --num_tokens=1024`
is refused, naming the range.
"""
# ctest: alongside others
import subprocess

import harness as h


def main():
    ips = ["127.0.1.150", "127.0.1.151"]
    c = h.racked_cluster(ips, replication="dc1:2",
                         node_extra={1: {"num_tokens": 300, "weight": 2}})
    n1, n2 = c.nodes
    row = n1.status()["rows"]["n2"]
    h.check(row.get(5) == "UN" and row.get(7) == 512,
            "n2 as n1 sees it: %r" % row)
    h.check("event=boot.tokens_capped wanted=600 tokens=512" in n2.log(),
            "n2 did not say its tokens were capped")
    print("n2 joined with 512 tokens (600 wanted)")

    cl = n1.client()
    r = cl.call("PUT", key="k", value="v", cl="ALL")
    cl.close()
    h.check(not r.err, "PUT at ALL: %r" % r)
    cl = n2.client()
    r = cl.call("GET", key="k", cl="ALL")
    cl.close()
    h.check(not r.err and r.value == b"v", "GET at ALL through n2: %r" % r)

    p = subprocess.run([h.RINGKVD, "--check-config", "--num_tokens=1024"],
                       stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                       text=True, timeout=30)
    h.check(p.returncode != 0 and "1..512" in p.stdout,
            "--num_tokens=1024: exit %d %r" % (p.returncode, p.stdout))
    print("num_tokens 1024 refused: %r" % p.stdout.strip())


if __name__ == "__main__":
    h.run(main)
