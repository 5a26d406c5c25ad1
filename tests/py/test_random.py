"""Randomized differential test: Python's pickle against ostore.

With a FIXED seed, makes random value graphs of every type (scalars at
their edges, str with surrogates and astral characters, bytes,
bytearrays, tuples, lists, dicts, sets, frozensets, instances of plain
classes and of a class with __setstate__, reduce objects with arguments,
state, list items and dict items, datetimes and Decimals), with random sharing and random cycles through
lists, dicts, instances and tuples. Each graph is pickled by Python at
every protocol 0 to 5, and each pickle goes through ONE interop_helper
process (`interop_helper serve`, the length-prefixed protocol described in
tests/interop_helper.c), which loads it and writes it again at each
protocol 2 to 5 (framing on or off, buffer or sink, at random), and checks in C
that its output loads back as the same graph. Python then loads ostore's
pickle and checks it is equal to the original graph with the same sharing
(compare_graphs).

On failure it prints the seed, the case, its repr and the original pickle
in hex.

usage: test_random.py INTEROP_HELPER [SEED [COUNT]]
"""
import collections
import datetime
import decimal
import math
import os
import pickle
import random
import struct
import subprocess
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
sys.setrecursionlimit(20000)

from interop_classes import Bag, Node, Outer, Plain, Reduced, WithState  # noqa: E402
from interop_common import Mismatch, compare_graphs, hexdump, loads  # noqa: E402

SEED = 0x05702E  # fixed: a failure is reproduced by running again
COUNT = 3000

ALPHABET = (["a", "b", "z", "A", "0", " ", "'", '"', "\\", "\n", "\r", "\t", "\x00",
             "\x7f", "\x80", "\xa0", "\xe9", "\xff", "\u0100", "\u0085", "\u2028",
             "\u20ac", "\u4e2d", "\ufeff", "\uffff", "\U0001f600", "\U0010ffff",
             "\ud800", "\udbff", "\udc00", "\udfff"])

EDGE_INTS = [0, 1, -1, 255, 256, -256, 65535, 65536, 2 ** 31 - 1, -2 ** 31, 2 ** 31,
             -2 ** 31 - 1, 2 ** 62 - 1, -2 ** 62, 2 ** 62, -2 ** 62 - 1, 2 ** 63 - 1,
             -2 ** 63, 2 ** 64, -2 ** 64, 2 ** 200, -2 ** 200, 10 ** 80]

EDGE_FLOATS = [0.0, -0.0, 1.0, -1.5, float("inf"), float("-inf"), 1e300, -1e300,
               5e-324, 2.2250738585072014e-308, 0.1, 1e16, 1e-5]

ATTR_NAMES = ["a", "b", "next", "data", "x", "\xe9t\xe9", "n" * 20]


class Gen:
    """Makes one random graph. Keeps every heap object it made (pool) for
    sharing, and the mutable containers (holders) for back edges."""

    def __init__(self, rng):
        self.r = rng
        self.budget = rng.choice([4, 8, 16, 32, 64])
        self.pool = []
        self.holders = []
        self.stats = collections.Counter()

    # ---- scalars ----
    def text(self):
        r = self.r
        k = r.random()
        if k < 0.05:  # around the SHORT_BINUNICODE limit (255/256 UTF-8 bytes)
            return "x" * r.choice([254, 255, 256, 257]) + r.choice(["", "\xe9"])
        n = r.choice([0, 1, 2, 3, 5, 8, 13])
        return "".join(r.choice(ALPHABET) for _ in range(n))

    def blob(self):
        r = self.r
        n = r.choice([0, 1, 2, 7, 31, 255, 256, 300]) if r.random() < 0.995 else 70000
        return bytes(r.getrandbits(8) for _ in range(min(n, 300))) * (n // 300 + 1) \
            if n > 300 else bytes(r.getrandbits(8) for _ in range(n))

    def number(self, nan_ok=True):
        r = self.r
        k = r.random()
        if k < 0.25:
            return r.choice(EDGE_INTS)
        if k < 0.45:
            return r.randint(-1000, 1000)
        if k < 0.55:
            return r.getrandbits(r.randint(1, 400)) * r.choice([1, -1])
        if k < 0.7:
            return r.choice(EDGE_FLOATS)
        if k < 0.75 and nan_ok:
            return float("nan")
        if k < 0.85:
            return r.uniform(-1e6, 1e6)
        d = struct.unpack("<d", r.getrandbits(64).to_bytes(8, "little"))[0]
        return 1.25 if math.isnan(d) else d  # protocol 0 spells every nan "nan"

    def scalar(self, nan_ok=True):
        r = self.r
        k = r.random()
        if k < 0.08:
            return None
        if k < 0.16:
            return r.random() < 0.5
        if k < 0.5:
            return self.number(nan_ok)
        if k < 0.85:
            return self.keep(self.text())
        return self.keep(self.blob())

    def keep(self, x):
        self.pool.append(x)
        return x

    # ---- hashable values (set items, dict keys) ----
    def hashable(self, depth):
        r = self.r
        k = r.random()
        if k < 0.1:
            shared = [x for x in self.pool if _hashable(x)]
            if shared:
                self.stats["shared"] += 1
                return r.choice(shared)
        if depth < 3 and k < 0.2:
            return self.keep(tuple(self.hashable(depth + 1) for _ in range(r.randint(1, 3))))
        if depth < 3 and k < 0.25:
            return self.keep(frozenset(self.hashable(depth + 1) for _ in range(r.randint(0, 3))))
        return self.scalar(nan_ok=False)

    # ---- any value ----
    def value(self, depth):
        r = self.r
        self.budget -= 1
        if self.budget <= 0 or depth > 12:
            return self.scalar()
        k = r.random()
        if k < 0.08 and self.pool:
            self.stats["shared"] += 1
            return r.choice(self.pool)
        if k < 0.35:
            return self.scalar()
        if k < 0.47:
            n = r.choice([0, 1, 2, 3, 4, 6]) if r.random() < 0.99 else r.choice([999, 1000, 1001])
            x = []
            self.keep(x)
            self.holders.append(x)
            if n > 10:
                x.extend(self.scalar() for _ in range(n))
            else:
                x.extend(self.value(depth + 1) for _ in range(n))
            return x
        if k < 0.57:
            return self.keep(tuple(self.value(depth + 1) for _ in range(r.choice([0, 1, 2, 3, 4, 5]))))
        if k < 0.67:
            d = {}
            self.keep(d)
            self.holders.append(d)
            for _ in range(r.choice([0, 1, 2, 3, 5])):
                d[self.hashable(depth + 1)] = self.value(depth + 1)
            return d
        if k < 0.72:
            return self.keep(set(self.hashable(depth + 1) for _ in range(r.randint(0, 5))))
        if k < 0.75:
            return self.keep(frozenset(self.hashable(depth + 1) for _ in range(r.randint(0, 4))))
        if k < 0.79:
            return self.keep(bytearray(self.blob()))
        if k < 0.88:
            o = r.choice([Plain, Node, Outer.Inner])()
            if isinstance(o, Node):
                del o.data, o.next  # attributes in random order below
            self.keep(o)
            self.holders.append(o)
            for _ in range(r.choice([0, 1, 2, 3])):
                setattr(o, r.choice(ATTR_NAMES), self.value(depth + 1))
            return o
        if k < 0.91:
            o = Reduced(self.value(depth + 1), self.value(depth + 1))
            if r.random() < 0.3:
                o.extra = self.value(depth + 1)
            self.stats["reduce"] += 1
            return self.keep(o)
        if k < 0.93:
            # reduce values with list and dict items; an instance with a
            # tuple state (__setstate__); plain value objects
            self.stats["reduce"] += 1
            c = r.randrange(4)
            if c == 0:
                o = Bag()
                self.keep(o)
                o.items = [self.value(depth + 1) for _ in range(r.randint(0, 3))]
                for _ in range(r.randint(0, 2)):
                    o.map[self.hashable(depth + 1)] = self.value(depth + 1)
                return o
            if c == 1:
                return self.keep(WithState(self.value(depth + 1), self.value(depth + 1)))
            if c == 2:
                return self.keep(datetime.datetime(2000 + r.randrange(100), 1 + r.randrange(12),
                                                   1 + r.randrange(28), r.randrange(24)))
            return self.keep(decimal.Decimal(r.randint(-10 ** 30, 10 ** 30)).scaleb(-r.randrange(40)))
        od = collections.OrderedDict()
        self.keep(od)
        for _ in range(r.randint(0, 3)):
            od[self.hashable(depth + 1)] = self.value(depth + 1)
        self.stats["reduce"] += 1
        return od

    def graph(self):
        root = self.value(0)
        # back edges: random sharing and cycles through the containers
        if self.holders and self.r.random() < 0.4:
            targets = self.pool + [root]
            for _ in range(self.r.randint(1, 3)):
                h = self.r.choice(self.holders)
                t = self.r.choice(targets)
                if isinstance(h, list):
                    h.append(t)
                elif isinstance(h, dict):
                    h["back%d" % len(h)] = t
                else:
                    setattr(h, "back", t)
                self.stats["back_edges"] += 1
        return root


def _hashable(x):
    """Hashable by value (not by identity like instances), and no nan:
    set items and dict keys must pair up between two graphs."""
    t = type(x)
    if t is tuple or t is frozenset:
        return all(_hashable(e) for e in x)
    if t is float:
        return not math.isnan(x)
    return t in (type(None), bool, int, str, bytes)


def _repr(x, limit=3000):
    try:
        s = repr(x)
    except RecursionError:
        s = "<too deep for repr: %s>" % type(x).__name__
    return s if len(s) <= limit else s[:limit] + "... (%d chars)" % len(s)


class Helper:
    def __init__(self, path):
        self.p = subprocess.Popen([path, "serve"], stdin=subprocess.PIPE,
                                  stdout=subprocess.PIPE)

    def repickle(self, data, proto, flags):
        self.p.stdin.write(struct.pack("<BBQ", proto, flags, len(data)) + data)
        self.p.stdin.flush()
        h = self.p.stdout.read(9)
        if len(h) != 9:
            raise RuntimeError("the helper died (exit status %r)" % self.p.poll())
        status, n = struct.unpack("<BQ", h)
        body = self.p.stdout.read(n)
        if len(body) != n:
            raise RuntimeError("the helper's answer is truncated")
        return status, body

    def close(self):
        self.p.stdin.close()
        rc = self.p.wait(timeout=60)
        self.p.stdout.close()
        return rc


def main():
    if len(sys.argv) < 2 or not os.path.exists(sys.argv[1]):
        print("usage: test_random.py INTEROP_HELPER [SEED [COUNT]]")
        return 2
    seed = int(sys.argv[2], 0) if len(sys.argv) > 2 else SEED
    count = int(sys.argv[3]) if len(sys.argv) > 3 else COUNT
    print("random: seed %#x, %d graphs" % (seed, count), flush=True)
    rng = random.Random(seed)
    helper = Helper(sys.argv[1])
    t0 = time.time()
    totals = collections.Counter()
    failures = []
    for i in range(count):
        g = Gen(rng)
        root = g.graph()
        totals.update(g.stats)
        totals["objects"] += len(g.pool)
        for proto, out_proto in [(p, q) for p in range(6) for q in range(2, 6)]:
            if out_proto == 2:
                golden = pickle.dumps(root, proto)
                totals["pickles"] += 1
                totals["bytes"] += len(golden)
            flags = rng.randrange(4)  # 1: no framing, 2: sink mode
            totals["round trips"] += 1
            try:
                status, body = helper.repickle(golden, out_proto, flags)
            except (RuntimeError, OSError) as e:  # the helper crashed
                print("FAIL seed %#x graph %d, Python protocol %d -> ostore protocol %d "
                      "(flags %d): %s\n  value: %s\n  original pickle (hex):\n%s"
                      % (seed, i, proto, out_proto, flags, e, _repr(root), hexdump(golden)))
                return 1
            what = None
            if status != 0:
                what = "ostore answered status %d: %s" % (
                    status, body.decode("utf-8", "replace"))
            else:
                try:
                    back = loads(body)
                    compare_graphs(root, back)
                except Mismatch as e:
                    what = "round trip differs: %s" % e
                    try:
                        compare_graphs(root, pickle.loads(golden))
                    except Mismatch as e2:
                        what = "TEST BUG: Python's own round trip differs too: %s" % e2
                except Exception as e:  # noqa: BLE001
                    what = "Python cannot load ostore's pickle: %r" % (e,)
            if what:
                failures.append(
                    "FAIL seed %#x graph %d, Python protocol %d -> ostore protocol %d "
                    "(flags %d): %s\n  value: %s\n  original pickle (hex):\n%s%s"
                    % (seed, i, proto, out_proto, flags, what, _repr(root), hexdump(golden),
                       "\n  ostore's pickle (hex):\n" + hexdump(body) if status == 0 else ""))
    rc = helper.close()
    if rc != 0:
        failures.append("FAIL the helper exited with status %d (leak or I/O error)" % rc)
    print("random: %d graphs, %d objects, %d pickles (%d bytes), %d round trips, "
          "%d shared references, %d back edges, %d reduce objects, %.1f s"
          % (count, totals["objects"], totals["pickles"], totals["bytes"],
             totals["round trips"], totals["shared"], totals["back_edges"], totals["reduce"],
             time.time() - t0))
    for f in failures[:5]:
        print(f)
    if failures:
        print("random: %d FAILURES (seed %#x)" % (len(failures), seed))
        return 1
    print("random: all passed")
    return 0


if __name__ == "__main__":
    sys.exit(main())
