#!/usr/bin/python3
"""The ostore command-line tool on stores with persistent ordered maps.

A store made by tests/cli/make_maps.c (through the library: 26 maps and
sets, keys of kinds int, (int, str), (str, bytes, int), bytes and str,
values referencing objects, one object referenced only by a map entry) is
read independently with python3-lmdb and Python's pickle (docs/format.md),
and what each command prints is checked against it:

- info lists the maps with kinds and counts, 20 of them and "... and 6 more";
- cat of a map shows the record, then its entries in key order (the first
  10 by default), with --from (included), --to (included, as the API) or
  --before (excluded), --prefix (keys that start with it, as the API's
  prefix range) and --limit N|all, keys parsed from text for the map's kind
  (prefixes of tuple keys; what cat prints as a key reads back as that key);
- refs follows map values both ways, check reaches through them, pack
  removes maps the root dropped, their entries and what only they held;
- export writes dump version 2 with the entries; import rebuilds the same
  bytes, and the imported store works through the library (make_maps --use);
  the export reader of docs/cli.md reads the entries and prints them as cat
  does; dumps of version 1, and of a format-1 store, import; damaged map
  entries in a dump are refused with one line and nothing written;
- a format-1 store without the mapents database reads;
- bad key text, a bad --limit, --from on an object that is not a map, and
  damaged entries in a store each give one clear line and a nonzero exit.

With OST_TEST_ENGINE=postgresql (meson test cli-maps-pg, under
tests/pg/pgserver.sh) the store and every store made from it are fresh
databases of the private server, read with psql (tests/cli/clilib.py);
format-1 stores and upgrade, LMDB's alone, are skipped there with the
reason printed and counted.

usage: test_cli_maps.py OSTORE_CLI DOCS_CLI_MD MAKE_MAPS
"""
import io
import json
import os
import pickle
import re
import subprocess
import sys
import tempfile

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

import clilib  # noqa: E402
from clilib import (Raw, RefWriter, build_dump, check, copy_store, decode_key,  # noqa: E402
                    doc_reader, fails, left_behind, lmdb_only, make_old_format, new_store, ok,
                    on_pg, parse_dump, part, put_entry, put_state, refs_of, run, state_of, usage)

CLI, DOCS, MAKE_MAPS = sys.argv[1:4] if len(sys.argv) == 4 else (None, None, None)
clilib.setup(CLI, DOCS)


# ---- the store read without ostore (docs/format.md, docs/postgresql.md) -----------------

class Store:
    """Records {oid: (serial, class, pickle, size)}, meta, and the maps:
    {oid: (kind, is_set, count)}, entries {oid: [(key bytes, serial, value)]};
    bad_crc, the records whose checksum does not match (LMDB)."""
    def __init__(self, path):
        raw = Raw(path)
        self.meta, self.recs, self.entries, self.bad_crc = raw.meta, raw.records(), raw.entries, raw.bad_crc
        self.maps = {}
        for oid, (serial, cls, data, size) in self.recs.items():
            if cls in ("ostore.maps.OrderedMap", "ostore.maps.OrderedSet"):
                st = state_of(data)
                self.maps[oid] = (st["kind"], cls.endswith("Set"), st["count"])

    def entry_line(self, m, entry):
        """The line `ostore cat` prints for an entry (indented)."""
        kind, is_set, _ = self.maps[m]
        key = decode_key(kind, entry[0])
        return "  %r" % (key,) if is_set else "  %r: %r" % (key, state_of(entry[2]))

    def keys(self, m):
        return [decode_key(self.maps[m][0], e[0]) for e in self.entries.get(m, [])]


def python_key_text(key):
    """A key as text for --from: Python's repr, as cat prints it."""
    return repr(key)


# ---- the tests ------------------------------------------------------------------------------

def make(tmp):
    db = new_store(tmp, "maps.ostore")
    p = subprocess.run([MAKE_MAPS, db], capture_output=True, text=True)
    check(p.returncode == 0, "make_maps: %r" % p.stderr)
    return db, json.loads(p.stdout), Store(db)


def test_info(db, st):
    out = ok(["info", db])
    total = sum(len(v) for v in st.entries.values())
    check(re.search(r"^format\s+4 \(this ostore reads formats 1 to 4\)$", out, re.M),
          "info: format line:\n%s" % out)
    check(re.search(r"^maps\s+26 \(%s entries in all, [\d.]+ KiB of %s\)$"
                    % (format(total, ","), "table and index" if on_pg() else "pages"),
                    out, re.M), "info: maps line:\n%s" % out)
    lines = out.splitlines()
    i = next(i for i, l in enumerate(lines) if l.startswith("maps "))
    shown = lines[i + 1:]
    check(len(shown) == 21 and shown[-1] == "  ... and 6 more", "info: 20 maps and a last line:\n%s" % out)
    for line, oid in zip(shown, sorted(st.maps)[:20]):
        kind, is_set, count = st.maps[oid]
        want = r"^  %d\s+%s\s+%s\s+%s entr%s$" % (oid, "set" if is_set else "map", re.escape(kind),
                                                 format(count, ","), "y" if count == 1 else "ies")
        check(re.match(want, line), "info: map line %r, want /%s/" % (line, want))
        check(count == len(st.entries.get(oid, [])), "map %d counts %d" % (oid, count))


def cat_lines(db, oid, *opts):
    return ok(["cat", db, str(oid)] + list(opts), "cat of a map").split("\n")


def test_cat(db, ids, st):
    # every map and set in full: the record, then every entry in key order
    for oid in [ids["ints"], ids["pairs"], ids["triples"], ids["tags"], ids["small"][0]]:
        serial, cls, data, size = st.recs[oid]
        ents = st.entries[oid]
        n = len(ents)
        lines = cat_lines(db, oid, "--limit", "all")
        head = ["oid %d: %s, serial %d, %d bytes" % (oid, cls, serial, size), repr(state_of(data)),
                "%s entr%s, in key order:" % (format(n, ","), "y" if n == 1 else "ies")]
        want = head + [st.entry_line(oid, e) for e in ents] + [""]
        check(lines == want, "cat %d --limit all:\n  ostore: %r\n  python: %r" % (oid, lines[:6], want[:6]))
        keys = st.keys(oid)
        check(keys == sorted(keys), "map %d: the keys are not in Python's order" % oid)
    # the first 10 by default, then how many more
    ints = ids["ints"]
    ents = st.entries[ints]
    lines = cat_lines(db, ints)
    check(lines[2] == "1,000 entries; the first 10, in key order:", "cat ints: %r" % lines[2])
    check(lines[3:13] == [st.entry_line(ints, e) for e in ents[:10]], "cat ints: first 10")
    check(lines[13:] == ["... and 990 more (--limit N or --limit all shows more)", ""],
          "cat ints: the last line: %r" % lines[13:])
    check(lines[3] == "  -1500: persistent(%d)" % ids["items"][0], "cat ints: %r" % lines[3])
    lines = cat_lines(db, ints, "--limit", "3")
    check(lines[2] == "1,000 entries; the first 3, in key order:" and len(lines) == 8,
          "cat --limit 3: %r" % lines)
    # ranges: --from included, --to included or --before excluded, counted
    # beyond the limit
    keys = st.keys(ints)
    for lo, hi, limit in ((-3, 30, None), (-3, 30, "5"), (0, None, "all"), (None, -1490, None),
                          (5, 6, None), (1499, None, None), (-10**6, 10**6, "all"), (10, 3, None),
                          (-1500, -1497, None)):
        for end in ("--to", "--before"):
            if hi is None and end == "--before":
                continue
            opts = (["--from", str(lo)] if lo is not None else []) + \
                   ([end, str(hi)] if hi is not None else []) + (["--limit", limit] if limit else [])
            lines = cat_lines(db, ints, *opts)
            inrange = [e for e, k in zip(ents, keys) if (lo is None or k >= lo) and
                       (hi is None or k < hi or (k == hi and end == "--to"))]
            cap = len(inrange) if limit == "all" else int(limit or 10)
            if hi is None:
                cond = "key >= %d" % lo
            else:
                cond = ("%d <= " % lo if lo is not None else "") + "key" + \
                       (" <= %d" if end == "--to" else " < %d") % hi
            want = ["entries with %s, in key order:" % cond]
            want += [st.entry_line(ints, e) for e in inrange[:cap]] or ["  (none)"]
            if len(inrange) > cap:
                want.append("... and %s more in the range (--limit N or --limit all shows more)"
                            % format(len(inrange) - cap, ","))
            check(lines[2:] == want + [""], "cat ints %s:\n  ostore: %r\n  python: %r"
                  % (" ".join(opts), lines[2:6], want[:4]))
    # --prefix: the keys that start with it, as Python says (str and bytes:
    # startswith; tuples: the first elements equal; int: that key)
    def starts(k, p):
        if isinstance(p, (str, bytes)):
            return k.startswith(p)
        if isinstance(p, tuple):
            return k[:len(p)] == p
        return k == p
    prefixes = {ints: [("7", 7), ("-1500", -1500), ("4", 4)],
                ids["pairs"]: [("1,", (1,)), ("(1, 'a')", (1, "a")), ("-1", (-1,)), ("9,", (9,))],
                ids["triples"]: [("k", ("k",)), ("k, b'\\x00'", ("k", b"\0"))],
                ids["tags"]: [("b'a'", b"a"), ("b''", b""), ("b'\\xff'", b"\xff")]}
    strmaps = [o for o in st.maps if st.maps[o][0] == "str" and st.keys(o)]
    if strmaps:
        sk = st.keys(strmaps[0])
        prefixes[strmaps[0]] = [(repr(sk[0][:1]), sk[0][:1]), (repr(sk[-1]), sk[-1]), ("''", "")]
    found = 0
    for oid, cases in prefixes.items():
        for text, pre in cases:
            lines = cat_lines(db, oid, "--prefix", text, "--limit", "all")
            ks = st.keys(oid)
            want = [st.entry_line(oid, st.entries[oid][ks.index(k)]) for k in ks if starts(k, pre)]
            found += len(want) > 0
            check(lines[2].startswith("entries whose key starts with "),
                  "cat %d --prefix %s: %r" % (oid, text, lines[2]))
            check([l for l in lines[3:] if l] == (want or ["  (none)"]),
                  "cat %d --prefix %s:\n  ostore: %r\n  python: %r" % (oid, text, lines[3:7], want[:4]))
    check(found >= 10, "only %d prefixes have entries: the cases test little" % found)
    # tuple keys: a prefix bound, quoted elements, and each printed key read back
    pairs = ids["pairs"]
    pk = st.keys(pairs)
    for opts, want_keys in (
            (["--from", "1,", "--before", "2,"], [k for k in pk if k[0] == 1]),
            (["--from", "(1,)", "--before", "(2,)"], [k for k in pk if k[0] == 1]),
            (["--from", "1", "--before", "2"], [k for k in pk if k[0] == 1]),
            (["--from", "1", "--to", "1"], []),  # (1,) sorts before every (1, x)
            (["--from", "1, a", "--before", "(1, 'b')"], [(1, "a"), (1, "a\0")]),
            (["--from", "(2, 'a,b')"], [(2, "a,b"), (3, "")]),
            (["--from", "-1, \u00e9", "--before", "-1, '\\xe9\\x00'"], [(-1, "\u00e9")]),
            (["--from", "-1, \u00e9", "--to", "-1, '\\xe9\\x00'"], [(-1, "\u00e9")]),
            (["--before", "(-1, '\\u00e9')"], [])):
        lines = cat_lines(db, pairs, *opts, "--limit", "all")
        got = [l for l in lines[3:] if l]
        want = [st.entry_line(pairs, st.entries[pairs][pk.index(k)]) for k in want_keys] or ["  (none)"]
        check(got == want, "cat pairs %s:\n  ostore: %r\n  python: %r" % (" ".join(opts), got, want))
    for oid in (pairs, ids["triples"], ids["tags"], ints):
        for e, k in list(zip(st.entries[oid], st.keys(oid)))[:12]:
            lines = cat_lines(db, oid, "--from", python_key_text(k), "--limit", "1")
            check(lines[3] == st.entry_line(oid, e),
                  "cat %d --from %r: the key does not read back: %r" % (oid, python_key_text(k), lines[3]))
    tk = st.keys(ids["triples"])
    lines = cat_lines(db, ids["triples"], "--from", "k", "--before", "k, b'\\x00\\x00'")
    check([l for l in lines[3:] if l] == [st.entry_line(ids["triples"], st.entries[ids["triples"]][tk.index(k)])
                                          for k in tk if k[0] == "k"], "cat triples prefix: %r" % lines)
    lines = cat_lines(db, ids["tags"], "--from", "b'a'")
    check(lines[3:] == ["  b'a'", "  b'\\xff\\x00'", ""], "cat tags --from b'a': %r" % lines)
    lines = cat_lines(db, ids["tags"], "--from", "a", "--before", "b")
    check(lines[3:] == ["  b'a'", ""], "cat tags bare bytes: %r" % lines)

    # bad input: one line and exit 1 (a key that is not of the map's kind), or usage
    item = ids["items"][0]
    for oid, opts, needle in (
            (ints, ["--from", "abc"], "bad --from 'abc': 'abc' is not an int"),
            (ints, ["--to", "1.5"], "bad --to '1.5'"),
            (ints, ["--from", "99999999999999999999"], "does not fit in 64 bits"),
            (ints, ["--from", ""], "is not an int"),
            (pairs, ["--from", "x"], "element 1 (int): 'x' is not an int"),
            (pairs, ["--from", "1, 'a', 3"], "more than the 2 elements of a (int, str) key"),
            (pairs, ["--to", "1, 'a"], "no closing '"),
            (pairs, ["--before", "x"], "bad --before 'x'"),
            (pairs, ["--prefix", "x"], "bad --prefix 'x'"),
            (ints, ["--prefix", "1, 2"], "bad --prefix"),
            (pairs, ["--from", "(1, 'a'"], "an opening parenthesis without a closing one"),
            (pairs, ["--from", "1, b'a'"], "a bytes literal (b'...') where the key has a str"),
            (pairs, ["--from", "1, '\\q'"], "unknown escape \\q"),
            (pairs, ["--from", "1,,a"], "element 2 is empty"),
            (ids["tags"], ["--from", "'a' b"], "text after the closing quote"),
            (item, ["--from", "1"], "oid %d is a demo.Item, not a map or set" % item),
            (0, ["--limit", "5"], "oid 0 is a persistent.mapping.PersistentMapping, not a map")):
        out, err = fails(["cat", db, str(oid)] + opts, needle, "cat with bad input")
        check(out == "", "cat with bad input printed %r" % out[:200])
        if oid in st.maps:
            check("map %d has keys %s" % (oid, st.maps[oid][0]) in err or
                  "set %d has keys %s" % (oid, st.maps[oid][0]) in err,
                  "the message does not name the map and its kind: %r" % err)
    usage(["cat", db, str(ints), "--limit", "x"], "--limit needs a number of at least 1, or all, not 'x'")
    usage(["cat", db, str(ints), "--limit", "0"], "--limit needs a number")
    usage(["cat", db, str(ints), "--limit", "-3"], "--limit needs a number")
    usage(["cat", db, str(ints), "--limit"], "option --limit needs a value")
    usage(["cat", db, str(ints), "--from"], "option --from needs a value")
    usage(["cat", db, str(ints), "--dis", "--from", "3"], "--dis shows the record's pickle only")
    usage(["cat", db, str(ints), "--dis", "--prefix", "3"], "--dis shows the record's pickle only")
    usage(["cat", db, str(ints), "--to", "3", "--before", "4"],
          "--to KEY (included) and --before KEY (excluded) both end the range: give one")
    for other in ("--from", "--to", "--before"):
        usage(["cat", db, str(ints), "--prefix", "3", other, "4"],
              "--prefix KEY is a range of its own")
    out = ok(["cat", db, str(ints), "--dis"])
    check(out.startswith("oid %d: ostore.maps.OrderedMap" % ints) and "LONG1" in out,
          "cat --dis of a map: %r" % out[:300])
    check(ok(["cat", "--help"]).count("--from KEY") >= 2, "cat --help does not explain --from")


def test_refs_check(db, ids, st):
    lonely, ints, pairs = ids["lonely"], ids["ints"], ids["pairs"]
    out = ok(["refs", db, str(lonely)])
    check(out == "oid %d (demo.Item) references 0 objects:\noid %d is referenced by 1 object:\n"
                 "  %d ostore.maps.OrderedMap (key (1, 'b'))\n" % (lonely, lonely, pairs),
          "refs of an object only a map entry references: %r" % out)
    first = ids["items"][0]
    out = ok(["refs", db, str(first)])
    check(out.endswith("is referenced by 2 objects:\n  0 persistent.mapping.PersistentMapping\n"
                       "  %d ostore.maps.OrderedMap (key -1500)\n" % ints), "refs of an item: %r" % out)
    out = ok(["refs", db, str(ints)]).splitlines()
    want = sorted({r for k, s, v in st.entries[ints] for r in refs_of(v)})
    check(out[0] == "oid %d (ostore.maps.OrderedMap) references %d objects:" % (ints, len(want)) and
          out[1:1 + len(want)] == ["  %d demo.Item" % o for o in want],
          "refs of a map: %r, want %r" % (out, want))
    check(out[1 + len(want):] == ["oid %d is referenced by 1 object:" % ints,
                                  "  0 persistent.mapping.PersistentMapping"], "refs of a map: %r" % out)
    out = ok(["refs", db, str(ids["tags"])])
    check(out.startswith("oid %d (ostore.maps.OrderedSet) references 0 objects:" % ids["tags"]),
          "refs of a set: %r" % out)
    out = ok(["check", db])
    n = format(len(st.recs), ",")
    check("reachable from the root: %s objects; unreachable: 0\n" % n in out,
          "check does not reach through map values: %s" % out)


def test_export_import(tmp, db, ids, st):
    dump = os.path.join(tmp, "maps.dump")
    total = sum(len(v) for v in st.entries.values())
    out = ok(["export", db, dump])
    check(out.startswith("exported %d objects and %s map entries (" % (len(st.recs), format(total, ","))),
          "export: %r" % out)
    data = open(dump, "rb").read()
    version, fmt, counters, classes, records, entries = parse_dump(data)
    check(version == 2 and fmt == 4, "dump version %d, store format %d" % (version, fmt))
    want = [(m, k, s, v) for m in sorted(st.entries) for k, s, v in st.entries[m]]
    check(entries == want, "the dump's entries differ from the store's")
    # the export reader of docs/cli.md: the entries, printed as cat prints them
    ns, src = doc_reader()
    if ns:
        items = list(ns["read_export"](io.BytesIO(data)))
        h = items[0]
        check(h["version"] == 2 and h["entries"] == total and
              h["entry_bytes"] == sum(len(e[1]) + len(e[3]) for e in entries), "doc reader header: %r"
              % {k: v for k, v in h.items() if k != "classes"})
        got = [tuple(e) for e in items[1:] if isinstance(e, ns["Entry"])]
        check(got == want, "doc reader: the entries differ from the store's")
        prog = os.path.join(tmp, "read_export.py")
        open(prog, "w").write(src)
        p = subprocess.run(["/usr/bin/python3", prog, dump], capture_output=True, text=True)
        lines = p.stdout.splitlines()
        check(p.returncode == 0 and len(lines) == 1 + len(st.recs) + total,
              "doc reader program: exit %d, %d lines, %r" % (p.returncode, len(lines), p.stderr[-300:]))
        for oid in (ids["pairs"], ids["triples"], ids["tags"]):
            mine = [l.split(" ", 6)[6] for l in lines if l.startswith("entry of oid %d " % oid)]
            cat = [l[2:] for l in cat_lines(db, oid, "--limit", "all")[3:] if l]
            check(mine == cat, "doc reader prints map %d differently from cat:\n%r\n%r" % (oid, mine, cat))
    # import: the same records and entries, the same dump again, a working store
    copy = new_store(tmp, "maps-copy.ostore")
    out = ok(["import", copy, dump])
    check(out.startswith("imported %d objects and %s map entries into" % (len(st.recs), format(total, ","))),
          "import: %r" % out)
    dump2 = os.path.join(tmp, "maps-copy.dump")
    ok(["export", copy, dump2])
    check(open(dump2, "rb").read() == data, "export of the imported store differs")
    cst = Store(copy)
    check(cst.recs == st.recs and cst.entries == st.entries, "the imported store differs")
    check(cst.meta["format"] == 4, "imported format %r" % cst.meta.get("format"))
    ok(["check", copy])
    p = subprocess.run([MAKE_MAPS, "--use", copy], capture_output=True, text=True)
    check(p.returncode == 0 and p.stdout == "ok\n", "the imported store does not work: %r %r"
          % (p.stdout, p.stderr))
    out = ok(["cat", copy, str(ids["ints"]), "--from", "1000000"])
    check("  1000000: 'new'" in out, "a key committed to the imported store: %r" % out)
    return dump, data


def test_damaged_dumps(tmp, ids, st, data):
    version, fmt, counters, classes, records, entries = parse_dump(data)
    check(build_dump(version, fmt, counters, classes, records, entries) == data,
          "the test's dump writer does not rebuild the dump")
    ints, pairs, tags, lonely = ids["ints"], ids["pairs"], ids["tags"], ids["lonely"]
    at = {m: i for i, (m, k, s, v) in reversed(list(enumerate(entries)))}  # a map's first entry

    def replaced(i, **kw):
        m, k, s, v = entries[i]
        e = list(entries)
        e[i] = (kw.get("m", m), kw.get("k", k), kw.get("s", s), kw.get("v", v))
        return e
    swapped = list(entries)
    i = at[pairs]
    swapped[i], swapped[i + 1] = swapped[i + 1], swapped[i]
    cases = [
        (swapped, fmt, "entries out of order or repeated"),
        (entries[:at[pairs] + 1] + entries[at[pairs]:], fmt, "entries out of order or repeated"),
        (replaced(at[pairs], k=b"\x01" * 600), fmt, "a 600-byte key (the longest is 503 bytes)"),
        (replaced(at[ints], k=b"\x00\x01"), fmt, "a key that does not decode as the map's kind"),
        (replaced(at[pairs], k=b"\x80" + b"\0" * 7 + b"a\x00\x02"), fmt, "does not decode"),
        (replaced(at[tags], v=b"\x80\x02N."), fmt, "an entry of a set with a value"),
        (replaced(at[pairs], v=b""), fmt, "an entry without a value pickle"),
        (replaced(at[ints], s=counters[1] + 1), fmt, "an entry with serial %d" % (counters[1] + 1)),
        (replaced(at[ints], s=0), fmt, "an entry with serial 0"),
        ([(lonely, b"k", 2, b"N.")] + entries, fmt, "entries under oid %d, which has no map record" % lonely),
        (entries[:-1], fmt, "map %d: its record counts 1 entry, the dump has 0" % entries[-1][0]),
        (entries, 1, "map entries in a dump of a format-1 store"),
    ]
    for i, (ents, f, needle) in enumerate(cases):
        path = os.path.join(tmp, "badmap%d.dump" % i)
        open(path, "wb").write(build_dump(2, f, counters, classes, records, ents))
        target = new_store(tmp, "badmap%d.ostore" % i)
        fails(["import", target, path], needle, "import of a dump with bad map entries")
        check(not left_behind(target), "a failed import left %s behind" % target)
    # a map record that does not decode, or holds no kind or count
    for pick_, needle in ((b"\xff\xff", "the map's record does not decode"),
                          (b"\x80\x02}q\x00.", "the map's record has no valid key kind"),
                          (b"\x80\x02K\x01.", "the map's record has no valid key kind"),
                          (pickle.dumps({"kind": "(int, float)", "count": 2}, 2),
                           "the map's record has no valid key kind"),
                          (pickle.dumps({"kind": "int", "count": -1}, 2),
                           "the map's record has no valid count")):
        recs = [(o, s, c, pick_ if o == pairs else p) for o, s, c, p in records]
        path = os.path.join(tmp, "badrec.dump")
        open(path, "wb").write(build_dump(2, fmt, counters, classes, recs, entries))
        target = new_store(tmp, "badrec.ostore")
        fails(["import", target, path], "oid %d: %s" % (pairs, needle), "import of a bad map record")
        check(not left_behind(target), "a failed import left a store")


def test_versions(tmp, ids, st, data):
    """Version-1 dumps (no entries) and format-1 stores."""
    version, fmt, counters, classes, records, entries = parse_dump(data)
    # a version-1 dump of a format-1 store: the root and one item
    root = pickle.dumps({"data": {"title": "old", "item": None}}, 2)
    item_cls = next(c for c, mod, name in classes if mod == b"demo")
    root_cls = next(c for c, mod, name in classes if mod == b"persistent.mapping")
    old_classes = [c for c in classes if c[0] in (root_cls, item_cls)]
    old = build_dump(1, 1, [5, 3, counters[2]], old_classes,
                     [(0, 3, root_cls, root), (4, 2, item_cls, pickle.dumps({"n": 1}, 2))], [])
    path = os.path.join(tmp, "v1.dump")
    open(path, "wb").write(old)
    v1 = new_store(tmp, "v1.ostore")
    out = ok(["import", v1, path])
    check(out.startswith("imported 2 objects into"), "import of a version-1 dump: %r" % out)
    s1 = Store(v1)
    check(s1.meta["format"] == 4 and sorted(s1.recs) == [0, 4] and s1.meta["next_oid"] == 5,
          "the store of a version-1 dump (imported with checksums): %r" % s1.meta)
    if not lmdb_only("format-1 stores and upgrade",
                     "a format-1 store is LMDB's files as ostore 0.1 wrote them; upgrade rewrites them"):
        old_format(tmp, v1, s1, old)
    # a version-1 dump with store format 2 (as this ostore wrote before maps reached export)
    path = os.path.join(tmp, "v1f2.dump")
    open(path, "wb").write(build_dump(1, 2, [5, 3, counters[2]], old_classes,
                                      [(0, 3, root_cls, root)], []))
    v1f2 = new_store(tmp, "v1f2.ostore")
    ok(["import", v1f2, path])
    check(Store(v1f2).meta["format"] == 4, "format of a v1 dump of format 2")
    for v, f, needle in ((3, 2, "export version 3; this ostore reads versions 1 to 2"),
                         (2, 5, "records of store format 5"), (0, 1, "export version 0")):
        path = os.path.join(tmp, "ver.dump")
        open(path, "wb").write(build_dump(v, f, counters, classes, records, entries if v == 2 else []))
        fails(["import", new_store(tmp, "ver.ostore"), path], needle, "import of another version")


def old_format(tmp, v1, s1, old):
    """The store v1 (imported from the version-1 dump old, read as s1) made
    a format-1 store; read, exported and upgraded."""
    # made a format-1 store, as ostore 0.1 wrote it: no checksums, no mapents
    make_old_format(v1, 1)
    check(Store(v1).entries == {} and Store(v1).meta["format"] == 1, "make_old_format")
    out = ok(["info", v1])
    check(re.search(r"^format\s+1 ", out, re.M) and re.search(r"^maps\s+0$", out, re.M),
          "info of a format-1 store: %s" % out)
    # exported again: version 2, store format 1, no entries; the records as they were
    path2 = os.path.join(tmp, "v1-again.dump")
    ok(["export", v1, path2])
    again = parse_dump(open(path2, "rb").read())
    check(again[0] == 2 and again[1] == 1 and again[5] == [] and again[4] == parse_dump(old)[4],
          "export of a format-1 store: version %d, format %d" % again[:2])
    # the commands read a format-1 store without the mapents database
    ok(["info", v1], "info without mapents")
    ok(["cat", v1, "0"], "cat without mapents")
    ok(["refs", v1, "4"], "refs without mapents")
    check("no problems" in ok(["check", v1], "check without mapents"), "check without mapents")
    ok(["export", v1, os.path.join(tmp, "v1-nomapents.dump")], "export without mapents")
    check(open(os.path.join(tmp, "v1-nomapents.dump"), "rb").read() == open(path2, "rb").read(),
          "export without mapents differs")
    # upgrade: format 4, checksums (checked here by Store, independently), the same records
    out = ok(["upgrade", v1])
    check(out.startswith("upgraded %s from format 1 to 4: 2 records and 0 map entries now carry "
                         "checksums" % v1), "upgrade: %r" % out)
    up = Store(v1)
    check(up.meta["format"] == 4 and up.recs == s1.recs and up.bad_crc == [],
          "the upgraded store: format %r, bad checksums %r" % (up.meta["format"], up.bad_crc))
    check("at format 4 already: nothing to do" in ok(["upgrade", v1]), "a second upgrade")
    fails(["upgrade", os.path.join(tmp, "nostore")], "nostore", "upgrade of a missing store")


def test_damaged_store(tmp, db, ids, st):
    """Damaged entries: cat prints what precedes them, then one line; refs,
    export refuse; a map without entries counted does not export."""
    d = copy_store(db, tmp, "damaged-maps.ostore")
    pairs, ints = ids["pairs"], ids["ints"]
    second = st.entries[pairs][1]
    # checksums that match bytes that do not decode (as a writer's bug would leave them)
    put_entry(d, pairs, second[0], second[1], b"\xff\xff")  # a value that does not decode
    put_entry(d, ints, b"\xff", 2, b"N.")  # a 1-byte int key
    rc, out, err = run(["cat", d, str(pairs)])
    check(rc == 1 and out.splitlines()[3] == st.entry_line(pairs, st.entries[pairs][0]) and
          len(out.splitlines()) == 4, "cat of a damaged map: %d %r" % (rc, out))
    check(err.count("\n") == 1 and ("map %d, key %r: the value does not decode" %
                                    (pairs, decode_key("(int, str)", second[0]))) in err,
          "cat of a damaged map: %r" % err)
    fails(["refs", d, str(pairs)], "map %d: an entry's value does not decode" % pairs, "refs damaged map")
    fails(["export", d, os.path.join(tmp, "damaged-maps.dump")], "cannot export", "export damaged map")
    check(not os.path.exists(os.path.join(tmp, "damaged-maps.dump")), "a failed export left a file")
    rc, out, err = run(["cat", d, str(ints), "--before", "-1499"])
    check(rc == 0, "cat of a range before the damage: %d %r" % (rc, err))
    fails(["cat", d, str(ints), "--from", "1499"], "a 1-byte key that does not decode as int",
          "cat of a damaged key")


def test_pack(tmp, db, ids, st):
    """A root that keeps only its first map: pack removes the others, their
    entries, and the object only an entry of them referenced."""
    p = copy_store(db, tmp, "pack-maps.ostore")
    state = state_of(st.recs[0][2])
    state["data"]["maps"] = state["data"]["maps"][:1]
    out = io.BytesIO()
    RefWriter(out, 2).dump(state)
    put_state(p, 0, out.getvalue())
    gone = sorted(st.maps)[1:] + [ids["lonely"]]
    total = sum(len(v) for m, v in st.entries.items() if m != ids["ints"])
    out = ok(["check", p])
    check("unreachable: %d ('ostore pack' removes them)" % len(gone) in out, "check: %s" % out)
    out = ok(["pack", p])
    check(out.startswith("removed %d objects and %s map entries unreachable from the root"
                         % (len(gone), format(total, ","))), "pack: %r" % out)
    after = Store(p)
    check(sorted(set(st.recs) - set(after.recs)) == gone and
          after.entries == {ids["ints"]: st.entries[ids["ints"]]},
          "pack removed %r" % sorted(set(st.recs) - set(after.recs)))
    out = ok(["pack", p])
    check(out.startswith("removed 0 objects unreachable") and "1,000 map entries remain" in out,
          "a second pack: %r" % out)
    check(re.search(r"^maps\s+1 \(1,000 entries in all", ok(["info", p]), re.M), "info after pack")


def main():
    with tempfile.TemporaryDirectory(prefix="ostore-cli-maps-") as tmp:
        db, ids, st = part("make_maps", make, tmp)
        check(len(st.maps) == 26 and len(st.entries[ids["ints"]]) == 1000,
              "make_maps made %d maps" % len(st.maps))
        part("info", test_info, db, st)
        part("cat", test_cat, db, ids, st)
        part("refs and check", test_refs_check, db, ids, st)
        dump, data = part("export and import", test_export_import, tmp, db, ids, st)
        part("damaged dumps", test_damaged_dumps, tmp, ids, st, data)
        part("versions", test_versions, tmp, ids, st, data)
        part("damaged store", test_damaged_store, tmp, db, ids, st)
        part("pack", test_pack, tmp, db, ids, st)


if __name__ == "__main__":
    sys.exit(clilib.entry("cli-maps", 3, __doc__, main))
