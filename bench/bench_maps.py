#!/usr/bin/python3
"""The maps benchmark: bulk loading, one-key transactions, lookups, scans.

Runs bench/bench_maps (the C side, one command per measurement, each in a
fresh store under /tmp that is deleted afterwards) and prints one report
with ratios against peers measured in the same run and whether each
target is met. Every store is durable (OST_SYNC_FULL).

  (a) N entries into one map through the bulk loader (ost_loader_map_set):
      int keys ascending, the same keys shuffled (seeded), random 16-byte
      str keys; each in batches of 100,000 and of 1,000,000 entries;
      against raw LMDB puts of the same keys in the same batches (each
      batch sorted, one durable commit each; ascending also with
      MDB_APPEND): inserts/s per million, disk bytes per insert, memory;
  (b) 16 threads, each with its own connection, one-key transactions into
      one map (each commit a new distinct key) with group commit, against
      the same without group commit: commits/s, conflicts;
  (c) random point lookups (ost_map_get) on the N-entry maps against raw
      mdb_get of the same keys in the same store;
  (d) a full scan with a map cursor against a raw LMDB cursor, and the
      memory during it.

    /usr/bin/python3 bench/bench_maps.py --build build-release [--quick]

The build directory must be configured with --buildtype=release.
"""

import argparse
import json
import os
import shutil
import statistics
import sys
import tempfile
import time
from benchlib import (Runner, buildtype, loadavg, machine_line, num,  # noqa: E402 (bench/ on sys.path)
                      ratio, table)

# ---- formatting -------------------------------------------------------------------


def pct(x):
    return "%.0f%%" % (100 * x)


def mb(x):
    return "%.0f" % (x / 2**20)


KEYS = {"asc": "int keys 0..N-1, ascending",
        "rand": "the same int keys in a seeded random order",
        "str": "random 16-character ASCII str keys"}
KEY_LABEL = {"asc": "int, ascending", "rand": "int, random order", "str": "str, random"}


# ---- running the C side -----------------------------------------------------------


# ---- the report ---------------------------------------------------------------------


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--build", default="build-release",
                    help="meson build directory holding bench/bench_maps (default: build-release)")
    ap.add_argument("--entries", type=int, default=None,
                    help="entries per load (default 10,000,000; 1,000,000 with --quick)")
    ap.add_argument("--batches", default="100000,1000000",
                    help="loader batch sizes, comma-separated (default 100000,1000000)")
    ap.add_argument("--reads", type=int, default=None,
                    help="random point lookups per round (default 1,000,000; 200,000 with --quick)")
    ap.add_argument("--rounds", type=int, default=None,
                    help="rounds of scans and lookups, the median is reported (default 3; 1 with "
                         "--quick)")
    ap.add_argument("--threads", type=int, default=16, help="threads for (b) (default 16)")
    ap.add_argument("--seconds", type=float, default=None,
                    help="seconds per run of (b) (default 5; 1 with --quick)")
    ap.add_argument("--map-size", type=int, default=0,
                    help="the stores' initial map size in bytes (default 0: the library's "
                         "default, 64 MiB, which doubles when full)")
    ap.add_argument("--only", default="asc,rand,str,group",
                    help="which parts to run (default asc,rand,str,group; lookups and scans run "
                         "with asc and str)")
    ap.add_argument("--quick", action="store_true", help="smaller sizes, for a smoke run")
    ap.add_argument("--json", metavar="FILE", help="also write every raw figure to FILE")
    args = ap.parse_args()
    q = args.quick
    n = args.entries or (1_000_000 if q else 10_000_000)
    batches = [int(b) for b in args.batches.split(",") if b]
    reads = args.reads or (200_000 if q else 1_000_000)
    rounds = args.rounds or (1 if q else 3)
    secs = args.seconds or (1.0 if q else 5.0)
    only = set(args.only.split(","))

    exe = os.path.join(args.build, "bench", "bench_maps")
    if not os.access(exe, os.X_OK):
        sys.exit("bench_maps.py: %s not found: build it with `ninja -C %s`" % (exe, args.build))
    bt = buildtype(args.build)
    tmp = tempfile.mkdtemp(prefix="ostore-bench-maps-", dir="/tmp")
    r = Runner(exe, tmp, "bench_maps.py")
    raw = {"machine": machine_line(), "buildtype": bt, "load_before": loadavg(),
           "entries": n, "batches": batches, "map_size_option": args.map_size,
           "loads": [], "group": []}
    t_start = time.time()
    try:
        for keys in ("asc", "rand", "str"):
            if keys not in only:
                continue
            for b in batches:
                # lookups and scans on the first batch size's int and str maps
                rd = reads if keys in ("asc", "str") and b == batches[0] else 0
                o = r.run("load", n, keys, b, args.map_size, rd, rounds)
                o["raw"] = r.run("raw", n, keys, b, 0, o["map_oid"])
                if keys == "asc":
                    o["raw_append"] = r.run("raw", n, keys, b, 1, o["map_oid"])
                raw["loads"].append(o)
        if "group" in only:
            for gc in (1, 0):
                raw["group"].append(r.run("group", args.threads, secs, gc))
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    raw["load_after"] = loadavg()
    raw["seconds"] = time.time() - t_start
    if args.json:
        with open(args.json, "w") as f:
            json.dump(raw, f, indent=1)
    report(raw)


def report(raw):
    n = raw["entries"]
    print("ostore maps benchmark — %s" % raw["machine"])
    print("build type: %s%s; load average before %s, after %s; %.0f s" % (
        raw["buildtype"] or "?",
        "" if raw["buildtype"] == "release" else " (NOT release: figures are meaningless)",
        raw["load_before"], raw["load_after"], raw["seconds"]))
    print("Every store is durable (OST_SYNC_FULL; raw LMDB: mdb_txn_commit with its default "
          "sync). The machine may be\nshared with other programs (see the load averages): read "
          "the ratios against raw LMDB of the same run.")
    print()
    targets = []

    def target(ok, what):
        targets.append(("PASS" if ok else "MISS", what))

    loads = raw["loads"]
    if loads:
        ms = loads[0]["map_size_option"]
        vb = loads[0]["value_bytes"] / n
        print("(a) %s entries into one map through the bulk loader (ost_loader_map_set), one "
              "durable LMDB commit per batch;\n    the value of the i-th entry added is the int i, "
              "stored as the entry's 8-byte serial + its pickle (PROTO 4, BININT*, STOP:\n    5 to "
              "8 bytes): %.1f bytes per value on average.\n    raw LMDB: the "
              "same keys as LMDB keys (8-byte map oid + the same encoded key: 16 bytes for int, "
              "24 for str),\n    8-byte values, the same batches, each sorted (the sort is not "
              "timed; shown apart) then put and committed durably.\n    Store map size: %s."
              % (num(n), vb,
                 "the library's default (64 MiB; the committer grows it before a batch that "
                 "could fill it)" if not ms else "%s bytes from the start" % num(ms)))
        print("    Rates are durable entries per second: a batch counts when its commit has "
              "returned (the committer's group count,\n    polled every 0.5 ms); 'overall' is "
              "N / (loader open .. loader close).")
        print()
        rows = []
        for o in loads:
            w = o["raw"]
            rate = n / o["seconds"]
            raw_rate = n / w["seconds"]
            raw_sorted = n / (w["seconds"] + w["sort_seconds"])
            app = o.get("raw_append")
            pm = o["per_million"]
            rows.append([KEY_LABEL[o["keys"]], num(o["batch"]), num(pm[0]), num(pm[-1]), num(rate),
                         num(raw_rate), pct(rate / raw_rate), pct(rate / raw_sorted),
                         num(n / app["seconds"]) if app else "",
                         pct(rate / (n / app["seconds"])) if app else ""])
        table("(a) inserts/s: first million, last million, overall; ostore / raw LMDB",
              ["keys", "batch", "first M", "last M", "overall", "raw LMDB", "ostore/raw",
               "/(raw+sort)", "raw APPEND", "ostore/APPEND"], rows, "<>>>>>>>>>")
        rows = []
        for o in loads:
            w = o["raw"]
            rows.append([KEY_LABEL[o["keys"]], num(o["batch"]), "%.1f" % (o["value_bytes"] / n),
                         num(o["io_bytes"] / n),
                         num(w["io_bytes"] / n), num(o["file_bytes"] / n),
                         num(w["file_growth"] / n), num(o["leaf_pages"]), num(w["leaf_pages"]),
                         "%.1f / %.1f" % (o["caller_cpu"], o["process_cpu"]), "%.1f" % o["seconds"],
                         "%.1f + %.1f" % (w["seconds"], w["sort_seconds"])])
        table("(a) disk and CPU: stored value bytes per entry (raw LMDB: 8); bytes written per "
              "insert (/proc/self/io write_bytes,\n    whole process) and data.mdb size per entry; "
              "leaf pages of the map's entries; CPU seconds of the loader's\n    caller thread / "
              "of the whole process; wall seconds",
              ["keys", "batch", "value B", "written B/ins", "raw", "data.mdb B/entry", "raw",
               "leaf pages", "raw", "ostore CPU caller/all", "ostore s", "raw s (puts + sort)"],
              rows, "<>>>>>>>>>>>")
        # per million, one table per key kind
        for keys in ("asc", "rand", "str"):
            ls = [o for o in loads if o["keys"] == keys]
            if not ls:
                continue
            header = ["million"]
            cols = []
            for o in ls:
                header += ["batch %s" % num(o["batch"]), "raw", "ratio"]
                cols.append(o)
            rows = []
            for i in range(len(ls[0]["per_million"])):
                row = ["%d" % (i + 1)]
                for o in cols:
                    a, b = o["per_million"][i], o["raw"]["per_million"][i]
                    row += [num(a), num(b), ratio(a / b)]
                rows.append(row)
            table("(a) %s: durable inserts/s per million, ostore and raw LMDB (sorted puts)"
                  % KEYS[keys], header, rows, "<" + ">" * (len(header) - 1))
        # memory
        header = ["million"] + ["%s %s" % (o["keys"], num(o["batch"])) for o in loads]
        rows = [["start"] + [mb(o["rss_anon"][0]) for o in loads]]
        for i in range(1, len(loads[0]["rss_anon"])):
            rows.append(["%d" % i] + [mb(o["rss_anon"][i]) for o in loads])
        rows.append(["peak"] + [mb(o["rss_peak"][0]) for o in loads])
        rows.append(["raw peak"] + [mb(o["raw"]["rss_peak"][0]) for o in loads])
        rows.append(["RssFile peak"] + [mb(o["rss_peak"][1]) for o in loads])
        rows.append(["data.mdb"] + [mb(o["file_bytes"]) for o in loads])
        table("(a) memory during the loads: RssAnon (MiB) of the process as each million became "
              "durable; 'start' is before the\n    loader opens (for random int keys it holds "
              "the 80 MB shuffled key array); raw peak: raw LMDB's process, same keys;\n    "
              "RssFile: pages of data.mdb mapped (LMDB reads through its read-only map; page "
              "cache, reclaimable)", header, rows, "<" + ">" * len(loads))
        for o in loads:
            key, b = o["keys"], o["batch"]
            rate = n / o["seconds"]
            raw_rate = n / o["raw"]["seconds"]
            if key == "asc":
                target(rate >= 2_000_000, "(a) ascending int keys, batches of %s: >= 2,000,000 "
                       "inserts/s: %s" % (num(b), num(rate)))
            else:
                target(rate >= 0.8 * raw_rate, "(a) %s, batches of %s: >= 80%% of raw LMDB: "
                       "%s vs %s (%s)" % (KEY_LABEL[key], num(b), num(rate), num(raw_rate),
                                          pct(rate / raw_rate)))

    g = raw.get("group")
    if g:
        on = [x for x in g if x["group_commit"]][0]
        off = [x for x in g if not x["group_commit"]][0]
        r_on = on["commits"] / on["seconds"]
        r_off = off["commits"] / off["seconds"]
        table("(b) %d threads, a connection each, one-key durable transactions into one map "
              "(each commit sets one new int key), %.0f s" % (on["threads"], on["seconds"]),
              ["", "commits/s", "conflicts", "commits/group", "disk B/commit", "vs one fsync each"],
              [["group commit", num(r_on), "%d" % on["conflicts"],
                num(on["commits"] / max(1, on["groups"])), num(on["io_bytes"] / on["commits"]),
                ratio(r_on / r_off)],
               ["one fsync each", num(r_off), "%d" % off["conflicts"], "",
                num(off["io_bytes"] / off["commits"]), "1.00x"]], "<>>>>>")
        target(r_on >= 10_000 and on["conflicts"] == 0,
               "(b) %d threads with group commit: >= 10,000 commits/s and 0 conflicts: %s "
               "commits/s, %d conflicts" % (on["threads"], num(r_on), on["conflicts"]))

    rd = [o for o in loads if o.get("reads")]
    if rd:
        rows = []
        for o in rd:
            get = o["reads"] / statistics.median(o["get_seconds"])
            rget = o["reads"] / statistics.median(o["raw_get_seconds"])
            rows.append(["%s map (%s)" % (o["keys"], KEY_LABEL[o["keys"]]), num(get), num(rget),
                         ratio(get / rget)])
            if o["keys"] == "asc":
                target(get >= 0.5 * rget, "(c) point lookups on the int map >= 50%% of raw "
                       "mdb_get: %s vs %s (%s)" % (num(get), num(rget), pct(get / rget)))
        table("(c) %s random point lookups on a warm %s-entry map: ost_map_get (key made "
              "beforehand, value decoded, a transaction\n    every 1,000) against raw mdb_get of "
              "the same keys in the same store (a read transaction every 1,000); lookups/s, "
              "median of %d" % (num(rd[0]["reads"]), num(n), rd[0]["rounds"]),
              ["map", "ost_map_get", "raw mdb_get", "ratio"], rows, "<>>>")
        rows = []
        for o in rd:
            sc = n / statistics.median(o["scan_seconds"])
            rsc = n / statistics.median(o["raw_scan_seconds"])
            rows.append(["%s map" % o["keys"], num(sc), num(rsc), ratio(sc / rsc),
                         "%s / %s / %s" % (mb(o["scan_rss_before"][0]), mb(o["scan_rss_peak"][0]),
                                           mb(o["scan_rss_after"][0])),
                         "%s / %s" % (mb(o["scan_rss_before"][1]), mb(o["scan_rss_peak"][1]))])
            if o["keys"] == "asc":
                target(sc >= 5_000_000, "(d) scan of the int map >= 5,000,000 entries/s: %s"
                       % num(sc))
        table("(d) a full scan of the %s-entry map, warm: a map cursor (key and value decoded "
              "at each step) against a raw LMDB\n    cursor over the same entries; entries/s, "
              "median of %d; memory during the first round (MiB)" % (num(n), rd[0]["rounds"]),
              ["map", "map cursor", "raw cursor", "ratio", "RssAnon before/peak/after",
               "RssFile before/peak"], rows, "<>>>>>")

    print("ZODB reference (from the issue; not run here): ZODB 5.8.1 + BTrees 4.3 on "
          "FileStorage, this machine, an LOBTree,\n1,000,000 int keys, a commit every "
          "10,000: ascending ~55,000 inserts/s; random order 7,200 inserts/s overall\n"
          "(26,600/s for the first 100,000, ~5,000/s at the end); raw LMDB, 1,000,000 random "
          "8-byte keys in 10,000-put\ntransactions, unsorted: 81,000 to 87,000 inserts/s.")
    print()
    if targets:
        print("targets")
        for verdict, what in targets:
            print("  %s  %s" % (verdict, what))


if __name__ == "__main__":
    main()
