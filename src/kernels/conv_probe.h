#pragma once
// Where a channels-last 3x3 stride-1 conv runs faster on Winograd F(4x4, 3x3)
// (winograd_f4x3_nhwc.h) than on the GEMM that adds its taps in registers (conv_rows.h), on
// this machine. The answer moves with the core: where a core issues 512-bit FMAs on two ports
// the row GEMM runs near peak, wins up to 64 input channels and nearly ties on small planes;
// where it splits them over 256-bit units Winograd's saved multiplies win from 16 channels on
// and on 14x14 planes too (docs/layout.md).

#include <cstdint>

namespace grove::kernels {

// Channel counts the probe times on its 28x28 plane, in order; a layer of fewer input channels
// than the first stays on the row GEMM.
inline constexpr int64_t kWinogradProbeChannels[] = {16, 32, 48};
// What the probe answers where Winograd never won, or where there is no row GEMM to compare.
inline constexpr int64_t kWinogradNhwcDefaultMinChannels = 64;

struct WinogradNhwcProbe {
  // The fewest input channels from which Winograd wins on a 28x28 plane.
  int64_t min_channels = kWinogradNhwcDefaultMinChannels;
  // Whether it also wins on a 14x14 plane (64 input channels), where a weight serves few blocks.
  bool small_planes = false;
  // The kept-channel row GEMM's time over Winograd's on that 14x14 layer: how much faster
  // Winograd runs a late layer than a pruned conv would without pruning anything (one that
  // computes fewer than 1 / gain of its products beats it, plan/feature_pruning.h). 1 where
  // there is no row GEMM to compare; 0: not measured.
  double small_plane_gain = 0;
  // Winograd's time on that layer adding up every other input channel (a pruned conv keeping
  // half, WinogradNhwcCall::kept_channels) over its time adding up all: its transforms do not
  // shrink with the kept channels, only its GEMMs, so this tells how much of Winograd's time a
  // pruned conv keeps (plan/feature_pruning.h). 0: not measured.
  double small_plane_half_kept = 0;
};

// Measured now: the row GEMM and Winograd run one 3x3 layer of 64 output channels on a 28x28
// plane per channel count of kWinogradProbeChannels, and on a 14x14 plane of 64 channels (the
// best of a few interleaved calls; a few milliseconds in all). Winograd must win by a margin,
// at a count and at every larger one probed. Answers the defaults where it never does, or
// where conv_row_supported is false.
WinogradNhwcProbe measure_winograd_nhwc();
// Only small_plane_half_kept (a millisecond or two): for a stored probe that lacks it, whose
// other answers stay as they were measured.
double measure_winograd_half_kept();

// Microseconds of one probe layer (`channels` in, 64 out, on a plane x plane image) on each
// primitive, the best of `calls` interleaved calls, for reports and tests; and the largest
// difference between their outputs (the same conv, so a probe that timed the wrong work shows).
struct WinogradProbeTimes {
  double rows_us = 0, winograd_us = 0;
  // The row GEMM adding up a list of kept channels (ConvRowCall::kept_channels), every one of
  // them listed: the path a pruned conv takes (ops/pruning/tile_pruned_conv_nhwc.cpp).
  double kept_rows_us = 0;
  // Winograd adding up every other input channel.
  double winograd_half_kept_us = 0;
  double max_difference = 0;
};
WinogradProbeTimes time_winograd_probe_layer(int64_t channels, int64_t plane, int calls);

}  // namespace grove::kernels
