// Compiled with -mavx2 -mf16c (kernels.cmake); F16C comes with every AVX2 CPU.
#include <immintrin.h>

#include <cstring>

#include "kernels/half.h"

namespace grove::kernels::avx2 {

void convert_f32_to_f16(const float* x, uint16_t* y, size_t n) {
  size_t i = 0;
  for (; i + 8 <= n; i += 8)
    _mm_storeu_si128(reinterpret_cast<__m128i*>(y + i), _mm256_cvtps_ph(_mm256_loadu_ps(x + i), _MM_FROUND_TO_NEAREST_INT));
  if (i == n) return;
  float tail_in[8] = {};
  uint16_t tail_out[8];
  std::memcpy(tail_in, x + i, (n - i) * sizeof(float));
  _mm_storeu_si128(reinterpret_cast<__m128i*>(tail_out), _mm256_cvtps_ph(_mm256_loadu_ps(tail_in), _MM_FROUND_TO_NEAREST_INT));
  std::memcpy(y + i, tail_out, (n - i) * sizeof(uint16_t));
}

void convert_f16_to_f32(const uint16_t* x, float* y, size_t n) {
  size_t i = 0;
  for (; i + 8 <= n; i += 8)
    _mm256_storeu_ps(y + i, _mm256_cvtph_ps(_mm_loadu_si128(reinterpret_cast<const __m128i*>(x + i))));
  if (i == n) return;
  uint16_t tail_in[8] = {};
  float tail_out[8];
  std::memcpy(tail_in, x + i, (n - i) * sizeof(uint16_t));
  _mm256_storeu_ps(tail_out, _mm256_cvtph_ps(_mm_loadu_si128(reinterpret_cast<const __m128i*>(tail_in))));
  std::memcpy(y + i, tail_out, (n - i) * sizeof(float));
}

}  // namespace grove::kernels::avx2
