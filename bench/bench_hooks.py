#!/usr/bin/python3
"""persistent_id cost: ostore's instance-only hook against Python's pickle.

Dumps one graph of 1,000,000 heap objects (1% instances) with no hook, with
a hook that sees only instances (ostore's default scope), with a hook that
sees every object (ostore scope "all", and Python's Pickler.persistent_id,
which Python calls for every object, ints included). Usage:
  /usr/bin/python3 bench/bench_hooks.py --build BUILD_DIR [--reps N]
"""
import argparse
import io
import os
import pickle
import statistics
import subprocess
import sys
import time


class Item:
    pass


def build(groups):
    root = []
    for g in range(groups):
        for k in range(33):
            i = g * 100 + k
            root.append((i, k))
            root.append("s%d" % i)
            root.append(i * 0.5)
        it = Item()
        it.x = g
        root.append(it)
    return root


class Counting(pickle.Pickler):
    calls = 0

    def persistent_id(self, obj):
        Counting.calls += 1
        return None


def py_time(graph, hooked, reps):
    times = []
    for _ in range(reps):
        Counting.calls = 0
        buf = io.BytesIO()
        p = Counting(buf, 4) if hooked else pickle.Pickler(buf, 4)
        t0 = time.perf_counter()
        p.dump(graph)
        times.append(time.perf_counter() - t0)
    return statistics.median(times), Counting.calls if hooked else 0, len(buf.getvalue())


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--build", default="build")
    ap.add_argument("--reps", type=int, default=7)
    ap.add_argument("--groups", type=int, default=10000)
    a = ap.parse_args()
    exe = os.path.join(a.build, "bench", "bench_hooks")
    out = subprocess.run([exe, str(a.reps), str(a.groups)], check=True,
                         capture_output=True, text=True).stdout
    ost = {}
    for line in out.split("\n"):
        if line:
            name, t, calls, size = line.split()
            ost[name] = (float(t), int(calls), int(size))
    sys.modules["bench"] = sys.modules[__name__]
    Item.__module__ = "bench"
    graph = build(a.groups)
    py_plain = py_time(graph, False, a.reps)
    py_hook = py_time(graph, True, a.reps)
    n = a.groups * 100
    print("persistent_id benchmark: %d heap objects, %d instances (1%%), protocol 4, median of %d"
          % (n, a.groups, a.reps))
    print("%-34s %10s %12s %10s" % ("case", "dump ms", "hook calls", "vs no hook"))
    base = ost["none"][0]
    for name, label in (("none", "ostore, no hook"), ("instances", "ostore, hook scope instances"),
                        ("all", "ostore, hook scope all")):
        t, calls, _ = ost[name]
        print("%-34s %10.1f %12d %9.2fx" % (label, t * 1e3, calls, t / base))
    print("%-34s %10.1f %12d %9.2fx" % ("Python pickle, no hook", py_plain[0] * 1e3, 0, 1.0))
    print("%-34s %10.1f %12d %9.2fx" % ("Python pickle, persistent_id", py_hook[0] * 1e3,
                                         py_hook[1], py_hook[0] / py_plain[0]))
    over = ost["instances"][0] / base - 1
    ok_calls = ost["instances"][1] == a.groups
    print("target: scope instances costs at most 5%% over no hook: %+.1f%% %s"
          % (over * 100, "PASS" if over <= 0.05 else "MISS"))
    print("target: calls equal the distinct instances (%d): %d %s"
          % (a.groups, ost["instances"][1], "PASS" if ok_calls else "MISS"))
    print("ostore scope instances vs Python with persistent_id: %.1fx faster"
          % (py_hook[0] / ost["instances"][0]))


if __name__ == "__main__":
    main()
