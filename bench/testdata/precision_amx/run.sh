#!/usr/bin/env bash
# fp32 against bf16 (AMX) interleaved in one process per round (grove bench --precision both),
# 3 rounds per model and thread count; then bf16 accuracy (--check). Writes JSON beside this file.
set -euo pipefail
cd "$(dirname "$0")"
G=../../../build/grove
B=~/.cache/grove/bench
BERT="-i input_ids=$B/bert_base_s128_b1.in.input_ids.npy -i token_type_ids=$B/bert_base_s128_b1.in.token_type_ids.npy -i attention_mask=$B/bert_base_s128_b1.in.attention_mask.npy"
lscpu > lscpu.txt
for round in 1 2 3; do
  for t in 1 2; do
    $G bench $B/resnet50_b1.onnx -i image=$B/resnet50_b1.in.image.npy --precision both -t $t -r 20 -w 3 --json > resnet50_t${t}_r${round}.json
    $G bench $B/bert_base_s128_b1.onnx $BERT --precision both -t $t -r 10 -w 2 --json > bert_base_t${t}_r${round}.json
    $G bench $B/gpt2_s256_b1.onnx -i input_ids=$B/gpt2_s256_b1.in.input_ids.npy --precision both -t $t -r 5 -w 1 --json > gpt2_t${t}_r${round}.json
  done
done
$G bench $B/resnet50_b1.onnx -i image=$B/resnet50_b1.in.image.npy --precision bf16 -t 2 -r 2 -w 1 --check 50 --json > resnet50_check.json
$G bench $B/bert_base_s128_b1.onnx $BERT --precision bf16 -t 2 -r 2 -w 1 --check 1 --json > bert_base_check.json
$G bench $B/gpt2_s256_b1.onnx -i input_ids=$B/gpt2_s256_b1.in.input_ids.npy --precision bf16 -t 2 -r 2 -w 1 --check 1 --json > gpt2_check.json
