#!/bin/bash
# grove (--layout both, tuning off) and ONNX Runtime, interleaved per model and thread count.
M=~/.cache/grove/bench
G=/work/main/build/grove
for round in 1 2 3; do
for t in 1 2; do
for m in resnet50_b1 mobilenet_v2_b1 resnext50_b1 vgg16_b1 googlenet_b1 squeezenet_b1 yolov3_416_b1; do
  runs=15; [ $m = yolov3_416_b1 ] && runs=6; [ $m = vgg16_b1 ] && runs=8
  in=$(ls $M/$m.in.*.npy | head -1); name=$(basename $in .npy); name=${name#$m.in.}
  g=$($G bench $M/$m.onnx --threads $t --layout both --tuning off --runs $runs --warmup 2 --json 2>/dev/null | /usr/bin/python3 -c 'import json,sys; d=json.load(sys.stdin); print(" ".join("%s=%.3f"%(r["layout"],r["p50_ms"]) for r in d["results"]))')
  o=$(NODE_PATH=~/.cache/grove/peers/node_modules node /work/main/bench/runners/ort_runner.js --model $M/$m.onnx --input $name=$in --threads $t --warmup 2 --runs $runs 2>/dev/null | /usr/bin/python3 -c 'import json,sys; print("ort=%.3f"%json.load(sys.stdin)["median_ms"])')
  echo "round=$round threads=$t model=$m $g $o"
done; done; done
