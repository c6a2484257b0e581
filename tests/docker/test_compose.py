#!/usr/bin/env python3
"""The compose cluster (scripts/compose.sh, the file it writes) in containers
built from this build's binaries (scripts/docker-image.sh), as an operator
runs it: `compose.sh up` with NODES=3, `add`, `remove`.

Project "rktest" on 172.28.6.0/24 (nodes at .11-.13, one rack each, RF 3),
gossip every 200 ms. From this host the test talks to the nodes' own
addresses on the bridge network, never to anything off this machine.

0. The checked-in deploy/docker-compose.yml is what `compose.sh gen 1 2 3
   4 5 6` writes (the two cannot drift).
1. Up (`compose.sh up`, NODES=3, which waits for them UN): all three see
   three nodes UN with one ring fingerprint, and each container turns
   healthy (its health check runs `ringkv health` in it); `ringkv status`
   in a container needs no -h (RINGKV_HOST); redis-cli is in the image;
   the nodes speak mutual TLS to each other with the certificates
   compose.sh made, and redis-cli --tls reaches RESP in TLS on 6380; 200
   keys written through RESP on node1 at the default QUORUM are read at
   ALL through node3 (native protocol).
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
5. Add one node, then remove another, with data (regression
   decommission_stalls_after_join): 2,000 more keys, `compose.sh add`
   starts node4, which joins by streaming, then `compose.sh remove node1`
   decommissions node1 (it stalled at "21 of 27 ranges" before 2026-12-06,
   every push to node4 answering "not found"); node1 exits 0, its
   container and volume are gone, and every key reads at ALL through
   node2, node3 and node4.
6. Disk full on one node (after the rolling restart): node3's data
   directory is a 128 MB tmpfs of this host's, bind-mounted in place of its
   volume (an override file), with disk_reserve_mb 16. A file that leaves
   it 8 MiB free is put there from the host, as another program filling
   the disk would: node3 says so (ringkv_disk_full 1, store.disk_full in
   its log), a RESP SET through it is answered -FULL, and QUORUM writes
   through node1 go on (node1 keeps hints for node3). The file removed,
   node3 takes writes again by itself (store.disk_ok, a SET through it
   +OK), and after the hints are replayed it has every key written while
   it was full (ONE through node3).
7. Stop: every container exits 0 on SIGTERM and no log holds a sanitizer
   report (harness._CRASH_MARKS).
"""
import os
import sys
import time

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)),
                                "..", "cluster"))
import compose_lib as L  # noqa: E402
import harness as h  # noqa: E402

L.configure("rktest", "172.28.6", "ringkv:test-", nodes=3, last=4)
IP = L.IP
BUILD, ROOT = L.BUILD, L.ROOT
run, dc, compose_sh, container = L.run, L.dc, L.compose_sh, L.container
wait_states, wait_healthy = L.wait_states, L.wait_healthy
metric, wait_metric, put_all, missing = (L.metric, L.wait_metric, L.put_all,
                                         L.missing)
IMAGE = L.IMAGE
# node3's data directory on a tmpfs of this host's (step 6)
DISK = None


def main():
    global DISK
    d = h.tmpdir()
    L.SECRET = os.path.join(d, "secret")
    with open(L.SECRET, "w") as f:
        f.write("compose-test-secret\n")
    DISK = os.path.join(d, "node3-data")
    with h.tmpfs(DISK, "128m") as mounted:
        h.check(mounted, "cannot mount a tmpfs for node3's data (root?)")
        L.OVERRIDE = os.path.join(d, "node3-disk.yml")
        with open(L.OVERRIDE, "w") as f:
            f.write('version: "3.7"\nservices:\n  node3:\n'
                    '    environment: {RINGKV_DISK_RESERVE_MB: "16"}\n'
                    '    volumes: ["%s:/var/lib/ringkv"]\n' % DISK)
        compose_test()


def compose_test():
    compose_sh("destroy", check=False)
    gen = compose_sh("gen", "1", "2", "3", "4", "5", "6")
    with open(os.path.join(ROOT, "deploy", "docker-compose.yml")) as f:
        h.check(f.read() == gen, "deploy/docker-compose.yml is not what "
                "`scripts/compose.sh gen 1 2 3 4 5 6` writes")
    try:
        scenario()
        dc("stop", "-t", "30")
        crashes = []
        logs = {}
        for n in IP:
            kept = os.path.join(ROOT, "run", "compose", L.PROJECT, n + ".log")
            if os.path.exists(kept):  # removed (compose.sh remove)
                with open(kept, errors="replace") as f:
                    logs[n] = f.read()
                continue
            code = run("docker", "inspect", "-f", "{{.State.ExitCode}}",
                       container(n)).strip()
            if code != "0":
                crashes.append("%s exited %s on SIGTERM" % (n, code))
            logs[n] = run("docker", "logs", container(n), check=False)
        for n, log in logs.items():
            crashes += ["%s: %s" % (n, log[max(0, log.find(m) - 200):][:1500])
                        for m in h._CRASH_MARKS if m in log]
        h.check(not crashes, "a node crashed:\n" + "\n".join(crashes))
    finally:
        compose_sh("destroy", check=False)
        run("docker", "rmi", IMAGE, check=False)


def disk_full(written):
    """Step 6: node3's disk filled from the host and freed again; returns
    the keys written meanwhile."""
    ip3 = IP["node3"]
    st = os.statvfs(DISK)
    ballast = os.path.join(DISK, "ballast")
    fd = os.open(ballast, os.O_CREAT | os.O_WRONLY, 0o600)
    try:
        os.posix_fallocate(fd, 0, st.f_bavail * st.f_frsize - (8 << 20))
    finally:
        os.close(fd)
    wait_metric(ip3, "ringkv_disk_full", 1, timeout=30)
    r = h.RespConn(ip3, 6379)
    rep = r.call("SET", "full-direct", "x")
    h.check(rep.startswith(b"-FULL disk full"), "SET through full node3: "
            "%r" % rep)
    full = ["full%03d" % i for i in range(100)]
    stored0 = metric(IP["node1"], "ringkv_hints_stored_total")
    put_all(IP["node1"], full)
    wait_metric(IP["node1"], "ringkv_hints_stored_total", stored0 + 100)
    log = run("docker", "logs", container("node3"), check=False)
    h.check("event=store.disk_full " in log, "no store.disk_full in node3's "
            "log")
    print("node3's disk filled: it refuses (-FULL), QUORUM goes on, hinted")
    os.unlink(ballast)
    deadline = time.time() + 30
    while metric(ip3, "ringkv_disk_full") != 0:
        h.check(time.time() < deadline, "node3 still full after the ballast "
                "went")
        time.sleep(0.3)
    rep = r.call("SET", "full-direct", "x")
    h.check(rep == b"+OK", "SET through node3 after space came back: %r" %
            rep)
    r.s.close()
    deadline = time.time() + 60
    while missing(ip3, full, "ONE") and time.time() < deadline:
        time.sleep(0.5)
    h.check(missing(ip3, full, "ONE") == [], "keys written while node3 was "
            "full are not on it after the hints")
    h.check(missing(IP["node2"], written + full, "ALL") == [],
            "keys missing at ALL after node3's disk came back")
    log = run("docker", "logs", container("node3"), check=False)
    h.check("event=store.disk_ok " in log, "no store.disk_ok in node3's log")
    print("space back: node3 takes writes by itself and has every key")
    return full


def tls_on(names):
    """The nodes speak mutual TLS to each other with the certificates
    compose.sh made (they converged, so the handshakes passed), and offer
    RESP in TLS on 6380, which redis-cli on this host reaches trusting the
    compose CA and checking the node's address."""
    pki = os.path.join(ROOT, "run", "compose", L.PROJECT, "pki")
    ca = os.path.join(pki, "ca.crt")
    for n in names:
        h.check(os.path.exists(os.path.join(pki, n + ".crt")),
                "compose.sh made no certificate for %s" % n)
        log = run("docker", "logs", container(n))
        h.check("event=tls.loaded " in log and "internode=required" in log,
                "%s did not load its certificates for internode TLS" % n)
    out = run("redis-cli", "--tls", "--cacert", ca, "-h", IP["node2"], "-p",
              "6380", "PING")
    h.check(out.strip() == "PONG", "redis-cli --tls to node2:6380: %r" % out)
    m = h.metrics_of(IP["node1"])
    refused = sum(v for k, v in m.items()
                  if k.startswith("ringkv_internode_tls_refused_total"))
    h.check(refused == 0, "internode TLS refusals between the nodes: %r" %
            refused)
    print("internode mutual TLS on (tls.loaded internode=required, no "
          "refusal); redis-cli --tls --cacert ca.crt on 6380: PONG")


def scenario():
    all3 = ["node1", "node2", "node3"]
    up = {n: "UN" for n in all3}
    t0 = time.time()
    print(compose_sh("up", BUILD, timeout=600))
    wait_states(all3, up)
    print("up: 3 UN after %.1f s" % (time.time() - t0))
    wait_healthy(all3)
    st = run("docker", "exec", container("node2"), "/usr/bin/ringkv",
             "status")
    h.check(st.count("\nUN ") + st.startswith("UN ") >= 3,
            "ringkv status in node2's container (no -h): %r" % st)
    out = run("docker", "exec", container("node2"), "/usr/bin/redis-cli",
              "-h", IP["node3"], "PING")
    h.check(out.strip() == "PONG", "redis-cli in node2's container: %r" % out)
    print("every container healthy; ringkv status and redis-cli in them work")
    tls_on(all3)

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
    net = L.PROJECT + "_ring"
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
    full = disk_full(keys + lost + cut + rolled)

    # add one node, then decommission another, with data
    more = ["more%04d" % i for i in range(2000)]
    put_all(IP["node2"], more)
    t0 = time.time()
    out = compose_sh("add", BUILD, timeout=600)
    h.check("node4 (%s, rack1) joining" % IP["node4"] in out,
            "compose.sh add: %r" % out)
    all4 = all3 + ["node4"]
    wait_states(all4, {n: "UN" for n in all4}, timeout=180)
    held = metric(IP["node4"], "ringkv_stored_ranges")
    print("node4 joined in %.1f s, holding %d separate ranges" %
          (time.time() - t0, held))
    wait_healthy(["node4"])
    t0 = time.time()
    out = compose_sh("remove", "node1", timeout=300)
    h.check("node1 left the cluster and exited 0" in out,
            "compose.sh remove node1: %r" % out)
    print("node1 removed in %.1f s: %r" %
          (time.time() - t0, [ln for ln in out.splitlines()
                              if "left the cluster" in ln]))
    gone = run("docker", "volume", "ls", "-q").split()
    h.check(L.PROJECT + "_node1" not in gone, "node1's volume is still there")
    h.check(run("docker", "ps", "-aq", "-f", "name=" + container("node1"))
            .strip() == "", "node1's container is still there")
    rest = ["node2", "node3", "node4"]
    wait_states(rest, {n: "UN" for n in rest})
    everything = keys + lost + cut + rolled + full + more
    for n in rest:
        h.check(missing(IP[n], everything, "ALL") == [],
                "keys missing at ALL through %s after node1 left" % n)
    print("node4 added, node1 decommissioned: every key at ALL")


if __name__ == "__main__":
    h.run(main)
