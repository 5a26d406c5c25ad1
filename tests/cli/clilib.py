"""Shared helpers of the CLI tests (test_cli.py, test_cli_maps.py,
test_cli_robust.py): running the ostore tool as a process and checking its
exit status and output, counting checks and failures, reading pickles with
persistent references, decoding map keys (docs/format.md), taking dumps
apart and building them (docs/cli.md), and the export reader of docs/cli.md.

A script calls setup() with the tool's path and docs/cli.md's before any
test, and exits with the status entry() gives.

The engine under test is one parameter, as for the C suites
(tests/storetest.h): OST_TEST_ENGINE=postgresql (under
tests/pg/pgserver.sh, which exports OST_TEST_PG and OST_TEST_PG_ADMIN)
runs the same tests on stores in databases of the private server; each
store the tests make, new_store() gives a fresh database of its own.
part() runs a named part of a script and counts it; lmdb_only() skips one
on PostgreSQL with its reason, and entry() prints how many ran and were
skipped, and why.
"""
import io
import os
import pickle
import pickletools
import re
import shutil
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
    failures, the parts run and skipped (with the reasons) and the engine,
    drops the databases new_store() made, and gives 1 if any check failed
    or no check ran, 0 otherwise."""
    if len(sys.argv) != nargs + 1:
        print(doc)
        return 2
    try:
        tests()
    finally:
        drop_databases()
    print("%s: %d checks, %d failures" % (name, checks, len(failures)))
    reasons = "; ".join("%s (%s)" % (what, why) for what, why in skipped)
    print("%s on %s: %d run, %d skipped%s%s" % (name, ENGINE, len(ran), len(skipped),
                                                ": " if skipped else "", reasons))
    return 1 if failures or not checks else 0


# ---- the engine under test --------------------------------------------------------------

ENGINE = os.environ.get("OST_TEST_ENGINE", "lmdb")
if ENGINE not in ("lmdb", "postgresql"):
    sys.exit("OST_TEST_ENGINE=%s: the engines are lmdb and postgresql" % ENGINE)
ran = []      # the parts run
skipped = []  # (part, reason) of the parts skipped
_dbs = []     # the databases new_store() made
_seq = [0]


def on_pg():
    return ENGINE == "postgresql"


def part(name, fn, *args):
    """Runs fn(*args), a part of a script named name, counting it as run;
    gives what fn gives."""
    print("-- %s on %s" % (name, ENGINE), flush=True)
    ran.append(name)
    return fn(*args)


def lmdb_only(name, why):
    """True (after printing and counting the skip) when the engine under
    test is PostgreSQL: the part name is about LMDB only, for reason why."""
    if not on_pg():
        return False
    print("SKIP: %s: LMDB only: %s" % (name, why), flush=True)
    skipped.append((name, why))
    return True


def psql_path():
    p = os.environ.get("OST_TEST_PSQL") or shutil.which("psql")
    return p or os.path.join(os.environ.get("PG_BIN", "/usr/lib/postgresql/15/bin"), "psql")


def sql(addr, query, one_txn=True):
    """Runs query on the database at the address addr with psql (in one
    transaction unless one_txn is false, stopping at the first error) and gives its output:
    unaligned rows, fields separated by '|'. The query goes through stdin
    (a pickle as hex can pass the limit of one argument)."""
    p = subprocess.run([psql_path(), "-q", "-X", "-At", "-v", "ON_ERROR_STOP=1"] +
                       (["-1"] if one_txn else []) + ["-d", addr, "-f", "-"], input=query.encode(), stdout=subprocess.PIPE,
                       stderr=subprocess.PIPE, check=False)
    if p.returncode != 0:
        raise RuntimeError("psql %s: %s: %s" % (addr, query[:200], p.stderr.decode()[:500]))
    return p.stdout.decode()


def _db_addr(dbname):
    base = os.environ.get("OST_TEST_PG")
    if not base or not os.environ.get("OST_TEST_PG_ADMIN"):
        sys.exit("OST_TEST_ENGINE=postgresql needs OST_TEST_PG and OST_TEST_PG_ADMIN "
                 "(run under tests/pg/pgserver.sh)")
    m = re.match(r"^(postgres(?:ql)?://[^/]*/)[^?]*(\?.*)?$", base)
    if not m:
        sys.exit("OST_TEST_PG is not a postgresql:// URI: %s" % base)
    return m.group(1) + dbname + (m.group(2) or "")


def _new_db(template=None):
    _seq[0] += 1
    name = "ost_c%d_%d" % (os.getpid(), _seq[0])
    sql(os.environ.get("OST_TEST_PG_ADMIN", ""), "CREATE DATABASE %s%s"
        % (name, " TEMPLATE %s" % template if template else ""), one_txn=False)
    _dbs.append(name)
    return _db_addr(name)


def db_name(addr):
    return re.match(r"^postgres(?:ql)?://[^/]*/([^?]*)", addr).group(1)


def new_store(tmp, name):
    """Where a test makes a new store: tmp/name (not made) on LMDB; the
    address of a fresh, empty database on PostgreSQL."""
    return _new_db() if on_pg() else os.path.join(tmp, name)


def missing_store(tmp, name):
    """(address, what its failure message holds) of a store that is not
    there: a path that does not exist, or a database that does not."""
    if on_pg():
        _seq[0] += 1
        return _db_addr("ost_missing%d_%d" % (os.getpid(), _seq[0])), "does not exist"
    return os.path.join(tmp, name), "No such file or directory"


def copy_store(src, tmp, name):
    """A copy of the store src, as files (LMDB) or as a new database made
    from it (PostgreSQL: CREATE DATABASE ... TEMPLATE)."""
    if on_pg():
        return _new_db(db_name(src))
    dst = os.path.join(tmp, name)
    shutil.copytree(src, dst)
    return dst


def store_made(addr):
    """Whether anything of a store is at addr: the path exists (LMDB), or
    the database holds the engine's tables (PostgreSQL)."""
    if on_pg():
        return sql(addr, "SELECT count(*) FROM pg_tables WHERE tablename LIKE 'ost\\_%'").strip() != "0"
    return os.path.exists(addr)


def left_behind(addr):
    """Whether a failed import or copy into addr (a new store: a path that
    does not exist, a database without the schema) left anything: on
    LMDB, anything at the path (the tool removes the directory or files it
    made); on PostgreSQL, any of the engine's tables (the tool drops the
    schema it made, ost_store_drop_new)."""
    if not on_pg():
        return os.path.exists(addr)
    return store_made(addr)


def drop_databases():
    admin = os.environ.get("OST_TEST_PG_ADMIN")
    while _dbs:
        name = _dbs.pop()
        try:
            sql(admin, "DROP DATABASE IF EXISTS %s WITH (FORCE)" % name, one_txn=False)
        except RuntimeError as e:
            print("warning: %s" % e)


# ---- a store read without ostore (docs/format.md, docs/postgresql.md) -------------------

class Raw:
    """A store read independently of ostore: with python3-lmdb from its
    files (docs/format.md), or with psql from its tables
    (docs/postgresql.md). meta {name: int} (format, next_oid, last_serial,
    next_class); names {class id: "module.name"}; recs {oid: (serial, class
    id, pickle)}; entries {map oid: [(encoded key, serial, value)]} in key
    order; bad_crc, the oids of format-3 LMDB records whose checksum does
    not match."""

    def __init__(self, addr):
        self.bad_crc = []
        if on_pg():
            self._read_pg(addr)
        else:
            self._read_lmdb(addr)

    def _read_lmdb(self, path):
        import lmdb
        env = lmdb.open(path, max_dbs=8, readonly=True, lock=False)
        try:
            meta_db, rec_db = env.open_db(b"meta"), env.open_db(b"records")
            cls_db = env.open_db(b"classes")
            try:
                ent_db = env.open_db(b"mapents", create=False)
            except lmdb.NotFoundError:
                ent_db = None
            with env.begin() as t:
                self.meta = {k.decode(): struct.unpack("<Q", v)[0] if len(v) == 8 else bytes(v)
                             for k, v in t.cursor(db=meta_db)}
                self.names = {struct.unpack("=I", k[1:5])[0]: v.replace(b"\0", b".").decode()
                              for k, v in t.cursor(db=cls_db) if k[:1] == b"i"}
                self.recs = {}
                for k, v in t.cursor(db=rec_db):
                    oid = struct.unpack(">Q", k)[0]
                    serial, cid, crc = struct.unpack("<QII", v[:16])
                    if self.meta.get("format", 0) >= 3 and seal_record(k, v)[12:16] != bytes(v[12:16]):
                        self.bad_crc.append(oid)
                    self.recs[oid] = (serial, cid, bytes(v[16:]))
                self.entries = {}
                skip = 12 if self.meta.get("format", 3) >= 3 else 8
                for k, v in (t.cursor(db=ent_db) if ent_db is not None else ()):
                    self.entries.setdefault(struct.unpack(">Q", k[:8])[0], []).append(
                        (bytes(k[8:]), struct.unpack("<Q", v[:8])[0], bytes(v[skip:])))
        finally:
            env.close()

    def _read_pg(self, addr):
        row = sql(addr, "SELECT format, next_oid, last_serial, next_class FROM ost_meta").split("|")
        self.meta = dict(zip(("format", "next_oid", "last_serial", "next_class"), map(int, row)))
        self.names = {}
        for line in sql(addr, "SELECT id, module || '.' || name FROM ost_classes").splitlines():
            cid, name = line.split("|", 1)
            self.names[int(cid)] = name
        self.recs = {}
        for line in sql(addr, "SELECT oid, serial, cid, encode(state, 'hex') FROM ost_records "
                              "ORDER BY oid").splitlines():
            oid, serial, cid, state = line.split("|")
            self.recs[int(oid)] = (int(serial), int(cid), bytes.fromhex(state))
        self.entries = {}
        for line in sql(addr, "SELECT map, encode(key, 'hex'), serial, encode(value, 'hex') "
                              "FROM ost_ments ORDER BY map, key").splitlines():
            m, key, serial, value = line.split("|")
            self.entries.setdefault(int(m), []).append(
                (bytes.fromhex(key), int(serial), bytes.fromhex(value)))

    def records(self):
        """{oid: (serial, class name, pickle, size)}, the size as `ostore
        ls` and `cat` give it: the pickle and LMDB's 16-byte header. A
        record of a class version (format 4: the class table names it
        module.Name(f1,f2)) gives the class's name, and its pickle is a
        Positional: the same bytes, with the version's fields, so that
        state_of reads it as the dict a format-3 record would hold."""
        out = {}
        for oid, (s, c, p) in self.recs.items():
            name = self.names.get(c)
            if name and name.endswith(")") and "(" in name:
                name, _, flist = name[:-1].partition("(")
                p = Positional(p)
                p.fields = flist.split(",") if flist else []
            out[oid] = (s, name, p, 16 + len(p))
        return out


class Positional(bytes):
    """A positional record's pickle (format 4); fields: its version's."""
    fields = ()


def put_state(addr, oid, data):
    """Replaces the state pickle of record oid (its serial and class kept;
    on LMDB with its checksum put right)."""
    if on_pg():
        sql(addr, "UPDATE ost_records SET state = '\\x%s'::bytea WHERE oid = %d"
            % (data.hex(), oid))
        return
    _lmdb_write(addr, lambda env, t: t.put(
        struct.pack(">Q", oid), seal_record(struct.pack(">Q", oid),
                                            t.get(struct.pack(">Q", oid), db=env.open_db(b"records", txn=t))[:16]
                                            + data), db=env.open_db(b"records", txn=t)))


def set_class(addr, oid, cid):
    """Gives record oid the class id cid (on LMDB with its checksum put
    right), as a writer's bug could."""
    if on_pg():
        sql(addr, "UPDATE ost_records SET cid = %d WHERE oid = %d" % (cid, oid))
        return
    k = struct.pack(">Q", oid)

    def fn(env, t):
        db = env.open_db(b"records", txn=t)
        v = t.get(k, db=db)
        t.put(k, seal_record(k, v[:8] + struct.pack("<I", cid) + v[12:]), db=db)
    _lmdb_write(addr, fn)


def delete_record(addr, oid):
    if on_pg():
        sql(addr, "DELETE FROM ost_records WHERE oid = %d" % oid)
        return
    _lmdb_write(addr, lambda env, t: t.delete(struct.pack(">Q", oid), db=env.open_db(b"records", txn=t)))


def put_entry(addr, m, key, serial, value):
    """Adds or replaces the entry key (encoded) of map m, with the value
    pickle value (on LMDB with a checksum that matches)."""
    if on_pg():
        sql(addr, "INSERT INTO ost_ments (map, key, serial, value) VALUES (%d, '\\x%s', %d, '\\x%s') "
            "ON CONFLICT (map, key) DO UPDATE SET serial = EXCLUDED.serial, value = EXCLUDED.value"
            % (m, key.hex(), serial, value.hex()))
        return
    k = struct.pack(">Q", m) + key
    _lmdb_write(addr, lambda env, t: t.put(k, make_entry(k, serial, value),
                                           db=env.open_db(b"mapents", txn=t)))


def _lmdb_write(path, fn):
    import lmdb
    env = lmdb.open(path, max_dbs=8, map_size=1 << 30)
    try:
        with env.begin(write=True) as t:
            fn(env, t)
    finally:
        env.close()


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
    """A reference: pid (oid, class id) in format 4, the oid before."""
    def __init__(self, oid, cid=None):
        self.oid, self.cid = oid, cid

    def __repr__(self):
        return "persistent(%d)" % self.oid


class RefReader(pickle.Unpickler):
    def persistent_load(self, pid):
        return Ref(*pid) if isinstance(pid, tuple) else Ref(pid)


class RefWriter(pickle.Pickler):
    def persistent_id(self, obj):
        if not isinstance(obj, Ref):
            return None
        return obj.oid if obj.cid is None else (obj.oid, obj.cid)


def state_of(data):
    state = RefReader(io.BytesIO(data)).load()
    if isinstance(data, Positional):  # the tuple, zipped with its version's names
        if not isinstance(state, tuple) or len(state) != len(data.fields):
            raise ValueError("positional state %r does not fit fields %r" % (state, data.fields))
        return dict(zip(data.fields, state))
    return state


def refs_of(data):
    """The oids a record's pickle references, in order (from the opcodes):
    the int before BINPERSID, or format 4's pair (oid, class id): two ints
    then TUPLE2."""
    out, last, prev = [], None, None
    for op, arg, _ in pickletools.genops(data):
        if op.name == "BINPERSID":
            out.append(last)
        if op.name == "TUPLE2":
            last = prev
        elif op.name not in ("MEMOIZE", "BINPUT", "LONG_BINPUT", "FRAME"):
            prev, last = last, arg
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
