#!/usr/bin/python3
"""docs/tutorial.md's "Common operations, a few lines each" quotes
tests/example_tracker.c, which the suite runs (example-tracker): every
line of that section's code block must be a line of the program, so that
the page cannot drift from code that is checked. Usage: snippets_test.py
ROOT."""
import sys

root = sys.argv[1]
page = open(root + "/docs/tutorial.md", encoding="utf-8").read()
prog = {l.strip() for l in open(root + "/tests/example_tracker.c", encoding="utf-8")}
start = page.index("## Common operations, a few lines each")
block = page[page.index("```c", start) + 4:page.index("```", page.index("```c", start) + 4)]
missing = [l for l in block.split("\n") if l.strip() and l.strip() not in prog]
for l in missing:
    print("docs/tutorial.md quotes a line that tests/example_tracker.c lacks: %s" % l.strip())
print("snippets: %d lines quoted, %d missing" % (len([l for l in block.split("\n") if l.strip()]),
                                                 len(missing)))
sys.exit(1 if missing else 0)
