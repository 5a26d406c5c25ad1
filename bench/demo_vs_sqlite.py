#!/usr/bin/python3
"""ostore against SQLite on the demo's own job (issue 31).

Runs `ostore demo --quiet --stats FILE` and bench/bench_demo_sqlite (the
same shop from the same generator, tools/demo_gen.h, in one SQLite file by
SQLite's book: WAL, synchronous=FULL, prepared statements, WITHOUT ROWID
tables, foreign keys, a 64 MiB page cache) in alternation, each run in a
fresh scratch directory that is removed afterwards, and prints per phase
(load, walk, lookup, range, commit, check):

  - the median CPU seconds of each side (user + system of the whole
    process, every thread: getrusage in the program, over the phase's
    timed part) and their ratio ostore / SQLite against the goal, CPU at or
    below SQLite's (ratio <= 1.0): MET or MISSED;
  - the median rates (operations per wall-clock second);
  - the files on disk (ostore's data.mdb; SQLite's shop.db plus its log
    after a checkpoint) against the goal, at most 1.5x SQLite's: MET or
    MISSED;
  - the peak anonymous memory of each process: RssAnon of
    /proc/PID/status polled from here every 10 ms (no CPU of the measured
    process), and the largest of the program's own samples at each phase's
    end, whichever is larger.

It checks that both sides built the same shop (the same counts of
products, customers, orders, line items and the same total of cents) and
ran the same number of operations per phase, and fails when they did not.

    /usr/bin/python3 bench/demo_vs_sqlite.py --build build-release
    /usr/bin/python3 bench/demo_vs_sqlite.py --build build-release --quick

--rounds R (default 3) runs each side R times; --objects N (default
1,000,000); --quick is one round of 50,000 objects (the meson benchmark
`demo-vs-sqlite`); --json FILE also writes every run's figures; --tmp DIR
puts the scratch directories there (default: the system's temporary
directory; both sides use the same); --sqlite-foreign-keys off runs SQLite
with its references declared but not checked at each insert (ostore does
not check them at a commit either; on by default). The build directory must be a
--buildtype=release build with sqlite3 found (bench_demo_sqlite built).
"""

import argparse
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from benchlib import buildtype, loadavg, machine_line, num, progress, ratio, table  # noqa: E402

PHASES = ["load", "walk", "lookup", "range", "commit", "check"]
WHAT = {
    "load": "load (objects/s)",
    "walk": "walk (objects/s)",
    "lookup": "100,000 lookups (lookups/s)",
    "range": "10,000 range queries (queries/s)",
    "commit": "800 commits, 4 threads (commits/s)",
    "check": "check (records/s)",
}
CPU_GOAL = 1.0   # ostore's CPU at or below SQLite's in every phase
FILE_GOAL = 1.5  # ostore's store at most 1.5x SQLite's file


def rss_anon(pid):
    try:
        with open("/proc/%d/status" % pid) as f:
            for line in f:
                if line.startswith("RssAnon:"):
                    return int(line.split()[1]) * 1024
    except (OSError, ValueError, IndexError):
        pass
    return 0


def run_one(side, argv, tmp):
    """Runs one side in a fresh directory under tmp; returns its stats with
    the polled peak RssAnon as "rss_anon_polled"."""
    d = tempfile.mkdtemp(prefix="demo-%s-" % side, dir=tmp)
    stats = os.path.join(d, "stats.json")
    store = os.path.join(d, "store")
    full = [argv[0], *argv[1:], store, "--quiet", "--stats", stats]
    progress("%s   (load average %s)" % (" ".join(os.path.basename(a) if i == 0 else a
                                                   for i, a in enumerate(full)), loadavg()))
    try:
        p = subprocess.Popen(full, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        peak = 0
        while p.poll() is None:
            peak = max(peak, rss_anon(p.pid))
            time.sleep(0.01)
        out, err = p.communicate()
        if p.returncode != 0:
            sys.exit("demo_vs_sqlite: %s failed (exit %d):\n%s%s" % (" ".join(full), p.returncode,
                                                                     out, err))
        with open(stats) as f:
            res = json.load(f)
    finally:
        shutil.rmtree(d, ignore_errors=True)
    res["rss_anon_polled"] = peak
    return res


def median(xs):
    return statistics.median(xs) if xs else None


def mib(b):
    return "%.1f MiB" % (b / 1048576.0)


def verdict(r, goal):
    return "n/a" if r is None else ("MET" if r <= goal else "MISSED")


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--build", required=True, help="the meson build directory")
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--objects", type=int, default=1000000)
    ap.add_argument("--quick", action="store_true", help="one round of 50,000 objects")
    ap.add_argument("--json", help="also write every run's figures to this file")
    ap.add_argument("--tmp", help="where the scratch directories go")
    ap.add_argument("--sqlite-foreign-keys", choices=["on", "off"], default="on",
                    help="SQLite's foreign_keys pragma (default on: every reference checked "
                    "at insert)")
    a = ap.parse_args()
    if a.quick:
        a.rounds, a.objects = 1, 50000
    if a.rounds < 1 or not 1000 <= a.objects <= 100000000:
        ap.error("--rounds takes 1 or more, --objects 1000 to 100000000")
    ostore = os.path.join(a.build, "tools", "ostore")
    sqlite = os.path.join(a.build, "bench", "bench_demo_sqlite")
    for exe in (ostore, sqlite):
        if not os.access(exe, os.X_OK):
            sys.exit("demo_vs_sqlite: %s is not built (bench_demo_sqlite needs sqlite3: "
                     "scripts/setup.sh installs libsqlite3-dev)" % exe)
    bt = buildtype(a.build)
    print("ostore demo against SQLite, %s objects, %d round%s (each side once a round, the "
          "order alternating)" % ("{:,}".format(a.objects), a.rounds, "s" if a.rounds > 1 else ""))
    print("SQLite: WAL, synchronous=FULL, foreign_keys=%s, 64 MiB page cache"
          % a.sqlite_foreign_keys.upper())
    print("machine: %s; load average before: %s" % (machine_line(), loadavg()))
    if bt != "release":
        print("WARNING: %s is a %s build, not release: the figures mean little" % (a.build, bt))
    print()
    sides = {
        "ostore": [ostore, "demo", "--objects", str(a.objects)],
        "sqlite": [sqlite, "--objects", str(a.objects), "--foreign-keys",
                   a.sqlite_foreign_keys],
    }
    runs = {"ostore": [], "sqlite": []}
    tmp = a.tmp or tempfile.gettempdir()
    for rnd in range(a.rounds):
        order = ["ostore", "sqlite"] if rnd % 2 == 0 else ["sqlite", "ostore"]
        for side in order:
            runs[side].append(run_one(side, sides[side], tmp))
    # the same shop on both sides, the same work in each phase
    ref = runs["ostore"][0]
    for side in ("ostore", "sqlite"):
        for r in runs[side]:
            if r["built"] != ref["built"] or r["objects"] != ref["objects"]:
                sys.exit("demo_vs_sqlite: %s built %r (%d objects), ostore %r (%d): not the same "
                         "shop" % (side, r["built"], r["objects"], ref["built"], ref["objects"]))
            for ph in ("lookup", "range", "commit"):
                if r["phases"][ph]["ops"] != ref["phases"][ph]["ops"]:
                    sys.exit("demo_vs_sqlite: %s ran %d %s operations, ostore %d" % (
                        side, r["phases"][ph]["ops"], ph, ref["phases"][ph]["ops"]))
    b = ref["built"]
    print("both built: %s products, %s customers, %s orders, %s line items (%s objects), "
          "%s cents in all" % tuple("{:,}".format(x) for x in (
              b["products"], b["customers"], b["orders"], b["line_items"], ref["objects"],
              b["total_cents"])))
    print()

    def med(side, f):
        return median([f(r) for r in runs[side]])

    rows, met = [], {}
    for ph in PHASES:
        oc = med("ostore", lambda r: r["phases"][ph]["cpu"])
        sc = med("sqlite", lambda r: r["phases"][ph]["cpu"])
        rr = oc / sc if sc else None
        met[ph] = verdict(rr, CPU_GOAL)
        rows.append([ph, "%.3f s" % oc, "%.3f s" % sc, ratio(rr), "<= %.1fx" % CPU_GOAL, met[ph]])
    osz = med("ostore", lambda r: r["file_bytes"])
    ssz = med("sqlite", lambda r: r["file_bytes"])
    fr = osz / ssz if ssz else None
    met["file"] = verdict(fr, FILE_GOAL)
    rows.append(["file on disk", mib(osz), mib(ssz), ratio(fr), "<= %.1fx" % FILE_GOAL,
                 met["file"]])
    table("CPU seconds per phase (medians of %d; user + system, all threads) and the file:"
          % a.rounds, ["phase", "ostore", "SQLite", "ostore/SQLite", "goal", ""], rows,
          "<>>>><")
    rows = []
    for ph in PHASES:
        orate = med("ostore", lambda r: r["phases"][ph]["ops"] / r["phases"][ph]["wall"])
        srate = med("sqlite", lambda r: r["phases"][ph]["ops"] / r["phases"][ph]["wall"])
        rows.append([WHAT[ph], num(orate), num(srate), ratio(orate / srate)])
    table("Rates (operations per wall-clock second, medians; noisy on a shared machine; a ratio "
          "above 1: ostore faster):", ["phase", "ostore", "SQLite", "ostore/SQLite"], rows, "<>>>")

    def peak(r):
        return max(r.get("rss_anon_polled", 0), r.get("rss_anon_peak", 0))

    om, sm = med("ostore", peak), med("sqlite", peak)
    table("Memory (medians):", ["", "ostore", "SQLite", "ostore/SQLite"], [
        ["peak RssAnon (anonymous: heap, not mapped files)", mib(om), mib(sm),
         ratio(om / sm if sm else None)],
        ["VmHWM at the end (peak resident, mapped files too)",
         mib(med("ostore", lambda r: r["vm_hwm"])), mib(med("sqlite", lambda r: r["vm_hwm"])),
         ratio(med("ostore", lambda r: r["vm_hwm"]) / med("sqlite", lambda r: r["vm_hwm"]))],
    ], "<>>>")
    missed = [k for k, v in met.items() if v == "MISSED"]
    print("goal (CPU <= SQLite's in every phase, file <= 1.5x): %s" % (
        "MET" if not missed else "MISSED in " + ", ".join(missed)))
    print("load average after: %s" % loadavg())
    if a.json:
        with open(a.json, "w") as f:
            json.dump({"objects": a.objects, "rounds": a.rounds, "runs": runs}, f, indent=1)
    return 0


if __name__ == "__main__":
    sys.exit(main())
