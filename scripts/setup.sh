#!/bin/sh
# Installs what a fresh Debian 12 machine lacks to build, test and benchmark
# ostore, and to draw the benchmarks' charts (python3-matplotlib, for
# bench/charts.py). Run as root. Safe to run again.
set -eu
pkgs="build-essential g++ meson ninja-build pkg-config liblmdb-dev libuv1-dev
      libcriterion-dev libmsgpack-dev python3 python3-lmdb lmdb-utils
      clang libclang-rt-14-dev postgresql libpq-dev libsqlite3-dev
      python3-matplotlib"
missing=""
for p in $pkgs; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing="$missing $p"
done
if [ -n "$missing" ]; then
  echo "setup: installing$missing"
  export DEBIAN_FRONTEND=noninteractive
  apt-get update -qq
  # shellcheck disable=SC2086
  apt-get install -y -qq --no-install-recommends $missing >/dev/null
fi
