#!/usr/bin/env bash
# One command from a fresh Debian 12 machine: install dependencies, build, run every test
# (unit, ONNX node conformance, CLI and bad-input, PyTorch model comparisons).
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/install-deps.sh
cmake -S . -B build-test -DCMAKE_BUILD_TYPE=Release -DGROVE_TESTS=ON
cmake --build build-test -j"$(nproc)"
cd build-test
ctest --output-on-failure -j"$(nproc)" "$@"
