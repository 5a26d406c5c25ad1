#!/usr/bin/python3
"""Extracts the store reader program from docs/format.md, runs it on a store
written by tests/make_store (three items, then a map of (int, str) keys and
a set of str), and checks what it prints: the records, each map's entries
after its record in Python's key order, and the same lines as the example
output printed on that page; and that under a python3 without the lmdb
module it says what to install and exits with status 2."""
import ast
import os
import re
import subprocess
import sys
import tempfile

docs, make_store = sys.argv[1], sys.argv[2]
text = open(docs, encoding="utf-8").read()
m = re.search(r"<!-- reader:begin -->\n```python\n(.*?)```\n<!-- reader:end -->", text, re.S)
assert m, "docs/format.md has no reader program between the markers"
with tempfile.TemporaryDirectory() as tmp:
    prog = os.path.join(tmp, "ostore_dump.py")
    open(prog, "w").write(m.group(1))
    store = os.path.join(tmp, "store")
    subprocess.run([make_store, store], check=True)
    out = subprocess.run(["/usr/bin/python3", prog, store], check=True,
                         capture_output=True, text=True).stdout
    # a python3 that cannot import lmdb (here Debian's own with -S, which
    # leaves dist-packages, where python3-lmdb is, off its path, as a
    # virtualenv's or pyenv's python3 has no lmdb): a clear message, not a
    # traceback, and status 2
    nolmdb = subprocess.run(["/usr/bin/python3", "-S", prog, store],
                            capture_output=True, text=True)
    assert nolmdb.returncode == 2, (nolmdb.returncode, nolmdb.stderr)
    assert "Traceback" not in nolmdb.stderr, nolmdb.stderr
    for want in ("cannot import the lmdb module", "apt-get install python3-lmdb",
                 "/usr/bin/python3"):
        assert want in nolmdb.stderr, (want, nolmdb.stderr)
    assert nolmdb.stdout == "", nolmdb.stdout
    # the same program while another process commits to the store: its
    # locked read-only open (lock=True) reads one consistent snapshot
    assert "readonly=True, lock=True" in m.group(1), "the reader must open LMDB with its lock"
    subprocess.run([make_store, store + "-busy"], check=True)
    writer = subprocess.Popen([make_store, store + "-busy", "--churn", "400"],
                              stdout=subprocess.PIPE, text=True)
    assert writer.stdout.readline().strip() == "ready", "the writer did not start"
    busy_runs = 0
    while writer.poll() is None or busy_runs == 0:
        busy = subprocess.run(["/usr/bin/python3", prog, store + "-busy"], check=True,
                              capture_output=True, text=True).stdout.splitlines()
        assert len(busy) == 14 and busy[0].startswith("oid 0 serial "), busy
        busy_runs += 1
    assert writer.wait() == 0, "the writer failed"
    print("read %d times while a writer committed" % busy_runs)
print(out)
lines = out.splitlines()
assert len(lines) == 14, "6 records, 5 map entries and 3 set entries expected, got %d lines" % len(lines)
assert lines[0] == "oid 0 serial 3 persistent.mapping.PersistentMapping {'data': {'items': [<ref 1>, <ref 2>, <ref 3>], 'title': 'format test', 'index': <ref 4>, 'colours': <ref 5>}}", lines[0]
assert "demo.Item {'n': 0, 'name': 'item0', 'score': 0.0, 'prev': None}" in lines[1], lines[1]
assert "demo.Item {'n': 1, 'name': 'item1', 'score': 1.5, 'prev': <ref 1>}" in lines[2], lines[2]
assert "demo.Item {'n': 2, 'name': 'item2', 'score': 3.0, 'prev': <ref 2>}" in lines[3], lines[3]
assert lines[4] == "oid 4 serial 3 ostore.maps.OrderedMap {'kind': '(int, str)', 'count': 5}", lines[4]
assert lines[10] == "oid 5 serial 3 ostore.maps.OrderedSet {'kind': 'str', 'count': 3}", lines[10]
# the entries follow their map, decoded, in Python's order of the keys
map_keys = [ast.literal_eval(l[2:l.index("): ") + 1]) for l in lines[5:10]]
assert map_keys == [(-5, "neg"), (0, "a\0b"), (1, "a"), (1, "b"), (2, "")], map_keys
assert map_keys == sorted(map_keys)
assert lines[8] == "  (1, 'b'): <ref 2> (serial 3)", lines[8]  # a persistent reference
assert lines[6] == "  (0, 'a\\x00b'): b'\\x00\\xff' (serial 3)", lines[6]  # an escaped 0 byte
set_keys = [ast.literal_eval(l[2:l.index(" (serial")]) for l in lines[11:14]]
assert set_keys == ["blue", "green", "red"], set_keys
# the example output printed on the page is this output
shown = re.search(r"What it prints for the store `tests/make_store.c` writes.*?```\n(.*?)```",
                  text, re.S)
assert shown, "docs/format.md has no example output after the reader"
assert shown.group(1).splitlines() == lines, "docs/format.md's example output differs:\n" + shown.group(1)
print("format-doc-reader: ok")
