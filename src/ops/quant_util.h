#pragma once
// Helpers shared by the quantized ops (quantize.cpp, quant_matmul.cpp, conv.cpp): the
// quantized dtypes grove computes in, saturating round-half-to-even, and the scale check.
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <limits>
#include <string>

#include "graph/tensor.h"

namespace grove {

inline bool is_quantized_dtype(DType t) {
  return t == DType::u8 || t == DType::i8 || t == DType::u16 || t == DType::i16;
}

inline void require_quantized_dtype(DType t, const char* what) {
  if (!is_quantized_dtype(t))
    throw Unsupported(std::string(what) + " of dtype " + std::string(dtype_name(t)) +
                      " is not supported (uint8, int8, uint16 and int16 are)");
}

// Calls f(Q{}) for the quantized dtypes.
template <class F>
void visit_quantized(DType t, F&& f) {
  switch (t) {
    case DType::u8: f(uint8_t{}); return;
    case DType::i8: f(int8_t{}); return;
    case DType::u16: f(uint16_t{}); return;
    case DType::i16: f(int16_t{}); return;
    default: require_quantized_dtype(t, "quantized value");
  }
}

// Rounds half to even (the default rounding mode) without a libm call, so loops over it
// vectorize: adding 1.5 * 2^23 leaves no fraction bits, so the sum rounds to an integer, and
// subtracting it back is exact. Valid for |value| < 2^22, which callers clamp to. (Needs
// IEEE float semantics: grove is never built with -ffast-math, which could fold it to value.)
inline float round_half_even(float value) {
  constexpr float kMagic = 12582912.0f;  // 1.5 * 2^23
  return (value + kMagic) - kMagic;
}

// saturate(round_half_even(value) + zero_point) into Q. NaN quantizes to the zero point.
template <class Q>
Q saturate_round(float value, float zero_point) {
  constexpr float kBound = 1 << 20;  // past every 16-bit range, so clamping first changes no result
  if (std::isnan(value)) value = 0.0f;
  float q = round_half_even(std::clamp(value, -kBound, kBound)) + zero_point;
  q = std::clamp(q, static_cast<float>(std::numeric_limits<Q>::min()), static_cast<float>(std::numeric_limits<Q>::max()));
  return static_cast<Q>(q);
}

// A scale that values are divided by must be finite and non-zero: a zero scale (a corrupt or
// degenerate model) would turn every value into inf or NaN before saturation.
inline void check_scales(const Tensor& scale, const char* what) {
  std::vector<double> s = scale.to_f64();
  for (size_t i = 0; i < s.size(); ++i)
    if (s[i] == 0.0 || !std::isfinite(s[i]))
      throw Error(std::string(what) + " entry " + std::to_string(i) + " is " + std::to_string(s[i]) +
                  "; a quantization scale must be finite and non-zero");
}

}  // namespace grove
