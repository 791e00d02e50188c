// Tester for the quantization kernels (kernels/quantize.h): every ISA this CPU has must give
// the scalar loops' exact bits, over lengths covering every vector remainder, values on
// rounding halves, values that saturate both ways, and NaN.
#include <gtest/gtest.h>

#include <cmath>
#include <random>
#include <vector>

#include "kernels/quantize.h"

namespace grove::kernels {
namespace {

std::vector<float> test_values(size_t n, unsigned seed) {
  std::mt19937 rng(seed);
  std::uniform_real_distribution<float> dist(-3.0f, 5.0f);
  std::vector<float> x(n);
  for (size_t i = 0; i < n; ++i) {
    switch (rng() % 6) {
      case 0: x[i] = (static_cast<float>(rng() % 40) - 20.0f + 0.5f) * 0.02f; break;  // halves of scale 0.02
      case 1: x[i] = (rng() % 2 ? 1.0f : -1.0f) * 1e6f; break;                          // saturates
      default: x[i] = dist(rng);
    }
  }
  return x;
}

TEST(QuantizeKernels, MatchScalarBits) {
  for (Isa isa : {Isa::avx2, Isa::avx512}) {
    if (!isa_supported(isa)) continue;
    for (size_t n : {0, 1, 7, 8, 9, 15, 16, 17, 63, 1000}) {
      std::vector<float> x = test_values(n, static_cast<unsigned>(n) + 1);
      FloatRange want = range_with_zero_scalar(x.data(), n), got = range_with_zero(x.data(), n, isa);
      EXPECT_EQ(got.lo, want.lo) << n;
      EXPECT_EQ(got.hi, want.hi) << n;
      EXPECT_FALSE(got.has_nan);
      for (float zero_point : {0.0f, 100.0f, 255.0f}) {
        std::vector<uint8_t> a(n), b(n);
        quantize_u8_scalar(x.data(), n, 0.02f, zero_point, a.data());
        quantize_u8(x.data(), n, 0.02f, zero_point, b.data(), isa);
        EXPECT_EQ(a, b) << isa_name(isa) << " n=" << n << " zero point " << zero_point;
      }
    }
    // NaN: reported by the range, quantized to the zero point, in the vector body and the tail.
    std::vector<float> x(19, 1.0f);
    x[3] = x[17] = std::nanf("");
    EXPECT_TRUE(range_with_zero(x.data(), x.size(), isa).has_nan);
    std::vector<float> tail_only(19, 1.0f);
    tail_only[18] = std::nanf("");
    EXPECT_TRUE(range_with_zero(tail_only.data(), tail_only.size(), isa).has_nan);
    std::vector<uint8_t> y(x.size());
    quantize_u8(x.data(), x.size(), 0.5f, 7.0f, y.data(), isa);
    EXPECT_EQ(y[3], 7);
    EXPECT_EQ(y[17], 7);
    EXPECT_EQ(y[0], 9);
  }
}

}  // namespace
}  // namespace grove::kernels
