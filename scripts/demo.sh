#!/bin/sh
# Sets up, builds and runs the main job. Until the store lands (issue 4),
# the main job is the serializer benchmark against Python's pickle.
set -eu
cd "$(dirname "$0")/.."
sh scripts/setup.sh
BUILD_DIR=build-release sh scripts/build.sh 2>/dev/null || { BUILD_DIR=build-release; meson setup build-release --buildtype=release >/dev/null; ninja -C build-release >/dev/null; }
exec /usr/bin/python3 bench/bench_pickle.py --build build-release "$@"
