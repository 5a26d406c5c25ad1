#!/usr/bin/python3
"""The PostgreSQL engine's own input (issue 30, item 5): a database that
holds tables of ostore's names that are not ostore's. Run under
tests/pg/pgserver.sh (OST_TEST_PG, OST_TEST_PG_ADMIN):

  pgserver.sh python3 test_pg_schema.py OSTORE PSQL

Each case is a database of its own, made with psql; in each, every command
(import, copy, demo, which create a store when there is none, and info,
ls, which only read) must exit 1 with one line that names the address and
says what is wrong ("not an ostore schema: ..."), and leave the database
as it was: the same tables (read with psql), the foreign rows untouched.

- a lone foreign ost_records (no column serial): before the fix, import,
  copy and demo created the other four tables and failed with the raw SQL
  error 'column "serial" does not exist', leaving them behind;
- ostore's five tables with ost_meta.format an int holding 3: before, every
  command said "store format 12901679103" (the int's 4 bytes and 4 bytes
  past them);
- ostore's tables as ostore made them, then the primary key of ost_ments
  dropped: refused too, naming the missing key.

Takes 6 to 16 s (the machine's load), most of it making the 15 databases."""
import os
import re
import shutil
import subprocess
import sys
import tempfile

OSTORE = PSQL = None
FAILS = []


def check(cond, what):
    if not cond:
        FAILS.append(what)
        print("FAIL: %s" % what)


def run(args, timeout=120):
    p = subprocess.run(args, capture_output=True, text=True, timeout=timeout)
    return p.returncode, p.stdout, p.stderr


def psql(addr, sql):
    p = subprocess.run([PSQL, "-X", "-q", "-A", "-t", "-v", "ON_ERROR_STOP=1", addr, "-c", sql],
                       capture_output=True, text=True, check=True)
    return p.stdout.strip()


def new_db(name):
    """The address of a new, empty database NAME on the test server."""
    admin = os.environ["OST_TEST_PG_ADMIN"]
    psql(admin, "DROP DATABASE IF EXISTS %s" % name)
    psql(admin, "CREATE DATABASE %s" % name)
    return re.sub(r"/ostore\?", "/%s?" % name, os.environ["OST_TEST_PG"], count=1)


def tables(addr):
    return psql(addr, "SELECT coalesce(string_agg(tablename, ',' ORDER BY tablename), '') FROM "
                      "pg_tables WHERE schemaname = 'public'")


OSTORE_TABLES = (
    "CREATE TABLE ost_meta (id int PRIMARY KEY CHECK (id = 1), format %s NOT NULL, next_oid "
    "bigint NOT NULL, last_serial bigint NOT NULL, low bigint NOT NULL, next_class bigint NOT "
    "NULL); CREATE TABLE ost_records (oid bigint PRIMARY KEY, serial bigint NOT NULL, cid int NOT "
    "NULL, state bytea NOT NULL); CREATE TABLE ost_classes (id int PRIMARY KEY, module text NOT "
    "NULL, name text NOT NULL, UNIQUE (module, name)); CREATE TABLE ost_txlog (serial bigint "
    "PRIMARY KEY, oids bytea NOT NULL); CREATE TABLE ost_ments (map bigint NOT NULL, key bytea "
    "NOT NULL, serial bigint NOT NULL, value bytea NOT NULL, PRIMARY KEY (map, key)); INSERT "
    "INTO ost_meta VALUES (1, 3, 1, 0, 0, 1)")


def foreign_records(addr):
    psql(addr, "CREATE TABLE ost_records (oid bigint PRIMARY KEY, x int); "
               "INSERT INTO ost_records VALUES (1, 10), (2, 20)")


def int_format(addr):
    psql(addr, OSTORE_TABLES % "int")


def no_entry_key(addr):
    psql(addr, OSTORE_TABLES % "bigint")
    psql(addr, "ALTER TABLE ost_ments DROP CONSTRAINT ost_ments_pkey")


CASES = (
    ("foreign", foreign_records, "not an ostore schema: table ost_records has no column serial"),
    ("intformat", int_format, "not an ostore schema: column ost_meta.format is integer, ostore's is bigint"),
    ("nokey", no_entry_key, "not an ostore schema: table ost_ments has no primary key, ostore's is (map,key)"),
)


def main():
    global OSTORE, PSQL
    OSTORE, PSQL = sys.argv[1], sys.argv[2]
    tmp = tempfile.mkdtemp(prefix="ostore-pg-schema.")
    try:
        run_cases(tmp)
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    if FAILS:
        sys.exit("%d failures" % len(FAILS))
    print("test_pg_schema: ok")


def run_cases(tmp):
    src = os.path.join(tmp, "src.ostore")
    rc, _, err = run([OSTORE, "demo", src, "--objects", "1000", "--quiet"])
    if rc:
        sys.exit("demo of the source: %s" % err)
    dump = os.path.join(tmp, "src.dump")
    rc, _, err = run([OSTORE, "export", src, dump])
    if rc:
        sys.exit("export of the source: %s" % err)
    for name, make, needle in CASES:
        for args in (["import", "@", dump], ["copy", src, "@"], ["demo", "@", "--objects", "1000", "--quiet"],
                     ["info", "@"], ["ls", "@"]):
            db = new_db("schema_" + name)
            make(db)
            before = tables(db)
            rows = psql(db, "SELECT string_agg(oid::text, ',' ORDER BY oid) FROM ost_records")
            argv = [OSTORE] + [db if a == "@" else a for a in args]
            rc, out, err = run(argv)
            what = "%s on %s" % (args[0], name)
            check(rc == 1, "%s: exit %d (want 1): %r" % (what, rc, err))
            lines = err.strip().split("\n")
            check(len(lines) == 1, "%s: %d lines: %r" % (what, len(lines), err))
            check(needle in err, "%s: %r lacks %r" % (what, err, needle))
            check(db.split("?")[0] in err, "%s: the message does not name the address: %r" % (what, err))
            check("store format" not in err, "%s: a format read from a column not ostore's: %r" % (what, err))
            check(tables(db) == before, "%s: tables %s before, %s after" % (what, before, tables(db)))
            check(psql(db, "SELECT string_agg(oid::text, ',' ORDER BY oid) FROM ost_records") == rows,
                  "%s: the rows of ost_records changed" % what)
            print("%s: exit %d: %s" % (what, rc, err.strip()))
    format3(src)


def format3(src):
    """Store format 4 on PostgreSQL: a copy of an LMDB store carries its
    class versions (positional records) and checks clean; a format-3
    database (ost_meta.format set back to 3: format 3's rows are format
    4's) opens read-only as it is and is upgraded by a read-write open, by
    setting the format; a format this ostore does not know is refused."""
    db = new_db("fmt3")
    rc, out, err = run([OSTORE, "copy", src, db])
    check(rc == 0, "copy to PostgreSQL: %r" % err)
    check(psql(db, "SELECT count(*) FROM ost_classes WHERE name LIKE 'LineItem(%'") == "1",
          "the copy lacks the class version of shop.LineItem")
    rc, out, err = run([OSTORE, "check", db])
    check(rc == 0 and "no problems" in out, "check of the copy: %r %r" % (out, err))
    rc, out, err = run([OSTORE, "ls", db, "--class", "shop.LineItem", "--limit", "2"])
    check(rc == 0 and len(out.splitlines()) == 2, "ls --class of a class version's records: %r" % out)
    psql(db, "UPDATE ost_meta SET format = 3")
    rc, out, err = run([OSTORE, "info", db])
    check(rc == 0 and re.search(r"^format\s+3 ", out, re.M), "info of format 3: %r %r" % (out, err))
    check(psql(db, "SELECT format FROM ost_meta") == "3", "a read-only open changed the format")
    rc, out, err = run([OSTORE, "pack", db])
    check(rc == 0, "pack (a read-write open) of format 3: %r" % err)
    check(psql(db, "SELECT format FROM ost_meta") == "4", "a read-write open did not upgrade to 4")
    psql(db, "UPDATE ost_meta SET format = 5")
    rc, out, err = run([OSTORE, "info", db])
    check(rc == 1 and "store format 5, this library reads 3 to 4" in err, "format 5: %r" % err)
    print("format 3 and 4 on PostgreSQL: checked")


if __name__ == "__main__":
    main()
