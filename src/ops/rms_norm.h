#pragma once
// RMSNormalization (ONNX opset 23; what LLaMA-style models compute, and what
// graph/fuse_layernorm.cpp rebuilds from x * 1/sqrt(mean(x^2) + eps) * gamma):
// y = x / sqrt(mean(x^2) + epsilon) * scale over the dims from `axis` on. Scale holds one
// value per normalised element or a single value. The reference and the tiles share the row.
#include <cmath>
#include <cstdint>

namespace grove {

// One row of `cols` floats; the sum of squares in double, like LayerNorm's reference.
inline void rms_norm_row(const float* x, const float* scale, bool scale_per_element, int64_t cols, double epsilon,
                         float* y) {
  double squares = 0;
  for (int64_t j = 0; j < cols; ++j) squares += double(x[j]) * x[j];
  const double inv_rms = 1.0 / std::sqrt(squares / static_cast<double>(cols) + epsilon);
  for (int64_t j = 0; j < cols; ++j)
    y[j] = static_cast<float>(x[j] * inv_rms * scale[scale_per_element ? j : 0]);
}

}  // namespace grove
