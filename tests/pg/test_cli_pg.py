"""The ostore tool on PostgreSQL addresses (issue 13), run under
tests/pg/pgserver.sh, which exports OST_TEST_PG and OST_TEST_PG_ADMIN:

  pgserver.sh python3 test_cli_pg.py OSTORE PSQL

- `ostore copy` across engines: a demo store in an LMDB directory copied
  LMDB -> PG -> LMDB and PG -> PG; `ostore export` of the original and of
  every copy are the same bytes (classes, records, entries, counters);
- `ostore import` of the LMDB store's export into a new database gives the
  same export;
- info, ls, cat and refs on a PG address print what they print on the LMDB
  original;
- salvage and upgrade refuse a database address, never showing its
  password.

Every command on a database alone (its output checked against the tables
read with psql, refusals, damage) is the business of the CLI suites run
on this engine: meson tests cli-pg and cli-maps-pg (tests/cli/).

Each copy goes into a database of its own, made with psql through
OST_TEST_PG_ADMIN.
"""
import os
import re
import subprocess
import sys
import tempfile

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "cli"))
import clilib  # noqa: E402
from clilib import check, fails, ok  # noqa: E402

PSQL = None


def new_db(name):
    """The address of a new, empty database NAME on the test server."""
    admin = os.environ["OST_TEST_PG_ADMIN"]
    subprocess.run([PSQL, "-q", "-X", "-v", "ON_ERROR_STOP=1", admin, "-c",
                    "CREATE DATABASE %s" % name], check=True, stdout=subprocess.DEVNULL)
    base = os.environ["OST_TEST_PG"]
    return re.sub(r"/ostore\?", "/%s?" % name, base, count=1)


def export(db, path):
    out = ok(["export", db, path], "export %s" % db)
    check(out.startswith("exported "), "export says what it wrote: %r" % out)
    with open(path, "rb") as f:
        return f.read()


def tests():
    tmp = tempfile.mkdtemp(prefix="ostore-cli-pg.")
    src = os.path.join(tmp, "demo.ostore")
    out = ok(["demo", src, "--objects", "3000", "--quiet"], "demo")
    want = export(src, os.path.join(tmp, "src.dump"))
    check(len(want) > 100000, "the demo's export has some size: %d" % len(want))

    # LMDB -> PG
    pg1 = new_db("copy1")
    out = ok(["copy", src, pg1], "copy LMDB -> PG")
    check(re.search(r"^copied [\d,]+ objects and [\d,]+ map entries from .* to postgresql://", out, re.M),
          "copy LMDB -> PG says what it copied: %r" % out)
    check("every reference resolves" in out, "copy to PG runs ost_store_check: %r" % out)
    out = ok(["check", pg1], "check of the PG copy")
    check("reachab" in out and "not counted" not in out, "check on PG counts reachability: %r" % out)
    check(export(pg1, os.path.join(tmp, "pg1.dump")) == want, "export of the PG copy = the original's")

    # PG -> LMDB: the final copy is the original, byte for byte
    back = os.path.join(tmp, "back.ostore")
    out = ok(["copy", pg1, back], "copy PG -> LMDB")
    check("every reference resolves" in out, "copy to LMDB runs ost_store_check: %r" % out)
    check(export(back, os.path.join(tmp, "back.dump")) == want,
          "LMDB -> PG -> LMDB: export of the final copy = the original's")
    ok(["check", back], "check of the round trip")

    # PG -> PG
    pg2 = new_db("copy2")
    ok(["copy", pg1, pg2], "copy PG -> PG")
    check(export(pg2, os.path.join(tmp, "pg2.dump")) == want, "export of PG -> PG = the original's")

    # import of the export into a new database
    pg3 = new_db("imported")
    out = ok(["import", pg3, os.path.join(tmp, "src.dump")], "import into PG")
    check(out.startswith("imported "), "import says what it did: %r" % out)
    check(export(pg3, os.path.join(tmp, "pg3.dump")) == want, "export of the PG import = the dump")

    # salvage and upgrade rewrite LMDB's files: a database is refused with
    # a clear message, and no message shows an address's password
    secret = "postgresql://u:s3cret@127.0.0.1:1/db?password=s3cret&connect_timeout=2"
    for args, needle in ((["salvage", secret, os.path.join(tmp, "salv")], "salvage reads and writes LMDB's files"),
                         (["salvage", src, secret], "salvage reads and writes LMDB's files"),
                         (["upgrade", secret], "upgrade rewrites an LMDB store's files"),
                         (["info", secret], "cannot connect")):
        _, err = fails(args, needle, "%s of a database" % args[0])
        check("s3cret" not in err and "postgresql://u@127.0.0.1:1/db" in err,
              "%s shows the address without its password: %r" % (args[0], err))

    # info, ls, cat, refs on the PG address, against the LMDB original
    info_pg, info_src = ok(["info", pg1], "info PG"), ok(["info", src], "info LMDB")
    check(re.search(r"^engine\s+postgresql$", info_pg, re.M), "info names the engine: %r" % info_pg)
    check(re.search(r"^engine\s+lmdb$", info_src, re.M), "info names LMDB: %r" % info_src)
    check("data.mdb" not in info_pg and "-byte pages" not in info_pg,
          "info on PG prints no LMDB file or map lines: %r" % info_pg)
    for key in ("objects", "next oid", "last commit", "classes", "maps"):
        a = re.search(r"^%s\s+(.*)$" % key, info_pg, re.M)
        b = re.search(r"^%s\s+(.*)$" % key, info_src, re.M)
        check(a and b and a.group(1).split(" (")[0] == b.group(1).split(" (")[0],
              "info %s: PG %r, LMDB %r" % (key, a and a.group(1), b and b.group(1)))
    ls_pg = ok(["ls", pg1, "--limit", "100000"], "ls PG")
    check(ls_pg == ok(["ls", src, "--limit", "100000"], "ls LMDB"), "ls on PG = ls on LMDB")
    check(ls_pg.startswith("0 persistent.mapping.PersistentMapping "), "ls starts at the root: %r" % ls_pg[:80])
    for args in (["cat", "0"], ["cat", "1"], ["refs", "0"]):
        a = ok([args[0], pg1] + args[1:], "%s PG" % " ".join(args))
        b = ok([args[0], src] + args[1:], "%s LMDB" % " ".join(args))
        check(a == b, "%s: PG %r, LMDB %r" % (" ".join(args), a[:200], b[:200]))


if __name__ == "__main__":
    if len(sys.argv) == 3:
        clilib.setup(sys.argv[1], None)
        PSQL = sys.argv[2]
    sys.exit(clilib.entry("test_cli_pg", 2, __doc__, tests))
