#pragma once
// Two small models built in memory for runtime tests: a residual CNN and a 2-layer
// transformer encoder (self-attention with an additive mask, softmax, LayerNorm, erf-GELU
// MLP). Weights are deterministic pseudo-random values.
#include <cmath>
#include <string>
#include <vector>

#include "onnx_builder.h"

namespace grove::test {

inline std::vector<float> pseudo_random(size_t n, uint32_t seed, float scale) {
  std::vector<float> v(n);
  uint32_t s = seed * 2654435761u + 1;
  for (auto& x : v) {
    s = s * 1664525u + 1013904223u;
    x = scale * (static_cast<float>(s >> 8) / 16777216.f * 2.f - 1.f);
  }
  return v;
}

// x[1,8,16,16] -> conv3x3(16) relu -> conv3x3(16) + x -> relu -> conv3x3 s2 (32) -> relu
//   -> GlobalAveragePool -> Flatten -> Gemm(10)
inline std::string residual_cnn_bytes() {
  constexpr int kFloat = onnx::TensorProto::FLOAT;
  OnnxBuilder b(13);
  b.input("x", kFloat, {1, 8, 16, 16}).output("logits", kFloat, {1, 10});
  auto conv = [&](const std::string& in, const std::string& out, int cin, int cout, int stride, uint32_t seed) {
    b.initializer_f32(out + "_w", {cout, cin, 3, 3}, pseudo_random(size_t(cout) * cin * 9, seed, 0.2f));
    b.initializer_f32(out + "_b", {cout}, pseudo_random(size_t(cout), seed + 100, 0.1f));
    auto& n = b.node("Conv", {in, out + "_w", out + "_b"}, {out}, out);
    OnnxBuilder::attr_ints(n, "pads", {1, 1, 1, 1});
    OnnxBuilder::attr_ints(n, "strides", {stride, stride});
  };
  conv("x", "c1", 8, 8, 1, 1);
  b.node("Relu", {"c1"}, {"r1"}, "relu1");
  conv("r1", "c2", 8, 8, 1, 2);
  b.node("Add", {"c2", "x"}, {"res"}, "residual");
  b.node("Relu", {"res"}, {"r2"}, "relu2");
  conv("r2", "c3", 8, 16, 2, 3);
  b.node("Relu", {"c3"}, {"r3"}, "relu3");
  b.node("GlobalAveragePool", {"r3"}, {"pooled"}, "pool");
  b.node("Flatten", {"pooled"}, {"flat"}, "flatten");
  b.initializer_f32("fc_w", {10, 16}, pseudo_random(160, 4, 0.3f));
  b.initializer_f32("fc_b", {10}, pseudo_random(10, 5, 0.1f));
  OnnxBuilder::attr_int(b.node("Gemm", {"flat", "fc_w", "fc_b"}, {"logits"}, "fc"), "transB", 1);
  return b.bytes();
}

// h[1,S,32] (S=12), mask[1,1,1,S] additive -> 2 encoder layers (4 heads of 8) -> out[1,S,32].
// causal: GPT-2's attention as torch exports it, the scaled scores first through
// Where(lower-triangular keep, scores, -FLT_MAX), then the additive mask.
inline std::string transformer_bytes(bool causal = false, bool fused_qkv = false) {
  constexpr int kFloat = onnx::TensorProto::FLOAT;
  constexpr int S = 12, H = 32, heads = 4, dh = 8, ff = 64;
  OnnxBuilder b(17);
  b.input("h", kFloat, {1, S, H}).input("mask", kFloat, {1, 1, 1, S}).output("out", kFloat, {1, S, H});
  b.initializer_i64("split_heads", {4}, {1, S, heads, dh});
  b.initializer_i64("merge_heads", {3}, {1, S, H});
  b.initializer_i64("qkv_split", {3}, {H, H, H});
  b.initializer_f32("scale", {}, {1.f / std::sqrt(float(dh))});
  b.initializer_f32("sqrt_half", {}, {0.70710678f});
  b.initializer_f32("one", {}, {1.f});
  b.initializer_f32("half", {}, {0.5f});
  std::vector<bool> lower(S * S);
  for (int i = 0; i < S * S; ++i) lower[size_t(i)] = i % S <= i / S;
  b.initializer_bool("causal_keep", {1, 1, S, S}, lower);
  b.initializer_f32("lowest", {}, {-3.4028234663852886e38f});
  std::string x = "h";
  uint32_t seed = 10;
  for (int layer = 0; layer < 2; ++layer) {
    std::string p = "l" + std::to_string(layer) + "_";
    auto linear = [&](const std::string& in, const std::string& out, int k, int n) {
      b.initializer_f32(out + "_w", {k, n}, pseudo_random(size_t(k) * n, seed++, 0.3f));
      b.initializer_f32(out + "_b", {n}, pseudo_random(size_t(n), seed++, 0.1f));
      b.node("MatMul", {in, out + "_w"}, {out + "_mm"}, out + "_matmul");
      b.node("Add", {out + "_mm", out + "_b"}, {out}, out + "_bias");
    };
    auto heads_of = [&](const std::string& in, const std::string& out, std::vector<int64_t> perm) {
      b.node("Reshape", {in, "split_heads"}, {out + "_r"}, out + "_reshape");
      OnnxBuilder::attr_ints(b.node("Transpose", {out + "_r"}, {out}, out + "_transpose"), "perm", perm);
    };
    auto layer_norm = [&](const std::string& in, const std::string& out) {
      b.initializer_f32(out + "_g", {H}, pseudo_random(H, seed++, 0.2f));
      b.initializer_f32(out + "_beta", {H}, pseudo_random(H, seed++, 0.1f));
      OnnxBuilder::attr_int(b.node("LayerNormalization", {in, out + "_g", out + "_beta"}, {out}, out), "axis", -1);
    };
    if (fused_qkv) {  // GPT-2's form: one projection, split along its last axis
      linear(x, p + "qkv", H, 3 * H);
      OnnxBuilder::attr_int(b.node("Split", {p + "qkv", "qkv_split"}, {p + "q", p + "k", p + "v"}, p + "split"), "axis", 2);
    } else {
      linear(x, p + "q", H, H);
      linear(x, p + "k", H, H);
      linear(x, p + "v", H, H);
    }
    heads_of(p + "q", p + "qh", {0, 2, 1, 3});
    heads_of(p + "k", p + "kt", {0, 2, 3, 1});
    heads_of(p + "v", p + "vh", {0, 2, 1, 3});
    b.node("MatMul", {p + "qh", p + "kt"}, {p + "scores"}, p + "qk");
    b.node("Mul", {p + "scores", "scale"}, {p + "scaled"}, p + "scale");
    std::string scaled = p + "scaled";
    if (causal) {
      b.node("Where", {"causal_keep", scaled, "lowest"}, {p + "causal"}, p + "causal_where");
      scaled = p + "causal";
    }
    b.node("Add", {scaled, "mask"}, {p + "masked"}, p + "mask");
    OnnxBuilder::attr_int(b.node("Softmax", {p + "masked"}, {p + "probs"}, p + "softmax"), "axis", -1);
    b.node("MatMul", {p + "probs", p + "vh"}, {p + "ctx"}, p + "pv");
    OnnxBuilder::attr_ints(b.node("Transpose", {p + "ctx"}, {p + "ctx_t"}, p + "ctx_transpose"), "perm", {0, 2, 1, 3});
    b.node("Reshape", {p + "ctx_t", "merge_heads"}, {p + "ctx_m"}, p + "merge");
    linear(p + "ctx_m", p + "o", H, H);
    b.node("Add", {p + "o", x}, {p + "res1"}, p + "residual1");
    layer_norm(p + "res1", p + "ln1");
    linear(p + "ln1", p + "ff1", H, ff);
    // GELU(x) = 0.5 x (1 + erf(x / sqrt 2)), as torch exports it.
    b.node("Mul", {p + "ff1", "sqrt_half"}, {p + "g0"}, p + "gelu_scale");
    b.node("Erf", {p + "g0"}, {p + "g1"}, p + "gelu_erf");
    b.node("Add", {p + "g1", "one"}, {p + "g2"}, p + "gelu_add");
    b.node("Mul", {p + "ff1", p + "g2"}, {p + "g3"}, p + "gelu_mul");
    b.node("Mul", {p + "g3", "half"}, {p + "gelu"}, p + "gelu_half");
    linear(p + "gelu", p + "ff2", ff, H);
    b.node("Add", {p + "ff2", p + "ln1"}, {p + "res2"}, p + "residual2");
    std::string out = layer == 1 ? "out" : p + "ln2";
    layer_norm(p + "res2", out);
    x = out;
  }
  return b.bytes();
}

}  // namespace grove::test
