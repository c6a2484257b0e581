#!/usr/bin/env python3
"""The compose cluster (deploy/docker-compose.yml) in containers built from
this build's binaries (scripts/docker-image.sh), as an operator runs it.

Project "rktest" on 172.28.6.0/24 (nodes at .11-.13, one rack each, RF 3),
gossip every 200 ms. From this host the test talks to the nodes' own
addresses on the bridge network, never to anything off this machine.

1. Up: all three see three nodes UN with one ring fingerprint; 200 keys
   written through RESP on node1 at the default QUORUM are read at ALL
   through node3 (native protocol).
2. A node lost (`docker-compose kill node3`, its rack with it): node1 sees
   it DN; QUORUM writes still succeed and ALL is UNAVAILABLE; node1 stores
   hints. Started again, node3 is UN everywhere, node1 replays its hints,
   and every key written while it was away is on node3 (ONE through node3
   finds them after the hints are replayed).
3. A partition (`docker network disconnect` of node2): node1 and node3 see
   node2 DN while node2 still runs; QUORUM writes through node1 succeed.
   Reconnected, node2 is UN everywhere and every key reads at ALL.
4. A rolling restart (`docker-compose restart`, one node at a time, waiting
   for UN in between), then every key reads at ALL: data survives in the
   volumes.
5. Add one node, then decommission another, with data (regression
   decommission_stalls_after_join): 2,000 more keys, node4 (profile
   "extra") joins by streaming, then `ringkv decommission --wait` takes
   node1 out; it ends (it stalled at "21 of 27 ranges" before 2026-12-06,
   every push to node4 answering "not found"), node1 exits 0 and every
   key reads at ALL through node2, node3 and node4.
6. Stop: every container exits 0 on SIGTERM and no log holds a sanitizer
   report (harness._CRASH_MARKS).
"""
import os
import subprocess
import sys
import time

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)),
                                "..", "cluster"))
import harness as h  # noqa: E402

ROOT = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", ".."))
BUILD = os.path.dirname(h.BIN_DIR)
PROJECT = "rktest"
NET = "172.28.6"
IP = {"node1": NET + ".11", "node2": NET + ".12", "node3": NET + ".13",
      "node4": NET + ".14"}
IMAGE = "ringkv:test-" + os.path.basename(BUILD).lower()


def env():
    e = dict(os.environ)
    e.update({"RINGKV_NET": NET, "RINGKV_IMAGE": IMAGE,
              "RINGKV_CLUSTER_NAME": PROJECT,
              "RINGKV_SECRET_FILE": SECRET,
              "RINGKV_GOSSIP_INTERVAL_MS": "200",
              "RINGKV_NUM_TOKENS": "16",
              "RINGKV_READ_TIMEOUT_MS": "1500",
              "RINGKV_WRITE_TIMEOUT_MS": "1500"})
    return e


def run(*args, check=True, timeout=180):
    p = subprocess.run(list(args), env=env(), cwd=ROOT, timeout=timeout,
                       stdout=subprocess.PIPE, stderr=subprocess.STDOUT)
    out = p.stdout.decode(errors="replace")
    if check and p.returncode != 0:
        raise AssertionError("%s: exit %d\n%s" % (" ".join(args),
                                                  p.returncode, out))
    return out


def dc(*args, **kw):
    return run("docker-compose", "-p", PROJECT, "-f",
               "deploy/docker-compose.yml", *args, **kw)


def container(name):
    return "%s_%s_1" % (PROJECT, name)


def states(ip):
    """{node name: state} and the (epoch, fingerprint) as ip sees them."""
    st = h.status_of(ip)
    return ({k: v.get(5) for k, v in st["rows"].items()},
            (st["epoch"], st["fingerprint"]))


def wait_states(observers, want, timeout=90):
    """Until every observer sees every node of `want` in its state (and,
    when all are UN, one ring)."""
    deadline = time.time() + timeout
    last = None
    while time.time() < deadline:
        try:
            rings = set()
            ok = True
            for o in observers:
                st, ring = states(IP[o])
                rings.add(ring)
                if any(st.get(n) != s for n, s in want.items()):
                    ok, last = False, (o, st)
                    break
            if ok and (len(rings) == 1 or
                       any(s != "UN" for s in want.values())):
                return
            if ok:
                last = ("rings differ", rings)
        except (OSError, ConnectionError, RuntimeError) as e:
            last = repr(e)
        time.sleep(0.3)
    for n in IP:
        print("---- %s\n%s" % (n, run("docker", "logs", "--tail", "30",
                                      container(n), check=False)),
              file=sys.stderr)
    raise AssertionError("%r never saw %r (last %r)" % (observers, want, last))


def metric(ip, name):
    return h.metrics_of(ip).get(name, 0.0)


def wait_metric(ip, name, at_least, timeout=60):
    deadline = time.time() + timeout
    while metric(ip, name) < at_least and time.time() < deadline:
        time.sleep(0.3)
    v = metric(ip, name)
    h.check(v >= at_least, "%s of %s: %g, want >= %g" % (name, ip, v,
                                                         at_least))


def put_all(ip, keys, cl="QUORUM"):
    c = h.Client(ip, timeout=10)
    try:
        for k in keys:
            r = c.call("PUT", key=k, value="v-" + k, cl=cl)
            h.check(not r.err, "PUT %s at %s through %s: %s %s" %
                    (k, cl, ip, r.err, r.msg))
    finally:
        c.close()


def missing(ip, keys, cl):
    """Keys that a read at cl through ip does not find with their value."""
    c = h.Client(ip, timeout=10)
    try:
        out = []
        for k in keys:
            r = c.call("GET", key=k, cl=cl)
            if r.err or r.value != ("v-" + k).encode():
                out.append((k, r.err, r.value))
        return out
    finally:
        c.close()


def main():
    global SECRET
    SECRET = os.path.join(h.tmpdir(), "secret")
    with open(SECRET, "w") as f:
        f.write("compose-test-secret\n")
    dc("--profile", "extra", "down", "-v", "--remove-orphans", check=False)
    print(run(os.path.join(ROOT, "scripts", "docker-image.sh"), BUILD, IMAGE))
    try:
        scenario()
        dc("--profile", "extra", "stop", "-t", "30")
        crashes = []
        for n in IP:
            code = run("docker", "inspect", "-f", "{{.State.ExitCode}}",
                       container(n)).strip()
            if code != "0":
                crashes.append("%s exited %s on SIGTERM" % (n, code))
            log = run("docker", "logs", container(n), check=False)
            crashes += ["%s: %s" % (n, log[max(0, log.find(m) - 200):][:1500])
                        for m in h._CRASH_MARKS if m in log]
        h.check(not crashes, "a node crashed:\n" + "\n".join(crashes))
    finally:
        dc("--profile", "extra", "down", "-v", "--remove-orphans",
           check=False)
        run("docker", "rmi", IMAGE, check=False)


def scenario():
    all3 = ["node1", "node2", "node3"]
    up = {n: "UN" for n in all3}
    t0 = time.time()
    dc("up", "-d")
    wait_states(all3, up)
    print("up: 3 UN after %.1f s" % (time.time() - t0))

    keys = ["k%03d" % i for i in range(200)]
    r = h.RespConn(IP["node1"], 6379)
    for k in keys:
        rep = r.call("SET", k, "v-" + k)
        h.check(rep == b"+OK", "SET %s: %r" % (k, rep))
    h.check(missing(IP["node3"], keys, "ALL") == [], "written keys missing")
    print("RESP writes on node1 read at ALL through node3")

    # a node (and its rack) lost
    dc("kill", "node3")
    wait_states(["node1", "node2"], {"node3": "DN"})
    stored0 = metric(IP["node1"], "ringkv_hints_stored_total")
    lost = ["lost%03d" % i for i in range(100)]
    put_all(IP["node1"], lost)
    c = h.Client(IP["node1"])
    rep = c.call("PUT", key="all", value="x", cl="ALL")
    c.close()
    h.check(rep.err == "UNAVAILABLE", "ALL with node3 down: %r" % rep)
    # stored in batches: counted once a batch is committed
    wait_metric(IP["node1"], "ringkv_hints_stored_total", stored0 + 100)
    replayed0 = metric(IP["node1"], "ringkv_hints_replayed_total")
    dc("start", "node3")
    wait_states(all3, up)
    wait_metric(IP["node1"], "ringkv_hints_replayed_total", replayed0 + 100)
    h.check(missing(IP["node3"], lost, "ONE") == [],
            "keys written while node3 was down are not on node3")
    print("node3 killed and started: QUORUM served, hints replayed")

    # a partition: node2 cut off from the network, still running
    net = PROJECT + "_ring"
    run("docker", "network", "disconnect", net, container("node2"))
    wait_states(["node1", "node3"], {"node2": "DN"})
    cut = ["cut%03d" % i for i in range(100)]
    put_all(IP["node1"], cut)
    run("docker", "network", "connect", "--ip", IP["node2"], net,
        container("node2"))
    wait_states(all3, up)
    deadline = time.time() + 60
    while missing(IP["node1"], cut, "ALL") and time.time() < deadline:
        time.sleep(0.5)
    h.check(missing(IP["node1"], keys + lost + cut, "ALL") == [],
            "keys missing at ALL after the partition healed")
    print("node2 partitioned and back: QUORUM served, ALL reads everything")

    # a rolling restart
    for n in all3:
        dc("restart", "-t", "30", n)
        wait_states(all3, up)
        put_all(IP[n], ["roll-%s-%d" % (n, i) for i in range(20)])
    rolled = ["roll-%s-%d" % (n, i) for n in all3 for i in range(20)]
    h.check(missing(IP["node2"], keys + lost + cut + rolled, "ALL") == [],
            "keys missing after the rolling restart")
    print("rolling restart: every key at ALL")

    # add one node, then decommission another, with data
    more = ["more%04d" % i for i in range(2000)]
    put_all(IP["node2"], more)
    t0 = time.time()
    dc("up", "-d", "node4")
    all4 = all3 + ["node4"]
    wait_states(all4, {n: "UN" for n in all4}, timeout=180)
    held = metric(IP["node4"], "ringkv_stored_ranges")
    print("node4 joined in %.1f s, holding %d separate ranges" %
          (time.time() - t0, held))
    t0 = time.time()
    out = run("docker", "exec", container("node2"), "/usr/bin/ringkv", "-h",
              IP["node1"], "decommission", "--wait", timeout=240)
    print("node1 decommissioned in %.1f s: %r" %
          (time.time() - t0, out.strip().splitlines()[-1]))
    code = run("docker", "wait", container("node1"), timeout=60).strip()
    h.check(code == "0", "node1 exited %s after leaving" % code)
    rest = ["node2", "node3", "node4"]
    wait_states(rest, {n: "UN" for n in rest})
    everything = keys + lost + cut + rolled + more
    for n in rest:
        h.check(missing(IP[n], everything, "ALL") == [],
                "keys missing at ALL through %s after node1 left" % n)
    print("node4 added, node1 decommissioned: every key at ALL")


if __name__ == "__main__":
    h.run(main)
