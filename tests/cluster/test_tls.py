#!/usr/bin/env python3
"""TLS on the client ports, with certificates the openssl CLI makes at test
time (tests/tls/make-certs.sh: a CA, one certificate per node, a wrong CA,
an expired and a not-yet-valid certificate).

Three nodes (127.0.6.11-13, RF 3) with tls_cert_file / tls_key_file,
client_tls: required (the native port 7380 in TLS), tls_port
6380 (RESP in TLS) and resp_port 6379 (RESP in plaintext). Checked:
 - redis-cli --tls --cacert ca.crt against tls_port: SET on one node, GET
   on another; plaintext RESP on resp_port still served;
 - plaintext to tls_port (redis-cli without --tls) and to the native port
   (ringkv without --tls) is refused, never answered;
 - a client that trusts another CA refuses the node (redis-cli and ringkv
   say why: the certificate);
 - ringkv --tls --cacert ca.crt puts and gets (and --tls-name checks the
   name: the node's certificate is not "n9"'s);
 - the refusals are counted (ringkv_tls_refused_total{port="client"}) and
   logged (client.tls_refused, rate-limited);
 - the native protocol's client (the harness's, in TLS) sees the cluster.
Then n1's certificate files are replaced and it gets SIGHUP: new
handshakes on 6380 and 7380 get the new certificate, a TLS writer open
across it sees no failed request, and an expired certificate given the
same way is refused (tls.reload_failed says so) with the one before kept
(ringkv_tls_reloads_total counts both).
Then one node (127.0.6.14) with requirepass: the bound on what a client may
send before authenticating holds over TLS (a 1 MB bulk before AUTH closes
the connection, counted as preauth_too_large). And a node given an expired
or a not-yet-valid certificate refuses to start, with a line that says so.
"""
# ctest: alongside others
import os
import socket
import subprocess
import time

import harness as h

IPS = ["127.0.6.11", "127.0.6.12", "127.0.6.13"]
SOLO = "127.0.6.14"
PW = "tls-pw-5e1d"


def redis_cli(ip, port, *args, tls=None, timeout=20):
    """redis-cli's exit status and output (tls: a CA file for --cacert)."""
    cmd = ["redis-cli", "-h", ip, "-p", str(port)]
    if tls:
        cmd += ["--tls", "--cacert", tls]
    p = subprocess.run(cmd + list(args), stdout=subprocess.PIPE,
                       stderr=subprocess.STDOUT, timeout=timeout)
    return p.returncode, p.stdout.decode(errors="replace").strip()


def tls_opts(pki, name):
    return {"tls_cert_file": os.path.join(pki, name + ".crt"),
            "tls_key_file": os.path.join(pki, name + ".key")}


def refused(n):
    return n.metrics().get('ringkv_tls_refused_total{port="client"}', 0)


def client_ports(c, pki):
    ca = os.path.join(pki, "ca.crt")
    wrong = os.path.join(pki, "wrong-ca.crt")
    n1, n2 = c.nodes[0], c.nodes[1]
    before = refused(n1)

    rc, out = redis_cli(n1.ip, 6380, "SET", "k1", "v1", tls=ca)
    h.check(rc == 0 and out == "OK", "SET over tls_port: %d %r" % (rc, out))
    rc, out = redis_cli(n2.ip, 6380, "GET", "k1", tls=ca)
    h.check(rc == 0 and out == "v1", "GET over tls_port: %d %r" % (rc, out))
    rc, out = redis_cli(n1.ip, 6379, "GET", "k1")
    h.check(rc == 0 and out == "v1", "GET over resp_port: %d %r" % (rc, out))
    print("redis-cli --tls: SET on n1, GET on n2; plaintext resp_port served")

    rc, plain = redis_cli(n1.ip, 6380, "PING")
    h.check("PONG" not in plain,
            "plaintext PING answered on tls_port: %r" % plain)
    rc, out = redis_cli(n1.ip, 6380, "PING", tls=wrong)
    h.check(rc != 0 and "certificate verify failed" in out,
            "a client of another CA: %d %r" % (rc, out))
    print("tls_port: plaintext refused (%r); wrong CA refused (%r)" %
          (plain, out))

    rc, out = h.cli(n1, "--tls", "--cacert", ca, "put", "k2", "v2")
    h.check(rc == 0, "ringkv --tls put: %d %r" % (rc, out))
    rc, out = h.cli(n2, "--tls", "--cacert", ca, "get", "k2")
    h.check(rc == 0 and "v2" in out, "ringkv --tls get: %d %r" % (rc, out))
    rc, out = h.cli(n1, "--tls", "--cacert", ca, "-h", n1.ip, "get", "k1")
    h.check(rc == 0 and "v1" in out, "a RESP write read natively: %r" % out)
    rc, out = h.cli(n1, "get", "k2")
    h.check(rc == 3, "ringkv without --tls to client_tls: required: %d %r" %
            (rc, out))
    rc, out = h.cli(n1, "--tls", "--cacert", wrong, "get", "k2")
    h.check(rc == 4 and "certificate" in out,
            "ringkv --cacert of another CA: %d %r" % (rc, out))
    rc, out = h.cli(n1, "--tls", "--cacert", ca, "--tls-name", "n9", "get",
                    "k2")
    h.check(rc == 4 and "certificate" in out,
            "ringkv --tls-name n9 against n1: %d %r" % (rc, out))
    rc, out = h.cli(n1, "--cacert", ca, "--tls-name", "n1", "get", "k2")
    h.check(rc == 0 and "v2" in out, "--tls-name n1: %d %r" % (rc, out))
    print("ringkv --tls: put and get; plaintext, another CA, another name "
          "refused")

    # plaintext redis-cli, redis-cli and ringkv of another CA, plaintext
    # ringkv, ringkv wanting n9: five refusals on n1
    deadline = time.time() + 20
    while refused(n1) < before + 5 and time.time() < deadline:
        time.sleep(0.2)
    got = refused(n1) - before
    h.check(got >= 5, "refusals counted on n1: %r" % got)
    h.check("event=client.tls_refused " in n1.log(),
            "no client.tls_refused line in n1's log")
    print("refused handshakes counted (%d) and logged" % got)


def reload_on_sighup(c, pki):
    """n1's certificate files replaced, then SIGHUP: new handshakes get the
    new certificate on both TLS ports, a connection open across it goes on
    with no failed request, and an expired certificate is refused with the
    one before kept."""
    import shutil
    import signal
    import threading
    n1 = c.nodes[0]
    ctx = h.tls_client_context(os.path.join(pki, "ca.crt"))
    old, new = h.pem_der(os.path.join(pki, "n1.crt")), h.pem_der(
        os.path.join(pki, "n1-new.crt"))
    h.check(h.tls_peer_der(ctx, n1.ip, 6380) == old, "n1's first certificate")
    # a writer on one TLS connection, all through the reload
    raw = ctx.wrap_socket(socket.create_connection((n1.ip, 6380), timeout=20),
                          server_hostname=n1.ip)
    stop, errors, done = threading.Event(), [], [0]

    def writer():
        buf = b""
        while not stop.is_set():
            raw.sendall(h.resp_cmd("SET", "rot%d" % done[0], "v"))
            while b"\r\n" not in buf:
                d = raw.recv(4096)
                if not d:
                    errors.append("connection closed")
                    return
                buf += d
            line, buf = buf.split(b"\r\n", 1)
            if line != b"+OK":
                errors.append(line)
            done[0] += 1

    t = threading.Thread(target=writer, daemon=True)
    t.start()
    time.sleep(0.5)
    for ext in ("crt", "key"):
        shutil.copy(os.path.join(pki, "n1-new." + ext),
                    os.path.join(pki, "n1." + ext))
    n1.proc.send_signal(signal.SIGHUP)
    h.wait_log(n1, "tls.reloaded", timeout=20)
    time.sleep(0.5)
    stop.set()
    t.join(20)
    h.check(not t.is_alive() and not errors and done[0] > 0,
            "the writer across the reload: %d written, errors %r" %
            (done[0], errors[:3]))
    raw.close()
    for port in (6380, 7380):
        h.check(h.tls_peer_der(ctx, n1.ip, port) == new,
                "port %d after SIGHUP: not the new certificate" % port)
    print("SIGHUP: the new certificate on 6380 and 7380; a TLS writer "
          "across it: %d SETs, none failed" % done[0])
    # an expired one: refused, the new one stays, and the node serves
    for ext in ("crt", "key"):
        shutil.copy(os.path.join(pki, "expired." + ext),
                    os.path.join(pki, "n1." + ext))
    n1.proc.send_signal(signal.SIGHUP)
    h.wait_log(n1, "tls.reload_failed", timeout=20)
    line = [ln for ln in n1.log().splitlines()
            if "event=tls.reload_failed " in ln][0]
    h.check("expired" in line, "the refusal says why: %r" % line)
    h.check(h.tls_peer_der(ctx, n1.ip, 6380) == new, "the expired one was taken")
    m = n1.metrics()
    h.check(m.get('ringkv_tls_reloads_total{result="ok"}') == 1 and
            m.get('ringkv_tls_reloads_total{result="failed"}') == 1,
            "ringkv_tls_reloads_total: %r" % {k: v for k, v in m.items()
                                              if "reloads" in k})
    h.check(n1.alive(), "n1 died")
    print("an expired certificate on SIGHUP: refused (%s), the one before "
          "kept" % line.split("why=")[1][:60])


def preauth_bound(pki):
    """A TLS client that sends 1 MB of a bulk before AUTH is closed."""
    c = h.Cluster([SOLO], seeds=[SOLO], replication="dc1:1", resp_port=6379,
                  tls_port=6380, requirepass=PW, client_tls="required",
                  **tls_opts(pki, "n4"))
    c.start()
    n = c.nodes[0]
    ca = os.path.join(pki, "ca.crt")
    deadline = time.time() + 30
    while True:
        rc, out = redis_cli(n.ip, 6380, "-a", PW, "--no-auth-warning", "SET",
                            "a", "b", tls=ca)
        if rc == 0 and out == "OK":
            break
        h.check(time.time() < deadline, "solo node never served: %r" % out)
        time.sleep(0.3)
    # regression: until 2026-12-06 the flusher, decrypting what a TLS
    # session held, skipped the connection's output: -NOAUTH never came
    rc, out = redis_cli(n.ip, 6380, "PING", tls=ca)
    h.check("NOAUTH" in out, "PING before AUTH over TLS: %d %r" % (rc, out))
    ctx = h.tls_client_context(ca)
    s = ctx.wrap_socket(socket.create_connection((n.ip, 6380), timeout=20),
                        server_hostname=n.ip)
    s.settimeout(20)
    closed = False
    try:
        s.sendall(b"*3\r\n$3\r\nSET\r\n$1\r\nk\r\n$1000000\r\n")
        for _ in range(100):
            s.sendall(b"x" * 10000)
        # what comes back is an error line, then the end of the connection
        while s.recv(65536):
            pass
        closed = True
    except (ConnectionError, OSError):
        closed = True
    finally:
        s.close()
    h.check(closed, "the connection was not closed")
    m = n.metrics(password=PW)
    got = m.get('ringkv_client_input_refused_total{why="preauth_too_large"}',
                0)
    h.check(got >= 1, "preauth_too_large not counted: %r" % got)
    n.stop()
    print("before AUTH, 1 MB of a bulk over TLS: closed and counted")


def bad_certificate_refused(pki, name, words):
    """A node given certificate `name` does not start and says `words`."""
    c = h.Cluster([SOLO], seeds=[SOLO], replication="dc1:1",
                  **tls_opts(pki, name))
    n = c.nodes[0]
    n.start()
    rc = n.proc.wait(timeout=60)
    h.check(rc != 0, "ringkvd started with the %s certificate" % name)
    with open(n.log_path + ".stderr", errors="replace") as f:
        said = f.read() + n.log()
    line = [ln for ln in said.splitlines() if words in ln]
    h.check(line, "no line says %r: %r" % (words, said[-600:]))
    print("%s certificate: exit %d, %r" % (name, rc, line[0].strip()))


def main():
    pki = h.make_certs(h.tmpdir("ringkv-pki-"), "n1=" + IPS[0],
                       "n2=" + IPS[1], "n3=" + IPS[2], "n4=" + SOLO)
    bad_certificate_refused(pki, "expired", "expired (notAfter Jan  2 "
                            "00:00:00 2020 GMT)")
    bad_certificate_refused(pki, "future", "not valid yet")

    h.CLIENT_TLS = h.tls_client_context(os.path.join(pki, "ca.crt"))
    c = h.Cluster(IPS, replication="dc1:3", resp_port=6379, tls_port=6380,
                  client_tls="required")
    for n in c.nodes:
        n.extra.update(tls_opts(pki, n.name))
    c.start()
    c.wait_converged()
    client_ports(c, pki)
    reload_on_sighup(c, pki)
    for n in c.nodes:
        n.stop()
    preauth_bound(pki)
    print("OK")


if __name__ == "__main__":
    main()
