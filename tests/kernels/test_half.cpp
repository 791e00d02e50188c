// float32 <-> float16 array conversion (kernels/half.h) against the library's scalar
// conversions (graph/tensor.h: one rounding, half to even): every half widens to the same
// float, and floats at and around every rounding boundary narrow to the same half. Lengths
// that leave a tail of every size are covered.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <limits>
#include <random>
#include <vector>

#include "graph/tensor.h"
#include "kernels/half.h"
#include "kernels/isa.h"

namespace grove::kernels::testing {
namespace {

bool same(float a, float b) { return (std::isnan(a) && std::isnan(b)) || std::memcmp(&a, &b, sizeof a) == 0; }

TEST(HalfConvert, EveryHalfWidensExactly) {
  if (!isa_supported(Isa::avx2)) GTEST_SKIP() << "no vector conversion on this CPU";
  std::vector<uint16_t> all(65536);
  for (size_t i = 0; i < all.size(); ++i) all[i] = static_cast<uint16_t>(i);
  std::vector<float> got(all.size());
  avx2::convert_f16_to_f32(all.data(), got.data(), all.size());
  for (size_t i = 0; i < all.size(); ++i) ASSERT_TRUE(same(got[i], f16_to_f32(all[i]))) << "half bits " << i;
}

TEST(HalfConvert, NarrowingRoundsOnceHalfToEven) {
  if (!isa_supported(Isa::avx2)) GTEST_SKIP() << "no vector conversion on this CPU";
  std::vector<float> x;
  // Every half, the midpoints between neighbours (ties) and one float either side of them.
  for (uint32_t h = 0; h < 0x7c00; ++h) {
    const float lo = f16_to_f32(static_cast<uint16_t>(h)), hi = f16_to_f32(static_cast<uint16_t>(h + 1));
    const float mid = static_cast<float>((static_cast<double>(lo) + hi) / 2);
    for (float v : {lo, mid, std::nextafter(mid, 0.0f), std::nextafter(mid, 1e30f)}) {
      x.push_back(v);
      x.push_back(-v);
    }
  }
  const float inf = std::numeric_limits<float>::infinity();
  for (float v : {65504.0f, 65519.99f, 65520.0f, 1e30f, inf, -inf, std::numeric_limits<float>::quiet_NaN(), 1e-30f, -0.0f})
    x.push_back(v);
  std::mt19937 rng(3);
  std::uniform_real_distribution<float> wide(-70000.0f, 70000.0f);
  for (int i = 0; i < 10000; ++i) x.push_back(wide(rng));
  for (size_t n : {x.size(), size_t{1}, size_t{7}, size_t{9}, size_t{15}}) {
    std::vector<uint16_t> got(n);
    avx2::convert_f32_to_f16(x.data(), got.data(), n);
    for (size_t i = 0; i < n; ++i) {
      const uint16_t want = f64_to_f16(x[i]);
      if (std::isnan(x[i])) ASSERT_TRUE(std::isnan(f16_to_f32(got[i])));
      else ASSERT_EQ(got[i], want) << "float " << x[i] << " at " << i << " of " << n;
    }
  }
}

TEST(HalfConvert, ScalarIsaLeavesItToTheCaller) {
  // The dispatcher converts only when the active ISA has the instructions.
  float x = 1.5f;
  uint16_t y = 0;
  const bool converted = convert_f32_to_f16(&x, &y, 1);
  EXPECT_EQ(converted, active_isa() != Isa::scalar);
  if (converted) EXPECT_EQ(y, f64_to_f16(1.5));
}

}  // namespace
}  // namespace grove::kernels::testing
