#!/usr/bin/python3
"""The charts of docs/benchmarks.md, drawn from the benchmarks' JSON.

Each benchmark driver writes every raw figure it measured with --json FILE;
this script reads those files and writes one SVG chart per benchmark into
docs/charts/ (or --out DIR). It measures nothing itself. Give it the files
of the runs the page's tables come from, so that chart and table agree:

    /usr/bin/python3 bench/charts.py \\
        --pickle /tmp/ostore-bench/pickle.json \\
        --sqlite /tmp/ostore-bench/sqlite.json \\
        --store /tmp/ostore-bench/store.json [/tmp/ostore-bench/store-d2.json ...] \\
        --maps /tmp/ostore-bench/maps.json

docs/benchmarks.md ("Charts") has the commands that make those files.

  --pickle FILE   bench/bench_pickle.py --json FILE: docs/charts/pickle.svg,
                  how many times faster than Python's C pickle (protocol 4),
                  marshal and msgpack-c ostore's dumps and loads are, per
                  case; whiskers span the rounds' ratios.
  --sqlite FILE   bench/demo_vs_sqlite.py --json FILE: docs/charts/sqlite.svg,
                  ostore's CPU seconds over SQLite's per phase, and the
                  file's size over SQLite's; whiskers span the rounds.
  --store FILE... bench/bench_store.py --json FILE: docs/charts/store.svg,
                  the loader per million against raw LMDB, group commit
                  against one fsync each, and reads by oid against raw
                  mdb_get (one pair of bars per file given: a run each;
                  the first file must hold parts a and c, the others may
                  be --only d runs).
  --maps FILE     bench/bench_maps.py --json FILE: docs/charts/maps.svg,
                  durable inserts/s per million against raw LMDB for each
                  key order and batch size, and lookups and scans against
                  raw LMDB.
  --hot FILE...   bench/bench_hot.py --json FILE: docs/charts/hot.svg,
                  commits/s of the hot-counter workload without a shared
                  object, with an int field, and with a counter, per thread
                  count (a panel per file: durable, unsynced); whiskers span
                  the rounds, and each bar is labelled with its failed
                  transactions.

Only the charts whose files are given are written. The SVGs are
deterministic (matplotlib's svg.hashsalt fixed, no date in the metadata,
text kept as text): the same JSON gives the same bytes, so a chart's diff
in git shows a change of figures, not of drawing. Needs Debian's
python3-matplotlib (scripts/setup.sh installs it); run it with
/usr/bin/python3.
"""

import argparse
import json
import os
import statistics
import sys

import matplotlib

matplotlib.use("svg")
import matplotlib.pyplot as plt  # noqa: E402 (after the backend is chosen)
from matplotlib.ticker import FuncFormatter, LogLocator, NullFormatter  # noqa: E402

OSTORE = "#1f5fa8"   # ostore, in every chart
PEER = "#8c8c8c"     # the peer it is measured against
PEER2 = "#d9822b"    # a second peer
PEER3 = "#5a9e4b"    # a third
LOSS = "#c0392b"     # a ratio where ostore loses
WIN = "#2e8b57"      # a ratio where ostore wins
RESOLVER = "#7fa8d8" # ostore, a second way (a conflict resolver against a counter)

matplotlib.rcParams.update({
    "svg.hashsalt": "ostore-bench-charts",  # fixed ids: the same input, the same bytes
    "svg.fonttype": "none",                 # text as text, not paths: smaller, greppable
    "font.family": "DejaVu Sans",
    "font.size": 9,
    "axes.spines.top": False,
    "axes.spines.right": False,
    "axes.grid": True,
    "grid.color": "#dddddd",
    "grid.linewidth": 0.6,
    "axes.axisbelow": True,
    "legend.frameon": False,
})


def save(fig, out, name):
    path = os.path.join(out, name)
    fig.savefig(path, format="svg", bbox_inches="tight",
                metadata={"Date": None, "Creator": "bench/charts.py"})
    plt.close(fig)
    print("wrote " + path)


def med(xs):
    return statistics.median(xs)


def times_fmt(x, _pos=None):
    return ("%gx" % x) if x >= 1 else ("%.2gx" % x)


def rate_fmt(x, _pos=None):
    if x >= 1e6:
        return "%gM" % (x / 1e6)
    if x >= 1e3:
        return "%gk" % (x / 1e3)
    return "%g" % x


def log_times_axis(ax, which="x"):
    axis = ax.xaxis if which == "x" else ax.yaxis
    (ax.set_xscale if which == "x" else ax.set_yscale)("log")
    axis.set_major_locator(LogLocator(base=10, subs=(1, 2, 5)))
    axis.set_major_formatter(FuncFormatter(times_fmt))
    axis.set_minor_formatter(NullFormatter())


# ---- the serializer: bench_pickle.py --json ---------------------------------------

PICKLE_CASES = [("dicts", "(i) 100k dicts"), ("ints_same", "(ii) [1000]*1e6"),
                ("floats_same", "(iii) [1000.0]*1e6"), ("range", "(iv) range(1e6)"),
                ("strs", "(v) 1e6 strs"), ("instances", "(vi) 100k instances"),
                ("blob", "(vii) 64 MiB bytes")]
PICKLE_CAP = 100.0  # ratios beyond this (a lent 64 MiB load) are drawn to the edge, labelled


def pickle_chart(path, out):
    with open(path) as f:
        d = json.load(f)
    reps, rounds = d["reps"], d["rounds"]
    cres, py = d["c"]["cases"], d["python"]

    def op_times(entry, op):
        if op == "dump":
            return entry["dump_ns"]
        return [a + b for a, b in zip(entry["load_ns"], entry["free_ns"])]

    def mp_times(entry, op):
        if op == "dump":
            return entry.get("mp_pack_ns")
        if "mp_unpack_ns" not in entry:
            return None
        return [a + b for a, b in zip(entry["mp_unpack_ns"], entry["mp_free_ns"])]

    def ratios(peer, mine):
        """The median ratio peer / ostore, and the smallest and largest of
        the rounds' (each round: the medians of its reps on both sides)."""
        whole = med(peer) / max(1, med(mine))
        per = [med(peer[k * reps:(k + 1) * reps]) / max(1, med(mine[k * reps:(k + 1) * reps]))
               for k in range(rounds)]
        return whole, min(per), max(per)

    fig, axes = plt.subplots(1, 2, figsize=(10, 4.6), sharey=True)
    peers = [("p4", "pickle (C, protocol 4)", PEER), ("marshal", "marshal", PEER2),
             ("msgpack", "msgpack-c (no memo, no identity)", PEER3)]
    h = 0.26
    for ax, op, title in ((axes[0], "dump", "dumps"),
                          (axes[1], "load", "loads, freeing included")):
        for j, (pk, label, color) in enumerate(peers):
            ys, vals, lo, hi, texts = [], [], [], [], []
            for i, (case, _lab) in enumerate(PICKLE_CASES):
                mine = op_times(cres[case], op)
                if pk == "msgpack":
                    peer = mp_times(cres[case], op)
                else:
                    e = py[case].get(pk)
                    peer = op_times(e, op) if e else None
                if not peer:
                    continue
                r, rlo, rhi = ratios(peer, mine)
                y = i + (j - 1) * h
                shown = min(r, PICKLE_CAP)
                ys.append(y)
                vals.append(shown)
                lo.append(max(0.0, shown - min(rlo, PICKLE_CAP)))
                hi.append(max(0.0, min(rhi, PICKLE_CAP) - shown))
                texts.append((min(max(rhi, r), PICKLE_CAP), y,
                              ("%.0fx (lent: no copy)" % r) if r > PICKLE_CAP
                              else ("%.1fx" % r if r < 10 else "%.0fx" % r)))
            # bars grow from 1x (as fast as the peer): right, ostore is faster
            ax.barh(ys, [v - 1.0 for v in vals], left=1.0, height=h, color=color, label=label)
            ax.errorbar(vals, ys, xerr=[lo, hi], fmt="none", elinewidth=0.8, capsize=2,
                        ecolor="#333333")
            for x, y, t in texts:
                ax.text(x * 1.08, y, t, va="center", fontsize=7)
        ax.axvline(1.0, color="#333333", linewidth=0.8)
        log_times_axis(ax, "x")
        ax.set_xlim(0.3, PICKLE_CAP * 4)
        ax.set_title("%s: peer's time / ostore's (> 1x: ostore faster)" % title, fontsize=9)
        ax.grid(axis="y", visible=False)
    axes[0].set_yticks(range(len(PICKLE_CASES)))
    axes[0].set_yticklabels([lab for _c, lab in PICKLE_CASES])
    axes[0].invert_yaxis()
    handles, labels = axes[0].get_legend_handles_labels()
    fig.legend(handles, labels, loc="lower center", ncol=3, fontsize=8,
               bbox_to_anchor=(0.5, -0.04))
    fig.suptitle("Serializer: ostore against Python's C pickle, marshal and msgpack-c "
                 "(medians of %d runs; whiskers: the %d rounds)" % (reps * rounds, rounds),
                 fontsize=10)
    save(fig, out, "pickle.svg")


# ---- the demo against SQLite: demo_vs_sqlite.py --json ------------------------------

SQL_PHASES = [("load", "load"), ("walk", "walk"), ("lookup", "100,000 lookups"),
              ("range", "10,000 range queries"), ("commit", "800 commits, 4 threads"),
              ("check", "check")]


def sqlite_chart(path, out):
    with open(path) as f:
        d = json.load(f)
    o, s = d["runs"]["ostore"], d["runs"]["sqlite"]
    rows = []
    for ph, label in SQL_PHASES:
        oc = [r["phases"][ph]["cpu"] for r in o]
        sc = [r["phases"][ph]["cpu"] for r in s]
        per = [a / b for a, b in zip(oc, sc)]  # round k of each side
        rows.append(("%s\n%.3f s / %.3f s" % (label, med(oc), med(sc)), med(oc) / med(sc),
                     min(per), max(per)))
    of = med([r["file_bytes"] for r in o])
    sf = med([r["file_bytes"] for r in s])
    rows.append(("file on disk\n%.1f MiB / %.1f MiB" % (of / 2**20, sf / 2**20), of / sf,
                 of / sf, of / sf))

    fig, ax = plt.subplots(figsize=(8, 4.6))
    ys = list(range(len(rows)))
    vals = [r[1] for r in rows]
    colors = [WIN if v <= 1.0 else LOSS for v in vals]
    # bars grow from 1x (as costly as SQLite): left, ostore spends less
    ax.barh(ys, [v - 1.0 for v in vals], left=1.0, height=0.6, color=colors)
    ax.errorbar(vals, ys, xerr=[[v - r[2] for v, r in zip(vals, rows)],
                                [r[3] - v for v, r in zip(vals, rows)]],
                fmt="none", elinewidth=0.8, capsize=2, ecolor="#333333")
    for y, v, r in zip(ys, vals, rows):
        if v >= 1:
            ax.text(max(v, r[3]) * 1.06, y, "%.2fx" % v, va="center", ha="left", fontsize=8)
        else:
            ax.text(min(v, r[2]) / 1.06, y, "%.2fx" % v, va="center", ha="right", fontsize=8)
    ax.axvline(1.0, color="#333333", linewidth=0.8)
    log_times_axis(ax, "x")
    ax.set_xlim(0.2, 8)
    ax.set_yticks(ys)
    ax.set_yticklabels([r[0] for r in rows], fontsize=8)
    ax.invert_yaxis()
    ax.grid(axis="y", visible=False)
    ax.set_xlabel("ostore / SQLite: CPU seconds (user + system, all threads), file bytes. "
                  "Left of 1x (green): ostore spends less.", fontsize=8)
    ax.set_title("The demo's job, %s objects: ostore against SQLite (WAL, synchronous=FULL)\n"
                 "medians of %d rounds (labels: ostore / SQLite); whiskers: the rounds"
                 % ("{:,}".format(d["objects"]), d["rounds"]), fontsize=9)
    save(fig, out, "sqlite.svg")


# ---- the store: bench_store.py --json ---------------------------------------------


def store_chart(paths, out):
    runs = []
    for p in paths:
        with open(p) as f:
            runs.append(json.load(f))
    first = runs[0]
    panels = [k for k in ("load", "group") if k in first] + (
        ["reads"] if any("reads" in r for r in runs) else [])
    fig, axes = plt.subplots(1, len(panels), figsize=(4.0 * len(panels), 3.8), squeeze=False)
    for ax, part in zip(axes[0], panels):
        if part == "load":
            a = first["load"]
            xs = list(range(1, len(a["per_million"]) + 1))
            ax.plot(xs, a["per_million"], marker="o", ms=3, color=OSTORE,
                    label="ostore bulk loader")
            ax.plot(xs, a["raw_per_million"], marker="s", ms=3, color=PEER,
                    label="raw LMDB, MDB_APPEND puts")
            ax.set_ylim(0, max(a["per_million"] + a["raw_per_million"]) * 1.15)
            ax.yaxis.set_major_formatter(FuncFormatter(rate_fmt))
            ax.set_xlabel("million")
            ax.set_ylabel("objects/s")
            ax.set_title("(a) %s small objects, batches of %s:\nobjects/s per million "
                         "(overall %.2fx raw)" % (rate_fmt(a["objects"]), rate_fmt(a["batch"]),
                                                 a["raw_seconds"] / a["seconds"]), fontsize=9)
            ax.legend(fontsize=7, loc="lower right")
        elif part == "group":
            g = first["group"]
            ts = sorted({x["threads"] for x in g})
            by = {(x["threads"], x["group_commit"]): x["commits"] / x["seconds"] for x in g}
            w = 0.38
            xs = list(range(len(ts)))
            on = [by[(t, True)] for t in ts]
            off = [by[(t, False)] for t in ts]
            ax.bar([x - w / 2 for x in xs], on, w, color=OSTORE, label="group commit")
            ax.bar([x + w / 2 for x in xs], off, w, color=PEER, label="one fsync each")
            for x, a_, b_ in zip(xs, on, off):
                ax.text(x - w / 2, a_ * 1.1, "%.1fx" % (a_ / b_), ha="center", fontsize=7)
            ax.set_yscale("log")
            ax.yaxis.set_major_locator(LogLocator(base=10, subs=(1, 2, 5)))
            ax.yaxis.set_major_formatter(FuncFormatter(rate_fmt))
            ax.yaxis.set_minor_formatter(NullFormatter())
            ax.set_xticks(xs)
            ax.set_xticklabels(["%d" % t for t in ts])
            ax.set_xlabel("threads")
            ax.set_ylabel("durable commits/s")
            ax.set_title("(c) one-object transactions:\ngroup commit against one fsync each",
                         fontsize=9)
            ax.legend(fontsize=7, loc="upper left")
            ax.grid(axis="x", visible=False)
        else:
            rd = [r["reads"] for r in runs if "reads" in r]
            xs = list(range(len(rd)))
            w = 0.38
            mine = [x["reads"] / x["seconds"] for x in rd]
            raw = [x["reads"] / x["raw_seconds"] for x in rd]
            ax.bar([x - w / 2 for x in xs], mine, w, color=OSTORE,
                   label="ost_conn_get + ost_activate")
            ax.bar([x + w / 2 for x in xs], raw, w, color=PEER, label="raw mdb_get")
            for x, a_, b_ in zip(xs, mine, raw):
                ax.text(x - w / 2, a_ * 1.02, "%.0f%%" % (100 * a_ / b_), ha="center",
                        fontsize=7)
            ax.yaxis.set_major_formatter(FuncFormatter(rate_fmt))
            ax.set_ylim(0, max(raw + mine) * 1.3)
            ax.set_xticks(xs)
            ax.set_xticklabels(["run %d" % (i + 1) for i in xs])
            ax.set_ylabel("reads/s")
            ax.set_title("(d) %s random reads by oid\n(labels: ostore / raw mdb_get)"
                         % rate_fmt(rd[0]["reads"]), fontsize=9)
            ax.legend(fontsize=7, loc="upper left", ncol=2)
            ax.grid(axis="x", visible=False)
    fig.suptitle("The store against raw LMDB (durable commits)", fontsize=10)
    fig.tight_layout()
    save(fig, out, "store.svg")


# ---- the maps: bench_maps.py --json ------------------------------------------------

MAP_KEYS = [("asc", "int keys, ascending"), ("rand", "int keys, random order"),
            ("str", "str keys, random")]


def maps_chart(path, out):
    with open(path) as f:
        d = json.load(f)
    n = d["entries"]
    fig, axes = plt.subplots(1, 4, figsize=(15, 4.0))
    styles = ["-", "--"]
    for ax, (keys, title) in zip(axes[:3], MAP_KEYS):
        ls = [o for o in d["loads"] if o["keys"] == keys]
        for k, o in enumerate(ls):
            xs = list(range(1, len(o["per_million"]) + 1))
            ax.plot(xs, o["per_million"], styles[k % 2], color=OSTORE, marker="o", ms=2.5,
                    label="ostore, batches of %s" % rate_fmt(o["batch"]))
            ax.plot(xs, o["raw"]["per_million"], styles[k % 2], color=PEER, marker="s", ms=2.5,
                    label="raw LMDB, batches of %s" % rate_fmt(o["batch"]))
            if o.get("raw_append") and k == 0:
                ax.plot(xs, o["raw_append"]["per_million"], ":", color=PEER2, marker="^", ms=2.5,
                        label="raw LMDB MDB_APPEND, batches of %s" % rate_fmt(o["batch"]))
        ax.set_yscale("log")
        ax.yaxis.set_major_locator(LogLocator(base=10, subs=(1, 2, 5)))
        ax.yaxis.set_major_formatter(FuncFormatter(rate_fmt))
        ax.yaxis.set_minor_formatter(NullFormatter())
        ax.set_xlabel("million")
        ax.set_title(title, fontsize=9)
    axes[0].set_ylabel("durable inserts/s in each million (log)")
    ax = axes[3]
    bars = []
    for o in d["loads"]:
        if not o.get("reads"):
            continue
        bars.append(("lookups, %s map" % o["keys"],
                     statistics.median(o["raw_get_seconds"]) / statistics.median(o["get_seconds"])))
        bars.append(("scan, %s map" % o["keys"],
                     statistics.median(o["raw_scan_seconds"])
                     / statistics.median(o["scan_seconds"])))
    ys = list(range(len(bars)))
    ax.barh(ys, [b[1] for b in bars], height=0.6, color=OSTORE)
    for y, (_l, v) in zip(ys, bars):
        ax.text(v + 0.02, y, "%.0f%%" % (100 * v), va="center", fontsize=7)
    ax.axvline(1.0, color="#333333", linewidth=0.8)
    ax.set_xlim(0, 1.25)
    ax.set_yticks(ys)
    ax.set_yticklabels([b[0] for b in bars])
    ax.invert_yaxis()
    ax.grid(axis="y", visible=False)
    ax.set_title("reads: ostore's rate / raw LMDB's", fontsize=9)
    handles, labels = axes[0].get_legend_handles_labels()
    fig.legend(handles, labels, loc="lower center", ncol=5, fontsize=8,
               bbox_to_anchor=(0.5, -0.06))
    fig.suptitle("Ordered maps: %s entries through the bulk loader against raw LMDB puts of "
                 "the same keys (durable commits)" % rate_fmt(n), fontsize=10)
    fig.tight_layout()
    save(fig, out, "maps.svg")


# ---- hot objects: bench_hot.py --json ----------------------------------------------

HOT_MODES = [("none", "no shared object", PEER), ("field", "an int field", LOSS),
             ("counter", "a counter", OSTORE), ("resolver", "a field with a resolver", RESOLVER)]


def hot_chart(paths, out):
    fig, axes = plt.subplots(1, len(paths), figsize=(4.2 * len(paths), 3.2), squeeze=False)
    for ax, path in zip(axes[0], paths):
        with open(path) as f:
            d = json.load(f)
        threads = sorted({r["threads"] for r in d["runs"]})
        modes = [m for m in HOT_MODES if any(r["mode"] == m[0] for r in d["runs"])]
        width = 0.8 / len(modes)
        for j, (mode, label, color) in enumerate(modes):
            xs, ys, lo, hi, failed = [], [], [], [], []
            for i, t in enumerate(threads):
                rs = [r for r in d["runs"] if r["threads"] == t and r["mode"] == mode]
                rates = [r["commits_per_s"] for r in rs]
                xs.append(i + (j - (len(modes) - 1) / 2) * width)
                ys.append(med(rates))
                lo.append(med(rates) - min(rates))
                hi.append(max(rates) - med(rates))
                failed.append(sum(r["failed"] for r in rs))
            ax.bar(xs, ys, width, yerr=[lo, hi], color=color, label=label, capsize=2,
                   error_kw={"linewidth": 0.8})
            for x, y, h, n in zip(xs, ys, hi, failed):
                ax.annotate("%d failed" % n, (x, y + h), textcoords="offset points", xytext=(0, 2),
                            ha="center", va="bottom", fontsize=6, rotation=90)
        ax.set_xticks(range(len(threads)))
        ax.set_xticklabels(["%d threads" % t for t in threads])
        ax.yaxis.set_major_formatter(FuncFormatter(rate_fmt))
        ax.set_ylabel("commits/s (median of rounds)")
        ax.set_title("%s%s commits" % ("PostgreSQL, " if d.get("engine") == "postgresql" else "",
                                        "durable" if d.get("durable") else "unsynced"))
        ax.margins(y=0.25)
    axes[0][0].legend(loc="upper left", fontsize=7)
    fig.suptitle("A hot statistics object: a field conflicts, a counter or a resolver merges",
                 fontsize=10,
                 y=1.03)
    save(fig, out, "hot.svg")


def main():
    here = os.path.dirname(os.path.abspath(__file__))
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--out",
                    default=os.path.normpath(os.path.join(here, "..", "docs", "charts")),
                    help="where the SVGs go (default: docs/charts of this tree)")
    ap.add_argument("--pickle", metavar="FILE", help="bench_pickle.py --json output")
    ap.add_argument("--sqlite", metavar="FILE", help="demo_vs_sqlite.py --json output")
    ap.add_argument("--store", metavar="FILE", nargs="+",
                    help="bench_store.py --json outputs: a full run first, then any --only d runs")
    ap.add_argument("--maps", metavar="FILE", help="bench_maps.py --json output")
    ap.add_argument("--hot", metavar="FILE", nargs="+", help="bench_hot.py --json outputs")
    a = ap.parse_args()
    if not (a.pickle or a.sqlite or a.store or a.maps or a.hot):
        ap.error("give at least one of --pickle, --sqlite, --store, --maps, --hot")
    os.makedirs(a.out, exist_ok=True)
    if a.pickle:
        pickle_chart(a.pickle, a.out)
    if a.sqlite:
        sqlite_chart(a.sqlite, a.out)
    if a.store:
        store_chart(a.store, a.out)
    if a.maps:
        maps_chart(a.maps, a.out)
    if a.hot:
        hot_chart(a.hot, a.out)
    return 0


if __name__ == "__main__":
    sys.exit(main())
