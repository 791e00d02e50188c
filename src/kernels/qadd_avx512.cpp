// qadd.h on AVX-512: 16 bytes of each operand widened to float per step, the scalar loop's
// float32 operations in the same order (intrinsics only, and this file is compiled without
// FMA contraction; qadd_avx512.h), then a saturating narrow of values already clamped. The
// tail runs the scalar loop.
#include "kernels/qadd_avx512.h"

#include <cmath>

namespace grove::kernels {
namespace {

template <bool kMayBeNan>
void qadd_loop(const void* a, const void* b, size_t n, const QAddParams& p, void* y) {
  size_t i = 0;
  for (; i + 16 <= n; i += 16) {
    const __m512 v = qadd_lanes<kMayBeNan>(bytes_as_floats(static_cast<const uint8_t*>(a) + i, p.is_signed),
                                           bytes_as_floats(static_cast<const uint8_t*>(b) + i, p.is_signed), p);
    const __m512i q = _mm512_cvtps_epi32(v);  // integral already
    auto* out = reinterpret_cast<__m128i*>(static_cast<uint8_t*>(y) + i);
    _mm_storeu_si128(out, p.is_signed ? _mm512_cvtsepi32_epi8(q) : _mm512_cvtusepi32_epi8(q));
  }
  if (i < n)
    qadd_scalar(static_cast<const uint8_t*>(a) + i, static_cast<const uint8_t*>(b) + i, n - i, p,
                static_cast<uint8_t*>(y) + i);
}

}  // namespace

bool qadd_may_be_nan(const QAddParams& p) {
  // |x - zero| <= 2^9 for bytes and integral zero points: below 1e30 per scale the sum is
  // finite, and a finite sum divided by a number that is neither 0 nor NaN is never NaN.
  return !(std::fabs(p.a_scale) < 1e30f && std::fabs(p.b_scale) < 1e30f && std::fabs(p.a_zero) < 1e6f &&
           std::fabs(p.b_zero) < 1e6f && p.y_scale != 0.0f && !std::isnan(p.y_scale));
}

void qadd_avx512(const void* a, const void* b, size_t n, const QAddParams& p, void* y) {
  if (qadd_may_be_nan(p)) qadd_loop<true>(a, b, n, p, y);
  else qadd_loop<false>(a, b, n, p, y);
}

}  // namespace grove::kernels
