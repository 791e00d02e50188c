#pragma once
// Kernels of DynamicQuantizeLinear (and QuantizeLinear to uint8 with one scale): the range of
// a float array and y = saturate(round_half_even(x / scale) + zero_point) into uint8. The
// avx2 versions divide (vdivps, correctly rounded like the scalar division) and round with
// the same mode, so they give the scalar loops' bits; tests/kernels/test_quantize_kernels.cpp
// checks it on halves, saturation and NaN.
#include <cstddef>
#include <cstdint>

#include "kernels/isa.h"

namespace grove::kernels {

struct FloatRange {
  float lo = 0.0f, hi = 0.0f;  // min(0, x...) and max(0, x...)
  bool has_nan = false;
};

// The range of x with 0 included.
FloatRange range_with_zero(const float* x, size_t n, Isa isa = active_isa());

// y[i] = clamp(round_half_even(x[i] / scale) + zero_point, 0, 255); NaN gives zero_point.
// zero_point must be an integer in [0, 255].
void quantize_u8(const float* x, size_t n, float scale, float zero_point, uint8_t* y, Isa isa = active_isa());

// The per-ISA versions (quantize_scalar.cpp, quantize_avx2.cpp).
FloatRange range_with_zero_scalar(const float* x, size_t n);
void quantize_u8_scalar(const float* x, size_t n, float scale, float zero_point, uint8_t* y);
FloatRange range_with_zero_avx2(const float* x, size_t n);
void quantize_u8_avx2(const float* x, size_t n, float scale, float zero_point, uint8_t* y);

}  // namespace grove::kernels
