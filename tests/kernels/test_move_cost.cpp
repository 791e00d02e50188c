// The planner's prices of a moved element (kernels/move_cost.h): measurements, so only their
// form is fixed: a power of four (packing) or of two (a layout Transpose) in range.
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

TEST(MoveCost, TransposeIsAPowerOfTwoInRange) {
  const double flops = measure_transpose_flops();
  ASSERT_TRUE(std::isfinite(flops));
  EXPECT_GE(flops, 1.0);
  EXPECT_LE(flops, 1024.0);
  EXPECT_EQ(std::log2(flops), std::round(std::log2(flops))) << flops;
}

}  // namespace
}  // namespace grove::kernels::testing
