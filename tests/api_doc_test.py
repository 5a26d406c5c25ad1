#!/usr/bin/python3
"""docs/api.md is what scripts/gen_api_doc.py makes from the headers, and
every exported function has a comment in its header."""
import glob
import re
import subprocess
import sys
import tempfile

root = sys.argv[1]
undocumented = []
for h in sorted(glob.glob(root + "/include/ostore/*.h")):
    lines = open(h, encoding="utf-8").read().split("\n")
    for i, line in enumerate(lines):
        if not line.startswith("OST_EXTERN"):
            continue
        name = re.search(r"(\w+)\s*\(", " ".join(lines[i:i + 3])).group(1)
        j = i - 1
        while j >= 0 and (lines[j].startswith("OST_EXTERN") or
                          (lines[j].startswith(" ") and not lines[j].strip().startswith("*"))):
            j -= 1
        if not lines[j].strip().endswith("*/"):
            undocumented.append("%s:%d %s" % (h, i + 1, name))
with tempfile.NamedTemporaryFile("r", suffix=".md") as tmp:
    subprocess.run([sys.executable, root + "/scripts/gen_api_doc.py", root, tmp.name], check=True)
    current = open(root + "/docs/api.md", encoding="utf-8").read() == open(tmp.name).read()
if undocumented:
    print("no comment in the header:\n  " + "\n  ".join(undocumented))
if not current:
    print("docs/api.md is stale: run scripts/gen_api_doc.py .")
print("api-doc: %d undocumented, page %s" % (len(undocumented), "current" if current else "stale"))
sys.exit(1 if undocumented or not current else 0)
