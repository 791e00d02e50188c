// bfloat16 activations on the AMX GEMM (kernels/gemm.h: a_bf16, c_bf16, residual_bf16) and on
// the AVX512-BF16 one (a_bf16, c_bf16): the
// same call on float operands that hold the same bf16 values gives the float C, and the bf16
// path must give exactly that C rounded once. Both sum the same products in the same k blocks,
// so any difference is a packing, epilogue or blocking bug, not rounding.
#include <gtest/gtest.h>

#include <random>
#include <vector>

#include "graph/error.h"
#include "kernels/bf16.h"
#include "kernels/gemm.h"

namespace grove::kernels::testing {
namespace {

struct Case {
  size_t m, n, k, a_stride, c_stride;
  bool bias, residual;
  Activation activation;
};

std::vector<uint16_t> random_bf16(size_t count, std::mt19937& rng) {
  std::uniform_real_distribution<float> dist(-1.0f, 1.0f);
  std::vector<uint16_t> v(count);
  for (auto& x : v) x = bf16_bits(dist(rng));
  return v;
}

std::vector<float> widened(const std::vector<uint16_t>& bits) {
  std::vector<float> v(bits.size());
  for (size_t i = 0; i < bits.size(); ++i) v[i] = bf16_value(bits[i]);
  return v;
}

// Runs one case both ways; `a_float` / `c_float` / `residual_float` say which operands of the
// bf16 call stay float, so every mix the conv tile rule makes is covered.
void check(const Case& c, bool a_float, bool c_float, bool residual_float, uint32_t seed,
           Precision precision = Precision::bf16_amx) {
  SCOPED_TRACE("m " + std::to_string(c.m) + " n " + std::to_string(c.n) + " k " + std::to_string(c.k) + " a " +
               (a_float ? "f32" : "bf16") + " c " + (c_float ? "f32" : "bf16") + " r " + (residual_float ? "f32" : "bf16"));
  std::mt19937 rng(seed);
  const std::vector<uint16_t> a_bits = random_bf16(c.m * c.a_stride, rng);
  const std::vector<float> a = widened(a_bits);
  const std::vector<float> w = widened(random_bf16(c.k * c.n, rng));
  const std::vector<float> bias = widened(random_bf16(c.n, rng));
  const std::vector<uint16_t> r_bits = random_bf16(c.m * c.c_stride, rng);
  const std::vector<float> r = widened(r_bits);
  const PackedB b = pack_b(w.data(), c.k, c.n, c.n, BLayout::k_by_n, Isa::avx512, precision);

  GemmCall want_call;
  want_call.m = c.m, want_call.a = a.data(), want_call.a_stride = c.a_stride, want_call.n = c.n;
  std::vector<float> want(c.m * c.c_stride, -7.0f);
  want_call.c = want.data(), want_call.c_stride = c.c_stride;
  want_call.epilogue.bias = c.bias ? bias.data() : nullptr;
  want_call.epilogue.residual = c.residual ? r.data() : nullptr;
  want_call.epilogue.residual_stride = c.c_stride;
  want_call.epilogue.activation = {c.activation, 0.1f, 0.0f};
  GemmScratch scratch;
  gemm(want_call, b, scratch);

  GemmCall call = want_call;
  if (!a_float) call.a = nullptr, call.a_bf16 = a_bits.data();
  std::vector<float> got_float(c.m * c.c_stride, -7.0f);
  std::vector<uint16_t> got_bits(c.m * c.c_stride, 0xDEAD);
  if (c_float) call.c = got_float.data();
  else call.c = nullptr, call.c_bf16 = got_bits.data();
  if (c.residual && !residual_float) call.epilogue.residual = nullptr, call.epilogue.residual_bf16 = r_bits.data();
  GemmScratch fresh;
  gemm(call, b, fresh);

  int failures = 0;
  for (size_t i = 0; i < c.m && failures < 5; ++i)
    for (size_t j = 0; j < c.c_stride && failures < 5; ++j) {
      const size_t at = i * c.c_stride + j;
      if (c_float) {
        if (got_float[at] != want[at]) ++failures, ADD_FAILURE() << "C[" << i << "][" << j << "] " << got_float[at] << " want " << want[at];
      } else if (j < c.n) {
        if (got_bits[at] != bf16_bits(want[at]))
          ++failures, ADD_FAILURE() << "C[" << i << "][" << j << "] " << bf16_value(got_bits[at]) << " want " << want[at];
      } else if (got_bits[at] != 0xDEAD) {
        ++failures, ADD_FAILURE() << "wrote past the row: C[" << i << "][" << j << "]";
      }
    }
}

TEST(GemmBf16Storage, MatchesTheFloatCallRoundedOnce) {
  if (!precision_supported(Precision::bf16_amx, Isa::avx512)) GTEST_SKIP() << "no AMX";
  const size_t kc = gemm_blocking(Isa::avx512, Precision::bf16_amx).kc;
  const std::vector<Case> cases = {
      {32, 32, 64, 64, 32, true, true, Activation::relu},         // one whole tile, k two steps
      {49, 40, 96, 100, 45, true, true, Activation::relu},        // row and column tails, strides
      {7, 17, 33, 33, 17, false, true, Activation::identity},     // k not a whole step
      {300, 64, 576, 576, 64, true, false, Activation::relu},     // more rows than one m block
      {70, 96, 2 * kc + 40, 2 * kc + 40, 96, true, true, Activation::relu},  // three k blocks
      {33, 48, kc + 1, kc + 7, 50, true, true, Activation::leaky_relu},      // two k blocks, tails
  };
  uint32_t seed = 1;
  for (const Case& c : cases)
    for (int mix = 0; mix < 8; ++mix) check(c, mix & 1, mix & 2, mix & 4, seed++);
}

// The dot-product kernel reads bf16 A in place (whole pairs: even k and stride) and writes a
// bf16 C; its residual stays float.
TEST(GemmBf16Storage, DotProductsMatchTheFloatCallRoundedOnce) {
  if (!precision_supported(Precision::bf16, Isa::avx512)) GTEST_SKIP() << "no AVX512-BF16";
  const size_t kc = gemm_blocking(Isa::avx512, Precision::bf16).kc;
  const std::vector<Case> cases = {
      {14, 32, 64, 64, 32, true, true, Activation::relu},         // one whole tile
      {49, 40, 96, 100, 45, true, true, Activation::relu},        // row and column tails, strides
      {7, 17, 33, 33, 17, false, true, Activation::identity},     // odd k: A stays float
      {300, 64, 576, 576, 64, true, false, Activation::relu},     // more rows than one m block
      {70, 96, 2 * kc + 40, 2 * kc + 40, 96, true, true, Activation::relu},  // three k blocks
      {33, 48, kc + 2, kc + 8, 50, true, true, Activation::leaky_relu},      // two k blocks, tails
  };
  uint32_t seed = 100;
  for (const Case& c : cases)
    for (int mix = 0; mix < 4; ++mix) {
      const bool a_float = (mix & 1) || c.k % 2 != 0 || c.a_stride % 2 != 0;
      check(c, a_float, mix & 2, true, seed++, Precision::bf16);
    }
}

TEST(GemmBf16Storage, RefusesOtherKernelsAndMixedCalls) {
  const std::vector<float> w(64 * 32, 0.5f);
  std::vector<uint16_t> a(64 * 32), c(64 * 32);
  std::vector<float> cf(64 * 32);
  GemmScratch scratch;
  GemmCall call;
  call.m = 32, call.a_bf16 = a.data(), call.a_stride = 64, call.n = 32, call.c_bf16 = c.data(), call.c_stride = 32;
  const PackedB f32 = pack_b(w.data(), 64, 32, 32, BLayout::k_by_n, Isa::scalar, Precision::f32);
  EXPECT_THROW(gemm(call, f32, scratch), Error);
  if (precision_supported(Precision::bf16, Isa::avx512)) {
    const PackedB dot = pack_b(w.data(), 64, 32, 32, BLayout::k_by_n, Isa::avx512, Precision::bf16);
    std::vector<uint16_t> r(64 * 32);
    GemmCall residual = call;
    residual.epilogue.residual_bf16 = r.data(), residual.epilogue.residual_stride = 32;
    EXPECT_THROW(gemm(residual, dot, scratch), Error);  // the dot kernel's residual is float
    GemmCall odd = call;
    odd.a_stride = 65;
    EXPECT_THROW(gemm(odd, dot, scratch), Error);  // rows must be whole pairs apart
    EXPECT_NO_THROW(gemm(call, dot, scratch));
  }
  if (!precision_supported(Precision::bf16_amx, Isa::avx512)) return;
  const PackedB amx = pack_b(w.data(), 64, 32, 32, BLayout::k_by_n, Isa::avx512, Precision::bf16_amx);
  GemmCall both = call;
  both.c = cf.data();
  EXPECT_THROW(gemm(both, amx, scratch), Error);
  GemmCall accumulate = call;
  accumulate.accumulate = true;
  EXPECT_THROW(gemm(accumulate, amx, scratch), Error);
  EXPECT_NO_THROW(gemm(call, amx, scratch));
}

}  // namespace
}  // namespace grove::kernels::testing
