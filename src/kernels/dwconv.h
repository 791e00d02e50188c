#pragma once
// Depthwise 2-D convolution (one input plane per output plane), computed directly: a GEMM
// with k = kernel_h * kernel_w (9 for 3x3) would spend its time packing. Each output row is
// bias + sum over (kernel row, kernel column) of a weight times a shifted input row, added
// in that order whatever rows a call covers, so results do not depend on the tiling. The
// row updates are axpys that vectorise; the file is compiled once per ISA (like the GEMM
// microkernels) and dispatched on active_isa().
#include <cstddef>

#include "kernels/epilogue.h"
#include "kernels/im2col.h"
#include "kernels/isa.h"

namespace grove::kernels {

struct DwConv2dCall {
  const float* x = nullptr;  // the input plane, in_h x in_w
  const float* w = nullptr;  // kernel_h x kernel_w weights
  float bias = 0.0f;
  float* y = nullptr;        // the output plane, out_h x out_w
  size_t row_begin = 0, row_end = 0;  // output rows to compute
  Conv2dShape shape;         // channels is ignored (1)
  // Fused epilogue, per output element: y = act(sum + residual); residual is a plane shaped
  // like y (or null) and must not alias it.
  const float* residual = nullptr;
  ActivationParams activation;
};

void dwconv2d(const DwConv2dCall& call, Isa isa = active_isa());

// Per-ISA builds of the same loop (dwconv_impl.h).
void f32_dwconv2d_scalar(const DwConv2dCall& call);
void f32_dwconv2d_avx2(const DwConv2dCall& call);
void f32_dwconv2d_avx512(const DwConv2dCall& call);

}  // namespace grove::kernels
