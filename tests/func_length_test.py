#!/usr/bin/python3
"""No function of the library, the tools or the benchmarks is longer than
200 lines (issue 32): a long function is split into static helpers that
each do one thing. Usage: func_length_test.py ROOT.

What is checked: every function definition in the .c and .h files under
base/, serializer/, hooks/, store/, tools/ and bench/ (tests/ is not checked).
A function's length is its lines from the line of the opening brace of
its body to the line of the closing brace, both counted.

How functions are found: a small scanner, not a C parser. Comments,
string and character literals and preprocessor lines are blanked first
(newlines kept, so line numbers hold); then a '{' met at brace depth 0
opens a function body when the text since the previous top-level ';'
or '}' ends in ')' (after any __attribute__((...)) is dropped) and holds
no '=' (so a struct, union or enum body, or an initializer, is none).
The name is the identifier before that text's first '('. Both branches
of an #if are scanned, so a function whose header differs between them
would unbalance the braces: the test fails then, naming the file.

ALLOWED names the functions that are known to be over the limit and are
to be split later. The test fails for each function over the limit that
is not in ALLOWED, and also for each entry of ALLOWED that is no longer
over the limit (or no longer exists), so the list cannot go stale.
Prints each failure as FILE:LINE: NAME is N lines."""
import os
import re
import sys

LIMIT = 200
DIRS = ["base", "serializer", "hooks", "store", "tools", "bench"]

# (path from ROOT, function name) of each function over the limit that is
# to be split later, each with a comment saying when its entry goes.
ALLOWED = set()


def blank(text):
    """text with comments, string and character literals and preprocessor
    lines (with their continuations) replaced by spaces, newlines kept."""
    out = []
    i, n = 0, len(text)
    line_start = True
    while i < n:
        c = text[i]
        if line_start and c in " \t":
            out.append(c)
            i += 1
            continue
        if line_start and c == "#":
            # A preprocessor line and its backslash continuations.
            while i < n and text[i] != "\n":
                if text[i] == "\\" and i + 1 < n and text[i + 1] == "\n":
                    out.append(" \n")
                    i += 2
                    continue
                if text.startswith("/*", i):
                    j = text.find("*/", i + 2)
                    j = n if j < 0 else j + 2
                    out.append(re.sub(r"[^\n]", " ", text[i:j]))
                    i = j
                    continue
                out.append(" ")
                i += 1
            continue
        line_start = False
        if text.startswith("/*", i):
            j = text.find("*/", i + 2)
            j = n if j < 0 else j + 2
            out.append(re.sub(r"[^\n]", " ", text[i:j]))
            i = j
            continue
        if text.startswith("//", i):
            j = text.find("\n", i)
            j = n if j < 0 else j
            out.append(" " * (j - i))
            i = j
            continue
        if c in "\"'":
            j = i + 1
            while j < n and text[j] != c and text[j] != "\n":
                j += 2 if text[j] == "\\" else 1
            j = min(j + 1, n)
            out.append(re.sub(r"[^\n]", " ", text[i:j]))
            i = j
            continue
        if c == "\n":
            line_start = True
        out.append(c)
        i += 1
    return "".join(out)


ATTR = re.compile(r"__attribute__\s*\(\((?:[^()]|\([^()]*\))*\)\)")
NAME = re.compile(r"([A-Za-z_]\w*)\s*\(")


def functions(text):
    """(name, first line, last line) of each function defined in text,
    lines counted from 1: the lines of the braces of its body."""
    code = blank(text)
    depth = 0
    head_from = 0  # where the text before the next top-level '{' starts
    start = None
    for i, c in enumerate(code):
        if c == "{":
            if depth == 0:
                head = code[head_from:i].strip()
                head = ATTR.sub(" ", head).strip()
                is_func = head.endswith(")") and "=" not in head and NAME.search(head)
                start = (NAME.search(head).group(1), code.count("\n", 0, i) + 1) \
                    if is_func else None
            depth += 1
        elif c == "}":
            depth -= 1
            if depth < 0:
                raise ValueError("unbalanced '}' on line %d" % (code.count("\n", 0, i) + 1))
            if depth == 0:
                if start:
                    yield start[0], start[1], code.count("\n", 0, i) + 1
                start = None
                head_from = i + 1
        elif c == ";" and depth == 0:
            head_from = i + 1
    if depth:
        raise ValueError("%d '{' not closed at the end" % depth)


def sources(root):
    for d in DIRS:
        for dirpath, dirnames, files in os.walk(os.path.join(root, d)):
            dirnames.sort()
            for f in sorted(files):
                if f.endswith((".c", ".h")):
                    yield os.path.join(dirpath, f)


def main():
    root = sys.argv[1]
    failures = []
    long_ones = set()
    count = 0
    for path in sources(root):
        rel = os.path.relpath(path, root)
        with open(path, encoding="utf-8") as f:
            text = f.read()
        try:
            found = list(functions(text))
        except ValueError as e:
            failures.append("%s: cannot scan: %s" % (rel, e))
            continue
        for name, first, last in found:
            count += 1
            length = last - first + 1
            if length <= LIMIT:
                continue
            long_ones.add((rel, name))
            if (rel, name) not in ALLOWED:
                failures.append("%s:%d: %s is %d lines (limit %d): split it"
                                % (rel, first, name, length, LIMIT))
    for rel, name in sorted(ALLOWED - long_ones):
        failures.append("%s: %s is allowlisted but no longer over %d lines "
                        "(or gone): remove it from ALLOWED in %s"
                        % (rel, name, LIMIT, os.path.basename(__file__)))
    if count == 0:
        failures.append("no functions found under %s" % root)
    for line in failures:
        print(line)
    if failures:
        sys.exit(1)
    print("%d functions, none over %d lines (%d allowlisted)" % (count, LIMIT, len(ALLOWED)))


if __name__ == "__main__":
    main()
