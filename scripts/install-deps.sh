#!/usr/bin/env bash
# Installs everything grove builds and tests with, from Debian 12's packages only.
# Python packages are Debian's (python3-torch, python3-onnx): tests and benchmarks use them
# to export models with random weights; the library and CLI never need Python. The benchmark
# suite's peers (Node.js with npm's onnxruntime-node; matplotlib) come from
# bench/peers/install.sh, called at the end: the bench_quick ctest needs them.
# Unattended: works with CI=true and no stdin.
# --bench adds what only the benchmarks (-DGROVE_BENCH=ON) link: oneDNN, the baseline.
set -euo pipefail
cd "$(dirname "$0")/.."
packages=(
  build-essential cmake ninja-build
  libprotobuf-dev protobuf-compiler libonnx-dev libonnx-testdata
  libgtest-dev libbenchmark-dev libcli11-dev nlohmann-json3-dev libcpp-httplib-dev clang libfuzzer-14-dev
  libgrpc++-dev protobuf-compiler-grpc python3-grpcio python3-grpc-tools
  python3-dev pybind11-dev python3-pytest python3-pip python3-venv python3-setuptools python3-wheel python3-distributed python3-yaml
  python3 python3-numpy python3-onnx python3-torch python3-torchvision python3-matplotlib python3-sklearn
  dataset-fashion-mnist
)
[ "${1:-}" = "--bench" ] && packages+=(libdnnl-dev)
missing=()
for p in "${packages[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
sudo=""
[ "$(id -u)" -eq 0 ] || sudo="sudo"
if [ ${#missing[@]} -eq 0 ]; then
  echo "install-deps: all ${#packages[@]} packages present"
else
  echo "install-deps: installing ${missing[*]}"
  $sudo apt-get update -qq </dev/null
  DEBIAN_FRONTEND=noninteractive $sudo apt-get install -y -qq "${missing[@]}" </dev/null
fi
# promtool checks /metrics as Prometheus parses it (tests/serve/test_serve_http.py). Debian
# ships it only with the server: installed without its recommends (the node exporter), and
# the server's service stopped where systemd started it.
if ! command -v promtool > /dev/null; then
  echo "install-deps: installing prometheus (for promtool)"
  DEBIAN_FRONTEND=noninteractive $sudo apt-get install -y -qq --no-install-recommends prometheus </dev/null
  if command -v systemctl > /dev/null; then $sudo systemctl disable --now prometheus > /dev/null 2>&1 || true; fi
fi
# Headless Chromium loads grove serve's live page in the tests (tests/serve/test_serve_http.py).
if ! command -v chromium > /dev/null; then
  echo "install-deps: installing chromium (headless page tests)"
  DEBIAN_FRONTEND=noninteractive $sudo apt-get install -y -qq --no-install-recommends chromium </dev/null
fi
# nodejs, npm (when not on PATH) and onnxruntime-node 1.20.1 under ~/.cache/grove/peers.
bench/peers/install.sh </dev/null >/dev/null
echo "install-deps: benchmark peers ready"
