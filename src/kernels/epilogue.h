#pragma once
// What a kernel does to its output while it is still in registers:
//   y = act(acc [+ C_old] + bias[col] + row_bias[row] + residual[row][col])
// The residual add comes before the activation because that is where ResNet-style blocks
// put it (relu(conv + shortcut)); a transformer's post-activation skip add has no
// activation after it, so the same order serves both.
//
// This header holds plain types only: it is included by translation units compiled for
// different ISAs, and inline functions here could be merged by the linker across them.
#include <cstddef>
#include <cstdint>

namespace grove::kernels {

enum class Activation {
  identity,
  relu,
  clip,          // min(max(x, alpha), beta)  (ReLU6: alpha 0, beta 6)
  leaky_relu,    // x >= 0 ? x : alpha * x
  sigmoid,
  hard_sigmoid,  // max(0, min(1, alpha * x + beta))  (ONNX defaults 0.2, 0.5)
  hard_swish,    // x * max(0, min(1, x / 6 + 0.5))
  gelu_erf,      // 0.5 x (1 + erf(x / sqrt 2))
  gelu_tanh,     // 0.5 x (1 + tanh(sqrt(2/pi) (x + 0.044715 x^3)))
  swish,         // x * sigmoid(alpha * x)  (SiLU: alpha 1; the sigmoid GELU: alpha 1.702)
};

struct ActivationParams {
  Activation kind = Activation::identity;
  float alpha = 0.0f;
  float beta = 0.0f;
};

struct Epilogue {
  const float* bias = nullptr;      // one value per output column of the call, or null
  const float* row_bias = nullptr;  // one value per output row (NCHW conv: per channel), or null
  const float* residual = nullptr;  // a matrix shaped like C, or null; must not alias C
  size_t residual_stride = 0;       // elements between residual rows
  // The residual stored as bfloat16 instead (AMX kernel only, kernels/gemm.h): widened
  // exactly, so the sum is the one the float residual of the same values gives.
  const uint16_t* residual_bf16 = nullptr;
  ActivationParams activation;
};

// The scalar definition of each activation, used by the portable kernel. (The testers use
// their own double-precision oracle, not this.)
float apply_activation(float x, const ActivationParams& params);

}  // namespace grove::kernels
