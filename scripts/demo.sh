#!/usr/bin/env bash
# One command from a fresh Debian 12 machine: install dependencies, build Release (the CLI and
# the Python module, pip-installed for /usr/bin/python3), run the embedded default model.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/install-deps.sh
cmake -S . -B build -DCMAKE_BUILD_TYPE=Release -DGROVE_TESTS=OFF
cmake --build build -j"$(nproc)" --target grove_cli grove_python
bash scripts/install-python.sh build
./build/grove
