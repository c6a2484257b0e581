#!/usr/bin/env python3
"""Mutual TLS on the internode port (internode_tls: required), with
certificates the openssl CLI makes at test time (tests/tls/make-certs.sh:
the cluster's CA, one certificate per node, a second one for n1, an
expired one; and here a certificate for n4 signed by another CA).

Three nodes (127.0.9.21-23, RF 3) with tls_cert_file, tls_key_file,
tls_ca_file and internode_tls: required. Checked:
 - they converge and serve QUORUM writes and reads through every node;
 - the internode port speaks TLS only: a plaintext connection to it is
   refused (counted in ringkv_internode_tls_refused_total{reason=
   "plaintext"}), and a TLS client presenting a certificate of the CA
   sees the node's certificate;
 - `ringkv reloadtls` on n1, after its certificate files were replaced,
   rotates the certificate: a QUORUM writer through n1 across it has no
   failed request, new handshakes on 7001 present the new certificate;
   an expired certificate given the same way is refused (reloadtls exits
   non-zero and says "expired"), the one before kept;
 - a plaintext node: n3 restarted with internode_tls off is refused by
   n1 and n2 (reason plaintext, logged as internode.tls_refused at most
   once per 10 s per reason with the count of suppressed lines); back in
   TLS it catches up (n1's connections to it are new: the rotated
   certificate works), every key read at QUORUM through it;
 - a 4th node (127.0.9.24) whose certificate another CA signed, with the
   cluster's secret and CA file, is refused (reason wrong_ca, logged,
   counted) and never becomes UN.
"""
# ctest: long
import os
import shutil
import socket
import subprocess
import time

import harness as h

IPS = ["127.0.9.21", "127.0.9.22", "127.0.9.23"]
ROGUE = "127.0.9.24"


def refused(n, reason):
    return n.metrics().get(
        'ringkv_internode_tls_refused_total{reason="%s"}' % reason, 0)


def tls_opts(pki, name, ca="ca.crt"):
    return {"tls_cert_file": os.path.join(pki, name + ".crt"),
            "tls_key_file": os.path.join(pki, name + ".key"),
            "tls_ca_file": os.path.join(pki, ca),
            "internode_tls": "required"}


def rogue_cert(pki, name, ip):
    """name.crt/.key signed by the other CA (wrong-ca), with the node's
    names: all it lacks is the cluster CA's signature."""
    def run(*args):
        subprocess.run(list(args), check=True, cwd=pki,
                       stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    run("openssl", "genpkey", "-algorithm", "EC", "-pkeyopt",
        "ec_paramgen_curve:P-256", "-out", name + ".key")
    run("openssl", "req", "-new", "-key", name + ".key", "-subj",
        "/CN=" + name, "-out", name + ".csr")
    with open(os.path.join(pki, name + ".ext"), "w") as f:
        f.write("subjectAltName=DNS:%s,IP:%s\n"
                "extendedKeyUsage=serverAuth,clientAuth\n" % (name, ip))
    run("openssl", "x509", "-req", "-in", name + ".csr", "-CA",
        "wrong-ca.crt", "-CAkey", "wrong-ca.key", "-CAcreateserial",
        "-extfile", name + ".ext", "-days", "30", "-out", name + ".crt")


def internode_cert(pki, ip):
    """The certificate the node at ip presents on 7001 to a TLS client
    holding a certificate of the CA (DER)."""
    ctx = h.tls_client_context(os.path.join(pki, "ca.crt"),
                               cert=os.path.join(pki, "client.crt"),
                               key=os.path.join(pki, "client.key"))
    with socket.create_connection((ip, 7001), timeout=20) as s:
        with ctx.wrap_socket(s, server_hostname=ip) as t:
            return t.getpeercert(binary_form=True)


def wait_refused(nodes, reason, more_than, timeout=60):
    """Until the nodes' refusals for reason pass more_than (a dict by
    name); returns how many each has."""
    deadline = time.time() + timeout
    while True:
        got = {n.name: refused(n, reason) for n in nodes}
        if any(got[k] > more_than.get(k, 0) for k in got):
            return got
        h.check(time.time() < deadline,
                "no %s refusal counted: %r" % (reason, got))
        time.sleep(0.3)


def quorum_round(c, prefix, count=300):
    """Writes count keys at QUORUM through each node in turn, then reads
    every one back at QUORUM through every node."""
    keys = {}
    for i, n in enumerate(c.nodes):
        batch = ["%s-%d-%d" % (prefix, i, k) for k in range(count)]
        h.put_all(n, batch, ("v-" + prefix).encode())
        keys.update({k: ("v-" + prefix).encode() for k in batch})
    for n in c.nodes:
        cl = n.client()
        try:
            res = cl.pipeline([("GET", {"key": k, "cl": "QUORUM"})
                               for k in keys])
            bad = [(k, r.err, r.value) for k, r in zip(keys, res)
                   if r.err or r.value != keys[k]]
            h.check(not bad, "QUORUM reads through %s: %d bad, e.g. %r" %
                    (n.name, len(bad), bad[:3]))
        finally:
            cl.close()
    return keys


def plaintext_lines(n):
    return [ln for ln in n.log().splitlines()
            if "event=internode.tls_refused " in ln and
            "reason=plaintext" in ln]


def plaintext_probe(pki, n, times=5):
    """Plaintext bytes (a frame, as a node without TLS sends its HELLO) to
    the internode port, times over: no answer but an alert; the node
    counts each and logs the first only (the rest within 10 s are counted
    in the next line's suppressed=)."""
    before = refused(n, "plaintext")
    for _ in range(times):
        with socket.create_connection((n.ip, 7001), timeout=20) as s:
            s.sendall(b"\x00\x00\x00\x05hello")
            got = b""
            while True:
                d = s.recv(4096)
                if not d:
                    break
                got += d
        h.check(got == b"" or got[0] == 0x15,
                "plaintext to 7001 answered: %r" % got[:40])
    deadline = time.time() + 20
    while refused(n, "plaintext") < before + times:
        h.check(time.time() < deadline, "plaintext refusals not counted")
        time.sleep(0.2)
    lines = plaintext_lines(n)
    h.check(len(lines) == 1 and "suppressed=0" in lines[0],
            "%d probes, lines: %r" % (times, lines))
    der = internode_cert(pki, n.ip)
    h.check(der == h.pem_der(os.path.join(pki, n.name + ".crt")),
            "%s presents another certificate on 7001" % n.name)
    print("7001 in TLS only: %d plaintext connections refused and "
          "counted, one line logged; %s's own certificate presented" %
          (times, n.name))
    return time.time()


def rotate(c, pki):
    """ringkv reloadtls on n1 with new files, under a QUORUM writer."""
    n1 = c.nodes[0]
    w = h.Writer(n1, "rot-")
    w.start()
    time.sleep(1.5)
    for ext in ("crt", "key"):
        shutil.copy(os.path.join(pki, "n1-new." + ext),
                    os.path.join(pki, "n1." + ext))
    rc, out = h.cli(n1, "reloadtls")
    h.check(rc == 0 and "reloaded" in out and "internode" in out,
            "ringkv reloadtls: %d %r" % (rc, out))
    time.sleep(1.5)
    acked = w.finish(at_least=50)
    h.check(internode_cert(pki, n1.ip) ==
            h.pem_der(os.path.join(pki, "n1-new.crt")),
            "7001 after reloadtls: not the new certificate")
    h.check("event=tls.reloaded " in n1.log(), "no tls.reloaded line")
    print("ringkv reloadtls: %r; the new certificate on 7001; a QUORUM "
          "writer across it: %d writes, none failed" % (out.strip()[:60],
                                                        len(acked)))

    keep = {}
    for ext in ("crt", "key"):
        keep[ext] = open(os.path.join(pki, "n1." + ext), "rb").read()
        shutil.copy(os.path.join(pki, "expired." + ext),
                    os.path.join(pki, "n1." + ext))
    rc, out = h.cli(n1, "reloadtls")
    h.check(rc != 0 and "expired" in out,
            "reloadtls with an expired certificate: %d %r" % (rc, out))
    for ext in ("crt", "key"):
        with open(os.path.join(pki, "n1." + ext), "wb") as f:
            f.write(keep[ext])
    h.check(internode_cert(pki, n1.ip) ==
            h.pem_der(os.path.join(pki, "n1-new.crt")),
            "the expired certificate was taken")
    m = n1.metrics()
    h.check(m.get('ringkv_tls_reloads_total{result="ok"}') == 1 and
            m.get('ringkv_tls_reloads_total{result="failed"}') == 1,
            "ringkv_tls_reloads_total: %r" % {k: v for k, v in m.items()
                                              if "reloads" in k})
    print("reloadtls with an expired certificate: exit %d, %r; the one "
          "before kept" % (rc, out.strip()[:90]))
    return acked


def plaintext_node(c, written, probed_at):
    """n3 restarted without internode TLS: refused by n1 and n2; back in
    TLS, it catches up through connections made with the new certs."""
    n1, n2, n3 = c.nodes
    before = {n.name: refused(n, "plaintext") for n in (n1, n2)}
    lines_before = {n.name: len(plaintext_lines(n)) for n in (n1, n2)}
    # past the limiter's 10 s since n2's line for the probes: its next
    # line counts the 4 it held back
    time.sleep(max(0, probed_at + 11 - time.time()))
    n3.stop()
    n3.extra["internode_tls"] = "off"
    n3.start()
    t0 = time.time()
    # n3 sends: gossip tells it n1 and n2 are up; a write through it needs
    # them (it is refused: the writes fail, never stored at QUORUM)
    deadline = time.time() + 60
    while True:
        try:
            cl = n3.client(timeout=5)
            try:
                r = cl.call("PUT", key="plain-1", value=b"x", cl="QUORUM")
            finally:
                cl.close()
            h.check(r.err, "a QUORUM write through plaintext n3 succeeded")
        except (OSError, ConnectionError):
            pass
        got = {n.name: refused(n, "plaintext") for n in (n1, n2)}
        if all(got[k] > before[k] for k in got):
            break
        h.check(time.time() < deadline, "n3 not refused: %r" % got)
        time.sleep(0.5)
    # more refusals while the limiter holds the lines back
    t1 = time.time()
    while time.time() < t1 + 4:
        try:
            cl = n3.client(timeout=5)
            try:
                cl.call("PUT", key="plain-2", value=b"x", cl="QUORUM")
            finally:
                cl.close()
        except (OSError, ConnectionError):
            pass
        time.sleep(0.3)
    held = [ln for ln in plaintext_lines(n2) if "suppressed=4" in ln]
    h.check(held, "n2's lines: %r" % plaintext_lines(n2))
    for n in (n1, n2):
        lines = plaintext_lines(n)[lines_before[n.name]:]
        h.check(lines, "%s logged no plaintext refusal" % n.name)
        count = refused(n, "plaintext") - before[n.name]
        window = time.time() - t0
        h.check(len(lines) <= 1 + window / 10 and len(lines) < count,
                "%s: %d lines for %d refusals in %.0f s, not rate-limited" %
                (n.name, len(lines), count, window))
        h.check("side=accept" in lines[0] and "suppressed=" in lines[0],
                "line: %r" % lines[0])
        print("%s: %d plaintext refusals, %d lines in %.0f s: %s" %
              (n.name, count, len(lines), window, lines[-1][-160:]))
    # writes through n1 reach n1 and n2 (QUORUM); n1's connections to n3
    # fail too (its ClientHello is no frame n3 takes): n3 gets hints
    plain = ["plain-%d" % k for k in range(200)]
    h.put_all(n1, plain, b"while-plain")
    h.check(refused(n1, "closed") + refused(n1, "timeout") > 0,
            "n1 connecting to plaintext n3 saw no refusal: %r" %
            {k: v for k, v in n1.metrics().items() if "tls_refused" in k})
    written.update({k: b"while-plain" for k in plain})

    n3.stop()
    n3.extra["internode_tls"] = "required"
    n3.start()
    c.wait_converged(timeout=60)
    # the keys written while n3 was plaintext reach it as hints from n1,
    # over connections made with n1's new certificate (read at ONE
    # through n3: its own copy), and every key reads back through it
    cl = n3.client()
    try:
        deadline = time.time() + 60
        while True:
            res = cl.pipeline([("GET", {"key": k, "cl": "ONE"})
                               for k in plain])
            bad = [k for k, r in zip(plain, res) if r.value != b"while-plain"]
            if not bad:
                break
            h.check(time.time() < deadline,
                    "n3 lacks %d keys written while it was plaintext, "
                    "e.g. %r" % (len(bad), bad[:3]))
            time.sleep(1)
        res = cl.pipeline([("GET", {"key": k, "cl": "QUORUM"})
                           for k in written])
        bad = [k for k, r in zip(written, res)
               if r.err or r.value != written[k]]
        h.check(not bad, "QUORUM reads through n3: %d bad, e.g. %r" %
                (len(bad), bad[:3]))
    finally:
        cl.close()
    quorum_round(c, "after")
    print("n3 back in TLS: %d keys read at QUORUM through it; writes and "
          "reads through every node again" % len(written))


def wrong_ca_node(c, pki):
    """n4 with a certificate another CA signed: refused, never UN."""
    n1 = c.nodes[0]
    rogue_cert(pki, "n4", ROGUE)
    before = {n.name: refused(n, "wrong_ca") for n in c.nodes}
    n4 = h.Node(c, "n4", ROGUE, tls_opts(pki, "n4"))
    n4.start()
    wait_refused(c.nodes, "wrong_ca", before, timeout=90)
    t0 = time.time()
    seen = set()
    while time.time() < t0 + 15:
        for obs in (n1, n4):
            try:
                row = obs.status()["rows"].get("n4", {})
            except (OSError, ConnectionError, RuntimeError):
                continue
            h.check(row.get(5) != "UN", "%s sees n4 UN" % obs.name)
            seen.add("%s:%s" % (obs.name, row.get(5)))
        time.sleep(0.5)
    h.check(n4.alive(), "n4 died")
    lines = [ln for n in c.nodes for ln in n.log().splitlines()
             if "event=internode.tls_refused " in ln and
             "reason=wrong_ca" in ln]
    h.check(lines, "no wrong_ca refusal logged")
    got = {n.name: refused(n, "wrong_ca") for n in c.nodes}
    n4.kill9()
    print("n4 (another CA): refused %r, never UN in 15 s (seen as %s); %s"
          % (got, ", ".join(sorted(seen)),
             lines[0][lines[0].index("event="):][:200]))


def main():
    pki = h.make_certs(h.tmpdir("ringkv-pki-"), "n1=" + IPS[0],
                       "n2=" + IPS[1], "n3=" + IPS[2])
    c = h.Cluster(IPS, replication="dc1:3", tls_port=0)
    for n in c.nodes:
        n.extra.update(tls_opts(pki, n.name))
    c.start()
    c.wait_converged()
    keys = quorum_round(c, "first")
    for n in c.nodes:
        h.check(not [k for k, v in n.metrics().items()
                     if k.startswith("ringkv_internode_tls_refused_total")
                     and v],
                "%s refused a peer of the cluster" % n.name)
    print("3 nodes in mutual TLS: converged, %d keys written and read at "
          "QUORUM through each" % len(keys))
    probed_at = plaintext_probe(pki, c.nodes[1])
    keys.update(rotate(c, pki))
    plaintext_node(c, keys, probed_at)
    wrong_ca_node(c, pki)
    for n in c.nodes:
        n.stop()


if __name__ == "__main__":
    h.run(main)
