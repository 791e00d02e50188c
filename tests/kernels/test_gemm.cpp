// Tile GEMM tester: every ISA this CPU supports, sizes sweeping every remainder of the
// register block and of the cache blocks, every epilogue, strided operands, accumulation.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdlib>
#include <limits>
#include <random>
#include <vector>

#include "gemm_tester.h"
#include "graph/error.h"
#include "kernels/gemm.h"
#include "kernels/isa.h"

namespace grove::kernels::testing {
namespace {

// One microkernel family: an ISA and the precision of its operands.
struct GemmKernel {
  Isa isa;
  Precision precision;
};

class Gemm : public ::testing::TestWithParam<GemmKernel> {
 protected:
  void SetUp() override {
    if (!precision_supported(GetParam().precision, GetParam().isa))
      GTEST_SKIP() << "CPU lacks " << isa_name(GetParam().isa) << " for this precision";
    blocking_ = gemm_blocking(GetParam().isa, GetParam().precision);
  }
  GemmTester tester() const { return GemmTester().isa(GetParam().isa).precision(GetParam().precision); }
  GemmBlocking blocking_{};
};

TEST_P(Gemm, FullTile) {
  tester().m(blocking_.mr).n(blocking_.nr).k(16).test();
}

TEST_P(Gemm, EveryRowCount) {
  for (size_t m = 1; m <= 2 * blocking_.mr + 1; ++m) tester().m(m).n(blocking_.nr).k(11).seed(m).test();
}

// Sixteen columns or fewer: on AVX-512 two row tiles per call (f32_gemm_28x16_avx512), so
// every row count of a pair, partial pairs, a second k block, panels after the first, and the
// epilogue in each.
TEST_P(Gemm, NarrowColumnsEveryRowCount) {
  for (size_t n : {size_t(1), size_t(7), size_t(16)})
    for (size_t m = 1; m <= 4 * blocking_.mr + 1; ++m)
      tester().m(m).n(n).k(13).bias(true).residual(true).activation(Activation::relu).seed(unsigned(m * 17 + n)).test();
  tester().m(2 * blocking_.mr + 5).n(16).k(blocking_.kc + 3).accumulate(true).residual(true).test();
  tester().m(2 * blocking_.mr).n(11).k(40).panels_before(3).a_pad(5).c_pad(3).test();
}

TEST_P(Gemm, EveryColumnCount) {
  for (size_t n = 1; n <= 2 * blocking_.nr + 1; ++n) tester().m(blocking_.mr).n(n).k(9).seed(n).test();
}

TEST_P(Gemm, RowAndColumnRemainders) {
  for (size_t m = 1; m <= 2 * blocking_.mr + 1; m += 3)
    for (size_t n = 1; n <= 2 * blocking_.nr + 1; n += 5) tester().m(m).n(n).k(7).seed(unsigned(m * 100 + n)).test();
}

TEST_P(Gemm, EveryDepthUpToThreeKBlocks) {
  const size_t kc = blocking_.kc;
  for (size_t k : {size_t(1), size_t(2), size_t(3), size_t(8), size_t(31), kc - 1, kc, kc + 1, 2 * kc + 5, 3 * kc})
    tester().m(blocking_.mr + 3).n(blocking_.nr + 5).k(k).seed(unsigned(k)).test();
}

TEST_P(Gemm, SmallDepthsExhaustive) {
  for (size_t k = 1; k <= 40; ++k) tester().m(blocking_.mr - 1).n(blocking_.nr - 1).k(k).seed(unsigned(k)).test();
}

TEST_P(Gemm, DepthZeroGivesEpilogueOfZero) {
  tester().m(5).n(blocking_.nr + 2).k(0).bias(true).activation(Activation::relu).test();
  tester().m(5).n(7).k(0).accumulate(true).residual(true).test();
}

// Up to 1.5 mc rows are one m block (its packed A the largest the scratch holds), more are
// balanced blocks; prepacked A keeps blocks of exactly mc.
TEST_P(Gemm, RowsBeyondOneMBlock) {
  tester().m(blocking_.mc + 3).n(2 * blocking_.nr + 1).k(blocking_.kc + 7).test();
  tester().m(blocking_.mc + blocking_.mc / 2 - 1).n(blocking_.nr + 1).k(blocking_.kc + 2).test();
  tester().m(blocking_.mc + blocking_.mc / 2 + 1).n(blocking_.nr + 1).k(23).test();
  tester().m(2 * blocking_.mc + blocking_.mr - 1).n(blocking_.nr).k(19).test();
}

TEST_P(Gemm, StridedOperands) {
  tester().m(2 * blocking_.mr + 1).n(blocking_.nr + 3).k(37).a_pad(5).c_pad(7).test();
  tester().m(blocking_.mr).n(3).k(300).a_pad(64).c_pad(1).residual(true).residual_pad(9).test();
}

TEST_P(Gemm, ColumnWindowOfPackedWeights) {
  tester().m(blocking_.mr + 1).n(blocking_.nr + 1).k(13).panels_before(1).bias(true).test();
  tester().m(3).n(5).k(blocking_.kc + 2).panels_before(2).accumulate(true).test();
}

TEST_P(Gemm, TransposedWeights) {
  tester().m(blocking_.mr + 2).n(2 * blocking_.nr - 1).k(blocking_.kc + 9).transposed_b(true).test();
}

// A stored transposed (NCHW activations as the m side of the transposed conv form): every m
// remainder, several k blocks, more than one m block, padded rows, bias and residual.
TEST_P(Gemm, TransposedActivations) {
  for (size_t m = 1; m <= 2 * blocking_.mr + 1; ++m) tester().m(m).n(blocking_.nr + 5).k(29).transposed_a(true).test();
  tester().m(blocking_.mr + 3).n(2 * blocking_.nr + 1).k(2 * blocking_.kc + 5).a_pad(7).bias(true)
      .transposed_a(true).test();
  tester().m(blocking_.mc + blocking_.mr + 1).n(9).k(blocking_.kc + 1).residual(true).transposed_a(true).test();
}

TEST_P(Gemm, Accumulate) {
  tester().m(blocking_.mr).n(blocking_.nr).k(5).accumulate(true).test();
  tester().m(2 * blocking_.mr + 1).n(2 * blocking_.nr + 1).k(2 * blocking_.kc + 1).accumulate(true).c_pad(3).test();
}

TEST_P(Gemm, BiasAndResidual) {
  tester().m(blocking_.mr + 5).n(blocking_.nr + 7).k(21).bias(true).test();
  tester().m(blocking_.mr + 5).n(blocking_.nr + 7).k(21).residual(true).residual_pad(2).test();
  tester().m(7).n(9).k(blocking_.kc + 1).bias(true).residual(true).accumulate(true).test();
}

struct NamedActivation {
  Activation kind;
  float alpha, beta;
};
const NamedActivation kActivations[] = {
    {Activation::identity, 0, 0},       {Activation::relu, 0, 0},         {Activation::clip, 0.0f, 6.0f},
    {Activation::clip, -0.5f, 0.25f},   {Activation::leaky_relu, 0.1f, 0}, {Activation::sigmoid, 0, 0},
    {Activation::hard_sigmoid, 0.2f, 0.5f}, {Activation::hard_swish, 0, 0}, {Activation::gelu_erf, 0, 0},
    {Activation::gelu_tanh, 0, 0},       {Activation::swish, 1.0f, 0},     {Activation::swish, 1.702f, 0},
};

TEST_P(Gemm, EveryActivationWithBiasAndResidual) {
  for (const NamedActivation& act : kActivations)
    for (size_t m : {size_t(1), blocking_.mr, blocking_.mr + 3})
      for (size_t n : {size_t(1), blocking_.nr - 1, blocking_.nr + 5}) {
        SCOPED_TRACE("activation " + std::to_string(int(act.kind)));
        tester().m(m).n(n).k(17).bias(true).residual(true).activation(act.kind, act.alpha, act.beta).range(2.0f).test();
      }
}

TEST_P(Gemm, ActivationsOnlyOnTheLastKBlock) {
  // With several k blocks the activation must see the complete sum, not a partial one.
  for (const NamedActivation& act : kActivations)
    tester().m(blocking_.mr + 1).n(blocking_.nr + 1).k(2 * blocking_.kc + 3).bias(true)
        .activation(act.kind, act.alpha, act.beta).test();
}

TEST_P(Gemm, ActivationTailsAreAccurate) {
  // k = 1 gives C = activation(a * b), one exact float product, over a wide range of inputs, so the
  // vector exp/erf/tanh approximations are checked close to their tolerance in both tails.
  for (const NamedActivation& act : kActivations)
    tester().m(2 * blocking_.mr).n(2 * blocking_.nr).k(1).range(4.0f).tolerance(1e-6)
        .activation(act.kind, act.alpha, act.beta).test();
}

// A decode step's product (GemmCall::few_rows): every row count up to kFewRows, depths that
// leave each remainder of the interleaved chains and span several k blocks, column windows off
// the first panel, transposed operands, every epilogue part. On ISAs without the few-rows
// kernel the flag changes nothing.
TEST_P(Gemm, FewRowsEveryShapeAndEpilogue) {
  for (size_t m = 1; m <= kFewRows; ++m)
    for (size_t k : {size_t(0), size_t(1), size_t(2), size_t(3), size_t(5), size_t(17), blocking_.kc + 3, 2 * blocking_.kc + 1})
      for (size_t n : {size_t(1), size_t(15), blocking_.nr, blocking_.nr + 1, 3 * blocking_.nr - 1}) {
        SCOPED_TRACE("m " + std::to_string(m) + " k " + std::to_string(k) + " n " + std::to_string(n));
        tester().few_rows(true).m(m).n(n).k(k).seed(unsigned(m * 1000 + k + n)).test();
        tester().few_rows(true).m(m).n(n).k(k).panels_before(1).a_pad(3).c_pad(2).bias(true).residual(true)
            .accumulate(true).activation(Activation::gelu_tanh).range(2.0f).test();
      }
  for (const NamedActivation& act : kActivations)
    tester().few_rows(true).m(2).n(blocking_.nr + 5).k(33).bias(true).activation(act.kind, act.alpha, act.beta).test();
  tester().few_rows(true).m(3).n(40).k(77).transposed_a(true).test();
  tester().few_rows(true).m(1).n(40).k(77).transposed_b(true).test();
}

TEST_P(Gemm, RejectsBadCalls) {
  const size_t nr = blocking_.nr;
  std::vector<float> b(4 * 3 * nr, 1.0f), a(4 * 4, 1.0f), c(4 * 3 * nr);
  const PackedB packed = pack_b(b.data(), 4, 3 * nr, 3 * nr, BLayout::k_by_n, GetParam().isa, GetParam().precision);
  GemmScratch scratch;
  GemmCall call;
  call.m = 4;
  call.a = a.data();
  call.a_stride = 4;
  call.c = c.data();
  call.c_stride = 3 * nr;
  call.n = nr;
  call.n0 = 1;  // not on a panel boundary
  EXPECT_THROW(gemm(call, packed, scratch), grove::Error);
  call.n0 = 2 * nr;
  call.n = nr + 1;  // past the end of B
  EXPECT_THROW(gemm(call, packed, scratch), grove::Error);
  call.n0 = 0;
  call.a_stride = 3;  // shorter than k
  EXPECT_THROW(gemm(call, packed, scratch), grove::Error);
  EXPECT_THROW(pack_b(b.data(), 4, 3 * nr, 2, BLayout::k_by_n, GetParam().isa, GetParam().precision), grove::Error);
  call.a_stride = 4;
  call.few_rows = true;
  call.m = kFewRows + 1;  // more rows than a few-rows product has
  EXPECT_THROW(gemm(call, packed, scratch), grove::Error);
}

std::string kernel_test_name(const ::testing::TestParamInfo<GemmKernel>& info) {
  const Precision p = info.param.precision;
  return std::string(isa_name(info.param.isa)) +
         (p == Precision::bf16 ? "_bf16" : p == Precision::bf16_amx ? "_bf16_amx" : p == Precision::int8_weights ? "_int8w" : "");
}

INSTANTIATE_TEST_SUITE_P(Kernels, Gemm,
                         ::testing::Values(GemmKernel{Isa::scalar, Precision::f32}, GemmKernel{Isa::avx2, Precision::f32},
                                           GemmKernel{Isa::avx512, Precision::f32},
                                           GemmKernel{Isa::avx512, Precision::bf16},
                                           GemmKernel{Isa::avx512, Precision::bf16_amx},
                                           GemmKernel{Isa::scalar, Precision::int8_weights},
                                           GemmKernel{Isa::avx2, Precision::int8_weights},
                                           GemmKernel{Isa::avx512, Precision::int8_weights}),
                         kernel_test_name);

// int8 weights of a column holding NaN or infinity: that column's outputs are NaN (as fp32's
// would be), the other columns' are numbers, on the few-rows kernel and on the unpacked path.
TEST(GemmInt8Weights, ANonFiniteWeightMakesItsColumnNaN) {
  const size_t k = 8, n = 40;
  std::vector<float> b(k * n, 0.25f), a(5 * k, 1.0f), c(5 * n, 0.0f);
  b[3 * n + 2] = std::numeric_limits<float>::quiet_NaN();
  b[5 * n + 33] = std::numeric_limits<float>::infinity();
  for (Isa isa : {Isa::scalar, active_isa()}) {
    const PackedB packed = pack_b(b.data(), k, n, n, BLayout::k_by_n, isa, Precision::int8_weights);
    for (size_t m : {size_t(1), size_t(5)}) {
      GemmCall call;
      call.m = m;
      call.a = a.data();
      call.a_stride = k;
      call.n = n;
      call.c = c.data();
      call.c_stride = n;
      call.few_rows = m <= kFewRows;
      GemmScratch scratch;
      gemm(call, packed, scratch);
      for (size_t i = 0; i < m; ++i)
        for (size_t j = 0; j < n; ++j) {
          if (j == 2 || j == 33) EXPECT_TRUE(std::isnan(c[i * n + j])) << isa_name(isa) << " m " << m << " col " << j;
          else EXPECT_FLOAT_EQ(c[i * n + j], 2.0f) << isa_name(isa) << " m " << m << " col " << j;
        }
    }
  }
}

// Generated: GemmCall::k_steps adds up only the listed columns of A (the others NaN, so any
// use of one shows), against a double reference; k past one k block (the steps counted from
// each block's first), none listed, every one listed, few rows, narrow and wide outputs. Where
// gemm_takes_k_steps is false the call is refused.
TEST(GemmKSteps, OnlyTheListedStepsAddUp) {
  std::mt19937 rng(57);
  for (Isa isa : {Isa::scalar, Isa::avx2, Isa::avx512}) {
    if (!isa_supported(isa)) continue;
    const size_t kc = gemm_blocking(isa).kc;
    for (int i = 0; i < 40; ++i) {
      const size_t m = 1 + rng() % 40, n = 1 + rng() % 70;
      const size_t k = i == 0 ? 2 * kc + 37 : i == 1 ? kc + 1 : 1 + rng() % 300;
      std::vector<uint32_t> steps;
      const unsigned share = i == 2 ? 0 : i == 3 ? 100 : rng() % 100;
      for (uint32_t p = 0; p < k; ++p)
        if (rng() % 100 < share) steps.push_back(p);
      std::uniform_real_distribution<float> dist(-1.0f, 1.0f);
      std::vector<float> a(m * k), b(k * n), bias(n), c(m * n, -7.0f);
      for (float& v : b) v = dist(rng);
      for (float& v : bias) v = dist(rng);
      std::vector<bool> listed(k, false);
      for (uint32_t p : steps) listed[p] = true;
      for (size_t r = 0; r < m; ++r)
        for (size_t p = 0; p < k; ++p) a[r * k + p] = listed[p] ? dist(rng) : std::numeric_limits<float>::quiet_NaN();
      const PackedB packed = pack_b(b.data(), k, n, n, BLayout::k_by_n, isa);
      GemmCall call;
      call.m = m, call.a = a.data(), call.a_stride = k, call.n = n, call.c = c.data(), call.c_stride = n;
      call.epilogue.bias = bias.data();
      call.few_rows = m <= kFewRows && i % 2;
      static const uint32_t none = 0;  // an empty list is a pointer all the same: null means every step
      call.k_steps = steps.empty() ? &none : steps.data(), call.k_step_count = steps.size();
      GemmScratch scratch;
      if (!gemm_takes_k_steps(isa)) {
        EXPECT_THROW(gemm(call, packed, scratch), grove::Error) << isa_name(isa);
        continue;
      }
      gemm(call, packed, scratch);
      for (size_t r = 0; r < m; ++r)
        for (size_t j = 0; j < n; ++j) {
          double want = bias[j], magnitude = std::abs(bias[j]);
          for (uint32_t p : steps) {
            want += double(a[r * k + p]) * b[p * n + j];
            magnitude += std::abs(double(a[r * k + p]) * b[p * n + j]);
          }
          ASSERT_NEAR(c[r * n + j], want, 1e-5 * (magnitude + 1))
              << isa_name(isa) << " m " << m << " n " << n << " k " << k << " steps " << steps.size() << " at " << r
              << ", " << j;
        }
    }
  }
  // Steps out of order or past k are refused.
  const PackedB packed = pack_b(std::vector<float>(8 * 16, 1.0f).data(), 8, 16, 16, BLayout::k_by_n, active_isa());
  std::vector<float> a(8, 1.0f), c(16);
  for (std::vector<uint32_t> bad : {std::vector<uint32_t>{3, 2}, std::vector<uint32_t>{8}}) {
    GemmCall call;
    call.m = 1, call.a = a.data(), call.a_stride = 8, call.n = 16, call.c = c.data(), call.c_stride = 16;
    call.k_steps = bad.data(), call.k_step_count = bad.size();
    GemmScratch scratch;
    EXPECT_THROW(gemm(call, packed, scratch), grove::Error);
  }
}

TEST(Isa, ActiveIsSupportedAndParses) {
  EXPECT_TRUE(isa_supported(active_isa()));
  EXPECT_TRUE(isa_supported(Isa::scalar));
  Isa parsed;
  EXPECT_TRUE(parse_isa("avx2", parsed));
  EXPECT_EQ(parsed, Isa::avx2);
  EXPECT_FALSE(parse_isa("sse9", parsed));
  // GROVE_ISA may lower the choice (ctest runs can set it), never raise it past the CPU.
  if (const char* forced = std::getenv("GROVE_ISA"); forced && parse_isa(forced, parsed) && isa_supported(parsed)) {
    EXPECT_EQ(active_isa(), parsed);
  }
}

}  // namespace
}  // namespace grove::kernels::testing
