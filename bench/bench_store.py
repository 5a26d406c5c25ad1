#!/usr/bin/python3
"""The store benchmark: bulk loader, small events, group commit, reads, memory.

Runs bench/bench_store (the C side, one command per measurement, each in a
fresh store under /tmp that is deleted afterwards), measures CPython's
memory for the same objects, and prints one report with ratios and whether
each target is met:

  (a) N new small instances through the bulk loader (durable batches of
      the default size) against raw LMDB MDB_APPEND puts of the same record
      bytes, same batch size, durable commits: objects/s per million;
  (b) small events [i, "ev<i>", i * 0.5], one commit each against batched
      through the loader: time and bytes per event;
  (c) 1, 4, 16 and 64 threads doing one-object durable transactions, with
      and without group commit: commits/s. The two sides alternate in
      rounds (with, without, without, with, ...), so that both meet the
      same disk: this machine's sync time moves from one minute to the
      next, and the ratio is set mostly by it;
  (d) random reads by oid (get and decode) against raw LMDB gets of the
      same keys, and the memory of a connection's cache for N active small
      objects against CPython's for the same objects.

    /usr/bin/python3 bench/bench_store.py --build build-release [--quick]

The build directory must be configured with --buildtype=release.
"""

import argparse
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
from benchlib import (Runner, buildtype, loadavg, machine_line, num,  # noqa: E402 (bench/ on sys.path)
                      progress, ratio, table)

# ---- formatting -------------------------------------------------------------------


# ---- running the C side -----------------------------------------------------------


# ---- CPython's memory for the same objects ----------------------------------------

PY_MEMORY = r"""
import gc, json, sys, tracemalloc

class Item:
    pass

class SlotItem:
    __slots__ = ("n", "name", "x", "ref")

def build(cls, n):
    out, prev = [], None
    for i in range(n):
        o = cls.__new__(cls)
        o.n = i
        o.name = "item%d" % i
        o.x = i * 0.5
        o.ref = prev
        out.append(o)
        prev = o
    return out

def rss_anon():
    with open("/proc/self/status") as f:
        for line in f:
            if line.startswith("RssAnon:"):
                return int(line.split()[1]) * 1024
    return 0

n, name, mode = int(sys.argv[1]), sys.argv[2], sys.argv[3]
cls = {"Item": Item, "SlotItem": SlotItem}[name]
gc.collect()
if mode == "traced":
    tracemalloc.start()
    objs = build(cls, n)
    cur, _ = tracemalloc.get_traced_memory()
    tracemalloc.stop()
    res = cur - sys.getsizeof(objs)  # the list holding them is not theirs
else:  # RSS, without tracemalloc's own bookkeeping
    r0 = rss_anon()
    objs = build(cls, n)
    res = rss_anon() - r0 - sys.getsizeof(objs)
print(json.dumps(res))
"""


def python_memory(n):
    """Each figure in a process of its own: tracemalloc's bookkeeping would
    count in the RSS, and memory freed by one run would serve the next."""
    res = {}
    for name in ("Item", "SlotItem"):
        res[name] = {}
        for mode in ("traced", "rss"):
            progress("CPython: %d %s objects, %s" % (n, name, mode))
            p = subprocess.run(["/usr/bin/python3", "-c", PY_MEMORY, str(n), name, mode],
                               stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
            if p.returncode != 0:
                sys.exit("bench_store.py: the CPython memory measure failed:\n" + p.stderr)
            res[name][mode] = json.loads(p.stdout)
    return res


def merge_rounds(runs):
    """One figure per side of (c) from its rounds: commits and seconds summed,
    the committer's time per group averaged over all groups; each side keeps
    the ratio of every round (with / without, the runs next to each other)."""
    out = []
    for gc in (True, False):
        mine = [g for g in runs if g["group_commit"] == gc]
        m = dict(mine[0])
        m["commits"] = sum(g["commits"] for g in mine)
        m["seconds"] = sum(g["seconds"] for g in mine)
        m["groups"] = sum(g["groups"] for g in mine)
        if m["groups"]:
            m["group_us"] = {k: sum(g["group_us"][k] * g["groups"] for g in mine) / m["groups"]
                             for k in mine[0]["group_us"]}
        m["rounds"] = len(mine)
        out.append(m)
    on = [g for g in runs if g["group_commit"]]
    off = [g for g in runs if not g["group_commit"]]
    out[0]["round_ratios"] = [(a["commits"] / a["seconds"]) / max(1e-9, b["commits"] / b["seconds"])
                              for a, b in zip(on, off)]
    return out


# ---- the report ---------------------------------------------------------------------


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--build", default="build-release",
                    help="meson build directory holding bench/bench_store (default: build-release)")
    ap.add_argument("--objects", type=int, default=None,
                    help="objects for (a) (default 10,000,000; 1,000,000 with --quick)")
    ap.add_argument("--events", type=int, default=None,
                    help="events for (b) (default 45,000; 3,000 with --quick)")
    ap.add_argument("--seconds", type=float, default=None,
                    help="seconds per group-commit run (default 3; 1 with --quick)")
    ap.add_argument("--threads", default="1,4,16,64", help="thread counts for (c)")
    ap.add_argument("--rounds", type=int, default=4,
                    help="rounds (c) splits each side's seconds into, alternating (default 4)")
    ap.add_argument("--reads", type=int, default=None,
                    help="objects in the store and random reads for (d) (default 1,000,000; "
                         "200,000 with --quick)")
    ap.add_argument("--only", default="abcd", help="which parts to run (default abcd)")
    ap.add_argument("--quick", action="store_true", help="smaller sizes, for a smoke run")
    ap.add_argument("--json", metavar="FILE", help="also write every raw figure to FILE")
    args = ap.parse_args()
    q = args.quick
    n_obj = args.objects or (1_000_000 if q else 10_000_000)
    n_ev = args.events or (3_000 if q else 45_000)
    secs = args.seconds or (1.0 if q else 3.0)
    n_rd = args.reads or (200_000 if q else 1_000_000)
    threads = [int(t) for t in args.threads.split(",") if t]

    exe = os.path.join(args.build, "bench", "bench_store")
    if not os.access(exe, os.X_OK):
        sys.exit("bench_store.py: %s not found: build it with `ninja -C %s`" % (exe, args.build))
    bt = buildtype(args.build)
    tmp = tempfile.mkdtemp(prefix="ostore-bench-store-", dir="/tmp")
    r = Runner(exe, tmp, "bench_store.py")
    raw = {"machine": machine_line(), "buildtype": bt, "load_before": loadavg()}
    t_start = time.time()
    try:
        if "a" in args.only:
            raw["load"] = r.run("load", n_obj)
        if "b" in args.only:
            raw["events"] = r.run("events", n_ev)
        if "c" in args.only:
            raw["group"] = []
            for t in threads:
                runs = []
                for k in range(args.rounds):
                    for gc in ((1, 0) if k % 2 == 0 else (0, 1)):
                        runs.append(r.run("group", t, secs / args.rounds, gc))
                raw["group"] += merge_rounds(runs)
        if "d" in args.only:
            raw["reads"] = r.run("reads", n_rd, n_rd)
            raw["python_memory"] = python_memory(n_rd)
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    raw["load_after"] = loadavg()
    raw["seconds"] = time.time() - t_start
    if args.json:
        with open(args.json, "w") as f:
            json.dump(raw, f, indent=1)
    report(raw, args)


def report(raw, args):
    print("ostore store benchmark — %s" % raw["machine"])
    print("build type: %s%s; load average before %s, after %s; %.0f s" % (
        raw["buildtype"] or "?",
        "" if raw["buildtype"] == "release" else " (NOT release: figures are meaningless)",
        raw["load_before"], raw["load_after"], raw["seconds"]))
    print()
    targets = []

    def target(ok, what):
        targets.append(("PASS" if ok else "MISS", what))

    a = raw.get("load")
    if a:
        rows = []
        for i, (o, w) in enumerate(zip(a["per_million"], a["raw_per_million"])):
            rows.append(["%d" % (i + 1), num(o), num(w), ratio(o / w)])
        rate = a["objects"] / a["seconds"]
        raw_rate = a["objects"] / a["raw_seconds"]
        rows.append(["all", num(rate), num(raw_rate), ratio(rate / raw_rate)])
        table("(a) %s new small instances (int, short str, float, ref to the previous one): "
              "bulk loader, batches of %s, durable commits; raw LMDB: MDB_APPEND puts of the "
              "same %s record bytes, same batches, durable commits (objects/s per million)"
              % (num(a["objects"]), num(a["batch"]), num(a["record_bytes"])),
              ["million", "ostore loader", "raw LMDB", "ostore/raw"], rows, "<>>>")
        print("    caller thread CPU: %.2f s of %.2f s; bytes written to disk: ostore %s, raw %s"
              % (a["caller_cpu"], a["seconds"], num(a["io_bytes"]), num(a["raw_io_bytes"])))
        dp = a.get("durable_per_million") or []
        if dp:
            # the marks above are taken when a million is added: the first
            # million's last batches are still being written then, and the
            # last million waits for the final commits
            print("    durable per million (when each million was committed): %s; last/first %.0f%%"
                  % (", ".join(num(x) for x in dp), 100 * dp[-1] / dp[0]))
            cm = a.get("committer_ms_per_million") or []
            print("    committer ms per million (apply + commit): %s"
                  % ", ".join("%.0f+%.0f" % (x, y) for x, y in cm))
            print("    caller thread CPU ms per million: %s"
                  % ", ".join("%.0f" % x for x in a.get("caller_cpu_ms_per_million", [])))
        print()
        pm = a["per_million"]
        target(rate >= 2_000_000, "(a) loader >= 2,000,000 objects/s overall: %s" % num(rate))
        if len(pm) > 1:
            target(pm[-1] >= 0.9 * pm[0], "(a) last million >= 90%% of the first: %s vs %s (%.0f%%)"
                   % (num(pm[-1]), num(pm[0]), 100 * pm[-1] / pm[0]))
        target(rate >= 0.5 * raw_rate, "(a) loader >= half the raw LMDB rate: %s vs %s (%.0f%%)"
               % (num(rate), num(raw_rate), 100 * rate / raw_rate))

    b = raw.get("events")
    if b:
        n = b["events"]
        rows = []
        names = [("each", "one commit each (durable)"), ("each_nosync", "one commit each (no sync)"),
                 ("loader", "bulk loader, one batch")]
        for key, label in names:
            e = b[key]
            rows.append([label, "%.3f" % e["seconds"], num(n / e["seconds"]),
                         "%.2f" % (e["seconds"] / n * 1e6), num(e["record_bytes"] / n),
                         num(e["file_bytes"] / n), num(e["io_bytes"] / n)])
        table("(b) %s events [i, \"ev<i>\", i * 0.5], persistent objects in chunks of %d "
              "(the same records either way)" % (num(n), b["chunk"]),
              ["how", "seconds", "events/s", "us/event", "record B/event", "file B/event",
               "disk writes B/event"], rows, "<>>>>>>")
        print("    loader vs one durable commit each: %s faster, %s fewer bytes written to disk"
              % (ratio(b["each"]["seconds"] / b["loader"]["seconds"]),
                 ratio(b["each"]["io_bytes"] / max(1, b["loader"]["io_bytes"]))))
        print()

    c = raw.get("group")
    if c:
        by = {}
        for g in c:
            by[(g["threads"], g["group_commit"])] = g
        rows = []
        for t in sorted({g["threads"] for g in c}):
            on, off = by.get((t, True)), by.get((t, False))
            r_on = on["commits"] / on["seconds"]
            r_off = off["commits"] / off["seconds"]
            gu = on.get("group_us", {})
            rows.append(["%d" % t, num(r_on), num(on["commits"] / max(1, on["groups"])),
                         "%.0f/%.0f/%.0f/%.0f" % (gu.get("idle", 0), gu.get("gather", 0),
                                                  gu.get("apply", 0), gu.get("commit", 0)),
                         num(r_off), ratio(r_on / r_off),
                         " ".join(ratio(x) for x in on.get("round_ratios", []))])
            if t == 16:
                target(r_on >= 10 * r_off, "(c) group commit at 16 threads >= 10x: %s"
                       % ratio(r_on / r_off))
            if t == 64:
                target(r_on >= 15 * r_off, "(c) group commit at 64 threads >= 15x: %s"
                       % ratio(r_on / r_off))
        table("(c) one-object durable transactions, a connection per thread, %.0f s a side in "
              "%d alternating rounds (commits/s)" % (c[0]["seconds"], c[0].get("rounds", 1)),
              ["threads", "group commit", "commits/group",
               "us/group idle/gather/apply/commit", "one fsync each", "ratio", "each round"],
              rows, "<>>>>><")

    d = raw.get("reads")
    if d:
        rate = d["reads"] / d["seconds"]
        raw_rate = d["reads"] / d["raw_seconds"]
        table("(d) %s random reads by oid from a warm store of %s small objects (cache of 1,000 "
              "objects, a transaction every 1,000 reads; %s of the reads decoded a record)"
              % (num(d["reads"]), num(d["objects"]), num(d["decoded"])),
              ["reader", "reads/s", "vs raw"],
              [["ostore: ost_conn_get + ost_activate", num(rate), ratio(rate / raw_rate)],
               ["raw LMDB: mdb_get of the same keys", num(raw_rate), "1.00x"]], "<>>")
        target(rate >= 0.6 * raw_rate, "(d) reads >= 60%% of the raw LMDB rate: %s vs %s (%.0f%%)"
               % (num(rate), num(raw_rate), 100 * rate / raw_rate))
        pm = raw["python_memory"]
        n = d["objects"]
        o_heap = d["heap_bytes"] / n
        o_rss = d["rss_bytes"] / n
        py_d = pm["Item"]["traced"] / n
        py_s = pm["SlotItem"]["traced"] / n
        py_dr = pm["Item"]["rss"] / n
        py_sr = pm["SlotItem"]["rss"] / n
        table("(d) memory for %s active small objects (bytes per object)" % num(n),
              ["who", "allocated", "RSS delta", "ostore/this (allocated)", "(RSS)"],
              [["ostore: a connection's cache (malloc + pools)", num(o_heap), num(o_rss), "", ""],
               ["CPython 3: class instances (tracemalloc; RSS)", num(py_d), num(py_dr),
                ratio(o_heap / py_d), ratio(o_rss / py_dr)],
               ["CPython 3: __slots__ instances (tracemalloc; RSS)", num(py_s), num(py_sr),
                ratio(o_heap / py_s), ratio(o_rss / py_sr)]], "<>>>>")
        target(o_heap <= py_d / 2, "(d) cache memory <= half of CPython's (class instances): "
               "%s vs %s bytes/object" % (num(o_heap), num(py_d)))

    if targets:
        print("targets")
        for verdict, what in targets:
            print("  %s  %s" % (verdict, what))


if __name__ == "__main__":
    main()
