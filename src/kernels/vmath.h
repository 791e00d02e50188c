#pragma once
// Vectorised row and elementwise kernels of transformer models: broadcasting arithmetic,
// erf / GELU (erf form) / tanh / sigmoid, softmax of a row with max-subtraction, LayerNorm
// of a row. One source (vmath_impl.h) is compiled per ISA with GCC vector types of the ISA's
// width (16 floats avx512, 8 avx2, 4 for the portable build) and dispatched on an Isa, like
// the GEMM microkernels.
//
// Accuracy (checked by tests/kernels/test_vmath.cpp against double-precision math):
// exp to ~2 ulp, erf and GELU within 1e-6 absolute, tanh and sigmoid within 1e-6 absolute,
// softmax and LayerNorm within 1e-5 relative of the double oracle (sums in float vectors).
// Every kernel handles any n (a partial last vector) and computes element i the same way
// whatever n, so a row cut into tiles gives the same bits.
#include <cstddef>

#include "kernels/isa.h"

namespace grove::kernels {

enum class BinaryOp { add, sub, mul, div };

// How the two operands of a binary op advance: both per element, or one held (a scalar
// broadcast along the run, e.g. a bias value or a per-row statistic).
enum class BinaryForm { vector_vector, vector_scalar, scalar_vector };

enum class UnaryOp { erf, gelu_erf, tanh, sigmoid };

struct VMathKernels {
  // y[i] = a[i] op b[i] (or a[i] op b[0], a[0] op b[i] by form), i < n.
  void (*binary)(BinaryOp op, BinaryForm form, size_t n, const float* a, const float* b, float* y);
  // y[i] = f(x[i]); y may equal x.
  void (*unary)(UnaryOp op, size_t n, const float* x, float* y);
  // y = softmax(x) over n elements (exp(x - max) / sum); y may equal x.
  void (*softmax)(size_t n, const float* x, float* y);
  // The same where x[live, n) all hold `tail` (a masked run's fill): the same bits, without
  // the tail's exps when they are exactly 0 (far below the live elements' max).
  void (*softmax_tail)(size_t n, size_t live, float tail, const float* x, float* y);
  // y = (x - mean) / sqrt(var + epsilon) * scale + bias (bias may be null); y may equal x.
  void (*layernorm)(size_t n, const float* x, const float* scale, const float* bias, float epsilon, float* y);
  // y[i] = fill where keep[i] is false (a byte of 0), unchanged elsewhere: attention's
  // Where(keep, scores, fill) on a row (a causal mask).
  void (*fill_unkept)(size_t n, const bool* keep, float fill, float* y);
  const char* name;  // "f32_vmath_avx512", ...
};

// Throws grove::Error when `isa` is not supported on this CPU.
const VMathKernels& vmath(Isa isa = active_isa());

// The per-ISA tables (vmath_scalar.cpp, vmath_avx2.cpp, vmath_avx512.cpp).
extern const VMathKernels f32_vmath_scalar;
extern const VMathKernels f32_vmath_avx2;
extern const VMathKernels f32_vmath_avx512;

}  // namespace grove::kernels
