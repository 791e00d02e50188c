#!/bin/bash
# grove (--layout both, tuning off) and ONNX Runtime, one after the other per model and thread count.
M=${MODELS:-/tmp/m2}
G=/work/main/build/grove
for round in 1 2 3; do
for t in 1 2; do
for m in googlenet squeezenet1_1; do
  runs=20
  in=$M/$m.in.image.npy
  g=$($G bench $M/$m.onnx --threads $t --layout both --tuning off --runs $runs --warmup 3 --json 2>/dev/null | /usr/bin/python3 -c 'import json,sys; d=json.load(sys.stdin); print(" ".join("%s=%.3f"%(r["layout"],r["p50_ms"]) for r in d["results"]))')
  o=$(NODE_PATH=~/.cache/grove/peers/node_modules node /work/main/bench/runners/ort_runner.js --model $M/$m.onnx --input image=$in --threads $t --warmup 3 --runs $runs 2>/dev/null | /usr/bin/python3 -c 'import json,sys; print("ort=%.3f"%json.load(sys.stdin)["median_ms"])')
  echo "round=$round threads=$t model=$m $g $o"
done; done; done
