// Tester for the quantization kernels (kernels/quantize.h): every ISA this CPU has must give
// the scalar loops' exact bits, over lengths covering every vector remainder, values on
// rounding halves, values that saturate both ways, and NaN.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <random>
#include <vector>

#include "kernels/qadd.h"
#include "kernels/quantize.h"
#include "kernels/requantize.h"

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

namespace grove::kernels {
namespace {

// requantize.h: the avx512 kernel against the scalar loop, bit for bit, over random and
// extreme sums, multipliers that round many values to .5, both output dtypes, a Relu floor,
// and an infinite multiplier (0 * inf is NaN: the zero point).
TEST(Requantize, Avx512MatchesScalarExactly) {
  if (!isa_supported(Isa::avx512)) GTEST_SKIP() << "no AVX-512";
  std::mt19937 rng(5);
  std::vector<int32_t> acc(1000 + 7);
  for (auto& v : acc) v = static_cast<int32_t>(rng() % 200001) - 100000;
  acc[0] = 0, acc[1] = 1 << 30, acc[2] = -(1 << 30), acc[3] = 5, acc[4] = -5;
  for (float multiplier : {0.001f, 0.5f, 0.25f, 1.0f, 3.7e-5f, INFINITY})
    for (bool is_signed : {false, true})
      for (bool relu : {false, true}) {
        RequantizeParams p;
        p.add = 17, p.multiplier = multiplier, p.zero_point = is_signed ? -3.0f : 121.0f;
        p.lo = is_signed ? -128.0f : 0.0f, p.hi = is_signed ? 127.0f : 255.0f;
        if (relu) p.lo = std::max(p.lo, p.zero_point);
        std::vector<uint8_t> want(acc.size()), got(acc.size());
        requantize_scalar(acc.data(), acc.size(), p, is_signed, want.data());
        requantize_avx512(acc.data(), acc.size(), p, is_signed, got.data());
        ASSERT_EQ(got, want) << "multiplier " << multiplier << (is_signed ? " int8" : " uint8") << (relu ? " relu" : "");
      }
}

// qadd.h: the avx512 kernel against the scalar loop, bit for bit, on every byte pair, both
// dtypes, with and without the Relu, scales whose sums land on .5 steps, and scales that
// make NaN (the kernel's other path) or infinities.
TEST(QAdd, Avx512MatchesScalarOnEveryBytePair) {
  if (!isa_supported(Isa::avx512)) GTEST_SKIP() << "no AVX-512";
  std::vector<uint8_t> a(65536 + 9), b(65536 + 9);
  for (size_t i = 0; i < a.size(); ++i) a[i] = static_cast<uint8_t>(i % 256), b[i] = static_cast<uint8_t>(i / 256 % 256);
  for (bool is_signed : {false, true})
    for (bool relu : {false, true})
      for (float y_scale : {0.021f, 0.5f, 1e-6f, 0.0f, std::nanf("")})
      for (float a_scale : {0.013f, 3e38f}) {  // 3e38: sums that overflow to inf - inf = NaN
        QAddParams p;
        p.a_scale = a_scale, p.a_zero = is_signed ? -7.0f : 121.0f, p.b_scale = a_scale > 1 ? -a_scale : 0.0071f, p.b_zero = 3.0f;
        p.y_scale = y_scale, p.y_zero = is_signed ? 5.0f : 17.0f;
        p.lo = is_signed ? -128.0f : 0.0f, p.hi = is_signed ? 127.0f : 255.0f;
        p.relu = relu, p.is_signed = is_signed;
        std::vector<uint8_t> want(a.size()), got(a.size());
        qadd_scalar(a.data(), b.data(), a.size(), p, want.data());
        qadd_avx512(a.data(), b.data(), a.size(), p, got.data());
        ASSERT_EQ(got, want) << (is_signed ? "int8" : "uint8") << (relu ? " relu" : "") << " y_scale " << y_scale
                             << " a_scale " << a_scale;
      }
}

}  // namespace
}  // namespace grove::kernels
