#!/bin/bash
# On the device machine: the simulator against measured latency at 2-16 cores, with and
# without the cross-core read cost (docs/scaling.md). Prepare with bench/device-scaling.sh --prepare.
set -u
OUT=${OUT:-/tmp/device-out}; mkdir -p "$OUT"
export LD_LIBRARY_PATH=$PWD/.devrun/lib
G=$PWD/.devrun/grove M=/tmp/grove-models PY=${PY:-python3}
mkdir -p $M && cp .devrun/models/* $M/
timeout 60 $PY bench/models/export_bench_models.py --out $M --only resnet50_b1 > /dev/null 2>&1
for m in resnet50_b1 mobilenet_v2_b1; do
  for cross in measured 0; do
    extra=(); [ $cross = 0 ] && extra=(--cross-core 0)
    echo "== $m cross $cross"
    timeout 70 $G simulate $M/$m.onnx --input image=$M/$m.in.image.npy --cores 2,4,8,16 --validate 10 "${extra[@]}" --json \
      | tee -a $OUT/simulate16.txt | $PY -c "
import json,sys
d=json.load(sys.stdin); print('cross ns/KB', d['machine']['cross_ns_per_kb'])
for r in d['rows']: print(r['schedule'], r['cores'], '%.2f'%r['predicted_ms'], '%.2f'%r['measured_ms'], '%+.1f%%'%(100*(r['predicted_ms']/r['measured_ms']-1)), 'cross %.2f ms'%r['cross_core_ms'])"
  done
done
