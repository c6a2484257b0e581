"""history.py - checks a history of reads and writes of registers (one per
key), Jepsen-style, for the anomalies a QUORUM store must not show.

Used by test_history.py (python3 standard library only); `python3
history.py` runs its self-test alone.

A history is a list of Op: which client did what to which key (a read or a
write), the value written or read (None: the read found nothing,
NOT_FOUND), when the client sent it and when the answer came (seconds, on
one clock), and its outcome: ok (acknowledged), failed (refused, and the
store says nothing was done) or unknown (a timeout, a lost connection: a
write may have happened). Each write writes a value of its own, so a read
names the one write it saw.

The rules, per key (check()). A write whose outcome is failed or unknown
may take effect any time after it started, so only acknowledged writes
have an end; the key's first state, NOT_FOUND, counts as a write that
ended before anything started. For every acknowledged read R that saw
write X:
- unknown-value: X is no write of the history at all;
- future-read: X had not started when R ended;
- lost-write: a write W acknowledged before R started started after X
  ended (X was overwritten for good, yet R saw it);
- not-found: the same with X the first state: R found nothing though a
  write was acknowledged before it started;
- non-monotonic: a read R1 that ended before R started saw a write X1,
  and X ended before X1 started (R went back behind what R1 saw; R finding
  nothing after R1 saw any value is one too).
Failed and unknown reads say nothing and are only counted.

"After" in lost-write, not-found and non-monotonic means more than eps
seconds after (check(ops, eps)): ringkv orders writes by last-write-wins
on hybrid logical clock timestamps, which order two writes through
different nodes by their clocks only, so writes closer together than
the clocks' uncertainty may be ordered either way (docs/storage.md,
"Timestamps"). On one host every node reads the same clock, at a
millisecond's grain: two writes in one millisecond through two nodes
whose clocks have not met are ordered by their counters, whatever their
real order. test_history uses eps = 2 ms.

Each rule is one look-up: the acknowledged writes sorted by end with the
latest start so far, the reads sorted by end with the latest start of what
they saw so far, so a history of hundreds of thousands of operations is
checked in seconds.
"""
import bisect
import math

READ, WRITE = "read", "write"
OK, FAILED, UNKNOWN = "ok", "failed", "unknown"
KINDS = ("unknown-value", "future-read", "lost-write", "not-found",
         "non-monotonic")


class Op:
    """One operation: id (unique, e.g. "c3-17"), client, key, kind (READ
    or WRITE), value (written, or read: None is NOT_FOUND), start and end
    (seconds), outcome (OK, FAILED or UNKNOWN), error (what the store or
    the socket said) and node (the one asked), for the report."""

    __slots__ = ("id", "client", "key", "kind", "value", "start", "end",
                 "outcome", "error", "node")

    def __init__(self, id, client, key, kind, value, start, end, outcome,
                 error=None, node=None):
        self.id, self.client, self.key, self.kind = id, client, key, kind
        self.value, self.start, self.end = value, start, end
        self.outcome, self.error, self.node = outcome, error, node

    def __repr__(self):
        return "%s %s %s %r [%.4f-%.4f] %s%s%s" % (
            self.id, self.kind, self.key, self.value, self.start, self.end,
            self.outcome, " via %s" % self.node if self.node else "",
            " (%s)" % self.error if self.error else "")


class Anomaly:
    """kind (one of KINDS), key, the read, the write it saw (None for the
    first state or an unknown value) and the witness: the write (lost-write,
    not-found) or the earlier read (non-monotonic) that rules it out."""

    def __init__(self, kind, key, read, saw, witness=None):
        self.kind, self.key, self.read = kind, key, read
        self.saw, self.witness = saw, witness

    def __str__(self):
        r = self.read
        s = "%s key=%s: read %s [%.4f-%.4f]%s returned %s" % (
            self.kind, self.key, r.id, r.start, r.end,
            " via %s" % r.node if r.node else "",
            "NOT_FOUND" if r.value is None else repr(r.value))
        if self.saw is not None:
            s += " written by %s" % _span(self.saw)
        if self.kind == "future-read":
            s += ", which started after the read ended"
        elif self.kind in ("lost-write", "not-found"):
            s += ", but %s was acknowledged before the read started" % \
                _span(self.witness)
            if self.saw is not None:
                s += " and started after %s ended" % self.saw.id
        elif self.kind == "non-monotonic":
            w = self.witness
            s += ", but the earlier read %s returned %s" % (
                _span(w), repr(w.value))
            if self.saw is not None:
                s += ", written after %s ended" % self.saw.id
        elif self.kind == "unknown-value":
            s += ", which no write wrote"
        return s


def _span(w):
    return "%s [%.4f-%.4f] %s%s" % (w.id, w.start, w.end, w.outcome,
                                    " via %s" % w.node if w.node else "")


class Result:
    """counts: {(kind, outcome): n} over every op, plus (READ,
    "not-found") for the ok reads that found nothing; anomalies: a list
    of Anomaly, by read end; failed_seen: the ok reads that returned a
    value whose write had failed (allowed, but worth a look: those errors
    say nothing was done)."""

    def __init__(self):
        self.counts = {}
        self.anomalies = []
        self.failed_seen = []

    def summary(self):
        c = self.counts
        total = sum(n for (k, o), n in c.items() if o in (OK, FAILED,
                                                          UNKNOWN))
        parts = []
        for kind in (READ, WRITE):
            for o in (OK, FAILED, UNKNOWN):
                parts.append("%s %s %d" % (kind, o, c.get((kind, o), 0)))
        lines = ["%d operations checked: %s; %d of the ok reads found "
                 "nothing (NOT_FOUND)" % (total, ", ".join(parts),
                                         c.get((READ, "not-found"), 0))]
        by_kind = {}
        for a in self.anomalies:
            by_kind[a.kind] = by_kind.get(a.kind, 0) + 1
        lines.append("%d anomalies%s" % (len(self.anomalies), "".join(
            ", %s %d" % (k, by_kind[k]) for k in KINDS if k in by_kind)))
        lines.extend("  " + str(a) for a in self.anomalies)
        if self.failed_seen:
            lines.append("%d ok reads returned the value of a failed write "
                         "(allowed), e.g. %s saw %s" % (
                             len(self.failed_seen), self.failed_seen[0][0].id,
                             _span(self.failed_seen[0][1])))
        return "\n".join(lines)


# the key's first state: a write acknowledged before anything started
_FIRST = Op("first-state", None, None, WRITE, None, -math.inf, -math.inf, OK)


def _end(w):
    """When w ended, for the rules: only an acknowledged write ends."""
    return w.end if w.outcome == OK else math.inf


def _latest_start_before(ends, best, t):
    """Of the items whose end is before t (ends sorted, best[i] the item
    of ends[:i+1] with the latest start, by _started), the one with the
    latest start; None if none ended before t."""
    i = bisect.bisect_left(ends, t)
    return best[i - 1] if i else None


def _running_latest(items, start_of):
    """items sorted by end -> (their ends, the item with the latest
    start_of so far at each position)."""
    ends, best = [], []
    for it in items:
        ends.append(it.end)
        if not best or start_of(it) > start_of(best[-1]):
            best.append(it)
        else:
            best.append(best[-1])
    return ends, best


def check(ops, eps=0.0):
    """Checks a history (a list of Op, any order, any keys), writes less
    than eps seconds apart being concurrent (above). Returns a Result.
    Raises ValueError if the history is malformed: a value written twice to
    one key, or an op whose end is before its start."""
    res = Result()
    keys = {}
    for op in ops:
        if op.end < op.start:
            raise ValueError("op %s ends before it starts" % op.id)
        k = (op.kind, op.outcome)
        res.counts[k] = res.counts.get(k, 0) + 1
        if op.kind == READ and op.outcome == OK and op.value is None:
            res.counts[(READ, "not-found")] = \
                res.counts.get((READ, "not-found"), 0) + 1
        keys.setdefault(op.key, []).append(op)
    for key in sorted(keys, key=repr):
        _check_key(key, keys[key], res, eps)
    res.anomalies.sort(key=lambda a: (a.read.end, a.read.id, a.kind))
    return res


def _check_key(key, ops, res, eps):
    written = {}
    for op in ops:
        if op.kind != WRITE:
            continue
        if op.value is None or op.value in written:
            raise ValueError("key %r: value %r written twice (%s, %s)" % (
                key, op.value, written.get(op.value, _FIRST).id, op.id))
        written[op.value] = op
    acked = sorted((w for w in written.values() if w.outcome == OK),
                   key=lambda w: w.end)
    w_ends, w_best = _running_latest(acked, lambda w: w.start)
    reads = sorted((r for r in ops if r.kind == READ and r.outcome == OK),
                   key=lambda r: r.end)
    saw = {}
    for r in reads:
        saw[r.id] = _FIRST if r.value is None else written.get(r.value)
    seen = [r for r in reads if saw[r.id] is not None]
    r_ends, r_best = _running_latest(seen, lambda r: saw[r.id].start)
    for r in reads:
        x = saw[r.id]
        if x is None:
            res.anomalies.append(Anomaly("unknown-value", key, r, None))
            continue
        if x.outcome == FAILED:
            res.failed_seen.append((r, x))
        if x.start > r.end:
            res.anomalies.append(Anomaly("future-read", key, r, x))
        w = _latest_start_before(w_ends, w_best, r.start)
        if w is not None and w.start > _end(x) + eps:
            kind = "not-found" if x is _FIRST else "lost-write"
            res.anomalies.append(Anomaly(kind, key, r,
                                         None if x is _FIRST else x, w))
        r1 = _latest_start_before(r_ends, r_best, r.start)
        if r1 is not None and saw[r1.id].start > _end(x) + eps:
            res.anomalies.append(Anomaly("non-monotonic", key, r,
                                         None if x is _FIRST else x, r1))


# ---- self-test: hand-made histories ------------------------------------


def _w(id, key, start, end, outcome=OK):
    return Op(id, id.split("-")[0], key, WRITE, id.encode(), start, end,
              outcome)


def _r(id, key, saw, start, end, outcome=OK):
    return Op(id, id.split("-")[0], key, READ,
              None if saw is None else saw.encode(), start, end, outcome)


# (name, history); each must be accepted
_VALID = [
    ("sequential", [_w("a-1", "k", 0, 1), _r("b-1", "k", "a-1", 2, 3),
                    _w("a-2", "k", 4, 5), _r("b-2", "k", "a-2", 6, 7)]),
    ("nothing written yet", [_r("b-1", "k", None, 0, 1),
                             _w("a-1", "k", 2, 3)]),
    ("found nothing during the first write",
     [_w("a-1", "k", 0, 5), _r("b-1", "k", None, 1, 2),
      _r("c-1", "k", "a-1", 3, 4), _r("b-2", "k", "a-1", 6, 7)]),
    ("a read concurrent with a write sees either",
     [_w("a-1", "k", 0, 1), _w("a-2", "k", 2, 6),
      _r("b-1", "k", "a-1", 3, 4), _r("c-1", "k", "a-2", 3, 4),
      _r("b-2", "k", "a-2", 7, 8)]),
    ("a read that starts as a write is acknowledged may miss it",
     [_w("a-1", "k", 0, 1), _w("a-2", "k", 2, 3),
      _r("b-1", "k", "a-1", 3, 4)]),
    ("a read may see a write that starts as it ends",
     [_r("b-1", "k", "a-1", 0, 2), _w("a-1", "k", 2, 3)]),
    ("an unknown write takes effect late",
     [_w("a-1", "k", 0, 1), _w("a-2", "k", 2, 3, UNKNOWN),
      _r("b-1", "k", "a-1", 4, 5), _w("c-1", "k", 6, 7),
      _r("b-2", "k", "a-2", 8, 9)]),
    ("a failed write takes effect after all",
     [_w("a-1", "k", 0, 1), _w("a-2", "k", 2, 3, FAILED),
      _r("b-1", "k", "a-2", 4, 5)]),
    ("failed and unknown reads say nothing",
     [_w("a-1", "k", 0, 1), _w("a-2", "k", 2, 3),
      _r("b-1", "k", "a-1", 4, 5, UNKNOWN), _r("b-2", "k", None, 6, 7,
                                               FAILED)]),
    ("keys are apart",
     [_w("a-1", "k", 0, 1), _w("a-2", "k", 2, 3), _w("c-1", "j", 0, 1),
      _r("b-1", "j", "c-1", 4, 5), _r("b-2", "k", "a-2", 4, 5)]),
    ("two writes concurrent with each other, read either way",
     [_w("a-1", "k", 0, 3), _w("c-1", "k", 1, 2),
      _r("b-1", "k", "a-1", 4, 5), _r("b-2", "k", "c-1", 6, 7)]),
]

# (name, history, [(kind, read id, witness id or None)]): exactly these
_INVALID = [
    ("a lost write", [_w("a-1", "k", 0, 1), _w("a-2", "k", 2, 3),
                      _r("b-1", "k", "a-1", 4, 5)],
     [("lost-write", "b-1", "a-2")]),
    ("a value from the future", [_r("b-1", "k", "a-1", 0, 1),
                                 _w("a-1", "k", 2, 3, UNKNOWN)],
     [("future-read", "b-1", None)]),
    ("nothing found after an acknowledged write",
     [_w("a-1", "k", 0, 1), _r("b-1", "k", None, 2, 3)],
     [("not-found", "b-1", "a-1")]),
    ("a read goes back behind an unacknowledged write another saw",
     [_w("a-1", "k", 0, 1), _w("a-2", "k", 2, 10, UNKNOWN),
      _r("b-1", "k", "a-2", 3, 4), _r("c-1", "k", "a-1", 5, 6)],
     [("non-monotonic", "c-1", "b-1")]),
    ("nothing found after another read saw a value",
     [_w("a-1", "k", 0, 10, UNKNOWN), _r("b-1", "k", "a-1", 1, 2),
      _r("c-1", "k", None, 3, 4)],
     [("non-monotonic", "c-1", "b-1")]),
    ("a value nobody wrote", [_w("a-1", "k", 0, 1),
                              _r("b-1", "k", "z-9", 2, 3)],
     [("unknown-value", "b-1", None)]),
    ("a lost write is also a step back behind a read that saw the new one",
     [_w("a-1", "k", 0, 1), _w("a-2", "k", 2, 3),
      _r("c-1", "k", "a-2", 4, 5), _r("b-1", "k", "a-1", 6, 7)],
     [("lost-write", "b-1", "a-2"), ("non-monotonic", "b-1", "c-1")]),
    ("only the bad read of a key is reported",
     [_w("a-1", "k", 0, 1), _w("a-2", "k", 2, 3), _w("c-1", "j", 0, 1),
      _r("b-1", "j", "c-1", 4, 5), _r("b-2", "k", "a-2", 4, 5),
      _r("b-3", "k", "a-1", 6, 7), _r("b-4", "j", "c-1", 6, 7)],
     [("lost-write", "b-3", "a-2"), ("non-monotonic", "b-3", "b-2")]),
]


def self_test():
    """Runs the checker on the hand-made histories above: every valid one
    is accepted and every anomaly is reported as expected, and malformed
    histories are refused. Raises AssertionError, naming the history, if
    not; returns how many histories were checked."""
    for name, hist in _VALID:
        got = check(hist).anomalies
        if got:
            raise AssertionError("self-test %r: a valid history was "
                                 "rejected: %s" % (name, "; ".join(
                                     map(str, got))))
    for name, hist, want in _INVALID:
        got = [(a.kind, a.read.id,
                a.witness.id if a.witness is not None else None)
               for a in check(hist).anomalies]
        if sorted(got) != sorted(want):
            raise AssertionError("self-test %r: want %r, got %r" %
                                 (name, want, got))
    # writes eps apart are concurrent: the same lost write, and the same
    # step back, is accepted within eps and caught past it
    for name, near in [
            ("lost-write", [_w("a-1", "k", 0, 1), _w("a-2", "k", 1.5, 3),
                            _r("b-1", "k", "a-1", 4, 5)]),
            ("non-monotonic", [_w("a-1", "k", 0, 1),
                               _w("a-2", "k", 1.5, 10, UNKNOWN),
                               _r("b-1", "k", "a-2", 3, 4),
                               _r("c-1", "k", "a-1", 5, 6)])]:
        got = [a.kind for a in check(near, eps=0.25).anomalies]
        if check(near, eps=1).anomalies or got != [name]:
            raise AssertionError("self-test: eps not applied to %s (%r)" %
                                 (name, got))
    for name, hist in [
            ("a value written twice", [_w("a-1", "k", 0, 1),
                                       _w("a-1", "k", 2, 3)]),
            ("an op that ends before it starts", [_w("a-1", "k", 2, 1)])]:
        try:
            check(hist)
        except ValueError:
            continue
        raise AssertionError("self-test %r: not refused" % name)
    return len(_VALID) + len(_INVALID) + 4


if __name__ == "__main__":
    print("history.py self-test: %d hand-made histories checked" %
          self_test())
