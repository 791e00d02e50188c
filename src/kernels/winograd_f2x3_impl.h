#pragma once
// The Winograd F(2x2, 3x3) channels-last transforms, included by
// winograd_f2x3_{scalar,avx2,avx512}.cpp, each compiled with its own ISA flags and, as the
// F(4x4, 3x3) ones (winograd_f4x3_impl.h), without FMA contraction: the vector form and the
// float form for the last channels round identically.
//
// Matrices (interpolation points 0, 1, -1, infinity):
//   B^T = [1  0 -1  0]    A^T = [1 1  1  0]
//         [0  1  1  0]          [0 1 -1 -1]
//         [0 -1  1  0]
//         [0  1  0 -1]
#include <cstddef>
#include <cstring>

#include "kernels/winograd_f2x3_nhwc.h"
#include "kernels/winograd_vec.h"

namespace grove::kernels {
namespace {

template <class T>
inline void f2x3_bt(const T (&d)[4], T (&o)[4]) {
  o[0] = d[0] - d[2];
  o[1] = d[1] + d[2];
  o[2] = d[2] - d[1];
  o[3] = d[1] - d[3];
}

template <class T>
inline void f2x3_at(const T (&m)[4], T (&o)[2]) {
  o[0] = m[0] + m[1] + m[2];
  o[1] = m[1] - m[2] - m[3];
}

// Channels [c, c + lanes) of the 16 patch pixels: B^T along each row, then down the columns.
template <class T>
inline void f2x3_input_step(const float* const* patch, size_t c, float* const* out) {
  T h[4][4];
  for (size_t r = 0; r < 4; ++r) {
    T d[4];
    for (size_t k = 0; k < 4; ++k) d[k] = load_floats<T>(patch[r * 4 + k] + c);
    f2x3_bt(d, h[r]);
  }
  for (size_t k = 0; k < 4; ++k) {
    const T col[4] = {h[0][k], h[1][k], h[2][k], h[3][k]};
    T o[4];
    f2x3_bt(col, o);
    for (size_t i = 0; i < 4; ++i) store_floats(out[i * 4 + k] + c, o[i]);
  }
}

template <class T>
inline void f2x3_output_step(const float* const* m, size_t c, const float* bias, const float* const* residual,
                             const ActivationParams& act, float* const* out) {
  T s[2][4];  // s[r][k] = A^T applied down column k
  for (size_t k = 0; k < 4; ++k) {
    T col[4], o[2];
    for (size_t i = 0; i < 4; ++i) col[i] = load_floats<T>(m[i * 4 + k] + c);
    f2x3_at(col, o);
    s[0][k] = o[0];
    s[1][k] = o[1];
  }
  const T b = bias ? load_floats<T>(bias + c) : splat_floats<T>(0.0f);
  for (size_t r = 0; r < 2; ++r) {
    T o[2];
    f2x3_at(s[r], o);
    for (size_t q = 0; q < 2; ++q)
      if (float* to = out[r * 2 + q]) store_nhwc_output(o[q], b, residual ? residual[r * 2 + q] : nullptr, c, act, to);
  }
}

template <class V>
inline void f2x3_input_transform(const float* const* patch, size_t channels, float* const* out) {
  in_vectors<V>(channels, [&](auto t, size_t c) { f2x3_input_step<decltype(t)>(patch, c, out); });
}

template <class V>
inline void f2x3_output_transform(const float* const* m, size_t channels, const float* bias,
                                  const float* const* residual, const ActivationParams& act, float* const* out) {
  in_vectors<V>(channels, [&](auto t, size_t c) { f2x3_output_step<decltype(t)>(m, c, bias, residual, act, out); });
}

}  // namespace
}  // namespace grove::kernels

// The entry points of one ISA's build, over the vector type Vec that file defines.
#define GROVE_WINOGRAD_F2X3_ENTRY_POINTS(isa)                                                                \
  void f32_winograd_f2x3_nhwc_input_##isa(const float* const* patch, size_t channels, float* const* out) {  \
    f2x3_input_transform<Vec>(patch, channels, out);                                                        \
  }                                                                                                         \
  void f32_winograd_f2x3_nhwc_output_##isa(const float* const* m, size_t channels, const float* bias,       \
                                           const float* const* residual, const ActivationParams& act,       \
                                           float* const* out) {                                             \
    f2x3_output_transform<Vec>(m, channels, bias, residual, act, out);                                      \
  }
