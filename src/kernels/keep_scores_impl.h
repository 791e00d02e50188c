#pragma once
// keep_sums_nhwc's loops (keep_scores.h), written once and compiled by keep_scores_scalar.cpp
// and keep_scores_avx2.cpp: every addition is of independent lanes, so the compiler vectorises
// them without changing any sum's order. Included by those files only (keep_scores_avx512.cpp
// keeps its sums in registers with loops of its own, in the same order).
#include <cstddef>

#include "kernels/keep_scores.h"

namespace grove::kernels {
namespace {

inline void keep_sums_nhwc_impl(const float* x, size_t channels, size_t plane, double* lanes, double* position_sums) {
  const size_t whole = channels / 8 * 8;
  for (size_t p = 0; p < plane; ++p) {
    const float* pixel = x + p * channels;
    if (lanes) {
      double* lane = lanes + (p % 8) * channels;
      for (size_t c = 0; c < channels; ++c) lane[c] += double(pixel[c]);
    }
    if (!position_sums) continue;
    double sum[8] = {};
    for (size_t c = 0; c < whole; c += 8)
      for (size_t j = 0; j < 8; ++j) sum[j] += double(pixel[c + j]);
    for (size_t c = whole; c < channels; ++c) sum[c % 8] += double(pixel[c]);
    position_sums[p] = combine_lanes(sum);
  }
}

}  // namespace
}  // namespace grove::kernels
