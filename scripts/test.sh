#!/bin/sh
# Sets up, builds and runs the whole test suite (meson test), then prints
# the totals as one line: "N passed, N failed".
set -eu
cd "$(dirname "$0")/.."
sh scripts/setup.sh
dir=${BUILD_DIR:-build}
[ -f "$dir/build.ninja" ] || meson setup "$dir" ${MESON_ARGS:-} >/dev/null
ninja -C "$dir" >/dev/null
set +e
meson test -C "$dir" --num-processes 2 --print-errorlogs
rc=$?
set -e
python3 - "$dir/meson-logs/testlog.json" <<'PY'
import json, sys
ok = bad = skip = 0
for line in open(sys.argv[1]):
    r = json.loads(line)["result"]
    if r in ("OK", "EXPECTEDFAIL"): ok += 1
    elif r == "SKIP": skip += 1
    else: bad += 1
print(f"{ok} passed, {bad} failed" + (f", {skip} skipped" if skip else ""))
PY
exit $rc
