"""Shared helpers of the interop tests: graph comparison with sharing,
the repr ostore prints, protocol checks of pickles, failure reporting.

Every function here is iterative or bounded in depth, because the test
graphs include 5,000-deep nestings and million-item lists.
"""
import copyreg
import os
import pickle
import pickletools
import struct
import sys
import types

HERE = os.path.dirname(os.path.abspath(__file__))
if HERE not in sys.path:
    sys.path.insert(0, HERE)

NoneType = type(None)

# Compared by type and ==; identity is not part of the structure.
ATOMIC = (NoneType, bool, int, str, bytes, complex)


# Classes and functions: the very same object on both sides.
ROUTINES = (type, types.FunctionType, types.BuiltinFunctionType)


class Mismatch(Exception):
    pass


def _slot_names(cls):
    names = []
    for k in cls.__mro__:
        s = k.__dict__.get("__slots__", ())
        if isinstance(s, str):
            s = (s,)
        names.extend(n for n in s if n not in ("__dict__", "__weakref__"))
    return names


def _tracked(x):
    """Objects whose identity must be preserved: everything that is not an
    atomic value, an empty tuple or an empty frozenset (both may be
    singletons in CPython, so their identity means nothing)."""
    t = type(x)
    if t in ATOMIC or t is float:
        return False
    if t in (tuple, frozenset) and len(x) == 0:
        return False
    return True


def canon(x):
    """A hashable key that identifies a hashable value exactly (type, float
    bits), used to pair the items of two sets."""
    t = type(x)
    if t is float:
        return ("float", struct.pack("<d", x))
    if t is tuple:
        return ("tuple", tuple(canon(e) for e in x))
    if t is frozenset:
        return ("frozenset", frozenset(canon(e) for e in x))
    if t in ATOMIC:
        return (t.__name__, x)
    return ("obj", t.__module__, t.__qualname__, x)


def _float_same(a, b):
    return struct.pack("<d", a) == struct.pack("<d", b)


def compare_graphs(a, b):
    """Checks that b is a faithful copy of a: same types everywhere, equal
    scalars (floats bit for bit, so nan and -0.0 count), dicts with equal
    keys in the same order, sets with the same items, instances of the same
    class with equal __dict__ and slots, and the SAME SHARING: a bijection
    between the identities of the containers and instances of a and of b
    (so cycles and shared objects must match exactly).

    Raises Mismatch with the path of the first difference."""
    amap, bmap = {}, {}
    keep = []  # objects whose ids are in the maps stay alive
    stack = [(a, b, "root")]
    push = stack.append
    while stack:
        x, y, path = stack.pop()
        tx, ty = type(x), type(y)
        if tx is not ty:
            raise Mismatch("%s: type %s != %s (%r vs %r)" % (
                path, tx.__name__, ty.__name__, _short(x), _short(y)))
        if tx is float:
            if not _float_same(x, y):
                raise Mismatch("%s: float %r != %r" % (path, x, y))
            continue
        if tx in ATOMIC:
            if x != y:
                raise Mismatch("%s: %r != %r" % (path, _short(x), _short(y)))
            continue
        if _tracked(x):
            ix, iy = id(x), id(y)
            mx, my = amap.get(ix), bmap.get(iy)
            if mx is not None or my is not None:
                if mx != iy or my != ix:
                    raise Mismatch("%s: sharing differs (%s object seen before "
                                   "on one side only, or paired with another)"
                                   % (path, tx.__name__))
                continue
            amap[ix] = iy
            bmap[iy] = ix
            keep.append(x)
            keep.append(y)
        if isinstance(x, ROUTINES):
            if x is not y:
                raise Mismatch("%s: %r is not %r" % (path, x, y))
            continue
        if isinstance(x, (list, tuple)):
            if len(x) != len(y):
                raise Mismatch("%s: %s of %d items != %d" % (
                    path, tx.__name__, len(x), len(y)))
            # fast path for long runs of atomic items (the million list)
            tl = list(map(type, x))
            if tl != list(map(type, y)):
                for i, (p, q) in enumerate(zip(x, y)):
                    if type(p) is not type(q):
                        raise Mismatch("%s[%d]: type %s != %s" % (
                            path, i, type(p).__name__, type(q).__name__))
            simple = set(tl) <= {int, str, bytes, NoneType, bool}
            if simple:
                if x != y:
                    for i, (p, q) in enumerate(zip(x, y)):
                        if p != q:
                            raise Mismatch("%s[%d]: %r != %r" % (path, i, _short(p), _short(q)))
            else:
                for i in range(len(x) - 1, -1, -1):
                    push((x[i], y[i], "%s[%d]" % (path, i) if len(path) < 200 else path + "[.]"))
        elif isinstance(x, dict):
            if len(x) != len(y):
                raise Mismatch("%s: dict of %d items != %d" % (path, len(x), len(y)))
            items = list(zip(x.items(), y.items()))
            for (k1, v1), (k2, v2) in reversed(items):
                p = "%s[%s]" % (path, _short(k1)) if len(path) < 200 else path + "[.]"
                push((v1, v2, p))
                push((k1, k2, p + "(key)"))
        elif isinstance(x, (set, frozenset)):
            if len(x) != len(y):
                raise Mismatch("%s: set of %d items != %d" % (path, len(x), len(y)))
            cx = {canon(e): e for e in x}
            cy = {canon(e): e for e in y}
            if cx.keys() != cy.keys():
                raise Mismatch("%s: set items differ: %r vs %r" % (path, _short(x), _short(y)))
            for k, e in cx.items():
                push((e, cy[k], path + "{item}"))
        elif isinstance(x, bytearray):
            if x != y:
                raise Mismatch("%s: %r != %r" % (path, _short(x), _short(y)))
        if isinstance(x, BaseException):
            push((x.args, y.args, path + ".args"))
        # attributes: __dict__ and __slots__ (also for list/dict subclasses)
        has_dict = hasattr(x, "__dict__") and not isinstance(x, type)
        slots = _slot_names(tx)
        if has_dict:
            dx, dy = vars(x), vars(y)
            if list(dx.keys()) != list(dy.keys()):
                raise Mismatch("%s: attributes %r != %r" % (path, list(dx), list(dy)))
            for k in reversed(list(dx)):
                push((dx[k], dy[k], "%s.%s" % (path, k)))
        for s in slots:
            hx, hy = hasattr(x, s), hasattr(y, s)
            if hx != hy:
                raise Mismatch("%s.%s: set on one side only" % (path, s))
            if hx:
                push((getattr(x, s), getattr(y, s), "%s.%s" % (path, s)))
        if not (has_dict or slots or isinstance(
                x, (list, tuple, dict, set, frozenset, bytearray))):
            # value objects without attributes (date, Decimal, ...)
            if x != y:
                raise Mismatch("%s: %r != %r" % (path, x, y))
    return True


def _short(x, n=120):
    try:
        r = repr(x)
    except RecursionError:
        r = "<%s>" % type(x).__name__
    return r if len(r) <= n else r[: n - 3] + "..."


# ---- the repr ostore prints ---------------------------------------------

OST_REPR_MAX_DEPTH = 1000
OST_REPR_SHORT = 64  # an immutable value of longer text is labelled when shared
OST_REPR_INT_DIGITS = 4300  # an int of more decimal digits prints in hex


def int_text(v):
    """An int as ostore prints it: Python's repr, or hex(v) when the
    decimal text would have more than OST_REPR_INT_DIGITS digits."""
    limit = getattr(sys, "get_int_max_str_digits", lambda: 0)()
    if limit:
        sys.set_int_max_str_digits(0)
    try:
        s = repr(v)
    finally:
        if limit:
            sys.set_int_max_str_digits(limit)
    return s if len(s.lstrip("-")) <= OST_REPR_INT_DIGITS else hex(v)


class _Long(Exception):
    """A plain print met a mutable value or passed OST_REPR_SHORT bytes."""


def ost_repr(x):
    """The text `ostore pickle show` prints for a value that ostore reads as
    plain data: Python's repr for scalars, str, bytes, bytearray and the
    containers; instances of plain classes as module.Name(attr=value, ...)
    (state None: module.Name(); non-dict state: module.Name(__state__=...));
    cycles as [...], {...}, (...) or ...; deeper than 1000 levels as <...>.
    Sets print in the order their items came in the pickle, which is
    Python's iteration order of the set that was pickled. An int of more
    than 4300 decimal digits prints as hex(v).

    An object reached more than once prints in full the first time, after a
    label #N=, and as #N# afterwards (docs/pickle.md): every list, dict,
    set, bytearray and instance, and an immutable value (str, bytes, tuple,
    frozenset) whose text is longer than 64 bytes or holds a mutable value.
    A short immutable value prints in full each time. Identity is Python's:
    Python's pickler memoizes every object here but ints, floats and empty
    tuples, so what it shares ostore reads back shared. The same two passes
    as serializer/repr.c: the first finds the shared objects, the second
    prints."""
    seen = {}     # id -> [shared, printed, label, short text / False / None]
    active = set()
    keep = []     # every object met, so that no id is reused
    states = {}   # id(instance) -> the state Python pickles for it
    labels = [0]
    NEW, CYCLE, AGAIN, DONE = range(4)

    def is_mutable(v):
        t = type(v)
        return t in (list, dict, set, bytearray) or not (
            t in ATOMIC or t is float or t in (tuple, frozenset) or isinstance(v, ROUTINES))

    def tracked(v):
        t = type(v)
        if t in (tuple, frozenset):
            return len(v) > 0
        if t is str:
            return len(v.encode("utf-8", "surrogatepass")) > 15
        if t is bytes:
            return len(v) > 15
        if t in ATOMIC or t is float or isinstance(v, ROUTINES):
            return False  # ints: Python's pickler never shares them
        return True

    def state_of(v):
        if id(v) not in states:
            # the state Python pickles for it (protocol 2: NEWOBJ + BUILD)
            red = v.__reduce_ex__(2)
            if red[0] is not copyreg.__newobj__:
                raise ValueError("%r is not pickled as a plain instance" % (type(v),))
            states[id(v)] = red[2] if len(red) > 2 else None
            keep.append(states[id(v)])
        return states[id(v)]

    def plain_text(v):
        out, size = [], [0]

        def emit(s):
            size[0] += len(s.encode("utf-8", "surrogatepass"))
            if size[0] > OST_REPR_SHORT:
                raise _Long()
            out.append(s)
        try:
            walk(v, 0, emit, None)
        except _Long:
            return False
        return "".join(out)

    def short_shared(v):
        s = seen.get(id(v))
        if s is None or not s[0]:
            return False
        if s[3] is None:
            s[3] = False if is_mutable(v) else plain_text(v)
        return s[3]

    def shared(v, mode):
        return mode == "print" and tracked(v) and id(v) in seen and seen[id(v)][0]

    def reach(v, emit, mode):
        i = id(v)
        s = seen.get(i)
        if s is None:
            keep.append(v)
            seen[i] = [False, mode == "print", 0, None]
            active.add(i)
            return NEW
        if i in active:
            return CYCLE
        if mode == "count":
            s[0] = True
            return AGAIN
        text = short_shared(v)
        if text:
            emit(text)
            return DONE
        if s[1]:
            return AGAIN
        s[1] = True
        active.add(i)
        if s[0]:
            labels[0] += 1
            s[2] = labels[0]
            emit("#%d=" % s[2])
        return NEW

    def walk(v, depth, emit, mode):
        """mode: "count" (the first pass), "print", or None (a plain print
        of a short immutable value: no labels, no depth limit)."""
        if mode is None:
            if is_mutable(v):
                raise _Long()
            body(v, depth, emit, mode)
            return
        if depth > OST_REPR_MAX_DEPTH:
            emit("<...>")
            return
        if not tracked(v):
            body(v, depth, emit, mode)
            return
        r = reach(v, emit, mode)
        if r == CYCLE:
            t = type(v)
            emit({tuple: "(...)", list: "[...]", dict: "{...}"}.get(t, "..."))
        elif r == AGAIN:
            emit("#%d#" % seen[id(v)][2])
        elif r == NEW:
            body(v, depth, emit, mode)
            active.discard(id(v))

    def attr(k, depth, emit, mode):
        if type(k) is not str or (shared(k, mode) and not short_shared(k)):
            walk(k, depth + 1, emit, mode)
            return
        if mode == "count" and tracked(k) and depth + 1 <= OST_REPR_MAX_DEPTH:
            if reach(k, emit, mode) == NEW:
                active.discard(id(k))
        emit(k)

    def body(v, depth, emit, mode):
        t = type(v)
        if t is int:
            emit(int_text(v))
        elif t in ATOMIC or t is float or t is bytearray:
            emit(repr(v))
        elif isinstance(v, ROUTINES):
            emit("%s.%s" % (v.__module__, v.__qualname__))
        elif t is tuple or t is list:
            emit("(" if t is tuple else "[")
            for i, e in enumerate(v):
                if i:
                    emit(", ")
                walk(e, depth + 1, emit, mode)
            emit(",)" if t is tuple and len(v) == 1 else ")" if t is tuple else "]")
        elif t is dict:
            emit("{")
            for i, (k, e) in enumerate(v.items()):
                if i:
                    emit(", ")
                walk(k, depth + 1, emit, mode)
                emit(": ")
                walk(e, depth + 1, emit, mode)
            emit("}")
        elif t is set or t is frozenset:
            if not v:
                emit("%s()" % t.__name__)
            else:
                emit("{" if t is set else "frozenset({")
                for i, e in enumerate(v):
                    if i:
                        emit(", ")
                    walk(e, depth + 1, emit, mode)
                emit("}" if t is set else "})")
        else:
            state = state_of(v)
            emit("%s.%s(" % (t.__module__, t.__qualname__))
            if type(state) is dict and not shared(state, mode):
                track = mode is not None and depth + 1 <= OST_REPR_MAX_DEPTH
                r = reach(state, emit, mode) if track else NEW
                if r == CYCLE:
                    emit("__state__={...}")
                if r == NEW:
                    for i, (k, e) in enumerate(state.items()):
                        if i:
                            emit(", ")
                        attr(k, depth, emit, mode)
                        emit("=")
                        walk(e, depth + 1, emit, mode)
                    if track:
                        active.discard(id(state))
            elif state is not None:
                emit("__state__=")
                walk(state, depth + 1, emit, mode)
            emit(")")

    walk(x, 0, lambda s: None, "count")
    out = []
    walk(x, 0, out.append, "print")
    return "".join(out)


# ---- pickles ------------------------------------------------------------

def check_protocol(data, proto, scan=True):
    """Checks that a pickle written for protocol proto starts with PROTO
    proto and (if scan) uses no opcode newer than proto. Returns an error
    string or None."""
    if data[:2] != bytes([0x80, proto]):
        return "does not start with PROTO %d: %s" % (proto, data[:2].hex())
    if not scan:
        return None
    try:
        for op, arg, pos in pickletools.genops(data):
            if op.proto > proto:
                return "opcode %s (protocol %d) at offset %d in a protocol %d pickle" % (
                    op.name, op.proto, pos, proto)
    except Exception as e:  # noqa: BLE001 - report any parse failure
        return "pickletools cannot parse it: %r" % (e,)
    return None


def hexdump(data, limit=4096):
    h = data[:limit].hex()
    lines = [h[i:i + 64] for i in range(0, len(h), 64)]
    if len(data) > limit:
        lines.append("... (%d bytes in all)" % len(data))
    return "\n".join(lines)


class Unpickler(pickle.Unpickler):
    """Loads persistent ids as ('pers', pid)."""

    def persistent_load(self, pid):
        return ("pers", pid)


def loads(data):
    import io
    return Unpickler(io.BytesIO(data)).load()
