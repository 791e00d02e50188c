#pragma once
// XNNPACK-style tester for the tile GEMM: set up one case with the builder methods, then
// test() packs B for the chosen ISA and precision, runs grove::kernels::gemm, and compares every element
// of C (and the untouched padding around it) against a double-precision oracle.
#include <cstddef>

#include "kernels/epilogue.h"
#include "kernels/gemm.h"
#include "kernels/isa.h"

namespace grove::kernels::testing {

class GemmTester {
 public:
  GemmTester& isa(Isa v) { isa_ = v; return *this; }
  // bf16: A and B are rounded to bfloat16 by the packing; the oracle uses the rounded values,
  // so the bound is still that of float accumulation.
  GemmTester& precision(Precision v) { precision_ = v; return *this; }
  GemmTester& m(size_t v) { m_ = v; return *this; }
  GemmTester& n(size_t v) { n_ = v; return *this; }
  GemmTester& k(size_t v) { k_ = v; return *this; }
  // Extra elements at the end of each row of A / C / residual: the tile lives in a larger tensor.
  GemmTester& a_pad(size_t v) { a_pad_ = v; return *this; }
  GemmTester& c_pad(size_t v) { c_pad_ = v; return *this; }
  GemmTester& residual_pad(size_t v) { residual_pad_ = v; return *this; }
  // Packed B gets `panels_before` extra panels in front; the call starts at that column.
  GemmTester& panels_before(size_t v) { panels_before_ = v; return *this; }
  GemmTester& transposed_b(bool v) { transposed_b_ = v; return *this; }
  // A stored as k rows of m (+ a_pad) floats, passed with GemmCall::a_transposed.
  GemmTester& transposed_a(bool v) { transposed_a_ = v; return *this; }
  GemmTester& accumulate(bool v) { accumulate_ = v; return *this; }
  // GemmCall::few_rows (m <= kFewRows): the whole product's k in one pass of interleaved chains.
  GemmTester& few_rows(bool v) { few_rows_ = v; return *this; }
  GemmTester& bias(bool v) { bias_ = v; return *this; }
  GemmTester& residual(bool v) { residual_ = v; return *this; }
  GemmTester& activation(Activation kind, float alpha = 0.0f, float beta = 0.0f) {
    activation_ = {kind, alpha, beta};
    return *this;
  }
  // Inputs are uniform in [-range, range]; a wide range drives activations into their tails.
  GemmTester& range(float v) { range_ = v; return *this; }
  GemmTester& seed(unsigned v) { seed_ = v; return *this; }
  // Replaces the default error bound (which grows with k and the operands) by
  // v * max(1, |expected|): for exact-input cases that check the activation math itself.
  GemmTester& tolerance(double v) { tolerance_ = v; return *this; }

  // Runs the case with gtest assertions; call from inside a TEST.
  void test() const;

 private:
  Isa isa_ = Isa::scalar;
  Precision precision_ = Precision::f32;
  size_t m_ = 1, n_ = 1, k_ = 1;
  size_t a_pad_ = 0, c_pad_ = 0, residual_pad_ = 0, panels_before_ = 0;
  bool transposed_a_ = false, transposed_b_ = false, accumulate_ = false, bias_ = false, residual_ = false;
  bool few_rows_ = false;
  ActivationParams activation_;
  float range_ = 1.0f;
  unsigned seed_ = 1;
  double tolerance_ = 0.0;
};

// The double-precision definition of each activation (the oracle).
double reference_activation(double x, const ActivationParams& params);

}  // namespace grove::kernels::testing
