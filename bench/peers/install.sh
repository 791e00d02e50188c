#!/usr/bin/env bash
# Installs the benchmark peers and plotting, idempotently, outside the repository:
#   - Debian packages: nodejs and npm (skipped when node/npm are already on PATH, e.g. from
#     another Node distribution whose nodejs bundles npm), python3-matplotlib, and an
#     optimised BLAS (libopenblas0-openmp) unless one is installed: Debian's python3-torch runs
#     Linear/MatMul through the system libblas, and the reference netlib one makes TorchScript
#     ~40x slower on BERT (20 s vs 0.55 s per run at 1 thread): no fair comparison
#   - ONNX Runtime 1.20.1 for Node (npm onnxruntime-node, which ships libonnxruntime.so for
#     linux-x64) into $GROVE_PEERS_DIR (default ~/.cache/grove/peers). --ignore-scripts skips
#     its install script, which would download CUDA binaries.
# TorchScript needs nothing extra: Debian's python3-torch (scripts/install-deps.sh).
# Works unattended (CI=true, no stdin). Prints the peers' directory as its last line.
set -euo pipefail
ORT_VERSION=1.20.1
peers_dir="${GROVE_PEERS_DIR:-${XDG_CACHE_HOME:-$HOME/.cache}/grove/peers}"

packages=()
command -v node >/dev/null || packages+=(nodejs)
command -v npm >/dev/null || packages+=(npm)
/usr/bin/python3 -c 'import matplotlib' 2>/dev/null || packages+=(python3-matplotlib)
installed() { dpkg-query -W -f='${Status}' "$1" 2>/dev/null | grep -q "install ok installed"; }
blas=no
for p in libopenblas0-openmp libopenblas0-pthread libblis4-openmp libblis4-pthread libmkl-rt; do
  installed "$p" && blas=yes
done
[ "$blas" = yes ] || packages+=(libopenblas0-openmp)
if [ ${#packages[@]} -gt 0 ]; then
  sudo=""
  [ "$(id -u)" -eq 0 ] || sudo="sudo"
  echo "peers: apt-get install ${packages[*]}" >&2
  $sudo apt-get update -qq </dev/null
  DEBIAN_FRONTEND=noninteractive $sudo apt-get install -y -qq --no-install-recommends "${packages[@]}" </dev/null >&2
fi

mkdir -p "$peers_dir"
have=$(node -e "try{console.log(require('$peers_dir/node_modules/onnxruntime-node/package.json').version)}catch(e){}" 2>/dev/null || true)
if [ "$have" != "$ORT_VERSION" ]; then
  echo "peers: npm install onnxruntime-node@$ORT_VERSION into $peers_dir" >&2
  [ -f "$peers_dir/package.json" ] || echo '{"name": "grove-bench-peers", "private": true}' >"$peers_dir/package.json"
  (cd "$peers_dir" && npm install --ignore-scripts --no-audit --no-fund --loglevel=error \
     "onnxruntime-node@$ORT_VERSION" </dev/null >&2)
fi
# Loading the native binding proves the shared library matches this machine.
node -e "const ort=require('$peers_dir/node_modules/onnxruntime-node'); if(!ort.InferenceSession) process.exit(1)" \
  || { echo "peers: onnxruntime-node does not load" >&2; exit 1; }
echo "$peers_dir"
