// The probe that picks, per machine, from how many input channels a channels-last 3x3 layer
// stays on Winograd instead of the row GEMM (kernels/conv_probe.h).
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <iterator>

#include "kernels/conv_probe.h"
#include "kernels/conv_rows.h"
#include "kernels/gemm.h"

namespace grove::kernels::testing {
namespace {

// Both primitives must compute the same layer, or the probe compares unlike work.
TEST(ConvProbe, TimesBothPrimitivesOnTheSameLayer) {
  if (!conv_row_supported(active_isa(), Precision::f32)) GTEST_SKIP() << "no row GEMM on this ISA";
  for (int64_t plane : {28, 14, 13})  // 13: blocks that reach past the plane
    for (int64_t channels : kWinogradProbeChannels) {
      const WinogradProbeTimes t = time_winograd_probe_layer(channels, plane, 1);
      EXPECT_GT(t.rows_us, 0) << channels;
      EXPECT_GT(t.winograd_us, 0) << channels;
      EXPECT_TRUE(std::isfinite(t.rows_us) && std::isfinite(t.winograd_us)) << channels;
      // Outputs of order one: Winograd's error stays well under a thousandth of them.
      EXPECT_LT(t.max_difference, 1e-3) << channels << " channels on " << plane;
    }
}

TEST(ConvProbe, AnswersAProbedChannelCountOrTheDefault) {
  const WinogradNhwcProbe probe = measure_winograd_nhwc();
  const int64_t min_channels = probe.min_channels;
  if (!conv_row_supported(active_isa(), Precision::f32)) {
    EXPECT_EQ(min_channels, kWinogradNhwcDefaultMinChannels);
    EXPECT_FALSE(probe.small_planes);
    return;
  }
  const bool probed = std::find(std::begin(kWinogradProbeChannels), std::end(kWinogradProbeChannels), min_channels) !=
                      std::end(kWinogradProbeChannels);
  EXPECT_TRUE(probed || min_channels == kWinogradNhwcDefaultMinChannels) << min_channels;
}

}  // namespace
}  // namespace grove::kernels::testing
