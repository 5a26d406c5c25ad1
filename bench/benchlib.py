"""Helpers shared by the benchmark drivers: plain-text tables and a line
that says which machine ran them."""
import json
import os
import platform


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
