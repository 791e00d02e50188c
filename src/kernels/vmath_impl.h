#pragma once
// The vmath kernels (vmath.h), written once over GCC vector types of GROVE_VMATH_WIDTH
// floats and included by vmath_scalar.cpp, vmath_avx2.cpp and vmath_avx512.cpp, each built
// with its own ISA flags (kernels.cmake). Internal linkage (anonymous namespace) so the
// linker never merges copies built for different ISAs.
//
// A partial last vector is loaded into a vector filled with a neutral value (-inf for a
// max, 0 for a sum) and stored back element by element, so no read or write leaves the
// row. Element i's value never depends on the other lanes or on n, except through the row
// reductions (max, sums) of softmax and LayerNorm, which are fixed for a given row.
#include <algorithm>
#include <cstdint>
#include <cstring>
#include <limits>

#include "kernels/vector_math.h"
#include "kernels/vmath.h"

namespace grove::kernels {
namespace {

constexpr size_t W = kVectorFloats;

inline vf load(const float* p) {
  vf v;
  std::memcpy(&v, p, sizeof v);
  return v;
}
inline vf load_partial(const float* p, size_t count, float fill) {
  vf v = splat(fill);
  std::memcpy(&v, p, count * sizeof(float));
  return v;
}
inline void store(float* p, vf v) { std::memcpy(p, &v, sizeof v); }
inline void store_partial(float* p, vf v, size_t count) { std::memcpy(p, &v, count * sizeof(float)); }

inline vf vmax(vf a, vf b) { return a > b ? a : b; }
inline float hsum(vf v) {
  float s = 0.0f;
  for (size_t i = 0; i < W; ++i) s += v[i];
  return s;
}
inline float hmax(vf v) {
  float m = v[0];
  for (size_t i = 1; i < W; ++i) m = v[i] > m ? v[i] : m;
  return m;
}

// Calls f(vector) on x[0, n) and stores the result to y, the tail as a partial vector.
template <class F>
inline void map_vectors(size_t n, const float* x, float* y, F&& f) {
  size_t i = 0;
  for (; i + W <= n; i += W) store(y + i, f(load(x + i)));
  if (i < n) store_partial(y + i, f(load_partial(x + i, n - i, 0.0f)), n - i);
}

template <BinaryOp Op>
inline float apply(float a, float b) {
  if constexpr (Op == BinaryOp::add) return a + b;
  else if constexpr (Op == BinaryOp::sub) return a - b;
  else if constexpr (Op == BinaryOp::mul) return a * b;
  else return a / b;
}

// Plain loops: the ISA flags of the including file let the compiler vectorise them.
template <BinaryOp Op>
void binary_loop(BinaryForm form, size_t n, const float* __restrict a, const float* __restrict b, float* y) {
  switch (form) {
    case BinaryForm::vector_vector:
      for (size_t i = 0; i < n; ++i) y[i] = apply<Op>(a[i], b[i]);
      break;
    case BinaryForm::vector_scalar: {
      const float v = b[0];
      for (size_t i = 0; i < n; ++i) y[i] = apply<Op>(a[i], v);
      break;
    }
    case BinaryForm::scalar_vector: {
      const float u = a[0];
      for (size_t i = 0; i < n; ++i) y[i] = apply<Op>(u, b[i]);
      break;
    }
  }
}

void vmath_binary(BinaryOp op, BinaryForm form, size_t n, const float* a, const float* b, float* y) {
  switch (op) {
    case BinaryOp::add: return binary_loop<BinaryOp::add>(form, n, a, b, y);
    case BinaryOp::sub: return binary_loop<BinaryOp::sub>(form, n, a, b, y);
    case BinaryOp::mul: return binary_loop<BinaryOp::mul>(form, n, a, b, y);
    case BinaryOp::div: return binary_loop<BinaryOp::div>(form, n, a, b, y);
  }
}

void vmath_unary(UnaryOp op, size_t n, const float* x, float* y) {
  switch (op) {
    case UnaryOp::erf: return map_vectors(n, x, y, verf);
    case UnaryOp::gelu_erf: return map_vectors(n, x, y, vgelu_erf);
    case UnaryOp::tanh: return map_vectors(n, x, y, vtanh);
    case UnaryOp::sigmoid: return map_vectors(n, x, y, vsigmoid);
  }
}

float row_max(size_t n, const float* x) {
  const float ninf = -std::numeric_limits<float>::infinity();
  vf m = splat(ninf);
  size_t i = 0;
  for (; i + W <= n; i += W) m = vmax(m, load(x + i));
  if (i < n) m = vmax(m, load_partial(x + i, n - i, ninf));
  return hmax(m);
}

// y = e^(x - peak) / sum over [0, n): the exps, their sum in W lanes (a partial last
// vector's extra lanes are e^-inf = 0), then one multiply by the sum's inverse.
void exp_normalize(size_t n, float peak_value, const float* x, float* y) {
  const vf peak = splat(peak_value);
  vf sum = splat(0.0f);
  size_t i = 0;
  for (; i + W <= n; i += W) {
    const vf e = vexp(load(x + i) - peak);
    sum += e;
    store(y + i, e);
  }
  if (i < n) {
    const vf e = vexp(load_partial(x + i, n - i, -std::numeric_limits<float>::infinity()) - peak);
    sum += e;  // the fill lanes are e^-inf = 0
    store_partial(y + i, e, n - i);
  }
  const vf inv = splat(1.0f / hsum(sum));
  map_vectors(n, y, y, [&](vf v) { return v * inv; });
}

void vmath_softmax(size_t n, const float* x, float* y) {
  if (n == 0) return;
  exp_normalize(n, row_max(n, x), x, y);
}

// Where the tail is below the live elements' max by more than vexp's cut-off, its exps are
// exactly 0: they change neither the max nor the sum (each lane adds 0, the same lanes as in
// the whole row), and its outputs are 0. So the live part alone gives the whole row's bits.
void vmath_softmax_tail(size_t n, size_t live, float tail, const float* x, float* y) {
  if (live > 0 && live < n) {
    const float peak = row_max(live, x);
    if (tail < peak && tail - peak < kExpCutoff) {  // false for a NaN
      exp_normalize(live, peak, x, y);
      std::fill(y + live, y + n, 0.0f);
      return;
    }
  }
  vmath_softmax(n, x, y);
}

void vmath_layernorm(size_t n, const float* x, const float* scale, const float* bias, float epsilon, float* y) {
  if (n == 0) return;
  // Two passes (mean, then squared deviations), each with two accumulators to shorten the
  // dependency chain; the tail is zero-filled, and its deviations are masked out.
  vf s0 = splat(0.0f), s1 = splat(0.0f);
  size_t i = 0;
  for (; i + 2 * W <= n; i += 2 * W) s0 += load(x + i), s1 += load(x + i + W);
  for (; i + W <= n; i += W) s0 += load(x + i);
  if (i < n) s1 += load_partial(x + i, n - i, 0.0f);
  const float mean = hsum(s0 + s1) / static_cast<float>(n);
  const vf vmean = splat(mean);
  vf q0 = splat(0.0f), q1 = splat(0.0f);
  i = 0;
  for (; i + 2 * W <= n; i += 2 * W) {
    const vf d0 = load(x + i) - vmean, d1 = load(x + i + W) - vmean;
    q0 += d0 * d0, q1 += d1 * d1;
  }
  for (; i + W <= n; i += W) {
    const vf d = load(x + i) - vmean;
    q0 += d * d;
  }
  if (i < n) {
    const vf d = load_partial(x + i, n - i, mean) - vmean;  // fill with the mean: deviation 0
    q1 += d * d;
  }
  const float var = hsum(q0 + q1) / static_cast<float>(n);
  const vf inv_std = splat(1.0f / __builtin_sqrtf(var + epsilon));
  i = 0;
  for (; i + W <= n; i += W) {
    vf v = (load(x + i) - vmean) * inv_std * load(scale + i);
    if (bias) v += load(bias + i);
    store(y + i, v);
  }
  if (i < n) {
    const size_t rest = n - i;
    vf v = (load_partial(x + i, rest, 0.0f) - vmean) * inv_std * load_partial(scale + i, rest, 0.0f);
    if (bias) v += load_partial(bias + i, rest, 0.0f);
    store_partial(y + i, v, rest);
  }
}

// Whole vectors: the keep bytes widened to lanes and compared with 0, then a select; the
// tail element by element. Same result as the scalar loop for every element.
void vmath_fill_unkept(size_t n, const bool* keep, float fill, float* y) {
  typedef uint8_t vb __attribute__((vector_size(W)));
  const vf vfill = splat(fill);
  size_t i = 0;
  for (; i + W <= n; i += W) {
    vb k;
    std::memcpy(&k, keep + i, sizeof k);
    const vi kept = __builtin_convertvector(k, vi) != 0;
    store(y + i, kept ? load(y + i) : vfill);
  }
  for (; i < n; ++i)
    if (!keep[i]) y[i] = fill;
}

}  // namespace
}  // namespace grove::kernels
