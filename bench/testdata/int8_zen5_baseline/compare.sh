#!/bin/bash
# The int8 models as ../int8/compare.sh makes them (grove quantize; 8 random-normal images for
# ResNet-50, the stored input for BERT-base), in /tmp/int8. Usage, from the repository root:
# compare.sh THREADS ROUNDS [GROVE_BINARY] (also the runs in ../int8_zen5_fast_epilogue)
# int8 only: grove vs ORT, interleaved
T=$1; R=$2; G=${3:-build/grove}
B=$HOME/.cache/grove/bench; INT8=/tmp/int8
RIN="image=$B/resnet50_b1.in.image.npy"
BIN="--input input_ids=$B/bert_base_s128_b1.in.input_ids.npy --input attention_mask=$B/bert_base_s128_b1.in.attention_mask.npy --input token_type_ids=$B/bert_base_s128_b1.in.token_type_ids.npy"
ORT="env GROVE_ORT_NODE=$HOME/.cache/grove/peers/node_modules/onnxruntime-node node bench/runners/ort_runner.js"
for r in $(seq "$R"); do
  m=$INT8/resnet50.int8.onnx
  echo "t=$T grove resnet50_int8 $($G bench $m -t $T -r 20 --input $RIN 2>&1 | grep -A1 schedule | tail -1 | awk '{print $4}')"
  echo "t=$T ort resnet50_int8 $($ORT --model $m --input $RIN --threads $T --warmup 3 --runs 20 2>/dev/null | grep -o '"median_ms":[0-9.]*' | cut -d: -f2)"
  m=$INT8/bert.int8.onnx
  echo "t=$T grove bert_int8 $($G bench $m -t $T -r 10 $BIN 2>&1 | grep -A1 schedule | tail -1 | awk '{print $4}')"
  echo "t=$T ort bert_int8 $($ORT --model $m $BIN --threads $T --warmup 2 --runs 10 2>/dev/null | grep -o '"median_ms":[0-9.]*' | cut -d: -f2)"
done
