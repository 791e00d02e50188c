#pragma once
// The Winograd F(4x4, 3x3) transforms, included by winograd_f4x3_{scalar,avx2,avx512}.cpp,
// each compiled with its own ISA flags. Written once over a value type T: a GCC vector of
// W floats for the main loop, float for the last blocks. Those files are compiled with
// -ffp-contract=off, so both forms do the same IEEE multiplies and adds in the same order
// and a block gets the same bits whether it falls in a vector or in the remainder (that is,
// whatever tile it belongs to). Internal linkage (anonymous namespace), as in dwconv_impl.h.
//
// Matrices (interpolation points 0, 1, -1, 2, -2, infinity):
//   B^T = [4  0 -5  0 1 0]    A^T = [1 1  1 1  1 0]
//         [0 -4 -4  1 1 0]          [0 1 -1 2 -2 0]
//         [0  4 -4 -1 1 0]          [0 1  1 4  4 0]
//         [0 -2 -1  2 1 0]          [0 1 -1 8 -8 1]
//         [0  2 -1 -2 1 0]
//         [0  4  0 -5 0 1]
#include <cstddef>
#include <cstring>

#include "kernels/winograd_f4x3.h"
#include "kernels/winograd_f4x3_nhwc.h"
#include "kernels/winograd_vec.h"

namespace grove::kernels {
namespace {

// o = B^T d for one column (or row) of 6 values.
template <class T>
inline void winograd_bt(const T (&d)[6], T (&o)[6]) {
  const T four = d[1] * 4.0f, two = d[1] * 2.0f;
  o[0] = d[0] * 4.0f - d[2] * 5.0f + d[4];
  o[1] = d[3] + d[4] - four - d[2] * 4.0f;
  o[2] = d[4] - d[3] + four - d[2] * 4.0f;
  o[3] = d[4] - d[2] + d[3] * 2.0f - two;
  o[4] = d[4] - d[2] + two - d[3] * 2.0f;
  o[5] = d[5] + four - d[3] * 5.0f;
}

// o = A^T m for 6 values.
template <class T>
inline void winograd_at(const T (&m)[6], T (&o)[4]) {
  const T a = m[1] + m[2], b = m[1] - m[2], c = m[3] + m[4], d = m[3] - m[4];
  o[0] = m[0] + a + c;
  o[1] = b + d * 2.0f;
  o[2] = a + c * 4.0f;
  o[3] = b + d * 8.0f + m[5];
}

// Blocks [j, j + lanes) where lanes = sizeof(T) / sizeof(float).
template <class T>
inline void input_transform_step(const float* phases, size_t ps, size_t j, float* const* out) {
  T h[6][6];  // h[r] = B^T applied along patch row r
  for (size_t r = 0; r < 6; ++r) {
    T d[6];
    for (size_t c = 0; c < 6; ++c) d[c] = load_floats<T>(phases + (r * 4 + c % 4) * ps + j + c / 4);
    winograd_bt(d, h[r]);
  }
  for (size_t k = 0; k < 6; ++k) {
    const T col[6] = {h[0][k], h[1][k], h[2][k], h[3][k], h[4][k], h[5][k]};
    T o[6];
    winograd_bt(col, o);
    for (size_t i = 0; i < 6; ++i) store_floats(out[i * 6 + k] + j, o[i]);
  }
}

template <class T>
inline void output_transform_step(const float* m, size_t ms, size_t j, float* out, size_t os) {
  T s[4][6];  // s[r][k] = A^T applied down column k
  for (size_t k = 0; k < 6; ++k) {
    T col[6], o[4];
    for (size_t i = 0; i < 6; ++i) col[i] = load_floats<T>(m + (i * 6 + k) * ms + j);
    winograd_at(col, o);
    for (size_t r = 0; r < 4; ++r) s[r][k] = o[r];
  }
  for (size_t r = 0; r < 4; ++r) {
    T o[4];
    winograd_at(s[r], o);
    for (size_t c = 0; c < 4; ++c) store_floats(out + (r * 4 + c) * os + j, o[c]);
  }
}

template <class V>
inline void input_transform(const float* phases, size_t ps, size_t blocks, float* const* out) {
  in_vectors<V>(blocks, [&](auto t, size_t j) { input_transform_step<decltype(t)>(phases, ps, j, out); });
}

template <class V>
inline void output_transform(const float* m, size_t ms, size_t blocks, float* out, size_t os) {
  in_vectors<V>(blocks, [&](auto t, size_t j) { output_transform_step<decltype(t)>(m, ms, j, out, os); });
}

// dst[c * dst_stride + j] = src[4 j + c]: one input row split into its 4 column phases.
inline void deinterleave4(const float* __restrict src, size_t blocks, float* __restrict dst, size_t dst_stride) {
  float* __restrict d0 = dst;
  float* __restrict d1 = dst + dst_stride;
  float* __restrict d2 = dst + 2 * dst_stride;
  float* __restrict d3 = dst + 3 * dst_stride;
  for (size_t j = 0; j < blocks; ++j) {
    d0[j] = src[4 * j];
    d1[j] = src[4 * j + 1];
    d2[j] = src[4 * j + 2];
    d3[j] = src[4 * j + 3];
  }
}

// dst[4 j + c] = src[c * src_stride + j]: 4 output phases joined into one output row.
inline void interleave4(const float* __restrict src, size_t src_stride, size_t blocks, float* __restrict dst) {
  const float* __restrict s0 = src;
  const float* __restrict s1 = src + src_stride;
  const float* __restrict s2 = src + 2 * src_stride;
  const float* __restrict s3 = src + 3 * src_stride;
  for (size_t j = 0; j < blocks; ++j) {
    dst[4 * j] = s0[j];
    dst[4 * j + 1] = s1[j];
    dst[4 * j + 2] = s2[j];
    dst[4 * j + 3] = s3[j];
  }
}

// Channels-last (winograd_f4x3_nhwc.h): the same transforms over channels [c, c + lanes) of
// the 36 patch pixels, row by row and then down the columns, in the order the NCHW form uses.
template <class T>
inline void nhwc_input_step(const float* const* patch, size_t c, float* const* out) {
  T h[6][6];
  for (size_t r = 0; r < 6; ++r) {
    T d[6];
    for (size_t k = 0; k < 6; ++k) d[k] = load_floats<T>(patch[r * 6 + k] + c);
    winograd_bt(d, h[r]);
  }
  for (size_t k = 0; k < 6; ++k) {
    const T col[6] = {h[0][k], h[1][k], h[2][k], h[3][k], h[4][k], h[5][k]};
    T o[6];
    winograd_bt(col, o);
    for (size_t i = 0; i < 6; ++i) store_floats(out[i * 6 + k] + c, o[i]);
  }
}

template <class T>
inline void nhwc_output_step(const float* const* m, size_t c, const float* bias, const float* const* residual,
                             const ActivationParams& act, float* const* out) {
  T s[4][6];
  for (size_t k = 0; k < 6; ++k) {
    T col[6], o[4];
    for (size_t i = 0; i < 6; ++i) col[i] = load_floats<T>(m[i * 6 + k] + c);
    winograd_at(col, o);
    for (size_t r = 0; r < 4; ++r) s[r][k] = o[r];
  }
  const T b = bias ? load_floats<T>(bias + c) : splat_floats<T>(0.0f);
  for (size_t r = 0; r < 4; ++r) {
    T o[4];
    winograd_at(s[r], o);
    for (size_t q = 0; q < 4; ++q)
      if (float* to = out[r * 4 + q]) store_nhwc_output(o[q], b, residual ? residual[r * 4 + q] : nullptr, c, act, to);
  }
}

template <class V>
inline void nhwc_input_transform(const float* const* patch, size_t channels, float* const* out) {
  in_vectors<V>(channels, [&](auto t, size_t c) { nhwc_input_step<decltype(t)>(patch, c, out); });
}

template <class V>
inline void nhwc_output_transform(const float* const* m, size_t channels, const float* bias,
                                  const float* const* residual, const ActivationParams& act, float* const* out) {
  in_vectors<V>(channels, [&](auto t, size_t c) { nhwc_output_step<decltype(t)>(m, c, bias, residual, act, out); });
}

}  // namespace
}  // namespace grove::kernels

// The entry points of one ISA's build, over the vector type Vec that file defines.
#define GROVE_WINOGRAD_F4X3_ENTRY_POINTS(isa)                                                                    \
  void f32_winograd_f4x3_input_##isa(const float* phases, size_t phase_stride, size_t blocks, float* const* out) {  \
    input_transform<Vec>(phases, phase_stride, blocks, out);                                                   \
  }                                                                                                            \
  void f32_winograd_f4x3_output_##isa(const float* m, size_t m_stride, size_t blocks, float* out, size_t stride) { \
    output_transform<Vec>(m, m_stride, blocks, out, stride);                                                   \
  }                                                                                                            \
  void f32_winograd_deinterleave4_##isa(const float* src, size_t blocks, float* dst, size_t dst_stride) {       \
    deinterleave4(src, blocks, dst, dst_stride);                                                               \
  }                                                                                                            \
  void f32_winograd_interleave4_##isa(const float* src, size_t src_stride, size_t blocks, float* dst) {         \
    interleave4(src, src_stride, blocks, dst);                                                                 \
  }                                                                                                             \
  void f32_winograd_f4x3_nhwc_input_##isa(const float* const* patch, size_t channels, float* const* out) {      \
    nhwc_input_transform<Vec>(patch, channels, out);                                                            \
  }                                                                                                             \
  void f32_winograd_f4x3_nhwc_output_##isa(const float* const* m, size_t channels, const float* bias,           \
                                           const float* const* residual, const ActivationParams& act,           \
                                           float* const* out) {                                                 \
    nhwc_output_transform<Vec>(m, channels, bias, residual, act, out);                                          \
  }
