#!/usr/bin/python3
"""Every repository path that README.md, docs/*.md and the comments of
include/ostore/*.h and store/**/*.h name exists in the tree, so that a
newcomer who follows one finds the file (docs once sent readers to
include/ostore/errors.h and store/pagecheck.c, which do not exist).
Usage: doc_paths_test.py ROOT.

What counts as a path: a token of letters, digits and _ . - / whose first
component is a top-level directory of the source tree (bench/, docs/,
include/, store/, tests/, ...: every directory at ROOT except hidden ones
and build*), that starts a word (not preceded by a letter, digit, '/',
'.', '~' or '-') and ends in a file extension (store/pg/pg.h,
docs/ostore.1) or a slash (store/lmdb/). Trailing sentence punctuation
and a #anchor are dropped. So these are not checked, by design:
 - absolute paths (/tmp/x, /usr/include/lmdb.h) and URLs, whose path
   follows a '/' or a ':';
 - relative paths beginning with ./ or ../, and build outputs such as
   build/tools/ostore (build is no directory of the source tree);
 - templates and globs: a path followed by * < { $ or [
   (tests/test_<suite>.c, include/ostore/*.h), or with a component in
   capitals (store/NAME/: a placeholder);
 - words without an extension or a closing slash (tools/ostore as a
   program name).
Fails naming the file and line of each path that does not exist."""
import glob
import os
import re
import sys

root = sys.argv[1]
top = sorted(d for d in os.listdir(root)
             if os.path.isdir(os.path.join(root, d)) and not d.startswith(".")
             and not d.startswith("build"))
PATH = re.compile(r"(?<![\w/.~:-])((?:%s)/[\w.\-/]*)" % "|".join(map(re.escape, top)))


def texts():
    """(file, line number, text) of what is checked: every line of the
    Markdown pages, the comments of the headers."""
    pages = [root + "/README.md"] + sorted(glob.glob(root + "/docs/*.md"))
    for p in pages:
        for n, line in enumerate(open(p, encoding="utf-8").read().split("\n"), 1):
            yield p, n, line
    headers = sorted(glob.glob(root + "/include/ostore/*.h") +
                     glob.glob(root + "/store/**/*.h", recursive=True))
    for h in headers:
        text = open(h, encoding="utf-8").read()
        for m in re.finditer(r"/\*.*?\*/|//[^\n]*", text, re.S):
            first = text.count("\n", 0, m.start()) + 1
            for k, line in enumerate(m.group(0).split("\n")):
                yield h, first + k, line


def paths(line):
    for m in PATH.finditer(line):
        p = m.group(1)
        nxt = line[m.end():m.end() + 1]
        if nxt and nxt in "*<{$[":
            continue  # a template or a glob
        p = p.rstrip(".,:;")
        if any(re.fullmatch(r"[A-Z][A-Z_]*", c) for c in p.split("/")):
            continue  # a placeholder: store/NAME/
        if p.endswith("/") or re.search(r"\.\w+$", p.rsplit("/", 1)[-1]):
            yield p


bad, seen = [], 0
for f, n, line in texts():
    for p in paths(line):
        seen += 1
        if not os.path.exists(os.path.join(root, p)):
            bad.append("%s:%d: %s does not exist" % (os.path.relpath(f, root), n, p))
print("\n".join(bad))
print("doc-paths: %d paths named, %d missing" % (seen, len(bad)))
sys.exit(1 if bad else 0)
