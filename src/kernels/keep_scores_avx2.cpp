// keep_means_nhwc built for avx2 (keep_scores_impl.h has the loops).
#include "kernels/keep_scores_impl.h"

namespace grove::kernels {

void keep_means_nhwc_avx2(const float* x, size_t channels, size_t plane, double* lanes, double* channel_means,
                          double* position_means) {
  keep_means_nhwc_impl(x, channels, plane, lanes, channel_means, position_means);
}

}  // namespace grove::kernels
