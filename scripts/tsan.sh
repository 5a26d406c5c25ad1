#!/bin/sh
# Runs the threaded tests under ThreadSanitizer: a build with
# -Db_sanitize=thread (in build-tsan, or $BUILD_DIR), then the api suite
# (per-thread store messages, conflicts between connections) and the
# batch suite (group commit, threads incrementing one counter, loaders).
# Any report of a data race fails the run (halt_on_error). Ends with
# "N passed, N failed", as scripts/test.sh does.
set -eu
cd "$(dirname "$0")/.."
dir=${BUILD_DIR:-build-tsan}
[ -f "$dir/build.ninja" ] || meson setup "$dir" -Db_sanitize=thread -Db_lundef=false \
    -Dbuildtype=debugoptimized >/dev/null
ninja -C "$dir" tests/test_api tests/test_batch >/dev/null
export TSAN_OPTIONS="halt_on_error=1 second_deadlock_stack=1 ${TSAN_OPTIONS:-}"
set +e
meson test -C "$dir" --no-rebuild --num-processes 2 --print-errorlogs ${TSAN_TESTS:-api batch}
rc=$?
set -e
python3 - "$dir/meson-logs/testlog.json" <<'PY'
import json, sys
ok = bad = 0
for line in open(sys.argv[1]):
    r = json.loads(line)["result"]
    if r in ("OK", "EXPECTEDFAIL"): ok += 1
    elif r != "SKIP": bad += 1
print(f"{ok} passed, {bad} failed")
PY
exit $rc
