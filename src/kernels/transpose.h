#pragma once
// Transpose of a block of 4-byte elements: dst[j][i] = src[i][j] for i < rows, j < cols, with
// row strides in elements. The layout changes around channels-last convs move whole
// activations through it (NCHW <-> NHWC is a 2-D transpose per image: channels x pixels).
// The vector builds transpose 16x16 (avx512) or 8x8 (avx2) blocks in registers; edges are
// copied element by element. Exact (a copy), so every ISA gives the same bits.
#include <cstddef>

#include "kernels/isa.h"

namespace grove::kernels {

void transpose_4byte(const void* src, size_t src_stride, size_t rows, size_t cols, void* dst, size_t dst_stride,
                     Isa isa = active_isa());

// Per-ISA builds.
void x32_transpose_scalar(const float* src, size_t src_stride, size_t rows, size_t cols, float* dst, size_t dst_stride);
void x32_transpose_avx2(const float* src, size_t src_stride, size_t rows, size_t cols, float* dst, size_t dst_stride);
void x32_transpose_avx512(const float* src, size_t src_stride, size_t rows, size_t cols, float* dst, size_t dst_stride);

}  // namespace grove::kernels
