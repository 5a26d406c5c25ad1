"""Classes used by the interop tests (tests/py).

They live in an importable module so that pickles made by Python name them
as interop_classes.<Name>, and so that Python can load the pickles ostore
writes back. The helper scripts put tests/py on sys.path.
"""
import reprlib


class Plain:
    """A plain class: pickled as NEWOBJ + BUILD with its __dict__."""

    def __init__(self, **attrs):
        self.__dict__.update(attrs)

    @reprlib.recursive_repr()
    def __repr__(self):
        inner = ", ".join("%s=%r" % kv for kv in self.__dict__.items())
        return "Plain(%s)" % inner


class Empty:
    """A plain class whose instances have no attributes (no BUILD)."""

    def __repr__(self):
        return "Empty()"


class Node:
    """Links for chains and cycles: attributes next and data."""

    def __init__(self, data=None, next=None):
        self.data = data
        self.next = next

    @reprlib.recursive_repr()
    def __repr__(self):
        return "Node(%r)" % (self.__dict__,)


class Reduced:
    """Rebuilt by calling Reduced(a, b): a REDUCE ostore cannot know."""

    def __init__(self, a, b):
        self.a = a
        self.b = b

    def __reduce__(self):
        extra = {k: v for k, v in self.__dict__.items() if k not in ("a", "b")}
        if extra:
            return (Reduced, (self.a, self.b), extra)
        return (Reduced, (self.a, self.b))

    @reprlib.recursive_repr()
    def __repr__(self):
        return "Reduced(%r)" % (self.__dict__,)


class KwOnly:
    """Needs keyword arguments for __new__: NEWOBJ_EX at protocol 4+,
    functools.partial(cls.__new__, ...) from Python at protocols 2-3."""

    def __new__(cls, a, *, b=0):
        self = object.__new__(cls)
        self.a = a
        self.b = b
        return self

    def __getnewargs_ex__(self):
        return ((self.a,), {"b": self.b})

    def __repr__(self):
        return "KwOnly(%r)" % (self.__dict__,)


class WithState:
    """Custom __getstate__/__setstate__ with a tuple state (not a dict)."""

    def __init__(self, x=0, y=0):
        self.x = x
        self.y = y

    def __getstate__(self):
        return (self.x, self.y)

    def __setstate__(self, st):
        self.x, self.y = st

    def __repr__(self):
        return "WithState(%r, %r)" % (self.x, self.y)


class Slotted:
    """__slots__: state is (None, {slot: value})."""

    __slots__ = ("x", "y")

    def __init__(self, x=None, y=None):
        self.x = x
        if y is not None:
            self.y = y

    def __repr__(self):
        return "Slotted(%r, %r)" % (getattr(self, "x", None), getattr(self, "y", None))


class Bag:
    """Rebuilt by Bag() then APPENDS (extend) and SETITEMS (__setitem__):
    exercises a reduce value's list items and dict items."""

    def __init__(self):
        self.items = []
        self.map = {}

    def extend(self, xs):
        self.items.extend(xs)

    def append(self, x):
        self.items.append(x)

    def __setitem__(self, k, v):
        self.map[k] = v

    def __reduce__(self):
        return (Bag, (), None, iter(self.items), iter(self.map.items()))

    @reprlib.recursive_repr()
    def __repr__(self):
        return "Bag(%r, %r)" % (self.items, self.map)


class Outer:
    """Nested classes: named Outer.Inner, which protocols below 4 spell as
    builtins.getattr(Outer, 'Inner')."""

    class Inner:
        class Deep:
            pass

        @reprlib.recursive_repr()
        def __repr__(self):
            return "Outer.Inner(%r)" % (self.__dict__,)


class DictSub(dict):
    """A dict subclass with attributes: pickled (protocol 2 and later) as
    NEWOBJ, SETITEMS on the instance, then BUILD with its __dict__; below
    protocol 2 as copyreg._reconstructor(cls, dict, dict(self))."""


class ListSub(list):
    """A list subclass with attributes: NEWOBJ, APPENDS, BUILD."""


def same_subclass_object(a, b):
    """True when a and b are of the same class, equal as dicts or lists,
    and have equal attributes."""
    return (type(a) is type(b) and a == b and
            getattr(a, "__dict__", None) == getattr(b, "__dict__", None))
