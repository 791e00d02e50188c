// vmath tester: every kernel of kernels/vmath.h on every ISA this CPU supports, against
// double-precision math, for lengths 1 .. past two vectors of the widest ISA (every
// remainder) and a few long rows, with inputs covering the ranges where each function's
// approximation changes (tanh's small-|x| branch, exp's underflow, erf's tails).
#include <gtest/gtest.h>

#include <cstring>

#include <memory>

#include <cmath>
#include <limits>
#include <random>
#include <vector>

#include "kernels/isa.h"
#include "kernels/vmath.h"

namespace grove::kernels::testing {
namespace {

// 1 .. 2 * 16 + 3 (past two avx512 vectors), then long rows with every tail length class.
std::vector<size_t> lengths() {
  std::vector<size_t> n;
  for (size_t i = 1; i <= 35; ++i) n.push_back(i);
  for (size_t i : {63, 64, 65, 127, 128, 129, 768, 771, 3072}) n.push_back(i);
  return n;
}

std::vector<float> random_floats(size_t n, float lo, float hi, unsigned seed) {
  std::mt19937 rng(seed);
  std::uniform_real_distribution<float> dist(lo, hi);
  std::vector<float> v(n);
  for (auto& x : v) x = dist(rng);
  return v;
}

class VMath : public ::testing::TestWithParam<Isa> {
 protected:
  void SetUp() override {
    if (!isa_supported(GetParam())) GTEST_SKIP() << "CPU lacks " << isa_name(GetParam());
  }
  const VMathKernels& k() const { return vmath(GetParam()); }
};

double oracle(UnaryOp op, double x) {
  switch (op) {
    case UnaryOp::erf: return std::erf(x);
    case UnaryOp::gelu_erf: return 0.5 * x * (1.0 + std::erf(x / std::sqrt(2.0)));
    case UnaryOp::tanh: return std::tanh(x);
    case UnaryOp::sigmoid: return 1.0 / (1.0 + std::exp(-x));
  }
  return 0;
}

void check_unary(const VMathKernels& k, UnaryOp op, float lo, float hi, double abs_tol, double rel_tol) {
  for (size_t n : lengths()) {
    std::vector<float> x = random_floats(n, lo, hi, unsigned(n)), y(n + 1, 123.0f);
    k.unary(op, n, x.data(), y.data());
    for (size_t i = 0; i < n; ++i) {
      const double want = oracle(op, x[i]);
      ASSERT_NEAR(y[i], want, abs_tol + rel_tol * std::fabs(want)) << k.name << " op " << int(op) << " n " << n << " x " << x[i];
    }
    EXPECT_EQ(y[n], 123.0f) << "wrote past the end, n " << n;
  }
}

TEST_P(VMath, ErfWithin1e6Absolute) {
  check_unary(k(), UnaryOp::erf, -5.0f, 5.0f, 1e-6, 0);
  check_unary(k(), UnaryOp::erf, -0.05f, 0.05f, 1e-6, 0);
}

TEST_P(VMath, GeluErfWithin1e6Absolute) {
  check_unary(k(), UnaryOp::gelu_erf, -6.0f, 6.0f, 1e-6, 0);
  check_unary(k(), UnaryOp::gelu_erf, -20.0f, 20.0f, 1e-6, 0);
}

TEST_P(VMath, TanhAndSigmoid) {
  check_unary(k(), UnaryOp::tanh, -10.0f, 10.0f, 1e-6, 0);
  check_unary(k(), UnaryOp::tanh, -0.2f, 0.2f, 1e-9, 1e-6);  // the small-|x| branch, relative
  check_unary(k(), UnaryOp::sigmoid, -30.0f, 30.0f, 1e-6, 1e-6);
}

TEST_P(VMath, UnaryExtremesStayFinite) {
  const float inf = std::numeric_limits<float>::infinity();
  std::vector<float> x = {-inf, -1e30f, -100.0f, -88.5f, 88.5f, 100.0f, 1e30f, inf, 0.0f, -0.0f};
  std::vector<float> y(x.size());
  for (UnaryOp op : {UnaryOp::erf, UnaryOp::gelu_erf, UnaryOp::tanh, UnaryOp::sigmoid}) {
    k().unary(op, x.size(), x.data(), y.data());
    for (size_t i = 0; i < x.size(); ++i) {
      if (op == UnaryOp::gelu_erf && std::isinf(x[i])) continue;  // x * Phi(x): inf * 0 at -inf
      const double want = oracle(op, x[i]);
      EXPECT_NEAR(y[i], want, 1e-6 + 1e-6 * std::fabs(want)) << k().name << " op " << int(op) << " x " << x[i];
    }
  }
}

TEST_P(VMath, BinaryEveryFormAndOp) {
  for (size_t n : lengths()) {
    std::vector<float> a = random_floats(n, -2, 2, unsigned(n)), b = random_floats(n, 0.5f, 3, unsigned(n + 7));
    for (BinaryOp op : {BinaryOp::add, BinaryOp::sub, BinaryOp::mul, BinaryOp::div})
      for (BinaryForm form : {BinaryForm::vector_vector, BinaryForm::vector_scalar, BinaryForm::scalar_vector}) {
        std::vector<float> y(n + 1, 123.0f);
        k().binary(op, form, n, a.data(), b.data(), y.data());
        for (size_t i = 0; i < n; ++i) {
          const float u = form == BinaryForm::scalar_vector ? a[0] : a[i];
          const float v = form == BinaryForm::vector_scalar ? b[0] : b[i];
          const float want = op == BinaryOp::add ? u + v : op == BinaryOp::sub ? u - v : op == BinaryOp::mul ? u * v : u / v;
          ASSERT_EQ(y[i], want) << k().name << " op " << int(op) << " form " << int(form) << " n " << n;
        }
        EXPECT_EQ(y[n], 123.0f);
      }
  }
}

TEST_P(VMath, SoftmaxMatchesDoubleOracle) {
  for (size_t n : lengths())
    for (float spread : {1.0f, 30.0f, 200.0f}) {  // 200: most terms underflow to 0
      std::vector<float> x = random_floats(n, -spread, spread, unsigned(n * 3)), y(n + 1, 123.0f);
      double peak = -1e300, sum = 0;
      for (float v : x) peak = std::max(peak, double(v));
      for (float v : x) sum += std::exp(double(v) - peak);
      k().softmax(n, x.data(), y.data());
      for (size_t i = 0; i < n; ++i) {
        const double want = std::exp(double(x[i]) - peak) / sum;
        ASSERT_NEAR(y[i], want, 1e-7 + 1e-5 * want) << k().name << " n " << n << " spread " << spread;
      }
      EXPECT_EQ(y[n], 123.0f);
    }
}

TEST_P(VMath, SoftmaxInPlaceAndMaskedRow) {
  // An additive mask of -10000 or -FLT_MAX on some keys, as attention uses.
  std::vector<float> x = random_floats(37, -3, 3, 5);
  for (size_t i = 20; i < 37; ++i) x[i] = i % 2 ? -10000.0f : std::numeric_limits<float>::lowest();
  std::vector<float> want = x;
  k().softmax(x.size(), x.data(), x.data());
  double sum = 0;
  for (size_t i = 0; i < 20; ++i) sum += std::exp(double(want[i]));
  for (size_t i = 0; i < x.size(); ++i) {
    const double w = i < 20 ? std::exp(double(want[i])) / sum : 0.0;
    ASSERT_NEAR(x[i], w, 1e-7 + 1e-5 * w) << i;
  }
}

TEST_P(VMath, LayerNormMatchesDoubleOracle) {
  for (size_t n : lengths())
    for (bool with_bias : {false, true}) {
      std::vector<float> x = random_floats(n, -4, 6, unsigned(n)), scale = random_floats(n, 0.5f, 2, unsigned(n + 1));
      std::vector<float> bias = random_floats(n, -1, 1, unsigned(n + 2)), y(n + 1, 123.0f);
      const float eps = 1e-5f;
      k().layernorm(n, x.data(), scale.data(), with_bias ? bias.data() : nullptr, eps, y.data());
      double mean = 0, var = 0;
      for (float v : x) mean += v;
      mean /= double(n);
      for (float v : x) var += (v - mean) * (v - mean);
      var /= double(n);
      for (size_t i = 0; i < n; ++i) {
        const double want = (x[i] - mean) / std::sqrt(var + eps) * scale[i] + (with_bias ? bias[i] : 0.0);
        ASSERT_NEAR(y[i], want, 1e-5 + 1e-5 * std::fabs(want)) << k().name << " n " << n;
      }
      EXPECT_EQ(y[n], 123.0f);
    }
}

// Where(keep, y, fill) on a row: exactly the elements whose keep byte is false take the fill,
// for every length around the vector width (whole vectors and the tail), in place.
TEST_P(VMath, FillUnkeptReplacesExactlyTheUnkeptElements) {
  std::mt19937 rng(11);
  for (size_t n : {size_t(0), size_t(1), size_t(7), size_t(15), size_t(16), size_t(17), size_t(33), size_t(100)}) {
    std::unique_ptr<bool[]> keep(new bool[n + 1]);
    std::vector<float> y(n), want(n);
    for (size_t i = 0; i < n; ++i) {
      keep[i] = rng() % 3 != 0;
      y[i] = static_cast<float>(i) + 0.5f;
      want[i] = keep[i] ? y[i] : -1e30f;
    }
    k().fill_unkept(n, keep.get(), -1e30f, y.data());
    EXPECT_EQ(y, want) << "n " << n;
  }
}

// softmax_tail gives softmax's bits on a row whose [live, n) holds the tail value: with the
// tail's exps skipped (a fill far below the live max: -3.4e38, -inf, max - 100) and with the
// whole row computed (a tail too close to matter as 0, a NaN, nothing live, nothing masked).
TEST_P(VMath, SoftmaxTailGivesTheBitsOfTheWholeRow) {
  std::mt19937 rng(12);
  std::uniform_real_distribution<float> score(-8.0f, 8.0f);
  for (size_t n : {size_t(1), size_t(15), size_t(16), size_t(17), size_t(64), size_t(100), size_t(256)})
    for (size_t live : {size_t(0), size_t(1), n / 3, n - 1, n})
      for (float tail : {-3.4028235e38f, -std::numeric_limits<float>::infinity(), -100.0f, -10.0f, std::nanf("")}) {
        if (live > n) continue;
        std::vector<float> x(n), want(n), got(n);
        for (size_t i = 0; i < n; ++i) x[i] = i < live ? score(rng) : tail;
        k().softmax(n, x.data(), want.data());
        k().softmax_tail(n, live, tail, x.data(), got.data());
        for (size_t i = 0; i < n; ++i)
          ASSERT_TRUE(std::memcmp(&got[i], &want[i], sizeof(float)) == 0)
              << "n " << n << " live " << live << " tail " << tail << " element " << i << ": " << got[i] << " vs " << want[i];
      }
}

INSTANTIATE_TEST_SUITE_P(AllIsas, VMath, ::testing::Values(Isa::scalar, Isa::avx2, Isa::avx512),
                         [](const auto& info) { return std::string(isa_name(info.param)); });

}  // namespace
}  // namespace grove::kernels::testing
