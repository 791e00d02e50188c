#!/usr/bin/env bash
# The public API as a user gets it: install grove into a fresh prefix, compile every public
# header on its own with only that prefix on the include path (no header may reach into
# src/), then build examples/hello with find_package(grove) and run it on the default model.
#   check_install.sh BUILD_DIR SOURCE_DIR
set -euo pipefail
build=$1
src=$2
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
cmake --install "$build" --prefix "$work/prefix" >/dev/null
for h in "$work"/prefix/include/grove/*.h; do
  echo "#include <grove/$(basename "$h")>" > "$work/one.cpp"
  g++ -std=c++20 -fsyntax-only -I"$work/prefix/include" "$work/one.cpp" ||
    { echo "FAIL: grove/$(basename "$h") does not compile on its own"; exit 1; }
done
if grep -n '#include "' "$work"/prefix/include/grove/*.h | grep -v '#include "grove/'; then
  echo "FAIL: a public header includes something outside include/grove"
  exit 1
fi
cmake -S "$src/examples/hello" -B "$work/hello" -DCMAKE_PREFIX_PATH="$work/prefix" -DCMAKE_BUILD_TYPE=Release >/dev/null
cmake --build "$work/hello" -j2 >/dev/null
"$work/hello/hello" "$src/models/default.onnx" 2 | tee "$work/out.txt"
grep -q "run == submit" "$work/out.txt"
echo "PASS: installed headers are self-contained; find_package(grove) builds and runs the example"
