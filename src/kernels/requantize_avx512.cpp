// requantize.h on AVX-512: 16 sums per step, the scalar loop's float32 operations in the same
// order (compiled without FMA contraction: intrinsics only), then a saturating narrow to bytes
// of values already clamped. The tail runs the scalar loop.
#include <immintrin.h>

#include "kernels/requantize.h"

namespace grove::kernels {

void requantize_avx512(const int32_t* acc, size_t n, const RequantizeParams& p, bool is_signed, void* out) {
  const __m512i add = _mm512_set1_epi32(static_cast<int32_t>(p.add));
  const __m512 multiplier = _mm512_set1_ps(p.multiplier), zero = _mm512_set1_ps(p.zero_point);
  const __m512 magic = _mm512_set1_ps(12582912.0f), bound = _mm512_set1_ps(1 << 20), neg_bound = _mm512_set1_ps(-(1 << 20));
  const __m512 lo = _mm512_set1_ps(p.lo), hi = _mm512_set1_ps(p.hi);
  size_t i = 0;
  for (; i + 16 <= n; i += 16) {
    __m512 v = _mm512_mul_ps(_mm512_cvtepi32_ps(_mm512_add_epi32(_mm512_loadu_si512(acc + i), add)), multiplier);
    v = _mm512_maskz_mov_ps(_mm512_cmp_ps_mask(v, v, _CMP_ORD_Q), v);  // NaN -> 0
    v = _mm512_max_ps(_mm512_min_ps(v, bound), neg_bound);
    v = _mm512_sub_ps(_mm512_add_ps(v, magic), magic);
    v = _mm512_max_ps(_mm512_min_ps(_mm512_add_ps(v, zero), hi), lo);
    const __m512i q = _mm512_cvtps_epi32(v);  // integral already
    if (is_signed) _mm_storeu_si128(reinterpret_cast<__m128i*>(static_cast<int8_t*>(out) + i), _mm512_cvtsepi32_epi8(q));
    else _mm_storeu_si128(reinterpret_cast<__m128i*>(static_cast<uint8_t*>(out) + i), _mm512_cvtusepi32_epi8(q));
  }
  if (i < n)
    requantize_scalar(acc + i, n - i, p, is_signed, is_signed ? static_cast<void*>(static_cast<int8_t*>(out) + i)
                                                              : static_cast<void*>(static_cast<uint8_t*>(out) + i));
}

}  // namespace grove::kernels
