#!/bin/bash
# Runs a libFuzzer target for SECONDS (default 60): TARGET reader (the
# default: the pickle reader, tests/fuzz/fuzz_reader.c) or pagecheck (the
# page walker of LMDB's data file, tests/fuzz/fuzz_pagecheck.c).
#
#     bash tests/fuzz/run_fuzz.sh [SECONDS] [TARGET]
#
# Configures its own clang build (FUZZ_BUILD_DIR, default build-fuzz) with
# -Dfuzz=enabled, makes seeds (pickles with /usr/bin/python3 and
# tests/fuzz/make_seeds.py for the reader; data.mdb files written by the
# library and liblmdb, tests/fuzz/make_pc_seeds.c, for the walker), and
# fuzzes with FUZZ_WORKERS processes (default 1; 2 uses libFuzzer's fork
# mode), seed FUZZ_SEED (default 1). The corpus grows in
# $FUZZ_BUILD_DIR/fuzz-corpus (reader) or fuzz-corpus-pagecheck across
# runs; crashing inputs land in $FUZZ_BUILD_DIR/fuzz-artifacts (or
# fuzz-artifacts-pagecheck). Exits non-zero if the fuzzer found a crash,
# leak, timeout or broken promise (the targets abort on those), and prints
# the input in hex (the reader's; a walker's input is a whole file: its
# path). Never commit a corpus.
set -euo pipefail
secs=${1:-60}
target=${2:-reader}
case "$target" in
  reader) exe=fuzz_reader; suffix=""; max_len=4096 ;;
  pagecheck) exe=fuzz_pagecheck; suffix="-pagecheck"; max_len=262144 ;;
  *) echo "run_fuzz: unknown target '$target' (reader or pagecheck)" >&2; exit 2 ;;
esac
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
builds=("tests/fuzz/$exe")
[ "$target" = pagecheck ] && builds+=(tests/fuzz/make_pc_seeds)
if ! ninja -C "$dir" "${builds[@]}" >"$dir/fuzz-build.log" 2>&1; then
  tail -30 "$dir/fuzz-build.log" >&2
  echo "run_fuzz: build failed" >&2
  exit 1
fi

seeds="$dir/fuzz-seeds$suffix"
corpus="$dir/fuzz-corpus$suffix"
arts="$dir/fuzz-artifacts$suffix"
rm -rf "$seeds"
mkdir -p "$corpus" "$arts"
if [ "$target" = pagecheck ]; then
  "$dir/tests/fuzz/make_pc_seeds" --dir "$seeds"
else
  "$py" tests/fuzz/make_seeds.py --dir "$seeds"
fi

opts=(-max_total_time="$secs" -seed="${FUZZ_SEED:-1}" -max_len="$max_len" -rss_limit_mb=2048
      -timeout=25 -print_final_stats=1 -artifact_prefix="$arts/")
if [ "$workers" -gt 1 ]; then
  opts+=(-fork="$workers")
fi
log="$dir/fuzz-last$suffix.log"
start=$(date +%s)
set +e
ASAN_OPTIONS=detect_leaks=1:allocator_may_return_null=1 \
UBSAN_OPTIONS=halt_on_error=1:print_stacktrace=1 \
  "$dir/tests/fuzz/$exe" "${opts[@]}" "$corpus" "$seeds" >"$log" 2>&1
rc=$?
set -e
end=$(date +%s)

# A summary: the last status line (executions, coverage) and final stats.
grep -E '^#[0-9]+' "$log" | tail -1 || true
grep -E '^stat::(number_of_executed_units|peak_rss_mb)' "$log" || true
echo "run_fuzz: $target, $((end - start)) s, corpus $(ls "$corpus" | wc -l) inputs, log $log"
if [ "$rc" -ne 0 ]; then
  grep -E 'ERROR|BUG|SUMMARY|Test unit written' "$log" | head -20 >&2
  for f in $(grep -oE 'Test unit written to [^ ]+' "$log" | awk '{print $5}'); do
    if [ "$target" = reader ]; then
      [ -f "$f" ] && echo "crash input $f: $(od -An -tx1 -v "$f" | tr -d ' \n')" >&2
    else
      [ -f "$f" ] && echo "crash input $f ($(stat -c %s "$f") bytes: a data.mdb)" >&2
    fi
  done
  echo "run_fuzz: the fuzzer failed (exit $rc)" >&2
  exit 1
fi
echo "run_fuzz: no crash"
