#pragma once
// 2-D convolution of few input channels (a network's stem on three colour planes), computed
// directly on NCHW planes. im2col + GEMM would copy every input pixel cin * kh * kw times (147
// for a 7x7 RGB stem) for a GEMM whose k is that small; here a register tile of
// kConvDirectChannels output channels x a few pixel vectors of one output row sums every input
// channel and tap in place, each tap's pixels one vector load, its weights one broadcast each.
//
// The input comes as the call's input rows, zero-padded and split into `stride_w` column
// phases (pack_conv_direct_rows): phase p of a row holds padded columns p, p + s, p + 2s, ...,
// so a tap of any stride reads contiguous floats and no tap needs a bounds check. Each output
// sums bias, then input channel by channel, kernel row by row, column by column: the same
// order whatever rows or channels a call covers, so tiles do not change results.
#include <cstddef>

#include "kernels/epilogue.h"
#include "kernels/isa.h"

namespace grove::kernels {

// Output channels per register tile, and so per block of the packed weights.
constexpr size_t kConvDirectChannels = 4;
// The widest kernel a call may have.
constexpr size_t kConvDirectMaxKernelW = 16;

struct ConvDirectRows {
  size_t in_channels = 0;
  size_t rows = 0;        // padded input rows per channel
  size_t stride_w = 1;    // column phases per row
  size_t row_floats = 0;  // floats per phase of a row
  float* data = nullptr;  // in_channels x rows x stride_w x row_floats
};

// Floats per phase so that every vector of an output row, rounded up to whole vectors of the
// widest ISA, reads inside the row.
size_t conv_direct_row_floats(size_t out_w, size_t kernel_w, size_t stride_w);

// Input rows [iy0, iy0 + rows.rows) of the planes x (in_channels x in_h x in_w) with pad_left
// zero columns before column 0; rows outside the plane and columns past it are zeros.
void pack_conv_direct_rows(const float* x, size_t in_h, size_t in_w, long iy0, size_t pad_left, ConvDirectRows& rows);

// Weights [out_channels][in_channels * kh * kw] as blocks of kConvDirectChannels channels:
// [block][tap][channel], the last block zero-filled. out must hold
// ceil(out_channels / kConvDirectChannels) * kConvDirectChannels * taps floats.
void pack_conv_direct_weights(const float* w, size_t out_channels, size_t taps, float* out);

struct ConvDirectCall {
  ConvDirectRows x;             // output row r reads padded rows r * stride_h + ky
  const float* w = nullptr;     // packed weights of channels [0, channels), pack_conv_direct_weights
  const float* bias = nullptr;  // `channels` values, or null
  float* y = nullptr;           // output channel 0's plane at the call's first row
  const float* residual = nullptr;  // shaped and placed like y, or null; must not alias it
  size_t y_plane = 0;           // floats between output planes (of y and the residual)
  size_t channels = 0;          // output channels
  size_t out_rows = 0, out_w = 0;
  size_t kernel_h = 1, kernel_w = 1, stride_h = 1;
  ActivationParams activation;  // y = act(sum + residual)
};

void conv_direct(const ConvDirectCall& call, Isa isa = active_isa());

void f32_conv_direct_scalar(const ConvDirectCall& call);
void f32_conv_direct_avx2(const ConvDirectCall& call);
void f32_conv_direct_avx512(const ConvDirectCall& call);

}  // namespace grove::kernels
