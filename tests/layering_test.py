#!/usr/bin/env python3
"""The rooms of store/ and who may reach into which (issue 32; STYLE.md,
"Seams and shared parts"; docs/engines.md, "Layers of store/"). Fails, naming the
file and what it reaches, when:

1. an engine's file (store/<engine>/) includes anything of store/ but
   store/engine.h and the few headers below the engines (LOWER_HEADERS):
   never store_internal.h;
2. an engine's object file refers to a symbol that a file of store/
   outside its folder defines, except those below the engines
   (LOWER_SOURCES): the store reaches an engine through its table, and an
   engine reaches the store through the host table it is handed, never by
   name (read from the linker's view: `nm` of libostore.a);
3. a file of store/ outside an engine's folder, or of serializer/, hooks/,
   base/, tools/, names that engine's API: includes its headers or its
   library's (lmdb.h, libpq-fe.h), or refers to its symbols (mdb_*, PQ*,
   ost__lmdb_*, ost__pg_* ...), except store/engines.c, which lists each
   engine's table entry (ost__<engine>_entry) and nothing else of it;
4. the files of store/ call each other in a cycle (file A refers to a
   symbol of file B and B, directly or through others, to one of A), or
   their headers include each other in a cycle. KNOWN_CYCLES lists the
   call cycles not yet taken apart, each as the sorted list of its files:
   the test fails when one of them is gone (the list is stale) as well as
   when a new one appears;
5. a file of store/ calls a file that docs/engines.md's "Layers of
   store/" lists on its own line or a later one (the layers read bottom
   up: each file calls only files on earlier lines), or is not listed
   there (an engine's folder counts as the line that names any engine's
   folder; an engine's files may call their own folder's).

Usage: layering_test.py SOURCE_ROOT LIBOSTORE_A
"""
import os
import re
import subprocess
import sys

ENGINES = ("lmdb", "pg", "mem")
# What an engine may include of store/ besides its own folder.
LOWER_HEADERS = {"engine.h", "testctl.h", "maprec.h"}
# The files of store/ below the engines: they call nothing above them.
LOWER_SOURCES = {"store/maprec.c", "store/testctl.c"}
# Each engine's own API, by symbol and by header.
ENGINE_SYMBOLS = {
    "lmdb": re.compile(r"^(mdb_|ost__lmdb_|ost__gd_|ost__pc_|ost__ent_|ost__ecur_)"),
    "pg": re.compile(r"^(PQ|pg_|ost__pg_)"),
    "mem": re.compile(r"^$"),  # its names start ost__mem_, as the allocator's do: by definer
}
ENGINE_HEADERS = {"lmdb": ("lmdb.h",), "pg": ("libpq-fe.h",), "mem": ()}
# Call cycles among store/'s files not yet taken apart (issue 32 says which
# remain); a cycle is the sorted list of the files in it.
KNOWN_CYCLES = [
    # the LMDB engine's files call each other (the environment, the guard,
    # the entries, the transactions' retry loop)
    ["store/lmdb/engine.c", "store/lmdb/entries.c", "store/lmdb/env.c", "store/lmdb/guard.c",
     "store/lmdb/import.c", "store/lmdb/salvage.c", "store/lmdb/txn.c", "store/lmdb/verify.c"],
]

INCLUDE = re.compile(r'^\s*#\s*include\s*([<"])([^>"]+)[>"]', re.M)


def sources(root, top):
    out = []
    for d, _, files in os.walk(os.path.join(root, top)):
        for f in files:
            if f.endswith((".c", ".h")):
                out.append(os.path.relpath(os.path.join(d, f), root))
    return sorted(out)


def engine_of(path):
    parts = path.split("/")
    if len(parts) >= 3 and parts[0] == "store" and parts[1] in ENGINES:
        return parts[1]
    return None


def includes(root, path):
    text = open(os.path.join(root, path), encoding="utf-8").read()
    text = re.sub(r"/\*.*?\*/", "", text, flags=re.S)
    out = []
    for kind, name in INCLUDE.findall(text):
        if kind == "<":
            out.append(("sys", name))
        else:
            out.append(("local", os.path.normpath(os.path.join(os.path.dirname(path), name))))
    return out


def nm_members(lib):
    """member -> (defined symbols, undefined symbols)"""
    res = subprocess.run(["nm", "-A", lib], capture_output=True, text=True, check=True)
    out = {}
    for line in res.stdout.splitlines():
        m = re.match(r"^[^:]+:([^:]+):\s*(?:[0-9a-f]+\s+)?([A-Za-z])\s+(\S+)$", line)
        if not m:
            continue
        member, kind, sym = m.groups()
        d, u = out.setdefault(member, (set(), set()))
        if kind == "U":
            u.add(sym)
        elif kind.isupper() or kind in "vw":
            d.add(sym)
    return out


def cycles(graph):
    """The strongly connected components of more than one node (Tarjan)."""
    index, low, stack, on, comps, n = {}, {}, [], set(), [], [0]

    def visit(v):
        index[v] = low[v] = n[0]
        n[0] += 1
        stack.append(v)
        on.add(v)
        for w in graph.get(v, ()):
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            comp = []
            while True:
                w = stack.pop()
                on.discard(w)
                comp.append(w)
                if w == v:
                    break
            if len(comp) > 1:
                comps.append(sorted(comp))

    sys.setrecursionlimit(10000)
    for v in sorted(graph):
        if v not in index:
            visit(v)
    return comps

def layers(root):
    """The layers of store/ as docs/engines.md lists them ("Layers of
    store/"), bottom first: path -> rank (a folder's path ends in '/'),
    and the rank of the engines' line (the one naming an engine's folder)."""
    text = open(os.path.join(root, "docs", "engines.md"), encoding="utf-8").read()
    m = re.search(r"^## Layers of store/\n(.*?)(?=^## |\Z)", text, re.M | re.S)
    rank, engines_rank = {}, None
    if not m:
        return rank, engines_rank
    for n, line in enumerate(re.findall(r"^\d+\.\s+(.*)$", m.group(1), re.M)):
        for p in re.findall(r"`(store/[\w./-]+)`", line):
            rank.setdefault(p, n)
            if p.endswith("/") and engine_of(p + "x.c"):
                engines_rank = n
    return rank, engines_rank


def rank_of(f, rank, engines_rank):
    if engine_of(f):
        return engines_rank
    return rank.get(f)


def main():
    root, lib = sys.argv[1], sys.argv[2]
    bad = []
    store_files = sources(root, "store")
    outside = [f for f in store_files if not engine_of(f)]
    outside += sources(root, "serializer") + sources(root, "hooks") + sources(root, "tools")
    if os.path.isdir(os.path.join(root, "base")):
        outside += sources(root, "base")

    # 1. what engines include
    for f in store_files:
        eng = engine_of(f)
        if not eng:
            continue
        for kind, inc in includes(root, f):
            if kind != "local" or not inc.startswith("store/"):
                continue
            if engine_of(inc) == eng:
                continue
            if os.path.dirname(inc) == "store" and os.path.basename(inc) in LOWER_HEADERS:
                continue
            bad.append(f"{f}: an engine's file includes {inc} (engines see store/engine.h only)")

    # 3a. who includes an engine's headers
    for f in outside:
        for kind, inc in includes(root, f):
            for eng in ENGINES:
                if kind == "sys" and inc in ENGINE_HEADERS[eng]:
                    bad.append(f"{f}: includes <{inc}>, the {eng} engine's library")
                if kind == "local" and engine_of(inc) == eng:
                    bad.append(f"{f}: includes {inc}, the {eng} engine's own header")

    # the objects, by source file
    members = nm_members(lib)
    by_member = {}
    for f in sources(root, "store") + sources(root, "serializer") + sources(root, "hooks") + (
        sources(root, "base") if os.path.isdir(os.path.join(root, "base")) else []
    ):
        if f.endswith(".c"):
            by_member[f.replace("/", "_") + ".o"] = f
    objs = {by_member[m]: v for m, v in members.items() if m in by_member}
    missing = [f for f in store_files if f.endswith(".c") and f not in objs and
               engine_of(f) != "pg" and engine_of(f) != "mem"]
    if missing:
        bad.append(f"not in {lib}: {', '.join(missing)} (built without them?)")
    definer = {}
    for f, (d, _) in objs.items():
        for s in d:
            definer.setdefault(s, f)

    # 2. engines' references into store/
    for f, (_, u) in sorted(objs.items()):
        eng = engine_of(f)
        if not eng:
            continue
        for s in sorted(u):
            g = definer.get(s)
            if g and g.startswith("store/") and engine_of(g) != eng and g not in LOWER_SOURCES:
                bad.append(f"{f}: refers to {s} of {g} (an engine reaches the store through its host table)")

    # 3b. who refers to an engine's symbols
    for f, (_, u) in sorted(objs.items()):
        if engine_of(f):
            continue
        for s in sorted(u):
            for eng, pat in ENGINE_SYMBOLS.items():
                if f == "store/engines.c" and s == f"ost__{eng}_entry":
                    continue
                g = definer.get(s)
                if pat.match(s) or (g and engine_of(g) == eng and s != f"ost__{eng}_entry"):
                    bad.append(f"{f}: refers to {s}, the {eng} engine's")
                    break

    # 4. cycles
    calls = {}
    for f, (_, u) in objs.items():
        if not f.startswith("store/"):
            continue
        for s in u:
            g = definer.get(s)
            if g and g != f and g.startswith("store/"):
                calls.setdefault(f, set()).add(g)
    found = cycles(calls)
    for c in found:
        if c not in KNOWN_CYCLES:
            bad.append("a call cycle among: " + ", ".join(c))
    for c in KNOWN_CYCLES:
        if c not in found:
            bad.append("KNOWN_CYCLES is stale: no longer a cycle: " + ", ".join(c))
    # 5. the layers: each file calls only files on earlier lines of
    # docs/engines.md's list (a file of an engine's folder may call its
    # own folder's; their cycle is KNOWN_CYCLES' business)
    rank, engines_rank = layers(root)
    for f in sorted(objs):
        if f.startswith("store/") and rank_of(f, rank, engines_rank) is None:
            bad.append(f"{f}: not in docs/engines.md's \"Layers of store/\"")
    for f, gs in sorted(calls.items()):
        rf = rank_of(f, rank, engines_rank)
        for g in sorted(gs):
            rg = rank_of(g, rank, engines_rank)
            if rf is None or rg is None or (engine_of(f) and engine_of(f) == engine_of(g)):
                continue
            if rg >= rf:
                bad.append(f"{f} calls {g}, which docs/engines.md's \"Layers of store/\" "
                           f"puts {'on the same line' if rg == rf else 'above it (a later line)'}")
    incs = {}
    for f in store_files:
        for kind, inc in includes(root, f):
            if kind == "local" and inc.startswith("store/") and inc.endswith(".h"):
                incs.setdefault(f, set()).add(inc)
    for c in cycles(incs):
        bad.append("an include cycle among: " + ", ".join(c))

    for b in bad:
        print(b)
    ncalls = sum(len(v) for v in calls.values())
    print(f"{len(objs)} objects, {ncalls} file-to-file references in store/, "
          f"{len(found)} call cycles ({len(KNOWN_CYCLES)} known): "
          f"{'FAIL' if bad else 'ok'}")
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
