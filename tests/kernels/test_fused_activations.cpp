// An activation fused into a GEMM's epilogue (MatMul, Gemm or Conv with a Sigmoid, Gelu or
// SiLU after it, graph/node_decisions.h) gives the same bits as the op it replaced, run by
// vmath on the GEMM's result: both call kernels/vector_math.h, built for the same ISA. With
// k = 1 and B all ones the GEMM's sum is x itself, so its C is the activation of x alone.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <limits>
#include <random>
#include <vector>

#include "kernels/epilogue.h"
#include "kernels/gemm.h"
#include "kernels/vmath.h"
#include "supported_isas.h"

namespace grove::kernels::testing {
namespace {

// Values across every branch of the approximations: both tails of exp (its cut-off and
// saturation), tanh's small-|x| series and erf's sign change (no -0: a GEMM's sum of -0 is +0).
std::vector<float> inputs() {
  std::vector<float> x = {0.0f, 1e-30f, -1e-30f, 1e-4f, -1e-4f, 0.1f, -0.1f, 0.125f, -0.125f, 1.0f, -1.0f,
                          5.0f, -5.0f, 20.0f, -20.0f, 44.0f, -44.0f, 87.0f, -87.0f, 88.5f, -88.5f, 100.0f, -100.0f,
                          1e6f, -1e6f};
  std::mt19937 rng(7);
  std::uniform_real_distribution<float> wide(-30.0f, 30.0f), narrow(-3.0f, 3.0f);
  for (int i = 0; i < 500; ++i) x.push_back(i % 2 ? wide(rng) : narrow(rng));
  return x;
}

// C = activation(x * 1) for every x, from the GEMM kernel of `isa`: one row per value.
std::vector<float> fused(Isa isa, const std::vector<float>& x, const ActivationParams& act) {
  const size_t n = 1;
  const std::vector<float> ones(n, 1.0f);
  const PackedB packed = pack_b(ones.data(), 1, n, n, BLayout::k_by_n, isa, Precision::f32);
  std::vector<float> c(x.size() * n);
  GemmCall call;
  call.m = x.size();
  call.a = x.data();
  call.a_stride = 1;
  call.n = n;
  call.c = c.data();
  call.c_stride = n;
  call.epilogue.activation = act;
  GemmScratch scratch;
  gemm(call, packed, scratch);
  return c;
}

std::vector<float> unfused(Isa isa, UnaryOp op, const std::vector<float>& x) {
  std::vector<float> y(x.size());
  vmath(isa).unary(op, x.size(), x.data(), y.data());
  return y;
}

void expect_same_bits(const std::vector<float>& got, const std::vector<float>& want, const std::vector<float>& x) {
  ASSERT_EQ(got.size(), want.size());
  int shown = 0;
  for (size_t i = 0; i < got.size(); ++i)
    if (std::memcmp(&got[i], &want[i], sizeof(float)) != 0 && shown++ < 5)
      ADD_FAILURE() << "x = " << x[i] << ": fused " << got[i] << ", unfused " << want[i];
}

class FusedActivation : public ::testing::TestWithParam<Isa> {};

TEST_P(FusedActivation, SigmoidEqualsTheSigmoidOp) {
  const std::vector<float> x = inputs();
  expect_same_bits(fused(GetParam(), x, {Activation::sigmoid}), unfused(GetParam(), UnaryOp::sigmoid, x), x);
}

TEST_P(FusedActivation, GeluEqualsTheGeluOp) {
  const std::vector<float> x = inputs();
  expect_same_bits(fused(GetParam(), x, {Activation::gelu_erf}), unfused(GetParam(), UnaryOp::gelu_erf, x), x);
}

// SiLU unfused is Sigmoid then Mul by x.
TEST_P(FusedActivation, SiluEqualsSigmoidTimesX) {
  const std::vector<float> x = inputs();
  std::vector<float> want = unfused(GetParam(), UnaryOp::sigmoid, x);
  for (size_t i = 0; i < x.size(); ++i) want[i] *= x[i];
  expect_same_bits(fused(GetParam(), x, {Activation::swish, 1.0f, 0.0f}), want, x);
}

// NaN and +-Inf through the GEMM epilogue's clamping activations, at 1 column (the tail
// lanes) and 48 (whole vectors): NaN stays NaN, as ONNX Runtime's Relu, Clip, HardSigmoid and
// HardSwish give it; an epilogue with vmaxps/vminps operands the wrong way round gives the
// bound instead.
TEST_P(FusedActivation, NanAndInfPropagateThroughClampingActivations) {
  const float nan = std::numeric_limits<float>::quiet_NaN(), inf = std::numeric_limits<float>::infinity();
  const std::vector<float> x = {nan, inf, -inf, -2.0f, 0.5f, 7.0f, nan, 1.0f, -inf, nan, 3.0f, inf, -1.0f, nan, 0.0f, 2.0f, nan};
  struct Case {
    ActivationParams act;
    float (*want)(float);
  };
  const Case cases[] = {
      {{Activation::relu}, [](float v) { return v < 0 ? 0.0f : v; }},
      {{Activation::clip, -1.0f, 6.0f}, [](float v) { return v < -1 ? -1.0f : v > 6 ? 6.0f : v; }},
      {{Activation::hard_sigmoid, 0.2f, 0.5f}, [](float v) {
         const float t = 0.2f * v + 0.5f;
         return t < 0 ? 0.0f : t > 1 ? 1.0f : t;
       }},
      {{Activation::hard_swish}, [](float v) {
         const float t = v / 6.0f + 0.5f;
         return v * (t < 0 ? 0.0f : t > 1 ? 1.0f : t);
       }},
      {{Activation::leaky_relu, 0.5f}, [](float v) { return v >= 0 ? v : 0.5f * v; }},
  };
  for (size_t n : {1, 48}) {
    const std::vector<float> ones(n, 1.0f);
    const PackedB packed = pack_b(ones.data(), 1, n, n, BLayout::k_by_n, GetParam(), Precision::f32);
    for (const Case& c : cases) {
      std::vector<float> y(x.size() * n);
      GemmCall call;
      call.m = x.size(), call.a = x.data(), call.a_stride = 1, call.n = n, call.c = y.data(), call.c_stride = n;
      call.epilogue.activation = c.act;
      GemmScratch scratch;
      gemm(call, packed, scratch);
      for (size_t i = 0; i < x.size(); ++i)
        for (size_t j = 0; j < n; ++j) {
          const float got = y[i * n + j];
          if (std::isnan(x[i])) {
            ASSERT_TRUE(std::isnan(got)) << "activation " << int(c.act.kind) << " n " << n << ": NaN gave " << got;
          } else if (!std::isinf(x[i]) || c.act.kind != Activation::hard_swish) {  // -Inf * 0 is NaN there
            // Within an ulp or two: the kernels fold alpha * x + beta into one FMA.
            const float want = c.want(x[i]);
            if (std::isinf(want)) ASSERT_EQ(got, want) << "activation " << int(c.act.kind) << " n " << n;
            else ASSERT_NEAR(got, want, 1e-6f) << "activation " << int(c.act.kind) << " n " << n << " x " << x[i];
          }
        }
    }
  }
}

INSTANTIATE_TEST_SUITE_P(Isas, FusedActivation, ::testing::ValuesIn(supported_isas()),
                         [](const ::testing::TestParamInfo<Isa>& info) { return std::string(isa_name(info.param)); });

}  // namespace
}  // namespace grove::kernels::testing
