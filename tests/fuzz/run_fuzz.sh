#!/bin/bash
# Runs the pickle reader's libFuzzer target for SECONDS (default 60).
#
#     bash tests/fuzz/run_fuzz.sh [SECONDS]
#
# Configures its own clang build (FUZZ_BUILD_DIR, default build-fuzz) with
# -Dfuzz=enabled, makes seed pickles with /usr/bin/python3
# (tests/fuzz/make_seeds.py), and fuzzes with FUZZ_WORKERS processes
# (default 1; 2 uses libFuzzer's fork mode). The corpus grows in
# $FUZZ_BUILD_DIR/fuzz-corpus across runs; crashing inputs land in
# $FUZZ_BUILD_DIR/fuzz-artifacts. Exits non-zero if the fuzzer found a
# crash, leak, timeout or round-trip mismatch (the target aborts on those),
# and prints the input in hex. Never commit the corpus.
set -euo pipefail
secs=${1:-60}
cd "$(dirname "$0")/../.."
dir=${FUZZ_BUILD_DIR:-build-fuzz}
workers=${FUZZ_WORKERS:-1}
py=/usr/bin/python3
[ -x "$py" ] || py=python3

if ! command -v clang >/dev/null; then
  echo "run_fuzz: clang is needed (apt-get install clang libclang-rt-14-dev)" >&2
  exit 1
fi
mkdir -p "$dir"
if [ ! -f "$dir/build.ninja" ]; then
  if ! CC=clang meson setup "$dir" -Dfuzz=enabled -Dbuildtype=debugoptimized \
       >"$dir/fuzz-setup.log" 2>&1; then
    cat "$dir/fuzz-setup.log" >&2
    echo "run_fuzz: meson setup failed" >&2
    exit 1
  fi
fi
if ! ninja -C "$dir" tests/fuzz/fuzz_reader >"$dir/fuzz-build.log" 2>&1; then
  tail -30 "$dir/fuzz-build.log" >&2
  echo "run_fuzz: build failed" >&2
  exit 1
fi

seeds="$dir/fuzz-seeds"
corpus="$dir/fuzz-corpus"
arts="$dir/fuzz-artifacts"
rm -rf "$seeds"
mkdir -p "$corpus" "$arts"
"$py" tests/fuzz/make_seeds.py --dir "$seeds"

opts=(-max_total_time="$secs" -seed="${FUZZ_SEED:-1}" -max_len=4096 -rss_limit_mb=2048 -timeout=25
      -print_final_stats=1 -artifact_prefix="$arts/")
if [ "$workers" -gt 1 ]; then
  opts+=(-fork="$workers")
fi
log="$dir/fuzz-last.log"
start=$(date +%s)
set +e
ASAN_OPTIONS=detect_leaks=1:allocator_may_return_null=1 \
UBSAN_OPTIONS=halt_on_error=1:print_stacktrace=1 \
  "$dir/tests/fuzz/fuzz_reader" "${opts[@]}" "$corpus" "$seeds" >"$log" 2>&1
rc=$?
set -e
end=$(date +%s)

# A summary: the last status line (executions, coverage) and final stats.
grep -E '^#[0-9]+' "$log" | tail -1 || true
grep -E '^stat::(number_of_executed_units|peak_rss_mb)' "$log" || true
echo "run_fuzz: $((end - start)) s, corpus $(ls "$corpus" | wc -l) inputs, log $log"
if [ "$rc" -ne 0 ]; then
  grep -E 'ERROR|BUG|SUMMARY|Test unit written' "$log" | head -20 >&2
  for f in $(grep -oE 'Test unit written to [^ ]+' "$log" | awk '{print $5}'); do
    [ -f "$f" ] && echo "crash input $f: $(od -An -tx1 -v "$f" | tr -d ' \n')" >&2
  done
  echo "run_fuzz: the fuzzer failed (exit $rc)" >&2
  exit 1
fi
echo "run_fuzz: no crash"
