// Tester for Antidote's decision means (kernels/keep_scores.h) on every ISA this CPU runs: each
// build must give the means of the documented sums bit for bit, written out here one addition
// at a time, over channel counts on and off the 8-lane width and planes on and off 8 positions.
#include <gtest/gtest.h>

#include <cmath>
#include <vector>

#include "kernels/keep_scores.h"
#include "random_values.h"
#include "supported_isas.h"

namespace grove::kernels {
namespace {

TEST(KeepMeans, EveryIsaAddsInTheDocumentedOrder) {
  for (size_t channels : {1, 3, 8, 13, 64, 130})
    for (size_t plane : {1, 7, 8, 49, 196}) {
      // Exponents 2^-60 .. 2^60: sums of these round in double, so another order gives other bits.
      std::vector<float> x = random_values(channels * plane, unsigned(channels * 1000 + plane));
      for (size_t i = 0; i < x.size(); ++i) x[i] = std::ldexp(x[i], int(i * 37 % 121) - 60);
      std::vector<double> lanes_of_channels(8 * channels, 0.0), want_positions(plane), want_channels(channels);
      for (size_t p = 0; p < plane; ++p) {
        double lane[8] = {};
        for (size_t c = 0; c < channels; ++c) {
          lanes_of_channels[(p % 8) * channels + c] += double(x[p * channels + c]);
          lane[c % 8] += double(x[p * channels + c]);
        }
        want_positions[p] =
            (((lane[0] + lane[1]) + (lane[2] + lane[3])) + ((lane[4] + lane[5]) + (lane[6] + lane[7]))) / double(channels);
      }
      for (size_t c = 0; c < channels; ++c) {
        double lane[8];
        for (size_t j = 0; j < 8; ++j) lane[j] = lanes_of_channels[j * channels + c];
        want_channels[c] =
            (((lane[0] + lane[1]) + (lane[2] + lane[3])) + ((lane[4] + lane[5]) + (lane[6] + lane[7]))) / double(plane);
      }
      for (Isa isa : supported_isas()) {
        // Scratch lanes left dirty by an earlier call: the kernel clears them.
        std::vector<double> lanes(8 * channels, 7.0), means(channels, -1.0), positions(plane, -1.0);
        keep_means_nhwc(x.data(), channels, plane, lanes.data(), means.data(), positions.data(), isa);
        for (size_t c = 0; c < channels; ++c)
          ASSERT_EQ(means[c], want_channels[c]) << isa_name(isa) << " " << channels << "x" << plane << " channel " << c;
        for (size_t p = 0; p < plane; ++p)
          ASSERT_EQ(positions[p], want_positions[p]) << isa_name(isa) << " " << channels << "x" << plane << " position " << p;
        // Either kind alone (the other null, skipped): the same means.
        std::vector<double> means_alone(channels, -1.0), positions_alone(plane, -1.0);
        keep_means_nhwc(x.data(), channels, plane, lanes.data(), means_alone.data(), nullptr, isa);
        keep_means_nhwc(x.data(), channels, plane, nullptr, nullptr, positions_alone.data(), isa);
        ASSERT_EQ(means_alone, means) << isa_name(isa);
        ASSERT_EQ(positions_alone, positions) << isa_name(isa);
      }
    }
}

}  // namespace
}  // namespace grove::kernels
