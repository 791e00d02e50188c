// The Winograd F(4x4, 3x3) transforms of winograd_f4x3_impl.h built for avx512 (flags from
// kernels.cmake).
#include "kernels/winograd_f4x3_impl.h"

namespace grove::kernels {
namespace {
using Vec = float __attribute__((vector_size(64)));
}  // namespace

void f32_winograd_f4x3_input_avx512(const float* phases, size_t phase_stride, size_t blocks, float* const* out) {
  input_transform<Vec>(phases, phase_stride, blocks, out);
}

void f32_winograd_f4x3_output_avx512(const float* m, size_t m_stride, size_t blocks, float* out, size_t out_stride) {
  output_transform<Vec>(m, m_stride, blocks, out, out_stride);
}

void f32_winograd_deinterleave4_avx512(const float* src, size_t blocks, float* dst, size_t dst_stride) {
  deinterleave4(src, blocks, dst, dst_stride);
}

void f32_winograd_interleave4_avx512(const float* src, size_t src_stride, size_t blocks, float* dst) {
  interleave4(src, src_stride, blocks, dst);
}

}  // namespace grove::kernels
