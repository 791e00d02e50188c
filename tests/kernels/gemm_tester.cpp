#include "gemm_tester.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <random>
#include <vector>

#include "kernels/bf16.h"

namespace grove::kernels::testing {

double reference_activation(double x, const ActivationParams& p) {
  switch (p.kind) {
    case Activation::identity: return x;
    case Activation::relu: return std::max(x, 0.0);
    case Activation::clip: return std::min(std::max(x, double(p.alpha)), double(p.beta));
    case Activation::leaky_relu: return x >= 0.0 ? x : p.alpha * x;
    case Activation::sigmoid: return 1.0 / (1.0 + std::exp(-x));
    case Activation::hard_sigmoid: return std::clamp(p.alpha * x + p.beta, 0.0, 1.0);
    case Activation::hard_swish: return x * std::clamp(x / 6.0 + 0.5, 0.0, 1.0);
    case Activation::gelu_erf: return 0.5 * x * (1.0 + std::erf(x / std::sqrt(2.0)));
    case Activation::gelu_tanh:
      return 0.5 * x * (1.0 + std::tanh(std::sqrt(2.0 / M_PI) * (x + 0.044715 * x * x * x)));
    case Activation::swish: return x / (1.0 + std::exp(-double(p.alpha) * x));
  }
  return x;
}

void GemmTester::test() const {
  if (!precision_supported(precision_, isa_)) GTEST_SKIP() << "CPU lacks " << isa_name(isa_) << " for this precision";
  std::mt19937 rng(seed_);
  std::uniform_real_distribution<float> dist(-range_, range_);
  auto random_vector = [&](size_t count) {
    std::vector<float> v(count);
    for (float& x : v) x = dist(rng);
    return v;
  };

  const size_t a_stride = k_ + a_pad_, c_stride = n_ + c_pad_, r_stride = n_ + residual_pad_;
  // B has extra columns in front (panels_before) and one partial panel's worth after, so the
  // call must pick exactly its own columns out of the packed weights.
  const size_t nr = gemm_blocking(isa_, precision_).nr;
  const size_t n0 = panels_before_ * nr;
  const size_t b_cols = n0 + n_ + 3;
  const std::vector<float> a = random_vector(std::max<size_t>(m_ * a_stride, 1));
  const std::vector<float> b = random_vector(std::max<size_t>(k_ * b_cols, 1));  // k x b_cols
  // Transposed A: k rows of m floats (+ a_pad), holding the same values as `a`.
  const size_t a_t_stride = m_ + a_pad_;
  std::vector<float> a_t(std::max<size_t>(k_ * a_t_stride, 1), 0.0f);
  for (size_t i = 0; i < m_; ++i)
    for (size_t p = 0; p < k_; ++p) a_t[p * a_t_stride + i] = a[i * a_stride + p];
  std::vector<float> b_stored = b;
  if (transposed_b_)
    for (size_t p = 0; p < k_; ++p)
      for (size_t j = 0; j < b_cols; ++j) b_stored[j * k_ + p] = b[p * b_cols + j];
  const std::vector<float> bias = random_vector(n_);
  const std::vector<float> residual = random_vector(std::max<size_t>(m_ * r_stride, 1));
  const std::vector<float> c_initial = random_vector(m_ * c_stride);

  const PackedB packed = transposed_b_ ? pack_b(b_stored.data(), k_, b_cols, k_, BLayout::n_by_k, isa_, precision_)
                                       : pack_b(b_stored.data(), k_, b_cols, b_cols, BLayout::k_by_n, isa_, precision_);
  ASSERT_EQ(packed.nr, nr);
  ASSERT_EQ(packed.precision, precision_);
  ASSERT_GE(packed.bytes(), packed.steps() * b_cols * sizeof(float));
  // What the kernel multiplies: the operands as packed. int8 weights: per column of B, the
  // value its int8 code stands for (scale = largest magnitude / 127, code = round(w / scale)).
  auto operand = [&](float x) { return is_bf16(precision_) ? double(bf16_value(bf16_bits(x))) : double(x); };
  std::vector<float> column_scale(b_cols, 0.0f);
  for (size_t j = 0; j < b_cols; ++j)
    for (size_t p = 0; p < k_; ++p) column_scale[j] = std::max(column_scale[j], std::abs(b[p * b_cols + j]) / 127.0f);
  auto weight = [&](size_t p, size_t j) {
    const float w = b[p * b_cols + j];
    if (precision_ != Precision::int8_weights) return operand(w);
    const float scale = column_scale[j];
    return scale > 0 ? double(std::clamp(std::nearbyint(w / scale), -127.0f, 127.0f)) * double(scale) : 0.0;
  };

  std::vector<float> c = c_initial;
  GemmCall call;
  call.m = m_;
  call.a = transposed_a_ ? a_t.data() : a.data();
  call.a_stride = transposed_a_ ? a_t_stride : a_stride;
  call.a_transposed = transposed_a_;
  call.n0 = n0;
  call.n = n_;
  call.c = c.data();
  call.c_stride = c_stride;
  call.accumulate = accumulate_;
  call.few_rows = few_rows_;
  call.epilogue.bias = bias_ ? bias.data() : nullptr;
  call.epilogue.residual = residual_ ? residual.data() : nullptr;
  call.epilogue.residual_stride = r_stride;
  call.epilogue.activation = activation_;
  GemmScratch scratch;
  gemm(call, packed, scratch);
  if (transposed_a_) {  // the same sums in the same order as with A row-major: the same bits
    std::vector<float> c_rows = c_initial;
    GemmCall rows_call = call;
    rows_call.a = a.data();
    rows_call.a_stride = a_stride;
    rows_call.a_transposed = false;
    rows_call.c = c_rows.data();
    gemm(rows_call, packed, scratch);
    ASSERT_EQ(c, c_rows) << "transposed A changed the bits";
  }

  size_t failures = 0;
  for (size_t i = 0; i < m_; ++i) {
    for (size_t j = 0; j < c_stride; ++j) {
      const float got = c[i * c_stride + j];
      if (j >= n_) {  // padding between rows must be left alone
        ASSERT_EQ(got, c_initial[i * c_stride + j]) << "wrote padding at row " << i << " col " << j;
        continue;
      }
      double sum = 0.0, magnitude = 0.0;
      for (size_t p = 0; p < k_; ++p) {
        const double term = operand(a[i * a_stride + p]) * weight(p, n0 + j);
        sum += term;
        magnitude += std::abs(term);
      }
      auto add = [&](double v) { sum += v; magnitude += std::abs(v); };
      if (accumulate_) add(c_initial[i * c_stride + j]);
      if (bias_) add(bias[j]);
      if (residual_) add(residual[i * r_stride + j]);
      const double expected = reference_activation(sum, activation_);
      // Float accumulation error grows with the sum of |terms|; activations have slope <= ~1.2.
      const double tolerance = tolerance_ > 0.0 ? tolerance_ * std::max(1.0, std::abs(expected))
                                                : 2e-6 * (magnitude + 1.0) + 1e-5 * std::abs(expected);
      if (std::abs(got - expected) > tolerance && ++failures <= 5)
        ADD_FAILURE() << isa_name(isa_) << (precision_ == Precision::bf16 ? " bf16" : precision_ == Precision::bf16_amx ? " bf16_amx" : precision_ == Precision::int8_weights ? " int8w" : "") << " m=" << m_ << " n=" << n_ << " k=" << k_ << " at (" << i << ", "
                      << j << "): got " << got << ", expected " << expected;
    }
  }
  EXPECT_EQ(failures, 0u) << "mismatching elements";
}

}  // namespace grove::kernels::testing
