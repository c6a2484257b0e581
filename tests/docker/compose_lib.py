"""What the compose tests share: the cluster scripts/compose.sh runs for a
project of their own, and the calls they make on it.

A test calls configure() once (project, network, image tag, nodes), then
uses the module's functions; IP maps node names to addresses.
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
PROJECT = None
NET = None
IMAGE = None
SECRET = None
NODES = "3"
OVERRIDE = None  # an extra compose file (RINGKV_COMPOSE_OVERRIDE)
IP = {}


def configure(project, net, image_prefix, nodes=3, last=8):
    """The project, its network (x.y.z: node N at x.y.z.(10+N)), the image
    tag (image_prefix + the build folder's name), the node count `up`
    starts, and the names IP knows (node1..node<last>)."""
    global PROJECT, NET, IMAGE, NODES
    PROJECT, NET, NODES = project, net, str(nodes)
    IMAGE = image_prefix + os.path.basename(BUILD).lower()
    IP.clear()
    IP.update({"node%d" % i: "%s.%d" % (net, 10 + i)
               for i in range(1, last + 1)})


def env():
    e = dict(os.environ)
    e.update({"RINGKV_NET": NET, "RINGKV_IMAGE": IMAGE,
              "RINGKV_CLUSTER_NAME": PROJECT,
              "RINGKV_SECRET_FILE": SECRET,
              "RINGKV_PROJECT": PROJECT,
              "NODES": NODES,
              "RINGKV_COMPOSE_OVERRIDE": OVERRIDE or "",
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
    """docker-compose on the file compose.sh wrote for the cluster."""
    files = ["-f", os.path.join(ROOT, "run", "compose", PROJECT,
                                "docker-compose.yml")]
    if OVERRIDE:
        files += ["-f", OVERRIDE]
    return run("docker-compose", "-p", PROJECT, *files, *args, **kw)


def compose_sh(*args, **kw):
    return run(os.path.join(ROOT, "scripts", "compose.sh"), *args, **kw)


def wait_healthy(names, timeout=90):
    """Until docker says each container's health check passes."""
    deadline = time.time() + timeout
    while True:
        st = {n: run("docker", "inspect", "-f", "{{.State.Health.Status}}",
                     container(n)).strip() for n in names}
        if all(v == "healthy" for v in st.values()):
            return
        h.check(time.time() < deadline, "containers not healthy: %r" % st)
        time.sleep(1)


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
            # RING_STALE: a node just restarted refuses writes until it has
            # judged its clock (docs/storage.md); sent again, as clients do
            deadline = time.time() + 30
            while True:
                r = c.call("PUT", key=k, value="v-" + k, cl=cl)
                if r.err != "RING_STALE" or time.time() > deadline:
                    break
                time.sleep(0.2)
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


