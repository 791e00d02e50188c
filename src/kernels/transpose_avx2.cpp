// Transpose for avx2 (flags from kernels.cmake): 8x8 blocks in ymm registers, unpack (pairs),
// shuffle (quads) and a 128-bit permute (the two halves). Shuffles move bits only.
#include <immintrin.h>

#include "kernels/transpose.h"

namespace grove::kernels {
namespace {

void block8(const float* src, size_t src_stride, float* dst, size_t dst_stride) {
  __m256 r[8], t[8];
  for (int i = 0; i < 8; ++i) r[i] = _mm256_loadu_ps(src + i * src_stride);
  for (int i = 0; i < 8; i += 2) {
    t[i] = _mm256_unpacklo_ps(r[i], r[i + 1]);
    t[i + 1] = _mm256_unpackhi_ps(r[i], r[i + 1]);
  }
  for (int i = 0; i < 8; i += 4) {
    r[i] = _mm256_shuffle_ps(t[i], t[i + 2], 0x44);
    r[i + 1] = _mm256_shuffle_ps(t[i], t[i + 2], 0xEE);
    r[i + 2] = _mm256_shuffle_ps(t[i + 1], t[i + 3], 0x44);
    r[i + 3] = _mm256_shuffle_ps(t[i + 1], t[i + 3], 0xEE);
  }
  for (int k = 0; k < 4; ++k) {
    _mm256_storeu_ps(dst + k * dst_stride, _mm256_permute2f128_ps(r[k], r[4 + k], 0x20));
    _mm256_storeu_ps(dst + (4 + k) * dst_stride, _mm256_permute2f128_ps(r[k], r[4 + k], 0x31));
  }
}

}  // namespace

void x32_transpose_avx2(const float* src, size_t src_stride, size_t rows, size_t cols, float* dst, size_t dst_stride) {
  const size_t full_rows = rows / 8 * 8, full_cols = cols / 8 * 8;
  for (size_t i0 = 0; i0 < full_rows; i0 += 8)
    for (size_t j0 = 0; j0 < full_cols; j0 += 8) block8(src + i0 * src_stride + j0, src_stride, dst + j0 * dst_stride + i0, dst_stride);
  if (full_cols < cols) x32_transpose_scalar(src + full_cols, src_stride, rows, cols - full_cols, dst + full_cols * dst_stride, dst_stride);
  if (full_rows < rows)
    x32_transpose_scalar(src + full_rows * src_stride, src_stride, rows - full_rows, full_cols, dst + full_rows, dst_stride);
}

}  // namespace grove::kernels
