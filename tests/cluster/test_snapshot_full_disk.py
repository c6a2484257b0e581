#!/usr/bin/env python3
"""A snapshot on a disk without room for it fails clearly and leaves
nothing behind; the node serves on, and takes it once there is room.

One ringkvd (RF 1) keeps its data_dir on a 64 MB tmpfs mounted by the
test and holds 2,000 values of 4 KiB. A filler file leaves about 6 MB
free, less than the copy needs (the ranges' pages in use plus 16 MiB):
`ringkv snapshot full` exits 8 with `Snapshot full: failed: not enough
disk space: the copy needs about X, Y free`, snapshots/full is gone, the
node is alive and answers reads of every key. With the filler removed,
the same command makes the snapshot (`done`), and listsnapshots shows it.
"""
# ctest: alongside others
import errno
import os

import harness as h

IP = "127.0.2.84"
VALUE = b"v" * (4 << 10)


def main():
    # memtable_mb 1: the values reach the range env as they are written,
    # so the copy, not the memtable's apply, is what finds no room
    # disk_reserve_mb 0: the writes fill the disk (with a reserve they
    # would be refused first)
    h.on_tmpfs(IP, "64m", run, memtable_mb=1, disk_reserve_mb=0)


def run(c, node):
    c.start()
    c.wait_converged()
    keys = ["big%d" % i for i in range(2000)]
    h.put_all(node, keys, VALUE, cl="ONE")
    # the writes applied first; then the disk filled but 6 MiB, shrinking
    # the filler if the node took space meanwhile (it found the disk full)
    h.keys_applied([node])
    st = os.statvfs(node.data_dir)
    free = st.f_bavail * st.f_frsize
    filler = os.path.join(node.data_dir, "filler")
    with open(filler, "wb", buffering=0) as f:
        left = free - (6 << 20)
        try:
            while left > 0:
                left -= f.write(b"\0" * min(left, 1 << 20))
        except OSError as e:
            h.check(e.errno == errno.ENOSPC, "filler: %s" % e)
            f.truncate(max(0, f.tell() - (6 << 20)))
    rc, out = h.cli(node, "snapshot", "full")
    h.check(rc == 8 and "Snapshot full: failed: not enough disk space" in out,
            "snapshot on a full disk: %d %r" % (rc, out))
    print(out.strip())
    h.check(not os.path.exists(os.path.join(node.data_dir, "snapshots",
                                            "full")),
            "the failed snapshot left its folder")
    h.check(node.alive(), "the node died")
    cl = node.client()
    try:
        res = cl.pipeline([("GET", {"key": k, "cl": "ONE"}) for k in keys])
    finally:
        cl.close()
    bad = [k for k, r in zip(keys, res) if r.value != VALUE]
    h.check(not bad, "%d keys not served after the failed snapshot: %r" %
            (len(bad), bad[:5]))
    os.unlink(filler)
    rc, out = h.cli(node, "snapshot", "full")
    h.check(rc == 0 and "Snapshot full: done:" in out,
            "snapshot with room: %d %r" % (rc, out))
    print(out.strip().splitlines()[-1])
    rc, out = h.cli(node, "listsnapshots")
    h.check(rc == 0 and " ok" in out and out.splitlines()[1].startswith(
        "full "), "listsnapshots: %d %r" % (rc, out))


if __name__ == "__main__":
    h.run(main)
