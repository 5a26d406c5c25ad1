#!/usr/bin/python3
"""Installs the build into a temporary directory (meson install --destdir)
and builds a program against it the three ways docs/tutorial.md
("Building a program") says: with pkg-config and an rpath, and statically
with ostore-static.pc; each must run. Also checks that the plain build's
binary needs libostore.so.0 (what the rpath or ldconfig is for), and that
pkg-config --static works for the shared library's .pc.
Usage: install_test.py BUILD_DIR [SANITIZE]: SANITIZE is the build's
b_sanitize (the installed library of an ASan build needs the program built
with the same -fsanitize, and cannot be linked statically)."""
import glob
import os
import subprocess
import sys
import tempfile

build = sys.argv[1]
sanitize = sys.argv[2] if len(sys.argv) > 2 and sys.argv[2] not in ("", "none") else None
san_flags = ["-fsanitize=" + sanitize] if sanitize else []
PROG = r'''
#include <ostore.h>
#include <stdio.h>
int main(void) {
    ost_value v = ost_str_c("installed");
    ost_buf b = {0};
    ost_repr(v, &b);
    printf("%s %s\n", ost_version_string(), b.data);
    ost_buf_free(&b);
    ost_decref(v);
    return 0;
}
'''
with tempfile.TemporaryDirectory() as tmp:
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

    def pc(*args):
        return subprocess.run(["pkg-config", *args], env=env, check=True,
                              capture_output=True, text=True).stdout.split()

    def build_run(name, flags):
        exe = os.path.join(tmp, name)
        subprocess.run(["cc", src, "-o", exe, *san_flags, *flags], check=True, capture_output=True)
        out = subprocess.run([exe], capture_output=True, text=True)
        assert out.returncode == 0, (name, out.stderr)
        assert out.stdout.strip().endswith("'installed'"), out.stdout
        print(name, "ok:", out.stdout.strip())
        return exe

    flags = pc("--cflags", "--libs", "ostore")
    exe = build_run("rpath", flags + ["-Wl,-rpath," + libdir])
    plain = os.path.join(tmp, "plain")
    subprocess.run(["cc", src, "-o", plain, *san_flags, *flags], check=True)
    needed = subprocess.run(["readelf", "-d", plain], capture_output=True, text=True).stdout
    assert "libostore.so.0" in needed, needed
    pc("--static", "--libs", "ostore")  # must not fail
    if sanitize:
        print("a -fsanitize=%s build: static link not tried" % sanitize)
    elif os.path.exists(os.path.join(pcdir, "ostore-static.pc")):
        build_run("static", ["-static"] + pc("--static", "--cflags", "--libs", "ostore-static"))
    else:
        print("no ostore-static.pc (libuv-static not found): static link not tried")
print("install: ok")
