#!/usr/bin/python3
"""The library damage test (issue 30, item 4): damaged copies of a
20,000-object store read through the public API, each checked for signals
and for wrong answers given without an error.

It makes one store with `ostore demo DIR --objects 20000 --quiet`, maps
it with damage_map (where each record, map entry and live byte lies in
data.mdb), reads it with lib_reader (tests/damage/lib_reader.c: a
program on the public API only, which walks every record with an
iterator, gets every oid, and walks every map with a cursor, printing what
each call answered), and then runs TRIALS trials. Trial N damages a copy
one way, chosen in turn from KINDS, with a random generator seeded by
"SEED:N", runs lib_reader on it, and compares its answers with the
pristine store's. A trial fails when:

- lib_reader is killed by a signal, runs past its time limit, does not
  finish its output, or a sanitizer reports anything (a crash);
- an answer given without an error is wrong (a wrong answer): an object
  or map entry whose repr differs from the pristine one, or one the
  pristine store does not hold; a map count other than the pristine one;
  a get that says "no such object" for an oid whose record's key bytes
  were not touched;
- an iterator or cursor passes over records or entries without reporting
  them (a silent skip): between two answers, and from the start to the
  first or from the last to a normal end, every pristine record (entry)
  must be returned, or stand for by a report of damage next to the gap
  (each report stands for one: a damaged key reads as another oid), or the
  walk must have stopped with an error.

Errors are never failures: a damaged store may answer OST_ECORRUPT to
anything. The summary counts trials by outcome: same answers as the
pristine store, errors only, wrong answers, crashes.

Run by hand (from the source tree, after `ninja -C build`):

    /usr/bin/python3 tests/damage/lib_damage_test.py --cli build/tools/ostore \\
        --map build/tests/damage/damage_map --reader build/tests/damage/lib_reader \\
        [--trials 1000] [--seed 30] [--jobs 2] [--timeout 60] [--trial N ...] \\
        [--kind KIND ...] [--store DIR] [--keep DIR] [-v]

Defaults: the trial count of --default-trials (meson passes it: see
tests/damage/meson.build), else 1,000 (the long mode); seed 30; 2
workers; 60 s per reader run. The environment can set them:
LIBDAMAGE_TRIALS (1000 for the long mode), LIBDAMAGE_SEED (a number or
"random", which draws one and prints it), LIBDAMAGE_JOBS,
LIBDAMAGE_TIMEOUT; arguments win. --store DIR --seed S --trial N runs
trial N again on the same pristine store byte for byte (`ostore demo` does
not make the same file twice). --keep DIR keeps the pristine store and
each failed trial's data.mdb there.
"""
import argparse
import multiprocessing
import os
import random
import shutil
import signal
import subprocess
import sys
import tempfile
import time

KINDS = [
    "anywhere",     # 1-4 bytes anywhere in data.mdb (the trials)
    "live",         # 1-4 bytes the snapshot depends on (structure, keys, values)
    "struct",       # 1-4 bytes of page headers, node pointers and node headers
    "node-flags",   # a records or mapents leaf node's flags byte set to a random value
    "entry-key",    # 1-2 bytes of a map entry's key (its map oid, or the key after it)
    "record-key",   # 1-2 bytes of a record's key (its oid)
    "leaf-page",    # 1-4 bytes anywhere in one leaf page of records or mapents
]
SANITIZER_MARKS = ("Sanitizer", "runtime error:", "==ERROR", "LeakSanitizer")

G = None  # the pristine store, its map and answers, set before the workers fork


# ---- the pristine store's map ------------------------------------------------------------

class StoreMap:
    """damage_map's output: page kinds, records, entries, live bytes."""

    def __init__(self, text):
        self.pages = {}
        self.recs = {}        # oid -> (koff, klen, noff, pgno)
        self.ents = []        # (map, koff, klen, noff, pgno)
        self.live = {"struct": [], "key": [], "data": [], "meta": []}
        for line in text.splitlines():
            f = line.split()
            if not f:
                continue
            if f[0] == "psize":
                self.psize = int(f[1])
            elif f[0] == "filesize":
                self.filesize = int(f[1])
            elif f[0] == "page":
                self.pages[int(f[1])] = (f[2], f[3])
            elif f[0] == "rec":
                self.recs[int(f[1])] = (int(f[4]), int(f[5]), int(f[6]), int(f[7]))
            elif f[0] == "ent":
                self.ents.append((int(f[1]), int(f[5]), int(f[6]), int(f[7]), int(f[8])))
            elif f[0] == "live":
                self.live[f[3]].append((int(f[1]), int(f[2])))
        self.leaves = sorted(p for p, (k, db) in self.pages.items()
                             if k == "leaf" and db in ("records", "mapents"))
        self.live_all = self.live["struct"] + self.live["key"] + self.live["data"] + self.live["meta"]

    def pick_live(self, rng, ranges, n):
        total = sum(ln for _, ln in ranges)
        out = []
        for _ in range(n):
            r = rng.randrange(total)
            for off, ln in ranges:
                if r < ln:
                    out.append(off + r)
                    break
                r -= ln
        return out


def make_damage(rng, kind, m, data):
    """Changes bytes of data (a bytearray) one way: (offsets, description)."""
    n = rng.randint(1, 4)
    if kind == "anywhere":
        offs = [rng.randrange(len(data)) for _ in range(n)]
    elif kind == "live":
        offs = m.pick_live(rng, m.live_all, n)
    elif kind == "struct":
        offs = m.pick_live(rng, m.live["struct"], n)
    elif kind == "node-flags":
        # mn_flags is the u16 at 4 in the node header; liblmdb reads its
        # low byte for F_BIGDATA, F_SUBDATA and F_DUPDATA
        if rng.random() < 0.5:
            oid = rng.choice(sorted(m.recs))
            noff = m.recs[oid][2]
            what = "record %d" % oid
        else:
            e = rng.choice(m.ents)
            noff = e[3]
            what = "an entry of map %d" % e[0]
        off = noff + 4
        v = rng.choice([0xf7, 0x02, 0x04, 0x06, 0x01, rng.randrange(1, 256)])
        old = data[off]
        data[off] = v if v != old else (v ^ 0xff)
        return [off], "node-flags: %s's flags byte at %d: 0x%02x -> 0x%02x" % (what, off, old, data[off])
    elif kind == "entry-key":
        e = rng.choice(m.ents)
        k = rng.randint(1, 2)
        offs = [e[1] + (rng.randrange(8) if rng.random() < 0.7 else rng.randrange(e[2]))
                for _ in range(k)]
    elif kind == "record-key":
        oid = rng.choice(sorted(m.recs))
        koff = m.recs[oid][0]
        offs = [koff + rng.randrange(8) for _ in range(rng.randint(1, 2))]
    elif kind == "leaf-page":
        pg = rng.choice(m.leaves)
        offs = [pg * m.psize + rng.randrange(m.psize) for _ in range(n)]
    else:
        raise ValueError(kind)
    changed = []
    for off in offs:
        old = data[off]
        data[off] = old ^ rng.randrange(1, 256)
        changed.append(off)
    return changed, "%s: bytes at %s" % (kind, ", ".join(map(str, sorted(set(changed)))))


# ---- the reader's answers -------------------------------------------------------------------

def run_reader(store, max_oid, timeout):
    """lib_reader's output lines, or (None, why) when it crashed."""
    env = dict(os.environ)
    try:
        p = subprocess.run([G["reader"], store, str(max_oid)], stdout=subprocess.PIPE,
                           stderr=subprocess.PIPE, timeout=timeout, env=env)
    except subprocess.TimeoutExpired:
        return None, "ran past its time limit of %d s" % timeout
    err = p.stderr.decode("utf-8", "replace")
    if p.returncode < 0:
        return None, "killed by signal %s; stderr: %s" % (signal.Signals(-p.returncode).name, err[-600:])
    if any(mk in err for mk in SANITIZER_MARKS):
        return None, "sanitizer report: %s" % err[-1500:]
    out = p.stdout.decode("utf-8", "replace").splitlines()
    if p.returncode != 0 or not out or out[-1] != "done":
        return None, "exit %d without finishing; stderr: %s" % (p.returncode, err[-600:])
    return out, None


def parse(lines):
    """The answers: iterator items [(oid, status, hash)] and how the walk
    ended; gets {oid: (status, hash)}; maps {map: {len, ents, end}}."""
    a = {"open": None, "iter": [], "iterend": None, "get": {}, "maps": {}, "msgs": []}
    for line in lines:
        f = line.split(" ", 4)
        t = f[0]
        if t == "msg":
            a["msgs"].append(line[4:])
        elif t in ("open", "conn"):
            a["open"] = f[2]
        elif t == "iter":
            a["iter"].append((int(f[1]), f[2], f[3] if len(f) > 3 else None))
        elif t == "iterend":
            a["iterend"] = "end"
        elif t == "iterstop":
            a["iterend"] = "stop"
        elif t == "get":
            a["get"][int(f[1])] = (f[2], f[3] if len(f) > 3 else None)
        elif t in ("map", "ent", "entend", "entstop"):
            mo = int(f[1])
            mp = a["maps"].setdefault(mo, {"len": None, "ents": [], "end": None})
            if t == "map":
                mp["len"] = int(f[3]) if f[2] == "len" else f[2]
            elif t == "ent":
                mp["ents"].append((f[2], (f[3], f[4]) if f[2] == "ok" else None))
            else:
                mp["end"] = "end" if t == "entend" else "stop"
    return a


def walk_problems(items, pristine, ended):
    """The wrong answers of one walk (an iterator's or a cursor's): items
    [(key, ok, value)] in walk order (key None for a report of damage that
    names nothing), pristine [(key, value)] in order, ended "end" or
    "stop". Returns a list of problems (empty: no wrong answer)."""
    probs = []
    index = {k: i for i, (k, _) in enumerate(pristine)}
    pval = dict(pristine)
    # each reported damage may stand for one missing item next to it
    last = -1          # pristine index of the last item placed
    credit = 0         # damage reports not yet used
    missing_run = 0    # pristine items missing since the last placed one
    for key, ok, val in items:
        if not ok:
            credit += 1
            continue
        if key not in index:
            probs.append("returned %s, which the pristine store does not hold" % (key,))
            continue
        if val != pval[key]:
            probs.append("returned %s with another value than the pristine store's" % (key,))
        i = index[key]
        if i <= last:
            probs.append("returned %s out of order" % (key,))
            continue
        gap = i - last - 1
        if gap > credit:
            probs.append("passed over %d items before %s with %d damage reports (silent skip)"
                         % (gap, key, credit))
        credit = 0
        last = i
    if ended == "end":
        gap = len(pristine) - last - 1
        if gap > credit:
            probs.append("ended normally with %d items after the last one returned "
                         "(%d damage reports)" % (gap, credit))
    return probs


def compare(a, m, changed):
    """The wrong answers of damaged answers a against the pristine ones."""
    p = G["answers"]
    probs = []
    if a["open"]:
        return probs
    # the iterator: items are (oid, ok, hash); damaged and err are reports
    items = []
    for oid, status, h in a["iter"]:
        items.append((oid, status == "ok", h))
    pr = [(oid, h) for oid, status, h in p["iter"]]
    probs += ["iterator: " + x for x in walk_problems(items, pr, a["iterend"])]
    # gets
    changed_set = set(changed)
    for oid, (status, h) in a["get"].items():
        ps, ph = p["get"].get(oid, ("notfound", None))
        if status == "ok":
            if ps != "ok" or ph != h:
                probs.append("get %d: returned an object %s" % (
                    oid, "the pristine store does not hold" if ps != "ok" else "with another state"))
        elif status == "notfound" and ps == "ok":
            koff = m.recs[oid][0] if oid in m.recs else None
            if koff is None or not any(koff <= c < koff + 8 for c in changed_set):
                probs.append("get %d: no such object, though its key was not touched" % oid)
    # maps
    for mo, mp in a["maps"].items():
        pm = p["maps"].get(mo)
        if pm is None:
            probs.append("map %d: not a map in the pristine store" % mo)
            continue
        if isinstance(mp["len"], int) and mp["len"] != pm["len"]:
            probs.append("map %d: ost_map_len said %d, the pristine count is %d"
                         % (mo, mp["len"], pm["len"]))
        items = [(val, True, val) if st == "ok" else (None, False, None) for st, val in mp["ents"]]
        pr = [(val, val) for st, val in pm["ents"]]
        probs += ["map %d cursor: %s" % (mo, x) for x in walk_problems(items, pr, mp["end"])]
    return probs


# ---- trials ----------------------------------------------------------------------------------

def run_trial(n):
    kind = G["kinds"][n % len(G["kinds"])]
    rng = random.Random("%s:%d" % (G["seed"], n))
    work = tempfile.mkdtemp(prefix="libdmg-%d-" % n, dir=G["tmp"])
    try:
        data = bytearray(G["data"])
        changed, desc = make_damage(rng, kind, G["map"], data)
        with open(os.path.join(work, "data.mdb"), "wb") as f:
            f.write(data)
        t0 = time.time()
        lines, why = run_reader(work, G["max_oid"], G["timeout"])
        secs = time.time() - t0
        if lines is None:
            outcome, probs = "crash", [why]
        else:
            a = parse(lines)
            probs = compare(a, G["map"], changed)
            if probs:
                outcome = "wrong"
            elif a["open"]:
                outcome = "refused"
            else:
                errs = len(a["msgs"])
                outcome = "errors" if errs else "same"
            if outcome == "wrong" and a["msgs"]:
                probs.append("messages: " + " | ".join(a["msgs"][:3]))
        if outcome in ("crash", "wrong") and G["keep"]:
            dst = os.path.join(G["keep"], "trial-%d" % n)
            os.makedirs(dst, exist_ok=True)
            shutil.copy(os.path.join(work, "data.mdb"), dst)
        return {"n": n, "kind": kind, "desc": desc, "outcome": outcome, "probs": probs, "secs": secs}
    finally:
        shutil.rmtree(work, ignore_errors=True)


def run_trial_safe(n):
    try:
        return run_trial(n)
    except Exception as e:  # a bug of the harness is a failure too
        import traceback
        return {"n": n, "kind": "?", "desc": "harness error", "outcome": "crash",
                "probs": [traceback.format_exc()], "secs": 0}


def env_int(name, default):
    v = os.environ.get(name)
    return int(v) if v else default


def main():
    global G
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--cli", default=os.environ.get("OSTORE_CLI"))
    ap.add_argument("--map", default=os.environ.get("DAMAGE_MAP"))
    ap.add_argument("--reader", default=os.environ.get("LIB_READER"))
    ap.add_argument("--trials", type=int)
    ap.add_argument("--default-trials", type=int, default=1000)
    ap.add_argument("--seed")
    ap.add_argument("--jobs", type=int)
    ap.add_argument("--timeout", type=int)
    ap.add_argument("--objects", type=int, default=20000)
    ap.add_argument("--trial", type=int, action="append")
    ap.add_argument("--kind", action="append", choices=KINDS)
    ap.add_argument("--store")
    ap.add_argument("--keep")
    ap.add_argument("-v", action="store_true")
    a = ap.parse_args()
    trials = a.trials or env_int("LIBDAMAGE_TRIALS", a.default_trials)
    seed = a.seed or os.environ.get("LIBDAMAGE_SEED") or "30"
    if seed == "random":
        seed = str(random.SystemRandom().randrange(1 << 32))
    jobs = a.jobs or env_int("LIBDAMAGE_JOBS", 2)
    timeout = a.timeout or env_int("LIBDAMAGE_TIMEOUT", 60)
    t_start = time.time()
    tmp = tempfile.mkdtemp(prefix="libdamage-")
    try:
        store = a.store
        if a.keep:
            os.makedirs(a.keep, exist_ok=True)
        if not store:
            store = os.path.join(a.keep or tmp, "pristine")
            p = subprocess.run([a.cli, "demo", store, "--objects", str(a.objects), "--quiet"],
                               stdout=subprocess.PIPE, stderr=subprocess.PIPE)
            if p.returncode:
                print("ostore demo failed: %s" % p.stderr.decode()[-500:])
                return 1
        mp = subprocess.run([a.map, store], stdout=subprocess.PIPE, stderr=subprocess.PIPE)
        if mp.returncode:
            print("damage_map failed: %s" % mp.stderr.decode()[-500:])
            return 1
        smap = StoreMap(mp.stdout.decode())
        with open(os.path.join(store, "data.mdb"), "rb") as f:
            data = f.read()
        G = {"reader": a.reader, "timeout": timeout, "map": smap, "data": data, "seed": seed,
             "kinds": a.kind or KINDS, "tmp": tmp, "keep": a.keep, "max_oid": 0}
        # the pristine answers: every oid the store holds, and a few past it
        lines, why = run_reader(store, 0, timeout)
        if lines is None:
            print("lib_reader failed on the pristine store: %s" % why)
            return 1
        first = parse(lines)
        G["max_oid"] = max(oid for oid, _, _ in first["iter"]) + 3
        lines, why = run_reader(store, G["max_oid"], timeout)
        if lines is None:
            print("lib_reader failed on the pristine store: %s" % why)
            return 1
        G["answers"] = parse(lines)
        pa = G["answers"]
        if pa["msgs"] or pa["iterend"] != "end":
            print("the pristine store does not read back cleanly: %s" % pa["msgs"][:3])
            return 1
        nents = sum(len(m["ents"]) for m in pa["maps"].values())
        todo = a.trial or list(range(trials))
        print("library damage test: seed %s, %d trials, %d jobs; pristine store: %d records, "
              "%d maps, %d entries, %d bytes" % (seed, len(todo), jobs, len(pa["iter"]),
                                                 len(pa["maps"]), nents, len(data)), flush=True)
        counts = {}
        bad = []
        with multiprocessing.Pool(jobs) as pool:
            for r in pool.imap_unordered(run_trial_safe, todo):
                counts[r["outcome"]] = counts.get(r["outcome"], 0) + 1
                if a.v or r["outcome"] in ("crash", "wrong"):
                    print("trial %d (%s, %.2f s): %s: %s" % (r["n"], r["kind"], r["secs"],
                                                            r["outcome"], r["desc"]), flush=True)
                    for pb in r["probs"][:8]:
                        print("    " + pb, flush=True)
                if r["outcome"] in ("crash", "wrong"):
                    bad.append(r["n"])
        el = time.time() - t_start
        print("%d trials in %.0f s: %s" % (len(todo), el, ", ".join(
            "%s %d" % (k, counts.get(k, 0)) for k in ("same", "errors", "refused", "wrong", "crash"))))
        if bad:
            print("FAILED trials (rerun one with --store DIR --seed %s --trial N): %s"
                  % (seed, " ".join(map(str, sorted(bad)))))
            if a.keep:
                print("the pristine store is in %s/pristine" % a.keep)
            return 1
        print("PASS: no signal and no wrong answer without an error")
        return 0
    finally:
        shutil.rmtree(tmp, ignore_errors=True)


if __name__ == "__main__":
    sys.exit(main())
