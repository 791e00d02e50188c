#!/usr/bin/env bash
# One command from a fresh Debian 12 machine: install dependencies, build, run every test:
#  1. the runtime and tile-runtime tests under ThreadSanitizer with adversarial schedules
#     (random delays, random pop/steal order); skip with GROVE_SKIP_TSAN=1;
#  2. everything under ctest in Release: unit, ONNX node conformance, kernels, runtime, CLI
#     and bad input, PyTorch model comparisons.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/install-deps.sh
jobs=$(nproc)

if [ "${GROVE_SKIP_TSAN:-0}" != "1" ]; then
  echo "== ThreadSanitizer + adversarial schedules =="
  cmake -S . -B build-tsan -DCMAKE_BUILD_TYPE=RelWithDebInfo -DGROVE_TESTS=ON \
        -DGROVE_SANITIZE=thread -DGROVE_ADVERSARIAL=ON > /dev/null
  cmake --build build-tsan -j"$jobs" --target grove_runtime_tests grove_unit_tests
  export TSAN_OPTIONS="halt_on_error=1 second_deadlock_stack=1"
  build-tsan/tests/runtime/grove_runtime_tests --gtest_brief=1
  build-tsan/tests/grove_unit_tests --gtest_brief=1 --gtest_filter='Session*:PlannedRun*'
fi

echo "== Release build, all tests =="
cmake -S . -B build-test -DCMAKE_BUILD_TYPE=Release -DGROVE_TESTS=ON > /dev/null
cmake --build build-test -j"$jobs"
cd build-test
ctest --output-on-failure -j"$jobs" "$@"
