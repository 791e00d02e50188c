#!/bin/bash
# interleaved rounds: grove fp32, grove int8, ORT fp32, ORT int8 for ResNet-50 and BERT-base
T=$1; R=$2
B=$HOME/.cache/grove/bench
RIN="image=$B/resnet50_b1.in.image.npy"
BIN="--input input_ids=$B/bert_base_s128_b1.in.input_ids.npy --input attention_mask=$B/bert_base_s128_b1.in.attention_mask.npy --input token_type_ids=$B/bert_base_s128_b1.in.token_type_ids.npy"
ORT="env GROVE_ORT_NODE=$HOME/.cache/grove/peers/node_modules/onnxruntime-node node /work/main/bench/runners/ort_runner.js"
for r in $(seq $R); do
  for pair in "resnet50_fp32:$B/resnet50_b1.onnx" "resnet50_int8:/tmp/resnet50.int8.onnx"; do
    n=${pair%%:*}; m=${pair#*:}
    echo "grove $n $(/work/main/build/grove bench $m -t $T -r 20 --input $RIN 2>&1 | grep -A1 schedule | tail -1 | awk '{print $4}')"
    echo "ort $n $(cd /tmp; $ORT --model $m --input $RIN --threads $T --warmup 3 --runs 20 2>/dev/null | grep -o '"median_ms":[0-9.]*' | cut -d: -f2)"
  done
  for pair in "bert_fp32:$B/bert_base_s128_b1.onnx" "bert_int8:/tmp/bert.int8.onnx"; do
    n=${pair%%:*}; m=${pair#*:}
    echo "grove $n $(/work/main/build/grove bench $m -t $T -r 10 $BIN 2>&1 | grep -A1 schedule | tail -1 | awk '{print $4}')"
    echo "ort $n $(cd /tmp; $ORT --model $m ${BIN//--input/--input} --threads $T --warmup 2 --runs 10 2>/dev/null | grep -o '"median_ms":[0-9.]*' | cut -d: -f2)"
  done
done
