#!/bin/bash
# The runs behind docs/precision.md's Zen 5 table: `grove bench --precision both`
# (fp32 and bf16 interleaved in one process) per model, thread count and round, and the
# accuracy checks. Usage: run.sh GROVE_BINARY OUT_DIR [ROUNDS]
set -euo pipefail
G=$1; OUT=$2; ROUNDS=${3:-3}
C=${GROVE_BENCH_CACHE:-$HOME/.cache/grove/bench}
mkdir -p "$OUT"
lscpu > "$OUT/lscpu.txt"
bert_in=(-i input_ids=$C/bert_base_s128_b1.in.input_ids.npy -i attention_mask=$C/bert_base_s128_b1.in.attention_mask.npy
         -i token_type_ids=$C/bert_base_s128_b1.in.token_type_ids.npy)
gpt2_in=(-i input_ids=$C/gpt2_s256_b1.in.input_ids.npy)
for r in $(seq 1 "$ROUNDS"); do
  for t in 2 1; do
    "$G" bench $C/resnet50_b1.onnx --threads $t --runs 20 --precision both --json > "$OUT/resnet50_t${t}_r$r.json"
    "$G" bench $C/bert_base_s128_b1.onnx "${bert_in[@]}" --threads $t --runs 20 --precision both --json > "$OUT/bert_t${t}_r$r.json"
    "$G" bench $C/gpt2_s256_b1.onnx "${gpt2_in[@]}" --threads $t --runs 10 --precision both --json > "$OUT/gpt2_t${t}_r$r.json"
  done
done
"$G" bench $C/resnet50_b1.onnx --threads 2 --runs 3 --precision bf16 --check 100 --json > "$OUT/resnet50_check.json"
"$G" bench $C/bert_base_s128_b1.onnx "${bert_in[@]}" --threads 2 --runs 3 --precision bf16 --check 1 --json > "$OUT/bert_check.json"
"$G" bench $C/gpt2_s256_b1.onnx "${gpt2_in[@]}" --threads 2 --runs 3 --precision bf16 --check 1 --json > "$OUT/gpt2_check.json"
