"""harness.py - start real ringkvd processes on 127.0.0.x and talk to them.

Used by the tests/cluster/test_*.py scripts (python3 standard library only).
Everything a test starts is killed when the test exits, however it exits:
atexit, SIGTERM/SIGINT handlers, and PR_SET_PDEATHSIG on every child, so a
killed test runner leaves no daemon behind. Data dirs live in a temporary
folder that is removed at exit (kept, with the logs, when RINGKV_KEEP=1).

Addresses: tests use 127.0.0.14-127.0.0.198, each test its own (the demo
uses .11-.13).
"""
import atexit
import contextlib
import ctypes
import os
import re
import shutil
import signal
import socket
import struct
import subprocess
import sys
import tempfile
import threading
import time

BIN_DIR = os.environ.get("RINGKV_BIN_DIR") or os.path.join(
    os.path.dirname(__file__), "..", "..", "build", "bin")
RINGKVD = os.path.join(BIN_DIR, "ringkvd")
RINGKV = os.path.join(BIN_DIR, "ringkv")

# ---- minimal msgpack (what the native protocol uses) ---------------------


def mp_pack(o):
    if o is None:
        return b"\xc0"
    if o is True:
        return b"\xc3"
    if o is False:
        return b"\xc2"
    if isinstance(o, int):
        if o < 0:
            if o >= -32:
                return struct.pack("b", o)
            return b"\xd3" + struct.pack(">q", o)
        if o < 128:
            return bytes([o])
        if o < 256:
            return b"\xcc" + bytes([o])
        if o < 65536:
            return b"\xcd" + struct.pack(">H", o)
        if o < 2**32:
            return b"\xce" + struct.pack(">I", o)
        return b"\xcf" + struct.pack(">Q", o)
    if isinstance(o, float):
        return b"\xcb" + struct.pack(">d", o)
    if isinstance(o, str):
        b = o.encode()
        n = len(b)
        if n < 32:
            return bytes([0xa0 | n]) + b
        if n < 256:
            return b"\xd9" + bytes([n]) + b
        if n < 65536:
            return b"\xda" + struct.pack(">H", n) + b
        return b"\xdb" + struct.pack(">I", n) + b
    if isinstance(o, (bytes, bytearray)):
        n = len(o)
        if n < 256:
            return b"\xc4" + bytes([n]) + bytes(o)
        if n < 65536:
            return b"\xc5" + struct.pack(">H", n) + bytes(o)
        return b"\xc6" + struct.pack(">I", n) + bytes(o)
    if isinstance(o, (list, tuple)):
        n = len(o)
        h = bytes([0x90 | n]) if n < 16 else (
            b"\xdc" + struct.pack(">H", n) if n < 65536 else
            b"\xdd" + struct.pack(">I", n))
        return h + b"".join(mp_pack(x) for x in o)
    if isinstance(o, dict):
        n = len(o)
        h = bytes([0x80 | n]) if n < 16 else b"\xde" + struct.pack(">H", n)
        return h + b"".join(mp_pack(k) + mp_pack(v) for k, v in o.items())
    raise TypeError(type(o))


def mp_unpack(b, i=0):
    t = b[i]
    if t < 0x80:
        return t, i + 1
    if 0x80 <= t <= 0x8f:
        return _map(b, i + 1, t & 0x0f)
    if 0x90 <= t <= 0x9f:
        return _arr(b, i + 1, t & 0x0f)
    if 0xa0 <= t <= 0xbf:
        n = t & 0x1f
        return b[i + 1:i + 1 + n].decode(errors="replace"), i + 1 + n
    if t >= 0xe0:
        return t - 256, i + 1
    if t == 0xc0:
        return None, i + 1
    if t == 0xc2:
        return False, i + 1
    if t == 0xc3:
        return True, i + 1
    if t in (0xc4, 0xc5, 0xc6, 0xd9, 0xda, 0xdb):
        w = {0xc4: 1, 0xc5: 2, 0xc6: 4, 0xd9: 1, 0xda: 2, 0xdb: 4}[t]
        n = int.from_bytes(b[i + 1:i + 1 + w], "big")
        s = b[i + 1 + w:i + 1 + w + n]
        if t >= 0xd9:
            s = s.decode(errors="replace")
        return s, i + 1 + w + n
    if t == 0xca:
        return struct.unpack(">f", b[i + 1:i + 5])[0], i + 5
    if t == 0xcb:
        return struct.unpack(">d", b[i + 1:i + 9])[0], i + 9
    if t in (0xcc, 0xcd, 0xce, 0xcf):
        w = {0xcc: 1, 0xcd: 2, 0xce: 4, 0xcf: 8}[t]
        return int.from_bytes(b[i + 1:i + 1 + w], "big"), i + 1 + w
    if t in (0xd0, 0xd1, 0xd2, 0xd3):
        w = {0xd0: 1, 0xd1: 2, 0xd2: 4, 0xd3: 8}[t]
        return int.from_bytes(b[i + 1:i + 1 + w], "big", signed=True), i + 1 + w
    if t in (0xdc, 0xdd):
        w = 2 if t == 0xdc else 4
        return _arr(b, i + 1 + w, int.from_bytes(b[i + 1:i + 1 + w], "big"))
    if t in (0xde, 0xdf):
        w = 2 if t == 0xde else 4
        return _map(b, i + 1 + w, int.from_bytes(b[i + 1:i + 1 + w], "big"))
    raise ValueError("msgpack type 0x%02x" % t)


def _arr(b, i, n):
    out = []
    for _ in range(n):
        v, i = mp_unpack(b, i)
        out.append(v)
    return out, i


def _map(b, i, n):
    out = {}
    for _ in range(n):
        k, i = mp_unpack(b, i)
        v, i = mp_unpack(b, i)
        out[k] = v
    return out, i

# ---- native protocol client ----------------------------------------------


OPS = {"HELLO": 1, "PING": 2, "GET": 10, "PUT": 11, "DEL": 12, "MGET": 13,
       "STATUS": 30, "RING": 31, "ENDPOINTS": 32, "METRICS": 33,
       "JOIN": 40, "DECOMMISSION": 41, "REMOVENODE": 42, "REPAIR": 43,
       "CLEANUP": 44, "NETSTATS": 45, "ABORT": 46, "SNAPSHOT": 47,
       "LISTSNAPSHOTS": 48, "CLEARSNAPSHOT": 49, "RELOADTLS": 50}
CLS = {"ONE": 1, "TWO": 2, "QUORUM": 3, "ALL": 4, "LOCAL_ONE": 5,
       "LOCAL_QUORUM": 6, "EACH_QUORUM": 7}


class Resp(dict):
    """A decoded response map with readable accessors."""

    @property
    def err(self):
        return self.get(3)

    @property
    def msg(self):
        return self.get(4)

    @property
    def value(self):
        return self.get(16)

    @property
    def acks(self):
        return self.get(5)


# An ssl.SSLContext every Client (and so status_of, metrics_of, Node.client)
# wraps its socket in when set: a test of nodes whose client port wants TLS
# (client_tls: required) sets it (tls_client_context).
CLIENT_TLS = None


def tls_client_context(ca_file, cert=None, key=None):
    """A client ssl.SSLContext that trusts ca_file only and checks the
    node's name (the address dialed, against the certificate's IP SANs)."""
    import ssl
    ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_CLIENT)
    ctx.load_verify_locations(ca_file)
    if cert:
        ctx.load_cert_chain(cert, key)
    return ctx


def tls_peer_der(ctx, ip, port):
    """The certificate the server at ip:port presents (DER), through ctx
    (tls_client_context)."""
    with socket.create_connection((ip, port), timeout=20) as s:
        with ctx.wrap_socket(s, server_hostname=ip) as t:
            return t.getpeercert(binary_form=True)


def pem_der(path):
    """The certificate in the PEM file path, as DER."""
    import ssl
    with open(path) as f:
        return ssl.PEM_cert_to_DER_cert(f.read())


def make_certs(directory, *nodes):
    """The test PKI of tests/tls/make-certs.sh in directory (nodes:
    "name=ip" each): ca.crt, <name>.crt/.key, wrong-ca.crt, wrong.crt,
    expired.crt, future.crt, n1-new.crt, client.crt (see the script)."""
    script = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..",
                          "tls", "make-certs.sh")
    subprocess.run(["sh", script, directory] + list(nodes), check=True)
    return directory


class Client:
    """Pipelined native-protocol client over one TCP connection (in TLS
    when tls, an ssl.SSLContext, or CLIENT_TLS is set)."""

    def __init__(self, host, port=7380, timeout=10.0, password=None,
                 user=None, tls=None):
        self.sock = socket.create_connection((host, port), timeout=timeout)
        tls = tls or CLIENT_TLS
        if tls is not None:
            try:
                self.sock = tls.wrap_socket(self.sock, server_hostname=host)
            except OSError:
                self.sock.close()
                raise
        self.sock.settimeout(timeout)
        self.buf = b""
        self.next_id = 1
        if password is not None:
            r = self.call("HELLO", password=password, user=user)
            if r.err:
                raise RuntimeError("HELLO: %s %s" % (r.err, r.msg))

    def close(self):
        try:
            self.sock.close()
        except OSError:
            pass

    def encode(self, op, key=None, value=None, cl=None, ttl=None, keys=None,
               password=None, rid=None, args=None, user=None):
        if rid is None:
            rid = self.next_id
            self.next_id += 1
        m = {1: rid, 2: OPS[op]}
        if cl:
            m[3] = CLS[cl]
        if key is not None:
            m[4] = key if isinstance(key, bytes) else key.encode()
        if value is not None:
            m[5] = value if isinstance(value, bytes) else value.encode()
        if ttl:
            m[6] = ttl
        if keys is not None:
            m[7] = [k if isinstance(k, bytes) else k.encode() for k in keys]
        if password is not None:
            m[8] = password
        if args is not None:
            m[9] = list(args)
        if user is not None:
            m[12] = user
        body = mp_pack(m)
        return rid, struct.pack(">I", len(body)) + body

    def read_frame(self):
        while True:
            if len(self.buf) >= 4:
                n = struct.unpack(">I", self.buf[:4])[0]
                if len(self.buf) >= 4 + n:
                    body = self.buf[4:4 + n]
                    self.buf = self.buf[4 + n:]
                    v, _ = mp_unpack(body)
                    return Resp(v)
            chunk = self.sock.recv(1 << 20)
            if not chunk:
                raise ConnectionError("connection closed by the node")
            self.buf += chunk

    def call(self, op, **kw):
        rid, frame = self.encode(op, **kw)
        self.sock.sendall(frame)
        r = self.read_frame()
        if r.get(1) != rid:
            raise RuntimeError("response id %r, want %r" % (r.get(1), rid))
        return r

    def pipeline(self, reqs, depth=128):
        """reqs: list of (op, kwargs). Returns responses in request order."""
        out = {}
        ids = []
        pending = 0
        i = 0
        while i < len(reqs) or pending:
            batch = b""
            while i < len(reqs) and pending < depth:
                op, kw = reqs[i]
                rid, fr = self.encode(op, **kw)
                ids.append(rid)
                batch += fr
                pending += 1
                i += 1
            if batch:
                self.sock.sendall(batch)
            r = self.read_frame()
            out[r.get(1)] = r
            pending -= 1
        return [out[rid] for rid in ids]

# ---- processes -------------------------------------------------------------


_children = []
_nodes = []  # every Node made, for the end-of-test crash check
_tmpdirs = []
_libc = None


def _pdeathsig():
    global _libc
    try:
        if _libc is None:
            _libc = ctypes.CDLL("libc.so.6", use_errno=True)
        _libc.prctl(1, signal.SIGKILL)  # PR_SET_PDEATHSIG
    except OSError:
        pass


def _cleanup():
    for p in _children:
        if p.poll() is None:
            try:
                p.kill()
            except OSError:
                pass
    for p in _children:
        try:
            p.wait(timeout=5)
        except Exception:
            pass
    if os.environ.get("RINGKV_KEEP") != "1":
        for d in _tmpdirs:
            shutil.rmtree(d, ignore_errors=True)
    else:
        for d in _tmpdirs:
            print("kept %s" % d, file=sys.stderr)


def _on_signal(signum, frame):
    _cleanup()
    os._exit(128 + signum)


atexit.register(_cleanup)
signal.signal(signal.SIGTERM, _on_signal)
signal.signal(signal.SIGINT, _on_signal)


def tmpdir(prefix="ringkv-test-"):
    d = tempfile.mkdtemp(prefix=prefix)
    _tmpdirs.append(d)
    return d


class Node:
    def __init__(self, cluster, name, ip, extra):
        self.cluster = cluster
        self.name = name
        self.ip = ip
        self.extra = dict(extra)
        self.data_dir = os.path.join(cluster.dir, name)
        self.log_path = os.path.join(cluster.dir, name + ".log")
        self.proc = None
        self.env = {}  # added to the environment ringkvd starts with
        # the group ringkvd runs as (None: the test's), so that iptables'
        # owner match can tell its packets from other nodes' (partition.py)
        self.gid = None
        self.runs = []  # every process started as this node
        self.forming = False  # its run forms a new cluster (Cluster.start)
        _nodes.append(self)

    def args(self):
        a = [RINGKVD,
             "--node_name=" + self.name,
             "--listen_address=" + self.ip,
             "--data_dir=" + self.data_dir,
             "--log_file=" + self.log_path]
        opts = dict(self.cluster.common)
        if self.forming:
            opts["auto_bootstrap"] = "false"
        opts.update(self.extra)
        for k, v in opts.items():
            a.append("--%s=%s" % (k, v))
        return a

    def start(self, no_bootstrap=False):
        """Start ringkvd as this node; no_bootstrap: with auto_bootstrap
        false, unless the node's own settings say otherwise (Cluster.start
        forming a new cluster)."""
        assert self.proc is None or self.proc.poll() is not None
        err = open(self.log_path + ".stderr", "ab")
        env = dict(os.environ)
        env.update(self.env)
        self.forming = no_bootstrap
        self.proc = subprocess.Popen(self.args(), stdin=subprocess.DEVNULL,
                                     stdout=err, stderr=err, env=env,
                                     preexec_fn=self._preexec)
        err.close()
        _children.append(self.proc)
        self.runs.append(self.proc)
        return self

    def _preexec(self):
        # before the death signal: a change of group clears it
        if self.gid is not None:
            os.setgid(self.gid)
        _pdeathsig()

    def kill9(self):
        if self.proc and self.proc.poll() is None:
            self.proc.kill()
            self.proc.wait(timeout=10)

    def stop(self, timeout=20):
        """SIGTERM and wait: returns the exit status."""
        if self.proc and self.proc.poll() is None:
            self.proc.terminate()
            return self.proc.wait(timeout=timeout)
        return self.proc.returncode if self.proc else None

    def alive(self):
        return self.proc is not None and self.proc.poll() is None

    @property
    def client_port(self):
        return int(self.cluster.common.get("client_port", 7380))

    def client(self, **kw):
        return Client(self.ip, self.client_port, **kw)

    def log(self):
        try:
            with open(self.log_path, errors="replace") as f:
                return f.read()
        except OSError:
            return ""

    def status(self, password=None):
        return status_of(self.ip, self.client_port, password)

    def metrics(self, password=None):
        return metrics_of(self.ip, self.client_port, password)


def _call_once(ip, port, op, password):
    c = Client(ip, port, timeout=5, password=password)
    try:
        return c.call(op)
    finally:
        c.close()


def status_of(ip, port=7380, password=None):
    """STATUS of the node at ip: epoch, fingerprint and rows by node name."""
    r = _call_once(ip, port, "STATUS", password)
    if r.err:
        raise RuntimeError("STATUS: %s" % r.err)
    rows = {}
    for row in r.get(34, []):
        rows[row.get(1)] = row
    return {"epoch": r.get(32), "fingerprint": r.get(33), "rows": rows}


def metrics_of(ip, port=7380, password=None):
    """The metrics of the node at ip: {"name{labels}": value}."""
    r = _call_once(ip, port, "METRICS", password)
    out = {}
    for line in (r.get(38) or "").splitlines():
        if line.startswith("#") or not line.strip():
            continue
        k, _, v = line.rpartition(" ")
        try:
            out[k] = float(v)
        except ValueError:
            pass
    return out


class Cluster:
    """A set of nodes sharing options. `common` holds --key=value settings
    for every node."""

    def __init__(self, ips, names=None, seeds=None, secret=b"test-secret\n",
                 **common):
        self.dir = tmpdir()
        self.secret_path = os.path.join(self.dir, "secret")
        with open(self.secret_path, "wb") as f:
            f.write(secret)
        self.common = {
            "cluster_name": "test",
            "cluster_secret_file": self.secret_path,
            "gossip_interval_ms": 200,
            # a fresh node listens 5 rounds (1 s), not the default 2 s
            "ring_delay_ms": 0,
            "resp_port": 0,
            "metrics_port": 0,
            "read_timeout_ms": 1500,
            "write_timeout_ms": 1500,
            "connect_timeout_ms": 500,
            "num_tokens": 8,
        }
        self.common["seeds"] = ",".join(seeds or ips[:2])
        self.common.update(common)
        names = names or ["n%d" % (i + 1) for i in range(len(ips))]
        self.nodes = [Node(self, n, ip, {}) for n, ip in zip(names, ips)]

    def start(self):
        """Start every node. The first start of a new cluster (no node has
        run yet) forms it the way an operator forms a new cluster: its
        nodes take their tokens without streaming (auto_bootstrap false for
        that run only, as for the first nodes of a new Cassandra cluster):
        there is nothing to stream yet, and each join's streaming delay (2
        s) was spent waiting for nothing. A node started later, or a test
        that sets auto_bootstrap, bootstraps as it says."""
        forming = (not any(n.runs for n in self.nodes) and
                   "auto_bootstrap" not in self.common)
        for n in self.nodes:
            n.start(no_bootstrap=forming)
        return self

    def wait_converged(self, timeout=60, up=None):
        """Wait until every running node reports every node of `up` (default:
        the running ones) as UN, with one fingerprint."""
        want = set(n.name for n in (up or [x for x in self.nodes
                                           if x.alive()]))
        deadline = time.time() + timeout
        last = None
        while time.time() < deadline:
            try:
                fps = set()
                ok = True
                for n in self.nodes:
                    if not n.alive():
                        continue
                    st = n.status()
                    fps.add((st["epoch"], st["fingerprint"]))
                    states = {k: v.get(5) for k, v in st["rows"].items()}
                    if any(states.get(w) != "UN" for w in want):
                        ok = False
                        last = (n.name, states)
                        break
                if ok and len(fps) == 1:
                    return fps.pop()
                if ok:
                    last = ("fingerprints differ", fps)
            except (OSError, ConnectionError, RuntimeError) as e:
                last = repr(e)
            time.sleep(0.3)
        self.dump_logs()
        raise AssertionError("cluster did not converge: %r" % (last,))

    def wait_state(self, observer, name, code, timeout=60):
        deadline = time.time() + timeout
        last = None
        while time.time() < deadline:
            try:
                st = observer.status()
                last = st["rows"].get(name, {}).get(5)
                if last == code or (isinstance(code, tuple) and last in code):
                    return
            except (OSError, ConnectionError, RuntimeError) as e:
                last = repr(e)
            time.sleep(0.2)
        self.dump_logs()
        raise AssertionError("%s never saw %s as %s (last %r)" %
                             (observer.name, name, code, last))

    def dump_logs(self, lines=40):
        for n in self.nodes:
            print("---- %s (%s) last log lines" % (n.name, n.ip),
                  file=sys.stderr)
            for l in n.log().splitlines()[-lines:]:
                print(l, file=sys.stderr)
            try:
                with open(n.log_path + ".stderr", errors="replace") as f:
                    err = f.read()[-3000:]
                if err.strip():
                    print("stderr: " + err, file=sys.stderr)
            except OSError:
                pass


def racked_cluster(ips, node_extra=None, **common):
    """A started, converged cluster seeded by ips[0], each node in a rack of
    its own (r1, r2, ...); `common` as for Cluster; node_extra: {index:
    {setting: value}} for single nodes."""
    c = Cluster(ips, seeds=ips[:1], **common)
    for i, n in enumerate(c.nodes):
        n.extra["rack"] = "r%d" % (i + 1)
        n.extra.update((node_extra or {}).get(i, {}))
    c.start()
    c.wait_converged(timeout=60)
    return c


def asan_options(opt):
    """ASAN_OPTIONS as in this environment, plus opt (for ringkvd started
    from here; an ASan build reads it, a plain one ignores it)."""
    cur = os.environ.get("ASAN_OPTIONS", "")
    return cur + ":" + opt if cur else opt


def on_tmpfs(ip, size, run, **common):
    """A one-node cluster (RF 1, options `common`) at ip whose data_dir is
    a tmpfs of `size` ("64m") that the test mounts (and unmounts after,
    lazily: the node may still hold files there until the harness stops
    it); runs run(cluster, node), not started yet. Where it cannot mount
    (needs root) prints SKIP and returns without running it."""
    c = Cluster([ip], seeds=[ip], replication="dc1:1", **common)
    node = c.nodes[0]
    with tmpfs(node.data_dir, size) as mounted:
        if not mounted:
            print("SKIP: cannot mount a tmpfs (needs root)")
            return
        run(c, node)


def fault_disk(node, var, name):
    """Start `node` with faultsync.c preloaded, its disk syncs faulting
    while a marker file exists: var RINGKV_FAULT_SYNC (they fail with EIO)
    or RINGKV_FAULT_SYNC_HANG (they wait). Returns the marker's path (in
    the cluster's directory, named `name`); create it to start the fault,
    remove it to end it."""
    lib = os.environ.get("RINGKV_FAULTSYNC")
    check(lib and os.path.exists(lib),
          "RINGKV_FAULTSYNC (the faultsync library) not found: %r" % lib)
    marker = os.path.join(node.cluster.dir, name)
    # the sanitizer runtime need not come first in the list
    node.env = {"LD_PRELOAD": lib, var: marker,
                "ASAN_OPTIONS": asan_options("verify_asan_link_order=0")}
    return marker


def fake_host(node, name, ip, delay_ms=0):
    """Start `node` with fakedns.c preloaded: the host name `name`
    resolves to `ip` except while a marker file exists (then it does not
    resolve at all), each answer after delay_ms, and no DNS query is made
    for it. Returns the marker's path, created here: remove it to let the
    name resolve."""
    lib = os.environ.get("RINGKV_FAKEDNS")
    check(lib and os.path.exists(lib),
          "RINGKV_FAKEDNS (the fakedns library) not found: %r" % lib)
    marker = os.path.join(node.cluster.dir, "dns-down-" + name)
    open(marker, "w").close()
    node.env = {"LD_PRELOAD": lib, "RINGKV_FAKE_HOST": name,
                "RINGKV_FAKE_HOST_IP": ip, "RINGKV_FAKE_HOST_DOWN": marker,
                "ASAN_OPTIONS": asan_options("verify_asan_link_order=0")}
    if delay_ms:
        node.env["RINGKV_FAKE_HOST_DELAY_MS"] = str(delay_ms)
    return marker


def drop_udp(node, match, name):
    """Start `node` with dropudp.c preloaded: while a marker file exists,
    it drops every datagram it receives that contains the bytes `match`
    (a node name: deaf to all gossip that mentions that node). Returns the
    marker's path (in the cluster's directory, named `name`), created
    here: remove it to end the fault."""
    lib = os.environ.get("RINGKV_DROPUDP")
    check(lib and os.path.exists(lib),
          "RINGKV_DROPUDP (the dropudp library) not found: %r" % lib)
    marker = os.path.join(node.cluster.dir, name)
    open(marker, "w").close()
    node.env = {"LD_PRELOAD": lib, "RINGKV_DROP_UDP": marker,
                "RINGKV_DROP_UDP_MATCH": match,
                "ASAN_OPTIONS": asan_options("verify_asan_link_order=0")}
    return marker


def fake_clock(node, offset_ms):
    """Start `node` with fakeclock.c preloaded: its wall clock (not its
    monotonic one) runs offset_ms ahead of the real one (behind if
    negative). Start it without: node.env = {}."""
    lib = os.environ.get("RINGKV_FAKECLOCK")
    check(lib and os.path.exists(lib),
          "RINGKV_FAKECLOCK (the fakeclock library) not found: %r" % lib)
    node.env = {"LD_PRELOAD": lib,
                "RINGKV_FAKE_CLOCK_OFFSET_MS": str(int(offset_ms)),
                "ASAN_OPTIONS": asan_options("verify_asan_link_order=0")}


def small_asan_quarantine():
    """Keep ASan's quarantine (256 MiB by default) small in nodes started
    after this, so their RSS measures the daemon, not ASan."""
    os.environ["ASAN_OPTIONS"] = asan_options("quarantine_size_mb=16")


def rss_kb(pid):
    """Resident memory of a process, KiB (0 if /proc does not say)."""
    with open("/proc/%d/status" % pid) as f:
        for line in f:
            if line.startswith("VmRSS:"):
                return int(line.split()[1])
    return 0


def peak_rss_reset(pid):
    """Restart a process's peak resident memory (VmHWM) at its current
    resident memory (Linux >= 4.0: clear_refs 5)."""
    with open("/proc/%d/clear_refs" % pid, "w") as f:
        f.write("5")


def peak_rss_kb(pid):
    """Peak resident memory of a process since it started or since
    peak_rss_reset(), KiB (0 if /proc does not say)."""
    with open("/proc/%d/status" % pid) as f:
        for line in f:
            if line.startswith("VmHWM:"):
                return int(line.split()[1])
    return 0


def wait_served(node, served, timeout=60, every=0.3):
    """Calls served(node) every `every` seconds until it returns without
    raising (a node that has just started refuses, or answers UNAVAILABLE
    until it has joined); fails after timeout seconds with the last
    error."""
    deadline = time.time() + timeout
    while True:
        try:
            return served(node)
        except (OSError, RuntimeError, AssertionError, ConnectionError) as e:
            check(time.time() < deadline, "%s never served: %r" %
                  (node.name, e))
            time.sleep(every)


def client_when_open(node, within=30, **kw):
    """A client of node (Node.client's kw) as soon as its client port
    accepts, tried every 10 ms for up to `within` seconds: for tests that
    act from the moment a restarted node serves."""
    return wait_served(node, lambda n: n.client(**kw), within, every=0.01)


def wait_metric(node, name, want, timeout=20):
    """Poll node's metric `name` until it reaches `want` or timeout
    seconds pass; returns the last value read."""
    deadline = time.time() + timeout
    while True:
        got = node.metrics().get(name, 0)
        if got >= want or time.time() > deadline:
            return got
        time.sleep(0.2)


def call_served(node, op, timeout=20, **kw):
    """op through node, sent again while the node answers RING_STALE or
    UNAVAILABLE (one restarted that has not heard its peers yet) or does
    not answer, for up to timeout seconds."""
    deadline = time.time() + timeout
    while True:
        try:
            cl = node.client()
            try:
                r = cl.call(op, **kw)
            finally:
                cl.close()
        except OSError:
            r = None
        if r is not None and r.err not in ("RING_STALE", "UNAVAILABLE"):
            return r
        check(time.time() < deadline, "%s %s through %s: %r" %
              (op, kw.get("key"), node.name, r))
        time.sleep(0.1)


def resp_cmd(*args):
    """One RESP request (an array of bulk strings) from str / int / bytes."""
    args = [a if isinstance(a, bytes) else str(a).encode() for a in args]
    return b"*%d\r\n" % len(args) + b"".join(
        b"$%d\r\n%s\r\n" % (len(a), a) for a in args)


class RespConn:
    """A raw RESP connection: call() sends one request and returns its
    reply as bytes (a status, error or integer line as sent, a bulk's
    contents, `$-1` for a nil) or a list of those for an array."""

    def __init__(self, ip, port, timeout=20, tls=None):
        self.s = socket.create_connection((ip, port), timeout=timeout)
        if tls is not None:
            self.s = tls.wrap_socket(self.s, server_hostname=ip)
        self.buf = b""

    def call(self, *args):
        self.s.sendall(resp_cmd(*args))
        return self.reply()

    def _more(self, what):
        d = self.s.recv(65536)
        check(d, "connection closed " + what)
        self.buf += d

    def reply(self):
        while b"\r\n" not in self.buf:
            self._more("before a reply")
        line, _, self.buf = self.buf.partition(b"\r\n")
        if line[:1] == b"*" and int(line[1:]) >= 0:
            return [self.reply() for _ in range(int(line[1:]))]
        if line[:1] == b"$" and int(line[1:]) >= 0:
            n = int(line[1:])
            while len(self.buf) < n + 2:
                self._more("in a bulk")
            line, self.buf = self.buf[:n], self.buf[n + 2:]
        return line


def resp_serving(ip, port, timeout=30):
    """A RespConn to ip:port once the node there serves writes (a SET
    succeeds): a freshly started node refuses them until its ring is up."""
    deadline = time.time() + timeout
    while True:
        try:
            r = RespConn(ip, port)
            if r.call("SET", "ready", "1") == b"+OK":
                return r
            r.s.close()
        except OSError:
            pass
        check(time.time() < deadline, "%s never served" % ip)
        time.sleep(0.2)


def reply_later(conn, *args):
    """Send one RESP request on `conn` now; a thread collects its reply.
    Returns (thread, box): box gets "reply" (as RespConn.reply gives it) or
    "error" (what was raised) when the thread ends."""
    box = {}

    def run():
        try:
            box["reply"] = conn.reply()
        except Exception as e:  # noqa: BLE001 -- reported by the caller
            box["error"] = repr(e)

    conn.s.sendall(resp_cmd(*args))
    t = threading.Thread(target=run, daemon=True)
    t.start()
    return t, box


def stale_ring_cluster(ips, joiner_ip, joiner, n1_extra=None, **common):
    """Three nodes on `ips` (RF 3, QUORUM, RESP on 6379, a rack each, and
    any other `common` settings), the
    first (n1, with n1_extra settings) started deaf to every gossip packet
    that mentions `joiner` (drop_udp); a SET through n1 works; then a
    fourth node named `joiner` joins at joiner_ip. n1 hears the others'
    ring epoch move but never the join, so its ring stays stale. Returns
    (cluster, n1, a RESP connection to n1, the fault's marker: remove it
    and n1 hears of the join) once n1 reports ringkv_ring_stale 1."""
    c = Cluster(ips, seeds=ips[1:3], replication="dc1:3",
                default_consistency="QUORUM", resp_port=6379, **common)
    for i, n in enumerate(c.nodes):
        n.extra["rack"] = "r%d" % (i + 1)
    n1 = c.nodes[0]
    n1.extra.update(n1_extra or {})
    deaf = drop_udp(n1, joiner, "deaf-to-joiner")
    c.start()
    c.wait_converged(timeout=60)
    r1 = resp_serving(n1.ip, 6379)
    check(r1.call("SET", "before", "v0") == b"+OK", "SET before the join")
    d = Node(c, joiner, joiner_ip, {"rack": "r4"})
    c.nodes.append(d)
    d.start()
    c.wait_state(c.nodes[1], joiner, ("UJ", "UN"), timeout=60)
    got = wait_metric(n1, "ringkv_ring_stale", 1, timeout=30)
    check(got == 1, "n1's ring never went stale (ringkv_ring_stale %r)" %
          got)
    check(not n1.status()["rows"].get(joiner),
          "n1 heard of the joiner through the fault")
    return c, n1, r1, deaf


# What a sanitizer prints when it stops a process (UBSan does not recover
# in these builds), and the signals no test sends but a crash raises.
_CRASH_MARKS = ("ERROR: AddressSanitizer", "ERROR: LeakSanitizer",
                "runtime error:", "SUMMARY: UndefinedBehaviorSanitizer")
_CRASH_SIGNALS = (signal.SIGABRT, signal.SIGSEGV, signal.SIGBUS,
                  signal.SIGFPE, signal.SIGILL)


def _crashes():
    """Stop every node still running the way an operator would (SIGCONT,
    then SIGTERM) and return what went wrong with any node during the
    test: a sanitizer report in its stderr, death by a crash signal, or a
    non-zero exit from that SIGTERM. A node a test killed (SIGKILL) or
    that refused to start (bad config, busy port) did not crash."""
    found = []
    running = [n for n in _nodes if n.alive()]
    for n in running:
        n.proc.send_signal(signal.SIGCONT)
        n.proc.terminate()
    for n in _nodes:
        if n in running:
            try:
                rc = n.proc.wait(timeout=30)
            except subprocess.TimeoutExpired:
                n.kill9()
                found.append("%s did not stop within 30 s of SIGTERM" % n.name)
                continue
            if rc != 0:
                found.append("%s exited %d on SIGTERM" % (n.name, rc))
        for p in n.runs:
            if p.returncode is not None and -p.returncode in _CRASH_SIGNALS:
                found.append("%s died of signal %d" % (n.name, -p.returncode))
        try:
            with open(n.log_path + ".stderr", errors="replace") as f:
                err = f.read()
        except OSError:
            continue
        for mark in _CRASH_MARKS:
            i = err.find(mark)
            if i >= 0:
                found.append("%s stderr: %s" % (n.name, err[max(0, i - 200):
                                                            i + 1500]))
                break
    return found


@contextlib.contextmanager
def tmpfs(path, size):
    """A tmpfs of `size` (as mount takes it: "64m") on path, made if
    missing, for the with block; yields False, having mounted nothing,
    where mount is refused (it needs root). Unmounted lazily: a node may
    still hold files there until the harness stops it."""
    os.makedirs(path, exist_ok=True)
    try:
        subprocess.run(["mount", "-t", "tmpfs", "-o", "size=" + size,
                        "tmpfs", path], check=True, capture_output=True)
    except (OSError, subprocess.CalledProcessError) as e:
        print("cannot mount a tmpfs on %s (needs root): %s" % (path, e))
        yield False
        return
    try:
        yield True
    finally:
        subprocess.run(["umount", "-l", path])


def put_until_taken(client, key, value, cl, timeout, what):
    """PUT key through client until it is taken, trying again every 0.5 s
    while it is refused; fails with `what` and the last error after
    timeout seconds."""
    deadline = time.time() + timeout
    while True:
        r = client.call("PUT", key=key, value=value, cl=cl)
        if not r.err:
            return
        check(time.time() < deadline, "%s: %s %s" % (what, r.err, r.msg))
        time.sleep(0.5)


def check(cond, what):
    if not cond:
        raise AssertionError(what)


# ---- data checks shared by the streaming tests -------------------------


def endpoints(node, keys):
    """{key: [replica names, in order]} as node sees them."""
    cl = node.client()
    try:
        res = cl.pipeline([("ENDPOINTS", {"key": k}) for k in keys])
    finally:
        cl.close()
    return {k: [e[0] for e in r.get(36)] for k, r in zip(keys, res)}


def keys_applied(nodes, timeout=30):
    """{name: ringkv_keys} once no write waits in any node's memtable.

    ringkv_keys counts a key once per range env that holds it plus once
    per memtable write not yet applied, so a key written to an env and
    written again (a delete) before the next apply counts twice until
    then (within 10 s). Comparing counts taken while writes wait would
    compare that double count, not the store."""
    deadline = time.time() + timeout
    while True:
        ms = {n.name: n.metrics() for n in nodes}
        if all(m.get("ringkv_memtable_writes", 0) == 0 for m in ms.values()):
            break
        check(time.time() < deadline,
              "memtable writes not applied within %d s" % timeout)
        time.sleep(0.5)
    time.sleep(1.1)  # the keys figure is cached for a second
    return {n.name: n.metrics()["ringkv_keys"] for n in nodes}


def check_cleaned(nodes, before, eps):
    """After a cleanup: each node's ringkv_keys fell below before[name] and
    is at most the keys of eps ({key: replica names}, from endpoints) it
    replicates, plus a small allowance for the metric's memtable count."""
    for n in nodes:
        mine = sum(1 for k in eps if n.name in eps[k])
        after = n.metrics()["ringkv_keys"]
        check(after < before[n.name] and after <= mine + 30,
              "%s holds %r keys after cleanup (%r before); it replicates "
              "%d" % (n.name, after, before[n.name], mine))
        print("%s: %d keys before, %d after; it replicates %d" %
              (n.name, before[n.name], after, mine))


def load_keys(node, keys=3000, every=10):
    """Writes k0..k<keys-1> (value v<i>) at QUORUM through node, then
    deletes every `every`-th; returns ({live key: value}, [deleted keys])."""
    expect = {"k%d" % i: ("v%d" % i).encode() for i in range(keys)}
    cl = node.client()
    try:
        res = cl.pipeline([("PUT", {"key": k, "value": v, "cl": "QUORUM"})
                           for k, v in expect.items()])
        check(not [r for r in res if r.err], "initial writes failed")
        gone = ["k%d" % i for i in range(0, keys, every)]
        res = cl.pipeline([("DEL", {"key": k, "cl": "QUORUM"})
                           for k in gone])
        check(not [r for r in res if r.err], "deletes failed")
    finally:
        cl.close()
    for k in gone:
        del expect[k]
    return expect, gone


def put_all(node, keys, value, cl="QUORUM"):
    """Writes every key of `keys` with `value` through node at level cl,
    2,000 to a pipeline; fails (check) if any write does."""
    c = node.client()
    try:
        for b in range(0, len(keys), 2000):
            res = c.pipeline([("PUT", {"key": k, "value": value, "cl": cl})
                              for k in keys[b:b + 2000]])
            bad = [r.err for r in res if r.err]
            check(not bad, "writes failed: %r" % bad[:3])
    finally:
        c.close()


def wait_log(node, event, timeout=120, unless=None):
    """Until node's log has `event=<event> `; fails after timeout, or at
    once if `event=<unless> ` shows first (it came too late to matter)."""
    deadline = time.time() + timeout
    while "event=%s " % event not in node.log():
        check(time.time() < deadline, "%s never logged %s" %
              (node.name, event))
        check(unless is None or "event=%s " % unless not in node.log(),
              "%s logged %s before %s" % (node.name, unless, event))
        time.sleep(0.05)


def range_bytes(log, event):
    """{range: bytes} of each `event` (stream.range_done, leave.range_done)
    in log."""
    return {m.group(1): int(m.group(2)) for m in re.finditer(
        r"event=%s range=(\S+) .*bytes=(\d+)" % re.escape(event), log)}


def kill_after_first_range(node, range_event, unless, state_line,
                           wait_s=1.5):
    """Kills `node` -9 wait_s after the first `range_event` in its log
    (failing if `unless` came first) and checks that its node.state has
    `state_line` (what makes a restart go on). Returns the ranges done when
    the first came (saved by the kill: a save each gossip tick) and those
    done by the kill (the last ones perhaps not saved)."""
    wait_log(node, range_event, unless=unless)
    saved = range_bytes(node.log(), range_event)
    time.sleep(wait_s)
    done = range_bytes(node.log(), range_event)
    node.kill9()
    check(state_line in open(node.data_dir + "/node.state").read(),
          "%s's node.state lacks %r" % (node.name, state_line))
    print("%s killed after %d ranges (%d bytes)" %
          (node.name, len(done), sum(done.values())))
    return saved, done


def check_resumed(node, log, what, resumed, range_event, done_event, saved,
                  before):
    """The checks after a range movement (`what`: join, leave, removal) was
    cut short by a kill -9 of `node` and taken up again: `log` (node's,
    since the restart) has the event `resumed` with at least the ranges of
    `saved` (those done a save before the kill) done; none of them is moved
    again (`range_event`); and `done_event` counts fewer bytes than the
    whole movement needed (every range's bytes, over both runs: `before`,
    the ranges done before the kill, and those done after). Prints the
    figures."""
    m = re.search(r"event=%s ranges_done=(\d+) ranges_partly=(\d+) "
                  r"ranges=(\d+)" % re.escape(resumed), log)
    check(m is not None, "%s did not resume from its saved positions" %
          node.name)
    done, partly, ranges = map(int, m.groups())
    check(done >= len(saved),
          "%s resumed %d ranges done, %d were done a save before the kill" %
          (node.name, done, len(saved)))
    after = range_bytes(log, range_event)
    again = set(after) & set(saved)
    check(not again, "%s moved again ranges it had done: %r" %
          (node.name, sorted(again)))
    # done just before the kill, not saved yet, and again: counted once
    before = {r: b for r, b in before.items() if r not in after}
    end = re.search(r"event=%s .* bytes=(\d+)" % re.escape(done_event), log)
    check(end is not None, "%s did not log %s" % (node.name, done_event))
    moved = int(end.group(1))
    whole = sum(before.values()) + sum(after.values())
    check(moved < whole, "the resumed %s moved %d bytes, the whole %s %d" %
          (what, moved, what, whole))
    print("%s resumed %d of %d ranges done (%d partly) and moved %d of the "
          "%s's %d bytes after its restart" %
          (node.name, done, ranges, partly, moved, what, whole))


def load_big(node, expect, count, size=2000):
    """Writes b0..b<count-1>, each `size` bytes, through node at QUORUM
    (for moves that take a while) and adds them to expect."""
    keys = ["b%d" % i for i in range(count)]
    put_all(node, keys, b"x" * size)
    expect.update((k, b"x" * size) for k in keys)


def copy_reference(path):
    """The reference of the streaming and repair benchmarks: `cp -r` +
    `sync` of a live node's data directory on the same disk (tried again if
    a range the compactor rewrites vanishes under cp). Returns (seconds,
    bytes copied)."""
    for attempt in range(5):
        dst = tempfile.mkdtemp(prefix="ringkv-bench-cp-")
        t0 = time.time()
        ok = subprocess.run(["cp", "-r", path, dst],
                            stderr=subprocess.DEVNULL).returncode == 0
        subprocess.run(["sync"], check=True)
        took = time.time() - t0
        du = int(subprocess.run(["du", "-sb", dst], check=True,
                                stdout=subprocess.PIPE).stdout.split()[0])
        shutil.rmtree(dst)
        if ok:
            return took, du
        time.sleep(1)
    raise AssertionError("cp of %s kept failing" % path)


def cli(node, *args):
    """Runs `ringkv -h <node> args...`: (exit status, output)."""
    p = subprocess.run([RINGKV, "-h", node.ip] + list(args),
                       stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                       timeout=180)
    return p.returncode, p.stdout.decode(errors="replace")


def check_served(node, expect, gone):
    """Every key of expect whose replicas include node reads back through
    node at ONE (which reads its own replica first); no key of gone does.
    Returns the lists of both that node replicates."""
    eps = endpoints(node, list(expect) + list(gone))
    mine = [k for k in expect if node.name in eps[k]]
    cl = node.client()
    try:
        res = cl.pipeline([("GET", {"key": k, "cl": "ONE"}) for k in mine])
        wrong = [(k, r.err, r.value) for k, r in zip(mine, res)
                 if r.err or r.value != expect[k]]
        check(not wrong, "%s lacks %d of its %d keys: %r" %
              (node.name, len(wrong), len(mine), wrong[:5]))
        dead = [k for k in gone if node.name in eps[k]]
        res = cl.pipeline([("GET", {"key": k, "cl": "ONE"}) for k in dead])
        back = [k for k, r in zip(dead, res) if r.err != "NOT_FOUND"]
        check(not back, "%s: deleted keys came back: %r" %
              (node.name, back[:5]))
    finally:
        cl.close()
    return mine, dead


def check_served_by(nodes, expect, gone, wait_s=0):
    """check_served on each of nodes, printing what each serves; for up to
    wait_s, again each second while a node lacks keys (a node that was down
    gets the writes it missed as hints, replayed every 5 s)."""
    t0 = time.time()
    for n in nodes:
        while True:
            try:
                mine, dead = check_served(n, expect, gone)
                break
            except AssertionError as e:
                if time.time() >= t0 + wait_s:
                    raise
                print("%.0f s: %s" % (time.time() - t0, e))
                time.sleep(1)
        print("%s serves its %d keys and none of its %d deleted ones" %
              (n.name, len(mine), len(dead)))


def check_gained(nodes, expect, gone, before):
    """check_served on each of nodes; returns how many of the keys of
    `before` ({key: replicas then}) a node now serves that it did not
    replicate then (they reached it by streaming), which must be some."""
    gained = 0
    for n in nodes:
        mine, _ = check_served(n, expect, gone)
        gained += sum(1 for k in mine
                      if k in before and n.name not in before[k])
        print("%s serves its %d keys" % (n.name, len(mine)))
    check(gained > 0, "no node gained any of the keys that moved")
    return gained


class Writer(threading.Thread):
    """Writes <prefix><i> at level cl through node, 20 to a pipeline, until
    stop is set; keeps the acknowledged writes and the errors. A write
    answered RING_STALE is sent again, as a client should (the node's ring
    was behind an epoch it had heard of, for a gossip round or so while the
    ring changes; the answer means try again): `stale` counts them, and a
    write still stale after 5 s is an error."""

    def __init__(self, node, prefix, cl="QUORUM"):
        super().__init__(daemon=True)
        self.node, self.prefix, self.cl = node, prefix, cl
        self.acked, self.errors = {}, []
        self.stale = 0
        self.stop = threading.Event()

    def finish(self, allowed=(), at_least=100):
        """Stops it; fails if a write failed with an error not in
        `allowed` or fewer than at_least were acknowledged. Returns the
        acknowledged writes."""
        self.stop.set()
        self.join(timeout=60)
        bad = [(k, e) for k, e in self.errors if e not in allowed]
        check(not bad, "%d %s writes through %s failed, e.g. %r" %
              (len(bad), self.cl, self.node.name, bad[:5]))
        check(len(self.acked) >= at_least, "only %d writes acknowledged" %
              len(self.acked))
        return self.acked

    def run(self):
        cl = self.node.client()
        i = 0
        try:
            while not self.stop.is_set():
                batch = []
                for _ in range(20):
                    k = "%s%d" % (self.prefix, i)
                    batch.append((k, ("w%d" % i).encode()))
                    i += 1
                for attempt in range(100):
                    res = cl.pipeline([("PUT", {"key": k, "value": v,
                                                "cl": self.cl})
                                       for k, v in batch])
                    again = []
                    for (k, v), r in zip(batch, res):
                        if r.err == "RING_STALE" and attempt < 99:
                            again.append((k, v))
                        elif r.err:
                            self.errors.append((k, r.err))
                        else:
                            self.acked[k] = v
                    if not again:
                        break
                    self.stale += len(again)
                    batch = again
                    time.sleep(0.05)
                time.sleep(0.01)
        finally:
            cl.close()


def _print_log_tails(lines=30):
    """After a failure: the last lines of every node's log, so that a run
    whose folder is gone (CI's) still shows what the nodes did last. Gossip's
    view of its peers (event=gossip.*), which a test's faults fill the log
    with, is left out but counted."""
    for n in _nodes:
        all_lines = n.log().splitlines()
        rest = [x for x in all_lines if " event=gossip." not in x]
        tail = rest[-lines:]
        if not all_lines:
            continue
        print("---- %s (%s): last %d lines of its log, without its %d "
              "gossip.* lines ----" % (n.name, n.ip, len(tail),
                                        len(all_lines) - len(rest)))
        for line in tail:
            print(line[:400])


def run(main):
    """Run a test's main(); print PASS/FAIL and exit with its status."""
    t0 = time.time()
    try:
        main()
        crashes = _crashes()
        check(not crashes, "a node crashed:\n" + "\n".join(crashes))
    except Exception:
        import traceback
        traceback.print_exc()
        _print_log_tails()
        print("FAIL (%.1fs)" % (time.time() - t0))
        _cleanup()
        sys.exit(1)
    print("PASS (%.1fs)" % (time.time() - t0))
    _cleanup()
    sys.exit(0)
