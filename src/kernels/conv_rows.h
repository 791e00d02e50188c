#pragma once
// A channels-last convolution computed straight from (padded) input rows, without laying out
// any window: the float GEMM microkernel reads A where it lies (GemmTileArgs::a_stride) and
// adds up a block of positions' taps in its registers, one run of k per tap
// (GemmTileArgs::tap_offsets), the fused epilogue applied after the last. Weights are the
// ConvNhwc panels (k ordered kernel row, kernel column, channel), so tap t's slice of a panel
// starts at row t * channels.
#include <cstddef>
#include <cstdint>
#include <vector>

#include "kernels/aligned_buffer.h"
#include "kernels/epilogue.h"
#include "kernels/gemm.h"

namespace grove::kernels {

// A worker's buffers for conv_rows' tap-by-tap path (ConvRowCall::kept_pixels).
struct ConvRowScratch {
  AlignedFloats sums;                   // a row of partial sums per output computed tap by tap (rows on cache lines)
  std::vector<uint32_t> windows;        // each listed output's window, in pixels from x
  std::vector<uint32_t> in_registers;   // the listed outputs computed in registers
  std::vector<uint32_t> by_tap;         // and those computed tap by tap
};

struct ConvRowCall {
  // Input pixel p of the padded row a tap of kernel row 0 reads, at x + p * channels; kernel row
  // ki reads the row ki * tap_row_floats further on. Padding is zeros in that copy.
  const float* x = nullptr;
  // With bf16 weights (AVX512-BF16), the padded rows as bf16 values instead of x, an even
  // number of channels per pixel; the *_floats sizes then count bf16 values.
  const uint16_t* x_bf16 = nullptr;
  size_t tap_row_floats = 0;
  size_t channels = 0;
  // Floats from one input pixel to the next in the copy (0: channels). More than channels keeps
  // rows of A whose step is a multiple of 4 KiB off one L1 set.
  size_t pixel_floats = 0;
  size_t kernel_h = 1, kernel_w = 1, stride_w = 1, dilation_w = 1;
  size_t out_w = 0;  // output positions per row; position o reads pixels o * stride_w + kj * dilation_w
  size_t rows = 1;   // output rows; row r's taps read from x + r * row_step_floats
  size_t row_step_floats = 0;
  const PackedB* w = nullptr;  // f32 or bf16, k = kernel_h * kernel_w * channels
  size_t n0 = 0, n = 0;        // output channels [n0, n0 + n); n0 a multiple of w->nr
  float* y = nullptr;          // output position 0, channel n0; positions y_stride floats apart, rows out_w positions
  // With bf16 weights, y as bf16 instead (y unused), each value rounded once after the epilogue;
  // every tap then adds up in registers, so the kernel may have at most kConvRowsMaxTaps.
  uint16_t* y_bf16 = nullptr;
  size_t y_stride = 0;
  const float* residual = nullptr;  // shaped like y (same stride), or null
  const float* bias = nullptr;      // for channel n0 on, or null
  ActivationParams activation;
  size_t taps_per_call = 0;  // taps one microkernel call adds up; 0: conv_rows_taps_per_call's
  // f32 only: the channels to add up (increasing), the others skipped as if zero, their
  // values in x never read and their weights never copied (a pruned conv,
  // ops/pruning/tile_pruned_conv_nhwc.cpp). Null: every channel.
  const uint32_t* kept_channels = nullptr;
  size_t kept = 0;
  // f32 only: the output positions to compute (increasing, each below rows * out_w, counted
  // from y's position 0), or null for every one. The others in y (and the residual) are neither
  // read nor written. A pruned conv computes only the outputs centred on kept positions
  // (ops/pruning/tile_pruned_conv_nhwc.cpp): up to 14 of them go to one microkernel call, each
  // row of A read where its window lies (GemmTileArgs::a_rows), so no window is laid out.
  const uint32_t* outputs = nullptr;
  size_t output_count = 0;
  // With outputs only: one byte per pixel of the padded copy (the pixel at x + i * pixel_floats
  // is byte i), 0 where that pixel is all zeros (a pruned position, padding). A tap that reads
  // a zero pixel adds nothing to its output: an output whose other taps cost less tap by tap
  // (conv_rows_tap_by_tap_cost each) than all of them in registers is computed tap by tap, with the
  // other such outputs, over only its taps that read kept pixels, its partial sums in scratch. A
  // conv of a map with positions pruned, whose outputs are centred on kept positions, so skips
  // about half of their other taps too.
  const unsigned char* kept_pixels = nullptr;
  ConvRowScratch* scratch = nullptr;  // needed with kept_pixels
};

// What a tap costs tap by tap (ConvRowCall::kept_pixels), relative to one added up in
// registers, for taps of `steps` k steps (the kept channels): its C goes through memory once
// per tap, each call has a fixed cost, and its blocks are shorter. Fitted to a 14 x 64 x 64
// conv with half its positions kept at random (hot weights, Zen 5): every listed output tap by
// tap ran in 0.62 of the register path's time with every channel kept (64 steps) and 0.72 with
// half (31); 1.15 + 14 / steps. The plan prices the path with it too (plan/feature_pruning.cpp).
double conv_rows_tap_by_tap_cost(size_t steps);

// The most taps one microkernel call adds up.
inline constexpr size_t kConvRowsMaxTaps = 64;

// Taps one microkernel call adds up in its registers by default (the others go on in y), for
// panels of nr output channels.
size_t conv_rows_taps_per_call(size_t channels, size_t taps, size_t nr);

// Whether conv_row runs on this ISA and precision (a microkernel that reads A in place).
bool conv_row_supported(Isa isa, Precision precision);

// The call's output rows: every position (or call.outputs), every channel. Per panel of output
// channels, all the rows run over the panel's weights of every tap (read from memory once for
// the rows, then from cache); partial sums stay in registers, not in y. Throws grove::Error
// where conv_row_supported is false or the weights do not match.
void conv_rows(const ConvRowCall& call);

}  // namespace grove::kernels
