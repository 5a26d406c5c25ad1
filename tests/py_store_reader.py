#!/usr/bin/python3
"""Reads an ostore store with nothing but Python and python3-lmdb, and prints
every object: what a program in another language sees of a store written by
the C library (docs/format.md).

    /usr/bin/python3 tests/py_store_reader.py STORE_DIR

Output, one line each, in this order:

    meta format=F next_oid=N last_serial=N next_class=N
    class ID module.Name                      (one per class, by id)
    class ID module.Name(f1,f2)               (format 4: a class version)
    oid OID serial S class module.Name refs [OIDS] state REPR
    entry MAP KEY serial S refs [OIDS] value REPR   (format 2 to 4: map entries)

A record whose class id names a class version (format 4) has a tuple for
state, its fields' values in the version's order: it prints as the dict a
format-3 record of the same object holds ({'f1': v1, 'f2': v2}), under the
class's own name, so the same objects print the same in either format.

REPR is the repr of the unpickled state, where a reference to another stored
object (a BINPERSID whose pid is the oid) reads ('ref', OID) and an instance
of any class named inside a pickle reads module.Name(state). Records appear
in oid order; refs lists the oids the record references, in pickle order,
each once. Map entries follow the records, by map oid, each map's in the
order the store keeps them, their keys decoded from the order-preserving
encoding (docs/format.md) as the map's kind says.

The program checks what the format promises and exits 1, with a line
starting "error" on standard error, when: the magic or format is wrong, a
key is not 8 bytes, a record's checksum (format 3 and 4; CRC-32C, computed here
independently) does not match or a header's reserved bytes are not zero
(formats 1 and 2), a class id is
not in the class table, a record's serial is above meta.last_serial, an oid
is not below meta.next_oid, a reference names an oid with no record, or the
root (oid 0) is missing or is not a PersistentMapping with a 'data' dict,
a class version's record whose state is not a tuple of the version's length;
and for maps: entries of an oid that is not a map, a key that does not
decode as the map's kind, an entry whose checksum does not match (format
3), keys out of Python's order (sorted()), a count
in the map's record that is not its number of entries.
"""
import io
import pickle
import struct
import sys

import lmdb


def _crc_table():
    table = []
    for i in range(256):
        c = i
        for _ in range(8):
            c = (c >> 1) ^ 0x82F63B78 if c & 1 else c >> 1
        table.append(c)
    return table


CRC_TABLE = _crc_table()


def crc32c(data, crc=0):
    """CRC-32C (Castagnoli): the checksum of format-3 records and entries."""
    crc ^= 0xFFFFFFFF
    for b in data:
        crc = CRC_TABLE[(crc ^ b) & 0xFF] ^ (crc >> 8)
    return crc ^ 0xFFFFFFFF


assert crc32c(b"123456789") == 0xE3069283


class Stub:
    """Stands for any class named inside a record: keeps the arguments and
    the state it is given, prints as module.Name(...)."""

    def __init__(self, *args):
        self.args = args

    def __setstate__(self, state):
        self.state = state

    def __repr__(self):
        inner = getattr(self, "state", None)
        if inner is None:
            inner = getattr(self, "args", ())
        return "%s(%r)" % (type(self).__qualname__, inner)


class RecordReader(pickle.Unpickler):
    """Unpickles one record's state; collects the references it holds."""

    def __init__(self, data):
        super().__init__(io.BytesIO(data))
        self.refs = []

    def persistent_load(self, pid):
        # format 4 writes (oid, class id), formats 1 to 3 the oid
        if (isinstance(pid, tuple) and len(pid) == 2 and isinstance(pid[1], int)
                and pid[1] > 0):
            pid = pid[0]
        if not isinstance(pid, int) or pid < 0:
            raise pickle.UnpicklingError("persistent id %r is not an oid" % (pid,))
        if pid not in self.refs:
            self.refs.append(pid)
        return ("ref", pid)

    def find_class(self, module, name):
        cls = type(name, (Stub,), {})
        cls.__qualname__ = module + "." + name
        return cls


def u64(txn, db, key):
    value = txn.get(key, db=db)
    if value is None or len(value) != 8:
        raise SystemExit("error: meta %r is missing or not 8 bytes" % key)
    return struct.unpack("<Q", value)[0]


def parse_kind(kind):
    """'int' -> ['int'], '(int, str)' -> ('int', 'str')"""
    if kind.startswith("("):
        return tuple(e.strip() for e in kind[1:-1].split(",") if e.strip())
    return [kind]


def decode_key(kind, b):
    """The key whose encoding is b, for a kind from parse_kind."""
    out, i = [], 0
    for el in kind:
        if el == "int":
            out.append(struct.unpack(">Q", b[i:i + 8])[0] - (1 << 63))
            i += 8
            continue
        if isinstance(kind, list):  # a lone str or bytes key: raw bytes
            raw, i = b[i:], len(b)
        else:
            raw = bytearray()
            while True:
                c = b[i]
                i += 1
                if c:
                    raw.append(c)
                    continue
                c = b[i]
                i += 1
                if c == 0:
                    break
                if c != 1:
                    raise ValueError("bad escape")
                raw.append(0)
            raw = bytes(raw)
        out.append(raw.decode("utf-8", "surrogatepass") if el == "str" else bytes(raw))
    if i != len(b):
        raise ValueError("trailing bytes")
    return tuple(out) if isinstance(kind, tuple) else out[0]


def main(path):
    env = lmdb.open(path, max_dbs=8, readonly=True, lock=False)
    meta = env.open_db(b"meta", create=False)
    records = env.open_db(b"records", create=False)
    classes = env.open_db(b"classes", create=False)
    errors = []
    with env.begin() as txn:
        if txn.get(b"ostore", db=meta) != b"ostore":
            raise SystemExit("error: not an ostore store (no magic)")
        fmt = u64(txn, meta, b"format")
        if fmt not in (1, 2, 3, 4):
            raise SystemExit("error: format %d, this reader knows 1 to 4" % fmt)
        next_oid = u64(txn, meta, b"next_oid")
        last_serial = u64(txn, meta, b"last_serial")
        next_class = u64(txn, meta, b"next_class")
        print("meta format=%d next_oid=%d last_serial=%d next_class=%d"
              % (fmt, next_oid, last_serial, next_class))

        names = {}
        ids = {}
        for key, value in txn.cursor(db=classes):
            if key[:1] == b"i" and len(key) == 5:
                cid, = struct.unpack("<I", key[1:5])
                module, _, name = value.partition(b"\0")
                names[cid] = module.decode() + "." + name.decode()
            elif key[:1] == b"n":
                ids[key[1:].replace(b"\0", b".").decode()] = struct.unpack("<I", value)[0]
        for cid in sorted(names):
            print("class %d %s" % (cid, names[cid]))
            if ids.get(names[cid]) != cid:
                errors.append("class %d: no matching name entry" % cid)
        # format 4: a class version is named Name(f1,f2): the class is Name
        fields = {}
        for cid, full in list(names.items()):
            if full.endswith(")") and "(" in full:
                base, _, flist = full[:-1].partition("(")
                fields[cid] = flist.split(",") if flist else []
                names[cid] = base

        present = set()
        refs_of = {}
        maps = {}  # oid -> (kind, count)
        root = None
        for key, value in txn.cursor(db=records):
            if len(key) != 8:
                errors.append("record key %r is not 8 bytes" % key)
                continue
            oid, = struct.unpack(">Q", key)
            present.add(oid)
            if len(value) < 16:
                errors.append("oid %d: record shorter than its header" % oid)
                continue
            serial, cid, reserved = struct.unpack("<QII", value[:16])
            if fmt >= 3:
                if reserved != crc32c(value[16:], crc32c(value[:12], crc32c(key))):
                    errors.append("oid %d: checksum does not match" % oid)
            elif reserved != 0:
                errors.append("oid %d: reserved header bytes are not zero" % oid)
            if cid not in names:
                errors.append("oid %d: class id %d is not in the class table" % (oid, cid))
            if serial > last_serial or serial == 0:
                errors.append("oid %d: serial %d outside 1..%d" % (oid, serial, last_serial))
            if oid >= next_oid and oid != 0:
                errors.append("oid %d: not below next_oid %d" % (oid, next_oid))
            reader = RecordReader(value[16:])
            try:
                state = reader.load()
            except Exception as e:  # a damaged record: report, go on
                errors.append("oid %d: record does not unpickle: %s" % (oid, e))
                continue
            if cid in fields:  # a positional state: zip it with the version's names
                if not isinstance(state, tuple) or len(state) != len(fields[cid]):
                    errors.append("oid %d: state %r does not fit class version %s(%s)"
                                  % (oid, state, names[cid], ",".join(fields[cid])))
                    continue
                state = dict(zip(fields[cid], state))
            refs_of[oid] = reader.refs
            if names.get(cid) in ("ostore.maps.OrderedMap", "ostore.maps.OrderedSet"):
                maps[oid] = (parse_kind(state["kind"]), state["count"])
            if oid == 0:
                root = (names.get(cid), state)
            print("oid %d serial %d class %s refs %r state %r"
                  % (oid, serial, names.get(cid, "?"), reader.refs, state))

        ments = env.open_db(b"mapents", txn=txn, create=False) if fmt >= 2 else None
        seen = {}
        for key, value in (txn.cursor(db=ments) if ments is not None else ()):
            map_oid, = struct.unpack(">Q", key[:8])
            if map_oid not in maps:
                errors.append("entries of oid %d, which is not a map" % map_oid)
                continue
            kind = maps[map_oid][0]
            try:
                k = decode_key(kind, key[8:])
            except (ValueError, IndexError, UnicodeDecodeError) as e:
                errors.append("map %d: key %s does not decode: %s" % (map_oid, key[8:].hex(), e))
                continue
            keys = seen.setdefault(map_oid, [])
            if keys and not keys[-1] < k:
                errors.append("map %d: key %r after %r: not Python's order" % (map_oid, k, keys[-1]))
            keys.append(k)
            serial, = struct.unpack("<Q", value[:8])
            hdr = 12 if fmt >= 3 else 8
            if fmt >= 3 and struct.unpack("<I", value[8:12])[0] != \
                    crc32c(value[12:], crc32c(value[:8], crc32c(key))):
                errors.append("map %d: entry %r: checksum does not match" % (map_oid, k))
            reader = RecordReader(value[hdr:])
            try:
                val = reader.load() if len(value) > hdr else None
            except Exception as e:
                errors.append("map %d: entry %r does not unpickle: %s" % (map_oid, k, e))
                continue
            refs_of.setdefault(map_oid, []).extend(r for r in reader.refs
                                                   if r not in refs_of[map_oid])
            print("entry %d %r serial %d refs %r value %r" % (map_oid, k, serial, reader.refs, val))
        for map_oid, (kind, count) in sorted(maps.items()):
            if len(seen.get(map_oid, ())) != count:
                errors.append("map %d: record counts %d entries, has %d"
                              % (map_oid, count, len(seen.get(map_oid, ()))))

    for oid, refs in sorted(refs_of.items()):
        for r in refs:
            if r not in present:
                errors.append("oid %d refers to missing oid %d" % (oid, r))
    if root is None:
        errors.append("the root (oid 0) is missing")
    elif root[0] != "persistent.mapping.PersistentMapping" or \
            not isinstance(root[1], dict) or not isinstance(root[1].get("data"), dict):
        errors.append("the root is not a PersistentMapping with a 'data' dict")
    for e in errors:
        print("error: " + e, file=sys.stderr)
    return 1 if errors else 0


if __name__ == "__main__":
    if len(sys.argv) != 2:
        raise SystemExit(__doc__)
    sys.exit(main(sys.argv[1]))
