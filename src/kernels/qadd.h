#pragma once
// The quantized residual add of QDQ models, grove.internal QLinearAdd (ops/quant/quant_add.cpp):
//   y = Q(act(DQ(a) + DQ(b)))  with DQ(x) = float(x - zero) * scale and
//   Q(v) = clamp(round_half_even(v / y_scale) + y_zero, lo, hi)
// in float32, the operations of the DequantizeLinear -> Add [-> Relu] -> QuantizeLinear chain
// it replaces, in their order, so the bytes are the chain's. a, b and y all uint8 or all int8.
// The avx512 kernel is bit-identical to the scalar loop (tests/kernels/test_quantize_kernels.cpp).
#include <cstddef>
#include <cstdint>

#include "kernels/isa.h"

namespace grove::kernels {

struct QAddParams {
  float a_scale = 1, a_zero = 0, b_scale = 1, b_zero = 0, y_scale = 1, y_zero = 0;
  float lo = 0, hi = 255;  // the dtype's range
  bool relu = false;
  bool is_signed = false;  // int8 operands, else uint8
};

void qadd(const void* a, const void* b, size_t n, const QAddParams& p, void* y, Isa isa = active_isa());
void qadd_scalar(const void* a, const void* b, size_t n, const QAddParams& p, void* y);
void qadd_avx512(const void* a, const void* b, size_t n, const QAddParams& p, void* y);

// Whether these scales can make a NaN sum (a scale past 1e30, y_scale NaN or 0): only then do
// the vector loops need the scalar loop's NaN -> 0 step.
bool qadd_may_be_nan(const QAddParams& p);

}  // namespace grove::kernels
