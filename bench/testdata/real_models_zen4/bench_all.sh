#!/bin/bash
# The measurements in this folder, interleaved rounds, 2 threads unless said; Zen 4.
cd /work/main
G=./build/grove; B=~/.cache/grove/bench; ORT="node bench/runners/ort_runner.js"
export NODE_PATH=~/.cache/grove/peers/node_modules
D=~/.cache/grove/npm/@imgly+background-removal-data-1.4.5/package/dist
gb() { $G bench "$@" --json 2>/dev/null | /usr/bin/python3 -c "import json,sys; print(json.load(sys.stdin)['results'][0]['p50_ms'])" 2>/dev/null || echo ERR; }
ob() { $ORT "$@" 2>/dev/null | /usr/bin/python3 -c "import json,sys; print(json.loads(sys.stdin.readlines()[-1])['median_ms'])" 2>/dev/null || echo ERR; }
ins() { local d=$1 m=$2; for f in $d/$m.in.*.npy; do [ -e "$f" ] || continue; n=$(basename $f .npy); n=${n#$m.in.}; echo -n " --input $n=$f"; done; }
echo "== opsets (grove, 2 threads)"
for r in 1 2 3; do
  for m in resnet50_b1 mobilenet_v2_b1 yolov3_416_b1 bert_base_s128_b1 gpt2_s256_b1; do
    runs=10; case $m in gpt2*|yolov3*) runs=5;; mobilenet*) runs=30;; esac
    for d in /tmp/op11 /tmp/op13 $B; do echo "$r $m $(basename $d) $(gb $d/$m.onnx $(ins $d $m) -t 2 -r $runs -w 2)"; done
  done
done
echo "== opset 13 vs ORT (2 threads)"
for r in 1 2 3; do
  for m in bert_base_s128_b1 gpt2_s256_b1; do
    runs=10; case $m in gpt2*) runs=5;; esac
    echo "$r $m grove-op13 $(gb /tmp/op13/$m.onnx $(ins /tmp/op13 $m) -t 2 -r $runs -w 2)"
    echo "$r $m ort-op13 $(ob --model /tmp/op13/$m.onnx $(ins /tmp/op13 $m) --threads 2 --warmup 2 --runs $runs)"
    echo "$r $m ort-op17 $(ob --model $B/$m.onnx $(ins $B $m) --threads 2 --warmup 2 --runs $runs)"
  done
done
echo "== IS-Net (fp16-converted 'medium', dynamically quantized 'small')"
for r in 1 2; do
  for t in 1 2; do
    for m in models_medium models_small; do
      echo "$r t$t $m grove $(gb $D/$m.onnx --input input=/tmp/isnet_in.npy -t $t -r 3 -w 1)"
      echo "$r t$t $m ort $(ob --model $D/$m.onnx --input input=/tmp/isnet_in.npy --threads $t --warmup 1 --runs 3)"
    done
  done
done
echo "== float16 conversions and dynamic quantization vs float32 (grove)"
for r in 1 2 3; do
  for t in 1 2; do
    echo "$r t$t mbv2 fp32 $(gb $B/mobilenet_v2_b1.onnx -t $t -r 30 -w 3) fp16 $(gb /tmp/mbv2_fp16.onnx -t $t -r 30 -w 3)"
    echo "$r t$t resnet50 fp32 $(gb $B/resnet50_b1.onnx -t $t -r 10 -w 2) fp16 $(gb /tmp/resnet50_fp16.onnx -t $t -r 10 -w 2) dynq $(gb /tmp/r50_dyn.onnx -t $t -r 10 -w 2)"
  done
done
echo done
