#!/usr/bin/env bash
# One command from a fresh Debian 12 machine: install dependencies, build, run every test:
#  1. the runtime, tile-runtime and server tests under ThreadSanitizer with adversarial
#     schedules (random delays, random pop/steal order); skip with GROVE_SKIP_TSAN=1;
#  2. the unit, CLI, server and ONNX node conformance tests and the Python session-lifetime tests
#     under AddressSanitizer + UndefinedBehaviorSanitizer (clang; the model tests are left out:
#     exporting them costs minutes of torch),
#     then each libFuzzer target for GROVE_FUZZ_SECONDS (default 15) in the same build
#     (docs/fuzzing.md); skip with GROVE_SKIP_ASAN=1, or only the fuzzing with GROVE_SKIP_FUZZ=1;
#  3. everything under ctest in Release: unit, ONNX node conformance, kernels, runtime, CLI
#     and bad input, PyTorch model comparisons, the server over HTTP and its load and abuse
#     stage (ctest serve_abuse, about 70 s alone: tests/serve/abuse_test.py, docs/serving.md).
#
# scripts/test.sh --quick is the loop while changing code: an incremental Release build of the
# unit and kernel tests (build-test, shared with the full run) and those tests under ctest
# (labels unit and kernels; GROVE_GENERATED_CASES defaults to 50 there), no sanitizers.
# Other labels: cli, runtime, serve, conformance, models, fuzz, python, api, bench
# (ctest --test-dir build-test -L LABEL).
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/install-deps.sh
jobs=$(nproc)

# Configures build dir $1 with the rest as options: Ninja where the dir is new (its no-op
# rebuild takes a fraction of a second), whatever generator an existing dir has.
configure() {
  local dir=$1 generator=()
  shift
  [ -f "$dir/CMakeCache.txt" ] || generator=(-G Ninja)
  cmake -S . -B "$dir" "${generator[@]}" "$@" > /dev/null
}

if [ "${1:-}" = "--quick" ]; then
  shift
  start=$SECONDS
  configure build-test -DCMAKE_BUILD_TYPE=Release -DGROVE_TESTS=ON
  cmake --build build-test -j"$jobs" --target grove_unit_tests grove_kernel_tests
  echo "== quick build took $((SECONDS - start)) s"
  GROVE_GENERATED_CASES=${GROVE_GENERATED_CASES:-50} ctest --test-dir build-test -L '^(unit|kernels)$' -j"$jobs" \
    --output-on-failure "$@"
  echo "== quick loop took $((SECONDS - start)) s"
  exit 0
fi
# Each stage's wall time, printed as it ends: CI's budget is the sum.
stage_start=$SECONDS
stage_done() { echo "== $1 took $((SECONDS - stage_start)) s"; stage_start=$SECONDS; }
stage_done "installing dependencies"

# Runs a gtest binary as four shards per core, as many at a time as there are cores (the
# sanitizer builds run their tests one thread at a time): gtest deals tests to shards in turn,
# so with one shard per core a few long tests on one shard left the other core idle for a
# minute. Each shard's output goes to BIN.shardN.log and is shown if that shard fails; its
# tests' times go to BIN.shardN.json, and the five slowest of all shards are printed, which
# says where a stage's time goes.
run_sharded() {
  local bin=$1 shards=$((jobs * 4)) running=0 status=0 i
  rm -f "$bin".shard*.log "$bin".shard*.json
  for ((i = 0; i < shards; i++)); do
    if ((running == jobs)); then
      wait -n || status=1
      running=$((running - 1))
    fi
    GTEST_TOTAL_SHARDS=$shards GTEST_SHARD_INDEX=$i "$bin" --gtest_brief=1 --gtest_output="json:$bin.shard$i.json" \
      > "$bin.shard$i.log" 2>&1 &
    running=$((running + 1))
  done
  while ((running > 0)); do
    wait -n || status=1
    running=$((running - 1))
  done
  for ((i = 0; i < shards; i++)); do
    grep -q "^\[  PASSED  \]" "$bin.shard$i.log" && ! grep -q "^\[  FAILED  \]" "$bin.shard$i.log" || cat "$bin.shard$i.log"
  done
  echo "$(basename "$bin"): $(awk '/^\[  PASSED  \]/ {n += $4} END {print n + 0}' "$bin".shard*.log) tests passed in $shards shards"
  /usr/bin/python3 scripts/slowest_tests.py "$bin".shard*.json || true
  grep -h "^\[  FAILED  \]" "$bin".shard*.log || true
  return "$status"
}

# The sanitizer builds keep line tables only (-g1): reports still name file and line, and the
# builds, most of CI's time, skip the full debug info. The ASan build is at -O1, as OSS-Fuzz
# builds its sanitized targets: it compiles in less time, and ASan and UBSan check the same
# accesses (docs/fuzzing.md).
sanitizer_flags=(-DCMAKE_CXX_FLAGS_RELWITHDEBINFO="-O1 -g1 -DNDEBUG" -DCMAKE_C_FLAGS_RELWITHDEBINFO="-O1 -g1 -DNDEBUG")

if [ "${GROVE_SKIP_TSAN:-0}" != "1" ]; then
  echo "== ThreadSanitizer + adversarial schedules =="
  # -O1: gcc compiles the TSan build in 60 % of the time it takes at -O2 (the ops and kernels
  # layers, measured file by file), and TSan sees the same accesses at either level.
  configure build-tsan -DCMAKE_BUILD_TYPE=RelWithDebInfo -DCMAKE_CXX_FLAGS_RELWITHDEBINFO="-O1 -g1 -DNDEBUG" \
        -DCMAKE_C_FLAGS_RELWITHDEBINFO="-O1 -g1 -DNDEBUG" -DGROVE_TESTS=ON -DGROVE_SANITIZE=thread -DGROVE_ADVERSARIAL=ON
  cmake --build build-tsan -j"$jobs" --target grove_runtime_tests grove_concurrent_unit_tests grove_serve_tests
  stage_done "ThreadSanitizer build"
  export TSAN_OPTIONS="halt_on_error=1 second_deadlock_stack=1 suppressions=$PWD/scripts/tsan_suppressions.txt"
  run_sharded build-tsan/tests/runtime/grove_runtime_tests
  run_sharded build-tsan/tests/grove_concurrent_unit_tests
  run_sharded build-tsan/tests/serve/grove_serve_tests
  stage_done "ThreadSanitizer tests"
fi

if [ "${GROVE_SKIP_ASAN:-0}" != "1" ]; then
  echo "== AddressSanitizer + UndefinedBehaviorSanitizer, fuzz targets =="
  CC=clang CXX=clang++ configure build-fuzz -DCMAKE_BUILD_TYPE=RelWithDebInfo "${sanitizer_flags[@]}" -DGROVE_TESTS=ON \
        -DGROVE_SANITIZE=address,undefined -DGROVE_FUZZ=ON
  cmake --build build-fuzz -j"$jobs" --target grove_unit_tests grove_cli_tests grove_conformance \
        fuzz_model fuzz_npy fuzz_tilegraph fuzz_graph fuzz_idioms fuzz_serve grove_serve_tests \
        $(ninja -C build-fuzz -t targets all 2> /dev/null | grep -o '^grove_python:' | tr -d :)
  stage_done "AddressSanitizer build"
  export ASAN_OPTIONS="detect_leaks=1" UBSAN_OPTIONS="print_stacktrace=1:halt_on_error=1"
  # Release-stage only (docs/fuzzing.md):
  #  - training the performance model is arithmetic on buffers that a short training run
  #    (PerfModel.SameSeedSamePredictions) already walks; these three take two minutes here;
  #  - PerfSelect.AModelThatPricesTheBlockedConvRunsChainsBlocked plans and packs a chain of
  #    256-channel convs six times (23 s here); the other PerfSelect tests plan the same way;
  #  - the six hand-picked conv sweeps below (Winograd, channel-blocked, 1-D, expand+depthwise,
  #    conv+maxpool) take 3 minutes of CPU here; their kernels and tile rules meet random shapes
  #    under the sanitizers in the generated cases of the same families (conv, ConvNhwc with
  #    Winograd, ConvNchwc, ExpandDepthwise, ConvMaxPool).
  #  - the CLI's tuning, training and timing tests (tune, fit, calibrate, simulate, tail, ten
  #    planning processes): 65 s of CPU here, over code the unit tests above already run; the
  #    CLI's bad-input, check, run and bench tests stay.
  # The generated op cases run 200 per family in the Release stage; 25 of them here.
  release_only="PerfModel.TransferBeatsScratchOnFewSamples:PerfModel.LearnsNonlinearMachineBetterThanLinear"
  release_only+=":PerfModel.MaskedTargetsNeitherTrainNorPoison:TilingKernels.ConvWinograd:TilingKernels.ConvOneDimensional"
  release_only+=":ConvNhwc.WinogradTileRuleMatchesReference:ConvNchwc.TileRuleMatchesReference"
  release_only+=":ExpandDepthwiseNhwc.TileRuleMatchesReference:ConvMaxPoolNhwc.TileRuleMatchesReference"
  release_only+=":PerfSelect.AModelThatPricesTheBlockedConvRunsChainsBlocked"
  GROVE_GENERATED_CASES=25 GTEST_FILTER="-$release_only" run_sharded build-fuzz/tests/grove_unit_tests
  cli_release_only="CliTune.*:CliPlan.JsonIsTheSameInTenProcesses:CliPlan.AProbesFileWithoutTheHalfKeptRatioKeepsItsWinogradAnswers:CliBench.SimulatePredictsEachCoreCountAndValidates"
  cli_release_only+=":CliBench.Tail*"
  GTEST_FILTER="-$cli_release_only" run_sharded build-fuzz/tests/grove_cli_tests
  run_sharded build-fuzz/tests/serve/grove_serve_tests
  build-fuzz/tests/grove_conformance --jobs "$jobs"
  # The Python module under ASan+UBSan: Sessions dropped while their runs are pending, on every
  # execution path (python/tests/test_session_lifetime.py). The interpreter is not instrumented,
  # so the sanitizer runtime is preloaded and Python allocates with malloc, where ASan sees it.
  if [ -n "$(ls build-fuzz/python/grove/_grove*.so 2> /dev/null)" ]; then
    LD_PRELOAD="$(clang -print-file-name=libclang_rt.asan-x86_64.so)" ASAN_OPTIONS=detect_leaks=0 PYTHONMALLOC=malloc \
      PYTHONPATH=build-fuzz/python GROVE_SOURCE_DIR="$PWD" /usr/bin/python3 -m pytest -q -p no:cacheprovider \
      python/tests/test_session_lifetime.py
  fi
  stage_done "AddressSanitizer tests"
  if [ "${GROVE_SKIP_FUZZ:-0}" != "1" ]; then
    bash scripts/fuzz.sh all "${GROVE_FUZZ_SECONDS:-15}"
    stage_done "fuzzing"
  fi
  unset ASAN_OPTIONS UBSAN_OPTIONS
fi

echo "== Release build, all tests =="
configure build-test -DCMAKE_BUILD_TYPE=Release -DGROVE_TESTS=ON
cmake --build build-test -j"$jobs"
stage_done "Release build"
cd build-test
ctest --output-on-failure -j"$jobs" "$@"
