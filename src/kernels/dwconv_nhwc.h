#pragma once
// Depthwise 2-D convolution on channels-last activations (one filter per channel, depth
// multiplier 1): x is [H, W, C] and y [OH, OW, C] for one image. Each output pixel's channels
// are one contiguous run, so the channels fill the vector lanes whatever the plane's size, and a
// tap is one vector load and one FMA per lane group; the NCHW kernel (dwconv.h) fills its lanes
// with a row's columns and wastes most of them on the 7- and 14-wide planes of late layers.
// Every output element sums bias, then the taps in (kernel row, kernel column) order, so any
// cut of the rows or channels gives the same bits.
#include <cstddef>

#include "kernels/epilogue.h"
#include "kernels/im2col.h"
#include "kernels/isa.h"

namespace grove::kernels {

struct DwConvNhwcCall {
  const float* x = nullptr;         // one image, [in_h][in_w][channels]
  const float* w = nullptr;         // taps packed [kernel_h * kernel_w][channels] (pack_dwconv_nhwc_weights)
  const float* bias = nullptr;      // [channels], or null
  float* y = nullptr;               // one image, [out_h][out_w][channels]
  const float* residual = nullptr;  // shaped like y, or null; must not alias y
  size_t channels = 0;              // C: the pixel stride of x, w, y and the residual
  size_t c_begin = 0, c_end = 0;    // channels to compute
  size_t row_begin = 0, row_end = 0;  // output rows to compute
  Conv2dShape shape;                // channels is ignored
  ActivationParams activation;      // y = act(sum + residual)
};

// The most kernel rows a call may have (the kernel keeps a pointer per row on the stack).
constexpr size_t kDwConvNhwcMaxKernelRows = 16;

void dwconv2d_nhwc(const DwConvNhwcCall& call, Isa isa = active_isa());

// W [C, 1, kh, kw] as the kernel reads it: tap t's C weights contiguous.
void pack_dwconv_nhwc_weights(const float* w, size_t channels, size_t taps, float* out);

// Per-ISA builds of one loop (dwconv_nhwc_impl.h); the lanes are 16, 8 and 4 floats.
void f32_dwconv2d_nhwc_scalar(const DwConvNhwcCall& call);
void f32_dwconv2d_nhwc_avx2(const DwConvNhwcCall& call);
void f32_dwconv2d_nhwc_avx512(const DwConvNhwcCall& call);

}  // namespace grove::kernels
