#!/usr/bin/env python3
"""Roles: the data user may read and write but not run the operator's
commands; the admin user may.

Three nodes (127.0.3.71-73, RF 2) with requirepass (the `default` user,
inline) and admin_password_file (the `admin` user, as "sha256:<hex>" in a
file). Checked:
 - native protocol: HELLO as default reads and writes; DECOMMISSION,
   CLEANUP, REPAIR, REMOVENODE, SNAPSHOT, ABORT, JOIN and RELOADTLS answer
   NOPERM, and
   nothing changes (every node UN, the same ring epoch, no session in
   netstats, no snapshot); a wrong password, the admin user with the data
   password and an unknown user get AUTH;
 - the CLI: `ringkv -a PW decommission` (and reloadtls) exits 9 (NOPERM),
   a wrong user or password exits 4, RINGKV_USER works as --user; the
   admin user's reloadtls runs (nothing to reload: no TLS);
 - RESP: -NOAUTH before AUTH, -WRONGPASS for a wrong pair (the role held
   stays), -NOPERM for DECOMMISSION / CLEANUP / REPAIR as default, Redis's
   exact words; `AUTH admin <pw>` then runs CLEANUP and REPAIR;
 - ringkv_client_noperm_total counts the refusals;
 - the admin user decommissions n3 through the CLI, and it leaves;
 - no log holds either password.
Then one node (127.0.3.74) with requirepass alone keeps today's behaviour:
the password runs admin commands on both protocols, and the node warns
at start-up that requirepass grants admin. Its metrics_password makes
/metrics answer 401 (WWW-Authenticate: Basic) without user `metrics` and
that password, counted in ringkv_metrics_unauthorized_total.
"""
import base64
import hashlib
import os
import time
import urllib.error
import urllib.request

import harness as h

IPS = ["127.0.3.71", "127.0.3.72", "127.0.3.73"]
SOLO = "127.0.3.74"
RESP_PORT = 6379
METRICS_PORT = 9180
METRICS_PW = "metrics-pw-44d0"
PW = "data-pw-7f3a"
ADMIN_PW = "admin-pw-91c2"
ADMIN_OPS = [("DECOMMISSION", None), ("CLEANUP", None), ("REPAIR", None),
             ("REMOVENODE", ["n2"]), ("SNAPSHOT", ["t1"]), ("ABORT", None),
             ("JOIN", None), ("RELOADTLS", None)]


def wait_all_up(nodes, names, timeout=60):
    """Every node reports every name UN, with one (epoch, fingerprint)."""
    deadline = time.time() + timeout
    last = None
    while time.time() < deadline:
        try:
            seen = set()
            ok = True
            for n in nodes:
                st = h.status_of(n.ip, 7380, PW)
                seen.add((st["epoch"], st["fingerprint"]))
                states = {k: v.get(5) for k, v in st["rows"].items()}
                if any(states.get(w) != "UN" for w in names):
                    ok, last = False, (n.name, states)
            if ok and len(seen) == 1:
                return seen.pop()
            last = last if not ok else ("differ", seen)
        except (OSError, ConnectionError, RuntimeError) as e:
            last = repr(e)
        time.sleep(0.3)
    raise AssertionError("cluster did not converge: %r" % (last,))


def counters(node):
    """(NOPERM refusals, failed authentications) the node counted."""
    m = h.metrics_of(node.ip, 7380, PW)
    return (m.get("ringkv_client_noperm_total", 0),
            m.get("ringkv_client_auth_failures_total", 0))


def native_checks(c, n1):
    """The data user: served for data, NOPERM for admin ops; wrong
    credentials refused."""
    cl = n1.client(password=PW)
    r = cl.call("PUT", key="k1", value="v1", cl="QUORUM")
    h.check(not r.err, "PUT as default: %r" % r)
    r = cl.call("GET", key="k1", cl="QUORUM")
    h.check(r.value == b"v1", "GET as default: %r" % r)
    for op in ("STATUS", "RING", "NETSTATS", "METRICS", "LISTSNAPSHOTS"):
        r = cl.call(op)
        h.check(not r.err, "%s as default: %r" % (op, r))
    for op, args in ADMIN_OPS:
        r = cl.call(op, args=args)
        h.check(r.err == "NOPERM" and "admin" in (r.msg or ""),
                "%s as default: %r" % (op, r))
    cl.close()
    # the same connection explicitly as user default
    cl = n1.client(password=PW, user="default")
    r = cl.call("CLEANUP")
    h.check(r.err == "NOPERM", "CLEANUP as user default: %r" % r)
    cl.close()
    for user, pw in [(None, "wrong"), ("admin", PW), ("nobody", PW),
                     ("default", ADMIN_PW)]:
        cl = n1.client()
        r = cl.call("HELLO", password=pw, user=user)
        h.check(r.err == "AUTH", "HELLO %r/%r: %r" % (user, pw, r))
        r = cl.call("GET", key="k1")
        h.check(r.err == "AUTH", "GET after a refused HELLO: %r" % r)
        cl.close()
    print("native: data user served, NOPERM for %d admin ops, bad "
          "credentials refused" % len(ADMIN_OPS))


def cli_checks(n1):
    rc, out = h.cli(n1, "-a", PW, "decommission")
    h.check(rc == 9, "decommission as default: %d %r" % (rc, out))
    h.check("admin" in out, "the refusal says why: %r" % out)
    rc, out = h.cli(n1, "-a", PW, "--json", "cleanup")
    h.check(rc == 9 and '"NOPERM"' in out, "cleanup --json: %d %r" % (rc, out))
    rc, out = h.cli(n1, "-a", PW, "repair")
    h.check(rc == 9, "repair as default: %d %r" % (rc, out))
    rc, out = h.cli(n1, "-a", PW, "reloadtls")
    h.check(rc == 9, "reloadtls as default: %d %r" % (rc, out))
    rc, out = h.cli(n1, "-u", "admin", "-a", ADMIN_PW, "reloadtls")
    h.check(rc == 0 and "nothing to reload" in out,
            "reloadtls as admin: %d %r" % (rc, out))
    rc, out = h.cli(n1, "-a", PW, "get", "k1")
    h.check(rc == 0 and "v1" in out, "get as default: %d %r" % (rc, out))
    rc, out = h.cli(n1, "-u", "admin", "-a", PW, "status")
    h.check(rc == 4, "admin with the data password: %d %r" % (rc, out))
    rc, out = h.cli(n1, "--user", "bob", "-a", PW, "status")
    h.check(rc == 4, "unknown user: %d %r" % (rc, out))
    rc, out = h.cli(n1, "-a", "nope", "status")
    h.check(rc == 4, "wrong password: %d %r" % (rc, out))
    print("cli: NOPERM exits 9, bad credentials exit 4")


def resp_checks(n1):
    r = h.RespConn(n1.ip, RESP_PORT)
    h.check(r.call("GET", "k1") == b"-NOAUTH Authentication required.",
            "GET before AUTH")
    wrong = b"-WRONGPASS invalid username-password pair or user is disabled."
    h.check(r.call("AUTH", "wrong") == wrong, "AUTH wrong")
    h.check(r.call("AUTH", "admin", PW) == wrong, "AUTH admin <data pw>")
    h.check(r.call("AUTH", "nobody", PW) == wrong, "AUTH nobody")
    h.check(r.call("AUTH", PW) == b"+OK", "AUTH <data pw>")
    h.check(r.call("GET", "k1") == b"v1", "GET as default")
    for cmd in ("decommission", "cleanup", "repair", "reloadtls"):
        got = r.call(cmd.upper())
        want = ("-NOPERM User default has no permissions to run the '%s' "
                "command" % cmd).encode()
        h.check(got == want, "%s as default: %r" % (cmd, got))
    got = r.call("REMOVENODE", "n2")
    h.check(got.startswith(b"-NOPERM"), "REMOVENODE as default: %r" % got)
    # a failed AUTH leaves the role as it was
    h.check(r.call("AUTH", "admin", "wrong") == wrong, "AUTH admin wrong")
    h.check(r.call("GET", "k1") == b"v1", "still default after a failure")
    h.check(r.call("CLEANUP").startswith(b"-NOPERM"), "still no admin")
    # the admin user
    h.check(r.call("AUTH", "admin", ADMIN_PW) == b"+OK", "AUTH admin")
    got = r.call("CLEANUP")
    h.check(not got.startswith(b"-"), "CLEANUP as admin: %r" % got)
    got = r.call("REPAIR")
    h.check(not got.startswith(b"-"), "REPAIR as admin: %r" % got)
    h.check(r.call("GET", "k1") == b"v1", "admin reads too")
    r.s.close()
    try:
        import redis
    except ImportError:
        print("resp: python3-redis not installed, raw RESP only")
        return
    cl = redis.Redis(host=n1.ip, port=RESP_PORT, username="default",
                     password=PW, socket_timeout=20)
    h.check(cl.get("k1") == b"v1", "redis-py as default")
    try:
        cl.execute_command("DECOMMISSION")
        h.check(False, "redis-py DECOMMISSION as default ran")
    except redis.exceptions.NoPermissionError:
        pass
    cl.close()
    adm = redis.Redis(host=n1.ip, port=RESP_PORT, username="admin",
                      password=ADMIN_PW, socket_timeout=20)
    # allowed: it runs, or is refused only because the raw-RESP admin's
    # CLEANUP above still runs (a slow machine, ASan)
    try:
        h.check(adm.execute_command("CLEANUP"), "redis-py CLEANUP as admin")
    except redis.exceptions.ResponseError as e:
        h.check("already running" in str(e), "redis-py CLEANUP as admin: %s"
                % e)
    adm.close()
    try:
        redis.Redis(host=n1.ip, port=RESP_PORT, username="admin",
                    password="x", socket_timeout=20).get("k1")
        h.check(False, "redis-py with a wrong password was served")
    except (redis.exceptions.AuthenticationError,
            redis.exceptions.ResponseError) as e:
        # redis-py 4.3 raises WRONGPASS on connect as a ResponseError
        h.check("WRONGPASS" in str(e), "redis-py: %r" % e)
    print("resp: NOAUTH, WRONGPASS, NOPERM as Redis words them; admin runs")


def nothing_changed(c, before):
    after = wait_all_up(c.nodes, ["n1", "n2", "n3"])
    h.check(after == before, "ring changed: %r -> %r" % (before, after))
    for n in c.nodes:
        rc, out = h.cli(n, "-a", PW, "listsnapshots")
        h.check(rc == 0 and "t1" not in out, "a snapshot on %s: %r" %
                (n.name, out))
        st = h.status_of(n.ip, 7380, PW)
        h.check(all(v.get(5) == "UN" for v in st["rows"].values()),
                "%s: %r" % (n.name, st["rows"]))


def roles_cluster():
    d = h.tmpdir()
    admin_file = os.path.join(d, "admin_password")
    with open(admin_file, "w") as f:
        f.write("sha256:%s\n" % hashlib.sha256(ADMIN_PW.encode()).hexdigest())
    c = h.Cluster(IPS, seeds=IPS[:2], replication="dc1:2",
                  resp_port=RESP_PORT, requirepass=PW,
                  admin_password_file=admin_file)
    c.start()
    n1, n2, n3 = c.nodes
    before = wait_all_up(c.nodes, ["n1", "n2", "n3"])
    base_noperm, base_fail = counters(n1)

    native_checks(c, n1)
    cli_checks(n1)
    resp_checks(n1)
    nothing_changed(c, before)
    noperm, fails = counters(n1)
    counted = noperm - base_noperm
    # 7 native ops + 1 as user default + 3 CLI + 4 + 1 RESP + 1 redis-py
    h.check(counted == 20, "ringkv_client_noperm_total rose by %d" % counted)
    # failures as either user are counted (and slowed) alike: 4 native
    # HELLOs, 3 CLI runs, 4 RESP AUTHs, 1 redis-py connection
    failed = fails - base_fail
    h.check(failed == 12, "ringkv_client_auth_failures_total rose by %d" %
            failed)
    h.check("event=resp.auth_fail" in n1.log() and
            "event=client.auth_fail" in n1.log(),
            "failed authentications not logged")
    print("nothing changed: ring %r, %d refusals and %d failed "
          "authentications counted" % (before, counted, failed))

    # the admin user, through the CLI and RINGKV_USER
    env = dict(os.environ, RINGKV_USER="admin", RINGKV_PASSWORD=ADMIN_PW)
    p = h.subprocess.run([h.RINGKV, "-h", n3.ip, "decommission"], env=env,
                         stdout=h.subprocess.PIPE,
                         stderr=h.subprocess.STDOUT, timeout=60)
    out = p.stdout.decode(errors="replace")
    h.check(p.returncode == 0, "decommission as admin: %d %r" %
            (p.returncode, out))
    deadline = time.time() + 120
    while True:
        rows = h.status_of(n1.ip, 7380, PW)["rows"]
        if "n3" not in rows or rows["n3"].get(5) not in ("UN", "UL"):
            break
        h.check(time.time() < deadline, "n3 never left: %r" % rows.get("n3"))
        time.sleep(0.5)
    print("admin: decommission of n3 started and went (%r)" % out.strip())

    for n in c.nodes:
        log = n.log()
        h.check(PW not in log and ADMIN_PW not in log,
                "%s's log holds a password" % n.name)
    for n in c.nodes:
        n.stop()


def scrape(ip, auth=None):
    """(status, headers, body) of GET /metrics on ip:METRICS_PORT."""
    req = urllib.request.Request("http://%s:%d/metrics" % (ip, METRICS_PORT))
    if auth is not None:
        req.add_header("Authorization", "Basic " +
                       base64.b64encode(auth.encode()).decode())
    try:
        with urllib.request.urlopen(req, timeout=20) as r:
            return r.status, r.headers, r.read().decode()
    except urllib.error.HTTPError as e:
        return e.code, e.headers, e.read().decode()


def metrics_password(n):
    """/metrics wants user `metrics` and metrics_password (basic auth)."""
    deadline = time.time() + 30
    while True:
        st, hd, body = scrape(n.ip, "metrics:" + METRICS_PW)
        if st == 200:
            break
        h.check(time.time() < deadline, "metrics never served: %d" % st)
        time.sleep(0.3)
    h.check("ringkv_client_noperm_total" in body, "metrics text: %r" %
            body[:200])
    for auth in (None, "metrics:wrong", "admin:" + METRICS_PW,
                 "metrics:" + PW):
        st, hd, body = scrape(n.ip, auth)
        h.check(st == 401 and "ringkv" not in body,
                "scrape with %r: %d %r" % (auth, st, body[:100]))
        h.check((hd.get("WWW-Authenticate") or "").startswith("Basic"),
                "401 without WWW-Authenticate: %r" % dict(hd))
    # a scrape sees the text published after the one before it
    deadline = time.time() + 30
    while True:
        st, hd, body = scrape(n.ip, "metrics:" + METRICS_PW)
        h.check(st == 200, "scrape after refusals: %d" % st)
        got = [l for l in body.splitlines()
               if l.startswith("ringkv_metrics_unauthorized_total ")]
        if got and float(got[0].split()[1]) == 4:
            break
        h.check(time.time() < deadline, "401s counted: %r" % got)
        time.sleep(0.2)
    print("metrics: 401 without the right basic credentials, 200 with them")


def requirepass_only():
    c = h.Cluster([SOLO], seeds=[SOLO], replication="dc1:1",
                  resp_port=RESP_PORT, requirepass=PW,
                  metrics_port=METRICS_PORT, metrics_password=METRICS_PW)
    c.start()
    n = c.nodes[0]
    deadline = time.time() + 30
    while True:
        try:
            rows = h.status_of(n.ip, 7380, PW)["rows"]
            if rows.get("n1", {}).get(5) == "UN":
                break
        except (OSError, ConnectionError, RuntimeError):
            pass
        h.check(time.time() < deadline, "solo node never came up")
        time.sleep(0.3)
    rc, out = h.cli(n, "-a", PW, "cleanup")
    h.check(rc == 0, "cleanup with requirepass alone: %d %r" % (rc, out))
    cl = n.client(password=PW, user="admin")
    r = cl.call("REPAIR")
    h.check(not r.err, "REPAIR as admin with requirepass alone: %r" % r)
    cl.close()
    r = h.RespConn(n.ip, RESP_PORT)
    h.check(r.call("AUTH", PW) == b"+OK", "AUTH")
    # the CLI's cleanup may still run on a loaded machine: that refusal
    # says the command was let through; wait for it to end and ask again
    deadline = time.time() + 60
    while True:
        got = r.call("CLEANUP")
        if not got.startswith(b"-BAD_REQUEST a cleanup is already running"):
            break
        h.check(time.time() < deadline, "the first cleanup never ended")
        time.sleep(0.3)
    h.check(not got.startswith(b"-"), "RESP CLEANUP: %r" % got)
    r.s.close()
    h.check("auth.admin_by_requirepass" in n.log(),
            "no start-up warning that requirepass grants admin")
    h.check(PW not in n.log(), "the log holds the password")
    metrics_password(n)
    h.check(METRICS_PW not in n.log(), "the log holds the metrics password")
    n.stop()
    print("requirepass alone: admin commands run, as before, with a warning")


def main():
    roles_cluster()
    requirepass_only()
    print("OK")


if __name__ == "__main__":
    main()
