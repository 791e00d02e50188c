#!/bin/bash
# Interleaved rounds: grove fp32, grove int8, ORT fp32, ORT int8 on ResNet-50 and BERT-base.
#   compare.sh THREADS ROUNDS
# Models: the suite's (bench/models/export_bench_models.py) and their int8 versions from
#   grove quantize resnet50_b1.onnx --calibrate DIR_OF_8_RANDOM_NORMAL_IMAGES -o $INT8/resnet50.int8.onnx
#   grove quantize bert_base_s128_b1.onnx --calibrate DIR_WITH_ONE_SAMPLE_DIR -o $INT8/bert.int8.onnx
# (a sample dir holds input_ids.npy, attention_mask.npy, token_type_ids.npy: the stored inputs).
T=$1; R=$2
B=${BENCH:-$HOME/.cache/grove/bench}; INT8=${INT8:-/tmp}; G=${GROVE:-build/grove}
RIN="image=$B/resnet50_b1.in.image.npy"
BIN="--input input_ids=$B/bert_base_s128_b1.in.input_ids.npy --input attention_mask=$B/bert_base_s128_b1.in.attention_mask.npy --input token_type_ids=$B/bert_base_s128_b1.in.token_type_ids.npy"
ORT="env GROVE_ORT_NODE=$HOME/.cache/grove/peers/node_modules/onnxruntime-node node $(dirname "$0")/../../runners/ort_runner.js"
for r in $(seq "$R"); do
  for pair in "resnet50_fp32:$B/resnet50_b1.onnx" "resnet50_int8:$INT8/resnet50.int8.onnx"; do
    n=${pair%%:*}; m=${pair#*:}
    echo "grove $n $($G bench $m -t $T -r 20 --input $RIN 2>&1 | grep -A1 schedule | tail -1 | awk '{print $4}')"
    echo "ort $n $($ORT --model $m --input $RIN --threads $T --warmup 3 --runs 20 2>/dev/null | grep -o '"median_ms":[0-9.]*' | cut -d: -f2)"
  done
  for pair in "bert_fp32:$B/bert_base_s128_b1.onnx" "bert_int8:$INT8/bert.int8.onnx"; do
    n=${pair%%:*}; m=${pair#*:}
    echo "grove $n $($G bench $m -t $T -r 10 $BIN 2>&1 | grep -A1 schedule | tail -1 | awk '{print $4}')"
    echo "ort $n $($ORT --model $m $BIN --threads $T --warmup 2 --runs 10 2>/dev/null | grep -o '"median_ms":[0-9.]*' | cut -d: -f2)"
  done
done
