#pragma once
// The sums Antidote's decision ranks a feature map's channels and positions by
// (ops/pruning/feature_pruning.h), from one channels-last image x[plane][channels], in one
// fixed order whatever the ISA, so every build and layout keeps the same channels and
// positions. In double:
//  - channel c: element (p, c) goes to lane p % 8 (lanes[(p % 8) * channels + c]), each lane
//    adding in increasing p; the channel's sum is combine_lanes of its 8 lanes;
//  - position p: element (p, c) goes to lane c % 8, each lane adding in increasing c;
//    position p's sum is combine_lanes of those 8 lanes.
// The vector builds add eight lanes at once; the order of every addition stays the same.
#include <cstddef>

#include "kernels/isa.h"

namespace grove::kernels {

// The 8 lanes of a sum, pairwise: ((l0 + l1) + (l2 + l3)) + ((l4 + l5) + (l6 + l7)).
inline double combine_lanes(const double* l) { return ((l[0] + l[1]) + (l[2] + l[3])) + ((l[4] + l[5]) + (l[6] + l[7])); }

// The means the decision ranks, from the sums above: channel_means[c] = channel c's sum /
// plane, position_means[p] = position p's sum / channels (IEEE division rounds the same in every
// build). Either output may be null: those sums are skipped (a decision that keeps every
// channel, or every position, needs no scores for them). lanes: 8 * channels doubles of
// scratch for the channel lanes, needed with channel_means.
void keep_means_nhwc(const float* x, size_t channels, size_t plane, double* lanes, double* channel_means,
                     double* position_means, Isa isa = active_isa());

void keep_means_nhwc_scalar(const float* x, size_t channels, size_t plane, double* lanes, double* channel_means,
                            double* position_means);
void keep_means_nhwc_avx2(const float* x, size_t channels, size_t plane, double* lanes, double* channel_means,
                          double* position_means);
void keep_means_nhwc_avx512(const float* x, size_t channels, size_t plane, double* lanes, double* channel_means,
                            double* position_means);

}  // namespace grove::kernels
