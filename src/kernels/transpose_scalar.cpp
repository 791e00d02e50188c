// The portable transpose: 16x16 blocks, so that reads and writes each touch 16 cache lines
// at a time rather than striding a whole column.
#include <algorithm>

#include "kernels/transpose.h"

namespace grove::kernels {

void x32_transpose_scalar(const float* src, size_t src_stride, size_t rows, size_t cols, float* dst, size_t dst_stride) {
  constexpr size_t kBlock = 16;
  for (size_t i0 = 0; i0 < rows; i0 += kBlock)
    for (size_t j0 = 0; j0 < cols; j0 += kBlock) {
      const size_t i1 = std::min(rows, i0 + kBlock), j1 = std::min(cols, j0 + kBlock);
      for (size_t j = j0; j < j1; ++j)
        for (size_t i = i0; i < i1; ++i) dst[j * dst_stride + i] = src[i * src_stride + j];
    }
}

}  // namespace grove::kernels
