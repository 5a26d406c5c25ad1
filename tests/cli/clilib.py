"""Shared helpers of the CLI tests (test_cli.py, test_cli_maps.py,
test_cli_robust.py): running the ostore tool as a process and checking its
exit status and output, counting checks and failures, reading pickles with
persistent references, decoding map keys (docs/format.md), taking dumps
apart and building them (docs/cli.md), and the export reader of docs/cli.md.

A script calls setup() with the tool's path and docs/cli.md's before any
test, and exits with the status entry() gives.
"""
import io
import pickle
import pickletools
import re
import struct
import subprocess
import sys
import zlib

CLI = None   # the ostore tool
DOCS = None  # docs/cli.md
checks = 0
failures = []


def setup(cli, docs):
    global CLI, DOCS
    CLI, DOCS = cli, docs


def entry(name, nargs, doc, tests):
    """A script's exit status: with other than nargs arguments, 2 after
    printing doc; else runs tests(), prints the count of checks and
    failures, and gives 1 if any check failed, 0 if none did."""
    if len(sys.argv) != nargs + 1:
        print(doc)
        return 2
    tests()
    print("%s: %d checks, %d failures" % (name, checks, len(failures)))
    return 1 if failures else 0


# ---- running the tool -------------------------------------------------------------------

TIMED_OUT = -1000  # run()'s exit status for a tool that did not end in time


def run(args, stdin=None, timeout=240, prefix=()):
    """(exit status, stdout, stderr) of the tool run with args (str or
    bytes), after the command words prefix (such as runuser); a tool still
    running after timeout seconds is killed, and gives TIMED_OUT."""
    try:
        p = subprocess.run(list(prefix) + [CLI] + list(args), input=stdin,
                           stdout=subprocess.PIPE, stderr=subprocess.PIPE, timeout=timeout)
    except subprocess.TimeoutExpired:
        return TIMED_OUT, "", "(killed: still running after %s s)\n" % timeout
    return p.returncode, p.stdout.decode("utf-8", "replace"), p.stderr.decode("utf-8", "replace")


def show(args):
    return " ".join(a if isinstance(a, str) else repr(a) for a in args)


def check(cond, what):
    global checks
    checks += 1
    if not cond:
        failures.append(what)
        print("FAIL:", what, flush=True)
    return cond


def ok(args, what=None, stdin=None, timeout=240, prefix=()):
    """Runs a command that must succeed: exit 0, nothing on stderr."""
    rc, out, err = run(args, stdin, timeout, prefix)
    check(rc == 0 and err == "", "%s: `ostore %s` exit %d, stderr %r"
          % (what or args[0], show(args), rc, err[:500]))
    return out


def fails(args, needle, what=None, stdin=None, timeout=240, prefix=()):
    """A failed operation: exit 1, one line on stderr holding `needle`."""
    rc, out, err = run(args, stdin, timeout, prefix)
    desc = "%s: `ostore %s`" % (what or args[0], show(args))
    check(rc == 1, "%s: exit %d, want 1 (stderr %r)" % (desc, rc, err[:300]))
    check(err.count("\n") == 1 and err.startswith("ostore: ") and err.endswith("\n"),
          "%s: stderr is not one 'ostore: ...' line: %r" % (desc, err[:500]))
    check(needle in err, "%s: stderr lacks %r: %r" % (desc, needle, err[:300]))
    return out, err


def usage(args, needle=None):
    """Bad usage: exit 2, the usage on stderr, nothing on stdout; and, when
    given, `needle` on stderr."""
    rc, out, err = run(args)
    desc = "usage: `ostore %s`" % " ".join(args)
    check(rc == 2, "%s: exit %d, want 2 (stderr %r)" % (desc, rc, err[:300]))
    check("usage: ostore" in err, "%s: no usage on stderr: %r" % (desc, err[:300]))
    check(out == "", "%s: wrote to stdout: %r" % (desc, out[:200]))
    if needle:
        check(needle in err, "%s: stderr lacks %r: %r" % (desc, needle, err[:300]))


# ---- pickles with persistent references (docs/format.md) --------------------------------

class Ref:
    def __init__(self, oid):
        self.oid = oid

    def __repr__(self):
        return "persistent(%d)" % self.oid


class RefReader(pickle.Unpickler):
    def persistent_load(self, pid):
        return Ref(pid)


class RefWriter(pickle.Pickler):
    def persistent_id(self, obj):
        return obj.oid if isinstance(obj, Ref) else None


def state_of(data):
    return RefReader(io.BytesIO(data)).load()


def refs_of(data):
    """The oids a record's pickle references, in order (from the opcodes)."""
    out, last = [], None
    for op, arg, _ in pickletools.genops(data):
        if op.name == "BINPERSID":
            out.append(last)
        if op.name not in ("MEMOIZE", "BINPUT", "LONG_BINPUT", "FRAME"):
            last = arg
    return out


def decode_key(kind, b):
    """A map key from its encoding (docs/format.md), for a kind such as
    'int' or '(int, str)'; a tuple key's encoding is used up exactly."""
    if not kind.startswith("("):
        if kind == "int":
            return struct.unpack(">Q", b)[0] - (1 << 63)
        return b.decode() if kind == "str" else bytes(b)
    out, i = [], 0
    for e in [e.strip() for e in kind.strip("()").split(",") if e.strip()]:
        if e == "int":
            out.append(struct.unpack(">Q", b[i:i + 8])[0] - (1 << 63))
            i += 8
            continue
        raw = bytearray()
        while True:
            c, i = b[i], i + 1
            if c == 0:
                c, i = b[i], i + 1
                if c == 0:
                    break
                c = 0  # 00 01 is an escaped 0 byte
            raw.append(c)
        out.append(raw.decode() if e == "str" else bytes(raw))
    assert i == len(b)
    return tuple(out)


# ---- dumps, taken apart and put together again (docs/cli.md) ----------------------------

def parse_dump(data):
    """(version, store format, counters, classes, records, entries) of a dump:
    counters [next_oid, last_serial, next_class]; classes [(id, module,
    name)]; records [(oid, serial, cid, pickle)]; entries [(map, key,
    serial, value)]."""
    version, fmt = struct.unpack_from("<II", data, 8)
    nrec, _, next_oid, last, next_class = struct.unpack_from("<QQQQQ", data, 16)
    off = 56
    nent = 0
    if version >= 2:
        nent, _ = struct.unpack_from("<QQ", data, off)
        off += 16
    classes = []
    n, = struct.unpack_from("<I", data, off)
    off += 4
    for _ in range(n):
        cid, ml = struct.unpack_from("<IH", data, off)
        off += 6
        mod = data[off:off + ml]
        off += ml
        nl, = struct.unpack_from("<H", data, off)
        off += 2
        classes.append((cid, mod, data[off:off + nl]))
        off += nl
    records = []
    for _ in range(nrec):
        oid, serial, cid, ln = struct.unpack_from("<QQII", data, off)
        off += 24
        records.append((oid, serial, cid, data[off:off + ln]))
        off += ln
    entries = []
    for _ in range(nent):
        m, kl = struct.unpack_from("<QH", data, off)
        off += 10
        key = data[off:off + kl]
        off += kl
        serial, vl = struct.unpack_from("<QI", data, off)
        off += 12
        entries.append((m, key, serial, data[off:off + vl]))
        off += vl
    assert data[off:off + 8] == b"OSTDEND\n" and off + 12 == len(data)
    return version, fmt, [next_oid, last, next_class], classes, records, entries


def build_dump(version, fmt, counters, classes, records, entries):
    out = bytearray(b"OSTDUMP\n")
    out += struct.pack("<II", version, fmt)
    out += struct.pack("<QQQQQ", len(records), sum(len(r[3]) for r in records), *counters)
    if version >= 2:
        out += struct.pack("<QQ", len(entries), sum(len(e[1]) + len(e[3]) for e in entries))
    out += struct.pack("<I", len(classes))
    for cid, mod, name in classes:
        out += struct.pack("<IH", cid, len(mod)) + mod + struct.pack("<H", len(name)) + name
    for oid, serial, cid, p in records:
        out += struct.pack("<QQII", oid, serial, cid, len(p)) + p
    for m, key, serial, v in entries:
        out += struct.pack("<QH", m, len(key)) + key + struct.pack("<QI", serial, len(v)) + v
    out += b"OSTDEND\n"
    return bytes(out + struct.pack("<I", zlib.crc32(out)))


# ---- the export reader of docs/cli.md -------------------------------------------------

def doc_reader():
    """The namespace of the export reader printed in docs/cli.md, and its
    source; (None, None) (a failed check) when the page has none."""
    text = open(DOCS, encoding="utf-8").read()
    m = re.search(r"<!-- export-reader:begin -->\n```python\n(.*?)```\n<!-- export-reader:end -->",
                  text, re.S)
    if not check(m is not None, "docs/cli.md has no export reader between the markers"):
        return None, None
    ns = {"__name__": "export_reader"}
    exec(compile(m.group(1), "docs/cli.md", "exec"), ns)
    return ns, m.group(1)


# ---- the stored layout: checksums (docs/format.md) -------------------------------------

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
    """CRC-32C (Castagnoli), computed here independently of ostore."""
    crc ^= 0xFFFFFFFF
    for b in data:
        crc = CRC_TABLE[(crc ^ b) & 0xFF] ^ (crc >> 8)
    return crc ^ 0xFFFFFFFF


def seal_record(key, value):
    """A format-3 record value (header + pickle) with its checksum put right
    for the 8-byte key key."""
    value = bytes(value)
    crc = crc32c(value[16:], crc32c(value[:12], crc32c(key)))
    return value[:12] + struct.pack("<I", crc) + value[16:]


def make_entry(key, serial, pickled):
    """A format-3 map entry's value: serial, checksum, pickle."""
    s = struct.pack("<Q", serial)
    return s + struct.pack("<I", crc32c(pickled, crc32c(s, crc32c(key)))) + pickled


def make_old_format(path, fmt):
    """Turns the format-3 store at path into one of format fmt (1 or 2) as an
    older ostore wrote it: no checksums, and for format 1 no mapents."""
    import lmdb
    env = lmdb.open(path, max_dbs=8, map_size=1 << 30)
    with env.begin(write=True) as t:
        recs = env.open_db(b"records", txn=t)
        for k, v in list(t.cursor(db=recs)):
            t.put(k, v[:12] + b"\0\0\0\0" + v[16:], db=recs)
        ments = env.open_db(b"mapents", txn=t)
        if fmt == 1:
            t.drop(ments, delete=True)
        else:
            for k, v in list(t.cursor(db=ments)):
                t.put(k, v[:8] + v[12:], db=ments)
        t.put(b"format", struct.pack("<Q", fmt), db=env.open_db(b"meta", txn=t))
    env.close()
