#!/bin/bash
# Interleaved rounds on an AMX CPU: grove int8 on AMX, grove int8 on VNNI (GROVE_ISA=avx512
# turns AMX off), ONNX Runtime int8, grove fp32, on ResNet-50 and BERT-base.
#   compare.sh THREADS ROUNDS
# The int8 models: see ../int8/compare.sh (grove quantize; 8 random-normal calibration images
# for ResNet-50, the stored input for BERT-base), in $INT8.
T=$1; R=$2
B=${BENCH:-$HOME/.cache/grove/bench}; INT8=${INT8:-/tmp/int8}; G=${GROVE:-build/grove}
RIN="image=$B/resnet50_b1.in.image.npy"
BIN="--input input_ids=$B/bert_base_s128_b1.in.input_ids.npy --input attention_mask=$B/bert_base_s128_b1.in.attention_mask.npy --input token_type_ids=$B/bert_base_s128_b1.in.token_type_ids.npy"
ORT="env GROVE_ORT_NODE=$HOME/.cache/grove/peers/node_modules/onnxruntime-node node $(dirname "$0")/../../runners/ort_runner.js"
p50() { grep -A1 schedule | tail -1 | awk '{print $4}'; }
ort() { grep -o '"median_ms":[0-9.]*' | cut -d: -f2; }
for r in $(seq "$R"); do
  m=$INT8/resnet50.int8.onnx
  echo "t=$T grove resnet50_int8_amx $($G bench $m -t $T -r 20 --input $RIN 2>&1 | p50)"
  echo "t=$T grove resnet50_int8_vnni $(GROVE_ISA=avx512 $G bench $m -t $T -r 20 --input $RIN 2>&1 | p50)"
  echo "t=$T ort resnet50_int8 $($ORT --model $m --input $RIN --threads $T --warmup 3 --runs 20 2>/dev/null | ort)"
  echo "t=$T grove resnet50_fp32 $($G bench $B/resnet50_b1.onnx -t $T -r 20 --input $RIN 2>&1 | p50)"
  echo "t=$T ort resnet50_fp32 $($ORT --model $B/resnet50_b1.onnx --input $RIN --threads $T --warmup 3 --runs 20 2>/dev/null | ort)"
  m=$INT8/bert.int8.onnx
  echo "t=$T grove bert_int8_amx $($G bench $m -t $T -r 10 $BIN 2>&1 | p50)"
  echo "t=$T grove bert_int8_vnni $(GROVE_ISA=avx512 $G bench $m -t $T -r 10 $BIN 2>&1 | p50)"
  echo "t=$T ort bert_int8 $($ORT --model $m $BIN --threads $T --warmup 2 --runs 10 2>/dev/null | ort)"
  echo "t=$T grove bert_fp32 $($G bench $B/bert_base_s128_b1.onnx -t $T -r 10 $BIN 2>&1 | p50)"
  echo "t=$T ort bert_fp32 $($ORT --model $B/bert_base_s128_b1.onnx $BIN --threads $T --warmup 2 --runs 10 2>/dev/null | ort)"
done
