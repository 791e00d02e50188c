#include "kernels/transpose.h"

namespace grove::kernels {

void transpose_4byte(const void* src, size_t src_stride, size_t rows, size_t cols, void* dst, size_t dst_stride,
                     Isa isa) {
  // Bit patterns only move, so floats carry any 4-byte element (NaN payloads included: no
  // arithmetic touches them).
  const auto* s = static_cast<const float*>(src);
  auto* d = static_cast<float*>(dst);
  switch (isa) {
    case Isa::avx512: return x32_transpose_avx512(s, src_stride, rows, cols, d, dst_stride);
    case Isa::avx2: return x32_transpose_avx2(s, src_stride, rows, cols, d, dst_stride);
    case Isa::scalar: break;
  }
  x32_transpose_scalar(s, src_stride, rows, cols, d, dst_stride);
}

}  // namespace grove::kernels
