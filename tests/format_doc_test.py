#!/usr/bin/python3
"""Extracts the store reader program from docs/format.md, runs it on a store
written by tests/make_store, and checks what it prints."""
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
print(out)
lines = out.splitlines()
assert len(lines) == 4, "root and three items expected, got %d lines" % len(lines)
assert lines[0].startswith("oid 0 serial 2 persistent.mapping.PersistentMapping {'data': {'items': [<ref 1>, <ref 2>, <ref 3>], 'title': 'format test'}}"), lines[0]
assert "demo.Item {'n': 0, 'name': 'item0', 'score': 0.0, 'prev': None}" in lines[1], lines[1]
assert "demo.Item {'n': 1, 'name': 'item1', 'score': 1.5, 'prev': <ref 1>}" in lines[2], lines[2]
assert "demo.Item {'n': 2, 'name': 'item2', 'score': 3.0, 'prev': <ref 2>}" in lines[3], lines[3]
print("format-doc-reader: ok")
