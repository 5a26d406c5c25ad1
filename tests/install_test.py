#!/usr/bin/python3
"""Installs a build into a temporary directory (meson install --destdir)
and builds a program against it the ways docs/tutorial.md ("Building a
program") says: with pkg-config and an rpath, and statically with
ostore-static.pc and with 'pkg-config --static ostore'. The program opens
a store (creating it), commits, closes, opens it again, reads what it
committed and closes; each build of it must run. It then opens a
PostgreSQL address: a dynamic program of a build with the engine tries
to connect (port 1: refused), a static program says it was linked
without the engine (OST_EUNSUPPORTED), and so does any program of a
build without it. Also: the plain build's binary needs libostore.so.0
(what the rpath or ldconfig is for); 'pkg-config --cflags ostore' works
with no libpq.pc to be found (libpq-dev not installed); the static
program holds no libpq symbol.

Usage: install_test.py BUILD_DIR [SANITIZE [pg|nopg [SOURCE_DIR]]]:
SANITIZE is the build's b_sanitize (the installed library of an ASan
build needs the program built with the same -fsanitize, and cannot be
linked statically); pg says the build has the PostgreSQL engine. With
SOURCE_DIR, a build with the engine also configures and builds a second
build without it (-Dpostgresql=disabled, library and CLI only, about
40 s on 2 cores) and runs the same on it, so the one test covers both;
OSTORE_INSTALL_TEST_SECOND=0 skips that (and it is skipped under a
sanitizer, where nothing is linked statically)."""
import glob
import os
import subprocess
import sys
import tempfile

build = sys.argv[1]
sanitize = sys.argv[2] if len(sys.argv) > 2 and sys.argv[2] not in ("", "none") else None
with_pg = len(sys.argv) > 3 and sys.argv[3] == "pg"
source = sys.argv[4] if len(sys.argv) > 4 else None
san_flags = ["-fsanitize=" + sanitize] if sanitize else []
PG_ADDR = "postgresql://127.0.0.1:1/ostore_install_test"
PROG = r'''
#include <ostore.h>
#include <stdio.h>
#include <string.h>

/* Opens (creating) the store at argv[1], commits a string under the root,
 * closes; opens it again, reads the string back, closes. With argv[2],
 * also opens that address and prints what the open says (a PostgreSQL
 * address in a program linked without the engine). */
static int fail(const char *what, const char *msg) {
    fprintf(stderr, "%s: %s\n", what, msg);
    return 1;
}

int main(int argc, char **argv) {
    if (argc < 2) return fail("usage", "prog DIR [ADDRESS]");
    ost_store_options o;
    ost_store_options_init(&o);
    o.create = true;
    ost_store *st = ost_store_new();
    ost_conn *c = NULL;
    if (ost_store_open(st, argv[1], &o)) return fail("open", ost_store_errmsg(st));
    if (ost_conn_open(st, &c)) return fail("connection", ost_store_errmsg(st));
    if (ost_root_set_c(c, "greeting", ost_str_c("installed")) || ost_commit(c))
        return fail("commit", ost_conn_errmsg(c));
    ost_conn_close(c);
    ost_store_close(st);
    o.create = false;
    st = ost_store_new();
    if (ost_store_open(st, argv[1], &o)) return fail("reopen", ost_store_errmsg(st));
    if (ost_conn_open(st, &c)) return fail("connection", ost_store_errmsg(st));
    ost_value v = ost_root_get_c(c, "greeting");
    if (!v) return fail("read", ost_conn_errmsg(c));
    ost_buf b = {0};
    ost_repr(v, &b);
    printf("%s %s\n", ost_version_string(), b.data);
    ost_buf_free(&b);
    ost_conn_close(c);
    ost_store_close(st);
    if (argc > 2) {
        st = ost_store_new();
        int rc = ost_store_open(st, argv[2], &o);
        printf("%s: %s\n", ost_err_name(rc), rc ? ost_store_errmsg(st) : "opened");
        ost_store_close(st);
    }
    return 0;
}
'''


def check_build(build, with_pg, tmp):
    """Installs build into tmp and builds and runs the program against it."""
    dest = os.path.join(tmp, "dest")
    subprocess.run(["meson", "install", "-C", build, "--destdir", dest, "--no-rebuild",
                    "--quiet"], check=True)
    pcs = glob.glob(dest + "/**/pkgconfig/ostore.pc", recursive=True)
    assert len(pcs) == 1, pcs
    pcdir = os.path.dirname(pcs[0])
    libdir = os.path.dirname(pcdir)
    env = dict(os.environ, PKG_CONFIG_PATH=pcdir, PKG_CONFIG_SYSROOT_DIR=dest)
    src = os.path.join(tmp, "prog.c")
    open(src, "w").write(PROG)
    n = [0]

    def pc(*args, environ=env):
        return subprocess.run(["pkg-config", *args], env=environ, check=True,
                              capture_output=True, text=True).stdout.split()

    def build_run(name, flags, static):
        exe = os.path.join(tmp, name)
        p = subprocess.run(["cc", src, "-o", exe, *san_flags, *flags], capture_output=True,
                           text=True)
        assert p.returncode == 0, (name, "does not build", " ".join(flags), p.stderr[-3000:])
        n[0] += 1
        store = os.path.join(tmp, "store%d" % n[0])
        out = subprocess.run([exe, store, PG_ADDR], capture_output=True, text=True, timeout=60)
        assert out.returncode == 0, (name, out.stdout, out.stderr)
        lines = out.stdout.strip().split("\n")
        assert lines[0].endswith("'installed'"), out.stdout
        assert os.path.exists(os.path.join(store, "data.mdb")), os.listdir(store)
        # the PostgreSQL address: tried, or refused for want of the engine
        if with_pg and not static:
            assert "without the PostgreSQL engine" not in lines[1] and \
                not lines[1].startswith("OST_OK"), (name, lines[1])
        elif with_pg:
            assert lines[1].startswith("OST_EUNSUPPORTED: ") and \
                "linked without the PostgreSQL engine" in lines[1], (name, lines[1])
        else:
            assert lines[1].startswith("OST_EUNSUPPORTED: ") and \
                "built without the PostgreSQL engine" in lines[1], (name, lines[1])
        print(name, "ok:", " | ".join(lines))
        return exe

    flags = pc("--cflags", "--libs", "ostore")
    build_run("rpath", flags + ["-Wl,-rpath," + libdir], False)
    plain = os.path.join(tmp, "plain")
    subprocess.run(["cc", src, "-o", plain, *san_flags, *flags], check=True)
    needed = subprocess.run(["readelf", "-d", plain], capture_output=True, text=True).stdout
    assert "libostore.so.0" in needed, needed
    # the flags need no libpq.pc (libpq-dev): a pkg-config search path with
    # every .pc the system has but libpq's
    nopq = os.path.join(tmp, "nopq")
    os.mkdir(nopq)
    sysdirs = pc("--variable=pc_path", "pkg-config")[0].split(":")
    for d in sysdirs:
        for f in glob.glob(os.path.join(d, "*.pc")):
            if os.path.basename(f) != "libpq.pc" and not os.path.exists(
                    os.path.join(nopq, os.path.basename(f))):
                os.symlink(f, os.path.join(nopq, os.path.basename(f)))
    noenv = dict(env, PKG_CONFIG_LIBDIR=pcdir + ":" + nopq)
    noenv.pop("PKG_CONFIG_PATH")
    assert pc("--cflags", "ostore", environ=noenv) == pc("--cflags", "ostore")
    static_flags = pc("--static", "--libs", "ostore", environ=noenv)
    assert not any(f in static_flags for f in ("-lpq", "-lpgcommon", "-lpgport",
                                                "-lgssapi_krb5", "-luv")), static_flags
    if sanitize:
        print("a -fsanitize=%s build: static link not tried" % sanitize)
        return
    assert os.path.exists(os.path.join(pcdir, "ostore-static.pc")), \
        "no ostore-static.pc (libuv-static.pc not found at setup)"
    for name, fl in (("static", pc("--static", "--cflags", "--libs", "ostore-static")),
                     ("static-ostore.pc", pc("--static", "--cflags", "--libs", "ostore"))):
        exe = build_run(name, ["-static"] + fl, True)
        syms = subprocess.run(["nm", exe], capture_output=True, text=True).stdout
        assert " PQconnectdb" not in syms and "ost__pg_engine" not in syms.replace(
            "U ost__pg_engine", ""), name + ": the static program holds the PostgreSQL engine"


with tempfile.TemporaryDirectory() as tmp:
    print("== %s (%s)" % (build, "with the PostgreSQL engine" if with_pg else "without it"))
    os.mkdir(os.path.join(tmp, "a"))
    check_build(build, with_pg, os.path.join(tmp, "a"))
    if with_pg and source and not sanitize and \
            os.environ.get("OSTORE_INSTALL_TEST_SECOND", "1") != "0":
        second = os.path.join(tmp, "build-nopg")
        subprocess.run(["meson", "setup", second, source, "-Dpostgresql=disabled",
                        "-Dtests=disabled", "--buildtype=debugoptimized"], check=True,
                       capture_output=True)
        subprocess.run(["meson", "compile", "-C", second, "-j", "2", "ostore:shared_library",
                        "ostore:static_library", "tools/ostore:executable"], check=True,
                       capture_output=True)
        print("== %s (without the PostgreSQL engine)" % second)
        os.mkdir(os.path.join(tmp, "b"))
        check_build(second, False, os.path.join(tmp, "b"))
print("install: ok")
