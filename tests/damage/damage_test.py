#!/usr/bin/python3
"""The damage test (issue 11): damaged copies of a 50,000-object store, every
command run on each, each under a time limit.

It makes one store with `ostore demo DIR --objects 50000 --quiet` (51,623
records and 15,480 map entries), maps it with damage_map (where each record,
map entry and live byte lies in data.mdb), reads it with python3-lmdb and its
own CRC-32C, and then runs TRIALS trials. Trial N damages a copy one way,
chosen in turn from KINDS (below), with a random generator seeded by
"SEED:N", and runs on it: info, ls --limit 50, cat of the root, of an oid
(a damaged record's when there is one), of a map with --limit 5, refs, check,
export (the dump parsed and imported again), salvage, and pack last (it
writes). It passes when, on every damaged copy:

- no command is killed by a signal or runs past its time limit, and each
  exits 0 or 1; on 1, stderr is one line starting "ostore: "; on 0, stderr
  is empty; no sanitizer report anywhere;
- the read-only commands and salvage leave data.mdb as it was;
- check exits 1 whenever a byte changed that the snapshot depends on (a live
  byte, per ost__pc_live), but for two changes no check can tell, which may
  pass when the page walk is clean and the store reads back as the pristine
  one: a branch separator key within its bounds, and a meta page's map size
  (a hint to LMDB) within check's bounds; when check passes, the store reads back (with
  python3-lmdb, in a child process) the pristine records and map entries;
- export, when it exits 0, wrote a dump that parses (structure, CRC-32) and
  that `ostore import` takes, holding every record whose bytes were not
  touched; when it exits 1, it left no file behind;
- salvage recovers every record (and every map entry of a recovered map)
  whose key and value bytes were not touched, with the same serial, class
  and pickle; it may exit 1 only when nothing intact was left or both meta
  pages were damaged (said as a note); on exit 1 it leaves no directory;
- pack, when it exits 0, keeps every record reachable in the pristine store
  whose bytes were not touched; when it exits 1, data.mdb is unchanged (or
  at least its records and map entries are).

Run by hand (from the source tree, after `ninja -C build`):

    /usr/bin/python3 tests/damage/damage_test.py \\
        --cli build/tools/ostore --map build/tests/damage/damage_map \\
        [--trials 300] [--seed 11] [--jobs 2] [--timeout 20] \\
        [--trial N ...] [--kind KIND ...] [--keep DIR] [--store DIR] [-v]

Defaults: 300 trials, seed 11, 2 worker processes, 20 s per command. The
environment can set them too: DAMAGE_TRIALS, DAMAGE_SEED (a number or
"random"), DAMAGE_JOBS, DAMAGE_TIMEOUT (arguments win); OSTORE_CLI and
DAMAGE_MAP give the two programs. meson test passes --default-trials, the
count used when neither --trials nor DAMAGE_TRIALS gives one (fewer under
the sanitizers: tests/damage/meson.build), so `DAMAGE_TRIALS=300 meson test
-C build-asan damage` runs them all there. -v prints every command with its
exit status and time.

`ostore demo` does not make the same file twice (its writer thread commits
in batches), so a seed repeats a trial only on the same pristine store. Trial
N's damage follows from the seed, N, the damage kinds and that store alone,
so --store DIR --seed S --trial N runs it again byte for byte. Under meson
(--keep-failed DIR), a run with a failure leaves its pristine store in
DIR/pristine (build/tests/damage/failed/pristine). --keep DIR keeps the whole
work directory: DIR/pristine, and DIR/trial-N/data.mdb (the damaged file)
of each failed trial.
"""
import argparse
import bisect
import collections
import io
import multiprocessing
import os
import pickle
import random
import shutil
import signal
import struct
import subprocess
import sys
import tempfile
import time
import traceback
import zlib

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "cli"))
from clilib import crc32c  # noqa: E402  (CRC-32C computed independently of ostore)

# The damage kinds, used in turn: trial N is KINDS[N % len(KINDS)].
KINDS = [
    "records-bytes",   # 1-4 bytes in records' values (header or pickle)
    "records-page",    # 1-4 bytes anywhere in a leaf page of "records"
    "branch",          # 1-4 bytes in a branch page (any database)
    "leaf",            # 1-4 bytes in a leaf page of any database
    "meta-one",        # 1-4 bytes in one meta page
    "meta-both",       # 1-4 bytes in each meta page
    "truncate",        # data.mdb cut to a random length
    "node-size",       # a record's node data size made huge
    "key-bytes",       # 1-2 bytes of a record's key
    "entries",         # 1-4 bytes in map entries' keys or values
    "unused",          # 1-4 bytes the snapshot does not depend on
    "anywhere",        # 1-4 bytes anywhere in the file
]
MAPS = ("ostore.maps.OrderedMap", "ostore.maps.OrderedSet")
SANITIZER_MARKS = ("Sanitizer", "runtime error:", "==ERROR", "LeakSanitizer")
ASAN_SIGNAL_MARKS = ("AddressSanitizer:DEADLYSIGNAL", "AddressSanitizer: SEGV",
                     "AddressSanitizer: BUS", "AddressSanitizer: ABRT", "AddressSanitizer: FPE")
CAUGHT_CRASH = "crashed while reading the store"

G = None  # the pristine store and the options, set before the workers fork


# ---- reading stores ------------------------------------------------------------------------

def record_ok(key, value):
    """A format-3 record's checksum verifies."""
    if len(value) < 16:
        return False
    crc, = struct.unpack_from("<I", value, 12)
    return crc == crc32c(value[16:], crc32c(value[:12], crc32c(key)))


def entry_ok(key, value):
    """A format-3 map entry's checksum verifies."""
    if len(value) < 12:
        return False
    crc, = struct.unpack_from("<I", value, 8)
    return crc == crc32c(value[12:], crc32c(value[:8], crc32c(key)))


def read_store(path):
    """A store's records (oid -> value bytes), map entries (key -> value),
    class names (id -> "module.name") and meta values, read with
    python3-lmdb. Only for a store liblmdb can read: run it in a child
    (dump_in_child) when the store may be damaged."""
    import lmdb
    env = lmdb.open(path, max_dbs=8, readonly=True, lock=False)
    out = {"records": {}, "entries": {}, "classes": {}, "meta": {}}
    try:
        with env.begin(buffers=False) as txn:
            for name, db in (("records", b"records"), ("entries", b"mapents"),
                             ("classes", b"classes"), ("meta", b"meta")):
                try:
                    handle = env.open_db(db, txn=txn, create=False)
                except lmdb.NotFoundError:
                    continue
                for k, v in txn.cursor(db=handle):
                    if name == "records":
                        out["records"][struct.unpack(">Q", k)[0]] = v
                    elif name == "classes":
                        if k[:1] == b"i" and len(k) == 5:
                            out["classes"][struct.unpack("=I", k[1:5])[0]] = \
                                v.replace(b"\0", b".").decode("utf-8", "replace")
                    else:
                        out[name][k] = v
    finally:
        env.close()
    return out


def dump_in_child(path, out_file, timeout):
    """read_store in a child process (liblmdb may crash on a damaged file):
    the result, or a string saying why there is none."""
    try:
        p = subprocess.run([sys.executable, os.path.abspath(__file__), "--dump", path, out_file],
                           stdout=subprocess.PIPE, stderr=subprocess.PIPE, timeout=timeout)
    except subprocess.TimeoutExpired:
        return "python3-lmdb reader: no answer in %d s" % timeout
    if p.returncode != 0:
        how = ("killed by %s" % signame(-p.returncode) if p.returncode < 0
               else "exit %d" % p.returncode)
        last = p.stderr.decode("utf-8", "replace").strip().splitlines()[-1:] or [""]
        return "python3-lmdb reader: %s %s" % (how, last[0][:200])
    with open(out_file, "rb") as f:
        data = pickle.load(f)
    os.unlink(out_file)
    return data


def class_of(store, value):
    if len(value) < 16:
        return "?"
    cid, = struct.unpack_from("<I", value, 8)
    return store["classes"].get(cid, "class %d?" % cid)


def signame(n):
    try:
        return signal.Signals(n).name
    except ValueError:
        return "signal %d" % n


# ---- references and reachability -------------------------------------------------------

class _Stub:
    def __init__(self, *a):
        pass

    def __setstate__(self, state):
        pass


class _RefReader(pickle.Unpickler):
    def __init__(self, data):
        super().__init__(io.BytesIO(data))
        self.refs = []

    def persistent_load(self, pid):
        # format 4: (oid, class id); formats 1 to 3: the oid
        self.refs.append(pid[0] if isinstance(pid, tuple) and len(pid) == 2 else pid)
        return None

    def find_class(self, module, name):
        return type(name, (_Stub,), {})


def refs_of(pickled):
    r = _RefReader(pickled)
    state = r.load()
    return r.refs, state


def reachable(store):
    """The oids reachable from the root through records and map values."""
    by_map = collections.defaultdict(list)
    for k, v in store["entries"].items():
        by_map[struct.unpack(">Q", k[:8])[0]].append(v)
    seen, todo = set(), [0]
    while todo:
        oid = todo.pop()
        if oid in seen or oid not in store["records"]:
            continue
        seen.add(oid)
        value = store["records"][oid]
        refs, _ = refs_of(value[16:])
        if class_of(store, value) in MAPS:
            for v in by_map.get(oid, ()):
                if len(v) > 12:
                    refs += refs_of(v[12:])[0]
        todo += [r for r in refs if isinstance(r, int) and r not in seen]
    return seen


# ---- the export format (docs/cli.md) ---------------------------------------------------

def parse_export(path):
    """The records (oid -> (serial, class name, pickle)) and entries of an
    export file, or a string saying why it is not a whole, valid one."""
    try:
        with open(path, "rb") as f:
            data = f.read()
    except OSError as e:
        return "cannot read the dump: %s" % e
    pos = 0

    def take(n):
        nonlocal pos
        if pos + n > len(data):
            raise ValueError("truncated at byte %d" % pos)
        b = data[pos:pos + n]
        pos += n
        return b

    def unpack(fmt):
        return struct.unpack(fmt, take(struct.calcsize(fmt)))

    try:
        if take(8) != b"OSTDUMP\n":
            return "no OSTDUMP magic"
        version, = unpack("<I")
        if version not in (1, 2):
            return "dump version %d" % version
        fmt, nrec, pbytes, next_oid, last_serial, next_class = unpack("<IQQQQQ")
        nent, ebytes = unpack("<QQ") if version >= 2 else (0, 0)
        classes = {}
        for _ in range(unpack("<I")[0]):
            cid, = unpack("<I")
            module = take(unpack("<H")[0]).decode()
            name = take(unpack("<H")[0]).decode()
            classes[cid] = module + "." + name
        records, total, last = {}, 0, -1
        rec_head = struct.Struct("<QQII")
        for _ in range(nrec):  # inline, for speed: the dump holds 51,623 records
            if pos + 24 > len(data):
                raise ValueError("truncated at byte %d" % pos)
            oid, serial, cid, n = rec_head.unpack_from(data, pos)
            pos += 24
            if oid <= last:
                return "oids not ascending at oid %d" % oid
            if oid >= next_oid:
                return "oid %d not below next_oid %d" % (oid, next_oid)
            if serial > last_serial:
                return "oid %d: serial %d past last_serial %d" % (oid, serial, last_serial)
            if cid not in classes:
                return "oid %d: class id %d not in the table" % (oid, cid)
            last = oid
            if pos + n > len(data):
                raise ValueError("truncated at byte %d" % pos)
            records[oid] = (serial, classes[cid], data[pos:pos + n])
            pos += n
            total += n
        if total != pbytes:
            return "pickle bytes %d, header says %d" % (total, pbytes)
        entries, total, lastkey = {}, 0, b""
        for _ in range(nent):
            oid, = unpack("<Q")
            key = take(unpack("<H")[0])
            serial, n = unpack("<QI")
            full = struct.pack(">Q", oid) + key
            if full <= lastkey:
                return "entries not ascending at map %d" % oid
            lastkey = full
            entries[full] = (serial, take(n))
            total += len(key) + n
        if version >= 2 and total != ebytes:
            return "entry bytes %d, header says %d" % (total, ebytes)
        if take(8) != b"OSTDEND\n":
            return "no trailer"
        crc = zlib.crc32(data[:pos])
        if unpack("<I")[0] != crc:
            return "CRC-32 mismatch"
        if pos != len(data):
            return "%d bytes after the trailer" % (len(data) - pos)
    except (ValueError, UnicodeDecodeError, struct.error) as e:
        return "does not parse: %s" % e
    return {"records": records, "entries": entries}


# ---- the pristine store's map ----------------------------------------------------------

class Spans:
    """Sorted, disjoint byte ranges with a label each; finds the ones that
    overlap a range."""
    def __init__(self, items):
        items.sort()
        self.starts = [s for s, _, _ in items]
        self.ends = [e for _, e, _ in items]
        self.labels = [l for _, _, l in items]
        for i in range(1, len(items)):
            if self.starts[i] < self.ends[i - 1]:
                raise SystemExit("damage_map: ranges overlap at byte %d: %r and %r"
                                 % (self.starts[i], self.labels[i - 1], self.labels[i]))

    def overlapping(self, a, b):
        lo = bisect.bisect_right(self.ends, a)
        hi = bisect.bisect_left(self.starts, b)
        return [(self.starts[i], self.ends[i], self.labels[i]) for i in range(lo, hi)]


class StoreMap:
    def __init__(self, text):
        self.pages, self.recs, self.ents, self.kvs = [], {}, [], []
        live, owners = [], []
        for line in text.splitlines():
            f = line.split()
            if f[0] == "psize":
                self.psize = int(f[1])
            elif f[0] == "pages":
                self.npages = int(f[1])
            elif f[0] == "filesize":
                self.size = int(f[1])
            elif f[0] == "meta":
                self.cur_meta = int(f[1])
            elif f[0] == "page":
                self.pages.append((f[2], f[3]))
            elif f[0] == "live":
                live.append((int(f[1]), int(f[1]) + int(f[2]), f[3]))
            elif f[0] in ("rec", "ent", "kv"):
                if f[0] == "rec":
                    oid = int(f[1])
                    off, ln, koff, kl, noff, pg = map(int, f[2:8])
                    self.recs[oid] = (off, ln, koff, kl, noff, pg)
                    who = ("rec", oid)
                else:
                    off, ln, koff, kl, noff, pg = map(int, f[3:9])
                    who = (f[0], f[1], f[2])
                    (self.ents if f[0] == "ent" else self.kvs).append(
                        (f[1], f[2], off, ln, koff, kl, noff, pg))
                owners.append((noff, noff + 8, (who, "node header")))
                owners.append((koff, koff + kl, (who, "key")))
                if ln:
                    owners.append((off, off + ln, (who, "value")))
                if off != koff + kl:  # a big value: its run's page number follows the key
                    owners.append((koff + kl, koff + kl + 8, (who, "overflow page number")))
        self.live = Spans(live)
        self.owners = Spans(owners)
        self.branch = [p for p, (k, _) in enumerate(self.pages) if k == "branch"]
        self.leaf = [p for p, (k, _) in enumerate(self.pages) if k == "leaf"]
        self.rec_leaf = [p for p, (k, d) in enumerate(self.pages) if k == "leaf" and d == "records"]
        self.oids = sorted(self.recs)

    def live_in(self, a, b):
        return [(max(s, a), min(e, b), k) for s, e, k in self.live.overlapping(a, b)]

    def describe(self, off):
        """One changed byte: where it is and whose it was."""
        pg = off // self.psize
        if pg >= len(self.pages):
            return "byte %d (past the pages)" % off
        kind, db = self.pages[pg]
        where = "page %d %s%s+%d" % (pg, kind, "" if db == "-" else " " + db, off % self.psize)
        live = self.live.overlapping(off, off + 1)
        lk = live[0][2] if live else "unused"
        owner = self.owners.overlapping(off, off + 1)
        if owner:
            (who, part) = owner[0][2]
            if who[0] == "rec":
                what = "%s of record %d" % (part, who[1])
            elif who[0] == "ent":
                what = "%s of the entry of map %s key %s" % (part, who[1], who[2][:40])
            else:
                what = "%s of %s key %s" % (part, who[1], who[2][:40])
            return "byte %d (%s, live %s: %s)" % (off, where, lk, what)
        if off % self.psize < 16 and kind != "unused":
            return "byte %d (%s, live %s: page header)" % (off, where, lk)
        return "byte %d (%s, live %s)" % (off, where, lk)


# ---- damage ------------------------------------------------------------------------------

def live_bytes_in(m, a, b):
    """Every live byte offset in [a, b)."""
    out = []
    for s, e, _ in m.live_in(a, b):
        out.extend(range(s, e))
    return out


def pick_bytes(rng, candidates, n):
    n = min(n, len(candidates))
    return rng.sample(candidates, n) if n else []


def make_damage(rng, kind, m, data):
    """Damages data (a bytearray, in place) one way; returns (offsets
    changed, truncated length or None, a one-line description)."""
    ps = m.psize
    n = rng.randint(1, 4)
    offs = []
    desc = kind
    if kind == "records-bytes":
        if rng.random() < 0.5:
            oid = rng.choice(m.oids)
            off, ln = m.recs[oid][:2]
            offs = [off + rng.randrange(ln) for _ in range(n)]
            desc += ": %d bytes of record %d's value" % (n, oid)
        else:
            for _ in range(n):
                off, ln = m.recs[rng.choice(m.oids)][:2]
                offs.append(off + rng.randrange(ln))
            desc += ": a byte of each of %d records' values" % n
    elif kind in ("records-page", "branch", "leaf"):
        pages = {"records-page": m.rec_leaf, "branch": m.branch, "leaf": m.leaf}[kind]
        pg = rng.choice(pages)
        base = pg * ps
        if kind != "records-page" and rng.random() < 0.5:
            offs = pick_bytes(rng, live_bytes_in(m, base, base + ps), n)
            desc += ": %d live bytes of page %d (%s %s)" % (len(offs), pg, *m.pages[pg])
        else:
            offs = [base + rng.randrange(ps) for _ in range(n)]
            desc += ": %d bytes of page %d (%s %s)" % (n, pg, *m.pages[pg])
    elif kind in ("meta-one", "meta-both"):
        metas = [rng.randrange(2)] if kind == "meta-one" else [0, 1]
        for mp in metas:
            base = mp * ps
            if kind == "meta-both" and rng.random() < 0.3:
                # The magic, version or page size: fields every reader checks.
                cand = list(range(base + 16, base + 24)) + list(range(base + 40, base + 44))
                offs += pick_bytes(rng, cand, n)
            elif rng.random() < 0.75:
                offs += pick_bytes(rng, live_bytes_in(m, base, base + ps), n)
            else:
                offs += [base + rng.randrange(ps) for _ in range(n)]
        desc += ": %d bytes of meta page%s %s" % (len(offs), "s" if len(metas) > 1 else "",
                                                 " and ".join(map(str, metas)))
    elif kind == "truncate":
        r = rng.random()
        if r < 0.5:
            cut = rng.randrange(m.size)
        elif r < 0.75:
            cut = rng.randrange(m.npages) * ps
        else:
            cut = max(0, m.size - rng.randint(1, 4 * ps))
        del data[cut:]
        return [], cut, "truncate: data.mdb cut from %d to %d bytes (page %d of %d)" % (
            m.size, cut, cut // ps, m.npages)
    elif kind == "node-size":
        oid = rng.choice(m.oids)
        noff = m.recs[oid][4]
        old = struct.unpack_from("<HH", data, noff)
        size = rng.choice([0xFFFFFFFF, rng.randint(ps, 0xFFFFFFFF), rng.randint(0x10000, 0xFFFFFF)])
        struct.pack_into("<HH", data, noff, size & 0xFFFF, size >> 16)
        changed = [noff + i for i in range(4) if data[noff + i] != G["data"][noff + i]]
        return changed, None, "node-size: record %d's node data size %d made %d" % (
            oid, old[0] | old[1] << 16, size)
    elif kind == "key-bytes":
        oid = rng.choice(m.oids)
        koff = m.recs[oid][2]
        if rng.random() < 0.5:
            offs = [koff + 7]
            x = rng.randint(1, 8)
            data[koff + 7] ^= x
            return offs, None, "key-bytes: record %d's key, last byte xor %d (oid %d)" % (
                oid, x, oid ^ x)
        offs = [koff + i for i in rng.sample(range(8), rng.randint(1, 2))]
        desc += ": %d bytes of record %d's key" % (len(offs), oid)
    elif kind == "entries":
        for _ in range(n):
            e = rng.choice(m.ents)
            off, ln, koff, kl = e[2:6]
            if rng.random() < 0.5:
                offs.append(off + rng.randrange(ln))
            else:
                offs.append(koff + rng.randrange(kl))
        desc += ": %d bytes of map entries" % n
    elif kind == "unused":
        while len(offs) < n:
            o = rng.randrange(m.size)
            if not m.live.overlapping(o, o + 1):
                offs.append(o)
        desc += ": %d bytes no snapshot reads" % n
    elif kind == "anywhere":
        offs = [rng.randrange(m.size) for _ in range(n)]
        desc += ": %d bytes anywhere" % n
    else:
        raise SystemExit("unknown damage kind %r" % kind)
    offs = sorted(set(offs))
    for o in offs:
        data[o] ^= rng.randint(1, 255)
    return offs, None, desc


# ---- one trial -------------------------------------------------------------------------

class Trial:
    def __init__(self, n, kind, desc, changed, cut):
        self.n, self.kind, self.desc = n, kind, desc
        self.changed, self.cut = changed, cut
        self.failures, self.notes = [], []
        self.runs = 0

    def fail(self, what, cmd, detail):
        self.failures.append({"trial": self.n, "kind": what, "damage": self.desc,
                              "cmd": cmd, "detail": detail})

    def note(self, text):
        self.notes.append(text)


def changed_ranges(t, m):
    if t.cut is not None:
        return [(t.cut, m.size)] if t.cut < m.size else []
    return [(o, o + 1) for o in t.changed]


def touched_owners(t, m):
    """(who -> set of parts) for every record, entry and kv whose bytes
    changed."""
    out = collections.defaultdict(set)
    for a, b in changed_ranges(t, m):
        for _, _, (who, part) in m.owners.overlapping(a, b):
            out[who].add(part)
    return out


def changed_text(t, m, limit=6):
    if t.cut is not None:
        return "bytes %d to %d (cut)" % (t.cut, m.size)
    parts = [m.describe(o) for o in t.changed[:limit]]
    if len(t.changed) > limit:
        parts.append("... %d more" % (len(t.changed) - limit))
    return "; ".join(parts)


def page_changes(t, m, pg):
    """The changed bytes of page pg, described (for a record that was lost)."""
    a, b = pg * m.psize, (pg + 1) * m.psize
    if t.cut is not None:
        return "page %d cut" % pg if t.cut < b else ""
    return "; ".join(m.describe(o) for o in t.changed if a <= o < b)


def run_cmd(t, name, args, timeout):
    """Runs one command and checks what every run must do; gives (rc,
    stdout, stderr), rc None when it could not finish."""
    cmd = "ostore " + " ".join(args)
    t.runs += 1
    start = time.monotonic()
    try:
        p = subprocess.run([G["cli"]] + args, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                           timeout=timeout, stdin=subprocess.DEVNULL)
    except subprocess.TimeoutExpired as e:
        t.fail("hang", cmd, "no exit in %d s; stderr %r" % (timeout, (e.stderr or b"")[:300]))
        return None, "", ""
    elapsed = time.monotonic() - start
    if G["verbose"]:
        print("  trial %d: %s: exit %d in %.2f s" % (t.n, cmd, p.returncode, elapsed), flush=True)
    out = p.stdout.decode("utf-8", "replace")
    err = p.stderr.decode("utf-8", "replace")
    rc = p.returncode
    # A crash is a signal however it ends: killed by it, reported by
    # AddressSanitizer (which takes SIGSEGV and SIGBUS in the sanitizer
    # build), or turned into an "ostore: ...: crashed while reading the
    # store" line by the tool's own handler (tools/util.c, guard_crashes).
    lines = [l for l in err.splitlines() if l.strip()]
    if any(mark in err for mark in ASAN_SIGNAL_MARKS):
        t.fail("signal", cmd, "exit %d, AddressSanitizer caught a signal: %s" % (
            rc, " | ".join(l.strip() for l in lines[:10] if "#" in l or "ERROR" in l)[:900]))
        return None, out, err
    if any(mark in err for mark in SANITIZER_MARKS):
        t.fail("sanitizer", cmd, "exit %d; %s" % (rc, " | ".join(lines[:8])[:900]))
        return None, out, err
    if CAUGHT_CRASH in err:
        t.fail("signal", cmd, "exit %d, the tool caught SIGSEGV or SIGBUS: %r" % (rc, err[:300]))
        return None, out, err
    if rc < 0:
        t.fail("signal", cmd, "killed by %s; stderr %r" % (signame(-rc), err[-400:]))
        return None, out, err
    if rc not in (0, 1):
        t.fail("exit-status", cmd, "exit %d (0 or 1 expected); stderr %r" % (rc, err[-400:]))
        return None, out, err
    if rc == 1 and not (err.startswith("ostore: ") and err.count("\n") == 1
                        and err.endswith("\n")):
        t.fail("stderr", cmd, "exit 1 but stderr is not one 'ostore: ' line: %r" % err[:600])
    if rc == 0 and err:
        t.fail("stderr", cmd, "exit 0 but stderr is not empty: %r" % err[:600])
    return rc, out, err


def page_walk(store):
    """What ost__pc_walk says of a damaged copy (damage_map --walk): (found
    something, one line)."""
    try:
        p = subprocess.run([G["mapprog"], "--walk", store], stdout=subprocess.PIPE,
                           stderr=subprocess.PIPE, timeout=G["timeout"])
    except subprocess.TimeoutExpired:
        return True, "damage_map --walk: no exit in %d s" % G["timeout"]
    lines = p.stdout.decode("utf-8", "replace").splitlines()
    if p.returncode not in (0, 1):
        return True, "damage_map --walk: exit %d %r" % (p.returncode, p.stderr[-200:])
    if p.returncode == 0:
        return False, "ost__pc_walk finds nothing either"
    probs = [l[8:] for l in lines if l.startswith("problem ")]
    total = lines[-1][9:] if lines and lines[-1].startswith("problems ") else "?"
    return True, "ost__pc_walk finds %s problems: %s" % (total, " | ".join(probs[:2]))


def compare_readback(t, cmd, what, got, m):
    """A store check passed on must read back as the pristine one."""
    want = G["pristine"]
    diffs = []
    for name in ("records", "entries"):
        a, b = want[name], got[name]
        missing = [k for k in a if k not in b]
        extra = [k for k in b if k not in a]
        differ = [k for k in a if k in b and a[k] != b[k]]
        if missing or extra or differ:
            diffs.append("%s: %d missing %s, %d extra %s, %d differ %s" % (
                name, len(missing), missing[:3], len(extra), extra[:3], len(differ), differ[:3]))
    if diffs:
        t.fail(what, cmd, "; ".join(diffs) + "; changed: " + changed_text(t, m))


def check_export(t, cmd, path, m, intact, work):
    dump = parse_export(path)
    if isinstance(dump, str):
        t.fail("export-invalid", cmd, "exit 0 but the dump is not valid: %s" % dump)
        return
    want = G["pristine_tuples"]
    missing, wrong = [], []
    for oid in intact:
        got = dump["records"].get(oid)
        if got is None:
            missing.append(oid)
        elif got != want[oid]:
            wrong.append(oid)
    if missing or wrong:
        t.fail("export-intact", cmd,
               "exit 0 but of %d intact records %d are missing (%s) and %d differ (%s); "
               "changed: %s" % (len(intact), len(missing), missing[:5], len(wrong), wrong[:5],
                                changed_text(t, m)))
    imp = os.path.join(work, "imported")
    icmd = "ostore import %s %s" % (imp, path)
    try:
        p = subprocess.run([G["cli"], "import", imp, path], stdout=subprocess.PIPE,
                           stderr=subprocess.PIPE, timeout=G["timeout"])
        t.runs += 1
        if p.returncode != 0:
            t.fail("export-import", icmd, "the dump export wrote (exit 0) is refused: exit "
                   "%d, %r" % (p.returncode, p.stderr.decode("utf-8", "replace")[:400]))
    except subprocess.TimeoutExpired:
        t.fail("hang", icmd, "no exit in %d s" % G["timeout"])
    shutil.rmtree(imp, ignore_errors=True)


def check_salvage(t, cmd, dst, m, touched, work):
    got = dump_in_child(dst, os.path.join(work, "salvaged.pickle"), G["timeout"])
    if isinstance(got, str):
        t.fail("salvage-unreadable", cmd, "exit 0 but the new store does not read: %s" % got)
        return
    pristine = G["pristine"]
    # Equal bytes are the same serial, class and pickle when the class ids
    # name the same classes.
    same_classes = all(got["classes"].get(c) == n for c, n in pristine["classes"].items())
    # When bytes of the class table changed (or were cut off), a class's name
    # may be lost for good: its records then come back, bytes intact, under
    # the stand-in name salvage gives (ostore.salvage.LostClassN).
    classes_touched = any(w[0] == "kv" and w[1] == "classes" for w in touched)

    def class_ok(g, v):
        c = class_of(got, g)
        return c == class_of(pristine, v) or (
            classes_touched and c == "ostore.salvage.LostClass%d" % struct.unpack_from("<I", g, 8)[0])
    lost, wrong = [], []
    for oid, v in pristine["records"].items():
        if ("rec", oid) in touched and touched[("rec", oid)] & {"key", "value"}:
            g = got["records"].get(oid)
            # A damaged record may come back only as itself or an older copy.
            if g is not None and g != v and len(g) >= 16 and \
                    struct.unpack_from("<Q", g)[0] >= struct.unpack_from("<Q", v)[0] and \
                    not same_map_record(oid, v, g, pristine, got):
                t.fail("salvage-damaged-copy", cmd,
                       "record %d (%s): its bytes changed (%s) and salvage copied a version "
                       "of serial %d that differs from the pristine one" % (
                           oid, class_of(pristine, v), changed_text(t, m),
                           struct.unpack_from("<Q", g)[0]))
            continue
        g = got["records"].get(oid)
        if g is None:
            lost.append(oid)
        elif g == v and same_classes:
            continue
        elif g[16:] != v[16:] or g[:8] != v[:8] or not class_ok(g, v):
            if not same_map_record(oid, v, g, pristine, got):
                wrong.append(oid)

    def where(oid):
        off, ln, koff, kl, noff, pg = m.recs[oid]
        parts = touched.get(("rec", oid))
        own = ("its %s changed" % ", ".join(sorted(parts))) if parts else "its node untouched"
        pc = page_changes(t, m, pg)
        return "oid %d (%s, leaf page %d: %s; page changes: %s)" % (
            oid, class_of(pristine, pristine["records"][oid]), pg, own, pc or "none")
    # A lost record whose node header (its data size, flags, key size) was
    # changed is told apart from one whose node is whole: the page around it
    # (header, pointers, a neighbour, the cut) is what was damaged then.
    own = [o for o in lost if ("rec", o) in touched]
    other = [o for o in lost if ("rec", o) not in touched]
    for what, group, why in (
            ("salvage-lost-intact-node", own, "key and value bytes were not touched (their "
             "node header was)"),
            ("salvage-lost-intact", other, "nodes were not touched at all")):
        if not group:
            continue
        pages = collections.Counter(m.recs[o][5] for o in group)
        t.fail(what, cmd,
               "%d records whose %s are not in the salvaged store, on %d leaf pages (%s); "
               "e.g. %s; changed: %s" % (
                   len(group), why, len(pages),
                   ", ".join("%d: %d" % kv for kv in pages.most_common(4)),
                   "; ".join(where(o) for o in group[:3]), changed_text(t, m)))
    def how(oid):
        v, g = pristine["records"][oid], got["records"][oid]
        return "oid %d: serial %d, %s, %d-byte pickle; salvaged: serial %d, %s, %s pickle" % (
            oid, struct.unpack_from("<Q", v)[0], class_of(pristine, v), len(v) - 16,
            struct.unpack_from("<Q", g)[0] if len(g) >= 8 else -1, class_of(got, g),
            "the same" if g[16:] == v[16:] else "a %d-byte" % max(0, len(g) - 16))
    if wrong:
        t.fail("salvage-wrong-intact", cmd,
               "%d records whose nodes were not touched differ in serial, class or pickle: "
               "%s; changed: %s" % (len(wrong), "; ".join(how(o) for o in wrong[:3]),
                                    changed_text(t, m)))
    # Map entries: those of a map whose record is in the new store.
    lost_e, lost_en = [], []
    for k, v in pristine["entries"].items():
        mapoid = struct.unpack(">Q", k[:8])[0]
        if mapoid not in got["records"]:
            continue
        who = ("ent", str(mapoid), k[8:].hex() or "-")
        parts = touched.get(who, set())
        if parts & {"key", "value"}:
            continue
        if got["entries"].get(k) != v:
            (lost_en if parts else lost_e).append("map %d key %s" % (mapoid, k[8:].hex()))
    for what, group, why in (
            ("salvage-lost-intact-entry-node", lost_en, "key and value bytes were not "
             "touched (their node header was)"),
            ("salvage-lost-intact-entry", lost_e, "nodes were not touched at all")):
        if group:
            t.fail(what, cmd, "%d map entries of recovered maps whose %s are missing or "
                   "differ: %s; changed: %s" % (len(group), why, "; ".join(group[:4]),
                                                changed_text(t, m)))


def same_map_record(oid, pv, gv, pristine, got):
    """A map's record salvage rewrote: the same serial, class and state but
    for the count, which must be the number of its entries it recovered."""
    if gv[:8] != pv[:8] or class_of(got, gv) != class_of(pristine, pv) \
            or class_of(pristine, pv) not in MAPS:
        return False
    try:
        ps, gs = refs_of(pv[16:])[1], refs_of(gv[16:])[1]
    except Exception:
        return False
    if not isinstance(ps, dict) or not isinstance(gs, dict) or set(ps) != set(gs):
        return False
    prefix = struct.pack(">Q", oid)
    n = sum(1 for k in got["entries"] if k[:8] == prefix)
    return gs.get("kind") == ps.get("kind") and gs.get("count") == n


def check_pack(t, cmd, rc, store, damaged, m, touched, work):
    if rc == 1:
        with open(os.path.join(store, "data.mdb"), "rb") as f:
            after = f.read()
        if after == damaged:
            return
        before_dir = os.path.join(work, "before")
        os.makedirs(before_dir)
        with open(os.path.join(before_dir, "data.mdb"), "wb") as f:
            f.write(damaged)
        a = dump_in_child(before_dir, os.path.join(work, "before.pickle"), G["timeout"])
        b = dump_in_child(store, os.path.join(work, "after.pickle"), G["timeout"])
        same = (not isinstance(a, str) and not isinstance(b, str)
                and a["records"] == b["records"] and a["entries"] == b["entries"])
        if same:
            t.note("pack failed but changed data.mdb (not its records or entries)")
        else:
            t.fail("pack-changed-on-failure", cmd,
                   "pack failed (exit 1, a crash or a hang), yet data.mdb changed and its "
                   "records or entries differ "
                   "(before: %s; after: %s)" % (
                       a if isinstance(a, str) else "%d records" % len(a["records"]),
                       b if isinstance(b, str) else "%d records" % len(b["records"])))
        return
    got = dump_in_child(store, os.path.join(work, "packed.pickle"), G["timeout"])
    if isinstance(got, str):
        t.fail("pack-unverifiable", cmd, "exit 0 but the packed store does not read, so "
               "what it kept cannot be checked: %s; changed: %s" % (got, changed_text(t, m)))
        return
    pristine = G["pristine"]
    gone, differ = [], []
    for oid in G["reachable"]:
        if touched.get(("rec", oid), set()) & {"key", "value"}:
            continue
        g = got["records"].get(oid)
        if g is None:
            gone.append(oid)
        elif g != pristine["records"][oid]:
            differ.append(oid)
    if gone:
        t.fail("pack-deleted-intact", cmd,
               "exit 0 and %d reachable records whose bytes were not touched are gone: %s; "
               "changed: %s" % (len(gone), gone[:8], changed_text(t, m)))
    if differ:
        t.fail("pack-changed-intact", cmd, "exit 0 and %d intact reachable records changed: "
               "%s" % (len(differ), differ[:8]))


def run_trial(n):
    t0 = time.monotonic()
    m = G["map"]
    kind = G["kinds"][n % len(G["kinds"])]
    rng = random.Random("%d:%d" % (G["seed"], n))
    data = bytearray(G["data"])
    changed, cut, desc = make_damage(rng, kind, m, data)
    t = Trial(n, kind, desc, changed, cut)
    work = os.path.join(G["work"], "trial-%d" % n)
    store = os.path.join(work, "store")
    os.makedirs(store)
    for name in os.listdir(G["store"]):
        if name != "data.mdb":
            shutil.copy(os.path.join(G["store"], name), store)
    damaged = bytes(data)
    with open(os.path.join(store, "data.mdb"), "wb") as f:
        f.write(damaged)

    touched = touched_owners(t, m)
    live_hit = []
    for a, b in changed_ranges(t, m):
        live_hit += m.live_in(a, b)
    touched_recs = sorted(who[1] for who, parts in touched.items()
                          if who[0] == "rec" and parts & {"key", "value"})
    hit = set(touched_recs)
    intact = [oid for oid in m.oids if oid not in hit]
    meta_both = all(any(lo < (mp + 1) * m.psize and hi > mp * m.psize for lo, hi, _ in live_hit)
                    for mp in (0, 1))
    if cut is not None and cut < 2 * m.psize:
        meta_both = True

    oid1 = touched_recs[0] if touched_recs else rng.choice(m.oids)
    oid2 = rng.choice(m.oids)
    mapoid = rng.choice(G["map_oids"])
    to = G["timeout"]
    for name, args in (("info", ["info", store]),
                       ("ls", ["ls", store, "--limit", "50"]),
                       ("cat", ["cat", store, "0"]),
                       ("cat", ["cat", store, str(oid1)]),
                       ("cat", ["cat", store, str(mapoid), "--limit", "5"]),
                       ("refs", ["refs", store, str(oid2)])):
        run_cmd(t, name, args, to)

    cmd = "ostore check %s" % store
    rc, out, err = run_cmd(t, "check", ["check", store], to)
    if rc == 0:
        got = dump_in_child(store, os.path.join(work, "check.pickle"), to)
        # A branch page's separator keys only bound its children: LMDB keeps
        # a separator at or below its child's first key (deletions move the
        # first key up, not the separator), so a separator changed within
        # its bounds leaves a sound tree that reads the same, which no
        # check can tell from the original. That, and only that, may pass.
        # A meta page's map size (bytes 32-39 of the page) is a hint: LMDB
        # maps the larger of it and the size the program asks for, or the
        # program's, and writes that into the next meta page; check bounds
        # it (at least the pages in use, at most 2^47). A change within the
        # bounds maps more or less address space and reads the same (found
        # with seeds 2554149205 trial 40 and 1621850458 trial 220).
        def in_mapsize(a, b):
            return any(mp * m.psize + 32 <= a and b <= mp * m.psize + 40 for mp in (0, 1))
        benign = bool(live_hit) and all(
            (k == "key" and m.pages[a // m.psize][0] == "branch")
            or (k == "meta" and in_mapsize(a, b)) for a, b, k in live_hit)
        same = (not isinstance(got, str) and got["records"] == G["pristine"]["records"]
                and got["entries"] == G["pristine"]["entries"])
        if live_hit and benign and same and not page_walk(store)[0]:
            pass  # a sound tree that reads the same: nothing to report
        elif live_hit:
            walk = page_walk(store)
            t.fail("check-missed" if walk[0] else "check-missed-walk-clean", cmd,
                   "exit 0 though %d live bytes changed (%s; %s): %s" % (
                       sum(b - a for a, b, _ in live_hit),
                       "the store still reads back the pristine records and entries" if same
                       else "and the store does not read back as the pristine one",
                       walk[1], changed_text(t, m)))
        if isinstance(got, str):
            t.fail("check-passed-unreadable", cmd, "exit 0 but the store does not read "
                   "back: %s; changed: %s" % (got, changed_text(t, m)))
        else:
            compare_readback(t, cmd, "check-passed-differs", got, m)

    dump = os.path.join(work, "export.dump")
    cmd = "ostore export %s %s" % (store, dump)
    rc, out, err = run_cmd(t, "export", ["export", store, dump], to)
    if rc == 0:
        check_export(t, cmd, dump, m, intact, work)
    elif rc == 1:
        left = [f for f in os.listdir(work) if f.startswith("export.dump")]
        if left:
            t.fail("export-left-file", cmd, "exit 1 but left %s" % left)
    if os.path.exists(dump):
        os.unlink(dump)

    dst = os.path.join(work, "salvaged")
    cmd = "ostore salvage %s %s" % (store, dst)
    rc, out, err = run_cmd(t, "salvage", ["salvage", store, dst], to)
    if rc == 0:
        check_salvage(t, cmd, dst, m, touched, work)
    elif rc == 1:
        if os.path.exists(dst):
            t.fail("salvage-left-dir", cmd, "exit 1 but %s exists" % dst)
        if meta_both:
            t.note("salvage exit 1 with both meta pages damaged (%d intact records not "
                   "recovered): %s" % (len(intact), (err.strip().splitlines() or [""])[0][:200]))
        elif intact:
            t.fail("salvage-refused", cmd, "exit 1 with %d records intact: %r; changed: %s" % (
                len(intact), err.strip()[:300], changed_text(t, m)))

    with open(os.path.join(store, "data.mdb"), "rb") as f:
        if f.read() != damaged:
            t.fail("readonly-wrote", "info, ls, cat, refs, check, export, salvage",
                   "data.mdb changed before pack ran")

    cmd = "ostore pack %s" % store
    rc, out, err = run_cmd(t, "pack", ["pack", store], to)
    # A pack that crashed or hung must not have changed anything either.
    check_pack(t, cmd, 0 if rc == 0 else 1, store, damaged, m, touched, work)

    if t.failures and G["keep"]:
        for name in os.listdir(work):
            if name != "store":
                p = os.path.join(work, name)
                shutil.rmtree(p) if os.path.isdir(p) else os.unlink(p)
        with open(os.path.join(work, "data.mdb"), "wb") as f:
            f.write(damaged)
        shutil.rmtree(store)
    else:
        shutil.rmtree(work)
    return {"n": n, "kind": kind, "desc": desc, "runs": t.runs, "failures": t.failures,
            "notes": t.notes, "live": bool(live_hit), "intact": len(intact),
            "secs": time.monotonic() - t0}


def run_trial_safe(n):
    try:
        return run_trial(n)
    except Exception:  # a bug of this harness: report it, go on
        return {"n": n, "kind": G["kinds"][n % len(G["kinds"])], "desc": "?", "runs": 0,
                "notes": [], "live": False, "intact": 0,
                "failures": [{"trial": n, "kind": "harness", "damage": "?", "cmd": "-",
                              "detail": traceback.format_exc()[-1500:]}]}


# ---- setup and the summary -------------------------------------------------------------

def env_int(name, default):
    v = os.environ.get(name)
    return int(v) if v else default


def main():
    if len(sys.argv) == 4 and sys.argv[1] == "--dump":
        with open(sys.argv[3], "wb") as f:
            pickle.dump(read_store(sys.argv[2]), f, protocol=4)
        return 0
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--cli", default=os.environ.get("OSTORE_CLI"), help="the ostore program")
    ap.add_argument("--map", default=os.environ.get("DAMAGE_MAP"), help="damage_map")
    ap.add_argument("--trials", type=int, default=env_int("DAMAGE_TRIALS", None))
    ap.add_argument("--default-trials", type=int, default=300,
                    help="the count when neither --trials nor DAMAGE_TRIALS gives one (meson)")
    ap.add_argument("--seed", default=os.environ.get("DAMAGE_SEED", "11"),
                    help="a number, or 'random'")
    ap.add_argument("--jobs", type=int, default=env_int("DAMAGE_JOBS", 2))
    ap.add_argument("--timeout", type=int, default=env_int("DAMAGE_TIMEOUT", 20),
                    help="seconds per command")
    ap.add_argument("--objects", type=int, default=50000, help="ostore demo --objects")
    ap.add_argument("--trial", type=int, action="append", help="run only this trial (repeatable)")
    ap.add_argument("--kind", action="append", choices=KINDS,
                    help="use only this damage kind (repeatable); trial N gets kind N mod count")
    ap.add_argument("--store", help="use this pristine store instead of making one")
    ap.add_argument("--keep", help="work in this directory and keep it (failed trials' files)")
    ap.add_argument("--keep-failed", default=os.environ.get("DAMAGE_KEEP_FAILED"),
                    help="when a trial fails, keep the pristine store in DIR/pristine")
    ap.add_argument("--details", type=int, default=30, help="failures shown in detail")
    ap.add_argument("-v", "--verbose", action="store_true", help="print every command")
    a = ap.parse_args()
    if not a.cli or not a.map:
        ap.error("--cli and --map (or OSTORE_CLI and DAMAGE_MAP) are needed")
    seed = random.randrange(1 << 32) if a.seed == "random" else int(a.seed)
    trials = a.trial if a.trial else list(range(
        a.trials if a.trials is not None else a.default_trials))
    kinds = a.kind or KINDS
    start = time.monotonic()

    if a.keep:
        os.makedirs(a.keep, exist_ok=True)
        work = a.keep
    else:
        work = tempfile.mkdtemp(prefix="ostore-damage-")
    try:
        if a.store:
            store = a.store
        else:
            store = os.path.join(work, "pristine")
            shutil.rmtree(store, ignore_errors=True)
            p = subprocess.run([a.cli, "demo", store, "--objects", str(a.objects), "--quiet"],
                               stdout=subprocess.PIPE, stderr=subprocess.PIPE, timeout=600)
            if p.returncode != 0:
                print("ostore demo failed (exit %d): %s" % (p.returncode, p.stderr.decode()[-500:]))
                return 1
        p = subprocess.run([a.map, store], stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                           timeout=300)
        if p.returncode != 0:
            print("damage_map failed (exit %d): %s" % (p.returncode, p.stderr.decode()[-500:]))
            return 1
        smap = StoreMap(p.stdout.decode())
        with open(os.path.join(store, "data.mdb"), "rb") as f:
            data = f.read()
        if len(data) != smap.size:
            print("data.mdb changed size under damage_map")
            return 1
        pristine = read_store(store)
        # The pristine store must be whole: the map and python3-lmdb agree,
        # every checksum verifies, and ostore check passes.
        if sorted(pristine["records"]) != smap.oids:
            print("damage_map and python3-lmdb disagree on the records")
            return 1
        for oid, v in pristine["records"].items():
            if not record_ok(struct.pack(">Q", oid), v):
                print("the pristine store's record %d fails its checksum" % oid)
                return 1
            off, ln = smap.recs[oid][:2]
            if data[off:off + ln] != v:
                print("damage_map's range of record %d is not its value" % oid)
                return 1
        for k, v in pristine["entries"].items():
            if not entry_ok(k, v):
                print("a pristine map entry fails its checksum")
                return 1
        p = subprocess.run([a.cli, "check", store], stdout=subprocess.PIPE,
                           stderr=subprocess.PIPE, timeout=120)
        if p.returncode != 0:
            print("ostore check fails on the pristine store: %s" % p.stderr.decode()[-300:])
            return 1
        reach = reachable(pristine)
        map_oids = sorted(o for o, v in pristine["records"].items()
                          if class_of(pristine, v) in MAPS)
        print("damage test: seed %d, %d trials, %d jobs, %d s per command; store %s: %d "
              "records (%d reachable), %d map entries, %d pages of %d bytes (%d branch, %d "
              "leaf); setup %.1f s" % (
                  seed, len(trials), a.jobs, a.timeout, store, len(pristine["records"]),
                  len(reach), len(pristine["entries"]), smap.npages, smap.psize,
                  len(smap.branch), len(smap.leaf), time.monotonic() - start), flush=True)

        tuples = {oid: (struct.unpack_from("<Q", v)[0], class_of(pristine, v), v[16:])
                  for oid, v in pristine["records"].items()}
        global G
        G = {"pristine_tuples": tuples, "cli": os.path.abspath(a.cli), "mapprog": os.path.abspath(a.map), "map": smap, "data": data, "store": store,
             "pristine": pristine, "reachable": reach, "map_oids": map_oids, "seed": seed,
             "timeout": a.timeout, "work": work, "keep": bool(a.keep), "kinds": kinds,
             "verbose": a.verbose}
        for n in trials:
            shutil.rmtree(os.path.join(work, "trial-%d" % n), ignore_errors=True)
        results = []
        if a.jobs > 1 and len(trials) > 1:
            ctx = multiprocessing.get_context("fork")
            with ctx.Pool(a.jobs) as pool:
                for r in pool.imap(run_trial_safe, trials):
                    results.append(r)
                    report_trial(r)
        else:
            for n in trials:
                r = run_trial_safe(n)
                results.append(r)
                report_trial(r)
        rc = summary(results, seed, time.monotonic() - start, a.details)
        if rc and a.keep:
            print("damaged files of failed trials: %s/trial-N/data.mdb; run one again with "
                  "--store %s --seed %d --trial N" % (work, store, seed))
        elif rc and a.keep_failed and not a.store:
            # The damage of trial N follows from the seed and the pristine
            # store, which ostore demo does not make twice the same: keep it.
            dest = os.path.join(a.keep_failed, "pristine")
            shutil.rmtree(dest, ignore_errors=True)
            os.makedirs(a.keep_failed, exist_ok=True)
            shutil.move(store, dest)
            print("the pristine store is kept; run a trial again with --store %s --seed %d "
                  "--trial N [-v] [--keep DIR]" % (dest, seed))
        elif rc:
            print("run a trial again with --store %s --seed %d --trial N, or all of them with "
                  "--keep DIR to keep the files" % (a.store or "DIR", seed))
        return rc
    finally:
        if not a.keep:
            shutil.rmtree(work, ignore_errors=True)


def report_trial(r):
    if r["failures"]:
        kinds = collections.Counter(f["kind"] for f in r["failures"])
        print("trial %d %s: FAIL %s -- %s" % (
            r["n"], r["kind"], ", ".join("%s x%d" % kv for kv in sorted(kinds.items())),
            r["desc"]), flush=True)
    elif r["n"] % 25 == 0 or G["verbose"]:
        print("trial %d %s: ok (%.1f s)" % (r["n"], r["kind"], r.get("secs", 0)), flush=True)


def summary(results, seed, elapsed, details):
    fails = [f for r in results for f in r["failures"]]
    runs = sum(r["runs"] for r in results)
    print()
    print("damage test: seed %d, %d trials, %d command runs, %.1f s" % (
        seed, len(results), runs, elapsed))
    by_kind = collections.Counter(r["kind"] for r in results)
    bad_by_kind = collections.Counter(r["kind"] for r in results if r["failures"])
    print("trials by damage kind (failed/run): " + ", ".join(
        "%s %d/%d" % (k, bad_by_kind[k], by_kind[k]) for k in KINDS if by_kind[k]))
    notes = [(r["n"], x) for r in results for x in r["notes"]]
    if notes:
        print("notes (%d):" % len(notes))
        for n, x in notes[:10]:
            print("  trial %d: %s" % (n, x))
    if not fails:
        print("no failures")
        return 0
    groups = collections.defaultdict(list)
    for f in fails:
        groups[f["kind"]].append(f)
    print("%d failures in %d trials, by kind:" % (len(fails), sum(1 for r in results
                                                                  if r["failures"])))
    for k, fs in sorted(groups.items(), key=lambda kv: -len(kv[1])):
        print("  %-26s %4d  (trials %s)" % (k, len(fs), " ".join(
            str(n) for n in sorted({f["trial"] for f in fs})[:20])))
    print("the first %d in detail (each: trial, damage, command, what happened):" % min(
        details, len(fails)))
    # Round-robin over the kinds, so that one frequent kind does not hide the others.
    queues = [list(fs) for _, fs in sorted(groups.items(), key=lambda kv: -len(kv[1]))]
    shown = 0
    while shown < details and any(queues):
        for q in queues:
            if q and shown < details:
                f = q.pop(0)
                shown += 1
                print("- [%s] trial %d (%s)\n    $ %s\n    %s" % (
                    f["kind"], f["trial"], f["damage"], f["cmd"], f["detail"]))
    return 1


if __name__ == "__main__":
    sys.exit(main())
