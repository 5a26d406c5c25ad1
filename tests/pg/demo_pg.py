#!/usr/bin/python3
"""`ostore demo ADDR` on PostgreSQL (run under tests/pg/pgserver.sh, which
sets OST_TEST_PG): the main job on a server's store, small --objects; every
step prints and its counts match; a second run on the same store is refused
and leaves it as it was.

usage: demo_pg.py OSTORE"""
import os
import re
import subprocess
import sys


def run(args):
    p = subprocess.run(args, capture_output=True, text=True, timeout=600)
    return p.returncode, p.stdout, p.stderr


def main():
    ostore = sys.argv[1]
    addr = os.environ["OST_TEST_PG"]
    rc, out, err = run([ostore, "demo", addr, "--objects", "5000"])
    print(out, end="")
    if rc != 0:
        sys.exit("demo failed (%d): %s" % (rc, err))
    for word in ("load:", "walk:", "every count matches", "lookup:", "range:", "commits:",
                 "check:", "every reference resolves", "store:   PostgreSQL", "done in"):
        if word not in out:
            sys.exit("demo output lacks %r" % word)
    m = re.search(r"^check:\s+([\d,]+) records", out, re.M)
    records = int(m.group(1).replace(",", ""))
    m = re.search(r"^walk:\s+([\d,]+) objects", out, re.M)
    walked = int(m.group(1).replace(",", ""))
    if not (5000 <= walked < 5200):
        sys.exit("the walk visited %d objects" % walked)
    # a second demo on a store that holds something: refused, untouched
    rc, out2, err2 = run([ostore, "demo", addr, "--objects", "1000"])
    if rc != 1 or "holds a store of %d records already" % records not in err2:
        sys.exit("second demo: %d %r %r" % (rc, out2, err2))
    if "not touched" not in err2:
        sys.exit("second demo does not say the store was not touched: %r" % err2)
    # untouched: a third run finds the same count
    rc, out3, err3 = run([ostore, "demo", addr, "--objects", "1000", "--quiet"])
    if rc != 1 or out3 or "holds a store of %d records already" % records not in err3:
        sys.exit("third demo: %d %r %r" % (rc, out3, err3))
    print("demo on PostgreSQL: ok (%d records)" % records)


if __name__ == "__main__":
    main()
