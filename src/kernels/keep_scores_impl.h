#pragma once
// keep_means_nhwc's loops (keep_scores.h), written once and compiled by keep_scores_scalar.cpp
// and keep_scores_avx2.cpp: every addition is of independent lanes, so the compiler vectorises
// them without changing any sum's order. Included by those files only (keep_scores_avx512.cpp
// keeps its sums in registers with loops of its own, in the same order).
#include <cstddef>

#include "kernels/keep_scores.h"

namespace grove::kernels {
namespace {

inline void keep_means_nhwc_impl(const float* x, size_t channels, size_t plane, double* lanes, double* channel_means,
                                double* position_means) {
  const size_t whole = channels / 8 * 8;
  if (channel_means)
    for (size_t i = 0; i < 8 * channels; ++i) lanes[i] = 0.0;
  for (size_t p = 0; p < plane; ++p) {
    const float* pixel = x + p * channels;
    if (channel_means) {
      double* lane = lanes + (p % 8) * channels;
      for (size_t c = 0; c < channels; ++c) lane[c] += double(pixel[c]);
    }
    if (!position_means) continue;
    double sum[8] = {};
    for (size_t c = 0; c < whole; c += 8)
      for (size_t j = 0; j < 8; ++j) sum[j] += double(pixel[c + j]);
    for (size_t c = whole; c < channels; ++c) sum[c % 8] += double(pixel[c]);
    position_means[p] = combine_lanes(sum) / double(channels);
  }
  if (!channel_means) return;
  for (size_t c = 0; c < channels; ++c) {
    const double* l = lanes + c;
    channel_means[c] = (((l[0] + l[channels]) + (l[2 * channels] + l[3 * channels])) +
                        ((l[4 * channels] + l[5 * channels]) + (l[6 * channels] + l[7 * channels]))) /
                       double(plane);
  }
}

}  // namespace
}  // namespace grove::kernels
