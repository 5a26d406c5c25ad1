#!/bin/sh
# Runs the threaded tests under ThreadSanitizer: a build with
# -Db_sanitize=thread (in build-tsan, or $BUILD_DIR), then the test
# 'threads' (tests/thread_test.c: four threads with their own connections
# on one store with group commit, retried conflicts through ost_txn_run,
# per-thread store messages, connections closed after their store). The
# Criterion suites do not run under TSan (Criterion cannot map its shared
# arena in TSan's address space), so this is a plain program. Any report
# of a data race fails the run (halt_on_error). Ends with "N passed, N
# failed", as scripts/test.sh does.
set -eu
cd "$(dirname "$0")/.."
dir=${BUILD_DIR:-build-tsan}
[ -f "$dir/build.ninja" ] || meson setup "$dir" -Db_sanitize=thread -Db_lundef=false \
    -Dbuildtype=debugoptimized >/dev/null
ninja -C "$dir" tests/thread_test >/dev/null
export TSAN_OPTIONS="halt_on_error=1 second_deadlock_stack=1 ${TSAN_OPTIONS:-}"
set +e
meson test -C "$dir" --no-rebuild --num-processes 2 --print-errorlogs ${TSAN_TESTS:-threads}
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
