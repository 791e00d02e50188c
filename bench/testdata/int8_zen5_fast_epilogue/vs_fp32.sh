#!/bin/bash
# grove int8 (the QDQ models of compare.sh) against grove fp32 on the float models,
# alternating, p50 of 20 runs (BERT 10). Usage, from the repository root:
# vs_fp32.sh THREADS ROUNDS [GROVE_BINARY]
T=$1; R=$2; G=${3:-build/grove}
B=$HOME/.cache/grove/bench; INT8=/tmp/int8
BIN="--input input_ids=$B/bert_base_s128_b1.in.input_ids.npy --input attention_mask=$B/bert_base_s128_b1.in.attention_mask.npy --input token_type_ids=$B/bert_base_s128_b1.in.token_type_ids.npy"
p50() { "$G" bench "$@" --json 2>/dev/null | python3 -c "import json,sys;print(json.load(sys.stdin)['results'][0]['p50_ms'])"; }
for r in $(seq "$R"); do
  f=$(p50 $B/resnet50_b1.onnx -t $T -r 20); i=$(p50 $INT8/resnet50.int8.onnx -t $T -r 20 --input image=$B/resnet50_b1.in.image.npy)
  echo "t=$T resnet50 fp32 $f int8 $i speedup $(python3 -c "print(round($f/$i,2))")"
  f=$(p50 $B/bert_base_s128_b1.onnx -t $T -r 10 $BIN); i=$(p50 $INT8/bert.int8.onnx -t $T -r 10 $BIN)
  echo "t=$T bert fp32 $f int8 $i speedup $(python3 -c "print(round($f/$i,2))")"
done
