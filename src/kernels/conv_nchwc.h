#pragma once
// Direct 2-D convolution on a channel-blocked layout (NCHWc, the ORT / oneDNN layout for CPU
// convs): x is [N, C / b, H, W, b] and y is [N, M / b, OH, OW, b], b channels per block (the
// ISA's vector width). A register tile is `OB` output blocks x a run of output pixels of one
// row: per input channel it loads OB weight vectors (b output channels each) and broadcasts
// one input float per pixel, so every FMA fills all lanes whatever the plane's size, and no
// im2col panel is laid out. Paper 003 counts it among the primitives a performance model
// chooses from per layer; docs/kernels.md has how it compares.
//
// The input comes as rows of padded pixels split into `stride_w` column phases (phase p holds
// padded columns p, p + s, p + 2s, ...; pack_conv_nchwc_rows), so a tap of any stride reads
// consecutive pixels and no tap needs a bounds check. An unpadded stride-1 conv reads x as it
// is. Each output sums bias, then input block by block, kernel row by row, column by column,
// channel by channel: the same order whatever rows or blocks a call covers, so tiles do not
// change results.
#include <cstddef>

#include "kernels/epilogue.h"
#include "kernels/isa.h"

namespace grove::kernels {

// The widest kernel a call may have.
constexpr size_t kConvNchwcMaxKernelW = 16;

// Channels per block on `isa`: its vector width, 16 floats on AVX-512, 8 otherwise.
size_t conv_nchwc_block(Isa isa);

struct ConvNchwcCall {
  size_t block = 0;             // channels per block: 8 or 16
  // Depthwise (one group per channel): output block i reads input block i only, in_blocks is
  // unused, and x starts at the input block of the call's first output block.
  bool depthwise = false;
  size_t in_blocks = 0;         // input channel blocks, all read by every output
  const float* x = nullptr;     // input block 0, the call's first (padded) row, phase 0, pixel 0
  size_t x_block_stride = 0;    // floats between input blocks
  size_t x_row_stride = 0;      // floats between input rows
  size_t x_phase_stride = 0;    // floats between a row's column phases (stride_w > 1)
  size_t kernel_h = 1, kernel_w = 1, stride_h = 1, stride_w = 1;
  size_t out_rows = 0, out_w = 0;
  size_t out_blocks = 0;        // output blocks of the call
  const float* w = nullptr;     // packed weights of the call's first output block
  const float* bias = nullptr;  // out_blocks * block values from the first block's, or null
  float* y = nullptr;           // output block 0, the call's first row, pixel 0
  const float* residual = nullptr;  // shaped and placed like y, or null; must not alias it
  size_t y_block_stride = 0;    // floats between output blocks (of y and the residual)
  ActivationParams activation;  // y = act(sum + residual)
};

// Floats of one output block's packed weights: in_channels * kh * kw * block (1 input channel
// per output channel for a depthwise conv).
size_t conv_nchwc_block_weights(size_t in_channels, size_t kernel_h, size_t kernel_w, size_t block);

// OIHW weights (out_channels x in_channels x kh x kw, both channel counts multiples of block)
// as [out block][in block][ky][kx][input channel][output channel of the block].
void pack_conv_nchwc_weights(const float* w, size_t out_channels, size_t in_channels, size_t kernel_h, size_t kernel_w,
                             size_t block, float* out);

// Depthwise weights (channels x 1 x kh x kw, channels a multiple of block) as
// [block][ky][kx][channel of the block]: kh * kw * block floats per block.
void pack_conv_nchwc_depthwise_weights(const float* w, size_t channels, size_t kernel_h, size_t kernel_w, size_t block,
                                       float* out);

// Padded pixels per column phase of a row: output pixel j's tap kx reads pixel j + kx / s of
// phase kx % s.
size_t conv_nchwc_phase_pixels(size_t out_w, size_t kernel_w, size_t stride_w);

// Input rows [iy0, iy0 + rows) of one image's blocks x ([in_blocks][in_h][in_w][block]),
// pad_left zero pixels before column 0, as rows of stride_w phases of phase_pixels pixels;
// rows outside the plane and pixels past it are zeros. out holds in_blocks x rows x stride_w
// x phase_pixels x block floats.
void pack_conv_nchwc_rows(const float* x, size_t in_blocks, size_t in_h, size_t in_w, size_t block, long iy0,
                          size_t rows, size_t pad_left, size_t stride_w, size_t phase_pixels, float* out);

void conv_nchwc(const ConvNchwcCall& call, Isa isa = active_isa());

void f32_conv_nchwc_scalar(const ConvNchwcCall& call);
void f32_conv_nchwc_avx2(const ConvNchwcCall& call);
void f32_conv_nchwc_avx512(const ConvNchwcCall& call);

}  // namespace grove::kernels
