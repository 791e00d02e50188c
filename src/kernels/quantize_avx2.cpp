// The avx2 quantization kernels (quantize.h): 8 floats at a time, the scalar loop for the tail.
#include <immintrin.h>

#include "kernels/quantize.h"

namespace grove::kernels {

FloatRange range_with_zero_avx2(const float* x, size_t n) {
  __m256 lo = _mm256_setzero_ps(), hi = _mm256_setzero_ps(), nan = _mm256_setzero_ps();
  size_t i = 0;
  for (; i + 8 <= n; i += 8) {
    __m256 v = _mm256_loadu_ps(x + i);
    nan = _mm256_or_ps(nan, _mm256_cmp_ps(v, v, _CMP_UNORD_Q));
    lo = _mm256_min_ps(lo, v);  // a NaN lane keeps lo's value (minps returns the second operand)
    hi = _mm256_max_ps(hi, v);
  }
  alignas(32) float l[8], h[8];
  _mm256_store_ps(l, lo);
  _mm256_store_ps(h, hi);
  FloatRange r = range_with_zero_scalar(x + i, n - i);
  r.has_nan |= _mm256_movemask_ps(nan) != 0;
  for (int k = 0; k < 8; ++k) {
    r.lo = l[k] < r.lo ? l[k] : r.lo;
    r.hi = h[k] > r.hi ? h[k] : r.hi;
  }
  return r;
}

void quantize_u8_avx2(const float* x, size_t n, float scale, float zero_point, uint8_t* y) {
  const __m256 s = _mm256_set1_ps(scale), zp = _mm256_set1_ps(zero_point);
  const __m256 lo = _mm256_setzero_ps(), hi = _mm256_set1_ps(255.0f);
  size_t i = 0;
  for (; i + 8 <= n; i += 8) {
    __m256 v = _mm256_loadu_ps(x + i);
    __m256 q = _mm256_add_ps(_mm256_round_ps(_mm256_div_ps(v, s), _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC), zp);
    q = _mm256_blendv_ps(q, zp, _mm256_cmp_ps(v, v, _CMP_UNORD_Q));  // NaN -> zero point
    q = _mm256_min_ps(_mm256_max_ps(q, lo), hi);
    __m256i ints = _mm256_cvtps_epi32(q);  // exact: q is an integer in [0, 255]
    __m128i words = _mm_packus_epi32(_mm256_castsi256_si128(ints), _mm256_extracti128_si256(ints, 1));
    __m128i bytes = _mm_packus_epi16(words, words);
    _mm_storel_epi64(reinterpret_cast<__m128i*>(y + i), bytes);
  }
  quantize_u8_scalar(x + i, n - i, scale, zero_point, y + i);
}

}  // namespace grove::kernels
