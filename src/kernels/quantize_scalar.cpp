#include <algorithm>
#include <cmath>
#include <string>

#include "grove/error.h"
#include "kernels/quantize.h"

namespace grove::kernels {

FloatRange range_with_zero_scalar(const float* x, size_t n) {
  FloatRange r;
  for (size_t i = 0; i < n; ++i) {
    r.has_nan |= x[i] != x[i];
    r.lo = std::min(r.lo, x[i]);
    r.hi = std::max(r.hi, x[i]);
  }
  return r;
}

void quantize_u8_scalar(const float* x, size_t n, float scale, float zero_point, uint8_t* y) {
  for (size_t i = 0; i < n; ++i) {
    float q = x[i] != x[i] ? zero_point : std::nearbyint(x[i] / scale) + zero_point;
    y[i] = static_cast<uint8_t>(std::clamp(q, 0.0f, 255.0f));
  }
}

FloatRange range_with_zero(const float* x, size_t n, Isa isa) {
  if (!isa_supported(isa)) throw Error("quantize: ISA " + std::string(isa_name(isa)) + " is not supported on this CPU");
  return isa == Isa::scalar ? range_with_zero_scalar(x, n) : range_with_zero_avx2(x, n);
}

void quantize_u8(const float* x, size_t n, float scale, float zero_point, uint8_t* y, Isa isa) {
  if (!isa_supported(isa)) throw Error("quantize: ISA " + std::string(isa_name(isa)) + " is not supported on this CPU");
  if (isa == Isa::scalar) quantize_u8_scalar(x, n, scale, zero_point, y);
  else quantize_u8_avx2(x, n, scale, zero_point, y);
}

}  // namespace grove::kernels
