#pragma once
// RMSNormalization (ONNX opset 23; what LLaMA-style models compute, and what
// graph/fuse_layernorm.cpp rebuilds from x * 1/sqrt(mean(x^2) + eps) * gamma):
// y = x / sqrt(mean(x^2) + epsilon) * scale over the dims from `axis` on. Scale holds one
// value per normalised element or a single value. The reference and the tiles share the row
// (the tests check it against the definition in double).
#include <cmath>
#include <cstdint>

namespace grove {

// One row of `cols` floats. The squares are summed in 16 float lanes (independent, so the
// compiler vectorises both loops), the lanes then in double: as close to the double oracle
// as the LayerNorm vector kernel's float sums.
inline void rms_norm_row(const float* x, const float* scale, bool scale_per_element, int64_t cols, double epsilon,
                         float* y) {
  constexpr int64_t kLanes = 16;
  float lanes[kLanes] = {};
  int64_t j = 0;
  for (; j + kLanes <= cols; j += kLanes)
    for (int64_t l = 0; l < kLanes; ++l) lanes[l] += x[j + l] * x[j + l];
  double squares = 0;
  for (; j < cols; ++j) squares += double(x[j]) * x[j];
  for (float lane : lanes) squares += lane;
  const auto inv_rms = static_cast<float>(1.0 / std::sqrt(squares / static_cast<double>(cols) + epsilon));
  if (scale_per_element) {
    for (int64_t k = 0; k < cols; ++k) y[k] = x[k] * inv_rms * scale[k];
  } else {
    const float s = inv_rms * scale[0];
    for (int64_t k = 0; k < cols; ++k) y[k] = x[k] * s;
  }
}

}  // namespace grove
