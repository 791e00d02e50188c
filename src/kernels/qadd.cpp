#include "kernels/qadd.h"

#include <algorithm>
#include <cmath>

namespace grove::kernels {
namespace {

template <class Q>
void qadd_typed(const Q* a, const Q* b, size_t n, const QAddParams& p, Q* y) {
  constexpr float kMagic = 12582912.0f;  // 1.5 * 2^23: adding and subtracting it rounds half to even
  constexpr float kBound = 1 << 20;
  for (size_t i = 0; i < n; ++i) {
    // a_zero and b_zero are integers, so float(x - zero) is exact either way.
    float v = (static_cast<float>(a[i]) - p.a_zero) * p.a_scale + (static_cast<float>(b[i]) - p.b_zero) * p.b_scale;
    if (p.relu) v = v > 0.0f ? v : 0.0f;
    v = v / p.y_scale;
    if (std::isnan(v)) v = 0.0f;
    v = std::clamp(v, -kBound, kBound);
    y[i] = static_cast<Q>(std::clamp(((v + kMagic) - kMagic) + p.y_zero, p.lo, p.hi));
  }
}

}  // namespace

void qadd_scalar(const void* a, const void* b, size_t n, const QAddParams& p, void* y) {
  if (p.is_signed)
    qadd_typed(static_cast<const int8_t*>(a), static_cast<const int8_t*>(b), n, p, static_cast<int8_t*>(y));
  else
    qadd_typed(static_cast<const uint8_t*>(a), static_cast<const uint8_t*>(b), n, p, static_cast<uint8_t*>(y));
}

void qadd(const void* a, const void* b, size_t n, const QAddParams& p, void* y, Isa isa) {
  if (isa == Isa::avx512 && isa_supported(Isa::avx512)) qadd_avx512(a, b, n, p, y);
  else qadd_scalar(a, b, n, p, y);
}

}  // namespace grove::kernels
