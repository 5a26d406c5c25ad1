#!/usr/bin/python3
"""docs/api.md is what scripts/gen_api_doc.py makes from the headers; every
exported function, public type, struct field and enumerator has a comment
in its header; every type the headers declare is on the page; and no entry
of the page holds text that is not a declaration (a preprocessor
directive, __attribute__, comment delimiters, unbalanced braces or
parentheses: what a regex that ran past a declaration's end would leave,
as one did with OST_EXTERN's #define)."""
import glob
import importlib.util
import os
import re
import subprocess
import sys
import tempfile

root = sys.argv[1]
spec = importlib.util.spec_from_file_location("gen_api_doc", root + "/scripts/gen_api_doc.py")
gen = importlib.util.module_from_spec(spec)
spec.loader.exec_module(gen)

problems = []

# Functions: checked on the raw lines, independently of the generator.
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
            problems.append("no comment in the header: %s:%d %s" % (os.path.relpath(h, root), i + 1, name))

# Types, fields and enumerators: what the generator found without a comment.
page, missing = gen.render(root)
problems += ["no comment in the header: " + m for m in missing]

# Every header is on the page, and every type it declares: as many typedefs
# and anonymous enums (counted in the text without comments and
# directives) as the generator listed.
sections = [h for h, _ in gen.TITLES]
for h in sorted(glob.glob(root + "/include/ostore/*.h")):
    base = os.path.basename(h)
    if base not in sections:
        problems.append("include/ostore/%s is not on the page (gen_api_doc.py TITLES)" % base)
        continue
    text = open(h, encoding="utf-8").read()
    text = re.sub(r"/\*.*?\*/", " ", text, flags=re.S)
    text = re.sub(r"^\s*#(?:[^\n]*\\\n)*[^\n]*", " ", text, flags=re.M)
    want = len(re.findall(r"\btypedef\b", text)) + len(re.findall(r"^\s*enum\s*\{", text, re.M))
    items, _ = gen.parse_header(h)
    got = sum(1 for it in items if "decls" in it for d in it["decls"] if d["kind"] == "type")
    if want != got:
        problems.append("include/ostore/%s declares %d types, the page lists %d" % (base, want, got))

# Entries that are not declarations.
DIRECTIVE = re.compile(r"#\s*(define|undef|if|ifdef|ifndef|elif|else|endif|include|pragma)\b")


def leaks(page, name):
    """The code spans of the page's entries (list items and their further
    signature lines) that hold what no declaration holds."""
    bad = []
    for n, line in enumerate(page.split("\n"), 1):
        if not re.match(r"\s*(- )?`", line):
            continue
        for span in re.findall(r"`([^`]*)`", line):
            why = []
            if DIRECTIVE.search(span):
                why.append("a preprocessor directive")
            if "__attribute__" in span:
                why.append("__attribute__")
            if "/*" in span or "*/" in span:
                why.append("comment delimiters")
            if span.count("{") != span.count("}"):
                why.append("unbalanced braces")
            if span.count("(") != span.count(")"):
                why.append("unbalanced parentheses")
            if why:
                bad.append("%s:%d: not a declaration (%s): %s" % (name, n, ", ".join(why), span[:120]))
    return bad


committed = open(root + "/docs/api.md", encoding="utf-8").read()
problems += leaks(committed, "docs/api.md")
with tempfile.NamedTemporaryFile("r", suffix=".md") as tmp:
    subprocess.run([sys.executable, root + "/scripts/gen_api_doc.py", root, tmp.name], check=True)
    made = open(tmp.name, encoding="utf-8").read()
problems += leaks(made, "(generated)")
current = committed == made
if not current:
    problems.append("docs/api.md is stale: run scripts/gen_api_doc.py .")
print("\n".join(problems))
print("api-doc: %d problems, page %s" % (len(problems), "current" if current else "stale"))
sys.exit(1 if problems else 0)
