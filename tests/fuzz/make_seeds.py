#!/usr/bin/python3
"""Seed pickles for the reader's fuzz target and smoke test.

Made by the real pickle module at protocols 0 to 5 (plus a few hand-written
Python 2 style pickles for the text opcodes Python 3 no longer writes), so
the fuzzer starts from what real programs produce. Nothing here is committed
as binary: run it at build or test time.

    make_seeds.py --dir DIR     one file per seed in DIR (libFuzzer corpus)
    make_seeds.py --pack FILE   every seed in one file for tests/fuzz/smoke.c

The pack format is "OSTSEED1", then per seed: a little-endian u32 length,
a flag byte (1: the reader must load it), the pickle bytes.

Must run with /usr/bin/python3 (the project's rule); it only pickles, never
unpickles, so the classes below need not be importable elsewhere.
"""
import collections
import datetime
import decimal
import fractions
import io
import os
import pickle
import pickletools
import struct
import sys


class Plain:
    """An instance with a __dict__."""

    def __init__(self, **kw):
        self.__dict__.update(kw)


class Slotted:
    __slots__ = ("x", "y")

    def __init__(self, x, y=None):
        self.x = x
        if y is not None:
            self.y = y


class Mixed(Plain):
    __slots__ = ("s",)


class Spec:
    """Attributes a, b, x: the fields the fuzz target's find_global gives
    classes named S... (instances then keep slots)."""

    def __init__(self, a, b=None):
        self.a = a
        if b is not None:
            self.b = b
        self.x = [self]


class SlotSpec:
    __slots__ = ("a", "x")

    def __init__(self, a):
        self.a = a
        self.x = (a, self)


class WithState:
    def __init__(self, v):
        self.v = v

    def __getstate__(self):
        return ("state", self.v)

    def __setstate__(self, st):
        self.v = st[1]


class WithNewArgs:
    def __new__(cls, a, b=0):
        o = object.__new__(cls)
        o.a, o.b = a, b
        return o

    def __getnewargs__(self):
        return (self.a, self.b)


class WithNewArgsEx:
    def __new__(cls, a, *, kw=None):
        o = object.__new__(cls)
        o.a, o.kw = a, kw
        return o

    def __getnewargs_ex__(self):
        return (self.a,), {"kw": self.kw}


class Reduced:
    def __init__(self, a, b):
        self.a, self.b = a, b

    def __reduce__(self):
        return (Reduced, (self.a, self.b))


class ReducedFull:
    """__reduce__ with state, list items and dict items."""

    def __reduce__(self):
        return (ReducedFull, (), {"st": 1}, iter([1, 2, 3]),
                iter([("k", "v"), (2, [4])]))


class MyList(list):
    pass


class MyDict(dict):
    pass


Point = collections.namedtuple("Point", "x y")


def persistent_pickle(obj, proto):
    """Pickles obj with a persistent_id for instances of Plain named p*."""
    f = io.BytesIO()

    class P(pickle.Pickler):
        def persistent_id(self, o):
            if isinstance(o, Plain) and getattr(o, "name", "").startswith("p"):
                return o.name if proto == 0 else ("oid", o.name, 7)
            return None

    P(f, protocol=proto).dump(obj)
    return f.getvalue()


def values():
    """(name, value) pairs covering the types and shapes the reader knows."""
    ints = [0, 1, -1, 127, 128, 255, 256, -256, 65535, 65536, 2**31 - 1,
            -2**31, 2**31, 2**62 - 1, -2**62, 2**62, -2**62 - 1, 2**63,
            2**64 + 5, -10**30, 10**100, 2**2000 + 1]
    floats = [0.0, -0.0, 1.5, -2.25, 1e300, 5e-324, 1 / 3,
              float("inf"), float("-inf"), float("nan")]
    strs = ["", "a", "hello world", "quote ' and \" and \\", "line\nbreak",
            "caf\u00e9", "\u20ac\u4e2d\u6587", "\U0001f600 emoji", "x" * 300,
            "\x00\x7f\x80\xff"]
    byts = [b"", b"\x00", b"abc", bytes(range(256)), b"\x80\xff" * 200]
    yield "none", None
    yield "bools", [True, False]
    yield "ints", ints
    yield "floats", floats
    yield "strs", strs
    yield "bytes", byts
    yield "bytearray", [bytearray(b"ba"), bytearray(), bytearray(300)]
    for n in range(6):
        yield f"tuple{n}", tuple(range(n))
    yield "nested_tuples", ((), ((),), (1, (2, (3, (4,)))))
    yield "list", list(range(20))
    yield "biglist", list(range(1100))  # more than one APPENDS batch
    yield "dict", {"a": 1, "b": [2, 3], 4: "four", (1, 2): None, 2.5: b"x"}
    yield "bigdict", {i: str(i) for i in range(1100)}
    yield "set", {1, 2, "three", (4, 5), frozenset({6})}
    yield "frozenset", frozenset({1, "a", b"b", None})
    yield "empty_containers", [[], {}, set(), frozenset(), (), "", b""]
    s = "shared string"
    lst = [1, 2]
    tup = (lst, s)
    yield "sharing", [s, s, lst, lst, tup, tup, {"k": tup}]
    cyc = []
    cyc.append(cyc)
    yield "cycle_list", cyc
    d = {}
    d["self"] = d
    d["list"] = [d, cyc]
    yield "cycle_dict", d
    inner = []
    t = (inner, 1)
    inner.append(t)
    yield "cycle_through_tuple", t
    p = Plain(a=1, b="two")
    p.me = p
    yield "plain_instance", p
    yield "instances", [Plain(), Plain(x=[1, 2]), Slotted(1), Slotted(1, "y"),
                        WithState([3]), WithNewArgs(1, 2), Reduced(1, "r")]
    sp = Spec(1, "two")
    yield "field_classes", [sp, Spec(sp), SlotSpec([sp]), Plain(a=sp)]
    m = Mixed(a=1)
    m.s = "slot"
    yield "mixed_slots", m
    yield "newargs_ex", WithNewArgsEx(5, kw="kw")
    yield "reduce_full", ReducedFull()
    yield "namedtuple", Point(1, [2])
    # Instances of list and dict subclasses keep their items (NEWOBJ, then
    # APPENDS/SETITEMS on the instance; _reconstructor below protocol 2).
    yield "list_dict_subclasses", [MyList([1, 2]), MyDict(a=1)]
    yield "stdlib", [datetime.date(2024, 2, 29),
                     datetime.datetime(2020, 1, 2, 3, 4, 5, 6),
                     datetime.timedelta(days=1, seconds=2),
                     decimal.Decimal("1.10"), fractions.Fraction(3, 4),
                     complex(1, -2), range(0, 10, 3), slice(1, None, 2),
                     collections.OrderedDict(a=1, b=2),
                     collections.deque([1, 2, 3], maxlen=5),
                     collections.defaultdict(list, {"x": [1]}),
                     collections.Counter("abca")]
    yield "globals", [len, dict, Plain, pickle.dumps, collections.OrderedDict]
    deep = []
    cur = deep
    for _ in range(200):
        nxt = []
        cur.append(nxt)
        cur = nxt
    yield "deep_list", deep
    yield "deep_tuple", ((((((((((1,),),),),),),),),),)
    dag = []
    x = [1]
    for _ in range(8):
        x = [x, x]
    dag.append(x)
    yield "dag", dag
    yield "record", {"id": 42, "name": "Ada", "tags": ["x", "y"],
                     "scores": (1.5, 2.5), "owner": Plain(uid=7),
                     "blob": b"\x00\x01", "when": datetime.date(2000, 1, 1)}


# Hand-written pickles with the opcodes Python 2 wrote and Python 3 does
# not: STRING, BINSTRING, SHORT_BINSTRING, INST, OBJ, INT booleans, LONG
# with an L, GET/PUT, POP, POP_MARK, DUP, PERSID.
HANDMADE = [
    ("py2_dict", b"(dp0\nS'a'\np1\nI1\nsS'b'\np2\n(lp3\nF1.5\naL12345678901234567890L\nasS'c'\np4\nI01\ns."),
    ("py2_string_escapes", b"S'a\\n\\t\\x41\\101\\\\\\'q'\np0\n."),
    ("py2_string_dq", b'S"it\'s"\np0\n.'),
    ("py2_unicode", b"Vcaf\xe9 \\u20ac \\U0001f600\np0\n."),
    ("py2_inst", b"(i__main__\nOld\np0\n(dp1\nS'x'\np2\nI3\nsb."),
    ("py2_inst_args", b"(I1\nI2\ni__main__\nPair\np0\n."),
    ("py2_obj", b"\x80\x02(c__main__\nOld\nq\x00o}q\x01U\x01xK\x03sb."),
    ("py2_obj_args", b"\x80\x02(c__main__\nPair\nK\x01K\x02o."),
    ("py2_binstring", b"\x80\x02]q\x00(U\x03abcT\x03\x00\x00\x00defU\x02\xe9\xffe."),
    ("py2_set", b"c__builtin__\nset\np0\n((lp1\nI1\naI2\natp2\nRp3\n."),
    ("py2_bytes_latin1", b"\x80\x02c_codecs\nencode\nq\x00X\x04\x00\x00\x00\xc3\xa9abq\x01X\x06\x00\x00\x00latin1q\x02\x86q\x03Rq\x04."),
    ("py2_copy_reg", b"ccopy_reg\n_reconstructor\np0\n(c__main__\nOld\np1\nc__builtin__\nobject\np2\nNtp3\nRp4\n(dp5\nS'a'\np6\nI1\nsb."),
    ("pop_dup", b"\x80\x02K\x010(K\x03K\x041\x8a\x01\x052\x86."),
    ("persid_text", b"(Poid-1\nPoid-2\nl."),
    ("binpersid", b"\x80\x02X\x03\x00\x00\x00oidQ."),
    ("get_put_text", b"(lp0\ng0\na."),
    ("long_binput", b"\x80\x02]r\x00\x01\x00\x00j\x00\x01\x00\x00\x86."),
    ("newobj_ex", b"\x80\x04\x8c\x01m\x8c\x01C\x93)}\x8c\x01k\x88s\x92."),
    ("frozenset_op", b"\x80\x04(K\x01K\x02\x91."),
    ("readonly_buffer", b"\x80\x05C\x02ab\x98."),
    ("bytearray8", b"\x80\x05\x96\x03\x00\x00\x00\x00\x00\x00\x00abc."),
    ("build_twice", b"\x80\x02c__main__\nC\n)\x81}X\x01\x00\x00\x00aK\x01sb}X\x01\x00\x00\x00bK\x02sb."),
    ("appends_on_reduce", b"\x80\x02c__main__\nL\n)R(K\x01K\x02eK\x03a."),
    ("setitems_on_reduce", b"\x80\x02c__main__\nD\n)R(K\x01K\x02u."),
]


def seeds():
    out = []
    for name, v in values():
        for proto in range(6):
            try:
                data = pickle.dumps(v, protocol=proto)
            except Exception:  # a type some protocol cannot write
                continue
            must = True
            out.append((f"{name}-p{proto}", data, must))
            if proto in (0, 2, 4):
                out.append((f"{name}-p{proto}-opt", pickletools.optimize(data), must))
    pv = [Plain(name="p1"), Plain(name="q"), Plain(name="p2")]
    pv.append(pv[0])
    for proto in range(6):
        out.append((f"persistent-p{proto}", persistent_pickle(pv, proto), True))
    for name, data in HANDMADE:
        out.append((name, data, True))
    # Inputs the reader must refuse cleanly (still useful to mutate).
    out.append(("ext1", b"\x80\x02\x82\x01.", False))
    out.append(("next_buffer", b"\x80\x05\x97.", False))
    out.append(("proto6", b"\x80\x06N.", False))
    out.append(("no_stop", b"\x80\x04N", False))
    return out


def main(argv):
    # Sets of str iterate in an order that depends on the hash seed: fix
    # it, so the same seeds (and the smoke test's inputs) come every time.
    if os.environ.get("PYTHONHASHSEED") != "0":
        env = dict(os.environ, PYTHONHASHSEED="0")
        os.execve(sys.executable, [sys.executable] + argv, env)
    if len(argv) != 3 or argv[1] not in ("--dir", "--pack"):
        sys.stderr.write(__doc__)
        return 2
    items = seeds()
    if argv[1] == "--dir":
        os.makedirs(argv[2], exist_ok=True)
        for i, (name, data, _) in enumerate(items):
            with open(os.path.join(argv[2], f"seed-{i:03d}-{name}"), "wb") as f:
                f.write(data)
    else:
        with open(argv[2], "wb") as f:
            f.write(b"OSTSEED1")
            for _, data, must in items:
                f.write(struct.pack("<IB", len(data), 1 if must else 0))
                f.write(data)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
