"""Helpers shared by the benchmark drivers: plain-text tables, number
formats, a line that says which machine ran them, and the runner of a C
benchmark's commands (each in a fresh directory, printing JSON)."""
import json
import os
import platform
import shutil
import subprocess
import sys
import time


def progress(msg):
    print("  ... " + msg, file=sys.stderr, flush=True)


def num(x):
    if x is None:
        return "n/a"
    if x >= 100:
        return "{:,.0f}".format(x)
    if x >= 10:
        return "%.1f" % x
    return "%.2f" % x


def ratio(x):
    return "n/a" if x is None else ("%.1fx" % x if x >= 10 else "%.2fx" % x)


def loadavg():
    try:
        with open("/proc/loadavg") as f:
            return " ".join(f.read().split()[:3])
    except OSError:
        return "?"


class Runner:
    """Runs EXE CMD DIR ARGS... with DIR a fresh directory under tmp
    (removed afterwards); returns the JSON it printed, with its wall time
    as "wall". A failed command ends the driver with its stderr."""

    def __init__(self, exe, tmp, name):
        self.exe = exe
        self.tmp = tmp
        self.name = name
        self.n = 0

    def run(self, cmd, *args):
        self.n += 1
        d = os.path.join(self.tmp, "%s-%d" % (cmd, self.n))
        argv = [self.exe, cmd, d] + [str(a) for a in args]
        progress(" ".join(argv[1:]) + "   (load average %s)" % loadavg())
        t = time.time()
        try:
            p = subprocess.run(argv, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        finally:
            shutil.rmtree(d, ignore_errors=True)
        if p.returncode != 0:
            sys.exit("%s: %s failed (exit %d):\n%s" % (self.name, " ".join(argv), p.returncode,
                                                       p.stderr))
        res = json.loads(p.stdout)
        res["wall"] = time.time() - t
        return res


def row(cells, widths, aligns):
    out = []
    for c, w, a in zip(cells, widths, aligns):
        out.append(c.ljust(w) if a == "<" else c.rjust(w))
    return "  ".join(out).rstrip()


def table(title, header, rows, aligns):
    widths = [max(len(r[i]) for r in [header] + rows) for i in range(len(header))]
    print(title)
    print(row(header, widths, aligns))
    print(row(["-" * w for w in widths], widths, aligns))
    for r in rows:
        print(row(r, widths, aligns))
    print()


def machine_line():
    cpu = platform.processor() or "?"
    try:
        with open("/proc/cpuinfo") as f:
            for line in f:
                if line.startswith("model name"):
                    cpu = line.split(":", 1)[1].strip()
                    break
    except OSError:
        pass
    mem = ""
    try:
        with open("/proc/meminfo") as f:
            kb = int(f.readline().split()[1])
            mem = ", %.0f GiB RAM" % (kb / 2**20)
    except (OSError, ValueError, IndexError):
        pass
    return "%s, %d CPUs%s, Linux %s" % (cpu, os.cpu_count() or 0, mem, platform.release())


def buildtype(build):
    try:
        with open(os.path.join(build, "meson-info", "intro-buildoptions.json")) as f:
            for opt in json.load(f):
                if opt.get("name") == "buildtype":
                    return opt.get("value")
    except (OSError, ValueError):
        pass
    return None
