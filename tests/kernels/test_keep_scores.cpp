// Tester for Antidote's decision sums (kernels/keep_scores.h) on every ISA this CPU runs: each
// build must give the sums of the documented order bit for bit, written out here one addition
// at a time, over channel counts on and off the 8-lane width and planes on and off 8 positions.
#include <gtest/gtest.h>

#include <cmath>
#include <vector>

#include "kernels/keep_scores.h"
#include "random_values.h"
#include "supported_isas.h"

namespace grove::kernels {
namespace {

TEST(KeepSums, EveryIsaAddsInTheDocumentedOrder) {
  for (size_t channels : {1, 3, 8, 13, 64, 130})
    for (size_t plane : {1, 7, 8, 49, 196}) {
      // Exponents 2^-60 .. 2^60: sums of these round in double, so another order gives other bits.
      std::vector<float> x = random_values(channels * plane, unsigned(channels * 1000 + plane));
      for (size_t i = 0; i < x.size(); ++i) x[i] = std::ldexp(x[i], int(i * 37 % 121) - 60);
      std::vector<double> want_lanes(8 * channels, 0.0), want_positions(plane);
      for (size_t p = 0; p < plane; ++p) {
        double lane[8] = {};
        for (size_t c = 0; c < channels; ++c) {
          want_lanes[(p % 8) * channels + c] += double(x[p * channels + c]);
          lane[c % 8] += double(x[p * channels + c]);
        }
        want_positions[p] = ((lane[0] + lane[1]) + (lane[2] + lane[3])) + ((lane[4] + lane[5]) + (lane[6] + lane[7]));
      }
      for (Isa isa : supported_isas()) {
        std::vector<double> lanes(8 * channels, 0.0), positions(plane, -1.0);
        keep_sums_nhwc(x.data(), channels, plane, lanes.data(), positions.data(), isa);
        for (size_t i = 0; i < lanes.size(); ++i)
          ASSERT_EQ(lanes[i], want_lanes[i]) << isa_name(isa) << " " << channels << "x" << plane << " lane " << i;
        for (size_t p = 0; p < plane; ++p)
          ASSERT_EQ(positions[p], want_positions[p]) << isa_name(isa) << " " << channels << "x" << plane << " position " << p;
        // Either kind alone (the other null, skipped): the same sums.
        std::vector<double> lanes_alone(8 * channels, 0.0), positions_alone(plane, -1.0);
        keep_sums_nhwc(x.data(), channels, plane, lanes_alone.data(), nullptr, isa);
        keep_sums_nhwc(x.data(), channels, plane, nullptr, positions_alone.data(), isa);
        ASSERT_EQ(lanes_alone, lanes) << isa_name(isa);
        ASSERT_EQ(positions_alone, positions) << isa_name(isa);
      }
    }
}

}  // namespace
}  // namespace grove::kernels
