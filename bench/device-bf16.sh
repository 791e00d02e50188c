#!/bin/bash
# bf16 past 2 cores, for a session lent the device machine (python3, torch, onnxruntime; no Debian
# packages). Prepare here first:   bench/device-scaling.sh --prepare   (.devrun/: grove, its libraries, MobileNetV2)
# then on the device, .devrun carried:   bash bench/device-bf16.sh
# $OUT gets log.txt, bf16.txt (fp32 and bf16 p50 per model and thread count, interleaved in one
# process), core.txt (the tile time summed over all workers for one traced bf16 run: how much
# each tile slows as more cores share a run) and ort.json (ONNX Runtime fp32 beside grove fp32).
set -u
OUT=${OUT:-/tmp/device-out}; mkdir -p "$OUT"
export LD_LIBRARY_PATH=$PWD/.devrun/lib PYTHONUNBUFFERED=1
PY=${PY:-python3} G=$PWD/.devrun/grove M=/tmp/grove-models T=/tmp/grove-traces
exec > >(tee "$OUT/log.txt") 2>&1
lscpu; nproc; date
mkdir -p $M $T && cp .devrun/models/* $M/
timeout 150 $PY bench/models/export_bench_models.py --out $M --only resnet50_b1,bert_base_s128_b1 > /dev/null 2>&1; echo "export rc $?"
ls $M
inputs() { for f in $M/$1.in.*.npy; do b=${f##*/}; b=${b#$1.in.}; echo --input ${b%.npy}=$f; done; }
p50() { $PY -c "import json,sys; d=json.load(sys.stdin); print(' '.join('%s=%.2f' % (r['precision'], r['p50_ms']) for r in d['results']))"; }
core() { $PY -c "import json,sys; e=[x for x in json.load(open(sys.argv[1]))['traceEvents'] if x.get('ph')=='X']; print('core_ms=%.2f tiles=%d' % (sum(x['dur'] for x in e)/1e3, len(e)))" "$1"; }
for m in resnet50_b1 bert_base_s128_b1 mobilenet_v2_b1; do
  [ -f $M/$m.onnx ] || continue
  for t in ${THREADS:-1 2 4 8 16}; do
    echo "$m t$t $(timeout 60 $G bench $M/$m.onnx $(inputs $m) --threads $t --runs 15 --warmup 3 --precision both --json 2>/dev/null | p50)" | tee -a $OUT/bf16.txt
    timeout 60 $G bench $M/$m.onnx $(inputs $m) --threads $t --runs 3 --precision bf16 --trace $T/$m.$t.json > /dev/null 2>&1
    echo "$m t$t $(core $T/$m.$t.json)" | tee -a $OUT/core.txt
  done
done
timeout 150 $PY bench/threads_vs_ort.py --grove $G --models $M --only resnet50_b1,bert_base_s128_b1 --threads 1,2,4,8,16 --runs 15 --out $OUT/ort.json
date
