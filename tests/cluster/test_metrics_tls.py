#!/usr/bin/env python3
"""The metrics port in HTTPS (metrics_tls: required) on an address of its
own (metrics_address), with basic authentication (metrics_password).

One node (listen_address 127.0.7.21, metrics_address 127.0.7.22, its
certificate from tests/tls/make-certs.sh naming 127.0.7.22). Checked:
 - /metrics over HTTPS with the CA and the credentials: 200, the
   Prometheus text; without credentials 401; /health/live 200;
 - nothing listens on listen_address's metrics port;
 - plain HTTP to the port is never answered, a client of another CA
   refuses the node; both counted (ringkv_tls_refused_total{port=
   "metrics"}) and logged (metrics.tls_refused);
 - SIGHUP with new certificate files: new handshakes get the new one;
 - metrics_tls without tls_cert_file: the node does not start, and says
   why.
"""
# ctest: alongside others
import base64
import os
import shutil
import signal
import socket
import ssl
import time

import harness as h

IP = "127.0.7.21"
METRICS_IP = "127.0.7.22"
PORT = 9180
PW = "metrics-pw-41c2"


def https_get(ctx, path, auth=True):
    """(status, body) of GET path over HTTPS."""
    with socket.create_connection((METRICS_IP, PORT), timeout=20) as s:
        with ctx.wrap_socket(s, server_hostname=METRICS_IP) as t:
            head = "GET %s HTTP/1.1\r\nHost: x\r\n" % path
            if auth:
                cred = base64.b64encode(("metrics:" + PW).encode()).decode()
                head += "Authorization: Basic %s\r\n" % cred
            t.sendall((head + "\r\n").encode())
            data = b""
            while True:
                d = t.recv(65536)
                if not d:
                    break
                data += d
    status = int(data.split(b" ", 2)[1])
    return status, data.split(b"\r\n\r\n", 1)[1]


def refused(n):
    return n.metrics().get('ringkv_tls_refused_total{port="metrics"}', 0)


def no_tls_without_cert():
    c = h.Cluster([IP], seeds=[IP], replication="dc1:1", metrics_port=PORT,
                  metrics_tls="required")
    n = c.nodes[0]
    n.start()
    rc = n.proc.wait(timeout=60)
    h.check(rc != 0, "ringkvd started with metrics_tls and no certificate")
    with open(n.log_path + ".stderr", errors="replace") as f:
        said = f.read() + n.log()
    h.check("metrics_tls: HTTPS needs tls_cert_file" in said,
            "no line says why: %r" % said[-600:])
    print("metrics_tls without tls_cert_file: exit %d, says why" % rc)


def main():
    no_tls_without_cert()
    pki = h.make_certs(h.tmpdir("ringkv-pki-"), "n1=" + METRICS_IP)
    ca = os.path.join(pki, "ca.crt")
    c = h.Cluster([IP], seeds=[IP], replication="dc1:1", metrics_port=PORT,
                  metrics_tls="required", metrics_address=METRICS_IP,
                  metrics_password=PW,
                  tls_cert_file=os.path.join(pki, "n1.crt"),
                  tls_key_file=os.path.join(pki, "n1.key"))
    c.start()
    n = c.nodes[0]
    ctx = h.tls_client_context(ca)
    deadline = time.time() + 60
    while True:
        try:
            status, body = https_get(ctx, "/metrics")
            if status == 200:
                break
        except OSError:
            pass
        h.check(time.time() < deadline, "/metrics never answered over "
                "HTTPS on %s:%d" % (METRICS_IP, PORT))
        time.sleep(0.2)
    h.check(b"ringkv_" in body, "/metrics body: %r" % body[:200])
    status, _ = https_get(ctx, "/metrics", auth=False)
    h.check(status == 401, "/metrics without credentials: %d" % status)
    status, body = https_get(ctx, "/health/live", auth=False)
    h.check(status == 200, "/health/live over HTTPS: %d" % status)
    print("HTTPS on %s:%d: /metrics 200 with credentials, 401 without; "
          "/health/live 200" % (METRICS_IP, PORT))

    try:
        socket.create_connection((IP, PORT), timeout=5).close()
        h.check(False, "metrics port open on listen_address %s" % IP)
    except ConnectionRefusedError:
        pass
    print("nothing on %s:%d" % (IP, PORT))

    before = refused(n)
    with socket.create_connection((METRICS_IP, PORT), timeout=20) as s:
        s.sendall(b"GET /metrics HTTP/1.1\r\nHost: x\r\n\r\n")
        try:
            got = s.recv(4096)
        except ConnectionResetError:
            got = b""
    h.check(not got.startswith(b"HTTP/"),
            "plain HTTP answered on an HTTPS port: %r" % got[:80])
    wrong = h.tls_client_context(os.path.join(pki, "wrong-ca.crt"))
    try:
        https_get(wrong, "/metrics")
        h.check(False, "a client of another CA took the node's certificate")
    except ssl.SSLCertVerificationError:
        pass
    deadline = time.time() + 20
    while refused(n) < before + 2 and time.time() < deadline:
        time.sleep(0.2)
    h.check(refused(n) >= before + 2, "refusals counted: %r" %
            (refused(n) - before))
    h.check("event=metrics.tls_refused " in n.log(),
            "no metrics.tls_refused in the log")
    print("plain HTTP not answered, another CA refused: counted, logged")

    old = h.pem_der(os.path.join(pki, "n1.crt"))
    new = h.pem_der(os.path.join(pki, "n1-new.crt"))
    h.check(h.tls_peer_der(ctx, METRICS_IP, PORT) == old, "the first certificate")
    for ext in ("crt", "key"):
        shutil.copy(os.path.join(pki, "n1-new." + ext),
                    os.path.join(pki, "n1." + ext))
    n.proc.send_signal(signal.SIGHUP)
    h.wait_log(n, "tls.reloaded", timeout=20)
    h.check(h.tls_peer_der(ctx, METRICS_IP, PORT) == new, "metrics port after SIGHUP: not the new "
            "certificate")
    status, _ = https_get(ctx, "/metrics")
    h.check(status == 200, "/metrics after the reload: %d" % status)
    print("SIGHUP: the metrics port presents the new certificate")
    h.check(n.stop() == 0, "unclean exit")


if __name__ == "__main__":
    h.run(main)
