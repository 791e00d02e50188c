// qadd.h on AVX-512: 16 bytes of each operand widened to float per step, the scalar loop's
// float32 operations in the same order (intrinsics only, so nothing is contracted into an
// FMA), then a saturating narrow of values already clamped. The tail runs the scalar loop.
#include <immintrin.h>

#include "kernels/qadd.h"

namespace grove::kernels {
namespace {

__m512 widen(const void* p, size_t i, bool is_signed) {
  const __m128i bytes = _mm_loadu_si128(reinterpret_cast<const __m128i*>(static_cast<const uint8_t*>(p) + i));
  return _mm512_cvtepi32_ps(is_signed ? _mm512_cvtepi8_epi32(bytes) : _mm512_cvtepu8_epi32(bytes));
}

}  // namespace

void qadd_avx512(const void* a, const void* b, size_t n, const QAddParams& p, void* y) {
  const __m512 as = _mm512_set1_ps(p.a_scale), az = _mm512_set1_ps(p.a_zero);
  const __m512 bs = _mm512_set1_ps(p.b_scale), bz = _mm512_set1_ps(p.b_zero);
  const __m512 ys = _mm512_set1_ps(p.y_scale), yz = _mm512_set1_ps(p.y_zero);
  const __m512 magic = _mm512_set1_ps(12582912.0f), bound = _mm512_set1_ps(1 << 20), neg_bound = _mm512_set1_ps(-(1 << 20));
  const __m512 lo = _mm512_set1_ps(p.lo), hi = _mm512_set1_ps(p.hi), zero = _mm512_setzero_ps();
  size_t i = 0;
  for (; i + 16 <= n; i += 16) {
    const __m512 fa = _mm512_mul_ps(_mm512_sub_ps(widen(a, i, p.is_signed), az), as);
    const __m512 fb = _mm512_mul_ps(_mm512_sub_ps(widen(b, i, p.is_signed), bz), bs);
    __m512 v = _mm512_add_ps(fa, fb);
    if (p.relu) v = _mm512_maskz_mov_ps(_mm512_cmp_ps_mask(v, zero, _CMP_GT_OQ), v);
    v = _mm512_div_ps(v, ys);
    v = _mm512_maskz_mov_ps(_mm512_cmp_ps_mask(v, v, _CMP_ORD_Q), v);  // NaN -> 0
    v = _mm512_max_ps(_mm512_min_ps(v, bound), neg_bound);
    v = _mm512_sub_ps(_mm512_add_ps(v, magic), magic);
    v = _mm512_max_ps(_mm512_min_ps(_mm512_add_ps(v, yz), hi), lo);
    const __m512i q = _mm512_cvtps_epi32(v);
    auto* out = reinterpret_cast<__m128i*>(static_cast<uint8_t*>(y) + i);
    _mm_storeu_si128(out, p.is_signed ? _mm512_cvtsepi32_epi8(q) : _mm512_cvtusepi32_epi8(q));
  }
  if (i < n)
    qadd_scalar(static_cast<const uint8_t*>(a) + i, static_cast<const uint8_t*>(b) + i, n - i, p,
                static_cast<uint8_t*>(y) + i);
}

}  // namespace grove::kernels
