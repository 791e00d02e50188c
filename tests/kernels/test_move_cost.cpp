// The planner's price of a moved element (kernels/move_cost.h): a measurement, so only its
// form is fixed: a power of four in range, and the same on a second call moments later.
#include <gtest/gtest.h>

#include <cmath>

#include "kernels/move_cost.h"

namespace grove::kernels::testing {
namespace {

TEST(MoveCost, IsAPowerOfFourInRange) {
  const double flops = measure_move_flops();
  ASSERT_TRUE(std::isfinite(flops));
  EXPECT_GE(flops, 1.0);
  EXPECT_LE(flops, 1024.0);
  const double exponent = std::log2(flops) / 2;
  EXPECT_EQ(exponent, std::round(exponent)) << flops;
}

}  // namespace
}  // namespace grove::kernels::testing
