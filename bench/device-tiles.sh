#!/bin/bash
# Side by side on the device machine: the tile-count rules at several thread counts.
#   bench/device-scaling.sh --prepare; cp BASE_BINARY .devrun/grove_base   (here)
#   bash bench/device-tiles.sh                                           (there; $OUT gets tiles.txt)
set -u
OUT=${OUT:-/tmp/device-out}; mkdir -p "$OUT"
export LD_LIBRARY_PATH=$PWD/.devrun/lib
G=$PWD/.devrun/grove B=$PWD/.devrun/grove_base M=/tmp/grove-models
mkdir -p $M && cp .devrun/models/* $M/
[ -f $M/resnet50_b1.onnx ] || timeout 100 ${PY:-python3} bench/models/export_bench_models.py --out $M --only resnet50_b1,convstack > /dev/null 2>&1
p50() { python3 -c "import json,sys; d=json.load(sys.stdin); print(' '.join('%s=%.3f' % (r['tile_counts'], r['p50_ms']) for r in d['results']))"; }
for m in ${ONLY:-resnet50_b1 mobilenet_v2_b1 convstack}; do
  for t in ${THREADS:-2 4 8 16}; do
    for round in 1 2 3; do
      echo "$m t$t r$round base $($B bench $M/$m.onnx --threads $t --runs 15 --warmup 3 --json 2>/dev/null | p50)" \
           "new $($G bench $M/$m.onnx --threads $t --runs 15 --warmup 3 --tile-counts both --json 2>/dev/null | p50)"
    done
  done
done | tee $OUT/tiles.txt
# The simulator against the new rule's measured latency, and ONNX Runtime beside it.
model_inputs() { for f in $M/$1.in.*.npy; do b=${f##*/}; b=${b#$1.in.}; echo --input ${b%.npy}=$f; done; }
for m in resnet50_b1 mobilenet_v2_b1; do
  timeout 90 $G simulate $M/$m.onnx $(model_inputs $m) --cores 2,4,8,16 --validate 10 --json >> $OUT/simulate.txt 2>/dev/null
done
timeout 60 ${PY:-python3} bench/threads_vs_ort.py --grove $G --models $M --only resnet50_b1,mobilenet_v2_b1 --threads 4,16 --runs 15 --out $OUT/ort.json
