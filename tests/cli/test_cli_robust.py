#!/usr/bin/python3
"""The ostore command-line tool against hostile input and a hostile system.

Every failure must be one line on stderr, "ostore: ...", naming the file or
store and the problem, exit status 1, nothing changed on disk; never a
crash, a hang or a huge allocation:

- dumps whose header counters are absurd or disagree with what the dump
  holds (next_oid 2^64-1, next_class past 32 bits, a class id 0), class
  names that are not UTF-8, empty or hold a NUL, dumps of 1 to 71 bytes;
- stores whose meta next_oid is absurd, or whose oids are sparse and huge
  (2^62): check and pack size their work by the records, not by meta;
- export to an output path that cannot be written;
- two demos at once on one directory, and a demo over a directory holding
  more than a demo's store;
- a FIFO, a directory or a device where data.mdb, lock.mdb or the dump
  file should be (under a timeout: a hang is a failure);
- a full filesystem (a 2 MiB tmpfs, when this runs as root and may mount);
- a read-only store read by a user who cannot write its lock file (the
  user nobody, through runuser, when this runs as root);
- paths longer than PATH_MAX, and paths with newlines, escapes and bytes
  that are not UTF-8, in messages.

With OST_TEST_ENGINE=postgresql (meson test cli-robust-pg, under
tests/pg/pgserver.sh) the stores are fresh databases of the private
server (tests/cli/clilib.py): hostile dumps, absurd and sparse oids,
unwritable outputs and dumps that are not regular files run there; what
is about LMDB's files, the file system under them and store paths is
skipped with the reason printed and counted.

usage: test_cli_robust.py OSTORE_CLI DOCS_CLI_MD
"""
import io
import os
import shutil
import struct
import subprocess
import sys
import tempfile

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

import clilib  # noqa: E402
from clilib import (Raw, Ref, RefWriter, build_dump, check, fails, left_behind,  # noqa: E402
                    lmdb_only, new_store, ok, on_pg, parse_dump, part, run, sql, state_of)

CLI, DOCS = sys.argv[1:3] if len(sys.argv) == 3 else (None, None)
clilib.setup(CLI, DOCS)

HANG = 20  # seconds after which a command counts as hung


def skip(what, why):
    print("SKIP: %s: %s" % (what, why), flush=True)


def one_line(err, what):
    return check(err.count("\n") == 1 and err.startswith("ostore: ") and err.endswith("\n"),
                 "%s: stderr is not one 'ostore: ...' line: %r" % (what, err[:600]))


def meta_put(path, name, value):
    if on_pg():  # bigint: 2^64-1 is stored as -1, read back as 2^64-1
        sql(path, "UPDATE ost_meta SET %s = %d" % (name, value - (1 << 64) if value >> 63 else value))
        return
    import lmdb
    env = lmdb.open(path, max_dbs=8, map_size=1 << 30)
    try:
        db = env.open_db(b"meta")
        with env.begin(write=True) as t:
            t.put(name.encode(), struct.pack("<Q", value), db=db)
    finally:
        env.close()


def records_of(path):
    """{oid: record} of the store at path; None when it has no data.mdb.
    On PostgreSQL {oid: (serial, class id, state)}."""
    if on_pg():
        return Raw(path).recs
    if not os.path.exists(os.path.join(path, "data.mdb")):
        return None
    import lmdb
    env = lmdb.open(path, max_dbs=8, readonly=True, lock=False)
    try:
        db = env.open_db(b"records")
        with env.begin() as t:
            return {struct.unpack(">Q", k)[0]: bytes(v) for k, v in t.cursor(db=db)}
    finally:
        env.close()


# ---- dumps ---------------------------------------------------------------------------

def test_hostile_dumps(tmp, data):
    version, fmt, counters, classes, records, entries = parse_dump(data)
    next_oid, last, next_class = counters
    top_oid = max(r[0] for r in records)
    top_serial = max(r[1] for r in records)
    cid = classes[-1][0]  # a class the records use: shop.*

    def dump(counters=counters, classes=classes):
        return build_dump(version, fmt, counters, classes, records, entries)

    def renamed(module=None, name=None):
        return [(i, module if i == cid and module is not None else m,
                 name if i == cid and name is not None else n) for i, m, n in classes]

    cases = [
        (dump([2**64 - 1, last, next_class]), ["next_oid 18446744073709551615"]),
        (dump([2**63 + 1, last, next_class]), ["next_oid 9223372036854775809"]),
        (dump([top_oid, last, next_class]), ["next_oid"]),
        (dump([next_oid, 2**64 - 1, next_class]), ["last_serial 18446744073709551615"]),
        (dump([next_oid, top_serial - 1, next_class]), ["last commit %d" % (top_serial - 1)]),
        (dump([next_oid, last, 2**32 + 1]), ["next_class 4294967297"]),
        (dump([next_oid, last, 2**64 - 1]), ["next_class 18446744073709551615"]),
        (dump(classes=[(0, b"x", b"y")] + classes), ["class id 0"]),
        (dump(classes=renamed(module=b"shop\xff")), ["class id %d" % cid, "UTF-8"]),
        (dump(classes=renamed(name=b"Or\xc3der")), ["class id %d" % cid, "UTF-8"]),
        (dump(classes=renamed(name=b"\xed\xa0\x80")), ["class id %d" % cid, "UTF-8"]),
        (dump(classes=renamed(module=b"")), ["class id %d" % cid, "empty"]),
        (dump(classes=renamed(name=b"a\0b")), ["class id %d" % cid, "NUL"]),
    ]
    for n in (1, 5, 7, 8, 11, 12, 40, 71):
        cases.append((data[:n], ["truncated dump: %d byte%s, the header needs 72"
                                 % (n, "" if n == 1 else "s")]))
    v1 = build_dump(1, fmt, counters, classes, records, [])
    cases.append((v1[:50], ["truncated dump: 50 bytes, the header needs 56"]))

    # issue 30: every count of the format is bounded by the bytes left
    # before anything is allocated by it (a class count of 0xFFFFFFFF was
    # a 16 GiB request), and a cut file is reported where it ends
    def patched(off, fmt_, value, base=data):
        b = bytearray(base)
        struct.pack_into(fmt_, b, off, value)
        return bytes(b)

    cases += [
        (patched(72, "<I", 0xFFFFFFFF), ["the class table counts 4294967295 classes",
                                         "bytes left hold"]),
        (patched(72, "<I", len(classes) + len(data) // 8),
         ["the class table counts %d classes" % (len(classes) + len(data) // 8)]),
        (patched(32, "<Q", 2**40 + 1, patched(16, "<Q", 2**40)),
         ["header counts 1099511627776 records", "the file ends at byte %d" % len(data)]),
        (patched(56, "<Q", 2**40), ["1099511627776 entries", "ends at byte %d" % len(data)]),
        (patched(64, "<Q", 2**45), ["entries of 35184372088832 bytes", "ends at byte"]),
    ]
    # cut inside a field (the class count, a class, a record header, a
    # pickle, the trailer's CRC): the message names the byte where the file
    # really ends, from the file's size, and read from a pipe (no size: the
    # read that meets the end says it)
    cuts = (75, 72 + 4 + 9, len(data) // 2 + 3, len(data) - 1, len(data) - 3)
    for n in cuts:
        cases.append((data[:n], ["the file ends at byte %d" % n]))
    for i, (bad, needles) in enumerate(cases):
        path = os.path.join(tmp, "hostile%d.dump" % i)
        with open(path, "wb") as f:
            f.write(bad)
        target = new_store(tmp, "hostile%d.ostore" % i)
        out, err = fails(["import", target, path], needles[0], "import of hostile dump %d" % i)
        for needle in needles[1:]:
            check(needle in err, "hostile dump %d: stderr lacks %r: %r" % (i, needle, err))
        check(not left_behind(target), "a refused import left %s behind" % target)
    for n in cuts:
        target = new_store(tmp, "cut%d.ostore" % n)
        fails(["import", target, "-"], "the file ends at byte %d, inside" % n,
              "import of a dump cut to %d bytes from a pipe" % n, stdin=data[:n])
        check(not left_behind(target), "a refused import left %s behind" % target)
    # from a pipe the header's counts cannot be checked against a size: a
    # map too large for the address space is refused, and the store stays
    # usable to be removed (it crashed after LMDB had unmapped the old map)
    huge = patched(32, "<Q", 2**40 + 1, patched(16, "<Q", 2**40, patched(64, "<Q", 2**46)))
    target = new_store(tmp, "huge-pipe.ostore")
    fails(["import", target, "-"], "", "import of a dump counting 2^40 records from a pipe",
          stdin=huge)
    check(not left_behind(target), "a refused import left %s behind" % target)
    # the header a real export writes still imports
    good = os.path.join(tmp, "rebuilt.dump")
    with open(good, "wb") as f:
        f.write(dump())
    ok(["import", new_store(tmp, "rebuilt.ostore"), good], "import of a rebuilt dump")


def test_oid_bounds(tmp, dump):
    # meta next_oid 2^64-1: check reports it without a 2^61-byte bitmap,
    # pack keeps every record
    s1 = new_store(tmp, "next-oid.ostore")
    ok(["import", s1, dump])
    before = records_of(s1)
    big = 2**64 - 1
    meta_put(s1, "next_oid", big)
    rc, out, err = run(["check", s1])
    check(rc == 1 and "out of memory" not in err + out, "check with next_oid %d: %d %r %r"
          % (big, rc, out[-300:], err))
    check("problem: meta next_oid %d" % big in out,
          "check does not report next_oid %d:\n%s" % (big, out[-600:]))
    one_line(err, "check with next_oid %d" % big)
    out = ok(["pack", s1], "pack with next_oid %d" % big)
    check(out.startswith("removed 0 objects"), "pack with next_oid %d: %r" % (big, out))
    check(records_of(s1) == before, "pack with next_oid %d changed the records" % big)

    # sparse oids: one record at 2^62 that nothing references, one at
    # 2^62 + 1 that the root references
    s2 = new_store(tmp, "sparse.ostore")
    ok(["import", s2, dump])
    recs = records_of(s2)
    far, held = 2**62, 2**62 + 1
    if on_pg():
        serial, cid, product = next(v for v in recs.values() if b"SKU-" in v[2])
        state = state_of(recs[0][2])
        state["data"]["far"] = Ref(held)
        buf = io.BytesIO()
        RefWriter(buf, 4).dump(state)
        clilib.put_state(s2, 0, buf.getvalue())
        sql(s2, "INSERT INTO ost_records VALUES (%d, %d, %d, '\\x%s'), (%d, %d, %d, '\\x%s'); "
                "UPDATE ost_meta SET next_oid = %d"
            % (far, serial, cid, product.hex(), held, serial, cid, product.hex(), held + 1))
    else:
        sparse_lmdb(s2, recs, far, held)
    out = ok(["check", s2], "check of sparse oids")
    check("unreachable: 1 " in out, "check of sparse oids: %s" % out[-400:])
    out = ok(["pack", s2], "pack of sparse oids")
    check(out.startswith("removed 1 object "), "pack of sparse oids: %r" % out)
    after = records_of(s2)
    check(held in after and far not in after and len(after) == len(recs) + 1,
          "pack of sparse oids kept %r" % sorted(after)[-3:])
    ok(["check", s2], "check after pack of sparse oids")


def sparse_lmdb(s2, recs, far, held):
    """Puts a product's record at oids far and held, the root referencing
    held, next_oid past them (LMDB)."""
    import lmdb
    product = next(v for v in recs.values() if b"SKU-" in v)
    env = lmdb.open(s2, max_dbs=8, map_size=1 << 30)
    db, meta = env.open_db(b"records"), env.open_db(b"meta")
    with env.begin(write=True) as t:
        root = t.get(struct.pack(">Q", 0), db=db)
        state = state_of(root[16:])
        state["data"]["far"] = Ref(held)
        buf = io.BytesIO()
        RefWriter(buf, 4).dump(state)
        k0, kf, kh = struct.pack(">Q", 0), struct.pack(">Q", far), struct.pack(">Q", held)
        t.put(k0, clilib.seal_record(k0, root[:16] + buf.getvalue()), db=db)
        t.put(kf, clilib.seal_record(kf, product), db=db)  # the checksum holds the oid
        t.put(kh, clilib.seal_record(kh, product), db=db)
        t.put(b"next_oid", struct.pack("<Q", held + 1), db=meta)
    env.close()


def test_export_unwritable(tmp, db):
    target = os.path.join(tmp, "no-such-dir", "x.dump")
    out, err = fails(["export", db, target], target + ": cannot write", "export to a missing dir")
    check("crashed" not in err and db not in err, "export blames the store: %r" % err)
    check(not os.path.exists(os.path.dirname(target)), "export made the directory")
    # a directory in the output's place: the temporary file is removed again
    out, err = fails(["export", db, tmp], tmp, "export over a directory")
    check("crashed" not in err, "export over a directory: %r" % err)
    check(not [f for f in os.listdir(os.path.dirname(tmp)) if f.startswith(
        os.path.basename(tmp) + ".tmp")], "export left its temporary file")


# ---- the demo's directory ---------------------------------------------------------------

def test_demo_dir(tmp):
    d = os.path.join(tmp, "demo.ostore")
    ok(["demo", d, "--objects", "1000", "--quiet"], "demo")
    with open(os.path.join(d, "notes.txt"), "w") as f:
        f.write("keep me")
    before = records_of(d)
    fails(["demo", d, "--objects", "1000"], "notes.txt", "demo over a demo store with more in it")
    check(os.path.exists(os.path.join(d, "notes.txt")) and records_of(d) == before,
          "a refused demo changed %s: %r" % (d, os.listdir(d)))
    ok(["check", d], "check after a refused demo")
    os.unlink(os.path.join(d, "notes.txt"))
    # the marker and a lock.mdb without data.mdb (a demo killed in its
    # open): the next demo goes on and makes its store
    os.unlink(os.path.join(d, "data.mdb"))
    ok(["demo", d, "--objects", "1000", "--quiet"], "demo over a marker and a stray lock.mdb")
    ok(["check", d], "check after a demo over a stray lock.mdb")
    # an ostore-demo that is not the demo's marker: not the demo's store
    fake = os.path.join(tmp, "fake.ostore")
    os.mkdir(fake)
    with open(os.path.join(fake, "ostore-demo"), "w") as f:
        f.write("something else\n")
    fails(["demo", fake, "--objects", "1000"], "not a demo store", "demo over a fake marker")
    check(open(os.path.join(fake, "ostore-demo")).read() == "something else\n",
          "demo changed a fake marker")
    # two demos at once on one directory: each ends with success or "in use",
    # and the store checks clean; three rounds (the first makes the directory)
    shutil.rmtree(d)
    for round_ in range(3):
        procs = [subprocess.Popen([CLI, "demo", d, "--objects", "3000", "--quiet"],
                                  stdout=subprocess.PIPE, stderr=subprocess.PIPE)
                 for _ in range(2)]
        results = []
        for p in procs:
            try:
                out, err = p.communicate(timeout=120)
            except subprocess.TimeoutExpired:
                p.kill()
                out, err = p.communicate()
            results.append((p.returncode, err.decode("utf-8", "replace")))
        for rc, err in results:
            check((rc == 0 and err == "") or
                  (rc == 1 and "in use" in err and err.count("\n") == 1),
                  "concurrent demos, round %d: exit %d, %r" % (round_, rc, err[:300]))
        check(any(rc == 0 for rc, _ in results), "concurrent demos, round %d: none succeeded: %r"
              % (round_, results))
        out = ok(["check", d], "check after concurrent demos")
        check("no problems" in out, "check after concurrent demos: %s" % out[-300:])
    check(sorted(os.listdir(d)) == ["data.mdb", "lock.mdb", "ostore-demo"],
          "the demo directory holds %r" % os.listdir(d))


# ---- files that are not regular files -------------------------------------------------------

def test_not_regular(tmp, db, dump):
    """data.mdb and lock.mdb that are not regular files (LMDB)."""
    data_fifo = os.path.join(tmp, "fifo-data.ostore")
    os.mkdir(data_fifo)
    os.mkfifo(os.path.join(data_fifo, "data.mdb"))
    lock_fifo = os.path.join(tmp, "fifo-lock.ostore")
    os.mkdir(lock_fifo)
    shutil.copy(os.path.join(db, "data.mdb"), lock_fifo)
    os.mkfifo(os.path.join(lock_fifo, "lock.mdb"))
    data_dir = os.path.join(tmp, "dir-data.ostore")
    os.makedirs(os.path.join(data_dir, "data.mdb"))
    x = os.path.join(tmp, "x.dump")
    for path, needle in ((data_fifo, "data.mdb is not a regular file (a FIFO)"),
                         (lock_fifo, "lock.mdb is not a regular file (a FIFO)"),
                         (data_dir, "data.mdb is not a regular file (a directory)")):
        name = os.path.basename(path)
        for args in (["info", path], ["ls", path], ["cat", path, "0"], ["refs", path, "0"],
                     ["check", path], ["pack", path], ["export", path, x],
                     ["import", path, dump], ["demo", path, "--objects", "1000"]):
            want = "not a demo store" if args[0] == "demo" else needle
            out, err = fails(args, want, "%s of %s" % (args[0], name), timeout=HANG)
            check(name in err, "%s of %s: the message does not name it: %r" % (args[0], name, err))
    check(not os.path.exists(x), "a failed export left %s" % x)
    # a symbolic link to a regular file is fine
    linked = os.path.join(tmp, "linked.ostore")
    os.mkdir(linked)
    real = os.path.join(tmp, "real-data.mdb")
    shutil.copy(os.path.join(db, "data.mdb"), real)
    os.symlink(real, os.path.join(linked, "data.mdb"))
    ok(["info", linked], "info through a symlinked data.mdb", timeout=HANG)


def test_dump_not_regular(tmp, dump):
    """The dump: a FIFO nobody writes to, a device, a pipe with a writer."""
    fifo = os.path.join(tmp, "dump.fifo")
    os.mkfifo(fifo)
    target = new_store(tmp, "from-fifo.ostore")
    fails(["import", target, fifo], "no process writes to it", "import from an idle FIFO",
          timeout=HANG)
    check(not left_behind(target), "a failed import left %s" % target)
    fails(["import", target, "/dev/null"], "a character device", "import from /dev/null",
          timeout=HANG)
    check(not left_behind(target), "a failed import left %s" % target)
    # a pipe with a writer works: process substitution
    p = subprocess.run(["bash", "-c", 'exec "$0" import "$1" <(cat "$2")', CLI, target, dump],
                       capture_output=True, text=True, timeout=HANG)
    check(p.returncode == 0 and p.stderr == "", "import from a pipe: %d %r" % (p.returncode, p.stderr))


# ---- the system: a full disk, a user who cannot write ----------------------------------------

def test_full_disk(tmp):
    """A demo on a 2 MiB tmpfs, mounted in a mount namespace of its own
    (unshare), so that the mount ends with the command however it ends."""
    if os.geteuid() != 0:
        return skip("full disk", "mounting a small tmpfs needs root")
    mnt = os.path.join(tmp, "small")
    os.mkdir(mnt)
    script = 'mount -t tmpfs -o size=2m tmpfs "$1" || exit 77; shift; exec "$@"'
    prefix = ("unshare", "--mount", "--propagation", "private", "sh", "-c", script, "sh", mnt)
    p = subprocess.run(list(prefix) + ["true"], capture_output=True)
    if p.returncode != 0:
        return skip("full disk", "no tmpfs in a mount namespace: %r" % p.stderr.decode()[:200])
    d = os.path.join(mnt, "demo.ostore")
    out, err = fails(["demo", d, "--objects", "20000", "--quiet"], "no space left on device",
                     "demo on a full disk", prefix=prefix)
    check("failed: Input/output error" not in err, "full disk still reported as EIO: %r" % err)


def test_full_disk_lock(tmp, db, dump):
    """A store without lock.mdb on a full disk: liblmdb made lock.mdb sparse
    and its first write to it faulted (SIGBUS in mdb_env_open); and an
    import into a new directory on a full disk leaves nothing behind."""
    if os.geteuid() != 0:
        return skip("full disk, lock.mdb", "mounting a small tmpfs needs root")
    mnt = os.path.join(tmp, "small2")
    os.mkdir(mnt)
    # mount, put data.mdb alone in a store directory, fill the disk, run
    script = ('mount -t tmpfs -o size=%dk tmpfs "$1" || exit 77; mkdir "$1/st" && '
              'cp "$2" "$1/st/" && dd if=/dev/zero of="$1/fill" bs=4k 2>/dev/null; '
              'mnt=$1; shift 2; "$@"; rc=$?; ls "$mnt/st" "$mnt/new" 2>/dev/null | '
              'sed "s/^/LS: /" >&2; exit $rc')
    size_k = os.path.getsize(os.path.join(db, "data.mdb")) // 1024 + 64
    prefix = ("unshare", "--mount", "--propagation", "private", "sh", "-c", script % size_k,
              "sh", mnt, os.path.join(db, "data.mdb"))
    p = subprocess.run(list(prefix) + ["true"], capture_output=True)
    if p.returncode == 77 or (p.returncode and b"unshare" in p.stderr):
        return skip("full disk, lock.mdb", "no tmpfs in a mount namespace: %r" % p.stderr[:200])
    for args, what in ((["info", os.path.join(mnt, "st")], "info"),
                       (["import", os.path.join(mnt, "new"), dump], "import")):
        rc, out, err = clilib.run(args, prefix=prefix)
        lines = [l for l in err.splitlines() if not l.startswith("LS: ")]
        listed = [l[4:] for l in err.splitlines() if l.startswith("LS: ")]
        check(rc == 1, "%s on a full disk: exit %d, %r" % (what, rc, err[:300]))
        check(len(lines) == 1 and lines[0].startswith("ostore: ") and "space" in lines[0],
              "%s on a full disk: %r" % (what, err[:300]))
        check("crashed" not in err, "%s on a full disk crashed: %r" % (what, err[:300]))
        check("lock.mdb" not in listed and "data.mdb" in listed,
              "%s on a full disk left %r behind" % (what, listed))


def test_read_only(tmp, db):
    ro = os.path.join(tmp, "ro.ostore")
    shutil.copytree(db, ro)
    nolock = os.path.join(tmp, "ro-nolock.ostore")
    shutil.copytree(db, nolock)
    os.unlink(os.path.join(nolock, "lock.mdb"))
    prefix = ()
    if os.geteuid() == 0:  # root ignores permissions: run as nobody
        p = subprocess.run(["runuser", "-u", "nobody", "--", "true"], capture_output=True)
        if p.returncode != 0:
            return skip("read-only store", "runuser -u nobody fails: %r" % p.stderr[:200])
        prefix = ("runuser", "-u", "nobody", "--")
        os.chmod(tmp, 0o755)
    for d in (ro, nolock):
        for f in os.listdir(d):
            os.chmod(os.path.join(d, f), 0o444)
        os.chmod(d, 0o555)
    try:
        for d in (ro, nolock):
            name = os.path.basename(d)
            out = ok(["info", d], "info of %s" % name, prefix=prefix)
            check("objects" in out, "info of %s: %r" % (name, out[:200]))
            ok(["cat", d, "0"], "cat of %s" % name, prefix=prefix)
            ok(["check", d], "check of %s" % name, prefix=prefix)
            ok(["export", d, "-"], "export of %s" % name, prefix=prefix)
            fails(["pack", d], "needs write access", "pack of %s" % name, prefix=prefix)
        check(not os.path.exists(os.path.join(nolock, "lock.mdb")), "a reader made lock.mdb")
    finally:
        for d in (ro, nolock):
            os.chmod(d, 0o755)


# ---- paths in messages ------------------------------------------------------------------------

def test_paths(tmp, db):
    # a store path whose data.mdb path is past PATH_MAX: the cause stays
    deep = os.path.join(tmp, *(["d" * 200] * 19))
    os.makedirs(deep)
    long_store = os.path.join(deep, "s" * (4090 - len(deep) - 1))  # + /data.mdb > PATH_MAX
    for args in (["demo", long_store, "--objects", "1000", "--quiet"],
                 ["import", long_store, os.path.join(tmp, "base.dump")]):
        out, err = fails(args, "File name too long", "%s at a long path" % args[0])
        check("..." in err and len(err) < 700, "%s: the path is not shortened: %d bytes"
              % (args[0], len(err)))
    huge = "/tmp/" + "x/" * 6000 + "store"
    out, err = fails(["info", huge], "File name too long", "info of a 12 kB path")
    check("..." in err and len(err) < 700, "a 12 kB path is not shortened: %d bytes" % len(err))
    # newlines, escapes and bytes that are not UTF-8 are escaped
    odd = os.path.join(tmp, "a\nb\x1b[31mc").encode() + b"\xff"
    out, err = fails(["info", odd], "a\\nb\\x1b[31mc\\xff", "info of a path with controls")
    out, err = fails(["export", db, odd + b"/x.dump"], "a\\nb\\x1b[31mc\\xff/x.dump",
                     "export to a path with controls")
    out, err = fails(["import", odd, odd + b".dump"], "a\\nb\\x1b[31mc\\xff.dump",
                     "import of a path with controls")
    # a message of the library: an LMDB environment that is not a store
    foreign = os.path.join(tmp, "foreign")
    import lmdb
    env = lmdb.open(foreign, max_dbs=8)
    with env.begin(write=True) as t:
        t.put(b"hello", b"world")
    env.close()
    os.rename(foreign, odd)
    fails(["info", odd], "a\\nb\\x1b[31mc\\xff: not an ostore store", "info of a foreign env")
    fails(["demo", odd, "--objects", "1000"], "a\\nb\\x1b[31mc\\xff", "demo over a foreign env")


def main():
    with tempfile.TemporaryDirectory(prefix="ostore-robust-") as tmp:
        db = new_store(tmp, "base.ostore")
        ok(["demo", db, "--objects", "1000", "--quiet"], "demo")
        dump = os.path.join(tmp, "base.dump")
        ok(["export", db, dump])
        data = open(dump, "rb").read()
        part("hostile dumps", test_hostile_dumps, tmp, data)
        part("absurd and sparse oids", test_oid_bounds, tmp, dump)
        part("unwritable export", test_export_unwritable, tmp, db)
        part("dumps that are not regular files", test_dump_not_regular, tmp, dump)
        for name, fn, args, why in (
                ("the demo's directory", test_demo_dir, (tmp,), "a demo directory and its files"),
                ("store files that are not regular", test_not_regular, (tmp, db, dump),
                 "data.mdb and lock.mdb"),
                ("a full disk", test_full_disk, (tmp,), "a store directory on a full tmpfs"),
                ("a full disk without lock.mdb", test_full_disk_lock, (tmp, db, dump),
                 "lock.mdb on a full tmpfs"),
                ("a read-only store", test_read_only, (tmp, db), "file permissions"),
                ("paths in messages", test_paths, (tmp, db), "store paths past PATH_MAX and "
                 "with control bytes")):
            if not lmdb_only(name, why):
                part(name, fn, *args)


if __name__ == "__main__":
    sys.exit(clilib.entry("cli-robust", 2, __doc__, main))
