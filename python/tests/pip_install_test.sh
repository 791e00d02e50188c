#!/usr/bin/env bash
# `pip install .` into a fresh virtual environment (Debian's python3 -m venv, seeing the
# system's NumPy), then `import grove` from elsewhere runs the default model through both
# APIs. BUILD_DIR: an existing CMake build to take the extension from (ctest passes its own).
#   pip_install_test.sh SOURCE_DIR BUILD_DIR
set -euo pipefail
src=$1 build=$2
venv=$(mktemp -d)
trap 'rm -rf "$venv"' EXIT
/usr/bin/python3 -m venv --system-site-packages "$venv"
(cd "$src" && GROVE_BUILD_DIR="$build" "$venv/bin/pip" install -q --no-build-isolation .)
cd "$venv"
"$venv/bin/python" - "$src" <<'PY'
import os, sys
import numpy as np
import grove
src = sys.argv[1]
assert grove.__file__.startswith(sys.prefix), f"grove came from {grove.__file__}, not the venv {sys.prefix}"
x = np.load(os.path.join(src, "models", "default_input.npy"))
want = np.load(os.path.join(src, "models", "default_expected.npy"))
y = grove.Session(os.path.join(src, "models", "default.onnx"), threads=2).run({"image": x})["logits"]
z = grove.InferenceSession(os.path.join(src, "models", "default.onnx")).run(None, {"image": x})[0]
assert np.allclose(y, want, rtol=1e-3, atol=1e-4) and np.array_equal(y, z)
print("pip install: import grove from", grove.__file__)
PY
