#!/usr/bin/python3
"""The serializer benchmark: ostore against Python's pickle, marshal, msgpack-c.

Builds seven data sets the same way in C (ostore values, by bench_pickle.c)
and in Python (below), pickles and unpickles each with ostore, Python's C
pickle (protocols 4 and 5) and marshal, and msgpack-c for three of them, and
prints medians, ratios and whether each target is met. It also checks that
ostore's pickle of every case loads in Python equal to the Python data.

    /usr/bin/python3 bench/bench_pickle.py --build build-release [--quick]

ostore loads through ost_load_lent (the input outlives what is loaded), so
the 64 MiB bytes value of (vii) points into the input instead of copying it.

The build directory must be configured with --buildtype=release (figures
from a debug build are meaningless; the script says so when it sees one).
"""

import argparse
import gc
import json
import marshal
import math
import os
import pickle
import platform
import statistics
import subprocess
import sys
import tempfile
import time
import types
from benchlib import buildtype, machine_line, row, table  # noqa: E402 (bench/ is on sys.path)

# ---- the cases, as bench_pickle.c builds them ------------------------------

N_DICTS = 100_000
N_BIG = 1_000_000
N_INST = 100_000
BLOB_SIZE = 64 << 20

# Case (vi) pickles instances of bench.Rec: a plain class, registered under
# the module name the C side writes, so both pickles name the same class.
bench_module = types.ModuleType("bench")


class Rec:
    pass


Rec.__module__ = "bench"
bench_module.Rec = Rec
sys.modules["bench"] = bench_module


def make_dicts():
    return [{"id": i, "name": "user%d" % i, "score": i * 1.5, "tags": ["a", "b"],
             "active": i % 2 == 0} for i in range(N_DICTS)]


def make_instances():
    out, prev = [], None
    for i in range(N_INST):
        r = Rec()
        r.id = i
        r.name = "rec%d" % i
        r.score = i * 0.5
        r.prev = prev
        out.append(r)
        prev = r
    return out


def same_instances(a, b):
    """Attributes equal, and each prev is the loaded list's previous item."""
    if type(b) is not list or len(a) != len(b):
        return False
    for i, (x, y) in enumerate(zip(a, b)):
        if type(y) is not Rec or list(vars(y)) != list(vars(x)):
            return False
        if (y.id, y.name, y.score) != (x.id, x.name, x.score):
            return False
        if y.prev is not (b[i - 1] if i else None):
            return False
    return True


# name, label, description, builder, uses msgpack, ratio target for dumps and loads
CASES = [
    ("dicts", "(i) dicts", "100,000 dicts {'id': i, 'name': 'user%d' % i, "
     "'score': i*1.5, 'tags': ['a','b'], 'active': i%2==0}", make_dicts, True, 4),
    ("ints_same", "(ii) [1000]*1e6", "[1000] * 10**6", lambda: [1000] * N_BIG, False, 4),
    ("floats_same", "(iii) [1000.0]*1e6", "[1000.0] * 10**6 (one float object)",
     lambda: [1000.0] * N_BIG, False, 4),
    ("range", "(iv) range(1e6)", "list(range(10**6))", lambda: list(range(N_BIG)), True, 4),
    ("strs", "(v) 1e6 strs", "['s%d' % i for i in range(10**6)]",
     lambda: ["s%d" % i for i in range(N_BIG)], True, 4),
    ("instances", "(vi) instances", "100,000 instances of a plain class: id (int), "
     "name (str), score (float), prev (the one before)", make_instances, False, 4),
    ("blob", "(vii) 64 MiB bytes", "one 64 MiB bytes object",
     lambda: bytes(range(256)) * (BLOB_SIZE // 256), False, 5),
]

SERIALIZERS = [
    ("p4", lambda o: pickle.dumps(o, protocol=4), pickle.loads),
    ("p5", lambda o: pickle.dumps(o, protocol=5), pickle.loads),
    ("marshal", marshal.dumps, marshal.loads),
]

# ---- measuring ---------------------------------------------------------------

now = time.perf_counter_ns


def measure_python(data, reps, res):
    """Times reps dumps and loads of data with each serializer, appending to
    res[name] lists. Serializers take turns within each repetition, so that
    a busy moment of the machine does not fall on one of them only."""
    outs = {}
    for sname, dumps, loads in SERIALIZERS:  # warm-up, and the outputs
        try:
            outs[sname] = dumps(data)
        except ValueError:  # marshal: unmarshallable object
            res[sname] = None
            continue
        x = loads(outs[sname])
        del x
        r = res.setdefault(sname, {"dump_ns": [], "load_ns": [], "free_ns": []})
        r["bytes"] = len(outs[sname])
    for _ in range(reps):
        for sname, dumps, _loads in SERIALIZERS:
            if sname not in outs:
                continue
            t0 = now()
            out = dumps(data)
            res[sname]["dump_ns"].append(now() - t0)
            del out  # freed outside the timing
        for sname, _dumps, loads in SERIALIZERS:
            if sname not in outs:
                continue
            t0 = now()
            x = loads(outs[sname])
            t1 = now()
            del x  # the only reference: this frees the loaded data
            t2 = now()
            res[sname]["load_ns"].append(t1 - t0)
            res[sname]["free_ns"].append(t2 - t1)


def med(ts):
    return statistics.median(ts) if ts else None


def progress(msg):
    print("  ... " + msg, file=sys.stderr, flush=True)


# ---- formatting -----------------------------------------------------------------

def ms(ns):
    if ns is None:
        return "n/a"
    v = ns / 1e6
    return "%.1f" % v if v >= 10 else "%.2f" % v


def mb(n):
    return "n/a" if n is None else "%.2f" % (n / 1e6)


def ratio(x):
    """Truncated, not rounded: 2.996x prints as 2.99x, never as a 3.00x MISS."""
    if x >= 10:
        return "%.1fx" % (math.floor(x * 10) / 10)
    return "%.2fx" % (math.floor(x * 100) / 100)


# ---- the run ----------------------------------------------------------------------

def run_c(exe, reps, outdir, case, into=None):
    """Runs the C side for one case in a fresh process, just before a round
    of its Python side, so that both see the machine in the same condition.
    With into (an earlier result), appends the new times to it."""
    progress("C side: %s" % case)
    p = subprocess.run([exe, "--reps", str(reps), "--out", outdir, "--only", case],
                       stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    if p.returncode != 0:
        sys.exit("bench_pickle.py: %s failed (exit %d):\n%s" % (exe, p.returncode, p.stderr))
    out = json.loads(p.stdout)
    if into is not None:
        for k, v in out["cases"][0].items():
            if k.endswith("_ns") and isinstance(v, list):
                into["cases"][0][k] += v
        return into
    return out


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--build", default="build-release",
                    help="meson build directory holding bench/bench_pickle "
                         "(default: build-release)")
    ap.add_argument("--reps", type=int, default=3,
                    help="timed repetitions per round (default 3)")
    ap.add_argument("--rounds", type=int, default=None,
                    help="rounds per case, C then Python in each (default 3, 1 with --quick)")
    ap.add_argument("--quick", action="store_true", help="one round instead of three")
    ap.add_argument("--json", metavar="FILE", help="also write every raw figure to FILE")
    args = ap.parse_args()
    rounds = args.rounds or (1 if args.quick else 3)
    reps = max(1, args.reps)
    nruns = reps * rounds
    start = time.monotonic()

    exe = os.path.join(args.build, "bench", "bench_pickle")
    if not os.access(exe, os.X_OK):
        sys.exit("bench_pickle.py: %s not found. Build it first:\n"
                 "  meson setup %s --buildtype=release && ninja -C %s"
                 % (exe, args.build, args.build))
    bt = buildtype(args.build)

    print("ostore serializer benchmark")
    print("===========================")
    print("Each case below is built the same way in C (as ostore values) and in Python.")
    print("Each is then pickled (\"dumps\") and unpickled (\"loads\") by ostore (C, protocol 4,")
    print("one reused writer and reader), Python's C pickle (protocols 4 and 5) and marshal,")
    print("and, for (i), (iv) and (v), by msgpack-c (no identity, no memo: the floor).")
    print("Times are in milliseconds, lower is better: medians of %d runs, in %d round%s of"
          % (nruns, rounds, "" if rounds == 1 else "s"))
    print("%d (in each round the C side runs, then the Python side). \"loads\" includes" % reps)
    print("freeing what was loaded, also shown apart. \"x p4\" = pickle-4's time / ostore's.")
    print("A speed target is met when ostore beats the faster of pickle-4 and pickle-5 by it.")
    print()
    print("Machine: " + machine_line())
    load = os.getloadavg()[0]
    print("Load average before the run: %.2f%s" % (load, "" if load < 1.0 else
          "  (other programs are running: expect noisy, slower figures)"))
    print()

    with tempfile.TemporaryDirectory(prefix="ostore-bench-") as tmp:
        c = run_c(exe, nruns, tmp, "graph")
        print("ostore %s (%s, buildtype %s), Python %s (%s, GC on), msgpack-c %s"
              % (c["ostore"], exe, bt or "?", platform.python_version(), sys.executable,
                 c["msgpack"] or "not built"))
        if bt not in ("release", None):
            print("WARNING: %s is a '%s' build; configure it with --buildtype=release "
                  "for real figures." % (args.build, bt))
        print()
        cres = {x["case"]: x for x in c["cases"]}

        py = {}
        checks = {}
        # the Python side of the graph figure, for context
        progress("Python side: building and freeing the 1,000,000-object graph")
        tb, tf = [], []
        for _ in range(nruns):
            t0 = now()
            g = [{"id": i, "name": "user%d" % i, "score": i * 1.5, "tags": [i]}
                 for i in range(250_000)]
            t1 = now()
            del g
            t2 = now()
            tb.append(t1 - t0)
            tf.append(t2 - t1)
        py["graph"] = {"build_ns": tb, "free_ns": tf}
        for name, label, desc, make, _mp, _t in CASES:
            data = make()
            res = {}
            cr = None
            for _ in range(rounds):
                cr = run_c(exe, reps, tmp, name, cr)
                progress("Python side: %s" % label)
                measure_python(data, reps, res)
            cres[name] = cr["cases"][0]
            # the sanity check: ostore's pickle loads in Python equal to the data
            with open(os.path.join(tmp, name + ".pickle"), "rb") as f:
                got = pickle.loads(f.read())
            ok = same_instances(data, got) if name == "instances" else got == data
            checks[name] = ok
            del got, data
            py[name] = res
            gc.collect()


    report(c, cres, py, checks, nruns)
    if args.json:
        with open(args.json, "w") as f:
            meta = {k: c[k] for k in ("ostore", "protocol", "msgpack", "reps")}
            json.dump({"c": dict(meta, cases=cres), "python": py, "checks": checks,
                       "reps": reps, "rounds": rounds,
                       "machine": machine_line(), "python_version": platform.python_version()},
                      f, indent=1)
    print("Done in %.0f s." % (time.monotonic() - start))


def report(c, cres, py, checks, reps):
    misses = []
    npass = 0

    def verdict(ok, what):
        nonlocal npass
        if ok:
            npass += 1
            return "PASS"
        misses.append(what)
        return "MISS"

    print("Cases")
    for name, label, desc, *_ in CASES:
        print("  %-20s %s" % (label, desc))
    print()

    def best_pickle(p, key):
        return min(med(p["p4"][key]), med(p["p5"][key]))

    for phase, key, ckey, mpkey in (("Dumps", "dump_ns", "dump_ns", "mp_pack_ns"),
                                    ("Loads, freeing included", "load+free", "load+free",
                                     "mp_unpack+free")):
        rows = []
        for name, label, _d, _m, use_mp, target in CASES:
            cr, p = cres[name], py[name]

            def t(entry, k):
                if entry is None:
                    return None
                if k == "load+free":
                    return med([a + b for a, b in zip(entry["load_ns"], entry["free_ns"])])
                if k == "mp_unpack+free":
                    if "mp_unpack_ns" not in entry:
                        return None
                    return med([a + b for a, b in zip(entry["mp_unpack_ns"], entry["mp_free_ns"])])
                return med(entry[k]) if k in entry else None

            o = t(cr, ckey)
            p4, p5, m = t(p["p4"], key), t(p["p5"], key), t(p["marshal"], key)
            mp = t(cr, mpkey) if use_mp else None
            best = min(p4, p5)
            x4, x5 = p4 / o, p5 / o
            cells = [label, ms(o), ms(p4), ms(p5), ms(m), ms(mp) if use_mp else "-",
                     ratio(x4), ratio(x5)]
            v = verdict(best / o >= target, "%s %s: %s faster than pickle, target %dx"
                        % (label, phase.split(",")[0].lower(), ratio(best / o), target))
            cells.append(">=%dx %s" % (target, v))
            if phase == "Dumps":
                if use_mp:
                    r = o / mp
                    v = verdict(r <= 2, "%s dumps: %s msgpack-c's pack time, target <= 2x"
                                % (label, ratio(r)))
                    cells.append("%s %s" % (ratio(r), v))
                else:
                    cells.append("-")
            rows.append(cells)
        header = ["case", "ostore", "pickle-4", "pickle-5", "marshal", "msgpack-c",
                  "x p4", "x p5", "target vs pickle"]
        aligns = "<rrrrrrrr"
        if phase == "Dumps":
            header.append("ostore/msgpack [<=2x]")
            aligns += "r"
        table("%s (ms, median of %d)" % (phase, reps), header, rows, aligns)

    rows = []
    for name, label, *_ in CASES:
        cr, p = cres[name], py[name]
        o = med(cr["free_ns"])
        p4 = med(p["p4"]["free_ns"])
        m = med(p["marshal"]["free_ns"]) if p["marshal"] else None
        mp = med(cr["mp_free_ns"]) if "mp_free_ns" in cr else None
        rows.append([label, ms(o), ms(p4), ms(m), ms(mp) if mp is not None else "-",
                     ratio(p4 / o) if o else "-"])
    table("Freeing what was loaded (ms, median; part of the loads above)",
          ["case", "ostore", "pickle-4", "marshal", "msgpack-c", "x p4"], rows, "<rrrrr")

    rows = []
    for name, label, *_ in CASES:
        cr, p = cres[name], py[name]
        o, p4, p5 = cr["bytes"], p["p4"]["bytes"], p["p5"]["bytes"]
        m = p["marshal"]["bytes"] if p["marshal"] else None
        mp = cr.get("mp_bytes")
        v = verdict(o <= p4, "%s size: %d bytes, pickle-4 %d" % (label, o, p4))
        rows.append([label, mb(o), mb(p4), mb(p5), mb(m), mb(mp) if mp else "-",
                     "%.2f" % (o / p4), v])
    table("Output size (MB = 10^6 bytes)",
          ["case", "ostore", "pickle-4", "pickle-5", "marshal", "msgpack-c",
           "ostore/p4", "target <= p4"], rows, "<rrrrrrr")
    if cres["instances"]["bytes"] > py["instances"]["p4"]["bytes"]:
        print("Note (vi): ost_instance_setattr makes a new key string on every call, so ostore")
        print("writes each instance's attribute names in full; Python memoizes its interned")
        print("names once and writes a 2-byte BINGET for each later use.")
        print()
    if cres["blob"]["bytes"] > py["blob"]["p4"]["bytes"]:
        print("Note (vii): ostore puts the BINBYTES opcode and length in a 9-byte FRAME before")
        print("the payload; Python writes them outside any frame (%d bytes more)."
              % (cres["blob"]["bytes"] - py["blob"]["p4"]["bytes"]))
        print()

    g, pg = cres["graph"], py["graph"]
    n = g["heap_objects"]
    bns, fns = med(g["build_ns"]), med(g["free_ns"])
    print("Building and freeing a graph of %s heap objects in C (250,000 records "
          "{'id', 'name', 'score', 'tags': [i]})" % format(n, ","))
    print("  ostore: build %.1f ms (%.1f ns/object), free %.1f ms (%.1f ns/object)"
          % (bns / 1e6, bns / n, fns / 1e6, fns / n))
    print("  Python, the same records: build %.1f ms, free %.1f ms"
          % (med(pg["build_ns"]) / 1e6, med(pg["free_ns"]) / 1e6))
    print()

    good = [CASES[i][1] for i in range(len(CASES)) if checks[CASES[i][0]]]
    bad = [CASES[i][1] for i in range(len(CASES)) if not checks[CASES[i][0]]]
    print("Sanity check: ostore's pickle of each case, loaded by Python's pickle, equals "
          "the Python data: %d/%d OK%s" % (len(good), len(CASES),
                                          "" if not bad else "; FAILED: " + ", ".join(bad)))
    print()
    print("Targets: %d PASS, %d MISS" % (npass, len(misses)))
    for m in misses:
        print("  MISS " + m)
    print()


if __name__ == "__main__":
    main()
