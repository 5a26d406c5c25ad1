"""ostore -> Python.

tests/interop_helper.c builds value graphs with the C value API and writes
each at protocols 2 to 5 three ways: framed, unframed, and framed through
the writer's sink callback (it checks in C that the sink bytes equal the
buffer bytes, and that each pickle loads back in C as an ost_same_graph
copy). Here Python loads every file and compares it with the same value
built in Python (EXPECTED below, one function per case of the helper):
equal, with the same types, float bits and sharing (compare_graphs). Each
file must also be a well-formed protocol N pickle: PROTO N first, no newer
opcode, no FRAME when unframed, FRAMEs when framed at protocol 4 and 5.

usage: test_from_c.py INTEROP_HELPER
"""
import collections
import datetime
import os
import pickletools
import subprocess
import sys
import tempfile

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
sys.setrecursionlimit(100000)

from interop_classes import (Bag, Empty, KwOnly, Node, Outer, Plain, Reduced,  # noqa: E402
                             WithState)
from interop_common import Mismatch, check_protocol, compare_graphs, hexdump, loads  # noqa: E402

NAN = float("nan")


def e_ints():
    return [0, 1, -1, 255, 256, 65535, 65536, -32768, 2 ** 31 - 1, -2 ** 31, 2 ** 31,
            -2 ** 31 - 1, 2 ** 62 - 1, -2 ** 62, 2 ** 62, -2 ** 62 - 1, 2 ** 63 - 1, -2 ** 63]


def e_bigints():
    return [2 ** 64, -2 ** 64, -2 ** 200, 2 ** 2400 + 7, -(2 ** 2400),
            123456789012345678901234567890123456789, -98765432109876543210987654321, 5, -1]


def e_floats():
    return [0.0, -0.0, 1.5, NAN, -NAN, float("inf"), float("-inf"), 1e300, 5e-324, 0.1]


def e_strs():
    return ["", "ascii", "caf\xe9", "\u20ac\u4e2d\u6587", "\U0001f600", "\ud800", "\udfff",
            "a\ud800b", "\ud800\udfff", "x" * 300, "quote'\"\\\n\x00end"]


def e_tuples():
    return [(), (1,), (1, 2), (1, 2, 3), (1, 2, 3, 4), tuple(range(10)), ((), ("a",))]


def e_dicts():
    mixed = {1: "int", 2.5: "float", (1, 2): "tuple", None: "none", b"k": "bytes",
             2 ** 64: "big", "nested": {"x": [1, {}]}}
    return [{}, {"a": 1}, mixed, {str(i): i for i in range(1500)}]


def e_key_collide():
    # Python keeps the first key object and the last value, as ostore does
    return [{1: "c"}, {True: "b"}, {2 ** 64: "b"}, {-1: "b"}]


def e_sets():
    return [set(), {1, 2, 3}, frozenset(), frozenset({"x", (1, 2)}), {frozenset({1})},
            {"a", b"a", None, 2.5}]


def e_instances():
    ws = WithState.__new__(WithState)
    ws.__setstate__((3, 4))
    return [Plain(a=1, b="x"), Empty(), Node(5, None), Plain(), ws]


def e_nested_class():
    i = Outer.Inner()
    i.x = 1
    return [Outer.Inner.Deep, i, Outer.Inner]


def e_shared():
    x = [1, 2]
    d = {"k": x}
    t = (x, "tt")
    s = "shared"
    i = Plain(v=x)
    big = 2 ** 96
    return [x, x, d, d, t, t, s, s, i, i, big, big]


def e_cycle_list():
    a = []
    a.append(a)
    return a


def e_cycle_dict_inst():
    d = {}
    i = Plain(d=d)
    d["i"] = i
    return d


def e_cycle_inst_self():
    n = Node(1)
    n.next = n
    return n


def e_cycle_tuple():
    a = []
    t = (a, 1)
    a.append(t)
    return t


def e_cycle_multi():
    a, b, c = [], {}, Plain()
    a.append(b)
    b["c"] = c
    c.a = a
    c.me = c
    return [a, b, c, (a, b, c)]


def e_reduce_state():
    r = Reduced(3, 4)
    r.extra = [5]
    return r


def e_reduce_bag():
    b = Bag()
    b.items = [1, "two"]
    b.map = {"k": "v"}
    return b


def e_nested():
    return {"list": [1, (2, 3), {"k": frozenset({4})}], "inst": Plain(x=[Plain(y=())])}


def e_deep_list():
    x = []
    for _ in range(10000):
        x = [x]
    return x


def e_deep_chain():
    head = None
    for i in range(10000):
        head = Node(i, head)
    return head


EXPECTED = {
    "none": lambda: None,
    "bools": lambda: [True, False],
    "ints": e_ints,
    "bigints": e_bigints,
    "floats": e_floats,
    "strs": e_strs,
    "bigstr": lambda: "ab\u20ac\U0001f600\ud800" * 10000,
    "bytes": lambda: [b"", b"abc", bytes(range(256)), bytes(300)],
    "bigbytes": lambda: bytes(i * 7 % 256 for i in range(100 * 1024)),
    "bytearrays": lambda: [bytearray(), bytearray(b"xyz"), bytearray(300)],
    "bigbytearray": lambda: bytearray(i * 13 % 251 for i in range(100 * 1024)),
    "tuples": e_tuples,
    "lists": lambda: [[], [1], [[[]]], list(range(2500))],
    "dicts": e_dicts,
    "key_collide": e_key_collide,
    "sets": e_sets,
    "instances": e_instances,
    "globals": lambda: [Plain, len, collections.OrderedDict],
    "nested_class": e_nested_class,
    "shared": e_shared,
    "cycle_list": e_cycle_list,
    "cycle_dict_inst": e_cycle_dict_inst,
    "cycle_inst_self": e_cycle_inst_self,
    "cycle_tuple": e_cycle_tuple,
    "cycle_multi": e_cycle_multi,
    "reduce_call": lambda: Reduced(1, "two"),
    "reduce_state": e_reduce_state,
    "reduce_odict": lambda: collections.OrderedDict([("a", 1), ("b", [2])]),
    "reduce_newobj_ex": lambda: KwOnly(5, b=6),
    "reduce_newobj": lambda: KwOnly(7),
    "reduce_date": lambda: datetime.date(2024, 1, 2),
    "reduce_bag": e_reduce_bag,
    "persistent": lambda: [("pers", "oid-1"), ("pers", 42), ("pers", ("x", 1))],
    "nested": e_nested,
    "deep_list": e_deep_list,
    "deep_chain": e_deep_chain,
    "million": lambda: list(range(1000000)),
}

VARIANTS = ("frame", "noframe", "sink")


def main():
    helper = sys.argv[1] if len(sys.argv) > 1 else None
    if not helper or not os.path.exists(helper):
        print("usage: test_from_c.py INTEROP_HELPER")
        return 2
    failures = []
    with tempfile.TemporaryDirectory(prefix="ostore-interop-") as tmp:
        p = subprocess.run([helper, "write", tmp], stdout=subprocess.PIPE,
                           stderr=subprocess.PIPE, timeout=300)
        sys.stdout.write(p.stdout.decode())
        if p.returncode != 0:
            failures.append("helper write exited %d:\n%s" % (p.returncode, p.stderr.decode()))
        want = {"%s.p%d.%s.pkl" % (name, proto, v)
                for name in EXPECTED for proto in range(2, 6) for v in VARIANTS}
        have = set(os.listdir(tmp))
        if want - have:
            failures.append("missing files: %s" % sorted(want - have)[:20])
        if have - want:
            failures.append("unexpected files (a case without a Python twin?): %s"
                            % sorted(have - want)[:20])
        checked = 0
        for name, build in EXPECTED.items():
            expected = build()
            for proto in range(2, 6):
                for v in VARIANTS:
                    fn = "%s.p%d.%s.pkl" % (name, proto, v)
                    if fn not in have:
                        continue
                    with open(os.path.join(tmp, fn), "rb") as f:
                        data = f.read()
                    ctx = "%s (%d bytes)" % (fn, len(data))
                    # The opcode scan (pickletools, pure Python) takes a
                    # second per million opcodes: the multi-megabyte
                    # pickles only get their PROTO checked.
                    bad = check_protocol(data, proto, scan=len(data) <= 2 * 1024 * 1024)
                    if bad:
                        failures.append("%s: %s" % (ctx, bad))
                        continue
                    if len(data) <= 2 * 1024 * 1024:
                        ops = [op.name for op, _, _ in pickletools.genops(data)]
                        if v == "noframe" and "FRAME" in ops:
                            failures.append("%s: FRAME opcode with framing off" % ctx)
                        # as CPython, a payload of 64 KiB or more and its
                        # header are written outside frames: a pickle of one
                        # big payload has no FRAME at all
                        big = any(len(arg.encode("utf-8", "surrogatepass")
                                      if isinstance(arg, str) else arg) >= 65536
                                  for _, arg, _ in pickletools.genops(data)
                                  if isinstance(arg, (bytes, bytearray, str)))
                        if v != "noframe" and proto >= 4 and len(data) > 64 \
                                and "FRAME" not in ops and not big:
                            failures.append("%s: no FRAME opcode with framing on" % ctx)
                    try:
                        got = loads(data)
                    except Exception as e:  # noqa: BLE001
                        failures.append("%s: Python cannot load it: %r\n%s"
                                        % (ctx, e, hexdump(data, 1024)))
                        continue
                    try:
                        compare_graphs(expected, got)
                    except Mismatch as e:
                        failures.append("%s: differs from the expected value: %s\n%s"
                                        % (ctx, e, hexdump(data, 1024)))
                    checked += 1
    print("from_c: %d cases, %d files loaded and compared" % (len(EXPECTED), checked))
    for f in failures[:30]:
        print("FAIL", f)
    if failures:
        print("from_c: %d FAILURES" % len(failures))
        return 1
    print("from_c: all passed")
    return 0


if __name__ == "__main__":
    sys.exit(main())
