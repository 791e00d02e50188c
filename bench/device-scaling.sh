#!/bin/bash
# The 16-core check of docs/scaling.md, for a session lent the device machine (a bare image with
# python3, torch, onnxruntime, matplotlib; no Debian packages). Prepare here first:
#   bench/device-scaling.sh --prepare     # .devrun/: grove, the shared libraries it needs, MobileNetV2
# then on the device, with .devrun carried:  bash bench/device-scaling.sh
# Everything lands in $OUT (5 files): log.txt, scaling16.json, extras.txt, ort.json, the plot.
set -u
if [ "${1:-}" = "--prepare" ]; then
  rm -rf .devrun && mkdir -p .devrun/lib .devrun/models
  grep -qx '/.devrun/' .git/info/exclude || echo /.devrun/ >> .git/info/exclude
  strip -o .devrun/grove build/grove
  ldd build/grove | awk '/=> \// {print $3}' | grep -v -E 'libc\.so|libm\.so|ld-linux|libgcc_s|libstdc' | xargs -I{} cp -L {} .devrun/lib/
  cp ~/.cache/grove/bench/mobilenet_v2_b1.{onnx,json} ~/.cache/grove/bench/mobilenet_v2_b1.in.*.npy .devrun/models/
  du -sh .devrun; exit 0
fi
OUT=${OUT:-/tmp/device-out}; mkdir -p "$OUT"
export LD_LIBRARY_PATH=$PWD/.devrun/lib PYTHONUNBUFFERED=1
PY=${PY:-python3} G=$PWD/.devrun/grove M=/tmp/grove-models ONLY=${ONLY:-mobilenet_v2_b1,resnet50_b1,convstack}
exec > >(tee "$OUT/log.txt") 2>&1
lscpu; nproc; date
mkdir -p $M && cp .devrun/models/* $M/
step() { local t=$1; shift; echo "== $*" >&2; local s=$SECONDS; timeout "$t" "$@"; echo "== rc $? in $((SECONDS - s)) s" >&2; }
step 150 $PY bench/models/export_bench_models.py --out $M --only resnet50_b1,convstack
model_inputs() { for f in $M/$1.in.*.npy; do b=${f##*/}; b=${b#$1.in.}; echo --input ${b%.npy}=$f; done; }
step 240 $PY bench/scaling.py --grove $G --models $M --only $ONLY --validate 10 --out $OUT/scaling16.json --img $OUT
for x in 2 4; do
  step 60 $G simulate $M/resnet50_b1.onnx $(model_inputs resnet50_b1) --cores 16 --slow-fraction 0.0625 --slow-factor $x --validate 15 --json >> $OUT/extras.txt
done
step 40 $G bench $M/resnet50_b1.onnx $(model_inputs resnet50_b1) --threads 16 --workers-schedule 4:2s,16:2s,8:2s,16:2s --json >> $OUT/extras.txt
step 40 $G bench $M/resnet50_b1.onnx $(model_inputs resnet50_b1) --threads 16 --tile-counts both --runs 20 --json >> $OUT/extras.txt
step 120 $PY bench/threads_vs_ort.py --grove $G --models $M --only mobilenet_v2_b1,resnet50_b1 --runs 15 --out $OUT/ort.json
date
