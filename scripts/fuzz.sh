#!/usr/bin/env bash
# Builds the libFuzzer targets (clang, ASan+UBSan, coverage) in build-fuzz and runs one:
#   scripts/fuzz.sh TARGET SECONDS [extra libFuzzer flags]
#   scripts/fuzz.sh all SECONDS          # every target, one per core at a time
# Targets: model (ONNX bytes -> import -> bind -> plan -> run), npy (.npy parsing),
# tilegraph (saved TileGraph load), graph (structure-aware: choice scripts -> valid ONNX graphs),
# idioms (differential: exporter idioms, the optimized plan against the reference on the imported graph).
# New inputs go to build-fuzz/corpus/TARGET (seeded from fuzz/corpus/TARGET); a crash is
# written to build-fuzz/crashes/TARGET/: add it to fuzz/regressions/TARGET/ with its fix, and
# ctest replays it from then on. docs/fuzzing.md has the details and the hours run so far.
set -euo pipefail
cd "$(dirname "$0")/.."
target=${1:?usage: scripts/fuzz.sh TARGET|all SECONDS [libFuzzer flags]}
seconds=${2:?usage: scripts/fuzz.sh TARGET|all SECONDS [libFuzzer flags]}
shift 2
targets=(model npy tilegraph graph idioms serve)
[ "$target" = all ] || targets=("$target")

if [ ! -f build-fuzz/CMakeCache.txt ]; then
  CC=clang CXX=clang++ cmake -S . -B build-fuzz -DCMAKE_BUILD_TYPE=RelWithDebInfo \
    -DGROVE_SANITIZE=address,undefined -DGROVE_FUZZ=ON -DGROVE_TESTS=ON > /dev/null
fi
cmake --build build-fuzz -j"$(nproc)" --target "${targets[@]/#/fuzz_}"

export ASAN_OPTIONS="detect_leaks=1:allocator_may_return_null=1:${ASAN_OPTIONS:-}"
export UBSAN_OPTIONS="print_stacktrace=1:halt_on_error=1"
# One target: its log in build-fuzz/fuzz_TARGET.log, a summary line on stdout.
fuzz_one() {
  local t=$1; shift
  local corpus=build-fuzz/corpus/$t crashes=build-fuzz/crashes/$t log=build-fuzz/fuzz_$t.log
  mkdir -p "$corpus" "$crashes"
  local dict=() regressions=() status=0
  [ -f fuzz/dict/"$t".dict ] && dict=(-dict=fuzz/dict/"$t".dict)
  [ -d fuzz/regressions/"$t" ] && regressions=(fuzz/regressions/"$t")
  build-fuzz/fuzz/fuzz_"$t" "$corpus" fuzz/corpus/"$t" "${regressions[@]}" "${dict[@]}" \
    -max_total_time="$seconds" -timeout=10 -rss_limit_mb=2048 -max_len=65536 \
    -artifact_prefix="$crashes"/ -print_final_stats=1 "$@" > "$log" 2>&1 || status=$?
  echo "== fuzz_$t for ${seconds}s"
  grep -E "^#[0-9]+.*(DONE|pulse)|stat::number_of_executed_units|stat::peak_rss" "$log" | tail -3 || true
  if [ "$status" -ne 0 ]; then
    grep -E "ERROR|SUMMARY|runtime error|^    #[0-9]" "$log" | head -30 || true
    echo "fuzz_$t: FAILED (exit $status); the input is in $crashes, the log in $log"
  fi
  return "$status"
}

# Each fuzzer is one process on one core, so the targets run side by side, one per core:
# the same seconds each, in a fraction of the wall time.
failed=0
running=0
for t in "${targets[@]}"; do
  fuzz_one "$t" "$@" &
  running=$((running + 1))
  if [ "$running" -ge "$(nproc)" ]; then
    wait -n || failed=1
    running=$((running - 1))
  fi
done
while [ "$running" -gt 0 ]; do
  wait -n || failed=1
  running=$((running - 1))
done
exit "$failed"
