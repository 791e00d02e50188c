#!/bin/bash
# The measurements in this folder, on Emerald Rapids (family 6 model 207, KVM, 2 cores, AMX).
#   precision_both.txt: grove bench --precision both (fp32 and bf16 interleaved in one
#     process), 2 then 1 threads, ResNet-50 (20 runs, --check 1), BERT-base (10), GPT-2 (5).
#   int8_resnet50_vs_ort.txt: "THREADS grove_p50_ms ort_median_ms", grove and ONNX Runtime
#     1.20.1 alternating, 8 rounds of 30 runs each, on the grove-quantized ResNet-50
#     (bench/testdata/int8/compare.sh makes /tmp/int8/resnet50.int8.onnx).
B=${BENCH:-$HOME/.cache/grove/bench}; G=${GROVE:-build/grove}
BIN="--input input_ids=$B/bert_base_s128_b1.in.input_ids.npy --input attention_mask=$B/bert_base_s128_b1.in.attention_mask.npy --input token_type_ids=$B/bert_base_s128_b1.in.token_type_ids.npy"
for t in 2 1; do
  echo "== $t threads"
  $G bench $B/resnet50_b1.onnx --precision both --check 1 -t $t -r 20 --input image=$B/resnet50_b1.in.image.npy | grep -E "^aspen|speedup|check"
  $G bench $B/bert_base_s128_b1.onnx --precision both -t $t -r 10 $BIN | grep -E "^aspen|speedup"
  $G bench $B/gpt2_s256_b1.onnx --precision both -t $t -r 5 --input input_ids=$B/gpt2_s256_b1.in.input_ids.npy | grep -E "^aspen|speedup"
done
