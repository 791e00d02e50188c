#pragma once
// Requantization of int32 sums to 8 bits, the epilogue of QLinearConv / QLinearMatMul:
//   y[i] = clamp(round_half_even(float(acc[i] + add) * multiplier) + zero_point, lo, hi)
// in float32, the reference's arithmetic (ops/quant_util.h saturate_round), with a NaN
// product giving the zero point. lo and hi are the dtype's range, lo raised to the zero point
// for a fused Relu. The scalar loop adds in int64; the avx512 kernel adds in int32, so callers
// use it only where acc + add cannot overflow (then it is bit-identical: tests/kernels).
#include <cstddef>
#include <cstdint>

#include "kernels/isa.h"

namespace grove::kernels {

struct RequantizeParams {
  int64_t add = 0;
  float multiplier = 1, zero_point = 0, lo = 0, hi = 255;
};

// `out` is uint8 when is_signed is false, else int8.
void requantize(const int32_t* acc, size_t n, const RequantizeParams& p, bool is_signed, void* out,
                Isa isa = active_isa());

void requantize_scalar(const int32_t* acc, size_t n, const RequantizeParams& p, bool is_signed, void* out);
void requantize_avx512(const int32_t* acc, size_t n, const RequantizeParams& p, bool is_signed, void* out);

}  // namespace grove::kernels
