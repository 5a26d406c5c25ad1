"""Python interop gaps of issue 12, through the CLI, with CPython as oracle.

1. Instances of dict and list subclasses (with attributes, nested, shared,
   holding themselves, http.cookies.SimpleCookie and its Morsels) pickled by
   Python at protocols 0 to 5: `ostore pickle repickle --protocol N` (2..5)
   must write a pickle that Python loads as an object of the same class,
   equal, with equal attributes, and with the same sharing.
2. Python 2 str (STRING, BINSTRING, SHORT_BINSTRING): `ostore pickle show
   --encoding ascii|latin1|bytes` prints what Python's
   pickle.loads(data, encoding=...) gives, and fails (exit 1, one line
   naming OST_EDECODE, the opcode's offset and the byte) where Python raises
   UnicodeDecodeError; ascii is the default; a bad --encoding is bad usage.

usage: test_interop_gaps.py OSTORE_CLI
"""
import http.cookies
import os
import pickle
import re
import subprocess
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

from interop_classes import DictSub, ListSub, Plain, same_subclass_object  # noqa: E402
from interop_common import compare_graphs  # noqa: E402

CLI = sys.argv[1] if len(sys.argv) > 1 else os.environ.get("OSTORE_CLI")
failures = []


def run(args, data):
    p = subprocess.run([CLI] + args, input=data, stdout=subprocess.PIPE,
                       stderr=subprocess.PIPE, timeout=120)
    return p.returncode, p.stdout, p.stderr.decode("utf-8", "replace")


def fail(what):
    failures.append(what)
    print("FAIL:", what)


# ---- 1. dict and list subclasses ----------------------------------------------

def subclass_cases():
    d = DictSub(a=1, b=[1, 2, 3])
    d.colour = "red"
    empty = DictSub()
    big = DictSub((i, str(i)) for i in range(2500))  # several SETITEMS batches
    big.n = 2500
    lst = ListSub([1, "two", 3.0])
    lst.name = "l"
    longl = ListSub(range(2100))
    one = ListSub([5])  # APPEND, not APPENDS
    selfref = DictSub()
    selfref["me"] = selfref
    selfref.also = selfref
    shared = [1, 2]
    withshared = ListSub([shared, shared])
    withshared.s = shared
    nested = DictSub(inner=ListSub([DictSub(x=1)]))
    holder = Plain(d=d, l=lst, same=d)
    cookie = http.cookies.SimpleCookie()
    cookie["session"] = "abc123"
    cookie["session"]["path"] = "/"
    cookie["theme"] = "dark"
    return {
        "dict_attrs": d, "dict_empty": empty, "dict_big": big,
        "list_attrs": lst, "list_long": longl, "list_one": one,
        "dict_self": selfref, "list_shared": withshared, "nested": nested,
        "in_plain": holder, "simple_cookie": cookie,
    }


def equal_deep(a, b):
    """Class, items and attributes agree, down the graph (iterative)."""
    todo, seen = [(a, b)], set()
    while todo:
        x, y = todo.pop()
        if id(x) in seen:
            continue
        seen.add(id(x))
        if type(x) is not type(y):
            return "type %s != %s" % (type(x).__name__, type(y).__name__)
        if isinstance(x, dict):
            if list(x.keys()) != list(y.keys()):
                return "keys %r != %r" % (list(x.keys())[:5], list(y.keys())[:5])
            todo.extend(zip(x.values(), y.values()))
        elif isinstance(x, (list, tuple)):
            if len(x) != len(y):
                return "length %d != %d" % (len(x), len(y))
            todo.extend(zip(x, y))
        elif hasattr(x, "__dict__") or isinstance(x, http.cookies.Morsel):
            pass
        elif x != y:
            return "%r != %r" % (x, y)
        if hasattr(x, "__dict__") and not isinstance(x, type):
            if sorted(vars(x)) != sorted(vars(y)):
                return "attributes %r != %r" % (sorted(vars(x)), sorted(vars(y)))
            todo.extend((vars(x)[k], vars(y)[k]) for k in vars(x))
    return None


def check_subclasses():
    for name, obj in subclass_cases().items():
        for proto in range(0, 6):
            if name == "dict_self" and proto < 2:
                continue  # Python recurses without end: dict(self) holds self
            data = pickle.dumps(obj, proto)
            want = pickle.loads(data)
            for out in (2, 3, 4, 5):
                what = "%s p%d -> p%d" % (name, proto, out)
                rc, got, err = run(["pickle", "repickle", "--protocol", str(out), "-"], data)
                if rc != 0:
                    fail("%s: exit %d: %s" % (what, rc, err.strip()))
                    break
                back = pickle.loads(got)
                why = equal_deep(want, back)
                if why is None and isinstance(want, (DictSub, ListSub)) and \
                        name != "dict_self" and not same_subclass_object(want, back):
                    why = "not the same subclass object"
                if why is None:
                    try:
                        compare_graphs(want, back)
                    except Exception as e:  # Mismatch
                        why = "sharing: %s" % e
                if why:
                    fail("%s: %s" % (what, why))
                    break
    # a protocol 2 pickle of Python 2's Cookie.SimpleCookie names Cookie,
    # as Python 2 wrote it (Python 3 maps http.cookies back to Cookie)
    data = pickle.dumps(subclass_cases()["simple_cookie"], 2)
    if b"Cookie\nSimpleCookie" not in data:
        fail("protocol 2 SimpleCookie pickle does not name Cookie.SimpleCookie")
    rc, out, err = run(["pickle", "show", "-"], data)
    if rc != 0 or b"http.cookies.SimpleCookie(" not in out or b"'session'" not in out:
        fail("show SimpleCookie: exit %d %r %s" % (rc, out[:200], err))


# ---- 2. Python 2 str ------------------------------------------------------------

PY2_PICKLES = {
    # protocol 0: STRING with escapes, as Python 2 wrote 'caf\xe9'
    "string": b"S'caf\\xe9'\np0\n.",
    "string_ascii": b"S'plain'\np0\n.",
    # protocol 1: BINSTRING and SHORT_BINSTRING, in a list
    "binstring": b"]q\x00(T\x05\x00\x00\x00na\xefveq\x01U\x03\xff\x00aq\x02e.",
    # protocol 2, a dict with a Python 2 str key and value
    "short_binstring": b"\x80\x02}q\x00U\x01kq\x01U\x02\xc3\xa9q\x02s.",
}
ERR_RE = re.compile(r"^ostore: .*OST_EDECODE at offset (\d+): .*byte 0x([0-9a-f]{2})", re.S)


def check_py2str():
    for name, data in PY2_PICKLES.items():
        for enc, flag in (("ASCII", None), ("ASCII", "ascii"), ("latin1", "latin1"),
                          ("bytes", "bytes")):
            what = "%s --encoding %s" % (name, flag)
            args = ["pickle", "show"] + (["--encoding", flag] if flag else []) + ["-"]
            rc, out, err = run(args, data)
            try:
                want = repr(pickle.loads(data, encoding=enc))
            except UnicodeDecodeError as e:
                m = ERR_RE.match(err)
                if rc != 1 or out or not m or len(err.strip().splitlines()) != 1:
                    fail("%s: Python raises %s; ostore exit %d, %r" % (what, e, rc, err))
                elif int(m.group(2), 16) != e.object[e.start]:
                    fail("%s: the error names byte 0x%s, Python 0x%02x" %
                         (what, m.group(2), e.object[e.start]))
                continue
            if rc != 0 or out.decode() != want + "\n":
                fail("%s: Python %s, ostore exit %d %r %s" % (what, want, rc, out, err))
    rc, out, err = run(["pickle", "show", "--encoding", "utf8", "-"], PY2_PICKLES["string"])
    if rc != 2 or out or "--encoding" not in err:
        fail("bad --encoding: exit %d %r" % (rc, err))
    # repickle: latin1 makes a str, bytes a bytes, written back as such
    for enc in ("latin1", "bytes"):
        rc, out, err = run(["pickle", "repickle", "--encoding", enc, "-"],
                           PY2_PICKLES["binstring"])
        want = pickle.loads(PY2_PICKLES["binstring"], encoding=enc)
        if rc != 0 or pickle.loads(out) != want:
            fail("repickle --encoding %s: exit %d %s" % (enc, rc, err))


check_subclasses()
check_py2str()
if failures:
    print("%d failures" % len(failures))
    sys.exit(1)
print("ok")
