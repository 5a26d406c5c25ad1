#!/bin/sh
# Configures (once) and builds ostore in ./build (or $BUILD_DIR).
set -eu
cd "$(dirname "$0")/.."
dir=${BUILD_DIR:-build}
[ -f "$dir/build.ninja" ] || meson setup "$dir" --buildtype=release >/dev/null
ninja -C "$dir" >/dev/null
