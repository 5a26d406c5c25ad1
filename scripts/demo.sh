#!/bin/sh
# Sets up, builds (release, in build-release) and runs the main job:
# `ostore demo` in the working directory, which bulk-loads about a million
# objects into ./demo.ostore, walks and checks them, runs concurrent
# commits and prints the rates. Arguments go to `ostore demo` (for example
# --objects 200000, or another directory).
set -eu
here=$(pwd)
root=$(cd "$(dirname "$0")/.." && pwd)
cd "$root"
sh scripts/setup.sh
if [ ! -f build-release/build.ninja ]; then
  meson setup build-release --buildtype=release >/dev/null
fi
ninja -C build-release >/dev/null
cd "$here"
exec "$root/build-release/tools/ostore" demo "$@"
