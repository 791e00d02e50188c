#pragma once
// The loops of attention_rows.h, written once and compiled per ISA by
// attention_rows_{scalar,avx2,avx512}.cpp (built with -ffp-contract=off, so no build fuses a
// multiply into an add the others round separately). Each addition is of independent lanes
// or columns, so the compiler vectorises them without changing any sum's order.
#include <cstddef>

#include "kernels/attention_rows.h"

namespace grove::kernels {
namespace {

constexpr size_t kLanes = 16;
// Columns of out kept in registers across the keys (four AVX-512 vectors).
constexpr size_t kColumns = 64;

inline void key_scores_impl(const float* q, const float* k, size_t row_stride, size_t keys, size_t dim, float* scores) {
  const size_t whole = dim / kLanes * kLanes;
  for (size_t t = 0; t < keys; ++t) {
    const float* row = k + t * row_stride;
    float lane[kLanes] = {};
    for (size_t d = 0; d < whole; d += kLanes)
      for (size_t j = 0; j < kLanes; ++j) lane[j] += q[d + j] * row[d + j];
    for (size_t d = whole; d < dim; ++d) lane[d % kLanes] += q[d] * row[d];
    for (size_t half = kLanes / 2; half > 0; half /= 2)
      for (size_t j = 0; j < half; ++j) lane[j] += lane[j + half];
    scores[t] = lane[0];
  }
}

inline void weighted_rows_impl(const float* p, const float* v, size_t row_stride, size_t keys, size_t dim, float* out,
                               bool add_to_out) {
  size_t j0 = 0;
  for (; j0 + kColumns <= dim; j0 += kColumns) {
    float acc[kColumns];
    for (size_t j = 0; j < kColumns; ++j) acc[j] = add_to_out ? out[j0 + j] : 0.0f;
    for (size_t t = 0; t < keys; ++t) {
      const float* row = v + t * row_stride + j0;
      for (size_t j = 0; j < kColumns; ++j) acc[j] += p[t] * row[j];
    }
    for (size_t j = 0; j < kColumns; ++j) out[j0 + j] = acc[j];
  }
  if (j0 == dim) return;
  if (!add_to_out)
    for (size_t j = j0; j < dim; ++j) out[j] = 0;
  for (size_t t = 0; t < keys; ++t) {
    const float* row = v + t * row_stride;
    for (size_t j = j0; j < dim; ++j) out[j] += p[t] * row[j];
  }
}

}  // namespace
}  // namespace grove::kernels
