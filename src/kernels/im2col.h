#pragma once
// im2col straight into the GEMM's packed-B layout, for one block of output pixels of a 2-D
// convolution in NCHW: B[k][j] = x[c][ih][iw] for k = (c, kh, kw) in the order of Conv
// weights [Cout][Cin][KH][KW], and j the output pixel q0 + j (row-major over out_h x out_w).
// Taps that fall in the padding are 0. No whole-layer im2col buffer: a tile packs only its
// pixels, into a per-worker PackedB that is reused.
#include <cstddef>
#include <vector>

#include "kernels/gemm.h"

namespace grove::kernels {

struct Conv2dShape {
  size_t channels = 0;           // input channels this GEMM reduces over (one group)
  size_t in_h = 0, in_w = 0;     // input plane
  size_t out_h = 0, out_w = 0;   // output plane
  size_t kernel_h = 1, kernel_w = 1;
  size_t stride_h = 1, stride_w = 1;
  size_t dilation_h = 1, dilation_w = 1;
  size_t pad_top = 0, pad_left = 0;
};

// Packs B (k = channels * kernel_h * kernel_w rows, n pixels) for output pixels
// [q0, q0 + n) of input planes `x` (channels planes of in_h x in_w, contiguous).
void pack_im2col(PackedB& out, const float* x, const Conv2dShape& s, size_t q0, size_t n, Isa isa = active_isa());

// The same block as bf16 panels for the kernel of `to` (bf16 or bf16_amx): a few hundred
// pixels at a time are laid out as a plain k x pixels matrix in `block` (reused; it stays in
// L2), which copies whole output rows per k row instead of panel-wide pieces, then rounded
// into their panels, so no f32 panel block is written whole and read back.
void pack_im2col_bf16(PackedB& out, const float* x, const Conv2dShape& s, size_t q0, size_t n, Precision to,
                      std::vector<float>& block);

// True where im2col is the identity: 1x1, stride 1, no padding (B = the input planes).
bool is_plain_1x1(const Conv2dShape& s);

// The same block unpacked: k rows of n floats (row stride n), for a GEMM that takes the
// pixels as the m side through GemmCall::a_transposed (few pixels, many output channels).
void im2col_matrix(float* out, const float* x, const Conv2dShape& s, size_t q0, size_t n);

}  // namespace grove::kernels
