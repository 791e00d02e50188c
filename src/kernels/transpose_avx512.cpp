// Transpose for avx512 (flags from kernels.cmake): 16x16 blocks in zmm registers, the usual
// unpack (pairs), shuffle (quads) and 128-bit lane shuffles (the two halves of each row).
// Integer shuffles on the bit patterns, so no float operation touches the elements.
#include <immintrin.h>

#include "kernels/transpose.h"

namespace grove::kernels {
namespace {

void block16(const float* src, size_t src_stride, float* dst, size_t dst_stride) {
  __m512i r[16], t[16];
  for (int i = 0; i < 16; ++i) r[i] = _mm512_loadu_si512(src + i * src_stride);
  for (int i = 0; i < 16; i += 2) {
    t[i] = _mm512_unpacklo_epi32(r[i], r[i + 1]);
    t[i + 1] = _mm512_unpackhi_epi32(r[i], r[i + 1]);
  }
  for (int i = 0; i < 16; i += 4) {
    r[i] = _mm512_unpacklo_epi64(t[i], t[i + 2]);
    r[i + 1] = _mm512_unpackhi_epi64(t[i], t[i + 2]);
    r[i + 2] = _mm512_unpacklo_epi64(t[i + 1], t[i + 3]);
    r[i + 3] = _mm512_unpackhi_epi64(t[i + 1], t[i + 3]);
  }
  // Now r[4q + k] holds, in each 128-bit lane l, the 4 elements of output row 4l + k from
  // input rows 4q .. 4q + 3. Gather the lanes: first pairs of quads, then pairs of those.
  for (int k = 0; k < 4; ++k) {
    t[k] = _mm512_shuffle_i32x4(r[k], r[4 + k], 0x88);        // lanes 0, 2 of rows 0-3 | 4-7
    t[4 + k] = _mm512_shuffle_i32x4(r[k], r[4 + k], 0xDD);    // lanes 1, 3
    t[8 + k] = _mm512_shuffle_i32x4(r[8 + k], r[12 + k], 0x88);
    t[12 + k] = _mm512_shuffle_i32x4(r[8 + k], r[12 + k], 0xDD);
  }
  for (int k = 0; k < 4; ++k) {
    r[k] = _mm512_shuffle_i32x4(t[k], t[8 + k], 0x88);        // lane 0: output row k
    r[8 + k] = _mm512_shuffle_i32x4(t[k], t[8 + k], 0xDD);    // lane 2: output row 8 + k
    r[4 + k] = _mm512_shuffle_i32x4(t[4 + k], t[12 + k], 0x88);   // lane 1: output row 4 + k
    r[12 + k] = _mm512_shuffle_i32x4(t[4 + k], t[12 + k], 0xDD);  // lane 3: output row 12 + k
  }
  for (int j = 0; j < 16; ++j) _mm512_storeu_si512(dst + j * dst_stride, r[j]);
}

}  // namespace

void x32_transpose_avx512(const float* src, size_t src_stride, size_t rows, size_t cols, float* dst, size_t dst_stride) {
  const size_t full_rows = rows / 16 * 16, full_cols = cols / 16 * 16;
  for (size_t i0 = 0; i0 < full_rows; i0 += 16)
    for (size_t j0 = 0; j0 < full_cols; j0 += 16) block16(src + i0 * src_stride + j0, src_stride, dst + j0 * dst_stride + i0, dst_stride);
  // Edges: the columns past the last full block of every row, then the rows past the last full block.
  if (full_cols < cols) x32_transpose_scalar(src + full_cols, src_stride, rows, cols - full_cols, dst + full_cols * dst_stride, dst_stride);
  if (full_rows < rows)
    x32_transpose_scalar(src + full_rows * src_stride, src_stride, rows - full_rows, full_cols, dst + full_rows, dst_stride);
}

}  // namespace grove::kernels
