#include "kernels/requantize.h"

#include <algorithm>
#include <cmath>

namespace grove::kernels {

void requantize_scalar(const int32_t* acc, size_t n, const RequantizeParams& p, bool is_signed, void* out) {
  constexpr float kMagic = 12582912.0f;  // 1.5 * 2^23: adding and subtracting it rounds half to even
  constexpr float kBound = 1 << 20;
  for (size_t i = 0; i < n; ++i) {
    float v = static_cast<float>(int64_t{acc[i]} + p.add) * p.multiplier;
    if (std::isnan(v)) v = 0.0f;
    v = std::clamp(v, -kBound, kBound);
    const float q = std::clamp(((v + kMagic) - kMagic) + p.zero_point, p.lo, p.hi);
    if (is_signed) static_cast<int8_t*>(out)[i] = static_cast<int8_t>(q);
    else static_cast<uint8_t*>(out)[i] = static_cast<uint8_t>(q);
  }
}

void requantize(const int32_t* acc, size_t n, const RequantizeParams& p, bool is_signed, void* out, Isa isa) {
  if (isa == Isa::avx512 && isa_supported(Isa::avx512)) requantize_avx512(acc, n, p, is_signed, out);
  else requantize_scalar(acc, n, p, is_signed, out);
}

}  // namespace grove::kernels
