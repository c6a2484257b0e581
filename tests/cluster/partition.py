"""partition.py - cuts the network between groups of cluster-test nodes
with iptables, inside the test's own network namespace.

ringkvd's outgoing TCP connections are not bound to its listen address
(they leave from 127.0.0.1), so a packet's source address does not say
which node sent it. Its group does: every node runs with a group id of its
own (harness Node.gid), and a rule of iptables' owner match drops what one
node's process sends to another node's address -- internode TCP, in both
directions of every connection, and gossip UDP -- one rule per direction
and pair. The test's own client connections (the test's group) pass, so
clients still reach both sides of a cut.

The rules go into a chain of this process's own (RINGKV-P-<pid>), jumped
to from OUTPUT, so heal() is one flush and close() takes everything away;
two tests partitioning at once in one namespace each have theirs (until
2026-12-06 they shared one, and the second to start deleted the first's:
test_history then saw "no packet dropped"). Rules are added
only in a network namespace of the test's own (scripts/run-tests.sh runs
the cluster tests under `unshare --net`): outside one they would touch the
host's firewall, so Partitioner() refuses, as it does when iptables is not
installed (scripts/install-deps.sh installs it); it never skips.
"""
import atexit
import os
import shutil
import subprocess

CHAIN_PREFIX = "RINGKV-P-"
CHAIN = CHAIN_PREFIX + str(os.getpid())


def find_iptables():
    """The iptables program (PATH, then /usr/sbin and /sbin, which a
    non-root PATH lacks); raises RuntimeError if it is not installed."""
    path = os.environ.get("PATH", "") + ":/usr/sbin:/sbin"
    ipt = shutil.which("iptables", path=path)
    if ipt is None:
        raise RuntimeError("iptables is not installed (Debian package "
                           "iptables, installed by scripts/install-deps.sh): "
                           "the partitions cannot be made")
    return ipt


def private_netns():
    """(True, why) if this process's network namespace is not the host's,
    else (False, why). The host's is PID 1's; where /proc/1/ns/net cannot
    be read (PID 1 belongs to someone else), a namespace whose only
    interface is the loopback is taken for one a test made (`unshare
    --net` gives exactly that; a host has its network devices)."""
    mine = os.readlink("/proc/self/ns/net")
    try:
        init = os.readlink("/proc/1/ns/net")
    except OSError:
        init = None
    if init is not None:
        return mine != init, "this process's %s, PID 1's %s" % (mine, init)
    with open("/proc/self/net/dev") as f:
        devs = sorted(line.split(":")[0].strip() for line in f
                      if ":" in line)
    return devs == ["lo"], "PID 1's namespace unreadable; interfaces " \
        "here: %s" % ", ".join(devs)


class Partitioner:
    """Makes and heals partitions between harness Nodes, each of which must
    have its gid set before it starts."""

    def __init__(self):
        self.ipt = find_iptables()
        ok, why = private_netns()
        if not ok:
            raise RuntimeError(
                "refusing to add iptables rules outside a network namespace "
                "of the test's own (%s): run the test through "
                "scripts/run-tests.sh, or as `unshare --net sh -c 'ip link "
                "set lo up && ...'`" % why)
        # chains left by tests killed in this namespace (their process is
        # gone; a pid reused by this one too): removed
        for line in self._ipt("-S", out=True).splitlines():
            f = line.split()
            if len(f) == 2 and f[0] == "-N" and \
                    f[1].startswith(CHAIN_PREFIX):
                pid = f[1][len(CHAIN_PREFIX):]
                if pid == str(os.getpid()) or \
                        not os.path.exists("/proc/" + pid):
                    self.close(f[1])
        self._ipt("-N", CHAIN)
        self._ipt("-I", "OUTPUT", "-j", CHAIN)
        atexit.register(self.close)

    def _ipt(self, *args, check=True, out=False):
        p = subprocess.run([self.ipt, "-w"] + list(args),
                           stdout=subprocess.PIPE, stderr=subprocess.STDOUT)
        if check and p.returncode != 0:
            raise RuntimeError("iptables %s: %s" % (
                " ".join(args), p.stdout.decode(errors="replace").strip()))
        return p.stdout.decode(errors="replace") if out else p.returncode

    def cut(self, side_a, side_b):
        """No packet from a node of side_a reaches a node of side_b, nor
        the other way, until heal()."""
        for src, dsts in ((side_a, side_b), (side_b, side_a)):
            for s in src:
                for d in dsts:
                    self._ipt("-A", CHAIN, "-m", "owner", "--gid-owner",
                              str(s.gid), "-d", d.ip, "-j", "DROP")

    def heal(self):
        """Removes every cut; returns how many packets its rules dropped
        (0: the cut cut nothing)."""
        listing = self._ipt("-n", "-v", "-x", "-L", CHAIN, out=True)
        dropped = sum(int(f[0]) for f in (ln.split() for ln in
                                         listing.splitlines())
                      if len(f) > 2 and f[2] == "DROP")
        self._ipt("-F", CHAIN)
        return dropped

    def close(self, chain=CHAIN):
        """Removes the chain and the jump to it (what exists of them)."""
        self._ipt("-D", "OUTPUT", "-j", chain, check=False)
        self._ipt("-F", chain, check=False)
        self._ipt("-X", chain, check=False)
