#include "kernels/conv_probe.h"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <iterator>
#include <vector>

#include "kernels/conv_rows.h"
#include "kernels/gemm.h"
#include "kernels/winograd_f4x3_nhwc.h"

namespace grove::kernels {

namespace {

constexpr size_t kOutChannels = 64;
constexpr int64_t kPlane = 28, kSmallPlane = 14, kSmallPlaneChannels = 64, kCalls = 4;
// Winograd must be this many times faster in the probe to be chosen. The probe runs both from
// cache; in a network, whose activations come from L2 and L3 and whose outputs may be slices
// of a Concat, Winograd's transforms keep less of their lead than the row GEMM does
// (docs/layout.md has the probe's and the networks' ratios on each CPU measured).
constexpr double kMargin = 1.5;

double elapsed_us(std::chrono::steady_clock::time_point since) {
  return std::chrono::duration<double, std::micro>(std::chrono::steady_clock::now() - since).count();
}

bool winograd_wins(const WinogradProbeTimes& t) { return t.winograd_us * kMargin <= t.rows_us; }

}  // namespace

WinogradProbeTimes time_winograd_probe_layer(int64_t channels, int64_t plane_size, int calls) {
  const size_t c = static_cast<size_t>(channels), plane = static_cast<size_t>(plane_size), padded = plane + 2;
  const size_t taps = 9, k = taps * c;
  // ONNX weights [cout][cin][3][3], for Winograd as they are and for the row GEMM with k
  // ordered kernel row, kernel column, channel (as the ConvNhwc rule packs them).
  std::vector<float> w(kOutChannels * k), w_rows(w.size());
  for (size_t i = 0; i < w.size(); ++i) w[i] = 0.01f * float(i % 17) - 0.08f;
  for (size_t j = 0; j < kOutChannels; ++j)
    for (size_t ch = 0; ch < c; ++ch)
      for (size_t t = 0; t < taps; ++t) w_rows[j * k + t * c + ch] = w[(j * c + ch) * taps + t];
  const PackedB rows_w = pack_b(w_rows.data(), k, kOutChannels, k, BLayout::n_by_k);
  WinogradF4x3NhwcWeights winograd_w;
  winograd_f4x3_nhwc_pack_weights(winograd_w, w.data(), kOutChannels, c);

  std::vector<float> x_padded(padded * padded * c, 0.0f), x(plane * plane * c);
  std::vector<float> y_rows(plane * plane * kOutChannels), y_winograd(y_rows.size());
  for (size_t i = 0; i < x.size(); ++i) x[i] = 0.5f - 0.03f * float(i % 29);
  for (size_t r = 0; r < plane; ++r)
    std::copy_n(x.data() + r * plane * c, plane * c, x_padded.data() + ((r + 1) * padded + 1) * c);

  ConvRowCall rows;
  rows.x = x_padded.data();
  rows.tap_row_floats = padded * c;
  rows.channels = c;
  rows.kernel_h = rows.kernel_w = 3;
  rows.out_w = plane;
  rows.rows = plane;
  rows.row_step_floats = padded * c;
  rows.w = &rows_w;
  rows.n = kOutChannels;
  rows.y = y_rows.data();
  rows.y_stride = kOutChannels;

  WinogradNhwcCall winograd;
  winograd.x = x.data();
  winograd.y = y_winograd.data();
  winograd.y_stride = kOutChannels;
  winograd.oc_end = kOutChannels;
  winograd.row_end = plane;
  winograd.shape = Conv2dShape{.channels = c, .in_h = plane, .in_w = plane, .out_h = plane, .out_w = plane,
                               .kernel_h = 3, .kernel_w = 3, .pad_top = 1, .pad_left = 1};
  WinogradNhwcScratch scratch;

  std::vector<uint32_t> every_channel(c);
  for (size_t ch = 0; ch < c; ++ch) every_channel[ch] = uint32_t(ch);
  ConvRowCall kept_rows = rows;
  kept_rows.kept_channels = every_channel.data();
  kept_rows.kept = c;
  std::vector<uint32_t> every_other;
  for (size_t ch = 0; ch < c; ch += 2) every_other.push_back(uint32_t(ch));
  WinogradNhwcCall half_kept = winograd;
  half_kept.kept_channels = every_other.data();
  half_kept.kept = every_other.size();
  std::vector<float> y_half(y_rows.size());
  half_kept.y = y_half.data();

  WinogradProbeTimes best{1e300, 1e300, 1e300, 1e300, 0};
  for (int i = 0; i < calls; ++i) {  // interleaved, so a slow moment of the machine hits all
    auto t = std::chrono::steady_clock::now();
    conv_rows(rows);
    best.rows_us = std::min(best.rows_us, elapsed_us(t));
    t = std::chrono::steady_clock::now();
    conv_rows(kept_rows);
    best.kept_rows_us = std::min(best.kept_rows_us, elapsed_us(t));
    t = std::chrono::steady_clock::now();
    winograd_f4x3_nhwc_conv(winograd, winograd_w, scratch);
    best.winograd_us = std::min(best.winograd_us, elapsed_us(t));
    t = std::chrono::steady_clock::now();
    winograd_f4x3_nhwc_conv(half_kept, winograd_w, scratch);
    best.winograd_half_kept_us = std::min(best.winograd_half_kept_us, elapsed_us(t));
  }
  for (size_t i = 0; i < y_rows.size(); ++i)
    best.max_difference = std::max(best.max_difference, double(std::abs(y_rows[i] - y_winograd[i])));
  return best;
}

WinogradNhwcProbe measure_winograd_nhwc() {
  WinogradNhwcProbe probe;
  probe.small_plane_gain = 1, probe.small_plane_half_kept = 1;
  if (!conv_row_supported(active_isa(), Precision::f32)) return probe;
  // From the most channels down: the first count where the row GEMM holds its own ends it.
  for (auto it = std::rbegin(kWinogradProbeChannels); it != std::rend(kWinogradProbeChannels); ++it) {
    if (!winograd_wins(time_winograd_probe_layer(*it, kPlane, kCalls))) break;
    probe.min_channels = *it;
  }
  // More calls on the small plane: its gain is a ratio the plan compares with (a millisecond or
  // two in all), and the first calls run on cold caches.
  const WinogradProbeTimes small = time_winograd_probe_layer(kSmallPlaneChannels, kSmallPlane, 4 * kCalls);
  probe.small_planes = winograd_wins(small);
  probe.small_plane_gain = small.winograd_us > 0 ? small.kept_rows_us / small.winograd_us : 1;
  probe.small_plane_half_kept = small.winograd_us > 0 ? small.winograd_half_kept_us / small.winograd_us : 1;
  return probe;
}

double measure_winograd_half_kept() {
  if (!conv_row_supported(active_isa(), Precision::f32)) return 1;
  const WinogradProbeTimes small = time_winograd_probe_layer(kSmallPlaneChannels, kSmallPlane, 4 * kCalls);
  return small.winograd_us > 0 ? small.winograd_half_kept_us / small.winograd_us : 1;
}

}  // namespace grove::kernels
