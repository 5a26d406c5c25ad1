#!/usr/bin/python3
"""Writes docs/api.md from the comments of include/ostore/*.h (the headers are
the authority). Usage: gen_api_doc.py ROOT [OUT]; tests/api_doc_test.py
checks that the committed page is what this makes."""
import re
import sys

root = sys.argv[1]
out_path = sys.argv[2] if len(sys.argv) > 2 else root + "/docs/api.md"
out = ["# API reference", "",
       "One header, `#include <ostore.h>`, and one library, `pkg-config --libs ostore`.",
       "The headers are the authority: every declaration there carries a comment",
       "saying what it does, who owns what and what it returns; this page gathers",
       "them by layer (`scripts/gen_api_doc.py` writes it, a test checks it is current).",
       "", "## Rules that hold everywhere", "",
       "- **Errors.** A function that can fail returns 0 or a negative `OST_E*` code;",
       "  `ost_strerror(code)` and `ost_err_name(code)` describe it, and the handle",
       "  involved keeps a message with the details (`ost_writer_errmsg`,",
       "  `ost_reader_errmsg` with `ost_reader_erroffset`, `ost_store_errmsg`",
       "  (per thread), `ost_conn_errmsg`, `ost_loader_errmsg`; value calls such as",
       "  `ost_instance_getattr_ex` leave theirs in `ost_value_errmsg`, per thread).",
       "- **Ownership of values.** Constructors return a new reference. Functions that",
       "  put a value into a container *steal* the reference they are given, even when",
       "  they fail. Getters return borrowed references. Release with `ost_decref`, or",
       "  `ost_release` when a graph may hold cycles.",
       "- **Handles** (`ost_writer`, `ost_reader`, `ost_registry`, `ost_store`,",
       "  `ost_conn`, `ost_loader`, `ost_txn_hooks`) are made and freed by their own",
       "  functions; free functions accept NULL. A writer, reader, connection or",
       "  loader belongs to one thread at a time; a store is shared by threads.",
       "  The lifetime rules, as a numbered list, are in docs/tutorial.md",
       "  (\"Lifetimes\"): a connection's handle stays valid after its store",
       "  closes, until `ost_conn_close`.",
       "", "## Error codes", "", "| code | value | meaning |", "| --- | --- | --- |"]
common = open(root + "/include/ostore/common.h", encoding="utf-8").read()
for m in re.finditer(r'X\((\w+), (-\d+), "([^"]+)"\)', common):
    out.append("| `OST_%s` | %s | %s |" % m.groups())
out.append("")
titles = [("common.h", "Version and errors"), ("value.h", "Values"),
          ("pickle.h", "Pickling"), ("hooks.h", "Hooks"), ("store.h", "Store"),
          ("maps.h", "Ordered maps")]
decl = re.compile(r"((?:/\*(?:[^*]|\*(?!/))*\*/\s*)?)OST_EXTERN\s+([^;]+);", re.S)
for h, title in titles:
    text = open(root + "/include/ostore/" + h, encoding="utf-8").read()
    out += ["## %s (`include/ostore/%s`)" % (title, h), ""]
    for m in decl.finditer(text):
        comment = re.sub(r"^/\*\s?|\s?\*/$", "", m.group(1).strip())
        comment = " ".join(l.strip().lstrip("*").strip() for l in comment.splitlines()).strip()
        sig = " ".join(m.group(2).split())
        out.append("- `%s;`%s" % (sig, ("  \n  " + comment) if comment else ""))
    out.append("")
open(out_path, "w", encoding="utf-8").write("\n".join(out))
