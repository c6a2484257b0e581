#!/usr/bin/env python3
"""Purge of deleted data, and repair on a schedule (issue 28, items 1-2).

Three nodes (127.0.3.141-143, RF 3, a rack each, 4 tokens: 12 arcs, each
replicated by every node) with gc_grace_seconds 3, repair_interval_s 6,
purge_interval_s 1 and hinted_handoff off (so a replica that misses a
delete can get it only from repair). 300 keys, and 30 more with a TTL of
1 s, are written at ALL; n3 is stopped; 200 of the 300 are deleted at
QUORUM (n1 and n2 hold the tombstones, n3 the old values).

Proves:
- while n3 is down nothing is purged anywhere: no arc is repaired with
  every replica (n1 logs repair.overdue), and a purge cycle after that
  skips every arc (purge.done unrepaired=12 tombstones=0), though the
  tombstones are well past gc_grace_seconds;
- once n3 is back, the scheduled repairs bring it the tombstones and every
  node purges all 200 and the 30 expired values
  (ringkv_storage_purged_total{kind="tombstone"} and {kind="expired"}
  reaches 200 on each; a tombstone one node purged before a repair with
  another that still held it comes back from that one and is purged
  again, so it may count more), each node then holds exactly the 100 live keys
  (ringkv_keys: n3's old values are gone, not resurrected), every deleted
  or expired key reads NOT_FOUND at ALL through every node, and still does after
  another full repair interval; netstats shows the schedule and the purge;
  the purge's checkpoint deleted the commit log segment that held the
  deleted writes (without it a node kept the deleted values in its log
  until a segment filled: 26 MiB of 26 MiB in a 20,000-key purge.py run).
Checked that it fails when the purge ignores the repair rule (every arc
purged with covered_ms UINT64_MAX in node/purge.c): n1 had purged its
tombstones while n3 was down (purge.done unrepaired=0, seen=100:
only the live keys left).
"""
# ctest: alongside others
import json
import os
import re
import time

import redis

import harness as h

TOMB = 'ringkv_storage_purged_total{kind="tombstone"}'
EXP = 'ringkv_storage_purged_total{kind="expired"}'


def read_all(node, keys):
    cl = node.client()
    try:
        return cl.pipeline([("GET", {"key": k, "cl": "ALL"}) for k in keys])
    finally:
        cl.close()


def check_gone(nodes, gone, live):
    for n in nodes:
        res = read_all(n, gone)
        back = [k for k, r in zip(gone, res) if r.err != "NOT_FOUND"]
        h.check(not back, "%s: deleted keys read back at ALL: %r" %
                (n.name, [(k, r.err, r.value) for k, r in
                          zip(gone, res) if k in back[:3]]))
        res = read_all(n, sorted(live))
        bad = [k for k, r in zip(sorted(live), res)
               if r.err or r.value != live[k]]
        h.check(not bad, "%s: live keys wrong: %r" % (n.name, bad[:3]))


def main():
    ips = ["127.0.3.141", "127.0.3.142", "127.0.3.143"]
    c = h.racked_cluster(ips, replication="dc1:3", num_tokens=4,
                         gc_grace_seconds=3, repair_interval_s=6,
                         purge_interval_s=1, hinted_handoff="false",
                         repair_after_join="false", resp_port=6379)
    n1, n2, n3 = c.nodes
    live = {"k%d" % i: ("v%d" % i).encode() for i in range(300)}
    expiring = ["t%d" % i for i in range(30)]
    cl = n1.client()
    try:
        res = cl.pipeline([("PUT", {"key": k, "value": v, "cl": "ALL"})
                           for k, v in live.items()])
        h.check(not [r for r in res if r.err], "writes at ALL failed")
        res = cl.pipeline([("PUT", {"key": k, "value": b"e", "cl": "ALL",
                                    "ttl": 1}) for k in expiring])
        h.check(not [r for r in res if r.err], "expiring writes failed")
    finally:
        cl.close()
    h.check(n3.stop() == 0, "n3 unclean exit")
    c.wait_converged(timeout=60)
    gone = ["k%d" % i for i in range(0, 300) if i % 3 != 0]
    cl = n1.client()
    try:
        res = cl.pipeline([("DEL", {"key": k, "cl": "QUORUM"})
                           for k in gone])
        h.check(not [r for r in res if r.err], "deletes failed")
    finally:
        cl.close()
    for k in gone:
        del live[k]
    # n1's arcs go unrepaired past the interval, then a purge cycle runs
    h.wait_log(n1, "repair.overdue", timeout=120)
    mark = len(n1.log())
    deadline = time.time() + 60
    while "event=purge.done " not in n1.log()[mark:]:
        h.check(time.time() < deadline, "n1: no purge cycle")
        time.sleep(0.2)
    done = [ln for ln in n1.log()[mark:].splitlines()
            if "event=purge.done " in ln][0]
    print("n1, n3 down: %s" % done.split("event=")[1])
    h.check(" unrepaired=12 " in done and " tombstones=0 " in done,
            "n1 purged with n3 down: %s" % done)
    for n in (n1, n2):
        m = n.metrics()
        h.check(m.get(TOMB, 0) == 0 and m.get(EXP, 0) == 0,
                "%s purged while n3 was down" % n.name)
    rc, out = h.cli(n1, "netstats")
    print(out)
    h.check("Repair schedule: every arc within 6 s; 12 arcs replicated here, "
            "12 never repaired with every replica, 12 overdue" in out,
            "netstats of n1 with n3 down:\n%s" % out)
    h.check(n1.metrics().get('ringkv_repair_arcs{state="overdue"}') == 12,
            "n1's overdue arcs metric")
    rc, out = h.cli(n1, "status")
    h.check(rc == 0 and re.search(
        r"\nRepair: n1 replicates 12 arcs; the longest any has gone without "
        r"a complete repair is [0-9.]+ (s|min); 12 overdue \(past "
        r"repair_interval_s\); 12 never repaired", out),
        "status of n1 with n3 down:\n%s" % out)
    rc, out = h.cli(n1, "--json", "status")
    row = [r for r in json.loads(out)["nodes"] if r["host"] == "n1"][0]
    h.check(row["repair"]["arcs"] == 12 and row["repair"]["overdue"] == 12
            and row["repair"]["never"] == 12 and
            row["repair"]["oldest_ms"] >= 6000,
            "status --json of n1: %r" % row)
    h.check(all("repair" not in r for r in json.loads(out)["nodes"]
                if r["host"] != "n1"), "another node's repair in n1's status")
    info = redis.Redis(host=n1.ip, port=6379, socket_timeout=20).info("ringkv")
    h.check(info.get("repair_arcs") == 12 and
            info.get("repair_arcs_overdue") == 12 and
            info.get("repair_arcs_never") == 12 and
            info.get("repair_oldest_age_s", 0) >= 6,
            "INFO ringkv of n1: %r" % info)

    n3.start()
    c.wait_converged(timeout=60)
    for n in c.nodes:
        got = h.wait_metric(n, TOMB, len(gone), timeout=180)
        # at least each once: a tombstone one replica purged before a
        # repair with another that still had it comes back, and goes again
        h.check(got >= len(gone), "%s purged %d tombstones of %d" %
                (n.name, got, len(gone)))
        exp = h.wait_metric(n, EXP, len(expiring), timeout=180)
        h.check(exp >= len(expiring), "%s purged %d expired values of %d" %
                (n.name, exp, len(expiring)))
        print("%s: %d tombstones, %d expired values purged" %
              (n.name, got, exp))
    keys = h.keys_applied(c.nodes)
    print("ringkv_keys after the purge: %r" % keys)
    for name, k in keys.items():
        h.check(k == len(live), "%s holds %d keys, %d live" %
                (name, k, len(live)))
    check_gone(c.nodes, gone + expiring, live)
    # the cycle that purged ended with a checkpoint: the commit log segment
    # that held the deleted writes (n1's and n2's first, never full) is gone
    for n in (n1, n2):
        segs = sorted(os.listdir(os.path.join(n.data_dir, "commitlog")))
        print("%s commitlog after the purge: %r" % (n.name, segs))
        h.check("0000000000000001.log" not in segs,
                "%s kept the commit log of the deleted writes: %r" %
                (n.name, segs))
    rc, out = h.cli(n3, "netstats")
    print(out)
    # the since-start totals (the last cycle's line purged nothing by now)
    m = re.search(r"Purge: every 1 s, .*; (\d+) tombstones and (\d+) "
                  r"expired values purged, \d+ ranges compacted since start",
                  out)
    h.check(m and int(m.group(1)) >= len(gone) and
            int(m.group(2)) >= len(expiring),
            "netstats of n3:\n%s" % out)
    # a full interval later (more repairs, more purges): still gone
    for n in c.nodes:
        h.wait_metric(n, 'ringkv_repair_scheduled_total{result="started"}',
                      n.metrics().get(
                          'ringkv_repair_scheduled_total{result="started"}',
                          0) + 12, timeout=120)
    check_gone(c.nodes, gone + expiring, live)
    for n in c.nodes:
        h.check(n.stop() == 0, "%s unclean exit" % n.name)


if __name__ == "__main__":
    h.run(main)
