#!/usr/bin/python3
"""Code the docs quote from programs the suite runs: docs/tutorial.md's
"Common operations, a few lines each" quotes tests/example_tracker.c
(example-tracker), docs/hooks.md's "Resolving conflicts" the resolver of
tests/test_store.c (store, store-pg). Every line of each section's first
code block must be a line of its program, so that the page cannot drift
from code that is checked. Usage: snippets_test.py ROOT."""
import sys

root = sys.argv[1]
quotes = [("docs/tutorial.md", "## Common operations, a few lines each", "tests/example_tracker.c"),
          ("docs/hooks.md", "## Resolving conflicts", "tests/test_store.c")]
bad = 0
for doc, section, src in quotes:
    page = open(root + "/" + doc, encoding="utf-8").read()
    prog = {l.strip() for l in open(root + "/" + src, encoding="utf-8")}
    start = page.index(section)
    block = page[page.index("```c", start) + 4:page.index("```", page.index("```c", start) + 4)]
    lines = [l.strip() for l in block.split("\n") if l.strip()]
    missing = [l for l in lines if l not in prog]
    for l in missing:
        print("%s quotes a line that %s lacks: %s" % (doc, src, l))
    print("%s: %d lines quoted from %s, %d missing" % (doc, len(lines), src, len(missing)))
    bad += len(missing)
sys.exit(1 if bad else 0)
