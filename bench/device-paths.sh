#!/bin/bash
# On the device machine: group-aware paths (DCCNN) and the default tile counts at 4-16 threads.
#   bench/device-scaling.sh --prepare; strip -o .devrun/grove_nopaths A_BUILD_WITHOUT_PATHS;
#   cp ~/.cache/grove/bench/decoupled_cnn.{onnx,in.image.npy} .devrun/models/      (here)
#   bash bench/device-paths.sh                                                    (there)
set -u
OUT=${OUT:-/tmp/device-out}; mkdir -p "$OUT"
export LD_LIBRARY_PATH=$PWD/.devrun/lib PYTHONUNBUFFERED=1
G=$PWD/.devrun/grove N=$PWD/.devrun/grove_nopaths M=/tmp/grove-models PY=${PY:-python3}
mkdir -p $M && cp .devrun/models/* $M/
exec > >(tee "$OUT/log.txt") 2>&1
timeout 60 $PY bench/models/export_bench_models.py --out $M --only resnet50_b1 > /dev/null 2>&1
timeout 60 $PY bench/models/export_paths_models.py --out $M > /dev/null 2>&1
p50() { $PY -c "import json,sys; d=json.load(sys.stdin); print(' '.join('%s=%.3f' % (r['tile_counts'], r['p50_ms']) for r in d['results']))"; }
in_() { echo --input image=$M/$1.in.image.npy; }
for t in 2 4 8 16; do
  for round in 1 2 3; do
    echo "decoupled_cnn t$t r$round plain $($N bench $M/decoupled_cnn.onnx $(in_ decoupled_cnn) --threads $t --runs 40 --warmup 5 --json 2>/dev/null | p50)" \
         "paths $($G bench $M/decoupled_cnn.onnx $(in_ decoupled_cnn) --threads $t --runs 40 --warmup 5 --json 2>/dev/null | p50)"
  done
done
for m in resnext50_b1 resnet50_b1 mobilenet_v2_b1; do
  for round in 1 2; do
    echo "$m t16 r$round $($G bench $M/$m.onnx $(in_ $m) --threads 16 --runs 20 --warmup 3 --tile-counts both --json 2>/dev/null | p50)"
  done
done
timeout 60 $PY bench/threads_vs_ort.py --grove $G --models $M --only resnet50_b1,mobilenet_v2_b1,resnext50_b1 --threads 16 --runs 20 --out $OUT/ort.json
timeout 60 $G tail $M/mobilenet_v2_b1.onnx --threads 16 --json > $OUT/tail16.json
date
