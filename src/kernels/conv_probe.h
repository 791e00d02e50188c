#pragma once
// Which channels-last primitive runs a 3x3 stride-1 conv of few input channels faster on this
// machine: the GEMM that adds its taps in registers (conv_rows.h) or Winograd F(4x4, 3x3)
// (winograd_f4x3_nhwc.h). The answer moves with the core: where a core issues 512-bit FMAs on
// two ports the row GEMM runs near peak and wins up to 64 input channels; where it splits them
// over 256-bit units Winograd's saved multiplies win from 16 channels on (docs/layout.md).

#include <cstdint>

namespace grove::kernels {

// Channel counts the probe times, in order; a layer of fewer input channels than the first
// stays on the row GEMM.
inline constexpr int64_t kWinogradProbeChannels[] = {16, 32, 48};
// What the probe answers where Winograd never won, or where there is no row GEMM to compare.
inline constexpr int64_t kWinogradNhwcDefaultMinChannels = 64;

// The fewest input channels from which the channels-last Winograd beats the row GEMM, measured
// now: both run one 3x3 layer of 64 output channels on a 28x28 plane per channel count of
// kWinogradProbeChannels (the best of a few interleaved calls; a few milliseconds in all).
// Winograd must win by a margin at that count and at every larger one probed. Returns
// kWinogradNhwcDefaultMinChannels where it never does, or where conv_row_supported is false.
int64_t measure_winograd_nhwc_min_channels();

// Microseconds of one probe layer on each primitive (the best of `calls` interleaved calls),
// for reports and tests; and the largest difference between their outputs (the same conv,
// so a probe that timed the wrong work shows).
struct WinogradProbeTimes {
  double rows_us = 0, winograd_us = 0;
  double max_difference = 0;
};
WinogradProbeTimes time_winograd_probe_layer(int64_t channels, int calls);

}  // namespace grove::kernels
