#!/usr/bin/env python3
"""A history checked under faults (Jepsen-style): clients read and write a
few keys at QUORUM while a nemesis kills, freezes, restarts and partitions
nodes, and nodes join and leave; every read must return a write it may
see (history.py).

Proves: history.py's self-test passes (each anomaly kind is caught in a
hand-made history, the valid ones are accepted). Then five nodes (RF 3, a
rack each) serve six clients, each doing one operation at a time on five
keys through a node it picks at random (a read or a write, half and half,
every write a value of its own), with a short random pause between
operations, for RINGKV_HISTORY_SECONDS (60 by default). Meanwhile the
nemesis, one fault at a time, in rounds that take every kind once in a
random order: kills a node -9 and restarts it, freezes one (SIGSTOP, then
SIGCONT), restarts one (SIGTERM, which it must exit 0 from), cuts one node
off from the others and splits the nodes in two (iptables, partition.py);
a new node joins (streaming) and, once it has, another node -- any but the
two seeds -- is decommissioned, and so on while time is left (the run
goes on until the movement under way is over, and until there has been
one of each). The moving node is never
killed, frozen or restarted (partitions may cut it off). Then the faults
are healed, the clients stopped, every node reads every key at QUORUM,
and the whole history is checked: no lost write, no value from the
future, no NOT_FOUND after an acknowledged write, no read going back
behind what an earlier read saw (writes less than 2 ms apart are
concurrent: last-write-wins on clock timestamps orders them either way,
history.py). It prints the operations per outcome,
the faults with their times, and each anomaly with its operations; every
fault kind (each cut dropping packets), a join and a decommission must
have happened, and every key must have acknowledged reads and writes.

RINGKV_HISTORY_SEED (1 by default) seeds every random choice of the
nemesis, the movements and the clients (the interleaving still depends on
the machine). `make test-long` runs this test alone for 600 s with a new
seed each time, printed at the start. The history and the faults are
written to history.txt in the test's folder (kept with RINGKV_KEEP=1).
"""
# ctest: alongside others
# ctest: long
import os
import random
import re
import signal
import threading
import time
import traceback

import harness as h
import history
import partition

IPS = ["127.0.2.%d" % i for i in range(41, 46)]
JOINER_IPS = ["127.0.2.%d" % i for i in range(46, 61)]
SEEDS = IPS[:2]
KEYS = ["hk%d" % i for i in range(5)]
CLIENTS = 6
SOCKET_TIMEOUT = 5.0  # past read/write_timeout_ms: a node's own TIMEOUT first
# errors after which the store did nothing (docs/protocol.md); any other
# answer, and a connection lost after the request was sent, leave a write's
# outcome unknown
NOTHING_DONE = ("UNAVAILABLE", "OVERLOADED", "RING_STALE")
FAULTS = ("kill", "freeze", "restart", "isolate", "split")
# Writes closer than this are concurrent (history.py): the nodes share this
# host's clock, read at a millisecond's grain
EPS = 0.002


def gid_of(ip):
    return 60000 + int(ip.rsplit(".", 1)[1])


class Clock:
    """Seconds since the run started, for ops and faults alike."""

    def __init__(self):
        self.t0 = time.monotonic()

    def now(self):
        return time.monotonic() - self.t0


class Members:
    """The nodes in the cluster now (clients pick from them): the main
    thread replaces the list, clients read it."""

    def __init__(self, nodes):
        self.nodes = list(nodes)

    def add(self, n):
        self.nodes = self.nodes + [n]

    def remove(self, n):
        self.nodes = [x for x in self.nodes if x is not n]


class Client(threading.Thread):
    """One client: one operation at a time, through a connection to a node
    it picks at random (again after an error, and now and then)."""

    def __init__(self, num, members, clock, seed, stop):
        super().__init__(daemon=True)
        self.num, self.members, self.clock = num, members, clock
        self.rnd = random.Random(seed)
        self.stop = stop
        self.ops = []
        self.conn = None
        self.node = None
        self.crashed = None  # what the thread died of, if it did

    def drop(self):
        if self.conn is not None:
            self.conn.close()
        self.conn = None

    def run(self):
        try:
            self.loop()
        except Exception:  # noqa: BLE001 -- reported by main()
            self.crashed = traceback.format_exc()

    def loop(self):
        seq = 0
        while not self.stop.is_set():
            seq += 1
            oid = "c%d-%d" % (self.num, seq)
            key = self.rnd.choice(KEYS)
            kind = history.WRITE if self.rnd.random() < 0.5 else history.READ
            if self.conn is None or self.rnd.random() < 0.02:
                self.drop()
                self.node = self.rnd.choice(self.members.nodes)
                start = self.clock.now()
                try:
                    self.conn = self.node.client(timeout=SOCKET_TIMEOUT)
                except OSError as e:  # never sent: failed
                    value = oid.encode() if kind == history.WRITE else None
                    self.ops.append(history.Op(
                        oid, self.num, key, kind, value, start,
                        self.clock.now(), history.FAILED,
                        "connect: %s" % e,
                        self.node.name))
                    time.sleep(0.1)
                    continue
            op = self.one(oid, key, kind)
            self.ops.append(op)
            # after an error, often another node (a client with several
            # hosts moves on)
            if op.outcome != history.OK and self.rnd.random() < 0.5:
                self.drop()
            time.sleep(self.rnd.uniform(0, 0.02))
        self.drop()

    def one(self, oid, key, kind):
        value = oid.encode() if kind == history.WRITE else None
        start = self.clock.now()
        try:
            if kind == history.WRITE:
                r = self.conn.call("PUT", key=key, value=value, cl="QUORUM")
            else:
                r = self.conn.call("GET", key=key, cl="QUORUM")
        except (OSError, ConnectionError, RuntimeError) as e:
            end = self.clock.now()
            self.drop()
            return history.Op(oid, self.num, key, kind, value, start, end,
                              history.UNKNOWN,
                              repr(e), self.node.name)
        end = self.clock.now()
        err = r.err
        if err is None or (kind == history.READ and err == "NOT_FOUND"):
            if kind == history.READ:
                value = r.value if err is None else None
            return history.Op(oid, self.num, key, kind, value, start, end,
                              history.OK, node=self.node.name)
        outcome = history.FAILED if err in NOTHING_DONE else history.UNKNOWN
        return history.Op(oid, self.num, key, kind, value, start, end,
                          outcome, "%s %s" % (err, r.msg or ""),
                          self.node.name)


class Nemesis:
    """One fault at a time, on the main thread (a node started from another
    thread would get the harness's parent-death signal when it ended)."""

    def __init__(self, members, net, rnd, clock, events):
        self.members, self.net, self.rnd = members, net, rnd
        self.clock, self.events = clock, events
        self.round = []
        self.fault = None  # (kind, nodes)
        self.heal_at = 0
        self.next_at = 2.0
        self.done = {k: 0 for k in FAULTS}
        self.moving = None  # the node joining or leaving: not killed

    def log(self, what):
        line = "%8.3f nemesis: %s" % (self.clock.now(), what)
        self.events.append(line)
        print(line, flush=True)

    def faulted(self):
        """The nodes the current fault stops from answering."""
        if self.fault and self.fault[0] in ("kill", "freeze", "restart"):
            return self.fault[1]
        return []

    def step(self):
        now = self.clock.now()
        if self.fault is not None:
            if now >= self.heal_at:
                self.heal()
            return
        if now < self.next_at:
            return
        if not self.round:
            self.round = list(FAULTS)
            self.rnd.shuffle(self.round)
        kind = self.round.pop()
        nodes = [n for n in self.members.nodes if n.alive()]
        targets = [n for n in nodes if n is not self.moving]
        if kind in ("kill", "freeze", "restart"):
            n = self.rnd.choice(targets)
            if kind == "kill":
                n.kill9()
                self.heal_at = now + self.rnd.uniform(0.5, 4)
            elif kind == "freeze":
                n.proc.send_signal(signal.SIGSTOP)
                self.heal_at = now + self.rnd.uniform(0.5, 6)
            else:
                rc = n.stop()
                h.check(rc == 0, "%s exited %r on SIGTERM" % (n.name, rc))
                self.heal_at = self.clock.now() + self.rnd.uniform(0, 2)
            self.fault = (kind, [n])
            self.log("%s %s" % (kind, n.name))
        else:
            if kind == "isolate":
                a = [self.rnd.choice(nodes)]
            else:
                a = self.rnd.sample(nodes, len(nodes) // 2)
            b = [n for n in nodes if n not in a]
            self.net.cut(a, b)
            self.heal_at = now + self.rnd.uniform(1, 6)
            self.fault = (kind, a + b)
            self.log("%s %s | %s" % (kind, " ".join(n.name for n in a),
                                     " ".join(n.name for n in b)))
        self.done[kind] += 1

    def heal(self):
        if self.fault is None:
            return
        kind, nodes = self.fault
        if kind in ("kill", "restart"):
            nodes[0].start()
        elif kind == "freeze":
            nodes[0].proc.send_signal(signal.SIGCONT)
        else:
            dropped = self.net.heal()
            # a cut that dropped no packet was no fault at all
            h.check(dropped > 0, "%s: no packet dropped" % kind)
            kind += " (%d packets dropped)" % dropped
        self.fault = None
        self.next_at = self.clock.now() + self.rnd.uniform(0.5, 3)
        self.log("healed %s" % kind)


class Mover:
    """Joins a new node, and once it has, decommissions another (not a
    seed), and so on while time is left."""

    def __init__(self, c, members, nemesis, rnd, clock, seconds):
        self.c, self.members, self.nem = c, members, nemesis
        self.rnd, self.clock, self.seconds = rnd, clock, seconds
        self.state = "idle"
        self.next_kind = "join"
        self.next_at = seconds * 0.15
        self.node = None
        self.polled = 0
        self.joins = self.leaves = 0
        self.free_ips = list(JOINER_IPS)

    def busy(self):
        """A movement is under way, or one of each has not happened yet:
        the run goes on."""
        return self.state != "idle" or not (self.joins and self.leaves)

    def observer(self):
        ok = [n for n in self.members.nodes
              if n.alive() and n is not self.node and
              n not in self.nem.faulted()]
        return self.rnd.choice(ok) if ok else None

    def step(self):
        now = self.clock.now()
        if self.state == "idle":
            # a movement starts if there is time for it, or if none of
            # its kind has happened yet
            late = now >= self.seconds - 15 and (
                self.joins if self.next_kind == "join" else self.leaves)
            if now >= self.next_at and not late:
                if self.next_kind == "join" and self.free_ips:
                    self.join()
                elif self.next_kind == "leave":
                    self.leave()
            return
        if now < self.polled + 0.5:
            return
        self.polled = now
        if self.state == "joining":
            o = self.observer()
            try:
                st = o.status()["rows"].get(self.node.name, {}).get(5) \
                    if o else None
            except (OSError, ConnectionError, RuntimeError):
                st = None
            if st == "UN":
                self.nem.log("%s joined (UN at %s)" % (self.node.name,
                                                       o.name))
                self.joins += 1
                self.finish("leave")
        elif self.state == "leaving" and not self.node.alive():
            rc = self.node.proc.returncode
            h.check(rc == 0, "%s exited %r after decommission" %
                    (self.node.name, rc))
            self.members.remove(self.node)
            self.c.nodes.remove(self.node)
            self.nem.log("%s left and exited" % self.node.name)
            self.leaves += 1
            self.finish("join")

    def finish(self, next_kind):
        self.state, self.node, self.nem.moving = "idle", None, None
        self.next_kind = next_kind
        self.next_at = self.clock.now() + self.rnd.uniform(3, 10)

    def join(self):
        ip = self.free_ips.pop(0)
        n = h.Node(self.c, "n%d" % (len(self.c.nodes) + self.leaves + 1),
                   ip, {"rack": "r" + ip.rsplit(".", 1)[1]})
        n.gid = gid_of(ip)
        self.c.nodes.append(n)
        n.start()
        self.members.add(n)
        self.state, self.node, self.nem.moving = "joining", n, n
        self.nem.log("%s joins at %s" % (n.name, ip))

    def leave(self):
        """Decommission is refused while a node is DOWN: the faults are
        healed and the cluster converges first (the clients go on)."""
        self.nem.heal()
        self.c.wait_converged(timeout=90)
        n = self.rnd.choice([x for x in self.members.nodes
                             if x.ip not in SEEDS])
        self.nem.moving = n
        # RING_STALE (exit 5): its ring is behind for a moment (a replica
        # answered OLD_RING, a restart): asked again, as its text says.
        # "X is DOWN" (exit 6): a suspicion raised during a partition may
        # still convict a node just after the heal and the convergence
        # seen above (2026-12-07, n4 saw n1 DOWN 0.1 s after a split was
        # healed): the refusal is right; once all are UN again, asked again.
        deadline = time.time() + 30
        while True:
            rc, out = h.cli(n, "decommission")
            if time.time() > deadline:
                break
            if rc == 5 and "RING_STALE" in out:
                time.sleep(0.5)
            elif rc == 6 and "is DOWN" in out:
                self.nem.log("decommission %s refused: %s; asked again once "
                             "all are UN" % (n.name, out.strip()))
                self.c.wait_converged(timeout=90)
            else:
                break
        h.check(rc == 0 and "is leaving" in out,
                "decommission %s: %d %r" % (n.name, rc, out))
        self.state, self.node = "leaving", n
        self.nem.log("%s decommissioned: %s" % (n.name, out.strip()))


def final_reads(members, clock):
    """Every node reads every key at QUORUM, after the faults: ops of the
    history like any other."""
    ops = []
    for n in members.nodes:
        cl = n.client(timeout=SOCKET_TIMEOUT)
        try:
            for k in KEYS:
                oid = "final-%s-%s" % (n.name, k)
                start = clock.now()
                r = cl.call("GET", key=k, cl="QUORUM")
                end = clock.now()
                h.check(r.err in (None, "NOT_FOUND"),
                        "final read of %s through %s: %r" % (k, n.name, r))
                ops.append(history.Op(oid, "final", k, history.READ,
                                      r.value if r.err is None else None,
                                      start, end, history.OK, node=n.name))
        finally:
            cl.close()
    return ops


def show_context(ops, events, result, most=5):
    """For the first anomalies: the operations on the key and the faults
    around them."""
    for a in result.anomalies[:most]:
        lo = min(a.read.start, a.saw.start if a.saw else a.read.start,
                 a.witness.start if a.witness else a.read.start) - 1
        hi = a.read.end + 1
        print("-- around %s (%s, key %s): ops on the key from %.3f to %.3f"
              % (a.read.id, a.kind, a.key, lo, hi))
        for op in sorted(ops, key=lambda o: o.start):
            if op.key == a.key and op.end >= lo and op.start <= hi:
                print("   %r" % op)
        for e in events:
            t = float(e.split()[0])
            if lo - 10 <= t <= hi:
                print("   %s" % e)


def main():
    print("history.py self-test: %d hand-made histories checked" %
          history.self_test())
    seconds = float(os.environ.get("RINGKV_HISTORY_SECONDS") or 60)
    seed = int(os.environ.get("RINGKV_HISTORY_SEED") or 1)
    print("RINGKV_HISTORY_SECONDS=%g RINGKV_HISTORY_SEED=%d" %
          (seconds, seed), flush=True)
    rnd = random.Random(seed)
    try:
        net = partition.Partitioner()
    except RuntimeError as e:
        raise AssertionError(str(e))

    c = h.Cluster(IPS, seeds=SEEDS, replication="dc1:3")
    for i, n in enumerate(c.nodes):
        n.extra["rack"] = "r%d" % (i + 1)
        n.gid = gid_of(n.ip)
    c.start()
    c.wait_converged(timeout=60)

    members = Members(c.nodes)
    clock = Clock()
    events = []
    stop = threading.Event()
    clients = [Client(i + 1, members, clock, rnd.getrandbits(64), stop)
               for i in range(CLIENTS)]
    for cl in clients:
        cl.start()
    nem = Nemesis(members, net, rnd, clock, events)
    mover = Mover(c, members, nem, rnd, clock, seconds)
    try:
        while clock.now() < seconds or mover.busy():
            if clock.now() >= seconds + 180:
                # what the node moving says it waits for (a leave: ranges
                # still to push, hints still to replay), for the failure
                said = ""
                if mover.node is not None and mover.node.alive():
                    rc, said = h.cli(mover.node, "netstats")
                    said = "\n%s netstats (exit %d):\n%s" % (
                        mover.node.name, rc, said)
                h.check(False, "%d joins and %d decommissions done (now "
                        "%s) 180 s after the run's end%s" %
                        (mover.joins, mover.leaves, mover.state, said))
            nem.step()
            mover.step()
            time.sleep(0.02)
        nem.heal()
    finally:
        stop.set()
        for cl in clients:
            cl.join(timeout=30)
        net.heal()
    ran = clock.now()
    crashed = [cl.crashed for cl in clients if cl.crashed]
    h.check(not crashed, "a client thread died:\n" + "\n".join(crashed))
    c.wait_converged(timeout=90)
    ops = [op for cl in clients for op in cl.ops]
    ops += final_reads(members, clock)

    path = os.path.join(c.dir, "history.txt")
    with open(path, "w") as f:
        for op in sorted(ops, key=lambda o: o.start):
            f.write("%r\n" % op)
        f.write("\n".join(events) + "\n")
    print("%.1f s of operations; faults: %s; %d joins, %d decommissions; "
          "history in %s" % (ran, ", ".join(
              "%s %d" % (k, nem.done[k]) for k in FAULTS), mover.joins,
              mover.leaves, path))
    errors = {}
    for op in ops:
        if op.error:
            name = re.match(r"\w+", op.error).group(0)
            errors[name] = errors.get(name, 0) + 1
    print("errors: %s" % (", ".join("%s %d" % (e, n) for e, n in sorted(
        errors.items(), key=lambda x: -x[1])) or "none"))
    result = history.check(ops, eps=EPS)
    print(result.summary())
    show_context(ops, events, result)
    h.check(not result.anomalies, "%d anomalies in the history (seed %d)" %
            (len(result.anomalies), seed))
    h.check(all(nem.done[k] for k in FAULTS), "not every fault happened: "
            "%r" % nem.done)
    h.check(mover.joins and mover.leaves, "%d joins, %d decommissions" %
            (mover.joins, mover.leaves))
    for k in KEYS:
        kinds = set(op.kind for op in ops
                    if op.key == k and op.outcome == history.OK)
        h.check(kinds == {history.READ, history.WRITE},
                "key %s has acknowledged ops of kinds %r only" % (k, kinds))


if __name__ == "__main__":
    h.run(main)
