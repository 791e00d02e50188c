// qadd.h on AVX-512: 16 bytes of each operand widened to float per step, the scalar loop's
// float32 operations in the same order (intrinsics only, so nothing is contracted into an
// FMA), then a saturating narrow of values already clamped. The tail runs the scalar loop.
#include <immintrin.h>

#include <cmath>

#include "kernels/qadd.h"

namespace grove::kernels {
namespace {

__m512 widen(const void* p, size_t i, bool is_signed) {
  const __m128i bytes = _mm_loadu_si128(reinterpret_cast<const __m128i*>(static_cast<const uint8_t*>(p) + i));
  return _mm512_cvtepi32_ps(is_signed ? _mm512_cvtepi8_epi32(bytes) : _mm512_cvtepu8_epi32(bytes));
}

// kMayBeNan: a NaN sum is possible (a scale past 1e30, NaN or 0 y_scale), so it is mapped to
// 0 as the scalar loop does; otherwise that step is skipped. round_half_even is one
// vrndscaleps (the scalar loop's bound and 1.5 * 2^23 trick give the same integers) and the
// Relu one max with 0 (which also turns -0 into +0, as the scalar loop's select does).
template <bool kMayBeNan>
void qadd_loop(const void* a, const void* b, size_t n, const QAddParams& p, void* y) {
  const __m512 as = _mm512_set1_ps(p.a_scale), az = _mm512_set1_ps(p.a_zero);
  const __m512 bs = _mm512_set1_ps(p.b_scale), bz = _mm512_set1_ps(p.b_zero);
  const __m512 ys = _mm512_set1_ps(p.y_scale), yz = _mm512_set1_ps(p.y_zero);
  const __m512 lo = _mm512_set1_ps(p.lo), hi = _mm512_set1_ps(p.hi), zero = _mm512_setzero_ps();
  size_t i = 0;
  for (; i + 16 <= n; i += 16) {
    const __m512 fa = _mm512_mul_ps(_mm512_sub_ps(widen(a, i, p.is_signed), az), as);
    const __m512 fb = _mm512_mul_ps(_mm512_sub_ps(widen(b, i, p.is_signed), bz), bs);
    __m512 v = _mm512_add_ps(fa, fb);
    if (p.relu) v = _mm512_max_ps(v, zero);
    v = _mm512_div_ps(v, ys);
    if constexpr (kMayBeNan) v = _mm512_maskz_mov_ps(_mm512_cmp_ps_mask(v, v, _CMP_ORD_Q), v);
    v = _mm512_roundscale_ps(v, _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
    v = _mm512_max_ps(_mm512_min_ps(_mm512_add_ps(v, yz), hi), lo);
    const __m512i q = _mm512_cvtps_epi32(v);
    auto* out = reinterpret_cast<__m128i*>(static_cast<uint8_t*>(y) + i);
    _mm_storeu_si128(out, p.is_signed ? _mm512_cvtsepi32_epi8(q) : _mm512_cvtusepi32_epi8(q));
  }
  if (i < n)
    qadd_scalar(static_cast<const uint8_t*>(a) + i, static_cast<const uint8_t*>(b) + i, n - i, p,
                static_cast<uint8_t*>(y) + i);
}

}  // namespace

void qadd_avx512(const void* a, const void* b, size_t n, const QAddParams& p, void* y) {
  // |x - zero| <= 2^9 for bytes and integral zero points: below 1e30 per scale the sum is
  // finite, and a finite sum divided by a number that is neither 0 nor NaN is never NaN.
  const bool finite = std::fabs(p.a_scale) < 1e30f && std::fabs(p.b_scale) < 1e30f && std::fabs(p.a_zero) < 1e6f &&
                      std::fabs(p.b_zero) < 1e6f && p.y_scale != 0.0f && !std::isnan(p.y_scale);
  if (finite) qadd_loop<false>(a, b, n, p, y);
  else qadd_loop<true>(a, b, n, p, y);
}

}  // namespace grove::kernels
